package mapper

import (
	"fmt"
	"slices"

	"prun/topology"
)

// order ranks the placements: the result lists, for each global rank, the
// index of its placement. Ranks are contiguous per app, apps in order.
func (p *placer) order() ([]int32, error) {
	if p.rank.By == RankObject {
		return p.orderByObject()
	}
	ord := make([]int32, len(p.placed))
	if p.user {
		for i := range ord {
			ord[i] = int32(i)
		}
		return ord, nil
	}
	// Keys group placements by host (slot, node) or by host and mapped
	// object (fill, span), hosts in allocation order.
	byObj := p.rank.By == RankFill || p.rank.By == RankSpan
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
		rr := p.rank.By == RankNode || p.rank.By == RankSpan
		groups := g.group(seg, key, nkeys, out, int32(s), rr)
		if rr {
			roundRobin(out, groups)
		}
	}
	return ord, nil
}

// orderByObject ranks as Open MPI 4 does for --rank-by OBJECT: on each host
// in turn, its objects of that type take turns, each taking the first
// process not yet ranked (in mapping order) whose mapped object shares a CPU
// with it, until none takes any. :span takes the turns across every host's
// objects; :fill lets an object take all its processes before the next.
// Processes mapped by slot or node share the whole node, so any object
// takes them.
func (p *placer) orderByObject() ([]int32, error) {
	ord := make([]int32, 0, len(p.placed))
	objs := map[*topoInfo]*rankObjects{}
	hosts := make([]rankHost, len(p.hosts))
	var q rankQueues
	for a := 0; a+1 < len(p.appStart); a++ {
		s, e := p.appStart[a], p.appStart[a+1]
		seg := p.placed[s:e]
		if len(seg) == 0 {
			continue
		}
		clear(hosts)
		for _, pl := range seg {
			hosts[pl.host].left++
		}
		// Group the processes by host and locale: the queues objects
		// take from.
		nkeys := int32(0)
		for i := range hosts {
			h := &hosts[i]
			if h.left == 0 {
				continue
			}
			ro, err := p.rankObjects(&p.hosts[i], objs)
			if err != nil {
				return nil, err
			}
			h.objs, h.base = ro, nkeys
			nkeys += ro.nkeys
		}
		q.group(hosts, seg, s, nkeys)

		take := func(h *rankHost, o int) bool {
			if i := q.take(h, o); i >= 0 {
				ord = append(ord, i)
				return true
			}
			return false
		}
		// turns lets every object of hs take one process in turn until
		// none takes any.
		turns := func(hs []rankHost) {
			for took := true; took; {
				took = false
				for i := range hs {
					if h := &hs[i]; h.left > 0 {
						for o := range h.objs.cand {
							took = take(h, o) || took
						}
					}
				}
			}
		}
		switch {
		case p.rank.Span:
			turns(hosts)
		case p.rank.Fill:
			for i := range hosts {
				if h := &hosts[i]; h.left > 0 {
					for o := range h.objs.cand {
						for take(h, o) {
						}
					}
				}
			}
		default:
			for i := range hosts {
				turns(hosts[i : i+1])
			}
		}
		ord = q.rest(hosts, ord)
	}
	return ord, nil
}

// group queues seg, the placements of one app starting at index s, by
// host and locale (counting sort, mapping order kept within each group):
// the queues objects take from.
func (q *rankQueues) group(hosts []rankHost, seg []placement, s int, nkeys int32) {
	key := func(pl placement) int32 {
		h := &hosts[pl.host]
		return h.base + h.objs.keyOf[pl.obj]
	}
	q.reset(int(nkeys), len(seg))
	for _, pl := range seg {
		q.end[key(pl)]++
	}
	for k := int32(1); k < nkeys; k++ {
		q.end[k] += q.end[k-1]
	}
	for i := len(seg) - 1; i >= 0; i-- {
		k := key(seg[i])
		q.end[k]--
		q.slab[q.end[k]] = int32(s + i)
	}
	copy(q.head, q.end)
	for k := int32(0); k+1 < nkeys; k++ {
		q.end[k] = q.head[k+1]
	}
	q.end[nkeys-1] = int32(len(seg))
}

// rest appends to ord the processes on CPUs no ranking object holds (a PU
// outside every L3, say): last on their host, in mapping order.
func (q *rankQueues) rest(hosts []rankHost, ord []int32) []int32 {
	for i := range hosts {
		if h := &hosts[i]; h.left > 0 {
			var rest []int32
			for k := h.base; k < h.base+h.objs.nkeys; k++ {
				rest = append(rest, q.slab[q.head[k]:q.end[k]]...)
			}
			slices.Sort(rest)
			ord = append(ord, rest...)
		}
	}
	return ord
}

