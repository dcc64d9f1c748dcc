package sessiondir

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testMark is in the environment of every process these tests start, and
// of nothing else: what carries it once the tests are done leaked.
var testMark = fmt.Sprintf("PRUN_SESSIONDIR_TEST=%d", os.Getpid())

// TestMain fails the run when a process the tests started outlives them
// (each run of TestCleanStaleKeepsLiveLaunchers left two sleep 600 behind).
func TestMain(m *testing.M) {
	code := m.Run()
	if pids := marked(testMark); len(pids) > 0 {
		fmt.Fprintf(os.Stderr, "processes the tests started are still running: %v\n", pids)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		code = 1
	}
	os.Exit(code)
}

// marked lists the processes whose environment holds the variable kv.
func marked(kv string) []int {
	var pids []int
	mark := []byte("\x00" + kv + "\x00")
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + p.Name() + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, env...), mark) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestLayoutAndRemove(t *testing.T) {
	tmp := t.TempDir()
	d, err := Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.MakeProcDirs("ns", []int{0, 3}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.Top, d.NSDir("ns"), d.ProcDir("ns", 3)} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", p, st.Mode(), err)
		}
	}
	if d.ProcDir("ns", 3) != filepath.Join(d.Top, "ns", "3") {
		t.Errorf("procdir %s", d.ProcDir("ns", 3))
	}
	// What ranks and the library leave behind goes too: files in a rank's
	// directory, a directory of their own in the namespace's, a file on top.
	os.MkdirAll(filepath.Join(d.ProcDir("ns", 3), "scratch", "deep"), 0o700)
	os.WriteFile(filepath.Join(d.ProcDir("ns", 3), "scratch", "f"), nil, 0o600)
	os.Mkdir(filepath.Join(d.NSDir("ns"), "shared"), 0o700)
	os.WriteFile(filepath.Join(d.Top, "pmix.sock"), nil, 0o600)
	if err := d.Remove(); err != nil {
		t.Error(err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestCleanStaleKeepsLiveLaunchers(t *testing.T) {
	tmp := t.TempDir()
	live, err := Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	<-live.cleaned // its own cleaning must not race with the set-up below
	// A dead launcher's directory: its lock file exists but nobody holds it.
	dead := filepath.Join(tmp, "prun.999999999.1")
	os.MkdirAll(filepath.Join(dead, "ns", "0"), 0o700)
	os.WriteFile(filepath.Join(dead, LockName), nil, 0o600)
	// A dead launcher's directory that locked itself: unlocked, not empty.
	deadSelf := filepath.Join(tmp, "prun.999999995.1")
	os.MkdirAll(filepath.Join(deadSelf, "ns", "0"), 0o700)
	// An empty unlocked one, however fresh: a launcher SIGKILLed before it
	// put anything there (or all of whose ranks ran elsewhere), or one
	// being created this instant, which Create makes again.
	fresh := filepath.Join(tmp, "prun.999999998.1")
	os.Mkdir(fresh, 0o700)
	// An old empty one.
	old := filepath.Join(tmp, "prun.999999997.1")
	os.Mkdir(old, 0o700)
	past := time.Now().Add(-2 * unlockedAge)
	os.Chtimes(old, past, past)
	// remote's copy directories, which a shell script makes and cannot make
	// again: empty and fresh, one is being created; old, a leftover.
	copyFresh := filepath.Join(tmp, "prun.bin.12345678")
	os.Mkdir(copyFresh, 0o700)
	copyOld := filepath.Join(tmp, "prun.bin.87654321")
	os.Mkdir(copyOld, 0o700)
	os.Chtimes(copyOld, past, past)
	// A live launcher's that locks itself, held by another process.
	otherSelf := filepath.Join(tmp, "prun.999999994.1")
	os.MkdirAll(filepath.Join(otherSelf, "ns"), 0o700)
	holdLock(t, otherSelf)
	// A live launcher running under another name: a separate process holds
	// the lock (flock is per open file, so this must be another process).
	other := filepath.Join(tmp, "prun.999999996.1")
	os.Mkdir(other, 0o700)
	os.WriteFile(filepath.Join(other, LockName), nil, 0o600)
	holdLock(t, filepath.Join(other, LockName))

	// Not directories: a file and a symlink (to a stale directory) with
	// session-like names are not ours to remove.
	file := filepath.Join(tmp, "prun.file")
	os.WriteFile(file, nil, 0o600)
	link := filepath.Join(tmp, "prun.link")
	target := filepath.Join(t.TempDir(), "x")
	os.Mkdir(target, 0o700)
	os.Chtimes(target, past, past)
	os.Symlink(target, link)

	CleanStale(tmp)
	for path, want := range map[string]bool{live.Top: true, dead: false, deadSelf: false, fresh: false, old: false,
		copyFresh: true, copyOld: false, other: true, otherSelf: true, file: true, link: true, target: true} {
		_, err := os.Stat(path)
		if got := err == nil; got != want {
			t.Errorf("%s: exists=%v, want %v", filepath.Base(path), got, want)
		}
	}
}

// A cleanup that removes a launcher's new session directory before the
// launcher locked it (CleanStale takes an empty unlocked one at once) costs
// the launcher nothing: Create makes another, and ends up with a directory
// that exists, under its name, locked.
func TestCreateAfterCleanupTookIt(t *testing.T) {
	for _, step := range []string{"made", "opened"} {
		t.Run(step, func(t *testing.T) {
			tmp := t.TempDir()
			var taken []string
			createHook = func(s, top string) {
				if s != step || len(taken) > 0 {
					return
				}
				taken = append(taken, top)
				if s == "made" {
					CleanStale(tmp) // between the mkdir and the open
					return
				}
				// Between the open and the lock: the cleanup holds the lock
				// as it removes, so the launcher's lock waits for it.
				if lock := stale(top, filepath.Base(top), time.Now()); lock == nil {
					t.Errorf("%s: an empty unlocked session directory not stale", top)
				} else {
					go func() {
						time.Sleep(50 * time.Millisecond)
						os.Remove(top)
						lock.Close()
					}()
				}
			}
			t.Cleanup(func() { createHook = nil })
			d, err := Create(tmp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Remove()
			<-d.cleaned
			if len(taken) != 1 || taken[0] == d.Top {
				t.Fatalf("the cleanup took %v; Create returned %s", taken, d.Top)
			}
			if _, err := os.Stat(taken[0]); err == nil {
				t.Errorf("%s: still there", taken[0])
			}
			if !sameFile(d.lock, d.Top) {
				t.Errorf("%s: not the directory Create locked", d.Top)
			}
			f, err := os.Open(d.Top)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
				t.Errorf("%s: not locked (%v)", d.Top, err)
			}
			if entries, _ := os.ReadDir(tmp); len(entries) != 1 {
				t.Errorf("TMPDIR holds %v, want only %s", entries, filepath.Base(d.Top))
			}
		})
	}
}

// holdLock makes another process hold path's flock until the test ends.
// flock --no-fork execs the sleep itself: the one process holds the lock
// and, killed and reaped, leaves nothing running (flock's forked sleep
// outlived its parent's kill).
func holdLock(t *testing.T, path string) {
	t.Helper()
	holder := exec.Command("flock", "--no-fork", path, "sleep", "600")
	holder.Env = append(os.Environ(), testMark)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		holder.Process.Kill()
		holder.Wait()
	})
	// It locks before CleanStale looks, however busy the machine: a fixed
	// pause (200 ms, and holders that slept 5 s) failed under load.
	waitLocked(t, path)
}

