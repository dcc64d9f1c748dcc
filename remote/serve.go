package remote

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
	b       Bootstrap
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
	lockCopyDir()
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
	var b Bootstrap
	err = json.Unmarshal(line, &b)
	if err == nil && b.Agent == AgentSlurm {
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
		b.OutWindow = outWindow(len(b.Hosts))
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
func newNode(b Bootstrap) *node {
	n := &node{boot: b, me: b.Vertex, host: b.Hosts[b.Vertex-1], gone: make(chan string, 4), out: newOutCredit(b.OutWindow),
		helloSent: make(chan struct{})}
	n.gather = n.newGatherer()
	n.coll = newCollectives(n.me, b.Fanout, func(key string, c *coll, data []byte) {
		n.up.Send(tColl, frame(toLauncher, uint32(n.me), encodeColl(&collUp{Coll: key, Kind: c.kind, Procs: c.procs, Verts: packVerts(c.verts), Gen: c.gen}, data)))
	})
	n.coll.expire = func(key string, c *coll, missing []int) {
		n.up.Send(tColl, frame(toLauncher, uint32(n.me), encodeColl(&collUp{Coll: key, Kind: c.kind, Expired: true, Gen: c.gen, Missing: missing}, nil)))
	}
	if b.Agent == AgentSlurm {
		n.slurmTerm = make(chan struct{})
	}
	n.stdin.ack = func(ns string, k int) {
		n.up.Send(tStdinAck, frame(toLauncher, uint32(n.me), append(appendStream(nil, ns), encodeAck(k)...)))
	}
	n.stdin.done = func(ns string) { n.up.Send(tStdinDone, frame(toLauncher, uint32(n.me), appendStream(nil, ns))) }
	return n
}

// linkParent links the daemon to its parent: over TCP, else over the SSH
// session's stdin and stdout; what goes up goes through one queue.
func (s *serving) linkParent() int {
	n, b := s.n, s.b
	parent, err := dialParent(b)
	if err != nil && b.Agent == AgentSlurm {
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
	go func() { <-parent.Done(); n.out.kill() }()
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
	hosts, err := listenAddrs(b.IfInclude)
	var ln *ctl.Listener
	if err == nil {
		ln, err = ctl.ListenOn(hosts, b.Ports, b.Secret)
	}
	if err != nil {
		n.sendUp(tFailed, &nodeErr{Host: n.host, Err: "cannot listen for its children: " + err.Error()})
		return 1
	}
	cb := b
	cb.ParentPort = ln.Addr().(*net.TCPAddr).Port
	cb.ParentAddrs = ln.Hosts()
	n.kids = newSpawner(n.me, cb, ln, n.fromChild, n.childFailed)
	n.expectHellos(n.kids.children())
	n.kids.start()
	s.defer_(rsh.Shutdown) // after the sessions' close below: prun-ssh goes before this daemon
	// Its children's sessions end before it does: they end as the
	// children see their links close, and the launcher, which waits
	// for its own sessions, then ends after the whole tree (and no
	// session's process is left to whoever reaps orphans).
	s.defer_(func() {
		n.kids.close()
		n.kids.waitSessions(3 * time.Second)
	})
	return 0
}

// fromChild routes what a child sends: hellos combine with this daemon's
// own, collectives, gathers and close answers combine here, the rest goes
// up (events seen on the way).
func (n *node) fromChild(typ uint8, p []byte) {
	switch typ {
	case tHello, tHellos:
		if n.childHello(typ, p) {
			return // it goes up with this daemon's own (hello.go)
		}
	case tFailed:
		n.helloNow() // a failure below goes up at once
	}
	// The parent takes a link only with its child's own hello
	// first: a child's hello (a child started without SSH's
	// handshake, as in a simulated cluster, is up before its
	// parent's PMIx server) waits for it.
	<-n.helloSent
	switch typ {
	case tColl:
		n.childColl(p) // combined here, not relayed
		return
	case tGathered:
		if _, src, body, err := header(p); err == nil {
			n.gather.answered(int(src), body) // combined here, not relayed
		}
		return
	case tClosed:
		n.childClosed(p) // counted here, not relayed
		return
	case tEvent:
		n.childEvent(p) // and relayed
	}
	n.up.Send(typ, p)
}

// childFailed reports a child that failed to start or whose link was lost.
func (n *node) childFailed(v int, err error) {
	n.helloFailure(v)
	<-n.helloSent
	n.closeGone(v)
	n.sendUp(tFailed, &nodeErr{Host: n.boot.Hosts[v-1], Err: err.Error()})
}

// startDaemon takes the session directory and topology readied meanwhile,
// starts the node's daemon (its PMIx server) and says hello.
func (s *serving) startDaemon() int {
	n := s.n
	trace.Mark("children started")
	pre := <-s.ready
	trace.Mark("session dir and topology")
	if pre.sessErr != nil {
		n.sendUp(tFailed, &nodeErr{Host: n.host, Err: pre.sessErr.Error()})
		return 1
	}
	s.sess = pre.sess
	s.defer_(func() { s.sess.Remove() })
	var network *daemon.Network
	if a, ok := n.parent.LocalAddr().(*net.TCPAddr); ok {
		network, _ = NetworkOf(a.IP)
	} else if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 {
		network, _ = NetworkOf(net.ParseIP(f[2])) // the address the SSH session reached
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
		n.sendUp(tFailed, &nodeErr{Host: n.host, Err: "cannot start the PMIx server: " + err.Error()})
		return 1
	}
	n.d, n.topo = d, topo
	trace.Mark("pmix server up")
	hi := &hello{Host: n.host, Pid: os.Getpid()}
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
	if s.b.Agent == AgentSlurm {
		n.slurmSignals()
	}
	why := <-n.gone
	n.out.kill()
	n.calls.fail(errors.New(n.host + ": daemon ending"))
	n.coll.failAll(errors.New(n.host + ": daemon ending"))
	closed := n.closed.Load()
	n.closeDaemon()
	if !closed {
		s.logf("%s: %s; killed its ranks", n.host, why)
	}
	return 0
}

// overSSHMarker, a line on a daemon's standard output, says that the
// control link follows on the session's standard input and output. What a
// login shell may print before it is skipped.
const overSSHMarker = "prun-ctl-over-ssh-v1\n"

// linkOverSSH makes the session's stdio (stdin after the bootstrap) the
// link to the parent.
func linkOverSSH(stdin *bufio.Reader, b Bootstrap) (*ctl.Link, error) {
	if _, err := os.Stdout.WriteString(overSSHMarker); err != nil {
		return nil, err
	}
	return ctl.DialStream(stdin, os.Stdout, closers{os.Stdin, os.Stdout}, b.Secret, uint32(b.Vertex), b.connectTimeout())
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
func dialParent(b Bootstrap) (*ctl.Link, error) {
	var addrs []string
	if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 && b.IfInclude == "" {
		addrs = append(addrs, f[0])
	} else if b.hint != "" && b.IfInclude == "" && slices.Contains(b.ParentAddrs, b.hint) {
		addrs = append(addrs, b.hint)
	}
	for _, a := range b.ParentAddrs {
		if len(addrs) == 0 || a != addrs[0] {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("no address to try")
	}
	timeout := b.connectTimeout()
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
	boot      Bootstrap
	slurmTerm chan struct{} // closed when Slurm signalled the step (AgentSlurm only)
	me        int
	host      string
	parent    *ctl.Link
	up        *upQueue // what goes to the parent, batched (batch.go)
	kids      *spawner
	d         *daemon.Daemon
	topo      *topology.Topology
	calls     calls
	coll      *collectives // the collectives pending at this vertex (coll.go)
	gather    *gatherer    // the gathers pending at this vertex (gather.go)
	stdin     stdinStreams // each job's stdin, by namespace
	out       *outCredit   // the output window (output.go)

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
	b, err := encode(m)
	if err != nil {
		return err
	}
	return n.up.Send(typ, frame(toLauncher, uint32(n.me), b))
}

// askUp sends a request to the launcher; done gets the answer, or the
// link's failure.
func askUp[A any](n *node, typ uint8, req idSetter, done func(A, error)) {
	ask(&n.calls, req, func() error { return n.sendUp(typ, req) }, done)
}

// replyUp answers the launcher's request id.
func replyUp[A any](n *node, id uint64, a A, err error) {
	n.up.Send(tReply, frame(toLauncher, uint32(n.me), encodeReply(id, a, err)))
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
				n.sendUp(tGaveUp, &nodeErr{Host: n.host, Err: why})
			}
			n.end("lost the link to the launcher: " + err.Error())
			return
		}
		dest, _, body, err := header(f.Payload)
		if err != nil {
			continue
		}
		switch {
		case dest == toBroadcast:
			if f.Type == tCollFail {
				// Failed here before below: a member that hears of a timeout
				// may construct again at once, and its next contribution must
				// not find the failed collective still pending above it.
				if err := n.handle(f.Type, body); err != nil {
					n.end(err.Error())
					return
				}
				if n.kids != nil {
					n.kids.broadcast(f.Type, f.Payload)
				}
				continue
			}
			if n.kids != nil {
				n.kids.broadcast(f.Type, f.Payload)
			}
		case int(dest) != n.me:
			if n.kids != nil {
				n.kids.send(int(dest), f.Type, f.Payload)
			}
			continue
		}
		switch f.Type {
		case tStdin:
			ns, p, err := splitStream(body)
			if err != nil {
				n.end(err.Error())
				return
			}
			n.stdin.write(ns, p)
			continue
		case tPreload:
			if err := n.receivePreload(body); err != nil {
				n.end(err.Error())
				return
			}
			continue
		case tBatch: // acknowledgements of output, for this subtree (ackdown.go)
			if err := n.ackBatch(body); err != nil {
				n.end(err.Error())
				return
			}
			continue
		case tOutputAck:
			k, key, grant, err := decodeOutAck(body, 1<<40)
			if err != nil {
				n.end(err.Error())
				return
			}
			n.out.ack(k, key, grant)
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
	case tReply:
		n.calls.answered(body)
	case tLaunch:
		n.launch(body)
	case tSignal:
		return on(body, func(m *signal) {
			n.d.Signal(m.Nspace, m.Ranks, syscall.Signal(m.Sig))
		})
	case tForget:
		return on(body, func(m *forget) {
			n.stdin.drop(m.Nspace)
			n.coll.forget(m.Nspace)
			go n.d.Forget(m.Nspace) // it waits for the job's ranks to be reaped
		})
	case tServeDmodex:
		return on(body, func(m *dmodexReq) {
			n.d.ServeDirectModex(m.Proc, func(data []byte, err error) { replyUp(n, m.ID, data, err) })
		})
	case tDeliver:
		return on(body, n.deliver)
	case tGather:
		return on(body, n.gatherHere)
	case tInspect:
		return on(body, func(m *inspectReq) {
			replyUp(n, m.ID, n.d.Inspect(m.Nspace, m.Stacks), nil)
		})
	case tSuspend, tResume:
		n.suspend(typ == tSuspend)
	case tCollDone:
		return n.collDone(body)
	case tCollFail:
		return on(body, n.collFail)
	case tRespawn:
		return on(body, func(m *respawn) {
			if n.kids != nil && ctl.Parent(m.Vertex, n.boot.Fanout) == n.me {
				n.kids.relaunch(m.Vertex)
			}
		})
	case tCollRevive:
		return on(body, func(m *collRevive) {
			if back, err := unpackVerts(m.Verts, len(n.boot.Hosts)); err == nil {
				n.coll.revive(back)
			}
		})
	case tClose:
		n.closeNow()
	}
	return nil
}

// launch registers the plan's job and starts its local ranks, if any.
func (n *node) launch(body []byte) {
	trace.Mark("launch")
	var p daemon.Plan
	if err := json.Unmarshal(body, &p); err != nil {
		n.sendUp(tFailed, &nodeErr{Host: n.host, Err: "bad launch plan: " + err.Error()})
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
func (n *node) deliver(m *notify) {
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
	var m collResult
	data, err := decodeColl(body, &m)
	if err != nil {
		return err
	}
	n.coll.result(m.Coll, data, m.collErr())
	return nil
}

// collFail fails collectives: one that timed out, those of lost nodes, or
// those of a dead process (a group member).
func (n *node) collFail(m *collFail) {
	if m.Coll != "" {
		n.coll.timedOut(m.Coll, m.Gen, m.collErr())
	}
	for _, p := range m.Procs {
		n.coll.failProc(p, m.collErr())
	}
	if len(m.Verts) > 0 {
		lost, err := unpackVerts(m.Verts, len(n.boot.Hosts))
		if err == nil {
			n.coll.fail(lost, m.collErr())
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
	if n.boot.Agent == AgentSlurm {
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
	if !n.out.acquire(outKey{src, st}, len(p), partial) {
		return // the link is gone: so is whoever would print this
	}
	if n.up.Send(tOutput, outputFrame(uint32(n.me), src, st, p, partial)) != nil {
		n.out.kill() // the link died with it (ctl: whole frames or none)
	}
}

func (n *node) SetSourceInfo(src iof.Source, host string, pid int) {
	n.sendUp(tSourceInfo, &rankSource{Src: src, Host: host, Pid: pid})
}

func (n *node) End(src iof.Source, st iof.Stream) { n.sendUp(tEnd, &streamEnd{Src: src, Stream: st}) }

func (n *node) Event(ev daemon.Event) {
	n.holdSlurmKill(ev)
	if ev.Kind == daemon.ProcExited {
		n.coll.procEnded(pmixsrv.Proc{Nspace: ev.Nspace, Rank: pmixsrv.Rank(ev.Rank)})
	}
	n.sendUp(tEvent, &ev)
}

// exitedPrefix begins the body of a ProcExited event, as encoding/json
// writes it (fields in order, no space; Kind first): a relay reads only
// those of the events it passes up (collended_test.go checks the form).
var exitedPrefix = fmt.Appendf(nil, `{"Kind":%d,`, daemon.ProcExited)

// childEvent sees a rank's end pass up from a child's subtree: the group
// operations waiting here for it fail (coll.go, rankSet).
func (n *node) childEvent(p []byte) {
	_, _, body, err := header(p)
	if err != nil || !bytes.HasPrefix(body, exitedPrefix) {
		return
	}
	var ev struct {
		Nspace string
		Rank   int
	}
	if json.Unmarshal(body, &ev) == nil && ev.Rank >= 0 {
		n.coll.procEnded(pmixsrv.Proc{Nspace: ev.Nspace, Rank: pmixsrv.Rank(ev.Rank)})
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
		askUp(n, tFence, &fenceReq{Kind: kind, Procs: procs, Data: data}, done)
		return
	}
	verts := make([]int, 0, len(names))
	for _, name := range names {
		verts = append(verts, n.vertex(name))
	}
	slices.Sort(verts)
	verts = slices.Compact(verts)
	n.coll.contribute(n.me, collKey(kind, procs), kind, procs, verts, data, done)
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
	_, src, body, err := header(p)
	v := int(src)
	if err != nil || v < 1 || v > len(n.boot.Hosts) || ctl.Parent(v, n.boot.Fanout) != n.me {
		return
	}
	var m collUp
	data, err := decodeColl(body, &m)
	if err != nil {
		return
	}
	if m.Expired {
		// A timeout below: the launcher decides.
		n.up.Send(tColl, p)
		return
	}
	if n.coll.stale(m.Coll, m.Gen) {
		return
	}
	done := func(res []byte, err error) {
		n.kids.send(v, tCollDone, frame(uint32(v), uint32(n.me), encodeColl(&collResult{Coll: m.Coll, status: statusOf(err)}, res)))
	}
	verts, err := unpackVerts(m.Verts, len(n.boot.Hosts))
	if err != nil {
		done(nil, err)
		return
	}
	n.coll.contribute(v, m.Coll, m.Kind, m.Procs, verts, data, done)
}

func (n *node) DirectModex(_ string, target pmixsrv.Proc, done func([]byte, error)) {
	askUp(n, tDmodex, &dmodexReq{Proc: target}, done)
}

func (n *node) NotifyEvent(_ string, code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) {
	n.sendUp(tNotify, &notify{Status: code, Source: source, Range: rng, Info: info})
}

func (n *node) JobControl(req pmixsrv.Proc, targets []pmixsrv.Proc, sig syscall.Signal, done func(error)) {
	askUp(n, tJobControl, &jobControlReq{Requester: req, Targets: targets, Sig: int(sig)}, func(_ none, err error) { done(err) })
}

func (n *node) Spawn(req daemon.SpawnRequest) {
	askUp(n, tSpawn, &spawnReq{Parent: req.Parent, Apps: req.Apps, Preput: req.Preput}, req.Done)
}

func (n *node) Names() daemon.NameService { return nodeNames{n} }

func (n *node) Namespaces(done func([]string)) {
	askUp(n, tNamespaces, &request{}, func(ns []string, _ error) { done(ns) })
}

func (n *node) ProcTable(nspace string, done func([]pmixsrv.ProcInfo, error)) {
	askUp(n, tProcTable, &nspaceReq{Nspace: nspace}, done)
}

type nodeNames struct{ n *node }

func (x nodeNames) Publish(entries []names.Entry, done func(error)) {
	askUp(x.n, tPublish, &publishReq{Entries: entries}, func(_ none, err error) { done(err) })
}

func (x nodeNames) Lookup(keys []string, wait bool, timeout time.Duration, done func([]names.Entry, error)) {
	askUp(x.n, tLookup, &lookupReq{Keys: keys, Wait: wait, Timeout: timeout}, func(es entries, err error) { done(es, err) })
}

func (x nodeNames) Unpublish(pub string, keys []string, done func(error)) {
	askUp(x.n, tUnpublish, &unpublishReq{Publisher: jsonbytes.String(pub), Keys: keys}, func(_ none, err error) { done(err) })
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
		n.kids.mu.Lock()
		for v := range n.kids.links {
			c.waiting[v] = true
		}
		n.kids.mu.Unlock()
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
	_, src, body, err := header(p)
	if err != nil {
		return
	}
	var m closed
	if err := decode(body, &m); err != nil {
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
	n.sendUp(tClosed, &closed{Host: n.host, Count: count})
}
