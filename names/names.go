// Package names is the job-wide name service behind PMIx_Publish/Lookup/
// Unpublish (and, later, PMI's publish_name/lookup_name). The launcher owns
// the single instance; daemons reach it through their upstream link.
package names

import (
	"errors"
	"sync"
	"time"
)

// Errors the PMIx host maps to PMIx status codes.
var (
	ErrDuplicate = errors.New("names: key already published")
	ErrNotFound  = errors.New("names: key not found")
	ErrTimeout   = errors.New("names: lookup timed out")
)

// Entry is one published datum. Value is opaque to the service.
type Entry struct {
	Key       string
	Value     any
	Publisher string // who may unpublish it, e.g. "nspace:rank"
	// FirstRead entries (PMIX_PERSIST_FIRST_READ) go with the first lookup
	// that returns them: Open MPI's connect/accept publishes each side's
	// half under the port's keys that way, again for every connection.
	FirstRead bool
}

// Service stores published names and wakes lookups that wait for them.
type Service struct {
	mu      sync.Mutex
	data    map[string]Entry
	waiters []*waiter
}

type waiter struct {
	keys []string
	done func([]Entry, error)
	t    *time.Timer
}

func New() *Service { return &Service{data: map[string]Entry{}} }

// Publish stores entries atomically: if any key exists, nothing is stored.
func (s *Service) Publish(entries []Entry) error {
	s.mu.Lock()
	for _, e := range entries {
		if _, ok := s.data[e.Key]; ok {
			s.mu.Unlock()
			return ErrDuplicate
		}
	}
	for _, e := range entries {
		s.data[e.Key] = e
	}
	ready := s.takeReady()
	s.mu.Unlock()
	for _, r := range ready {
		r()
	}
	return nil
}

// Lookup calls done with the entries found for keys. With wait, it calls
// done only once all keys are published (or timeout passes, if non-zero);
// without, at once, with ErrNotFound when none is found.
func (s *Service) Lookup(keys []string, wait bool, timeout time.Duration, done func([]Entry, error)) {
	s.mu.Lock()
	found := s.find(keys)
	if !wait || len(found) == len(keys) {
		s.consume(found)
		s.mu.Unlock()
		if len(found) == 0 {
			done(nil, ErrNotFound)
			return
		}
		done(found, nil)
		return
	}
	w := &waiter{keys: keys, done: done}
	s.waiters = append(s.waiters, w)
	if timeout > 0 {
		w.t = time.AfterFunc(timeout, func() {
			if s.remove(w) {
				done(nil, ErrTimeout)
			}
		})
	}
	s.mu.Unlock()
}

// Unpublish removes keys that publisher published; with no keys, all of them.
func (s *Service) Unpublish(publisher string, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(keys) == 0 {
		for k, e := range s.data {
			if e.Publisher == publisher {
				delete(s.data, k)
			}
		}
		return nil
	}
	var missing bool
	for _, k := range keys {
		e, ok := s.data[k]
		if !ok || e.Publisher != publisher {
			missing = true
			continue
		}
		delete(s.data, k)
	}
	if missing {
		return ErrNotFound
	}
	return nil
}

// Close fails every waiting lookup (the job is ending).
func (s *Service) Close() {
	s.mu.Lock()
	ws := s.waiters
	s.waiters = nil
	s.mu.Unlock()
	for _, w := range ws {
		if w.t != nil {
			w.t.Stop()
		}
		w.done(nil, ErrNotFound)
	}
}

func (s *Service) find(keys []string) []Entry {
	var out []Entry
	for _, k := range keys {
		if e, ok := s.data[k]; ok {
			out = append(out, e)
		}
	}
	return out
}

// consume removes the first-read entries among found, which a lookup is
// about to return.
func (s *Service) consume(found []Entry) {
	for _, e := range found {
		if e.FirstRead {
			delete(s.data, e.Key)
		}
	}
}

// takeReady removes the waiters whose keys are all present and returns their
// completions, to be run without the lock.
func (s *Service) takeReady() []func() {
	var ready []func()
	kept := s.waiters[:0]
	for _, w := range s.waiters {
		found := s.find(w.keys)
		if len(found) < len(w.keys) {
			kept = append(kept, w)
			continue
		}
		if w.t != nil {
			w.t.Stop()
		}
		s.consume(found) // before the next waiter looks
		done := w.done
		ready = append(ready, func() { done(found, nil) })
	}
	s.waiters = kept
	return ready
}

func (s *Service) remove(w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			return true
		}
	}
	return false
}
