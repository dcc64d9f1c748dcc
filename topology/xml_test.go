package topology

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestXMLThisMachine parses this machine's `lstopo --of xml` and checks it
// against what hwloc-calc says of the machine: the number of PUs, cores and
// packages, each level's OS indexes in logical order, and the PUs of each
// package and core.
func TestXMLThisMachine(t *testing.T) {
	topo := mustXML(t, lstopo(t, "--of", "xml", "-"))
	checkInvariants(t, topo)
	calc := func(args ...string) string {
		return strings.TrimSpace(string(runHwloc(t, "hwloc-calc", args...)))
	}
	for _, typ := range []ObjType{PU, Core, Package, NUMANode, L3Cache, L2Cache, L1Cache} {
		n, err := strconv.Atoi(calc("-N", hwlocTypes[typ], "all"))
		if err != nil {
			t.Fatalf("hwloc-calc -N %s: %v", hwlocTypes[typ], err)
		}
		if n != topo.Count(typ) {
			t.Errorf("%d %s objects, hwloc-calc says %d", topo.Count(typ), typ, n)
		}
		if n == 0 {
			continue
		}
		os := make([]int, n)
		for i := range os {
			os[i] = topo.Obj(typ, i).OSIndex
		}
		if s := calc("--po", "-I", hwlocTypes[typ], "--sep", ",", "all"); s != joinInts(os) {
			t.Errorf("%s OS indexes in logical order %v, hwloc-calc says %s", typ, os, s)
		}
	}
	if topo.NumPUs() != topo.Count(PU) || joinInts(topo.LogicalCPUs()) != calc("--po", "-I", "PU", "--sep", ",", "all") {
		t.Errorf("PUs %v", topo.LogicalCPUs())
	}
	// The PUs of each package and core (the first 32 cores: one process
	// per object).
	for _, typ := range []ObjType{Package, Core} {
		for i := range min(topo.Count(typ), 32) {
			want := calc("--po", "-I", "PU", "--sep", ",", hwlocTypes[typ]+":"+strconv.Itoa(i))
			if got := joinInts(topo.CPUs(typ, i)); got != want {
				t.Errorf("%s %d: PUs %s, hwloc-calc says %s", typ, i, got, want)
			}
		}
	}
	t.Logf("this machine: %s", topo.Synthetic())
}

// hwloc1XML is the shape of an hwloc 1.x export: NUMA nodes are ordinary
// parents, caches are "Cache" with a depth, packages may be "Socket".
const hwloc1XML = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc.dtd">
<topology>
  <object type="Machine" os_index="0" cpuset="0x0000000f" allowed_cpuset="0x0000000f">
    <object type="NUMANode" os_index="1" cpuset="0x00000003" local_memory="1000">
      <object type="Socket" os_index="0" cpuset="0x00000003">
        <object type="Cache" cpuset="0x00000003" depth="2" cache_size="100" cache_type="0">
          <object type="Cache" cpuset="0x00000001" depth="1" cache_type="1">
            <object type="Cache" cpuset="0x00000001" depth="1" cache_type="2">
              <object type="Core" os_index="0" cpuset="0x00000001">
                <object type="PU" os_index="0" cpuset="0x00000001"/>
              </object>
            </object>
          </object>
          <object type="Cache" cpuset="0x00000002" depth="1" cache_type="1">
            <object type="Core" os_index="1" cpuset="0x00000002">
              <object type="PU" os_index="1" cpuset="0x00000002"/>
            </object>
          </object>
        </object>
      </object>
    </object>
    <object type="NUMANode" os_index="0" cpuset="0x0000000c" local_memory="1000">
      <object type="Socket" os_index="1" cpuset="0x0000000c">
        <object type="Cache" cpuset="0x0000000c" depth="2" cache_size="100" cache_type="0">
          <object type="Cache" cpuset="0x00000004" depth="1" cache_type="1">
            <object type="Core" os_index="0" cpuset="0x00000004">
              <object type="PU" os_index="2" cpuset="0x00000004"/>
            </object>
          </object>
          <object type="Cache" cpuset="0x00000008" depth="1" cache_type="1">
            <object type="Core" os_index="1" cpuset="0x00000008">
              <object type="PU" os_index="3" cpuset="0x00000008"/>
            </object>
          </object>
        </object>
      </object>
    </object>
  </object>
</topology>
`

func TestXMLHwloc1(t *testing.T) {
	topo, err := ParseXML(strings.NewReader(hwloc1XML))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, topo)
	want := "pack:2 numa:1(indexes=1,0) l2:1 l1:2 core:1(indexes=0,1,0,1) pu:1"
	if s := topo.Synthetic(); s != want {
		t.Errorf("Synthetic() = %q, want %q\n%v", s, want, topo)
	}
	if back, err := ParseSynthetic(want); err != nil || !back.Equal(topo) {
		t.Errorf("ParseSynthetic(%q) = %v, %v\nwant %v", want, back, err, topo)
	}
}

// TestXMLAllowed: PUs outside the root's allowed_cpuset are dropped, and
// with them the objects and memory left without PU; hwloc keeps such NUMA
// nodes with an empty cpuset, the model (which maps and binds) does not.
func TestXMLAllowed(t *testing.T) {
	const xmlText = `<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" allowed_cpuset="0x0000000b">
    <object type="Package" os_index="0" cpuset="0x00000003">
      <object type="NUMANode" os_index="0" cpuset="0x00000003"/>
      <object type="Core" os_index="0" cpuset="0x00000001"><object type="PU" os_index="0" cpuset="0x00000001"/></object>
      <object type="Core" os_index="1" cpuset="0x00000002"><object type="PU" os_index="1" cpuset="0x00000002"/></object>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c">
      <object type="Group" cpuset="0x00000004">
        <object type="NUMANode" os_index="1" cpuset="0x00000004"/>
        <object type="Core" os_index="0" cpuset="0x00000004"><object type="PU" os_index="2" cpuset="0x00000004"/></object>
      </object>
      <object type="MemCache" cpuset="0x00000008">
        <object type="NUMANode" os_index="2" cpuset="0x00000008"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000008"><object type="PU" os_index="3" cpuset="0x00000008"/></object>
    </object>
    <object type="Bridge"><object type="PCIDev"/></object>
    <object type="Misc" name="x"/>
  </object>
  <distances2 type="NUMANode" nbobjs="2"><indexes length="4">0 1</indexes></distances2>
