package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"prun/internal/shellwords"
)

func TestAppFile(t *testing.T) {
	env, dir := testEnv(t)
	file := filepath.Join(dir, "apps")
	text := "# MPMD\n-n 2 -x B=1 ./app 'a b'\n\n-np 1 ./app2 : -n 3 ./app # three\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	req, err := Parse([]string{"-x", "SET_VAR", "--tag-output", "--app", file}, env)
	if err != nil {
		t.Fatal(err)
	}
	j := req.Job
	if len(j.Apps) != 3 || !j.TagOutput {
		t.Fatalf("job = %+v", j)
	}
	for i, want := range []string{"2 ./app a b SET_VAR=v1,B=1", "1 ./app2 SET_VAR=v1", "3 ./app SET_VAR=v1"} {
		a := j.Apps[i]
		if got := strconv.Itoa(a.NP) + " " + strings.Join(a.Argv, " ") + " " + strings.Join(a.Env, ","); got != want {
			t.Errorf("app %d: %q, want %q", i, got, want)
		}
	}

	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	// A line's own -H keeps its app there (mpirun's appfiles), and joins
	// the job's --host.
	req, err = Parse([]string{"-H", "c", "--app", write("h", "-n 1 -H a:1 ./app\n-n 2 ./app2\n-n 2 --host b:2 ./app\n")}, env)
	if err != nil {
		t.Fatal(err)
	}
	if j := req.Job; j.Apps[0].Hosts != "a:1" || j.Apps[1].Hosts != "" || j.Apps[2].Hosts != "b:2" ||
		strings.Join(j.Place.Hosts, "|") != "c|a:1|b:2" {
		t.Errorf("app hosts %q %q %q, job hosts %q", j.Apps[0].Hosts, j.Apps[1].Hosts, j.Apps[2].Hosts, j.Place.Hosts)
	}
	for args, want := range map[string]string{
		"--app " + write("g", "-n 1 ./app\n--timeout 3 ./app\n"): ":2: --timeout is a global option: give it on the command line",
		"--app " + write("q", "-n 1 './app\n"):                   ":1: unterminated single quote",
		"--app " + write("e", "# none\n"):                        "no application in the file",
		"--app " + write("n", "-n 2\n"):                          ":1: no program",
		"--app " + write("c", "-n 1 ./app :\n"):                  ":1: a ':' with no application after it",
		"--app " + write("p", "-n 1 ./nope\n"):                   ":1: ./nope: no such file",
		"--app " + filepath.Join(dir, "missing"):                 "no such file or directory",
		"--app " + write("ok", "./app\n") + " ./app":             "no program may follow on the command line",
		"-n 2 --app " + write("ok2", "./app\n"):                  "give -n and --wdir in the file",
	} {
		_, err := Parse(strings.Fields(args), env)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q) = %v, want a one-line usage error containing %q", args, err, want)
		}
	}
}

// FuzzAppFile: no text may panic, and what splits into words splits again
// the same once the words are quoted back.
func FuzzAppFile(f *testing.F) {
	for _, s := range []string{"-n 2 ./a 'x y'\n./b \"q\\\"\" : ./c # c", "\\", "'", "a\\ b", ": ./a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		segs, err := parseAppFile(text)
		if err != nil {
			return
		}
		for _, seg := range segs {
			again, err := shellwords.Split(shellwords.Join(seg.args))
			if err != nil || strings.Join(again, "\x00") != strings.Join(seg.args, "\x00") {
				t.Errorf("%q: words %q quoted back split into %q (%v)", text, seg.args, again, err)
			}
		}
	})
}
