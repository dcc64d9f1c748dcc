package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// Open MPI's MPI_Comm_spawn goes through prun's PMIx spawn and connect
// upcalls: 2 parents + 2 children merge and allreduce to 4.
func TestSpawnOpenMPI(t *testing.T) {
	t.Parallel()
	dir, prog := ompi(t, "spawn.c")
	expectSpawned(t, run(t, opts{args: []string{"--tag-output", "-n", "2", prog, "2"}, dir: dir}))
}

// MPICH's MPI_Comm_spawn goes through PMI-1's mcmd=spawn (or PMI-2's spawn)
// with the parents' port as a preput key; the children, told that they were
// spawned (PMI_SPAWNED, or spawner-jobid at PMI-2's fullinit), connect
// back. Built with ch3: Debian's MPICH cannot spawn (testdata/mpich-ch3.sh).
func TestSpawnMPICH(t *testing.T) {
	t.Parallel()
	eachMPI(t, "spawn.c", []ctest.Toolchain{ctest.MPICHCh3, ctest.MPICHCh3PMI2}, func(t *testing.T, dir string) {
		expectSpawned(t, run(t, opts{args: []string{"--tag-output", "-n", "2", "./spawn", "2"}, dir: dir}))
	})
}

// allMPIs are the MPI builds whose dynamic processes work here: Open MPI
// and MPICH built with ch3, with a PMI-1 and with a PMI-2 client.
var allMPIs = []ctest.Toolchain{ctest.OpenMPI, ctest.MPICHCh3, ctest.MPICHCh3PMI2}

// eachMPI runs f as a parallel subtest per toolchain, in the directory of
// src built with it; MPICH's runs keep test clusters away (cluster.Quiet).
func eachMPI(t *testing.T, src string, tcs []ctest.Toolchain, f func(t *testing.T, dir string)) {
	for _, tc := range tcs {
		t.Run(tc.String(), func(t *testing.T) {
			t.Parallel()
			if tc != ctest.OpenMPI {
				cluster.Quiet(t)
			}
			f(t, filepath.Dir(ctest.Build(t, tc, src)))
		})
	}
}

// A spawn that asks for a host outside the allocation is refused with one
// line naming the rank and the host. Open MPI and MPICH's PMI-1 client see
// the refusal and abort; MPICH's PMI-2 client cannot (it ignores the
// response's rc), so prun ends the job rather than leave it waiting.
func TestSpawnRefused(t *testing.T) {
	t.Parallel()
	eachMPI(t, "spawn.c", allMPIs, func(t *testing.T, dir string) {
		r := run(t, opts{args: []string{"-n", "1", "./spawn", "1", "nosuch"}, dir: dir, timeout: 20 * time.Second})
		if r.code == 0 {
			t.Fatalf("a refused spawn exited 0\n%s", r)
		}
		expectContains(t, "stderr", r.stderr, "prun: spawn of ./spawn by rank 0 (./spawn) on ")
		expectContains(t, "stderr", r.stderr, " refused: app 1: host nosuch is not in the allocation\n")
		if strings.Contains(r.stdout, "child") {
			t.Errorf("a child ran\n%s", r)
		}
		if r.dur > 10*time.Second {
			t.Errorf("took %v to end", r.dur)
		}
	})
}

// MPI_Comm_spawn_multiple with a "host" per app; here both are this node,
// by its name and as localhost (which the allocation knows by the name).
func TestSpawnMultiple(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	eachMPI(t, "spawnmulti.c", allMPIs, func(t *testing.T, dir string) {
		r := run(t, opts{args: []string{"-n", "2", "./spawnmulti", host, "localhost"}, dir: dir})
		expectCode(t, r, 0)
		for _, want := range []string{"parent 0", "parent 1", "child-a 0", "child-b 1", "child-b 2"} {
			expectContains(t, "stdout", r.stdout, "spawnmulti: "+want+": merged sum 5 on "+host+"\n")
		}
	})
}

