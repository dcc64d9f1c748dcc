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
	"prun/jobspec"
	"prun/launcher"
)

const dvmUsage = `usage: prun dvm start [--host H,...|--hostfile FILE] [--name NAME] [--foreground] [--idle-timeout D] [--rsh CMD]
       prun dvm ps [--json] | status [--json] | stop [--all-jobs] | kill JOB     [--dvm NAME|PATH]
A DVM keeps prun's daemons up between jobs: a prun that finds one (--dvm, PRUN_DVM, or this
allocation's or this user's default) runs its job there; with none, prun runs standalone.`

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
		fanout             int
		ifInclude, localAs string
	)
	switch args[0] {
	case "start":
		fs.StringSliceVarP(&hosts, "host", "H", nil, "the DVM's hosts (host[:slots],...)")
		fs.StringVar(&hostfile, "hostfile", "", "the DVM's hosts, from a hostfile")
		fs.StringVar(&name, "name", dvm.DefaultName, "the DVM's name (scoped by the allocation it starts in)")
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
		return dvmStart(dir, job, idle, watchPid, readyFD)
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
// PRUN_DVM's, else this allocation's (or this user's) default.
func dvmDir(flag string) (string, error) {
	if flag == "" {
		flag = os.Getenv(dvm.Env)
	}
	if flag == "" {
		flag = dvm.DefaultName
	}
	return dvm.Resolve(os.Getenv, flag)
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
		fmt.Print(msg)
		return 0
	}
	if line == "" {
		line = "the DVM exited before it was up; see " + dvm.LogFile(dir) + "\n"
	}
	fmt.Fprintf(os.Stderr, "prun dvm start: %s", strings.TrimPrefix(line, "error "))
	return launcher.ExitFailure
}

// dvmStart runs the runtime in this process until it stops.
func dvmStart(dir string, job *jobspec.Job, idle time.Duration, watch, readyFD int) int {
	var ready *os.File
	if readyFD > 0 {
		ready = os.NewFile(uintptr(readyFD), "ready")
	}
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if ready != nil {
			fmt.Fprintf(ready, "error %s\n", msg)
		}
		fmt.Fprintf(os.Stderr, "prun dvm start: %s\n", msg)
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
	ln.SetUnlinkOnClose(true)
	os.Chmod(sock, 0o600)
	nodes := d.Nodes()
	msg := fmt.Sprintf("prun dvm: %d node%s up (%s); jobs go there with --dvm %s or PRUN_DVM=%s\n", len(nodes),
		map[bool]string{true: "s"}[len(nodes) != 1], strings.Join(nodes, ","), dir, dir)
	if ready != nil {
		fmt.Fprintf(ready, "ok %s", msg)
		ready.Close()
	} else {
		fmt.Print(msg)
	}
	up.Store(d)
	d.Serve(ln, idle, watch)
	<-d.Done()
	os.Remove(sock)
	os.Remove(dvm.LogFile(dir))
	os.Remove(dir)
	os.Remove(filepath.Dir(dir)) // the user's runtimes' directory, when this was the last
	return 0
}
