package daemon

import (
	"bufio"
	"os"
	"sort"
	"strconv"
	"strings"

	"prun/pmixsrv"
)

// Query answers of the node's own (host.go's Query asks the launcher for
// the rest): a job's status from the launcher's process table, process
// sets from the plans every node holds, memory from this node's /proc.

// procTable asks the launcher for nspace's process table and waits.
func (h host) procTable(nspace string) ([]pmixsrv.ProcInfo, error) {
	type answer struct {
		t   []pmixsrv.ProcInfo
		err error
	}
	ch := make(chan answer, 1)
	h.d.up.ProcTable(nspace, func(t []pmixsrv.ProcInfo, err error) { ch <- answer{t, err} })
	a := <-ch
	return a.t, a.err
}

// jobState is a job's state as its process table shows it: running once
// every rank started, terminated (with error, when a rank failed) once
// every rank ended.
func jobState(table []pmixsrv.ProcInfo) pmixsrv.JobState {
	started, ended, failed := 0, 0, false
	for _, p := range table {
		switch p.State {
		case pmixsrv.ProcStateRunning:
			started++
		case pmixsrv.ProcStateTerminated:
			started++
			ended++
			failed = failed || p.ExitCode != 0
		}
	}
	switch {
	case ended == len(table) && failed:
		return pmixsrv.JobStateTerminatedErr
	case ended == len(table):
		return pmixsrv.JobStateTerminated
	case started == len(table):
		return pmixsrv.JobStateRunning
	}
	return pmixsrv.JobStateLaunchUnderway
}

// Psets are the process sets of a job's apps, by app: none unless a context
// names one (--pset), as PRRTE does; then every app is one, an unnamed one
// NSPACE.appN. Open MPI 5.0 builds a process set's group from every rank's
// PMIX_PSET_NAME and fails on a rank that has none; and where psets exist it
// cannot tell an unknown name from an empty set (it takes a missing
// PMIX_PSET_NAME for "no such set"), so a job that asked for none has none.
func Psets(p *Plan) []string {
	named := false
	for _, a := range p.Job.Apps {
		named = named || a.Pset != ""
	}
	if !named {
		return nil
	}
	out := make([]string, len(p.Job.Apps))
	for i, a := range p.Job.Apps {
		out[i] = a.Pset
		if out[i] == "" {
			out[i] = p.Nspace + ".app" + strconv.Itoa(i)
		}
	}
	return out
}

// psetNames are the process sets a process of nspace sees, sorted: its own
// job's (an MPI library builds a group of a process set from its own job's
// PMIX_PSET_NAMEs, so another job's would be listed and empty), or every
// job's this node knows (each node holds every job's plan) when nspace is no
// job's (a tool's).
func (d *Daemon) psetNames(nspace string) []string {
	d.mu.Lock()
	var out []string
	own := d.shells[nspace]
	for _, sh := range d.shells {
		if own == nil || sh == own {
			out = append(out, Psets(sh.plan)...)
		}
	}
	d.mu.Unlock()
	sort.Strings(out)
	return out
}

// psetMembers are the processes of the process set named name (an app of
// a job this node knows); false when no job has it.
func (d *Daemon) psetMembers(name string) ([]pmixsrv.Proc, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, sh := range d.shells {
		for i, pset := range Psets(sh.plan) {
			if pset != name || i >= len(sh.plan.Map.Apps) {
				continue
			}
			app := sh.plan.Map.Apps[i]
			out := make([]pmixsrv.Proc, app.Size)
			for r := range out {
				out[r] = pmixsrv.Proc{Nspace: sh.plan.Nspace, Rank: pmixsrv.Rank(app.Offset + r)}
			}
			return out, true
		}
	}
	return nil, false
}

// memoryUsage is PMIX_QUERY_MEMORY_USAGE's answer, as PRRTE gives it: this
// node's daemon's resident memory and its average over nspace's ranks on
// this node (every job's, when nspace is empty), in megabytes.
func (d *Daemon) memoryUsage(nspace string) []pmixsrv.Info {
	var pids []int
	d.mu.Lock()
	shells := make([]*shell, 0, len(d.shells))
	for ns, sh := range d.shells {
		if nspace == "" || ns == nspace {
			shells = append(shells, sh)
		}
	}
	d.mu.Unlock()
	for _, sh := range shells {
		for _, l := range sh.ranks.live() {
			pids = append(pids, l.pid)
		}
	}
	var sum float64
	n := 0
	for _, pid := range pids {
		if mb, ok := rssMB(strconv.Itoa(pid)); ok {
			sum += mb
			n++
		}
	}
	avg := 0.0
	if n > 0 {
		avg = sum / float64(n)
	}
	self, _ := rssMB("self")
	return []pmixsrv.Info{
		{Key: pmixsrv.KeyDaemonMemory, Value: float32(self)},
		{Key: pmixsrv.KeyClientAvgMemory, Value: float32(avg)},
	}
}

// rssMB reads a process's resident set size (VmRSS) in megabytes.
func rssMB(pid string) (float64, bool) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}
