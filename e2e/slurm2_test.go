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

	"prun/internal/slurmtest"
)

// slurmVarsOf reads `env | grep ^SLURM` output: name -> value.
func slurmVarsOf(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v", err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// slurmNodeVar and slurmTaskVar: the variables a rank takes from its own
// node, and those no rank gets (a Slurm task's identity; a rank is none).
var (
	slurmNodeVar = map[string]bool{"SLURMD_NODENAME": true, "SLURM_NODEID": true, "SLURM_CPUS_ON_NODE": true,
		"SLURM_TOPOLOGY_ADDR": true, "SLURM_TOPOLOGY_ADDR_PATTERN": true}
	slurmTaskVar = map[string]bool{"SLURM_PROCID": true, "SLURM_LOCALID": true, "SLURM_TASK_PID": true, "SLURM_GTIDS": true}
)

// diffSlurmEnv says how a rank's Slurm variables differ from prun's own
// (the job's, as salloc or sbatch gave them), per-node ones aside.
func diffSlurmEnv(prun, rank map[string]string) []string {
	var d []string
	for k, v := range prun {
		if slurmNodeVar[k] || slurmTaskVar[k] {
			continue
		}
		if rv, ok := rank[k]; !ok {
			d = append(d, fmt.Sprintf("%s=%s missing", k, v))
		} else if rv != v {
			d = append(d, fmt.Sprintf("%s=%s, prun has %s", k, rv, v))
		}
	}
	for k, v := range rank {
		if _, ok := prun[k]; !ok && !slurmNodeVar[k] {
			d = append(d, fmt.Sprintf("%s=%s not prun's", k, v))
		}
		if slurmTaskVar[k] {
			d = append(d, fmt.Sprintf("%s=%s: a Slurm task's identity", k, v))
		}
	}
	sort.Strings(d)
	return d
}

// TestSlurm2 continues TestSlurm on its own cluster: the Slurm variables
// ranks see on every node, and a DVM inside an allocation.
func TestSlurm2(t *testing.T) {
	if why := slurmtest.Available(); why != "" {
		t.Fatal("Slurm (make test installs it, as root): " + why)
	}
	sc := slurmtest.Start(t)
	x := &slurmTest{sc: sc, sallocBin: "/usr/bin/salloc",
		env: []string{"SLURM_CONF=" + sc.Conf(), "OMPI_MCA_btl_tcp_if_include=" + slurmtest.Network}}

	// Every rank sees the job's variables as prun got them (SLURM_JOB_NAME,
	// SLURM_NODELIST, SLURM_NNODES, SLURM_TASKS_PER_NODE...), never those
	// of the daemons' step (prun-daemons, its step id, its 2 nodes and
	// tasks), with its own node's SLURMD_NODENAME, SLURM_NODEID (its index
	// in SLURM_NODELIST) and CPUs, and no Slurm task identity (PROCID...).
	for _, how := range []string{"sbatch", "salloc"} {
		t.Run("job-env-"+how, func(t *testing.T) {
			dir := t.TempDir()
			os.Chmod(dir, 0o755)
			body := fmt.Sprintf(`env | grep '^SLURM' | sort >%[1]s/prun.env
%[2]s --map-by node -n 3 sh -c 'env | grep "^SLURM" | sort >%[1]s/rank.$(hostname)'
echo prun=$?
`, dir, prunBin)
			script := writeScript(t, dir, "job.sh", "#!/bin/sh\n"+body)
			var r *result
			if how == "sbatch" {
				out := filepath.Join(dir, "out")
				r = run(t, opts{bin: "/usr/bin/sbatch", args: []string{"--wait", "-N", "3", "--ntasks-per-node=2", "-o", out, script}, env: x.env})
				b, _ := os.ReadFile(out)
				r.stdout += string(b)
			} else {
				r = run(t, opts{bin: x.sallocBin, args: []string{"-N", "3", "--ntasks-per-node=2", script}, env: x.env})
			}
			expectCode(t, r, 0)
			expectContains(t, "output", r.stdout, "prun=0\n")
			pv := slurmVarsOf(t, filepath.Join(dir, "prun.env"))
			if pv["SLURM_NODELIST"] != "prun-s[1-3]" {
				t.Fatalf("prun's SLURM_NODELIST=%q", pv["SLURM_NODELIST"])
			}
			for i, n := range slurmtest.Nodes {
				rv := slurmVarsOf(t, filepath.Join(dir, "rank."+n))
				if d := diffSlurmEnv(pv, rv); len(d) > 0 {
					t.Errorf("the rank on %s: its Slurm variables differ from prun's:\n  %s", n, strings.Join(d, "\n  "))
				}
				if rv["SLURMD_NODENAME"] != n || rv["SLURM_NODEID"] != fmt.Sprint(i) {
					t.Errorf("the rank on %s: SLURMD_NODENAME=%q SLURM_NODEID=%q, want %s and %d", n, rv["SLURMD_NODENAME"], rv["SLURM_NODEID"], n, i)
				}
			}
		})
	}

	t.Run("in-step-ompi", x.testSlurm2InStepOmpi)

	t.Run("dvm-scancel", x.testSlurm2DvmScancel)
	t.Run("dvm-salloc-exit", x.testSlurm2DvmSallocExit)
}

// prun inside a step of the job (srun ... prun): every rank now sees
// that step's SLURM_STEP_* as prun does; Open MPI's ranks must still
// take prun's PMIx server for their launcher, not srun's.
func (x *slurmTest) testSlurm2InStepOmpi(t *testing.T) {
	dir, ring := ompi(t, "ring.c")
	script := fmt.Sprintf(`[ "$SLURM_PROCID" = 0 ] || exit 0; cd %s && exec %s --map-by node -n 2 %s`, dir, prunBin, ring)
	r := run(t, opts{bin: x.sallocBin, args: []string{"-N", "3", "--ntasks-per-node=2", "srun", "-N", "2", "-n", "2", "sh", "-c", script}, env: x.env})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "ring: 2 ranks, 10 laps, sum ok\n")
}

