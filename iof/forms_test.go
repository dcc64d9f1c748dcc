package iof

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/forms")

var fixedTime = time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC)

func fixedClock() time.Time { return fixedTime }

// formSources are 8 sources: two apps of the user's job and a spawned job.
var formSources = []Source{
	{Job: 0, App: 0, Rank: 0}, {Job: 0, App: 0, Rank: 1}, {Job: 0, App: 0, Rank: 2},
	{Job: 0, App: 1, Rank: 3}, {Job: 0, App: 1, Rank: 4}, {Job: 0, App: 1, Rank: 5},
	{Job: 1, App: 0, Rank: 0}, {Job: 1, App: 0, Rank: 1},
}

// formMax is the reader buffer of the form tests: lines longer than it
// pass in pieces.
const formMax = 64

func formID(src Source, st Stream) string {
	return fmt.Sprintf("j%dr%d%c", src.Job, src.Rank, "oe"[st])
}

// formInput is what a source writes on a stream: short lines, lines longer
// than formMax (ASCII and multi-byte UTF-8 across the cut), bytes that are
// not UTF-8, characters JSON escapes; rank 2 ends its stdout without a
// newline. Every line starts with its id.
func formInput(src Source, st Stream) []byte {
	id := formID(src, st)
	var b bytes.Buffer
	n := 9
	if st == Stderr {
		n = 4
	}
	for i := 0; i < n; i++ {
		switch i % 5 {
		case 0, 3:
			fmt.Fprintf(&b, "%s %d short\n", id, i)
		case 1:
			fmt.Fprintf(&b, "%s %d long %s|\n", id, i, strings.Repeat("abcdefghij", 15))
		case 2:
			fmt.Fprintf(&b, "%s %d utf8 héllo wörld ✓ %s|\n", id, i, strings.Repeat("üñ€", 20))
		case 4:
			fmt.Fprintf(&b, "%s %d odd \xff\xfe \"q\" \\ tab\t cr\r bel\a\n", id, i)
		}
	}
	if src.Rank == 2 && st == Stdout {
		fmt.Fprintf(&b, "%s end without newline", id)
	}
	return b.Bytes()
}

// chunkSizes cut the writers' output across lines and characters.
var chunkSizes = []int{1, 7, 33, 5, 100, 2, 64, 13}

