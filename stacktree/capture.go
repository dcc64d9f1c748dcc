package stacktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"prun/internal/procstat"
)

// Debugger returns the command that prints every thread's stack of a
// process whose pid is appended as its last argument: gdb when installed,
// else eu-stack; nil when neither is.
func Debugger() []string {
	if p, err := exec.LookPath("gdb"); err == nil {
		return []string{p, "-batch", "-nx", "-ex", "thread apply all bt", "-p"}
	}
	if p, err := exec.LookPath("eu-stack"); err == nil {
		return []string{p, "-p"}
	}
	return nil
}

// ErrNoDebugger is returned by Capture when neither gdb nor eu-stack is
// installed.
var ErrNoDebugger = errors.New("neither gdb nor eu-stack is installed")

// Capture takes the stacks of every thread of pid with Debugger(), bounded
// by timeout.
func Capture(ctx context.Context, pid int, timeout time.Duration) ([]Thread, error) {
	d := Debugger()
	if d == nil {
		return nil, ErrNoDebugger
	}
	return CaptureWith(ctx, d, pid, timeout)
}

// CaptureWith is Capture with a given debugger command. A debugger that
// outlives the timeout is asked to quit with SIGTERM (gdb then detaches),
// and killed 2 s later; a process it leaves stopped that was not stopped
// before is continued, so a slow trace never freezes a rank.
func CaptureWith(ctx context.Context, debugger []string, pid int, timeout time.Duration) ([]Thread, error) {
	if len(debugger) == 0 {
		return nil, ErrNoDebugger
	}
	before, err := procstat.Read(pid)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, debugger[0], append(debugger[1:], strconv.Itoa(pid))...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	if ctx.Err() != nil {
		if after, err := procstat.Read(pid); err == nil && after.Same(before) &&
			(after.State == 'T' || after.State == 't') && before.State != 'T' && before.State != 't' {
			syscall.Kill(pid, syscall.SIGCONT)
		}
		return nil, fmt.Errorf("%s took more than %v", debuggerName(debugger), timeout)
	}
	threads, err := Parse(out.Bytes())
	if err != nil && out.Len() == 0 && runErr != nil {
		return nil, fmt.Errorf("%s: %v", debuggerName(debugger), runErr)
	}
	return threads, err
}

func debuggerName(d []string) string {
	n := d[0]
	for i := len(n) - 1; i >= 0; i-- {
		if n[i] == '/' {
			return n[i+1:]
		}
	}
	return n
}
