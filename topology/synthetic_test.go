package topology

import (
	"bytes"
	"math/rand/v2"
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
	"pack:2 core:2(indexes=0,1,0,1) pu:1",
	"pack:2 l3:1(indexes=1,0) l2:2 l1:1 core:1 pu:2",
	"numa:1(indexes=3) core:2 pu:1",
	"core:2 pu:1 [numa]",
	"core:2 [numa] pu:2 [numa]",
	"pack:2 core:1 [numa] pu:1 [numa]",
	"pack:2 numa:2 l3:1 l2:4 l1:1 core:2 pu:2(indexes=L2Cache:Package:NUMANode)",
}

// TestSyntheticMatchesHwloc builds each description with hwloc and with
// ParseSynthetic and requires the very same model: ParseXML of hwloc's XML
// export is Equal (same PUs in the same logical order, same objects, same OS
// indexes), hwloc-calc lists every level's objects in the same logical
// order, and hwloc reads our canonical form back to the same topology.
func TestSyntheticMatchesHwloc(t *testing.T) {
	for _, spec := range hwlocSpecs {
		got, err := ParseSynthetic(spec)
		if err != nil {
			t.Errorf("ParseSynthetic(%q): %v", spec, err)
			continue
		}
		in := hwlocSpec(spec)
		want := mustXML(t, lstopo(t, "--if", "synthetic", "--input", in, "--of", "xml", "-"))
		if !got.Equal(want) {
			t.Errorf("%q:\nParseSynthetic: %v\nhwloc:          %v", spec, got, want)
		}
		// The logical order of every level, straight from hwloc-calc.
		for _, typ := range got.Levels() {
			if typ == Machine {
				continue
			}
			os := make([]int, got.Count(typ))
			for i := range os {
				os[i] = got.Obj(typ, i).OSIndex
			}
			calc := strings.TrimSpace(string(runHwloc(t, "hwloc-calc", "--if", "synthetic", "--input", in, "--po", "-I", hwlocTypes[typ], "--sep", ",", "all")))
			if calc != joinInts(os) {
				t.Errorf("%q: %s OS indexes in logical order %v, hwloc-calc says %s", spec, typ, os, calc)
			}
		}
		// hwloc's own synthetic export of it describes the same shape.
		export := strings.TrimSpace(string(lstopo(t, "--if", "synthetic", "--input", in, "--of", "synthetic")))
		back, err := ParseSynthetic(export)
		if err != nil {
			t.Errorf("hwloc's export %q of %q: %v", export, spec, err)
		} else if !sameShape(back, got) {
			t.Errorf("hwloc's export %q of %q:\n%v\nwant %v", export, spec, back, got)
		}
		// And hwloc reads our canonical form as we do.
		canon := got.Synthetic()
		fromCanon := mustXML(t, lstopo(t, "--if", "synthetic", "--input", canon, "--of", "xml", "-"))
		if !fromCanon.Equal(got) {
			t.Errorf("hwloc reads our %q of %q as\n%v\nwant %v", canon, spec, fromCanon, got)
		}
	}
}

// hwlocTypes are hwloc's names of the model's types.
var hwlocTypes = [numTypes]string{"Machine", "Package", "NUMANode", "L3Cache", "L2Cache", "L1Cache", "Core", "PU"}

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
		// hwloc sorts siblings by CPU: pack P#1 holds PUs 0-3 and comes first.
		{"pack:2 core:2 pu:2(indexes=7,6,5,4,3,2,1,0)", "pack:2(indexes=1,0) core:2(indexes=3,2,1,0) pu:2"},
		{"pack:2 core:2(indexes=0,1,0,1)", "pack:2 core:2(indexes=0,1,0,1) pu:1"},
		{"pack:2 l3:1(indexes=1,0) l2:1(indexes=0,1) core:1", "pack:2 l3:1(indexes=1,0) l2:1(indexes=1*2) core:1 pu:1"},
		{"numa:1(indexes=3) core:2", "numa:1(indexes=3) core:2 pu:1"},
		{"[numa(indexes=0)] core:2", "core:2 pu:1"},
		{"core:2 pu:2(indexes=0,1,2,300)", "core:2 pu:2(indexes=0,1,2,300)"},
		{"l2:2 l3:2 pu:1", "l2:2 l3:2 pu:1"},
		{"pack:2 [numa] [numa] core:2", "pack:2 [numa] [numa] core:2 pu:1"},
		{"pack:2 [numa] core:2 [numa] pu:1", "pack:2 [numa] core:2 [numa] pu:1"},
		{"pack:2 [numa(indexes=5,4,3,2,1,0)] core:2 [numa] pu:1", "pack:2 [numa(indexes=5,4,3,2,1,0)] core:2 [numa] pu:1"},
		{"pack:2 core:1 [numa] pu:1 [numa]", "pack:2 [numa] [numa] core:1 pu:1"},
		{"core:2 pu:2 [numa]", "core:2 numa:2 pu:1"},
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

