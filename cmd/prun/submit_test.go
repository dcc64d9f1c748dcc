package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"prun/dvm"
)

// fakeDVM listens where a runtime in dir would and answers every
// submission with exit status 7 (a completion command: Local, as the
// runtime does), recording what it was sent.
type fakeDVM struct {
	ln   *net.UnixListener
	runs chan dvm.Run
}

func listenFake(t *testing.T, dir string) *fakeDVM {
	t.Helper()
	if err := dvm.MakeDir(dir); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: dvm.Socket(dir), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDVM{ln: ln, runs: make(chan dvm.Run, 4)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			conn := dvm.NewConn(c)
			b, files, err := conn.ReadHello()
			for _, f := range files {
				f.Close()
			}
			frame, ferr := conn.RecvFrame()
			if err != nil || ferr != nil || b != dvm.RunByte || len(files) != 3 {
				c.Close()
				continue
			}
			r, err := dvm.DecodeRun(frame)
			if err == nil {
				f.runs <- r
			}
			if len(r.Args) > 0 && r.Args[0] == "completion" {
				conn.Send(dvm.Reply{Done: true, Local: true})
				c.Close()
				continue
			}
			// A string the client skips, escapes and all, in a frame
			// larger than its buffer on the stack.
			conn.Send(dvm.Reply{Job: 1, Text: strings.Repeat(`"Done":true,\`, 500)})
			conn.Send(dvm.Reply{Done: true, Exit: 7})
			c.Close()
		}
	}()
	return f
}

// The C submitter (submit.c) finds the runtime that dvm.Resolve and
// dvm.Default name (dvm.BaseDir's base directories, every scope, the
// default made on purpose), declines one no job was pointed at, and
// declines what Go's main must decide; a fake runtime answers.
// submitCase is one environment and runtime a prun starts in, and whether
// its C submitter sends the job.
type submitCase struct {
	name string
	env  []string // TMPDIR and HOME are the test's own
	dir  string   // the runtime's, under TMPDIR ("" : no fake runtime; /...: absolute)
	link string   // the base directory's .default link to the runtime: its name ("": none)
	c    bool     // the C submitter sends (else Go's main, which runs the job here)
	exit int      // with c: the exit status
	as   int      // run as this uid (0: the test's own)
}

// submitUnique names a root runtime of this test's own in /run (the
// directory is the machine's).
var submitUnique = fmt.Sprintf("submit-test-%d", os.Getpid())

var submitXDG = []string{"XDG_RUNTIME_DIR=TMP/xdg"}

var submitCases = []submitCase{
	// Outside an allocation, a runtime that runs is found by the jobs
	// pointed at it, or once made every shell's default (--default).
	{"not-the-default", submitXDG, "xdg/prun-dvm/default", "", false, 0, 0},
	{"default", submitXDG, "xdg/prun-dvm/default", "default", true, 7, 0},
	{"default-by-another-name", submitXDG, "xdg/prun-dvm/mine", "mine", true, 7, 0},
	{"default-link-to-a-dot-name", submitXDG, "xdg/prun-dvm/.mine", ".mine", false, 0, 0},
	{"slurm", append([]string{"SLURM_JOB_ID=42"}, submitXDG...), "xdg/prun-dvm/default.slurm-42", "", true, 7, 0},
	{"slurm-not-the-outside-default", append([]string{"SLURM_JOB_ID=42"}, submitXDG...), "xdg/prun-dvm/default", "default", false, 0, 0},
	{"pbs", append([]string{"PBS_JOBID=7.srv/x"}, submitXDG...), "xdg/prun-dvm/default.pbs-7.srv_x", "", true, 7, 0},
	{"lsf", append([]string{"LSB_JOBID=9"}, submitXDG...), "xdg/prun-dvm/default.lsf-9", "", true, 7, 0},
	{"by-name", append([]string{"PRUN_DVM=mine", "SLURM_JOB_ID=42"}, submitXDG...), "xdg/prun-dvm/mine.slurm-42", "", true, 7, 0},
	{"by-name-outside", append([]string{"PRUN_DVM=mine"}, submitXDG...), "xdg/prun-dvm/mine", "", true, 7, 0},
	{"by-path", []string{"PRUN_DVM=TMP/any/where"}, "any/where", "", true, 7, 0},
	{"by-socket", []string{"PRUN_DVM=TMP/any/where/sock"}, "any/where", "", true, 7, 0},
	{"other-allocation", append([]string{"SLURM_JOB_ID=43"}, submitXDG...), "xdg/prun-dvm/default.slurm-42", "", false, 0, 0},
	{"none", submitXDG, "", "", false, 0, 0},
	{"not-private", submitXDG, "xdg/prun-dvm/default", "default", false, 0, 0},
	// Sent, and answered Local: Go's main runs it (exit 0).
	{"a-subcommand", submitXDG, "xdg/prun-dvm/default", "default", true, 0, 0},
	{"--dvm", submitXDG, "xdg/prun-dvm/default", "default", false, 0, 0},
	// Without XDG_RUNTIME_DIR: root's runtimes are in /run (by a name
	// of this test's own: the directory is the machine's), another
	// user's in its state directory, by host.
	{"root-in-run", []string{"PRUN_DVM=" + submitUnique}, "/run/prun-dvm/" + submitUnique, "", true, 7, -1},
	{"home", []string{"HOME=TMP/home"}, "home/.local/state/prun/run-HOST/default", "default", true, 7, 65534},
	{"xdg-state", []string{"HOME=TMP/home", "XDG_STATE_HOME=TMP/state"}, "state/prun/run-HOST/mine", "mine", true, 7, 65534},
	{"home-not-default", []string{"HOME=TMP/home"}, "home/.local/state/prun/run-HOST/default", "", false, 0, 65534},
}

func TestSubmitterFindsTheDVM(t *testing.T) {
	bindir := t.TempDir()
	prun := filepath.Join(bindir, "prun")
	if out, err := exec.Command("go", "build", "-o", prun, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range submitCases {
		t.Run(tc.name, func(t *testing.T) { runSubmitCase(t, tc, prun, bindir) })
	}
}

// runSubmitCase runs prun (at path prun, in bindir) as case tc says.
func runSubmitCase(t *testing.T, tc submitCase, prun, bindir string) {
	uid := strconv.Itoa(os.Getuid())
	host, _ := os.Hostname()
	if tc.as != 0 && os.Getuid() != 0 {
		t.Skip("needs root: runs prun as root or as another user")
	}
	tmp := t.TempDir()
	var f *fakeDVM
	os.Mkdir(filepath.Join(tmp, "xdg"), 0o700)
	if tc.dir != "" {
		dir := strings.NewReplacer("UID", uid, "HOST", host).Replace(tc.dir)
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(tmp, dir)
		}
		f = listenFake(t, dir)
		if strings.HasPrefix(dir, "/run/") {
			t.Cleanup(func() { os.Remove(dir); os.Remove(filepath.Dir(dir)) })
		}
		if tc.link != "" {
			os.Symlink(tc.link, filepath.Join(filepath.Dir(dir), dvm.DefaultLink))
		}
		if tc.name == "not-private" {
			os.Chmod(dir, 0o755)
		}
		if tc.as > 0 { // the other user's own, as its prun would have made them
			filepath.WalkDir(tmp, func(p string, _ os.DirEntry, _ error) error {
				os.Lchown(p, tc.as, tc.as)
				return nil
			})
			os.Chmod(filepath.Join(dir, "sock"), 0o777)
		}
	}
	args := []string{"-n", "1", "true"}
	switch tc.name {
	case "a-subcommand":
		args = []string{"completion", "bash"}
	case "--dvm":
		args = []string{"--dvm", "/nonexistent/dvm", "-n", "1", "true"}
	}
	cmd := exec.Command(prun, args...)
	if tc.as > 0 {
		// Its binary and the test's directories, open to it.
		for _, d := range []string{tmp, filepath.Dir(tmp), bindir, filepath.Dir(bindir)} {
			os.Chmod(d, 0o755)
		}
		cmd = exec.Command("setpriv", append([]string{fmt.Sprintf("--reuid=%d", tc.as), fmt.Sprintf("--regid=%d", tc.as),
			"--clear-groups", prun}, args...)...)
	}
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp, "PRUN_DEBUG_TIMING=1"}
	for _, e := range tc.env {
		cmd.Env = append(cmd.Env, strings.ReplaceAll(e, "TMP", tmp))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	go func() { done <- cmd.Run() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("prun %q did not end: %s", args, stderr.String())
	}
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	fromC := strings.Contains(stderr.String(), "the C submitter")
	if fromC != tc.c || tc.c && code != tc.exit {
		t.Fatalf("prun %q: exit %d, C submitter %v (want %v): %s", args, code, fromC, tc.c, stderr.String())
	}
	if !tc.c {
		// Go's main found no runtime either: the job ran here (but
		// for --dvm's, which is not there).
		if want := map[bool]int{true: 1}[tc.name == "--dvm"]; code != want {
			t.Errorf("prun %q: exit %d, want %d: %s", args, code, want, stderr.String())
		}
		return
	}
	if tc.exit == 0 && !strings.Contains(stdout.String(), "bash completion") {
		t.Errorf("prun %q printed %q", args, stdout.String())
	}
	r := <-f.runs
	if !slices.Equal(r.Args, args) || r.Cwd != tmp || !slices.Contains(r.Env, "TMPDIR="+tmp) || r.ColorErrors {
		t.Errorf("the runtime got %+v", r)
	}
}
