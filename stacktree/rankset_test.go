package stacktree

import (
	"strings"
	"testing"
)

func TestRankSet(t *testing.T) {
	var s RankSet
	for _, r := range []int{7, 0, 1, 9, 3, 2, 5, 8} {
		s.Add(r)
	}
	if got := s.String(); got != "0-3,5,7-9" {
		t.Fatalf("String %q, want 0-3,5,7-9", got)
	}
	if s.Len() != 8 || s.Min() != 0 || !s.Has(5) || s.Has(4) || s.Has(10) || s.Has(-1) {
		t.Fatalf("Len/Min/Has wrong for %s", s)
	}
	s.AddRange(4, 6) // bridges two ranges
	if s.String() != "0-9" {
		t.Fatalf("after 4-6: %s", s)
	}
	var big RankSet
	big.AddRange(0, 1<<30)
	if big.Len() != 1<<30+1 || big.String() != "0-1073741824" {
		t.Fatalf("big: %s", big)
	}
	var u RankSet
	u.Union(s)
	u.Add(11)
	if u.String() != "0-9,11" || !u.Equal(u) || u.Equal(s) {
		t.Fatalf("union: %s", u)
	}
	var many RankSet
	for r := 0; r < 100; r += 2 {
		many.Add(r)
	}
	if sh := many.Short(20); sh != "0,2,4,6,8,10,12,14,…" {
		t.Errorf("Short(20) %q", sh)
	}
	if (RankSet{}).String() != "" || (RankSet{}).Min() != -1 {
		t.Error("the empty set")
	}
}

func TestParseRanks(t *testing.T) {
	for in, want := range map[string]string{
		"0-3,5,7-9":    "0-3,5,7-9",
		" 9, 8 ,7,0-1": "0-1,7-9",
		"4-4":          "4",
		"0-2,1-5":      "0-5",
	} {
		s, err := ParseRanks(in)
		if err != nil || s.String() != want {
			t.Errorf("ParseRanks(%q) = %s, %v; want %s", in, s, err, want)
		}
	}
	for _, bad := range []string{"", " ", "1,", "a", "-1", "3-1", "1-", "1-2-3", "99999999999", "1;2", "0x3", "+1"} {
		if _, err := ParseRanks(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseRanks(%q): %v, want a one-line error", bad, err)
		}
	}
}

func FuzzParseRanks(f *testing.F) {
	for _, s := range []string{"0-3,5,7-9", "1", "2-1", "0-2147483647", ",", "1-2-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseRanks(in)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("two-line error %q", err)
			}
			return
		}
		// The compact form reads back as the same set.
		again, err := ParseRanks(s.String())
		if err != nil || !again.Equal(s) {
			t.Fatalf("%q -> %q -> %v, %v", in, s, again, err)
		}
	})
}
