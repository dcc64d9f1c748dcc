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
// Its flag and value cases failed before (prun __complete returned none).
func TestCLICompletionBash(t *testing.T) {
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
	completeIn(t, "bash", []string{"-c", driver, "driver"}, append(completionCases,
		completionCase{[]string{"-n", "1", "./x", "--tim"}, nil}, // the program's own argument: files, not prun's flags
	))
}

// TestCLICompletionZsh sources the script of `prun completion zsh` in a
// real zsh (make test installs it) and completes command lines through it.
// Outside an interactive shell zsh's completion system is not loaded, so
// the three functions of it the script calls print what they were given:
// _describe the candidates (value:description), compadd and _arguments a
// marker.
func TestCLICompletionZsh(t *testing.T) {
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
	completeIn(t, "zsh", []string{"-f", "-c", driver, "driver"}, completionCases)
}

type completionCase struct {
	words []string
	want  []string
}

// completionCases are the command lines both shells complete alike.
var completionCases = []completionCase{
	{[]string{"--tim"}, []string{"--timeout", "--timestamp-output"}},
	{[]string{"--map-by", "nu"}, []string{"numa"}},
	{[]string{"--bind-to", "co"}, []string{"core"}},
	{[]string{"--output", "js"}, []string{"json"}},
	{[]string{"--hostfile", "hosts", "-H", ""}, []string{"alpha", "beta"}},
	{[]string{"--hostfile", "hosts", "-n", "2", "-H", "a"}, []string{"alpha"}},
}

// completeIn writes the shell's completion script (prun.SHELL) and a
// hostfile into a directory, and completes each case's words there by
// running the shell with args then the words, which prints the candidates.
func completeIn(t *testing.T, shell string, args []string, cases []completionCase) {
	t.Helper()
	if _, err := exec.LookPath(shell); err != nil {
		t.Fatalf("%s is needed (make test installs it): %v", shell, err)
	}
	dir := t.TempDir()
	script, err := exec.Command(prunBin, "completion", shell).Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prun."+shell), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte("alpha slots=2\nbeta\n# gamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		cmd := exec.Command(shell, append(args, c.words...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(prunBin)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s %q: %v\n%s", shell, c.words, err, out)
			continue
		}
		if got := strings.Fields(string(out)); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: prun %s<TAB>: %q, want %q", shell, strings.Join(c.words, " "), got, c.want)
		}
	}
}
