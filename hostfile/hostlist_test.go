package hostfile

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseHostList(t *testing.T) {
	one := func(name string) Entry { return Entry{Name: name, Slots: 1} }
	tests := []struct {
		in   string
		want []Entry
	}{
		{"a", []Entry{one("a")}},
		{"a:4,b,c:*", []Entry{named("a", 4), one("b"), cores("c")}},
		{"a:1", []Entry{named("a", 1)}},
		{"a,a", []Entry{named("a", 2)}},
		{"a:2,b,A:3", []Entry{named("a", 5), one("b")}},
		{" a , b ", []Entry{one("a"), one("b")}},
		{"u@a:2", []Entry{{Name: "a", User: "u", Slots: 2, SlotsGiven: true}}},
		{"u@a,a", []Entry{{Name: "a", User: "u", Slots: 2, SlotsGiven: true}}},
		{"10.1.2.3:2", []Entry{named("10.1.2.3", 2)}},
		{"[::1]:2", []Entry{named("::1", 2)}},
		{"[::1]", []Entry{one("::1")}},
		{"[fe80::1%eth0]:*", []Entry{cores("fe80::1%eth0")}},
		{"::1", []Entry{one("::1")}},
		{"fe80::1,fe80::2", []Entry{one("fe80::1"), one("fe80::2")}},
		{"::1,[0::1]:3", []Entry{named("::1", 4)}},
		{"^a", []Entry{{Name: "a", Exclude: true}}},
		{"a,^b", []Entry{one("a"), {Name: "b", Exclude: true}}},
		{"^[::1]", []Entry{{Name: "::1", Exclude: true}}},
		{"+n0,+n2", []Entry{{Kind: RelNode, Index: 0}, {Kind: RelNode, Index: 2}}},
		{"+N3", []Entry{{Kind: RelNode, Index: 3}}},
		{"+e", []Entry{{Kind: RelEmpty}}},
		{"+e:2,a", []Entry{{Kind: RelEmpty, Count: 2}, one("a")}},
		{"+E:1", []Entry{{Kind: RelEmpty, Count: 1}}},
	}
	for _, tc := range tests {
		got, err := ParseHostList(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\n got  %+v\n want %+v", tc.in, got, tc.want)
			continue
		}
		again, err := ParseHostList(FormatHostList(got))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%q: round trip via %q: %+v, %v", tc.in, FormatHostList(got), again, err)
		}
	}
}

func TestParseHostListErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "--host: no hosts given"},
		{"  ", "--host: no hosts given"},
		{"a,,b", `--host: "": empty host name`},
		{"a,", `--host: "": empty host name`},
		{"a:x", `--host: a:x: slot count x: not a number`},
		{"a:", `--host: a:: slot count "": missing number`},
		{"a:0", `--host: a:0: slot count must be at least 1`},
		{"a:-1", `--host: a:-1: slot count -1: not a number`},
		{"a:2000000", `--host: a:2000000: slot count 2000000: too large (at most 1000000)`},
		{"a:*,a", `--host: a: host a is named twice and one of them has :*`},
		{"a,a:*", `--host: a:*: host a is named twice and one of them has :*`},
		{"u@a,v@a", `--host: v@a: host a was given user u`},
		{"@a", `--host: @a: empty user name`},
		{"a b", `--host: "a b": not a host name or address`},
		{"a/b", `--host: a/b: not a host name or address`},
		{"[::1", `--host: [::1: unclosed [ in an IPv6 address`},
		{"[::1]2", `--host: [::1]2: expected :N or :* after ]`},
		{"[::1]:x", `--host: [::1]:x: slot count x: not a number`},
		{"[host]:2", `--host: [host]:2: not an IPv6 address in brackets`},
		{"fe80::1:2:zz", `--host: fe80::1:2:zz: not a host name or address (write an IPv6 address with slots as [addr]:N)`},
		{"^a:2", `--host: ^a:2: an excluded host takes no slot count`},
		{"^+n0", `--host: ^+n0: a relative node spec cannot be excluded`},
		{"+x", `--host: +x: relative node spec is +nN, +e or +e:N`},
		{"+n", `--host: +n: node index: missing number`},
		{"+nx", `--host: +nx: node index: not a number`},
		{"+e2", `--host: +e2: relative node spec is +nN, +e or +e:N`},
		{"+e:0", `--host: +e:0: empty-node count must be at least 1`},
		{"+e:", `--host: +e:: empty-node count: missing number`},
		{"a\nb", `--host: "a\nb": not a host name or address`},
	}
	for _, tc := range tests {
		_, err := ParseHostList(tc.in)
		if err == nil {
			t.Errorf("%q: no error, want %q", tc.in, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("%q:\n got  %q\n want %q", tc.in, err.Error(), tc.want)
		}
	}
	// slots add up to a bound rather than overflowing
	big := strings.Repeat("a:1000000,", maxTotal/1000000) + "a:1000000"
	if _, err := ParseHostList(big); err == nil || !strings.Contains(err.Error(), "more than 1073741824 slots in total") {
		t.Errorf("huge sum: %v", err)
	}
}

