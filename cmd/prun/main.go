// Command prun is a parallel job launcher: an mpirun replacement that hosts
// the PMIx server for the processes it starts.
package main

import (
	"os"

	"prun/cli"
	"prun/jobspec"
	"prun/launcher"
)

func main() {
	os.Exit(cli.Main(func(job *jobspec.Job) int {
		return launcher.Run(job, launcher.DefaultOptions())
	}))
}
