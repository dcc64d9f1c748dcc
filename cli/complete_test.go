package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"prun/jobspec"
)

// completeLine runs prun's __complete as the shells' scripts do and
// returns its candidates (descriptions cut) and directive line.
func completeLine(t *testing.T, words ...string) ([]string, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := Command(func(*jobspec.Job) int { return 0 }, new(int))
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(append([]string{"__complete"}, words...))
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var cands []string
	for _, l := range lines[:len(lines)-1] {
		c, _, _ := strings.Cut(l, "\t")
		cands = append(cands, c)
	}
	return cands, lines[len(lines)-1]
}

// The completion offers prun's flags and their values (failed before: no
// candidates at all, as prun's flags were only attached for --help).
func TestComplete(t *testing.T) {
	dir := t.TempDir()
	hf := filepath.Join(dir, "hf")
	if err := os.WriteFile(hf, []byte("n1 slots=2\nn2\nuser@n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const noFiles, noSpace = ":4", ":6"
	for _, c := range []struct {
		words []string
		want  string
		dir   string
	}{
		{[]string{"--tim"}, "--timeout --timestamp-output", noFiles},
		{[]string{"-np"}, "-np -npernode", noFiles}, // mpirun's single dash
		{[]string{"--map-by", ""}, "slot hwthread core l1cache l2cache l3cache numa package node seq ppr: rankfile pe-list=", noSpace},
		{[]string{"--map-by", "core:ov"}, "core:OVERSUBSCRIBE", noFiles},
		{[]string{"--map-by=pa"}, "package", noFiles}, // the scripts put --map-by= back
		{[]string{"--output=tag,j"}, "tag,json", noSpace},
		{[]string{"--rank-by", "f"}, "fill", noFiles},
		{[]string{"--bind-to", "core:"}, "core:overload-allowed core:if-supported core:REPORT", noFiles},
		{[]string{"--output", "tag,"}, "tag,tag-detailed tag,rank tag,timestamp tag,merge-stderr-to-stdout tag,json tag,xml tag,ordered tag,dir= tag,file=", noSpace},
		{[]string{"--stdin", ""}, "0 all none", noFiles},
		{[]string{"--hostfile", hf, "-H", ""}, "n1 n2 n3", noSpace},
		{[]string{"--machinefile=" + hf, "-n", "2", "--host", "n1,"}, "n1,n2 n1,n3", noSpace},
		{[]string{"--hostfile", ""}, "", ":0"},                 // files
		{[]string{"-n", "2", "./a", "--t"}, "", ":0"},          // the program's own arguments
		{[]string{"--mca", "btl", ""}, "", noFiles},            // an MCA value: nothing to offer
		{[]string{"-n", "1", "./a", ":", "--ti"}, "", noFiles}, // a later context has no --timeout
		{[]string{"-n", "1", "./a", ":", "--ho"}, "--host --hostfile", noFiles},
	} {
		got, d := completeLine(t, c.words...)
		if strings.Join(got, " ") != c.want || d != c.dir {
			t.Errorf("prun %q<TAB>: %q %s, want %q %s", c.words, got, d, c.want, c.dir)
		}
	}
}

// A flag's description is its usage's first clause, whole: a ';' inside
// parentheses does not end it (the shells showed "(tree spawn" for
// --launch-fanout).
func TestFirstClause(t *testing.T) {
	for _, c := range []struct{ usage, want string }{
		{"each daemon starts at most K others (tree spawn; default 32)", "each daemon starts at most K others (tree spawn; default 32)"},
		{"run in NAME; default: PRUN_DVM, else this user's", "run in NAME"},
		{"a (b; c) d; e (f; g)", "a (b; c) d"},
		{"a (b (c; d); e); f", "a (b (c; d); e)"},
		{"a) b; c", "a) b"}, // a stray ')' does not hide the next ';'
		{"no clause at all", "no clause at all"},
		{"", ""},
	} {
		if got := firstClause(c.usage); got != c.want {
			t.Errorf("firstClause(%q) = %q, want %q", c.usage, got, c.want)
		}
	}
	// What the shells get: every flag's description, parentheses closed.
	var out bytes.Buffer
	cmd := Command(func(*jobspec.Job) int { return 0 }, new(int))
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"__complete", "--"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	descs := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if name, desc, ok := strings.Cut(l, "\t"); ok {
			descs[name] = desc
			if strings.Count(desc, "(") != strings.Count(desc, ")") {
				t.Errorf("%s's description is cut: %q", name, desc)
			}
		}
	}
	if want := "each daemon starts at most K others (tree spawn; default 32)"; descs["--launch-fanout"] != want {
		t.Errorf("--launch-fanout's description %q, want %q", descs["--launch-fanout"], want)
	}
}

// What the completion offers for a policy or a form is what the parsers
// accept.
func TestCompletionValuesParse(t *testing.T) {
	env, _ := testEnv(t)
	for flag, words := range valueWords {
		for _, w := range words {
			if strings.HasSuffix(w, ":") || strings.HasSuffix(w, "=") {
				continue // more follows
			}
			args := []string{"--" + flag + "=" + w, "-n", "1", "./app"}
			if _, err := Parse(args, env); err != nil {
				t.Errorf("--%s %s: %v", flag, w, err)
			}
		}
	}
	for flag, quals := range qualifierWords {
		for _, q := range quals {
			if strings.HasSuffix(q, "=") {
				q += "2"
			}
			base := map[string]string{"map-by": "core", "rank-by": "core", "bind-to": "core"}[flag]
			if _, err := Parse([]string{"--" + flag, base + ":" + q, "-n", "1", "./app"}, env); err != nil {
				t.Errorf("--%s %s:%s: %v", flag, base, q, err)
			}
		}
	}
}

// Completion reads any words without failing, and answers at once.
func FuzzComplete(f *testing.F) {
	for _, s := range []string{"--tim", "-n 2 ./a --x", "--map-by core:", "--output tag,", "--hostfile /dev/null -H ",
		"--mca btl", ": : --ho", "--=", "-", "--map-by=", "-H a,b,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words := strings.Split(line, " ")
		for _, w := range words {
			if strings.Contains(w, "/") && !strings.HasPrefix(w, "/dev/null") {
				return // no files of the machine's
			}
		}
		complete(words[:len(words)-1], words[len(words)-1])
	})
}
