package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSimulatedTreeStartFailures: the hellos combine along the tree (a
// vertex sends one start-up message for its subtree), but a node below a
// relay that fails or is late is still named, as when every hello went up
// on its own. 16 simulated nodes, fanout 4: sim006 is a child of sim001.
func TestSimulatedTreeStartFailures(t *testing.T) {
	const nodes = 16
	start := func(t *testing.T, env ...string) (*result, treeReport, string) {
		hostfile, simEnv, agent := simCluster(t, nodes)
		report := filepath.Join(t.TempDir(), "report.json")
		r := run(t, opts{args: append(agent, "--hostfile", hostfile, "--launch-fanout", "4", "--report", report,
			"-n", "16", "true"), env: append(simEnv, env...), timeout: 90 * time.Second})
		var rep treeReport
		if r.code == 0 {
			rep = readTreeReport(t, report)
		}
		return r, rep, strings.TrimPrefix(simEnv[0], "PRUN_SIM_DIR=")
	}

	t.Run("refused", func(t *testing.T) {
		// sim006's "ssh" refuses: sim001 sends its subtree's hellos at once,
		// the failure after them; the launcher names sim006.
		r, _, dir := start(t, "PRUN_SIM_REFUSE=sim006")
		expectOneLineFailure(t, r, "prun: sim006: the daemon's start command exited with status 255: ssh: connect to host sim006 port 22: Connection refused\n")
		expectFaster(t, r, 7*time.Second) // not after sim001's wait for its children (5 s)
		checkSimClean(t, dir)
	})

	t.Run("late", func(t *testing.T) {
		// sim006 starts 9 s late: sim001 waits for it at most the connect
		// timeout (5 s) after its own hello, then sends what it has; sim006's
		// hello follows on its own. The start succeeds, with one start-up
		// message more than the launcher's children (more only if others
		// were 5 s late too: a machine loaded beyond reason; still not one
		// per daemon). 9 s: sim006 starts well within sim001's watch of it
		// (15 s), sim001's own hello is ready long before 4 s.
		r, rep, dir := start(t, "PRUN_SIM_DELAY=sim006:9")
		expectCode(t, r, 0)
		if in := rep.Tree.Startup.MsgsIn; in < 5 || in >= nodes {
			t.Errorf("startup: %d messages in, want 5 (4 children, and sim006's late hello)", in)
		}
		checkSimClean(t, dir)
	})

	t.Run("never", func(t *testing.T) {
		// sim006's daemon never comes: sim001 reports it when its watch ends
		// (connect timeout + 10 s). Meanwhile sim001's own hello went up
		// (after 5 s), so the launcher's watch of sim001 is satisfied: the
		// node named is sim006, not its relay.
		r, _, dir := start(t, "PRUN_SIM_HANG=sim006")
		expectOneLineFailure(t, r, "prun: sim006: the daemon started but did not connect back")
		checkSimClean(t, dir)
	})
}

// checkSimClean fails on a session directory left on a simulated node (its
// TMPDIR under dir), after a while for the daemons' ends.
func checkSimClean(t *testing.T, dir string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left, _ = filepath.Glob(filepath.Join(dir, "*", "prun.*"))
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, l := range left {
		fi, err := os.Stat(l)
		if err == nil {
			t.Errorf("left on a simulated node: %s (%v)", l, fi.Mode())
		}
	}
}
