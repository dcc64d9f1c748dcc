// Binding: each placed process's CPUs, from the object it was mapped to.

package mapper

import (
	"fmt"
	"strconv"

	"prun/topology"
)

// MaxProcs bounds the processes of one job, so that a pattern like
// ppr:1000000:hwthread fails instead of exhausting memory.
const MaxProcs = 1 << 25

// slab32 carves n int32s out of a shared chunk.
func (p *placer) slab32(n int) []int32 {
	if n > len(p.slab) {
		p.slab = make([]int32, max(n, 1<<16))
	}
	s := p.slab[:n:n]
	p.slab = p.slab[n:]
	return s
}

// init readies host h for placement; it fails if h cannot be mapped or
// (with an explicit binding) bound as asked.
func (p *placer) init(h *host) error {
	if h.ready {
		return nil
	}
	h.ready = true
	in := h.info
	if in == nil {
		if p.byObject || (p.mp.By == MapPPR && p.mapObj != topology.Machine) || p.mp.By == MapPEList || p.mp.PE > 0 {
			return fmt.Errorf("mapping by %s needs the topology of %s", p.mp, h.name)
		}
		return p.bindFail(h, "cannot bind on "+h.name+": its topology is unknown")
	}
	if in.mapErr != "" {
		return fmt.Errorf(in.mapErr, h.name)
	}
	if p.kind == bindNone {
		return nil
	}
	if in.bindErr != "" {
		return p.bindFail(h, "binding to "+p.bind.To.String()+": "+fmt.Sprintf(in.bindErr, h.name))
	}
	switch p.kind {
	case bindObject:
		h.bcnt = p.slab32(len(in.bCap))
		h.bcur = p.slab32(int(in.nobj))
		copy(h.bcur, in.bLo)
	case bindUnits:
		h.ucur = p.slab32(int(in.nobj))
		copy(h.ucur, in.uLo)
	}
	return nil
}

// bindFail gives up binding on host h: an error for an explicit binding
// (unless if-supported), else the host runs unbound.
func (p *placer) bindFail(h *host, msg string) error {
	if p.kind == bindNone {
		return nil
	}
	if p.explicit && !p.bind.IfSupported {
		return fmt.Errorf("%s", msg)
	}
	h.unbound = true
	return nil
}

// put places one process on host h, on mapped object obj, or on the next
// Object round robin (skipping those without room to bind) when obj < 0.
func (p *placer) put(h *host, hi int, obj int32) error {
	if !h.ready {
		if err := p.init(h); err != nil {
			return err
		}
	}
	in := h.info
	rr := obj < 0
	if rr {
		obj = 0
		if in != nil && in.nobj > 1 {
			n := in.nobj
			obj = h.cursor
			if p.kind != bindNone && !h.unbound && !h.full {
				h.full = true
				for k := int32(0); k < n; k++ {
					o := h.cursor + k
					if o >= n {
						o -= n
					}
					if p.room(h, o) {
						obj, h.full = o, false
						break
					}
				}
			}
			if h.cursor = obj + 1; h.cursor == n {
				h.cursor = 0
			}
		}
	}
	bind := int32(-1)
	if p.kind != bindNone && !h.unbound {
		var err error
		if bind, err = p.bindOn(h, obj, rr); err != nil {
			return err
		}
	}
	p.placed = append(p.placed, placement{host: int32(hi), obj: obj, bind: bind})
	h.used++
	return nil
}

// room reports whether mapped object o of host h can bind one more
// process without overloading.
func (p *placer) room(h *host, o int32) bool {
	in := h.info
	switch p.kind {
	case bindObject:
		b, end := h.bcur[o], in.bHi[o]
		for b < end && h.bcnt[b] >= in.bCap[b] {
			b++
		}
		h.bcur[o] = b
		return b < end
	case bindUnits:
		return in.uHi[o]-h.ucur[o] >= int32(p.mp.PE)
	case bindList, bindOrdered:
		return int(h.listUsed) < len(p.mp.PEList)
	}
	return true
}

// where names mapped object o of host h in messages.
func (p *placer) where(h *host, o int32) string {
	if h.info == nil || h.info.mapObj == topology.Machine {
		return h.name
	}
	return h.info.mapObj.String() + " " + strconv.Itoa(int(o)) + " of " + h.name
}

