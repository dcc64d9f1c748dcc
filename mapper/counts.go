// How many processes each app runs, and on which of the allocation's hosts (their own --host, their slots).

package mapper

import (
	"fmt"
	"strings"

	"prun/hostfile"
	"prun/jobspec"
	"prun/topology"
)

// resolveCounts gives apps without -n their default count and checks that
// the job fits.
// resolveAppHosts finds the hosts each app's own --host names among the
// allocation's (hostfile.Select's matching; a count narrows nothing here:
// the allocation already holds every context's slots).
func (p *placer) resolveAppHosts(job *jobspec.Job) error {
	p.appHosts = make([][]bool, len(job.Apps))
	p.appCaps = make([][]int, len(job.Apps))
	p.appFile = make([]string, len(job.Apps))
	var base []hostfile.Entry // the allocation as Select takes it, made for the first app that needs it
	for a, app := range job.Apps {
		if app.Hosts == "" {
			continue
		}
		if base == nil {
			base = make([]hostfile.Entry, len(p.hosts))
			for i, h := range p.hosts {
				base[i] = hostfile.Entry{Kind: hostfile.Named, Name: h.name, Slots: max(h.slots, 0)}
			}
		}
		if p.mp.By == MapSeq || p.mp.By == MapRankfile {
			return fmt.Errorf("app %d: a context's own --host cannot be combined with mapping by %s", a+1, p.mp.By)
		}
		// The counts of a context's own hostfile cap that app (Hydra's
		// cycling host lists excepted); a --host count narrows nothing here:
		// the allocation already holds every context's slots.
		capped := app.Hostfile != "" && !p.mp.Cycle
		sel, err := hostfile.ParseHostList(app.Hosts)
		if err == nil {
			for i := range sel {
				sel[i].SlotsGiven = sel[i].SlotsGiven && capped
			}
			sel, err = hostfile.Select(base, sel)
		}
		if err != nil {
			return fmt.Errorf("app %d: %v", a+1, err)
		}
		mask := make([]bool, len(p.hosts))
		var caps []int
		for _, e := range sel {
			// Select answers with base's names: the first host of that name.
			i := p.byName[strings.ToLower(e.Name)]
			mask[i] = true
			if e.SlotsGiven {
				if caps == nil {
					caps = make([]int, len(p.hosts))
					for k := range caps {
						caps[k] = -1
					}
				}
				caps[i] = e.Slots
			}
		}
		p.appHosts[a], p.appCaps[a], p.appFile[a] = mask, caps, app.Hostfile
	}
	return nil
}

// capApp lowers, while app a is mapped, the slots of each host its own
// hostfile caps to what the app may still take there; the returned func
// gives them back. Beyond the slots (oversubscription) the cap does not
// hold, as a host's slots do not.
func (p *placer) capApp(a int) (restore func()) {
	caps := p.appCaps[a]
	if caps == nil {
		return func() {}
	}
	saved := make([]int, len(p.hosts))
	for i := range p.hosts {
		h := &p.hosts[i]
		saved[i] = h.slots
		if caps[i] >= 0 {
			h.slots = min(h.slots, h.used+caps[i])
		}
	}
	return func() {
		for i := range p.hosts {
			p.hosts[i].slots = saved[i]
		}
	}
}

// appSlotsError says that app a's own hosts cannot take its processes.
func (p *placer) appSlotsError(a int) error {
	caps := p.appCaps[a]
	var hosts []int
	slots := 0
	for i := range p.hosts {
		if p.allowed(a, i) {
			hosts = append(hosts, i)
			n := p.hosts[i].slots // lowered to the cap while the app is placed
			if caps != nil && caps[i] >= 0 {
				n = caps[i]
			}
			slots += max(n, 0)
		}
	}
	if caps != nil {
		return fmt.Errorf("app %d: %d processes requested but its hostfile %s gives it %s on %s",
			a+1, p.np[a], p.appFile[a], slotCount(slots), p.hostList(hosts))
	}
	return fmt.Errorf("app %d: %d processes requested but its hosts %s have %s (the other apps' processes included)",
		a+1, p.np[a], p.hostList(hosts), slotCount(slots))
}

