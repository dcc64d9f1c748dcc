package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"prun/internal/ctest"
)

// built builds a test program with tc and returns its directory and "./name".
func built(t *testing.T, tc ctest.Toolchain, src string) (dir, prog string) {
	t.Helper()
	bin := ctest.Build(t, tc, src)
	return filepath.Dir(bin), "./" + filepath.Base(bin)
}

// ompi builds an Open MPI test program (built).
func ompi(t *testing.T, src string) (dir, prog string) {
	t.Helper()
	return built(t, ctest.OpenMPI, src)
}

func TestRing(t *testing.T) {
	t.Parallel()
	dir, ring := ompi(t, "ring.c")
	for _, n := range []int{4, 1} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			r := run(t, opts{args: []string{"-n", fmt.Sprint(n), ring}, dir: dir})
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("ring: %d ranks, 10 laps, sum ok\n", n))
			for i := 0; i < n; i++ {
				expectContains(t, "stdout", r.stdout, fmt.Sprintf("ring: rank %d ok\n", i))
			}
			if got := len(lines(r.stdout)); got != n+1 {
				t.Errorf("stdout has %d lines, want %d\n%s", got, n+1, r)
			}
		})
	}
}

func TestMPMD(t *testing.T) {
	t.Parallel()
	dir, mpmd := ompi(t, "mpmd.c")
	// The same job from the command line and from an application file
	// (--app, one context per line).
	appfile := filepath.Join(t.TempDir(), "apps")
	if err := os.WriteFile(appfile, []byte("# two apps\n-n 2 "+mpmd+" 0,0,1,1,1\n-n 3 "+mpmd+" '0,0,1,1,1'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-n", "2", mpmd, "0,0,1,1,1", ":", "-n", "3", mpmd, "0,0,1,1,1"},
		{"--app", appfile},
	} {
		r := run(t, opts{args: args, dir: dir})
		expectCode(t, r, 0)
		got := lines(r.stdout)
		sort.Strings(got)
		want := []string{"mpmd: rank 0 appnum 0", "mpmd: rank 1 appnum 0", "mpmd: rank 2 appnum 1",
			"mpmd: rank 3 appnum 1", "mpmd: rank 4 appnum 1"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%v: stdout lines (sorted) = %q, want %q\n%s", args, got, want, r)
		}
	}
}