// runForm forwards every form source through pipes, concurrently, and
// returns the terminal's stdout and stderr. opts.Dir and opts.File are
// relative to dir.
func runForm(t *testing.T, opts Options, dir string) (string, string) {
	t.Helper()
	var out, errb syncBuf
	opts.Clock = fixedClock
	if opts.Dir != "" {
		opts.Dir = filepath.Join(dir, opts.Dir)
	}
	if opts.File != "" {
		opts.File = filepath.Join(dir, opts.File)
	}
	for _, p := range []*string{&opts.OutPattern, &opts.ErrPattern} {
		if *p != "" {
			*p = filepath.Join(dir, *p)
		}
	}
	if opts.Ordered {
		opts.SpillDir = dir
		opts.OrderedMemory = 1000 // spill most of it
	}
	w := NewWriter(&out, &errb, opts)
	for _, src := range formSources {
		w.SetSourceInfo(src, fmt.Sprintf("node%d", src.Rank%2), 1000+10*src.Job+src.Rank)
	}
	var wg sync.WaitGroup
	for i, src := range formSources {
		for _, st := range []Stream{Stdout, Stderr} {
			pr, pw := io.Pipe()
			wg.Add(2)
			go func() {
				defer wg.Done()
				forward(pr, w, src, st, 16, formMax)
				w.End(src, st)
			}()
			go func() {
				defer wg.Done()
				in := formInput(src, st)
				for j := i; len(in) > 0; j++ {
					n := min(chunkSizes[j%len(chunkSizes)], len(in))
					pw.Write(in[:n])
					in = in[n:]
				}
				pw.Close()
			}()
		}
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String()
}

var idRe = regexp.MustCompile(`j\dr\d[oe]`)

// byStream groups prefixed lines by the id inside them, checks that each
// stream's lines, prefixes stripped, are its input, and returns the lines
// by stream (job, rank, stdout first).
func byStream(t *testing.T, name, text string, streams []Stream, prefix func(line string, src Source, st Stream) string) string {
	t.Helper()
	groups := map[string][]string{}
	for _, l := range strings.SplitAfter(text, "\n") {
		if l == "" {
			continue
		}
		ids := idRe.FindAllStringIndex(l, -1)
		if len(ids) != 1 {
			t.Errorf("%s: line %q has %d ids: mixed or broken", name, l, len(ids))
			continue
		}
		groups[l[ids[0][0]:ids[0][1]]] = append(groups[l[ids[0][0]:ids[0][1]]], l)
	}
	var b strings.Builder
	for _, src := range sortedSources() {
		for _, st := range streams {
			id := formID(src, st)
			var got strings.Builder
			for _, l := range groups[id] {
				i := strings.Index(l, id)
				if want := prefix(l, src, st); l[:i] != want {
					t.Errorf("%s: line %q: prefix %q, want %q", name, l, l[:i], want)
				}
				got.WriteString(l[i:])
				b.WriteString(l)
				if !strings.HasSuffix(l, "\n") { // the last output has no newline
					b.WriteString("\n")
				}
			}
			delete(groups, id)
			if want := string(formInput(src, st)); strings.TrimSuffix(got.String(), "\n") != strings.TrimSuffix(want, "\n") {
				t.Errorf("%s: %s: lines lost, repeated or reordered:\n got %q\nwant %q", name, id, got.String(), want)
			}
		}
	}
	for id := range groups {
		t.Errorf("%s: unknown stream %s", name, id)
	}
	return b.String()
}

func sortedSources() []Source {
	s := slices.Clone(formSources)
	slices.SortFunc(s, func(a, b Source) int {
		if a.Job != b.Job {
			return a.Job - b.Job
		}
		return a.Rank - b.Rank
	})
	return s
}

// checkOrdered checks that text is the streams' inputs (with prefixes)
// one after another, in job and rank order.
func checkOrdered(t *testing.T, name, text string, streams []Stream, prefix func(string, Source, Stream) string) {
	t.Helper()
	var want strings.Builder
	for _, src := range sortedSources() {
		for _, st := range streams {
			for _, l := range strings.SplitAfter(string(formInput(src, st)), "\n") {
				if l != "" {
					want.WriteString(prefix(l, src, st) + l)
				}
			}
			if src.Rank == 2 && st == Stdout {
				want.WriteString("\n") // the next source starts a line
			}
		}
	}
	if got, w := strings.TrimSuffix(text, "\n"), strings.TrimSuffix(want.String(), "\n"); got != w {
		t.Errorf("%s: not in rank order:\n got %q\nwant %q", name, got, w)
	}
}

// latin1 is how JSON text shows s: bytes that are not UTF-8 as U+0080–U+00FF.
func latin1(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			r = rune(s[i])
		}
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

type jsonLine struct {
	Time    string `json:"time"`
	Rank    int    `json:"rank"`
	App     int    `json:"app"`
	Job     int    `json:"job"`
	Host    string `json:"host"`
	Stream  string `json:"stream"`
	Text    string `json:"text"`
	Partial bool   `json:"partial"`
}

// jsonByStream checks JSON output (valid, whole pieces, every stream's
// text its input) and returns its lines grouped by stream.
func jsonByStream(t *testing.T, name, text string) string {
	t.Helper()
	groups := map[string][]string{}
	texts := map[string]string{}
	for _, l := range strings.SplitAfter(text, "\n") {
		if l == "" {
			continue
		}
		var j jsonLine
		if !json.Valid([]byte(l)) || json.Unmarshal([]byte(l), &j) != nil {
			t.Errorf("%s: invalid JSON %q", name, l)
			continue
		}
		st := Stdout
		if j.Stream == "stderr" {
			st = Stderr
		}
		src := Source{Job: j.Job, App: j.App, Rank: j.Rank}
		if !slices.Contains(formSources, src) || j.Time != "2024-05-06T07:08:09.123Z" || j.Host != fmt.Sprintf("node%d", j.Rank%2) {
			t.Errorf("%s: bad fields in %q", name, l)
		}
		id := formID(src, st)
		groups[id] = append(groups[id], l)
		texts[id] += j.Text
		if !j.Partial {
			texts[id] += "\n"
		}
	}
	var b strings.Builder
	for _, src := range sortedSources() {
		for _, st := range []Stream{Stdout, Stderr} {
			id := formID(src, st)
			for _, l := range groups[id] {
				b.WriteString(l)
			}
			if got, want := strings.TrimSuffix(texts[id], "\n"), strings.TrimSuffix(latin1(string(formInput(src, st))), "\n"); got != want {
				t.Errorf("%s: %s: text lost or changed:\n got %q\nwant %q", name, id, got, want)
			}
		}
	}
	return b.String()
}

// tree lists the files under dir with their contents. Merged files, whose
// stdout and stderr lines interleave as they came, list stdout first.
func tree(t *testing.T, dir string, merged bool) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		if merged {
			lines := strings.SplitAfter(string(data), "\n")
			for i, l := range lines {
				if l != "" && len(idRe.FindAllString(l, -1)) != 1 {
					t.Errorf("%s: broken line %q", rel, l)
				}
				if l != "" && !strings.HasSuffix(l, "\n") {
					lines[i] += "\n" // rank 2's last line, unless its stderr followed
				}
			}
			slices.SortStableFunc(lines, func(a, b string) int {
				return strings.Compare(idRe.FindString(b), idRe.FindString(a)) // o before e
			})
			data = []byte(strings.Join(lines, ""))
		}
		fmt.Fprintf(&b, "== %s ==\n%s", rel, data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteString("⏎(no newline)\n")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func noPrefix(string, Source, Stream) string { return "" }

func tagPrefix(_ string, src Source, st Stream) string {
	app := fmt.Sprint(src.App)
	if src.Job > 0 {
		app = fmt.Sprintf("%d.%d", src.Job, src.App)
	}
	return fmt.Sprintf("[%s,%d]<%s>:", app, src.Rank, st)
}

func colorPrefix(_ string, src Source, st Stream) string {
	c := fmt.Sprintf("\x1b[%dm", tagColors[src.Rank%len(tagColors)])
	if st == Stderr {
		c = "\x1b[31m"
	}
	return c + tagPrefix("", src, st) + "\x1b[0m"
}

// checkSourceOrder checks that the sources' lines come in job and rank order.
func checkSourceOrder(t *testing.T, name, text string) {
	t.Helper()
	order := map[string]int{}
	for i, src := range sortedSources() {
		order[formID(src, Stdout)[:4]] = i
	}
	last := 0
	for _, l := range strings.SplitAfter(text, "\n") {
		if id := idRe.FindString(l); id != "" {
			if o := order[id[:4]]; o < last {
				t.Errorf("%s: %q out of rank order", name, l)
			} else {
				last = o
			}
		}
	}
}

// formTS is the time stamp of runForm's lines (fixedTime), with its space.
const formTS = "2024-05-06T07:08:09.123Z "

// formCheck checks the output of one form (the terminal's, and the files
// under dir) and returns what is compared with its golden file.
type formCheck func(t *testing.T, name, out, errOut, dir string) string

// formTerminal checks output on the terminal, each line with its prefix.
func formTerminal(prefix func(string, Source, Stream) string) formCheck {
	return func(t *testing.T, name, out, errOut, dir string) string {
		return "== stdout ==\n" + byStream(t, name, out, []Stream{Stdout}, prefix) +
			"== stderr ==\n" + byStream(t, name, errOut, []Stream{Stderr}, prefix)
	}
}

// outputForms are TestOutputForms's cases: a form, and how to check it.
var outputForms = []struct {
	name  string
	opts  Options
	check formCheck
}{
	{"plain", Options{}, formTerminal(noPrefix)},
	{"tag", Options{Tag: true}, formTerminal(tagPrefix)},
	{"tag-color", Options{Tag: true, Color: true}, formTerminal(colorPrefix)},
	{"tag-detailed", Options{TagDetailed: true}, formTerminal(func(_ string, src Source, st Stream) string {
		t := tagPrefix("", src, st)
		i := strings.Index(t, "]")
		return t[:i] + fmt.Sprintf(",node%d,%d", src.Rank%2, 1000+10*src.Job+src.Rank) + t[i:]
	})},
	{"rank", Options{Rank: true}, formTerminal(func(_ string, src Source, st Stream) string {
		if src.Job > 0 {
			return fmt.Sprintf("[%d.%d] ", src.Job, src.Rank)
		}
		return fmt.Sprintf("[%d] ", src.Rank)
	})},
	{"prefix-pattern", Options{Prefix: "<%r|%g|%h|%p|%%> ", NodeIndex: func(h string) (int, bool) {
		return int(h[len(h)-1] - '0'), strings.HasPrefix(h, "node")
	}}, formTerminal(func(_ string, src Source, st Stream) string {
		return fmt.Sprintf("<%d|%d|node%d|%d|%%> ", src.Rank, src.Job, src.Rank%2, src.Rank%2)
	})},
	{"timestamp", Options{Timestamp: true}, formTerminal(func(string, Source, Stream) string { return formTS })},
	{"timestamp-tag", Options{Timestamp: true, Tag: true}, formTerminal(func(l string, src Source, st Stream) string {
		return formTS + tagPrefix(l, src, st)
	})},
	{"merge-tag", Options{Tag: true, MergeStderr: true}, func(t *testing.T, name, out, errOut, dir string) string {
		if errOut != "" {
			t.Errorf("stderr got %q", errOut)
		}
		return byStream(t, name, out, []Stream{Stdout, Stderr}, tagPrefix)
	}},
	{"json", Options{JSON: true}, func(t *testing.T, name, out, errOut, dir string) string {
		if errOut != "" {
			t.Errorf("stderr got %q", errOut)
		}
		return jsonByStream(t, name, out)
	}},
	{"ordered-tag", Options{Ordered: true, Tag: true}, func(t *testing.T, name, out, errOut, dir string) string {
		checkOrdered(t, name, out, []Stream{Stdout}, tagPrefix)
		checkOrdered(t, name, errOut, []Stream{Stderr}, tagPrefix)
		return "== stdout ==\n" + out + "== stderr ==\n" + errOut
	}},
	{"ordered-merge", Options{Ordered: true, MergeStderr: true, Timestamp: true}, func(t *testing.T, name, out, errOut, dir string) string {
		if errOut != "" {
			t.Errorf("stderr got %q", errOut)
		}
		// Within a source, stdout and stderr lines interleave as they came.
		checkSourceOrder(t, name, out)
		return byStream(t, name, out, []Stream{Stdout, Stderr}, func(string, Source, Stream) string { return formTS })
	}},
	{"ordered-json", Options{Ordered: true, JSON: true}, func(t *testing.T, name, out, errOut, dir string) string {
		jsonByStream(t, name, out)
		return out
	}},
	{"dir", Options{Dir: "out"}, func(t *testing.T, name, out, errOut, dir string) string {
		if out != "" || errOut != "" {
			t.Errorf("terminal got %q, %q", out, errOut)
		}
		return tree(t, dir, false)
	}},
	{"file-merge-timestamp", Options{File: "sub/app", MergeStderr: true, Timestamp: true}, func(t *testing.T, name, out, errOut, dir string) string {
		if out != "" || errOut != "" {
			t.Errorf("terminal got %q, %q", out, errOut)
		}
		return tree(t, dir, true)
	}},
	// Hydra's file patterns: stdout to a file per rank and job, stderr
	// stays on the terminal.
	{"outfile-pattern", Options{OutPattern: "o.%r.%g", Tag: true}, func(t *testing.T, name, out, errOut, dir string) string {
		if out != "" {
			t.Errorf("terminal stdout got %q", out)
		}
		return tree(t, dir, false) + "== terminal stderr ==\n" + byStream(t, name, errOut, []Stream{Stderr}, tagPrefix)
	}},
	// Ranks on one host share its file, whole line by whole line.
	{"pattern-shared-merge", Options{OutPattern: "%h.log", ErrPattern: "ignored.%r", MergeStderr: true}, func(t *testing.T, name, out, errOut, dir string) string {
		if out != "" || errOut != "" {
			t.Errorf("terminal got %q, %q", out, errOut)
		}
		return tree(t, dir, true)
	}},
	{"dir-file-tee-tag-color", Options{Dir: "out", File: "app", Tee: true, Tag: true, Color: true}, func(t *testing.T, name, out, errOut, dir string) string {
		if !strings.Contains(out, "\x1b[") {
			t.Errorf("terminal not coloured")
		}
		files := tree(t, dir, false)
		if strings.Contains(files, "\x1b[") {
			t.Errorf("files coloured")
		}
		return files + "== terminal ==\n" + formTerminal(colorPrefix)(t, name, out, errOut, dir)
	}},
}

func TestOutputForms(t *testing.T) {
	for _, tc := range outputForms {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, errOut := runForm(t, tc.opts, dir)
			got := tc.check(t, tc.name, out, errOut, dir)
			golden := filepath.Join("testdata", "forms", tc.name+".golden")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestOutputForms -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s:\n%s", golden, got)
			}
		})
	}
}
