package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"prun/internal/ctest"
)

// verdictRE is mpi4py_check.py's last line of one rank.
var verdictRE = regexp.MustCompile(`(?m)^mpi4py_check: rank (\d+) ran (\d+) checks: (.*)$`)

// Issue 38: mpi4py 4 with Debian 13's python3 and Open MPI 5 under this
// machine's prun, at 1, 2 and 4 ranks (testdata/mpi4py_check.py: process
// sets through MPI Sessions, communicators made of groups, spawn of the
// interpreter itself, ports and names, Comm.Join): every rank says OK.
// mpi4py's own suite runs where its source is at hand (make mpi4py-suite).
func TestTrixieMPI4Py(t *testing.T) {
	tx := newTrixie(t)
	script := filepath.Join(tx.Dir, "mpi4py_check.py")
	copyFile(t, filepath.Join(ctest.Root(), "testdata", "mpi4py_check.py"), script)
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			r := tx.run(t, opts{args: []string{"-n", strconv.Itoa(n), "/usr/bin/python3", script},
				dir: tx.Dir, timeout: 5 * time.Minute})
			expectCode(t, r, 0)
			seen := map[string]bool{}
			for _, m := range verdictRE.FindAllStringSubmatch(r.stdout, -1) {
				seen[m[1]] = true
				if m[3] != "OK" || m[2] == "0" {
					t.Errorf("rank %s ran %s checks: %s\n%s", m[1], m[2], m[3], r)
				}
			}
			if len(seen) != n {
				t.Errorf("%d ranks reported, want %d\n%s", len(seen), n, r)
			}
		})
	}
}
