package daemon

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"prun/internal/cgroup"
	"prun/internal/timerslack"

	"golang.org/x/sys/unix"
)

// proc is a started rank process.
type proc struct {
	pid   int
	pidfd int      // -1: the kernel gave none (before Linux 5.2), or closed once the exit was seen
	file  *os.File // the pidfd once in Go's poller
	// outside: why the process was started outside its job's cgroup (nil:
	// inside, or the job has none).
	outside error
}

// command is what a rank's process is started with.
type command struct {
	path  string
	argv  []string
	env   []string
	dir   string
	files []*os.File // stdin, stdout, stderr, then fd 3 on
	sys   *syscall.SysProcAttr
	// group is the job's cgroup to create the process in (nil: none):
	// clone3's CLONE_INTO_CGROUP, so that not even the child between its
	// fork and its exec runs outside it.
	group *cgroup.Group
}

// spawn starts c through syscall.StartProcess rather than exec.Cmd: the
// first os.StartProcess of a process probes pidfd support by forking a
// child of its own, and reaping in the poller would then open a second
// pidfd for each rank. Here clone hands back the one pidfd there is.
//
// A start into c.group that fails is tried again outside it: a kernel
// without CLONE_INTO_CGROUP (before 5.7), or a group the kernel will not
// take the process into, fails the clone, and only a start without the
// group tells that from a failed exec (both are an errno). Then the proc's
// outside says why the process runs outside the group.
func spawn(c command) (proc, error) {
	fds := make([]uintptr, len(c.files))
	for i, f := range c.files {
		fds[i] = f.Fd()
	}
	pidfd := -1
	sys := *c.sys
	sys.PidFD = &pidfd
	if c.group != nil {
		sys.UseCgroupFD, sys.CgroupFD = true, c.group.FD()
	}
	attr := &syscall.ProcAttr{Dir: c.dir, Env: c.env, Files: fds, Sys: &sys}
	try := func() (int, error) {
		pidfd = -1
		pid, _, err := syscall.StartProcess(c.path, c.argv, attr)
		return pid, err
	}
	var outside error
	pid, err := try()
	if err != nil && sys.UseCgroupFD {
		outside, sys.UseCgroupFD, sys.CgroupFD = err, false, 0
		pid, err = try()
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) {
		// A kernel without CLONE_PIDFD refuses the clone before any child exists.
		sys.PidFD = nil
		pid, err = try()
	}
	if err != nil {
		return proc{}, err // the start itself failed: outside says nothing
	}
	return proc{pid: pid, pidfd: pidfd, outside: outside}, nil
}

// exited waits for p to end and returns how it ended, leaving it a zombie
// until reap: its pid, which is its process group's id, cannot be reused
// meanwhile, so the group can be signalled safely after the rank is gone
// (finish kills what ranks left in their groups when the job ends; a
// reused number would be some other program's group). With a pidfd the wait
// is in Go's poller; a blocking waitid would hold an OS thread per rank for
// as long as the rank runs.
func (p *proc) exited() (ws syscall.WaitStatus, ru syscall.Rusage, err error) {
	var info unix.Siginfo
	var uru unix.Rusage
	peek := func(idType, id, flags int) error {
		info = unix.Siginfo{}
		return unix.Waitid(idType, id, &info, unix.WEXITED|unix.WNOWAIT|flags, &uru)
	}
	polled := false
	if p.pidfd >= 0 && syscall.SetNonblock(p.pidfd, true) == nil {
		p.file = os.NewFile(uintptr(p.pidfd), "pidfd") // reap closes it
		if rc, cerr := p.file.SyscallConn(); cerr == nil {
			var werr error
			err = rc.Read(func(uintptr) bool {
				werr = peek(unix.P_PIDFD, p.pidfd, unix.WNOHANG)
				return werr != nil || info.Signo != 0 // 0: not ended yet
			})
			polled = err == nil && werr == nil
		}
	}
	if !polled { // no pidfd, or the poller refused it: block (by pid: the pidfd is nonblocking now)
		for err = peek(unix.P_PID, p.pid, 0); err == syscall.EINTR; err = peek(unix.P_PID, p.pid, 0) {
		}
	}
	// The exit is seen: the pidfd has served (reap waits by pid), and an
	// exited rank holds no descriptor until its job ends.
	p.closePidfd()
	if err != nil {
		return ws, ru, err
	}
	ru = *(*syscall.Rusage)(unsafe.Pointer(&uru)) // the same struct
	return siginfoStatus(&info), ru, nil
}

// ended reports whether p has exited, without waiting or reaping it.
func (p *proc) ended() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo != 0
}

// si_code values of SIGCHLD.
const (
	cldExited = 1
	cldDumped = 3
)

// siginfoStatus turns waitid's answer into wait4's encoding.
func siginfoStatus(info *unix.Siginfo) syscall.WaitStatus {
	// For SIGCHLD the kernel puts si_pid, si_uid and si_status right after
	// the three ints and the padding that unix.Siginfo names.
	status := *(*int32)(unsafe.Add(unsafe.Pointer(info), 24))
	switch info.Code {
	case cldExited:
		return syscall.WaitStatus(status&0xff) << 8
	case cldDumped:
		return syscall.WaitStatus(status&0x7f | 0x80)
	default: // CLD_KILLED
		return syscall.WaitStatus(status & 0x7f)
	}
}

// reap collects p once it has exited (and closes its pidfd, if exited
// was not called).
func (p *proc) reap() {
	for {
		_, err := syscall.Wait4(p.pid, nil, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	p.closePidfd()
}

// closePidfd closes p's pidfd, if it is open.
func (p *proc) closePidfd() {
	if p.file != nil {
		p.file.Close()
		p.file = nil
	} else if p.pidfd >= 0 {
		syscall.Close(p.pidfd)
	}
	p.pidfd = -1
}

// startLocked starts cmd, bound by b, from the calling goroutine's OS
// thread, locked to it for the fork. PR_SET_PDEATHSIG follows the forking
// thread, and Go ends a thread only when a goroutine exits while locked to
// it, which the deferred unlock rules out; so the thread outlives the rank
// as the process does. Forking here rather than on a pool of locked threads
// spares each rank two thread wake-ups.
func startLocked(cmd command, b binding) (proc, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return timerslack.Fork(func() (proc, error) { return b.start(cmd) })
}

// startFiles are the descriptors made for one process's start, kept as
// os/exec's Cmd.Start keeps them: the child's ends are closed once the
// fork has copied them (or the start failed), the parent's ends only if
// the start failed; otherwise they belong to whoever serves them.
type startFiles struct {
	child, parent []*os.File
}

// add records a parent's end and a child's end (either may be nil).
func (f *startFiles) add(parent, child *os.File) {
	if parent != nil {
		f.parent = append(f.parent, parent)
	}
	if child != nil {
		f.child = append(f.child, child)
	}
}

// pipe makes a pipe whose write end is the child's (childWrites) or the
// parent's.
func (f *startFiles) pipe(childWrites bool) (parent, child *os.File, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if childWrites {
		parent, child = r, w
	} else {
		parent, child = w, r
	}
	f.add(parent, child)
	return parent, child, nil
}

// close closes the child's ends, and the parent's too if the start failed.
func (f *startFiles) close(failed bool) {
	for _, c := range f.child {
		c.Close()
	}
	f.child = nil
	if failed {
		for _, c := range f.parent {
			c.Close()
		}
	}
	f.parent = nil
}
