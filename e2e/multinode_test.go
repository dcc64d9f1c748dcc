package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// mn is a test cluster of 4 hosts (network namespaces with their own sshd)
// shared by the multi-node tests: only one cluster exists at a time.
type mn struct {
	c     *cluster.Cluster
	hosts []string
	// a hostfile naming every host
	hostfile string
	// TestMultiNode's failure tests' job that waits on every host, and
	// the program of its daemonized tests
	waiter, daemonize string
}

// env is prun's environment for the cluster: $HOME holds the cluster's
// ssh config, key and known_hosts.
func (m *mn) env(extra ...string) []string {
	return append([]string{"HOME=" + m.c.Home()}, extra...)
}

// run runs prun against the cluster and checks that nothing of the job is
// left on any host.
func (m *mn) run(t *testing.T, o opts) *result {
	t.Helper()
	o.env = append(m.env(), o.env...)
	r := run(t, o)
	m.checkClean(t, 10*time.Second)
	return r
}

// checkClean fails if, within d, a host still runs anything but its sshd
// or still holds a prun session directory.
func (m *mn) checkClean(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := m.leftovers()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("left on the hosts %v after the run:\n  %s", d, strings.Join(left, "\n  "))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// spawnMultiple runs testdata/spawnmulti.c built by build: its two spawned
// apps go to the hosts their "host" info names, prun-h3 and prun-h4.
func (m *mn) spawnMultiple(t *testing.T, build func(*testing.T, string) (string, string)) {
	t.Helper()
	dir, prog := build(t, "spawnmulti.c")
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "2", prog, "prun-h3", "prun-h4"}, dir: dir,
		timeout: 20 * time.Second})
	expectCode(t, r, 0)
	for _, want := range []string{"parent 0: merged sum 5 on prun-h1", "child-a 0: merged sum 5 on prun-h3",
		"child-b 1: merged sum 5 on prun-h4", "child-b 2: merged sum 5 on prun-h4"} {
		expectContains(t, "stdout", r.stdout, "spawnmulti: "+want+"\n")
	}
}

// expectSpawnedOn checks a run of spawn.c with 2 parents on parents' host
// and 2 children on children's.
func expectSpawnedOn(t *testing.T, r *result, parents, children string) {
	t.Helper()
	expectCode(t, r, 0)
	for i := 0; i < 2; i++ {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("spawn: parent %d of 2: merged sum 4 ", i))
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("spawn: child %d of 2: merged sum 4 ", i))
	}
	for _, l := range lines(r.stdout) {
		want := children
		if strings.Contains(l, "parent") {
			want = parents
		}
		if !strings.HasSuffix(l, " on "+want) {
			t.Errorf("%q: not on %s", l, want)
		}
	}
}