// expectSpawned checks a tagged run of spawn.c with 2 parents and 2 children.
func expectSpawned(t *testing.T, r *result) {
	t.Helper()
	expectCode(t, r, 0)
	got := lines(r.stdout)
	if len(got) != 4 {
		t.Fatalf("want 4 lines (2 parents, 2 children)\n%s", r)
	}
	parent := regexp.MustCompile(`^\[0,[01]\]<stdout>:spawn: parent [01] of 2: merged sum 4 `)
	child := regexp.MustCompile(`^\[1\.0,[01]\]<stdout>:spawn: child [01] of 2: merged sum 4 `)
	var parents, children int
	for _, l := range got {
		switch {
		case parent.MatchString(l):
			parents++
		case child.MatchString(l):
			children++
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	if parents != 2 || children != 2 {
		t.Errorf("parents=%d children=%d\n%s", parents, children, r)
	}
}

// MPI_Comm_accept/MPI_Comm_connect through a published name, rank 0
// accepting each other rank in turn. Open MPI publishes each side's half of
// every connection under the port's keys, to be read once
// (PMIX_PERSIST_FIRST_READ): the second connection needs the first's gone.
// MPICH publishes the port with PMI-1's publish_name or PMI-2's
// name-publish and connects over its own sockets.
func TestConnectAccept(t *testing.T) {
	t.Parallel()
	eachMPI(t, "connect.c", allMPIs, func(t *testing.T, dir string) {
		r := run(t, opts{args: []string{"-n", "4", "./connect"}, dir: dir})
		expectCode(t, r, 0)
		for i := 1; i < 4; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("connect: server got %d\n", i))
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("connect: client %d got %d\n", i, i*10))
		}
	})
}

// PMI-1 spawn on the wire (MPICH's mcmd=spawn): preput keys reach the new
// job's KVS, and prun ends when both jobs have.
func TestSpawnPMI1(t *testing.T) {
	t.Parallel()
	bin := ctest.Build(t, ctest.Plain, "pmi1kvs.c")
	r := run(t, opts{args: []string{"-n", "2", "./" + filepath.Base(bin), "spawn", "3"}, dir: filepath.Dir(bin)})
	expectCode(t, r, 0)
	for _, want := range []string{"parent 0 spawned ok", "parent 1 spawned ok", "child 0 of 3 ok", "child 1 of 3 ok", "child 2 of 3 ok"} {
		expectContains(t, "stdout", r.stdout, want)
	}
}

// A spawned job's failure is the whole run's: its status, its name.
func TestSpawnedChildFailure(t *testing.T) {
	t.Parallel()
	bin := ctest.Build(t, ctest.Plain, "pmi1kvs.c")
	prog := "./" + filepath.Base(bin)
	r := run(t, opts{args: []string{"-n", "1", prog, "spawn", "2"}, dir: filepath.Dir(bin),
		env: []string{"PMI1KVS_CHILD_EXIT=5"}})
	expectCode(t, r, 5)
	expectContains(t, "stderr", r.stderr, "rank 1 of spawned job 1 ("+prog+")")
	expectContains(t, "stderr", r.stderr, "exited with status 5")

	// A spawn the launcher refuses (no processes) fails the parent's call.
	r = run(t, opts{args: []string{"-n", "1", prog, "spawn", "0"}, dir: filepath.Dir(bin)})
	expectCode(t, r, 1)
	expectContains(t, "stderr", r.stderr, "PMI protocol error: spawn of 0 processes")
}

// mpirun's -report-child-jobs-separately: with --enable-recovery, the
// children's failures are told but the exit status is the primary job's;
// without it the first failure's, and without recovery a failing child
// ends the run with its status.
func TestReportChildJobsSeparately(t *testing.T) {
	t.Parallel()
	dir, prog := ompi(t, "spawn.c")
	env := []string{"SPAWN_CHILD_EXIT=5"}
	for _, c := range []struct {
		flags []string
		code  int
	}{
		{[]string{"--enable-recovery"}, 5},
		{[]string{"--enable-recovery", "-report-child-jobs-separately"}, 0},
		{nil, 5},
	} {
		r := run(t, opts{args: append(append(c.flags, "-n", "2"), prog, "2"), env: env, dir: dir, timeout: 30 * time.Second})
		expectCode(t, r, c.code)
		expectContains(t, "stderr", r.stderr, "of spawned job 1 ("+prog+") on ")
		expectContains(t, "stderr", r.stderr, "exited with status 5")
	}
}