func TestAllreduce(t *testing.T) {
	t.Parallel()
	dir, prog := ompi(t, "allreduce.c")
	// 8 ranks oversubscribe the machine's cores (local rank order matters).
	for _, n := range []int{4, 8} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			r := run(t, opts{args: []string{"-n", fmt.Sprint(n), prog}, dir: dir})
			expectCode(t, r, 0)
			for i := 0; i < n; i++ {
				expectContains(t, "stdout", r.stdout, fmt.Sprintf("allreduce: rank %d ok\n", i))
			}
		})
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	dir, hello := ompi(t, "hello.c")
	_, hello2 := ompi(t, "hello2.c")
	r := run(t, opts{args: []string{"-n", "4", hello, ":", "-n", "2", hello2}, dir: dir})
	expectCode(t, r, 0)
	ls := lines(r.stdout)
	if len(ls) != 6 {
		t.Errorf("stdout has %d lines, want 6\n%s", len(ls), r)
	}
	for i := 0; i < 4; i++ {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^hello from rank %d of 6 on \S+ \(app 0\)$`, i))
		if !re.MatchString(r.stdout) {
			t.Errorf("no line for hello rank %d (app 0)\n%s", i, r)
		}
	}
	for i := 4; i < 6; i++ {
		expectContains(t, "stdout", r.stdout,
			fmt.Sprintf("hello2: rank %d of 6 (app 1) says hi; world sum of ranks = 15\n", i))
	}
}

// abortLatency runs a job in which one rank prints line and then calls
// MPI_Abort, and returns the result and the time from that line to prun's
// exit: the acceptance bound is one second, whatever MPI_Init cost before.
func abortLatency(t *testing.T, dir string, args []string, line string) (*result, time.Duration) {
	t.Helper()
	p := startPrun(t, opts{args: args, dir: dir})
	p.waitOutput(60*time.Second, line)
	t0 := time.Now()
	r := p.wait()
	return r, time.Since(t0)
}

// TestAbort is not parallel: it bounds how fast an abort ends the job.
func TestAbort(t *testing.T) {
	dir, abort := ompi(t, "abort.c")
	t.Run("default", func(t *testing.T) {
		r, d := abortLatency(t, dir, []string{"-n", "4", abort}, "abort: rank 1 aborting with 17")
		expectCode(t, r, 17)
		if d > time.Second {
			t.Errorf("prun exited %v after MPI_Abort, want within 1 s\n%s", d, r)
		}
		expectContains(t, "stderr", r.stderr, "rank 1 (./abort) on ")
		expectContains(t, "stderr", r.stderr, "called abort with status 17")
	})
	t.Run("rank2code5", func(t *testing.T) {
		r, d := abortLatency(t, dir, []string{"-n", "4", abort, "2", "5"}, "abort: rank 2 aborting with 5")
		expectCode(t, r, 5)
		if d > time.Second {
			t.Errorf("prun exited %v after MPI_Abort, want within 1 s\n%s", d, r)
		}
		expectContains(t, "stderr", r.stderr, "called abort with status 5")
		expectContains(t, "stderr", r.stderr, "rank 2 (./abort)")
	})
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	dir, prog := ompi(t, "exitcode.c")
	r := run(t, opts{args: []string{"-n", "4", prog, "2", "3"}, dir: dir})
	expectCode(t, r, 3)
	expectFaster(t, r, 10*time.Second)
	expectContains(t, "stderr", r.stderr, "rank 2 ")
	expectContains(t, "stderr", r.stderr, "status 3")
	expectContains(t, "stderr", r.stderr, "killing the other 3 ranks")
	if n := strings.Count(r.stderr, "prun: "); n != 1 {
		t.Errorf("prun printed %d messages, want 1 (later deaths are consequences)\n%s", n, r)
	}
}

func TestSignalDeath(t *testing.T) {
	t.Parallel()
	script := writeScript(t, t.TempDir(), "segv.sh",
		`if [ "$PRUN_RANK" = 1 ]; then kill -SEGV $$; fi
exec sleep 30
`)
	r := run(t, opts{args: []string{"-n", "3", script}})
	expectCode(t, r, 128+11)
	expectFaster(t, r, 10*time.Second)
	expectContains(t, "stderr", r.stderr, "SIGSEGV")
	expectContains(t, "stderr", r.stderr, "rank 1 ")
	expectContains(t, "stderr", r.stderr, "killed by signal 11")
}

// --mca reaches Open MPI, and Open MPI's help messages (sent with PMIx_Log)
// reach the user, each topic once: with only the "self" BTL two ranks cannot
// talk, and MPI_Init says so.
func TestOpenMPIMCAAndHelp(t *testing.T) {
	t.Parallel()
	dir, ring := ompi(t, "ring.c")
	r := run(t, opts{args: []string{"--mca", "btl", "self", "-n", "2", ring}, dir: dir})
	expectCode(t, r, 1)
	const help = "At least one pair of MPI processes are unable to reach each other"
	if n := strings.Count(r.stderr, help); n != 1 {
		t.Errorf("the help message shows %d times, want once\n%s", n, r)
	}
	expectContains(t, "stderr", r.stderr, "BTLs attempted: self\n")
	expectContains(t, "stderr", r.stderr, "called abort with status 1\n")

	r = run(t, opts{args: []string{"-mca", "btl", "self,vader", "--mca", "pml", "ob1", "-n", "2", ring}, dir: dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "ring: 2 ranks, 10 laps, sum ok\n")
}

// mpirun's -tune: a file of -x and --mca options that every process gets.
// An MCA parameter from it reaches Open MPI (a pml that does not exist
// stops MPI_Init), a variable reaches the process.
func TestTuneFile(t *testing.T) {
	t.Parallel()
	dir, hello := ompi(t, "hello.c")
	tune := filepath.Join(t.TempDir(), "profile.tune")
	os.WriteFile(tune, []byte("--mca pml ob1 -x TUNED=yes\n"), 0o644)
	r := run(t, opts{args: []string{"-tune", tune, "-n", "2", hello}, dir: dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, " of 2 ")
	r = run(t, opts{args: []string{"-tune", tune, "-n", "1", "sh", "-c", `echo "$TUNED $OMPI_MCA_pml"`}})
	expectCode(t, r, 0)
	if r.stdout != "yes ob1\n" {
		t.Errorf("stdout %q, want the tune file's variable and parameter", r.stdout)
	}
	os.WriteFile(tune, []byte("--mca pml no_such_pml\n"), 0o644)
	r = run(t, opts{args: []string{"-tune", tune, "-n", "1", hello}, dir: dir})
	if r.code == 0 {
		t.Errorf("a tune file naming a pml that does not exist: the job succeeded\n%s", r)
	}
	expectContains(t, "stderr", r.stderr, "no_such_pml")
}
