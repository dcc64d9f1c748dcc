package daemon

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"prun/internal/cgroup"
	"prun/internal/trace"
	"prun/iof"
	"prun/jobspec"
	"prun/mapper"
	"prun/pmi"
	"prun/pmixsrv"
)

// shell runs one job's ranks on one node: it starts them, reaps them and
// reports their fate upstream. The ranks' record is the rank table's
// (ranktable.go), the only code that takes its lock; the parts plugged in
// own their state, each in a file of its name: env (environ), stdio,
// affinity (binding), restart (--max-restarts: its policy, each rank's
// incarnations), signals (delivery), contain (the job's cgroup), fdbudget,
// the PMI service (pmijob, and pmiport's listener) and what preload
// placed; the PMIx server's upcalls reach it through host.
type shell struct {
	d    *Daemon
	plan *Plan
	self int // this node's index in the plan's map, -1 if none

	env       environ
	io        *stdio
	pmi       *pmiJob
	preloaded preloaded
	meters    rankMeters // output counted and ends kept for prun top (sample.go)

	dirs    sync.Once // the job's PMIX_NSDIR and local PMIX_PROCDIRs, made once
	dirsErr error

	done chan struct{} // closed when every local rank is reaped and output drained

	// group is the job's cgroup on this node (contain.go), nil when the
	// node gives none; set before the first rank starts.
	group *cgroup.Group

	// ranks is the record of the local ranks, their only owner
	// (ranktable.go).
	ranks *rankTable
	// containment: whether the job's end also searches by environment
	// (contain.go).
	marked atomic.Bool
	// fdsFailed: a rank could not start for want of descriptors, nor can
	// the job's later ones (fdbudget.go).
	fdsFailed atomic.Pointer[fdsTooFew]
}

func newShell(d *Daemon, p *Plan, self int) *shell {
	cfg := d.cfg
	if cfg.JobIO != nil {
		jio := cfg.JobIO(p.Nspace)
		cfg.Stdin, cfg.TTY, cfg.BaseEnv = jio.Stdin, jio.TTY, jio.BaseEnv
	}
	sh := &shell{d: d, plan: p, self: self, ranks: newRankTable(p.Job.MaxRestarts), done: make(chan struct{}),
		env: newEnviron(p, cfg, d.tuning), io: newStdio(p, cfg, d.fds.give)}
	sh.pmi = newPMIJob(sh)
	return sh
}

// interfaces says what the job's --pmi choice gives each rank.
func (sh *shell) interfaces() (usePMIx bool, pmiVersions pmi.Versions) {
	switch sh.plan.Job.PMI {
	case jobspec.PMIx:
		return true, 0
	case jobspec.PMI1:
		return false, pmi.V1
	case jobspec.PMI2:
		return false, pmi.V2
	case jobspec.PMINone:
		return false, 0
	}
	return true, pmi.Both
}

func (sh *shell) nodeName() string { return sh.d.cfg.Name }

// makeDirs creates the job's directory and its local ranks' on first use:
// when a rank starts in its own (--set-cwd-to-session-dir), or when the
// first PMIx client of the job connects, which libpmix holds until the host
// answers. Only a PMIx client can learn their names, so a job of none (a
// script, /bin/true, an MPICH program) costs no directory, nor the rmdir
// that would wait for the disk.
func (sh *shell) makeDirs() error {
	sh.dirs.Do(func() {
		sh.dirsErr = sh.d.cfg.Session.MakeProcDirs(sh.plan.Nspace, sh.plan.procsOn(sh.self))
	})
	return sh.dirsErr
}

// At most this many ranks are being started at once: each fork waits for
// its child's exec, so a few in parallel pay, more only hold descriptors.
var spawnParallel = min(max(runtime.NumCPU(), 2), 4)

