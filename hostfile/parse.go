package hostfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseHostfile reads a hostfile in Open MPI/PRRTE syntax, one host a line:
//
//	[^][user@]host [slots=N] [max_slots=M] [port=P] [user=U]   # comment
//
// count= and cpu= are slots= (Open MPI's synonyms), max-slots= is
// max_slots=, "key = value" may have spaces around '='; '#' starts a
// comment anywhere; blank lines are skipped. host is a name, an IPv4
// address, or an IPv6 address bare (fe80::1) or in brackets ([::1]).
//
// Hydra's machinefile form "host:N" (mpiexec -f) is host slots=N: one
// colon and a count cannot be an IPv6 address, which has two or more.
//
// Slots follow PRRTE so that users' files mean what they meant there:
// a host on one line without slots= gets the node's core count
// (SlotsFromCores, resolved later from topology); max_slots= alone sets
// slots to the same value; a repeated host adds up its lines, a line
// without slots= counting one (and then SlotsGiven is set); max_slots are
// added when every line of the host has one, else the host has no cap.
// max_slots below slots is an error.
//
// "^host" excludes a host: it is removed from the file's own hosts wherever
// it appears, and the exclusion is also returned (Exclude set, after the
// hosts) so that a hostfile filtering a resource-manager allocation
// through Select drops it there too. "+nN" and "+e[:N]" lines are kept as
// relative entries for Select.
//
// Hosts come back in the order of their first line. Every error reads
// "NAME:LINE: what is wrong", naming the offending token.
func ParseHostfile(name string, r io.Reader) ([]Entry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	var p hostfileParser
	line := 0
	for sc.Scan() {
		line++
		if msg := p.line(sc.Text()); msg != "" {
			return nil, fmt.Errorf("%s:%d: %s", name, line, msg)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, line+1, maxLine)
		}
		return nil, fmt.Errorf("%s:%d: %s", name, line+1, oneLine(err.Error()))
	}
	return p.result(), nil
}

// hostAcc accumulates the lines of one host.
type hostAcc struct {
	Entry
	lines  int
	given  bool // some line had slots= or max_slots=
	allMax bool // every line had max_slots=
}

type hostfileParser struct {
	hosts    []*hostAcc // named hosts and relative entries, in order
	index    map[string]*hostAcc
	excl     []Entry
	exclKeys map[string]bool
}

// line parses one line and returns what is wrong with it, or "".
func (p *hostfileParser) line(text string) string {
	toks := tokens(stripComment(text))
	if len(toks) == 0 {
		return ""
	}
	first := toks[0]
	if strings.EqualFold(first, "rank") {
		return quote(first) + ": a rankfile line; give rankfiles with --rankfile"
	}
	if first[0] == '+' {
		return p.relative(toks)
	}
	e, colonSlots, msg := lineHost(first)
	if msg != "" {
		return msg
	}
	if e.Exclude {
		return p.exclude(e, toks)
	}
	attrs := toks[1:]
	if colonSlots != "" {
		attrs = append([]string{"slots=" + colonSlots}, attrs...) // slots= too: "given twice"
	}
	la, msg := lineAttrs(e, attrs)
	if msg != "" {
		return msg
	}
	return p.add(first, la)
}

// relative keeps a "+nN" or "+e[:N]" line for Select.
func (p *hostfileParser) relative(toks []string) string {
	first := toks[0]
	e, msg := parseRelative(first)
	if msg != "" {
		return quote(first) + ": " + msg
	}
	if len(toks) > 1 {
		return quote(toks[1]) + ": a relative node spec takes no attributes"
	}
	p.hosts = append(p.hosts, &hostAcc{Entry: e})
	return ""
}

