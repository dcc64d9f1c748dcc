// Command prun is a parallel job launcher: an mpirun replacement that hosts
// the PMIx server for the processes it starts.
package main

import (
	"fmt"
	"os"
	"prun/remote/nodeside"

	"prun/cli"
	"prun/dvm"
	"prun/internal/trace"
	"prun/jobspec"
	"prun/launcher"
	"prun/remote"
	"prun/sessiondir"
)

// growStack grows the main goroutine's stack to 32 KiB while it is one
// frame deep. Left to grow on demand, it doubles deep inside the command
// line's parsing and the launch, and each growth walks every frame on the
// stack, reading their stack maps from the binary (page faults a short
// launch feels).
//
//go:noinline
func growStack(i int) byte {
	var frame [16 << 10]byte
	frame[i] = 1
	return frame[i/2]
}

func main() {
	growStack(1)
	trace.Mark("main") // with PRUN_DEBUG_T0: exec, dynamic linking and Go's start
	// `prun daemon --ctl` is how a launcher starts prun on another node;
	// it is not for users, so it is not in the help.
	if len(os.Args) == 3 && os.Args[1] == remote.DaemonArgs[0] {
		switch os.Args[2] {
		case remote.DaemonArgs[1]:
			os.Exit(nodeside.Serve(os.Stdin, os.Stderr))
		case remote.CleanupArgs[1]:
			sessiondir.CleanStale(os.TempDir())
			os.Exit(0)
		}
	}
	if len(os.Args) >= 2 && os.Args[1] == "dvm" {
		os.Exit(dvmMain(os.Args[2:]))
	}
	if len(os.Args) >= 2 && (os.Args[1] == "top" || os.Args[1] == "stack") {
		os.Exit(inspectMain(os.Args[1], os.Args[2:]))
	}
	code := cli.Main(func(job *jobspec.Job) int {
		// Caught after parsing: --version and usage errors need none.
		sigs, err := launcher.CatchSignals()
		if err != nil {
			fmt.Fprintf(os.Stderr, "prun: %v\n", err)
			return launcher.ExitFailure
		}
		trace.Mark("parsed")
		if dir, ok := findDVM(job); ok {
			return launcher.Submit(dir, os.Args[1:], sigs)
		}
		return launcher.Run(job, launcher.DefaultOptions(sigs))
	})
	trace.Mark("exit")
	os.Exit(code)
}

// findDVM is the runtime a job goes to: --dvm's or PRUN_DVM's (which must
// answer), else the default one (dvm.Default: this allocation's, or outside
// any the one made every shell's) when it has a socket (a stale one is a
// dead runtime's: the job runs standalone). cmd/prun/submit.c finds the
// same before Go's runtime starts.
func findDVM(job *jobspec.Job) (string, bool) {
	if job.DVM == "" && os.Getenv(dvm.Env) == "" {
		dir := dvm.Default(os.Getenv)
		if dir == "" {
			return "", false
		}
		if _, err := os.Stat(dvm.Socket(dir)); err != nil {
			return "", false
		}
		c, err := dvm.Dial(dir)
		if err != nil {
			return "", false
		}
		c.Close()
		return dir, true
	}
	dir, _ := dvmDir(job.DVM) // a bad name: Submit says why
	return dir, true
}
