package cluster

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// clusterTest is TestCluster's cluster, shared by its subtests.
type clusterTest struct {
	c     *Cluster
	hosts []string
}

func TestCluster(t *testing.T) {
	const n = 4
	c := Start(t, n)
	hosts := c.Hosts()
	if len(hosts) != n {
		t.Fatalf("Hosts() = %v, want %d hosts", hosts, n)
	}
	x := &clusterTest{c: c, hosts: hosts}

	t.Run("Hostname", x.testHostname)
	t.Run("Reach", x.testReach)
	t.Run("SharedFilesystem", x.testSharedFilesystem)
	t.Run("Auth", x.testAuth)
	t.Run("ParallelSessions", x.testParallelSessions)
	t.Run("UpAgain", x.testUpAgain)
	t.Run("Down", x.testDown)
}

func (x *clusterTest) testHostname(t *testing.T) {
	eachHost(t, x.hosts, func(h string) error {
		out, err := x.c.Run(h, "hostname")
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(out); got != h {
			return fmt.Errorf("ssh %s hostname = %q, want %q", h, got, h)
		}
		b, err := x.c.Exec(h, "hostname").Output()
		if got := strings.TrimSpace(string(b)); err != nil || got != h {
			return fmt.Errorf("Exec(%s, hostname) = %q, %v; want %q", h, got, err, h)
		}
		b, err = x.c.InNetns(h, "cat", "/proc/net/fib_trie").Output()
		if err != nil || !bytes.Contains(b, []byte(x.c.Addr(h))) {
			return fmt.Errorf("InNetns(%s): address %s not in its namespace (%v)", h, x.c.Addr(h), err)
		}
		return nil
	})
}

func (x *clusterTest) testReach(t *testing.T) {
	// The launcher's side: a listener on the bridge address, reached by
	// name from every host.
	ln, err := net.Listen("tcp", LauncherAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("launcher\n"))
			conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	eachHost(t, x.hosts, func(h string) error {
		next := x.hosts[(x.c.index(h))%len(x.hosts)]
		// Host to host over ssh, by name (the hosts' /etc/hosts).
		out, err := x.c.Run(h, fmt.Sprintf("ssh -F %s %s hostname", x.c.SSHConfig(), next))
		if err != nil || strings.TrimSpace(out) != next {
			return fmt.Errorf("%s -> ssh %s hostname = %q, %v", h, next, out, err)
		}
		// Host to host and host to launcher, plain TCP, by name.
		script := fmt.Sprintf(`exec 3<>/dev/tcp/%s/22 && head -c 4 <&3 && echo && exec 4<>/dev/tcp/prun-launcher/%d && cat <&4`, next, port)
		out, err = x.c.Run(h, "bash -c '"+script+"'")
		if want := "SSH-\nlauncher\n"; err != nil || out != want {
			return fmt.Errorf("%s: tcp to %s:22 and prun-launcher:%d = %q, %v; want %q", h, next, port, out, err, want)
		}
		return nil
	})
}

