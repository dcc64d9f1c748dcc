package rsh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"prun/internal/jsonbytes"
	"prun/rsh/sshproto"
)

// HelperName is the built-in SSH client's program (cmd/prun-ssh), which
// is installed beside prun.
const HelperName = "prun-ssh"

// helperCommand is the helper's path and extra environment; tests run
// their own binary instead.
var helperCommand = func() (string, []string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(filepath.Dir(exe), HelperName), nil, nil
}

// HelperPath is where this process finds prun-ssh.
func HelperPath() (string, error) {
	p, _, err := helperCommand()
	return p, err
}

// helper is the running prun-ssh of this process: one for all sessions.
type helper struct {
	c    *net.UnixConn
	proc *os.Process
	wmu  sync.Mutex

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan sshproto.Reply // the start's answer, then the exit
	gone    error                          // the helper ended: every session with it
	ended   chan struct{}                  // closed when the helper process is reaped
}

var (
	helperMu  sync.Mutex
	theHelper *helper
)

// getHelper starts prun-ssh on first use.
func getHelper() (*helper, error) {
	helperMu.Lock()
	defer helperMu.Unlock()
	if theHelper != nil {
		return theHelper, nil
	}
	path, env, err := helperCommand()
	if err != nil {
		return nil, fmt.Errorf("cannot find %s: %v", HelperName, err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot start %s: %v", HelperName, err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "prun-ssh control"), os.NewFile(uintptr(fds[1]), "prun-ssh control")
	defer theirs.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		mine.Close()
		return nil, err
	}
	defer devnull.Close()
	files := make([]*os.File, sshproto.Fd+1)
	files[0], files[1], files[2], files[sshproto.Fd] = devnull, devnull, os.Stderr, theirs
	// A process group of its own: a terminal's ^C is the launcher's to
	// handle (it closes the sessions in order); the helper ends when its
	// control socket does, with the process that started it.
	proc, err := os.StartProcess(path, []string{HelperName}, &os.ProcAttr{Files: files, Env: append(os.Environ(), env...),
		Sys: &syscall.SysProcAttr{Setpgid: true}})
	if err != nil {
		mine.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s not found (prun's SSH client, installed beside prun)", path)
		}
		return nil, fmt.Errorf("cannot start %s: %v", path, errors.Unwrap(err))
	}
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		proc.Kill()
		proc.Wait()
		return nil, err
	}
	h := &helper{c: c.(*net.UnixConn), proc: proc, waiting: map[uint64]chan sshproto.Reply{}, ended: make(chan struct{})}
	go h.read()
	theHelper = h
	return h, nil
}

// read delivers the helper's replies until it ends.
func (h *helper) read() {
	var err error
	in := sshproto.Receiver{C: h.c}
	for {
		var r sshproto.Reply
		var fds []int
		fds, err = in.Recv(&r)
		sshproto.CloseFds(fds) // no reply carries any
		if err != nil {
			break
		}
		h.mu.Lock()
		ch := h.waiting[r.ID]
		if r.Op == sshproto.OpFailed || r.Op == sshproto.OpExit || r.Op == sshproto.OpLookedUp {
			delete(h.waiting, r.ID)
		}
		h.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	// A later start tries a new helper: it must not find this one, which
	// can take no request, once any start was told that it ended.
	helperMu.Lock()
	if theHelper == h {
		theHelper = nil
	}
	helperMu.Unlock()
	st, _ := h.proc.Wait()
	close(h.ended)
	why := fmt.Sprintf("%s ended (%v)", HelperName, st)
	if st == nil || st.Success() {
		why = fmt.Sprintf("%s ended", HelperName)
	}
	if !errors.Is(err, io.EOF) {
		why += ": " + err.Error()
	}
	h.mu.Lock()
	h.gone = errors.New(why)
	waiting := h.waiting
	h.waiting = nil
	h.mu.Unlock()
	for id, ch := range waiting {
		ch <- sshproto.Reply{Op: sshproto.OpFailed, ID: id, Status: -1, Err: why}
	}
}

func (h *helper) send(r sshproto.Request, fds ...int) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	return sshproto.Send(h.c, r, fds...)
}

// Shutdown ends this process's prun-ssh, if it runs, closing every session
// it holds at once, and waits up to a second for it to go: a process about
// to exit calls it, so that nothing of the launch outlives it.
func Shutdown() {
	helperMu.Lock()
	h := theHelper
	theHelper = nil
	helperMu.Unlock()
	if h == nil {
		return
	}
	h.c.CloseWrite() // the helper reads the end of its requests
	select {
	case <-h.ended:
	case <-time.After(time.Second):
		h.proc.Kill()
		<-h.ended
	}
	h.c.Close()
}

