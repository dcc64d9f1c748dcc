package daemon

import (
	"prun/jobspec"
	"prun/mapper"
)

// Plan is what a daemon needs to start its share of a job: the whole job
// and map (every daemon registers the full map with its PMIx server) and the
// job-wide facts the launcher decided.
type Plan struct {
	Nspace   string
	JobID    string
	Job      *jobspec.Job
	Map      *mapper.Map
	UnivSize int
	Stdin    int // rank that gets the launcher's stdin; -1 for none
}

// procsOn returns the ranks the plan places on node n.
func (p *Plan) procsOn(n int) []int {
	if n < 0 || n >= len(p.Map.Nodes) {
		return nil
	}
	return p.Map.Nodes[n].Procs
}