// rankSlowPath turns the one-queue-per-object shortcut off (tests compare).
var rankSlowPath bool

// rankObjects is what ranking by an object type needs of one topology:
// the queues a host's processes wait in and, for each object of that type,
// the queues it may take from. A queue holds the processes of one mapped
// Object ("locale"); when no locale spans two ranking objects (mapping by
// core, ranking by package) a queue holds a whole ranking object's, so
// that taking one is O(1).
type rankObjects struct {
	nkeys int32     // queues
	keyOf []int32   // per locale (one, the node, when mapping by slot, node...): its queue
	cand  [][]int32 // per ranking object: the queues it may take from
}

func (p *placer) rankObjects(h *host, cache map[*topoInfo]*rankObjects) (*rankObjects, error) {
	in := h.info
	if in == nil {
		return nil, fmt.Errorf("ranking by %s needs the topology of %s", p.rank, h.name)
	}
	if ro := cache[in]; ro != nil {
		return ro, nil
	}
	t, typ := in.t, p.rank.Obj
	if typ == topology.Core && t.Count(topology.Core) == 0 {
		typ = topology.PU // as mapping by core does on such a node
	}
	nobj := t.Count(typ)
	if nobj == 0 {
		return nil, fmt.Errorf("ranking by %s: %s has no %s to rank by", p.rank, h.name, p.rank.Obj)
	}
	nloc, locType := in.nobj, in.mapObj // Machine: one, the whole node
	// The locales that share a CPU with each ranking object, in order,
	// and how many ranking objects each locale touches.
	locs := make([][]int32, nobj)
	touches := make([]int32, nloc)
	for l := range nloc {
		first, n := t.PUs(locType, int(l))
		for pu := first; pu < first+n; pu++ {
			if o := t.Enclosing(typ, pu); o >= 0 {
				if c := locs[o]; len(c) == 0 || c[len(c)-1] != l {
					locs[o] = append(c, l)
					touches[l]++
				}
			}
		}
	}
	ro := &rankObjects{nkeys: nloc, keyOf: make([]int32, nloc), cand: locs}
	for l := range ro.keyOf {
		ro.keyOf[l] = int32(l)
	}
	if slices.Max(touches) <= 1 && !rankSlowPath {
		// One queue per ranking object, and one more for the processes no
		// ranking object holds.
		ro.nkeys, ro.cand = int32(nobj)+1, make([][]int32, nobj)
		for l := range ro.keyOf {
			ro.keyOf[l] = int32(nobj)
		}
		for o, ls := range locs {
			for _, l := range ls {
				ro.keyOf[l] = int32(o)
			}
			ro.cand[o] = []int32{int32(o)}
		}
	}
	cache[in] = ro
	return ro, nil
}

// rankHost is one host's share of an app while it is ranked.
type rankHost struct {
	objs *rankObjects
	base int32 // its first key in rankQueues
	left int   // processes not yet ranked
}

// rankQueues holds an app's placement indices grouped by (host, locale)
// key, mapping order within a key: key k's unranked ones are
// slab[head[k]:end[k]].
type rankQueues struct {
	slab, head, end []int32
}

func (q *rankQueues) reset(nkeys, n int) {
	if cap(q.head) < nkeys {
		q.head, q.end = make([]int32, nkeys), make([]int32, nkeys)
	}
	q.head, q.end = q.head[:nkeys], q.end[:nkeys]
	clear(q.end)
	if cap(q.slab) < n {
		q.slab = make([]int32, n)
	}
	q.slab = q.slab[:n]
}

// take removes and returns the first process of h, in mapping order, that
// ranking object o may take, or -1.
func (q *rankQueues) take(h *rankHost, o int) int32 {
	if h.left == 0 {
		return -1
	}
	best, bk := int32(-1), int32(-1)
	for _, l := range h.objs.cand[o] {
		if k := h.base + l; q.head[k] < q.end[k] {
			if i := q.slab[q.head[k]]; best < 0 || i < best {
				best, bk = i, k
			}
		}
	}
	if best >= 0 {
		q.head[bk]++
		h.left--
	}
	return best
}

// grouper sorts placements stably by key, reusing its buffers.
type grouper struct {
	count  []int32
	groups [][2]int32
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
		m.RankBy = RankPolicy{}
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
