package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestCLIErrors: a bad command line exits 2 with one "prun: " line on
// stderr, nothing on stdout, and starts nothing.
func TestCLIErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	evidence := t.TempDir() // the program leaves a file here if it ever runs
	writeScript(t, dir, "x", `touch "$EVIDENCE/ran.$$"`+"\n")
	if err := os.WriteFile(filepath.Join(dir, "noexec"), []byte("#!/bin/sh\ntrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no-program", nil, "no program given"},
		{"no-program-flags", []string{"-n", "2"}, "no program given"},
		{"n0", []string{"-n", "0", "./x"}, "-n 0: at least one process is needed"},
		{"missing", []string{"-n", "1", "./nope"}, "./nope: no such file"},
		{"missing-in-path", []string{"-n", "1", "nope-prun-e2e"}, "nope-prun-e2e: command not found"},
		{"not-executable", []string{"-n", "1", "./noexec"}, "./noexec: not executable"},
		{"directory", []string{"-n", "1", "./"}, "is a directory"},
		{"stray-colon-end", []string{"-n", "1", "./x", ":"}, "stray ':' at the end"},
		{"leading-colon", []string{":", "-n", "2", "./x"}, "stray ':'"},
		{"double-colon", []string{"-n", "1", "./x", ":", ":", "-n", "1", "./x"}, "stray ':'"},
		{"typo", []string{"--tiemout", "3", "-n", "1", "./x"}, "did you mean --timeout"},
		{"bad-timeout", []string{"--timeout", "soon", "-n", "1", "./x"}, "--timeout soon"},
		{"global-later", []string{"-n", "1", "./x", ":", "--timeout", "3", "-n", "1", "./x"},
			"global option"},
		{"negative-n", []string{"-n", "-1", "./x"}, "cannot be negative"},
		{"bad-wdir", []string{"--wdir", "/nonexistent-prun-e2e", "-n", "1", "./x"}, "not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, opts{args: c.args, dir: dir, env: []string{"EVIDENCE=" + evidence}})
			expectCode(t, r, 2)
			ls := lines(r.stderr)
			if len(ls) != 1 || !strings.HasPrefix(r.stderr, "prun: ") {
				t.Errorf("stderr is not one prun: line: %q", r.stderr)
			}
			expectContains(t, "stderr", r.stderr, c.want)
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if ents, _ := os.ReadDir(evidence); len(ents) != 0 {
				t.Errorf("the program ran (%d times) although the command line was bad", len(ents))
			}
		})
	}
}

func TestCLIMisc(t *testing.T) {
	t.Parallel()
	// The binary's commit (Go's VCS stamp, absent from a worktree's or a
	// tarball's build), the PMIx server it hosts, its PMI servers.
	t.Run("version", func(t *testing.T) {
		r := prun(t, "--version")
		expectCode(t, r, 0)
		want := []string{
			`^prun \d+\.\d+\.\d+ \((commit [0-9a-f]{7}(-dirty)?, \d{4}-\d\d-\d\d|unknown commit)\)$`,
			`^PMIx server: OpenPMIx 4\.2\.2 with prun's patches, built from Debian's pmix .*; serves PMIx 4\.x and 5\.x clients`,
			`^  patches: 0001-`,
			`^PMI: PMI-1 and PMI-2 servers`,
		}
		got := lines(r.stdout)
		if len(got) != len(want) || r.stderr != "" {
			t.Fatalf("--version printed %q, stderr %q", r.stdout, r.stderr)
		}
		for i, re := range want {
			if !regexp.MustCompile(re).MatchString(got[i]) {
				t.Errorf("--version line %d: %q does not match %s", i+1, got[i], re)
			}
		}
	})
	for _, h := range []string{"-h", "--help"} {
		t.Run(h, func(t *testing.T) {
			r := prun(t, h)
			expectCode(t, r, 0)
			for _, w := range []string{"prun [options] -n N PROGRAM", "Exit status:", "--timeout", "--tag-output", "-n, --np"} {
				expectContains(t, "help", r.stdout, w)
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q", r.stderr)
			}
		})
	}
	// Every command --help lists is one prun has.
	t.Run("commands", func(t *testing.T) {
		help := prun(t, "--help").stdout
		_, cmds, _ := strings.Cut(help, "\nCommands:\n")
		cmds, _, _ = strings.Cut(cmds, "\n\n")
		if cmds == "" {
			t.Fatalf("--help lists no commands:\n%s", help)
		}
		for _, l := range lines(cmds) {
			name := strings.Fields(l)[0]
			if r := prun(t, name, "--help"); r.code != 0 || r.stdout+r.stderr == "" {
				t.Errorf("prun %s --help: %s", name, r)
			}
		}
	})
	t.Run("np", func(t *testing.T) {
		r := prun(t, "-np", "2", "sh", "-c", `echo "r$PRUN_RANK of $PRUN_SIZE"`)
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, "r0 of 2\n")
		expectContains(t, "stdout", r.stdout, "r1 of 2\n")
	})
	t.Run("allow-run-as-root", func(t *testing.T) {
		r := prun(t, "--allow-run-as-root", "-n", "1", "true")
		expectCode(t, r, 0)
	})
	t.Run("program-flags", func(t *testing.T) {
		r := prun(t, "-n", "1", "echo", "-n", "hi")
		expectCode(t, r, 0)
		if r.stdout != "hi" {
			t.Errorf("stdout = %q, want %q (-n after the program belongs to echo)", r.stdout, "hi")
		}
		// mpirun's single-dash spellings are not rewritten after the program.
		r = prun(t, "-n", "1", "echo", "-np", "--timeout", "x")
		expectCode(t, r, 0)
		if r.stdout != "-np --timeout x\n" {
			t.Errorf("stdout = %q", r.stdout)
		}
	})
	t.Run("x-export", func(t *testing.T) {
		r := run(t, opts{args: []string{"-x", "E2E_A", "-x", "E2E_B=two", "-n", "1", "sh", "-c", `echo "$E2E_A $E2E_B"`},
			env: []string{"E2E_A=one"}})
		expectCode(t, r, 0)
		if r.stdout != "one two\n" {
			t.Errorf("stdout = %q, want %q", r.stdout, "one two\n")
		}
	})
}

