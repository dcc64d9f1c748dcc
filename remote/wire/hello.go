package wire

import (
	"errors"

	"prun/ctl"
)

// HelloBudget bounds a combined start-up message: hellos that would take
// it past go in the next one. A node's topology may be its hwloc XML (an
// asymmetric node's: tens of KiB), and a frame may not exceed ctl.MaxFrame.
const HelloBudget = 4 << 20

// CombineHellos makes a vertex's start-up messages of its subtree's hellos
// (its own first; hs is not changed): a topology that a hello before it on
// this link carried (alike nodes: most of them) goes as that hello's vertex
// (TopoOf) instead of again, and a message ends before a hello that would
// take it past helloBudget.
func CombineHellos(hs []Hello) []*SubtreeHellos {
	seen := map[string]int{}
	out := []*SubtreeHellos{{}}
	size := 0
	for _, h := range hs {
		if h.TopoOf == 0 && (h.Topo != "" || len(h.TopoXML) > 0) {
			key := h.Topo + "\x00" + string(h.TopoXML)
			if v, ok := seen[key]; ok {
				h.Topo, h.TopoXML, h.TopoOf = "", nil, v
			} else {
				seen[key] = h.Vertex
			}
		}
		n := 64 + len(h.Host) + len(h.Topo) + len(h.TopoXML)*4/3 // JSON, base64
		cur := out[len(out)-1]
		if len(cur.Hellos) > 0 && size+n > HelloBudget {
			cur = &SubtreeHellos{}
			out = append(out, cur)
			size = 0
		}
		cur.Hellos = append(cur.Hellos, h)
		size += n
	}
	return out
}

// errHelloOutside is a hello of a vertex that is not in the subtree of the
// link it came over; errHelloTopo one that names the topology of a hello
// that did not come before it.
var (
	ErrHelloOutside = errors.New("a hello of a node outside its subtree")
	ErrHelloTopo    = errors.New("a hello naming the topology of a hello not received")
)

// InSubtree says whether vertex w is v or below it.
func InSubtree(w, v, fanout int) bool {
	for ; w > v; w = ctl.Parent(w, fanout) {
	}
	return w == v
}
