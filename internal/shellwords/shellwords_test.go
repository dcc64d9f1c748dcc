package shellwords

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "''"},
		{"plain", "plain"},
		{"/usr/bin/prund", "/usr/bin/prund"},
		{"a=b", "a=b"},
		{"=b", "'=b'"},
		{"--opt=1,2:3@x%y+z", "--opt=1,2:3@x%y+z"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"'", `''\'''`},
		{"$HOME", "'$HOME'"},
		{"*", "'*'"},
		{"~", "'~'"},
		{"a\nb", "'a\nb'"},
		{"é", "'é'"},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := Join([]string{"echo", "a b", ""}), "echo 'a b' ''"; got != want {
		t.Errorf("commandLine = %q, want %q", got, want)
	}
}

// TestQuoteShell checks quoting against real shells: each word must come
// back unchanged.
func TestQuoteShell(t *testing.T) {
	words := []string{"", "a b", "it's", `"q"`, `back\slash`, "$HOME", "$(id)", "`id`", "*", "?", "[a]",
		"~", "~root", "=ls", "a;b", "a&b", "a|b", "<x>", "#c", "new\nline", "tab\tx", "!bang", "{a,b}",
		"é", "\x01\x7f", "-n", "%s", "''", `\'`}
	for _, shell := range []string{"sh", "dash", "bash"} {
		if _, err := exec.LookPath(shell); err != nil {
			continue
		}
		out, err := exec.Command(shell, "-c", `printf '%s\0' `+Join(words)).Output()
		if err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if !slices.Equal(got, words) {
			t.Errorf("%s gave %q, want %q", shell, got, words)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"  ", nil, false},
		{"ssh", []string{"ssh"}, false},
		{"ssh -F /x/ssh_config", []string{"ssh", "-F", "/x/ssh_config"}, false},
		{" ssh\t-o  'A B'\n", []string{"ssh", "-o", "A B"}, false},
		{`a"b c"d`, []string{"ab cd"}, false},
		{`'' ""`, []string{"", ""}, false},
		{`"a\"b\\c\d\$e"`, []string{`a"b\c\d$e`}, false},
		{`a\ b\'c`, []string{"a b'c"}, false},
		{"a\\\nb", []string{"ab"}, false},
		{`'$HOME' "*"`, []string{"$HOME", "*"}, false},
		{`'open`, nil, true},
		{`"open`, nil, true},
		{`end\`, nil, true},
		{"a #b c\nd", []string{"a", "d"}, false},
		{"a#b '#c' \\#d", []string{"a#b", "#c", "#d"}, false},
		{"# all", nil, false},
	} {
		got, err := Split(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a", "a b", "it's", `"\$`, "\n", "=x", "é\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		got, err := Split(q)
		if err != nil || len(got) != 1 || got[0] != s {
			t.Fatalf("Split(Quote(%q) = %q) = %q, %v", s, q, got, err)
		}
	})
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{"", "ssh -F x", `a"b c"d`, `'x' "y\"z" \ w`, `"`, `\`, "a\\\nb", `'' ""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := Split(s)
		if err != nil {
			return
		}
		// Quoting the words and splitting again gives them back.
		again, err := Split(Join(words))
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("Split(%q) = %q; Split(Join(that)) = %q, %v", s, words, again, err)
		}
		// A string without quotes, backslashes or blanks is one word.
		if s != "" && s[0] != '#' && !strings.ContainsAny(s, "'\"\\ \t\n") && (len(words) != 1 || words[0] != s) {
			t.Fatalf("Split(%q) = %q, want one word", s, words)
		}
	})
}
