package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"prun/cli"
	"prun/dvm"
	"prun/internal/shellwords"
	"prun/jobspec"
	"prun/launcher"
)

const dvmUsage = `usage: prun dvm start [--host H,...|--hostfile FILE] [--name NAME] [--default] [--foreground] [--idle-timeout D] [--rsh CMD]
       prun dvm ps [--json] | status [--json] | stop [--all-jobs] | kill JOB | add HOST...     [--dvm NAME|PATH]
A DVM keeps prun's daemons up between jobs, until prun dvm stop, its --idle-timeout, or the end of
the allocation it was started in. A job runs there when its prun is told so: --dvm, or PRUN_DVM
(eval "$(prun dvm start ...)" sets it for the shell); inside the DVM's allocation, by default;
outside any, by default only once prun dvm start --default made it every shell's. Otherwise
prun runs standalone. prun dvm add brings back a node the DVM lost.`

// dvmOpts are the flags of every `prun dvm` command.
type dvmOpts struct {
	hosts              []string
	hostfile, name     string
	foreground         bool
	idle               time.Duration
	rsh, where         string
	jsonOut, allJobs   bool
	allocPid, readyFD  int
	fromDir, logPath   string
	makeDefault        bool
	fanout             int
	ifInclude, localAs string
}

// dvmFlags is command cmd's flag set, or false for an unknown command.
func dvmFlags(cmd string, o *dvmOpts) (*pflag.FlagSet, bool) {
	fs := pflag.NewFlagSet("prun dvm "+cmd, pflag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	switch cmd {
	case "start":
		fs.StringSliceVarP(&o.hosts, "host", "H", nil, "the DVM's hosts (host[:slots],...)")
		fs.StringVar(&o.hostfile, "hostfile", "", "the DVM's hosts, from a hostfile")
		fs.StringVar(&o.name, "name", dvm.DefaultName, "the DVM's name (scoped by the allocation it starts in)")
		fs.BoolVar(&o.makeDefault, "default", false, "every shell's prun of this user on this node runs its jobs here (outside an allocation)")
		fs.BoolVar(&o.foreground, "foreground", false, "stay attached to the terminal")
		fs.DurationVar(&o.idle, "idle-timeout", 0, "stop after this long without a job (0: never)")
		fs.StringVar(&o.rsh, "rsh", "", "an external remote shell command")
		fs.IntVar(&o.fanout, "launch-fanout", 0, "children per daemon in the launch tree")
		fs.StringVar(&o.ifInclude, "if-include", "", "the control network (CIDR or interface)")
		fs.StringVar(&o.localAs, "localhost", "", "this node's name in the host list")
		fs.IntVar(&o.allocPid, "allocation-pid", -1, "")
		fs.IntVar(&o.readyFD, "ready-fd", 0, "")
		fs.StringVar(&o.fromDir, "from-dir", "", "")
		fs.StringVar(&o.logPath, "log", "", "")
		_ = fs.MarkHidden("allocation-pid")
		_ = fs.MarkHidden("ready-fd")
		_ = fs.MarkHidden("from-dir")
		_ = fs.MarkHidden("log")
	case "ps":
		fs.BoolVar(&o.jsonOut, "json", false, "one JSON array of the jobs")
	case "stop":
		fs.BoolVar(&o.allJobs, "all-jobs", false, "end the running jobs too")
	case "status":
		fs.BoolVar(&o.jsonOut, "json", false, "one JSON object: nodes, jobs, the DVM's memory")
	case "kill", "add":
	default:
		return nil, false
	}
	if cmd != "start" {
		fs.StringVar(&o.where, "dvm", "", "the DVM: a name or its directory")
	}
	return fs, true
}

// dvmMain is `prun dvm ...`.
func dvmMain(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, dvmUsage)
		if len(args) == 0 {
			return launcher.ExitUsage
		}
		return 0
	}
	var o dvmOpts
	fs, ok := dvmFlags(args[0], &o)
	if !ok {
		fmt.Fprintf(os.Stderr, "prun dvm: unknown command %q\n%s\n", args[0], dvmUsage)
		return launcher.ExitUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		return launcher.ExitUsage
	}
	if args[0] == "start" {
		return o.start(args[1:])
	}
	dir, err := dvmDir(o.where)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm: %v\n", err)
		return launcher.ExitUsage
	}
	// A DVM that is not there: why the last one there ended, from its log.
	if c, err := dvm.Dial(dir); errors.Is(err, dvm.ErrNoDVM) {
		fmt.Fprintf(os.Stderr, "prun dvm %s: no DVM is running at %s\n", args[0], dir)
		if words := dvm.LastWords(os.Getenv, dir); words != "" {
			fmt.Fprintf(os.Stderr, "prun dvm %s: %s\n", args[0], words)
		}
		return launcher.ExitFailure
	} else if err == nil {
		c.Close()
	}
	req, ok := dvmRequest(args[0], fs.Args(), o)
	if !ok {
		return launcher.ExitUsage
	}
	return launcher.Command(dir, req)
}

