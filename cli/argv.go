// Splitting a command line into contexts and reading each with its flag set: mpirun's single-dash and two-valued spellings, and errors that suggest a flag.

package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// splitContexts cuts the command line at every lone ":".
func splitContexts(args []string) [][]string {
	segs := [][]string{{}}
	for _, a := range args {
		if a == ":" {
			segs = append(segs, []string{})
			continue
		}
		segs[len(segs)-1] = append(segs[len(segs)-1], a)
	}
	return segs
}

// parseFlags parses the flags at the front of one context and returns the
// program and its arguments.
func parseFlags(fs *pflag.FlagSet, seg []string, globalsGo string) ([]string, error) {
	seg, err := normalize(fs, seg)
	if err != nil {
		return nil, err
	}
	if err := fs.Parse(seg); err != nil {
		return nil, flagError(fs, err, globalsGo)
	}
	return fs.Args(), nil
}

// normalize rewrites mpirun's single-dash long options (-np 4, -wdir d,
// -tag-output) to pflag's double-dash form, and its two-valued --mca KEY
// VALUE to --mca KEY=VALUE, but only in the flag region before the program:
// the program's own arguments are never touched.
func normalize(fs *pflag.FlagSet, seg []string) ([]string, error) {
	out := make([]string, 0, len(seg))
	for i := 0; i < len(seg); i++ {
		t := seg[i]
		if t == "--" || !strings.HasPrefix(t, "-") || t == "-" {
			return append(out, seg[i:]...), nil
		}
		name, hasVal := t, false
		if j := strings.IndexByte(t, '='); j >= 0 {
			name, hasVal = t[:j], true
		}
		long := strings.HasPrefix(name, "--")
		bare := strings.TrimLeft(name, "-")
		if !long && len(bare) > 1 && fs.Lookup(bare) != nil {
			t = "-" + t
			long = true
		}
		if !long && len(bare) > 1 {
			// pflag would read -launcher as -l -a -u...; only a shorthand
			// with its value attached (-n4, -xFOO=1) is such a word.
			// (-nameserver is no -n with "ameserver" attached.)
			sf := fs.ShorthandLookup(bare[:1])
			if _, err := strconv.Atoi(bare[1:]); sf == nil || sf.NoOptDefVal != "" || sf.Value.Type() == "bool" ||
				sf.Value.Type() == "int" && err != nil {
				if sg := suggest(bare); sg != "" && len(bare) > 2 {
					return nil, usagef("unknown flag %s (did you mean --%s?)", name, sg)
				}
				return nil, usagef("unknown flag %s", name)
			}
		}
		out = append(out, t)
		// Skip over a separate value so that it is not mistaken for a flag.
		var f *pflag.Flag
		if long {
			f = fs.Lookup(bare)
		} else if len(bare) == 1 {
			f = fs.ShorthandLookup(bare)
		}
		var rule keyRule
		if f != nil {
			rule = twoValued[f.Name]
		}
		if rule.valid != nil {
			if hasVal || i+2 >= len(seg) {
				return nil, usagef("--%s needs a KEY and a VALUE: --%s KEY VALUE", f.Name, f.Name)
			}
			key, value := seg[i+1], seg[i+2]
			if looksLikeFlag(fs, value) {
				return nil, usagef("--%s %s: no VALUE before %s (--%s KEY VALUE)", f.Name, key, value, f.Name)
			}
			if !rule.valid(key) {
				return nil, usagef("--%s %s %s: %q is not %s", f.Name, key, value, key, rule.what)
			}
			out = append(out, key+"="+value)
			i += 2
			continue
		}
		if f != nil && !hasVal && f.NoOptDefVal == "" && i+1 < len(seg) {
			i++
			out = append(out, seg[i])
		}
	}
	return out, nil
}

// clearValue is a flag that sets a bool false where it appears: the last of
// a --enable-X/--disable-X pair given wins.
type clearValue struct{ p *bool }

