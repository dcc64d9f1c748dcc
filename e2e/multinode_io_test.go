package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMultiNode's subtests of I/O and files: standard input, preloaded
// files, prun copied to the hosts.

func (m *mn) testStdin(t *testing.T) {
	// Rank 0 runs on prun-h1: the launcher's stdin travels the control plane.
	r := m.run(t, opts{args: []string{"--hostfile", m.hostfile, "-n", "3", "sh", "-c", `cat; echo "$PRUN_RANK done"`},
		stdin: strings.NewReader("line one\nline two\n")})
	expectCode(t, r, 0)
	got := lines(r.stdout)
	sort.Strings(got)
	want := []string{"0 done", "1 done", "2 done", "line one", "line two"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stdout %q, want %q (any order)\n%s", got, want, r)
	}
}

func (m *mn) testStdinWindow(t *testing.T) {
	// The launcher's stdin is endless and the only rank, on prun-h2,
	// reads nothing for 2 s: the launcher must stop reading at the
	// node's window instead of piling the stream up on the node.
	// The rank waits for the sample (its file), however late a busy
	// machine takes it.
	in := &endless{}
	goFile := filepath.Join(t.TempDir(), "go")
	type sample struct{ read, hwm int64 }
	got := make(chan sample, 1)
	go func() {
		defer os.WriteFile(goFile, nil, 0o644)
		pid := 0
		for deadline := time.Now().Add(30 * time.Second); pid == 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			pid = m.daemonPidOrZero("prun-h2")
		}
		time.Sleep(1500 * time.Millisecond) // the launcher reads what it will
		var hwm int64
		if pid > 0 {
			hwm = vmHWM(pid)
		}
		got <- sample{in.n.Load(), hwm}
	}()
	r := m.run(t, opts{args: []string{"--host", "prun-h2", "-n", "1", "sh", "-c",
		fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.1; done; head -c 5000000 >/dev/null && echo took 5 MB`, goFile)}, stdin: in})
	expectCode(t, r, 0)
	expectContains(t, "stdout", r.stdout, "took 5 MB\n")
	s := <-got
	t.Logf("1.5 s after the daemon started: the launcher had read %d bytes of stdin, prun-h2's daemon peak RSS %d MiB", s.read, s.hwm>>20)
	if s.read > 4<<20 {
		t.Errorf("the launcher read %d bytes of stdin while the rank read none; want at most a window (1 MiB) and buffers", s.read)
	}
	if s.hwm == 0 || s.hwm > 64<<20 {
		t.Errorf("prun-h2's daemon peak RSS %d bytes while the rank read nothing; want (0, 64 MiB]", s.hwm)
	}
	if n := in.n.Load(); n < 5000000 {
		t.Errorf("the launcher read only %d bytes of stdin; the rank took 5000000", n)
	}
}

func (m *mn) testStdinReaderGone(t *testing.T) {
	// --stdin all across two hosts; the rank on prun-h1 exits at once:
	// its node must stop holding the input back, or prun-h2's rank never
	// gets past the first window (1 MiB) and the job hangs.
	in := bytes.Repeat([]byte("0123456789abcdef\n"), 300000) // 5.1 MB
	r := m.run(t, opts{args: []string{"--host", "prun-h1,prun-h2", "-n", "2", "--map-by", "node", "--stdin", "all",
		"sh", "-c", `[ "$PRUN_RANK" = 0 ] && exit 0; wc -c`}, stdin: bytes.NewReader(in), timeout: 30 * time.Second})
	expectCode(t, r, 0)
	if got := strings.TrimSpace(r.stdout); got != strconv.Itoa(len(in)) {
		t.Errorf("the rank on prun-h2 read %q bytes, want %d\n%s", got, len(in), r)
	}
}

// -s and --preload-files where the hosts do not see the program or the
// file: each node runs a copy of the program from its session directory
// and finds the file in the working directory (shared here, so the
// nodes place it at once), which holds none of it after the job. Both
// are larger than a control message (16 MiB): they travel in chunks.
func (m *mn) testPreload(t *testing.T) {
	dir := m.c.LauncherOnly()
	// The shell stops at exit; the padding makes the program 12 MiB.
	app := filepath.Join(dir, "preloaded.sh")
	script := "#!/bin/sh\n" + `echo "$(hostname) $0 $(cat data.txt) $(cksum <big.bin)"` + "\nexit 0\n"
	pad := strings.Repeat("# "+strings.Repeat("x", 97)+"\n", 12<<20/100)
	if err := os.WriteFile(app, []byte(script+pad), 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data.txt")
	if err := os.WriteFile(data, []byte("payload\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.bin")
	rnd := make([]byte, 20<<20+12345)
	rand.NewChaCha8([32]byte{1}).Read(rnd)
	if err := os.WriteFile(big, rnd, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(app)
	defer os.Remove(data)
	defer os.Remove(big)
	sum, err := exec.Command("sh", "-c", "cksum <"+big).Output()
	if err != nil {
		t.Fatal(err)
	}
	wdir := t.TempDir()
	r := m.run(t, opts{args: []string{"-s", "--preload-files", data + "," + big, "--wdir", wdir,
		"--hostfile", m.hostfile, "-n", "4", "--map-by", "node", app}})
	expectCode(t, r, 0)
	for i, l := range linePerHost(t, r, 4) {
		f := strings.Fields(l)
		if len(f) != 5 || f[0] != m.hosts[i] || !strings.HasPrefix(f[1], m.c.TmpDir(m.hosts[i])) ||
			!strings.HasSuffix(f[1], "preloaded.sh") || f[2] != "payload" || f[3]+" "+f[4] != strings.TrimSpace(string(sum)) {
			t.Errorf("rank on %s: %q; want the program run from a copy in that host's $TMPDIR (%s) reading the files sent (cksum %s)",
				m.hosts[i], l, m.c.TmpDir(m.hosts[i]), strings.TrimSpace(string(sum)))
		}
	}
	if ents, _ := os.ReadDir(wdir); len(ents) != 0 {
		t.Errorf("the working directory holds %v after the job; want nothing", ents)
	}
}

// A preload that takes longer than the job's --timeout (a sparse 1 GiB
// file: nothing to write here, a gigabyte for each host to store) is
// given up at the deadline, or at Ctrl-C: no rank starts, nothing stays
// on the hosts.
func (m *mn) testPreloadTimeout(t *testing.T) {
	big := filepath.Join(m.c.LauncherOnly(), "sparse.bin")
	f, err := os.Create(big)
	if err == nil {
		err = f.Truncate(1 << 30)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(big)
	started := filepath.Join(t.TempDir(), "started")
	r := m.run(t, opts{args: []string{"--timeout", "1", "--preload-files", big, "--hostfile", m.hostfile, "-n", "4", "--map-by", "node",
		"touch", started}})
	expectCode(t, r, 124)
	if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], "timed out after 1s while the preloaded files were sent; no rank had started") {
		t.Errorf("stderr %q; want one line saying the preload timed out", r.stderr)
	}
	if r.dur > 3*time.Second { // sending it all takes much longer
		t.Errorf("prun took %v to give up a preload at its 1 s timeout", r.dur)
	}
	if testing.Verbose() {
		t.Logf("gave up after %v", r.dur)
	}
	if _, err := os.Stat(started); err == nil {
		t.Error("a rank ran")
	}

	// Ctrl-C while sending gives it up as well, at once.
	p := startPrun(t, opts{args: []string{"--preload-files", big, "--hostfile", m.hostfile, "-n", "4", "--map-by", "node",
		"touch", started}, env: m.env()})
	m.waitStaging(t, 10*time.Second) // not a fixed wait: daemons start slower on a busy machine
	sent := time.Now()
	p.signal(syscall.SIGINT)
	r = p.wait()
	expectCode(t, r, 130)
	if ls := lines(r.stderr); len(ls) != 1 || !strings.Contains(ls[0], "received SIGINT while the preloaded files were sent; no rank had started") {
		t.Errorf("stderr %q; want one line saying the preload was interrupted", r.stderr)
	}
	if d := time.Since(sent); d > 2*time.Second {
		t.Errorf("prun took %v to give up a preload at SIGINT", d)
	}
	if _, err := os.Stat(started); err == nil {
		t.Error("a rank ran")
	}
	m.checkClean(t, 10*time.Second)
}

func (m *mn) testCopyPrun(t *testing.T) {
	// prun where the hosts do not have it: the launcher sends itself to
	// its child, each daemon to its own (a chain), and each session
	// removes its copy at the end (m.run checks that nothing is left).
	bin := filepath.Join(m.c.LauncherOnly(), "prun")
	copyFile(t, prunBin, bin)
	defer os.Remove(bin)
	copyFile(t, filepath.Join(filepath.Dir(prunBin), "prun-ssh"), filepath.Join(m.c.LauncherOnly(), "prun-ssh"))
	defer os.Remove(filepath.Join(m.c.LauncherOnly(), "prun-ssh"))
	r := m.run(t, opts{bin: bin, args: []string{"--launch-fanout", "1", "--hostfile", m.hostfile, "-n", "4", "--map-by", "node",
		"sh", "-c", `echo "$(hostname) $(readlink /proc/$PPID/exe)"`}})
	expectCode(t, r, 0)
	for i, l := range linePerHost(t, r, 4) {
		host, exe, _ := strings.Cut(l, " ")
		if host != m.hosts[i] || !strings.Contains(exe, "/prun.bin.") || !strings.HasPrefix(exe, m.c.TmpDir(host)) {
			t.Errorf("rank on %s ran under daemon %q; want a copy in that host's $TMPDIR (%s)", host, exe, m.c.TmpDir(host))
		}
	}
}

func (m *mn) testCopyPrunFails(t *testing.T) {
	// prun-h3 cannot take the copy (its $TMPDIR is gone): one line
	// naming it and why, and nothing left on the others.
	bin := filepath.Join(m.c.LauncherOnly(), "prun")
	copyFile(t, prunBin, bin)
	defer os.Remove(bin)
	copyFile(t, filepath.Join(filepath.Dir(prunBin), "prun-ssh"), filepath.Join(m.c.LauncherOnly(), "prun-ssh"))
	defer os.Remove(filepath.Join(m.c.LauncherOnly(), "prun-ssh"))
	tmp := m.c.TmpDir("prun-h3")
	if err := os.Rename(tmp, tmp+".away"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(tmp+".away", tmp)
	r := m.run(t, opts{bin: bin, args: []string{"--hostfile", m.hostfile, "-n", "4", "--map-by", "node", "true"}})
	if r.code == 0 {
		t.Fatalf("exit 0 without a daemon on prun-h3\n%s", r)
	}
	expectContains(t, "stderr", r.stderr, "prun-h3: "+bin+" not found there, and a copy of prun could not be stored there: mktemp:")
	if n := len(lines(r.stderr)); n != 1 {
		t.Errorf("stderr has %d lines, want 1\n%s", n, r)
	}
}
