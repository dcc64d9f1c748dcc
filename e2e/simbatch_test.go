package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runReport is the part of --report's tree counters about the frames the
// launcher read: by phase (a batch counts once), and the batches among them
// with the messages they carried.
type runReport struct {
	Tree *struct {
		Startup   traffic `json:"startup"`
		Run       traffic `json:"run"`
		Teardown  traffic `json:"teardown"`
		Batches   int     `json:"batches"`
		Batched   int     `json:"batched_messages"`
		Acks      int     `json:"output_acks"`
		AckFrames int     `json:"output_ack_messages"`
	} `json:"tree"`
}

// TestSimulatedTreeOutput: 64 simulated daemons in a tree of fanout 4 (each
// child of the launcher relays 15 daemons), a rank per node printing 200
// lines as fast as it can. Output and events travel in batches where they
// queue up at a relay: the launcher reads far fewer frames than the nodes
// send messages. Every line arrives whole, in each rank's order. The
// launcher's acknowledgements of that output go down combined where they
// queue up (the acknowledgements of a batch's nodes as one frame to the
// launcher's child, which passes each on towards its node): every node is
// acknowledged, in never more frames than acknowledgements. How many
// combine is the machine's timing (35% to 85% as many frames in the runs
// seen): the combining itself is asserted by remote's TestAckQueuesCombine
// and TestOutFlowAcksByHop.
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

	tr := readTreeReportAs[runReport](t, report).Tree
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
	t.Logf("%d acknowledgements of output in %d frames", tr.Acks, tr.AckFrames)
	if tr.Acks < nodes || tr.AckFrames < 1 || tr.AckFrames > tr.Acks {
		t.Errorf("%d acknowledgements in %d frames: want at least %d, in at most as many frames", tr.Acks,
			tr.AckFrames, nodes)
	}
}

// TestSimulatedTreeLoneLine: batching holds nothing back. In a chain of 4
// simulated nodes (fanout 1: sim004's output is relayed by sim003, sim002
// and sim001), the rank on sim004 prints one line and waits until the test
// has seen it: the line comes through on its own, not with later output
// nor at the job's end.
func TestSimulatedTreeLoneLine(t *testing.T) {
	hostfile, env, agent := simCluster(t, 4)
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	script := writeScript(t, dir, "prompt.sh", fmt.Sprintf(
		"[ \"$PMIX_RANK\" = 3 ] && echo \"rank 3: ready?\"\nwhile [ ! -e %s ]; do sleep 0.05; done\necho \"rank $PMIX_RANK done\"\n", gate))
	p := startPrun(t, opts{args: append(agent, "--hostfile", hostfile, "--launch-fanout", "1", "-n", "4", script), env: env})
	seen := p.stdout.waitFor(func(s string) bool { return strings.Contains(s, "rank 3: ready?\n") }, 30*time.Second)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := p.wait()
	if !seen {
		t.Fatalf("the lone line of the rank on sim004 did not come while the rank waited\n%s", r)
	}
	expectCode(t, r, 0)
	if n := strings.Count(r.stdout, " done\n"); n != 4 {
		t.Errorf("%d ranks done, want 4\n%s", n, r)
	}
}
