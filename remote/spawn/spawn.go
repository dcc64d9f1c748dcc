package spawn

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"prun/remote/wire"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"prun/ctl"
	"prun/daemon"
	"prun/internal/shellwords"
	"prun/internal/trace"
	"prun/rsh"
)

// DaemonArgs are the arguments after the daemon binary's path.
var DaemonArgs = []string{"daemon", "--ctl"}

// CleanupArgs make prun remove the node's stale session directories (and
// kill what their jobs left) after a daemon that could not do it itself.
var CleanupArgs = []string{"daemon", "--cleanup"}

// Spawner starts the daemons of one vertex's children and relays what they
// send. The launcher and every daemon with children run one.
type Spawner struct {
	Me   int
	Boot wire.Bootstrap // the template of the children's bootstraps
	ln   *ctl.Listener
	// up takes every frame a child sends (the child's hello first).
	up func(typ uint8, payload []byte)
	// failed reports a child that could not start, or whose link is gone.
	failed func(vertex int, err error)
	// Sent, if set, counts each frame sent to a child (the launcher's Stats).
	Sent func(typ uint8, n int)
	// Recvd, if set, counts each frame read from a child: its type, its
	// payload's size and the messages it carried (a batch's, or 1).
	Recvd func(typ uint8, n, msgs int)

	ctx    context.Context
	cancel context.CancelFunc

	Mu       sync.Mutex
	Links    map[int]*ctl.Link
	sessions map[int]*rsh.Session
	// gen counts each child's launches (relaunch): what an earlier one
	// reports (its session's end, its link's) is stale once the child was
	// launched again, and is dropped (failAt).
	gen     map[int]int
	closing bool
	// running counts the remote commands started or being started and not
	// yet ended, those started as the spawner closed too: waitSessions
	// waits for them all, so that none outlives this process (an agent left
	// to a subreaper).
	running int
	stopped *sync.Cond // running fell
	local   net.IP     // this end's address of the first child link
	Step    *step      // the Slurm step of the children's daemons (AgentSlurm)
	Env     []string
}

func (s *Spawner) LocalIP() net.IP {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.local
}

// maxParallelStarts bounds the SSH connections one vertex opens at once
// (a slot is held until the session is open, not for the daemon's life).
const maxParallelStarts = 32

func NewSpawner(me int, boot wire.Bootstrap, ln *ctl.Listener, up func(uint8, []byte), failed func(int, error)) *Spawner {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Spawner{Me: me, Boot: boot, ln: ln, up: up, failed: failed, ctx: ctx, cancel: cancel,
		Links: map[int]*ctl.Link{}, sessions: map[int]*rsh.Session{}, gen: map[int]int{}}
	s.stopped = sync.NewCond(&s.Mu)
	return s
}

// commandEnded counts a remote command that ended or did not start.
func (s *Spawner) commandEnded() {
	s.Mu.Lock()
	s.running--
	s.stopped.Broadcast()
	s.Mu.Unlock()
}

func (s *Spawner) Children() []int { return ctl.Children(s.Me, s.Boot.Fanout, len(s.Boot.Hosts)) }

// Start launches every child and accepts their links.
func (s *Spawner) Start() {
	kids := s.Children()
	if len(kids) == 0 {
		return
	}
	go s.accept()
	if s.Boot.Agent == wire.AgentSlurm {
		s.startStep(kids, s.Env)
		return
	}
	sem := make(chan struct{}, maxParallelStarts)
	for _, c := range kids {
		go func() {
			sem <- struct{}{}
			s.launch(c, false, func() { <-sem })
		}()
	}
}

func (s *Spawner) host(v int) string { return s.Boot.Hosts[v-1] }

// daemonCommand runs exe as the daemon; a daemon that did not end cleanly
// (SIGKILL too) is followed by a cleanup: the node's stale session
// directories go and whatever its ranks left is killed. The session's
// stdin and stdout close as the daemon ends (a link over them must see it
// at once, not after the cleanup). The daemon's own exit status is the
// session's.
func daemonCommand(exe string) []string {
	q := shellwords.Quote(exe)
	return []string{"sh", "-c", fmt.Sprintf("%s (exec %s %s %s %s); s=$?; %s; [ $s = 0 ] || %s %s %s; exit $s",
		quietShell, q, DaemonArgs[0], DaemonArgs[1], daemonStderr, closeStdio, q, CleanupArgs[0], CleanupArgs[1])}
}

