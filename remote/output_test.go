package remote

import (
	"bytes"
	"fmt"
	"io"
	"prun/remote/wire"
	"strings"
	"sync"
	"testing"
	"time"

	"prun/daemon"
	"prun/iof"
)

// linkSink is a daemon's side of the output flow over a simulated link (a
// channel read by one goroutine, as a link's reader): what node.Write does.
type linkSink struct {
	c    *wire.OutCredit
	link chan func()
	f    *outFlow
}

func (s linkSink) Write(src iof.Source, st iof.Stream, p []byte, partial bool) {
	k := wire.OutKey{Src: src, St: st}
	if !s.c.Acquire(k, len(p), partial) {
		return
	}
	p = append([]byte(nil), p...)
	s.link <- func() { s.f.push(k, outRun{v: 1, p: p, partial: partial}) }
}

func (s linkSink) End(src iof.Source, st iof.Stream) {
	s.link <- func() { s.f.push(wire.OutKey{Src: src, St: st}, outRun{v: 1, end: true}) }
}

// Two ranks of one node write lines longer than iof's buffer at once, to a
// terminal that holds a stream mid-line for as long as it takes: the rest of
// each line must pass the window, which the other rank's queued runs fill,
// or both wait for ever (across nodes, a broken line and a dead link).
// Every line arrives whole, and the node's NodeJobDone comes after its
// output.
func TestOutputFlowLongLines(t *testing.T) {
	var out bytes.Buffer
	w := iof.NewWriter(&out, io.Discard, iof.Options{HoldTimeout: -1})
	c := wire.NewOutCredit(64 << 10)
	events := make(chan daemon.Event, 1)
	var f *outFlow
	f = newOutFlow(1, 64<<10, w, func(acks []outAck) {
		for _, a := range acks {
			n, k, grant, err := wire.DecodeOutAck(a.body, 1<<40)
			if err != nil {
				t.Error(err)
			}
			c.Ack(n, k, grant)
		}
	}, func(ev daemon.Event) { events <- ev })
	link := make(chan func(), 1024)
	go func() {
		for fn := range link {
			fn()
		}
	}()
	sink := linkSink{c, link, f}
	lines := func(rank int) string {
		var b strings.Builder
		for i := 0; i < 20; i++ {
			fmt.Fprintf(&b, "r%d %d %s\n", rank, i, strings.Repeat(string(rune('a'+rank)), 300000+i))
		}
		return b.String()
	}
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			iof.Forward(strings.NewReader(lines(r)), sink, iof.Source{Rank: r}, iof.Stdout)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the ranks' output did not pass in 20 s: a line's rest waits behind runs that wait for it")
	}
	link <- func() { f.pushEvent(1, daemon.Event{Kind: daemon.NodeJobDone, Node: "n"}) }
	select {
	case <-events:
	case <-time.After(20 * time.Second):
		t.Fatal("no NodeJobDone")
	}
	close(link)
	got := map[string]string{}
	for _, l := range strings.SplitAfter(out.String(), "\n") {
		if l != "" {
			got[l[:2]] += l
		}
	}
	for r := 0; r < 2; r++ {
		if got[fmt.Sprintf("r%d", r)] != lines(r) {
			t.Errorf("rank %d: lines not whole or not in order", r)
		}
	}
	if len(got) != 2 {
		t.Errorf("%d kinds of line, want 2", len(got))
	}
}
