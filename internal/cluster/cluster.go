// Package cluster gives tests a multi-node cluster on this machine: test hosts
// prun-h1..prun-hN, each a network namespace with its own address
// (198.18.0.K), hostname and sshd, built by testdata/cluster/cluster.sh (see
// the comment at its top for every detail). The launcher side of a test runs
// in the root namespace and reaches the hosts on the bridge prunbr0, whose
// address, 198.18.0.254, is also how the hosts reach the launcher (it is
// named prun-launcher and this machine's hostname inside the hosts).
//
// Names. The machine's /etc/hosts is not edited: in the root namespace the
// host names resolve only through the cluster's ssh_config (HostName) — use
// `ssh -F c.SSHConfig() prun-hK` or Cluster.Addr; inside the hosts they resolve
// through /etc/hosts (ip netns exec binds /etc/netns/prun-hK/hosts there).
//
// Shared filesystem. Every host sees the machine's filesystem: a binary built
// by the test runs on every host at the same path, and /tmp is shared.
//
// Concurrency. The namespace, veth and bridge names are global to the machine,
// and one cluster exists at a time: Start takes an exclusive flock on
// /run/lock/prun-cluster.lock and keeps it until the cluster is torn down, so
// tests in other test processes (go test runs packages in parallel) and in
// this one wait for their turn. Keeping the fixed names (rather than names
// unique to each process) keeps host names, addresses and the bridge simple
// and predictable, and a free lock tells the next user that any leftover
// hosts are garbage: cluster.sh up removes them. A test must not call Start
// while it holds a cluster (it would wait for itself).
package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// LockFile serializes users of the cluster across processes.
	LockFile = "/run/lock/prun-cluster.lock"
	// LauncherAddr is the root namespace's address on the cluster's bridge.
	LauncherAddr = "198.18.0.254"
	// Network is the cluster's network, for options such as
	// OMPI_MCA_btl_tcp_if_include.
	Network = "198.18.0.0/24"
	// Prefix starts every host's name (and network namespace's name).
	Prefix = "prun-h"

	// lockWait bounds a wait for the cluster. The lock is not fair: a
	// package whose tests start clusters one after another (e2e) takes it
	// again at once, so another package (rsh, internal/cluster, Slurm's
	// tests) may wait until all of them are done; make test runs with
	// -timeout 60m, and CI allows 90 minutes in all.
	lockWait = 45 * time.Minute
)

// Cluster is a running test cluster.
type Cluster struct {
	dir    string
	script string
	hosts  []string

	mu   sync.Mutex
	lock *os.File // nil once released
}

// Start builds an n-host cluster (1 <= n <= 253) in a temporary directory and
// registers its teardown with t.Cleanup. It waits for the cluster lock, and
// fails the test if the cluster cannot be built.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	dir := t.TempDir() // removed after our cleanup (cleanups run last-in first-out)
	start := time.Now()
	c, err := Up(n, dir, t.Logf, t.Name())
	if err != nil {
		t.Fatalf("cluster.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cluster teardown: %v", err)
		}
	})
	t.Logf("cluster: %d hosts up in %v (dir %s)", n, time.Since(start).Round(time.Millisecond), dir)
	return c
}

// Up builds an n-host cluster with its files in dir, for programs that are
// not tests (benchmarks); the caller must Stop it. logf reports waiting for
// the lock; who names the holder for others who wait.
func Up(n int, dir string, logf func(string, ...any), who string) (*Cluster, error) {
	if n < 1 || n > 253 {
		return nil, fmt.Errorf("n = %d, want 1..253", n)
	}
	script, err := Script()
	if err != nil {
		return nil, err
	}
	lock, err := acquire(logf, who)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, script: script, lock: lock}
	if out, err := c.sh("up", strconv.Itoa(n), dir); err != nil {
		c.Stop()
		return nil, fmt.Errorf("cluster.sh up %d: %v\n%s", n, err, out)
	}
	for k := 1; k <= n; k++ {
		c.hosts = append(c.hosts, Prefix+strconv.Itoa(k))
	}
	return c, nil
}

// Lock takes the cluster lock exclusively, as Start does, for other test
// clusters that add and remove interfaces (internal/slurmtest): one at a
// time, and never while a Quiet test runs. Closing the file releases it.
func Lock(logf func(string, ...any), who string) (*os.File, error) { return acquire(logf, who) }

// acquire takes the cluster lock, waiting for another holder to finish.
func acquire(logf func(string, ...any), who string) (*os.File, error) {
	f, err := lockFile(syscall.LOCK_EX, logf)
	if err != nil {
		return nil, err
	}
	// Say who holds it, for whoever waits next (best effort).
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d (%s)\n", os.Getpid(), who)
	}
	return f, nil
}

