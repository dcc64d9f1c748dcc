// Package rsh starts a command on a remote node, the way a parallel launcher
// starts its daemons.
//
// The built-in SSH client exists so that a launch does not fork one ssh
// process per node: with hundreds of nodes, a process per connection costs
// more than the connections, and a client of our own can report each
// failure as one clear line naming the node, instead of whatever ssh
// printed. It follows the user's ssh_config (HostName, User, Port,
// IdentityFile, ProxyJump, known hosts, ...) so that a node reachable with
// ssh is reachable here without more setup, and it never asks anything:
// there is no terminal to ask on. It runs in one process for all of a
// launcher's (or daemon's) sessions, prun-ssh (rsh/sshclient, started on
// the first session, spoken to through rsh/sshproto): linked into prun, the
// SSH and crypto packages were initialised at every start of prun, jobs on
// one node included. Sites whose access goes through something else (a
// ProxyCommand, Kerberos, a batch system's own remote shell) name an
// external command instead, as Open MPI's plm_rsh_agent and Hydra's
// -launcher-exec do.
//
// The remote command's standard input stays open for the life of the session
// because the remote daemon takes end of file on it to mean that the launcher
// is gone: Close is how the launcher says so.
package rsh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Options say how to reach nodes.
type Options struct {
	// Home is where ~/.ssh is looked up ("" = $HOME). OpenSSH uses the
	// password database, we use this.
	Home string
	// Command, when not empty, is an external remote-shell command (like
	// Open MPI's plm_rsh_agent, Hydra's -launcher-exec): split into words
	// (shell-like, with quotes and backslashes, no expansion), then run as
	// WORDS... HOST REMOTECMD where REMOTECMD is the single string built
	// from argv (each word shell-quoted).
	Command string
	// ConnectTimeout bounds TCP connect + SSH key exchange per hop when
	// ssh_config has no ConnectTimeout (default 5 s when zero);
	// authentication gets at least 30 s more (sshclient.minAuthTimeout).
	ConnectTimeout time.Duration
	// StdinHead is written to the remote standard input before stdin (a
	// file to upload ahead of it; it is not copied).
	StdinHead []byte
	// User and Port, when set, are the login on the node (a host list's
	// user@host, user=, port=): they override ssh_config's User and Port
	// as ssh's -l and -p do, and an external Command gets them as
	// "-l USER -p PORT" before the host, which OpenSSH takes.
	User string
	Port int
}

// Label is how errors name a login: user@host, with :port (host in
// brackets when it is an IPv6 address) when a port other than 22 was given.
func Label(host, user string, port int) string {
	s := host
	if port != 0 && port != 22 {
		s = net.JoinHostPort(host, strconv.Itoa(port))
	}
	if user != "" {
		s = user + "@" + s
	}
	return s
}

// feed writes head, then stdin, to w in the background; the session's
// Stdin writes after them.
func (s *Session) feed(w io.Writer, head, stdin []byte) {
	s.stdin = &stdinWriter{w: w, fed: make(chan struct{})}
	go func() {
		defer close(s.stdin.fed)
		if _, err := w.Write(head); err == nil {
			w.Write(stdin)
		}
	}()
}

// stdinWriter writes to the remote standard input once the initial input
// has gone.
type stdinWriter struct {
	w   io.Writer
	fed chan struct{}
}

func (sw *stdinWriter) Write(p []byte) (int, error) {
	<-sw.fed
	return sw.w.Write(p)
}

// closeGrace is how long Close lets the remote command end by itself.
const closeGrace = 2 * time.Second

// stderrMax is how much of the remote standard error a Session keeps.
const stderrMax = 64 << 10

// Session is one command started on a node. Close it when done with it,
// however it ended: that releases the connection.
type Session struct {
	host    string
	stdin   *stdinWriter
	stdout  io.Reader
	stderr  tail
	localIP net.IP

	done   chan struct{} // closed when status and err are set
	status int
	err    error

	closing   atomic.Bool
	closeOnce sync.Once
	closeFn   func()
	drain     sync.Once
}