// bindOn binds one process mapped to object o of host h; rr says o was
// picked round robin, so that every mapped object is full when o is.
func (p *placer) bindOn(h *host, o int32, rr bool) (int32, error) {
	in := h.info
	switch p.kind {
	case bindObject:
		if p.room(h, o) {
			b := h.bcur[o]
			h.bcnt[b]++
			return in.bBase + b, nil
		}
		lo, hi := in.bLo[o], in.bHi[o]
		if lo == hi {
			return -1, p.bindFail(h, fmt.Sprintf("binding to %s: %s holds no %s", p.bind.To, p.where(h, o), in.bindObj))
		}
		if !p.overload {
			if !p.explicit {
				h.unbound = true
				return -1, nil
			}
			what := "every " + in.bindObj.String() + " in " + p.where(h, o)
			switch {
			case rr || in.mapObj == topology.Machine:
				what = "every " + in.bindObj.String() + " of " + h.name
			case in.bindObj == in.mapObj:
				what = p.where(h, o)
			}
			return -1, fmt.Errorf("binding to %s: %s already has as many processes as CPUs (add :overload-allowed to bind more)", p.bind.To, what)
		}
		b := lo
		for c := lo + 1; c < hi; c++ {
			if h.bcnt[c]*in.bCap[b] < h.bcnt[b]*in.bCap[c] {
				b = c
			}
		}
		h.bcnt[b]++
		return in.bBase + b, nil
	case bindUnits:
		pe := int32(p.mp.PE)
		lo, hi := in.uLo[o], in.uHi[o]
		if p.room(h, o) {
			first := h.ucur[o]
			h.ucur[o] += pe
			return p.unitSet(in, first, pe, lo, hi), nil
		}
		if hi-lo < pe {
			return -1, fmt.Errorf("mapping by %s: %s has only %d %ss, fewer than PE=%d", p.mp, p.where(h, o), hi-lo, unitName(in.unit), pe)
		}
		if !p.overload {
			return -1, fmt.Errorf("mapping by %s: %s has no %d free %ss left (a binding with :overload-allowed shares them)",
				p.mp, p.where(h, o), pe, unitName(in.unit))
		}
		if h.uwrap == nil {
			h.uwrap = p.slab32(int(in.nobj))
		}
		first := lo + h.uwrap[o]%(hi-lo)
		h.uwrap[o] = (h.uwrap[o] + pe) % (hi - lo)
		return p.unitSet(in, first, pe, lo, hi), nil
	case bindList, bindOrdered:
		k := int(h.listUsed)
		if k >= len(p.mp.PEList) && !p.overload {
			return -1, fmt.Errorf("mapping by %s: %s would run more processes than the %d listed CPUs (a binding with :overload-allowed allows it)",
				p.mp, h.name, len(p.mp.PEList))
		}
		h.listUsed++
		if p.kind == bindList {
			return in.listID, nil
		}
		return in.listIDs[k%len(p.mp.PEList)], nil
	case bindUser: // Hydra wraps round the list
		k := h.userNext
		h.userNext++
		return in.listIDs[int(k)%len(in.listIDs)], nil
	}
	return -1, nil
}

// unitSet returns the binding to n units from first, wrapping within
// [lo, hi), shared by every process bound the same way.
func (p *placer) unitSet(in *topoInfo, first, n, lo, hi int32) int32 {
	k := unitKey{in: in, first: first, n: n}
	if first+n > hi {
		k.lo, k.hi = lo, hi
	}
	if id, ok := p.unitSets[k]; ok {
		return id
	}
	units := make([]int, n)
	for i := range units {
		u := first + int32(i)
		if u >= hi {
			u -= hi - lo
		}
		units[i] = int(u)
	}
	id := p.unionID(in.t, in.unit, units)
	if p.unitSets == nil {
		p.unitSets = map[unitKey]int32{}
	}
	p.unitSets[k] = id
	return id
}

// unbindLeftovers drops the default binding on hosts that gave it up or
// ended up oversubscribed.
func (p *placer) unbindLeftovers() {
	any := false
	for i := range p.hosts {
		h := &p.hosts[i]
		if !p.explicit && h.used > h.slots {
			h.unbound = true
		}
		any = any || h.unbound
	}
	if !any {
		return
	}
	for i := range p.placed {
		if p.hosts[p.placed[i].host].unbound {
			p.placed[i].bind = -1
		}
	}
}