// lockFile takes LockFile's flock (LOCK_EX or LOCK_SH), waiting at most
// lockWait for its holders; the lock is held until the file is closed.
func lockFile(how int, logf func(string, ...any)) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(LockFile), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(LockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("flock %s: %v", LockFile, err)
		}
		holder := "another process"
		if b, _ := os.ReadFile(LockFile); len(bytes.TrimSpace(b)) > 0 {
			holder = string(bytes.TrimSpace(b))
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("waited %v for %s, held by %s", lockWait, LockFile, holder)
		}
		if !logged {
			logf("cluster: waiting for %s (held by %s)", LockFile, holder)
			logged = true
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Quiet keeps test clusters from being built or torn down on this machine
// while the calling test runs, and waits for any that exists to go first:
// building and removing a cluster adds and removes network interfaces in
// the root namespace, and UCX (Debian MPICH's transport) fails MPI_Init
// with "init_worker No such device" when one vanishes during its device
// scan. Tests that start MPICH ranks on this node call it. It takes a
// shared flock on LockFile until the test ends; a test that holds a
// cluster must not call it.
func Quiet(t testing.TB) {
	t.Helper()
	f, err := lockFile(syscall.LOCK_SH, t.Logf)
	if err != nil {
		t.Fatalf("cluster.Quiet: %v", err)
	}
	t.Cleanup(func() { f.Close() })
}

// Script is the path of testdata/cluster/cluster.sh.
func Script() (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "cluster", "cluster.sh")
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
		tried = append(tried, p)
	}
	// Built with -trimpath: look up from the working directory for go.mod.
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			p := filepath.Join(d, "testdata", "cluster", "cluster.sh")
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
				tried = append(tried, p)
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("testdata/cluster/cluster.sh not found (tried %s)", strings.Join(tried, ", "))
}

// sh runs cluster.sh with the lock already held by c.
func (c *Cluster) sh(args ...string) ([]byte, error) {
	cmd := exec.Command(c.script, args...)
	cmd.Env = append(os.Environ(), "PRUN_CLUSTER_LOCKED=1")
	return cmd.CombinedOutput()
}

// down tears the hosts down, keeping the lock.
func (c *Cluster) down() error {
	if out, err := c.sh("down", c.dir); err != nil {
		return fmt.Errorf("cluster.sh down: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Stop tears the cluster down and releases the lock. Start registers it with
// t.Cleanup; calling it earlier is allowed, and later calls do nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lock == nil {
		return nil
	}
	err := c.down()
	c.lock.Close() // releases the flock
	c.lock = nil
	return err
}

// Hosts are the host names, prun-h1..prun-hN.
func (c *Cluster) Hosts() []string { return append([]string(nil), c.hosts...) }

// Dir is the cluster's directory: keys, ssh_config, known_hosts, hosts,
// hostfile, home/.ssh, and per host prun-hK/{sshd_config,sshd.log,...}.
func (c *Cluster) Dir() string { return c.dir }

// TmpDir is host's own temporary directory: the TMPDIR of its SSH sessions
// (the machine's /tmp is shared by every host).
func (c *Cluster) TmpDir(host string) string { return filepath.Join(c.dir, host, "tmp") }

// LauncherOnly is a directory the hosts do not see (an empty tmpfs hides it
// in their mount namespace): for files that must be missing on the hosts.
func (c *Cluster) LauncherOnly() string { return filepath.Join(c.dir, "launcher-only") }

// SSHConfig is the ssh client configuration that reaches every host as root:
// `ssh -F c.SSHConfig() prun-h2 cmd`, from the root namespace or any host.
func (c *Cluster) SSHConfig() string { return filepath.Join(c.dir, "ssh_config") }

// Home is a directory to use as $HOME for SSH clients that read
// $HOME/.ssh/{config,known_hosts,id_ed25519} (OpenSSH itself ignores $HOME).
func (c *Cluster) Home() string { return filepath.Join(c.dir, "home") }

// Hostfile is a file naming every host, one per line.
func (c *Cluster) Hostfile() string { return filepath.Join(c.dir, "hostfile") }

// Addr is a host's address (198.18.0.K), or "" for a name not in the cluster.
func (c *Cluster) Addr(host string) string {
	k := c.index(host)
	if k == 0 {
		return ""
	}
	return fmt.Sprintf("198.18.0.%d", k)
}

// Netns is the name of a host's network namespace (the host's name).
func (c *Cluster) Netns(host string) string { return host }

func (c *Cluster) index(host string) int {
	k, err := strconv.Atoi(strings.TrimPrefix(host, Prefix))
	if !strings.HasPrefix(host, Prefix) || err != nil || k < 1 || k > len(c.hosts) {
		return 0
	}
	return k
}

// SSH is the command `ssh -F ssh_config host args...`: args are joined by
// spaces and run by the remote login shell, as ssh does.
func (c *Cluster) SSH(host string, args ...string) *exec.Cmd {
	return exec.Command("ssh", append([]string{"-F", c.SSHConfig(), host}, args...)...)
}

// Run runs the shell command cmd on host over ssh and returns its standard
// output; a failure's error carries the exit status and the standard error.
func (c *Cluster) Run(host, cmd string) (string, error) {
	x := c.SSH(host, cmd)
	var stderr bytes.Buffer
	x.Stderr = &stderr
	out, err := x.Output()
	if err != nil {
		return string(out), fmt.Errorf("ssh %s %q: %v: %s", host, cmd, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

// Exec is a command that runs args directly on host, without ssh: in the
// host's network namespace through `ip netns exec prun-hK` (which also binds
// the host's /etc/hosts) and in a new UTS namespace named after the host, so
// that it sees what an ssh session on the host sees. It inherits the test's
// environment and descriptors like any exec.Cmd.
func (c *Cluster) Exec(host string, args ...string) *exec.Cmd {
	a := []string{"netns", "exec", c.Netns(host), "unshare", "--uts", "--",
		"sh", "-c", `hostname "$0" && exec "$@"`, host}
	return exec.Command("ip", append(a, args...)...)
}

// InNetns is a command that runs args in host's network namespace only
// (`ip netns exec prun-hK args...`): the machine's hostname, the host's
// network and /etc/hosts.
func (c *Cluster) InNetns(host string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", c.Netns(host)}, args...)...)
}
