package debroot

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The root's compiler builds a program once, the cache answers the next
// call, and the program runs in the root through its wrapper.
func TestBuild(t *testing.T) {
	root := Ensure(t, Trixie)
	bin := Build(t, root, MPI, "hello.c")
	if want := filepath.Join(filepath.Dir(bin), "hello"); bin != want || filepath.Base(filepath.Dir(bin)) != "debian-trixie" {
		t.Errorf("Build = %s, want bin/ctest/debian-trixie/hello", bin)
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if again := Build(t, root, MPI, "hello.c"); again != bin {
		t.Errorf("second Build = %s, want %s", again, bin)
	}
	if st2, err := os.Stat(bin); err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("%s was compiled again although nothing changed", bin)
	}
	// Linked with the root's Open MPI 5, not this machine's 4.1.
	e := New(t, root, "/bin/true")
	prog := e.Program(t, MPI, "hello.c")
	out, err := e.Shell("ldd " + shq(prog)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "libmpi.so.40") || !strings.Contains(string(out), "libpmix.so.2") {
		t.Errorf("ldd in the root: %v\n%s", err, out)
	}
	// A PMIx client links the root's PMIx 5 directly.
	pmix := e.Program(t, PMIx, "query.c")
	out, err = e.Shell("ldd " + shq(pmix)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "libpmix.so.2") || strings.Contains(string(out), "libmpi") {
		t.Errorf("ldd in the root: %v\n%s", err, out)
	}
	if entries, _ := filepath.Glob(filepath.Join(root, "tmp", "prun-cc-*")); len(entries) > 0 {
		t.Errorf("compiles left %v in the root", entries)
	}
}

// Shell runs in the root, with the machine's binds, and leaves nothing
// mounted on the machine; Prun's namespace shows the root's programs
// outside the root as wrappers, python3 among them.
func TestEnv(t *testing.T) {
	root := Ensure(t, Trixie)
	e := New(t, root, "/bin/sh")
	out, err := e.Shell("cat /etc/debian_version; test -d /proc/self && test -c /dev/null && test -d " + shq(e.Dir) + " && echo binds ok").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "13.") || !strings.Contains(string(out), "binds ok") {
		t.Errorf("Shell: %v\n%s", err, out)
	}
	prog := e.Program(t, MPI, "hello.c")
	// Prun is the wrapper around /bin/sh here: what a rank would see.
	cmd := exec.Command(e.Prun, "-c", `head -c 2 `+shq(prog)+`; echo; /usr/bin/python3 -c 'import sys, mpi4py; print(sys.version_info[:2], mpi4py.__version__)'`)
	cmd.Dir = e.Bin
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "#!\n") || !strings.Contains(string(out), "(3, 13) 4.0.3") {
		t.Errorf("in the namespace, %s should be a wrapper and python3 the root's: %v\n%s", prog, err, out)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), root) || strings.Contains(string(mounts), e.Dir) {
		t.Errorf("something of the root stayed mounted:\n%s", mounts)
	}
}
