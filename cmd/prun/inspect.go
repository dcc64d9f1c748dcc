package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/pflag"

	"prun/dvm"
	"prun/inspect"
	"prun/launcher"
	"prun/sessiondir"
	"prun/stacktree"
	"prun/topview/sample"
)

const topUsage = `usage: prun top [JOB] [--once [--json]] [--interval D] [--dvm NAME]

A live view of every rank of a running job: rank, host, pid, state, CPU %,
RSS, output per second, time since its last output; ranks apart from the
others marked (idle while the others run, silent while they write).
Keys: P M R H O T sort (CPU, memory, rank, host, output, quiet), I inverts,
h cycles hosts, s states, a shows ranks apart only, / filters, q quits.

JOB: a standalone prun's pid (PID.K: the K-th job its ranks spawned) or its
session directory; or a job number of the DVM (--dvm, PRUN_DVM, the
default: as submissions find it). Without JOB: the one prun or DVM job of
this user running. Only the job's user (or root) sees anything.`

const stackUsage = `usage: prun stack [JOB] [--ranks LIST] [--format text|dot|svg] [-o FILE] [--lines] [--timeout D] [--dvm NAME]

Every rank's stack (gdb, else eu-stack; --timeout per rank, 10s), merged into one
tree of frames with the ranks at each branch: a rank that waits elsewhere
stands apart. --format dot|svg draws it with Graphviz (svg needs dot).
JOB as for prun top.`

// inspectMain is `prun top` and `prun stack`: parsed here, as prun dvm's
// commands are, outside the job's command line.
func inspectMain(cmd string, args []string) int {
	usage := topUsage
	if cmd == "stack" {
		usage = stackUsage
	}
	fs := pflag.NewFlagSet("prun "+cmd, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		once, asJSON, lines bool
		interval            time.Duration
		dvmName, ranks      string
		format, output      string
		perRank             time.Duration
	)
	fs.StringVar(&dvmName, "dvm", "", "the persistent runtime NAME (or directory) whose job to look at")
	if cmd == "top" {
		fs.BoolVar(&once, "once", false, "print one sample and exit")
		fs.BoolVar(&asJSON, "json", false, "with --once: as JSON")
		fs.DurationVar(&interval, "interval", time.Second, "between samples")
	} else {
		fs.StringVar(&ranks, "ranks", "", "only these ranks (0-3,7)")
		fs.StringVar(&format, "format", "text", "text, dot or svg")
		fs.StringVarP(&output, "output", "o", "", "write to FILE")
		fs.BoolVar(&lines, "lines", false, "show file:line of each frame where known")
		fs.DurationVar(&perRank, "timeout", 10*time.Second, "each rank's debugger gives up after this long")
	}
	help := fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(os.Stderr, "prun %s: %v (prun %s --help)\n", cmd, err, cmd)
		return launcher.ExitUsage
	}
	if *help {
		fmt.Println(usage)
		return 0
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(os.Stderr, "prun %s: one JOB at most, not %q (prun %s --help)\n", cmd, strings.Join(fs.Args(), " "), cmd)
		return launcher.ExitUsage
	}
	var set stacktree.RankSet
	if cmd == "top" {
		if interval <= 0 {
			fmt.Fprintf(os.Stderr, "prun top: --interval %v: not a positive duration\n", interval)
			return launcher.ExitUsage
		}
		if asJSON && !once {
			once = true // one JSON sample: there is no live JSON view
		}
	} else {
		if ranks != "" {
			var err error
			if set, err = stacktree.ParseRanks(ranks); err != nil {
				fmt.Fprintf(os.Stderr, "prun stack: --ranks %s: %v\n", ranks, err)
				return launcher.ExitUsage
			}
		}
		if perRank <= 0 || perRank > inspect.MaxRankTimeout {
			fmt.Fprintf(os.Stderr, "prun stack: --timeout %v: between 0 and %v\n", perRank, inspect.MaxRankTimeout)
			return launcher.ExitUsage
		}
		switch format {
		case "text", "dot", "svg":
		default:
			fmt.Fprintf(os.Stderr, "prun stack: --format %q: text, dot or svg\n", format)
			return launcher.ExitUsage
		}
	}
	sock, job, err := findJob(fs.Arg(0), dvmName)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun %s: %v\n", cmd, err)
		return launcher.ExitFailure
	}
	c, err := inspect.Dial(sock)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun %s: %s: %v\n", cmd, sock, err)
		return launcher.ExitFailure
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if cmd == "stack" {
		err = stack(ctx, c, job, set, format, output, lines, perRank)
	} else {
		err = top(ctx, c, sock, job, once, asJSON, interval)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun %s: %v\n", cmd, oneLine(err))
		return launcher.ExitFailure
	}
	return 0
}

