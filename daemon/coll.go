package daemon

import "prun/pmixsrv"

// NodesOf names the nodes hosting procs (a wildcard rank: every node with
// ranks of its job), from the plans this daemon holds: every daemon holds
// every job's plan, so each can tell which nodes of its subtree take part
// in a collective. ok is false for a namespace it does not know or a rank
// out of range.
func (d *Daemon) NodesOf(procs []pmixsrv.Proc) (nodes []string, ok bool) {
	seen := map[string]bool{}
	for _, p := range procs {
		sh := d.shell(p.Nspace)
		if sh == nil {
			return nil, false
		}
		m := sh.plan.Map
		if p.Rank == pmixsrv.RankWildcard {
			for _, n := range m.Nodes {
				if len(n.Procs) > 0 && !seen[n.Name] {
					seen[n.Name] = true
					nodes = append(nodes, n.Name)
				}
			}
			continue
		}
		if int(p.Rank) >= len(m.Procs) {
			return nil, false
		}
		if name := m.Nodes[m.Procs[p.Rank].Node].Name; !seen[name] {
			seen[name] = true
			nodes = append(nodes, name)
		}
	}
	return nodes, true
}
