package launcher

import (
	"sync"
	"time"

	"prun/daemon"
	"prun/pmixsrv"
)

// PMIx events the launcher raises itself, as PRRTE does: a job's end
// (PMIX_EVENT_JOB_END) and, under --enable-recovery, a rank's failure to
// the job's other ranks (PMIX_EVENT_PROC_TERMINATED, PMIX_ERR_PROC_ABORTED).
// Each goes to every node's server, which hands it to the clients and tools
// that registered for it there (the range and the affected proc filter).

// notifier delivers the launcher's events; finish waits for the local
// server's deliveries (the remote daemons' wait in their Close).
type notifier struct{ wg sync.WaitGroup }

// deliver hands an event to every node's server (upstream.deliver); then,
// when not nil, runs once every node has it.
func (nt *notifier) deliver(u *upstream, code pmixsrv.Status, rng pmixsrv.DataRange, info []pmixsrv.Info, then func()) {
	nt.wg.Add(1)
	go func() {
		defer nt.wg.Done()
		u.deliver(nil, "", code, pmixsrv.Proc{}, rng, info)
		if then != nil {
			then()
		}
	}()
}

// wait waits for deliveries in flight, at most d: a server that never
// answers must not hold up the end.
func (nt *notifier) wait(d time.Duration) {
	done := make(chan struct{})
	go func() { nt.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// announceEnds raises PMIX_EVENT_JOB_END for each job that ended since the
// last call: for its spawner, for tools watching the launch (on any node),
// and for the user's job too. Not a default event: Open MPI's default
// handler would abort a running parent on it. Only the user's job's end is
// kept by the servers for handlers registered later: libpmix 4.2.2 walks
// its cache of job ends at every later spawn cycle of a parent, so a
// spawner registers
// for its child's end before the child can end (spawn, then register with
// the child's namespace, then let it go; or register for every job's end
// before spawning). A DVM's submissions cache none (a tool registers
// before the job it watches ends).
//
// A spawned job that ended is then forgotten on every node (its shell, its
// namespace in the PMIx server): a parent spawning in a loop must not grow
// every daemon by a job per cycle. The user's job is forgotten at the end.
func (r *run) announceEnds() {
	for _, j := range r.jobs.list {
		if j.state != jobDone || j.endAnnounced {
			continue
		}
		j.endAnnounced = true
		code, status := jobExit(j)
		spawned := j != r.jobs.primary()
		var forget func()
		if spawned {
			ns := j.plan.Nspace
			forget = func() {
				r.up.grp.forget(ns)
				r.up.root.Forget(ns)
				r.up.forget(ns)
			}
		}
		r.events.deliver(r.up, pmixsrv.EventJobEnd, pmixsrv.RangeSession, []pmixsrv.Info{
			{Key: pmixsrv.KeyEventAffectedProc, Value: pmixsrv.Proc{Nspace: j.plan.Nspace, Rank: pmixsrv.RankWildcard}},
			{Key: pmixsrv.KeyJobTermStatus, Value: status},
			{Key: pmixsrv.KeyExitCode, Value: code},
			{Key: pmixsrv.KeyEventNonDefault, Value: true},
			// In a DVM no job's end is cached: the servers would keep every
			// submission's for the runtime's life.
			{Key: pmixsrv.KeyEventDoNotCache, Value: spawned || !r.rte.cachesJobEnds()},
		}, forget)
	}
}

// jobExit is a job's exit code (its first failed rank's, by rank: a
// signal's number plus 128, as a shell says) and termination status.
func jobExit(j *job) (int, pmixsrv.Status) {
	for _, p := range j.procs {
		switch {
		case p.signal != 0:
			return 128 + int(p.signal), pmixsrv.ErrJobAborted
		case p.exitCode != 0:
			return p.exitCode, pmixsrv.ErrJobAborted
		}
	}
	return 0, pmixsrv.Success
}

// announceFailure tells a job's other ranks that one of them failed, when
// --enable-recovery lets them go on: PMIX_ERR_PROC_ABORTED for a rank
// killed by a signal, PMIX_EVENT_PROC_TERMINATED for one that exited
// non-zero, with the rank as the affected proc and its exit code. Not a
// default event either: Open MPI 4.1's default handler aborts the rank,
// which --enable-recovery asked to go on.
func (r *run) announceFailure(j *job, ev daemon.Event) {
	code, exit := pmixsrv.EventProcTerm, ev.Status
	if ev.Signal != 0 {
		code, exit = pmixsrv.ErrProcAborted, 128+int(ev.Signal)
	}
	r.events.deliver(r.up, code, pmixsrv.RangeCustom, []pmixsrv.Info{
		{Key: pmixsrv.KeyEventAffectedProc, Value: pmixsrv.Proc{Nspace: j.plan.Nspace, Rank: pmixsrv.Rank(ev.Rank)}},
		{Key: pmixsrv.KeyExitCode, Value: exit},
		{Key: pmixsrv.KeyEventNonDefault, Value: true},
		{Key: pmixsrv.KeyEventCustomRange, Value: []pmixsrv.Proc{{Nspace: j.plan.Nspace, Rank: pmixsrv.RankWildcard}}},
	}, nil)
}
