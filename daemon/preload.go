package daemon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// preloaded is what preload placed for one job on this node: written by
// place before the job's first rank starts, read by its starts, undone by
// unplace once none runs.
type preloaded struct {
	exes   map[int]string // apps whose ranks run a preloaded copy of their program
	placed []string       // files --preload-files put in working directories
}

// place places what the plan sends for this node's ranks: an app's
// program, when this node's copy at the same path differs or is missing,
// goes to the session directory and the ranks run it from there; the files
// go into each app's working directory (each rank's, with
// --set-cwd-to-session-dir), where a file of the same name and
// contents is left as it is and one of other contents (or anything that is
// not a regular file) stops the launch. The files placed are removed when
// the job ends (unplace); the programs go with the session directory.
// Self is this node's index in p's map; d gives what arrived (its staging)
// and where programs go (its session directory).
func (pl *preloaded) place(d *Daemon, p *Plan, self int) error {
	if len(p.Programs) == 0 && len(p.Files) == 0 {
		return nil
	}
	defer d.stage.drop() // what arrived is placed, or of no use
	apps := map[int]bool{}
	var dirs [][]string // by app: where its ranks start
	for _, r := range p.procsOn(self) {
		a := p.Map.Procs[r].App
		for len(dirs) <= a {
			dirs = append(dirs, nil)
		}
		switch {
		case p.Job.CwdSessionDir: // each rank starts in its own PMIX_PROCDIR
			dirs[a] = append(dirs[a], d.cfg.Session.ProcDir(p.Nspace, r))
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
		if a < len(p.Programs) && p.Programs[a].Name != "" {
			path := filepath.Join(d.cfg.Session.Top, fmt.Sprintf("%s.app%d.%s", p.Nspace, a, filepath.Base(app.Exe)))
			placed, err := d.placeProgram(app.Exe, path, p.Programs[a])
			if err != nil {
				return fmt.Errorf("--preload-binary: %s on %s: %w", app.Exe, d.cfg.Name, err)
			}
			if placed {
				if pl.exes == nil {
					pl.exes = map[int]string{}
				}
				pl.exes[a] = path
			}
		}
		for _, dir := range dirs[a] {
			for _, f := range p.Files {
				path, placed, err := d.placeFile(dir, f)
				if err != nil {
					return fmt.Errorf("--preload-files: %s on %s: %w", path, d.cfg.Name, err)
				}
				if placed {
					pl.placed = append(pl.placed, path)
				}
			}
		}
	}
	return nil
}

// exe is the program app's ranks run on this node.
func (pl *preloaded) exe(p *Plan, app int) string {
	if path, ok := pl.exes[app]; ok {
		return path
	}
	return p.Job.Apps[app].Exe
}

// unplace removes the files preload placed.
func (pl *preloaded) unplace() {
	for _, path := range pl.placed {
		os.Remove(path)
	}
	pl.placed = nil
}

// placeProgram puts the program f at path (placed true) unless this node's
// own copy at exe is the same.
func (d *Daemon) placeProgram(exe, path string, f File) (placed bool, err error) {
	if exe == f.Source {
		return false, nil // the launcher's node: the very file
	}
	src, staged, err := d.stage.source(f)
	if err != nil {
		return false, err
	}
	if same, _ := sameContents(exe, src, f.Size); same {
		return false, nil
	}
	// What arrived is in the session directory already: linked, so that a
	// large program is not copied twice.
	if staged && filepath.Dir(src) == filepath.Dir(path) && os.Link(src, path) == nil {
		return true, os.Chmod(path, 0o700)
	}
	return true, copyFile(src, path, 0o700)
}

// placeFile puts f into dir unless an identical file is there already
// (placed is then false). The copy appears whole or not at all: it is
// written beside and renamed, since on a shared file system other nodes
// look for the same file at the same time.
func (d *Daemon) placeFile(dir string, f File) (path string, placed bool, err error) {
	path = filepath.Join(dir, f.Name)
	src, _, err := d.stage.source(f)
	if err != nil {
		return path, false, err
	}
	st, err := os.Lstat(path)
	switch {
	case err == nil && st.Mode().IsRegular():
		same, err := sameContents(path, src, f.Size)
		if err == nil && !same {
			err = errors.New("something else of that name is there")
		}
		return path, false, err
	case err == nil:
		return path, false, errors.New("something else of that name is there")
	case !errors.Is(err, fs.ErrNotExist):
		return path, false, err
	}
	return path, true, copyFile(src, path, f.Mode.Perm())
}

// sameContents says whether the file at a is a regular file of size bytes
// that holds what b holds.
func sameContents(a, b string, size int64) (bool, error) {
	st, err := os.Stat(a)
	if err != nil || !st.Mode().IsRegular() || st.Size() != size {
		return false, err
	}
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, erra := io.ReadFull(fa, ba)
		nb, errb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if erra != nil || errb != nil {
			if erra == io.EOF || erra == io.ErrUnexpectedEOF {
				erra = nil
			}
			if errb == io.EOF || errb == io.ErrUnexpectedEOF {
				errb = nil
			}
			return erra == nil && errb == nil, errors.Join(erra, errb)
		}
	}
}

