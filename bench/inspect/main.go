// Command inspect measures what prun top and prun stack cost a launch of
// many nodes: a job on simulated nodes (testdata/simrsh.sh: every node's
// daemon on this machine under its node's name, the tree and control plane
// real), sampled through the launcher's inspect socket as prun top does,
// back to back; the launcher's CPU per refresh (its CPU over the refreshes
// less what it used idle over as long), the messages per refresh at the
// launcher (--report's tree counters: gather replies in, one per child of
// the launcher at most), and the time of one merged stack of every rank.
//
//	go run ./bench/inspect [-nodes 64] [-per-node 4] [-refreshes 40] [-debugger gdb|eu-stack]
//
// With -debugger eu-stack the daemons find no gdb (their PATH holds the
// machine's programs but gdb): on simulated nodes every node's debuggers
// share this machine's CPUs, where gdb (0.3 s of CPU a rank) is the
// machine's limit, not prun's.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"prun/bench/internal/benchutil"
	"prun/inspect"
	"prun/internal/ctest"
	"prun/internal/procstat"
	"prun/remote"
	"prun/stacktree"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/inspect:", err)
		os.Exit(1)
	}
}

func run() error {
	nodes := flag.Int("nodes", 64, "simulated nodes")
	perNode := flag.Int("per-node", 4, "ranks per node")
	refreshes := flag.Int("refreshes", 40, "samples taken back to back")
	debugger := flag.String("debugger", "gdb", "gdb or eu-stack: what the daemons find")
	prunFlag := flag.String("prun", "", "the prun binary (default: bin/prun of the repository)")
	flag.Parse()
	root := ctest.Root()
	prun := *prunFlag
	if prun == "" {
		prun = filepath.Join(root, "bin", "prun")
	}
	if _, err := os.Stat(prun); err != nil {
		return fmt.Errorf("%s is missing (make build)", prun)
	}
	dir, err := os.MkdirTemp("", "prun-bench-inspect-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	hosts := filepath.Join(dir, "hosts")
	var b strings.Builder
	for i := 1; i <= *nodes; i++ {
		fmt.Fprintf(&b, "sim%04d slots=%d\n", i, *perNode)
	}
	if err := os.WriteFile(hosts, []byte(b.String()), 0o644); err != nil {
		return err
	}
	env := append(os.Environ(), "TMPDIR="+dir, "PRUN_SIM_DIR="+filepath.Join(dir, "nodes"))
	switch *debugger {
	case "gdb":
	case "eu-stack":
		path, err := pathWithout(dir, "gdb")
		if err != nil {
			return err
		}
		env = append(env, "PATH="+path)
	default:
		return fmt.Errorf("-debugger %q: gdb or eu-stack", *debugger)
	}
	n := *nodes * *perNode
	report := filepath.Join(dir, "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	argv := []string{prun, "--rsh", filepath.Join(root, "testdata", "simrsh.sh"), "--if-include", "lo", "--hostfile", hosts,
		"--map-by", "node", "--report", report, "-n", fmt.Sprint(n), "/bin/sleep", "3600"}
	r, err := benchutil.NewRun(ctx, dir, filepath.Join(dir, "stdout"), argv)
	if err != nil {
		return err
	}
	defer r.Close()
	r.Cmd.Env = env
	if err := r.Cmd.Start(); err != nil {
		return err
	}
	pid := r.Cmd.Process.Pid
	ended := false
	defer func() {
		if !ended { // a failure: the launcher and its daemons go (the ranks with them: PR_SET_PDEATHSIG)
			syscall.Kill(-pid, syscall.SIGKILL)
			r.Cmd.Wait()
		}
	}()
	fmt.Printf("machine: %v\n\n", benchutil.Machine())
	fmt.Printf("## prun top and prun stack: %d simulated nodes, %d ranks (fanout %d: %d children of the launcher), debugger %s\n\n",
		*nodes, n, remote.DefaultFanout, min(*nodes, remote.DefaultFanout), *debugger)

	var c *inspect.Client
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if sock, err := inspect.Find(dir, fmt.Sprint(pid)); err == nil {
			if c, err = inspect.Dial(sock); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no inspect socket for prun %d", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		ranks, err := c.Ranks(ctx, "")
		sleeping := 0
		for _, rk := range ranks {
			if rk.State == "sleeping" {
				sleeping++
			}
		}
		if err == nil && sleeping == n {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every rank sleeps after 2 minutes (%d of %d; %v)", sleeping, n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	cpu := func() time.Duration {
		st, err := procstat.Read(pid)
		if err != nil {
			return 0
		}
		return st.CPU()
	}
	// Idle: heartbeats only.
	idleFor := 5 * time.Second
	c0 := cpu()
	time.Sleep(idleFor)
	idleRate := float64(cpu()-c0) / float64(idleFor)

	lat := make([]float64, 0, *refreshes)
	c0, t0 := cpu(), time.Now()
	for i := 0; i < *refreshes; i++ {
		s := time.Now()
		ranks, err := c.Ranks(ctx, "")
		if err != nil || len(ranks) != n {
			return fmt.Errorf("refresh %d: %d ranks, %v", i, len(ranks), err)
		}
		lat = append(lat, float64(time.Since(s).Microseconds())/1000)
	}
	wall := time.Since(t0)
	used := float64(cpu()-c0) - idleRate*float64(wall)
	sort.Float64s(lat)
	fmt.Printf("| measure | value |\n|---|---|\n")
	fmt.Printf("| launcher CPU per refresh (%d back to back, less its idle %.2f%% of a CPU) | %s |\n", *refreshes, 100*idleRate,
		benchutil.Ms(used/float64(*refreshes)/1e6))
	fmt.Printf("| refresh latency, median (p90) | %s (%s) |\n", benchutil.Ms(benchutil.Pct(lat, 0.5)), benchutil.Ms(benchutil.Pct(lat, 0.9)))

	s := time.Now()
	tree, err := c.StacksWithin(ctx, "", stacktree.RankSet{}, inspect.MaxRankTimeout)
	took := time.Since(s)
	if err != nil {
		return fmt.Errorf("stacks: %v", err)
	}
	fmt.Printf("| stack of %d ranks, merged (%d with a stack, %d without) | %.1f s |\n", n, tree.Root.Ranks.Len(), len(tree.Failed),
		took.Seconds())

	r.Cmd.Process.Signal(syscall.SIGTERM)
	r.Cmd.Wait()
	ended = true
	raw, err := os.ReadFile(report)
	if err != nil {
		return fmt.Errorf("--report: %v", err)
	}
	var rep struct {
		Tree remote.Stats `json:"tree"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("--report: %v", err)
	}
	ts := rep.Tree
	fmt.Printf("| gathers at the launcher (refreshes, the start's polls, the stack) | %d |\n", ts.Gathers)
	fmt.Printf("| messages in per gather at the launcher: mean, most (its children: %d) | %.1f, %d |\n", ts.Children,
		float64(ts.GatherMsgsIn)/float64(max(ts.Gathers, 1)), ts.MaxGatherMsgsIn)
	fmt.Printf("\ncommand: go run ./bench/inspect -nodes %d -per-node %d -refreshes %d -debugger %s\n", *nodes, *perNode, *refreshes, *debugger)
	return nil
}

// pathWithout makes a directory of links to every program of PATH's
// directories but the one named without, and returns it as PATH.
func pathWithout(dir, without string) (string, error) {
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return "", err
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.Name() == without {
				continue
			}
			os.Symlink(filepath.Join(d, e.Name()), filepath.Join(bin, e.Name())) // the first of a name wins, as in PATH
		}
	}
	if _, err := exec.LookPath(filepath.Join(bin, "eu-stack")); err != nil {
		return "", fmt.Errorf("eu-stack is not installed")
	}
	return bin, nil
}
