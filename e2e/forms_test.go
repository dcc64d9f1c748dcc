package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"prun/internal/ctest"
)

// The --output forms, through a real prun (their exact bytes are golden
// tests in iof; here: the wiring, files, and order).
func TestOutputForms(t *testing.T) {
	t.Parallel()
	script := writeScript(t, t.TempDir(), "say.sh", `sleep 0.$((3 - PRUN_RANK)); echo "out $PRUN_RANK"; echo "err $PRUN_RANK" >&2`)

	r := run(t, opts{args: []string{"--output", "json", "-n", "3", script}})
	expectCode(t, r, 0)
	var n int
	for _, l := range lines(r.stdout) {
		var rec struct {
			Rank   int    `json:"rank"`
			Stream string `json:"stream"`
			Text   string `json:"text"`
			Host   string `json:"host"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("json form: %q: %v", l, err)
		}
		if want := fmt.Sprintf("%s %d", map[string]string{"stdout": "out", "stderr": "err"}[rec.Stream], rec.Rank); rec.Text != want || rec.Host == "" {
			t.Errorf("json record %+v, want text %q", rec, want)
		}
		n++
	}
	if n != 6 {
		t.Errorf("json: %d records, want 6\n%s", n, r)
	}

	r = run(t, opts{args: []string{"--output", "ordered,merge-stderr-to-stdout", "-n", "3", script}})
	expectCode(t, r, 0)
	// Ranks finish in reverse; ordered prints rank 0's lines, then 1's, then
	// 2's. (A rank's stdout and stderr are two pipes: their relative order
	// within the rank is not defined.)
	var ranks []string
	for _, l := range lines(r.stdout) {
		ranks = append(ranks, l[len(l)-1:])
	}
	if got := strings.Join(ranks, ""); got != "001122" {
		t.Errorf("ordered: ranks in order %q, want 001122\n%s", got, r)
	}

	r = run(t, opts{args: []string{"--tag-output", "--timestamp-output", "-n", "1", script}})
	expectCode(t, r, 0)
	if l := lines(r.stdout); len(l) != 1 || !strings.HasSuffix(l[0], " [0,0]<stdout>:out 0") || !strings.HasPrefix(l[0], "20") {
		t.Errorf("timestamp+tag: %q", r.stdout)
	}
	r = run(t, opts{args: []string{"-l", "-n", "2", script}})
	expectContains(t, "rank form", r.stdout, "[1] out 1")

	// As with mpirun: DIR/1/rank.N/stdout|stderr, and the terminal keeps
	// a copy unless :nocopy.
	dir := t.TempDir()
	r = run(t, opts{args: []string{"--output-filename", dir, "-n", "2", script}})
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "out 1") || !strings.Contains(r.stderr, "err 0") {
		t.Errorf("dir form without :nocopy left the terminal out:\n%s", r)
	}
	r = run(t, opts{args: []string{"--output-filename", dir + ":nocopy", "-n", "2", script}})
	expectCode(t, r, 0)
	if r.stdout != "" || r.stderr != "" {
		t.Errorf("dir form with :nocopy also wrote the terminal:\n%s", r)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "1", "rank.*", "std*"))
	if len(files) != 4 {
		t.Fatalf("dir form files: %v", files)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		rank := filepath.Base(filepath.Dir(f))[len("rank."):]
		want := map[string]string{"stdout": "out ", "stderr": "err "}[filepath.Base(f)] + rank + "\n"
		if string(b) != want {
			t.Errorf("%s = %q, want %q", f, b, want)
		}
	}
	prefix := filepath.Join(t.TempDir(), "log")
	r = run(t, opts{args: []string{"--output", "file=" + prefix, "-n", "2", script}})
	expectCode(t, r, 0)
	if b, _ := os.ReadFile(prefix + ".1.err"); string(b) != "err 1\n" {
		t.Errorf("file form: %s.1.err = %q", prefix, b)
	}
}

// prunRSS runs prun with the given stdout and returns its own peak RSS in
// KiB (VmHWM, sampled while it runs: wait4's maxrss would also count the
// memory of the test binary that forked it); a non-zero exit is an error.
func prunRSS(t *testing.T, dir string, stdout *os.File, args ...string) int64 {
	t.Helper()
	cmd := exec.Command(prunBin, args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), "TMPDIR="+t.TempDir(), "NO_COLOR=1")
	cmd.Stdout = stdout
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(120*time.Second, func() { cmd.Process.Kill() })
	done := make(chan struct{})
	peak := make(chan int64, 1)
	go func() {
		var kib int64
		for {
			kib = max(kib, vmHWM(cmd.Process.Pid)>>10)
			select {
			case <-done:
				peak <- kib
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	cmd.Wait()
	close(done)
	timer.Stop()
	if cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("prun %v: exit %d\n%s", args, cmd.ProcessState.ExitCode(), stderr.String())
	}
	return <-peak
}

// Memory stays bounded whatever the output: a slow reader back-pressures the
// ranks, and a 50 MB line without a newline passes through whole.
func TestOutputMemoryBounded(t *testing.T) {
	bin := ctest.Build(t, ctest.Plain, "spew.c")
	dir, prog := filepath.Dir(bin), "./"+filepath.Base(bin)
	const limitKiB = 64 << 10

	// A consumer that sleeps before reading.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int64, 1)
	go func() {
		time.Sleep(2 * time.Second)
		buf := make([]byte, 1<<16)
		var n int64
		for {
			k, err := pr.Read(buf)
			n += int64(k)
			if err != nil {
				got <- n
				return
			}
		}
	}()
	rss := prunRSS(t, dir, pw, "--tag-output", "-n", "4", prog, "20000000")
	if rss == 0 {
		t.Fatal("could not sample prun's memory")
	}
	t.Logf("slow consumer: prun peak RSS %d KiB", rss)
	pw.Close()
	if n := <-got; n < 80000000 {
		t.Errorf("slow consumer read %d bytes, want all of 4 x 20 MB (plus tags)", n)
	}
	if rss > limitKiB {
		t.Errorf("slow consumer: peak RSS %d KiB, want under %d", rss, limitKiB)
	}

	// One 50 MB line with no newline.
	out, err := os.Create(filepath.Join(t.TempDir(), "line"))
	if err != nil {
		t.Fatal(err)
	}
	rss = prunRSS(t, dir, out, "-n", "1", prog, "50000000", "0")
	out.Close()
	t.Logf("50 MB line: prun peak RSS %d KiB", rss)
	if st, _ := os.Stat(out.Name()); st.Size() != 50000000 {
		t.Errorf("50 MB line arrived as %d bytes", st.Size())
	}
	if rss > limitKiB {
		t.Errorf("50 MB line: peak RSS %d KiB, want under %d", rss, limitKiB)
	}
}

// Eight ranks writing at once: every line intact and in order per rank.
func TestLineIntegrity8(t *testing.T) {
	t.Parallel()
	bin := ctest.Build(t, ctest.Plain, "spew.c")
	r := run(t, opts{args: []string{"-n", "8", "./" + filepath.Base(bin), "2000000", "137"}, dir: filepath.Dir(bin)})
	expectCode(t, r, 0)
	next := map[string]int{}
	count := 0
	for _, l := range lines(r.stdout) {
		var rank string
		var n int
		if _, err := fmt.Sscanf(l, "rank %s line %d ", &rank, &n); err != nil || len(l) != 136 || strings.Trim(l[strings.LastIndexByte(l, ' ')+1:], "x") != "" {
			t.Fatalf("broken line %q", l)
		}
		if n != next[rank] {
			t.Fatalf("rank %s: line %d after %d", rank, n, next[rank]-1)
		}
		next[rank]++
		count++
	}
	if len(next) != 8 || count < 8*14000 {
		t.Errorf("%d ranks, %d lines", len(next), count)
	}
}

// mpirun's --xml: the same elements as mpirun.openmpi prints, all on
// stdout (their order between ranks is the run's).
func TestXMLLikeMpirun(t *testing.T) {
	t.Parallel()
	prog := []string{"-n", "2", "sh", "-c", `echo "a <&> \"$OMPI_COMM_WORLD_RANK\""; echo err >&2; printf 'x\ty\n'`}
	r := run(t, opts{args: append([]string{"--xml"}, prog...)})
	expectCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("stderr %q", r.stderr)
	}
	cmd := exec.Command("mpirun.openmpi", append([]string{"--allow-run-as-root", "--xml"}, prog...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mpirun.openmpi: %v", err)
	}
	sorted := func(s string) []string {
		l := lines(s)
		sort.Strings(l)
		return l
	}
	if got, want := sorted(r.stdout), sorted(string(out)); !slices.Equal(got, want) {
		t.Errorf("prun --xml:\n%s\nmpirun.openmpi --xml:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(r.stdout, "<mpirun>\n") || !strings.HasSuffix(r.stdout, "</mpirun>\n") {
		t.Errorf("not one <mpirun> element:\n%s", r.stdout)
	}
}
