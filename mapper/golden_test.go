package mapper

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"prun/cli"
	"strconv"
	"strings"
	"testing"

	"prun/hostfile"
	"prun/jobspec"
	"prun/topology"
)

var update = flag.Bool("update", false, "rewrite the golden maps in testdata/")

// The reference node: 2 packages x 2 NUMA nodes x 16 cores x 2 hwthreads.
const (
	refNode   = "pack:2 numa:2 core:16 pu:2"
	cacheNode = "pack:2 numa:2 l3:2 l2:4 l1:2 core:1 pu:2" // same CPUs, with caches
	one       = "n1:64"
	three     = "n1:64,n2:64,n3:64"
)

type goldenCase struct {
	name      string // testdata/NAME.json
	topo      string // synthetic description shared by all hosts; "none": unknown
	hosts     string // name:slots[:max_slots],...
	implicit  bool
	np        []int // one per app
	mapBy     string
	rankBy    string
	bindTo    string
	compat    []string // "name" or "name=value" for ApplyCompat
	rankfile  string
	seq       []string
	local     string
	coreSlots bool   // every host's slots are its core count
	err       string // the exact error, instead of a golden map
}

var goldenCases = []goldenCase{
	// Defaults: map by core (hwthread with HWTCPUS), rank fill, bind to it.
	{name: "default-np1", hosts: one, np: []int{1}},
	{name: "default-np2", hosts: one, np: []int{2}},
	{name: "default-np5-3nodes", hosts: "n1:2,n2:2,n3:2", np: []int{5}},
	{name: "default-omitted-np", hosts: "n1:4", np: []int{0}},
	{name: "default-hwtcpus-coreslots", topo: "pack:1 core:4 pu:2", hosts: "n1:4", coreSlots: true, mapBy: ":HWTCPUS", np: []int{0}},
	{name: "default-no-topology", topo: "none", hosts: "n1:2,n2:2", np: []int{3}},
	{name: "default-no-cores", topo: "pack:2 pu:3", hosts: "n1:6", np: []int{4}},
	{name: "default-mpmd", hosts: one, np: []int{2, 3}},
	{name: "package-mpmd", hosts: one, np: []int{1, 1}, mapBy: "package"},
	{name: "ppr-mpmd-3nodes", hosts: three, np: []int{3, 2}, mapBy: "ppr:1:node"},
	// One policy at a time on one node.
	{name: "slot-np4", hosts: one, np: []int{4}, mapBy: "slot"},
	{name: "slot-np2", hosts: one, np: []int{2}, mapBy: "slot"},
	{name: "hwthread-np4", hosts: one, np: []int{4}, mapBy: "hwthread"},
	{name: "core-hwtcpus-np4", hosts: one, np: []int{4}, mapBy: "core:HWTCPUS"},
	{name: "l1cache-np3", topo: cacheNode, hosts: one, np: []int{3}, mapBy: "l1cache"},
	{name: "l2cache-np6", topo: cacheNode, hosts: one, np: []int{6}, mapBy: "l2"},
	{name: "l3cache-np6", topo: cacheNode, hosts: one, np: []int{6}, mapBy: "l3cache"},
	{name: "numa-np6", hosts: one, np: []int{6}, mapBy: "numa"},
	{name: "package-np5", hosts: one, np: []int{5}, mapBy: "package"},
	{name: "package-np5-rank-slot", hosts: one, np: []int{5}, mapBy: "package", rankBy: "slot"},
	{name: "package-bind-core", hosts: one, np: []int{4}, mapBy: "package", bindTo: "core"},
	{name: "numa-bind-l3", topo: cacheNode, hosts: one, np: []int{4}, mapBy: "numa", bindTo: "l3cache"},
	{name: "bind-none", hosts: one, np: []int{3}, bindTo: "none"},
	{name: "bind-l3-if-supported", hosts: one, np: []int{2}, mapBy: "slot", bindTo: "l3cache:if-supported"},
	{name: "bind-overload-allowed", topo: "core:2 pu:2", hosts: "n1:3", np: []int{3}, bindTo: "core:overload-allowed"},
	// Three nodes.
	{name: "package-rank-span-3nodes", hosts: "n1:4,n2:4,n3:4", np: []int{10}, mapBy: "package", rankBy: "span"},
	{name: "package-span-3nodes", hosts: three, np: []int{8}, mapBy: "package:SPAN"},
	{name: "core-span-3nodes", hosts: "n1:4,n2:4,n3:4", np: []int{8}, mapBy: "core:SPAN"},
	{name: "node-3nodes", hosts: three, np: []int{7}, mapBy: "node"},
	{name: "node-unequal-slots", hosts: "n1:1,n2:4", np: []int{4}, mapBy: "node"},
	{name: "node-mpmd-3nodes", hosts: three, np: []int{2, 2}, mapBy: "node"},
	{name: "node-nolocal-3nodes", hosts: three, np: []int{4}, mapBy: "node:NOLOCAL", local: "n1"},
	{name: "seq-3nodes", hosts: three, np: []int{0}, mapBy: "seq", seq: []string{"n2", "n1", "n2", "n3"}},
	{name: "seq-hostfile-order", hosts: "n1:2,n2:1", np: []int{0}, mapBy: "seq"},
	{name: "seq-hostfile-order-mpmd", hosts: "n1:2,n2:0,n3:1,n4:2", np: []int{2, 2}, mapBy: "seq"},
	{name: "ppr-2-package-1node", hosts: one, np: []int{0}, mapBy: "ppr:2:package"},
	{name: "ppr-2-package-3nodes", hosts: three, np: []int{0}, mapBy: "ppr:2:package"},
	{name: "ppr-2-numa-np5-3nodes", hosts: three, np: []int{5}, mapBy: "ppr:2:numa"},
	{name: "npernode-2-3nodes", hosts: three, np: []int{0}, compat: []string{"-N=2"}},
	{name: "pernode-3nodes", hosts: three, np: []int{0}, compat: []string{"--pernode"}},
	{name: "rankfile-3nodes", hosts: three, np: []int{0}, mapBy: "rankfile",
		rankfile: "rank 0=n2 slot=0-1\nrank 1=+n0 slot=1:0-2\nrank 2=n3 slot=0:1;1:2\nrank 3=n1 slot=63\n"},
	{name: "rankfile-hwtcpus", hosts: one, np: []int{2}, mapBy: "rankfile:HWTCPUS",
		rankfile: "rank 0=n1 slot=0-1\nrank 1=n1 slot=1:0\n"},
	{name: "pe-list", hosts: one, np: []int{3}, mapBy: "pe-list=0,2-3"},
	{name: "pe-list-ordered", hosts: one, np: []int{3}, mapBy: "pe-list=0,2-3:ORDERED"},
	{name: "pe-list-ordered-hwtcpus", hosts: one, np: []int{3}, mapBy: "pe-list=0,2-3:ORDERED:HWTCPUS"},
	{name: "slot-pe2", hosts: one, np: []int{3}, mapBy: "slot:PE=2"},
	{name: "pe2-default-np-3nodes", hosts: "n1:2,n2:2,n3:2", np: []int{0}, mapBy: ":PE=2"},
	{name: "numa-pe4", hosts: one, np: []int{5}, mapBy: "numa:PE=4"},
	{name: "core-hwtcpus-pe2", hosts: one, np: []int{2}, mapBy: "core:HWTCPUS:PE=2"},
	{name: "cpus-per-proc-3nodes", hosts: three, np: []int{4}, mapBy: "package", compat: []string{"--cpus-per-proc=3"}},
	// Open MPI 4's --rank-by OBJECT. Each of these was checked against
	// mpirun.openmpi 4.1 (--mca hwloc_base_topo_file with the same
	// synthetic topology, --display-map --do-not-launch).
	{name: "rank-core-map-package", topo: "pack:2 core:4 pu:1", hosts: "n1:8", np: []int{6}, mapBy: "package", rankBy: "core"},
	{name: "rank-socket-map-core", topo: "pack:2 core:4 pu:1", hosts: "n1:8", np: []int{6}, mapBy: "core", rankBy: "socket"},
	{name: "rank-socket-map-slot", topo: "pack:2 core:4 pu:1", hosts: "n1:8", np: []int{6}, mapBy: "slot", rankBy: "socket"},
	{name: "rank-socket-span-2nodes", topo: "pack:2 core:4 pu:1", hosts: "n1:4,n2:4", np: []int{8}, mapBy: "core", rankBy: "socket:span"},
	{name: "rank-socket-2nodes", topo: "pack:2 core:4 pu:1", hosts: "n1:4,n2:4", np: []int{8}, mapBy: "core", rankBy: "socket"},
	{name: "rank-core-map-hwthread", topo: "pack:2 core:2 pu:2", hosts: "n1:8", np: []int{8}, mapBy: "hwthread", rankBy: "core"},
	{name: "rank-socket-fill-map-hwthread", topo: "pack:2 core:2 pu:2", hosts: "n1:8", np: []int{8}, mapBy: "hwthread", rankBy: "socket:fill"},
	{name: "rank-socket-map-core-oversubscribed", topo: "pack:2 core:2 pu:2", hosts: "n1:8", np: []int{6}, mapBy: "core:HWTCPUS", rankBy: "socket"},
	{name: "rank-core-ppr", topo: "pack:2 core:2 pu:2", hosts: "n1:8", np: []int{8}, mapBy: "ppr:4:package:HWTCPUS", rankBy: "core"},
	{name: "rank-socket-mpmd", topo: "pack:2 core:4 pu:1", hosts: "n1:8", np: []int{3, 3}, mapBy: "core", rankBy: "socket"},
	{name: "rank-core-no-cores", topo: "pack:2 pu:2", hosts: "n1:4", np: []int{4}, mapBy: "package", rankBy: "core"},
	{name: "rank-l2cache", topo: "pack:1 l2:2 core:2 pu:1", hosts: "n1:4", np: []int{4}, mapBy: "core", rankBy: "l2cache"},
	// Bound to the larger object that holds the mapped one, as mpirun and
	// Hydra bind (--map-by core --bind-to package).
	{name: "core-bind-package", topo: "pack:2 core:2 pu:2", hosts: "n1:4", np: []int{4}, mapBy: "core", bindTo: "package"},
	{name: "hwthread-bind-core", topo: "pack:1 core:2 pu:2", hosts: "n1:4", np: []int{3}, mapBy: "hwthread", bindTo: "core"},
	// Hydra's -bind-to spellings: user:LIST (a node's k-th process to the
	// k-th set, round again), rr (processors by OS number), core:N.
	{name: "hydra-bind-user", topo: "pack:1 core:4 pu:1", hosts: "n1:4", np: []int{3}, bindTo: "user:0+2,1+3"},
	{name: "hydra-bind-rr", topo: "pack:1 core:2 pu:2", hosts: "n1:4,n2:4", np: []int{6}, bindTo: "rr"},
	{name: "hydra-bind-core2", topo: "pack:1 core:4 pu:1", hosts: "n1:4", np: []int{2}, bindTo: "core:2"},
	{hosts: "n1:4", topo: "pack:1 core:4 pu:1", np: []int{1}, bindTo: "user:0,7", err: "binding to user: CPU 7 does not exist on n1"},
	{hosts: "n1:4", topo: "pack:1 core:4 pu:1", np: []int{1}, mapBy: "slot:PE=2", bindTo: "user:0", err: "binding to user:0 names each process's CPUs: it cannot be combined with mapping by slot:PE=2"},
	// Oversubscription.
	{name: "oversubscribe-3nodes", hosts: "n1:2,n2:2,n3:2", np: []int{8}, mapBy: ":OVERSUBSCRIBE"},
	{name: "oversubscribe-implicit", hosts: "n1:4", implicit: true, np: []int{6}},
	{name: "oversubscribe-max-slots", hosts: "n1:2:2,n2:2", implicit: true, np: []int{6}},
	{name: "oversubscribe-node-3nodes", hosts: "n1:1,n2:1,n3:1", np: []int{5}, mapBy: "node:OVERSUBSCRIBE"},

	// Errors, word for word.
	{hosts: "n1:2,n2:1", np: []int{4}, err: "4 processes requested but only 3 slots are available on n1,n2 (add --oversubscribe to allow more processes than slots)"},
	{hosts: "n1:2", implicit: true, np: []int{3}, mapBy: ":NOOVERSUBSCRIBE", err: "3 processes requested but only 2 slots are available on n1"},
	{hosts: "n1:2:2", implicit: true, np: []int{3}, err: "3 processes requested but only 2 slots are available on n1 (max_slots caps oversubscription)"},
	{hosts: three, np: []int{13}, mapBy: "ppr:2:package", err: "mapping by ppr:2:package places at most 12 processes (2 on each of 6 packages) but app 1 asks for 13"},
	{hosts: "n1:2", np: []int{0}, mapBy: "ppr:4:node", err: "mapping by ppr:4:node places 4 processes on n1 but it has only 2 slots (add --oversubscribe to allow more processes than slots)"},
	{hosts: one, np: []int{2}, mapBy: "slot", rankBy: "fill", err: "ranking by fill needs mapping by hwthread, core, l1cache, l2cache, l3cache, numa, package or ppr, not slot"},
	{hosts: one, np: []int{2}, mapBy: "core:PE=2", err: "mapping by core:PE=2: a core is one CPU, so it cannot hold PE=2 (map by slot, numa or package, or add HWTCPUS to map by core)"},
	{hosts: one, np: []int{2}, mapBy: "hwthread:PE=2", err: "mapping by hwthread:PE=2: an hwthread is one CPU, so it cannot hold PE=2 (map by slot, numa or package, or add HWTCPUS to map by core)"},
	{hosts: three, np: []int{3}, mapBy: "seq", seq: []string{"n1", "n2"}, err: "mapping by seq: 3 processes requested but the host list has only 2 entries"},
	{hosts: three, np: []int{2}, mapBy: "seq", seq: []string{"n1", "zz"}, err: "mapping by seq: host zz (entry 2) is not in the allocation"},
	{hosts: three, np: []int{3}, mapBy: "rankfile", rankfile: "rank 0=n1 slot=0\nrank 2=n1 slot=1\n", err: "rankfile: no line for rank 1"},
	{hosts: three, np: []int{1}, mapBy: "rankfile", rankfile: "rank 0=zz slot=0\n", err: "rankfile: rank 0: host zz is not in the allocation"},
	{hosts: three, np: []int{1}, mapBy: "rankfile", rankfile: "rank 0=n1 slot=64\n", err: "rankfile: rank 0: core 64 does not exist on n1 (it has 64)"},
	{hosts: three, np: []int{1}, mapBy: "rankfile", rankfile: "rank 0=n1 slot=0:32\n", err: "rankfile: rank 0: package 0 of n1 has no core 32 (it has 32)"},
	{hosts: three, np: []int{1}, mapBy: "rankfile", rankfile: "rank 0=+n3 slot=0\n", err: "rankfile: rank 0: +n3 but the allocation has 3 hosts"},
	{hosts: "n1:1", np: []int{2}, mapBy: "rankfile", rankfile: "rank 0=n1 slot=0\nrank 1=n1 slot=1\n", err: "the rankfile places 2 processes on n1 but it has only 1 slot (add --oversubscribe to allow more processes than slots)"},
	{topo: "core:2 pu:2", hosts: "n1:3", np: []int{3}, bindTo: "core", err: "binding to core: every core of n1 already has as many processes as CPUs (add :overload-allowed to bind more)"},
	{hosts: one, np: []int{2}, mapBy: "l3cache", err: "n1 has no l3cache to map by"},
	{hosts: one, np: []int{2}, mapBy: "slot", bindTo: "l3cache", err: "binding to l3cache: n1 has no l3cache to bind to"},
	{hosts: one, np: []int{4}, mapBy: "pe-list=0,2-3:ORDERED", err: "mapping by pe-list=0,2-3:ORDERED: n1 would run more processes than the 3 listed CPUs (a binding with :overload-allowed allows it)"},
	{hosts: one, np: []int{1}, mapBy: "pe-list=0,64", err: "mapping by pe-list=0,64: core 64 does not exist on n1 (it has 64)"},
	{hosts: one, np: []int{2}, mapBy: "slot:PE=40", err: "mapping by slot:PE=40: n1 has no 40 free cores left (a binding with :overload-allowed shares them)"},
	{hosts: one, np: []int{1}, mapBy: "numa:PE=17", err: "mapping by numa:PE=17: numa 0 of n1 has only 16 cores, fewer than PE=17"},
	{hosts: one, np: []int{2}, mapBy: "slot:PE=2", bindTo: "numa", err: "binding to numa: PE=2 binds each process to 2 CPUs, so bind to core or hwthread"},
	{hosts: one, np: []int{0, 2}, err: "every application context needs -n when there are several (context 1 has none)"},
	{topo: "none", hosts: "n1:2", np: []int{1}, mapBy: "package", err: "mapping by package needs the topology of n1"},
	{topo: "none", hosts: "n1:2", np: []int{1}, bindTo: "core", mapBy: "slot", err: "cannot bind on n1: its topology is unknown"},
	{hosts: "n1:2", np: []int{1}, mapBy: "slot:NOLOCAL", local: "N1", err: "no host is left once :NOLOCAL leaves out N1"},
	{hosts: one, np: []int{1}, mapBy: "seq", rankBy: "slot", seq: []string{"n1"}, err: "ranking by slot cannot be used with mapping by seq: the ranks are the file's"},
	{hosts: one, np: []int{1}, mapBy: "rankfile", err: "mapping by rankfile: no rankfile was given"},
	{hosts: one, np: []int{0}, mapBy: "ppr:1048576:hwthread", err: "more than 33554432 processes requested, the most prun places"},
	{hosts: one, np: []int{-1}, err: "app 1: -1 processes"},
	{hosts: one, np: []int{2}, rankBy: "l3cache", err: "ranking by l3cache: n1 has no l3cache to rank by"},
	{topo: "none", hosts: "n1:2", np: []int{2}, rankBy: "core", err: "ranking by core needs the topology of n1"},
	{hosts: one, np: []int{1}, mapBy: "seq", rankBy: "core", seq: []string{"n1"}, err: "ranking by core cannot be used with mapping by seq: the ranks are the file's"},
}

