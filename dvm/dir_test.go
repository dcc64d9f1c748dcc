package dvm

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// A runtime started inside an allocation is found there only; one started
// outside any is not found inside one.
func TestScopedByAllocation(t *testing.T) {
	outside := envOf(map[string]string{"TMPDIR": "/t"})
	slurm1 := envOf(map[string]string{"TMPDIR": "/t", "SLURM_JOB_ID": "1"})
	slurm2 := envOf(map[string]string{"TMPDIR": "/t", "SLURM_JOB_ID": "2"})
	pbs := envOf(map[string]string{"TMPDIR": "/t", "PBS_JOBID": "7.server"})
	dirs := map[string]bool{}
	for _, env := range []func(string) string{outside, slurm1, slurm2, pbs} {
		d := Dir(env, DefaultName)
		if dirs[d] {
			t.Errorf("two scopes share %s", d)
		}
		dirs[d] = true
	}
	if got := Dir(slurm1, "x"); !strings.HasSuffix(got, "/x.slurm-1") {
		t.Errorf("Dir in slurm job 1: %s", got)
	}
	if got := Dir(envOf(map[string]string{"XDG_RUNTIME_DIR": "/run/user/5"}), "x"); got != "/run/user/5/prun-dvm/x" {
		t.Errorf("with XDG_RUNTIME_DIR: %s", got)
	}
	if got, _ := Resolve(outside, "/a/b/sock"); got != "/a/b" {
		t.Errorf("Resolve of a socket path: %s", got)
	}
	for _, bad := range []string{"", "..", "a\x00b"} {
		if _, err := Resolve(outside, bad); err == nil {
			t.Errorf("Resolve(%q) accepted", bad)
		}
	}
}

// A directory open to others is refused.
func TestCheckPrivate(t *testing.T) {
	d := filepath.Join(t.TempDir(), "x", "y")
	if err := MakeDir(d); err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	if err := CheckPrivate(d); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Errorf("0755: %v", err)
	}
}

// FuzzRecv: any bytes from a peer are a message or an error, never a panic
// or an allocation beyond the frame limit.
func FuzzRecv(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x10{\"Op\":\"status\"}"))
	f.Add([]byte("\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, c := net.Pipe()
		_ = a
		defer a.Close()
		defer c.Close()
		go func() { a.Write(b); a.Close() }()
		var req Request
		recvFrom(c, &req)
		if len(b) >= 4 && binary.BigEndian.Uint32(b) > maxFrame {
			return
		}
	})
}
