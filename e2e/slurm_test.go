package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"prun/internal/ctest"
	"prun/internal/slurmtest"
)

// slurmTest is what TestSlurm's subtests share: the Slurm cluster, and
// the environment and salloc to run prun in an allocation.
type slurmTest struct {
	sc        *slurmtest.Cluster
	env       []string
	sallocBin string
	// MPICH's ring, built in mpichDir
	mpichDir, mpichRing string
}

// TestSlurm runs prun inside allocations of a real Slurm cluster
// (internal/slurmtest: slurmctld and three slurmd prun-s1..3): the other
// nodes' daemons start as one srun step, slots come from the allocation,
// and the job's end, scancel and a failed node leave nothing behind.
func TestSlurm(t *testing.T) {
	if why := slurmtest.Available(); why != "" {
		t.Fatal("Slurm (make test installs it, as root): " + why)
	}
	ompiDir, ompiRing := ompi(t, "ring.c")
	mpichDir, mpichRing := mpich(t, "ring.c")
	sc := slurmtest.Start(t)
	x := &slurmTest{sc: sc, sallocBin: "/usr/bin/salloc", mpichDir: mpichDir, mpichRing: mpichRing,
		env: []string{"SLURM_CONF=" + sc.Conf(), "OMPI_MCA_btl_tcp_if_include=" + slurmtest.Network}}

	t.Run("hosts", x.testSlurmHosts)
	t.Run("step", x.testSlurmStep)
	for _, tc := range []struct{ name, dir, ring string }{{"ring-ompi", ompiDir, ompiRing}, {"ring-mpich", mpichDir, mpichRing}} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, opts{bin: x.sallocBin, args: x.salloc("-n", "6", tc.ring), env: x.env, dir: tc.dir})
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "ring: 6 ranks, 10 laps, sum ok\n")
		})
	}
	t.Run("oversubscribed", x.testSlurmOversubscribed)
	t.Run("sbatch", x.testSlurmSbatch)
	t.Run("in-step", x.testSlurmInStep)
	t.Run("host-select", x.testSlurmHostSelect)
	t.Run("spawn-ompi", x.testSlurmSpawnOmpi)
	t.Run("daemonized", x.testSlurmDaemonized)
	t.Run("timeout", x.testSlurmTimeout)
	t.Run("scancel", x.testSlurmScancel)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run("signal-"+unix.SignalName(sig), func(t *testing.T) {
			// Ctrl-C or a SIGTERM to prun: the job ends on every node, prun
			// exits 128+signal. salloc is the session's leader, as in a shell.
			p, _ := x.running(t)
			syscall.Kill(x.prunIn(t, p), sig)
			r := p.wait()
			expectCode(t, r, 128+int(sig))
			expectContains(t, "stderr", r.stderr, "prun: received "+unix.SignalName(sig))
		})
	}
	t.Run("prun-killed", x.testSlurmPrunKilled)
	t.Run("slurmd-killed", x.testSlurmSlurmdKilled)
}

// salloc is salloc's command line for 3 nodes, 2 tasks each, running
// prun with args.
func (x *slurmTest) salloc(args ...string) []string {
	return append([]string{"-N", "3", "--ntasks-per-node=2", prunBin}, args...)
}

// prunIn finds prun itself among salloc's processes (its session; the
// other nodes' daemons run under slurmstepd).
func (x *slurmTest) prunIn(t *testing.T, p *proc) int {
	for _, pi := range jobProcs(p.cmd.Process.Pid, p.mark) {
		if pi.comm == "prun" && pi.session == p.cmd.Process.Pid {
			return pi.pid
		}
	}
	t.Fatalf("no prun under salloc\n%s", p.stderr.String())
	return 0
}

