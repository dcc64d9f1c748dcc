package hostfile

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseRankfile(t *testing.T) {
	in := `# ranks
rank 0=aa slot=1:0-2
rank 1=bb slot=0:0,1      # package 0, cores 0 and 1
rank 2 = cc slot = 1-2
rank 3=+n1 slot=0:1;1:2
rank 5=10.0.0.1 slot=0,2-3

rank 4=[::1] slot=3,0
rank 6=fe80::1 slot=1:3;0:2
`
	got, err := ParseRankfile("rf", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []RankEntry{
		{Rank: 0, Host: "aa", Node: -1, Slot: Slot{Cores: []PackageCores{{1, []int{0, 1, 2}}}}},
		{Rank: 1, Host: "bb", Node: -1, Slot: Slot{Cores: []PackageCores{{0, []int{0, 1}}}}},
		{Rank: 2, Host: "cc", Node: -1, Slot: Slot{CPUs: []int{1, 2}}},
		{Rank: 3, Node: 1, Slot: Slot{Cores: []PackageCores{{0, []int{1}}, {1, []int{2}}}}},
		{Rank: 4, Host: "::1", Node: -1, Slot: Slot{CPUs: []int{0, 3}}},
		{Rank: 5, Host: "10.0.0.1", Node: -1, Slot: Slot{CPUs: []int{0, 2, 3}}},
		{Rank: 6, Host: "fe80::1", Node: -1, Slot: Slot{Cores: []PackageCores{{1, []int{3}}, {0, []int{2}}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	var lines []string
	for _, e := range got {
		lines = append(lines, e.String())
	}
	wantLines := []string{
		"rank 0=aa slot=1:0-2",
		"rank 1=bb slot=0:0-1",
		"rank 2=cc slot=1-2",
		"rank 3=+n1 slot=0:1;1:2",
		"rank 4=[::1] slot=0,3",
		"rank 5=10.0.0.1 slot=0,2-3",
		"rank 6=[fe80::1] slot=1:3;0:2",
	}
	if !reflect.DeepEqual(lines, wantLines) {
		t.Fatalf("String:\n got  %q\n want %q", lines, wantLines)
	}
	again, err := ParseRankfile("rf", strings.NewReader(strings.Join(lines, "\n")))
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
	if es, err := ParseRankfile("rf", strings.NewReader("# nothing\n\n")); err != nil || len(es) != 0 {
		t.Fatalf("empty file: %v, %v", es, err)
	}
}

// manyCPUs is a rankfile of n lines each listing every processor.
func manyCPUs(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "rank %d=a slot=0-%d\n", i, maxCPU)
	}
	return b.String()
}

func TestParseRankfileErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"rank 0=a slot=0\nrank 1=b slot=1\nrank 0=c slot=2", "rf:3: rank 0 given twice (first on line 1)"},
		{"host a slot=0", `rf:1: host: expected "rank N=host slot=S"`},
		{"RANK 0=a slot=0", `rf:1: RANK: expected "rank N=host slot=S"`},
		{"rank", `rf:1: rank: expected "rank N=host slot=S"`},
		{"rank 0 a slot=0", "rf:1: 0: expected N=host"},
		{"rank x=a slot=0", "rf:1: x=a: rank not a number"},
		{"rank -1=a slot=0", "rf:1: -1=a: rank not a number"},
		{"rank 99999999999=a slot=0", "rf:1: 99999999999=a: rank too large (at most 2147483647)"},
		{"rank 0= slot=0", "rf:1: 0=slot=0: not a host name or address"},
		{"rank 0=a/b slot=0", "rf:1: 0=a/b: not a host name or address"},
		{"rank 0=[::1 slot=0", "rf:1: 0=[::1: unclosed [ in an IPv6 address"},
		{"rank 0=+e slot=0", "rf:1: 0=+e: only +nN names a node here"},
		{"rank 0=+q slot=0", "rf:1: 0=+q: relative node spec is +nN, +e or +e:N"},
		{"rank 0=a", "rf:1: rank 0: missing slot=S"},
		{"rank 0=a core=1", "rf:1: core=1: expected slot=S"},
		{"rank 0=a slot=1 slot=2", "rf:1: slot=2: slot given twice"},
		{"rank 0=a slot=", "rf:1: slot=: empty slot"},
		{"rank 0=a slot=x", "rf:1: slot=x: x: not a number"},
		{"rank 0=a slot=3-1", "rf:1: slot=3-1: 3-1: range runs backwards"},
		{"rank 0=a slot=0,0", "rf:1: slot=0,0: 0: 0 given twice"},
		{"rank 0=a slot=0-3,2", "rf:1: slot=0-3,2: 2: 2 given twice"},
		{"rank 0=a slot=0,,1", `rf:1: slot=0,,1: "": missing number`},
		{"rank 0=a slot=1;2", "rf:1: slot=1;2: ';' separates package:cores groups"},
		{"rank 0=a slot=0:1;2", "rf:1: slot=0:1;2: 2: expected package:cores"},
		{"rank 0=a slot=0:1;0:2", "rf:1: slot=0:1;0:2: 0:2: package 0 given twice"},
		{"rank 0=a slot=x:1", "rf:1: slot=x:1: x:1: package not a number"},
		{"rank 0=a slot=0:", "rf:1: slot=0:: 0:: empty processor list"},
		{"rank 0=a slot=0:1:2", "rf:1: slot=0:1:2: 0:1:2: 1:2: not a number"},
		{"rank 0=a slot=8192", "rf:1: slot=8192: 8192: too large (at most 8191)"},
		{"rank 0=a slot=0:0-8191;1:0", "rf:1: slot=0:0-8191;1:0: 1:0: 0: more than 8192 processors in one slot"},
		{"rank 0=a slot=0-1 extra", "rf:1: extra: expected slot=S"},
		{"rank 0=a\tslot=\x01", `rf:1: "slot=\x01": "\x01": not a number`},
		{strings.Repeat(" ", maxLine+1), "rf:1: line longer than 1048576 bytes"},
		{manyCPUs(maxRankfileCPUs/(maxCPU+1) + 1), "rf:2049: more than 16777216 processors in the file"},
	}
	for _, tc := range tests {
		_, err := ParseRankfile("rf", strings.NewReader(tc.in))
		if err == nil {
			t.Errorf("%.40q: no error, want %q", tc.in, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("%.40q:\n got  %q\n want %q", tc.in, err.Error(), tc.want)
		}
	}
	if _, err := ParseRankfile("rf", failReader{}); err == nil || err.Error() != "rf:1: disk on fire" {
		t.Errorf("read error: %v", err)
	}
}
