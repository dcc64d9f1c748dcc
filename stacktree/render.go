package stacktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// Options shape both renderings.
type Options struct {
	Lines    bool // show each frame's file:line when known
	Collapse bool // a chain of 3 or more frames that all ranks pass alike is one line
	SetWidth int  // longest rank set printed in full, in bytes; 0 means 60
}

func (o Options) setWidth() int {
	if o.SetWidth <= 0 {
		return 60
	}
	return o.SetWidth
}

// ApartMark follows a branch that holds fewer ranks than a sibling.
const ApartMark = "◀ apart"

// chain returns n and the frames below it that every thread through n
// passes alike (one child each, same ranks and thread count), when
// collapsing; else n alone.
func chain(n *Node, o Options) []*Node {
	c := []*Node{n}
	if !o.Collapse {
		return c
	}
	for last := n; len(last.Children) == 1; {
		k := last.Children[0]
		if !k.Ranks.Equal(last.Ranks) || k.Threads != last.Threads {
			break
		}
		c = append(c, k)
		last = k
	}
	if len(c) < 3 {
		return c[:1]
	}
	return c
}

func (o Options) name(n *Node) string {
	if o.Lines && n.Loc != "" {
		return n.Func + " at " + n.Loc
	}
	return n.Func
}

func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// who is a node's rank set and counts: "[0-3,5] 5 ranks, 10 threads".
func who(n *Node, o Options) string {
	s := "[" + n.Ranks.Short(o.setWidth()) + "] " + count(n.Ranks.Len(), "rank", "ranks")
	if n.Threads != n.Ranks.Len() {
		s += ", " + count(n.Threads, "thread", "threads")
	}
	return s
}

// Text renders the tree indented, outermost frames first. A node shows its
// ranks where they differ from its parent's (and at the top level); a
// branch with fewer ranks than a sibling ends with ApartMark. Call Finish
// first.
func (t *Tree) Text(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s\n", count(t.Root.Ranks.Len(), "rank", "ranks"), count(t.Root.Threads, "thread", "threads"))
	var walk func(parent *Node, prefix string)
	walk = func(parent *Node, prefix string) {
		for i, c := range parent.Children {
			branch, indent := "├─ ", "│  "
			if i == len(parent.Children)-1 {
				branch, indent = "└─ ", "   "
			}
			ch := chain(c, o)
			last := ch[len(ch)-1]
			label := o.name(c)
			if len(ch) > 1 {
				label = fmt.Sprintf("%s › … %d frames … › %s", o.name(c), len(ch)-2, o.name(last))
				if len(ch) == 3 {
					label = fmt.Sprintf("%s › %s › %s", o.name(c), o.name(ch[1]), o.name(last))
				}
			}
			b.WriteString(prefix + branch + label)
			if parent == t.Root || !c.Ranks.Equal(parent.Ranks) || c.Threads != parent.Threads {
				b.WriteString("  " + who(c, o))
			}
			if Apart(parent, c) {
				b.WriteString("  " + ApartMark)
			}
			b.WriteByte('\n')
			walk(last, prefix+indent)
		}
	}
	walk(t.Root, "")
	if len(t.Failed) > 0 {
		var failed RankSet
		whys := map[string]RankSet{}
		for r, why := range t.Failed {
			failed.AddRange(r, r)
			s := whys[why]
			s.AddRange(r, r)
			whys[why] = s
		}
		fmt.Fprintf(&b, "no stack from %s:\n", count(failed.Len(), "rank", "ranks"))
		keys := make([]string, 0, len(whys))
		for k := range whys {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return whys[keys[i]].Min() < whys[keys[j]].Min() })
		for _, k := range keys {
			fmt.Fprintf(&b, "  [%s] %s\n", whys[k].Short(o.setWidth()), k)
		}
	}
	return b.String()
}

// dotQuote makes s a DOT string's contents: quotes and backslashes escaped,
// line breaks as DOT's centred "\n".
func dotQuote(s string) string {
	s = strings.Map(printable, s)
	s = strings.ReplaceAll(s, `\`, `\\`)
	return strings.ReplaceAll(s, `"`, `\"`)
}

// dotLines quotes each line of s and joins them with DOT's "\n".
func dotLines(s string) string {
	ls := strings.Split(s, "\n")
	for i := range ls {
		ls[i] = dotQuote(ls[i])
	}
	return strings.Join(ls, `\n`)
}

// DOT renders the tree as a Graphviz digraph, top to bottom: a box per
// frame (or collapsed chain) labelled with its function and ranks, edges as
// wide as the share of ranks they carry, branches apart from their siblings
// filled red. Call Finish first.
func (t *Tree) DOT(o Options) []byte {
	var b bytes.Buffer
	total := max(t.Root.Ranks.Len(), 1)
	b.WriteString("digraph stacks {\n")
	b.WriteString("  graph [rankdir=TB, nodesep=0.3, ranksep=0.35];\n")
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#e8eef8\", fontname=\"Helvetica\", fontsize=11];\n")
	b.WriteString("  edge [color=\"#445566\", arrowsize=0.6, fontname=\"Helvetica\", fontsize=9];\n")
	fmt.Fprintf(&b, "  n0 [label=\"%s\\n%s\", fillcolor=\"#d0d8e8\"];\n", "job",
		dotQuote(count(t.Root.Ranks.Len(), "rank", "ranks")+", "+count(t.Root.Threads, "thread", "threads")))
	id := 0
	var walk func(parent *Node, pid int)
	walk = func(parent *Node, pid int) {
		for _, c := range parent.Children {
			id++
			me := id
			ch := chain(c, o)
			last := ch[len(ch)-1]
			label := o.name(c)
			if len(ch) > 1 {
				label += fmt.Sprintf("\n⋮ %d frames\n%s", len(ch)-2, o.name(last))
			}
			fill := ""
			if Apart(parent, c) {
				fill = ", fillcolor=\"#f6c6c0\", color=\"#b03020\""
			}
			fmt.Fprintf(&b, "  n%d [label=\"%s\\n%s\"%s];\n", me, dotLines(label), dotQuote(who(c, o)), fill)
			width := 1 + 4*float64(c.Ranks.Len())/float64(total)
			fmt.Fprintf(&b, "  n%d -> n%d [penwidth=%.2f];\n", pid, me, width)
			walk(last, me)
		}
	}
	walk(t.Root, 0)
	b.WriteString("}\n")
	return b.Bytes()
}

// ErrNoDot is returned by SVG when Graphviz is not installed.
var ErrNoDot = errors.New("the dot command (Graphviz) is not installed: install graphviz, or use --format dot")

// SVG converts DOT source to SVG with Graphviz's dot command.
func SVG(ctx context.Context, dot []byte) ([]byte, error) {
	return Convert(ctx, dot, "svg")
}

// Convert runs `dot -TFORMAT` over DOT source (svg, png, ...).
func Convert(ctx context.Context, dot []byte, format string) ([]byte, error) {
	path, err := exec.LookPath("dot")
	if err != nil {
		return nil, ErrNoDot
	}
	cmd := exec.CommandContext(ctx, path, "-T"+format)
	cmd.Stdin = bytes.NewReader(dot)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := firstLine(errb.Bytes())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("dot -T%s failed: %s", format, msg)
	}
	return out.Bytes(), nil
}