// -x of a variable prun's environment lacks: a warning, as mpirun's, and
// the job runs without it.
func TestUnsetExportWarns(t *testing.T) {
	t.Parallel()
	r := run(t, opts{args: []string{"-x", "NOT_SET_VAR_xyz", "-n", "1", "sh", "-c", `echo "[${NOT_SET_VAR_xyz-unset}]"`}})
	expectCode(t, r, 0)
	if r.stderr != "prun: warning: -x NOT_SET_VAR_xyz: not set in prun's environment, not exported\n" {
		t.Errorf("stderr %q", r.stderr)
	}
	expectContains(t, "stdout", r.stdout, "[unset]\n")
}

// Hydra's -print-all-exitcodes: after the job, one line per outcome with
// the ranks that had it, also when a failing rank ended the job.
func TestPrintAllExitCodes(t *testing.T) {
	t.Parallel()
	r := run(t, opts{args: []string{"-print-all-exitcodes", "-n", "3", "sh", "-c", `[ $PRUN_RANK = 1 ] && sleep 0.5 && exit 5; exit 0`}}) // the others end first
	expectCode(t, r, 5)
	expectContains(t, "stderr", r.stderr, "prun: ranks 0,2 exited with status 0\nprun: rank 1 exited with status 5\n")
	r = run(t, opts{args: []string{"--print-all-exitcodes", "-n", "4", "sh", "-c", `[ $PRUN_RANK = 2 ] && sleep 0.3 && exit 3; exec sleep 30`}})
	expectCode(t, r, 3)
	expectContains(t, "stderr", r.stderr, "prun: ranks 0-1,3 were killed by SIGTERM\nprun: rank 2 exited with status 3\n")
	if r = run(t, opts{args: []string{"-n", "2", "true"}}); r.stderr != "" {
		t.Errorf("without the flag, stderr = %q", r.stderr)
	}
	// nothing started: no lines (it was a nil pointer dereference)
	r = run(t, opts{args: []string{"-print-all-exitcodes", "--do-not-launch", "-n", "1", "true"}})
	expectCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("--do-not-launch: stderr %q", r.stderr)
	}
	r = run(t, opts{args: []string{"-print-all-exitcodes", "-n", "3", "--host", "localhost", "true"}})
	expectCode(t, r, 2)
	if r.stderr != "prun: 3 processes requested but only 1 slot is available on localhost (add --oversubscribe to allow more processes than slots)\n" {
		t.Errorf("a usage error: stderr %q", r.stderr)
	}
}

