package nodeside

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"prun/internal/trace"
	"prun/remote/spawn"
	"prun/remote/wire"
	"slices"
	"strconv"
	"strings"
	"time"

	"prun/ctl"
	"prun/daemon"
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

// daemon.Upstream, over the control plane.
