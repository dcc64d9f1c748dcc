package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signalReport is the part of --report's tree counters about signals.
type signalReport struct {
	Tree *struct {
		Children   int     `json:"launcher_children"`
		Depth      int     `json:"depth"`
		SignalMsgs int     `json:"signal_messages"`
		Run        traffic `json:"run"`
	} `json:"tree"`
}

// TestSimulatedTreeSignals: 64 simulated daemons in a tree of fanout 8 (the
// launcher links to 8 of them, each relaying 7 more), a rank per node that
// traps SIGUSR1 and SIGINT. prun's SIGUSR1 reaches every rank, and so does
// a Ctrl-C's SIGINT (prun ends with 130, as on one node); each
// job-wide signal costs the launcher one frame per link of its own, not
// one per daemon: the signal goes down the tree as a broadcast.
func TestSimulatedTreeSignals(t *testing.T) {
	const nodes, fanout = 64, 8
	hostfile, env, agent := simCluster(t, nodes)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	script := writeScript(t, dir, "traps.sh", `trap 'echo "rank $PMIX_RANK got USR1"' USR1
trap 'echo "rank $PMIX_RANK got INT"; exit 0' INT
echo "rank $PMIX_RANK ready"
while :; do sleep 1 & wait $!; done
`)
	p := startPrun(t, opts{args: append(agent, "--hostfile", hostfile, "--launch-fanout", fmt.Sprint(fanout),
		"--report", report, "-n", fmt.Sprint(nodes), script), env: env, timeout: 4 * time.Minute})
	count := func(what string) func(string) bool {
		return func(s string) bool { return strings.Count(s, what) == nodes }
	}
	if !p.stdout.waitFor(count(" ready\n"), 2*time.Minute) {
		t.Fatalf("not every rank started\n%s", p.wait())
	}
	p.signal(syscall.SIGUSR1)
	if !p.stdout.waitFor(count(" got USR1\n"), time.Minute) {
		p.signal(syscall.SIGKILL)
		t.Fatalf("SIGUSR1 did not reach every rank\n%s", p.wait())
	}
	p.signal(syscall.SIGINT)
	r := p.wait()
	expectCode(t, r, 130)
	for rank := 0; rank < nodes; rank++ {
		for _, sig := range []string{"USR1", "INT"} {
			if want := fmt.Sprintf("rank %d got %s\n", rank, sig); strings.Count(r.stdout, want) != 1 {
				t.Errorf("stdout has %q %d times, want once", want, strings.Count(r.stdout, want))
			}
		}
	}

	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep signalReport
	if err := json.Unmarshal(b, &rep); err != nil || rep.Tree == nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	tr := rep.Tree
	t.Logf("tree: %d launcher children, depth %d; %d frames of signals, %d frames out in the run", tr.Children, tr.Depth,
		tr.SignalMsgs, tr.Run.MsgsOut)
	if tr.Children != fanout || tr.Depth != 2 {
		t.Errorf("tree: %d launcher children, depth %d; want %d, 2", tr.Children, tr.Depth, fanout)
	}
	// SIGUSR1, then the Ctrl-C's SIGCONT and SIGINT (and SIGKILL, should
	// the grace pass first): at most 4 job-wide signals, each a frame per
	// child of the launcher. Node by node they were 64 frames each.
	if tr.SignalMsgs > 4*tr.Children {
		t.Errorf("the launcher wrote %d frames of signals for at most 4 job-wide signals; want at most %d (a frame per child each)",
			tr.SignalMsgs, 4*tr.Children)
	}
}
