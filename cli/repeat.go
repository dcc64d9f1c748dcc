package cli

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"prun/jobspec"
)

// A placement option given twice must say the same thing both times. pflag
// keeps a single-valued flag's last value, so `--map-by node --map-by slot`
// mapped by slot, silently; PRRTE refuses a policy redefined. Here a value
// that differs from the option's first is a usage error naming both
// ("--map-by slot conflicts with --map-by node"); a value that says the
// same, however spelled (`--map-by node --map-by NODE`, `-N 2 --npernode
// 2`), is harmless. The placement options are global (a later context's
// are refused), except --host and --hostfile: a later application
// context's own are that context's (perContextHosts), not repeats, but a
// context's --hostfile given twice differently is a conflict too. The list
// options (--host, --add-host, --display) add up. Open MPI's launcher
// parameters and Hydra's variables only fill in what the command line
// left unset, so they never repeat it. An older spelling that contradicts
// the policy it is applied over (`--map-by node --byslot`) is ApplyCompat's
// conflict, which resolve names by its source.

// givenValue is one value given to a single-valued placement option: key
// names the option (the flags that share a variable share a key), flag the
// spelling used, value the value as given.
type givenValue struct{ key, flag, value string }

// spelling is how messages write flag: mpirun's options with two dashes,
// Hydra's with one, as their other messages do.
func spelling(flag string) string {
	switch flag {
	case "ppn", "rmk", "order-nodes", "localhost", "membind", "f", "N":
		return "-" + flag
	case "hydra-machinefile":
		return "-f"
	}
	return "--" + flag
}

func (g givenValue) String() string { return spelling(g.flag) + " " + g.value }

// onceString is a single-valued string flag that also records every value
// it is given in *given.
type onceString struct {
	key, flag string
	p         *string
	given     *[]givenValue
}

func (o onceString) String() string { return *o.p }
func (o onceString) Type() string   { return "string" }
func (o onceString) Set(s string) error {
	*o.p = s
	*o.given = append(*o.given, givenValue{o.key, o.flag, s})
	return nil
}

// onceInt is onceString's int flag.
type onceInt struct {
	key, flag string
	p         *int
	given     *[]givenValue
}

func (o onceInt) String() string { return strconv.Itoa(*o.p) }
func (o onceInt) Type() string   { return "int" }
func (o onceInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 0) // as pflag's own int flags
	if err != nil {
		return err
	}
	*o.p = int(n)
	*o.given = append(*o.given, givenValue{o.key, o.flag, strconv.Itoa(*o.p)})
	return nil
}

// stringOnce defines a single-valued string flag whose values given land
// in *given under key.
func stringOnce(fs *pflag.FlagSet, given *[]givenValue, p *string, key, name, short, usage string) {
	fs.VarP(onceString{key, name, p, given}, name, short, usage)
}

// intOnce is stringOnce's int flag.
func intOnce(fs *pflag.FlagSet, given *[]givenValue, p *int, key, name, short, usage string) {
	fs.VarP(onceInt{key, name, p, given}, name, short, usage)
}

// sameValue says whether two values of the option key say the same thing:
// the placement policies parsed (a value that does not parse is an error
// of its own, with the parser's message), files as paths, Hydra's words
// regardless of case, the rest as given.
func sameValue(key, a, b string) (bool, error) {
	var parse func(string) (string, error)
	switch key {
	case "map-by":
		parse = func(s string) (string, error) { p, err := jobspec.ParseMapBy(s); return p.String(), err }
	case "cpu-set":
		parse = func(s string) (string, error) { p, err := jobspec.ParseMapBy("pe-list=" + s); return p.String(), err }
	case "ppr":
		parse = func(s string) (string, error) { p, err := jobspec.ParseMapBy("ppr:" + s); return p.String(), err }
	case "rank-by":
		parse = func(s string) (string, error) { p, err := jobspec.ParseRankBy(s); return p.String(), err }
	case "bind-to":
		parse = func(s string) (string, error) { p, err := jobspec.ParseBindTo(s); return p.String(), err }
	case "membind":
		parse = func(s string) (string, error) { p, err := jobspec.ParseMemBind(s); return p.String(), err }
	case "hostfile", "rankfile", "default-hostfile":
		return filepath.Clean(a) == filepath.Clean(b), nil
	case "rmk", "order-nodes", "localhost":
		return strings.EqualFold(a, b), nil
	default:
		return a == b, nil
	}
	pa, err := parse(a)
	if err != nil {
		return false, err
	}
	pb, err := parse(b)
	if err != nil {
		return false, err
	}
	return pa == pb, nil
}

// checkRepeats fails on the first value of given that differs from the
// option's first value; where names the application context, if any.
func checkRepeats(given []givenValue, where string) error {
	first := map[string]givenValue{}
	for _, g := range given {
		f, seen := first[g.key]
		if !seen {
			first[g.key] = g
			continue
		}
		same, err := sameValue(g.key, f.value, g.value)
		if err != nil {
			return usagef("%v", err) // the parser's message names the option and the value
		}
		if !same {
			return usagef("%s conflicts with %s%s", g, f, where)
		}
	}
	return nil
}
