package names

import (
	"errors"
	"testing"
	"time"
)

func TestPublishLookupUnpublish(t *testing.T) {
	s := New()
	if err := s.Publish([]Entry{{Key: "a", Value: "1", Publisher: "ns:0"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish([]Entry{{Key: "b", Value: 2}, {Key: "a", Value: "x"}}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate publish: %v", err)
	}
	var got []Entry
	s.Lookup([]string{"a", "b"}, false, 0, func(e []Entry, err error) { got = e })
	if len(got) != 1 || got[0].Value != "1" {
		t.Fatalf("lookup = %+v (b must not have been stored by the failed publish)", got)
	}
	if err := s.Unpublish("ns:1", []string{"a"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unpublish by another publisher: %v", err)
	}
	if err := s.Unpublish("ns:0", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	var lerr error
	s.Lookup([]string{"a"}, false, 0, func(e []Entry, err error) { lerr = err })
	if !errors.Is(lerr, ErrNotFound) {
		t.Fatalf("lookup after unpublish: %v", lerr)
	}
}

func TestLookupWaits(t *testing.T) {
	s := New()
	done := make(chan []Entry, 1)
	s.Lookup([]string{"x", "y"}, true, 0, func(e []Entry, err error) { done <- e })
	s.Publish([]Entry{{Key: "x", Value: 1}})
	select {
	case <-done:
		t.Fatal("waiting lookup completed before all keys were published")
	default:
	}
	s.Publish([]Entry{{Key: "y", Value: 2}})
	if e := <-done; len(e) != 2 {
		t.Fatalf("got %+v", e)
	}
}

func TestLookupTimeoutAndClose(t *testing.T) {
	s := New()
	errc := make(chan error, 2)
	s.Lookup([]string{"never"}, true, 50*time.Millisecond, func(e []Entry, err error) { errc <- err })
	if err := <-errc; !errors.Is(err, ErrTimeout) {
		t.Fatalf("timeout: %v", err)
	}
	s.Lookup([]string{"never"}, true, 0, func(e []Entry, err error) { errc <- err })
	s.Close()
	if err := <-errc; !errors.Is(err, ErrNotFound) {
		t.Fatalf("close: %v", err)
	}
}

// First-read entries (PMIX_PERSIST_FIRST_READ) go with the first lookup
// that returns them, immediate or waiting, and may then be published again.
func TestFirstRead(t *testing.T) {
	s := New()
	var got [][]Entry
	record := func(e []Entry, err error) { got = append(got, e) }
	s.Lookup([]string{"k"}, true, 0, record)
	s.Lookup([]string{"k"}, true, 0, record)
	if err := s.Publish([]Entry{{Key: "k", Value: 1, FirstRead: true}}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0]) != 1 || got[0][0].Value != 1 {
		t.Fatalf("after the publish: %+v, want one waiter served", got)
	}
	if err := s.Publish([]Entry{{Key: "k", Value: 2, FirstRead: true}}); err != nil {
		t.Fatalf("publishing a consumed key again: %v", err)
	}
	if len(got) != 2 || got[1][0].Value != 2 {
		t.Fatalf("second waiter: %+v", got)
	}
	var lerr error
	s.Lookup([]string{"k"}, false, 0, func(e []Entry, err error) { lerr = err })
	if !errors.Is(lerr, ErrNotFound) {
		t.Fatalf("lookup of a consumed key: %v", lerr)
	}
	s.Publish([]Entry{{Key: "k", Value: 3, FirstRead: true}, {Key: "kept", Value: 4}})
	s.Lookup([]string{"k", "kept"}, false, 0, func(e []Entry, err error) {})
	s.Lookup([]string{"k", "kept"}, false, 0, func(e []Entry, err error) {
		if len(e) != 1 || e[0].Key != "kept" {
			t.Errorf("second immediate lookup: %+v, want only the lasting entry", e)
		}
	})
}
