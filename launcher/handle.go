package launcher

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"prun/daemon"
	"prun/jobspec"
	"prun/mapper"
	"prun/mpir"
	"prun/pmixsrv"
	"prun/stacktree"
)

func (r *run) rankDesc(nspace string, rank int) string {
	j := r.jobs.get(nspace)
	if j == nil || rank < 0 || rank >= len(j.plan.Map.Procs) {
		return fmt.Sprintf("rank %d of %s", rank, nspace)
	}
	p := j.plan.Map.Procs[rank]
	job := ""
	if j.plan.Index > 0 {
		job = fmt.Sprintf(" of spawned job %d", j.plan.Index)
	}
	return fmt.Sprintf("rank %d%s (%s) on %s", rank, job, j.plan.Job.Apps[p.App].Argv[0], j.plan.Map.Nodes[p.Node].Name)
}

func (r *run) handle(item any) {
	switch ev := item.(type) {
	case daemon.Event:
		r.onEvent(ev)
	case jobControl:
		r.onJobControl(ev)
	case daemon.SpawnRequest:
		r.onSpawn(ev)
	case nodeLost:
		r.onNodeLost(ev)
	case brokenPipe:
		r.act(r.pol.brokenPipe())
	case killSubmission: // a DVM's job: prun dvm kill, or the DVM stopping
		r.onSignal(ev.sig)
	}
	r.announceEnds()
}

// brokenPipe says prun's stdout or stderr reader went away.
type brokenPipe struct{}

// onNodeLost records the node's ranks as gone with its daemon; the
// runtime says what that means (rte.nodeLost).
func (r *run) onNodeLost(nl nodeLost) {
	r.rte.nodeLost(r, nl, r.jobs.nodeLost(nl.host))
}

func (r *run) onEvent(ev daemon.Event) {
	if ev.Kind == daemon.Refused || ev.Kind == daemon.Leftover { // a node's, or what it could not end
		r.errorf("%s: %s", ev.Node, ev.Msg)
		return
	}
	j := r.jobs.get(ev.Nspace)
	if j == nil {
		return
	}
	switch ev.Kind {
	case daemon.ProcStarted:
		again := r.jobs.started(j, ev.Rank, ev.Pid, ev.Time) // again: a restart (--max-restarts)
		if r.reportBindings {
			r.reportBinding(j, ev)
		}
		if again {
			if j.mpirBase >= 0 {
				r.mpirProcs[j.mpirBase+ev.Rank].Pid = ev.Pid
				mpir.SetPid(j.mpirBase+ev.Rank, ev.Pid)
			}
			return
		}
		if r.showProgress && j == r.jobs.primary() && progressStep(j.started, len(j.plan.Map.Procs)) {
			r.out.Printf("prun: %d of %d processes started\n", j.started, len(j.plan.Map.Procs))
		}
		if j.started == len(j.plan.Map.Procs) {
			if r.proctable != "" && j == r.jobs.primary() {
				r.outputProctable(j)
			}
			r.debuggerAcquire(j)
		}
	case daemon.ProcRestarted:
		if !r.pol.quiet {
			how := fmt.Sprintf("exited with status %d", ev.Status)
			if ev.Signal != 0 {
				how = fmt.Sprintf("was killed by signal %d (%s)", int(ev.Signal), signalName(ev.Signal))
			}
			of := fmt.Sprintf("%d of %d", ev.Restart, j.plan.Job.MaxRestarts)
			if j.plan.Job.MaxRestarts == jobspec.RestartsUnlimited {
				of = fmt.Sprintf("restart %d, --continuous", ev.Restart)
			}
			r.errorf("%s (pid %d) %s; starting it again (%s)", r.rankDesc(ev.Nspace, ev.Rank), ev.Pid, how, of)
		}
	case daemon.LaunchFailed:
		r.jobs.exited(j, ev.Rank, nil)
		r.fail(fmt.Sprintf("cannot start %s: %s", r.rankDesc(ev.Nspace, ev.Rank), ev.Msg), ExitFailure)
	case daemon.ProcAborted:
		r.act(r.pol.aborted(r.rankDesc(ev.Nspace, ev.Rank), ev.Status, ev.Msg))
	case daemon.ProcExited:
		r.jobs.exited(j, ev.Rank, &ev)
		if r.pol.recovery && (ev.Status != 0 || ev.Signal != 0) {
			r.announceFailure(j, ev)
		}
		r.act(r.pol.rankEnded(rankEnd{desc: r.rankDesc(ev.Nspace, ev.Rank), pid: ev.Pid, status: ev.Status,
			signal: ev.Signal, connected: ev.Connected, finalized: ev.Finalized, spawned: j.plan.Index > 0,
			time: ev.Time}, r.jobs.runningRanks(), time.Now()))
	case daemon.NodeJobDone:
		r.jobs.nodeDone(j, ev.Node)
	case daemon.LogMessage:
		r.out.Printf("[%s:%d] %s\n", ev.Nspace, ev.Rank, ev.Msg)
	case daemon.HelpMessage:
		r.onHelp(ev)
	case daemon.ProtocolError:
		if ev.Rank < 0 { // a connection to -pmi-port that never named its rank
			r.errorf("%s: PMI protocol error: %s", ev.Node, ev.Msg)
			break
		}
		r.errorf("rank %d on %s: PMI protocol error: %s", ev.Rank, ev.Node, ev.Msg)
	}
}

