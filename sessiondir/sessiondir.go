// Package sessiondir lays out and removes a launch's session directories:
// a 0700 top directory under $TMPDIR (PMIX_SERVER_TMPDIR and PMIX_TMPDIR),
// one directory per namespace (PMIX_NSDIR) and one per rank (PMIX_PROCDIR).
// prun removes them itself, so it tells PMIx PMIX_TDIR_RMCLEAN.
package sessiondir

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const prefix = "prun."

// Dir is one launch's session directory tree.
type Dir struct {
	Top string
}

// Create makes the top directory under tmp (os.TempDir() when empty). It
// first removes what dead launchers of this user left behind: a SIGKILLed
// prun cannot clean up after itself, so the next one does.
func Create(tmp string) (*Dir, error) {
	if tmp == "" {
		tmp = os.TempDir()
	}
	CleanStale(tmp)
	top, err := os.MkdirTemp(tmp, fmt.Sprintf("%s%d.", prefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	if err := os.Chmod(top, 0o700); err != nil { // MkdirTemp already uses 0700; be explicit
		os.Remove(top)
		return nil, fmt.Errorf("session directory: %w", err)
	}
	return &Dir{Top: top}, nil
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

// Remove deletes the whole tree.
func (d *Dir) Remove() error { return os.RemoveAll(d.Top) }

// CleanStale removes session directories of this user's launchers that are
// no longer running. The launcher's pid is part of the directory name.
func CleanStale(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	uid := os.Getuid()
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, prefix) {
			continue
		}
		pidStr, _, ok := strings.Cut(strings.TrimPrefix(name, prefix), ".")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		path := filepath.Join(tmp, name)
		var st syscall.Stat_t
		if syscall.Stat(path, &st) != nil || int(st.Uid) != uid {
			continue
		}
		if alive(pid) {
			continue
		}
		os.RemoveAll(path)
	}
}

// alive reports whether pid is a running prun (a recycled pid that now
// belongs to another program does not keep a directory alive).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return false
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return true // cannot tell: keep it
	}
	return strings.TrimSpace(string(comm)) == "prun" || strings.HasSuffix(strings.TrimSpace(string(comm)), ".test")
}
