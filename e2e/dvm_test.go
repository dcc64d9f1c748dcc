package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// dvmUnder is a persistent runtime started by the test (prun dvm start).
type dvmUnder struct {
	t     *testing.T
	dir   string          // the DVM's directory (PRUN_DVM)
	tmp   string          // its TMPDIR
	state string          // its XDG_STATE_HOME (its logs)
	ours  map[string]bool // what the test put in tmp: not the DVM's leftovers
	env   []string
	pid   int
	done  bool
}

// startDVM starts a detached DVM with args and stops it at the test's end.
func startDVM(t *testing.T, env []string, args ...string) *dvmUnder {
	t.Helper()
	return startDVMIn(t, "", env, args...)
}

// startDVMIn is startDVM from the working directory dir.
func startDVMIn(t *testing.T, dir string, env []string, args ...string) *dvmUnder {
	t.Helper()
	return startDVMWith(t, prunBin, t.TempDir(), dir, env, args...)
}

// startDVMWith is startDVMIn through bin (prun, or a script that runs it)
// with the TMPDIR tmp, and runtime and state directories of its own
// (XDG_RUNTIME_DIR, XDG_STATE_HOME: its logs).
func startDVMWith(t *testing.T, bin, tmp, dir string, env []string, args ...string) *dvmUnder {
	t.Helper()
	user := t.TempDir()
	d := &dvmUnder{t: t, tmp: tmp, state: filepath.Join(user, "state"),
		env: append(append(baseEnv(), "TMPDIR="+tmp, "NO_COLOR=1", "XDG_RUNTIME_DIR="+filepath.Join(user, "run"),
			"XDG_STATE_HOME="+filepath.Join(user, "state")), env...)}
	d.env = slices.Clip(d.env) // tests append to it concurrently
	os.Mkdir(filepath.Join(user, "run"), 0o700)
	cmd := exec.Command(bin, append([]string{"dvm", "start", "--name", "t"}, args...)...)
	cmd.Env, cmd.Dir = d.env, dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("prun dvm start: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	d.dir = dvmDirOf(t, stdout.String())
	d.pid = d.status(t).pid
	t.Cleanup(func() { d.stop(t, true) })
	return d
}

// dvmDirOf is the DVM's directory in what prun dvm start printed on its
// stdout for the shell (PRUN_DVM=DIR; export PRUN_DVM;).
func dvmDirOf(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^PRUN_DVM='?([^';\s]+)'?; export PRUN_DVM;$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("prun dvm start said %q", out)
	}
	return m[1]
}

type dvmStatus struct {
	text string
	pid  int
}

func (d *dvmUnder) cmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(prunBin, append(append([]string{"dvm"}, args...), "--dvm", d.dir)...)
	cmd.Env = d.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (d *dvmUnder) status(t *testing.T) dvmStatus {
	t.Helper()
	out, err := d.cmd(t, "status")
	if err != nil {
		t.Fatalf("prun dvm status: %v\n%s", err, out)
	}
	var st dvmStatus
	fmt.Sscanf(out, "DVM pid %d", &st.pid)
	st.text = out
	return st
}

// stop stops the DVM and checks that nothing of it is left.
func (d *dvmUnder) stop(t *testing.T, all bool) {
	if d.done {
		return
	}
	d.done = true
	args := []string{"stop"}
	if all {
		args = append(args, "--all-jobs")
	}
	if out, err := d.cmd(t, args...); err != nil {
		t.Errorf("prun dvm stop: %v\n%s", err, out)
	}
	d.gone(t, 10*time.Second)
}

