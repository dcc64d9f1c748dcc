package mapper

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"prun/hostfile"
	"prun/jobspec"
	"prun/topology"
)

// bindKind is how the processes of a job are bound.
type bindKind uint8

const (
	bindNone     bindKind = iota
	bindObject            // each process to one object of placer.bindObj
	bindUnits             // PE=n: n CPUs (cores, or hwthreads)
	bindList              // pe-list: all the listed CPUs
	bindOrdered           // pe-list:ORDERED: the k-th listed CPU of its node
	bindRankfile          // the CPUs its rankfile line names
	bindUser              // Hydra's user:LIST and rr: a node's k-th process to the k-th CPU set
)

// placement is one process before ranking, in mapping order.
type placement struct {
	host int32 // index into placer.hosts
	obj  int32 // mapped object on the host (0 when mapping by slot, node...)
	bind int32 // index into placer.binds; -1: unbound
}

// host is one usable host of the allocation and its placement state.
type host struct {
	name            string
	slots, maxSlots int
	topo            *topology.Topology
	info            *topoInfo // nil when the topology is unknown
	used            int       // processes placed on it, all apps
	ready           bool      // state below allocated
	unbound         bool      // the default binding was given up here
	full            bool      // no mapped object has room left to bind (it never frees)
	cursor          int32     // next mapped object, round robin
	listUsed        int32     // processes bound by pe-list
	bcnt            []int32   // processes bound to each bind object
	bcur            []int32   // per mapped object: first bind object that may have room
	ucur            []int32   // per mapped object: first free CPU unit
	uwrap           []int32   // per mapped object: next unit when overloading PE
	userNext        int32     // bindUser: processes bound so far
}

// topoInfo is what placement needs of one topology, computed once for all
// the hosts that share it.
type topoInfo struct {
	t        *topology.Topology
	mapObj   topology.ObjType // objects dealt over (Machine: the node)
	unit     topology.ObjType // a CPU: Core, or PU with HWTCPUS
	bindObj  topology.ObjType // bindObject: the type (PU for core without cores)
	nobj     int32
	bLo, bHi []int32 // bindObject: per mapped object, the bind objects inside
	bCap     []int32 // bindObject: CPUs of each bind object
	bBase    int32   // bindObject: binds index of bind object 0
	uLo, uHi []int32 // per mapped object, the CPU units inside
	listID   int32   // bindList: binds index of the whole list
	listIDs  []int32 // bindOrdered: binds index of each listed CPU; bindUser: of each set
	mapErr   string  // why this topology cannot be mapped as asked ("%s" is the host)
	bindErr  string  // why it cannot be bound as asked
}

type unitKey struct {
	in           *topoInfo
	first, n, lo int32
	hi           int32
}

type placer struct {
	opts     Options
	mp       MapPolicy
	rank     RankPolicy
	user     bool // seq, rankfile: ranks are the file's
	bind     BindPolicy
	hwt      bool
	mapObj   topology.ObjType
	byObject bool
	kind     bindKind
	bindObj  topology.ObjType
	userSets []topology.CPUSet // Hydra's -bind-to user:, parsed
	explicit bool              // binding failures are errors; else the node runs unbound
	overload bool
	oversub  bool
	implicit bool

	hosts    []host
	byName   map[string]int
	infos    map[*topology.Topology]*topoInfo
	np       []int
	total    int
	slots    int
	rrNext   int // host where the next round-robin app starts
	appStart []int
	placed   []placement
	binds    []topology.CPUSet
	unitSets map[unitKey]int32
	slab     []int32
	seqLen   int // entries of the seq host list
	byRank   []*hostfile.RankEntry
	// appHosts[a] marks the hosts app a may use (its own --host); nil: all.
	appHosts [][]bool
	// appCaps[a][i] is how many of app a's processes host i may take
	// within its slots, from the app's own hostfile (mpirun's per-context
	// --hostfile: "a slots=1" there gives that app one slot on a); -1, or
	// a nil appCaps[a]: no cap of its own. appFile[a] is that file.
	appCaps [][]int
	appFile []string
}

// allowed reports whether app a may place processes on host i.
func (p *placer) allowed(a, i int) bool { return p.appHosts[a] == nil || p.appHosts[a][i] }

