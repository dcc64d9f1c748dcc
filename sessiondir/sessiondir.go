// Package sessiondir lays out and removes a launch's session directories:
// a 0700 top directory under $TMPDIR (PMIX_SERVER_TMPDIR and PMIX_TMPDIR),
// one directory per namespace (PMIX_NSDIR) and one per rank (PMIX_PROCDIR),
// which the daemon makes when a job's first PMIx client connects.
// prun removes them itself, so it tells PMIx PMIX_TDIR_RMCLEAN.
package sessiondir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"prun/internal/cgroup"
)

// Names CleanStale recognises: a directory named Prefix... is prun's, and
// is stale once nobody holds its flock: a session directory's own, or the
// flock of its LockName file (remote's copies of the binary, which a shell
// script creates, and the session directories of earlier prun versions).
const (
	Prefix   = "prun."
	LockName = ".prun.lock"
	// CopyPrefix names remote's copies of the binary (remote/spawn/copy.go).
	CopyPrefix = Prefix + "bin."
)

const (
	// An empty unlocked directory other than a session directory (a copy
	// of remote's) may be one being created; only one this old is a
	// leftover.
	unlockedAge = time.Minute
)

// Dir is one launch's session directory tree.
type Dir struct {
	Top     string
	lock    *os.File      // Top itself, flock'ed for the launcher's lifetime: proof that it lives
	cleaned chan struct{} // closed when CleanStale, started by Create, is done
}

// Create makes the top directory under tmp (os.TempDir() when empty). It
// also removes, in the background, what dead launchers of this user left
// behind: a SIGKILLed prun cannot clean up after itself, so the next one
// does. (A large $TMPDIR takes a while to read, time the launch spends
// better starting its PMIx server.)
//
// A directory is someone's only once its creator holds its lock, and
// CleanStale takes an empty unlocked session directory for a dead
// launcher's at once (a launcher SIGKILLed before it put anything there, or
// one whose ranks all run on other nodes). So a cleanup may remove the
// directory between its creation and its lock: Create then makes another.
// A cleanup holds the lock while it removes, so the lock taken here
// (waiting for it) comes either first, and the directory is ours, or after
// the removal, which the check of the path then sees.
func Create(tmp string) (*Dir, error) {
	if tmp == "" {
		tmp = os.TempDir()
	}
	for attempt := 1; ; attempt++ {
		d, err := create(tmp)
		if err == errTaken && attempt < maxCreateAttempts {
			continue
		}
		if err != nil {
			return nil, err
		}
		d.cleaned = make(chan struct{})
		go func() {
			defer close(d.cleaned)
			CleanStale(tmp)
		}()
		return d, nil
	}
}

// maxCreateAttempts bounds Create's retries: each lost attempt needs
// another launcher's cleanup to hit the microseconds between a mkdir and
// its lock.
const maxCreateAttempts = 10

// errTaken: a cleanup removed the new directory before its lock was taken.
var errTaken = errors.New("session directory removed by another launcher's cleanup as it was created")

// createHook, when set (by tests), runs between the steps of create:
// "made" after the mkdir, "opened" after the open, before the lock.
var createHook func(step, top string)

// create makes one directory and locks it; errTaken when a cleanup took
// it first.
func create(tmp string) (*Dir, error) {
	top, err := os.MkdirTemp(tmp, fmt.Sprintf("%s%d.", Prefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	if createHook != nil {
		createHook("made", top)
	}
	// The lock is the directory's own, held until the process ends, however
	// it ends; its fd is close-on-exec, so ranks do not inherit it. (A lock
	// file inside would cost every launch its creation and removal.)
	f, err := os.Open(top)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errTaken
	}
	if err != nil {
		os.Remove(top)
		return nil, fmt.Errorf("session directory lock: %w", err)
	}
	if createHook != nil {
		createHook("opened", top)
	}
	// Blocking: only a cleanup holds the lock of a directory this new, for
	// as long as it takes to remove it.
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		os.Remove(top)
		return nil, fmt.Errorf("session directory lock: %w", err)
	}
	if !sameFile(f, top) {
		f.Close()
		return nil, errTaken
	}
	d := &Dir{Top: top, lock: f}
	if err := f.Chmod(0o700); err != nil { // MkdirTemp uses 0700 already, less the umask; be explicit
		d.Remove()
		return nil, fmt.Errorf("session directory: %w", err)
	}
	return d, nil
}

// flock takes f's lock, again when a signal interrupts the wait.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// sameFile reports whether path still names the directory open as f (a
// removed one has no path, and its name may be another's by now).
func sameFile(f *os.File, path string) bool {
	var open, named syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &open) != nil || syscall.Lstat(path, &named) != nil {
		return false
	}
	return open.Nlink > 0 && open.Dev == named.Dev && open.Ino == named.Ino
}

// NSDir is the namespace's directory.
func (d *Dir) NSDir(nspace string) string { return filepath.Join(d.Top, nspace) }

