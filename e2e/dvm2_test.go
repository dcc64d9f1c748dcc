package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// dvmJobs submits jobs to one DVM: with the cluster's environment on the
// test hosts, with the test's own on one node.
type dvmJobs struct {
	d   *dvmUnder
	env []string
}

func (j dvmJobs) run(t *testing.T, o opts) *result {
	t.Helper()
	o.env = append(append([]string{}, j.env...), o.env...)
	return j.d.run(t, o)
}

func (j dvmJobs) start(t *testing.T, o opts) *proc {
	t.Helper()
	o.env = append(append([]string{}, j.env...), o.env...)
	return j.d.start(t, o)
}

// connectBetweenJobs checks the name service and connect/accept between two
// jobs of one DVM: MPI_Publish_name in one job, MPI_Lookup_name in another
// (Open MPI through PMIx, MPICH through PMI's name service, and each finding
// the other's), then MPI_Comm_connect/MPI_Comm_accept between a server job
// and a client job (Open MPI: one PMIx server for both; MPICH ch3: its own
// TCP connection). hosts, if set, places the server and the client.
func connectBetweenJobs(t *testing.T, j dvmJobs, serverHost, clientHosts []string) {
	place := func(hosts []string, args ...string) []string {
		if len(hosts) == 0 {
			return args
		}
		out := []string{"--host", hosts[0]}
		for _, h := range hosts[1:] {
			out[1] += "," + h
		}
		return append(append(out, "--map-by", "node"), args...)
	}
	_, ompiNS := ompi(t, "nsname.c")
	ompiDir, _ := ompi(t, "nsname.c")
	mpichDir, mpichNS := mpich(t, "nsname.c")
	for _, tc := range []struct {
		name                 string
		pubDir, pub, lookDir string
		look                 string
	}{
		{"ompi", ompiDir, ompiNS, ompiDir, ompiNS},
		{"mpich", mpichDir, mpichNS, mpichDir, mpichNS},
		{"ompi-to-mpich", ompiDir, ompiNS, mpichDir, mpichNS},
		{"mpich-to-ompi", mpichDir, mpichNS, ompiDir, ompiNS},
	} {
		t.Run("names-"+tc.name, func(t *testing.T) {
			service, value := "dvm-"+tc.name, "port#"+tc.name+"$"
			pr, pw := io.Pipe()
			defer pw.Close()
			p := j.start(t, opts{args: place(serverHost, "-n", "1", tc.pub, "publish", service, value), dir: tc.pubDir, stdin: pr})
			p.waitOutput(30*time.Second, "nsname: published "+service)
			r := j.run(t, opts{args: place(clientHosts, "-n", "2", tc.look, "lookup", service), dir: tc.lookDir})
			expectCode(t, r, 0)
			expectContains(t, "stdout", r.stdout, "nsname: rank 0 found "+value+"\n")
			expectContains(t, "stdout", r.stdout, "nsname: rank 1 found "+value+"\n")
			pw.Write([]byte("done\n"))
			pw.Close()
			expectCode(t, p.wait(), 0)
			if tc.pub != tc.look {
				return // the unpublish is each publisher's: checked in the cases of one MPI
			}
			// Unpublished by its job: a lookup gives up (exit 2, after 10 s).
			r = j.run(t, opts{args: place(clientHosts, "-q", "-n", "1", tc.look, "lookup", service), dir: tc.lookDir})
			if r.code == 0 {
				t.Errorf("found after the publisher unpublished it: %s", r)
			}
		})
	}
	for _, tc := range []ctest.Toolchain{ctest.OpenMPI, ctest.MPICHCh3} {
		t.Run("connect-"+tc.String(), func(t *testing.T) {
			dir, prog := built(t, tc, "nsconnect.c")
			svc := "dvm-svc-" + tc.String()
			p := j.start(t, opts{args: place(serverHost, "--timeout", "60", "-n", "1", prog, "server", svc), dir: dir})
			r := j.run(t, opts{args: place(clientHosts, "--timeout", "60", "-n", "2", prog, "client", svc), dir: dir})
			expectConnected(t, r, p.wait())
		})
	}
}

