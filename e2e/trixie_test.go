package e2e

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/debroot"
)

// trixie is a test's Debian 13 environment (internal/debroot): Open MPI 5
// programs of the root run under the test's prun.
type trixie struct {
	*debroot.Env
}

// newTrixie builds the Debian 13 root when it is missing (minutes, once per
// machine) and arranges for the test's prun to run its programs.
func newTrixie(t *testing.T) trixie {
	t.Helper()
	return trixie{debroot.New(t, debroot.Ensure(t, debroot.Trixie), prunBin)}
}

// trixieEnv is what every run of Open MPI 5 ranks here needs: its TCP
// transport finds no pairing of interfaces on this machine unless told to
// use loopback (spawn and connect fail then, under its own mpirun too).
var trixieEnv = []string{"OMPI_MCA_btl_tcp_if_include=lo"}

// run runs the test's prun in the root's namespace, from Bin unless o.dir
// says otherwise, with a TMPDIR the root sees.
func (tx trixie) run(t *testing.T, o opts) *result {
	t.Helper()
	return tx.start(t, o).wait()
}

func (tx trixie) start(t *testing.T, o opts) *proc {
	t.Helper()
	o.bin = tx.Prun
	if o.dir == "" {
		o.dir = tx.Bin
	}
	if o.tmpdir == "" {
		o.tmpdir = tx.TempDir(t)
	}
	o.env = append(append([]string{}, trixieEnv...), o.env...)
	if o.timeout == 0 {
		o.timeout = 120 * time.Second
	}
	return startPrun(t, o)
}

// expectLines fails unless stdout's lines, sorted, are want (sorted).
func expectLines(t *testing.T, r *result, want ...string) {
	t.Helper()
	got := lines(r.stdout)
	sort.Strings(got)
	want = append([]string(nil), want...)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant (in any order):\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), r)
	}
}

// trixieTest is what TestTrixie's subtests share: the Debian 13 root, and
// this host's name.
type trixieTest struct {
	tx   trixie
	host string
}

// prog builds src for the root's Open MPI: the program's path, relative to
// the root's working directory.
func (x *trixieTest) prog(t *testing.T, src string) string {
	return "./" + filepath.Base(x.tx.Program(t, debroot.MPI, src))
}

