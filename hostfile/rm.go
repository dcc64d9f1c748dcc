package hostfile

import (
	"fmt"
	"os"
	"strings"
)

// Resource managers prun reads an allocation from, as Detect's source.
const (
	Slurm = "slurm"
	PBS   = "pbs"
	LSF   = "lsf"
)

// Detect finds the allocation a resource manager gave the job, from its
// environment (getenv, usually os.Getenv) and the files it names
// (readFile, usually os.ReadFile), in this order:
//
//   - Slurm: SLURM_JOB_NODELIST (or the older SLURM_NODELIST), in
//     hostlist syntax, with slots from SLURM_TASKS_PER_NODE (what the job
//     was granted, e.g. "2(x3),1"), else SLURM_JOB_CPUS_PER_NODE, else the
//     nodes' core counts;
//   - PBS/Torque: PBS_NODEFILE, a file naming one host a line, a host
//     repeated once per slot;
//   - LSF: LSB_MCPU_HOSTS, "host1 4 host2 2".
//
// Flux is not detected: its allocation is not in the environment but
// behind the broker (flux resource), which prun does not talk to.
//
// A nil getenv or readFile means os.Getenv or os.ReadFile. ok is false,
// with no error, when none of these is set. A malformed value
// is an error naming the variable (or file) and what is wrong.
func Detect(getenv func(string) string, readFile func(string) ([]byte, error)) (entries []Entry, source string, ok bool, err error) {
	return DetectRM("", getenv, readFile)
}

// User is DetectRM's name for no resource manager: the user says where to
// run (Hydra's -rmk user).
const User = "user"

// DetectRM is Detect for one resource manager (Slurm, PBS or LSF), or for
// none (User); "" tries each in Detect's order.
func DetectRM(rm string, getenv func(string) string, readFile func(string) ([]byte, error)) (entries []Entry, source string, ok bool, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	for _, d := range []struct {
		name   string
		detect func(func(string) string, func(string) ([]byte, error)) ([]Entry, bool, error)
	}{{Slurm, detectSlurm}, {PBS, detectPBS}, {LSF, detectLSF}} {
		if rm != "" && rm != d.name {
			continue
		}
		if entries, ok, err := d.detect(getenv, readFile); ok || err != nil {
			return entries, d.name, err == nil, err
		}
	}
	return nil, "", false, nil
}

func detectSlurm(getenv func(string) string, _ func(string) ([]byte, error)) ([]Entry, bool, error) {
	// A heterogeneous job's components each have their own nodes and
	// tasks (SLURM_JOB_NODELIST_HET_GROUP_n...); the plain variables
	// describe one of them only.
	for _, v := range []string{"SLURM_HET_SIZE", "SLURM_PACK_SIZE"} {
		if s := getenv(v); s != "" && s != "1" {
			return nil, true, fmt.Errorf("%s=%s: a Slurm heterogeneous job; prun does not support those (run it in one component)", v, quote(s))
		}
	}
	for _, v := range []string{"SLURM_JOB_NODELIST", "SLURM_NODELIST"} {
		if s := getenv(v); s != "" {
			entries, err := slurm(getenv, v, s)
			return entries, true, err
		}
	}
	return nil, false, nil
}

func detectPBS(getenv func(string) string, readFile func(string) ([]byte, error)) ([]Entry, bool, error) {
	path := getenv("PBS_NODEFILE")
	if path == "" {
		return nil, false, nil
	}
	data, err := readFile(path)
	if err != nil {
		return nil, true, fmt.Errorf("PBS_NODEFILE=%s: %s", quote(path), oneLine(err.Error()))
	}
	entries, err := ParseNodefile(path, string(data))
	if err != nil {
		return nil, true, fmt.Errorf("PBS_NODEFILE %w", err)
	}
	return entries, true, nil
}

func detectLSF(getenv func(string) string, _ func(string) ([]byte, error)) ([]Entry, bool, error) {
	s := getenv("LSB_MCPU_HOSTS")
	if s == "" {
		return nil, false, nil
	}
	entries, err := ParseMCPUHosts(s)
	if err != nil {
		return nil, true, fmt.Errorf("LSB_MCPU_HOSTS=%s: %w", quote(s), err)
	}
	return entries, true, nil
}

