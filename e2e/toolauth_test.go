package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// The tests of this file attack a running job of root's as another local
// user (nobody, a real process under setpriv), knowing only what ps and ss
// show anyone: the pid of the launcher or of a node's daemon, its host name
// and the loopback port its PMIx server listens on. From them come the
// server's URI ("prun-HOST-PID.0;tcp4://127.0.0.1:PORT"), and the job's
// namespace ("prun.PID.1"): not from the session directory, which is
// root's alone.

// nobodyUID is the uid the attacker runs as.
const nobodyUID = "65534"

// asNobody prefixes a command line with what runs it as nobody.
func asNobody(args ...string) []string {
	return append([]string{"setpriv", "--reuid=" + nobodyUID, "--regid=" + nobodyUID, "--clear-groups"}, args...)
}

// strangerDir is a directory nobody can read and search (t.TempDir's are
// 0700), holding a copy of the attacker's program; GO, created there by
// the test (root's), lets the job's ranks finish.
func strangerDir(t *testing.T) (dir, attacker string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "prun-toolauth-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	attacker = filepath.Join(dir, "pmixattack")
	copyFile(t, ctest.Build(t, ctest.PMIx, "pmixattack.c"), attacker)
	return dir, attacker
}

// pmixPort finds the loopback port a process listens on, in ss's output
// (`ss -ltnpH`, run where the process runs).
func pmixPort(t *testing.T, ss []byte, pid int) string {
	t.Helper()
	for _, l := range strings.Split(string(ss), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || !strings.Contains(l, fmt.Sprintf("pid=%d,", pid)) {
			continue
		}
		if host, port, err := net.SplitHostPort(f[3]); err == nil && host == "127.0.0.1" {
			return port
		}
	}
	t.Fatalf("pid %d listens on no loopback port:\n%s", pid, ss)
	return ""
}

// waitJob is a job of root's whose ranks say they are up, then wait for
// dir/GO and say they are done.
func waitJob(dir string) string {
	return `echo "rank $PRUN_RANK up"; while [ ! -e ` + dir + `/GO ]; do sleep 0.1; done; echo "rank $PRUN_RANK done on $(hostname)"`
}

// attack runs every attempt of pmixattack as nobody through run (which
// runs a command line where the server is) and checks that each was
// refused: as a tool (init, query, events, log, spawn, job control), and as
// a rank of the job that claims root's uid (PMIx_Init with the rank's
// environment: libpmix takes the uid a TCP peer claims).
func attack(t *testing.T, run func(args ...string) ([]byte, error), attacker, uri, nspace, marker string) {
	t.Helper()
	tries := [][]string{
		asNobody(attacker, "tool", uri, nspace, marker),
		append([]string{"env", "PMIXATTACK_UID=0", "PMIXATTACK_GID=0"}, asNobody(attacker, "tool", uri, nspace, marker)...),
		append([]string{"env", "PMIXATTACK_UID=0", "PMIXATTACK_GID=0"}, asNobody(attacker, "client", uri, nspace, "0")...),
	}
	for _, args := range tries {
		out, err := run(args...)
		if err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
			continue
		}
		steps := 0
		for _, l := range lines(string(out)) {
			if strings.HasSuffix(l, ": ok") || strings.HasPrefix(l, "pmixattack: namespaces") || strings.Contains(l, "stuck") {
				t.Errorf("%s: a stranger got through: %q\n%s", strings.Join(args, " "), l, out)
			}
			if strings.Contains(l, ": refused (") {
				steps++
			}
		}
		if want := map[string]int{"tool": 7, "client": 3}[args[len(args)-4]]; steps != want {
			t.Errorf("%s: %d steps refused, want %d\n%s", strings.Join(args, " "), steps, want, out)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the stranger's spawn ran (%s exists)", marker)
	}
}

// checkUnharmed: the job ended normally, with its output, and the
// stranger's attempts left one line: the refusal of the first of them,
// naming where it came from.
func checkUnharmed(t *testing.T, r *result, ranks int, node string) {
	t.Helper()
	expectCode(t, r, 0)
	for i := range ranks {
		expectContains(t, "stdout", r.stdout, fmt.Sprintf("rank %d done on ", i))
	}
	refusals := 0
	for _, l := range lines(r.stderr) {
		if strings.HasPrefix(l, "prun: "+node+": refused a PMIx connection from 127.0.0.1:") &&
			strings.Contains(l, "(uid "+nobodyUID+")") {
			refusals++
		} else {
			t.Errorf("stderr line %q", l)
		}
	}
	if refusals != 1 {
		t.Errorf("%d refusal lines on stderr, want 1\n%s", refusals, r)
	}
	if strings.Contains(r.stdout+r.stderr, "stranger") {
		t.Errorf("the stranger's log reached prun's output\n%s", r)
	}
}

