package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

var synthNames = [numTypes]string{"", "pack", "numa", "l3", "l2", "l1", "core", "pu"}

// Synthetic returns the canonical synthetic description of the topology,
// e.g. "pack:2 numa:2 l3:1 core:16 pu:2": short type names outermost first;
// NUMA nodes as a level when they split the PUs like one, else attached
// ("[numa]") to the objects they are local to, as in hwloc's export; the
// single machine-wide NUMA node P#0 left implicit; "group" levels where
// objects the model does not keep (dies, groups...) carry NUMA nodes or
// order their children otherwise than by CPU number; and OS indexes as
// indexes= wherever they differ from what ParseSynthetic assigns (0..n-1 in
// logical order, none for caches). ParseSynthetic of it gives an Equal
// topology, except that OS indexes a level knows only in part (-1 for some
// objects) are dropped; so, that exception aside, topologies with the same
// description are Equal, and the precomputed string can key the sharing of
// one Topology between nodes. A topology that no synthetic string describes
// (different numbers of children under objects of one level) gives
// "asymmetric:" and the number of objects of each type, which is no key.
func (t *Topology) Synthetic() string { return t.synth }

// span is the PU range of an object the model does not keep.
type span struct{ first, count int32 }

// slevel is one level of a description being written: a modeled type, or
// a group (typ noType) standing for objects the model does not keep.
type slevel struct {
	typ          ObjType
	first, count []int32
	mins         []int // smallest CPU of each object
}

// synthetic writes the canonical description; hidden are the PU ranges of
// the objects of the tree that the model does not keep.
func synthetic(t *Topology, hidden []span) string {
	groups := groupLevels(t, hidden)
	if s, ok := syntheticWith(t, groups, true); ok {
		return s
	}
	if s, ok := syntheticWith(t, groups, false); ok {
		return s
	}
	return asymmetric(t)
}

// groupLevels turns hidden objects into candidate group levels: those of
// one size that tile the PUs and differ from every modeled level.
func groupLevels(t *Topology, hidden []span) []*slevel {
	slices.SortFunc(hidden, func(a, b span) int {
		if a.count != b.count {
			return int(b.count - a.count)
		}
		return int(a.first - b.first)
	})
	hidden = slices.Compact(hidden)
	var groups []*slevel
	for i := 0; i < len(hidden); {
		j := i
		for j < len(hidden) && hidden[j].count == hidden[i].count {
			j++
		}
		g := &slevel{typ: noType}
		next := int32(0)
		for _, h := range hidden[i:j] {
			if h.first != next {
				g = nil // does not tile the PUs
				break
			}
			g.first = append(g.first, h.first)
			g.count = append(g.count, h.count)
			next += h.count
		}
		i = j
		if g == nil || int(next) != len(t.pus) {
			continue
		}
		dup := false
		for typ := range numTypes {
			l := &t.levels[typ]
			dup = dup || slices.Equal(l.first, g.first) && slices.Equal(l.count, g.count)
		}
		if !dup {
			g.mins = minCPUs(t, g.first, g.count)
			groups = append(groups, g)
		}
	}
	return groups
}

func minCPUs(t *Topology, first, count []int32) []int {
	mins := make([]int, len(first))
	for i := range first {
		mins[i] = slices.Min(t.pus[first[i] : first[i]+count[i]])
	}
	return mins
}

// implicitNUMA reports whether the topology has just the NUMA node that
// ParseSynthetic assumes when a description names none.
func implicitNUMA(t *Topology) bool {
	l := &t.levels[NUMANode]
	return len(l.first) == 1 && int(l.count[0]) == len(t.pus) && l.os[0] == 0
}