// quietShell and daemonStderr give the session's stderr to the daemon alone
// (run in a subshell: a redirection of a simple command is the shell's own
// while it waits). The shell reports a command killed by a signal
// ("Killed") on its own stderr; when the node that started this daemon went
// down with it, the session is gone, and that write killed the shell with
// SIGPIPE before its cleanup (1 run in 4 of TestMultiNode/relay-killed).
const (
	quietShell   = "exec 3>&2 2>/dev/null;"
	daemonStderr = "2>&3 3>&-"
)

// closeStdio lets go of the session's stdin and stdout in a shell script.
const closeStdio = "exec </dev/null >/dev/null 3>&-"

// copyArgs is the command that stores and runs the binary sent ahead of
// the bootstrap (copy.go), and what it sends: prun's binary, and prun-ssh's
// for a daemon that starts others over the built-in SSH.
func copyArgs(b wire.Bootstrap, v int) ([]string, []byte, error) {
	img, err := selfImage()
	if err != nil {
		return nil, nil, fmt.Errorf("%s not found there, and prun cannot read its own binary to send it: %v", b.Exe, err)
	}
	var helper []byte
	if b.Rsh == "" && len(ctl.Children(v, b.Fanout, len(b.Hosts))) > 0 {
		if helper, err = helperImage(); err != nil {
			return nil, nil, fmt.Errorf("%s not found there, and prun cannot read %s to send it: %v", b.Exe, rsh.HelperName, err)
		}
	}
	return copyCommand(len(img), len(helper)), append(img[:len(img):len(img)], helper...), nil
}

// launch starts v's daemon: from the configured path, or from a copy of
// this process's binary sent ahead of the bootstrap (see copy.go). opened,
// if not nil, is called once the session is open or failed to: launch
// itself returns only when the daemon ends or failed to link.
func (s *Spawner) launch(v int, sendCopy bool, opened func()) {
	s.Mu.Lock()
	g := s.gen[v]
	s.Mu.Unlock()
	var once sync.Once
	isOpen := func() {
		if opened != nil {
			once.Do(opened)
		}
	}
	defer isOpen()
	b := s.Boot
	b.Vertex = v
	line, err := json.Marshal(b)
	if err != nil {
		s.failAt(v, g, err)
		return
	}
	host := s.host(v)
	lg := b.Login(v)
	argv, opts := daemonCommand(b.Exe), rsh.Options{Home: b.Home, Command: b.Rsh, ConnectTimeout: b.ConnectTimeout,
		User: lg.User, Port: lg.Port}
	if sendCopy {
		if argv, opts.StdinHead, err = copyArgs(b, v); err != nil {
			s.failAt(v, g, err)
			return
		}
	}
	s.Mu.Lock()
	if s.closing {
		s.Mu.Unlock()
		return
	}
	s.running++
	s.Mu.Unlock()
	trace.Mark("ssh %s", host)
	sess, err := rsh.Start(s.ctx, host, argv, append(line, '\n'), opts)
	trace.Mark("ssh %s started", host)
	isOpen()
	if err != nil {
		s.commandEnded()
		s.failAt(v, g, err)
		return
	}
	go func() {
		sess.Wait()
		s.commandEnded()
	}()
	s.Mu.Lock()
	if s.closing || s.gen[v] != g { // closing, or started again meanwhile (relaunch)
		s.Mu.Unlock()
		sess.Close()
		return
	}
	s.sessions[v] = sess
	s.Mu.Unlock()
	go s.watchStdout(v, g, sess)
	// A daemon that does not connect back in time is as lost as one that
	// exited: say which, with what it printed.
	ended := make(chan struct{})
	go func() {
		code, err := sess.Wait()
		close(ended)
		s.Mu.Lock()
		closing, linked := s.closing, s.Links[v] != nil
		s.Mu.Unlock()
		if closing {
			return
		}
		if code == notFound && err == nil && !linked && !sendCopy && b.CopyExe {
			if s.current(v, g) {
				go s.launch(v, true, nil)
			}
			return
		}
		msg := exitReason(b.Exe, code, err, sess.Stderr())
		if sendCopy && err == nil {
			msg = copyFailure(b.Exe, code, sess.Stderr())
		}
		if linked {
			msg = "its daemon ended: " + msg
		}
		s.failAt(v, g, fmt.Errorf("%s", msg))
	}()
	wait := b.ConnectTimeout + 10*time.Second
	select {
	case <-ended:
	case <-s.ctx.Done():
	case <-time.After(wait):
		s.Mu.Lock()
		linked := s.Links[v] != nil
		s.Mu.Unlock()
		if !linked {
			s.failAt(v, g, fmt.Errorf("the daemon started but did not connect back to port %d of %s within %v (firewall? try --if-include)",
				b.ParentPort, strings.Join(b.ParentAddrs, ", "), wait))
		}
	}
}

