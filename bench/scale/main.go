// Command scale benchmarks prun's launcher at hundreds of nodes on one
// machine: simulated clusters, in which every node's daemon runs here under
// the node's name (testdata/simrsh.sh as the remote shell: each daemon has
// a session directory and a PMIx server of its own; the daemons, the tree
// and the control plane are the real ones), side by side with mpiexec.hydra
// and mpirun.openmpi started through the same agent.
//
//	go run ./bench/scale [-sizes 256,512,1024] [-runs 3] [-mpi-max 256] [-prun bin/prun] [-json FILE]
//	go run ./bench/scale -fanouts 8,16,32,64 [-sizes 64,256,512] [-runs 3]
//	go run ./bench/scale -sizes 256,512 -runs 1 -mpi-max 0 -launchers prun
//
// At each size N, one rank per node:
//
//   - true: /bin/true (start-up and teardown), with prun, hydra and mpirun;
//   - fence: testdata/fence.c, one PMIx fence with 1 KiB per rank (its time
//     as rank 0 measures it), with prun and mpirun (Hydra serves no PMIx);
//   - ompi-hello, mpich-hello (N <= -mpi-max): testdata/hello.c, MPI_Init,
//     MPI_Allreduce, MPI_Finalize, with prun and mpirun / prun and hydra.
//
// With -fanouts, prun alone runs true and fence, once per launch fanout
// (--launch-fanout), to choose the tree's default from data.
//
// For every run: the wall time, and the launcher process's own CPU time
// and peak RSS (VmHWM), sampled from /proc until it exits (the same way for
// the three launchers; prun's --report gives its own getrusage too). prun's
// runs also give its structural counters (--report's "tree"): messages the
// launcher handled at start-up, per collective and at teardown, and the
// depth; and the teardown time, from the last rank's end to prun's.
//
// The machine has few cores: absolute times mostly measure CPU shared by
// N daemons (and N ranks); compare the launchers by ratios, and prun's
// growth by its counters; the "all CPU" column is the whole launch's
// (launcher, daemons, shells, ranks: what the launcher's wait reports).
// prun's runs also give its daemons' memory (daemonMem: the median daemon's
// anonymous RSS after the launch, peak RSS and estimated peak anonymous
// memory) and what the launch took of the machine's available memory at its
// lowest. A size whose daemons would not fit in the available memory is
// skipped, and said so (daemonKiB); a run during which the available memory
// falls below memFloorKiB is killed and reported failed. -launchers picks
// the launchers to run (e.g. prun alone).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"prun/bench/internal/benchutil"
	"prun/internal/ctest"
)

const runTimeout = 5 * time.Minute

type sample struct {
	WallMs    float64 `json:"wall_ms"`
	AllCPUMs  float64 `json:"all_cpu_ms"`
	CPUMs     float64 `json:"launcher_cpu_ms"`
	RSSKiB    int64   `json:"launcher_peak_rss_kib"`
	FenceUs   float64 `json:"fence_us,omitempty"`
	TeardownM float64 `json:"teardown_ms,omitempty"`
	// prun's daemons (the medians over the daemons; see daemonMem)
	DaemonAnonKiB     int64 `json:"daemon_anon_kib,omitempty"`
	DaemonHWMKiB      int64 `json:"daemon_peak_rss_kib,omitempty"`
	DaemonPeakAnonKiB int64 `json:"daemon_peak_anon_kib,omitempty"`
	Daemons           int   `json:"daemons_sampled,omitempty"`
	// what the launch took of the machine's available memory at its peak
	LaunchUsedKiB int64           `json:"launch_used_kib,omitempty"`
	Tree          json.RawMessage `json:"tree,omitempty"`
}

type result struct {
	Size     int      `json:"nodes"`
	Bench    string   `json:"benchmark"`
	Launcher string   `json:"launcher"`
	Samples  []sample `json:"samples"`
	Err      string   `json:"error,omitempty"`
}

