package jobspec

import (
	"fmt"
	"strings"

	"prun/topology"
)

// MemMode is a memory binding policy: where a process's pages come from.
type MemMode int

const (
	MemDefault    MemMode = iota // no policy: the kernel's default
	MemFirstTouch                // the NUMA node of the CPU that first touches a page (MPOL_LOCAL)
	MemBind                      // only the process's NUMA nodes (MPOL_BIND)
	MemInterleave                // round-robin over the process's NUMA nodes (MPOL_INTERLEAVE)
)

var memModeNames = [...]string{MemDefault: "default", MemFirstTouch: "firsttouch", MemBind: "bind", MemInterleave: "interleave"}

func (m MemMode) String() string {
	if m >= 0 && int(m) < len(memModeNames) {
		return memModeNames[m]
	}
	return fmt.Sprintf("MemMode(%d)", int(m))
}

// MemPolicy is a parsed -membind (Hydra's).
type MemPolicy struct {
	Mode MemMode
	// Nodes are the NUMA nodes (OS numbers) given with bind: or
	// interleave:; nil means the nodes local to each process's CPUs (every
	// node of its host when it is not bound).
	Nodes topology.CPUSet `json:",omitempty"`
}

// String writes the policy as ParseMemBind reads it.
func (p MemPolicy) String() string {
	if p.Nodes != nil {
		return p.Mode.String() + ":" + p.Nodes.String()
	}
	return p.Mode.String()
}

// ParseMemBind reads Hydra's -membind: firsttouch, bind[:NODES] or
// interleave[:NODES], NODES a list of NUMA node numbers ("0-1,3").
// nexttouch and replicate, which hwloc offers elsewhere, Linux has not.
func ParseMemBind(s string) (MemPolicy, error) {
	p, err := parseMemBind(s)
	if err != nil {
		return MemPolicy{}, fmt.Errorf("-membind %s: %v", q(s), err)
	}
	return p, nil
}

func parseMemBind(s string) (MemPolicy, error) {
	name, list, hasList := strings.Cut(s, ":")
	var p MemPolicy
	switch strings.ToLower(name) {
	case "firsttouch":
		p.Mode = MemFirstTouch
	case "bind":
		p.Mode = MemBind
	case "interleave":
		p.Mode = MemInterleave
	case "nexttouch", "replicate":
		return p, fmt.Errorf("Linux has no %s policy (want firsttouch, bind or interleave)", strings.ToLower(name))
	default:
		return p, fmt.Errorf("unknown policy (want firsttouch, bind[:NODES] or interleave[:NODES])")
	}
	if !hasList {
		return p, nil
	}
	if p.Mode == MemFirstTouch {
		return p, fmt.Errorf("firsttouch takes no NUMA nodes")
	}
	nodes, err := topology.ParseCPUSet(list)
	if err != nil || len(nodes) == 0 {
		return p, fmt.Errorf("want NUMA node numbers after %q, like 0-1,3", name+":")
	}
	p.Nodes = nodes
	return p, nil
}
