package launcher

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"prun/hostfile"
	"prun/iof"
	"prun/jobspec"
	"prun/mapper"
	"prun/topology"
)

// allocate resolves where the job may run, in PRRTE's order: a resource
// manager's allocation (narrowed by a hostfile given inside it), else the
// hostfile, each narrowed by --host; else --host alone; else the local node.
// --add-host extends the result. source says where it came from.
//
// The contexts' own hostfiles (jobspec.App.Hostfile) join --host: apps
// without their own host list get the hosts of their file.
func allocate(pl jobspec.Placement, apps []jobspec.App, cores func(host string) (int, error)) (alloc hostfile.Allocation, source string, fromCores map[string]bool, err error) {
	own, err := appHostfiles(apps)
	if err != nil {
		return alloc, "", nil, err
	}
	alloc, source, entries, err := resolveHosts(pl, own, cores)
	if err != nil {
		return alloc, "", nil, err
	}
	fromCores = map[string]bool{}
	for _, e := range entries {
		if e.SlotsFromCores {
			fromCores[e.Name] = true
		}
	}
	if entries == nil { // the implicit local node: one slot per core
		fromCores[alloc.Hosts[0].Name] = true
	}
	if len(alloc.Hosts) > 1 {
		alloc.Hosts = mergeLocal(alloc.Hosts, pl.LocalHost, fromCores)
	}
	orderHosts(alloc.Hosts, pl.OrderNodes)
	if pl.MaxNodes > 0 && len(alloc.Hosts) > pl.MaxNodes {
		alloc.Hosts = alloc.Hosts[:pl.MaxNodes]
	}
	return alloc, source, fromCores, nil
}

// mergeLocal makes the names of this node (its host name, localhost, an
// address of its own: -H node1,localhost) one host, under the first of them,
// with their slots added, as mpirun does: one node has one daemon, and its
// ranks one set of local ranks.
func mergeLocal(hosts []hostfile.Host, alias string, fromCores map[string]bool) []hostfile.Host {
	first := -1
	out := hosts[:0]
	for _, h := range hosts {
		if !isLocal(h.Name, alias) {
			out = append(out, h)
			continue
		}
		if first < 0 {
			first = len(out)
			out = append(out, h)
			continue
		}
		m := &out[first]
		m.Slots += h.Slots
		if m.MaxSlots > 0 && h.MaxSlots > 0 {
			m.MaxSlots += h.MaxSlots
		} else {
			m.MaxSlots = 0
		}
		fromCores[m.Name] = fromCores[m.Name] && fromCores[h.Name]
	}
	return out
}

var rmNames = map[string]string{hostfile.Slurm: "Slurm", hostfile.PBS: "PBS", hostfile.LSF: "LSF"}

// orderHosts sorts hosts by their slots for -order-nodes, keeping the given
// order among equals.
func orderHosts(hosts []hostfile.Host, order string) {
	switch order {
	case "ascending":
		sort.SliceStable(hosts, func(i, j int) bool { return hosts[i].Slots < hosts[j].Slots })
	case "descending":
		sort.SliceStable(hosts, func(i, j int) bool { return hosts[i].Slots > hosts[j].Slots })
	}
}

// appHostfiles reads the contexts' own hostfiles, each once, and returns
// their hosts together (hostfile.Union: the files describe the same
// machines). An app's own --host must be among its file's hosts; an app
// without one is given them.
func appHostfiles(apps []jobspec.App) ([]hostfile.Entry, error) {
	read := map[string][]hostfile.Entry{}
	var lists [][]hostfile.Entry
	for i := range apps {
		a := &apps[i]
		if a.Hostfile == "" {
			continue
		}
		entries, ok := read[a.Hostfile]
		if !ok {
			var err error
			if entries, err = readHostfile(a.Hostfile); err != nil {
				return nil, err
			}
			if len(entries) == 0 {
				return nil, fmt.Errorf("hostfile %s (app %d): no hosts", a.Hostfile, i+1)
			}
			read[a.Hostfile] = entries
			lists = append(lists, entries)
		}
		if a.Hosts == "" {
			a.Hosts = hostfile.FormatHostList(entries)
			continue
		}
		sel, err := hostfile.ParseHostList(a.Hosts)
		if err == nil {
			_, err = hostfile.Select(entries, sel)
		}
		if err != nil {
			return nil, fmt.Errorf("app %d: --host within its hostfile %s: %w", i+1, a.Hostfile, err)
		}
	}
	if len(lists) == 0 {
		return nil, nil
	}
	own, err := hostfile.Union(lists...)
	if err != nil {
		return nil, fmt.Errorf("the contexts' hostfiles: %w", err)
	}
	return own, nil
}