func oneLine(err error) string {
	s, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	return s
}

func top(ctx context.Context, c *inspect.Client, sock, job string, once, asJSON bool, interval time.Duration) error {
	src := &sample.Warm{Source: c.Source(job)}
	if once {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if asJSON {
			return sample.Once(sctx, src, sample.DefaultThresholds, os.Stdout)
		}
		ranks, err := src.Sample(sctx)
		if err != nil {
			return err
		}
		sample.Mark(ranks, sample.DefaultThresholds)
		printRanks(os.Stdout, ranks)
		return nil
	}
	if !isatty.IsTerminal(os.Stdout.Fd()) || !isatty.IsTerminal(os.Stdin.Fd()) {
		return errors.New("not a terminal: prun top --once --json prints one sample")
	}
	// The view is prun-top's, beside prun (see cmd/prun-top): it takes
	// this process's place on the terminal.
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	viewer := filepath.Join(filepath.Dir(exe), "prun-top")
	c.Close()
	err = syscall.Exec(viewer, []string{"prun-top", sock, job, interval.String()}, os.Environ())
	return fmt.Errorf("cannot run %s: %v", viewer, err)
}

// printRanks is --once without --json: one plain table.
func printRanks(w io.Writer, ranks []sample.Rank) {
	sort.SliceStable(ranks, func(i, j int) bool { return ranks[i].Rank < ranks[j].Rank })
	fmt.Fprintf(w, "%5s %-16s %7s %-10s %6s %6s %6s %6s %s\n", "RANK", "HOST", "PID", "STATE", "CPU%", "RSS", "OUT/s", "QUIET", "APART")
	for _, r := range ranks {
		state := r.State
		if !r.Live() {
			state = "exit " + strconv.Itoa(r.ExitStatus)
			if r.Signal != 0 {
				state = "signal " + strconv.Itoa(r.Signal)
			}
		}
		fmt.Fprintf(w, "%5d %-16s %7d %-10s %6.1f %6s %6s %5.0fs %s\n", r.Rank, r.Host, r.Pid, state, r.CPU, sample.Human(float64(r.RSS)), sample.Human(r.OutRate),
			r.SinceOutput, strings.Join(r.Apart, " "))
	}
}

func stack(ctx context.Context, c *inspect.Client, job string, set stacktree.RankSet, format, output string, lines bool, perRank time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	tree, err := c.StacksWithin(sctx, job, set, perRank)
	if err != nil {
		return err
	}
	if tree.Root.Ranks.Len() == 0 && len(tree.Failed) == 0 {
		return errors.New("no rank of the job is running")
	}
	opt := stacktree.Options{Lines: lines, Collapse: format == "text"}
	var out []byte
	switch format {
	case "text":
		out = []byte(tree.Text(opt))
	case "dot":
		out = tree.DOT(opt)
	case "svg":
		if out, err = stacktree.SVG(sctx, tree.DOT(opt)); err != nil {
			return err
		}
	}
	if output == "" || output == "-" {
		_, err = os.Stdout.Write(out)
		return err
	}
	return os.WriteFile(output, out, 0o644)
}

