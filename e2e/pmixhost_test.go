package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// Tests of issue 29's PMIx host items: spawn cycles that never hang, the
// app and node realms asked by rank, job control's checkpoint directives.

// spawnCycles is how many spawn/connect/disconnect cycles the test runs: a
// cycle takes about 5 ms on one node here, so 1,000 take seconds. Before
// the fix one in about 15 cycles left the child in PMIx_Init.
const spawnCycles = 1000

// TestSpawnCycles: a parent spawns one child, connects, disconnects and
// lets it finish, 1,000 times. Each finished child's connection must be
// torn down by libpmix's own event loop: a connection closed behind it
// (libpmix 4.2.2's PMIx_server_deregister_client closes the socket without
// removing its event) leaves a stale event on that descriptor number, and
// the next child whose connection gets the number is never read.
func TestSpawnCycles(t *testing.T) {
	t.Parallel()
	bin := ctest.Build(t, ctest.PMIx, "spawnloop.c")
	r := run(t, opts{args: []string{"-n", "1", bin, fmt.Sprint(spawnCycles)}, timeout: 5 * time.Minute})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, fmt.Sprintf("spawnloop: %d cycles ok\n", spawnCycles))
	t.Logf("%d cycles took %v", spawnCycles, r.dur)
}

// TestMaxRestartsPMIx: 4 PMIx ranks each fail 300 times right after
// PMIx_Init and start again (--max-restarts), then succeed. Every new
// incarnation must be read by the server: before the fix the old
// incarnation was deregistered, and libpmix 4.2.2 closed its connection
// behind its event loop when it had not read the EOF yet; one run in three
// left an incarnation in PMIx_Init (its watchdog: "timed out in
// PMIx_Init").
func TestMaxRestartsPMIx(t *testing.T) {
	t.Parallel()
	const restarts = 300
	dir, prog := pmixProg(t, "restartloop.c")
	counts := t.TempDir()
	r := run(t, opts{args: []string{"--max-restarts", fmt.Sprint(restarts), "-n", "4", "sh", "-c",
		fmt.Sprintf("exec %s %d %s/count.$PRUN_RANK", prog, restarts, counts)}, dir: dir, timeout: 3 * time.Minute})
	expectCode(t, r, 0)
	for i := 0; i < 4; i++ {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("restartloop: rank %d ok after %d restarts\n", i, restarts))
	}
	if strings.Contains(r.stderr, "timed out") {
		t.Errorf("an incarnation hung:\n%s", r.stderr)
	}
}

// TestJobControlCheckpoint: ranks declare themselves preemptible with a
// checkpoint signal (even ranks) or event (odd ranks); rank 0's
// PMIX_JOB_CTRL_CHECKPOINT of the job then reaches each rank its own way.
func TestJobControlCheckpoint(t *testing.T) {
	t.Parallel()
	dir, ckpt := pmixProg(t, "ckpt.c")
	r := run(t, opts{args: []string{"-n", "4", ckpt}, dir: dir})
	expectCheckpoints(t, r, 4, false)
	// Rank 0 declares the method of the whole namespace (a wildcard).
	r = run(t, opts{args: []string{"-n", "4", ckpt, "wildcard"}, dir: dir})
	expectCheckpoints(t, r, 4, true)
}

// expectCheckpoints: n ranks got their checkpoint, the even ones by signal
// and the odd ones by event, or every one by signal (wildcard).
func expectCheckpoints(t *testing.T, r *result, n int, wildcard bool) {
	t.Helper()
	expectCode(t, r, 0)
	for i := 0; i < n; i++ {
		how := "signal"
		if i%2 == 1 && !wildcard {
			how = "event"
		}
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("ckpt: rank %d got the %s\n", i, how))
	}
}

// TestPMIxHostMultiNode runs the items of this file across the test hosts.
func TestPMIxHostMultiNode(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}

	// The parent on the first host, every child on the second: the
	// children's connections are torn down by that host's daemon.
	t.Run("spawncycles", func(t *testing.T) {
		bin := ctest.Build(t, ctest.PMIx, "spawnloop.c")
		const cycles = spawnCycles
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "1", bin, fmt.Sprint(cycles), m.hosts[1]},
			timeout: 5 * time.Minute})
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("spawnloop: %d cycles ok\n", cycles))
		t.Logf("%d cycles took %v", cycles, r.dur)
	})

	// The app and node realms asked every way of the standard, for ranks
	// on every node: two apps spread over the four hosts.
	t.Run("keys", func(t *testing.T) {
		dir, keys := pmixProg(t, "keys.c")
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node",
			"-x", "KEYS_EXPECT_APPS=4,3", "-x", "KEYS_REALMS_ONLY=1", "-x", "KEYS_TIMEOUT=60",
			"-n", "4", keys, ":", "-x", "KEYS_EXPECT_APPS=4,3", "-x", "KEYS_REALMS_ONLY=1", "-x", "KEYS_TIMEOUT=60",
			"-n", "3", keys}, dir: dir})
		expectCode(t, r, 0)
		if n := strings.Count(r.stdout, " ok ("); n != 7 {
			t.Errorf("%d ok lines, want 7\n%s", n, r)
		}
	})

	// The checkpoint request goes through the launcher to every node.
	t.Run("checkpoint", func(t *testing.T) {
		dir, ckpt := pmixProg(t, "ckpt.c")
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "8", ckpt}, dir: dir})
		expectCheckpoints(t, r, 8, false)
		// A wildcard declared on the first host covers the ranks of every host.
		r = m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "8", ckpt, "wildcard"}, dir: dir})
		expectCheckpoints(t, r, 8, true)
	})
}