// Hydra's -ppn goes round the hosts again when the job is larger than one
// round (it was Open MPI's -N, which refuses), its ranks in the order
// placed; -print-rank-map prints where they go; -launcher fork keeps the job
// on this node. prterun's --personality and --prtemca, mpirun's -rf.
func TestHydraSpellings(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	r := run(t, opts{args: []string{"-n", "4", "-ppn", "1", "-hosts", host, "-print-rank-map", "sh", "-c", "echo $PRUN_RANK"}})
	expectCode(t, r, 0)
	if got := lines(r.stdout); len(got) != 5 || got[0] != "("+host+":0,1,2,3)" {
		t.Errorf("stdout %q, want the rank map, then 4 ranks", got)
	}
	r = run(t, opts{args: []string{"-n", "8", "-ppn", "2", "-hosts", host + ",otherhost", "-print-rank-map", "--do-not-launch", "true"}})
	expectCode(t, r, 0)
	if r.stdout != "("+host+":0,1,4,5)\n(otherhost:2,3,6,7)\n" {
		t.Errorf("-ppn 2 on two hosts: %q", r.stdout)
	}
	r = run(t, opts{args: []string{"-n", "2", "-launcher", "fork", "-hosts", host + ",otherhost:1", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "-launcher fork starts processes on this node only, and the map puts some on otherhost\n")
	r = run(t, opts{args: []string{"-n", "1", "-launcher", "fork", "--personality", "ompi", "--prtemca", "plm", "x", "sh", "-c", "echo $PRTE_MCA_plm"}})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "x\n")
	rf := filepath.Join(t.TempDir(), "rf")
	if err := os.WriteFile(rf, []byte("rank 0="+host+" slot=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, opts{args: []string{"-n", "1", "-rf", rf, "--display", "map", "true"}})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "   0    0  "+host)

	// -disable-hostname-propagation: MPICH finds its own host name;
	// -disable-auto-cleanup: a failed rank leaves the others running;
	// -enable-x: one line, prun forwards no X.
	show := `echo "h=${MPIR_CVAR_CH3_INTERFACE_HOSTNAME-none}"`
	r = run(t, opts{args: []string{"-n", "1", "sh", "-c", show}})
	expectContains(t, "stdout", r.stdout, "h="+host+"\n")
	r = run(t, opts{args: []string{"-n", "1", "-disable-hostname-propagation", "sh", "-c", show}})
	expectContains(t, "stdout", r.stdout, "h=none\n")
	r = run(t, opts{args: []string{"-disable-auto-cleanup", "-n", "2", "sh", "-c", `[ $PRUN_RANK = 1 ] && exit 3; sleep 0.3; echo done`}})
	expectCode(t, r, 3)
	expectContains(t, "stdout", r.stdout, "done\n")
	r = run(t, opts{args: []string{"-enable-x", "-n", "1", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "prun: -enable-x: prun's SSH client forwards no X connections")

	// mpirun's -max-vm-size: the allocation's first N hosts.
	r = run(t, opts{args: []string{"-H", "a:1,b:1,c:1", "-max-vm-size", "2", "-n", "2", "--do-not-launch", "-print-rank-map", "true"}})
	expectCode(t, r, 0)
	if r.stdout != "(a:0)\n(b:1)\n" {
		t.Errorf("-max-vm-size 2: %q", r.stdout)
	}

	// Hydra's host lists take more processes than slots, as under Hydra
	// (round after round, each host its slots): -hosts and -f here, where
	// mpirun's --host refuses.
	r = run(t, opts{args: []string{"-n", "3", "-hosts", host, "sh", "-c", "echo r$PRUN_RANK"}})
	expectCode(t, r, 0)
	for _, want := range []string{"r0\n", "r1\n", "r2\n"} {
		expectContains(t, "stdout", r.stdout, want)
	}
	r = run(t, opts{args: []string{"-n", "5", "-hosts", "a,b:2", "-print-rank-map", "--do-not-launch", "true"}})
	expectCode(t, r, 0)
	if r.stdout != "(a:0,3)\n(b:1,2,4)\n" {
		t.Errorf("-n 5 -hosts a,b:2: %q, want Hydra's (a:0,3) (b:1,2,4)", r.stdout)
	}
	r = run(t, opts{args: []string{"-n", "3", "--host", host, "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "3 processes requested but only 1 slot is available on "+host)

	// -f with Hydra's host:N lines (this node twice: one host, 3 slots).
	hf := filepath.Join(t.TempDir(), "machinefile")
	if err := os.WriteFile(hf, []byte(host+":2\nlocalhost:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, opts{args: []string{"-f", hf, "-n", "3", "-print-rank-map", "true"}})
	expectCode(t, r, 0)
	if r.stdout != "("+host+":0,1,2)\n" {
		t.Errorf("-f %s: %q", hf, r.stdout)
	}
	r = run(t, opts{args: []string{"-f", hf, "-n", "5", "-print-rank-map", "true"}})
	expectCode(t, r, 0)
	if r.stdout != "("+host+":0,1,2,3,4)\n" {
		t.Errorf("-f %s -n 5: %q", hf, r.stdout)
	}
}

// mpirun's -q, --report-pid and --path, Hydra's -envnone: what each
// changes in a real run.
func TestMpirunExtras(t *testing.T) {
	t.Parallel()
	t.Run("quiet", extrasQuiet)
	t.Run("report-pid", extrasReportPid)
	t.Run("output-proctable", extrasOutputProctable)
	t.Run("rmk-order-nodes", extrasRmkOrderNodes)
	t.Run("max-restarts", extrasMaxRestarts)
	t.Run("enable-recovery", extrasEnableRecovery)
	t.Run("show-progress", extrasShowProgress)
	t.Run("preload", extrasPreload)
	t.Run("path", extrasPath)
	t.Run("envnone", extrasEnvnone)
	t.Run("prepend-pattern", extrasPrependPattern)
	t.Run("file-patterns", extrasFilePatterns)
	t.Run("verbose", extrasVerbose)
	t.Run("localhost", extrasLocalhost)
	t.Run("argv-and-cwd", extrasArgvAndCwd)
	t.Run("ppr", extrasPpr)
}

func extrasQuiet(t *testing.T) {
	r := prun(t, "-q", "-n", "2", "sh", "-c", `[ $PRUN_RANK = 1 ] && exit 3; exec sleep 30`)
	expectCode(t, r, 3)
	if r.stderr != "" {
		t.Errorf("-q: stderr = %q, want nothing", r.stderr)
	}
	r = prun(t, "-n", "2", "sh", "-c", `[ $PRUN_RANK = 1 ] && exit 3; exec sleep 30`)
	expectCode(t, r, 3)
	expectContains(t, "stderr", r.stderr, "exited with status 3")
}

func extrasReportPid(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pid")
	r := prun(t, "--report-pid", file, "-n", "1", "true")
	expectCode(t, r, 0)
	if b, err := os.ReadFile(file); err != nil || string(b) != fmt.Sprintf("%d\n", r.pid) {
		t.Errorf("pid file = %q, %v; want %d", b, err, r.pid)
	}
	r = prun(t, "--report-pid", "-", "-n", "1", "echo", "rank")
	expectCode(t, r, 0)
	if r.stdout != fmt.Sprintf("%d\nrank\n", r.pid) {
		t.Errorf("--report-pid -: stdout = %q, want prun's pid %d first", r.stdout, r.pid)
	}
	r = prun(t, "--report-pid", "/nonexistent-prun-e2e/pid", "-n", "1", "true")
	expectCode(t, r, 1)
	if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], "--report-pid /nonexistent-prun-e2e/pid") {
		t.Errorf("stderr = %q, want one line naming the file", r.stderr)
	}
}

func extrasOutputProctable(t *testing.T) {
	// Each rank prints its own pid; the table must name the same ones,
	// in rank order, with host and program.
	file := filepath.Join(t.TempDir(), "table")
	r := prun(t, "--output-proctable="+file, "-n", "3", "sh", "-c", `echo "$PRUN_RANK $$"`)
	expectCode(t, r, 0)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	sh, _ := exec.LookPath("sh")
	pids := map[string]string{}
	for _, l := range lines(r.stdout) {
		rank, pid, _ := strings.Cut(l, " ")
		pids[rank] = pid
	}
	var want string
	for rank := 0; rank < 3; rank++ {
		want += fmt.Sprintf("(rank, host, exe, pid) = (%d, %s, %s, %s)\n", rank, host, sh, pids[strconv.Itoa(rank)])
	}
	if string(b) != want {
		t.Errorf("--output-proctable file:\n%s\nwant:\n%s", b, want)
	}
	r = prun(t, "--output-proctable", "-n", "2", "true")
	expectCode(t, r, 0)
	if ls := lines(r.stdout); len(ls) != 2 || !strings.HasPrefix(ls[1], "(rank, host, exe, pid) = (1, ") {
		t.Errorf("--output-proctable with no value: stdout = %q, want the table", r.stdout)
	}
	started := filepath.Join(t.TempDir(), "started")
	r = prun(t, "--output-proctable=/nonexistent-prun-e2e/table", "-n", "1", "touch", started)
	expectCode(t, r, 1)
	if _, err := os.Stat(started); err == nil {
		t.Error("the rank ran although the table's file could not be created")
	}
	if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], "--output-proctable") || !strings.Contains(ls[0], "/nonexistent-prun-e2e/table") {
		t.Errorf("stderr = %q, want one line naming the flag and the file", r.stderr)
	}
}

func extrasRmkOrderNodes(t *testing.T) {
	hf := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hf, []byte("a slots=1\nb slots=3\nc slots=2\n"), 0o644)
	r := prun(t, "--hostfile", hf, "-order-nodes", "DESCENDING", "--display-map", "--do-not-launch", "-n", "4", "true")
	expectCode(t, r, 0)
	var hosts []string
	for _, l := range lines(r.stdout)[1:] {
		hosts = append(hosts, strings.Fields(l)[2])
	}
	if strings.Join(hosts, " ") != "b b b c" {
		t.Errorf("-order-nodes DESCENDING: ranks on %q, want b's 3 slots first, then c\n%s", hosts, r.stdout)
	}
	// A Slurm allocation in the environment, and -rmk user: the local node.
	r = run(t, opts{args: []string{"-rmk", "user", "--display-allocation", "--do-not-launch", "-n", "1", "true"},
		env: []string{"SLURM_JOB_NODELIST=n[1-4]", "SLURM_TASKS_PER_NODE=2(x4)"}})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "allocation (the local node)")
	r = prun(t, "-rmk", "pbs", "-n", "1", "true")
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "-rmk pbs: no PBS allocation in prun's environment")
}

func extrasMaxRestarts(t *testing.T) {
	// A rank that fails starts again, up to N times, its output (to
	// the terminal and to its per-rank file) continuing; then its
	// failure counts. A failure while the job ends (another rank's
	// failure, a signal) or after MPI_Abort is not restarted, and a
	// PMIx client starts again under the same name.
	dir := t.TempDir()
	script := `f=` + dir + `/c$PRUN_RANK; n=$(cat $f 2>/dev/null || echo 0); echo $((n+1)) >$f
echo "rank $PRUN_RANK try $n"; [ $PRUN_RANK = 1 ] && [ $n -lt 2 ] && exit 3; exit 0`
	out := filepath.Join(dir, "out")
	r := prun(t, "--max-restarts", "2", "--output-filename", out, "-n", "2", "sh", "-c", script)
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	if strings.Join(got, ",") != "rank 0 try 0,rank 1 try 0,rank 1 try 1,rank 1 try 2" {
		t.Errorf("stdout %q, want rank 1 three times", r.stdout)
	}
	ls := lines(r.stderr)
	if len(ls) != 2 || !strings.Contains(ls[0], "rank 1 (sh) on ") || !strings.Contains(ls[0], "exited with status 3; starting it again (1 of 2)") ||
		!strings.Contains(ls[1], "starting it again (2 of 2)") {
		t.Errorf("stderr %q, want a line for each restart", r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(out, "1", "rank.1", "stdout")); err != nil || string(b) != "rank 1 try 0\nrank 1 try 1\nrank 1 try 2\n" {
		t.Errorf("rank 1's output file: %q, %v", b, err)
	}

	// mpirun's --continuous: again and again, until it succeeds
	cont := `f=` + dir + `/k; n=$(cat $f 2>/dev/null || echo 0); echo $((n+1)) >$f; [ $n -lt 5 ] && exit 1; echo "done after $n"`
	r = prun(t, "--continuous", "-n", "1", "sh", "-c", cont)
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "done after 5\n")
	expectContains(t, "stderr", r.stderr, "starting it again (restart 5, --continuous)")

	r = prun(t, "--max-restarts", "1", "-n", "1", "sh", "-c", "echo try; exit 3")
	expectCode(t, r, 3)
	if r.stdout != "try\ntry\n" || len(lines(r.stderr)) != 2 || !strings.Contains(r.stderr, "starting it again (1 of 1)") ||
		!strings.Contains(lines(r.stderr)[1], "exited with status 3") {
		t.Errorf("a rank failing twice with --max-restarts 1: %s", r)
	}

	r = prun(t, "--max-restarts", "2", "-n", "2", "sh", "-c", `[ $PRUN_RANK = 0 ] && exit 5; sleep 20`)
	expectCode(t, r, 5)
	restarts := 0
	for _, l := range lines(r.stderr) {
		if strings.Contains(l, "starting it again") {
			restarts++
			if !strings.Contains(l, "rank 0 (sh)") {
				t.Errorf("restarted as the job ended: %q", l)
			}
		}
	}
	if restarts != 2 {
		t.Errorf("rank 0 failing for good: %d restarts, want 2\n%s", restarts, r)
	}

	helloDir, hello := ompi(t, "hello.c")
	once := filepath.Join(dir, "once")
	r = run(t, opts{args: []string{"--max-restarts", "1", "-n", "1", "sh", "-c", `[ -e ` + once + ` ] || { touch ` + once + `; exit 3; }; exec ` + hello},
		dir: helloDir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "hello from rank 0 of 1")

	abortDir, abort := ompi(t, "abort.c")
	r = run(t, opts{args: []string{"--max-restarts", "3", "-n", "2", abort}, dir: abortDir})
	expectCode(t, r, 17)
	if strings.Contains(r.stderr, "starting it again") {
		t.Errorf("MPI_Abort was restarted:\n%s", r)
	}
}

func extrasEnableRecovery(t *testing.T) {
	// A failed rank does not end the job: the others finish their work,
	// and the first failure is prun's exit status.
	script := `case $PRUN_RANK in 1) exit 3;; 2) sleep 0.2; kill -9 $$;; esac; sleep 0.5; echo "rank $PRUN_RANK done"`
	r := prun(t, "--enable-recovery", "-n", "4", "sh", "-c", script)
	expectCode(t, r, 3)
	got := lines(r.stdout)
	sort.Strings(got)
	if strings.Join(got, ",") != "rank 0 done,rank 3 done" {
		t.Errorf("stdout %q, want ranks 0 and 3 to finish", r.stdout)
	}
	ls := lines(r.stderr)
	if len(ls) != 2 || !strings.Contains(ls[0], "rank 1 (sh)") || !strings.Contains(ls[0], "exited with status 3; the other ranks go on") ||
		!strings.Contains(ls[1], "rank 2 (sh)") || !strings.Contains(ls[1], "signal 9") {
		t.Errorf("stderr %q, want a line for each failure", r.stderr)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	r = prun(t, "--enable-recovery", "--report", report, "-n", "2", "sh", "-c", `exit $PRUN_RANK`)
	expectCode(t, r, 1)
	var rep struct {
		FirstFailure *struct {
			Message string
			Status  int
		} `json:"first_failure"`
	}
	if b, err := os.ReadFile(report); err != nil || json.Unmarshal(b, &rep) != nil || rep.FirstFailure == nil ||
		!strings.HasPrefix(rep.FirstFailure.Message, "rank 1 (sh)") || rep.FirstFailure.Status != 1 {
		t.Errorf("--report: first_failure %+v, %v; want rank 1's", rep.FirstFailure, err)
	}
	// Without the flag the first failure ends the job.
	r = prun(t, "-n", "4", "sh", "-c", script)
	expectCode(t, r, 3)
	if strings.Contains(r.stdout, "done") {
		t.Errorf("without --enable-recovery the others finished: %q", r.stdout)
	}
}

func extrasShowProgress(t *testing.T) {
	r := prun(t, "--show-progress", "-n", "3", "echo", "out")
	expectCode(t, r, 0)
	if r.stdout != "out\nout\nout\n" || r.stderr != "prun: 1 of 3 processes started\nprun: 2 of 3 processes started\nprun: 3 of 3 processes started\n" {
		t.Errorf("stdout %q, stderr %q; want the output alone, and every start counted on stderr", r.stdout, r.stderr)
	}
	r = prun(t, "--show-progress", "-n", "20", "true")
	if got := strings.Count(r.stderr, "processes started"); got != 10 || !strings.HasSuffix(r.stderr, "prun: 20 of 20 processes started\n") {
		t.Errorf("-n 20: %d progress lines %q; want one per tenth", got, r.stderr)
	}
}

func extrasPreload(t *testing.T) {
	// On the launching node the program is the same file: it runs from
	// where it is. The file lands in the working directory and is gone
	// after the job; a different file of that name there stops the
	// launch before anything starts, and stays as it was.
	src, wdir := t.TempDir(), t.TempDir()
	app := writeScript(t, src, "app.sh", `echo "$0 $(cat in.dat)"`+"\n")
	data := filepath.Join(src, "in.dat")
	os.WriteFile(data, []byte("payload"), 0o600)
	r := prun(t, "-s", "--preload-files", data, "--wdir", wdir, "-n", "2", app)
	expectCode(t, r, 0)
	if want := app + " payload\n"; r.stdout != want+want {
		t.Errorf("stdout %q, want %q twice", r.stdout, want)
	}
	if ents, _ := os.ReadDir(wdir); len(ents) != 0 {
		t.Errorf("the working directory holds %v after the job", ents)
	}
	// With --set-cwd-to-session-dir each rank finds it in its own.
	r = prun(t, "--set-cwd-to-session-dir", "--preload-files", data, "-n", "2", "sh", "-c", `cat in.dat; echo " $PWD"`)
	expectCode(t, r, 0)
	if ls := lines(r.stdout); len(ls) != 2 || !strings.HasPrefix(ls[0], "payload /") || !strings.HasPrefix(ls[1], "payload /") || ls[0] == ls[1] {
		t.Errorf("--set-cwd-to-session-dir: stdout %q, want the file in each rank's own directory", r.stdout)
	}
	theirs := filepath.Join(wdir, "in.dat")
	os.WriteFile(theirs, []byte("theirs"), 0o644)
	started := filepath.Join(t.TempDir(), "started")
	r = prun(t, "--preload-files", data, "--wdir", wdir, "-n", "1", "touch", started)
	expectCode(t, r, 1)
	if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], "--preload-files: "+theirs) {
		t.Errorf("stderr = %q, want one line naming the file in the way", r.stderr)
	}
	if _, err := os.Stat(started); err == nil {
		t.Error("the rank ran although its file could not be placed")
	}
	if b, _ := os.ReadFile(theirs); string(b) != "theirs" {
		t.Errorf("the file in the way became %q", b)
	}
}

func extrasPath(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, dir, "only-here-prun-e2e", "echo found\n")
	r := prun(t, "-n", "1", "--path", "/nonexistent:"+dir, "only-here-prun-e2e")
	expectCode(t, r, 0)
	if r.stdout != "found\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
}

func extrasEnvnone(t *testing.T) {
	show := `echo "[$E2E_OUTER] [$E2E_SET] [$PRUN_RANK] [$PMIX_RANK]"`
	r := run(t, opts{args: []string{"-n", "1", "-envnone", "-x", "E2E_SET=s", "sh", "-c", show, ":",
		"-n", "1", "sh", "-c", show}, env: []string{"E2E_OUTER=o"}})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "[] [s] [0] [0]\n")
	expectContains(t, "stdout", r.stdout, "[o] [] [1] [1]\n")
	r = run(t, opts{args: []string{"-genvnone", "-n", "2", "sh", "-c", show}, env: []string{"E2E_OUTER=o"}})
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "[o]") {
		t.Errorf("-genvnone: stdout = %q", r.stdout)
	}
	// -envall gives one context its environment back.
	r = run(t, opts{args: []string{"-genvnone", "-n", "1", "sh", "-c", show, ":", "-envall", "-n", "1", "sh", "-c", show},
		env: []string{"E2E_OUTER=o"}})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "[] [] [0] [0]\n")
	expectContains(t, "stdout", r.stdout, "[o] [] [1] [1]\n")
}

