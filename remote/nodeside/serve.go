package nodeside

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"prun/internal/jsonbytes"
	"prun/internal/trace"
	"prun/remote/spawn"
	"prun/remote/wire"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"prun/ctl"
	"prun/daemon"
	"prun/iof"
	"prun/names"
	"prun/pmixsrv"
	"prun/rsh"
	"prun/sessiondir"
	"prun/topology"
)

// prep is what a daemon readies while its bootstrap is on its way (inside
// Slurm, srun forwards the step's stdin only some time after the daemon
// started):
// nothing in it depends on the bootstrap, whose variables (Bootstrap.Env)
// never include TMPDIR, where the session directory goes.
type prep struct {
	sess    *sessiondir.Dir
	sessErr error
	topo    *topology.Topology
	xml     []byte
	topoErr error
}

func startPrep() <-chan prep {
	c := make(chan prep, 1)
	go func() {
		var p prep
		p.sess, p.sessErr = sessiondir.Create("")
		p.topo, p.xml, p.topoErr = topology.Local()
		// encoding/json learns a type's fields on its first use; a
		// daemon decodes one launch plan in its life, on the job's path.
		json.Marshal(&daemon.Plan{})
		c <- p
	}()
	return c
}

// serving is what the phases of Serve hand on to each other, and what they
// leave to undo when Serve returns (in reverse order, as defers would).
type serving struct {
	stdin   *bufio.Reader
	logf    func(format string, a ...any)
	ready   <-chan prep
	sess    *sessiondir.Dir // taken from ready: removed at the end
	b       wire.Bootstrap
	n       *node
	overSSH bool // the link runs over the SSH session's stdin and stdout
	undo    []func()
}

func (s *serving) defer_(f func()) { s.undo = append(s.undo, f) }

func (s *serving) unwind() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
}

// Serve is `prun daemon`: it reads its Bootstrap from stdin, connects to
// its parent, starts its own children, hosts the node's PMIx server and
// obeys the launcher until the launcher goes (the parent link or stdin
// closes, or heartbeats stop). Whatever ends it, its ranks end with it.
// It returns the process's exit status.
//
// It runs in phases (readBootstrap, linkParent, startChildren,
// startDaemon, then serve until the end), each a method of its own; a
// phase that fails says why and returns the exit status.
func Serve(stdin io.Reader, stderr io.Writer) int {
	spawn.LockCopyDir()
	s := &serving{stdin: bufio.NewReader(stdin), ready: startPrep()}
	s.logf = func(format string, a ...any) { fmt.Fprintf(stderr, "prun daemon: "+format+"\n", a...) }
	defer s.unwind()
	s.defer_(func() {
		if s.sess == nil { // ended before taking it
			if p := <-s.ready; p.sess != nil {
				p.sess.Remove()
			}
		}
	})
	for _, phase := range []func() int{s.readBootstrap, s.linkParent, s.startChildren, s.startDaemon} {
		if code := phase(); code != 0 {
			return code
		}
	}
	return s.serve()
}

// readBootstrap reads the Bootstrap line from stdin (inside Slurm, the
// node's vertex from its environment), sets its variables, and makes the
// node's vertex: its collectives, gathers and output window.
func (s *serving) readBootstrap() int {
	line, err := s.stdin.ReadBytes('\n')
	if err != nil {
		s.logf("no bootstrap on stdin: %v", err)
		return 1
	}
	var b wire.Bootstrap
	err = json.Unmarshal(line, &b)
	if err == nil && b.Agent == wire.AgentSlurm {
		if err := slurmDaemonEnv(&b); err != nil {
			s.logf("%v", err)
			return 1
		}
	}
	if err != nil || b.Vertex < 1 || b.Vertex > len(b.Hosts) || b.Fanout < 1 {
		s.logf("bad bootstrap")
		return 1
	}
	if b.OutWindow <= 0 {
		b.OutWindow = wire.OutWindow(len(b.Hosts))
	}
	s.b = b
	s.n = newNode(b)
	for _, kv := range b.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			os.Setenv(k, v)
		}
	}
	trace.Mark("%s: bootstrap read", b.Hosts[b.Vertex-1])
	return 0
}

