package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenPMIxExamples: the example clients of the OpenPMIx release prun's
// server is built on (openpmix/build.sh installs them beside the library),
// built against this distribution's libpmix (4.2 clients) and run under prun
// at 4 ranks: the basic calls, spawn, publish/lookup, job control, logging,
// node information, direct modex, and groups (construct, by invitation,
// local context ids). Each must end well on every rank.
func TestOpenPMIxExamples(t *testing.T) {
	src := os.Getenv("PRUN_PMIX")
	if src == "" {
		t.Fatal("PRUN_PMIX is not set: run the tests with make, which builds the pinned OpenPMIx and its examples")
	}
	src = filepath.Join(src, "share", "examples")
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "pmix").Output()
	if err != nil {
		t.Fatalf("pkg-config pmix: %v (libpmix-dev: make deps)", err)
	}
	bin := t.TempDir()
	const fin = "PMIx_Finalize successfully completed"
	for _, ex := range []struct {
		name string
		want string // on the last line of every rank (dmodex: rank 0's alone)
		n    int
	}{
		{"hello", fin, 4},
		{"client", fin, 4},
		{"client2", fin, 4},
		{"dynamic", fin, 4},
		{"pub", fin, 4},
		{"pubi", fin, 4},
		{"jctrl", fin, 4},
		{"log", fin, 4},
		{"nodeinfo", fin, 4},
		{"dmodex", fin, 1},
		{"group", " COMPLETE\n", 4},
		{"group_dmodex", " COMPLETE\n", 4},
		{"group_lcl_cid", " COMPLETE\n", 4},
		{"asyncgroup", " COMPLETE\n", 4},
	} {
		t.Run(ex.name, func(t *testing.T) {
			prog := filepath.Join(bin, ex.name)
			args := append([]string{"-O1", "-I" + src, "-o", prog, filepath.Join(src, ex.name+".c")}, strings.Fields(string(flags))...)
			if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
				t.Fatalf("gcc %s: %v\n%s", ex.name, err, out)
			}
			r := run(t, opts{args: []string{"-n", "4", prog}, dir: bin})
			expectCode(t, r, 0)
			if n := strings.Count(r.stdout+r.stderr, ex.want); n < ex.n {
				t.Errorf("%q on %d ranks, want %d\n%s", ex.want, n, ex.n, r)
			}
		})
	}
}