func slurm(getenv func(string) string, nlVar, nl string) ([]Entry, error) {
	names, err := ExpandNodelist(nl)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", nlVar, quote(nl), err)
	}
	entries := make([]Entry, len(names))
	for i, n := range names {
		entries[i] = Entry{Name: n, SlotsFromCores: true}
	}
	for _, v := range []string{"SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE"} {
		s := getenv(v)
		if s == "" {
			continue
		}
		counts, err := ParseTasksPerNode(s)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", v, quote(s), err)
		}
		if len(counts) != len(names) {
			return nil, fmt.Errorf("%s=%s: gives %d nodes but %s names %d", v, quote(s), len(counts), nlVar, len(names))
		}
		for i, c := range counts {
			entries[i].Slots, entries[i].SlotsFromCores, entries[i].SlotsGiven = c, false, true
		}
		break
	}
	return entries, nil
}

// ExpandNodelist expands a Slurm hostlist such as "node[01-04,7],gpu[1-2]"
// into host names, in order: node01 node02 node03 node04 node7 gpu1 gpu2.
// A range keeps the zero padding of its lower bound (Slurm's rule); an
// item may hold several bracket groups (rack[1-2]-n[1-2] is their
// product). A host named twice is an error, since Slurm never does that
// and slot counts pair with nodes by position.
func ExpandNodelist(s string) ([]string, error) {
	if s == "" {
		return nil, fmt.Errorf("empty nodelist")
	}
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth > 0 {
				return nil, fmt.Errorf("%s: nested [", quote(s[start:i+1]))
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, fmt.Errorf("%s: ] without [", quote(s[start:i+1]))
			}
			depth--
		case ',':
			if depth == 0 {
				items = append(items, s[start:i])
				start = i + 1
			}
		}
	}
	if depth > 0 {
		return nil, fmt.Errorf("%s: unclosed [", quote(s[start:]))
	}
	items = append(items, s[start:])

	var names []string
	seen := map[string]bool{}
	for _, item := range items {
		if item == "" {
			return nil, fmt.Errorf("empty host name in the list")
		}
		expanded, msg := expandItem(item, maxNodes-len(names))
		if msg != "" {
			return nil, fmt.Errorf("%s: %s", quote(item), msg)
		}
		for _, n := range expanded {
			if _, msg := checkHost(n); msg != "" {
				return nil, fmt.Errorf("%s: %s: %s", quote(item), quote(n), msg)
			}
			k := hostKey(n)
			if seen[k] {
				return nil, fmt.Errorf("%s: %s listed twice", quote(item), quote(n))
			}
			seen[k] = true
		}
		names = append(names, expanded...)
	}
	return names, nil
}

// expandItem expands one comma-free item: literal text and [ranges]
// groups. It returns what is wrong instead of more than room names.
func expandItem(item string, room int) ([]string, string) {
	out := []string{""}
	for item != "" {
		i := strings.IndexByte(item, '[')
		if i < 0 {
			for k := range out {
				out[k] += item
			}
			break
		}
		lit := item[:i]
		j := strings.IndexByte(item, ']') // the caller checked nesting
		group, msg := expandGroup(item[i+1 : j])
		if msg != "" {
			return nil, msg
		}
		if len(out)*len(group) > room {
			return nil, fmt.Sprintf("expands to more than %d names", maxNodes)
		}
		next := make([]string, 0, len(out)*len(group))
		for _, o := range out {
			for _, g := range group {
				next = append(next, o+lit+g)
			}
		}
		out, item = next, item[j+1:]
	}
	return out, ""
}

// expandGroup expands the inside of one bracket: "01-04,7".
func expandGroup(g string) ([]string, string) {
	if g == "" {
		return nil, "empty []"
	}
	var out []string
	for _, r := range strings.Split(g, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		if len(lo) > maxDigits || len(hi) > maxDigits {
			return nil, fmt.Sprintf("[%s]: number longer than %d digits", quote(r), maxDigits)
		}
		a, msg := number(lo, 999_999_999)
		if msg != "" {
			return nil, fmt.Sprintf("[%s]: %s", quote(r), msg)
		}
		b, msg := number(hi, 999_999_999)
		if msg != "" {
			return nil, fmt.Sprintf("[%s]: %s", quote(r), msg)
		}
		if b < a {
			return nil, fmt.Sprintf("[%s]: range runs backwards", quote(r))
		}
		if b-a >= maxNodes-len(out) {
			return nil, fmt.Sprintf("expands to more than %d names", maxNodes)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", len(lo), n))
		}
	}
	return out, ""
}