// waitStaging waits until a daemon on some host writes a preloaded file
// into its staging area (has a "preload.N" file open): the files are being
// sent.
func (m *mn) waitStaging(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, h := range m.hosts {
			for _, pid := range netnsPids(h) {
				fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
				for _, fd := range fds {
					dest, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
					if strings.HasPrefix(filepath.Base(dest), "preload.") {
						return
					}
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no host received preloaded data within %v", d)
}

func (m *mn) leftovers() []string {
	var left []string
	for _, h := range m.hosts {
		for _, pid := range netnsPids(h) {
			pi, ok := readStat(pid)
			if !ok || pi.state == 'Z' && pi.ppid == os.Getpid() {
				continue
			}
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
			if pi.comm == "sshd" && strings.Contains(strings.Join(args, " "), "[listener]") {
				continue // the host's own sshd
			}
			left = append(left, fmt.Sprintf("%s: %s %q", h, pi, args))
		}
		ents, _ := os.ReadDir(m.c.TmpDir(h))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "prun.") {
				left = append(left, fmt.Sprintf("%s: session directory %s", h, filepath.Join(m.c.TmpDir(h), e.Name())))
			}
		}
	}
	return left
}

// linePerHost is r's stdout, a line from each of n hosts, sorted (by host,
// when lines start with the host's name).
func linePerHost(t *testing.T, r *result, n int) []string {
	t.Helper()
	got := lines(r.stdout)
	sort.Strings(got)
	if len(got) != n {
		t.Fatalf("stdout %q, want a line per host\n%s", got, r)
	}
	return got
}

func TestMultiNode(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}

	t.Run("hostname", m.testHostname)
	t.Run("timerslack", m.testTimerslack)
	t.Run("membind", m.testMembind)
	t.Run("max-restarts", m.testMaxRestarts)
	t.Run("mpir", m.testMpir)
	t.Run("output-proctable", m.testOutputProctable)
	t.Run("debug-daemons", m.testDebugDaemons)
	t.Run("modex", m.testModex)
	t.Run("ompi-tcp-exclude", m.testOmpiTcpExclude)

	// Ring and MPMD with each MPI; the first app of the MPMD job has first
	// ranks (3 with Open MPI, 2 with MPICH), so apps straddle hosts.
	for _, mpi := range mnMPIs {
		m.testMPI(t, mpi)
	}

	t.Run("per-context-hosts", m.testPerContextHosts)
	t.Run("genvall", m.testGenvall)
	t.Run("per-context-hostfiles", m.testPerContextHostfiles)
	t.Run("ompi-spawn-host", m.testOmpiSpawnHost)
	t.Run("ompi-spawn-multiple", m.testOmpiSpawnMultiple)
	t.Run("ompi-connect", m.testOmpiConnect)

	// MPICH built with ch3, a PMI-1 and a PMI-2 client (testdata/mpich-ch3.sh):
	// a ring over TCP between hosts (PMI-2's fences cross the daemons), a
	// spawn whose children start on the next host, connect/accept by a
	// published name with every rank on a host of its own.
	for _, tc := range []ctest.Toolchain{ctest.MPICHCh3, ctest.MPICHCh3PMI2} {
		m.testMPICHCh3(t, tc)
	}

	t.Run("mpich-pmi-port", m.testMpichPmiPort)
	t.Run("pmi1-kvs", m.testPmi1Kvs)
	t.Run("abort", m.testAbort)
	t.Run("exit-code", m.testExitCode)
	t.Run("ompi-spawn", m.testOmpiSpawn)
	t.Run("stdin", m.testStdin)
	t.Run("stdin-window", m.testStdinWindow)
	t.Run("stdin-reader-gone", m.testStdinReaderGone)
	t.Run("preload", m.testPreload)
	t.Run("preload-timeout", m.testPreloadTimeout)
	t.Run("copy-prun", m.testCopyPrun)
	t.Run("copy-prun-fails", m.testCopyPrunFails)
	t.Run("rsh", m.testRsh)
	t.Run("if-include", m.testIfInclude)
	t.Run("topology-reported", m.testTopologyReported)
	t.Run("tree", m.testTree)
	t.Run("timeout", m.testTimeout)

	// A job that waits on every host, for the failure tests.
	m.waiter = writeScript(t, t.TempDir(), "wait.sh", `echo "ready $PRUN_RANK on $(hostname)"
exec sleep 60
`)

	t.Run("link-over-ssh", m.testLinkOverSsh)
	t.Run("ctrl-c", m.testCtrlC)

	t.Run("daemon-killed", func(t *testing.T) { m.killDaemon(t, "prun-h3") })

	t.Run("link-down", m.testLinkDown)
	t.Run("relay-killed", m.testRelayKilled)
	t.Run("listeners-refuse", m.testListenersRefuse)
	t.Run("frames-tampered", m.testFramesTampered)
	t.Run("port-range", m.testPortRange)

	// A rank's daemon (testdata/daemonize.c: fork, setsid, fork) ends with
	// the job on every node: these hosts, in network namespaces entered
	// with `ip netns exec`, see no cgroup file system, so each daemon finds
	// what its job left by PRUN_SESSION and PRUN_NSPACE in its environment.
	// Also when the launcher is SIGKILLed: each daemon, its link lost, ends
	// its job.
	m.daemonize = ctest.Build(t, ctest.Plain, "daemonize.c")
	t.Run("daemonized", m.testDaemonized)
	t.Run("daemonized-launcher-killed", m.testDaemonizedLauncherKilled)
	t.Run("launcher-killed", m.testLauncherKilled)
}

