// Command dvm benchmarks warm submission to a persistent runtime (prun dvm)
// against standalone prun: `-n 4 /bin/true` on this node, and `-n 8
// hostname` on the 4 hosts of the test cluster (internal/cluster), each
// over -runs consecutive submissions (standalone: -standalone runs), with
// median and p99. Every run's output is checked; a run that exits non-zero
// or takes longer than 30 s fails the benchmark (exit 1). Targets (reported,
// not gated): this node ≤ 5 ms median, 4 hosts ≤ 15 ms, p99 ≤ 3× median.
//
//	go run ./bench/dvm [-runs 1000] [-standalone 100] [-prun bin/prun] [-cluster=true]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"prun/bench/internal/benchutil"
	"prun/internal/cluster"
	"prun/internal/ctest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/dvm:", err)
		os.Exit(1)
	}
}

func run() error {
	runs := flag.Int("runs", 1000, "consecutive submissions to the DVM")
	standalone := flag.Int("standalone", 100, "standalone runs, for comparison")
	prunFlag := flag.String("prun", "", "prun binary (default bin/prun under the repository root)")
	withCluster := flag.Bool("cluster", true, "also on the 4 hosts of the test cluster (needs root)")
	flag.Parse()
	prun := *prunFlag
	if prun == "" {
		prun = filepath.Join(ctest.Root(), "bin", "prun")
	}
	prun, _ = filepath.Abs(prun)
	if _, err := os.Stat(prun); err != nil {
		return fmt.Errorf("%s: %v (make build, or -prun)", prun, err)
	}
	tmp, err := os.MkdirTemp("", "prun-bench-dvm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// The DVMs' directory is the benchmark's own (not the user's runtime
	// directory, where another DVM called bench may run).
	if err := os.Mkdir(filepath.Join(tmp, "run"), 0o700); err != nil {
		return err
	}
	env := append(os.Environ(), "TMPDIR="+tmp, "NO_COLOR=1", "XDG_RUNTIME_DIR="+filepath.Join(tmp, "run"),
		"XDG_STATE_HOME="+filepath.Join(tmp, "state"))
	fmt.Printf("%-34s %8s %10s %10s %8s\n", "", "runs", "median", "p99", "p99/med")

	one := []string{"-n", "4", "/bin/true"}
	if err := bench("1 node: -n 4 /bin/true", prun, env, nil, one, *runs, *standalone, nil, 5); err != nil {
		return err
	}
	if !*withCluster {
		return nil
	}
	c, err := cluster.Up(4, filepath.Join(tmp, "cluster"), func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }, "bench/dvm")
	if err != nil {
		return fmt.Errorf("cluster: %v", err)
	}
	defer c.Stop()
	cenv := append(env, "HOME="+c.Home())
	check := func(out []byte) error {
		if n := len(strings.Fields(string(out))); n != 8 {
			return fmt.Errorf("%d host names, want 8: %q", n, out)
		}
		return nil
	}
	return bench("4 hosts: -n 8 hostname", prun, cenv, []string{"--hostfile", c.Hostfile()},
		[]string{"--hostfile", c.Hostfile(), "-n", "8", "hostname"}, *runs, *standalone, check, 15)
}

// bench starts a DVM over startArgs, times runs submissions of job, then
// standalone runs of it, and prints both.
func bench(name, prun string, env, startArgs, job []string, runs, standalone int, check func([]byte) error, targetMs float64) error {
	start := exec.Command(prun, append([]string{"dvm", "start", "--name", "bench"}, startArgs...)...)
	start.Env = env
	var stderr bytes.Buffer
	start.Stderr = &stderr
	out, err := start.Output()
	if err != nil {
		return fmt.Errorf("prun dvm start: %v\n%s%s", err, out, stderr.String())
	}
	// Its stdout is for the shell: PRUN_DVM=DIR; export PRUN_DVM;
	_, dir, _ := strings.Cut(string(out), "PRUN_DVM=")
	dir, _, _ = strings.Cut(dir, ";")
	stop := func() {
		cmd := exec.Command(prun, "dvm", "stop", "--all-jobs", "--dvm", dir)
		cmd.Env = env
		cmd.Run()
	}
	defer stop()
	denv := append(env, "PRUN_DVM="+dir)
	warm, err := times(prun, denv, job, runs, check)
	if err != nil {
		return fmt.Errorf("%s in the DVM: %v", name, err)
	}
	stop()
	cold, err := times(prun, env, job, standalone, check)
	if err != nil {
		return fmt.Errorf("%s standalone: %v", name, err)
	}
	report := func(label string, xs []float64, target float64) {
		med, p99 := benchutil.Pct(xs, 0.5), benchutil.Pct(xs, 0.99)
		line := fmt.Sprintf("%-34s %8d %10s %10s %8.2f", label, len(xs), benchutil.Ms(med), benchutil.Ms(p99), p99/med)
		if target > 0 {
			ok := "met"
			if med > target || p99 > 3*med {
				ok = "MISSED"
			}
			line += fmt.Sprintf("   target ≤ %.0f ms median, p99 ≤ 3× median: %s", target, ok)
		}
		fmt.Println(line)
	}
	report(name+", DVM", warm, targetMs)
	report(name+", standalone", cold, 0)
	return nil
}

// times runs prun args n times in a row and returns each run's wall time in
// milliseconds, sorted.
func times(prun string, env, args []string, n int, check func([]byte) error) ([]float64, error) {
	var xs []float64
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, prun, args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		t0 := time.Now()
		err := cmd.Run()
		d := time.Since(t0)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("run %d: %v\n%s", i, err, benchutil.Tail(stderr.Bytes(), 2000))
		}
		if check != nil {
			if err := check(stdout.Bytes()); err != nil {
				return nil, fmt.Errorf("run %d: %v", i, err)
			}
		}
		xs = append(xs, float64(d)/float64(time.Millisecond))
	}
	sort.Float64s(xs)
	return xs, nil
}
