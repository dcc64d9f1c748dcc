// Command cluster benchmarks prun's multi-node launch against the MPI
// launchers it replaces (Open MPI's mpirun and MPICH's mpiexec.hydra) on the
// test cluster of internal/cluster: hosts prun-h1..prun-hN, each a network
// namespace with its own sshd, all reached over SSH with the same key.
//
//	go run ./bench/cluster [-runs 11] [-warmup 2] [-sizes 4,16,32] [-prun bin/prun] [-peers=false] [-only REGEXP] [-json FILE]
//
// It needs root (the cluster is network namespaces) and bin/prun (`make
// build`); it compiles testdata/hello.c with mpicc.openmpi and mpicc.mpich.
// One cluster of max(-sizes) hosts serves every benchmark:
//
//   - on 4 hosts, -n 8 (2 per host): hostname with prun, mpirun and hydra;
//     the Open MPI hello with prun and mpirun; the MPICH hello with prun and
//     hydra; then the ratios of medians against their targets;
//   - output forwarding across nodes: testdata/spew.c writing 50 MB on each
//     of 2 hosts (--map-by node, -n 2), standard output to /dev/null, with
//     prun, hydra and mpirun;
//   - start-up growth: for each size N, -n N hostname on the first N hosts
//     (one per host) with prun (default fanout 32, --launch-fanout 2 and 4),
//     hydra and mpirun.
//
// -prun takes several binaries, comma-separated (each NAME=PATH or PATH,
// with prun-ssh beside it): every prun command then runs once per binary,
// all of a benchmark's commands taking turns, so that two builds are
// compared in one run, under the same noise. -peers=false leaves mpirun and
// hydra out (and the ratios); -only runs the benchmarks whose name matches.
//
// Every run's standard output is checked (each host, or each rank, the right
// number of times), so that a launcher that silently ran everything locally
// or lost a rank counts as failed; the output benchmark's goes to /dev/null
// and is not checked (its ranks run on the job's 2 hosts by the map, and the
// exit status says whether they wrote their 50 MB). A failed launcher is
// reported with its reason and dropped from the rest of that benchmark; the
// others go on, and the exit status is then 1. Missed targets do not change
// the exit status.
//
// The peers' flags, found by trying on this setup (198.18.0.0/24 is the
// cluster's network; the root namespace also has other interfaces):
//
//   - both peers reach the hosts through a wrapper script, `exec ssh -F
//     <cluster ssh_config> "$@"` (OpenSSH ignores $HOME, which is how prun
//     finds the same configuration and key);
//   - mpirun.openmpi: --mca plm_rsh_agent <wrapper>; --mca
//     if_base_do_not_resolve 1, because mpirun resolves every --host name to
//     see whether it is the local node and the names are not in this
//     machine's /etc/hosts, so each run asks DNS, whose server here drops a
//     query now and then (a resolver retry of seconds); prun and hydra do
//     not resolve the names. --mca
//     oob_tcp_if_include and btl_tcp_if_include 198.18.0.0/24 point the
//     daemons and ranks at the cluster's network (what prun sets for its
//     ranks); they are not strictly needed here, since the hosts have no
//     other route. --mca pml ob1 spares each rank the UCX PML probe (most
//     of a hello's start; prun's ranks get pml ^cm, same effect). Tree spawn
//     (the default) is kept: plm_rsh_no_tree_spawn 1 measured the same.
//   - mpiexec.hydra: -launcher ssh -launcher-exec <wrapper>, -localhost
//     198.18.0.254 (otherwise its proxies cannot connect back and it hangs);
//     -genv UCX_NET_DEVICES eth0 for the MPICH (ch4:ucx) hello, as prun sets
//     for its ranks (it works without as well).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"prun/bench/internal/benchutil"
	"prun/internal/ctest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"prun/internal/cluster"
)

const (
	runTimeout = time.Minute // a hung launcher fails its benchmark instead of hanging it
	pairHosts  = 4           // hosts of the -n 8 benchmarks
	perHost    = 2           // ranks per host in them
)