// syntheticWith writes the description with the NUMA nodes as a level of
// their own (numaLevel) or attached to objects of the other levels; ok is
// false when the topology has no description of that form.
func syntheticWith(t *Topology, groups []*slevel, numaLevel bool) (string, bool) {
	implicit := implicitNUMA(t)
	attach := !numaLevel && !implicit
	// Every level that may appear, by number of objects: the modeled ones
	// (Machine first), then the groups.
	var all []*slevel
	var mandatory []bool
	for _, typ := range t.order {
		if typ != NUMANode || (numaLevel && !implicit) {
			l := &t.levels[typ]
			all = append(all, &slevel{typ: typ, first: l.first, count: l.count})
			mandatory = append(mandatory, true)
		}
	}
	for _, g := range groups {
		all = append(all, g)
		// A group must appear if NUMA nodes are attached to it.
		mandatory = append(mandatory, attach && holdsNUMA(t, g, all[:len(all)-1]))
	}
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return len(all[a].first) - len(all[b].first) })
	// The levels to write: the mandatory ones, and between two of them
	// the fewest groups that make each level's objects split those of the
	// level above evenly and in CPU order, as ParseSynthetic will order them.
	seq := []*slevel{all[idx[0]]}
	var arity []int
	arity = append(arity, 1)
	for k := 1; k < len(idx); {
		end := k
		for !mandatory[idx[end]] {
			if end++; end == len(idx) {
				return "", false // PU is mandatory: cannot happen
			}
		}
		path, ar, ok := shortestChain(t, seq[len(seq)-1], all, idx[k:end], all[idx[end]])
		if !ok {
			return "", false
		}
		seq = append(seq, path...)
		arity = append(arity, ar...)
		k = end + 1
	}
	per := make([]int, len(seq))
	if attach {
		var ok bool
		if per, ok = attachNUMA(t, seq, arity); !ok {
			return "", false
		}
	}
	var b strings.Builder
	numaIdx := levelIndexes(t, NUMANode)
	for d, l := range seq {
		if d > 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			if l.typ == noType {
				fmt.Fprintf(&b, "group:%d", arity[d])
			} else {
				fmt.Fprintf(&b, "%s:%d", synthNames[l.typ], arity[d])
				if idx := levelIndexes(t, l.typ); idx != "" {
					fmt.Fprintf(&b, "(indexes=%s)", idx)
				}
			}
		}
		for range per[d] {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("[numa")
			if numaIdx != "" { // one list for all attached nodes
				fmt.Fprintf(&b, "(indexes=%s)", numaIdx)
				numaIdx = ""
			}
			b.WriteByte(']')
		}
	}
	return b.String(), true
}

// holdsNUMA reports whether some NUMA node has exactly the PUs of an object
// of g and of no object of the levels before it.
func holdsNUMA(t *Topology, g *slevel, before []*slevel) bool {
	numa := &t.levels[NUMANode]
	for j := range numa.first {
		if objectWith(g, numa.first[j], numa.count[j]) && !slices.ContainsFunc(before, func(l *slevel) bool {
			return l.typ != noType && objectWith(l, numa.first[j], numa.count[j])
		}) {
			return true
		}
	}
	return false
}

// objectWith reports whether level l has an object with PUs first..+count.
func objectWith(l *slevel, first, count int32) bool {
	i, found := slices.BinarySearch(l.first, first)
	return found && l.count[i] == count
}

// shortestChain finds the fewest optional levels (indexes into all, in
// order) to put between from and to so that each level below splits the one
// above evenly and in CPU order. It returns them followed by to, with the
// arity of each.
func shortestChain(t *Topology, from *slevel, all []*slevel, optional []int, to *slevel) (path []*slevel, arity []int, ok bool) {
	nodes := []*slevel{from}
	for _, i := range optional {
		nodes = append(nodes, all[i])
	}
	nodes = append(nodes, to)
	// Breadth first over the levels in order: prev[j] is the level before
	// j on a shortest chain to j.
	n := len(nodes)
	prev := make([]int, n)
	ar := make([]int, n)
	dist := make([]int, n)
	for j := range dist {
		dist[j] = -1
	}
	dist[0] = 0
	for j := 1; j < n; j++ {
		for i := range j {
			if dist[i] < 0 || (dist[j] >= 0 && dist[i]+1 >= dist[j]) {
				continue
			}
			if a, ok := splits(t, nodes[i], nodes[j]); ok {
				dist[j], prev[j], ar[j] = dist[i]+1, i, a
			}
		}
	}
	if dist[n-1] < 0 {
		return nil, nil, false
	}
	for j := n - 1; j > 0; j = prev[j] {
		path = append(path, nodes[j])
		arity = append(arity, ar[j])
	}
	slices.Reverse(path)
	slices.Reverse(arity)
	return path, arity, true
}

