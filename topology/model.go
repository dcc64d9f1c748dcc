package topology

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ObjType is a kind of hardware object that placement can map or bind by.
// The order is the usual nesting, outermost first; it only breaks ties (two
// types whose objects have the same CPUs nest in this order), because real
// machines nest some types either way round (a NUMA node may hold several
// packages or sit inside one).
type ObjType uint8

// The object types a Topology models, outermost first.
const (
	Machine  ObjType = iota // the whole node
	Package                 // a socket
	NUMANode                // a memory node with the CPUs local to it
	L3Cache                 // a level 3 cache and the CPUs sharing it
	L2Cache                 // a level 2 cache and the CPUs sharing it
	L1Cache                 // the L1 data (or unified) cache
	Core                    // a physical core
	PU                      // a hardware thread (processing unit): one OS CPU
	numTypes
)

// noType marks objects a tree carries for their shape only (Group, Die,
// L1i, L4...): they order their children but are not placement targets.
const noType = numTypes

var typeNames = [numTypes]string{"machine", "package", "numa", "l3cache", "l2cache", "l1cache", "core", "hwthread"}

// String returns the prterun spelling, which ParseObjType accepts.
func (t ObjType) String() string {
	if t < numTypes {
		return typeNames[t]
	}
	return fmt.Sprintf("ObjType(%d)", uint8(t))
}

// ParseObjType reads a user's spelling of an object type, as in
// --map-by/--bind-to/ppr:N:resource. Case does not matter.
func ParseObjType(s string) (ObjType, error) {
	switch strings.ToLower(s) {
	case "hwthread", "pu", "thread":
		return PU, nil
	case "core":
		return Core, nil
	case "l1cache", "l1", "l1d", "l1dcache":
		return L1Cache, nil
	case "l2cache", "l2":
		return L2Cache, nil
	case "l3cache", "l3":
		return L3Cache, nil
	case "numa", "numanode":
		return NUMANode, nil
	case "package", "socket":
		return Package, nil
	case "node", "machine":
		return Machine, nil
	}
	return 0, fmt.Errorf("unknown object type %q (want hwthread, core, l1cache, l2cache, l3cache, numa, package or node)", s)
}

// Object describes one object of a topology, as Obj returns it. Its PUs
// are the logical PUs First..First+NumPUs-1: every object covers a
// contiguous run of PUs in logical (depth-first, hwloc) order, which is what
// makes the queries below O(1).
type Object struct {
	Type    ObjType // its type
	Index   int     // logical index among the objects of its type
	OSIndex int     // OS (physical) index; -1 when unknown (caches of synthetic topologies)
	First   int     // logical index of its first PU
	NumPUs  int     // how many PUs it covers
}

// Topology is the immutable model of one node. Nodes with the same hardware
// share one *Topology: nothing in it is per node, and every accessor only
// reads, so it is safe for concurrent use. Slices it returns are views into
// it and must not be modified.
type Topology struct {
	pus    []int // OS CPU number of each PU, in logical order
	levels [numTypes]level
	order  []ObjType // present types, outermost first
	synth  string
}

// level holds the objects of one type in hwloc's logical order: by First,
// except that NUMA nodes attached at several depths nest (nested is set),
// and come inner ones first.
type level struct {
	nested           bool
	first, count, os []int32
	off              []int32  // object i's sorted CPUs are cpus[off[i]:off[i+1]]
	cpus             []int    // sorted OS CPU numbers of each object, concatenated
	lists            []string // the same as Linux list strings
	ofPU             []int32  // innermost object holding each logical PU, or -1
}

// NumPUs is the number of hardware threads (usable CPUs).
func (t *Topology) NumPUs() int { return len(t.pus) }

// CPU returns the OS CPU number of logical PU pu.
func (t *Topology) CPU(pu int) int { return t.pus[pu] }

// LogicalCPUs returns the OS CPU numbers of all PUs in logical order (not
// sorted: hyperthreads usually interleave), without copying.
func (t *Topology) LogicalCPUs() []int { return t.pus[:len(t.pus):len(t.pus)] }

// Count returns the number of objects of type typ (0 when the machine has no
// such level, e.g. no L3).
func (t *Topology) Count(typ ObjType) int { return len(t.levels[typ].first) }

