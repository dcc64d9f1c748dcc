package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/internal/ctest"
)

// mpirDebugger is --debugger for testdata/mpirdebugger.py, a parallel
// debugger made of gdb and a script: it starts prun through MPIR and
// reports what it found.
func mpirDebugger() string {
	return "gdb -batch -x " + filepath.Join(ctest.Root(), "testdata", "mpirdebugger.py") + " --args @mpirun@ @mpirun_args@"
}

var mpirRank = regexp.MustCompile(`(?m)^mpir: rank (\d+) host (\S+) exe (\S+) pid (\d+) (held|running)$`)

// mpirTest is what TestMPIR's subtests share: this host's name, and Open
// MPI's hello built in dir.
type mpirTest struct {
	host, dir, hello string
}

// TestMPIR: prun --debug runs the job under a debugger, which finds the
// processes in prun's MPIR_proctable at MPIR_Breakpoint, each held in
// PMIx_Init until the debugger lets prun go on (the rest of prun serving
// them meanwhile); a job that aborts stops at the breakpoint again, saying
// why; and a debugger that attaches to a running prun finds the table too.
func TestMPIR(t *testing.T) {
	host, _ := os.Hostname()
	dir, hello := ompi(t, "hello.c")
	x := &mpirTest{host: host, dir: dir, hello: hello}
	t.Run("debug", x.testDebug)
	t.Run("abort", x.testAbort)
	t.Run("spawn", x.testSpawn)
	t.Run("attach", x.testAttach)
	t.Run("restarted", x.testRestarted)
	t.Run("no-debugger", x.testNoDebugger)
}

func (x *mpirTest) testDebug(t *testing.T) {
	r := run(t, opts{args: []string{"--debug", "--debugger", mpirDebugger(), "-n", "2", x.hello}, dir: x.dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "mpir: state 1, 2 processes\n")
	ranks := mpirRank.FindAllStringSubmatch(r.stdout, -1)
	if len(ranks) != 2 {
		t.Fatalf("the debugger found %d processes, want 2\n%s", len(ranks), r)
	}
	for i, m := range ranks {
		if m[1] != strconv.Itoa(i) || m[2] != x.host || m[3] != filepath.Join(x.dir, "hello") || m[5] != "held" {
			t.Errorf("rank %d as the debugger found it: %q; want on %s, %s, held in PMIx_Init", i, m[0], x.host, filepath.Join(x.dir, "hello"))
		}
	}
	for i := 0; i < 2; i++ {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("hello from rank %d of 2", i))
	}
	expectContains(t, "stdout", r.stdout, "mpir: prun exited 0\n")
}

func (x *mpirTest) testAbort(t *testing.T) {
	dir, abort := ompi(t, "abort.c")
	r := run(t, opts{args: []string{"--debug", "--debugger", mpirDebugger(), "-n", "3", abort}, dir: dir,
		env: []string{"MPIR_TEST_ALLSTOP=1"}})
	expectContains(t, "stdout", r.stdout, "mpir: state 1, 3 processes\n")
	expectContains(t, "stdout", r.stdout, "mpir: state 2, 3 processes\nmpir: aborting: rank 1 (./abort) on "+x.host+" called abort with status 17\n")
}

