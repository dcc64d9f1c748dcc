// Package benchutil holds what prun's benchmark commands share: quantiles,
// formatting, finding the repository, and the facts about the machine that a
// reader needs to compare figures.
package benchutil

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Pct is the p-quantile (0..1) of xs, nearest rank.
func Pct(xs []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[int(math.Round(p*float64(len(s)-1)))]
}

// Ms formats milliseconds.
// Ints parses flag's comma-separated integers, each in lo..hi.
func Ints(flag, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%s %q: want comma-separated integers in %d..%d", flag, s, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

func Ms(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " ms" }

// Tail is the last n bytes of b.
func Tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Machine collects the facts that a reader needs to compare figures across machines.
func Machine() map[string]string {
	m := map[string]string{"nproc": strconv.Itoa(runtime.NumCPU()), "go": runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m["cpu"] = Field(string(b), "model name")
	}
	// "mpirun.openmpi (OpenRTE) 4.1.4" on the first line.
	out, _ := exec.Command("mpirun.openmpi", "--version").Output()
	if f := strings.Fields(strings.SplitN(string(out), "\n", 2)[0]); len(f) > 0 {
		m["open_mpi"] = f[len(f)-1]
	}
	out, _ = exec.Command("mpiexec.hydra", "--version").Output()
	m["hydra"] = Field(string(out), "Version")
	return m
}

// Field returns the value of the first "key: value" line in s (after the first colon).
func Field(s, key string) string {
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Run is one timed run of a command: its output goes to files, not pipes,
// so that Wait returns when the launcher is reaped, not when the last
// process holding a pipe closes it; it runs in a process group of its own,
// killed whole when ctx ends (a timeout takes the ranks too).
type Run struct {
	Cmd            *exec.Cmd
	Stdout, Stderr *os.File
}

// NewRun prepares argv to run in dir, stdout to stdoutPath and stderr to
// dir/stderr. Close the run when done.
func NewRun(ctx context.Context, dir, stdoutPath string, argv []string) (*Run, error) {
	stdout, err := os.OpenFile(stdoutPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		stdout.Close()
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return &Run{Cmd: cmd, Stdout: stdout, Stderr: stderr}, nil
}

// Close closes the output files.
func (r *Run) Close() {
	r.Stdout.Close()
	r.Stderr.Close()
}
