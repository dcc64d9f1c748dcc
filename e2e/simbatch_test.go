package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runReport is the part of --report's tree counters about the frames the
// launcher read: by phase (a batch counts once), and the batches among them
// with the messages they carried.
type runReport struct {
	Tree *struct {
		Startup  traffic `json:"startup"`
		Run      traffic `json:"run"`
		Teardown traffic `json:"teardown"`
		Batches  int     `json:"batches"`
		Batched  int     `json:"batched_messages"`
	} `json:"tree"`
}

// TestSimulatedTreeOutput: 64 simulated daemons in a tree of fanout 4 (each
// child of the launcher relays 15 daemons), a rank per node printing 200
// lines as fast as it can. Output and events travel in batches where they
// queue up at a relay: the launcher reads far fewer frames than the nodes
// send messages. Every line arrives whole, in each rank's order.
func TestSimulatedTreeOutput(t *testing.T) {
	const nodes, lines = 64, 200
	hostfile, env, agent := simCluster(t, nodes)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	script := writeScript(t, dir, "print.sh",
		fmt.Sprintf("i=0\nwhile [ $i -lt %d ]; do echo \"rank $PMIX_RANK line $i of the output of a rank of this job\"; i=$((i+1)); done\n", lines))
	r := run(t, opts{args: append(agent, "--hostfile", hostfile, "--launch-fanout", "4", "--report", report,
		"-n", fmt.Sprint(nodes), script), env: env})
	expectCode(t, r, 0)
	next := make([]int, nodes)
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		var rank, i int
		if _, err := fmt.Sscanf(l, "rank %d line %d of", &rank, &i); err != nil || rank < 0 || rank >= nodes ||
			l != fmt.Sprintf("rank %d line %d of the output of a rank of this job", rank, i) {
			t.Fatalf("line %q is not one a rank printed", l)
		}
		if i != next[rank] {
			t.Fatalf("rank %d: line %d after line %d", rank, i, next[rank]-1)
		}
		next[rank]++
	}
	for rank, n := range next {
		if n != lines {
			t.Errorf("rank %d: %d lines, want %d", rank, n, lines)
		}
	}

	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep runReport
	if err := json.Unmarshal(b, &rep); err != nil || rep.Tree == nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	tr := rep.Tree
	// Unbatched, every message a node sends up is a frame at the launcher
	// (700 to 1,700 frames here before batching: runs of output, where each rank's
	// output comes from, the ends of its streams, its start and end, the
	// job's end on each node). Batched at the launcher's 4 children, which
	// relay 15 nodes each, the frames carry several messages each: at most
	// half as many frames as messages (about a sixth in the runs seen).
	frames := tr.Startup.MsgsIn + tr.Run.MsgsIn + tr.Teardown.MsgsIn
	msgs := frames - tr.Batches + tr.Batched
	t.Logf("the launcher read %d frames (%d in the run) carrying %d messages; %d batches of %d messages", frames, tr.Run.MsgsIn,
		msgs, tr.Batches, tr.Batched)
	if msgs < nodes*7 {
		t.Errorf("%d messages from %d nodes; each sends at least 7", msgs, nodes)
	}
	if 2*frames > msgs {
		t.Errorf("the launcher read %d frames for %d messages, want at most half as many", frames, msgs)
	}
}
