package mapper

import (
	"slices"

	"prun/topology"
)

// order ranks the placements: the result lists, for each global rank, the
// index of its placement. Ranks are contiguous per app, apps in order.
func (p *placer) order() []int32 {
	ord := make([]int32, len(p.placed))
	if p.user {
		for i := range ord {
			ord[i] = int32(i)
		}
		return ord
	}
	// Keys group placements by host (slot, node) or by host and mapped
	// object (fill, span), hosts in allocation order.
	byObj := p.rank == RankFill || p.rank == RankSpan
	nkeys := len(p.hosts)
	var objOff []int32
	if byObj {
		objOff = make([]int32, len(p.hosts))
		n := int32(0)
		for i := range p.hosts {
			objOff[i] = n
			if in := p.hosts[i].info; in != nil && in.nobj > 0 {
				n += in.nobj
			} else {
				n++
			}
		}
		nkeys = int(n)
	}
	key := func(pl placement) int32 {
		if byObj {
			return objOff[pl.host] + pl.obj
		}
		return pl.host
	}
	var g grouper
	for a := 0; a+1 < len(p.appStart); a++ {
		s, e := p.appStart[a], p.appStart[a+1]
		seg, out := p.placed[s:e], ord[s:e]
		rr := p.rank == RankNode || p.rank == RankSpan
		groups := g.group(seg, key, nkeys, out, int32(s), rr)
		if rr {
			roundRobin(out, groups)
		}
	}
	return ord
}

// grouper sorts placements stably by key, reusing its buffers.
type grouper struct {
	count  []int32
	groups [][2]int32
	tmp    []int32
}

// group writes into out the indices (offset by base) of seg sorted stably by
// key and, if ranges is set, returns the [start, end) ranges of out holding
// each key present, in key order.
func (g *grouper) group(seg []placement, key func(placement) int32, nkeys int, out []int32, base int32, ranges bool) [][2]int32 {
	g.groups = g.groups[:0]
	if len(seg) == 0 {
		return g.groups
	}
	if len(seg)*8 < nkeys { // few processes, many keys: sort them
		for i := range out {
			out[i] = int32(i)
		}
		slices.SortStableFunc(out, func(x, y int32) int { return int(key(seg[x]) - key(seg[y])) })
		start := 0
		for i := 1; i <= len(out); i++ {
			if i == len(out) || key(seg[out[i]]) != key(seg[out[start]]) {
				g.groups = append(g.groups, [2]int32{int32(start), int32(i)})
				start = i
			}
		}
		for i := range out {
			out[i] += base
		}
		return g.groups
	}
	if cap(g.count) < nkeys+1 {
		g.count = make([]int32, nkeys+1)
	}
	count := g.count[:nkeys+1]
	clear(count)
	for _, pl := range seg {
		count[key(pl)+1]++
	}
	for k := 1; k <= nkeys; k++ {
		if ranges && count[k] > 0 {
			g.groups = append(g.groups, [2]int32{count[k-1], count[k-1] + count[k]})
		}
		count[k] += count[k-1]
	}
	for i, pl := range seg {
		k := key(pl)
		out[count[k]] = base + int32(i)
		count[k]++
	}
	return g.groups
}

// roundRobin reorders out, grouped as groups say, taking the first of each
// group in turn, then the second of each, and so on.
func roundRobin(out []int32, groups [][2]int32) {
	src := slices.Clone(out)
	active := slices.Clone(groups)
	n := 0
	for pass := int32(0); len(active) > 0; pass++ {
		j := 0
		for _, g := range active {
			out[n] = src[g[0]+pass]
			n++
			if g[0]+pass+1 < g[1] {
				active[j] = g
				j++
			}
		}
		active = active[:j]
	}
}

// build turns ranked placements into the Map.
func (p *placer) build(ord []int32) *Map {
	m := &Map{Slots: p.slots, MapBy: p.mp, RankBy: p.rank, BindTo: p.bind}
	if p.user {
		m.RankBy = RankDefault
	}
	nodeOf := make([]int32, len(p.hosts))
	for i := range nodeOf {
		nodeOf[i] = -1
	}
	var hostOf []int
	for i := range p.hosts {
		if p.hosts[i].used > 0 {
			h := &p.hosts[i]
			nodeOf[i] = int32(len(m.Nodes))
			hostOf = append(hostOf, i)
			var t *topology.Topology
			if h.info != nil {
				t = h.info.t
			}
			m.Nodes = append(m.Nodes, Node{ID: len(m.Nodes), Name: h.name, Slots: h.slots, Topo: t})
		}
	}
	slab := make([]int, len(ord))
	off := 0
	for n := range m.Nodes {
		used := p.hosts[hostOf[n]].used
		m.Nodes[n].Procs = slab[off : off : off+used]
		off += used
	}
	m.Procs = make([]Proc, len(ord))
	bound := false
	for a := 0; a+1 < len(p.appStart); a++ {
		s, e := p.appStart[a], p.appStart[a+1]
		m.Apps = append(m.Apps, App{Offset: s, Size: e - s})
		for r := s; r < e; r++ {
			pl := p.placed[ord[r]]
			n := int(nodeOf[pl.host])
			node := &m.Nodes[n]
			local := len(node.Procs)
			node.Procs = append(node.Procs, r)
			pr := &m.Procs[r]
			*pr = Proc{Rank: r, App: a, AppRank: r - s, Node: n, LocalRank: local, NodeRank: local}
			if pl.bind >= 0 {
				pr.CPUs = p.binds[pl.bind]
				bound = true
			}
		}
	}
	if !bound {
		m.BindTo.To = BindNone
	}
	return m
}
