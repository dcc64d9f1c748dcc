package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"prun/ctl"
	"prun/daemon"
	"prun/dvm"
	"prun/hostfile"
	"prun/iof"
	"prun/jobspec"
	"prun/mapper"
	"prun/pmixsrv"
	"prun/remote"
	"prun/rsh"
	"prun/sessiondir"
	"prun/topology"
)

// DVM is a persistent runtime (`prun dvm start`): the long-lived part of a
// launch, kept up between jobs. It owns the nodes' daemons (this node's
// in-process, the others' as a remote.Tree), the session directory,
// upstream (routes, names, fences) and the node table (slots used and free,
// lost nodes). Each submission is a run as a standalone launch is, through
// the same phases (runJob), the DVM its runtime (it implements runtime:
// its free slots, its daemons lent, its routing, the submitter's stdin):
// the run owns its jobs (its job table), its policy, its Writer on the
// submitter's descriptors and its exit status, and the DVM reaches it
// only through run's methods. A standalone prun is thus a launch whose
// runtime (standalone) lives as long as its one job.
//
// What routes between the daemons and the submissions: upstream's queue is
// drained by dispatch, which hands each event, spawn and job-control request
// to the run that owns the namespace; output carries its submission in
// iof.Source.Job (daemon.Plan.OutputJob) and goes to that run's Writer;
// upstream reads the jobs of every run through the DVM (a jobIndex).
type DVM struct {
	nodes     daemons             // lent to every submission (attach)
	alloc     hostfile.Allocation // every node, and its slots
	topos     *topologies         // every node's, shared by the submissions' maps
	fromCores map[string]bool     // the hosts whose slots are their cores
	env       []string            // the runtime's own environment
	tmpDir    string
	out       *iof.Writer // the log
	sess      *sessiondir.Dir
	parse     func(dvm.Run, io.Writer, io.Writer) (*jobspec.Job, int, bool) // DVMConfig.Parse

	mu      sync.RWMutex
	freed   *sync.Cond // a submission ended: --wait tries again
	byNs    map[string]*run
	bySub   map[int]*run
	jobIO   map[string]daemon.JobIO
	used    map[string]int       // slots reserved by running submissions, by host
	reserve map[int][]string     // ... each submission's, one entry per rank
	lost    map[string]lostNode  // nodes lost, until prun dvm add brings them back (Add)
	back    map[string]time.Time // ... when the last such start again began: older reports of a loss are stale
	started map[int]time.Time
	waits   map[int]bool // submissions that wait for free slots
	nextSub int
	idle    time.Time // when the last submission ended (or the start)
	closing bool
	why     string // why it stopped (Stop's), once closing

	// closeInspect closes the inspect socket (Serve's) before done: what
	// waits on done removes the runtime's directory. Under mu.
	closeInspect func()

	// forgetting counts the ended submissions whose jobs are still being
	// dropped from the nodes: that happens after the submitter heard its
	// status (it is none of its business), and ps, status and stop wait
	// for it, so what they report holds no half-forgotten job.
	forgetting sync.WaitGroup

	localName string
	done      chan struct{}
}

// DVMConfig says what a runtime spans and how it reaches its nodes.
type DVMConfig struct {
	Job    *jobspec.Job // its Place (hosts) and Launch (rsh, fanout, ...); no apps
	Env    []string
	TmpDir string
	Log    io.Writer
	// Parse turns a submitted command line into its job (the CLI's, which
	// the launcher does not import): see cli.Submitted.
	Parse func(r dvm.Run, stdout, stderr io.Writer) (job *jobspec.Job, exit int, local bool)
}