func (m *mn) testHostname(t *testing.T) {
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", "hostname"}})
	expectCode(t, r, 0)
	t.Logf("took %v", r.dur)
	got := lines(r.stdout)
	sort.Strings(got)
	want := []string{"prun-h1", "prun-h1", "prun-h2", "prun-h2", "prun-h3", "prun-h3", "prun-h4", "prun-h4"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("hostnames %q, want %q\n%s", got, want, r)
	}
}

// Each node's daemon runs with prun's wide timer slack, its ranks with
// the slack the daemon was started with (sshd's session's: the
// default). Read once the node's forks are done: a fork runs with the
// original slack on its thread, which may be the daemon's main one.
func (m *mn) testTimerslack(t *testing.T) {
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", "sh", "-c",
		`sleep 0.3; echo "$(hostname) $(cat /proc/self/timerslack_ns) $(cat /proc/$PPID/timerslack_ns)"`}})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	if len(got) != 8 {
		t.Fatalf("want 8 lines, got %q", got)
	}
	for _, l := range got {
		f := strings.Fields(l)
		if len(f) != 3 || f[1] == "1000000" || f[2] != "1000000" {
			t.Errorf("%q: want host, the rank's slack (not 1000000), its daemon's (1000000)", l)
		}
	}
}

// -membind reaches the other nodes' ranks: the plan carries each
// rank's NUMA nodes, and its daemon sets the policy for the fork.
func (m *mn) testMembind(t *testing.T) {
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-membind", "bind", "-n", "8", "sh", "-c",
		`echo "$(hostname) $(head -1 /proc/self/numa_maps | cut -d' ' -f2)"`}})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	var want []string
	for _, h := range m.hosts {
		want = append(want, h+" bind:0", h+" bind:0")
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ranks' memory policies %q, want %q", got, want)
	}
}

// --max-restarts on the other nodes: each daemon starts its failed
// rank again, and the launcher hears of it.
func (m *mn) testMaxRestarts(t *testing.T) {
	dir := t.TempDir()
	script := `f=` + dir + `/c$PRUN_RANK; [ -e $f ] || { touch $f; exit 4; }; echo "$(hostname) again"`
	r := m.run(t, opts{args: []string{"--max-restarts", "1", "--hostfile", m.hostfile, "--map-by", "node", "-n", "4", "sh", "-c", script}})
	expectCode(t, r, 0)
	for i, l := range linePerHost(t, r, 4) {
		if l != m.hosts[i]+" again" {
			t.Errorf("rank on %s: %q", m.hosts[i], l)
		}
	}
	if n := strings.Count(r.stderr, "exited with status 4; starting it again (1 of 1)"); n != 4 {
		t.Errorf("%d restarts reported, want 4\n%s", n, r)
	}
}

// A debugger that starts prun (--debug) finds the other nodes' ranks in
// the MPIR table too, each held in PMIx_Init until it lets prun go on.
func (m *mn) testMpir(t *testing.T) {
	dir, hello := ompi(t, "hello.c")
	r := m.run(t, opts{args: []string{"--debug", "--debugger", mpirDebugger(), "--hostfile", m.hostfile, "--map-by", "node",
		"-n", "4", hello}, dir: dir})
	expectCode(t, r, 0)
	ranks := mpirRank.FindAllStringSubmatch(r.stdout, -1)
	if len(ranks) != 4 {
		t.Fatalf("the debugger found %d processes, want 4\n%s", len(ranks), r)
	}
	for i, rk := range ranks {
		if rk[2] != m.hosts[i] || rk[5] != "held" {
			t.Errorf("rank %d as the debugger found it: %q; want on %s, held", i, rk[0], m.hosts[i])
		}
	}
	if got := strings.Count(r.stdout, "hello from rank"); got != 4 || !strings.Contains(r.stdout, "mpir: prun exited 0\n") {
		t.Errorf("after the debugger let prun go on: %d hellos\n%s", got, r)
	}
}