// command is one launcher invocation; its runs accumulate in it.
type command struct {
	Bench    string    `json:"benchmark"`
	Name     string    `json:"command"`
	Argv     []string  `json:"argv"`
	Env      []string  `json:"env,omitempty"` // added to the environment
	WallMs   []float64 `json:"wall_ms"`
	MedianMs float64   `json:"median_ms,omitempty"`
	Error    string    `json:"error,omitempty"` // why it failed; no more runs after that
	// check validates a run's standard output; nil: stdout goes to /dev/null.
	check  func(stdout []byte) error
	isPrun bool // a build of -prun's, not a peer
}

func (c *command) failed() bool { return c.Error != "" }

// measured: it ran (not left out by -only) and did not fail.
func (c *command) measured() bool { return !c.failed() && len(c.WallMs) > 0 }

type comparison struct {
	Name   string  `json:"name"`
	Peer   string  `json:"peer,omitempty"` // the peer measured against (the faster one for min(...))
	Value  float64 `json:"value,omitempty"`
	Target float64 `json:"target"`
	Pass   bool    `json:"pass"`
	Error  string  `json:"error,omitempty"`
}

func main() {
	failed, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if failed {
		fmt.Fprintln(os.Stderr, "bench: some launchers failed (see above)")
		os.Exit(1)
	}
}

