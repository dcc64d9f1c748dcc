package remote

import (
	"errors"
	"prun/remote/wire"
	"testing"
	"time"

	"prun/daemon"
	"prun/pmixsrv"
)

// A rank's normal end, passing a vertex on its way up, fails the group
// operations naming it that wait there for contributions, and later ones,
// with PMIX_GROUP_CONSTRUCT_ABORT; it leaves fences alone, and a group
// operation already combined and sent up (the rank's contribution in it);
// forgetting the job forgets its ended ranks.
func TestCollectivesProcEnded(t *testing.T) {
	var sent []string
	cs := wire.NewCollectives(1, 2, func(key string, _ *wire.Coll, _ []byte) { sent = append(sent, key) })
	gone := pmixsrv.Proc{Nspace: "a", Rank: 70}
	grp, des := wire.GroupConstruct+"g", daemon.GroupDestructKind+"g"
	pa := []pmixsrv.Proc{{Nspace: "a", Rank: 1}, gone}
	errs := map[string]error{}
	done := func(what string) func([]byte, error) {
		return func(_ []byte, err error) {
			if _, dup := errs[what]; dup {
				t.Errorf("%s: done twice", what)
			}
			errs[what] = err
		}
	}
	// Vertex 1 and its child 3 (where rank 70 runs) take part.
	cs.Contribute(1, wire.CollKey(grp, pa), grp, pa, []int{1, 3}, nil, done("construct"))
	cs.Contribute(1, wire.CollKey("pmix", pa), "pmix", pa, []int{1, 3}, nil, done("fence"))
	// One whose contributions all came: sent up, waiting for the result.
	other := []pmixsrv.Proc{{Nspace: "a", Rank: 1}, gone, {Nspace: "a", Rank: 2}}
	cs.Contribute(1, wire.CollKey(des, other), des, other, []int{1}, nil, done("sent"))
	if len(sent) != 1 {
		t.Fatalf("sent up %v", sent)
	}
	cs.ProcEnded(gone)
	var abort *wire.StatusError
	if err := errs["construct"]; !errors.As(err, &abort) || !errors.Is(err, pmixsrv.GroupConstructAbort) ||
		abort.Error() != "group g: rank 70 of job a ended without taking part in its construct" {
		t.Errorf("construct: %v", err)
	}
	if _, ok := errs["fence"]; ok {
		t.Errorf("fence failed: %v", errs["fence"])
	}
	if _, ok := errs["sent"]; ok {
		t.Errorf("an operation sent up failed: %v", errs["sent"])
	}
	// Later ones fail at once: the same members, the whole namespace.
	cs.Contribute(1, wire.CollKey(des, pa), des, pa, []int{1, 3}, nil, done("later"))
	if err := errs["later"]; !errors.Is(err, pmixsrv.GroupConstructAbort) {
		t.Errorf("a later destruct: %v", err)
	}
	whole := []pmixsrv.Proc{{Nspace: "a", Rank: pmixsrv.RankWildcard}}
	cs.Contribute(1, wire.CollKey(grp, whole), grp, whole, []int{1, 3}, nil, done("whole"))
	if err := errs["whole"]; err == nil || err.Error() != "group g: rank 70 of job a ended without taking part in its construct" {
		t.Errorf("a later group of the namespace: %v", err)
	}
	// A pending one that a later contribution finds ended fails whole.
	pb := []pmixsrv.Proc{{Nspace: "b", Rank: 0}, {Nspace: "b", Rank: 1}}
	cs.Contribute(1, wire.CollKey(grp, pb), grp, pb, []int{1, 3}, nil, done("b-mine"))
	cs.Ended["b"] = &wire.RankSet{}
	cs.Ended["b"].Add(1)
	cs.Contribute(3, wire.CollKey(grp, pb), grp, pb, []int{1, 3}, nil, done("b-child"))
	if !errors.Is(errs["b-mine"], pmixsrv.GroupConstructAbort) || !errors.Is(errs["b-child"], pmixsrv.GroupConstructAbort) {
		t.Errorf("pending, then a contribution after the end: %v, %v", errs["b-mine"], errs["b-child"])
	}
	if len(cs.Pending) != 2 { // the fence and the sent destruct
		t.Errorf("%d pending, want 2", len(cs.Pending))
	}
	cs.Forget("a")
	cs.Forget("b")
	if len(cs.Ended) != 0 {
		t.Errorf("ended after forget: %v", cs.Ended)
	}
	cs.Contribute(1, wire.CollKey(grp, whole), grp, whole, []int{1, 3}, nil, func(_ []byte, err error) { t.Errorf("after forget: %v", err) })
}

// A group destruct with PMIX_TIMEOUT (its contribution carries it as a
// construct's does) is timed at a vertex still waiting for a contributor,
// and the launcher's words say it is the destruct.
func TestCollectivesDestructTimeout(t *testing.T) {
	root := NewRoot()
	said := make(chan error, 2)
	root.TimedOut = func(err error) { said <- err }
	root.attach([]string{"h1", "h2"}, 1, func(uint8, any) {})
	cs := wire.NewCollectives(1, 1, func(string, *wire.Coll, []byte) { t.Error("sent up") })
	cs.Expire = func(key string, c *wire.Coll, missing []int) { root.timedOut(key, c.Kind, c.Gen, missing) }
	procs := []pmixsrv.Proc{{Nspace: "j", Rank: pmixsrv.RankWildcard}}
	kind := daemon.GroupDestructKind + "dt"
	cs.Contribute(1, wire.CollKey(kind, procs), kind, procs, []int{1, 2}, timeoutRecord(50*time.Millisecond), func([]byte, error) {})
	select {
	case err := <-said:
		if !errors.Is(err, pmixsrv.ErrTimeout) || err.Error() != "group dt: destruct timed out (PMIX_TIMEOUT) waiting for members on h2" {
			t.Errorf("the launcher said %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no timeout in 10 s")
	}
}
