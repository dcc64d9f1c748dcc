package iof

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// heapGrowth runs f and returns how far the heap grew above where it was
// before, sampled every millisecond.
func heapGrowth(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return peak - base
}

// lineChecker consumes output as it streams, keeping no more than a line's
// head: it checks that every line is "[app,rank]<stdout>:rank R line N ..."
// with N counting up per rank, and keeps the length and hash of lines that
// have no such number.
type lineChecker struct {
	t       *testing.T
	slow    time.Duration // sleep per Write
	ordered bool          // ranks must come in order
	next    map[int]int
	rank    int // the last line's rank, when ordered
	head    []byte
	n       int64
	hash    hash.Hash
	bytes   int64
	long    []longLine
	err     error
}

type longLine struct {
	head string
	n    int64
	sum  string
}

func newLineChecker(t *testing.T) *lineChecker {
	return &lineChecker{t: t, next: map[int]int{}, hash: sha256.New()}
}

func (c *lineChecker) Write(p []byte) (int, error) {
	if c.slow > 0 {
		time.Sleep(c.slow)
	}
	c.bytes += int64(len(p))
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		if len(c.head) < 64 {
			c.head = append(c.head, part[:min(len(part), 64-len(c.head))]...)
		}
		c.n += int64(len(part))
		c.hash.Write(part)
		if i < 0 {
			break
		}
		c.endLine()
		p = p[i+1:]
	}
	return len(p), nil
}

func (c *lineChecker) endLine() {
	if app, rank, n, ok := parseNumbered(c.head); ok && c.n < 1000 {
		_ = app
		if n != c.next[rank] && c.err == nil {
			c.err = fmt.Errorf("rank %d: line %d after %d", rank, n, c.next[rank]-1)
		}
		if c.ordered && rank < c.rank && c.err == nil {
			c.err = fmt.Errorf("rank %d after rank %d", rank, c.rank)
		}
		c.rank = rank
		c.next[rank] = n + 1
	} else {
		c.long = append(c.long, longLine{string(c.head), c.n, fmt.Sprintf("%x", c.hash.Sum(nil))})
	}
	c.head, c.n = c.head[:0], 0
	c.hash.Reset()
}

// parseNumbered parses "[app,rank]<stdout>:rank R line N " without
// allocating.
func parseNumbered(h []byte) (app, rank, n int, ok bool) {
	num := func(prefix string) int {
		if !bytes.HasPrefix(h, []byte(prefix)) {
			ok = false
			return 0
		}
		h = h[len(prefix):]
		v, i := 0, 0
		for ; i < len(h) && h[i] >= '0' && h[i] <= '9'; i++ {
			v = v*10 + int(h[i]-'0')
		}
		if i == 0 {
			ok = false
		}
		h = h[i:]
		return v
	}
	ok = true
	app = num("[")
	r := num(",")
	rank = num("]<stdout>:rank ")
	n = num(" line ")
	return app, rank, n, ok && r == rank
}

// numberedLines writes size bytes (a multiple of 100) of 100-byte numbered
// lines to w in 4 KiB writes, made as they go so that the test's own data
// does not weigh on the heap, counting what w accepted.
func numberedLines(w io.Writer, rank, size int, accepted *atomic.Int64) {
	buf := make([]byte, 0, 8192)
	for i := 0; size > 0; i++ {
		start := len(buf)
		buf = append(buf, "rank "...)
		buf = strconv.AppendInt(buf, int64(rank), 10)
		buf = append(buf, " line "...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, ' ')
		for len(buf)-start < 99 {
			buf = append(buf, '.')
		}
		buf = append(buf, '\n')
		size -= 100
		if len(buf) >= 4096 || size <= 0 {
			n, err := w.Write(buf)
			accepted.Add(int64(n))
			if err != nil {
				return
			}
			buf = buf[:0]
		}
	}
}

