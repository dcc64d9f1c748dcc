package e2e

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// MPICH programs speak PMI-1 on PMI_FD; prun gives them that with no flag.

func mpich(t *testing.T, src string) (dir, prog string) {
	t.Helper()
	return built(t, ctest.MPICH, src)
}

// mpichHere is mpich for a test that runs the program on this node only:
// it also keeps test clusters from changing the node's network interfaces
// while the test runs (cluster.Quiet).
func mpichHere(t *testing.T, src string) (dir, prog string) {
	t.Helper()
	cluster.Quiet(t)
	return mpich(t, src)
}

func TestMPICHRing(t *testing.T) {
	t.Parallel()
	dir, ring := mpichHere(t, "ring.c")
	for _, n := range []int{4, 1} {
		r := run(t, opts{args: []string{"-n", fmt.Sprint(n), ring}, dir: dir})
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("ring: %d ranks, 10 laps, sum ok\n", n))
	}
}

func TestMPICHMPMD(t *testing.T) {
	t.Parallel()
	dir, mpmd := mpichHere(t, "mpmd.c")
	r := run(t, opts{args: []string{"-n", "2", mpmd, "0,0,1,1,1", ":", "-n", "3", mpmd, "0,0,1,1,1"}, dir: dir})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	want := "mpmd: rank 0 appnum 0\nmpmd: rank 1 appnum 0\nmpmd: rank 2 appnum 1\nmpmd: rank 3 appnum 1\nmpmd: rank 4 appnum 1"
	if strings.Join(got, "\n") != want {
		t.Errorf("stdout = %q\n%s", got, r)
	}
}

func TestMPICHAbortAndExit(t *testing.T) {
	dir, abort := mpichHere(t, "abort.c")
	r, d := abortLatency(t, dir, []string{"-n", "4", abort}, "abort: rank 1 aborting with 17")
	expectCode(t, r, 17)
	expectContains(t, "stderr", r.stderr, "rank 1 ("+abort+")")
	expectContains(t, "stderr", r.stderr, "called abort with status 17")
	if d > time.Second {
		t.Errorf("prun exited %v after MPI_Abort, want within 1 s\n%s", d, r)
	}

	dir, exitcode := mpichHere(t, "exitcode.c")
	r = run(t, opts{args: []string{"-n", "4", exitcode, "2", "3"}, dir: dir})
	expectCode(t, r, 3)
	expectContains(t, "stderr", r.stderr, "rank 2")
	expectContains(t, "stderr", r.stderr, "exited with status 3")
	expectFaster(t, r, 10*time.Second)
}

// The same with MPICH's own PMI-1 and PMI-2 clients (ch3 builds). PMI-2's
// abort command carries no status and the client exits 255 at once: prun
// hears the abort before the exit and takes MPI_Abort's code from its
// message.
func TestMPICHCh3AbortAndExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []ctest.Toolchain{ctest.MPICHCh3, ctest.MPICHCh3PMI2} {
		t.Run(tc.String(), func(t *testing.T) {
			cluster.Quiet(t)
			dir, abort := built(t, tc, "abort.c")
			for i := 0; i < 3; i++ { // the abort and the exit race in each run
				r, d := abortLatency(t, dir, []string{"-n", "4", abort}, "abort: rank 1 aborting with 17")
				expectCode(t, r, 17)
				expectContains(t, "stderr", r.stderr, "rank 1 (./abort)")
				expectContains(t, "stderr", r.stderr, "called abort with status 17")
				if d > time.Second {
					t.Errorf("prun exited %v after MPI_Abort, want within 1 s\n%s", d, r)
				}
			}
			dir, exitcode := built(t, tc, "exitcode.c")
			r := run(t, opts{args: []string{"-n", "4", exitcode, "2", "3"}, dir: dir})
			expectCode(t, r, 3)
			expectContains(t, "stderr", r.stderr, "rank 2 (./exitcode)")
			expectContains(t, "stderr", r.stderr, "exited with status 3")
		})
	}
}