// findJob finds the socket to ask and the job to name there. target is a
// standalone prun's pid (PID.K: its K-th spawned job) or session
// directory, or a DVM's job number; "" is the one running.
func findJob(target, dvmName string) (sock, job string, err error) {
	tmp := os.TempDir()
	// A DVM named (--dvm, PRUN_DVM) takes the job numbers, as it takes
	// the submissions; a session directory is still a standalone prun's.
	if (dvmName != "" || os.Getenv(dvm.Env) != "") && !strings.Contains(target, "/") {
		dir, err := dvmDir(dvmName)
		if err != nil {
			return "", "", err
		}
		return dvmSocket(dir, target)
	}
	if target != "" {
		if strings.Contains(target, "/") {
			sock, err := inspect.Find(tmp, target)
			return sock, "", err
		}
		head, k, _ := strings.Cut(target, ".")
		if pid, perr := strconv.Atoi(head); perr != nil || pid <= 0 {
			if st, serr := os.Stat(target); serr == nil && st.IsDir() {
				sock, err := inspect.Find(tmp, target)
				return sock, "", err
			}
			return "", "", fmt.Errorf("%s: not a job number, a prun's pid or its session directory", target)
		}
		sock, ferr := inspect.Find(tmp, head)
		if ferr == nil {
			return sock, k, nil
		}
		// Not a standalone prun's pid: a job of the DVM submissions find.
		if dir := runningDVM(); dir != "" {
			return dvmSocket(dir, target)
		}
		if os.Getenv(dvm.Env) == "" && dvm.Default(os.Getenv) == "" {
			return "", "", fmt.Errorf("%v, and no DVM runs", ferr)
		}
		return "", "", ferr
	}
	// No target: the one prun, or DVM job, of this user.
	cands := standalones(tmp)
	dir := runningDVM()
	switch {
	case len(cands) == 1 && dir == "":
		return cands[0].sock, "", nil
	case len(cands) == 0 && dir != "":
		return dvmSocket(dir, "")
	case len(cands) == 0:
		return "", "", errors.New("no prun of yours is running here (name one: a pid, a session directory, a DVM job)")
	}
	var names []string
	for _, c := range cands {
		names = append(names, strconv.Itoa(c.pid))
	}
	what := fmt.Sprintf("%d pruns run (pids %s)", len(cands), strings.Join(names, ", "))
	if dir != "" {
		what += " and a DVM (" + dir + ")"
	}
	return "", "", fmt.Errorf("%s: name one", what)
}

// dvmSocket is the inspect socket of the DVM at dir, which must run.
func dvmSocket(dir, job string) (string, string, error) {
	sock := filepath.Join(dir, inspect.SocketName)
	if _, err := os.Stat(sock); err != nil {
		return "", "", fmt.Errorf("no DVM runs at %s", dir)
	}
	return sock, job, nil
}

// runningDVM is the DVM a submission would go to, if one runs there with
// an inspect socket; else "".
func runningDVM() string {
	dir, err := dvmDir("")
	if err != nil || dir == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, inspect.SocketName)); err != nil {
		return ""
	}
	return dir
}

type standalone struct {
	pid  int
	sock string
}

// standalones are the running pruns of this user with a socket under tmp
// (another user's session directories cannot be searched).
func standalones(tmp string) []standalone {
	socks, _ := filepath.Glob(filepath.Join(tmp, sessiondir.Prefix+"*", inspect.SocketName))
	var out []standalone
	for _, s := range socks {
		name := filepath.Base(filepath.Dir(s))
		num, _, _ := strings.Cut(strings.TrimPrefix(name, sessiondir.Prefix), ".")
		pid, err := strconv.Atoi(num)
		if err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			continue // a dead launcher's leftover
		}
		out = append(out, standalone{pid, s})
	}
	return out
}