// notFound is the shell's exit status for a command it cannot find.
const notFound = 127

// exitReason says why a daemon's remote command ended.
func exitReason(exe string, code int, err error, stderr string) string {
	last := lastLine(stderr)
	switch {
	case err != nil:
		return err.Error()
	case code == notFound:
		// Without --prefix the parent sends a copy instead (copy.go).
		return fmt.Sprintf("%s not found there (install prun there, or leave out --prefix: prun then sends a copy of itself)", exe)
	case code == 126:
		return fmt.Sprintf("%s is not executable there", exe)
	case last != "":
		return fmt.Sprintf("the daemon's start command exited with status %d: %s", code, last)
	case code > 128 && code <= 128+64 && unix.SignalName(syscall.Signal(code-128)) != "":
		// A shell's (and ssh's) status of a command a signal ended.
		return fmt.Sprintf("the daemon's start command exited with status %d (128+%d: killed by %s)",
			code, code-128, unix.SignalName(syscall.Signal(code-128)))
	}
	return fmt.Sprintf("the daemon's start command exited with status %d (no message)", code)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// accept takes the children's links: the first frame of each must be the
// hello (or a subtree's hellos) of a child not yet linked.
func (s *Spawner) accept() {
	for l := range s.ln.Links() {
		go s.ServeLink(l, 0)
	}
}

// Relaunch starts child v's daemon again, in its place (the persistent
// runtime's `prun dvm add`): its link and session, a lost daemon's, are let
// go, and what they report from now on is stale. The new daemon starts its
// own children, as at the start.
func (s *Spawner) Relaunch(v int) {
	s.Mu.Lock()
	if s.closing {
		s.Mu.Unlock()
		return
	}
	s.gen[v]++
	l, sess := s.Links[v], s.sessions[v]
	delete(s.Links, v)
	delete(s.sessions, v)
	s.Mu.Unlock()
	if l != nil {
		l.Close()
	}
	if sess != nil {
		// A daemon that fell silent (stopped, cut off) may still run: its
		// session's end (running counts it until then) tells it to go.
		go sess.Close()
	}
	go s.launch(v, false, nil)
}

// sessionEnds says whether child v's remote command ends within d: a
// daemon's link that ended (not one that fell silent) is most often a
// daemon that did, and its status says more than the link's end (killed
// by SIGKILL, not EOF).
func (s *Spawner) sessionEnds(v int, d time.Duration) bool {
	s.Mu.Lock()
	sess := s.sessions[v]
	s.Mu.Unlock()
	if sess == nil {
		return false
	}
	ended := make(chan struct{})
	go func() {
		sess.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		return true
	case <-time.After(d):
		return false
	}
}

// current says whether g is child v's latest launch.
func (s *Spawner) current(v, g int) bool {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.gen[v] == g
}

// failAt reports child v failed, unless launch g of it is not the latest.
func (s *Spawner) failAt(v, g int, err error) {
	if s.current(v, g) {
		s.fail(v, err)
	}
}

// ServeLink takes a child's link: the vertex its handshake proved must be
// a child not yet linked (want, when not 0), and its first frame that
// child's hello; then it relays what comes up.
func (s *Spawner) ServeLink(l *ctl.Link, want int) {
	l.SetSilence(ctl.Silence(len(s.Boot.Hosts)))
	v := int(l.Peer())
	child := ctl.Parent(v, s.Boot.Fanout) == s.Me && v >= 1 && v <= len(s.Boot.Hosts) && (want == 0 || v == want)
	f, err := l.Recv()
	if err != nil {
		l.Close()
		// A frame that failed authentication on a link of child v's
		// (which only v's daemon could open: the handshake proved v with
		// the secret) loses v, for that reason: its daemon only sees its
		// link close. A link that closes unheard is one of a daemon's
		// spare connections (dialParent).
		if errors.Is(err, ctl.ErrFrameAuth) && child {
			s.Mu.Lock()
			linked := s.Links[v] != nil
			s.Mu.Unlock()
			if !linked {
				s.fail(v, fmt.Errorf("lost the connection to its daemon: %w", err))
			}
		}
		return
	}
	_, src, _, err := wire.Header(f.Payload)
	ok := child && err == nil && (f.Type == wire.THello || f.Type == wire.THellos) && int(src) == v
	s.Mu.Lock()
	if ok && (s.Links[v] != nil || s.closing) {
		ok = false
	}
	g := s.gen[v]
	if ok {
		s.Links[v] = l
		if a, isTCP := l.LocalAddr().(*net.TCPAddr); isTCP && s.local == nil {
			s.local = a.IP
		}
	}
	s.Mu.Unlock()
	if !ok {
		l.Close()
		return
	}
	trace.Mark("%s linked", s.host(v))
	if s.Recvd != nil {
		s.Recvd(f.Type, len(f.Payload), 1)
	}
	s.up(f.Type, f.Payload)
	for {
		f, err := l.Recv()
		if err != nil {
			s.Mu.Lock()
			closing := s.closing
			s.Mu.Unlock()
			// A frame that failed authentication is reported as such at once
			// (the daemon ends when its link does: its status would hide why).
			var silent *ctl.SilentError
			auth := errors.Is(err, ctl.ErrFrameAuth)
			if closing || !s.current(v, g) || !auth && !errors.As(err, &silent) && s.sessionEnds(v, time.Second) {
				return // a daemon that ended: its command's end says how (launch)
			}
			s.SlurmFail(v, s.stepReason(fmt.Errorf("lost the connection to its daemon: %w", err)))
			return
		}
		if f.Type == wire.TBatch {
			k, err := wire.DecodeBatch(f.Payload, s.up)
			if err != nil {
				s.failAt(v, g, err) // the stream from below cannot be trusted past it
				l.Close()
				return
			}
			if s.Recvd != nil {
				s.Recvd(f.Type, len(f.Payload), k)
			}
			continue
		}
		if s.Recvd != nil {
			s.Recvd(f.Type, len(f.Payload), 1)
		}
		s.up(f.Type, f.Payload)
	}
}

// watchStdout reads a daemon session's standard output: nothing, unless the
// daemon could not connect back and runs its link over the session
// (overSSHMarker), which then becomes v's link.
func (s *Spawner) watchStdout(v, g int, sess *rsh.Session) {
	out := bufio.NewReader(sess.Stdout())
	for {
		line, err := out.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue // a long line of a chatty login shell
		}
		if err != nil {
			return // the session ended
		}
		if strings.HasSuffix(string(line), OverSSHMarker) { // after output without a newline, too
			break
		}
	}
	l, err := ctl.AcceptStream(out, sess.Stdin(), sess, s.Boot.Secret, ctl.HandshakeTimeout)
	if err != nil {
		s.failAt(v, g, fmt.Errorf("its daemon could not connect back, and the control link over SSH failed: %v", err))
		sess.Close()
		return
	}
	s.ServeLink(l, v)
	io.Copy(io.Discard, out)
}

