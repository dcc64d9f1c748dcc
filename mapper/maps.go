// The mapping policies: each puts an app's processes on hosts and objects (fill, round robin, ppr, seq, rankfile).

package mapper

import (
	"fmt"
	"strings"

	"prun/hostfile"
	"prun/topology"
)

// mapFill fills the hosts in order, each up to its slots, then spreads what
// is left evenly when oversubscription is allowed.
func (p *placer) mapFill(a int) error {
	rem := p.np[a]
	for i := range p.hosts {
		if rem == 0 {
			return nil
		}
		if !p.allowed(a, i) {
			continue
		}
		h := &p.hosts[i]
		for k := min(h.slots-h.used, rem); k > 0; k-- {
			if err := p.put(h, i, -1); err != nil {
				return err
			}
			rem--
		}
	}
	for rem > 0 && p.mp.Cycle {
		// Hydra: round after round, each host its slots again
		placed := false
		for i := range p.hosts {
			h := &p.hosts[i]
			if !p.allowed(a, i) {
				continue
			}
			for k := min(max(h.slots, 1), rem); k > 0 && h.roomOver(); k-- {
				if err := p.put(h, i, -1); err != nil {
					return err
				}
				rem--
				placed = true
			}
		}
		if !placed {
			return p.maxSlotsError()
		}
	}
	for rem > 0 {
		if !p.oversub {
			if p.appHosts[a] != nil {
				return p.appSlotsError(a)
			}
			return p.slotsError()
		}
		var elig []int
		for i := range p.hosts {
			if p.allowed(a, i) && p.hosts[i].roomOver() {
				elig = append(elig, i)
			}
		}
		if len(elig) == 0 {
			return p.maxSlotsError()
		}
		per, extra := rem/len(elig), rem%len(elig)
		for j, i := range elig {
			h := &p.hosts[i]
			k := per
			if j < extra {
				k++
			}
			if h.maxSlots > 0 {
				k = min(k, h.maxSlots-h.used)
			}
			for ; k > 0; k-- {
				if err := p.put(h, i, -1); err != nil {
					return err
				}
				rem--
			}
		}
	}
	return nil
}

// mapRoundRobin deals processes one per host in turn (map-by node), or one
// per host and object in turn (SPAN), each host up to its slots, then
// beyond them when oversubscription is allowed.
func (p *placer) mapRoundRobin(a int) error {
	rem := p.np[a]
	n := len(p.hosts)
	active := make([]int, 0, n)
	for k := range n {
		i := (p.rrNext + k) % n
		if p.allowed(a, i) && p.hosts[i].used < p.hosts[i].slots {
			active = append(active, i)
		}
	}
	over := false
	for rem > 0 {
		if len(active) == 0 {
			if over || !p.oversub {
				switch {
				case over:
					return p.maxSlotsError()
				case p.appHosts[a] != nil:
					return p.appSlotsError(a)
				}
				return p.slotsError()
			}
			over = true
			for k := range n {
				i := (p.rrNext + k) % n
				if p.allowed(a, i) && p.hosts[i].roomOver() {
					active = append(active, i)
				}
			}
			continue
		}
		j := 0
		for _, i := range active {
			if rem == 0 {
				break
			}
			h := &p.hosts[i]
			if err := p.put(h, i, -1); err != nil {
				return err
			}
			rem--
			p.rrNext = (i + 1) % n
			if (!over && h.used < h.slots) || (over && h.roomOver()) {
				active[j] = i
				j++
			}
		}
		active = active[:j]
	}
	return nil
}

// mapPPR puts N processes on each resource, host after host.
func (p *placer) mapPPR(a int) error {
	rem := p.np[a]
	for round := 0; rem > 0 && (round == 0 || p.mp.Cycle); round++ {
		placed := false
		for i := range p.hosts {
			if rem == 0 {
				break
			}
			if !p.allowed(a, i) {
				continue
			}
			h := &p.hosts[i]
			nobj, err := p.pprObjects(h)
			if err != nil {
				return err
			}
			for o := 0; o < nobj && rem > 0; o++ {
				for k := 0; k < p.mp.PPR && rem > 0; k++ {
					if err := p.put(h, i, int32(o)); err != nil {
						return err
					}
					rem--
					placed = true
				}
			}
			if p.mp.Cycle {
				continue // Hydra's -ppn places beyond a host's slots
			}
			if err := p.checkSlots(h, "mapping by ppr"); err != nil {
				return err
			}
		}
		if !placed {
			break
		}
	}
	if rem > 0 { // only when the app's own hosts hold fewer resources
		return fmt.Errorf("app %d: mapping by %s places %d of its %d processes on its hosts", a+1, p.mp, p.np[a]-rem, p.np[a])
	}
	return nil
}