func extrasPrependPattern(t *testing.T) {
	host, _ := os.Hostname()
	r := prun(t, "-prepend-pattern", "<%r|%g|%h|%p|%%> ", "-n", "2", "sh", "-c", "echo out; echo err >&2")
	expectCode(t, r, 0)
	for _, rk := range []string{"0", "1"} {
		p := "<" + rk + "|0|" + host + "|0|%> "
		expectContains(t, "stdout", r.stdout, p+"out\n")
		expectContains(t, "stderr", r.stderr, p+"err\n")
	}
	r = prun(t, "-prepend-pattern", "%x", "-n", "1", "true")
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "unknown specifier %x")
}

func extrasFilePatterns(t *testing.T) {
	dir := t.TempDir()
	host, _ := os.Hostname()
	r := prun(t, "-outfile-pattern", filepath.Join(dir, "out.%r.%h"), "-n", "2", "sh", "-c", `echo "out $PMI_RANK"; echo "err $PMI_RANK" >&2`)
	expectCode(t, r, 0)
	if r.stdout != "" {
		t.Errorf("stdout = %q, want it all in the files", r.stdout)
	}
	expectContains(t, "stderr", r.stderr, "err 0\n")
	expectContains(t, "stderr", r.stderr, "err 1\n")
	for _, rk := range []string{"0", "1"} {
		if b, err := os.ReadFile(filepath.Join(dir, "out."+rk+"."+host)); err != nil || string(b) != "out "+rk+"\n" {
			t.Errorf("rank %s's file: %q, %v", rk, b, err)
		}
	}
	// One file for every rank's stderr: whole lines, each once.
	r = prun(t, "-errfile-pattern", filepath.Join(dir, "all.err"), "-n", "3", "sh", "-c", `echo "err $PMI_RANK" >&2`)
	expectCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("stderr = %q", r.stderr)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "all.err"))
	got := lines(string(b))
	sort.Strings(got)
	if strings.Join(got, ",") != "err 0,err 1,err 2" {
		t.Errorf("all.err = %q", b)
	}
}

