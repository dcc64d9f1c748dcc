package rsh

import (
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// Lookup says which hosts' names surely do not resolve, as the built-in
// client's sessions would dial them: through ssh_config's HostName and
// ProxyJump, an address without a lookup.
func TestLookup(t *testing.T) {
	var dnsErr *net.DNSError
	if _, err := net.DefaultResolver.LookupHost(context.Background(), "nosuchhost.invalid"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Skipf("this machine's resolver cannot say that a name does not exist: %v", err)
	}
	home := t.TempDir()
	os.Mkdir(filepath.Join(home, ".ssh"), 0o700)
	config := `Host alias-ip
  HostName 127.0.0.1
Host alias-bad
  HostName nosuchhost.invalid
Host behind
  ProxyJump alias-ip
Host behind-bad
  ProxyJump alias-bad
Host jump-bad
  ProxyJump nosuchjump.invalid
Host proxy-command
  ProxyCommand nc %h %p
`
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"nosuchhost.invalid": "no such host",
		"alias-bad":          "its ssh_config HostName nosuchhost.invalid: no such host",
		"behind-bad":         "its ProxyJump host alias-bad (HostName nosuchhost.invalid): no such host",
		"jump-bad":           "its ProxyJump host nosuchjump.invalid: no such host",
	}
	hosts := []string{"localhost", "127.0.0.1", "::1", "fe80::1%lo", "alias-ip", "behind", "proxy-command", "nosuchhost.invalid"}
	for h := range want {
		hosts = append(hosts, h)
	}
	got := Lookup(context.Background(), hosts, Options{Home: home})
	if !maps.Equal(got, want) {
		t.Errorf("Lookup(%q) = %q, want %q", hosts, got, want)
	}

	// Addresses alone: nothing to look up, no prun-ssh started for it.
	Shutdown()
	if got := Lookup(context.Background(), []string{"127.0.0.1", "::1"}, Options{Home: home}); len(got) != 0 {
		t.Errorf("Lookup of addresses = %q", got)
	}
	helperMu.Lock()
	started := theHelper != nil
	helperMu.Unlock()
	if started {
		t.Error("Lookup of addresses started prun-ssh")
	}

	// No time left: every name is left to its session.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := Lookup(ctx, []string{"nosuchhost.invalid"}, Options{Home: home}); len(got) != 0 {
		t.Errorf("Lookup with its context done = %q", got)
	}
}