func resolveHosts(pl jobspec.Placement, own []hostfile.Entry, cores func(host string) (int, error)) (alloc hostfile.Allocation, source string, entries []hostfile.Entry, err error) {
	var base []hostfile.Entry
	rm, rmSource, ok, err := hostfile.DetectRM(pl.RM, nil, nil)
	if err != nil {
		return alloc, "", nil, err
	}
	if !ok && pl.RM != "" && pl.RM != hostfile.User {
		return alloc, "", nil, fmt.Errorf("-rmk %s: no %s allocation in prun's environment", pl.RM, rmNames[pl.RM])
	}
	if ok {
		base, source = rm, rmSource+" allocation"
	}
	if pl.Hostfile != "" {
		hf, err := readHostfile(pl.Hostfile)
		if err != nil {
			return alloc, "", nil, err
		}
		if base != nil {
			if base, err = hostfile.Select(base, hf); err != nil {
				return alloc, "", nil, fmt.Errorf("%s within the %s: %w", pl.Hostfile, source, err)
			}
		} else {
			base, source = hf, "hostfile "+pl.Hostfile
		}
	}
	if len(pl.Hosts) > 0 || len(own) > 0 {
		var sel []hostfile.Entry
		what := "contexts' hostfiles"
		if len(pl.Hosts) > 0 {
			if sel, err = hostfile.ParseHostList(strings.Join(pl.Hosts, ",")); err != nil {
				return alloc, "", nil, err // it names --host itself
			}
			what = "--host"
			if len(own) > 0 {
				if sel, err = hostfile.Union(sel, own); err != nil {
					return alloc, "", nil, fmt.Errorf("--host and the contexts' hostfiles: %w", err)
				}
				what = "--host and contexts' hostfiles"
			}
		} else {
			sel = own
		}
		if base != nil {
			if base, err = hostfile.Select(base, sel); err != nil {
				return alloc, "", nil, fmt.Errorf("%s within the %s: %w", what, source, err)
			}
		} else {
			base, source = sel, what
		}
	}
	for _, h := range pl.AddHosts {
		add, err := hostfile.ParseHostList(h)
		if err != nil {
			return alloc, "", nil, fmt.Errorf("--add-host: %w", err)
		}
		base = append(base, add...)
	}
	if base == nil {
		a := hostfile.Local()
		if c, err := cores(a.Hosts[0].Name); err == nil && c > 0 {
			a.Hosts[0].Slots = c
		}
		return a, "the local node", nil, nil
	}
	alloc, err = hostfile.NewAllocation(base, cores)
	if err != nil {
		return alloc, "", nil, err
	}
	if len(alloc.Hosts) == 0 {
		return alloc, "", nil, fmt.Errorf("no hosts are left of the %s", source)
	}
	return alloc, source, base, nil
}

// outputOptions are the Writer's options for the job's --output forms.
func outputOptions(o jobspec.Output, color bool) iof.Options {
	return iof.Options{Color: color, Tag: o.Tag, TagDetailed: o.TagDetailed, Rank: o.Rank, Timestamp: o.Timestamp,
		MergeStderr: o.MergeStderr, JSON: o.JSON, XML: o.XML, Ordered: o.Ordered, Dir: o.Dir, File: o.File, Tee: o.Tee}
}

