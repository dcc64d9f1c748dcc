package stacktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// stack makes a thread from frames listed outermost first.
func stack(funcs ...string) Thread {
	var t Thread
	for i := len(funcs) - 1; i >= 0; i-- {
		t.Frames = append(t.Frames, Frame{Func: funcs[i], File: "x.c", Line: 10 + i})
	}
	return t
}

// job is a job of n ranks hung at a barrier but for rank lone, which
// computes; every rank has a progress thread.
func job(n, lone int) *Tree {
	tr := New()
	for r := range n {
		inner := []string{"main", "solve", "MPI_Barrier", "PMPI_Barrier", "MPIR_Barrier_impl", "MPIDI_progress_test", "poll"}
		if r == lone {
			inner = []string{"main", "solve", "compute", "kernel"}
		}
		tr.Add(r, []Thread{stack(inner...), stack("clone3", "start_thread", "progress_thread", "epoll_wait")})
	}
	tr.Finish()
	return tr
}

func TestText(t *testing.T) {
	tr := job(8, 5)
	got := tr.Text(Options{})
	want := `8 ranks, 16 threads
├─ clone3  [0-7] 8 ranks
│  └─ start_thread
│     └─ progress_thread
│        └─ epoll_wait
└─ main  [0-7] 8 ranks
   └─ solve
      ├─ MPI_Barrier  [0-4,6-7] 7 ranks
      │  └─ PMPI_Barrier
      │     └─ MPIR_Barrier_impl
      │        └─ MPIDI_progress_test
      │           └─ poll
      └─ compute  [5] 1 rank  ◀ apart
         └─ kernel
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	got = tr.Text(Options{Collapse: true, Lines: true})
	want = `8 ranks, 16 threads
├─ clone3 at x.c:10 › … 2 frames … › epoll_wait at x.c:13  [0-7] 8 ranks
└─ main at x.c:10 › solve at x.c:11  [0-7] 8 ranks
   ├─ MPI_Barrier at x.c:12 › … 3 frames … › poll at x.c:16  [0-4,6-7] 7 ranks
   └─ compute at x.c:12 › kernel at x.c:13  [5] 1 rank  ◀ apart
`
	// Two frames are no chain worth collapsing: "main › solve" is printed
	// as a chain of three only when three are alike.
	want = strings.Replace(want, "main at x.c:10 › solve at x.c:11  [0-7] 8 ranks", "main at x.c:10  [0-7] 8 ranks\n   └─ solve at x.c:11", 1)
	want = strings.Replace(want, "   ├─ MPI_Barrier", "      ├─ MPI_Barrier", 1)
	want = strings.Replace(want, "   └─ compute at x.c:12 › kernel at x.c:13  [5] 1 rank  ◀ apart\n",
		"      └─ compute at x.c:12  [5] 1 rank  ◀ apart\n         └─ kernel at x.c:13\n", 1)
	if got != want {
		t.Fatalf("collapsed: got\n%s\nwant\n%s", got, want)
	}
	tr.Fail(9, "gdb took more than 10s")
	tr.Fail(8, "gdb took more than 10s")
	tr.Fail(10, "no such process")
	if got := tr.Text(Options{}); !strings.HasSuffix(got, "no stack from 3 ranks:\n  [8-9] gdb took more than 10s\n  [10] no such process\n") {
		t.Fatalf("failures:\n%s", got)
	}
}

// TestByLine: merged by file:line, the same function at two lines is two
// branches; by function, one.
func TestByLine(t *testing.T) {
	a := Thread{Frames: []Frame{{Func: "wait", File: "w.c", Line: 5}, {Func: "main", File: "m.c", Line: 1}}}
	b := Thread{Frames: []Frame{{Func: "wait", File: "w.c", Line: 9}, {Func: "main", File: "m.c", Line: 1}}}
	for _, byLine := range []bool{false, true} {
		tr := New()
		tr.ByLine = byLine
		tr.Add(0, []Thread{a})
		tr.Add(1, []Thread{b})
		tr.Finish()
		main := tr.Root.Children[0]
		if n := len(main.Children); n != map[bool]int{false: 1, true: 2}[byLine] {
			t.Errorf("ByLine %v: %d branches below main", byLine, n)
		}
		if main.Loc != "m.c:1" || byLine == (main.Children[0].Loc == "") {
			t.Errorf("ByLine %v: locations %q, %q", byLine, main.Loc, main.Children[0].Loc)
		}
	}
}

func TestDOT(t *testing.T) {
	tr := New()
	tr.Add(0, []Thread{stack("main", `we"ird\name`)})
	tr.Add(1, []Thread{stack("main", "other")})
	tr.Add(2, []Thread{stack("main", "other")})
	tr.Finish()
	dot := string(tr.DOT(Options{}))
	for _, want := range []string{
		`n0 [label="job\n3 ranks, 3 threads"`,
		`n1 [label="main\n[0-2] 3 ranks"]`,
		`n2 [label="other\n[1-2] 2 ranks"]`,
		`n3 [label="we\"ird\\name\n[0] 1 rank", fillcolor="#f6c6c0"`,
		"n0 -> n1 [penwidth=5.00]",
	} {
		if !strings.Contains(dot, want) {
			t.Errorf("DOT lacks %s:\n%s", want, dot)
		}
	}
}

