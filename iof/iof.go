// Package iof forwards the standard output and error of ranks to the
// launcher's own. Readers cut each rank's stream into runs of whole lines;
// the Writer prints each run atomically, so lines of different ranks never
// mix, and optionally tags every line with its rank.
package iof

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/fatih/color"
)

// Stream is stdout or stderr.
type Stream int

const (
	Stdout Stream = iota
	Stderr
)

func (s Stream) String() string {
	if s == Stderr {
		return "stderr"
	}
	return "stdout"
}

// Source identifies whose output a chunk is.
type Source struct {
	Job, App, Rank int // Job 0 is the user's; spawned jobs count from 1
}

// Sink receives line runs. partial means the chunk ends mid-line because the
// line was longer than the reader's buffer; the rest follows from the same
// source before any other source may print on that stream.
type Sink interface {
	Write(src Source, st Stream, p []byte, partial bool)
}

// bufSize bounds the memory a reader holds; longer lines pass in pieces.
const bufSize = 64 << 10

// Forward copies r to sink in whole-line runs until EOF. A final line
// without a newline is delivered as it is.
func Forward(r io.Reader, sink Sink, src Source, st Stream) {
	buf := make([]byte, bufSize)
	n := 0
	for {
		m, err := r.Read(buf[n:])
		n += m
		if i := bytes.LastIndexByte(buf[n-m:n], '\n'); i >= 0 {
			end := n - m + i + 1
			sink.Write(src, st, buf[:end], false)
			n = copy(buf, buf[end:n])
		} else if n == len(buf) {
			sink.Write(src, st, buf[:n], true)
			n = 0
		}
		if err != nil {
			if n > 0 {
				sink.Write(src, st, buf[:n], false)
			}
			return
		}
	}
}

// Options shape what the Writer prints.
type Options struct {
	Tag   bool // prefix lines with [app,rank]<stream>:
	Color bool // colour the tags (only when writing to a terminal)
}

// Writer prints line runs of many sources to two destinations.
type Writer struct {
	opts    Options
	mu      sync.Mutex
	cond    *sync.Cond
	dst     [2]*dest
	scratch []byte
}

type dest struct {
	w       io.Writer
	owner   *Source // a source in the middle of a long line holds the stream
	midLine bool    // the last byte written was not a newline
	last    Source
}

// NewWriter prints to stdout and stderr.
func NewWriter(stdout, stderr io.Writer, opts Options) *Writer {
	w := &Writer{opts: opts, dst: [2]*dest{{w: stdout}, {w: stderr}}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

var tagColors = []color.Attribute{color.FgCyan, color.FgGreen, color.FgYellow, color.FgMagenta, color.FgBlue,
	color.FgHiCyan, color.FgHiGreen, color.FgHiYellow, color.FgHiMagenta, color.FgHiBlue}

func (w *Writer) tag(src Source, st Stream) []byte {
	app := strconv.Itoa(src.App)
	if src.Job > 0 { // a spawned job's ranks: [job.app,rank]
		app = strconv.Itoa(src.Job) + "." + app
	}
	t := "[" + app + "," + strconv.Itoa(src.Rank) + "]<" + st.String() + ">:"
	if w.opts.Color {
		c := color.New(tagColors[src.Rank%len(tagColors)])
		if st == Stderr {
			c = color.New(color.FgRed)
		}
		c.EnableColor()
		t = c.Sprint(t)
	}
	return []byte(t)
}

// Write implements Sink.
func (w *Writer) Write(src Source, st Stream, p []byte, partial bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.dst[st]
	for d.owner != nil && *d.owner != src {
		w.cond.Wait()
	}
	out := p // common case: written as it came, no copy
	if (d.midLine && d.last != src) || w.opts.Tag {
		out = w.scratch[:0]
		// A source that ended without a newline must not glue its last line
		// to the next source's output.
		if d.midLine && d.last != src {
			out = append(out, '\n')
			d.midLine = false
		}
		if w.opts.Tag {
			out = w.appendTagged(out, src, st, p, !d.midLine)
		} else {
			out = append(out, p...)
		}
		if cap(out) <= 1<<20 {
			w.scratch = out[:0]
		}
	}
	if len(out) > 0 {
		// A closed stdout (prun | head) must not stop the job: drop output.
		_, _ = d.w.Write(out)
		d.midLine = out[len(out)-1] != '\n'
		d.last = src
	}
	if partial {
		s := src
		d.owner = &s
	} else if d.owner != nil {
		d.owner = nil
		w.cond.Broadcast()
	}
}

// appendTagged appends p to out with a tag before every line start.
func (w *Writer) appendTagged(out []byte, src Source, st Stream, p []byte, atStart bool) []byte {
	var tag []byte
	for len(p) > 0 {
		if atStart {
			if tag == nil {
				tag = w.tag(src, st)
			}
			out = append(out, tag...)
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return append(out, p...)
		}
		out = append(out, p[:i+1]...)
		p = p[i+1:]
		atStart = true
	}
	return out
}

// Release drops a source's hold on both streams (it exited mid-line).
func (w *Writer) Release(src Source) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.dst {
		if d.owner != nil && *d.owner == src {
			d.owner = nil
		}
	}
	w.cond.Broadcast()
}

// Printf writes a launcher message on stderr, between whole lines.
func (w *Writer) Printf(format string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.dst[Stderr]
	msg := fmt.Sprintf(format, a...)
	if d.midLine {
		msg = "\n" + msg
		d.midLine = false
	}
	io.WriteString(d.w, msg)
}
