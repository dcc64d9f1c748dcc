// Package trace prints the milestones of a launch with their time since the
// process started, when PRUN_DEBUG_TIMING=1: where start-up time goes, on
// the launcher and on every daemon.
package trace

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

var start = startTime()

// startTime is this package's initialisation, or PRUN_DEBUG_T0 (Unix
// nanoseconds) when a harness passes the time it forked prun: then the
// marks include the exec and the Go runtime's start.
func startTime() time.Time {
	if ns, err := strconv.ParseInt(os.Getenv("PRUN_DEBUG_T0"), 10, 64); err == nil {
		return time.Unix(0, ns)
	}
	return time.Now()
}

// Mark prints one milestone to stderr. (The variable is read each time: a
// daemon learns it from its bootstrap, after start.)
func Mark(format string, a ...any) {
	if os.Getenv("PRUN_DEBUG_TIMING") == "1" {
		fmt.Fprintf(os.Stderr, "prun timing %8.2f ms [%d] %s\n", float64(time.Since(start).Microseconds())/1000, os.Getpid(),
			fmt.Sprintf(format, a...))
	}
}
