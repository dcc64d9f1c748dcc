package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// checkGroupTimeout checks a run of `group timeout LATE` by n ranks: every
// rank but LATE got PMIX_ERR_TIMEOUT from its construct with PMIX_TIMEOUT
// 2 s within a few seconds (not after LATE came, 6 s on); then all of them,
// LATE too, constructed the group of the same name, with one context id,
// and constructs whose timeouts did not expire left no timer behind that
// fires later (group.c's "quick", then a fence 3 s on).
func checkGroupTimeout(t *testing.T, r *result, n, late int) {
	t.Helper()
	expectCode(t, r, 0)
	re := regexp.MustCompile(`(?m)^group: rank (\d+) first construct: (\S+) in (\d+) s$`)
	got := map[int]bool{}
	for _, m := range re.FindAllStringSubmatch(r.stdout, -1) {
		rank, _ := strconv.Atoi(m[1])
		secs, _ := strconv.Atoi(m[3])
		got[rank] = true
		if m[2] != "TIMEOUT" {
			t.Errorf("rank %d's construct with a timeout ended %s, want TIMEOUT\n%s", rank, m[2], r)
		}
		if secs > 5 {
			t.Errorf("rank %d's construct with a 2 s timeout ended after %d s\n%s", rank, secs, r)
		}
	}
	for i := 0; i < n; i++ {
		if i != late && !got[i] {
			t.Errorf("rank %d: no first construct\n%s", i, r)
		}
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("group: rank %d ok\n", i))
	}
	if cids := groupCIDs(r.stdout)["late"]; len(cids) != n {
		t.Errorf("group late: context ids of %d members, want %d", len(cids), n)
	} else {
		for rank, c := range cids {
			if c != cids[0] {
				t.Errorf("group late: rank %d got context id %s, rank 0 %s", rank, c, cids[0])
			}
		}
	}
	if strings.Contains(r.stderr, "timed out in") {
		t.Errorf("a rank's watchdog fired\n%s", r)
	}
}

// TestGroupTimeout: a group construct with PMIX_TIMEOUT that a member does
// not join in time fails for the members that called, with
// PMIX_ERR_TIMEOUT, and is forgotten everywhere: a later construct of the
// same group, the late member included, succeeds. On one node libpmix
// holds such a construct itself (it calls the host only when every local
// member came); across nodes the launcher decides the timeout.
func TestGroupTimeout(t *testing.T) {
	prog := ctest.Build(t, ctest.PMIx, "group.c")
	t.Run("one-node", func(t *testing.T) {
		checkGroupTimeout(t, run(t, opts{args: []string{"-n", "4", prog, "timeout", "3"}}), 4, 3)
	})

	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	t.Run("multi-node", func(t *testing.T) {
		// One rank a host: the late rank's node never calls the host.
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "4", prog, "timeout", "3"}})
		checkGroupTimeout(t, r, 4, 3)
		// The launcher decided, and says whose members did not come.
		expectContains(t, "stderr", r.stderr, "prun: group late: construct timed out (PMIX_TIMEOUT) waiting for members on "+m.hosts[3]+"\n")
	})
	t.Run("multi-node-shared", func(t *testing.T) {
		// Two ranks a host, through a relay (fanout 1: a chain): the late
		// rank's node holds its other rank's construct in libpmix, the
		// other nodes' constructs reach the launcher.
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--launch-fanout", "1", "-n", "8", prog, "timeout", "5"}})
		checkGroupTimeout(t, r, 8, 5)
		// Rank 5 is on the third host: a relay above it names the nodes
		// of the subtree it waited for.
		expectContains(t, "stderr", r.stderr, "prun: group late: construct timed out (PMIX_TIMEOUT) waiting for members on ")
		t.Logf("prun said: %s", strings.TrimSpace(r.stderr))
	})
}