func (c *goldenCase) label() string {
	if c.name != "" {
		return c.name
	}
	return "error/" + c.err
}

func (c *goldenCase) run(t testing.TB) (*Map, *jobspec.Job, error) {
	spec := c.topo
	if spec == "" {
		spec = refNode
	}
	var shared *topology.Topology
	if spec != "none" {
		var err error
		if shared, err = topology.ParseSynthetic(spec); err != nil {
			t.Fatal(err)
		}
	}
	alloc := hostfile.Allocation{Implicit: c.implicit}
	opts := Options{LocalHost: c.local, SeqHosts: c.seq}
	for _, hs := range strings.Split(c.hosts, ",") {
		f := strings.Split(hs, ":")
		h := hostfile.Host{Name: f[0]}
		h.Slots, _ = strconv.Atoi(f[1])
		if len(f) > 2 {
			h.MaxSlots, _ = strconv.Atoi(f[2])
		}
		alloc.Hosts = append(alloc.Hosts, h)
		if c.coreSlots {
			if opts.SlotsFromCores == nil {
				opts.SlotsFromCores = map[string]bool{}
			}
			opts.SlotsFromCores[h.Name] = true
		}
	}
	var err error
	if c.mapBy != "" {
		if opts.MapBy, err = jobspec.ParseMapBy(c.mapBy); err != nil {
			t.Fatal(err)
		}
	}
	if c.rankBy != "" {
		if opts.RankBy, err = jobspec.ParseRankBy(c.rankBy); err != nil {
			t.Fatal(err)
		}
	}
	if c.bindTo != "" {
		if opts.BindTo, err = jobspec.ParseBindTo(c.bindTo); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range c.compat {
		name, val, _ := strings.Cut(o, "=")
		if err := applyCompat(&opts, name, val); err != nil {
			t.Fatal(err)
		}
	}
	if c.rankfile != "" {
		if opts.Rankfile, err = hostfile.ParseRankfile("rf", strings.NewReader(c.rankfile)); err != nil {
			t.Fatal(err)
		}
	}
	j := &jobspec.Job{}
	for _, n := range c.np {
		j.Apps = append(j.Apps, jobspec.App{NP: n, Argv: []string{"a"}})
	}
	m, err := PlaceWith(j, alloc, func(string) *topology.Topology { return shared }, opts)
	return m, j, err
}

func TestGoldenMaps(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range goldenCases {
		t.Run(c.label(), func(t *testing.T) {
			if seen[c.label()] {
				t.Fatal("duplicate case")
			}
			seen[c.label()] = true
			m, j, err := c.run(t)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err = %v\nwant  %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkMap(t, m, j)
			got, err := m.JSON()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", c.name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("map differs from %s:\n%s", path, m.Table())
			}
		})
	}
}

