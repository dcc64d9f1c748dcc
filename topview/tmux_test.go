package topview

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"prun/internal/ctest"
	"prun/internal/procstat"
)

// tmuxPane is a tmux server on a private socket and its pane "top".
type tmuxPane struct {
	t          *testing.T
	tmux, sock string
	last       string // the screen last read
}

// run runs a tmux command on the server.
func (p *tmuxPane) run(args ...string) (string, error) {
	out, err := exec.Command(p.tmux, append([]string{"-S", p.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	return string(out), err
}

// waitFor polls the pane until ok holds for its lines.
func (p *tmuxPane) waitFor(what string, ok func(lines []string) bool) []string {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := p.run("capture-pane", "-p", "-t", "top")
		if err == nil {
			p.last = out
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if ok(lines) {
				return lines
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %s on the screen:\n%s", what, p.last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// keys types k into the pane.
func (p *tmuxPane) keys(k ...string) {
	p.t.Helper()
	if out, err := p.run(append([]string{"send-keys", "-t", "top"}, k...)...); err != nil {
		p.t.Fatalf("send-keys %v: %v\n%s", k, err, out)
	}
}

// tmuxRows are the table's lines: after the header, up to the help line.
func tmuxRows(lines []string) []string {
	var out []string
	for _, l := range lines[3 : len(lines)-1] {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// tmuxField is a row's i-th field, or "".
func tmuxField(row string, i int) string {
	f := strings.Fields(row)
	if i < len(f) {
		return f[i]
	}
	return ""
}

// startTopdemo builds topdemo and runs it in a tmux pane of 80x24.
func startTopdemo(t *testing.T) *tmuxPane {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("tmux is not installed (make deps installs it): %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "topdemo")
	build := exec.Command("go", "build", "-o", bin, "./topview/cmd/topdemo")
	build.Dir = ctest.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	p := &tmuxPane{t: t, tmux: tmux, sock: filepath.Join(dir, "tmux.sock")}
	if out, err := p.run("new-session", "-d", "-s", "top", "-x", "80", "-y", "24",
		bin+" -ranks spin,write,sleep,exit3 -quiet 1s"); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { p.run("kill-server") })
	return p
}

// checkFirstScreen checks the screen of topdemo once its ranks have
// settled, and returns the pid of rank 0.
func checkFirstScreen(t *testing.T, p *tmuxPane) (spinPid int) {
	rows, field := tmuxRows, tmuxField
	// The sleeper falls silent after 1 s beside ranks that write; the
	// last rank exits with 3 after 1 s.
	lines := p.waitFor("silent sleeper and exited rank", func(lines []string) bool {
		s := strings.Join(lines, "\n")
		return strings.Contains(s, "silent") && strings.Contains(s, "exit 3") && len(rows(lines)) == 4
	})
	t.Logf("screen:\n%s", p.last)
	if len(lines) != 24 {
		t.Errorf("%d lines on a 24-line terminal", len(lines))
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("line %d is %d wide", i, w)
		}
	}
	if !strings.HasPrefix(lines[0], "4 ranks on 1 host") || !strings.Contains(lines[2], "RANK") {
		t.Errorf("title or header wrong:\n%s", p.last)
	}
	for _, r := range rows(lines) {
		switch field(r, 0) {
		case "0":
			spinPid, _ = strconv.Atoi(field(r, 2))
		case "2":
			if !strings.Contains(r, "sleeping") || !strings.Contains(r, "silent") {
				t.Errorf("the sleeper's row: %q", r)
			}
		}
	}
	return spinPid
}

// TestTmux runs topdemo in a real terminal of 80x24 (tmux on a private
// socket) over four real processes, types keys and reads the screen.
func TestTmux(t *testing.T) {
	p := startTopdemo(t)
	rows, field := tmuxRows, tmuxField
	spinPid := checkFirstScreen(t, p)

	p.keys("R")
	p.waitFor("rank order", func(l []string) bool {
		r := rows(l)
		return len(r) == 4 && field(r[0], 0) == "0" && field(r[3], 0) == "3" && strings.Contains(l[2], "RANK↓")
	})
	p.keys("R")
	p.waitFor("reversed rank order", func(l []string) bool {
		r := rows(l)
		return len(r) == 4 && field(r[0], 0) == "3" && strings.Contains(l[2], "RANK↑")
	})
	p.keys("/", "2", "Enter")
	p.waitFor("rank 2 alone", func(l []string) bool {
		r := rows(l)
		return len(r) == 1 && field(r[0], 0) == "2" && strings.Contains(l[1], "/2 (1 of 4)")
	})
	p.keys("Escape")
	p.waitFor("every rank again", func(l []string) bool { return len(rows(l)) == 4 })

	p.keys("q")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := p.run("has-session", "-t", "top"); err != nil {
			break // topdemo quit, and its session with it
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running after q:\n%s", p.last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// topdemo ends the processes it started.
	for spinPid > 0 {
		st, err := procstat.Read(spinPid)
		if err != nil || st.State == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spinner (pid %d) outlived topdemo", spinPid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if spinPid == 0 {
		t.Error("no pid on rank 0's row")
	}
	if _, err := os.Stat(p.sock); err != nil {
		t.Logf("tmux socket: %v", err)
	}
}
