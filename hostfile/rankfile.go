package hostfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// RankEntry is one line of a rankfile: where one rank runs and on which
// processors.
type RankEntry struct {
	Rank int
	// Host is the host name (IPv6 without brackets); "" for a relative
	// "+nN" host, whose N is then Node (-1 for a named host).
	Host string
	Node int
	Slot Slot
}

// Slot is the processors a rankfile binds a rank to, in one of Open MPI's
// two spellings: a processor list "0,2-3" (CPUs) or package:cores groups
// "1:0-2" and "0:1;1:2" (Cores). Lists are sorted, without repeats.
type Slot struct {
	CPUs  []int
	Cores []PackageCores
}

// PackageCores is the cores of one package (socket) that a rank may use.
type PackageCores struct {
	Package int
	Cores   []int
}

// ParseRankfile reads a rankfile in Open MPI syntax:
//
//	rank N=host slot=S   # comment
//
// host is a name, an IPv4 or IPv6 address (bare or in brackets), or "+nN"
// (the N-th node of the allocation). S is a processor list ("0,2-3") or
// package:cores groups separated by ';' ("1:0-2", "0:1;1:2"). Spaces may
// surround '='; '#' starts a comment; blank lines are skipped. A rank
// given twice is an error: two places for one process cannot both hold.
// Entries come back sorted by rank. Errors read "NAME:LINE: what is wrong",
// naming the offending token.
func ParseRankfile(name string, r io.Reader) ([]RankEntry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	var out []RankEntry
	lineOf := map[int]int{}
	line, total := 0, 0
	for sc.Scan() {
		line++
		e, msg := parseRankLine(sc.Text())
		if msg == "" && e == nil {
			continue
		}
		if msg == "" {
			if first, dup := lineOf[e.Rank]; dup {
				msg = fmt.Sprintf("rank %d given twice (first on line %d)", e.Rank, first)
			}
			total += e.Slot.count()
			if total > maxRankfileCPUs {
				msg = fmt.Sprintf("more than %d processors in the file", maxRankfileCPUs)
			}
		}
		if msg != "" {
			return nil, fmt.Errorf("%s:%d: %s", name, line, msg)
		}
		lineOf[e.Rank] = line
		out = append(out, *e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, line+1, maxLine)
		}
		return nil, fmt.Errorf("%s:%d: %s", name, line+1, oneLine(err.Error()))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out, nil
}

// parseRankLine parses one line: nil for a blank one, else the entry or
// what is wrong.
func parseRankLine(text string) (*RankEntry, string) {
	toks := tokens(stripComment(text))
	if len(toks) == 0 {
		return nil, ""
	}
	if toks[0] != "rank" {
		return nil, quote(toks[0]) + ": expected \"rank N=host slot=S\""
	}
	if len(toks) < 2 {
		return nil, "rank: expected \"rank N=host slot=S\""
	}
	rs, hs, ok := strings.Cut(toks[1], "=")
	if !ok {
		return nil, quote(toks[1]) + ": expected N=host"
	}
	rank, msg := number(rs, maxRank)
	if msg != "" {
		return nil, quote(toks[1]) + ": rank " + msg
	}
	e := &RankEntry{Rank: rank, Node: -1}
	if strings.HasPrefix(hs, "+") {
		rel, msg := parseRelative(hs)
		if msg == "" && rel.Kind != RelNode {
			msg = "only +nN names a node here"
		}
		if msg != "" {
			return nil, quote(toks[1]) + ": " + msg
		}
		e.Node = rel.Index
	} else {
		h, msg := checkHost(hs)
		if msg != "" {
			return nil, quote(toks[1]) + ": " + msg
		}
		e.Host = h
	}
	gotSlot := false
	for _, t := range toks[2:] {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k != "slot" {
			return nil, quote(t) + ": expected slot=S"
		}
		if gotSlot {
			return nil, quote(t) + ": slot given twice"
		}
		s, msg := parseSlot(v)
		if msg != "" {
			return nil, quote(t) + ": " + msg
		}
		e.Slot, gotSlot = s, true
	}
	if !gotSlot {
		return nil, "rank " + strconv.Itoa(rank) + ": missing slot=S"
	}
	return e, ""
}