// A DVM started inside an allocation: its daemons are a step of that
// job, its jobs run on the job's nodes on the same warm daemons, a prun
// in another allocation does not see it, and it ends with its
// allocation (scancel), leaving nothing on any node.
func (x *slurmTest) testSlurm2DvmScancel(t *testing.T) {
	tmp := t.TempDir()
	script := fmt.Sprintf(`%[1]s dvm start || exit 1
%[1]s dvm status
for i in 1 2; do %[1]s --map-by node -n 2 sh -c 'echo "sub $(hostname) $PPID"'; echo sub=$?; done
echo subs-done
exec sleep 300
`, prunBin)
	a := startPrun(t, opts{bin: x.sallocBin, args: []string{"-N", "2", "-w", "prun-s1,prun-s2", "sh", "-c", script}, env: x.env,
		timeout: 120 * time.Second, tmpdir: tmp, skipTmpCheck: true})
	a.waitOutput(60*time.Second, "subs-done\n")
	out := a.stdout.String()
	pid := slurmDVMPid(t, out)
	dir := regexp.MustCompile(`PRUN_DVM='?([^';\s]+)`).FindStringSubmatch(out)
	if dir == nil {
		t.Fatalf("prun dvm start said:\n%s", out)
	}
	if strings.Count(out, "sub=0\n") != 2 {
		t.Errorf("submissions failed:\n%s\n%s", out, a.stderr.String())
	}
	// Warm: both submissions' ranks are children of the same daemons,
	// on the allocation's two nodes.
	subs := regexp.MustCompile(`sub (\S+) (\d+)`).FindAllStringSubmatch(out, -1)
	parents := map[string]map[string]bool{}
	for _, s := range subs {
		if parents[s[1]] == nil {
			parents[s[1]] = map[string]bool{}
		}
		parents[s[1]][s[2]] = true
	}
	if len(subs) != 4 || len(parents) != 2 || len(parents["prun-s1"]) != 1 || len(parents["prun-s2"]) != 1 {
		t.Errorf("two submissions of 2 ranks on prun-s1,s2 under one daemon each: %q\n%s", subs, out)
	}
	job, err := x.sc.Output("squeue", "-h", "-o", "%i", "-w", "prun-s1")
	job = strings.TrimSpace(job)
	if err != nil || job == "" {
		t.Fatalf("squeue: %q %v", job, err)
	}
	steps, _ := x.sc.Output("squeue", "-h", "-s", "-j", job, "-o", "%i %j")
	if !strings.Contains(steps, "prun-daemons") {
		t.Errorf("the DVM's daemons are no step of job %s: %q", job, steps)
	}
	// Another allocation: no DVM there; its prun runs on its own node.
	r := run(t, opts{bin: x.sallocBin, args: []string{"-N", "1", "-w", "prun-s3", "sh", "-c",
		fmt.Sprintf("%[1]s dvm status; echo status=$?; %[1]s -n 1 hostname", prunBin)}, env: x.env, tmpdir: tmp, skipTmpCheck: true})
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "status=0") || !strings.HasSuffix(r.stdout, "prun-s3\n") {
		t.Errorf("a prun in another allocation found the DVM:\n%s", r)
	}
	if _, err := x.sc.Output("scancel", job); err != nil {
		t.Fatal(err)
	}
	slurmNothingLeft(t, pid, dir[1], 30*time.Second)
	endSalloc(a)
}