// StartDVM starts the daemons of every node and returns once each said
// hello, or why one did not (naming the node). ctx gives the start up.
func StartDVM(ctx context.Context, cfg DVMConfig) (*DVM, error) {
	job := cfg.Job
	d := &DVM{env: cfg.Env, tmpDir: cfg.TmpDir, out: iof.NewWriter(cfg.Log, cfg.Log, iof.Options{}), parse: cfg.Parse, byNs: map[string]*run{}, bySub: map[int]*run{}, jobIO: map[string]daemon.JobIO{},
		used: map[string]int{}, reserve: map[int][]string{}, lost: map[string]lostNode{}, back: map[string]time.Time{}, started: map[int]time.Time{}, waits: map[int]bool{},
		idle: time.Now(), done: make(chan struct{})}
	d.freed = sync.NewCond(&d.mu)
	topos, err := newTopologies(job.Place.Topology)
	if err != nil {
		return nil, err
	}
	if _, err := topos.localTopology(); err != nil && job.Place.Topology == "" {
		return nil, err
	}
	d.topos = topos
	alloc, source, fromCores, err := allocate(job.Place, nil, topos.cores)
	if err != nil {
		return nil, err
	}
	if err := localLogin(alloc, job.Place.LocalHost); err != nil {
		return nil, err
	}
	d.alloc = alloc
	mapOpts, err := mapOptions(job.Place, alloc, fromCores)
	if err != nil {
		return nil, err
	}
	d.fromCores = mapOpts.SlotsFromCores
	sess, err := sessiondir.Create(cfg.TmpDir)
	if err != nil {
		return nil, err
	}
	d.sess = sess
	n := &d.nodes
	n.up = newUpstream(dvmOut{d}, dvmIndex{d}, newQueue())
	ok := false
	defer func() {
		if !ok {
			d.closeNodes()
			rsh.Shutdown() // the prun-ssh of checkNames, when no tree started
		}
	}()
	if err := checkNames(job, alloc, source, cfg.Env); err != nil {
		return nil, err
	}
	if hosts := remoteHosts(alloc, job.Place.LocalHost); len(hosts) > 0 {
		tree, err := n.startTree(ctx, job, hosts, cfg.Env, alloc, nil)
		if err != nil {
			return nil, err
		}
		n.tree = tree
		n.up.setTree(tree)
		n.stall = startStallWatch(ctl.Silence(len(hosts)))
		topos.reported = map[string]*topology.Topology{}
		for _, h := range hosts {
			if t := tree.Topology(h); t != nil {
				topos.reported[h] = t
			}
			n.up.addNode(h, tree.Node(h))
		}
	}
	for _, h := range alloc.Hosts {
		if isLocal(h.Name, job.Place.LocalHost) {
			d.localName = h.Name
			break
		}
	}
	if d.localName != "" {
		dcfg := daemon.Config{Name: d.localName, Session: sess, BaseEnv: cfg.Env, JobIO: d.jobIOOf}
		if n.tree != nil {
			dcfg.Network = n.tree.LocalNetwork()
		}
		ld, err := daemon.New(dcfg, n.up)
		if err != nil {
			return nil, fmt.Errorf("cannot start the PMIx server: %v", err)
		}
		n.local = ld
		n.up.addNode(d.localName, ld)
	}
	ok = true
	go d.dispatch()
	if n.tree != nil {
		go d.watchStep(n.tree.SlurmStepEnded())
	}
	return d, nil
}

// Nodes names the runtime's nodes.
func (d *DVM) Nodes() []string {
	var out []string
	for _, h := range d.alloc.Hosts {
		out = append(out, h.Name)
	}
	return out
}

// Done is closed once the runtime has stopped.
func (d *DVM) Done() <-chan struct{} { return d.done }

// Why is why the runtime stopped (once Done is closed).
func (d *DVM) Why() string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.why
}

// dispatch hands what the daemons send to the run that owns it.
func (d *DVM) dispatch() {
	q := d.nodes.up.queue
	for {
		select {
		case <-q.ready:
		case <-d.done:
			return
		}
		for _, item := range q.drain() {
			d.route(item)
		}
	}
}