// waitLocked waits until another process holds path's flock.
func waitLocked(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		f.Close() // closing drops a lock we took by mistake
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return
		}
	}
	t.Fatalf("%s: no other process took its lock within a minute", path)
}

// KillMarked kills the processes whose environment holds every mark, and
// no other.
func TestKillMarked(t *testing.T) {
	mark := fmt.Sprintf("PRUN_TEST_MARK=%d.%d", os.Getpid(), time.Now().UnixNano())
	start := func(env ...string) *exec.Cmd {
		c := exec.Command("sleep", "600")
		c.Env = append(os.Environ(), env...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	both := start(mark, "PRUN_TEST_JOB=1")
	one := start(mark, "PRUN_TEST_JOB=10")
	none := start()
	if left := KillMarked(os.Getuid(), 5*time.Second, mark, "PRUN_TEST_JOB=1"); left != nil {
		t.Fatalf("KillMarked left %v", left)
	}
	if err := both.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the marked process: %v, want killed", err)
	}
	for _, c := range []*exec.Cmd{one, none} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("pid %d, not marked alike, was killed: %v", c.Process.Pid, err)
		}
	}
}

// A copy of the binary on its way (remote/spawn/copy.go: its lock file made, its
// daemon not yet running to lock it) is not a dead session's: a cleanup
// takes its directory only once nothing in it changed for unlockedAge.
func TestCleanStaleSparesCopyOnItsWay(t *testing.T) {
	tmp := t.TempDir()
	past := time.Now().Add(-2 * unlockedAge)
	copyDir := func(name string, mtime time.Time) string {
		dir := filepath.Join(tmp, CopyPrefix+name)
		os.Mkdir(dir, 0o700)
		for _, f := range []string{LockName, "prun"} {
			os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600)
			os.Chtimes(filepath.Join(dir, f), past, past)
		}
		os.Chtimes(filepath.Join(dir, "prun"), mtime, mtime)
		os.Chtimes(dir, past, past)
		return dir
	}
	arriving := copyDir("arrivin", time.Now())
	dead := copyDir("deadcpy", past)
	CleanStale(tmp)
	if _, err := os.Stat(filepath.Join(arriving, "prun")); err != nil {
		t.Errorf("a copy on its way was removed: %v", err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a dead copy's directory is still there: %v", err)
	}
}