// launch registers the namespace and starts every local rank in rank order.
func (sh *shell) launch() error {
	p := sh.plan
	local := p.procsOn(sh.self)
	// Until a rank starts, a failure leaves nothing to wait for: the shell
	// is done (close waits for that).
	failed := func(err error) error {
		sh.preloaded.unplace()
		sh.closePMI()
		close(sh.done)
		return err
	}
	if p.Job.CwdSessionDir { // the ranks start in their PMIX_PROCDIR
		if err := sh.makeDirs(); err != nil {
			return failed(err)
		}
	}
	if err := sh.preloaded.place(sh.d, p, sh.self); err != nil {
		return failed(err)
	}
	if err := sh.d.srv.RegisterNspace(p.Nspace, len(local), nspaceInfo(p, sh.d.cfg.Session, sh.self)); err != nil {
		return failed(err)
	}
	trace.Mark("%s: namespace registered", p.Nspace)
	if _, versions := sh.interfaces(); versions != 0 && p.Job.PMIPort && len(local) > 0 {
		if err := sh.listenPMI(versions); err != nil {
			return failed(err)
		}
	}
	if len(local) == 0 {
		close(sh.done)
		return nil
	}
	sh.makeGroup()
	sh.ranks.add(local)
	// Every rank is registered with libpmix before the first fork: its
	// thread answers registrations promptly, but not while forks hold both
	// of Go's processors (a vfork keeps its P until the child execs). Then
	// ranks start in parallel: each fork waits for its child's exec, so
	// overlapping them pays.
	envs, errs := sh.register(local)
	trace.Mark("%s: ranks registered", p.Nspace)
	var wg sync.WaitGroup
	sem := make(chan struct{}, spawnParallel)
	for i, r := range local {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := errs[i]
			if err == nil {
				err = sh.start(r, envs[i], false)
			}
			if err != nil {
				sh.launchFailed(r, err)
				sh.reaped(r, -1, 0, usage{})
			}
		}()
	}
	wg.Wait()
	trace.Mark("%s: ranks started", p.Nspace)
	sh.io.fanOut()
	return nil
}

func (sh *shell) launchFailed(rank int, err error) {
	sh.d.up.Event(Event{Kind: LaunchFailed, Nspace: sh.plan.Nspace, Rank: rank, Node: sh.nodeName(), Msg: err.Error()})
}

// register registers local ranks with the PMIx server (when the job uses
// PMIx) and returns each one's PMIx environment, or why it cannot start.
func (sh *shell) register(local []int) (envs [][]string, errs []error) {
	envs, errs = make([][]string, len(local)), make([]error, len(local))
	if usePMIx, _ := sh.interfaces(); !usePMIx {
		return envs, errs
	}
	ranks := make([]pmixsrv.Rank, len(local))
	for i, r := range local {
		ranks[i] = pmixsrv.Rank(r)
	}
	errs = sh.d.srv.RegisterClients(sh.plan.Nspace, ranks, os.Getuid(), os.Getgid())
	for i, r := range ranks {
		if errs[i] == nil {
			envs[i], errs[i] = sh.d.srv.SetupFork(pmixsrv.Proc{Nspace: sh.plan.Nspace, Rank: r})
		}
	}
	return envs, errs
}

// start starts one incarnation of a rank (again: not its first, under
// --max-restarts); pmixEnv is what register gave it. Every descriptor made
// for it is in fs: the child's ends close once it started, the parent's
// stay with their servers, unless it failed to start.
func (sh *shell) start(rank int, pmixEnv []string, again bool) (err error) {
	fds, err := sh.takeFDs(rank, again)
	if err != nil {
		return err
	}
	var fs startFiles
	defer func() {
		fs.close(err != nil)
		if err != nil {
			sh.d.fds.give(fds.total())
		}
	}()
	pr := sh.plan.Map.Procs[rank]
	_, versions := sh.interfaces()
	env := sh.env.of(pr, pmixEnv)
	var pmiServer, pmiClient *os.File
	if versions != 0 {
		if pmiServer, pmiClient, err = sh.pmi.socket(&fs); err != nil {
			return err
		}
		env = append(env, sh.pmi.env(pr)...)
	}
	rio, err := sh.io.open(&fs, rank, again)
	if err != nil {
		return err
	}
	cmd, err := sh.command(pr, env, rio, pmiClient)
	if err != nil {
		return err
	}
	child, err := startLocked(cmd, bindingOf(sh.plan.Map, pr))
	if err != nil {
		return fmt.Errorf("%s: %w", sh.plan.Job.Apps[pr.App].Argv[0], err)
	}
	if child.outside != nil {
		sh.startedOutside(child.outside)
	}
	sh.started(rank, &child, rio, pmiServer, versions, fds.rest)
	return nil
}

