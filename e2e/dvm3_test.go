package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ranIn says whether a job of `sh -c 'echo $PPID'` ranks ran in the DVM
// of pid (its ranks are that process's children), from their output.
func ranIn(t *testing.T, r *result, pid, n int) bool {
	t.Helper()
	expectCode(t, r, 0)
	return r.stdout == strings.Repeat(fmt.Sprintf("%d\n", pid), n)
}

var ppidJob = []string{"-n", "2", "sh", "-c", "echo $PPID"}

// Issue 39: a prun runs in a DVM only when its user said so: --dvm, PRUN_DVM
// (the line prun dvm start prints, for eval), inside the DVM's allocation,
// or once the DVM was made every shell's default (--default). A second
// shell's or a CI script's plain prun used to run on whatever DVM ran
// under the default name, and was killed by its stop --all-jobs.
func TestDVMFoundWhenPointedAt(t *testing.T) {
	d := startDVM(t, nil, "--name", "default", "--host", "localhost:2")
	plain := func(env ...string) *result {
		t.Helper()
		return run(t, opts{args: ppidJob, env: append(append([]string{}, d.env...), env...), tmpdir: d.tmp, skipTmpCheck: true})
	}
	if r := plain(); ranIn(t, r, d.pid, 2) {
		t.Errorf("a plain prun ran in a DVM nobody pointed it at: %s", r)
	}
	if r := plain("PRUN_DVM=" + d.dir); !ranIn(t, r, d.pid, 2) {
		t.Errorf("PRUN_DVM: %s", r)
	}
	if r := plain("PRUN_DVM=default"); !ranIn(t, r, d.pid, 2) {
		t.Errorf("PRUN_DVM by name: %s", r)
	}
	if r := run(t, opts{args: append([]string{"--dvm", "default"}, ppidJob...), env: d.env, tmpdir: d.tmp, skipTmpCheck: true}); !ranIn(t, r, d.pid, 2) {
		t.Errorf("--dvm: %s", r)
	}
	// What prun dvm start prints is for the shell to evaluate.
	cmd := exec.Command("bash", "-c", `eval "$($0 dvm start --name e --host localhost:2 2>/dev/null)" && $0 -n 2 sh -c 'echo $PPID' && $0 dvm status | head -1 && $0 dvm stop`, prunBin)
	cmd.Env = d.env
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var pid int
	if len(lines) == 3 {
		fmt.Sscanf(lines[2], "DVM pid %d", &pid)
	}
	if err != nil || pid == 0 || lines[0] != fmt.Sprint(pid) || lines[1] != fmt.Sprint(pid) {
		t.Errorf(`eval "$(prun dvm start)", then prun: %v %q`, err, out)
	}
	// Every shell's default, on purpose.
	eenv := append(append([]string{}, d.env...), "TMPDIR="+t.TempDir())
	def := exec.Command(prunBin, "dvm", "start", "--name", "every", "--default", "--host", "localhost:2")
	def.Env = eenv
	if out, err := def.CombinedOutput(); err != nil || !strings.Contains(string(out), "every prun of this user's on this node runs its jobs there") {
		t.Fatalf("prun dvm start --default: %v %s", err, out)
	}
	e := &dvmUnder{t: t, tmp: eenv[len(eenv)-1][len("TMPDIR="):], env: eenv, dir: filepath.Join(filepath.Dir(d.dir), "every")}
	e.pid = e.status(t).pid
	t.Cleanup(func() { e.stop(t, true) })
	if r := plain(); !ranIn(t, r, e.pid, 2) {
		t.Errorf("a plain prun with a DVM made the default: %s", r)
	}
	if r := plain("PRUN_DVM=" + d.dir); !ranIn(t, r, d.pid, 2) {
		t.Errorf("PRUN_DVM beside a default: %s", r)
	}
	if out, err := e.cmd(t, "status"); err != nil || !strings.Contains(out, fmt.Sprintf("DVM pid %d", e.pid)) {
		t.Errorf("prun dvm status addresses the default one: %v %s", err, out)
	}
	again := exec.Command(prunBin, "dvm", "start", "--name", "other", "--default", "--host", "localhost:1")
	again.Env = d.env
	if out, err := again.CombinedOutput(); err == nil || !strings.Contains(string(out), "is every shell's default") {
		t.Errorf("a second --default: %v %s", err, out)
	}
	// Inside an allocation, the default made outside does not count.
	nodefile := filepath.Join(t.TempDir(), "nodes")
	os.WriteFile(nodefile, []byte("localhost\n"), 0o644)
	if r := run(t, opts{args: []string{"-n", "1", "sh", "-c", "echo $PPID"}, env: append(append([]string{}, d.env...), "PBS_JOBID=5.x",
		"PBS_NODEFILE="+nodefile), tmpdir: d.tmp, skipTmpCheck: true}); ranIn(t, r, e.pid, 1) {
		t.Errorf("a prun of an allocation ran in the default made outside: %s", r)
	}
	e.stop(t, false)
	if _, err := os.Lstat(filepath.Join(filepath.Dir(d.dir), ".default")); err == nil {
		t.Errorf("the default's link outlived it")
	}
	if r := plain(); ranIn(t, r, e.pid, 2) || ranIn(t, r, d.pid, 2) {
		t.Errorf("a plain prun once the default stopped: %s", r)
	}
}

