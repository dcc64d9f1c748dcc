package daemon

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"prun/internal/timerslack"
	"prun/internal/trace"
	"prun/iof"
	"prun/jobspec"
	"prun/mapper"
	"prun/pmi"
	"prun/pmixsrv"
	"prun/sessiondir"
	"prun/topology"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// outputGrace bounds how long a job's end waits for output after its last
// rank exited: a daemonised grandchild may hold the pipes open for ever.
const outputGrace = 2 * time.Second

// shell runs one job's ranks on one node.
type shell struct {
	d    *Daemon
	plan *Plan
	self int // this node's index in the plan's map, -1 if none

	pmi *pmiJob // the PMI-1/PMI-2 service of this job on this node

	mu      sync.Mutex
	ranks   map[int]*rankState
	running int
	output  sync.WaitGroup
	done    chan struct{} // closed when every local rank is reaped and output drained
	pipes   []*os.File    // read ends, closed if output outlives outputGrace
	stdins  []*os.File    // write ends of the ranks that read prun's stdin
	pty     *os.File      // the --pty rank's terminal (master side)

	dirs    sync.Once // the job's PMIX_NSDIR and local PMIX_PROCDIRs, made once
	dirsErr error

	exes   map[int]string // apps whose ranks run a preloaded copy of their program
	placed []string       // files --preload-files put in working directories

	pmiLn net.Listener // -pmi-port: the job's PMI service (pmiport.go)

	ending bool // every rank was signalled to end: none is restarted (--max-restarts)
}

type rankState struct {
	proc      mapper.Proc
	pid       int
	exe       string
	connected bool
	finalized bool
	pmiPort   bool // connected through -pmi-port
	exited    bool
	exitCode  int
	aborted   bool  // it called PMIx_Abort: its failure is not restarted
	child     *proc // the started process, a zombie from its exit until finish reaps it
	// pmiServed is closed when its PMI connection's server returns.
	pmiServed <-chan struct{}

	// --max-restarts: how many times it started again, the earlier
	// incarnations (zombies too, until finish), and the output streams of
	// the current one that ended before it was known to be the last.
	restarts int
	old      []*proc
	endsHeld []iof.Stream
}

func newShell(d *Daemon, p *Plan, self int) *shell {
	sh := &shell{d: d, plan: p, self: self, ranks: map[int]*rankState{}, done: make(chan struct{})}
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
// script, /bin/true, an MPICH program) costs no directory: here an rmdir
// waits 55-110 us for the disk to discard the directory's block.
func (sh *shell) makeDirs() error {
	sh.dirs.Do(func() {
		sh.dirsErr = sh.d.cfg.Session.MakeProcDirs(sh.plan.Nspace, sh.plan.procsOn(sh.self))
	})
	return sh.dirsErr
}

// launch registers the namespace and starts every local rank in rank order.
func (sh *shell) launch() error {
	p := sh.plan
	local := p.procsOn(sh.self)
	// Until a rank starts, a failure leaves nothing to wait for: the shell
	// is done (close waits for that).
	failed := func(err error) error {
		sh.unplace()
		sh.closePMI()
		close(sh.done)
		return err
	}
	if p.Job.CwdSessionDir { // the ranks start in their PMIX_PROCDIR
		if err := sh.makeDirs(); err != nil {
			return failed(err)
		}
	}
	if err := sh.preload(); err != nil {
		return failed(err)
	}
	if err := sh.d.srv.RegisterNspace(p.Nspace, len(local), nspaceInfo(p, sh.d.cfg.Session, sh.self)); err != nil {
		return failed(err)
	}
	if _, versions := sh.interfaces(); versions != 0 && p.Job.PMIPort && len(local) > 0 {
		if err := sh.listenPMI(versions); err != nil {
			return failed(err)
		}
	}
	if len(local) == 0 {
		close(sh.done)
		return nil
	}
	sh.mu.Lock()
	sh.running = len(local)
	for _, r := range local {
		sh.ranks[r] = &rankState{proc: p.Map.Procs[r], exe: p.Job.Apps[p.Map.Procs[r].App].Exe}
	}
	sh.mu.Unlock()
	// Every rank is registered with libpmix before the first fork: its
	// thread answers a registration in tens of microseconds, but not while
	// forks hold both of Go's processors (a vfork keeps its P until the
	// child execs), and interleaving the two stretched a 4-rank start by
	// 0.3 ms. Then ranks start in parallel: each fork waits for its child's
	// exec, so overlapping them pays.
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
				sh.d.up.Event(Event{Kind: LaunchFailed, Nspace: p.Nspace, Rank: r, Node: sh.nodeName(), Msg: err.Error()})
				sh.reaped(r, -1, 0, usage{})
			}
		}()
	}
	wg.Wait()
	trace.Mark("%s: ranks started", p.Nspace)
	sh.mu.Lock()
	targets := sh.stdins
	sh.stdins = nil
	sh.mu.Unlock()
	if len(targets) > 0 {
		go copyStdin(sh.d.cfg.Stdin, targets)
	}
	return nil
}

