// Package dvm is what prun's persistent runtime (`prun dvm`) and its
// clients share: where a runtime lives (its directory and socket), how a
// client finds one, and the wire between them (wire.go). The runtime itself
// is the launcher's (launcher.DVM): a submission runs through the same
// phases as a standalone launch.
//
// A runtime's files live in a directory of the user's alone (0700, owned by
// the user, checked at every use): $XDG_RUNTIME_DIR/prun-dvm when that is
// set (a per-login tmpfs that the system removes at logout), else
// $TMPDIR/prun-dvm-UID (/tmp when TMPDIR is unset). Each runtime has a
// subdirectory named after it: `sock` (the Unix socket clients connect to)
// and `log` (a detached runtime's stdout and stderr).
//
// Names are scoped by allocation: a runtime started inside a Slurm, PBS or
// LSF allocation is NAME.slurm-JOBID (pbs-, lsf-), and a client inside an
// allocation resolves a name in its own allocation's scope only, so a prun in
// another allocation (or outside any) never picks it up.
package dvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultName is the runtime a client finds with no --dvm and no PRUN_DVM.
const DefaultName = "default"

// Env is the variable naming the runtime to submit to (a name or a path).
const Env = "PRUN_DVM"

// BaseDir is the directory of the user's runtimes (not created here).
func BaseDir(env func(string) string) string {
	if d := env("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "prun-dvm")
	}
	tmp := env("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, "prun-dvm-"+strconv.Itoa(os.Getuid()))
}

// Allocation names the batch allocation the process runs in ("slurm-42"),
// or "" outside any.
func Allocation(env func(string) string) string {
	for _, v := range [][2]string{{"SLURM_JOB_ID", "slurm"}, {"PBS_JOBID", "pbs"}, {"LSB_JOBID", "lsf"}} {
		if id := env(v[0]); id != "" {
			return v[1] + "-" + sanitize(id)
		}
	}
	return ""
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r < ' ' {
			return '_'
		}
		return r
	}, s)
}

// CheckName refuses a name that is not one path element.
func CheckName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("DVM name %q: want a name without /", name)
	}
	return nil
}

// Dir is the directory of the runtime called name, in this allocation's
// scope.
func Dir(env func(string) string, name string) string {
	if a := Allocation(env); a != "" {
		name += "." + a
	}
	return filepath.Join(BaseDir(env), name)
}

// Resolve turns --dvm's or PRUN_DVM's value into a runtime's directory: a
// value with a slash is a path (the directory or its socket), else a name.
func Resolve(env func(string) string, v string) (string, error) {
	if strings.Contains(v, "/") {
		if filepath.Base(v) == "sock" {
			v = filepath.Dir(v)
		}
		return v, nil
	}
	if err := CheckName(v); err != nil {
		return "", err
	}
	return Dir(env, v), nil
}

// Socket and LogFile are a runtime's files in its directory.
func Socket(dir string) string  { return filepath.Join(dir, "sock") }
func LogFile(dir string) string { return filepath.Join(dir, "log") }

// MakeDir creates the base directory and the runtime's own, both 0700, and
// checks that both are the user's alone.
func MakeDir(dir string) error {
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := CheckPrivate(d); err != nil {
			return err
		}
	}
	return nil
}

// CheckPrivate refuses a directory that is not this user's alone: another
// owner, or group or other access.
func CheckPrivate(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscallStat)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s: not a directory", d)
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s: owned by uid %d, not by this user (uid %d)", d, st.Uid, os.Getuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s: mode %04o; a DVM's directory must be the user's alone (0700)", d, fi.Mode().Perm())
	}
	return nil
}
