// Package mapper places the processes of a job onto an allocation and ranks
// them. It is a pure function of (job, allocation): no I/O, no state.
package mapper

import (
	"fmt"
	"strings"

	"prun/hostfile"
	"prun/jobspec"
)

// Node is a host that runs at least one process of the job.
type Node struct {
	ID    int    // index in Map.Nodes, the PMIx node id
	Name  string // as the user named it
	Slots int
	Procs []int // global ranks on this node, ascending
}

// Proc is one placed process.
type Proc struct {
	Rank      int
	App       int
	AppRank   int
	Node      int // index into Map.Nodes
	LocalRank int // position among the job's ranks on its node, by global rank
	NodeRank  int // same, across all jobs on the node (one job today)
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
}

// Oversubscribed reports whether node n runs more processes than it has slots.
func (m *Map) Oversubscribed(n int) bool { return len(m.Nodes[n].Procs) > m.Nodes[n].Slots }

// Place fills the allocation's hosts in order, one process per slot (map-by
// slot, rank-by slot), and resolves every omitted -n to one process per slot.
// When the job needs more processes than there are slots it fails, unless
// the allocation is implicit: then the extra processes are dealt round-robin.
func Place(job *jobspec.Job, alloc hostfile.Allocation) (*Map, error) {
	slots := alloc.Slots()
	if len(alloc.Hosts) == 0 || slots <= 0 {
		return nil, fmt.Errorf("the allocation has no slots")
	}
	m := &Map{Slots: slots}
	total := 0
	for i := range job.Apps {
		if job.Apps[i].NP == 0 {
			job.Apps[i].NP = slots
		}
		m.Apps = append(m.Apps, App{Offset: total, Size: job.Apps[i].NP})
		total += job.Apps[i].NP
	}
	if total > slots && !alloc.Implicit {
		names := make([]string, len(alloc.Hosts))
		for i, h := range alloc.Hosts {
			names[i] = h.Name
		}
		return nil, fmt.Errorf("%d processes requested but only %d slots are available on %s",
			total, slots, strings.Join(names, ","))
	}
	hostOf := make([]int, total)
	r := 0
	for h, host := range alloc.Hosts {
		for s := 0; s < host.Slots && r < total; s++ {
			hostOf[r] = h
			r++
		}
	}
	for i := 0; r < total; i++ { // oversubscription: deal the rest round-robin
		hostOf[r] = i % len(alloc.Hosts)
		r++
	}
	nodeOf := map[int]int{}
	for rank, app := 0, 0; rank < total; rank++ {
		for rank >= m.Apps[app].Offset+m.Apps[app].Size {
			app++
		}
		h := hostOf[rank]
		n, ok := nodeOf[h]
		if !ok {
			n = len(m.Nodes)
			nodeOf[h] = n
			m.Nodes = append(m.Nodes, Node{ID: n, Name: alloc.Hosts[h].Name, Slots: alloc.Hosts[h].Slots})
		}
		local := len(m.Nodes[n].Procs)
		m.Nodes[n].Procs = append(m.Nodes[n].Procs, rank)
		m.Procs = append(m.Procs, Proc{Rank: rank, App: app, AppRank: rank - m.Apps[app].Offset,
			Node: n, LocalRank: local, NodeRank: local})
	}
	return m, nil
}
