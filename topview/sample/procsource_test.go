package sample

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// child starts a shell script whose output goes to a meter.
func child(t *testing.T, script string) (*exec.Cmd, *OutputMeter) {
	t.Helper()
	m := NewOutputMeter()
	c := exec.Command("sh", "-c", script)
	c.Stdout = m
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	return c, m
}

// TestOnceJSON samples real processes (a spinner that writes, a silent
// sleeper, one that exited with status 3) and reads back the JSON.
func TestOnceJSON(t *testing.T) {
	spin, spinOut := child(t, `while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; echo tick; done`)
	sleep, sleepOut := child(t, "exec sleep 60")
	ended, _ := child(t, "exit 3")
	ended.Wait() // reaped: gone from /proc
	status := ended.ProcessState.ExitCode()
	src := &ProcSource{Host: "here", Warmup: 500 * time.Millisecond, Procs: []Proc{
		{Rank: 2, Pid: ended.Process.Pid, Exit: func() (int, int, bool) { return status, 0, true }},
		{Rank: 0, Pid: spin.Process.Pid, Out: spinOut},
		{Rank: 1, Pid: sleep.Process.Pid, Out: sleepOut},
	}}
	var b bytes.Buffer
	th := Thresholds{IdleCPU: 1, BusyCPU: 2, Quiet: 200 * time.Millisecond}
	if err := Once(context.Background(), src, th, &b); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", b.String())
	var snap Snapshot
	if err := json.Unmarshal(b.Bytes(), &snap); err != nil {
		t.Fatal(err)
	}
	if time.Since(snap.Time) > time.Minute || len(snap.Ranks) != 3 {
		t.Fatalf("snapshot %+v", snap)
	}
	r0, r1, r2 := snap.Ranks[0], snap.Ranks[1], snap.Ranks[2]
	if r0.Rank != 0 || r0.Host != "here" || r0.Pid != spin.Process.Pid || r0.CPU < 2 || r0.OutRate <= 0 || r0.RSS <= 0 {
		t.Errorf("spinner %+v", r0)
	}
	if r1.State != "sleeping" || r1.CPU > 1 || r1.OutRate != 0 || r1.SinceOutput < 0.4 || r1.RSS <= 0 {
		t.Errorf("sleeper %+v", r1)
	}
	// The sleeper is idle and silent beside the spinner; the ended rank
	// counts for neither side.
	if len(r1.Apart) != 2 || r0.Apart != nil || r2.Apart != nil {
		t.Errorf("apart: %v %v %v", r0.Apart, r1.Apart, r2.Apart)
	}
	if r2.State != Exited || r2.ExitStatus != 3 {
		t.Errorf("ended %+v", r2)
	}
	// Without an Exit function, a reaped process is still seen to end.
	src2 := &ProcSource{Procs: []Proc{{Rank: 0, Pid: ended.Process.Pid}}, Warmup: time.Millisecond}
	rs, err := src2.Sample(context.Background())
	if err != nil || rs[0].State != Exited {
		t.Errorf("reaped without Exit: %+v, %v", rs, err)
	}
}

// TestProcSourceStopped: a stopped rank shows as such, and its CPU stops.
func TestProcSourceStopped(t *testing.T) {
	c, _ := child(t, "while :; do :; done")
	src := &ProcSource{Procs: []Proc{{Rank: 0, Pid: c.Process.Pid}}, Warmup: 300 * time.Millisecond}
	rs, err := src.Sample(context.Background())
	if err != nil || rs[0].State != "running" || rs[0].CPU <= 0 {
		t.Fatalf("spinning: %+v, %v", rs, err)
	}
	c.Process.Signal(syscall.SIGSTOP)
	deadline := time.Now().Add(5 * time.Second)
	for {
		time.Sleep(100 * time.Millisecond)
		rs, err = src.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].State == "stopped" && rs[0].CPU == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGSTOP: %+v", rs[0])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&ProcSource{}).Sample(ctx); err == nil {
		t.Error("a first Sample with a cancelled context gave no error")
	}
}
