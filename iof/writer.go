package iof

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options shape what the Writer prints. The zero value prints every line
// as it came, stdout to stdout and stderr to stderr.
type Options struct {
	// OnBrokenPipe is called once, with the Writer's lock held (so it must
	// only hand the news on), when prun's stdout or stderr is a closed pipe.
	OnBrokenPipe func()

	// Line prefixes, on the terminal and in files. At most one tag is
	// printed: Prefix, else TagDetailed, else Tag, else Rank.
	Tag         bool // [app,rank]<stdout>: (a spawned job's ranks: [job.app,rank]<stdout>:)
	TagDetailed bool // [app,rank,host,pid]<stdout>: (host and pid from SetSourceInfo, "?" until then)
	Rank        bool // "[rank] " like Hydra's -prepend-rank (a spawned job's ranks: "[job.rank] ")
	// Prefix, when set, is the tag instead: a Hydra -prepend-pattern, where
	// %r is the rank, %g the job (0 for the launched one), %h the host, %p
	// the host's node index (NodeIndex), %% a %.
	Prefix    string
	NodeIndex func(host string) (int, bool)
	// Timestamp starts every line with the time its run was read, in
	// TimeLayout (RFC 3339 with milliseconds, the Clock's zone), and a
	// space; a tag follows.
	Timestamp bool
	Color     bool // colour the tags per rank, stderr's red (terminal only, never JSON or files)

	// MergeStderr prints ranks' stderr on stdout (tags still say <stderr>);
	// with Dir or File it goes into the stdout file.
	MergeStderr bool

	// JSON prints one object per line on stdout instead of prefixed lines:
	//	{"time":"…","rank":0,"app":0,"job":0,"host":"h","stream":"stdout","text":"…"}
	// text is the line without its newline; bytes that are not UTF-8 appear
	// as \u0080–\u00ff (as if Latin-1). A piece of a line longer than the
	// reader's buffer adds "partial":true; the rest follows in the next
	// objects of that job, rank and stream. Files, if any, get plain lines.
	JSON bool

	// XML is mpirun's --xml: the output between <mpirun> and </mpirun> on
	// stdout, each line as <stdout rank="N">text&#010;</stdout> (stderr's
	// <stderr ...>), &, <, > and control bytes as XML references.
	XML bool

	// Ordered holds the terminal output back and prints it by source (job,
	// then rank; each source's stdout, then its stderr, or both as they
	// came when merged) at Flush or Close.
	// At most OrderedMemory bytes (default 16 MiB, at most 1 MiB per source
	// and stream) stay in memory; the rest goes to unlinked files in
	// SpillDir (default os.TempDir()).
	Ordered       bool
	SpillDir      string
	OrderedMemory int

	// Dir writes each rank's output to Dir/<job>/rank.<N>/stdout and
	// .../stderr, File to File.<N>.out and File.<N>.err (a spawned job's:
	// File.<job>.<N>.out); <job> is Source.Job+1. Directories are made
	// 0755, files 0644, when a source is announced (SetSourceInfo) or first
	// prints. With either set, the terminal gets nothing unless Tee (or
	// JSON) is set.
	Dir, File string
	Tee       bool

	// OutPattern and ErrPattern are Hydra's -outfile-pattern and
	// -errfile-pattern: a stream's lines go to the file the pattern names
	// (the specifiers of Prefix), not to the terminal; ranks whose
	// patterns name the same file share it, line by line. With
	// MergeStderr, stderr follows stdout. Not with Dir or File.
	OutPattern, ErrPattern string

	// HoldTimeout is how long a stream in the middle of a long line may
	// hold a shared destination (a terminal stream, a merged file or
	// buffer) without printing before a waiting stream goes first, on a new
	// line (default 2 s; negative: forever). It keeps ranks that wait on
	// each other (MPI) from deadlocking on a half-printed line.
	HoldTimeout time.Duration

	// Clock gives timestamps (default time.Now).
	Clock func() time.Time
}

// TimeLayout is the timestamp format of Options.Timestamp and JSON.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

