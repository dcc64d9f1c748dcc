// Package iof forwards the standard output and error of ranks to the
// launcher's own. Readers (Forward) cut each rank's stream into runs of
// whole lines; the Writer prints each run atomically, so lines of different
// ranks never mix, in one of several output forms (tags, timestamps, JSON,
// per-rank files, rank order).
//
// Memory is bounded everywhere: a reader holds at most bufSize bytes and
// passes longer lines in pieces; the Writer writes while it holds its lock,
// so a slow consumer blocks the readers, which stop reading, which blocks the
// ranks on their pipes. Nothing queues.
package iof

import (
	"bytes"
	"io"
	"unicode/utf8"
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
// source before any other source may print on that stream. Calls for one
// source and stream come one at a time (Forward makes them from one
// goroutine); p is only valid during the call.
type Sink interface {
	Write(src Source, st Stream, p []byte, partial bool)
}

// An Ender is a Sink that wants to know when a stream has ended: Forward
// calls End after its last Write. The Writer closes the stream's files.
type Ender interface {
	End(src Source, st Stream)
}

// An InfoSink is a Sink that wants each source's host and process id (the
// Writer, for tag-detailed and JSON output and for creating per-rank files
// of ranks that never print). The daemon should announce a rank before
// forwarding its output.
type InfoSink interface {
	SetSourceInfo(src Source, host string, pid int)
}

const (
	// bufSize bounds the memory a reader holds; longer lines pass in pieces.
	bufSize = 256 << 10
	// minBuf is where a reader's buffer starts; it doubles, up to bufSize,
	// while reads fill it, so quiet ranks cost little.
	minBuf = 16 << 10
)

// Forward copies r to sink in whole-line runs until EOF or a read error. A
// final line without a newline is delivered as it is. Then, if sink is an
// Ender, Forward calls its End.
func Forward(r io.Reader, sink Sink, src Source, st Stream) {
	forward(r, sink, src, st, minBuf, bufSize)
	if e, ok := sink.(Ender); ok {
		e.End(src, st)
	}
}

// forward is Forward with the buffer's initial and largest sizes.
func forward(r io.Reader, sink Sink, src Source, st Stream, size, max int) {
	buf := make([]byte, min(size, max))
	n := 0
	for {
		m, err := r.Read(buf[n:])
		full := n+m == len(buf) && m > 0
		n += m
		if i := bytes.LastIndexByte(buf[n-m:n], '\n'); i >= 0 {
			end := n - m + i + 1
			sink.Write(src, st, buf[:end], false)
			n = copy(buf, buf[end:n])
		} else if n == len(buf) && len(buf) == max {
			// A line longer than the buffer: pass a piece, cut at a UTF-8
			// character boundary so that each piece is valid text.
			cut := utf8Cut(buf)
			sink.Write(src, st, buf[:cut], true)
			n = copy(buf, buf[cut:n])
		}
		if full && len(buf) < max && err == nil {
			// The reader is behind: read more at a time.
			nb := make([]byte, min(2*len(buf), max))
			copy(nb, buf[:n])
			buf = nb
		}
		if err != nil {
			if n > 0 {
				sink.Write(src, st, buf[:n], false)
			}
			return
		}
	}
}

// utf8Cut returns where to cut p so that an incomplete UTF-8 sequence at its
// end stays for the next piece; len(p) if there is none.
func utf8Cut(p []byte) int {
	for i := len(p) - 1; i >= 1 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return i
			}
			break
		}
	}
	return len(p)
}