func (d *DVM) route(item any) {
	switch x := item.(type) {
	case daemon.Event:
		if x.Kind == daemon.Refused {
			d.logf("%s: %s", x.Node, x.Msg)
			return
		}
		if r := d.owner(x.Nspace); r != nil {
			r.push(x)
		}
	case jobControl:
		if r := d.owner(x.req.Nspace); r != nil {
			r.push(x)
			return
		}
		x.done(pmixsrv.ErrNotFound)
	case daemon.SpawnRequest:
		if r := d.owner(x.Parent.Nspace); r != nil {
			r.push(x)
			return
		}
		x.Done("", errors.New("the spawning job is over"))
	case nodeLost:
		why := strings.TrimPrefix(x.err.Error(), x.host+": ")
		d.mu.Lock()
		if x.at.Before(d.back[x.host]) {
			d.mu.Unlock()
			return // of the daemon before prun dvm add's, queued still
		}
		d.nodes.up.dropNode(x.host)
		d.lost[x.host] = d.lost[x.host].with(why, x.at)
		runs := d.runs()
		d.mu.Unlock()
		d.logf("lost node %s: %s", x.host, why)
		for _, r := range runs {
			r.push(x)
		}
	}
}

// lostNode is why and since when a node is lost.
type lostNode struct {
	at  time.Time // the first report of the loss
	why string    // its causes, the first first (a killed daemon's link ends, then its command: both say something)
}

// with is l with the cause why, reported at now, added.
func (l lostNode) with(why string, now time.Time) lostNode {
	switch {
	case l.at.IsZero():
		return lostNode{at: now, why: why}
	case strings.Contains(l.why, why) || len(l.why) > 400:
		return l
	}
	l.why += "; " + why
	return l
}

// Add brings back the lost nodes hosts (`prun dvm add`): their daemons
// start again in their places in the tree, with those of the nodes cut off
// with them (remote.Tree.Revive), and take jobs again. It returns the
// nodes back, and why others are not.
func (d *DVM) Add(hosts []string) ([]string, error) {
	var errs []error
	var back []string
	for _, h := range hosts {
		d.mu.RLock()
		_, lost := d.lost[h]
		closing := d.closing
		d.mu.RUnlock()
		switch {
		case closing:
			return back, errors.New("the DVM is stopping")
		case slices.Contains(back, h):
			continue // back with one named before (below it in the tree)
		case !slices.Contains(d.Nodes(), h):
			errs = append(errs, fmt.Errorf("%s is not one of the DVM's nodes (%s)", h, strings.Join(d.Nodes(), ", ")))
			continue
		case !lost || d.nodes.tree == nil:
			errs = append(errs, fmt.Errorf("%s is not lost", h))
			continue
		}
		d.logf("starting node %s again (prun dvm add)", h)
		began := time.Now()
		up, err := d.nodes.tree.Revive(h)
		for _, u := range up {
			topo := d.nodes.tree.Topology(u)
			d.mu.Lock() // upstream's node table with the lost ones (route)
			delete(d.lost, u)
			d.back[u] = began
			if topo != nil {
				d.topos.reported[u] = topo
			}
			d.nodes.up.addNode(u, d.nodes.tree.Node(u))
			d.mu.Unlock()
			d.logf("node %s is back", u)
		}
		back = append(back, up...)
		if err != nil {
			d.logf("node %s is still lost: %v", h, err)
			errs = append(errs, fmt.Errorf("%s: %w", h, err))
		}
	}
	d.mu.Lock()
	d.freed.Broadcast() // a job that waits for slots (--wait) may fit now
	d.mu.Unlock()
	return back, errors.Join(errs...)
}

