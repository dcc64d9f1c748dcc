package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A submitted command line is parsed as its submitter would have: programs
// from its PATH and working directory, warnings, help and errors printed
// to its descriptors, completion left to it.
func TestSubmitted(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"bin", "rel"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
		os.WriteFile(filepath.Join(dir, d, "prog-"+d), []byte("#!/bin/sh\n"), 0o755)
	}
	env := EnvOf([]string{"PATH=" + filepath.Join(dir, "bin") + ":rel", "PATH=/ignored", "HOME=" + dir}, dir)
	for _, tc := range []struct {
		args           []string
		exe            string // the job's program; "" for no job
		exit           int
		local          bool
		stdout, stderr string
	}{
		{args: []string{"-n", "1", "prog-bin"}, exe: filepath.Join(dir, "bin", "prog-bin")},
		{args: []string{"-n", "1", "prog-rel"}, exe: filepath.Join(dir, "rel", "prog-rel")},
		{args: []string{"-n", "1", "./rel/prog-rel"}, exe: filepath.Join(dir, "rel", "prog-rel")},
		{args: []string{"-x", "NOT_SET_HERE", "-n", "1", "prog-bin"}, exe: filepath.Join(dir, "bin", "prog-bin"),
			stderr: "prun: warning: -x NOT_SET_HERE: not set"},
		{args: []string{"-n", "1", "sh"}, exit: 2, stderr: "prun: sh: command not found in PATH\n"},
		{args: []string{"--version"}, local: true},
		{args: []string{"--help"}, stdout: "Exit status:"},
		{args: []string{"--no-such-flag", "x"}, exit: 2, stderr: "prun: "},
		{args: []string{"completion", "bash"}, local: true},
		{args: []string{"__complete", "-"}, local: true},
	} {
		var stdout, stderr strings.Builder
		job, exit, local := Submitted(tc.args, env, &stdout, &stderr, false)
		exe := ""
		if job != nil {
			exe = job.Apps[0].Exe
		}
		if exe != tc.exe || exit != tc.exit || local != tc.local || !strings.Contains(stdout.String(), tc.stdout) ||
			!strings.Contains(stderr.String(), tc.stderr) || tc.stderr == "" && stderr.Len() > 0 {
			t.Errorf("%q: program %q, exit %d, local %v, stdout %q, stderr %q", tc.args, exe, exit, local,
				stdout.String(), stderr.String())
		}
	}
	var red strings.Builder
	Submitted([]string{"-n", "1", "sh"}, env, &red, &red, true)
	if !strings.Contains(red.String(), "\x1b[") {
		t.Errorf("an error in colour: %q", red.String())
	}
}
