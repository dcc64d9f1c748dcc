package e2e

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/stacktree"
	"prun/topview/sample"
)

// prun top and prun stack (issue 41), run as a user would: another prun
// beside the job's, finding it by its pid.

// inspectCmd runs `prun top|stack ARGS` against the running prun p (its
// TMPDIR, where its session directory is) and returns stdout, stderr and
// the exit status.
func inspectCmd(t *testing.T, p *proc, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(prunBin, args...)
	cmd.Env = append(append(baseEnv(), "TMPDIR="+p.tmpdir), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("prun %s hung\nstderr: %s", strings.Join(args, " "), errb.String())
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// topOnce is one sample of p's job, as prun top --once --json gives it.
func topOnce(t *testing.T, p *proc, env []string) []sample.Rank {
	t.Helper()
	pid := strconv.Itoa(p.cmd.Process.Pid)
	out, errs, code := inspectCmd(t, p, env, "top", pid, "--once", "--json")
	if code != 0 {
		t.Fatalf("prun top %s --once --json: exit %d\n%s", pid, code, errs)
	}
	var snap sample.Snapshot
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatalf("prun top --once --json: %v\n%s", err, out)
	}
	return snap.Ranks
}

// TestInspectMultiNode: prun top and prun stack of jobs across the four
// test hosts.
func TestInspectMultiNode(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	t.Run("top", func(t *testing.T) { inspectTop(t, m) })
	t.Run("timeout-stacks", func(t *testing.T) { inspectTimeoutStacks(t, m) })
	for _, mpi := range []struct {
		name  string
		build func(*testing.T, string) (string, string)
	}{{"ompi", ompi}, {"mpich", mpich}} {
		t.Run("stack-"+mpi.name, func(t *testing.T) { inspectHang(t, m, mpi.build) })
	}
}

// inspectTop: one rank per host: 0 spins, 1 stops itself, 2 exits with 3
// (the job goes on: --enable-recovery), 3 writes a line every 0.2 s.
func inspectTop(t *testing.T, m *mn) {
	script := `case $PRUN_RANK in
0) while :; do :; done ;;
1) kill -STOP $$; sleep 1000 ;;
2) sleep 0.5; exit 3 ;;
3) while :; do echo tick; sleep 0.2; done ;;
esac`
	p := startPrun(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "--enable-recovery", "-n", "4",
		"sh", "-c", script}, env: m.env(), timeout: 3 * time.Minute})
	p.waitOutput(30*time.Second, "tick\n")
	var ranks []sample.Rank
	deadline := time.Now().Add(30 * time.Second)
	for {
		ranks = topOnce(t, p, m.env())
		// The stopped rank is idle once the others' median CPU is busy
		// enough (sample.DefaultThresholds): on a loaded machine, a while.
		if len(ranks) == 4 && ranks[1].State == "stopped" && ranks[2].State == sample.Exited && ranks[0].CPU > 20 &&
			slices.Contains(ranks[1].Apart, "idle") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample with rank 1 stopped and marked idle, rank 2 exited, rank 0 busy in 30 s: %+v", ranks)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%+v", ranks)
	for i, r := range ranks {
		if r.Rank != i || r.Host != m.hosts[i] || r.Pid <= 0 {
			t.Errorf("rank %d: %+v, want rank %d on %s with its pid", i, r, i, m.hosts[i])
		}
	}
	if r := ranks[0]; r.State != "running" || len(r.Apart) != 0 || r.RSS <= 0 {
		t.Errorf("the spinner: %+v", r)
	}
	if r := ranks[1]; !strings.Contains(strings.Join(r.Apart, " "), "idle") {
		t.Errorf("the stopped rank is not marked idle: %+v", r)
	}
	if r := ranks[2]; r.ExitStatus != 3 || r.Signal != 0 {
		t.Errorf("the exited rank: %+v", r)
	}
	if r := ranks[3]; r.OutRate <= 0 || r.SinceOutput > 2 {
		t.Errorf("the writer: %+v", r)
	}

	// The live view in a real terminal of 80x24: keys sort, q quits.
	t.Run("tmux", func(t *testing.T) { topTmux(t, p, m) })

	// Another user gets nothing: one line, a failure.
	t.Run("nobody", func(t *testing.T) { topNobody(t, p) })
	p.signal(syscall.SIGTERM)
	p.wait()
	m.checkClean(t, 10*time.Second)
}

