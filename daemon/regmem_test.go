package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"prun/hostfile"
	"prun/pmixsrv"
	"prun/sessiondir"
)

// noUpcalls is a PMIx host for a server no client connects to: nothing of
// it is called while a namespace registers.
type noUpcalls struct{ pmixsrv.Host }

// statusKiB reads a "Key: N kB" line of /proc/self/status.
func statusKiB(key string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

var regMemLine = regexp.MustCompile(`regmem: ([0-9]+) nodes: peak \+([0-9]+) KiB, held \+([0-9]+) KiB`)

// TestRegisterMemoryPerNode registers a job of 1,024 nodes, one rank each,
// with the real libpmix server, as a daemon of one of its nodes does, and
// measures what the registration adds to the process's peak RSS: libpmix's
// store of every rank and node, plus, while it registers, their pmix_info_t
// (544 bytes each). Every daemon of a job does this, at once on one host:
// this is what 1,024 simulated daemons could not fit in 24 GiB. It was
// about 19 KiB per node (22 pmix_info_t per remote rank and node); at most
// 16 KiB now (measured 13.5).
func TestRegisterMemoryPerNode(t *testing.T) {
	const nodes = 1024
	if raceEnabled {
		// make test runs this package twice; the limit is the run's
		// without the detector, whose shadow memory counts in the RSS.
		t.Skip("peak RSS is measured without the race detector (make test's first run of this package)")
	}
	if os.Getenv("PRUN_REGMEM_CHILD") == "" {
		// libpmix serves once per process, and the peak must be this
		// registration's, not another test's: a process of its own.
		cmd := exec.Command(os.Args[0], "-test.run=^TestRegisterMemoryPerNode$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PRUN_REGMEM_CHILD=1")
		out, err := cmd.CombinedOutput()
		m := regMemLine.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%v\n%s", err, out)
		}
		peak, _ := strconv.ParseFloat(string(m[2]), 64)
		held, _ := strconv.ParseFloat(string(m[3]), 64)
		t.Logf("per node: peak %.1f KiB, held %.1f KiB", peak/nodes, held/nodes)
		if peak/nodes > 16 {
			t.Errorf("registering a job of %d nodes raised the peak RSS by %.1f KiB a node, want at most 16", nodes, peak/nodes)
		}
		return
	}
	dir := t.TempDir()
	s, err := pmixsrv.Init(pmixsrv.Config{TmpDir: dir, Nspace: "regmem", Hostname: "sim0000"}, noUpcalls{})
	if err != nil {
		t.Fatal(err)
	}
	var hs []hostfile.Host
	for i := 0; i < nodes; i++ {
		hs = append(hs, hostfile.Host{Name: fmt.Sprintf("sim%04d", i), Slots: 1})
	}
	p := plan(t, hs, nodes)
	runtime.GC()
	debug.FreeOSMemory()
	anon, hwm := statusKiB("RssAnon"), statusKiB("VmHWM")
	if err := s.RegisterNspace("ns", 1, nspaceInfo(p, &sessiondir.Dir{Top: dir}, 0)); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("regmem: %d nodes: peak +%d KiB, held +%d KiB\n", nodes, statusKiB("VmHWM")-hwm, statusKiB("RssAnon")-anon)
}
