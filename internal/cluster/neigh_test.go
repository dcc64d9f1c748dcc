package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestNeighbourTable builds a cluster whose hosts, all talking to each
// other, need more entries in the machine's one IPv4 neighbour table than
// the kernel's default limit (gc_thresh3 = 1024): 40 hosts, 40 × 41 entries.
// The limits are first put back to the kernel's defaults (Up raises them and
// never lowers them, so an earlier run would hide the failure). Before Up
// sized the table, connections from hosts to hosts timed out with
// "neighbour: arp_cache: neighbor table overflow!" in the kernel's log.
func TestNeighbourTable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const n = 40
	l, err := Lock(t.Logf, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"gc_thresh2=512", "gc_thresh3=1024"} {
		if out, err := exec.Command("sysctl", "-q", "-w", "net.ipv4.neigh.default."+kv).CombinedOutput(); err != nil {
			l.Close()
			t.Fatalf("sysctl %s: %v: %s", kv, err, out)
		}
	}
	l.Close()
	c := Start(t, n)

	thresh := func(k string) int {
		out, err := exec.Command("sysctl", "-n", "net.ipv4.neigh.default."+k).Output()
		v, err2 := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || err2 != nil {
			t.Fatalf("sysctl -n %s: %v %v", k, err, err2)
		}
		return v
	}
	if t2, t3 := thresh("gc_thresh2"), thresh("gc_thresh3"); t2 < n*(n+1) || t3 < t2 {
		t.Errorf("gc_thresh2 = %d, gc_thresh3 = %d: want gc_thresh2 >= %d (every host's entry for every other host and the launcher) and gc_thresh3 >= gc_thresh2", t2, t3, n*(n+1))
	}

	// Every host opens a TCP connection to every host's sshd, all at once
	// (bash's /dev/tcp; timeout kills its whole process group). An
	// unresolvable neighbour drops the SYNs: the connection does not come.
	var script strings.Builder
	for _, h := range c.Hosts() {
		fmt.Fprintf(&script, "(exec 3<>/dev/tcp/%s/22 && echo ok %s) & ", c.Addr(h), h)
	}
	script.WriteString("wait")
	errs := make(chan string, n)
	for _, h := range c.Hosts() {
		go func() {
			out, err := c.InNetns(h, "timeout", "60", "bash", "-c", script.String()).CombinedOutput()
			if got := strings.Count(string(out), "ok "); got != n {
				errs <- fmt.Sprintf("from %s: %d of %d hosts' sshd reached (%v): %s", h, got, n, err, strings.Join(strings.Fields(string(out)), " "))
				return
			}
			errs <- ""
		}()
	}
	for range c.Hosts() {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