// Issue 38: Open MPI 5 programs of a Debian 13 root (ranks with a PMIx 5
// client) under this machine's prun, whose PMIx server is OpenPMIx 4.2.2
// patched to answer 5.x clients: the world model, MPMD, aborts and exit
// codes, stdin, spawn, MPI 4 Sessions with process sets, groups made into
// communicators, and names and connections between two jobs of a DVM.
func TestTrixie(t *testing.T) {
	tx := newTrixie(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	x := &trixieTest{tx: tx, host: host}

	t.Run("hello", x.testTrixieHello)
	t.Run("ring", x.testTrixieRing)
	t.Run("mpmd", x.testTrixieMpmd)
	t.Run("abort", x.testTrixieAbort)
	t.Run("exit-code", x.testTrixieExitCode)
	t.Run("stdin", x.testTrixieStdin)
	t.Run("spawn", x.testTrixieSpawn)
	t.Run("sessions", x.testTrixieSessions)
	t.Run("halves", x.testTrixieHalves)
	t.Run("dvm", x.testTrixieDvm)
	t.Run("tools-standalone", x.testTrixieToolsStandalone)
}

func (x *trixieTest) testTrixieHello(t *testing.T) {
	hello := x.prog(t, "hello.c")
	r := x.tx.run(t, opts{args: []string{"-n", "4", hello}})
	expectCode(t, r, 0)
	var want []string
	for i := 0; i < 4; i++ {
		want = append(want, fmt.Sprintf("hello from rank %d of 4 on %s (app 0)", i, x.host))
	}
	expectLines(t, r, want...)
}

func (x *trixieTest) testTrixieRing(t *testing.T) {
	ring := x.prog(t, "ring.c")
	r := x.tx.run(t, opts{args: []string{"-n", "4", ring}})
	expectCode(t, r, 0)
	expectLines(t, r, "ring: rank 0 ok", "ring: rank 1 ok", "ring: rank 2 ok", "ring: rank 3 ok",
		"ring: 4 ranks, 10 laps, sum ok")
}

func (x *trixieTest) testTrixieMpmd(t *testing.T) {
	hello, hello2 := x.prog(t, "hello.c"), x.prog(t, "hello2.c")
	r := x.tx.run(t, opts{args: []string{"-n", "2", hello, ":", "-n", "2", hello2}})
	expectCode(t, r, 0)
	expectLines(t, r,
		"hello from rank 0 of 4 on "+x.host+" (app 0)", "hello from rank 1 of 4 on "+x.host+" (app 0)",
		"hello2: rank 2 of 4 (app 1) says hi; world sum of ranks = 6",
		"hello2: rank 3 of 4 (app 1) says hi; world sum of ranks = 6")
}

func (x *trixieTest) testTrixieAbort(t *testing.T) {
	abort := x.prog(t, "abort.c")
	r := x.tx.run(t, opts{args: []string{"-n", "4", abort, "2", "17"}})
	expectCode(t, r, 17)
	expectContains(t, "stdout", r.stdout, "abort: rank 2 aborting with 17\n")
	expectContains(t, "stderr", r.stderr, "rank 2 ("+abort+") on "+x.host+" called abort with status 17")
}

func (x *trixieTest) testTrixieExitCode(t *testing.T) {
	// The others sleep far longer than the run's limit: the run ends in
	// time only if prun kills them when rank 1 fails.
	exitcode := x.prog(t, "exitcode.c")
	r := x.tx.run(t, opts{args: []string{"-n", "4", exitcode, "1", "5", "3600"}})
	expectCode(t, r, 5)
	expectContains(t, "stdout", r.stdout, "exitcode: rank 1 exiting with 5\n")
	expectContains(t, "stderr", r.stderr, "exited with status 5; killing the other 3 ranks")
}

func (x *trixieTest) testTrixieStdin(t *testing.T) {
	stdinrank := x.prog(t, "stdinrank.c")
	var in strings.Builder
	for i := 0; in.Len() < 1<<20; i++ {
		fmt.Fprintf(&in, "line %d of the launcher's stdin\n", i)
	}
	h := fnv.New32a()
	io.WriteString(h, in.String())
	r := x.tx.run(t, opts{args: []string{"-n", "3", stdinrank}, stdin: strings.NewReader(in.String())})
	expectCode(t, r, 0)
	expectLines(t, r,
		fmt.Sprintf("stdinrank: rank 0 read %d bytes, %d lines, fnv %08x", in.Len(), strings.Count(in.String(), "\n"), h.Sum32()),
		"stdinrank: rank 1 read 0 bytes, 0 lines, fnv 811c9dc5",
		"stdinrank: rank 2 read 0 bytes, 0 lines, fnv 811c9dc5",
		fmt.Sprintf("stdinrank: world read %d bytes", in.Len()))
}

func (x *trixieTest) testTrixieSpawn(t *testing.T) {
	// The parents spawn their own program (argv[0], a path prun
	// resolves outside the root: the wrapper).
	spawn := x.prog(t, "spawn.c")
	r := x.tx.run(t, opts{args: []string{"-n", "2", spawn, "2"}})
	expectCode(t, r, 0)
	expectLines(t, r,
		"spawn: parent 0 of 2: merged sum 4 (merged rank 0 of 4) on "+x.host,
		"spawn: parent 1 of 2: merged sum 4 (merged rank 1 of 4) on "+x.host,
		"spawn: child 0 of 2: merged sum 4 (merged rank 2 of 4) on "+x.host,
		"spawn: child 1 of 2: merged sum 4 (merged rank 3 of 4) on "+x.host)
}

// Process sets: MPI's three, and, when a context names one (--pset, as
// under PRRTE), one per application context (the others NSPACE.appN):
// the count and the names agree, MPI's sets are groups and
// communicators of their members, and a PMIx 5 client's queries give
// each set's members.
func (x *trixieTest) testTrixieSessions(t *testing.T) {
	sessions := x.prog(t, "sessions.c")
	builtin := []string{"mpi://WORLD=0-3", "mpi://SELF=self", "mpix://SHARED=0-3"}
	for _, tc := range []struct {
		name   string
		n0, n1 int    // the contexts' sizes
		p0, p1 string // their --pset, if any
		sets   []string
	}{
		// The launcher's sets are listed only ("~"): Open MPI 5.0's
		// MPI_Group_from_session_pset cannot make one a group (see
		// testdata/sessions.c).
		{"none", 1, 3, "", "", nil},
		{"named", 2, 2, "left", "right", []string{"left~0-1", "right~2-3"}},
		{"one-named", 1, 3, "left", "", []string{"left~0-0", "NSPACE.app1~1-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := append(append([]string{}, builtin...), tc.sets...)
			ctx := func(n int, pset string) []string {
				args := []string{"-n", strconv.Itoa(n)}
				if pset != "" {
					args = append(args, "--pset", pset)
				}
				return append(append(args, sessions, "psets"), want...)
			}
			args := append(append(ctx(tc.n0, tc.p0), ":"), ctx(tc.n1, tc.p1)...)
			r := x.tx.run(t, opts{args: args})
			expectCode(t, r, 0)
			var missing []string
			for rank := 0; rank < 4; rank++ {
				for _, w := range []string{
					fmt.Sprintf("sessions: rank %d psets: %d:", rank, len(want)),
					fmt.Sprintf("sessions: rank %d nth %d fails: MPI_ERR_ARG\n", rank, len(want)),
					fmt.Sprintf("sessions: rank %d pset mpi://WORLD size 4 sum 10 ok\n", rank),
					fmt.Sprintf("sessions: rank %d pset mpi://SELF size 1 sum %d ok\n", rank, rank+1),
					fmt.Sprintf("sessions: rank %d pset mpix://SHARED size 4 sum 10 ok\n", rank),
					fmt.Sprintf("sessions: rank %d psets ok\n", rank),
				} {
					if !strings.Contains(r.stdout, w) {
						missing = append(missing, strings.TrimSpace(w))
					}
				}
			}
			if r.code == 0 && (len(missing) > 0 || strings.Contains(r.stdout, "FAILED")) {
				t.Errorf("stdout lacks %q\n%s", missing, r)
			}
		})
	}
	// The same sets through a PMIx 5 client's own queries (query.c,
	// TestQueryInfo's program, built on the root's libpmix).
	t.Run("pmix5-queries", func(t *testing.T) {
		q := "./" + filepath.Base(x.tx.Program(t, debroot.PMIx, "query.c"))
		r := x.tx.run(t, opts{args: []string{"--pset", "alpha", "-n", "2", q, "client", ":", "--pset", "beta", "-n", "1", q, "client"}})
		expectCode(t, r, 0)
		ns := fmt.Sprintf("prun.%d.1", r.pid)
		expectQueries(t, r.stdout, ns, []string{ns},
			fmt.Sprintf("3 procs: 0@%[1]s:PROC EXECUTING,1@%[1]s:PROC EXECUTING,2@%[1]s:PROC EXECUTING", x.host),
			fmt.Sprintf("3 procs: 0@%[1]s,1@%[1]s,2@%[1]s", x.host), "alpha,beta", "beta 1 procs: "+ns+":2")
	})
}

func (x *trixieTest) testTrixieHalves(t *testing.T) {
	sessions := x.prog(t, "sessions.c")
	for _, n := range []int{4, 3} {
		r := x.tx.run(t, opts{args: []string{"-n", strconv.Itoa(n), sessions, "halves"}})
		expectCode(t, r, 0)
		var want []string
		for rank := 0; rank < n; rank++ {
			lower := rank < n/2
			rsize, sum := n-n/2, 0
			for q := n / 2; q < n; q++ {
				sum += q + 1
			}
			if !lower {
				rsize, sum = n/2, 0
				for q := 0; q < n/2; q++ {
					sum += q + 1
				}
			}
			want = append(want, fmt.Sprintf("sessions: rank %d halves: remote size %d sum %d, merged size %d sum %d ok",
				rank, rsize, sum, n, n*(n+1)/2))
		}
		expectLines(t, r, want...)
	}
}

// Issue 26's names and connections, between two jobs of one DVM
// whose daemon runs the root's programs.
func (x *trixieTest) testTrixieDvm(t *testing.T) {
	cluster.Quiet(t)
	nsname, nsconnect := x.prog(t, "nsname.c"), x.prog(t, "nsconnect.c")
	d := startDVMWith(t, x.tx.Prun, x.tx.TempDir(t), x.tx.Bin, nil, "--host", "localhost:6")
	j := dvmJobs{d: d, env: trixieEnv}
	t.Run("names", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		p := j.start(t, opts{args: []string{"-n", "1", nsname, "publish", "trixie-svc", "port#x$"}, dir: x.tx.Bin, stdin: pr})
		p.waitOutput(60*time.Second, "nsname: published trixie-svc")
		r := j.run(t, opts{args: []string{"-n", "2", nsname, "lookup", "trixie-svc"}, dir: x.tx.Bin})
		expectCode(t, r, 0)
		expectLines(t, r, "nsname: rank 0 found port#x$", "nsname: rank 1 found port#x$")
		pw.Write([]byte("done\n"))
		pw.Close()
		expectCode(t, p.wait(), 0)
	})
	t.Run("connect", func(t *testing.T) {
		p := j.start(t, opts{args: []string{"--timeout", "60", "-n", "1", nsconnect, "server", "trixie-connect"}, dir: x.tx.Bin})
		r := j.run(t, opts{args: []string{"--timeout", "60", "-n", "2", nsconnect, "client", "trixie-connect"}, dir: x.tx.Bin})
		expectConnected(t, r, p.wait())
	})
	d.expectServing(t)

	// Debian 13's PMIx tools (5.0.7) against the DVM's server: its
	// status names the directory they are pointed at.
	t.Run("tools", func(t *testing.T) {
		var dir string
		for _, l := range strings.Split(d.status(t).text, "\n") {
			if v, ok := strings.CutPrefix(l, "PMIx tools: PMIX_SYSTEM_TMPDIR="); ok {
				dir = v
			}
		}
		if dir == "" {
			t.Fatalf("prun dvm status names no PMIx directory:\n%s", d.status(t).text)
		}
		goFile := filepath.Join(x.tx.TempDir(t), "go")
		p := j.start(t, opts{args: []string{"-n", "2", "sh", "-c", fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done", goFile)}, dir: x.tx.Bin})
		ns := ""
		for _, n := range d.waitJobs(t, 1) {
			ns = n
		}
		expectTools(t, x.tx, dir, d.tmp, d.pid, ns)
		os.WriteFile(goFile, nil, 0o644)
		expectCode(t, p.wait(), 0)
	})
}

// The same tools against standalone jobs, two in one TMPDIR: PMIx 5.0's
// pps ignores --pid and takes the only server it finds, or the system
// server of PMIX_SYSTEM_TMPDIR (each job's session directory).
func (x *trixieTest) testTrixieToolsStandalone(t *testing.T) {
	tmp, goFile := x.tx.TempDir(t), filepath.Join(x.tx.TempDir(t), "go")
	hold := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done", goFile)
	var ps []*proc
	for i := 0; i < 2; i++ {
		ps = append(ps, x.tx.start(t, opts{args: []string{"-n", "2", "sh", "-c", hold}, tmpdir: tmp, skipTmpCheck: true}))
	}
	for _, p := range ps {
		p.waitRanks(2, "sh", 30*time.Second)
	}
	for _, p := range ps {
		pid := p.cmd.Process.Pid // the wrapper execs prun
		dirs, _ := filepath.Glob(filepath.Join(tmp, fmt.Sprintf("prun.%d.*", pid)))
		if len(dirs) != 1 {
			t.Fatalf("prun %d's session directory in %s: %v", pid, tmp, dirs)
		}
		expectTools(t, x.tx, dirs[0], tmp, pid, fmt.Sprintf("prun.%d.1", pid))
	}
	os.WriteFile(goFile, nil, 0o644)
	for _, p := range ps {
		expectCode(t, p.wait(), 0)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("TMPDIR still holds %d entries", len(left))
	}
}

// expectTools runs Debian 13's pps and pquery in the root against the
// server whose session directory is dir (TMPDIR tmp, pid pid): both list
// the namespace ns.
func expectTools(t *testing.T, tx trixie, dir, tmp string, pid int, ns string) {
	t.Helper()
	for _, tool := range []string{"pps", fmt.Sprintf("pquery --pid %d pmix.qry.ns", pid)} {
		out, err := tx.Shell(tool, "TMPDIR="+tmp, "PMIX_SYSTEM_TMPDIR="+dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ns) || strings.Contains(string(out), "rendezvous") {
			t.Errorf("%s (PMIX_SYSTEM_TMPDIR=%s): %v\n%s\nwant %s, and no complaint", tool, dir, err, out, ns)
		}
	}
}
