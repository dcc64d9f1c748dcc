package e2e

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"prun/internal/cluster"
	"prun/internal/ctest"
)

// patternStream is what testdata/pattern.c writes as rank with those
// arguments: cycles times a line of each length in lens.
func patternStream(rank, cycles int, lens ...int) []byte {
	var b bytes.Buffer
	n := 0
	for c := 0; c < cycles; c++ {
		for _, l := range lens {
			head := fmt.Sprintf("r%d l%d ", rank, n)
			line := make([]byte, l)
			for k := 0; k < l-1; k++ {
				if k < len(head) {
					line[k] = head[k]
				} else {
					line[k] = byte('a' + (7*n+k+3*rank)%26)
				}
			}
			line[l-1] = '\n'
			b.Write(line)
			n++
		}
	}
	return b.Bytes()
}

func patternArgs(bin string, cycles int, lens ...int) []string {
	args := []string{bin, strconv.Itoa(cycles)}
	for _, l := range lens {
		args = append(args, strconv.Itoa(l))
	}
	return args
}

// stallWriter is a reader of prun's stdout that reads nothing for stall,
// then everything: prun's stdout pipe stays full meanwhile.
type stallWriter struct {
	start time.Time
	stall time.Duration
	mu    sync.Mutex
	buf   bytes.Buffer
}

func (w *stallWriter) Write(p []byte) (int, error) {
	time.Sleep(time.Until(w.start.Add(w.stall)))
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// runStalled runs prun with a stdout reader that stalls for stall, and
// checks, as run does, that nothing of the job is left on this machine.
func runStalled(t *testing.T, env []string, args []string, stall, timeout time.Duration) *result {
	t.Helper()
	tmp := t.TempDir()
	mark := newMark()
	out := &stallWriter{start: time.Now(), stall: stall}
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.Command(prunBin, args...)
	cmd.Env = append(append(baseEnv(), "TMPDIR="+tmp, "NO_COLOR=1", "E2E_PRUN_MARK="+mark), env...)
	cmd.Stdout, cmd.Stderr = out, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := make(chan struct{})
	go func() {
		<-ctx.Done()
		if ctx.Err() == context.DeadlineExceeded {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			for _, jp := range jobProcs(cmd.Process.Pid, mark) {
				syscall.Kill(jp.pid, syscall.SIGKILL)
			}
			close(killed)
		}
	}()
	cmd.Wait()
	res := &result{code: cmd.ProcessState.ExitCode(), stdout: out.buf.String(), stderr: stderr.String(),
		dur: time.Since(start), tmpdir: tmp, mark: mark, pid: cmd.Process.Pid}
	select {
	case <-killed:
		t.Errorf("prun %s did not finish within %v (killed)\n%s", strings.Join(args, " "), timeout, res)
	default:
	}
	checkNoSurvivors(t, res.pid, mark, false)
	checkTmpDir(t, tmp, nil)
	return res
}

// perRank splits prun's stdout in form into what each rank wrote: tags,
// timestamps, JSON and XML taken off, each piece of a line appended to its
// rank's stream. A line whose pieces did not stay together gains a newline,
// or loses its place: the comparison catches both.
func perRank(t *testing.T, form, stdout string) map[int][]byte {
	t.Helper()
	got := map[int][]byte{}
	tag := regexp.MustCompile(`^\[0,(\d+)\]<stdout>:`)
	xml := regexp.MustCompile(`^<stdout rank="(\d+)">(.*)</stdout>$`)
	rankOf := regexp.MustCompile(`^r(\d+) l\d+ `)
	text := strings.TrimSuffix(stdout, "\n")
	if form == "xml" {
		text = strings.TrimSuffix(strings.TrimPrefix(text, "<mpirun>\n"), "\n</mpirun>")
	}
	for i, l := range strings.Split(text, "\n") {
		if len(stdout) == 0 {
			break
		}
		bad := func() { t.Fatalf("%s: output line %d is not the form's: %.200q", form, i, l) }
		switch form {
		case "raw", "ordered":
			m := rankOf.FindStringSubmatch(l)
			if m == nil {
				bad()
			}
			r, _ := strconv.Atoi(m[1])
			got[r] = append(append(got[r], l...), '\n')
		case "tag", "timestamp":
			if form == "timestamp" {
				_, l, _ = strings.Cut(l, " ")
			}
			m := tag.FindStringSubmatch(l)
			if m == nil {
				bad()
			}
			r, _ := strconv.Atoi(m[1])
			got[r] = append(append(got[r], l[len(m[0]):]...), '\n')
		case "json":
			var rec struct {
				Rank    int    `json:"rank"`
				Text    string `json:"text"`
				Partial bool   `json:"partial"`
			}
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				bad()
			}
			got[rec.Rank] = append(got[rec.Rank], rec.Text...)
			if !rec.Partial {
				got[rec.Rank] = append(got[rec.Rank], '\n')
			}
		case "xml":
			m := xml.FindStringSubmatch(l)
			if m == nil {
				bad()
			}
			r, _ := strconv.Atoi(m[1])
			got[r] = append(got[r], html.UnescapeString(m[2])...)
		}
	}
	return got
}

