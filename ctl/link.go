package ctl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Liveness of a link. A peer that sends nothing (not even a heartbeat) for
// DeadAfter is lost: a killed daemon closes its socket at once, but a node
// whose link went down says nothing, and only the silence tells.
var (
	HeartbeatEvery = time.Second
	DeadAfter      = 5 * time.Second
	// HandshakeTimeout bounds how long an unauthenticated peer may hold a
	// listener's connection.
	HandshakeTimeout = 5 * time.Second
)

// Silence is how long a launch of n daemons waits for a silent peer
// (SetSilence): DeadAfter, and a heartbeat's interval more per 64 daemons,
// at most 12 DeadAfters. Starting a large tree loads the launcher (every
// daemon's hello, the plan) and, on a shared machine, every vertex: a peer
// starved of CPU for a few seconds is not lost. The price: a node that
// vanishes is found that much later (a killed daemon's link closes at
// once). TCP_USER_TIMEOUT at DeadAfter would tell a dead node's kernel
// from a starved process's, but on loopback it closed the links of a
// stopped launcher within DeadAfter as well (TestSimulatedTree256).
func Silence(n int) time.Duration {
	livenessMu.RLock()
	defer livenessMu.RUnlock()
	return min(DeadAfter+time.Duration(n/64)*HeartbeatEvery, 12*DeadAfter)
}

// livenessMu orders a new link's reading of HeartbeatEvery and DeadAfter
// with a test's change of them (a link a listener makes after its test
// ended would otherwise race with the next test's settings).
var livenessMu sync.RWMutex

// TypeHeartbeat frames keep a link alive; Link.Recv never returns them.
const TypeHeartbeat = 0

// Link is an authenticated connection carrying authenticated frames (seal.go),
// with heartbeats. Send may be called from many goroutines; Recv from one.
// A frame that fails to verify closes the link (ErrFrameAuth).
//
// Frames are written whole or the link is dead: a write that fails or
// times out may have left part of a frame on the stream, after which the
// peer could only read garbage as frame headers, so the link closes and
// every later Send fails with the first error. Nothing on a link may
// therefore wait on a slow consumer: flow control is the users' (remote
// credits output and stdin end to end), and a peer that reads nothing for
// DeadAfter is lost.
type Link struct {
	c    conn
	peer uint32 // the id the peer proved in the handshake
	r    *bufio.Reader
	in   direction // Recv's
	wmu  sync.Mutex
	werr error         // under wmu: the write that killed the link
	out  direction     // under wmu
	wbuf []byte        // under wmu: frames of up to smallFrame bytes are assembled here
	tbuf [tagSize]byte // under wmu: a large frame's tag
	done chan struct{}
	once sync.Once

	// suspended: the peer said it stops (Ctrl-Z of the launcher), so its
	// silence is no loss until Resume. dmu orders the flag with the read
	// deadline that Recv arms, so that no deadline outlives a Suspend.
	dmu       sync.Mutex
	suspended bool

	// The liveness settings in force when the link was made: a link's
	// goroutines never read the package's variables, which tests change
	// between links. dead bounds a write; silent (under dmu) bounds the
	// peer's silence, DeadAfter unless SetSilence said more.
	every, dead, silent time.Duration
}

// SilentError is Recv's failure when the peer sent nothing, not even a
// heartbeat, for DeadAfter.
type SilentError struct{ After time.Duration }

func (e *SilentError) Error() string { return fmt.Sprintf("no heartbeat for %v", e.After) }

