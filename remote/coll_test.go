package remote

import (
	"errors"
	"fmt"
	"prun/remote/wire"
	"slices"
	"sync"
	"testing"

	"prun/ctl"
	"prun/pmixsrv"
)

// A tree of 13 daemons under the launcher's root, fanout 3: every vertex's
// collectives, wired as the control plane wires them, give every
// participant (the launcher's node among them) the same bytes, and the
// root one contribution per child.
func TestCollectivesCombine(t *testing.T) {
	const n, k = 13, 3
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d", i+1)
	}
	verts := []int{0, 2, 5, 6, 12, 13} // vertices 1, 3 and 4 only relay
	procs := []pmixsrv.Proc{{Nspace: "j", Rank: pmixsrv.RankWildcard}}
	key := wire.CollKey("pmix", procs)
	root := NewRoot()
	root.attach(hosts, k, func(uint8, any) {})
	var mu sync.Mutex
	atRoot := map[int]int{}
	cs := make([]*wire.Collectives, n+1)
	cs[0] = root.cs
	for v := 1; v <= n; v++ {
		cs[v] = wire.NewCollectives(v, k, func(key string, c *wire.Coll, data []byte) {
			p := ctl.Parent(v, k)
			if p == 0 {
				mu.Lock()
				atRoot[v]++
				mu.Unlock()
			}
			cs[p].Contribute(v, key, c.Kind, c.Procs, c.Verts, data, func(all []byte, err error) { cs[v].Result(key, all, err) })
		})
	}
	results := map[int][]byte{}
	for _, v := range verts[1:] {
		cs[v].Contribute(v, key, "pmix", procs, verts, []byte{byte(v)}, func(all []byte, err error) {
			if err != nil {
				t.Errorf("vertex %d: %v", v, err)
			}
			results[v] = all
		})
	}
	if len(results) != 0 {
		t.Fatalf("done before the launcher's node contributed: %v", results)
	}
	nodes := []string{"launcher", "h2", "h5", "h6", "h12", "h13"}
	root.Contribute("pmix", procs, nodes, []byte{0}, func(all []byte, err error) { results[0] = all })
	if len(atRoot) != 3 || atRoot[1] != 1 || atRoot[2] != 1 || atRoot[3] != 1 {
		t.Fatalf("the root heard from %v, want vertices 1, 2 and 3 once each", atRoot)
	}
	want := results[0]
	if got := slices.Sorted(slices.Values(want)); !slices.Equal(got, []byte{0, 2, 5, 6, 12, 13}) {
		t.Errorf("result %v: want one byte per participant", want)
	}
	for _, v := range verts {
		if !slices.Equal(results[v], want) {
			t.Errorf("vertex %d got %v, want %v", v, results[v], want)
		}
	}
}

// A group member's death, broadcast from the root, fails the pending group
// constructs it takes part in, and later ones, but not fences.
func TestCollectivesFailProc(t *testing.T) {
	cs := wire.NewCollectives(1, 2, func(string, *wire.Coll, []byte) { t.Error("sent up") })
	dead := pmixsrv.Proc{Nspace: "a", Rank: 3}
	grp := wire.GroupConstruct + "g"
	pa := []pmixsrv.Proc{{Nspace: "a", Rank: 1}, dead}
	var errG, errF error
	doneG, doneF := false, false
	cs.Contribute(1, wire.CollKey(grp, pa), grp, pa, []int{1, 3}, nil, func(_ []byte, err error) { doneG, errG = true, err })
	cs.Contribute(1, wire.CollKey("pmix", pa), "pmix", pa, []int{1, 3}, nil, func(_ []byte, err error) { doneF, errF = true, err })
	died := errors.New("rank 3 died")
	cs.FailProc(dead, died)
	if !doneG || errG != died || doneF {
		t.Errorf("group done %v (%v), fence done %v (%v)", doneG, errG, doneF, errF)
	}
	var errL error
	whole := []pmixsrv.Proc{{Nspace: "a", Rank: pmixsrv.RankWildcard}}
	cs.Contribute(1, wire.CollKey(grp, whole), grp, whole, []int{1, 3}, nil, func(_ []byte, err error) { errL = err })
	if errL != died {
		t.Errorf("a later group of the dead rank's namespace: %v", errL)
	}
	cs.Forget("a")
	cs.Contribute(1, wire.CollKey(grp, whole), grp, whole, []int{1, 3}, nil, func(_ []byte, err error) { t.Errorf("after forget: %v", err) })
}

// A lost vertex fails the pending collectives it takes part in, and later
// ones, and leaves the others alone.
func TestCollectivesFail(t *testing.T) {
	cs := wire.NewCollectives(1, 2, func(string, *wire.Coll, []byte) { t.Error("sent up") })
	var errA error
	doneA, doneB := false, false
	pa := []pmixsrv.Proc{{Nspace: "a", Rank: pmixsrv.RankWildcard}}
	pb := []pmixsrv.Proc{{Nspace: "b", Rank: pmixsrv.RankWildcard}}
	cs.Contribute(1, wire.CollKey("pmix", pa), "pmix", pa, []int{1, 3}, nil, func(_ []byte, err error) { doneA, errA = true, err })
	cs.Contribute(1, wire.CollKey("pmix", pb), "pmix", pb, []int{1, 4}, nil, func([]byte, error) { doneB = true })
	lost := errors.New("lost node h3")
	cs.Fail([]int{3}, lost)
	if !doneA || errA != lost || doneB {
		t.Errorf("after losing vertex 3: a done %v (%v), b done %v", doneA, errA, doneB)
	}
	var errC error
	cs.Contribute(1, wire.CollKey("pmix", pa), "pmix", pa, []int{1, 3}, nil, func(_ []byte, err error) { errC = err })
	if errC != lost {
		t.Errorf("a later collective with vertex 3: %v", errC)
	}
}

// The launcher's counters keep consecutive collectives of the same
// participants apart, though the next one's contributions arrive while the
// last one's results still go out.
func TestStatsConsecutive(t *testing.T) {
	var st stats
	st.collIn("k", 10)
	st.collIn("k", 10)
	st.collOut("k", 10, false)
	st.collIn("k", 10) // the next fence, from the child answered first
	st.collOut("k", 10, false)
	st.collIn("k", 10)
	st.collOut("k", 10, false)
	st.collOut("k", 10, false)
	if st.s.Collectives != 2 || st.s.MaxCollMsgsIn != 2 || st.s.MaxCollMsgsOut != 2 || len(st.inflight) != 0 {
		t.Errorf("%+v, inflight %v: want 2 collectives of 2 messages each way", st.s, st.inflight)
	}
}
