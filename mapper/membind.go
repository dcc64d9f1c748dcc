package mapper

import (
	"fmt"
	"slices"

	"prun/topology"
)

// assignMems gives each process of m the NUMA nodes its memory policy
// names: the given ones, checked against its host, or those holding its
// CPUs.
func assignMems(m *Map, pol MemPolicy) error {
	m.MemBind = pol
	if pol.Mode != MemBind && pol.Mode != MemInterleave {
		return nil
	}
	all := make([]topology.CPUSet, len(m.Nodes)) // every NUMA node of each host
	for n := range m.Nodes {
		t := m.Nodes[n].Topo
		if t == nil {
			return fmt.Errorf("-membind %s: the topology of %s is unknown", pol, m.Nodes[n].Name)
		}
		all[n] = numaNodes(t, nil)
		for _, id := range pol.Nodes {
			if !all[n].Contains(id) {
				return fmt.Errorf("-membind %s: %s has no NUMA node %d (it has %s)", pol, m.Nodes[n].Name, id, all[n])
			}
		}
	}
	// Processes bound alike share one CPU slice: one answer for each.
	type binding struct {
		node  int
		first *int
		n     int
	}
	seen := map[binding]topology.CPUSet{}
	for r := range m.Procs {
		pr := &m.Procs[r]
		switch {
		case pol.Nodes != nil:
			pr.Mems = pol.Nodes
		case len(pr.CPUs) == 0:
			pr.Mems = all[pr.Node]
		default:
			b := binding{pr.Node, &pr.CPUs[0], len(pr.CPUs)}
			mems, ok := seen[b]
			if !ok {
				if mems = numaNodes(m.Nodes[pr.Node].Topo, pr.CPUs); len(mems) == 0 {
					mems = all[pr.Node] // CPUs of no NUMA node: memory anywhere on the host
				}
				seen[b] = mems
			}
			pr.Mems = mems
		}
	}
	return nil
}

// numaNodes returns the OS numbers of t's NUMA nodes that hold any of cpus
// (all of them when cpus is nil).
func numaNodes(t *topology.Topology, cpus topology.CPUSet) topology.CPUSet {
	var ids []int
	for i := range t.Count(topology.NUMANode) {
		if cpus == nil || len(t.CPUs(topology.NUMANode, i).Intersect(cpus)) > 0 {
			ids = append(ids, t.Obj(topology.NUMANode, i).OSIndex)
		}
	}
	slices.Sort(ids)
	return topology.CPUSet(slices.Compact(ids))
}