func (d *DVM) logf(format string, a ...any) {
	d.out.Printf("prun dvm: %s %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, a...))
}

func (d *DVM) owner(nspace string) *run {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.byNs[nspace]
}

// runs are the submissions running, by number; d.mu held.
func (d *DVM) runs() []*run {
	subs := make([]int, 0, len(d.bySub))
	for s := range d.bySub {
		subs = append(subs, s)
	}
	sort.Ints(subs)
	var out []*run
	for _, s := range subs {
		if r := d.bySub[s]; r != nil { // nil: a submission not yet mapped
			out = append(out, r)
		}
	}
	return out
}

// Submission is one job submitted to the runtime: the submitter's
// surroundings (its descriptors, environment, forwarded signals).
type Submission struct {
	Job  *jobspec.Job
	Opts Options
	Wait bool // --wait: a job that does not fit waits for free slots
	// Started, if set, learns the submission's number before it maps.
	Started func(sub int)
}

// Run runs a submission to its end and returns its exit status, as
// Run does a standalone launch's.
func (d *DVM) Run(s Submission) int {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		fmt.Fprintf(s.Opts.Stderr, "prun: the DVM is stopping\n")
		return ExitFailure
	}
	sub := 0
	for i := 0; i < daemon.MaxSubmission && sub == 0; i++ {
		d.nextSub = d.nextSub%daemon.MaxSubmission + 1
		if d.bySub[d.nextSub] == nil {
			sub = d.nextSub
		}
	}
	if sub == 0 {
		d.mu.Unlock()
		fmt.Fprintf(s.Opts.Stderr, "prun: the DVM runs %d jobs, its most\n", daemon.MaxSubmission)
		return ExitFailure
	}
	d.bySub[sub] = nil // taken
	d.started[sub] = time.Now()
	d.mu.Unlock()
	if s.Started != nil {
		s.Started(sub)
	}
	// The other nodes' ranks get the submitter's MPI and PMIx settings as
	// a standalone launch's do (forwardedEnv), ahead of its -x.
	job := *s.Job
	job.Apps = slices.Clone(job.Apps)
	if d.nodes.tree != nil {
		fwd := forwardedEnv(s.Opts.Env, job.EnvAll)
		for i := range job.Apps {
			job.Apps[i].Env = append(slices.Clone(fwd), job.Apps[i].Env...)
		}
	}
	d.mu.Lock()
	d.waits[sub] = s.Wait
	d.mu.Unlock()
	code := runJob(&job, s.Opts, d, sub, d.topos)
	d.mu.Lock()
	delete(d.waits, sub)
	delete(d.bySub, sub)
	delete(d.started, sub)
	if len(d.bySub) == 0 {
		d.idle = time.Now()
	}
	d.mu.Unlock()
	return code
}

// place maps a submission onto the runtime's free slots and reserves them.
// A job that does not fit is refused with the reason, or with --wait waits
// until a submission ends.
func (d *DVM) place(r *run, job *jobspec.Job) (*mapper.Map, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sub := r.submission()
	wait := d.waits[sub]
	for {
		m, code, err := r.mapJob(job, d.grant)
		if err == nil {
			var hosts []string
			for _, p := range m.Procs {
				h := m.Nodes[p.Node].Name
				hosts = append(hosts, h)
				d.used[h]++
			}
			d.reserve[sub] = hosts
			d.bySub[sub] = r
			return m, 0
		}
		var nf notFit
		if !errors.As(err, &nf) && !(d.usedAny() && strings.Contains(err.Error(), "slots")) {
			r.errorf("%v", err)
			return nil, code
		}
		if !wait || !d.usedAny() {
			r.errorf("the job does not fit the DVM now (%s): %v; --wait waits for free slots", d.slotSummary(), err)
			return nil, ExitFailure
		}
		d.freed.Wait()
		if d.closing {
			r.errorf("the DVM is stopping")
			return nil, ExitFailure
		}
	}
}

type notFit struct{ msg string }

func (e notFit) Error() string { return e.msg }

func (d *DVM) usedAny() bool {
	for _, n := range d.used {
		if n > 0 {
			return true
		}
	}
	return false
}

// slotSummary says how many slots are free; d.mu held.
func (d *DVM) slotSummary() string {
	total, used := 0, 0
	for _, h := range d.alloc.Hosts {
		if _, gone := d.lost[h.Name]; gone {
			continue
		}
		total += h.Slots
		used += min(d.used[h.Name], h.Slots)
	}
	return fmt.Sprintf("%d of %d slots free", total-used, total)
}

