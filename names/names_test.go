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
