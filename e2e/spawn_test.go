package e2e

import (
	"path/filepath"
	"regexp"
	"testing"

	"prun/internal/ctest"
)

// Open MPI's MPI_Comm_spawn goes through prun's PMIx spawn and connect
// upcalls: 2 parents + 2 children merge and allreduce to 4.
func TestSpawnOpenMPI(t *testing.T) {
	t.Parallel()
	dir, prog := ompi(t, "spawn.c")
	r := run(t, opts{args: []string{"--tag-output", "-n", "2", prog, "2"}, dir: dir})
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
