package launcher

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"prun/hostfile"
	"prun/jobspec"
	"prun/mapper"
)

// display shows what the user asked to see of the allocation and the map.
func (r *run) display(job *jobspec.Job, m *mapper.Map) int {
	for _, d := range job.Place.Display {
		switch d {
		case jobspec.DisplayAllocation:
			fmt.Fprint(r.opts.Stdout, displayAllocation(r.alloc, r.allocSource))
		case jobspec.DisplayMap:
			fmt.Fprint(r.opts.Stdout, m.Table())
		case jobspec.DisplayMapJSON:
			b, err := m.JSON()
			if err != nil {
				r.errorf("%v", err)
				return ExitFailure
			}
			fmt.Fprintf(r.opts.Stdout, "%s\n", b)
		case jobspec.DisplayTopo:
			fmt.Fprint(r.opts.Stdout, r.displayTopologies(m))
		case jobspec.DisplayRankMap:
			fmt.Fprint(r.opts.Stdout, m.RankMap())
		}
	}
	return 0
}

// allocator is what a runtime grants a job to map onto: the allocation,
// where it came from, and the hosts whose slots are their cores.
type allocator func(job *jobspec.Job) (alloc hostfile.Allocation, source string, fromCores map[string]bool, err error)

// mapJob maps the job onto what grant gives it (standalone: the allocation
// resolved for it; in a persistent runtime, its nodes less what running
// jobs use). A nil map comes with prun's exit status and the reason.
func (r *run) mapJob(job *jobspec.Job, grant allocator) (*mapper.Map, int, error) {
	if r.topos == nil {
		topos, err := newTopologies(job.Place.Topology)
		if err != nil {
			return nil, ExitUsage, err
		}
		r.topos = topos
	}
	topos := r.topos
	// The job spec is the CLI's, read-only: the apps' host lists that the
	// allocation completes go into the copy the mapper is given.
	cp := *job
	cp.Apps = slices.Clone(job.Apps)
	job = &cp
	alloc, source, fromCores, err := grant(job)
	if err != nil {
		return nil, ExitUsage, err
	}
	r.alloc, r.allocSource = alloc, source
	opts, err := mapOptions(job.Place, alloc, fromCores)
	if err != nil {
		return nil, ExitUsage, err
	}
	r.mapOpts = opts
	localAppHosts(job.Apps, alloc, job.Place.LocalHost)
	m, err := mapper.PlaceWith(job, alloc, topos.of, opts)
	if err != nil {
		return nil, ExitUsage, err
	}
	r.reportBindings = m.BindTo.Report
	for _, x := range job.Xterm.Ranks {
		if x >= len(m.Procs) {
			return nil, ExitUsage, fmt.Errorf("--xterm: no rank %d in a job of %d", x, len(m.Procs))
		}
	}
	if job.Launch.LocalOnly {
		for _, n := range m.Nodes {
			if len(n.Procs) > 0 && !isLocal(n.Name, job.Place.LocalHost) {
				return nil, ExitUsage, fmt.Errorf("-launcher fork starts processes on this node only, and the map puts some on %s", n.Name)
			}
		}
	}
	return m, 0, nil
}

// displayTopologies shows each mapped node's topology: its synthetic
// form, then each level's objects with their CPUs.
func (r *run) displayTopologies(m *mapper.Map) string {
	var b strings.Builder
	for _, n := range m.Nodes {
		t := r.topos.of(n.Name)
		if t == nil {
			fmt.Fprintf(&b, "topology of %s: unknown\n", n.Name)
			continue
		}
		fmt.Fprintf(&b, "topology of %s:\n", n.Name)
		for _, l := range strings.Split(t.String(), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}

func displayAllocation(a hostfile.Allocation, source string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "allocation (%s): %d hosts, %d slots\n", source, len(a.Hosts), a.Slots())
	for _, h := range a.Hosts {
		max := "-"
		if h.MaxSlots > 0 {
			max = strconv.Itoa(h.MaxSlots)
		}
		fmt.Fprintf(&b, "  %-24s slots=%-4d max_slots=%s\n", h.Name, h.Slots, max)
	}
	return b.String()
}
