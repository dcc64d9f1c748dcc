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
	Nspace string
	JobID  string
	Index  int // 0 for the user's job, 1, 2, ... for jobs its ranks spawned
	// Submission numbers the job's submission to a persistent runtime
	// (prun dvm; 0 standalone, else 1..MaxSubmission): the ranks' output
	// carries it (OutputJob), so the runtime hands each run to its own
	// submitter's Writer.
	Submission int `json:",omitempty"`
	Job        *jobspec.Job
	Map        *mapper.Map
	UnivSize   int // jobspec.UnivInfinite: none (the processes are told of no universe size)
	// A debugger started prun (MPIR): the PMIx clients stop in PMIx_Init
	// until the launcher releases them (pmixsrv.DebuggerRelease).
	DebugStop bool `json:",omitempty"`
	Stdin     int  // rank that gets the launcher's stdin, or StdinNone, StdinAll
	PTY       bool // the Stdin rank runs on a pseudo-terminal

	// For spawned jobs: who asked, and the keys put into the new job's PMI
	// KVS before it starts (MPICH passes its parent's port that way).
	Parent    *pmixsrv.Proc
	ParentKVS string
	Preput    [][2]string

	// What -s/--preload-binary and --preload-files send to every node with
	// ranks: each app's program (Name "" when not sent) and the files for
	// every working directory. The contents travel apart, ahead of the plan
	// (Daemon.Receive); on the launcher's node they are read where they are.
	Programs []File `json:",omitempty"`
	Files    []File `json:",omitempty"`
}

// File is a file sent with a plan, placed by its base name.
type File struct {
	ID     int // its number among what the plan sends: names it in transit
	Name   string
	Mode   os.FileMode
	Size   int64
	Sum    string // hex SHA-256 of what was sent ("" when sent to no other node)
	Source string `json:"-"` // its path on the launcher's node
}

// Plan.Stdin values besides a rank.
const (
	StdinNone = jobspec.StdinNone
	StdinAll  = jobspec.StdinAll
)

// procsOn returns the ranks the plan places on node n.
func (p *Plan) procsOn(n int) []int {
	if n < 0 || n >= len(p.Map.Nodes) {
		return nil
	}
	return p.Map.Nodes[n].Procs
}

// MaxSubmission is the largest Plan.Submission: OutputJob keeps the index
// of a spawned job in the low 16 bits of iof.Source.Job, an int32 on the
// wire.
const MaxSubmission = 1<<15 - 1

// OutputJob is the iof.Source.Job of the plan's output: its index, and its
// submission above it.
func (p *Plan) OutputJob() int { return p.Index | p.Submission<<16 }

// SplitOutputJob undoes OutputJob.
func SplitOutputJob(job int) (submission, index int) { return job >> 16, job & (1<<16 - 1) }
