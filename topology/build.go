package topology

import (
	"fmt"
	"slices"
)

// node is one object of a topology tree on its way to a Topology. The three
// sources (synthetic, XML, sysfs) each build such a tree; build flattens it.
type node struct {
	typ      ObjType // noType for objects kept only for their shape
	os       int     // OS index, -1 if unknown; for a PU its CPU number
	children []*node // normal children: they contain PUs
	mem      []*node // NUMA nodes attached here (hwloc 2 memory children)
	// memory marks a NUMANode or MemCache without normal children: it holds
	// no PU and takes the CPUs of the nearest ancestor that has some.
	memory bool
	min    int // smallest CPU below, set by prune
}

// maxTreeDepth bounds recursion on trees from untrusted input (real
// topologies are a dozen levels deep); the sources enforce it.
const maxTreeDepth = 128

// build turns a tree into a Topology. allowed, if not nil, drops the other
// PUs and then every object left without PU, as hwloc does for the CPUs a
// process may not use.
func build(root *node, allowed CPUSet) (*Topology, error) {
	if kept, _ := prune(root, allowed); !kept {
		return nil, fmt.Errorf("topology has no usable PU")
	}
	t := &Topology{}
	var hidden []span // objects kept for their shape only
	var visit func(n *node)
	visit = func(n *node) {
		first := int32(len(t.pus))
		var self int32 = -1
		if n.typ != noType {
			self = addObject(&t.levels[n.typ], first, n.os)
		}
		if n.typ == PU {
			t.pus = append(t.pus, n.os)
		}
		for _, c := range n.children {
			visit(c)
		}
		count := int32(len(t.pus)) - first
		if self >= 0 {
			t.levels[n.typ].count[self] = count
		} else {
			hidden = append(hidden, span{first, count})
		}
		// hwloc lists memory children after the normal subtree: NUMA
		// nodes attached deeper come first in its NUMA level.
		for _, m := range n.mem {
			i := addObject(&t.levels[NUMANode], first, m.os)
			t.levels[NUMANode].count[i] = count
		}
	}
	visit(root)

	n := len(t.pus)
	if c := t.Count(Machine); c > 1 {
		return nil, fmt.Errorf("topology has %d machines", c)
	} else if c == 0 {
		t.levels[Machine] = level{first: []int32{0}, count: []int32{int32(n)}, os: []int32{0}}
	}
	// A node always has memory: like hwloc, assume one machine-wide NUMA
	// node when none is known.
	if t.Count(NUMANode) == 0 {
		t.levels[NUMANode] = level{first: []int32{0}, count: []int32{int32(n)}, os: []int32{0}}
	}
	// As many flags as the highest PU number needs, not MaxCPUs: 64 KiB
	// zeroed on every launch is 16 pages to fault in.
	top := -1
	for _, c := range t.pus {
		if c < 0 || c >= MaxCPUs {
			return nil, fmt.Errorf("PU number %d out of range", c)
		}
		top = max(top, c)
	}
	seen := make([]bool, top+1)
	for _, c := range t.pus {
		if seen[c] {
			return nil, fmt.Errorf("PU number %d appears twice", c)
		}
		seen[c] = true
	}
	for typ := range numTypes {
		l := &t.levels[typ]
		for i := 1; i < len(l.first) && !l.nested; i++ {
			l.nested = l.first[i] < l.first[i-1]+l.count[i-1]
		}
		// Only NUMA nodes nest (memory attached at several depths); hwloc
		// gives no other nesting, but an XML file may say anything.
		if l.nested && typ != NUMANode {
			return nil, fmt.Errorf("%s objects nest or overlap", typ)
		}
		l.index(t.pus)
	}
	t.order = nestingOrder(t)
	t.synth = synthetic(t, hidden)
	return t, nil
}

func addObject(l *level, first int32, os int) int32 {
	l.first = append(l.first, first)
	l.count = append(l.count, 0)
	l.os = append(l.os, int32(os))
	return int32(len(l.first) - 1)
}

// prune drops PUs outside allowed and objects without PUs, moves memory
// objects to the mem list of the nearest ancestor with PUs, and sorts
// children by their smallest CPU: hwloc orders siblings by cpuset, and that
// order is the logical order. It reports whether n is kept.
func prune(n *node, allowed CPUSet) (kept bool, floating []*node) {
	if n.typ == PU {
		n.min = n.os
		n.children = nil
		return allowed == nil || allowed.Contains(n.os), nil
	}
	floating = n.mem
	n.mem = nil
	var kids []*node
	for _, c := range n.children {
		k, fl := prune(c, allowed)
		if k {
			kids = append(kids, c)
		}
		floating = append(floating, fl...)
	}
	if n.memory {
		if n.typ == NUMANode {
			floating = append([]*node{n}, floating...)
		}
		return false, floating
	}
	if len(kids) == 0 {
		return false, nil // its memory goes with it: no CPU is near it
	}
	slices.SortStableFunc(kids, func(a, b *node) int { return a.min - b.min })
	n.children, n.mem, n.min = kids, floating, kids[0].min
	return true, nil
}

// index derives what the queries need: each object's sorted CPUs and list
// string, and for each PU the innermost object holding it.
func (l *level) index(pus []int) {
	l.off = make([]int32, len(l.first)+1)
	l.lists = make([]string, len(l.first))
	l.ofPU = make([]int32, len(pus))
	for i := range l.ofPU {
		l.ofPU[i] = -1
	}
	for i := range l.first {
		a, b := int(l.first[i]), int(l.first[i]+l.count[i])
		start := len(l.cpus)
		l.cpus = append(l.cpus, pus[a:b]...)
		set := CPUSet(l.cpus[start:])
		slices.Sort(set)
		l.off[i+1] = int32(len(l.cpus))
		l.lists[i] = set.String()
		// Keep the smallest object holding the PU; among equal ones the
		// first (several NUMA nodes can share CPUs: DDR and HBM).
		for p := a; p < b; p++ {
			if cur := l.ofPU[p]; cur < 0 || l.count[cur] > l.count[i] {
				l.ofPU[p] = int32(i)
			}
		}
	}
}
