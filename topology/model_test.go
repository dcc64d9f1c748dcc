package topology

import (
	"fmt"
	"testing"
)

func TestParseObjType(t *testing.T) {
	for typ := range numTypes {
		if got, err := ParseObjType(typ.String()); err != nil || got != typ {
			t.Errorf("ParseObjType(%q) = %v, %v", typ.String(), got, err)
		}
	}
	for in, want := range map[string]ObjType{"PU": PU, "Socket": Package, "node": Machine, "NUMANode": NUMANode, "L3": L3Cache, "l1d": L1Cache} {
		if got, err := ParseObjType(in); err != nil || got != want {
			t.Errorf("ParseObjType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "cpu", "l4", "board\n"} {
		if _, err := ParseObjType(in); err == nil {
			t.Errorf("ParseObjType(%q) succeeded", in)
		}
	}
	if s := ObjType(42).String(); s != "ObjType(42)" {
		t.Errorf("String() = %q", s)
	}
}

func TestQueries(t *testing.T) {
	topo, err := ParseSynthetic("pack:2 numa:2 l3:1 core:16 pu:2(indexes=2*64:1*2)")
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, topo)
	if topo.NumPUs() != 128 || topo.CPU(1) != 64 || topo.CPU(2) != 1 {
		t.Errorf("PUs %v", topo.LogicalCPUs())
	}
	// Core 17 is the second core of NUMA node 1; its hyperthreads are
	// CPUs 17 and 81.
	if got := topo.CPUList(Core, 17); got != "17,81" {
		t.Errorf("CPUList(Core, 17) = %q", got)
	}
	if got := topo.CPUList(NUMANode, 1); got != "16-31,80-95" {
		t.Errorf("CPUList(NUMANode, 1) = %q", got)
	}
	if o := topo.Obj(Core, 17); o != (Object{Type: Core, Index: 17, OSIndex: 17, First: 34, NumPUs: 2}) {
		t.Errorf("Obj(Core, 17) = %+v", o)
	}
	for _, c := range []struct {
		outer     ObjType
		i         int
		inner     ObjType
		wlo, whi  int
		enclosing int // of outer's first PU, by inner
	}{
		{Machine, 0, Package, 0, 2, 0},
		{Package, 1, Core, 32, 64, 32},
		{NUMANode, 2, L3Cache, 2, 3, 2},
		{L3Cache, 2, NUMANode, 2, 3, 2}, // same PUs: inside either way
		{Core, 5, Package, 1, 1, 0},     // none: a package is not inside a core
		{Core, 5, PU, 10, 12, 10},
		{PU, 7, Core, 4, 4, 3},          // none
		{Package, 0, L2Cache, 0, 0, -1}, // no L2 level
	} {
		lo, hi := topo.Inside(c.outer, c.i, c.inner)
		if lo != c.wlo || hi != c.whi {
			t.Errorf("Inside(%s, %d, %s) = %d, %d; want %d, %d", c.outer, c.i, c.inner, lo, hi, c.wlo, c.whi)
		}
		first, _ := topo.PUs(c.outer, c.i)
		if e := topo.Enclosing(c.inner, first); e != c.enclosing {
			t.Errorf("Enclosing(%s, %d) = %d, want %d", c.inner, first, e, c.enclosing)
		}
	}
	if got := fmt.Sprint(topo.Levels()); got != "[machine package numa l3cache core hwthread]" {
		t.Errorf("Levels() = %s", got)
	}
}

// TestNestedNUMA: NUMA nodes attached at several depths (hwloc 2 memory
// children, e.g. DDR per package and HBM per die): hwloc's logical order,
// innermost for Enclosing, and Inside still finds the nodes of an object.
func TestNestedNUMA(t *testing.T) {
	topo, err := ParseSynthetic("pack:2 [numa] core:2 [numa] pu:2")
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, topo)
	if got := levelString(topo, NUMANode); got != " P#0{0-1} P#1{2-3} P#2{0-3} P#3{4-5} P#4{6-7} P#5{4-7}" {
		t.Errorf("NUMA nodes:%s", got)
	}
	if e := topo.Enclosing(NUMANode, 3); e != 1 {
		t.Errorf("Enclosing(NUMANode, 3) = %d, want 1", e)
	}
	if lo, hi := topo.Inside(Package, 1, NUMANode); lo != 3 || hi != 6 {
		t.Errorf("Inside(Package, 1, NUMANode) = %d, %d; want 3, 6", lo, hi)
	}
	if lo, hi := topo.Inside(NUMANode, 5, Core); lo != 2 || hi != 4 {
		t.Errorf("Inside(NUMANode, 5, Core) = %d, %d; want 2, 4", lo, hi)
	}
	if lo, hi := topo.Inside(Core, 1, NUMANode); lo != 1 || hi != 2 {
		t.Errorf("Inside(Core, 1, NUMANode) = %d, %d; want 1, 2", lo, hi)
	}
}

func TestEqual(t *testing.T) {
	a, _ := ParseSynthetic("pack:2 core:2 pu:2")
	for _, spec := range []string{"pack:2 core:2 pu:2(indexes=0,2,1,3,4,5,6,7)", "pack:2(indexes=1,0) core:2 pu:2", "pack:2 l2:2 core:1 pu:2", "pack:2 numa:1 core:2 pu:2"} {
		b, err := ParseSynthetic(spec)
		if err != nil {
			t.Fatal(err)
		}
		if a.Equal(b) || b.Equal(a) {
			t.Errorf("%q equals %q", spec, a.Synthetic())
		}
	}
	b, _ := ParseSynthetic("Package:2 Core:2 PU:2")
	if !a.Equal(b) || !a.Equal(a) {
		t.Error("equal topologies differ")
	}
}

// largeSpec is a typical two-socket node: 128 hardware threads.
const largeSpec = "pack:2 numa:2 l3:1 core:16 pu:2"

// BenchmarkShared: 10,000 nodes refer to one topology (the mapper's case:
// one *Topology per distinct hardware), and a pass visits every PU of every
// node with what a mapper asks: its OS CPU and its core. It must not
// allocate: 1,000,000 ranks on 10,000 such nodes map in a few ms.
func BenchmarkShared(b *testing.B) {
	topo, err := ParseSynthetic(largeSpec)
	if err != nil {
		b.Fatal(err)
	}
	type node struct {
		name string
		topo *Topology
	}
	nodes := make([]node, 10000)
	for i := range nodes {
		nodes[i] = node{fmt.Sprintf("node%05d", i), topo}
	}
	b.ReportAllocs()
	sum := 0
	for b.Loop() {
		for _, n := range nodes {
			t := n.topo
			for pu := range t.NumPUs() {
				sum += t.CPU(pu) + t.Enclosing(Core, pu)
			}
		}
	}
	if sum == 0 {
		b.Fatal("no PU visited")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(nodes)), "ns/node")
}

func BenchmarkParseSynthetic(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSynthetic(largeSpec); err != nil {
			b.Fatal(err)
		}
	}
}
