package main

import (
	"os/exec"
	"strings"
	"testing"
)

// Every package prun links is initialised at every start, a job on one
// node's too: the SSH client lives in prun-ssh and the control plane needs
// no gob (their cost at start: docs/benchmarks-history.md, third
// session). A new import
// that brings them back fails here, not in a benchmark weeks later.
func TestNoStartupWeight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps gave %d packages: %q", len(deps), deps)
	}
	for _, d := range deps {
		for _, banned := range []string{"golang.org/x/crypto/", "github.com/kevinburke/ssh_config", "encoding/gob", "prun/rsh/sshclient"} {
			if strings.HasPrefix(d, banned) || d == strings.TrimSuffix(banned, "/") {
				t.Errorf("prun links %s (it belongs in prun-ssh, or nowhere)", d)
			}
		}
	}
}
