package launcher

import (
	"errors"
	"slices"
	"sync"
	"time"

	"prun/daemon"
	"prun/names"
)

// sharedNames is the job's name service with Hydra's -nameserver: the names
// the processes publish as strings (MPI_Publish_name's ports, Open MPI's
// first-read connection halves) go to the external server, where other
// launches find them, and lookups look there for what this job does not
// hold; other value types stay in the job's own service. A first-read name
// goes from the server when this launch reads it; another launch cannot
// know it is one. Names this launch published
// and did not take back are unpublished when it ends, so that a crashed job
// leaves no stale port behind.
type sharedNames struct {
	local daemon.LocalNames
	ns    nameServer
	poll  time.Duration // how often a waiting lookup asks the server again

	warn func(error) // says once that the server failed (the ranks see only a refusal)

	mu        sync.Mutex
	mine      map[string]string // name -> publisher, published on the server
	firstRead map[string]bool   // names of mine that go with their first read
	closed    chan struct{}
	once      sync.Once
	warned    sync.Once
}

// nameServer is the external server's three requests (names.HydraServer).
type nameServer interface {
	Publish(name, value string) error
	Lookup(name string) (string, error)
	Unpublish(name string) error
}

func newSharedNames(local *names.Service, addr string, warn func(error)) *sharedNames {
	return &sharedNames{local: daemon.LocalNames{S: local}, ns: names.HydraServer{Addr: addr}, warn: warn,
		poll: 50 * time.Millisecond, mine: map[string]string{}, firstRead: map[string]bool{}, closed: make(chan struct{})}
}

// failed reports a server that cannot be reached or answers nonsense, once.
func (s *sharedNames) failed(err error) {
	if err != nil && !errors.Is(err, names.ErrDuplicate) && !errors.Is(err, names.ErrNotFound) {
		s.warned.Do(func() { s.warn(err) })
	}
}

func shared(e names.Entry) bool {
	_, isString := e.Value.(string)
	return isString
}

func (s *sharedNames) Publish(entries []names.Entry, done func(error)) {
	var ext, loc []names.Entry
	for _, e := range entries {
		if shared(e) {
			ext = append(ext, e)
		} else {
			loc = append(loc, e)
		}
	}
	if len(ext) == 0 {
		s.local.Publish(loc, done)
		return
	}
	go func() { // the server is a network away
		for i, e := range ext {
			if err := s.ns.Publish(e.Key, e.Value.(string)); err != nil {
				s.failed(err)
				for _, back := range ext[:i] { // all or nothing, as the job's own
					s.ns.Unpublish(back.Key)
				}
				done(err)
				return
			}
		}
		s.mu.Lock()
		for _, e := range ext {
			s.mine[e.Key] = e.Publisher
			if e.FirstRead {
				s.firstRead[e.Key] = true
			}
		}
		s.mu.Unlock()
		if len(loc) == 0 {
			done(nil)
			return
		}
		s.local.Publish(loc, func(err error) {
			if err != nil {
				s.take(ext)
			}
			done(err)
		})
	}()
}

// take unpublishes entries from the server.
func (s *sharedNames) take(entries []names.Entry) {
	for _, e := range entries {
		s.ns.Unpublish(e.Key)
		s.mu.Lock()
		delete(s.mine, e.Key)
		s.mu.Unlock()
	}
}

func (s *sharedNames) Lookup(keys []string, wait bool, timeout time.Duration, done func([]names.Entry, error)) {
	go func() {
		var deadline <-chan time.Time
		if wait && timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			deadline = t.C
		}
		for {
			found := s.lookupOnce(keys)
			switch {
			case len(found) == len(keys):
				done(found, nil)
				return
			case !wait && len(found) == 0:
				done(nil, names.ErrNotFound)
				return
			case !wait:
				done(found, nil)
				return
			}
			select {
			case <-time.After(s.poll):
			case <-deadline:
				done(nil, names.ErrTimeout)
				return
			case <-s.closed:
				done(nil, names.ErrNotFound)
				return
			}
		}
	}()
}

// lookupOnce finds keys in the job's service, then on the server.
func (s *sharedNames) lookupOnce(keys []string) []names.Entry {
	var found []names.Entry
	s.local.Lookup(keys, false, 0, func(e []names.Entry, _ error) { found = e }) // LocalNames answers at once
	for _, k := range keys {
		if slices.ContainsFunc(found, func(e names.Entry) bool { return e.Key == k }) {
			continue
		}
		v, err := s.ns.Lookup(k)
		s.failed(err)
		if err == nil {
			s.mu.Lock()
			pub, first := s.mine[k], s.firstRead[k]
			if first { // it goes with this read (PMIX_PERSIST_FIRST_READ)
				delete(s.mine, k)
				delete(s.firstRead, k)
			}
			s.mu.Unlock()
			if first {
				s.ns.Unpublish(k)
			}
			found = append(found, names.Entry{Key: k, Value: v, Publisher: pub, FirstRead: first})
		}
	}
	return found
}

func (s *sharedNames) Unpublish(publisher string, keys []string, done func(error)) {
	s.mu.Lock()
	var ext, loc []string
	if len(keys) == 0 {
		for k, p := range s.mine {
			if p == publisher {
				ext = append(ext, k)
			}
		}
	}
	for _, k := range keys {
		if s.mine[k] == publisher && publisher != "" {
			ext = append(ext, k)
		} else {
			loc = append(loc, k)
		}
	}
	s.mu.Unlock()
	if len(ext) == 0 {
		s.local.Unpublish(publisher, keys, done)
		return
	}
	go func() {
		var err error
		for _, k := range ext {
			if e := s.ns.Unpublish(k); e != nil && !errors.Is(e, names.ErrNotFound) {
				err = e
			}
			s.mu.Lock()
			delete(s.mine, k)
			s.mu.Unlock()
		}
		if len(loc) > 0 || len(keys) == 0 {
			s.local.Unpublish(publisher, loc, func(e error) {
				if err == nil {
					err = e
				}
			})
		}
		done(err)
	}()
}

// close ends the waiting lookups and takes back what this launch left on
// the server.
func (s *sharedNames) close() {
	s.once.Do(func() {
		close(s.closed)
		s.mu.Lock()
		left := make([]string, 0, len(s.mine))
		for k := range s.mine {
			left = append(left, k)
		}
		s.mine = map[string]string{}
		s.mu.Unlock()
		for _, k := range left {
			s.ns.Unpublish(k)
		}
	})
}
