package topology

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// hwlocSpecs are descriptions hwloc accepts too (after hwlocSpec), chosen
// to cover its numbering rules: depth-first numbering, missing levels,
// NUMA as a level or attached at several depths, levels the model does not
// keep, weird nesting, and every form of indexes=.
var hwlocSpecs = []string{
	"pack:2 numa:2 l3:1 core:16 pu:2",
	"Package:2 NUMANode:2 L3Cache:1 Core:16 PU:2",
	"core:4 pu:2",
	"pack:2 core:8",
	"pack:4 l3:2 l2:4 l1:1 core:1 pu:4",
	"numa:2 pack:1 core:3 pu:2",
	"node:2 core:2 pu:1",
	"pack:3 core:5 pu:3",
	"socket:2 die:2 core:2 pu:2",
	"pack:2 group:2 core:2 pu:1",
	"pack:2 l1i:2 core:1 pu:1",
	"l2:2 l3:2 pu:1",
	"core:2 pack:2 pu:1",
	"pack:2 [numa] [numa] core:2 pu:1",
	"pack:2 [numa(indexes=5,4,3,2,1,0)] core:2 [numa] pu:1",
	"[numa] pack:2 core:2",
	"pack:2(indexes=1,0) core:2(indexes=3,1,2,0) pu:1",
	"pack:2 core:2 pu:2(indexes=0,2,4,6,1,3,5,7)",
	"pack:2 core:2 pu:2(indexes=7,6,5,4,3,2,1,0)",
	"pack:2 core:4 pu:2(indexes=2*8:1*2)",
	"pack:2 core:4 pu:2(indexes=8*2)",
	"pack:2 core:4 pu:2(indexes=Core:Package)",
	"pack:2 core:4 pu:2(indexes=Package:Core)",
	"pack:2 numa:2 core:2 pu:2(indexes=Core:NUMANode)",
	"(memory=2GB) pack:2 l3:1(size=32MB) core:2 pu:1",
	"pa:2 co:0x3 pu:02",
}

// TestSyntheticMatchesHwloc builds each description with hwloc and with
// ParseSynthetic and requires the very same model: same PUs in the same
// logical order, same objects, same OS indexes.
func TestSyntheticMatchesHwloc(t *testing.T) {
	for _, spec := range hwlocSpecs {
		got, err := ParseSynthetic(spec)
		if err != nil {
			t.Errorf("ParseSynthetic(%q): %v", spec, err)
			continue
		}
		in := hwlocSpec(spec)
		want := mustXML(t, lstopo(t, "--if", "synthetic", "--input", in, "--of", "xml"))
		if !got.Equal(want) {
			t.Errorf("%q:\nParseSynthetic: %v\nhwloc:          %v", spec, got, want)
		}
		// The logical order, straight from hwloc-calc.
		pus := strings.TrimSpace(string(runHwloc(t, "hwloc-calc", "--if", "synthetic", "--input", in, "--po", "-I", "pu", "--sep", ",", "all")))
		if pus != joinInts(got.LogicalCPUs()) {
			t.Errorf("%q: PUs in logical order %v, hwloc-calc says %s", spec, got.LogicalCPUs(), pus)
		}
		// hwloc's own synthetic export of it describes the same shape.
		export := strings.TrimSpace(string(lstopo(t, "--if", "synthetic", "--input", in, "--of", "synthetic")))
		back, err := ParseSynthetic(export)
		if err != nil {
			t.Errorf("hwloc's export %q of %q: %v", export, spec, err)
		} else if !sameShape(back, got) {
			t.Errorf("hwloc's export %q of %q:\n%v\nwant %v", export, spec, back, got)
		}
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func TestSyntheticCanonical(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"pack:2 numa:2 l3:1 core:16 pu:2", "pack:2 numa:2 l3:1 core:16 pu:2"},
		{"Package:2 NUMANode:2 L3Cache:1 Core:16 PU:2", "pack:2 numa:2 l3:1 core:16 pu:2"},
		{"core:4 pu:2", "core:4 pu:2"},
		{"pack:2 core:8", "pack:2 core:8 pu:1"},
		{"numa:2 pack:1 core:3 pu:2", "pack:2 numa:1 core:3 pu:2"},
		{"socket:2 die:2 core:2 pu:2", "pack:2 core:4 pu:2"},
		{"pack:2 [numa] core:2", "pack:2 numa:1 core:2 pu:1"},
		{"pack:2 [numa(indexes=1,0)] core:2", "pack:2 numa:1(indexes=1,0) core:2 pu:1"},
		{"pack:2 core:2 pu:2(indexes=0,2,4,6,1,3,5,7)", "pack:2 core:2 pu:2(indexes=4*2:1*4)"},
		{"pack:2 core:4 pu:2(indexes=2*8:1*2)", "pack:2 core:4 pu:2(indexes=2*8:1*2)"},
		{"pack:2 core:2 pu:2(indexes=7,6,5,4,3,2,1,0)", "pack:2 core:2 pu:2"},
		{"core:2 pu:2(indexes=0,1,2,300)", "core:2 pu:2(indexes=0,1,2,300)"},
		{"l2:2 l3:2 pu:1", "l2:2 l3:2 pu:1"},
		{"pack:2 [numa] [numa] core:2", "asymmetric: pack=2 numa=4 core=4 pu=4"},
		{"pack:2 [numa] core:2 [numa] pu:1", "asymmetric: pack=2 core=4 pu=4 numa=6"},
	} {
		topo, err := ParseSynthetic(c.spec)
		if err != nil {
			t.Errorf("ParseSynthetic(%q): %v", c.spec, err)
			continue
		}
		if got := topo.Synthetic(); got != c.want {
			t.Errorf("Synthetic() of %q = %q, want %q", c.spec, got, c.want)
		}
	}
}

