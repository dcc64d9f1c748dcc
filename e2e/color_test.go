package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// runOnTTY runs prun with stdout and stderr on a pseudo-terminal and returns
// what the terminal showed.
func runOnTTY(t *testing.T, extraEnv []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(prunBin, args...)
	cmd.Env = append(os.Environ(), append([]string{"TMPDIR=" + t.TempDir()}, extraEnv...)...)
	cmd.Env = withoutVar(cmd.Env, "NO_COLOR", extraEnv)
	f, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&out, f); close(done) }()
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case <-waitErr:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("prun hung on a terminal")
	}
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	return out.String()
}

// withoutVar drops name from env unless extra sets it.
func withoutVar(env []string, name string, extra []string) []string {
	for _, kv := range extra {
		if strings.HasPrefix(kv, name+"=") {
			return env
		}
	}
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

const esc = "\x1b["

func TestColorOnlyOnTerminals(t *testing.T) {
	// On a terminal: the error line and the rank tags are coloured.
	if out := runOnTTY(t, nil, "-n", "0", "true"); !strings.Contains(out, esc) || !strings.Contains(out, "prun: -n 0") {
		t.Errorf("error on a terminal not coloured: %q", out)
	}
	if out := runOnTTY(t, nil, "--tag-output", "-n", "2", "echo", "hi"); !strings.Contains(out, esc) || !strings.Contains(out, "<stdout>:") {
		t.Errorf("tags on a terminal not coloured: %q", out)
	}
	// NO_COLOR wins over the terminal.
	for _, args := range [][]string{{"-n", "0", "true"}, {"--tag-output", "-n", "2", "echo", "hi"}} {
		if out := runOnTTY(t, []string{"NO_COLOR=1"}, args...); strings.Contains(out, esc) {
			t.Errorf("NO_COLOR=1 %v: colour in %q", args, out)
		}
	}
	// Not a terminal: never colour (the other e2e tests run with NO_COLOR,
	// so check without it here).
	cmd := exec.Command(prunBin, "--tag-output", "-n", "2", "echo", "hi")
	cmd.Env = withoutVar(append(os.Environ(), "TMPDIR="+t.TempDir()), "NO_COLOR", nil)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), esc) || !strings.Contains(string(out), "[0,1]<stdout>:hi") {
		t.Errorf("pipe output %q (err %v): want plain tags", out, err)
	}
}
