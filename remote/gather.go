package remote

import (
	"context"
	"prun/remote/wire"
	"time"

	"prun/stacktree"
)

func (t *Tree) newGatherer() *wire.Gatherer {
	return &wire.Gatherer{Me: 0, Fanout: t.cfg.Fanout, Hosts: t.cfg.Hosts,
		Send: func(v int, body []byte) error {
			return t.kids.Send(v, wire.TGather, wire.Frame(uint32(v), wire.ToLauncher, body))
		}}
}
func (t *Tree) isDown(v int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.down[v]
}

// GatherRanks samples job nspace's ranks on every daemon of the tree (not
// the launcher's own node), waiting at most wait for the tree's answer.
func (t *Tree) GatherRanks(ctx context.Context, nspace string, wait time.Duration) wire.Gathered {
	res := t.gather.Run(ctx, wire.GatherReq{Op: wire.GatherRanks, Nspace: nspace, Wait: wait}, t.isDown)
	return wire.Gathered{Ranks: res.Ranks, Missing: res.Missing}
}

// GatherStacks captures the stacks of job nspace's ranks in set (empty:
// every one) on every daemon of the tree, each rank's bounded by perRank,
// merged into one tree; it waits at most wait.
func (t *Tree) GatherStacks(ctx context.Context, nspace string, set stacktree.RankSet, perRank, wait time.Duration) wire.Gathered {
	req := wire.GatherReq{Op: wire.GatherStacks, Nspace: nspace, Wait: wait, PerRank: perRank}
	if set.Len() > 0 {
		req.Ranks = set.String()
	}
	res := t.gather.Run(ctx, req, t.isDown)
	if res.Tree == nil {
		res.Tree = stacktree.New()
		res.Tree.Finish()
	}
	return wire.Gathered{Ranks: res.Ranks, Tree: res.Tree, Missing: res.Missing}
}

// GatherCounts is what the launcher's gathers cost it so far: requests sent
// to its children, replies handled from them.
func (t *Tree) GatherCounts() (sent, handled int64) {
	return t.gather.Out.Load(), t.gather.In.Load()
}
