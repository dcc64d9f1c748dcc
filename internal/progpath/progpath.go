// Package progpath finds a program as a shell would, for the command line
// (cli) and for spawn requests (launcher) alike.
package progpath

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Resolve finds prog: a name with a slash is a path (relative to wdir, the
// working directory of the ranks), a bare name is looked up with lookPath
// (exec.LookPath when nil). The result is an absolute path to an
// executable regular file; errors start with prog.
func Resolve(prog, wdir string, lookPath func(string) (string, error)) (string, error) {
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	var path string
	if strings.Contains(prog, "/") {
		path = prog
	} else {
		p, err := lookPath(prog)
		if err != nil {
			if errors.Is(err, exec.ErrNotFound) {
				return "", fmt.Errorf("%s: command not found in PATH", prog)
			}
			return "", fmt.Errorf("%s: %v", prog, err)
		}
		path = p
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(wdir, path)
	}
	st, err := os.Stat(path)
	switch {
	case err != nil && os.IsNotExist(err):
		return "", fmt.Errorf("%s: no such file", prog)
	case err != nil:
		return "", fmt.Errorf("%s: %v", prog, err)
	case st.IsDir():
		return "", fmt.Errorf("%s: is a directory, not a program", prog)
	case st.Mode()&0o111 == 0 || unix.Access(path, unix.X_OK) != nil:
		return "", fmt.Errorf("%s: not executable", prog)
	}
	return path, nil
}