// TestSVG renders a 256-rank job with two lone ranks as SVG with Graphviz,
// converts the same graph to PNG, and checks that both have the size of a
// readable picture and agree (dot draws PNG at 96 dpi, SVG in points).
func TestSVG(t *testing.T) {
	tr := job(256, 77)
	tr.Add(256, []Thread{stack("main", "solve", "checkpoint", "write")})
	tr.Finish()
	dot := tr.DOT(Options{Collapse: true})
	svg, err := SVG(context.Background(), dot)
	if err != nil {
		t.Fatal(err)
	}
	text := bytes.ReplaceAll(svg, []byte("&#45;"), []byte("-")) // dot escapes '-' in SVG text
	if !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(text, []byte("MPI_Barrier")) ||
		!bytes.Contains(text, []byte("[0-76,78-255] 255 ranks")) || !bytes.Contains(text, []byte("[77] 1 rank")) {
		t.Fatalf("SVG lacks the tree:\n%.2000s", svg)
	}
	m := regexp.MustCompile(`<svg width="(\d+)pt" height="(\d+)pt"`).FindSubmatch(svg)
	if m == nil {
		t.Fatalf("no size in the SVG:\n%.500s", svg)
	}
	wpt, _ := strconv.Atoi(string(m[1]))
	hpt, _ := strconv.Atoi(string(m[2]))
	pngb, err := Convert(context.Background(), dot, "png")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(pngb))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	t.Logf("SVG %dx%d pt, PNG %dx%d px, %d bytes", wpt, hpt, cfg.Width, cfg.Height, len(pngb))
	if out := os.Getenv("STACKTREE_PNG"); out != "" {
		os.WriteFile(out, pngb, 0o644) // to look at it
	}
	// Three branches side by side, six boxes deep at most: wider than one
	// box, and neither dimension absurd.
	if cfg.Width < 300 || cfg.Height < 300 || cfg.Width > 4000 || cfg.Height > 4000 {
		t.Errorf("PNG %dx%d px", cfg.Width, cfg.Height)
	}
	if d := cfg.Width - wpt*96/72; d < -4 || d > 4 {
		t.Errorf("PNG width %d px, SVG's %d pt is %d px", cfg.Width, wpt, wpt*96/72)
	}
	if d := cfg.Height - hpt*96/72; d < -4 || d > 4 {
		t.Errorf("PNG height %d px, SVG's %d pt is %d px", cfg.Height, hpt, hpt*96/72)
	}
	if len(pngb) < 5000 {
		t.Errorf("PNG of %d bytes: too small to hold the tree", len(pngb))
	}
}

// TestNoDot: without Graphviz, one clear line; broken DOT names dot's error.
func TestNoDot(t *testing.T) {
	if _, err := Convert(context.Background(), []byte("digraph { a -> }"), "svg"); err == nil ||
		!strings.HasPrefix(err.Error(), "dot -Tsvg failed: ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("bad DOT: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err := SVG(context.Background(), job(2, 0).DOT(Options{}))
	if !errors.Is(err, ErrNoDot) || strings.Contains(fmt.Sprint(err), "\n") {
		t.Fatalf("without dot: %v", err)
	}
}
