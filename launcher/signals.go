package launcher

import (
	"os"
	"os/signal"
	"syscall"
)

// forwarded are the signals prun catches: the terminating ones end the job,
// the others pass to the ranks (SIGWINCH to an interactive rank's terminal).
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGWINCH}

// Signals catches the signals a launch handles. Go's runtime makes a
// round trip to its signal thread for each signal it starts or stops
// catching (0.6 ms of a 4-rank launch on the project's VMs, two thread
// switches each), so catching starts in the background while the job is
// mapped, and stopping happens in the background as the launch ends.
type Signals struct {
	c     chan os.Signal
	pipes chan os.Signal
	ready chan struct{}
}

// CatchSignals starts catching the signals prun forwards. A launch waits
// until they are caught before it creates anything that must be cleaned
// up, so a signal is either handled or ends prun before anything exists.
func CatchSignals() *Signals {
	s := &Signals{
		c:     make(chan os.Signal, 8),
		pipes: make(chan os.Signal, 1),
		ready: make(chan struct{}),
	}
	go func() {
		signal.Notify(s.c, forwarded...)
		// A closed stdout drops output, it does not kill the job. Catching
		// SIGPIPE (rather than ignoring it, which exec passes on) leaves the
		// ranks' own SIGPIPE alone.
		signal.Notify(s.pipes, syscall.SIGPIPE)
		close(s.ready)
	}()
	return s
}

// wait returns the channel of caught signals once catching has begun; a
// nil Signals (tests that call Run) catches nothing.
func (s *Signals) wait() <-chan os.Signal {
	if s == nil {
		return nil
	}
	<-s.ready
	return s.c
}

// stop gives the signals back to their default actions, in the background:
// the launch is over, and what prun still does (flushing output) may
// be interrupted as any program's.
func (s *Signals) stop() {
	if s == nil {
		return
	}
	go func() {
		<-s.ready
		signal.Stop(s.c)
		signal.Stop(s.pipes)
	}()
}