func main() {
	ok, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/scale:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run() (bool, error) {
	sizesFlag := flag.String("sizes", "256,512,1024", "simulated node counts")
	runs := flag.Int("runs", 3, "runs of each benchmark (the median is reported)")
	mpiMax := flag.Int("mpi-max", 256, "largest size of the MPI hello benchmarks (each rank costs ~0.3 s of CPU)")
	prunFlag := flag.String("prun", "", "the prun binary (default bin/prun)")
	jsonOut := flag.String("json", "", "also write every sample as JSON to this file")
	fanoutsFlag := flag.String("fanouts", "", "prun alone, true and fence, at each of these launch fanouts")
	launchersFlag := flag.String("launchers", "prun,hydra,mpirun", "the launchers to run")
	flag.Parse()
	var fanouts []int
	if *fanoutsFlag != "" {
		var err error
		if fanouts, err = benchutil.Ints("-fanouts", *fanoutsFlag, 1, 1<<16); err != nil {
			return false, err
		}
	}
	sizes, err := benchutil.Ints("-sizes", *sizesFlag, 1, 9999)
	if err != nil {
		return false, err
	}
	root := ctest.Root()
	prun := *prunFlag
	if prun == "" {
		prun = filepath.Join(root, "bin", "prun")
	}
	prun, _ = filepath.Abs(prun)
	if _, err := os.Stat(prun); err != nil {
		return false, fmt.Errorf("prun binary %s is missing (run `make build`, or pass -prun)", prun)
	}
	agent := filepath.Join(root, "testdata", "simrsh.sh")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "prun-bench-scale-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	bins := map[string]string{}
	for name, b := range map[string][]string{
		"hello":       {"mpicc.openmpi", "-O2", "-o", filepath.Join(dir, "hello"), filepath.Join(root, "testdata", "hello.c")},
		"hello_mpich": {"mpicc.mpich", "-O2", "-o", filepath.Join(dir, "hello_mpich"), filepath.Join(root, "testdata", "hello.c")},
		"fence": {"sh", "-c", "gcc -O2 -o " + filepath.Join(dir, "fence") + " " + filepath.Join(root, "testdata", "fence.c") +
			" $(pkg-config --cflags --libs pmix)"},
	} {
		if out, err := exec.Command(b[0], b[1:]...).CombinedOutput(); err != nil {
			return false, fmt.Errorf("%s: %v\n%s", strings.Join(b, " "), err, out)
		}
		bins[name] = filepath.Join(dir, name)
	}
	fmt.Printf("machine: %v\n\n", benchutil.Machine())

	var all []*result
	ok := true
	for _, n := range sizes {
		if avail, need := availKiB(), int64(n)*daemonKiB(n); avail > 0 && avail < need {
			fmt.Printf("## %d simulated nodes: skipped (%d MiB available, %d MiB needed)\n\n", n, avail>>10, need>>10)
			continue
		}
		hosts := filepath.Join(dir, fmt.Sprintf("hosts%d", n))
		hydraHosts := hosts + ".hydra"
		var b, h strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "sim%04d slots=1\n", i)
			fmt.Fprintf(&h, "sim%04d:1\n", i)
		}
		os.WriteFile(hosts, []byte(b.String()), 0o644)
		os.WriteFile(hydraHosts, []byte(h.String()), 0o644)
		ns := strconv.Itoa(n)
		prunArgs := func(prog ...string) []string {
			// The control plane on loopback: the machine's other addresses
			// may include IPv6 ones, and a daemon linked over IPv6 gives
			// its Open MPI ranks an IPv6 btl_tcp_if_include, which Open MPI
			// 4.1 refuses.
			return append([]string{prun, "--rsh", agent, "--if-include", "lo", "--hostfile", hosts, "--map-by", "node", "-n", ns}, prog...)
		}
		hydraArgs := func(prog ...string) []string {
			return append([]string{"mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", agent, "-f", hydraHosts, "-n", ns}, prog...)
		}
		mpirunArgs := func(prog ...string) []string {
			return append([]string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--mca", "plm_rsh_agent", agent,
				"--mca", "if_base_do_not_resolve", "1", "--mca", "pml", "ob1", "--hostfile", hosts, "--map-by", "node", "-n", ns}, prog...)
		}
		type bench struct {
			name, launcher string
			argv           []string
			want           string // in stdout, n times
		}
		benches := []bench{
			{"true", "prun", prunArgs("/bin/true"), ""},
			{"true", "hydra", hydraArgs("/bin/true"), ""},
			{"true", "mpirun", mpirunArgs("/bin/true"), ""},
			{"fence", "prun", prunArgs(bins["fence"], "data", "1024", "1"), " ok\n"},
			{"fence", "mpirun", mpirunArgs(bins["fence"], "data", "1024", "1"), " ok\n"},
		}
		if len(fanouts) > 0 {
			benches = nil
			for _, k := range fanouts {
				f := []string{"--launch-fanout", strconv.Itoa(k)}
				benches = append(benches,
					bench{"true", fmt.Sprintf("prun, fanout %d", k), prunArgs(append(f, "/bin/true")...), ""},
					bench{"fence", fmt.Sprintf("prun, fanout %d", k), prunArgs(append(f, bins["fence"], "data", "1024", "1")...), " ok\n"})
			}
		} else if n <= *mpiMax {
			benches = append(benches,
				bench{"ompi-hello", "prun", prunArgs(bins["hello"]), "hello from rank"},
				bench{"ompi-hello", "mpirun", mpirunArgs(bins["hello"]), "hello from rank"},
				bench{"mpich-hello", "prun", prunArgs(bins["hello_mpich"]), "hello from rank"},
				bench{"mpich-hello", "hydra", hydraArgs(bins["hello_mpich"]), "hello from rank"})
		}
		keep := benches[:0]
		for _, bn := range benches {
			if strings.Contains(","+*launchersFlag+",", ","+strings.SplitN(bn.launcher, ",", 2)[0]+",") {
				keep = append(keep, bn)
			}
		}
		benches = keep
		fmt.Printf("## %d simulated nodes, 1 rank each\n\n", n)
		fmt.Println("| benchmark | launcher | wall (median) | all CPU | launcher CPU | launcher peak RSS | notes |")
		fmt.Println("|---|---|---|---|---|---|---|")
		for _, bn := range benches {
			res := &result{Size: n, Bench: bn.name, Launcher: bn.launcher}
			all = append(all, res)
			if avail, need := availKiB(), int64(n)*(daemonKiB(n)+rankKiB(bn.name, n)); avail > 0 && avail < need {
				res.Err = fmt.Sprintf("skipped: %d MiB available, %d MiB needed", avail>>10, need>>10)
				fmt.Printf("| %s | %s | skipped | | | | %s |\n", bn.name, bn.launcher, res.Err)
				continue
			}
			for i := 0; i < *runs && res.Err == ""; i++ {
				s, err := once(ctx, dir, n, strings.HasPrefix(bn.launcher, "prun"), bn.argv, bn.want)
				if err != nil {
					res.Err = err.Error()
					break
				}
				res.Samples = append(res.Samples, s)
			}
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if res.Err != "" {
				ok = false
				fmt.Printf("| %s | %s | failed | | | | %s |\n", bn.name, bn.launcher, oneLine(res.Err))
				continue
			}
			med := func(f func(sample) float64) float64 {
				xs := make([]float64, len(res.Samples))
				for i, s := range res.Samples {
					xs[i] = f(s)
				}
				return benchutil.Pct(xs, 0.5)
			}
			notes := ""
			if bn.name == "fence" {
				notes = fmt.Sprintf("fence %.1f ms; ", med(func(s sample) float64 { return s.FenceUs })/1000)
			}
			if strings.HasPrefix(bn.launcher, "prun") {
				last := res.Samples[len(res.Samples)-1]
				if bn.name == "true" {
					notes += fmt.Sprintf("teardown %.0f ms; ", med(func(s sample) float64 { return s.TeardownM }))
				}
				notes += fmt.Sprintf("daemons (median of %d): anon RSS %.1f MiB after launch, peak RSS %.1f MiB, peak anon ~%.1f MiB; machine's memory at the peak %.1f GiB (%.1f MiB a node); ",
					last.Daemons, float64(last.DaemonAnonKiB)/1024, float64(last.DaemonHWMKiB)/1024, float64(last.DaemonPeakAnonKiB)/1024,
					float64(last.LaunchUsedKiB)/(1<<20), float64(last.LaunchUsedKiB)/1024/float64(n))
				notes += treeNotes(last.Tree)
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %d MiB | %s |\n", bn.name, bn.launcher,
				benchutil.Ms(med(func(s sample) float64 { return s.WallMs })),
				benchutil.Ms(med(func(s sample) float64 { return s.AllCPUMs })),
				benchutil.Ms(med(func(s sample) float64 { return s.CPUMs })),
				int64(med(func(s sample) float64 { return float64(s.RSSKiB) }))>>10, notes)
		}
		fmt.Println()
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return false, err
		}
	}
	return ok, nil
}

