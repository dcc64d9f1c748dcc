// Package launcher runs a job from start to end: it allocates, maps, starts
// one daemon per node (in-process for the local node), and runs the job's
// state machine — it alone decides when the job has failed, forwards
// signals, enforces the timeout, and turns the ranks' fates into prun's exit
// status. Data flows one way: job spec -> allocation -> map -> launch plan ->
// daemons; events and output come back through the upstream link.
package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fatih/color"

	"prun/daemon"
	"prun/hostfile"
	"prun/internal/trace"
	"prun/iof"
	"prun/jobspec"
	"prun/mapper"
	"prun/mpir"
	"prun/rsh"
)

// Options are the launcher's surroundings; tests substitute them.
type Options struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	ColorTags      bool // stdout is a terminal: colour rank tags
	ColorErrors    bool // stderr is a terminal: colour prun's messages
	TmpDir         string
	Env            []string
	KillGrace      time.Duration // between the polite signal and SIGKILL
	Signals        *Signals      // SIGINT, SIGTERM, ... (nil in tests that call Run: not caught)
}

// DefaultOptions are the real process's, catching sigs.
func DefaultOptions(sigs *Signals) Options {
	noColor := os.Getenv("NO_COLOR") != ""
	return Options{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		ColorTags:   !noColor && isTerminal(os.Stdout),
		ColorErrors: !noColor && isTerminal(os.Stderr),
		TmpDir:      os.TempDir(),
		Env:         os.Environ(),
		KillGrace:   time.Second,
		Signals:     sigs,
	}
}

// verboseEnv are the debug channels -v turns on, here and (forwarded
// with the PRUN_DEBUG_ prefix) on the other nodes' daemons; --debug-daemons
// turns on the last.
var verboseEnv = []string{"PRUN_DEBUG_TIMING", "PRUN_DEBUG_PMI", "PRUN_DEBUG_PMIX", "PRUN_DEBUG_REMOTE"}

// Run runs job standalone and returns prun's exit status: the launch is
// its own runtime, whose daemons start and end with its one job.
func Run(job *jobspec.Job, opts Options) int {
	opts.Env = debugEnv(job, opts.Env)
	// prun-ssh, which checkNames starts, ends with the launch also when no
	// tree (whose Close ends it) started: nothing of the launch outlives it.
	// (A persistent runtime's is the runtime's.)
	defer rsh.Shutdown()
	return runJob(job, opts, &standalone{}, 0, nil)
}

// debugEnv turns on, in this process and in env (the other nodes' daemons
// get them), the debug channels job asks for: -v's, or those that
// --debug-daemons and --profile read.
func debugEnv(job *jobspec.Job, env []string) []string {
	var debug []string
	switch {
	case job.Verbose:
		debug = verboseEnv
	default:
		if job.DebugDaemons || job.Profile { // the other nodes' milestones are in their daemons' stderr
			debug = append(debug, "PRUN_DEBUG_REMOTE")
		}
		if job.Profile {
			debug = append(debug, "PRUN_DEBUG_TIMING")
		}
	}
	if len(debug) == 0 {
		return env
	}
	env = slices.Clone(env)
	for _, v := range debug {
		os.Setenv(v, "1")
		env = append(env, v+"=1")
	}
	return env
}

// runJob runs job on rt, as its submission sub (0 standalone), mapping on
// topos (nil: the job's own, found when it maps); the phases are the same
// either way, rt doing what differs.
func runJob(job *jobspec.Job, opts Options, rt rte, sub int, topos *topologies) int {
	r := &run{opts: opts, showProgress: job.ShowProgress, jobs: newJobTable(), q: newQueue(),
		pol: policy{quiet: job.Quiet, recovery: job.EnableRecovery, primaryOnly: job.PrimaryStatus},
		rte: rt, daemons: &daemons{}, topos: topos, sub: sub, nsBase: "prun." + strconv.Itoa(os.Getpid())}
	if sub > 0 { // a submission's namespaces name it: the runtime runs many
		r.nsBase += ".s" + strconv.Itoa(sub)
	}
	out := outputOptions(job.Output, opts.ColorTags)
	out.Prefix, out.NodeIndex = job.OutputPrefix, r.nodeIndex
	out.OutPattern, out.ErrPattern = job.OutfilePattern, job.ErrfilePattern
	out.OnBrokenPipe = func() { r.q.push(brokenPipe{}) }
	r.out = iof.NewWriter(opts.Stdout, opts.Stderr, out)
	start := time.Now()
	if job.ReportPID != "" {
		if err := reportPID(job.ReportPID, opts); err != nil {
			r.errorf("--report-pid %s: %v", job.ReportPID, err)
			r.out.Close()
			return ExitFailure
		}
	}
	if job.OutputProctable != "" {
		r.proctable = job.OutputProctable
		if r.proctable != "-" && r.proctable != "+" {
			f, err := os.Create(r.proctable)
			if err != nil {
				r.errorf("--output-proctable: %v", err)
				r.out.Close()
				return ExitFailure
			}
			r.proctableFile = f
			defer f.Close()
		}
	}
	code := r.run(job)
	if job.PrintExitCodes {
		for _, l := range r.exitCodes() {
			r.out.Printf("prun: %s\n", l)
		}
	}
	// Ordered output prints now, and per-rank files close.
	if err := r.out.Close(); err != nil && code == 0 {
		code = ExitFailure
	}
	if job.Report != "" {
		if err := r.writeReport(job, start, code); err != nil {
			r.errorf("--report: %v", err)
			if code == 0 {
				code = ExitFailure
			}
		}
	}
	return code
}

