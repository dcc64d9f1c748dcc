package topview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"prun/topview/sample"
)

// sampleJob is a job of 8 ranks on two hosts: ranks 0-6 spin and write, rank
// 5 sleeps silently (the hung one), rank 7 exited with status 3.
func sampleJob() []Rank {
	var rs []Rank
	for r := range 8 {
		x := Rank{Rank: r, Host: fmt.Sprintf("node%d", r/4+1), Pid: 1000 + r, State: "running",
			CPU: 90 + float64(r), RSS: int64(r+1) << 20, OutRate: float64(100 * (8 - r)), SinceOutput: 0.5}
		switch r {
		case 5:
			x.State, x.Wchan, x.CPU, x.OutRate, x.SinceOutput = "sleeping", "futex_wait_queue", 0, 0, 42
		case 7:
			x.State, x.ExitStatus, x.CPU, x.OutRate = Exited, 3, 0, 0
		}
		rs = append(rs, x)
	}
	return rs
}

func keys(m Model, ks ...string) Model {
	for _, k := range ks {
		var msg tea.KeyMsg
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEsc}
		case "backspace":
			msg = tea.KeyMsg{Type: tea.KeyBackspace}
		case "down":
			msg = tea.KeyMsg{Type: tea.KeyDown}
		case "end":
			msg = tea.KeyMsg{Type: tea.KeyEnd}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		next, _ := m.Update(msg)
		m = next.(Model)
	}
	return m
}

func order(m Model) string {
	var s []string
	for _, r := range m.Rows() {
		s = append(s, fmt.Sprint(r.Rank))
	}
	return strings.Join(s, ",")
}