// Obj returns object i of type typ. It panics if i is out of range.
func (t *Topology) Obj(typ ObjType, i int) Object {
	l := &t.levels[typ]
	return Object{Type: typ, Index: i, OSIndex: int(l.os[i]), First: int(l.first[i]), NumPUs: int(l.count[i])}
}

// PUs returns the logical PU range [first, first+n) of object i of type typ.
func (t *Topology) PUs(typ ObjType, i int) (first, n int) {
	l := &t.levels[typ]
	return int(l.first[i]), int(l.count[i])
}

// CPUs returns the sorted OS CPU numbers of object i of type typ, without
// copying.
func (t *Topology) CPUs(typ ObjType, i int) CPUSet {
	l := &t.levels[typ]
	a, b := l.off[i], l.off[i+1]
	return CPUSet(l.cpus[a:b:b])
}

// CPUList returns the CPUs of object i of type typ as a Linux list string
// ("0-3,8"), precomputed.
func (t *Topology) CPUList(typ ObjType, i int) string { return t.levels[typ].lists[i] }

// Enclosing returns the index of the object of type typ that holds logical
// PU pu, or -1 if no object of that type does. Where NUMA nodes nest (memory
// attached at several depths) the innermost one is returned.
func (t *Topology) Enclosing(typ ObjType, pu int) int { return int(t.levels[typ].ofPU[pu]) }

// Inside returns the index range [lo, hi) of the objects of type inner that
// lie within object i of type outer (e.g. the cores of package 1). An inner
// object with exactly the outer object's PUs counts as inside. O(log n), or
// O(n) for nested NUMA nodes.
func (t *Topology) Inside(outer ObjType, i int, inner ObjType) (lo, hi int) {
	o := &t.levels[outer]
	start, end := o.first[i], o.first[i]+o.count[i]
	l := &t.levels[inner]
	within := func(j int) bool { return l.first[j] >= start && l.first[j]+l.count[j] <= end }
	n := len(l.first)
	if l.nested {
		// The objects within one object are still consecutive (hwloc lists
		// a subtree's NUMA nodes together), just not sorted by First.
		for lo = 0; lo < n && !within(lo); lo++ {
		}
		for hi = lo; hi < n && within(hi); hi++ {
		}
		return lo, hi
	}
	lo = sort.Search(n, func(j int) bool { return l.first[j] >= start })
	hi = sort.Search(n, func(j int) bool { return l.first[j] >= end })
	// An object starting at the same PU but larger contains the outer one.
	for lo < hi && !within(lo) {
		lo++
	}
	return lo, hi
}

// Levels returns the types this topology has, outermost first: by number
// of objects, ties in ObjType order (the order Synthetic prints them in).
// Machine, NUMANode and PU are always present.
func (t *Topology) Levels() []ObjType { return t.order[:len(t.order):len(t.order)] }

// nestingOrder sorts the present types by object count, ties by ObjType
// order: an enclosing level never has more objects than the one inside it.
func nestingOrder(t *Topology) []ObjType {
	var types []ObjType
	for typ := Machine; typ < numTypes; typ++ {
		if t.Count(typ) > 0 {
			types = append(types, typ)
		}
	}
	slices.SortStableFunc(types, func(a, b ObjType) int { return t.Count(a) - t.Count(b) })
	return types
}

// Equal reports whether two topologies are the same: same PUs in the same
// logical order, and the same objects with the same OS indexes.
func (t *Topology) Equal(u *Topology) bool {
	if t == u {
		return true
	}
	if !slices.Equal(t.pus, u.pus) {
		return false
	}
	for typ := range numTypes {
		a, b := &t.levels[typ], &u.levels[typ]
		if !slices.Equal(a.first, b.first) || !slices.Equal(a.count, b.count) || !slices.Equal(a.os, b.os) {
			return false
		}
	}
	return true
}

// String summarizes the topology for humans and test failures.
func (t *Topology) String() string {
	var b strings.Builder
	b.WriteString(t.synth)
	for _, typ := range t.order {
		fmt.Fprintf(&b, "\n%s:", typ)
		for i := range t.Count(typ) {
			fmt.Fprintf(&b, " P#%d{%s}", t.levels[typ].os[i], t.levels[typ].lists[i])
		}
	}
	return b.String()
}
