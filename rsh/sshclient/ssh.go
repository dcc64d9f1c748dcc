package sshclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"prun/internal/shellwords"
	"prun/internal/trace"
)

// Options say how to reach a node.
type Options struct {
	Home           string        // where ~/.ssh is ("" = $HOME)
	ConnectTimeout time.Duration // per hop, when ssh_config has none (default 5 s)
	// User and Port, when set, override ssh_config's for the host (as
	// ssh -l and -p do; not for its ProxyJump hops).
	User string
	Port int
}

// defaultConnectTimeout applies when neither Options nor ssh_config give a
// ConnectTimeout.
const defaultConnectTimeout = 5 * time.Second

// minAuthTimeout bounds authentication, which starts once the server's host
// key is accepted. ConnectTimeout does not: as in OpenSSH, it bounds the TCP
// connection and the key exchange only. Authentication waits on things that
// are slow for good reasons (an agent's hardware key waiting for a touch;
// sshd's own delays, hundreds of handshakes at once on a busy node), and
// OpenSSH leaves it to the server's LoginGraceTime; prun still bounds it, so
// that a hung agent or server does not hold a launch for minutes.
const minAuthTimeout = 30 * time.Second

// command is argv running on a host.
type command struct {
	stdin   io.WriteCloser
	stdout  io.Reader
	localIP net.IP

	done   chan struct{} // closed when status and err are set
	status int
	err    error

	closeOnce sync.Once
	closeFn   func(grace time.Duration)
	lost      atomic.Pointer[string] // why the connection was given up, if it was
}

// start runs argv on host; the remote standard error goes to stderr.
// Errors do not name the host: the caller's message does.
func start(ctx context.Context, host string, argv []string, stderr io.Writer, opts Options) (*command, error) {
	home := homeDir(opts.Home)
	cs, err := loadConfigs(home)
	if err != nil {
		return nil, err
	}
	port := ""
	if opts.Port != 0 {
		port = strconv.Itoa(opts.Port)
	}
	route, err := cs.route(host, opts.User, port, nil, home, 0)
	if err != nil {
		return nil, err
	}

	clients, first, err := dialRoute(ctx, route, opts)
	if err != nil {
		return nil, err
	}
	closeAll := func() { closeClients(clients) }
	last := route[len(route)-1]
	cmd := &command{done: make(chan struct{})}
	if a, ok := first.LocalAddr().(*net.TCPAddr); ok {
		cmd.localIP = a.IP
	}

	// Open the session and start the command, within another timeout.
	sctx, cancel := context.WithTimeout(ctx, timeoutOf(last, opts.ConnectTimeout))
	defer cancel()
	stop := context.AfterFunc(sctx, closeAll)
	c := clients[len(clients)-1]
	sess, stdinW, err := cmd.session(c, host, argv, stderr)
	if !stop() {
		if err == nil {
			sess.Close()
		}
		closeAll()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("starting the command: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("timed out after %v starting the command", timeoutOf(last, opts.ConnectTimeout))
	}
	if err != nil {
		closeAll()
		return nil, err
	}

	// x/crypto/ssh's channel reads its EOF flag unlocked in Write, so the
	// close below must not run beside a write: it waits for one to end.
	cmd.stdin = &serialWriteCloser{wc: stdinW}
	for i, t := range route {
		if t.alive > 0 {
			keepalive(clients[i], t.alive, t.aliveMax, func() {
				msg := fmt.Sprintf("connection lost (%s did not answer %d keepalive requests)", t.alias, t.aliveMax)
				cmd.lost.Store(&msg)
				closeAll()
			})
		}
	}
	go cmd.waitSession(sess)
	cmd.closeFn = func(grace time.Duration) {
		go cmd.stdin.Close() // not blocked by a peer that does not read: closeAll ends it
		go func() {
			select {
			case <-cmd.done:
			case <-time.After(grace):
			}
			sess.Close()
			closeAll()
		}()
	}
	return cmd, nil
}

// dialRoute connects to each host of route in turn, each through the one
// before: the clients, and the first host's connection.
func dialRoute(ctx context.Context, route []*target, opts Options) ([]*ssh.Client, net.Conn, error) {
	var (
		clients []*ssh.Client
		first   net.Conn
	)
	for i, t := range route {
		var via *ssh.Client
		viaName := ""
		if i > 0 {
			via, viaName = clients[i-1], route[i-1].alias
		}
		c, conn, err := dial(ctx, t, via, viaName, opts.ConnectTimeout)
		if err != nil {
			closeClients(clients)
			if i < len(route)-1 {
				err = fmt.Errorf("jump host %s: %w", t.alias, err)
			}
			return nil, nil, err
		}
		if i == 0 {
			first = conn
		}
		clients = append(clients, c)
	}
	return clients, first, nil
}

// closeClients closes a route's clients, last first.
func closeClients(clients []*ssh.Client) {
	for i := len(clients) - 1; i >= 0; i-- {
		clients[i].Close()
	}
}

// session opens a session on c and starts argv in it, its standard output
// cmd's: the session and its standard input.
func (cmd *command) session(c *ssh.Client, host string, argv []string, stderr io.Writer) (*ssh.Session, io.WriteCloser, error) {
	sess, err := c.NewSession()
	trace.Mark("session %s", host)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot open a session: %v", trimSSH(err))
	}
	w, err := sess.StdinPipe()
	if err == nil {
		cmd.stdout, err = sess.StdoutPipe()
	}
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	sess.Stderr = stderr
	if err := sess.Start(shellwords.Join(argv)); err != nil {
		sess.Close()
		return nil, nil, fmt.Errorf("cannot start the command: %v", trimSSH(err))
	}
	return sess, w, nil
}

