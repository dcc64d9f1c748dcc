// Package ctest compiles the C test programs in testdata/ for Go tests, and
// starts the peers' daemons they talk to (hydra_nameserver).
//
// Binaries go to <repo>/bin/ctest/<toolchain>/<name> and are rebuilt only
// when the source (or a testdata/*.h header) is newer than the binary, or when
// the compile command ctest would use has changed (recorded in a "<name>.cmd"
// stamp next to the binary). Compiles write a temporary file in the same
// directory and rename it into place, under an flock on "<name>.lock", so
// that the many test processes `go test ./...` runs in parallel can ask for
// the same program at once: nobody ever sees a half-written binary, and a
// program is compiled once rather than once per package.
package ctest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Toolchain selects the compiler a test program is built with.
type Toolchain int

const (
	OpenMPI Toolchain = iota // mpicc.openmpi (Open MPI 4.1)
	MPICH                    // mpicc.mpich (MPICH 4.0)
	PMIx                     // gcc + `pkg-config --cflags --libs pmix`
	Plain                    // gcc
	// MPICHCh3 is the same MPICH release built with the ch3 device and
	// PMI-1 by `make mpich-ch3` (testdata/mpich-ch3.sh): Debian's build
	// cannot spawn or open ports here. MPICHCh3PMI2 is its PMI-2 twin.
	MPICHCh3
	MPICHCh3PMI2
	// PinnedPMIx is gcc + the static OpenPMIx prun's server is built on
	// (openpmix/build.sh, found through `pkg-config prun-pmix`, which the
	// Makefile points at): for the client-side fixes of openpmix/patches.
	PinnedPMIx
)

// MPICHCh3Dir is where `make mpich-ch3` installs the ch3 build (or its PMI-2
// twin): $PRUN_MPICH_CH3 (or $PRUN_MPICH_CH3_PMI2), else under the user's
// cache directory, as the Makefile does.
func MPICHCh3Dir(pmi2 bool) string {
	env, name := "PRUN_MPICH_CH3", "mpich-ch3"
	if pmi2 {
		env, name = "PRUN_MPICH_CH3_PMI2", "mpich-ch3-pmi2"
	}
	if d := os.Getenv(env); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "prun", name)
}

// commonFlags are passed to every compile.
var commonFlags = []string{"-O2", "-Wall"}

// String is the toolchain's directory name under bin/ctest.
func (tc Toolchain) String() string {
	switch tc {
	case OpenMPI:
		return "openmpi"
	case MPICH:
		return "mpich"
	case PMIx:
		return "pmix"
	case Plain:
		return "plain"
	case MPICHCh3:
		return "mpich-ch3"
	case MPICHCh3PMI2:
		return "mpich-ch3-pmi2"
	case PinnedPMIx:
		return "pinned-pmix"
	}
	return fmt.Sprintf("toolchain(%d)", int(tc))
}

// compiler returns the compiler and any extra flags that go after the
// source and output (libraries must follow the source for the linker).
func (tc Toolchain) compiler() (cc string, pre, post []string, err error) {
	switch tc {
	case OpenMPI:
		return "mpicc.openmpi", nil, nil, nil
	case MPICH:
		return "mpicc.mpich", nil, nil, nil
	case PMIx:
		cflags, libs, err := pmixFlags()
		return "gcc", cflags, libs, err
	case PinnedPMIx:
		cflags, libs, err := pinnedFlags()
		return "gcc", cflags, libs, err
	case Plain:
		return "gcc", nil, nil, nil
	case MPICHCh3, MPICHCh3PMI2:
		cc := filepath.Join(MPICHCh3Dir(tc == MPICHCh3PMI2), "bin", "mpicc")
		if _, err := os.Stat(cc); err != nil {
			return "", nil, nil, fmt.Errorf("%s not found: run `make mpich-ch3` (or `make test`), which builds it once", cc)
		}
		return cc, nil, nil, nil
	}
	return "", nil, nil, fmt.Errorf("ctest: unknown toolchain %d", int(tc))
}

var (
	rootOnce sync.Once
	root     string
)

// Root returns the repository root: the first directory at or above the
// working directory that holds go.mod (go test runs each package in its own
// directory). Falls back to the location of this source file.
func Root() string {
	rootOnce.Do(func() {
		if wd, err := os.Getwd(); err == nil {
			root = findGoMod(wd)
		}
		if root == "" {
			if _, file, _, ok := runtime.Caller(0); ok {
				root = findGoMod(filepath.Dir(file))
			}
		}
		if root == "" {
			panic("ctest: cannot find go.mod above the working directory")
		}
	})
	return root
}

