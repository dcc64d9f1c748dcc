package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/internal/ctest"
)

// signalReport is the part of --report's tree counters about what the
// launcher sends down: signals, events and forgotten jobs.
type signalReport struct {
	Tree *signalTree `json:"tree"`
}

type signalTree struct {
	Children   int     `json:"launcher_children"`
	Depth      int     `json:"depth"`
	Signals    int     `json:"signals"`
	SignalMsgs int     `json:"signal_messages"`
	MaxSignal  int     `json:"max_signal_messages"`
	Events     int     `json:"events"`
	EventMsgs  int     `json:"event_messages"`
	MaxEvent   int     `json:"max_event_messages"`
	Forgets    int     `json:"forgets"`
	ForgetMsgs int     `json:"forget_messages"`
	MaxForget  int     `json:"max_forget_messages"`
	Run        traffic `json:"run"`
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

	tr := readSignalReport(t, report)
	if tr.Children != fanout || tr.Depth != 2 {
		t.Errorf("tree: %d launcher children, depth %d; want %d, 2", tr.Children, tr.Depth, fanout)
	}
	// SIGUSR1, then the Ctrl-C's SIGCONT and SIGINT (and SIGKILL, should
	// the grace pass first): at most 4 job-wide signals, each a frame per
	// child of the launcher. Node by node they were 64 frames each.
	if tr.Signals < 3 || tr.MaxSignal > tr.Children {
		t.Errorf("%d signals sent down, the most frames one took %d; want at least 3, at most %d (one per child)", tr.Signals,
			tr.MaxSignal, tr.Children)
	}
	if tr.SignalMsgs > 4*tr.Children {
		t.Errorf("the launcher wrote %d frames of signals for at most 4 job-wide signals; want at most %d (a frame per child each)",
			tr.SignalMsgs, 4*tr.Children)
	}
}

func readSignalReport(t *testing.T, path string) *signalTree {
	t.Helper()
	tr := readTreeReportAs[signalReport](t, path).Tree
	t.Logf("tree: %d launcher children, depth %d; %d signals sent down in %d frames (at most %d each); %d frames out in the run",
		tr.Children, tr.Depth, tr.Signals, tr.SignalMsgs, tr.MaxSignal, tr.Run.MsgsOut)
	return tr
}

// TestSimulatedTreeJobControl: PMIx job control across 64 simulated
// daemons (fanout 8). Each rank declares itself preemptible, with its own
// checkpoint signal or event: a request for one rank, which goes to its
// node alone (a frame at the launcher); rank 0's checkpoint of the whole
// job then goes down the tree as one broadcast (a frame per child of the
// launcher) and reaches every rank its own way. With "wildcard", rank 0
// declares the signal for every rank: a broadcast too.
func TestSimulatedTreeJobControl(t *testing.T) {
	const nodes, fanout = 64, 8
	hostfile, env, agent := simCluster(t, nodes)
	dir, ckpt := pmixProg(t, "ckpt.c")
	for _, mode := range []string{"own", "wildcard"} {
		t.Run(mode, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "report.json")
			args := append(agent, "--hostfile", hostfile, "--launch-fanout", fmt.Sprint(fanout), "--report", report,
				"-n", fmt.Sprint(nodes), ckpt)
			if mode == "wildcard" {
				args = append(args, "wildcard")
			}
			r := run(t, opts{args: args, env: env, dir: dir, timeout: 4 * time.Minute})
			expectCheckpoints(t, r, nodes, mode == "wildcard")
			tr := readSignalReport(t, report)
			if tr.Signals < 1 || tr.MaxSignal > tr.Children {
				t.Errorf("%d signals sent down, the most frames one took %d; want at least 1, at most %d (one per child)",
					tr.Signals, tr.MaxSignal, tr.Children)
			}
			// Node by node: 64 frames a request, 4,160 in "own".
			most := 2 * tr.Children // the declaration and the checkpoint, both of every rank
			if mode == "own" {
				most = nodes + tr.Children // a frame per rank's declaration, then the checkpoint's broadcast
			}
			if tr.SignalMsgs > most {
				t.Errorf("job control cost the launcher %d frames of signals; want at most %d", tr.SignalMsgs, most)
			}
		})
	}
}

