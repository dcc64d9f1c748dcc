package ctl

import (
	"strconv"
	"testing"
)

// BenchmarkLink is a link's throughput over loopback TCP: frames of each
// size sent by one goroutine and received by another (the cost of the
// wire's framing and protection, both ends, beside the sockets').
func BenchmarkLink(b *testing.B) {
	for _, size := range []int{64, 4 << 10, 64 << 10, 1 << 20} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			a, r := linkPair(b)
			payload := make([]byte, size)
			done := make(chan error, 1)
			go func() {
				for i := 0; i < b.N; i++ {
					if _, err := r.Recv(); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := a.Send(9, payload); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
