package daemon

import (
	"syscall"

	"prun/iof"
	"prun/pmixsrv"
)

// --max-restarts: a rank that fails (not by PMIx_Abort or MPI_Abort, not
// while the job is ending) starts again, up to the job's MaxRestarts times.
// Each incarnation is a new process in a process group of its own; the
// earlier ones stay zombies until the job's end reaps them with the rest
// (signals.go), so that no group id they held is reused meanwhile. The
// rank's output streams end once, with its last incarnation.

// restartState is a rank's record under --max-restarts.
type restartState struct {
	restarts int          // how many times it started again
	old      []*proc      // its earlier incarnations
	endsHeld []iof.Stream // streams of its current incarnation that ended before it was known to be the last
}

// takeHeld returns the stream ends held back, which are now the last.
func (r *restartState) takeHeld() []iof.Stream {
	held := r.endsHeld
	r.endsHeld = nil
	return held
}

// restartable says whether a rank that just failed starts again: its
// restarts are not used up, the job is not ending, it did not abort, and it
// did start (a failed start is final). sh.mu is held.
func (sh *shell) restartable(st *rankState) bool {
	return st.again.restarts < sh.plan.Job.MaxRestarts && !sh.ending && !st.client.aborted && st.pid != 0
}

// retire makes a failed rank's record that of its next incarnation and
// returns which restart that is. sh.mu is held.
func (st *rankState) retire() int {
	st.again.restarts++
	if st.child != nil {
		st.again.old = append(st.again.old, st.child)
		st.child = nil
	}
	st.again.endsHeld = nil
	st.client = clientState{} // the next incarnation connects anew
	return st.again.restarts
}

// restart starts a failed rank again, unless the job began to end
// meanwhile: then, or when it cannot start, its failure stands.
func (sh *shell) restart(rank, code int, sig syscall.Signal, use usage) {
	sh.mu.Lock()
	ending := sh.ending
	sh.mu.Unlock()
	var err error
	if !ending {
		// The rank is still registered (reaped does not deregister it):
		// the new incarnation connects under the same registration, as
		// libpmix 4.2.2 allows several connections per registered rank.
		var env []string
		if usePMIx, _ := sh.interfaces(); usePMIx {
			env, err = sh.d.srv.SetupFork(pmixsrv.Proc{Nspace: sh.plan.Nspace, Rank: pmixsrv.Rank(rank)})
		}
		if err == nil {
			err = sh.start(rank, env, true)
		}
	}
	if ending || err != nil {
		sh.mu.Lock()
		st := sh.ranks[rank]
		st.again.restarts = sh.plan.Job.MaxRestarts
		if err != nil {
			st.pid = 0 // reported as a launch failure, not as an exit
		}
		sh.mu.Unlock()
		if err != nil {
			sh.launchFailed(rank, err)
			code, sig, use = -1, 0, usage{}
		}
		sh.reaped(rank, code, sig, use)
	}
}

// sink is where the output of rank's current incarnation goes. sh.mu is
// held.
func (sh *shell) sink(rank int) iof.Sink {
	if sh.plan.Job.MaxRestarts > 0 {
		return incarnation{sh, rank, sh.ranks[rank].again.restarts}
	}
	return sh.d.up
}

// incarnation is the sink of one incarnation of a rank that may be
// restarted: the end of its output streams reaches the launcher only once
// it is known to be the rank's last (the launcher closes per-rank files at
// a stream's end).
type incarnation struct {
	sh   *shell
	rank int
	n    int // the rank's restarts when it started
}

func (in incarnation) Write(src iof.Source, st iof.Stream, p []byte, partial bool) {
	in.sh.d.up.Write(src, st, p, partial)
}

func (in incarnation) End(src iof.Source, st iof.Stream) {
	sh := in.sh
	sh.mu.Lock()
	rs := sh.ranks[in.rank]
	current := rs.again.restarts == in.n
	forward := current && rs.exited // its last incarnation ended
	if current && !rs.exited {
		rs.again.endsHeld = append(rs.again.endsHeld, st)
	}
	sh.mu.Unlock()
	if e, ok := sh.d.up.(iof.Ender); ok && forward {
		e.End(src, st)
	}
}

// endHeld passes on the ends of the streams of a rank's last incarnation
// that ended before the rank did.
func (sh *shell) endHeld(rank int, held []iof.Stream) {
	if e, ok := sh.d.up.(iof.Ender); ok {
		for _, s := range held {
			e.End(iof.Source{Job: sh.plan.OutputJob(), App: sh.plan.Map.Procs[rank].App, Rank: rank}, s)
		}
	}
}
