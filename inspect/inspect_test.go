package inspect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/stacktree"
	"prun/topview/sample"
)

// procs is a Source over real local processes: two sleeping ranks.
type procs struct {
	ps   *sample.ProcSource
	pids map[int]int
}

func (p *procs) Ranks(ctx context.Context, job string) ([]sample.Rank, error) {
	if job != "" {
		return nil, fmt.Errorf("no job %q", job)
	}
	return p.ps.Sample(ctx)
}

func (p *procs) Stacks(ctx context.Context, job string, set stacktree.RankSet) (*stacktree.Tree, error) {
	t := stacktree.New()
	for r, pid := range p.pids {
		if set.Len() > 0 && !set.Has(r) {
			continue
		}
		th, err := stacktree.Capture(ctx, pid, 20*time.Second)
		if err != nil {
			t.Fail(r, err.Error())
			continue
		}
		t.Add(r, th)
	}
	t.Finish()
	return t, nil
}

func startProcs(t *testing.T) *procs {
	t.Helper()
	p := &procs{ps: &sample.ProcSource{Host: "here"}, pids: map[int]int{}}
	for r := range 2 {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		p.ps.Procs = append(p.ps.Procs, sample.Proc{Rank: r, Pid: cmd.Process.Pid})
		p.pids[r] = cmd.Process.Pid
	}
	return p
}

func TestRanksAndStacks(t *testing.T) {
	dir := t.TempDir()
	srv, err := Listen(dir, startProcs(t))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if fi, err := os.Stat(srv.Path()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v, want mode 0600", fi, err)
	}
	c, err := Dial(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for range 2 { // one connection, several requests
		rs, err := c.Source("").Sample(ctx)
		if err != nil || len(rs) != 2 || rs[0].Host != "here" || rs[1].Rank != 1 || rs[0].State == "" {
			t.Fatalf("ranks: %+v, %v", rs, err)
		}
	}
	if _, err := c.Ranks(ctx, "7"); err == nil || err.Error() != `no job "7"` {
		t.Errorf("a job the source does not know: %v", err)
	}
	tr, err := c.Stacks(ctx, "", stacktree.RankSet{})
	if err != nil {
		t.Fatal(err)
	}
	if txt := tr.Text(stacktree.Options{}); !strings.Contains(txt, "[0-1] 2 ranks") || !strings.Contains(txt, "nanosleep") {
		t.Errorf("stacks:\n%s", txt)
	}
	one, _ := stacktree.ParseRanks("1")
	tr, err = c.Stacks(ctx, "", one)
	if err != nil || tr.Root.Ranks.String() != "1" {
		t.Errorf("stacks of rank 1: %v %v", tr, err)
	}
	// A bad rank list is the server's one-line error.
	if _, err := c.call(ctx, request{Op: "stacks", Ranks: "x-"}); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("bad rank list: %v", err)
	}
	if _, err := c.call(ctx, request{Op: "frob"}); err == nil || err.Error() != `inspect: unknown request "frob"` {
		t.Errorf("unknown request: %v", err)
	}

	// Close ends the connection and removes the socket.
	srv.Close()
	if _, err := c.Ranks(ctx, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if _, err := os.Stat(srv.Path()); !os.IsNotExist(err) {
		t.Errorf("the socket outlived Close: %v", err)
	}
}

// Another user gets nothing, even where the file system would let it
// reach the socket (SO_PEERCRED decides).
func TestOtherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root, to connect as nobody (make test runs as root)")
	}
	dir, err := os.MkdirTemp("", "inspect-test-") // in /tmp: t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	srv, err := Listen(dir, startProcs(t))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	os.Chmod(srv.Path(), 0o777)
	script := `import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
try:
    s.sendall(b'{"op":"ranks"}\n'); print(repr(s.recv(65536)))
except (ConnectionResetError, BrokenPipeError):
    print("reset")`
	as := func(uid uint32) string {
		cmd := exec.Command("/usr/bin/python3", "-c", script, srv.Path())
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("python3 as uid %d: %v\n%s", uid, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := as(65534); got != "b''" && got != "reset" {
		t.Errorf("nobody got %s", got)
	}
	if got := as(0); !strings.Contains(got, `"rank":1`) {
		t.Errorf("root got %s", got)
	}
}

func TestFind(t *testing.T) {
	tmp := t.TempDir()
	pid := os.Getpid()
	if _, err := Find(tmp, fmt.Sprint(pid)); err == nil || !strings.Contains(err.Error(), "is not a running prun") {
		t.Errorf("no session: %v", err)
	}
	if _, err := Find(tmp, "999999999"); err == nil || err.Error() != "no process 999999999" {
		t.Errorf("no process: %v", err)
	}
	dir := filepath.Join(tmp, fmt.Sprintf("prun.%d.abc", pid))
	os.Mkdir(dir, 0o700)
	srv, err := Listen(dir, startProcs(t))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, target := range []string{fmt.Sprint(pid), dir} {
		if got, err := Find(tmp, target); err != nil || got != srv.Path() {
			t.Errorf("Find(%s) = %s, %v", target, got, err)
		}
	}
	if _, err := Find(tmp, tmp); err == nil || !strings.Contains(err.Error(), "not a running prun's session directory") {
		t.Errorf("a directory without a socket: %v", err)
	}
}

// A dead launcher's socket (a SIGKILLed DVM's, in the directory the next
// one takes) is taken over; a live one's is not.
func TestStaleSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SocketName)
	dead, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	dead.SetUnlinkOnClose(false)
	dead.Close() // the file stays, nobody listens
	srv, err := Listen(dir, startProcs(t))
	if err != nil {
		t.Fatalf("a dead launcher's socket: %v", err)
	}
	defer srv.Close()
	if _, err := Listen(dir, startProcs(t)); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("a live launcher's socket: %v", err)
	}
}
