package dvm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// A detached runtime's stdout and stderr go to a log file of the user's
// state directory (LogDir), not of the runtime's directory: that one goes
// when the runtime ends, and with it, before, every word of why it ended
// (issue 39). The log stays, so that `prun dvm status` of a runtime that
// ended says why (LastWords), within bounds: a log past LogMax bytes moves
// to FILE.1 (the one before is dropped), and a runtime's start removes the
// oldest logs of ended runtimes past LogKeep. A running runtime holds a
// lock (flock) on its log, which is how a log is known to be an ended
// runtime's: the lock goes with the last descriptor, however the process
// ends.
const (
	LogMax  = 1 << 20
	LogKeep = 16
)

// The lines of a runtime's log that say when it started and why it ended
// (LogStarted, LogEnded), after "prun dvm: TIME ".
const (
	logStarted = "started, pid "
	logEnded   = "ended: "
)

// LogLine is a line of a runtime's log: "prun dvm: TIME msg".
func LogLine(msg string) string {
	return fmt.Sprintf("prun dvm: %s %s\n", time.Now().Format(time.RFC3339), msg)
}

// LogStarted and LogEnded are the log's first and last lines.
func LogStarted(pid int, what string) string {
	return LogLine(fmt.Sprintf("%s%d: %s", logStarted, pid, what))
}
func LogEnded(why string) string { return LogLine(logEnded + why) }

// LogDir is where the user's runtimes' logs are kept: StateDir/dvm-logs,
// else (no home) the base directory's .logs.
func LogDir(env func(string) string) string {
	if s := StateDir(env); s != "" {
		return filepath.Join(s, "dvm-logs")
	}
	return filepath.Join(BaseDir(env), ".logs")
}

// logPrefix is the start of the names of the logs of the runtime in dir on
// this host: its directory's name (its name and scope) and the host, which
// a state directory shared by several nodes tells apart.
func logPrefix(dir string) string {
	host, _ := os.Hostname()
	return filepath.Base(dir) + "@" + sanitize(host) + "."
}

// OpenLog creates the log of a runtime about to start in dir, locked, and
// links it from the runtime's directory (LogFile); it first removes the
// oldest logs of ended runtimes past LogKeep.
func OpenLog(env func(string) string, dir string) (*os.File, error) {
	ld := LogDir(env)
	if err := os.MkdirAll(ld, 0o700); err != nil {
		return nil, err
	}
	PruneLogs(ld, LogKeep-1)
	base := filepath.Join(ld, fmt.Sprintf("%s%s.%d", logPrefix(dir), time.Now().Format("20060102T150405"), os.Getpid()))
	path := base + ".log"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	for i := 1; errors.Is(err, os.ErrExist) && i < 100; i++ { // this process's second start this second
		path = fmt.Sprintf("%s-%d.log", base, i)
		f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	}
	if err != nil {
		return nil, err
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	os.Remove(LogFile(dir))
	os.Symlink(path, LogFile(dir))
	return f, nil
}

// PruneLogs removes the oldest logs in ld of ended runtimes (unlocked)
// until at most keep are left, with their older parts (FILE.1).
func PruneLogs(ld string, keep int) {
	paths, _ := filepath.Glob(filepath.Join(ld, "*.log"))
	type log struct {
		path string
		mod  time.Time
	}
	var logs []log
	for _, p := range paths {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			logs = append(logs, log{p, fi.ModTime()})
		}
	}
	sort.Slice(logs, func(a, b int) bool { return logs[a].mod.Before(logs[b].mod) })
	for i := 0; i < len(logs)-keep; i++ {
		f, err := os.OpenFile(logs[i].path, os.O_RDONLY, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.Remove(logs[i].path)
			os.Remove(logs[i].path + ".1")
		}
		f.Close()
	}
}

// RotateLog moves the log at path to path.1 once it holds more than
// LogMax bytes, and points fds (the process's stdout and stderr) at a new
// one, locked as the first was. What the process's children still write
// to the old one goes to path.1.
func RotateLog(path string, fds ...int) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed by the user: nothing to keep within bounds
	}
	if err != nil || fi.Size() <= LogMax {
		return err
	}
	if err := os.Rename(path, path+".1"); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	fmt.Fprint(f, LogLine("the log before this is in "+path+".1"))
	for _, fd := range fds {
		if err := syscall.Dup3(int(f.Fd()), fd, 0); err != nil {
			return err
		}
	}
	return nil
}

// LastWords says how the last runtime that ran in dir on this host ended,
// from its log ("" when there is none): when it started, with which pid,
// when and why it ended, and where its log is.
func LastWords(env func(string) string, dir string) string {
	paths, _ := filepath.Glob(filepath.Join(LogDir(env), logPrefix(dir)+"*.log"))
	var path string
	var newest time.Time
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && !fi.ModTime().Before(newest) {
			path, newest = p, fi.ModTime()
		}
	}
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil {
		return fmt.Sprintf("the last DVM there still runs but does not answer; its log: %s", path)
	}
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	started := ""
	for _, l := range strings.Split(string(head[:n]), "\n") {
		if _, rest, ok := strings.Cut(l, " "+logStarted); ok && strings.HasPrefix(l, "prun dvm: ") {
			t, _, _ := strings.Cut(strings.TrimPrefix(l, "prun dvm: "), " ")
			pid, _, _ := strings.Cut(rest, ":")
			started = fmt.Sprintf("pid %s, started %s", pid, t)
			break
		}
	}
	ended := ""
	if fi, err := f.Stat(); err == nil {
		off := max(fi.Size()-64<<10, 0)
		tail := make([]byte, fi.Size()-off)
		if k, _ := f.ReadAt(tail, off); k > 0 {
			tail = tail[:k]
			for _, l := range bytes.Split(tail, []byte("\n")) {
				s := string(l)
				if t, why, ok := strings.Cut(strings.TrimPrefix(s, "prun dvm: "), " "+logEnded); ok && strings.HasPrefix(s, "prun dvm: ") && !strings.Contains(t, " ") {
					ended = fmt.Sprintf("ended %s: %s", t, why)
				}
			}
		}
	}
	if started == "" {
		started = "its start not recorded"
	}
	if ended == "" {
		ended = fmt.Sprintf("ended without saying why (killed by SIGKILL, or its machine went down; last written %s)",
			newest.Format(time.RFC3339))
	}
	return fmt.Sprintf("the last DVM there (%s) %s; its log: %s", started, ended, path)
}
