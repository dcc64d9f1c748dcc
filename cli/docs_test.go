package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"prun/jobspec"
)

// Every visible flag is in exactly one group of the references, and the
// groups name no flag that is not there.
func TestFlagGroups(t *testing.T) {
	fs := FlagSet()
	in := map[string]string{}
	for _, g := range flagGroups {
		for _, name := range g.flags {
			f := fs.Lookup(name)
			switch {
			case f == nil:
				t.Errorf("group %s: no flag --%s", g.key, name)
			case f.Hidden:
				t.Errorf("group %s: --%s is hidden", g.key, name)
			case in[name] != "":
				t.Errorf("--%s in groups %s and %s", name, in[name], g.key)
			}
			in[name] = g.key
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && in[f.Name] == "" {
			t.Errorf("--%s is in no group of cli/docs.go's flagGroups", f.Name)
		}
	})
}

// --help lists the flags under their groups' titles, not as one list.
func TestHelpGrouped(t *testing.T) {
	var out bytes.Buffer
	cmd := Command(func(*jobspec.Job) int { return 0 }, new(int))
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	last := -1
	for _, g := range flagGroups {
		i := strings.Index(help, "\n"+g.title+":\n")
		if i < 0 || i < last {
			t.Errorf("help: no section %q after the previous one", g.title)
		}
		last = i
	}
	place := help[strings.Index(help, "\nPlacement:\n"):strings.Index(help, "\nOutput:\n")]
	if !strings.Contains(place, "--map-by POLICY") || strings.Contains(place, "--tag-output") {
		t.Errorf("the placement section:\n%s", place)
	}
}

// The documentation says what pmixsrv's TestLinkedLibraries checks: a node
// needs no libpmix, not even one prun copied itself to (docs/options.md
// said it did long after libpmix was linked in).
func TestDocsNeedNoLibpmix(t *testing.T) {
	docs, _ := filepath.Glob("../docs/*.md")
	claim := regexp.MustCompile(`(?i)needs?\s+(the\s+)?libpmix\b`)
	for _, name := range append(docs, "../README.md") {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := claim.Find(b); m != nil {
			t.Errorf("%s says %q: prun needs only libc", name, m)
		}
	}
}

// --help and the man page list prun's commands (not its internal daemon),
// before the options.
func TestHelpCommands(t *testing.T) {
	help := HelpText()
	i, j := strings.Index(help, "\nCommands:\n"), strings.Index(help, "\nOptions by concern")
	if i < 0 || j < i {
		t.Fatalf("help: no Commands section before the options:\n%s", help)
	}
	var names []string
	for _, l := range strings.Split(strings.Trim(help[i+len("\nCommands:\n"):j], "\n"), "\n") {
		if !strings.HasPrefix(l, "  ") || !strings.Contains(strings.TrimSpace(l), "  ") {
			t.Errorf("help: command line %q is not \"  COMMAND  what it does\"", l)
		}
		names = append(names, strings.Fields(l)[0])
	}
	if want := []string{"dvm", "top", "stack", "completion"}; !slices.Equal(names, want) {
		t.Errorf("help lists commands %q, want %q", names, want)
	}
	for _, want := range []string{".SH COMMANDS\n", ".B prun dvm ", ".B prun top ", ".B prun stack ", ".B prun completion "} {
		if !strings.Contains(ManPage(), want) {
			t.Errorf("the man page has no %q", want)
		}
	}
}

// docs/prun.1 and docs/options.md's flag tables are what the flags say
// (go generate ./cli writes them).
func TestGeneratedDocs(t *testing.T) {
	man, err := os.ReadFile("../docs/prun.1")
	if err != nil || string(man) != ManPage() {
		t.Errorf("docs/prun.1 is not current (%v): run go generate ./cli", err)
	}
	for _, f := range []string{"../docs/options.md", "../README.md"} {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if want, err := OptionsDoc(string(doc)); err != nil || want != string(doc) {
			t.Errorf("%s's flag tables are not current (%v): run go generate ./cli", f, err)
		}
	}
	doc, err := os.ReadFile("../docs/options.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range flagGroups {
		if !strings.Contains(string(doc), "<!-- flags:"+g.key+" -->") {
			t.Errorf("docs/options.md has no table of group %s", g.key)
		}
	}
	// man renders it without complaint, where man is installed.
	if _, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", filepath.Join("..", "docs", "prun.1"))
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff: %v\n%s", err, out)
		}
	}
}
