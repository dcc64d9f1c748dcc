// Package debroot runs another Debian release's programs under this
// machine's prun, for tests: users run Open MPI 5 (ranks with a PMIx 5
// client), mpi4py 4 and Debian 13, while this machine is Debian 12.
//
// The release is a root file system built from Debian's packages by
// testdata/debroot.sh and cached (Dir: ~/.cache/prun/debian-SUITE, or
// $PRUN_DEBIAN_SUITE as the Makefile exports it); Ensure builds it when it
// is missing, a matter of minutes once per machine.
//
// Build compiles a C program of testdata/ with the root's own mpicc (Open
// MPI) or, for a PMIx client, its gcc and libpmix, cached like
// internal/ctest's programs (bin/ctest/debian-SUITE[-pmix]/NAME), keyed by
// the source, testdata's headers, the compile and the root's build.
//
// An Env is one test's arrangement for running them: a directory under /tmp
// (bound into the root, so its paths are the same inside and out) with the
// root's programs in bin/, and a script (Env.Prun) that runs the test's prun
// in a private mount namespace (unshare -m) where /proc, /sys, /dev,
// /dev/shm, /tmp and the machine's /etc/hosts are bound into the root, each
// program of bin/ is, outside the root, a wrapper that runs it in the root
// (chroot, same working directory), and /usr/bin/python3 is one that runs the
// root's python3 (MPI_Comm_spawn of sys.executable reaches prun as that
// path). The ranks meet prun's PMIx server through 127.0.0.1 and files in
// the session directory, under the TMPDIR that Env.TempDir gives. Nothing
// stays mounted when prun ends: the namespace goes with its last process.
//
// Everything here needs root (chroot, mounts): the tests that use it fail,
// not skip, without it, as the other root-needing tests do.
package debroot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"prun/internal/ctest"
)

// Trixie is Debian 13: Open MPI 5.0.7 (its ranks carry OpenPMIx 5.0.7),
// MPICH 4.2.1, mpi4py 4.0.3 on Python 3.13, golang-go 1.24, and what
// building prun needs.
const Trixie = "trixie"

// Dir is where the root of suite is cached: $PRUN_DEBIAN_<SUITE> (the
// Makefile's), else ~/.cache/prun/debian-<suite>.
func Dir(suite string) string {
	if d := os.Getenv("PRUN_DEBIAN_" + strings.ToUpper(suite)); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "prun", "debian-"+suite)
}

var ensured sync.Map // suite -> error of its one debroot.sh run in this process

// Ensure returns the root of suite, building it first when it is not built
// yet (testdata/debroot.sh: 2-4 minutes once per machine; at once when
// built). It fails the test when not run as root or when the build fails.
func Ensure(t testing.TB, suite string) string {
	t.Helper()
	needRoot(t)
	dir := Dir(suite)
	v, _ := ensured.LoadOrStore(suite, sync.OnceValue(func() error {
		start := time.Now()
		cmd := exec.Command("bash", filepath.Join(ctest.Root(), "testdata", "debroot.sh"), suite, dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("testdata/debroot.sh %s %s: %v\n%s", suite, dir, err, out)
		}
		if len(out) > 0 {
			t.Logf("debroot: %s in %v:\n%s", suite, time.Since(start).Round(time.Second), out)
		}
		return nil
	}))
	if err := v.(func() error)(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Fatal("debroot: a Debian root needs root (chroot, mounts): make test runs as root")
	}
}

// Compiler is how a program is compiled in the root.
type Compiler int

const (
	MPI  Compiler = iota // the root's mpicc.openmpi (Open MPI 5)
	PMIx                 // gcc with the root's libpmix (OpenPMIx 5): a PMIx client
)

// command is the compile of in to out, run in the root by /bin/sh.
func (cc Compiler) command(out, in string) string {
	if cc == PMIx {
		return "gcc -O2 -Wall -o " + shq(out) + " " + shq(in) + " $(pkg-config --cflags --libs pmix)"
	}
	return "mpicc.openmpi -O2 -Wall -o " + shq(out) + " " + shq(in)
}

