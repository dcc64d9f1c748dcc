// The placement's policies resolved: the default mapping, binding and ranking, and the per-topology facts binding needs.

package mapper

import (
	"fmt"
	"maps"
	"slices"

	"prun/jobspec"
	"prun/topology"
)

// resolveMapping picks the default mapping and checks the given one.
func (p *placer) resolveMapping(allTopo bool) error {
	mp := &p.mp
	if mp.By == MapDefault {
		switch {
		case mp.PE > 1, !allTopo, p.bind.To == BindNone, p.bind.To == BindUser, p.bind.To == BindRR:
			mp.By = MapSlot
		case p.bind.To != BindDefault:
			mp.By = map[BindTarget]MapBy{BindHWThread: MapHWThread, BindCore: MapCore, BindL1Cache: MapL1Cache,
				BindL2Cache: MapL2Cache, BindL3Cache: MapL3Cache, BindNUMA: MapNUMA, BindPackage: MapPackage}[p.bind.To]
		case p.hwt:
			mp.By = MapHWThread
		default:
			mp.By = MapCore
		}
		if err := mp.Check(); err != nil {
			return fmt.Errorf("mapping by %s: %v", mp, err)
		}
	}
	p.hwt = mp.HWTCPUS || mp.By == MapHWThread
	p.mapObj, p.byObject = mp.By.Object()
	if mp.By == MapPPR {
		p.mapObj = mp.PPRObject
	}
	switch mp.By {
	case MapSeq:
		p.seqLen = len(p.opts.SeqHosts)
		if p.opts.SeqHosts == nil {
			p.seqLen = p.slots
		}
	case MapRankfile:
		if len(p.opts.Rankfile) == 0 {
			return fmt.Errorf("mapping by rankfile: no rankfile was given")
		}
	}
	return nil
}

// cpuObj is a CPU: the type processes are bound to by default.
func (p *placer) cpuObj() topology.ObjType {
	if p.hwt {
		return topology.PU
	}
	return topology.Core
}

// resolveBinding picks the default binding and checks the given one.
func (p *placer) resolveBinding() error {
	b, mp := &p.bind, &p.mp
	p.overload = b.OverloadAllowed
	given := b.To != BindDefault
	switch {
	case mp.By == MapRankfile:
		p.kind, p.explicit = bindRankfile, true
		if b.To == BindNone {
			p.kind = bindNone
		} else {
			b.To = BindDefault
		}
	case b.To == BindUser || b.To == BindRR:
		if mp.PE > 0 || mp.By == MapPEList {
			return fmt.Errorf("binding to %s names each process's CPUs: it cannot be combined with mapping by %s", b, mp)
		}
		p.kind, p.explicit = bindUser, true
		if b.To == BindUser {
			sets, err := jobspec.ParseUserBinding(b.User)
			if err != nil {
				return fmt.Errorf("binding to %s: %v", b, err)
			}
			p.userSets = sets
		}
	case mp.PE > 0:
		switch b.To {
		case BindDefault:
			b.To = jobspec.BindTargetOf(p.cpuObj())
		case BindCore, BindHWThread:
		default:
			return fmt.Errorf("binding to %s: PE=%d binds each process to %d CPUs, so bind to core or hwthread", b.To, mp.PE, mp.PE)
		}
		p.kind, p.explicit = bindUnits, true
	case mp.By == MapPEList:
		switch b.To {
		case BindDefault:
			b.To = jobspec.BindTargetOf(p.cpuObj())
		case BindCore, BindHWThread:
		default:
			return fmt.Errorf("binding to %s: pe-list binds to the listed CPUs, so bind to core or hwthread", b.To)
		}
		p.kind, p.explicit = bindList, true
		if mp.Ordered {
			p.kind = bindOrdered
		}
	case given:
		p.explicit = true
		if b.To == BindNone {
			p.kind = bindNone
			break
		}
		// An object larger than the one mapped to (--map-by core --bind-to
		// package) binds each process to the one that holds its object,
		// as mpirun and Hydra do (addBindInfo).
		p.kind, p.bindObj = bindObject, b.To.Object()
	case mp.Oversubscribe:
		b.To, p.kind = BindNone, bindNone // PRRTE: asking to oversubscribe means no default binding
	case p.byObject || (mp.By == MapPPR && p.mapObj != topology.Machine):
		p.kind, p.bindObj = bindObject, p.mapObj
	default: // slot, node, seq, ppr:N:node
		p.kind, p.bindObj = bindObject, topology.NUMANode // a CPU for jobs of 1 or 2 (setup)
	}
	if p.kind == bindObject && !given {
		b.To = jobspec.BindTargetOf(p.bindObj)
	}
	if p.kind == bindUnits || p.kind == bindList || p.kind == bindOrdered {
		p.hwt = b.To == BindHWThread // the CPUs bound are the ones --bind-to names
	}
	if mp.PE > 1 && (p.mapObj == topology.PU || (p.mapObj == topology.Core && !p.hwt)) {
		unit := "a core is"
		if p.mapObj == topology.PU {
			unit = "an hwthread is"
		}
		return fmt.Errorf("mapping by %s: %s one CPU, so it cannot hold PE=%d (map by slot, numa or package, or add HWTCPUS to map by core)", mp, unit, mp.PE)
	}
	return nil
}