// running starts `salloc ... prun -n 6 sleep 300` and waits for its ranks.
func (x *slurmTest) running(t *testing.T) (*proc, string) {
	p := startPrun(t, opts{bin: x.sallocBin, args: x.salloc("-n", "6", "sleep", "300"), env: x.env, timeout: 90 * time.Second})
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, pi := range jobProcs(p.cmd.Process.Pid, p.mark) {
			if pi.comm == "sleep" {
				n++
			}
		}
		if n == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("6 ranks not running after 30 s (%d)\n%s", n, p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	job, err := x.sc.Output("squeue", "-h", "-o", "%i")
	if err != nil || strings.TrimSpace(job) == "" {
		t.Fatalf("squeue: %q %v", job, err)
	}
	return p, strings.TrimSpace(job)
}

func (x *slurmTest) testSlurmHosts(t *testing.T) {
	r := run(t, opts{bin: x.sallocBin, args: x.salloc("-n", "6", "hostname"), env: x.env})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	if want := "prun-s1 prun-s1 prun-s2 prun-s2 prun-s3 prun-s3"; strings.Join(got, " ") != want {
		t.Errorf("salloc -N 3 --ntasks-per-node=2 prun -n 6 hostname: %q, want %s\n%s", got, want, r)
	}
}

func (x *slurmTest) testSlurmStep(t *testing.T) {
	// The daemons are one step of the job, no secret on their command
	// line or in the ranks' environment, no step variables of theirs.
	script := `echo "$SLURMD_NODENAME $SLURM_JOB_ID procid=${SLURM_PROCID-} step=${SLURM_STEP_ID-}"; ` +
		`echo secrets=$(env | grep -ci secret); for p in $(pgrep -f "prun daemon"); do tr '\0' ' ' </proc/$p/cmdline; echo; done`
	r := run(t, opts{bin: x.sallocBin, args: x.salloc("--map-by", "node", "-n", "3", "sh", "-c", script), env: x.env})
	expectCode(t, r, 0)
	if strings.Count(r.stdout, "secrets=0\n") != 3 {
		t.Errorf("a secret in the ranks' environment:\n%s", r.stdout)
	}
	for _, n := range slurmtest.Nodes[:3] {
		expectContains(t, "stdout", r.stdout, n+" ")
	}
	if strings.Contains(r.stdout, "procid=0") || regexp.MustCompile(`step=\d`).MatchString(r.stdout) {
		t.Errorf("the ranks see the daemons' step variables:\n%s", r.stdout)
	}
	if strings.Count(r.stdout, "prun daemon --ctl") < 2 {
		t.Errorf("no daemon seen on the other nodes:\n%s", r)
	}
}

func (x *slurmTest) testSlurmOversubscribed(t *testing.T) {
	// The allocation's slots are Slurm's: 6 of them, not the nodes' cores.
	r := run(t, opts{bin: x.sallocBin, args: x.salloc("-n", "7", "true"), env: x.env})
	if r.code == 0 {
		t.Errorf("-n 7 in 6 slots succeeded:\n%s", r)
	}
}

func (x *slurmTest) testSlurmSbatch(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	out := filepath.Join(dir, "out")
	script := writeScript(t, dir, "job.sh", fmt.Sprintf("#!/bin/sh\ncd %s && %s -n 6 %s\necho prun=$?\n", x.mpichDir, prunBin, x.mpichRing))
	r := run(t, opts{bin: "/usr/bin/sbatch", args: []string{"--wait", "-N", "3", "--ntasks-per-node=2", "-o", out, script}, env: x.env})
	b, _ := os.ReadFile(out)
	expectCode(t, r, 0)
	expectContains(t, "batch output", string(b), "ring: 6 ranks, 10 laps, sum ok\n")
	expectContains(t, "batch output", string(b), "prun=0\n")
}

func (x *slurmTest) testSlurmInStep(t *testing.T) {
	// prun inside a step of the job (SLURM_STEP_* set, and srun's
	// SLURM_TASKS_PER_NODE the step's): the step's nodes and tasks.
	script := fmt.Sprintf(`[ "$SLURM_PROCID" = 0 ] || exit 0; echo step=$SLURM_STEP_ID; exec %s --map-by node -n 2 hostname`, prunBin)
	r := run(t, opts{bin: x.sallocBin, args: []string{"-N", "3", "--ntasks-per-node=2", "srun", "-N", "2", "-n", "2", "sh", "-c", script}, env: x.env})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	if want := "prun-s1 prun-s2 step=0"; strings.Join(got, " ") != want {
		t.Errorf("prun -n 2 hostname in a step of 2 nodes: %q, want %s\n%s", got, want, r)
	}
}

func (x *slurmTest) testSlurmHostSelect(t *testing.T) {
	// --host selects within the allocation; a host outside it is refused.
	r := run(t, opts{bin: x.sallocBin, args: x.salloc("--host", "prun-s2,prun-s3", "--map-by", "node", "-n", "2", "hostname"), env: x.env})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	if want := "prun-s2 prun-s3"; strings.Join(got, " ") != want {
		t.Errorf("--host prun-s2,prun-s3: %q, want %s\n%s", got, want, r)
	}
	r = run(t, opts{bin: x.sallocBin, args: x.salloc("--host", "prun-s3,prun-h9", "-n", "2", "hostname"), env: x.env})
	if r.code == 0 || r.stdout != "" {
		t.Errorf("--host prun-s3,prun-h9 ran:\n%s", r)
	}
	expectContains(t, "stderr", r.stderr, "prun: --host within the slurm allocation: host prun-h9 is not in the allocation\n")
}

func (x *slurmTest) testSlurmSpawnOmpi(t *testing.T) {
	// MPI_Comm_spawn: the children go to the allocation's next free slots.
	dir, prog := ompi(t, "spawn.c")
	r := run(t, opts{bin: x.sallocBin, args: x.salloc("-n", "2", prog, "2"), env: x.env, dir: dir})
	expectCode(t, r, 0)
	for i := 0; i < 2; i++ {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("spawn: parent %d of 2: merged sum 4 ", i))
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("spawn: child %d of 2: merged sum 4 ", i))
	}
}

func (x *slurmTest) testSlurmDaemonized(t *testing.T) {
	// A rank's daemon (fork, setsid, fork), even one that clears its
	// environment, ends with the job on every node: the nodes' daemons
	// give each job a cgroup (this cluster's proctrack/linuxproc tracks
	// processes by their parents, and loses a daemon's).
	prog := ctest.Build(t, ctest.Plain, "daemonize.c")
	r := run(t, opts{bin: x.sallocBin, args: x.salloc("--map-by", "node", "-n", "6", prog, "clearenv"), env: x.env})
	expectCode(t, r, 0)
	expectGone(t, daemonPids(t, r.stdout, 6), 0, "slurm")
}

