// Package cli turns a prun command line into a jobspec.Job. It owns the flag
// vocabulary (global and per-context flags, mpirun's single-dash spellings)
// and the MPMD grammar `ctx : ctx : ...`; it starts nothing.
package cli

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"

	"prun/internal/progpath"
	"prun/iof"
	"prun/jobspec"
	"prun/names"
)

// UsageError is bad input on the command line: prun prints it and exits 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// usagef formats a usage error. Control characters from the command line are
// escaped so that the message stays one line.
func usagef(format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	if strings.IndexFunc(msg, unicode.IsControl) >= 0 {
		q := strconv.Quote(msg)
		msg = q[1 : len(q)-1]
	}
	return &UsageError{msg}
}

// fileList splits flag's comma-separated list of files and resolves each
// against the working directory: the names as given, and absolute.
func fileList(flag, list string, env Env) (given, abs []string, err error) {
	for _, f := range strings.Split(list, ",") {
		if f == "" {
			return nil, nil, usagef("%s %s: an empty file name", flag, list)
		}
		path := f
		if !filepath.IsAbs(path) {
			cwd, err := env.Getwd()
			if err != nil {
				return nil, nil, usagef("cannot determine the working directory: %v", err)
			}
			path = filepath.Join(cwd, f)
		}
		given, abs = append(given, f), append(abs, path)
	}
	return given, abs, nil
}

// preloadFiles resolves --preload-files: regular files this process can
// read, with distinct base names (by which they land in working directories).
func preloadFiles(list string, env Env) ([]string, error) {
	given, paths, err := fileList("--preload-files", list, env)
	if err != nil {
		return nil, err
	}
	byName := map[string]string{}
	for i, abs := range paths {
		f := given[i]
		st, err := os.Stat(abs)
		if err != nil {
			return nil, usagef("--preload-files %s: %v", f, errText(err))
		}
		if !st.Mode().IsRegular() {
			return nil, usagef("--preload-files %s: not a regular file", f)
		}
		r, err := os.Open(abs)
		if err != nil {
			return nil, usagef("--preload-files %s: %v", f, errText(err))
		}
		r.Close()
		if other, dup := byName[filepath.Base(abs)]; dup {
			return nil, usagef("--preload-files: %s and %s would both be %s in the working directory", other, f, filepath.Base(abs))
		}
		byName[filepath.Base(abs)] = f
	}
	return paths, nil
}

// Request is what a command line asks prun to do.
type Request struct {
	Job     *jobspec.Job
	Help    bool     // -h/--help: print usage, run nothing
	Version bool     // --version
	Exec    []string // --debug: run this debugger command (which runs prun) instead
	// Warnings are for stderr before the job runs ("-x FOO: not set...").
	Warnings []string
	place    spelledPlacement // the placement as spelled, for tests
}

// Env is how the parser sees the launcher's environment; tests substitute it.
type Env struct {
	LookupEnv func(string) (string, bool)
	Getwd     func() (string, error)
	LookPath  func(string) (string, error)
	ReadFile  func(string) ([]byte, error) // Open MPI's MCA parameter files; nil: none
	warn      func(string)                 // Parse's: collects Request.Warnings
}

func (e Env) warnf(format string, a ...any) {
	if e.warn != nil {
		e.warn(fmt.Sprintf(format, a...))
	}
}

// OSEnv is the real process environment.
var OSEnv = Env{LookupEnv: os.LookupEnv, Getwd: os.Getwd, LookPath: exec.LookPath, ReadFile: os.ReadFile}

// globalOpts are flags that apply to the whole job.
type globalOpts struct {
	place         placeOpts
	output        []string
	timestamp     bool
	outputFile    string
	label         bool
	mergeStderr   bool
	pmi           string
	pmiPort       bool
	stdin         string
	pty           string
	report        string
	stateOnTO     bool
	exitCodes     bool
	stackTraces   bool
	tagOutput     bool
	timeout       string
	version       bool
	help          bool
	allowAsRoot   bool
	launch        launchOpts
	mca           []string           // "KEY=VALUE" of --mca KEY VALUE
	pmixMCA       []string           // of --pmixmca KEY VALUE
	prteMCA       []string           // of --prtemca KEY VALUE
	noHostProp    bool               // Hydra's -disable-hostname-propagation
	enableX       bool               // Hydra's -enable-x: refused
	refused       map[string]*string // refusedFlags given, by name
	genv          []string           // "VAR=VALUE" of -genv VAR VALUE
	genvList      []string           // VAR of -genvlist VAR,VAR
	launcher      string             // Hydra's -launcher/-bootstrap: ssh or rsh
	appFile       string             // --app FILE: the contexts come from FILE (appfile.go)
	quiet         bool
	reportPID     string
	dvm           string
	dvmWait       bool
	reportURI     string
	proctable     string
	preloadBin    bool
	tune          string
	amca          string
	progress      bool
	recovery      bool
	maxRestarts   int
	continuous    bool // mpirun's --continuous: restarts without end
	preloadList   string
	indexArgv     bool
	xterm         string // --xterm RANKS[!]
	xml           bool   // mpirun's --xml
	primaryStatus bool   // mpirun's -report-child-jobs-separately
	cwdSession    bool
	debugDaemon   bool
	genvNone      bool   // Hydra's -genvnone: every context as -envnone
	genvAll       bool   // Hydra's -genvall: other nodes' processes get the whole environment
	nameServer    string // Hydra's -nameserver HOST[:PORT]
	verbose       bool
	profile       bool
	prefixPat     string // Hydra's -prepend-pattern
	outPat        string // Hydra's -outfile-pattern
	errPat        string // Hydra's -errfile-pattern
	usize         string // Hydra's -usize
	debug         bool   // --debug, --tv: run the job under a parallel debugger
	debuggers     string // --debugger: which ones --debug looks for
}

// launchOpts say how daemons reach other nodes.
type launchOpts struct {
	prefix, rsh, ifInclude, ports string
	fanout                        int
}

// contextOpts are flags that apply to one application context.
type contextOpts struct {
	np       int
	npSet    bool
	env      []string
	wdir     string
	path     string // --path: where to look for the program instead of PATH
	pset     string // --pset: this context's process set name
	envNone  bool
	envAll   bool         // Hydra's -envall: this context keeps the environment despite -genvnone
	hosts    []string     // --host given in a context after the first (mpirun's per-context -H)
	hostfile string       // --hostfile given in a context after the first (mpirun's per-context hostfile)
	given    []givenValue // every value of its --hostfile, in order (repeat.go)
}

// placeOpts are the placement flags (hosts, mapping, binding, display).
type placeOpts struct {
	hostfile, hydraFile, defaultHostfile, rankfile, mapBy, rankBy, bindTo, memBind, topology, cpuSet, ppr, localHost, rmk, orderNodes string
	hosts, addHosts, display                                                                                                          []string
	doNotLaunch, reportBindings, displayMap, displayAlloc, displayTopo, rankMap                                                       bool
	maxNodes                                                                                                                          int
	// mpirun's older placement spellings (compatFlags), by name
	compatSet map[string]*bool
	compatN   map[string]*int
	// every value given to the single-valued ones, in order (repeat.go)
	given []givenValue
}

// compatFlag is one of mpirun's older placement spellings, applied by the
// mapper (mapper.Options.ApplyCompat) on top of --map-by and --bind-to.
type compatFlag struct {
	name, short, usage string
	n                  bool   // takes a count
	hidden             bool   // deprecated by mpirun: accepted, not advertised
	as                 string // applied under this name
}

// compatFlags, in the order mpirun applies them.
var compatFlags = []compatFlag{
	{name: "oversubscribe", usage: "allow more processes than slots (--map-by :OVERSUBSCRIBE)"},
	{name: "nooversubscribe", usage: "never more processes than slots (--map-by :NOOVERSUBSCRIBE)", hidden: true},
	{name: "nolocal", usage: "do not run processes on the launcher's node"},
	{name: "skip-launch-node", usage: "same as --nolocal (Hydra's -skip-launch-node)", hidden: true, as: "nolocal"},
	{name: "npernode", short: "N", usage: "`N` processes per node (--map-by ppr:N:node)", n: true},
	{name: "ppn", usage: "`N` processes on each host in turn, then again from the first (Hydra's -ppn)", n: true, hidden: true},
	{name: "npersocket", usage: "`N` processes per package (--map-by ppr:N:package)", n: true, hidden: true},
	{name: "pernode", usage: "one process per node"},
	{name: "use-hwthread-cpus", usage: "count hardware threads as slots"},
	{name: "cpus-per-proc", usage: "`N` cpus per process (--map-by :PE=N)", n: true},
	{name: "cpus-per-rank", usage: "same as --cpus-per-proc", n: true, hidden: true},
	{name: "bynode", usage: "map round-robin by node (--map-by node)"},
	{name: "byslot", usage: "--map-by slot", hidden: true},
	{name: "bycore", usage: "--map-by core", hidden: true},
	{name: "bysocket", usage: "--map-by package", hidden: true},
	{name: "bind-to-core", usage: "--bind-to core", hidden: true},
	{name: "bind-to-socket", usage: "--bind-to package", hidden: true},
	{name: "bind-to-none", usage: "--bind-to none", hidden: true},
}

