package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/ctl"
	"prun/internal/cluster"
	"prun/internal/ctest"
)

// TestMultiNode's subtests of failures: timeouts, lost links and daemons,
// signals, a killed launcher, daemonized ranks.

func (m *mn) testTimeout(t *testing.T) {
	r := m.run(t, opts{args: []string{"--timeout", "2", "--report-state-on-timeout", "--hostfile", m.hostfile, "-n", "8", "sleep", "30"}})
	expectCode(t, r, 124)
	expectContains(t, "stderr", r.stderr, "job timed out after 2s; killing 8 running ranks")
	expectContains(t, "stderr", r.stderr, "7 (pid ")
	expectContains(t, "stderr", r.stderr, " on prun-h4)")
	// The state of a rank on another node, read there.
	expectContains(t, "stderr", r.stderr, "rank 7 (sleep) on prun-h4, pid ")
	expectFaster(t, r, 8*time.Second)
}

// startWaiter starts the waiter on every host and waits for its ranks.
func (m *mn) startWaiter(t *testing.T, extra ...string) *proc {
	args := append(append([]string{"--hostfile", m.hostfile}, extra...), "-n", "8", m.waiter)
	p := startPrun(t, opts{args: args, env: m.env()})
	var want []string
	for i := 0; i < 8; i++ {
		want = append(want, fmt.Sprintf("ready %d on %s", i, m.hosts[i/2]))
	}
	p.waitOutput(20*time.Second, want...)
	return p
}

// killDaemon SIGKILLs host's daemon under a waiting job: prun must name
// the lost node within 10 s, fail, and leave nothing.
func (m *mn) killDaemon(t *testing.T, host string) {
	p := m.startWaiter(t)
	pid := m.daemonPid(t, host)
	killed := time.Now()
	syscall.Kill(pid, syscall.SIGKILL)
	r := p.wait()
	if r.code == 0 || r.code == -1 {
		t.Errorf("prun exited %d after a daemon was killed, want a failure status\n%s", r.code, r)
	}
	if d := time.Since(killed); d > 10*time.Second {
		t.Errorf("prun took %v to notice", d)
	}
	expectContains(t, "stderr", r.stderr, "lost node "+host)
	m.checkClean(t, 10*time.Second)
}

func (m *mn) testLinkOverSsh(t *testing.T) {
	// Hosts that cannot open a connection to their parent (a firewall,
	// a jump host): prun-h2 may not connect to the launcher, prun-h3
	// not to prun-h2 (its parent in a chain). Their daemons run their
	// links over the SSH session that started them. The rule refuses
	// connections from ephemeral ports only: SSH's replies (port 22)
	// still flow.
	block := func(host, to string) func() {
		rule := []string{"rule", "add", "to", to, "ipproto", "tcp", "sport", "1024-65534", "prohibit"}
		if out, err := m.c.InNetns(host, append([]string{"ip"}, rule...)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: ip %v: %v: %s", host, rule, err, out)
		}
		return func() {
			rule[1] = "del"
			m.c.InNetns(host, append([]string{"ip"}, rule...)...).Run()
		}
	}
	defer block("prun-h2", cluster.LauncherAddr)()
	defer block("prun-h3", m.c.Addr("prun-h2"))()
	bin := ctest.Build(t, ctest.PMIx, "modex.c")
	for _, fanout := range []string{"32", "1"} {
		r := m.run(t, opts{args: []string{"--launch-fanout", fanout, "--hostfile", m.hostfile, "-n", "8", "-x", "MODEX_MODE=direct", bin}})
		expectCode(t, r, 0)
		for i := 0; i < 8; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("modex: rank %d on %s ok", i, m.hosts[i/2]))
		}
	}
	// A daemon killed behind such a link is noticed at once.
	m.killDaemon(t, "prun-h2")
}

func (m *mn) testCtrlC(t *testing.T) {
	p := m.startWaiter(t)
	sent := time.Now()
	p.signal(syscall.SIGINT)
	r := p.wait()
	expectCode(t, r, 130)
	if d := time.Since(sent); d > 5*time.Second {
		t.Errorf("prun took %v after SIGINT", d)
	}
	expectContains(t, "stderr", r.stderr, "forwarding it to 8 ranks")
	m.checkClean(t, 10*time.Second)
}

