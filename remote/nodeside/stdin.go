package nodeside

import (
	"io"
	"prun/remote/wire"
	"sync"
)

// stdinPipe is the launcher's stdin as this node's ranks read it: chunks
// come down the control plane; an empty chunk is end of file. What the
// ranks' reader takes is acknowledged through ack.
type stdinPipe struct {
	mu      sync.Mutex
	cond    *sync.Cond
	chunks  [][]byte
	eof     bool
	stopped bool // no rank reads any more: chunks are dropped
	unacked int
	ack     func(n int)
	done    func() // tells the launcher to send no more
}

func (s *stdinPipe) init() {
	if s.cond == nil {
		s.cond = sync.NewCond(&s.mu)
	}
}

func (s *stdinPipe) write(p []byte) {
	s.mu.Lock()
	s.init()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	if len(p) == 0 {
		s.eof = true
	} else {
		s.chunks = append(s.chunks, append([]byte(nil), p...))
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *stdinPipe) close() { s.write(nil) }

// StopReading (daemon.StdinStopper): this node's ranks read no more stdin.
// The launcher stops sending here, and stops waiting for this node's
// acknowledgements, so that the other nodes get the rest.
func (s *stdinPipe) StopReading() {
	s.mu.Lock()
	first := !s.stopped
	s.stopped, s.chunks = true, nil
	f := s.done
	s.mu.Unlock()
	if first && f != nil {
		f()
	}
}

func (s *stdinPipe) Read(p []byte) (int, error) {
	s.mu.Lock()
	s.init()
	for len(s.chunks) == 0 && !s.eof {
		s.cond.Wait()
	}
	if len(s.chunks) == 0 {
		s.mu.Unlock()
		return 0, io.EOF
	}
	k := copy(p, s.chunks[0])
	if k == len(s.chunks[0]) {
		s.chunks[0] = nil
		s.chunks = s.chunks[1:]
	} else {
		s.chunks[0] = s.chunks[0][k:]
	}
	s.unacked += k
	var ack int
	if s.unacked >= wire.StdinAckEvery || len(s.chunks) == 0 {
		ack, s.unacked = s.unacked, 0
	}
	f := s.ack
	s.mu.Unlock()
	if ack > 0 && f != nil {
		f(ack)
	}
	return k, nil
}

// Stdin streams. Each job reads its own stream, named by its namespace: a
// standalone launch has one, a persistent runtime one per submission whose
// ranks on the node read stdin (so that one submission's end of input is
// not every later one's). Every stdin frame starts with the stream's name:
//   tStdin      name, then the bytes (none: end of file)
//   tStdinAck   name, then the count (8 bytes)
//   tStdinDone  name
// where name is a 2-byte big-endian length and the namespace's bytes.

// stdinStreams are a node's stdin streams, by namespace: made by whichever
// comes first, the job's shell or the stream's first chunk; dropped when
// the runtime forgets the job.
type stdinStreams struct {
	mu     sync.Mutex
	m      map[string]*stdinPipe
	closed bool
	ack    func(nspace string, n int)
	done   func(nspace string)
	// dropped: the last forgotten streams, whose late chunks (sent as the
	// job ended) are dropped; bounded, oldest out first.
	dropped map[string]bool
	order   []string
}

const keepDropped = 1024

func (s *stdinStreams) get(nspace string) *stdinPipe {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[nspace]; p != nil {
		return p
	}
	if s.m == nil {
		s.m = map[string]*stdinPipe{}
	}
	p := &stdinPipe{ack: func(n int) { s.ack(nspace, n) }, done: func() { s.done(nspace) }}
	if s.closed || s.dropped[nspace] {
		p.eof, p.stopped = true, true
	}
	s.m[nspace] = p
	return p
}

func (s *stdinStreams) write(nspace string, p []byte) {
	s.mu.Lock()
	gone := s.dropped[nspace]
	s.mu.Unlock()
	if !gone {
		s.get(nspace).write(p)
	}
}

// drop ends a forgotten job's stream: its readers see EOF, its late chunks
// are dropped.
func (s *stdinStreams) drop(nspace string) {
	s.mu.Lock()
	p := s.m[nspace]
	delete(s.m, nspace)
	if s.dropped == nil {
		s.dropped = map[string]bool{}
	}
	if !s.dropped[nspace] {
		s.dropped[nspace] = true
		s.order = append(s.order, nspace)
		if len(s.order) > keepDropped {
			delete(s.dropped, s.order[0])
			s.order = s.order[1:]
		}
	}
	s.mu.Unlock()
	if p != nil {
		p.close()
	}
}

// close ends every stream (the daemon is closing).
func (s *stdinStreams) close() {
	s.mu.Lock()
	s.closed = true
	ps := make([]*stdinPipe, 0, len(s.m))
	for _, p := range s.m {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	for _, p := range ps {
		p.close()
	}
}
