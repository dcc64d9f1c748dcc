package ctl

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A link can also run over a byte stream that knows no deadlines: the
// standard input and output of the SSH session that started a daemon, for a
// node that cannot open a connection back to its parent (a firewall, a jump
// host). A deadline that passes closes such a stream; the read or write it
// interrupts then fails as a timeout, as on a socket.

// DialStream authenticates the dialer's end of a stream, as id, and makes
// it a link.
func DialStream(r io.Reader, w io.Writer, c io.Closer, secret []byte, id uint32, timeout time.Duration) (*Link, error) {
	return streamLink(r, w, c, secret, false, id, timeout)
}

// AcceptStream authenticates the listener's end of a stream and makes it a
// link.
func AcceptStream(r io.Reader, w io.Writer, c io.Closer, secret []byte, timeout time.Duration) (*Link, error) {
	return streamLink(r, w, c, secret, true, 0, timeout)
}

func streamLink(r io.Reader, w io.Writer, c io.Closer, secret []byte, listener bool, id uint32, timeout time.Duration) (*Link, error) {
	s := &streamConn{r: r, w: w, c: c}
	k, peer, err := handshake(s, secret, listener, id, timeout)
	if err != nil {
		s.Close()
		return nil, err
	}
	return newLink(s, k, peer), nil
}

type streamConn struct {
	r io.Reader
	w io.Writer
	c io.Closer

	mu      sync.Mutex
	rt, wt  *time.Timer
	expired atomic.Bool
	once    sync.Once
}

func (s *streamConn) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && s.expired.Load() {
		err = errTimeout
	}
	return n, err
}

func (s *streamConn) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil && s.expired.Load() {
		err = errTimeout
	}
	return n, err
}

func (s *streamConn) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		for _, t := range []*time.Timer{s.rt, s.wt} {
			if t != nil {
				t.Stop()
			}
		}
		s.mu.Unlock()
		err = s.c.Close()
	})
	return err
}

func (s *streamConn) SetDeadline(t time.Time) error {
	s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

func (s *streamConn) SetReadDeadline(t time.Time) error  { return s.arm(&s.rt, t) }
func (s *streamConn) SetWriteDeadline(t time.Time) error { return s.arm(&s.wt, t) }

// arm sets the timer that closes the stream at t (none for a zero t).
func (s *streamConn) arm(timer **time.Timer, t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *timer != nil {
		(*timer).Stop()
	}
	if t.IsZero() {
		return nil
	}
	d := time.Until(t)
	if *timer == nil {
		*timer = time.AfterFunc(d, s.expire)
	} else {
		(*timer).Reset(d)
	}
	return nil
}

func (s *streamConn) expire() {
	s.expired.Store(true)
	s.Close()
}

// errTimeout is what a read or write cut off by its deadline returns.
var errTimeout net.Error = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