// topNobody: another user gets nothing from prun top or prun stack of p's
// job: one line, a failure.
func topNobody(t *testing.T, p *proc) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "prun")
	copyFile(t, prunBin, bin)
	os.Chmod(bin, 0o755)
	pid := strconv.Itoa(p.cmd.Process.Pid)
	for _, args := range [][]string{{"top", pid, "--once", "--json"}, {"stack", pid}} {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)...)
		cmd.Env = append(baseEnv(), "TMPDIR="+p.tmpdir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err == nil || out.Len() > 0 || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("nobody's prun %s: %v, stdout %q, stderr %q", strings.Join(args, " "), err, out.String(), errb.String())
		}
	}
}

// inspectTimeoutStacks: --timeout --get-stack-traces gathers the same
// merged tree along the daemon tree: every host's ranks in one branch.
func inspectTimeoutStacks(t *testing.T, m *mn) {
	r := m.run(t, opts{args: []string{"--timeout", "3", "--get-stack-traces", "--hostfile", m.hostfile, "-n", "8",
		"sleep", "30"}})
	expectCode(t, r, 124)
	all := r.stdout + r.stderr
	if !strings.Contains(all, "the stacks of the running ranks, merged:") || !strings.Contains(all, "[0-7] 8 ranks") ||
		strings.Contains(all, "no stack") {
		t.Errorf("want one merged tree of the 8 ranks:\n%s", r)
	}
}

// inspectHang: a hung MPI job, one rank on every host but the last rank
// never reaching the barrier (testdata/barrierhang.c): prun stack shows two
// branches, the barrier's with ranks 0-6 and the lone rank 7's; the picture
// renders.
func inspectHang(t *testing.T, m *mn, build func(*testing.T, string) (string, string)) {
	dir, prog := build(t, "barrierhang.c")
	p := startPrun(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "8", prog},
		dir: dir, env: m.env(), timeout: 4 * time.Minute})
	for r := 0; r < 8; r++ {
		p.waitOutput(60*time.Second, fmt.Sprintf("rank %d pid ", r))
	}
	pid := strconv.Itoa(p.cmd.Process.Pid)
	start := time.Now()
	out, errs, code := inspectCmd(t, p, m.env(), "stack", pid, "--timeout", "60s")
	t.Logf("prun stack took %v:\n%s", time.Since(start), out)
	if code != 0 {
		t.Fatalf("prun stack: exit %d\n%s", code, errs)
	}
	checkHangTree(t, out)
	// --ranks: only those.
	out, errs, code = inspectCmd(t, p, m.env(), "stack", pid, "--timeout", "60s", "--ranks", "6-7")
	if code != 0 || !strings.Contains(out, "2 ranks") || strings.Contains(out, "[0-") {
		t.Errorf("prun stack --ranks 6-7: exit %d\n%s%s", code, out, errs)
	}
	// The picture: SVG of the right size, and the same graph drawn
	// as PNG by Graphviz.
	svg := filepath.Join(t.TempDir(), "stack.svg")
	if _, errs, code := inspectCmd(t, p, m.env(), "stack", pid, "--timeout", "60s", "--format", "svg", "-o", svg); code != 0 {
		t.Fatalf("prun stack --format svg: exit %d\n%s", code, errs)
	}
	checkSVG(t, svg)
	dot, errs, code := inspectCmd(t, p, m.env(), "stack", pid, "--timeout", "60s", "--format", "dot")
	if code != 0 {
		t.Fatalf("prun stack --format dot: exit %d\n%s", code, errs)
	}
	pngb, err := stacktree.Convert(t.Context(), []byte(dot), "png")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(pngb))
	if err != nil || cfg.Width < 200 || cfg.Height < 200 || cfg.Width > 8000 || cfg.Height > 8000 {
		t.Errorf("PNG %dx%d: %v", cfg.Width, cfg.Height, err)
	}
	p.signal(syscall.SIGTERM)
	p.wait()
	m.checkClean(t, 10*time.Second)
}

// checkHangTree checks prun stack's text of barrierhang.c's 8 ranks: a
// branch through the barrier with ranks 0-6 and never_arrives with rank 7
// alone, marked apart, and no rank without a stack.
func checkHangTree(t *testing.T, text string) {
	t.Helper()
	var bar, lone bool
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "Barrier") && strings.Contains(l, "[0-6] 7 ranks") {
			bar = true
		}
		if strings.Contains(l, "never_arrives") && strings.Contains(l, "[7] 1 rank") && strings.Contains(l, stacktree.ApartMark) {
			lone = true
		}
	}
	if !bar || !lone || !strings.HasPrefix(text, "8 ranks") || strings.Contains(text, "no stack") {
		t.Errorf("want the barrier's branch with ranks 0-6 and rank 7 apart in never_arrives:\n%s", text)
	}
}

