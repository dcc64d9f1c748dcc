package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// Tests of issue 29's events and queries: PMIX_EVENT_JOB_END to a spawner
// and to tools, PMIX_EVENT_PROC_TERMINATED to a job's other ranks under
// --enable-recovery, and PMIx_Query_info's job and process queries.

var (
	parentHeard = regexp.MustCompile(`(?m)^jobend: parent heard \S+ end: status 0 exit 0$`)
)

// TestJobEndEvent: a spawner that registered for its child job's end hears
// it; a tool attached to the launcher's server hears the user's job end.
func TestJobEndEvent(t *testing.T) {
	t.Parallel()
	bin := ctest.Build(t, ctest.PMIx, "jobend.c")
	r := run(t, opts{args: []string{"-n", "1", bin, "spawn", "2"}})
	expectCode(t, r, 0)
	if !parentHeard.MatchString(r.stdout) {
		t.Errorf("the spawner did not hear its child's end:\n%s", r)
	}
	// The child job, over, is forgotten on its node while the launch goes on.
	expectContains(t, "stdout", r.stdout, "jobend: child's session directory removed\n")

	// A tool attached by --report-uri: the job's ranks wait for the tool's
	// registration (its file), then end.
	dir := t.TempDir()
	uriFile, goFile := filepath.Join(dir, "uri"), filepath.Join(dir, "go")
	p := startPrun(t, opts{args: []string{"--report-uri", uriFile, "-n", "2", "sh", "-c",
		fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done", goFile)}})
	p.waitRanks(2, "sh", 20*time.Second)
	uri := readURI(t, uriFile)
	nspace := fmt.Sprintf("prun.%d.1", p.cmd.Process.Pid)
	out, err := exec.Command(bin, "tool", uri, nspace, goFile).CombinedOutput()
	r = p.wait()
	expectCode(t, r, 0)
	want := fmt.Sprintf("jobend: tool heard %s end: status 0 exit 0\n", nspace)
	if err != nil || !strings.HasSuffix(string(out), want) {
		t.Errorf("tool: %v\n%s\nwant %q", err, out, want)
	}
}

// TestProcTerminatedEvent: under --enable-recovery, a rank that exits 3
// is announced to the others, which finish normally.
func TestProcTerminatedEvent(t *testing.T) {
	t.Parallel()
	dir, ft := pmixProg(t, "ftevent.c")
	r := run(t, opts{args: []string{"--enable-recovery", "-n", "4", ft, "1"}, dir: dir})
	expectProcTerminated(t, r, 4, 1)
}

func expectProcTerminated(t *testing.T, r *result, n, victim int) {
	t.Helper()
	expectCode(t, r, 3) // the failure ridden out decides the status
	for i := 0; i < n; i++ {
		if i == victim {
			continue
		}
		expectContains(t, "stdout", r.stdout,
			fmt.Sprintf("ftevent: rank %d heard rank %d end: PROC TERMINATED exit 3\n", i, victim))
	}
}

// TestQueryInfo: a rank's and a tool's PMIx_Query_info for the job.
func TestQueryInfo(t *testing.T) {
	t.Parallel()
	dir, q := pmixProg(t, "query.c")
	r := run(t, opts{args: []string{"--pset", "alpha", "-n", "2", q, "client", ":", "--pset", "beta", "-n", "1", q, "client"},
		dir: dir})
	expectCode(t, r, 0)
	ns := fmt.Sprintf("prun.%d.1", r.pid)
	host, _ := os.Hostname()
	expectQueries(t, r.stdout, ns, []string{ns},
		fmt.Sprintf("3 procs: 0@%[1]s:PROC EXECUTING,1@%[1]s:PROC EXECUTING,2@%[1]s:PROC EXECUTING", host),
		fmt.Sprintf("3 procs: 0@%[1]s,1@%[1]s,2@%[1]s", host), "alpha,beta", "beta 1 procs: "+ns+":2")

	// query as a tool, by the URI --report-uri gives. (Debian's pquery
	// 4.2.2 cannot be the tool: it dies of SIGFPE in
	// pmix_init_registered_attrs before it connects to any server.)
	tmp := t.TempDir()
	uriFile, goFile := filepath.Join(tmp, "uri"), filepath.Join(tmp, "go")
	// One context names a process set: the other is one too, NSPACE.app1.
	wait := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done", goFile)
	p := startPrun(t, opts{args: []string{"--report-uri", uriFile, "--pset", "gamma", "-n", "1", "sh", "-c", wait,
		":", "-n", "1", "sh", "-c", wait}})
	p.waitRanks(2, "sh", 20*time.Second)
	uri := readURI(t, uriFile)
	ns = fmt.Sprintf("prun.%d.1", p.cmd.Process.Pid)
	out, err := exec.Command(filepath.Join(dir, q), "tool", uri, ns).CombinedOutput()
	if err != nil {
		t.Errorf("query tool: %v\n%s", err, out)
	}
	expectQueries(t, string(out), ns, []string{ns},
		fmt.Sprintf("2 procs: 0@%[1]s:PROC EXECUTING,1@%[1]s:PROC EXECUTING", host), fmt.Sprintf("2 procs: 0@%[1]s,1@%[1]s", host),
		"gamma,"+ns+".app1", ns+".app1 1 procs: "+ns+":1")
	os.WriteFile(goFile, nil, 0o644)
	expectCode(t, p.wait(), 0)
}

// TestQueryNoPsets: a job whose contexts name no process set has none (as
// under PRRTE): Open MPI 5 takes a missing PMIX_PSET_NAME for "no such set".
func TestQueryNoPsets(t *testing.T) {
	t.Parallel()
	dir, q := pmixProg(t, "query.c")
	r := run(t, opts{args: []string{"-n", "2", q, "client"}, dir: dir})
	expectCode(t, r, 0)
	for _, w := range []string{"query: numpsets 0\n", "query: psetnames \n", "query: psetmembers none\n"} {
		expectContains(t, "stdout", r.stdout, w)
	}
}

// expectQueries checks query.c's answers about nspace.
func expectQueries(t *testing.T, out, nspace string, namespaces []string, table, local, psets, members string) {
	t.Helper()
	want := []string{
		"query: namespaces " + strings.Join(namespaces, ","),
		"query: jobstatus RUNNING",
		"query: proctable " + table,
		"query: localproctable " + local,
		fmt.Sprintf("query: numpsets %d", strings.Count(psets, ",")+1),
		"query: psetnames " + psets,
		"query: psetmembers " + members,
		"query: memory daemon>0 clients>0",
	}
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("want %q in\n%s", w, out)
		}
	}
}

// waitURI waits (30 s at most) for a whole line in file, a server's URI
// that prun or one of its ranks writes, and returns it; prun is ended if
// none comes.
func waitURI(t *testing.T, p *proc, file string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			p.signal(syscall.SIGTERM)
			t.Fatalf("no URI in %s\n%s", file, p.wait())
		}
	}
}

