package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parent is this process's cgroup. Root has one wherever cgroup2 is
// mounted; another user may have none (the daemon then falls back on
// environment marks), and the test is skipped.
func parent(t *testing.T) string {
	t.Helper()
	p, err := Parent()
	if err != nil && os.Geteuid() == 0 {
		t.Fatalf("no cgroup for this process, run as root: %v", err)
	}
	if err != nil {
		t.Skipf("no cgroup for this process: %v", err)
	}
	return p
}

// startIn starts sh -c script inside g (as the daemon starts ranks) and
// returns its pid; the test reaps it.
func startIn(t *testing.T, g *Group, script string) int {
	t.Helper()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	fd := devnull.Fd()
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", script}, &syscall.ProcAttr{
		Env: os.Environ(), Files: []uintptr{fd, fd, fd},
		Sys: &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: g.FD()}})
	if err != nil {
		t.Fatalf("starting into %s: %v", g.Path(), err)
	}
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL); syscall.Wait4(pid, nil, 0, nil) })
	return pid
}

// procs waits until g (with the groups below it) holds at least n processes.
func procs(t *testing.T, dir string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := procsBelow(dir)
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %v, want %d processes", dir, pids, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0] != "Z"
}

// What a process in a job's group starts stays in it, even a daemon
// (setsid, its parent gone) and what a group made below holds; End kills
// them all and removes the groups.
func TestEnd(t *testing.T) {
	g, err := New(parent(t), fmt.Sprintf("prun-cgroup-test.%d.end", os.Getpid()))
	if err != nil {
		t.Fatalf("cannot make a group: %v", err)
	}
	below := filepath.Join(g.Path(), "below")
	if err := os.Mkdir(below, 0o755); err != nil {
		t.Fatal(err)
	}
	startIn(t, g, `(setsid sleep 600 &); echo $$ > `+below+`/cgroup.procs; sleep 600 & wait`)
	pids := procs(t, g.Path(), 3)
	if left := g.End(5 * time.Second); left != nil {
		t.Fatalf("End left %v", left)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d outlived End", pid)
		}
	}
	if _, err := os.Stat(g.Path()); !os.IsNotExist(err) {
		t.Errorf("the group is still there: %v", err)
	}
	if g.FD() != -1 {
		t.Errorf("End left the group's descriptor open")
	}
}

// A group whose processes all ended (zombies included) goes at once.
func TestEndEmpty(t *testing.T) {
	g, err := New(parent(t), fmt.Sprintf("prun-cgroup-test.%d.empty", os.Getpid()))
	if err != nil {
		t.Fatalf("cannot make a group: %v", err)
	}
	pid := startIn(t, g, "exit 0")
	for alive(pid) {
		time.Sleep(time.Millisecond)
	}
	if left := g.End(0); left != nil {
		t.Fatalf("End left %v", left)
	}
	if _, err := os.Stat(g.Path()); !os.IsNotExist(err) {
		t.Errorf("the group is still there: %v", err)
	}
}

// Sweep ends a dead daemon's groups by their prefix, and no other.
func TestSweepIn(t *testing.T) {
	p := parent(t)
	prefix := fmt.Sprintf("prun-cgroup-test.%d.sweep.", os.Getpid())
	var pids []int
	for _, name := range []string{"a", "b"} {
		g, err := New(p, prefix+name)
		if err != nil {
			t.Fatalf("cannot make a group: %v", err)
		}
		startIn(t, g, "(setsid sleep 600 &); sleep 600")
		pids = append(pids, procs(t, g.Path(), 2)...)
		unixClose(g)
	}
	other, err := New(p, prefix[:len(prefix)-1]+"x.other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.End(time.Second)
	if left := SweepIn(p, prefix); left != nil {
		t.Fatalf("Sweep left %v", left)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d outlived Sweep", pid)
		}
	}
	ents, _ := os.ReadDir(p)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if slices.Contains(names, prefix+"a") || slices.Contains(names, prefix+"b") {
		t.Errorf("swept groups still there: %v", names)
	}
	if !slices.Contains(names, filepath.Base(other.Path())) {
		t.Errorf("Sweep removed a group of another prefix")
	}
}

func unixClose(g *Group) {
	syscall.Close(g.fd)
	g.fd = -1
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/a\040b/c`); got != "/a b/c" {
		t.Errorf("got %q", got)
	}
}
