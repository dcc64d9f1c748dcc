// Command slurm benchmarks prun inside a Slurm allocation against Slurm's
// own launch (srun with its PMIx and PMI-2 plugins) and the MPI launchers
// (mpirun.openmpi, mpiexec.hydra, which start their daemons through srun
// there too), on the test cluster of internal/slurmtest (3 nodes).
//
//	go run ./bench/slurm [-runs 11] [-prun bin/prun]
//
// It builds the cluster, then runs itself again as the command of one
// `salloc -N 3 --ntasks-per-node=2`, where every launcher runs -runs times in
// turn (after one warm-up run each) and the medians are printed: -n 6 of
// testdata/hello.c built with Open MPI and with MPICH, and the daemons alone
// (-n 3 /bin/true, one per node). Each run's output is checked (6 hellos, a
// zero exit). Needs root and bin/prun (`make build`).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"prun/internal/ctest"
	"prun/internal/slurmtest"
)

func main() {
	runs := flag.Int("runs", 11, "timed runs per command")
	prun := flag.String("prun", "bin/prun", "prun binary")
	inner := flag.String("inner", "", "(internal) run inside the allocation, programs in this directory")
	flag.Parse()
	p, err := filepath.Abs(*prun)
	if err != nil {
		fail(err)
	}
	if *inner != "" {
		os.Exit(measure(*inner, p, *runs))
	}
	if why := slurmtest.Available(); why != "" {
		fail(fmt.Errorf("Slurm: %s", why))
	}
	dir, err := os.MkdirTemp("", "prun-bench-slurm-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	for _, b := range []struct{ cc, out string }{{"mpicc.openmpi", "hello-ompi"}, {"mpicc.mpich", "hello-mpich"}} {
		if out, err := exec.Command(b.cc, "-O2", "-o", filepath.Join(dir, b.out), filepath.Join(ctest.Root(), "testdata", "hello.c")).CombinedOutput(); err != nil {
			fail(fmt.Errorf("%s: %v\n%s", b.cc, err, out))
		}
	}
	cdir := filepath.Join(dir, "cluster")
	os.Mkdir(cdir, 0o755)
	c, err := slurmtest.Up(cdir, func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }, "bench/slurm")
	if err != nil {
		fail(err)
	}
	defer c.Stop()
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	cmd := c.Command("salloc", "-N", "3", "--ntasks-per-node=2", self, "-inner", dir, "-prun", p, "-runs", fmt.Sprint(*runs))
	cmd.Env = append(cmd.Env, "OMPI_MCA_btl_tcp_if_include="+slurmtest.Network, "OMPI_MCA_oob_tcp_if_include="+slurmtest.Network,
		"OMPI_MCA_pml=ob1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		c.Stop()
		fail(fmt.Errorf("salloc: %v", err))
	}
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