// conn is what a link runs over: a socket, or a stream (stream.go).
type conn interface {
	io.ReadWriteCloser
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// newLink makes a link of a connection whose handshake gave keys k and the
// peer's id.
func newLink(c conn, k linkKeys, peer uint32) *Link {
	livenessMu.RLock()
	l := &Link{c: c, r: bufio.NewReaderSize(c, 64<<10), done: make(chan struct{}), peer: peer,
		in: direction{aead: k.open}, out: direction{aead: k.seal},
		every: HeartbeatEvery, dead: DeadAfter, silent: DeadAfter}
	livenessMu.RUnlock()
	go l.beat()
	return l
}

// Peer is the id the peer sent in the handshake, which its answer proved
// with the secret: a dialer's vertex, whose frames are then its alone (no
// host on the path can write one), even before its first frame opens.
func (l *Link) Peer() uint32 { return l.peer }

// SetSilence sets how long the peer process may send nothing before Recv
// fails (DeadAfter until then; see Silence).
func (l *Link) SetSilence(d time.Duration) {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	l.silent = max(d, l.dead)
}

func (l *Link) silence() time.Duration {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.silent
}

// Dial connects to a listener at addr and proves the secret, and id.
func Dial(addr string, secret []byte, id uint32, timeout time.Duration) (*Link, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return Client(c, secret, id, timeout)
}

// Client proves the secret, and id, on a connection made to a listener and
// makes it a link; the connection is closed if that fails.
func Client(c net.Conn, secret []byte, id uint32, timeout time.Duration) (*Link, error) {
	k, peer, err := handshake(c, secret, false, id, timeout)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", c.RemoteAddr(), err)
	}
	return newLink(c, k, peer), nil
}

// Server proves the secret on a connection a listener accepted, as a
// Listener does, and makes it a link; the connection is closed if that
// fails.
func Server(c net.Conn, secret []byte, timeout time.Duration) (*Link, error) {
	k, peer, err := handshake(c, secret, true, 0, timeout)
	if err != nil {
		c.Close()
		return nil, err
	}
	return newLink(c, k, peer), nil
}

// Send writes one frame, whole, or fails and closes the link. A peer that
// does not read for its silence limit (DeadAfter, or SetSilence's) is lost:
// a starved peer is waited for as long when it does not read as when it
// does not write (a vertex starved of CPU while its parent sends it a large
// result is slow, not lost).
func (l *Link) Send(typ uint8, payload []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.werr != nil {
		return l.werr
	}
	if len(payload) > MaxFrame {
		return fmt.Errorf("ctl: frame of %d bytes exceeds %d", len(payload), MaxFrame)
	}
	limit := l.silence()
	l.c.SetWriteDeadline(time.Now().Add(limit))
	if err := l.write(typ, payload); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			err = fmt.Errorf("the peer read nothing for %v", limit)
		}
		l.werr = fmt.Errorf("ctl: link closed after a failed write: %w", err)
		l.Close()
		return l.werr
	}
	return nil
}

// write tags the frame and writes it whole: a small one in one write from
// the link's buffer, a large one by writev. Under wmu.
func (l *Link) write(typ uint8, payload []byte) error {
	n := headerSize + len(payload) + tagSize
	if n <= smallFrame {
		if cap(l.wbuf) < n {
			l.wbuf = make([]byte, 0, max(n, 512))
		}
		b, err := l.out.frame(l.wbuf[:0], typ, payload)
		if err != nil {
			return err
		}
		l.wbuf = b
		_, err = l.c.Write(b)
		return err
	}
	hdr := header(typ, len(payload))
	tag, err := l.out.tag(l.tbuf[:0], &hdr, payload)
	if err != nil {
		return err
	}
	bufs := net.Buffers{hdr[:], payload, tag}
	_, err = bufs.WriteTo(l.c)
	return err
}

