package stacktree

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"prun/internal/ctest"
)

// hung starts n copies of testdata/stackhang.c, copy i as rank i, the
// ranks in lone blocking in hang_alone and the others in hang_at_barrier,
// and returns their pids once each has printed "ready".
func hung(t *testing.T, n int, lone map[int]bool) []int {
	t.Helper()
	bin := ctest.Build(t, ctest.Plain, "stackhang.c")
	pids := make([]int, n)
	for i := range n {
		var args []string
		if lone[i] {
			args = []string{"lone"}
		}
		cmd := exec.Command(bin, args...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			t.Fatalf("stackhang %d: %q, %v", i, line, err)
		}
		pids[i] = cmd.Process.Pid
	}
	return pids
}

// find follows the first child named by each function in turn, at any
// depth below n for the first and directly below after that.
func find(n *Node, funcs ...string) *Node {
	var walk func(n *Node) *Node
	walk = func(n *Node) *Node {
		if n.Func == funcs[0] {
			return n
		}
		for _, c := range n.Children {
			if f := walk(c); f != nil {
				return f
			}
		}
		return nil
	}
	n = walk(n)
	for _, f := range funcs[1:] {
		if n == nil {
			return nil
		}
		var next *Node
		for _, c := range n.Children {
			if c.Func == f {
				next = c
			}
		}
		n = next
	}
	return n
}

// TestRealStacks traces five real processes, rank 3 blocked elsewhere than
// the rest, with gdb and with eu-stack, and checks the merged tree: one
// fork below wait_step, the barrier's branch with ranks 0-2,4 and the lone
// branch with rank 3 marked; every rank's helper thread merged into one
// branch of its own.
func TestRealStacks(t *testing.T) {
	pids := hung(t, 5, map[int]bool{3: true})
	for _, dbg := range []string{"gdb", "eu-stack"} {
		t.Run(dbg, func(t *testing.T) {
			path, err := exec.LookPath(dbg)
			if err != nil {
				t.Fatalf("%s is not installed (make deps installs it): %v", dbg, err)
			}
			cmd := []string{path, "-p"}
			if dbg == "gdb" {
				cmd = []string{path, "-batch", "-nx", "-ex", "thread apply all bt", "-p"}
			}
			tr := New()
			for rank, pid := range pids {
				th, err := CaptureWith(context.Background(), cmd, pid, 30*time.Second)
				if err != nil {
					t.Fatalf("rank %d: %v", rank, err)
				}
				if len(th) != 2 {
					t.Fatalf("rank %d: %d threads, want 2: %+v", rank, len(th), th)
				}
				tr.Add(rank, th)
			}
			tr.Finish()
			text := tr.Text(Options{})
			t.Logf("\n%s", text)
			if tr.Root.Ranks.String() != "0-4" || tr.Root.Threads != 10 {
				t.Fatalf("root: ranks %s threads %d, want 0-4 and 10", tr.Root.Ranks, tr.Root.Threads)
			}
			step := find(tr.Root, "main", "wait_step")
			if step == nil || len(step.Children) != 2 {
				t.Fatalf("no fork below main > wait_step:\n%s", text)
			}
			bar, alone := step.Children[0], step.Children[1]
			if bar.Func != "hang_at_barrier" || bar.Ranks.String() != "0-2,4" || bar.Threads != 4 {
				t.Errorf("first branch %s [%s] %d threads, want hang_at_barrier [0-2,4] 4", bar.Func, bar.Ranks, bar.Threads)
			}
			if alone.Func != "hang_alone" || alone.Ranks.String() != "3" || !Apart(step, alone) || Apart(step, bar) {
				t.Errorf("second branch %s [%s], want hang_alone [3] apart", alone.Func, alone.Ranks)
			}
			helper := find(tr.Root, "helper_sleep")
			if helper == nil || helper.Ranks.String() != "0-4" || helper.Threads != 5 {
				t.Fatalf("no helper_sleep branch with every rank:\n%s", text)
			}
			if !strings.Contains(text, "hang_alone  [3] 1 rank  "+ApartMark) {
				t.Errorf("the lone rank's line is not marked:\n%s", text)
			}
			// The innermost frames: the barrier's and the lone rank's
			// pause, the helpers' sleep.
			if n := len(tr.Leaves()); n != 3 {
				t.Errorf("%d leaves, want 3:\n%s", n, text)
			}
		})
	}
}

// TestCaptureFailures: a gone process, a debugger that hangs past its
// timeout, and one that cannot attach each give one line.
func TestCaptureFailures(t *testing.T) {
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Capture(context.Background(), c.Process.Pid, 5*time.Second); err == nil {
		t.Error("a reaped pid gave no error")
	}
	pids := hung(t, 1, nil)
	start := time.Now()
	// "sleep 30 PID" hangs like a wedged debugger.
	_, err := CaptureWith(context.Background(), []string{"sleep", "30"}, pids[0], 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "took more than 300ms") || time.Since(start) > 5*time.Second {
		t.Errorf("a hanging debugger: %v after %v", err, time.Since(start))
	}
	// A debugger printing no stack: its words become the error.
	_, err = CaptureWith(context.Background(), []string{"sh", "-c", "echo 'ptrace: Operation not permitted.'", "x"}, pids[0], 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "Operation not permitted") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a refused attach: %v", err)
	}
	if _, err := CaptureWith(context.Background(), nil, pids[0], time.Second); err != ErrNoDebugger {
		t.Errorf("no debugger: %v", err)
	}
}
