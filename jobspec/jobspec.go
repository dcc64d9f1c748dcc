// Package jobspec holds what the user asked for: the application contexts of
// an MPMD command line and the job-wide options. It is plain data; the CLI
// fills it in and every later stage (mapper, launcher, daemons) only reads it.
package jobspec

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// App is one application context: `-n 4 ./app a1 a2`.
type App struct {
	Argv []string // Argv[0] is the program as the user typed it
	Exe  string   // absolute path of the program, resolved against PATH and Wdir
	NP   int      // processes; 0 means one per available slot
	Env  []string // "VAR=value" pairs exported with -x
	Wdir string   // absolute working directory of the processes
	// EnvNone: the processes get none of the launching environment (prun's,
	// or a remote node's login environment), only what is set for them
	// (-x, -env, --mca...) and what the launch adds (PMI, PMIx) (Hydra's
	// -envnone/-genvnone).
	EnvNone bool
	// Hosts is this context's own --host list when the contexts name hosts
	// apart (mpirun's per-context -H): its processes go only to those hosts
	// of the allocation. Empty: anywhere in the allocation.
	Hosts string
	// Hostfile is this context's own --hostfile (mpirun's per-context
	// hostfile): its processes go only to that file's hosts (Hosts, when
	// set, selects among them), and the file's hosts join the allocation.
	Hostfile string
	// Pset names this context's processes as a PMIx process set (PRRTE's
	// --pset); empty: the default name, NSPACE.appN.
	Pset string
}

// RestartsUnlimited is Job.MaxRestarts for mpirun's --continuous: a failed
// rank starts again without end.
const RestartsUnlimited = math.MaxInt32

// UnivInfinite is Job.UnivSize (and daemon.Plan.UnivSize) for Hydra's
// -usize INFINITE: the processes are told of no universe size.
const UnivInfinite = -1

// Job is a whole command line.
type Job struct {
	Apps      []App
	CmdLine   string        // the command line as typed, for PMIX_CMD_LINE
	TagOutput bool          // prefix output lines with [app,rank]<stream>:
	Output    Output        // --output and its older spellings (-l, --timestamp-output, --xml, ...)
	Timeout   time.Duration // 0 means none
	PMI       string        // which process-management interfaces ranks get: auto, pmix, pmi1, pmi2, none
	PMIPort   bool          // Hydra's -pmi-port: PMI-1 clients connect to PMI_PORT and name themselves with PMI_ID
	Place     Placement

	Stdin                int    // --stdin: a rank, or StdinAll, StdinNone
	PTY                  PTY    // --pty
	Report               string // --report: write the run's JSON report here
	ReportStateOnTimeout bool   // --report-state-on-timeout
	PrintExitCodes       bool   // --print-all-exitcodes: every rank's ending, after the job
	// NameServer (Hydra's -nameserver HOST[:PORT], as host:port): the names
	// the processes publish go to that hydra_nameserver, where the jobs of
	// other launches find them.
	NameServer string
	// EnvAll (Hydra's -genvall, HYDRA_ENV=all): the ranks on other nodes
	// get the launcher's whole environment (but for its host's and its
	// session's own variables), not only -x and the MPI libraries' settings.
	EnvAll          bool
	GetStackTraces  bool     // --get-stack-traces (on timeout)
	Quiet           bool     // -q: no notices about how ranks ended or Open MPI's help messages
	ReportPID       string   // --report-pid: "-" stdout, "+" stderr, else a file
	ReportURI       string   // --report-uri: the PMIx server's URI, to the same places
	OutputProctable string   // --output-proctable: every rank's host, program and pid once all started, to the same places
	PreloadBinary   bool     // -s/--preload-binary: nodes where a program differs or is missing run a copy sent from here
	PreloadFiles    []string // --preload-files: absolute paths, copied into every process's working directory on every node
	ShowProgress    bool     // --show-progress: daemons up and processes started, as they come, on stderr
	EnableRecovery  bool     // --enable-recovery: a failed rank does not end the job; the first failure is its exit status
	// PrimaryStatus (mpirun's -report-child-jobs-separately): with
	// EnableRecovery, a spawned job's failures are told but do not make
	// the exit status: the primary job's alone does.
	PrimaryStatus bool
	// NoHostnamePropagation is Hydra's -disable-hostname-propagation: MPICH
	// finds its host name itself (no MPIR_CVAR_CH3_INTERFACE_HOSTNAME).
	NoHostnamePropagation bool
	MaxRestarts           int    // --max-restarts: a rank that fails is started again, up to this many times
	IndexArgv             bool   // --index-argv-by-rank: argv[0] becomes "argv[0]-RANK"
	Xterm                 Xterm  // --xterm: ranks that run in an xterm window of their own
	CwdSessionDir         bool   // --set-cwd-to-session-dir: each rank starts in its PMIX_PROCDIR
	DebugDaemons          bool   // --debug-daemons: the other nodes' daemons' stderr shows (PRUN_DEBUG_REMOTE)
	Verbose               bool   // -v: the launch's milestones and every PMI/PMIx request on stderr
	Profile               bool   // Hydra's -profile: the launch's milestones with their times (PRUN_DEBUG_TIMING)
	OutputPrefix          string // -prepend-pattern: a Hydra pattern before every output line (iof.Options.Prefix)
	OutfilePattern        string // -outfile-pattern: the ranks' stdout goes to the files it names (iof.Options.OutPattern)
	ErrfilePattern        string // -errfile-pattern: ... their stderr
	UnivSize              int    // -usize: the universe size; 0: the allocation's slots; UnivInfinite: none
	Launch                Launch
	// DVM is --dvm: the persistent runtime to run in (a name or its
	// directory; "" finds one as prun dvm's docs say); DVMWait is --wait: a
	// job that does not fit its free slots waits.
	DVM     string
	DVMWait bool
}

