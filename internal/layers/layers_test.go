package layers

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// readLayers reads "## Layers" of docs/architecture.md: numbered lines,
// each a layer, naming its packages in backquotes.
func readLayers(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	item := regexp.MustCompile("^([0-9]+)\\. ")
	pkg := regexp.MustCompile("`([a-z0-9/_-]+)`")
	layer := map[string]int{}
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Layers"
		case in && item.MatchString(line):
			n := len(layer)
			var l int
			for _, c := range item.FindStringSubmatch(line)[1] {
				l = l*10 + int(c-'0')
			}
			for _, m := range pkg.FindAllStringSubmatch(line, -1) {
				if _, dup := layer["prun/"+m[1]]; dup {
					t.Errorf("docs/architecture.md, Layers: %s is listed twice", m[1])
				}
				layer["prun/"+m[1]] = l
			}
			if len(layer) == n {
				t.Errorf("docs/architecture.md, Layers: %q names no package", line)
			}
		}
	}
	if len(layer) == 0 {
		t.Fatal(`docs/architecture.md has no "## Layers" list`)
	}
	return layer
}

// TestLayers: every package of the module is in a layer, and imports only
// packages of lower layers.
func TestLayers(t *testing.T) {
	layer := readLayers(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		p := f[0]
		seen[p] = true
		lp, ok := layer[p]
		if !ok {
			t.Errorf("%s is in no layer of docs/architecture.md", p)
			continue
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, "prun/") {
				continue
			}
			if li, ok := layer[imp]; ok && li >= lp {
				t.Errorf("%s (layer %d) imports %s (layer %d)", p, lp, imp, li)
			}
		}
	}
	for p := range layer {
		if !seen[p] {
			t.Errorf("docs/architecture.md, Layers: %s is not a package", p)
		}
	}
}
