// Command topdemo runs prun top's view over local processes it starts, one
// per rank, for the real-terminal test and for trying the keys:
//
//	topdemo -ranks spin,spin,sleep,write,exit3 [-once -json]
//
// spin uses a CPU and writes a line per loop, sleep blocks silently, write
// prints a line every 200 ms without using CPU, exitN ends with status N
// after a second.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"prun/topview"
)

func main() {
	spec := flag.String("ranks", "spin,spin,sleep", "comma-separated kinds of rank: spin, sleep, write, exitN")
	once := flag.Bool("once", false, "print one sample and exit")
	asJSON := flag.Bool("json", false, "with -once: as JSON")
	quiet := flag.Duration("quiet", topview.DefaultThresholds.Quiet, "silence after which a rank stands apart")
	flag.Parse()
	if err := run(*spec, *once, *asJSON, *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "topdemo:", err)
		os.Exit(1)
	}
}

func script(kind string) (string, error) {
	switch {
	case kind == "spin":
		return `while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; echo tick; done`, nil
	case kind == "sleep":
		return "exec sleep 100000", nil
	case kind == "write":
		return "while :; do echo line; sleep 0.2; done", nil
	case strings.HasPrefix(kind, "exit"):
		n, err := strconv.Atoi(kind[4:])
		if err != nil || n < 0 || n > 255 {
			return "", fmt.Errorf("bad rank kind %q: exitN takes N in 0..255", kind)
		}
		return "sleep 1; exit " + strconv.Itoa(n), nil
	}
	return "", fmt.Errorf("bad rank kind %q: want spin, sleep, write or exitN", kind)
}

type exit struct {
	mu          sync.Mutex
	ended       bool
	status, sig int
}

func run(spec string, once, asJSON bool, quiet time.Duration) error {
	host, _ := os.Hostname()
	src := &topview.ProcSource{Host: host}
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}()
	for rank, kind := range strings.Split(spec, ",") {
		sh, err := script(kind)
		if err != nil {
			return err
		}
		meter := topview.NewOutputMeter()
		c := exec.Command("sh", "-c", sh)
		c.Stdout = meter
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			return err
		}
		cmds = append(cmds, c)
		e := &exit{}
		go func() {
			c.Wait()
			e.mu.Lock()
			defer e.mu.Unlock()
			ws := c.ProcessState.Sys().(syscall.WaitStatus)
			e.ended, e.status = true, ws.ExitStatus()
			if ws.Signaled() {
				e.sig = int(ws.Signal())
			}
		}()
		src.Procs = append(src.Procs, topview.Proc{Rank: rank, Pid: c.Process.Pid, Out: meter,
			Exit: func() (int, int, bool) {
				e.mu.Lock()
				defer e.mu.Unlock()
				return e.status, e.sig, e.ended
			}})
	}
	th := topview.DefaultThresholds
	th.Quiet = quiet
	ctx := context.Background()
	if once {
		if !asJSON {
			return fmt.Errorf("-once needs -json")
		}
		return topview.Once(ctx, src, th, os.Stdout)
	}
	return topview.Run(ctx, src, topview.Options{Thresholds: th}, os.Stdin, os.Stdout)
}