func (m *mn) testLinkDown(t *testing.T) {
	p := m.startWaiter(t)
	cut := time.Now()
	if out, err := m.c.InNetns("prun-h2", "ip", "link", "set", "eth0", "down").CombinedOutput(); err != nil {
		t.Fatalf("link down: %v: %s", err, out)
	}
	r := p.wait()
	if r.code == 0 || r.code == -1 {
		t.Errorf("prun exited %d after a node was cut off, want a failure status\n%s", r.code, r)
	}
	if d := time.Since(cut); d > 10*time.Second {
		t.Errorf("prun took %v to notice", d)
	}
	// The link comes back (so that sshd learns its client is gone);
	// the node's daemon tore itself down when the launcher went silent.
	if out, err := m.c.InNetns("prun-h2", "ip", "link", "set", "eth0", "up").CombinedOutput(); err != nil {
		t.Fatalf("link up: %v: %s", err, out)
	}
	expectContains(t, "stderr", r.stderr, "lost node prun-h2")
	m.checkClean(t, 10*time.Second)
}

func (m *mn) testRelayKilled(t *testing.T) {
	// In a chain, killing h2's daemon cuts h3 and h4 off as well: all
	// of it goes, and prun names the node it lost.
	p := m.startWaiter(t, "--launch-fanout", "1")
	syscall.Kill(m.daemonPid(t, "prun-h2"), syscall.SIGKILL)
	r := p.wait()
	if r.code == 0 || r.code == -1 {
		t.Errorf("prun exited %d, want a failure status\n%s", r.code, r)
	}
	expectContains(t, "stderr", r.stderr, "lost node prun-h2")
	m.checkClean(t, 10*time.Second)
}

func (m *mn) testListenersRefuse(t *testing.T) {
	// Fanout 2: the launcher and prun-h1's daemon listen. Nothing that
	// does not prove the launch secret gets a frame through.
	p := m.startWaiter(t, "--launch-fanout", "2")
	listeners := m.listeners(t, p.cmd.Process.Pid)
	t.Logf("listeners: %v", listeners)
	if len(listeners) != 2 {
		t.Fatalf("found listeners %v, want the launcher's and prun-h1's", listeners)
	}
	before := m.procCount()
	for _, addr := range listeners {
		// No secret at all: bytes that are not a handshake.
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		conn.Write(make([]byte, 128))
		conn.SetReadDeadline(time.Now().Add(8 * time.Second))
		io.Copy(io.Discard, conn) // the listener's challenge, then it must close
		if err := conn.SetReadDeadline(time.Time{}); err == nil {
			if _, err := conn.Read(make([]byte, 1)); err == nil {
				t.Errorf("%s: the connection stayed open after a bad handshake", addr)
			}
		}
		conn.Close()
		// A wrong secret.
		wrong, _ := ctl.NewSecret()
		if l, err := ctl.Dial(addr, wrong, 1, 5*time.Second); err == nil {
			l.Close()
			t.Errorf("%s: a wrong secret was accepted", addr)
		} else if !errors.Is(err, ctl.ErrAuth) {
			t.Errorf("%s: wrong secret: %v, want the handshake refused", addr, err)
		}
	}
	if after := m.procCount(); after != before {
		t.Errorf("processes on the hosts: %d before the probes, %d after", before, after)
	}
	// The job runs on, undisturbed, and ends as usual.
	p.signal(syscall.SIGINT)
	r := p.wait()
	expectCode(t, r, 130)
	m.checkClean(t, 10*time.Second)
}

