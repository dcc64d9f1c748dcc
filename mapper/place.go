package mapper

import (
	"fmt"
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
		return nil, fmt.Errorf("mapping by %s: %v", p.mp, err)
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
				return fmt.Errorf("mapping by :NOLOCAL: the launcher's host is unknown")
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
			return fmt.Errorf("binding to %s and mapping by %s: PE=%d and %d CPUs for each process contradict each other", p.bind, p.mp, p.mp.PE, c)
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
