package launcher

import (
	"net"
	"os"
	"strings"
	"testing"

	"prun/hostfile"
)

func TestOrderHosts(t *testing.T) {
	hosts := func() []hostfile.Host {
		return []hostfile.Host{{Name: "a", Slots: 2}, {Name: "b", Slots: 4}, {Name: "c", Slots: 1}, {Name: "d", Slots: 2}}
	}
	names := func(hs []hostfile.Host) string {
		var n []string
		for _, h := range hs {
			n = append(n, h.Name)
		}
		return strings.Join(n, "")
	}
	for order, want := range map[string]string{"": "abcd", "ascending": "cadb", "descending": "badc"} {
		hs := hosts()
		orderHosts(hs, order)
		if got := names(hs); got != want {
			t.Errorf("orderHosts(%q) = %s, want %s (equals keep their order)", order, got, want)
		}
	}
}

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
