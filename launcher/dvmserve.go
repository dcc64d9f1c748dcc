package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"prun/dvm"
	"prun/pmixsrv"
)

// Serve answers clients on the runtime's socket until the runtime stops:
// by `prun dvm stop`, after idle (0: never) without a submission, or at the
// end of the allocation it belongs to: when the process alloc (a pid; 0:
// none) ends, the allocation's own (see cmd/prun's allocationHolder), or
// when its daemons' Slurm step does. A runtime outside any allocation
// watches no process: whatever started it may be gone at once. It also
// stops when its socket is gone (its directory removed: a user's
// XDG_RUNTIME_DIR goes at the last logout), as no client can reach it then.
func (d *DVM) Serve(ln *net.UnixListener, idle time.Duration, alloc int) {
	go func() {
		<-d.done
		ln.Close()
	}()
	if alloc > 0 {
		go d.watchAllocation(alloc)
	}
	if idle > 0 {
		go d.watchIdle(idle)
	}
	go d.watchSocket(ln.Addr().String())
	d.listenInspect(filepath.Dir(ln.Addr().String())) // prun top, prun stack (inspect.go)
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			select {
			case <-d.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go d.serveConn(dvm.NewConn(c))
	}
}

// watchAllocation stops the runtime when the allocation's holder ends.
func (d *DVM) watchAllocation(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		d.stopFor(fmt.Sprintf("the allocation it was started in is over (its process %d is gone)", pid))
		return
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if n > 0 || err != nil {
			break
		}
	}
	d.stopFor(fmt.Sprintf("the allocation it was started in is over (its process %d ended)", pid))
}

// stopFor logs why the runtime stops, and stops it with its jobs.
func (d *DVM) stopFor(why string) {
	d.logf("%s; stopping", why)
	d.Stop(true, why)
}

// watchSocket stops the runtime when its socket at path is gone or is
// another's (checked every few seconds: nothing here waits on it).
func (d *DVM) watchSocket(path string) {
	fi0, err := os.Stat(path)
	if err != nil {
		return
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		if fi, err := os.Stat(path); err != nil || !os.SameFile(fi0, fi) {
			d.stopFor(fmt.Sprintf("its socket %s was removed: no client can reach it", path))
			return
		}
	}
}

// watchStep stops the runtime when its daemons' Slurm step ends (nil: no
// step): the allocation is over, or going, and with it every remote node.
func (d *DVM) watchStep(ended <-chan struct{}) {
	if ended == nil {
		return
	}
	select {
	case <-ended:
	case <-d.done:
		return
	}
	d.stopFor("the daemons' Slurm step ended (scancel, the time limit or the allocation's end)")
}

func (d *DVM) watchIdle(idle time.Duration) {
	t := time.NewTicker(min(idle/4+time.Millisecond, time.Second))
	defer t.Stop()
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		if n, since := d.Active(); n == 0 && time.Since(since) >= idle {
			why := fmt.Sprintf("idle for %v (--idle-timeout)", idle)
			d.logf("%s; stopping", why)
			if d.Stop(false, why) == nil {
				return
			}
		}
	}
}