// checkRanks compares each rank's stream with what it wrote.
func checkRanks(t *testing.T, what string, got map[int][]byte, want func(rank int) []byte, ranks int) {
	t.Helper()
	for r := 0; r < ranks; r++ {
		w := want(r)
		if g := got[r]; !bytes.Equal(g, w) {
			i := 0
			for i < len(g) && i < len(w) && g[i] == w[i] {
				i++
			}
			t.Errorf("%s: rank %d: %d bytes (md5 %x), want %d (md5 %x); first difference at byte %d: got %.40q, want %.40q",
				what, r, len(g), md5.Sum(g), len(w), md5.Sum(w), i, tail(g, i), tail(w, i))
		}
	}
	if len(got) > ranks {
		t.Errorf("%s: output of %d ranks, want %d", what, len(got), ranks)
	}
}

func tail(b []byte, i int) []byte {
	if i > len(b) {
		return nil
	}
	return b[i:]
}

// Issue 24, 1: a reader of prun's stdout that stalls (a pager, a full pipe)
// holds the job up, on one node as across nodes: the ranks block on their
// pipes, the control links stay up, every byte arrives.
func TestOutputBackPressure(t *testing.T) {
	bin := ctest.Build(t, ctest.Plain, "pattern.c")
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	const lines, length = 120000, 100 // 12 MB a rank
	want := func(r int) []byte { return patternStream(r, lines, length) }
	type run struct {
		name  string
		where []string
		ranks int
		stall time.Duration
	}
	runs := []run{
		{"local-10s", nil, 2, 10 * time.Second},
		{"one-node-10s", []string{"-H", m.hosts[0] + ":2"}, 2, 10 * time.Second},
		{"one-node-60s", []string{"-H", m.hosts[1] + ":2"}, 2, 60 * time.Second},
		{"4-hosts-10s", []string{"--hostfile", m.hostfile}, 8, 10 * time.Second},
		{"4-hosts-60s", []string{"--hostfile", m.hostfile}, 8, 60 * time.Second},
	}
	// All at once: the stalls overlap, the test takes the longest one. (The
	// parallel subtests end before this test's cleanups run.)
	t.Cleanup(func() { m.checkClean(t, 10*time.Second) })
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"--tag-output"}, r.where...), "-n", strconv.Itoa(r.ranks))
			res := runStalled(t, m.env(), append(args, patternArgs(bin, lines, length)...), r.stall, 5*time.Minute)
			expectCode(t, res, 0)
			if res.dur < r.stall {
				t.Errorf("prun ended after %v, before its reader read anything (%v)", res.dur, r.stall)
			}
			checkRanks(t, r.name, perRank(t, "tag", res.stdout), want, r.ranks)
		})
	}
}

// Issue 24, 2: lines longer than a reader's buffer (256 KiB) pass in pieces
// that stay together and in order, in every output form, across nodes as on
// one: the bytes each rank wrote, exactly.
func TestLongLines(t *testing.T) {
	bin := ctest.Build(t, ctest.Plain, "pattern.c")
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts(), hostfile: c.Hostfile()}
	lens := []int{270000, 300000, 1<<20 + 17, 100, 270000, 30}
	const cycles = 3
	want := func(r int) []byte { return patternStream(r, cycles, lens...) }
	prog := patternArgs(bin, cycles, lens...)
	forms := []struct{ name, flags string }{
		{"raw", ""}, {"tag", "--output=tag"}, {"timestamp", "--output=timestamp,tag"}, {"json", "--output=json"},
		{"xml", "--output=xml"}, {"ordered", "--output=ordered"}, {"dir", "dir"},
	}
	wheres := []struct {
		name  string
		args  []string
		forms string // the forms tried there
	}{
		{"4-hosts", []string{"--hostfile", m.hostfile, "-n", "8"}, "raw tag timestamp json xml ordered dir"},
		{"one-node", []string{"-H", m.hosts[2] + ":8", "-n", "8"}, "raw tag json dir"},
		{"local", []string{"-n", "8"}, "tag json"},
	}
	for _, w := range wheres {
		for _, f := range forms {
			if !strings.Contains(" "+w.forms+" ", " "+f.name+" ") {
				continue
			}
			t.Run(w.name+"/"+f.name, func(t *testing.T) {
				args := append([]string{}, w.args...)
				dir := ""
				switch f.flags {
				case "":
				case "dir":
					dir = t.TempDir()
					args = append(args, "--output", "dir="+dir+":nocopy")
				default:
					args = append(args, f.flags)
				}
				r := m.run(t, opts{args: append(args, prog...), timeout: 3 * time.Minute})
				expectCode(t, r, 0)
				got := map[int][]byte{}
				switch f.name {
				case "dir":
					for rank := 0; rank < 8; rank++ {
						b, err := os.ReadFile(filepath.Join(dir, "1", "rank."+strconv.Itoa(rank), "stdout"))
						if err != nil {
							t.Fatal(err)
						}
						got[rank] = b
					}
				case "ordered":
					var all []byte
					for rank := 0; rank < 8; rank++ {
						all = append(all, want(rank)...)
					}
					if !bytes.Equal([]byte(r.stdout), all) {
						t.Errorf("ordered: stdout is not each rank's bytes in rank order")
					}
					got = perRank(t, f.name, r.stdout)
				default:
					got = perRank(t, f.name, r.stdout)
				}
				checkRanks(t, w.name+" "+f.name, got, want, 8)
			})
		}
	}
}
