package iof

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	var out, errb bytes.Buffer
	w := NewWriter(&out, &errb, Options{Dir: filepath.Join(dir, "out"), File: filepath.Join(dir, "f", "app")})
	silent, spawned := Source{Rank: 1}, Source{Job: 2, Rank: 0}
	w.SetSourceInfo(silent, "h", 5) // files of ranks that never print exist
	w.Write(spawned, Stdout, []byte("x\n"), false)
	w.Write(spawned, Stderr, []byte("e\n"), false)
	w.End(spawned, Stdout)
	w.Write(spawned, Stdout, []byte("y\n"), false) // reopened to append
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"out/1/rank.1/stdout": "", "out/1/rank.1/stderr": "", "f/app.1.out": "", "f/app.1.err": "",
		"out/3/rank.0/stdout": "x\ny\n", "out/3/rank.0/stderr": "e\n",
		"f/app.3.0.out": "x\ny\n", "f/app.3.0.err": "e\n",
	} {
		path = filepath.Join(dir, path)
		data, err := os.ReadFile(path)
		if err != nil || string(data) != want {
			t.Errorf("%s: %q, %v; want %q", path, data, err, want)
			continue
		}
		fi, _ := os.Stat(path)
		di, _ := os.Stat(filepath.Dir(path))
		if fi.Mode().Perm() != os.FileMode(0o644&^umask) || di.Mode().Perm() != os.FileMode(0o755&^umask) {
			t.Errorf("%s: mode %v in %v", path, fi.Mode(), di.Mode())
		}
	}
	if out.Len()+errb.Len() > 0 {
		t.Errorf("the terminal got %q, %q", out.String(), errb.String())
	}
}

func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o644)
	var errb bytes.Buffer
	w := NewWriter(&bytes.Buffer{}, &errb, Options{Dir: plain})
	w.Write(Source{}, Stdout, []byte("a\n"), false)
	w.Write(Source{}, Stdout, []byte("b\n"), false)
	if err := w.Close(); err == nil {
		t.Error("Close: no error")
	}
	if n := strings.Count(errb.String(), "prun: output:"); n != 1 {
		t.Errorf("%d reports: %q", n, errb.String())
	}
}

func TestMergedColorAndTee(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	w := NewWriter(&out, &errb, Options{Tag: true, Color: true, MergeStderr: true, Dir: dir, Tee: true})
	w.Write(Source{Rank: 2}, Stderr, []byte("e\n"), false)
	w.Write(Source{Rank: 2}, Stdout, []byte("o\n"), false)
	w.Close()
	if got, want := out.String(), "\x1b[31m[0,2]<stderr>:\x1b[0me\n\x1b[33m[0,2]<stdout>:\x1b[0mo\n"; got != want || errb.Len() > 0 {
		t.Errorf("terminal %q, %q; want %q", got, errb.String(), want)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "1", "rank.2", "stdout"))
	if got, want := string(data), "[0,2]<stderr>:e\n[0,2]<stdout>:o\n"; got != want {
		t.Errorf("file %q, want %q", got, want)
	}
}

func TestJSONText(t *testing.T) {
	var out bytes.Buffer
	clock := func() time.Time { return time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.FixedZone("", 3600)) }
	w := NewWriter(&out, &out, Options{JSON: true, Clock: clock})
	w.SetSourceInfo(Source{Job: 1, App: 2, Rank: 3}, "h\"ost", 9)
	lines := []string{"", "plain", "nul\x00 esc\x1b del\x7f", "bad \xff\xc3 end \xe2\x82", "€ \ufffd ok",
		"sep \u2028 \u2029", `quote" back\ slash/`, "cr\r tab\t"}
	w.Write(Source{Job: 1, App: 2, Rank: 3}, Stderr, []byte(strings.Join(lines, "\n")+"\n"), false)
	w.Write(Source{Job: 1, App: 2, Rank: 3}, Stderr, []byte("piece"), true)
	w.Write(Source{Job: 1, App: 2, Rank: 3}, Stderr, []byte(" end\nlast"), false)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := append(append([]string{}, lines...), "piece", " end", "last")
	if len(got) != len(want) {
		t.Fatalf("%d objects, want %d:\n%s", len(got), len(want), out.String())
	}
	for i, l := range got {
		var j jsonLine
		if !json.Valid([]byte(l)) || json.Unmarshal([]byte(l), &j) != nil {
			t.Errorf("invalid JSON %q", l)
			continue
		}
		if j.Time != "2024-01-02T03:04:05.006+01:00" || j.Job != 1 || j.App != 2 || j.Rank != 3 ||
			j.Host != `h"ost` || j.Stream != "stderr" || j.Partial != (i == len(want)-3) {
			t.Errorf("fields of %q", l)
		}
		if j.Text != latin1(want[i]) {
			t.Errorf("text %q, want %q (from %q)", j.Text, latin1(want[i]), l)
		}
	}
	if strings.Contains(out.String(), "\u2028") || !strings.Contains(out.String(), `\u2028`) {
		t.Error("U+2028 not escaped")
	}
}

func TestWriteAfterClose(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, &out, Options{Ordered: true, SpillDir: t.TempDir()})
	w.Write(Source{Rank: 1}, Stdout, []byte("b\n"), false)
	w.Write(Source{Rank: 0}, Stdout, []byte("a\n"), false)
	if out.Len() > 0 {
		t.Fatalf("printed before Flush: %q", out.String())
	}
	w.Flush()
	w.Write(Source{Rank: 0}, Stdout, []byte("c\n"), false)
	w.Close()
	w.Write(Source{Rank: 0}, Stdout, []byte("d\n"), false)
	if got, want := out.String(), "a\nb\nc\nd\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// mpirun's --xml: one element per line between <mpirun> and </mpirun>,
// the text escaped as mpirun escapes it, a spawned job's ranks named so.
func TestXMLText(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, &out, Options{XML: true})
	w.Write(Source{Rank: 1}, Stdout, []byte("hi <&> \"q\"\ttab\n\n"), false)
	w.Write(Source{Rank: 0}, Stderr, []byte("nul\x00 \x7f end"), true)
	w.Write(Source{Rank: 0}, Stderr, []byte(" more\n"), false)
	w.Write(Source{Job: 1, Rank: 2}, Stdout, []byte("child\n"), false)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "<mpirun>\n" +
		`<stdout rank="1">hi &lt;&amp;&gt; "q"&#009;tab&#010;</stdout>` + "\n" +
		`<stdout rank="1">&#010;</stdout>` + "\n" +
		`<stderr rank="0">nul&#000; &#127; end</stderr>` + "\n" +
		`<stderr rank="0"> more&#010;</stderr>` + "\n" +
		`<stdout rank="2" job="1">child&#010;</stdout>` + "\n" +
		"</mpirun>\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	w.Close()
	if strings.Count(out.String(), "</mpirun>") != 1 {
		t.Error("a second Close wrote </mpirun> again")
	}
}
