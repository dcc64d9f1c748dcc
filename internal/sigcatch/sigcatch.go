// Package sigcatch catches asynchronous signals with a C handler that writes
// each signal's number to a pipe, which a goroutine turns into os.Signal
// values on a channel: what os/signal.Notify does, without its cost.
//
// Go's runtime starts or stops catching a signal with a round trip to a
// goroutine locked to its own thread: two thread switches per signal, for
// each of the signals a launch forwards, dear wherever waking a thread on
// another CPU is (a virtual machine's IPIs trap to the hypervisor).
// sigaction is one system call.
//
// Only for signals os/signal does not also handle in the same process: a
// handler installed here replaces the runtime's, and the runtime does not
// reinstall its own. Not for SIGPIPE, which the runtime raises itself when a
// write to stdout or stderr fails (use signal.Notify), nor for synchronous
// signals (SIGSEGV, SIGBUS, ...) or the ones the runtime uses (SIGURG,
// SIGPROF).
package sigcatch

/*
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int sigcatch_fd = -1;

// Async-signal-safe: one write of one byte. A full pipe drops the byte;
// a signal pending in the kernel coalesces the same way.
static void sigcatch_handler(int sig) {
	int saved = errno;
	unsigned char b = (unsigned char)sig;
	ssize_t n = write(sigcatch_fd, &b, 1);
	(void)n;
	errno = saved;
}

static int sigcatch_set(int sig, int catch) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	// SA_ONSTACK: on a Go thread the handler runs on the thread's signal
	// stack, not on a goroutine's small one.
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sa.sa_handler = catch ? sigcatch_handler : SIG_DFL;
	sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, NULL) == 0 ? 0 : errno;
}

static void sigcatch_setfd(int fd) { sigcatch_fd = fd; }
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// Catcher delivers the signals it catches on C until Release.
type Catcher struct {
	C    <-chan os.Signal
	sigs []syscall.Signal
	stop chan struct{}
	done chan struct{}
}

var (
	mu     sync.Mutex // one Catcher at a time: the handler writes to one pipe
	active *Catcher
	// The pipe lives as long as the process: a handler that started before
	// Release must never write into an fd number that was closed and reused.
	pipeR *os.File
)

// Catch starts catching sigs. The channel holds up to buffer signals that
// the receiver has not taken yet; more of them wait in the pipe.
func Catch(buffer int, sigs ...syscall.Signal) (*Catcher, error) {
	mu.Lock()
	defer mu.Unlock()
	if active != nil {
		return nil, fmt.Errorf("sigcatch: already catching")
	}
	if pipeR == nil {
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
			return nil, fmt.Errorf("sigcatch: %w", err)
		}
		pipeR = os.NewFile(uintptr(p[0]), "sigcatch")
		C.sigcatch_setfd(C.int(p[1]))
	}
	for i, s := range sigs {
		if rc := C.sigcatch_set(C.int(s), 1); rc != 0 {
			for _, t := range sigs[:i] {
				C.sigcatch_set(C.int(t), 0)
			}
			return nil, fmt.Errorf("sigcatch: %v: %w", s, syscall.Errno(rc))
		}
	}
	c := make(chan os.Signal, buffer)
	k := &Catcher{C: c, sigs: sigs, stop: make(chan struct{}), done: make(chan struct{})}
	pipeR.SetReadDeadline(time.Time{})
	active = k
	go k.relay(c)
	return k, nil
}

// relay turns the pipe's bytes into signals until Release.
func (k *Catcher) relay(c chan<- os.Signal) {
	defer close(k.done)
	var buf [64]byte
	for {
		n, err := pipeR.Read(buf[:])
		for _, b := range buf[:n] {
			select {
			case c <- syscall.Signal(b):
			case <-k.stop:
				return
			}
		}
		if err != nil {
			return // Release's deadline
		}
	}
}

// Release gives the signals back their default actions and ends the
// channel's deliveries; the channel is not closed (as os/signal's is not).
// A signal caught while Release runs may stay in the pipe for the next
// Catcher.
func (k *Catcher) Release() {
	mu.Lock()
	defer mu.Unlock()
	if active != k {
		return
	}
	for _, s := range k.sigs {
		C.sigcatch_set(C.int(s), 0)
	}
	close(k.stop)
	pipeR.SetReadDeadline(time.Unix(1, 0))
	<-k.done
	active = nil
}
