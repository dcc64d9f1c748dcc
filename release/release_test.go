// Package release holds the release build (build.sh, `make release`) and its
// test: the tarball's programs start on glibc 2.31 (Debian 11, Ubuntu 20.04,
// RHEL 9), which the machine's own build (glibc 2.36 and later) does not.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"prun/cli"
)

// maxGlibc is the newest glibc symbol version a release program may need:
// Debian 11's glibc, the oldest the release supports.
var maxGlibc = []int{2, 31}

// glibcLibs are the shared libraries a release program may need: glibc's
// own, which every glibc system has. Before glibc 2.34 pthreads, dlopen,
// openpty and the resolver lived in libraries of their own (later ones keep
// them as empty stubs); a program built against 2.31 names them. Any other
// library (munge, udev, libevent, hwloc...) would be missing on some node.
var glibcLibs = []string{"libc.so.6", "ld-linux-x86-64.so.2", "libpthread.so.0", "libdl.so.2", "libutil.so.1", "libresolv.so.2"}

// The tarball's files under its one directory, and their modes.
var layout = map[string]os.FileMode{
	"bin/prun":                               0o755,
	"bin/prun-ssh":                           0o755,
	"bin/prun-top":                           0o755,
	"share/man/man1/prun.1":                  0o644,
	"share/bash-completion/completions/prun": 0o644,
	"share/zsh/site-functions/_prun":         0o644,
}

// TestRelease runs the release build (release/build.sh: the Debian 11 root,
// its OpenPMIx and Go's build cache inside it are kept, so that a build of
// unchanged sources only links), then checks the tarball's layout, that its
// programs need no glibc symbol above 2.31 and no library but glibc's, and
// that its prun runs a job, and a PMIx client built there, inside the root.
func TestRelease(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the release build needs root: it builds in a chroot (make test runs as root)")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	root := bullseyeRoot(t)
	out := t.TempDir()
	start := time.Now()
	if o, err := run(30*time.Minute, filepath.Join(repo, "release", "build.sh"), root, out); err != nil {
		t.Fatalf("release/build.sh: %v\n%s", err, tail(o, 60))
	}
	t.Logf("release/build.sh took %s", time.Since(start).Round(time.Second))
	tarballs, _ := filepath.Glob(filepath.Join(out, "prun-*-linux-x86_64.tar.gz"))
	if len(tarballs) != 1 {
		t.Fatalf("release/build.sh wrote %q, want one prun-VERSION-linux-x86_64.tar.gz", tarballs)
	}
	top := strings.TrimSuffix(filepath.Base(tarballs[0]), ".tar.gz")

	// Unpacked inside the root, where it runs below.
	dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "prun-release-test.")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	unpack(t, tarballs[0], top, dir)

	for _, p := range []string{"bin/prun", "bin/prun-ssh", "bin/prun-top"} {
		checkELF(t, p, filepath.Join(dir, p))
	}
	man, err := os.ReadFile(filepath.Join(dir, "share/man/man1/prun.1"))
	if want, _ := os.ReadFile(filepath.Join(repo, "docs", "prun.1")); err != nil || !bytes.Equal(man, want) {
		t.Errorf("share/man/man1/prun.1 is not docs/prun.1 (%v)", err)
	}
	for p, want := range map[string]string{
		"share/bash-completion/completions/prun": "complete ",
		"share/zsh/site-functions/_prun":         "#compdef prun",
	} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s has no %q (%v)", p, want, err)
		}
	}
	if t.Failed() {
		return
	}
	// The commit, which Go could not stamp in the root: the linker's.
	if o, err := exec.Command("git", "-C", repo, "rev-parse", "--short=7", "HEAD").Output(); err != nil {
		t.Errorf("git rev-parse: %v", err)
	} else if v, err := exec.Command(filepath.Join(dir, "bin/prun"), "--version").Output(); err != nil ||
		!strings.HasPrefix(string(v), "prun "+cli.Version+" (commit "+strings.TrimSpace(string(o))) {
		t.Errorf("the release prun --version: %v, want its commit %s\n%s", err, bytes.TrimSpace(o), v)
	}

	// The release prun on Debian 11's glibc.
	if o, err := chroot(root, "getconf", "GNU_LIBC_VERSION"); err != nil || strings.TrimSpace(o) != "glibc 2.31" {
		t.Fatalf("getconf GNU_LIBC_VERSION in the root: %v %q, want glibc 2.31", err, o)
	}
	inRoot := "/" + strings.TrimPrefix(strings.TrimPrefix(dir, root), "/")
	prun := inRoot + "/bin/prun"
	host, _ := os.Hostname()
	o, err := chroot(root, prun, "-n", "2", "hostname")
	if err != nil || strings.Count(o, host+"\n") != 2 {
		t.Errorf("prun -n 2 hostname in the Debian 11 root: %v, want %q twice\n%s", err, host, o)
	}

	// A PMIx client, built in the root on the pinned OpenPMIx that
	// release/build.sh built there, fences through the release prun's server.
	src, err := os.ReadFile(filepath.Join(repo, "testdata", "fence.c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fence.c"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	pmix := "/root/.cache/prun/openpmix-" + pmixHash(t, repo)
	if o, err := chroot(root, "sh", "-c", `cd "$1" && PKG_CONFIG_PATH="$2/lib/pkgconfig" && export PKG_CONFIG_PATH &&
		gcc -O2 -Wall -o fence fence.c $(pkg-config --cflags --libs prun-pmix) -l:libpmix.a \
			-levent_core -levent_pthreads -lhwloc -lz -lmunge -lpthread -ldl -lutil`, "sh", inRoot, pmix); err != nil {
		t.Fatalf("building testdata/fence.c in the root: %v\n%s", err, o)
	}
	o, err = chroot(root, prun, "-n", "2", inRoot+"/fence", "data", "64")
	if err != nil || !strings.Contains(o, "fence: rank 0 ok") || !strings.Contains(o, "fence: rank 1 ok") {
		t.Errorf("prun -n 2 fence data 64 in the Debian 11 root: %v\n%s", err, o)
	}
}

// bullseyeRoot is the Debian 11 root the Makefile's `release` builds in:
// under the user's cache directory, as the Makefile's CACHE.
func bullseyeRoot(t *testing.T) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(cache, "prun", "debian-bullseye")
}

