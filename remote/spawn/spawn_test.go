package spawn

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A daemon killed by a signal is followed by the node's cleanup even when
// the session's stderr is gone (its starter went down with it): the shell
// reports the signal ("Killed") on its own stderr, which must not be the
// session's, or the write kills it with SIGPIPE first.
func TestDaemonCommandCleansUpAfterKilledDaemon(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "cleaned")
	exe := filepath.Join(dir, "fake prun") // a space: the command quotes it
	script := "#!/bin/sh\ncase \"$2\" in\n--ctl) kill -9 $$ ;;\n--cleanup) : >\"" + mark + "\" ;;\nesac\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The same for a daemon run from a copy sent over the session's stdin.
	for i, argv := range [][]string{daemonCommand(exe), copyCommand(len(script), 0)} {
		os.Remove(mark)
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		pr.Close() // the session's far end is gone
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stderr = pw
		if i == 1 {
			cmd.Stdin = strings.NewReader(script)
			cmd.Env = append(os.Environ(), "TMPDIR="+dir)
		}
		err = cmd.Run()
		pw.Close()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Exited() || ws.ExitStatus() != 137 {
			t.Errorf("%s: the session ended %v (%v), want exit status 137, the daemon's", argv[0:1], cmd.ProcessState, err)
		}
		if _, err := os.Stat(mark); err != nil {
			t.Errorf("command %d: no cleanup after the daemon's SIGKILL: %v", i, err)
		}
	}
}

// A copy for a daemon that starts others brings prun-ssh along, beside it.
func TestCopyCommandStoresHelper(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "helper-seen")
	script := "#!/bin/sh\ncase \"$2\" in\n--ctl) cat \"$(dirname \"$0\")/prun-ssh\" >\"" + mark + "\" ;;\nesac\n"
	helper := "#!/bin/sh\n# the helper\n"
	argv := copyCommand(len(script), len(helper))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(script + helper)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, err := os.ReadFile(mark); err != nil || string(b) != helper {
		t.Errorf("prun-ssh beside the copy: %q, %v; want %q", b, err, helper)
	}
	// Cut short: the copy's own exit status, nothing run.
	cmd = exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(script + helper[:5])
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != copyTruncated {
		t.Errorf("a truncated helper: %v, want exit status %d", err, copyTruncated)
	}
}
