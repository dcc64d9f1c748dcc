package mapper

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"prun/hostfile"
	"prun/jobspec"
)

func job(nps ...int) *jobspec.Job {
	j := &jobspec.Job{}
	for _, n := range nps {
		j.Apps = append(j.Apps, jobspec.App{NP: n, Argv: []string{"a"}})
	}
	return j
}

func TestPlaceMPMDOnOneNode(t *testing.T) {
	m, err := Place(job(2, 3), hostfile.Allocation{Hosts: []hostfile.Host{{Name: "n0", Slots: 8}}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Apps, []App{{0, 2}, {2, 3}}) {
		t.Errorf("apps = %+v", m.Apps)
	}
	want := []Proc{{0, 0, 0, 0, 0, 0, nil, nil}, {1, 0, 1, 0, 1, 1, nil, nil}, {2, 1, 0, 0, 2, 2, nil, nil}, {3, 1, 1, 0, 3, 3, nil, nil}, {4, 1, 2, 0, 4, 4, nil, nil}}
	if !reflect.DeepEqual(m.Procs, want) {
		t.Errorf("procs = %+v", m.Procs)
	}
	if len(m.Nodes) != 1 || !reflect.DeepEqual(m.Nodes[0].Procs, []int{0, 1, 2, 3, 4}) || m.Oversubscribed(0) {
		t.Errorf("nodes = %+v", m.Nodes)
	}
}

func TestPlaceFillsHostsInOrder(t *testing.T) {
	alloc := hostfile.Allocation{Hosts: []hostfile.Host{{Name: "a", Slots: 2}, {Name: "b", Slots: 2}}}
	m, err := Place(job(3), alloc)
	if err != nil {
		t.Fatal(err)
	}
	if m.Procs[2].Node != 1 || m.Procs[2].LocalRank != 0 || len(m.Nodes) != 2 {
		t.Errorf("map = %+v", m)
	}
}

func TestOmittedNPIsOnePerSlot(t *testing.T) {
	j := job(0)
	m, err := Place(j, hostfile.Allocation{Hosts: []hostfile.Host{{Name: "a", Slots: 3}}})
	// The count is the map's; the job, read-only, still says "omitted".
	if err != nil || len(m.Procs) != 3 || m.Apps[0].Size != 3 || j.Apps[0].NP != 0 {
		t.Fatalf("m=%+v err=%v", m, err)
	}
}

func TestOversubscription(t *testing.T) {
	alloc := hostfile.Allocation{Hosts: []hostfile.Host{{Name: "a", Slots: 2}}}
	_, err := Place(job(3), alloc)
	if err == nil || !strings.Contains(err.Error(), "3 processes requested but only 2 slots are available on a") {
		t.Fatalf("err = %v", err)
	}
	alloc.Implicit = true
	m, err := Place(job(3), alloc)
	if err != nil || !m.Oversubscribed(0) {
		t.Fatalf("implicit allocation must oversubscribe: %v", err)
	}
}

// A context's own hostfile caps its app at the file's slots on each host
// (mpirun's per-context --hostfile), though the allocation, the union of
// every context's file, gives the host more: the app spreads to its other
// hosts, or, with no room left, the error names its file.
func TestAppHostfileCapsItsApp(t *testing.T) {
	alloc := hostfile.Allocation{Hosts: []hostfile.Host{{Name: "a", Slots: 2}, {Name: "b", Slots: 2}}}
	place := func(opts Options, nps ...int) (*Map, error) {
		j := job(nps...)
		j.Apps[0].Hostfile, j.Apps[0].Hosts = "small", "a:1,b:1"
		j.Apps[1].Hostfile, j.Apps[1].Hosts = "big", "a:2,b:2"
		return PlaceWith(j, alloc, nil, opts)
	}
	m, err := place(Options{}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, p := range m.Procs {
		got = append(got, p.Node)
	}
	if want := []int{0, 1, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("nodes by rank %v, want %v (app 1 one per host, app 2 in what is left)", got, want)
	}
	_, err = place(Options{}, 3, 1)
	if want := "app 1: 3 processes requested but its hostfile small gives it 2 slots on a,b"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	if _, err := place(Options{MapBy: MapPolicy{By: MapSlot, Oversubscribe: true}}, 3, 1); err != nil {
		t.Errorf("--oversubscribe: %v", err)
	}
	// A --host count, without a hostfile, still narrows nothing.
	j := job(2)
	j.Apps[0].Hosts = "a:1"
	if _, err := PlaceWith(j, alloc, nil, Options{}); err != nil {
		t.Errorf("-H a:1 -n 2: %v", err)
	}
}
