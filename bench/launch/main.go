// Command launch benchmarks prun's launch latency and launcher peak memory
// against the MPI launchers it replaces (MPICH's mpiexec.hydra and Open MPI's
// mpirun), all in one run, and prints medians, ratios and targets.
//
//	go run ./bench/launch [-runs 21] [-warmup 2] [-prun bin/prun] [-json FILE]
//
// The /bin/true launches, which take milliseconds, run 10 x -runs times.
//
// It exits 0 whether targets are met or missed (it reports, it does not gate)
// and 1 when a command is missing or fails.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"prun/bench/internal/benchutil"
	"prun/internal/ctest"
	"prun/topology"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	runTimeout   = 2 * time.Minute // a hung launcher fails the benchmark instead of hanging it
	sampleEvery  = time.Millisecond
	memRuns      = 5 // untimed runs of each command that sample its peak RSS
	rssTargetMiB = 30
)

// command is one launcher invocation; its runs accumulate in it.
type command struct {
	Bench    string    `json:"benchmark"`
	Name     string    `json:"command"`
	Argv     []string  `json:"argv"`
	WallMs   []float64 `json:"wall_ms"`
	PeakMiB  float64   `json:"launcher_peak_rss_mib,omitempty"` // max VmHWM of the launcher process alone; none for the fork group
	Wait4MiB float64   `json:"wait4_maxrss_mib,omitempty"`      // max ru_maxrss, which includes reaped descendants
	FenceUs  float64   `json:"fence_us,omitempty"`              // PMI-1 stress: median time per barrier
	// want, if set, must occur 4 times in stdout: an exit status of 0 alone
	// would also accept 4 Open MPI singletons, which measure nothing.
	want string
	// devnull sends stdout to /dev/null (the forwarding benchmarks: the
	// point is the launcher's speed, not the disk's).
	devnull bool
	// rssMiB is the launcher memory target when not the launch default.
	rssMiB float64
	// times multiplies -runs for the group this command leads: launches of
	// /bin/true cost milliseconds, and Hydra's times there fall in two
	// modes, whose mix moves a median of 21 from one run of the benchmark
	// to the next.
	times int
}

