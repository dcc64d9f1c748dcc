package jobspec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"prun/topology"
)

// MapBy is the directive of --map-by: what processes are dealt over.
type MapBy uint8

// Mapping directives, in PRRTE's vocabulary. MapDefault means none was
// given; the mapper then picks one (docs/placement.md).
const (
	MapDefault MapBy = iota
	MapSlot
	MapHWThread
	MapCore
	MapL1Cache
	MapL2Cache
	MapL3Cache
	MapNUMA
	MapPackage
	MapNode
	MapSeq
	MapPPR
	MapRankfile
	MapPEList
)

var mapNames = [...]string{"", "slot", "hwthread", "core", "l1cache", "l2cache", "l3cache", "numa", "package", "node", "seq", "ppr", "rankfile", "pe-list"}

func (b MapBy) String() string {
	if int(b) < len(mapNames) {
		return mapNames[b]
	}
	return "MapBy(" + strconv.Itoa(int(b)) + ")"
}

// Object is the topology type a by-object directive deals processes over.
func (b MapBy) Object() (topology.ObjType, bool) {
	switch b {
	case MapHWThread:
		return topology.PU, true
	case MapCore:
		return topology.Core, true
	case MapL1Cache:
		return topology.L1Cache, true
	case MapL2Cache:
		return topology.L2Cache, true
	case MapL3Cache:
		return topology.L3Cache, true
	case MapNUMA:
		return topology.NUMANode, true
	case MapPackage:
		return topology.Package, true
	}
	return topology.Machine, false
}

// MapPolicy is a parsed --map-by: the directive and its qualifiers.
type MapPolicy struct {
	By MapBy
	// PPR and PPRObject are ppr:N:RESOURCE; PPRObject is topology.Machine
	// for "node".
	PPR       int
	PPRObject topology.ObjType
	// Cycle is Hydra's -ppn: PPR on each host in turn, then again from the
	// first host while processes remain, whatever the slots. With the
	// default placement, Hydra's host lists: each host its slots per round.
	Cycle bool
	// PEList is pe-list=: logical core indices (hwthread indices with
	// HWTCPUS), as in a rankfile.
	PEList topology.CPUSet
	// PE is :PE=n, CPUs bound to each process (0: not given).
	PE              int
	Span            bool
	Oversubscribe   bool
	NoOversubscribe bool
	NoLocal         bool
	HWTCPUS         bool
	CoreCPUs        bool
	Ordered         bool   // pe-list: one listed CPU per process, in order
	File            string // FILE=: the seq or rankfile file, read by the caller
}

// RankPolicy is --rank-by: one of PRRTE's policies, or (By RankObject)
// Open MPI 4's ranking over the objects of a type, which mpirun users know
// as --rank-by core, --rank-by socket:span and so on.
type RankPolicy struct {
	By  RankBy
	Obj topology.ObjType // RankObject: the objects ranks go round
	// RankObject qualifiers (at most one): Span goes round every node's
	// objects in turn instead of one node at a time; Fill ranks all of an
	// object's processes before the next object's.
	Span, Fill bool
}

// RankBy is the kind of a ranking policy.
type RankBy uint8

// Ranking policies. RankDefault follows the mapping (docs/placement.md).
const (
	RankDefault RankBy = iota
	RankSlot
	RankNode
	RankFill
	RankSpan
	RankObject
)

var rankNames = [...]string{"", "slot", "node", "fill", "span"}

func (r RankPolicy) String() string {
	switch {
	case r.By == RankObject:
		s := r.Obj.String()
		if r.Span {
			s += ":span"
		}
		if r.Fill {
			s += ":fill"
		}
		return s
	case int(r.By) < len(rankNames):
		return rankNames[r.By]
	}
	return "RankPolicy(" + strconv.Itoa(int(r.By)) + ")"
}

// BindTarget is the object of --bind-to.
type BindTarget uint8

// Binding targets. BindDefault means none was given.
const (
	BindDefault BindTarget = iota
	BindNone
	BindHWThread
	BindCore
	BindL1Cache
	BindL2Cache
	BindL3Cache
	BindNUMA
	BindPackage
	// Hydra's: each process of a node to the next of the CPU sets of
	// BindPolicy.User (user:0+2,1+4), or of the node's processors in the
	// order of their OS numbers (rr).
	BindUser
	BindRR
)

