package iof

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// syncBuf is a bytes.Buffer safe for the Writer's concurrent callers.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLinesNeverMix(t *testing.T) {
	var out, errb syncBuf
	w := NewWriter(&out, &errb, Options{})
	const ranks, lines = 8, 3000
	var wg sync.WaitGroup
	for r := 0; r < ranks; r++ {
		pr, pw := io.Pipe()
		wg.Add(2)
		go func() { defer wg.Done(); Forward(pr, w, Source{Rank: r}, Stdout) }()
		go func() {
			defer wg.Done()
			for i := 0; i < lines; i++ {
				// Odd-sized writes that split lines across reads.
				line := fmt.Sprintf("rank %d line %d %s\n", r, i, strings.Repeat("x", 50+i%97))
				mid := len(line) / 3
				pw.Write([]byte(line[:mid]))
				pw.Write([]byte(line[mid:]))
			}
			pw.Close()
		}()
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != ranks*lines {
		t.Fatalf("%d lines, want %d", len(got), ranks*lines)
	}
	next := make([]int, ranks)
	for _, l := range got {
		var r, i int
		var pad string
		if _, err := fmt.Sscanf(l, "rank %d line %d %s", &r, &i, &pad); err != nil || pad != strings.Repeat("x", 50+i%97) {
			t.Fatalf("broken line %q", l)
		}
		if i != next[r] {
			t.Fatalf("rank %d: line %d after %d", r, i, next[r]-1)
		}
		next[r]++
	}
}

func TestTags(t *testing.T) {
	var out, errb bytes.Buffer
	w := NewWriter(&out, &errb, Options{Tag: true})
	w.Write(Source{App: 1, Rank: 5}, Stdout, []byte("a\nb\n"), false)
	w.Write(Source{App: 0, Rank: 2}, Stderr, []byte("oops\n"), false)
	if got, want := out.String(), "[1,5]<stdout>:a\n[1,5]<stdout>:b\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := errb.String(), "[0,2]<stderr>:oops\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

func TestLongLineHoldsTheStream(t *testing.T) {
	var out, errb syncBuf
	w := NewWriter(&out, &errb, Options{Tag: true})
	a, b := Source{Rank: 0}, Source{Rank: 1}
	w.Write(a, Stdout, []byte("start-"), true) // a is mid-line: b must wait
	done := make(chan struct{})
	go func() { w.Write(b, Stdout, []byte("other\n"), false); close(done) }()
	select {
	case <-done:
		t.Fatal("another source printed inside a partial line")
	default:
	}
	w.Write(a, Stdout, []byte("end\n"), false)
	<-done
	if got, want := out.String(), "[0,0]<stdout>:start-end\n[0,1]<stdout>:other\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFinalLineWithoutNewline(t *testing.T) {
	var out, errb bytes.Buffer
	w := NewWriter(&out, &errb, Options{})
	Forward(strings.NewReader("abc"), w, Source{Rank: 0}, Stdout)
	if out.String() != "abc" {
		t.Fatalf("alone: %q", out.String())
	}
	Forward(strings.NewReader("def\n"), w, Source{Rank: 1}, Stdout)
	if got, want := out.String(), "abc\ndef\n"; got != want {
		t.Fatalf("got %q, want %q: the unterminated line must not glue to the next rank's", got, want)
	}
}

func TestHugeLineBoundedMemory(t *testing.T) {
	var out, errb bytes.Buffer
	w := NewWriter(&out, &errb, Options{})
	line := strings.Repeat("z", 5*bufSize+123) + "\n"
	Forward(strings.NewReader(line), w, Source{}, Stdout)
	if out.String() != line {
		t.Fatalf("line of %d bytes came out as %d bytes", len(line), out.Len())
	}
}