// ProcDir is the rank's directory inside its namespace's.
func (d *Dir) ProcDir(nspace string, rank int) string {
	return filepath.Join(d.NSDir(nspace), strconv.Itoa(rank))
}

// MakeProcDirs creates the namespace directory and the given ranks' directories.
func (d *Dir) MakeProcDirs(nspace string, ranks []int) error {
	if err := os.Mkdir(d.NSDir(nspace), 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("session directory: %w", err)
	}
	for _, r := range ranks {
		if err := os.Mkdir(d.ProcDir(nspace, r), 0o700); err != nil && !os.IsExist(err) {
			return fmt.Errorf("session directory: %w", err)
		}
	}
	return nil
}

// Remove deletes the whole tree and drops the lock, once the cleaning of
// stale directories that Create started is done.
func (d *Dir) Remove() error {
	if d.cleaned != nil {
		<-d.cleaned
	}
	err := os.RemoveAll(d.Top)
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
	return err
}

// CleanStale removes session directories of this user's launchers that are
// no longer running: their lock is free. It holds the lock while it
// removes one, so that a launcher creating that directory (Create) sees it
// go, instead of taking an empty directory it then finds removed.
func CleanStale(tmp string) {
	uid := os.Getuid()
	for _, name := range sessionNames(tmp) {
		path := filepath.Join(tmp, name)
		var st syscall.Stat_t
		if syscall.Lstat(path, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || int(st.Uid) != uid {
			continue
		}
		if lock := stale(path, name, time.Unix(st.Mtim.Unix())); lock != nil {
			killLeftovers(path, uid)
			os.RemoveAll(path)
			lock.Close()
		}
	}
}

// sessionNames lists the entries of dir named like session directories.
// Every launch reads $TMPDIR, which on a shared machine can hold many
// thousands of entries: names only, unsorted, without an entry object each
// (os.ReadDir makes and sorts one per entry).
func sessionNames(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	ours := names[:0]
	for _, name := range names {
		if strings.HasPrefix(name, Prefix) {
			ours = append(ours, name)
		}
	}
	return ours
}

// NspaceEnv is the variable the daemon exports to every rank, naming its
// job; the rank's own children inherit it.
const NspaceEnv = "PRUN_NSPACE"

// SessionEnv is the variable the daemon exports to every rank, naming its
// session directory (Dir.ID): how a later prun finds what a killed daemon's
// ranks left. A job's namespace is the same on every node, and two
// launchers may name theirs alike; a session directory is this daemon's.
const SessionEnv = "PRUN_SESSION"

// ID names the session directory among this node's (its base name).
func (d *Dir) ID() string { return filepath.Base(d.Top) }

// killLeftovers kills what a SIGKILLed launcher could not: processes that
// its ranks started, which outlive the ranks (PR_SET_PDEATHSIG covers only
// the ranks): the job cgroups its daemon made (named after the session
// directory, under this process's own cgroup, or wherever a process marked
// with the directory's ID is), and the processes marked with that ID.
func killLeftovers(dir string, uid int) {
	id := filepath.Base(dir)
	mark := SessionEnv + "=" + id
	groups := map[string]bool{}
	for _, pid := range Marked(uid, mark) {
		if g := cgroup.Of(pid); strings.HasPrefix(filepath.Base(g), id+".") {
			groups[filepath.Dir(g)] = true
		}
	}
	if parent, err := cgroup.Parent(); err == nil {
		groups[parent] = true
	}
	for parent := range groups {
		cgroup.SweepIn(parent, id+".")
	}
	KillMarked(uid, time.Second, mark)
}

// Marked lists the processes of uid (every process, for root) whose
// environment holds each of marks (NAME=VALUE), as it was when they
// started: how a job's processes are found where no cgroup holds them.
// What a process started with another environment (env -i), or that wrote
// over its own, is not found.
func Marked(uid int, marks ...string) []int {
	pids, _ := search(uid, marks)
	return pids
}

// search is Marked, and also reports whether some process could not be
// told: one whose environment reads empty though it is neither a zombie nor
// a kernel thread (one amid its execve, or exiting), which a search a
// moment later can tell.
func search(uid int, marks []string) (pids []int, unsure bool) {
	procs, err := os.Open("/proc")
	if err != nil {
		return nil, false
	}
	names, _ := procs.Readdirnames(-1)
	procs.Close()
	self := os.Getpid()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		if uid != 0 {
			var st syscall.Stat_t
			if syscall.Stat("/proc/"+name, &st) != nil || int(st.Uid) != uid {
				continue
			}
		}
		switch hasMarks(pid, marks) {
		case yes:
			pids = append(pids, pid)
		case unknown:
			unsure = true
		}
	}
	return pids, unsure
}

type answer int

const (
	no answer = iota
	yes
	unknown
)

// hasMarks tells whether pid's environment holds each of marks.
func hasMarks(pid int, marks []string) answer {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return no // gone, or not this user's to read
	}
	if len(env) == 0 {
		if inTransit(pid) {
			return unknown
		}
		return no
	}
	env = append([]byte{0}, env...) // so that every variable starts after a NUL
	for _, m := range marks {
		if !bytes.Contains(env, []byte("\x00"+m+"\x00")) {
			return no
		}
	}
	return yes
}

