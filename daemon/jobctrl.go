package daemon

import (
	"sort"
	"syscall"

	"prun/pmixsrv"
)

// SigCheckpoint is the "signal" of a PMIX_JOB_CTRL_CHECKPOINT request as it
// travels through the launcher to every node (Upstream.JobControl,
// Daemon.Signal): each node delivers to its targeted ranks the checkpoint
// method each chose (a signal or the PMIX_JCTRL_CHECKPOINT event). It is
// never sent as a signal.
const SigCheckpoint syscall.Signal = -2

// ckptMethod is how a process asked to be told to checkpoint
// (PMIx_Job_control with PMIX_JOB_CTRL_PREEMPTIBLE,
// PMIX_JOB_CTRL_CHECKPOINT_SIGNAL or _EVENT).
type ckptMethod struct {
	set         bool
	preemptible bool
	sig         syscall.Signal // 0: none
	event       bool
}

// recordCkpt remembers the method of each target (a wildcard rank stands
// for the job's ranks on this node, as the request's node knows them).
func (d *Daemon) recordCkpt(targets []pmixsrv.Proc, m ckptMethod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ckpt == nil {
		d.ckpt = map[pmixsrv.Proc]ckptMethod{}
	}
	for _, t := range targets {
		if t.Rank != pmixsrv.RankWildcard {
			d.ckpt[t] = m
			continue
		}
		if sh := d.shells[t.Nspace]; sh != nil {
			for _, r := range sh.localRanks() {
				d.ckpt[pmixsrv.Proc{Nspace: t.Nspace, Rank: pmixsrv.Rank(r)}] = m
			}
		}
	}
}

// localRanks lists the job's ranks on this node, in order.
func (sh *shell) localRanks() []int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	out := make([]int, 0, len(sh.ranks))
	for r := range sh.ranks {
		out = append(out, r)
	}
	sort.Ints(out)
	return out
}

// checkpoint tells the job's ranks here (all when ranks is nil) to
// checkpoint, each the way it asked; a rank that asked for nothing is left
// alone.
func (d *Daemon) checkpoint(nspace string, ranks []int) {
	sh := d.shell(nspace)
	if sh == nil {
		return
	}
	if ranks == nil {
		ranks = sh.localRanks()
	}
	for _, r := range ranks {
		p := pmixsrv.Proc{Nspace: nspace, Rank: pmixsrv.Rank(r)}
		d.mu.Lock()
		m, ok := d.ckpt[p]
		d.mu.Unlock()
		if !ok {
			continue
		}
		if m.sig > 0 {
			sh.signal([]int{r}, m.sig)
		}
		if m.event {
			d.srv.Notify(pmixsrv.JCtrlCheckpoint, pmixsrv.Proc{}, pmixsrv.RangeCustom,
				[]pmixsrv.Info{{Key: pmixsrv.KeyEventCustomRange, Value: []pmixsrv.Proc{p}}})
		}
	}
}
