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
// real bash, with the bash-completion package loaded as a Debian login
// shell loads it (/etc/profile.d/bash_completion.sh; the script calls its
// _init_completion, and without it every Tab printed
// "_get_comp_words_by_ref: command not found"), and completes command
// lines through it (prun __complete): flags, their values, and -H's hosts
// from the hostfile given before it. The words are split as readline splits
// them: at COMP_WORDBREAKS too (= and :), which bash-completion joins again.
// Its flag and value cases failed before (prun __complete returned none).
func TestCLICompletionBash(t *testing.T) {
	completeIn(t, "bash", []string{"-c", bashDriver, "driver"}, nil, append(completionCases,
		completionCase{[]string{"-n", "1", "./x", "--tim"}, nil}, // the program's own argument: files, not prun's flags
		// What readline puts in place of its word, the text after the last
		// = or :, quoted (bash's printf %q) when it is the only candidate.
		// --flag=VALUE completed nothing before (__complete gave
		// "--map-by=package", the script completes "pa").
		completionCase{[]string{"--map-by=pa"}, []string{"package"}},
		completionCase{[]string{"--hostfile", "hosts", "-H", "alpha:2,b"}, []string{`2\,beta`}},
	))
}

// bashDriver completes the words given to it as bash does on a Tab
// (COMP_TYPE 9; the test may set another: 63, ?, lists the candidates with
// their descriptions) and prints the candidates.
const bashDriver = `
PS1='$ ' # interactive, as far as /etc/profile.d/bash_completion.sh looks
. /etc/profile.d/bash_completion.sh
declare -F _init_completion >/dev/null || { echo "bash-completion is not installed (make test installs it)"; exit 1; }
compopt() { :; } # bash's builtin works inside a completion only (it sets nospace)
source ./prun.bash
COMP_LINE="prun $*"
COMP_POINT=${#COMP_LINE}
COMP_TYPE=${COMP_TYPE:-9}
# readline's words: runs of blanks separate them, and each run of
# COMP_WORDBREAKS's other characters is a word of its own; the last is the
# one under the cursor, empty after a blank.
COMP_WORDS=() w= kind=
for ((i = 0; i < ${#COMP_LINE}; i++)); do
	c=${COMP_LINE:i:1}
	if [[ $c == [[:blank:]] ]]; then k=blank; elif [[ $COMP_WORDBREAKS == *"$c"* ]]; then k=break; else k=word; fi
	if [[ $k != "$kind" && -n $w ]]; then COMP_WORDS+=("$w"); w=; fi
	[[ $k == blank ]] || w+=$c
	kind=$k
done
COMP_WORDS+=("$w")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
__start_prun prun "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
`

// TestCLICompletionZsh sources the script of `prun completion zsh` in a
// real zsh (make test installs it) and completes command lines through it.
// Outside an interactive shell zsh's completion system is not loaded, so
// the three functions of it the script calls print what they were given:
// _describe the candidates (value:description) with the prefix -P gives
// them (--flag=), compadd and _arguments a marker.
func TestCLICompletionZsh(t *testing.T) {
	completeIn(t, "zsh", []string{"-f", "-c", zshDriver, "driver"}, nil, append(completionCases,
		completionCase{[]string{"--map-by=pa"}, []string{"--map-by=package"}}, // nothing before: --map-by=--map-by=package
	))
}

// zshDriver completes the words given to it and prints the candidates, or
// with DESCRIBE=1 each candidate:description as _describe got it.
const zshDriver = `
compdef() { :; }
_describe() {
	local i=${@[(i)-P]} prefix=
	(( i < $# )) && prefix=${@[i+1]}
	if [[ -n $DESCRIBE ]]; then print -rl -- "${completions[@]}"; else print -rl -- $prefix${^completions[@]%%:*}; fi
}
compadd() { print -r -- "compadd $*"; }
_arguments() { print -r -- "files"; }
source ./prun.zsh
words=(prun "$@")
CURRENT=$(( $# + 1 ))
_prun
`

// The shells show a flag's description whole: a ';' inside its
// parentheses cut it before ("each daemon starts at most K others (tree
// spawn").
func TestCLICompletionDescriptions(t *testing.T) {
	words := []string{"--launch-"}
	completeIn(t, "bash", []string{"-c", bashDriver, "driver"}, []string{"COMP_TYPE=63", "COLUMNS=300"}, []completionCase{{words, []string{
		"--launch-agent   (same as --rsh)",
		"--launch-fanout  (each daemon starts at most K others (tree spawn; default 32))",
	}}})
	completeIn(t, "zsh", []string{"-f", "-c", zshDriver, "driver"}, []string{"DESCRIBE=1"}, []completionCase{{words, []string{
		"--launch-agent:same as --rsh",
		"--launch-fanout:each daemon starts at most K others (tree spawn; default 32)",
	}}})
}

type completionCase struct {
	words []string
	want  []string // the lines printed
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
// running the shell with args then the words (and env), which prints the
// candidates, one a line.
func completeIn(t *testing.T, shell string, args, env []string, cases []completionCase) {
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
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s %q: %v\n%s", shell, c.words, err, out)
			continue
		}
		if got := lines(string(out)); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: prun %s<TAB>: %q, want %q", shell, strings.Join(c.words, " "), got, c.want)
		}
	}
}
