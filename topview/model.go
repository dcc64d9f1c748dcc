package topview

import (
	"context"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"prun/stacktree"
)

// SortKey is a column the table is sorted by.
type SortKey int

const (
	ByCPU SortKey = iota
	ByMem
	ByRank
	ByHost
	ByOutput
	ByQuiet
)

var sortNames = map[SortKey]string{ByCPU: "CPU%", ByMem: "RSS", ByRank: "rank", ByHost: "host", ByOutput: "OUT/s", ByQuiet: "QUIET"}

// sortKeys are top's and htop's letters: P processor, M memory, and for a
// job R rank, H host, O output, T time since output.
var sortKeys = map[string]SortKey{"P": ByCPU, "M": ByMem, "R": ByRank, "H": ByHost, "O": ByOutput, "T": ByQuiet}

// stateCycle is the order 's' steps the state filter through.
var stateCycle = []string{"", "running", "sleeping", "disk sleep", "stopped", Exited}

// Options configure a Model.
type Options struct {
	Interval   time.Duration // between samples; 0 means 1 s
	Thresholds Thresholds    // zero means DefaultThresholds
}

// SampleMsg carries one sample into the model (what the source returned).
type SampleMsg struct {
	Ranks []Rank
	Err   error
	At    time.Time
}

type tickMsg struct{}

// Model is the Bubble Tea model of `prun top`. Its zero sort is by CPU,
// busiest first; the same sort key again, or I, inverts it.
type Model struct {
	ctx context.Context
	src Source
	opt Options

	all  []Rank // the latest sample, marked
	rows []Rank // all, filtered and sorted: what the table shows
	at   time.Time
	err  error

	key       SortKey
	invert    bool
	host      string // "" is every host
	state     string // "" is every state
	apartOnly bool
	text      string // the / filter
	typing    bool   // the / filter is being typed

	offset        int // first row shown
	width, height int
	quitting      bool
}

// NewModel returns a model sampling src (nil: only SampleMsgs feed it).
func NewModel(ctx context.Context, src Source, opt Options) Model {
	if opt.Interval <= 0 {
		opt.Interval = time.Second
	}
	if opt.Thresholds == (Thresholds{}) {
		opt.Thresholds = DefaultThresholds
	}
	return Model{ctx: ctx, src: src, opt: opt, width: 80, height: 24}
}

// Run runs `prun top` on a terminal until q, Ctrl-C or ctx's end.
func Run(ctx context.Context, src Source, opt Options, in io.Reader, out io.Writer) error {
	p := tea.NewProgram(NewModel(ctx, src, opt), tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	_, err := p.Run()
	if err == tea.ErrProgramKilled && ctx.Err() != nil {
		return nil
	}
	return err
}

func (m Model) sample() tea.Cmd {
	if m.src == nil {
		return nil
	}
	ctx, src := m.ctx, m.src
	return func() tea.Msg {
		r, err := src.Sample(ctx)
		return SampleMsg{Ranks: r, Err: err, At: time.Now()}
	}
}

// Init starts sampling.
func (m Model) Init() tea.Cmd { return m.sample() }

// Update handles samples, the clock, the terminal's size and keys. The next
// sample is asked for an interval after the previous one arrived, so a slow
// source is never asked twice at once.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case SampleMsg:
		m.at = msg.At
		m.err = msg.Err
		if msg.Err == nil {
			m.all = msg.Ranks
			Mark(m.all, m.opt.Thresholds)
			m.refresh()
		}
		if m.src == nil {
			return m, nil
		}
		return m, tea.Tick(m.opt.Interval, func(time.Time) tea.Msg { return tickMsg{} })
	case tickMsg:
		return m, m.sample()
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.clamp()
	case tea.KeyMsg:
		return m.onKey(msg)
	}
	return m, nil
}

