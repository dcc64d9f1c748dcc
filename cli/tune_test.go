package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTune(t *testing.T) {
	env, _ := testEnv(t)
	vars, err := parseTune("# profile\n-x A=1 --mca btl self,vader\n\n-mca pml ob1 -x SET_VAR -x 'B=two words' # end\n", env)
	if err != nil {
		t.Fatal(err)
	}
	want := "A=1 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 SET_VAR=v1 B=two words"
	if strings.Join(vars, " ") != want {
		t.Errorf("vars %q, want %q", strings.Join(vars, " "), want)
	}
	for text, msg := range map[string]string{
		"-x A=1\n-x":            "2: -x needs a VAR or VAR=value",
		"--mca btl":             "1: --mca needs a KEY and a VALUE",
		"--mca b.l x":           `1: "b.l" is not a parameter name`,
		"-n 2":                  `1: "-n": a tune file holds -x and --mca options only`,
		"-x 'unterminated":      "1: ",
		"\n\n-x A=1 --host a,b": `3: "--host"`,
	} {
		if _, err := parseTune(text, env); err == nil || !strings.HasPrefix(err.Error(), msg) {
			t.Errorf("parseTune(%q) = %v, want an error starting %q", text, err, msg)
		}
	}
}

func TestTuneAndAm(t *testing.T) {
	env, dir := testEnv(t)
	if err := os.WriteFile(filepath.Join(dir, "p.tune"), []byte("-x T=1 -x SET_VAR=tuned --mca btl tcp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req, err := Parse(strings.Fields("-tune p.tune -am ft.conf -x SET_VAR=mine -n 1 ./app"), env)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(req.Job.Apps[0].Env, " ")
	want := "OMPI_MCA_mca_base_envar_file_prefix=" + filepath.Join(dir, "p.tune") +
		" T=1 SET_VAR=tuned OMPI_MCA_btl=tcp OMPI_MCA_mca_base_param_file_prefix=ft.conf SET_VAR=mine"
	if got != want { // the context's own -x comes last: it wins
		t.Errorf("env %q,\nwant %q", got, want)
	}
	for args, msg := range map[string]string{
		"-tune nope.tune ./app":      "-tune nope.tune: no such file or directory",
		"-tune p.tune,,p.tune ./app": "an empty file name",
	} {
		_, err := Parse(strings.Fields(args), env)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), msg) {
			t.Errorf("Parse(%q) = %v, want a usage error containing %q", args, err, msg)
		}
	}
	os.WriteFile(filepath.Join(dir, "bad.tune"), []byte("-x A=1\n--host x\n"), 0o644)
	if _, err := Parse(strings.Fields("-tune bad.tune ./app"), env); err == nil || !strings.HasPrefix(err.Error(), `bad.tune:2: "--host"`) {
		t.Errorf("a bad tune file: %v, want the file and line", err)
	}
}

// FuzzTune: no tune file may panic; a failure names its line, and on
// success every -x or --mca option gave one variable.
func FuzzTune(f *testing.F) {
	for _, s := range []string{"-x A=1 --mca btl self\n-mca pml ob1 # c\n", "-x", "--mca a", "'", "-x SET_VAR -x NOT_SET", "\n\n-n 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		env, _ := testEnv(t)
		vars, err := parseTune(text, env)
		if err != nil {
			if line, _, ok := strings.Cut(err.Error(), ": "); !ok || strings.Trim(line, "0123456789") != "" {
				t.Fatalf("parseTune(%q): error %q does not start with its line", text, err)
			}
			return
		}
		for _, v := range vars {
			if !strings.Contains(v, "=") {
				t.Fatalf("parseTune(%q): %q is not VAR=value", text, v)
			}
		}
	})
}
