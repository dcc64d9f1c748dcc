package hostfile

import (
	"strings"
	"testing"
)

// sameHost is the matching rule hostIndex implements, written plainly: the
// same key, or (neither an address) a short name against that name with a
// domain.
func sameHost(a, b string) bool {
	ka, kb := hostKey(a), hostKey(b)
	if ka == kb {
		return true
	}
	if isAddr(a) || isAddr(b) {
		return false
	}
	da, db := strings.IndexByte(ka, '.'), strings.IndexByte(kb, '.')
	switch {
	case da < 0 && db >= 0:
		return ka == kb[:db]
	case db < 0 && da >= 0:
		return kb == ka[:da]
	}
	return false
}

var trickyNames = []string{
	"n1", "N1", "n1.a", "n1.b", "N1.A", "n2", "n2.a", "n1x", "a", "a.n1",
	"::1", "0::1", "0:0::1", "10.0.0.1", "10", "10.0", "fe80::1%eth0", "fe80::1",
	"1.2.3.4", "1", "1.2", "my_node", "my_node.x",
}

// hostIndex.find answers what a scan with sameHost would: an exact key
// first, else the first match.
func TestHostIndexMatchesSameHost(t *testing.T) {
	for _, want := range [][]string{trickyNames, reversed(trickyNames), trickyNames[5:], trickyNames[:7]} {
		var x hostIndex
		for i, n := range want {
			x.add(n, i)
		}
		for _, q := range trickyNames {
			exp := -1
			for i, n := range want {
				if hostKey(n) == hostKey(q) {
					exp = i
					break
				}
			}
			if exp < 0 {
				for i, n := range want {
					if sameHost(n, q) {
						exp = i
						break
					}
				}
			}
			if got := x.find(q); got != exp {
				t.Errorf("list %q: find(%q) = %d, want %d", want, q, got, exp)
			}
		}
	}
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestSameHost(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"n1", "n1", true},
		{"n1", "N1", true},
		{"n1", "n1.cluster", true},
		{"n1.cluster", "n1", true},
		{"n1.a", "n1.b", false},
		{"n1", "n10", false},
		{"::1", "0::1", true},
		{"::1", "::2", false},
		{"10.0.0.1", "10", false},
		{"10", "10.0.0.1", false},
	}
	for _, tc := range tests {
		if got := sameHost(tc.a, tc.b); got != tc.want {
			t.Errorf("sameHost(%q, %q) = %v", tc.a, tc.b, got)
		}
		var x hostIndex
		x.add(tc.a, 0)
		if got := x.find(tc.b) == 0; got != tc.want {
			t.Errorf("index of %q finds %q: %v", tc.a, tc.b, got)
		}
	}
}

func TestCheckHost(t *testing.T) {
	ok := []struct{ in, want string }{
		{"node01", "node01"}, {"a-b_c.d", "a-b_c.d"}, {"1.2.3.4", "1.2.3.4"},
		{"::1", "::1"}, {"[::1]", "::1"}, {"fe80::1%eth0", "fe80::1%eth0"},
		{"::ffff:1.2.3.4", "::ffff:1.2.3.4"}, {strings.Repeat("a", 63), strings.Repeat("a", 63)},
	}
	for _, tc := range ok {
		if got, msg := checkHost(tc.in); msg != "" || got != tc.want {
			t.Errorf("checkHost(%q) = %q, %q", tc.in, got, msg)
		}
	}
	bad := []struct{ in, want string }{
		{"", "empty host name"},
		{"a.", "empty label in host name"},
		{".a", "empty label in host name"},
		{strings.Repeat("a", 64), "host name label longer than 63 bytes"},
		{strings.Repeat("a.", 127), "host name longer than 253 bytes"},
		{"-a", "host name starts with '-'"},
		{"a b", "not a host name or address"},
		{"é", "not a host name or address"},
		{"[", "unclosed [ in an IPv6 address"},
		{"[]", "not an IPv6 address in brackets"},
		{"1:2", "not a host name or address"},
		{"fe80::1%", "not a host name or address"},
		{"fe80::1%a/b", "not a host name or address"},
	}
	for _, tc := range bad {
		if _, msg := checkHost(tc.in); msg != tc.want {
			t.Errorf("checkHost(%q) = %q, want %q", tc.in, msg, tc.want)
		}
	}
}

func TestQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"", `""`},
		{"a b", `"a b"`},
		{"a\nb", `"a\nb"`},
		{"\xff", `"\xff"`},
		{"a\u2028b", `"a\u2028b"`},
		{"a\u0085b", `"a\u0085b"`},
		{"ünï", "ünï"},
		{strings.Repeat("x", 70), strings.Repeat("x", 64) + "..."},
	}
	for _, tc := range tests {
		if got := quote(tc.in); got != tc.want {
			t.Errorf("quote(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
