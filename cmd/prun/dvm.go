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
       prun dvm ps [--json] | status [--json] | stop [--all-jobs] | kill JOB     [--dvm NAME|PATH]
A DVM keeps prun's daemons up between jobs. A job runs there when its prun is told so: --dvm,
or PRUN_DVM (eval "$(prun dvm start ...)" sets it for the shell); inside the DVM's allocation,
by default; outside any, by default only once prun dvm start --default made it every shell's.
Otherwise prun runs standalone.`

// dvmMain is `prun dvm ...`.
func dvmMain(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, dvmUsage)
		if len(args) == 0 {
			return launcher.ExitUsage
		}
		return 0
	}
	fs := pflag.NewFlagSet("prun dvm "+args[0], pflag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	var (
		hosts              []string
		hostfile, name     string
		foreground         bool
		idle               time.Duration
		rsh, where         string
		jsonOut, allJobs   bool
		watchPid, readyFD  int
		fromDir            string
		makeDefault        bool
		fanout             int
		ifInclude, localAs string
	)
	switch args[0] {
	case "start":
		fs.StringSliceVarP(&hosts, "host", "H", nil, "the DVM's hosts (host[:slots],...)")
		fs.StringVar(&hostfile, "hostfile", "", "the DVM's hosts, from a hostfile")
		fs.StringVar(&name, "name", dvm.DefaultName, "the DVM's name (scoped by the allocation it starts in)")
		fs.BoolVar(&makeDefault, "default", false, "every shell's prun of this user on this node runs its jobs here (outside an allocation)")
		fs.BoolVar(&foreground, "foreground", false, "stay attached to the terminal")
		fs.DurationVar(&idle, "idle-timeout", 0, "stop after this long without a job (0: never)")
		fs.StringVar(&rsh, "rsh", "", "an external remote shell command")
		fs.IntVar(&fanout, "launch-fanout", 0, "children per daemon in the launch tree")
		fs.StringVar(&ifInclude, "if-include", "", "the control network (CIDR or interface)")
		fs.StringVar(&localAs, "localhost", "", "this node's name in the host list")
		fs.IntVar(&watchPid, "watch-pid", 0, "")
		fs.IntVar(&readyFD, "ready-fd", 0, "")
		fs.StringVar(&fromDir, "from-dir", "", "")
		_ = fs.MarkHidden("watch-pid")
		_ = fs.MarkHidden("ready-fd")
		_ = fs.MarkHidden("from-dir")
	case "ps":
		fs.BoolVar(&jsonOut, "json", false, "one JSON array of the jobs")
	case "stop":
		fs.BoolVar(&allJobs, "all-jobs", false, "end the running jobs too")
	case "status":
		fs.BoolVar(&jsonOut, "json", false, "one JSON object: nodes, jobs, the DVM's memory")
	case "kill":
	default:
		fmt.Fprintf(os.Stderr, "prun dvm: unknown command %q\n%s\n", args[0], dvmUsage)
		return launcher.ExitUsage
	}
	if args[0] != "start" {
		fs.StringVar(&where, "dvm", "", "the DVM: a name or its directory")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return launcher.ExitUsage
	}
	if args[0] == "start" {
		if err := dvm.CheckName(name); err != nil {
			fmt.Fprintf(os.Stderr, "prun dvm start: %v\n", err)
			return launcher.ExitUsage
		}
		job := &jobspec.Job{Place: jobspec.Placement{Hosts: hosts, Hostfile: hostfile, LocalHost: localAs},
			Launch: jobspec.Launch{Rsh: rsh, Fanout: fanout, IfInclude: ifInclude}}
		if makeDefault && dvm.Allocation(os.Getenv) != "" {
			if name != dvm.DefaultName {
				fmt.Fprintf(os.Stderr, "prun dvm start: --default: inside an allocation, the DVM named %s is every prun's of the allocation; --default is for outside one\n", dvm.DefaultName)
				return launcher.ExitUsage
			}
			makeDefault = false // it is already
		}
		dir := dvm.Dir(os.Getenv, name)
		if watchPid == 0 {
			watchPid = grandparent()
		}
		// A detached runtime runs in /: the files named on its command
		// line are the starting shell's.
		if fromDir == "" {
			var err error
			if fromDir, err = os.Getwd(); err != nil {
				fmt.Fprintf(os.Stderr, "prun dvm start: cannot determine the working directory: %v\n", err)
				return launcher.ExitFailure
			}
		}
		job.Rebase(fromDir)
		if !foreground {
			return detach(dir, args[1:], watchPid, fromDir)
		}
		return dvmStart(dir, job, idle, watchPid, readyFD, makeDefault)
	}
	dir, err := dvmDir(where)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm: %v\n", err)
		return launcher.ExitUsage
	}
	req := dvm.Request{Op: args[0], JSON: jsonOut, All: allJobs}
	if args[0] == "kill" {
		if fs.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "prun dvm kill: want one JOB (prun dvm ps lists them)")
			return launcher.ExitUsage
		}
		n, err := strconv.Atoi(fs.Arg(0))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "prun dvm kill: %q: want a job number (prun dvm ps lists them)\n", fs.Arg(0))
			return launcher.ExitUsage
		}
		req.Job = n
	}
	return launcher.Command(dir, req)
}

// dvmDir is the runtime a command or a submission addresses: --dvm's, else
// PRUN_DVM's, else the default one (dvm.Addressed).
func dvmDir(flag string) (string, error) {
	return dvm.Addressed(os.Getenv, flag)
}

// grandparent is the process that started the shell that started prun
// (salloc, a batch step, a login): the DVM ends when it does.
func grandparent() int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getppid()) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	pid, _ := strconv.Atoi(f[1])
	if pid <= 1 {
		return 0
	}
	return pid
}

// detach starts the runtime as a daemon of its own session, its stdio on
// the log file in its directory, its working directory /, and returns once
// it is up or failed.
func detach(dir string, args []string, watch int, fromDir string) int {
	if err := dvm.MakeDir(dir); err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm start: %v\n", err)
		return launcher.ExitFailure
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm start: %v\n", err)
		return launcher.ExitFailure
	}
	logf, err := os.OpenFile(dvm.LogFile(dir), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm start: %v\n", err)
		return launcher.ExitFailure
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm start: %v\n", err)
		return launcher.ExitFailure
	}
	cmd := exec.Command(exe, append([]string{"dvm", "start", "--foreground", "--ready-fd", "3",
		"--watch-pid", strconv.Itoa(watch), "--from-dir", fromDir}, args...)...)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = logf, logf, []*os.File{pw}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "prun dvm start: %v\n", err)
		return launcher.ExitFailure
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
		line = "the DVM exited before it was up; see " + dvm.LogFile(dir) + "\n"
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

// dvmStart runs the runtime in this process until it stops.
func dvmStart(dir string, job *jobspec.Job, idle time.Duration, watch, readyFD int, makeDefault bool) int {
	var ready *os.File
	if readyFD > 0 {
		ready = os.NewFile(uintptr(readyFD), "ready")
	}
	ours := false // the directory is this runtime's: a failed start removes it
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if ready != nil {
			fmt.Fprintf(ready, "error %s\n", msg)
		}
		fmt.Fprintf(os.Stderr, "prun dvm start: %s\n", msg)
		if ours {
			os.Remove(dvm.LogFile(dir))
			os.Remove(dir)
			os.Remove(filepath.Dir(dir))
		}
		return launcher.ExitFailure
	}
	if err := dvm.MakeDir(dir); err != nil {
		return fail("%v", err)
	}
	sock := dvm.Socket(dir)
	// A live runtime answers; a socket nobody answers is a dead one's.
	if c, err := dvm.Dial(dir); err == nil {
		c.Close()
		return fail("a DVM already runs at %s (prun dvm stop --dvm %s)", dir, dir)
	} else if !errors.Is(err, dvm.ErrNoDVM) {
		return fail("%v", err)
	}
	ours = true
	if makeDefault {
		if cur := dvm.Default(os.Getenv); cur != "" && cur != dir {
			if c, err := dvm.Dial(cur); err == nil {
				c.Close()
				return fail("--default: the DVM at %s is every shell's default (prun dvm stop --dvm %s first)", cur, cur)
			}
		}
	}
	os.Remove(sock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A terminating signal gives the start up, or stops the runtime once
	// it is up (its jobs end first).
	var up atomic.Pointer[launcher.DVM]
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for range sigs {
			cancel()
			if d := up.Load(); d != nil {
				go d.Stop(true)
			}
		}
	}()
	d, err := launcher.StartDVM(ctx, launcher.DVMConfig{Job: job, Env: os.Environ(), TmpDir: os.TempDir(), Log: os.Stderr,
		Parse: func(r dvm.Run, stdout, stderr io.Writer) (*jobspec.Job, int, bool) {
			return cli.Submitted(r.Args, cli.EnvOf(r.Env, r.Cwd), stdout, stderr, r.ColorErrors)
		}})
	if err != nil {
		return fail("%v", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		d.Stop(true)
		return fail("%v", err)
	}
	ours = false // the socket is: what removes it removes the directory
	ln.SetUnlinkOnClose(true)
	os.Chmod(sock, 0o600)
	if makeDefault {
		if err := dvm.SetDefault(dir); err != nil {
			d.Stop(true)
			ln.Close()
			ours = true
			return fail("--default: %v", err)
		}
	}
	nodes := d.Nodes()
	what := fmt.Sprintf("%d node%s up (%s)", len(nodes), map[bool]string{true: "s"}[len(nodes) != 1], strings.Join(nodes, ","))
	var msg string
	switch {
	case makeDefault:
		msg = fmt.Sprintf("prun dvm: %s; every prun of this user's on this node runs its jobs there (--default), until prun dvm stop\n", what)
	case dvm.Allocation(os.Getenv) != "" && filepath.Base(dir) == filepath.Base(dvm.Dir(os.Getenv, dvm.DefaultName)):
		msg = fmt.Sprintf("prun dvm: %s; every prun of this allocation runs its jobs there, until the allocation ends or prun dvm stop\n", what)
	default:
		msg = fmt.Sprintf("prun dvm: %s; a prun runs its jobs there with --dvm %s, or with %s set (eval \"$(prun dvm start ...)\" sets it)\n",
			what, dir, dvm.Env)
	}
	if ready != nil {
		fmt.Fprintf(ready, "ok %s", msg)
		ready.Close()
	} else {
		fmt.Print(shellLine(dir))
		fmt.Fprint(os.Stderr, msg)
	}
	up.Store(d)
	d.Serve(ln, idle, watch)
	<-d.Done()
	dvm.ClearDefault(dir)
	os.Remove(sock)
	os.Remove(dvm.LogFile(dir))
	os.Remove(dir)
	os.Remove(filepath.Dir(dir)) // the user's runtimes' directory, when this was the last
	return 0
}
