package topology

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDiscoverThisMachine: on this machine Discover agrees with hwloc's
// view restricted, like Discover, to the CPUs this process may use
// (`lstopo --restrict binding`): the same PUs (OS numbers, logical order),
// cores, packages and caches with the same OS indexes, and the same NUMA
// nodes among those with CPUs.
//
// Where sysfs cannot tell, the two may differ, and the test allows it:
//   - NUMA nodes without CPUs (HBM, CXL or device memory): sysfs gives them
//     no CPU, so Discover leaves them out; hwloc attaches them where the
//     firmware (HMAT, SLIT) says they are local.
//   - Caches on platforms whose kernel exports no cache/index* directories
//     (some ARM machines): hwloc may still find them in the device tree or
//     with cpuid; Discover then has no cache level. Cache OS indexes come
//     from cache/index*/id in both, and are unknown in both without it.
//   - Dies, clusters, groups and instruction caches are not modeled.
func TestDiscoverThisMachine(t *testing.T) {
	got, err := Discover()
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, got)
	want := mustXML(t, lstopo(t, "--restrict", "binding", "--of", "xml", "-"))
	if !slices.Equal(got.LogicalCPUs(), want.LogicalCPUs()) {
		t.Fatalf("PUs in logical order: Discover %v, hwloc %v", got.LogicalCPUs(), want.LogicalCPUs())
	}
	for _, typ := range []ObjType{Machine, Package, Core, PU, L3Cache, L2Cache, L1Cache} {
		if a, b := levelString(got, typ), levelString(want, typ); a != b {
			if typ >= L3Cache && typ <= L1Cache && got.Count(typ) == 0 {
				t.Logf("no %s in sysfs; hwloc has %s", typ, b)
				continue
			}
			t.Errorf("%s: Discover %s, hwloc %s", typ, a, b)
		}
	}
	// NUMA nodes: those with CPUs in sysfs.
	var gotNUMA, wantNUMA []string
	for i := range got.Count(NUMANode) {
		gotNUMA = append(gotNUMA, fmt.Sprintf("P#%d{%s}", got.Obj(NUMANode, i).OSIndex, got.CPUList(NUMANode, i)))
	}
	for i := range want.Count(NUMANode) {
		os := want.Obj(NUMANode, i).OSIndex
		cpus, err := readList(fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", os))
		if err == nil && len(cpus.Intersect(want.CPUs(Machine, 0))) == 0 {
			t.Logf("NUMA node P#%d has no CPU: not discovered", os)
			continue
		}
		wantNUMA = append(wantNUMA, fmt.Sprintf("P#%d{%s}", os, want.CPUList(NUMANode, i)))
	}
	if !slices.Equal(gotNUMA, wantNUMA) {
		t.Errorf("NUMA nodes: Discover %v, hwloc %v", gotNUMA, wantNUMA)
	}
	t.Logf("Discover: %s", got.Synthetic())
}

// levelString lists the objects of a level: OS index and CPUs, in logical
// order.
func levelString(topo *Topology, typ ObjType) string {
	var b strings.Builder
	for i := range topo.Count(typ) {
		fmt.Fprintf(&b, " P#%d{%s}", topo.Obj(typ, i).OSIndex, topo.CPUList(typ, i))
	}
	return b.String()
}