// TestSimulatedTreeEvents: PMIx events for every node go down the tree as
// a broadcast too. 64 simulated daemons (fanout 8), a rank each of pmixctl
// events: rank 0's PMIx_Notify_event (range namespace) reaches the 63 other
// ranks through the launcher, not again rank 0's node; then the job's end
// (PMIX_EVENT_JOB_END, for every node's tools). Each costs the launcher a
// frame per link of its own; node by node they were 63 and 64 frames.
func TestSimulatedTreeEvents(t *testing.T) {
	const nodes, fanout = 64, 8
	dir, ctl := pmixProg(t, "pmixctl.c")
	hostfile, env, agent := simCluster(t, nodes)
	report := filepath.Join(t.TempDir(), "report.json")
	r := run(t, opts{args: append(agent, "--hostfile", hostfile, "--launch-fanout", fmt.Sprint(fanout),
		"--report", report, "-n", fmt.Sprint(nodes), ctl, "events"), env: env, dir: dir, timeout: 4 * time.Minute})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "pmixctl: rank 0 sent event\n")
	for rank := 1; rank < nodes; rank++ {
		if want := fmt.Sprintf("pmixctl: rank %d got event\n", rank); strings.Count(r.stdout, want) != 1 {
			t.Errorf("stdout has %q %d times, want once", want, strings.Count(r.stdout, want))
		}
	}
	tr := readSignalReport(t, report)
	t.Logf("%d events sent down in %d frames (at most %d each)", tr.Events, tr.EventMsgs, tr.MaxEvent)
	if tr.Events < 2 || tr.MaxEvent > tr.Children || tr.EventMsgs > tr.Events*tr.Children {
		t.Errorf("%d events sent down in %d frames, the most one took %d; want at least 2 (rank 0's, the job's end), "+
			"each at most %d frames (one per child)", tr.Events, tr.EventMsgs, tr.MaxEvent, tr.Children)
	}
}

// TestSimulatedTreeForget: a job that is over is dropped from every daemon
// as one broadcast down the tree. 16 simulated daemons (fanout 4), one rank
// of spawnloop spawning a child job 3 times, each child finished before the
// next: every child job's end is forgotten on all 16 nodes, a frame per
// child of the launcher (4); node by node it was 16 frames a job.
func TestSimulatedTreeForget(t *testing.T) {
	const nodes, fanout, cycles = 16, 4, 3
	bin := ctest.Build(t, ctest.PMIx, "spawnloop.c")
	hostfile, env, agent := simCluster(t, nodes)
	report := filepath.Join(t.TempDir(), "report.json")
	r := run(t, opts{args: append(agent, "--hostfile", hostfile, "--launch-fanout", fmt.Sprint(fanout),
		"--report", report, "-n", "1", bin, fmt.Sprint(cycles)), env: env, timeout: 4 * time.Minute})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, fmt.Sprintf("spawnloop: %d cycles ok\n", cycles))
	tr := readSignalReport(t, report)
	t.Logf("%d jobs forgotten in %d frames (at most %d each)", tr.Forgets, tr.ForgetMsgs, tr.MaxForget)
	if tr.Forgets < cycles || tr.MaxForget > tr.Children || tr.ForgetMsgs > tr.Forgets*tr.Children {
		t.Errorf("%d jobs forgotten in %d frames, the most one took %d; want at least %d (every child's), each at most %d "+
			"frames (one per child of the launcher)", tr.Forgets, tr.ForgetMsgs, tr.MaxForget, cycles, tr.Children)
	}
}
