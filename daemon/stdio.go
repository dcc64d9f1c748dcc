package daemon

import (
	"io"
	"os"
	"sync"
	"time"

	"prun/iof"

	"github.com/creack/pty"
)

// outputGrace bounds how long a job's end waits for output after its last
// rank exited: a daemonised grandchild may hold the pipes open for ever.
const outputGrace = 2 * time.Second

// stdio is the part of a shell that owns its ranks' standard streams: it
// makes each rank's pipes (or, with --pty, the stdin rank's terminal),
// forwards what the ranks write, fans the launcher's stdin out to the ranks
// that read it, and drains the output at the job's end.
type stdio struct {
	in     io.Reader // the launcher's stdin (nil: none); see StdinStopper
	tty    *os.File  // the launcher's terminal, for the --pty rank's window size (nil: none)
	target int       // the rank that reads stdin, or StdinNone, StdinAll
	pty    bool      // the target rank runs on a terminal

	output sync.WaitGroup // the forwarders

	// gave gives back to the node's budget (fdbudget.go) each read end
	// closed: at its EOF, so that an exited rank holds no descriptor.
	gave func(n int)

	mu     sync.Mutex
	pipes  map[*os.File]bool // read ends (and the terminal's master) still open, closed if output outlives outputGrace
	stdins []*os.File        // write ends of the ranks that read the launcher's stdin, until fanOut
	master *os.File          // the --pty rank's terminal (master side)
}

func newStdio(p *Plan, cfg Config, gave func(int)) *stdio {
	return &stdio{in: cfg.Stdin, tty: cfg.TTY, target: p.Stdin, pty: p.PTY, gave: gave, pipes: map[*os.File]bool{}}
}

// rankIO is one rank's standard streams.
type rankIO struct {
	stdin, stdout, stderr *os.File // the child's ends (one terminal with --pty)
	out, err              *os.File // the read ends of stdout and stderr (err nil on a terminal: it carries both)
	in                    *os.File // the write end of its stdin, nil if it reads /dev/null
	tty                   bool     // its streams are a terminal, which is to be its controlling one
}

// files are the child's descriptors 0, 1 and 2.
func (r rankIO) files() []*os.File { return []*os.File{r.stdin, r.stdout, r.stderr} }

// open makes rank's streams, recording every descriptor in fs. A rank
// started again (again, --max-restarts) reads no stdin: what it would have
// read went to the process it replaces.
func (s *stdio) open(fs *startFiles, rank int, again bool) (rankIO, error) {
	var r rankIO
	var err error
	feed := s.in != nil && !again
	switch {
	case feed && s.pty && rank == s.target:
		// The rank's stdin, stdout and stderr are one terminal; its output
		// comes back through the master as the rank's stdout.
		master, tty, err := pty.Open()
		if err != nil {
			return r, err
		}
		fs.add(master, tty)
		if s.tty != nil {
			pty.InheritSize(s.tty, master)
		}
		return rankIO{stdin: tty, stdout: tty, stderr: tty, out: master, in: master, tty: true}, nil
	case feed && (rank == s.target || s.target == StdinAll):
		r.in, r.stdin, err = fs.pipe(false)
	default:
		r.stdin, err = os.Open(os.DevNull)
		fs.add(nil, r.stdin)
	}
	if err != nil {
		return r, err
	}
	if r.out, r.stdout, err = fs.pipe(true); err != nil {
		return r, err
	}
	r.err, r.stderr, err = fs.pipe(true)
	return r, err
}

// attach takes the parent's ends of a started rank's streams and forwards
// its output to sink as src.
func (s *stdio) attach(r rankIO, sink iof.Sink, src iof.Source) {
	s.mu.Lock()
	s.pipes[r.out] = true
	if r.err != nil {
		s.pipes[r.err] = true
	}
	if r.tty {
		s.master = r.out
	}
	if r.in != nil {
		s.stdins = append(s.stdins, r.in)
	}
	s.mu.Unlock()
	s.output.Add(1)
	// The terminal's master stays open to the end: it is also the rank's
	// stdin (fanOut) and the window resize's.
	if r.tty {
		go func() { defer s.output.Done(); forwardInteractive(r.out, sink, src) }()
	} else {
		go func() { defer s.output.Done(); iof.Forward(r.out, sink, src, iof.Stdout); s.close(r.out) }()
	}
	if r.err != nil {
		s.output.Add(1)
		go func() { defer s.output.Done(); iof.Forward(r.err, sink, src, iof.Stderr); s.close(r.err) }()
	}
}

// close closes a read end, unless closed already, and gives it back.
func (s *stdio) close(f *os.File) {
	s.mu.Lock()
	open := s.pipes[f]
	delete(s.pipes, f)
	s.mu.Unlock()
	if open {
		f.Close()
		s.gave(1)
	}
}

// closeAll closes every read end still open.
func (s *stdio) closeAll() {
	s.mu.Lock()
	pipes := s.pipes
	s.pipes = map[*os.File]bool{}
	s.mu.Unlock()
	for f := range pipes {
		f.Close()
	}
	s.gave(len(pipes))
}

// fanOut starts passing the launcher's stdin to the ranks that read it,
// once every rank has started.
func (s *stdio) fanOut() {
	s.mu.Lock()
	targets := s.stdins
	s.stdins = nil
	s.mu.Unlock()
	if len(targets) > 0 {
		go copyStdin(s.in, targets)
	}
}

// resize gives the --pty rank's terminal the launcher terminal's size.
func (s *stdio) resize() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.master != nil && s.tty != nil {
		pty.InheritSize(s.tty, s.master)
	}
}

// drain waits for the forwarders to pass on what the ranks wrote, for
// grace at most once the ranks are gone, and closes the read ends.
func (s *stdio) drain(grace time.Duration) {
	drained := make(chan struct{})
	go func() { s.output.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(grace):
		s.closeAll()
		<-drained
	}
	s.closeAll()
}

// forwardInteractive passes a terminal's output on as it comes: a prompt
// has no newline and must show before the user types. (Whole-line
// forwarding is for ranks that are not talking to a person.)
func forwardInteractive(r io.Reader, sink iof.Sink, src iof.Source) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			sink.Write(src, iof.Stdout, buf[:n], false)
		}
		if err != nil {
			return
		}
	}
}

// copyStdin passes the launcher's stdin to the ranks that read it. EOF on
// prun's stdin becomes EOF on theirs; a rank that closes its stdin (or
// exits) drops out without harming the others. A slow reader holds the
// others back rather than letting prun buffer without bound.
func copyStdin(in io.Reader, outs []*os.File) {
	buf := make([]byte, 64<<10)
	defer func() {
		if st, ok := in.(StdinStopper); ok && len(outs) == 0 {
			st.StopReading() // every reader is gone before the input ended
		}
	}()
	for len(outs) > 0 {
		n, err := in.Read(buf)
		if n > 0 {
			live := outs[:0]
			for _, w := range outs {
				if _, werr := w.Write(buf[:n]); werr != nil {
					w.Close()
					continue
				}
				live = append(live, w)
			}
			outs = live
		}
		if err != nil {
			break
		}
	}
	for _, w := range outs {
		w.Close()
	}
}