func (c clearValue) String() string { return "false" }

func (c clearValue) Type() string { return "bool" }

func (c clearValue) IsBoolFlag() bool { return true }

func (c clearValue) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err == nil && v {
		*c.p = false
	}
	return err
}

// appendValue is a repeatable flag whose values several flags share, in
// command-line order (pflag's string arrays restart on a flag's first use).
type appendValue struct{ p *[]string }

func (a appendValue) String() string { return "" }

func (a appendValue) Type() string { return "stringArray" }

func (a appendValue) Set(s string) error { *a.p = append(*a.p, s); return nil }

// listValue appends each name of a comma-separated list, as -x NAME would.
type listValue struct{ p *[]string }

func (l listValue) String() string { return "" }

func (l listValue) Type() string { return "stringArray" }

func (l listValue) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if !validEnvName(v) {
			return fmt.Errorf("%q is not a valid environment variable name", v)
		}
		*l.p = append(*l.p, v)
	}
	return nil
}

// keyRule says what the KEY of a two-valued flag may be.
type keyRule struct {
	valid func(string) bool
	what  string
}

var (
	paramKey = keyRule{isParamName, "a parameter name (letters, digits and _)"}
	envKey   = keyRule{validEnvName, "a valid environment variable name"}
)

// twoValued are the flags that take two arguments, like mpirun's --mca.
var twoValued = map[string]keyRule{"mca": paramKey, "gmca": paramKey, "pmixmca": paramKey, "prtemca": paramKey, "genv": envKey, "env": envKey}

// looksLikeFlag reports whether s is one of prun's flags (a value such as
// -1 is not).
func looksLikeFlag(fs *pflag.FlagSet, s string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(s, "-"), "=")
	if !strings.HasPrefix(s, "-") || name == "" {
		return false
	}
	return fs.Lookup(name) != nil || len(name) == 1 && fs.ShorthandLookup(name) != nil
}

// isParamName reports whether s can be an MCA parameter's name.
func isParamName(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return s != ""
}

func flagError(fs *pflag.FlagSet, err error, globalsGo string) error {
	msg := err.Error()
	const unknown = "unknown flag: "
	const unknownShort = "unknown shorthand flag: "
	switch {
	case strings.HasPrefix(msg, unknown):
		name := strings.TrimPrefix(msg, unknown)
		if globalsGo != "" && FlagSet().Lookup(strings.TrimLeft(name, "-")) != nil {
			return usagef("%s is a global option: give it %s", name, globalsGo)
		}
		if s := suggest(strings.TrimLeft(name, "-")); s != "" {
			return usagef("unknown flag %s (did you mean --%s?)", name, s)
		}
		return usagef("unknown flag %s", name)
	case strings.HasPrefix(msg, unknownShort):
		return usagef("unknown flag %s", strings.TrimPrefix(msg, unknownShort))
	}
	// pflag's own message quotes strconv's ("strconv.ParseInt: parsing...").
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) {
		switch bad.GetFlag().Value.Type() {
		case "int":
			return usagef("--%s %s: want a whole number", bad.GetFlag().Name, strconv.Quote(bad.GetValue()))
		case "bool":
			return usagef("--%s=%s: want true or false", bad.GetFlag().Name, bad.GetValue())
		}
		return usagef("--%s %s: %v", bad.GetFlag().Name, strconv.Quote(bad.GetValue()), errors.Unwrap(bad))
	}
	return usagef("%s", msg)
}

// suggest names the known flag closest to a misspelt one, as cobra does for
// subcommands.
func suggest(name string) string {
	best, bestD := "", 3
	FlagSet().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := levenshtein(name, f.Name)
		if d < bestD || (strings.HasPrefix(f.Name, name) && len(name) >= 3 && bestD > 0) {
			best, bestD = f.Name, d
			if strings.HasPrefix(f.Name, name) {
				bestD = 0
			}
		}
	})
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
