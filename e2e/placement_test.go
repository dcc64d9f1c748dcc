package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
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

// --display-topo (mpirun's) shows each node's topology before the map.
func TestDisplayTopo(t *testing.T) {
	t.Parallel()
	r := run(t, opts{args: []string{"--topology", "pack:2 core:2 pu:2", "--host", "ghost1:8,ghost2:8",
		"--display-topo", "--do-not-launch", "-n", "16", "true"}})
	expectCode(t, r, 0)
	for _, h := range []string{"ghost1", "ghost2"} {
		expectContains(t, "stdout", r.stdout, "topology of "+h+":\n  pack:2 core:2 pu:2\n")
	}
	expectContains(t, "stdout", r.stdout, "  package: P#0{0-3} P#1{4-7}\n")
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
		{[]string{"--map-by", "bogus", "-n", "1", "true"}, `prun: --map-by "bogus": unknown policy "bogus"`},
		{[]string{"--bind-to", "nowhere", "-n", "1", "true"}, `prun: --bind-to "nowhere": unknown policy "nowhere"`},
		{[]string{"--rank-by", "core:x", "-n", "1", "true"}, `prun: --rank-by "core:x": unknown qualifier "x" (want span or fill)`},
		{[]string{"--bynode", "--map-by", "core", "-n", "1", "true"}, "prun: --bynode conflicts with --map-by core"},
		{[]string{"--map-by", "node", "--map-by", "slot", "-n", "1", "true"}, "prun: --map-by slot conflicts with --map-by node\n"},
		{[]string{"-npernode", "1", "-npernode", "2", "-n", "1", "true"}, "prun: --npernode 2 conflicts with --npernode 1\n"},
		{[]string{"-membind", "nexttouch", "-n", "1", "true"}, `prun: -membind "nexttouch": Linux has no nexttouch policy`},
		{[]string{"-membind", "bind:7", "-n", "1", "true"}, "prun: -membind bind:7: "},
		{[]string{"--topology", "pack:2 core:x", "-n", "1", "true"}, "--topology"},
		{[]string{"--host", "ghost:1", "-n", "1", "true"}, "prun: host ghost (--host) does not resolve: no such host\n"},
		{[]string{"-H", ":4", "-n", "1", "true"}, "prun: --host: :4: empty host name\n"},
	} {
		r := run(t, opts{args: tc.args})
		expectCode(t, r, 2)
		expectContains(t, "stderr", r.stderr, tc.want)
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
			t.Errorf("%v: stderr has %d lines, want 1\n%s", tc.args, n+1, r)
		}
	}
}

