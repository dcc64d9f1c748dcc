// Package e2e runs the real prun binary on real programs: no mocks. Every
// run gets a fresh TMPDIR, a unique marker in its environment and a hard
// timeout, and is followed by a check that prun left no session directory
// and no process of the job behind.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"prun/internal/ctest"
)

// prunBin is the prun binary TestMain builds once.
var prunBin string

// userDirs holds the XDG_RUNTIME_DIR (run) and XDG_STATE_HOME (state) of
// every prun of the tests (baseEnv).
var userDirs string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "prun-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// prun-ssh, prun's SSH client, and prun-top, beside prun as installed.
	prunBin = filepath.Join(dir, "prun")
	// The user's DVMs and their logs, for every prun the tests run: none
	// of the machine's (root's /run/prun-dvm, ~/.local/state/prun), so
	// that no test's prun finds a DVM someone made every shell's default,
	// and no test leaves state behind. A test's DVM has its own (startDVM).
	userDirs = filepath.Join(dir, "user")
	for _, d := range []string{userDirs, filepath.Join(userDirs, "run"), filepath.Join(userDirs, "state")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/prun", "./cmd/prun-ssh", "./cmd/prun-top")
	build.Dir = ctest.Root()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/prun ./cmd/prun-ssh ./cmd/prun-top: %v\n%s", err, out)
		return 1
	}
	// The machine's init (pid 1) does not reap orphans, so a rank's child
	// orphaned by the rank's death would stay a zombie for ever whatever
	// prun does. As a child subreaper this process inherits such orphans;
	// checkNoSurvivors reaps the dead ones it can attribute to a job.
	if err := prctl(unixPRSetChildSubreaper, 1); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: PR_SET_CHILD_SUBREAPER:", err)
		return 1
	}
	return m.Run()
}

const unixPRSetChildSubreaper = 36

func prctl(option, arg2 uintptr) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, option, arg2, 0); e != 0 {
		return e
	}
	return nil
}

// opts describes one prun run.
type opts struct {
	args    []string
	bin     string        // the prun binary (default: the one TestMain built)
	env     []string      // added to prun's environment
	dir     string        // working directory (default: the test's own)
	stdin   io.Reader     // default: /dev/null
	timeout time.Duration // hard limit (default 60 s); prun is killed then
	tmpdir  string        // TMPDIR to use (default: a fresh t.TempDir())
	// allowZombieRanks accepts dead ranks that prun did not reap (only
	// when prun itself was SIGKILLed and could not).
	allowZombieRanks bool
	// skipTmpCheck leaves the TMPDIR check to the test.
	skipTmpCheck bool
}

// result is what a run produced.
type result struct {
	code           int // exit status; -1 if prun was killed by a signal
	signal         syscall.Signal
	stdout, stderr string
	dur            time.Duration
	tmpdir         string
	mark           string
	pid            int
}

func (r *result) String() string {
	return fmt.Sprintf("exit %d after %v\n--- stdout:\n%s\n--- stderr:\n%s", r.code, r.dur.Round(time.Millisecond),
		clip(r.stdout), clip(r.stderr))
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:2000] + "\n[...]\n" + s[len(s)-2000:]
	}
	return s
}

// watchBuf is an output buffer a test can wait on.
type watchBuf struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  bytes.Buffer
	done bool
}

func newWatchBuf() *watchBuf {
	w := &watchBuf{}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *watchBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.cond.Broadcast()
	return len(p), nil
}

func (w *watchBuf) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *watchBuf) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.cond.Broadcast()
}

// waitFor waits until cond holds for the buffered output, the output ends,
// or the timeout passes.
func (w *watchBuf) waitFor(cond func(string) bool, timeout time.Duration) bool {
	timer := time.AfterFunc(timeout, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.cond.Broadcast()
	})
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		if cond(w.buf.String()) {
			return true
		}
		if w.done || !time.Now().Before(deadline) {
			return false
		}
		w.cond.Wait()
	}
}