// Issue 39: in a shared sticky TMPDIR without XDG_RUNTIME_DIR, another user
// created $TMPDIR/prun-dvm-0 first and every prun dvm start of root's was
// refused. A DVM's directory is now where no other user can create one:
// root's in /run, another user's in its own state directory (by host).
func TestDVMRuntimeDirNotSquatted(t *testing.T) {
	shared := t.TempDir()
	os.Chmod(shared, 0o1777)
	os.Chmod(filepath.Dir(shared), 0o755)
	asNobody := func(env []string, args ...string) *exec.Cmd {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, args...)...)
		cmd.Env = env
		return cmd
	}
	noRuntimeDir := func(env []string) []string {
		var out []string
		for _, kv := range env {
			if !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
				out = append(out, kv)
			}
		}
		return out
	}
	// Root's, squatted by nobody.
	if out, err := asNobody([]string{"PATH=/usr/bin:/bin"}, "mkdir", "-m", "0700", filepath.Join(shared, "prun-dvm-0")).CombinedOutput(); err != nil {
		t.Fatalf("nobody's mkdir: %v %s", err, out)
	}
	name := fmt.Sprintf("squat-%d", os.Getpid())
	env := append(noRuntimeDir(baseEnv()), "TMPDIR="+shared, "NO_COLOR=1", "XDG_STATE_HOME="+t.TempDir())
	start := exec.Command(prunBin, "dvm", "start", "--name", name, "--host", "localhost:2")
	start.Env = env
	out, err := start.Output()
	if err != nil {
		t.Fatalf("root's prun dvm start with prun-dvm-0 squatted: %v %s", err, out)
	}
	d := &dvmUnder{t: t, tmp: shared, env: env, dir: dvmDirOf(t, string(out)), ours: map[string]bool{"prun-dvm-0": true}}
	d.pid = d.status(t).pid
	t.Cleanup(func() {
		d.stop(t, true)
		os.Remove(filepath.Dir(d.dir)) // the machine's /run/prun-dvm, when no other DVM is left in it
	})
	if !strings.HasPrefix(d.dir, "/run/") {
		t.Errorf("root's DVM is at %s, not under /run", d.dir)
	}
	d.expectServing(t)
	d.stop(t, true)

	// nobody's, squatted by root: in nobody's own state directory.
	os.Mkdir(filepath.Join(shared, "prun-dvm-65534"), 0o700)
	bindir := t.TempDir()
	os.Chmod(bindir, 0o755)
	copyFile(t, prunBin, filepath.Join(bindir, "prun"))
	os.Chmod(filepath.Join(bindir, "prun"), 0o755)
	home := filepath.Join(shared, "home")
	os.Mkdir(home, 0o700)
	os.Chown(home, 65534, 65534)
	nenv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + shared, "NO_COLOR=1"}
	start = asNobody(nenv, filepath.Join(bindir, "prun"), "dvm", "start", "--host", "localhost:2")
	if out, err = start.Output(); err != nil {
		t.Fatalf("nobody's prun dvm start with prun-dvm-65534 squatted: %v %s", err, out)
	}
	dir := dvmDirOf(t, string(out))
	host, _ := os.Hostname()
	if want := filepath.Join(home, ".local/state/prun/run-"+host, "default"); dir != want {
		t.Errorf("nobody's DVM is at %s, want %s", dir, want)
	}
	job := asNobody(append(nenv, "PRUN_DVM="+dir), filepath.Join(bindir, "prun"), "-n", "2", "echo", "nobody's")
	if out, err := job.CombinedOutput(); err != nil || string(out) != "nobody's\nnobody's\n" {
		t.Errorf("a job in nobody's DVM: %v %q", err, out)
	}
	stop := asNobody(nenv, filepath.Join(bindir, "prun"), "dvm", "stop", "--all-jobs")
	if out, err := stop.CombinedOutput(); err != nil {
		t.Errorf("nobody's prun dvm stop: %v %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(dir); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("nobody's DVM directory %s is still there", dir)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	logs, _ := filepath.Glob(filepath.Join(home, ".local/state/prun/dvm-logs/default@*.log"))
	if len(logs) != 1 {
		t.Errorf("nobody's DVM's log: %v", logs)
	}
}