// newNode is the daemon's vertex of the tree, before any link: its
// children's replies read its gatherer.
func newNode(b wire.Bootstrap) *node {
	n := &node{boot: b, me: b.Vertex, host: b.Hosts[b.Vertex-1], gone: make(chan string, 4), out: wire.NewOutCredit(b.OutWindow),
		helloSent: make(chan struct{})}
	n.gather = n.newGatherer()
	n.coll = wire.NewCollectives(n.me, b.Fanout, func(key string, c *wire.Coll, data []byte) {
		n.up.Send(wire.TColl, wire.Frame(wire.ToLauncher, uint32(n.me), wire.EncodeColl(&wire.CollUp{Coll: key, Kind: c.Kind, Procs: c.Procs, Verts: wire.PackVerts(c.Verts), Gen: c.Gen}, data)))
	})
	n.coll.Expire = func(key string, c *wire.Coll, missing []int) {
		n.up.Send(wire.TColl, wire.Frame(wire.ToLauncher, uint32(n.me), wire.EncodeColl(&wire.CollUp{Coll: key, Kind: c.Kind, Expired: true, Gen: c.Gen, Missing: missing}, nil)))
	}
	if b.Agent == wire.AgentSlurm {
		n.slurmTerm = make(chan struct{})
	}
	n.stdin.ack = func(ns string, k int) {
		n.up.Send(wire.TStdinAck, wire.Frame(wire.ToLauncher, uint32(n.me), append(wire.AppendStream(nil, ns), wire.EncodeAck(k)...)))
	}
	n.stdin.done = func(ns string) {
		n.up.Send(wire.TStdinDone, wire.Frame(wire.ToLauncher, uint32(n.me), wire.AppendStream(nil, ns)))
	}
	return n
}

// linkParent links the daemon to its parent: over TCP, else over the SSH
// session's stdin and stdout; what goes up goes through one queue.
func (s *serving) linkParent() int {
	n, b := s.n, s.b
	parent, err := dialParent(b)
	if err != nil && b.Agent == wire.AgentSlurm {
		// Several daemons share the step's stdout: no link can run over it.
		s.logf("%s: cannot connect to the launcher: %v", n.host, err)
		return 1
	}
	if ve := (*ctl.VersionError)(nil); errors.As(err, &ve) {
		// Another prun answered: the session would meet the same one.
		s.logf("%s: cannot link to the launcher: %v", n.host, err)
		return 1
	}
	if err != nil {
		// The parent cannot be reached from here (a firewall, a jump host):
		// the control plane runs over this SSH session instead.
		var sshErr error
		if parent, sshErr = linkOverSSH(s.stdin, b); sshErr != nil {
			s.logf("%s: cannot connect to the launcher (%v), nor over the SSH session (%v)", n.host, err, sshErr)
			return 1
		}
		s.overSSH = true
	}
	trace.Mark("connected")
	parent.SetSilence(ctl.Silence(len(b.Hosts)))
	n.parent = parent
	n.up = newUpQueue(parent)
	s.defer_(func() { parent.Close() })
	// Its last words (a failure, the closing answer) go first, waited for as
	// a write to the parent would be.
	s.defer_(func() { n.up.drain(ctl.Silence(len(b.Hosts))) })
	// Output waiting for credit gives up when the link goes: nothing will
	// acknowledge it (and the ranks must not hang on their pipes).
	go func() { <-parent.Done(); n.out.Kill() }()
	if !s.overSSH {
		// EOF on stdin: the SSH session, hence the launcher (or our parent), is gone.
		go func() {
			io.Copy(io.Discard, s.stdin)
			n.end("the launcher's session closed")
		}()
	}
	return 0
}

// startChildren starts the daemon's children, first: their SSH handshakes
// are the long pole. What they send goes through fromChild.
func (s *serving) startChildren() int {
	n, b := s.n, s.b
	if len(ctl.Children(n.me, b.Fanout, len(b.Hosts))) == 0 {
		return 0
	}
	hosts, err := spawn.ListenAddrs(b.IfInclude)
	var ln *ctl.Listener
	if err == nil {
		ln, err = ctl.ListenOn(hosts, b.Ports, b.Secret)
	}
	if err != nil {
		n.sendUp(wire.TFailed, &wire.NodeErr{Host: n.host, Err: "cannot listen for its children: " + err.Error()})
		return 1
	}
	cb := b
	cb.ParentPort = ln.Addr().(*net.TCPAddr).Port
	cb.ParentAddrs = ln.Hosts()
	n.kids = spawn.NewSpawner(n.me, cb, ln, n.fromChild, n.childFailed)
	n.expectHellos(n.kids.Children())
	n.kids.Start()
	s.defer_(rsh.Shutdown) // after the sessions' close below: prun-ssh goes before this daemon
	// Its children's sessions end before it does: they end as the
	// children see their links close, and the launcher, which waits
	// for its own sessions, then ends after the whole tree (and no
	// session's process is left to whoever reaps orphans).
	s.defer_(func() {
		n.kids.Close()
		n.kids.WaitSessions(3 * time.Second)
	})
	return 0
}

