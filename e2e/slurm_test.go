package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"prun/internal/slurmtest"
)

// TestSlurm runs prun inside allocations of a real Slurm cluster
// (internal/slurmtest: slurmctld and three slurmd prun-s1..3): the other
// nodes' daemons start as one srun step, slots come from the allocation,
// and the job's end, scancel and a failed node leave nothing behind.
func TestSlurm(t *testing.T) {
	if why := slurmtest.Available(); why != "" {
		t.Skip("Slurm: " + why)
	}
	ompiDir, ompiRing := ompi(t, "ring.c")
	mpichDir, mpichRing := mpich(t, "ring.c")
	sc := slurmtest.Start(t)
	env := []string{"SLURM_CONF=" + sc.Conf(), "OMPI_MCA_btl_tcp_if_include=" + slurmtest.Network}
	salloc := func(args ...string) []string {
		return append([]string{"-N", "3", "--ntasks-per-node=2", prunBin}, args...)
	}
	sallocBin := "/usr/bin/salloc"

	t.Run("hosts", func(t *testing.T) {
		r := run(t, opts{bin: sallocBin, args: salloc("-n", "6", "hostname"), env: env})
		expectCode(t, r, 0)
		got := lines(r.stdout)
		sort.Strings(got)
		if want := "prun-s1 prun-s1 prun-s2 prun-s2 prun-s3 prun-s3"; strings.Join(got, " ") != want {
			t.Errorf("salloc -N 3 --ntasks-per-node=2 prun -n 6 hostname: %q, want %s\n%s", got, want, r)
		}
	})
	t.Run("step", func(t *testing.T) {
		// The daemons are one step of the job, no secret on their command
		// line or in the ranks' environment, no step variables of theirs.
		script := `echo "$SLURMD_NODENAME $SLURM_JOB_ID procid=${SLURM_PROCID-} step=${SLURM_STEP_ID-}"; ` +
			`echo secrets=$(env | grep -ci secret); for p in $(pgrep -f "prun daemon"); do tr '\0' ' ' </proc/$p/cmdline; echo; done`
		r := run(t, opts{bin: sallocBin, args: salloc("--map-by", "node", "-n", "3", "sh", "-c", script), env: env})
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
	})
	for _, tc := range []struct{ name, dir, ring string }{{"ring-ompi", ompiDir, ompiRing}, {"ring-mpich", mpichDir, mpichRing}} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, opts{bin: sallocBin, args: salloc("-n", "6", tc.ring), env: env, dir: tc.dir})
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "ring: 6 ranks, 10 laps, sum ok\n")
		})
	}
	t.Run("oversubscribed", func(t *testing.T) {
		// The allocation's slots are Slurm's: 6 of them, not the nodes' cores.
		r := run(t, opts{bin: sallocBin, args: salloc("-n", "7", "true"), env: env})
		if r.code == 0 {
			t.Errorf("-n 7 in 6 slots succeeded:\n%s", r)
		}
	})
	t.Run("sbatch", func(t *testing.T) {
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
		out := filepath.Join(dir, "out")
		script := writeScript(t, dir, "job.sh", fmt.Sprintf("#!/bin/sh\ncd %s && %s -n 6 %s\necho prun=$?\n", mpichDir, prunBin, mpichRing))
		r := run(t, opts{bin: "/usr/bin/sbatch", args: []string{"--wait", "-N", "3", "--ntasks-per-node=2", "-o", out, script}, env: env})
		b, _ := os.ReadFile(out)
		expectCode(t, r, 0)
		expectContains(t, "batch output", string(b), "ring: 6 ranks, 10 laps, sum ok\n")
		expectContains(t, "batch output", string(b), "prun=0\n")
	})
	// running starts `salloc ... prun -n 6 sleep 300` and waits for its ranks.
	running := func(t *testing.T) (*proc, string) {
		p := startPrun(t, opts{bin: sallocBin, args: salloc("-n", "6", "sleep", "300"), env: env, timeout: 90 * time.Second})
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
		job, err := sc.Output("squeue", "-h", "-o", "%i")
		if err != nil || strings.TrimSpace(job) == "" {
			t.Fatalf("squeue: %q %v", job, err)
		}
		return p, strings.TrimSpace(job)
	}
	t.Run("scancel", func(t *testing.T) {
		p, job := running(t)
		if _, err := sc.Output("scancel", job); err != nil {
			t.Fatal(err)
		}
		r := p.wait() // no process of the job left anywhere (the marker)
		if r.code == 0 {
			t.Errorf("scancel: exit 0\n%s", r)
		}
		expectContains(t, "stderr", r.stderr, "prun: lost node")
		expectContains(t, "stderr", r.stderr, "Slurm ended the daemons' step (SIGTERM")
	})
	t.Run("slurmd-killed", func(t *testing.T) {
		// Last: the node stays down. Slurm declares it failed after
		// SlurmdTimeout and ends the job; prun and every rank end with it.
		p, _ := running(t)
		pid := sc.SlurmdPid("prun-s2")
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
		expectContains(t, "stderr", r.stderr, "prun: ")
	})
}

func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
