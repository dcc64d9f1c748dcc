package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"prun/internal/ctest"
)

// simCluster writes a hostfile of n simulated nodes (sim001...), one slot
// each, and returns it with the launch agent's flags: testdata/simrsh.sh
// starts each node's daemon on this machine under the node's name, with a
// directory of its own under dir.
func simCluster(t *testing.T, n int) (hostfile string, env []string, args []string) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "sim%03d slots=1\n", i)
	}
	hostfile = filepath.Join(dir, "hosts")
	if err := os.WriteFile(hostfile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := filepath.Join(dir, "nodes")
	return hostfile, []string{"PRUN_SIM_DIR=" + nodes}, []string{"--rsh", filepath.Join(ctest.Root(), "testdata", "simrsh.sh")}
}

// TestSimulatedTree runs 64 real daemons on this machine, each believing it
// is a node of its own (testdata/simrsh.sh), in a tree of fanout 4 (depth
// 3), and a job of one rank per node that fences with 1 KiB per rank: the
// launcher handles 4 messages in and 4 out per fence, not 64 each way.
func TestSimulatedTree(t *testing.T) {
	const nodes = 64
	fence := ctest.Build(t, ctest.PMIx, "fence.c")
	hostfile, env, agent := simCluster(t, nodes)
	report := filepath.Join(t.TempDir(), "report.json")
	args := append(agent, "--hostfile", hostfile, "--launch-fanout", "4", "--report", report,
		"-n", fmt.Sprint(nodes), fence, "data", "1024", "3")
	r := run(t, opts{args: args, env: env})
	expectCode(t, r, 0)
	if got := strings.Count(r.stdout, " ok\n"); got != nodes {
		t.Errorf("%d ranks ok, want %d\n%s", got, nodes, r)
	}
	expectContains(t, "stdout", r.stdout, fmt.Sprintf("fence: %d ranks, 1024 bytes each, 3 fences in", nodes))
	rep := readTreeReport(t, report)
	tr := rep.Tree
	if tr.Daemons != nodes || tr.Children != 4 || tr.Depth != 3 {
		t.Errorf("tree: %d daemons, %d launcher children, depth %d; want %d, 4, 3", tr.Daemons, tr.Children, tr.Depth, nodes)
	}
	checkCollCounters(t, rep, 4)
	if tr.MaxIn != 4 || tr.MaxOut != 4 {
		t.Errorf("a fence of every node cost the launcher %d messages in, %d out; want 4 each", tr.MaxIn, tr.MaxOut)
	}
	// The hellos combine along the tree (each vertex sends one message for
	// its subtree), and so do the answers to the closing broadcast: the
	// launcher reads one of each per child, not one per daemon.
	if tr.Startup.MsgsIn > 4 || tr.Teardown.MsgsIn != 4 || tr.Teardown.MsgsOut != 4 {
		t.Errorf("startup %d messages in, teardown %d in, %d out; want at most 4, 4, 4", tr.Startup.MsgsIn, tr.Teardown.MsgsIn,
			tr.Teardown.MsgsOut)
	}
	t.Logf("took %v; launcher peak RSS %d KiB", r.dur, rep.Launcher.MaxRSSKiB)
}
