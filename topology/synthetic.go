package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSynthetic builds a topology from hwloc's synthetic description, e.g.
// "pack:2 numa:2 l3:1 core:16 pu:2", numbering objects exactly as hwloc does
// (PUs 0..n-1 depth first unless an indexes= attribute says otherwise). It
// accepts hwloc's type spellings (any unambiguous prefix, any case: "pack",
// "Package", "socket", "NUMANode", "node", "L3Cache", "l2", "core", "pu"),
// hwloc's own export (`lstopo --of synthetic`: "[NUMANode]" attached memory,
// "(size=...)", "(indexes=...)" lists and interleavings) and levels the model
// does not keep (die, group, l1i, l4...), which still shape the numbering.
// Unlike hwloc it allows a missing last level ("pack:2 core:8" means one PU
// per core) and rejects what hwloc would silently ignore (bad indexes, a PU
// or NUMA index given twice; other levels may repeat indexes, as core
// numbers repeat in each package of a real machine).
func ParseSynthetic(spec string) (*Topology, error) {
	levels, attachedIdx, err := parseSyntheticLevels(spec)
	if err != nil {
		return nil, fmt.Errorf("synthetic topology %q: %v", spec, err)
	}
	root, err := generate(levels, attachedIdx)
	if err != nil {
		return nil, fmt.Errorf("synthetic topology %q: %v", spec, err)
	}
	t, err := build(root, nil)
	if err != nil {
		return nil, fmt.Errorf("synthetic topology %q: %v", spec, err)
	}
	return t, nil
}

// synthLevel is one level of a synthetic description; level 0 is the root.
type synthLevel struct {
	typ      ObjType // noType for levels the model does not keep
	key      string  // hwloc's type name, to resolve "indexes=Core:PU"
	cache    bool
	arity    int // objects per parent object
	total    int // objects on the level
	indexes  string
	attached int // NUMA nodes attached to each object ("[numa]")
	os       []int
}

// maxSynthObjects bounds the objects a description may generate, so that a
// short hostile string cannot take the memory of the machine.
const maxSynthObjects = 1 << 18

func parseSyntheticLevels(spec string) ([]synthLevel, string, error) {
	p := &synthParser{s: spec}
	levels := []synthLevel{{typ: Machine, key: "Machine", arity: 1, total: 1}}
	attachedIdx := ""
	p.skipSpace()
	if p.peek() == '(' { // attributes of the root
		if _, err := p.attrs(false); err != nil {
			return nil, "", err
		}
	}
	seen := map[ObjType]bool{}
	numaAttached, objects := false, 1
	for p.skipSpace(); p.i < len(p.s); p.skipSpace() {
		if p.peek() == '[' { // memory attached to each object of the last level
			if err := p.attachedNUMA(&attachedIdx); err != nil {
				return nil, "", err
			}
			levels[len(levels)-1].attached++
			numaAttached = true
			if objects += levels[len(levels)-1].total; objects > maxSynthObjects {
				return nil, "", fmt.Errorf("too many objects")
			}
			continue
		}
		name := p.until(":( \t\n\r[")
		if p.peek() != ':' {
			return nil, "", fmt.Errorf("missing ':' after %q", name)
		}
		p.i++
		typ, key, cache, err := synthType(name)
		if err != nil {
			return nil, "", err
		}
		arity, err := parseArity(p.until("( \t\n\r["))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %v", name, err)
		}
		parent := levels[len(levels)-1]
		if parent.typ == PU {
			return nil, "", fmt.Errorf("PU must be the last level")
		}
		if typ != noType {
			if seen[typ] {
				return nil, "", fmt.Errorf("several %s levels", key)
			}
			seen[typ] = true
		}
		total := parent.total * arity
		if arity > maxSynthObjects || total > MaxCPUs {
			return nil, "", fmt.Errorf("more than %d objects on a level", MaxCPUs)
		}
		if objects += total; objects > maxSynthObjects || len(levels) >= maxTreeDepth {
			return nil, "", fmt.Errorf("too many objects or levels")
		}
		l := synthLevel{typ: typ, key: key, cache: cache, arity: arity, total: total}
		if p.peek() == '(' {
			if l.indexes, err = p.attrs(cache); err != nil {
				return nil, "", err
			}
		}
		levels = append(levels, l)
	}
	if len(levels) == 1 {
		return nil, "", fmt.Errorf("no level")
	}
	if numaAttached && seen[NUMANode] {
		return nil, "", fmt.Errorf("NUMA nodes both as a level and attached")
	}
	if levels[len(levels)-1].typ != PU { // our extension: one PU per object
		levels = append(levels, synthLevel{typ: PU, key: "PU", arity: 1, total: levels[len(levels)-1].total})
	}
	if err := resolveSynthIndexes(levels); err != nil {
		return nil, "", err
	}
	return levels, attachedIdx, nil
}

