//go:build mpi4pysuite

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unittest's summary of one rank: "Ran N tests in S" then "OK" or
// "FAILED (failures=F, errors=E, skipped=K)".
// prun's --output tag puts "[APP,RANK]<stderr>:" before each line.
var (
	ranRE          = regexp.MustCompile(`(?m)^\[\d+,(\d+)\]<stderr>:Ran (\d+) tests? in `)
	suiteVerdictRE = regexp.MustCompile(`(?m)^\[\d+,(\d+)\]<stderr>:(OK|FAILED)( \([^)]*\))?$`)
	caseRE         = regexp.MustCompile(`(?m)^\[\d+,(\d+)\]<stderr>:(ERROR|FAIL): (\S+) \((\S+)\)`)
)

// mpi4py's own test suite (test/main.py, 2,081 tests a rank) with Debian
// 13's python3, mpi4py 4.0.3 and Open MPI 5 under this machine's prun, at 1,
// 2 and 4 ranks: it passes only with no failure and no error in any rank.
// The suite is a source tree's (PRUN_MPI4PY_SRC: a checkout or sdist of the
// release the root has), which make test's machines cannot fetch (no Python
// package registry, no Debian 13 sources): `make mpi4py-suite
// MPI4PY_SRC=DIR` runs it; make test runs testdata/mpi4py_check.py instead.
func TestMPI4PySuite(t *testing.T) {
	src := os.Getenv("PRUN_MPI4PY_SRC")
	if src == "" {
		t.Fatal("PRUN_MPI4PY_SRC names no mpi4py source tree (make mpi4py-suite MPI4PY_SRC=DIR)")
	}
	tx := newTrixie(t)
	suite := filepath.Join(tx.Dir, "mpi4py")
	if out, err := exec.Command("cp", "-r", src, suite).CombinedOutput(); err != nil {
		t.Fatalf("cp -r %s %s: %v\n%s", src, suite, err, out)
	}
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			// The suite takes minutes at 4 ranks on 2 cores; the limit is
			// for a hang, not for speed.
			r := tx.run(t, opts{args: []string{"--output", "tag", "-n", strconv.Itoa(n), "/usr/bin/python3", "test/main.py"},
				dir: suite, timeout: 30 * time.Minute})
			// Each rank's count and verdict, by rank.
			ran, verdict := map[string]string{}, map[string]string{}
			for _, m := range ranRE.FindAllStringSubmatch(r.stderr, -1) {
				ran[m[1]] = m[2]
			}
			for _, m := range suiteVerdictRE.FindAllStringSubmatch(r.stderr, -1) {
				verdict[m[1]] = m[2] + m[3]
			}
			for rank := 0; rank < n; rank++ {
				k := strconv.Itoa(rank)
				t.Logf("mpi4py at %d ranks: rank %d ran %s tests: %s", n, rank, ran[k], verdict[k])
				if ran[k] == "" || !strings.HasPrefix(verdict[k], "OK") {
					t.Errorf("rank %d: ran %q tests: %q, want OK", rank, ran[k], verdict[k])
				}
			}
			// Each failing case once, with the ranks where it failed.
			failed := map[string][]int{}
			for _, c := range caseRE.FindAllStringSubmatch(r.stderr, -1) {
				rank, _ := strconv.Atoi(c[1])
				k := c[2] + ": " + c[4]
				failed[k] = append(failed[k], rank)
			}
			keys := make([]string, 0, len(failed))
			for k := range failed {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				sort.Ints(failed[k])
				t.Errorf("%s (ranks %v)", k, failed[k])
			}
			expectCode(t, r, 0)
		})
	}
}
