package launcher

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"prun/jobspec"
)

func TestPreloads(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, bytes.Repeat([]byte{'x'}, size), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	app, other, data := write("app", 10, 0o755), write("other", 20, 0o755), write("in.dat", 5, 0o640)
	job := &jobspec.Job{Apps: []jobspec.App{{Exe: app}, {Exe: other}, {Exe: app}}, PreloadBinary: true, PreloadFiles: []string{data}}
	programs, files, err := preloads(job)
	if err != nil {
		t.Fatal(err)
	}
	if len(programs) != 3 || programs[0].Size != 10 || programs[1].Size != 20 || programs[2] != programs[0] ||
		programs[0].Source != app || programs[0].ID != 0 || programs[1].ID != 1 {
		t.Errorf("programs: %+v; want one per app, an app's program described once", programs)
	}
	if len(files) != 1 || files[0].Name != "in.dat" || files[0].Mode.Perm() != 0o640 || files[0].Size != 5 || files[0].ID != 2 {
		t.Errorf("files: %+v", files)
	}

	// A program sent as a file too is sent once.
	if programs, files, err = preloads(&jobspec.Job{Apps: []jobspec.App{{Exe: app}}, PreloadBinary: true, PreloadFiles: []string{app}}); err != nil ||
		files[0].ID != programs[0].ID {
		t.Errorf("a program among the files: %+v %+v %v", programs, files, err)
	}

	// No size limit: the contents travel in chunks, apart from the plan.
	big := write("big.dat", 20<<20, 0o644)
	if _, files, err = preloads(&jobspec.Job{Apps: []jobspec.App{{Exe: app}}, PreloadFiles: []string{data, big}}); err != nil || files[1].Size != 20<<20 {
		t.Errorf("a 20 MiB file: %+v, %v", files, err)
	}
	// Only regular files: a directory or a device would never end.
	for _, path := range []string{dir, "/dev/zero"} {
		_, _, err = preloads(&jobspec.Job{Apps: []jobspec.App{{Exe: app}}, PreloadFiles: []string{path}})
		if err == nil || !strings.Contains(err.Error(), "--preload-files") || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v", path, err)
		}
	}
	os.Remove(data) // gone since the command line was read
	_, _, err = preloads(&jobspec.Job{Apps: []jobspec.App{{Exe: app}}, PreloadFiles: []string{data}})
	if err == nil || !strings.Contains(err.Error(), "in.dat") {
		t.Errorf("a missing file: %v", err)
	}
}
