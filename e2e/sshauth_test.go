package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"prun/internal/cluster"
)

// slowAgent is an ssh-agent whose signatures take delay, like a hardware
// key waiting for a touch.
type slowAgent struct {
	agent.Agent
	delay time.Duration
}

func (a slowAgent) Sign(key ssh.PublicKey, data []byte) (*ssh.Signature, error) {
	time.Sleep(a.delay)
	return a.Agent.Sign(key, data)
}

func (a slowAgent) SignWithFlags(key ssh.PublicKey, data []byte, flags agent.SignatureFlags) (*ssh.Signature, error) {
	time.Sleep(a.delay)
	return a.Agent.(agent.ExtendedAgent).SignWithFlags(key, data, flags)
}

// serveAgent serves ag on a Unix socket until the test ends.
func serveAgent(t *testing.T, ag agent.Agent) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(ag, c)
			}()
		}
	}()
	return sock
}

// TestSSHAuthTimeout: ssh_config's ConnectTimeout bounds the connection and
// the key exchange, as in OpenSSH, not authentication. A key whose agent
// takes longer than ConnectTimeout to sign (a hardware key waiting for a
// touch; sshd under hundreds of logins at once) still logs in; a server that
// never finishes the handshake still fails within ConnectTimeout.
func TestSSHAuthTimeout(t *testing.T) {
	c := cluster.Start(t, 2)
	m := &mn{c: c, hosts: c.Hosts()}

	// The cluster's key, held only by a slow agent.
	b, err := os.ReadFile(filepath.Join(c.Home(), ".ssh", "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	ring := agent.NewKeyring()
	if err := ring.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatal(err)
	}
	sock := serveAgent(t, slowAgent{Agent: ring, delay: 2500 * time.Millisecond})

	// $HOME: the cluster's ssh config without its identity, agent and
	// timeout lines, after ours.
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	cfg, err := os.ReadFile(filepath.Join(c.Home(), ".ssh", "config"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(cfg), "\n") {
		switch strings.ToLower(strings.Fields(l + " x")[0]) {
		case "identityfile", "identityagent", "identitiesonly", "connecttimeout":
			continue
		}
		kept = append(kept, l)
	}
	// A server that accepts and never speaks.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	port := silent.Addr().(*net.TCPAddr).Port
	first := fmt.Sprintf("Host silent\n  HostName 127.0.0.1\n  Port %d\n  StrictHostKeyChecking no\n"+
		"Host *\n  ConnectTimeout 1\n  IdentityAgent %s\n", port, sock)
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(first+strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	kh, _ := os.ReadFile(filepath.Join(c.Home(), ".ssh", "known_hosts"))
	os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), kh, 0o600)
	env := []string{"HOME=" + home}

	t.Run("slow-agent", func(t *testing.T) {
		r := run(t, opts{args: []string{"-H", strings.Join(m.hosts, ","), "-n", "2", "hostname"}, env: env})
		expectCode(t, r, 0)
		if got := strings.Join(lines(r.stdout), ","); got != "prun-h1,prun-h2" && got != "prun-h2,prun-h1" {
			t.Errorf("ranks say %q, want prun-h1 and prun-h2\n%s", got, r)
		}
		if r.dur < 2500*time.Millisecond {
			t.Errorf("prun took %v: the agent's key was not the one used", r.dur)
		}
		m.checkClean(t, 10*time.Second)
	})
	t.Run("silent-server", func(t *testing.T) {
		r := run(t, opts{args: []string{"-H", "prun-h1,silent", "-n", "2", "hostname"}, env: env})
		expectOneLineFailure(t, r, fmt.Sprintf("prun: silent: timed out after 1s in the SSH handshake with 127.0.0.1:%d", port))
		expectFaster(t, r, 4*time.Second)
		m.checkClean(t, 10*time.Second)
	})
}