// Lookup asks the built-in SSH client whether the names of hosts resolve
// as its sessions would dial them (ssh_config's HostName, or the first
// ProxyJump host, in place of the host), before a launch starts anything.
// It returns why, by host, for those that surely do not; a host that
// resolves, or whose lookup fails otherwise (a timeout, no DNS server) or
// is not answered before ctx ends, is left to its session. Each name is
// looked up once, all at once; an address needs no lookup.
func Lookup(ctx context.Context, hosts []string, opts Options) map[string]string {
	var names []string
	seen := map[string]bool{}
	for _, host := range hosts {
		if _, err := netip.ParseAddr(host); err != nil && !seen[host] {
			seen[host] = true
			names = append(names, host)
		}
	}
	if len(names) == 0 || ctx.Err() != nil {
		return nil
	}
	h, err := getHelper()
	if err != nil {
		return nil // the sessions will say
	}
	byID := map[uint64]string{}                      // the lookups not answered yet
	replies := make(chan sshproto.Reply, len(names)) // never blocks the helper's reader
	h.mu.Lock()
	if h.gone != nil {
		h.mu.Unlock()
		return nil
	}
	for _, name := range names {
		h.next++
		byID[h.next] = name
		h.waiting[h.next] = replies
	}
	h.mu.Unlock()
	for id, host := range byID {
		if h.send(sshproto.Request{Op: sshproto.OpLookup, ID: id, Host: host, Home: jsonbytes.String(opts.Home)}) != nil {
			return nil // the helper is gone: its reader fails what waits
		}
	}
	bad := map[string]string{}
	for len(byID) > 0 {
		select {
		case r := <-replies: // OpFailed for every lookup when the helper ends
			if r.Op == sshproto.OpLookedUp && r.Err != "" {
				bad[byID[r.ID]] = r.Err
			}
			delete(byID, r.ID)
		case <-ctx.Done():
			for id := range byID {
				h.send(sshproto.Request{Op: sshproto.OpCancel, ID: id})
			}
			return bad
		}
	}
	return bad
}

// startSSH starts argv on host with the built-in client, in prun-ssh.
// label names the login in errors.
func startSSH(ctx context.Context, host, label string, argv []string, stdin []byte, opts Options) (*Session, error) {
	name, host := host, label // errors name the login; the request, the host
	h, err := getHelper()
	if err != nil {
		return nil, hostErr(host, err)
	}
	// The command's pipes: this end of each stays here, the other goes.
	var ours, theirs [3]int
	for i := range 3 {
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
			sshproto.CloseFds(ours[:i])
			sshproto.CloseFds(theirs[:i])
			return nil, hostErr(host, err)
		}
		if i == 0 { // stdin: we write
			ours[i], theirs[i] = p[1], p[0]
		} else {
			ours[i], theirs[i] = p[0], p[1]
		}
	}
	stdinW, stdoutR, stderrR := os.NewFile(uintptr(ours[0]), "stdin"), os.NewFile(uintptr(ours[1]), "stdout"), os.NewFile(uintptr(ours[2]), "stderr")
	abandon := func() {
		stdinW.Close()
		stdoutR.Close()
		stderrR.Close()
	}

	ch := make(chan sshproto.Reply, 2)
	h.mu.Lock()
	if h.gone != nil {
		h.mu.Unlock()
		abandon()
		sshproto.CloseFds(theirs[:])
		return nil, hostErr(host, h.gone)
	}
	h.next++
	id := h.next
	h.waiting[id] = ch
	h.mu.Unlock()
	err = h.send(sshproto.Request{Op: sshproto.OpStart, ID: id, Host: name, User: opts.User, Port: opts.Port, Argv: argv,
		Home: jsonbytes.String(opts.Home), ConnectTimeout: opts.ConnectTimeout, Grace: closeGrace}, theirs[:]...)
	sshproto.CloseFds(theirs[:]) // the helper has its own copies now
	if err != nil {
		h.mu.Lock()
		delete(h.waiting, id)
		h.mu.Unlock()
		abandon()
		return nil, hostErr(host, fmt.Errorf("cannot reach %s: %v", HelperName, err))
	}

	var r sshproto.Reply
	select {
	case r = <-ch:
	case <-ctx.Done():
		h.send(sshproto.Request{Op: sshproto.OpCancel, ID: id})
		abandon() // the end of its input closes a session that started meanwhile
		return nil, hostErr(host, fmt.Errorf("starting the command: %w", context.Cause(ctx)))
	}
	if r.Op != sshproto.OpStarted {
		abandon()
		return nil, hostErr(host, errors.New(r.Err))
	}
	s := &Session{host: host, done: make(chan struct{}), stdout: stdoutR, localIP: net.ParseIP(r.LocalIP)}
	s.feed(stdinW, opts.StdinHead, stdin)
	copied := make(chan struct{})
	go func() {
		io.Copy(&s.stderr, stderrR) // prun-ssh closes it before it says the command ended
		stderrR.Close()
		close(copied)
	}()
	go func() {
		r := <-ch
		<-copied
		if r.Err != "" {
			s.finish(-1, hostErr(host, errors.New(r.Err)))
			return
		}
		s.finish(r.Status, nil)
	}()
	s.closeFn = func() {
		go stdinW.Close() // the helper takes the end of the input for Close
	}
	return s, nil
}
