package stacktree

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMergeJSON builds a job's tree as the daemon tree would: each of three
// nodes merges its own ranks, sends its tree as JSON to its parent, which
// merges; the launcher's tree is the one built from every rank at once.
func TestMergeJSON(t *testing.T) {
	whole := job(12, 9)
	whole.Fail(12, "gdb took more than 10s")
	part := func(lo, hi int) *Tree {
		tr := New()
		for r := lo; r < hi; r++ {
			lone := 9
			one := job(1, map[bool]int{true: 0, false: -1}[r == lone])
			// job(1, ...) holds rank 0: re-add its stacks as rank r.
			tr.Add(r, threadsOf(one))
		}
		tr.Finish()
		return tr
	}
	send := func(tr *Tree) *Tree {
		b, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		var got Tree
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		return &got
	}
	leaf1, leaf2 := part(4, 8), part(8, 12)
	leaf2.Fail(12, "gdb took more than 10s")
	// A middle daemon merges into the tree it received, the launcher into
	// its own.
	mid := send(leaf1)
	mid.Merge(send(leaf2))
	mid.Finish()
	if got, want := mid.Text(Options{}), part(4, 12).Text(Options{}); !strings.HasPrefix(got, want) {
		t.Errorf("merged into a received tree:\n%s\nwant\n%s", got, want)
	}
	top := part(0, 4)
	top.Merge(send(mid))
	top.Finish()
	for _, o := range []Options{{}, {Lines: true, Collapse: true}} {
		if got, want := top.Text(o), whole.Text(o); got != want {
			t.Errorf("merged along the tree:\n%s\nfrom every rank at once:\n%s", got, want)
		}
	}
	if top.Root.Ranks.String() != "0-11" || top.Root.Threads != 24 {
		t.Errorf("root %s %d", top.Root.Ranks, top.Root.Threads)
	}
	for _, bad := range []string{`{}`, `{"root":{"ranks":"x"}}`, `{"root":{"ranks":"1","children":[null]}}`,
		`{"root":{"ranks":""},"failed":{"a":"b"}}`, `{"root":{"threads":-1}}`, `[`} {
		var tr Tree
		if err := json.Unmarshal([]byte(bad), &tr); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// threadsOf returns the stacks of rank 0 of a one-rank tree, innermost
// frame first, as Add takes them.
func threadsOf(tr *Tree) []Thread {
	var out []Thread
	var walk func(n *Node, path []Frame)
	walk = func(n *Node, path []Frame) {
		if n != tr.Root {
			path = append([]Frame{{Func: n.Func, File: strings.Split(n.Loc, ":")[0], Line: line(n.Loc)}}, path...)
		}
		if len(n.Children) == 0 && n != tr.Root {
			out = append(out, Thread{Frames: path})
		}
		for _, c := range n.Children {
			walk(c, path)
		}
	}
	walk(tr.Root, nil)
	return out
}

func line(loc string) int {
	_, n := splitFileLine(loc)
	return n
}

func FuzzTreeJSON(f *testing.F) {
	b, _ := json.Marshal(job(4, 2))
	f.Add(b)
	f.Add([]byte(`{"root":{"func":"","ranks":"0-3","threads":4,"children":[{"func":"main","locs":["a:1","b:2"],"ranks":"0-3","threads":4}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tr Tree
		if err := json.Unmarshal(b, &tr); err != nil {
			return
		}
		all := New()
		all.Merge(&tr)
		all.Finish()
		all.Text(Options{Lines: true, Collapse: true})
		all.DOT(Options{})
	})
}
