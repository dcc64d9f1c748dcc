package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"prun/jobspec"
)

// DefaultDebuggers is mpirun's list of debuggers that --debug looks for, in
// order: each is a command line with @...@ placeholders; ':' separates them.
const DefaultDebuggers = "totalview @mpirun@ -a @mpirun_args@ : ddt -n @np@ -start @executable@ @executable_argv@ @single_app@ : fxp @mpirun@ -a @mpirun_args@"

// UnderDebugger is set in the environment of the debugger --debug starts,
// so that the prun it runs (with the same arguments) launches the job.
const UnderDebugger = "PRUN_UNDER_DEBUGGER"

// debuggerCommand is the command --debug runs instead of the job: the first
// debugger of list found in PATH, with its placeholders filled in:
// @mpirun@ (prun), @mpirun_args@ (prun's arguments), @np@ (the number of
// processes), @executable@ and @executable_argv@ (the first context's
// program and arguments), @single_app@ (nothing; the debugger takes one
// application context only).
func debuggerCommand(list string, args []string, job *jobspec.Job, env Env) ([]string, error) {
	var tried []string
	for _, entry := range strings.Split(list, ":") {
		words := strings.Fields(entry)
		if len(words) == 0 {
			continue
		}
		tried = append(tried, words[0])
		path, err := env.LookPath(words[0])
		if err != nil {
			continue
		}
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd := []string{path}
		for _, w := range words[1:] {
			switch w {
			case "@mpirun@":
				cmd = append(cmd, self)
			case "@mpirun_args@":
				cmd = append(cmd, args...)
			case "@np@":
				np := 0
				for _, a := range job.Apps {
					if a.NP <= 0 {
						return nil, usagef("--debug: %s needs the number of processes: give -n", words[0])
					}
					np += a.NP
				}
				cmd = append(cmd, strconv.Itoa(np))
			case "@executable@":
				cmd = append(cmd, job.Apps[0].Exe)
			case "@executable_argv@":
				cmd = append(cmd, job.Apps[0].Argv[1:]...)
			case "@single_app@":
				if len(job.Apps) > 1 {
					return nil, usagef("--debug: %s takes one application context, not %d", words[0], len(job.Apps))
				}
			default:
				cmd = append(cmd, w)
			}
		}
		return cmd, nil
	}
	return nil, usagef("--debug: none of the debuggers was found in PATH: %s (--debugger sets the list)", strings.Join(tried, ", "))
}

// execDebugger replaces prun with the debugger command, which starts prun
// again under its control.
func execDebugger(cmd []string) error {
	env := append(os.Environ(), UnderDebugger+"=1")
	if err := syscall.Exec(cmd[0], cmd, env); err != nil {
		return fmt.Errorf("--debug: %s: %w", cmd[0], err)
	}
	return nil
}