func (s *Spawner) fail(v int, err error) {
	s.Mu.Lock()
	closing := s.closing
	s.Mu.Unlock()
	if !closing {
		s.failed(v, err)
	}
}

// Send passes a frame down towards vertex dest (a descendant).
func (s *Spawner) Send(dest int, typ uint8, payload []byte) error {
	hop := ctl.NextHop(s.Me, dest, s.Boot.Fanout)
	s.Mu.Lock()
	l := s.Links[hop]
	s.Mu.Unlock()
	if l == nil {
		return fmt.Errorf("no link towards %s", s.host(dest))
	}
	if s.Sent != nil {
		s.Sent(typ, len(payload))
	}
	return l.Send(typ, payload)
}

// Broadcast passes a frame to every linked child; it returns how many it
// wrote to.
func (s *Spawner) Broadcast(typ uint8, payload []byte) int {
	s.Mu.Lock()
	links := make([]*ctl.Link, 0, len(s.Links))
	for _, l := range s.Links {
		links = append(links, l)
	}
	s.Mu.Unlock()
	for _, l := range links {
		if s.Sent != nil {
			s.Sent(typ, len(payload))
		}
		l.Send(typ, payload)
	}
	return len(links)
}

// Close drops every child: their links and sessions close, and each child
// daemon, losing its parent, tears itself and its own subtree down.
func (s *Spawner) Close() {
	s.Mu.Lock()
	s.closing = true
	links, sessions, st := s.Links, s.sessions, s.Step
	s.Mu.Unlock()
	if st != nil {
		st.close(3 * time.Second)
	}
	s.cancel()
	s.ln.Close()
	for _, l := range links {
		l.Close()
	}
	for _, sess := range sessions {
		sess.Close()
	}
	trace.Mark("links closed")
}

