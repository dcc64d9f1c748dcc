package hostfile

import "fmt"

// Select narrows an allocation (base: a hostfile's or resource manager's
// entries) to the hosts sel names, the way PRRTE filters an allocation by
// --host or by a hostfile given inside a resource-manager job:
//
//   - a named host must be in base (matched by name, by address, or short
//     name against a qualified one) and comes back as base has it (base's
//     name, user, port); a slot count the user gave narrows it, but may
//     not exceed what base offers, since those slots do not exist;
//   - "+nN" is base's N-th host, "+e" all hosts sel does not otherwise
//     name, "+e:N" the first N of them;
//   - "^host" drops a host; if sel only excludes, the result is base
//     without those hosts.
//
// Hosts come back in sel's order, each once. Base's own exclusions have
// already been applied to it and are ignored.
func Select(base, sel []Entry) ([]Entry, error) {
	var pool []Entry
	for _, e := range base {
		switch {
		case e.Exclude:
		case e.Kind != Named:
			return nil, fmt.Errorf("%s: a relative node spec cannot be selected from", e.hostListItem())
		default:
			pool = append(pool, e)
		}
	}
	var excl, incl []Entry
	for _, e := range sel {
		if e.Exclude {
			excl = append(excl, e)
		} else {
			incl = append(incl, e)
		}
	}
	s := &selection{pool: pool, ex: indexOf(excl), used: make([]bool, len(pool)), out: []Entry{}}
	if len(incl) == 0 {
		for _, e := range pool {
			if !s.excluded(e.Name) {
				s.out = append(s.out, e)
			}
		}
		return s.out, nil
	}
	pick, taken, err := selectPicks(pool, incl)
	if err != nil {
		return nil, err
	}
	for i, e := range incl {
		if e.Kind != RelEmpty {
			if err := s.add(pick[i], e); err != nil {
				return nil, err
			}
			continue
		}
		want := e.Count
		for j := range pool {
			if want == 0 && e.Count > 0 {
				break
			}
			if taken[j] || s.used[j] || s.excluded(pool[j].Name) {
				continue
			}
			taken[j] = true
			if err := s.add(j, e); err != nil {
				return nil, err
			}
			want--
		}
		if e.Count > 0 && want > 0 {
			return nil, fmt.Errorf("%s: only %d empty nodes left", e.hostListItem(), e.Count-want)
		}
	}
	return s.out, nil
}

// selectPicks finds first the hosts incl names or indexes, so that "+e"
// knows which are taken wherever it appears in incl: pick is an index
// into pool, or -1 for +e.
func selectPicks(pool, incl []Entry) (pick []int, taken []bool, err error) {
	at := indexOf(pool)
	pick = make([]int, len(incl))
	taken = make([]bool, len(pool))
	for i, e := range incl {
		pick[i] = -1
		switch e.Kind {
		case RelEmpty:
			continue
		case RelNode:
			if e.Index >= len(pool) {
				return nil, nil, fmt.Errorf("%s: the allocation has %d nodes (+n counts from 0)", e.hostListItem(), len(pool))
			}
			pick[i] = e.Index
		default:
			j := at.find(e.Name)
			if j < 0 {
				return nil, nil, fmt.Errorf("host %s is not in the allocation", quote(e.Name))
			}
			pick[i] = j
		}
		taken[pick[i]] = true
	}
	return pick, taken, nil
}

// selection is Select's result as it grows.
type selection struct {
	pool []Entry
	ex   *hostIndex // the hosts sel excludes
	used []bool     // of pool
	out  []Entry
}

func (s *selection) excluded(name string) bool { return s.ex.find(name) >= 0 }

// add selects pool[j] for sel's entry e, once.
func (s *selection) add(j int, e Entry) error {
	if s.used[j] {
		return nil
	}
	s.used[j] = true
	h := s.pool[j]
	if s.excluded(h.Name) {
		return nil
	}
	if e.Kind == Named {
		// A login given on either side holds; two that differ are
		// an error, not a choice.
		switch {
		case e.User != "" && h.User != "" && e.User != h.User:
			return fmt.Errorf("host %s is given user %s and user %s", quote(h.Name), quote(h.User), quote(e.User))
		case e.Port != 0 && h.Port != 0 && e.Port != h.Port:
			return fmt.Errorf("host %s is given port %d and port %d", quote(h.Name), h.Port, e.Port)
		}
		if h.User == "" {
			h.User = e.User
		}
		if h.Port == 0 {
			h.Port = e.Port
		}
	}
	if e.Kind == Named && e.SlotsGiven {
		if !h.SlotsFromCores && e.Slots > h.Slots {
			return fmt.Errorf("%s: the allocation gives host %s only %d slots", e.hostListItem(), quote(h.Name), h.Slots)
		}
		h.Slots, h.SlotsFromCores, h.SlotsGiven = e.Slots, false, true
	}
	s.out = append(s.out, h)
	return nil
}

// Union joins host lists that describe the same machines (the hostfiles of
// several application contexts, their --host lists): a host named in more
// than one is one host, with the most slots (and max_slots) any list gives
// it, since the lists name its slots, not more of them; a count given wins
// over a count from its cores. A user or port
// given in two lists must agree. Relative specs and exclusions are kept, in
// order, for Select.
func Union(lists ...[]Entry) ([]Entry, error) {
	var out []Entry
	var at hostIndex
	for _, list := range lists {
		for _, e := range list {
			if e.Kind != Named || e.Exclude {
				out = append(out, e)
				continue
			}
			i := at.find(e.Name)
			if i < 0 {
				at.add(e.Name, len(out))
				out = append(out, e)
				continue
			}
			a := &out[i]
			switch {
			case e.User != "" && a.User != "" && e.User != a.User:
				return nil, fmt.Errorf("host %s is given user %s and user %s", quote(a.Name), quote(a.User), quote(e.User))
			case e.Port != 0 && a.Port != 0 && e.Port != a.Port:
				return nil, fmt.Errorf("host %s is given port %d and port %d", quote(a.Name), a.Port, e.Port)
			}
			if a.User == "" {
				a.User = e.User
			}
			if a.Port == 0 {
				a.Port = e.Port
			}
			switch {
			case e.SlotsFromCores: // a count given elsewhere says more than "its cores"
			case a.SlotsFromCores:
				a.Slots, a.SlotsFromCores = e.Slots, false
			default:
				a.Slots = max(a.Slots, e.Slots)
			}
			a.SlotsGiven = a.SlotsGiven || e.SlotsGiven
			a.MaxSlots = max(a.MaxSlots, e.MaxSlots)
			if a.MaxSlots > 0 && !a.SlotsFromCores && a.Slots > a.MaxSlots {
				a.MaxSlots = a.Slots // one list's slots are more than another's max_slots
			}
		}
	}
	return out, nil
}