// waitSession waits for the remote command to end and sets its status.
func (cmd *command) waitSession(sess *ssh.Session) {
	err := sess.Wait() // after the copy of its stderr
	var ee *ssh.ExitError
	var status int
	switch {
	case err == nil:
	case errors.As(err, &ee):
		status, err = ee.ExitStatus(), nil
	default:
		status = -1
		if msg := cmd.lost.Load(); msg != nil {
			err = errors.New(*msg)
		} else {
			var me *ssh.ExitMissingError
			if errors.As(err, &me) {
				err = errors.New("connection closed without an exit status of the remote command")
			}
		}
	}
	cmd.status, cmd.err = status, err
	close(cmd.done)
}

// wait waits for the remote command to end: its exit status (128 + the
// signal number when a signal ended it), or -1 and why the connection
// failed or closed without one.
func (c *command) wait() (int, error) {
	<-c.done
	return c.status, c.err
}

// close ends the session: the remote standard input closes (the daemon
// takes that to mean the launcher is gone), and after grace the channel
// and the connections do. Later calls do nothing.
func (c *command) close(grace time.Duration) {
	c.closeOnce.Do(func() { c.closeFn(grace) })
}

// timeoutOf is the connect timeout for t.
func timeoutOf(t *target, def time.Duration) time.Duration {
	switch {
	case t.timeout > 0:
		return t.timeout
	case def > 0:
		return def
	}
	return defaultConnectTimeout
}