// TestSyntheticRoundTrip: the canonical form describes the same topology,
// OS indexes included, and is a fixed point.
func TestSyntheticRoundTrip(t *testing.T) {
	for _, spec := range hwlocSpecs {
		topo, err := ParseSynthetic(spec)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, topo)
		canon := topo.Synthetic()
		back, err := ParseSynthetic(canon)
		if err != nil {
			t.Errorf("%q -> %q: %v", spec, canon, err)
		} else if !back.Equal(topo) || back.Synthetic() != canon {
			t.Errorf("%q -> %q -> %q\n%v\nwant %v", spec, canon, back.Synthetic(), back, topo)
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
		"pack:2(indexes=0) pu:1", "pu:2(indexes=0,0)", "numa:2(indexes=1,1) pu:1",
		"pack:2 [numa(indexes=1,1)] pu:1", "pack:2 pu:2(indexes=1*2:1*2)", "pack:2(indexes=0,1,2) pu:1",
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

// FuzzParseSynthetic: no panic, one-line errors, and a parsed topology is
// consistent and its canonical form parses back to an Equal topology with
// the same canonical form.
func FuzzParseSynthetic(f *testing.F) {
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
		back, err := ParseSynthetic(canon)
		if err != nil {
			t.Fatalf("%q -> %q does not parse back: %v", spec, canon, err)
		}
		if !back.Equal(topo) || back.Synthetic() != canon {
			t.Fatalf("%q -> %q -> %q\n%v\nwant %v", spec, canon, back.Synthetic(), back, topo)
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

// randomSpec makes a synthetic description hwloc accepts: modeled and
// unmodeled levels in any order, NUMA nodes as a level or attached at any
// depth, and indexes= lists (repeated on levels where hwloc allows it).
func randomSpec(r *rand.Rand) string {
	pool := []string{"pack", "numa", "l3", "l2", "l1", "core", "group", "die", "l1i"}
	r.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	attach := r.IntN(3) == 0
	var parts []string
	total := 1
	permuted := func(n int, distinct bool) string {
		idx := r.Perm(n)
		if !distinct {
			for i := range idx {
				idx[i] = r.IntN(n)
			}
		}
		return "(indexes=" + joinInts(idx) + ")"
	}
	for _, name := range pool[:r.IntN(len(pool)+1)] {
		if name == "numa" && attach {
			continue
		}
		arity := 1 + r.IntN(3)
		total *= arity
		part := name + ":" + strconv.Itoa(arity)
		if name != "group" && name != "die" && name != "l1i" && r.IntN(4) == 0 {
			part += permuted(total, name == "numa")
		}
		parts = append(parts, part)
		if attach && r.IntN(3) == 0 {
			parts = append(parts, "[numa]")
		}
	}
	arity := 1 + r.IntN(3)
	total *= arity
	pu := "pu:" + strconv.Itoa(arity)
	if r.IntN(3) == 0 {
		pu += permuted(total, true)
	}
	parts = append(parts, pu)
	if attach && r.IntN(4) == 0 {
		parts = append(parts, "[numa]")
	}
	return strings.Join(parts, " ")
}

// TestSyntheticRandom: random descriptions round-trip through Synthetic,
// and for a sample of them, hwloc builds the same topology from the
// description and from its canonical form.
func TestSyntheticRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	compared := 0
	for i := range 3000 {
		spec := randomSpec(r)
		topo, err := ParseSynthetic(spec)
		if err != nil {
			t.Errorf("ParseSynthetic(%q): %v", spec, err)
			continue
		}
		checkInvariants(t, topo)
		canon := topo.Synthetic()
		if back, err := ParseSynthetic(canon); err != nil || !back.Equal(topo) || back.Synthetic() != canon {
			t.Errorf("%q -> %q: %v\n%v\nwant %v", spec, canon, err, back, topo)
		}
		if i%20 == 0 && topo.NumPUs() <= 1024 { // hwloc's XML of 60,000 PUs takes a while
			compared++
			want := mustXML(t, lstopo(t, "--if", "synthetic", "--input", spec, "--of", "xml", "-"))
			if !topo.Equal(want) {
				t.Errorf("%q:\nParseSynthetic: %v\nhwloc:          %v", spec, topo, want)
			}
			if fromCanon := mustXML(t, lstopo(t, "--if", "synthetic", "--input", canon, "--of", "xml", "-")); !fromCanon.Equal(topo) {
				t.Errorf("hwloc reads our %q of %q as\n%v\nwant %v", canon, spec, fromCanon, topo)
			}
		}
	}
	if compared < 50 {
		t.Errorf("only %d descriptions compared with hwloc", compared)
	}
}
