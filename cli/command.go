package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/fatih/color"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"prun/jobspec"
)

const long = `prun starts a parallel job: one process per rank, with a PMIx server and a
PMI-1/PMI-2 server hosted for them, so that Open MPI and MPICH programs both
run unchanged, on this node or, with --host or --hostfile, on others
reached over SSH (a prun daemon per node, started as a tree).

  prun [options] -n N PROGRAM [ARGS...] [: -n M PROGRAM2 [ARGS...] ...]

Application contexts are separated by a lone ':'; ranks continue across them
(prun -n 4 ./a : -n 2 ./b gives ./a ranks 0-3 and ./b ranks 4-5). Options
after a program's name belong to that program. -n, -x and --wdir apply to the
context they appear in; every other option goes before the first program.
Without -n, prun starts one process per slot (core).

Exit status:
  0        every rank exited 0
  N        the first rank to fail exited with N, or called MPI_Abort/PMIx_Abort(N)
  128+S    the first rank to fail was killed by signal S
  1        a rank exited 0 without calling finalize after initialising, or prun failed
  2        bad command line or input file (hostfile, rankfile), an unknown host, or not enough slots
  124      --timeout expired
  130/143  prun was interrupted by SIGINT/SIGTERM (forwarded to the ranks)
  141      prun's stdout or stderr reader went away (prun ... | head)`

// commands lists prun's commands for --help and the man page, one a line:
// the command, two spaces, what it does. prun daemon is not among them: a
// launcher starts it on the other nodes, never a user.
const commands = `Commands:
  dvm start|ps|status|stop|kill  a persistent runtime: daemons up between jobs (prun dvm --help)
  top [JOB]                      a live view of a running job's ranks (prun top --help)
  stack [JOB]                    the ranks' stacks merged into one tree (prun stack --help)
  completion SHELL               print SHELL's completion script: bash, zsh, fish or powershell`

// Command builds the cobra command; run executes a parsed job and returns
// the exit status.
func Command(run func(*jobspec.Job) int, exit *int) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prun [options] -n N PROGRAM [ARGS...] [: -n M PROGRAM2 ...]",
		Short: "run parallel (MPI) programs",
		Long:  long,
		// prun parses its own flags: MPMD contexts and mpirun's single-dash
		// spellings do not fit a flat flag set.
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
		Args:               cobra.ArbitraryArgs,
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return complete(args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := Parse(args, OSEnv)
			if err != nil {
				return err
			}
			if req.answered(cmd.OutOrStdout(), os.Stderr) {
				return nil
			}
			if req.Exec != nil {
				return execDebugger(req.Exec)
			}
			*exit = run(req.Job)
			return nil
		},
	}
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		if c != c.Root() { // completion's own
			fmt.Fprint(c.OutOrStdout(), c.UsageString())
			return
		}
		fmt.Fprint(c.OutOrStdout(), HelpText())
	})
	return cmd
}

// Main runs prun with os.Args and returns the exit status.
func Main(run func(*jobspec.Job) int) int {
	exit := 0
	cmd := Command(run, &exit)
	args := os.Args[1:]
	var err error
	if isSubcommand(cmd, args) {
		cmd.SetArgs(args)
		err = cmd.Execute()
	} else {
		// cobra looks for a subcommand past the flags (prun -n 1 completion
		// would complete): here the first word that is not an option is
		// the program, whatever its name.
		err = cmd.RunE(cmd, args)
	}
	if err != nil {
		PrintError(os.Stderr, err)
		return errorStatus(err)
	}
	return exit
}

// errorStatus is prun's exit status for a command line that failed before
// a launch: 2 for a usage error, else 1.
func errorStatus(err error) int {
	var ue *UsageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// answered prints the warnings, and help or the version when asked:
// then, it reports, nothing is left to run.
func (r *Request) answered(stdout, stderr io.Writer) bool {
	for _, w := range r.Warnings {
		fmt.Fprintf(stderr, "prun: warning: %s\n", w)
	}
	switch {
	case r.Help:
		fmt.Fprint(stdout, HelpText())
	case r.Version:
		fmt.Fprint(stdout, versionText())
	default:
		return false
	}
	return true
}

// isSubcommand reports whether args name one of prun's commands
// (cobra's completion and __complete): only as their first word.
func isSubcommand(cmd *cobra.Command, args []string) bool {
	if isSubcommandName(args) {
		return true
	}
	return len(args) > 0 && cmd.HasSubCommands() && slices.ContainsFunc(cmd.Commands(), func(c *cobra.Command) bool { return c.Name() == args[0] })
}

// PrintError prints one "prun: ..." line, red on a terminal unless NO_COLOR.
func PrintError(w io.Writer, err error) {
	f, ok := w.(*os.File)
	printError(w, err, ok && os.Getenv("NO_COLOR") == "" && isatty.IsTerminal(f.Fd()))
}

func printError(w io.Writer, err error, red bool) {
	msg := "prun: " + err.Error()
	if red {
		c := color.New(color.FgRed, color.Bold)
		c.EnableColor()
		msg = c.Sprint(msg)
	}
	fmt.Fprintln(w, msg)
}