// run runs every benchmark; failed reports that some launcher failed (the
// others were measured), err that the benchmark itself could not go on.
func run() (failed bool, err error) {
	runs := flag.Int("runs", 11, "timed runs of each command")
	warmup := flag.Int("warmup", 2, "untimed runs of each command before timing")
	sizesFlag := flag.String("sizes", "4,16,32", "host counts of the start-up growth table")
	prunFlag := flag.String("prun", "", "prun binary (default bin/prun under the repository root); several, comma-separated, NAME=PATH or PATH, take turns")
	peersFlag := flag.Bool("peers", true, "also run mpirun.openmpi and mpiexec.hydra")
	onlyFlag := flag.String("only", "", "run only the benchmarks whose name matches this regular expression (\"hostname -n 8\", \"out 2x50MB\", \"growth 16 hosts\"...)")
	jsonOut := flag.String("json", "", "also write the results to this file as JSON")
	flag.Parse()
	if *runs < 1 || *warmup < 0 {
		return false, errors.New("-runs must be >= 1 and -warmup >= 0")
	}
	sizes, err := parseSizes(*sizesFlag)
	if err != nil {
		return false, err
	}
	only, err := regexp.Compile(*onlyFlag)
	if err != nil {
		return false, fmt.Errorf("-only: %v", err)
	}
	// runIf runs a group unless -only leaves it out.
	runIf := func(ctx context.Context, dir string, g []*command, warmup, runs int) error {
		if !only.MatchString(g[0].Bench) {
			return nil
		}
		return runGroup(ctx, dir, g, warmup, runs)
	}
	if os.Geteuid() != 0 {
		return false, errors.New("must run as root (the test cluster is network namespaces with their own sshd)")
	}

	root := ctest.Root()
	type build struct{ name, path string }
	var pruns []build
	if *prunFlag == "" {
		pruns = []build{{"prun", filepath.Join(root, "bin", "prun")}}
	} else {
		for i, f := range strings.Split(*prunFlag, ",") {
			name, path, ok := strings.Cut(f, "=")
			if !ok {
				name, path = fmt.Sprintf("prun#%d", i+1), f
			}
			pruns = append(pruns, build{name, path})
		}
		if len(pruns) == 1 {
			pruns[0].name = "prun"
		}
	}
	for i := range pruns {
		if pruns[i].path, err = filepath.Abs(pruns[i].path); err != nil {
			return false, err
		}
		if st, err := os.Stat(pruns[i].path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false, fmt.Errorf("prun binary %s is missing or not executable (run `make build`, or pass -prun)", pruns[i].path)
		}
		if len(pruns) > 1 {
			fmt.Printf("%s: %s\n", pruns[i].name, pruns[i].path)
		}
	}
	prun := pruns[0].path
	// withPruns makes a prun command per build from c (whose Argv starts
	// with prun), named after the build.
	withPruns := func(c *command) []*command {
		var cs []*command
		for _, b := range pruns {
			x := *c
			x.Argv = append([]string{b.path}, c.Argv[1:]...)
			x.isPrun = true
			if len(pruns) > 1 {
				x.Name = strings.Replace(c.Name, "prun", b.name, 1)
			}
			cs = append(cs, &x)
		}
		return cs
	}
	// group is a benchmark's commands: each prun command once per build,
	// the peers unless -peers=false.
	group := func(cs ...*command) []*command {
		var g []*command
		for _, c := range cs {
			switch {
			case strings.HasPrefix(c.Name, "prun"):
				g = append(g, withPruns(c)...)
			case *peersFlag:
				g = append(g, c)
			}
		}
		return g
	}
	for _, peer := range []string{"mpiexec.hydra", "mpirun.openmpi", "mpicc.openmpi", "mpicc.mpich", "ssh"} {
		if _, err := exec.LookPath(peer); err != nil {
			return false, fmt.Errorf("%s not found in PATH (Debian packages mpich, openmpi-bin, libopenmpi-dev, openssh-client; `make deps`)", peer)
		}
	}

	// Interrupted: kill the running command and tear the cluster down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The filesystem is shared with the hosts: the programs and the ssh
	// wrapper written here exist on every host at the same path.
	dir, err := os.MkdirTemp("", "prun-bench-cluster-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	hello := filepath.Join(dir, "hello")
	helloMPICH := filepath.Join(dir, "hello_mpich")
	for _, b := range [][]string{
		{"mpicc.openmpi", "-O2", "-o", hello, filepath.Join(root, "testdata", "hello.c")},
		{"mpicc.mpich", "-O2", "-o", helloMPICH, filepath.Join(root, "testdata", "hello.c")},
	} {
		if out, err := exec.Command(b[0], b[1:]...).CombinedOutput(); err != nil {
			return false, fmt.Errorf("%s: %v\n%s", strings.Join(b, " "), err, out)
		}
	}

	facts := benchutil.Machine()
	fmt.Printf("nproc %s | cpu %s | kernel %s | %s | Open MPI %s | Hydra %s\n",
		facts["nproc"], facts["cpu"], facts["kernel"], facts["go"], facts["open_mpi"], facts["hydra"])

	nHosts := max(pairHosts, slices.Max(sizes))
	start := time.Now()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	fmt.Fprintf(os.Stderr, "cluster: building %d hosts\n", nHosts)
	c, err := cluster.Up(nHosts, filepath.Join(dir, "cluster"), logf, "bench/cluster")
	if err != nil {
		return false, err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: cluster teardown:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "cluster: %d hosts up after %v (including any wait for the lock)\n", nHosts, time.Since(start).Round(time.Millisecond))
	hosts := c.Hosts()

	wrapper := filepath.Join(dir, "ssh")
	spew := filepath.Join(dir, "spew")
	if out, err := exec.Command("gcc", "-O2", "-o", spew, filepath.Join(root, "testdata", "spew.c")).CombinedOutput(); err != nil {
		return false, fmt.Errorf("gcc spew.c: %v\n%s", err, out)
	}
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec ssh -F '"+c.SSHConfig()+"' \"$@\"\n"), 0o755); err != nil {
		return false, err
	}
	prunEnv := []string{"HOME=" + c.Home()} // prun reads $HOME/.ssh/{config,known_hosts,id_ed25519}
	ompi := []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe",
		"--mca", "plm_rsh_agent", wrapper,
		"--mca", "if_base_do_not_resolve", "1",
		"--mca", "oob_tcp_if_include", cluster.Network,
		"--mca", "btl_tcp_if_include", cluster.Network,
		"--mca", "pml", "ob1"}
	hydra := []string{"mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", wrapper, "-localhost", cluster.LauncherAddr}
	// hostList is "prun-h1:k,...,prun-hN:k" (mpirun --host, hydra -hosts);
	// hostfile writes "prun-hK slots=k" lines for prun.
	hostList := func(n, k int) string {
		var s []string
		for _, h := range hosts[:n] {
			s = append(s, h+":"+strconv.Itoa(k))
		}
		return strings.Join(s, ",")
	}
	hostfile := func(n, k int) (string, error) {
		var b strings.Builder
		for _, h := range hosts[:n] {
			fmt.Fprintf(&b, "%s slots=%d\n", h, k)
		}
		name := filepath.Join(dir, fmt.Sprintf("hostfile.%dx%d", n, k))
		return name, os.WriteFile(name, []byte(b.String()), 0o644)
	}
	cat := func(xs ...[]string) []string { return slices.Concat(xs...) }

	// On 4 hosts, 2 ranks each.
	np := pairHosts * perHost
	hf, err := hostfile(pairHosts, perHost)
	if err != nil {
		return false, err
	}
	hl := hostList(pairHosts, perHost)
	n := strconv.Itoa(np)
	hostnames := checkHostnames(hosts[:pairHosts], perHost)
	hellos := checkHellos(hosts[:pairHosts], perHost)
	bh, bo, bm := fmt.Sprintf("hostname -n %d", np), fmt.Sprintf("ompi hello -n %d", np), fmt.Sprintf("mpich hello -n %d", np)
	groups := [][]*command{
		group(
			&command{Bench: bh, Name: "prun", Argv: []string{prun, "--hostfile", hf, "-n", n, "hostname"}, Env: prunEnv, check: hostnames},
			&command{Bench: bh, Name: "mpirun.openmpi", Argv: cat(ompi, []string{"--host", hl, "-n", n, "hostname"}), check: hostnames},
			&command{Bench: bh, Name: "mpiexec.hydra", Argv: cat(hydra, []string{"-hosts", hl, "-n", n, "hostname"}), check: hostnames},
		),
		group(
			&command{Bench: bo, Name: "prun", Argv: []string{prun, "--hostfile", hf, "-n", n, hello}, Env: prunEnv, check: hellos},
			&command{Bench: bo, Name: "mpirun.openmpi", Argv: cat(ompi, []string{"--host", hl, "-n", n, hello}), check: hellos},
		),
		group(
			&command{Bench: bm, Name: "prun", Argv: []string{prun, "--hostfile", hf, "-n", n, helloMPICH}, Env: prunEnv, check: hellos},
			&command{Bench: bm, Name: "mpiexec.hydra", Argv: cat(hydra, []string{"-hosts", hl, "-genv", "UCX_NET_DEVICES", "eth0", "-n", n, helloMPICH}), check: hellos},
		),
	}
	for _, g := range groups {
		fmt.Fprintf(os.Stderr, "== %s on %d hosts\n", g[0].Bench, pairHosts)
		if err := runIf(ctx, dir, g, *warmup, *runs); err != nil {
			return false, err
		}
	}

	// Output forwarding: 50 MB from each of 2 hosts, one rank each.
	outHosts := 2
	hfOut, err := hostfile(outHosts, 1)
	if err != nil {
		return false, err
	}
	hlOut := hostList(outHosts, 1)
	bout := fmt.Sprintf("out %dx50MB", outHosts)
	outGroup := group(
		&command{Bench: bout, Name: "prun", Argv: []string{prun, "--hostfile", hfOut, "--map-by", "node", "-n", "2", spew, "50000000"}, Env: prunEnv},
		&command{Bench: bout, Name: "mpirun.openmpi", Argv: cat(ompi, []string{"--host", hlOut, "--map-by", "node", "-n", "2", spew, "50000000"})},
		&command{Bench: bout, Name: "mpiexec.hydra", Argv: cat(hydra, []string{"-hosts", hlOut, "-n", "2", spew, "50000000"})},
	)
	fmt.Fprintf(os.Stderr, "== %s on %d hosts\n", bout, outHosts)
	if err := runIf(ctx, dir, outGroup, *warmup, *runs); err != nil {
		return false, err
	}
	groups = append(groups, outGroup)

	// Start-up growth: one per host on the first N hosts.
	var growthNames []string
	var growth [][]*command // per size, in growthNames' order
	for _, size := range sizes {
		hf, err := hostfile(size, 1)
		if err != nil {
			return false, err
		}
		hl := hostList(size, 1)
		n := strconv.Itoa(size)
		b := fmt.Sprintf("growth %d hosts", size)
		check := checkHostnames(hosts[:size], 1)
		g := group(
			&command{Bench: b, Name: "prun (default, fanout 32)", Argv: []string{prun, "--hostfile", hf, "-n", n, "hostname"}, Env: prunEnv, check: check},
			&command{Bench: b, Name: "prun --launch-fanout 2", Argv: []string{prun, "--hostfile", hf, "--launch-fanout", "2", "-n", n, "hostname"}, Env: prunEnv, check: check},
			&command{Bench: b, Name: "prun --launch-fanout 4", Argv: []string{prun, "--hostfile", hf, "--launch-fanout", "4", "-n", n, "hostname"}, Env: prunEnv, check: check},
			&command{Bench: b, Name: "mpiexec.hydra", Argv: cat(hydra, []string{"-hosts", hl, "-n", n, "hostname"}), check: check},
			&command{Bench: b, Name: "mpirun.openmpi", Argv: cat(ompi, []string{"--host", hl, "-n", n, "hostname"}), check: check},
		)
		if growthNames == nil {
			for _, c := range g {
				growthNames = append(growthNames, c.Name)
			}
		}
		fmt.Fprintf(os.Stderr, "== hostname -n %d on %d hosts (one per host)\n", size, size)
		if err := runIf(ctx, dir, g, *warmup, *runs); err != nil {
			return false, err
		}
		growth = append(growth, g)
	}

	// Results.
	var all []*command
	fmt.Printf("\n%-18s | %-26s | %9s | %9s | %9s\n", "benchmark", "command", "median", "p10", "p90")
	for _, g := range slices.Concat(groups, growth) {
		for _, c := range g {
			all = append(all, c)
			if c.failed() {
				fmt.Printf("%-18s | %-26s | %9s | %9s | %9s\n", c.Bench, c.Name, "FAILED", "-", "-")
				failed = true
				continue
			}
			if !c.measured() {
				continue // -only
			}
			fmt.Printf("%-18s | %-26s | %9s | %9s | %9s\n", c.Bench, c.Name,
				benchutil.Ms(benchutil.Pct(c.WallMs, 0.5)), benchutil.Ms(benchutil.Pct(c.WallMs, 0.1)), benchutil.Ms(benchutil.Pct(c.WallMs, 0.9)))
		}
	}

	fmt.Printf("\nstart-up growth, hostname one per host, median wall time:\n%-5s", "hosts")
	for _, name := range growthNames {
		fmt.Printf(" | %25s", name)
	}
	fmt.Println()
	for i, size := range sizes {
		fmt.Printf("%-5d", size)
		for _, c := range growth[i] {
			v := "FAILED"
			if c.measured() {
				v = benchutil.Ms(c.MedianMs)
			} else if !c.failed() {
				v = "-"
			}
			fmt.Printf(" | %25s", v)
		}
		fmt.Println()
	}
	// The fanout to choose: prun's fastest at the largest size.
	last, best := growth[len(growth)-1], -1
	for i, c := range last {
		if c.isPrun && c.measured() && (best < 0 || c.MedianMs < last[best].MedianMs) {
			best = i
		}
	}
	if best >= 0 {
		fmt.Printf("fastest prun fanout at %d hosts: %s (%s)\n", sizes[len(sizes)-1], last[best].Name, benchutil.Ms(last[best].MedianMs))
	}

	ratio := func(name string, target float64, a *command, bs ...*command) comparison {
		cmp := comparison{Name: name, Target: target}
		var b *command
		for _, x := range bs {
			if x.measured() && (b == nil || x.MedianMs < b.MedianMs) {
				b = x
			}
		}
		switch {
		case a.failed():
			cmp.Error = a.Name + " failed"
		case !a.measured():
			cmp.Error = a.Name + " not run"
		case b == nil:
			cmp.Error = "every peer failed"
		default:
			cmp.Peer, cmp.Value = b.Name, a.MedianMs/b.MedianMs
			cmp.Pass = cmp.Value <= target
		}
		return cmp
	}
	var cmps []comparison
	if *peersFlag {
		// Each build against the peers; a group is its builds' commands,
		// then the peers'.
		k := len(pruns)
		for i := range pruns {
			suffix := ""
			if k > 1 {
				suffix = " [" + pruns[i].name + "]"
			}
			cmps = append(cmps,
				ratio(fmt.Sprintf("ratio prun/min(mpirun, hydra) (%s, %d hosts)%s", bh, pairHosts, suffix), 0.6, groups[0][i], groups[0][k], groups[0][k+1]),
				ratio(fmt.Sprintf("ratio prun/mpirun.openmpi (%s, %d hosts)%s", bo, pairHosts, suffix), 1.0, groups[1][i], groups[1][k]),
				ratio(fmt.Sprintf("ratio prun/hydra (%s, %d hosts)%s", bm, pairHosts, suffix), 1.0, groups[2][i], groups[2][k]),
				ratio(fmt.Sprintf("ratio prun/min(mpirun, hydra) (%s, %d hosts)%s", bout, outHosts, suffix), 1.0, groups[3][i], groups[3][k], groups[3][k+1]))
		}
	}
	fmt.Println()
	for _, c := range cmps {
		if strings.HasSuffix(c.Error, " not run") {
			continue // -only
		}
		if c.Error != "" {
			fmt.Printf("%s: not measured, %s (target <= %.2f) FAIL\n", c.Name, c.Error, c.Target)
			continue
		}
		verdict := "MISS"
		if c.Pass {
			verdict = "PASS"
		}
		fmt.Printf("%s = %.2f (target <= %.2f) %s [vs %s]\n", c.Name, c.Value, c.Target, verdict, c.Peer)
	}
	for _, c := range all {
		if c.failed() {
			fmt.Printf("FAILED: %s: %s: %s\n", c.Bench, c.Name, firstLine(c.Error))
		}
	}

	if *jsonOut != "" {
		table := map[string]map[string]any{}
		for i, size := range sizes {
			row := map[string]any{}
			for _, c := range growth[i] {
				if c.failed() {
					row[c.Name] = nil
				} else {
					row[c.Name] = c.MedianMs
				}
			}
			table[strconv.Itoa(size)] = row
		}
		b, err := json.MarshalIndent(map[string]any{
			"machine": facts, "runs": *runs, "warmup": *warmup, "sizes": sizes, "cluster_hosts": nHosts,
			"results": all, "comparisons": cmps, "growth_median_ms": table,
		}, "", "  ")
		if err != nil {
			return failed, err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return failed, err
		}
	}
	return failed, nil
}

