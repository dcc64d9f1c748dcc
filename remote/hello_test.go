package remote

import (
	"bytes"
	"fmt"
	"prun/remote/wire"
	"testing"

	"prun/ctl"
)

// A subtree's hellos travel in messages within the budget, each alike
// topology once per link, and the launcher gets every node's back: the 300
// daemons of vertex 1's subtree (fanout 2, 601 daemons), most alike, some
// with their hwloc XML (300 KiB each: 14 of them would not fit a message).
func TestCombineHellos(t *testing.T) {
	const n, k, xmlSize = 601, 2, 300 << 10
	hosts := make([]string, n)
	for v := 1; v <= n; v++ {
		hosts[v-1] = fmt.Sprintf("node%03d", v)
	}
	var hs []wire.Hello
	for _, v := range ctl.Subtree(1, k, n)[1:] {
		h := wire.Hello{Vertex: v, Host: hosts[v-1], Pid: v, Topo: "pack:1 core:4 pu:2"}
		switch {
		case v%7 == 0:
			h.Topo = "pack:2 core:8 pu:2"
		case v%5 == 0:
			h.Topo = fmt.Sprintf("asymmetric %d", v%3)
			h.TopoXML = bytes.Repeat([]byte{byte('a' + v%3)}, xmlSize)
		case v%11 == 0:
			h.Topo = fmt.Sprintf("asymmetric unique %d", v)
			h.TopoXML = bytes.Repeat([]byte{byte(v)}, xmlSize)
		}
		hs = append(hs, h)
	}
	own := wire.Hello{Vertex: 1, Host: hosts[0], Pid: 1, Topo: "pack:1 core:4 pu:2"}
	in := append([]wire.Hello{own}, hs...)
	msgs := wire.CombineHellos(in)
	if len(msgs) < 2 {
		t.Errorf("%d messages, want the XML spread over several", len(msgs))
	}
	if msgs[0].Hellos[0].Vertex != 1 || msgs[0].Hellos[0].Topo == "" {
		t.Errorf("the first message starts with %+v, want vertex 1's own hello with its topology", msgs[0].Hellos[0])
	}

	tr := &Tree{cfg: Config{Hosts: hosts, Fanout: k}, hellos: map[int]*wire.Hello{}, ready: make(chan struct{})}
	total := 0
	for i, m := range msgs {
		b, err := wire.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
		if len(b) > wire.HelloBudget+200<<10 || len(b) > ctl.MaxFrame {
			t.Errorf("message %d: %d bytes", i, len(b))
		}
		var back wire.SubtreeHellos
		if err := wire.Decode(b, &back); err != nil {
			t.Fatal(err)
		}
		for j := range back.Hellos {
			if err := tr.hello(1, back.Hellos[j].Vertex, &back.Hellos[j]); err != nil {
				t.Fatalf("message %d, hello %d: %v", i, j, err)
			}
		}
	}
	for _, h := range in {
		got := tr.hellos[h.Vertex]
		if got == nil || got.Host != h.Host || got.Topo != h.Topo || !bytes.Equal(got.TopoXML, h.TopoXML) || got.TopoOf != 0 {
			t.Fatalf("vertex %d came back as %+v", h.Vertex, got)
		}
	}
	t.Logf("%d hellos in %d messages, %d bytes", len(in), len(msgs), total)
	xmls := map[string]bool{}
	for _, h := range in {
		if len(h.TopoXML) > 0 {
			xmls[string(h.TopoXML)] = true
		}
	}
	if max := len(xmls)*xmlSize*4/3 + 1<<20; total > max {
		t.Errorf("%d bytes for %d distinct XML topologies: alike topologies went more than once", total, len(xmls))
	}
	if len(tr.hellos) != len(in) {
		t.Errorf("%d hellos recorded, want %d", len(tr.hellos), len(in))
	}

	// A hello may name only the topology of one the launcher has from the
	// same link.
	tr2 := &Tree{cfg: Config{Hosts: hosts, Fanout: 2}, hellos: map[int]*wire.Hello{}, ready: make(chan struct{})}
	tr2.hellos[2] = &wire.Hello{Topo: "x"} // vertex 0's other child
	for _, c := range []struct{ src, v, of int }{{1, 3, 9}, {1, 3, 2}, {1, 3, n + 5}, {1, 4, -1}} {
		if err := tr2.hello(c.src, c.v, &wire.Hello{TopoOf: c.of}); err == nil {
			t.Errorf("a hello of vertex %d over vertex %d's link naming vertex %d's topology was taken", c.v, c.src, c.of)
		}
	}
}