// WaitSessions waits, at most until deadline, for the children's remote
// commands to end.
func (s *Spawner) WaitSessions(d time.Duration) {
	done := make(chan struct{})
	go func() {
		s.Mu.Lock()
		for s.running > 0 {
			s.stopped.Wait()
		}
		st := s.Step
		s.Mu.Unlock()
		if st != nil {
			<-st.Ended
		}
		close(done)
	}()
	s.Mu.Lock()
	if s.Step != nil {
		// srun's end is Slurm's record of the step's end, and srun must
		// not be left to a subreaper: wait past close's SIGTERM (grace)
		// and SIGKILL (twice the grace) to it, on a busy machine.
		d = max(d, 8*time.Second)
	}
	s.Mu.Unlock()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// DumpStderr writes what the children's daemons wrote to stderr (debugging:
// PRUN_DEBUG_REMOTE=1).
func (s *Spawner) DumpStderr(w io.Writer) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.Step != nil {
		for _, l := range strings.Split(strings.TrimSpace(s.Step.out.String()), "\n") {
			fmt.Fprintf(w, "[srun] %s\n", l)
		}
	}
	for v, sess := range s.sessions {
		for _, l := range strings.Split(strings.TrimSpace(sess.Stderr()), "\n") {
			if l != "" {
				fmt.Fprintf(w, "[%s] %s\n", s.host(v), l)
			}
		}
	}
}

// ListenAddrs picks the addresses a vertex listens on, which are the ones
// it tells its children (ctl.ListenOn: no wildcard bind): the --if-include
// network's address, else every address of this node's but loopback and
// link-local ones (children try the one their SSH connection came from
// first), else, on a node that has no other, its loopback ones.
func ListenAddrs(ifInclude string) ([]string, error) {
	if ifInclude != "" {
		ip, err := ChooseIP(ifInclude)
		if err != nil {
			return nil, err
		}
		return []string{ip.String()}, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out, loopback []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		switch {
		case !ok || ipn.IP.IsLinkLocalUnicast():
		case ipn.IP.IsLoopback():
			loopback = append(loopback, ipn.IP.String())
		default:
			out = append(out, ipn.IP.String())
		}
	}
	if len(out) == 0 {
		out = loopback
	}
	if len(out) == 0 {
		return nil, errors.New("this node has no network address to listen on")
	}
	return out, nil
}

// ChooseIP finds this node's address on a network given as a CIDR or an
// interface name.
func ChooseIP(spec string) (net.IP, error) {
	if _, cidr, err := net.ParseCIDR(spec); err == nil {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && cidr.Contains(ipn.IP) {
				return ipn.IP, nil
			}
		}
		return nil, fmt.Errorf("--if-include %s: no address of this node is in that network", spec)
	}
	ifc, err := net.InterfaceByName(spec)
	if err != nil {
		return nil, fmt.Errorf("--if-include %s: neither a CIDR nor an interface of this node", spec)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP, nil
		}
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			return ipn.IP, nil
		}
	}
	return nil, fmt.Errorf("--if-include %s: the interface has no address", spec)
}

// NetworkOf finds the interface and network of a local address, for the
// MPI libraries' interface selection.
func NetworkOf(ip net.IP) (*daemon.Network, bool) {
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil, false
	}
	for _, ifc := range ifcs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(ip) {
				ones, _ := ipn.Mask.Size()
				return &daemon.Network{IP: ip.String(), CIDR: ipn.IP.Mask(ipn.Mask).String() + "/" + strconv.Itoa(ones), Iface: ifc.Name}, true
			}
		}
	}
	return nil, false
}

// OverSSHMarker, a line on a daemon's standard output, says that the
// control link follows on the session's standard input and output. What a
// login shell may print before it is skipped.
const OverSSHMarker = "prun-ctl-over-ssh-v1\n"
