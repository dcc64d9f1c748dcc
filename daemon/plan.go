package daemon

import (
	"os"

	"prun/jobspec"
	"prun/mapper"
	"prun/pmixsrv"
)

// Plan is what a daemon needs to start its share of a job: the whole job
// and map (every daemon registers the full map with its PMIx server) and the
// job-wide facts the launcher decided.
type Plan struct {
	Nspace   string
	JobID    string
	Index    int // 0 for the user's job, 1, 2, ... for jobs its ranks spawned
	Job      *jobspec.Job
	Map      *mapper.Map
	UnivSize int
	Stdin    int  // rank that gets the launcher's stdin, or StdinNone, StdinAll
	PTY      bool // the Stdin rank runs on a pseudo-terminal

	// For spawned jobs: who asked, and the keys put into the new job's PMI
	// KVS before it starts (MPICH passes its parent's port that way).
	Parent    *pmixsrv.Proc
	ParentKVS string
	Preput    [][2]string

	// What -s/--preload-binary and --preload-files send to every node:
	// each app's program (nil when not sent) and the files for every
	// working directory.
	Programs [][]byte `json:",omitempty"`
	Files    []File   `json:",omitempty"`
}

// File is a file sent with a plan, placed by its base name.
type File struct {
	Name string
	Mode os.FileMode
	Data []byte
}

// Plan.Stdin values besides a rank.
const (
	StdinNone = -1
	StdinAll  = -2
)

// procsOn returns the ranks the plan places on node n.
func (p *Plan) procsOn(n int) []int {
	if n < 0 || n >= len(p.Map.Nodes) {
		return nil
	}
	return p.Map.Nodes[n].Procs
}