func addPlaceFlags(fs *pflag.FlagSet, p *placeOpts) {
	// The single-valued options record every value given (repeat.go).
	g := &p.given
	stringOnce(fs, g, &p.hostfile, "hostfile", "hostfile", "", "run on the hosts of `FILE` ([user@]host [slots=N] [max_slots=M] [user=U] [port=P] per line; user and port are the SSH login)")
	// Hydra's -f is its machinefile: a job larger than its slots goes
	// round its hosts again, as under Hydra (mpirun has no -f).
	stringOnce(fs, g, &p.hydraFile, "hostfile", "hydra-machinefile", "f", "Hydra's machinefile: --hostfile, and a job larger than its slots goes round its hosts again (host:N lines)")
	_ = fs.MarkHidden("hydra-machinefile")
	stringOnce(fs, g, &p.hostfile, "hostfile", "machinefile", "", "same as --hostfile")
	stringOnce(fs, g, &p.defaultHostfile, "default-hostfile", "default-hostfile", "", "the hostfile `FILE` when no --hostfile is given (also PRUN_HOSTFILE)")
	fs.VarP(appendValue{&p.hosts}, "host", "H", "run on `HOSTS`: a:4,u@b,c:* (slots after ':', * = one per core, u@ the SSH user); with a hostfile, selects from it; given in a later context too (after ':'), each context's processes go to its own hosts")
	fs.Var(appendValue{&p.hosts}, "hosts", "same as --host (Hydra's -hosts)")
	_ = fs.MarkHidden("hosts")
	fs.StringArrayVar(&p.addHosts, "add-host", nil, "add `HOSTS` to the allocation")
	stringOnce(fs, g, &p.rmk, "rmk", "rmk", "", "read the allocation of resource manager `RM` only: slurm, pbs, lsf, or user (none: the hosts given) (Hydra's -rmk)")
	intOnce(fs, g, &p.maxNodes, "max-vm-size", "max-vm-size", "", "use the allocation's first `N` hosts only (mpirun's)")
	stringOnce(fs, g, &p.orderNodes, "order-nodes", "order-nodes", "", "map onto the hosts in `ASCENDING` or DESCENDING order of their slots (Hydra's -order-nodes)")
	stringOnce(fs, g, &p.localHost, "localhost", "localhost", "", "the launching node is `NAME` in the host list (Hydra's -localhost; its host name, localhost and its own addresses always are)")
	stringOnce(fs, g, &p.rankfile, "rankfile", "rankfile", "", "place ranks as `FILE` says: rank N=host slot=S")
	stringOnce(fs, g, &p.rankfile, "rankfile", "rf", "", "same as --rankfile (mpirun's -rf)")
	_ = fs.MarkHidden("rf")
	stringOnce(fs, g, &p.mapBy, "map-by", "map-by", "", "map processes by `POLICY`: slot, hwthread, core, l1cache, l2cache, l3cache, numa, package, node, seq, ppr:N:RESOURCE, rankfile, pe-list=LIST, with :PE=n :SPAN :OVERSUBSCRIBE :NOOVERSUBSCRIBE :NOLOCAL :HWTCPUS")
	stringOnce(fs, g, &p.rankBy, "rank-by", "rank-by", "", "rank processes by `POLICY`: slot, node, fill, span, or (as Open MPI 4) an object hwthread, core, l1cache, l2cache, l3cache, numa, package with :span or :fill")
	stringOnce(fs, g, &p.bindTo, "bind-to", "bind-to", "", "bind each process to `OBJECT`: none, hwthread, core, l1cache, l2cache, l3cache, numa, package, with :overload-allowed :if-supported :REPORT")
	stringOnce(fs, g, &p.memBind, "membind", "membind", "", "each process's memory `POLICY`: firsttouch (its CPU's NUMA node), bind or interleave (over the NUMA nodes of its CPUs, or bind:NODES, interleave:NODES) (Hydra's -membind)")
	stringOnce(fs, g, &p.cpuSet, "cpu-set", "cpu-set", "", "run on the CPUs of `LIST` only, each process bound to them all (--map-by pe-list=LIST)")
	stringOnce(fs, g, &p.cpuSet, "cpu-set", "cpu-list", "", "same as --cpu-set")
	_ = fs.MarkHidden("cpu-list")
	stringOnce(fs, g, &p.ppr, "ppr", "ppr", "", "`N:RESOURCE` processes per resource (--map-by ppr:N:RESOURCE)")
	_ = fs.MarkHidden("ppr")
	stringOnce(fs, g, &p.topology, "topology", "topology", "", "use `SPEC` as every node's topology: hwloc synthetic (\"pack:2 core:8 pu:2\") or an XML file")
	fs.StringSliceVar(&p.display, "display", nil, "show `WHAT` before running: map, map:json, allocation, topo (each node's topology), rank-map (Hydra's (host:ranks) lines)")
	fs.BoolVar(&p.doNotLaunch, "do-not-launch", false, "map and display, then exit without starting anything")
	fs.BoolVar(&p.reportBindings, "report-bindings", false, "print each rank's binding as it starts")
	fs.BoolVar(&p.displayMap, "display-map", false, "same as --display map")
	fs.BoolVar(&p.displayAlloc, "display-allocation", false, "same as --display allocation")
	// Open MPI's other map and allocation displays: prun's already show
	// the detail (bindings, slots) and print the same on every run.
	fs.BoolVar(&p.displayMap, "display-devel-map", false, "same as --display map")
	fs.BoolVar(&p.displayMap, "display-diffable-map", false, "same as --display map")
	fs.BoolVar(&p.displayAlloc, "display-devel-allocation", false, "same as --display allocation")
	fs.BoolVar(&p.displayTopo, "display-topo", false, "same as --display topo")
	fs.BoolVar(&p.rankMap, "print-rank-map", false, "same as --display rank-map: (host:ranks) per host, as Hydra prints it")
	for _, f := range []string{"display-map", "display-allocation", "display-devel-map", "display-diffable-map", "display-devel-allocation", "display-topo", "print-rank-map"} {
		_ = fs.MarkHidden(f)
	}
	p.compatSet, p.compatN = map[string]*bool{}, map[string]*int{}
	for _, c := range compatFlags {
		if c.n {
			p.compatN[c.name] = new(int)
			intOnce(fs, g, p.compatN[c.name], c.name, c.name, c.short, c.usage)
		} else {
			p.compatSet[c.name] = fs.BoolP(c.name, c.short, false, c.usage)
		}
		if c.hidden {
			_ = fs.MarkHidden(c.name)
		}
	}
}

// spelledPlacement is the placement as the command line, Open MPI's MCA
// parameters and Hydra's variables spell it; resolve parses its policies
// into the job spec's. Its string fields shadow the Placement's policies.
type spelledPlacement struct {
	jobspec.Placement
	MapBy, RankBy, BindTo, MemBind string
	// Origin names where MapBy, RankBy or BindTo came from when not the
	// command line ("map-by": "OMPI_MCA_rmaps_base_mapping_policy=node"),
	// for their errors.
	Origin         map[string]string
	Compat         [][2]string // mpirun's older spellings in order: {"npernode","2"}, {"oversubscribe",""}, ...
	ReportBindings bool
	// Given is every value given to the single-valued placement options
	// on the command line, in order (repeat.go).
	Given []givenValue
}