// mapOptions gives the mapper the job's policies (parsed by the CLI) with
// what the allocation adds: this node's name in it, its hosts' slot origin,
// the rankfile's lines.
func mapOptions(pl jobspec.Placement, alloc hostfile.Allocation, fromCores map[string]bool) (mapper.Options, error) {
	opts := mapper.Options{SlotsFromCores: fromCores, MapBy: pl.MapBy, RankBy: pl.RankBy, BindTo: pl.BindTo, MemBind: pl.MemBind}
	for _, h := range alloc.Hosts {
		if isLocal(h.Name, pl.LocalHost) {
			opts.LocalHost = h.Name
			break
		}
	}
	if rankfile := pl.Rankfile; rankfile != "" {
		f, err := os.Open(rankfile)
		if err != nil {
			return opts, fmt.Errorf("rankfile: %w", err)
		}
		defer f.Close()
		if opts.Rankfile, err = hostfile.ParseRankfile(rankfile, f); err != nil {
			return opts, err
		}
		// "localhost" in a rankfile is this node, whatever the allocation
		// calls it.
		for i := range opts.Rankfile {
			if opts.LocalHost != "" && opts.Rankfile[i].Host != "" && isLocal(opts.Rankfile[i].Host, pl.LocalHost) {
				opts.Rankfile[i].Host = opts.LocalHost
			}
		}
	}
	return opts, nil
}

// hostOrigin says where the job named host, for a message: the first
// line of a hostfile naming it (FILE:LINE), else the option (--host,
// --add-host), else where the allocation came from (source).
func hostOrigin(pl jobspec.Placement, apps []jobspec.App, host, source string) string {
	files := []string{pl.Hostfile}
	for _, a := range apps {
		files = append(files, a.Hostfile)
	}
	for _, f := range files {
		if line := hostfileLine(f, host); line > 0 {
			return fmt.Sprintf("%s:%d", f, line)
		}
	}
	named := func(e hostfile.Entry) bool { return e.Name == host }
	for _, opt := range []struct {
		flag  string
		lists []string
	}{{"--host", pl.Hosts}, {"--add-host", pl.AddHosts}} {
		for _, l := range opt.lists {
			if entries, err := hostfile.ParseHostList(l); err == nil && slices.ContainsFunc(entries, named) {
				return opt.flag
			}
		}
	}
	return source
}

// hostfileLine is the number of file's first line naming host, 0 when
// none does (or there is no file). Read again for a message only: the
// parsed entries do not keep their lines.
func hostfileLine(file, host string) int {
	if file == "" {
		return 0
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for i, line := range strings.Split(string(b), "\n") {
		entries, err := hostfile.ParseHostfile(file, strings.NewReader(line))
		if err == nil && slices.ContainsFunc(entries, func(e hostfile.Entry) bool { return !e.Exclude && e.Name == host }) {
			return i + 1
		}
	}
	return 0
}

func readHostfile(name string) ([]hostfile.Entry, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("hostfile: %w", err)
	}
	defer f.Close()
	return hostfile.ParseHostfile(name, f)
}

// localAppHosts writes this node's names in the apps' own host lists (a
// context's -H, a spawn's host info: "localhost", an address of its own)
// as the allocation names it, for the mapper to find them there.
func localAppHosts(apps []jobspec.App, alloc hostfile.Allocation, alias string) {
	if !slices.ContainsFunc(apps, func(a jobspec.App) bool { return a.Hosts != "" }) {
		return // the usual job: no host list to look through
	}
	local := ""
	for _, h := range alloc.Hosts {
		if isLocal(h.Name, alias) {
			local = h.Name
			break
		}
	}
	if local == "" {
		return
	}
	for i := range apps {
		if apps[i].Hosts == "" {
			continue
		}
		entries, err := hostfile.ParseHostList(apps[i].Hosts)
		if err != nil {
			continue // the mapper reports it
		}
		changed := false
		for j := range entries {
			if e := &entries[j]; e.Kind == hostfile.Named && e.Name != local && isLocal(e.Name, alias) {
				e.Name, changed = local, true
			}
		}
		if changed {
			apps[i].Hosts = hostfile.FormatHostList(entries)
		}
	}
}

// spawnHosts is where a spawn's info asks its app to go, in --host syntax
// for the mapper (jobspec.App.Hosts): the hosts of hostfile (relative to
// wdir) and then hosts, each a host of the allocation ("" for anywhere).
func spawnHosts(hosts, hostfilePath, wdir string) (string, error) {
	var lists []string
	if hostfilePath != "" {
		if !filepath.IsAbs(hostfilePath) {
			hostfilePath = filepath.Join(wdir, hostfilePath)
		}
		entries, err := readHostfile(hostfilePath)
		if err != nil {
			return "", err
		}
		if len(entries) > 0 {
			lists = append(lists, hostfile.FormatHostList(entries))
		}
	}
	if hosts != "" {
		if _, err := hostfile.ParseHostList(hosts); err != nil {
			return "", fmt.Errorf("host info %q: %v", hosts, strings.TrimPrefix(err.Error(), "--host: "))
		}
		lists = append(lists, hosts)
	}
	return strings.Join(lists, ","), nil
}