// forwardInteractive passes a terminal's output on as it comes: a prompt
// has no newline and must show before the user types. (Whole-line
// forwarding is for ranks that are not talking to a person.)
func forwardInteractive(r io.Reader, sink iof.Sink, src iof.Source) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			sink.Write(src, iof.Stdout, buf[:n], false)
		}
		if err != nil {
			return
		}
	}
}

func (sh *shell) resizePTY() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.pty != nil && sh.d.cfg.TTY != nil {
		pty.InheritSize(sh.d.cfg.TTY, sh.pty)
	}
}

// copyStdin passes the launcher's stdin to the ranks that read it. EOF on
// prun's stdin becomes EOF on theirs; a rank that closes its stdin (or
// exits) drops out without harming the others. A slow reader holds the
// others back rather than letting prun buffer without bound.
func copyStdin(in io.Reader, outs []*os.File) {
	buf := make([]byte, 64<<10)
	defer func() {
		if st, ok := in.(StdinStopper); ok && len(outs) == 0 {
			st.StopReading() // every reader is gone before the input ended
		}
	}()
	for len(outs) > 0 {
		n, err := in.Read(buf)
		if n > 0 {
			live := outs[:0]
			for _, w := range outs {
				if _, werr := w.Write(buf[:n]); werr != nil {
					w.Close()
					continue
				}
				live = append(live, w)
			}
			outs = live
		}
		if err != nil {
			break
		}
	}
	for _, w := range outs {
		w.Close()
	}
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

// start starts one rank; pmixEnv is what register gave it. A rank started
// again (--max-restarts) reads no stdin: what it would have read went to
// the process it replaces.
func (sh *shell) start(rank int, pmixEnv []string, again bool) error {
	p := sh.plan
	pr := p.Map.Procs[rank]
	app := &p.Job.Apps[pr.App]
	_, pmiVersions := sh.interfaces()
	userEnv := app.Env
	if p.Parent != nil {
		// A spawning rank hands over environments copied from its own:
		// they must not describe the parent's place in its job.
		userEnv = filterInherited(userEnv)
	}
	base := sh.d.cfg.BaseEnv
	if app.EnvNone {
		base = nil
	}
	tuning := sh.d.tuning
	if p.Job.NoHostnamePropagation {
		tuning = slices.DeleteFunc(slices.Clone(tuning), isHostnamePropagation)
	}
	env := rankEnv(base, userEnv, pmixEnv, sh.mpiEnv(pr), tuning)
	var pmiServer, pmiClient *os.File
	if pmiVersions != 0 && sh.pmiLn == nil { // else it connects to the job's -pmi-port
		var err error
		if pmiServer, pmiClient, err = socketPair(); err != nil {
			return err
		}
		defer pmiClient.Close() // the child has its copy once started
	}
	if pmiVersions != 0 {
		env = append(env, sh.pmiEnv(pr)...)
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	var stdin *os.File
	var stdinW *os.File
	var ptyMaster *os.File
	usePTY := p.PTY && rank == p.Stdin && sh.d.cfg.Stdin != nil && !again
	switch {
	case usePTY:
		// The rank's stdin, stdout and stderr are one terminal; its output
		// comes back through the master as the rank's stdout.
		var tty *os.File
		if ptyMaster, tty, err = pty.Open(); err == nil {
			if sh.d.cfg.TTY != nil {
				pty.InheritSize(sh.d.cfg.TTY, ptyMaster)
			}
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			outR, outW, errR, errW = ptyMaster, tty, nil, nil
			stdin = tty
			stdinW = ptyMaster
		}
	case (rank == p.Stdin || p.Stdin == StdinAll) && sh.d.cfg.Stdin != nil && !again:
		stdin, stdinW, err = os.Pipe()
	default:
		stdin, err = os.Open(os.DevNull)
	}
	if err != nil {
		for _, f := range []*os.File{outR, outW, errR, errW} {
			if f != nil {
				f.Close()
			}
		}
		return err
	}

	argv, dir := app.Argv, app.Wdir
	if p.Job.IndexArgv {
		argv = append([]string{fmt.Sprintf("%s-%d", argv[0], rank)}, argv[1:]...)
	}
	if p.Job.CwdSessionDir {
		dir = sh.d.cfg.Session.ProcDir(p.Nspace, rank)
	}
	files := []*os.File{stdin, outW, errW}
	if pmiClient != nil {
		files = append(files, pmiClient) // PMI_FD=3
	}
	path := sh.exe(pr.App)
	if p.Index == 0 && p.Job.Xterm.Has(rank) {
		if path, argv, err = xtermArgv(path, argv, rank, sh.nodeName(), p.Job.Xterm.Hold, env); err != nil {
			for _, f := range []*os.File{stdin, outR, outW, errR, errW, stdinW, pmiServer} {
				if f != nil {
					f.Close()
				}
			}
			return err
		}
	}
	cmd := command{
		path:  path,
		argv:  argv,
		env:   env,
		dir:   dir,
		files: files,
		sys: &syscall.SysProcAttr{
			Setpgid:   true,            // signals reach the rank's own children too
			Pdeathsig: syscall.SIGKILL, // no rank outlives its daemon, even a SIGKILLed one
		},
	}
	if usePTY && ptyMaster != nil {
		// The terminal becomes the rank's controlling terminal, in a session
		// of its own: Ctrl-C typed there reaches it as on a shell.
		cmd.files[2] = outW
		cmd.sys.Setpgid = false
		cmd.sys.Setsid = true
		cmd.sys.Setctty = true
		cmd.sys.Ctty = 0
	}
	child, err := startLocked(cmd, pr.CPUs, p.Map.MemBind.Mode, pr.Mems)
	stdin.Close()
	outW.Close()
	if errW != nil {
		errW.Close()
	}
	if err != nil {
		outR.Close()
		if errR != nil {
			errR.Close()
		}
		if stdinW != nil {
			stdinW.Close()
		}
		if pmiServer != nil {
			pmiServer.Close()
		}
		return fmt.Errorf("%s: %w", app.Argv[0], err)
	}
	var pmiServed chan struct{}
	if pmiServer != nil {
		pmiServed = make(chan struct{})
		go func() {
			defer close(pmiServed)
			pmi.Serve(pmiServer, rank, sh.pmi, pmiVersions)
		}()
	}
	src := iof.Source{Job: p.Index, App: pr.App, Rank: rank}
	if is, ok := sh.d.up.(iof.InfoSink); ok {
		is.SetSourceInfo(src, sh.nodeName(), child.pid)
	}
	var sink iof.Sink = sh.d.up
	sh.mu.Lock()
	if p.Job.MaxRestarts > 0 {
		sink = incarnation{sh, rank, sh.ranks[rank].restarts}
	}
	sh.ranks[rank].pid = child.pid
	sh.ranks[rank].child = &child
	if pmiServed != nil { // else a -pmi-port claim sets it, maybe already
		sh.ranks[rank].pmiServed = pmiServed
	}
	sh.pipes = append(sh.pipes, outR)
	if errR != nil {
		sh.pipes = append(sh.pipes, errR)
	}
	if usePTY && ptyMaster != nil {
		sh.pty = ptyMaster
	}
	sh.mu.Unlock()
	sh.output.Add(1)
	if usePTY && ptyMaster != nil {
		go func() { defer sh.output.Done(); forwardInteractive(outR, sink, src) }()
	} else {
		go func() { defer sh.output.Done(); iof.Forward(outR, sink, src, iof.Stdout) }()
	}
	if errR != nil {
		sh.output.Add(1)
		go func() { defer sh.output.Done(); iof.Forward(errR, sink, src, iof.Stderr) }()
	}
	if stdinW != nil {
		sh.mu.Lock()
		sh.stdins = append(sh.stdins, stdinW)
		sh.mu.Unlock()
	}
	sh.d.up.Event(Event{Kind: ProcStarted, Nspace: p.Nspace, Rank: rank, Node: sh.nodeName(), Pid: child.pid,
		Time: time.Now()})
	go sh.wait(rank, &child)
	return nil
}

func (sh *shell) wait(rank int, p *proc) {
	ws, ru, err := p.exited()
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
	sh.mu.Lock()
	served := sh.ranks[rank].pmiServed
	sh.mu.Unlock()
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

// reaped records a rank's end, reports it, and finishes the job on this node
// when it was the last.
func (sh *shell) reaped(rank, code int, sig syscall.Signal, use usage) {
	p := sh.plan
	sh.mu.Lock()
	st := sh.ranks[rank]
	if (code != 0 || sig != 0) && st.restarts < p.Job.MaxRestarts && !sh.ending && !st.aborted && st.pid != 0 {
		st.restarts++
		n, pid := st.restarts, st.pid
		if st.child != nil {
			st.old = append(st.old, st.child) // reaped with the rest by finish
			st.child = nil
		}
		st.connected, st.finalized, st.endsHeld = false, false, nil
		st.pmiPort, st.pmiServed = false, nil // the next incarnation connects anew
		sh.mu.Unlock()
		// The rank stays registered: the next incarnation connects under
		// the same registration (libpmix 4.2.2 takes several connections
		// per registered rank, as for a client's forked child). A
		// deregistration here could close the old connection before
		// libpmix read its EOF (see pmixsrv.Server.DeregisterClient).
		sh.d.up.Event(Event{Kind: ProcRestarted, Nspace: p.Nspace, Rank: rank, Node: sh.nodeName(), Pid: pid,
			Status: code, Signal: sig, Restart: n, Time: time.Now()})
		go sh.restart(rank, code, sig, use)
		return
	}
	st.exited = true
	held := st.endsHeld
	st.endsHeld = nil
	st.exitCode = code
	connected, finalized, pid := st.connected, st.finalized, st.pid
	sh.running--
	last := sh.running == 0
	sh.mu.Unlock()
	if pid != 0 {
		// No PMIx_server_deregister_client here: the rank's connection is
		// libpmix's to tear down when it reads the EOF (see
		// pmixsrv.Server.DeregisterClient); the namespace's deregistration
		// drops the rank's record.
		sh.d.up.Event(Event{Kind: ProcExited, Nspace: p.Nspace, Rank: rank, Node: sh.nodeName(), Pid: pid,
			Status: code, Signal: sig, Connected: connected, Finalized: finalized, Time: time.Now(),
			UserCPU: use.user, SysCPU: use.sys, MaxRSSKiB: use.maxRSS})
	}
	if e, ok := sh.d.up.(iof.Ender); ok {
		for _, s := range held {
			e.End(iof.Source{Job: p.Index, App: p.Map.Procs[rank].App, Rank: rank}, s)
		}
	}
	if last {
		go sh.finish()
	}
}

// restart starts a failed rank again (--max-restarts), unless the job began
// to end meanwhile: then, or when it cannot start, its failure stands.
func (sh *shell) restart(rank, code int, sig syscall.Signal, use usage) {
	sh.mu.Lock()
	ending := sh.ending
	sh.mu.Unlock()
	var err error
	if !ending {
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
		st.restarts = sh.plan.Job.MaxRestarts
		if err != nil {
			st.pid = 0 // reported as a launch failure, not as an exit
		}
		sh.mu.Unlock()
		if err != nil {
			sh.d.up.Event(Event{Kind: LaunchFailed, Nspace: sh.plan.Nspace, Rank: rank, Node: sh.nodeName(), Msg: err.Error()})
			code, sig, use = -1, 0, usage{}
		}
		sh.reaped(rank, code, sig, use)
	}
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
	current := rs.restarts == in.n
	forward := current && rs.exited // its last incarnation ended
	if current && !rs.exited {
		rs.endsHeld = append(rs.endsHeld, st)
	}
	sh.mu.Unlock()
	if e, ok := sh.d.up.(iof.Ender); ok && forward {
		e.End(src, st)
	}
}

func (sh *shell) finish() {
	sh.closePMI()
	// The job is over: whatever its ranks left running in their process
	// groups goes with it (and stops holding the output pipes open).
	// Every rank is a zombie until reaped here, so its process group's id
	// is still its own.
	sh.mu.Lock()
	for _, st := range sh.ranks {
		if st.pid > 0 {
			syscall.Kill(-st.pid, syscall.SIGKILL)
		}
		if st.child != nil {
			st.child.reap()
			st.child = nil
		}
		for _, c := range st.old {
			syscall.Kill(-c.pid, syscall.SIGKILL)
			c.reap()
		}
		st.old = nil
	}
	sh.mu.Unlock()
	drained := make(chan struct{})
	go func() { sh.output.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputGrace):
		sh.mu.Lock()
		for _, f := range sh.pipes {
			f.Close()
		}
		sh.mu.Unlock()
		<-drained
	}
	sh.mu.Lock()
	for _, f := range sh.pipes {
		f.Close()
	}
	sh.pipes = nil
	sh.mu.Unlock()
	close(sh.done)
	sh.d.up.Event(Event{Kind: NodeJobDone, Nspace: sh.plan.Nspace, Node: sh.nodeName()})
}

// signal sends sig to the process group of each live rank (all when ranks is nil).
func (sh *shell) signal(ranks []int, sig syscall.Signal) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch sig {
	case syscall.SIGTERM, syscall.SIGKILL, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT:
		if ranks == nil {
			sh.ending = true // the job ends: its ranks' failures now are not restarted
		}
	}
	send := func(st *rankState) {
		if st.exited || st.pid == 0 {
			return
		}
		syscall.Kill(-st.pid, sig)
		syscall.Kill(st.pid, sig) // in case the rank left its process group
	}
	if ranks == nil {
		for _, st := range sh.ranks {
			send(st)
		}
		return
	}
	for _, r := range ranks {
		if st, ok := sh.ranks[r]; ok {
			send(st)
		}
	}
}

// close kills every live rank and waits until all are reaped.
func (sh *shell) close() {
	sh.signal(nil, syscall.SIGKILL)
	<-sh.done
	sh.unplace()
}

// setState updates a rank's PMIx connection state.
func (sh *shell) setState(rank int, f func(*rankState)) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if st, ok := sh.ranks[rank]; ok {
		f(st)
	}
}

