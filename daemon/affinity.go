package daemon

import (
	"fmt"

	"prun/mapper"
	"prun/topology"

	"golang.org/x/sys/unix"
)

// binding is where a rank runs: its CPUs (none: unbound) and its memory
// policy over the NUMA nodes mems (-membind).
type binding struct {
	cpus []int
	mem  mapper.MemMode
	mems []int
}

// bindingOf is the binding the map gave the process pr.
func bindingOf(m *mapper.Map, pr mapper.Proc) binding {
	return binding{cpus: pr.CPUs, mem: m.MemBind.Mode, mems: pr.Mems}
}

// start starts cmd bound by b. A child inherits its CPU affinity and memory
// policy from the thread that forks it (and keeps its memory policy across
// exec), so the forking thread takes the rank's for the fork and gives them
// back: the rank's first instruction already runs, and its first page
// comes, where it is bound, with no helper exec. The caller holds the
// thread (startLocked).
func (b binding) start(cmd command) (proc, error) {
	if b.mem != mapper.MemDefault {
		if err := setMemPolicy(b.mem, b.mems); err != nil {
			return proc{}, err
		}
		defer setMemPolicy(mapper.MemDefault, nil)
	}
	if len(b.cpus) == 0 {
		return spawn(cmd)
	}
	var saved, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &saved); err != nil {
		return proc{}, fmt.Errorf("binding: %w", err)
	}
	set.Zero()
	for _, c := range b.cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return proc{}, fmt.Errorf("binding to CPUs %v: %w", b.cpus, err)
	}
	child, err := spawn(cmd)
	if rerr := unix.SchedSetaffinity(0, &saved); rerr != nil && err == nil {
		err = fmt.Errorf("restoring the forking thread's CPUs: %w", rerr)
	}
	return child, err
}

// setMemPolicy sets the calling thread's memory policy (set_mempolicy).
func setMemPolicy(mem mapper.MemMode, nodes []int) error {
	var mode int
	switch mem {
	case mapper.MemDefault:
		return unix.SetMemPolicy(unix.MPOL_DEFAULT, nil)
	case mapper.MemFirstTouch:
		return wrapMem(mem, nodes, unix.SetMemPolicy(unix.MPOL_LOCAL, nil))
	case mapper.MemBind:
		mode = unix.MPOL_BIND
	case mapper.MemInterleave:
		mode = unix.MPOL_INTERLEAVE
	default:
		return fmt.Errorf("memory binding: unknown policy %v", mem)
	}
	var mask unix.CPUSet // a node mask has the layout of a CPU mask
	for _, n := range nodes {
		if n < 0 || n >= len(mask)*64 {
			return fmt.Errorf("memory binding: NUMA node %d out of range", n)
		}
		mask.Set(n)
	}
	if mask.Count() == 0 {
		return fmt.Errorf("memory binding %v: no NUMA node", mem)
	}
	return wrapMem(mem, nodes, unix.SetMemPolicy(mode, &mask))
}

func wrapMem(mem mapper.MemMode, nodes []int, err error) error {
	if err == nil {
		return nil
	}
	if nodes == nil {
		return fmt.Errorf("memory binding %v: %w", mem, err)
	}
	return fmt.Errorf("memory binding %v to NUMA nodes %s: %w", mem, topology.CPUSet(nodes), err)
}