// A consumer that stalls, then reads slowly, blocks the ranks: nothing
// queues in the Writer or the readers.
func TestSlowConsumerBackPressure(t *testing.T) {
	const ranks, size = 4, 20_000_000
	check := newLineChecker(t)
	var accepted atomic.Int64
	growth := heapGrowth(func() {
		pr, pw := io.Pipe()
		w := NewWriter(pw, io.Discard, Options{Tag: true})
		consumed := make(chan struct{})
		stalled := make(chan int64)
		go func() {
			defer close(consumed)
			time.Sleep(300 * time.Millisecond)
			stalled <- accepted.Load()
			buf := make([]byte, 32<<10)
			for i := 0; ; i++ {
				if i%64 == 0 {
					time.Sleep(2 * time.Millisecond)
				}
				n, err := pr.Read(buf)
				check.Write(buf[:n])
				if err != nil {
					return
				}
			}
		}()
		var wg sync.WaitGroup
		for r := 0; r < ranks; r++ {
			rr, rw := io.Pipe()
			wg.Add(2)
			go func() { defer wg.Done(); Forward(rr, w, Source{Rank: r}, Stdout) }()
			go func() {
				defer wg.Done()
				numberedLines(rw, r, size, &accepted)
				rw.Close()
			}()
		}
		if got := <-stalled; got > ranks*2*bufSize {
			t.Errorf("the ranks wrote %d bytes while nothing was read: output queues", got)
		}
		wg.Wait()
		w.Close()
		pw.Close()
		<-consumed
	})
	if check.err != nil {
		t.Fatal(check.err)
	}
	for r := 0; r < ranks; r++ {
		if check.next[r] != size/100 {
			t.Errorf("rank %d: %d lines, want %d", r, check.next[r], size/100)
		}
	}
	t.Logf("heap growth %.1f MiB for %d MiB forwarded", float64(growth)/(1<<20), ranks*size>>20)
	if growth > 16<<20 {
		t.Errorf("heap grew by %.1f MiB", float64(growth)/(1<<20))
	}
}

// A 50 MB line without a newline passes whole, through a pipe, in bounded
// memory, while another rank's lines wait for it to end.
func TestHugeLineThroughPipe(t *testing.T) {
	const size = 50 << 20
	block := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	want := sha256.New()
	want.Write([]byte("[0,0]<stdout>:"))
	for n := 0; n < size; n += len(block) {
		want.Write(block)
	}
	check := newLineChecker(t)
	var accepted atomic.Int64
	growth := heapGrowth(func() {
		w := NewWriter(check, io.Discard, Options{Tag: true})
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		or, ow := io.Pipe()
		var wg sync.WaitGroup
		wg.Add(4)
		go func() { defer wg.Done(); Forward(pr, w, Source{Rank: 0}, Stdout); pr.Close() }()
		go func() { defer wg.Done(); Forward(or, w, Source{Rank: 1}, Stdout) }()
		go func() {
			defer wg.Done()
			for n := 0; n < size; n += len(block) {
				pw.Write(block)
			}
			pw.Close()
		}()
		go func() {
			defer wg.Done()
			numberedLines(ow, 1, 300_000, &accepted)
			ow.Close()
		}()
		wg.Wait()
		w.Close()
	})
	if check.err != nil {
		t.Fatal(check.err)
	}
	if check.n > 0 {
		check.endLine()
	}
	if len(check.long) != 1 {
		t.Fatalf("%d long lines, want 1: %+v", len(check.long), check.long)
	}
	l := check.long[0]
	if l.head[:14] != "[0,0]<stdout>:" || l.n != size+14 || l.sum != fmt.Sprintf("%x", want.Sum(nil)) {
		t.Errorf("the long line came out as %d bytes starting %q", l.n, l.head)
	}
	if check.next[1] != 3000 {
		t.Errorf("rank 1: %d lines", check.next[1])
	}
	t.Logf("heap growth %.1f MiB for a %d MiB line", float64(growth)/(1<<20), size>>20)
	if growth > 16<<20 {
		t.Errorf("heap grew by %.1f MiB", float64(growth)/(1<<20))
	}
}