func findGoMod(dir string) string {
	for {
		if st, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

var (
	pmixOnce           sync.Once
	pmixCflags, pmixLd []string
	pmixErr            error
)

// pmixFlags runs `pkg-config --cflags pmix` and `pkg-config --libs pmix`
// once per process.
func pmixFlags() (cflags, libs []string, err error) {
	pmixOnce.Do(func() {
		if _, err := exec.LookPath("pkg-config"); err != nil {
			pmixErr = fmt.Errorf("pkg-config not found (run `make deps`): %v", err)
			return
		}
		run := func(arg string) ([]string, error) {
			var stderr bytes.Buffer
			cmd := exec.Command("pkg-config", arg, "pmix")
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				return nil, fmt.Errorf("pkg-config %s pmix: %v: %s (is libpmix-dev installed? run `make deps`)",
					arg, err, strings.TrimSpace(stderr.String()))
			}
			return strings.Fields(string(out)), nil
		}
		if pmixCflags, pmixErr = run("--cflags"); pmixErr != nil {
			return
		}
		pmixLd, pmixErr = run("--libs")
	})
	return pmixCflags, pmixLd, pmixErr
}

// pinnedFlags runs `pkg-config --cflags --libs prun-pmix` once per process.
var pinnedFlags = func() func() ([]string, []string, error) {
	once := sync.OnceValues(func() ([]string, error) {
		out, err := exec.Command("pkg-config", "--cflags", "--libs", "prun-pmix").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("pkg-config prun-pmix: %v: %s (run the tests with make, which builds the pinned OpenPMIx and points pkg-config at it)",
				err, strings.TrimSpace(string(out)))
		}
		return strings.Fields(string(out)), nil
	})
	return func() ([]string, []string, error) {
		flags, err := once()
		// The library's own dependencies, as pmixsrv links them (its
		// archive names none): libevent, hwloc and zlib, and munge for its
		// security module.
		return flags, []string{"-l:libpmix.a", "-levent_core", "-levent_pthreads", "-lhwloc", "-lz", "-lmunge", "-lpthread", "-ldl"}, err
	}
}()

// Build compiles Root()/testdata/<src> with the given toolchain and returns
// the absolute path of the binary, named after src without its ".c". It
// fails the test (never skips) when the compiler is missing or the compile
// fails.
func Build(t testing.TB, tc Toolchain, src string) string {
	t.Helper()
	srcPath := filepath.Join(Root(), "testdata", src)
	srcSt, err := os.Stat(srcPath)
	if err != nil {
		t.Fatalf("ctest: %v", err)
	}
	name := strings.TrimSuffix(filepath.Base(src), ".c")
	dir := filepath.Join(Root(), "bin", "ctest", tc.String())
	bin := filepath.Join(dir, name)

	cc, pre, post, err := tc.compiler()
	if err != nil {
		t.Fatalf("ctest: %s: %v", tc, err)
	}
	ccPath, err := exec.LookPath(cc)
	if err != nil {
		t.Fatalf("ctest: compiler %s for %s not found (run `make deps`): %v", cc, tc, err)
	}
	// The stamp records the command line as if the output were bin itself.
	cmdline := func(out string) []string {
		args := append(append([]string{}, commonFlags...), pre...)
		args = append(args, "-o", out, srcPath)
		return append(args, post...)
	}
	stamp := ccPath + " " + strings.Join(cmdline(bin), " ") + "\n"

	if fresh(bin, stamp, srcSt) {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("ctest: %v", err)
	}
	// Serialise compiles of the same program across processes, then look
	// again: another process may have built it while we waited.
	unlock, err := LockFile(bin + ".lock")
	if err != nil {
		t.Fatalf("ctest: %v", err)
	}
	defer unlock()
	if fresh(bin, stamp, srcSt) {
		return bin
	}

	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		t.Fatalf("ctest: %v", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName) // no-op after a successful rename

	args := cmdline(tmpName)
	cmd := exec.Command(ccPath, args...)
	cmd.Dir = filepath.Join(Root(), "testdata")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ctest: compiling %s with %s failed: %v\n$ %s %s\n%s",
			src, tc, err, cc, strings.Join(args, " "), out)
	}
	if err := os.Chmod(tmpName, 0o755); err != nil {
		t.Fatalf("ctest: %v", err)
	}
	// Binary first, stamp last: a process that looks in between (without
	// the lock) sees a new binary with an old stamp and merely waits for the
	// lock, never a new stamp next to an old binary.
	if err := os.Rename(tmpName, bin); err != nil {
		t.Fatalf("ctest: %v", err)
	}
	if err := writeAtomic(bin+".cmd", []byte(stamp)); err != nil {
		t.Fatalf("ctest: %v", err)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		t.Logf("ctest: %s (%s): compiler output:\n%s", src, tc, out)
	}
	return bin
}

// fresh reports whether bin exists, is not older than the source and any
// testdata header, and was built with the command recorded in stamp.
func fresh(bin, stamp string, srcSt os.FileInfo) bool {
	binSt, err := os.Stat(bin)
	if err != nil || binSt.ModTime().Before(srcSt.ModTime()) {
		return false
	}
	old, err := os.ReadFile(bin + ".cmd")
	if err != nil || string(old) != stamp {
		return false
	}
	headers, _ := filepath.Glob(filepath.Join(Root(), "testdata", "*.h"))
	for _, h := range headers {
		if st, err := os.Stat(h); err == nil && binSt.ModTime().Before(st.ModTime()) {
			return false
		}
	}
	return true
}

// LockFile takes an exclusive flock on path (created if needed). flock locks
// belong to the open file description, so this also serialises goroutines of
// one process that each call it.
func LockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %v", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// writeAtomic writes data to a temporary file next to path and renames it.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