var bindNames = [...]string{"", "none", "hwthread", "core", "l1cache", "l2cache", "l3cache", "numa", "package", "user", "rr"}

func (b BindTarget) String() string {
	if int(b) < len(bindNames) {
		return bindNames[b]
	}
	return "BindTarget(" + strconv.Itoa(int(b)) + ")"
}

func (b BindTarget) Object() topology.ObjType {
	switch b {
	case BindHWThread:
		return topology.PU
	case BindCore:
		return topology.Core
	case BindL1Cache:
		return topology.L1Cache
	case BindL2Cache:
		return topology.L2Cache
	case BindL3Cache:
		return topology.L3Cache
	case BindNUMA:
		return topology.NUMANode
	case BindPackage:
		return topology.Package
	}
	return topology.Machine
}

func BindTargetOf(t topology.ObjType) BindTarget {
	switch t {
	case topology.PU:
		return BindHWThread
	case topology.Core:
		return BindCore
	case topology.L1Cache:
		return BindL1Cache
	case topology.L2Cache:
		return BindL2Cache
	case topology.L3Cache:
		return BindL3Cache
	case topology.NUMANode:
		return BindNUMA
	case topology.Package:
		return BindPackage
	}
	return BindNone
}

// BindPolicy is a parsed --bind-to.
type BindPolicy struct {
	To BindTarget
	// Count is Hydra's core:N and hwthread:N: N of them for each process
	// (PE=N); 0 when not given.
	Count int
	// User is BindUser's list, "0+2,1+4,3": OS processor numbers.
	User            string
	OverloadAllowed bool // more processes on an object than it has CPUs
	NoOverload      bool // the default, said explicitly
	IfSupported     bool // bind when possible, else run unbound
	Report          bool // --report-bindings
}

// A choice is one word of a vocabulary; alias words print as their name.
type choice struct {
	word, name string
	val        int
}

// match resolves a case-insensitive word or unique prefix of one.
func match(what, in string, vocab []choice) (int, error) {
	w := strings.ToLower(in)
	if w == "" {
		return 0, fmt.Errorf("empty %s", what)
	}
	var found []string
	val := -1
	for _, c := range vocab {
		if c.word == w {
			return c.val, nil
		}
		if strings.HasPrefix(c.word, w) {
			dup := false
			for _, f := range found {
				dup = dup || f == c.name
			}
			if !dup {
				found = append(found, c.name)
			}
			val = c.val
		}
	}
	switch len(found) {
	case 1:
		return val, nil
	case 0:
		names := make([]string, 0, len(vocab))
		for _, c := range vocab {
			if c.word == strings.ToLower(c.name) {
				names = append(names, c.name)
			}
		}
		return 0, fmt.Errorf("unknown %s %s (want %s)", what, q(in), orList(names))
	}
	return 0, fmt.Errorf("ambiguous %s %s: %s", what, q(in), orList(found))
}

// q quotes a user's word for a message, cut short if long.
func q(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}

func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

var mapVocab = []choice{
	{"slot", "slot", int(MapSlot)}, {"hwthread", "hwthread", int(MapHWThread)},
	{"core", "core", int(MapCore)}, {"l1cache", "l1cache", int(MapL1Cache)},
	{"l2cache", "l2cache", int(MapL2Cache)}, {"l3cache", "l3cache", int(MapL3Cache)},
	{"numa", "numa", int(MapNUMA)}, {"package", "package", int(MapPackage)},
	{"node", "node", int(MapNode)}, {"seq", "seq", int(MapSeq)},
	{"ppr", "ppr", int(MapPPR)}, {"rankfile", "rankfile", int(MapRankfile)},
	{"pe-list", "pe-list", int(MapPEList)}, {"socket", "package", int(MapPackage)},
}

const (
	qPE = iota
	qSpan
	qOversub
	qNoOversub
	qNoLocal
	qHWTCPUS
	qCoreCPUs
	qOrdered
	qFile
)

