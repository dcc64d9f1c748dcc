package nodeside

import (
	"context"
	"fmt"
	"prun/remote/wire"

	"prun/stacktree"
)

// gatherHere answers the parent's tGather: off the link's reader, as it
// waits for the children and the debuggers.
func (n *node) gatherHere(m *wire.GatherReq) {
	go func() {
		res := n.gather.Run(context.Background(), *m, nil)
		res.ID = m.ID
		body, err := wire.Encode(&res)
		if err != nil {
			return
		}
		n.up.Send(wire.TGathered, wire.Frame(wire.ToLauncher, uint32(n.me), body))
	}()
}

// ownPart is this daemon's part: its local ranks' samples or stacks.
func (n *node) ownPart(ctx context.Context, req *wire.GatherReq) wire.GatherReply {
	switch req.Op {
	case wire.GatherRanks:
		return wire.GatherReply{Ranks: n.d.Sample(req.Nspace)}
	case wire.GatherStacks:
		var set stacktree.RankSet
		if req.Ranks != "" {
			var err error
			if set, err = stacktree.ParseRanks(req.Ranks); err != nil {
				return wire.GatherReply{Missing: []string{n.host + ": " + err.Error()}}
			}
		}
		return wire.GatherReply{Tree: n.d.Stacks(ctx, req.Nspace, set, req.PerRank)}
	}
	return wire.GatherReply{Missing: []string{fmt.Sprintf("%s: unknown request %q", n.host, req.Op)}}
}
func (n *node) newGatherer() *wire.Gatherer {
	return &wire.Gatherer{Me: n.me, Fanout: n.boot.Fanout, Hosts: n.boot.Hosts, Own: n.ownPart,
		Send: func(v int, body []byte) error {
			return n.kids.Send(v, wire.TGather, wire.Frame(uint32(v), uint32(n.me), body))
		}}
}