</topology>`
	topo, err := ParseXML(strings.NewReader(xmlText))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, topo)
	if got, want := topo.Synthetic(), "asymmetric: pack=2 numa=2 core=3 pu=3"; got != want {
		t.Errorf("Synthetic() = %q, want %q", got, want)
	}
	if n := topo.Count(NUMANode); n != 2 || topo.CPUList(NUMANode, 1) != "3" || topo.Obj(NUMANode, 1).OSIndex != 2 {
		t.Errorf("NUMA nodes: %v", topo)
	}
	if joinInts(topo.LogicalCPUs()) != "0,1,3" || topo.Count(Core) != 3 || topo.Count(Package) != 2 {
		t.Errorf("PUs: %v", topo)
	}
}

func TestXMLErrors(t *testing.T) {
	for _, x := range []string{
		``,
		`<foo/>`,
		`<topology></topology>`,
		`<topology><object type="Machine"><object type="PU"/></object></topology>`,
		`<topology><object type="Machine"><object type="PU" os_index="x"/></object></topology>`,
		`<topology><object type="Machine"><object type="PU" os_index="99999999"/></object></topology>`,
		`<topology><object type="Machine"><object type="PU" os_index="0"><object type="PU" os_index="1"/></object></object></topology>`,
		`<topology><object type="Machine"><object type="PU" os_index="0"/><object type="PU" os_index="0"/></object></topology>`,
		`<topology><object type="Machine"><object type="Widget"/></object></topology>`,
		`<topology><object type="Machine"><object type="NUMANode" os_index="0"/></object></topology>`,
		`<topology><object type="Machine"><object type="PU" os_index="0"/></object><object type="Machine"/></topology>`,
		`<topology><object type="System"><object type="Machine"><object type="PU" os_index="0"/></object><object type="Machine"><object type="PU" os_index="1"/></object></object></topology>`,
		`<topology><object type="Machine"><object type="Core"><object type="Core"><object type="PU" os_index="0"/></object></object></object></topology>`,
		`<topology><object type="Machine" allowed_cpuset="0xzz"><object type="PU" os_index="0"/></object></topology>`,
		`<topology><object type="Machine"><object type="PU" os_index="0"/>`,
		"<topology>\n<object type=\"Machine\">\n<object type=\"PU\" os_index=\"0\"/>\n</object>\n</bogus>",
		strings.Repeat(`<object type="Group">`, 200),
	} {
		_, err := ParseXML(strings.NewReader(x))
		if err == nil {
			t.Errorf("ParseXML(%q) succeeded", x)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseXML(%q): error on several lines: %q", x, err)
		}
	}
}

func TestParseHexMask(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0x0", ""},
		{"0x00000003", "0-1"},
		{"0x00000001,0x80000000", "31-32"},
		{"0x00000100,,0x00000001", "0,72"},
		{"0xf...f,0x00000000", "32-65535"},
	} {
		got, err := parseHexMask(c.in)
		if err != nil || got.String() != c.want {
			t.Errorf("parseHexMask(%q) = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"0xg", "0x1,0x100000000", "0x00000001" + strings.Repeat(",", 2048)} {
		if _, err := parseHexMask(in); err == nil {
			t.Errorf("parseHexMask(%q) succeeded", in)
		}
	}
}

// FuzzParseXML: no panic, one-line errors, and a parsed topology is
// consistent and its canonical form, when it has one, parses back Equal.
func FuzzParseXML(f *testing.F) {
	f.Add([]byte(hwloc1XML))
	f.Add([]byte(`<topology><object type="Machine" os_index="0"><object type="Package" os_index="0"><object type="NUMANode" os_index="0"/><object type="Core" os_index="0"><object type="PU" os_index="1"/><object type="PU" os_index="0"/></object></object></object></topology>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := ParseXML(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error on several lines: %q", err)
			}
			return
		}
		checkInvariants(t, topo)
		canon := topo.Synthetic()
		if strings.HasPrefix(canon, "asymmetric:") {
			return
		}
		back, err := ParseSynthetic(canon)
		if err != nil {
			t.Fatalf("Synthetic() = %q does not parse: %v", canon, err)
		}
		if !slices.Equal(back.pus, topo.pus) || !sameLayout(back, topo) {
			t.Fatalf("Synthetic() = %q describes\n%v\nwant %v", canon, back, topo)
		}
		for typ := Package; typ < numTypes; typ++ {
			// OS indexes known only in part cannot be said.
			if known := !slices.Contains(topo.levels[typ].os, -1); known && !slices.Equal(back.levels[typ].os, topo.levels[typ].os) {
				t.Fatalf("Synthetic() = %q describes\n%v\nwant %v", canon, back, topo)
			}
		}
	})
}

// sameLayout reports whether both topologies have the same objects over the
// same logical PUs, whatever their OS indexes.
func sameLayout(a, b *Topology) bool {
	for typ := range numTypes {
		la, lb := &a.levels[typ], &b.levels[typ]
		if !slices.Equal(la.first, lb.first) || !slices.Equal(la.count, lb.count) {
			return false
		}
	}
	return true
}
