package remote

import (
	"context"
	"fmt"

	"prun/stacktree"
)

// gatherHere answers the parent's tGather: off the link's reader, as it
// waits for the children and the debuggers.
func (n *node) gatherHere(m *gatherReq) {
	go func() {
		res := n.gather.run(context.Background(), *m, nil)
		res.ID = m.ID
		body, err := encode(&res)
		if err != nil {
			return
		}
		n.up.Send(tGathered, frame(toLauncher, uint32(n.me), body))
	}()
}

// ownPart is this daemon's part: its local ranks' samples or stacks.
func (n *node) ownPart(ctx context.Context, req *gatherReq) gatherReply {
	switch req.Op {
	case gatherRanks:
		return gatherReply{Ranks: n.d.Sample(req.Nspace)}
	case gatherStacks:
		var set stacktree.RankSet
		if req.Ranks != "" {
			var err error
			if set, err = stacktree.ParseRanks(req.Ranks); err != nil {
				return gatherReply{Missing: []string{n.host + ": " + err.Error()}}
			}
		}
		return gatherReply{Tree: n.d.Stacks(ctx, req.Nspace, set, req.PerRank)}
	}
	return gatherReply{Missing: []string{fmt.Sprintf("%s: unknown request %q", n.host, req.Op)}}
}
func (n *node) newGatherer() *gatherer {
	return &gatherer{me: n.me, fanout: n.boot.Fanout, hosts: n.boot.Hosts, own: n.ownPart,
		send: func(v int, body []byte) error {
			return n.kids.send(v, tGather, frame(uint32(v), uint32(n.me), body))
		}}
}
