// Package cgroup gives a job's processes on a node a cgroup (v2) of their
// own, as Slurm's proctrack/cgroup and systemd's scopes do: a process cannot
// leave it by forking, by setsid or by dropping its environment, so the
// job's end ends every process the job started, however it detached.
//
// A job's group is a child of the daemon's own cgroup (the place the node
// gave prun: a login session's scope, a Slurm step's task cgroup, a
// delegated subtree). No controller is enabled in it: it only counts and
// kills (cgroup.kill), and the job's processes keep the limits of the
// daemon's cgroup. Its ranks are created inside it (clone3's
// CLONE_INTO_CGROUP: the daemon's spawn), so none of them ever runs
// outside it, not even before its exec.
//
// Where no group can be made (no cgroup2 file system mounted, as in a
// network namespace entered with `ip netns exec`; a read-only one, as in
// most containers; the daemon's cgroup not delegated to its user; a kernel
// before 5.7 without CLONE_INTO_CGROUP), Parent and New say why and the
// daemon falls back to finding the job's processes by the PRUN_SESSION and
// PRUN_NSPACE variables in their environment (daemon/leftovers.go).
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Group is one job's cgroup on this node.
type Group struct {
	dir string
	fd  int // the directory, open for CLONE_INTO_CGROUP until End
}

// Parent returns the directory of this process's own cgroup in the cgroup2
// hierarchy, under which its jobs' groups go, or why there is none this
// process may use. It is looked up once per process.
func Parent() (string, error) {
	parentOnce.Do(func() { parentDir, parentErr = findParent() })
	return parentDir, parentErr
}

var (
	parentOnce sync.Once
	parentDir  string
	parentErr  error
)

// cgroup2Magic is CGROUP2_SUPER_MAGIC, the file system type statfs reports.
const cgroup2Magic = 0x63677270

func findParent() (string, error) {
	mnt, err := mountPoint()
	if err != nil {
		return "", err
	}
	rel, err := ownPath()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(mnt, rel)
	// A process may create its jobs' groups only where it may also move
	// processes: CLONE_INTO_CGROUP needs write access to the cgroup.procs
	// of the common ancestor, which is this very group (a delegated one's
	// belongs to its user; a login session's scope, root's alone).
	if err := unix.Access(filepath.Join(dir, "cgroup.procs"), unix.W_OK); err != nil {
		return "", fmt.Errorf("cgroup %s is not this user's (%w)", rel, err)
	}
	return dir, nil
}

// mountPoint finds the cgroup2 file system: /sys/fs/cgroup on a unified
// machine, /sys/fs/cgroup/unified on a hybrid one, else wherever
// /proc/self/mountinfo says.
func mountPoint() (string, error) {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Type == cgroup2Magic {
			return dir, nil
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("no cgroup2 file system: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if ok && len(fields) >= 5 && strings.HasPrefix(post, "cgroup2 ") && fields[3] == "/" {
			return unescapeMount(fields[4]), nil
		}
	}
	return "", errors.New("no cgroup2 file system mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownPath is this process's cgroup2 path (the "0::" line of
// /proc/self/cgroup), relative to the hierarchy's root as mounted.
func ownPath() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
				return "", fmt.Errorf("this process's cgroup is %q", p)
			}
			return p, nil
		}
	}
	return "", errors.New("this process is in no cgroup2 group")
}

// New makes the group name under parent, empty and without controllers.
func New(parent, name string) (*Group, error) {
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Rmdir(dir)
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &Group{dir: dir, fd: fd}, nil
}

// FD is the group's directory, for clone3's CLONE_INTO_CGROUP.
func (g *Group) FD() int { return g.fd }

// Path is the group's directory.
func (g *Group) Path() string { return g.dir }

// Proc is a process that End could not end.
type Proc struct {
	Pid  int
	Comm string
}

func (p Proc) String() string { return fmt.Sprintf("%d (%s)", p.Pid, p.Comm) }

// End kills every process in the group and in groups below it (a job's
// rank may have made some: a prun started by a rank makes its own), waits
// up to wait for them to go, and removes the groups. It returns what was
// still there then, whose groups stay. A group whose processes are all
// gone is removed at once, without a kill: a job that left nothing costs
// one rmdir. Zombies count as gone (the daemon keeps its ranks zombies
// until after End: see daemon/signals.go).
func (g *Group) End(wait time.Duration) []Proc {
	defer func() {
		if g.fd >= 0 {
			unix.Close(g.fd)
			g.fd = -1
		}
	}()
	if unix.Rmdir(g.dir) == nil {
		return nil
	}
	return end(g.dir, wait)
}

// end kills what runs in dir (and below) and removes it, within wait.
func end(dir string, wait time.Duration) []Proc {
	deadline := time.Now().Add(wait)
	kill(dir)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		if removeTree(dir) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(pause)
		kill(dir) // a kernel without cgroup.kill: what forked meanwhile
	}
	var left []Proc
	for _, pid := range procsBelow(dir) {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		left = append(left, Proc{Pid: pid, Comm: string(bytes.TrimSpace(comm))})
	}
	if len(left) == 0 { // gone just now
		if removeTree(dir) == nil {
			return nil
		}
	}
	return left
}

// kill sends SIGKILL to every process in dir and below: at once through
// cgroup.kill (Linux 5.14), which also stops forks racing with it; on older
// kernels to each process listed, which its caller repeats until none is.
func kill(dir string) {
	err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return
	}
	for _, pid := range procsBelow(dir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// procsBelow lists the processes of dir and of every group below it.
func procsBelow(dir string) []int {
	var pids []int
	filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeTree removes dir and the groups below it, deepest first.
func removeTree(dir string) error {
	err := unix.Rmdir(dir)
	if err != unix.EBUSY {
		if err == unix.ENOENT {
			return nil
		}
		return err
	}
	ents, rerr := os.ReadDir(dir)
	if rerr != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
	if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

// Sweep ends the groups under this process's own cgroup whose names begin
// with prefix: those a daemon that died without ending its jobs left (a
// SIGKILLed launcher), found by the next prun of the same place (the same
// shell, or the SSH session that ran the dead daemon). It gives each a
// second and returns what survived.
func Sweep(prefix string) []Proc {
	parent, err := Parent()
	if err != nil {
		return nil
	}
	return SweepIn(parent, prefix)
}

// SweepIn is Sweep under the group parent.
func SweepIn(parent, prefix string) []Proc {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var left []Proc
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			left = append(left, end(filepath.Join(parent, e.Name()), time.Second)...)
		}
	}
	return left
}

// Of returns the cgroup2 directory process pid is in, or "" (no cgroup2,
// the process gone).
func Of(pid int) string {
	mnt, err := mountPoint()
	if err != nil {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return filepath.Join(mnt, p)
		}
	}
	return ""
}
