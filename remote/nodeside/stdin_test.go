package nodeside

import (
	"fmt"
	"io"
	"prun/remote/wire"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestStdinPipeAcknowledgesWhatWasRead(t *testing.T) {
	var acked atomic.Int64
	s := &stdinPipe{ack: func(n int) { acked.Add(int64(n)) }}
	chunk := make([]byte, 40<<10)
	s.write(chunk)
	s.write(chunk)
	s.write(chunk)
	s.close()
	buf := make([]byte, 16<<10)
	total := 0
	for {
		n, err := s.Read(buf)
		total += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if a := acked.Load(); int(a) > total || total-int(a) > wire.StdinAckEvery {
			t.Fatalf("after reading %d bytes, %d acknowledged", total, a)
		}
	}
	if total != 3*len(chunk) || acked.Load() != int64(total) {
		t.Fatalf("read %d, acknowledged %d; want %d both", total, acked.Load(), 3*len(chunk))
	}
}

func TestStdinPipeStopReading(t *testing.T) {
	var dones atomic.Int32
	s := &stdinPipe{done: func() { dones.Add(1) }}
	s.write([]byte("buffered"))
	s.StopReading()
	s.StopReading()
	s.write([]byte("dropped"))
	if dones.Load() != 1 {
		t.Fatalf("done called %d times, want 1", dones.Load())
	}
	s.mu.Lock()
	n := len(s.chunks)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d chunks kept after StopReading", n)
	}
}

// Each job reads its own stream: one's end of input is not another's; a
// forgotten job's stream ends and its late chunks are dropped.
func TestStdinStreams(t *testing.T) {
	var acks []string
	var mu sync.Mutex
	s := &stdinStreams{ack: func(ns string, n int) { mu.Lock(); acks = append(acks, fmt.Sprint(ns, n)); mu.Unlock() },
		done: func(ns string) {}}
	a := s.get("a")
	s.write("a", []byte("one"))
	s.write("a", nil)
	s.write("b", []byte("two")) // before its shell asks
	s.write("b", nil)
	if got, err := io.ReadAll(a); err != nil || string(got) != "one" {
		t.Errorf("a: %q %v", got, err)
	}
	if got, err := io.ReadAll(s.get("b")); err != nil || string(got) != "two" {
		t.Errorf("b: %q %v", got, err)
	}
	c := s.get("c")
	s.drop("c")
	s.write("c", []byte("late"))
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
		t.Errorf("c after drop: %q %v", got, err)
	}
	if got, _ := io.ReadAll(s.get("c")); len(got) != 0 {
		t.Errorf("c asked again after drop: %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(acks, ",") != "a3,b3" {
		t.Errorf("acks %q", acks)
	}
}