var mapQualVocab = []choice{
	{"pe", "PE", qPE}, {"span", "SPAN", qSpan}, {"oversubscribe", "OVERSUBSCRIBE", qOversub},
	{"nooversubscribe", "NOOVERSUBSCRIBE", qNoOversub}, {"nolocal", "NOLOCAL", qNoLocal},
	{"hwtcpus", "HWTCPUS", qHWTCPUS}, {"corecpus", "CORECPUS", qCoreCPUs},
	{"ordered", "ORDERED", qOrdered}, {"file", "FILE", qFile},
}

var pprVocab = []choice{
	{"node", "node", int(topology.Machine)}, {"hwthread", "hwthread", int(topology.PU)},
	{"thread", "hwthread", int(topology.PU)}, {"core", "core", int(topology.Core)},
	{"package", "package", int(topology.Package)}, {"socket", "package", int(topology.Package)},
	{"skt", "package", int(topology.Package)}, {"numa", "numa", int(topology.NUMANode)},
	{"nm", "numa", int(topology.NUMANode)}, {"l1cache", "l1cache", int(topology.L1Cache)},
	{"l2cache", "l2cache", int(topology.L2Cache)}, {"l3cache", "l3cache", int(topology.L3Cache)},
}

// rankVocab: PRRTE's policies, then Open MPI 4's objects (value 100+type).
var rankVocab = []choice{
	{"slot", "slot", int(RankSlot)}, {"node", "node", int(RankNode)},
	{"fill", "fill", int(RankFill)}, {"span", "span", int(RankSpan)},
	{"hwthread", "hwthread", rankObj + int(topology.PU)}, {"core", "core", rankObj + int(topology.Core)},
	{"l1cache", "l1cache", rankObj + int(topology.L1Cache)}, {"l2cache", "l2cache", rankObj + int(topology.L2Cache)},
	{"l3cache", "l3cache", rankObj + int(topology.L3Cache)}, {"numa", "numa", rankObj + int(topology.NUMANode)},
	{"package", "package", rankObj + int(topology.Package)}, {"socket", "package", rankObj + int(topology.Package)},
}

const rankObj = 100

var rankQualVocab = []choice{{"span", "span", 1}, {"fill", "fill", 2}}

var bindVocab = []choice{
	{"none", "none", int(BindNone)}, {"hwthread", "hwthread", int(BindHWThread)},
	{"core", "core", int(BindCore)}, {"l1cache", "l1cache", int(BindL1Cache)},
	{"l2cache", "l2cache", int(BindL2Cache)}, {"l3cache", "l3cache", int(BindL3Cache)},
	{"numa", "numa", int(BindNUMA)}, {"package", "package", int(BindPackage)},
	{"socket", "package", int(BindPackage)},
}

const (
	bqOverload = iota
	bqNoOverload
	bqIfSupported
	bqReport
)

var bindQualVocab = []choice{
	{"overload-allowed", "overload-allowed", bqOverload}, {"no-overload", "no-overload", bqNoOverload},
	{"if-supported", "if-supported", bqIfSupported}, {"report", "report", bqReport},
}

// maxCount bounds the numbers of a policy (ppr:N, PE=n).
const maxCount = 1 << 20

// count reads a positive decimal number.
func count(what, s string) (int, error) {
	if s == "" || len(s) > 8 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%s %s: want a positive number", what, q(s))
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > maxCount {
		return 0, fmt.Errorf("%s %s: want a number from 1 to %d", what, q(s), maxCount)
	}
	return n, nil
}

// ParseMapBy reads --map-by: DIRECTIVE[:QUALIFIER...], case-insensitive,
// any unique prefix of a word accepted. DIRECTIVE is slot, hwthread, core,
// l1cache, l2cache, l3cache, numa, package, node, seq, ppr:N:RESOURCE,
// rankfile or pe-list=LIST; it may be empty (":OVERSUBSCRIBE") to give
// qualifiers only. Qualifiers are PE=n, SPAN, OVERSUBSCRIBE,
// NOOVERSUBSCRIBE, NOLOCAL, HWTCPUS, CORECPUS, ORDERED and FILE=path.
func ParseMapBy(s string) (MapPolicy, error) {
	p, err := parseMapBy(s)
	if err != nil {
		return MapPolicy{}, fmt.Errorf("--map-by %s: %v", q(s), err)
	}
	return p, nil
}