// daemonKiB bounds the memory one simulated node takes at the launch's
// peak in a job of n nodes, one rank each: 4 MiB for the daemon (3 MiB of
// anonymous memory, its shells, its rank, the kernel's share), and 12 KiB per
// node of the job. Each daemon registers every rank and node of the job with
// libpmix: its store holds about 6 KiB per node, and while registering the
// daemon also holds them as pmix_info_t (544 bytes each, 15 per node and
// rank), 13.5 KiB at its peak (TestRegisterMemoryPerNode); the daemons do
// not all peak at once. Measured with bench/scale, the machine's
// MemAvailable at its lowest during /bin/true: 3.9-4.0 GiB at 512 nodes
// (this says 5 GiB), 12.4-13.0 GiB at 1,024 (16 GiB). mpirun's and Hydra's
// daemons take less.
func daemonKiB(n int) int64 { return 4<<10 + 12*int64(n) }

// rankKiB bounds the anonymous memory of one rank of benchmark b in a job of
// n ranks, one per node, added to daemonKiB's. Measured at 128 nodes
// (VmHWM less RssFile): Open MPI's hello 4.4 MiB, MPICH's 7.6 MiB, growing
// 4 and 15 KiB per rank of the job (their peak RSS at 32 and 128 nodes).
// The fence's PMIx client holds every rank's keys and 1 KiB of each one's
// data: the fence job took 4.5 GiB more than /bin/true at 1,024 nodes.
func rankKiB(b string, n int) int64 {
	switch b {
	case "ompi-hello":
		return 4<<10 + 4*int64(n)
	case "mpich-hello":
		return 6<<10 + 15*int64(n)
	case "fence":
		return 1<<10 + 4*int64(n)
	}
	return 0
}