// grant is the allocation a submission maps onto (an allocator): the
// runtime's nodes less lost ones and the slots running submissions
// reserved; the job's own --host/--hostfile select among them. d.mu held.
func (d *DVM) grant(job *jobspec.Job) (hostfile.Allocation, string, map[string]bool, error) {
	free, source, fromCores, err := d.unreserved(job)
	if err == nil {
		err = localLogin(free, job.Place.LocalHost)
	}
	return free, source, fromCores, err
}

func (d *DVM) unreserved(job *jobspec.Job) (hostfile.Allocation, string, map[string]bool, error) {
	base := d.alloc
	free := hostfile.Allocation{Implicit: base.Implicit}
	for _, h := range base.Hosts {
		if _, gone := d.lost[h.Name]; gone {
			continue
		}
		h.Slots = max(h.Slots-d.used[h.Name], 0)
		free.Hosts = append(free.Hosts, h)
	}
	if len(job.Place.Hosts) > 0 || job.Place.Hostfile != "" {
		asked, _, _, err := allocate(job.Place, nil, d.topos.cores)
		if err != nil {
			return free, "", nil, err
		}
		var sel []hostfile.Host
		for _, a := range asked.Hosts {
			i := slices.IndexFunc(free.Hosts, func(h hostfile.Host) bool {
				return h.Name == a.Name || isLocal(h.Name, "") && isLocal(a.Name, job.Place.LocalHost)
			})
			if i < 0 {
				if _, gone := d.lost[a.Name]; gone {
					return free, "", nil, fmt.Errorf("host %s: the DVM lost it", a.Name)
				}
				return free, "", nil, fmt.Errorf("host %s is not one of the DVM's nodes (%s)", a.Name, strings.Join(d.Nodes(), ", "))
			}
			h := free.Hosts[i]
			if counted(job.Place.Hosts, a.Name) { // --host h:N caps; a bare name selects, as from a hostfile
				h.Slots = min(h.Slots, a.Slots)
			}
			sel = append(sel, h)
		}
		free.Hosts = sel
	}
	if len(free.Hosts) == 0 {
		return free, "", nil, notFit{"every node of the DVM is lost"}
	}
	if free.Slots() == 0 && free.Implicit {
		free.Hosts[0].Slots = 1 // oversubscribe from the first host on, as a standalone launch on this node does
	}
	return free, "the DVM", d.fromCores, nil
}

// attach lends a submission's run the runtime's daemons, and releases its
// slots when it ends.
func (d *DVM) attach(r *run, s *startup) (*daemons, int) {
	s.defer_(func() { d.release(r) })
	return &d.nodes, 0
}

func (d *DVM) release(r *run) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sub := r.submission()
	for _, h := range d.reserve[sub] {
		d.used[h]--
	}
	delete(d.reserve, sub)
	for _, ns := range r.namespaces() {
		delete(d.byNs, ns)
		delete(d.jobIO, ns)
	}
	d.freed.Broadcast()
}

// startNodes: the runtime's daemons are up.
func (d *DVM) startNodes(*run, *startup) int { return 0 }

// startLocal gives the job the submitter's stdin (routeStdin); this
// node's daemon is up.
func (d *DVM) startLocal(r *run, s *startup) int {
	d.routeStdin(r, s)
	return 0
}

// own routes a namespace's events to r from now on.
func (d *DVM) own(r *run, nspace string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.byNs[nspace] = r
}

// finish delivers a finished submission's job-end events and then forgets
// its jobs, in the background: the submitter need not wait for it.
func (d *DVM) finish(r *run) {
	d.forgetting.Add(1)
	go func() {
		defer d.forgetting.Done()
		r.waitEvents(5 * time.Second)
		d.abandon(r)
	}()
}

// abandon drops a submission's jobs from every node.
func (d *DVM) abandon(r *run) {
	up := d.nodes.up
	var wg sync.WaitGroup
	for _, ns := range r.namespaces() {
		up.root.Forget(ns)
		up.grp.forget(ns)
		wg.Add(1)
		go func() { defer wg.Done(); up.forget(ns) }()
	}
	wg.Wait()
}

