package procstat

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// start runs a shell command as a child and ends it with the test.
func start(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// TestSpinningAndSleeping samples a busy child and an idle one over the same
// interval: the spinner uses most of a CPU and runs, the sleeper uses none
// and sleeps in the kernel.
func TestSpinningAndSleeping(t *testing.T) {
	spin := start(t, "while :; do :; done")
	sleep := start(t, "exec sleep 60")
	time.Sleep(100 * time.Millisecond) // let both settle
	s0, err := Read(spin.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	z0, err := Read(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	s1, err := Read(spin.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	z1, err := Read(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// Two CPUs shared with other tests and builds: the spinner gets some
	// share of one, never more than one.
	if p := CPUPercent(s0, s1); p < 5 || p > 105 {
		t.Errorf("spinner: %.1f%% CPU, want 5..105", p)
	}
	if s1.State != 'R' {
		t.Errorf("spinner's state %q (%s), want R", s1.State, StateName(s1.State))
	}
	if p := CPUPercent(z0, z1); p > 2 {
		t.Errorf("sleeper: %.1f%% CPU, want ~0", p)
	}
	if z1.State != 'S' {
		t.Errorf("sleeper's state %q, want S", z1.State)
	}
	if z1.Comm != "sleep" || z1.Threads != 1 {
		t.Errorf("sleeper: comm %q threads %d, want sleep and 1", z1.Comm, z1.Threads)
	}
	if z1.RSS < 64<<10 || z1.RSS > 64<<20 {
		t.Errorf("sleeper's RSS %d bytes, implausible", z1.RSS)
	}
	// The kernel names where it sleeps when it shows addresses to us.
	// The kernel names where it sleeps (hrtimer_nanosleep) when it shows
	// addresses to this user; the spinner sleeps nowhere.
	if z1.Wchan != "" && !strings.Contains(z1.Wchan, "sleep") {
		t.Errorf("sleeper's wchan %q, want a *sleep function", z1.Wchan)
	}
	if s1.Wchan != "" {
		t.Errorf("spinner's wchan %q, want none", s1.Wchan)
	}
	if !s0.Same(s1) || s0.Same(z0) {
		t.Error("Same confuses the two processes")
	}
	if CPUPercent(s0, z1) != 0 {
		t.Error("CPUPercent across two processes is not 0")
	}
}

// TestStoppedAndGone checks the states of a stopped child, and that a dead
// and reaped one is ErrGone.
func TestStoppedAndGone(t *testing.T) {
	c := start(t, "exec sleep 60")
	if err := c.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := Read(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if s.State == 'T' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %q after SIGSTOP, want T", s.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Process.Kill()
	c.Wait()
	if _, err := Read(c.Process.Pid); !errors.Is(err, ErrGone) {
		t.Fatalf("reaped child: %v, want ErrGone", err)
	}
}

func TestParse(t *testing.T) {
	// A command name holding ") S (" must not shift the fields.
	line := "42 (a) S (b) R 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 3 0 555 1000000 25 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	s, err := Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if s.Pid != 42 || s.Comm != "a) S (b" || s.State != 'R' || s.UTime != 7 || s.STime != 3 ||
		s.Threads != 3 || s.Start != 555 || s.RSS != 25*int64(os.Getpagesize()) {
		t.Fatalf("parsed %+v", s)
	}
	if s.CPU() != 100*time.Millisecond {
		t.Errorf("CPU %v, want 100ms", s.CPU())
	}
	for _, bad := range []string{"", "42", "42 (x)", "x (y) R 1", "42 (x) R " + strings.Repeat("z ", 30)} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) gave no error", bad)
		}
	}
	if _, err := Read(0); err == nil {
		t.Error("Read(0) gave no error")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 1 2 0 0 20 0 1 0 3 4 5 6"))
	f.Add([]byte("7 ()) R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		Parse(b) // must not panic
	})
}