// splits reports whether the objects of child split the PUs in order, each
// object of parent holding the same number of them in CPU order (by
// smallest CPU, which is how ParseSynthetic orders siblings).
func splits(t *Topology, parent, child *slevel) (arity int, ok bool) {
	np, nc := len(parent.first), len(child.first)
	if nc%np != 0 {
		return 0, false
	}
	var next int32
	for i := range nc {
		if child.first[i] != next || child.count[i] == 0 {
			return 0, false
		}
		next += child.count[i]
	}
	if int(next) != len(t.pus) {
		return 0, false
	}
	arity = nc / np
	if child.mins == nil {
		child.mins = minCPUs(t, child.first, child.count)
	}
	for j := range np {
		if parent.first[j] != child.first[j*arity] {
			return 0, false
		}
		for k := j*arity + 1; k < (j+1)*arity; k++ {
			if child.mins[k] < child.mins[k-1] {
				return 0, false
			}
		}
	}
	return arity, true
}

// attachNUMA finds how many NUMA nodes each object of each level of seq
// holds as memory: a NUMA node belongs to the outermost object with exactly
// its PUs. ok is false unless every object of a level holds as many and the
// description would list them in the topology's order (below an object, the
// NUMA nodes of its subtree first, then its own).
func attachNUMA(t *Topology, seq []*slevel, arity []int) (per []int, ok bool) {
	numa := &t.levels[NUMANode]
	per = make([]int, len(seq))
	for j := range numa.first {
		d := 0
		for d < len(seq) && !objectWith(seq[d], numa.first[j], numa.count[j]) {
			d++
		}
		if d == len(seq) {
			return nil, false
		}
		per[d]++
	}
	for d, l := range seq {
		n := len(l.first)
		if per[d]%n != 0 {
			return nil, false
		}
		per[d] /= n
	}
	k, ok := 0, true
	var visit func(d, i int)
	visit = func(d, i int) {
		if d+1 < len(seq) {
			for c := range arity[d+1] {
				if !ok {
					return
				}
				visit(d+1, i*arity[d+1]+c)
			}
		}
		l := seq[d]
		for range per[d] {
			if k == len(numa.first) || numa.first[k] != l.first[i] || numa.count[k] != l.count[i] {
				ok = false
				return
			}
			k++
		}
	}
	visit(0, 0)
	return per, ok && k == len(numa.first)
}

// levelIndexes returns the indexes= attribute the OS indexes of typ need:
// "" when they are what ParseSynthetic assigns anyway (0..n-1; none for a
// cache) or when some are unknown, which no attribute can say.
func levelIndexes(t *Topology, typ ObjType) string {
	l := &t.levels[typ]
	os := make([]int, len(l.os))
	for i, v := range l.os {
		if v < 0 {
			return ""
		}
		os[i] = int(v)
	}
	cache := typ == L1Cache || typ == L2Cache || typ == L3Cache
	return exportIndexes(os, cache)
}

func asymmetric(t *Topology) string {
	parts := []string{"asymmetric:"}
	for _, typ := range t.order {
		if typ != Machine {
			parts = append(parts, fmt.Sprintf("%s=%d", synthNames[typ], t.Count(typ)))
		}
	}
	return strings.Join(parts, " ")
}

// exportIndexes formats OS numbers as hwloc's export does: "" for 0..n-1
// (unless force), an interleaving like "2*4:1*2" when one fits, else the
// full list.
func exportIndexes(os []int, force bool) string {
	total := len(os)
	identity := true
	for i, v := range os {
		identity = identity && v == i
	}
	if identity && !force {
		return ""
	}
	if loops := findInterleave(os); loops != "" {
		return loops
	}
	parts := make([]string, total)
	for i, v := range os {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func findInterleave(os []int) string {
	total := len(os)
	if os[0] != 0 {
		return ""
	}
	type loop struct{ step, nb int }
	var loops []loop
	for step := 1; step != total; {
		if step > total || total%step != 0 {
			return ""
		}
		i := 1
		for i < total && os[i] != step {
			i++
		}
		if i == total {
			return ""
		}
		j := 2
		for j < total/i && os[i*j] == step*j {
			j++
		}
		loops = append(loops, loop{i, j})
		step *= j
	}
	for i := range total {
		ind, mul := 0, 1
		for _, l := range loops {
			ind += (i / l.step) % l.nb * mul
			mul *= l.nb
		}
		if os[i] != ind {
			return ""
		}
	}
	parts := make([]string, len(loops))
	for k, l := range loops {
		parts[k] = fmt.Sprintf("%d*%d", l.step, l.nb)
	}
	return strings.Join(parts, ":")
}