// dir is the compiler's directory under bin/ctest.
func (cc Compiler) dir(root string) string {
	d := filepath.Join(ctest.Root(), "bin", "ctest", filepath.Base(root))
	if cc == PMIx {
		d += "-pmix"
	}
	return d
}

// Build compiles Root()/testdata/<src> in the root with cc and returns the
// binary's path on this machine: bin/ctest/<root's name>[-pmix]/<name>,
// compiled again only when the source, a testdata/*.h header, the compile
// or the root changed (the key beside it, <name>.key). Concurrent callers
// compile once (an flock). It fails the test when the compile fails.
func Build(t testing.TB, root string, cc Compiler, src string) string {
	t.Helper()
	needRoot(t)
	name := strings.TrimSuffix(filepath.Base(src), ".c")
	srcPath := filepath.Join(ctest.Root(), "testdata", src)
	key, inputs, err := buildKey(root, cc.command("OUT", "IN"), srcPath)
	if err != nil {
		t.Fatalf("debroot: %v", err)
	}
	dir := cc.dir(root)
	bin := filepath.Join(dir, name)
	if fresh(bin, key) {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := ctest.LockFile(bin + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if fresh(bin, key) {
		return bin
	}
	// The source and headers go to a directory of the root's own /tmp,
	// where its compiler finds them; nothing needs to be mounted.
	work, err := os.MkdirTemp(filepath.Join(root, "tmp"), "prun-cc-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	for _, in := range inputs {
		if err := copyFile(in, filepath.Join(work, filepath.Base(in)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inRoot := "/tmp/" + filepath.Base(work)
	args := []string{root, "/usr/bin/env", "-i", "HOME=/root", "PATH=/usr/bin:/bin", "/bin/sh", "-c",
		cc.command(inRoot+"/"+name, inRoot+"/"+filepath.Base(srcPath))}
	out, err := exec.Command("chroot", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("debroot: compiling %s in %s failed: %v\n$ chroot %s\n%s", src, root, err, strings.Join(args, " "), out)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		t.Logf("debroot: %s: compiler output:\n%s", src, out)
	}
	// Binary first, key last: a reader without the lock sees a new binary
	// with an old key (and waits for the lock), never the reverse.
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := copyFile(filepath.Join(work, name), tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin+".key.tmp", []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".key.tmp", bin+".key"); err != nil {
		t.Fatal(err)
	}
	return bin
}

// buildKey hashes what a program's binary depends on: the compile, its
// source and testdata's headers (by content), and the root (its path and
// its build stamp, rewritten whenever debroot.sh builds it again).
func buildKey(root, command, srcPath string) (string, []string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nroot %s\n", command, root)
	stamp := filepath.Join(root, ".prun-built")
	st, err := os.Stat(stamp)
	if err != nil {
		return "", nil, fmt.Errorf("%s is not a built root (testdata/debroot.sh): %v", root, err)
	}
	b, err := os.ReadFile(stamp)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(h, "stamp %d %s\n", st.ModTime().UnixNano(), b)
	headers, _ := filepath.Glob(filepath.Join(filepath.Dir(srcPath), "*.h"))
	sort.Strings(headers)
	inputs := append([]string{srcPath}, headers...)
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(h, "file %s %d\n", filepath.Base(in), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), inputs, nil
}

func fresh(bin, key string) bool {
	if _, err := os.Stat(bin); err != nil {
		return false
	}
	b, err := os.ReadFile(bin + ".key")
	return err == nil && strings.TrimSpace(string(b)) == key
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Env is one test's arrangement for running a root's programs under the
// test's prun (see the package comment).
type Env struct {
	Root string // the root file system
	Dir  string // the test's directory: the same path in the root and out
	Bin  string // Dir/bin: the root's programs (wrappers outside the root)
	// Prun runs the test's prun with its arguments in the private mount
	// namespace: a script to start instead of prun (the same process: it
	// execs unshare, a shell, then prun).
	Prun string

	wrap  string // Dir/.wrap, bound over Bin outside the root
	enter string // Dir/.enter: the binds, then exec "$@"
}

// New makes an Env for the root (Ensure's) and the prun binary prun.
func New(t testing.TB, root, prun string) *Env {
	t.Helper()
	needRoot(t)
	e := &Env{Root: root}
	e.Dir = e.TempDir(t)
	e.Bin = filepath.Join(e.Dir, "bin")
	e.wrap = filepath.Join(e.Dir, ".wrap")
	e.enter = filepath.Join(e.Dir, ".enter")
	e.Prun = filepath.Join(e.Dir, "prun")
	for _, d := range []string{e.Bin, e.wrap} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The machine's python3, in the namespace: the root's.
	write(t, filepath.Join(e.Dir, ".python3"), inRoot(root, "/usr/bin/python3"))
	write(t, e.enter, `#!/bin/sh
# Run in a private mount namespace: binds the machine's /proc, /sys, /dev,
# /dev/shm, /tmp and /etc/hosts into the Debian root, puts the wrappers over
# the root's programs and over the machine's python3, then runs "$@".
set -e
root=`+shq(root)+` dir=`+shq(e.Dir)+`
for m in proc sys dev dev/shm tmp; do mount --bind "/$m" "$root/$m"; done
mount --bind /etc/hosts "$root/etc/hosts"
mount --bind "$dir/.wrap" "$dir/bin"
if [ -e /usr/bin/python3 ]; then mount --bind "$dir/.python3" /usr/bin/python3; fi
exec "$@"
`)
	write(t, e.Prun, "#!/bin/sh\nexec /usr/bin/unshare -m --propagation private "+shq(e.enter)+" "+shq(prun)+` "$@"`+"\n")
	return e
}

// inRoot is a wrapper script that runs the root's program prog with the
// wrapper's arguments, in the root, from the same working directory.
func inRoot(root, prog string) string {
	return "#!/bin/sh\nexec /usr/sbin/chroot " + shq(root) + ` /usr/bin/env --chdir="$PWD" ` + shq(prog) + ` "$@"` + "\n"
}

func write(t testing.TB, path, script string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Program builds testdata/<src> in the root with cc (Build) and installs
// it in Bin, with its wrapper; it returns the program's path there (the
// same inside the root and out).
func (e *Env) Program(t testing.TB, cc Compiler, src string) string {
	t.Helper()
	bin := Build(t, e.Root, cc, src)
	name := filepath.Base(bin)
	path := filepath.Join(e.Bin, name)
	if err := copyFile(bin, path, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(e.wrap, name), inRoot(e.Root, path))
	return path
}

// TempDir is a new directory that the root sees at the same path: the
// test's t.TempDir when it is under /tmp (the usual case), else one made
// there and removed at the test's end. prun's TMPDIR must be one (its
// session directory holds the PMIx rendezvous files).
func (e *Env) TempDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if strings.HasPrefix(d, "/tmp/") {
		return d
	}
	d, err := os.MkdirTemp("/tmp", "prun-debroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Shell is a command that runs script with /bin/sh in the root, in the
// private mount namespace of the binds, with a login's environment (HOME
// /root: the root's own home and caches) plus env.
func (e *Env) Shell(script string, env ...string) *exec.Cmd {
	args := []string{"-m", "--propagation", "private", e.enter, "/usr/sbin/chroot", e.Root, "/usr/bin/env", "-i",
		"HOME=/root", "USER=root", "LOGNAME=root", "LANG=C.UTF-8", "TERM=dumb",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	args = append(append(args, env...), "/bin/sh", "-c", script)
	return exec.Command("/usr/bin/unshare", args...)
}
