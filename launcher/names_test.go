package launcher

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"prun/internal/ctest"
	"prun/names"
)

func sync1[T any](f func(func(T))) T {
	ch := make(chan T, 1)
	f(func(v T) { ch <- v })
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		panic("no answer in 10 s")
	}
}

// lookupSpy closes missed the first time a lookup of key finds nothing.
type lookupSpy struct {
	nameServer
	key    string
	missed chan struct{}
}

func (l lookupSpy) Lookup(name string) (string, error) {
	v, err := l.nameServer.Lookup(name)
	if name == l.key && err != nil {
		select {
		case <-l.missed:
		default:
			close(l.missed)
		}
	}
	return v, err
}

// Two launches sharing hydra_nameserver: what one publishes as a string
// the other finds, a waiting lookup wakes once it appears, a first-read
// name goes with its first read, and what a launch leaves is taken back
// when it ends. Other values stay in the launch.
func TestSharedNames(t *testing.T) {
	addr := ctest.HydraNameserver(t)
	var warnings []error
	var mu sync.Mutex
	warn := func(err error) { mu.Lock(); warnings = append(warnings, err); mu.Unlock() }
	a := newSharedNames(names.New(), addr, warn)
	b := newSharedNames(names.New(), addr, warn)
	defer b.close()
	publish := func(s *sharedNames, es ...names.Entry) error {
		return sync1(func(done func(error)) { s.Publish(es, done) })
	}
	type res struct {
		e   []names.Entry
		err error
	}
	lookup := func(s *sharedNames, wait bool, timeout time.Duration, keys ...string) res {
		return sync1(func(done func(res)) {
			s.Lookup(keys, wait, timeout, func(e []names.Entry, err error) { done(res{e, err}) })
		})
	}
	if err := publish(a, names.Entry{Key: "svc", Value: "port-a", Publisher: "a:0"}, names.Entry{Key: "blob", Value: []byte{1}, Publisher: "a:0"}); err != nil {
		t.Fatal(err)
	}
	if r := lookup(b, false, 0, "svc"); r.err != nil || len(r.e) != 1 || r.e[0].Value != "port-a" {
		t.Errorf("b's lookup of a's name: %+v", r)
	}
	if r := lookup(b, false, 0, "blob"); !errors.Is(r.err, names.ErrNotFound) {
		t.Errorf("a's []byte value reached b: %+v", r)
	}
	if r := lookup(a, false, 0, "blob"); r.err != nil || len(r.e) != 1 {
		t.Errorf("a's own []byte value: %+v", r)
	}
	if err := publish(b, names.Entry{Key: "svc", Value: "port-b", Publisher: "b:0"}); !errors.Is(err, names.ErrDuplicate) {
		t.Errorf("b publishing a's name: %v", err)
	}

	// a waiting lookup wakes once the other launch publishes
	// (b's first look at the server has missed it before a publishes).
	missed := make(chan struct{})
	b.ns = lookupSpy{b.ns, "late", missed}
	got := make(chan res, 1)
	b.Lookup([]string{"late"}, true, 5*time.Second, func(e []names.Entry, err error) { got <- res{e, err} })
	select {
	case <-missed:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting lookup did not ask the server in 10 s")
	}
	if err := publish(a, names.Entry{Key: "late", Value: "v", Publisher: "a:1"}); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || len(r.e) != 1 || r.e[0].Value != "v" {
		t.Errorf("waiting lookup: %+v", r)
	}
	if r := lookup(b, true, 200*time.Millisecond, "never"); !errors.Is(r.err, names.ErrTimeout) {
		t.Errorf("timed-out lookup: %+v", r)
	}

	// first read, within a launch
	if err := publish(a, names.Entry{Key: "half", Value: "h", Publisher: "a:0", FirstRead: true}); err != nil {
		t.Fatal(err)
	}
	if r := lookup(a, false, 0, "half"); r.err != nil || len(r.e) != 1 {
		t.Errorf("first read: %+v", r)
	}
	if r := lookup(a, false, 0, "half"); !errors.Is(r.err, names.ErrNotFound) {
		t.Errorf("second read of a first-read name: %+v", r)
	}

	// unpublish by name and all of a publisher's; the rest goes at close
	if err := sync1(func(done func(error)) { a.Unpublish("a:1", []string{"late"}, done) }); err != nil {
		t.Errorf("unpublish: %v", err)
	}
	if err := publish(a, names.Entry{Key: "left", Value: "l", Publisher: "a:2"}); err != nil {
		t.Fatal(err)
	}
	a.close()
	ns := names.HydraServer{Addr: addr}
	for _, k := range []string{"svc", "late", "left"} {
		if v, err := ns.Lookup(k); !errors.Is(err, names.ErrNotFound) {
			t.Errorf("%s still on the server after a ended: %q %v", k, v, err)
		}
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %v", warnings)
	}

	// a server that is not there: said once, and the request fails
	c := newSharedNames(names.New(), "127.0.0.1:1", warn)
	defer c.close()
	if err := publish(c, names.Entry{Key: "x", Value: "y", Publisher: "c:0"}); err == nil {
		t.Error("publish to no server succeeded")
	}
	lookup(c, false, 0, "x")
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(warnings[0].Error(), "name server 127.0.0.1:1") {
		t.Errorf("warnings: %v", warnings)
	}
}