func (p *placer) resolveCounts(job *jobspec.Job) error {
	p.np = make([]int, len(job.Apps))
	for a, app := range job.Apps {
		switch {
		case app.NP < 0:
			return fmt.Errorf("app %d: %d processes", a+1, app.NP)
		case app.NP == 0 && len(job.Apps) > 1:
			return fmt.Errorf("every application context needs -n when there are several (context %d has none)", a+1)
		case app.NP == 0:
			p.np[a] = p.defaultCount()
		default:
			p.np[a] = app.NP
		}
		if p.np[a] > MaxProcs || p.total+p.np[a] > MaxProcs {
			return fmt.Errorf("more than %d processes requested, the most prun places", MaxProcs)
		}
		p.total += p.np[a]
	}
	p.oversub = (p.mp.Oversubscribe || p.implicit) && !p.mp.NoOversubscribe
	switch p.mp.By {
	case MapSeq:
		if p.total > p.seqLen {
			return fmt.Errorf("mapping by seq: %d processes requested but the host list has only %d entries", p.total, p.seqLen)
		}
	case MapRankfile:
		p.byRank = make([]*hostfile.RankEntry, p.total)
		for i := range p.opts.Rankfile {
			e := &p.opts.Rankfile[i]
			if e.Rank < p.total {
				p.byRank[e.Rank] = e
			}
		}
	case MapPPR:
		if p.mp.Cycle {
			break // -ppn goes round the hosts again
		}
		objs := 0
		for i := range p.hosts {
			n, err := p.pprObjects(&p.hosts[i])
			if err != nil {
				return err
			}
			objs += n
		}
		capacity := objs * p.mp.PPR
		for a, n := range p.np {
			if n > capacity {
				what := p.pprName()
				return fmt.Errorf("mapping by %s places at most %d processes (%d on each of %d %ss) but app %d asks for %d",
					p.mp, capacity, p.mp.PPR, objs, what, a+1, n)
			}
		}
	default:
		if p.total > p.slots && !p.oversub {
			return p.slotsError()
		}
	}
	return nil
}

func (p *placer) pprName() string {
	if p.mapObj == topology.Machine {
		return "node"
	}
	return p.mapObj.String()
}

// pprObjects is the number of ppr resources on host h.
func (p *placer) pprObjects(h *host) (int, error) {
	if p.mapObj == topology.Machine {
		return 1, nil
	}
	if h.info == nil {
		return 0, fmt.Errorf("mapping by %s needs the topology of %s", p.mp, h.name)
	}
	if h.info.mapErr != "" {
		return 0, fmt.Errorf(h.info.mapErr, h.name)
	}
	return int(h.info.nobj), nil
}

// defaultCount is the number of processes of an app given no -n.
func (p *placer) defaultCount() int {
	n := 0
	switch p.mp.By {
	case MapSeq:
		return p.seqLen
	case MapRankfile:
		return len(p.opts.Rankfile)
	case MapPPR:
		for i := range p.hosts {
			k, err := p.pprObjects(&p.hosts[i])
			if err != nil {
				return 1 // the count check reports the error
			}
			n += k * p.mp.PPR
		}
		return n
	case MapPEList:
		for _, h := range p.hosts {
			n += min(h.slots, len(p.mp.PEList))
		}
		return max(n, 1)
	}
	if p.mp.PE > 1 {
		for _, h := range p.hosts {
			k := h.slots
			if h.info != nil && h.info.mapErr == "" {
				k = min(k, h.info.t.Count(h.info.unit)/p.mp.PE)
			}
			n += k
		}
		return max(n, 1)
	}
	return p.slots
}

func (p *placer) hostList(hosts []int) string {
	var b strings.Builder
	for k, i := range hosts {
		if k == 15 && len(hosts) > 16 {
			fmt.Fprintf(&b, ",... (%d hosts)", len(hosts))
			break
		}
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.hosts[i].name)
	}
	return b.String()
}

func (p *placer) allHosts() []int {
	all := make([]int, len(p.hosts))
	for i := range all {
		all[i] = i
	}
	return all
}

// slotCount is "1 slot" or "N slots"; slotsAre adds the verb.
func slotCount(n int) string {
	if n == 1 {
		return "1 slot"
	}
	return fmt.Sprintf("%d slots", n)
}

func slotsAre(n int) string {
	if n == 1 {
		return "1 slot is"
	}
	return fmt.Sprintf("%d slots are", n)
}

func (p *placer) slotsError() error {
	return fmt.Errorf("%d processes requested but only %s available on %s%s", p.total, slotsAre(p.slots), p.hostList(p.allHosts()), p.oversubHint())
}

// oversubHint tells how to run more processes than slots, unless the user
// forbade it (:NOOVERSUBSCRIBE). Every "not enough slots" error ends with it.
func (p *placer) oversubHint() string {
	if p.mp.NoOversubscribe {
		return ""
	}
	return OversubscribeHint
}

// OversubscribeHint ends the errors of a map that needs more slots than
// it has.
const OversubscribeHint = " (add --oversubscribe to allow more processes than slots)"

func (p *placer) maxSlotsError() error {
	capacity := 0
	for _, h := range p.hosts {
		capacity += max(h.slots, h.maxSlots)
	}
	return fmt.Errorf("%d processes requested but only %s available on %s (max_slots caps oversubscription)",
		p.total, slotsAre(capacity), p.hostList(p.allHosts()))
}

// roomOver reports whether host h may take one more process beyond its
// slots.
func (h *host) roomOver() bool { return h.maxSlots == 0 || h.used < h.maxSlots }
