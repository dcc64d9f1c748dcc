package launcher

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"prun/mpir"
	"prun/pmixsrv"
)

// reportPID tells where prun runs, as mpirun's --report-pid does: "-" is
// stdout, "+" stderr, anything else a file.
func reportPID(where string, opts Options) error {
	return reportLine(where, strconv.Itoa(os.Getpid())+"\n", opts)
}

// outputProctable writes every rank of j as prterun's --output-proctable
// does, one line each: "(rank, host, exe, pid) = (0, node1, /path/app, 4242)".
func (r *run) outputProctable(j *job) {
	var b strings.Builder
	for rank, p := range j.plan.Map.Procs {
		fmt.Fprintf(&b, "(rank, host, exe, pid) = (%d, %s, %s, %d)\n", rank, j.plan.Map.Nodes[p.Node].Name,
			j.plan.Job.Apps[p.App].Exe, j.procs[rank].pid)
	}
	var err error
	if r.proctableFile != nil {
		_, err = r.proctableFile.WriteString(b.String())
		if cerr := r.proctableFile.Close(); err == nil {
			err = cerr
		}
	} else {
		err = reportLine(r.proctable, b.String(), r.opts)
	}
	if err != nil {
		r.errorf("--output-proctable: %v", err)
	}
}

// debuggerAcquire hands a parallel debugger the processes of job j, once
// all have started (MPIR): the table it reads from prun's memory (also when
// it attaches later; a spawned job's processes are added at its end), and,
// when it started prun, the breakpoint at which it attaches to them, after
// which the ranks it holds in PMIx_Init are released.
func (r *run) debuggerAcquire(j *job) {
	j.mpirBase = len(r.mpirProcs)
	for rank, p := range j.plan.Map.Procs {
		r.mpirProcs = append(r.mpirProcs, mpir.Proc{Host: j.plan.Map.Nodes[p.Node].Name,
			Exe: j.plan.Job.Apps[p.App].Exe, Pid: j.procs[rank].pid})
	}
	mpir.Publish(r.mpirProcs)
	if !j.plan.DebugStop {
		return
	}
	mpir.Spawned()
	// From each node's server to its own clients of this job, the ranks
	// waiting for the debugger, and to no default handler: Open MPI's
	// default handler aborts on a release (-54) it was not waiting for, as
	// in a running parent, or in a released rank that registers its default
	// handler after the release (libpmix hands it the cached event).
	rng := pmixsrv.RangeLocal // the user's job: no other runs yet
	info := []pmixsrv.Info{{Key: pmixsrv.KeyEventNonDefault, Value: true}}
	if j != r.jobs.primary() {
		rng = pmixsrv.RangeCustom
		info = append(info, pmixsrv.Info{Key: pmixsrv.KeyEventCustomRange,
			Value: []pmixsrv.Proc{{Nspace: j.plan.Nspace, Rank: pmixsrv.RankWildcard}}})
	}
	go r.up.deliver(nil, "", pmixsrv.DebuggerRelease, pmixsrv.Proc{}, rng, info)
}

// reportLine writes line to where: - stdout, + stderr, else a file.
func reportLine(where, line string, opts Options) error {
	var err error
	switch where {
	case "-":
		_, err = io.WriteString(opts.Stdout, line)
	case "+":
		_, err = io.WriteString(opts.Stderr, line)
	default:
		err = os.WriteFile(where, []byte(line), 0o644)
	}
	return err
}
