package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/inspect"
)

// TestConcurrentSessions: two prun runs share a TMPDIR; the second must not
// take the first's live session directory for a stale one — also when prun
// is installed under another name (an "mpirun" symlink, as a drop-in
// replacement would be).
func TestConcurrentSessions(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"prun", "mpirun"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, name)
			if err := os.Symlink(prunBin, bin); err != nil {
				t.Fatal(err)
			}
			flag := filepath.Join(dir, "go")
			// The rank waits until the second run is over, then checks
			// that its session directory still exists, with what libpmix
			// put there (a job of no PMIx client has no PMIX_NSDIR).
			script := writeScript(t, dir, "check.sh", `echo "ready $PMIX_SERVER_TMPDIR"
while [ ! -e "$FLAG" ]; do sleep 0.05; done
if [ -d "$PMIX_SERVER_TMPDIR" ] && [ -n "$(ls -A "$PMIX_SERVER_TMPDIR")" ]; then echo intact; else echo "GONE $PMIX_SERVER_TMPDIR"; exit 1; fi
`)
			tmp := t.TempDir()
			first := startPrun(t, opts{bin: bin, args: []string{"-n", "1", script}, tmpdir: tmp,
				env: []string{"FLAG=" + flag}, timeout: 30 * time.Second})
			first.waitOutput(10*time.Second, "ready ")
			second := run(t, opts{bin: bin, args: []string{"-n", "1", "true"}, tmpdir: tmp, skipTmpCheck: true})
			expectCode(t, second, 0)
			if err := os.WriteFile(flag, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			r := first.wait()
			expectCode(t, r, 0)
			if !strings.Contains(r.stdout, "intact\n") {
				t.Errorf("the first run's session directory was removed while it ran\n%s", r)
			}
		})
	}
}

// TestSigkillPrunEmptySession: a prun SIGKILLed while its session
// directory is still empty leaves it so: all its ranks ran on another node
// (no PMIx server of its own wrote there), or it was still starting that
// node's daemon. The next prun in the same TMPDIR must remove it at once,
// as it removes a non-empty one (TestSigkillPrun), and nothing of the
// first may remain: not on the node (its daemon, losing its launcher, ends
// its ranks and removes its own session directory), not in TMPDIR.
func TestSigkillPrunEmptySession(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  []string // for simrsh.sh
	}{
		{"mid-job", nil},
		{"starting-daemons", []string{"PRUN_SIM_HANG=sim001"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			hostfile, env, agent := simCluster(t, 1) // sim001; no rank on the launcher's node
			node := filepath.Join(strings.TrimPrefix(env[0], "PRUN_SIM_DIR="), "sim001")
			tmp := t.TempDir()
			args := append(agent, "--hostfile", hostfile, "-n", "1", "sh", "-c", "echo ready; exec sleep 30")
			p := startPrun(t, opts{args: args, env: append(env, c.env...), tmpdir: tmp,
				allowZombieRanks: true, skipTmpCheck: true})
			if c.env == nil {
				p.waitOutput(20*time.Second, "ready\n")
			} else {
				waitJobProc(t, p, "cat", 20*time.Second) // simrsh.sh's session that never starts a daemon
			}
			sessions := prunEntries(t, tmp)
			if len(sessions) != 1 {
				t.Fatalf("TMPDIR holds %v, want the launcher's session directory alone", sessions)
			}
			// Nothing of PMIx's there, the case under test; mid-job, prun
			// top's socket (inspect.sock) may be, which changes nothing.
			left := listTree(filepath.Join(tmp, sessions[0]))
			n := 0
			for _, l := range strings.Split(left, "\n") {
				if l != "" && !strings.HasSuffix(l, "/"+inspect.SocketName) {
					n++
				}
			}
			if n != 1 { // the directory itself
				t.Fatalf("the launcher's session directory holds more than prun top's socket, the case under test:%s", left)
			}
			p.signal(syscall.SIGKILL)
			if r := p.wait(); r.signal != syscall.SIGKILL { // no process of the job left within 2 s
				t.Errorf("prun ended with %s, want death by SIGKILL", r)
			}
			r := run(t, opts{args: []string{"-n", "1", "true"}, tmpdir: tmp}) // checks TMPDIR after it
			expectCode(t, r, 0)
			if _, err := os.Stat(node); err == nil {
				checkTmpDir(t, node, nil)
			}
		})
	}
}

// prunEntries lists the entries of dir named like prun's session directories.
func prunEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "prun.") {
			names = append(names, e.Name())
		}
	}
	return names
}

// waitJobProc waits until a process of p's job runs comm.
func waitJobProc(t *testing.T, p *proc, comm string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, pi := range jobProcs(p.cmd.Process.Pid, p.mark) {
			if pi.comm == comm && pi.state != 'Z' {
				return
			}
		}
	}
	t.Fatalf("no process of the job ran %s within %v\nstderr: %s", comm, timeout, p.stderr.String())
}

// TestEveryEndingLeavesNothing: however a run ends, no session directory
// of it is left, on the launcher's node (run's check of TMPDIR) or on the
// node its ranks ran on, once prun is gone (a SIGKILLed one: once the next
// prun ran, TestSigkillPrun and TestSigkillPrunEmptySession). Each ending
// with the ranks on the launcher's node and, through simrsh.sh, on another
// node only (the launcher's session directory then stays empty).
func TestEveryEndingLeavesNothing(t *testing.T) {
	t.Parallel()
	endings := []struct {
		name string
		args []string
		sig  syscall.Signal // sent once the rank said ready
		code int
	}{
		{"exit", []string{"-n", "1", "true"}, 0, 0},
		{"failure", []string{"-n", "1", "sh", "-c", "exit 3"}, 0, 3},
		{"SIGTERM", []string{"-n", "1", "sh", "-c", "echo ready; exec sleep 30"}, syscall.SIGTERM, 143},
		{"SIGINT", []string{"-n", "1", "sh", "-c", "echo ready; exec sleep 30"}, syscall.SIGINT, 130},
		{"timeout", []string{"--timeout", "1", "-n", "1", "sleep", "30"}, 0, 124},
		{"usage-error", []string{"--map-by", "nowhere", "-n", "1", "true"}, 0, 2},
		{"do-not-launch", []string{"--do-not-launch", "-n", "1", "true"}, 0, 0},
	}
	for _, where := range []string{"local", "remote"} {
		for _, e := range endings {
			t.Run(where+"/"+e.name, func(t *testing.T) {
				t.Parallel()
				o := opts{args: e.args}
				node := ""
				if where == "remote" {
					hostfile, env, agent := simCluster(t, 1)
					o.args = append(append(agent, "--hostfile", hostfile), e.args...)
					o.env = env
					node = filepath.Join(strings.TrimPrefix(env[0], "PRUN_SIM_DIR="), "sim001")
				}
				p := startPrun(t, o)
				if e.sig != 0 {
					p.waitOutput(20*time.Second, "ready\n")
					p.signal(e.sig)
				}
				expectCode(t, p.wait(), e.code) // checks TMPDIR
				if _, err := os.Stat(node); node != "" && err == nil {
					checkTmpDir(t, node, nil)
				}
			})
		}
	}
}