// dial connects to t, through via when not nil, and authenticates: the
// connection and key exchange within t's connect timeout, authentication
// within authTimeout more. conn is the underlying connection.
func dial(ctx context.Context, t *target, via *ssh.Client, viaName string, defTimeout time.Duration) (c *ssh.Client, conn net.Conn, err error) {
	timeout := timeoutOf(t, defTimeout)
	authTimeout := max(timeout, minAuthTimeout)
	// hctx ends at the connect timeout, or authTimeout after the host key
	// was accepted, whichever the handshake reached.
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	limit := time.AfterFunc(timeout, func() { cancel(context.DeadlineExceeded) })
	defer limit.Stop()
	var handshaking atomic.Bool // the host key callback also runs at re-keying
	handshaking.Store(true)
	defer handshaking.Store(false)
	addr := t.addr()
	hk, err := newHostKeys(t)
	if err != nil {
		return nil, nil, err
	}

	through := ""
	if via == nil {
		conn, err = (&net.Dialer{}).DialContext(hctx, "tcp", addr)
		if err == nil {
			conn = withQuickACK(conn)
		}
	} else {
		through = " through " + viaName
		conn, err = via.DialContext(hctx, "tcp", addr)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cannot connect to %s%s: %w", addr, through, dialReason(ctx, hctx, err))
	}

	a := &auth{t: t}
	defer a.close()
	cfg := &ssh.ClientConfig{
		User: t.user,
		Auth: []ssh.AuthMethod{ssh.PublicKeysCallback(a.keys)},
		HostKeyCallback: func(host string, remote net.Addr, key ssh.PublicKey) error {
			err := hk.check(host, remote, key)
			if err == nil && handshaking.Load() {
				limit.Reset(authTimeout)
			}
			return err
		},
		HostKeyAlgorithms: hk.algorithms(),
		BannerCallback:    func(string) error { return nil },
	}
	// The func may still be running when dial returns, which sets the
	// named result conn to nil on an error: it closes its own copy.
	raw := conn
	stop := context.AfterFunc(hctx, func() {
		raw.Close()
		a.close()
	})
	trace.Mark("tcp %s", addr)
	cc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	trace.Mark("handshake %s", addr)
	interrupted := !stop()
	if err == nil && interrupted {
		cc.Close()
		err = context.Cause(hctx)
	}
	if err != nil {
		conn.Close()
		hkErr, hkOK := hk.result()
		switch {
		case hkErr != nil:
			return nil, nil, hkErr
		case interrupted && ctx.Err() != nil:
			return nil, nil, fmt.Errorf("connecting to %s%s: %w", addr, through, context.Cause(ctx))
		case interrupted && hkOK:
			return nil, nil, fmt.Errorf("timed out after %v authenticating to %s as %s", authTimeout, addr, t.user)
		case interrupted:
			return nil, nil, fmt.Errorf("timed out after %v in the SSH handshake with %s%s", timeout, addr, through)
		case a.started() || strings.Contains(err.Error(), "unable to authenticate"):
			return nil, nil, a.failure()
		default:
			return nil, nil, fmt.Errorf("SSH handshake with %s%s failed: %s", addr, through,
				strings.TrimPrefix(trimSSH(err), "handshake failed: "))
		}
	}
	return ssh.NewClient(cc, chans, reqs), conn, nil
}

// dialReason is why a connection attempt failed, briefly.
func dialReason(ctx, hctx context.Context, err error) error {
	if d, ok := ctx.Deadline(); ctx.Err() != nil || ok && !time.Now().Before(d) {
		<-ctx.Done() // the dialer may see the deadline before the context does
		return context.Cause(ctx)
	}
	if errors.Is(context.Cause(hctx), context.DeadlineExceeded) {
		return errors.New("i/o timeout")
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		err = se.Err
	}
	return errors.New(trimSSH(err))
}

func trimSSH(err error) string { return strings.TrimPrefix(err.Error(), "ssh: ") }

// keepalive sends a keepalive request every interval, and calls dead when
// max of them in a row went unanswered.
func keepalive(c *ssh.Client, every time.Duration, max int, dead func()) {
	closed := make(chan struct{})
	go func() {
		c.Wait()
		close(closed)
	}()
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		missed := 0
		for {
			select {
			case <-closed:
				return
			case <-tick.C:
			}
			reply := make(chan error, 1)
			go func() {
				_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
				reply <- err
			}()
			select {
			case <-closed:
				return
			case err := <-reply:
				if err != nil {
					return
				}
				missed = 0
			case <-time.After(every):
				if missed++; missed >= max {
					dead()
					return
				}
			}
		}
	}()
}

// serialWriteCloser makes Write and Close of wc mutually exclusive.
type serialWriteCloser struct {
	mu sync.Mutex
	wc io.WriteCloser
}

func (s *serialWriteCloser) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wc.Write(p)
}

func (s *serialWriteCloser) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wc.Close()
}
