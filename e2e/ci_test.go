package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStdinTargets(t *testing.T) {
	t.Parallel()
	script := writeScript(t, t.TempDir(), "read.sh", `read x; echo "rank $PRUN_RANK got [$x]"`)
	for _, tc := range []struct {
		target string
		want   []string
		not    []string
	}{
		{"0", []string{"rank 0 got [hello]", "rank 1 got []"}, nil},
		{"1", []string{"rank 1 got [hello]", "rank 0 got []"}, nil},
		{"all", []string{"rank 0 got [hello]", "rank 1 got [hello]"}, nil},
		{"none", []string{"rank 0 got []", "rank 1 got []"}, []string{"hello"}},
	} {
		r := run(t, opts{args: []string{"--stdin", tc.target, "-n", "2", script}, stdin: strings.NewReader("hello\n")})
		expectCode(t, r, 0)
		for _, w := range tc.want {
			expectContains(t, "--stdin "+tc.target+" stdout", r.stdout, w)
		}
		for _, n := range tc.not {
			if strings.Contains(r.stdout, n) {
				t.Errorf("--stdin %s: stdout has %q\n%s", tc.target, n, r)
			}
		}
	}
	// Closing stdin early never kills a rank: it just sees EOF.
	r := run(t, opts{args: []string{"-n", "1", "sh", "-c", "exec 0<&-; sleep 0.2; echo alive"}, stdin: strings.NewReader("x\n")})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "alive")
	r = run(t, opts{args: []string{"--stdin", "7", "-n", "2", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "--stdin 7: the job has ranks 0-1")
}

func TestTimeoutStateReport(t *testing.T) {
	t.Parallel()
	r := run(t, opts{args: []string{"--timeout", "2", "--report-state-on-timeout", "--get-stack-traces", "-n", "3", "sleep", "30"}})
	expectCode(t, r, 124)
	expectContains(t, "stderr", r.stderr, "rank 0 (sleep) on ")
	expectContains(t, "stderr", r.stderr, "state S (sleeping)")
	// make test installs gdb: the three stacks, merged into one tree whose
	// branch from main holds every rank.
	expectContains(t, "stderr", r.stderr, "prun: the stacks of the running ranks, merged:\nprun:   3 ranks, 3 threads\n")
	expectContains(t, "stderr", r.stderr, "[0-2] 3 ranks")
	expectContains(t, "stderr", r.stderr, "nanosleep")
	if strings.Contains(r.stderr, "no stack") {
		t.Errorf("a rank without a stack\n%s", r)
	}
}

type reportDoc struct {
	CommandLine  string  `json:"command_line"`
	ExitStatus   int     `json:"exit_status"`
	TotalSeconds float64 `json:"total_seconds"`
	FirstFailure *struct {
		Message string `json:"message"`
		Status  int    `json:"status"`
	} `json:"first_failure"`
	Jobs []struct {
		Map struct {
			Procs []map[string]any `json:"procs"`
		} `json:"map"`
		Ranks []struct {
			Rank      int        `json:"rank"`
			Host      string     `json:"host"`
			Pid       int        `json:"pid"`
			Argv      []string   `json:"argv"`
			Started   bool       `json:"started"`
			Exited    bool       `json:"exited"`
			Status    *int       `json:"exit_status"`
			Signal    string     `json:"signal"`
			StartTime *time.Time `json:"start_time"`
			EndTime   *time.Time `json:"end_time"`
			UserCPU   float64    `json:"user_cpu_seconds"`
			MaxRSSKiB int64      `json:"max_rss_kib"`
		} `json:"ranks"`
	} `json:"jobs"`
}

func readReport(t *testing.T, path string) reportDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	var doc reportDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, b)
	}
	return doc
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	ok := filepath.Join(dir, "ok.json")
	r := run(t, opts{args: []string{"--report", ok, "-n", "2", "sh", "-c", "head -c 2000000 /dev/zero | wc -c >/dev/null"}})
	expectCode(t, r, 0)
	doc := readReport(t, ok)
	if doc.ExitStatus != 0 || doc.FirstFailure != nil || len(doc.Jobs) != 1 || len(doc.Jobs[0].Ranks) != 2 ||
		len(doc.Jobs[0].Map.Procs) != 2 || !strings.Contains(doc.CommandLine, "--report") {
		t.Fatalf("normal job report: %+v", doc)
	}
	for _, rk := range doc.Jobs[0].Ranks {
		if !rk.Started || !rk.Exited || rk.Status == nil || *rk.Status != 0 || rk.Pid <= 0 || rk.Host == "" ||
			rk.Argv[0] != "sh" || rk.StartTime == nil || rk.EndTime == nil || rk.EndTime.Before(*rk.StartTime) ||
			rk.MaxRSSKiB <= 0 {
			t.Errorf("rank record: %+v", rk)
		}
	}

	fail := filepath.Join(dir, "fail.json")
	r = run(t, opts{args: []string{"--report", fail, "-n", "2", "sh", "-c", `[ "$PRUN_RANK" = 1 ] && exit 3; sleep 30`}})
	expectCode(t, r, 3)
	doc = readReport(t, fail)
	if doc.ExitStatus != 3 || doc.FirstFailure == nil || doc.FirstFailure.Status != 3 ||
		!strings.Contains(doc.FirstFailure.Message, "rank 1") {
		t.Fatalf("failing job report: %+v", doc)
	}
	if rk := doc.Jobs[0].Ranks[0]; rk.Signal != "SIGTERM" {
		t.Errorf("rank 0 should have been killed by SIGTERM: %+v", rk)
	}

	dirAb, abort := ompi(t, "abort.c")
	ab := filepath.Join(dir, "abort.json")
	r = run(t, opts{args: []string{"--report", ab, "-n", "2", abort}, dir: dirAb})
	expectCode(t, r, 17)
	doc = readReport(t, ab)
	if doc.FirstFailure == nil || doc.FirstFailure.Status != 17 || !strings.Contains(doc.FirstFailure.Message, "called abort") {
		t.Fatalf("aborted job report: %+v", doc)
	}

	// A run that never started anything still leaves a report.
	early := filepath.Join(dir, "early.json")
	r = run(t, opts{args: []string{"--report", early, "--host", "ghost:1", "-n", "1", "true"}})
	expectCode(t, r, 2) // ghost does not resolve
	if doc = readReport(t, early); doc.ExitStatus != 2 {
		t.Errorf("early failure report: %+v", doc)
	}
}