// nodeLost: the runtime dropped the node (route); a job with no rank
// there goes on.
func (d *DVM) nodeLost(r *run, nl nodeLost, hit bool) {
	if hit {
		r.fail(fmt.Sprintf("lost node %s: %s", nl.host, strings.TrimPrefix(nl.err.Error(), nl.host+": ")), ExitFailure)
	}
}

// suspend: the runtime goes on, the job's ranks stop (the submitter stops
// itself).
func (d *DVM) suspend(r *run) { r.signalAll(syscall.SIGSTOP) }

// cachesJobEnds: no job's end is cached, as the servers would keep every
// submission's for the runtime's life (4 KB each, seen as the DVM's memory
// growing per job).
func (d *DVM) cachesJobEnds() bool { return false }

var _ rte = (*DVM)(nil)

// routeStdin gives a submission's job the submitter's stdin, terminal and
// environment on this node, and its stdin on the other nodes whose ranks
// read it, as a stream of the job's own on each (remote/nodeside/stdin.go), read by
// a fan-out as a standalone launch's is. Only a job whose stdin goes to
// this node alone gets a terminal.
func (d *DVM) routeStdin(r *run, s *startup) {
	plan, m := s.plan, s.m
	jio := daemon.JobIO{BaseEnv: r.env()}
	readsHere := false
	var remotes []*remote.Node
	for _, n := range m.Nodes {
		if len(n.Procs) == 0 || !(plan.Stdin == daemon.StdinAll || plan.Stdin >= 0 && m.Nodes[m.Procs[plan.Stdin].Node].Name == n.Name) {
			continue
		}
		if n.Name == d.localName {
			readsHere = true
		} else if rn, ok := d.nodes.up.node(n.Name).(*remote.Node); ok {
			remotes = append(remotes, rn)
		}
	}
	in := r.stdin()
	if f, ok := in.(*os.File); ok && (readsHere || len(remotes) > 0) {
		if ss, err := newSubmitterStdin(f); err == nil {
			in = ss
			s.defer_(ss.stop)
		}
	}
	switch {
	case in == nil:
	case len(remotes) > 0:
		if local := fanStdin(in, readsHere, remotes, plan.Nspace); local != nil {
			jio.Stdin = local
		}
	case readsHere:
		jio.Stdin = in
		if f, ok := r.stdin().(*os.File); ok && plan.Stdin >= 0 && (s.job.PTY == jobspec.PTYOn || s.job.PTY == jobspec.PTYAuto && isTerminal(f)) {
			plan.PTY = true
			if isTerminal(f) {
				jio.TTY = f
				if restore, err := makeRaw(f); err == nil {
					s.defer_(restore)
				}
			}
		}
	}
	d.mu.Lock()
	d.jobIO[plan.Nspace] = jio
	d.mu.Unlock()
}

// jobIOOf is the local daemon's Config.JobIO: a job's submitter's
// surroundings (a spawned job's: its submitter's environment, no stdin).
func (d *DVM) jobIOOf(nspace string) daemon.JobIO {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if jio, ok := d.jobIO[nspace]; ok {
		return jio
	}
	if r := d.byNs[nspace]; r != nil {
		return daemon.JobIO{BaseEnv: r.env()}
	}
	return daemon.JobIO{BaseEnv: d.env}
}

// dvmOut hands each run of output to its submission's Writer.
type dvmOut struct{ d *DVM }

func (o dvmOut) writer(src *iof.Source) *iof.Writer {
	sub, index := daemon.SplitOutputJob(src.Job)
	src.Job = index
	o.d.mu.RLock()
	defer o.d.mu.RUnlock()
	if r := o.d.bySub[sub]; r != nil {
		return r.writer()
	}
	return nil
}

func (o dvmOut) Write(src iof.Source, st iof.Stream, p []byte, partial bool) {
	if w := o.writer(&src); w != nil {
		w.Write(src, st, p, partial)
	}
}