// TestToolAuth: another user can do nothing to root's job through the
// launcher's own PMIx server; root's own tools still attach.
func TestToolAuth(t *testing.T) {
	t.Parallel()
	dir, attacker := strangerDir(t)
	p := startPrun(t, opts{args: []string{"-n", "2", "sh", "-c", waitJob(dir)}})
	p.waitOutput(20*time.Second, "rank 0 up", "rank 1 up")
	pid := p.cmd.Process.Pid
	ss, err := exec.Command("ss", "-ltnpH").Output()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	uri := fmt.Sprintf("prun-%s-%d.0;tcp4://127.0.0.1:%s", host, pid, pmixPort(t, ss, pid))
	nspace := fmt.Sprintf("prun.%d.1", pid)
	attack(t, func(args ...string) ([]byte, error) { return exec.Command(args[0], args[1:]...).CombinedOutput() },
		attacker, uri, nspace, filepath.Join(dir, "spawned"))

	// The owner's tool, by the same URI.
	tool := ctest.Build(t, ctest.PMIx, "pmixtool.c")
	if out, err := exec.Command(tool, uri).CombinedOutput(); err != nil || string(out) != "pmixtool: namespaces "+nspace+"\n" {
		t.Errorf("root's pmixtool: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	checkUnharmed(t, p.wait(), 2, host)
}

// TestToolAuthMultiNode: the same against a remote daemon's server, the
// attacker on that host; and the control plane's listeners (the
// launcher's and a daemon's with a child) are bound to the addresses they
// advertise, never to every address of their machine.
func TestToolAuthMultiNode(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	dir, attacker := strangerDir(t)
	// --launch-fanout 1: a chain, so that the daemons listen for a child too.
	p := startPrun(t, opts{args: []string{"--launch-fanout", "1", "--hostfile", m.hostfile, "--map-by", "node", "-n", "4",
		"sh", "-c", waitJob(dir)}, env: m.env()})
	p.waitOutput(60*time.Second, "rank 0 up", "rank 1 up", "rank 2 up", "rank 3 up")

	// Every listener of prun's but libpmix's loopback one: bound to an
	// address of the machine's that is not loopback, not to a wildcard;
	// on a test host, to its cluster address.
	own := map[string]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			own[ipn.IP.String()] = true
		}
	}
	check := func(where string, ss []byte, pid int, want func(ip string) bool) {
		n := 0
		for _, l := range strings.Split(string(ss), "\n") {
			f := strings.Fields(l)
			if len(f) < 6 || !strings.Contains(l, fmt.Sprintf("pid=%d,", pid)) {
				continue
			}
			host, _, _ := net.SplitHostPort(f[3])
			if host == "127.0.0.1" {
				continue
			}
			n++
			if !want(host) {
				t.Errorf("%s: prun listens on %s", where, f[3])
			}
		}
		if n == 0 {
			t.Errorf("%s: no control listener of prun's found:\n%s", where, ss)
		}
	}
	ssHere, err := exec.Command("ss", "-ltnpH").Output()
	if err != nil {
		t.Fatal(err)
	}
	check("the launcher", ssHere, p.cmd.Process.Pid, func(ip string) bool {
		a := net.ParseIP(ip)
		return a != nil && !a.IsUnspecified() && !a.IsLoopback() && own[a.String()]
	})
	// ... among them the address the test hosts reach it by.
	if !strings.Contains(string(ssHere), cluster.LauncherAddr+":") {
		t.Errorf("the launcher does not listen on %s:\n%s", cluster.LauncherAddr, ssHere)
	}
	for _, h := range m.hosts[:len(m.hosts)-1] { // the last of the chain has no child
		ss, err := c.InNetns(h, "ss", "-ltnpH").Output()
		if err != nil {
			t.Fatal(err)
		}
		check(h, ss, m.daemonPid(t, h), func(ip string) bool { return ip == c.Addr(h) })
	}

	h := m.hosts[1]
	daemon := m.daemonPid(t, h)
	ss, err := c.InNetns(h, "ss", "-ltnpH").Output()
	if err != nil {
		t.Fatal(err)
	}
	uri := fmt.Sprintf("prun-%s-%d.0;tcp4://127.0.0.1:%s", h, daemon, pmixPort(t, ss, daemon))
	nspace := fmt.Sprintf("prun.%d.1", p.cmd.Process.Pid)
	attack(t, func(args ...string) ([]byte, error) { return c.InNetns(h, args...).CombinedOutput() },
		attacker, uri, nspace, filepath.Join(dir, "spawned"))
	tool := ctest.Build(t, ctest.PMIx, "pmixtool.c")
	if out, err := c.InNetns(h, tool, uri).CombinedOutput(); err != nil || string(out) != "pmixtool: namespaces "+nspace+"\n" {
		t.Errorf("root's pmixtool on %s: %v\n%s", h, err, out)
	}

	if err := os.WriteFile(filepath.Join(dir, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := p.wait()
	m.checkClean(t, 10*time.Second)
	checkUnharmed(t, r, 4, h)
	var hostsDone []string
	for _, l := range lines(r.stdout) {
		if i := strings.Index(l, " done on "); i >= 0 {
			hostsDone = append(hostsDone, l[i+len(" done on "):])
		}
	}
	sort.Strings(hostsDone)
	if strings.Join(hostsDone, ",") != strings.Join(m.hosts, ",") {
		t.Errorf("ranks done on %q, want one on each of %q", hostsDone, m.hosts)
	}
}

// TestPMIPortStranger: with -pmi-port, another user's junk that claims a
// rank is refused unread and reported once, naming the connection (address
// and uid), not the rank it claimed; the real rank still connects and the
// job ends well. Junk of the job's own user names the connection too.
func TestPMIPortStranger(t *testing.T) {
	t.Parallel()
	dir, _ := strangerDir(t)
	bin := ctest.Build(t, ctest.Plain, "pmi2kvs.c")
	p := startPrun(t, opts{args: []string{"-pmi-port", "-n", "2", "sh", "-c",
		`echo "rank $PMI_ID up port ${PMI_PORT##*:}"; while [ ! -e ` + dir + `/GO ]; do sleep 0.1; done; exec ` + bin}})
	p.waitOutput(20*time.Second, "rank 0 up", "rank 1 up")
	var port string
	for _, l := range lines(p.stdout.String()) {
		if _, after, ok := strings.Cut(l, " up port "); ok {
			port = after
		}
	}
	send := func(args []string, junk string) {
		t.Helper()
		// The server may close a stranger's connection before the junk is
		// written: no SIGPIPE death for that.
		script := `trap "" PIPE; exec 3<>/dev/tcp/127.0.0.1/` + port + `; printf '` + junk + `' >&3 2>/dev/null; timeout 3 cat <&3 >/dev/null 2>&1; exit 0`
		if out, err := exec.Command(args[0], append(args[1:], "bash", "-c", script)...).CombinedOutput(); err != nil {
			t.Errorf("%q: %v\n%s", args, err, out)
		}
	}
	send(asNobody(), `cmd=initack pmiid=0\ncmd=junk\n`)
	send(asNobody(), `cmd=initack pmiid=1\n`) // again: not shown
	send([]string{"env"}, `hello\n`)
	if err := os.WriteFile(filepath.Join(dir, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := p.wait()
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "pmi2kvs: rank 0 ok\n")
	expectContains(t, "stdout", r.stdout, "pmi2kvs: rank 1 ok\n")
	host, _ := os.Hostname()
	ls := lines(r.stderr)
	if len(ls) != 2 ||
		!strings.HasPrefix(ls[0], "prun: "+host+": refused a PMI port connection from 127.0.0.1:") || !strings.Contains(ls[0], "(uid "+nobodyUID+")") ||
		!strings.HasPrefix(ls[1], "prun: "+host+": PMI protocol error: PMI port connection from 127.0.0.1:") || !strings.Contains(ls[1], "(uid 0)") {
		t.Errorf("stderr %q: want the stranger's refusal, then the owner's junk, each naming its connection", ls)
	}
	if strings.Contains(r.stderr, "rank 0") || strings.Contains(r.stderr, "rank 1") {
		t.Errorf("a rank blamed: %q", r.stderr)
	}
}
