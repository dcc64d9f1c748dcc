package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostDoesNotResolve: a host whose name does not resolve is refused
// first, in one line naming it and where it was given, with nothing
// started (-H nosuchhost -n 2 said that nosuchhost had 1 slot, and with
// --oversubscribe failed on its name). The name is looked up as the
// built-in SSH client dials it, through ssh_config; an external remote
// shell is left to know names no lookup does.
func TestHostDoesNotResolve(t *testing.T) {
	t.Parallel()
	var dnsErr *net.DNSError
	if _, err := net.DefaultResolver.LookupHost(context.Background(), "nosuchhost.invalid"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Skipf("this machine's resolver cannot say that a name does not exist: %v", err)
	}
	dir := t.TempDir()
	hf := filepath.Join(dir, "hosts")
	os.WriteFile(hf, []byte("localhost slots=2\n# the next one is a typo\nnosuchhost.invalid slots=2\n"), 0o644)
	home := filepath.Join(dir, "home")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host alias-bad\n  HostName nosuchhost.invalid\n"+
		"Host alias-ip\n  HostName 127.0.0.1\n  Port 1\n"), 0o600)
	marker := filepath.Join(dir, "ran")
	for _, tc := range []struct {
		args []string
		code int
		want string // stderr, whole with the exit status 2, else in part
	}{
		{[]string{"-H", "nosuchhost.invalid", "-n", "2"}, 2, "prun: host nosuchhost.invalid (--host) does not resolve: no such host\n"},
		{[]string{"-H", "nosuchhost.invalid", "--oversubscribe", "-n", "2"}, 2, "prun: host nosuchhost.invalid (--host) does not resolve: no such host\n"},
		{[]string{"-H", "localhost,nosuchhost.invalid,alsonot.invalid", "-n", "2"}, 2,
			"prun: host nosuchhost.invalid (--host) does not resolve: no such host (nor does alsonot.invalid)\n"},
		{[]string{"--hostfile", hf, "-n", "4"}, 2, "prun: host nosuchhost.invalid (" + hf + ":3) does not resolve: no such host\n"},
		{[]string{"-H", "alias-bad", "-n", "1"}, 2, "prun: host alias-bad (--host) does not resolve: its ssh_config HostName nosuchhost.invalid: no such host\n"},
		// Known to ssh_config, it is tried.
		{[]string{"-H", "alias-ip", "-n", "1"}, 1, "prun: alias-ip: cannot connect to 127.0.0.1:1"},
		// An external remote shell may know names no lookup does.
		{[]string{"--rsh", "false", "-H", "nosuchhost.invalid", "-n", "1"}, 1, "prun: nosuchhost.invalid: the daemon's start command exited with status 1"},
		{[]string{"dvm", "start", "--foreground", "-H", "nosuchhost.invalid"}, 1,
			"prun dvm start: host nosuchhost.invalid (--host) does not resolve: no such host\n"},
	} {
		args := tc.args
		if args[0] != "dvm" {
			args = append(args, "touch", marker)
		}
		r := run(t, opts{args: args, env: []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + dir}})
		if r.code != tc.code || tc.code == 2 && r.stderr != tc.want || !strings.HasPrefix(r.stderr, tc.want) ||
			strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("prun %s: exit %d, want %d and stderr %q\n%s", strings.Join(args, " "), r.code, tc.code, tc.want, r)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("prun %s started its program", strings.Join(args, " "))
		}
	}
}
