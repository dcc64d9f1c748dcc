package daemon

import (
	"errors"
	"os"
	"syscall"
)

// proc is a started rank process.
type proc struct {
	pid   int
	pidfd int // -1: the kernel gave none (before Linux 5.2)
}

// command is what a rank's process is started with.
type command struct {
	path  string
	argv  []string
	env   []string
	dir   string
	files []*os.File // stdin, stdout, stderr, then fd 3 on
	sys   *syscall.SysProcAttr
}

// spawn starts c through syscall.StartProcess rather than exec.Cmd: the
// first os.StartProcess of a process probes pidfd support by forking a
// child of its own, and reaping in the poller would then open a second
// pidfd for each rank. Here clone hands back the one pidfd there is.
func spawn(c command) (proc, error) {
	fds := make([]uintptr, len(c.files))
	for i, f := range c.files {
		fds[i] = f.Fd()
	}
	pidfd := -1
	sys := *c.sys
	sys.PidFD = &pidfd
	attr := &syscall.ProcAttr{Dir: c.dir, Env: c.env, Files: fds, Sys: &sys}
	pid, _, err := syscall.StartProcess(c.path, c.argv, attr)
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) {
		// A kernel without CLONE_PIDFD refuses the clone before any child exists.
		sys.PidFD, pidfd = nil, -1
		pid, _, err = syscall.StartProcess(c.path, c.argv, attr)
	}
	if err != nil {
		return proc{}, err
	}
	return proc{pid: pid, pidfd: pidfd}, nil
}

// wait reaps p and closes its pidfd. With a pidfd it waits in Go's poller
// (the pidfd turns readable when the process ends); a blocking wait4 would
// hold an OS thread per rank for as long as the rank runs. (wait4 by pid
// is safe: only this goroutine reaps the process, so its pid cannot be
// reused before.)
func (p proc) wait() (ws syscall.WaitStatus, ru syscall.Rusage, err error) {
	reap := func() (bool, error) {
		got, err := syscall.Wait4(p.pid, &ws, syscall.WNOHANG, &ru)
		return got == p.pid, err
	}
	if p.pidfd >= 0 {
		if err := syscall.SetNonblock(p.pidfd, true); err == nil {
			f := os.NewFile(uintptr(p.pidfd), "pidfd")
			defer f.Close()
			if rc, err := f.SyscallConn(); err == nil {
				var werr error
				err = rc.Read(func(uintptr) bool {
					var done bool
					done, werr = reap()
					return werr != nil || done
				})
				if err == nil {
					return ws, ru, werr
				}
			}
		} else {
			syscall.Close(p.pidfd)
		}
	}
	for {
		_, err = syscall.Wait4(p.pid, &ws, 0, &ru)
		if err != syscall.EINTR {
			return ws, ru, err
		}
	}
}