// command is how rank pr's process starts: its program (a preloaded copy,
// or xterm running it), argv, directory and descriptors, in a process group
// of its own (with a terminal, a session of its own) that dies with the
// daemon.
func (sh *shell) command(pr mapper.Proc, env []string, rio rankIO, pmiClient *os.File) (command, error) {
	p := sh.plan
	app := &p.Job.Apps[pr.App]
	argv, dir := app.Argv, app.Wdir
	if p.Job.IndexArgv {
		argv = append([]string{fmt.Sprintf("%s-%d", argv[0], pr.Rank)}, argv[1:]...)
	}
	if p.Job.CwdSessionDir {
		dir = sh.d.cfg.Session.ProcDir(p.Nspace, pr.Rank)
	}
	files := rio.files()
	if pmiClient != nil {
		files = append(files, pmiClient) // PMI_FD=3
	}
	path := sh.preloaded.exe(p, pr.App)
	if p.Index == 0 && p.Job.Xterm.Has(pr.Rank) {
		var err error
		if path, argv, err = xtermArgv(path, argv, pr.Rank, sh.nodeName(), p.Job.Xterm.Hold, env); err != nil {
			return command{}, err
		}
	}
	sys := &syscall.SysProcAttr{
		Setpgid:   true,            // signals reach the rank's own children too
		Pdeathsig: syscall.SIGKILL, // no rank outlives its daemon, even a SIGKILLed one
	}
	if rio.tty {
		// The terminal becomes the rank's controlling terminal, in a session
		// of its own: Ctrl-C typed there reaches it as on a shell.
		sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	}
	return command{path: path, argv: argv, env: env, dir: dir, files: files, sys: sys, group: sh.group}, nil
}

// started hands a started rank's descriptors to their servers (its PMI
// connection, its output, its stdin), reports it and awaits its exit.
func (sh *shell) started(rank int, child *proc, rio rankIO, pmiServer *os.File, versions pmi.Versions, rest int) {
	p := sh.plan
	var served <-chan struct{}
	if pmiServer != nil {
		served = sh.pmi.serve(pmiServer, rank, versions)
	}
	src := iof.Source{Job: p.OutputJob(), App: p.Map.Procs[rank].App, Rank: rank}
	if is, ok := sh.d.up.(iof.InfoSink); ok {
		is.SetSourceInfo(src, sh.nodeName(), child.pid)
	}
	n := sh.ranks.started(rank, child, served)
	sh.io.attach(rio, sh.meters.counted(rank, child.pid, sh.sink(rank, n)), src)
	sh.d.up.Event(Event{Kind: ProcStarted, Nspace: p.Nspace, Rank: rank, Node: sh.nodeName(), Pid: child.pid,
		Time: time.Now()})
	go sh.wait(rank, child, rest)
}

// wait awaits the exit of a rank's incarnation, which gives back the
// descriptors it held but its output's (rest).
func (sh *shell) wait(rank int, p *proc, rest int) {
	ws, ru, err := p.exited()
	sh.d.fds.give(rest)
	if err != nil {
		ws = 1 << 8 // the wait itself failed: exit status 1
	}
	code, sig := 0, syscall.Signal(0)
	switch {
	case ws.Signaled():
		sig = ws.Signal()
	case ws.Exited():
		code = ws.ExitStatus()
	}
	if code != 0 || sig != 0 {
		sh.drainPMI(rank)
	}
	sh.reaped(rank, code, sig, usage{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), ru.Maxrss})
}

