package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/internal/ctest"
)

func pmixProg(t *testing.T, src string) (dir, prog string) {
	t.Helper()
	bin := ctest.Build(t, ctest.PMIx, src)
	return filepath.Dir(bin), "./" + filepath.Base(bin)
}

func TestKeys(t *testing.T) {
	t.Parallel()
	dir, keys := pmixProg(t, "keys.c")
	cases := []struct {
		name string
		args []string
		apps string
		n    int
		env  []string
	}{
		{"n3", []string{"-n", "3", keys}, "3", 3, nil},
		{"mpmd2+1+2", []string{"-n", "2", keys, ":", "-n", "1", keys, ":", "-n", "2", keys}, "2,1,2", 5, nil},
		{"mpmd2+3", []string{"-n", "2", keys, ":", "-n", "3", keys}, "2,3", 5, nil},
		// libpmix then calls prun's fence_nb and direct_modex even on one node.
		{"n3-host-fence", []string{"-n", "3", keys}, "3", 3,
			[]string{"PMIX_MCA_pmix_server_fence_localonly_opt=0"}},
		{"mpmd2+3-host-fence", []string{"-n", "2", keys, ":", "-n", "3", keys}, "2,3", 5,
			[]string{"PMIX_MCA_pmix_server_fence_localonly_opt=0"}},
	}
	// Hydra's -usize: PMIX_UNIV_SIZE as given, or none for INFINITE.
	cases = append(cases, struct {
		name string
		args []string
		apps string
		n    int
		env  []string
	}{"n3-usize", []string{"-usize", "41", "-n", "3", keys}, "3", 3, []string{"KEYS_EXPECT_UNIV=41"}},
		struct {
			name string
			args []string
			apps string
			n    int
			env  []string
		}{"n2-usize-infinite", []string{"-usize", "INFINITE", "-n", "2", keys}, "2", 2, []string{"KEYS_EXPECT_UNIV=none"}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := append([]string{
				"KEYS_EXPECT_APPS=" + c.apps,
				fmt.Sprintf("KEYS_EXPECT_UNIV=%d", max(runtime.NumCPU(), c.n)),
				"KEYS_TIMEOUT=30",
			}, c.env...)
			r := run(t, opts{args: c.args, env: env, dir: dir})
			expectCode(t, r, 0)
			for i := 0; i < c.n; i++ {
				expectContains(t, "stdout", r.stdout, fmt.Sprintf("keys: rank %d ok (", i))
			}
			if n := strings.Count(r.stdout, " ok ("); n != c.n {
				t.Errorf("%d ok lines, want %d\n%s", n, c.n, r)
			}
		})
	}
}

func TestPmixctl(t *testing.T) {
	t.Parallel()
	dir, ctl := pmixProg(t, "pmixctl.c")
	t.Run("log", func(t *testing.T) {
		r := run(t, opts{args: []string{"-n", "2", ctl, "log"}, dir: dir})
		expectCode(t, r, 0)
		expectContains(t, "stderr", r.stderr, "pmixctl: hello from the log")
		expectContains(t, "stdout", r.stdout, "pmixctl: rank 0 log ok")
		expectContains(t, "stdout", r.stdout, "pmixctl: rank 1 log ok")
	})
	t.Run("kill", func(t *testing.T) {
		r := run(t, opts{args: []string{"-n", "3", ctl, "kill"}, dir: dir})
		expectCode(t, r, 137)
		expectFaster(t, r, 10*time.Second)
		expectContains(t, "stderr", r.stderr, "PMIx_Job_control kill")
		if strings.Contains(r.stderr, "still alive") {
			t.Errorf("a rank outlived the kill request\n%s", r)
		}
	})
	t.Run("events", func(t *testing.T) {
		r := run(t, opts{args: []string{"-n", "3", ctl, "events"}, dir: dir})
		expectCode(t, r, 0)
		expectContains(t, "stdout", r.stdout, "pmixctl: rank 0 sent event")
		for i := 1; i < 3; i++ {
			expectContains(t, "stdout", r.stdout, fmt.Sprintf("pmixctl: rank %d got event", i))
		}
	})
}

