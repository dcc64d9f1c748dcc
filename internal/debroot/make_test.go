package debroot

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"prun/internal/ctest"
)

// Issue 38: `make build` and `make demo` work on Debian 13 as on Debian 12:
// a clean clone of HEAD, built inside the Debian 13 root with the root's
// own toolchain (golang-go 1.24 fetches go.mod's Go through the module
// proxy; the pinned OpenPMIx is built into the root's ~/.cache/prun, so a
// second run is warm), whose demo runs its MPMD Open MPI 5 job.
func TestMakeInTrixie(t *testing.T) {
	root := Ensure(t, Trixie)
	e := New(t, root, "/bin/false")
	head, err := exec.Command("git", "-C", ctest.Root(), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	repo := filepath.Join(e.Dir, "repo")
	for _, args := range [][]string{
		{"clone", "-q", "--no-hardlinks", ctest.Root(), repo},
		{"-C", repo, "checkout", "-q", "--detach", strings.TrimSpace(string(head))},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// The root's environment is a login's (Shell); this machine reaches
	// the registries through a proxy whose certificate only its own CA
	// bundle holds, so Go's downloads in the root are given that bundle.
	var env []string
	if b, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		ca := filepath.Join(e.Dir, "ca-certificates.crt")
		if err := os.WriteFile(ca, b, 0o644); err != nil {
			t.Fatal(err)
		}
		env = append(env, "SSL_CERT_FILE="+ca)
	}
	for _, target := range []string{"build", "demo"} {
		start := time.Now()
		out, err := e.Shell("cd "+shq(repo)+" && make "+target+" 2>&1", env...).CombinedOutput()
		t.Logf("make %s in the Debian 13 root: %v", target, time.Since(start).Round(time.Second))
		if err != nil {
			t.Fatalf("make %s in the Debian 13 root: %v\n%s", target, err, tail(string(out), 60))
		}
		if target == "build" {
			continue
		}
		host, _ := os.Hostname()
		var got, want []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "hello") {
				got = append(got, l)
			}
		}
		for r := 0; r < 4; r++ {
			want = append(want, fmt.Sprintf("hello from rank %d of 6 on %s (app 0)", r, host))
		}
		for r := 4; r < 6; r++ {
			want = append(want, fmt.Sprintf("hello2: rank %d of 6 (app 1) says hi; world sum of ranks = 15", r))
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("make demo's job printed:\n%s\nwant (in any order):\n%s\n--- make demo:\n%s",
				strings.Join(got, "\n"), strings.Join(want, "\n"), tail(string(out), 60))
		}
	}
	// The demo's prun is the root's build: its own glibc and toolchain.
	out, err := e.Shell(shq(filepath.Join(repo, "bin", "prun")) + " --version").CombinedOutput()
	if err != nil {
		t.Errorf("the root's bin/prun --version: %v\n%s", err, out)
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = append([]string{"[...]"}, l[len(l)-n:]...)
	}
	return strings.Join(l, "\n")
}
