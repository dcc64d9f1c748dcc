// Command slurm benchmarks prun inside a Slurm allocation against Slurm's
// own launch (srun with its PMIx and PMI-2 plugins) and the MPI launchers
// (mpirun.openmpi, mpiexec.hydra, which start their daemons through srun
// there too), on the test cluster of internal/slurmtest (3 nodes).
//
//	go run ./bench/slurm [-runs 11] [-prun bin/prun] [-profile N]
//
// It builds the cluster, then runs itself again as the command of one
// `salloc -N 3 --ntasks-per-node=2`, where every launcher runs -runs times in
// turn (after one warm-up run each) and the medians are printed: -n 6 of
// testdata/hello.c built with Open MPI and with MPICH, and the daemons alone
// (-n 3 /bin/true, one per node). Each run's output is checked (6 hellos, a
// zero exit). Needs root and bin/prun (`make build`).
//
// -profile N runs, instead, N times prun -n 6 with testdata/inittime.c (Open
// MPI) and prints the median time from the launcher's fork to each
// milestone: the launcher's and the daemons' (PRUN_DEBUG_TIMING, with the
// fork's time as PRUN_DEBUG_T0: srun passes it on to the daemons, all on
// this machine's clock) and the ranks' main, MPI_Init and MPI_Finalize.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"prun/internal/ctest"
	"prun/internal/slurmtest"
)

func main() {
	runs := flag.Int("runs", 11, "timed runs per command")
	prun := flag.String("prun", "bin/prun", "prun binary (-profile: several, comma-separated, take turns)")
	inner := flag.String("inner", "", "(internal) run inside the allocation, programs in this directory")
	profile := flag.Int("profile", 0, "profile prun's Open MPI job this many times instead")
	flag.Parse()
	var abs []string
	for _, b := range strings.Split(*prun, ",") {
		a, err := filepath.Abs(b)
		if err != nil {
			fail(err)
		}
		abs = append(abs, a)
	}
	p := strings.Join(abs, ",")
	if *inner != "" {
		if *profile > 0 {
			os.Exit(profileRuns(*inner, p, *profile))
		}
		os.Exit(measure(*inner, p, *runs))
	}
	if err := outside(p, *runs, *profile); err != nil {
		fail(err)
	}
}

// outside builds the cluster and the programs, and runs this program again
// inside one allocation; what it made goes, whatever failed.
func outside(p string, runs, profile int) error {
	if why := slurmtest.Available(); why != "" {
		return fmt.Errorf("Slurm: %s", why)
	}
	dir, err := os.MkdirTemp("", "prun-bench-slurm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	for _, b := range []struct{ cc, out, src string }{{"mpicc.openmpi", "hello-ompi", "hello.c"}, {"mpicc.mpich", "hello-mpich", "hello.c"},
		{"mpicc.openmpi", "inittime-ompi", "inittime.c"}} {
		if out, err := exec.Command(b.cc, "-O2", "-o", filepath.Join(dir, b.out), filepath.Join(ctest.Root(), "testdata", b.src)).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", b.cc, err, out)
		}
	}
	cdir := filepath.Join(dir, "cluster")
	os.Mkdir(cdir, 0o755)
	c, err := slurmtest.Up(cdir, func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }, "bench/slurm")
	if err != nil {
		return err
	}
	defer c.Stop()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := c.Command("salloc", "-N", "3", "--ntasks-per-node=2", self, "-inner", dir, "-prun", p, "-runs", fmt.Sprint(runs),
		"-profile", fmt.Sprint(profile))
	cmd.Env = append(cmd.Env, "OMPI_MCA_btl_tcp_if_include="+slurmtest.Network, "OMPI_MCA_oob_tcp_if_include="+slurmtest.Network,
		"OMPI_MCA_pml=ob1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("salloc: %v", err)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/slurm:", err)
	os.Exit(1)
}