// mpiEnv is what MPI libraries and scripts expect beside the PMIx variables.
func (sh *shell) mpiEnv(pr mapper.Proc) []string {
	p := sh.plan
	size := strconv.Itoa(len(p.Map.Procs))
	lsize := strconv.Itoa(len(p.Map.Nodes[pr.Node].Procs))
	rank, lrank, nrank := strconv.Itoa(pr.Rank), strconv.Itoa(pr.LocalRank), strconv.Itoa(pr.NodeRank)
	univ := strconv.Itoa(p.UnivSize)
	app := strconv.Itoa(pr.App)
	env := []string{
		"OMPI_COMM_WORLD_RANK=" + rank,
		"OMPI_COMM_WORLD_SIZE=" + size,
		"OMPI_COMM_WORLD_LOCAL_RANK=" + lrank,
		"OMPI_COMM_WORLD_LOCAL_SIZE=" + lsize,
		"OMPI_COMM_WORLD_NODE_RANK=" + nrank,
		// Open MPI 4.1 starts as a singleton unless it believes a daemon of
		// its own launched it; any value will do (see field notes).
		"OMPI_MCA_orte_local_daemon_uri=" + ompiDaemonURI,
		"PRUN_RANK=" + rank,
		"PRUN_SIZE=" + size,
		"PRUN_LOCAL_RANK=" + lrank,
		"PRUN_LOCAL_SIZE=" + lsize,
		"PRUN_NODE_RANK=" + nrank,
		"PRUN_APPNUM=" + app,
		sessiondir.NspaceEnv + "=" + p.Nspace,
		sessiondir.SessionEnv + "=" + sh.d.cfg.Session.ID(), // how a later prun finds a killed one's leftovers
	}
	if p.UnivSize != jobspec.UnivInfinite {
		env = append(env, "OMPI_UNIVERSE_SIZE="+univ, "PRUN_UNIVERSE_SIZE="+univ)
	}
	if p.Map.Oversubscribed(pr.Node) && !envHas(sh.d.cfg.BaseEnv, "OMPI_MCA_mpi_yield_when_idle") {
		// As mpirun does: busy-polling ranks that outnumber the cores
		// starve each other.
		env = append(env, "OMPI_MCA_mpi_yield_when_idle=1")
	}
	return env
}

