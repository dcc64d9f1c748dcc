package dvm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// A runtime started inside an allocation is found there only; one started
// outside any is not found inside one.
func TestScopedByAllocation(t *testing.T) {
	outside := envOf(map[string]string{"TMPDIR": "/t"})
	slurm1 := envOf(map[string]string{"TMPDIR": "/t", "SLURM_JOB_ID": "1"})
	slurm2 := envOf(map[string]string{"TMPDIR": "/t", "SLURM_JOB_ID": "2"})
	pbs := envOf(map[string]string{"TMPDIR": "/t", "PBS_JOBID": "7.server"})
	dirs := map[string]bool{}
	for _, env := range []func(string) string{outside, slurm1, slurm2, pbs} {
		d := Dir(env, DefaultName)
		if dirs[d] {
			t.Errorf("two scopes share %s", d)
		}
		dirs[d] = true
	}
	if got := Dir(slurm1, "x"); !strings.HasSuffix(got, "/x.slurm-1") {
		t.Errorf("Dir in slurm job 1: %s", got)
	}
	if got := Dir(envOf(map[string]string{"XDG_RUNTIME_DIR": "/run/user/5"}), "x"); got != "/run/user/5/prun-dvm/x" {
		t.Errorf("with XDG_RUNTIME_DIR: %s", got)
	}
	if got, _ := Resolve(outside, "/a/b/sock"); got != "/a/b" {
		t.Errorf("Resolve of a socket path: %s", got)
	}
	for _, bad := range []string{"", "..", "a\x00b"} {
		if _, err := Resolve(outside, bad); err == nil {
			t.Errorf("Resolve(%q) accepted", bad)
		}
	}
}

// The base directory is one no other user can create first: the runtime
// directory, root's /run, else the user's state directory, by host.
func TestBaseDir(t *testing.T) {
	if got := BaseDir(envOf(map[string]string{"XDG_RUNTIME_DIR": "/x", "TMPDIR": "/t"})); got != "/x/prun-dvm" {
		t.Errorf("with XDG_RUNTIME_DIR: %s", got)
	}
	if os.Getuid() == 0 && !usersOwn("/run/user/0", 0) {
		if got := BaseDir(envOf(map[string]string{"TMPDIR": "/t", "HOME": "/h"})); got != "/run/prun-dvm" {
			t.Errorf("root without XDG_RUNTIME_DIR: %s", got)
		}
	}
	if got := StateDir(envOf(map[string]string{"HOME": "/h"})); got != "/h/.local/state/prun" {
		t.Errorf("StateDir: %s", got)
	}
	if got := StateDir(envOf(map[string]string{"HOME": "/h", "XDG_STATE_HOME": "/s"})); got != "/s/prun" {
		t.Errorf("StateDir with XDG_STATE_HOME: %s", got)
	}
	if got := StateDir(envOf(map[string]string{"HOME": "rel"})); got != "" {
		t.Errorf("StateDir of a relative HOME: %q", got)
	}
	long := envOf(map[string]string{"XDG_RUNTIME_DIR": "/tmp/" + strings.Repeat("d", 100)})
	if err := MakeDir(Dir(long, "x")); err == nil || !strings.Contains(err.Error(), "longer than a Unix socket's address") {
		t.Errorf("a socket path too long: %v", err)
	}
}