// proc is a running prun.
type proc struct {
	t       *testing.T
	o       opts
	cmd     *exec.Cmd
	stdout  *watchBuf
	stderr  *watchBuf
	start   time.Time
	tmpdir  string
	mark    string
	hardCtx context.Context
	cancel  context.CancelFunc
	waited  bool
}

func newMark() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// baseEnv is the test's environment without anything that would change
// what prun or the ranks do.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "TMPDIR", name == "NO_COLOR", name == "E2E_PRUN_MARK",
			name == "XDG_RUNTIME_DIR", name == "XDG_STATE_HOME",
			strings.HasPrefix(name, "PMIX_"), strings.HasPrefix(name, "OMPI_"),
			strings.HasPrefix(name, "PRUN_"), strings.HasPrefix(name, "MPIEXEC_"),
			strings.HasPrefix(name, "KEYS_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, "XDG_RUNTIME_DIR="+filepath.Join(userDirs, "run"), "XDG_STATE_HOME="+filepath.Join(userDirs, "state"))
}

// startPrun starts prun with o.args.
func startPrun(t *testing.T, o opts) *proc {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	tmp := o.tmpdir
	if tmp == "" {
		tmp = t.TempDir()
	}
	p := &proc{t: t, o: o, stdout: newWatchBuf(), stderr: newWatchBuf(), tmpdir: tmp, mark: newMark()}
	bin := prunBin
	if o.bin != "" {
		bin = o.bin
	}
	cmd := exec.Command(bin, o.args...)
	cmd.Env = append(baseEnv(), "TMPDIR="+tmp, "NO_COLOR=1", "E2E_PRUN_MARK="+p.mark)
	cmd.Env = append(cmd.Env, o.env...)
	cmd.Dir = o.dir
	cmd.Stdin = o.stdin
	cmd.Stdout = p.stdout
	cmd.Stderr = p.stderr
	// Its own session: every process of the job (the ranks make their own
	// process groups, not sessions) carries prun's pid as its session id,
	// even as a zombie, whose environment can no longer be read.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prun: %v", err)
	}
	p.cmd = cmd
	p.hardCtx, p.cancel = context.WithTimeout(context.Background(), o.timeout)
	killAll := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, jp := range jobProcs(cmd.Process.Pid, p.mark) {
			syscall.Kill(jp.pid, syscall.SIGKILL)
		}
	}
	go func() {
		<-p.hardCtx.Done()
		if p.hardCtx.Err() == context.DeadlineExceeded {
			killAll() // a hang
		}
	}()
	// A test that stops before wait (a t.Fatal) must not leave the job
	// running after the test binary exits.
	t.Cleanup(func() {
		if !p.waited {
			killAll()
			p.cmd.Wait()
			p.cancel()
		}
	})
	return p
}

// wait waits for prun to end and runs the after-run checks.
func (p *proc) wait() *result {
	t := p.t
	t.Helper()
	p.waited = true
	err := p.cmd.Wait()
	dur := time.Since(p.start)
	hung := p.hardCtx.Err() == context.DeadlineExceeded
	p.cancel()
	p.stdout.close()
	p.stderr.close()
	res := &result{stdout: p.stdout.String(), stderr: p.stderr.String(), dur: dur, tmpdir: p.tmpdir,
		mark: p.mark, pid: p.cmd.Process.Pid, code: -1}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			res.code = ws.ExitStatus()
		case ws.Signaled():
			res.signal = ws.Signal()
		}
	} else if err != nil {
		t.Errorf("waiting for prun: %v", err)
	}
	if hung {
		t.Errorf("prun %s did not finish within %v (killed)\n%s", strings.Join(p.o.args, " "), p.o.timeout, res)
	}
	checkNoSurvivors(t, res.pid, p.mark, p.o.allowZombieRanks)
	if !p.o.skipTmpCheck {
		checkTmpDir(t, p.tmpdir, nil)
	}
	return res
}