// ParseTasksPerNode expands Slurm's compressed per-node counts
// (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE): "2(x3),1" is 2 2 2 1.
func ParseTasksPerNode(s string) ([]int, error) {
	if s == "" {
		return nil, fmt.Errorf("empty")
	}
	var out []int
	for _, item := range strings.Split(s, ",") {
		count, rep := item, "1"
		if i := strings.IndexByte(item, '('); i >= 0 {
			if !strings.HasSuffix(item, ")") || !strings.HasPrefix(item[i:], "(x") {
				return nil, fmt.Errorf("%s: expected N or N(xM)", quote(item))
			}
			count, rep = item[:i], item[i+2:len(item)-1]
		}
		n, msg := number(count, maxCount)
		if msg != "" {
			return nil, fmt.Errorf("%s: count %s", quote(item), msg)
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: count must be at least 1", quote(item))
		}
		m, msg := number(rep, maxNodes)
		if msg != "" {
			return nil, fmt.Errorf("%s: repeat %s", quote(item), msg)
		}
		if m == 0 {
			return nil, fmt.Errorf("%s: repeat must be at least 1", quote(item))
		}
		if len(out)+m > maxNodes {
			return nil, fmt.Errorf("more than %d nodes", maxNodes)
		}
		for ; m > 0; m-- {
			out = append(out, n)
		}
	}
	return out, nil
}

// ParseNodefile reads a PBS/Torque node file (PBS_NODEFILE): one host a
// line, repeated once per slot; blank lines are skipped. Hosts come back
// in the order of their first line. Errors read "NAME:LINE: ...".
func ParseNodefile(name, data string) ([]Entry, error) {
	var out []Entry
	index := map[string]int{}
	for i, line := range strings.Split(data, "\n") {
		h := strings.TrimSpace(line)
		if h == "" {
			continue
		}
		host, msg := checkHost(h)
		if msg != "" {
			return nil, fmt.Errorf("%s:%d: %s: %s", name, i+1, quote(h), msg)
		}
		k := hostKey(host)
		if j, ok := index[k]; ok {
			if out[j].Slots >= maxTotal {
				return nil, fmt.Errorf("%s:%d: %s: more than %d slots", name, i+1, quote(h), maxTotal)
			}
			out[j].Slots++
			continue
		}
		index[k] = len(out)
		out = append(out, Entry{Name: host, Slots: 1, SlotsGiven: true})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no hosts", name)
	}
	return out, nil
}

// ParseMCPUHosts reads LSF's LSB_MCPU_HOSTS: pairs of host and slot count,
// "host1 4 host2 2". A repeated host adds its slots.
func ParseMCPUHosts(s string) ([]Entry, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return nil, fmt.Errorf("no hosts")
	}
	if len(f)%2 != 0 {
		return nil, fmt.Errorf("%s: host without a slot count", quote(f[len(f)-1]))
	}
	var out []Entry
	index := map[string]int{}
	for i := 0; i < len(f); i += 2 {
		host, msg := checkHost(f[i])
		if msg != "" {
			return nil, fmt.Errorf("%s: %s", quote(f[i]), msg)
		}
		n, msg := number(f[i+1], maxCount)
		if msg != "" {
			return nil, fmt.Errorf("%s %s: slot count %s", quote(f[i]), quote(f[i+1]), msg)
		}
		if n == 0 {
			return nil, fmt.Errorf("%s %s: slot count must be at least 1", quote(f[i]), quote(f[i+1]))
		}
		k := hostKey(host)
		if j, ok := index[k]; ok {
			out[j].Slots += n
			if out[j].Slots > maxTotal {
				return nil, fmt.Errorf("%s: more than %d slots", quote(f[i]), maxTotal)
			}
			continue
		}
		index[k] = len(out)
		out = append(out, Entry{Name: host, Slots: n, SlotsGiven: true})
	}
	return out, nil
}
