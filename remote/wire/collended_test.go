package wire

import (
	"testing"

	"prun/pmixsrv"
)

func TestRankSet(t *testing.T) {
	var s RankSet
	for _, r := range []pmixsrv.Rank{0, 63, 64, 1000, 1000, MaxEndedRank, pmixsrv.RankWildcard} {
		s.Add(r)
	}
	for r, want := range map[pmixsrv.Rank]bool{0: true, 1: false, 63: true, 64: true, 65: false, 1000: true, 5000: false,
		MaxEndedRank: false, pmixsrv.RankWildcard: false} {
		if s.Has(r) != want {
			t.Errorf("has(%d) = %v", r, !want)
		}
	}
	if len(s.Bits) != 16 || s.First() != 0 {
		t.Errorf("%d words, first %d", len(s.Bits), s.First())
	}
	s = RankSet{}
	s.Add(130)
	if s.First() != 130 {
		t.Errorf("first %d, want 130", s.First())
	}
}
