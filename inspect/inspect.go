// Package inspect is the local socket through which `prun top` and `prun
// stack` look into running jobs. A launcher (a standalone prun for its job,
// a DVM for each of its jobs) listens on SocketName in its session
// directory; only its own user or root may connect (SO_PEERCRED, checked on
// every connection, under a 0700 directory besides). A client asks, one
// request at a time on a connection it may keep (top asks once a second):
// every rank's sample, or the ranks' stacks merged into one tree.
//
// The wire is one JSON object a line each way. Errors are the server's
// words, passed on as one line.
package inspect

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"prun/sessiondir"
	"prun/stacktree"
	"prun/topview/sample"
)

// SocketName is the socket's name in the launcher's session directory.
const SocketName = "inspect.sock"

// Source answers for the launcher: job names a job of it ("" is a
// standalone launcher's only job; a DVM's jobs go by their number).
type Source interface {
	Ranks(ctx context.Context, job string) ([]sample.Rank, error)
	Stacks(ctx context.Context, job string, ranks stacktree.RankSet) (*stacktree.Tree, error)
}

type request struct {
	Op    string `json:"op"` // "ranks" or "stacks"
	Job   string `json:"job,omitempty"`
	Ranks string `json:"ranks,omitempty"` // stacks: a rank list ("" is every rank)
	// RankTimeout bounds each rank's debugger (stacks; 0: the source's
	// default), at most MaxRankTimeout.
	RankTimeout time.Duration `json:"rank_timeout,omitempty"`
}

// MaxRankTimeout bounds a request's RankTimeout: an answer must come within
// the request's own bound.
const MaxRankTimeout = time.Minute

type rankTimeoutKey struct{}

// RankTimeout is the bound on each rank's debugger that the request of ctx
// asked for (0: none asked).
func RankTimeout(ctx context.Context) time.Duration {
	d, _ := ctx.Value(rankTimeoutKey{}).(time.Duration)
	return d
}

type reply struct {
	Error string          `json:"error,omitempty"`
	Ranks []sample.Rank   `json:"ranks,omitempty"`
	Tree  *stacktree.Tree `json:"tree,omitempty"`
}

// maxLine bounds a request or a reply: a tree of a large job's stacks is
// the largest thing said.
const maxLine = 64 << 20

// reqTimeout bounds one request's answer: stacks take a debugger per rank.
const reqTimeout = 2 * time.Minute

// Server is a listening socket and its connections.
type Server struct {
	ln   *net.UnixListener
	src  Source
	path string

	mu    sync.Mutex
	conns map[net.Conn]bool
	done  bool
	wg    sync.WaitGroup
}

