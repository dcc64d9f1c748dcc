package launcher

import (
	"os/exec"
	"strings"
	"testing"
)

// The launcher reads a parsed job spec: the spellings and usage errors are
// the CLI's, which it does not import (it did, for ResolveProgram and
// PrintError).
func TestNoCLIImport(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if d == "prun/cli" {
			t.Error("the launcher imports prun/cli")
		}
	}
}
