package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"prun/hostfile"
)

// Completion of prun's command lines (cobra's __complete, behind the bash
// and zsh scripts of `prun completion`). prun parses its own flags, so
// cobra knows none of them: complete does what the parser does, reading
// the words before the cursor as parse reads them (contexts at ':', a
// program ends a context's options), and offers flags, their values, or
// nothing of its own once the program is named (the shell's files).

// valueWords are the values offered for a flag; a word ending in ':' or
// '=' takes more after it (no space). TestCompletionValuesParse checks
// that each is what the flag's parser accepts.
var valueWords = map[string][]string{
	"map-by":  {"slot", "hwthread", "core", "l1cache", "l2cache", "l3cache", "numa", "package", "node", "seq", "ppr:", "rankfile", "pe-list="},
	"rank-by": {"slot", "node", "fill", "span", "hwthread", "core", "l1cache", "l2cache", "l3cache", "numa", "package"},
	"bind-to": {"none", "hwthread", "core", "l1cache", "l2cache", "l3cache", "numa", "package"},
	"output":  {"tag", "tag-detailed", "rank", "timestamp", "merge-stderr-to-stdout", "json", "xml", "ordered", "dir=", "file="},
	"display": {"map", "map:json", "allocation", "topo", "rank-map"},
	"stdin":   {"0", "all", "none"},
	"pmi":     {"auto", "pmix", "pmi1", "pmi2", "none"},
	"pty":     {"true", "false"},
	"rmk":     {"slurm", "pbs", "lsf", "user"},
	"membind": {"firsttouch", "bind", "interleave"},

	"order-nodes": {"ascending", "descending"},
}

// qualifierWords follow a policy after ':'.
var qualifierWords = map[string][]string{
	"map-by":  {"PE=", "SPAN", "OVERSUBSCRIBE", "NOOVERSUBSCRIBE", "NOLOCAL", "HWTCPUS"},
	"rank-by": {"span", "fill"},
	"bind-to": {"overload-allowed", "if-supported", "REPORT"},
}

// listFlags take comma-separated lists: each item is completed.
var listFlags = map[string]bool{"output": true, "display": true, "host": true, "add-host": true}

// fileFlags complete file names; dirFlags directories.
var (
	fileFlags = map[string]bool{"hostfile": true, "machinefile": true, "default-hostfile": true, "rankfile": true, "app": true,
		"tune": true, "am": true, "report": true, "preload-files": true, "topology": true, "hydra-machinefile": true,
		"configfile": true, "rf": true}
	dirFlags = map[string]bool{"wdir": true, "prefix": true, "output-filename": true}
)