// pmiEnv is what a PMI-1/PMI-2 client (MPICH) needs, as Hydra gives it:
// an inherited socket, or with -pmi-port where to connect and who it is.
func (sh *shell) pmiEnv(pr mapper.Proc) []string {
	p := sh.plan
	node := p.Map.Nodes[pr.Node]
	conn := []string{"PMI_FD=3", "PMI_RANK=" + strconv.Itoa(pr.Rank), "PMI_SIZE=" + strconv.Itoa(len(p.Map.Procs))}
	if sh.pmiLn != nil {
		conn = []string{"PMI_PORT=" + sh.pmiLn.Addr().String(), "PMI_ID=" + strconv.Itoa(pr.Rank)}
	}
	if p.ParentKVS != "" {
		// MPICH's PMI-1 client learns that it was spawned (and must
		// connect to its parents) from this alone, as Hydra tells it.
		conn = append(conn, "PMI_SPAWNED=1")
	}
	conn = append(conn,
		"PMI_JOBID="+sh.pmi.kvsname(),
		"MPI_LOCALNRANKS="+strconv.Itoa(len(node.Procs)),
		"MPI_LOCALRANKID="+strconv.Itoa(pr.LocalRank),
	)
	if !p.Job.NoHostnamePropagation {
		conn = append(conn, "MPIR_CVAR_CH3_INTERFACE_HOSTNAME="+node.Name)
	}
	return conn
}

