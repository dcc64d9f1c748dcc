package launcher

import (
	"os"
	"os/signal"
	"syscall"

	"prun/internal/sigcatch"
)

// forwarded are the signals prun catches: the terminating ones end the job,
// the others pass to the ranks (SIGWINCH to an interactive rank's terminal).
var forwarded = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGWINCH}

// Signals catches the signals a launch handles: the forwarded ones with
// sigcatch (a sigaction each), SIGPIPE with os/signal, because Go's runtime
// raises that one itself when a write to stdout fails. os/signal makes a
// round trip to a thread of the runtime's for each signal it starts or
// stops catching (0.3-0.4 ms for all ten on the project's VMs), so
// SIGPIPE's starts in the background while the job is mapped and stops in
// the background as the launch ends.
type Signals struct {
	catcher *sigcatch.Catcher
	pipes   chan os.Signal
	ready   chan struct{}
}

// CatchSignals starts catching the signals prun forwards. A launch waits
// until they are caught before it creates anything that must be cleaned
// up, so a signal is either handled or ends prun before anything exists.
func CatchSignals() (*Signals, error) {
	k, err := sigcatch.Catch(8, forwarded...)
	if err != nil {
		return nil, err
	}
	s := &Signals{catcher: k, pipes: make(chan os.Signal, 1), ready: make(chan struct{})}
	go func() {
		// A closed stdout drops output, it does not kill the job. Catching
		// SIGPIPE (rather than ignoring it, which exec passes on) leaves the
		// ranks' own SIGPIPE alone.
		signal.Notify(s.pipes, syscall.SIGPIPE)
		close(s.ready)
	}()
	return s, nil
}

// wait returns the channel of caught signals once catching has begun; a
// nil Signals (tests that call Run) catches nothing.
func (s *Signals) wait() <-chan os.Signal {
	if s == nil {
		return nil
	}
	<-s.ready
	return s.catcher.C
}

// stop gives the signals back to their default actions: the launch is
// over, and what prun still does (flushing output) may be interrupted as
// any program's.
func (s *Signals) stop() {
	if s == nil {
		return
	}
	s.catcher.Release()
	go func() {
		<-s.ready
		signal.Stop(s.pipes)
	}()
}
