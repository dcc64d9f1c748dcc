package ctest

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// HydraNameserver runs Debian's hydra_nameserver (the mpich package,
// which make test installs) on a free port for the test.
func HydraNameserver(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("hydra_nameserver"); err != nil {
		t.Fatalf("hydra_nameserver is needed (make test installs mpich): %v", err)
	}
	for try := 0; try < 20; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command("hydra_nameserver", "-port", strconv.Itoa(port))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				return addr
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Fatal("hydra_nameserver did not start")
	return ""
}