// Issue 26: two jobs of one DVM on this node publish, look up and connect.
func TestDVMConnect(t *testing.T) {
	cluster.Quiet(t)
	d := startDVM(t, nil, "--host", "localhost:6")
	connectBetweenJobs(t, dvmJobs{d: d}, nil, nil)
	t.Run("stdin", func(t *testing.T) { stdinToRanks(t, dvmJobs{d: d}, "localhost", nil) })
	d.expectServing(t)
}

// Issue 26: a submitter's failures on one node (see submitterFailures).
func TestDVMFailures(t *testing.T) {
	cluster.Quiet(t) // MPI programs on this node
	d := startDVM(t, nil, "--host", "localhost:4")
	submitterFailures(t, dvmJobs{d: d}, 4)
}

// One DVM over the 4 test hosts: jobs that connect (the server job on
// prun-h2, its clients on prun-h3 and prun-h4), tools attached to a node's
// daemon.
func TestDVM2MultiNode(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	d := startDVM(t, m.env(), "--hostfile", m.hostfile)
	j := dvmJobs{d: d, env: m.env("OMPI_MCA_btl_tcp_if_include=198.18.0.0/24")}
	t.Run("connect", func(t *testing.T) {
		connectBetweenJobs(t, j, []string{"prun-h2"}, []string{"prun-h3", "prun-h4"})
	})
	t.Run("stdin", func(t *testing.T) { stdinToRanks(t, j, "prun-h3", []string{"prun-h1", "prun-h4"}) })
	t.Run("tool-on-a-node", func(t *testing.T) { toolOnANode(t, c, j) })
	t.Run("node-refuses", func(t *testing.T) { nodeRefuses(t, c, j) })
	submitterFailures(t, j, 4)
	d.expectServing(t)
	d.stop(t, true)
	m.checkClean(t, 10*time.Second)
}

// dvmJobNamespaces is what `prun dvm ps --json` says of the running jobs:
// each job's namespace by its command.
func (d *dvmUnder) namespaces(t *testing.T) map[string]string {
	t.Helper()
	out, err := d.cmd(t, "ps", "--json")
	var jobs []struct{ Namespace, Command string }
	if err != nil || json.Unmarshal([]byte(out), &jobs) != nil {
		t.Fatalf("ps --json: %v %q", err, out)
	}
	ns := map[string]string{}
	for _, j := range jobs {
		ns[j.Command] = j.Namespace
	}
	return ns
}