type bench struct {
	name  string
	argv  []string
	lines int // hello lines expected (0: no check)
}

func measure(dir, prun string, runs int) int {
	ompi, mpich := filepath.Join(dir, "hello-ompi"), filepath.Join(dir, "hello-mpich")
	benches := []bench{
		{"prun -n 6 hello (Open MPI)", []string{prun, "-n", "6", ompi}, 6},
		{"srun --mpi=pmix -n 6 hello (Open MPI)", []string{"srun", "--mpi=pmix", "-n", "6", ompi}, 6},
		{"mpirun.openmpi -n 6 hello", []string{"mpirun.openmpi", "--allow-run-as-root", "-n", "6", ompi}, 6},
		{"prun -n 6 hello (MPICH)", []string{prun, "-n", "6", mpich}, 6},
		{"srun --mpi=pmi2 -n 6 hello (MPICH)", []string{"srun", "--mpi=pmi2", "-n", "6", mpich}, 6},
		{"mpiexec.hydra -n 6 hello (MPICH)", []string{"mpiexec.hydra", "-n", "6", mpich}, 6},
		{"prun --map-by node -n 3 /bin/true (daemons)", []string{prun, "--map-by", "node", "-n", "3", "/bin/true"}, 0},
		{"srun -n 3 --ntasks-per-node=1 /bin/true", []string{"srun", "-n", "3", "--ntasks-per-node=1", "/bin/true"}, 0},
	}
	med := map[string]float64{}
	status := 0
	fmt.Printf("inside salloc -N 3 --ntasks-per-node=2 (job %s), median of %d runs:\n", os.Getenv("SLURM_JOB_ID"), runs)
	for _, b := range benches {
		var ms []float64
		var why string
		for i := 0; i <= runs && why == ""; i++ {
			start := time.Now()
			cmd := exec.Command(b.argv[0], b.argv[1:]...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			d := time.Since(start)
			switch {
			case err != nil:
				why = fmt.Sprintf("%v: %s", err, lastLine(errb.String()))
			case b.lines > 0 && strings.Count(out.String(), "hello from rank") != b.lines:
				why = fmt.Sprintf("%d hello lines, want %d", strings.Count(out.String(), "hello from rank"), b.lines)
			}
			if i > 0 {
				ms = append(ms, float64(d.Microseconds())/1000)
			}
		}
		if why != "" {
			fmt.Printf("  %-46s FAILED: %s\n", b.name, why)
			status = 1
			continue
		}
		sort.Float64s(ms)
		med[b.name] = ms[len(ms)/2]
		fmt.Printf("  %-46s %8.1f ms  (min %.1f, max %.1f)\n", b.name, ms[len(ms)/2], ms[0], ms[len(ms)-1])
	}
	ratio := func(a, b string, target float64) {
		if med[a] > 0 && med[b] > 0 {
			fmt.Printf("  %s / %s = %.2f (target <= %.1f)\n", a, b, med[a]/med[b], target)
		}
	}
	ratio("prun -n 6 hello (Open MPI)", "srun --mpi=pmix -n 6 hello (Open MPI)", 0.8)
	ratio("prun -n 6 hello (MPICH)", "srun --mpi=pmi2 -n 6 hello (MPICH)", 0.8)
	ratio("prun -n 6 hello (Open MPI)", "mpirun.openmpi -n 6 hello", 0.6)
	return status
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// profileRuns runs prun -n 6 inittime n times (after a warm-up) and prints
// the median of each milestone's time since the fork, in order; then the
// same program's milestones under mpirun.openmpi and srun --mpi=pmix.
func profileRuns(dir, prun string, n int) int {
	prog := filepath.Join(dir, "inittime-ompi")
	// Several prun binaries (-prun a,b: an A/B) take turns, twice.
	var runs [][]string
	pruns := strings.Split(prun, ",")
	for round := 0; round < min(len(pruns), 2); round++ {
		for _, p := range pruns {
			runs = append(runs, []string{p, "-n", "6", prog})
		}
	}
	runs = append(runs, []string{"mpirun.openmpi", "--allow-run-as-root", "-n", "6", prog}, []string{"srun", "--mpi=pmix", "-n", "6", prog})
	for _, argv := range runs {
		if st := profileOne(argv, n); st != 0 {
			return st
		}
	}
	return 0
}

func profileOne(argv []string, n int) int {
	marks := map[string][]float64{}
	var order []string
	add := func(k string, ms float64) {
		if _, ok := marks[k]; !ok {
			order = append(order, k)
		}
		marks[k] = append(marks[k], ms)
	}
	daemonMark := regexp.MustCompile(`^prun-s\d+: `)
	for i := 0; i <= n; i++ {
		t0 := time.Now()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "PRUN_DEBUG_TIMING=1", "PRUN_DEBUG_REMOTE=1", fmt.Sprintf("PRUN_DEBUG_T0=%d", t0.UnixNano()))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		total := float64(time.Since(t0).Microseconds()) / 1000
		if err != nil || strings.Count(out.String(), "inittime ") != 6 {
			fmt.Printf("  run %d FAILED: %v\n%s%s", i, err, out.String(), errb.String())
			return 1
		}
		if i == 0 {
			continue
		}
		// Each milestone once per run: the latest of the daemons' (the
		// job waits for the slowest), the launcher's as it is.
		seen := map[string]float64{}
		for _, l := range strings.Split(errb.String(), "\n") {
			_, rest, ok := strings.Cut(l, "prun timing ")
			if !ok {
				continue
			}
			var ms float64
			var pid int
			var label string
			if k, _ := fmt.Sscanf(rest, "%f ms [%d]", &ms, &pid); k != 2 {
				continue
			}
			if j := strings.Index(rest, "] "); j >= 0 {
				label = rest[j+2:]
			}
			who := "launcher"
			if strings.HasPrefix(l, "[srun]") {
				who = "daemon"
			}
			label = daemonMark.ReplaceAllString(label, "")
			if strings.Contains(label, ": ranks ") { // a namespace
				label = label[strings.Index(label, ": ranks ")+2:]
			}
			k := who + ": " + label
			seen[k] = max(seen[k], ms)
		}
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var r int
			var m, in, bar, fin int64
			if k, _ := fmt.Sscanf(l, "inittime %d main %d init %d bar %d fin %d", &r, &m, &in, &bar, &fin); k == 5 {
				for _, x := range []struct {
					k string
					v int64
				}{{"ranks: main (latest)", m}, {"ranks: MPI_Init returned (latest)", in}, {"ranks: MPI_Barrier returned (latest)", bar},
					{"ranks: MPI_Finalize returned (latest)", fin}} {
					seen[x.k] = max(seen[x.k], float64(x.v-t0.UnixNano())/1e6)
				}
			}
		}
		seen["launcher: exited (fork to wait)"] = total
		keys := make([]string, 0, len(seen))
		for k := range seen {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(a, b int) bool { return seen[keys[a]] < seen[keys[b]] })
		for _, k := range keys {
			add(k, seen[k])
		}
	}
	type row struct {
		k   string
		med float64
	}
	var rows []row
	for _, k := range order {
		v := marks[k]
		sort.Float64s(v)
		rows = append(rows, row{k, v[len(v)/2]})
	}
	sort.SliceStable(rows, func(a, b int) bool { return rows[a].med < rows[b].med })
	fmt.Printf("%s inittime (Open MPI) inside salloc -N 3 (job %s): median ms since the fork, %d runs\n",
		strings.Join(argv[:len(argv)-1], " "), os.Getenv("SLURM_JOB_ID"), n)
	for _, r := range rows {
		fmt.Printf("  %8.1f  %s\n", r.med, r.k)
	}
	return 0
}
