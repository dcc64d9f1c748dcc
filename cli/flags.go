// The flag vocabulary: the options of the whole launch and of each context, and the flag sets that read them.

package cli

import (
	"github.com/spf13/pflag"

	"prun/jobspec"
)

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