func extrasVerbose(t *testing.T) {
	// An MPICH-style PMI client: -v shows its requests and the milestones.
	r := prun(t, "-v", "-n", "1", "sh", "-c", `echo "cmd=init pmi_version=1 pmi_subversion=1" >&$PMI_FD; read -r reply <&$PMI_FD; echo cmd=finalize >&$PMI_FD; read -r reply <&$PMI_FD; echo done`)
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "done\n")
	expectContains(t, "stderr", r.stderr, "ranks started")
	expectContains(t, "stderr", r.stderr, "cmd=init")
	// -profile: the milestones alone, no PMI traffic.
	r = prun(t, "-profile", "-n", "1", "sh", "-c", `echo "cmd=init pmi_version=1 pmi_subversion=1" >&$PMI_FD; read -r reply <&$PMI_FD; echo cmd=finalize >&$PMI_FD; read -r reply <&$PMI_FD`)
	expectCode(t, r, 0)
	expectContains(t, "stderr", r.stderr, "ranks started")
	if strings.Contains(r.stderr, "cmd=init") {
		t.Errorf("-profile showed PMI traffic: %q", r.stderr)
	}
	for _, l := range lines(r.stderr) {
		if !strings.HasPrefix(l, "prun timing ") {
			t.Errorf("-profile: %q is not a milestone", l)
		}
	}
	r = prun(t, "-n", "1", "true")
	if r.stderr != "" {
		t.Errorf("without -v: stderr = %q", r.stderr)
	}
}

