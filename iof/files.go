package iof

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// fileOut is one per-rank output file (Options.Dir or Options.File). Its
// methods run under Writer.mu.
type fileOut struct {
	lineState
	w       *Writer
	src     Source
	st      Stream // Stdout for a merged file
	dir     bool   // Dir's layout, else File's (unless fixed)
	fixed   string // a pattern's file: its path (shared by the sources it names)
	f       *os.File
	created bool // later opens append
	failed  bool
	streams int // 2 when stderr is merged into it
	ended   int
}

// makeFiles sets up a source's files (not yet opened).
func (w *Writer) makeFiles(s *srcState) {
	if s.filesMade {
		return
	}
	s.filesMade = true
	streams := 1
	if w.opts.MergeStderr {
		streams = 2
	}
	for st, pattern := range [2]string{w.opts.OutPattern, w.opts.ErrPattern} {
		if pattern == "" || (Stream(st) == Stderr && w.opts.MergeStderr) {
			continue
		}
		path := w.expandPattern(pattern, s.src, s.host)
		out := w.patternFiles[path]
		if out == nil {
			out = &fileOut{w: w, src: s.src, st: Stream(st), fixed: path}
			if w.patternFiles == nil {
				w.patternFiles = map[string]*fileOut{}
			}
			w.patternFiles[path] = out
		}
		// It closes when every stream written into it has ended.
		out.streams++
		s.files[st] = append(s.files[st], out)
		if Stream(st) == Stdout && w.opts.MergeStderr {
			out.streams++
			s.files[Stderr] = append(s.files[Stderr], out)
		}
	}
	for _, dir := range []bool{true, false} {
		if (dir && w.opts.Dir == "") || (!dir && w.opts.File == "") {
			continue
		}
		out := &fileOut{w: w, src: s.src, st: Stdout, dir: dir, streams: streams}
		s.files[Stdout] = append(s.files[Stdout], out)
		if w.opts.MergeStderr {
			s.files[Stderr] = append(s.files[Stderr], out)
		} else {
			s.files[Stderr] = append(s.files[Stderr], &fileOut{w: w, src: s.src, st: Stderr, dir: dir, streams: 1})
		}
	}
}

// path is Dir/<job>/rank.<N>/stdout or File[.<job>].<N>.out, <job> the job
// number from 1 (Open MPI 4's DIR/1/rank.0/stdout): paths a script can
// know before the run.
func (f *fileOut) path() string {
	if f.fixed != "" {
		return f.fixed
	}
	o := f.w.opts
	rank := strconv.Itoa(f.src.Rank)
	job := strconv.Itoa(f.src.Job + 1)
	if f.dir {
		return filepath.Join(o.Dir, job, "rank."+rank, f.st.String())
	}
	p := o.File + "."
	if f.src.Job > 0 {
		p += job + "."
	}
	if f.st == Stderr {
		return p + rank + ".err"
	}
	return p + rank + ".out"
}

func (f *fileOut) open() bool {
	if f.f != nil {
		return true
	}
	if f.failed {
		return false
	}
	path := f.path()
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if f.created {
		flags = os.O_WRONLY | os.O_APPEND
	}
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		f.f, err = os.OpenFile(path, flags, 0o644)
	}
	if err != nil {
		f.failed = true
		f.w.fail(err)
		return false
	}
	f.created = true
	return true
}

// Write writes p to the file, opening it first if needed. Errors are
// reported once; the file's output is then dropped.
func (f *fileOut) Write(p []byte) (int, error) {
	if !f.open() {
		return len(p), nil
	}
	if _, err := f.f.Write(p); err != nil {
		f.failed = true
		f.w.fail(err)
		f.close()
	}
	return len(p), nil
}

func (f *fileOut) close() {
	if f.f != nil {
		if err := f.f.Close(); err != nil && !f.failed {
			f.failed = true
			f.w.fail(err)
		}
		f.f = nil
	}
}

// spill is one source's Ordered output to one destination: in memory up
// to perBufferMemory (and the Writer's OrderedMemory), then in an unlinked
// file. Its methods run under Writer.mu.
type spill struct {
	lineState
	w      *Writer
	f      *os.File // the output so far, once it did not fit in memory
	mem    []byte   // the output (after the file's, if any)
	noFile bool     // spilling failed: keep the rest in memory, in order
}

func (b *spill) empty() bool { return b.f == nil && len(b.mem) == 0 }

func (b *spill) keep(p []byte) {
	b.w.ordMem -= cap(b.mem)
	b.mem = append(b.mem, p...)
	b.w.ordMem += cap(b.mem)
}

// Write implements io.Writer; it never fails: when spilling does, the
// output stays in memory rather than be lost.
func (b *spill) Write(p []byte) (int, error) {
	w := b.w
	if b.noFile {
		b.keep(p)
		return len(p), nil
	}
	if b.f == nil {
		grow := max(0, len(b.mem)+len(p)-cap(b.mem))
		if len(b.mem)+len(p) <= perBufferMemory && w.ordMem+grow <= w.ordLimit {
			b.keep(p)
			return len(p), nil
		}
		f, err := os.CreateTemp(w.spillDir(), "prun-iof-*")
		if err == nil {
			os.Remove(f.Name()) // gone with the descriptor, even if we die
			if _, err = f.Write(b.mem); err != nil {
				f.Close()
			}
		}
		if err != nil {
			b.noFile = true
			w.fail(fmt.Errorf("ordered output: %w", err))
			b.keep(p)
			return len(p), nil
		}
		b.f = f
		w.ordMem -= cap(b.mem)
		b.mem = nil
	}
	if n, err := b.f.Write(p); err != nil {
		b.noFile = true
		w.fail(fmt.Errorf("ordered output: %w", err))
		b.keep(p[n:])
	}
	return len(p), nil
}

// writeTo prints the held output to dst and frees it. Only reading the
// spill file can fail: dst's errors (a closed stdout) are ignored.
func (b *spill) writeTo(dst io.Writer) error {
	var err error
	if b.f != nil {
		if _, err = b.f.Seek(0, io.SeekStart); err == nil {
			_, err = io.Copy(ignoreErrors{dst}, onlyReader{b.f})
		}
		b.f.Close()
		b.f = nil
	}
	if len(b.mem) > 0 {
		dst.Write(b.mem)
	}
	b.w.ordMem -= cap(b.mem)
	b.mem = nil
	return err
}

// onlyReader and ignoreErrors hide the file's and dst's other methods
// from io.Copy, so that its errors are the file's.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

type ignoreErrors struct{ w io.Writer }

func (i ignoreErrors) Write(p []byte) (int, error) {
	i.w.Write(p)
	return len(p), nil
}
