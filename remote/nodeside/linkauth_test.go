package nodeside

import (
	"errors"
	"io"
	"net"
	"prun/remote/wire"
	"testing"
	"time"

	"prun/ctl"
)

// A parent of another wire version ends the dialling at once: no other
// address of the parent's would answer otherwise, and the error says why.
func TestDialParentVersion(t *testing.T) {
	t.Setenv("SSH_CONNECTION", "")
	secret, _ := ctl.NewSecret()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			pre := append([]byte("prunctl"), ctl.WireVersion+1)
			c.Write(append(pre, make([]byte, 32)...))
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	_, err = dialParent(wire.Bootstrap{Secret: secret, ParentPort: port, ParentAddrs: []string{"127.0.0.1", "127.0.0.2"}, ConnectTimeout: 5 * time.Second})
	var ve *ctl.VersionError
	if !errors.As(err, &ve) {
		t.Fatalf("dialParent to a parent of wire version %d: %v, want a VersionError", ctl.WireVersion+1, err)
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("gave up after %v: tried the next address too", d)
	}
	t.Log(err)
}
