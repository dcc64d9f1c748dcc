package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// xtermArgv wraps a rank's program for mpirun's --xterm: xterm, found in
// the rank's PATH, runs it in a window titled with the rank and node; with
// hold the window stays after the rank ends. The rank's environment passes
// through xterm to the program, PMIx's and PMI's included, and the PMI
// socket stays on descriptor 3 (xterm leaves inherited descriptors open).
func xtermArgv(exe string, argv []string, rank int, node string, hold bool, env []string) (string, []string, error) {
	pathList := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v
		}
	}
	xterm := ""
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, "xterm")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			xterm = p
			break
		}
	}
	if xterm == "" {
		return "", nil, fmt.Errorf("--xterm: no xterm in the rank's PATH")
	}
	out := []string{"xterm", "-T", fmt.Sprintf("prun: rank %d on %s", rank, node)}
	if hold {
		out = append(out, "-hold")
	}
	out = append(append(out, "-e", exe), argv[1:]...)
	return xterm, out, nil
}