// start is `prun dvm start`: detached, unless --foreground.
func (o *dvmOpts) start(args []string) int {
	if err := dvm.CheckName(o.name); err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm start: %v\n", err)
		return launcher.ExitUsage
	}
	job := &jobspec.Job{Place: jobspec.Placement{Hosts: o.hosts, Hostfile: o.hostfile, LocalHost: o.localAs},
		Launch: jobspec.Launch{Rsh: o.rsh, Fanout: o.fanout, IfInclude: o.ifInclude}}
	if o.makeDefault && dvm.Allocation(os.Getenv) != "" {
		if o.name != dvm.DefaultName {
			fmt.Fprintf(os.Stderr, "prun dvm start: --default: inside an allocation, the DVM named %s is every prun's of the allocation; --default is for outside one\n", dvm.DefaultName)
			return launcher.ExitUsage
		}
		o.makeDefault = false // it is already
	}
	dir := dvm.Dir(os.Getenv, o.name)
	if o.allocPid < 0 {
		o.allocPid = allocationHolder()
	}
	// A detached runtime runs in /: the files named on its command
	// line are the starting shell's.
	if o.fromDir == "" {
		var err error
		if o.fromDir, err = os.Getwd(); err != nil {
			fmt.Fprintf(os.Stderr, "prun dvm start: cannot determine the working directory: %v\n", err)
			return launcher.ExitFailure
		}
	}
	job.Rebase(o.fromDir)
	if !o.foreground {
		return detach(dir, args, o.allocPid, o.fromDir)
	}
	return dvmStart(dvmRun{dir: dir, job: job, idle: o.idle, allocPid: o.allocPid, readyFD: o.readyFD, log: o.logPath,
		makeDefault: o.makeDefault})
}

// dvmRequest is command cmd's request to a running DVM, its operands
// checked (false: a usage error, said).
func dvmRequest(cmd string, operands []string, o dvmOpts) (dvm.Request, bool) {
	req := dvm.Request{Op: cmd, JSON: o.jsonOut, All: o.allJobs}
	switch cmd {
	case "add":
		for _, a := range operands {
			for _, h := range strings.Split(a, ",") {
				if h != "" {
					req.Hosts = append(req.Hosts, h)
				}
			}
		}
		if len(req.Hosts) == 0 {
			fmt.Fprintln(os.Stderr, "prun dvm add: want the HOST the DVM lost (prun dvm status lists them)")
			return req, false
		}
	case "kill":
		if len(operands) != 1 {
			fmt.Fprintln(os.Stderr, "prun dvm kill: want one JOB (prun dvm ps lists them)")
			return req, false
		}
		n, err := strconv.Atoi(operands[0])
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "prun dvm kill: %q: want a job number (prun dvm ps lists them)\n", operands[0])
			return req, false
		}
		req.Job = n
	}
	return req, true
}

// dvmDir is the runtime a command or a submission addresses: --dvm's, else
// PRUN_DVM's, else the default one (dvm.Addressed).
func dvmDir(flag string) (string, error) {
	return dvm.Addressed(os.Getenv, flag)
}

// allocationHolder is the process whose end is the end of the allocation
// this prun runs in (0: outside any, or none found): the topmost of its
// ancestors that has the allocation's variable, with the same value, in
// its environment: salloc's command, the batch script, the job's shell.
// Its parent is the batch system's (salloc, slurmstepd, a PBS mom), which
// ends the allocation as it ends. Outside an allocation a DVM watches no
// process: the shell that started it, a wrapper script, an SSH session
// are gone at once, and a DVM lives until it is stopped (issue 39: it
// used to end with the grandparent of prun dvm start).
func allocationHolder() int {
	v, id := dvm.AllocationVar(os.Getenv)
	if v == "" {
		return 0
	}
	want := v + "=" + id
	holder := 0
	for pid := os.Getppid(); pid > 1; pid = parentOf(pid) {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), want) {
			break // the batch system's process (root's, unreadable), or outside it
		}
		holder = pid
	}
	return holder
}

