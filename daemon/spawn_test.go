package daemon

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func spawnSh(t *testing.T, script string) *proc {
	t.Helper()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	p, err := spawn(command{path: "/bin/sh", argv: []string{"sh", "-c", script}, env: os.Environ(),
		files: []*os.File{devnull, devnull, devnull}, sys: &syscall.SysProcAttr{Setpgid: true}})
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func state(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "gone"
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

// A rank's exit is reported while the process stays a zombie, so that its
// process group's id cannot be reused before finish signals the group;
// reap collects it.
func TestExitedLeavesZombieUntilReaped(t *testing.T) {
	p := spawnSh(t, "exit 3")
	ws, _, err := p.exited()
	if err != nil || !ws.Exited() || ws.ExitStatus() != 3 {
		t.Fatalf("exited: %v (%#x), %v", ws, uint32(ws), err)
	}
	if st := state(p.pid); st != "Z" {
		t.Errorf("after exited the process is %q, want a zombie", st)
	}
	// Its group can still be signalled: the id is not free.
	if err := syscall.Kill(-p.pid, 0); err != nil {
		t.Errorf("kill(-pgid, 0) on the zombie's group: %v", err)
	}
	p.reap()
	if st := state(p.pid); st != "gone" {
		t.Errorf("after reap the process is %q", st)
	}
	if p.pidfd != -1 {
		t.Errorf("pidfd %d not closed", p.pidfd)
	}

	p = spawnSh(t, "kill -TERM $$")
	ws, _, err = p.exited()
	if err != nil || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("killed: %v (%#x), %v", ws, uint32(ws), err)
	}
	p.reap()

	// Without a pidfd (kernels before 5.2) the wait blocks instead.
	p = spawnSh(t, "exit 5")
	syscall.Close(p.pidfd)
	p.pidfd = -1
	if ws, _, err = p.exited(); err != nil || ws.ExitStatus() != 5 {
		t.Fatalf("no pidfd: %v, %v", ws, err)
	}
	p.reap()
}