// -membind gives each rank its memory policy from its first instruction
// (/proc/self/numa_maps shows it on the program's own mappings), over the
// NUMA nodes of its CPUs; prun's threads keep the default one.
func TestMemBind(t *testing.T) {
	t.Parallel()
	const show = `head -1 /proc/self/numa_maps | cut -d" " -f2`
	for _, tc := range []struct{ mem, want string }{
		{"", "default"}, {"firsttouch", "local"}, {"bind", "bind:0"}, {"interleave", "interleave:0"}, {"interleave:0", "interleave:0"},
	} {
		args := []string{"--bind-to", "none", "-n", "2", "sh", "-c", show}
		if tc.mem != "" {
			args = append([]string{"-membind", tc.mem}, args...)
		}
		r := run(t, opts{args: args})
		expectCode(t, r, 0)
		if want := tc.want + "\n" + tc.want + "\n"; r.stdout != want {
			t.Errorf("-membind %q: ranks' policies %q, want %q", tc.mem, r.stdout, want)
		}
	}
	r := run(t, opts{args: []string{"-membind", "interleave", "--report-bindings", "-n", "1", "sh", "-c",
		`sleep 0.2; for t in /proc/$PPID/task/*; do head -1 $t/numa_maps | cut -d" " -f2; done | sort -u`}})
	expectCode(t, r, 0)
	if r.stdout != "default\n" {
		t.Errorf("prun's threads' policies after the fork: %q, want default only", r.stdout)
	}
	expectContains(t, "stdout", r.stdout+r.stderr, "memory interleave on NUMA nodes 0")
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

// --rank-by OBJECT[:span|:fill] ranks as Open MPI 4.1's mpirun does: both
// map the same job on the same made-up topology (an hwloc XML file) without
// launching, and each node's ranks, in the order of the CPUs they were
// mapped to, must agree. Mapping by core or hwthread on one-PU cores keeps
// a process's CPU and its place in mpirun's node listing the same thing.
func TestRankByMatchesOpenMPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tool := range []string{"mpirun.openmpi", "lstopo-no-graphics"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (make test installs openmpi-bin and hwloc): %v", tool, err)
		}
	}
	xmls := map[string]string{}
	for _, topo := range []string{"pack:2 core:4 pu:1", "pack:2 core:2 pu:2", "pack:2 numa:2 core:2 pu:1"} {
		path := filepath.Join(dir, fmt.Sprintf("topo%d.xml", len(xmls)))
		if out, err := exec.Command("lstopo-no-graphics", "-i", topo, "--of", "xml", path).CombinedOutput(); err != nil {
			t.Fatalf("lstopo %s: %v\n%s", topo, err, out)
		}
		xmls[topo] = path
	}
	for _, c := range []struct {
		topo, hosts string // hosts: name:slots,...
		args        []string
	}{
		{"pack:2 core:4 pu:1", "n1:8", []string{"-n", "6", "--map-by", "core", "--rank-by", "socket"}},
		{"pack:2 core:4 pu:1", "n1:8", []string{"-n", "6", "--map-by", "core", "--rank-by", "socket:fill"}},
		{"pack:2 core:4 pu:1", "n1:4,n2:4", []string{"-n", "8", "--map-by", "core", "--rank-by", "socket"}},
		{"pack:2 core:4 pu:1", "n1:4,n2:4", []string{"-n", "8", "--map-by", "core", "--rank-by", "socket:span"}},
		{"pack:2 core:4 pu:1", "n1:6,n2:6", []string{"-n", "10", "--map-by", "core", "--rank-by", "socket:span"}},
		{"pack:2 core:2 pu:2", "n1:8", []string{"-n", "8", "--map-by", "hwthread", "--rank-by", "core"}},
		{"pack:2 core:2 pu:2", "n1:8", []string{"-n", "7", "--map-by", "hwthread", "--rank-by", "socket"}},
		{"pack:2 core:2 pu:2", "n1:8", []string{"-n", "8", "--map-by", "hwthread", "--rank-by", "socket:fill"}},
		{"pack:2 numa:2 core:2 pu:1", "n1:8", []string{"-n", "7", "--map-by", "core", "--rank-by", "numa"}},
		{"pack:2 numa:2 core:2 pu:1", "n1:8", []string{"-n", "6", "--map-by", "core", "--rank-by", "socket"}},
	} {
		name := strings.Join(c.args, " ") + " on " + c.hosts + " " + c.topo
		want := openMPIRanks(t, name, dir, xmls[c.topo], c.hosts, c.args)
		got := prunRanks(t, name, xmls[c.topo], c.hosts, c.args)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: prun ranks each node's CPUs %v, mpirun.openmpi %v", name, got, want)
		}
	}
}

// openMPIRanks maps a job with Open MPI's mpirun on the topology xml and
// hosts (name:slots,...): each node's ranks in mapping order.
func openMPIRanks(t *testing.T, name, dir, xml, hosts string, args []string) map[string][]int {
	t.Helper()
	// mpirun: a hostfile; it prints each node's processes in mapping
	// order ("Data for node: n1 ..." then "... Process rank: 3 ...").
	hf := filepath.Join(dir, "hostfile")
	var lines []string
	for _, h := range strings.Split(hosts, ",") {
		n, s, _ := strings.Cut(h, ":")
		lines = append(lines, n+" slots="+s)
	}
	if err := os.WriteFile(hf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("mpirun.openmpi", append(append([]string{"--allow-run-as-root", "--hostfile", hf,
		"--mca", "hwloc_base_topo_file", xml, "--mca", "plm_rsh_agent", "false",
		"--display-map", "--do-not-launch"}, args...), "/bin/true")...)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	out, _ := cmd.CombinedOutput() // it exits non-zero after --do-not-launch
	want := map[string][]int{}
	node := ""
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 4 && strings.HasPrefix(strings.TrimSpace(l), "Data for node:") {
			node = f[3]
		} else if _, r, ok := strings.Cut(l, "Process rank: "); ok && node != "" {
			var rank int
			fmt.Sscan(r, &rank)
			want[node] = append(want[node], rank)
		}
	}
	if len(want) == 0 {
		t.Fatalf("%s: no map from mpirun.openmpi:\n%s", name, out)
	}
	return want
}

