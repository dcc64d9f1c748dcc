package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/internal/ctest"
)

// daemonPids are the pids a run of testdata/daemonize.c printed.
func daemonPids(t *testing.T, out string, want int) []int {
	t.Helper()
	var pids []int
	for _, m := range regexp.MustCompile(`(?m)^daemon (\d+)$`).FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	if len(pids) != want {
		t.Fatalf("%d daemons reported, want %d:\n%s", len(pids), want, out)
	}
	return pids
}

// expectGone fails for each of pids still alive (a zombie is dead: the
// test process, a subreaper, reaps it) within d, and kills it.
func expectGone(t *testing.T, pids []int, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for {
			pi, ok := readStat(pid)
			if !ok || pi.state == 'Z' {
				if ok && pi.ppid == os.Getpid() {
					syscall.Wait4(pid, nil, syscall.WNOHANG, nil)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: daemon %v outlived its job", what, pi)
				syscall.Kill(pid, syscall.SIGKILL)
				go syscall.Wait4(pid, nil, 0, nil)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestDaemonizedRanks: what a rank leaves running, even a daemon (fork,
// setsid, fork: no longer in the rank's process group or session, its
// parent gone), ends with the job. On this machine the job's ranks are in
// a cgroup of their own, so a daemon that clears its environment is found
// too; one that holds the rank's output open no longer holds up the job's
// end for the output's grace (2 s).
func TestDaemonizedRanks(t *testing.T) {
	t.Parallel()
	prog := ctest.Build(t, ctest.Plain, "daemonize.c")
	for _, mode := range []string{"plain", "clearenv", "holdout"} {
		t.Run(mode, func(t *testing.T) {
			r := run(t, opts{args: []string{"-n", "2", prog, mode}})
			expectCode(t, r, 0)
			expectGone(t, daemonPids(t, r.stdout, 2), 0, mode)
			if mode == "holdout" && r.dur > 1800*time.Millisecond {
				t.Errorf("the job took %v: it waited for the output a daemon held open", r.dur)
			}
		})
	}
	// A launcher that is SIGKILLed cannot end its job: the next prun of
	// the same user and place ends what the job left, daemons that cleared
	// their environment too (their cgroup is named after the dead
	// launcher's session directory).
	t.Run("next-prun", func(t *testing.T) {
		tmp, dir := t.TempDir(), t.TempDir()
		p := startPrun(t, opts{args: []string{"-n", "1", prog, "clearenv", dir, ":", "-n", "1", "sleep", "600"},
			tmpdir: tmp, allowZombieRanks: true, skipTmpCheck: true})
		p.waitOutput(20*time.Second, "daemon ")
		p.signal(syscall.SIGKILL)
		p.wait()
		files, _ := filepath.Glob(filepath.Join(dir, "daemon.*"))
		if len(files) != 1 {
			t.Fatalf("daemon files %v, want one", files)
		}
		b, _ := os.ReadFile(files[0])
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if pi, ok := readStat(pid); !ok || pi.state == 'Z' {
			t.Fatalf("the daemon %d did not outlive the SIGKILLed prun: nothing to test", pid)
		}
		r := run(t, opts{args: []string{"-n", "1", "true"}, tmpdir: tmp})
		expectCode(t, r, 0)
		expectGone(t, []int{pid}, 0, "after the next prun")
	})
}
