package remote

import (
	"context"
	"time"

	"prun/stacktree"
)

func (t *Tree) newGatherer() *gatherer {
	return &gatherer{me: 0, fanout: t.cfg.Fanout, hosts: t.cfg.Hosts,
		send: func(v int, body []byte) error { return t.kids.send(v, tGather, frame(uint32(v), toLauncher, body)) }}
}
func (t *Tree) isDown(v int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.down[v]
}

// GatherRanks samples job nspace's ranks on every daemon of the tree (not
// the launcher's own node), waiting at most wait for the tree's answer.
func (t *Tree) GatherRanks(ctx context.Context, nspace string, wait time.Duration) Gathered {
	res := t.gather.run(ctx, gatherReq{Op: gatherRanks, Nspace: nspace, Wait: wait}, t.isDown)
	return Gathered{Ranks: res.Ranks, Missing: res.Missing}
}

// GatherStacks captures the stacks of job nspace's ranks in set (empty:
// every one) on every daemon of the tree, each rank's bounded by perRank,
// merged into one tree; it waits at most wait.
func (t *Tree) GatherStacks(ctx context.Context, nspace string, set stacktree.RankSet, perRank, wait time.Duration) Gathered {
	req := gatherReq{Op: gatherStacks, Nspace: nspace, Wait: wait, PerRank: perRank}
	if set.Len() > 0 {
		req.Ranks = set.String()
	}
	res := t.gather.run(ctx, req, t.isDown)
	if res.Tree == nil {
		res.Tree = stacktree.New()
		res.Tree.Finish()
	}
	return Gathered{Ranks: res.Ranks, Tree: res.Tree, Missing: res.Missing}
}

// GatherCounts is what the launcher's gathers cost it so far: requests sent
// to its children, replies handled from them.
func (t *Tree) GatherCounts() (sent, handled int64) {
	return t.gather.out.Load(), t.gather.in.Load()
}
