package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"prun/sessiondir"
)

func TestPlaceFile(t *testing.T) {
	dir, src := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(src, "in.dat"), []byte("payload"), 0o640)
	f, err := FileOf(filepath.Join(src, "in.dat"))
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{stage: staging{dir: t.TempDir()}}
	path, placed, err := d.placeFile(dir, f)
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
	if _, placed, err := d.placeFile(dir, f); err != nil || placed {
		t.Errorf("over an identical file: placed %v, %v; want left alone", placed, err)
	}
	// Anything else of that name is somebody else's: other contents (of
	// the same size too), a directory, a symlink.
	for _, theirs := range []string{"theirs", "paylo4d"} {
		os.WriteFile(path, []byte(theirs), 0o644)
		if _, _, err := d.placeFile(dir, f); err == nil {
			t.Errorf("over a file of other contents (%q): no error", theirs)
		}
		if b, _ := os.ReadFile(path); string(b) != theirs {
			t.Errorf("their file became %q", b)
		}
	}
	os.Remove(path)
	os.Mkdir(path, 0o755)
	if _, _, err := d.placeFile(dir, f); err == nil {
		t.Error("over a directory: no error")
	}
	os.Remove(path)
	os.Symlink(filepath.Join(dir, "nowhere"), path)
	if _, _, err := d.placeFile(dir, f); err == nil {
		t.Error("over a dangling symlink: no error")
	}
	os.Remove(path)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the directory: %v", ents)
	}
	if _, _, err := d.placeFile(filepath.Join(dir, "missing"), f); err == nil {
		t.Error("into a missing directory: no error")
	}
	if _, err := FileOf(src); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FileOf(a directory): %v", err)
	}
}

// Contents that come in chunks ahead of the plan (a remote node): placed
// when whole and as sent, refused otherwise, and gone after drop.
func TestStaging(t *testing.T) {
	src, stage, dir := t.TempDir(), t.TempDir(), t.TempDir()
	data := []byte(strings.Repeat("0123456789", 1000))
	os.WriteFile(filepath.Join(src, "app"), data, 0o755)
	f, err := FileOf(filepath.Join(src, "app"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Size != int64(len(data)) || f.Name != "app" || f.Source != filepath.Join(src, "app") {
		t.Fatalf("FileOf: %+v", f)
	}
	sum := sha256.Sum256(data)
	remote := f
	remote.ID, remote.Sum, remote.Source = 3, hex.EncodeToString(sum[:]), "" // what a remote daemon knows of it
	d := &Daemon{stage: staging{dir: stage}}
	if _, _, err := d.placeFile(dir, remote); err == nil || !strings.Contains(err.Error(), "did not arrive") {
		t.Errorf("nothing received: %v", err)
	}
	d.Receive(3, 0, data[:4000])
	d.Receive(3, 4000, data[4000:])
	// A program goes to the session directory: linked, not copied. The
	// node's own copy, if the same, is used instead.
	exe := filepath.Join(stage, "job.app0.app")
	if placed, err := d.placeProgram(filepath.Join(dir, "missing"), exe, remote); err != nil || !placed {
		t.Fatalf("program: placed %v, %v", placed, err)
	}
	if st, err := os.Stat(exe); err != nil || st.Mode().Perm() != 0o700 || st.Size() != f.Size {
		t.Errorf("program: %v, %v", st, err)
	}
	if placed, err := d.placeProgram(f.Source, filepath.Join(stage, "job.app1.app"), remote); err != nil || placed {
		t.Errorf("program the node has: placed %v, %v; want the node's own", placed, err)
	}
	if _, placed, err := d.placeFile(dir, remote); err != nil || !placed {
		t.Errorf("received whole: placed %v, %v", placed, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "app")); string(b) != string(data) {
		t.Error("placed contents differ from those sent")
	}
	d.stage.drop()
	if ents, _ := os.ReadDir(stage); len(ents) != 1 || ents[0].Name() != "job.app0.app" {
		t.Errorf("after drop the session directory holds %v; want the program alone", ents)
	}

	for _, c := range []struct {
		name string
		recv func()
	}{
		{"incomplete", func() { d.Receive(3, 0, data[:10]) }},
		{"changed", func() { d.Receive(3, 0, append([]byte("X"), data[1:]...)) }},
		{"out of order", func() { d.Receive(3, 0, data[:10]); d.Receive(3, 20, data[20:]) }},
	} {
		c.recv()
		_, _, err := d.placeFile(t.TempDir(), remote)
		if err == nil || !strings.Contains(err.Error(), "not what was sent") && !strings.Contains(err.Error(), "out of order") {
			t.Errorf("%s: %v; want an error", c.name, err)
		}
		d.stage.drop()
	}
	if ents, _ := os.ReadDir(stage); len(ents) != 1 {
		t.Errorf("after the failures the session directory holds %v", ents)
	}

	// An empty file arrives as one empty chunk.
	e := File{ID: 4, Name: "empty", Mode: 0o644}
	empty := sha256.Sum256(nil)
	e.Sum = hex.EncodeToString(empty[:])
	d.Receive(4, 0, nil)
	if _, placed, err := d.placeFile(dir, e); err != nil || !placed {
		t.Errorf("empty file: placed %v, %v", placed, err)
	}
}

// TestPreloadedPlace: a program that differs from this node's copy runs
// from the session directory; the files go into the app's working
// directory and leave with unplace, the program with the session
// directory.
func TestPreloadedPlace(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "prog"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	os.WriteFile(filepath.Join(src, "in.dat"), []byte("payload"), 0o644)
	prog, err := FileOf(filepath.Join(src, "prog"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := FileOf(filepath.Join(src, "in.dat"))
	if err != nil {
		t.Fatal(err)
	}
	p := shPlan(t, "preloaded", 2, "true", nil) // runs /bin/sh: this node's copy differs
	p.Programs, p.Files = []File{prog}, []File{data}
	top := t.TempDir()
	d := &Daemon{cfg: Config{Name: testNode, Session: &sessiondir.Dir{Top: top}}, stage: staging{dir: top}}
	var pl preloaded
	if err := pl.place(d, p, 0); err != nil {
		t.Fatal(err)
	}
	exe := pl.exe(p, 0)
	if filepath.Dir(exe) != top {
		t.Errorf("the ranks run %s, not a copy in %s", exe, top)
	}
	if b, _ := os.ReadFile(exe); !strings.Contains(string(b), "exit 0") {
		t.Errorf("the copy holds %q", b)
	}
	placed := filepath.Join(p.Job.Apps[0].Wdir, "in.dat")
	if b, _ := os.ReadFile(placed); string(b) != "payload" {
		t.Errorf("placed file holds %q", b)
	}
	pl.unplace()
	if _, err := os.Stat(placed); err == nil {
		t.Error("unplace left the placed file")
	}
	if _, err := os.Stat(exe); err != nil {
		t.Errorf("unplace removed the program: %v", err)
	}
	// Without a program sent, the ranks run the app's own.
	var none preloaded
	p.Programs, p.Files = nil, nil
	if err := none.place(d, p, 0); err != nil || none.exe(p, 0) != "/bin/sh" {
		t.Errorf("nothing sent: %v, runs %s", err, none.exe(p, 0))
	}
}