func readURI(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestPMIxEventsMultiNode runs the items of this file across the test
// hosts.
func TestPMIxEventsMultiNode(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}

	t.Run("jobend-spawn", m.testEventsJobendSpawn)
	t.Run("jobend-tools", m.testEventsJobendTools)
	t.Run("tool-at-launcher", m.testEventsToolAtLauncher)
	t.Run("procterminated", m.testEventsProcterminated)
	t.Run("query", m.testEventsQuery)
}

// The spawner on the first host, its children on the second.
func (m *mn) testEventsJobendSpawn(t *testing.T) {
	bin := ctest.Build(t, ctest.PMIx, "jobend.c")
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "1", bin, "spawn", "2", m.hosts[1]}})
	expectCode(t, r, 0)
	if !parentHeard.MatchString(r.stdout) {
		t.Errorf("the spawner did not hear its child's end:\n%s", r)
	}
}

// Tools attached to the daemons of the first and the third host
// (PRRTE #2568: a tool of a non-master daemon never heard its job end;
// the launcher's own server, which runs no rank here, has none) both
// hear the user's job end. Each rank writes its server's URI.
func (m *mn) testEventsJobendTools(t *testing.T) {
	bin := ctest.Build(t, ctest.PMIx, "jobend.c")
	dir := t.TempDir()
	goFiles := []string{filepath.Join(dir, "go.0"), filepath.Join(dir, "go.1")}
	p := startPrun(t, opts{env: m.env(), args: []string{"--hostfile", m.hostfile,
		"--map-by", "node", "-n", "4", "sh", "-c",
		fmt.Sprintf(`echo "$PMIX_SERVER_URI41" > %s/rank.$PRUN_RANK.tmp && mv %[1]s/rank.$PRUN_RANK.tmp %[1]s/rank.$PRUN_RANK.uri; while [ ! -e %s ] || [ ! -e %s ]; do sleep 0.1; done`,
			dir, goFiles[0], goFiles[1])}})
	nspace := fmt.Sprintf("prun.%d.1", p.cmd.Process.Pid)
	var tools []*exec.Cmd
	for i, rank := range []int{0, 2} { // --map-by node: rank 2 on the third host
		uriFile := filepath.Join(dir, fmt.Sprintf("rank.%d.uri", rank))
		tools = append(tools, m.c.InNetns(m.hosts[rank], bin, "tool", waitURI(t, p, uriFile), nspace, goFiles[i]))
	}
	outs := make([]chan string, len(tools))
	for i, tool := range tools {
		outs[i] = make(chan string, 1)
		go func() {
			out, err := tool.CombinedOutput()
			outs[i] <- fmt.Sprintf("%s(err %v)", out, err)
		}()
	}
	r := p.wait()
	expectCode(t, r, 0)
	want := fmt.Sprintf("jobend: tool heard %s end: status 0 exit 0\n", nspace)
	for i := range tools {
		if out := <-outs[i]; !strings.Contains(out, want) {
			t.Errorf("tool on %s: %s\nwant %q", m.hosts[[]int{0, 2}[i]], out, want)
		}
	}
	m.checkClean(t, 10*time.Second)
}