// lineHost parses a line's first token, [^][user@]host or Hydra's host:N:
// the entry with its name, user and Exclude, and N if given.
func lineHost(first string) (e Entry, colonSlots, msg string) {
	exclude := first[0] == '^'
	hostTok := first
	if exclude {
		hostTok = first[1:]
	}
	e = Entry{Exclude: exclude}
	if user, host, ok := strings.Cut(hostTok, "@"); ok {
		if msg := checkUser(user); msg != "" {
			return e, "", quote(first) + ": " + msg
		}
		e.User, hostTok = user, host
	}
	if !exclude && hintColon(hostTok) { // Hydra's host:N
		i := strings.LastIndexByte(hostTok, ':')
		hostTok, colonSlots = hostTok[:i], hostTok[i+1:]
	}
	h, msg := checkHost(hostTok)
	if msg != "" {
		if hintColon(hostTok) {
			msg += " (slots are written slots=N)"
		}
		return e, "", quote(first) + ": " + msg
	}
	e.Name = h
	return e, colonSlots, ""
}

// exclude records a "^host" line, once per host.
func (p *hostfileParser) exclude(e Entry, toks []string) string {
	if len(toks) > 1 {
		return quote(toks[1]) + ": an excluded host takes no attributes"
	}
	if p.exclKeys == nil {
		p.exclKeys = map[string]bool{}
	}
	if k := hostKey(e.Name); !p.exclKeys[k] {
		p.exclKeys[k] = true
		p.excl = append(p.excl, e)
	}
	return ""
}

// hostLine is one host line parsed: its entry and which of slots= and
// max_slots= it gave.
type hostLine struct {
	Entry
	slotsSet, maxSet bool
}

// lineAttrs parses a host line's key=value attributes into e.
func lineAttrs(e Entry, attrs []string) (hostLine, string) {
	l := hostLine{Entry: e}
	var slotsTok, maxTok string
	for _, t := range attrs {
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			return l, quote(t) + ": expected key=value (slots=, max_slots=, port=)"
		}
		var msg string
		switch strings.ToLower(k) {
		case "slots", "count", "cpu":
			if l.slotsSet {
				return l, quote(t) + ": slots given twice on one line"
			}
			l.Slots, msg = number(v, maxCount)
			l.slotsSet, slotsTok = true, t
		case "max_slots", "max-slots":
			if l.maxSet {
				return l, quote(t) + ": max_slots given twice on one line"
			}
			l.MaxSlots, msg = number(v, maxCount)
			if msg == "" && l.MaxSlots == 0 {
				msg = "must be at least 1"
			}
			l.maxSet, maxTok = true, t
		case "port":
			if l.Port != 0 {
				return l, quote(t) + ": port given twice on one line"
			}
			l.Port, msg = number(v, maxPort)
			if msg == "" && l.Port == 0 {
				msg = "must be 1 to 65535"
			}
		case "user", "username":
			msg = checkUser(v)
			if msg == "" && l.User != "" && l.User != v {
				msg = "user already given as " + quote(l.User)
			}
			l.User = v
		default:
			msg = "unknown attribute (want slots=, max_slots=, port= or user=)"
		}
		if msg != "" {
			return l, quote(t) + ": " + msg
		}
	}
	if l.slotsSet && l.maxSet && l.MaxSlots < l.Slots {
		return l, quote(maxTok) + ": less than " + quote(slotsTok)
	}
	return l, ""
}