const (
	defaultHoldTimeout   = 2 * time.Second
	defaultOrderedMemory = 16 << 20
	perBufferMemory      = 1 << 20 // Ordered: in memory per source and stream
	maxKeptScratch       = 2*bufSize + 64<<10
)

// form is how a run is rendered.
type form uint8

const (
	formRaw    form = iota // as it came
	formPrefix             // timestamp and/or tag before each line
	formColor              // the same, the tag coloured
	formJSON               // one JSON object per line
	formXML                // one <stdout rank="N"> element per line (mpirun's --xml)
)

// key is one stream of one source.
type key struct {
	src Source
	st  Stream
}

// launcherKey marks the launcher's own messages.
var launcherKey = key{src: Source{Job: -1}}

// lineState is what a destination (the terminal's stdout or stderr, a
// file, an Ordered buffer) last received, and who holds it: a stream in the
// middle of a long line keeps the others that share the destination out
// until its line ends.
type lineState struct {
	midLine bool // the last byte written was not a newline
	last    key  // who wrote it
	held    bool
	owner   key
	since   time.Time     // when the holder last printed
	wake    chan struct{} // closed when the hold ends (made by waiters)
}

func (ls *lineState) release() {
	ls.held = false
	if ls.wake != nil {
		close(ls.wake)
		ls.wake = nil
	}
}

// term is one of the launcher's own streams.
type term struct {
	lineState
	w io.Writer
}

// srcState is the Writer's record of one source.
type srcState struct {
	src  Source
	mid  [2]atomic.Bool // the stream's own output so far ends mid-line
	tags atomic.Pointer[tagSet]

	// under Writer.mu
	files     [2][]*fileOut
	filesMade bool
	host      string    // from SetSourceInfo
	ord       [2]*spill // Ordered: by destination (JSON: by stream)
}

// renderBuf holds a run rendered outside the lock.
type renderBuf struct{ term, file []byte }

// Writer prints line runs of many sources to two destinations. Runs are
// rendered (tags, timestamps, JSON) before the lock is taken, so several
// cores share that work; each run then costs one lock acquisition and one
// write per destination.
type Writer struct {
	opts       Options
	brokenPipe sync.Once
	clock      func() time.Time
	termForm   form    // terminal
	fileForm   form    // Dir and File
	terminal   bool    // anything goes to the terminal
	toTerm     [2]bool // ... by the ranks' stream
	files      bool
	needTime   bool
	holdTO     time.Duration
	ordLimit   int
	pool       sync.Pool // *renderBuf
	srcs       sync.Map  // Source → *srcState

	mu      sync.Mutex
	term    [2]*term
	ordered bool   // Ordered and not yet closed
	closed  bool   // Close ran (XML's </mpirun> is written once)
	ordMem  int    // Ordered bytes in memory
	slow    []byte // re-rendering scratch, under mu
	// patternFiles are OutPattern's and ErrPattern's files by path, under mu.
	patternFiles map[string]*fileOut
	err          error // the first file error
}

// NewWriter prints to stdout and stderr.
func NewWriter(stdout, stderr io.Writer, opts Options) *Writer {
	w := &Writer{opts: opts, clock: opts.Clock, holdTO: opts.HoldTimeout, ordLimit: opts.OrderedMemory,
		term: [2]*term{{w: stdout}, {w: stderr}}}
	if w.clock == nil {
		w.clock = time.Now
	}
	if w.holdTO == 0 {
		w.holdTO = defaultHoldTimeout
	}
	if w.ordLimit <= 0 {
		w.ordLimit = defaultOrderedMemory
	}
	tagged := opts.Tag || opts.TagDetailed || opts.Rank || opts.Prefix != ""
	prefixed := tagged || opts.Timestamp
	if prefixed {
		w.fileForm = formPrefix
	}
	switch {
	case opts.JSON:
		w.termForm = formJSON
	case opts.XML:
		w.termForm = formXML
	case prefixed && opts.Color && tagged:
		w.termForm = formColor
	case prefixed:
		w.termForm = formPrefix
	}
	w.files = opts.Dir != "" || opts.File != "" || opts.OutPattern != "" || opts.ErrPattern != ""
	for st := range w.toTerm {
		w.toTerm[st] = !w.files || opts.Tee || opts.JSON || opts.XML
	}
	if opts.Dir == "" && opts.File == "" {
		// Patterns take only their own streams from the terminal.
		w.toTerm[Stdout] = opts.OutPattern == ""
		w.toTerm[Stderr] = opts.ErrPattern == "" && !(opts.MergeStderr && opts.OutPattern != "")
	}
	w.terminal = w.toTerm[Stdout] || w.toTerm[Stderr]
	w.needTime = opts.Timestamp || (opts.JSON && w.terminal)
	w.ordered = opts.Ordered && w.terminal
	if opts.XML {
		w.term[Stdout].w.Write([]byte("<mpirun>\n"))
	}
	return w
}