// parentOf is pid's parent (0: unknown).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// detach starts the runtime as a daemon of its own session, its stdio on
// its log (dvm.OpenLog), its working directory /, and returns once it is
// up or failed. Nothing of the starting shell's is watched: the runtime
// lives until it is stopped, its idle timeout, or the end of its
// allocation (allocPid's).
func detach(dir string, args []string, allocPid int, fromDir string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "prun dvm start: %v\n", err)
		return launcher.ExitFailure
	}
	if err := dvm.MakeDir(dir); err != nil {
		return fail(err)
	}
	// Before the log: a new one would take the running runtime's link.
	if c, err := dvm.Dial(dir); err == nil {
		c.Close()
		return fail(fmt.Errorf("a DVM already runs at %s (prun dvm stop --dvm %s)", dir, dir))
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	logf, err := dvm.OpenLog(os.Getenv, dir)
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(exe, append([]string{"dvm", "start", "--foreground", "--ready-fd", "3",
		"--allocation-pid", strconv.Itoa(allocPid), "--from-dir", fromDir, "--log", logf.Name()}, args...)...)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = logf, logf, []*os.File{pw}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	pw.Close()
	line, _ := bufio.NewReader(pr).ReadString('\n')
	cmd.Process.Release()
	if msg, ok := strings.CutPrefix(line, "ok "); ok {
		fmt.Print(shellLine(dir))
		fmt.Fprint(os.Stderr, msg)
		return 0
	}
	if line == "" {
		line = "the DVM exited before it was up; see " + logf.Name() + "\n"
	}
	fmt.Fprintf(os.Stderr, "prun dvm start: %s", strings.TrimPrefix(line, "error "))
	return launcher.ExitFailure
}

// shellLine is what prun dvm start prints on stdout, for the shell to
// evaluate as it does ssh-agent's: eval "$(prun dvm start ...)" points
// that shell's prun at the runtime (PRUN_DVM).
func shellLine(dir string) string {
	return fmt.Sprintf("%s=%s; export %[1]s;\n", dvm.Env, shellwords.Quote(dir))
}

// dvmRun is what a runtime process runs (dvmStart).
type dvmRun struct {
	dir         string
	job         *jobspec.Job
	idle        time.Duration
	allocPid    int    // the allocation's holder (allocationHolder; 0: none)
	readyFD     int    // detached: where to say it is up (0: the terminal)
	log         string // detached: its log file (dvm.OpenLog), kept within bounds
	makeDefault bool   // --default
}

