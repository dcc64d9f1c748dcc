package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"prun/internal/shellwords"
)

// An application file (mpirun's --app FILE, Hydra's -configfile FILE) gives
// the application contexts one per line, each as on the command line
// ("-n 2 -x A=1 ./a arg"); a lone ':' also separates contexts on a line.
// Words split as a POSIX shell splits them, without expansions, comments
// included (shellwords.Split); a line does not continue on the next.

// appSegment is one context of an application file, with where it is.
type appSegment struct {
	line int
	args []string
}

// readAppFile reads path's contexts (a relative path from the working
// directory env gives).
func readAppFile(path string, env Env) ([]appSegment, error) {
	abs := path
	if !filepath.IsAbs(path) {
		cwd, err := env.Getwd()
		if err != nil {
			return nil, usagef("cannot determine the working directory: %v", err)
		}
		abs = filepath.Join(cwd, path)
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, usagef("--app %s: %v", path, errText(err))
	}
	segs, err := parseAppFile(string(b))
	if err != nil {
		return nil, usagef("%s:%v", path, err)
	}
	if len(segs) == 0 {
		return nil, usagef("--app %s: no application in the file", path)
	}
	return segs, nil
}

// errText is an error without the path that os errors repeat.
func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// parseAppFile splits text into contexts; errors start with "LINE: ".
func parseAppFile(text string) ([]appSegment, error) {
	var segs []appSegment
	for i, line := range strings.Split(text, "\n") {
		words, err := shellwords.Split(strings.TrimSuffix(line, "\r"))
		if err != nil {
			return nil, fmt.Errorf("%d: %v", i+1, err)
		}
		cur := appSegment{line: i + 1}
		for _, w := range words {
			if w == ":" {
				if len(cur.args) == 0 {
					return nil, fmt.Errorf("%d: a ':' with no application before it", i+1)
				}
				segs = append(segs, cur)
				cur = appSegment{line: i + 1}
				continue
			}
			cur.args = append(cur.args, w)
		}
		if len(cur.args) > 0 {
			segs = append(segs, cur)
		} else if len(words) > 0 {
			return nil, fmt.Errorf("%d: a ':' with no application after it", i+1)
		}
	}
	return segs, nil
}