// TestSyntheticRoundTrip: the canonical form describes the same topology.
func TestSyntheticRoundTrip(t *testing.T) {
	for _, spec := range hwlocSpecs {
		topo, err := ParseSynthetic(spec)
		if err != nil {
			t.Fatal(err)
		}
		canon := topo.Synthetic()
		if strings.HasPrefix(canon, "asymmetric") {
			continue
		}
		back, err := ParseSynthetic(canon)
		if err != nil {
			t.Errorf("%q -> %q: %v", spec, canon, err)
		} else if !sameShape(back, topo) || back.Synthetic() != canon {
			t.Errorf("%q -> %q -> %q", spec, canon, back.Synthetic())
		}
	}
}

func TestSyntheticNumbering(t *testing.T) {
	// Hand-checked against lstopo -p: PUs depth first, objects per level.
	topo, err := ParseSynthetic("pack:2 numa:2 l3:1 core:16 pu:2")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ        ObjType
		count      int
		i          int
		list       string
		os, puOf35 int
	}{
		{Machine, 1, 0, "0-127", 0, 0},
		{Package, 2, 1, "64-127", 1, 0},
		{NUMANode, 4, 3, "96-127", 3, 1},
		{L3Cache, 4, 2, "64-95", -1, 1},
		{Core, 64, 17, "34-35", 17, 17},
		{PU, 128, 35, "35", 35, 35},
	} {
		if n := topo.Count(c.typ); n != c.count {
			t.Errorf("Count(%s) = %d, want %d", c.typ, n, c.count)
		}
		if s := topo.CPUList(c.typ, c.i); s != c.list {
			t.Errorf("CPUList(%s, %d) = %q, want %q", c.typ, c.i, s, c.list)
		}
		if o := topo.Obj(c.typ, c.i); o.OSIndex != c.os || o.Index != c.i || o.Type != c.typ {
			t.Errorf("Obj(%s, %d) = %+v, want OS index %d", c.typ, c.i, o, c.os)
		}
		if e := topo.Enclosing(c.typ, 35); e != c.puOf35 {
			t.Errorf("Enclosing(%s, 35) = %d, want %d", c.typ, e, c.puOf35)
		}
	}
	if n := topo.Count(L2Cache); n != 0 {
		t.Errorf("Count(L2Cache) = %d, want 0", n)
	}
}

