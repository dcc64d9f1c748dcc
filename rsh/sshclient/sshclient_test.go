package sshclient

import (
	"crypto/rand"
	"crypto/rsa"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestHostKeyAlgorithms(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(knownhosts.Line([]string{"[node]:2222"}, pub)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := &target{alias: "node", hostname: "node", port: "2222", strict: "yes", userKnown: []string{kh}}
	hk, err := newHostKeys(tg)
	if err != nil {
		t.Fatal(err)
	}
	algs := hk.algorithms()
	if len(algs) < 3 || algs[0] != ssh.KeyAlgoRSASHA512 || algs[1] != ssh.KeyAlgoRSASHA256 || !slices.Contains(algs, ssh.KeyAlgoED25519) {
		t.Errorf("algorithms with a known RSA key = %q; want the RSA ones first, then the others", algs)
	}
	for _, a := range algs {
		if strings.Contains(a, "-cert-") {
			t.Errorf("certificate algorithm %s offered without a known CA", a)
		}
	}
	// Unknown host: no RSA preference.
	tg.hostname = "other"
	if algs := hk.algorithms(); len(algs) > 0 && algs[0] == ssh.KeyAlgoRSASHA512 {
		t.Errorf("algorithms for an unknown host = %q", algs)
	}
}

func TestRoute(t *testing.T) {
	h := t.TempDir()
	os.MkdirAll(filepath.Join(h, ".ssh"), 0o700)
	config := `Host node
  ProxyJump alice@gw1:2200,gw2
  User bob
Host gw2
  HostName gw2.example
  ProxyJump never-used
Host gw1
  HostName 10.0.0.%h
  IdentityFile ~/.ssh/gw_key
Host loop*
  ProxyJump loop-bastion
Host deep
  ProxyJump deep
Host a
  ProxyJump b
Host b
  ProxyJump a
Host *
  Port 2022
`
	if err := os.WriteFile(filepath.Join(h, ".ssh", "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, err := loadConfigs(h)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.route("node", "", "", nil, h, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range r {
		got = append(got, tg.user+"@"+tg.addr())
	}
	want := []string{"alice@10.0.0.gw1:2200", localUser() + "@gw2.example:2022", "bob@node:2022"}
	if !slices.Equal(got, want) {
		t.Errorf("route to node = %q, want %q", got, want)
	}
	if ids := r[0].identities; len(ids) != 1 || ids[0] != filepath.Join(h, ".ssh", "gw_key") {
		t.Errorf("gw1 identities = %q", ids)
	}
	if r, err := cs.route("loop-node", "", "", nil, h, 0); err != nil || len(r) != 2 || r[0].alias != "loop-bastion" {
		t.Errorf("route to loop-node = %v, %v; want through loop-bastion", r, err)
	}
	if r, err := cs.route("deep", "", "", nil, h, 0); err != nil || len(r) != 1 {
		t.Errorf("route to deep (ProxyJump itself) = %v, %v; want direct", r, err)
	}
	if _, err := cs.route("a", "", "", nil, h, 0); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Errorf("route through a ProxyJump loop: %v", err)
	}
	for _, bad := range []string{"", "@", "host:port", "[::1", "-oProxyCommand=x"} {
		if _, _, _, err := parseJump(bad); err == nil {
			t.Errorf("parseJump(%q) accepted", bad)
		}
	}
	if u, hh, p, err := parseJump("ssh://u@[fe80::1]:23"); err != nil || u != "u" || hh != "fe80::1" || p != "23" {
		t.Errorf("parseJump of a URI = %q %q %q %v", u, hh, p, err)
	}
}

// TestConfigCache: sessions share a configuration file parsed once, until
// the file changes; a file that no longer parses is an error naming it.
func TestConfigCache(t *testing.T) {
	h := t.TempDir()
	cfgPath := filepath.Join(h, ".ssh", "config")
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(cfgPath, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	user := func() string {
		t.Helper()
		cs, err := loadConfigs(h)
		if err != nil {
			t.Fatal(err)
		}
		u, err := cs.get("node", "User")
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	write("Host node\n  User alice\n")
	first, err := loadConfigs(h)
	if err != nil {
		t.Fatal(err)
	}
	again, err := loadConfigs(h)
	if err != nil {
		t.Fatal(err)
	}
	if first[0].cfg != again[0].cfg {
		t.Error("an unchanged config was parsed again")
	}
	if u := user(); u != "alice" {
		t.Errorf("User = %q, want alice", u)
	}
	write("Host node\n  User bob\n") // same size: the modification time tells
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(cfgPath, future, future); err != nil {
		t.Fatal(err)
	}
	if u := user(); u != "bob" {
		t.Errorf("after an edit, User = %q, want bob", u)
	}
	write("Host node\n  User carol\nMatch\n") // Match needs a criterion
	if _, err := loadConfigs(h); err == nil || !strings.Contains(err.Error(), cfgPath) {
		t.Errorf("broken config: err = %v, want one naming %s", err, cfgPath)
	}
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	if u := user(); u != "" {
		t.Errorf("without a config, User = %q, want none", u)
	}
}
