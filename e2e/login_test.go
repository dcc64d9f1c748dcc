package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"prun/internal/cluster"
)

// TestHostLogins: the user and SSH port a host list gives (user@host, user=,
// port=) are the ones prun logs in with, with the built-in SSH client and
// with --rsh (as -l USER -p PORT), at every level of the launch tree; a
// login that cannot work fails in one line naming it. The cluster's sshds
// listen on 22 and 2222; nothing listens on 2223.
func TestHostLogins(t *testing.T) {
	c := cluster.Start(t, 4)
	m := &mn{c: c, hosts: c.Hosts()}
	file := func(t *testing.T, lines ...string) string {
		f := filepath.Join(t.TempDir(), "hosts")
		if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// Each rank says its host and the server port of the SSH connection
	// its daemon was started through.
	where := []string{"sh", "-c", `echo "$(hostname) ${SSH_CONNECTION##* }"`}
	expectLines := func(t *testing.T, r *result, want ...string) {
		t.Helper()
		expectCode(t, r, 0)
		got := lines(r.stdout)
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("ranks say %q, want %q\n%s", got, want, r)
		}
	}

	t.Run("user", func(t *testing.T) {
		hf := file(t, "root@prun-h1 slots=1", "prun-h2 user=root slots=1")
		expectLines(t, m.run(t, opts{args: append([]string{"--hostfile", hf, "-n", "2"}, where...)}), "prun-h1 22", "prun-h2 22")
		expectLines(t, m.run(t, opts{args: append([]string{"-H", "root@prun-h3", "-n", "1"}, where...)}), "prun-h3 22")
	})
	t.Run("no-such-user", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"-H", "prun-h1,nosuchuser@prun-h2"}, "nosuchuser@prun-h2"},
			{[]string{"--hostfile", file(t, "prun-h1", "nosuchuser@prun-h2")}, "nosuchuser@prun-h2"},
			{[]string{"--hostfile", file(t, "prun-h1", "prun-h2 user=nosuchuser port=2222")}, "nosuchuser@prun-h2:2222"},
		} {
			r := m.run(t, opts{args: append(tc.args, "-n", "2", "hostname")})
			expectOneLineFailure(t, r, "prun: "+tc.want+": authentication failed as nosuchuser")
		}
	})
	t.Run("port", func(t *testing.T) {
		hf := file(t, "prun-h1 port=2222 slots=1", "prun-h2 slots=1")
		expectLines(t, m.run(t, opts{args: append([]string{"--hostfile", hf, "-n", "2"}, where...)}), "prun-h1 2222", "prun-h2 22")
		r := m.run(t, opts{args: []string{"--hostfile", file(t, "prun-h1", "prun-h2 port=2223"), "-n", "2", "hostname"}})
		expectOneLineFailure(t, r, "prun: prun-h2:2223: cannot connect to 198.18.0.2:2223: connection refused")
	})
	t.Run("conflict", func(t *testing.T) {
		hf := file(t, "prun-h1", "u1@prun-h2 user=u2")
		r := run(t, opts{args: []string{"--hostfile", hf, "-n", "2", "hostname"}, env: m.env()})
		expectOneLineFailure(t, r, hf+":2: ")
		hf = file(t, "prun-h2 port=2222", "prun-h2 port=22")
		r = run(t, opts{args: []string{"--hostfile", hf, "-n", "2", "hostname"}, env: m.env()})
		expectOneLineFailure(t, r, hf+":2: ")
	})
	// Fanout 1: a chain launcher -> h1 -> h2 -> h3 -> h4; the daemons
	// start their children with the logins the launcher's host list gave.
	t.Run("tree", func(t *testing.T) {
		hf := file(t, "root@prun-h1 slots=1", "prun-h2 port=2222 slots=1", "prun-h3 slots=1", "root@prun-h4 port=2222 slots=1")
		expectLines(t, m.run(t, opts{args: append([]string{"--launch-fanout", "1", "--hostfile", hf, "-n", "4"}, where...)}),
			"prun-h1 22", "prun-h2 2222", "prun-h3 22", "prun-h4 2222")
		hf = file(t, "prun-h1", "prun-h2", "prun-h3", "nosuchuser@prun-h4 port=2222")
		r := m.run(t, opts{args: []string{"--launch-fanout", "1", "--hostfile", hf, "-n", "4", "hostname"}})
		expectOneLineFailure(t, r, "prun: nosuchuser@prun-h4:2222: authentication failed as nosuchuser")
	})
	// An external remote shell gets OpenSSH's -l and -p, in the tree too.
	t.Run("rsh", func(t *testing.T) {
		dir := t.TempDir()
		log := filepath.Join(dir, "argv.log")
		wrapper := writeScript(t, dir, "ssh-wrapper", `echo "$*" | cut -c1-60 >>`+log+`
exec ssh -F `+c.SSHConfig()+` "$@"
`)
		hf := file(t, "root@prun-h1 slots=1", "prun-h2 port=2222 slots=1", "prun-h3 slots=1", "root@prun-h4 port=2222 slots=1")
		expectLines(t, m.run(t, opts{args: append([]string{"--rsh", wrapper, "--launch-fanout", "1", "--hostfile", hf, "-n", "4"}, where...)}),
			"prun-h1 22", "prun-h2 2222", "prun-h3 22", "prun-h4 2222")
		b, _ := os.ReadFile(log)
		got := lines(string(b))
		sort.Strings(got)
		var heads []string // what comes before the remote command
		for _, l := range got {
			h, _, _ := strings.Cut(l, " sh -c ")
			heads = append(heads, h)
		}
		want := []string{"-l root -p 2222 prun-h4", "-l root prun-h1", "-p 2222 prun-h2", "prun-h3"}
		if strings.Join(heads, ",") != strings.Join(want, ",") {
			t.Errorf("the wrapper ran as %q, want %q", heads, want)
		}
		hf = file(t, "prun-h1", "prun-h2", "nosuchuser@prun-h3")
		r := m.run(t, opts{args: []string{"--rsh", wrapper, "--launch-fanout", "1", "--hostfile", hf, "-n", "3", "hostname"}})
		expectOneLineFailure(t, r, "prun: nosuchuser@prun-h3: ")
	})
}
