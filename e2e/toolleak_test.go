package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"prun/internal/ctest"
)

// Issue 26: a PMIx tool's attach costs a DVM nothing once the tool is gone.
// libpmix 4.2 kept what it made for every tool connection (the namespace it
// registers for the tool with its job-level hash store, three hash tables of
// 17 KB, its peer and rank record) until the server finalized: a monitoring
// script running pps every second grew a DVM by gigabytes a day. prun
// deregisters a departed tool's namespace and releases its peer, and drops
// the lost-connection event that no one can receive (pmixsrv/leaks.c). 1,000
// attaches, in turn pps (by the DVM's pid), query.c's tool (by URI, the
// job's status and process table), pmixtool (the server's namespaces) and
// pmixtool under a namespace of its own choosing: the C heap after attach
// 1,000 is within 256 bytes an attach of what it was after attach 600
// (malloc's free lists settle over the first several hundred, 60-200 bytes
// an attach, then 0-10). It grew 60 KB an attach before.
//
// A tool may claim a running job's namespace as its identity (libpmix then
// keeps two namespaces of that name), or be a rank of the job by its
// environment (libpmix then shares the job's namespace with it): its
// departure must leave the job's alone, and the job's PMIx clients, started
// after it, must still connect.
func TestDVMToolLeak(t *testing.T) {
	const first, attaches, perAttach = 600, 1000, 256
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// By the node's own name: pps finds a server's rendezvous file by the
	// name of its own host (TestDVMTools); modex.c checks PMIX_HOSTNAME.
	d := startDVM(t, nil, "--host", host+":4")
	mdir, modex := pmixProg(t, "modex.c")
	goFile := filepath.Join(t.TempDir(), "go")
	p := d.start(t, opts{dir: mdir, args: []string{"-n", "2", "sh", "-c",
		fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done; exec %s", goFile, modex)}})
	var ns string
	for _, n := range d.waitJobs(t, 1) {
		ns = n
	}
	uri := d.serverURI(t)
	qdir, q := pmixProg(t, "query.c")
	pmixtool := ctest.Build(t, ctest.PMIx, "pmixtool.c")
	tl := &toolAttacher{d: d, ns: ns, uri: uri, query: filepath.Join(qdir, q), pmixtool: pmixtool,
		ppsEnv: append(baseEnv(), "TMPDIR="+d.tmp)}
	idle := dvmFDs(t, d)
	departed := func() { t.Helper(); waitDeparted(t, d, idle) }

	start := time.Now()
	tl.attach(t, 0, first)
	departed()
	m0 := d.memory(t)
	tl.attach(t, first, attaches)
	n := int64(attaches - first)
	// RSS carries Go's heap too, which the tools' queries fill with garbage
	// up to its first collection's target (4 MB at least), then flat: a
	// looser check (the unfixed DVM's grew 13 MiB).
	expectFlat(t, "attach", first, attaches, m0, settledMemory(t, d, m0, perAttach*n), perAttach, 6144, start)

	// Tools under the running job's namespace, then the job's PMIx clients:
	// they connect and exchange their keys as any job's would. One is rank 0
	// of the job by its environment, as a tool the job started would be (the
	// library's PMIX_TOOL_CLIENT, which shares the job's namespace), one
	// claims the name as its own identity (the library lists a second
	// namespace of that name, which it then keeps, as the data of each is
	// found by name; so the first goes first).
	impostor := exec.Command(pmixtool, uri, ns)
	started := exec.Command(pmixtool, uri)
	started.Env = append(baseEnv(), "PMIX_NAMESPACE="+ns, "PMIX_RANK=0")
	for _, cmd := range []*exec.Cmd{started, impostor} {
		if out, err := runFor(cmd, 30*time.Second); err != nil || out != "pmixtool: namespaces "+ns+"\n" {
			t.Errorf("%s (%v): %v\n%s", strings.Join(cmd.Args, " "), cmd.Env, err, out)
		}
	}
	// Their departures handled: a rank's tool still connected when the
	// job's fence starts would fail the fence (libpmix counts it out).
	departed()
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := p.wait()
	expectCode(t, r, 0)
	if strings.Count(r.stdout, " ok (1 peers") != 2 {
		t.Errorf("the job's clients after tools under its namespace left: %s", r)
	}
	d.expectServing(t)
}

// toolAttacher attaches tools to a DVM running the job of namespace ns,
// each kind in turn: pps, a query tool, pmixtool under the name libpmix
// gives it and under one of its own.
type toolAttacher struct {
	d               *dvmUnder
	ns, uri         string
	query, pmixtool string // the tools' binaries
	ppsEnv          []string
}

// attach runs tools from to to, one after the other.
func (tl *toolAttacher) attach(t *testing.T, from, to int) {
	d, ns, uri := tl.d, tl.ns, tl.uri
	for k := from; k < to; k++ {
		var cmd *exec.Cmd
		var want string
		switch k % 4 {
		case 0:
			cmd = exec.Command("pps", "--pid", fmt.Sprint(d.pid))
			cmd.Env = tl.ppsEnv
			want = ns
		case 1:
			cmd = exec.Command(tl.query, "tool", uri, ns)
			want = "query: jobstatus RUNNING\n"
		case 2:
			cmd = exec.Command(tl.pmixtool, uri)
			want = "pmixtool: namespaces " + ns + "\n"
		case 3:
			cmd = exec.Command(tl.pmixtool, uri, fmt.Sprintf("toolleak-%d", k))
			want = "pmixtool: namespaces " + ns + "\n"
		}
		if out, err := runFor(cmd, 30*time.Second); err != nil || !strings.Contains(out, want) {
			t.Fatalf("attach %d, %s: %v\n%s\nwant %q", k, strings.Join(cmd.Args, " "), err, out, want)
		}
	}
}

// settledMemory reads the DVM's memory until its C heap is within bound
// of base's: a tool's departure is handled on libpmix's thread after the
// tool exited (its namespace's deregistration is queued there).
func settledMemory(t *testing.T, d *dvmUnder, base dvmMemory, bound int64) dvmMemory {
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := d.memory(t)
		if int64(m.CHeapBytes)-int64(base.CHeapBytes) <= bound || time.Now().After(deadline) {
			return m
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dvmFDs is the number of descriptors the DVM holds.
func dvmFDs(t *testing.T, d *dvmUnder) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// waitDeparted waits for the tools' connections to be closed on the DVM's
// side (libpmix handles a departure on its own thread, after the tool
// exited): until the DVM holds no more descriptors than idle, before the
// first.
func waitDeparted(t *testing.T, d *dvmUnder, idle int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := dvmFDs(t, d); n > idle; n = dvmFDs(t, d) {
		if time.Now().After(deadline) {
			t.Fatalf("the DVM holds %d descriptors 10 s after its tools ended, %d before they came", n, idle)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runFor runs cmd, killed after limit, and returns its output, stdout and
// stderr together.
func runFor(cmd *exec.Cmd, limit time.Duration) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	if err == nil {
		timer := time.AfterFunc(limit, func() { cmd.Process.Kill() })
		err = cmd.Wait()
		timer.Stop()
	}
	return out.String(), err
}
