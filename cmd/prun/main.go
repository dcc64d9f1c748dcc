// Command prun is a parallel job launcher: an mpirun replacement that hosts
// the PMIx server for the processes it starts.
package main

import (
	"fmt"
	"os"

	"prun/cli"
	"prun/internal/trace"
	"prun/jobspec"
	"prun/launcher"
	"prun/remote"
	"prun/sessiondir"
)

func main() {
	trace.Mark("main") // with PRUN_DEBUG_T0: exec, dynamic linking and Go's start
	// `prun daemon --ctl` is how a launcher starts prun on another node;
	// it is not for users, so it is not in the help.
	if len(os.Args) == 3 && os.Args[1] == remote.DaemonArgs[0] {
		switch os.Args[2] {
		case remote.DaemonArgs[1]:
			os.Exit(remote.Serve(os.Stdin, os.Stderr))
		case remote.CleanupArgs[1]:
			sessiondir.CleanStale(os.TempDir())
			os.Exit(0)
		}
	}
	code := cli.Main(func(job *jobspec.Job) int {
		// Caught after parsing: --version and usage errors need none.
		sigs, err := launcher.CatchSignals()
		if err != nil {
			fmt.Fprintf(os.Stderr, "prun: %v\n", err)
			return launcher.ExitFailure
		}
		trace.Mark("parsed")
		return launcher.Run(job, launcher.DefaultOptions(sigs))
	})
	trace.Mark("exit")
	os.Exit(code)
}