// resolve parses the policies, then applies mpirun's older spellings over
// them (ApplyCompat). Every error is a usage error naming the flag, or the
// variable the value came from; a conflict names both sides as given.
func (sp *spelledPlacement) resolve() (jobspec.Placement, error) {
	pl := sp.Placement
	origin := func(flag string, err error) error {
		if o := sp.Origin[flag]; o != "" {
			return usagef("%s: %v", o, err)
		}
		return usagef("%v", err)
	}
	// A single-valued option given twice must say the same both times.
	if err := checkRepeats(sp.Given, ""); err != nil {
		return pl, err
	}
	var err error
	mapBy := sp.MapBy
	if mapBy == "" && pl.Rankfile != "" {
		mapBy = "rankfile"
	}
	if mapBy != "" {
		if pl.MapBy, err = jobspec.ParseMapBy(mapBy); err != nil {
			return pl, origin("map-by", err)
		}
	}
	if sp.RankBy != "" {
		if pl.RankBy, err = jobspec.ParseRankBy(sp.RankBy); err != nil {
			return pl, origin("rank-by", err)
		}
	}
	if sp.BindTo != "" {
		if pl.BindTo, err = jobspec.ParseBindTo(sp.BindTo); err != nil {
			return pl, origin("bind-to", err)
		}
	}
	if sp.MemBind != "" {
		if pl.MemBind, err = jobspec.ParseMemBind(sp.MemBind); err != nil {
			return pl, usagef("%v", err) // it names the flag
		}
	}
	// Where each aspect of the placement (conflictError's) came from, as
	// given, for the conflicts of the older spellings with it.
	from := map[string]string{}
	mapFrom := cmp.Or(sp.Origin["map-by"], sp.spelled("map-by"), sp.spelled("cpu-set"), sp.spelled("rankfile"))
	if pl.MapBy.By != jobspec.MapDefault {
		from["map"] = mapFrom
	}
	if pl.MapBy.PE > 0 {
		from["pe"] = mapFrom
	}
	if pl.BindTo.To != jobspec.BindDefault {
		from["bind"] = cmp.Or(sp.Origin["bind-to"], sp.spelled("bind-to"))
	}
	// A rankfile is a mapping: --map-by may only qualify it. (An Open MPI
	// parameter's or Hydra's variable's policy does not apply beside one.)
	if rf := sp.spelled("rankfile"); pl.Rankfile != "" && sp.MapBy != "" {
		switch {
		case pl.MapBy.By == jobspec.MapDefault: // qualifiers only
			pl.MapBy.By = jobspec.MapRankfile
			if err := pl.MapBy.Check(); err != nil {
				return pl, usagef("%s with %s: %v", mapFrom, rf, err)
			}
			from["map"] = rf
		case pl.MapBy.By != jobspec.MapRankfile ||
			pl.MapBy.File != "" && filepath.Clean(pl.MapBy.File) != filepath.Clean(pl.Rankfile):
			return pl, usagef("%s conflicts with %s", mapFrom, rf)
		}
	}
	for _, c := range sp.Compat {
		err := ApplyCompat(&pl, c[0], c[1])
		var conflict *conflictError
		if errors.As(err, &conflict) && from[conflict.what] != "" {
			return pl, usagef("%s conflicts with %s", conflict.opt, from[conflict.what])
		}
		if err != nil {
			return pl, usagef("%v", err) // it names the option
		}
		if a := compatAspect(c[0]); a != "" && from[a] == "" {
			from[a] = compatSpelling(c[0], c[1])
		}
	}
	// Hydra's --bind-to core:N is PE=N too (the mapper applies it).
	if n := pl.BindTo.Count; n > 1 && pl.MapBy.PE > 0 && pl.MapBy.PE != n {
		return pl, usagef("%s conflicts with %s", from["bind"], from["pe"])
	}
	pl.BindTo.Report = pl.BindTo.Report || sp.ReportBindings
	if pl.Rankfile == "" {
		pl.Rankfile = pl.MapBy.File
	}
	return pl, nil
}

// spelled is the first value given to option key on the command line, as
// given ("--map-by node"); "" if none.
func (sp *spelledPlacement) spelled(key string) string {
	for _, g := range sp.Given {
		if g.key == key {
			return g.String()
		}
	}
	return ""
}

// placement turns the flags into the job spec, in the order mpirun applies
// its old spellings.
func (p *placeOpts) placement(fs *pflag.FlagSet, env Env) spelledPlacement {
	pl := spelledPlacement{Placement: jobspec.Placement{
		Hostfile: p.hostfile, Rankfile: p.rankfile,
		Topology: p.topology, Display: displays(p.display), DoNotLaunch: p.doNotLaunch,
		AddHosts: p.addHosts, LocalHost: p.localHost,
		RM: strings.ToLower(p.rmk), OrderNodes: strings.ToLower(p.orderNodes), MaxNodes: p.maxNodes,
	}, MapBy: p.mapBy, RankBy: p.rankBy, BindTo: p.bindTo, MemBind: p.memBind, ReportBindings: p.reportBindings, Given: p.given}
	if p.ppr != "" {
		pl.Compat = append(pl.Compat, [2]string{"ppr", p.ppr})
	}
	// Hydra's host lists (-f, -hosts, HYDRA_HOST_FILE) are placed as Hydra
	// places them: round after round when the job is larger.
	hydra := p.hydraFile != "" || fs.Changed("hosts")
	if pl.Hostfile == "" {
		pl.Hostfile = p.hydraFile
	}
	if pl.Hostfile == "" {
		pl.Hostfile = p.fallbackHostfile(env)
		if f, _ := env.LookupEnv("HYDRA_HOST_FILE"); pl.Hostfile != "" && pl.Hostfile == f && len(p.hosts) == 0 {
			hydra = true
		}
	}
	pl.Hosts = p.hosts
	if p.displayMap {
		pl.Display = append(pl.Display, jobspec.DisplayMap)
	}
	if p.displayAlloc {
		pl.Display = append(pl.Display, jobspec.DisplayAllocation)
	}
	if p.displayTopo {
		pl.Display = append(pl.Display, jobspec.DisplayTopo)
	}
	if p.rankMap {
		pl.Display = append(pl.Display, jobspec.DisplayRankMap)
	}
	for _, c := range compatFlags {
		name := c.name
		if c.as != "" {
			name = c.as
		}
		switch {
		case c.n && fs.Changed(c.name):
			pl.Compat = append(pl.Compat, [2]string{name, strconv.Itoa(*p.compatN[c.name])})
		case !c.n && *p.compatSet[c.name]:
			pl.Compat = append(pl.Compat, [2]string{name, ""})
		}
	}
	if hydra {
		pl.Compat = append(pl.Compat, [2]string{"hydra-hosts", ""})
	}
	return pl
}

// refusedFlags are the peers' options prun knows and does not do: each is
// a usage error that says why and what to use, rather than "unknown flag".
var refusedFlags = []struct {
	name, why string
	noValue   bool
}{
	{name: "ompi-server", why: "prun does not speak Open MPI's ompi-server protocol: run hydra_nameserver and give -nameserver HOST[:PORT] to every launch that shares names"},
	{name: "hnp", why: "prun keeps no persistent virtual machine to attach to: each launch starts its own daemons"},
	{name: "report-events", why: "prun reports a run's events in one JSON file instead: --report FILE (docs/report.md)"},
	{name: "gpus-per-proc", why: "prun assigns no GPUs: set CUDA_VISIBLE_DEVICES (or ZE_AFFINITY_MASK) per rank, e.g. from PRUN_LOCAL_RANK in a wrapper script"},
}

// fallbackHostfile is the job's hostfile when no --hostfile gives one.
func (p *placeOpts) fallbackHostfile(env Env) string {
	if p.defaultHostfile != "" {
		return p.defaultHostfile
	}
	for _, v := range []string{"PRUN_HOSTFILE", "HYDRA_HOST_FILE"} {
		if f, _ := env.LookupEnv(v); f != "" {
			return f
		}
	}
	return ""
}

