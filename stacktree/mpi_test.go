package stacktree

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// TestMPIHang hangs a real MPI job of four ranks at a barrier that its last
// rank never reaches (testdata/barrierhang.c), under Open MPI's and MPICH's
// own launchers, takes every rank's stack with gdb and merges them: below
// main, two branches, the barrier's with ranks 0-2 and the lone rank's
// with rank 3, marked. (prun's own `prun stack` is tested end to end
// where it is wired; this checks the merge on the stacks real MPI
// libraries give: progress threads, unnamed library frames, spinning
// waits.)
func TestMPIHang(t *testing.T) {
	for _, c := range []struct {
		name     string
		tc       ctest.Toolchain
		launcher []string
	}{
		{"openmpi", ctest.OpenMPI, []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", "4"}},
		{"mpich", ctest.MPICH, []string{"mpiexec.mpich", "-n", "4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.tc == ctest.MPICH {
				cluster.Quiet(t) // UCX's start needs stable interfaces
			}
			bin := ctest.Build(t, c.tc, "barrierhang.c")
			pids := launch(t, append(c.launcher, bin), 4)
			tr := New()
			var mu sync.Mutex
			var wg sync.WaitGroup
			for rank, pid := range pids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					th, err := Capture(context.Background(), pid, 60*time.Second)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						tr.Fail(rank, err.Error())
						return
					}
					tr.Add(rank, th)
				}()
			}
			wg.Wait()
			tr.Finish()
			text := tr.Text(Options{Collapse: true})
			t.Logf("\n%s", text)
			if len(tr.Failed) > 0 {
				t.Fatalf("ranks without a stack: %v", tr.Failed)
			}
			main := find(tr.Root, "main")
			if main == nil || main.Ranks.String() != "0-3" || len(main.Children) != 2 {
				t.Fatalf("main does not fork in two:\n%s", text)
			}
			bar, lone := main.Children[0], main.Children[1]
			if !strings.Contains(bar.Func, "Barrier") || bar.Ranks.String() != "0-2" || Apart(main, bar) {
				t.Errorf("the barrier's branch is %s [%s]", bar.Func, bar.Ranks)
			}
			if lone.Func != "never_arrives" || lone.Ranks.String() != "3" || !Apart(main, lone) {
				t.Errorf("the lone branch is %s [%s]", lone.Func, lone.Ranks)
			}
			if !strings.Contains(text, "never_arrives") || !strings.Contains(text, "[3] 1 rank") ||
				!strings.Contains(text, ApartMark) {
				t.Errorf("the text does not show the lone rank apart:\n%s", text)
			}
			if _, err := SVG(context.Background(), tr.DOT(Options{Collapse: true})); err != nil {
				t.Error(err)
			}
		})
	}
}

// launch starts an MPI launcher whose n ranks each print "rank R pid P",
// and returns the pids by rank. The launcher and the ranks are ended with
// the test.
func launch(t *testing.T, argv []string, n int) []int {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	// Killed, mpirun leaves its session directory (ompi.HOST.UID) behind:
	// in the test's own TMPDIR, removed with it.
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "TMPDIR="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := make([]int, n)
	t.Cleanup(func() {
		// The ranks first (they are the launcher's, or its proxy's,
		// children and may sit in another process group), then the
		// launcher's group.
		for _, p := range pids {
			if p > 0 {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	for seen := 0; seen < n; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s ended before every rank was in place:\n%s", argv[0], stderr.String())
			}
			var r, p int
			if _, err := fmt.Sscanf(l, "rank %d pid %d", &r, &p); err != nil || r < 0 || r >= n || pids[r] != 0 {
				t.Fatalf("unexpected line %q", l)
			}
			pids[r] = p
			seen++
		case <-timeout:
			t.Fatalf("%s: not every rank in place after 60 s:\n%s", argv[0], stderr.String())
		}
	}
	go func() {
		for range lines { // keep the pipe drained
		}
	}()
	return pids
}
