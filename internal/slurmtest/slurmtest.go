// Package slurmtest gives tests a real Slurm cluster on this machine:
// Debian's slurmctld and munged on the host and three slurmd, one per node
// prun-s1..prun-s3, each in its own network, UTS and mount namespace
// (198.18.1.1-3 on bridge prunbrs0; the host is 198.18.1.254 there), built
// by testdata/slurm/slurm.sh (its comment says every detail).
//
// Concurrency. It takes internal/cluster's machine-wide lock exclusively
// for its lifetime: its network churn must not meet a single-node MPICH
// test (cluster.Quiet), and its names are fixed. Teardown (t.Cleanup)
// stops every daemon and every process left in the nodes, removes the
// namespaces, the bridge and the cluster's directory, then frees the lock.
package slurmtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"prun/internal/cluster"
)

// Nodes are the cluster's node names (also their network namespaces).
var Nodes = []string{"prun-s1", "prun-s2", "prun-s3"}

// Network is the nodes' network (for OMPI_MCA_btl_tcp_if_include).
const Network = "198.18.1.0/24"

// Cluster is a running Slurm cluster.
type Cluster struct {
	dir, script string
	mu          sync.Mutex
	lock        *os.File
}

// Available says why the cluster cannot be built here ("" when it can):
// the Slurm packages are missing, or this is not root.
func Available() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	for _, b := range []string{"slurmctld", "slurmd", "srun", "munged"} {
		if _, err := exec.LookPath(b); err != nil {
			return b + " not installed (apt-get install slurmctld slurmd slurm-client munge)"
		}
	}
	return ""
}

// Start builds the cluster and registers its teardown with t.Cleanup.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if why := Available(); why != "" {
		t.Fatalf("slurmtest: %s", why)
	}
	dir := t.TempDir()
	// munged wants its socket's every directory searchable by all.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Up(dir, t.Logf, t.Name())
	if err != nil {
		t.Fatalf("slurmtest.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("slurm teardown: %v", err)
		}
	})
	return c
}

// Up builds the cluster in dir (programs that are not tests: benchmarks);
// the caller must Stop it.
func Up(dir string, logf func(string, ...any), who string) (*Cluster, error) {
	script, err := script()
	if err != nil {
		return nil, err
	}
	lock, err := cluster.Lock(logf, who)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	c := &Cluster{dir: dir, script: script, lock: lock}
	if out, err := c.sh("up"); err != nil {
		c.Stop()
		return nil, fmt.Errorf("slurm.sh up: %v\n%s", err, out)
	}
	logf("slurm: %d nodes up in %v (dir %s)", len(Nodes), time.Since(start).Round(time.Millisecond), dir)
	return c, nil
}

func (c *Cluster) sh(args ...string) ([]byte, error) {
	return exec.Command(c.script, append(args, c.dir)...).CombinedOutput()
}

// Stop tears the cluster down and frees the lock; later calls do nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return nil
	}
	out, err := c.sh("down")
	c.lock.Close()
	c.lock = nil
	if err != nil {
		return fmt.Errorf("slurm.sh down: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Conf is the cluster's slurm.conf: SLURM_CONF for every Slurm command.
func (c *Cluster) Conf() string { return filepath.Join(c.dir, "etc", "slurm.conf") }

// Env is environ with SLURM_CONF set to the cluster's and any Slurm job or
// step variables of an outer job removed.
func (c *Cluster) Env(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "SLURM_") {
			out = append(out, kv)
		}
	}
	return append(out, "SLURM_CONF="+c.Conf())
}

// Command is a Slurm command (salloc, sbatch, scancel, sacct...) with the
// cluster's configuration in its environment.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = c.Env(os.Environ())
	return cmd
}

// Output runs a Slurm command and returns its standard output; a failure's
// error carries its standard error.
func (c *Cluster) Output(name string, args ...string) (string, error) {
	cmd := c.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

// NodePids are the processes running in node's network namespace (slurmd,
// slurmstepd and whatever the jobs started there).
func NodePids(node string) []int {
	out, _ := exec.Command("ip", "netns", "pids", node).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		var p int
		if _, err := fmt.Sscan(f, &p); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// SlurmdPid is the pid of node's slurmd (0 if none).
func (c *Cluster) SlurmdPid(node string) int {
	b, err := os.ReadFile(filepath.Join(c.dir, "run", "slurmd-"+node+".pid"))
	if err != nil {
		return 0
	}
	var p int
	fmt.Sscan(string(b), &p)
	return p
}

// Log is a Slurm daemon's log ("slurmctld" or "slurmd-prun-s2"), for
// failure messages.
func (c *Cluster) Log(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "log", name+".log"))
	return string(b)
}

func script() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "slurm", "slurm.sh")
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
	}
	wd, _ := os.Getwd()
	for d := wd; d != "" && d != "/"; d = filepath.Dir(d) {
		p := filepath.Join(d, "testdata", "slurm", "slurm.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("testdata/slurm/slurm.sh not found")
}
