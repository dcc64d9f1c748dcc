package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// RankState is what a daemon can tell about a live rank: for
// --report-state-on-timeout and --get-stack-traces.
type RankState struct {
	Rank  int
	Pid   int
	State string // from /proc/PID/stat, e.g. "S (sleeping)"
	Wchan string // the kernel function it waits in, if any
	CPU   time.Duration
	Stack string // with stacks: the debugger's output, or why there is none
}

var procStates = map[byte]string{'R': "running", 'S': "sleeping", 'D': "disk sleep", 'T': "stopped",
	't': "tracing stop", 'Z': "zombie", 'X': "dead", 'I': "idle"}

// Inspect describes the live local ranks of a job, with their stacks when
// asked (in parallel, each bounded to 10 s, so a wedged debugger cannot hold
// up the job's end).
func (d *Daemon) Inspect(nspace string, stacks bool) []RankState {
	sh := d.shell(nspace)
	if sh == nil {
		return nil
	}
	var out []RankState
	for _, l := range sh.ranks.live() {
		out = append(out, RankState{Rank: l.rank, Pid: l.pid})
	}
	debugger := findDebugger()
	var wg sync.WaitGroup
	for i := range out {
		rs := &out[i]
		rs.State, rs.CPU = procStat(rs.Pid)
		if w, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", rs.Pid)); err == nil && string(w) != "0" {
			rs.Wchan = string(w)
		}
		if !stacks {
			continue
		}
		if debugger == nil {
			rs.Stack = "no stack: neither gdb nor eu-stack is installed"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, debugger[0], append(debugger[1:], fmt.Sprint(rs.Pid))...).CombinedOutput()
			rs.Stack = strings.TrimSpace(string(out))
			if err != nil && rs.Stack == "" {
				rs.Stack = "no stack: " + err.Error()
			}
		}()
	}
	wg.Wait()
	return out
}

// findDebugger returns the command that prints all threads' stacks of a
// pid given as its last argument.
func findDebugger() []string {
	if p, err := exec.LookPath("gdb"); err == nil {
		return []string{p, "-batch", "-nx", "-ex", "thread apply all bt", "-p"}
	}
	if p, err := exec.LookPath("eu-stack"); err == nil {
		return []string{p, "-p"}
	}
	return nil
}

// procStat reads a process's state and CPU time from /proc/PID/stat.
func procStat(pid int) (string, time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone", 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return "unknown", 0
	}
	f := strings.Fields(s[i+2:])
	state := "unknown"
	if len(f) > 0 && len(f[0]) == 1 {
		state = f[0] + " (" + procStates[f[0][0]] + ")"
	}
	var cpu time.Duration
	if len(f) > 12 {
		var ut, st int64
		fmt.Sscan(f[11], &ut)
		fmt.Sscan(f[12], &st)
		cpu = time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
	}
	return state, cpu
}