// checkSVG checks that the file is an SVG picture of a readable size.
func checkSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var svg struct {
		XMLName xml.Name
		Width   string `xml:"width,attr"`
		Height  string `xml:"height,attr"`
	}
	if err := xml.Unmarshal(b, &svg); err != nil || svg.XMLName.Local != "svg" {
		t.Fatalf("not SVG: %v\n%.300s", err, b)
	}
	w, _ := strconv.Atoi(strings.TrimSuffix(svg.Width, "pt"))
	h, _ := strconv.Atoi(strings.TrimSuffix(svg.Height, "pt"))
	if w < 150 || h < 150 {
		t.Errorf("SVG %s x %s", svg.Width, svg.Height)
	}
}

// topTmux runs prun top on p's job in tmux at 80x24, checks the screen,
// sorts by rank both ways and quits.
func topTmux(t *testing.T, p *proc, m *mn) {
	env := append(append(baseEnv(), "TMPDIR="+p.tmpdir, "TERM=xterm-256color"), m.env()...)
	cmdline := "env"
	for _, kv := range env {
		if strings.HasPrefix(kv, "TMPDIR=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "PATH=") {
			cmdline += " " + strconv.Quote(kv)
		}
	}
	pn := startPane(t, fmt.Sprintf("%s %s top %d", cmdline, prunBin, p.cmd.Process.Pid))
	lines := pn.waitFor("the job's four ranks", func(lines []string) bool {
		s := strings.Join(lines, "\n")
		return len(lines) == 24 && len(topRows(lines)) == 4 && strings.Contains(s, "stopped") && strings.Contains(s, "exit 3") &&
			strings.Contains(s, "idle")
	})
	t.Logf("prun top at 80x24:\n%s", pn.last)
	if out := os.Getenv("PRUN_TOP_CAPTURE"); out != "" {
		os.WriteFile(out, []byte(pn.last), 0o644) // for README.md
	}
	if !strings.HasPrefix(lines[0], "4 ranks on 4 hosts") {
		t.Errorf("title: %q", lines[0])
	}
	for i, l := range lines {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line %d is %d wide", i, n)
		}
	}
	for _, h := range m.hosts {
		if !strings.Contains(strings.Join(lines, "\n"), h) {
			t.Errorf("no row of %s", h)
		}
	}
	first := func(row string) string {
		if f := strings.Fields(row); len(f) > 0 {
			return f[0]
		}
		return ""
	}
	pn.keys("R")
	pn.waitFor("rank order", func(l []string) bool {
		r := topRows(l)
		return len(r) == 4 && first(r[0]) == "0" && first(r[3]) == "3"
	})
	pn.keys("R")
	pn.waitFor("reversed rank order", func(l []string) bool {
		r := topRows(l)
		return len(r) == 4 && first(r[0]) == "3" && first(r[3]) == "0"
	})
	pn.keys("q")
	pn.waitGone("prun top", 10*time.Second)
}