func (d *DVM) serveConn(c *dvm.Conn) {
	defer c.Close()
	// A bug met by one submission is that submitter's failure, not the
	// end of everyone's runtime.
	defer func() {
		if p := recover(); p != nil {
			d.logf("internal error serving a client: %v\n%s", p, debug.Stack())
			c.Send(dvm.Reply{Done: true, Exit: ExitFailure, Error: fmt.Sprintf("internal error: %v", p)})
		}
	}()
	b, files, err := c.ReadHello()
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		return
	}
	uid, err := dvm.PeerUID(c.UnixConn)
	refused := err != nil || uid != os.Getuid() && uid != 0
	if refused {
		d.logf("refused a connection from uid %d", uid)
	}
	if b == dvm.RunByte {
		d.serveRun(c, files, refused, uid)
		return
	}
	if refused {
		c.Send(dvm.Reply{Done: true, Exit: ExitFailure,
			Error: fmt.Sprintf("refused: uid %d is not the DVM's user (uid %d)", uid, os.Getuid())})
		return
	}
	var req dvm.Request
	if err := c.Recv(&req); err != nil || b != dvm.CommandByte {
		return
	}
	rep := dvm.Reply{Done: true}
	if req.Op != "kill" {
		d.forgetting.Wait() // what ps, status and stop tell holds no half-forgotten job
	}
	switch req.Op {
	case "ps":
		rep.Text = d.ps(req.JSON)
	case "status":
		rep.Text = d.status(req.JSON)
	case "add":
		back, err := d.Add(req.Hosts)
		for _, h := range back {
			rep.Text += h + " is back\n"
		}
		if err != nil {
			rep.Error, rep.Exit = err.Error(), ExitFailure
		}
	case "kill":
		if err := d.Kill(req.Job, syscall.SIGTERM); err != nil {
			rep.Error, rep.Exit = err.Error(), ExitFailure
		}
	case "stop":
		// Answered once every job ended and every node is clean.
		why := "prun dvm stop"
		if req.All {
			why += " --all-jobs"
		}
		if pid, err := dvm.PeerPID(c.UnixConn); err == nil {
			why += fmt.Sprintf(" (pid %d)", pid)
		}
		if err := d.Stop(req.All, why); err != nil {
			rep.Error, rep.Exit = err.Error(), ExitFailure
		}
	default:
		rep.Error, rep.Exit = fmt.Sprintf("unknown request %q", req.Op), ExitUsage
	}
	c.Send(rep)
}

// serveRun runs a submission on the submitter's descriptors; a submitter
// that goes away ends its job as a hangup would. What it has to say before
// the job (a refusal, help, a usage error) goes to the submitter's stderr
// and stdout, not into a Reply: see dvm's wire.
func (d *DVM) serveRun(c *dvm.Conn, files []*os.File, refused bool, uid int) {
	if len(files) != 3 {
		c.Send(dvm.Reply{Done: true, Exit: ExitFailure})
		return
	}
	stdout, stderr := files[1], files[2]
	// The descriptors close before the submitter hears its status, so that
	// its reader sees the end of the job's output when it exits.
	done := func(code int) {
		for _, f := range files {
			f.Close()
		}
		c.Send(dvm.Reply{Done: true, Exit: code})
	}
	if refused {
		fmt.Fprintf(stderr, "prun: DVM refused: uid %d is not the DVM's user (uid %d)\n", uid, os.Getuid())
		done(ExitFailure)
		return
	}
	frame, err := c.RecvFrame()
	if err != nil {
		return // gone before it said what to run
	}
	req, err := dvm.DecodeRun(frame)
	if err != nil {
		fmt.Fprintf(stderr, "prun: DVM: %v\n", err)
		done(ExitUsage)
		return
	}
	job, code, local := d.parse(req, stdout, stderr)
	if local {
		c.Send(dvm.Reply{Done: true, Local: true})
		return
	}
	if job == nil {
		done(code)
		return
	}
	job.Rebase(req.Cwd)
	sigs := make(chan os.Signal, 16)
	pid, _ := dvm.PeerPID(c.UnixConn)
	var sub atomic.Int64
	var over atomic.Bool
	go func() {
		for {
			var r dvm.Request
			if err := c.Recv(&r); err != nil {
				// The submitter is gone: its job ends, saying so (after
				// its end, the submitter closes as it should).
				if n := sub.Load(); n > 0 && !over.Load() {
					d.logf("job %d: its submitter (pid %d) went away; ending the job", n, pid)
				}
				sigs <- submitterGone{pid}
				return
			}
			if r.Signal > 0 {
				sigs <- syscall.Signal(r.Signal)
			}
		}
	}()
	opts := Options{Stdin: files[0], Stdout: stdout, Stderr: stderr, ColorTags: req.ColorTags,
		ColorErrors: req.ColorErrors, TmpDir: d.tmpDir, Env: req.Env,
		KillGrace: time.Second, Signals: &Signals{from: sigs}}
	code = d.Run(Submission{Job: job, Opts: opts, Wait: job.DVMWait,
		Started: func(n int) { sub.Store(int64(n)); c.Send(dvm.Reply{Job: n}) }})
	over.Store(true)
	done(code)
}