// Outside an allocation a job finds the runtime the user made the default
// (DefaultLink) and no other; inside one, the allocation's.
func TestDefault(t *testing.T) {
	run := t.TempDir()
	outside := envOf(map[string]string{"XDG_RUNTIME_DIR": run})
	inside := envOf(map[string]string{"XDG_RUNTIME_DIR": run, "SLURM_JOB_ID": "5"})
	if err := MakeDir(Dir(outside, "a")); err != nil {
		t.Fatal(err)
	}
	if got := Default(outside); got != "" {
		t.Errorf("no default made: %q", got)
	}
	if got, _ := Addressed(outside, ""); got != Dir(outside, DefaultName) {
		t.Errorf("a command addresses %q", got)
	}
	if err := SetDefault(Dir(outside, "a")); err != nil {
		t.Fatal(err)
	}
	if got := Default(outside); got != Dir(outside, "a") {
		t.Errorf("made the default: %q", got)
	}
	if got, _ := Addressed(outside, ""); got != Dir(outside, "a") {
		t.Errorf("a command addresses %q", got)
	}
	if got := Default(inside); got != Dir(inside, DefaultName) || !strings.HasSuffix(got, "/default.slurm-5") {
		t.Errorf("inside an allocation: %q", got)
	}
	ClearDefault(Dir(outside, "b")) // not b's: stays
	if got := Default(outside); got != Dir(outside, "a") {
		t.Errorf("after another's clear: %q", got)
	}
	ClearDefault(Dir(outside, "a"))
	if got := Default(outside); got != "" {
		t.Errorf("after its clear: %q", got)
	}
	os.Symlink(".x", filepath.Join(BaseDir(outside), DefaultLink))
	if got := Default(outside); got != "" {
		t.Errorf("a link to a dot name: %q", got)
	}
	for _, bad := range []string{".default", ".x"} {
		if CheckName(bad) == nil {
			t.Errorf("CheckName(%q) accepted", bad)
		}
	}
}

// A detached runtime's log stays after it ends and says why; the logs of
// ended runtimes are bounded in number, and each in size.
func TestLogs(t *testing.T) {
	home := t.TempDir()
	env := envOf(map[string]string{"XDG_RUNTIME_DIR": filepath.Join(home, "run"), "HOME": home})
	os.Mkdir(filepath.Join(home, "run"), 0o700)
	dir := Dir(env, "l")
	if err := MakeDir(dir); err != nil {
		t.Fatal(err)
	}
	if w := LastWords(env, dir); w != "" {
		t.Errorf("no log yet: %q", w)
	}
	f, err := OpenLog(env, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.Name(), filepath.Join(home, ".local/state/prun/dvm-logs")+"/") {
		t.Errorf("the log is %s", f.Name())
	}
	if target, _ := os.Readlink(LogFile(dir)); target != f.Name() {
		t.Errorf("the runtime's log link points at %q", target)
	}
	f.WriteString(LogStarted(42, "1 node up"))
	f.WriteString("prun dvm: 2026-01-01T00:00:00Z lost node x: gone\n")
	if w := LastWords(env, dir); !strings.Contains(w, "still runs but does not answer") {
		t.Errorf("while it runs (its log locked): %q", w)
	}
	f.WriteString(LogEnded("idle for 1s (--idle-timeout)"))
	f.Close()
	if w := LastWords(env, dir); !strings.Contains(w, "(pid 42, started ") || !strings.Contains(w, ": idle for 1s (--idle-timeout); its log: "+f.Name()) {
		t.Errorf("ended: %q", w)
	}
	// Killed: no last line.
	os.Remove(LogFile(dir))
	time.Sleep(10 * time.Millisecond)
	g, err := OpenLog(env, dir)
	if err != nil {
		t.Fatal(err)
	}
	g.WriteString(LogStarted(43, "1 node up"))
	g.Close()
	if w := LastWords(env, dir); !strings.Contains(w, "(pid 43, ") || !strings.Contains(w, "ended without saying why") {
		t.Errorf("killed: %q", w)
	}
	// Rotation: past LogMax, to .1, and on in a new file.
	big := filepath.Join(t.TempDir(), "big.log")
	os.WriteFile(big, make([]byte, LogMax+1), 0o600)
	r, _ := os.Open("/dev/null")
	fd := int(r.Fd())
	if err := RotateLog(big, fd); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(big + ".1"); err != nil || fi.Size() != LogMax+1 {
		t.Errorf("the rotated part: %v", err)
	}
	syscall.Write(fd, []byte("after\n"))
	if b, _ := os.ReadFile(big); !strings.HasSuffix(string(b), "after\n") || len(b) > 200 {
		t.Errorf("the new log holds %q", b)
	}
	r.Close()
	// Bounds: the oldest ended logs go, a running runtime's (locked) stays.
	ld := LogDir(env)
	locked, _ := os.OpenFile(filepath.Join(ld, "old-but-running.log"), os.O_CREATE|os.O_WRONLY, 0o600)
	syscall.Flock(int(locked.Fd()), syscall.LOCK_EX)
	defer locked.Close()
	old := time.Now().Add(-time.Hour)
	os.Chtimes(locked.Name(), old, old)
	for i := range 5 {
		p := filepath.Join(ld, fmt.Sprintf("n%d.log", i))
		os.WriteFile(p, nil, 0o600)
		os.WriteFile(p+".1", nil, 0o600)
		at := time.Now().Add(time.Duration(i-30) * time.Minute)
		os.Chtimes(p, at, at)
	}
	PruneLogs(ld, 3)
	left, _ := filepath.Glob(filepath.Join(ld, "*"))
	var names []string
	for _, p := range left {
		names = append(names, filepath.Base(p))
	}
	// 8 logs: the running one, n0-n4, the two above; n0 to n3 go (n3's
	// part too), the running one stays past the bound.
	want := []string{"n4.log", "n4.log.1", "old-but-running.log"}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("after pruning: %v, want %s among them", names, w)
		}
	}
	for _, gone := range []string{"n0.log", "n3.log", "n3.log.1"} {
		if slices.Contains(names, gone) {
			t.Errorf("after pruning: %v, want %s gone", names, gone)
		}
	}
}