// isHostnamePropagation tells the variable by which prun gives MPICH its
// node's name (Hydra's hostname propagation).
func isHostnamePropagation(kv string) bool {
	return strings.HasPrefix(kv, "MPIR_CVAR_CH3_INTERFACE_HOSTNAME=")
}

// socketPair makes a connected pair of close-on-exec unix stream sockets.
func socketPair() (server, client *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("PMI socket: %w", err)
	}
	// The server's end is served through Go's poller: a rank that never
	// speaks PMI (most do not) holds no OS thread in a read.
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("PMI socket: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "pmi-server"), os.NewFile(uintptr(fds[1]), "pmi-client"), nil
}

// Inherited reports whether a launcher variable may pass to ranks: variables
// that describe the launcher's own place in some outer job must not.
func Inherited(kv string) bool {
	for _, pre := range []string{"PMIX_", "PMI_", "OMPI_COMM_WORLD_", "OMPI_MCA_orte_", "OMPI_MCA_ess_base_",
		"OMPI_UNIVERSE_SIZE=", "OMPI_FIRST_RANKS=", "OMPI_APP_CTX_NUM_PROCS=", "OMPI_NUM_APP_CTX=",
		"MPI_LOCALNRANKS=", "MPI_LOCALRANKID="} {
		if strings.HasPrefix(kv, pre) {
			return strings.HasPrefix(kv, "PMIX_MCA_") // user tuning of PMIx stays
		}
	}
	return true
}

