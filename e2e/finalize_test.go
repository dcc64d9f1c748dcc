package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestOpenMPIFinalizePrompt: Open MPI's MPI_Finalize sends libpmix a
// message the server does not answer (deregistering its event handler) and
// then PMIx_Finalize's; over a connection with Nagle's algorithm on the
// client and delayed acknowledgements on the server, the second waits for
// the server's delayed ACK of the first, never less than 40 ms (the
// kernel's minimum delayed-ACK timeout). That was every Open MPI job's
// MPI_Finalize under prun (as under mpirun and srun --mpi=pmix): 43 ms
// on every rank. The bound here is that timer, not the machine's speed: a
// rank's MPI_Finalize under 35 ms in any of five runs cannot have waited
// for it, while before the fix not one rank of any run finished under 40.
func TestOpenMPIFinalizePrompt(t *testing.T) {
	t.Parallel()
	dir, prog := ompi(t, "inittime.c")
	const limit = 35 * time.Millisecond
	var seen []string
	for try := 0; try < 5; try++ {
		r := run(t, opts{args: []string{"-n", "2", prog}, dir: dir})
		expectCode(t, r, 0)
		fast := 0
		for _, l := range lines(r.stdout) {
			var rank int
			var main, init, bar, fin int64
			if _, err := fmt.Sscanf(l, "inittime %d main %d init %d bar %d fin %d", &rank, &main, &init, &bar, &fin); err != nil {
				t.Fatalf("unexpected line %q\n%s", l, r)
			}
			d := time.Duration(fin - bar)
			seen = append(seen, fmt.Sprintf("run %d rank %d: %v", try, rank, d.Round(10*time.Microsecond)))
			if d < limit {
				fast++
			}
		}
		if n := len(lines(r.stdout)); n != 2 {
			t.Fatalf("%d lines of output, want 2\n%s", n, r)
		}
		if fast == 2 {
			t.Logf("MPI_Finalize: %s", strings.Join(seen, "; "))
			return
		}
	}
	t.Errorf("no run had both ranks' MPI_Finalize under %v (a delayed ACK is 40 ms): %s", limit, strings.Join(seen, "; "))
}