// Listen serves src on dir/SocketName until Close.
func Listen(dir string, src Source) (*Server, error) {
	path := filepath.Join(dir, SocketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if errors.Is(err, unix.EADDRINUSE) && stale(path) {
		// A dead launcher's (a SIGKILLed DVM's, in the directory the
		// next one takes): nobody answers there.
		os.Remove(path)
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	}
	if err != nil {
		return nil, fmt.Errorf("inspect socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("inspect socket: %w", err)
	}
	s := &Server{ln: ln, src: src, path: path, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// stale reports whether the socket at path is one nobody listens on.
func stale(path string) bool {
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, unix.ECONNREFUSED)
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close stops listening, ends every connection and waits for their
// goroutines; the socket file goes.
func (s *Server) Close() error {
	s.mu.Lock()
	s.done = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		if !admitted(c) { // another user: nothing, not even an error
			c.Close()
			continue
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// admitted: the peer process runs as this process's user, or as root.
func admitted(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil || cerr != nil {
		return false
	}
	return cred.Uid == 0 || int(cred.Uid) == os.Geteuid()
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		var req request
		var rep reply
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			rep.Error = "inspect: a request that is not JSON: " + err.Error()
		} else {
			rep = s.answer(req)
		}
		if err := enc.Encode(&rep); err != nil {
			return
		}
	}
}

func (s *Server) answer(req request) reply {
	ctx, cancel := context.WithTimeout(context.Background(), reqTimeout)
	defer cancel()
	var rep reply
	var err error
	switch req.Op {
	case "ranks":
		rep.Ranks, err = s.src.Ranks(ctx, req.Job)
	case "stacks":
		var set stacktree.RankSet
		if req.Ranks != "" {
			if set, err = stacktree.ParseRanks(req.Ranks); err != nil {
				break
			}
		}
		if req.RankTimeout > 0 {
			ctx = context.WithValue(ctx, rankTimeoutKey{}, min(req.RankTimeout, MaxRankTimeout))
		}
		rep.Tree, err = s.src.Stacks(ctx, req.Job, set)
	default:
		err = fmt.Errorf("inspect: unknown request %q", req.Op)
	}
	if err != nil {
		rep = reply{Error: err.Error()}
	}
	return rep
}

// Client is one connection to a launcher's socket.
type Client struct {
	mu sync.Mutex
	c  net.Conn
	sc *bufio.Scanner
}

// Dial connects to the socket at path.
func Dial(path string) (*Client, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	return &Client{c: c, sc: sc}, nil
}

// Close ends the connection.
func (c *Client) Close() error { return c.c.Close() }

// ErrClosed: the launcher closed the connection (its job ended, or it
// refused this user).
var ErrClosed = errors.New("the launcher closed the connection (the job ended, or it is not yours)")

func (c *Client) call(ctx context.Context, req request) (reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl)
		defer c.c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	b, _ := json.Marshal(req)
	if _, err := c.c.Write(append(b, '\n')); err != nil {
		return reply{}, closedOr(ctx, err)
	}
	if !c.sc.Scan() {
		err := c.sc.Err()
		if err == nil {
			err = ErrClosed
		}
		return reply{}, closedOr(ctx, err)
	}
	var rep reply
	if err := json.Unmarshal(c.sc.Bytes(), &rep); err != nil {
		return reply{}, fmt.Errorf("inspect: a reply that is not JSON: %w", err)
	}
	if rep.Error != "" {
		return reply{}, errors.New(rep.Error)
	}
	return rep, nil
}

func closedOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
		return ErrClosed
	}
	return err
}

// Ranks asks for a sample of every rank of job.
func (c *Client) Ranks(ctx context.Context, job string) ([]sample.Rank, error) {
	rep, err := c.call(ctx, request{Op: "ranks", Job: job})
	return rep.Ranks, err
}

// Stacks asks for the stacks of job's ranks in set (empty: every rank),
// merged.
func (c *Client) Stacks(ctx context.Context, job string, set stacktree.RankSet) (*stacktree.Tree, error) {
	return c.StacksWithin(ctx, job, set, 0)
}

// StacksWithin is Stacks with each rank's debugger bounded by perRank (0:
// the launcher's default; at most MaxRankTimeout).
func (c *Client) StacksWithin(ctx context.Context, job string, set stacktree.RankSet, perRank time.Duration) (*stacktree.Tree, error) {
	req := request{Op: "stacks", Job: job, RankTimeout: perRank}
	if set.Len() > 0 {
		req.Ranks = set.String()
	}
	rep, err := c.call(ctx, req)
	if err == nil && rep.Tree == nil {
		err = errors.New("inspect: the launcher sent no tree")
	}
	return rep.Tree, err
}

// Source is job's samples as a sample.Source.
func (c *Client) Source(job string) sample.Source { return jobSource{c, job} }

type jobSource struct {
	c   *Client
	job string
}

func (s jobSource) Sample(ctx context.Context) ([]sample.Rank, error) { return s.c.Ranks(ctx, s.job) }

// Find finds the socket of a standalone prun named by target: its pid, or
// its session directory. tmp is where session directories are ($TMPDIR).
func Find(tmp, target string) (string, error) {
	if pid, err := strconv.Atoi(target); err == nil && pid > 0 {
		if tmp == "" {
			tmp = os.TempDir()
		}
		socks, _ := filepath.Glob(filepath.Join(tmp, fmt.Sprintf("%s%d.*", sessiondir.Prefix, pid), SocketName))
		switch len(socks) {
		case 0:
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				return "", fmt.Errorf("no process %d", pid)
			}
			return "", fmt.Errorf("process %d is not a running prun with a session directory in %s", pid, tmp)
		case 1:
			return socks[0], nil
		default:
			return "", fmt.Errorf("process %d has %d session directories in %s", pid, len(socks), tmp)
		}
	}
	sock := filepath.Join(target, SocketName)
	if _, err := os.Stat(sock); err != nil {
		return "", fmt.Errorf("%s: not a running prun's session directory (no %s)", target, SocketName)
	}
	return sock, nil
}