// A tool at the launcher's node, where no rank runs: --report-uri
// starts a daemon there for it, which answers its queries about the
// job's ranks on the hosts and tells it the job ended.
func (m *mn) testEventsToolAtLauncher(t *testing.T) {
	bin := ctest.Build(t, ctest.PMIx, "jobend.c")
	dir, q := pmixProg(t, "query.c")
	tmp := t.TempDir() // not dir: the compiled clients' cache outlives the test
	uriFile, goFile := filepath.Join(tmp, "uri"), filepath.Join(tmp, "go")
	p := startPrun(t, opts{env: m.env(), args: []string{"--hostfile", m.hostfile, "--map-by", "node",
		"--report-uri", uriFile, "-n", "4", "sh", "-c", fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done", goFile)}})
	uri := waitURI(t, p, uriFile)
	nspace := fmt.Sprintf("prun.%d.1", p.cmd.Process.Pid)
	h := m.hosts
	want := fmt.Sprintf("query: proctable 4 procs: 0@%s:PROC EXECUTING,1@%s:PROC EXECUTING,2@%s:PROC EXECUTING,3@%s:PROC EXECUTING\n",
		h[0], h[1], h[2], h[3])
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err := exec.Command(filepath.Join(dir, q), "tool", uri, nspace).CombinedOutput()
		if strings.Contains(string(out), want) {
			break
		}
		if time.Now().After(deadline) { // the ranks start on the hosts meanwhile
			os.WriteFile(goFile, nil, 0o644)
			t.Fatalf("query tool at the launcher's node: %v\n%s\nwant %q\n%s", err, out, want, p.wait())
		}
	}
	tool := exec.Command(bin, "tool", uri, nspace, goFile)
	toolOut := make(chan string, 1)
	go func() {
		out, err := tool.CombinedOutput()
		toolOut <- fmt.Sprintf("%s(err %v)", out, err)
	}()
	r := p.wait()
	expectCode(t, r, 0)
	if out := <-toolOut; !strings.Contains(out, fmt.Sprintf("jobend: tool heard %s end: status 0 exit 0\n", nspace)) {
		t.Errorf("job-end tool at the launcher's node: %s", out)
	}
}

func (m *mn) testEventsProcterminated(t *testing.T) {
	dir, ft := pmixProg(t, "ftevent.c")
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node", "--enable-recovery",
		"-n", "8", ft, "5"}, dir: dir})
	expectProcTerminated(t, r, 8, 5)
}

func (m *mn) testEventsQuery(t *testing.T) {
	dir, q := pmixProg(t, "query.c")
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "--map-by", "node",
		"--pset", "alpha", "-n", "2", q, "client", ":", "--pset", "beta", "-n", "2", q, "client"}, dir: dir})
	expectCode(t, r, 0)
	ns := fmt.Sprintf("prun.%d.1", r.pid)
	h := m.hosts
	expectQueries(t, r.stdout, ns, []string{ns},
		fmt.Sprintf("4 procs: 0@%s:PROC EXECUTING,1@%s:PROC EXECUTING,2@%s:PROC EXECUTING,3@%s:PROC EXECUTING", h[0], h[1], h[2], h[3]),
		"1 procs: 0@"+h[0], "alpha,beta", fmt.Sprintf("beta 2 procs: %[1]s:2,%[1]s:3", ns))
}