func filterInherited(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if Inherited(kv) {
			out = append(out, kv)
		}
	}
	return out
}

// rankEnv merges the environment layers: prun's tuning defaults lose to
// anything else, the user's -x wins over everything.
func rankEnv(base, user, pmix, mpi, tuning []string) []string {
	out := make([]string, 0, len(base)+len(user)+len(pmix)+len(mpi)+len(tuning))
	index := make(map[string]int, cap(out))
	add := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			return
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range tuning {
		add(kv)
	}
	for _, kv := range base {
		if Inherited(kv) {
			add(kv)
		}
	}
	for _, layer := range [][]string{pmix, mpi, user} {
		for _, kv := range layer {
			add(kv)
		}
	}
	// A default that the user's choice of another variable contradicts
	// goes: Open MPI refuses an interface include list beside an exclude.
	for _, kv := range tuning {
		k, _, _ := strings.Cut(kv, "=")
		for _, c := range tuningConflicts[k] {
			if _, ok := index[c]; ok && out[index[k]] == kv {
				out[index[k]] = ""
			}
		}
	}
	return slices.DeleteFunc(out, func(kv string) bool { return kv == "" })
}

// tuningConflicts: prun's default for a variable (key) is dropped when the
// user set one of these.
var tuningConflicts = map[string][]string{
	"OMPI_MCA_btl_tcp_if_include": {"OMPI_MCA_btl_tcp_if_exclude"},
	"OMPI_MCA_oob_tcp_if_include": {"OMPI_MCA_oob_tcp_if_exclude"},
}

