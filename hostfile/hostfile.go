// Package hostfile owns the allocation: which hosts a job may use and how
// many slots each offers. Today it knows the local node; hostfiles, --host
// and resource-manager allocations arrive with the placement work.
package hostfile

import (
	"os"
	"runtime"
)

// Host is one node of the allocation, known by the name the user gave.
type Host struct {
	Name  string
	Slots int
}

// Allocation is the set of hosts a job may use.
type Allocation struct {
	Hosts []Host
	// Implicit is true when the user named no hosts and prun fell back to
	// the local node. Like Hydra, prun then lets a job oversubscribe it:
	// `prun -n 8 ./app` on a laptop should just run.
	Implicit bool
}

// Slots is the total slot count.
func (a Allocation) Slots() int {
	n := 0
	for _, h := range a.Hosts {
		n += h.Slots
	}
	return n
}

// Local is the implicit allocation: this node, one slot per CPU prun may use.
func Local() Allocation {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "localhost"
	}
	return Allocation{Hosts: []Host{{Name: name, Slots: runtime.NumCPU()}}, Implicit: true}
}