// PlaceWith places the job on the allocation following opts (see
// docs/placement.md for the rules). topo answers each host's topology; hosts with
// the same hardware should share one *Topology. A nil topo, or a nil
// answer, means unknown: such hosts can only be mapped by slot, node or seq
// and run unbound. Apps whose NP is 0 are given their default count:
// Map.Apps[i].Size (job is only read).
func PlaceWith(job *jobspec.Job, alloc hostfile.Allocation, topo func(host string) *topology.Topology, opts Options) (*Map, error) {
	p := &placer{opts: opts, mp: opts.MapBy, bind: opts.BindTo, rank: opts.RankBy}
	if err := p.mp.Check(); err != nil {
		return nil, fmt.Errorf("--map-by %s: %v", p.mp, err)
	}
	if err := p.setup(job, alloc, topo); err != nil {
		return nil, err
	}
	p.placed = make([]placement, 0, p.total)
	for a := range job.Apps {
		p.appStart = append(p.appStart, len(p.placed))
		restore := p.capApp(a)
		var err error
		switch {
		case p.mp.By == MapSeq:
			err = p.mapSeq(a)
		case p.mp.By == MapRankfile:
			err = p.mapRankfile(a)
		case p.mp.By == MapPPR:
			err = p.mapPPR(a)
		case p.mp.By == MapNode || p.mp.Span:
			err = p.mapRoundRobin(a)
		default:
			err = p.mapFill(a)
		}
		restore()
		if err != nil {
			return nil, err
		}
	}
	p.appStart = append(p.appStart, len(p.placed))
	p.unbindLeftovers()
	ord, err := p.order()
	if err != nil {
		return nil, err
	}
	m := p.build(ord)
	if err := assignMems(m, opts.MemBind); err != nil {
		return nil, err
	}
	return m, nil
}

// setup resolves hosts, topologies, policies and process counts.
func (p *placer) setup(job *jobspec.Job, alloc hostfile.Allocation, topo func(string) *topology.Topology) error {
	if len(job.Apps) == 0 {
		return fmt.Errorf("the job has no application")
	}
	p.implicit = alloc.Implicit
	p.hwt = p.mp.HWTCPUS || p.mp.By == MapHWThread
	p.byName = make(map[string]int, len(alloc.Hosts))
	p.hosts = make([]host, 0, len(alloc.Hosts))
	allTopo := true
	for _, ah := range alloc.Hosts {
		if p.mp.NoLocal {
			if p.opts.LocalHost == "" {
				return fmt.Errorf("--map-by :NOLOCAL: the launcher's host is unknown")
			}
			if strings.EqualFold(ah.Name, p.opts.LocalHost) {
				continue
			}
		}
		h := host{name: ah.Name, slots: ah.Slots, maxSlots: ah.MaxSlots}
		var t *topology.Topology
		if topo != nil {
			t = topo(ah.Name)
		}
		if t == nil {
			allTopo = false
		} else if p.hwt && p.opts.SlotsFromCores[ah.Name] {
			h.slots = t.NumPUs()
		}
		h.topo = t
		if _, dup := p.byName[strings.ToLower(ah.Name)]; !dup {
			p.byName[strings.ToLower(ah.Name)] = len(p.hosts)
		}
		p.hosts = append(p.hosts, h)
		p.slots += max(h.slots, 0)
	}
	if len(p.hosts) == 0 || p.slots <= 0 {
		if len(p.hosts) == 0 && len(alloc.Hosts) > 0 {
			return fmt.Errorf("no host is left once :NOLOCAL leaves out %s", p.opts.LocalHost)
		}
		return fmt.Errorf("the allocation has no slots")
	}
	// Hydra's core:N and hwthread:N: N CPUs for each process, as PE=N
	if c := p.bind.Count; c > 1 {
		if p.mp.PE > 0 && p.mp.PE != c {
			return fmt.Errorf("--bind-to %s and --map-by %s: PE=%d and %d CPUs for each process contradict each other", p.bind, p.mp, p.mp.PE, c)
		}
		p.mp.PE = c
	}
	if err := p.resolveMapping(allTopo); err != nil {
		return err
	}
	if err := p.resolveBinding(); err != nil {
		return err
	}
	if err := p.resolveRanking(); err != nil {
		return err
	}
	p.infos = map[*topology.Topology]*topoInfo{}
	var last *topoInfo
	for i := range p.hosts {
		h := &p.hosts[i]
		switch {
		case h.topo == nil:
		case last != nil && last.t == h.topo:
			h.info = last
		default:
			in := p.infos[h.topo]
			if in == nil {
				in = p.newInfo(h.topo)
				p.infos[h.topo] = in
			}
			h.info, last = in, in
		}
	}
	if err := p.resolveAppHosts(job); err != nil {
		return err
	}
	if err := p.resolveCounts(job); err != nil {
		return err
	}
	// The default binding of slot, node and seq mappings depends on the
	// job size, known only now.
	if p.kind == bindObject && !p.explicit && p.bindObj == topology.NUMANode && p.mapObj == topology.Machine && p.total <= 2 {
		p.bindObj = p.cpuObj()
		p.bind.To = jobspec.BindTargetOf(p.bindObj)
	}
	for _, in := range p.infos {
		p.addBindInfo(in)
	}
	return nil
}

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
			return fmt.Errorf("--map-by %s: %v", mp, err)
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
			return fmt.Errorf("--map-by rankfile: no rankfile was given")
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
			return fmt.Errorf("--bind-to %s names each process's CPUs: it cannot be combined with --map-by %s", b, mp)
		}
		p.kind, p.explicit = bindUser, true
		if b.To == BindUser {
			sets, err := jobspec.ParseUserBinding(b.User)
			if err != nil {
				return fmt.Errorf("--bind-to %s: %v", b, err)
			}
			p.userSets = sets
		}
	case mp.PE > 0:
		switch b.To {
		case BindDefault:
			b.To = jobspec.BindTargetOf(p.cpuObj())
		case BindCore, BindHWThread:
		default:
			return fmt.Errorf("--bind-to %s: PE=%d binds each process to %d CPUs, so bind to core or hwthread", b.To, mp.PE, mp.PE)
		}
		p.kind, p.explicit = bindUnits, true
	case mp.By == MapPEList:
		switch b.To {
		case BindDefault:
			b.To = jobspec.BindTargetOf(p.cpuObj())
		case BindCore, BindHWThread:
		default:
			return fmt.Errorf("--bind-to %s: pe-list binds to the listed CPUs, so bind to core or hwthread", b.To)
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
		return fmt.Errorf("--map-by %s: %s one CPU, so it cannot hold PE=%d (map by slot, numa or package, or add HWTCPUS to map by core)", mp, unit, mp.PE)
	}
	return nil
}