// copyFile writes src's contents to path with mode perm, through a file
// beside it that is renamed into place.
func copyFile(src, path string, perm os.FileMode) error {
	r, err := os.Open(src)
	if err != nil {
		return err
	}
	defer r.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".prun-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// FileOf describes the regular file at path for sending with a plan.
func FileOf(path string) (File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return File{}, err
	}
	if !st.Mode().IsRegular() {
		return File{}, fmt.Errorf("%s: not a regular file", path)
	}
	return File{Name: filepath.Base(path), Mode: st.Mode(), Size: st.Size(), Source: path}, nil
}

// staging keeps the preloaded contents that reach a node ahead of their
// plan, one file each in the session directory.
type staging struct {
	dir   string
	mu    sync.Mutex
	files map[int]*staged
}

type staged struct {
	path string
	w    *os.File // nil once complete
	h    hash.Hash
	n    int64
	sum  string
	err  error // the first failure; later chunks are dropped
}

// Receive stores the chunk at offset off of the plan's file id. A file's
// chunks come in order; a failure (a full disk) is kept for the launch that
// needs the file to report.
func (d *Daemon) Receive(id int, off int64, p []byte) {
	d.stage.receive(id, off, p)
}

func (s *staging) receive(id int, off int64, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[int]*staged{}
	}
	st := s.files[id]
	if st == nil {
		st = &staged{path: filepath.Join(s.dir, fmt.Sprintf("preload.%d", id)), h: sha256.New()}
		s.files[id] = st
		st.w, st.err = os.OpenFile(st.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	switch {
	case st.err != nil:
	case st.w == nil || off != st.n:
		st.err = fmt.Errorf("arrived out of order (%d bytes at %d after %d)", len(p), off, st.n)
	default:
		if _, st.err = st.w.Write(p); st.err == nil {
			st.h.Write(p)
			st.n += int64(len(p))
		}
	}
}

// source is where f's contents are: what arrived (staged), checked whole,
// or on the launcher's node the file itself.
func (s *staging) source(f File) (path string, staged bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.files[f.ID]
	if st != nil && st.w != nil {
		if err := st.w.Close(); st.err == nil {
			st.err = err
		}
		st.w, st.sum = nil, hex.EncodeToString(st.h.Sum(nil))
	}
	switch {
	case st == nil && f.Source != "":
		return f.Source, false, nil
	case st == nil:
		return "", false, errors.New("its contents did not arrive")
	case st.err != nil:
		return "", false, fmt.Errorf("receiving it: %w", st.err)
	case st.n != f.Size || st.sum != f.Sum:
		return "", false, fmt.Errorf("what arrived (%d bytes) is not what was sent (%d bytes)", st.n, f.Size)
	}
	return st.path, true, nil
}

// drop removes what arrived: the session directory would, at the end, but
// a large program need not wait there twice.
func (s *staging) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, st := range s.files {
		if st.w != nil {
			st.w.Close()
		}
		os.Remove(st.path)
		delete(s.files, id)
	}
}