func parseMapBy(s string) (MapPolicy, error) {
	var p MapPolicy
	if s == "" {
		return p, fmt.Errorf("empty policy")
	}
	fields := strings.Split(s, ":")
	if strings.EqualFold(fields[0], "machine") { // Hydra's: no object
		fields[0] = "slot"
	}
	quals, err := mapDirective(&p, fields)
	if err != nil {
		return p, err
	}
	seen := map[int]bool{}
	for i, q := range quals {
		name, val, hasVal := strings.Cut(q, "=")
		if q == "" {
			return p, fmt.Errorf("empty qualifier")
		}
		if i == 0 && fields[0] != "" && p.By != MapPPR && strings.Trim(q, "0123456789") == "" {
			// Hydra's OBJ:N: N cores or hwthreads for each process (PE=N)
			n, err := count(p.By.String()+":N", q)
			if err != nil {
				return p, err
			}
			switch {
			case n == 1:
			case p.By == MapCore || p.By == MapHWThread:
				// PE=N over the slots, its CPUs the object's kind
				p.PE, p.HWTCPUS, p.By = n, p.By == MapHWThread, MapSlot
				seen[qPE] = true
			default:
				return p, fmt.Errorf("%s:%d: prun maps %d cores (core:%d) or hwthreads (hwthread:%d) to a process, or one %s", p.By, n, n, n, n, p.By)
			}
			continue
		}
		k, err := match("qualifier", name, mapQualVocab)
		if err != nil {
			return p, err
		}
		if seen[k] {
			return p, fmt.Errorf("qualifier %s given twice", mapQualVocab[k].name)
		}
		seen[k] = true
		if (k == qPE || k == qFile) != hasVal {
			if hasVal {
				return p, fmt.Errorf("qualifier %s takes no value", mapQualVocab[k].name)
			}
			return p, fmt.Errorf("qualifier %s needs a value: %s=...", mapQualVocab[k].name, mapQualVocab[k].name)
		}
		switch k {
		case qPE:
			if p.PE, err = count("PE", val); err != nil {
				return p, err
			}
		case qSpan:
			p.Span = true
		case qOversub:
			p.Oversubscribe = true
		case qNoOversub:
			p.NoOversubscribe = true
		case qNoLocal:
			p.NoLocal = true
		case qHWTCPUS:
			p.HWTCPUS = true
		case qCoreCPUs:
			p.CoreCPUs = true
		case qOrdered:
			p.Ordered = true
		case qFile:
			if val == "" {
				return p, fmt.Errorf("FILE needs a path")
			}
			p.File = val
		}
	}
	return p, p.Check()
}

// mapDirective parses a --map-by policy's directive, fields[0], into p,
// and returns the qualifiers that follow it (after ppr's N:RESOURCE).
func mapDirective(p *MapPolicy, fields []string) ([]string, error) {
	quals := fields[1:]
	if fields[0] == "" {
		return quals, nil
	}
	word, val, hasVal := strings.Cut(fields[0], "=")
	by, err := match("policy", word, mapVocab)
	if err != nil {
		return nil, err
	}
	p.By = MapBy(by)
	switch {
	case p.By == MapPEList:
		if !hasVal || val == "" {
			return nil, fmt.Errorf("pe-list needs a CPU list: pe-list=0,2-3")
		}
		set, err := topology.ParseCPUSet(val)
		if err != nil || len(set) == 0 {
			return nil, fmt.Errorf("pe-list=%s: want a CPU list like 0,2-3", q(val))
		}
		p.PEList = set
	case hasVal:
		return nil, fmt.Errorf("%s takes no value", p.By)
	case p.By == MapPPR:
		if len(fields) < 3 || fields[2] == "" {
			return nil, fmt.Errorf("ppr needs a pattern: ppr:N:RESOURCE")
		}
		n, err := count("ppr", fields[1])
		if err != nil {
			return nil, err
		}
		obj, err := match("ppr resource", fields[2], pprVocab)
		if err != nil {
			return nil, err
		}
		p.PPR, p.PPRObject = n, topology.ObjType(obj)
		quals = fields[3:]
	}
	return quals, nil
}

