// Package timerslack gives every thread of the process a wide timer slack
// (1 ms), set before the Go runtime starts its first thread, and lets a fork
// hand its child the slack the process was started with.
//
// While any goroutine sits in a system call or a cgo call, the runtime's
// sysmon thread sleeps 20 us at a time, which the kernel's default 50 us
// slack turns into a wake-up every 70-80 us: CPU taken from the ranks a
// launch is starting, on the few CPUs they share. A wide slack lets the kernel
// batch those wake-ups; prun's own timers (grace periods, timeouts, hold
// timeouts) are tens of milliseconds or more and do not mind being late by
// one. Ranks must not inherit it: an MPI progress loop's short sleeps would
// stretch, so Fork restores the original slack on the forking thread.
package timerslack

/*
#include <stdlib.h>
#include <sys/prctl.h>

// The slack the process started with; 0 when it was left as it was.
static long timerslack_original;

// A constructor runs before the Go runtime, so every thread the runtime
// and the libraries create inherits the slack (a thread inherits its
// creator's). A slack already wider, the user's choice, stays.
__attribute__((constructor)) static void timerslack_widen(void) {
	long cur = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	if (cur <= 0 || cur >= 1000000) {
		return;
	}
	if (prctl(PR_SET_TIMERSLACK, 1000000UL, 0, 0, 0) == 0) {
		timerslack_original = cur;
	}
}

static long timerslack_get_original(void) { return timerslack_original; }
*/
import "C"

import "golang.org/x/sys/unix"

// Wide is the slack the process's threads run with, in nanoseconds.
const Wide = 1000000

// original is the slack the process was started with (0: unchanged).
var original = int(C.timerslack_get_original())

// Original is the timer slack, in nanoseconds, the process was started
// with, or 0 when the process did not change it.
func Original() int { return original }

// Fork runs start, which forks, with the calling thread's timer slack set
// back to the original, so that the child inherits that; then it widens it
// again. The caller must be locked to its OS thread (runtime.LockOSThread).
func Fork[T any](start func() (T, error)) (T, error) {
	if original == 0 {
		return start()
	}
	unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(original), 0, 0, 0)
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, Wide, 0, 0, 0)
	return start()
}
