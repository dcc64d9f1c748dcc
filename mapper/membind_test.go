package mapper

import (
	"prun/jobspec"
	"reflect"
	"strings"
	"testing"

	"prun/topology"
)

// Each process's memory goes to the NUMA nodes of its CPUs; an unbound
// one's to every node of its host; given nodes are checked against it.
func TestAssignMems(t *testing.T) {
	two, err := topology.ParseSynthetic("pack:2 numa:1 core:2 pu:1") // NUMA 0: CPUs 0-1, NUMA 1: CPUs 2-3
	if err != nil {
		t.Fatal(err)
	}
	of := func(string) *topology.Topology { return two }
	place := func(bind BindTarget, mem string) (*Map, error) {
		pol, err := jobspec.ParseMemBind(mem)
		if err != nil {
			t.Fatal(err)
		}
		by := MapCore
		if bind == BindPackage {
			by = MapPackage
		}
		return PlaceWith(job(4), hosts(1, 4), of, Options{MapBy: MapPolicy{By: by}, BindTo: BindPolicy{To: bind}, MemBind: pol})
	}
	m, err := place(BindCore, "interleave")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Procs {
		if want := (topology.CPUSet{p.CPUs[0] / 2}); !reflect.DeepEqual(p.Mems, want) {
			t.Errorf("rank %d on CPUs %v: mems %v, want %v", p.Rank, p.CPUs, p.Mems, want)
		}
	}
	if m.MemBind.Mode != MemInterleave {
		t.Errorf("map's policy %v", m.MemBind)
	}
	mems := func(bind BindTarget, mem string, rank int) topology.CPUSet {
		t.Helper()
		m, err := place(bind, mem)
		if err != nil {
			t.Fatalf("%v, -membind %s: %v", bind, mem, err)
		}
		return m.Procs[rank].Mems
	}
	if got := mems(BindPackage, "bind", 3); !reflect.DeepEqual(got, topology.CPUSet{1}) {
		t.Errorf("bound to package 1: mems %v", got)
	}
	if got := mems(BindNone, "bind", 0); !reflect.DeepEqual(got, topology.CPUSet{0, 1}) {
		t.Errorf("unbound: mems %v", got)
	}
	if got := mems(BindCore, "interleave:1", 0); !reflect.DeepEqual(got, topology.CPUSet{1}) {
		t.Errorf("interleave:1: mems %v", got)
	}
	if m, err = place(BindCore, "firsttouch"); err != nil || m.Procs[0].Mems != nil || m.MemBind.Mode != MemFirstTouch {
		t.Fatalf("firsttouch: %v", err)
	}
	if _, err = place(BindCore, "bind:0,2"); err == nil || err.Error() != "-membind bind:0,2: n1 has no NUMA node 2 (it has 0-1)" {
		t.Errorf("a node the host lacks: %v", err)
	}
	pol, _ := jobspec.ParseMemBind("bind")
	if _, err := PlaceWith(job(1), hosts(1, 1), func(string) *topology.Topology { return nil }, Options{MemBind: pol}); err == nil ||
		!strings.Contains(err.Error(), "the topology of n1 is unknown") {
		t.Errorf("unknown topology: %v", err)
	}
	got, err := m.JSON()
	if err != nil || strings.Contains(string(got), "mems") {
		t.Errorf("firsttouch map JSON names mems: %s, %v", got, err)
	}
	if m, _ = place(BindCore, "bind"); true {
		got, _ := m.JSON()
		if !strings.Contains(string(got), `"cpus":"3","mems":"1"}`) {
			t.Errorf("map JSON lacks the last rank's mems:\n%s", got)
		}
	}
}