func (x *clusterTest) testSharedFilesystem(t *testing.T) {
	f, err := os.CreateTemp("/tmp", "prun-cluster-shared-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	want := fmt.Sprintf("written by pid %d at %d\n", os.Getpid(), time.Now().UnixNano())
	f.WriteString(want)
	f.Close()
	eachHost(t, x.hosts, func(h string) error {
		if out, err := x.c.Run(h, "cat "+f.Name()); err != nil || out != want {
			return fmt.Errorf("%s: cat %s = %q, %v; want %q", h, f.Name(), out, err, want)
		}
		return nil
	})
}

func (x *clusterTest) testAuth(t *testing.T) {
	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", wrong).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	empty := filepath.Join(dir, "empty_known_hosts")
	os.WriteFile(empty, nil, 0o600)
	h := x.hosts[len(x.hosts)-1]
	// Everything explicit (-F /dev/null): only the key or known_hosts varies.
	ssh := func(key, knownHosts string) (string, error) {
		cmd := exec.Command("ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
			"-o", "IdentityAgent=none", "-o", "ConnectTimeout=5", "-o", "StrictHostKeyChecking=yes",
			"-o", "GlobalKnownHostsFile=/dev/null", "-o", "UserKnownHostsFile="+knownHosts,
			"-i", key, "root@"+x.c.Addr(h), "true")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	known := filepath.Join(x.c.Dir(), "known_hosts")
	if out, err := ssh(filepath.Join(x.c.Dir(), "id_ed25519"), known); err != nil {
		t.Errorf("the cluster's key is refused by %s: %v: %s", h, err, out)
	}
	out, err := ssh(wrong, known)
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("a wrong key: err = %v, output %q; want Permission denied", err, out)
	}
	out, err = ssh(filepath.Join(x.c.Dir(), "id_ed25519"), empty)
	if err == nil || !strings.Contains(out, "Host key verification failed") {
		t.Errorf("an unknown host key: err = %v, output %q; want Host key verification failed", err, out)
	}
}

func (x *clusterTest) testParallelSessions(t *testing.T) {
	// prun will open many sessions at once; sshd's MaxStartups is raised.
	const per = 3
	var wg sync.WaitGroup
	errs := make(chan error, per*len(x.hosts))
	for i := 0; i < per; i++ {
		for _, h := range x.hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if out, err := x.c.Run(h, "hostname"); err != nil || strings.TrimSpace(out) != h {
					errs <- fmt.Errorf("%s: %q, %v", h, out, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (x *clusterTest) testUpAgain(t *testing.T) {
	// up is idempotent: a second one rebuilds the same hosts with the same keys.
	if out, err := x.c.sh("up", strconv.Itoa(len(x.hosts)), x.c.Dir()); err != nil {
		t.Fatalf("second cluster.sh up: %v: %s", err, out)
	}
	h := x.hosts[len(x.hosts)-1]
	if out, err := x.c.Run(h, "hostname"); err != nil || strings.TrimSpace(out) != h {
		t.Errorf("after a second up, %s hostname = %q, %v", h, out, err)
	}
}

func (x *clusterTest) testDown(t *testing.T) {
	// Remember what to look for: the namespaces' identities.
	netns := map[uint64]string{}
	for _, h := range x.hosts {
		var st syscall.Stat_t
		if err := syscall.Stat("/run/netns/"+h, &st); err != nil {
			t.Fatalf("stat /run/netns/%s: %v", h, err)
		}
		netns[st.Ino] = h
	}
	if len(processesIn(netns, x.c.Dir())) == 0 {
		t.Fatalf("no process found in the hosts' namespaces before down")
	}
	if err := x.c.down(); err != nil { // keeps the lock: nobody else builds hosts meanwhile
		t.Fatal(err)
	}
	checkNothingLeft(t, netns, x.c.Dir())

	// A partial up (a namespace, a veth, a hosts file, no sshd) goes too,
	// and down is safe to run twice.
	for _, args := range [][]string{
		{"netns", "add", Prefix + "9"},
		{"link", "add", "prunv9", "type", "veth", "peer", "name", "eth0", "netns", Prefix + "9"},
		{"link", "add", "prunv10", "type", "veth", "peer", "name", "prunx10"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	os.MkdirAll("/etc/netns/"+Prefix+"9", 0o755)
	os.WriteFile("/etc/netns/"+Prefix+"9/hosts", []byte("198.18.0.9 prun-h9\n"), 0o644)
	for i := 0; i < 2; i++ {
		if err := x.c.down(); err != nil {
			t.Fatalf("down #%d after a partial up: %v", i+1, err)
		}
		checkNothingLeft(t, netns, x.c.Dir())
	}
}

// eachHost runs f for every host at once and reports its errors.
func eachHost(t *testing.T, hosts []string, f func(h string) error) {
	t.Helper()
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(h)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// checkNothingLeft fails t if a namespace, link, /etc/netns entry or live
// process of the cluster remains.
func checkNothingLeft(t *testing.T, netns map[uint64]string, dir string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, Prefix) {
			t.Errorf("namespace left: %s", l)
		}
	}
	out, err = exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatalf("ip link show: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.SplitN(l, ": ", 3); len(f) == 3 && (strings.HasPrefix(f[1], "prunv") || strings.HasPrefix(f[1], "prunbr")) {
			t.Errorf("link left: %s", f[1])
		}
	}
	if m, _ := filepath.Glob("/etc/netns/" + Prefix + "*"); len(m) > 0 {
		t.Errorf("/etc/netns entries left: %v", m)
	}
	if ps := processesIn(netns, dir); len(ps) > 0 {
		t.Errorf("processes left: %s", strings.Join(ps, "; "))
	}
}

// processesIn lists the live (non-zombie) processes in one of the network
// namespaces (by inode) or whose command line mentions dir (the sshds).
func processesIn(netns map[uint64]string, dir string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		p := "/proc/" + e.Name()
		status, err := os.ReadFile(p + "/status")
		if err != nil || bytes.Contains(status, []byte("\nState:\tZ")) {
			continue
		}
		cmdline, _ := os.ReadFile(p + "/cmdline")
		cmd := strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		var st syscall.Stat_t
		if syscall.Stat(p+"/ns/net", &st) == nil {
			if h, ok := netns[st.Ino]; ok {
				found = append(found, fmt.Sprintf("pid %d in %s: %s", pid, h, cmd))
				continue
			}
		}
		if strings.Contains(cmd, dir+"/") {
			found = append(found, fmt.Sprintf("pid %d: %s", pid, cmd))
		}
	}
	return found
}
