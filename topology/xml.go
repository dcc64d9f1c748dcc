package topology

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseXML reads hwloc's XML export (`lstopo --of xml`, the format of the
// node's cached topology). hwloc 2 files hang NUMA nodes beside the normal
// children as memory children (possibly below a MemCache); hwloc 1 files
// make them ordinary parents; both work. Logical order is hwloc's
// (siblings by smallest CPU, as in the file). PUs outside the root's
// allowed_cpuset (present when exported with --disallowed) are dropped, and
// so is every object left without PU, with the NUMA nodes attached to it:
// hwloc keeps those with an empty cpuset (after `--restrict`, say), but
// they are no placement target. A NUMA node attached to an object with PUs
// is local to those PUs, as in hwloc. I/O and Misc objects are skipped.
func ParseXML(r io.Reader) (*Topology, error) {
	root, allowed, err := parseXMLTree(r)
	if err != nil {
		return nil, fmt.Errorf("hwloc XML: %v", err)
	}
	t, err := build(root, allowed)
	if err != nil {
		return nil, fmt.Errorf("hwloc XML: %v", err)
	}
	return t, nil
}

func parseXMLTree(r io.Reader) (root *node, allowed CPUSet, err error) {
	dec := xml.NewDecoder(r)
	var stack []*node
	inTopology := false
	skip := 0 // depth inside an element we ignore
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if skip > 0 {
				skip++
				continue
			}
			name := tok.Name.Local
			if !inTopology {
				if name != "topology" {
					return nil, nil, fmt.Errorf("root element is <%s>, not <topology>", name)
				}
				inTopology = true
				continue
			}
			if name != "object" {
				skip = 1 // info, page_type, distances, support...
				continue
			}
			n, keep, err := xmlObject(tok.Attr)
			if err != nil {
				return nil, nil, err
			}
			if !keep {
				skip = 1
				continue
			}
			if len(stack) >= maxTreeDepth {
				return nil, nil, fmt.Errorf("objects nested too deep")
			}
			if len(stack) == 0 {
				if root != nil {
					return nil, nil, fmt.Errorf("several root objects")
				}
				root = n
				if a := attr(tok.Attr, "allowed_cpuset"); a != "" {
					if allowed, err = parseHexMask(a); err != nil {
						return nil, nil, fmt.Errorf("allowed_cpuset: %v", err)
					}
				}
			} else {
				parent := stack[len(stack)-1]
				if parent.typ == PU {
					return nil, nil, fmt.Errorf("object below a PU")
				}
				if !n.memory {
					parent.memory = false // a hwloc 1 NUMA node: an ordinary parent
				}
				parent.children = append(parent.children, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			if skip > 0 {
				skip--
			} else if tok.Name.Local == "object" {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if root == nil {
		return nil, nil, fmt.Errorf("no object")
	}
	machines := 0
	countMachines(root, &machines)
	if machines > 1 {
		return nil, nil, fmt.Errorf("%d machines in one file", machines)
	}
	return root, allowed, nil
}

func countMachines(n *node, count *int) {
	if n.typ == Machine {
		*count++
	}
	for _, c := range n.children {
		countMachines(c, count)
	}
}

// xmlObject maps an <object> to a node; keep is false for objects whose
// subtree holds no CPU (I/O, Misc).
func xmlObject(attrs []xml.Attr) (n *node, keep bool, err error) {
	typeName := attr(attrs, "type")
	n = &node{typ: noType, os: -1}
	if s := attr(attrs, "os_index"); s != "" {
		os, err := strconv.ParseUint(s, 10, 31)
		if err != nil {
			return nil, false, fmt.Errorf("%s os_index %q", typeName, s)
		}
		n.os = int(os)
	}
	switch typeName {
	case "Machine":
		n.typ = Machine
	case "Package", "Socket": // Socket: hwloc before 1.11
		n.typ = Package
	case "NUMANode":
		n.typ, n.memory = NUMANode, true
	case "MemCache":
		n.memory = true
	case "L3Cache":
		n.typ = L3Cache
	case "L2Cache":
		n.typ = L2Cache
	case "L1Cache":
		n.typ = L1Cache
	case "Cache": // hwloc 1: depth and cache_type attributes
		if attr(attrs, "cache_type") != "2" { // 2: instruction
			switch attr(attrs, "depth") {
			case "1":
				n.typ = L1Cache
			case "2":
				n.typ = L2Cache
			case "3":
				n.typ = L3Cache
			}
		}
	case "Core":
		n.typ = Core
	case "PU":
		n.typ = PU
		if n.os < 0 || n.os >= MaxCPUs {
			return nil, false, fmt.Errorf("PU without a valid os_index")
		}
	case "System", "Group", "Die", "L1iCache", "L2iCache", "L3iCache", "L4Cache", "L5Cache":
	case "Misc", "Bridge", "PCIDev", "OSDev":
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("unknown object type %q", typeName)
	}
	return n, true, nil
}

func attr(attrs []xml.Attr, name string) string {
	for _, a := range attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// parseHexMask reads hwloc's bitmap format: comma-separated 32-bit hex
// words, most significant first ("0x000000ff,,0xffffffff": an empty word is
// zero); a leading "0xf...f" word means every higher bit is set too.
func parseHexMask(s string) (CPUSet, error) {
	words := strings.Split(s, ",")
	var set CPUSet
	for k := len(words) - 1; k >= 0; k-- {
		w := strings.TrimPrefix(strings.TrimPrefix(words[k], "0x"), "0X")
		base := (len(words) - 1 - k) * 32
		if k == 0 && w == "f...f" {
			for c := base; c < MaxCPUs; c++ {
				set = append(set, c)
			}
			break
		}
		if w == "" {
			continue
		}
		v, err := strconv.ParseUint(w, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("bad mask %q", s)
		}
		for bit := 0; v != 0; bit++ {
			if v&1 != 0 {
				if base+bit >= MaxCPUs {
					return nil, fmt.Errorf("mask %q has CPUs beyond %d", s, MaxCPUs)
				}
				set = append(set, base+bit)
			}
			v >>= 1
		}
	}
	return set, nil
}
