package rsh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"prun/internal/cluster"
	"prun/internal/shellwords"
	"prun/rsh/sshclient"
)

// TestMain runs the built-in client's process (prun-ssh) from this test
// binary: rsh starts the binary again with PRUN_RSH_TEST_HELPER set.
func TestMain(m *testing.M) {
	if os.Getenv("PRUN_RSH_TEST_HELPER") == "1" {
		os.Exit(sshclient.Main())
	}
	helperCommand = func() (string, []string, error) {
		exe, err := os.Executable()
		return exe, []string{"PRUN_RSH_TEST_HELPER=1"}, err
	}
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// sshCluster is TestSSH's cluster, shared by its subtests.
type sshCluster struct {
	c    *cluster.Cluster
	ctx  context.Context
	opts Options // the cluster's home
	dir  string  // the cluster's directory: keys, known hosts
}

// home makes a home directory whose ~/.ssh/config is config.
func (x *sshCluster) home(t *testing.T, config string) string {
	h := t.TempDir()
	if err := os.MkdirAll(filepath.Join(h, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h, ".ssh", "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// hostConfig is a Host block for a cluster host with the given extra
// lines; known hosts file, key and agent as the cluster's unless given.
func (x *sshCluster) hostConfig(host string, extra ...string) string {
	lines := append([]string{"Host " + host}, extra...)
	has := func(key string) bool {
		for _, l := range extra {
			if strings.HasPrefix(strings.ToLower(l), strings.ToLower(key)+" ") {
				return true
			}
		}
		return false
	}
	for _, kv := range [][2]string{
		{"HostName", x.c.Addr(host)},
		{"User", "root"},
		{"IdentityFile", filepath.Join(x.dir, "id_ed25519")},
		{"IdentityAgent", "none"},
		{"UserKnownHostsFile", filepath.Join(x.dir, "known_hosts")},
		{"GlobalKnownHostsFile", "/dev/null"},
		{"StrictHostKeyChecking", "yes"},
	} {
		if !has(kv[0]) {
			lines = append(lines, kv[0]+" "+kv[1])
		}
	}
	return strings.Join(lines, "\n  ") + "\n"
}

// hostKey is host's public host key, "type base64".
func (x *sshCluster) hostKey(t *testing.T, host string) string {
	b, err := os.ReadFile(filepath.Join(x.dir, host, "ssh_host_ed25519_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b))[:2], " ")
}

// oneLineErr checks that err is one line starting with prefix and saying
// each of contains.
func oneLineErr(t *testing.T, err error, prefix string, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one starting with %q", prefix)
	}
	msg := err.Error()
	t.Logf("error: %s", msg)
	if !strings.HasPrefix(msg, prefix) || strings.Contains(msg, "\n") {
		t.Errorf("error %q: want one line starting with %q", msg, prefix)
	}
	for _, s := range contains {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not say %q", msg, s)
		}
	}
}

// run starts argv on host and returns its output and status.
func (x *sshCluster) run(t *testing.T, host string, argv []string, o Options) (string, int, *Session) {
	t.Helper()
	s, err := Start(x.ctx, host, argv, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	out, err := io.ReadAll(s.Stdout())
	if err != nil {
		t.Fatalf("reading stdout: %v", err)
	}
	status, err := s.Wait()
	if err != nil {
		t.Fatalf("Wait: %d, %v", status, err)
	}
	return string(out), status, s
}

// waitExit reports whether s ends within d.
func waitExit(s *Session, d time.Duration) bool {
	done := make(chan struct{})
	go func() { s.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestSSH runs every test that needs hosts on one cluster: there is one
// cluster at a time on the machine, and building it costs a second.
func TestSSH(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("the test cluster needs root (make test runs as root)")
	}
	c := cluster.Start(t, 2)
	x := &sshCluster{c: c, ctx: context.Background(), opts: Options{Home: c.Home()}, dir: c.Dir()}

	t.Run("Hostname", x.testHostname)
	t.Run("Quoting", x.testQuoting)
	t.Run("StdinStaysOpen", x.testStdinStaysOpen)
	t.Run("ExitStatusAndStderr", x.testExitStatusAndStderr)
	t.Run("StderrTail", x.testStderrTail)
	t.Run("UnknownHostKey", x.testUnknownHostKey)
	t.Run("AcceptNew", x.testAcceptNew)
	t.Run("HostKeyMismatch", x.testHostKeyMismatch)
	t.Run("AuthFailed", x.testAuthFailed)
	t.Run("Agent", x.testAgent)
	t.Run("Unreachable", x.testUnreachable)
	t.Run("ProxyJump", x.testProxyJump)
	t.Run("Close", x.testClose)
	t.Run("ExternalCommand", x.testExternalCommand)
	t.Run("Concurrent", x.testConcurrent)
	t.Run("BadConfig", x.testBadConfig)

	// Last: it takes prun-h2 off the network.
	t.Run("Keepalive", x.testKeepalive)
}

func (x *sshCluster) testHostname(t *testing.T) {
	for _, h := range x.c.Hosts() {
		out, status, s := x.run(t, h, []string{"hostname"}, x.opts)
		if out != h+"\n" || status != 0 {
			t.Errorf("hostname on %s: %q, status %d", h, out, status)
		}
		if ip := s.LocalIP(); !ip.Equal(net.ParseIP(cluster.LauncherAddr)) {
			t.Errorf("LocalIP = %v, want %s", ip, cluster.LauncherAddr)
		}
	}
}

func (x *sshCluster) testQuoting(t *testing.T) {
	out, _, _ := x.run(t, "prun-h1", []string{"printf", "%s|", "a b", "it's", "", "$HOME", "*", `"\`}, x.opts)
	if want := `a b|it's||$HOME|*|"\|`; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func (x *sshCluster) testStdinStaysOpen(t *testing.T) {
	s, err := Start(x.ctx, "prun-h1", []string{"cat"}, []byte("hello\n"), x.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(s.Stdout(), buf); err != nil || string(buf) != "hello\n" {
		t.Fatalf("read %q, %v; want hello", buf, err)
	}
	if waitExit(s, 300*time.Millisecond) {
		t.Fatal("cat ended: its standard input was closed")
	}
	s.Close() // cat sees the end of its input
	if !waitExit(s, time.Second) {
		t.Fatal("Wait does not return after Close")
	}
	if status, err := s.Wait(); status != 0 || err != nil {
		t.Errorf("Wait after Close = %d, %v; want 0", status, err)
	}
	s.Close() // again: nothing
}

func (x *sshCluster) testExitStatusAndStderr(t *testing.T) {
	s, err := Start(x.ctx, "prun-h2", []string{"sh", "-c", "echo to-stderr >&2; echo out; exit 7"}, nil, x.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.DiscardStdout()
	status, err := s.Wait()
	if status != 7 || err != nil {
		t.Errorf("Wait = %d, %v; want 7", status, err)
	}
	if got := s.Stderr(); got != "to-stderr\n" {
		t.Errorf("Stderr = %q", got)
	}
	if _, status, _ := x.run(t, "prun-h2", []string{"sh", "-c", "kill -TERM $$"}, x.opts); status != 128+15 {
		t.Errorf("killed by SIGTERM: status %d, want 143", status)
	}
}

func (x *sshCluster) testStderrTail(t *testing.T) {
	_, _, s := x.run(t, "prun-h1", []string{"sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x >&2; echo END >&2"}, x.opts)
	got := s.Stderr()
	if len(got) != stderrMax || !strings.HasSuffix(got, "xxEND\n") {
		t.Errorf("Stderr: %d bytes ending %q; want the last %d", len(got), got[max(0, len(got)-10):], stderrMax)
	}
}

func (x *sshCluster) testUnknownHostKey(t *testing.T) {
	kh := filepath.Join(t.TempDir(), "known_hosts")
	h := x.home(t, x.hostConfig("prun-h1", "UserKnownHostsFile "+kh))
	_, err := Start(x.ctx, "prun-h1", []string{"true"}, nil, Options{Home: h})
	oneLineErr(t, err, "prun-h1: host key is not known (not in "+kh+"); add it, or set StrictHostKeyChecking accept-new")
}

func (x *sshCluster) testAcceptNew(t *testing.T) {
	kh := filepath.Join(t.TempDir(), "sub", "known_hosts")
	h := x.home(t, x.hostConfig("prun-h1", "UserKnownHostsFile "+kh, "StrictHostKeyChecking accept-new"))
	// Concurrent first connections add the host once.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if out, _, _ := x.run(t, "prun-h1", []string{"hostname"}, Options{Home: h}); out != "prun-h1\n" {
				t.Errorf("hostname: %q", out)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(kh); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", kh, fi.Mode().Perm())
	}
	key := strings.Fields(x.hostKey(t, "prun-h1"))[1]
	if strings.Count(string(b), key) != 1 || strings.Count(string(b), "\n") != 1 {
		t.Errorf("%s does not hold the key of prun-h1 once:\n%s", kh, b)
	}
	// Known now, with StrictHostKeyChecking yes.
	h2 := x.home(t, x.hostConfig("prun-h1", "UserKnownHostsFile "+kh))
	if out, _, _ := x.run(t, "prun-h1", []string{"hostname"}, Options{Home: h2}); out != "prun-h1\n" {
		t.Errorf("hostname: %q", out)
	}
}

func (x *sshCluster) testHostKeyMismatch(t *testing.T) {
	kh := filepath.Join(t.TempDir(), "known_hosts")
	content := "# comment\n198.18.0.1 " + x.hostKey(t, "prun-h2") + "\n"
	if err := os.WriteFile(kh, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, strict := range []string{"yes", "accept-new"} {
		h := x.home(t, x.hostConfig("prun-h1", "UserKnownHostsFile "+kh, "StrictHostKeyChecking "+strict))
		_, err := Start(x.ctx, "prun-h1", []string{"true"}, nil, Options{Home: h})
		oneLineErr(t, err, "prun-h1: host key mismatch for 198.18.0.1 in "+kh+" line 2")
	}
	// StrictHostKeyChecking no accepts anything.
	h := x.home(t, x.hostConfig("prun-h1", "UserKnownHostsFile "+kh, "StrictHostKeyChecking no"))
	if out, _, _ := x.run(t, "prun-h1", []string{"hostname"}, Options{Home: h}); out != "prun-h1\n" {
		t.Errorf("hostname: %q", out)
	}
}

func (x *sshCluster) testAuthFailed(t *testing.T) {
	td := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	wrong, enc := filepath.Join(td, "wrong"), filepath.Join(td, "encrypted")
	for file, pass := range map[string]string{wrong: "", enc: "secret"} {
		var blk *pem.Block
		if pass == "" {
			blk, err = ssh.MarshalPrivateKey(priv, "")
		} else {
			blk, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(pass))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := x.home(t, x.hostConfig("prun-h1", "IdentityFile "+wrong, "IdentityFile "+enc, "IdentityFile "+td+"/missing"))
	_, err = Start(x.ctx, "prun-h1", []string{"true"}, nil, Options{Home: h})
	oneLineErr(t, err, "prun-h1: authentication failed as root (tried: "+wrong+", "+enc+" (encrypted, skipped), "+td+"/missing (missing))")
}

func (x *sshCluster) testAgent(t *testing.T) {
	td := t.TempDir()
	sock := filepath.Join(td, "agent.sock")
	ag := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := ag.Start(); err != nil {
		t.Fatalf("ssh-agent (openssh-client, which make test installs): %v", err)
	}
	defer func() { ag.Process.Kill(); ag.Wait() }()
	for range 100 {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	add := exec.Command("ssh-add", filepath.Join(x.dir, "id_ed25519"))
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v: %s", err, out)
	}
	// No identity file: the agent's key only.
	h := x.home(t, x.hostConfig("prun-h1", "IdentityFile none", "IdentityAgent "+sock))
	if out, _, _ := x.run(t, "prun-h1", []string{"hostname"}, Options{Home: h}); out != "prun-h1\n" {
		t.Errorf("hostname: %q", out)
	}
	// IdentitiesOnly with another identity file: the agent's key is not
	// offered.
	other := filepath.Join(td, "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	h = x.home(t, x.hostConfig("prun-h1", "IdentityFile "+other, "IdentitiesOnly yes", "IdentityAgent "+sock))
	_, err := Start(x.ctx, "prun-h1", []string{"true"}, nil, Options{Home: h})
	oneLineErr(t, err, "prun-h1: authentication failed as root (tried: "+other+", ssh-agent (no key of the IdentityFiles, IdentitiesOnly yes))")
}

func (x *sshCluster) testUnreachable(t *testing.T) {
	h := x.home(t, "Host prun-h77\n  HostName 198.18.0.77\n  ConnectTimeout 1\n"+
		"Host prun-h78\n  HostName 198.18.0.78\n")
	start := time.Now()
	_, err := Start(x.ctx, "prun-h77", []string{"true"}, nil, Options{Home: h})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Start took %v with ConnectTimeout 1", d)
	}
	oneLineErr(t, err, "prun-h77: cannot connect to 198.18.0.77:22: ")
	// Options.ConnectTimeout when ssh_config has none.
	start = time.Now()
	_, err = Start(x.ctx, "prun-h78", []string{"true"}, nil, Options{Home: h, ConnectTimeout: 500 * time.Millisecond})
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("Start took %v with Options.ConnectTimeout 0.5 s", d)
	}
	oneLineErr(t, err, "prun-h78: cannot connect to 198.18.0.78:22: i/o timeout")
	// A context canceled meanwhile.
	cctx, cancel := context.WithTimeout(x.ctx, 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = Start(cctx, "prun-h77", []string{"true"}, nil, Options{Home: h})
	if d := time.Since(start); d > 700*time.Millisecond || err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline") {
		t.Errorf("Start with a 200 ms context: %v after %v", err, d)
	}
}

func (x *sshCluster) testProxyJump(t *testing.T) {
	h := x.home(t, x.hostConfig("prun-h2", "ProxyJump root@prun-h1:22")+x.hostConfig("prun-h1")+
		x.hostConfig("prun-bad", "HostName 198.18.0.2", "ProxyJump prun-h77")+
		"Host prun-h77\n  HostName 198.18.0.77\n  ConnectTimeout 1\n")
	out, _, s := x.run(t, "prun-h2", []string{"sh", "-c", `hostname; echo "${SSH_CONNECTION%% *}"`}, Options{Home: h})
	if out != "prun-h2\n198.18.0.1\n" {
		t.Errorf("through prun-h1: %q, want prun-h2 reached from 198.18.0.1", out)
	}
	if ip := s.LocalIP(); !ip.Equal(net.ParseIP(cluster.LauncherAddr)) {
		t.Errorf("LocalIP = %v, want %s", ip, cluster.LauncherAddr)
	}
	_, err := Start(x.ctx, "prun-bad", []string{"true"}, nil, Options{Home: h})
	oneLineErr(t, err, "prun-bad: jump host prun-h77: cannot connect to 198.18.0.77:22: ")
}

func (x *sshCluster) testClose(t *testing.T) {
	// Close ends a remote command that reads its standard input at
	// once (end of file: it exits by itself), and one that only writes
	// after the grace period (broken pipe), in both modes. A unique $0
	// marks the processes.
	type tc struct {
		mode, script, marker string
		ownExit              bool
		s                    *Session
	}
	var cases []*tc
	for _, mode := range []string{"", "ssh -F " + shellwords.Quote(x.c.SSHConfig())} {
		for i, script := range []string{"cat; echo bye", "while sleep 0.1; do echo tick; done"} {
			cases = append(cases, &tc{mode: mode, script: script, ownExit: i == 0,
				marker: fmt.Sprintf("prun-rsh-test-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), len(cases))})
		}
	}
	alive := func(marker string) bool { return exec.Command("pgrep", "-f", marker).Run() == nil }
	poll := func(marker string, want bool) bool {
		for range 100 {
			if alive(marker) == want {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false
	}
	for _, k := range cases {
		s, err := Start(x.ctx, "prun-h1", []string{"sh", "-c", k.script, k.marker}, nil, Options{Home: x.c.Home(), Command: k.mode})
		if err != nil {
			t.Fatal(err)
		}
		k.s = s
		defer s.Close()
		s.DiscardStdout()
	}
	for _, k := range cases {
		if !poll(k.marker, true) {
			t.Fatalf("%q %q: the remote command never showed up", k.mode, k.script)
		}
	}
	start := time.Now()
	for _, k := range cases {
		k.s.Close()
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Close took %v, want it to return at once", d)
	}
	for _, k := range cases {
		if !poll(k.marker, false) {
			exec.Command("pkill", "-f", k.marker).Run()
			t.Errorf("%q %q: the remote command is still alive after Close", k.mode, k.script)
		}
		status, err := k.s.Wait()
		if k.ownExit && (status != 0 || err != nil) {
			t.Errorf("%q %q: Wait after Close = %d, %v; want 0, as it ended by itself", k.mode, k.script, status, err)
		}
		if !k.ownExit {
			if status != -1 {
				t.Errorf("%q %q: Wait after Close = %d, %v; want -1", k.mode, k.script, status, err)
			}
			oneLineErr(t, err, "prun-h1: session closed: ")
		}
	}
	if d := time.Since(start); d > closeGrace+2*time.Second {
		t.Errorf("the sessions took %v to end after Close", d)
	}
}

func (x *sshCluster) testExternalCommand(t *testing.T) {
	o := Options{Command: "ssh -F " + shellwords.Quote(x.c.SSHConfig()) + " -o 'BatchMode yes'"}
	out, _, s := x.run(t, "prun-h2", []string{"printf", "%s|", "a b", "it's", "", "$HOME"}, o)
	if want := `a b|it's||$HOME|`; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
	if s.LocalIP() != nil {
		t.Errorf("LocalIP = %v, want nil", s.LocalIP())
	}

	s, err := Start(x.ctx, "prun-h2", []string{"sh", "-c", "echo err >&2; exit 3"}, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	s.DiscardStdout()
	if status, err := s.Wait(); status != 3 || err != nil {
		t.Errorf("Wait = %d, %v; want 3", status, err)
	}
	if s.Stderr() != "err\n" {
		t.Errorf("Stderr = %q", s.Stderr())
	}
	s.Close()

	s, err = Start(x.ctx, "prun-h2", []string{"cat"}, []byte("ping\n"), o)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s.Stdout(), buf); err != nil || string(buf) != "ping\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if waitExit(s, 300*time.Millisecond) {
		t.Fatal("cat ended: its standard input was closed")
	}
	s.Close()
	if status, err := s.Wait(); status != 0 || err != nil {
		t.Errorf("Wait after Close = %d, %v; want 0", status, err)
	}

	_, err = Start(x.ctx, "prun-h2", []string{"true"}, nil, Options{Command: "ssh 'unterminated"})
	oneLineErr(t, err, "prun-h2: bad remote shell command")
	_, err = Start(x.ctx, "prun-h2", []string{"true"}, nil, Options{Command: "/nonexistent/rsh -x"})
	oneLineErr(t, err, "prun-h2: cannot run /nonexistent/rsh: ")
}

func (x *sshCluster) testConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		host := x.c.Hosts()[i%2]
		wg.Go(func() {
			s, err := Start(x.ctx, host, []string{"hostname"}, nil, x.opts)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			out, _ := io.ReadAll(s.Stdout())
			if status, err := s.Wait(); string(out) != host+"\n" || status != 0 || err != nil {
				t.Errorf("%s: %q, %d, %v", host, out, status, err)
			}
		})
	}
	wg.Wait()
}

func (x *sshCluster) testBadConfig(t *testing.T) {
	h := x.home(t, "Host prun-h1\n  HostName 198.18.0.1\nMatch exec true\n  User x\n")
	_, err := Start(x.ctx, "prun-h1", []string{"true"}, nil, Options{Home: h})
	oneLineErr(t, err, "prun-h1: "+filepath.Join(h, ".ssh", "config")+": line 3: Match Exec is not supported")
	h = x.home(t, "Host prun-h1\n  Port eighty\n")
	_, err = Start(x.ctx, "prun-h1", []string{"true"}, nil, Options{Home: h})
	oneLineErr(t, err, "prun-h1: bad port")
	h = x.home(t, "Host prun-h1\n  ProxyCommand nc %h %p\n")
	_, err = Start(x.ctx, "prun-h1", []string{"true"}, nil, Options{Home: h})
	oneLineErr(t, err, "prun-h1: ProxyCommand")
	_, err = Start(x.ctx, "-oProxyCommand=x", []string{"true"}, nil, x.opts)
	oneLineErr(t, err, `"-oProxyCommand=x": bad host name`)
}

func (x *sshCluster) testKeepalive(t *testing.T) {
	h := x.home(t, x.hostConfig("prun-h2", "ServerAliveInterval 1", "ServerAliveCountMax 1"))
	s, err := Start(x.ctx, "prun-h2", []string{"cat"}, nil, Options{Home: h})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.DiscardStdout()
	if waitExit(s, 1300*time.Millisecond) { // after an answered keepalive
		t.Fatal("the session ended by itself")
	}
	if out, err := x.c.InNetns("prun-h2", "ip", "link", "set", "eth0", "down").CombinedOutput(); err != nil {
		t.Fatalf("link down: %v: %s", err, out)
	}
	defer x.c.InNetns("prun-h2", "ip", "link", "set", "eth0", "up").Run()
	start := time.Now()
	if !waitExit(s, 5*time.Second) {
		t.Fatal("Wait did not return 5 s after the host went away")
	}
	status, err := s.Wait()
	if status != -1 || err == nil || err.Error() != "prun-h2: connection lost (prun-h2 did not answer 1 keepalive requests)" {
		t.Errorf("Wait = %d, %v", status, err)
	}
	t.Logf("connection given up %v after the host went away", time.Since(start).Round(time.Millisecond))
}

// muteHome is a home whose ssh_config names host "mute": a server on this
// machine that accepts connections and says nothing. closed reports
// whether every connection it took was closed by the client.
// mute is a TCP server that accepts connections and never speaks.
type mute struct {
	mu       sync.Mutex
	open     int
	conns    []net.Conn
	accepted chan struct{} // one token per accepted connection
}

// closed: it had connections and all are closed by the client.
func (m *mute) closed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.conns) > 0 && m.open == 0
}

// waitAccepted waits for its next accepted connection.
func (m *mute) waitAccepted(t *testing.T) {
	t.Helper()
	select {
	case <-m.accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("prun-ssh did not connect within 10 s")
	}
}

func muteHome(t *testing.T, timeout string) (home, port string, m *mute) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	m = &mute{accepted: make(chan struct{}, 64)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			m.mu.Lock()
			m.open++
			m.conns = append(m.conns, c)
			m.mu.Unlock()
			m.accepted <- struct{}{}
			go func() {
				io.Copy(io.Discard, c) // until the client closes
				m.mu.Lock()
				m.open--
				m.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, c := range m.conns {
			c.Close()
		}
	})
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	home = t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	config := "Host mute\n  HostName 127.0.0.1\n  Port " + port + "\n  ConnectTimeout " + timeout + "\n"
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, port, m
}

// TestHandshakeTimeout: a server that accepts connections but says nothing.
func TestHandshakeTimeout(t *testing.T) {
	h, port, _ := muteHome(t, "1")
	start := time.Now()
	_, err := Start(context.Background(), "mute", []string{"true"}, nil, Options{Home: h})
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("Start took %v with ConnectTimeout 1", d)
	}
	if want := "mute: timed out after 1s in the SSH handshake with 127.0.0.1:" + port; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestStartCanceled: a start given up by its context ends at once, and
// prun-ssh lets go of its connection.
func TestStartCanceled(t *testing.T) {
	h, _, m := muteHome(t, "30")
	ctx, cancel := context.WithCancel(context.Background())
	var canceled time.Time
	go func() { // once connected, waiting for the banner
		select {
		case <-m.accepted:
		case <-time.After(10 * time.Second):
		}
		canceled = time.Now()
		cancel()
	}()
	_, err := Start(ctx, "mute", []string{"true"}, nil, Options{Home: h})
	if d := time.Since(canceled); d > time.Second {
		t.Errorf("Start took %v after its context ended", d)
	}
	if want := "mute: starting the command: context canceled"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !m.closed() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !m.closed() {
		t.Error("prun-ssh kept the connection of a canceled start")
	}
}

// TestHelperGone: when prun-ssh ends, what waits on it fails naming it and
// the host, and the next start runs a new one. Shutdown ends it and its
// connections.
func TestHelperGone(t *testing.T) {
	h, _, m := muteHome(t, "30")
	errc := make(chan error, 1)
	go func() {
		_, err := Start(context.Background(), "mute", []string{"true"}, nil, Options{Home: h})
		errc <- err
	}()
	hp := runningHelper(t, nil)
	m.waitAccepted(t) // connected, waiting for the server's banner
	hp.proc.Kill()
	select {
	case err := <-errc:
		if want := "mute: prun-ssh ended (signal: killed)"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %s", err, want)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Start still waits 2 s after prun-ssh was killed")
	}

	// A new one for the next start; Shutdown ends it, with its connection.
	go func() {
		_, err := Start(context.Background(), "mute", []string{"true"}, nil, Options{Home: h})
		errc <- err
	}()
	hp = runningHelper(t, hp) // not the killed one
	m.waitAccepted(t)
	Shutdown()
	select {
	case <-hp.ended:
	default:
		t.Error("Shutdown returned before prun-ssh ended")
	}
	if err := <-errc; err == nil || !strings.HasPrefix(err.Error(), "mute: ") || !strings.Contains(err.Error(), "prun-ssh") {
		t.Errorf("start during Shutdown: %v", err)
	}
	if !m.closed() {
		t.Error("a connection of prun-ssh is still open after Shutdown")
	}
}

// runningHelper waits for a start to have started a prun-ssh other than not.
func runningHelper(t *testing.T, not *helper) *helper {
	t.Helper()
	for range 2000 {
		helperMu.Lock()
		hp := theHelper
		helperMu.Unlock()
		if hp != nil && hp != not {
			return hp
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no prun-ssh started")
	return nil
}

// TestHelperMissing: no prun-ssh beside prun is one line saying so.
func TestHelperMissing(t *testing.T) {
	Shutdown()
	saved := helperCommand
	defer func() { helperCommand = saved }()
	helperCommand = func() (string, []string, error) { return "/nonexistent/prun-ssh", nil, nil }
	_, err := Start(context.Background(), "node1", []string{"true"}, nil, Options{})
	if want := "node1: /nonexistent/prun-ssh not found (prun's SSH client, installed beside prun)"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// A login's user and port reach an external command as OpenSSH's -l and
// -p, before the host; errors name user@host:port.
func TestCommandLogin(t *testing.T) {
	for _, tc := range []struct {
		user       string
		port       int
		out, label string
	}{
		{"", 0, "h1 true\n", "h1"},
		{"u", 0, "-l u h1 true\n", "u@h1"},
		{"", 2222, "-p 2222 h1 true\n", "h1:2222"},
		{"u", 22, "-l u -p 22 h1 true\n", "u@h1"},
	} {
		s, err := Start(context.Background(), "h1", []string{"true"}, nil, Options{Command: "echo", User: tc.user, Port: tc.port})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(s.Stdout())
		s.Wait()
		s.Close()
		if string(out) != tc.out {
			t.Errorf("user %q port %d: the command got %q, want %q", tc.user, tc.port, out, tc.out)
		}
		if l := Label("h1", tc.user, tc.port); l != tc.label {
			t.Errorf("Label(h1, %q, %d) = %q, want %q", tc.user, tc.port, l, tc.label)
		}
	}
	if l := Label("::1", "u", 2222); l != "u@[::1]:2222" {
		t.Errorf("Label(::1, u, 2222) = %q", l)
	}
	_, err := Start(context.Background(), "h1", []string{"true"}, nil, Options{Command: "echo", User: "-oProxyCommand=x"})
	if err == nil || !strings.Contains(err.Error(), "bad user name") {
		t.Errorf("a user name that is an option: %v", err)
	}
}
