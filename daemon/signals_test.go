package daemon

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestEndsJob(t *testing.T) {
	for _, c := range []struct {
		ranks []int
		sig   syscall.Signal
		want  bool
	}{
		{nil, syscall.SIGTERM, true},
		{nil, syscall.SIGKILL, true},
		{nil, syscall.SIGINT, true},
		{nil, syscall.SIGHUP, true},
		{nil, syscall.SIGQUIT, true},
		{nil, syscall.SIGUSR1, false},
		{nil, syscall.SIGCONT, false},
		{[]int{0}, syscall.SIGTERM, false}, // some ranks: the rest run on
	} {
		if got := endsJob(c.ranks, c.sig); got != c.want {
			t.Errorf("endsJob(%v, %v) = %v, want %v", c.ranks, c.sig, got, c.want)
		}
	}
}

// TestDeliver: a signal reaches what a rank started in its process group,
// and a rank that left its group.
func TestDeliver(t *testing.T) {
	// A leader whose child stays in its group.
	leader := exec.Command("/bin/sh", "-c", "sleep 60 & echo $!; wait")
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := leader.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	if _, err := fmt.Fscan(out, &child); err != nil {
		t.Fatal(err)
	}
	// A rank that is no group's leader (it stays in the test's group).
	loner := exec.Command("/bin/sleep", "60")
	if err := loner.Start(); err != nil {
		t.Fatal(err)
	}
	deliver(leader.Process.Pid, syscall.SIGTERM)
	deliver(loner.Process.Pid, syscall.SIGTERM)
	for _, c := range []*exec.Cmd{leader, loner} {
		if err := c.Wait(); err == nil {
			t.Errorf("%v: exited 0, not by the signal", c.Args)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	// It is init's child now: gone once reaped there, a zombie until.
	for st, _ := procStat(child); st != "gone" && st != "Z (zombie)"; st, _ = procStat(child) {
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatal("the leader's child outlived the group's signal")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
