package daemon

import (
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

// sigCkptRecord is the base of the "signals" that carry a checkpoint
// method through the launcher to every node (Upstream.JobControl,
// Daemon.Signal), so that a target on another node, or a wildcard meaning
// the whole namespace on every node, is recorded where its ranks run. The
// method is encoded below the base: the signal number in the low 8 bits,
// then the event and preemptible flags. Never sent as a signal.
const sigCkptRecord syscall.Signal = -1 << 20

func (m ckptMethod) signal() syscall.Signal {
	v := int(m.sig) & 0xff
	if m.event {
		v |= 1 << 8
	}
	if m.preemptible {
		v |= 1 << 9
	}
	return sigCkptRecord - syscall.Signal(v)
}

// ckptMethodOf decodes a method's signal; ok is false for anything else.
func ckptMethodOf(sig syscall.Signal) (m ckptMethod, ok bool) {
	if sig > sigCkptRecord || sig < sigCkptRecord-(1<<10) {
		return m, false
	}
	v := int(sigCkptRecord - sig)
	return ckptMethod{set: true, sig: syscall.Signal(v & 0xff), event: v&(1<<8) != 0, preemptible: v&(1<<9) != 0}, true
}

// recordCkpt remembers the method of the job's ranks here (nil: every rank
// of the job, those started later included: the namespace's wildcard
// entry, which replaces earlier per-rank entries).
func (d *Daemon) recordCkpt(nspace string, ranks []int, m ckptMethod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ckpt == nil {
		d.ckpt = map[pmixsrv.Proc]ckptMethod{}
	}
	if ranks == nil {
		for p := range d.ckpt {
			if p.Nspace == nspace {
				delete(d.ckpt, p)
			}
		}
		d.ckpt[pmixsrv.Proc{Nspace: nspace, Rank: pmixsrv.RankWildcard}] = m
		return
	}
	for _, r := range ranks {
		d.ckpt[pmixsrv.Proc{Nspace: nspace, Rank: pmixsrv.Rank(r)}] = m
	}
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
		ranks = sh.ranks.list()
	}
	for _, r := range ranks {
		p := pmixsrv.Proc{Nspace: nspace, Rank: pmixsrv.Rank(r)}
		d.mu.Lock()
		m, ok := d.ckpt[p]
		if !ok {
			m, ok = d.ckpt[pmixsrv.Proc{Nspace: nspace, Rank: pmixsrv.RankWildcard}]
		}
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
