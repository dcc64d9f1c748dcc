package stacktree

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// RankSet is a set of ranks kept as sorted, disjoint, non-adjacent ranges,
// so "0-99999" costs one range however many ranks it holds. The zero value
// is the empty set.
type RankSet struct {
	r []span // invariant: sorted, r[i].hi+1 < r[i+1].lo
}

type span struct{ lo, hi int }

// MaxRank bounds the ranks ParseRanks accepts.
const MaxRank = 1<<31 - 1

// Add puts rank r in the set. Adding ranks in increasing order (as merging
// rank by rank does) costs O(1) each.
func (s *RankSet) Add(r int) {
	n := len(s.r)
	if n > 0 && s.r[n-1].hi+1 == r {
		s.r[n-1].hi = r
		return
	}
	if n == 0 || s.r[n-1].hi+1 < r {
		s.r = append(s.r, span{r, r})
		return
	}
	s.AddRange(r, r)
}

// AddRange puts lo..hi (inclusive) in the set.
func (s *RankSet) AddRange(lo, hi int) {
	if lo > hi {
		return
	}
	// The first range that could touch lo..hi, and the first beyond it.
	i := sort.Search(len(s.r), func(k int) bool { return s.r[k].hi+1 >= lo })
	j := i
	for j < len(s.r) && s.r[j].lo <= hi+1 {
		lo = min(lo, s.r[j].lo)
		hi = max(hi, s.r[j].hi)
		j++
	}
	s.r = append(s.r[:i], append([]span{{lo, hi}}, s.r[j:]...)...)
}

// Union adds every rank of o.
func (s *RankSet) Union(o RankSet) {
	for _, x := range o.r {
		s.AddRange(x.lo, x.hi)
	}
}

// Has reports whether r is in the set.
func (s RankSet) Has(r int) bool {
	i := sort.Search(len(s.r), func(k int) bool { return s.r[k].hi >= r })
	return i < len(s.r) && s.r[i].lo <= r
}

// Len is the number of ranks in the set.
func (s RankSet) Len() int {
	n := 0
	for _, x := range s.r {
		n += x.hi - x.lo + 1
	}
	return n
}

// Min is the smallest rank, -1 for the empty set.
func (s RankSet) Min() int {
	if len(s.r) == 0 {
		return -1
	}
	return s.r[0].lo
}

// Ranks lists the ranks in increasing order.
func (s RankSet) Ranks() []int {
	var out []int
	for _, x := range s.r {
		for r := x.lo; r <= x.hi; r++ {
			out = append(out, r)
		}
	}
	return out
}

// Equal reports whether both sets hold the same ranks.
func (s RankSet) Equal(o RankSet) bool {
	if len(s.r) != len(o.r) {
		return false
	}
	for i := range s.r {
		if s.r[i] != o.r[i] {
			return false
		}
	}
	return true
}

// String is the compact form "0-3,5,7-9" that ParseRanks reads back; the
// empty set is "".
func (s RankSet) String() string {
	var b strings.Builder
	for i, x := range s.r {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x.lo))
		if x.hi > x.lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(x.hi))
		}
	}
	return b.String()
}

// Short is String cut to at most max bytes at a range boundary, followed by
// ",…" when ranges were left out (for labels of large jobs).
func (s RankSet) Short(max int) string {
	full := s.String()
	if len(full) <= max {
		return full
	}
	cut := strings.LastIndexByte(full[:max], ',')
	if cut <= 0 {
		return "…"
	}
	return full[:cut] + ",…"
}

// ParseRanks reads a rank list as `--ranks` takes it: comma-separated ranks
// and inclusive ranges "a-b", spaces around items allowed, e.g. "0-3,5,7-9".
// Errors are one line naming the bad item.
func ParseRanks(list string) (RankSet, error) {
	var s RankSet
	if strings.TrimSpace(list) == "" {
		return s, fmt.Errorf("empty rank list")
	}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := parseRank(lo)
		if err != nil {
			return RankSet{}, fmt.Errorf("bad rank %q in %q: %v", item, short(list), err)
		}
		b := a
		if isRange {
			if b, err = parseRank(hi); err != nil {
				return RankSet{}, fmt.Errorf("bad rank %q in %q: %v", item, short(list), err)
			}
			if b < a {
				return RankSet{}, fmt.Errorf("bad rank range %q in %q: %d is below %d", item, short(list), b, a)
			}
		}
		s.AddRange(a, b)
	}
	return s, nil
}

func parseRank(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("a rank is missing")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("not a rank number")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > MaxRank {
		return 0, fmt.Errorf("above %d", MaxRank)
	}
	return int(n), nil
}

// short keeps an echoed user string to a readable length on one line.
func short(s string) string {
	s = strings.Map(printable, s)
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
