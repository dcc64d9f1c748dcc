package launcher

import (
	"sort"
	"sync"
	"syscall"
	"time"

	"prun/daemon"
	"prun/pmixsrv"
)

// jobTable holds the launch's jobs: the user's first, then those its ranks
// spawned. The launcher's loop alone writes it, under mu; it reads it
// without the lock. Other goroutines (upstream's routing, called from the
// PMIx library's thread and the links' readers) read it through jobIndex,
// under mu's read lock. A persistent runtime holds many such jobs: the
// table is keyed by namespace, and a job's fields are all it needs to know
// of it.
type jobTable struct {
	mu     sync.RWMutex
	list   []*job
	byName map[string]*job
}

// job is one job as the launcher follows it.
type job struct {
	plan  *daemon.Plan
	state jobState
	procs []procRecord // by rank

	running   int          // ranks started (or being started) and not yet reaped
	started   int          // ranks that started at least once
	pending   int          // nodes with ranks that have not reported NodeJobDone
	doneNodes map[int]bool // ... and those that have, by node index
	mpirBase  int          // where its ranks start in the MPIR table; -1 until they are in it

	endAnnounced bool // PMIX_EVENT_JOB_END raised (events.go)
}

// jobState is where a job stands: launched → running (every rank started
// once: the MPIR table has it) → done (every rank reaped, every node's
// output drained, or its node lost).
type jobState int

const (
	jobLaunched jobState = iota
	jobRunning
	jobDone
)

func (s jobState) String() string { return [...]string{"launched", "running", "done"}[s] }

// procRecord is what the launcher knows of one rank.
type procRecord struct {
	pid      int
	started  bool
	exited   bool
	exitCode int // -1: its node was lost

	// for --report
	startTime, endTime time.Time
	signal             syscall.Signal
	userCPU, sysCPU    time.Duration
	maxRSSKiB          int64
}

func newJobTable() *jobTable { return &jobTable{byName: map[string]*job{}} }

