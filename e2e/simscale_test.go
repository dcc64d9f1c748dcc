package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/ctl"
	"prun/internal/ctest"
)

// TestSimulatedTree256 runs 256 real daemons on this machine (simulated
// nodes, testdata/simrsh.sh) in the default tree (fanout 32: 32 children of
// the launcher, depth 2) and a job of one rank per node that fences twice
// with 1 KiB per rank. Starting 256 daemons at once loads a 2-core machine
// for seconds: the launch must ride that out (no daemon may give up on a
// starved parent), and the launcher's counters must not grow with the
// nodes: per fence one message in and one out per child of its own, one
// plan per child, one combined closing answer per child, and at most one
// start-up message per child (the hellos combine along the tree too).
func TestSimulatedTree256(t *testing.T) {
	const nodes, children = 256, 32
	fence := ctest.Build(t, ctest.PMIx, "fence.c")
	hostfile, env, agent := simCluster(t, nodes)
	report := filepath.Join(t.TempDir(), "report.json")
	args := append(agent, "--hostfile", hostfile, "--report", report,
		"-n", fmt.Sprint(nodes), fence, "data", "1024", "2")
	r := run(t, opts{args: args, env: env, timeout: 2 * time.Minute})
	expectCode(t, r, 0)
	if got := strings.Count(r.stdout, " ok\n"); got != nodes {
		t.Errorf("%d ranks ok, want %d\n%s", got, nodes, r)
	}
	rep := readTreeReport(t, report)
	tr := rep.Tree
	if tr.Daemons != nodes || tr.Children != children || tr.Depth != 2 {
		t.Fatalf("tree: %d daemons, %d launcher children, depth %d; want %d, %d, 2", tr.Daemons, tr.Children, tr.Depth,
			nodes, children)
	}
	checkCollCounters(t, rep, 2)
	if tr.MaxIn != children || tr.MaxOut != children {
		t.Errorf("a fence of every node cost the launcher %d messages in, %d out; want %d each (its children)",
			tr.MaxIn, tr.MaxOut, children)
	}
	if tr.Startup.MsgsIn > children || tr.Launch.MsgsOut != children || tr.Teardown.MsgsIn != children ||
		tr.Teardown.MsgsOut != children {
		t.Errorf("startup %d messages in, plans %d out, teardown %d in and %d out; want at most %d, then %d, %d, %d",
			tr.Startup.MsgsIn, tr.Launch.MsgsOut, tr.Teardown.MsgsIn, tr.Teardown.MsgsOut, children, children, children, children)
	}
	if rss := rep.Launcher.MaxRSSKiB; rss > 64<<10 {
		t.Errorf("the launcher's peak RSS was %d KiB, want at most 64 MiB", rss)
	}
	t.Logf("took %v; launcher peak RSS %d KiB", r.dur, rep.Launcher.MaxRSSKiB)

	// A launcher that does not run for longer than a small tree's daemons
	// wait (ctl.DeadAfter, 5 s), as a host busy starting a thousand
	// processes starved it, but within this tree's silence limit
	// (ctl.Silence(256), 9 s): the daemons wait for it, the job goes on.
	// (kill -STOP starves it for sure, and for a known time.)
	script := writeScript(t, t.TempDir(), "up.sh", "#!/bin/sh\necho up\nsleep 8\n")
	p := startPrun(t, opts{args: append(agent, "--hostfile", hostfile, "-n", fmt.Sprint(nodes), script), env: env,
		timeout: 2 * time.Minute})
	if !p.stdout.waitFor(func(s string) bool { return strings.Count(s, "up\n") == nodes }, time.Minute) {
		t.Fatalf("not every rank started\n%s", p.wait())
	}
	p.signal(syscall.SIGSTOP)
	time.Sleep(ctl.DeadAfter + time.Second)
	p.signal(syscall.SIGCONT)
	r = p.wait()
	expectCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("stderr %q, want nothing", r.stderr)
	}
}

// TestSimulatedFlatTree starts more children at one vertex than it opens
// sessions at once (40 with --launch-fanout 64; 32 at a time): a session's
// slot is free once it is open, so the last 8 start at once, not after the
// first 32 daemons' connect-back watch (ConnectTimeout + 10 s = 15 s), for
// which they waited before.
func TestSimulatedFlatTree(t *testing.T) {
	const nodes = 40
	hostfile, env, agent := simCluster(t, nodes)
	report := filepath.Join(t.TempDir(), "report.json")
	r := run(t, opts{args: append(agent, "--hostfile", hostfile, "--launch-fanout", "64", "--report", report,
		"-n", fmt.Sprint(nodes), "/bin/true"), env: env})
	expectCode(t, r, 0)
	if tr := readTreeReport(t, report).Tree; tr.Children != nodes || tr.Depth != 1 {
		t.Errorf("tree: %d launcher children, depth %d; want %d, 1", tr.Children, tr.Depth, nodes)
	}
	if r.dur >= 15*time.Second {
		t.Errorf("40 daemons of one vertex took %v to start and end: the last ones waited for the first ones' watch", r.dur)
	}
	t.Logf("took %v", r.dur)
}
