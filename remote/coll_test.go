package remote

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"prun/ctl"
	"prun/pmixsrv"
)

func TestPackVerts(t *testing.T) {
	for _, vs := range [][]int{nil, {0}, {0, 1, 2, 3}, {1, 3, 4, 5, 9}, {7}} {
		p := packVerts(vs)
		got, err := unpackVerts(p, 10)
		if err != nil || !slices.Equal(got, vs) {
			t.Errorf("%v -> %v -> %v, %v", vs, p, got, err)
		}
	}
	for _, bad := range [][]int{{1}, {3, 2}, {-1, 2}, {1, 11}, {0, 10, 0, 10}} {
		if _, err := unpackVerts(bad, 10); err == nil {
			t.Errorf("unpackVerts(%v) accepted", bad)
		}
	}
}

func FuzzUnpackVerts(f *testing.F) {
	f.Add(1, 5, 7, 7)
	f.Fuzz(func(t *testing.T, a, b, c, d int) {
		vs, err := unpackVerts([]int{a, b, c, d}, 64)
		if err == nil && len(vs) > 65 {
			t.Errorf("%d vertices of 65", len(vs))
		}
	})
}

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
	key := collKey("pmix", procs)
	root := NewRoot()
	root.attach(hosts, k, func(uint8, any) {})
	var mu sync.Mutex
	atRoot := map[int]int{}
	cs := make([]*collectives, n+1)
	cs[0] = root.cs
	for v := 1; v <= n; v++ {
		cs[v] = newCollectives(v, k, func(key string, c *coll, data []byte) {
			p := ctl.Parent(v, k)
			if p == 0 {
				mu.Lock()
				atRoot[v]++
				mu.Unlock()
			}
			cs[p].contribute(v, key, c.kind, c.procs, c.verts, data, func(all []byte, err error) { cs[v].result(key, all, err) })
		})
	}
	results := map[int][]byte{}
	for _, v := range verts[1:] {
		cs[v].contribute(v, key, "pmix", procs, verts, []byte{byte(v)}, func(all []byte, err error) {
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
	cs := newCollectives(1, 2, func(string, *coll, []byte) { t.Error("sent up") })
	dead := pmixsrv.Proc{Nspace: "a", Rank: 3}
	grp := GroupConstruct + "g"
	pa := []pmixsrv.Proc{{Nspace: "a", Rank: 1}, dead}
	var errG, errF error
	doneG, doneF := false, false
	cs.contribute(1, collKey(grp, pa), grp, pa, []int{1, 3}, nil, func(_ []byte, err error) { doneG, errG = true, err })
	cs.contribute(1, collKey("pmix", pa), "pmix", pa, []int{1, 3}, nil, func(_ []byte, err error) { doneF, errF = true, err })
	died := errors.New("rank 3 died")
	cs.failProc(dead, died)
	if !doneG || errG != died || doneF {
		t.Errorf("group done %v (%v), fence done %v (%v)", doneG, errG, doneF, errF)
	}
	var errL error
	whole := []pmixsrv.Proc{{Nspace: "a", Rank: pmixsrv.RankWildcard}}
	cs.contribute(1, collKey(grp, whole), grp, whole, []int{1, 3}, nil, func(_ []byte, err error) { errL = err })
	if errL != died {
		t.Errorf("a later group of the dead rank's namespace: %v", errL)
	}
	cs.forget("a")
	cs.contribute(1, collKey(grp, whole), grp, whole, []int{1, 3}, nil, func(_ []byte, err error) { t.Errorf("after forget: %v", err) })
}

// A lost vertex fails the pending collectives it takes part in, and later
// ones, and leaves the others alone.
func TestCollectivesFail(t *testing.T) {
	cs := newCollectives(1, 2, func(string, *coll, []byte) { t.Error("sent up") })
	var errA error
	doneA, doneB := false, false
	pa := []pmixsrv.Proc{{Nspace: "a", Rank: pmixsrv.RankWildcard}}
	pb := []pmixsrv.Proc{{Nspace: "b", Rank: pmixsrv.RankWildcard}}
	cs.contribute(1, collKey("pmix", pa), "pmix", pa, []int{1, 3}, nil, func(_ []byte, err error) { doneA, errA = true, err })
	cs.contribute(1, collKey("pmix", pb), "pmix", pb, []int{1, 4}, nil, func([]byte, error) { doneB = true })
	lost := errors.New("lost node h3")
	cs.fail([]int{3}, lost)
	if !doneA || errA != lost || doneB {
		t.Errorf("after losing vertex 3: a done %v (%v), b done %v", doneA, errA, doneB)
	}
	var errC error
	cs.contribute(1, collKey("pmix", pa), "pmix", pa, []int{1, 3}, nil, func(_ []byte, err error) { errC = err })
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

func TestCollFrame(t *testing.T) {
	up := &collUp{Coll: "pmix|j:*", Kind: "pmix", Verts: []int{1, 4}, Procs: []pmixsrv.Proc{{Nspace: "j", Rank: 1}}}
	var got collUp
	data, err := decodeColl(encodeColl(up, []byte("\x00\xffdata")), &got)
	if err != nil || !reflect.DeepEqual(&got, up) || string(data) != "\x00\xffdata" {
		t.Errorf("round trip: %+v %q, %v", got, data, err)
	}
	// A failed collective keeps the launcher's words and the status.
	res := &collResult{Coll: "k", status: statusOf(fmt.Errorf("node h lost: %w", pmixsrv.ErrUnreach))}
	var back collResult
	if _, err := decodeColl(encodeColl(res, nil), &back); err != nil {
		t.Fatal(err)
	}
	if err := back.collErr(); !errors.Is(err, pmixsrv.ErrUnreach) || !strings.Contains(err.Error(), "node h lost") {
		t.Errorf("result error came back as %v", err)
	}
}

func FuzzDecodeColl(f *testing.F) {
	f.Add(encodeColl(&collUp{Coll: "k"}, []byte("abc")))
	f.Add(encodeColl(&collResult{Coll: "k", status: status{Err: "x", Code: -1}}, nil))
	f.Add([]byte{0, 0, 0, 9, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m collUp
		data, err := decodeColl(b, &m)
		if err != nil {
			return
		}
		var again collUp
		data2, err := decodeColl(encodeColl(&m, data), &again)
		if err != nil || string(data2) != string(data) || again.Coll != m.Coll {
			t.Errorf("round trip of %q: %+v, %v", b, again, err)
		}
	})
}
