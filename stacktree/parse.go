// Package stacktree turns debugger output into stacks of function names and
// merges many ranks' stacks into one prefix tree, rooted at the outermost
// frame, in which every node carries the set of ranks (and the number of
// threads) that pass through it: where a hung job waits, at a glance. It
// renders the tree as indented text and as Graphviz DOT (SVG through dot).
package stacktree

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Frame is one frame of a stack. Func alone identifies it when stacks are
// merged (addresses and argument values differ between ranks that stand at
// the same place); File and Line are kept for display when the debugger
// knew them.
type Frame struct {
	Func string // "??" when the debugger found no symbol
	File string
	Line int
}

// Thread is one thread's stack, innermost frame first (as debuggers print
// it).
type Thread struct {
	ID     int // the thread's LWP id, 0 when the output did not say
	Frames []Frame
}

// Limits on what the parsers accept, so hostile or corrupt output cannot
// make them hold unbounded memory.
const (
	maxThreads = 1 << 14
	maxFrames  = 1 << 12
	maxLine    = 1 << 16
)

// Parse reads the output of either debugger prun runs, telling them apart
// by eu-stack's "PID n - process" or "TID n:" lines.
func Parse(out []byte) ([]Thread, error) {
	for _, l := range strings.SplitN(string(out), "\n", 8) {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "PID ") && strings.HasSuffix(l, "- process") ||
			strings.HasPrefix(l, "TID ") && strings.HasSuffix(l, ":") {
			return ParseEuStack(out)
		}
	}
	return ParseGDB(out)
}

// ParseGDB reads the output of `gdb -batch -nx -ex "thread apply all bt" -p
// PID`: "Thread N (... (LWP id) ...):" headers, each followed by its "#k"
// frames. Frames before any header (a plain `bt`) form one thread. Output
// without a single frame is an error that quotes gdb's own complaint (a
// failed attach still exits 0).
func ParseGDB(out []byte) ([]Thread, error) {
	st := stacks{who: "gdb"}
	var complaint string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 4096), maxLine)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Thread ") && strings.HasSuffix(line, ":"):
			if err := st.thread(gdbLWP(line)); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "#"):
			if f, ok := parseGDBFrame(line); ok {
				if err := st.frame(f); err != nil {
					return nil, err
				}
			}
		case complaint == "" && (strings.HasPrefix(line, "ptrace:") || strings.HasPrefix(line, "Could not attach") ||
			strings.Contains(line, "No such process") || strings.HasPrefix(line, "warning: process")):
			complaint = line
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stacktree: reading gdb's output: %v", err)
	}
	return finish(st.threads, "gdb", complaint, out)
}

// stacks collects the threads a debugger's output names, in order, within
// the parsers' limits.
type stacks struct {
	who     string // the debugger, for errors
	threads []Thread
}

// thread starts thread id.
func (s *stacks) thread(id int) error {
	if len(s.threads) >= maxThreads {
		return fmt.Errorf("stacktree: more than %d threads in %s's output", maxThreads, s.who)
	}
	s.threads = append(s.threads, Thread{ID: id})
	return nil
}

// frame adds f to the current thread; frames before any thread's header
// (a plain `bt`) form one thread.
func (s *stacks) frame(f Frame) error {
	if len(s.threads) == 0 {
		s.threads = append(s.threads, Thread{})
	}
	cur := &s.threads[len(s.threads)-1]
	if len(cur.Frames) >= maxFrames {
		return fmt.Errorf("stacktree: a thread of more than %d frames in %s's output", maxFrames, s.who)
	}
	cur.Frames = append(cur.Frames, f)
	return nil
}

// last is the current thread's last frame, nil before any.
func (s *stacks) last() *Frame {
	if len(s.threads) == 0 {
		return nil
	}
	cur := &s.threads[len(s.threads)-1]
	if len(cur.Frames) == 0 {
		return nil
	}
	return &cur.Frames[len(cur.Frames)-1]
}

// finish drops threads without frames and turns "nothing at all" into an
// error naming the debugger's complaint, or its first line.
func finish(threads []Thread, who, complaint string, out []byte) ([]Thread, error) {
	kept := threads[:0]
	for _, t := range threads {
		if len(t.Frames) > 0 {
			kept = append(kept, t)
		}
	}
	if len(kept) > 0 {
		return kept, nil
	}
	if complaint == "" {
		complaint = firstLine(out)
	}
	if complaint == "" {
		return nil, fmt.Errorf("stacktree: %s printed nothing", who)
	}
	return nil, fmt.Errorf("stacktree: no stack from %s: %s", who, complaint)
}

func firstLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 200 {
				l = l[:200] + "..."
			}
			return strings.Map(printable, l)
		}
	}
	return ""
}

// printable keeps an error on one readable line.
func printable(r rune) rune {
	if r < ' ' || r == 0x7f {
		return '?'
	}
	return r
}

// gdbLWP finds "LWP n" in a thread header, 0 if there is none.
func gdbLWP(h string) int {
	i := strings.Index(h, "LWP ")
	if i < 0 {
		return 0
	}
	s := h[i+4:]
	j := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n, _ := strconv.Atoi(s[:j])
	return n
}

