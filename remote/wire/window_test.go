package wire

import (
	"testing"
	"time"
)

func TestWindowBlocksUntilAcknowledged(t *testing.T) {
	w := NewWindow(StdinWindow)
	if err := w.Acquire(StdinWindow); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- w.Acquire(1) }()
	select {
	case err := <-got:
		t.Fatalf("acquire past a full window returned %v at once", err)
	case <-time.After(50 * time.Millisecond):
	}
	w.Release(StdinAckEvery)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// A chunk larger than the window goes alone.
	w2 := NewWindow(StdinWindow)
	if err := w2.Acquire(2 * StdinWindow); err != nil {
		t.Fatal(err)
	}
	// A lost node wakes its waiter with an error.
	go func() { got <- w2.Acquire(1) }()
	time.Sleep(10 * time.Millisecond)
	w2.Kill()
	if err := <-got; err != ErrNodeGone {
		t.Fatalf("acquire on a killed window: %v, want errNodeGone", err)
	}
}
