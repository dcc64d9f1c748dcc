package ctest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRoot(t *testing.T) {
	if _, err := os.Stat(filepath.Join(Root(), "go.mod")); err != nil {
		t.Fatalf("Root() = %s: %v", Root(), err)
	}
}

func TestBuild(t *testing.T) {
	for _, c := range []struct {
		tc  Toolchain
		src string
	}{
		{OpenMPI, "hello.c"},
		{PMIx, "keys.c"},
	} {
		bin := Build(t, c.tc, c.src)
		want := filepath.Join(Root(), "bin", "ctest", c.tc.String(), c.src[:len(c.src)-2])
		if bin != want {
			t.Errorf("Build(%s, %s) = %s, want %s", c.tc, c.src, bin, want)
		}
		st, err := os.Stat(bin)
		if err != nil {
			t.Fatalf("Build(%s, %s): %v", c.tc, c.src, err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s: mode %v, want an executable regular file", bin, st.Mode())
		}
		// A second call finds the binary fresh and does not rebuild it.
		if again := Build(t, c.tc, c.src); again != bin {
			t.Errorf("second Build = %s, want %s", again, bin)
		}
		if st2, err := os.Stat(bin); err != nil || !st2.ModTime().Equal(st.ModTime()) {
			t.Errorf("%s was rebuilt although it was up to date", bin)
		}
	}
}
