package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// sameNameGroups: two jobs of one runtime name their groups alike, on
// different nodes (libpmix 4.2.2 knows a node's groups by name alone, so
// on one node the second construct would wait for the first group's
// members). Job B constructs "watch" with PMIX_GROUP_NOTIFY_TERMINATION;
// job A then constructs and destructs a "watch" of its own; B's victim dies
// after that, and B's other member must still hear of it (the launcher
// once knew groups by name alone: A's destruct dropped B's group).
func sameNameGroups(t *testing.T, d *dvmUnder, env []string, prog, hostB, hostA string) {
	dir := t.TempDir()
	ready, goFile := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
	b := d.start(t, opts{env: append([]string{"GROUP_READY=" + ready, "GROUP_GO=" + goFile}, env...),
		args: []string{"--enable-recovery", "-x", "GROUP_READY", "-x", "GROUP_GO", "--host", hostB + ":2", "-n", "2", prog, "notify", "1"}, timeout: 90 * time.Second})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job B did not construct its group within 60 s\n%s", b.wait())
		}
		time.Sleep(20 * time.Millisecond)
	}
	a := d.run(t, opts{env: env, args: []string{"--host", hostA + ":2", "-n", "2", prog, "watch-destruct"}})
	expectCode(t, a, 0)
	for i := 0; i < 2; i++ {
		expectContains(t, "stdout", a.stdout, fmt.Sprintf("group: rank %d watch destructed\n", i))
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := b.wait()
	expectCode(t, r, 7)
	expectContains(t, "stdout", r.stdout, "group: rank 0 heard rank 1 left group watch\n")
	d.expectServing(t)
}