// The allocation ends as salloc's command exits: so does the DVM.
func (x *slurmTest) testSlurm2DvmSallocExit(t *testing.T) {
	tmp := t.TempDir()
	// The DVM goes without the run's mark: salloc's own check allows 2 s,
	// nothingLeft (below) the DVM's stop on a loaded machine.
	script := fmt.Sprintf(`env -u E2E_PRUN_MARK %[1]s dvm start && %[1]s dvm status && %[1]s -n 2 true; echo sub=$?`, prunBin)
	r := run(t, opts{bin: x.sallocBin, args: []string{"-N", "2", "sh", "-c", script}, env: x.env, tmpdir: tmp, skipTmpCheck: true})
	t.Logf("salloc ran %v", r.dur.Round(time.Millisecond))
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "sub=0\n")
	dir := regexp.MustCompile(`PRUN_DVM='?([^';\s]+)`).FindStringSubmatch(r.stdout)
	if dir == nil {
		t.Fatalf("prun dvm start said:\n%s", r)
	}
	slurmNothingLeft(t, slurmDVMPid(t, r.stdout), dir[1], 30*time.Second)
}

// slurmDVMPid reads `prun dvm status` output's pid.
func slurmDVMPid(t *testing.T, out string) int {
	m := regexp.MustCompile(`DVM pid (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no DVM pid in %q", out)
	}
	var pid int
	fmt.Sscan(m[1], &pid)
	return pid
}

// slurmNothingLeft waits until no prun and no rank of the test runs on any
// node, and the DVM's process and directory are gone.
func slurmNothingLeft(t *testing.T, pid int, dir string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var left []string
		if alive(pid) {
			left = append(left, fmt.Sprintf("the DVM (pid %d)", pid))
		}
		for _, n := range slurmtest.Nodes {
			for _, p := range slurmtest.NodePids(n) {
				if pi, ok := readStat(p); ok && (pi.comm == "prun" || pi.comm == "sleep") && pi.state != 'Z' {
					left = append(left, fmt.Sprintf("%s on %s (pid %d)", pi.comm, n, p))
				}
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%v after the allocation ended: %s", within, strings.Join(left, ", "))
			if alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the DVM's directory %s is still there", dir)
	}
}

// endSalloc kills the script's last sleep (salloc lets its command run
// on after scancel) and waits for salloc.
func endSalloc(p *proc) *result {
	for _, pi := range jobProcs(p.cmd.Process.Pid, p.mark) {
		if pi.comm == "sleep" && pi.session == p.cmd.Process.Pid {
			syscall.Kill(pi.pid, syscall.SIGKILL)
		}
	}
	return p.wait()
}
