package names

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"prun/internal/ctest"
)

func TestHydraServer(t *testing.T) {
	ns := HydraServer{Addr: ctest.HydraNameserver(t)}
	if err := ns.Publish("svc", "tag#0$port#123$"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Publish("svc", "other"); !errors.Is(err, ErrDuplicate) {
		t.Errorf("second publish: %v", err)
	}
	if v, err := ns.Lookup("svc"); err != nil || v != "tag#0$port#123$" {
		t.Errorf("lookup: %q %v", v, err)
	}
	if _, err := ns.Lookup("nosuch"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup of nothing: %v", err)
	}
	if err := ns.Unpublish("svc"); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Lookup("svc"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup after unpublish: %v", err)
	}
	if err := ns.Publish("a\x00b", "x"); err == nil {
		t.Error("a NUL in a name was sent")
	}
	// nobody there: one error naming the server
	dead := HydraServer{Addr: "127.0.0.1:1", Timeout: time.Second}
	if _, err := dead.Lookup("svc"); err == nil || !strings.HasPrefix(err.Error(), "name server 127.0.0.1:1: ") {
		t.Errorf("no server: %v", err)
	}
}

func TestParseHydraAddr(t *testing.T) {
	for in, want := range map[string]string{
		"head": "head:6392", "head:7000": "head:7000", "10.0.0.1": "10.0.0.1:6392",
		"[::1]:7": "[::1]:7", "::1": "[::1]:6392", "[fe80::1]": "[fe80::1]:6392",
	} {
		if got, err := ParseHydraAddr(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ":7", "head:", "head:x", "head:70000", "a:b:c", "h st", "[x]:1"} {
		if got, err := ParseHydraAddr(bad); err == nil {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}

func FuzzParseHydraAddr(f *testing.F) {
	for _, s := range []string{"head", "head:7000", "[::1]:7", "::1", "a:b:c", ":7", "[x]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, err := ParseHydraAddr(s)
		if err != nil {
			if strings.ContainsRune(err.Error(), '\n') {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" || port == "" {
			t.Fatalf("%q: %q is no host:port", s, addr)
		}
		if again, err := ParseHydraAddr(addr); err != nil || again != addr {
			t.Fatalf("%q: %q reads back as %q, %v", s, addr, again, err)
		}
	})
}
