package pmixsrv

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// libmunge and libudev load at their first call (lazylibs.c), and then
// answer as if linked: both are installed wherever prun builds.
func TestLazyLibs(t *testing.T) {
	snafu, udev := lazyLibs()
	if snafu != "Internal error" {
		t.Errorf("munge_strerror(EMUNGE_SNAFU) = %q, want libmunge's %q", snafu, "Internal error")
	}
	if !udev {
		t.Error("udev_new: no udev context")
	}
}

// A program linked with this package needs no shared library but libc:
// every other one would be loaded and relocated at every prun start.
func TestLinkedLibraries(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "prun")
	cmd := exec.Command("go", "build", "-o", bin, "prun/cmd/prun")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	glibc := []string{"libc.so.6", "ld-linux-x86-64.so.2"}
	for _, l := range libs {
		if !slices.Contains(glibc, l) {
			t.Errorf("prun needs %s (all: %s); only glibc's are loaded at start", l, strings.Join(libs, " "))
		}
	}
}

// A client is told to authenticate natively whenever the server offers it.
func TestNativeSecurity(t *testing.T) {
	for in, want := range map[string]string{
		"PMIX_SECURITY_MODE=munge,native": "PMIX_SECURITY_MODE=native",
		"PMIX_SECURITY_MODE=native":       "PMIX_SECURITY_MODE=native",
		"PMIX_SECURITY_MODE=munge":        "PMIX_SECURITY_MODE=munge",
		"PMIX_SECURITY_MODE=nativex":      "PMIX_SECURITY_MODE=nativex",
	} {
		env := nativeSecurity([]string{"PMIX_RANK=0", in, "X=PMIX_SECURITY_MODE=munge,native"})
		if env[1] != want || env[0] != "PMIX_RANK=0" || env[2] != "X=PMIX_SECURITY_MODE=munge,native" {
			t.Errorf("nativeSecurity(%q) = %q, want %q among the rest unchanged", in, env, want)
		}
	}
}
