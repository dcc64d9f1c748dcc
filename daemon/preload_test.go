package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPlaceFile(t *testing.T) {
	dir := t.TempDir()
	f := File{Name: "in.dat", Mode: 0o640, Data: []byte("payload")}
	path, placed, err := placeFile(dir, f)
	if err != nil || !placed || path != filepath.Join(dir, "in.dat") {
		t.Fatalf("into an empty directory: %q, %v, %v", path, placed, err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("placed file: %v, %v; want mode 0640", st, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "payload" {
		t.Errorf("placed contents %q", b)
	}
	// The same file again (another app, another node on a shared file
	// system): left alone, not placed by this call.
	if _, placed, err := placeFile(dir, f); err != nil || placed {
		t.Errorf("over an identical file: placed %v, %v; want left alone", placed, err)
	}
	// Anything else of that name is somebody else's.
	os.WriteFile(path, []byte("theirs"), 0o644)
	if _, _, err := placeFile(dir, f); err == nil {
		t.Error("over a file of other contents: no error")
	}
	if b, _ := os.ReadFile(path); string(b) != "theirs" {
		t.Errorf("their file became %q", b)
	}
	os.Remove(path)
	os.Mkdir(path, 0o755)
	if _, _, err := placeFile(dir, f); err == nil {
		t.Error("over a directory: no error")
	}
	os.Remove(path)
	os.Symlink(filepath.Join(dir, "nowhere"), path)
	if _, _, err := placeFile(dir, f); err == nil {
		t.Error("over a dangling symlink: no error")
	}
	os.Remove(path)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the directory: %v", ents)
	}
	if _, _, err := placeFile(filepath.Join(dir, "missing"), f); err == nil {
		t.Error("into a missing directory: no error")
	}
}