// Check rejects qualifiers that contradict each other or the directive.
func (p MapPolicy) Check() error {
	switch {
	case p.Oversubscribe && p.NoOversubscribe:
		return fmt.Errorf("OVERSUBSCRIBE and NOOVERSUBSCRIBE contradict each other")
	case p.HWTCPUS && p.CoreCPUs:
		return fmt.Errorf("HWTCPUS and CORECPUS contradict each other")
	case p.By == MapHWThread && p.CoreCPUs:
		return fmt.Errorf("hwthread maps by hwthreads, which CORECPUS contradicts")
	case p.Span && (p.By == MapSlot || p.By == MapNode || p.By == MapSeq || p.By == MapPPR || p.By == MapRankfile || p.By == MapPEList):
		return fmt.Errorf("SPAN cannot be used with %s", p.By)
	case p.PE > 0 && (p.By == MapRankfile || p.By == MapPEList):
		return fmt.Errorf("PE cannot be used with %s", p.By)
	case p.Ordered && p.By != MapPEList:
		return fmt.Errorf("ORDERED applies to pe-list only")
	case p.File != "" && p.By != MapSeq && p.By != MapRankfile:
		return fmt.Errorf("FILE applies to seq and rankfile only")
	}
	return nil
}

// String writes the policy so that ParseMapBy reads it back.
func (p MapPolicy) String() string {
	var b strings.Builder
	b.WriteString(p.By.String())
	switch p.By {
	case MapPPR:
		b.WriteString(":" + strconv.Itoa(p.PPR) + ":")
		if p.PPRObject == topology.Machine {
			b.WriteString("node")
		} else {
			b.WriteString(p.PPRObject.String())
		}
	case MapPEList:
		b.WriteString("=" + p.PEList.String())
	}
	q := func(on bool, s string) {
		if on {
			b.WriteString(":" + s)
		}
	}
	q(p.PE > 0, "PE="+strconv.Itoa(p.PE))
	q(p.Span, "SPAN")
	q(p.Oversubscribe, "OVERSUBSCRIBE")
	q(p.NoOversubscribe, "NOOVERSUBSCRIBE")
	q(p.NoLocal, "NOLOCAL")
	q(p.HWTCPUS, "HWTCPUS")
	q(p.CoreCPUs, "CORECPUS")
	q(p.Ordered, "ORDERED")
	q(p.File != "", "FILE="+p.File)
	return b.String()
}

// ParseRankBy reads --rank-by: PRRTE's slot, node, fill or span, or Open
// MPI 4's OBJECT[:span|:fill] with OBJECT one of hwthread, core, l1cache,
// l2cache, l3cache, numa, package (alias socket). Case-insensitive, unique
// prefixes accepted.
func ParseRankBy(s string) (RankPolicy, error) {
	word, quals, hasQuals := strings.Cut(s, ":")
	r, err := match("policy", word, rankVocab)
	if err != nil {
		return RankPolicy{}, fmt.Errorf("--rank-by %s: %v", q(s), err)
	}
	if r < rankObj {
		if hasQuals {
			return RankPolicy{}, fmt.Errorf("--rank-by %s: ranking by %s takes no qualifiers", q(s), rankNames[r])
		}
		return RankPolicy{By: RankBy(r)}, nil
	}
	rp := RankPolicy{By: RankObject, Obj: topology.ObjType(r - rankObj)}
	if !hasQuals {
		return rp, nil
	}
	for _, w := range strings.Split(quals, ":") {
		v, err := match("qualifier", w, rankQualVocab)
		if err != nil {
			return RankPolicy{}, fmt.Errorf("--rank-by %s: %v", q(s), err)
		}
		if rp.Span && v == 1 || rp.Fill && v == 2 {
			return RankPolicy{}, fmt.Errorf("--rank-by %s: qualifier %s given twice", q(s), rankQualVocab[v-1].name)
		}
		if rp.Span || rp.Fill {
			return RankPolicy{}, fmt.Errorf("--rank-by %s: give span or fill, not both", q(s))
		}
		rp.Span, rp.Fill = v == 1, v == 2
	}
	return rp, nil
}

// ParseBindTo reads --bind-to: TARGET[:QUALIFIER...] where TARGET is none,
// hwthread, core, l1cache, l2cache, l3cache, numa or package (may be empty
// to give qualifiers only) and the qualifiers are overload-allowed,
// no-overload, if-supported and report. Case-insensitive, unique prefixes
// accepted.
func ParseBindTo(s string) (BindPolicy, error) {
	b, err := parseBindTo(s)
	if err != nil {
		return BindPolicy{}, fmt.Errorf("--bind-to %s: %v", q(s), err)
	}
	return b, nil
}

