package wire

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"prun/ctl"
	"prun/stacktree"
	"prun/topview/sample"
)

// simGather is a tree of n daemons (vertices 1..n) under the launcher
// (vertex 0), fanout k, whose gatherers talk through goroutines in the
// frames' place: the JSON bodies travel as they would on the links. Each
// daemon's own part is one rank (its vertex) waiting in a barrier, but
// lone, which computes; silent never answers its parent.
func simGather(n, k, lone, silent int) *Gatherer {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%03d", i+1)
	}
	gs := make([]*Gatherer, n+1)
	for v := 0; v <= n; v++ {
		g := &Gatherer{Me: v, Fanout: k, Hosts: hosts}
		if v > 0 {
			g.Own = func(ctx context.Context, req *GatherReq) GatherReply {
				if req.Op == GatherRanks {
					return GatherReply{Ranks: []sample.Rank{{Rank: v, Host: hosts[v-1], State: "running"}}}
				}
				t := stacktree.New()
				inner := "MPI_Barrier"
				if v == lone {
					inner = "compute"
				}
				t.Add(v, []stacktree.Thread{{Frames: []stacktree.Frame{{Func: inner}, {Func: "main"}}}})
				t.Finish()
				return GatherReply{Tree: t}
			}
		}
		gs[v] = g
	}
	for v := 0; v <= n; v++ {
		me := v
		gs[v].Send = func(child int, body []byte) error {
			go func() {
				var req GatherReq
				if Decode(body, &req) != nil {
					return
				}
				res := gs[child].Run(context.Background(), req, nil)
				res.ID = req.ID
				if child == silent {
					return
				}
				b, _ := Encode(&res)
				gs[me].Answered(child, b)
			}()
			return nil
		}
	}
	return gs[0]
}

// TestGatherTree: 64 daemons, fanout 4 (depth 3): the launcher gets one
// reply per child, every rank's sample, and the stacks merged into two
// branches: the barrier's with every rank but one, and the lone rank's.
func TestGatherTree(t *testing.T) {
	const n, k, lone = 64, 4, 37
	root := simGather(n, k, lone, -1)
	kids := len(ctl.Children(0, k, n))
	res := root.Run(context.Background(), GatherReq{Op: GatherRanks, Wait: 5 * time.Second}, nil)
	if len(res.Ranks) != n || len(res.Missing) != 0 {
		t.Fatalf("ranks: %d samples, missing %v", len(res.Ranks), res.Missing)
	}
	if in, out := root.In.Load(), root.Out.Load(); in != int64(kids) || out != int64(kids) || root.MaxIn != kids {
		t.Errorf("the launcher handled %d replies and sent %d requests, want %d each (its children)", in, out, kids)
	}
	res = root.Run(context.Background(), GatherReq{Op: GatherStacks, Wait: 5 * time.Second}, nil)
	tr := res.Tree
	if len(tr.Root.Children) != 1 || tr.Root.Ranks.Len() != n {
		t.Fatalf("tree:\n%s", tr.Text(stacktree.Options{}))
	}
	main := tr.Root.Children[0]
	if len(main.Children) != 2 || main.Children[0].Func != "MPI_Barrier" || main.Children[0].Ranks.Len() != n-1 ||
		main.Children[1].Func != "compute" || main.Children[1].Ranks.String() != fmt.Sprint(lone) {
		t.Fatalf("want the barrier's branch with %d ranks and rank %d's apart:\n%s", n-1, lone, tr.Text(stacktree.Options{}))
	}
}

// TestGatherSilentChild: a daemon that never answers is named with its
// subtree, after a bounded wait, and the rest is there.
func TestGatherSilentChild(t *testing.T) {
	const n, k, silent = 20, 4, 2 // vertex 2's subtree: 2, 9-12
	root := simGather(n, k, -1, silent)
	start := time.Now()
	res := root.Run(context.Background(), GatherReq{Op: GatherRanks, Wait: time.Second}, nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v, want about the 1 s wait", took)
	}
	if len(res.Ranks) != n-len(ctl.Subtree(silent, k, n)) {
		t.Errorf("%d samples, want all but vertex %d's subtree", len(res.Ranks), silent)
	}
	if len(res.Missing) != 1 || !strings.HasPrefix(res.Missing[0], "h002 (and 4 daemons below it): no answer within 1s") {
		t.Errorf("missing %q", res.Missing)
	}
	// A lost child is named at once, without waiting.
	start = time.Now()
	res = root.Run(context.Background(), GatherReq{Op: GatherRanks, Wait: 5 * time.Second}, func(v int) bool { return v == silent })
	if took := time.Since(start); took > time.Second {
		t.Errorf("with the silent child known lost, took %v", took)
	}
	if len(res.Missing) != 1 || res.Missing[0] != "h002 (and 4 daemons below it): lost" {
		t.Errorf("missing %q", res.Missing)
	}
}