func (m *mn) testFramesTampered(t *testing.T) {
	// prun-h2's control link runs through a relay (ctltamper_test.go),
	// the launcher's listener on the one port --port-range allows.
	var port int
	for p := range freePorts(t, 1) {
		port = p
	}
	x := m.interpose(t, "prun-h2", port)
	args := []string{"--hostfile", m.hostfile, "--port-range", strconv.Itoa(port), "-n", "8", "hostname"}
	// Relayed untouched, the job runs as usual.
	r := m.run(t, opts{args: args})
	expectCode(t, r, 0)
	linePerHost(t, r, 8)
	if x.conns.Load() == 0 {
		t.Fatal("prun-h2's daemon did not link through the relay")
	}
	// One bit flipped in the first frame after the handshake, the
	// daemon's ("up") or the launcher's ("down"): the receiver drops
	// the link, and the node is lost, by name. The launcher says why
	// in one line; a daemon's reason reaches it only when its
	// session's end is heard before its link's (a race), so "down"
	// checks the node's loss alone.
	for _, dir := range []string{"up", "down"} {
		t.Run(dir, func(t *testing.T) {
			x.flip.Store(dir)
			before := x.conns.Load()
			r := m.run(t, opts{args: args})
			if x.conns.Load() == before {
				t.Fatal("prun-h2's daemon did not link through the relay")
			}
			if r.code == 0 || r.code == -1 {
				t.Errorf("exit %d, want a failure status\n%s", r.code, r)
			}
			if n := len(lines(r.stderr)); n != 1 {
				t.Errorf("stderr has %d lines, want 1\n%s", n, r)
			}
			if dir == "up" {
				expectContains(t, "stderr", r.stderr, "prun: prun-h2: lost the connection to its daemon: ctl: a frame failed authentication: frame 0 of the link was altered, replayed, reordered or injected\n")
			} else {
				expectContains(t, "stderr", r.stderr, "prun-h2")
			}
			t.Logf("stderr:\n%s", r.stderr)
		})
	}
}

func (m *mn) testPortRange(t *testing.T) {
	// A firewall lets ten ports through: the launcher's and
	// prun-h1's listeners take ports of the list (Hydra's
	// MPIEXEC_PORT_RANGE here, --port-range the same). The ports are
	// ones the kernel just gave out, not fixed numbers that another
	// program on a busy machine may hold; prun needs two of the ten.
	allowed := freePorts(t, 10)
	var list []string
	for p := range allowed {
		list = append(list, strconv.Itoa(p))
	}
	p := startPrun(t, opts{args: []string{"--hostfile", m.hostfile, "--launch-fanout", "2", "-n", "8", m.waiter},
		env: append(m.env(), "MPIEXEC_PORT_RANGE="+strings.Join(list, ","))})
	var want []string
	for i := 0; i < 8; i++ {
		want = append(want, fmt.Sprintf("ready %d on %s", i, m.hosts[i/2]))
	}
	p.waitOutput(20*time.Second, want...)
	listeners := m.listeners(t, p.cmd.Process.Pid)
	if len(listeners) != 2 {
		t.Errorf("found listeners %v, want the launcher's and prun-h1's", listeners)
	}
	for _, addr := range listeners {
		_, port, _ := net.SplitHostPort(addr)
		if n, _ := strconv.Atoi(port); !allowed[n] {
			t.Errorf("listener %s is outside the ports allowed (%s)", addr, strings.Join(list, ","))
		}
	}
	p.signal(syscall.SIGINT)
	expectCode(t, p.wait(), 130)
	m.checkClean(t, 10*time.Second)

	// The range's only port taken (by this test, on every address, as
	// the kernel gave it out): one line, nothing started.
	taken, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tp := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--port-range", tp, "-n", "4", "hostname"}})
	if r.code == 0 || len(lines(r.stderr)) != 1 {
		t.Errorf("exit %d, want a failure in one line\n%s", r.code, r)
	}
	expectContains(t, "stderr", r.stderr, "no free port in "+tp+"-"+tp)
	m.checkClean(t, 10*time.Second)
}

func (m *mn) testDaemonized(t *testing.T) {
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "8", m.daemonize}})
	expectCode(t, r, 0)
	expectGone(t, daemonPids(t, r.stdout, 8), 0, "daemonized")
}

func (m *mn) testDaemonizedLauncherKilled(t *testing.T) {
	p := startPrun(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "4", m.daemonize, ":",
		"-n", "4", "sleep", "600"}, env: m.env(), allowZombieRanks: true, skipTmpCheck: true})
	p.stdout.waitFor(func(s string) bool { return strings.Count(s, "daemon ") == 4 }, 20*time.Second)
	pids := daemonPids(t, p.stdout.String(), 4)
	p.signal(syscall.SIGKILL)
	p.wait()
	m.checkClean(t, 10*time.Second)
	expectGone(t, pids, 0, "launcher killed")
}

func (m *mn) testLauncherKilled(t *testing.T) {
	p := m.startWaiter(t)
	// The launcher's own session directory (on this machine, not a
	// test host) is the next prun's to remove, as on one node.
	p.o.allowZombieRanks, p.o.skipTmpCheck = true, true
	killed := time.Now()
	p.signal(syscall.SIGKILL)
	p.wait()
	m.checkClean(t, 10*time.Second-time.Since(killed))
}