// fromChild routes what a child sends: hellos combine with this daemon's
// own, collectives, gathers and close answers combine here, the rest goes
// up (events seen on the way).
func (n *node) fromChild(typ uint8, p []byte) {
	switch typ {
	case wire.THello, wire.THellos:
		if n.childHello(typ, p) {
			return // it goes up with this daemon's own (hello.go)
		}
	case wire.TFailed:
		n.helloNow() // a failure below goes up at once
	}
	// The parent takes a link only with its child's own hello
	// first: a child's hello (a child started without SSH's
	// handshake, as in a simulated cluster, is up before its
	// parent's PMIx server) waits for it.
	<-n.helloSent
	switch typ {
	case wire.TColl:
		n.childColl(p) // combined here, not relayed
		return
	case wire.TGathered:
		if _, src, body, err := wire.Header(p); err == nil {
			n.gather.Answered(int(src), body) // combined here, not relayed
		}
		return
	case wire.TClosed:
		n.childClosed(p) // counted here, not relayed
		return
	case wire.TEvent:
		n.childEvent(p) // and relayed
	}
	n.up.Send(typ, p)
}

// childFailed reports a child that failed to start or whose link was lost.
func (n *node) childFailed(v int, err error) {
	n.helloFailure(v)
	<-n.helloSent
	n.closeGone(v)
	n.sendUp(wire.TFailed, &wire.NodeErr{Host: n.boot.Hosts[v-1], Err: err.Error()})
}

// startDaemon takes the session directory and topology readied meanwhile,
// starts the node's daemon (its PMIx server) and says hello.
func (s *serving) startDaemon() int {
	n := s.n
	trace.Mark("children started")
	pre := <-s.ready
	trace.Mark("session dir and topology")
	if pre.sessErr != nil {
		n.sendUp(wire.TFailed, &wire.NodeErr{Host: n.host, Err: pre.sessErr.Error()})
		return 1
	}
	s.sess = pre.sess
	s.defer_(func() { s.sess.Remove() })
	var network *daemon.Network
	if a, ok := n.parent.LocalAddr().(*net.TCPAddr); ok {
		network, _ = spawn.NetworkOf(a.IP)
	} else if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 {
		network, _ = spawn.NetworkOf(net.ParseIP(f[2])) // the address the SSH session reached
	}
	topo, xml, topoErr := pre.topo, pre.xml, pre.topoErr
	// The ranks' environment is the session's, taken before the PMIx
	// server starts (it sets variables of its own in this process).
	env := os.Environ()
	d, err := daemon.New(daemon.Config{Name: n.host, Session: s.sess, BaseEnv: env, Network: network,
		JobIO: func(nspace string) daemon.JobIO {
			return daemon.JobIO{Stdin: n.stdin.get(nspace), BaseEnv: slices.Clone(env)}
		}}, n)
	if err != nil {
		n.sendUp(wire.TFailed, &wire.NodeErr{Host: n.host, Err: "cannot start the PMIx server: " + err.Error()})
		return 1
	}
	n.d, n.topo = d, topo
	trace.Mark("pmix server up")
	hi := &wire.Hello{Host: n.host, Pid: os.Getpid()}
	if topoErr == nil {
		hi.Topo = topo.Synthetic()
	}
	if xml != nil && strings.HasPrefix(hi.Topo, "asymmetric") {
		hi.TopoXML = xml // no synthetic description says it all
	}
	n.ownHello(hi) // with its subtree's, when it has children
	trace.Mark("hello ready")
	return 0
}

// serve reads the parent's link until the daemon ends, then fails what
// is pending and kills the ranks.
func (s *serving) serve() int {
	n := s.n
	go n.readParent()
	if s.b.Agent == wire.AgentSlurm {
		n.slurmSignals()
	}
	why := <-n.gone
	n.out.Kill()
	n.calls.Fail(errors.New(n.host + ": daemon ending"))
	n.coll.FailAll(errors.New(n.host + ": daemon ending"))
	closed := n.closed.Load()
	n.closeDaemon()
	if !closed {
		s.logf("%s: %s; killed its ranks", n.host, why)
	}
	return 0
}

// linkOverSSH makes the session's stdio (stdin after the bootstrap) the
// link to the parent.
func linkOverSSH(stdin *bufio.Reader, b wire.Bootstrap) (*ctl.Link, error) {
	if _, err := os.Stdout.WriteString(spawn.OverSSHMarker); err != nil {
		return nil, err
	}
	return ctl.DialStream(stdin, os.Stdout, closers{os.Stdin, os.Stdout}, b.Secret, uint32(b.Vertex), b.ConnectWait())
}

type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

// dialHeadStart is how long an address of the parent's has to take the
// connection before the next one is tried as well: one that drops packets
// fails only after the connect timeout. The kernel takes a connection
// without the parent's process, so a busy parent does not make it slower.
const dialHeadStart = time.Second