func loaded(t *testing.T, w, h int) Model {
	t.Helper()
	m := NewModel(context.Background(), nil, Options{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	next, _ = next.(Model).Update(SampleMsg{Ranks: sampleJob(), At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	return next.(Model)
}

func TestSortKeys(t *testing.T) {
	m := loaded(t, 80, 24)
	for _, c := range []struct{ keys, want string }{
		{"", "6,4,3,2,1,0,5,7"},   // CPU, busiest first; ties in rank order
		{"P", "5,7,0,1,2,3,4,6"},  // the same key again inverts
		{"PR", "0,1,2,3,4,5,6,7"}, // rank ascending
		{"PRR", "7,6,5,4,3,2,1,0"},
		{"PRRI", "0,1,2,3,4,5,6,7"},
		{"M", "7,6,5,4,3,2,1,0"},
		{"O", "0,1,2,3,4,6,5,7"},
		{"T", "5,0,1,2,3,4,6,7"},
		{"H", "0,1,2,3,4,5,6,7"},
		{"HI", "4,5,6,7,0,1,2,3"}, // hosts inverted, ranks within still ascending
	} {
		got := keys(m, strings.Split(c.keys, "")...)
		if c.keys == "" {
			got = m
		}
		if o := order(got); o != c.want {
			t.Errorf("keys %q: order %s, want %s", c.keys, o, c.want)
		}
	}
}

func TestFilters(t *testing.T) {
	m := keys(loaded(t, 80, 24), "R")
	for _, c := range []struct {
		keys []string
		want string
	}{
		{[]string{"h"}, "0,1,2,3"},
		{[]string{"h", "h"}, "4,5,6,7"},
		{[]string{"h", "h", "h"}, "0,1,2,3,4,5,6,7"},
		{[]string{"s"}, "0,1,2,3,4,6"},           // running
		{[]string{"s", "s"}, "5"},                // sleeping
		{[]string{"s", "s", "s", "s", "s"}, "7"}, // exited
		{[]string{"a"}, "5"},                     // apart only
		{[]string{"/", "3", "enter"}, "3"},
		{[]string{"/", "0", "-", "2", ",", "7", "enter"}, "0,1,2,7"},
		{[]string{"/", "f", "u", "t", "e", "x"}, "5"}, // live, while typing
		{[]string{"/", "N", "O", "D", "E", "2", "enter"}, "4,5,6,7"},
		{[]string{"/", "n", "o", "d", "e", "2", "backspace", "1", "enter"}, "0,1,2,3"},
		{[]string{"/", "x", "esc"}, "0,1,2,3,4,5,6,7"},
		{[]string{"h", "s", "/", "z", "enter", "esc"}, "0,1,2,3,4,5,6,7"},
		{[]string{"h", "s"}, "0,1,2,3"},
		{[]string{"/", "z", "q", "enter"}, ""}, // q typed into the filter does not quit
		{[]string{"R/3", "enter"}, "3"},        // keys read together are keys one by one
	} {
		got := keys(m, c.keys...)
		if o := order(got); o != c.want {
			t.Errorf("keys %q: rows %s, want %s", c.keys, o, c.want)
		}
		if got.Quitting() {
			t.Errorf("keys %q quit", c.keys)
		}
	}
}

func TestQuit(t *testing.T) {
	for _, k := range []tea.KeyMsg{{Type: tea.KeyRunes, Runes: []rune("q")}, {Type: tea.KeyCtrlC}} {
		next, cmd := loaded(t, 80, 24).Update(k)
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok || !next.(Model).Quitting() || next.View() != "" {
			t.Errorf("%s does not quit", k)
		}
	}
}

// screen checks that a rendering fits w x h and returns its lines.
func screen(t *testing.T, m Model, w, h int) []string {
	t.Helper()
	v := m.View()
	lines := strings.Split(v, "\n")
	if len(lines) > h {
		t.Errorf("%dx%d: %d lines", w, h, len(lines))
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			t.Errorf("%dx%d: line %d is %d wide: %q", w, h, i, n, ansi.Strip(l))
		}
	}
	for i := range lines {
		lines[i] = ansi.Strip(lines[i])
	}
	return lines
}

func TestView80x24(t *testing.T) {
	m := loaded(t, 80, 24)
	lines := screen(t, m, 80, 24)
	t.Logf("\n%s", strings.Join(lines, "\n"))
	if len(lines) != 24 {
		t.Errorf("%d lines, want the whole screen", len(lines))
	}
	if strings.TrimSpace(lines[0]) != "8 ranks on 2 hosts: 1 exited, 6 running, 1 sleeping · 1 apart" ||
		!strings.HasPrefix(lines[1], "sort CPU% ↓") || !strings.HasSuffix(lines[1], "prun top 03:04:05") {
		t.Errorf("title %q, %q", lines[0], lines[1])
	}
	for _, col := range []string{"RANK", "HOST", "PID", "STATE", "CPU%↓", "RSS", "OUT/s", "QUIET", "APART", "WCHAN"} {
		if !strings.Contains(lines[2], col) {
			t.Errorf("header lacks %s: %q", col, lines[2])
		}
	}
	// Rank 5's row: every column, marked both ways.
	var row5, row7 string
	for _, l := range lines[3:11] {
		f := strings.Fields(l)
		switch f[0] {
		case "5":
			row5 = l
		case "7":
			row7 = l
		}
	}
	if f := strings.Fields(row5); len(f) != 11 || f[1] != "node2" || f[2] != "1005" || f[3] != "sleeping" ||
		f[4] != "0.0" || f[5] != "6.0M" || f[6] != "0" || f[7] != "42s" || f[8] != "idle" || f[9] != "silent" ||
		f[10] != "futex_w…" {
		t.Errorf("rank 5's row %q", row5)
	}
	if !strings.Contains(row7, "exit 3") {
		t.Errorf("rank 7's row %q", row7)
	}
	if !strings.HasPrefix(lines[23], "P cpu M mem R rank") || !strings.HasSuffix(strings.TrimSpace(lines[23]), "/ q") {
		t.Errorf("help line %q", lines[23])
	}
}

// TestViewSizes: narrow terminals drop columns rather than wrap, short ones
// scroll, wide ones give the host and wait columns room.
func TestViewSizes(t *testing.T) {
	for _, sz := range [][2]int{{20, 5}, {40, 10}, {60, 12}, {120, 40}, {250, 60}} {
		m := loaded(t, sz[0], sz[1])
		lines := screen(t, m, sz[0], sz[1])
		if !strings.Contains(lines[2], "RANK") || sz[0] >= 40 && !strings.Contains(lines[2], "CPU%") {
			t.Errorf("%v: header %q", sz, lines[2])
		}
	}
	lines := screen(t, loaded(t, 120, 40), 120, 40)
	if !strings.Contains(strings.Join(lines, "\n"), "futex_wait_queue") {
		t.Error("120 columns: the wait channel is cut")
	}
	// 100 ranks on 10 lines: 6 rows, then scrolling.
	m := NewModel(context.Background(), nil, Options{})
	var many []Rank
	for r := range 100 {
		many = append(many, Rank{Rank: r, Host: "h", State: "running"})
	}
	next, _ := m.Update(tea.WindowSizeMsg{Width: 80, Height: 10})
	next, _ = next.(Model).Update(SampleMsg{Ranks: many})
	m = keys(next.(Model), "R")
	lines = screen(t, m, 80, 10)
	if f := strings.Fields(lines[3]); f[0] != "0" || !strings.HasPrefix(lines[9], "1-6 of 100") {
		t.Errorf("top of 100: %q ... %q", lines[3], lines[9])
	}
	m = keys(m, "down", "down")
	if lines = screen(t, m, 80, 10); strings.Fields(lines[3])[0] != "2" {
		t.Errorf("after two downs: %q", lines[3])
	}
	m = keys(m, "end")
	if lines = screen(t, m, 80, 10); strings.Fields(lines[8])[0] != "99" || !strings.HasPrefix(lines[9], "95-100 of 100") {
		t.Errorf("at the end: %q ... %q", lines[8], lines[9])
	}
}

func TestSampleError(t *testing.T) {
	m := loaded(t, 80, 24)
	next, _ := m.Update(SampleMsg{Err: errors.New("node3 did not answer")})
	m = next.(Model)
	lines := screen(t, m, 80, 24)
	if lines[1] != fit("sample failed: node3 did not answer", 80, false) || len(m.Rows()) != 8 {
		t.Errorf("after a failed sample: %q, %d rows", lines[1], len(m.Rows()))
	}
}

func TestMark(t *testing.T) {
	rs := sampleJob()
	Mark(rs, DefaultThresholds)
	for _, r := range rs {
		want := ""
		if r.Rank == 5 {
			want = "idle silent"
		}
		if got := strings.Join(r.Apart, " "); got != want {
			t.Errorf("rank %d apart %q, want %q", r.Rank, got, want)
		}
	}
	// Two ranks: the other's median is the other itself.
	two := []Rank{{State: "running", CPU: 100}, {Rank: 1, State: "sleeping", SinceOutput: 60}}
	Mark(two, DefaultThresholds)
	if strings.Join(two[1].Apart, " ") != "idle silent" || two[0].Apart != nil {
		t.Errorf("two ranks: %v, %v", two[0].Apart, two[1].Apart)
	}
	// All idle: nobody stands apart; one live rank: nobody either.
	idle := []Rank{{State: "sleeping"}, {Rank: 1, State: "sleeping"}, {Rank: 2, State: Exited, CPU: 100}}
	Mark(idle, DefaultThresholds)
	Mark(idle[1:], DefaultThresholds)
	for _, r := range idle {
		if r.Apart != nil {
			t.Errorf("rank %d apart %v", r.Rank, r.Apart)
		}
	}
}

func TestHuman(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1.0K", 1536: "1.5K", 20480: "20K",
		5 << 20: "5.0M", 1023 << 20: "1023M"[:0] + "1.0G", 3 << 40: "3.0T"} {
		if got := sample.Human(v); got != want {
			t.Errorf("Human(%v) = %q, want %q", v, got, want)
		}
	}
	if duration(59.9) != "59s" || duration(61) != "1m" || duration(7200) != "2h" || duration(3*86400) != "3d" {
		t.Error("duration")
	}
}