type comparison struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target float64 `json:"target"`
	Pass   bool    `json:"pass"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	runs := flag.Int("runs", 21, "timed runs of each command")
	warmup := flag.Int("warmup", 2, "untimed runs of each command before timing")
	prunFlag := flag.String("prun", "", "prun binary (default bin/prun under the repository root)")
	jsonOut := flag.String("json", "", "also write the results to this file as JSON")
	flag.Parse()
	if *runs < 1 || *warmup < 0 {
		return errors.New("-runs must be >= 1 and -warmup >= 0")
	}

	root := ctest.Root()
	var err error
	prun := *prunFlag
	if prun == "" {
		prun = filepath.Join(root, "bin", "prun")
	}
	// The commands run in a temporary directory, so prun's path must be absolute.
	if prun, err = filepath.Abs(prun); err != nil {
		return err
	}
	if st, err := os.Stat(prun); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("prun binary %s is missing or not executable (run `make build`, or pass -prun)", prun)
	}
	for _, peer := range []string{"mpiexec.hydra", "mpirun.openmpi", "mpicc.openmpi", "mpicc.mpich", "gcc"} {
		if _, err := exec.LookPath(peer); err != nil {
			return fmt.Errorf("%s not found in PATH (Debian packages mpich, openmpi-bin, libopenmpi-dev; `make deps`)", peer)
		}
	}

	dir, err := os.MkdirTemp("", "prun-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, b := range [][]string{
		{"mpicc.openmpi", "-O2", "-o", filepath.Join(dir, "hello"), filepath.Join(root, "testdata", "hello.c")},
		{"mpicc.mpich", "-O2", "-o", filepath.Join(dir, "hello_mpich"), filepath.Join(root, "testdata", "hello.c")},
		{"gcc", "-O2", "-o", filepath.Join(dir, "pmi1kvs"), filepath.Join(root, "testdata", "pmi1kvs.c")},
		{"gcc", "-O2", "-o", filepath.Join(dir, "spew"), filepath.Join(root, "testdata", "spew.c")},
		{"gcc", "-O2", "-o", filepath.Join(dir, "harness"), filepath.Join(root, "bench", "tools", "harness.c")},
		{"sh", "-c", `gcc -O2 -o "$1" "$2" $(pkg-config --cflags --libs pmix)`, "sh",
			filepath.Join(dir, "pmixfloor"), filepath.Join(root, "testdata", "pmixfloor.c")},
		// The toolchain running this benchmark (make's $(GO) may not be on PATH).
		{filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-C", root, "-o", filepath.Join(dir, "gofloor"), "./bench/tools/gofloor"},
	} {
		if out, err := exec.Command(b[0], b[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(b, " "), err, out)
		}
	}

	facts := benchutil.Machine()
	fmt.Printf("nproc %s | cpu %s | kernel %s | %s | Open MPI %s | Hydra %s\n",
		facts["nproc"], facts["cpu"], facts["kernel"], facts["go"], facts["open_mpi"], facts["hydra"])

	// The floor: a minimal C host of a PMIx server (testdata/pmixfloor.c),
	// with the topology prun caches (one prun run fills the cache).
	if out, err := exec.Command(prun, "-n", "1", "/bin/true").CombinedOutput(); err != nil {
		return fmt.Errorf("%s -n 1 /bin/true: %v\n%s", prun, err, out)
	}
	topoXML := "-"
	if c, ok := topology.Cache(); ok && c.Valid() {
		topoXML = c.Path
	}

	ompi5, err := trixieHello(dir, root, prun)
	if err != nil {
		return err
	}

	ompi := []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", "4", "./hello"}
	groups := [][]*command{
		{
			{Bench: "true -n 4", Name: "prun", Argv: []string{prun, "-n", "4", "/bin/true"}, times: 10},
			{Bench: "true -n 4", Name: "mpiexec.hydra", Argv: []string{"mpiexec.hydra", "-n", "4", "/bin/true"}},
			{Bench: "true -n 4", Name: "C PMIx floor", Argv: []string{"./pmixfloor", topoXML, "4", "/bin/true"}},
			{Bench: "true -n 4", Name: "Go PMIx floor", Argv: []string{"./gofloor", topoXML, "4", "/bin/true"}},
		},
		{
			{Bench: "ompi hello -n 4", Name: "prun", Argv: []string{prun, "-n", "4", "./hello"}, want: " of 4 "},
			{Bench: "ompi hello -n 4", Name: "mpirun.openmpi", Argv: ompi, want: " of 4 "},
		},
		{
			{Bench: "mpich hello -n 4", Name: "prun", Argv: []string{prun, "-n", "4", "./hello_mpich"}, want: " of 4 "},
			{Bench: "mpich hello -n 4", Name: "mpiexec.hydra", Argv: []string{"mpiexec.hydra", "-n", "4", "./hello_mpich"}, want: " of 4 "},
		},
		{
			{Bench: "out 4x50MB", Name: "prun", Argv: []string{prun, "-n", "4", "./spew", "50000000"}, devnull: true, rssMiB: 64},
			{Bench: "out 4x50MB", Name: "mpiexec.hydra", Argv: []string{"mpiexec.hydra", "-n", "4", "./spew", "50000000"}, devnull: true, rssMiB: 64},
			{Bench: "out 4x50MB", Name: "mpirun.openmpi", Argv: append(ompi[:len(ompi)-1:len(ompi)-1], "./spew", "50000000"), devnull: true, rssMiB: 64},
		},
		{
			{Bench: "out tagged", Name: "prun", Argv: []string{prun, "--tag-output", "-n", "4", "./spew", "50000000"}, devnull: true, rssMiB: 64},
			{Bench: "out tagged", Name: "mpirun.openmpi", Argv: append(append(ompi[:len(ompi)-1:len(ompi)-1], "--tag-output"), "./spew", "50000000"), devnull: true, rssMiB: 64},
		},
		{
			{Bench: "pmi1 kvs -n 4", Name: "prun", Argv: []string{prun, "-n", "4", "./pmi1kvs", "100", "10"}, want: "pmi1kvs: rank "},
			{Bench: "pmi1 kvs -n 4", Name: "mpiexec.hydra", Argv: []string{"mpiexec.hydra", "-n", "4", "./pmi1kvs", "100", "10"}, want: "pmi1kvs: rank "},
		},
		ompi5,
	}
	for _, g := range groups {
		// Round-robin so that drifting machine noise hits every side alike,
		// each round starting one command further on: a run right after
		// another is slower or faster for what the one before left behind,
		// so every command takes every place as often.
		n := *runs
		if g[0].times > 0 {
			n *= g[0].times
		}
		for i := 0; i < *warmup+n; i++ {
			for j := range g {
				c := g[(i+j)%len(g)]
				if err := c.runOnce(dir, i >= *warmup, false); err != nil {
					return err
				}
			}
		}
		// The launcher's peak RSS comes from runs of their own: sampling
		// /proc every millisecond takes CPU from the launch being timed.
		for i := 0; i < memRuns; i++ {
			for _, c := range g {
				if err := c.runOnce(dir, false, true); err != nil {
					return err
				}
			}
		}
	}

	// The /bin/true group again, each launcher started by fork as a shell
	// starts it, not by the vfork of Go's os/exec: where the kernel keeps a
	// new process on its parent's CPU (this project's 2-CPU VMs), which of
	// the two starts a launcher moves its median, Hydra's most
	// (docs/benchmarks.md, "The open miss").
	forked, err := forkRuns(dir, groups[0], *runs*groups[0][0].times)
	if err != nil {
		return err
	}

	fmt.Printf("\n%-16s | %-15s | %9s | %9s | %9s | %14s | %s\n",
		"benchmark", "command", "median", "p10", "p90", "peak RSS (MiB)", "wait4 maxrss (MiB)")
	var all []*command
	row := func(c *command, peak, wait4 string) {
		all = append(all, c)
		fmt.Printf("%-16s | %-15s | %9s | %9s | %9s | %14s | %s\n", c.Bench, c.Name,
			benchutil.Ms(benchutil.Pct(c.WallMs, 0.5)), benchutil.Ms(benchutil.Pct(c.WallMs, 0.1)), benchutil.Ms(benchutil.Pct(c.WallMs, 0.9)), peak, wait4)
	}
	for _, g := range groups {
		for _, c := range g {
			row(c, fmt.Sprintf("%.1f", c.PeakMiB), fmt.Sprintf("%.1f", c.Wait4MiB))
		}
	}
	for _, c := range forked {
		row(c, "-", "-") // the harness samples no memory
	}
	ratio := func(name string, a, b *command, target float64) comparison {
		r := benchutil.Pct(a.WallMs, 0.5) / benchutil.Pct(b.WallMs, 0.5)
		return comparison{name, r, target, r <= target}
	}
	cmps := []comparison{
		ratio("ratio prun/hydra (true -n 4)", groups[0][0], groups[0][1], 1.0),
		// Not prun's: whether any launcher that hosts a PMIx server could meet
		// the target above, in C or in Go as prun is (bench/tools/gofloor;
		// see docs/benchmarks.md).
		ratio("ratio C PMIx floor/hydra (true -n 4)", groups[0][2], groups[0][1], 1.0),
		ratio("ratio Go PMIx floor/hydra (true -n 4)", groups[0][3], groups[0][1], 1.0),
		ratio("ratio prun/hydra (true -n 4, fork)", forked[0], forked[1], 1.0),
		ratio("ratio C PMIx floor/hydra (true -n 4, fork)", forked[2], forked[1], 1.0),
		ratio("ratio Go PMIx floor/hydra (true -n 4, fork)", forked[3], forked[1], 1.0),
		ratio("ratio prun/mpirun.openmpi (ompi hello -n 4)", groups[1][0], groups[1][1], 0.8),
		ratio("ratio prun/hydra (mpich hello -n 4)", groups[2][0], groups[2][1], 1.0),
		ratio("ratio prun/hydra (pmi1 kvs -n 4, whole run)", groups[5][0], groups[5][1], 1.0),
		ratio("ratio prun/hydra (out 4x50MB)", groups[3][0], groups[3][1], 1.0),
		ratio("ratio prun/mpirun.openmpi (out 4x50MB)", groups[3][0], groups[3][2], 1.0),
		ratio("ratio prun tagged/untagged (out 4x50MB)", groups[4][0], groups[3][0], 1.25),
		ratio("ratio prun/Open MPI 5 mpirun (ompi5 hello -n 4, Debian 13)", groups[6][0], groups[6][1], 0.5),
	}
	for _, g := range groups {
		p := g[0]
		target := float64(rssTargetMiB)
		if p.rssMiB > 0 {
			target = p.rssMiB
		}
		cmps = append(cmps, comparison{"prun peak RSS MiB (" + p.Bench + ")", p.PeakMiB, target, p.PeakMiB <= target})
	}
	// The PMI-1 stress client reports its own mean time per barrier: 100
	// keys put by each of 4 ranks, a barrier, then every rank gets all 400.
	for _, g := range groups[5] {
		us, err := fenceMicros(dir, g.Argv, 5)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s mean time per fence (100 keys/rank x 4 ranks): %.0f us\n", g.Bench, g.Name, us)
		g.FenceUs = us
	}
	fmt.Println()
	for _, c := range cmps {
		verdict := "MISS"
		if c.Pass {
			verdict = "PASS"
		}
		fmt.Printf("%s = %.2f (target <= %.2f) %s\n", c.Name, c.Value, c.Target, verdict)
	}

	if *jsonOut != "" {
		b, err := json.MarshalIndent(map[string]any{
			"machine": facts, "runs": *runs, "warmup": *warmup, "results": all, "comparisons": cmps,
		}, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// trixieHello is the Open MPI 5 group: Debian 13's Open MPI 5.0.7 hello at
// -n 4 from the root testdata/debroot.sh builds (make bench builds it once),
// under this prun (its ranks enter the root) and under the root's own
// mpirun. Both start in a private mount namespace of their own where the
// machine's /proc, /sys, /dev, /dev/shm and /tmp are bound into the root
// (internal/debroot's arrangement), and use loopback for Open MPI's TCP
// transport, as Open MPI 5 needs here under either launcher.
func trixieHello(dir, repo, prun string) ([]*command, error) {
	root := os.Getenv("PRUN_DEBIAN_TRIXIE")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, err
		}
		root = filepath.Join(cache, "prun", "debian-trixie")
	}
	if out, err := exec.Command("bash", filepath.Join(repo, "testdata", "debroot.sh"), "trixie", root).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("testdata/debroot.sh trixie %s: %v\n%s", root, err, out)
	}
	// The programs live where the root sees them at the same path: under
	// /tmp, which is bound into it.
	if !strings.HasPrefix(dir, "/tmp/") {
		return nil, fmt.Errorf("the benchmark's directory %s is not under /tmp, which the Debian root shares", dir)
	}
	enter := filepath.Join(dir, "enter5")
	script := "#!/bin/sh\nset -e\nfor m in proc sys dev dev/shm tmp; do mount --bind \"/$m\" " + root + "/$m; done\n" +
		"export OMPI_MCA_btl_tcp_if_include=lo\nexec \"$@\"\n"
	inroot := filepath.Join(dir, "inroot5")
	wrap := "#!/bin/sh\nexec /usr/sbin/chroot " + root + " /usr/bin/env --chdir=\"$PWD\" \"$@\"\n"
	for f, body := range map[string]string{enter: script, inroot: wrap} {
		if err := os.WriteFile(f, []byte(body), 0o755); err != nil {
			return nil, err
		}
	}
	hello5 := filepath.Join(dir, "hello5")
	src := filepath.Join(dir, "hello5.c")
	if b, err := os.ReadFile(filepath.Join(repo, "testdata", "hello.c")); err != nil {
		return nil, err
	} else if err := os.WriteFile(src, b, 0o644); err != nil {
		return nil, err
	}
	ns := []string{"unshare", "-m", "--propagation", "private", enter}
	cc := exec.Command(ns[0], append(ns[1:], inroot, "mpicc", "-O2", "-o", hello5, src)...)
	cc.Dir = dir
	if out, err := cc.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mpicc in the Debian 13 root: %v\n%s", err, out)
	}
	return []*command{
		{Bench: "ompi5 hello -n 4", Name: "prun", Argv: append(ns[:len(ns):len(ns)], prun, "-n", "4", inroot, hello5), want: " of 4 "},
		{Bench: "ompi5 hello -n 4", Name: "mpirun (OMPI 5)", Argv: append(ns[:len(ns):len(ns)], inroot, "mpirun",
			"--allow-run-as-root", "--oversubscribe", "-n", "4", hello5), want: " of 4 "},
	}, nil
}

// fenceMicros runs the PMI-1 stress client n times and returns the median of
// the per-fence times it reports.
func fenceMicros(dir string, argv []string, n int) (float64, error) {
	var xs []float64
	for i := 0; i < n; i++ {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
		i := strings.Index(string(out), "ranks: ")
		if i < 0 {
			return 0, fmt.Errorf("%s: no fence time in output\n%s", strings.Join(argv, " "), out)
		}
		var us float64
		fmt.Sscanf(string(out[i+len("ranks: "):]), "%f", &us)
		xs = append(xs, us)
	}
	return benchutil.Pct(xs, 0.5), nil
}

// forkRuns times the commands of group n times each with the harness built
// in dir (bench/tools/harness.c), which starts them by fork, rotated as
// above, and returns them as new commands of the benchmark "BENCH fork".
// Their output goes to /dev/null; the harness fails on a nonzero exit.
func forkRuns(dir string, group []*command, n int) ([]*command, error) {
	args := []string{"-r", strconv.Itoa(n)}
	for i, c := range group {
		if i > 0 {
			args = append(args, "--")
		}
		args = append(args, c.Argv...)
	}
	cmd := exec.Command(filepath.Join(dir, "harness"), args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("harness: %v\n%s", err, benchutil.Tail(stderr.Bytes(), 4096))
	}
	forked := make([]*command, len(group))
	for i, c := range group {
		forked[i] = &command{Bench: c.Bench + " fork", Name: c.Name, Argv: c.Argv}
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "raw" {
			continue
		}
		i, err := strconv.Atoi(f[1])
		if err != nil || i < 0 || i >= len(forked) {
			return nil, fmt.Errorf("harness: bad line %q", line)
		}
		for _, v := range f[2:] {
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("harness: bad time %q", v)
			}
			forked[i].WallMs = append(forked[i].WallMs, ms)
		}
	}
	for _, c := range forked {
		if len(c.WallMs) != n {
			return nil, fmt.Errorf("harness: %d times for %s, want %d", len(c.WallMs), c.Name, n)
		}
	}
	return forked, nil
}

// runOnce runs c once in dir. If record is set it records the run's wall
// time and wait4's maxrss; if sample is set, the launcher's peak RSS, which
// it samples while the command runs. A nonzero exit is an error carrying
// the command's output.
func (c *command) runOnce(dir string, record, sample bool) error {
	stdoutName := filepath.Join(dir, "stdout")
	if c.devnull {
		stdoutName = os.DevNull
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	run, err := benchutil.NewRun(ctx, dir, stdoutName, c.Argv)
	if err != nil {
		return err
	}
	defer run.Close()
	cmd, stdout, stderr := run.Cmd, run.Stdout, run.Stderr

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %v", strings.Join(c.Argv, " "), err)
	}
	done := make(chan struct{})
	peak := make(chan int64, 1)
	if sample {
		go func() { peak <- sampleHWM(cmd.Process.Pid, done) }()
	} else {
		peak <- 0
	}
	err = cmd.Wait()
	wall := time.Since(start)
	close(done)
	hwmKiB := <-peak

	if err != nil {
		out, _ := os.ReadFile(stderr.Name())
		if len(bytes.TrimSpace(out)) == 0 {
			out, _ = os.ReadFile(stdout.Name())
		}
		return fmt.Errorf("%s: %v\n%s", strings.Join(c.Argv, " "), err, benchutil.Tail(out, 4096))
	}
	if c.want != "" {
		if out, _ := os.ReadFile(stdout.Name()); bytes.Count(out, []byte(c.want)) != 4 {
			return fmt.Errorf("%s: stdout lacks 4 lines with %q (ranks not one job?):\n%s",
				strings.Join(c.Argv, " "), c.want, benchutil.Tail(out, 4096))
		}
	}
	if record {
		c.WallMs = append(c.WallMs, float64(wall)/float64(time.Millisecond))
		// On Linux, wait4's ru_maxrss is max(the child, every descendant it reaped),
		// so with ranks bigger than the launcher it reports a rank. It is kept for
		// reference; the launcher's own peak comes from its VmHWM.
		ru := float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024
		c.Wait4MiB = max(c.Wait4MiB, ru)
	}
	if sample {
		c.PeakMiB = max(c.PeakMiB, float64(hwmKiB)/1024)
	}
	return nil
}

// sampleHWM polls VmHWM (the high-water mark of the process's own resident
// set, in KiB) of pid until done is closed and returns the last value seen.
// The mark only grows, so this misses only growth in the last sampling
// interval before exit. The file stays open: once opened it refers to this
// process, so a reused pid cannot be read by mistake.
func sampleHWM(pid int, done <-chan struct{}) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	var hwm int64
	buf := make([]byte, 8192)
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		if n, _ := f.ReadAt(buf, 0); n > 0 {
			if _, rest, ok := bytes.Cut(buf[:n], []byte("\nVmHWM:")); ok {
				line, _, _ := bytes.Cut(rest, []byte("kB"))
				if v, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 10, 64); err == nil {
					hwm = max(hwm, v)
				}
			}
		}
		select {
		case <-done:
			return hwm
		case <-tick.C:
		}
	}
}
