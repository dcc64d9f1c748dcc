// Package dvm is what prun's persistent runtime (`prun dvm`) and its
// clients share: where a runtime lives (its directory and socket), how a
// client finds one, and the wire between them (wire.go). The runtime itself
// is the launcher's (launcher.DVM): a submission runs through the same
// phases as a standalone launch.
//
// A runtime's files live in a directory of the user's alone (0700, owned by
// the user, checked at every use), under a base directory that no other
// user can create first (BaseDir). Each runtime has a subdirectory named
// after it: `sock` (the Unix socket clients connect to) and `log` (a
// detached runtime's log, a link to the file kept in the user's state
// directory: logs.go).
//
// Names are scoped by allocation: a runtime started inside a Slurm, PBS or
// LSF allocation is NAME.slurm-JOBID (pbs-, lsf-), and a client inside an
// allocation resolves a name in its own allocation's scope only, so a prun in
// another allocation (or outside any) never picks it up.
//
// Which runtime a job goes to (Default): the one its user named (--dvm,
// PRUN_DVM), else inside an allocation that allocation's default, else the
// one the user made every shell's default on purpose (DefaultLink), else
// none: the job runs standalone. A runtime that merely runs is found by no
// job that was not pointed at it.
package dvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultName is the name of a runtime started without --name, and the
// one a client inside an allocation finds with no --dvm and no PRUN_DVM.
const DefaultName = "default"

// DefaultLink is the entry of the base directory that makes a runtime
// every shell's default outside an allocation (`prun dvm start
// --default`): a symbolic link to the runtime's directory, by its name.
// Names cannot start with a dot (CheckName), so it names no runtime.
const DefaultLink = ".default"

// Env is the variable naming the runtime to submit to (a name or a path).
const Env = "PRUN_DVM"

// maxSocket is the longest path a Unix socket's address holds (sun_path
// less its NUL).
const maxSocket = 107

// BaseDir is the directory of the user's runtimes (not created here): one
// that another user cannot create or replace before this one does. In a
// shared sticky $TMPDIR another user could create $TMPDIR/prun-dvm-UID
// first, and then every `prun dvm start` of this user's was refused
// (issue 39). In order:
//
//   - $XDG_RUNTIME_DIR/prun-dvm, when that is set (the login's own tmpfs);
//   - /run/user/UID/prun-dvm, when that directory is the user's and
//     writable by no one else (another login of the user's made it);
//   - for root, /run/prun-dvm (/run is root's alone);
//   - $XDG_STATE_HOME/prun/run-HOST, by default
//     $HOME/.local/state/prun/run-HOST: the user's own, by host since a
//     home directory is often shared by the nodes of a cluster;
//   - with no home either, $TMPDIR/prun-dvm-UID (/tmp when TMPDIR is
//     unset), which another user can squat: MakeDir then says so.
//
// cmd/prun/submit.c's base_dir computes the same, in the same order.
func BaseDir(env func(string) string) string {
	if d := env("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "prun-dvm")
	}
	uid := os.Getuid()
	if d := "/run/user/" + strconv.Itoa(uid); usersOwn(d, uid) {
		return filepath.Join(d, "prun-dvm")
	}
	if uid == 0 {
		return "/run/prun-dvm"
	}
	if s := StateDir(env); s != "" {
		host, _ := os.Hostname()
		return filepath.Join(s, "run-"+sanitize(host))
	}
	tmp := env("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, "prun-dvm-"+strconv.Itoa(uid))
}

// StateDir is prun's directory in the user's state directory
// ($XDG_STATE_HOME/prun, by default $HOME/.local/state/prun; "" with
// neither set): what is kept across runs, a detached runtime's logs.
func StateDir(env func(string) string) string {
	if d := env("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "prun")
	}
	if h := env("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "prun")
	}
	return ""
}

// usersOwn says whether d is a directory of uid's that no one else may
// write to.
func usersOwn(d string, uid int) bool {
	fi, err := os.Lstat(d)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscallStat)
	return ok && int(st.Uid) == uid
}