const noFinalizeC = `#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* PMIx_Init; rank 1 then exits 0 without PMIx_Finalize, the others sleep. */
int main(void)
{
    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "nofin: PMIx_Init failed: %s\n", PMIx_Error_string(rc));
        return 3;
    }
    printf("nofin: rank %u initialised\n", me.rank);
    fflush(stdout);
    if (me.rank == 1)
        exit(0);
    sleep(30);
    PMIx_Finalize(NULL, 0);
    return 0;
}
`

func TestExitWithoutFinalize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	compileC(t, dir, "nofin", noFinalizeC, true)
	r := run(t, opts{args: []string{"-n", "2", "./nofin"}, dir: dir})
	expectCode(t, r, 1)
	expectFaster(t, r, 10*time.Second)
	expectContains(t, "stderr", r.stderr, "rank 1 (./nofin)")
	expectContains(t, "stderr", r.stderr, "without calling finalize")
	expectContains(t, "stderr", r.stderr, "killing the other rank")
	// Alone (rank 0 sleeps, so ask for two ranks of which rank 1 is in
	// another app that exits at once): the status is still 1.
	r = run(t, opts{args: []string{"-n", "1", "sh", "-c", "exit 0", ":", "-n", "1", "./nofin"}, dir: dir})
	expectCode(t, r, 1)
	expectContains(t, "stderr", r.stderr, "rank 1 (./nofin)")
	expectContains(t, "stderr", r.stderr, "without calling finalize")
}

// TestPMIxTools: OpenPMIx's tools reach prun's server as they reach
// PRRTE's: pps lists the running job's namespace.
func TestPMIxTools(t *testing.T) {
	t.Parallel()
	pps, err := exec.LookPath("pps")
	if err != nil {
		t.Fatalf("pps (libpmix-bin, installed by make deps): %v", err)
	}
	p := startPrun(t, opts{args: []string{"-n", "2", "sleep", "30"}})
	p.waitRanks(2, "sleep", 10*time.Second)
	cmd := exec.Command(pps, "--pid", strconv.Itoa(p.cmd.Process.Pid))
	cmd.Env = append(baseEnv(), "TMPDIR="+p.tmpdir)
	out, err := cmd.CombinedOutput()
	want := fmt.Sprintf("Active nspaces: prun.%d.1", p.cmd.Process.Pid)
	if err != nil || !strings.Contains(string(out), want) {
		t.Errorf("pps --pid: %v\n%s\nwant %q", err, out, want)
	}
	p.signal(syscall.SIGTERM)
	r := p.wait()
	expectCode(t, r, 143)
	if strings.Contains(r.stderr, "PMIX ERROR") {
		t.Errorf("prun's stderr: %q", r.stderr)
	}

	// --report-uri gives the server's URI, by which a PMIx tool attaches
	// (PMIX_SERVER_URI; pps 4.2.2 ignores its --uri and searches TMPDIR).
	// Two launchers run, so that only the URI can choose.
	tool := ctest.Build(t, ctest.PMIx, "pmixtool.c")
	var runs []*proc
	var uris []string
	for i := range 2 {
		uriFile := filepath.Join(t.TempDir(), "uri")
		runs = append(runs, startPrun(t, opts{args: []string{"--report-uri", uriFile, "-n", "1", "sleep", "30"}}))
		runs[i].waitRanks(1, "sleep", 10*time.Second)
		b, err := os.ReadFile(uriFile)
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, strings.TrimSpace(string(b)))
	}
	for i, p := range runs {
		out, err := exec.Command(tool, uris[i]).CombinedOutput()
		want := fmt.Sprintf("pmixtool: namespaces prun.%d.1\n", p.cmd.Process.Pid)
		if err != nil || string(out) != want {
			t.Errorf("pmixtool %s: %v\n%s\nwant %q", uris[i], err, out, want)
		}
		p.signal(syscall.SIGTERM)
		expectCode(t, p.wait(), 143)
	}
}

// Every rank is told to authenticate natively (the server knows its peers
// by their sockets' owners): libpmix would offer munge first, and each rank
// would then ask munged for a credential that the server asks munged to
// check (pmixsrv.nativeSecurity).
func TestClientsAuthenticateNatively(t *testing.T) {
	r := prun(t, "-n", "2", "sh", "-c", `echo "mode=$PMIX_SECURITY_MODE"`)
	if r.code != 0 || r.stdout != "mode=native\nmode=native\n" {
		t.Errorf("ranks' PMIX_SECURITY_MODE: want native twice\n%s", r)
	}
}
