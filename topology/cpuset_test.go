package topology

import (
	"slices"
	"strings"
	"testing"
)

func TestParseCPUSet(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{" \n", ""},
		{"0", "0"},
		{"0-3,8\n", "0-3,8"},
		{"8,0-3", "0-3,8"},
		{"0,1", "0-1"},
		{"0-1,1-2,2-3,7,5", "0-3,5,7"},
		{"3-3", "3"},
		{"0-3,0-3,0-3", "0-3"},
		{"0-65535", "0-65535"},
		{"007", "7"},
	} {
		s, err := ParseCPUSet(c.in)
		if err != nil {
			t.Errorf("ParseCPUSet(%q): %v", c.in, err)
			continue
		}
		if got := s.String(); got != c.want {
			t.Errorf("ParseCPUSet(%q) = %q, want %q", c.in, got, c.want)
		}
		if s == nil {
			t.Errorf("ParseCPUSet(%q) = nil, want a set", c.in)
		}
	}
	for _, in := range []string{",", "0,", ",0", "-", "0-", "-1", "3-1", "a", "0x1", "1 2", "1, 2", "+1", "65536", "0-65536",
		"99999999999999999999", "1-2-3", "0\n1"} {
		if s, err := ParseCPUSet(in); err == nil {
			t.Errorf("ParseCPUSet(%q) = %v, want an error", in, s)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseCPUSet(%q): error on several lines: %q", in, err)
		}
	}
}

func TestCPUSetOps(t *testing.T) {
	a, b := mustSet(t, "0-3,8,10-11"), mustSet(t, "2-9")
	if got := a.Union(b).String(); got != "0-11" {
		t.Errorf("Union = %s", got)
	}
	if got := a.Intersect(b).String(); got != "2-3,8" {
		t.Errorf("Intersect = %s", got)
	}
	if got := a.Intersect(CPUSet{}).String(); got != "" {
		t.Errorf("Intersect with nothing = %s", got)
	}
	if got := CPUSet(nil).Union(b); !got.Equal(b) {
		t.Errorf("Union with nil = %s", got)
	}
	if !a.Contains(8) || a.Contains(9) || a.Contains(-1) || CPUSet(nil).Contains(0) {
		t.Error("Contains")
	}
	if !a.Equal(mustSet(t, "10-11,8,0-3")) || a.Equal(b) || !CPUSet(nil).Equal(CPUSet{}) {
		t.Error("Equal")
	}
	// Results are new sets: changing one leaves the operands alone.
	u := a.Union(nil)
	u[0] = 99
	if a[0] != 0 {
		t.Error("Union shares its operand's array")
	}
}

func mustSet(t *testing.T, s string) CPUSet {
	t.Helper()
	set, err := ParseCPUSet(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// FuzzCPUSet: no panic, one-line errors, a parsed set is sorted without
// duplicates, and its String parses back to an Equal set with the same
// String; Union and Intersect agree with Contains.
func FuzzCPUSet(f *testing.F) {
	for _, s := range []string{"", "0", "0-3,8", "8,0-3", "0-1,1-2", "65535", "0-65535", "1,3,5-7\n", "3-1", "a-b"} {
		f.Add(s, "2-5,9")
	}
	f.Fuzz(func(t *testing.T, in, other string) {
		s, err := ParseCPUSet(in)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error on several lines: %q", err)
			}
			return
		}
		for i, c := range s {
			if c < 0 || c >= MaxCPUs || (i > 0 && c <= s[i-1]) {
				t.Fatalf("ParseCPUSet(%q) = %v: not sorted, unique and in range", in, s)
			}
		}
		str := s.String()
		back, err := ParseCPUSet(str)
		if err != nil || !back.Equal(s) || back.String() != str {
			t.Fatalf("ParseCPUSet(%q) = %v, String %q parses back to %v, %v", in, s, str, back, err)
		}
		o, err := ParseCPUSet(other)
		if err != nil {
			return
		}
		u, x := s.Union(o), s.Intersect(o)
		if !slices.IsSorted(u) || !slices.IsSorted(x) || len(u)+len(x) != len(s)+len(o) {
			t.Fatalf("%v ∪ %v = %v, ∩ = %v", s, o, u, x)
		}
		for _, c := range u {
			if s.Contains(c) && o.Contains(c) != x.Contains(c) || !s.Contains(c) && !o.Contains(c) {
				t.Fatalf("%v ∪ %v = %v, ∩ = %v: wrong at %d", s, o, u, x, c)
			}
		}
	})
}
