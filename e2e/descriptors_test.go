package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// An exited rank holds no descriptor in prun until its job ends: with 300
// ranks exited (zombies, kept so until the job's end) and one running,
// prun holds about what a job of one rank holds.
func TestExitedRanksHoldNoDescriptors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flag := filepath.Join(dir, "go")
	const n = 300
	p := startPrun(t, opts{args: []string{"-n", strconv.Itoa(n), "/bin/true", ":", "-n", "1", "sh", "-c",
		`while [ ! -e "$0" ]; do sleep 0.02; done`, flag}})
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(60 * time.Second)
	for zombies := 0; zombies < n; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d ranks exited within a minute\nstderr: %s", zombies, n, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
		zombies = 0
		for _, pi := range jobProcs(pid, p.mark) {
			if pi.ppid == pid && pi.state == 'Z' {
				zombies++
			}
		}
	}
	// Their output's EOF is read a moment after their exit.
	var fds []os.DirEntry
	for end := time.Now().Add(5 * time.Second); ; {
		fds, _ = os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		if len(fds) < 64 || time.Now().After(end) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(fds) >= 64 {
		t.Errorf("with %d ranks exited, prun holds %d descriptors, want fewer than 64", n, len(fds))
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expectCode(t, p.wait(), 0)
}

// limited is a prun that starts with soft and hard limits of open files.
func limited(t *testing.T, soft, hard int) string {
	return writeScript(t, t.TempDir(), "prun-limited", "ulimit -Sn "+strconv.Itoa(soft)+
		" && ulimit -Hn "+strconv.Itoa(hard)+" && exec "+prunBin+` "$@"`+"\n")
}

// Under a hard limit of 300 open files (and a soft one of 100, which prun
// raises), ranks that end at once run in waves, as many at a time as the
// limit holds; ranks that do not end make prun give up within a second,
// in one line naming the limit, and leave nothing behind.
func TestDescriptorLimit(t *testing.T) {
	t.Parallel()
	bin := limited(t, 100, 300)
	t.Run("waves", func(t *testing.T) {
		r := run(t, opts{bin: bin, args: []string{"-n", "1000", "/bin/true"}})
		expectCode(t, r, 0)
	})
	t.Run("too-many", func(t *testing.T) {
		r := run(t, opts{bin: bin, args: []string{"-n", "200", "sleep", "30"}})
		expectOneLineFailure(t, r, "too many ranks for the open-file limit: the job's 200 ranks on this node need up to ")
		expectContains(t, "stderr", r.stderr, "the limit (ulimit -Hn) is 300")
		expectFaster(t, r, 1500*time.Millisecond)
	})
}