// memFloorKiB is the machine's available memory below which a run is
// stopped: without swap, a launch that does not fit leaves the kernel
// reclaiming until nothing runs (1,024 daemons did, before the cut above),
// then killing processes at random.
const memFloorKiB = 1536 << 10

var fenceTime = regexp.MustCompile(`fences in ([0-9]+) us`)

// once runs argv, sampling the launcher's CPU and peak RSS from /proc.
func once(ctx context.Context, dir string, n int, isPrun bool, argv []string, want string) (sample, error) {
	var s sample
	report := filepath.Join(dir, "report.json")
	if isPrun {
		argv = append([]string{argv[0], "--report", report}, argv[1:]...)
	}
	sim := filepath.Join(dir, "nodes")
	os.RemoveAll(sim)
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	r, err := benchutil.NewRun(ctx, dir, filepath.Join(dir, "stdout"), argv)
	if err != nil {
		return s, err
	}
	defer r.Close()
	r.Cmd.Env = append(os.Environ(), "PRUN_SIM_DIR="+sim)
	start := time.Now()
	if err := r.Cmd.Start(); err != nil {
		return s, err
	}
	pid := r.Cmd.Process.Pid
	var dm *daemonMem
	dmStop, dmDone := make(chan struct{}), make(chan struct{})
	if isPrun {
		dm = newDaemonMem(argv[0])
		go func() { defer close(dmDone); dm.run(dmStop, 250*time.Millisecond) }()
	} else {
		close(dmDone)
	}
	done := make(chan struct{})
	var cpuTicks, hwm int64
	var outOfMemory bool
	go func() {
		defer close(done)
		for {
			if a := availKiB(); a > 0 && a < memFloorKiB && !outOfMemory {
				outOfMemory = true
				syscall.Kill(-pid, syscall.SIGKILL)
			}
			if c, ok := procCPU(pid); ok {
				cpuTicks = c
			}
			if m := procHWM(pid); m > 0 {
				hwm = m
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			// Gone, or a zombie: its last samples stand.
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(st), ") Z ") {
				return
			}
		}
	}()
	err = r.Cmd.Wait()
	s.WallMs = float64(time.Since(start).Microseconds()) / 1000
	if ps := r.Cmd.ProcessState; ps != nil {
		s.AllCPUMs = float64((ps.UserTime() + ps.SystemTime()).Microseconds()) / 1000
	}
	<-done
	close(dmStop)
	<-dmDone
	if dm != nil {
		s.DaemonAnonKiB, s.DaemonHWMKiB, s.DaemonPeakAnonKiB, s.Daemons = dm.medians()
		s.LaunchUsedKiB = dm.usedKiB()
	}
	out, _ := os.ReadFile(filepath.Join(dir, "stdout"))
	if outOfMemory {
		return s, fmt.Errorf("stopped: the machine's available memory fell below %d MiB", memFloorKiB>>10)
	}
	if err != nil {
		errOut, _ := os.ReadFile(filepath.Join(dir, "stderr"))
		return s, fmt.Errorf("%v: %s", err, benchutil.Tail(errOut, 300))
	}
	if want != "" && strings.Count(string(out), want) != n {
		return s, fmt.Errorf("%d of %d ranks said %q: %s", strings.Count(string(out), want), n, strings.TrimSpace(want),
			benchutil.Tail(out, 300))
	}
	s.CPUMs = float64(cpuTicks) * 10 // USER_HZ = 100
	s.RSSKiB = hwm
	if m := fenceTime.FindSubmatch(out); m != nil {
		s.FenceUs, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if isPrun {
		var rep struct {
			End      time.Time       `json:"end_time"`
			Tree     json.RawMessage `json:"tree"`
			Launcher struct {
				RSS int64 `json:"max_rss_kib"`
			} `json:"launcher"`
			Jobs []struct {
				Ranks []struct {
					End time.Time `json:"end_time"`
				} `json:"ranks"`
			} `json:"jobs"`
		}
		b, err := os.ReadFile(report)
		if err != nil {
			return s, err
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return s, err
		}
		s.Tree = rep.Tree
		if rep.Launcher.RSS > 0 {
			s.RSSKiB = rep.Launcher.RSS // exact, from getrusage
		}
		var last time.Time
		for _, j := range rep.Jobs {
			for _, rk := range j.Ranks {
				if rk.End.After(last) {
					last = rk.End
				}
			}
		}
		if !last.IsZero() {
			s.TeardownM = float64(rep.End.Sub(last).Microseconds()) / 1000
		}
	}
	return s, nil
}

// procCPU is a process's own user+system time, in clock ticks.
func procCPU(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	sy, _ := strconv.ParseInt(f[12], 10, 64)
	return u + sy, true
}

// procHWM is a process's peak RSS (VmHWM), in KiB.
func procHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	v := strings.TrimSuffix(benchutil.Field(string(b), "VmHWM"), " kB")
	k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return k
}

func availKiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	v := strings.TrimSuffix(benchutil.Field(string(b), "MemAvailable"), " kB")
	k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return k
}

func treeNotes(raw json.RawMessage) string {
	var t struct {
		Children int `json:"launcher_children"`
		Depth    int `json:"depth"`
		Startup  struct {
			In  int   `json:"messages_in"`
			Out int   `json:"messages_out"`
			B   int64 `json:"bytes_in"`
		} `json:"startup"`
		Teardown struct {
			In  int `json:"messages_in"`
			Out int `json:"messages_out"`
		} `json:"teardown"`
		Colls int `json:"collectives"`
		MaxIn int `json:"max_collective_messages_in"`
		CT    struct {
			BIn  int64 `json:"bytes_in"`
			BOut int64 `json:"bytes_out"`
		} `json:"collective_traffic"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return ""
	}
	s := fmt.Sprintf("depth %d, %d children; start-up %d msgs in; teardown %d in/%d out", t.Depth, t.Children, t.Startup.In,
		t.Teardown.In, t.Teardown.Out)
	if t.Colls > 0 {
		s += fmt.Sprintf("; %d collectives, ≤%d msgs in each, %d/%d KiB in/out", t.Colls, t.MaxIn, t.CT.BIn>>10, t.CT.BOut>>10)
	}
	return s
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