// attachedNUMA parses "[numa(indexes)]", memory attached to each object of
// the last level; the indexes, if given, into *attachedIdx.
func (p *synthParser) attachedNUMA(attachedIdx *string) error {
	p.i++
	name := p.until("(]")
	typ, _, _, err := synthType(name)
	if err != nil {
		return err
	}
	if typ != NUMANode {
		return fmt.Errorf("only NUMA nodes may be attached, not %q", name)
	}
	if p.peek() == '(' {
		idx, err := p.attrs(false)
		if err != nil {
			return err
		}
		if idx != "" {
			if *attachedIdx != "" {
				return fmt.Errorf("attached NUMA indexes given twice")
			}
			*attachedIdx = idx
		}
	}
	if p.peek() != ']' {
		return fmt.Errorf("missing ] after %q", name)
	}
	p.i++
	return nil
}

// resolveSynthIndexes resolves the levels' "indexes=" attributes into
// their objects' OS indexes.
func resolveSynthIndexes(levels []synthLevel) error {
	for i := 1; i < len(levels); i++ {
		if levels[i].indexes != "" {
			// hwloc takes repeated indexes anywhere; real machines repeat
			// core numbers across packages, but never CPU or node numbers.
			distinct := levels[i].typ == PU || levels[i].typ == NUMANode
			os, err := synthIndexes(levels[i].indexes, levels, i, levels[i].total, distinct)
			if err != nil {
				return err
			}
			levels[i].os = os
		}
	}
	return nil
}

// generate creates the objects depth first, numbering each level in order of
// creation like hwloc: normal objects before their children, attached NUMA
// nodes after them, from one counter shared by all attachments.
func generate(levels []synthLevel, attachedIdx string) (*node, error) {
	attachedTotal := 0
	for _, l := range levels {
		attachedTotal += l.attached * l.total
	}
	var attachedOS []int
	if attachedIdx != "" {
		var err error
		if attachedOS, err = synthIndexes(attachedIdx, nil, 0, attachedTotal, true); err != nil {
			return nil, err
		}
	}
	next := make([]int, len(levels))
	nextAttached := 0
	var gen func(d int) *node
	gen = func(d int) *node {
		l := &levels[d]
		n := &node{typ: l.typ, os: next[d]}
		switch {
		case l.os != nil:
			n.os = l.os[next[d]]
		case l.cache || l.typ == noType:
			n.os = -1 // hwloc gives caches and groups no OS index
		}
		next[d]++
		if d+1 < len(levels) {
			n.children = make([]*node, levels[d+1].arity)
			for i := range n.children {
				n.children[i] = gen(d + 1)
			}
		}
		for range l.attached {
			os := nextAttached
			if attachedOS != nil {
				os = attachedOS[nextAttached]
			}
			nextAttached++
			n.mem = append(n.mem, &node{typ: NUMANode, os: os})
		}
		return n
	}
	root := gen(0)
	root.os = 0
	return root, nil
}

type synthParser struct {
	s string
	i int
}

func (p *synthParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *synthParser) skipSpace() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

// until returns the text up to (not including) any byte of stop.
func (p *synthParser) until(stop string) string {
	start := p.i
	for p.i < len(p.s) && strings.IndexByte(stop, p.s[p.i]) < 0 {
		p.i++
	}
	return p.s[start:p.i]
}