// resolveRanking picks the default ranking and checks the given one.
func (p *placer) resolveRanking() error {
	mp := &p.mp
	if mp.By == MapSeq || mp.By == MapRankfile {
		if p.rank.By != RankDefault {
			return fmt.Errorf("ranking by %s cannot be used with mapping by %s: the ranks are the file's", p.rank, mp.By)
		}
		p.user = true
		return nil
	}
	if mp.Cycle && p.rank.By == RankDefault {
		p.user = true // Hydra ranks -ppn's processes as placed, round after round
		return nil
	}
	if p.rank.By == RankDefault {
		switch {
		case mp.By == MapNode:
			p.rank.By = RankNode
		case mp.Span:
			p.rank.By = RankSpan
		case p.byObject:
			p.rank.By = RankFill
		default:
			p.rank.By = RankSlot
		}
	}
	if (p.rank.By == RankFill || p.rank.By == RankSpan) && !p.byObject && mp.By != MapPPR {
		return fmt.Errorf("ranking by %s needs mapping by hwthread, core, l1cache, l2cache, l3cache, numa, package or ppr, not %s", p.rank, mp.By)
	}
	return nil
}

// newInfo computes what placement needs of topology t.
func (p *placer) newInfo(t *topology.Topology) *topoInfo {
	in := &topoInfo{t: t, mapObj: p.mapObj, unit: p.cpuObj(), listID: -1}
	if t.Count(topology.Core) == 0 {
		in.unit = topology.PU
		if in.mapObj == topology.Core {
			in.mapObj = topology.PU // PRRTE: no cores, map by hwthread
		}
	}
	if in.mapObj != topology.Machine && t.Count(in.mapObj) == 0 {
		in.mapErr = "%s has no " + in.mapObj.String() + " to map by"
		return in
	}
	in.nobj = int32(t.Count(in.mapObj))
	nunits := t.Count(in.unit)
	in.uLo, in.uHi = make([]int32, in.nobj), make([]int32, in.nobj)
	for o := range in.nobj {
		lo, hi := t.Inside(in.mapObj, int(o), in.unit)
		in.uLo[o], in.uHi[o] = int32(lo), int32(hi)
	}
	for _, u := range p.mp.PEList {
		if u >= nunits {
			in.mapErr = fmt.Sprintf("mapping by %s: %s %d does not exist on %%s (it has %d)", p.mp, unitName(in.unit), u, nunits)
			return in
		}
	}
	return in
}

// addBindInfo computes what binding needs of a topology.
func (p *placer) addBindInfo(in *topoInfo) {
	t := in.t
	if in.mapErr != "" {
		return
	}
	switch p.kind {
	case bindObject:
		in.bindObj = p.bindObj
		if in.bindObj == topology.Core && t.Count(topology.Core) == 0 {
			in.bindObj = topology.PU // PRRTE: no cores, bind to hwthreads
		}
		nb := t.Count(in.bindObj)
		if nb == 0 {
			in.bindErr = "%s has no " + in.bindObj.String() + " to bind to"
			break
		}
		in.bLo, in.bHi = make([]int32, in.nobj), make([]int32, in.nobj)
		for o := range in.nobj {
			lo, hi := t.Inside(in.mapObj, int(o), in.bindObj)
			if lo == hi && in.mapObj != topology.Machine {
				// a larger object: the one that holds o
				for b := range nb {
					if l, h := t.Inside(in.bindObj, b, in.mapObj); l <= int(o) && int(o) < h {
						lo, hi = b, b+1
						break
					}
				}
			}
			in.bLo[o], in.bHi[o] = int32(lo), int32(hi)
		}
		in.bCap = make([]int32, nb)
		in.bBase = int32(len(p.binds))
		for b := range nb {
			c := 1
			if in.bindObj != in.unit {
				lo, hi := t.Inside(in.bindObj, b, in.unit)
				c = max(1, hi-lo)
			}
			in.bCap[b] = int32(c)
			p.binds = append(p.binds, t.CPUs(in.bindObj, b))
		}
	case bindList:
		in.listID = p.unionID(t, in.unit, p.mp.PEList)
	case bindOrdered:
		for _, u := range p.mp.PEList {
			in.listIDs = append(in.listIDs, int32(len(p.binds)))
			p.binds = append(p.binds, t.CPUs(in.unit, u))
		}
	case bindUser:
		have := map[int]bool{}
		for _, c := range t.LogicalCPUs() {
			have[c] = true
		}
		sets := p.userSets
		if p.bind.To == BindRR { // each processor by its OS number
			sets = nil
			for _, c := range slices.Sorted(maps.Keys(have)) {
				sets = append(sets, topology.CPUSet{c})
			}
		} else {
			for _, set := range sets {
				for _, c := range set {
					if !have[c] {
						in.bindErr = fmt.Sprintf("CPU %d does not exist on %%s", c)
						return
					}
				}
			}
		}
		for _, set := range sets {
			in.listIDs = append(in.listIDs, int32(len(p.binds)))
			p.binds = append(p.binds, set)
		}
	}
}

func unitName(t topology.ObjType) string {
	if t == topology.PU {
		return "hwthread"
	}
	return t.String()
}

// unionID adds the binding to the CPUs of the given units.
func (p *placer) unionID(t *topology.Topology, unit topology.ObjType, units []int) int32 {
	var cpus []int
	for _, u := range units {
		cpus = append(cpus, t.CPUs(unit, u)...)
	}
	slices.Sort(cpus)
	p.binds = append(p.binds, topology.CPUSet(slices.Compact(cpus)))
	return int32(len(p.binds) - 1)
}
