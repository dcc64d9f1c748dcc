package launcher

import (
	"io"
	"time"

	"prun/daemon"
	"prun/iof"
	"prun/jobspec"
	"prun/mapper"
	"prun/remote"
)

// rte (a run-time environment, as PRRTE's) is what a run launches on, and all that differs between a
// standalone launch (standalone: it starts the nodes' daemons for its one
// job and ends them with it) and a persistent runtime's submission (*DVM:
// its daemons outlive every submission, which shares them). A run calls it
// where the two differ and nowhere else; everything a job has either way
// (its job table, policy, output, loop, exit status) is the run's own.
type rte interface {
	// place maps the job (run.mapJob) onto what the runtime grants it: the
	// allocation resolved for it, or the runtime's free slots, reserved
	// until the run ends (waiting for some with --wait). A nil map comes
	// with prun's exit status, the reason told.
	place(r *run, job *jobspec.Job) (*mapper.Map, int)
	// attach lends the run the nodes' daemons (a standalone launch's
	// session directory and upstream are created here, its daemons start
	// in the next phases); non-zero is prun's exit status, the reason told.
	attach(r *run, s *startup) (*daemons, int)
	// startNodes has the other nodes' daemons up (the map made again on
	// the topologies they report); a runtime's are up already.
	startNodes(r *run, s *startup) int
	// startLocal routes stdin to the nodes whose ranks read it and has
	// this node's daemon ready for the plan.
	startLocal(r *run, s *startup) int
	// own routes nspace's events, spawns and job control to r from now on.
	own(r *run, nspace string)
	// finish ends the run's use of the daemons once its jobs are over
	// (their end events delivered first); abandon does it at once, after a
	// failed start.
	finish(r *run)
	abandon(r *run)
	// nodeLost is a node's daemon gone (hit: with ranks of the run's): the
	// run's policy hears of it, with the launch's own stalls standalone.
	nodeLost(r *run, nl nodeLost, hit bool)
	// suspend is Ctrl-Z: standalone, prun stops with its ranks; a
	// runtime's ranks stop while it goes on (the submitter stops itself).
	suspend(r *run)
	// cachesJobEnds says whether the servers may keep a job's end event:
	// not in a runtime, where each would stay for its life.
	cachesJobEnds() bool
}

// daemons are the nodes' daemons a run launches on: a standalone launch's
// own, or a persistent runtime's, lent to each submission.
type daemons struct {
	up    *upstream      // every node's link; nil until attached
	local *daemon.Daemon // this node's, in-process, when ranks (or a tool) need it here
	tree  *remote.Tree   // the other nodes' (up holds every node's)
	stall *stallWatch    // with other nodes: the launcher's own stalls
}

// close ends every daemon, this node's and the others' at once, and says
// why this node's did not end cleanly.
func (n *daemons) close() error {
	done := make(chan struct{})
	go func() {
		if n.tree != nil {
			n.tree.Close()
		}
		close(done)
	}()
	var err error
	if n.local != nil {
		err = n.local.Close()
	}
	<-done
	return err
}

// What a runtime may ask of a run: a persistent runtime holds many, and
// reaches each only through these (and the phases' startup).

// submission is the run's number in its runtime (0 standalone).
func (r *run) submission() int { return r.sub }

// push hands the run's loop an event, spawn, job-control request, lost
// node or kill.
func (r *run) push(item any) { r.q.push(item) }

// namespaces are the run's jobs': the user's and those it spawned.
func (r *run) namespaces() []string { return r.jobs.namespaces() }

// index is the run's job table, as upstream reads it.
func (r *run) index() jobIndex { return r.jobs }

// env is the run's environment: the submitter's, in a runtime.
func (r *run) env() []string { return r.opts.Env }

// stdin is what the run's ranks read: the submitter's, in a runtime.
func (r *run) stdin() io.Reader { return r.opts.Stdin }

// writer is where the run's output goes.
func (r *run) writer() *iof.Writer { return r.out }

// waitEvents waits, at most timeout, for the run's own PMIx events
// (its jobs' ends) to be delivered.
func (r *run) waitEvents(timeout time.Duration) { r.events.wait(timeout) }

// progress is how far the run's user job is, for prun dvm ps; false
// before it launched (or for no run).
func (r *run) progress() (jobProgress, bool) {
	if r == nil {
		return jobProgress{}, false
	}
	return r.jobs.progress()
}
