package launcher

import (
	"testing"

	"prun/pmixsrv"
)

// TestWatchedGroups: groups that asked to hear of their members' end are
// told apart by name and members (two jobs of a runtime may both call
// theirs "watch"), and a job that is over leaves them.
func TestWatchedGroups(t *testing.T) {
	p := func(ns string, r pmixsrv.Rank) pmixsrv.Proc { return pmixsrv.Proc{Nspace: ns, Rank: r} }
	a := []pmixsrv.Proc{p("a", 0), p("a", 1)}
	b := []pmixsrv.Proc{p("b", 1), p("b", 0)}
	var g groups
	g.watch("watch", a)
	g.watch("watch", b)
	g.watch("watch", []pmixsrv.Proc{p("a", 1), p("a", 0)}) // a again: replaces
	if len(g.watched) != 2 {
		t.Fatalf("watched %v, want a's and b's", g.watched)
	}
	g.unwatch("watch", a) // a destructs its group
	if w := g.of(p("b", 0)); len(w) != 1 || !sameProcs(w[0].members, b) {
		t.Errorf("b's rank 0 is in %v after a's destruct, want b's group", w)
	}
	if w := g.of(p("a", 0)); len(w) != 0 {
		t.Errorf("a's rank 0 is in %v after its destruct", w)
	}
	g.watch("both", []pmixsrv.Proc{p("a", pmixsrv.RankWildcard), p("b", 0)})
	if w := g.of(p("a", 5)); len(w) != 1 || w[0].name != "both" {
		t.Errorf("a's rank 5 is in %v, want group both (a wildcard member)", w)
	}
	g.forget("a")
	if w := g.of(p("b", 0)); len(w) != 2 || len(w[1].members) != 1 {
		t.Errorf("after a was forgotten b's rank 0 is in %v, want watch and both (b's rank alone)", w)
	}
	g.forget("b")
	if len(g.watched) != 0 {
		t.Errorf("after both jobs were forgotten %v are watched", g.watched)
	}
}