// Ordered output of 50 MB spills to files: it costs no memory, comes out in
// rank order, and leaves no file behind.
func TestOrderedSpills(t *testing.T) {
	const ranks, size = 4, 12_500_000
	var none atomic.Int64
	spill := t.TempDir()
	check := newLineChecker(t)
	check.ordered = true
	var stdoutBytes int64
	growth := heapGrowth(func() {
		w := NewWriter(check, io.Discard, Options{Tag: true, Ordered: true, SpillDir: spill})
		var wg sync.WaitGroup
		for r := ranks - 1; r >= 0; r-- {
			rr, rw := io.Pipe()
			wg.Add(2)
			go func() { defer wg.Done(); Forward(rr, w, Source{Rank: r}, Stdout) }()
			go func() { defer wg.Done(); numberedLines(rw, r, size, &none); rw.Close() }()
		}
		wg.Wait()
		stdoutBytes = check.bytes
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	if stdoutBytes != 0 {
		t.Errorf("%d bytes printed before Close", stdoutBytes)
	}
	if check.err != nil {
		t.Fatal(check.err)
	}
	for r := 0; r < ranks; r++ {
		if check.next[r] != size/100 {
			t.Errorf("rank %d: %d lines, want %d", r, check.next[r], size/100)
		}
	}
	if left, _ := os.ReadDir(spill); len(left) > 0 {
		t.Errorf("spill files left: %v", left)
	}
	t.Logf("heap growth %.1f MiB for %d MiB held back", float64(growth)/(1<<20), ranks*size>>20)
	if growth > 24<<20 { // 16 MiB of buffers at most, and garbage
		t.Errorf("heap grew by %.1f MiB", float64(growth)/(1<<20))
	}
}

// A source that stops in the middle of a long line loses the stream after
// the hold timeout, so that ranks that wait on each other cannot deadlock.
func TestHoldTimeout(t *testing.T) {
	var out syncBuf
	w := NewWriter(&out, io.Discard, Options{Tag: true, HoldTimeout: 50 * time.Millisecond})
	a, b := Source{Rank: 0}, Source{Rank: 1}
	w.Write(a, Stdout, []byte("start-"), true)
	start := time.Now()
	w.Write(b, Stdout, []byte("other\n"), false)
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("b waited only %v", d)
	}
	w.Write(a, Stdout, []byte("end\n"), false)
	if got, want := out.String(), "[0,0]<stdout>:start-\n[0,1]<stdout>:other\n[0,0]<stdout>:end\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Release and End free a stream held by a source that exited mid-line.
func TestReleaseAndEnd(t *testing.T) {
	for _, end := range []bool{false, true} {
		var out syncBuf
		w := NewWriter(&out, io.Discard, Options{HoldTimeout: -1})
		a, b := Source{Rank: 0}, Source{Rank: 1}
		w.Write(a, Stdout, []byte("cut"), true)
		done := make(chan struct{})
		go func() { w.Write(b, Stdout, []byte("b\n"), false); close(done) }()
		time.Sleep(10 * time.Millisecond)
		if end {
			w.End(a, Stdout)
		} else {
			w.Release(a)
		}
		<-done
		if got, want := out.String(), "cut\nb\n"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestPrintfBetweenLines(t *testing.T) {
	var errb bytes.Buffer
	w := NewWriter(io.Discard, &errb, Options{Tag: true})
	w.Write(Source{Rank: 3}, Stderr, []byte("half"), true)
	w.Printf("prun: %s\n", "message")
	w.Write(Source{Rank: 3}, Stderr, []byte(" rest\n"), false)
	if got, want := errb.String(), "[0,3]<stderr>:half\nprun: message\n[0,3]<stderr>: rest\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestUTF8Cut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"abc", 3}, {"ab€", 5}, {"ab\xe2\x82", 2}, {"ab\xe2", 2}, {"a\xf0\x9f\x98", 1},
		{"a\xf0\x9f\x98\x80", 5}, {"\xff\xff", 2}, {"\xe2\x82", 2}, {"ab\x82\x82\x82\x82", 6},
	} {
		if got := utf8Cut([]byte(tc.in)); got != tc.want {
			t.Errorf("utf8Cut(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func BenchmarkRenderTagged(b *testing.B) {
	p := lineBlock(3)[:bufSize]
	w := NewWriter(io.Discard, io.Discard, Options{Tag: true})
	tags := w.buildTags(Source{Rank: 3}, "", 0)
	out := make([]byte, 0, 2*bufSize)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out = render(out[:0], formPrefix, tags, Stdout, p, false, true, nil)
	}
	_ = strconv.Itoa(len(out))
}