// psJob is a submission as `prun dvm ps --json` shows it.
type psJob struct {
	Job       int       `json:"job"`
	Namespace string    `json:"namespace"`
	Command   string    `json:"command"`
	Ranks     int       `json:"ranks"`
	Started   int       `json:"started_ranks"`
	Nodes     []string  `json:"nodes"`
	State     string    `json:"state"`
	StartTime time.Time `json:"start_time"`
}

func (d *DVM) ps(asJSON bool) string {
	d.mu.RLock()
	var jobs []psJob
	for sub, r := range d.bySub {
		pj := psJob{Job: sub, State: "waiting", StartTime: d.started[sub]}
		if p, ok := r.progress(); ok {
			pj.Namespace, pj.Command, pj.Ranks, pj.Nodes, pj.Started = p.nspace, p.cmdLine, p.ranks, p.nodes, p.started
			switch {
			case p.exited > 0:
				pj.State = "ending"
			case pj.Started == pj.Ranks:
				pj.State = "running"
			default:
				pj.State = "starting"
			}
		} else if r != nil {
			pj.State = "starting"
		}
		jobs = append(jobs, pj)
	}
	d.mu.RUnlock()
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].Job < jobs[b].Job })
	if asJSON {
		if jobs == nil {
			jobs = []psJob{}
		}
		b, _ := json.Marshal(jobs)
		return string(b) + "\n"
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tRANKS\tNODES\tSTARTED\tNAMESPACE\tCOMMAND")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", j.Job, j.State, j.Ranks, strings.Join(j.Nodes, ","),
			j.StartTime.Format("15:04:05"), j.Namespace, j.Command)
	}
	tw.Flush()
	return sb.String()
}

// statusJSON is the runtime as `prun dvm status --json` shows it.
type statusJSON struct {
	PID   int          `json:"pid"`
	Jobs  int          `json:"jobs"`
	Nodes []statusNode `json:"nodes"`
	// The runtime process's memory: its resident set, what the C heap
	// (libpmix's servers, the cgo shim) has in use, and Go's live heap:
	// what a long-lived runtime must keep flat from job to job.
	RSSKiB      int64  `json:"rss_kib"`
	CHeapBytes  uint64 `json:"c_heap_bytes"`
	GoHeapBytes uint64 `json:"go_heap_bytes"`
	// Where this node's PMIx server's rendezvous files are: PMIx tools
	// find it with PMIX_SYSTEM_TMPDIR set to it.
	PMIxDir string `json:"pmix_dir"`
}

type statusNode struct {
	Name   string `json:"name"`
	Health string `json:"health"` // ok, lost
	Slots  int    `json:"slots"`
	Used   int    `json:"used"`
	Free   int    `json:"free"`
	// A lost node's: since when, and why (prun dvm add brings it back).
	LostAt    *time.Time `json:"lost_at,omitempty"`
	LostCause string     `json:"lost_cause,omitempty"`
}

// status shows the nodes up, then the lost ones apart: since when and why.
func (d *DVM) status(asJSON bool) string {
	d.mu.RLock()
	st := statusJSON{PID: os.Getpid(), Jobs: len(d.bySub), Nodes: []statusNode{}, PMIxDir: d.sess.Top}
	var up, lost []statusNode
	for _, h := range d.alloc.Hosts {
		n := statusNode{Name: h.Name, Health: "ok", Slots: h.Slots, Used: d.used[h.Name]}
		n.Free = max(h.Slots-n.Used, 0)
		if l, gone := d.lost[h.Name]; gone {
			n.Health, n.LostAt, n.LostCause = "lost", &l.at, l.why
			lost = append(lost, n)
		} else {
			up = append(up, n)
		}
		st.Nodes = append(st.Nodes, n)
	}
	slots := d.slotSummary()
	d.mu.RUnlock()
	if asJSON {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st.RSSKiB, st.CHeapBytes, st.GoHeapBytes = selfRSS(), pmixsrv.CHeapInUse(), ms.HeapAlloc
		b, _ := json.Marshal(st)
		return string(b) + "\n"
	}
	var sb strings.Builder
	nodes := fmt.Sprintf("%d node%s", len(up), plural(len(up)))
	if len(lost) > 0 {
		nodes += fmt.Sprintf(" up, %d lost", len(lost))
	}
	fmt.Fprintf(&sb, "DVM pid %d: %s, %d job%s running, %s\n", st.PID, nodes, st.Jobs, plural(st.Jobs), slots)
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHEALTH\tSLOTS\tUSED\tFREE")
	for _, n := range up {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", n.Name, n.Health, n.Slots, n.Used, n.Free)
	}
	tw.Flush()
	if len(lost) > 0 {
		tw = tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LOST NODE\tSINCE\tCAUSE")
		for _, n := range lost {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", n.Name, n.LostAt.Format(time.DateTime), n.LostCause)
		}
		tw.Flush()
		fmt.Fprintln(&sb, "prun dvm add HOST brings a lost node back.")
	}
	// PMIx 5's pps ignores --pid: it takes the only server it finds, or
	// the system server of PMIX_SYSTEM_TMPDIR (docs/options.md).
	fmt.Fprintf(&sb, "PMIx tools: PMIX_SYSTEM_TMPDIR=%s\n", st.PMIxDir)
	return sb.String()
}