func (x *slurmTest) testSlurmTimeout(t *testing.T) {
	r := run(t, opts{bin: x.sallocBin, args: x.salloc("--timeout", "3", "-n", "6", "sleep", "300"), env: x.env})
	expectCode(t, r, 124)
	expectContains(t, "stderr", r.stderr, "prun: ")
	if r.dur > 30*time.Second {
		t.Errorf("--timeout 3 took %v", r.dur)
	}
}

func (x *slurmTest) testSlurmScancel(t *testing.T) {
	p, job := x.running(t)
	if _, err := x.sc.Output("scancel", job); err != nil {
		t.Fatal(err)
	}
	r := p.wait() // no process of the job left anywhere (the marker)
	if r.code == 0 {
		t.Errorf("scancel: exit 0\n%s", r)
	}
	expectContains(t, "stderr", r.stderr, "prun: lost node")
	expectContains(t, "stderr", r.stderr, "Slurm ended the daemons' step: Slurm's job "+job+" is CANCELLED")
}

func (x *slurmTest) testSlurmPrunKilled(t *testing.T) {
	// prun's own death (SIGKILL) inside a longer allocation: the
	// daemons see their links close and end, killing their ranks and
	// removing their session directories (srun, were it signalled, would
	// SIGKILL them first: spawn.Spawner.startStep), srun ends with its step,
	// and Slurm shows the step gone, while the allocation lives on.
	script := fmt.Sprintf("%s -n 6 sleep 300; echo prun=$?; exec sleep 60", prunBin)
	// prun cannot reap its srun nor remove its own session directory:
	// srun's zombie goes to the subreaper, the directory to the next
	// prun's cleanup (sessiondir). The daemons' are checked below.
	tmp := t.TempDir()
	p := startPrun(t, opts{bin: x.sallocBin, args: []string{"-N", "3", "--ntasks-per-node=2", "sh", "-c", script}, env: x.env,
		timeout: 120 * time.Second, tmpdir: tmp, allowZombieRanks: true, skipTmpCheck: true})
	waitSleeps := func(want int, within time.Duration) bool {
		for end := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
			n := 0
			for _, pi := range jobProcs(p.cmd.Process.Pid, p.mark) {
				if pi.comm == "sleep" && pi.session != p.cmd.Process.Pid {
					n++
				}
			}
			if n == want {
				return true
			}
			if time.Now().After(end) {
				t.Logf("%d sleep ranks on the other nodes, want %d", n, want)
				return false
			}
		}
	}
	if !waitSleeps(6, 30*time.Second) {
		t.Fatalf("ranks not running\n%s", p.stderr.String())
	}
	job, _ := x.sc.Output("squeue", "-h", "-o", "%i")
	job = strings.TrimSpace(job)
	prunPid := x.prunIn(t, p)
	killPid(prunPid)
	p.waitOutput(10*time.Second, "prun=137\n")
	if !waitSleeps(0, 15*time.Second) {
		t.Errorf("ranks on the other nodes outlived prun by 15 s")
	}
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		steps, err := x.sc.Output("squeue", "-h", "-s", "-j", job, "-o", "%i %j")
		if err == nil && !strings.Contains(steps, "prun-daemons") {
			break
		}
		if time.Now().After(end) {
			t.Errorf("the daemons' step outlived prun by 15 s: %q %v", steps, err)
			break
		}
	}
	// The script's sleep ends the allocation (salloc leaves its
	// command to run on after scancel).
	for _, pi := range jobProcs(p.cmd.Process.Pid, p.mark) {
		if pi.comm == "sleep" && pi.session == p.cmd.Process.Pid {
			syscall.Kill(pi.pid, syscall.SIGKILL)
		}
	}
	p.wait()
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), fmt.Sprintf("prun.%d.", prunPid)) {
			t.Errorf("TMPDIR holds %s: the daemons' session directories must go with them", e.Name())
		}
	}
}

func (x *slurmTest) testSlurmSlurmdKilled(t *testing.T) {
	// Last: the node stays down. Slurm declares it failed after
	// SlurmdTimeout and ends the job; prun and every rank end with it.
	p, _ := x.running(t)
	pid := x.sc.SlurmdPid("prun-s2")
	if pid == 0 {
		t.Fatal("no slurmd pid for prun-s2")
	}
	if err := killPid(pid); err != nil {
		t.Fatal(err)
	}
	r := p.wait()
	if r.code == 0 {
		t.Errorf("slurmd killed: exit 0\n%s", r)
	}
	expectContains(t, "stderr", r.stderr, "Node failure on prun-s2")
	// prun names the node Slurm declared failed, not the daemon that
	// heard Slurm's SIGTERM first, nor a rank killed by it.
	expectContains(t, "stderr", r.stderr, "prun: lost node prun-s2: node failure: Slurm declared prun-s2 down")
}

func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