// attrs reads "(size=... memory=... indexes=...)" and returns the indexes.
// Sizes only matter to hwloc; they are checked and dropped.
func (p *synthParser) attrs(cache bool) (indexes string, err error) {
	p.i++ // '('
	body := p.until(")")
	if p.peek() != ')' {
		return "", fmt.Errorf("missing ')' after %q", body)
	}
	p.i++
	for _, a := range strings.Fields(body) {
		k, v, _ := strings.Cut(a, "=")
		switch {
		case k == "size" && cache, k == "memory" && !cache:
			if err := checkSize(v); err != nil {
				return "", err
			}
		case k == "indexes" && v != "":
			indexes = v
		default:
			return "", fmt.Errorf("unknown attribute %q", a)
		}
	}
	return indexes, nil
}

func checkSize(v string) error {
	num := v
	if len(v) > 2 {
		switch strings.ToLower(v[len(v)-2:]) {
		case "kb", "mb", "gb", "tb":
			num = v[:len(v)-2]
		}
	}
	if _, err := parseCUint(num, 64); err != nil {
		return fmt.Errorf("bad size %q", v)
	}
	return nil
}

// parseArity reads a positive count.
func parseArity(s string) (int, error) {
	n, err := parseCUint(s, 31)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("zero objects")
	}
	return int(n), nil
}

// parseCUint reads a number the way C's strtoul(s, 0) does in hwloc (0x
// hexadecimal, leading 0 octal), without signs, spaces or underscores.
func parseCUint(s string, bits int) (uint64, error) {
	base, digits := 10, s
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, digits = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, digits = 8, s[1:]
	}
	n, err := strconv.ParseUint(digits, base, bits)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return n, nil
}

// synthTypes lists hwloc's type names with the shortest prefix each accepts,
// in the order hwloc tries them (so "co" is core, not coproc).
var synthTypes = []struct {
	name   string
	minLen int
	key    string
	typ    ObjType
	ok     bool // false: hwloc knows it, a synthetic topology may not have it
}{
	{"osdev", 2, "OSDev", noType, false},
	{"block", 4, "OSDev", noType, false},
	{"network", 3, "OSDev", noType, false},
	{"openfabrics", 7, "OSDev", noType, false},
	{"dma", 3, "OSDev", noType, false},
	{"gpu", 3, "OSDev", noType, false},
	{"coproc", 5, "OSDev", noType, false},
	{"co-processor", 6, "OSDev", noType, false},
	{"machine", 2, "Machine", noType, false},
	{"numanode", 2, "NUMANode", NUMANode, true},
	{"node", 2, "NUMANode", NUMANode, true},
	{"memcache", 5, "MemCache", noType, false},
	{"package", 2, "Package", Package, true},
	{"socket", 2, "Package", Package, true},
	{"die", 2, "Die", noType, true},
	{"core", 2, "Core", Core, true},
	{"pu", 2, "PU", PU, true},
	{"misc", 4, "Misc", noType, false},
	{"bridge", 4, "Bridge", noType, false},
	{"hostbridge", 6, "Bridge", noType, false},
	{"pcibridge", 5, "Bridge", noType, false},
	{"pcidev", 3, "PCIDev", noType, false},
	{"group", 2, "Group", noType, true},
}

// synthType resolves a type name like hwloc_type_sscanf.
func synthType(name string) (typ ObjType, key string, cache bool, err error) {
	lower := strings.ToLower(name)
	if len(lower) >= 2 && lower[0] == 'l' && lower[1] >= '0' && lower[1] <= '9' {
		return cacheType(name, lower)
	}
	word := strings.TrimRight(lower, "0123456789") // "group1"
	if word != lower && !strings.HasPrefix(word, "gr") {
		word = lower
	}
	for _, st := range synthTypes {
		if len(word) >= st.minLen && strings.HasPrefix(st.name, word) {
			if !st.ok {
				return 0, "", false, fmt.Errorf("type %q not allowed in a synthetic topology", name)
			}
			return st.typ, st.key, false, nil
		}
	}
	return 0, "", false, fmt.Errorf("unknown type %q", name)
}