// add starts following the job of plan.
func (t *jobTable) add(plan *daemon.Plan) *job {
	j := &job{plan: plan, procs: make([]procRecord, len(plan.Map.Procs)), running: len(plan.Map.Procs),
		doneNodes: map[int]bool{}, mpirBase: -1}
	for _, n := range plan.Map.Nodes {
		if len(n.Procs) > 0 {
			j.pending++ // nodes with ranks report NodeJobDone
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.list = append(t.list, j)
	t.byName[plan.Nspace] = j
	return j
}

func (t *jobTable) get(nspace string) *job { return t.byName[nspace] }

func (t *jobTable) primary() *job {
	if len(t.list) == 0 {
		return nil
	}
	return t.list[0]
}

// active reports whether any job still has ranks or undrained output.
func (t *jobTable) active() bool {
	for _, j := range t.list {
		if j.state != jobDone {
			return true
		}
	}
	return false
}

func (t *jobTable) runningRanks() int {
	n := 0
	for _, j := range t.list {
		n += j.running
	}
	return n
}

// started records a rank's start; again says it started before
// (--max-restarts).
func (t *jobTable) started(j *job, rank, pid int, at time.Time) (again bool) {
	if rank < 0 || rank >= len(j.procs) {
		return false
	}
	t.mu.Lock()
	p := &j.procs[rank]
	again = p.started
	p.pid, p.started, p.startTime = pid, true, at
	t.mu.Unlock()
	if !again {
		j.started++
		if j.started == len(j.procs) && j.state == jobLaunched {
			j.state = jobRunning
		}
	}
	return again
}

// exited records a rank's end (and that a rank that could not start will
// not: ev nil).
func (t *jobTable) exited(j *job, rank int, ev *daemon.Event) {
	j.running--
	if ev == nil || rank < 0 || rank >= len(j.procs) {
		t.settle(j)
		return
	}
	t.mu.Lock()
	p := &j.procs[rank]
	p.exited, p.exitCode, p.signal, p.endTime = true, ev.Status, ev.Signal, ev.Time
	p.userCPU, p.sysCPU, p.maxRSSKiB = ev.UserCPU, ev.SysCPU, ev.MaxRSSKiB
	t.mu.Unlock()
	t.settle(j)
}

// nodeDone records that a node reaped the job's ranks and drained their
// output.
func (t *jobTable) nodeDone(j *job, node string) {
	for i, n := range j.plan.Map.Nodes {
		if n.Name == node && !j.doneNodes[i] {
			j.doneNodes[i] = true
			j.pending--
		}
	}
	t.settle(j)
}

// nodeLost records that the ranks of every job on host are gone with
// its daemon, and its output with them; hit says some job had ranks there.
func (t *jobTable) nodeLost(host string) (hit bool) {
	t.mu.Lock()
	for _, j := range t.list {
		for i, n := range j.plan.Map.Nodes {
			if n.Name != host || len(n.Procs) == 0 {
				continue
			}
			hit = true
			for _, rank := range n.Procs {
				if p := &j.procs[rank]; !p.exited {
					p.exited, p.exitCode = true, -1
					j.running--
				}
			}
			if !j.doneNodes[i] {
				j.doneNodes[i] = true
				j.pending--
			}
		}
	}
	t.mu.Unlock()
	for _, j := range t.list {
		t.settle(j)
	}
	return hit
}

func (t *jobTable) settle(j *job) {
	if j.running <= 0 && j.pending <= 0 {
		j.state = jobDone
	}
}

// used counts, by host, the ranks of running jobs that have not exited.
func (t *jobTable) used() map[string]int {
	used := map[string]int{}
	for _, j := range t.list {
		if j.running == 0 {
			continue
		}
		for rank, p := range j.procs {
			if !p.exited {
				used[j.plan.Map.Nodes[j.plan.Map.Procs[rank].Node].Name]++
			}
		}
	}
	return used
}

// jobIndex is the table as upstream's routing reads it, from any
// goroutine: plans (immutable once launched) and the process table.
type jobIndex interface {
	plan(nspace string) *daemon.Plan
	namespaces() []string
	procTable(nspace string) ([]pmixsrv.ProcInfo, error)
}

func (t *jobTable) plan(nspace string) *daemon.Plan {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if j := t.byName[nspace]; j != nil {
		return j.plan
	}
	return nil
}

func (t *jobTable) namespaces() []string {
	t.mu.RLock()
	out := make([]string, 0, len(t.byName))
	for ns := range t.byName {
		out = append(out, ns)
	}
	t.mu.RUnlock()
	sort.Strings(out)
	return out
}

func (t *jobTable) procTable(nspace string) ([]pmixsrv.ProcInfo, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	j, ok := t.byName[nspace]
	if !ok {
		return nil, pmixsrv.ErrInvalidNspace
	}
	m := j.plan.Map
	out := make([]pmixsrv.ProcInfo, len(m.Procs))
	for i, p := range m.Procs {
		rec := j.procs[i]
		state := pmixsrv.ProcStateRunning
		switch {
		case rec.exited:
			state = pmixsrv.ProcStateTerminated
		case !rec.started:
			state = pmixsrv.ProcStatePrepped
		}
		out[i] = pmixsrv.ProcInfo{
			Proc:     pmixsrv.Proc{Nspace: nspace, Rank: pmixsrv.Rank(i)},
			Host:     m.Nodes[p.Node].Name,
			Exe:      j.plan.Job.Apps[p.App].Exe,
			Pid:      rec.pid,
			ExitCode: rec.exitCode,
			State:    state,
		}
	}
	return out, nil
}

// jobProgress is how far a launch's user job is: its command, its ranks
// started and exited, the nodes it runs on.
type jobProgress struct {
	nspace, cmdLine        string
	ranks, started, exited int
	nodes                  []string
}

// progress is the user's job's, read by another goroutine; false before
// it launched.
func (t *jobTable) progress() (jobProgress, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.list) == 0 {
		return jobProgress{}, false
	}
	j := t.list[0]
	p := jobProgress{nspace: j.plan.Nspace, cmdLine: j.plan.Job.CmdLine, ranks: len(j.plan.Map.Procs)}
	for _, n := range j.plan.Map.Nodes {
		if len(n.Procs) > 0 {
			p.nodes = append(p.nodes, n.Name)
		}
	}
	for _, rec := range j.procs {
		if rec.started {
			p.started++
		}
		if rec.exited {
			p.exited++
		}
	}
	return p, true
}