// pmixHash is the pinned OpenPMIx recipe's hash, as the Makefile and
// release/build.sh compute it.
func pmixHash(t *testing.T, repo string) string {
	cmd := exec.Command("sh", "-c", "cat openpmix/build.sh openpmix/pin openpmix/patches/*.patch | sha256sum | cut -c1-12")
	cmd.Dir = repo
	o, err := cmd.Output()
	if err != nil {
		t.Fatalf("the OpenPMIx recipe's hash: %v", err)
	}
	return strings.TrimSpace(string(o))
}

// unpack extracts the tarball, whose entries must all be under top/, into
// dir, and checks that it holds the layout's files with their modes.
func unpack(t *testing.T, tarball, top, dir string) {
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(z)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", tarball, err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		rel, ok := strings.CutPrefix(name, top+"/")
		if name == top {
			continue
		}
		if !ok || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: entry %s (owner %d:%d): want everything under %s/, owned by root", tarball, h.Name, h.Uid, h.Gid, top)
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			mode, want := layout[rel]
			if !want {
				t.Errorf("%s: unexpected file %s", tarball, h.Name)
				continue
			}
			if h.FileInfo().Mode().Perm() != mode {
				t.Errorf("%s: %s has mode %v, want %v", tarball, h.Name, h.FileInfo().Mode().Perm(), mode)
			}
			seen[rel] = true
			w, err := os.OpenFile(filepath.Join(dir, rel), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err == nil {
				_, err = io.Copy(w, tr)
				if cerr := w.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s: %s is neither a file nor a directory", tarball, h.Name)
		}
	}
	for rel := range layout {
		if !seen[rel] {
			t.Errorf("%s has no %s/%s", tarball, top, rel)
		}
	}
}

// checkELF fails the test when the program at path is not x86-64 with the
// usual interpreter, needs a library that is not glibc's, or a glibc symbol
// version above maxGlibc (the symbols that need it are named).
func checkELF(t *testing.T, name, path string) {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		t.Errorf("%s: %v %v, want an x86-64 program", name, f.Class, f.Machine)
	}
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(p.Open())
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if interp != "/lib64/ld-linux-x86-64.so.2" {
		t.Errorf("%s: interpreter %q, want /lib64/ld-linux-x86-64.so.2", name, interp)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, l := range libs {
		if !slices.Contains(glibcLibs, l) {
			t.Errorf("%s needs %s (all: %s); only glibc's libraries are on every node", name, l, strings.Join(libs, " "))
		}
	}
	needs, err := f.DynamicVersionNeeds()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	newest := ""
	for _, n := range needs {
		if !slices.Contains(glibcLibs, n.Name) {
			t.Errorf("%s needs versions of %s, which is not glibc's", name, n.Name)
		}
		for _, d := range n.Needs {
			if ok, known := glibcVersionOK(d.Dep); !ok {
				var users []string
				for _, s := range syms {
					if s.Version == d.Dep && s.Section == elf.SHN_UNDEF {
						users = append(users, s.Name)
					}
				}
				why := "above GLIBC_2.31"
				if !known {
					why = "not a glibc release"
				}
				t.Errorf("%s needs %s of %s (%s): %s", name, d.Dep, n.Name, why, strings.Join(users, " "))
			} else if newest == "" || glibcNewer(d.Dep, newest) {
				newest = d.Dep
			}
		}
	}
	t.Logf("%s: needs %s; newest glibc version %s", name, strings.Join(libs, " "), newest)
}

// glibcVersion parses GLIBC_X.Y[.Z].
func glibcVersion(v string) ([]int, bool) {
	rest, ok := strings.CutPrefix(v, "GLIBC_")
	if !ok {
		return nil, false
	}
	var n []int
	for _, f := range strings.Split(rest, ".") {
		i, err := strconv.Atoi(f)
		if err != nil {
			return nil, false
		}
		n = append(n, i)
	}
	return n, true
}

// glibcVersionOK says whether v is a glibc release's version (known) no newer
// than maxGlibc (ok).
func glibcVersionOK(v string) (ok, known bool) {
	n, known := glibcVersion(v)
	return known && slices.Compare(n, maxGlibc) <= 0, known
}

func glibcNewer(a, b string) bool {
	x, _ := glibcVersion(a)
	y, _ := glibcVersion(b)
	return slices.Compare(x, y) > 0
}

// chroot runs args inside root, as on a Debian 11 machine: its own /proc,
// the machine's /dev and /sys, in a private mount namespace and a PID
// namespace that end with it (nothing stays mounted or running).
func chroot(root string, args ...string) (string, error) {
	return run(2*time.Minute, "unshare", append([]string{"--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--",
		"sh", "-c", `mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" && mount --rbind /sys "$1/sys" &&
			root=$1 && shift && chroot "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root TMPDIR=/tmp "$@"`,
		"sh", root}, args...)...)
}

// run runs a command in a process group of its own, all of which is killed
// when it takes longer than limit, and returns its combined output.
func run(limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (killed after %s)", err, limit)
	}
	return b.String(), err
}

// tail is s's last n lines.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
