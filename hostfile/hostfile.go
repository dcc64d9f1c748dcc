// Package hostfile owns the allocation: which hosts a job may use and how
// many slots each offers.
//
// The allocation comes from one of four places, read by pure parsers here
// (no I/O beyond reading what they are given) so that every rule can be
// tested and fuzzed without a cluster:
//
//   - a hostfile (ParseHostfile), in Open MPI/PRRTE syntax;
//   - --host (ParseHostList), in Open MPI/PRRTE syntax;
//   - a resource manager's environment (Detect): Slurm, PBS/Torque, LSF;
//   - nothing: the local node (Local).
//
// All of them produce Entry values. Select narrows one list by another
// (--host or a hostfile filtering a hostfile or a resource-manager
// allocation), and NewAllocation turns the result into the Allocation the
// mapper consumes, filling in the core counts only topology knows.
//
// Rankfiles (ParseRankfile) live here too because they name hosts with the
// same rules.
package hostfile

import (
	"fmt"
	"os"
	"runtime"
)

// Host is one node of the allocation, known by the name the user gave.
type Host struct {
	Name  string
	Slots int
	// MaxSlots caps oversubscription of this host (0: no cap), from a
	// hostfile's max_slots=.
	MaxSlots int
	// User and Port are the login for remote launch ("" and 0: defaults).
	User string
	Port int
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

// Kind tells a named host from the relative node specs of --host.
type Kind int

const (
	// Named is a host known by name or address.
	Named Kind = iota
	// RelNode is "+nN": the N-th node (from 0) of the allocation the
	// entry is later selected from.
	RelNode
	// RelEmpty is "+e" or "+e:N": N (Count; 0 means all) nodes of that
	// allocation not otherwise selected.
	RelEmpty
)

// Entry is one host as a hostfile, --host or a resource manager names it,
// before topology is known. Relative entries (Kind != Named) only mean
// something against another list and are resolved by Select.
type Entry struct {
	Kind Kind
	// Name is the host name or address, IPv6 without brackets.
	Name string
	// User and Port come from user@host, user= and port= (hostfile only).
	User string
	Port int
	// Slots is the slot count. When SlotsFromCores is set it is 0 and the
	// count is the node's cores, which only topology can tell: a hostfile
	// line without slots=, or --host host:*.
	Slots          int
	SlotsFromCores bool
	// SlotsGiven says the user wrote the count (slots=, max_slots=, :N, or
	// a repeated host) rather than taking the default; Select lets a given
	// count narrow the host it selects, and a default keeps the base's.
	SlotsGiven bool
	// MaxSlots is a hostfile's max_slots= (0: no cap).
	MaxSlots int
	// Exclude marks "^host": drop this host from whatever it is applied to.
	Exclude bool
	// Index is the N of "+nN"; Count the N of "+e:N" (0: all empty nodes).
	Index, Count int
}

// NewAllocation turns resolved entries into an Allocation. cores answers
// the core count of a host whose slots come from its topology
// (SlotsFromCores); it is called only for those. Exclusions are skipped
// (they did their work in Select or the hostfile); a relative entry is an
// error because there was nothing to resolve it against.
func NewAllocation(entries []Entry, cores func(host string) (int, error)) (Allocation, error) {
	var a Allocation
	for _, e := range entries {
		switch {
		case e.Exclude:
			continue
		case e.Kind != Named:
			return Allocation{}, fmt.Errorf("%s: relative node specs need a hostfile or resource-manager allocation to select from", e.hostListItem())
		}
		h := Host{Name: e.Name, Slots: e.Slots, MaxSlots: e.MaxSlots, User: e.User, Port: e.Port}
		if e.SlotsFromCores {
			if cores == nil {
				return Allocation{}, fmt.Errorf("host %s: slots come from its core count, which is unknown", quote(e.Name))
			}
			n, err := cores(e.Name)
			if err != nil {
				return Allocation{}, fmt.Errorf("host %s: core count: %w", quote(e.Name), err)
			}
			if n < 1 {
				return Allocation{}, fmt.Errorf("host %s: core count %d", quote(e.Name), n)
			}
			h.Slots = n
		}
		a.Hosts = append(a.Hosts, h)
	}
	return a, nil
}
