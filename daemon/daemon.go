// Package daemon is prun's node daemon: one Daemon per node hosts the PMIx
// server for every process prun starts there, and one shell per job per
// node (in the spirit of Flux's job shell) starts that job's local ranks,
// forwards their output, signals them and reports their fate upstream.
//
// The daemon never decides a job's outcome. It reports events to its
// Upstream (the launcher, in-process for the local node) and obeys the
// launcher's commands (Launch, Signal, ServeDirectModex, DeliverEvent, Close).
package daemon

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"prun/internal/peercred"
	"prun/iof"
	"prun/names"
	"prun/pmi"
	"prun/pmixsrv"
	"prun/sessiondir"
	"prun/topology"
)

// cleanEnv drops what marks a process as part of a job from an environment
// given to prun's own helpers.
func cleanEnv(env []string) []string { return filterInherited(env) }

// EventKind says what happened to a process.
type EventKind int

const (
	ProcStarted   EventKind = iota
	ProcExited              // Status holds the exit code, or Signal the killing signal
	ProcAborted             // the process called PMIx_Abort (MPI_Abort): Status, Msg
	LaunchFailed            // the process could not be started: Msg
	NodeJobDone             // every local rank of the job exited and its output is drained
	LogMessage              // PMIx_Log: Msg
	ProtocolError           // a malformed or out-of-order PMI request: Msg
	HelpMessage             // an Open MPI help message: Msg (the text), Topic (its file and topic)
	ProcRestarted           // the process failed (Status or Signal) and starts again (--max-restarts): Restart says which time
	Refused                 // a local service refused another user's connection: Msg (no Nspace: it concerns the node)
	Leftover                // at the job's end, processes it left on the node could not be ended: Msg names them
)

// Event is a report from a daemon to the launcher.
type Event struct {
	Kind      EventKind
	Nspace    string
	Rank      int
	Node      string
	Pid       int
	Status    int
	Signal    syscall.Signal
	Connected bool // the process had called PMIx_Init
	Finalized bool // ... and PMIx_Finalize
	Msg       string
	Topic     string    // of a HelpMessage: the same topic from many ranks is shown once
	Restart   int       // of a ProcRestarted: 1 for the first restart
	Time      time.Time // when it happened, on the daemon's clock

	// For ProcExited: what the process used.
	UserCPU, SysCPU time.Duration
	MaxRSSKiB       int64
}

// Upstream is the daemon's link to the launcher. Every method must return
// promptly: they are called from the PMIx library's thread.
type Upstream interface {
	iof.Sink
	Event(Event)
	// Fence contributes this node's data to a collective among procs
	// (kind tells PMIx fences from PMI barriers); done gets the data of all
	// participating nodes.
	Fence(node, kind string, procs []pmixsrv.Proc, data []byte, done func([]byte, error))
	// DirectModex fetches the posted data of a process on another node.
	DirectModex(node string, target pmixsrv.Proc, done func([]byte, error))
	// NotifyEvent passes a client's event to the other nodes.
	NotifyEvent(node string, code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info)
	// JobControl signals targets wherever they run (sig 0 = kill).
	JobControl(requestor pmixsrv.Proc, targets []pmixsrv.Proc, sig syscall.Signal, done func(error))
	// Spawn starts a new job on behalf of a rank (PMIx_Spawn, PMI spawn).
	Spawn(req SpawnRequest)
	// Names is the publish/lookup service, served by the launcher.
	Names() NameService
	Namespaces(done func([]string))
	ProcTable(nspace string, done func([]pmixsrv.ProcInfo, error))
}

// NameService is the name service as a daemon reaches it: asynchronously,
// since it may be a network away.
type NameService interface {
	Publish(entries []names.Entry, done func(error))
	Lookup(keys []string, wait bool, timeout time.Duration, done func([]names.Entry, error))
	Unpublish(publisher string, keys []string, done func(error))
}

// LocalNames serves a NameService from a names.Service in this process.
type LocalNames struct{ S *names.Service }

func (l LocalNames) Publish(e []names.Entry, done func(error)) { done(l.S.Publish(e)) }
func (l LocalNames) Lookup(keys []string, wait bool, timeout time.Duration, done func([]names.Entry, error)) {
	l.S.Lookup(keys, wait, timeout, done)
}
func (l LocalNames) Unpublish(pub string, keys []string, done func(error)) {
	done(l.S.Unpublish(pub, keys))
}

// SpawnRequest asks the launcher for a new job. Done gets the new job's
// namespace once its processes have started.
type SpawnRequest struct {
	Parent pmixsrv.Proc
	Apps   []SpawnApp
	Preput [][2]string
	Done   func(nspace string, err error)
	// FailJobOnRefusal: the client cannot learn of a refusal (pmi's
	// Unheard), so a refused spawn ends the job rather than hang it.
	FailJobOnRefusal bool
}

