// Package sshclient is prun's built-in SSH client (golang.org/x/crypto/ssh,
// following the user's ssh_config). It runs in a process of its own,
// prun-ssh, which package rsh starts beside the launcher or daemon that
// first needs a connection and drives through rsh/sshproto: one process
// for all of a launch's connections (a ProxyJump hop is dialled once per
// session, as before), and none for a job that stays on one node.
package sshclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"prun/rsh/sshproto"
)

// Main serves the control socket at descriptor sshproto.Fd until its peer
// is gone, then ends every session and returns the exit status.
func Main() int {
	f := os.NewFile(sshproto.Fd, "control")
	c, err := net.FileConn(f)
	f.Close()
	uc, ok := c.(*net.UnixConn)
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "prun-ssh: descriptor %d is not prun's control socket: run by prun only\n", sshproto.Fd)
		return 2
	}
	Serve(uc)
	return 0
}

// server is one control connection: the sessions it started.
type server struct {
	c    *net.UnixConn
	wmu  sync.Mutex
	mu   sync.Mutex
	ctxs map[uint64]context.CancelCauseFunc // starts under way
	cmds map[uint64]*command                // started, until they end
}

// Serve answers c's requests until c ends, then closes every session at
// once: the process that asked for them is gone.
func Serve(c *net.UnixConn) {
	s := &server{c: c, ctxs: map[uint64]context.CancelCauseFunc{}, cmds: map[uint64]*command{}}
	var wg sync.WaitGroup
	in := sshproto.Receiver{C: c}
	for {
		var req sshproto.Request
		fds, err := in.Recv(&req)
		if err != nil {
			sshproto.CloseFds(fds)
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				fmt.Fprintf(os.Stderr, "prun-ssh: control socket: %v\n", err)
			}
			break
		}
		if req.Op == sshproto.OpStart && len(fds) == 3 {
			ctx := s.cancelable(req.ID)
			wg.Go(func() { s.start(ctx, req, fds) })
			continue
		}
		sshproto.CloseFds(fds) // only a start takes descriptors
		switch req.Op {
		case sshproto.OpStart:
			s.reply(sshproto.Reply{Op: sshproto.OpFailed, ID: req.ID, Err: fmt.Sprintf("start request with %d descriptors, want 3", len(fds))})
		case sshproto.OpLookup:
			ctx := s.cancelable(req.ID)
			wg.Go(func() { s.lookup(ctx, req) })
		case sshproto.OpCancel:
			s.mu.Lock()
			if cancel := s.ctxs[req.ID]; cancel != nil {
				cancel(errors.New("canceled"))
			}
			if cmd := s.cmds[req.ID]; cmd != nil {
				cmd.close(0)
			}
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	for _, cancel := range s.ctxs {
		cancel(errors.New("prun-ssh is shutting down"))
	}
	for _, cmd := range s.cmds {
		cmd.close(0)
	}
	s.mu.Unlock()
	wg.Wait()
}

// cancelable is the context of request id, which OpCancel and the end of
// the control connection cancel; the request deletes it from ctxs when
// it no longer waits.
func (s *server) cancelable(id uint64) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	s.mu.Lock()
	s.ctxs[id] = cancel
	s.mu.Unlock()
	return ctx
}

func (s *server) reply(r sshproto.Reply) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	sshproto.Send(s.c, r) // an error means the peer is gone: Serve's loop sees it
}

// start runs one request: the command, then the copies between its
// channel and the pipe ends, then its exit status.
func (s *server) start(ctx context.Context, req sshproto.Request, fds []int) {
	stdin, stdout, stderr := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "stdout"), os.NewFile(uintptr(fds[2]), "stderr")
	cmd, err := start(ctx, req.Host, req.Argv, stderr, Options{Home: string(req.Home), ConnectTimeout: req.ConnectTimeout, User: req.User, Port: req.Port})
	s.mu.Lock()
	delete(s.ctxs, req.ID)
	if err == nil && ctx.Err() == nil {
		s.cmds[req.ID] = cmd
	}
	s.mu.Unlock()
	if err == nil && ctx.Err() != nil {
		cmd.close(0)
		err = context.Cause(ctx)
	}
	if err != nil {
		stdin.Close()
		stdout.Close()
		stderr.Close()
		s.reply(sshproto.Reply{Op: sshproto.OpFailed, ID: req.ID, Err: err.Error()})
		return
	}
	ip := ""
	if cmd.localIP != nil {
		ip = cmd.localIP.String()
	}
	s.reply(sshproto.Reply{Op: sshproto.OpStarted, ID: req.ID, LocalIP: ip})

	go func() {
		// The end of the input is rsh's Close.
		io.Copy(cmd.stdin, stdin)
		stdin.Close()
		cmd.close(req.Grace)
	}()
	go func() {
		if _, err := io.Copy(stdout, cmd.stdout); err != nil {
			io.Copy(io.Discard, cmd.stdout) // nobody reads: do not hold the remote command up
		}
		stdout.Close()
	}()
	status, err := cmd.wait()
	stderr.Close()
	s.mu.Lock()
	delete(s.cmds, req.ID)
	s.mu.Unlock()
	r := sshproto.Reply{Op: sshproto.OpExit, ID: req.ID, Status: status}
	if err != nil {
		r.Err = err.Error()
	}
	s.reply(r)
}
