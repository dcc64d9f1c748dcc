// Package mapper places the processes of a job onto an allocation, ranks
// them and binds them to CPUs. It is a pure function of (job, allocation,
// node topologies, options): no I/O, no state, and the job it is given is
// only read (Map.Apps says how many processes each app got).
// docs/placement.md states the rules.
package mapper

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"prun/hostfile"
	"prun/jobspec"
	"prun/topology"
)

// Node is a host that runs at least one process of the job.
type Node struct {
	ID    int    // index in Map.Nodes, the PMIx node id
	Name  string // as the user named it
	Slots int
	Procs []int // global ranks on this node, ascending
	// Topo is the node's topology (shared by nodes with the same
	// hardware); nil when unknown.
	Topo *topology.Topology `json:"-"`
}

// Proc is one placed process.
type Proc struct {
	Rank      int
	App       int
	AppRank   int
	Node      int // index into Map.Nodes
	LocalRank int // position among the job's ranks on its node, by global rank
	NodeRank  int // same, across all jobs on the node (one job today)
	// CPUs is the binding (OS CPU numbers); nil when unbound. Processes
	// bound alike share one slice: do not modify it.
	CPUs topology.CPUSet
	// Mems are the NUMA nodes (OS numbers) of its memory policy, with
	// Map.MemBind bind or interleave; nil otherwise. Shared like CPUs.
	Mems topology.CPUSet `json:",omitempty"`
}

// App is the rank range of one application context.
type App struct {
	Offset int // first global rank (PMIX_APPLDR)
	Size   int
}

// Map is the placement of a whole job.
type Map struct {
	Nodes []Node
	Procs []Proc
	Apps  []App
	Slots int // slots of the allocation, for the universe size
	// The policies the map follows, defaults resolved. RankBy is
	// RankDefault for seq and rankfile (ranks as the file says); BindTo.To
	// is BindNone when no process is bound, BindDefault for a rankfile's
	// own CPUs.
	MapBy   MapPolicy
	RankBy  RankPolicy
	BindTo  BindPolicy
	MemBind MemPolicy // -membind; each process's nodes are in Proc.Mems
}

// Oversubscribed reports whether node n runs more processes than it has slots.
func (m *Map) Oversubscribed(n int) bool { return len(m.Nodes[n].Procs) > m.Nodes[n].Slots }

// Place fills the allocation's hosts in order, one process per slot (map-by
// slot, rank-by slot), without binding, and resolves every omitted -n to one
// process per slot. When the job needs more processes than there are slots
// it fails, unless the allocation is implicit: then the extra processes are
// spread evenly from the first host.
func Place(job *jobspec.Job, alloc hostfile.Allocation) (*Map, error) {
	slots := alloc.Slots()
	if len(alloc.Hosts) == 0 || slots <= 0 {
		return nil, fmt.Errorf("the allocation has no slots")
	}
	// The job is the caller's: the counts go into a copy (Map.Apps says
	// what was placed).
	j := *job
	j.Apps = make([]jobspec.App, len(job.Apps))
	for i, app := range job.Apps {
		if app.NP == 0 {
			app.NP = slots
		}
		j.Apps[i] = app
	}
	return PlaceWith(&j, alloc, nil, Options{MapBy: MapPolicy{By: MapSlot}, BindTo: BindPolicy{To: BindNone}})
}

// JSON writes the map as {"procs":[{"rank":0,"app":0,"host":"n1",
// "local_rank":0,"node_rank":0,"cpus":"0-1"},...]}, one process per line;
// "cpus" is "" for an unbound process; "mems", the NUMA nodes of its memory
// policy, only with -membind bind or interleave.
func (m *Map) JSON() ([]byte, error) {
	hosts := make([][]byte, len(m.Nodes))
	for i, n := range m.Nodes {
		b, err := json.Marshal(n.Name)
		if err != nil {
			return nil, err
		}
		hosts[i] = b
	}
	out := make([]byte, 0, 16+len(m.Procs)*80)
	out = append(out, `{"procs":[`...)
	for i := range m.Procs {
		p := &m.Procs[i]
		if p.Node < 0 || p.Node >= len(hosts) {
			return nil, fmt.Errorf("rank %d: node %d out of range", p.Rank, p.Node)
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, "\n{\"rank\":"...)
		out = strconv.AppendInt(out, int64(p.Rank), 10)
		out = append(out, `,"app":`...)
		out = strconv.AppendInt(out, int64(p.App), 10)
		out = append(out, `,"host":`...)
		out = append(out, hosts[p.Node]...)
		out = append(out, `,"local_rank":`...)
		out = strconv.AppendInt(out, int64(p.LocalRank), 10)
		out = append(out, `,"node_rank":`...)
		out = strconv.AppendInt(out, int64(p.NodeRank), 10)
		out = append(out, `,"cpus":"`...)
		out = append(out, p.CPUs.String()...)
		if p.Mems != nil { // -membind bind or interleave: the NUMA nodes
			out = append(out, `","mems":"`...)
			out = append(out, p.Mems.String()...)
		}
		out = append(out, `"}`...)
	}
	out = append(out, "\n]}\n"...)
	return out, nil
}

// Table writes the map for humans: one line per rank with its app, host,
// local rank and CPUs ("-" when unbound), numbers right-aligned.
// RankMap is the map as Hydra's -print-rank-map prints it: a line per host,
// "(host:0,1,4)", hosts in map order.
func (m *Map) RankMap() string {
	ranks := make([][]string, len(m.Nodes))
	for r, p := range m.Procs {
		ranks[p.Node] = append(ranks[p.Node], strconv.Itoa(r))
	}
	var b strings.Builder
	for i, n := range m.Nodes {
		if len(ranks[i]) > 0 {
			fmt.Fprintf(&b, "(%s:%s)\n", n.Name, strings.Join(ranks[i], ","))
		}
	}
	return b.String()
}

func (m *Map) Table() string {
	host := func(p *Proc) string {
		if p.Node >= 0 && p.Node < len(m.Nodes) {
			return m.Nodes[p.Node].Name
		}
		return "?"
	}
	wr, wa, wh, wl := len("rank"), len("app"), len("host"), len("local")
	for i := range m.Procs {
		p := &m.Procs[i]
		wr = max(wr, len(strconv.Itoa(p.Rank)))
		wa = max(wa, len(strconv.Itoa(p.App)))
		wh = max(wh, len(host(p)))
		wl = max(wl, len(strconv.Itoa(p.LocalRank)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%*s  %*s  %-*s  %*s  cpus\n", wr, "rank", wa, "app", wh, "host", wl, "local")
	for i := range m.Procs {
		p := &m.Procs[i]
		cpus := "-"
		if p.CPUs != nil {
			cpus = p.CPUs.String()
		}
		fmt.Fprintf(&b, "%*d  %*d  %-*s  %*d  %s\n", wr, p.Rank, wa, p.App, wh, host(p), wl, p.LocalRank, cpus)
	}
	return b.String()
}