// serverURI is the URI of the DVM's own PMIx server (this node's), from
// the rendezvous file libpmix writes for tools.
func (d *dvmUnder) serverURI(t *testing.T) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(d.tmp, "prun.*", fmt.Sprintf("pmix.*.tool.%d", d.pid)))
	if len(files) != 1 {
		t.Fatalf("the DVM's rendezvous files: %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	uri, _, _ := strings.Cut(string(b), "\n")
	return uri
}

// waitJobs waits until `prun dvm ps` shows n jobs running.
func (d *dvmUnder) waitJobs(t *testing.T, n int) map[string]string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := d.cmd(t, "ps", "--json")
		if strings.Count(out, `"state":"running"`) >= n {
			return d.namespaces(t)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs never ran: %s", n, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Issue 26: PMIx tools attach to the DVM (its server on this node) and
// list its jobs and their processes: Debian's pps (by the DVM's pid, and as
// a system server), testdata/query.c for the process tables (Debian's
// pquery 4.2.2 dies of SIGFPE before it connects to anything), and a tool
// registered for job ends hears a submission's end.
func TestDVMTools(t *testing.T) {
	host, _ := os.Hostname()
	// By the node's own name: libpmix names a server's rendezvous file
	// after the host name the server was given, and a tool looks for the
	// name of its own host.
	d := startDVM(t, nil, "--host", host+":4")
	goFile := filepath.Join(t.TempDir(), "go")
	hold := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done", goFile)
	p1 := d.start(t, opts{args: []string{"-n", "2", "sh", "-c", hold + "; echo one"}})
	p2 := d.start(t, opts{args: []string{"-n", "1", "sh", "-c", hold + "; exit 4"}})
	jobs := d.waitJobs(t, 2)
	var ns1, ns2 string
	for cmd, ns := range jobs {
		if strings.Contains(cmd, "echo one") {
			ns1 = ns
		} else {
			ns2 = ns
		}
	}
	if ns1 == "" || ns2 == "" {
		t.Fatalf("ps: %v", jobs)
	}
	for _, how := range [][]string{{"--pid", fmt.Sprint(d.pid)}, {"--system-server"}, {"--system-server-first"}} {
		cmd := exec.Command("pps", how...)
		cmd.Env = append(baseEnv(), "TMPDIR="+d.tmp)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Active nspaces: ") ||
			!strings.Contains(string(out), ns1) || !strings.Contains(string(out), ns2) {
			t.Errorf("pps %s: %v\n%s\nwant %s and %s", strings.Join(how, " "), err, out, ns1, ns2)
		}
	}
	uri := d.serverURI(t)
	qdir, q := pmixProg(t, "query.c")
	for ns, table := range map[string]string{
		ns1: fmt.Sprintf("2 procs: 0@%[1]s:PROC EXECUTING,1@%[1]s:PROC EXECUTING", host),
		ns2: fmt.Sprintf("1 procs: 0@%s:PROC EXECUTING", host),
	} {
		out, _ := exec.Command(filepath.Join(qdir, q), "tool", uri, ns).CombinedOutput()
		for _, w := range []string{"query: jobstatus RUNNING", "query: proctable " + table} {
			if !strings.Contains(string(out), w+"\n") {
				t.Errorf("query tool %s: want %q in\n%s", ns, w, out)
			}
		}
		if !regexp.MustCompile(`(?m)^query: namespaces .*` + regexp.QuoteMeta(ns)).Match(out) {
			t.Errorf("query tool: %s not among the namespaces:\n%s", ns, out)
		}
	}
	jobend := ctest.Build(t, ctest.PMIx, "jobend.c")
	heard := make(chan string, 2)
	regDir := t.TempDir()
	for i, ns := range []string{ns1, ns2} {
		go func() {
			out, err := exec.Command(jobend, "tool", uri, ns, filepath.Join(regDir, fmt.Sprint(i))).CombinedOutput()
			heard <- fmt.Sprintf("%s(err %v)", out, err)
		}()
	}
	waitFiles(t, 30*time.Second, filepath.Join(regDir, "0"), filepath.Join(regDir, "1")) // both registered
	os.WriteFile(goFile, nil, 0o644)
	r := p1.wait()
	expectCode(t, r, 0)
	expectCode(t, p2.wait(), 4)
	outs := <-heard + <-heard
	t.Logf("tools heard:\n%s", outs)
	for _, w := range []string{
		fmt.Sprintf("jobend: tool heard %s end: status 0 exit 0\n", ns1),
		fmt.Sprintf("jobend: tool heard %s end: status", ns2),
	} {
		if !strings.Contains(outs, w) {
			t.Errorf("want %q in\n%s", w, outs)
		}
	}
	d.expectServing(t)

	// A DVM whose node is named localhost, not by the machine's name: pps
	// finds it by its pid all the same.
	l := startDVM(t, nil, "--host", "localhost:2")
	goFile = filepath.Join(t.TempDir(), "go")
	p := l.start(t, opts{args: []string{"-n", "1", "sh", "-c", fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done", goFile)}})
	var ns string
	for _, n := range l.waitJobs(t, 1) {
		ns = n
	}
	cmd := exec.Command("pps", "--pid", fmt.Sprint(l.pid))
	cmd.Env = append(baseEnv(), "TMPDIR="+l.tmp)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), ns) {
		t.Errorf("pps --pid of a DVM on localhost: %v\n%s\nwant %s", err, out, ns)
	}
	os.WriteFile(goFile, nil, 0o644)
	expectCode(t, p.wait(), 0)
}

// waitFiles waits until every file exists.
func waitFiles(t *testing.T, within time.Duration, files ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, f := range files {
		for {
			if _, err := os.Stat(f); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never appeared", f)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// toolOnANode: PMIx tools attached to the daemon of prun-h3, which is not
// the DVM's process (PRRTE #2568: a tool of a non-master daemon never heard
// its job end), list the job's processes on every node and hear its end.
func toolOnANode(t *testing.T, c *cluster.Cluster, j dvmJobs) {
	dir := t.TempDir()
	goFile, regFile := filepath.Join(dir, "go"), filepath.Join(dir, "registered")
	p := j.start(t, opts{args: []string{"--map-by", "node", "-n", "4", "sh", "-c",
		fmt.Sprintf(`echo "$PMIX_SERVER_URI41" > %s/rank.$PRUN_RANK.tmp && mv %[1]s/rank.$PRUN_RANK.tmp %[1]s/rank.$PRUN_RANK.uri; while [ ! -e %s ]; do sleep 0.1; done`,
			dir, goFile)}})
	uriFile := filepath.Join(dir, "rank.2.uri") // --map-by node: rank 2 on prun-h3
	waitFiles(t, 30*time.Second, uriFile)
	uri := readURI(t, uriFile)
	var ns string
	for _, n := range j.d.waitJobs(t, 1) {
		ns = n
	}
	qdir, q := pmixProg(t, "query.c")
	out, _ := c.InNetns("prun-h3", filepath.Join(qdir, q), "tool", uri, ns).CombinedOutput()
	for _, w := range []string{"query: jobstatus RUNNING",
		"query: proctable 4 procs: 0@prun-h1:PROC EXECUTING,1@prun-h2:PROC EXECUTING,2@prun-h3:PROC EXECUTING,3@prun-h4:PROC EXECUTING",
		"query: localproctable 1 procs: 2@prun-h3"} {
		if !strings.Contains(string(out), w+"\n") {
			t.Errorf("query tool on prun-h3: want %q in\n%s", w, out)
		}
	}
	jobend := ctest.Build(t, ctest.PMIx, "jobend.c")
	tool := c.InNetns("prun-h3", jobend, "tool", uri, ns, regFile)
	heard := make(chan string, 1)
	go func() {
		out, err := tool.CombinedOutput()
		heard <- fmt.Sprintf("%s(err %v)", out, err)
	}()
	waitFiles(t, 30*time.Second, regFile)
	os.WriteFile(goFile, nil, 0o644)
	expectCode(t, p.wait(), 0)
	if out, w := <-heard, fmt.Sprintf("jobend: tool heard %s end: status 0 exit 0\n", ns); !strings.Contains(out, w) {
		t.Errorf("the tool on prun-h3: want %q in\n%s", w, out)
	}
}

// gone waits (15 s at most) until no process of the submission p is left
// but the submitter itself: its ranks ran under the DVM, not under it.
func (p *proc) ranksGone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []procInfo
		for _, pi := range jobProcs(p.cmd.Process.Pid, p.mark) {
			if pi.state != 'Z' {
				left = append(left, pi)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the job's processes outlived their submitter by 15 s: %v", left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// idle waits until the DVM runs no job (15 s at most).
func (d *dvmUnder) idle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := d.cmd(t, "ps", "--json")
		if err == nil && strings.TrimSpace(out) == "[]" {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the DVM still runs jobs: %v %s", err, out)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submitterFailures: what a submitter does wrong is that submitter's
// business. A submitter killed (SIGKILL) or interrupted (Ctrl-C, SIGINT) at
// any point of its job's start, and a job whose every rank crashes: each
// is reported to that submitter alone (or, killed, leaves nothing), and the
// DVM then runs a good job. n ranks over the DVM's nodes.
func submitterFailures(t *testing.T, j dvmJobs, n int) {
	np := fmt.Sprint(n)
	good := func(t *testing.T) {
		t.Helper()
		r := j.run(t, opts{args: []string{"-n", np, "echo", "good"}})
		expectCode(t, r, 0)
		if r.stdout != strings.Repeat("good\n", n) {
			t.Errorf("a good job after that: %s", r)
		}
	}
	// From at once (before the submission is sent) to after the ranks run.
	delays := []time.Duration{0, 2 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond,
		80 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond}
	t.Run("submitter-killed", func(t *testing.T) {
		for _, delay := range delays {
			p := j.start(t, opts{args: []string{"--map-by", "node", "-n", np, "sleep", "100"}, allowZombieRanks: true})
			time.Sleep(delay)
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
			p.ranksGone(t)
			if r := p.wait(); r.signal != syscall.SIGKILL {
				t.Errorf("after %v: %s", delay, r)
			}
		}
		j.d.idle(t)
		good(t)
	})
	t.Run("ctrl-c-during-start", func(t *testing.T) {
		for _, delay := range delays {
			p := j.start(t, opts{args: []string{"--map-by", "node", "-n", np, "sleep", "100"}})
			time.Sleep(delay)
			p.signal(syscall.SIGINT)
			p.ranksGone(t)
			// Told: 130, or killed by the signal itself before prun set its
			// handlers (the first few milliseconds of its life).
			if r := p.wait(); r.code != 130 && r.signal != syscall.SIGINT {
				t.Errorf("Ctrl-C after %v: %s", delay, r)
			}
		}
		j.d.idle(t)
		good(t)
	})
	t.Run("every-rank-crashes", func(t *testing.T) {
		r := j.run(t, opts{args: []string{"--map-by", "node", "-n", np, "sh", "-c", "kill -SEGV $$"}})
		expectCode(t, r, 128+int(syscall.SIGSEGV))
		expectContains(t, "stderr", r.stderr, "signal 11")
		dir, prog := mpich(t, "abort.c")
		r = j.run(t, opts{args: []string{"--map-by", "node", "-n", np, prog}, dir: dir})
		expectCode(t, r, 17)
		good(t)
	})
}

// hideOn hides dir from host (an empty tmpfs over it in the mount
// namespace of the host's sshd, hence of its sessions and the DVM's daemon
// there) until the test ends.
func hideOn(t *testing.T, host, dir string) {
	t.Helper()
	var sshd int
	for _, pid := range netnsPids(host) {
		if pi, ok := readStat(pid); ok && pi.comm == "sshd" {
			if pp, ok := readStat(pi.ppid); !ok || pp.comm != "sshd" {
				sshd = pid
			}
		}
	}
	if sshd == 0 {
		t.Fatalf("no sshd on %s", host)
	}
	if out, err := exec.Command("nsenter", "-t", fmt.Sprint(sshd), "-m", "mount", "-t", "tmpfs", "hidden", dir).CombinedOutput(); err != nil {
		t.Fatalf("hiding %s on %s: %v %s", dir, host, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("nsenter", "-t", fmt.Sprint(sshd), "-m", "umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s on %s: %v %s", dir, host, err, out)
		}
	})
}

// nodeRefuses: a program that one node does not have (prun-h3), and one no
// node has: the submitter hears which node refused and why, and the DVM
// runs a good job after each.
func nodeRefuses(t *testing.T, c *cluster.Cluster, j dvmJobs) {
	dir := t.TempDir()
	prog := writeScript(t, dir, "here", "echo \"here on $(hostname)\"\n")
	hideOn(t, "prun-h3", dir)
	r := j.run(t, opts{args: []string{"--map-by", "node", "-n", "4", prog}})
	if r.code == 0 {
		t.Errorf("a program missing on prun-h3 ran: %s", r)
	}
	expectContains(t, "stderr", r.stderr, "prun-h3")
	expectContains(t, "stderr", r.stderr, prog)
	t.Logf("missing on one node: %s", r.stderr)
	j.d.idle(t)
	r = j.run(t, opts{args: []string{"--host", "prun-h1,prun-h2,prun-h4", "--map-by", "node", "-n", "3", prog}})
	expectCode(t, r, 0)
	if len(lines(r.stdout)) != 3 || strings.Contains(r.stdout, "prun-h3") {
		t.Errorf("the program where it is: %s", r)
	}
	only := filepath.Join(c.LauncherOnly(), "nowhere")
	writeScript(t, c.LauncherOnly(), "nowhere", "echo never\n")
	defer os.Remove(only)
	r = j.run(t, opts{args: []string{"--map-by", "node", "-n", "4", only}})
	if r.code == 0 {
		t.Errorf("a program no node has ran: %s", r)
	}
	expectContains(t, "stderr", r.stderr, only)
	t.Logf("missing everywhere: %s", r.stderr)
	j.d.idle(t)
	r = j.run(t, opts{args: []string{"-n", "8", "echo", "good"}})
	expectCode(t, r, 0)
	if r.stdout != strings.Repeat("good\n", 8) {
		t.Errorf("a good job after that: %s", r)
	}
}

// stdinToRanks: a submitter's stdin reaches the rank that reads it on any
// node of the DVM (remote is such a node; others, two more), byte for
// byte and past the control plane's 1 MiB window; each job reads its own
// stream (two at once on one node, and one after another: a job's end of
// input is not the next one's); --stdin all gives every rank a copy.
func stdinToRanks(t *testing.T, j dvmJobs, remote string, others []string) {
	r := j.run(t, opts{args: []string{"--host", remote, "-n", "1", "cat"}, stdin: strings.NewReader("data\n")})
	expectCode(t, r, 0)
	if r.stdout != "data\n" {
		t.Errorf("cat on %s: %s", remote, r)
	}
	big := make([]byte, 3<<20+17)
	rand.Read(big)
	r = j.run(t, opts{args: []string{"--host", remote, "-n", "1", "sha256sum"}, stdin: bytes.NewReader(big)})
	expectCode(t, r, 0)
	if want := fmt.Sprintf("%x  -\n", sha256.Sum256(big)); r.stdout != want {
		t.Errorf("3 MiB through sha256sum on %s: got %q, want %q", remote, r.stdout, want)
	}
	// Two jobs at once on the same node, each its own input.
	var ps []*proc
	var ws []*io.PipeWriter
	for range 2 {
		pr, pw := io.Pipe()
		ws = append(ws, pw)
		ps = append(ps, j.start(t, opts{args: []string{"--host", remote, "-n", "1", "cat"}, stdin: pr}))
		t.Cleanup(func() { pw.Close() }) // before the start's own cleanup waits for the copy to stdin
	}
	for i, pw := range ws {
		fmt.Fprintf(pw, "job %d\n", i)
	}
	for i, p := range ps {
		p.waitOutput(30*time.Second, fmt.Sprintf("job %d\n", i))
		ws[i].Close()
		r := p.wait()
		expectCode(t, r, 0)
		if r.stdout != fmt.Sprintf("job %d\n", i) {
			t.Errorf("job %d's stdin: %s", i, r)
		}
	}
	// A job that does not read its stdin to the end leaves the rest to
	// whoever reads the submitter's stdin next (the user's shell, on a
	// terminal): the DVM reads it no more once the job is over. The pipe
	// is put in blocking mode (pr.Fd), as a terminal is: a read(2) blocked
	// on it is not ended by closing the DVM's copy.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	pr.Fd()
	r = j.run(t, opts{args: []string{"--host", remote, "-n", "1", "true"}, stdin: pr})
	expectCode(t, r, 0)
	pw.Write([]byte("after the job\n"))
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, _ := pr.Read(buf)
		got <- string(buf[:n])
	}()
	select {
	case s := <-got:
		if s != "after the job\n" {
			t.Errorf("the submitter's stdin after its job: read %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the submitter's stdin after its job: the DVM took what was written to it")
		pw.Write([]byte("unblock\n"))
		<-got
	}
	if len(others) > 0 {
		hosts := strings.Join(append([]string{remote}, others...), ",")
		r = j.run(t, opts{args: []string{"--host", hosts, "--map-by", "node", "--stdin", "all", "-n", fmt.Sprint(1 + len(others)),
			"sh", "-c", `echo "$(hostname) $(cat)"`}, stdin: strings.NewReader("to all\n")})
		expectCode(t, r, 0)
		if len(lines(r.stdout)) != 1+len(others) || strings.Count(r.stdout, " to all\n") != 1+len(others) {
			t.Errorf("--stdin all: %s", r)
		}
		// Rank 2 reads (the third node); the others get nothing.
		r = j.run(t, opts{args: []string{"--host", hosts, "--map-by", "node", "--stdin", "2", "-n", fmt.Sprint(1 + len(others)),
			"sh", "-c", `echo "$PRUN_RANK $(cat)"`}, stdin: strings.NewReader("only 2\n")})
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, "2 only 2\n")
		if strings.Count(r.stdout, "only 2") != 1 {
			t.Errorf("--stdin 2: %s", r)
		}
	}
}

// vmRSS is a process's resident set size in KiB (0: unknown).
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb
		}
	}
	return 0
}

// Issue 26: 16 submitters at once, 200 jobs each (PRUN_DVM_STRESS=SxJ
// changes it), mixed: shell jobs of one or two ranks with their own output
// and exit status, MPICH hello (PMI-1) and, every 25th, Open MPI's ring
// (PMIx). Every job's output and exit status are checked; the DVM's RSS
// after the run is its RSS after the first 100 jobs (each submitter's first
// 7), within slack; no job leaves a session directory.
func TestDVMStress(t *testing.T) {
	cluster.Quiet(t)
	submitters, jobs := 16, 200
	if s := os.Getenv("PRUN_DVM_STRESS"); s != "" {
		if _, err := fmt.Sscanf(s, "%dx%d", &submitters, &jobs); err != nil {
			t.Fatalf("PRUN_DVM_STRESS=%q: want SUBMITTERSxJOBS", s)
		}
	}
	d := startDVM(t, nil, "--host", "localhost:64")
	mdir, hello := mpich(t, "hello.c")
	odir, ring := ompi(t, "ring.c")
	type job struct {
		args   []string
		dir    string
		code   int
		stdout func(string) bool
	}
	jobOf := func(s, k int) job {
		switch {
		case k%25 == 24:
			return job{[]string{"-n", "2", ring}, odir, 0,
				func(o string) bool { return strings.Contains(o, "ring: 2 ranks, 10 laps, sum ok\n") }}
		case k%5 == 2:
			return job{[]string{"-n", "2", hello}, mdir, 0, func(o string) bool {
				return strings.Contains(o, "hello from rank 0 of 2") && strings.Contains(o, "hello from rank 1 of 2") && len(lines(o)) == 2
			}}
		case k%2 == 0:
			tok := fmt.Sprintf("s%dj%d", s, k)
			return job{[]string{"-n", "2", "echo", tok}, "", 0, func(o string) bool { return o == tok+"\n"+tok+"\n" }}
		default:
			tok := fmt.Sprintf("s%dj%d", s, k)
			code := (s + k) % 7
			return job{[]string{"-n", "1", "sh", "-c", fmt.Sprintf("echo %s; exit %d", tok, code)}, "", code,
				func(o string) bool { return o == tok+"\n" }}
		}
	}
	runPhase := func(from, to int) {
		var wg sync.WaitGroup
		for s := range submitters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := from; k < to; k++ {
					jb := jobOf(s, k)
					cmd := exec.Command(prunBin, jb.args...)
					cmd.Env = append(d.env, "PRUN_DVM="+d.dir)
					cmd.Dir = jb.dir
					var stdout, stderr bytes.Buffer
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					start := time.Now()
					err := cmd.Start()
					if err == nil {
						timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
						err = cmd.Wait()
						timer.Stop()
					}
					code := cmd.ProcessState.ExitCode()
					if code != jb.code || !jb.stdout(stdout.String()) {
						t.Errorf("submitter %d job %d (%s): exit %d (want %d) after %v: %v\nstdout: %q\nstderr: %q", s, k,
							strings.Join(jb.args, " "), code, jb.code, time.Since(start).Round(time.Millisecond), err, stdout.String(), stderr.String())
					}
				}
			}()
		}
		wg.Wait()
	}
	first := min(jobs, (100+submitters-1)/submitters)
	start := time.Now()
	runPhase(0, first)
	d.idle(t)
	rss0 := vmRSS(d.pid)
	runPhase(first, jobs)
	d.idle(t)
	rss1 := vmRSS(d.pid)
	n := submitters * jobs
	t.Logf("%d jobs by %d submitters in %v; the DVM's RSS %d KiB after %d jobs, %d KiB after %d", n, submitters,
		time.Since(start).Round(time.Millisecond), rss0, first*submitters, rss1, n)
	if rss0 == 0 || rss1 > rss0+rss0/4+4096 {
		t.Errorf("the DVM's RSS grew from %d KiB (after %d jobs) to %d KiB (after %d)", rss0, first*submitters, rss1, n)
	}
	// The DVM's session directory holds its servers' rendezvous files,
	// no job's directory.
	tops, _ := filepath.Glob(filepath.Join(d.tmp, "prun.*"))
	for _, top := range tops {
		ents, _ := os.ReadDir(top)
		for _, e := range ents {
			if e.IsDir() {
				t.Errorf("a job's session directory is left: %s%s", filepath.Join(top, e.Name()), listTree(filepath.Join(top, e.Name())))
			}
		}
	}
	if t.Failed() {
		out, _ := os.ReadFile(filepath.Join(d.dir, "log"))
		t.Logf("the DVM's log:\n%s", clip(string(out)))
	}
}