// Submit runs the command line args (a job's, parsed once already to
// find the runtime) in the runtime in dir: the submitter's descriptors go
// with it, its signals follow, and the job's exit status is the return
// value. prun's usual submitter is not this but cmd/prun/submit.c, which
// sends the same before Go's runtime starts; this one serves --dvm.
func Submit(dir string, args []string, sigs *Signals) int {
	c, err := dvm.Dial(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun: DVM %s: %v\n", dir, err)
		return ExitFailure
	}
	defer c.Close()
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun: cannot determine the working directory: %v\n", err)
		return ExitFailure
	}
	noColor := os.Getenv("NO_COLOR") != ""
	run := dvm.Run{Args: args, Env: os.Environ(), Cwd: cwd,
		ColorTags: !noColor && isTerminal(os.Stdout), ColorErrors: !noColor && isTerminal(os.Stderr)}
	if err := c.Hello(dvm.RunByte, []int{0, 1, 2}); err != nil {
		fmt.Fprintf(os.Stderr, "prun: DVM %s: %v\n", dir, err)
		return ExitFailure
	}
	if err := c.SendFrame(dvm.EncodeRun(run)); err != nil {
		fmt.Fprintf(os.Stderr, "prun: DVM %s: %v\n", dir, err)
		return ExitFailure
	}
	go func() {
		for sig := range sigs.channel() {
			c.Send(dvm.Request{Signal: int(sig.(syscall.Signal))})
			if sig == syscall.SIGTSTP {
				stopSelf() // the job's ranks stop; so does this prun, as a standalone one does
				c.Send(dvm.Request{Signal: int(syscall.SIGCONT)})
			}
		}
	}()
	for {
		var rep dvm.Reply
		if err := c.Recv(&rep); err != nil {
			fmt.Fprintf(os.Stderr, "prun: lost the DVM at %s: %v\n", dir, err)
			return ExitFailure
		}
		if rep.Local {
			fmt.Fprintf(os.Stderr, "prun: DVM %s: not a job for a DVM\n", dir)
			return ExitFailure
		}
		if rep.Done {
			return rep.Exit
		}
	}
}

// Command sends a command (ps, status, stop, kill) to the runtime in dir
// and prints its answer; it returns the exit status.
func Command(dir string, req dvm.Request) int {
	c, err := dvm.Dial(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm: %s: %v\n", dir, err)
		return ExitFailure
	}
	defer c.Close()
	if err := c.Hello(dvm.CommandByte, nil); err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm: %v\n", err)
		return ExitFailure
	}
	if err := c.Send(req); err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm: %v\n", err)
		return ExitFailure
	}
	var rep dvm.Reply
	if err := c.Recv(&rep); err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm: lost the DVM at %s: %v\n", dir, err)
		return ExitFailure
	}
	fmt.Print(rep.Text)
	if rep.Error != "" {
		fmt.Fprintf(os.Stderr, "prun dvm: %s\n", rep.Error)
	}
	return rep.Exit
}