// runGroup runs the commands of g round-robin (A, B, A, B, ...), so that
// drifting machine noise hits all alike: warmup untimed rounds, then runs
// timed ones. Each round starts one command further on, so that each takes
// every place as often (a run is slower or faster for what the one before
// it left behind). A command that fails is reported at once and left out of
// the rounds that follow.
func runGroup(ctx context.Context, dir string, g []*command, warmup, runs int) error {
	for i := 0; i < warmup+runs; i++ {
		for j := range g {
			c := g[(i+j)%len(g)]
			if c.failed() {
				continue
			}
			err := c.runOnce(ctx, dir, i >= warmup)
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted (%v)", context.Cause(ctx))
			}
			if err != nil {
				c.Error = err.Error()
				fmt.Fprintf(os.Stderr, "FAILED: %s: %s (run %d): %v\n", c.Bench, c.Name, i+1, err)
			}
		}
	}
	for _, c := range g {
		if !c.failed() {
			c.MedianMs = benchutil.Pct(c.WallMs, 0.5)
		}
	}
	return nil
}

// runOnce runs c once in dir and, if record is set, records its wall time.
// A nonzero exit, a timeout or an output that fails c.check is an error
// carrying the command's output.
func (c *command) runOnce(ctx context.Context, dir string, record bool) error {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	// The process group takes the launcher's local helpers (ssh clients)
	// along on a timeout; the cluster's teardown kills what is left on the
	// hosts.
	stdoutName := filepath.Join(dir, "stdout")
	if c.check == nil {
		stdoutName = os.DevNull
	}
	run, err := benchutil.NewRun(ctx, dir, stdoutName, c.Argv)
	if err != nil {
		return err
	}
	defer run.Close()
	cmd, stdout, stderr := run.Cmd, run.Stdout, run.Stderr
	cmd.Env = append(os.Environ(), c.Env...)

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %v", strings.Join(c.Argv, " "), err)
	}
	err = cmd.Wait()
	wall := time.Since(start)
	var out []byte
	if c.check != nil {
		out, _ = os.ReadFile(stdout.Name())
	}
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("timed out after %v", runTimeout)
		}
		errOut, _ := os.ReadFile(stderr.Name())
		return fmt.Errorf("%s: %v\nstderr:\n%s\nstdout:\n%s", strings.Join(c.Argv, " "), err, benchutil.Tail(errOut, 2048), benchutil.Tail(out, 2048))
	}
	if c.check == nil {
		// /dev/null: nothing to check
	} else if err := c.check(out); err != nil {
		errOut, _ := os.ReadFile(stderr.Name())
		return fmt.Errorf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(c.Argv, " "), err, benchutil.Tail(out, 2048), benchutil.Tail(errOut, 2048))
	}
	if record {
		c.WallMs = append(c.WallMs, float64(wall)/float64(time.Millisecond))
	}
	return nil
}

