package sshclient

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// auth gathers the keys to offer to one target, and remembers what it tried
// for the error message when none is accepted.
type auth struct {
	t *target

	begun atomic.Bool // the server asked for keys

	mu      sync.Mutex
	loaded  bool
	signers []ssh.Signer
	tried   []string

	agentMu sync.Mutex // not mu: close must not wait for a hung agent
	agent   net.Conn
	closed  bool
}

// keys is the ssh.PublicKeysCallback: the identity files, then the agent's
// keys (only those of the identity files with IdentitiesOnly).
func (a *auth) keys() ([]ssh.Signer, error) {
	a.begun.Store(true)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.loaded {
		return a.signers, nil
	}
	a.loaded = true
	seen := map[string]bool{}
	add := func(s ssh.Signer) {
		if k := string(s.PublicKey().Marshal()); !seen[k] {
			seen[k] = true
			a.signers = append(a.signers, s)
		}
	}
	ids := map[string]bool{} // public keys of the identity files
	for _, p := range a.t.identities {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			if a.t.explicitIDs {
				a.tried = append(a.tried, p+" (missing)")
			}
			continue
		}
		if err != nil {
			a.tried = append(a.tried, fmt.Sprintf("%s (unreadable: %v)", p, unwrapPath(err)))
			continue
		}
		s, err := ssh.ParsePrivateKey(b)
		var pm *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &pm):
			a.tried = append(a.tried, p+" (encrypted, skipped)")
			if pub := pm.PublicKey; pub != nil {
				ids[string(pub.Marshal())] = true
			} else if b, err := os.ReadFile(p + ".pub"); err == nil {
				if pub, _, _, _, err := ssh.ParseAuthorizedKey(b); err == nil {
					ids[string(pub.Marshal())] = true
				}
			}
		case err != nil:
			a.tried = append(a.tried, fmt.Sprintf("%s (not a usable key: %s)", p, trimSSH(err)))
		default:
			ids[string(s.PublicKey().Marshal())] = true
			add(s)
			a.tried = append(a.tried, p)
		}
	}
	if a.t.agent != "" {
		conn, err := net.DialTimeout("unix", a.t.agent, 2*time.Second)
		if err != nil {
			a.tried = append(a.tried, "ssh-agent (cannot connect to "+a.t.agent+")")
			return a.signers, nil
		}
		a.agentMu.Lock()
		closed := a.closed
		a.agent = conn
		a.agentMu.Unlock()
		if closed {
			conn.Close()
		}
		ss, err := agent.NewClient(conn).Signers()
		if err != nil {
			a.tried = append(a.tried, fmt.Sprintf("ssh-agent (%v)", err))
			return a.signers, nil
		}
		n := 0
		for _, s := range ss {
			if a.t.identitiesOnly && !ids[string(s.PublicKey().Marshal())] {
				continue
			}
			add(s)
			n++
		}
		switch {
		case n > 0:
			a.tried = append(a.tried, "ssh-agent")
		case len(ss) > 0:
			a.tried = append(a.tried, "ssh-agent (no key of the IdentityFiles, IdentitiesOnly yes)")
		default:
			a.tried = append(a.tried, "ssh-agent (no keys)")
		}
	}
	return a.signers, nil
}

// close closes the agent connection.
func (a *auth) close() {
	a.agentMu.Lock()
	defer a.agentMu.Unlock()
	a.closed = true
	if a.agent != nil {
		a.agent.Close()
	}
}

// failure is the message for a refused authentication.
func (a *auth) failure() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	tried := "no identity file and no ssh-agent"
	if len(a.tried) > 0 {
		tried = strings.Join(a.tried, ", ")
	}
	return fmt.Errorf("authentication failed as %s (tried: %s)", a.t.user, tried)
}

// started says whether authentication with keys began.
func (a *auth) started() bool { return a.begun.Load() }
