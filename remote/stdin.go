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