// checkHostnames accepts an output of exactly per lines naming each of hosts.
func checkHostnames(hosts []string, per int) func([]byte) error {
	return func(out []byte) error {
		got := map[string]int{}
		for _, line := range lines(out) {
			got[line]++
		}
		return sameCounts(got, hosts, per, "hostname lines")
	}
}

var helloLine = regexp.MustCompile(`^hello from rank (\d+) of (\d+) on (\S+) \(app \d+\)$`)

// checkHellos accepts the output of testdata/hello.c run with per ranks on
// each of hosts: every rank's line exactly once, and nothing else.
func checkHellos(hosts []string, per int) func([]byte) error {
	np := len(hosts) * per
	return func(out []byte) error {
		ranks := make([]int, np)
		onHost := map[string]int{}
		for _, line := range lines(out) {
			m := helloLine.FindStringSubmatch(line)
			if m == nil {
				return fmt.Errorf("unexpected line %q", line)
			}
			r, _ := strconv.Atoi(m[1])
			size, _ := strconv.Atoi(m[2])
			if size != np || r < 0 || r >= np {
				return fmt.Errorf("line %q: want ranks 0..%d of %d (ranks not one job?)", line, np-1, np)
			}
			ranks[r]++
			onHost[m[3]]++
		}
		for r, k := range ranks {
			if k != 1 {
				return fmt.Errorf("rank %d printed %d lines, want 1", r, k)
			}
		}
		return sameCounts(onHost, hosts, per, "ranks")
	}
}

// sameCounts checks that got counts exactly per of each of hosts and nothing else.
func sameCounts(got map[string]int, hosts []string, per int, what string) error {
	var bad []string
	for _, h := range hosts {
		if got[h] != per {
			bad = append(bad, fmt.Sprintf("%s: %d", h, got[h]))
		}
	}
	for h, k := range got {
		if !slices.Contains(hosts, h) {
			bad = append(bad, fmt.Sprintf("%q (not a host of the job): %d", h, k))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("%s per host, want %d on each of %s: got %s", what, per, strings.Join(hosts, ","), strings.Join(bad, ", "))
	}
	return nil
}

// lines returns the non-empty lines of out, trimmed.
func lines(out []byte) []string {
	var ls []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

// parseSizes parses -sizes: comma-separated host counts, 1..253 each.
func parseSizes(s string) ([]int, error) {
	sizes, err := benchutil.Ints("-sizes", s, 1, 253)
	if err != nil {
		return nil, err
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