// run runs prun to its end.
func run(t *testing.T, o opts) *result {
	t.Helper()
	return startPrun(t, o).wait()
}

// prun runs prun with args and default options.
func prun(t *testing.T, args ...string) *result {
	t.Helper()
	return run(t, opts{args: args})
}

// checkTmpDir fails on anything prun left in tmp: its session directory
// (prun.*) or any other entry not named in ours.
func checkTmpDir(t *testing.T, tmp string, ours map[string]bool) {
	t.Helper()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Errorf("reading TMPDIR: %v", err)
		return
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case ours[name]:
		case strings.HasPrefix(name, "prun."):
			t.Errorf("TMPDIR still holds prun's session directory %s%s", name, listTree(filepath.Join(tmp, name)))
		case strings.HasPrefix(name, "ompi.") || strings.HasPrefix(name, "openmpi-sessions"):
			// Open MPI's own, not prun's: reported, not failed.
			t.Logf("TMPDIR holds Open MPI's %s after the run", name)
		default:
			t.Errorf("TMPDIR holds %s after the run (nothing but the test put it there)", name)
		}
	}
}

func listTree(dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil {
			fmt.Fprintf(&b, "\n    %s", path)
		}
		return nil
	})
	return b.String()
}

// procInfo is one line of /proc/PID/stat.
type procInfo struct {
	pid, ppid, pgrp, session int
	state                    byte
	comm                     string
}

func (p procInfo) String() string {
	return fmt.Sprintf("pid %d (%s) state %c ppid %d pgrp %d", p.pid, p.comm, p.state, p.ppid, p.pgrp)
}

func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	l, r := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if l < 0 || r < l {
		return procInfo{}, false
	}
	f := strings.Fields(s[r+1:])
	if len(f) < 4 {
		return procInfo{}, false
	}
	pi := procInfo{pid: pid, comm: s[l+1 : r], state: f[0][0]}
	pi.ppid, _ = strconv.Atoi(f[1])
	pi.pgrp, _ = strconv.Atoi(f[2])
	pi.session, _ = strconv.Atoi(f[3])
	return pi, true
}

func hasMark(pid int, mark string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	want := "E2E_PRUN_MARK=" + mark
	for _, kv := range bytes.Split(b, []byte{0}) {
		if string(kv) == want {
			return true
		}
	}
	return false
}

// jobProcs lists every process of the run of prun prunPid (prun itself
// excluded): those in its session and those with the run's marker.
func jobProcs(prunPid int, mark string) []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == prunPid || pid == self {
			continue
		}
		pi, ok := readStat(pid)
		if !ok {
			continue
		}
		if pi.session == prunPid || hasMark(pid, mark) {
			out = append(out, pi)
		}
	}
	return out
}

