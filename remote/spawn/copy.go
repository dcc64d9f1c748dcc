package spawn

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"prun/rsh"
	"prun/sessiondir"
)

// Where prun is not installed at the launcher's own path, the launcher (or
// a parent daemon) starts the daemon again with its own binary ahead of the
// bootstrap on the session's standard input: the session stores it in a
// fresh directory under the node's $TMPDIR, prun.bin.XXXXXXXX, runs the
// daemon from there and removes the directory when the daemon ends (also on
// SIGHUP and SIGTERM). The directory holds a lock file that the daemon locks
// while it runs, so that a node's cleanup of stale session directories takes
// a directory left by a killed session only once its daemon is gone (and,
// before the daemon runs to lock it, only once nothing in it changed for a
// minute: the binary arriving). No scp
// and no shared file system: only the SSH session (in-process or --rsh). The
// node needs only the C library, a glibc as recent as the one prun was
// built with (libpmix, libevent, hwloc and zlib are linked in; libmunge
// and libudev load at their first use, where present: pmixsrv/lazylibs.c);
// when the copy cannot run, the error says so.

// copyPrefix names the directories of copies; sessiondir.CleanStale takes
// them for stale session directories once their lock is free.
const copyPrefix = sessiondir.CopyPrefix

// Exit statuses of copyCommand before the daemon runs.
const (
	copyNoDir     = 125 // no directory for the copy
	copyTruncated = 124 // the copy did not arrive whole
)

// copyCommand stores the first size bytes of its standard input as prun
// (and the next helperSize as prun-ssh beside it) and runs the daemon from
// there, like daemonCommand.
func copyCommand(size, helperSize int) []string {
	helper := ""
	if helperSize > 0 {
		helper = fmt.Sprintf(` && head -c %d >"$d/%s" && [ $(($(wc -c <"$d/%s"))) -eq %d ] && chmod 700 "$d/%s"`,
			helperSize, rsh.HelperName, rsh.HelperName, helperSize, rsh.HelperName)
	}
	script := fmt.Sprintf(`d=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/%sXXXXXXXX") || exit %d
trap 'rm -rf "$d"' EXIT
trap 'exit 129' HUP
trap 'exit 143' TERM
: >"$d/%s" && head -c %d >"$d/prun" && [ $(($(wc -c <"$d/prun"))) -eq %d ] && chmod 700 "$d/prun"%s || exit %d
%s (exec "$d/prun" %s %s %s); s=$?; %s; [ $s = 0 ] || "$d/prun" %s %s; exit $s`,
		copyPrefix, copyNoDir, sessiondir.LockName, size, size, helper, copyTruncated, quietShell, DaemonArgs[0], DaemonArgs[1], daemonStderr, closeStdio, CleanupArgs[0], CleanupArgs[1])
	return []string{"sh", "-c", script}
}

// selfImage is this process's own binary, read once.
var selfImage = sync.OnceValues(func() ([]byte, error) { return os.ReadFile("/proc/self/exe") })

// helperImage is this process's prun-ssh, read once.
var helperImage = sync.OnceValues(func() ([]byte, error) {
	p, err := rsh.HelperPath()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
})

// copyFailure says why a daemon started from a copy ended.
func copyFailure(exe string, code int, stderr string) string {
	why := lastLine(stderr)
	if why == "" {
		why = fmt.Sprintf("exit status %d", code)
	}
	switch code {
	case copyNoDir, copyTruncated:
		return fmt.Sprintf("%s not found there, and a copy of prun could not be stored there: %s", exe, why)
	case notFound, 126:
		return fmt.Sprintf("%s not found there, and the copy of prun sent over SSH could not run: %s", exe, why)
	}
	return exitReason(exe, code, nil, stderr)
}

// LockCopyDir holds the lock of the copy directory prun runs from, if it
// runs from one, until the process exits.
func LockCopyDir() {
	exe, err := os.Executable()
	if err != nil || !strings.HasPrefix(filepath.Base(filepath.Dir(exe)), copyPrefix) {
		return
	}
	f, err := os.Open(filepath.Join(filepath.Dir(exe), sessiondir.LockName))
	if err != nil {
		return
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) // f stays open: held until exit
}