// --output-proctable names every rank's node and pid, the remote ones
// included, as each rank sees itself.
func (m *mn) testOutputProctable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "table")
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--output-proctable=" + file, "--show-progress", "-n", "8",
		"sh", "-c", `echo "$PRUN_RANK $(hostname) $$"`}})
	expectCode(t, r, 0)
	// --show-progress on stderr: the daemons as they come, then the ranks.
	ups := regexp.MustCompile(`prun: (\d) of 4 daemons up\n`).FindAllStringSubmatch(r.stderr, -1)
	if len(ups) != 4 || ups[3][1] != "4" || !strings.Contains(r.stderr, "prun: 8 of 8 processes started\n") ||
		strings.Index(r.stderr, "4 of 4 daemons up") > strings.Index(r.stderr, "processes started") {
		t.Errorf("--show-progress: stderr %q, want 1..4 of 4 daemons up, then the processes started", r.stderr)
	}
	sh, _ := exec.LookPath("sh")
	want := make([]string, 8)
	for _, l := range lines(r.stdout) {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("rank line %q", l)
		}
		rank, _ := strconv.Atoi(f[0])
		want[rank] = fmt.Sprintf("(rank, host, exe, pid) = (%d, %s, %s, %s)", rank, f[1], sh, f[2])
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strings.Join(want, "\n") {
		t.Errorf("proctable:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// --debug-daemons shows what the other nodes' daemons write to stderr
// (here their PMIx traces), each line prefixed by the node's name.
func (m *mn) testDebugDaemons(t *testing.T) {
	bin := ctest.Build(t, ctest.PMIx, "modex.c")
	args := []string{"--hostfile", m.hostfile, "-n", "8", "-x", "MODEX_MODE=collect", bin}
	r := m.run(t, opts{args: append([]string{"--debug-daemons"}, args...), env: []string{"PRUN_DEBUG_PMIX=1"}})
	expectCode(t, r, 0)
	for _, h := range m.hosts {
		expectContains(t, "stderr", r.stderr, "["+h+"] ")
	}
	// -profile: every node's milestones, the other nodes' prefixed.
	r = m.run(t, opts{args: []string{"-profile", "--hostfile", m.hostfile, "-n", "4", "true"}})
	expectCode(t, r, 0)
	for _, h := range m.hosts {
		expectContains(t, "stderr", r.stderr, "["+h+"] prun timing ")
	}
	expectContains(t, "stderr", r.stderr, "prun timing ")
	r = m.run(t, opts{args: args, env: []string{"PRUN_DEBUG_PMIX=1"}})
	expectCode(t, r, 0)
	if strings.Contains(r.stderr, "["+m.hosts[1]+"] ") {
		t.Errorf("without --debug-daemons, %s's daemon's stderr showed:\n%s", m.hosts[1], r.stderr)
	}
}

// TestMultiNodeStartFailures: a node that cannot be started is named with
// the reason within the connect timeout, and the nodes that did start are
// left clean.
func TestMultiNodeStartFailures(t *testing.T) {
	c := cluster.Start(t, 3)
	m := &mn{c: c, hosts: c.Hosts()}
	hostfile := func(t *testing.T, hosts ...string) string {
		f := filepath.Join(t.TempDir(), "hosts")
		if err := os.WriteFile(f, []byte(strings.Join(hosts, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// home makes a $HOME with the cluster's key and known_hosts and an ssh
	// config with extra lines first (the first value of an option wins).
	home := func(t *testing.T, first string, knownHosts bool) string {
		h := t.TempDir()
		os.MkdirAll(filepath.Join(h, ".ssh"), 0o700)
		cfg, _ := os.ReadFile(filepath.Join(c.Home(), ".ssh", "config"))
		os.WriteFile(filepath.Join(h, ".ssh", "config"), append([]byte(first+"\n"), cfg...), 0o600)
		key, _ := os.ReadFile(filepath.Join(c.Home(), ".ssh", "id_ed25519"))
		os.WriteFile(filepath.Join(h, ".ssh", "id_ed25519"), key, 0o600)
		kh := []byte{}
		if knownHosts {
			kh, _ = os.ReadFile(filepath.Join(c.Home(), ".ssh", "known_hosts"))
		}
		os.WriteFile(filepath.Join(h, ".ssh", "known_hosts"), kh, 0o600)
		return h
	}
	for _, tc := range []struct {
		name  string
		hosts []string
		home  func(t *testing.T) string
		args  []string
		want  string
	}{
		{name: "unreachable", hosts: []string{"prun-h1", "prun-h2", "ghost"},
			home: func(t *testing.T) string { return home(t, "Host ghost\n  HostName 198.18.0.77", true) },
			want: "prun: ghost: "},
		{name: "unknown-host-key", hosts: []string{"prun-h1", "prun-h2"},
			home: func(t *testing.T) string {
				h := t.TempDir() // known_hosts is written there by home below
				return home(t, "Host *\n  UserKnownHostsFile "+filepath.Join(h, "empty_known_hosts"), false)
			},
			want: ": host key is not known"},
		{name: "auth-refused", hosts: []string{"prun-h1", "prun-h2", "prun-h3"},
			home: func(t *testing.T) string {
				h := home(t, "Host prun-h3\n  User nobody", true)
				return h
			},
			want: "prun: prun-h3: authentication failed"},
		{name: "no-daemon-binary", hosts: []string{"prun-h1", "prun-h2"}, args: []string{"--prefix", "/nonexistent"},
			home: func(t *testing.T) string { return c.Home() },
			want: ": /nonexistent/bin/prun not found there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"--hostfile", hostfile(t, tc.hosts...)}, tc.args...), "-n", "4", "hostname")
			r := run(t, opts{args: args, env: []string{"HOME=" + tc.home(t)}})
			if r.code == 0 || r.code == -1 {
				t.Errorf("prun exited %d, want a failure status\n%s", r.code, r)
			}
			expectContains(t, "stderr", r.stderr, tc.want)
			if n := len(lines(r.stderr)); n != 1 {
				t.Errorf("stderr has %d lines, want one\n%s", n, r)
			}
			expectFaster(t, r, 7*time.Second)
			t.Logf("%v: %s", r.dur.Round(time.Millisecond), strings.TrimSpace(r.stderr))
			m.checkClean(t, 10*time.Second)
		})
	}

	// A host that does not answer holds the start for the connect timeout
	// (5 s); the user need not wait for it.
	ghostHome := home(t, "Host ghost\n  HostName 198.18.0.77", true)
	ghostArgs := []string{"--hostfile", hostfile(t, "prun-h1", "prun-h2", "ghost"), "-n", "3", "hostname"}
	t.Run("ctrl-c-while-starting", func(t *testing.T) {
		p := startPrun(t, opts{args: ghostArgs, env: []string{"HOME=" + ghostHome}})
		// Once prun-h1's and prun-h2's daemons run (ghost's cannot: its
		// connect times out after 5 s).
		for deadline := time.Now().Add(4 * time.Second); m.daemonPidOrZero("prun-h1") == 0 || m.daemonPidOrZero("prun-h2") == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("prun-h1's and prun-h2's daemons did not start in 4 s")
			}
		}
		sent := time.Now()
		p.signal(syscall.SIGINT)
		r := p.wait()
		expectCode(t, r, 130)
		if d := time.Since(sent); d > time.Second {
			t.Errorf("prun took %v after SIGINT", d)
		}
		expectContains(t, "stderr", r.stderr, "prun: received SIGINT while the other nodes' daemons started; no rank had started\n")
		if n := len(lines(r.stderr)); n != 1 {
			t.Errorf("stderr has %d lines, want one\n%s", n, r)
		}
		m.checkClean(t, 10*time.Second)
	})
	t.Run("timeout-while-starting", func(t *testing.T) {
		r := run(t, opts{args: append([]string{"--timeout", "1"}, ghostArgs...), env: []string{"HOME=" + ghostHome}})
		expectCode(t, r, 124)
		expectFaster(t, r, 2*time.Second)
		expectContains(t, "stderr", r.stderr, "prun: job timed out after 1s while the other nodes' daemons started; no rank had started\n")
		m.checkClean(t, 10*time.Second)
	})
}

// listeners are the TCP listeners of prun processes that other nodes can
// reach: the launcher's (pid) in this namespace, and the daemons' on the
// hosts, as addresses to dial.
func (m *mn) listeners(t *testing.T, launcher int) []string {
	t.Helper()
	var out []string
	parse := func(ss []byte, ip string, want func(pid int) bool) {
		for _, l := range strings.Split(string(ss), "\n") {
			f := strings.Fields(l)
			if len(f) < 6 || !strings.Contains(l, `"prun"`) {
				continue
			}
			i := strings.Index(l, "pid=")
			pid, _ := strconv.Atoi(strings.FieldsFunc(l[i+4:], func(r rune) bool { return r < '0' || r > '9' })[0])
			if !want(pid) {
				continue
			}
			local := f[3]
			host, port := local[:strings.LastIndexByte(local, ':')], local[strings.LastIndexByte(local, ':')+1:]
			if host == "127.0.0.1" || host == "[::1]" {
				// libpmix's own listener for the node's ranks and tools
				// (PMIx 4 clients connect over loopback TCP; libpmix
				// authenticates them): not reachable from the network.
				continue
			}
			// A vertex listens on each address it advertises, all on one
			// port: one address to dial per listener.
			if a := net.JoinHostPort(ip, port); !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	ss, err := exec.Command("ss", "-ltnpH").Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	parse(ss, cluster.LauncherAddr, func(pid int) bool { return pid == launcher })
	for _, h := range m.hosts {
		ss, err := m.c.InNetns(h, "ss", "-ltnpH").Output()
		if err != nil {
			t.Fatalf("ss on %s: %v", h, err)
		}
		parse(ss, m.c.Addr(h), func(int) bool { return true })
	}
	return out
}

// procCount is the number of processes on all hosts.
func (m *mn) procCount() int {
	n := 0
	for _, h := range m.hosts {
		n += len(netnsPids(h))
	}
	return n
}

// daemonPid finds the pid of prun's daemon on host.
func (m *mn) daemonPid(t *testing.T, host string) int {
	t.Helper()
	pid := m.daemonPidOrZero(host)
	if pid == 0 {
		t.Fatalf("no prun daemon runs on %s", host)
	}
	return pid
}

func (m *mn) daemonPidOrZero(host string) int {
	for _, pid := range netnsPids(host) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.HasSuffix(string(cmdline), "\x00daemon\x00--ctl\x00") {
			return pid
		}
	}
	return 0
}

// netnsPids lists the processes of a test host's network namespace.
func netnsPids(host string) []int {
	out, _ := exec.Command("ip", "netns", "pids", host).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// vmHWM is a process's peak resident set in bytes (0 if unknown).
func vmHWM(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// endless is a stdin that never ends ("y\n" forever), counting what was read.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = "y\n"[i%2]
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

// freePorts returns n distinct TCP ports the kernel has just given out on
// every address of this machine, released again for the caller to use: a
// test that needs ports it names picks them this way, never fixed numbers.
func freePorts(t *testing.T, n int) map[int]bool {
	t.Helper()
	ports := map[int]bool{}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		ports[l.Addr().(*net.TCPAddr).Port] = true
	}
	return ports
}