// drainPMI lets a failed rank's last PMI words be heard before its exit is
// reported: MPICH's PMI-2 client sends its abort and exits at once (with
// 255: the abort's message has MPI_Abort's code), so the exit could
// otherwise win and the abort be lost. The connection ends with the
// process, unless a child inherited it: then 100 ms at most.
func (sh *shell) drainPMI(rank int) {
	served := sh.ranks.served(rank)
	if served == nil {
		return
	}
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-served:
	case <-t.C:
	}
}

// usage is what a process used, from wait4.
type usage struct {
	user, sys time.Duration
	maxRSS    int64 // KiB
}

// endedAmong returns a rank of this node among procs whose last
// incarnation ended, reaped or not yet.
func (sh *shell) endedAmong(procs []pmixsrv.Proc) (int, bool) {
	return sh.ranks.endedAmong(func(r int) bool { return sh.among(procs, r) })
}

// membersAmong counts the ranks of this node among procs.
func (sh *shell) membersAmong(procs []pmixsrv.Proc) int {
	return sh.ranks.count(func(r int) bool { return sh.among(procs, r) })
}

func (sh *shell) among(procs []pmixsrv.Proc, r int) bool {
	return slices.ContainsFunc(procs, func(p pmixsrv.Proc) bool {
		return p.Nspace == sh.plan.Nspace && (p.Rank == pmixsrv.RankWildcard || int(p.Rank) == r)
	})
}

// reaped records the end of a rank's incarnation (code -1: it failed to
// start) and reports it; a failure may start the rank again. The job ends
// on this node when its last rank ended.
func (sh *shell) reaped(rank, code int, sig syscall.Signal, use usage) {
	p := sh.plan
	e := sh.ranks.ended(rank, code != 0 || sig != 0)
	if e.restart > 0 {
		// The rank stays registered: the next incarnation connects under
		// the same registration (libpmix 4.2.2 takes several connections
		// per registered rank, as for a client's forked child). A
		// deregistration here could close the old connection before
		// libpmix read its EOF (see pmixsrv.Server.DeregisterClient).
		sh.d.up.Event(Event{Kind: ProcRestarted, Nspace: p.Nspace, Rank: rank, Node: sh.nodeName(), Pid: e.pid,
			Status: code, Signal: sig, Restart: e.restart, Time: time.Now()})
		go sh.restart(rank, code, sig, use)
		return
	}
	sh.meters.exited(rank, code, int(sig))
	// A group construct or destruct on this node that waits for it would
	// wait for ever (libpmix 4.2.2): it fails now.
	sh.d.srv.GroupMemberGone(pmixsrv.Proc{Nspace: p.Nspace, Rank: pmixsrv.Rank(rank)})
	if e.pid != 0 {
		// No PMIx_server_deregister_client here: the rank's connection is
		// libpmix's to tear down when it reads the EOF (see
		// pmixsrv.Server.DeregisterClient); the namespace's deregistration
		// drops the rank's record.
		sh.d.up.Event(Event{Kind: ProcExited, Nspace: p.Nspace, Rank: rank, Node: sh.nodeName(), Pid: e.pid,
			Status: code, Signal: sig, Connected: e.client.connected, Finalized: e.client.finalized,
			Time: time.Now(), UserCPU: use.user, SysCPU: use.sys, MaxRSSKiB: use.maxRSS})
	}
	sh.endHeld(rank, e.held)
	// A rank counts as ended only once reported, so that NodeJobDone comes
	// after every rank's report.
	if sh.ranks.reported() {
		go sh.finish()
	}
}

// finish ends the job on this node once its last rank ended: what the ranks
// left goes (what detached first: it may hold the output pipes open, and
// the ranks are still zombies, so none of their process group ids is free
// yet), their output drains, and the launcher hears of it.
func (sh *shell) finish() {
	sh.closePMI()
	sh.endLeftovers()
	sh.killGroups()
	sh.io.drain(outputGrace)
	close(sh.done)
	sh.d.up.Event(Event{Kind: NodeJobDone, Nspace: sh.plan.Nspace, Node: sh.nodeName()})
}

// close kills every live rank and waits until all are reaped.
func (sh *shell) close() {
	sh.signal(nil, syscall.SIGKILL)
	<-sh.done
	sh.preloaded.unplace()
}