func (o dvmOut) End(src iof.Source, st iof.Stream) {
	if w := o.writer(&src); w != nil {
		w.End(src, st)
	}
}

func (o dvmOut) SetSourceInfo(src iof.Source, host string, pid int) {
	if w := o.writer(&src); w != nil {
		w.SetSourceInfo(src, host, pid)
	}
}

func (o dvmOut) Printf(format string, a ...any) { o.d.out.Printf(format, a...) }

// dvmIndex is every submission's jobs, as upstream reads them.
type dvmIndex struct{ d *DVM }

func (x dvmIndex) plan(nspace string) *daemon.Plan {
	if r := x.d.owner(nspace); r != nil {
		return r.index().plan(nspace)
	}
	return nil
}

func (x dvmIndex) namespaces() []string {
	x.d.mu.RLock()
	out := make([]string, 0, len(x.d.byNs))
	for ns := range x.d.byNs {
		out = append(out, ns)
	}
	x.d.mu.RUnlock()
	sort.Strings(out)
	return out
}

func (x dvmIndex) procTable(nspace string) ([]pmixsrv.ProcInfo, error) {
	if r := x.d.owner(nspace); r != nil {
		return r.index().procTable(nspace)
	}
	return nil, pmixsrv.ErrInvalidNspace
}

// Kill ends submission sub as a SIGTERM to its submitter would.
func (d *DVM) Kill(sub int, sig syscall.Signal) error {
	d.mu.RLock()
	r := d.bySub[sub]
	d.mu.RUnlock()
	if r == nil {
		return fmt.Errorf("no job %d runs in the DVM", sub)
	}
	r.push(killSubmission{sig})
	return nil
}

// killSubmission: `prun dvm kill`, or the runtime stopping.
type killSubmission struct{ sig syscall.Signal }

// Active is how many submissions run, and since when the runtime is idle.
func (d *DVM) Active() (int, time.Time) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.bySub), d.idle
}

// Stop ends the runtime, for the reason why (its log's last word, and
// what `prun dvm status` tells of it once it is gone): with allJobs, its
// running submissions first (as SIGTERM would), else only when none runs.
// Nothing is left on any node.
func (d *DVM) Stop(allJobs bool, why string) error {
	d.mu.Lock()
	if n := len(d.bySub); n > 0 && !allJobs {
		d.mu.Unlock()
		return fmt.Errorf("%d job%s running in the DVM (prun dvm stop --all-jobs ends them)", n, plural(n))
	}
	if d.closing {
		d.mu.Unlock()
		<-d.done
		return nil
	}
	d.closing, d.why = true, why
	if n := len(d.bySub); n > 0 {
		d.why += fmt.Sprintf(" (ending %d job%s)", n, plural(n))
	}
	d.freed.Broadcast()
	runs := d.runs()
	d.mu.Unlock()
	for _, r := range runs {
		r.push(killSubmission{syscall.SIGTERM})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, _ := d.Active(); n == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.closeNodes()
	d.mu.RLock()
	closeInspect := d.closeInspect
	d.mu.RUnlock()
	if closeInspect != nil {
		closeInspect()
	}
	close(d.done)
	return nil
}

func (d *DVM) closeNodes() {
	d.forgetting.Wait()
	n := &d.nodes
	if err := n.close(); err != nil {
		d.out.Printf("prun: %v\n", err)
	}
	n.stall.close()
	if n.up != nil {
		n.up.names.Close()
	}
	if d.sess != nil {
		d.sess.Remove()
	}
}

// counted says whether a --host list gives host a slot count (host:N).
func counted(lists []string, host string) bool {
	for _, l := range lists {
		for _, e := range strings.Split(l, ",") {
			if at := strings.LastIndexByte(e, '@'); at >= 0 {
				e = e[at+1:]
			}
			if name, _, ok := strings.Cut(e, ":"); ok && name == host {
				return true
			}
		}
	}
	return false
}
