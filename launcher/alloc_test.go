package launcher

import (
	"net"
	"os"
	"testing"
)

func TestIsLocal(t *testing.T) {
	me, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	local := []string{"localhost", me, "127.0.0.1", "127.0.1.1", "::1", "[::1]"}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			local = append(local, n.IP.String())
		}
	}
	for _, h := range local {
		if !isLocal(h, "") {
			t.Errorf("isLocal(%q) = false", h)
		}
	}
	for _, h := range []string{"prun-not-this-node", "198.51.100.9", "203.0.113.7", "::2"} {
		if isLocal(h, "") {
			t.Errorf("isLocal(%q) = true", h)
		}
	}
	if !isLocal("Front-End", "front-end") || isLocal("other", "front-end") {
		t.Error("-localhost's alias not honoured")
	}
}
