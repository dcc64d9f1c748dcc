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

// groupOutcomes reads groupgaps.c's "groupgaps: rank R OP: STATUS in S s"
// lines for op: each rank's status and seconds.
func groupOutcomes(stdout, op string) map[int][2]string {
	out := map[int][2]string{}
	re := regexp.MustCompile(`(?m)^groupgaps: rank (\d+) ` + op + `: (\S+) in (\d+) s$`)
	for _, m := range re.FindAllStringSubmatch(stdout, -1) {
		r, _ := strconv.Atoi(m[1])
		out[r] = [2]string{m[2], m[3]}
	}
	return out
}

// expectGroupFailed checks that every rank of n but skip ended its op with
// want within limit seconds, and that no rank's watchdog fired.
func expectGroupFailed(t *testing.T, r *result, n, skip int, op, want string, limit int) {
	t.Helper()
	got := groupOutcomes(r.stdout, op)
	for i := 0; i < n; i++ {
		if i == skip {
			continue
		}
		o, ok := got[i]
		if !ok {
			t.Errorf("rank %d: no %s outcome\n%s", i, op, r)
			continue
		}
		if o[0] != want {
			t.Errorf("rank %d's %s ended %s, want %s\n%s", i, op, o[0], want, r)
		}
		if secs, _ := strconv.Atoi(o[1]); secs > limit {
			t.Errorf("rank %d's %s ended after %d s, want at most %d\n%s", i, op, secs, limit, r)
		}
	}
	if strings.Contains(r.stderr, "timed out in") || strings.Contains(r.stdout, "passed") {
		t.Errorf("a rank's watchdog fired, or an operation without a member passed\n%s", r)
	}
}

// checkDestructTimeout checks a run of `groupgaps destruct-timeout LATE`
// by n ranks: every rank but LATE got PMIX_ERR_TIMEOUT from its destruct
// with PMIX_TIMEOUT 2 within seconds (LATE never destructs: only the
// timeout or the ranks' 60 s watchdog can end it; on one node libpmix
// counts the timeout from its last local caller, seconds after the first
// on a busy machine), and every rank got through.
func checkDestructTimeout(t *testing.T, r *result, n, late int) {
	t.Helper()
	expectCode(t, r, 0)
	expectGroupFailed(t, r, n, late, "destruct", "TIMEOUT", 10)
	for i := 0; i < n; i++ {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("groupgaps: rank %d ok\n", i))
	}
}

// TestGroupDestructTimeout: a destruct with PMIX_TIMEOUT that a member
// does not join in time fails with PMIX_ERR_TIMEOUT for the members that
// called. On one node libpmix holds the destruct (it calls the host only
// once every local member came) and prun's shim times it there; across
// nodes the destruct reaches the host on the nodes whose members came, and
// the vertices time it as they time a construct.
func TestGroupDestructTimeout(t *testing.T) {
	prog := ctest.Build(t, ctest.PMIx, "groupgaps.c")
	t.Run("one-node", func(t *testing.T) {
		checkDestructTimeout(t, run(t, opts{args: []string{"-n", "4", prog, "destruct-timeout", "3"}}), 4, 3)
	})

	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	t.Run("multi-node", func(t *testing.T) {
		// One rank a host: the late rank's node never calls the host.
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "4", prog, "destruct-timeout", "3"}})
		checkDestructTimeout(t, r, 4, 3)
		expectContains(t, "stderr", r.stderr, "prun: group dt: destruct timed out (PMIX_TIMEOUT) waiting for members on "+m.hosts[3]+"\n")
	})
	t.Run("multi-node-shared", func(t *testing.T) {
		// Two ranks a host, in a chain: the late rank's node holds its
		// other rank's destruct in libpmix, the others reach the host.
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--launch-fanout", "1", "-n", "8", prog, "destruct-timeout", "5"}})
		checkDestructTimeout(t, r, 8, 5)
		expectContains(t, "stderr", r.stderr, "prun: group dt: destruct timed out (PMIX_TIMEOUT) waiting for members on ")
	})
}

// checkQuit checks a run of `groupgaps quit[-destruct] QUIT` by n ranks:
// every other rank's op failed with PMIX_GROUP_CONSTRUCT_ABORT within
// seconds (at once, on an idle machine; not its 60 s watchdog), and prun's
// status is theirs (3), told for a rank that is not QUIT (which ended
// normally).
func checkQuit(t *testing.T, r *result, n, quit int, op string) {
	t.Helper()
	expectCode(t, r, 3)
	expectGroupFailed(t, r, n, quit, op, "GROUP-CONSTRUCT-ABORT", 10)
	if strings.Contains(r.stderr, fmt.Sprintf("rank %d (", quit)) {
		t.Errorf("prun names rank %d, which exited 0, as failed\n%s", quit, r)
	}
	t.Logf("prun said: %s", strings.TrimSpace(r.stderr))
}

// TestGroupMemberQuits: a member that ends normally (finalized, exit 0)
// without taking part in a construct or destruct fails it for the others
// instead of leaving them waiting: its end travels up the tree, and every
// vertex on the way, and the launcher, fail the group operations waiting
// for it, or started later with it.
func TestGroupMemberQuits(t *testing.T) {
	prog := ctest.Build(t, ctest.PMIx, "groupgaps.c")
	t.Run("one-node", func(t *testing.T) {
		checkQuit(t, run(t, opts{args: []string{"-n", "4", prog, "quit", "3"}}), 4, 3, "construct")
	})

	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	t.Run("multi-node-chain", func(t *testing.T) {
		// One rank a host, in a chain: rank 3 (h4, below every other)
		// ends; its parent h3 and every vertex above wait for its subtree.
		r := m.run(t, opts{args: []string{"--launch-fanout", "1", "--hostfile", m.hostfile, "--map-by", "node",
			"-n", "4", prog, "quit", "3"}})
		checkQuit(t, r, 4, 3, "construct")
	})
	t.Run("multi-node-first", func(t *testing.T) {
		// Rank 0 (h1, the relay above the others) ends.
		r := m.run(t, opts{args: []string{"--launch-fanout", "1", "--hostfile", m.hostfile, "--map-by", "node",
			"-n", "4", prog, "quit", "0"}})
		checkQuit(t, r, 4, 0, "construct")
	})
	t.Run("multi-node-beside", func(t *testing.T) {
		// Two ranks a host: rank 3 ends beside rank 2.
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "ppr:2:node", "-n", "8", prog, "quit", "3"}})
		checkQuit(t, r, 8, 3, "construct")
	})
	t.Run("multi-node-destruct", func(t *testing.T) {
		r := m.run(t, opts{args: []string{"--launch-fanout", "1", "--hostfile", m.hostfile, "--map-by", "node",
			"-n", "4", prog, "quit-destruct", "2"}})
		checkQuit(t, r, 4, 2, "destruct")
	})
}