// Start runs argv (argv[0] is a path on the remote node) on host. stdin is
// written to the remote command's standard input right after it starts
// (after opts.StdinHead), and the standard input stays open afterwards,
// until Close. host is the name as the user gave it (ssh_config Host
// patterns match it).
//
// ctx bounds the start only: once Start has returned, the session lasts until
// the command ends or Close. Errors are one line that starts with the host
// (as Label writes it: user@host:port when opts give them).
func Start(ctx context.Context, host string, argv []string, stdin []byte, opts Options) (*Session, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if host == "" {
		return nil, errors.New("rsh: empty host name")
	}
	if strings.HasPrefix(host, "-") || strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, fmt.Errorf("%q: bad host name", host)
	}
	if strings.HasPrefix(opts.User, "-") || strings.ContainsFunc(opts.User, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '@' }) {
		return nil, fmt.Errorf("%q: bad user name for %s", opts.User, host)
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("%s: bad port %d", host, opts.Port)
	}
	label := Label(host, opts.User, opts.Port)
	if len(argv) == 0 {
		return nil, fmt.Errorf("%s: no command to run", label)
	}
	if err := ctx.Err(); err != nil {
		return nil, hostErr(label, err)
	}
	if opts.Command != "" {
		return startCommand(host, label, argv, stdin, opts)
	}
	return startSSH(ctx, host, label, argv, stdin, opts)
}

// Stdin writes more to the remote command's standard input, after what
// Start was given (a protocol over the session, with Stdout).
func (s *Session) Stdin() io.Writer { return s.stdin }

// Stderr returns what the remote command wrote to its standard error so
// far (at most the last 64 KiB).
func (s *Session) Stderr() string { return s.stderr.String() }

// Stdout is the remote command's standard output. The caller must read it
// (or call DiscardStdout): a command whose output nobody reads blocks once
// the transport's buffers are full, and never ends.
func (s *Session) Stdout() io.Reader { return s.stdout }

// DiscardStdout reads and drops the standard output in the background, for
// a caller that does not want it: call it instead of reading Stdout, not as
// well.
func (s *Session) DiscardStdout() {
	s.drain.Do(func() { go io.Copy(io.Discard, s.stdout) })
}

// LocalIP is this side's address of the connection to the node (with
// ProxyJump: of the connection to the first hop); nil with an external
// command.
func (s *Session) LocalIP() net.IP { return s.localIP }

// Wait waits for the remote command to end and returns its exit status (128
// + the signal number when a signal ended it), or -1 and an error naming
// the host when the connection failed or closed without an exit status. It
// may be called more than once, and from several goroutines.
func (s *Session) Wait() (int, error) {
	<-s.done
	return s.status, s.err
}

// Close ends the session and returns at once. It closes the remote
// command's standard input, which the remote daemon takes to mean that the
// launcher is gone; the command then has closeGrace (2 s) to end by itself
// before the channel and the connections are closed (built-in client: a
// command that goes on writing gets a broken pipe) or the external
// command's process group is killed with SIGKILL. Wait returns the
// command's exit status if it ended in time, else -1 and an error. Close is
// safe to call more than once and concurrently with Wait; later calls do
// nothing.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.closeFn()
	})
	return nil
}

// finish records the result of the session.
func (s *Session) finish(status int, err error) {
	if err != nil && s.closing.Load() {
		status, err = -1, fmt.Errorf("%s: session closed: the remote command did not end within %v of the end of its input", s.host, closeGrace)
	}
	s.status, s.err = status, err
	close(s.done)
}

// hostError is an error of one host: a message that starts with its name,
// and the cause.
type hostError struct {
	msg string
	err error
}

func (e *hostError) Error() string { return e.msg }
func (e *hostError) Unwrap() error { return e.err }

func hostErr(host string, err error) error {
	return &hostError{oneLine(host + ": " + err.Error()), err}
}

// oneLine joins the lines of s.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return strings.Join(f, "; ")
}

// isDone says whether c is closed.
func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// tail keeps the last stderrMax bytes written to it.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > stderrMax {
		p = p[len(p)-stderrMax:]
	}
	if len(t.b)+len(p) > 2*stderrMax {
		keep := stderrMax - len(p)
		t.b = append(t.b[:0], t.b[len(t.b)-keep:]...)
	}
	t.b = append(t.b, p...)
	return n, nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > stderrMax {
		b = b[len(b)-stderrMax:]
		// Do not start in the middle of a character.
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return string(b)
}