// SpawnApp is one application of a spawn request.
type SpawnApp struct {
	Cmd  string
	Argv []string // including argv[0]
	Env  []string
	Cwd  string
	NP   int
	// Where the processes may go and where Cmd is, from the spawn's info
	// (MPI's "host", "hostfile", "path"; PMIX_HOST, PMIX_HOSTFILE): a
	// --host style list, a hostfile's path, a colon list of directories.
	Hosts, Hostfile, Path string
}

// StdinStopper is a Config.Stdin whose writer waits on its reader (a pipe
// or the control plane): StopReading tells it that no rank reads any more,
// so that it stops waiting on this node and lets the others have the input.
type StdinStopper interface{ StopReading() }

// Config sets up a daemon.
type Config struct {
	Name    string          // the node's name as the user gave it
	Session *sessiondir.Dir // this node's session directory
	BaseEnv []string        // environment the ranks inherit
	Stdin   io.Reader       // the launcher's stdin (nil: none); see StdinStopper
	TTY     *os.File        // the launcher's terminal, for a --pty rank's window size (nil: none)
	// JobIO, when set, gives each job its own Stdin, TTY and BaseEnv: a
	// persistent runtime's jobs each have a submitter (prun dvm).
	JobIO func(nspace string) JobIO
	// Network is the network of a job across nodes (nil on one node): the
	// MPI libraries are pointed at it.
	Network *Network
}

// JobIO is what a submitter gives its job on the runtime's node: the
// submitter's stdin, terminal and environment.
type JobIO struct {
	Stdin   io.Reader
	TTY     *os.File
	BaseEnv []string
}

// Network is the network a node shares with the others.
type Network struct {
	IP    string // this node's address
	CIDR  string // e.g. 198.18.0.0/24
	Iface string // this node's interface, e.g. eth0
}

// Daemon hosts the PMIx server of one node.
type Daemon struct {
	cfg Config
	up  Upstream
	srv *pmixsrv.Server

	fillWait func()   // reaps the topology-cache filler, if one runs
	topoXML  string   // the node's cached topology, when there is one
	tuning   []string // start-up defaults for ranks (see ompi.go)

	stage staging // preloaded contents that came ahead of their plan

	mu     sync.Mutex
	shells map[string]*shell
	events map[pmixsrv.Status]int // event codes local clients registered for

	refusedUIDs map[int]bool // uids whose refused connections were reported (refuse.go)

	ckpt map[pmixsrv.Proc]ckptMethod // how each process asked to be checkpointed (jobctrl.go)

	delivering sync.WaitGroup // events being handed to the library (DeliverEvent)

	contain containment // whether jobs get cgroups here (contain.go)
	fds     *fdBudget   // the descriptors ranks may hold (fdbudget.go)
}

// New starts the node's PMIx server.
func New(cfg Config, up Upstream) (*Daemon, error) {
	d := &Daemon{cfg: cfg, up: up, shells: map[string]*shell{}, events: map[pmixsrv.Status]int{},
		stage: staging{dir: cfg.Session.Top}, fds: newFDBudget()}
	if os.Getenv("PRUN_DEBUG_PMIX") == "1" {
		pmixsrv.Trace = os.Stderr
	}
	if os.Getenv("PRUN_DEBUG_PMI") == "1" {
		pmi.Trace = os.Stderr
	}
	// The shared-memory data store of libpmix 4.2.2 logs spurious errors
	// for lookups it cannot answer; the hash store is exact and fast enough
	// for the jobs one daemon hosts. A user's own choice stands.
	if _, set := os.LookupEnv("PMIX_MCA_gds"); !set {
		os.Setenv("PMIX_MCA_gds", "hash")
	}
	// Hand libpmix's hwloc the cached topology instead of letting it probe
	// the machine; on a miss, fill the cache beside this launch.
	if c, ok := topology.Cache(); ok && os.Getenv("HWLOC_XMLFILE") == "" {
		if c.Valid() {
			for _, kv := range xmlTopologyEnv(c.Path) {
				k, v, _ := strings.Cut(kv, "=")
				if _, set := os.LookupEnv(k); !set {
					os.Setenv(k, v)
				}
			}
			d.topoXML = c.Path
		} else {
			d.fillWait = c.Fill(cleanEnv(os.Environ()))
		}
	}
	// The fabric probe reads /sys and /dev: beside the server's start
	// rather than after it.
	go nodeHasFabric()
	srv, err := pmixsrv.Init(pmixsrv.Config{
		TmpDir:      cfg.Session.Top,
		Nspace:      fmt.Sprintf("prun-%s-%d", cfg.Name, os.Getpid()),
		Hostname:    cfg.Name,
		ToolSupport: true,
		Refused:     func(p peercred.Peer, why string) { d.refused("PMIx", p, why) },
	}, host{d})
	if err != nil {
		return nil, err
	}
	d.srv = srv
	d.tuning = tuningEnv(cfg.BaseEnv, d.topoXML, cfg.Network)
	// The library re-creates its tmpdir with mode 0755; the session
	// directory is the user's alone.
	if err := os.Chmod(cfg.Session.Top, 0o700); err != nil {
		srv.Finalize()
		return nil, err
	}
	return d, nil
}