// Both MPI implementations in one MPMD job would need one MPI library; but
// each alone must run under plain prun, in the same session of tests.
func TestBothMPIsWithoutFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tc   ctest.Toolchain
	}{{"openmpi", ctest.OpenMPI}, {"mpich", ctest.MPICH}} {
		if tc.tc == ctest.MPICH {
			cluster.Quiet(t)
		}
		bin := ctest.Build(t, tc.tc, "hello.c")
		r := run(t, opts{args: []string{"-n", "3", "./" + filepath.Base(bin)}, dir: filepath.Dir(bin)})
		expectCode(t, r, 0)
		for i := 0; i < 3; i++ {
			expectContains(t, tc.name+" stdout", r.stdout, fmt.Sprintf("hello from rank %d of 3", i))
		}
	}
}

func TestPMI1Wire(t *testing.T) {
	t.Parallel()
	bin := ctest.Build(t, ctest.Plain, "pmi1kvs.c")
	dir, prog := filepath.Dir(bin), "./"+filepath.Base(bin)
	for _, pmi := range []string{"auto", "pmi1"} {
		r := run(t, opts{args: []string{"--pmi", pmi, "-n", "4", prog, "100", "3"}, dir: dir})
		expectCode(t, r, 0)
		for i := 0; i < 4; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("pmi1kvs: rank %d ok\n", i))
		}
		expectContains(t, "stdout", r.stdout, "pmi1kvs: fence 100 keys/rank x 4 ranks:")
	}
	// Hydra's -usize sets the universe size PMI_Get_universe_size answers.
	r0 := run(t, opts{args: []string{"-usize", "37", "-n", "2", prog, "1", "1"}, dir: dir, env: []string{"PMI1KVS_WANT_UNIVERSE=37"}})
	expectCode(t, r0, 0)
	// -usize INFINITE: -1, as Hydra answers (MPICH then sets no MPI_UNIVERSE_SIZE).
	r0 = run(t, opts{args: []string{"-usize", "INFINITE", "-n", "2", prog, "1", "1"}, dir: dir, env: []string{"PMI1KVS_WANT_UNIVERSE=-1"}})
	expectCode(t, r0, 0)
	// --pmi pmix gives no PMI socket: the client says so and fails.
	r := run(t, opts{args: []string{"--pmi", "pmix", "-n", "1", prog}, dir: dir})
	expectCode(t, r, 1)
	expectContains(t, "stderr", r.stderr, "PMI_FD, PMI_RANK and PMI_SIZE must be set")
}

// A rank that speaks garbage on PMI_FD gets an error reply, prun names it on
// stderr, and nothing hangs or crashes.
func TestPMIProtocolErrorNamesRank(t *testing.T) {
	t.Parallel()
	script := writeScript(t, t.TempDir(), "bad.sh", `if [ "$PRUN_RANK" = 1 ]; then
  printf 'cmd=put key=a value=b\nhello\n' >&3
  head -c 300 <&3 >/dev/null &
  sleep 0.3
fi
exit 0
`)
	r := run(t, opts{args: []string{"-n", "2", script}})
	expectCode(t, r, 0)
	expectContains(t, "stderr", r.stderr, "rank 1 on ")
	expectContains(t, "stderr", r.stderr, "PMI protocol error: put before init")
	expectFaster(t, r, 5*time.Second)
}

// PMI-2 on the raw wire: every command a PMI-2 client uses, and --pmi
// restricting the versions offered.
func TestPMI2Wire(t *testing.T) {
	t.Parallel()
	bin := ctest.Build(t, ctest.Plain, "pmi2kvs.c")
	dir, prog := filepath.Dir(bin), "./"+filepath.Base(bin)
	// Also through -pmi-port: the client connects to PMI_PORT and names
	// itself pmiid=PMI_ID in its fullinit, as MPICH's does.
	for _, args := range [][]string{{"--pmi", "auto"}, {"--pmi", "pmi2"}, {"-pmi-port"}, {"-pmi-port", "--pmi", "pmi2"}} {
		r := run(t, opts{args: append(args, "-n", "3", prog), dir: dir})
		expectCode(t, r, 0)
		for i := 0; i < 3; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("pmi2kvs: rank %d ok\n", i))
		}
	}
	r := run(t, opts{args: []string{"--pmi", "pmi1", "-n", "1", prog}, dir: dir})
	expectCode(t, r, 1)
	expectContains(t, "stderr", r.stderr, `PMI protocol error: PMI version "2" not offered`)
}