// prunRanks maps the same job with prun: each host's ranks in the order of
// their CPUs.
func prunRanks(t *testing.T, name, xml, hosts string, args []string) map[string][]int {
	t.Helper()
	// prun: the JSON map; on each host, ranks by CPU.
	r := run(t, opts{args: append(append([]string{"--topology", xml, "--host", hosts,
		"--display", "map:json", "--do-not-launch"}, args...), "true")})
	expectCode(t, r, 0)
	var doc struct {
		Procs []struct {
			Rank int    `json:"rank"`
			Host string `json:"host"`
			CPUs string `json:"cpus"`
		} `json:"procs"`
	}
	if err := json.Unmarshal([]byte(r.stdout[strings.Index(r.stdout, "{"):]), &doc); err != nil {
		t.Fatalf("%s: map JSON: %v\n%s", name, err, r.stdout)
	}
	byCPU := map[string]map[int]int{}
	for _, p := range doc.Procs {
		cpu, err := strconv.Atoi(p.CPUs)
		if err != nil {
			t.Fatalf("%s: rank %d bound to %q, want one CPU", name, p.Rank, p.CPUs)
		}
		if byCPU[p.Host] == nil {
			byCPU[p.Host] = map[int]int{}
		}
		byCPU[p.Host][cpu] = p.Rank
	}
	got := map[string][]int{}
	for h, m := range byCPU {
		cpus := make([]int, 0, len(m))
		for cpu := range m {
			cpus = append(cpus, cpu)
		}
		sort.Ints(cpus)
		for _, cpu := range cpus {
			got[h] = append(got[h], m[cpu])
		}
	}
	return got
}