func addGlobalFlags(fs *pflag.FlagSet, g *globalOpts) {
	addPlaceFlags(fs, &g.place)
	fs.BoolVar(&g.tagOutput, "tag-output", false, "prefix every output line with [app,rank]<stream>: (--output tag)")
	fs.StringSliceVar(&g.output, "output", nil, "output `FORMS`, comma-separated: tag, tag-detailed, rank, timestamp, merge-stderr-to-stdout, json, xml, ordered, dir=DIR, file=PREFIX")
	fs.BoolVar(&g.timestamp, "timestamp-output", false, "timestamp every output line (--output timestamp)")
	fs.StringVar(&g.outputFile, "output-filename", "", "write each rank's output under `DIR` (--output dir=DIR)")
	fs.BoolVarP(&g.label, "label", "l", false, "prefix every line with [rank] (--output rank)")
	fs.BoolVar(&g.label, "prepend-rank", false, "same as -l (Hydra's -prepend-rank)")
	_ = fs.MarkHidden("prepend-rank")
	fs.BoolVar(&g.mergeStderr, "merge-stderr-to-stdout", false, "send the ranks' stderr to stdout")
	fs.BoolVar(&g.xml, "xml", false, "print the ranks' output as mpirun's XML: <mpirun>, then <stdout rank=\"N\">line&#010;</stdout> (and <stderr ...>) per line, then </mpirun> (--output xml)")
	fs.StringVar(&g.stdin, "stdin", "0", "which ranks read prun's stdin: a `RANK`, all or none")
	fs.StringVar(&g.pty, "pty", "", "run the --stdin rank on a pseudo-terminal (default: when prun's stdin is a terminal); --pty=false: never")
	fs.Lookup("pty").NoOptDefVal = "true"
	fs.StringVar(&g.report, "report", "", "write a JSON report of the run to `FILE`, however it ends (docs/report.md)")
	fs.BoolVar(&g.exitCodes, "print-all-exitcodes", false, "after the job, print how every rank ended (Hydra's -print-all-exitcodes)")
	fs.BoolVar(&g.stateOnTO, "report-state-on-timeout", false, "on --timeout, show each running rank's state from /proc")
	fs.BoolVar(&g.stackTraces, "get-stack-traces", false, "on --timeout, show the running ranks' stacks (gdb or eu-stack) merged into one tree")
	fs.StringVar(&g.pmi, "pmi", jobspec.PMIAuto, "process-management interface for the ranks: auto (PMIx and PMI-1/PMI-2), pmix, pmi1, pmi2 or none")
	fs.BoolVar(&g.pmiPort, "pmi-port", false, "PMI-1 and PMI-2 clients connect to the node's PMI service at PMI_PORT and name themselves with PMI_ID, instead of inheriting a socket (PMI_FD) (Hydra's -pmi-port)")
	fs.StringVar(&g.timeout, "timeout", "", "kill the job after `SECONDS` (also MPIEXEC_TIMEOUT)")
	fs.BoolVar(&g.version, "version", false, "print prun's version, its commit and the PMIx and PMI servers it hosts, and exit")
	fs.BoolVar(&g.version, "info", false, "same as --version (Hydra's -info)")
	_ = fs.MarkHidden("info")
	fs.BoolVar(&g.profile, "profile", false, "print the launch's milestones with their times on stderr, this node's as they come, the other nodes' after the job (Hydra's -profile)")
	fs.BoolVarP(&g.verbose, "verbose", "v", false, "print what the launch does on stderr: its milestones, every PMI and PMIx request, other nodes' daemons' messages")
	fs.StringVar(&g.outPat, "outfile-pattern", "", "write the ranks' stdout to the file `PATTERN` names (%r %g %h %p %% as -prepend-pattern; ranks may share a file), not to the terminal")
	fs.StringVar(&g.errPat, "errfile-pattern", "", "write the ranks' stderr to the file `PATTERN` names, not to the terminal")
	fs.StringVar(&g.usize, "usize", "", "the universe size the processes are told (MPI_UNIVERSE_SIZE, PMIX_UNIV_SIZE): `N`, SYSTEM for the allocation's slots (the default) or INFINITE for none (Hydra's -usize)")
	fs.StringVar(&g.prefixPat, "prepend-pattern", "", "prefix every output line with `PATTERN`: %r rank, %g job, %h host, %p node index, %% a % (Hydra's -prepend-pattern)")
	// Accepted for mpirun's and Hydra's command lines; nothing in prun for
	// them to change (no VM, no prefix guessing, one I/O engine, hwloc, no
	// host name resolved to map a job).
	// Also Open MPI 4.1's own dead ones: its cartography files and
	// "instant on" do nothing there either.
	for _, f := range []string{"noprefix", "novm", "use-regexp", "do-not-resolve", "enable-instant-on-support"} {
		fs.Bool(f, false, "accepted for mpirun compatibility; changes nothing")
		_ = fs.MarkHidden(f)
	}
	fs.String("cartofile", "", "accepted for mpirun compatibility; changes nothing")
	_ = fs.MarkHidden("cartofile")
	for _, f := range []string{"demux", "topolib"} {
		fs.String(f, "", "accepted for Hydra compatibility; changes nothing")
		_ = fs.MarkHidden(f)
	}
	fs.BoolVarP(&g.help, "help", "h", false, "show this help")
	fs.BoolVar(&g.allowAsRoot, "allow-run-as-root", false, "accepted for mpirun compatibility; prun runs as root without it")
	fs.StringVar(&g.launch.prefix, "prefix", "", "prun is `DIR`/bin/prun on the other nodes (default: the launcher's own path)")
	fs.StringVar(&g.launch.rsh, "rsh", "", "start daemons on other nodes with `CMD` HOST COMMAND instead of the built-in SSH client")
	fs.StringVar(&g.launch.rsh, "launch-agent", "", "same as --rsh")
	fs.Var(appendValue{&g.mca}, "mca", "set Open MPI's MCA parameter: `KEY VALUE` becomes OMPI_MCA_KEY=VALUE for the processes (repeatable)")
	fs.Var(appendValue{&g.mca}, "gmca", "same as --mca")
	_ = fs.MarkHidden("gmca")
	fs.Var(appendValue{&g.pmixMCA}, "pmixmca", "set a PMIx MCA parameter: `KEY VALUE` becomes PMIX_MCA_KEY=VALUE for the processes (repeatable)")
	fs.Var(appendValue{&g.prteMCA}, "prtemca", "set a PRRTE MCA parameter: `KEY VALUE` becomes PRTE_MCA_KEY=VALUE for the processes (prterun's; repeatable)")
	fs.String("personality", "", "accepted for prterun compatibility: prun runs Open MPI and MPICH programs alike")
	_ = fs.MarkHidden("personality")
	fs.Var(appendValue{&g.genv}, "genv", "set `VAR VALUE` for every process (Hydra's -genv; a context's own -x or -env wins)")
	fs.StringVar(&g.nameServer, "nameserver", "", "publish the processes' names (MPI_Publish_name) on Hydra's name server at `HOST[:PORT]` (hydra_nameserver, port 6392 by default), where the jobs of other launches, prun's or mpiexec.hydra's, look them up (Hydra's -nameserver)")
	fs.BoolVar(&g.genvAll, "genvall", false, "the processes on other nodes get prun's whole environment, not only -x and the MPI libraries' settings (Hydra's -genvall; also HYDRA_ENV=all)")
	fs.Var(listValue{&g.genvList}, "genvlist", "export the variables of `LIST` (VAR,VAR...) to every process (Hydra's -genvlist)")
	_ = fs.MarkHidden("genvlist")
	fs.StringVar(&g.launcher, "launcher", "", "Hydra's -launcher: `ssh` (the built-in client), rsh (--rsh rsh), slurm (one srun step), auto (slurm inside a Slurm allocation, else ssh; the default) or fork (this node only)")
	fs.StringVar(&g.launcher, "bootstrap", "", "same as -launcher")
	fs.StringVar(&g.launch.rsh, "launcher-exec", "", "same as --rsh (Hydra's -launcher-exec)")
	fs.StringVar(&g.launch.rsh, "bootstrap-exec", "", "same as --rsh")
	for _, f := range []string{"launcher", "bootstrap", "launcher-exec", "bootstrap-exec"} {
		_ = fs.MarkHidden(f)
	}
	fs.StringVar(&g.appFile, "app", "", "read the application contexts from `FILE`, one per line (-n 2 ./a args); -x on the command line applies to all")
	fs.StringVar(&g.appFile, "configfile", "", "same as --app (Hydra's -configfile)")
	_ = fs.MarkHidden("configfile")
	fs.BoolVarP(&g.quiet, "quiet", "q", false, "print no notices about the ranks (how a failed rank ended, Open MPI's help messages): the exit status tells")
	fs.StringVar(&g.dvm, "dvm", "", "run in the persistent runtime `NAME` (or at its directory) started by prun dvm start; default: PRUN_DVM, else this allocation's DVM, else outside any allocation the DVM started with --default, else standalone")
	fs.BoolVar(&g.dvmWait, "wait", false, "with a DVM: a job that does not fit its free slots waits for them instead of being refused")
	fs.StringVar(&g.reportPID, "report-pid", "", "print prun's process id to `WHERE` as it starts: - (stdout), + (stderr) or a file")
	fs.BoolVar(&g.indexArgv, "index-argv-by-rank", false, "each process's argv[0] ends in -RANK (ps tells the ranks apart)")
	fs.StringVar(&g.xterm, "xterm", "", "run the `RANKS` (0,2-3, or -1 for all) each in an xterm window of its own (xterm -e; its node needs xterm and a DISPLAY, -x DISPLAY=...); a trailing ! keeps the windows open after the rank ends (mpirun's)")
	fs.BoolVar(&g.cwdSession, "set-cwd-to-session-dir", false, "each process starts in its own session directory (PMIX_PROCDIR)")
	fs.BoolVar(&g.debugDaemon, "debug-daemons", false, "show what the other nodes' daemons write to stderr (PRUN_DEBUG_REMOTE=1)")
	for _, f := range []string{"debug-daemons-file", "debug-devel"} {
		fs.BoolVar(&g.debugDaemon, f, false, "same as --debug-daemons (mpirun's)")
		_ = fs.MarkHidden(f)
	}
	fs.BoolVar(&g.debugDaemon, "leave-session-attached", false, "same as --debug-daemons")
	_ = fs.MarkHidden("leave-session-attached")
	fs.StringVar(&g.reportURI, "report-uri", "", "print this node's PMIx server URI (by which PMIx tools attach) to `WHERE` as it starts: - (stdout), + (stderr) or a file")
	fs.StringVar(&g.proctable, "output-proctable", "", "once every process started, print each one's rank, host, program and pid to `WHERE`: - (stdout, also with no value), + (stderr) or a file (mpirun's and prterun's, for debuggers and tools)")
	fs.Lookup("output-proctable").NoOptDefVal = "-"
	fs.StringVar(&g.tune, "tune", "", "read -x and --mca options for every process from the comma-separated `FILES` (mpirun's -tune: the -x variables are exported, Open MPI's processes read the --mca ones)")
	fs.StringVar(&g.amca, "am", "", "Open MPI's aggregate MCA parameter `FILES`, comma-separated, passed on to its processes (mpirun's -am)")
	fs.BoolVar(&g.debug, "debug", false, "run the job under the first parallel debugger of --debugger found in PATH (it starts prun again, and finds the processes through MPIR)")
	fs.BoolVar(&g.debug, "tv", false, "same as --debug (mpirun's -tv)")
	fs.StringVar(&g.debuggers, "debugger", DefaultDebuggers, "the debuggers --debug looks for, in order, separated by ':': command lines where @mpirun@ is prun, @mpirun_args@ its arguments, @np@ the number of processes, @executable@ and @executable_argv@ the first context's program and arguments")
	fs.IntVar(&g.maxRestarts, "max-restarts", 0, "start a rank that fails (exits non-zero or is killed, not by prun, nor after MPI_Abort) again, up to `N` times, on its node, before its failure counts")
	fs.BoolVar(&g.continuous, "continuous", false, "start every rank that fails again, without end, until the job is stopped (mpirun's; --max-restarts without a limit)")
	fs.Var(clearValue{&g.recovery}, "disable-recovery", "a failed rank ends the job (the default; undoes an --enable-recovery before it)")
	fs.Lookup("disable-recovery").NoOptDefVal = "true"
	fs.BoolVar(&g.recovery, "disable-auto-cleanup", false, "same as --enable-recovery (Hydra's)")
	fs.BoolVar(&g.primaryStatus, "report-child-jobs-separately", false, "with --enable-recovery, the exit status is the primary job's alone: the failures of the jobs its ranks spawned are told, not counted (mpirun's)")
	_ = fs.MarkHidden("disable-auto-cleanup")
	fs.BoolVar(&g.noHostProp, "disable-hostname-propagation", false, "let MPICH find its host name itself: no MPIR_CVAR_CH3_INTERFACE_HOSTNAME (Hydra's)")
	_ = fs.MarkHidden("disable-hostname-propagation")
	fs.BoolVar(&g.enableX, "enable-x", false, "X forwarding (Hydra's): not done by prun's SSH client; refused")
	g.refused = map[string]*string{}
	for _, r := range refusedFlags {
		g.refused[r.name] = fs.String(r.name, "", r.why)
		if r.noValue {
			fs.Lookup(r.name).NoOptDefVal = "true"
		}
		_ = fs.MarkHidden(r.name)
	}
	fs.Bool("disable-x", false, "no X forwarding (Hydra's; prun never forwards X)")
	for _, f := range []string{"enable-x", "disable-x"} {
		_ = fs.MarkHidden(f)
	}
	fs.BoolVar(&g.recovery, "enable-recovery", false, "a rank that fails (exits non-zero, is killed, exits without finalize) does not end the job: the others go on, and the first failure is prun's exit status (MPI_Abort still ends the job)")
	fs.BoolVar(&g.progress, "show-progress", false, "report the launch's progress on stderr: daemons up, processes started (each tenth of them)")
	fs.BoolVarP(&g.preloadBin, "preload-binary", "s", false, "send the programs to the other nodes: where a node's copy differs or is missing, the processes run one from the node's session directory")
	fs.StringVar(&g.preloadList, "preload-files", "", "copy the comma-separated `FILES` into every process's working directory on every node (by base name; removed after the job; one of another content there stops the launch)")
	fs.BoolVar(&g.genvNone, "genvnone", false, "pass none of prun's environment to any process (Hydra's -genvnone; see -envnone)")
	_ = fs.MarkHidden("genvnone")
	fs.IntVar(&g.launch.fanout, "launch-fanout", 0, "each daemon starts at most `K` others (tree spawn; default 32)")
	fs.StringVar(&g.launch.ifInclude, "if-include", "", "control traffic (and the MPI libraries) use the network `CIDR|IFACE` (default: the one SSH used)")
	fs.StringVar(&g.launch.ifInclude, "iface", "", "same as --if-include (Hydra's -iface)")
	fs.StringVar(&g.launch.ports, "port-range", "", "the control plane listens on ports of `LOW:HIGH` only (LOW-HIGH, or a comma list), for a firewall; MPICH's processes too (also Hydra's MPIEXEC_PORT_RANGE, Open MPI's oob_tcp_dynamic_ipv4_ports)")
	_ = fs.MarkHidden("iface")
}

