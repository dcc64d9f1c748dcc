package cli

import (
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"prun/jobspec"
)

// Submitted parses a command line that a submitter sent to a persistent
// runtime, in the submitter's environment and working directory (env: see
// EnvOf), and does what prun would have done with it before the launch:
// help goes to stdout, warnings and the one-line error to stderr (red when
// colour). It returns the job to run, or with none the exit status; local
// says the command line is not the runtime's to answer (a subcommand such
// as completion; --debug, which execs a debugger; --version, which names
// the binary the user ran, not the runtime's, perhaps of another build):
// the submitter runs it itself.
func Submitted(args []string, env Env, stdout, stderr io.Writer, color bool) (job *jobspec.Job, exit int, local bool) {
	if isSubcommandName(args) {
		return nil, 0, true
	}
	req, err := Parse(args, env)
	if err != nil {
		printError(stderr, err, color)
		return nil, errorStatus(err), false
	}
	if req.Exec != nil || req.Version { // before the warnings: the submitter prints them
		return nil, 0, true
	}
	if req.answered(stdout, stderr) {
		return nil, 0, false
	}
	return req.Job, 0, false
}

// EnvOf is another process's environment as the parser sees it: its
// variables, its working directory, programs found in its PATH from there
// (as exec.LookPath would in that process).
func EnvOf(environ []string, cwd string) Env {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := vars[k]; !dup { // the first one, as getenv
				vars[k] = v
			}
		}
	}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	return Env{
		LookupEnv: lookup,
		Getwd:     func() (string, error) { return cwd, nil },
		LookPath: func(prog string) (string, error) {
			path, _ := lookup("PATH")
			return lookPathFrom(prog, path, cwd)
		},
		ReadFile: os.ReadFile,
	}
}

// lookPathFrom is exec.LookPath in a process whose PATH is path and whose
// working directory is cwd (an empty or relative entry is from cwd).
func lookPathFrom(prog, path, cwd string) (string, error) {
	if p, ok := findIn(prog, path, cwd, "."); ok {
		return p, nil
	}
	return "", &exec.Error{Name: prog, Err: exec.ErrNotFound}
}

// isSubcommandName reports whether args name one of cobra's completion
// commands (only as their first word).
func isSubcommandName(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return true
	}
	return false
}