// At most this many ranks are being started at once: each fork waits for
// its child's exec, so a few in parallel pay, more only hold descriptors.
var spawnParallel = min(max(runtime.NumCPU(), 2), 4)

// startLocked starts cmd from the calling goroutine's OS thread, locked to
// it for the fork. PR_SET_PDEATHSIG follows the forking thread, and Go ends
// a thread only when a goroutine exits while locked to it, which the
// deferred unlock rules out; so the thread outlives the rank as the
// process does. (Handing forks to a pool of locked threads cost two
// thread wake-ups per rank: 0.3 ms of a 4-rank start.)
func startLocked(cmd command, cpus []int, mem mapper.MemMode, mems []int) (proc, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return timerslack.Fork(func() (proc, error) { return startBound(cmd, cpus, mem, mems) })
}

// startBound starts cmd with its CPU affinity set to cpus and its memory
// policy to mem over the NUMA nodes mems. A child inherits both from the
// thread that forks it (and keeps its memory policy across exec), so the
// forking thread takes the rank's for the fork and gives them back: the
// rank's first instruction already runs, and its first page comes, where
// it is bound, with no helper exec.
func startBound(cmd command, cpus []int, mem mapper.MemMode, mems []int) (proc, error) {
	if mem != mapper.MemDefault {
		if err := setMemPolicy(mem, mems); err != nil {
			return proc{}, err
		}
		defer setMemPolicy(mapper.MemDefault, nil)
	}
	if len(cpus) == 0 {
		return spawn(cmd)
	}
	var saved, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &saved); err != nil {
		return proc{}, fmt.Errorf("binding: %w", err)
	}
	set.Zero()
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return proc{}, fmt.Errorf("binding to CPUs %v: %w", cpus, err)
	}
	child, err := spawn(cmd)
	if rerr := unix.SchedSetaffinity(0, &saved); rerr != nil && err == nil {
		err = fmt.Errorf("restoring the forking thread's CPUs: %w", rerr)
	}
	return child, err
}

// setMemPolicy sets the calling thread's memory policy (set_mempolicy).
func setMemPolicy(mem mapper.MemMode, nodes []int) error {
	var mode int
	switch mem {
	case mapper.MemDefault:
		return unix.SetMemPolicy(unix.MPOL_DEFAULT, nil)
	case mapper.MemFirstTouch:
		return wrapMem(mem, nodes, unix.SetMemPolicy(unix.MPOL_LOCAL, nil))
	case mapper.MemBind:
		mode = unix.MPOL_BIND
	case mapper.MemInterleave:
		mode = unix.MPOL_INTERLEAVE
	default:
		return fmt.Errorf("memory binding: unknown policy %v", mem)
	}
	var mask unix.CPUSet // a node mask has the layout of a CPU mask
	for _, n := range nodes {
		if n < 0 || n >= len(mask)*64 {
			return fmt.Errorf("memory binding: NUMA node %d out of range", n)
		}
		mask.Set(n)
	}
	if mask.Count() == 0 {
		return fmt.Errorf("memory binding %v: no NUMA node", mem)
	}
	return wrapMem(mem, nodes, unix.SetMemPolicy(mode, &mask))
}

func wrapMem(mem mapper.MemMode, nodes []int, err error) error {
	if err == nil {
		return nil
	}
	if nodes == nil {
		return fmt.Errorf("memory binding %v: %w", mem, err)
	}
	return fmt.Errorf("memory binding %v to NUMA nodes %s: %w", mem, topology.CPUSet(nodes), err)
}

// ompiDaemonURI must parse as an ORTE contact URI ("jobid.vpid;tcp://addr:port")
// or Open MPI 4.1 fails in MPI_Init. Nothing ever connects to it: under a
// PMIx server Open MPI talks only PMIx.
const ompiDaemonURI = "0.0;tcp://127.0.0.1:1"
