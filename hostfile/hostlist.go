package hostfile

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseHostList reads the value of --host (-H) in Open MPI/PRRTE syntax: a
// comma-separated list of
//
//	[^][user@]host[:N|:*]   +nN   +e[:N]
//
// ":N" gives N slots and no suffix one, as in Open MPI (a host named on the
// command line is one process unless said otherwise); ":*" asks for the
// node's core count (SlotsFromCores). An IPv6 address with a suffix goes in
// brackets ([::1]:2); a bare one (fe80::1) has no suffix. A repeated host
// adds up its slots (-H a,a is two slots on a). "^host" excludes a host;
// "+nN" and "+e[:N]" are the relative node specs that Select resolves
// against a hostfile or resource-manager allocation. Several --host flags
// are joined with ',' by the caller.
//
// Errors read "--host: TOKEN: what is wrong".
func ParseHostList(spec string) ([]Entry, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("--host: no hosts given")
	}
	var out []Entry
	index := map[string]int{}
	for _, item := range strings.Split(spec, ",") {
		e, msg := parseHostItem(item)
		if msg != "" {
			return nil, fmt.Errorf("--host: %s: %s", quote(item), msg)
		}
		if e.Kind != Named || e.Exclude {
			out = append(out, e)
			continue
		}
		key := hostKey(e.Name)
		i, seen := index[key]
		if !seen {
			index[key] = len(out)
			out = append(out, e)
			continue
		}
		a := &out[i]
		switch {
		case a.SlotsFromCores || e.SlotsFromCores:
			return nil, fmt.Errorf("--host: %s: host %s is named twice and one of them has :*", quote(item), quote(a.Name))
		case e.User != "" && a.User != "" && e.User != a.User:
			return nil, fmt.Errorf("--host: %s: host %s was given user %s", quote(item), quote(a.Name), quote(a.User))
		case a.Slots+e.Slots > maxTotal:
			return nil, fmt.Errorf("--host: %s: more than %d slots in total", quote(item), maxTotal)
		}
		if a.User == "" {
			a.User = e.User
		}
		a.Slots += e.Slots
		a.SlotsGiven = true
	}
	return out, nil
}

// parseHostItem reads one element of --host and returns what is wrong with
// it, or "".
func parseHostItem(item string) (Entry, string) {
	s := strings.TrimSpace(item)
	if s == "" {
		return Entry{}, "empty host name"
	}
	if s[0] == '+' {
		return parseRelative(s)
	}
	e := Entry{Slots: 1}
	if s[0] == '^' {
		e.Exclude = true
		s = s[1:]
		if s != "" && s[0] == '+' {
			return Entry{}, "a relative node spec cannot be excluded"
		}
	}
	if user, host, ok := strings.Cut(s, "@"); ok {
		if msg := checkUser(user); msg != "" {
			return Entry{}, msg
		}
		e.User, s = user, host
	}
	host, suffix := s, ""
	hasSuffix := false
	switch {
	case strings.HasPrefix(s, "["):
		j := strings.IndexByte(s, ']')
		if j < 0 {
			return Entry{}, "unclosed [ in an IPv6 address"
		}
		host, suffix = s[:j+1], s[j+1:]
		if suffix != "" {
			if suffix[0] != ':' {
				return Entry{}, "expected :N or :* after ]"
			}
			suffix, hasSuffix = suffix[1:], true
		}
	case strings.Count(s, ":") > 1:
		// a bare IPv6 address; with a slot count it would be ambiguous
		if !isIPv6(s) {
			return Entry{}, "not a host name or address (write an IPv6 address with slots as [addr]:N)"
		}
	default:
		host, suffix, hasSuffix = strings.Cut(s, ":")
	}
	name, msg := checkHost(host)
	if msg != "" {
		return Entry{}, msg
	}
	e.Name = name
	if hasSuffix {
		if e.Exclude {
			return Entry{}, "an excluded host takes no slot count"
		}
		if suffix == "*" {
			e.Slots, e.SlotsFromCores = 0, true
		} else {
			n, msg := number(suffix, maxCount)
			if msg != "" {
				return Entry{}, "slot count " + quote(suffix) + ": " + msg
			}
			if n == 0 {
				return Entry{}, "slot count must be at least 1"
			}
			e.Slots, e.SlotsGiven = n, true
		}
	}
	if e.Exclude {
		e.Slots = 0
	}
	return e, ""
}

// FormatHostList writes entries in --host syntax; ParseHostList reads the
// result back to the same entries. Hostfile-only attributes (port,
// max_slots) have no --host spelling and are dropped.
func FormatHostList(entries []Entry) string {
	items := make([]string, len(entries))
	for i, e := range entries {
		items[i] = e.hostListItem()
	}
	return strings.Join(items, ",")
}

func (e Entry) hostListItem() string {
	switch e.Kind {
	case RelNode:
		return "+n" + strconv.Itoa(e.Index)
	case RelEmpty:
		if e.Count > 0 {
			return "+e:" + strconv.Itoa(e.Count)
		}
		return "+e"
	}
	s := bracket(e.Name)
	if e.User != "" {
		s = e.User + "@" + s
	}
	switch {
	case e.Exclude:
		return "^" + s
	case e.SlotsFromCores:
		return s + ":*"
	case e.SlotsGiven || e.Slots != 1:
		return s + ":" + strconv.Itoa(e.Slots)
	}
	return s
}