// inTransit reports whether pid, whose environment read empty, is a
// process in the midst of an execve or of its exit rather than a zombie or
// a kernel thread (whose environments are empty for good).
func inTransit(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	// After the command: state, ppid, pgrp, session, tty, tpgid, flags.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	const pfKthread = 0x00200000
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfKthread == 0
}

// KillMarked kills the processes Marked finds, and searches again until a
// search finds none and none that it could not tell, or wait has passed;
// then it waits, within wait, for those it killed to be gone (a zombie is
// gone). It returns those it could not end. Each is signalled through a
// pidfd after its mark is read again: a pid that was reused since the
// search names a process that is spared.
func KillMarked(uid int, wait time.Duration, marks ...string) []int {
	deadline := time.Now().Add(wait)
	killed := map[int]int{} // pid -> its pidfd, until it is seen gone
	defer func() {
		for _, fd := range killed {
			unix.Close(fd)
		}
	}()
	var last []int
	for pause := 500 * time.Microsecond; ; pause = min(2*pause, 20*time.Millisecond) {
		pids, unsure := search(uid, marks)
		for _, pid := range pids {
			if _, ok := killed[pid]; ok {
				continue // signalled already: its mark stays until its exit
			}
			if fd := killMarked(pid, marks); fd >= 0 {
				killed[pid] = fd
			}
		}
		last = pids
		if len(pids) == 0 && !unsure || time.Now().After(deadline) {
			break
		}
		time.Sleep(pause)
	}
	// A process SIGKILLed may take a moment to exit (its environment reads
	// empty meanwhile); what did not exit by the deadline is named, with
	// what the last search found and could not signal.
	var left []int
	for pid, fd := range killed {
		if !exitedBy(fd, deadline) {
			left = append(left, pid)
		}
	}
	for _, pid := range last {
		if _, ok := killed[pid]; !ok {
			left = append(left, pid)
		}
	}
	slices.Sort(left)
	return left
}

// exitedBy waits until the process of pidfd fd has exited (its pidfd
// polls readable), or deadline.
func exitedBy(fd int, deadline time.Time) bool {
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, max(int(time.Until(deadline).Milliseconds()), 0))
		if err != unix.EINTR {
			return err == nil && n > 0
		}
	}
}

// killMarked signals pid if it still carries marks, and returns the pidfd
// it signalled through (-1: none).
func killMarked(pid int, marks []string) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if err == unix.ENOSYS { // before Linux 5.3
			syscall.Kill(pid, syscall.SIGKILL)
		}
		return -1
	}
	if hasMarks(pid, marks) != yes { // the process fd holds is still the one found
		unix.Close(fd)
		return -1
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	return fd
}

// stale reports whether dir, named name, is a dead launcher's or
// session's: it returns the dir's lock, taken, for the caller to drop once
// the directory is gone; nil when dir is alive or may be.
func stale(dir, name string, mtime time.Time) *os.File {
	f, err := os.Open(filepath.Join(dir, LockName))
	lockFile := err == nil
	if os.IsNotExist(err) {
		f, err = os.Open(dir) // a session directory locks itself
	}
	if err != nil {
		return nil
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return nil // its launcher holds the lock
	}
	if lockFile {
		// A copy's lock is free from the script's creation of the lock
		// file until its daemon runs: while the binary arrives (seconds,
		// over a slow link), which keeps changing its files.
		if strings.HasPrefix(name, CopyPrefix) && changedWithin(dir, unlockedAge) {
			f.Close()
			return nil
		}
		return f
	}
	// Unlocked: its launcher is gone, or it was made this instant and is
	// not locked yet, still empty. Create makes its session directory
	// again when a cleanup took it that instant, so an empty one is a dead
	// launcher's too (SIGKILLed before it put anything there, or all of
	// whose ranks ran on other nodes). Other directories of ours (remote's
	// copies, made by a shell script) cannot recover: empty, they are
	// taken only once they are old.
	if names, _ := f.Readdirnames(1); len(names) > 0 || sessionName(name) || time.Since(mtime) > unlockedAge {
		return f
	}
	f.Close()
	return nil
}

// changedWithin reports whether dir or a file in it changed within d.
func changedWithin(dir string, d time.Duration) bool {
	ents, _ := os.ReadDir(dir)
	paths := []string{dir}
	for _, e := range ents {
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	for _, p := range paths {
		if st, err := os.Lstat(p); err == nil && time.Since(st.ModTime()) < d {
			return true
		}
	}
	return false
}

// sessionName reports whether name is that of a session directory Create
// makes: Prefix, the creator's pid, a dot, a random number.
func sessionName(name string) bool {
	rest, ok := strings.CutPrefix(name, Prefix)
	pid, rand, ok2 := strings.Cut(rest, ".")
	return ok && ok2 && allDigits(pid) && allDigits(rand)
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