// SetSourceInfo records the host and process id of a source, for
// tag-detailed and JSON output, and creates its files (Dir, File) so that
// ranks that never print still have them. Call it before the source's
// output is forwarded.
func (w *Writer) SetSourceInfo(src Source, host string, pid int) {
	s := w.state(src)
	w.mu.Lock()
	defer w.mu.Unlock()
	s.tags.Store(w.buildTags(src, host, pid))
	s.host = host
	if w.files {
		w.makeFiles(s)
		for _, fs := range s.files {
			for _, f := range fs {
				f.open()
			}
		}
	}
}

func (w *Writer) state(src Source) *srcState {
	if v, ok := w.srcs.Load(src); ok {
		return v.(*srcState)
	}
	s := &srcState{src: src}
	s.tags.Store(w.buildTags(src, "", 0))
	v, _ := w.srcs.LoadOrStore(src, s)
	return v.(*srcState)
}

func (w *Writer) getBuf() *renderBuf {
	if b, ok := w.pool.Get().(*renderBuf); ok {
		return b
	}
	return &renderBuf{}
}

func (w *Writer) putBuf(b *renderBuf) {
	if cap(b.term) > maxKeptScratch {
		b.term = nil
	}
	if cap(b.file) > maxKeptScratch {
		b.file = nil
	}
	w.pool.Put(b)
}

// destOf is the terminal stream a rank's stream goes to.
func (w *Writer) destOf(st Stream) Stream {
	if w.opts.MergeStderr || w.opts.JSON || w.opts.XML {
		return Stdout
	}
	return st
}

// Write implements Sink.
func (w *Writer) Write(src Source, st Stream, p []byte, partial bool) {
	s := w.state(src)
	k := key{src, st}
	keyMid := s.mid[st].Load()
	tags := s.tags.Load()
	var tsBuf [40]byte
	var ts []byte
	if w.needTime {
		ts = w.clock().AppendFormat(tsBuf[:0], TimeLayout)
	}

	// Render outside the lock, assuming that this stream's runs follow
	// each other; emit fixes the rare case where they do not.
	termOut, fileOut := p, p
	var rb *renderBuf
	if (w.terminal && w.termForm != formRaw) || (w.files && w.fileForm != formRaw) {
		rb = w.getBuf()
		if w.terminal && w.termForm != formRaw {
			rb.term = render(rb.term[:0], w.termForm, tags, st, p, partial, !keyMid, ts)
			termOut = rb.term
		}
		if w.files && w.fileForm != formRaw {
			if w.terminal && w.termForm == w.fileForm {
				fileOut = termOut
			} else {
				rb.file = render(rb.file[:0], w.fileForm, tags, st, p, partial, !keyMid, ts)
				fileOut = rb.file
			}
		}
	}

	w.mu.Lock()
	if w.files {
		w.makeFiles(s)
		for _, f := range s.files[st] {
			w.put(&f.lineState, f, true, k, keyMid, fileOut, w.fileForm, tags, p, partial, ts)
		}
	}
	if w.toTerm[st] {
		w.writeTerm(s, k, keyMid, termOut, tags, p, partial, ts)
	}
	w.mu.Unlock()

	if len(p) > 0 {
		s.mid[st].Store(p[len(p)-1] != '\n')
	}
	if rb != nil {
		w.putBuf(rb)
	}
}