// checkNoSurvivors fails if a process of the job is still there 2 s after
// prun ended. Zombies count, except orphans handed to this (subreaper)
// process: those are dead, and their parent could not reap them. A rank
// (its own process group leader in prun's session) left as a zombie means
// prun did not reap it; allowZombieRanks accepts that.
func checkNoSurvivors(t *testing.T, prunPid int, mark string, allowZombieRanks bool) {
	t.Helper()
	self := os.Getpid()
	deadline := time.Now().Add(2 * time.Second)
	parents := map[int]string{} // a zombie's living parent, as last seen
	for {
		var left []procInfo
		for _, pi := range jobProcs(prunPid, mark) {
			if pi.state == 'Z' && pi.ppid != self {
				if pp, ok := readStat(pi.ppid); ok {
					cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pp.pid))
					parents[pp.pid] = fmt.Sprintf("%v session %d: %q", pp, pp.session, strings.ReplaceAll(string(cmd), "\x00", " "))
				}
			}
			if pi.state == 'Z' && pi.ppid == self {
				rank := pi.pid == pi.pgrp && pi.session == prunPid
				if !rank || allowZombieRanks {
					var ws syscall.WaitStatus
					syscall.Wait4(pi.pid, &ws, syscall.WNOHANG, nil)
					continue
				}
			}
			left = append(left, pi)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, pi := range left {
				fmt.Fprintf(&b, "\n    %v", pi)
				// A zombie's living parent is not the job's by its marks (a
				// daemon started with another environment): name it.
				if p, ok := parents[pi.ppid]; ok {
					fmt.Fprintf(&b, "; its parent: %s", p)
				}
				// Do not let them disturb later tests.
				syscall.Kill(pi.pid, syscall.SIGKILL)
				if pi.ppid == self {
					go syscall.Wait4(pi.pid, nil, 0, nil)
				}
			}
			t.Errorf("%d process(es) of the job survived prun by 2 s:%s", len(left), b.String())
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRanks waits until prun has n children that are no longer prun (they
// have exec'd their program) and returns them.
func (p *proc) waitRanks(n int, comm string, timeout time.Duration) []procInfo {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var kids []procInfo
		for _, pi := range jobProcs(p.cmd.Process.Pid, p.mark) {
			if pi.ppid == p.cmd.Process.Pid && pi.comm == comm && pi.state != 'Z' {
				kids = append(kids, pi)
			}
		}
		if len(kids) >= n {
			return kids
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("prun did not start %d %s ranks within %v (have %v)\nstderr: %s", n, comm, timeout, kids,
				p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOutput waits until stdout holds every one of want.
func (p *proc) waitOutput(timeout time.Duration, want ...string) {
	p.t.Helper()
	ok := p.stdout.waitFor(func(s string) bool {
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}, timeout)
	if !ok {
		p.t.Fatalf("prun's stdout did not show %q within %v\nstdout: %s\nstderr: %s", want, timeout,
			p.stdout.String(), p.stderr.String())
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signalling prun: %v", err)
	}
}

// writeScript writes an executable /bin/sh script to dir and returns its path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// compileC compiles a C source into dir (with libpmix when pmix is set).
func compileC(t *testing.T, dir, name, src string, pmix bool) string {
	t.Helper()
	cfile := filepath.Join(dir, name+".c")
	if err := os.WriteFile(cfile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	args := []string{"-O2", "-Wall", "-o", bin, cfile}
	if pmix {
		out, err := exec.Command("pkg-config", "--cflags", "--libs", "pmix").Output()
		if err != nil {
			t.Fatalf("pkg-config --cflags --libs pmix: %v", err)
		}
		args = append(args, strings.Fields(string(out))...)
	}
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// expectCode fails unless prun exited with code.
func expectCode(t *testing.T, r *result, code int) {
	t.Helper()
	if r.code != code {
		how := fmt.Sprintf("exited %d", r.code)
		if r.signal != 0 {
			how = "was killed by " + r.signal.String()
		}
		t.Errorf("prun %s, want exit %d\n%s", how, code, r)
	}
}

// expectOneLineFailure checks that prun failed (an exit status, not
// killed) and said so in one line of stderr containing want.
func expectOneLineFailure(t *testing.T, r *result, want string) {
	t.Helper()
	if r.code == 0 || r.code == -1 {
		t.Errorf("prun exited %d, want a failure status\n%s", r.code, r)
	}
	expectContains(t, "stderr", r.stderr, want)
	if n := len(lines(r.stderr)); n != 1 {
		t.Errorf("stderr has %d lines, want one\n%s", n, r)
	}
}

func expectContains(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%s does not contain %q:\n%s", what, want, clip(got))
	}
}

func expectFaster(t *testing.T, r *result, limit time.Duration) {
	t.Helper()
	if r.dur > limit {
		t.Errorf("prun took %v, want less than %v", r.dur.Round(time.Millisecond), limit)
	}
}

// lines splits output into lines without the final empty one.
func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
