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
	if len(programs) != 3 || len(programs[0]) != 10 || len(programs[1]) != 20 || &programs[2][0] != &programs[0][0] {
		t.Errorf("programs: %d of lengths %d, %d, ...; want one per app, an app's program read once", len(programs), len(programs[0]), len(programs[1]))
	}
	if len(files) != 1 || files[0].Name != "in.dat" || files[0].Mode.Perm() != 0o640 || len(files[0].Data) != 5 {
		t.Errorf("files: %+v", files)
	}

	// What does not fit in one launch is refused, naming the flag.
	big := write("big.dat", maxPreload+1, 0o644)
	_, _, err = preloads(&jobspec.Job{Apps: []jobspec.App{{Exe: app}}, PreloadFiles: []string{data, big}})
	if err == nil || !strings.Contains(err.Error(), "--preload-files") || !strings.Contains(err.Error(), "big.dat") {
		t.Errorf("over the limit: %v", err)
	}
	os.Remove(data) // gone since the command line was read
	_, _, err = preloads(&jobspec.Job{Apps: []jobspec.App{{Exe: app}}, PreloadFiles: []string{data}})
	if err == nil || !strings.Contains(err.Error(), "in.dat") {
		t.Errorf("a missing file: %v", err)
	}
}
