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

// restartState is a rank's record under --max-restarts. It is a plain
// value of the rank table's record (ranktable.go), changed under its lock.
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

// restartCase is what decides whether a rank's ended incarnation starts
// again.
type restartCase struct {
	failed   bool // it ended by a non-zero status or a signal
	started  bool // it did start (a failed start is final)
	aborted  bool // it called PMIx_Abort or PMI abort (MPI_Abort)
	ending   bool // the job is ending: every rank was signalled to end
	restarts int  // how many times the rank started again so far
	max      int  // the job's --max-restarts
}

// restartPolicy says whether an ended incarnation starts again: it failed,
// did start, did not abort, the job is not ending, and the rank's restarts
// are not used up. Pure: every case is a row of restart_test.go.
func restartPolicy(c restartCase) bool {
	return c.failed && c.started && !c.aborted && !c.ending && c.restarts < c.max
}

// retire makes the record that of the rank's next incarnation, the ended
// one (child) kept among the old, and returns which restart that is.
func (r *restartState) retire(child *proc) int {
	r.restarts++
	if child != nil {
		r.old = append(r.old, child)
	}
	r.endsHeld = nil
	return r.restarts
}

// restart starts a failed rank again, unless the job began to end
// meanwhile: then, or when it cannot start, its failure stands.
func (sh *shell) restart(rank, code int, sig syscall.Signal, use usage) {
	ending := sh.ranks.isEnding()
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
		sh.ranks.notRestarted(rank, err == nil)
		if err != nil {
			sh.launchFailed(rank, err)
			code, sig, use = -1, 0, usage{}
		}
		sh.reaped(rank, code, sig, use)
	}
}

// sink is where the output of incarnation n of rank goes.
func (sh *shell) sink(rank, n int) iof.Sink {
	if sh.plan.Job.MaxRestarts > 0 {
		return incarnation{sh, rank, n}
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
	forward := in.sh.ranks.streamEnded(in.rank, in.n, st)
	if e, ok := in.sh.d.up.(iof.Ender); ok && forward {
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