// npGiven reports whether the context gave its number of processes (-n, -c).
func npGiven(fs *pflag.FlagSet) bool {
	return fs.Changed("np") || fs.Changed("n") || fs.Changed("count")
}

func addContextFlags(fs *pflag.FlagSet, c *contextOpts) {
	fs.IntVarP(&c.np, "np", "n", 0, "number of processes of this application (default: one per slot)")
	fs.IntVar(&c.np, "n", 0, "same as -n (mpirun's --n)")
	_ = fs.MarkHidden("n")
	fs.IntVarP(&c.np, "count", "c", 0, "same as -n (mpirun's -c)")
	_ = fs.MarkHidden("count")
	fs.VarP(appendValue{&c.env}, "x", "x", "export `VAR` or VAR=value to the processes (repeatable)")
	fs.Var(appendValue{&c.env}, "env", "set `VAR VALUE` for this context's processes (Hydra's -env)")
	fs.Var(listValue{&c.env}, "envlist", "export the variables of `LIST` (VAR,VAR...) to this context's processes (Hydra's -envlist)")
	_ = fs.MarkHidden("envlist")
	fs.StringVar(&c.wdir, "wdir", "", "working `DIR` of the processes")
	fs.StringVar(&c.wdir, "wd", "", "same as --wdir")
	_ = fs.MarkHidden("wd")
	fs.StringVar(&c.path, "path", "", "look for the program in `DIRS` (colon-separated) instead of PATH")
	fs.StringVar(&c.pset, "pset", "", "name this context's processes as the PMIx process set `NAME` (PRRTE's --pset; default: NSPACE.appN)")
	fs.BoolVar(&c.envNone, "envnone", false, "pass none of the launching environment to this context's processes, only -x/-env/--mca variables (Hydra's -envnone)")
	fs.BoolVar(&c.envAll, "envall", false, "pass the launching environment to this context's processes despite -genvnone (Hydra's -envall)")
	_ = fs.MarkHidden("envall")
}

// FlagSet returns every flag prun knows, for help output and completion.
func FlagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("prun", pflag.ContinueOnError)
	addGlobalFlags(fs, &globalOpts{})
	addContextFlags(fs, &contextOpts{})
	return fs
}

