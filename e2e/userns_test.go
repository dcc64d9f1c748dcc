package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"prun/internal/ctest"
)

// TestUserNamespaceRanks: ranks in a user namespace, as rootless containers
// run them (`unshare -r`, apptainer --fakeroot, rootless podman), claim their
// namespace's uid (0) to the PMIx server; the kernel's owner of their socket
// is the job's user. Run by an unprivileged user (nobody), prun serves them
// (openpmix/patches/0004: native authentication checks the kernel's uid);
// run by root, a rank whose namespace maps to another user is that user to
// the kernel, and is refused.
func TestUserNamespaceRanks(t *testing.T) {
	ring := ctest.Build(t, ctest.OpenMPI, "ring.c")
	// A directory nobody may enter, holding what nobody runs, and a TMPDIR
	// of nobody's own.
	dir, err := os.MkdirTemp("", "prun-userns-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tmp, home := filepath.Join(dir, "tmp"), filepath.Join(dir, "home")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{tmp, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{prunBin, filepath.Join(filepath.Dir(prunBin), "prun-ssh"), ring} {
		copyFile(t, f, filepath.Join(dir, filepath.Base(f)))
	}
	prun := filepath.Join(dir, "prun")
	env := []string{"HOME=" + home, "TMPDIR=" + tmp, "PATH=/usr/bin:/bin"}
	exe := func(args ...string) (string, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
			}
		}()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	t.Run("served", func(t *testing.T) {
		out, err := exe(asNobody(prun, "-n", "2", "unshare", "-r", "./ring")...)
		if err != nil || !strings.Contains(out, "ring: 2 ranks, 10 laps, sum ok\n") {
			t.Errorf("ranks under unshare -r of nobody's prun: %v\n%s", err, out)
		}
	})
	t.Run("another-user-refused", func(t *testing.T) {
		out, err := exe(append([]string{prun, "-n", "1"}, asNobody("unshare", "-r", "./ring")...)...)
		if err == nil || !strings.Contains(out, "refused") || !strings.Contains(out, "(uid "+nobodyUID+")") {
			t.Errorf("a rank of root's job whose namespace maps to nobody: %v\n%s", err, out)
		}
	})
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("nobody's TMPDIR still holds %d entries (a session directory?)", len(entries))
	}
}