// cacheType reads L<depth>[i|d|u][cache-prefix]: L1d, L2, L3Cache, l1icache.
func cacheType(name, lower string) (ObjType, string, bool, error) {
	j := 1
	for j < len(lower) && lower[j] >= '0' && lower[j] <= '9' {
		j++
	}
	depth, err := strconv.Atoi(lower[1:j])
	rest := lower[j:]
	instr := strings.HasPrefix(rest, "i")
	if instr || strings.HasPrefix(rest, "d") || strings.HasPrefix(rest, "u") {
		rest = rest[1:]
	}
	if err != nil || !strings.HasPrefix("cache", rest) || depth < 1 || depth > 5 || (instr && depth > 3) {
		return 0, "", false, fmt.Errorf("unknown type %q", name)
	}
	key := "L" + lower[1:j]
	if instr {
		return noType, key + "iCache", true, nil
	}
	key += "Cache"
	switch depth {
	case 1:
		return L1Cache, key, true, nil
	case 2:
		return L2Cache, key, true, nil
	case 3:
		return L3Cache, key, true, nil
	}
	return noType, key, true, nil // L4, L5: rare, not a mapping target
}

// synthIndexes expands an indexes= attribute for level d of total objects:
// an explicit list "0,2,1,3", an interleaving "2*4:1*2" (object j gets
// sum((j/step)%nb * product of the previous nbs)), or the same by types
// "Core:PU" (levels above d). levels is nil for attached NUMA nodes.
// distinct rejects an index given twice.
func synthIndexes(spec string, levels []synthLevel, d, total int, distinct bool) ([]int, error) {
	bad := func(why string) error { return fmt.Errorf("indexes=%s: %s", spec, why) }
	out := make([]int, 0, total)
	if strings.Trim(spec, "0123456789,") == "" { // explicit list
		for f := range strings.SplitSeq(spec, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n >= MaxCPUs {
				return nil, bad(fmt.Sprintf("bad index %q", f))
			}
			out = append(out, n)
		}
		if len(out) != total {
			return nil, bad(fmt.Sprintf("%d indexes for %d objects", len(out), total))
		}
		return out, checkDistinct(out, distinct, bad)
	}
	type loop struct{ step, nb int }
	var loops []loop
	fields := strings.Split(spec, ":")
	if spec[0] >= '0' && spec[0] <= '9' {
		for _, f := range fields {
			a, b, ok := strings.Cut(f, "*")
			step, err1 := strconv.Atoi(a)
			nb, err2 := strconv.Atoi(b)
			if !ok || err1 != nil || err2 != nil || step < 1 || nb < 1 || step > total || nb > total {
				return nil, bad(fmt.Sprintf("bad loop %q", f))
			}
			loops = append(loops, loop{step, nb})
		}
	} else {
		if levels == nil {
			return nil, bad("interleaving by type needs a level")
		}
		depths := make([]int, len(fields))
		for i, f := range fields {
			_, key, _, err := synthType(f)
			if err != nil {
				return nil, bad(err.Error())
			}
			depths[i] = -1
			for k := 0; k < d; k++ {
				if levels[k].key == key {
					depths[i] = k
					break
				}
			}
			if depths[i] < 0 {
				return nil, bad(fmt.Sprintf("no %s level above", f))
			}
			for _, o := range depths[:i] {
				if o == depths[i] {
					return nil, bad("a type appears twice")
				}
			}
		}
		for _, my := range depths {
			prev := 0
			for _, o := range depths {
				if o < my && o > prev {
					prev = o
				}
			}
			loops = append(loops, loop{total / levels[my].total, levels[my].total / levels[prev].total})
		}
	}
	nbs, minStep := 1, total
	for _, l := range loops {
		if nbs *= l.nb; nbs > total {
			return nil, bad("interleaving too wide")
		}
		minStep = min(minStep, l.step)
	}
	if nbs != total {
		// hwloc adds the innermost loop when it is the only one missing.
		if total%nbs != 0 || minStep != total/nbs {
			return nil, bad(fmt.Sprintf("interleaving covers %d of %d objects", nbs, total))
		}
		loops = append(loops, loop{1, total / nbs})
	}
	out = out[:total]
	mul := 1
	for _, l := range loops {
		for j := range out {
			out[j] += (j / l.step) % l.nb * mul
		}
		mul *= l.nb
	}
	return out, checkDistinct(out, distinct, bad)
}

func checkDistinct(idx []int, distinct bool, bad func(string) error) error {
	if !distinct {
		return nil
	}
	seen := make(map[int]bool, len(idx))
	for _, n := range idx {
		if seen[n] {
			return bad(fmt.Sprintf("index %d twice", n))
		}
		seen[n] = true
	}
	return nil
}