// resolveRanking picks the default ranking and checks the given one.
func (p *placer) resolveRanking() error {
	mp := &p.mp
	if mp.By == MapSeq || mp.By == MapRankfile {
		if p.rank.By != RankDefault {
			return fmt.Errorf("--rank-by %s cannot be used with --map-by %s: the ranks are the file's", p.rank, mp.By)
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
		return fmt.Errorf("--rank-by %s needs --map-by hwthread, core, l1cache, l2cache, l3cache, numa, package or ppr, not %s", p.rank, mp.By)
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
			in.mapErr = fmt.Sprintf("--map-by %s: %s %d does not exist on %%s (it has %d)", p.mp, unitName(in.unit), u, nunits)
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
			return fmt.Errorf("app %d: a context's own --host cannot be combined with --map-by %s", a+1, p.mp.By)
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
			return fmt.Errorf("--map-by seq: %d processes requested but the host list has only %d entries", p.total, p.seqLen)
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
				return fmt.Errorf("--map-by %s places at most %d processes (%d on each of %d %ss) but app %d asks for %d",
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
		return 0, fmt.Errorf("--map-by %s needs the topology of %s", p.mp, h.name)
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
			if err := p.checkSlots(h, "--map-by ppr"); err != nil {
				return err
			}
		}
		if !placed {
			break
		}
	}
	if rem > 0 { // only when the app's own hosts hold fewer resources
		return fmt.Errorf("app %d: --map-by %s places %d of its %d processes on its hosts", a+1, p.mp, p.np[a]-rem, p.np[a])
	}
	return nil
}

// checkSlots rejects a host given more processes than it may run.
func (p *placer) checkSlots(h *host, what string) error {
	if h.used <= h.slots && h.maxSlots == 0 {
		return nil
	}
	if what == "--map-by ppr" {
		what = "--map-by " + p.mp.String()
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
				return fmt.Errorf("--map-by seq: host %s (entry %d) is not in the allocation", name, r+1)
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
		if err := p.checkSlots(&p.hosts[i], "--map-by seq"); err != nil {
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
			return fmt.Errorf("--map-by %s needs the topology of %s", p.mp, h.name)
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
		return p.bindFail(h, "--bind-to "+p.bind.To.String()+": "+fmt.Sprintf(in.bindErr, h.name))
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
			return -1, p.bindFail(h, fmt.Sprintf("--bind-to %s: %s holds no %s", p.bind.To, p.where(h, o), in.bindObj))
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
			return -1, fmt.Errorf("--bind-to %s: %s already has as many processes as CPUs (add :overload-allowed to bind more)", p.bind.To, what)
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
			return -1, fmt.Errorf("--map-by %s: %s has only %d %ss, fewer than PE=%d", p.mp, p.where(h, o), hi-lo, unitName(in.unit), pe)
		}
		if !p.overload {
			return -1, fmt.Errorf("--map-by %s: %s has no %d free %ss left (add :overload-allowed to --bind-to to share them)",
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
			return -1, fmt.Errorf("--map-by %s: %s would run more processes than the %d listed CPUs (add :overload-allowed to --bind-to to allow it)",
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
