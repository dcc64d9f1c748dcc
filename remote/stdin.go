package remote

import (
	"encoding/binary"
	"errors"
	"io"
	"sync"
)

// The launcher's stdin reaches remote ranks through the control plane with
// end-to-end flow control: the launcher sends at most stdinWindow bytes a
// node has not yet handed to its ranks, and the node acknowledges what its
// ranks took (every stdinAckEvery bytes, and whenever it runs dry). A rank
// that does not read thus holds up the launcher's reading, as a pipe would,
// instead of its node buffering the whole input.
const (
	stdinWindow   = 1 << 20
	stdinAckEvery = 64 << 10
)

var errNodeGone = errors.New("the node is gone")

// window is the count of the bytes of one stream the other end has not
// acknowledged yet: the launcher's for a node's stdin and preloads, a
// daemon's for its ranks' output (outCredit).
type window struct {
	mu       sync.Mutex
	cond     *sync.Cond
	limit    int
	inflight int
	dead     bool
}

func newWindow(limit int) *window {
	w := &window{limit: limit}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// acquire waits until n more bytes fit (a chunk larger than the window goes
// alone), or the node is gone.
func (w *window) acquire(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.dead && w.inflight > 0 && w.inflight+n > w.limit {
		w.cond.Wait()
	}
	if w.dead {
		return errNodeGone
	}
	w.inflight += n
	return nil
}

func (w *window) release(n int) {
	w.mu.Lock()
	w.inflight = max(w.inflight-n, 0)
	w.cond.Broadcast()
	w.mu.Unlock()
}

// kill wakes every waiter for good: the node is lost or closing.
func (w *window) kill() {
	w.mu.Lock()
	w.dead = true
	w.cond.Broadcast()
	w.mu.Unlock()
}

func encodeAck(n int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// decodeAck reads an acknowledgement of at most limit bytes.
func decodeAck(b []byte, limit int) (int, error) {
	if len(b) != 8 {
		return 0, errors.New("bad acknowledgement")
	}
	n := binary.BigEndian.Uint64(b)
	if n > uint64(limit) {
		return 0, errors.New("bad acknowledgement")
	}
	return int(n), nil
}

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
	if s.unacked >= stdinAckEvery || len(s.chunks) == 0 {
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

// appendStream starts a stdin frame's body with its stream's name.
func appendStream(b []byte, nspace string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(nspace)))
	return append(b, nspace...)
}

// splitStream reads a stdin frame's stream name and returns the rest.
func splitStream(body []byte) (nspace string, rest []byte, err error) {
	if len(body) < 2 {
		return "", nil, errors.New("bad stdin frame")
	}
	n := int(binary.BigEndian.Uint16(body))
	if len(body) < 2+n {
		return "", nil, errors.New("bad stdin frame")
	}
	return string(body[2 : 2+n]), body[2+n:], nil
}

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
