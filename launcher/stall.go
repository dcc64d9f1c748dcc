package launcher

import (
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"prun/ctl"
)

// stallWatch notices that the launcher itself did not run for a while
// (kill -STOP, then SIGCONT; a host too starved to schedule it): a ticker
// that finds a gap between its ticks. Go's clock is monotonic and runs on
// while the process is stopped. The daemons give up on a launcher silent
// for their silence limit (ctl.Silence); when they do, the launcher, back, names its own
// stall rather than the nodes it finds gone.
type stallWatch struct {
	stop  chan struct{}
	limit time.Duration // the daemons' silence limit

	mu      sync.Mutex
	last    time.Time     // the latest tick
	gap     time.Duration // the latest stall's length, ended at resumed
	resumed time.Time
}

const stallTick = 250 * time.Millisecond

// stallMin is the shortest stall that may make a daemon give up: it last
// heard a heartbeat up to HeartbeatEvery before the launcher stopped.
func (w *stallWatch) stallMin() time.Duration { return w.limit - ctl.HeartbeatEvery }

// startStallWatch watches for stalls that daemons with the silence limit
// limit may have given up on.
func startStallWatch(limit time.Duration) *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), limit: limit, last: time.Now()}
	go func() {
		t := time.NewTicker(stallTick)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case now := <-t.C:
				now = time.Now() // the tick's own time is when it was due
				w.mu.Lock()
				if d := now.Sub(w.last); d >= w.stallMin() {
					w.gap, w.resumed = d, now
				}
				w.last = now
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// silence is the daemons' silence limit (0 without a watch).
func (w *stallWatch) silence() time.Duration {
	if w == nil {
		return 0
	}
	return w.limit
}

func (w *stallWatch) close() {
	if w != nil {
		close(w.stop)
	}
}

// recent is the length of a stall that ended lately (or is ending now, its
// gap not ticked yet), long enough for daemons to have given up; else 0.
// Lately: the lost links of such a stall are read as soon as the launcher
// runs; a few DeadAfters leave room for a loaded host.
func (w *stallWatch) recent() time.Duration {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if d := now.Sub(w.last); d >= w.stallMin() {
		return d
	}
	if !w.resumed.IsZero() && now.Sub(w.resumed) < 3*w.limit {
		return w.gap
	}
	return 0
}

// reset forgets a stall the daemons were told about (Ctrl-Z).
func (w *stallWatch) reset() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last, w.gap, w.resumed = time.Now(), 0, time.Time{}
}

// stopSelf stops the process and returns once it is continued. It raises
// SIGSTOP on its own thread, as raise(3) does: sent to the process, the
// signal may be taken by another thread, and this one would run on (and
// continue the ranks) before the stop reached it.
func stopSelf() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Tgkill(unix.Getpid(), unix.Gettid(), unix.SIGSTOP)
}