// run is one job's launch, with what it spawns: standalone, or a
// persistent runtime's submission; rte does what differs. It owns its job
// table, its policy, its output and its exit status, and borrows the
// nodes' daemons from rte (attach).
type run struct {
	opts Options
	out  *iof.Writer
	q    *queue    // what the loop handles: the daemons' events, spawns and job control for its jobs
	jobs *jobTable // the user's job first, then the jobs its ranks spawned; the loop's
	pol  policy    // the launch's fate and its exit status

	rte      rte
	*daemons // rte's, once attached (before: none, up nil)

	events notifier // the launcher's own PMIx events in flight (events.go)

	alloc hostfile.Allocation // what the job maps onto: rte's grant
	// allocSource says where the allocation came from, for --display.
	allocSource string
	mpirProcs   []mpir.Proc // the MPIR table published so far: each job once it has started whole
	univ        int

	mapOpts        mapper.Options // for spawned jobs
	topos          *topologies
	reportBindings bool

	// Open MPI help messages by topic: how many ranks sent each after the
	// one shown, and the topics in the order first seen.
	helpRepeats map[string]int
	helpTopics  []string

	nodesMu sync.Mutex
	nodes   map[string]int // the map's nodes by name: their index (-prepend-pattern's %p)

	// --output-proctable: where the first job's table goes once every
	// rank started (a file is created before anything starts).
	proctable     string
	proctableFile *os.File
	showProgress  bool // --show-progress

	graceDue bool // the polite signal went out: SIGKILL follows after the grace

	sub    int    // its submission number in a persistent runtime; 0 standalone
	nsBase string // its namespaces are nsBase.1, nsBase.2, ...
}

// nodeIndex is host's index among the job's nodes.
func (r *run) nodeIndex(host string) (int, bool) {
	r.nodesMu.Lock()
	defer r.nodesMu.Unlock()
	i, ok := r.nodes[host]
	return i, ok
}

func (r *run) errorf(format string, a ...any) {
	msg := "prun: " + fmt.Sprintf(format, a...)
	if r.opts.ColorErrors {
		c := color.New(color.FgRed, color.Bold)
		c.EnableColor()
		msg = c.Sprint(msg)
	}
	r.out.Printf("%s\n", msg)
}

// startup is what the phases of run hand on to each other, and what they
// leave to undo when run returns.
type startup struct {
	job      *jobspec.Job
	m        *mapper.Map
	deadline time.Time // --timeout's, counted from the start: starting other nodes is part of the job
	sigs     <-chan os.Signal
	replay   []os.Signal // signals caught while the start could not act on them
	plan     *daemon.Plan
	undo     []func()
}

func (s *startup) defer_(f func()) { s.undo = append(s.undo, f) }

func (s *startup) unwind() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
}

// run is the launch, in phases: prepare (map on this node, session,
// signals), start the other nodes (and map again on their topologies),
// make the plan, start this node's daemon, launch, the loop, finish. A
// phase that fails says why and returns prun's exit status.
func (r *run) run(job *jobspec.Job) int {
	s := &startup{job: job}
	defer s.unwind()
	if code, done := r.prepare(s); done {
		return code
	}
	for _, phase := range []func(*startup) int{r.startNodes, r.makePlan, r.startLocal, r.launchFirst, r.listenInspect} {
		if code := phase(s); code != 0 {
			return code
		}
	}
	r.loop(s)
	return r.finish()
}

// prepare maps the job (rte.place: standalone, with this node's topology
// for every node; bad input fails here, before anything starts), shows the
// map for --do-not-launch, catches signals and attaches to the runtime's
// daemons (rte.attach: standalone, it creates the session directory and
// upstream). done says the launch goes no further, with its status.
func (r *run) prepare(s *startup) (code int, done bool) {
	job := s.job
	if job.Timeout > 0 {
		s.deadline = time.Now().Add(job.Timeout)
	}
	m, code := r.rte.place(r, job)
	trace.Mark("mapped")
	if m == nil {
		return code, true
	}
	s.m = m
	if job.Place.DoNotLaunch {
		return r.display(job, m), true
	}
	// Signals are caught before anything starts so that no Ctrl-C is lost.
	s.sigs = r.opts.Signals.channel()
	s.defer_(r.opts.Signals.stop)
	nodes, code := r.rte.attach(r, s)
	if code != 0 {
		return code, true
	}
	r.daemons = nodes
	return 0, false
}