// parseSlot reads "0,2-3" or "1:0-2;0:1". At most maxCPU+1 processors in
// all, so that a short line cannot ask for millions of them.
func parseSlot(s string) (Slot, string) {
	if s == "" {
		return Slot{}, "empty slot"
	}
	budget := maxCPU + 1
	if !strings.ContainsRune(s, ':') {
		if strings.ContainsRune(s, ';') {
			return Slot{}, "';' separates package:cores groups"
		}
		cpus, msg := parseList(s, &budget)
		return Slot{CPUs: cpus}, msg
	}
	var out Slot
	for _, g := range strings.Split(s, ";") {
		ps, cs, ok := strings.Cut(g, ":")
		if !ok {
			return Slot{}, quote(g) + ": expected package:cores"
		}
		pkg, msg := number(ps, maxCPU)
		if msg != "" {
			return Slot{}, quote(g) + ": package " + msg
		}
		for _, pc := range out.Cores {
			if pc.Package == pkg {
				return Slot{}, quote(g) + ": package " + strconv.Itoa(pkg) + " given twice"
			}
		}
		cores, msg := parseList(cs, &budget)
		if msg != "" {
			return Slot{}, quote(g) + ": " + msg
		}
		out.Cores = append(out.Cores, PackageCores{Package: pkg, Cores: cores})
	}
	return out, ""
}

// parseList reads "0,2-3" into sorted numbers, taking them from *budget; a
// number given twice is an error (likely a typo for another).
func parseList(s string, budget *int) ([]int, string) {
	if s == "" {
		return nil, "empty processor list"
	}
	var set [(maxCPU + 64) / 64]uint64
	n := 0
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, msg := number(lo, maxCPU)
		if msg != "" {
			return nil, quote(r) + ": " + msg
		}
		b, msg := number(hi, maxCPU)
		if msg != "" {
			return nil, quote(r) + ": " + msg
		}
		if b < a {
			return nil, quote(r) + ": range runs backwards"
		}
		if b-a+1 > *budget {
			return nil, quote(r) + ": more than " + strconv.Itoa(maxCPU+1) + " processors in one slot"
		}
		*budget -= b - a + 1
		for i := a; i <= b; i++ {
			if set[i/64]&(1<<(i%64)) != 0 {
				return nil, quote(r) + ": " + strconv.Itoa(i) + " given twice"
			}
			set[i/64] |= 1 << (i % 64)
			n++
		}
	}
	out := make([]int, 0, n)
	for w, word := range set {
		for ; word != 0; word &= word - 1 {
			out = append(out, w*64+bits.TrailingZeros64(word))
		}
	}
	return out, ""
}

// String writes the entry as a rankfile line that parses back to it.
func (e RankEntry) String() string {
	host := bracket(e.Host)
	if e.Host == "" {
		host = "+n" + strconv.Itoa(e.Node)
	}
	return fmt.Sprintf("rank %d=%s slot=%s", e.Rank, host, e.Slot)
}

// count is the number of processors the slot lists.
func (s Slot) count() int {
	n := len(s.CPUs)
	for _, pc := range s.Cores {
		n += len(pc.Cores)
	}
	return n
}

// String writes the slot in rankfile syntax.
func (s Slot) String() string {
	if len(s.Cores) == 0 {
		return formatList(s.CPUs)
	}
	groups := make([]string, len(s.Cores))
	for i, pc := range s.Cores {
		groups[i] = strconv.Itoa(pc.Package) + ":" + formatList(pc.Cores)
	}
	return strings.Join(groups, ";")
}

// formatList writes sorted numbers with runs as ranges: 0,2-3.
func formatList(ns []int) string {
	var b strings.Builder
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ns[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ns[j]))
		}
		i = j + 1
	}
	return b.String()
}