// isLocal reports whether a host name is the node prun runs on: its host
// name (long or short), localhost, one of its own addresses, or the name
// -localhost gave it (alias).
// localLogin refuses a user given to this node other than the one running
// prun: its ranks run under the launcher's own daemon, never over SSH, so
// the login would be ignored. (A port there is simply unused: no SSH.)
func localLogin(a hostfile.Allocation, alias string) error {
	for _, h := range a.Hosts {
		if h.User == "" || !isLocal(h.Name, alias) {
			continue
		}
		if u, err := user.Current(); err == nil && u.Username == h.User {
			continue
		}
		return fmt.Errorf("host %s is this node, where prun starts the ranks itself, as the user running it: user %s cannot apply (run prun as %s, or name another node)",
			h.Name, h.User, h.User)
	}
	return nil
}

func isLocal(host, alias string) bool {
	if host == "localhost" || alias != "" && strings.EqualFold(host, alias) {
		return true
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return ip.IsLoopback() || localAddrs()[ip.String()]
	}
	me, err := hostname()
	if err != nil {
		return false
	}
	short := func(s string) string { s, _, _ = strings.Cut(s, "."); return strings.ToLower(s) }
	return strings.EqualFold(host, me) || short(host) == short(me)
}

// hostname is this node's name, asked once: isLocal runs for every host of
// the allocation, more than once.
var hostname = sync.OnceValues(os.Hostname)

// localAddrs are this node's interface addresses, read once: a host list
// may name the launching node by one of them, as mpirun allows.
var localAddrs = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			m[n.IP.String()] = true
		}
	}
	return m
})

// topologies answers each host's topology: --topology for every node when
// given (dry runs, tests), else this node's own, read from the cached hwloc
// XML when there is one (fast) or from sysfs. Remote nodes will report
// theirs once multi-node launch exists; until then they are assumed alike.
type topologies struct {
	given    *topology.Topology
	reported map[string]*topology.Topology // by the nodes' daemons
	local    *topology.Topology
	err      error
}

func newTopologies(spec string) (*topologies, error) {
	t := &topologies{}
	if spec != "" {
		var err error
		if t.given, err = parseTopology(spec); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// parseTopology reads --topology: an existing file is hwloc XML, anything
// else an hwloc synthetic description.
func parseTopology(spec string) (*topology.Topology, error) {
	if st, err := os.Stat(spec); err == nil && st.Mode().IsRegular() {
		f, err := os.Open(spec)
		if err != nil {
			return nil, fmt.Errorf("--topology: %w", err)
		}
		defer f.Close()
		t, err := topology.ParseXML(f)
		if err != nil {
			return nil, fmt.Errorf("--topology %s: %w", spec, err)
		}
		return t, nil
	}
	t, err := topology.ParseSynthetic(spec)
	if err != nil {
		return nil, fmt.Errorf("--topology %q: %w", spec, err)
	}
	return t, nil
}

// localTopology is this node's, discovered once.
func (t *topologies) localTopology() (*topology.Topology, error) {
	if t.local != nil || t.err != nil {
		return t.local, t.err
	}
	t.local, _, t.err = topology.Local()
	if t.err != nil {
		t.err = fmt.Errorf("discovering this node's topology: %w", t.err)
	}
	return t.local, t.err
}

// of returns a host's topology, nil when it cannot be known.
func (t *topologies) of(host string) *topology.Topology {
	if t.given != nil {
		return t.given
	}
	if rt := t.reported[host]; rt != nil {
		return rt
	}
	local, _ := t.localTopology()
	return local
}

// cores is a host's core count, for hosts whose slots were not given.
func (t *topologies) cores(host string) (int, error) {
	if t.given != nil {
		return t.given.Count(topology.Core), nil
	}
	if rt := t.reported[host]; rt != nil {
		return rt.Count(topology.Core), nil
	}
	local, err := t.localTopology()
	if err != nil {
		return 0, err
	}
	return local.Count(topology.Core), nil
}
