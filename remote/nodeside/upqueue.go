package nodeside

import (
	"errors"
	"prun/remote/wire"
	"sync"
	"time"

	"prun/ctl"
)

// What a daemon sends up goes through one queue per daemon, and its writer
// sends the frames of output and events that queued up while it wrote the
// last (a relay's children's and its own) as one frame (tBatch). No timer
// holds a frame back: a lone line goes as soon as the writer is free, as it
// did from the caller; only frames that would have waited for the link
// anyway travel together. The launcher thus reads, from a relay, one frame
// per write of the relay's instead of one per message of its subtree.
//
// The queue keeps the order of everything a daemon sends up (a stream's
// runs before its end, a node's last output before its job's end there), as
// the link's lock did: a batch is a run of consecutive frames, and a frame
// of another kind goes alone, in its place.

// upQueueMax bounds the bytes queued on a daemon's upward queue: beyond
// it, a sender waits, as it waited on the link's write before (output is
// bounded by its window already; this bounds the rest).
const upQueueMax = 4 << 20

var errLinkClosed = errors.New("ctl: link closed")

// upQueue is a daemon's link to its parent for what it sends up: Send
// queues, one writer sends.
type upQueue struct {
	l       *ctl.Link
	mu      sync.Mutex
	cond    sync.Cond // the queue changed (senders wait for room, the writer for frames)
	q       []wire.Queued
	bytes   int
	writing bool  // the writer holds frames it took
	err     error // the link failed: later Sends fail with it
}

func newUpQueue(l *ctl.Link) *upQueue {
	u := &upQueue{l: l}
	u.cond.L = &u.mu
	go u.write()
	go func() {
		<-l.Done()
		u.fail(errLinkClosed)
	}()
	return u
}

// Send queues a frame for the parent; it waits while the queue is full.
// It fails once the link did.
func (u *upQueue) Send(typ uint8, payload []byte) error {
	select {
	case <-u.l.Done():
		u.fail(errLinkClosed)
	default:
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for u.err == nil && u.bytes >= upQueueMax {
		u.cond.Wait()
	}
	if u.err != nil {
		return u.err
	}
	u.q = append(u.q, wire.Queued{Typ: typ, P: payload})
	u.bytes += len(payload)
	u.cond.Broadcast()
	return nil
}

// write sends what is queued: a frame alone, or the batchable frames at
// the queue's head as one.
func (u *upQueue) write() {
	for {
		u.mu.Lock()
		u.writing = false
		u.cond.Broadcast()
		for len(u.q) == 0 && u.err == nil {
			u.cond.Wait()
		}
		if u.err != nil {
			u.mu.Unlock()
			return
		}
		k, size := 1, len(u.q[0].P)
		if wire.Batchable(u.q[0].Typ) {
			for k < len(u.q) && wire.Batchable(u.q[k].Typ) && size+5+len(u.q[k].P) <= wire.BatchMax {
				size += 5 + len(u.q[k].P)
				k++
			}
		}
		fs := u.q[:k:k]
		u.q = u.q[k:]
		if len(u.q) == 0 {
			u.q = nil // let the taken frames' array go with them
		}
		for _, f := range fs {
			u.bytes -= len(f.P)
		}
		u.writing = true
		u.cond.Broadcast()
		u.mu.Unlock()
		var err error
		if len(fs) == 1 {
			err = u.l.Send(fs[0].Typ, fs[0].P)
		} else {
			err = u.l.Send(wire.TBatch, wire.EncodeBatch(fs))
		}
		if err != nil {
			u.fail(err)
			return
		}
	}
}
func (u *upQueue) fail(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil {
		u.err = err
	}
	u.q, u.bytes = nil, 0
	u.cond.Broadcast()
}

// drain waits, at most d, until everything queued was written (or the
// link failed): a daemon's last words go before it closes its link.
func (u *upQueue) drain(d time.Duration) {
	done := make(chan struct{})
	go func() {
		u.mu.Lock()
		for u.err == nil && (len(u.q) > 0 || u.writing) {
			u.cond.Wait()
		}
		u.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		u.fail(errLinkClosed)
	}
}