// Job.Stdin's values beside a rank (daemon.Plan.Stdin's too).
const (
	StdinNone = -1
	StdinAll  = -2
)

// Output is how the ranks' output is printed (--output's forms; the iof
// package's Options in the launcher).
type Output struct {
	Tag         bool // [app,rank]<stream>: before each line
	TagDetailed bool // [app,rank,host,pid]<stream>:
	Rank        bool // [rank] (Hydra's -prepend-rank, -l)
	Timestamp   bool
	MergeStderr bool // the ranks' stderr on stdout
	JSON        bool // one JSON object per line
	XML         bool // mpirun's --xml
	Ordered     bool // held back and printed by rank at the end
	Dir, File   string
	Tee         bool // with Dir or File, the terminal keeps a copy (no :nocopy)
}

// Launch says how daemons are started on other nodes.
type Launch struct {
	Prefix    string // --prefix: prun is Prefix/bin/prun there
	Rsh       string // --rsh: an external remote shell command
	Fanout    int    // --launch-fanout (0: the default)
	IfInclude string // --if-include: the control network, CIDR or interface
	LocalOnly bool   // Hydra's -launcher fork: no node but this one
	// Agent starts the other nodes' daemons: "ssh" (SSH or --rsh),
	// "slurm" (one srun step), "" for auto: slurm inside a Slurm
	// allocation unless --rsh was given, else ssh.
	Agent string
	// Ports: the control plane's listeners (the launcher's and the
	// daemons' that start others) take a port of these ranges, lo to hi
	// (--port-range, Hydra's MPIEXEC_PORT_RANGE, Open MPI's
	// oob_tcp_dynamic_ipv4_ports); nil: any port.
	Ports [][2]int
}

// Xterm is mpirun's --xterm: the ranks listed (or all) run as `xterm -T
// TITLE [-hold] -e PROGRAM ARGS`, their terminal I/O in that window.
type Xterm struct {
	All   bool  `json:",omitempty"`
	Ranks []int `json:",omitempty"`
	Hold  bool  `json:",omitempty"` // the window stays open after the rank ends ("!")
}

// Has reports whether rank runs in an xterm.
func (x Xterm) Has(rank int) bool {
	return x.All || slices.Contains(x.Ranks, rank)
}

// ParseXterm reads --xterm's value: ranks as "0,2-3", or -1 for all, and a
// trailing "!" to keep the windows open.
func ParseXterm(spec string) (Xterm, error) {
	var x Xterm
	spec, x.Hold = strings.CutSuffix(strings.TrimSpace(spec), "!")
	if strings.TrimSpace(spec) == "-1" {
		x.All = true
		return x, nil
	}
	seen := map[int]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || a < 0 || a > b || b-a+1+len(x.Ranks) > 1<<16 {
			return Xterm{}, fmt.Errorf("%q: want ranks (0,2-3), or -1 for all, with ! to keep the windows open", item)
		}
		for r := a; r <= b; r++ {
			if !seen[r] {
				seen[r] = true
				x.Ranks = append(x.Ranks, r)
			}
		}
	}
	return x, nil
}