// Launch registers a job with the PMIx server and starts its local ranks.
// Ranks that cannot start are reported as LaunchFailed events.
func (d *Daemon) Launch(p *Plan) error {
	self := -1
	for i, n := range p.Map.Nodes {
		if n.Name == d.cfg.Name {
			self = i
		}
	}
	sh := newShell(d, p, self)
	d.mu.Lock()
	if _, dup := d.shells[p.Nspace]; dup {
		d.mu.Unlock()
		return fmt.Errorf("namespace %s launched twice on %s", p.Nspace, d.cfg.Name)
	}
	d.shells[p.Nspace] = sh
	d.mu.Unlock()
	return sh.launch()
}

// Signal sends sig to ranks of a job on this node (all when ranks is nil).
func (d *Daemon) Signal(nspace string, ranks []int, sig syscall.Signal) {
	if sig == SigCheckpoint {
		d.checkpoint(nspace, ranks)
		return
	}
	if m, ok := ckptMethodOf(sig); ok {
		d.recordCkpt(nspace, ranks, m)
		return
	}
	if sh := d.shell(nspace); sh != nil {
		sh.signal(ranks, sig)
	}
}

// ResizePTY gives a job's --pty rank the launcher terminal's window size
// (after SIGWINCH).
func (d *Daemon) ResizePTY(nspace string) {
	if sh := d.shell(nspace); sh != nil {
		sh.io.resize()
	}
}

// ServerURI is the node's PMIx server's contact URI, for tools.
func (d *Daemon) ServerURI() (string, error) { return d.srv.URI() }

// ServeDirectModex answers another node's request for a local process's data.
func (d *Daemon) ServeDirectModex(target pmixsrv.Proc, done func([]byte, error)) {
	d.srv.DmodexRequest(target, done)
}

// DeliverEvent notifies local clients of an event raised elsewhere.
// Close waits for such deliveries, but for a debugger release, which the
// library may hold (its debugger aggregator does): a job's end reaches its
// node's tools before the server goes.
func (d *Daemon) DeliverEvent(code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) error {
	if code != pmixsrv.DebuggerRelease {
		d.delivering.Add(1)
		defer d.delivering.Done()
	}
	info = append(info[:len(info):len(info)], pmixsrv.Info{Key: keyRelayed, Value: true})
	return d.srv.Notify(code, source, rng, info)
}

// keyRelayed marks the events the daemon hands its server (DeliverEvent):
// libpmix 4.2.2 gives the host's own events back to its notify_event upcall
// like a client's, and host.NotifyEvent must not send them on again (every
// node would pass each back and forth without end).
const keyRelayed = "prun.relayed"

// DeliverEventAsync is DeliverEvent off the caller's goroutine (a link's
// reader must not wait for the library), counted for Close before it
// returns, so a close read right after it still waits for it.
func (d *Daemon) DeliverEventAsync(code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) {
	if code == pmixsrv.DebuggerRelease { // not waited for (DeliverEvent)
		go d.DeliverEvent(code, source, rng, info)
		return
	}
	d.delivering.Add(1)
	go func() {
		defer d.delivering.Done()
		d.DeliverEvent(code, source, rng, info)
	}()
}

// Close kills whatever still runs, deregisters every job and stops the PMIx
// server answering. It returns once every local process has been reaped.
// A daemon lives as long as its process, which exits after Close: the server
// is abandoned, not finalized (see pmixsrv.Server.Abandon).
func (d *Daemon) Close() error {
	d.mu.Lock()
	shells := make([]*shell, 0, len(d.shells))
	for _, sh := range d.shells {
		shells = append(shells, sh)
	}
	d.mu.Unlock()
	sort.Slice(shells, func(i, j int) bool { return shells[i].plan.Nspace < shells[j].plan.Nspace })
	for _, sh := range shells {
		sh.close()
		d.srv.DeregisterNspace(sh.plan.Nspace)
	}
	if d.fillWait != nil {
		d.fillWait()
	}
	waitFor(&d.delivering, 5*time.Second)
	d.srv.Abandon()
	return nil
}

// Forget ends a job on this node for good: whatever still runs is killed
// and reaped, the namespace is deregistered, its session directory and
// checkpoint methods go. A persistent runtime
// forgets each job once it is over; a launch forgets its jobs at Close.
func (d *Daemon) Forget(nspace string) {
	d.mu.Lock()
	sh := d.shells[nspace]
	delete(d.shells, nspace)
	for p := range d.ckpt {
		if p.Nspace == nspace {
			delete(d.ckpt, p)
		}
	}
	d.mu.Unlock()
	if sh != nil {
		sh.close()
		d.srv.DeregisterNspace(nspace)
		os.RemoveAll(d.cfg.Session.NSDir(nspace))
	}
}

func (d *Daemon) shell(nspace string) *shell {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.shells[nspace]
}

// waitFor waits for wg, at most d.
func waitFor(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}