// Ranks get default signal dispositions: prun catching SIGPIPE must not
// pass an "ignored" SIGPIPE on to them, nor its catching of the signals it
// forwards a blocked or ignored one.
func TestRanksKeepDefaultSignals(t *testing.T) {
	t.Parallel()
	r := run(t, opts{args: []string{"-n", "1", "grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"}})
	expectCode(t, r, 0)
	masks := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		name, hex, ok := strings.Cut(line, ":")
		var m uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(hex), "%x", &m); !ok || err != nil {
			t.Fatalf("status line %q: %v", line, err)
		}
		masks[name] = m
	}
	if len(masks) != 2 {
		t.Fatalf("want SigIgn and SigBlk, got %q", r.stdout)
	}
	for _, sig := range []syscall.Signal{syscall.SIGPIPE, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGWINCH} {
		for name, m := range masks {
			if m&(1<<(uint(sig)-1)) != 0 {
				t.Errorf("the rank has %v in %s (%016x)", sig, name, m)
			}
		}
	}
}

// prun runs with a wide timer slack (internal/timerslack), its ranks with
// the slack prun was started with: an MPI progress loop's short sleeps must
// not stretch.
func TestRanksKeepTimerSlack(t *testing.T) {
	t.Parallel()
	own, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, opts{args: []string{"-n", "2", "cat", "/proc/self/timerslack_ns"}})
	expectCode(t, r, 0)
	if want := strings.Repeat(string(own), 2); r.stdout != want {
		t.Errorf("ranks' slack: want %q, got %q", want, r.stdout)
	}
	// prun's (its main thread's, read once no fork is under way: a fork
	// runs with the original slack on its thread, whichever it is).
	r = run(t, opts{args: []string{"-n", "1", "sh", "-c", "sleep 0.2; cat /proc/$PPID/timerslack_ns"}})
	expectCode(t, r, 0)
	if r.stdout != "1000000\n" {
		t.Errorf("prun's slack: want 1000000, got %q", r.stdout)
	}
}

// prun | head: when prun's reader goes away, the job ends as a pipeline's
// writer would, with 128+SIGPIPE, and nothing is left running.
func TestClosedStdoutEndsJob(t *testing.T) {
	t.Parallel()
	mark := newMark()
	cmd := exec.Command(prunBin, "-n", "2", "yes")
	cmd.Env = append(baseEnv(), "TMPDIR="+t.TempDir(), "E2E_PRUN_MARK="+mark)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	buf := make([]byte, 4)
	io.ReadFull(pr, buf) // like head -2: read a little, then go away
	pr.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("prun kept running after its stdout reader went away")
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+13 {
		t.Errorf("exit %d, want 141", code)
	}
	checkNoSurvivors(t, cmd.Process.Pid, mark, false)
}