// Allocation names the batch allocation the process runs in ("slurm-42"),
// or "" outside any.
func Allocation(env func(string) string) string {
	if v, id := AllocationVar(env); v != "" {
		return allocationKinds[v] + "-" + sanitize(id)
	}
	return ""
}

// allocationVars are the variables that put a process in an allocation,
// the first one set wins; allocationKinds name their scopes.
var (
	allocationVars  = []string{"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"}
	allocationKinds = map[string]string{"SLURM_JOB_ID": "slurm", "PBS_JOBID": "pbs", "LSB_JOBID": "lsf"}
)

// AllocationVar is the variable that puts the process in an allocation
// and its value ("", "" outside any).
func AllocationVar(env func(string) string) (string, string) {
	for _, v := range allocationVars {
		if id := env(v); id != "" {
			return v, id
		}
	}
	return "", ""
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r < ' ' {
			return '_'
		}
		return r
	}, s)
}

// CheckName refuses a name that is not one path element, or that starts
// with a dot (DefaultLink and temporary files are the base directory's).
func CheckName(name string) error {
	if name == "" || name[0] == '.' || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("DVM name %q: want a name without / that does not start with a dot", name)
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

// Default is the runtime a job goes to when its user named none (no --dvm,
// no PRUN_DVM), or "" for none: inside an allocation, the allocation's
// (DefaultName in its scope); outside any, the one the user made every
// shell's default (DefaultLink). Whether it runs is the caller's to find
// out. A runtime outside an allocation that was not made the default is
// found by the jobs pointed at it alone: a second shell's or a CI script's
// prun must not run on some DVM's nodes, to be killed by its `stop
// --all-jobs`, because the DVM happened to run (issue 39).
func Default(env func(string) string) string {
	if Allocation(env) != "" {
		return Dir(env, DefaultName)
	}
	base := BaseDir(env)
	name, err := os.Readlink(filepath.Join(base, DefaultLink))
	if err != nil || CheckName(name) != nil {
		return ""
	}
	return filepath.Join(base, name)
}

// Addressed is the runtime a `prun dvm` command (ps, status, stop, kill)
// addresses: flag's (--dvm), else PRUN_DVM's, else the default one (as
// Default), else the one started without --name in this scope.
func Addressed(env func(string) string, flag string) (string, error) {
	if flag == "" {
		flag = env(Env)
	}
	if flag != "" {
		return Resolve(env, flag)
	}
	if d := Default(env); d != "" {
		return d, nil
	}
	return Dir(env, DefaultName), nil
}

// SetDefault makes the runtime in dir every shell's default outside an
// allocation; an earlier default is replaced (the caller checked that it
// no longer runs).
func SetDefault(dir string) error {
	base := filepath.Dir(dir)
	tmp := filepath.Join(base, DefaultLink+".tmp."+strconv.Itoa(os.Getpid()))
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(dir), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(base, DefaultLink)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// ClearDefault removes DefaultLink if it names the runtime in dir.
func ClearDefault(dir string) {
	link := filepath.Join(filepath.Dir(dir), DefaultLink)
	if name, err := os.Readlink(link); err == nil && name == filepath.Base(dir) {
		os.Remove(link)
	}
}

// Socket and LogFile are a runtime's files in its directory.
func Socket(dir string) string  { return filepath.Join(dir, "sock") }
func LogFile(dir string) string { return filepath.Join(dir, "log") }

// MakeDir creates the base directory and the runtime's own, both 0700 (and
// the base's missing parents, 0700), and checks that both are the user's
// alone.
func MakeDir(dir string) error {
	if len(Socket(dir)) > maxSocket {
		return fmt.Errorf("%s: longer than a Unix socket's address (%d bytes); set XDG_RUNTIME_DIR to a shorter directory, or name the DVM shorter",
			Socket(dir), maxSocket)
	}
	base := filepath.Dir(dir)
	if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
		return err
	}
	for _, d := range []string{base, dir} {
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
		return fmt.Errorf("%s: owned by uid %d, not by this user (uid %d); set XDG_RUNTIME_DIR to a directory of your own", d, st.Uid, os.Getuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s: mode %04o; a DVM's directory must be the user's alone (0700)", d, fi.Mode().Perm())
	}
	return nil
}