// onHelp shows an Open MPI help message as Open MPI's mpirun does: the
// first of a topic whole, later ones of the same topic counted (see
// helpSummary).
func (r *run) onHelp(ev daemon.Event) {
	if r.pol.quiet {
		return
	}
	if r.helpRepeats == nil {
		r.helpRepeats = map[string]int{}
	}
	if n, seen := r.helpRepeats[ev.Topic]; seen {
		r.helpRepeats[ev.Topic] = n + 1
		return
	}
	r.helpRepeats[ev.Topic] = 0
	r.helpTopics = append(r.helpTopics, ev.Topic)
	r.out.Printf("%s", ev.Msg)
	if !strings.HasSuffix(ev.Msg, "\n") {
		r.out.Printf("\n")
	}
}

// helpSummary says how many more ranks sent each help message shown.
func (r *run) helpSummary() {
	for _, topic := range r.helpTopics {
		switch n := r.helpRepeats[topic]; n {
		case 0:
		case 1:
			r.errorf("1 more process has sent help message %s", topic)
		default:
			r.errorf("%d more processes have sent help message %s", n, topic)
		}
	}
}

// reportBinding prints where a rank runs, as --report-bindings asks.
func (r *run) reportBinding(j *job, ev daemon.Event) {
	p := j.plan.Map.Procs[ev.Rank]
	where := "not bound"
	if len(p.CPUs) > 0 {
		where = fmt.Sprintf("bound to CPUs %s (%v)", p.CPUs, j.plan.Map.BindTo.To)
	}
	switch mb := j.plan.Map.MemBind; {
	case p.Mems != nil:
		where += fmt.Sprintf("; memory %v on NUMA nodes %s", mb.Mode, p.Mems)
	case mb.Mode != mapper.MemDefault:
		where += fmt.Sprintf("; memory %v", mb.Mode)
	}
	r.out.Printf("prun: %s, pid %d: %s\n", r.rankDesc(ev.Nspace, ev.Rank), ev.Pid, where)
}

func (r *run) signalAll(sig syscall.Signal) {
	for _, j := range r.jobs.list {
		r.up.signal(j.plan.Nspace, nil, sig)
	}
}

func (r *run) onSignal(s os.Signal) {
	if g, ok := s.(submitterGone); ok {
		r.act(r.pol.submitterGone(g.String(), r.jobs.runningRanks()))
		return
	}
	sig := s.(syscall.Signal)
	switch sig {
	case syscall.SIGWINCH:
		if r.local != nil {
			r.local.ResizePTY(r.jobs.primary().plan.Nspace)
		}
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		r.act(r.pol.signal(sig, r.jobs.runningRanks()))
	case syscall.SIGTSTP:
		r.rte.suspend(r)
	default: // SIGUSR1, SIGUSR2, SIGCONT: pass on, nothing more
		r.signalAll(sig)
	}
}

