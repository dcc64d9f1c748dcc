package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// TestMultiNode's subtests of the network: the remote shell, interfaces,
// topology, the daemons' tree.

func (m *mn) testRsh(t *testing.T) {
	r := m.run(t, opts{args: []string{"--rsh", "ssh -F " + m.c.SSHConfig(), "--hostfile", m.hostfile, "-n", "4", "hostname"}})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	if strings.Join(got, " ") != "prun-h1 prun-h1 prun-h2 prun-h2" {
		t.Errorf("hostnames %q\n%s", got, r)
	}
}

func (m *mn) testIfInclude(t *testing.T) {
	dir, ring := ompi(t, "ring.c")
	for _, net := range []string{cluster.Network, "prunbr0"} {
		r := m.run(t, opts{args: []string{"--if-include", net, "--hostfile", m.hostfile, "-n", "8", ring}, dir: dir})
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, "ring: 8 ranks, 10 laps, sum ok\n")
	}
	r := m.run(t, opts{args: []string{"--if-include", "203.0.113.0/24", "--hostfile", m.hostfile, "-n", "8", "true"}})
	expectCode(t, r, 1)
	expectContains(t, "stderr", r.stderr, "prun: --if-include 203.0.113.0/24: no address of this node is in that network")
}

func (m *mn) testTopologyReported(t *testing.T) {
	// prun-h2's sshd (hence its daemon) may use one CPU only: its daemon
	// reports a 1-core topology, so the host gets 1 slot where the others
	// get 2, and the job is mapped on what each node reported.
	var sshd string
	for _, pid := range netnsPids("prun-h2") {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), "[listener]") {
			sshd = strconv.Itoa(pid)
		}
	}
	if sshd == "" {
		t.Fatal("no sshd on prun-h2")
	}
	all := fmt.Sprintf("0-%d", runtime.NumCPU()-1)
	if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", sshd).CombinedOutput(); err != nil {
		t.Fatalf("taskset: %v: %s", err, out)
	}
	defer exec.Command("taskset", "-a", "-p", "-c", all, sshd).Run()
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--display", "map:json", "hostname"}})
	expectCode(t, r, 0)
	if runtime.NumCPU() < 2 {
		return
	}
	var hosts []string // hostname's lines, after the map
	for _, l := range lines(r.stdout) {
		if strings.HasPrefix(l, "prun-h") {
			hosts = append(hosts, l)
		}
	}
	sort.Strings(hosts)
	want := strings.Repeat("prun-h1 ", 2) + "prun-h2 " + strings.Repeat("prun-h3 ", 2) + strings.Repeat("prun-h4 ", 2)
	if strings.Join(hosts, " ")+" " != want {
		t.Errorf("ranks ran on %q, want %q\n%s", hosts, want, r)
	}
	expectContains(t, "stdout", r.stdout, `{"rank":2,"app":0,"host":"prun-h2","local_rank":0,"node_rank":0,"cpus":"0"}`)
}

func (m *mn) testTree(t *testing.T) {
	// Fanout 1: a chain launcher -> h1 -> h2 -> h3 -> h4; everything
	// for h4 is relayed by three daemons.
	bin := ctest.Build(t, ctest.PMIx, "modex.c")
	r := m.run(t, opts{args: []string{"--launch-fanout", "1", "--hostfile", m.hostfile, "-n", "8", "-x", "MODEX_MODE=direct", bin}})
	expectCode(t, r, 0)
	for i := 0; i < 8; i++ {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("modex: rank %d on %s ok", i, m.hosts[i/2]))
	}
}