// writeTerm prints a run on the terminal, or keeps it for Flush.
func (w *Writer) writeTerm(s *srcState, k key, keyMid bool, out []byte, tags *tagSet, p []byte, partial bool, ts []byte) {
	di := w.destOf(k.st)
	// JSON objects are whole lines: pieces of a long line need no hold.
	holds := w.termForm != formJSON && w.termForm != formXML
	if w.ordered {
		// A buffer per destination; JSON keeps the streams apart (both go to
		// stdout), so that a source's stdout comes before its stderr.
		bi := di
		if w.termForm == formJSON || w.termForm == formXML {
			bi = k.st
		}
		b := s.ord[bi]
		if b == nil {
			b = &spill{w: w}
			s.ord[bi] = b
		}
		w.put(&b.lineState, b, holds, k, keyMid, out, w.termForm, tags, p, partial, ts)
		return
	}
	d := w.term[di]
	w.put(&d.lineState, d.w, holds, k, keyMid, out, w.termForm, tags, p, partial, ts)
}

// put waits for the destination's hold, writes the run, and holds the
// destination if the run ends inside a long line.
func (w *Writer) put(ls *lineState, dst io.Writer, holds bool, k key, keyMid bool, out []byte, f form, tags *tagSet, p []byte, partial bool, ts []byte) {
	if holds {
		w.awaitTurn(ls, k)
	}
	w.emit(ls, dst, k, keyMid, out, f, tags, p, partial, ts)
	if holds {
		if partial {
			ls.held, ls.owner, ls.since = true, k, time.Now()
		} else if ls.held && ls.owner == k {
			ls.release()
		}
	}
}

// awaitTurn waits, under w.mu, until no other stream holds ls. A holder
// that has printed nothing for the hold timeout loses its hold.
func (w *Writer) awaitTurn(ls *lineState, k key) {
	for ls.held && ls.owner != k {
		var timeout <-chan time.Time
		var t *time.Timer
		if w.holdTO > 0 {
			idle := time.Since(ls.since)
			if idle >= w.holdTO {
				ls.release()
				return
			}
			t = time.NewTimer(w.holdTO - idle)
			timeout = t.C
		}
		if ls.wake == nil {
			ls.wake = make(chan struct{})
		}
		wake := ls.wake
		w.mu.Unlock()
		select {
		case <-wake:
		case <-timeout:
		}
		if t != nil {
			t.Stop()
		}
		w.mu.Lock()
	}
}

// emit writes a rendered run (out; p as it came) to a destination in state
// ls. A run that does not continue what the destination last received
// starts on a new line, and a stream's continuation that lost its place
// (another source printed in between) gets its prefix again.
func (w *Writer) emit(ls *lineState, dst io.Writer, k key, keyMid bool, out []byte, f form, tags *tagSet, p []byte, partial bool, ts []byte) {
	if len(p) == 0 {
		return
	}
	if !(keyMid && ls.midLine && ls.last == k) {
		if ls.midLine {
			dst.Write(newline)
			ls.midLine = false
		}
		if keyMid && (f == formPrefix || f == formColor) {
			out = render(w.slow[:0], f, tags, k.st, p, partial, true, ts)
			if cap(out) <= maxKeptScratch {
				w.slow = out[:0]
			}
		}
	}
	// A closed stdout or stderr (prun | head) drops the output and tells the
	// launcher once, which ends the job as SIGPIPE ends a pipeline's writer.
	if _, err := dst.Write(out); err != nil && errors.Is(err, syscall.EPIPE) && w.opts.OnBrokenPipe != nil {
		w.brokenPipe.Do(w.opts.OnBrokenPipe)
	}
	ls.midLine = out[len(out)-1] != '\n'
	ls.last = k
}

var newline = []byte{'\n'}

