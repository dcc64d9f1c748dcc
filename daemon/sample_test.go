package daemon

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/stacktree"
	"prun/topview/sample"
)

// TestSampleAndStacks samples a job of four ranks on the test daemon: one
// spins, one writes, one exits with 3, one stops itself; then takes the
// live ranks' stacks, merged.
func TestSampleAndStacks(t *testing.T) {
	d, up := sharedDaemon(t)
	up.reset()
	p := shPlan(t, "sample-test", 4, `case $PRUN_RANK in
0) while :; do :; done ;;
1) while :; do echo tick; sleep 0.1; done ;;
2) exit 3 ;;
3) kill -STOP $$ ;;
esac`, nil)
	if err := d.Launch(p); err != nil {
		t.Fatal(err)
	}
	defer func() {
		d.Signal(p.Nspace, nil, syscall.SIGKILL)
		d.Signal(p.Nspace, nil, syscall.SIGCONT)
		up.waitDone(t, p.Nspace)
		d.shell(p.Nspace).close()
		d.mu.Lock()
		delete(d.shells, p.Nspace)
		d.mu.Unlock()
		d.srv.DeregisterNspace(p.Nspace)
	}()
	var rs []sample.Rank
	deadline := time.Now().Add(20 * time.Second)
	for {
		time.Sleep(300 * time.Millisecond)
		rs = d.Sample(p.Nspace)
		if len(rs) == 4 && rs[2].State == sample.Exited && rs[3].State == "stopped" && rs[0].CPU > 10 && rs[1].OutRate > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample with the four ranks as they should be: %+v", rs)
		}
	}
	for i, r := range rs {
		if r.Rank != i || r.Host != testNode || r.Pid <= 0 {
			t.Errorf("rank %d: %+v", i, r)
		}
	}
	if r := rs[2]; r.ExitStatus != 3 {
		t.Errorf("the exited rank: %+v", r)
	}
	if r := rs[1]; r.SinceOutput > 1 {
		t.Errorf("the writer: %+v", r)
	}
	if d.Sample("no-such-job") != nil {
		t.Error("a sample of no job")
	}

	var set stacktree.RankSet
	set.AddRange(0, 3)
	tr := d.Stacks(context.Background(), p.Nspace, set, 30*time.Second)
	text := tr.Text(stacktree.Options{Collapse: true})
	t.Logf("\n%s", text)
	if got := tr.Root.Ranks.String(); got != "0-1,3" || len(tr.Failed) != 0 || !strings.HasPrefix(text, "3 ranks") {
		t.Errorf("stacks of ranks %s (failed %v), want 0-1,3:\n%s", got, tr.Failed, text)
	}
	set = stacktree.RankSet{}
	set.Add(1)
	if tr := d.Stacks(context.Background(), p.Nspace, set, 30*time.Second); tr.Root.Ranks.String() != "1" {
		t.Errorf("stacks of rank 1: %s", tr.Root.Ranks)
	}
}
