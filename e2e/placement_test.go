package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// Ranks bound to cores start on their core: each reads its own
// Cpus_allowed_list and the two lists are distinct single CPUs.
func TestBindToCore(t *testing.T) {
	t.Parallel()
	if runtime.NumCPU() < 2 {
		t.Fatalf("this test needs 2 CPUs, the machine has %d", runtime.NumCPU())
	}
	r := run(t, opts{args: []string{"-n", "2", "--bind-to", "core", "--report-bindings",
		"sh", "-c", `grep Cpus_allowed_list /proc/self/status`}})
	expectCode(t, r, 0)
	var cpus []string
	for _, l := range lines(r.stdout) {
		f := strings.Fields(l)
		if len(f) != 2 || f[0] != "Cpus_allowed_list:" {
			t.Fatalf("unexpected line %q\n%s", l, r)
		}
		cpus = append(cpus, f[1])
	}
	sort.Strings(cpus)
	if len(cpus) != 2 || cpus[0] == cpus[1] || strings.ContainsAny(cpus[0]+cpus[1], ",-") {
		t.Errorf("want two distinct single CPUs, got %v\n%s", cpus, r)
	}
	expectContains(t, "stderr", r.stderr, "rank 0 (sh) on ")
	expectContains(t, "stderr", r.stderr, "bound to CPUs ")
}

// --do-not-launch with --topology and --host maps hosts that do not exist,
// starts nothing, and prints the map as JSON.
func TestDoNotLaunchMapJSON(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	r := run(t, opts{args: []string{"--topology", "pack:2 numa:2 l3:1 core:16 pu:2", "--host", "ghost1:64,ghost2:64",
		"--map-by", "ppr:2:package", "--display", "map:json,allocation", "--do-not-launch", "-n", "8",
		"touch", marker}})
	expectCode(t, r, 0)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("--do-not-launch started the program")
	}
	start := strings.Index(r.stdout, "{")
	end := strings.LastIndex(r.stdout, "}")
	if start < 0 || end < start {
		t.Fatalf("no JSON map in stdout\n%s", r)
	}
	var doc struct {
		Procs []struct {
			Rank      int    `json:"rank"`
			Host      string `json:"host"`
			LocalRank int    `json:"local_rank"`
			CPUs      string `json:"cpus"`
		} `json:"procs"`
	}
	if err := json.Unmarshal([]byte(r.stdout[start:end+1]), &doc); err != nil {
		t.Fatalf("map JSON: %v\n%s", err, r.stdout)
	}
	if len(doc.Procs) != 8 {
		t.Fatalf("%d procs, want 8", len(doc.Procs))
	}
	for i, p := range doc.Procs {
		host := fmt.Sprintf("ghost%d", i/4+1)
		cpus := []string{"0-63", "64-127"}[(i%4)/2]
		if p.Rank != i || p.Host != host || p.LocalRank != i%4 || p.CPUs != cpus {
			t.Errorf("proc %d = %+v, want host %s cpus %s", i, p, host, cpus)
		}
	}
	expectContains(t, "stdout", r.stdout, "allocation (--host): 2 hosts, 128 slots")
}

// Placement errors are one line and exit 2, with nothing started.
func TestPlacementErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hf := filepath.Join(dir, "hosts")
	os.WriteFile(hf, []byte("localhost slots=2\nlocalhost slots=x\n"), 0o644)
	hf2 := filepath.Join(dir, "hosts2")
	os.WriteFile(hf2, []byte("localhost slots=2\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--hostfile", hf, "-n", "1", "true"}, hf + ":2: slots=x: not a number"},
		{[]string{"--hostfile", hf2, "-n", "3", "true"}, "3 processes requested but only 2 slots are available on localhost"},
		{[]string{"--map-by", "bogus", "-n", "1", "true"}, "--map-by bogus:"},
		{[]string{"--bind-to", "nowhere", "-n", "1", "true"}, "--bind-to nowhere:"},
		{[]string{"--topology", "pack:2 core:x", "-n", "1", "true"}, "--topology"},
		{[]string{"--host", "ghost:1", "-n", "1", "true"}, "prun: ghost: cannot connect to ghost:22"},
	} {
		r := run(t, opts{args: tc.args})
		want := 2
		if strings.HasPrefix(tc.want, "prun: ghost") {
			want = 1
		}
		expectCode(t, r, want)
		expectContains(t, "stderr", r.stderr, tc.want)
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
			t.Errorf("%v: stderr has %d lines, want 1\n%s", tc.args, n+1, r)
		}
	}
}

// A rankfile places and binds each rank where it says, on a real run.
func TestRankfileBinds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rf := filepath.Join(dir, "ranks")
	os.WriteFile(rf, []byte("# swap the CPUs\nrank 0=localhost slot=1\nrank 1=localhost slot=0\n"), 0o644)
	r := run(t, opts{args: []string{"--rankfile", rf, "-n", "2", "sh", "-c",
		`echo "rank $PRUN_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"`}})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "rank 0 1\n")
	expectContains(t, "stdout", r.stdout, "rank 1 0\n")

	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("rank 0=localhost slot=1\nrank x=localhost slot=0\n"), 0o644)
	r = run(t, opts{args: []string{"--rankfile", bad, "-n", "2", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, bad+":2:")
}

// Inside a Slurm allocation prun takes its hosts and slots without a flag.
func TestSlurmAllocation(t *testing.T) {
	t.Parallel()
	r := run(t, opts{args: []string{"--display", "allocation", "-n", "2", "true"},
		env: []string{"SLURM_JOB_NODELIST=localhost", "SLURM_TASKS_PER_NODE=2"}})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "allocation (slurm allocation): 1 hosts, 2 slots")
	r = run(t, opts{args: []string{"-n", "3", "true"},
		env: []string{"SLURM_JOB_NODELIST=localhost", "SLURM_TASKS_PER_NODE=2"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "3 processes requested but only 2 slots are available on localhost")
	r = run(t, opts{args: []string{"-n", "1", "true"},
		env: []string{"SLURM_JOB_NODELIST=node[01-", "SLURM_TASKS_PER_NODE=2"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "SLURM_JOB_NODELIST")
}