func (r *run) onTimeout(after time.Duration) {
	if r.pol.fail != nil {
		return
	}
	var still []string
	for _, j := range r.jobs.list {
		for rank, p := range j.procs {
			if p.started && !p.exited {
				still = append(still, r.stillRunning(j, rank, p.pid))
			}
		}
	}
	if pj := r.jobs.primary().plan.Job; pj.ReportStateOnTimeout || pj.GetStackTraces {
		r.reportState(pj.GetStackTraces)
	}
	msg := fmt.Sprintf("job timed out after %s; killing %d running rank", after, len(still))
	if len(still) != 1 {
		msg += "s"
	}
	if len(still) > 0 {
		msg += ": " + strings.Join(still, ", ")
	}
	r.act(r.pol.timedOut(msg))
}

func (r *run) onJobControl(jc jobControl) {
	targets := map[string][]int{} // nspace -> ranks, nil for all
	for _, t := range jc.targets {
		if r.jobs.get(t.Nspace) == nil {
			continue
		}
		if t.Rank == pmixsrv.RankWildcard {
			targets[t.Nspace] = nil
			continue
		}
		if ranks, seen := targets[t.Nspace]; !seen || ranks != nil {
			targets[t.Nspace] = append(ranks, int(t.Rank))
		}
	}
	if len(targets) == 0 {
		jc.done(pmixsrv.ErrNotFound)
		return
	}
	if jc.sig == syscall.SIGKILL && r.pol.fail == nil {
		var who []string
		for ns, ranks := range targets {
			if ranks == nil {
				who = append(who, "all of "+ns)
			} else {
				sort.Ints(ranks)
				who = append(who, fmt.Sprintf("ranks %v of %s", ranks, ns))
			}
		}
		sort.Strings(who)
		r.act(r.pol.killRequested(fmt.Sprintf("rank %d of %s requested PMIx_Job_control kill of %s",
			jc.req.Rank, jc.req.Nspace, strings.Join(who, ", "))))
	}
	for ns, ranks := range targets {
		r.up.signal(ns, ranks, jc.sig)
	}
	jc.done(nil)
}

// reportState prints what each running rank is doing, and, when asked,
// their stacks merged into one tree per job (ranks at the same place share a
// branch, so the one elsewhere stands out), before a timeout kills them:
// gathered along the tree and merged on the way, as prun stack's
// (inspect.go).
func (r *run) reportState(stacks bool) {
	for _, j := range r.jobs.list {
		var states []daemon.RankState
		for _, n := range r.up.nodes() {
			states = append(states, n.Inspect(j.plan.Nspace, false)...)
		}
		sort.Slice(states, func(a, b int) bool { return states[a].Rank < states[b].Rank })
		for _, st := range states {
			line := fmt.Sprintf("%s, pid %d: state %s, cpu %s", r.rankDesc(j.plan.Nspace, st.Rank), st.Pid, st.State,
				st.CPU.Round(time.Millisecond))
			if st.Wchan != "" {
				line += ", waiting in " + st.Wchan
			}
			r.out.Printf("prun: %s\n", line)
		}
		if !stacks || len(states) == 0 {
			continue
		}
		tree := r.timeoutStacks(j)
		what := "the stacks of the running ranks"
		if j.plan.Index > 0 {
			what += fmt.Sprintf(" of job %d", j.plan.Index)
		}
		r.out.Printf("prun: %s, merged:\n", what)
		for _, l := range strings.Split(strings.TrimSuffix(tree.Text(stacktree.Options{Collapse: true}), "\n"), "\n") {
			r.out.Printf("prun:   %s\n", l)
		}
	}
}

// stillRunning names a rank in the timeout message: "3 (pid 123 on n1)",
// or "job 1 rank 3 (...)" for a spawned job's.
func (r *run) stillRunning(j *job, rank, pid int) string {
	host := j.plan.Map.Nodes[j.plan.Map.Procs[rank].Node].Name
	if j.plan.Index > 0 {
		return fmt.Sprintf("job %d rank %d (pid %d on %s)", j.plan.Index, rank, pid, host)
	}
	return fmt.Sprintf("%d (pid %d on %s)", rank, pid, host)
}