// dvmStart runs the runtime in this process until it stops.
func dvmStart(cfg dvmRun) int {
	dir := cfg.dir
	var ready *os.File
	if cfg.readyFD > 0 {
		ready = os.NewFile(uintptr(cfg.readyFD), "ready")
	}
	ours := false // the directory is this runtime's: a failed start removes it
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if ready != nil {
			fmt.Fprintf(ready, "error %s\n", msg)
		}
		fmt.Fprintf(os.Stderr, "prun dvm start: %s\n", msg)
		if cfg.log != "" {
			fmt.Fprint(os.Stderr, dvm.LogEnded("did not start: "+msg))
		}
		if ours {
			os.Remove(dvm.LogFile(dir))
			os.Remove(dir)
			os.Remove(filepath.Dir(dir))
		}
		return launcher.ExitFailure
	}
	var err error
	if ours, err = cfg.claim(); err != nil {
		return fail("%v", err)
	}
	sock := dvm.Socket(dir)
	os.Remove(sock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var up atomic.Pointer[launcher.DVM]
	stopOnSignals(cancel, &up)
	d, err := launcher.StartDVM(ctx, launcher.DVMConfig{Job: cfg.job, Env: os.Environ(), TmpDir: os.TempDir(), Log: os.Stderr,
		Parse: func(r dvm.Run, stdout, stderr io.Writer) (*jobspec.Job, int, bool) {
			return cli.Submitted(r.Args, cli.EnvOf(r.Env, r.Cwd), stdout, stderr, r.ColorErrors)
		}})
	if err != nil {
		return fail("%v", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		d.Stop(true, "its socket: "+err.Error())
		return fail("%v", err)
	}
	ours = false // the socket is: what removes it removes the directory
	ln.SetUnlinkOnClose(true)
	os.Chmod(sock, 0o600)
	if cfg.makeDefault {
		if err := dvm.SetDefault(dir); err != nil {
			d.Stop(true, "--default: "+err.Error())
			ln.Close()
			ours = true
			return fail("--default: %v", err)
		}
	}
	what, msg := cfg.upMessage(d.Nodes())
	if cfg.log != "" {
		fmt.Fprint(os.Stderr, dvm.LogStarted(os.Getpid(), what+" at "+dir))
		go keepLog(cfg.log, d.Done())
	}
	if ready != nil {
		fmt.Fprintf(ready, "ok %s", msg)
		ready.Close()
	} else {
		fmt.Print(shellLine(dir))
		fmt.Fprint(os.Stderr, msg)
	}
	up.Store(d)
	d.Serve(ln, cfg.idle, cfg.allocPid)
	<-d.Done()
	dvm.ClearDefault(dir)
	os.Remove(sock)
	os.Remove(dvm.LogFile(dir))
	os.Remove(dir)
	os.Remove(filepath.Dir(dir)) // the user's runtimes' directory, when this was the last
	fmt.Fprint(os.Stderr, dvm.LogEnded(d.Why()))
	return 0
}

// claim makes the runtime's directory and checks that no live runtime
// holds it, nor (--default) another default one; ours says whether a
// failed start from here on removes the directory.
func (cfg dvmRun) claim() (ours bool, err error) {
	if err := dvm.MakeDir(cfg.dir); err != nil {
		return false, err
	}
	// A live runtime answers; a socket nobody answers is a dead one's.
	if c, err := dvm.Dial(cfg.dir); err == nil {
		c.Close()
		return false, fmt.Errorf("a DVM already runs at %s (prun dvm stop --dvm %s)", cfg.dir, cfg.dir)
	} else if !errors.Is(err, dvm.ErrNoDVM) {
		return false, err
	}
	if cfg.makeDefault {
		if cur := dvm.Default(os.Getenv); cur != "" && cur != cfg.dir {
			if c, err := dvm.Dial(cur); err == nil {
				c.Close()
				return true, fmt.Errorf("--default: the DVM at %s is every shell's default (prun dvm stop --dvm %s first)", cur, cur)
			}
		}
	}
	return true, nil
}

// stopOnSignals: a terminating signal gives the start up (cancel), or
// stops the runtime once it is up (its jobs end first).
func stopOnSignals(cancel func(), up *atomic.Pointer[launcher.DVM]) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for sig := range sigs {
			cancel()
			if d := up.Load(); d != nil {
				go d.Stop(true, "received "+launcher.SignalName(sig.(syscall.Signal)))
			}
		}
	}()
}

// upMessage is what the runtime says once up: what is up, and the line
// that tells which prun runs its jobs there.
func (cfg dvmRun) upMessage(nodes []string) (what, msg string) {
	what = fmt.Sprintf("%d node%s up (%s)", len(nodes), map[bool]string{true: "s"}[len(nodes) != 1], strings.Join(nodes, ","))
	switch {
	case cfg.makeDefault:
		msg = fmt.Sprintf("prun dvm: %s; every prun of this user's on this node runs its jobs there (--default), until prun dvm stop\n", what)
	case dvm.Allocation(os.Getenv) != "" && filepath.Base(cfg.dir) == filepath.Base(dvm.Dir(os.Getenv, dvm.DefaultName)):
		msg = fmt.Sprintf("prun dvm: %s; every prun of this allocation runs its jobs there, until the allocation ends or prun dvm stop\n", what)
	default:
		msg = fmt.Sprintf("prun dvm: %s; a prun runs its jobs there with --dvm %s, or with %s set (eval \"$(prun dvm start ...)\" sets it)\n",
			what, cfg.dir, dvm.Env)
	}
	return what, msg
}

// keepLog keeps the runtime's log (its stdout and stderr) within
// dvm.LogMax bytes until done.
func keepLog(path string, done <-chan struct{}) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if err := dvm.RotateLog(path, 1, 2); err != nil {
			fmt.Fprint(os.Stderr, dvm.LogLine("cannot keep the log within bounds: "+err.Error()))
		}
	}
}