func (x *mpirTest) testSpawn(t *testing.T) {
	// The spawned job's processes join the table at its end, and the
	// debugger stops at the breakpoint again, its new ranks held in
	// PMIx_Init (when they got there: a rank may still be starting);
	// the release goes to them alone (Open MPI's running parents would
	// abort on it).
	dir, spawn := ompi(t, "spawn.c")
	r := run(t, opts{args: []string{"--debug", "--debugger", mpirDebugger(), "-n", "2", spawn, "2"}, dir: dir,
		env: []string{"MPIR_TEST_ALLSTOP=1"}})
	expectContains(t, "stdout", r.stdout, "mpir: state 1, 2 processes\n")
	expectContains(t, "stdout", r.stdout, "mpir: state 1, 4 processes\n")
	ranks := mpirRank.FindAllStringSubmatch(r.stdout, -1)
	if len(ranks) != 6 {
		t.Fatalf("the debugger found %d processes at its two stops, want 2 and 4\n%s", len(ranks), r)
	}
	for i, m := range ranks[2:] {
		if m[1] != strconv.Itoa(i) || m[3] != filepath.Join(dir, "spawn") || i < 2 && m[4] != ranks[i][4] {
			t.Errorf("entry %d at the second stop: %q (first stop: %q)", i, m[0], ranks[min(i, 1)][0])
		}
	}
	if n := strings.Count(r.stdout, "merged sum 4"); n != 4 || strings.Contains(r.stdout, "mpir: state 2") {
		t.Errorf("%d of 4 processes finished, or the job aborted\n%s", n, r)
	}
}

func (x *mpirTest) testAttach(t *testing.T) {
	// Not started by a debugger: the table is there all the same, and
	// nothing waits for a debugger.
	p := startPrun(t, opts{args: []string{"-n", "2", "sleep", "30"}})
	kids := p.waitRanks(2, "sleep", 10*time.Second)
	out, err := exec.Command("gdb", "-batch", "-p", strconv.Itoa(p.cmd.Process.Pid),
		"-ex", "print MPIR_proctable_size", "-ex", "print MPIR_being_debugged",
		"-ex", "print MPIR_proctable[0].pid", "-ex", "print MPIR_proctable[1].pid",
		"-ex", "print MPIR_proctable[1].executable_name").CombinedOutput()
	if err != nil {
		t.Fatalf("gdb -p: %v\n%s", err, out)
	}
	var vals []string
	for _, m := range regexp.MustCompile(`(?m)^\$\d+ = (.*)$`).FindAllStringSubmatch(string(out), -1) {
		vals = append(vals, m[1])
	}
	pids := []string{strconv.Itoa(kids[0].pid), strconv.Itoa(kids[1].pid)}
	sort.Strings(pids)
	if len(vals) != 5 || vals[0] != "2" || vals[1] != "0" || !strings.HasSuffix(vals[4], `"/usr/bin/sleep"`) && !strings.HasSuffix(vals[4], `"/bin/sleep"`) {
		t.Errorf("what the debugger read: %q", vals)
	} else if got := []string{vals[2], vals[3]}; !samePids(got, pids) {
		t.Errorf("table pids %v, the ranks are %v", got, pids)
	}
	p.signal(syscall.SIGTERM)
	expectCode(t, p.wait(), 143)
}

func (x *mpirTest) testRestarted(t *testing.T) {
	// A rank started again (--max-restarts) is in the table by its new pid.
	once := filepath.Join(t.TempDir(), "once")
	p := startPrun(t, opts{args: []string{"--max-restarts", "1", "-n", "1", "sh", "-c",
		`[ -e ` + once + ` ] || { touch ` + once + `; exit 3; }; exec sleep 30`}})
	kids := p.waitRanks(1, "sleep", 10*time.Second)
	out, err := exec.Command("gdb", "-batch", "-p", strconv.Itoa(p.cmd.Process.Pid),
		"-ex", "print MPIR_proctable[0].pid").CombinedOutput()
	if err != nil {
		t.Fatalf("gdb -p: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("$1 = %d\n", kids[0].pid); !strings.Contains(string(out), want) {
		t.Errorf("the debugger read %q; want %q", out, want)
	}
	p.signal(syscall.SIGTERM)
	expectCode(t, p.wait(), 143)
}

func (x *mpirTest) testNoDebugger(t *testing.T) {
	r := run(t, opts{args: []string{"--debug", "-n", "2", "true"}})
	expectCode(t, r, 2)
	if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], "none of the debuggers was found in PATH: totalview, ddt, fxp") {
		t.Errorf("stderr %q; want one line", r.stderr)
	}
}

func samePids(a, b []string) bool {
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, " ") == strings.Join(b, " ")
}
