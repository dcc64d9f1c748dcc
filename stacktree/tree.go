package stacktree

import (
	"sort"
	"strconv"
)

// Node is one frame of the merged tree: every rank whose stack passes
// through the frames from the root down to this one, in that order, is in
// Ranks; Threads counts the threads that do (a rank may have several).
type Node struct {
	Func     string
	Loc      string // "file:line" when every thread here agreed on one, else ""
	Ranks    RankSet
	Threads  int
	Children []*Node // in the order SortChildren leaves them

	locs map[string]bool // the locations seen, to decide Loc
	idx  map[string]*Node
}

// Tree merges the stacks of many ranks. Its root stands for the whole job
// (Func ""); its children are the outermost frames (main, _start, clone).
type Tree struct {
	Root   *Node
	ByLine bool // merge frames by function and file:line, not function alone
	// Failed holds the ranks whose stacks could not be had, with why.
	Failed map[int]string
}

// New returns an empty tree.
func New() *Tree {
	return &Tree{Root: &Node{}}
}

// key is what makes two frames the same node.
func (t *Tree) key(f Frame) string {
	if t.ByLine && f.File != "" {
		return f.Func + "\x00" + f.File + ":" + strconv.Itoa(f.Line)
	}
	return f.Func
}

// Add merges one rank's threads, each from its outermost frame inward.
func (t *Tree) Add(rank int, threads []Thread) {
	t.Root.Ranks.Add(rank)
	for _, th := range threads {
		n := t.Root
		n.Threads++
		for i := len(th.Frames) - 1; i >= 0; i-- {
			f := th.Frames[i]
			k := t.key(f)
			c := n.idx[k]
			if c == nil {
				c = &Node{Func: f.Func}
				if n.idx == nil {
					n.idx = map[string]*Node{}
				}
				n.idx[k] = c
				n.Children = append(n.Children, c)
			}
			c.Ranks.Add(rank)
			c.Threads++
			if f.File != "" && len(c.locs) < 2 {
				if c.locs == nil {
					c.locs = map[string]bool{}
				}
				c.locs[f.File+":"+strconv.Itoa(f.Line)] = true
			}
			n = c
		}
	}
}

// Fail records a rank whose stack could not be had.
func (t *Tree) Fail(rank int, why string) {
	if t.Failed == nil {
		t.Failed = map[int]string{}
	}
	t.Failed[rank] = why
}

// Finish settles each node's Loc and orders children: most ranks first,
// then by their smallest rank, then by name, so output is deterministic.
func (t *Tree) Finish() {
	var walk func(n *Node)
	walk = func(n *Node) {
		n.Loc = ""
		if len(n.locs) == 1 {
			for l := range n.locs {
				n.Loc = l
			}
		}
		sort.SliceStable(n.Children, func(i, j int) bool {
			a, b := n.Children[i], n.Children[j]
			if la, lb := a.Ranks.Len(), b.Ranks.Len(); la != lb {
				return la > lb
			}
			if ma, mb := a.Ranks.Min(), b.Ranks.Min(); ma != mb {
				return ma < mb
			}
			return a.Func < b.Func
		})
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(t.Root)
}

// Apart reports whether child c of n holds fewer ranks than its largest
// sibling: at a fork, the smaller sets are where a lone rank stands out.
func Apart(n, c *Node) bool {
	if len(n.Children) < 2 {
		return false
	}
	most := 0
	for _, s := range n.Children {
		most = max(most, s.Ranks.Len())
	}
	return c.Ranks.Len() < most
}

// Leaves returns the innermost frames, each with its rank set: the places
// the job waits, for a one-line summary.
func (t *Tree) Leaves() []*Node {
	var out []*Node
	var walk func(n *Node)
	walk = func(n *Node) {
		if len(n.Children) == 0 && n != t.Root {
			out = append(out, n)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(t.Root)
	return out
}

// Merge adds another tree's ranks, as a daemon adds its children's subtrees
// to its own on the way to the launcher: the result is the tree that Add
// would have built from every rank. Both trees must merge alike (ByLine).
func (t *Tree) Merge(o *Tree) {
	t.merge(t.Root, o.Root)
	for r, why := range o.Failed {
		t.Fail(r, why)
	}
}

func (t *Tree) merge(dst, src *Node) {
	dst.Ranks.Union(src.Ranks)
	dst.Threads += src.Threads
	if dst.idx == nil && len(dst.Children) > 0 {
		// A tree read from JSON: index its children once.
		dst.idx = map[string]*Node{}
		for _, c := range dst.Children {
			dst.idx[t.nodeKey(c)] = c
		}
	}
	for l := range src.locs {
		if len(dst.locs) < 2 {
			if dst.locs == nil {
				dst.locs = map[string]bool{}
			}
			dst.locs[l] = true
		}
	}
	for _, sc := range src.Children {
		k := t.nodeKey(sc)
		dc := dst.idx[k]
		if dc == nil {
			dc = &Node{Func: sc.Func}
			if dst.idx == nil {
				dst.idx = map[string]*Node{}
			}
			dst.idx[k] = dc
			dst.Children = append(dst.Children, dc)
		}
		t.merge(dc, sc)
	}
}

// nodeKey is key for a node already in a tree: with ByLine its frames all
// had the one location it records.
func (t *Tree) nodeKey(n *Node) string {
	if t.ByLine && len(n.locs) == 1 {
		for l := range n.locs {
			return n.Func + "\x00" + l
		}
	}
	return n.Func
}
