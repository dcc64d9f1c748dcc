package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestXtermArgv(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// a directory and a non-executable file named xterm come first in PATH
	if err := os.Mkdir(filepath.Join(dir, "xterm"), 0o755); err != nil {
		t.Fatal(err)
	}
	noexec := filepath.Join(dir, "noexec")
	os.Mkdir(noexec, 0o755)
	os.WriteFile(filepath.Join(noexec, "xterm"), nil, 0o644)
	os.WriteFile(filepath.Join(bin, "xterm"), nil, 0o755)
	env := []string{"HOME=/", "PATH=" + dir + ":" + noexec + ":" + bin}
	path, argv, err := xtermArgv("/usr/bin/gdb", []string{"gdb", "-q", "./a"}, 3, "n1", true, env)
	want := []string{"xterm", "-T", "prun: rank 3 on n1", "-hold", "-e", "/usr/bin/gdb", "-q", "./a"}
	if err != nil || path != filepath.Join(bin, "xterm") || !slices.Equal(argv, want) {
		t.Errorf("%s %q %v", path, argv, err)
	}
	if _, argv, _ := xtermArgv("/bin/true", []string{"true"}, 0, "n1", false, env); slices.Contains(argv, "-hold") {
		t.Errorf("no hold: %q", argv)
	}
	if _, _, err := xtermArgv("/bin/true", []string{"true"}, 0, "n1", false, []string{"PATH=" + noexec}); err == nil || err.Error() != "--xterm: no xterm in the rank's PATH" {
		t.Errorf("no xterm: %v", err)
	}
}
