package mapper

import (
	"reflect"
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
	if err != nil || len(m.Procs) != 3 || j.Apps[0].NP != 3 {
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