// This node by two names (-H node:1,localhost:1) is one host with both
// slots, as under mpirun: one daemon, one set of local ranks. It was two
// hosts, and prun failed with "no daemon on" the first.
func TestLocalAliasesMerge(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	dir, ring := ompi(t, "ring.c")
	r := run(t, opts{args: []string{"-H", host + ":1,localhost:1", "--display", "allocation", "-n", "2", ring}, dir: dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "allocation (--host): 1 hosts, 2 slots\n")
	expectContains(t, "stdout", r.stdout, "ring: 2 ranks, 10 laps, sum ok\n")

	// The same names in two contexts' own -H.
	r = run(t, opts{args: []string{"-n", "1", "-H", host + ":1", ring, ":", "-n", "1", "-H", "localhost:1", ring}, dir: dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "ring: 2 ranks, 10 laps, sum ok\n")
}

// mpirun's per-context --hostfile: each context's file names its app's
// hosts and joins the allocation (here this node under two names, one host
// with the slots of both); a context without one shares them, and mpirun's
// "all nodes are filled" is prun's one-line refusal.
func TestPerContextHostfile(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	dir, mpmd := ompi(t, "mpmd.c")
	tmp := t.TempDir() // not dir: the compiled programs' cache outlives the test
	hfA, hfB := filepath.Join(tmp, "hfA"), filepath.Join(tmp, "hfB")
	if err := os.WriteFile(hfA, []byte("localhost slots=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hfB, []byte(host+" slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, opts{args: []string{"--display", "allocation", "--hostfile", hfA, "-n", "1", mpmd, "0,1,1", ":",
		"--hostfile", hfB, "-n", "2", mpmd, "0,1,1"}, dir: dir})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "allocation (contexts' hostfiles): 1 hosts, 3 slots\n")
	for i, a := range []int{0, 1, 1} {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("mpmd: rank %d appnum %d\n", i, a))
	}

	r = run(t, opts{args: []string{"-n", "2", "true", ":", "--hostfile", hfB, "-n", "1", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "prun: 3 processes requested but only 2 slots are available on "+host+" (add --oversubscribe to allow more processes than slots)\n")
	r = run(t, opts{args: []string{"-n", "1", "true", ":", "--hostfile", hfB, "-H", "elsewhere", "-n", "1", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "prun: app 2: --host within its hostfile "+hfB+": host elsewhere is not in the allocation\n")

	// An app takes no more of a host than its own file gives it, though
	// the other context's file gives the node more: mpirun.openmpi refuses
	// the same.
	args := []string{"--hostfile", hfA, "-n", "2", "true", ":", "--hostfile", hfB, "-n", "1", "true"}
	r = run(t, opts{args: args})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "prun: app 1: 2 processes requested but its hostfile "+hfA+" gives it 1 slot on localhost\n")
	cmd := exec.Command("mpirun.openmpi", append([]string{"--allow-run-as-root"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("mpirun.openmpi %q ran:\n%s", args, out)
	}
}

// Open MPI's launcher MCA parameters, as CI setups give them: with
// OMPI_MCA_rmaps_base_oversubscribe=1 (or the same --mca, or a parameter
// file named by OMPI_MCA_mca_base_param_files) a job larger than the
// hostfile's slots runs, under prun as under mpirun.openmpi; without it
// both refuse. A bad policy in a parameter names where it came from.
func TestOpenMPILauncherMCA(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	dir, ring := ompi(t, "ring.c")
	tmp := t.TempDir() // not dir: the compiled programs' cache outlives the test
	hf, conf := filepath.Join(tmp, "hf1"), filepath.Join(tmp, "mca.conf")
	if err := os.WriteFile(hf, []byte(host+" slots=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("# CI\nrmaps_base_oversubscribe = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mpirun := func(env []string, args ...string) int {
		cmd := exec.Command("mpirun.openmpi", append([]string{"--allow-run-as-root", "--hostfile", hf, "-n", "2"}, append(args, ring)...)...)
		cmd.Env, cmd.Dir = append(append(os.Environ(), "TMPDIR="+t.TempDir()), env...), dir
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); err != nil && code <= 0 {
			t.Fatalf("mpirun.openmpi: %v\n%s", err, out)
		}
		return cmd.ProcessState.ExitCode()
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		ok   bool
	}{
		{"none", nil, nil, false},
		{"env", []string{"OMPI_MCA_rmaps_base_oversubscribe=1"}, nil, true},
		{"--mca", nil, []string{"--mca", "rmaps_base_oversubscribe", "true"}, true},
		{"param file", []string{"OMPI_MCA_mca_base_param_files=" + conf}, nil, true},
		{"--mca over env", []string{"OMPI_MCA_rmaps_base_oversubscribe=1"}, []string{"--mca", "rmaps_base_oversubscribe", "0"}, false},
	} {
		r := run(t, opts{args: append(append([]string{"--hostfile", hf, "-n", "2"}, c.args...), ring), env: c.env, dir: dir})
		if c.ok {
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "ring: 2 ranks, 10 laps, sum ok\n")
		} else {
			expectCode(t, r, 2)
			expectContains(t, "stderr", r.stderr, "prun: 2 processes requested but only 1 slot is available on "+host+" (add --oversubscribe to allow more processes than slots)\n")
		}
		if code := mpirun(c.env, c.args...); (code == 0) != c.ok {
			t.Errorf("%s: mpirun.openmpi exited %d, prun %d", c.name, code, r.code)
		}
	}
	r := run(t, opts{args: []string{"-n", "1", ring}, env: []string{"OMPI_MCA_rmaps_base_mapping_policy=bycore"}, dir: dir})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, `prun: OMPI_MCA_rmaps_base_mapping_policy=bycore: --map-by "bycore": unknown policy`)
}

// Hydra's environment variables steer prun as they steer mpiexec.hydra:
// HYDRA_BINDING=none leaves the ranks unbound (prun binds -n 2 to cores
// otherwise), a bad one names itself, HYDRA_LAUNCHER=fork keeps the job on
// this node.
func TestHydraEnvironment(t *testing.T) {
	t.Parallel()
	if runtime.NumCPU() != 2 {
		t.Fatalf("this test expects the 2-CPU machine, found %d CPUs", runtime.NumCPU())
	}
	r := run(t, opts{args: []string{"-n", "2", "sh", "-c", `grep Cpus_allowed_list /proc/self/status`}, env: []string{"HYDRA_BINDING=none"}})
	expectCode(t, r, 0)
	if got := strings.Count(r.stdout, "Cpus_allowed_list:\t0-1\n"); got != 2 {
		t.Errorf("HYDRA_BINDING=none: %d of 2 ranks unbound\n%s", got, r)
	}
	r = run(t, opts{args: []string{"-n", "1", "true"}, env: []string{"HYDRA_BINDING=bogus"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, `prun: HYDRA_BINDING=bogus: --bind-to "bogus": unknown policy`)
	r = run(t, opts{args: []string{"-H", "ghost", "-n", "1", "true"}, env: []string{"HYDRA_LAUNCHER=fork"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "prun: -launcher fork starts processes on this node only, and the map puts some on ghost\n")
}

// Hydra's -bind-to spellings on this 2-CPU machine: user:LIST gives a
// node's k-th process the k-th set, rr the processors by OS number, core:N
// N cores each, machine the whole node.
func TestHydraBinding(t *testing.T) {
	t.Parallel()
	if runtime.NumCPU() != 2 {
		t.Fatalf("this test expects the 2-CPU machine, found %d CPUs", runtime.NumCPU())
	}
	show := `echo "$PRUN_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"`
	for _, c := range []struct {
		bind string
		np   string
		want []string
	}{
		{"user:1,0", "3", []string{"0 1", "1 0", "2 1"}},
		{"user:0+1", "1", []string{"0 0-1"}},
		{"rr", "2", []string{"0 0", "1 1"}},
		{"core:2", "1", []string{"0 0-1"}},
		{"machine", "2", []string{"0 0-1", "1 0-1"}},
	} {
		r := run(t, opts{args: []string{"-bind-to", c.bind, "-n", c.np, "sh", "-c", show}})
		expectCode(t, r, 0)
		got := lines(r.stdout)
		sort.Strings(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("-bind-to %s -n %s: %q, want %q", c.bind, c.np, got, c.want)
		}
	}
	r := run(t, opts{args: []string{"-bind-to", "user:5", "-n", "1", "true"}})
	expectCode(t, r, 2)
	expectContains(t, "stderr", r.stderr, "binding to user: CPU 5 does not exist on ")
}