// Hydra's -pmi-port: MPICH ranks reach the PMI service at PMI_PORT and name
// themselves with PMI_ID; no socket is inherited. A ring (every rank's
// business card through the KVS), an MPMD job, an abort; a connection that
// does not name its rank is a one-line protocol error, the job goes on.
func TestMPICHPMIPort(t *testing.T) {
	t.Parallel()
	dir, ring := mpichHere(t, "ring.c")
	r := run(t, opts{args: []string{"-pmi-port", "-n", "4", ring}, dir: dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "ring: 4 ranks, 10 laps, sum ok\n")

	// MPICH's own PMI-2 client (a ch3 build) at the port: a ring, and a
	// spawn whose children reach the port as well.
	for _, src := range []string{"ring.c", "spawn.c"} {
		bin := ctest.Build(t, ctest.MPICHCh3PMI2, src)
		r := run(t, opts{args: []string{"-pmi-port", "--tag-output", "-n", "2", "./" + filepath.Base(bin), "2"}, dir: filepath.Dir(bin)})
		if src == "ring.c" {
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "ring: 2 ranks, 10 laps, sum ok\n")
		} else {
			expectSpawned(t, r)
		}
	}

	// A rank started again (--max-restarts) connects to the port anew:
	// the first incarnation claimed rank 0 and failed after MPI_Finalize.
	_, hello := mpichHere(t, "hello.c")
	_, exitcode := mpichHere(t, "exitcode.c")
	once := filepath.Join(t.TempDir(), "once")
	r = run(t, opts{args: []string{"-pmi-port", "--max-restarts", "1", "-n", "1", "sh", "-c",
		`[ -e ` + once + ` ] && exec ` + hello + `; touch ` + once + `; exec ` + exitcode + ` 0 3`}, dir: dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "exitcode: rank 0 exiting with 3\n")
	expectContains(t, "stdout", r.stdout, "hello from rank 0 of 1")
	expectContains(t, "stderr", r.stderr, "starting it again (1 of 1)")

	_, mpmd := mpichHere(t, "mpmd.c")
	r = run(t, opts{args: []string{"-pmi-port", "-n", "1", mpmd, "0,1,1", ":", "-n", "2", mpmd, "0,1,1"}, dir: dir})
	expectCode(t, r, 0)
	if got := len(lines(r.stdout)); got != 3 {
		t.Errorf("MPMD over -pmi-port: %d lines\n%s", got, r)
	}

	_, abort := mpichHere(t, "abort.c")
	r = run(t, opts{args: []string{"-pmi-port", "-n", "4", abort}, dir: dir})
	expectCode(t, r, 17)
	expectContains(t, "stderr", r.stderr, "called abort with status 17")

	r = run(t, opts{args: []string{"-pmi-port", "-n", "1", "sh", "-c",
		`env | grep -c -E '^PMI_(FD|RANK|SIZE)='; echo "$PMI_ID"; case "$PMI_PORT" in 127.0.0.1:*) echo port;; esac`}})
	expectCode(t, r, 0)
	if r.stdout != "0\n0\nport\n" {
		t.Errorf("environment: %q, want no PMI_FD/PMI_RANK/PMI_SIZE, PMI_ID 0 and a local PMI_PORT", r.stdout)
	}
	// The rank waits for the service to hang up, so that the error is
	// reported before the job ends (a rank gone at once may take its
	// connection with it unread).
	r = run(t, opts{args: []string{"-pmi-port", "-n", "1", "bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/${PMI_PORT##*:}; echo hello >&3; cat <&3`}})
	expectCode(t, r, 0)
	if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], `want cmd=initack pmiid=RANK first, got "hello"`) {
		t.Errorf("stderr %q, want one protocol error line", r.stderr)
	}
	// A first line without end is refused at the buffer's size, not gathered.
	r = run(t, opts{args: []string{"-pmi-port", "-n", "1", "bash", "-c",
		`exec 3<>/dev/tcp/127.0.0.1/${PMI_PORT##*:}; { head -c 100000 /dev/zero | tr '\0' a >&3; } 2>/dev/null; cat <&3 2>/dev/null; true`}})
	expectCode(t, r, 0)
	if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], "PMI port connection from 127.0.0.1:") ||
		!strings.Contains(ls[0], "a first line longer than 4096 bytes") {
		t.Errorf("stderr %q, want one protocol error line", r.stderr)
	}
}