func TestSyntheticErrors(t *testing.T) {
	for _, spec := range []string{
		"", "   ", "pack", "pack:", "pack:0", "pack:-1", "pack:x", "pack:2 pu:2 core:2",
		"foo:2", "p:2", "machine:2 pu:1", "misc:2 pu:1", "pci:1 pu:1", "memcache:2 pu:1",
		"pack:2 pack:2", "core:2 core:2", "numa:2 numa:2", "pu:2 pu:2",
		"pack:2 numa:2 [numa] pu:1", "pack:2 [core] pu:1", "pack:2 [numa pu:1", "[numa(indexes=0,1)] pack:2",
		"pack:2(indexes=0) pu:1", "pack:2(indexes=0,0) pu:1", "pack:2(indexes=0,1,2) pu:1",
		"pack:2 pu:2(indexes=2*2:1*1)", "pack:2 pu:2(indexes=0*2)", "pack:2 pu:2(indexes=Core)",
		"pack:2 pu:2(indexes=PU:Package)", "pack:2(size=1) pu:1", "l3:2(memory=1) pu:1",
		"pack:2(colour=red) pu:1", "pack:2(indexes=1,0 pu:1", "pack:99999 pu:99999",
		"pack:65537", "l9:2 pu:1", "l3x:2 pu:1", "l4i:2 pu:1", "pack:2 (x) pu:1",
		"pu:2(indexes=0,70000)", "pack:2\n\nfoo:1",
	} {
		_, err := ParseSynthetic(spec)
		if err == nil {
			t.Errorf("ParseSynthetic(%q) succeeded", spec)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseSynthetic(%q): error on several lines: %q", spec, err)
		}
	}
}

// FuzzSynthetic: no panic, one-line errors, and a parsed topology is
// consistent and round-trips through its canonical form.
func FuzzSynthetic(f *testing.F) {
	for _, s := range hwlocSpecs {
		f.Add(s)
	}
	f.Add("pack:2 [numa(indexes=1,0)] core:2 pu:2(indexes=Core:Package)")
	f.Fuzz(func(t *testing.T, spec string) {
		topo, err := ParseSynthetic(spec)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error on several lines: %q", err)
			}
			return
		}
		checkInvariants(t, topo)
		canon := topo.Synthetic()
		if strings.HasPrefix(canon, "asymmetric") {
			return
		}
		back, err := ParseSynthetic(canon)
		if err != nil || !sameShape(back, topo) {
			t.Fatalf("%q -> %q does not parse back (%v)", spec, canon, err)
		}
	})
}

// checkInvariants verifies what the queries promise, from scratch.
func checkInvariants(t *testing.T, topo *Topology) {
	t.Helper()
	n := topo.NumPUs()
	if topo.Count(Machine) != 1 || topo.Count(NUMANode) == 0 || topo.Count(PU) != n || n == 0 {
		t.Fatalf("bad counts: %v", topo)
	}
	if !slices.Equal(topo.Levels(), nestingOrder(topo)) {
		t.Fatalf("levels %v", topo.Levels())
	}
	for typ := range numTypes {
		for i := range topo.Count(typ) {
			first, k := topo.PUs(typ, i)
			want := sortedSet(topo.LogicalCPUs()[first : first+k])
			if !topo.CPUs(typ, i).Equal(want) || topo.CPUList(typ, i) != want.String() {
				t.Fatalf("%s %d: CPUs %v, want %v", typ, i, topo.CPUs(typ, i), want)
			}
			for p := first; p < first+k; p++ {
				e := topo.Enclosing(typ, p)
				if f, k2 := topo.PUs(typ, e); e < 0 || p < f || p >= f+k2 || k2 > k {
					t.Fatalf("Enclosing(%s, %d) = %d", typ, p, e)
				}
			}
			lo, hi := topo.Inside(typ, i, PU)
			if lo != first || hi != first+k {
				t.Fatalf("Inside(%s, %d, PU) = %d, %d", typ, i, lo, hi)
			}
		}
	}
	var b bytes.Buffer
	b.WriteString(topo.String())
}
