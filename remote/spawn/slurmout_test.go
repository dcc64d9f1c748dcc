package spawn

import (
	"os/exec"
	"strings"
	"testing"
)

// srun's output goes to a memory file that a child writes through its own
// descriptor: what it wrote is read back from the end, the telling line
// first, and the write never fails for want of a reader.
func TestSrunOutputFile(t *testing.T) {
	f, err := newMemFile("prun-srun-test")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := tailFile{f}
	cmd := exec.Command("sh", "-c", `echo "srun: step launched"; echo "slurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2026 ***" >&2; echo "srun: Job step aborted"`)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.last(), "slurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2026 ***"; got != want {
		t.Errorf("last() = %q, want %q", got, want)
	}
	// Only the end is read: a long output's first lines are not.
	cmd = exec.Command("sh", "-c", `echo first; i=0; while [ $i -lt 2000 ]; do echo "srun: line $i"; i=$((i+1)); done`)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if len(s) > tailSize || strings.Contains(s, "first") || !strings.HasSuffix(s, "srun: line 1999\n") {
		t.Errorf("String() is %d bytes, ending %q; want the last %d bytes", len(s), s[max(len(s)-40, 0):], tailSize)
	}
	if got := out.last(); got != "srun: line 1999" { // the "***" line is 30 KB back
		t.Errorf("last() = %q, want the last line", got)
	}
}