func newFlagSet(g *globalOpts, c *contextOpts) *pflag.FlagSet {
	fs := pflag.NewFlagSet("prun", pflag.ContinueOnError)
	fs.SetInterspersed(false) // flags after the program belong to the program
	fs.Usage = func() {}
	fs.SetOutput(discard{})
	if g != nil {
		addGlobalFlags(fs, g)
	} else {
		// The first context's --host is the global one (its hosts are
		// also that app's own once a later context names hosts).
		fs.VarP(appendValue{&c.hosts}, "host", "H", "run this context's processes on `HOSTS`")
		fs.Var(appendValue{&c.hosts}, "hosts", "same as --host")
		stringOnce(fs, &c.given, &c.hostfile, "hostfile", "hostfile", "f", "run this context's processes on the hosts of `FILE`")
		stringOnce(fs, &c.given, &c.hostfile, "hostfile", "machinefile", "", "same as --hostfile")
		_ = fs.MarkHidden("hosts") // completion offers --host alone
	}
	addContextFlags(fs, c)
	return fs
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Parse reads a command line (without argv[0]).
func Parse(args []string, env Env) (*Request, error) {
	var warnings []string
	env.warn = func(w string) { warnings = append(warnings, w) }
	req, err := parse(args, env)
	if req != nil {
		req.Warnings = warnings
	}
	return req, err
}

// parser is one command line's parse: the global options and the job as
// they are built, phase by phase (parse).
type parser struct {
	env   Env
	g     globalOpts
	mca   *mcaParams // Open MPI's launcher parameters (cli/mca.go)
	place spelledPlacement
	job   *jobspec.Job
	ports [][2]int // --port-range
	// by application: -envall, --wdir given, its context's own --host
	// (once a later context gives one)
	envAll, wdirGiven []bool
	appHosts          []string
}

func parse(args []string, env Env) (*Request, error) {
	p := &parser{env: env, job: &jobspec.Job{CmdLine: "prun " + jobspec.ArgvString(args)}}
	if req, err := p.contexts(splitContexts(args)); req != nil || err != nil {
		return req, err // --help, --version, or an error
	}
	perContextHosts(p.job, p.appHosts, &p.g.place, env)
	// Each phase in the order its errors are reported.
	for _, phase := range []func() error{p.environment, p.processes, p.output, p.launch, p.interfaces} {
		if err := phase(); err != nil {
			return nil, err
		}
	}
	if p.g.debug {
		if v, _ := env.LookupEnv(UnderDebugger); v == "" {
			cmd, err := debuggerCommand(p.g.debuggers, args, p.job, env)
			if err != nil {
				return nil, err
			}
			return &Request{Job: p.job, Exec: cmd, place: p.place}, nil
		}
	}
	return &Request{Job: p.job, place: p.place}, nil
}

// contexts parses each context's flags and builds its app (or the apps of
// --app); the first context's flags include the global ones.
func (p *parser) contexts(segs [][]string) (*Request, error) {
	for i, seg := range segs {
		var c contextOpts
		var fs *pflag.FlagSet
		if i == 0 {
			fs = newFlagSet(&p.g, &c)
		} else {
			fs = newFlagSet(nil, &c)
		}
		globalsGo := "" // where global options go, when this context may not have them
		if i > 0 {
			globalsGo = "before the first program"
		}
		rest, err := parseFlags(fs, seg, globalsGo)
		if err == nil {
			err = checkRepeats(c.given, contextWhere(i, len(segs)))
		}
		if err != nil {
			return nil, err
		}
		if i == 0 {
			if err := p.globals(fs); err != nil {
				return nil, err
			}
		}
		c.npSet = npGiven(fs)
		if i == 0 && (p.g.help || p.g.version) {
			return &Request{Help: p.g.help, Version: p.g.version && !p.g.help}, nil
		}
		if i == 0 && p.g.appFile != "" {
			if len(rest) > 0 || len(segs) > 1 {
				return nil, usagef("--app %s gives the applications: no program may follow on the command line", p.g.appFile)
			}
			if c.npSet || c.wdir != "" {
				return nil, usagef("--app %s: give -n and --wdir in the file, for each application", p.g.appFile)
			}
			if p.job.Apps, err = appsFromFile(p.g.appFile, c.env, p.env); err != nil {
				return nil, err
			}
			for _, a := range p.job.Apps { // a line's own -H, as a later context's
				if a.Hosts != "" && a.Hostfile == "" {
					p.job.Place.Hosts = append(p.job.Place.Hosts, a.Hosts)
				}
			}
			break
		}
		app, err := buildApp(i, len(segs), rest, &c, p.env)
		if err != nil {
			return nil, err
		}
		if c.envAll && c.envNone {
			return nil, usagef("-envall and -envnone%s: give one", contextWhere(i, len(segs)))
		}
		app.Hostfile = c.hostfile
		p.job.Apps = append(p.job.Apps, app)
		p.appHosts = append(p.appHosts, strings.Join(c.hosts, ","))
		p.envAll = append(p.envAll, c.envAll)
		p.wdirGiven = append(p.wdirGiven, c.wdir != "")
	}
	return nil, nil
}

// globals checks the global options that need no app and resolves the
// placement: flags, then Hydra's variables and Open MPI's parameters.
func (p *parser) globals(fs *pflag.FlagSet) error {
	g, job, env := &p.g, p.job, p.env
	if fs.Changed("launch-fanout") && g.launch.fanout < 1 {
		return usagef("--launch-fanout %d: want 1 or more", g.launch.fanout)
	}
	if g.place.cpuSet != "" {
		// Open MPI 4's spelling of PRRTE's pe-list mapping.
		if g.place.mapBy != "" {
			return usagef("--cpu-set cannot be combined with --map-by %s (give --map-by pe-list=LIST:...)", g.place.mapBy)
		}
		g.place.mapBy = "pe-list=" + g.place.cpuSet
	}
	p.place = g.place.placement(fs, env)
	p.mca = &mcaParams{cmd: append(append([]string(nil), g.mca...), g.prteMCA...), env: env}
	applyHydraEnv(g, &p.place, env)
	if err := applyMCA(p.mca, g, &p.place, fs.Changed); err != nil {
		return err
	}
	if err := checkPlacement(&p.place); err != nil {
		return err
	}
	var err error
	if job.Place, err = p.place.resolve(); err != nil {
		return err
	}
	return nil
}

// environment gives every app the variables of --mca, -genv, -tune...,
// ahead of its own (a context's own -x of the same variable wins).
func (p *parser) environment() error {
	g, job, env := &p.g, p.job, p.env
	// --mca and -genv values go first: a context's own -x of the same
	// variable wins.
	var globalEnv []string
	var err error
	if p.ports, err = portRange(g.launch.ports, p.mca, env); err != nil {
		return err
	}
	ports := p.ports
	if _, set := env.LookupEnv("MPIR_CVAR_CH3_PORT_RANGE"); len(ports) == 1 && !set {
		// MPICH's own listeners in the range too, as under Hydra
		globalEnv = append(globalEnv, fmt.Sprintf("MPIR_CVAR_CH3_PORT_RANGE=%d:%d", ports[0][0], ports[0][1]))
	}
	if g.tune != "" {
		vars, err := tuneEnv(g.tune, env)
		if err != nil {
			return err
		}
		globalEnv = append(globalEnv, vars...)
	}
	if g.amca != "" {
		globalEnv = append(globalEnv, "OMPI_MCA_mca_base_param_file_prefix="+g.amca)
	}
	globalEnv = append(globalEnv, g.genv...)
	for _, v := range g.genvList {
		val, ok := env.LookupEnv(v)
		if !ok {
			env.warnf("-genvlist: %s is not set in prun's environment, not exported", v)
			continue
		}
		globalEnv = append(globalEnv, v+"="+val)
	}
	for _, kv := range g.mca {
		globalEnv = append(globalEnv, "OMPI_MCA_"+kv)
	}
	for _, kv := range g.pmixMCA {
		globalEnv = append(globalEnv, "PMIX_MCA_"+kv)
	}
	for _, kv := range g.prteMCA {
		globalEnv = append(globalEnv, "PRTE_MCA_"+kv)
	}
	if len(globalEnv) > 0 {
		for i := range job.Apps {
			job.Apps[i].Env = append(append([]string(nil), globalEnv...), job.Apps[i].Env...)
		}
	}
	if g.genvNone {
		for i := range job.Apps {
			job.Apps[i].EnvNone = i >= len(p.envAll) || !p.envAll[i]
		}
	}
	return nil
}

// processes: how ranks are started, restarted and told about the job.
func (p *parser) processes() error {
	g, job, env := &p.g, p.job, p.env
	for _, pf := range []struct{ flag, pattern string }{
		{"-prepend-pattern", g.prefixPat}, {"-outfile-pattern", g.outPat}, {"-errfile-pattern", g.errPat},
	} {
		if pf.pattern == "" {
			continue
		}
		if err := iof.CheckPattern(pf.pattern); err != nil {
			return usagef("%s %q: %v", pf.flag, pf.pattern, err)
		}
		if pf.flag != "-prepend-pattern" && (g.outputFile != "" || outputFiles(g.output)) {
			return usagef("%s and --output-filename or --output dir=/file=: give one", pf.flag)
		}
	}
	job.Verbose, job.Profile, job.OutputPrefix = g.verbose, g.profile, g.prefixPat
	job.OutfilePattern, job.ErrfilePattern = g.outPat, g.errPat
	switch g.usize {
	case "", "SYSTEM":
	case "INFINITE":
		job.UnivSize = jobspec.UnivInfinite
	default:
		n, err := strconv.Atoi(g.usize)
		if err != nil || n < 1 {
			return usagef("-usize %s: want a number of processes, SYSTEM or INFINITE", g.usize)
		}
		job.UnivSize = n
	}
	job.Quiet, job.ReportPID, job.ReportURI, job.OutputProctable = g.quiet, g.reportPID, g.reportURI, g.proctable
	job.DVM, job.DVMWait = g.dvm, g.dvmWait
	job.PreloadBinary, job.ShowProgress, job.EnableRecovery = g.preloadBin, g.progress, g.recovery
	job.PrimaryStatus = g.primaryStatus
	if g.maxRestarts < 0 {
		return usagef("--max-restarts %d: want 0 or more", g.maxRestarts)
	}
	job.MaxRestarts = g.maxRestarts
	if g.continuous {
		if g.maxRestarts > 0 {
			return usagef("--continuous and --max-restarts: give one")
		}
		job.MaxRestarts = jobspec.RestartsUnlimited // Open MPI's continuous operation
	}
	job.NoHostnamePropagation = g.noHostProp
	if g.enableX {
		return usagef("-enable-x: prun's SSH client forwards no X connections (run the X client with DISPLAY set by -x, or through your own ssh -X)")
	}
	for _, r := range refusedFlags {
		if v := *g.refused[r.name]; v != "" && !(r.noValue && v == "false") {
			return usagef("--%s: %s", r.name, r.why)
		}
	}
	if g.preloadList != "" {
		files, err := preloadFiles(g.preloadList, env)
		if err != nil {
			return err
		}
		job.PreloadFiles = files
	}
	job.IndexArgv, job.CwdSessionDir, job.DebugDaemons = g.indexArgv, g.cwdSession, g.debugDaemon
	if g.xterm != "" {
		x, err := jobspec.ParseXterm(g.xterm)
		if err != nil {
			return usagef("--xterm %s: %v", g.xterm, err)
		}
		job.Xterm = x
	}
	psets := map[string]int{}
	for i, a := range job.Apps {
		if a.Pset == "" {
			continue
		}
		if j, dup := psets[a.Pset]; dup {
			return usagef("--pset %s in application contexts %d and %d: each context is a process set of its own", a.Pset, j+1, i+1)
		}
		psets[a.Pset] = i
	}
	if g.cwdSession {
		for i, given := range p.wdirGiven {
			if given {
				return usagef("--set-cwd-to-session-dir and --wdir%s: give one", contextWhere(i, len(job.Apps)))
			}
		}
	}
	return nil
}

// output: the --output forms and their older spellings, the report.
func (p *parser) output() error {
	g, job := &p.g, p.job
	job.TagOutput = g.tagOutput
	forms := append([]string(nil), g.output...)
	if g.tagOutput {
		forms = append(forms, "tag")
	}
	if g.timestamp {
		forms = append(forms, "timestamp")
	}
	if g.outputFile != "" {
		forms = append(forms, "dir="+g.outputFile)
	}
	if g.label {
		forms = append(forms, "rank")
	}
	if g.mergeStderr {
		forms = append(forms, "merge-stderr-to-stdout")
	}
	if g.xml {
		forms = append(forms, "xml")
	}
	if err := parseOutput(strings.Join(forms, ","), &job.Output); err != nil {
		return usagef("%v", err)
	}
	job.Report, job.ReportStateOnTimeout, job.GetStackTraces = g.report, g.stateOnTO, g.stackTraces
	job.PrintExitCodes = g.exitCodes
	return nil
}

// launch: how daemons reach the other nodes, and the name server.
func (p *parser) launch() error {
	g, job, env := &p.g, p.job, p.env
	if g.genvAll && g.genvNone {
		return usagef("-genvall and -genvnone: give one")
	}
	job.EnvAll = g.genvAll
	if g.nameServer != "" {
		addr, err := names.ParseHydraAddr(g.nameServer)
		if err != nil {
			return usagef("-nameserver %v", err)
		}
		job.NameServer = addr
	}
	if g.launch.prefix != "" && !filepath.IsAbs(g.launch.prefix) {
		return usagef("--prefix %s: want an absolute directory", g.launch.prefix)
	}
	if g.launch.rsh == "" && g.launcher == "" {
		g.launcher, g.launch.rsh = remoteShell(p.mca, env)
	}
	localOnly, agent := false, ""
	switch g.launcher {
	case "fork":
		localOnly = true
	case "", "auto":
	case "ssh":
		agent = "ssh"
	case "rsh":
		agent = "ssh"
		if g.launch.rsh == "" {
			g.launch.rsh = "rsh"
		}
	case "slurm":
		if g.launch.rsh != "" {
			return usagef("-launcher slurm and --rsh %s: give one", g.launch.rsh)
		}
		agent = "slurm"
	default:
		return usagef("-launcher %s: prun starts daemons with ssh, rsh, --rsh CMD or slurm (srun; auto: slurm inside an allocation), fork: this node only", g.launcher)
	}
	job.Launch = jobspec.Launch{Prefix: g.launch.prefix, Rsh: g.launch.rsh, Fanout: g.launch.fanout, IfInclude: g.launch.ifInclude,
		LocalOnly: localOnly, Ports: p.ports, Agent: agent}
	return nil
}

// interfaces: stdin, the pseudo-terminal, PMI, the timeout.
func (p *parser) interfaces() error {
	g, job, env := &p.g, p.job, p.env
	switch g.stdin {
	case "all":
		job.Stdin = jobspec.StdinAll
	case "none":
		job.Stdin = jobspec.StdinNone
	default:
		n, err := strconv.Atoi(g.stdin)
		if err != nil || n < 0 {
			return usagef("--stdin %s: want a rank number, all or none", g.stdin)
		}
		job.Stdin = n
	}
	switch g.pty {
	case "":
		job.PTY = jobspec.PTYAuto
	case "true":
		job.PTY = jobspec.PTYOn
	case "false":
		job.PTY = jobspec.PTYOff
	default:
		return usagef("--pty=%s: want true or false", g.pty)
	}
	switch g.pmi {
	case jobspec.PMIAuto, jobspec.PMIx, jobspec.PMI1, jobspec.PMI2, jobspec.PMINone:
		job.PMI = g.pmi
	default:
		return usagef("--pmi %s: want auto, pmix, pmi1, pmi2 or none", g.pmi)
	}
	if g.pmiPort && (g.pmi == jobspec.PMIx || g.pmi == jobspec.PMINone) {
		return usagef("-pmi-port serves PMI-1 and PMI-2 clients: not with --pmi %s", g.pmi)
	}
	job.PMIPort = g.pmiPort
	envTimeout, _ := env.LookupEnv("MPIEXEC_TIMEOUT")
	t, err := parseTimeout(g.timeout, envTimeout)
	job.Timeout = t
	return err
}

// checkPlacement rejects what can be judged without the allocation.
func checkPlacement(p *spelledPlacement) error {
	switch p.RM {
	case "", "user", "slurm", "pbs", "lsf": // hostfile.User, Slurm, PBS, LSF
	default:
		return usagef("-rmk %s: prun reads Slurm, PBS and LSF allocations: want slurm, pbs, lsf or user", p.RM)
	}
	if p.MaxNodes < 0 {
		return usagef("-max-vm-size %d: want a number of hosts", p.MaxNodes)
	}
	switch p.OrderNodes {
	case "", "ascending", "descending":
	default:
		return usagef("-order-nodes %s: want ASCENDING or DESCENDING", p.OrderNodes)
	}
	for _, d := range p.Display {
		switch d {
		case jobspec.DisplayMap, jobspec.DisplayMapJSON, jobspec.DisplayAllocation, jobspec.DisplayTopo, jobspec.DisplayRankMap:
		default:
			return usagef("--display %s: want map, map:json, allocation, topo or rank-map", d)
		}
	}
	for _, c := range p.Compat {
		if c[1] != "" && (c[1][0] == '-' || c[1] == "0") {
			return usagef("--%s %s: want a positive number", c[0], c[1])
		}
	}
	return nil
}

// displays types --display's words (checked with the other placement values).
func displays(words []string) []jobspec.Display {
	var d []jobspec.Display
	for _, w := range words {
		d = append(d, jobspec.Display(w))
	}
	return d
}

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

func (c clearValue) String() string   { return "false" }
func (c clearValue) Type() string     { return "bool" }
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

func (a appendValue) String() string     { return "" }
func (a appendValue) Type() string       { return "stringArray" }
func (a appendValue) Set(s string) error { *a.p = append(*a.p, s); return nil }

// listValue appends each name of a comma-separated list, as -x NAME would.
type listValue struct{ p *[]string }

func (l listValue) String() string { return "" }
func (l listValue) Type() string   { return "stringArray" }
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

// appsFromFile builds the applications of an application file; the command
// line's -x values (common) come before each line's own.
func appsFromFile(path string, common []string, env Env) ([]jobspec.App, error) {
	segs, err := readAppFile(path, env)
	if err != nil {
		return nil, err
	}
	var pre []string
	for _, x := range common {
		kv, err := exportVar(x, env)
		if err != nil {
			return nil, err
		}
		if kv != "" {
			pre = append(pre, kv)
		}
	}
	apps := make([]jobspec.App, 0, len(segs))
	for _, seg := range segs {
		var c contextOpts
		fs := newFlagSet(nil, &c)
		rest, err := parseFlags(fs, seg.args, "on the command line")
		if err == nil {
			err = checkRepeats(c.given, "")
		}
		if err == nil && len(rest) == 0 {
			err = usagef("no program")
		}
		var app jobspec.App
		if err == nil {
			c.npSet = npGiven(fs)
			app, err = buildApp(0, 1, rest, &c, env)
		}
		if err != nil {
			return nil, usagef("%s:%d: %v", path, seg.line, err)
		}
		app.Env = append(append([]string(nil), pre...), app.Env...)
		app.Hosts = strings.Join(c.hosts, ",")
		app.Hostfile = c.hostfile
		apps = append(apps, app)
	}
	return apps, nil
}

// perContextHosts applies mpirun's per-context --host and --hostfile: once
// a context after the first names hosts, each context's --host (the first's
// included) keeps its app on those hosts, and all of them together are the
// job's --host. A context's own hostfile keeps its app on that file's hosts
// (its --host selects among them) and joins the allocation (the launcher
// reads it); once a later context has one, the first context's --hostfile
// is that app's own too, and the job's is --default-hostfile's, if any.
// appHosts holds each context's --host (an --app file's lines set theirs).
func perContextHosts(job *jobspec.Job, appHosts []string, p *placeOpts, env Env) {
	if len(appHosts) == 0 {
		return // an --app file: each line's own hosts are already its app's
	}
	later := job.Apps[min(1, len(job.Apps)):]
	laterFile := slices.ContainsFunc(later, func(a jobspec.App) bool { return a.Hostfile != "" })
	if !laterFile && !slices.ContainsFunc(appHosts[min(1, len(appHosts)):], func(h string) bool { return h != "" }) {
		return
	}
	if first := cmp.Or(p.hostfile, p.hydraFile); laterFile && first != "" {
		job.Apps[0].Hostfile = first
		job.Place.Hostfile = p.fallbackHostfile(env)
	}
	appHosts[0] = strings.Join(job.Place.Hosts, ",")
	job.Place.Hosts = nil
	for i, h := range appHosts {
		job.Apps[i].Hosts = h
		if h != "" && job.Apps[i].Hostfile == "" {
			job.Place.Hosts = append(job.Place.Hosts, h)
		}
	}
}

// outputFiles reports whether --output forms name per-rank files.
func outputFiles(forms []string) bool {
	for _, f := range forms {
		for _, item := range strings.Split(f, ",") {
			if name, _, _ := strings.Cut(strings.TrimSpace(item), "="); name == "dir" || name == "file" {
				return true
			}
		}
	}
	return false
}

// contextWhere names application context i of n in messages, when there
// are several.
func contextWhere(i, n int) string {
	if n > 1 {
		return fmt.Sprintf(" in application context %d", i+1)
	}
	return ""
}

func buildApp(i, n int, rest []string, c *contextOpts, env Env) (jobspec.App, error) {
	where := contextWhere(i, n)
	if len(rest) == 0 {
		switch {
		case n == 1:
			return jobspec.App{}, usagef("no program given (usage: prun [options] -n N PROGRAM [ARGS] [: -n M PROGRAM2 ...])")
		case i == n-1:
			return jobspec.App{}, usagef("stray ':' at the end of the command line: no program follows it")
		default:
			return jobspec.App{}, usagef("no program%s (a stray ':'?)", where)
		}
	}
	if c.np < 0 {
		return jobspec.App{}, usagef("-n %d%s: the number of processes cannot be negative", c.np, where)
	}
	if c.np == 0 && c.npSet {
		return jobspec.App{}, usagef("-n 0%s: at least one process is needed", where)
	}
	if strings.ContainsAny(c.pset, ", \t\n") {
		return jobspec.App{}, usagef("--pset %q%s: a process set's name has no commas or spaces", c.pset, where)
	}
	app := jobspec.App{Argv: rest, NP: c.np, Wdir: c.wdir, EnvNone: c.envNone, Pset: c.pset}
	for _, x := range c.env {
		kv, err := exportVar(x, env)
		if err != nil {
			return app, err
		}
		if kv != "" {
			app.Env = append(app.Env, kv)
		}
	}
	cwd, err := env.Getwd()
	if err != nil {
		return app, usagef("cannot determine the working directory: %v", err)
	}
	if app.Wdir == "" {
		app.Wdir = cwd
	} else {
		if !filepath.IsAbs(app.Wdir) {
			app.Wdir = filepath.Join(cwd, app.Wdir)
		}
		if st, err := os.Stat(app.Wdir); err != nil || !st.IsDir() {
			return app, usagef("--wdir %s%s: not a directory", c.wdir, where)
		}
	}
	if c.path != "" {
		env.LookPath = lookPathIn(c.path, app.Wdir)
	}
	exe, err := resolveProgram(rest[0], app.Wdir, env)
	if err != nil {
		return app, err
	}
	app.Exe = exe
	return app, nil
}

func exportVar(x string, env Env) (string, error) {
	if x == "" {
		return "", usagef("-x needs a variable name")
	}
	name, val, ok := strings.Cut(x, "=")
	if !validEnvName(name) {
		return "", usagef("-x %s: %q is not a valid environment variable name", x, name)
	}
	if ok {
		return name + "=" + val, nil
	}
	v, set := env.LookupEnv(name)
	if !set {
		// as mpirun: a warning, and the job runs (CI scripts pass -x
		// LD_LIBRARY_PATH whether it is set or not)
		env.warnf("-x %s: not set in prun's environment, not exported", name)
		return "", nil
	}
	return name + "=" + v, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}

// resolveProgram finds the program as the shell would (progpath.Resolve),
// a usage error when it cannot.
func resolveProgram(prog, wdir string, env Env) (string, error) {
	path, err := progpath.Resolve(prog, wdir, env.LookPath)
	if err != nil {
		return "", usagef("%v", err)
	}
	return path, nil
}

func parseTimeout(flag, env string) (time.Duration, error) {
	src, v := "--timeout", flag
	if v == "" {
		src, v = "MPIEXEC_TIMEOUT", env
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n <= 0 || n > 1e7 {
		if d, derr := time.ParseDuration(v); derr == nil && d > 0 {
			return d, nil
		}
		return 0, usagef("%s %s: want a positive number of seconds", src, v)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// lookPathIn is exec.LookPath over the directories of --path instead of
// PATH (relative ones from the working directory of the ranks); its
// not-found error names them, for resolveProgram's message.
func lookPathIn(dirs, wdir string) func(string) (string, error) {
	return func(prog string) (string, error) {
		if p, ok := findIn(prog, dirs, wdir, ""); ok {
			return p, nil
		}
		return "", fmt.Errorf("not found in --path %s", dirs)
	}
}

// findIn is the first executable regular file prog in the directories of
// the list dirs, relative ones from base; an empty entry is empty (skipped
// when "", as --path does; "." as PATH's is).
func findIn(prog, dirs, base, empty string) (string, bool) {
	for _, d := range filepath.SplitList(dirs) {
		if d == "" {
			if d = empty; d == "" {
				continue
			}
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(base, d)
		}
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// remoteShell reads the remote shell that users of Open MPI and Hydra name
// outside the command line: Open MPI's plm_rsh_agent and plm_rsh_args (from
// --mca, else OMPI_MCA_*, else its parameter files), else Hydra's
// HYDRA_LAUNCHER_EXEC (or HYDRA_BOOTSTRAP_EXEC). Plain ssh is
// prun's built-in client; anything else becomes --rsh. It returns the
// -launcher word and the --rsh command.
func remoteShell(mca *mcaParams, env Env) (launcher, rsh string) {
	param := func(name string) string {
		v, _, _ := mca.get(name)
		return v
	}
	agent, args := param("plm_rsh_agent"), param("plm_rsh_args")
	if agent == "" {
		for _, name := range []string{"HYDRA_LAUNCHER_EXEC", "HYDRA_BOOTSTRAP_EXEC"} {
			if v, _ := env.LookupEnv(name); strings.TrimSpace(v) != "" {
				return "", strings.TrimSpace(v)
			}
		}
		if args == "" {
			return "", ""
		}
		agent = "ssh"
	}
	// Open MPI's agent is a list of alternatives, "ssh : rsh": the first
	// one found on PATH (ssh always: prun has its own).
	alts := strings.Split(agent, ":")
	pick := strings.TrimSpace(alts[0])
	for _, a := range alts {
		a = strings.TrimSpace(a)
		first, _, _ := strings.Cut(a, " ")
		if _, err := env.LookPath(first); a == "ssh" || first != "" && err == nil {
			pick = a
			break
		}
	}
	if pick == "ssh" && args == "" {
		return "ssh", ""
	}
	if args != "" {
		pick += " " + args
	}
	return "", pick
}