// closedBy is the reason of a read error: the failed write that closed the
// link, if one did ("use of closed network connection" says nothing of it).
func (l *Link) closedBy(err error) error {
	if !errors.Is(err, net.ErrClosed) {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.werr != nil {
		return l.werr
	}
	return err
}

// Recv returns the next frame that is not a heartbeat. It fails when the
// peer closed the link or said nothing for its silence limit (DeadAfter, or
// SetSilence's; *SilentError), unless it is suspended.
//
// A deadline that passed while this process did not run (SIGSTOP) says
// nothing of the peer, whose heartbeats wait in the socket: so the peer is
// lost only when a further half HeartbeatEvery brings nothing either. Waiting
// for the frame's first byte with Peek consumes nothing, so that look
// cannot cut a frame. (A stream link closes at its deadline: for it the
// second look fails at once.)
func (l *Link) Recv() (Frame, error) {
	for {
		silent := l.silence()
		l.arm(silent)
		_, err := l.r.Peek(1)
		if isTimeout(err) && !l.isSuspended() {
			l.arm(l.every / 2)
			_, err = l.r.Peek(1)
		}
		if isTimeout(err) {
			if l.isSuspended() {
				continue
			}
			return Frame{}, &SilentError{silent}
		}
		if err != nil {
			return Frame{}, l.closedBy(err)
		}
		l.arm(silent) // for the rest of the frame
		f, err := readFrame(l.r, &l.in)
		if err != nil {
			if errors.Is(err, ErrFrameAuth) {
				// Nothing more of this stream can be trusted, and its peer
				// may not be who this end thinks: no word goes back.
				l.Close()
				return Frame{}, err
			}
			if isTimeout(err) {
				return Frame{}, &SilentError{silent}
			}
			return Frame{}, l.closedBy(err)
		}
		if f.Type != TypeHeartbeat {
			return f, nil
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// arm sets the read deadline d from now, or none while suspended.
func (l *Link) arm(d time.Duration) {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	if l.suspended {
		l.c.SetReadDeadline(time.Time{})
	} else {
		l.c.SetReadDeadline(time.Now().Add(d))
	}
}

func (l *Link) isSuspended() bool {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.suspended
}

// Suspend stops expecting the peer's heartbeats, and sending them: it said
// it stops (a launcher's Ctrl-Z), or this end is about to. A pending Recv
// waits on.
func (l *Link) Suspend() {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	l.suspended = true
	l.c.SetReadDeadline(time.Time{})
}

// Resume expects heartbeats again, the first within the silence limit from now.
func (l *Link) Resume() {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	l.suspended = false
	l.c.SetReadDeadline(time.Now().Add(l.silent))
}

func (l *Link) beat() {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			// Suspended, the peer does not read (it is stopped): heartbeats
			// would only fill its socket until a write timed out.
			if l.isSuspended() {
				continue
			}
			if l.Send(TypeHeartbeat, nil) != nil {
				return
			}
		}
	}
}

// LocalAddr is this end's address (nil for a link over a stream).
func (l *Link) LocalAddr() net.Addr {
	if c, ok := l.c.(net.Conn); ok {
		return c.LocalAddr()
	}
	return nil
}

// RemoteAddr is the peer's address (nil for a link over a stream).
func (l *Link) RemoteAddr() net.Addr {
	if c, ok := l.c.(net.Conn); ok {
		return c.RemoteAddr()
	}
	return nil
}

// Done is closed when the link is closed (by Close, or by a failed Send).
func (l *Link) Done() <-chan struct{} { return l.done }

// Close closes the link; a blocked Recv returns.
func (l *Link) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.c.Close()
}

// Listener accepts links that prove the secret. Refused peers are closed
// without a byte of theirs parsed beyond the handshake.
type Listener struct {
	ln     net.Listener
	secret []byte
	links  chan *Link
}

// listenIn binds the first free port of ports, trying them from a random
// one on, so that jobs started together do not all race for the lowest.
func listenIn(addr string, ports [][2]int) (net.Listener, error) {
	if len(ports) == 0 {
		return net.Listen("tcp", addr)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var all []int
	var names []string
	for _, r := range ports {
		for p := r[0]; p <= r[1] && len(all) < 65536; p++ {
			all = append(all, p)
		}
		names = append(names, fmt.Sprintf("%d-%d", r[0], r[1]))
	}
	start := rand.IntN(len(all))
	for i := range all {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(all[(start+i)%len(all)])))
		if err == nil {
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("no free port in %s", strings.Join(names, ","))
}

func (l *Listener) serve() {
	defer close(l.links)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, peer, err := handshake(c, l.secret, true, 0, HandshakeTimeout)
			if err != nil {
				c.Close()
				return
			}
			select {
			case l.links <- newLink(c, k, peer):
			default: // nobody wants more links: a flood, not a daemon
				c.Close()
			}
		}()
	}
}

// Links delivers authenticated links; it is closed after Close.
func (l *Listener) Links() <-chan *Link { return l.links }

// Addr is the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops accepting.
func (l *Listener) Close() error { return l.ln.Close() }
