package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"prun/internal/cgroup"
)

// A rank's daemon (forked, in a session of its own, its parent gone) ends
// with the job: through the job's cgroup where the node gives one, else
// found by the job's marks in its environment. Neither leaves a
// descriptor open (runJob).
func TestShellEndsDaemons(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cgroups bool
	}{{"cgroup", true}, {"environment", false}} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := sharedDaemon(t)
			if tc.cgroups {
				if _, err := cgroup.Parent(); err != nil {
					if os.Geteuid() == 0 { // root has one wherever cgroup2 is mounted
						t.Fatalf("no cgroup for root: %v", err)
					}
					t.Skipf("no cgroup here: %v", err)
				}
			} else {
				cgroupParent = func() (string, error) { return "", errors.New("none in this test") }
			}
			defer func() {
				cgroupParent = cgroup.Parent
				d.contain.mu.Lock()
				d.contain.why = nil
				d.contain.mu.Unlock()
			}()
			dir := t.TempDir()
			// The daemon writes its pid once it runs; the rank waits for it.
			script := `f=` + dir + `/d.$PRUN_RANK
(setsid sh -c 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 600' sh "$f" </dev/null >/dev/null 2>&1 &)
while [ ! -e "$f" ]; do sleep 0.01; done`
			p := shPlan(t, "shell-daemons-"+tc.name, 2, script, nil)
			_, evs := runJob(t, p)
			for _, e := range evs {
				if e.Kind == Leftover {
					t.Errorf("Leftover: %s", e.Msg)
				}
			}
			d.contain.mu.Lock()
			off := d.contain.why
			d.contain.mu.Unlock()
			if tc.cgroups && off != nil {
				t.Errorf("cgroups turned off: %v", off)
			}
			for r := range 2 {
				b, err := os.ReadFile(filepath.Join(dir, "d."+strconv.Itoa(r)))
				if err != nil {
					t.Fatal(err)
				}
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				if st := state(pid); st != "Z" && st != "gone" {
					t.Errorf("rank %d's daemon %d is %q after the job's end", r, pid, st)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			if tc.cgroups {
				parent, _ := cgroup.Parent()
				if _, err := os.Stat(filepath.Join(parent, d.cfg.Session.ID()+"."+p.Nspace)); !os.IsNotExist(err) {
					t.Errorf("the job's cgroup is still there (%v)", err)
				}
			}
		})
	}
}

func TestLeftoverMsg(t *testing.T) {
	var left []cgroup.Proc
	for i := range 10 {
		left = append(left, cgroup.Proc{Pid: 100 + i, Comm: "sleep"})
	}
	got := leftoverMsg(left[:1], nil)
	if want := "could not end 1 process the job left: 100 (sleep), still there " + leftoverWait.String() + " after SIGKILL"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	got = leftoverMsg(left, nil)
	if !strings.Contains(got, "could not end 10 processes") || !strings.Contains(got, "107 (sleep), and 2 more") {
		t.Errorf("got %q", got)
	}
}
