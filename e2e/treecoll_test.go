package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// treeReport is the part of --report these tests read.
type treeReport struct {
	Tree *struct {
		Daemons     int `json:"daemons"`
		Children    int `json:"launcher_children"`
		Depth       int `json:"depth"`
		Collectives int `json:"collectives"`
		CollTraffic struct {
			MsgsIn  int `json:"messages_in"`
			MsgsOut int `json:"messages_out"`
		} `json:"collective_traffic"`
		MaxIn    int     `json:"max_collective_messages_in"`
		MaxOut   int     `json:"max_collective_messages_out"`
		Failed   int     `json:"collectives_failed"`
		Startup  traffic `json:"startup"`
		Launch   traffic `json:"launch"`
		Teardown traffic `json:"teardown"`
	} `json:"tree"`
	Launcher *struct {
		MaxRSSKiB int64 `json:"max_rss_kib"`
	} `json:"launcher"`
}

type traffic struct {
	MsgsIn  int `json:"messages_in"`
	MsgsOut int `json:"messages_out"`
}

func readTreeReport(t *testing.T, path string) treeReport {
	return readTreeReportAs[treeReport](t, path)
}

// readTreeReportAs reads the --report JSON at path as a T (the part a test
// reads); the test ends if there is none, or it has no tree counters.
func readTreeReportAs[T any](t *testing.T, path string) T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	var rep T
	var tree struct {
		Tree json.RawMessage `json:"tree"`
	}
	if err := errors.Join(json.Unmarshal(b, &rep), json.Unmarshal(b, &tree)); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	if len(tree.Tree) == 0 || string(tree.Tree) == "null" {
		t.Fatalf("the report has no tree counters:\n%s", b)
	}
	return rep
}

// checkCollCounters asserts what combining along the tree promises: each
// collective costs the launcher at most one message in and one out per
// child of its own, whatever the number of nodes.
func checkCollCounters(t *testing.T, rep treeReport, minColls int) {
	t.Helper()
	tr := rep.Tree
	t.Logf("tree: %d daemons, %d launcher children, depth %d; %d collectives, %d in / %d out (max %d/%d per collective); startup %d/%d, teardown %d/%d",
		tr.Daemons, tr.Children, tr.Depth, tr.Collectives, tr.CollTraffic.MsgsIn, tr.CollTraffic.MsgsOut, tr.MaxIn, tr.MaxOut,
		tr.Startup.MsgsIn, tr.Startup.MsgsOut, tr.Teardown.MsgsIn, tr.Teardown.MsgsOut)
	if tr.Collectives < minColls {
		t.Errorf("%d collectives reached the launcher, want at least %d", tr.Collectives, minColls)
	}
	if tr.MaxIn > tr.Children || tr.MaxOut > tr.Children {
		t.Errorf("a collective cost the launcher %d messages in and %d out; it has %d children", tr.MaxIn, tr.MaxOut, tr.Children)
	}
	if tr.CollTraffic.MsgsIn > tr.Collectives*tr.Children || tr.CollTraffic.MsgsOut != tr.CollTraffic.MsgsIn {
		t.Errorf("collectives: %d messages in, %d out, for %d collectives and %d children", tr.CollTraffic.MsgsIn,
			tr.CollTraffic.MsgsOut, tr.Collectives, tr.Children)
	}
}

// TestTreeCollectives: fences combine along the daemon tree (the launcher
// hears once per child), on a subset of the nodes too, and a node lost in
// the middle of one fails it for the others instead of leaving them
// waiting.
func TestTreeCollectives(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	fence := ctest.Build(t, ctest.PMIx, "fence.c")

	t.Run("counters", func(t *testing.T) {
		// Fanout 2: the launcher links to h1 and h2, h1 to h3 and h4.
		report := filepath.Join(t.TempDir(), "report.json")
		r := m.run(t, opts{args: []string{"--report", report, "--launch-fanout", "2", "--hostfile", m.hostfile, "-n", "8",
			fence, "data", "1024", "3"}})
		expectCode(t, r, 0)
		for i := 0; i < 8; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("fence: rank %d ok\n", i))
		}
		rep := readTreeReport(t, report)
		if rep.Tree.Children != 2 || rep.Tree.Depth != 2 || rep.Tree.Daemons != 4 {
			t.Errorf("tree: %d children, depth %d, %d daemons; want 2, 2, 4", rep.Tree.Children, rep.Tree.Depth, rep.Tree.Daemons)
		}
		checkCollCounters(t, rep, 4)
		if rep.Tree.MaxIn != 2 {
			t.Errorf("a fence of every node cost the launcher at most %d messages in, want 2 (one per child)", rep.Tree.MaxIn)
		}
	})

	t.Run("subset", func(t *testing.T) {
		// A chain (fanout 1): h1 -> h2 -> h3 -> h4, and the ranks on h3
		// and h4 only: h1 and h2 relay a fence they take no part in.
		dir := t.TempDir()
		rf := filepath.Join(dir, "ranks")
		os.WriteFile(rf, []byte("rank 0=prun-h3 slot=0\nrank 1=prun-h4 slot=0\nrank 2=prun-h3 slot=1\nrank 3=prun-h4 slot=1\n"), 0o644)
		report := filepath.Join(dir, "report.json")
		r := m.run(t, opts{args: []string{"--report", report, "--launch-fanout", "1", "--hostfile", m.hostfile, "--rankfile", rf,
			"-n", "4", fence, "data", "100", "2"}})
		expectCode(t, r, 0)
		for i := 0; i < 4; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("fence: rank %d ok\n", i))
		}
		rep := readTreeReport(t, report)
		checkCollCounters(t, rep, 3)
		if rep.Tree.MaxIn != 1 {
			t.Errorf("max %d messages in per collective, want 1 (the chain's first link)", rep.Tree.MaxIn)
		}
	})

	t.Run("lost-node", func(t *testing.T) {
		// A chain again; rank 3 (on h4) never enters the fence, and h4's
		// daemon is killed while the others wait in it: h3 loses its child,
		// the launcher decides, and the fence fails for ranks 0-2.
		p := startPrun(t, opts{args: []string{"--launch-fanout", "1", "--hostfile", m.hostfile, "--map-by", "node",
			"-n", "4", fence, "lose", "3"}, env: m.env()})
		p.waitOutput(30*time.Second, "fence: rank 0 waiting", "fence: rank 1 waiting", "fence: rank 2 waiting")
		time.Sleep(200 * time.Millisecond) // into the fence
		killed := time.Now()
		syscall.Kill(m.daemonPid(t, "prun-h4"), syscall.SIGKILL)
		r := p.wait()
		t.Logf("prun ended %v after the kill", time.Since(killed).Round(time.Millisecond))
		if r.code == 0 || r.code == -1 {
			t.Errorf("prun exited %d, want a failure status\n%s", r.code, r)
		}
		for i := 0; i < 3; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("fence: rank %d failed: ", i))
		}
		if strings.Contains(r.stdout, "passed") {
			t.Errorf("a fence without rank 3 passed\n%s", r)
		}
		expectContains(t, "stderr", r.stderr, "lost node prun-h4")
		m.checkClean(t, 10*time.Second)
	})
}