// complete answers cobra's __complete for the words before the cursor
// (args) and the word under it (toComplete).
func complete(args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	ctxStart := 0
	for i, a := range args {
		if a == ":" {
			ctxStart = i + 1
		}
	}
	var fs *pflag.FlagSet
	if ctxStart == 0 {
		fs = FlagSet()
	} else {
		fs = newFlagSet(nil, &contextOpts{})
	}
	words := args[ctxStart:]
	var pending *pflag.Flag // a flag whose value is the word under the cursor
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "--" || !strings.HasPrefix(w, "-") || w == "-" {
			return nil, cobra.ShellCompDirectiveDefault // the program and its arguments
		}
		name, _, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
		f := lookupFlag(fs, name)
		if f == nil || hasVal {
			continue
		}
		if _, two := twoValued[f.Name]; two {
			i += 2 // KEY VALUE
			if i >= len(words) {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			continue
		}
		if f.NoOptDefVal != "" || f.Value.Type() == "bool" {
			continue
		}
		if i == len(words)-1 {
			pending = f
		}
		i++
	}
	if pending != nil {
		return completeValue(pending, args, toComplete)
	}
	if strings.HasPrefix(toComplete, "-") {
		if name, val, ok := strings.Cut(toComplete, "="); ok {
			// The value alone: cobra's scripts put "--flag=" back in
			// front of each candidate themselves (bash completes the
			// word after the '=', zsh and fish add it as a prefix).
			if f := lookupFlag(fs, strings.TrimLeft(name, "-")); f != nil {
				return completeValue(f, args, val)
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeFlags(fs, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveDefault // the program
}

// lookupFlag finds a flag by long name or shorthand, as normalize does.
func lookupFlag(fs *pflag.FlagSet, name string) *pflag.Flag {
	if f := fs.Lookup(name); f != nil {
		return f
	}
	if len(name) == 1 {
		return fs.ShorthandLookup(name)
	}
	return nil
}

// completeFlags offers the visible flags that begin with what was typed,
// in the dashes typed (mpirun's single-dash long options too), each with
// its usage's first clause as the description (firstClause).
func completeFlags(fs *pflag.FlagSet, typed string) []string {
	dashes := "--"
	if !strings.HasPrefix(typed, "--") {
		dashes = "-"
	}
	prefix := strings.TrimLeft(typed, "-")
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		_, usage := pflag.UnquoteUsage(f)
		usage = firstClause(usage)
		if typed == "-" && f.Shorthand != "" {
			out = append(out, "-"+f.Shorthand+"\t"+usage)
		}
		if strings.HasPrefix(f.Name, prefix) && (dashes == "--" || typed != "-" || len(f.Name) > 1) {
			name := dashes + f.Name
			if typed == "-" {
				name = "--" + f.Name
			}
			out = append(out, name+"\t"+usage)
		}
	})
	return out
}

// firstClause is usage up to its first ';' outside parentheses: what the
// flag does, without the defaults and details that follow. A ';' inside
// them belongs to the clause ("each daemon starts at most K others (tree
// spawn; default 32)").
func firstClause(usage string) string {
	depth := 0
	for i, c := range usage {
		switch c {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ';':
			if depth == 0 {
				return usage[:i]
			}
		}
	}
	return usage
}

// completeValue offers the values of flag f: its words, host names, files.
func completeValue(f *pflag.Flag, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	name := f.Name
	switch {
	case fileFlags[name]:
		return nil, cobra.ShellCompDirectiveDefault
	case dirFlags[name]:
		return nil, cobra.ShellCompDirectiveFilterDirs
	}
	var words []string
	head, cur := "", toComplete
	if listFlags[name] {
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			head, cur = toComplete[:i+1], toComplete[i+1:]
		}
	}
	switch {
	case name == "host" || name == "add-host":
		words = hostfileHosts(args)
	case qualifierWords[name] != nil && strings.Contains(cur, ":") && !strings.HasPrefix(cur, "ppr:"):
		i := strings.LastIndexByte(cur, ':')
		head, cur = head+cur[:i+1], cur[i+1:]
		words = qualifierWords[name]
	default:
		words = valueWords[name]
	}
	if words == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	nospace := false
	given := strings.Split(head, ",") // a list's items already there
	for _, w := range words {
		if listFlags[name] && slices.Contains(given, w) {
			continue
		}
		if strings.HasPrefix(strings.ToLower(w), strings.ToLower(cur)) {
			out = append(out, head+w)
			nospace = nospace || strings.HasSuffix(w, ":") || strings.HasSuffix(w, "=")
		}
	}
	d := cobra.ShellCompDirectiveNoFileComp
	if nospace || listFlags[name] {
		d |= cobra.ShellCompDirectiveNoSpace
	}
	return out, d
}

// hostfileHosts are the hosts of the hostfile given earlier on the line
// (--hostfile, --machinefile, -f, --default-hostfile), else of
// PRUN_HOSTFILE: what -H may select from.
func hostfileHosts(args []string) []string {
	path := ""
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			continue
		}
		switch name {
		case "hostfile", "machinefile", "f", "default-hostfile", "hydra-machinefile":
			if !hasVal && i+1 < len(args) {
				val = args[i+1]
			}
			path = val
		}
	}
	if path == "" {
		path = os.Getenv("PRUN_HOSTFILE")
	}
	if path == "" {
		return nil
	}
	// A regular file only, read whole: completion must return at once, a
	// FIFO or a device named by mistake would block it.
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() || st.Size() > 1<<20 {
		return nil
	}
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return nil
	}
	entries, err := hostfile.ParseHostfile(path, bytes.NewReader(b))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Name != "" {
			out = append(out, e.Name)
		}
	}
	return out
}