func extrasLocalhost(t *testing.T) {
	// Hydra's -localhost names this node in the host list; its own
	// address does too. Neither is reached over SSH (there is no
	// such host to reach).
	r := prun(t, "-localhost", "prun-e2e-front", "-H", "prun-e2e-front:2", "-n", "2", "sh", "-c", `echo "on $PMIX_HOSTNAME"`)
	expectCode(t, r, 0)
	if r.stdout != "on prun-e2e-front\non prun-e2e-front\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			r := prun(t, "-H", n.IP.String()+":1", "-n", "1", "echo", "ran")
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "ran\n")
			break
		}
	}
}

func extrasArgvAndCwd(t *testing.T) {
	r := prun(t, "--index-argv-by-rank", "--set-cwd-to-session-dir", "-n", "2", "sh", "-c", `echo "$0 $(pwd)"`)
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	if len(got) != 2 {
		t.Fatalf("stdout = %q", r.stdout)
	}
	for i, l := range got {
		name, dir, _ := strings.Cut(l, " ")
		// The rank's session directory: TMPDIR/prun.PID.X/NSPACE/RANK.
		if name != fmt.Sprintf("sh-%d", i) || filepath.Base(dir) != strconv.Itoa(i) ||
			!strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "prun.") {
			t.Errorf("rank %d: %q", i, l)
		}
	}
}

func extrasPpr(t *testing.T) {
	r := prun(t, "--ppr", "1:package", "--display-devel-map", "-n", "1", "echo", "ran")
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "rank  app  host")
	expectContains(t, "stdout", r.stdout, "ran\n")
	r = prun(t, "--ppr", "1:package", "--novm", "-n", "2", "true")
	expectCode(t, r, 2)
	if ls := lines(r.stderr); len(ls) != 1 {
		t.Errorf("-n 2 with --ppr 1:package on one package: stderr = %q, want one line", r.stderr)
	}
}
