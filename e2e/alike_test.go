package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// When every rank fails on its own (the same status), prun names the
// first by time and counts the others, instead of naming whichever it read
// first and claiming to kill ranks that had already ended (issue 25). The
// ranks ignore SIGTERM, so that the termination after the first failure
// cannot end them before they fail themselves; rank 2 fails first, the
// others once it did.
func TestAllRanksFailAlike(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := writeScript(t, dir, "fail3.sh", `trap '' TERM
touch "$D/started.$PRUN_RANK"
while [ "$(ls "$D" | grep -c '^started')" -lt 4 ]; do sleep 0.05; done
if [ "$PRUN_RANK" = 2 ]; then touch "$D/failed"; exit 3; fi
while [ ! -e "$D/failed" ]; do sleep 0.05; done
sleep 0.1
exit 3
`)
	r := run(t, opts{args: []string{"-n", "4", "-x", "D=" + dir, script}, dir: dir})
	expectCode(t, r, 3)
	expectFaster(t, r, 10*time.Second)
	if !regexp.MustCompile(`prun: rank 2 \(\S*fail3.sh\) on \S+ \(pid \d+\) exited with status 3 first; 3 other ranks failed alike\n`).MatchString(r.stderr) {
		t.Errorf("want rank 2 named first and 3 others failed alike\n%s", r)
	}
	if strings.Contains(r.stderr, "killing") {
		t.Errorf("no rank was left to kill\n%s", r)
	}
	if n := strings.Count(r.stderr, "prun: "); n != 1 {
		t.Errorf("prun printed %d messages, want 1\n%s", n, r)
	}
}
