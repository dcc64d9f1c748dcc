package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIProgramNamedLikeSubcommand: after prun's options, a word is the
// program, even when it is also the name of one of prun's own commands
// (cobra's completion and __complete, help, prun's daemon): it runs.
func TestCLIProgramNamedLikeSubcommand(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"completion", "__complete", "help", "daemon"} {
		script := "#!/bin/sh\necho ran " + name + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"-n", "1", name, "bash"}, {"-np", "1", "./" + name, "bash"}} {
			r := run(t, opts{args: args, dir: dir, env: []string{"PATH=" + dir + ":" + os.Getenv("PATH")}})
			expectCode(t, r, 0)
			if want := "ran " + name + " bash\n"; r.stdout != want {
				t.Errorf("prun %s: stdout %q, want %q (stderr %q)", strings.Join(args, " "), r.stdout, want, r.stderr)
			}
		}
	}
	// The commands themselves still answer where they are the first word.
	out, err := exec.Command(prunBin, "completion", "bash").Output()
	if err != nil || !strings.Contains(string(out), "__start_prun") {
		t.Errorf("prun completion bash: %v, %d bytes", err, len(out))
	}
}
