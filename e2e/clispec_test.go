package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIProgramNamedLikeSubcommand: after prun's options, a word is the
// program, even when it is also the name of one of prun's own commands
// (cobra's completion and __complete, help, prun's daemon): it runs.
func TestCLIProgramNamedLikeSubcommand(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"completion", "__complete", "help", "daemon"} {
		script := "#!/bin/sh\necho ran " + name + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"-n", "1", name, "bash"}, {"-np", "1", "./" + name, "bash"}} {
			r := run(t, opts{args: args, dir: dir, env: []string{"PATH=" + dir + ":" + os.Getenv("PATH")}})
			expectCode(t, r, 0)
			if want := "ran " + name + " bash\n"; r.stdout != want {
				t.Errorf("prun %s: stdout %q, want %q (stderr %q)", strings.Join(args, " "), r.stdout, want, r.stderr)
			}
		}
	}
	// The commands themselves still answer where they are the first word.
	out, err := exec.Command(prunBin, "completion", "bash").Output()
	if err != nil || !strings.Contains(string(out), "__start_prun") {
		t.Errorf("prun completion bash: %v, %d bytes", err, len(out))
	}
}

// TestCLICompletionBash sources the script of `prun completion bash` in a
// real bash and completes command lines through it (prun __complete):
// flags, their values, and -H's hosts from the hostfile given before it.
// Without the bash-completion package, a minimal _get_comp_words_by_ref
// (the one function of it the script calls) splits the words as given.
// The last case failed before (prun __complete returned no candidates).
func TestCLICompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash is needed: %v", err)
	}
	dir := t.TempDir()
	script, err := exec.Command(prunBin, "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prun.bash"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte("alpha slots=2\nbeta\n# gamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const driver = `
declare -F _get_comp_words_by_ref >/dev/null || _get_comp_words_by_ref() {
	cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
}
compopt() { :; } # bash's builtin works inside a completion only (it sets nospace)
source ./prun.bash
COMP_WORDS=(prun "$@")
COMP_CWORD=$#
COMP_LINE="prun $*"
COMP_POINT=${#COMP_LINE}
__start_prun prun "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
`
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"--tim"}, []string{"--timeout", "--timestamp-output"}},
		{[]string{"--map-by", "nu"}, []string{"numa"}},
		{[]string{"--bind-to", "co"}, []string{"core"}},
		{[]string{"--output", "js"}, []string{"json"}},
		{[]string{"--hostfile", "hosts", "-H", ""}, []string{"alpha", "beta"}},
		{[]string{"--hostfile", "hosts", "-n", "2", "-H", "a"}, []string{"alpha"}},
		{[]string{"-n", "1", "./x", "--tim"}, nil}, // the program's own argument: files, not prun's flags
	} {
		cmd := exec.Command("bash", append([]string{"-c", driver, "driver"}, c.words...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(prunBin)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%q: %v\n%s", c.words, err, out)
			continue
		}
		got := strings.Fields(string(out))
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("prun %s<TAB>: %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
	}
}

// TestCLICompletionZsh sources the script of `prun completion zsh` in a
// real zsh (make test installs it) and completes command lines through it.
// Outside an interactive shell zsh's completion system is not loaded, so
// the three functions of it the script calls print what they were given:
// _describe the candidates (value:description), compadd and _arguments a
// marker.
func TestCLICompletionZsh(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Fatalf("zsh is needed (make test installs it): %v", err)
	}
	dir := t.TempDir()
	script, err := exec.Command(prunBin, "completion", "zsh").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prun.zsh"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte("alpha slots=2\nbeta\n# gamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const driver = `
compdef() { :; }
_describe() { print -rl -- "${completions[@]%%:*}"; }
compadd() { print -r -- "compadd $*"; }
_arguments() { print -r -- "files"; }
source ./prun.zsh
words=(prun "$@")
CURRENT=$(( $# + 1 ))
_prun
`
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"--tim"}, []string{"--timeout", "--timestamp-output"}},
		{[]string{"--map-by", "nu"}, []string{"numa"}},
		{[]string{"--bind-to", "co"}, []string{"core"}},
		{[]string{"--output", "js"}, []string{"json"}},
		{[]string{"--hostfile", "hosts", "-H", ""}, []string{"alpha", "beta"}},
	} {
		cmd := exec.Command("zsh", append([]string{"-f", "-c", driver, "driver"}, c.words...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(prunBin)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%q: %v\n%s", c.words, err, out)
			continue
		}
		got := strings.Fields(string(out))
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("prun %s<TAB>: %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
	}
}