func parseBindTo(s string) (BindPolicy, error) {
	var b BindPolicy
	if s == "" {
		return b, fmt.Errorf("empty policy")
	}
	// Hydra's spellings: machine (no narrower than the node), rr, user:LIST
	switch low := strings.ToLower(s); {
	case low == "machine":
		return BindPolicy{To: BindNone}, nil
	case low == "rr":
		return BindPolicy{To: BindRR}, nil
	case strings.HasPrefix(low, "user:"):
		sets, err := ParseUserBinding(s[5:])
		if err != nil {
			return b, err
		}
		return BindPolicy{To: BindUser, User: formatUserBinding(sets)}, nil
	}
	fields := strings.Split(s, ":")
	if fields[0] != "" {
		t, err := match("policy", fields[0], bindVocab)
		if err != nil {
			return b, err
		}
		b.To = BindTarget(t)
	}
	seen := map[int]bool{}
	for i, q := range fields[1:] {
		if q == "" {
			return b, fmt.Errorf("empty qualifier")
		}
		if i == 0 && fields[0] != "" && strings.Trim(q, "0123456789") == "" {
			// Hydra's OBJ:N, N objects for each process
			n, err := count(b.To.String()+":N", q)
			if err != nil {
				return b, err
			}
			if n > 1 && b.To != BindCore && b.To != BindHWThread {
				return b, fmt.Errorf("%s:%d: prun binds a process to %d cores (core:%d) or hwthreads (hwthread:%d), or to one %s", b.To, n, n, n, n, b.To)
			}
			b.Count = n
			continue
		}
		k, err := match("qualifier", q, bindQualVocab)
		if err != nil {
			return b, err
		}
		if seen[k] {
			return b, fmt.Errorf("qualifier %s given twice", bindQualVocab[k].name)
		}
		seen[k] = true
		switch k {
		case bqOverload:
			b.OverloadAllowed = true
		case bqNoOverload:
			b.NoOverload = true
		case bqIfSupported:
			b.IfSupported = true
		case bqReport:
			b.Report = true
		}
	}
	if b.OverloadAllowed && b.NoOverload {
		return b, fmt.Errorf("overload-allowed and no-overload contradict each other")
	}
	return b, nil
}

// String writes the policy so that ParseBindTo reads it back.
func (b BindPolicy) String() string {
	s := b.To.String()
	if b.To == BindUser {
		return s + ":" + b.User
	}
	if b.Count > 0 {
		s += ":" + strconv.Itoa(b.Count)
	}
	if b.OverloadAllowed {
		s += ":overload-allowed"
	}
	if b.NoOverload {
		s += ":no-overload"
	}
	if b.IfSupported {
		s += ":if-supported"
	}
	if b.Report {
		s += ":report"
	}
	return s
}

// ParseUserBinding reads Hydra's -bind-to user: list: CPU sets separated
// by ",", each OS processor numbers joined by "+" ("0+2,1+4,3").
func ParseUserBinding(s string) ([]topology.CPUSet, error) {
	if s == "" {
		return nil, fmt.Errorf("user: needs CPU numbers (user:0+2,1+3)")
	}
	var sets []topology.CPUSet
	for _, item := range strings.Split(s, ",") {
		var set topology.CPUSet
		for _, c := range strings.Split(item, "+") {
			n, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil || n < 0 || n >= maxCount {
				return nil, fmt.Errorf("user:%s: %q is not a CPU number", s, c)
			}
			set = append(set, n)
		}
		slices.Sort(set)
		sets = append(sets, slices.Compact(set))
		if len(sets) > maxCount {
			return nil, fmt.Errorf("user:%s: more than %d CPU sets", s, maxCount)
		}
	}
	return sets, nil
}

func formatUserBinding(sets []topology.CPUSet) string {
	items := make([]string, len(sets))
	for i, set := range sets {
		cpus := make([]string, len(set))
		for j, c := range set {
			cpus[j] = strconv.Itoa(c)
		}
		items[i] = strings.Join(cpus, "+")
	}
	return strings.Join(items, ",")
}
