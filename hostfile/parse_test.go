package hostfile

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func named(name string, slots int) Entry {
	return Entry{Name: name, Slots: slots, SlotsGiven: true}
}

func cores(name string) Entry {
	return Entry{Name: name, SlotsFromCores: true}
}

func TestParseHostfile(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Entry
	}{
		{"empty", "", []Entry{}},
		{"blank and comments", "\n   \n# all comment\n\t# indented comment\n", []Entry{}},
		{"slots", "a slots=4\n", []Entry{named("a", 4)}},
		{"Hydra's host:N", "a:4\nbob@b:2 port=22\nfe80::1\n", []Entry{named("a", 4),
			{Name: "b", User: "bob", Slots: 2, SlotsGiven: true, Port: 22}, cores("fe80::1")}},
		{"no slots is cores", "a\n", []Entry{cores("a")}},
		{"slots=0", "a slots=0\n", []Entry{named("a", 0)}},
		{"count synonym", "a count=3", []Entry{named("a", 3)}},
		{"cpu synonym", "a cpu=5", []Entry{named("a", 5)}},
		{"keywords any case", "a SLOTS=2 Max_Slots=3", []Entry{{Name: "a", Slots: 2, SlotsGiven: true, MaxSlots: 3}}},
		{"max_slots", "a slots=2 max_slots=4", []Entry{{Name: "a", Slots: 2, SlotsGiven: true, MaxSlots: 4}}},
		{"max-slots synonym", "a slots=2 max-slots=4", []Entry{{Name: "a", Slots: 2, SlotsGiven: true, MaxSlots: 4}}},
		{"max before slots", "a max_slots=4 slots=4", []Entry{{Name: "a", Slots: 4, SlotsGiven: true, MaxSlots: 4}}},
		{"max alone sets slots", "a max_slots=3", []Entry{{Name: "a", Slots: 3, SlotsGiven: true, MaxSlots: 3}}},
		{"spaces around =", "a slots = 4 max_slots= 6 port =22", []Entry{{Name: "a", Slots: 4, SlotsGiven: true, MaxSlots: 6, Port: 22}}},
		{"port", "a slots=1 port=2222", []Entry{{Name: "a", Slots: 1, SlotsGiven: true, Port: 2222}}},
		{"user@host", "alice@a slots=2", []Entry{{Name: "a", User: "alice", Slots: 2, SlotsGiven: true}}},
		{"user=", "a user=bob", []Entry{{Name: "a", User: "bob", SlotsFromCores: true}}},
		{"same user twice", "bob@a user=bob", []Entry{{Name: "a", User: "bob", SlotsFromCores: true}}},
		{"trailing comment", "a slots=2 # two\nb slots=1#one\n", []Entry{named("a", 2), named("b", 1)}},
		{"crlf and tabs", "a\tslots=2\r\nb slots=1\r\n", []Entry{named("a", 2), named("b", 1)}},
		{"order of first line", "b slots=1\na slots=1\nb slots=1", []Entry{named("b", 2), named("a", 1)}},
		{"repeat adds slots", "a slots=2\na slots=3", []Entry{named("a", 5)}},
		{"repeat bare counts one each", "a\na\na", []Entry{named("a", 3)}},
		{"repeat mixed", "a slots=4\na", []Entry{named("a", 5)}},
		{"repeat adds max when all have it", "a slots=1 max_slots=2\na slots=1 max_slots=3", []Entry{{Name: "a", Slots: 2, SlotsGiven: true, MaxSlots: 5}}},
		{"repeat drops max when one lacks it", "a slots=1 max_slots=2\na slots=1", []Entry{named("a", 2)}},
		{"repeat case-insensitive", "Node1 slots=1\nnode1 slots=1", []Entry{named("Node1", 2)}},
		{"repeat keeps user", "u@a slots=1\na slots=1 port=9", []Entry{{Name: "a", User: "u", Port: 9, Slots: 2, SlotsGiven: true}}},
		{"fqdn", "n1.cluster.example slots=2", []Entry{named("n1.cluster.example", 2)}},
		{"ipv4", "10.0.0.1 slots=2", []Entry{named("10.0.0.1", 2)}},
		{"ipv6 loopback bare", "::1 slots=2", []Entry{named("::1", 2)}},
		{"ipv6 link-local bare", "fe80::1", []Entry{cores("fe80::1")}},
		{"ipv6 zone", "fe80::1%eth0 slots=1", []Entry{named("fe80::1%eth0", 1)}},
		{"ipv6 bracketed", "[::1] slots=2", []Entry{named("::1", 2)}},
		{"ipv6 user bracketed", "u@[2001:db8::7] slots=1", []Entry{{Name: "2001:db8::7", User: "u", Slots: 1, SlotsGiven: true}}},
		{"ipv6 same address merges", "::1 slots=1\n[0::1] slots=1", []Entry{named("::1", 2)}},
		{"exclude", "a slots=1\n^b\nb slots=2\nc", []Entry{named("a", 1), cores("c"), {Name: "b", Exclude: true}}},
		{"exclude before", "^b\nb slots=2", []Entry{{Name: "b", Exclude: true}}},
		{"exclude short name", "^b\nb.example slots=2\nc", []Entry{cores("c"), {Name: "b", Exclude: true}}},
		{"exclude twice", "^b\n^B", []Entry{{Name: "b", Exclude: true}}},
		{"exclude unknown kept for filtering", "a\n^z", []Entry{cores("a"), {Name: "z", Exclude: true}}},
		{"relative kept", "+n0\n+e:2\n+e", []Entry{{Kind: RelNode}, {Kind: RelEmpty, Count: 2}, {Kind: RelEmpty}}},
		{"underscore host", "my_node slots=1", []Entry{named("my_node", 1)}},
		{"numeric host", "123 slots=1", []Entry{named("123", 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHostfile("hf", strings.NewReader(tc.in))
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseHostfileErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a\nb\nc slots=abc", "hosts.txt:3: slots=abc: not a number"},
		{"a slots=", "hosts.txt:1: slots=: missing number"},
		{"a slots=-1", "hosts.txt:1: slots=-1: not a number"},
		{"a slots=+1", "hosts.txt:1: slots=+1: not a number"},
		{"a slots=1.5", "hosts.txt:1: slots=1.5: not a number"},
		{"a slots=99999999999999999999", "hosts.txt:1: slots=99999999999999999999: too large (at most 1000000)"},
		{"a count=x", "hosts.txt:1: count=x: not a number"},
		{"a slots=1 slots=2", "hosts.txt:1: slots=2: slots given twice on one line"},
		{"a slots=1 cpu=2", "hosts.txt:1: cpu=2: slots given twice on one line"},
		{"a max_slots=x", "hosts.txt:1: max_slots=x: not a number"},
		{"a max_slots=0", "hosts.txt:1: max_slots=0: must be at least 1"},
		{"a max_slots=2 max-slots=3", "hosts.txt:1: max-slots=3: max_slots given twice on one line"},
		{"a slots=4 max_slots=2", "hosts.txt:1: max_slots=2: less than slots=4"},
		{"a max_slots=2 slots=4", "hosts.txt:1: max_slots=2: less than slots=4"},
		{"a port=0", "hosts.txt:1: port=0: must be 1 to 65535"},
		{"a port=65536", "hosts.txt:1: port=65536: too large (at most 65535)"},
		{"a port=22 port=23", "hosts.txt:1: port=23: port given twice on one line"},
		{"a user=-oProxy", "hosts.txt:1: user=-oProxy: user name starts with '-'"},
		{"bob@a user=alice", "hosts.txt:1: user=alice: user already given as bob"},
		{"a colour=red", "hosts.txt:1: colour=red: unknown attribute (want slots=, max_slots=, port= or user=)"},
		{"a 4", "hosts.txt:1: 4: expected key=value (slots=, max_slots=, port=)"},
		{"a b", "hosts.txt:1: b: expected key=value (slots=, max_slots=, port=)"},
		{"a:4 slots=2", "hosts.txt:1: slots=2: slots given twice on one line"},
		{"a:b:4", "hosts.txt:1: a:b:4: not a host name or address"},
		{"a,b", "hosts.txt:1: a,b: not a host name or address"},
		{"a..b", "hosts.txt:1: a..b: empty label in host name"},
		{"-a", "hosts.txt:1: -a: host name starts with '-'"},
		{"@a", "hosts.txt:1: @a: empty user name"},
		{"u@", "hosts.txt:1: u@: empty host name"},
		{"u@v@a", "hosts.txt:1: u@v@a: not a host name or address"},
		{"^", "hosts.txt:1: ^: empty host name"},
		{"^a slots=2", "hosts.txt:1: slots=2: an excluded host takes no attributes"},
		{"[::1", "hosts.txt:1: [::1: unclosed [ in an IPv6 address"},
		{"[a]", "hosts.txt:1: [a]: not an IPv6 address in brackets"},
		{"[1.2.3.4]", "hosts.txt:1: [1.2.3.4]: not an IPv6 address in brackets"},
		{"fe80::1::2", "hosts.txt:1: fe80::1::2: not a host name or address"},
		{"fe80::1%a$b", "hosts.txt:1: fe80::1%a$b: not a host name or address"},
		{"+x", "hosts.txt:1: +x: relative node spec is +nN, +e or +e:N"},
		{"+n", "hosts.txt:1: +n: node index: missing number"},
		{"+e:0", "hosts.txt:1: +e:0: empty-node count must be at least 1"},
		{"+n0 slots=2", "hosts.txt:1: slots=2: a relative node spec takes no attributes"},
		{"rank 0=a slot=0", "hosts.txt:1: rank: a rankfile line; give rankfiles with --rankfile"},
		{"a user=x\na user=y", "hosts.txt:2: a: host a was given user x"},
		{"a port=1\na port=2", "hosts.txt:2: a: host a was given port 1"},
		{"a\x00b", `hosts.txt:1: "a\x00b": not a host name or address`},
		{"a slots=\xff", `hosts.txt:1: "slots=\xff": not a number`},
		{"a slots=1\u00a0x", "hosts.txt:1: x: expected key=value (slots=, max_slots=, port=)"},
		{strings.Repeat("a", 300), "hosts.txt:1: " + strings.Repeat("a", 64) + "...: host name longer than 253 bytes"},
		{strings.Repeat("x", maxLine+1), "hosts.txt:1: line longer than 1048576 bytes"},
		{strings.Repeat("a slots=1000000\n", maxTotal/1000000+1), "hosts.txt:1074: a: more than 1073741824 slots in total"},
	}
	for _, tc := range tests {
		_, err := ParseHostfile("hosts.txt", strings.NewReader(tc.in))
		if err == nil {
			t.Errorf("%.40q: no error, want %q", tc.in, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("%.40q:\n got  %q\n want %q", tc.in, err.Error(), tc.want)
		}
	}
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("disk\non fire") }

func TestParseHostfileReadError(t *testing.T) {
	_, err := ParseHostfile("hf", failReader{})
	if err == nil || err.Error() != "hf:1: disk on fire" {
		t.Fatalf("got %v", err)
	}
}

func TestEntryStringRoundTrip(t *testing.T) {
	in := "u@a slots=2 max_slots=4 port=22\nb\n::1 slots=1\n+n1\n+e:2\n^c\n"
	es, err := ParseHostfile("hf", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range es {
		lines = append(lines, e.String())
	}
	want := []string{"u@a slots=2 max_slots=4 port=22", "b", "[::1] slots=1", "+n1", "+e:2", "^c"}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("got %q want %q", lines, want)
	}
	again, err := ParseHostfile("hf", strings.NewReader(strings.Join(lines, "\n")))
	if err != nil || !reflect.DeepEqual(again, es) {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
}

func TestNewAllocation(t *testing.T) {
	es := []Entry{
		{Name: "a", Slots: 2, SlotsGiven: true, MaxSlots: 3, User: "u", Port: 22},
		cores("b"),
		{Name: "c", Exclude: true},
	}
	var asked []string
	a, err := NewAllocation(es, func(h string) (int, error) { asked = append(asked, h); return 8, nil })
	if err != nil {
		t.Fatal(err)
	}
	want := Allocation{Hosts: []Host{{Name: "a", Slots: 2, MaxSlots: 3, User: "u", Port: 22}, {Name: "b", Slots: 8}}}
	if !reflect.DeepEqual(a, want) || !reflect.DeepEqual(asked, []string{"b"}) {
		t.Fatalf("got %+v (asked %q)", a, asked)
	}
	if a.Slots() != 10 {
		t.Fatalf("Slots() = %d", a.Slots())
	}

	errs := []struct {
		es    []Entry
		cores func(string) (int, error)
		want  string
	}{
		{[]Entry{{Kind: RelNode, Index: 2}}, nil, "+n2: relative node specs need a hostfile or resource-manager allocation to select from"},
		{[]Entry{cores("b")}, nil, "host b: slots come from its core count, which is unknown"},
		{[]Entry{cores("b")}, func(string) (int, error) { return 0, errors.New("no topology") }, "host b: core count: no topology"},
		{[]Entry{cores("b")}, func(string) (int, error) { return 0, nil }, "host b: core count 0"},
	}
	for _, tc := range errs {
		_, err := NewAllocation(tc.es, tc.cores)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: got %v, want %q", tc.es, err, tc.want)
		}
	}
}
