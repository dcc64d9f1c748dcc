package topview

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"prun/topview/sample"
)

// column is one column of the table. Columns of a higher drop number are
// left out first when the terminal is too narrow; the flexible ones (host,
// wait channel) take what is left, between min and max.
type column struct {
	title    string
	width    int // fixed width, or the minimum of a flexible column
	max      int // > width: flexible
	right    bool
	drop     int // 0: never dropped
	cell     func(r Rank) string
	sortedBy SortKey
}

var columns = []column{
	{title: "RANK", width: 5, right: true, cell: func(r Rank) string { return strconv.Itoa(r.Rank) }, sortedBy: ByRank},
	{title: "HOST", width: 8, max: 16, drop: 3, cell: func(r Rank) string { return r.Host }, sortedBy: ByHost},
	{title: "PID", width: 7, right: true, drop: 4, cell: func(r Rank) string { return strconv.Itoa(r.Pid) }, sortedBy: -1},
	{title: "STATE", width: 8, cell: stateCell, sortedBy: -1},
	{title: "CPU%", width: 6, right: true, cell: func(r Rank) string {
		if !r.Live() {
			return "-"
		}
		return strconv.FormatFloat(r.CPU, 'f', 1, 64)
	}, sortedBy: ByCPU},
	{title: "RSS", width: 6, right: true, drop: 2, cell: func(r Rank) string {
		if !r.Live() {
			return "-"
		}
		return sample.Human(float64(r.RSS))
	}, sortedBy: ByMem},
	{title: "OUT/s", width: 6, right: true, drop: 2, cell: func(r Rank) string { return sample.Human(r.OutRate) }, sortedBy: ByOutput},
	{title: "QUIET", width: 6, right: true, drop: 1, cell: func(r Rank) string { return duration(r.SinceOutput) }, sortedBy: ByQuiet},
	{title: "APART", width: 11, cell: func(r Rank) string { return strings.Join(r.Apart, " ") }, sortedBy: -1},
	{title: "WCHAN", width: 8, max: 40, drop: 5, cell: func(r Rank) string {
		if r.State == "running" {
			return ""
		}
		return r.Wchan
	}, sortedBy: -1},
}

func stateCell(r Rank) string {
	if r.Live() {
		return r.State
	}
	if r.Signal != 0 {
		return "signal " + strconv.Itoa(r.Signal)
	}
	return "exit " + strconv.Itoa(r.ExitStatus)
}

// duration writes seconds as 0s, 59s, 12m, 5h, 3d.
func duration(s float64) string {
	switch {
	case s < 60:
		return strconv.Itoa(int(s)) + "s"
	case s < 3600:
		return strconv.Itoa(int(s/60)) + "m"
	case s < 86400:
		return strconv.Itoa(int(s/3600)) + "h"
	}
	return strconv.Itoa(int(s/86400)) + "d"
}

// layout picks the columns that fit width and their widths.
func layout(width int) ([]column, []int) {
	for drop := 6; drop >= 0; drop-- {
		var cols []column
		var ws []int
		used := 0
		for _, c := range columns {
			if c.drop != 0 && c.drop >= drop {
				continue
			}
			cols = append(cols, c)
			ws = append(ws, c.width)
			used += c.width + 1
		}
		if used-1 > width && drop > 0 {
			continue
		}
		// Share what is left among the flexible columns, in order.
		left := width - (used - 1)
		for i, c := range cols {
			if c.max > c.width && left > 0 {
				grow := min(left, c.max-c.width)
				ws[i] += grow
				left -= grow
			}
		}
		return cols, ws
	}
	return nil, nil
}

var (
	titleStyle  = lipgloss.NewStyle().Bold(true)
	headStyle   = lipgloss.NewStyle().Reverse(true)
	apartStyle  = lipgloss.NewStyle().Foreground(lipgloss.Color("9")).Bold(true)
	exitedStyle = lipgloss.NewStyle().Faint(true)
	errStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	helpStyle   = lipgloss.NewStyle().Faint(true)
)

// header lines above the table, help line below it.
const chrome = 4

func (m Model) tableRows() int { return max(m.height-chrome, 1) }

// fit pads or cuts s to exactly w cells.
func fit(s string, w int, right bool) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if ansi.StringWidth(s) > w {
		return ansi.Truncate(s, w, "…")
	}
	pad := strings.Repeat(" ", w-ansi.StringWidth(s))
	if right {
		return pad + s
	}
	return s + pad
}

// View renders the whole screen: never wider than the terminal nor taller.
func (m Model) View() string {
	if m.quitting {
		return ""
	}
	w := max(m.width, 20)
	var b strings.Builder
	line := func(s string, st lipgloss.Style) {
		b.WriteString(st.Render(fit(s, w, false)))
		b.WriteByte('\n')
	}
	line(m.status(), titleStyle)

	// Line two: how the rows are chosen, or why the last sample failed.
	dir := "↓"
	if m.invert {
		dir = "↑"
	}
	how := fmt.Sprintf("sort %s %s", sortNames[m.key], dir)
	var filters []string
	if m.host != "" {
		filters = append(filters, "host="+m.host)
	}
	if m.state != "" {
		filters = append(filters, "state="+m.state)
	}
	if m.apartOnly {
		filters = append(filters, "apart only")
	}
	if m.text != "" || m.typing {
		filters = append(filters, "/"+m.text)
	}
	if len(filters) > 0 {
		how += " · " + strings.Join(filters, " ") + fmt.Sprintf(" (%d of %d)", len(m.rows), len(m.all))
	}
	if m.err != nil {
		line("sample failed: "+m.err.Error(), errStyle)
	} else {
		// The program and the sample's time on the right, if they fit.
		stamp := "prun top"
		if !m.at.IsZero() {
			stamp += " " + m.at.Format("15:04:05")
		}
		if gap := w - ansi.StringWidth(how) - ansi.StringWidth(stamp); gap >= 2 {
			how += strings.Repeat(" ", gap) + stamp
		}
		line(how, lipgloss.NewStyle())
	}

	cols, ws := layout(w)
	cells := make([]string, len(cols))
	for i, c := range cols {
		t := c.title
		if c.sortedBy == m.key {
			t += dir
		}
		cells[i] = fit(t, ws[i], c.right)
	}
	line(strings.Join(cells, " "), headStyle)

	n := m.tableRows()
	end := min(m.offset+n, len(m.rows))
	for _, r := range m.rows[m.offset:end] {
		for i, c := range cols {
			cells[i] = fit(c.cell(r), ws[i], c.right)
		}
		st := lipgloss.NewStyle()
		if len(r.Apart) > 0 {
			st = apartStyle
		} else if !r.Live() {
			st = exitedStyle
		}
		line(strings.Join(cells, " "), st)
	}
	for i := end - m.offset; i < n; i++ {
		b.WriteByte('\n')
	}

	if m.typing {
		b.WriteString(fit("/"+m.text+"▏  (a rank list, or text; enter keeps it, esc clears)", w, false))
	} else {
		help := "P cpu M mem R rank H host O out T quiet I invert h/s host/state a apart / q"
		if len(m.rows) > n {
			help = fmt.Sprintf("%d-%d of %d ↑↓  ", m.offset+1, end, len(m.rows)) + help
		}
		b.WriteString(helpStyle.Render(fit(help, w, false)))
	}
	return b.String()
}