// Release drops a source's holds (it exited mid-line).
func (w *Writer) Release(src Source) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releaseHolds(src, func(k key) bool { return k.src == src })
}

// End implements Ender: the stream has no more output. Its holds end and
// its files are closed (a merged stdout file when both streams ended).
func (w *Writer) End(src Source, st Stream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.releaseHolds(src, func(k key) bool { return k == key{src, st} })
	if s == nil {
		return
	}
	for _, f := range s.files[st] {
		if f.ended++; f.ended >= f.streams {
			f.close()
		}
	}
}

// releaseHolds ends the holds of the streams of src that match, under w.mu.
func (w *Writer) releaseHolds(src Source, match func(key) bool) *srcState {
	var states []*lineState
	for _, d := range w.term {
		states = append(states, &d.lineState)
	}
	v, ok := w.srcs.Load(src)
	var s *srcState
	if ok {
		s = v.(*srcState)
		for st := range s.files {
			for _, f := range s.files[st] {
				states = append(states, &f.lineState)
			}
			if s.ord[st] != nil {
				states = append(states, &s.ord[st].lineState)
			}
		}
	}
	for _, ls := range states {
		if ls.held && match(ls.owner) {
			ls.release()
		}
	}
	return s
}

// Printf writes a launcher message on stderr, between whole lines, at once
// (also when Ordered, Dir or File hold the ranks' output elsewhere).
func (w *Writer) Printf(format string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.printf(format, a...)
}

func (w *Writer) printf(format string, a ...any) {
	d := w.term[Stderr]
	msg := fmt.Sprintf(format, a...)
	if d.midLine {
		msg = "\n" + msg
	}
	if msg == "" {
		return
	}
	io.WriteString(d.w, msg)
	d.midLine = msg[len(msg)-1] != '\n'
	d.last = launcherKey
}

// Flush prints what Ordered holds back, by source: job, then rank (then
// app); each source's stdout, then its stderr. The launcher calls it (or
// Close) when the ranks' output has been drained; output arriving later is
// held for the next Flush.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush()
}

func (w *Writer) flush() error {
	var srcs []*srcState
	w.srcs.Range(func(_, v any) bool {
		s := v.(*srcState)
		if s.ord[Stdout] != nil || s.ord[Stderr] != nil {
			srcs = append(srcs, s)
		}
		return true
	})
	slices.SortFunc(srcs, func(a, b *srcState) int {
		return cmp.Or(cmp.Compare(a.src.Job, b.src.Job), cmp.Compare(a.src.Rank, b.src.Rank), cmp.Compare(a.src.App, b.src.App))
	})
	var first error
	for _, s := range srcs {
		for bi, b := range s.ord {
			if b == nil || b.empty() {
				continue
			}
			d := w.term[w.destOf(Stream(bi))]
			if d.midLine {
				d.w.Write(newline)
			}
			if err := b.writeTo(d.w); err != nil && first == nil {
				first = err
			}
			d.midLine, d.last = b.midLine, b.last
		}
	}
	if first != nil {
		w.fail(first)
	}
	return first
}

// Close flushes Ordered output and closes the files. It returns the first
// error met writing files or spilling. Output written after Close is
// printed at once, and files are reopened to append.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flush()
	if w.opts.XML && !w.closed {
		w.term[Stdout].w.Write([]byte("</mpirun>\n"))
	}
	w.closed = true
	w.ordered = false
	w.srcs.Range(func(_, v any) bool {
		for _, fs := range v.(*srcState).files {
			for _, f := range fs {
				f.close()
			}
		}
		return true
	})
	return w.err
}

// fail records an error and reports it once on stderr.
func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.printf("prun: output: %v\n", err)
}

// spillDir is where Ordered output goes when memory is spent.
func (w *Writer) spillDir() string {
	if w.opts.SpillDir != "" {
		return w.opts.SpillDir
	}
	return os.TempDir()
}

// SetSpillDir says where ordered output spills once its memory bound is
// spent; the launcher sets its session directory as soon as it exists.
func (w *Writer) SetSpillDir(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.opts.SpillDir = dir
}