// add adds a host line to its host's lines (see ParseHostfile for how
// slots add up); first is the line's first token, for messages.
func (p *hostfileParser) add(first string, l hostLine) string {
	e := l.Entry
	slotsSet, maxSet := l.slotsSet, l.maxSet
	contrib := 1
	switch {
	case slotsSet:
		contrib = e.Slots
	case maxSet:
		contrib = e.MaxSlots
	}

	if p.index == nil {
		p.index = map[string]*hostAcc{}
	}
	key := hostKey(e.Name)
	a := p.index[key]
	if a == nil {
		a = &hostAcc{Entry: e, lines: 1, given: slotsSet || maxSet, allMax: maxSet}
		a.Slots = contrib
		p.index[key] = a
		p.hosts = append(p.hosts, a)
		return ""
	}
	if e.User != "" && a.User != "" && e.User != a.User {
		return quote(first) + ": host " + quote(a.Name) + " was given user " + quote(a.User)
	}
	if e.Port != 0 && a.Port != 0 && e.Port != a.Port {
		return quote(first) + ": host " + quote(a.Name) + " was given port " + strconv.Itoa(a.Port)
	}
	if a.Slots+contrib > maxTotal {
		return quote(first) + ": more than " + strconv.Itoa(maxTotal) + " slots in total"
	}
	if a.User == "" {
		a.User = e.User
	}
	if a.Port == 0 {
		a.Port = e.Port
	}
	a.lines++
	a.given = a.given || slotsSet || maxSet
	a.Slots += contrib
	if a.allMax && maxSet {
		a.MaxSlots += e.MaxSlots
	} else {
		a.allMax, a.MaxSlots = false, 0
	}
	return ""
}

// hintColon spots mpich's "host:N" machinefile syntax.
func hintColon(s string) bool {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || strings.Count(s, ":") != 1 {
		return false
	}
	_, msg := number(s[i+1:], maxTotal)
	return msg == ""
}

func (p *hostfileParser) result() []Entry {
	excl := indexOf(p.excl)
	out := []Entry{}
	for _, a := range p.hosts {
		e := a.Entry
		if e.Kind == Named {
			if excl.find(e.Name) >= 0 {
				continue
			}
			if a.lines == 1 && !a.given {
				e.Slots, e.SlotsFromCores = 0, true
			} else {
				e.SlotsGiven = true
			}
		}
		out = append(out, e)
	}
	return append(out, p.excl...)
}

// indexOf indexes entries by name, in order.
func indexOf(es []Entry) *hostIndex {
	x := &hostIndex{}
	for i, e := range es {
		x.add(e.Name, i)
	}
	return x
}

// parseRelative reads PRRTE's relative node specs: "+nN" (the N-th node of
// the allocation) and "+e" / "+e:N" (empty nodes, all or N of them).
func parseRelative(s string) (Entry, string) {
	body := s[1:]
	if body == "" {
		return Entry{}, "relative node spec is +nN, +e or +e:N"
	}
	switch body[0] {
	case 'n', 'N':
		n, msg := number(body[1:], maxNodes)
		if msg != "" {
			return Entry{}, "node index: " + msg
		}
		return Entry{Kind: RelNode, Index: n}, ""
	case 'e', 'E':
		rest := body[1:]
		if rest == "" {
			return Entry{Kind: RelEmpty}, ""
		}
		if rest[0] != ':' {
			return Entry{}, "relative node spec is +nN, +e or +e:N"
		}
		n, msg := number(rest[1:], maxNodes)
		if msg != "" {
			return Entry{}, "empty-node count: " + msg
		}
		if n == 0 {
			return Entry{}, "empty-node count must be at least 1"
		}
		return Entry{Kind: RelEmpty, Count: n}, ""
	}
	return Entry{}, "relative node spec is +nN, +e or +e:N"
}

// String writes the entry as a hostfile line that parses back to it.
func (e Entry) String() string {
	switch e.Kind {
	case RelNode, RelEmpty:
		return e.hostListItem()
	}
	var b strings.Builder
	if e.Exclude {
		b.WriteByte('^')
	}
	if e.User != "" {
		b.WriteString(e.User)
		b.WriteByte('@')
	}
	b.WriteString(bracket(e.Name))
	if e.Exclude {
		return b.String()
	}
	if !e.SlotsFromCores {
		fmt.Fprintf(&b, " slots=%d", e.Slots)
	}
	if e.MaxSlots > 0 {
		fmt.Fprintf(&b, " max_slots=%d", e.MaxSlots)
	}
	if e.Port > 0 {
		fmt.Fprintf(&b, " port=%d", e.Port)
	}
	return b.String()
}
