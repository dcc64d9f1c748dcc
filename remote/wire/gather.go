package wire

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"prun/ctl"
	"prun/stacktree"
	"prun/topview/sample"
)

// A gather asks every daemon of the tree for its part of one answer (the
// samples of a job's ranks for prun top, their stacks merged for prun
// stack) and combines the parts along the tree, as the collectives do: a
// vertex sends the request to each of its children (tGather), asks its own
// daemon, waits for one reply per child (tGathered), each its child's whole
// subtree's, merges them with its own (samples: concatenated; stacks:
// stacktree.Merge) and sends one reply to its parent. The launcher thus
// handles one message per child of its own per gather, whatever the size
// of the tree. A vertex waits for its children a bounded time, given by its
// parent (each level a little less than the one above, so that a late
// subtree is named in its parent's reply rather than making every vertex
// above late too): a child lost or late is named in the reply (Missing),
// never waited for beyond it.

// Gather operations.
const (
	GatherRanks  = "ranks"
	GatherStacks = "stacks"
)

// GatherReq asks a vertex for its subtree's part (tGather, point to point).
type GatherReq struct {
	ID      uint64        `json:",omitzero"` // the asking vertex's number for it
	Op      string        `json:",omitzero"` // gatherRanks or gatherStacks
	Nspace  string        `json:",omitzero"`
	Ranks   string        `json:",omitzero"` // stacks: the ranks asked for ("": every one)
	Wait    time.Duration `json:",omitzero"` // how long the vertex waits for its children's replies
	PerRank time.Duration `json:",omitzero"` // stacks: each debugger's bound
}

// GatherReply is a subtree's part (tGathered, up to the asking vertex).
type GatherReply struct {
	ID      uint64          `json:",omitzero"`
	Ranks   []sample.Rank   `json:",omitzero"`
	Tree    *stacktree.Tree `json:",omitzero"`
	Missing []string        `json:",omitzero"` // "host: why", for each vertex below whose part is not in it
}

// Gathered is a gather's result at the launcher: the parts of every node
// that answered, and which did not and why.
type Gathered struct {
	Ranks   []sample.Rank
	Tree    *stacktree.Tree // stacks: merged and finished
	Missing []string
}

// hopMargin is how much sooner than its parent a vertex gives up on its
// children: enough for its reply to travel up one link.
func hopMargin(wait time.Duration) time.Duration {
	return max(wait/10, 200*time.Millisecond)
}

// Gatherer runs the gathers of one vertex: its pending requests to its
// children, by number.
type Gatherer struct {
	Me     int
	Fanout int
	Hosts  []string
	Send   func(v int, body []byte) error // a tGather to child v
	// Own is the vertex's own daemon's part (nil: none, the launcher's,
	// whose own node the launcher adds itself).
	Own func(ctx context.Context, req *GatherReq) GatherReply

	Mu      sync.Mutex
	next    uint64
	pending map[uint64]*pendingGather
	Runs    int // gathers run here
	MaxIn   int // the most replies one took

	// Counted for the benchmark: replies from children handled, requests
	// sent to children.
	In, Out atomic.Int64
}

type pendingGather struct {
	got  int          // replies taken
	left map[int]bool // children yet to reply
	res  GatherReply
	done chan struct{} // closed when left empties
}

// Run gathers req's answer from the subtree below this vertex (its own
// daemon's part included), skipping the children down says are lost.
func (g *Gatherer) Run(ctx context.Context, req GatherReq, down func(v int) bool) GatherReply {
	kids := ctl.Children(g.Me, g.Fanout, len(g.Hosts))
	inner := req.Wait - hopMargin(req.Wait)
	if inner <= 0 {
		inner = req.Wait / 2
	}
	p := &pendingGather{left: map[int]bool{}, done: make(chan struct{})}
	if req.Op == GatherStacks {
		p.res.Tree = stacktree.New()
	}
	g.Mu.Lock()
	if g.pending == nil {
		g.pending = map[uint64]*pendingGather{}
	}
	g.next++
	id := g.next
	g.pending[id] = p
	for _, k := range kids {
		p.left[k] = true
	}
	if len(kids) == 0 {
		close(p.done) // a leaf waits for nobody
	}
	g.Mu.Unlock()
	defer func() {
		g.Mu.Lock()
		delete(g.pending, id) // a reply later than this is dropped
		g.Mu.Unlock()
	}()
	sub := req
	sub.ID, sub.Wait = id, inner
	body, err := Encode(&sub)
	for _, k := range kids {
		if err == nil && (down == nil || !down(k)) {
			if err = g.Send(k, body); err == nil {
				g.Out.Add(1)
				continue
			}
		}
		why := "lost"
		if err != nil {
			why = err.Error()
		}
		g.settle(p, k, nil, g.subtreeName(k)+": "+why)
	}
	wctx, cancel := context.WithTimeout(ctx, inner)
	defer cancel()
	if g.Own != nil {
		part := g.Own(wctx, &req)
		g.Mu.Lock()
		p.res.merge(&part)
		g.Mu.Unlock()
	}
	t := time.NewTimer(req.Wait)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
	}
	g.Mu.Lock()
	defer g.Mu.Unlock()
	for k := range p.left {
		p.res.Missing = append(p.res.Missing, fmt.Sprintf("%s: no answer within %v", g.subtreeName(k), req.Wait.Round(time.Millisecond)))
	}
	p.left = nil
	g.Runs++
	g.MaxIn = max(g.MaxIn, p.got)
	res := p.res
	if res.Tree != nil {
		res.Tree.Finish()
	}
	return res
}

// subtreeName names child v's subtree: its host, with how many below it.
func (g *Gatherer) subtreeName(v int) string {
	n := len(ctl.Subtree(v, g.Fanout, len(g.Hosts)))
	if n > 1 {
		return fmt.Sprintf("%s (and %d daemons below it)", g.Hosts[v-1], n-1)
	}
	return g.Hosts[v-1]
}

// Answered takes child from's reply (a tGathered body).
func (g *Gatherer) Answered(from int, body []byte) error {
	var m GatherReply
	if err := Decode(body, &m); err != nil {
		return err
	}
	g.In.Add(1)
	g.Mu.Lock()
	defer g.Mu.Unlock()
	if p := g.pending[m.ID]; p != nil && p.left[from] {
		p.got++
		g.settleLocked(p, from, &m, "")
	}
	return nil
}

func (g *Gatherer) settle(p *pendingGather, k int, part *GatherReply, missing string) {
	g.Mu.Lock()
	defer g.Mu.Unlock()
	g.settleLocked(p, k, part, missing)
}

func (g *Gatherer) settleLocked(p *pendingGather, k int, part *GatherReply, missing string) {
	if !p.left[k] {
		return
	}
	delete(p.left, k)
	if part != nil {
		p.res.merge(part)
	}
	if missing != "" {
		p.res.Missing = append(p.res.Missing, missing)
	}
	if len(p.left) == 0 {
		close(p.done)
	}
}

// merge adds a part: samples concatenated, trees merged, the missing kept.
func (r *GatherReply) merge(o *GatherReply) {
	r.Ranks = append(r.Ranks, o.Ranks...)
	if o.Tree != nil {
		if r.Tree == nil {
			r.Tree = stacktree.New()
		}
		r.Tree.Merge(o.Tree)
	}
	r.Missing = append(r.Missing, o.Missing...)
}

// A daemon's side.

// The launcher's side.
