package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"prun/internal/ctest"
)

// TestMultiNode's subtests of MPI and PMI: Open MPI's and MPICH's jobs,
// spawns and connections, per-context hosts and environment.

func (m *mn) testModex(t *testing.T) {
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
}

// A user's interface exclude list replaces prun's include default
// (Open MPI refuses the two together: it failed before).
func (m *mn) testOmpiTcpExclude(t *testing.T) {
	dir, ring := ompi(t, "ring.c")
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--mca", "btl_tcp_if_exclude", "lo",
		"--mca", "btl", "tcp,self", "-n", "4", "--map-by", "node", ring}, dir: dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "ring: 4 ranks, 10 laps, sum ok\n")
}

// mnMPI is an MPI of the ring and MPMD tests: how to build a program, and
// how many ranks the first app of the MPMD job has.
type mnMPI struct {
	name  string
	build func(*testing.T, string) (string, string)
	first int
}

// mnMPIs: Open MPI's first app has 3 ranks, MPICH's 2, so apps straddle
// hosts.
var mnMPIs = []mnMPI{{"ompi", ompi, 3}, {"mpich", mpich, 2}}

// testMPI: ring and MPMD with mpi.
func (m *mn) testMPI(t *testing.T, mpi mnMPI) {
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
func (m *mn) testPerContextHosts(t *testing.T) {
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
}

// The launcher's environment on other nodes: the MPI libraries'
// settings (as mpirun forwards them), or with Hydra's -genvall (or
// HYDRA_ENV=all) all of it but the launcher's host's own.
func (m *mn) testGenvall(t *testing.T) {
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
}

// mpirun's per-context --hostfile: each app on its own file's hosts,
// the job on all of them.
func (m *mn) testPerContextHostfiles(t *testing.T) {
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
}

// MPI_Comm_spawn's "host" info (PMIX_HOST): the children start on the
// host named, not on the next free slots.
func (m *mn) testOmpiSpawnHost(t *testing.T) {
	dir, prog := ompi(t, "spawn.c")
	expectSpawnedOn(t, m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "2", prog, "2", "prun-h4"}, dir: dir,
		timeout: 20 * time.Second}), "prun-h1", "prun-h4")
}

func (m *mn) testOmpiSpawnMultiple(t *testing.T) {
	m.spawnMultiple(t, ompi)
}

// Open MPI's connect/accept between hosts: the name service is the
// launcher's, the connect a collective of two nodes' servers.
func (m *mn) testOmpiConnect(t *testing.T) {
	dir, prog := ompi(t, "connect.c")
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "-n", "4", prog}, dir: dir})
	expectCode(t, r, 0)
	for i := 1; i < 4; i++ {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("connect: client %d got %d\n", i, i*10))
	}
}

// testMPICHCh3: ring, spawns, abort and connections with MPICH's ch3
// client tc.
func (m *mn) testMPICHCh3(t *testing.T, tc ctest.Toolchain) {
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
func (m *mn) testMpichPmiPort(t *testing.T) {
	dir, ring := mpich(t, "ring.c")
	r := m.run(t, opts{args: []string{"-pmi-port", "--hostfile", m.hostfile, "-n", "8", ring}, dir: dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "ring: 8 ranks, 10 laps, sum ok\n")
}

func (m *mn) testPmi1Kvs(t *testing.T) {
	bin := ctest.Build(t, ctest.Plain, "pmi1kvs.c")
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", bin, "20", "2"}})
	expectCode(t, r, 0)
	for i := 0; i < 8; i++ {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("pmi1kvs: rank %d ok\n", i))
	}
}

func (m *mn) testAbort(t *testing.T) {
	dir, abort := ompi(t, "abort.c")
	// rank 5 runs on prun-h3.
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", abort, "5", "17"}, dir: dir})
	expectCode(t, r, 17)
	expectContains(t, "stderr", r.stderr, "rank 5 (./abort) on prun-h3 called abort with status 17")
	expectFaster(t, r, 10*time.Second)
}

func (m *mn) testExitCode(t *testing.T) {
	script := writeScript(t, t.TempDir(), "exit.sh", `[ "$PRUN_RANK" = 6 ] && exit 3
exec sleep 30
`)
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "8", script}})
	expectCode(t, r, 3)
	expectContains(t, "stderr", r.stderr, "rank 6 ("+script+") on prun-h4")
	expectContains(t, "stderr", r.stderr, "exited with status 3")
	expectFaster(t, r, 10*time.Second)
}

func (m *mn) testOmpiSpawn(t *testing.T) {
	// The parents fill prun-h1; the children go to the next free slots.
	dir, prog := ompi(t, "spawn.c")
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "2", prog, "2"}, dir: dir, timeout: 20 * time.Second})
	expectCode(t, r, 0)
	for _, want := range []string{"spawn: parent 0 of 2: merged sum 4", "spawn: parent 1 of 2: merged sum 4",
		"spawn: child 0 of 2: merged sum 4", "spawn: child 1 of 2: merged sum 4"} {
		expectContains(t, "stdout", r.stdout, want)
	}
}