// writeSysfs writes the sysfs files Discover reads, for the topology topo,
// under a new directory, with what a real kernel adds: instruction caches,
// dies, an offline CPU, a NUMA node without CPU, and the older file names
// on odd CPUs.
func writeSysfs(t *testing.T, topo *Topology) string {
	t.Helper()
	root := t.TempDir()
	write := func(path string, v any) {
		t.Helper()
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(fmt.Sprint(v)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cpuDir := "sys/devices/system/cpu"
	online := sortedSet(topo.LogicalCPUs())
	write(cpuDir+"/online", online)
	offline := online[len(online)-1] + 1
	write(fmt.Sprintf("%s/cpu%d/topology/core_id", cpuDir, offline), 0)
	write(fmt.Sprintf("%s/cpu%d/topology/core_cpus_list", cpuDir, offline), offline)
	for pu := range topo.NumPUs() {
		cpu := topo.CPU(pu)
		dir := fmt.Sprintf("%s/cpu%d", cpuDir, cpu)
		old := cpu%2 == 1
		if p := topo.Enclosing(Package, pu); p >= 0 {
			write(dir+"/topology/physical_package_id", topo.Obj(Package, p).OSIndex)
			name := "package_cpus_list"
			if old {
				name = "core_siblings_list"
			}
			write(dir+"/topology/"+name, topo.CPUs(Package, p))
			write(dir+"/topology/die_id", 0)
			write(dir+"/topology/die_cpus_list", topo.CPUs(Package, p))
		}
		if c := topo.Enclosing(Core, pu); c >= 0 {
			write(dir+"/topology/core_id", topo.Obj(Core, c).OSIndex)
			name := "core_cpus_list"
			if old {
				name = "thread_siblings_list"
			}
			write(dir+"/topology/"+name, topo.CPUs(Core, c))
		}
		index := 0
		for _, c := range []struct {
			typ   ObjType
			level int
			kind  string
		}{{L1Cache, 1, "Data"}, {L1Cache, 1, "Instruction"}, {L2Cache, 2, "Unified"}, {L3Cache, 3, "Unified"}} {
			i := topo.Enclosing(c.typ, pu)
			if i < 0 {
				continue
			}
			cdir := fmt.Sprintf("%s/cache/index%d", dir, index)
			index++
			write(cdir+"/level", c.level)
			write(cdir+"/type", c.kind)
			write(cdir+"/shared_cpu_list", topo.CPUs(c.typ, i))
			if os := topo.Obj(c.typ, i).OSIndex; os >= 0 {
				write(cdir+"/id", os)
			}
		}
	}
	for i := range topo.Count(NUMANode) {
		write(fmt.Sprintf("sys/devices/system/node/node%d/cpulist", topo.Obj(NUMANode, i).OSIndex), topo.CPUs(NUMANode, i))
	}
	write("sys/devices/system/node/node999/cpulist", "")
	return root
}

// TestDiscoverSysfs discovers fake sysfs trees written from synthetic
// topologies: whole, it must give the topology back; restricted to some
// CPUs, it must give what hwloc gives for the synthetic topology restricted
// to them (`lstopo --restrict`), and what ParseXML makes of that.
func TestDiscoverSysfs(t *testing.T) {
	for _, spec := range hwlocSpecs {
		topo, err := ParseSynthetic(spec)
		if err != nil {
			t.Fatal(err)
		}
		if topo.levels[NUMANode].nested {
			continue // sysfs gives every CPU one NUMA node
		}
		root := writeSysfs(t, topo)
		got, err := discover(root, nil)
		if err != nil {
			t.Errorf("%q: %v", spec, err)
			continue
		}
		if !got.Equal(topo) {
			t.Errorf("%q: discovered\n%v\nwant %v", spec, got, topo)
		}
		all := sortedSet(topo.LogicalCPUs())
		var even CPUSet
		for i, c := range all {
			if i%2 == 0 {
				even = append(even, c)
			}
		}
		for _, allowed := range []CPUSet{all[:1], all[1:], even, all.Union(CPUSet{MaxCPUs - 1})} {
			got, err := discover(root, allowed)
			if err != nil {
				t.Errorf("%q restricted to %s: %v", spec, allowed, err)
				continue
			}
			checkInvariants(t, got)
			mask := allowed.Intersect(all)
			want, err := ParseXML(strings.NewReader(string(lstopo(t, "--if", "synthetic", "--input", hwlocSpec(spec), "--restrict", formatHexMask(mask), "--of", "xml", "-"))))
			if err != nil {
				t.Fatalf("%q restricted to %s: %v", spec, mask, err)
			}
			if !got.Equal(want) {
				t.Errorf("%q restricted to %s: discovered\n%v\nhwloc: %v", spec, mask, got, want)
			}
			// The same through the synthetic tree.
			levels, attachedIdx, err := parseSyntheticLevels(spec)
			if err != nil {
				t.Fatal(err)
			}
			tree, err := generate(levels, attachedIdx)
			if err != nil {
				t.Fatal(err)
			}
			if built, err := build(tree, allowed); err != nil || !built.Equal(want) {
				t.Errorf("%q restricted to %s: built %v, %v\nhwloc: %v", spec, mask, built, err, want)
			}
		}
	}
}

// formatHexMask writes a set in hwloc's bitmap format.
func formatHexMask(s CPUSet) string {
	if len(s) == 0 {
		return "0x0"
	}
	words := make([]uint32, s[len(s)-1]/32+1)
	for _, c := range s {
		words[c/32] |= 1 << (c % 32)
	}
	parts := make([]string, len(words))
	for i, w := range words {
		parts[len(words)-1-i] = fmt.Sprintf("0x%08x", w)
	}
	return strings.Join(parts, ",")
}

func TestDiscoverErrors(t *testing.T) {
	root := t.TempDir()
	if _, err := discover(root, nil); err == nil {
		t.Error("discover without sysfs succeeded")
	}
	dir := filepath.Join(root, "sys/devices/system/cpu")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "online"), []byte("0-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := discover(root, CPUSet{4, 5}); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("discover with no allowed online CPU: %v", err)
	}
	// No topology files at all: PUs straight below the machine, one
	// implicit NUMA node.
	topo, err := discover(root, CPUSet{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := topo.Synthetic(), "pu:2(indexes=1,3)"; got != want {
		t.Errorf("Synthetic() = %q, want %q", got, want)
	}
}

func TestAllowedCPUSet(t *testing.T) {
	dir := t.TempDir()
	status := filepath.Join(dir, "status")
	text := "Name:\tx\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,8\nMems_allowed_list:\t0\n"
	if err := os.WriteFile(status, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := allowedCPUSet(status); err != nil || s.String() != "0-3,8" {
		t.Errorf("allowedCPUSet = %v, %v", s, err)
	}
	if s, err := allowedCPUSet(filepath.Join(dir, "none")); s != nil || err != nil {
		t.Errorf("allowedCPUSet of a missing file = %v, %v; want no restriction", s, err)
	}
	if s, err := allowedCPUSet("/proc/self/status"); err != nil || len(s) == 0 {
		t.Errorf("allowedCPUSet(/proc/self/status) = %v, %v", s, err)
	} else if s.String() != allowedCPUs() || !s.Equal(processCPUs()) {
		t.Errorf("Cpus_allowed_list %v, affinity %v, cache key's list %q", s, processCPUs(), allowedCPUs())
	}
}
