package e2e

import (
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

// xvfb starts a virtual X server for the test and returns its DISPLAY.
func xvfb(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("Xvfb"); err != nil {
		t.Fatalf("Xvfb is needed (make test installs xvfb and xterm): %v", err)
	}
	for n := 60; n < 100; n++ {
		if _, err := os.Stat(fmt.Sprintf("/tmp/.X%d-lock", n)); err == nil {
			continue
		}
		cmd := exec.Command("Xvfb", fmt.Sprintf(":%d", n), "-nolisten", "tcp")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		sock := fmt.Sprintf("/tmp/.X11-unix/X%d", n)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			select {
			case <-exited: // the display was taken after all: try the next
			default:
				if _, err := os.Stat(sock); err != nil {
					continue
				}
				t.Cleanup(func() { stopXvfb(cmd, exited, n) })
				return fmt.Sprintf(":%d", n)
			}
			break
		}
		stopXvfb(cmd, exited, n)
	}
	t.Fatal("no free X display for Xvfb")
	return ""
}

// stopXvfb ends an Xvfb the test started and leaves nothing of it behind:
// SIGTERM lets it remove its lock file and socket (SIGKILL left both, and
// after some forty runs no display was free); one that does not end within
// 5 s is killed and its two files removed here, as nobody else owns them.
func stopXvfb(cmd *exec.Cmd, exited <-chan struct{}, n int) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
	lock := fmt.Sprintf("/tmp/.X%d-lock", n)
	if b, err := os.ReadFile(lock); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(cmd.Process.Pid) {
		os.Remove(lock)
		os.Remove(fmt.Sprintf("/tmp/.X11-unix/X%d", n))
	}
}

// mpirun's --xterm: the ranks listed run in xterm windows of their own
// (real xterm on a virtual X server), PMIx and PMI clients alike, the
// others as usual.
func TestXterm(t *testing.T) {
	display := xvfb(t)
	host, _ := os.Hostname()
	dir := t.TempDir()
	show := `tr '\0' ' ' < /proc/$PPID/cmdline > ` + dir + `/parent.$PRUN_RANK; tty > ` + dir + `/tty.$PRUN_RANK; echo out $PRUN_RANK`
	r := run(t, opts{args: []string{"-n", "2", "--xterm", "1", "sh", "-c", show}, env: []string{"DISPLAY=" + display}})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "out 0\n")
	if strings.Contains(r.stdout, "out 1") {
		t.Errorf("rank 1's output reached prun, not its window\n%s", r)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if p := read("parent.1"); !strings.HasPrefix(p, "xterm -T prun: rank 1 on "+host+" -e ") {
		t.Errorf("rank 1's parent: %q", p)
	}
	if p := read("parent.0"); strings.HasPrefix(p, "xterm ") {
		t.Errorf("rank 0's parent: %q", p)
	}
	if tty := read("tty.1"); !strings.HasPrefix(tty, "/dev/pts/") {
		t.Errorf("rank 1's terminal: %q", tty)
	}

	// Open MPI's ring, every rank in a window (PMIx through xterm), and
	// MPICH's with rank 1 in one (its PMI socket passes through xterm)
	odir, oring := ompi(t, "ring.c")
	r = run(t, opts{args: []string{"-n", "2", "--xterm", "-1", oring}, env: []string{"DISPLAY=" + display}, dir: odir})
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "ring:") {
		t.Errorf("the ranks' output reached prun\n%s", r)
	}
	mdir, mring := mpich(t, "ring.c")
	r = run(t, opts{args: []string{"-n", "2", "--xterm", "1", mring}, env: []string{"DISPLAY=" + display}, dir: mdir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "ring: 2 ranks, 10 laps, sum ok\n")

	r = run(t, opts{args: []string{"-n", "2", "--xterm", "5", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "prun: --xterm: no rank 5 in a job of 2\n")
}
