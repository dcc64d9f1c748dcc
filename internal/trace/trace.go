// Package trace prints the milestones of a launch with their time since the
// process started, when PRUN_DEBUG_TIMING=1: where start-up time goes, on
// the launcher and on every daemon.
package trace

import (
	"fmt"
	"os"
	"time"
)

var start = time.Now()

// Mark prints one milestone to stderr. (The variable is read each time: a
// daemon learns it from its bootstrap, after start.)
func Mark(format string, a ...any) {
	if os.Getenv("PRUN_DEBUG_TIMING") == "1" {
		fmt.Fprintf(os.Stderr, "prun timing %8.2f ms [%d] %s\n", float64(time.Since(start).Microseconds())/1000, os.Getpid(),
			fmt.Sprintf(format, a...))
	}
}
