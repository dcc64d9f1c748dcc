package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"prun/ctl"
	"prun/internal/cluster"
)

// TestSimulatedInterfaceGone: an interface of this machine (a bridge) that the control
// plane does not need goes away while a job runs (as another test cluster's
// bridge, 198.18.0.254, comes and goes while TestSimulatedTree256 runs), and
// the job goes on. Every vertex listens on each of its addresses; a daemon
// used to race its parent's addresses to a finished handshake, so that some
// links ran over the last interface's address, and when it went they fell
// silent without a reset and their daemons gave their parents up ("no
// heartbeat for 6s"). The daemons now link at the first address that takes
// the connection (eth0's, ahead of the interface added last).
func TestSimulatedInterfaceGone(t *testing.T) {
	const nodes = 256
	// Adding and removing an interface disturbs UCX's device scan (cluster.Quiet):
	// no MPICH test may run meanwhile, nor a cluster come or go.
	lock, err := cluster.Lock(t.Logf, "TestSimulatedInterfaceGone")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	const ifc, addr = "prungone0", "198.51.100.254/32"
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	ip("link", "del", ifc) // a previous run's, killed
	for _, args := range [][]string{{"link", "add", ifc, "type", "bridge"}, {"addr", "add", addr, "dev", ifc},
		{"link", "set", ifc, "up"}} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	gone := false
	defer func() {
		if !gone {
			ip("link", "del", ifc)
		}
	}()

	hostfile, env, agent := simCluster(t, nodes)
	// The ranks outlive the links' silence limit after the interface goes.
	silence := ctl.Silence(nodes)
	script := writeScript(t, t.TempDir(), "up.sh", fmt.Sprintf("echo up\nsleep %d\n", int((silence+4*time.Second)/time.Second)))
	p := startPrun(t, opts{args: append(agent, "--hostfile", hostfile, "-n", fmt.Sprint(nodes), script), env: env,
		timeout: 2 * time.Minute})
	if !p.stdout.waitFor(func(s string) bool { return strings.Count(s, "up\n") == nodes }, time.Minute) {
		t.Fatalf("not every rank started\n%s", p.wait())
	}
	// The control links over the interface (the launcher's and daemons'
	// listeners took ports of it: each link shows twice, once per end).
	out, err := exec.Command("ss", "-Htn", "state", "established", "src", strings.TrimSuffix(addr, "/32")).Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	if n := strings.Count(string(out), "\n"); n > 0 {
		t.Errorf("%d connection ends over %s, the interface added last; want none", n, ifc)
	}
	if err := ip("link", "del", ifc); err != nil {
		t.Fatal(err)
	}
	gone = true
	r := p.wait()
	expectCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("stderr %q, want nothing", r.stderr)
	}
}
