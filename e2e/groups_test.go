package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// groupCIDs reads group.c's "group: rank R G cid C" lines: the context id
// each rank got for each group.
func groupCIDs(stdout string) map[string]map[int]string {
	out := map[string]map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^group: rank (\d+) (\S+) cid (\d+)$`).FindAllStringSubmatch(stdout, -1) {
		var r int
		fmt.Sscan(m[1], &r)
		if out[m[2]] == nil {
			out[m[2]] = map[int]string{}
		}
		out[m[2]][r] = m[3]
	}
	return out
}

// checkGroups checks a run of `group ok` by n ranks: every rank got
// through; the members of each group (all, half-0 of the even ranks, half-1
// of the odd ones) got one context id, and the groups distinct ones.
func checkGroups(t *testing.T, r *result, n int) {
	t.Helper()
	expectCode(t, r, 0)
	for i := 0; i < n; i++ {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("group: rank %d ok\n", i))
	}
	cids := groupCIDs(r.stdout)
	seen := map[string]string{}
	for _, g := range []string{"all", "half-0", "half-1"} {
		got := cids[g]
		want := 0
		for i := 0; i < n; i++ {
			if g == "all" || g == fmt.Sprintf("half-%d", i%2) {
				want++
			}
		}
		if len(got) != want {
			t.Errorf("group %s: context ids of %d members, want %d\n%s", g, len(got), want, r)
			continue
		}
		var cid string
		for rank, c := range got {
			if g != "all" && g != fmt.Sprintf("half-%d", rank%2) {
				t.Errorf("rank %d is in group %s", rank, g)
			}
			if cid != "" && c != cid {
				t.Errorf("group %s: members got context ids %s and %s", g, cid, c)
			}
			cid = c
		}
		if other, dup := seen[cid]; dup {
			t.Errorf("groups %s and %s got the same context id %s", g, other, cid)
		}
		seen[cid] = g
	}
}

// checkInvite checks a run of `group invite` by n ranks: invite and join
// (libpmix's events, which prun routes between nodes) succeed; the last
// rank's leave reaches every other member as PMIX_GROUP_LEFT, and their
// destruct of the group no longer waits for it (openpmix/patches/0002: the
// server had no leave, and no record of a group made by invitation).
func checkInvite(t *testing.T, r *result, n int) {
	t.Helper()
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "group: rank 0 invite: SUCCESS\n")
	last := n - 1
	for i := 0; i < n; i++ {
		if i > 0 {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("group: rank %d join: SUCCESS\n", i))
		}
		if i != last {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("group: rank %d heard rank %d left inv\n", i, last))
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("group: rank %d destruct without %d: SUCCESS\n", i, last))
		}
	}
	expectContains(t, "stdout", r.stdout, fmt.Sprintf("group: rank %d leave: SUCCESS\n", last))
}

// TestGroups: PMIx groups on one node: construct and destruct, blocking
// and not, with context ids, each member's data and local context ids;
// PMIX_GROUP_NOTIFY_TERMINATION.
// checkMemberDied checks a run of `group die VICTIM` (what "construct") or
// `group die-destruct VICTIM` (what "destruct") by n ranks: every other
// rank's operation failed with PMIX_GROUP_CONSTRUCT_ABORT, none passed.
//
// prun's status is the first failed rank's: the victim's 7, or a member's
// 3 when its failure was told before the victim was reaped.
func checkMemberDied(t *testing.T, r *result, n, victim int, what string) {
	t.Helper()
	if r.code != 7 && r.code != 3 {
		t.Errorf("prun exited %d, want 7 (the victim's status) or 3 (a member's)\n%s", r.code, r)
	}
	for i := 0; i < n; i++ {
		if i != victim {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("group: rank %d %s failed: GROUP-CONSTRUCT-ABORT\n", i, what))
		}
	}
	if strings.Contains(r.stdout, "passed") {
		t.Errorf("a %s without rank %d passed\n%s", what, victim, r)
	}
}

func TestGroups(t *testing.T) {
	prog := ctest.Build(t, ctest.PMIx, "group.c")
	t.Run("construct", func(t *testing.T) {
		checkGroups(t, run(t, opts{args: []string{"-n", "4", prog, "ok"}}), 4)
	})
	t.Run("invite", func(t *testing.T) {
		checkInvite(t, run(t, opts{args: []string{"-n", "3", prog, "invite"}}), 3)
	})
	t.Run("member-dies", func(t *testing.T) {
		// A member dies beside the others: libpmix 4.2.2 holds their
		// construct on this node until every local member called, and
		// never hears that one will not (groups.c fails it).
		checkMemberDied(t, run(t, opts{args: []string{"--enable-recovery", "-n", "4", prog, "die", "3"}}), 4, 3, "construct")
	})
	t.Run("member-dies-before-destruct", func(t *testing.T) {
		checkMemberDied(t, run(t, opts{args: []string{"--enable-recovery", "-n", "4", prog, "die-destruct", "2"}}), 4, 2, "destruct")
	})
	t.Run("notify-termination", func(t *testing.T) {
		r := run(t, opts{args: []string{"--enable-recovery", "-n", "4", prog, "notify", "3"}})
		expectCode(t, r, 7)
		for i := 0; i < 3; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("group: rank %d heard rank 3 left group watch\n", i))
		}
	})
}

// TestGroupsDVM: a persistent runtime's jobs share one context id counter:
// the groups of a second submission get ids the first one's did not.
func TestGroupsDVM(t *testing.T) {
	prog := ctest.Build(t, ctest.PMIx, "group.c")
	d := startDVM(t, nil, "--host", "localhost:4")
	used := map[string]int{}
	for sub := 1; sub <= 2; sub++ {
		r := d.run(t, opts{args: []string{"-n", "4", prog, "ok"}})
		checkGroups(t, r, 4)
		t.Logf("submission %d: context ids %v", sub, groupCIDs(r.stdout))
		for g, byRank := range groupCIDs(r.stdout) {
			cid := byRank[0]
			if g != "all" {
				cid = byRank[int(g[len(g)-1]-'0')]
			}
			if prev, dup := used[cid]; dup && prev != sub {
				t.Errorf("submission %d's group %s got context id %s, which submission %d's had", sub, g, cid, prev)
			}
			used[cid] = sub
		}
	}
}

// TestGroupsMultiNode: the same across the test hosts, through the tree
// (fanout 2: h1 relays for h3 and h4), with the launcher hearing one
// message per child per collective; a member that dies before the
// construct completes fails it for the others, named, instead of a hang.
func TestGroupsMultiNode(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	prog := ctest.Build(t, ctest.PMIx, "group.c")

	t.Run("construct", func(t *testing.T) {
		report := filepath.Join(t.TempDir(), "report.json")
		r := m.run(t, opts{args: []string{"--report", report, "--launch-fanout", "2", "--hostfile", m.hostfile, "-n", "8", prog, "ok"}})
		checkGroups(t, r, 8)
		// all, half-0, half-1 constructed and destructed: 6 collectives.
		checkCollCounters(t, readTreeReport(t, report), 6)
	})

	t.Run("dvm-chain", func(t *testing.T) {
		// A persistent runtime whose daemons form a chain: h1 relays every
		// other node's contribution. Before the launcher was the root of
		// the same combination, a runtime's launcher waited for each node
		// by name and never completed a fence of more than its child.
		d := startDVM(t, m.env(), "--hostfile", m.hostfile, "--launch-fanout", "1")
		fence := ctest.Build(t, ctest.PMIx, "fence.c")
		r := d.run(t, opts{env: m.env(), args: []string{"-n", "8", fence, "data", "100", "2"}, timeout: 90 * time.Second})
		expectCode(t, r, 0)
		for i := 0; i < 8; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("fence: rank %d ok\n", i))
		}
		checkGroups(t, d.run(t, opts{env: m.env(), args: []string{"-n", "8", prog, "ok"}, timeout: 90 * time.Second}), 8)
	})

	t.Run("dvm-same-name", func(t *testing.T) {
		d := startDVM(t, m.env(), "--hostfile", m.hostfile)
		sameNameGroups(t, d, m.env(), prog, "prun-h2", "prun-h3")
	})

	t.Run("invite", func(t *testing.T) {
		checkInvite(t, m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "4", prog, "invite"}}), 4)
	})

	t.Run("member-dies", func(t *testing.T) {
		// One rank a host, in a chain: rank 3 (h4) dies while the others
		// construct a group with it; the other nodes' members reach the
		// host, which fails their construct.
		r := m.run(t, opts{args: []string{"--enable-recovery", "--launch-fanout", "1", "--hostfile", m.hostfile, "--map-by", "node",
			"-n", "4", prog, "die", "3"}})
		checkMemberDied(t, r, 4, 3, "construct")
		expectContains(t, "stderr", r.stderr, "rank 3 (")
	})

	t.Run("member-dies-beside-others", func(t *testing.T) {
		// Two ranks a host: rank 3 dies beside rank 2, whose construct
		// libpmix holds on their node (groups.c fails it there).
		r := m.run(t, opts{args: []string{"--enable-recovery", "--hostfile", m.hostfile, "--map-by", "ppr:2:node",
			"-n", "8", prog, "die", "3"}})
		checkMemberDied(t, r, 8, 3, "construct")
	})

	t.Run("member-dies-before-destruct", func(t *testing.T) {
		r := m.run(t, opts{args: []string{"--enable-recovery", "--hostfile", m.hostfile, "--map-by", "ppr:2:node",
			"-n", "8", prog, "die-destruct", "2"}})
		checkMemberDied(t, r, 8, 2, "destruct")
	})

	t.Run("notify-termination", func(t *testing.T) {
		r := m.run(t, opts{args: []string{"--enable-recovery", "--hostfile", m.hostfile, "-n", "8", prog, "notify", "5"}})
		expectCode(t, r, 7)
		for i := 0; i < 8; i++ {
			if i != 5 {
				expectContains(t, "stdout", r.stdout, fmt.Sprintf("group: rank %d heard rank 5 left group watch\n", i))
			}
		}
	})
}

// TestGroupInviteTimeout: an invitation with PMIX_TIMEOUT that an invitee
// never answers ends with PMIX_ERR_TIMEOUT after the timeout, in a client of
// the pinned library (openpmix/patches/0003: libpmix 4.2.2 armed no timer
// and held the inviter until the program's watchdog).
func TestGroupInviteTimeout(t *testing.T) {
	prog := ctest.Build(t, ctest.PinnedPMIx, "group.c")
	r := run(t, opts{args: []string{"-n", "2", prog, "invite-timeout"}})
	expectCode(t, r, 0)
	m := regexp.MustCompile(`group: rank 0 invite with timeout: TIMEOUT in (\d+) s\n`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("the invitation did not time out\n%s", r)
	}
	if s, _ := strconv.Atoi(m[1]); s < 2 || s > 10 {
		t.Errorf("the invitation timed out after %s s, want about 2\n%s", m[1], r)
	}
}
