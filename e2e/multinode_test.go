package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"prun/ctl"
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

	t.Run("hostname", func(t *testing.T) {
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", "hostname"}})
		expectCode(t, r, 0)
		t.Logf("took %v", r.dur)
		got := lines(r.stdout)
		sort.Strings(got)
		want := []string{"prun-h1", "prun-h1", "prun-h2", "prun-h2", "prun-h3", "prun-h3", "prun-h4", "prun-h4"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("hostnames %q, want %q\n%s", got, want, r)
		}
	})

	// Each node's daemon runs with prun's wide timer slack, its ranks with
	// the slack the daemon was started with (sshd's session's: the
	// default). Read once the node's forks are done: a fork runs with the
	// original slack on its thread, which may be the daemon's main one.
	t.Run("timerslack", func(t *testing.T) {
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
	})

	// -membind reaches the other nodes' ranks: the plan carries each
	// rank's NUMA nodes, and its daemon sets the policy for the fork.
	t.Run("membind", func(t *testing.T) {
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
	})

	// --max-restarts on the other nodes: each daemon starts its failed
	// rank again, and the launcher hears of it.
	t.Run("max-restarts", func(t *testing.T) {
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
	})

	// A debugger that starts prun (--debug) finds the other nodes' ranks in
	// the MPIR table too, each held in PMIx_Init until it lets prun go on.
	t.Run("mpir", func(t *testing.T) {
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
	})

	// --output-proctable names every rank's node and pid, the remote ones
	// included, as each rank sees itself.
	t.Run("output-proctable", func(t *testing.T) {
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
	})

	// --debug-daemons shows what the other nodes' daemons write to stderr
	// (here their PMIx traces), each line prefixed by the node's name.
	t.Run("debug-daemons", func(t *testing.T) {
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
	})

	t.Run("modex", func(t *testing.T) {
		bin := ctest.Build(t, ctest.PMIx, "modex.c")
		for _, mode := range []string{"collect", "direct"} {
			t.Run(mode, func(t *testing.T) {
				r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", "-x", "MODEX_MODE=" + mode, bin}})
				expectCode(t, r, 0)
				for i := 0; i < 8; i++ {
					expectContains(t, "stdout", r.stdout, fmt.Sprintf("modex: rank %d on %s ok (7 peers, next on %s)", i,
						m.hosts[i/2], m.hosts[(i+1)%8/2]))
				}
			})
		}
	})

	// A user's interface exclude list replaces prun's include default
	// (Open MPI refuses the two together: it failed before).
	t.Run("ompi-tcp-exclude", func(t *testing.T) {
		dir, ring := ompi(t, "ring.c")
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--mca", "btl_tcp_if_exclude", "lo",
			"--mca", "btl", "tcp,self", "-n", "4", "--map-by", "node", ring}, dir: dir})
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, "ring: 4 ranks, 10 laps, sum ok\n")
	})

	// Ring and MPMD with each MPI; the first app of the MPMD job has first
	// ranks (3 with Open MPI, 2 with MPICH), so apps straddle hosts.
	for _, mpi := range []struct {
		name  string
		build func(*testing.T, string) (string, string)
		first int
	}{{"ompi", ompi, 3}, {"mpich", mpich, 2}} {
		t.Run(mpi.name+"-ring", func(t *testing.T) {
			dir, ring := mpi.build(t, "ring.c")
			r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", ring}, dir: dir})
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "ring: 8 ranks, 10 laps, sum ok\n")
		})
		t.Run(mpi.name+"-mpmd", func(t *testing.T) {
			dir, mpmd := mpi.build(t, "mpmd.c")
			appnums := make([]string, 8)
			for i := range appnums {
				appnums[i] = map[bool]string{true: "0", false: "1"}[i < mpi.first]
			}
			exp := strings.Join(appnums, ",")
			r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", strconv.Itoa(mpi.first), mpmd, exp, ":",
				"-n", strconv.Itoa(8 - mpi.first), mpmd, exp}, dir: dir})
			expectCode(t, r, 0)
			for i, a := range appnums {
				expectContains(t, "stdout", r.stdout, fmt.Sprintf("mpmd: rank %d appnum %s\n", i, a))
			}
		})
	}

	// mpirun's per-context --host: each app on its own hosts of the
	// hostfile (Open MPI hello prints where it runs).
	t.Run("per-context-hosts", func(t *testing.T) {
		dir, hello := ompi(t, "hello.c")
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "1", "-H", "prun-h4", hello, ":",
			"-n", "3", "-H", "prun-h2,prun-h3", hello}, dir: dir})
		expectCode(t, r, 0)
		for _, want := range []string{"hello from rank 0 of 4 on prun-h4 (app 0)", "hello from rank 1 of 4 on prun-h2 (app 1)",
			"hello from rank 2 of 4 on prun-h2 (app 1)", "hello from rank 3 of 4 on prun-h3 (app 1)"} {
			expectContains(t, "stdout", r.stdout, want)
		}
		r = m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "1", "hostname", ":", "-n", "1", "-H", "prun-h9", "hostname"}})
		expectCode(t, r, 2)
		expectContains(t, "stderr", r.stderr, "host prun-h9 is not in the allocation")
	})

	// The launcher's environment on other nodes: the MPI libraries'
	// settings (as mpirun forwards them), or with Hydra's -genvall (or
	// HYDRA_ENV=all) all of it but the launcher's host's own.
	t.Run("genvall", func(t *testing.T) {
		show := []string{"sh", "-c", `echo "$(hostname) [$GENVALL_FOO] [$OMPI_MCA_prun_test] [$HOSTNAME]"`}
		for _, c := range []struct {
			flags []string
			env   string
			want  string
		}{
			{nil, "", "[] [x]"},
			{[]string{"-genvall"}, "", "[bar] [x]"},
			{nil, "HYDRA_ENV=all", "[bar] [x]"},
		} {
			args := append(append([]string{"--hostfile", m.hostfile}, c.flags...), "-n", "8")
			env := []string{"GENVALL_FOO=bar", "OMPI_MCA_prun_test=x", "HOSTNAME=launcher"}
			if c.env != "" {
				env = append(env, c.env)
			}
			r := m.run(t, opts{args: append(args, show...), env: env})
			expectCode(t, r, 0)
			for _, h := range m.hosts {
				// a rank's HOSTNAME is its node's login shell's, if any, never the launcher's
				if want := h + " " + c.want; !strings.Contains(r.stdout, want) {
					t.Errorf("%v %s: no %q in\n%s", c.flags, c.env, want, r.stdout)
				}
			}
			if strings.Contains(r.stdout, "[launcher]") {
				t.Errorf("%v %s: the launcher's HOSTNAME reached another node\n%s", c.flags, c.env, r.stdout)
			}
		}
	})

	// mpirun's per-context --hostfile: each app on its own file's hosts,
	// the job on all of them.
	t.Run("per-context-hostfiles", func(t *testing.T) {
		dir, hello := ompi(t, "hello.c")
		h4, h23 := filepath.Join(t.TempDir(), "h4"), filepath.Join(t.TempDir(), "h23")
		if err := os.WriteFile(h4, []byte("prun-h4 slots=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h23, []byte("prun-h2\nprun-h3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// (rank 3 would go to prun-h3's second slot if its app were not kept
		// on prun-h4); -f, Hydra's spelling, the same
		for _, f := range []string{"--hostfile", "-f"} {
			r := m.run(t, opts{args: []string{f, h23, "-n", "3", hello, ":", f, h4, "-n", "1", hello}, dir: dir})
			expectCode(t, r, 0)
			for _, want := range []string{"hello from rank 0 of 4 on prun-h2 (app 0)", "hello from rank 1 of 4 on prun-h2 (app 0)",
				"hello from rank 2 of 4 on prun-h3 (app 0)", "hello from rank 3 of 4 on prun-h4 (app 1)"} {
				expectContains(t, "stdout", r.stdout, want)
			}
		}
		r := m.run(t, opts{args: []string{"-n", "1", "hostname", ":", "--hostfile", h23, "-H", "prun-h4", "-n", "1", "hostname"}})
		expectCode(t, r, 2)
		expectContains(t, "stderr", r.stderr, "--host within its hostfile "+h23+": host prun-h4 is not in the allocation")
	})

	// MPI_Comm_spawn's "host" info (PMIX_HOST): the children start on the
	// host named, not on the next free slots.
	t.Run("ompi-spawn-host", func(t *testing.T) {
		dir, prog := ompi(t, "spawn.c")
		expectSpawnedOn(t, m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "2", prog, "2", "prun-h4"}, dir: dir,
			timeout: 20 * time.Second}), "prun-h1", "prun-h4")
	})

	t.Run("ompi-spawn-multiple", func(t *testing.T) {
		m.spawnMultiple(t, ompi)
	})

	// Open MPI's connect/accept between hosts: the name service is the
	// launcher's, the connect a collective of two nodes' servers.
	t.Run("ompi-connect", func(t *testing.T) {
		dir, prog := ompi(t, "connect.c")
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "4", prog}, dir: dir})
		expectCode(t, r, 0)
		for i := 1; i < 4; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("connect: client %d got %d\n", i, i*10))
		}
	})

	// MPICH built with ch3, a PMI-1 and a PMI-2 client (testdata/mpich-ch3.sh):
	// a ring over TCP between hosts (PMI-2's fences cross the daemons), a
	// spawn whose children start on the next host, connect/accept by a
	// published name with every rank on a host of its own.
	for _, tc := range []ctest.Toolchain{ctest.MPICHCh3, ctest.MPICHCh3PMI2} {
		build := func(t *testing.T, src string) (string, string) { return built(t, tc, src) }

		t.Run(tc.String()+"-ring", func(t *testing.T) {
			dir, ring := build(t, "ring.c")
			r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", ring}, dir: dir})
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "ring: 8 ranks, 10 laps, sum ok\n")
		})
		t.Run(tc.String()+"-spawn", func(t *testing.T) {
			dir, prog := build(t, "spawn.c")
			r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--tag-output", "-n", "2", prog, "2"}, dir: dir, timeout: 20 * time.Second})
			expectSpawned(t, r)
		})
		t.Run(tc.String()+"-spawn-host", func(t *testing.T) {
			dir, prog := build(t, "spawn.c")
			expectSpawnedOn(t, m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "2", prog, "2", "prun-h3"}, dir: dir,
				timeout: 20 * time.Second}), "prun-h1", "prun-h3")
		})
		t.Run(tc.String()+"-spawn-multiple", func(t *testing.T) {
			m.spawnMultiple(t, build)
		})
		t.Run(tc.String()+"-abort", func(t *testing.T) {
			// Rank 1 on prun-h2: its daemon hears the abort before the exit.
			dir, prog := build(t, "abort.c")
			r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "4", prog}, dir: dir})
			expectCode(t, r, 17)
			expectContains(t, "stderr", r.stderr, "rank 1 ("+prog+") on prun-h2 called abort with status 17")
		})
		t.Run(tc.String()+"-nameserver-connect", func(t *testing.T) {
			// Two launches, a server on prun-h2 and clients on prun-h3 and
			// prun-h4, meet through hydra_nameserver (reached by the
			// launchers only: the daemons ask them) and connect host to host.
			ns := ctest.HydraNameserver(t)
			dir, prog := build(t, "nsconnect.c")
			svc := "mn-" + tc.String()
			p := startPrun(t, opts{args: []string{"-nameserver", ns, "--hostfile", m.hostfile, "-H", "prun-h2", "-n", "1", prog, "server", svc},
				env: m.env(), dir: dir})
			r := m.run(t, opts{args: []string{"-nameserver", ns, "--hostfile", m.hostfile, "-H", "prun-h3,prun-h4", "--map-by", "node", "-n", "2",
				prog, "client", svc}, dir: dir})
			expectConnected(t, r, p.wait())
			m.checkClean(t, 10*time.Second)
		})
		t.Run(tc.String()+"-connect", func(t *testing.T) {
			dir, prog := build(t, "connect.c")
			r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "4", prog}, dir: dir})
			expectCode(t, r, 0)
			for i := 1; i < 4; i++ {
				expectContains(t, "stdout", r.stdout, fmt.Sprintf("connect: client %d got %d\n", i, i*10))
			}
		})
	}

	// -pmi-port on every node: each daemon serves its ranks at its own port.
	t.Run("mpich-pmi-port", func(t *testing.T) {
		dir, ring := mpich(t, "ring.c")
		r := m.run(t, opts{args: []string{"-pmi-port", "--hostfile", m.hostfile, "-n", "8", ring}, dir: dir})
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, "ring: 8 ranks, 10 laps, sum ok\n")
	})

	t.Run("pmi1-kvs", func(t *testing.T) {
		bin := ctest.Build(t, ctest.Plain, "pmi1kvs.c")
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", bin, "20", "2"}})
		expectCode(t, r, 0)
		for i := 0; i < 8; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("pmi1kvs: rank %d ok\n", i))
		}
	})

	t.Run("abort", func(t *testing.T) {
		dir, abort := ompi(t, "abort.c")
		// rank 5 runs on prun-h3.
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", abort, "5", "17"}, dir: dir})
		expectCode(t, r, 17)
		expectContains(t, "stderr", r.stderr, "rank 5 (./abort) on prun-h3 called abort with status 17")
		expectFaster(t, r, 10*time.Second)
	})

	t.Run("exit-code", func(t *testing.T) {
		script := writeScript(t, t.TempDir(), "exit.sh", `[ "$PRUN_RANK" = 6 ] && exit 3
exec sleep 30
`)
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", script}})
		expectCode(t, r, 3)
		expectContains(t, "stderr", r.stderr, "rank 6 ("+script+") on prun-h4")
		expectContains(t, "stderr", r.stderr, "exited with status 3")
		expectFaster(t, r, 10*time.Second)
	})

	t.Run("ompi-spawn", func(t *testing.T) {
		// The parents fill prun-h1; the children go to the next free slots.
		dir, prog := ompi(t, "spawn.c")
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "2", prog, "2"}, dir: dir, timeout: 20 * time.Second})
		expectCode(t, r, 0)
		for _, want := range []string{"spawn: parent 0 of 2: merged sum 4", "spawn: parent 1 of 2: merged sum 4",
			"spawn: child 0 of 2: merged sum 4", "spawn: child 1 of 2: merged sum 4"} {
			expectContains(t, "stdout", r.stdout, want)
		}
	})

	t.Run("stdin", func(t *testing.T) {
		// Rank 0 runs on prun-h1: the launcher's stdin travels the control plane.
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "3", "sh", "-c", `cat; echo "$PRUN_RANK done"`},
			stdin: strings.NewReader("line one\nline two\n")})
		expectCode(t, r, 0)
		got := lines(r.stdout)
		sort.Strings(got)
		want := []string{"0 done", "1 done", "2 done", "line one", "line two"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("stdout %q, want %q (any order)\n%s", got, want, r)
		}
	})

	t.Run("stdin-window", func(t *testing.T) {
		// The launcher's stdin is endless and the only rank, on prun-h2,
		// reads nothing for 2 s: the launcher must stop reading at the
		// node's window instead of piling the stream up on the node.
		// The rank waits for the sample (its file), however late a busy
		// machine takes it.
		in := &endless{}
		goFile := filepath.Join(t.TempDir(), "go")
		type sample struct{ read, hwm int64 }
		got := make(chan sample, 1)
		go func() {
			defer os.WriteFile(goFile, nil, 0o644)
			pid := 0
			for deadline := time.Now().Add(30 * time.Second); pid == 0 && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
				pid = m.daemonPidOrZero("prun-h2")
			}
			time.Sleep(1500 * time.Millisecond) // the launcher reads what it will
			var hwm int64
			if pid > 0 {
				hwm = vmHWM(pid)
			}
			got <- sample{in.n.Load(), hwm}
		}()
		r := m.run(t, opts{args: []string{"--host", "prun-h2", "-n", "1", "sh", "-c",
			fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.1; done; head -c 5000000 >/dev/null && echo took 5 MB`, goFile)}, stdin: in})
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, "took 5 MB\n")
		s := <-got
		t.Logf("1.5 s after the daemon started: the launcher had read %d bytes of stdin, prun-h2's daemon peak RSS %d MiB", s.read, s.hwm>>20)
		if s.read > 4<<20 {
			t.Errorf("the launcher read %d bytes of stdin while the rank read none; want at most a window (1 MiB) and buffers", s.read)
		}
		if s.hwm == 0 || s.hwm > 64<<20 {
			t.Errorf("prun-h2's daemon peak RSS %d bytes while the rank read nothing; want (0, 64 MiB]", s.hwm)
		}
		if n := in.n.Load(); n < 5000000 {
			t.Errorf("the launcher read only %d bytes of stdin; the rank took 5000000", n)
		}
	})

	t.Run("stdin-reader-gone", func(t *testing.T) {
		// --stdin all across two hosts; the rank on prun-h1 exits at once:
		// its node must stop holding the input back, or prun-h2's rank never
		// gets past the first window (1 MiB) and the job hangs.
		in := bytes.Repeat([]byte("0123456789abcdef\n"), 300000) // 5.1 MB
		r := m.run(t, opts{args: []string{"--host", "prun-h1,prun-h2", "-n", "2", "--map-by", "node", "--stdin", "all",
			"sh", "-c", `[ "$PRUN_RANK" = 0 ] && exit 0; wc -c`}, stdin: bytes.NewReader(in), timeout: 30 * time.Second})
		expectCode(t, r, 0)
		if got := strings.TrimSpace(r.stdout); got != strconv.Itoa(len(in)) {
			t.Errorf("the rank on prun-h2 read %q bytes, want %d\n%s", got, len(in), r)
		}
	})

	// -s and --preload-files where the hosts do not see the program or the
	// file: each node runs a copy of the program from its session directory
	// and finds the file in the working directory (shared here, so the
	// nodes place it at once), which holds none of it after the job. Both
	// are larger than a control message (16 MiB): they travel in chunks.
	t.Run("preload", func(t *testing.T) {
		dir := c.LauncherOnly()
		// The shell stops at exit; the padding makes the program 12 MiB.
		app := filepath.Join(dir, "preloaded.sh")
		script := "#!/bin/sh\n" + `echo "$(hostname) $0 $(cat data.txt) $(cksum <big.bin)"` + "\nexit 0\n"
		pad := strings.Repeat("# "+strings.Repeat("x", 97)+"\n", 12<<20/100)
		if err := os.WriteFile(app, []byte(script+pad), 0o755); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, "data.txt")
		if err := os.WriteFile(data, []byte("payload\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		big := filepath.Join(dir, "big.bin")
		rnd := make([]byte, 20<<20+12345)
		rand.NewChaCha8([32]byte{1}).Read(rnd)
		if err := os.WriteFile(big, rnd, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(app)
		defer os.Remove(data)
		defer os.Remove(big)
		sum, err := exec.Command("sh", "-c", "cksum <"+big).Output()
		if err != nil {
			t.Fatal(err)
		}
		wdir := t.TempDir()
		r := m.run(t, opts{args: []string{"-s", "--preload-files", data + "," + big, "--wdir", wdir,
			"--hostfile", m.hostfile, "-n", "4", "--map-by", "node", app}})
		expectCode(t, r, 0)
		for i, l := range linePerHost(t, r, 4) {
			f := strings.Fields(l)
			if len(f) != 5 || f[0] != m.hosts[i] || !strings.HasPrefix(f[1], c.TmpDir(m.hosts[i])) ||
				!strings.HasSuffix(f[1], "preloaded.sh") || f[2] != "payload" || f[3]+" "+f[4] != strings.TrimSpace(string(sum)) {
				t.Errorf("rank on %s: %q; want the program run from a copy in that host's $TMPDIR (%s) reading the files sent (cksum %s)",
					m.hosts[i], l, c.TmpDir(m.hosts[i]), strings.TrimSpace(string(sum)))
			}
		}
		if ents, _ := os.ReadDir(wdir); len(ents) != 0 {
			t.Errorf("the working directory holds %v after the job; want nothing", ents)
		}
	})

	// A preload that takes longer than the job's --timeout (a sparse 1 GiB
	// file: nothing to write here, a gigabyte for each host to store) is
	// given up at the deadline, or at Ctrl-C: no rank starts, nothing stays
	// on the hosts.
	t.Run("preload-timeout", func(t *testing.T) {
		big := filepath.Join(c.LauncherOnly(), "sparse.bin")
		f, err := os.Create(big)
		if err == nil {
			err = f.Truncate(1 << 30)
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(big)
		started := filepath.Join(t.TempDir(), "started")
		r := m.run(t, opts{args: []string{"--timeout", "1", "--preload-files", big, "--hostfile", m.hostfile, "-n", "4", "--map-by", "node",
			"touch", started}})
		expectCode(t, r, 124)
		if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], "timed out after 1s while the preloaded files were sent; no rank had started") {
			t.Errorf("stderr %q; want one line saying the preload timed out", r.stderr)
		}
		if r.dur > 3*time.Second { // sending it all takes much longer
			t.Errorf("prun took %v to give up a preload at its 1 s timeout", r.dur)
		}
		if testing.Verbose() {
			t.Logf("gave up after %v", r.dur)
		}
		if _, err := os.Stat(started); err == nil {
			t.Error("a rank ran")
		}

		// Ctrl-C while sending gives it up as well, at once.
		p := startPrun(t, opts{args: []string{"--preload-files", big, "--hostfile", m.hostfile, "-n", "4", "--map-by", "node",
			"touch", started}, env: m.env()})
		m.waitStaging(t, 10*time.Second) // not a fixed wait: daemons start slower on a busy machine
		sent := time.Now()
		p.signal(syscall.SIGINT)
		r = p.wait()
		expectCode(t, r, 130)
		if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], "received SIGINT while the preloaded files were sent; no rank had started") {
			t.Errorf("stderr %q; want one line saying the preload was interrupted", r.stderr)
		}
		if d := time.Since(sent); d > 2*time.Second {
			t.Errorf("prun took %v to give up a preload at SIGINT", d)
		}
		if _, err := os.Stat(started); err == nil {
			t.Error("a rank ran")
		}
		m.checkClean(t, 10*time.Second)
	})

	t.Run("copy-prun", func(t *testing.T) {
		// prun where the hosts do not have it: the launcher sends itself to
		// its child, each daemon to its own (a chain), and each session
		// removes its copy at the end (m.run checks that nothing is left).
		bin := filepath.Join(c.LauncherOnly(), "prun")
		copyFile(t, prunBin, bin)
		defer os.Remove(bin)
		copyFile(t, filepath.Join(filepath.Dir(prunBin), "prun-ssh"), filepath.Join(c.LauncherOnly(), "prun-ssh"))
		defer os.Remove(filepath.Join(c.LauncherOnly(), "prun-ssh"))
		r := m.run(t, opts{bin: bin, args: []string{"--launch-fanout", "1", "--hostfile", m.hostfile, "-n", "4", "--map-by", "node",
			"sh", "-c", `echo "$(hostname) $(readlink /proc/$PPID/exe)"`}})
		expectCode(t, r, 0)
		for i, l := range linePerHost(t, r, 4) {
			host, exe, _ := strings.Cut(l, " ")
			if host != m.hosts[i] || !strings.Contains(exe, "/prun.bin.") || !strings.HasPrefix(exe, c.TmpDir(host)) {
				t.Errorf("rank on %s ran under daemon %q; want a copy in that host's $TMPDIR (%s)", host, exe, c.TmpDir(host))
			}
		}
	})

	t.Run("copy-prun-fails", func(t *testing.T) {
		// prun-h3 cannot take the copy (its $TMPDIR is gone): one line
		// naming it and why, and nothing left on the others.
		bin := filepath.Join(c.LauncherOnly(), "prun")
		copyFile(t, prunBin, bin)
		defer os.Remove(bin)
		copyFile(t, filepath.Join(filepath.Dir(prunBin), "prun-ssh"), filepath.Join(c.LauncherOnly(), "prun-ssh"))
		defer os.Remove(filepath.Join(c.LauncherOnly(), "prun-ssh"))
		tmp := c.TmpDir("prun-h3")
		if err := os.Rename(tmp, tmp+".away"); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(tmp+".away", tmp)
		r := m.run(t, opts{bin: bin, args: []string{"--hostfile", m.hostfile, "-n", "4", "--map-by", "node", "true"}})
		if r.code == 0 {
			t.Fatalf("exit 0 without a daemon on prun-h3\n%s", r)
		}
		expectContains(t, "stderr", r.stderr, "prun-h3: "+bin+" not found there, and a copy of prun could not be stored there: mktemp:")
		if n := len(lines(r.stderr)); n != 1 {
			t.Errorf("stderr has %d lines, want 1\n%s", n, r)
		}
	})

	t.Run("rsh", func(t *testing.T) {
		r := m.run(t, opts{args: []string{"--rsh", "ssh -F " + c.SSHConfig(), "--hostfile", m.hostfile, "-n", "4", "hostname"}})
		expectCode(t, r, 0)
		got := lines(r.stdout)
		sort.Strings(got)
		if strings.Join(got, " ") != "prun-h1 prun-h1 prun-h2 prun-h2" {
			t.Errorf("hostnames %q\n%s", got, r)
		}
	})

	t.Run("if-include", func(t *testing.T) {
		dir, ring := ompi(t, "ring.c")
		for _, net := range []string{cluster.Network, "prunbr0"} {
			r := m.run(t, opts{args: []string{"--if-include", net, "--hostfile", m.hostfile, "-n", "8", ring}, dir: dir})
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "ring: 8 ranks, 10 laps, sum ok\n")
		}
		r := m.run(t, opts{args: []string{"--if-include", "203.0.113.0/24", "--hostfile", m.hostfile, "-n", "8", "true"}})
		expectCode(t, r, 1)
		expectContains(t, "stderr", r.stderr, "prun: --if-include 203.0.113.0/24: no address of this node is in that network")
	})

	t.Run("topology-reported", func(t *testing.T) {
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
	})

	t.Run("tree", func(t *testing.T) {
		// Fanout 1: a chain launcher -> h1 -> h2 -> h3 -> h4; everything
		// for h4 is relayed by three daemons.
		bin := ctest.Build(t, ctest.PMIx, "modex.c")
		r := m.run(t, opts{args: []string{"--launch-fanout", "1", "--hostfile", m.hostfile, "-n", "8", "-x", "MODEX_MODE=direct", bin}})
		expectCode(t, r, 0)
		for i := 0; i < 8; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("modex: rank %d on %s ok", i, m.hosts[i/2]))
		}
	})

	t.Run("timeout", func(t *testing.T) {
		r := m.run(t, opts{args: []string{"--timeout", "2", "--report-state-on-timeout", "--hostfile", m.hostfile, "-n", "8", "sleep", "30"}})
		expectCode(t, r, 124)
		expectContains(t, "stderr", r.stderr, "job timed out after 2s; killing 8 running ranks")
		expectContains(t, "stderr", r.stderr, "7 (pid ")
		expectContains(t, "stderr", r.stderr, " on prun-h4)")
		// The state of a rank on another node, read there.
		expectContains(t, "stderr", r.stderr, "rank 7 (sleep) on prun-h4, pid ")
		expectFaster(t, r, 8*time.Second)
	})

	// A job that waits on every host, for the failure tests.
	waiter := writeScript(t, t.TempDir(), "wait.sh", `echo "ready $PRUN_RANK on $(hostname)"
exec sleep 60
`)
	startWaiter := func(t *testing.T, extra ...string) *proc {
		args := append(append([]string{"--hostfile", m.hostfile}, extra...), "-n", "8", waiter)
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
	killDaemon := func(t *testing.T, host string) {
		p := startWaiter(t)
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

	t.Run("link-over-ssh", func(t *testing.T) {
		// Hosts that cannot open a connection to their parent (a firewall,
		// a jump host): prun-h2 may not connect to the launcher, prun-h3
		// not to prun-h2 (its parent in a chain). Their daemons run their
		// links over the SSH session that started them. The rule refuses
		// connections from ephemeral ports only: SSH's replies (port 22)
		// still flow.
		block := func(host, to string) func() {
			rule := []string{"rule", "add", "to", to, "ipproto", "tcp", "sport", "1024-65534", "prohibit"}
			if out, err := c.InNetns(host, append([]string{"ip"}, rule...)...).CombinedOutput(); err != nil {
				t.Fatalf("%s: ip %v: %v: %s", host, rule, err, out)
			}
			return func() {
				rule[1] = "del"
				c.InNetns(host, append([]string{"ip"}, rule...)...).Run()
			}
		}
		defer block("prun-h2", cluster.LauncherAddr)()
		defer block("prun-h3", c.Addr("prun-h2"))()
		bin := ctest.Build(t, ctest.PMIx, "modex.c")
		for _, fanout := range []string{"32", "1"} {
			r := m.run(t, opts{args: []string{"--launch-fanout", fanout, "--hostfile", m.hostfile, "-n", "8", "-x", "MODEX_MODE=direct", bin}})
			expectCode(t, r, 0)
			for i := 0; i < 8; i++ {
				expectContains(t, "stdout", r.stdout, fmt.Sprintf("modex: rank %d on %s ok", i, m.hosts[i/2]))
			}
		}
		// A daemon killed behind such a link is noticed at once.
		killDaemon(t, "prun-h2")
	})

	t.Run("ctrl-c", func(t *testing.T) {
		p := startWaiter(t)
		sent := time.Now()
		p.signal(syscall.SIGINT)
		r := p.wait()
		expectCode(t, r, 130)
		if d := time.Since(sent); d > 5*time.Second {
			t.Errorf("prun took %v after SIGINT", d)
		}
		expectContains(t, "stderr", r.stderr, "forwarding it to 8 ranks")
		m.checkClean(t, 10*time.Second)
	})

	t.Run("daemon-killed", func(t *testing.T) { killDaemon(t, "prun-h3") })

	t.Run("link-down", func(t *testing.T) {
		p := startWaiter(t)
		cut := time.Now()
		if out, err := c.InNetns("prun-h2", "ip", "link", "set", "eth0", "down").CombinedOutput(); err != nil {
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
		if out, err := c.InNetns("prun-h2", "ip", "link", "set", "eth0", "up").CombinedOutput(); err != nil {
			t.Fatalf("link up: %v: %s", err, out)
		}
		expectContains(t, "stderr", r.stderr, "lost node prun-h2")
		m.checkClean(t, 10*time.Second)
	})

	t.Run("relay-killed", func(t *testing.T) {
		// In a chain, killing h2's daemon cuts h3 and h4 off as well: all
		// of it goes, and prun names the node it lost.
		p := startWaiter(t, "--launch-fanout", "1")
		syscall.Kill(m.daemonPid(t, "prun-h2"), syscall.SIGKILL)
		r := p.wait()
		if r.code == 0 || r.code == -1 {
			t.Errorf("prun exited %d, want a failure status\n%s", r.code, r)
		}
		expectContains(t, "stderr", r.stderr, "lost node prun-h2")
		m.checkClean(t, 10*time.Second)
	})

	t.Run("listeners-refuse", func(t *testing.T) {
		// Fanout 2: the launcher and prun-h1's daemon listen. Nothing that
		// does not prove the launch secret gets a frame through.
		p := startWaiter(t, "--launch-fanout", "2")
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
	})

	t.Run("frames-tampered", func(t *testing.T) {
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
	})

	t.Run("port-range", func(t *testing.T) {
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
		p := startPrun(t, opts{args: []string{"--hostfile", m.hostfile, "--launch-fanout", "2", "-n", "8", waiter},
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
	})

	// A rank's daemon (testdata/daemonize.c: fork, setsid, fork) ends with
	// the job on every node: these hosts, in network namespaces entered
	// with `ip netns exec`, see no cgroup file system, so each daemon finds
	// what its job left by PRUN_SESSION and PRUN_NSPACE in its environment.
	// Also when the launcher is SIGKILLed: each daemon, its link lost, ends
	// its job.
	daemonize := ctest.Build(t, ctest.Plain, "daemonize.c")
	t.Run("daemonized", func(t *testing.T) {
		r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "8", daemonize}})
		expectCode(t, r, 0)
		expectGone(t, daemonPids(t, r.stdout, 8), 0, "daemonized")
	})
	t.Run("daemonized-launcher-killed", func(t *testing.T) {
		p := startPrun(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "4", daemonize, ":",
			"-n", "4", "sleep", "600"}, env: m.env(), allowZombieRanks: true, skipTmpCheck: true})
		p.stdout.waitFor(func(s string) bool { return strings.Count(s, "daemon ") == 4 }, 20*time.Second)
		pids := daemonPids(t, p.stdout.String(), 4)
		p.signal(syscall.SIGKILL)
		p.wait()
		m.checkClean(t, 10*time.Second)
		expectGone(t, pids, 0, "launcher killed")
	})

	t.Run("launcher-killed", func(t *testing.T) {
		p := startWaiter(t)
		// The launcher's own session directory (on this machine, not a
		// test host) is the next prun's to remove, as on one node.
		p.o.allowZombieRanks, p.o.skipTmpCheck = true, true
		killed := time.Now()
		p.signal(syscall.SIGKILL)
		p.wait()
		m.checkClean(t, 10*time.Second-time.Since(killed))
	})
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