// dialParent links to the parent at the first of its addresses that takes a
// connection, in order: the address the SSH connection came from (Slurm's
// launch node, for a step), then the parent's own list. The handshake, which
// a busy parent may take seconds to answer, runs on that connection alone; it
// used to be raced on every address, and the link then often ran over a later
// one, such as a transient interface's (another cluster's bridge, a VPN):
// when that interface goes, the link falls silent without a reset and the
// daemon gives its parent up (TestSimulatedTree256, TestDialParentPrefersFirst).
// A connection that fails the handshake gives way to the next address, but
// for a parent of another wire version (ctl.VersionError): the parent's prun
// is another, at every address.
func dialParent(b wire.Bootstrap) (*ctl.Link, error) {
	var addrs []string
	if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 && b.IfInclude == "" {
		addrs = append(addrs, f[0])
	} else if b.Hint != "" && b.IfInclude == "" && slices.Contains(b.ParentAddrs, b.Hint) {
		addrs = append(addrs, b.Hint)
	}
	for _, a := range b.ParentAddrs {
		if len(addrs) == 0 || a != addrs[0] {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("no address to try")
	}
	timeout := b.ConnectWait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the connects still under way give up
	type result struct {
		c   net.Conn
		err error
	}
	res := make(chan result, len(addrs))
	d := net.Dialer{Timeout: timeout}
	next, pending := 0, 0
	headStart := time.NewTimer(dialHeadStart)
	defer headStart.Stop()
	dialNext := func() {
		addr := net.JoinHostPort(addrs[next], strconv.Itoa(b.ParentPort))
		next++
		pending++
		headStart.Reset(dialHeadStart)
		go func() {
			c, err := d.DialContext(ctx, "tcp", addr)
			res <- result{c, err}
		}()
	}
	// closeLater closes the connections that arrive after the one taken.
	closeLater := func(left int) {
		go func() {
			for ; left > 0; left-- {
				if r := <-res; r.c != nil {
					r.c.Close()
				}
			}
		}()
	}
	var errs []string
	dialNext()
	for pending > 0 {
		select {
		case r := <-res:
			pending--
			if r.err == nil {
				l, err := ctl.Client(r.c, b.Secret, uint32(b.Vertex), timeout)
				if err == nil {
					closeLater(pending)
					return l, nil
				}
				if ve := (*ctl.VersionError)(nil); errors.As(err, &ve) {
					closeLater(pending)
					return nil, err // the parent runs another prun: no address will do
				}
				r.err = err
			}
			errs = append(errs, r.err.Error())
			if pending == 0 && next < len(addrs) {
				dialNext()
			}
		case <-headStart.C:
			if next < len(addrs) {
				dialNext()
			}
		}
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

// node is a remote daemon's side of the control plane; it is the
// daemon.Upstream of the node's Daemon.
type node struct {
	boot      wire.Bootstrap
	slurmTerm chan struct{} // closed when Slurm signalled the step (AgentSlurm only)
	me        int
	host      string
	parent    *ctl.Link
	up        *upQueue // what goes to the parent, batched (batch.go)
	kids      *spawn.Spawner
	d         *daemon.Daemon
	topo      *topology.Topology
	calls     wire.Calls
	coll      *wire.Collectives // the collectives pending at this vertex (coll.go)
	gather    *wire.Gatherer    // the gathers pending at this vertex (gather.go)
	stdin     stdinStreams      // each job's stdin, by namespace
	out       *wire.OutCredit   // the output window (output.go)

	helloSent chan struct{} // closed once this daemon's hello is sent: what its children send waits for it
	hellos    helloState    // its subtree's hellos, combined (hello.go)
	closing   closeState    // the closing broadcast's answer, combined for the subtree
	vertOnce  sync.Once
	verts     map[string]int // node name -> vertex

	closeOnce sync.Once
	closed    atomic.Bool // the launcher said close
	gone      chan string
}

func (n *node) end(why string) {
	select {
	case n.gone <- why:
	default:
	}
}

func (n *node) closeDaemon() {
	n.closeOnce.Do(func() {
		n.stdin.close()
		if n.d != nil {
			n.d.Close()
		}
	})
}

// sendUp sends m (a body of this package's message types; nil: none) to
// the launcher.
func (n *node) sendUp(typ uint8, m any) error {
	b, err := wire.Encode(m)
	if err != nil {
		return err
	}
	return n.up.Send(typ, wire.Frame(wire.ToLauncher, uint32(n.me), b))
}

// askUp sends a request to the launcher; done gets the answer, or the
// link's failure.
func askUp[A any](n *node, typ uint8, req wire.IdSetter, done func(A, error)) {
	wire.Ask(&n.calls, req, func() error { return n.sendUp(typ, req) }, done)
}

// replyUp answers the launcher's request id.
func replyUp[A any](n *node, id uint64, a A, err error) {
	n.up.Send(wire.TReply, wire.Frame(wire.ToLauncher, uint32(n.me), wire.EncodeReply(id, a, err)))
}

// readParent handles what comes down: messages for this node, for every
// node (broadcasts), and for nodes below, which it passes on.
func (n *node) readParent() {
	for {
		f, err := n.parent.Recv()
		if err != nil {
			if silent := (*ctl.SilentError)(nil); errors.As(err, &silent) {
				// Its last word, before its ranks are killed (and their
				// deaths reported), where the link still carries one: a
				// launcher that was stopped reads it once it runs again.
				why := fmt.Sprintf("no heartbeat from the launcher for %v", silent.After)
				if p := ctl.Parent(n.me, n.boot.Fanout); p != 0 {
					why = fmt.Sprintf("no heartbeat from %s's daemon for %v", n.boot.Hosts[p-1], silent.After)
				}
				n.sendUp(wire.TGaveUp, &wire.NodeErr{Host: n.host, Err: why})
			}
			n.end("lost the link to the launcher: " + err.Error())
			return
		}
		dest, _, body, err := wire.Header(f.Payload)
		if err != nil {
			continue
		}
		switch {
		case dest == wire.ToBroadcast:
			if f.Type == wire.TCollFail {
				// Failed here before below: a member that hears of a timeout
				// may construct again at once, and its next contribution must
				// not find the failed collective still pending above it.
				if err := n.handle(f.Type, body); err != nil {
					n.end(err.Error())
					return
				}
				if n.kids != nil {
					n.kids.Broadcast(f.Type, f.Payload)
				}
				continue
			}
			if n.kids != nil {
				n.kids.Broadcast(f.Type, f.Payload)
			}
		case int(dest) != n.me:
			if n.kids != nil {
				n.kids.Send(int(dest), f.Type, f.Payload)
			}
			continue
		}
		switch f.Type {
		case wire.TStdin:
			ns, p, err := wire.SplitStream(body)
			if err != nil {
				n.end(err.Error())
				return
			}
			n.stdin.write(ns, p)
			continue
		case wire.TPreload:
			if err := n.receivePreload(body); err != nil {
				n.end(err.Error())
				return
			}
			continue
		case wire.TBatch: // acknowledgements of output, for this subtree (ackdown.go)
			if err := n.ackBatch(body); err != nil {
				n.end(err.Error())
				return
			}
			continue
		case wire.TOutputAck:
			k, key, grant, err := wire.DecodeOutAck(body, 1<<40)
			if err != nil {
				n.end(err.Error())
				return
			}
			n.out.Ack(k, key, grant)
			continue
		}
		if err := n.handle(f.Type, body); err != nil {
			// The stream from the launcher cannot be read past this: a
			// daemon that no longer understands it is lost.
			n.end(err.Error())
			return
		}
	}
}

// handle handles a message for this daemon; an error is one it cannot read.
func (n *node) handle(typ uint8, body []byte) error {
	switch typ {
	case wire.TReply:
		n.calls.Answered(body)
	case wire.TLaunch:
		n.launch(body)
	case wire.TSignal:
		return wire.On(body, func(m *wire.Signal) {
			n.d.Signal(m.Nspace, m.Ranks, syscall.Signal(m.Sig))
		})
	case wire.TForget:
		return wire.On(body, func(m *wire.Forget) {
			n.stdin.drop(m.Nspace)
			n.coll.Forget(m.Nspace)
			go n.d.Forget(m.Nspace) // it waits for the job's ranks to be reaped
		})
	case wire.TServeDmodex:
		return wire.On(body, func(m *wire.DmodexReq) {
			n.d.ServeDirectModex(m.Proc, func(data []byte, err error) { replyUp(n, m.ID, data, err) })
		})
	case wire.TDeliver:
		return wire.On(body, n.deliver)
	case wire.TGather:
		return wire.On(body, n.gatherHere)
	case wire.TInspect:
		return wire.On(body, func(m *wire.InspectReq) {
			replyUp(n, m.ID, n.d.Inspect(m.Nspace, m.Stacks), nil)
		})
	case wire.TSuspend, wire.TResume:
		n.suspend(typ == wire.TSuspend)
	case wire.TCollDone:
		return n.collDone(body)
	case wire.TCollFail:
		return wire.On(body, n.collFail)
	case wire.TRespawn:
		return wire.On(body, func(m *wire.Respawn) {
			if n.kids != nil && ctl.Parent(m.Vertex, n.boot.Fanout) == n.me {
				n.kids.Relaunch(m.Vertex)
			}
		})
	case wire.TCollRevive:
		return wire.On(body, func(m *wire.CollRevive) {
			if back, err := wire.UnpackVerts(m.Verts, len(n.boot.Hosts)); err == nil {
				n.coll.Revive(back)
			}
		})
	case wire.TClose:
		n.closeNow()
	}
	return nil
}

// launch registers the plan's job and starts its local ranks, if any.
func (n *node) launch(body []byte) {
	trace.Mark("launch")
	var p daemon.Plan
	if err := json.Unmarshal(body, &p); err != nil {
		n.sendUp(wire.TFailed, &wire.NodeErr{Host: n.host, Err: "bad launch plan: " + err.Error()})
		return
	}
	for i := range p.Map.Nodes {
		if p.Map.Nodes[i].Name == n.host {
			p.Map.Nodes[i].Topo = n.topo
		}
	}
	trace.Mark("plan read")
	if err := n.d.Launch(&p); err != nil {
		n.launchFailed(&p, err)
	}
}

// deliver hands an event to the node's PMIx server, unless raised here.
func (n *node) deliver(m *wire.Notify) {
	if m.Skip == n.host {
		return // raised here, and delivered here then
	}
	// Off the link's reader: the library may hold an event (its debugger
	// aggregator does) before it calls back.
	n.d.DeliverEventAsync(m.Status, m.Source, m.Range, m.Info)
}

// suspend: the launcher stops (Ctrl-Z) or continues. Only the launcher
// stops: a daemon below another hears that one's heartbeats throughout.
func (n *node) suspend(stop bool) {
	if ctl.Parent(n.me, n.boot.Fanout) != 0 {
		return
	}
	if stop {
		n.parent.Suspend()
	} else {
		n.parent.Resume()
	}
}

// collDone is a collective's result, on its way down.
func (n *node) collDone(body []byte) error {
	var m wire.CollResult
	data, err := wire.DecodeColl(body, &m)
	if err != nil {
		return err
	}
	n.coll.Result(m.Coll, data, m.CollErr())
	return nil
}

// collFail fails collectives: one that timed out, those of lost nodes, or
// those of a dead process (a group member).
func (n *node) collFail(m *wire.CollFail) {
	if m.Coll != "" {
		n.coll.TimedOut(m.Coll, m.Gen, m.CollErr())
	}
	for _, p := range m.Procs {
		n.coll.FailProc(p, m.CollErr())
	}
	if len(m.Verts) > 0 {
		lost, err := wire.UnpackVerts(m.Verts, len(n.boot.Hosts))
		if err == nil {
			n.coll.Fail(lost, m.CollErr())
		}
	}
}

// closeNow kills and reaps everything, then says so; the launcher closes
// the link after every node has answered, which ends this process.
func (n *node) closeNow() {
	trace.Mark("close")
	n.closed.Store(true)
	n.closeDaemon()
	n.closedHere()
	if n.boot.Agent == wire.AgentSlurm {
		// A daemon of the Slurm step (a leaf: every daemon is the
		// launcher's child) has answered: it ends now rather than when
		// the launcher closes its link, so that Slurm's record of the
		// step's end, which prun waits for, starts sooner.
		n.end("closed")
	}
}

// launchFailed reports every local rank of a plan the daemon refused.
func (n *node) launchFailed(p *daemon.Plan, err error) {
	for _, nd := range p.Map.Nodes {
		if nd.Name != n.host {
			continue
		}
		for _, r := range nd.Procs {
			n.Event(daemon.Event{Kind: daemon.LaunchFailed, Nspace: p.Nspace, Rank: r, Node: n.host, Msg: err.Error()})
		}
	}
	n.Event(daemon.Event{Kind: daemon.NodeJobDone, Nspace: p.Nspace, Node: n.host})
}

// daemon.Upstream, over the control plane.

// Write sends a run within the output window (output.go): it waits, and
// with it the rank's iof reader and, once its pipe is full, the rank, while
// the launcher has a window's worth of this node's output to print.
func (n *node) Write(src iof.Source, st iof.Stream, p []byte, partial bool) {
	if !n.out.Acquire(wire.OutKey{Src: src, St: st}, len(p), partial) {
		return // the link is gone: so is whoever would print this
	}
	if n.up.Send(wire.TOutput, wire.OutputFrame(uint32(n.me), src, st, p, partial)) != nil {
		n.out.Kill() // the link died with it (ctl: whole frames or none)
	}
}

func (n *node) SetSourceInfo(src iof.Source, host string, pid int) {
	n.sendUp(wire.TSourceInfo, &wire.RankSource{Src: src, Host: host, Pid: pid})
}

func (n *node) End(src iof.Source, st iof.Stream) {
	n.sendUp(wire.TEnd, &wire.StreamEnd{Src: src, Stream: st})
}

func (n *node) Event(ev daemon.Event) {
	n.holdSlurmKill(ev)
	if ev.Kind == daemon.ProcExited {
		n.coll.ProcEnded(pmixsrv.Proc{Nspace: ev.Nspace, Rank: pmixsrv.Rank(ev.Rank)})
	}
	n.sendUp(wire.TEvent, &ev)
}

// exitedPrefix begins the body of a ProcExited event, as encoding/json
// writes it (fields in order, no space; Kind first): a relay reads only
// those of the events it passes up (collended_test.go checks the form).
var exitedPrefix = fmt.Appendf(nil, `{"Kind":%d,`, daemon.ProcExited)

// childEvent sees a rank's end pass up from a child's subtree: the group
// operations waiting here for it fail (coll.go, rankSet).
func (n *node) childEvent(p []byte) {
	_, _, body, err := wire.Header(p)
	if err != nil || !bytes.HasPrefix(body, exitedPrefix) {
		return
	}
	var ev struct {
		Nspace string
		Rank   int
	}
	if json.Unmarshal(body, &ev) == nil && ev.Rank >= 0 {
		n.coll.ProcEnded(pmixsrv.Proc{Nspace: ev.Nspace, Rank: pmixsrv.Rank(ev.Rank)})
	}
}

// Fence is this node's contribution to a collective, combined along the
// tree (coll.go).
func (n *node) Fence(_, kind string, procs []pmixsrv.Proc, data []byte, done func([]byte, error)) {
	n.fence(kind, procs, data, done, 0)
}

// fence resolves the participants' nodes from the plans. A namespace this
// daemon does not know may be a spawned job whose plan is still on its way
// (a parent's rank may hear of the spawn from another rank, over MPI, first):
// it waits for the plan a while; then the launcher answers (a connect to
// another launch's job is refused, and said why).
func (n *node) fence(kind string, procs []pmixsrv.Proc, data []byte, done func([]byte, error), tries int) {
	names, ok := n.d.NodesOf(procs)
	if !ok {
		if tries < 20 {
			time.AfterFunc(time.Duration(tries+1)*10*time.Millisecond, func() { n.fence(kind, procs, data, done, tries+1) })
			return
		}
		askUp(n, wire.TFence, &wire.FenceReq{Kind: kind, Procs: procs, Data: data}, done)
		return
	}
	verts := make([]int, 0, len(names))
	for _, name := range names {
		verts = append(verts, n.vertex(name))
	}
	slices.Sort(verts)
	verts = slices.Compact(verts)
	n.coll.Contribute(n.me, wire.CollKey(kind, procs), kind, procs, verts, data, done)
}

// vertex is the vertex of the node named name: the launcher's (0) when no
// daemon of the tree runs there.
func (n *node) vertex(name string) int {
	n.vertOnce.Do(func() {
		n.verts = make(map[string]int, len(n.boot.Hosts))
		for i, h := range n.boot.Hosts {
			n.verts[h] = i + 1
		}
	})
	return n.verts[name]
}

// childColl is a child's combined contribution to a collective.
func (n *node) childColl(p []byte) {
	_, src, body, err := wire.Header(p)
	v := int(src)
	if err != nil || v < 1 || v > len(n.boot.Hosts) || ctl.Parent(v, n.boot.Fanout) != n.me {
		return
	}
	var m wire.CollUp
	data, err := wire.DecodeColl(body, &m)
	if err != nil {
		return
	}
	if m.Expired {
		// A timeout below: the launcher decides.
		n.up.Send(wire.TColl, p)
		return
	}
	if n.coll.Stale(m.Coll, m.Gen) {
		return
	}
	done := func(res []byte, err error) {
		n.kids.Send(v, wire.TCollDone, wire.Frame(uint32(v), uint32(n.me), wire.EncodeColl(&wire.CollResult{Coll: m.Coll, Status: wire.StatusOf(err)}, res)))
	}
	verts, err := wire.UnpackVerts(m.Verts, len(n.boot.Hosts))
	if err != nil {
		done(nil, err)
		return
	}
	n.coll.Contribute(v, m.Coll, m.Kind, m.Procs, verts, data, done)
}

func (n *node) DirectModex(_ string, target pmixsrv.Proc, done func([]byte, error)) {
	askUp(n, wire.TDmodex, &wire.DmodexReq{Proc: target}, done)
}

func (n *node) NotifyEvent(_ string, code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) {
	n.sendUp(wire.TNotify, &wire.Notify{Status: code, Source: source, Range: rng, Info: info})
}

func (n *node) JobControl(req pmixsrv.Proc, targets []pmixsrv.Proc, sig syscall.Signal, done func(error)) {
	askUp(n, wire.TJobControl, &wire.JobControlReq{Requester: req, Targets: targets, Sig: int(sig)}, func(_ wire.None, err error) { done(err) })
}

func (n *node) Spawn(req daemon.SpawnRequest) {
	askUp(n, wire.TSpawn, &wire.SpawnReq{Parent: req.Parent, Apps: req.Apps, Preput: req.Preput}, req.Done)
}

func (n *node) Names() daemon.NameService { return nodeNames{n} }

func (n *node) Namespaces(done func([]string)) {
	askUp(n, wire.TNamespaces, &wire.Request{}, func(ns []string, _ error) { done(ns) })
}

func (n *node) ProcTable(nspace string, done func([]pmixsrv.ProcInfo, error)) {
	askUp(n, wire.TProcTable, &wire.NspaceReq{Nspace: nspace}, done)
}

type nodeNames struct{ n *node }

func (x nodeNames) Publish(entries []names.Entry, done func(error)) {
	askUp(x.n, wire.TPublish, &wire.PublishReq{Entries: entries}, func(_ wire.None, err error) { done(err) })
}

func (x nodeNames) Lookup(keys []string, wait bool, timeout time.Duration, done func([]names.Entry, error)) {
	askUp(x.n, wire.TLookup, &wire.LookupReq{Keys: keys, Wait: wait, Timeout: timeout}, func(es wire.Entries, err error) { done(es, err) })
}

func (x nodeNames) Unpublish(pub string, keys []string, done func(error)) {
	askUp(x.n, wire.TUnpublish, &wire.UnpublishReq{Publisher: jsonbytes.String(pub), Keys: keys}, func(_ wire.None, err error) { done(err) })
}

// closeState combines the answers to the closing broadcast: a daemon
// answers (tClosed) once for its subtree, when it has closed and each child
// it linked has answered or is gone, or after closeWait; the launcher reads
// one answer per child of its own instead of one per daemon.
type closeState struct {
	mu      sync.Mutex
	self    bool         // this daemon has closed
	waiting map[int]bool // children linked when the broadcast came, not yet answered
	count   int          // daemons of this subtree that closed
	early   map[int]int  // answers of children that came before the broadcast reached here
	sent    bool
}

// closeWait bounds a daemon's wait for its children's answers (the
// launcher waits 5 s for all of them).
const closeWait = 4 * time.Second

// closedHere is this daemon's own close done: it answers when its
// children have.
func (n *node) closedHere() {
	c := &n.closing
	c.mu.Lock()
	c.self = true
	c.count++
	c.waiting = map[int]bool{}
	if n.kids != nil {
		n.kids.Mu.Lock()
		for v := range n.kids.Links {
			c.waiting[v] = true
		}
		n.kids.Mu.Unlock()
	}
	for v, k := range c.early {
		if c.waiting[v] {
			delete(c.waiting, v)
			c.count += k
		}
	}
	c.mu.Unlock()
	time.AfterFunc(closeWait, func() { n.answerClose(true) })
	n.answerClose(false)
}

// childClosed is a child's answer for its subtree.
func (n *node) childClosed(p []byte) {
	_, src, body, err := wire.Header(p)
	if err != nil {
		return
	}
	var m wire.Closed
	if err := wire.Decode(body, &m); err != nil {
		return
	}
	c := &n.closing
	c.mu.Lock()
	v := int(src)
	if c.waiting != nil && c.waiting[v] {
		delete(c.waiting, v)
		c.count += m.Count
	} else if c.waiting == nil {
		// Before this daemon heard the broadcast (its child did first):
		// counted now, not waited for later.
		if c.early == nil {
			c.early = map[int]int{}
		}
		c.early[v] = m.Count
	}
	c.mu.Unlock()
	n.answerClose(false)
}

// closeGone is a child lost: no answer will come from it.
func (n *node) closeGone(v int) {
	c := &n.closing
	c.mu.Lock()
	if c.waiting != nil {
		delete(c.waiting, v)
	}
	c.mu.Unlock()
	n.answerClose(false)
}

// answerClose sends the subtree's answer once it is complete (or at the
// deadline, whatever has answered).
func (n *node) answerClose(deadline bool) {
	c := &n.closing
	c.mu.Lock()
	if c.sent || !c.self || (len(c.waiting) > 0 && !deadline) {
		c.mu.Unlock()
		return
	}
	c.sent = true
	count := c.count
	c.mu.Unlock()
	n.sendUp(wire.TClosed, &wire.Closed{Host: n.host, Count: count})
}
