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
	"path/filepath"
	"prun/internal/trace"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fatih/color"
	"github.com/mattn/go-isatty"
	"golang.org/x/sys/unix"

	"prun/daemon"
	"prun/hostfile"
	"prun/internal/progpath"
	"prun/iof"
	"prun/jobspec"
	"prun/mapper"
	"prun/mpir"
	"prun/pmixsrv"
	"prun/rsh"
	"prun/stacktree"
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
	for _, phase := range []func(*startup) int{r.startNodes, r.makePlan, r.startLocal, r.launchFirst} {
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

// display shows what the user asked to see of the allocation and the map.
func (r *run) display(job *jobspec.Job, m *mapper.Map) int {
	for _, d := range job.Place.Display {
		switch d {
		case jobspec.DisplayAllocation:
			fmt.Fprint(r.opts.Stdout, displayAllocation(r.alloc, r.allocSource))
		case jobspec.DisplayMap:
			fmt.Fprint(r.opts.Stdout, m.Table())
		case jobspec.DisplayMapJSON:
			b, err := m.JSON()
			if err != nil {
				r.errorf("%v", err)
				return ExitFailure
			}
			fmt.Fprintf(r.opts.Stdout, "%s\n", b)
		case jobspec.DisplayTopo:
			fmt.Fprint(r.opts.Stdout, r.displayTopologies(m))
		case jobspec.DisplayRankMap:
			fmt.Fprint(r.opts.Stdout, m.RankMap())
		}
	}
	return 0
}

// allocator is what a runtime grants a job to map onto: the allocation,
// where it came from, and the hosts whose slots are their cores.
type allocator func(job *jobspec.Job) (alloc hostfile.Allocation, source string, fromCores map[string]bool, err error)

// mapJob maps the job onto what grant gives it (standalone: the allocation
// resolved for it; in a persistent runtime, its nodes less what running
// jobs use). A nil map comes with prun's exit status and the reason.
func (r *run) mapJob(job *jobspec.Job, grant allocator) (*mapper.Map, int, error) {
	if r.topos == nil {
		topos, err := newTopologies(job.Place.Topology)
		if err != nil {
			return nil, ExitUsage, err
		}
		r.topos = topos
	}
	topos := r.topos
	// The job spec is the CLI's, read-only: the apps' host lists that the
	// allocation completes go into the copy the mapper is given.
	cp := *job
	cp.Apps = slices.Clone(job.Apps)
	job = &cp
	alloc, source, fromCores, err := grant(job)
	if err != nil {
		return nil, ExitUsage, err
	}
	r.alloc, r.allocSource = alloc, source
	opts, err := mapOptions(job.Place, alloc, fromCores)
	if err != nil {
		return nil, ExitUsage, err
	}
	r.mapOpts = opts
	localAppHosts(job.Apps, alloc, job.Place.LocalHost)
	m, err := mapper.PlaceWith(job, alloc, topos.of, opts)
	if err != nil {
		return nil, ExitUsage, err
	}
	r.reportBindings = m.BindTo.Report
	for _, x := range job.Xterm.Ranks {
		if x >= len(m.Procs) {
			return nil, ExitUsage, fmt.Errorf("--xterm: no rank %d in a job of %d", x, len(m.Procs))
		}
	}
	if job.Launch.LocalOnly {
		for _, n := range m.Nodes {
			if len(n.Procs) > 0 && !isLocal(n.Name, job.Place.LocalHost) {
				return nil, ExitUsage, fmt.Errorf("-launcher fork starts processes on this node only, and the map puts some on %s", n.Name)
			}
		}
	}
	return m, 0, nil
}

// displayTopologies shows each mapped node's topology: its synthetic
// form, then each level's objects with their CPUs.
func (r *run) displayTopologies(m *mapper.Map) string {
	var b strings.Builder
	for _, n := range m.Nodes {
		t := r.topos.of(n.Name)
		if t == nil {
			fmt.Fprintf(&b, "topology of %s: unknown\n", n.Name)
			continue
		}
		fmt.Fprintf(&b, "topology of %s:\n", n.Name)
		for _, l := range strings.Split(t.String(), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}

func displayAllocation(a hostfile.Allocation, source string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "allocation (%s): %d hosts, %d slots\n", source, len(a.Hosts), a.Slots())
	for _, h := range a.Hosts {
		max := "-"
		if h.MaxSlots > 0 {
			max = strconv.Itoa(h.MaxSlots)
		}
		fmt.Fprintf(&b, "  %-24s slots=%-4d max_slots=%s\n", h.Name, h.Slots, max)
	}
	return b.String()
}

func (r *run) nspace(index int) string {
	return r.nsBase + "." + strconv.Itoa(index+1)
}

// jobID is the job's PMIx job id: the namespace without its prefix.
func (r *run) jobID(index int) string {
	return strings.TrimPrefix(r.nspace(index), "prun.")
}

// launch hands a plan to the daemons and starts tracking the job.
func (r *run) launch(plan *daemon.Plan) error {
	r.jobs.add(plan)
	r.rte.own(r, plan.Nspace)
	for _, n := range plan.Map.Nodes {
		if len(n.Procs) > 0 && r.up.node(n.Name) == nil {
			return fmt.Errorf("no daemon on %s", n.Name)
		}
	}
	// Every daemon registers the job, ranks there or not: a process may ask
	// its server about any job (a spawned one's size, nodes, peers).
	for _, n := range r.up.nodes() {
		if err := n.Launch(plan); err != nil {
			return err
		}
	}
	return nil
}

// launchWatched sends what the plan preloads to the other nodes, then
// launches. The sending (a large file takes a while) is given up at a
// terminating signal or at the job's deadline; it returns the signals
// caught meanwhile.
func (r *run) launchWatched(plan *daemon.Plan, sigs <-chan os.Signal, deadline time.Time, timeout time.Duration) ([]os.Signal, error) {
	if r.tree == nil || len(plan.Programs) == 0 && len(plan.Files) == 0 {
		return nil, r.launch(plan)
	}
	var why error
	stop := watchStart(sigs, deadline, timeout, func(a startupAbort) {
		if why == nil {
			a.while = "the preloaded files were sent"
			why = a
			r.tree.StopPreload()
		}
	})
	sums, err := r.tree.Preload(plan)
	pending := stop()
	switch {
	case why != nil:
		return pending, why
	case err != nil:
		return pending, err
	}
	for _, fs := range [][]daemon.File{plan.Programs, plan.Files} {
		for i := range fs {
			fs[i].Sum = sums[fs[i].ID]
		}
	}
	return pending, r.launch(plan)
}

// onSpawn starts a job that a rank asked for (PMIx_Spawn, PMI spawn). It is
// mapped onto the allocation's free slots; an implicit allocation lets it
// oversubscribe, as it does the user's job.
func (r *run) onSpawn(req daemon.SpawnRequest) {
	done := req.Done
	req.Done = func(nspace string, err error) {
		if err != nil && !r.pol.ended() {
			var cmds []string
			for _, a := range req.Apps {
				cmds = append(cmds, a.Cmd)
			}
			msg := fmt.Sprintf("spawn of %s by %s refused: %v", strings.Join(cmds, " : "),
				r.rankDesc(req.Parent.Nspace, int(req.Parent.Rank)), err)
			if req.FailJobOnRefusal {
				r.fail(msg, ExitFailure)
			} else {
				// The MPI library reports only that its spawn failed.
				r.errorf("%s", msg)
			}
		}
		done(nspace, err)
	}
	if r.pol.ended() {
		req.Done("", errors.New("the job is ending"))
		return
	}
	parent := r.jobs.get(req.Parent.Nspace)
	if parent == nil {
		req.Done("", fmt.Errorf("spawn from unknown namespace %s", req.Parent.Nspace))
		return
	}
	pj := parent.plan.Job
	job := &jobspec.Job{TagOutput: pj.TagOutput, PMI: pj.PMI}
	var cmdline []string
	for _, a := range req.Apps {
		wdir := a.Cwd
		if wdir == "" {
			wdir = pj.Apps[parent.plan.Map.Procs[int(req.Parent.Rank)%len(parent.plan.Map.Procs)].App].Wdir
		}
		exe, err := spawnProgram(a.Cmd, a.Path, wdir)
		if err != nil {
			req.Done("", err)
			return
		}
		hosts, err := spawnHosts(a.Hosts, a.Hostfile, wdir) // each app its own, as a context's --host
		if err != nil {
			req.Done("", err)
			return
		}
		if a.NP <= 0 {
			req.Done("", fmt.Errorf("%d processes of %s asked for", a.NP, a.Cmd))
			return
		}
		job.Apps = append(job.Apps, jobspec.App{Argv: a.Argv, Exe: exe, NP: a.NP, Env: a.Env, Wdir: wdir, Hosts: hosts})
		cmdline = append(cmdline, jobspec.ArgvString(a.Argv))
	}
	job.CmdLine = strings.Join(cmdline, " : ")
	free := r.freeSlots()
	localAppHosts(job.Apps, free, pj.Place.LocalHost)
	m, err := mapper.PlaceWith(job, free, r.topos.of, mapper.Options{LocalHost: r.mapOpts.LocalHost,
		SlotsFromCores: r.mapOpts.SlotsFromCores})
	if err != nil {
		req.Done("", err)
		return
	}
	index := len(r.jobs.list)
	plan := &daemon.Plan{
		Nspace:     r.nspace(index),
		JobID:      r.jobID(index),
		Index:      index,
		Submission: r.sub,
		Job:        job,
		Map:        m,
		UnivSize:   r.univ,
		Stdin:      daemon.StdinNone,
		Parent:     &req.Parent,
		ParentKVS:  "kvs_" + req.Parent.Nspace,
		Preput:     req.Preput,
		DebugStop:  mpir.BeingDebugged(), // held for the debugger, as the user's job
	}
	if err := r.launch(plan); err != nil {
		r.fail(fmt.Sprintf("spawn of %s failed: %v", job.CmdLine, err), ExitFailure)
		req.Done("", err) // after the failure: its message is the one line
		return
	}
	req.Done(plan.Nspace, nil)
}

// spawnProgram finds a spawned program: in the directories of path (the
// spawn's "path" info, a colon list) when given and the name has no slash,
// else as on the command line.
func spawnProgram(cmd, path, wdir string) (string, error) {
	if path == "" || strings.Contains(cmd, "/") {
		return progpath.Resolve(cmd, wdir, nil)
	}
	for _, dir := range filepath.SplitList(path) {
		if exe, err := progpath.Resolve(filepath.Join(dir, cmd), wdir, nil); err == nil {
			return exe, nil
		}
	}
	return "", fmt.Errorf("%s not found in path %s", cmd, path)
}

// freeSlots is the allocation less the ranks that still run on it.
func (r *run) freeSlots() hostfile.Allocation {
	used := r.jobs.used()
	free := hostfile.Allocation{Implicit: r.alloc.Implicit}
	for _, h := range r.alloc.Hosts {
		free.Hosts = append(free.Hosts, hostfile.Host{Name: h.Name, Slots: max(h.Slots-used[h.Name], 0)})
	}
	if free.Slots() == 0 && free.Implicit {
		free.Hosts[0].Slots = 1 // oversubscribe from the first host on
	}
	return free
}

func (r *run) rankDesc(nspace string, rank int) string {
	j := r.jobs.get(nspace)
	if j == nil || rank < 0 || rank >= len(j.plan.Map.Procs) {
		return fmt.Sprintf("rank %d of %s", rank, nspace)
	}
	p := j.plan.Map.Procs[rank]
	job := ""
	if j.plan.Index > 0 {
		job = fmt.Sprintf(" of spawned job %d", j.plan.Index)
	}
	return fmt.Sprintf("rank %d%s (%s) on %s", rank, job, j.plan.Job.Apps[p.App].Argv[0], j.plan.Map.Nodes[p.Node].Name)
}

func (r *run) handle(item any) {
	switch ev := item.(type) {
	case daemon.Event:
		r.onEvent(ev)
	case jobControl:
		r.onJobControl(ev)
	case daemon.SpawnRequest:
		r.onSpawn(ev)
	case nodeLost:
		r.onNodeLost(ev)
	case brokenPipe:
		r.act(r.pol.brokenPipe())
	case killSubmission: // a DVM's job: prun dvm kill, or the DVM stopping
		r.onSignal(ev.sig)
	}
	r.announceEnds()
}

// brokenPipe says prun's stdout or stderr reader went away.
type brokenPipe struct{}

// onNodeLost records the node's ranks as gone with its daemon; the
// runtime says what that means (rte.nodeLost).
func (r *run) onNodeLost(nl nodeLost) {
	r.rte.nodeLost(r, nl, r.jobs.nodeLost(nl.host))
}

func (r *run) onEvent(ev daemon.Event) {
	if ev.Kind == daemon.Refused || ev.Kind == daemon.Leftover { // a node's, or what it could not end
		r.errorf("%s: %s", ev.Node, ev.Msg)
		return
	}
	j := r.jobs.get(ev.Nspace)
	if j == nil {
		return
	}
	switch ev.Kind {
	case daemon.ProcStarted:
		again := r.jobs.started(j, ev.Rank, ev.Pid, ev.Time) // again: a restart (--max-restarts)
		if r.reportBindings {
			r.reportBinding(j, ev)
		}
		if again {
			if j.mpirBase >= 0 {
				r.mpirProcs[j.mpirBase+ev.Rank].Pid = ev.Pid
				mpir.SetPid(j.mpirBase+ev.Rank, ev.Pid)
			}
			return
		}
		if r.showProgress && j == r.jobs.primary() && progressStep(j.started, len(j.plan.Map.Procs)) {
			r.out.Printf("prun: %d of %d processes started\n", j.started, len(j.plan.Map.Procs))
		}
		if j.started == len(j.plan.Map.Procs) {
			if r.proctable != "" && j == r.jobs.primary() {
				r.outputProctable(j)
			}
			r.debuggerAcquire(j)
		}
	case daemon.ProcRestarted:
		if !r.pol.quiet {
			how := fmt.Sprintf("exited with status %d", ev.Status)
			if ev.Signal != 0 {
				how = fmt.Sprintf("was killed by signal %d (%s)", int(ev.Signal), signalName(ev.Signal))
			}
			of := fmt.Sprintf("%d of %d", ev.Restart, j.plan.Job.MaxRestarts)
			if j.plan.Job.MaxRestarts == jobspec.RestartsUnlimited {
				of = fmt.Sprintf("restart %d, --continuous", ev.Restart)
			}
			r.errorf("%s (pid %d) %s; starting it again (%s)", r.rankDesc(ev.Nspace, ev.Rank), ev.Pid, how, of)
		}
	case daemon.LaunchFailed:
		r.jobs.exited(j, ev.Rank, nil)
		r.fail(fmt.Sprintf("cannot start %s: %s", r.rankDesc(ev.Nspace, ev.Rank), ev.Msg), ExitFailure)
	case daemon.ProcAborted:
		r.act(r.pol.aborted(r.rankDesc(ev.Nspace, ev.Rank), ev.Status, ev.Msg))
	case daemon.ProcExited:
		r.jobs.exited(j, ev.Rank, &ev)
		if r.pol.recovery && (ev.Status != 0 || ev.Signal != 0) {
			r.announceFailure(j, ev)
		}
		r.act(r.pol.rankEnded(rankEnd{desc: r.rankDesc(ev.Nspace, ev.Rank), pid: ev.Pid, status: ev.Status,
			signal: ev.Signal, connected: ev.Connected, finalized: ev.Finalized, spawned: j.plan.Index > 0,
			time: ev.Time}, r.jobs.runningRanks(), time.Now()))
	case daemon.NodeJobDone:
		r.jobs.nodeDone(j, ev.Node)
	case daemon.LogMessage:
		r.out.Printf("[%s:%d] %s\n", ev.Nspace, ev.Rank, ev.Msg)
	case daemon.HelpMessage:
		r.onHelp(ev)
	case daemon.ProtocolError:
		if ev.Rank < 0 { // a connection to -pmi-port that never named its rank
			r.errorf("%s: PMI protocol error: %s", ev.Node, ev.Msg)
			break
		}
		r.errorf("rank %d on %s: PMI protocol error: %s", ev.Rank, ev.Node, ev.Msg)
	}
}

// onHelp shows an Open MPI help message as Open MPI's mpirun does: the
// first of a topic whole, later ones of the same topic counted (see
// helpSummary).
func (r *run) onHelp(ev daemon.Event) {
	if r.pol.quiet {
		return
	}
	if r.helpRepeats == nil {
		r.helpRepeats = map[string]int{}
	}
	if n, seen := r.helpRepeats[ev.Topic]; seen {
		r.helpRepeats[ev.Topic] = n + 1
		return
	}
	r.helpRepeats[ev.Topic] = 0
	r.helpTopics = append(r.helpTopics, ev.Topic)
	r.out.Printf("%s", ev.Msg)
	if !strings.HasSuffix(ev.Msg, "\n") {
		r.out.Printf("\n")
	}
}

// helpSummary says how many more ranks sent each help message shown.
func (r *run) helpSummary() {
	for _, topic := range r.helpTopics {
		switch n := r.helpRepeats[topic]; n {
		case 0:
		case 1:
			r.errorf("1 more process has sent help message %s", topic)
		default:
			r.errorf("%d more processes have sent help message %s", n, topic)
		}
	}
}

// reportBinding prints where a rank runs, as --report-bindings asks.
func (r *run) reportBinding(j *job, ev daemon.Event) {
	p := j.plan.Map.Procs[ev.Rank]
	where := "not bound"
	if len(p.CPUs) > 0 {
		where = fmt.Sprintf("bound to CPUs %s (%v)", p.CPUs, j.plan.Map.BindTo.To)
	}
	switch mb := j.plan.Map.MemBind; {
	case p.Mems != nil:
		where += fmt.Sprintf("; memory %v on NUMA nodes %s", mb.Mode, p.Mems)
	case mb.Mode != mapper.MemDefault:
		where += fmt.Sprintf("; memory %v", mb.Mode)
	}
	r.out.Printf("prun: %s, pid %d: %s\n", r.rankDesc(ev.Nspace, ev.Rank), ev.Pid, where)
}

func (r *run) signalAll(sig syscall.Signal) {
	for _, j := range r.jobs.list {
		r.up.signal(j.plan.Nspace, nil, sig)
	}
}

func (r *run) onSignal(s os.Signal) {
	if g, ok := s.(submitterGone); ok {
		r.act(r.pol.submitterGone(g.String(), r.jobs.runningRanks()))
		return
	}
	sig := s.(syscall.Signal)
	switch sig {
	case syscall.SIGWINCH:
		if r.local != nil {
			r.local.ResizePTY(r.jobs.primary().plan.Nspace)
		}
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		r.act(r.pol.signal(sig, r.jobs.runningRanks()))
	case syscall.SIGTSTP:
		r.rte.suspend(r)
	default: // SIGUSR1, SIGUSR2, SIGCONT: pass on, nothing more
		r.signalAll(sig)
	}
}

func (r *run) onTimeout(after time.Duration) {
	if r.pol.fail != nil {
		return
	}
	var still []string
	for _, j := range r.jobs.list {
		for rank, p := range j.procs {
			if p.started && !p.exited {
				still = append(still, r.stillRunning(j, rank, p.pid))
			}
		}
	}
	if pj := r.jobs.primary().plan.Job; pj.ReportStateOnTimeout || pj.GetStackTraces {
		r.reportState(pj.GetStackTraces)
	}
	msg := fmt.Sprintf("job timed out after %s; killing %d running rank", after, len(still))
	if len(still) != 1 {
		msg += "s"
	}
	if len(still) > 0 {
		msg += ": " + strings.Join(still, ", ")
	}
	r.act(r.pol.timedOut(msg))
}

func (r *run) onJobControl(jc jobControl) {
	targets := map[string][]int{} // nspace -> ranks, nil for all
	for _, t := range jc.targets {
		if r.jobs.get(t.Nspace) == nil {
			continue
		}
		if t.Rank == pmixsrv.RankWildcard {
			targets[t.Nspace] = nil
			continue
		}
		if ranks, seen := targets[t.Nspace]; !seen || ranks != nil {
			targets[t.Nspace] = append(ranks, int(t.Rank))
		}
	}
	if len(targets) == 0 {
		jc.done(pmixsrv.ErrNotFound)
		return
	}
	if jc.sig == syscall.SIGKILL && r.pol.fail == nil {
		var who []string
		for ns, ranks := range targets {
			if ranks == nil {
				who = append(who, "all of "+ns)
			} else {
				sort.Ints(ranks)
				who = append(who, fmt.Sprintf("ranks %v of %s", ranks, ns))
			}
		}
		sort.Strings(who)
		r.act(r.pol.killRequested(fmt.Sprintf("rank %d of %s requested PMIx_Job_control kill of %s",
			jc.req.Rank, jc.req.Nspace, strings.Join(who, ", "))))
	}
	for ns, ranks := range targets {
		r.up.signal(ns, ranks, jc.sig)
	}
	jc.done(nil)
}

// reportState prints what each running rank is doing, and, when asked,
// their stacks merged into one tree per job (ranks at the same place share a
// branch, so the one elsewhere stands out), before a timeout kills them.
func (r *run) reportState(stacks bool) {
	for _, j := range r.jobs.list {
		var states []daemon.RankState
		for _, n := range r.up.nodes() {
			states = append(states, n.Inspect(j.plan.Nspace, stacks)...)
		}
		sort.Slice(states, func(a, b int) bool { return states[a].Rank < states[b].Rank })
		tree := stacktree.New()
		for _, st := range states {
			line := fmt.Sprintf("%s, pid %d: state %s, cpu %s", r.rankDesc(j.plan.Nspace, st.Rank), st.Pid, st.State,
				st.CPU.Round(time.Millisecond))
			if st.Wchan != "" {
				line += ", waiting in " + st.Wchan
			}
			r.out.Printf("prun: %s\n", line)
			if !stacks {
				continue
			}
			if threads, err := stacktree.Parse([]byte(st.Stack)); err == nil {
				tree.Add(st.Rank, threads)
			} else {
				why, _, _ := strings.Cut(strings.TrimPrefix(st.Stack, "no stack: "), "\n")
				tree.Fail(st.Rank, why)
			}
		}
		if !stacks || len(states) == 0 {
			continue
		}
		tree.Finish()
		what := "the stacks of the running ranks"
		if j.plan.Index > 0 {
			what += fmt.Sprintf(" of job %d", j.plan.Index)
		}
		r.out.Printf("prun: %s, merged:\n", what)
		for _, l := range strings.Split(strings.TrimSuffix(tree.Text(stacktree.Options{Collapse: true}), "\n"), "\n") {
			r.out.Printf("prun:   %s\n", l)
		}
	}
}

// stillRunning names a rank in the timeout message: "3 (pid 123 on n1)",
// or "job 1 rank 3 (...)" for a spawned job's.
func (r *run) stillRunning(j *job, rank, pid int) string {
	host := j.plan.Map.Nodes[j.plan.Map.Procs[rank].Node].Name
	if j.plan.Index > 0 {
		return fmt.Sprintf("job %d rank %d (pid %d on %s)", j.plan.Index, rank, pid, host)
	}
	return fmt.Sprintf("%d (pid %d on %s)", rank, pid, host)
}

func isTerminal(f *os.File) bool { return isatty.IsTerminal(f.Fd()) }

// makeRaw puts a terminal in raw input mode (as cfmakeraw, but output
// processing stays on so that other ranks' lines still start at column 0)
// and returns how to restore it.
func makeRaw(f *os.File) (restore func(), err error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

// reportPID tells where prun runs, as mpirun's --report-pid does: "-" is
// stdout, "+" stderr, anything else a file.
func reportPID(where string, opts Options) error {
	return reportLine(where, strconv.Itoa(os.Getpid())+"\n", opts)
}

// preloads describes what the job sends to every node with its plan, each
// file once; the contents go apart (remote.Tree.Preload), in chunks.
func preloads(job *jobspec.Job) (programs, files []daemon.File, err error) {
	byPath := map[string]daemon.File{}
	describe := func(path string) (daemon.File, error) {
		if f, ok := byPath[path]; ok {
			return f, nil
		}
		f, err := daemon.FileOf(path)
		if err != nil {
			return f, err
		}
		f.ID = len(byPath)
		byPath[path] = f
		return f, nil
	}
	if job.PreloadBinary {
		programs = make([]daemon.File, len(job.Apps))
		for i, app := range job.Apps {
			if programs[i], err = describe(app.Exe); err != nil {
				return nil, nil, fmt.Errorf("--preload-binary: %w", err)
			}
		}
	}
	for _, path := range job.PreloadFiles {
		f, err := describe(path)
		if err != nil {
			return nil, nil, fmt.Errorf("--preload-files: %w", err)
		}
		files = append(files, f)
	}
	return programs, files, nil
}

// outputProctable writes every rank of j as prterun's --output-proctable
// does, one line each: "(rank, host, exe, pid) = (0, node1, /path/app, 4242)".
func (r *run) outputProctable(j *job) {
	var b strings.Builder
	for rank, p := range j.plan.Map.Procs {
		fmt.Fprintf(&b, "(rank, host, exe, pid) = (%d, %s, %s, %d)\n", rank, j.plan.Map.Nodes[p.Node].Name,
			j.plan.Job.Apps[p.App].Exe, j.procs[rank].pid)
	}
	var err error
	if r.proctableFile != nil {
		_, err = r.proctableFile.WriteString(b.String())
		if cerr := r.proctableFile.Close(); err == nil {
			err = cerr
		}
	} else {
		err = reportLine(r.proctable, b.String(), r.opts)
	}
	if err != nil {
		r.errorf("--output-proctable: %v", err)
	}
}

// debuggerAcquire hands a parallel debugger the processes of job j, once
// all have started (MPIR): the table it reads from prun's memory (also when
// it attaches later; a spawned job's processes are added at its end), and,
// when it started prun, the breakpoint at which it attaches to them, after
// which the ranks it holds in PMIx_Init are released.
func (r *run) debuggerAcquire(j *job) {
	j.mpirBase = len(r.mpirProcs)
	for rank, p := range j.plan.Map.Procs {
		r.mpirProcs = append(r.mpirProcs, mpir.Proc{Host: j.plan.Map.Nodes[p.Node].Name,
			Exe: j.plan.Job.Apps[p.App].Exe, Pid: j.procs[rank].pid})
	}
	mpir.Publish(r.mpirProcs)
	if !j.plan.DebugStop {
		return
	}
	mpir.Spawned()
	// From each node's server to its own clients of this job, the ranks
	// waiting for the debugger, and to no default handler: Open MPI's
	// default handler aborts on a release (-54) it was not waiting for, as
	// in a running parent, or in a released rank that registers its default
	// handler after the release (libpmix hands it the cached event).
	rng := pmixsrv.RangeLocal // the user's job: no other runs yet
	info := []pmixsrv.Info{{Key: pmixsrv.KeyEventNonDefault, Value: true}}
	if j != r.jobs.primary() {
		rng = pmixsrv.RangeCustom
		info = append(info, pmixsrv.Info{Key: pmixsrv.KeyEventCustomRange,
			Value: []pmixsrv.Proc{{Nspace: j.plan.Nspace, Rank: pmixsrv.RankWildcard}}})
	}
	go r.up.deliver(nil, "", pmixsrv.DebuggerRelease, pmixsrv.Proc{}, rng, info)
}

// reportLine writes line to where: - stdout, + stderr, else a file.
func reportLine(where, line string, opts Options) error {
	var err error
	switch where {
	case "-":
		_, err = io.WriteString(opts.Stdout, line)
	case "+":
		_, err = io.WriteString(opts.Stderr, line)
	default:
		err = os.WriteFile(where, []byte(line), 0o644)
	}
	return err
}
