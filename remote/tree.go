// Package remote runs prun's daemons on other nodes: the launcher starts
// them over SSH (rsh) as a tree, each daemon starting its own children, and
// every message between the launcher and a daemon travels the tree's
// authenticated links (ctl). The launcher side is a Tree whose Nodes stand
// in for daemon.Daemons; the daemon side is Serve, behind `prun daemon`,
// which gives its daemon.Daemon an Upstream that is the control plane.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"prun/iof"
	"prun/names"
	"prun/pmixsrv"
	"prun/rsh"
	"prun/topology"
)

// Config says where and how to start daemons.
type Config struct {
	Hosts          []string     // the remote nodes, as the user named them
	Logins         []wire.Login // each host's user and SSH port (empty: defaults for all)
	Exe            string       // prun's path on the nodes
	CopyExe        bool         // send a copy where Exe is missing (see copy.go)
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
	// Root is the launcher's vertex of the collectives (coll.go), shared
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

	// The stdin windows, per vertex and stream (stdin.go), made as a
	// stream's first chunk goes, dropped at its end (t.mu); the preload
	// windows, per vertex (index v-1).
	stdin   map[stdinKey]*wire.Window
	preload []*wire.Window
	// out queues the nodes' output for the Writer (output.go).
	out *outFlow

	stats  stats          // the launcher's structural counters (stats.go)
	gather *wire.Gatherer // the launcher's gathers (gather.go)
	root   *Root          // the collectives' vertex 0 (coll.go)
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
	t.kids.Env = cfg.LaunchEnv
	t.root.attach(cfg.Hosts, cfg.Fanout, func(typ uint8, m any) {
		body, err := wire.Encode(m)
		if err == nil {
			t.kids.Broadcast(typ, wire.Frame(wire.ToBroadcast, wire.ToLauncher, body))
		}
	})
	t.kids.Start()
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

// Node is a remote node's daemon as the launcher drives it.
type Node struct {
	t *Tree
	v int
}

// Node returns the daemon of host.
func (t *Tree) Node(host string) *Node {
	if v := t.vertex[host]; v != 0 {
		return &Node{t: t, v: v}
	}
	return nil
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

// Launch hands the node a plan; failures come back as events. Every
// daemon registers every job, so the launcher hands each plan to every
// node: the first Launch of a plan broadcasts it down the tree (one frame
// per link, each daemon relaying it to its children) and the others have
// nothing left to send. Sent node by node, a plan, whose size grows with
// the job, cost the launcher a frame per node: O(N^2) bytes.
func (n *Node) Launch(p *daemon.Plan) error {
	t := n.t
	t.mu.Lock()
	sent := t.broadcast[p.Nspace]
	if t.broadcast == nil {
		t.broadcast = map[string]bool{}
	}
	t.broadcast[p.Nspace] = true
	t.mu.Unlock()
	if sent {
		return nil
	}
	b, err := t.encodePlan(p)
	if err != nil {
		return err
	}
	t.kids.Broadcast(wire.TLaunch, wire.Frame(wire.ToBroadcast, wire.ToLauncher, b))
	return nil
}

// encodePlan encodes p once for all the nodes the launcher hands it to.
func (t *Tree) encodePlan(p *daemon.Plan) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.plan != p {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		t.plan, t.planJSON = p, b
	}
	return t.planJSON, nil
}

// Signal sends sig to ranks of job nspace (nil: all of them) on the node.
func (n *Node) Signal(nspace string, ranks []int, sig syscall.Signal) {
	n.t.signal(nspace, ranks, sig, []int{n.v})
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

// Forget drops a job that is over from the node (a persistent runtime's).
func (n *Node) Forget(nspace string) {
	n.t.forget(nspace, []int{n.v})
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

func (n *Node) ServeDirectModex(target pmixsrv.Proc, done func([]byte, error)) {
	askNode(n.t, n.v, wire.TServeDmodex, &wire.DmodexReq{Proc: target}, done)
}

func (n *Node) DeliverEvent(code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) error {
	n.t.deliverEvent(&wire.Notify{Status: code, Source: source, Range: rng, Info: info}, []int{n.v})
	return nil
}

// Inspect asks the node for its ranks' states, waiting a bounded time.
func (n *Node) Inspect(nspace string, stacks bool) []daemon.RankState {
	ch := make(chan []daemon.RankState, 1)
	askNode(n.t, n.v, wire.TInspect, &wire.InspectReq{Nspace: nspace, Stacks: stacks}, func(st []daemon.RankState, _ error) { ch <- st })
	select {
	case st := <-ch:
		return st
	case <-time.After(10 * time.Second):
		return nil
	}
}

// OpenStdin opens the node's stdin stream for the ranks of job nspace,
// before the first Stdin.
func (n *Node) OpenStdin(nspace string) { n.t.window(n.v, nspace, true) }

// Stdin passes a chunk of the launcher's stdin to the ranks of job nspace
// on the node (nil: EOF, the stream's end). It waits while the node holds a
// window's worth its ranks have not read. A stream that is over (the node
// is lost, its ranks read no more, the job was forgotten) takes nothing.
func (n *Node) Stdin(nspace string, p []byte) error {
	w := n.t.window(n.v, nspace, false)
	if w == nil {
		return fmt.Errorf("%s: %w", n.t.cfg.Hosts[n.v-1], wire.ErrNodeGone)
	}
	if len(p) == 0 {
		defer n.t.dropWindow(n.v, nspace) // the stream's end
	}
	if err := w.Acquire(len(p)); err != nil {
		n.t.dropWindow(n.v, nspace)
		return fmt.Errorf("%s: %w", n.t.cfg.Hosts[n.v-1], err)
	}
	return n.t.kids.Send(n.v, wire.TStdin, wire.Frame(uint32(n.v), wire.ToLauncher, append(wire.AppendStream(nil, nspace), p...)))
}

// stdinKey names a stdin window: a node's (vertex) stream (namespace).
type stdinKey struct {
	v      int
	nspace string
}

// window is the stdin window of vertex v's stream nspace (nil: none);
// make makes it if it is not there (dead if the node is, or the tree
// closes).
func (t *Tree) window(v int, nspace string, create bool) *wire.Window {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := stdinKey{v, nspace}
	w := t.stdin[k]
	if w == nil && create {
		w = wire.NewWindow(wire.StdinWindow)
		if t.down[v] || t.closing {
			w.Kill()
		}
		t.stdin[k] = w
	}
	return w
}

// dropWindow ends a stream's window: whatever waits on it gives up.
func (t *Tree) dropWindow(v int, nspace string) {
	t.mu.Lock()
	k := stdinKey{v, nspace}
	w := t.stdin[k]
	delete(t.stdin, k)
	t.mu.Unlock()
	if w != nil {
		w.Kill()
	}
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
		// answers for its subtree once its children have: serve.go).
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

// dispatch handles a frame from below.
func (t *Tree) dispatch(typ uint8, payload []byte) {
	_, src, body, err := wire.Header(payload)
	v := int(src)
	if err != nil || v < 1 || v > len(t.cfg.Hosts) {
		return
	}
	host := t.cfg.Hosts[v-1]
	switch typ {
	case wire.TOutput:
		// Queued, never written here: this goroutine reads the link.
		if s, st, p, partial, err := wire.DecodeOutput(body); err == nil {
			t.out.push(wire.OutKey{Src: s, St: st}, outRun{v: v, p: p, partial: partial})
		}
		return
	case wire.TStdinAck:
		ns, ack, err := wire.SplitStream(body)
		k := 0
		if err == nil {
			k, err = wire.DecodeAck(ack, wire.StdinWindow)
		}
		if err != nil {
			t.nodeFailed(host, err)
		} else if w := t.window(v, ns, false); w != nil {
			w.Release(k)
		}
		return
	case wire.TPreloadAck:
		if k, err := wire.DecodeAck(body, wire.PreloadChunk); err == nil {
			t.preload[v-1].Release(k)
		} else {
			t.nodeFailed(host, err)
		}
		return
	case wire.TGathered:
		if err := t.gather.Answered(v, body); err != nil {
			t.nodeFailed(host, err)
		}
		return
	case wire.TStdinDone:
		// The stdin fan-out drops the node's stream.
		if ns, _, err := wire.SplitStream(body); err == nil {
			if w := t.window(v, ns, false); w != nil {
				w.Kill()
			}
		}
		return
	}
	if err := t.handle(v, host, typ, len(payload), body); err != nil {
		t.nodeFailed(host, err)
	}
}

// handle handles a message from vertex v (of host); an error is one it
// cannot read.
func (t *Tree) handle(v int, host string, typ uint8, size int, body []byte) error {
	switch typ {
	case wire.THello:
		var m wire.Hello
		if err := wire.Decode(body, &m); err != nil {
			return err
		}
		return t.hello(v, v, &m)
	case wire.THellos:
		return t.subtreeHellos(v, body)
	case wire.TFailed, wire.TGaveUp:
		return wire.On(body, func(m *wire.NodeErr) { t.failed(v, host, typ == wire.TGaveUp, m) })
	case wire.TSourceInfo:
		return wire.On(body, func(m *wire.RankSource) {
			// Queued too: the Writer's lock may be held by a write to a stalled
			// stdout. Before the source's runs on both streams (applying it
			// twice changes nothing).
			info := &sourceInfo{m.Host, m.Pid}
			for _, st := range []iof.Stream{iof.Stdout, iof.Stderr} {
				t.out.push(wire.OutKey{Src: m.Src, St: st}, outRun{v: v, info: info})
			}
		})
	case wire.TEnd:
		return wire.On(body, func(m *wire.StreamEnd) {
			t.out.push(wire.OutKey{Src: m.Src, St: m.Stream}, outRun{v: v, end: true}) // after the stream's runs
		})
	case wire.TEvent:
		return wire.On(body, func(ev *daemon.Event) { t.out.pushEvent(v, *ev) })
	case wire.TFence:
		// A collective whose participants the daemon could not resolve (a
		// namespace it has no plan of): the launcher says why it fails.
		return wire.On(body, func(m *wire.FenceReq) {
			var err error = pmixsrv.ErrBadParam
			if u, ok := t.up.(unresolved); ok {
				err = u.Unresolved(m.Kind, m.Procs)
			}
			answer(t, v, m.ID, []byte(nil), err)
		})
	case wire.TColl:
		return t.collUp(v, size, body)
	case wire.TDmodex, wire.TNotify, wire.TJobControl, wire.TSpawn, wire.TPublish, wire.TLookup, wire.TUnpublish, wire.TNamespaces, wire.TProcTable:
		return t.request(v, host, typ, body)
	case wire.TClosed:
		return wire.On(body, t.closeAnswer)
	case wire.TReply:
		t.calls.Answered(body)
	}
	return nil
}

// subtreeHellos: a subtree's hellos, combined on the way (hello.go): each
// of a vertex of the subtree of the daemon that sent them.
func (t *Tree) subtreeHellos(v int, body []byte) error {
	var m wire.SubtreeHellos
	if err := wire.Decode(body, &m); err != nil {
		return err
	}
	for i := range m.Hellos {
		if w := m.Hellos[i].Vertex; w < 1 || w > len(t.cfg.Hosts) || !wire.InSubtree(w, v, t.cfg.Fanout) {
			return wire.ErrHelloOutside
		}
	}
	for i := range m.Hellos {
		if err := t.hello(v, m.Hellos[i].Vertex, &m.Hellos[i]); err != nil {
			return err
		}
	}
	return nil
}

// failed: a node failed (to start, or its link), or a daemon gave up on
// its parent (gaveUp).
func (t *Tree) failed(v int, host string, gaveUp bool, m *wire.NodeErr) {
	switch {
	case gaveUp:
		t.nodeFailed(host, &GaveUp{Why: m.Err})
	case strings.HasPrefix(m.Err, spawn.SlurmEndedStep) && t.kids.SlurmStep():
		// Slurm's word on why (a failed node, scancel, the time limit),
		// asked on the link's reader: the ranks' deaths by the same
		// SIGTERM, which follow on this link, must not be news first.
		t.kids.SlurmFail(v, errors.New(m.Err))
	default:
		t.nodeFailed(m.Host, errors.New(m.Err))
	}
}

// collUp: a child's subtree's combined contribution, to the launcher's
// vertex of the combination.
func (t *Tree) collUp(v, size int, body []byte) error {
	var m wire.CollUp
	data, err := wire.DecodeColl(body, &m)
	if err != nil {
		return err
	}
	key := m.Coll
	if m.Expired {
		t.root.timedOut(key, m.Kind, m.Gen, m.Missing)
		return nil
	}
	if t.root.cs.Stale(key, m.Gen) {
		return nil
	}
	t.stats.collIn(key, size)
	done := func(res []byte, err error) {
		b := wire.Frame(uint32(v), wire.ToLauncher, wire.EncodeColl(&wire.CollResult{Coll: key, Status: wire.StatusOf(err)}, res))
		t.stats.collOut(key, len(b), err != nil)
		t.kids.Send(v, wire.TCollDone, b)
	}
	verts, err := wire.UnpackVerts(m.Verts, len(t.cfg.Hosts))
	if err != nil {
		done(nil, err)
		return nil
	}
	t.root.cs.Contribute(v, key, m.Kind, m.Procs, verts, data, done)
	return nil
}

// request: a daemon asks the launcher's upstream (direct modex, events,
// job control, spawn, names, queries); the answer goes back by id.
func (t *Tree) request(v int, host string, typ uint8, body []byte) error {
	up := t.up
	switch typ {
	case wire.TDmodex:
		return wire.On(body, func(m *wire.DmodexReq) {
			up.DirectModex(host, m.Proc, func(data []byte, err error) { answer(t, v, m.ID, data, err) })
		})
	case wire.TNotify:
		return wire.On(body, func(m *wire.Notify) {
			up.NotifyEvent(host, m.Status, m.Source, m.Range, m.Info)
		})
	case wire.TJobControl:
		return wire.On(body, func(m *wire.JobControlReq) {
			up.JobControl(m.Requester, m.Targets, syscall.Signal(m.Sig), func(err error) { answer(t, v, m.ID, wire.None{}, err) })
		})
	case wire.TSpawn:
		return wire.On(body, func(m *wire.SpawnReq) {
			up.Spawn(daemon.SpawnRequest{Parent: m.Parent, Apps: m.Apps, Preput: m.Preput, Done: func(ns string, err error) {
				answer(t, v, m.ID, ns, err)
			}})
		})
	case wire.TPublish:
		return wire.On(body, func(m *wire.PublishReq) {
			up.Names().Publish(m.Entries, func(err error) { answer(t, v, m.ID, wire.None{}, err) })
		})
	case wire.TLookup:
		return wire.On(body, func(m *wire.LookupReq) {
			up.Names().Lookup(m.Keys, m.Wait, m.Timeout, func(e []names.Entry, err error) { answer(t, v, m.ID, wire.Entries(e), err) })
		})
	case wire.TUnpublish:
		return wire.On(body, func(m *wire.UnpublishReq) {
			up.Names().Unpublish(string(m.Publisher), m.Keys, func(err error) { answer(t, v, m.ID, wire.None{}, err) })
		})
	case wire.TNamespaces:
		return wire.On(body, func(m *wire.Request) {
			up.Namespaces(func(ns []string) { answer(t, v, m.ID, ns, nil) })
		})
	case wire.TProcTable:
		return wire.On(body, func(m *wire.NspaceReq) {
			up.ProcTable(m.Nspace, func(pt []pmixsrv.ProcInfo, err error) { answer(t, v, m.ID, pt, err) })
		})
	}
	return nil
}

// closeAnswer: a subtree's answer to the closing broadcast.
func (t *Tree) closeAnswer(m *wire.Closed) {
	t.mu.Lock()
	answered := t.closeAnswers
	t.mu.Unlock()
	if answered != nil && m.Count > 0 {
		select {
		case answered <- m.Count:
		default: // more answers than daemons: a confused subtree, not worth a wait
		}
	}
}

// hello records vertex v's hello, which came over the link of vertex src;
// the start is over when every daemon's is in.
func (t *Tree) hello(src, v int, m *wire.Hello) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hellos[v] != nil {
		return nil
	}
	if w := m.TopoOf; w != 0 {
		// Sent before over the same link: recorded already.
		ref := t.hellos[w]
		if w < 1 || w > len(t.cfg.Hosts) || !wire.InSubtree(w, src, t.cfg.Fanout) || ref == nil {
			return wire.ErrHelloTopo
		}
		m.Topo, m.TopoXML, m.TopoOf = ref.Topo, ref.TopoXML, 0
	}
	t.hellos[v] = m
	if r := t.revival[v]; r != nil {
		delete(t.revival, v)
		delete(t.down, v)
		r.back(v)
		return nil
	}
	if t.started {
		return nil // a node lost during the start said hello after all: still lost
	}
	if t.cfg.OnHello != nil {
		t.cfg.OnHello(len(t.hellos), len(t.cfg.Hosts))
	}
	if len(t.hellos) == len(t.cfg.Hosts) {
		t.started = true
		t.stats.setPhase(phaseRun)
		close(t.ready)
	}
	return nil
}

// unresolved is the launcher's answer to a collective whose participants
// a daemon could not resolve (upstream).
type unresolved interface {
	Unresolved(kind string, procs []pmixsrv.Proc) error
}

// failCollectives fails, everywhere, the collectives that the daemons of
// vertices lost take part in: the launcher decides, each daemon fails its
// pending ones (and later ones with those nodes), and so does the root.
func (t *Tree) failCollectives(lost []int, cause error) {
	if len(lost) == 0 {
		return
	}
	slices.Sort(lost)
	err := fmt.Errorf("a collective failed: %v: %w", cause, pmixsrv.ErrUnreach)
	body, _ := wire.Encode(&wire.CollFail{Verts: wire.PackVerts(lost), Status: wire.StatusOf(err)}) // numbers and words: it encodes
	t.kids.Broadcast(wire.TCollFail, wire.Frame(wire.ToBroadcast, wire.ToLauncher, body))
	t.root.cs.Fail(lost, err)
}
