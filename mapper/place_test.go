package mapper

import (
	"encoding/json"
	"fmt"
	"os"
	"prun/jobspec"
	"slices"
	"strings"
	"testing"

	"prun/hostfile"
	"prun/topology"
)

func refTopo(t testing.TB) *topology.Topology {
	t.Helper()
	topo, err := topology.ParseSynthetic(refNode)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func hosts(n, slots int) hostfile.Allocation {
	var a hostfile.Allocation
	for i := range n {
		a.Hosts = append(a.Hosts, hostfile.Host{Name: fmt.Sprintf("n%d", i+1), Slots: slots})
	}
	return a
}

func TestJSONAndTable(t *testing.T) {
	topo := refTopo(t)
	m, err := PlaceWith(job(2, 1), hosts(2, 2), func(h string) *topology.Topology {
		if h == "n2" {
			return nil
		}
		return topo
	}, Options{MapBy: MapPolicy{By: MapSlot}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"procs":[
{"rank":0,"app":0,"host":"n1","local_rank":0,"node_rank":0,"cpus":"0-31"},
{"rank":1,"app":0,"host":"n1","local_rank":1,"node_rank":1,"cpus":"0-31"},
{"rank":2,"app":1,"host":"n2","local_rank":0,"node_rank":0,"cpus":""}
]}
`
	if string(got) != want {
		t.Errorf("JSON:\n%s\nwant\n%s", got, want)
	}
	var decoded struct {
		Procs []struct {
			Rank, App, LocalRank, NodeRank int
			Host, CPUs                     string
		}
	}
	if err := json.Unmarshal(got, &decoded); err != nil || len(decoded.Procs) != 3 || decoded.Procs[2].Host != "n2" {
		t.Errorf("decoded %+v, %v", decoded, err)
	}
	wantTable := "" +
		"rank  app  host  local  cpus\n" +
		"   0    0  n1        0  0-31\n" +
		"   1    0  n1        1  0-31\n" +
		"   2    1  n2        0  -\n"
	if tab := m.Table(); tab != wantTable {
		t.Errorf("Table:\n%s\nwant\n%s", tab, wantTable)
	}
	if m.Nodes[0].Topo != topo || m.Nodes[1].Topo != nil || m.MapBy.By != MapSlot || m.RankBy.By != RankSlot || m.BindTo.To != BindNUMA {
		t.Errorf("nodes %+v, policies %v %v %v", m.Nodes, m.MapBy, m.RankBy, m.BindTo)
	}
	// Host names are JSON strings.
	m.Nodes[0].Name = "a\"b"
	if got, _ := m.JSON(); !strings.Contains(string(got), `"host":"a\"b"`) {
		t.Errorf("JSON escaping: %s", got)
	}
}

// TestBindingsShared checks that processes bound alike share one CPUSet.
func TestBindingsShared(t *testing.T) {
	topo := refTopo(t)
	for _, mapBy := range []string{"hwthread", "package:PE=3", "pe-list=1-2"} {
		mp, err := jobspec.ParseMapBy(mapBy)
		if err != nil {
			t.Fatal(err)
		}
		m, err := PlaceWith(job(8), hosts(4, 2), func(string) *topology.Topology { return topo }, Options{MapBy: mp})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range m.Nodes[1:] {
			for k, r := range n.Procs {
				a, b := m.Procs[m.Nodes[0].Procs[k]].CPUs, m.Procs[r].CPUs
				if len(a) == 0 || !a.Equal(b) || &a[0] != &b[0] {
					t.Errorf("%s: rank %d %v and rank %d %v do not share their CPUs", mapBy, m.Nodes[0].Procs[k], a, r, b)
				}
			}
		}
	}
}

func TestOversubscribedFlag(t *testing.T) {
	topo := refTopo(t)
	alloc := hosts(2, 2)
	alloc.Implicit = true
	m, err := PlaceWith(job(5), alloc, func(string) *topology.Topology { return topo }, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Oversubscribed(0) || m.Oversubscribed(1) || len(m.Nodes[0].Procs) != 3 {
		t.Fatalf("nodes %+v", m.Nodes)
	}
	for _, r := range m.Nodes[0].Procs {
		if m.Procs[r].CPUs != nil {
			t.Errorf("rank %d on an oversubscribed node is bound to %v", r, m.Procs[r].CPUs)
		}
	}
	for _, r := range m.Nodes[1].Procs {
		if m.Procs[r].CPUs == nil {
			t.Errorf("rank %d is unbound", r)
		}
	}
}

// FuzzPlaceWith maps small jobs with any parseable policies: no panic, and
// every map keeps the invariants checkMap checks.
// Ranking by an object type that does not cover every CPU: the processes on
// the CPUs outside come last, in mapping order.
func TestRankByPartialObject(t *testing.T) {
	f, err := os.Open("testdata/partial-l3.xml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	topo, err := topology.ParseXML(f)
	if err != nil {
		t.Fatal(err)
	}
	var opts Options
	if opts.MapBy, err = jobspec.ParseMapBy("core"); err != nil {
		t.Fatal(err)
	}
	if opts.RankBy, err = jobspec.ParseRankBy("l3cache"); err != nil {
		t.Fatal(err)
	}
	j := job(4)
	m, err := PlaceWith(j, hosts(1, 4), func(string) *topology.Topology { return topo }, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkMap(t, m, j)
	var got []int
	for _, p := range m.Procs {
		got = append(got, p.CPUs...)
	}
	if want := []int{2, 3, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("ranks 0-3 on CPUs %v, want %v", got, want)
	}
	if m.RankBy.String() != "l3cache" {
		t.Errorf("RankBy = %v", m.RankBy)
	}
}

// Ranking by an object through one queue per object (when no mapped object
// spans two) gives the map the general queue-per-locale path gives.
func TestRankByObjectShortcut(t *testing.T) {
	mapped := 0
	for _, spec := range []string{refNode, cacheNode, "pack:2 core:3 pu:2", "pack:2 pu:3"} {
		topo, err := topology.ParseSynthetic(spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, mapBy := range []string{"hwthread", "core", "l2cache", "numa", "package", "slot", "node", "ppr:3:core", "core:SPAN"} {
			for _, rankBy := range []string{"hwthread", "core", "l1cache", "l3cache:span", "numa:fill", "package", "package:span"} {
				var opts Options
				opts.MapBy, _ = jobspec.ParseMapBy(mapBy + ":OVERSUBSCRIBE")
				opts.RankBy, _ = jobspec.ParseRankBy(rankBy)
				var maps [2]string
				for i, slow := range []bool{false, true} {
					rankSlowPath = slow
					m, err := PlaceWith(job(37, 11), hosts(3, 9), func(string) *topology.Topology { return topo }, opts)
					if err != nil {
						maps[i] = err.Error()
						continue
					}
					b, _ := m.JSON()
					maps[i] = string(b)
				}
				rankSlowPath = false
				if strings.HasPrefix(maps[0], "{") {
					mapped++
				}
				if maps[0] != maps[1] {
					t.Errorf("%s, --map-by %s --rank-by %s: the shortcut's map differs:\n%s\n%s", spec, mapBy, rankBy, maps[0], maps[1])
				}
			}
		}
	}
	if mapped < 150 { // the others are errors (no l1cache...), the same both ways
		t.Errorf("only %d of 252 cases mapped", mapped)
	}
}

func FuzzPlaceWith(f *testing.F) {
	f.Add("core", "", "", uint8(3), uint8(4), uint8(9), uint8(2), false)
	f.Add("ppr:2:numa:PE=2", "span", "core", uint8(2), uint8(1), uint8(0), uint8(0), false)
	f.Add("package:SPAN", "node", "l3:overload-allowed", uint8(3), uint8(2), uint8(30), uint8(0), true)
	f.Add("slot:PE=5:HWTCPUS", "", "hwthread", uint8(1), uint8(64), uint8(20), uint8(1), false)
	f.Add("pe-list=0,5-7:ORDERED", "", "", uint8(2), uint8(8), uint8(0), uint8(1), true)
	f.Add("node:OVERSUBSCRIBE", "slot", "numa:if-supported", uint8(4), uint8(1), uint8(9), uint8(3), false)
	f.Add("seq", "", "", uint8(2), uint8(3), uint8(5), uint8(0), false)
	f.Add("rankfile", "", "", uint8(2), uint8(3), uint8(0), uint8(0), false)
	f.Add("core", "package", "", uint8(2), uint8(9), uint8(12), uint8(0), false)
	f.Add("hwthread", "l2:span", "", uint8(3), uint8(5), uint8(14), uint8(1), false)
	f.Add("ppr:3:package", "core:fill", "", uint8(2), uint8(64), uint8(0), uint8(2), true)
	f.Add("slot", "numa", "", uint8(4), uint8(2), uint8(7), uint8(3), false)
	f.Add("", "", "", uint8(2), uint8(2), uint8(9), uint8(16), false)
	f.Add("", "", "user:0+1,3", uint8(2), uint8(4), uint8(9), uint8(0), false)
	f.Add("", "", "rr", uint8(2), uint8(4), uint8(9), uint8(1), false)
	f.Add("core", "", "core:2", uint8(1), uint8(8), uint8(3), uint8(0), false)
	topos := []*topology.Topology{}
	for _, s := range []string{refNode, cacheNode, "core:2 pu:2", "pack:2 pu:3"} {
		t, err := topology.ParseSynthetic(s)
		if err != nil {
			f.Fatal(err)
		}
		topos = append(topos, t)
	}
	f.Fuzz(func(t *testing.T, mapBy, rankBy, bindTo string, nhosts, slots, np, kind uint8, implicit bool) {
		var opts Options
		var err error
		if mapBy != "" {
			if opts.MapBy, err = jobspec.ParseMapBy(mapBy); err != nil {
				return
			}
		}
		if rankBy != "" {
			if opts.RankBy, err = jobspec.ParseRankBy(rankBy); err != nil {
				return
			}
		}
		if bindTo != "" {
			if opts.BindTo, err = jobspec.ParseBindTo(bindTo); err != nil {
				return
			}
		}
		if kind&16 != 0 { // Hydra's host lists
			if err := applyCompat(&opts, "hydra-hosts", ""); err != nil {
				t.Fatal(err)
			}
		}
		alloc := hosts(int(nhosts%5)+1, int(slots%70))
		alloc.Implicit = implicit
		alloc.Hosts[0].MaxSlots = int(np % 7)
		opts.LocalHost = "n1"
		if kind%4 != 2 {
			opts.SeqHosts = []string{"n1", "n2", "n1", "n3"}
		}
		for r := range 5 {
			opts.Rankfile = append(opts.Rankfile, hostfile.RankEntry{Rank: r, Node: r % 3,
				Slot: hostfile.Slot{CPUs: []int{r, int(np)}}})
		}
		topo := func(h string) *topology.Topology {
			if kind == 3 && h == "n2" {
				return nil
			}
			return topos[int(kind)%len(topos)]
		}
		j := job(int(np % 150))
		if kind%2 == 1 {
			j = job(int(np%40)+1, int(slots%9)+1)
			// The second app's own hosts (a later context's -H).
			j.Apps[1].Hosts = [...]string{"", "n2", "n1,n3", "n3:2,n9"}[kind/4%4]
		}
		m, err := PlaceWith(j, alloc, topo, opts)
		if err != nil {
			oneLine(t, err)
			return
		}
		checkMap(t, m, j)
		if own := j.Apps[len(j.Apps)-1].Hosts; own != "" {
			for _, p := range m.Procs {
				if h := m.Nodes[p.Node].Name; p.App == 1 && !slices.Contains(strings.Split(own, ","), h) {
					t.Fatalf("app 1 (hosts %s) placed on %s", own, h)
				}
			}
		}
		if _, err := m.JSON(); err != nil {
			t.Fatal(err)
		}
	})
}

// A context's own --host (mpirun's per-context -H) keeps its app on those
// hosts, whatever the policy; the other apps use the whole allocation.
func TestAppHosts(t *testing.T) {
	where := func(m *Map) string {
		var s []string
		for _, p := range m.Procs {
			s = append(s, fmt.Sprintf("%d:%s", p.App, m.Nodes[p.Node].Name))
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		name  string
		hosts []string // per app
		nps   []int
		mp    MapPolicy
		want  string
	}{
		{"slot", []string{"n3", "n1,n2"}, []int{1, 3}, MapPolicy{By: MapSlot}, "0:n3 1:n1 1:n1 1:n2"},
		{"node", []string{"n2,n3", ""}, []int{3, 3}, MapPolicy{By: MapNode}, "0:n2 0:n3 0:n2 1:n1 1:n3 1:n1"},
		{"ppr", []string{"n3", ""}, []int{2, 2}, MapPolicy{By: MapPPR, PPR: 1, PPRObject: topology.Machine}, "0:n3"},
		{"short name", []string{"n3.example.org", ""}, []int{1, 1}, MapPolicy{By: MapSlot}, "0:n3 1:n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := job(tc.nps...)
			for a, h := range tc.hosts {
				j.Apps[a].Hosts = h
			}
			m, err := PlaceWith(j, hosts(3, 2), nil, Options{MapBy: tc.mp})
			if tc.name == "ppr" {
				// n3 has one node object: 1 of app 1's 2 processes fits there.
				if err == nil || !strings.Contains(err.Error(), "app 1: mapping by ppr:1:node places 1 of its 2 processes on its hosts") {
					t.Fatalf("ppr: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := where(m); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	// Errors: a host outside the allocation, too few slots on the app's
	// hosts (the job as a whole fits), seq.
	j := job(1, 1)
	j.Apps[0].Hosts = "n9"
	if _, err := PlaceWith(j, hosts(3, 2), nil, Options{}); err == nil || err.Error() != "app 1: host n9 is not in the allocation" {
		t.Errorf("unknown host: %v", err)
	}
	j = job(3, 1)
	j.Apps[0].Hosts = "n1"
	if _, err := PlaceWith(j, hosts(3, 2), nil, Options{MapBy: MapPolicy{By: MapSlot}}); err == nil ||
		err.Error() != "app 1: 3 processes requested but its hosts n1 have 2 slots (the other apps' processes included)" {
		t.Errorf("too few slots: %v", err)
	}
	if _, err := PlaceWith(j, hosts(3, 2), nil, Options{MapBy: MapPolicy{By: MapSlot, Oversubscribe: true}}); err != nil {
		t.Errorf("oversubscribing its own hosts: %v", err)
	}
	if _, err := PlaceWith(j, hosts(3, 2), nil, Options{MapBy: MapPolicy{By: MapSeq}}); err == nil || !strings.Contains(err.Error(), "cannot be combined with mapping by seq") {
		t.Errorf("seq: %v", err)
	}
}

// Hydra's -ppn: N on each host in turn, round after round beyond the
// slots, ranked as placed; Open MPI's -N refuses what does not fit.
func TestPPNCycle(t *testing.T) {
	var opts Options
	if err := applyCompat(&opts, "ppn", "2"); err != nil {
		t.Fatal(err)
	}
	m, err := PlaceWith(job(7), hosts(2, 1), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.RankMap(), "(n1:0,1,4,5)\n(n2:2,3,6)\n"; got != want {
		t.Errorf("rank map %q, want %q", got, want)
	}
	opts = Options{}
	if err := applyCompat(&opts, "N", "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := PlaceWith(job(7), hosts(2, 2), nil, opts); err == nil {
		t.Error("-N 2 placed 7 processes on 2 hosts")
	}
	opts = Options{}
	if err := applyCompat(&opts, "ppn", "0"); err == nil {
		t.Error("-ppn 0 accepted")
	}
}

// Hydra's host lists: a job larger than the slots goes round the hosts
// again, each its slots per round, ranked as placed (mpiexec.hydra -n 5
// -hosts a,b:2 is a:0,3 b:1,2,4); an explicit mapping or
// NOOVERSUBSCRIBE keeps Open MPI's rules.
func TestHydraHostsCycle(t *testing.T) {
	alloc := hostfile.Allocation{Hosts: []hostfile.Host{{Name: "a", Slots: 1}, {Name: "b", Slots: 2}}}
	var opts Options
	if err := applyCompat(&opts, "hydra-hosts", ""); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{5: "(a:0,3)\n(b:1,2,4)\n", 3: "(a:0)\n(b:1,2)\n", 7: "(a:0,3,6)\n(b:1,2,4,5)\n"} {
		m, err := PlaceWith(job(n), alloc, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.RankMap(); got != want {
			t.Errorf("-n %d: %q, want %q", n, got, want)
		}
	}
	for _, first := range [][2]string{{"nooversubscribe", ""}, {"bynode", ""}} {
		opts := Options{}
		if err := applyCompat(&opts, first[0], first[1]); err != nil {
			t.Fatal(err)
		}
		if err := applyCompat(&opts, "hydra-hosts", ""); err != nil {
			t.Fatal(err)
		}
		if opts.MapBy.Cycle {
			t.Errorf("--%s then hydra-hosts: cycles", first[0])
		}
	}
	// max_slots still caps a host
	capped := hostfile.Allocation{Hosts: []hostfile.Host{{Name: "a", Slots: 1, MaxSlots: 1}, {Name: "b", Slots: 1, MaxSlots: 2}}}
	if _, err := PlaceWith(job(4), capped, nil, opts); err == nil || !strings.Contains(err.Error(), "max_slots caps") {
		t.Errorf("max_slots: %v", err)
	}
}

// A user: binding built without ParseBindTo is checked where it is used:
// an empty list is an error, not a division by zero.
func TestUserBindingChecked(t *testing.T) {
	_, err := PlaceWith(job(2), hosts(1, 2), nil, Options{BindTo: BindPolicy{To: BindUser}})
	if err == nil || !strings.Contains(err.Error(), "user: needs CPU numbers") {
		t.Errorf("empty user list: %v", err)
	}
}

func oneLine(t *testing.T, err error) {
	t.Helper()
	if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || msg == "" || len(msg) > 1024 {
		t.Fatalf("error is not one short line: %q", msg)
	}
}
