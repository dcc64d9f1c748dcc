package stacktree

import (
	"encoding/json"
	"fmt"
	"sort"
)

// MarshalJSON writes the set in its compact form, "0-3,5".
func (s RankSet) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.String())
}

// UnmarshalJSON reads the compact form ("" is the empty set).
func (s *RankSet) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("a rank set is a string: %v", err)
	}
	if str == "" {
		*s = RankSet{}
		return nil
	}
	r, err := ParseRanks(str)
	if err != nil {
		return err
	}
	*s = r
	return nil
}

// jsonNode is a Node on the wire, with the (at most two) locations its
// threads had, so a merge further up still knows whether they agreed.
type jsonNode struct {
	Func     string      `json:"func"`
	Locs     []string    `json:"locs,omitempty"`
	Ranks    RankSet     `json:"ranks"`
	Threads  int         `json:"threads"`
	Children []*jsonNode `json:"children,omitempty"`
}

type jsonTree struct {
	Root   *jsonNode         `json:"root"`
	ByLine bool              `json:"by_line,omitempty"`
	Failed map[string]string `json:"failed,omitempty"`
}

// maxDepth bounds a tree read from the wire (a stack is at most maxFrames
// deep, the root one more).
const maxDepth = maxFrames + 1

// MarshalJSON writes the tree for a daemon's parent, which reads it with
// UnmarshalJSON and merges it with Merge. Call Finish first.
func (t *Tree) MarshalJSON() ([]byte, error) {
	var conv func(n *Node) *jsonNode
	conv = func(n *Node) *jsonNode {
		j := &jsonNode{Func: n.Func, Ranks: n.Ranks, Threads: n.Threads}
		for l := range n.locs {
			j.Locs = append(j.Locs, l)
		}
		sort.Strings(j.Locs)
		for _, c := range n.Children {
			j.Children = append(j.Children, conv(c))
		}
		return j
	}
	jt := jsonTree{Root: conv(t.Root), ByLine: t.ByLine}
	if len(t.Failed) > 0 {
		jt.Failed = map[string]string{}
		for r, why := range t.Failed {
			jt.Failed[fmt.Sprint(r)] = why
		}
	}
	return json.Marshal(jt)
}

// UnmarshalJSON reads what MarshalJSON wrote, finished.
func (t *Tree) UnmarshalJSON(b []byte) error {
	var jt jsonTree
	if err := json.Unmarshal(b, &jt); err != nil {
		return fmt.Errorf("stacktree: %v", err)
	}
	if jt.Root == nil {
		return fmt.Errorf("stacktree: a tree without a root")
	}
	var conv func(j *jsonNode, depth int) (*Node, error)
	conv = func(j *jsonNode, depth int) (*Node, error) {
		if depth > maxDepth {
			return nil, fmt.Errorf("stacktree: a tree deeper than %d frames", maxFrames)
		}
		if len(j.Locs) > 2 || j.Threads < 0 {
			return nil, fmt.Errorf("stacktree: a node of %d locations, %d threads", len(j.Locs), j.Threads)
		}
		n := &Node{Func: j.Func, Ranks: j.Ranks, Threads: j.Threads}
		for _, l := range j.Locs {
			if n.locs == nil {
				n.locs = map[string]bool{}
			}
			n.locs[l] = true
		}
		for _, jc := range j.Children {
			if jc == nil {
				return nil, fmt.Errorf("stacktree: a null node")
			}
			c, err := conv(jc, depth+1)
			if err != nil {
				return nil, err
			}
			n.Children = append(n.Children, c)
		}
		return n, nil
	}
	root, err := conv(jt.Root, 0)
	if err != nil {
		return err
	}
	failed := map[int]string{}
	for k, why := range jt.Failed {
		var r int
		if _, err := fmt.Sscan(k, &r); err != nil || r < 0 {
			return fmt.Errorf("stacktree: bad failed rank %q", short(k))
		}
		failed[r] = why
	}
	*t = Tree{Root: root, ByLine: jt.ByLine}
	if len(failed) > 0 {
		t.Failed = failed
	}
	t.Finish()
	return nil
}
