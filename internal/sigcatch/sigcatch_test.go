package sigcatch

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// caught reports whether sig has a handler in this process (SigCgt).
func caught(t *testing.T, sig syscall.Signal) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			var m uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(hex), "%x", &m); err != nil {
				t.Fatal(err)
			}
			return m&(1<<(uint(sig)-1)) != 0
		}
	}
	t.Fatal("no SigCgt in /proc/self/status")
	return false
}

// receive fails unless want is the next signal on c.
func receive(t *testing.T, c <-chan os.Signal, want syscall.Signal) {
	t.Helper()
	select {
	case got := <-c:
		if got != want {
			t.Errorf("received %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%v not delivered", want)
	}
}

func TestCatchDeliversThenReleases(t *testing.T) {
	k, err := Catch(4, syscall.SIGUSR2, syscall.SIGWINCH)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Catch(1, syscall.SIGHUP); err == nil {
		t.Error("a second Catch while one is active succeeded")
	}
	for _, sig := range []syscall.Signal{syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGUSR2} {
		syscall.Kill(os.Getpid(), sig)
		receive(t, k.C, sig)
	}
	k.Release()
	k.Release() // twice is harmless
	// SIGWINCH's default action is to ignore it: safe to send after Release.
	if caught(t, syscall.SIGWINCH) {
		t.Error("SIGWINCH still has a handler after Release")
	}
	syscall.Kill(os.Getpid(), syscall.SIGWINCH)
	select {
	case s := <-k.C:
		t.Errorf("%v delivered after Release", s)
	case <-time.After(50 * time.Millisecond):
	}

	// Catching again works, on the same pipe.
	k2, err := Catch(1, syscall.SIGWINCH)
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Release()
	syscall.Kill(os.Getpid(), syscall.SIGWINCH)
	receive(t, k2.C, syscall.SIGWINCH)
}

// A receiver that does not keep up loses nothing but coalesced repeats:
// the pipe holds what the channel cannot.
func TestCatchBuffersInPipe(t *testing.T) {
	k, err := Catch(0, syscall.SIGUSR1, syscall.SIGUSR2)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release()
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	time.Sleep(20 * time.Millisecond) // the first is in the pipe or the relay
	syscall.Kill(os.Getpid(), syscall.SIGUSR2)
	time.Sleep(20 * time.Millisecond)
	receive(t, k.C, syscall.SIGUSR1)
	receive(t, k.C, syscall.SIGUSR2)
}

func TestCatchRefusesBadSignal(t *testing.T) {
	if _, err := Catch(1, syscall.SIGKILL); err == nil {
		t.Fatal("catching SIGKILL succeeded")
	}
	k, err := Catch(1, syscall.SIGUSR1) // the failure left nothing active
	if err != nil {
		t.Fatal(err)
	}
	k.Release()
}
