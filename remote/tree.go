// Package remote runs prun's daemons on other nodes: the launcher starts
// them over SSH (rsh) as a tree, each daemon starting its own children, and
// every message between the launcher and a daemon travels the tree's
// authenticated links (ctl). This package is the launcher's side: a Tree
// whose Nodes stand in for daemon.Daemons. The daemon's side is
// remote/nodeside (Serve, behind `prun daemon --ctl`, which gives its
// daemon.Daemon an Upstream that is the control plane); what both sides
// share is remote/wire (the messages, the collectives' combination) and
// remote/spawn (starting a vertex's children).
package remote

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"prun/remote/spawn"
	"prun/remote/wire"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"prun/ctl"
	"prun/daemon"
	"prun/pmixsrv"
	"prun/rsh"
	"prun/topology"
)

// Config says where and how to start daemons.
type Config struct {
	Hosts          []string     // the remote nodes, as the user named them
	Logins         []wire.Login // each host's user and SSH port (empty: defaults for all)
	Exe            string       // prun's path on the nodes
	CopyExe        bool         // send a copy where Exe is missing (see remote/spawn/copy.go)
	Home           string       // for SSH settings ($HOME/.ssh)
	Rsh            string       // --rsh: an external remote shell command
	ConnectTimeout time.Duration
	Fanout         int      // children per vertex
	IfInclude      string   // the control network (CIDR or interface)
	Ports          [][2]int // the listeners' port ranges (jobspec.Launch.Ports)
	Env            []string
	// StartTimeout bounds the whole start-up (every daemon's hello).
	StartTimeout time.Duration
	// OnHello, if set, learns of each daemon that said hello: how many
	// have, of how many (--show-progress). It is called in order, before
	// the launch can go on, with the tree locked: it must not call the tree.
	OnHello func(up, of int)
	// Agent starts the daemons: AgentSSH ("" too) or AgentSlurm, with
	// LaunchEnv the environment of srun (the launcher's, with the job's
	// SLURM_* variables).
	Agent     string
	LaunchEnv []string
	// Root is the launcher's vertex of the collectives (root.go), shared
	// with its own node; nil: a root of the tree's own.
	Root *Root
}

// DefaultFanout is the tree's default width; see docs/benchmarks.md for
// the measurement behind it.
const DefaultFanout = 32

// Tree is the launcher's side of the daemons.
type Tree struct {
	cfg   Config
	kids  *spawn.Spawner
	up    daemon.Upstream
	lost  func(host string, err error)
	calls wire.Calls

	vertex map[string]int // by host name, the first vertex of the name (set at Start)

	mu      sync.Mutex
	hellos  map[int]*wire.Hello
	ready   chan struct{} // closed when every daemon said hello
	started bool          // ... it is: a failure now is a node lost, not the start's
	failure chan error
	down    map[int]bool     // vertices lost
	revival map[int]*revival // vertices lost being started again (Revive), until each said hello or failed
	closing bool
	// Reported topologies parsed once per distinct report, so that alike
	// nodes share one *Topology (the mapper's per-topology work is per
	// pointer); the plan last sent, encoded once for every node.
	topos    map[string]*topology.Topology
	plan     *daemon.Plan
	planJSON []byte
	// broadcast: the namespaces whose plans went down (Launch), until
	// Forget; by namespace, not the last plan, as a persistent runtime's
	// submissions launch at once.
	broadcast map[string]bool

	closeAnswers chan int // daemons that answered the closing broadcast, a subtree at a time (tClosed)

	// The stdin windows, per vertex and stream (node.go), made as a
	// stream's first chunk goes, dropped at its end (t.mu); the preload
	// windows, per vertex (index v-1).
	stdin   map[stdinKey]*wire.Window
	preload []*wire.Window
	// out queues the nodes' output for the Writer (output.go).
	out *outFlow

	stats  stats          // the launcher's structural counters (stats.go)
	gather *wire.Gatherer // the launcher's gathers (gather.go)
	root   *Root          // the collectives' vertex 0 (root.go)
}

