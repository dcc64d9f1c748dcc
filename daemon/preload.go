package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// preload places what the plan sends for this node's ranks: an app's
// program, when this node's copy at the same path differs or is missing,
// goes to the session directory and the ranks run it from there; the files
// go into each app's working directory (each rank's, with
// --set-cwd-to-session-dir), where a file of the same name and
// contents is left as it is and one of other contents (or anything that is
// not a regular file) stops the launch. The files placed are removed when
// the job ends (unplace); the programs go with the session directory.
func (sh *shell) preload() error {
	p := sh.plan
	if len(p.Programs) == 0 && len(p.Files) == 0 {
		return nil
	}
	apps := map[int]bool{}
	var dirs [][]string // by app: where its ranks start
	for _, r := range p.procsOn(sh.self) {
		a := p.Map.Procs[r].App
		for len(dirs) <= a {
			dirs = append(dirs, nil)
		}
		switch {
		case p.Job.CwdSessionDir: // each rank starts in its own PMIX_PROCDIR
			dirs[a] = append(dirs[a], sh.d.cfg.Session.ProcDir(p.Nspace, r))
		case !apps[a]:
			dirs[a] = append(dirs[a], p.Job.Apps[a].Wdir)
		}
		apps[a] = true
	}
	order := make([]int, 0, len(apps))
	for a := range apps {
		order = append(order, a)
	}
	sort.Ints(order)
	for _, a := range order {
		app := &p.Job.Apps[a]
		if a < len(p.Programs) && p.Programs[a] != nil && !sameContents(app.Exe, p.Programs[a]) {
			path := filepath.Join(sh.d.cfg.Session.Top, fmt.Sprintf("%s.app%d.%s", p.Nspace, a, filepath.Base(app.Exe)))
			if err := os.WriteFile(path, p.Programs[a], 0o700); err != nil {
				return fmt.Errorf("--preload-binary: %s on %s: %w", app.Exe, sh.nodeName(), err)
			}
			if sh.exes == nil {
				sh.exes = map[int]string{}
			}
			sh.exes[a] = path
		}
		for _, dir := range dirs[a] {
			for _, f := range p.Files {
				path, placed, err := placeFile(dir, f)
				if err != nil {
					return fmt.Errorf("--preload-files: %s on %s: %w", path, sh.nodeName(), err)
				}
				if placed {
					sh.placed = append(sh.placed, path)
				}
			}
		}
	}
	return nil
}

// exe is the program app's ranks run on this node.
func (sh *shell) exe(app int) string {
	if path, ok := sh.exes[app]; ok {
		return path
	}
	return sh.plan.Job.Apps[app].Exe
}

// unplace removes the files preload placed.
func (sh *shell) unplace() {
	for _, path := range sh.placed {
		os.Remove(path)
	}
	sh.placed = nil
}

func sameContents(path string, data []byte) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Equal(b, data)
}

// placeFile puts f into dir unless an identical file is there already
// (placed is then false). The copy appears whole or not at all: it is
// written beside and renamed, since on a shared file system other nodes
// look for the same file at the same time.
func placeFile(dir string, f File) (path string, placed bool, err error) {
	path = filepath.Join(dir, f.Name)
	st, err := os.Lstat(path)
	switch {
	case err == nil && st.Mode().IsRegular() && sameContents(path, f.Data):
		return path, false, nil
	case err == nil:
		return path, false, errors.New("something else of that name is there")
	case !errors.Is(err, fs.ErrNotExist):
		return path, false, err
	}
	tmp, err := os.CreateTemp(dir, "."+f.Name+".prun-*")
	if err != nil {
		return path, false, err
	}
	_, err = tmp.Write(f.Data)
	if err == nil {
		err = tmp.Chmod(f.Mode.Perm())
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return path, false, err
	}
	return path, true, nil
}