// checkMap verifies what holds for every map: ranks contiguous per app,
// node lists sorted and consistent, local ranks by global rank, bindings
// within the node.
func checkMap(t *testing.T, m *Map, j *jobspec.Job) {
	t.Helper()
	if len(m.Apps) != len(j.Apps) {
		t.Fatalf("%d apps, job has %d", len(m.Apps), len(j.Apps))
	}
	next := 0
	for a, app := range m.Apps {
		if app.Offset != next || j.Apps[a].NP != 0 && app.Size != j.Apps[a].NP {
			t.Fatalf("app %d = %+v, want offset %d size %d", a, app, next, j.Apps[a].NP)
		}
		next += app.Size
	}
	if len(m.Procs) != next {
		t.Fatalf("%d procs, want %d", len(m.Procs), next)
	}
	seen := 0
	for n, node := range m.Nodes {
		if node.ID != n || len(node.Procs) == 0 {
			t.Fatalf("node %d = %+v", n, node)
		}
		for k, r := range node.Procs {
			p := m.Procs[r]
			if p.Node != n || p.LocalRank != k || p.NodeRank != k || (k > 0 && node.Procs[k-1] >= r) {
				t.Fatalf("node %d rank %d: %+v", n, r, p)
			}
			seen++
		}
		if node.Topo != nil {
			for _, r := range node.Procs {
				for _, c := range m.Procs[r].CPUs {
					if !slicesContains(node.Topo.LogicalCPUs(), c) {
						t.Fatalf("rank %d bound to CPU %d, not on %s", r, c, node.Name)
					}
				}
			}
		}
	}
	for r, p := range m.Procs {
		if p.Rank != r || p.App < 0 || p.App >= len(m.Apps) || p.AppRank != r-m.Apps[p.App].Offset {
			t.Fatalf("proc %d = %+v", r, p)
		}
	}
	if seen != len(m.Procs) {
		t.Fatalf("nodes list %d ranks, want %d", seen, len(m.Procs))
	}
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// applyCompat applies one of mpirun's older placement options (the CLI's
// spellings) to o's policies.
func applyCompat(o *Options, name, value string) error {
	pl := jobspec.Placement{MapBy: o.MapBy, BindTo: o.BindTo}
	if err := cli.ApplyCompat(&pl, name, value); err != nil {
		return err
	}
	o.MapBy, o.BindTo = pl.MapBy, pl.BindTo
	return nil
}
