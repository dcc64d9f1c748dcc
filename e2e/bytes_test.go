package e2e

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// TestExactBytes: what a rank is given (arguments, environment names and
// values, working directory, program path, the names of --preload-files)
// arrives on another node byte for byte, every byte value from 1 to 255
// included, as it does on the launcher's own node. testdata/showbytes.c
// prints it all as hex.
func TestExactBytes(t *testing.T) {
	var every []byte // 1..255
	for i := 1; i < 256; i++ {
		every = append(every, byte(i))
	}
	notIn := func(drop string) string {
		var b []byte
		for _, c := range every {
			if strings.IndexByte(drop, c) < 0 {
				b = append(b, c)
			}
		}
		return string(b)
	}

	prog, wdir, preload := exactBytesFiles(t, notIn)

	args := []string{string(every), "x\xffy", "", "a\xff\xfeb"}
	// -x takes POSIX names; Hydra's -genvall passes any (in the bootstrap).
	nameV, nameN := "PRUNB_V", "PRUNB_"+notIn("=")
	env := []string{nameV + "=" + string(every), nameN + "=" + "n\xff", "PRUNB_W=a\xff\xfeb"}
	prunArgs := func(host string) []string {
		return append([]string{"-H", host, "-n", "1", "--wdir", wdir, "--preload-files", preload,
			"-x", nameV, "-x", "PRUNB_W", "-genvall", prog}, args...)
	}

	// What showbytes must print.
	h := func(s string) string { return hex.EncodeToString([]byte(s)) }
	var want []string
	for i, a := range args {
		want = append(want, fmt.Sprintf("arg %d %s", i+1, h(a)))
	}
	var envHex []string
	for _, kv := range env {
		envHex = append(envHex, "env "+h(kv))
	}
	sort.Strings(envHex)
	want = append(want, envHex...)
	want = append(want, "cwd "+h(wdir), "exe "+h(prog), "file "+h(filepath.Base(preload)))
	check := func(t *testing.T, where string, r *result) { t.Helper(); expectLinesExactly(t, where, r, want) }

	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts()}
	remote := m.run(t, opts{args: prunArgs("prun-h2"), env: env})
	check(t, "prun-h2", remote)
	os.Remove(filepath.Join(wdir, filepath.Base(preload)))
	local := run(t, opts{args: prunArgs("localhost"), env: env})
	check(t, "this node", local)
	if remote.stdout != local.stdout {
		t.Errorf("a rank on prun-h2 was given\n%s\non this node\n%s", remote.stdout, local.stdout)
	}

	// A spawn request carries them too: a rank on prun-h2 spawns showbytes
	// on prun-h3 (testdata/spawnbytes.c: PMIx_Spawn with PRUNB_S set to
	// every byte, in its own working directory). The spawning rank's own
	// program and directory are plain: only the request has the bytes.
	spawner := ctest.Build(t, ctest.PMIx, "spawnbytes.c")
	plainDir := t.TempDir()
	wantSpawn := append([]string(nil), want[:len(args)]...)
	wantSpawn = append(wantSpawn, "env "+h("PRUNB_S="+string(every)), "cwd "+h(plainDir), "exe "+h(prog))
	spawnRun := func(t *testing.T, hosts, child string, r func(*testing.T, opts) *result) string {
		res := r(t, opts{args: append([]string{"-H", hosts, "-n", "1", "--wdir", plainDir, spawner, child, prog}, args...)})
		expectCode(t, res, 0)
		expectContains(t, "stderr", res.stderr, "spawnbytes: spawned ")
		t.Logf("spawn on %s: %v", child, res.dur.Round(time.Millisecond))
		var got []string
		for _, l := range lines(res.stdout) {
			if !strings.HasPrefix(l, "file ") {
				got = append(got, l)
			}
		}
		if strings.Join(got, "\n") != strings.Join(wantSpawn, "\n") {
			t.Errorf("spawned on %s: got\n%.2000s\nwant\n%.2000s", child, strings.Join(got, "\n"), strings.Join(wantSpawn, "\n"))
		}
		return strings.Join(got, "\n")
	}
	t.Run("spawn", func(t *testing.T) {
		remote := spawnRun(t, "prun-h2:1,prun-h3:1", "prun-h3", m.run)
		local := spawnRun(t, "localhost:2", "localhost", run)
		if remote != local {
			t.Errorf("spawned on prun-h3:\n%s\non this node:\n%s", remote, local)
		}
	})
}

// exactBytesFiles makes TestExactBytes's files: the program, at a path
// that is not UTF-8; a working directory named with every byte a name may
// hold; a file to preload named with bytes that are not UTF-8 (no ',':
// --preload-files is a list).
func exactBytesFiles(t *testing.T, notIn func(drop string) string) (prog, wdir, preload string) {
	tmp := t.TempDir()
	progDir := filepath.Join(tmp, "bin\xff\xfe")
	wdir = filepath.Join(tmp, notIn("/"))
	srcDir := filepath.Join(tmp, "src")
	for _, d := range []string{progDir, wdir, srcDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prog = filepath.Join(progDir, "show\xe9")
	copyFile(t, ctest.Build(t, ctest.Plain, "showbytes.c"), prog)
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	// (Not 255 bytes: prun places it through a temporary name beside it.)
	preload = filepath.Join(srcDir, "f\xff\x80"+notIn("/,\xff\x80")[:100]+notIn("/,\xff\x80")[150:])
	if err := os.WriteFile(preload, []byte("sent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return prog, wdir, preload
}

// expectLinesExactly checks that r succeeded and printed want's lines.
func expectLinesExactly(t *testing.T, where string, r *result, want []string) {
	t.Helper()
	expectCode(t, r, 0)
	got := lines(r.stdout)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		for i := range max(len(got), len(want)) {
			g, w := "", ""
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("%s: line %d:\n got %.200s\nwant %.200s", where, i+1, g, w)
			}
		}
	}
}