// topRows are the table's non-empty rows on prun top's screen.
func topRows(lines []string) []string {
	var out []string
	for _, l := range lines[3 : len(lines)-1] {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// pane is a tmux session of one command in a terminal of 80x24, on a
// server of its own (removed at the test's end).
type pane struct {
	t          *testing.T
	tmux, sock string
	last       string // the last screen captured
}

func startPane(t *testing.T, cmdline string) *pane {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("tmux is not installed (make deps installs it): %v", err)
	}
	pn := &pane{t: t, tmux: tmux, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	if out, err := pn.tm("new-session", "-d", "-s", "top", "-x", "80", "-y", "24", cmdline); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { pn.tm("kill-server") })
	return pn
}

func (pn *pane) tm(args ...string) (string, error) {
	out, err := exec.Command(pn.tmux, append([]string{"-S", pn.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	return string(out), err
}

// waitFor waits up to 20 s for a screen that ok accepts, and returns it.
func (pn *pane) waitFor(what string, ok func(lines []string) bool) []string {
	pn.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := pn.tm("capture-pane", "-p", "-t", "top")
		if err == nil {
			pn.last = out
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if ok(lines) {
				return lines
			}
		}
		if time.Now().After(deadline) {
			pn.t.Fatalf("no %s on the screen:\n%s", what, pn.last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (pn *pane) keys(k ...string) {
	pn.t.Helper()
	if out, err := pn.tm(append([]string{"send-keys", "-t", "top"}, k...)...); err != nil {
		pn.t.Fatalf("send-keys %v: %v\n%s", k, err, out)
	}
}

// waitGone waits for the command to end (the session with it).
func (pn *pane) waitGone(what string, d time.Duration) {
	pn.t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, err := pn.tm("has-session", "-t", "top"); err != nil {
			return
		}
		if time.Now().After(deadline) {
			pn.t.Fatalf("%s still runs after q:\n%s", what, pn.last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTopNoSuchPrun: prun top and prun stack of nothing say so in one
// line and fail at once; bad flags are usage errors.
func TestTopNoSuchPrun(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	runIt := func(args ...string) (string, string, int) {
		cmd := exec.Command(prunBin, args...)
		cmd.Env = append(baseEnv(), "TMPDIR="+tmp)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		cmd.Run()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("prun %s took %v", strings.Join(args, " "), d)
		}
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	oneLine := regexp.MustCompile(`^prun (top|stack): [^\n]+\n$`)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"top", "999999"}, 1, "no process 999999"},
		{[]string{"stack", "999999"}, 1, "no process 999999"},
		{[]string{"top", "--once", "--json", strconv.Itoa(os.Getpid())}, 1, "is not a running prun"},
		{[]string{"top"}, 1, "no prun of yours is running here"},
		{[]string{"top", "/nonexistent"}, 1, "not a running prun's session directory"},
		{[]string{"top", "--interval", "0s", "1"}, 2, "--interval"},
		{[]string{"top", "--bogus"}, 2, "unknown flag"},
		{[]string{"stack", "--ranks", "3-1", "1"}, 2, "--ranks"},
		{[]string{"stack", "--format", "png", "1"}, 2, "--format"},
		{[]string{"stack", "1", "2"}, 2, "one JOB at most"},
	} {
		out, errs, code := runIt(c.args...)
		if code != c.code || out != "" || !oneLine.MatchString(errs) || !strings.Contains(errs, c.want) {
			t.Errorf("prun %s: exit %d, stdout %q, stderr %q; want exit %d, one line with %q", strings.Join(c.args, " "),
				code, out, errs, c.code, c.want)
		}
	}
	if out, _, code := runIt("top", "--help"); code != 0 || !strings.Contains(out, "usage: prun top") {
		t.Errorf("prun top --help: %d %q", code, out)
	}
}

// TestInspectDVM: a DVM's jobs by number (the DVM found as submissions
// find it: PRUN_DVM), and with one job running, no number at all; two
// running jobs without a number: one line naming them.
func TestInspectDVM(t *testing.T) {
	t.Parallel()
	d := startDVM(t, nil, "--host", "localhost:4")
	a := d.start(t, opts{args: []string{"-n", "2", "sh", "-c", "echo up; exec sleep 600"}})
	a.waitOutput(20*time.Second, "up\nup\n")
	env := append(slices.Clone(d.env), "PRUN_DVM="+d.dir)
	runIt := func(args ...string) (string, string, int) {
		cmd := exec.Command(prunBin, args...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Run()
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	for _, args := range [][]string{{"top", "1", "--once", "--json"}, {"top", "--once", "--json"}} {
		out, errs, code := runIt(args...)
		var snap sample.Snapshot
		if code != 0 || json.Unmarshal([]byte(out), &snap) != nil || len(snap.Ranks) != 2 || snap.Ranks[1].State != "sleeping" {
			t.Errorf("prun %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
	out, errs, code := runIt("stack", "1", "--timeout", "30s")
	if code != 0 || !strings.HasPrefix(out, "2 ranks") || !strings.Contains(out, "[0-1] 2 ranks") {
		t.Errorf("prun stack 1: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := runIt("top", "7", "--once", "--json"); code != 1 || !strings.Contains(errs, "no job 7 runs in this DVM (running: 1)") {
		t.Errorf("prun top 7: exit %d, %q", code, errs)
	}
	b := d.start(t, opts{args: []string{"-n", "1", "sh", "-c", "echo up; exec sleep 600"}})
	b.waitOutput(20*time.Second, "up\n")
	if _, errs, code := runIt("top", "--once", "--json"); code != 1 || !strings.Contains(errs, "2 jobs run in this DVM: name one (1, 2)") {
		t.Errorf("prun top with two jobs: exit %d, %q", code, errs)
	}
	a.signal(syscall.SIGTERM)
	b.signal(syscall.SIGTERM)
	a.wait()
	b.wait()
}
