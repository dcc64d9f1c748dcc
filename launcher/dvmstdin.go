package launcher

import (
	"errors"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// submitterStdin is a submitter's stdin as a DVM reads it: the descriptor
// came over the runtime's socket and is shared with the submitter's
// terminal or pipe, so it is read only while the submission runs. Each
// Read waits in poll(2) on the descriptor and on a stop pipe, and reads
// only what is there: once stopped (the run's end) no read is left
// pending, which would take the next line the user types to the shell
// (closing an *os.File does not end a read(2) blocked on it).
type submitterStdin struct {
	fd           int // valid while f is open: the submitter's files close after the run
	stopR, stopW *os.File
	stopFd       int // stopR's

	mu      sync.RWMutex // Read holds it shared; stop takes it to wait for them
	stopped bool
	once    sync.Once
}

func newSubmitterStdin(f *os.File) (*submitterStdin, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	s := &submitterStdin{fd: -1}
	sc.Control(func(fd uintptr) { s.fd = int(fd) })
	if s.fd < 0 {
		return nil, errors.New("no descriptor")
	}
	if s.stopR, s.stopW, err = os.Pipe(); err != nil {
		return nil, err
	}
	s.stopFd = int(s.stopR.Fd())
	return s, nil
}

func (s *submitterStdin) Read(p []byte) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopped {
		return 0, io.EOF
	}
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(s.stopFd), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if fds[1].Revents != 0 {
			return 0, io.EOF
		}
		if fds[0].Revents&unix.POLLNVAL != 0 {
			return 0, errors.New("the submitter's stdin is closed")
		}
		if fds[0].Revents == 0 {
			continue
		}
		n, err := unix.Read(s.fd, p)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR: // a non-blocking descriptor someone else read first
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// stop ends every Read, now and later, and waits until none is under way.
func (s *submitterStdin) stop() {
	s.once.Do(func() {
		s.stopW.Close() // the stop pipe's end: a Read in poll returns
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.stopR.Close()
	})
}
