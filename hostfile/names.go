package hostfile

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits. They bound what a typo or a hostile file can make prun allocate;
// real clusters stay far below them.
const (
	maxCount  = 1_000_000 // one slots=/:N/task count
	maxTotal  = 1 << 30   // slots of one host after repeats add up
	maxPort   = 65535
	maxLine   = 1 << 20 // bytes in one hostfile or rankfile line
	maxNodes  = 1 << 17 // nodes of one allocation (Slurm nodelist, +nN, +e:N)
	maxDigits = 9       // digits of a nodelist range bound
	maxCPU    = 8191    // highest CPU, core or package number in a rankfile (Linux's NR_CPUS tops out at 8192)
	maxRank   = 1<<31 - 1
	// processors listed in one rankfile: each line may list 8192, and a
	// few bytes must not become gigabytes
	maxRankfileCPUs = 1 << 24
	maxErrToken     = 64 // bytes of a token quoted in an error
	maxHostBytes    = 253
)

// quote renders a token the user wrote for an error message: as written
// when it is plain, Go-quoted when it holds spaces, control characters or
// invalid UTF-8, so that every error stays on one line and shows the token
// exactly; a long token is cut.
func quote(s string) string {
	cut := len(s) > maxErrToken
	if cut {
		s = s[:maxErrToken]
	}
	plain := s != "" && utf8.ValidString(s)
	if plain {
		for _, r := range s {
			if !unicode.IsGraphic(r) || unicode.IsSpace(r) || !strconv.IsPrint(r) {
				plain = false
				break
			}
		}
	}
	if !plain {
		s = strconv.Quote(s)
	}
	if cut {
		s += "..."
	}
	return s
}

// oneLine keeps an error text from elsewhere (an I/O error) on one line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || !strconv.IsPrint(r) && r != ' ' {
			return ' '
		}
		return r
	}, s)
}

// checkHost validates one host as written (without ^, + or user@) and
// returns its name with IPv6 brackets removed, or what is wrong with it.
// Addresses are checked as addresses, names as DNS names (letters, digits,
// '-', '_', dot-separated labels) so that a stray separator or a mpich-style
// "host:4" is reported rather than taken for a host that never resolves.
func checkHost(s string) (string, string) {
	switch {
	case s == "":
		return "", "empty host name"
	case s[0] == '[':
		if len(s) < 2 || s[len(s)-1] != ']' {
			return "", "unclosed [ in an IPv6 address"
		}
		in := s[1 : len(s)-1]
		if !isIPv6(in) {
			return "", "not an IPv6 address in brackets"
		}
		return in, ""
	case strings.ContainsRune(s, ':'):
		if !isIPv6(s) {
			return "", "not a host name or address"
		}
		return s, ""
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return s, ""
	}
	if len(s) > maxHostBytes {
		return "", "host name longer than 253 bytes"
	}
	if s[0] == '-' {
		return "", "host name starts with '-'"
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return "", "empty label in host name"
		}
		if len(label) > 63 {
			return "", "host name label longer than 63 bytes"
		}
		for i := 0; i < len(label); i++ {
			if !nameByte(label[i]) {
				return "", "not a host name or address"
			}
		}
	}
	return s, ""
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// isIPv6 accepts an IPv6 literal, with a zone made of host-name characters
// (fe80::1%eth0); IPv4 is not IPv6 here even when it parses.
func isIPv6(s string) bool {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return false
	}
	if z := a.Zone(); z != "" {
		for i := 0; i < len(z); i++ {
			if !nameByte(z[i]) && z[i] != '.' {
				return false
			}
		}
	}
	return true
}

// checkUser validates the user of user@host: a login name, nothing that
// could be taken for an ssh option.
func checkUser(s string) string {
	if s == "" {
		return "empty user name"
	}
	if s[0] == '-' {
		return "user name starts with '-'"
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) && s[i] != '.' {
			return "not a user name"
		}
	}
	return ""
}

// hostKey is the identity of a host within one list: names compare
// case-insensitively (DNS does) and addresses by value (::1 is 0::1).
func hostKey(name string) string {
	if a, err := netip.ParseAddr(name); err == nil {
		return a.String()
	}
	return strings.ToLower(name)
}

// hostIndex finds a host across lists the way PRRTE matches nodes: by key,
// or a short name against the same name qualified by a domain, because
// Slurm says "node01" where a hostfile says "node01.cluster". An exact
// match wins; otherwise the first added host that matches. Maps, not a
// scan, so that selecting from thousands of nodes stays linear.
type hostIndex struct {
	exact   map[string]int // hostKey -> first position
	byLabel map[string]int // first label of a qualified name -> first position
}

func (x *hostIndex) add(name string, pos int) {
	if x.exact == nil {
		x.exact, x.byLabel = map[string]int{}, map[string]int{}
	}
	k := hostKey(name)
	if _, ok := x.exact[k]; !ok {
		x.exact[k] = pos
	}
	if isAddr(name) {
		return
	}
	if d := strings.IndexByte(k, '.'); d >= 0 {
		if _, ok := x.byLabel[k[:d]]; !ok {
			x.byLabel[k[:d]] = pos
		}
	}
}

// find returns the position of the host name denotes, or -1.
func (x *hostIndex) find(name string) int {
	k := hostKey(name)
	if i, ok := x.exact[k]; ok {
		return i
	}
	if isAddr(name) {
		return -1
	}
	if d := strings.IndexByte(k, '.'); d >= 0 {
		// a qualified name finds the host known by its short name
		if i, ok := x.exact[k[:d]]; ok && !isAddr(k[:d]) {
			return i
		}
		return -1
	}
	if i, ok := x.byLabel[k]; ok {
		return i
	}
	return -1
}

func isAddr(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// bracket writes a host for the syntaxes where a bare IPv6 address would be
// ambiguous with a ":N" suffix.
func bracket(name string) string {
	if strings.ContainsRune(name, ':') {
		return "[" + name + "]"
	}
	return name
}

// number parses a count the user wrote: decimal digits only (no sign, no
// spaces), at most max. It returns what is wrong otherwise.
func number(s string, max int) (int, string) {
	if s == "" {
		return 0, "missing number"
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, "not a number"
		}
		n = n*10 + int(c-'0')
		if n > max {
			return 0, "too large (at most " + strconv.Itoa(max) + ")"
		}
	}
	return n, ""
}

// tokens splits a hostfile or rankfile line at white space, gluing "key",
// "=" and "value" back together so that "slots = 4" reads like "slots=4"
// (PRRTE's lexer allows both).
func tokens(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		if n := len(out); n > 0 && (f[0] == '=' || strings.HasSuffix(out[n-1], "=")) {
			out[n-1] += f
			continue
		}
		out = append(out, f)
	}
	return out
}

// stripComment cuts a line at '#': comments may follow a host.
func stripComment(s string) string {
	if i := strings.IndexByte(s, '#'); i >= 0 {
		return s[:i]
	}
	return s
}
