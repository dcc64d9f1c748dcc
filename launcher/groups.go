package launcher

import (
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
	watched map[string][]pmixsrv.Proc // PMIX_GROUP_NOTIFY_TERMINATION groups by name: their members
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
			u.grp.mu.Lock()
			if u.grp.watched == nil {
				u.grp.watched = map[string][]pmixsrv.Proc{}
			}
			u.grp.watched[strings.TrimPrefix(kind, daemon.GroupConstructKind)] = procs
			u.grp.mu.Unlock()
		}
		return res, nil
	case strings.HasPrefix(kind, daemon.GroupDestructKind):
		u.grp.mu.Lock()
		delete(u.grp.watched, strings.TrimPrefix(kind, daemon.GroupDestructKind))
		u.grp.mu.Unlock()
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
// waits for it fails for the other members (PMIX_GROUP_CONSTRUCT_ABORT) (a failed end only: a rank that finalized
// and exited 0 is over normally, and every end of a large job broadcast to
// every daemon would cost O(ranks x nodes) frames), and the members of a
// group that asked to be told hear of it.
func (u *upstream) rankEnded(ev daemon.Event) {
	p := pmixsrv.Proc{Nspace: ev.Nspace, Rank: pmixsrv.Rank(ev.Rank)}
	how := fmt.Sprintf("exited with status %d", ev.Status)
	if ev.Signal != 0 {
		how = fmt.Sprintf("was killed by signal %d", int(ev.Signal))
	} else if ev.Status == 0 {
		how = "exited without calling finalize"
	}
	if ev.Signal != 0 || ev.Status != 0 || ev.Connected && !ev.Finalized {
		u.root.FailProc(p, &groupError{fmt.Sprintf("rank %d of job %s on %s %s: the group operations it takes part in fail",
			ev.Rank, ev.Nspace, ev.Node, how), pmixsrv.GroupConstructAbort})
	}
	u.grp.mu.Lock()
	var names []string
	for name, members := range u.grp.watched {
		if slices.ContainsFunc(members, func(q pmixsrv.Proc) bool {
			return q.Nspace == p.Nspace && (q.Rank == p.Rank || q.Rank == pmixsrv.RankWildcard)
		}) {
			names = append(names, name)
		}
	}
	watched := map[string][]pmixsrv.Proc{}
	for _, name := range names {
		watched[name] = u.grp.watched[name]
	}
	u.grp.mu.Unlock()
	for name, members := range watched {
		u.memberFailed(name, members, p)
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
	for n := range nodes {
		if d := u.node(n); d != nil {
			go d.DeliverEvent(pmixsrv.GroupMemberFailed, p, pmixsrv.RangeCustom, info)
		}
	}
}