func TestSelect(t *testing.T) {
	base := []Entry{
		{Name: "n0", Slots: 4, SlotsGiven: true, User: "u", Port: 22},
		cores("n1"),
		named("n2.example", 2),
		named("10.0.0.3", 1),
		{Name: "z", Exclude: true}, // the base file's own exclusion: ignored
	}
	hl := func(s string) []Entry {
		t.Helper()
		es, err := ParseHostList(s)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	tests := []struct {
		sel  string
		want []Entry
	}{
		{"n1,n0", []Entry{cores("n1"), base[0]}},
		{"N0", []Entry{base[0]}},
		{"n0:2", []Entry{{Name: "n0", Slots: 2, SlotsGiven: true, User: "u", Port: 22}}},
		{"n0:4", []Entry{base[0]}},
		{"n1:3", []Entry{named("n1", 3)}},
		{"n1:*", []Entry{cores("n1")}},
		{"n2", []Entry{base[2]}}, // short name finds the qualified one
		{"n2.example:1", []Entry{named("n2.example", 1)}},
		{"10.0.0.3", []Entry{base[3]}},
		{"+n0,+n2", []Entry{base[0], base[2]}},
		{"+n1,n1", []Entry{cores("n1")}}, // once, however often selected
		{"+e", []Entry{base[0], cores("n1"), base[2], base[3]}},
		{"+e:2", []Entry{base[0], cores("n1")}},
		{"+e:2,n0", []Entry{cores("n1"), base[2], base[0]}}, // +e skips hosts named later
		{"n2,+e:1", []Entry{base[2], base[0]}},
		{"^n1", []Entry{base[0], base[2], base[3]}},
		{"^n1,^10.0.0.3", []Entry{base[0], base[2]}},
		{"n0,n1,^n1", []Entry{base[0]}},
		{"+e,^n0", []Entry{cores("n1"), base[2], base[3]}},
	}
	for _, tc := range tests {
		got, err := Select(base, hl(tc.sel))
		if err != nil {
			t.Errorf("%q: %v", tc.sel, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\n got  %+v\n want %+v", tc.sel, got, tc.want)
		}
	}

	errs := []struct{ sel, want string }{
		{"n0,n9", "host n9 is not in the allocation"},
		{"z", "host z is not in the allocation"},
		{"n2.other", "host n2.other is not in the allocation"},
		{"+n4", "+n4: the allocation has 4 nodes (+n counts from 0)"},
		{"+e:5", "+e:5: only 4 empty nodes left"},
		{"n0,+e:4", "+e:4: only 3 empty nodes left"},
		{"n0:5", "n0:5: the allocation gives host n0 only 4 slots"},
		{"n0,n0,n0,n0,n0", "n0:5: the allocation gives host n0 only 4 slots"},
	}
	for _, tc := range errs {
		_, err := Select(base, hl(tc.sel))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: got %v, want %q", tc.sel, err, tc.want)
		}
	}
	if _, err := Select([]Entry{{Kind: RelNode}}, hl("a")); err == nil || err.Error() != "+n0: a relative node spec cannot be selected from" {
		t.Errorf("relative base: %v", err)
	}
}

// A hostfile given inside a resource-manager job filters that allocation,
// its exclusions included.
// A user or port given by either list holds for the host selected; two
// that differ are an error.
func TestSelectLogins(t *testing.T) {
	base, err := ParseHostfile("hf", strings.NewReader("n0 user=u port=2222\nn1\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ sel, want, err string }{
		{"n0,n1", "u@n0 port=2222,n1", ""},
		{"u@n0,v@n1:2", "u@n0 port=2222,v@n1 slots=2", ""},
		{"x@n0", "", "host n0 is given user u and user x"},
	} {
		sel, err := ParseHostList(tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Select(base, sel)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("Select(%q): %v, want %q", tc.sel, err, tc.err)
			}
			continue
		}
		var s []string
		for _, e := range got {
			s = append(s, e.String())
		}
		if err != nil || strings.Join(s, ",") != tc.want {
			t.Errorf("Select(%q) = %q, %v; want %q", tc.sel, s, err, tc.want)
		}
	}
}

func TestSelectHostfileFromAllocation(t *testing.T) {
	rm := []Entry{named("node01", 2), named("node02", 2), named("node03", 2)}
	hf, err := ParseHostfile("hf", strings.NewReader("^node02\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Select(rm, hf)
	if err != nil || !reflect.DeepEqual(got, []Entry{rm[0], rm[2]}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	hf, err = ParseHostfile("hf", strings.NewReader("node03.cluster slots=1\n+n0\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err = Select(rm, hf)
	if err != nil || !reflect.DeepEqual(got, []Entry{named("node03", 1), rm[0]}) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

// Union: lists that describe the same machines name a host once, with the
// most slots any gives; a user or port given twice must agree.
func TestUnion(t *testing.T) {
	a := []Entry{named("n0", 2), {Name: "n1", Slots: 4, SlotsGiven: true, MaxSlots: 4, User: "u"}, {Kind: RelNode, Index: 3}}
	b := []Entry{named("N0", 3), {Name: "n1", Slots: 8, SlotsGiven: true, Port: 2222}, named("n2", 1), {Name: "x", Exclude: true}}
	got, err := Union(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{named("n0", 3), {Name: "n1", Slots: 8, SlotsGiven: true, MaxSlots: 8, User: "u", Port: 2222},
		{Kind: RelNode, Index: 3}, named("n2", 1), {Name: "x", Exclude: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Union:\n got %+v\nwant %+v", got, want)
	}
	if got, err := Union([]Entry{cores("n0"), cores("n1")}, []Entry{named("n0", 2), cores("n1")}); err != nil || !reflect.DeepEqual(got, []Entry{named("n0", 2), cores("n1")}) {
		t.Errorf("slots from cores: %+v %v", got, err)
	}
	for _, bad := range [][]Entry{{{Name: "n1", Slots: 1, User: "v"}}, {{Name: "n1", Slots: 1, Port: 23}}} {
		if _, err := Union([]Entry{{Name: "n1", Slots: 1, User: "u", Port: 22}}, bad); err == nil || !strings.Contains(err.Error(), `host n1 is given`) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
