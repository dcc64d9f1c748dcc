package launcher

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"prun/daemon"
	"prun/pmixsrv"
)

// groups is the launcher's side of PMIx groups, decided at the root of
// the collectives: context ids, unique across the launch (a persistent
// runtime's upstream, hence counter, serves all its jobs), and the groups
// whose members asked to hear of each other's end.
type groups struct {
	mu      sync.Mutex
	nextCID uint64
	watched []watchedGroup // PMIX_GROUP_NOTIFY_TERMINATION groups
}

// watchedGroup is a group whose members hear of each other's end. A name
// alone does not identify a group: the jobs of a persistent runtime choose
// theirs independently, so two live groups may share one.
type watchedGroup struct {
	name    string
	members []pmixsrv.Proc
}

// watch records a constructed group; constructing the same group again
// replaces it.
func (g *groups) watch(name string, members []pmixsrv.Proc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unwatchLocked(name, members)
	g.watched = append(g.watched, watchedGroup{name, slices.Clone(members)})
}

// unwatch drops a destructed group: the one of that name and members.
func (g *groups) unwatch(name string, members []pmixsrv.Proc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unwatchLocked(name, members)
}

func (g *groups) unwatchLocked(name string, members []pmixsrv.Proc) {
	g.watched = slices.DeleteFunc(g.watched, func(w watchedGroup) bool {
		return w.name == name && sameProcs(w.members, members)
	})
}

// forget drops a job that is over from the groups: its members can end no
// more, and a group none of whose members is left is dropped.
func (g *groups) forget(nspace string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.watched {
		g.watched[i].members = slices.DeleteFunc(g.watched[i].members, func(q pmixsrv.Proc) bool { return q.Nspace == nspace })
	}
	g.watched = slices.DeleteFunc(g.watched, func(w watchedGroup) bool { return len(w.members) == 0 })
}

// of lists the watched groups p is a member of.
func (g *groups) of(p pmixsrv.Proc) []watchedGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []watchedGroup
	for _, w := range g.watched {
		if slices.ContainsFunc(w.members, func(q pmixsrv.Proc) bool {
			return q.Nspace == p.Nspace && (q.Rank == p.Rank || q.Rank == pmixsrv.RankWildcard)
		}) {
			out = append(out, watchedGroup{w.name, slices.Clone(w.members)})
		}
	}
	return out
}

// sameProcs reports whether a and b list the same processes, in any order.
func sameProcs(a, b []pmixsrv.Proc) bool {
	if len(a) != len(b) {
		return false
	}
	order := func(x, y pmixsrv.Proc) int {
		if c := strings.Compare(x.Nspace, y.Nspace); c != 0 {
			return c
		}
		return cmp.Compare(x.Rank, y.Rank)
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, order)
	slices.SortFunc(b, order)
	return slices.Equal(a, b)
}

// cid assigns the next context id.
func (g *groups) cid() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextCID++
	return g.nextCID
}

// finish completes a collective at the root: a group construct gets its
// context id there; everything else is the allgather of its contributions.
func (u *upstream) finish(kind string, procs []pmixsrv.Proc, all []byte) ([]byte, error) {
	switch {
	case strings.HasPrefix(kind, daemon.GroupConstructKind):
		res, flags, err := daemon.FinishGroup(all, u.grp.cid)
		if err != nil {
			return nil, err
		}
		if flags&daemon.GroupNotify != 0 {
			u.grp.watch(strings.TrimPrefix(kind, daemon.GroupConstructKind), procs)
		}
		return res, nil
	case strings.HasPrefix(kind, daemon.GroupDestructKind):
		u.grp.unwatch(strings.TrimPrefix(kind, daemon.GroupDestructKind), procs)
		return nil, nil
	}
	return all, nil
}

// groupError is a group's failure: a PMIx status with the launcher's words.
type groupError struct {
	text string
	st   pmixsrv.Status
}

func (e *groupError) Error() string { return e.text }
func (e *groupError) Unwrap() error { return e.st }

// rankEnded tells the groups of a rank's end: a construct or destruct that
// waits for it fails for the other members (PMIX_GROUP_CONSTRUCT_ABORT):
// after a failed end, everywhere (broadcast); after a normal end (exit 0
// after finalize), at the root here and at each vertex its end passed on
// its way (remote's rankSet), which are all that can wait for it: every
// end of a large job broadcast to every daemon would cost O(ranks x nodes)
// frames. The members of a group that asked to be told hear of it.
func (u *upstream) rankEnded(ev daemon.Event) {
	p := pmixsrv.Proc{Nspace: ev.Nspace, Rank: pmixsrv.Rank(ev.Rank)}
	how := fmt.Sprintf("exited with status %d", ev.Status)
	if ev.Signal != 0 {
		how = fmt.Sprintf("was killed by signal %d", int(ev.Signal))
	} else if ev.Status == 0 {
		how = "exited without calling finalize"
	}
	u.root.Ended(p) // what waits for it at the root fails (a normal end's too)
	if ev.Signal != 0 || ev.Status != 0 || ev.Connected && !ev.Finalized {
		u.root.FailProc(p, &groupError{fmt.Sprintf("rank %d of job %s on %s %s: the group operations it takes part in fail",
			ev.Rank, ev.Nspace, ev.Node, how), pmixsrv.GroupConstructAbort})
	}
	for _, w := range u.grp.of(p) {
		u.memberFailed(w.name, w.members, p)
	}
}

// memberFailed tells a group's other members, wherever they run, that p
// ended without leaving it (PMIX_GROUP_MEMBER_FAILED, the group and p).
func (u *upstream) memberFailed(name string, members []pmixsrv.Proc, p pmixsrv.Proc) {
	others := slices.DeleteFunc(slices.Clone(members), func(q pmixsrv.Proc) bool { return q == p })
	if len(others) == 0 {
		return
	}
	nodes, ok := u.nodesOf(others)
	if !ok {
		return
	}
	info := []pmixsrv.Info{
		{Key: pmixsrv.KeyEventCustomRange, Value: others},
		{Key: pmixsrv.KeyGroupID, Value: name},
		{Key: pmixsrv.KeyEventAffectedProc, Value: p},
	}
	go u.deliver(nodes, "", pmixsrv.GroupMemberFailed, p, pmixsrv.RangeCustom, info)
}