// A directory open to others is refused.
func TestCheckPrivate(t *testing.T) {
	d := filepath.Join(t.TempDir(), "x", "y")
	if err := MakeDir(d); err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	if err := CheckPrivate(d); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Errorf("0755: %v", err)
	}
}

// FuzzRecv: any bytes from a peer are a message or an error, never a panic
// or an allocation beyond the frame limit.
func FuzzRecv(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x10{\"Op\":\"status\"}"))
	f.Add([]byte("\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, c := net.Pipe()
		_ = a
		defer a.Close()
		defer c.Close()
		go func() { a.Write(b); a.Close() }()
		if p, err := readFrame(c); err == nil {
			var req Request
			json.Unmarshal(p, &req)
			DecodeRun(p)
		}
		if len(b) >= 4 && binary.BigEndian.Uint32(b) > maxFrame {
			return
		}
	})
}

func TestRunRoundTrip(t *testing.T) {
	for _, r := range []Run{
		{Args: []string{"-n", "4", "echo", "", "a\nb\xff"}, Env: []string{"A=1", "B="}, Cwd: "/w", ColorErrors: true},
		{Args: []string{}, Env: []string{}, Cwd: "/", ColorTags: true},
	} {
		got, err := DecodeRun(EncodeRun(r))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("DecodeRun(EncodeRun(%+v)) = %+v, %v", r, got, err)
		}
	}
	for _, bad := range []string{"", "t\x00/w", "\x00/w\x003\x00a\x00", "\x00w\x000\x00", "\x00/w\x00-1\x00"} {
		if _, err := DecodeRun([]byte(bad)); err == nil {
			t.Errorf("DecodeRun(%q): no error", bad)
		}
	}
}

// FuzzDecodeRun: a submission's frame decodes or is refused, and what
// decodes survives encoding again.
func FuzzDecodeRun(f *testing.F) {
	f.Add(EncodeRun(Run{Args: []string{"-n", "1", "true"}, Env: []string{"PATH=/bin"}, Cwd: "/tmp"}))
	f.Add([]byte("te\x00/\x001\x00x\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRun(b)
		if err != nil {
			return
		}
		if again, err := DecodeRun(EncodeRun(r)); err != nil || !reflect.DeepEqual(again, r) {
			t.Errorf("%q decoded to %+v, then to %+v, %v", b, r, again, err)
		}
	})
}
