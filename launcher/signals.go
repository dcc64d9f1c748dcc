package launcher

import (
	"fmt"
	"os"
	"syscall"

	"prun/internal/sigcatch"

	"golang.org/x/sys/unix"
)

// forwarded are the signals prun catches: the terminating ones end the job,
// SIGTSTP stops it, prun with it (see suspend), the others pass to the ranks
// (SIGWINCH to an interactive rank's terminal).
var forwarded = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGWINCH}

// Signals catches the signals a launch handles, with sigcatch: os/signal
// makes a round trip to a thread of Go's runtime for each signal it starts
// or stops catching, on every launch's path.
type Signals struct {
	catcher *sigcatch.Catcher
	from    <-chan os.Signal // a DVM's submission: the signals its submitter forwards
}

// CatchSignals starts catching the signals prun forwards, before a launch
// creates anything that must be cleaned up: a signal is either handled or
// ends prun before anything exists.
//
// It also points os.Stdout and os.Stderr at duplicates of fds 1 and 2. A
// closed stdout ends the job as a pipeline's writer would, with 141, once
// prun has cleaned up; but Go's runtime kills a program whose write to fd 1
// or 2 fails with EPIPE, unless it catches SIGPIPE (os/signal again).
// Through other fds a failed write is an error like any other. (Ignoring
// SIGPIPE is no way out: exec would pass that on to the ranks.)
func CatchSignals() (*Signals, error) {
	k, err := sigcatch.Catch(8, forwarded...)
	if err != nil {
		return nil, err
	}
	os.Stdout = dupFile(os.Stdout)
	os.Stderr = dupFile(os.Stderr)
	return &Signals{catcher: k}, nil
}

// dupFile returns a close-on-exec duplicate of f, or f if there is none.
func dupFile(f *os.File) *os.File {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return f // closed, say: nothing will be written there anyway
	}
	return os.NewFile(uintptr(fd), f.Name())
}

// submitterGone is what a persistent runtime's submission receives on its
// signal channel once its submitter's connection closed (it exited, or was
// killed without a word): not a signal, though it ends the job as a hangup
// would (policy.submitterGone).
type submitterGone struct{ pid int }

func (submitterGone) Signal() {}

func (g submitterGone) String() string {
	if g.pid > 0 {
		return fmt.Sprintf("its submitter (prun, pid %d) went away: the connection to the DVM closed", g.pid)
	}
	return "its submitter went away: the connection to the DVM closed"
}

// channel is where caught signals arrive; a nil Signals (tests that call
// Run) catches nothing.
func (s *Signals) channel() <-chan os.Signal {
	if s == nil {
		return nil
	}
	if s.catcher == nil {
		return s.from
	}
	return s.catcher.C
}

// stop gives the signals back to their default actions: the launch is
// over, and what prun still does (flushing output) may be interrupted as
// any program's.
func (s *Signals) stop() {
	if s != nil && s.catcher != nil {
		s.catcher.Release()
	}
}
