package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConcurrentSessions: two prun runs share a TMPDIR; the second must not
// take the first's live session directory for a stale one — also when prun
// is installed under another name (an "mpirun" symlink, as a drop-in
// replacement would be).
func TestConcurrentSessions(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"prun", "mpirun"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, name)
			if err := os.Symlink(prunBin, bin); err != nil {
				t.Fatal(err)
			}
			flag := filepath.Join(dir, "go")
			// The rank waits until the second run is over, then checks
			// that its session directory still exists, with what libpmix
			// put there (a job of no PMIx client has no PMIX_NSDIR).
			script := writeScript(t, dir, "check.sh", `echo "ready $PMIX_SERVER_TMPDIR"
while [ ! -e "$FLAG" ]; do sleep 0.05; done
if [ -d "$PMIX_SERVER_TMPDIR" ] && [ -n "$(ls -A "$PMIX_SERVER_TMPDIR")" ]; then echo intact; else echo "GONE $PMIX_SERVER_TMPDIR"; exit 1; fi
`)
			tmp := t.TempDir()
			first := startPrun(t, opts{bin: bin, args: []string{"-n", "1", script}, tmpdir: tmp,
				env: []string{"FLAG=" + flag}, timeout: 30 * time.Second})
			first.waitOutput(10*time.Second, "ready ")
			second := run(t, opts{bin: bin, args: []string{"-n", "1", "true"}, tmpdir: tmp, skipTmpCheck: true})
			expectCode(t, second, 0)
			if err := os.WriteFile(flag, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			r := first.wait()
			expectCode(t, r, 0)
			if !strings.Contains(r.stdout, "intact\n") {
				t.Errorf("the first run's session directory was removed while it ran\n%s", r)
			}
		})
	}
}