// checkSlots rejects a host given more processes than it may run.
func (p *placer) checkSlots(h *host, what string) error {
	if h.used <= h.slots && h.maxSlots == 0 {
		return nil
	}
	if what == "mapping by ppr" {
		what = "mapping by " + p.mp.String()
	}
	if h.used > h.slots && !p.oversub {
		return fmt.Errorf("%s places %d processes on %s but it has only %s%s", what, h.used, h.name, slotCount(h.slots), p.oversubHint())
	}
	if h.maxSlots > 0 && h.used > max(h.slots, h.maxSlots) {
		return fmt.Errorf("%s places %d processes on %s but its max_slots is %d", what, h.used, h.name, h.maxSlots)
	}
	return nil
}

// mapSeq puts rank i on the i-th host of the list.
func (p *placer) mapSeq(a int) error {
	off := p.appStart[a]
	var touched []int
	h, left := 0, 0 // without a list: each host once per slot
	for r := off; r < off+p.np[a]; r++ {
		var i int
		if p.opts.SeqHosts != nil {
			name := p.opts.SeqHosts[r]
			var ok bool
			if i, ok = p.byName[strings.ToLower(name)]; !ok {
				return fmt.Errorf("mapping by seq: host %s (entry %d) is not in the allocation", name, r+1)
			}
		} else {
			if r == off {
				for h, left = 0, r; left >= max(p.hosts[h].slots, 0); h++ {
					left -= max(p.hosts[h].slots, 0)
				}
			}
			for left >= p.hosts[h].slots {
				h, left = h+1, 0
			}
			i, left = h, left+1
		}
		if err := p.put(&p.hosts[i], i, 0); err != nil {
			return err
		}
		touched = append(touched, i)
	}
	for _, i := range touched {
		if err := p.checkSlots(&p.hosts[i], "mapping by seq"); err != nil {
			return err
		}
	}
	return nil
}

// mapRankfile puts each rank where its rankfile line says.
func (p *placer) mapRankfile(a int) error {
	off := p.appStart[a]
	var touched []int
	for r := off; r < off+p.np[a]; r++ {
		e := p.byRank[r]
		if e == nil {
			return fmt.Errorf("rankfile: no line for rank %d", r)
		}
		var i int
		if e.Host == "" {
			if e.Node >= len(p.hosts) {
				return fmt.Errorf("rankfile: rank %d: +n%d but the allocation has %d hosts", r, e.Node, len(p.hosts))
			}
			i = e.Node
		} else {
			var ok bool
			if i, ok = p.byName[strings.ToLower(e.Host)]; !ok {
				return fmt.Errorf("rankfile: rank %d: host %s is not in the allocation", r, e.Host)
			}
		}
		h := &p.hosts[i]
		if err := p.init(h); err != nil {
			return err
		}
		bind := int32(-1)
		if p.kind == bindRankfile && !h.unbound {
			var err error
			if bind, err = p.rankfileBinding(h, e); err != nil {
				return err
			}
		}
		p.placed = append(p.placed, placement{host: int32(i), bind: bind})
		h.used++
		touched = append(touched, i)
	}
	for _, i := range touched {
		if err := p.checkSlots(&p.hosts[i], "the rankfile"); err != nil {
			return err
		}
	}
	return nil
}

// rankfileBinding adds the binding of one rankfile line on host h.
func (p *placer) rankfileBinding(h *host, e *hostfile.RankEntry) (int32, error) {
	t, unit := h.info.t, h.info.unit
	n := t.Count(unit)
	var units []int
	for _, u := range e.Slot.CPUs {
		if u >= n {
			return 0, fmt.Errorf("rankfile: rank %d: %s %d does not exist on %s (it has %d)", e.Rank, unitName(unit), u, h.name, n)
		}
		units = append(units, u)
	}
	for _, pc := range e.Slot.Cores {
		if pc.Package >= t.Count(topology.Package) {
			return 0, fmt.Errorf("rankfile: rank %d: package %d does not exist on %s (it has %d)", e.Rank, pc.Package, h.name, t.Count(topology.Package))
		}
		lo, hi := t.Inside(topology.Package, pc.Package, unit)
		for _, c := range pc.Cores {
			if c >= hi-lo {
				return 0, fmt.Errorf("rankfile: rank %d: package %d of %s has no %s %d (it has %d)", e.Rank, pc.Package, h.name, unitName(unit), c, hi-lo)
			}
			units = append(units, lo+c)
		}
	}
	return p.unionID(t, unit, units), nil
}