// Start launches a daemon on every host and waits until each has reported
// (its topology), one failed, or ctx ended (the user gave up: Ctrl-C while a
// slow host keeps the start waiting). Lost nodes later go to lost.
func Start(ctx context.Context, cfg Config, up daemon.Upstream, lost func(host string, err error)) (*Tree, error) {
	if cfg.Fanout < 1 {
		cfg.Fanout = DefaultFanout
	}
	agent := ""
	if cfg.Agent == wire.AgentSlurm {
		// One step starts every daemon: all are the launcher's children.
		agent, cfg.Fanout, cfg.CopyExe = wire.AgentSlurm, max(1, len(cfg.Hosts)), false
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	secret, err := ctl.NewSecret()
	if err != nil {
		return nil, err
	}
	hosts, err := spawn.ListenAddrs(cfg.IfInclude)
	if err != nil {
		return nil, err
	}
	ln, err := ctl.ListenOn(hosts, cfg.Ports, secret)
	if err != nil {
		return nil, fmt.Errorf("control plane: %v", err)
	}
	advertise := ln.Hosts()
	t := &Tree{cfg: cfg, up: up, lost: lost, hellos: map[int]*wire.Hello{}, ready: make(chan struct{}),
		failure: make(chan error, 1), down: map[int]bool{}, revival: map[int]*revival{},
		stdin: map[stdinKey]*wire.Window{}, preload: make([]*wire.Window, len(cfg.Hosts)), root: cfg.Root}
	t.vertex = make(map[string]int, len(cfg.Hosts))
	for v := len(cfg.Hosts); v >= 1; v-- { // the first of a name wins
		t.vertex[cfg.Hosts[v-1]] = v
	}
	if t.root == nil {
		t.root = NewRoot()
	}
	for i := range t.preload {
		t.preload[i] = wire.NewWindow(wire.PreloadWindow)
	}
	outWin := wire.OutWindow(len(cfg.Hosts))
	acks := &ackQueues{fanout: cfg.Fanout, send: func(dest int, typ uint8, p []byte) error { return t.kids.Send(dest, typ, p) },
		count: t.stats.acks, q: map[int][]wire.Queued{}, busy: map[int]bool{}}
	t.out = newOutFlow(len(cfg.Hosts), outWin, up, acks.push, up.Event)
	t.out.hop = func(v int) int { return ctl.NextHop(0, v, cfg.Fanout) }
	boot := wire.Bootstrap{Secret: secret, Hosts: cfg.Hosts, Logins: cfg.Logins, Fanout: cfg.Fanout, ParentPort: ln.Addr().(*net.TCPAddr).Port,
		ParentAddrs: advertise, Exe: cfg.Exe, CopyExe: cfg.CopyExe, Home: cfg.Home, Rsh: cfg.Rsh, ConnectTimeout: cfg.ConnectTimeout,
		IfInclude: cfg.IfInclude, Ports: cfg.Ports, Env: cfg.Env, OutWindow: outWin, Agent: agent}
	if agent == wire.AgentSlurm {
		boot.Env = append(slices.Clip(cfg.Env), spawn.SlurmJobEnv(cfg.LaunchEnv)...)
	}
	t.kids = spawn.NewSpawner(0, boot, ln, t.dispatch, func(v int, err error) { t.nodeFailed(cfg.Hosts[v-1], err) })
	t.gather = t.newGatherer()
	t.countFrames()
	t.kids.Env = cfg.LaunchEnv
	t.root.attach(cfg.Hosts, cfg.Fanout, func(typ uint8, m any) {
		body, err := wire.Encode(m)
		if err == nil {
			t.kids.Broadcast(typ, wire.Frame(wire.ToBroadcast, wire.ToLauncher, body))
		}
	})
	t.kids.Start()
	return t.awaitHellos(ctx)
}

// countFrames has the spawner count what goes through the launcher's links
// (stats.go).
func (t *Tree) countFrames() {
	t.kids.Sent = func(typ uint8, n int) {
		switch typ {
		case wire.TCollDone: // counted by collOut
		case wire.TLaunch:
			t.stats.launch(n)
		default:
			t.stats.frame(false, n)
		}
	}
	t.kids.Recvd = func(typ uint8, n, msgs int) {
		if typ != wire.TColl { // counted by collIn
			t.stats.frame(true, n)
		}
		if typ == wire.TBatch {
			t.stats.batched(msgs)
		}
	}
}

// awaitHellos waits for every daemon's hello, the first failure, the
// caller's cancel or the start's timeout; but for the hellos it closes the
// tree.
func (t *Tree) awaitHellos(ctx context.Context) (*Tree, error) {
	cfg := t.cfg
	select {
	case <-t.ready:
		return t, nil
	case err := <-t.failure:
		t.Close()
		return nil, err
	case <-ctx.Done():
		t.Close()
		return nil, context.Cause(ctx)
	case <-time.After(cfg.StartTimeout):
		t.mu.Lock()
		var missing []string
		for v := 1; v <= len(cfg.Hosts); v++ {
			if t.hellos[v] == nil {
				missing = append(missing, cfg.Hosts[v-1])
			}
		}
		t.mu.Unlock()
		t.Close()
		return nil, fmt.Errorf("%s: no daemon reported within %v", missing[0], cfg.StartTimeout)
	}
}

// nodeFailed is a node that did not start or was lost.
func (t *Tree) nodeFailed(host string, err error) {
	// The nodes below a lost one are cut off with it.
	var cut []string
	var lostVerts []int
	label := host
	t.mu.Lock()
	started := t.started
	closing := t.closing || t.closeAnswers != nil // a daemon that answered the close may end before its link is closed
	for v, h := range t.cfg.Hosts {
		if h != host {
			continue
		}
		if v < len(t.cfg.Logins) {
			label = rsh.Label(host, t.cfg.Logins[v].User, t.cfg.Logins[v].Port)
		}
		for _, w := range ctl.Subtree(v+1, t.cfg.Fanout, len(t.cfg.Hosts)) {
			if r := t.revival[w]; r != nil {
				r.failed(w, err) // down still: started again, it failed again
				delete(t.revival, w)
			}
			if !t.down[w] {
				t.down[w] = true
				lostVerts = append(lostVerts, w)
				for k, win := range t.stdin {
					if k.v == w {
						win.Kill()
					}
				}
				t.preload[w-1].Kill()
				if w != v+1 {
					cut = append(cut, t.cfg.Hosts[w-1])
				}
			}
		}
	}
	t.mu.Unlock()
	// Errors of the SSH client already start with the host's name (as
	// user@host:port when the host list gave those).
	if !strings.HasPrefix(err.Error(), host+": ") && !strings.HasPrefix(err.Error(), label+": ") {
		err = fmt.Errorf("%s: %w", label, err)
	}
	t.calls.Fail(err)
	switch {
	case closing:
	case !started:
		select {
		case t.failure <- err:
		default:
		}
	default:
		// The collectives the lost nodes take part in fail before the
		// state machine hears of the loss (and ends the job, killing the
		// ranks that wait in them): their participants learn why.
		t.failCollectives(lostVerts, err)
		t.lost(host, err)
		for _, h := range cut {
			t.lost(h, fmt.Errorf("cut off with %s", host))
		}
	}
}

// Topology is what a node reported (nil when it could not say).
func (t *Tree) Topology(host string) *topology.Topology {
	t.mu.Lock()
	defer t.mu.Unlock()
	for v, m := range t.hellos {
		if t.cfg.Hosts[v-1] != host {
			continue
		}
		key := "synthetic:" + m.Topo
		if len(m.TopoXML) > 0 {
			key = "xml:" + string(m.TopoXML)
		}
		if topo, ok := t.topos[key]; ok {
			return topo
		}
		var topo *topology.Topology
		var err error
		if len(m.TopoXML) > 0 {
			topo, err = topology.ParseXML(bytes.NewReader(m.TopoXML))
		} else if m.Topo != "" {
			topo, err = topology.ParseSynthetic(m.Topo)
		}
		if err != nil {
			topo = nil
		}
		if t.topos == nil {
			t.topos = map[string]*topology.Topology{}
		}
		t.topos[key] = topo
		return topo
	}
	return nil
}

// LocalNetwork is the launcher's side of the control network: the network
// of the address its daemons reached it at.
func (t *Tree) LocalNetwork() *daemon.Network {
	ip := t.kids.LocalIP()
	if ip == nil {
		return nil
	}
	n, _ := spawn.NetworkOf(ip)
	return n
}

// send sends m (a body of this package's message types) to vertex v.
func (t *Tree) send(v int, typ uint8, m any) error {
	b, err := wire.Encode(m)
	if err != nil {
		return err
	}
	return t.kids.Send(v, typ, wire.Frame(uint32(v), wire.ToLauncher, b))
}

// askNode sends a request to vertex v; done gets the answer, or the
// failure of the link.
func askNode[A any](t *Tree, v int, typ uint8, req wire.IdSetter, done func(A, error)) {
	wire.Ask(&t.calls, req, func() error { return t.send(v, typ, req) }, done)
}

// answer answers vertex v's request id.
func answer[A any](t *Tree, v int, id uint64, a A, err error) {
	t.kids.Send(v, wire.TReply, wire.Frame(uint32(v), wire.ToLauncher, wire.EncodeReply(id, a, err)))
}

// Signal sends sig to ranks of job nspace (nil: all of them) on the nodes
// hosts (those of the job's ranks): each daemon of them signals its ranks
// of the job (none: nothing). Node by node, a job-wide signal cost the
// launcher a frame per node.
func (t *Tree) Signal(nspace string, ranks []int, sig syscall.Signal, hosts []string) {
	t.signal(nspace, ranks, sig, t.vertices(hosts))
}

func (t *Tree) signal(nspace string, ranks []int, sig syscall.Signal, verts []int) {
	body, err := wire.Encode(&wire.Signal{Nspace: nspace, Ranks: ranks, Sig: int(sig)})
	if err != nil {
		return
	}
	t.stats.signal(t.toVertices(wire.TSignal, body, verts))
}

// DeliverEvent hands a PMIx event to the servers of the nodes hosts, but
// skip's (the node it was raised on, which delivered it there): each hands
// it to its clients and tools that registered for it. Node by node, an event
// for every node (a job's end) cost the launcher a frame per node.
func (t *Tree) DeliverEvent(code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info,
	hosts []string, skip string) {
	t.deliverEvent(&wire.Notify{Status: code, Source: source, Range: rng, Info: info, Skip: skip}, t.vertices(hosts))
}

func (t *Tree) deliverEvent(m *wire.Notify, verts []int) {
	body, err := wire.Encode(m)
	if err != nil {
		return
	}
	t.stats.event(t.toVertices(wire.TDeliver, body, verts))
}

// vertices are the vertices of hosts (the first of a name's, as Node's).
func (t *Tree) vertices(hosts []string) []int {
	var verts []int
	for _, h := range hosts {
		if v := t.vertex[h]; v != 0 {
			verts = append(verts, v)
		}
	}
	return verts
}

// toVertices sends a message down to the daemons of verts and returns the
// frames it took. To no more nodes than the launcher has links it goes
// point to point (routed); to more, as one broadcast down the tree, a frame
// per link of the launcher's: each daemon passes it to its children, then
// handles it itself. Either way it keeps its place on every link: after
// the plan, before the close.
func (t *Tree) toVertices(typ uint8, body []byte, verts []int) int {
	if len(verts) > len(ctl.Children(0, t.cfg.Fanout, len(t.cfg.Hosts))) {
		return t.kids.Broadcast(typ, wire.Frame(wire.ToBroadcast, wire.ToLauncher, body))
	}
	frames := 0
	for _, v := range verts {
		if t.kids.Send(v, typ, wire.Frame(uint32(v), wire.ToLauncher, body)) == nil {
			frames++
		}
	}
	return frames
}

// Forget drops a job that is over (a persistent runtime's, or a job ranks
// spawned that ended before the launch) from the nodes hosts: as a signal,
// one broadcast down the tree for more nodes than the launcher has links.
// Node by node, every job's end cost a persistent runtime a frame per node.
func (t *Tree) Forget(nspace string, hosts []string) {
	t.forget(nspace, t.vertices(hosts))
}

func (t *Tree) forget(nspace string, verts []int) {
	t.mu.Lock()
	delete(t.broadcast, nspace)
	t.mu.Unlock()
	for _, v := range verts {
		t.dropWindow(v, nspace) // a fan-out still sending to the job gives up
	}
	body, err := wire.Encode(&wire.Forget{Nspace: nspace})
	if err != nil {
		return
	}
	t.stats.forget(t.toVertices(wire.TForget, body, verts))
}

// Close ends every daemon: each kills and reaps its ranks and answers, then
// the links close and the daemons exit. It waits a bounded time.
func (t *Tree) Close() error {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		return nil
	}
	live := 0
	for v := 1; v <= len(t.cfg.Hosts); v++ {
		if t.hellos[v] != nil && !t.down[v] {
			live++
		}
	}
	t.mu.Unlock()
	t.stats.setPhase(phaseTeardown)
	if live > 0 {
		answered := make(chan int, live)
		t.mu.Lock()
		t.closeAnswers = answered
		t.mu.Unlock()
		// One broadcast; the answers combine along the tree (each daemon
		// answers for its subtree once its children have: remote/nodeside/close.go).
		t.kids.Broadcast(wire.TClose, wire.Frame(wire.ToBroadcast, wire.ToLauncher, nil))
		deadline := time.After(5 * time.Second)
	wait:
		for got := 0; got < live; {
			select {
			case k := <-answered:
				got += k
			case <-deadline:
				break wait
			}
		}
	}
	t.mu.Lock()
	t.closing = true
	for _, w := range t.stdin {
		w.Kill() // a stdin fan-out still waiting on a node gives up
	}
	t.StopPreload()
	t.mu.Unlock()
	t.kids.Close()
	// What the nodes sent is printed before the launcher closes its Writer
	// (normally it was: each NodeJobDone waited for it).
	t.out.wait()
	t.kids.WaitSessions(3 * time.Second)
	rsh.Shutdown() // prun-ssh, with what is left of the sessions
	if os.Getenv("PRUN_DEBUG_REMOTE") == "1" {
		t.kids.DumpStderr(os.Stderr)
	}
	return nil
}

// GaveUp is a daemon's last word: it ends because its parent (the
// launcher, or the daemon it relays through) fell silent.
type GaveUp struct{ Why string }

func (g *GaveUp) Error() string { return "its daemon gave up: " + g.Why }

// Suspend is the launcher's Ctrl-Z: the daemons it links to stop expecting
// its heartbeats (and it theirs) until Resume. Called before the launcher
// stops itself; the frames are in the kernel by then.
func (t *Tree) Suspend() {
	t.kids.Broadcast(wire.TSuspend, wire.Frame(wire.ToBroadcast, wire.ToLauncher, nil))
	for _, l := range t.links() {
		l.Suspend()
	}
}

// Resume is the launcher running again after Suspend.
func (t *Tree) Resume() {
	for _, l := range t.links() {
		l.Resume()
	}
	t.kids.Broadcast(wire.TResume, wire.Frame(wire.ToBroadcast, wire.ToLauncher, nil))
}

// links are the launcher's links to its children.
func (t *Tree) links() []*ctl.Link {
	t.kids.Mu.Lock()
	defer t.kids.Mu.Unlock()
	ls := make([]*ctl.Link, 0, len(t.kids.Links))
	for _, l := range t.kids.Links {
		ls = append(ls, l)
	}
	return ls
}