// ParsePorts reads a port range list: "lo:hi" (Hydra's), "lo-hi" (Open
// MPI's), single ports, comma-separated.
func ParsePorts(spec string) ([][2]int, error) {
	var out [][2]int
	items := strings.Split(spec, ",")
	for _, item := range items {
		item = strings.TrimSpace(item)
		where := "" // which item, in a list
		if len(items) > 1 {
			where = strconv.Quote(item) + ": "
		}
		lo, hi, isRange := strings.Cut(item, ":")
		if !isRange {
			lo, hi, isRange = strings.Cut(item, "-")
		}
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(strings.TrimSpace(lo))
		b, errB := strconv.Atoi(strings.TrimSpace(hi))
		switch {
		case item == "":
			return nil, fmt.Errorf("empty port range")
		case errA != nil || errB != nil:
			return nil, fmt.Errorf("%swant LOW:HIGH, LOW-HIGH or a port", where)
		case a < 1 || b > 65535 || a > b:
			return nil, fmt.Errorf("%swant ports from 1 to 65535, the lower first", where)
		}
		out = append(out, [2]int{a, b})
	}
	return out, nil
}

// Placement is what the user said about hosts, mapping, ranking and
// binding: host sources as given (the launcher reads them), policies parsed
// (the CLI resolved every spelling: --map-by, mpirun's -npernode, Open MPI's
// MCA parameters, Hydra's variables).
type Placement struct {
	Hostfile    string   // --hostfile/--machinefile, else --default-hostfile, else PRUN_HOSTFILE
	Hosts       []string // --host (comma lists, repeatable)
	AddHosts    []string // --add-host
	Rankfile    string   // --rankfile, else --map-by rankfile:FILE=... (MapBy.File)
	MapBy       MapPolicy
	RankBy      RankPolicy
	BindTo      BindPolicy // BindTo.Report: --report-bindings
	MemBind     MemPolicy  // Hydra's -membind
	Display     []Display  // --display, in the order asked
	DoNotLaunch bool
	Topology    string // --topology: hwloc synthetic description or an XML file
	LocalHost   string // Hydra's -localhost: this node's name in the host list
	RM          string // Hydra's -rmk: the resource manager to read (slurm, pbs, lsf), "user" for none, "" any
	OrderNodes  string // Hydra's -order-nodes: "ascending" or "descending" slots, "" as given
	MaxNodes    int    // mpirun's -max-vm-size: the allocation's first N hosts only (0: all)
}

// PMI interface choices for Job.PMI.
const (
	PMIAuto = "auto" // PMIx and a PMI-1/PMI-2 socket: whichever the rank speaks
	PMIx    = "pmix"
	PMI1    = "pmi1"
	PMI2    = "pmi2"
	PMINone = "none"
)

// NumProcs is the total number of processes once every NP is known.
func (j *Job) NumProcs() int {
	n := 0
	for _, a := range j.Apps {
		n += a.NP
	}
	return n
}

// ArgvString joins an argv the way PMIX_APP_ARGV and messages show it.
func ArgvString(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$") {
			parts[i] = fmt.Sprintf("%q", a)
		} else {
			parts[i] = a
		}
	}
	return strings.Join(parts, " ")
}

// PTY is --pty's choice of a terminal for the rank that reads stdin.
type PTY int

const (
	PTYAuto PTY = iota // on when prun's stdin is a terminal and goes to one rank
	PTYOn              // --pty
	PTYOff             // --pty=false
)

// Display is what --display shows before the job runs.
type Display string

const (
	DisplayMap        Display = "map"        // the map's table
	DisplayMapJSON    Display = "map:json"   // the map as JSON
	DisplayAllocation Display = "allocation" // the hosts and slots
	DisplayTopo       Display = "topo"       // each node's topology
	DisplayRankMap    Display = "rank-map"   // Hydra's (host:ranks) lines
)