// startNodes has the other nodes' daemons up (rte.startNodes), then
// numbers the map's nodes.
func (r *run) startNodes(s *startup) int {
	if code := r.rte.startNodes(r, s); code != 0 {
		return code
	}
	return r.indexNodes(s)
}

// indexNodes shows what --display asks for and numbers the map's nodes.
func (r *run) indexNodes(s *startup) int {
	if code := r.display(s.job, s.m); code != 0 {
		return code
	}
	r.nodesMu.Lock()
	r.nodes = map[string]int{}
	for i, n := range s.m.Nodes {
		r.nodes[n.Name] = i
	}
	r.nodesMu.Unlock()
	return 0
}

// makePlan makes the user's job's launch plan.
func (r *run) makePlan(s *startup) int {
	job, m := s.job, s.m
	r.univ = max(m.Slots, len(m.Procs))
	switch {
	case job.UnivSize == jobspec.UnivInfinite:
		r.univ = jobspec.UnivInfinite
	case job.UnivSize > 0:
		r.univ = max(job.UnivSize, len(m.Procs)) // never smaller than the job
	}
	plan := &daemon.Plan{
		Nspace:     r.nspace(0),
		JobID:      r.jobID(0),
		Submission: r.sub,
		Job:        job,
		Map:        m,
		UnivSize:   r.univ,
		Stdin:      job.Stdin,
		// A debugger that started prun attaches to the ranks before they
		// go past PMIx_Init.
		DebugStop: mpir.BeingDebugged(),
	}
	if plan.Stdin >= len(m.Procs) {
		r.errorf("--stdin %d: the job has ranks 0-%d", plan.Stdin, len(m.Procs)-1)
		return ExitUsage
	}
	var err error
	if plan.Programs, plan.Files, err = preloads(job); err != nil {
		r.errorf("%v", err)
		return ExitFailure
	}
	s.plan = plan
	return 0
}

// startLocal routes stdin and has this node's daemon ready (rte.startLocal).
func (r *run) startLocal(s *startup) int { return r.rte.startLocal(r, s) }

// launchFirst launches the user's job (after what it preloads), then
// handles the signals that came during the start.
func (r *run) launchFirst(s *startup) int {
	trace.Mark("launching")
	pending, err := r.launchWatched(s.plan, s.sigs, s.deadline, s.job.Timeout)
	s.replay = append(s.replay, pending...)
	if err != nil {
		r.errorf("%v", err)
		r.rte.abandon(r)
		if abort := (startupAbort{}); errors.As(err, &abort) {
			return startStatus(abort)
		}
		return ExitFailure
	}
	for _, sig := range s.replay {
		r.onSignal(sig)
	}
	return 0
}

// loop is the launch's state machine: it handles the daemons' events, the
// signals, the timeout and the grace's end until every job is over.
func (r *run) loop(s *startup) {
	var timeout <-chan time.Time
	if s.job.Timeout > 0 {
		t := time.NewTimer(time.Until(s.deadline))
		defer t.Stop()
		timeout = t.C
	}
	var graceOver <-chan time.Time
	for r.jobs.active() {
		var d decision
		select {
		case <-r.q.ready:
			for _, item := range r.q.drain() {
				r.handle(item)
			}
		case sig := <-s.sigs:
			r.onSignal(sig)
		case <-timeout:
			r.onTimeout(s.job.Timeout)
		case <-graceOver:
			d = r.pol.graceOver()
		}
		r.act(d)
		if r.graceDue && graceOver == nil {
			graceOver = time.After(r.opts.KillGrace)
		}
	}
}

// finish ends the run's use of the daemons (rte.finish) and returns prun's
// exit status.
func (r *run) finish() int {
	trace.Mark("job done; closing")
	if msg := r.pol.finish(); msg != "" {
		r.errorf("%s", msg)
	}
	r.rte.finish(r)
	r.helpSummary()
	trace.Mark("closed")
	return r.pol.status()
}

// fail ends the launch for a failure the policy did not see happen (a
// failed start, a refused spawn, a lost node), told as msg.
func (r *run) fail(msg string, code int) { r.act(r.pol.failed(msg, code)) }

// act carries out a decision of the policy.
func (r *run) act(d decision) {
	if d.say != "" {
		r.errorf("%s", d.say)
	}
	if d.failed != "" {
		if j := r.jobs.primary(); j != nil && j.plan.DebugStop {
			mpir.Aborting(d.failed) // the debugger may look at the ranks before they go
		}
	}
	if d.stop != 0 {
		r.signalAll(syscall.SIGCONT) // a stopped rank cannot act on SIGTERM
		r.signalAll(d.stop)
		r.graceDue = true // SIGKILL after the grace
	}
	if d.kill {
		r.signalAll(syscall.SIGKILL)
	}
}
