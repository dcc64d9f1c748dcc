package launcher

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"prun/jobspec"
	"prun/remote"
	"prun/topology"
)

// The --report document; docs/report.md describes it for CI log processors.
type report struct {
	Version      int         `json:"version"`
	CommandLine  string      `json:"command_line"`
	StartTime    time.Time   `json:"start_time"`
	EndTime      time.Time   `json:"end_time"`
	TotalSeconds float64     `json:"total_seconds"`
	ExitStatus   int         `json:"exit_status"`
	FirstFailure *reportFail `json:"first_failure"`
	Signal       string      `json:"signal,omitempty"`
	Jobs         []reportJob `json:"jobs"`
	// Tree: the control plane's structural counters, when other nodes'
	// daemons ran (remote.Stats); Launcher: prun's own resource usage.
	Tree     *remote.Stats   `json:"tree,omitempty"`
	Launcher *reportLauncher `json:"launcher"`
}

type reportLauncher struct {
	UserCPU   float64 `json:"user_cpu_seconds"`
	SysCPU    float64 `json:"system_cpu_seconds"`
	MaxRSSKiB int64   `json:"max_rss_kib"`
}

type reportFail struct {
	Message string `json:"message"`
	Status  int    `json:"status"`
}

type reportJob struct {
	Namespace string          `json:"namespace"`
	Index     int             `json:"index"`
	Parent    string          `json:"parent,omitempty"`
	Map       json.RawMessage `json:"map"`
	Ranks     []reportRank    `json:"ranks"`
}

type reportRank struct {
	Rank      int        `json:"rank"`
	App       int        `json:"app"`
	Host      string     `json:"host"`
	Pid       int        `json:"pid"`
	Argv      []string   `json:"argv"`
	Started   bool       `json:"started"`
	StartTime *time.Time `json:"start_time,omitempty"`
	EndTime   *time.Time `json:"end_time,omitempty"`
	Exited    bool       `json:"exited"`
	Status    *int       `json:"exit_status,omitempty"`
	Signal    string     `json:"signal,omitempty"`
	UserCPU   float64    `json:"user_cpu_seconds"`
	SysCPU    float64    `json:"system_cpu_seconds"`
	MaxRSSKiB int64      `json:"max_rss_kib"`
}

// writeReport writes the run's report, whatever the ending (an error before
// any rank started still gives a document with the failure and no jobs).
func (r *run) writeReport(job *jobspec.Job, start time.Time, code int) error {
	end := time.Now()
	rep := report{Version: 1, CommandLine: job.CmdLine, StartTime: start, EndTime: end,
		TotalSeconds: end.Sub(start).Seconds(), ExitStatus: code, Jobs: []reportJob{}}
	if f := r.pol.firstFailure(); f != nil {
		rep.FirstFailure = &reportFail{Message: f.msg, Status: f.code}
	}
	if r.pol.signaled != 0 {
		rep.Signal = signalName(r.pol.signaled)
	}
	if r.tree != nil {
		st := r.tree.Stats()
		rep.Tree = &st
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		rep.Launcher = &reportLauncher{UserCPU: time.Duration(ru.Utime.Nano()).Seconds(),
			SysCPU: time.Duration(ru.Stime.Nano()).Seconds(), MaxRSSKiB: ru.Maxrss}
		if hwm, ok := peakRSSKiB(); ok {
			rep.Launcher.MaxRSSKiB = hwm
		}
	}
	for _, j := range r.jobs.list {
		mapJSON, err := j.plan.Map.JSON()
		if err != nil {
			return err
		}
		rj := reportJob{Namespace: j.plan.Nspace, Index: j.plan.Index, Map: mapJSON}
		if j.plan.Parent != nil {
			rj.Parent = j.plan.Parent.String()
		}
		for rank, p := range j.plan.Map.Procs {
			rec := j.procs[rank]
			rr := reportRank{Rank: rank, App: p.App, Host: j.plan.Map.Nodes[p.Node].Name, Pid: rec.pid,
				Argv: j.plan.Job.Apps[p.App].Argv, Started: rec.started, Exited: rec.exited,
				UserCPU: rec.userCPU.Seconds(), SysCPU: rec.sysCPU.Seconds(), MaxRSSKiB: rec.maxRSSKiB}
			if rec.started {
				t := rec.startTime
				rr.StartTime = &t
			}
			if rec.exited {
				t, s := rec.endTime, rec.exitCode
				rr.EndTime = &t
				if rec.signal != 0 {
					rr.Signal = signalName(rec.signal)
				} else {
					rr.Status = &s
				}
			}
			rj.Ranks = append(rj.Ranks, rr)
		}
		rep.Jobs = append(rep.Jobs, rj)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(job.Report, append(b, '\n'), 0o644)
}

// exitCodes says how every rank ended, one line per outcome with the ranks
// that had it ("ranks 0-2,5 exited with status 0"), for
// --print-all-exitcodes; spawned jobs' lines name their job.
func (r *run) exitCodes() []string {
	if r.up == nil {
		return nil // nothing started: a usage error, --do-not-launch
	}
	var lines []string
	for _, j := range r.jobs.list {
		var outcomes []string
		ranks := map[string][]int{}
		for rank, rec := range j.procs {
			var o string
			switch {
			case !rec.started:
				o = "never started"
			case !rec.exited:
				o = "did not end" // cannot happen once the job is over
			case rec.signal != 0:
				o = "were killed by " + signalName(rec.signal)
			default:
				o = "exited with status " + strconv.Itoa(rec.exitCode)
			}
			if ranks[o] == nil {
				outcomes = append(outcomes, o)
			}
			ranks[o] = append(ranks[o], rank)
		}
		prefix := ""
		if j.plan.Index > 0 {
			prefix = fmt.Sprintf("job %d (%s): ", j.plan.Index, j.plan.Nspace)
		}
		for _, o := range outcomes {
			rs := ranks[o]
			word := "ranks "
			if len(rs) == 1 {
				word = "rank "
				o = strings.Replace(o, "were killed", "was killed", 1)
			}
			lines = append(lines, prefix+word+rankList(rs)+" "+o)
		}
	}
	return lines
}

// rankList writes sorted ranks as ranges (0-2,5,7-8), in the list format
// of CPU sets.
func rankList(rs []int) string { return topology.CPUSet(rs).String() }

// peakRSSKiB is this process's own peak resident set (VmHWM). getrusage's
// ru_maxrss is not: Linux keeps across execve the high-water mark of the
// memory the process had before, and a program started by vfork (Go's
// os/exec) has its parent's: a large parent's, not prun's own.
func peakRSSKiB() (int64, bool) { return selfStatusKiB("VmHWM:") }

// selfRSS is this process's resident set in KiB (0: unknown).
func selfRSS() int64 {
	kb, _ := selfStatusKiB("VmRSS:")
	return kb
}

// selfStatusKiB reads one of /proc/self/status's "NAME: N kB" fields.
func selfStatusKiB(field string) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}
