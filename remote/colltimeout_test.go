package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"prun/remote/wire"
	"strings"
	"sync"
	"testing"
	"time"

	"prun/ctl"
	"prun/daemon"
	"prun/pmixsrv"
)

// timeoutRecord is a node's contribution to a group construct with
// PMIX_TIMEOUT d and no data (daemon's record format).
func timeoutRecord(d time.Duration) []byte {
	b := binary.BigEndian.AppendUint32(nil, 5)
	b = append(b, daemon.GroupTimeout)
	return binary.BigEndian.AppendUint32(b, uint32(d.Milliseconds()))
}

// A chain of three daemons (fanout 1) whose last one never contributes to
// a group construct with a timeout: the vertices still waiting report it,
// the root decides once, every vertex forgets the key and fails its own
// node's members with PMIX_ERR_TIMEOUT; a later construct of the key, the
// late node in it, completes; a stale contribution of the failed one is
// told apart.
func TestCollectivesTimeout(t *testing.T) {
	const n, k = 3, 1
	hosts := []string{"h1", "h2", "h3"}
	procs := []pmixsrv.Proc{{Nspace: "j", Rank: pmixsrv.RankWildcard}}
	kind := wire.GroupConstruct + "late"
	key := wire.CollKey(kind, procs)
	verts := []int{1, 2, 3}
	root := NewRoot()
	cs := make([]*wire.Collectives, n+1)
	cs[0] = root.cs
	var mu sync.Mutex
	var said []error
	root.TimedOut = func(err error) { mu.Lock(); said = append(said, err); mu.Unlock() }
	root.attach(hosts, k, func(typ uint8, m any) {
		f := m.(*wire.CollFail)
		for v := 1; v <= n; v++ { // a broadcast: parents first
			cs[v].TimedOut(f.Coll, f.Gen, f.CollErr())
		}
	})
	for v := 1; v <= n; v++ {
		cs[v] = wire.NewCollectives(v, k, func(key string, c *wire.Coll, data []byte) {
			p := ctl.Parent(v, k)
			cs[p].Contribute(v, key, c.Kind, c.Procs, c.Verts, data, func(all []byte, err error) { cs[v].Result(key, all, err) })
		})
		cs[v].Expire = func(key string, c *wire.Coll, missing []int) { root.timedOut(key, c.Kind, c.Gen, missing) }
	}
	errs := make(chan error, 8)
	for _, v := range []int{1, 2} {
		cs[v].Contribute(v, key, kind, procs, verts, timeoutRecord(50*time.Millisecond), func(_ []byte, err error) { errs <- err })
	}
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, pmixsrv.ErrTimeout) {
				t.Errorf("construct ended %v, want a timeout", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no timeout in 10 s")
		}
	}
	time.Sleep(100 * time.Millisecond) // the other vertex's report, if any, comes in
	mu.Lock()
	// Vertex 2 waits for h3; vertex 1 for h2's subtree, h2 and h3.
	if len(said) != 1 || !strings.HasPrefix(said[0].Error(), "group late: construct timed out (PMIX_TIMEOUT) waiting for members on ") ||
		!strings.HasSuffix(said[0].Error(), " h3") {
		t.Errorf("the launcher said %v, want one timeout", said)
	}
	mu.Unlock()
	for v := 0; v <= n; v++ {
		if len(cs[v].Pending) != 0 {
			t.Errorf("vertex %d still has %d pending", v, len(cs[v].Pending))
		}
	}
	if !cs[1].Stale(key, 0) || cs[1].Stale(key, 1) {
		t.Errorf("vertex 1: generation 0 should be stale, 1 current")
	}

	// Again, every node in time, no timeout (a record of no flags): one
	// result for all.
	res := make(chan string, 8)
	for _, v := range []int{3, 2, 1} {
		cs[v].Contribute(v, key, kind, procs, verts, []byte{0, 0, 0, 1, 0}, func(all []byte, err error) {
			res <- fmt.Sprint(all, err)
		})
	}
	var first string
	for i := range 3 {
		select {
		case r := <-res:
			if i == 0 {
				first = r
			} else if r != first {
				t.Errorf("results %s and %s", first, r)
			}
			if strings.Contains(r, "TIMEOUT") || !strings.HasSuffix(r, "<nil>") {
				t.Errorf("second construct: %s", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the second construct did not complete")
		}
	}
}
