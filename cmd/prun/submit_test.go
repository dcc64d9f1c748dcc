package main

import (
	"bytes"
	"errors"
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

// The C submitter (submit.c) finds the runtime that dvm.Dir and
// dvm.Resolve name, in every scope, and declines what Go's main must
// decide; a fake runtime answers.
func TestSubmitterFindsTheDVM(t *testing.T) {
	prun := filepath.Join(t.TempDir(), "prun")
	if out, err := exec.Command("go", "build", "-o", prun, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	uid := strconv.Itoa(os.Getuid())
	for _, tc := range []struct {
		name string
		env  []string // TMPDIR is the test's own
		dir  string   // the runtime's, under TMPDIR ("" : no fake runtime)
		c    bool     // the C submitter sends (else Go's main, which runs the job here)
		exit int      // with c: the exit status
	}{
		{"default", nil, "prun-dvm-UID/default", true, 7},
		{"xdg", []string{"XDG_RUNTIME_DIR=TMP/xdg"}, "xdg/prun-dvm/default", true, 7},
		{"slurm", []string{"SLURM_JOB_ID=42"}, "prun-dvm-UID/default.slurm-42", true, 7},
		{"pbs", []string{"PBS_JOBID=7.srv/x"}, "prun-dvm-UID/default.pbs-7.srv_x", true, 7},
		{"lsf", []string{"LSB_JOBID=9"}, "prun-dvm-UID/default.lsf-9", true, 7},
		{"by-name", []string{"PRUN_DVM=mine", "SLURM_JOB_ID=42"}, "prun-dvm-UID/mine.slurm-42", true, 7},
		{"by-path", []string{"PRUN_DVM=TMP/any/where"}, "any/where", true, 7},
		{"by-socket", []string{"PRUN_DVM=TMP/any/where/sock"}, "any/where", true, 7},
		{"other-allocation", []string{"SLURM_JOB_ID=43"}, "prun-dvm-UID/default.slurm-42", false, 0},
		{"none", nil, "", false, 0},
		{"not-private", nil, "prun-dvm-UID/default", false, 0},
		// Sent, and answered Local: Go's main runs it (exit 0).
		{"a-subcommand", nil, "prun-dvm-UID/default", true, 0},
		{"--dvm", nil, "prun-dvm-UID/default", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			var f *fakeDVM
			os.Mkdir(filepath.Join(tmp, "xdg"), 0o700)
			if tc.dir != "" {
				dir := filepath.Join(tmp, strings.ReplaceAll(tc.dir, "UID", uid))
				f = listenFake(t, dir)
				if tc.name == "not-private" {
					os.Chmod(dir, 0o755)
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
				return
			}
			if tc.exit == 0 && !strings.Contains(stdout.String(), "bash completion") {
				t.Errorf("prun %q printed %q", args, stdout.String())
			}
			r := <-f.runs
			cwd, _ := os.Getwd()
			if !slices.Equal(r.Args, args) || r.Cwd != cwd || !slices.Contains(r.Env, "TMPDIR="+tmp) || r.ColorErrors {
				t.Errorf("the runtime got %+v", r)
			}
		})
	}
}
