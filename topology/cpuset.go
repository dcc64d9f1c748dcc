package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxCPUs bounds OS CPU numbers (a CPU number is < MaxCPUs). Linux allows at
// most 8192 CPUs today; the bound keeps hostile input (a list "0-4000000000",
// a synthetic "pu:99999999") from allocating without limit.
const MaxCPUs = 1 << 16

// CPUSet is a set of OS CPU numbers, sorted ascending without duplicates.
// Sets handed out by a Topology are shared by every user of that topology and
// must not be modified.
type CPUSet []int

// ParseCPUSet parses the Linux list format ("0-3,8", "" for the empty set),
// as found in sysfs and /proc/self/status. Items may come in any order and
// overlap; the result is normalized. Surrounding white space is ignored.
func ParseCPUSet(s string) (CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return CPUSet{}, nil
	}
	type span struct{ lo, hi int }
	var spans []span
	for item := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := parseCPUNumber(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %v", s, err)
		}
		b := a
		if isRange {
			if b, err = parseCPUNumber(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %v", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("cpu list %q: range %d-%d is reversed", s, a, b)
			}
		}
		spans = append(spans, span{a, b})
	}
	// Merge before expanding so that repeated ranges cost nothing.
	slices.SortFunc(spans, func(x, y span) int { return x.lo - y.lo })
	n := 0
	for _, sp := range spans {
		if n > 0 && sp.lo <= spans[n-1].hi+1 {
			spans[n-1].hi = max(spans[n-1].hi, sp.hi)
			continue
		}
		spans[n] = sp
		n++
	}
	size := 0
	for _, sp := range spans[:n] {
		size += sp.hi - sp.lo + 1
	}
	set := make(CPUSet, 0, size)
	for _, sp := range spans[:n] {
		for c := sp.lo; c <= sp.hi; c++ {
			set = append(set, c)
		}
	}
	return set, nil
}

// parseCPUNumber accepts plain decimal digits only: the kernel never writes
// signs, spaces or other bases in a list.
func parseCPUNumber(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty cpu number")
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad cpu number %q", s)
		}
		n = n*10 + int(c-'0')
		if n >= MaxCPUs {
			return 0, fmt.Errorf("cpu number %q is not below %d", s, MaxCPUs)
		}
	}
	return n, nil
}

// String formats the set in the Linux list format: runs of two or more
// consecutive CPUs as "a-b", like the kernel's %*pbl.
func (s CPUSet) String() string {
	return string(s.appendList(nil))
}

func (s CPUSet) appendList(b []byte) []byte {
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(s[i]), 10)
		if j > i {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(s[j]), 10)
		}
		i = j + 1
	}
	return b
}

// Contains reports whether cpu is in the set, in O(log n).
func (s CPUSet) Contains(cpu int) bool {
	_, ok := slices.BinarySearch(s, cpu)
	return ok
}

// Equal reports whether both sets hold the same CPUs.
func (s CPUSet) Equal(o CPUSet) bool { return slices.Equal(s, o) }

// Union returns a new set with the CPUs of both (e.g. the cores of one rank
// bound with PE=n).
func (s CPUSet) Union(o CPUSet) CPUSet {
	out := make(CPUSet, 0, len(s)+len(o))
	i, j := 0, 0
	for i < len(s) || j < len(o) {
		switch {
		case j == len(o) || (i < len(s) && s[i] < o[j]):
			out = append(out, s[i])
			i++
		case i == len(s) || o[j] < s[i]:
			out = append(out, o[j])
			j++
		default:
			out = append(out, s[i])
			i++
			j++
		}
	}
	return out
}

// Intersect returns a new set with the CPUs in both.
func (s CPUSet) Intersect(o CPUSet) CPUSet {
	var out CPUSet
	i, j := 0, 0
	for i < len(s) && j < len(o) {
		switch {
		case s[i] < o[j]:
			i++
		case o[j] < s[i]:
			j++
		default:
			out = append(out, s[i])
			i++
			j++
		}
	}
	return out
}

// sortedSet turns any list of CPU numbers into a CPUSet.
func sortedSet(cpus []int) CPUSet {
	s := slices.Clone(cpus)
	slices.Sort(s)
	return slices.Compact(s)
}
