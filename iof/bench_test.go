package iof

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lineBlock is 100-byte lines cut into 4 KiB writes, the way a rank's
// stdio flushes a full buffer into its pipe.
func lineBlock(rank int) []byte {
	var b bytes.Buffer
	for b.Len() < 1<<20 {
		fmt.Fprintf(&b, "rank %3d line %08d ", rank, b.Len()/100)
		b.Write(bytes.Repeat([]byte{'x'}, 100-1-b.Len()%100))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// benchForward forwards ranks×size bytes of 100-byte lines through real
// pipes to /dev/null.
func benchForward(b *testing.B, ranks, size int, opts Options) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	blocks := make([][]byte, ranks)
	for r := range blocks {
		blocks[r] = lineBlock(r)
	}
	if opts.Clock == nil {
		opts.Clock = func() time.Time { return time.Unix(1700000000, 0) }
	}
	b.SetBytes(int64(ranks * size))
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := forwardOnce(null, blocks, size, opts); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// CPU time (user+system, all threads) tells the work apart from waiting
	// when other processes share the cores.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkForward4x50MB(b *testing.B) {
	const size = 50 << 20
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"untagged", Options{}},
		{"tagged", Options{Tag: true}},
		{"tagged-color", Options{Tag: true, Color: true}},
		{"timestamp-tag", Options{Tag: true, Timestamp: true}},
		{"rank", Options{Rank: true}},
		{"json", Options{JSON: true}},
	} {
		b.Run(bc.name, func(b *testing.B) { benchForward(b, 4, size, bc.opts) })
	}
}

// forwardOnce forwards size bytes from each block's rank through its own
// pipe to null.
func forwardOnce(null *os.File, blocks [][]byte, size int, opts Options) error {
	w := NewWriter(null, null, opts)
	var wg sync.WaitGroup
	errs := make(chan error, len(blocks))
	for r := range blocks {
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			Forward(pr, w, Source{Rank: r}, Stdout)
			pr.Close()
		}()
		go func() {
			defer wg.Done()
			defer pw.Close()
			blk := blocks[r]
			for sent := 0; sent < size; {
				off := sent % len(blk)
				n := min(4096, size-sent, len(blk)-off)
				if _, err := pw.Write(blk[off : off+n]); err != nil {
					errs <- err
					return
				}
				sent += n
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return w.Close()
}
