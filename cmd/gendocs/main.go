// Command gendocs writes prun's generated documentation from cli's flags,
// the source of --help: docs/prun.1 and the flag tables of
// docs/options.md and README.md. Run it with `go generate ./cli`; cli's
// TestGeneratedDocs fails while they are not current.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"prun/cli"
)

func main() {
	root := flag.String("root", ".", "the repository's top directory")
	flag.Parse()
	if err := os.WriteFile(filepath.Join(*root, "docs", "prun.1"), []byte(cli.ManPage()), 0o644); err != nil {
		fail(err)
	}
	for _, path := range []string{filepath.Join(*root, "docs", "options.md"), filepath.Join(*root, "README.md")} {
		doc, err := os.ReadFile(path)
		if err != nil {
			fail(err)
		}
		out, err := cli.OptionsDoc(string(doc))
		if err != nil {
			fail(err)
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
	os.Exit(1)
}