// parseGDBFrame reads "#k  [0xADDR in ]FUNC (ARGS)[ at FILE:LINE| from LIB]"
// and gdb's special frames ("<signal handler called>").
func parseGDBFrame(line string) (Frame, bool) {
	s := strings.TrimLeft(line[1:], "0123456789")
	if len(s) == len(line)-1 || s == "" || s[0] != ' ' {
		return Frame{}, false // "#" without a frame number: not a frame
	}
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "0x") {
		if i := strings.Index(s, " in "); i >= 0 {
			s = s[i+4:]
		} else {
			return Frame{Func: "??"}, true
		}
	}
	if strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") {
		return Frame{Func: s}, true
	}
	name, rest := splitArgs(s)
	f := Frame{Func: cleanName(name)}
	rest = strings.TrimSpace(rest)
	switch {
	case strings.HasPrefix(rest, "at "):
		f.File, f.Line = splitFileLine(strings.TrimSpace(rest[3:]))
	case f.Func == "??" && strings.HasPrefix(rest, "from "):
		// A function without a symbol is at least in a known library:
		// "?? (libmpich.so.12)" says more than "??".
		lib := strings.TrimSpace(rest[5:])
		f.Func = "?? (" + lib[strings.LastIndexByte(lib, '/')+1:] + ")"
	}
	return f, true
}

// splitArgs splits "NAME (ARGS) TAIL" at the argument list: the first " ("
// outside the name's own brackets (C++ templates, "(anonymous namespace)",
// "operator()"), and returns the name and what follows the list's closing
// parenthesis (quoted strings inside the list may hold any bracket).
func splitArgs(s string) (name, tail string) {
	depth := 0
	for i := 0; i < len(s); i++ {
		if strings.HasPrefix(s[i:], "operator") {
			i += len("operator")
			// An operator's own symbols are part of the name.
			for i < len(s) && strings.IndexByte("()<>=!+-*/%&|^~[],", s[i]) >= 0 {
				i++
			}
			i--
			continue
		}
		switch s[i] {
		case '<', '(', '[':
			if s[i] == '(' && depth == 0 && i > 0 && s[i-1] == ' ' {
				return strings.TrimSpace(s[:i]), skipList(s[i:])
			}
			depth++
		case '>', ')', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return strings.TrimSpace(s), ""
}

// skipList returns what follows the parenthesised list that s starts with.
func skipList(s string) string {
	depth := 0
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'':
			quote = c
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s[i+1:]
			}
		}
	}
	return ""
}

// cleanName drops a symbol version ("clock_nanosleep@GLIBC_2.2.5") so the
// same function compares equal however the debugger printed it.
func cleanName(n string) string {
	if i := strings.IndexByte(n, '@'); i > 0 {
		n = n[:i]
	}
	if n == "" {
		return "??"
	}
	return n
}

// splitFileLine reads "FILE:LINE" or eu-stack's "FILE:LINE:COL".
func splitFileLine(s string) (string, int) {
	if i := strings.LastIndexByte(s, ':'); i > 0 {
		if n, err := strconv.Atoi(s[i+1:]); err == nil {
			if j := strings.LastIndexByte(s[:i], ':'); j > 0 {
				if m, err := strconv.Atoi(s[j+1 : i]); err == nil {
					return s[:j], m // FILE:LINE:COL
				}
			}
			return s[:i], n
		}
	}
	return s, 0
}

// ParseEuStack reads the output of `eu-stack -p PID` (with or without -m
// and -s): "TID n:" headers, "#k  0xADDR FUNC[ - MODULE]" frames, and with
// -s each frame's "FILE:LINE:COL" on the next, indented line.
func ParseEuStack(out []byte) ([]Thread, error) {
	st := stacks{who: "eu-stack"}
	var complaint string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 4096), maxLine)
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(line, "TID ") && strings.HasSuffix(line, ":"):
			id, _ := strconv.Atoi(strings.TrimSuffix(line[4:], ":"))
			if err := st.thread(id); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "#"):
			if f, ok := parseEuFrame(line); ok {
				if err := st.frame(f); err != nil {
					return nil, err
				}
			}
		case st.last() != nil && line != "" && len(raw) > len(line) && raw[0] == ' ' && strings.Contains(line, ":"):
			// -s: the source position of the frame above.
			if last := st.last(); last.File == "" {
				last.File, last.Line = splitFileLine(line)
			}
		case complaint == "" && strings.HasPrefix(line, "eu-stack:"):
			complaint = line
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stacktree: reading eu-stack's output: %v", err)
	}
	return finish(st.threads, "eu-stack", complaint, out)
}

// parseEuFrame reads "#k  0xADDR [FUNC][ - MODULE]".
func parseEuFrame(line string) (Frame, bool) {
	f := strings.Fields(line[1:])
	if len(f) < 2 || strings.Trim(f[0], "0123456789") != "" || f[0] == "" || !strings.HasPrefix(f[1], "0x") {
		return Frame{}, false
	}
	if len(f) < 3 || f[2] == "-" {
		return Frame{Func: "??"}, true
	}
	// A C++ name may hold spaces; the module follows " - ".
	rest := strings.Join(f[2:], " ")
	if i := strings.LastIndex(rest, " - "); i >= 0 {
		rest = rest[:i]
	}
	return Frame{Func: cleanName(rest)}, true
}