// gone waits for the DVM's process to end and checks what it leaves.
func (d *dvmUnder) gone(t *testing.T, within time.Duration) {
	t.Helper()
	d.done = true
	deadline := time.Now().Add(within)
	for alive(d.pid) {
		if time.Now().After(deadline) {
			syscall.Kill(d.pid, syscall.SIGKILL)
			t.Errorf("the DVM (pid %d) still runs after %v", d.pid, within)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(d.dir); err == nil {
		t.Errorf("the DVM's directory %s is still there", d.dir)
	}
	checkTmpDir(t, d.tmp, d.ours)
}

// alive says whether pid runs; a detached DVM that ended may be this
// (subreaper) process's zombie, reaped here.
func alive(pid int) bool {
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	pi, ok := readStat(pid)
	return ok && pi.state != 'Z'
}

// dvmRanks waits for n ranks named comm of the submission p: the DVM's
// children carrying p's mark.
func (d *dvmUnder) ranks(p *proc, n int, comm string) []procInfo {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var kids []procInfo
		for _, pi := range jobProcs(p.cmd.Process.Pid, p.mark) {
			if pi.ppid == d.pid && pi.comm == comm && pi.state != 'Z' {
				kids = append(kids, pi)
			}
		}
		if len(kids) >= n {
			return kids
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the DVM did not start %d %s ranks (have %v)\nstderr: %s", n, comm, kids, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// run submits a job to the DVM.
func (d *dvmUnder) run(t *testing.T, o opts) *result {
	t.Helper()
	o.env = append(o.env, "PRUN_DVM="+d.dir)
	return run(t, o)
}

func (d *dvmUnder) start(t *testing.T, o opts) *proc {
	t.Helper()
	o.env = append(o.env, "PRUN_DVM="+d.dir)
	return startPrun(t, o)
}

// expectServing checks that the DVM still runs a good job.
func (d *dvmUnder) expectServing(t *testing.T) {
	t.Helper()
	r := d.run(t, opts{args: []string{"-n", "2", "echo", "still"}})
	expectCode(t, r, 0)
	if r.stdout != "still\nstill\n" {
		t.Errorf("a good job after that: %s", r)
	}
}

func TestDVM(t *testing.T) {
	d := startDVM(t, nil, "--host", "localhost:4")

	t.Run("output-and-status", d.testDVMOutputAndStatus)
	t.Run("command-line-parsed-by-the-dvm", d.testDVMCommandLineParsedByTheDvm)
	t.Run("mpi", d.testDVMMpi)
	t.Run("signal-ends-the-job-not-the-dvm", d.testDVMSignalEndsTheJobNotTheDvm)
	t.Run("fit-and-wait", d.testDVMFitAndWait)
	t.Run("ps-and-kill", d.testDVMPsAndKill)
	t.Run("failures-then-a-good-job", d.testDVMFailuresThenAGoodJob)
	t.Run("other-user", d.testDVMOtherUser)
	t.Run("stop-all-jobs", d.testDVMStopAllJobs)
}

func (d *dvmUnder) testDVMOutputAndStatus(t *testing.T) {
	r := d.run(t, opts{args: []string{"-n", "4", "echo", "hi"}})
	expectCode(t, r, 0)
	if r.stdout != "hi\nhi\nhi\nhi\n" {
		t.Errorf("%s", r)
	}
	r = d.run(t, opts{args: []string{"-n", "2", "sh", "-c", "exit 3"}})
	expectCode(t, r, 3)
	expectContains(t, "stderr", r.stderr, "exited with status 3")
	r = d.run(t, opts{args: []string{"--output", "tag", "-n", "1", "echo", "a", ":", "-n", "1", "echo", "b"}})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	if strings.Join(got, ",") != "[0,0]<stdout>:a,[1,1]<stdout>:b" {
		t.Errorf("tagged: %q", got)
	}
	r = d.run(t, opts{args: []string{"-n", "1", "cat"}, stdin: strings.NewReader("from stdin\n")})
	expectCode(t, r, 0)
	if r.stdout != "from stdin\n" {
		t.Errorf("stdin: %s", r)
	}
	// The submitter's environment, not the DVM's.
	r = d.run(t, opts{args: []string{"-n", "1", "sh", "-c", "echo $DVM_TEST_VAR"}, env: []string{"DVM_TEST_VAR=mine"}})
	if r.stdout != "mine\n" {
		t.Errorf("environment: %s", r)
	}
	r = d.run(t, opts{args: []string{"--timeout", "1", "-n", "1", "sleep", "30"}})
	expectCode(t, r, 124)
}

// The submitter sends its command line unparsed (cmd/prun/submit.c,
// before Go's runtime; launcher.Submit with --dvm): the DVM parses it
// in the submitter's working directory and environment, and prints
// what prun prints before a launch to the submitter's descriptors.
func (d *dvmUnder) testDVMCommandLineParsedByTheDvm(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hf"), []byte("localhost slots=4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	writeScript(t, bin, "only-in-my-path", "echo found\n")
	path := "PATH=" + bin + ":" + os.Getenv("PATH")
	for _, client := range [][]string{nil, {"--dvm", d.dir}} {
		timing := []string{"PRUN_DEBUG_TIMING=1", path}
		// Relative files from the submitter's directory; a program in
		// its PATH alone.
		r := d.run(t, opts{args: append(slices.Clone(client), "--hostfile", "hf", "--output-filename", "outd",
			"-n", "2", "only-in-my-path"), dir: dir, env: timing})
		expectCode(t, r, 0)
		if fast := strings.Contains(r.stderr, "the C submitter"); fast != (client == nil) {
			t.Errorf("with %q, submitted by the C client: %v (stderr %q)", client, fast, r.stderr)
		}
		var found int
		filepath.WalkDir(filepath.Join(dir, "outd"), func(p string, e os.DirEntry, err error) error {
			if b, _ := os.ReadFile(p); err == nil && !e.IsDir() && string(b) == "found\n" {
				found++
			}
			return nil
		})
		if found != 2 {
			t.Errorf("with %q: %d output files under %s/outd say found (want 2)", client, found, dir)
		}
		os.RemoveAll(filepath.Join(dir, "outd"))
		r = d.run(t, opts{args: append(slices.Clone(client), "-x", "PRUN_TEST_UNSET", "-n", "1", "true"), dir: dir})
		expectCode(t, r, 0)
		expectContains(t, "stderr", r.stderr, "prun: warning: -x PRUN_TEST_UNSET: not set")
		r = d.run(t, opts{args: append(slices.Clone(client), "-n", "1", "nosuchprog-xyz"), dir: dir})
		expectCode(t, r, 2)
		expectContains(t, "stderr", r.stderr, "prun: nosuchprog-xyz: command not found in PATH")
	}
	// Not a job: the submitter runs it itself. --version names the
	// binary the user ran (the runtime's may be another build).
	r := d.run(t, opts{args: []string{"--version"}})
	expectCode(t, r, 0)
	if standalone := prun(t, "--version"); r.stdout != standalone.stdout || r.stdout == "" {
		t.Errorf("--version through the DVM printed %q, standalone %q", r.stdout, standalone.stdout)
	}
	r = d.run(t, opts{args: []string{"completion", "bash"}})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "bash completion")
}

func (d *dvmUnder) testDVMMpi(t *testing.T) {
	cluster.Quiet(t) // as the MPI tests on this node
	for _, tc := range []ctest.Toolchain{ctest.MPICH, ctest.OpenMPI} {
		dir, ring := built(t, tc, "ring.c")
		r := d.run(t, opts{args: []string{"-n", "4", ring}, dir: dir})
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, "ring: 4 ranks, 10 laps, sum ok\n")
	}
}

func (d *dvmUnder) testDVMSignalEndsTheJobNotTheDvm(t *testing.T) {
	p := d.start(t, opts{args: []string{"-n", "2", "sleep", "100"}})
	d.ranks(p, 2, "sleep")
	p.signal(syscall.SIGINT)
	r := p.wait()
	expectCode(t, r, 130)
	d.expectServing(t)
}

func (d *dvmUnder) testDVMFitAndWait(t *testing.T) {
	r := d.run(t, opts{args: []string{"-n", "5", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "5 processes requested but only 4 slots are available")
	p := d.start(t, opts{args: []string{"-n", "3", "sleep", "2"}})
	d.ranks(p, 3, "sleep")
	st := d.status(t)
	expectContains(t, "status", st.text, "1 of 4 slots free")
	r = d.run(t, opts{args: []string{"-n", "2", "true"}})
	expectCode(t, r, 1)
	expectContains(t, "stderr", r.stderr, "does not fit the DVM now (1 of 4 slots free)")
	r = d.run(t, opts{args: []string{"--wait", "-n", "2", "echo", "waited"}})
	expectCode(t, r, 0)
	if r.stdout != "waited\nwaited\n" || r.dur < time.Second {
		t.Errorf("--wait: %s", r)
	}
	expectCode(t, p.wait(), 0)
}

func (d *dvmUnder) testDVMPsAndKill(t *testing.T) {
	p := d.start(t, opts{args: []string{"-n", "2", "sleep", "100"}})
	d.ranks(p, 2, "sleep")
	out, err := d.cmd(t, "ps", "--json")
	var jobs []struct {
		Job     int
		State   string
		Ranks   int
		Command string
	}
	if err != nil || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != 1 || jobs[0].Ranks != 2 ||
		jobs[0].State != "running" || !strings.Contains(jobs[0].Command, "sleep 100") {
		t.Fatalf("ps --json: %v %q", err, out)
	}
	if out, err := d.cmd(t, "stop"); err == nil || !strings.Contains(out, "1 job running") {
		t.Errorf("stop with a job running: %v %q", err, out)
	}
	if out, err := d.cmd(t, "kill", fmt.Sprint(jobs[0].Job)); err != nil {
		t.Errorf("kill: %v %s", err, out)
	}
	expectCode(t, p.wait(), 128+int(syscall.SIGTERM))
	d.expectServing(t)
}

// Submissions that fail anywhere are their submitter's business.
func (d *dvmUnder) testDVMFailuresThenAGoodJob(t *testing.T) {
	r := d.run(t, opts{args: []string{"--host", "nothere", "-n", "1", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "host nothere is not one of the DVM's nodes")
	r = d.run(t, opts{args: []string{"-n", "2", "sh", "-c", "kill -SEGV $$"}})
	expectCode(t, r, 128+int(syscall.SIGSEGV))
	// A program that is gone by the time the DVM starts it.
	dir := t.TempDir()
	prog := writeScript(t, dir, "vanish", "#!/bin/sh\necho never\n")
	r = d.run(t, opts{args: []string{"-n", "1", "sh", "-c", "rm " + prog}})
	expectCode(t, r, 0)
	// A client that dies mid-submit: a hello without descriptors, half a
	// message, gone.
	c, err := net.Dial("unix", filepath.Join(d.dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{'R', 0, 0, 1, 0, '{'})
	c.Close()
	// A submitter killed while its job runs: the job ends, and says
	// why (on the submitter's stderr, which outlives it, and in its
	// report): no signal reached anyone.
	report := filepath.Join(t.TempDir(), "report.json")
	p := d.start(t, opts{args: []string{"--report", report, "-n", "2", "sleep", "100"}, allowZombieRanks: true})
	ranks := d.ranks(p, 2, "sleep")
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	r = p.wait()
	gone := fmt.Sprintf("its submitter (prun, pid %d) went away: the connection to the DVM closed", p.cmd.Process.Pid)
	expectContains(t, "stderr", r.stderr, "prun: "+gone+"; ending its job: SIGHUP to 2 ranks")
	if strings.Contains(r.stderr, "received SIGHUP") {
		t.Errorf("a killed submitter's job says it received SIGHUP:\n%s", r.stderr)
	}
	var rep struct {
		ExitStatus   int `json:"exit_status"`
		Signal       string
		FirstFailure struct{ Message string } `json:"first_failure"`
	}
	if b, err := os.ReadFile(report); err != nil || json.Unmarshal(b, &rep) != nil ||
		rep.FirstFailure.Message != gone || rep.Signal != "" || rep.ExitStatus != 128+int(syscall.SIGHUP) {
		t.Errorf("the report of a killed submitter's job: %v %+v", err, rep)
	}
	if log, _ := os.ReadFile(filepath.Join(d.dir, "log")); !strings.Contains(string(log), fmt.Sprintf("its submitter (pid %d) went away; ending the job", p.cmd.Process.Pid)) {
		t.Errorf("the DVM's log says nothing of the submitter gone:\n%s", log)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, rk := range ranks {
		for syscall.Kill(rk.pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if syscall.Kill(rk.pid, 0) == nil {
			t.Errorf("rank pid %d outlived its killed submitter", rk.pid)
		}
	}
	d.expectServing(t)
}

// Another user is refused by the directory (0700), and by the uid check
// when the directory's protection is gone.
func (d *dvmUnder) testDVMOtherUser(t *testing.T) {
	bindir, err := os.MkdirTemp("", "prun-dvm-bin-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(bindir)
	os.Chmod(bindir, 0o755)
	copyFile(t, prunBin, filepath.Join(bindir, "prun"))
	os.Chmod(filepath.Join(bindir, "prun"), 0o755)
	stranger := func() (string, error) {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			filepath.Join(bindir, "prun"), "--dvm", d.dir, "-n", "1", "true")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=/tmp"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// The test's own directories let nobody through (up to the
	// runtime directory, XDG_RUNTIME_DIR); the DVM's do not.
	for _, dir := range []string{d.tmp, filepath.Dir(d.tmp), filepath.Dir(filepath.Dir(d.dir)),
		filepath.Dir(filepath.Dir(filepath.Dir(d.dir))), filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(d.dir))))} {
		os.Chmod(dir, 0o755)
		defer os.Chmod(dir, 0o700)
	}
	out, err := stranger()
	if err == nil || !strings.Contains(out, "permission denied") || len(lines(out)) != 1 {
		t.Errorf("nobody through the 0700 directory: %v %q", err, out)
	}
	os.Chmod(d.dir, 0o755)
	os.Chmod(filepath.Dir(d.dir), 0o755)
	os.Chmod(filepath.Join(d.dir, "sock"), 0o777)
	defer os.Chmod(d.dir, 0o700)
	defer os.Chmod(filepath.Dir(d.dir), 0o700)
	// The client refuses a directory open to others before the uid check
	// could; past it, the DVM's own check refuses.
	out, err = stranger()
	if err == nil || len(lines(out)) != 1 {
		t.Errorf("nobody with the directory open: %v %q", err, out)
	}
	t.Logf("refused: %s", out)
	c, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
		`import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"C\x00\x00\x00\x10{\"Op\":\"status\"}"); print(s.recv(4096)[4:].decode())`,
		filepath.Join(d.dir, "sock")).CombinedOutput()
	if err != nil || !strings.Contains(string(c), "refused: uid 65534 is not the DVM's user") {
		t.Errorf("nobody past the directory: %v %q", err, c)
	}
	// A submission: refused on the stranger's own stderr, nothing run
	// (the refusal may come before the frame is sent).
	c, err = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
		`import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); socket.send_fds(s, [b"R"], [0,1,2]); f=b"\x00/\x003\x00-n\x001\x00true\x00"
try: s.sendall(len(f).to_bytes(4,"big")+f)
except OSError: pass  # refused (and closed) on the hello alone
print(s.recv(4096)[4:].decode())`,
		filepath.Join(d.dir, "sock")).CombinedOutput()
	if err != nil || !strings.Contains(string(c), "prun: DVM refused: uid 65534 is not the DVM's user") ||
		!strings.Contains(string(c), `"Exit":1`) {
		t.Errorf("no submission from nobody: %v %q", err, c)
	}
	os.Chmod(d.dir, 0o700)
	os.Chmod(filepath.Dir(d.dir), 0o700)
	d.expectServing(t)
}

func (d *dvmUnder) testDVMStopAllJobs(t *testing.T) {
	p := d.start(t, opts{args: []string{"-n", "2", "sleep", "100"}})
	d.ranks(p, 2, "sleep")
	d.stop(t, true)
	r := p.wait()
	if r.code == 0 {
		t.Errorf("a job of a stopped DVM: %s", r)
	}
	// With no DVM, prun runs standalone.
	r = run(t, opts{args: []string{"-n", "1", "echo", "standalone"}})
	expectCode(t, r, 0)
}

// README's quick start, as a shell runs it: eval "$(prun dvm start
// --hostfile hosts)" (the hostfile relative to the shell's directory; the
// DVM runs detached in /), then a plain prun, which runs in the DVM, then
// prun dvm stop; then prun runs standalone.
func TestDVMStartRelativeHostfile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte("localhost slots=3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := dvmEnv(t)
	cmd := exec.Command("bash", "-c", `set -e
eval "$($0 dvm start --hostfile hosts)"
echo "dvm $PRUN_DVM"
$0 dvm status | head -1
$0 -n 3 sh -c 'echo job $PPID'
$0 dvm stop
unset PRUN_DVM
$0 -n 1 sh -c 'echo alone $PPID'`, prunBin)
	cmd.Env, cmd.Dir = d.env, dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	var pid int
	fmt.Sscanf(out[strings.Index(out, "DVM pid ")+len("DVM pid "):], "%d", &pid)
	if err != nil || pid == 0 || !strings.Contains(out, "dvm "+filepath.Join(userRun(d), "prun-dvm", "default")+"\n") ||
		strings.Count(out, fmt.Sprintf("job %d\n", pid)) != 3 || !strings.Contains(out, "alone ") || strings.Contains(out, fmt.Sprintf("alone %d\n", pid)) {
		t.Errorf("README's quick start: %v\n%s%s", err, out, stderr.String())
	}
	expectContains(t, "stderr", stderr.String(), "prun dvm: 1 node up (localhost); a prun runs its jobs there with --dvm ")
	d.pid = pid
	d.gone(t, 10*time.Second)
}

// dvmEnv is the environment of a DVM of the test's own that the test
// starts itself: its TMPDIR, runtime and state directories.
func dvmEnv(t *testing.T) *dvmUnder {
	user := t.TempDir()
	os.Mkdir(filepath.Join(user, "run"), 0o700)
	d := &dvmUnder{t: t, tmp: t.TempDir(), state: filepath.Join(user, "state")}
	d.env = slices.Clip(append(baseEnv(), "TMPDIR="+d.tmp, "NO_COLOR=1", "XDG_RUNTIME_DIR="+filepath.Join(user, "run"), "XDG_STATE_HOME="+d.state))
	return d
}

// waitUp waits until the DVM at d.dir answers and records its pid.
func (d *dvmUnder) waitUp(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if out, err := d.cmd(t, "status"); err == nil {
			fmt.Sscanf(out, "DVM pid %d", &d.pid)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the DVM never came up")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deadStatus is what `prun dvm status` says of the DVM once it is gone.
func (d *dvmUnder) deadStatus(t *testing.T) string {
	t.Helper()
	out, err := d.cmd(t, "status")
	if err == nil || !strings.Contains(out, "no DVM is running at "+d.dir) {
		t.Errorf("prun dvm status of a DVM that is gone: %v %q", err, out)
	}
	return out
}

// Issue 39: a DVM lives until it is stopped, its idle timeout, or the end
// of the allocation it was started in, not as long as some process of the
// shell that started it; and once gone, prun dvm status says why.
func TestDVMLifetime(t *testing.T) {
	// It used to end with the grandparent of prun dvm start: started
	// through a wrapper (or over ssh), it was gone at once.
	t.Run("outlives-its-shells", func(t *testing.T) {
		d := dvmEnv(t)
		d.dir = filepath.Join(userRun(d), "prun-dvm", "p")
		cmd := exec.Command("bash", "-c", `bash -c "$0 dvm start --name p --host localhost:2 >/dev/null 2>&1; true"; true`, prunBin)
		cmd.Env = d.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		d.waitUp(t)
		t.Cleanup(func() { d.stop(t, true) })
		time.Sleep(time.Second)
		if out, err := d.cmd(t, "status"); err != nil || !strings.Contains(out, fmt.Sprintf("DVM pid %d", d.pid)) {
			t.Fatalf("a second after its shells ended: %v %s", err, out)
		}
		d.expectServing(t)
		d.stop(t, false)
		out := d.deadStatus(t)
		if !regexp.MustCompile(`the last DVM there \(pid \d+, started \S+\) ended \S+: prun dvm stop \(pid \d+\); its log: ` +
			regexp.QuoteMeta(filepath.Join(d.state, "prun", "dvm-logs")) + `/p@`).MatchString(out) {
			t.Errorf("prun dvm status once stopped:\n%s", out)
		}
	})
	t.Run("idle-timeout", func(t *testing.T) {
		d := startDVM(t, nil, "--idle-timeout", "1s")
		d.gone(t, 10*time.Second)
		expectContains(t, "prun dvm status", d.deadStatus(t), ": idle for 1s (--idle-timeout); its log: ")
	})
	t.Run("killed", func(t *testing.T) {
		d := startDVM(t, nil, "--host", "localhost:2")
		syscall.Kill(d.pid, syscall.SIGKILL)
		for alive(d.pid) {
			time.Sleep(20 * time.Millisecond)
		}
		d.done = true
		expectContains(t, "prun dvm status", d.deadStatus(t), "ended without saying why (killed by SIGKILL")
		// A job sent to it says so; a new DVM takes its place.
		r := d.run(t, opts{args: []string{"-n", "1", "true"}})
		expectCode(t, r, 1)
		expectContains(t, "stderr", r.stderr, "no DVM is running there")
		cmd := exec.Command(prunBin, "dvm", "start", "--name", "t", "--host", "localhost:2")
		cmd.Env = d.env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("a DVM where one was killed: %v %s", err, out)
		}
		d.done = false
		d.waitUp(t)
		d.expectServing(t)
		d.stop(t, true)
	})
	// In an allocation (PBS's variables here: one node, no launch of its
	// own) it ends with the allocation: with the process the batch system
	// started, which its wrapper shells are not.
	t.Run("allocation-ends", func(t *testing.T) {
		d := dvmEnv(t)
		nodefile := filepath.Join(t.TempDir(), "nodes")
		os.WriteFile(nodefile, []byte("localhost\nlocalhost\n"), 0o644)
		d.env = append(d.env, "PBS_JOBID=77.test", "PBS_NODEFILE="+nodefile)
		d.dir = filepath.Join(userRun(d), "prun-dvm", "default.pbs-77.test")
		job := exec.Command("sh", "-c", `sh -c "$0 dvm start >/dev/null 2>&1; true"; exec sleep 1000`, prunBin)
		job.Env = d.env
		if err := job.Start(); err != nil {
			t.Fatal(err)
		}
		defer job.Process.Kill()
		d.waitUp(t)
		t.Cleanup(func() { d.stop(t, true) })
		r := run(t, opts{args: []string{"-n", "2", "sh", "-c", "echo $PPID"}, env: d.env, tmpdir: d.tmp, skipTmpCheck: true})
		expectCode(t, r, 0)
		if r.stdout != fmt.Sprintf("%d\n%d\n", d.pid, d.pid) {
			t.Errorf("a job of the allocation ran outside its DVM (pid %d): %s", d.pid, r)
		}
		job.Process.Kill()
		job.Wait()
		d.gone(t, 10*time.Second)
		expectContains(t, "prun dvm status", d.deadStatus(t), "the allocation it was started in is over")
	})
}

// userRun is the XDG_RUNTIME_DIR of d's environment.
func userRun(d *dvmUnder) string {
	for _, kv := range slices.Backward(d.env) {
		if v, ok := strings.CutPrefix(kv, "XDG_RUNTIME_DIR="); ok {
			return v
		}
	}
	return ""
}

// A DVM over the 4 test hosts: jobs across them, MPI programs, a node that
// dies, and nothing left on any host after the stop.
func TestDVMMultiNode(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	d := startDVM(t, m.env(), "--hostfile", m.hostfile)
	sub := func(o opts) *result {
		t.Helper()
		o.env = append(m.env(), o.env...)
		return d.run(t, o)
	}

	t.Run("hostname", func(t *testing.T) {
		for i := 0; i < 3; i++ { // warm: the same daemons serve each
			r := sub(opts{args: []string{"-n", "8", "hostname"}})
			expectCode(t, r, 0)
			got := lines(r.stdout)
			sort.Strings(got)
			want := []string{"prun-h1", "prun-h1", "prun-h2", "prun-h2", "prun-h3", "prun-h3", "prun-h4", "prun-h4"}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("hostnames %q, want %q\n%s", got, want, r)
			}
		}
		r := sub(opts{args: []string{"--host", "prun-h3", "-n", "2", "hostname"}})
		expectCode(t, r, 0)
		if r.stdout != "prun-h3\nprun-h3\n" {
			t.Errorf("--host prun-h3: %s", r)
		}
		r = sub(opts{args: []string{"-n", "8", "sh", "-c", "exit 5"}})
		expectCode(t, r, 5)
	})

	t.Run("mpi", func(t *testing.T) {
		for _, tc := range []ctest.Toolchain{ctest.MPICH, ctest.OpenMPI} {
			dir, ring := built(t, tc, "ring.c")
			r := sub(opts{args: []string{"-n", "8", ring}, dir: dir})
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "ring: 8 ranks, 10 laps, sum ok\n")
		}
	})

	t.Run("node-lost", func(t *testing.T) {
		o := opts{args: []string{"-n", "8", "sh", "-c", `echo "ready $PRUN_RANK"; exec sleep 100`},
			env: append(m.env(), "PRUN_DVM="+d.dir)}
		p := startPrun(t, o)
		var want []string
		for i := 0; i < 8; i++ {
			want = append(want, fmt.Sprintf("ready %d", i))
		}
		p.waitOutput(20*time.Second, want...)
		killed := time.Now().Truncate(time.Second)
		syscall.Kill(m.daemonPid(t, "prun-h3"), syscall.SIGKILL)
		r := p.wait()
		if r.code == 0 || r.code == -1 {
			t.Errorf("a job with ranks on a lost node: %s", r)
		}
		expectContains(t, "stderr", r.stderr, "lost node prun-h3")
		// Issue 39: status shows it apart, since when and why; it counts
		// among the nodes up no more.
		st := d.status(t)
		t.Logf("%s", st.text)
		expectContains(t, "status", st.text, "3 nodes up, 1 lost, 0 jobs running, 6 of 6 slots free")
		expectLost(t, st.text, "prun-h3", killed, "killed by SIGKILL")
		r = sub(opts{args: []string{"-n", "6", "hostname"}})
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "prun-h3") || len(lines(r.stdout)) != 6 {
			t.Errorf("a job after the loss: %s", r)
		}
		// prun dvm add brings it back, without a restart, and it runs jobs.
		if out, err := d.cmd(t, "add", "prun-h3"); err != nil || out != "prun-h3 is back\n" {
			t.Errorf("prun dvm add prun-h3: %v %q", err, out)
		}
		st = d.status(t)
		if strings.Contains(st.text, "lost") || !strings.Contains(st.text, "4 nodes, 0 jobs running, 8 of 8 slots free") {
			t.Errorf("status once it is back:\n%s", st.text)
		}
		expectEveryHost(t, sub(opts{args: []string{"-n", "8", "hostname"}}), m.hosts)
		for _, tc := range []struct{ host, want string }{
			{"prun-h3", "prun dvm: prun-h3 is not lost\n"},
			{"nosuch", "prun dvm: nosuch is not one of the DVM's nodes (prun-h1, prun-h2, prun-h3, prun-h4)\n"},
		} {
			if out, err := d.cmd(t, "add", tc.host); exitCode(err) != 1 || out != tc.want {
				t.Errorf("prun dvm add %s: %v %q, want %q", tc.host, err, out, tc.want)
			}
		}
	})

	d.stop(t, true)
	m.checkClean(t, 10*time.Second)
}

// Issue 39: a lost node is brought back without restarting the DVM, in
// its place in the launch tree, by its parent daemon: a chain here
// (--launch-fanout 1: prun-h1, its child prun-h2, ...). A node that fell
// silent (its daemon stopped) is lost by heartbeat; a daemon killed takes
// the nodes below it along; prun dvm add of one below brings back all.
func TestDVMNodeBack(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	d := startDVM(t, m.env(), "--hostfile", m.hostfile, "--launch-fanout", "1")
	sub := func(o opts) *result {
		t.Helper()
		o.env = append(m.env(), o.env...)
		return d.run(t, o)
	}
	hostname := opts{args: []string{"-n", "8", "hostname"}}
	expectEveryHost(t, sub(hostname), m.hosts)
	// waitLost waits for status to show n nodes lost.
	waitLost := func(n int) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			st := d.status(t)
			if strings.Contains(st.text, fmt.Sprintf(" up, %d lost,", n)) {
				return st.text
			}
			if time.Now().After(deadline) {
				t.Fatalf("status does not show %d nodes lost:\n%s", n, st.text)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	stopped := m.daemonPid(t, "prun-h4")
	since := time.Now().Truncate(time.Second)
	syscall.Kill(stopped, syscall.SIGSTOP)
	st := waitLost(1)
	t.Logf("%s", st)
	expectLost(t, st, "prun-h4", since, "lost the connection to its daemon: no heartbeat for ")
	if out, err := d.cmd(t, "add", "prun-h4"); err != nil || out != "prun-h4 is back\n" {
		t.Errorf("prun dvm add prun-h4: %v %q", err, out)
	}
	syscall.Kill(stopped, syscall.SIGCONT) // it finds its parent gone, and ends
	expectEveryHost(t, sub(hostname), m.hosts)

	since = time.Now().Truncate(time.Second)
	syscall.Kill(m.daemonPid(t, "prun-h2"), syscall.SIGKILL)
	st = waitLost(3)
	t.Logf("%s", st)
	expectContains(t, "status", st, "DVM pid "+fmt.Sprint(d.pid)+": 1 node up, 3 lost, 0 jobs running, 2 of 2 slots free")
	expectLost(t, st, "prun-h2", since, "killed by SIGKILL")
	expectLost(t, st, "prun-h3", since, "cut off with prun-h2")
	expectLost(t, st, "prun-h4", since, "cut off with prun-h2")
	if out, err := d.cmd(t, "add", "prun-h3"); err != nil || out != "prun-h2 is back\nprun-h3 is back\nprun-h4 is back\n" {
		t.Errorf("prun dvm add prun-h3: %v %q", err, out)
	}
	if st := d.status(t).text; strings.Contains(st, "lost") {
		t.Errorf("status once they are back:\n%s", st)
	}
	expectEveryHost(t, sub(hostname), m.hosts)
	d.stop(t, true)
	m.checkClean(t, 10*time.Second)
}

// expectLost checks that status shows host among the lost nodes, lost at
// or after since (within a minute), for cause.
func expectLost(t *testing.T, status, host string, since time.Time, cause string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^LOST NODE\s+SINCE\s+CAUSE\n(?:.*\n)*?` + regexp.QuoteMeta(host) +
		`\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s+(.*)$`).FindStringSubmatch(status)
	if m == nil {
		t.Errorf("status does not show %s lost:\n%s", host, status)
		return
	}
	at, err := time.ParseInLocation(time.DateTime, m[1], time.Local)
	if err != nil || at.Before(since) || at.After(since.Add(time.Minute)) {
		t.Errorf("%s lost at %s, want at or after %s", host, m[1], since.Format(time.DateTime))
	}
	if !strings.Contains(m[2], cause) {
		t.Errorf("%s lost for %q, want %q", host, m[2], cause)
	}
	if !strings.Contains(status, "\nprun dvm add HOST brings a lost node back.\n") {
		t.Errorf("status does not say how to bring it back:\n%s", status)
	}
}

// expectEveryHost checks that a job of hostname ranks ran, two on each of hosts.
func expectEveryHost(t *testing.T, r *result, hosts []string) {
	t.Helper()
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	var want []string
	for _, h := range hosts {
		want = append(want, h, h)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("hostnames %q, want %q\n%s", got, want, r)
	}
}

// exitCode is the exit status a command's error carries (0: none).
func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