func (m Model) onKey(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	// Keys typed faster than the terminal is read arrive as one message
	// of several runes ("/2"): each is a key of its own.
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && !k.Paste {
		var model tea.Model = m
		var cmd tea.Cmd
		for _, r := range k.Runes {
			model, cmd = model.(Model).onKey(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: k.Alt})
			if model.(Model).quitting {
				break
			}
		}
		return model, cmd
	}
	if m.typing {
		switch k.Type {
		case tea.KeyEnter:
			m.typing = false
		case tea.KeyEsc:
			m.typing, m.text = false, ""
		case tea.KeyBackspace:
			if r := []rune(m.text); len(r) > 0 {
				m.text = string(r[:len(r)-1])
			}
		case tea.KeyCtrlC:
			m.quitting = true
			return m, tea.Quit
		case tea.KeyRunes, tea.KeySpace:
			m.text += string(k.Runes)
		}
		m.refresh()
		return m, nil
	}
	s := k.String()
	if key, ok := sortKeys[s]; ok {
		if key == m.key {
			m.invert = !m.invert
		} else {
			m.key, m.invert = key, false
		}
		m.refresh()
		return m, nil
	}
	switch s {
	case "q", "ctrl+c":
		m.quitting = true
		return m, tea.Quit
	case "I":
		m.invert = !m.invert
	case "h":
		m.host = next(m.hosts(), m.host)
	case "s":
		m.state = next(stateCycle, m.state)
	case "a":
		m.apartOnly = !m.apartOnly
	case "/":
		m.typing = true
	case "esc":
		m.host, m.state, m.text, m.apartOnly = "", "", "", false
	case "up", "k":
		m.offset--
	case "down", "j":
		m.offset++
	case "pgup":
		m.offset -= m.tableRows()
	case "pgdown", " ":
		m.offset += m.tableRows()
	case "home", "g":
		m.offset = 0
	case "end", "G":
		m.offset = len(m.rows)
	}
	m.refresh()
	return m, nil
}

// next is the element after cur in a cycle that starts with "" (all).
func next(cycle []string, cur string) string {
	for i, c := range cycle {
		if c == cur && i+1 < len(cycle) {
			return cycle[i+1]
		}
	}
	return ""
}

// hosts is "" followed by the sample's hosts, sorted.
func (m Model) hosts() []string {
	seen := map[string]bool{}
	out := []string{""}
	for _, r := range m.all {
		if !seen[r.Host] {
			seen[r.Host] = true
			out = append(out, r.Host)
		}
	}
	sort.Strings(out[1:])
	return out
}

// refresh recomputes the rows from the sample, the filters and the sort.
func (m *Model) refresh() {
	var ranks stacktree.RankSet
	rankText := false
	if t := strings.TrimSpace(m.text); t != "" {
		if s, err := stacktree.ParseRanks(t); err == nil {
			ranks, rankText = s, true
		}
	}
	text := strings.ToLower(strings.TrimSpace(m.text))
	m.rows = m.rows[:0]
	for _, r := range m.all {
		if m.host != "" && r.Host != m.host || m.state != "" && r.State != m.state ||
			m.apartOnly && len(r.Apart) == 0 {
			continue
		}
		if text != "" {
			// A rank list ("3", "0-3,7") selects ranks; other text is
			// looked for in the host, state, wait channel and marks.
			if rankText {
				if !ranks.Has(r.Rank) {
					continue
				}
			} else if !strings.Contains(strings.ToLower(r.Host+" "+r.State+" "+r.Wchan+" "+strings.Join(r.Apart, " ")), text) {
				continue
			}
		}
		m.rows = append(m.rows, r)
	}
	less := m.less()
	sort.SliceStable(m.rows, func(i, j int) bool {
		a, b := m.rows[i], m.rows[j]
		if less(a, b) {
			return !m.invert
		}
		if less(b, a) {
			return m.invert
		}
		return a.Rank < b.Rank // ties stay in rank order either way
	})
	m.clamp()
}

// less orders by the sort key in its natural direction: the most first
// for CPU, memory, output and silence; rank and host ascending.
func (m Model) less() func(a, b Rank) bool {
	switch m.key {
	case ByMem:
		return func(a, b Rank) bool { return a.RSS > b.RSS }
	case ByRank:
		return func(a, b Rank) bool { return a.Rank < b.Rank }
	case ByHost:
		return func(a, b Rank) bool { return a.Host < b.Host }
	case ByOutput:
		return func(a, b Rank) bool { return a.OutRate > b.OutRate }
	case ByQuiet:
		return func(a, b Rank) bool { return a.SinceOutput > b.SinceOutput }
	}
	return func(a, b Rank) bool { return a.CPU > b.CPU }
}

func (m *Model) clamp() {
	m.offset = min(m.offset, len(m.rows)-m.tableRows())
	m.offset = max(m.offset, 0)
}

// Rows are the ranks the table shows, in its order (scrolled or not).
func (m Model) Rows() []Rank { return m.rows }

// Quitting reports whether the user asked to quit.
func (m Model) Quitting() bool { return m.quitting }

// status sums up the sample: "8 ranks on 2 hosts: 6 running, 2 exited".
func (m Model) status() string {
	states := map[string]int{}
	var order []string
	apart := 0
	for _, r := range m.all {
		if states[r.State] == 0 {
			order = append(order, r.State)
		}
		states[r.State]++
		if len(r.Apart) > 0 {
			apart++
		}
	}
	sort.Strings(order)
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = strconv.Itoa(states[s]) + " " + s
	}
	s := plural(len(m.all), "rank") + " on " + plural(len(m.hosts())-1, "host")
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	if apart > 0 {
		s += " · " + strconv.Itoa(apart) + " apart"
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
