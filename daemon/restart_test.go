package daemon

import (
	"testing"

	"prun/iof"
)

// TestRestartPolicy: a failed incarnation that did start starts again
// while restarts are left, unless it aborted or the job is ending.
func TestRestartPolicy(t *testing.T) {
	ok := restartCase{failed: true, started: true, restarts: 0, max: 2}
	for _, c := range []struct {
		name string
		edit func(*restartCase)
		want bool
	}{
		{"failed, restarts left", func(*restartCase) {}, true},
		{"second of two", func(c *restartCase) { c.restarts = 1 }, true},
		{"used up", func(c *restartCase) { c.restarts = 2 }, false},
		{"no --max-restarts", func(c *restartCase) { c.max = 0 }, false},
		{"exited 0", func(c *restartCase) { c.failed = false }, false},
		{"never started", func(c *restartCase) { c.started = false }, false},
		{"aborted", func(c *restartCase) { c.aborted = true }, false},
		{"job ending", func(c *restartCase) { c.ending = true }, false},
	} {
		rc := ok
		c.edit(&rc)
		if got := restartPolicy(rc); got != c.want {
			t.Errorf("%s: restartPolicy(%+v) = %v, want %v", c.name, rc, got, c.want)
		}
	}
}

// TestRestartRetire: a retired incarnation is kept (a zombie until the
// job's end) and its held stream ends are dropped.
func TestRestartRetire(t *testing.T) {
	var r restartState
	r.endsHeld = []iof.Stream{iof.Stdout}
	a, b := &proc{pid: 10}, &proc{pid: 11}
	if n := r.retire(a); n != 1 {
		t.Errorf("first retire = %d, want 1", n)
	}
	if n := r.retire(b); n != 2 {
		t.Errorf("second retire = %d, want 2", n)
	}
	if len(r.old) != 2 || r.old[0] != a || r.old[1] != b || r.endsHeld != nil {
		t.Errorf("after two retires: %+v", r)
	}
}
