package launcher

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"prun/hostfile"
	"prun/jobspec"
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

// A spawn's "host" and "hostfile" info become its app's own --host list
// (the mapper keeps the app on those hosts of the allocation).
func TestSpawnHosts(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hf"), []byte("# two\nc slots=1\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ hosts, hostfile, want, err string }{
		{"", "", "", ""},
		{"c,a:2", "", "c,a:2", ""},
		{"", "hf", "c:1,a:*", ""},
		{"b", "hf", "c:1,a:*,b", ""},
		{"a,,", "", "", "host info"},
		{"", "missing", "", "no such file"},
	} {
		got, err := spawnHosts(tc.hosts, tc.hostfile, dir)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("hosts %q hostfile %q: err %v, want %q", tc.hosts, tc.hostfile, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("hosts %q hostfile %q: %q, %v; want %q", tc.hosts, tc.hostfile, got, err, tc.want)
		}
	}
}

// A spawn's "path" info is where a bare program name is looked for.
func TestSpawnProgram(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	if err := os.WriteFile(filepath.Join(bin, "child"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := spawnProgram("child", "/nonexistent:"+bin, dir); err != nil || got != filepath.Join(bin, "child") {
		t.Errorf("in path: %q, %v", got, err)
	}
	if _, err := spawnProgram("child", "/nonexistent", dir); err == nil || !strings.Contains(err.Error(), "child not found in path /nonexistent") {
		t.Errorf("not in path: %v", err)
	}
	if got, err := spawnProgram("./bin/child", "/nonexistent", dir); err != nil || got != filepath.Join(bin, "child") {
		t.Errorf("a name with a slash ignores path: %q, %v", got, err)
	}
	if got, err := spawnProgram("sh", "", dir); err != nil || !strings.HasSuffix(got, "/sh") {
		t.Errorf("no path: PATH: %q, %v", got, err)
	}
}

// The names of this node in one allocation are one host, under the first,
// with their slots added; other hosts stay as they are.
func TestMergeLocal(t *testing.T) {
	me, err := hostname()
	if err != nil {
		t.Fatal(err)
	}
	hosts := []hostfile.Host{{Name: "a", Slots: 2}, {Name: "localhost", Slots: 1, MaxSlots: 2}, {Name: me, Slots: 3, MaxSlots: 4},
		{Name: "127.0.0.1", Slots: 1}, {Name: "b", Slots: 5}}
	fromCores := map[string]bool{"localhost": true, me: true}
	got := mergeLocal(hosts, "", fromCores)
	want := []hostfile.Host{{Name: "a", Slots: 2}, {Name: "localhost", Slots: 5}, {Name: "b", Slots: 5}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if fromCores["localhost"] {
		t.Error("slots counted from cores, though 127.0.0.1 gave its own")
	}
}

// This node's other names in an app's own hosts become the allocation's
// name for it; other hosts and unparsable lists stay.
func TestLocalAppHosts(t *testing.T) {
	me, err := hostname()
	if err != nil {
		t.Fatal(err)
	}
	apps := []jobspec.App{{Hosts: "localhost:2,b"}, {Hosts: ""}, {Hosts: "127.0.0.1," + me}, {Hosts: "a,,"}}
	localAppHosts(apps, hostfile.Allocation{Hosts: []hostfile.Host{{Name: "b"}, {Name: me}}}, "")
	for i, want := range []string{me + ":2,b", "", me + "," + me, "a,,"} {
		if apps[i].Hosts != want {
			t.Errorf("app %d: %q, want %q", i, apps[i].Hosts, want)
		}
	}
}

// The contexts' own hostfiles join the allocation (a host in two files
// once, with the most slots either gives) and give their apps their hosts;
// an app's -H must be among its file's hosts.
func TestAllocateAppHostfiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f1 := write("f1", "a slots=2\nb\n")
	f2 := write("f2", "b slots=4\nc port=2222\n")
	cores := func(string) (int, error) { return 2, nil }
	apps := []jobspec.App{{Hostfile: f1}, {Hostfile: f2, Hosts: "c"}, {}}
	alloc, source, _, err := allocate(jobspec.Placement{}, apps, cores)
	if err != nil {
		t.Fatal(err)
	}
	// a line without slots= has one per core (2 here)
	want := []hostfile.Host{{Name: "a", Slots: 2}, {Name: "b", Slots: 4}, {Name: "c", Slots: 2, Port: 2222}}
	if !slices.Equal(alloc.Hosts, want) || source != "contexts' hostfiles" {
		t.Errorf("allocation %+v from %q", alloc.Hosts, source)
	}
	if apps[0].Hosts != "a:2,b:*" || apps[1].Hosts != "c" || apps[2].Hosts != "" {
		t.Errorf("app hosts %q %q %q", apps[0].Hosts, apps[1].Hosts, apps[2].Hosts)
	}

	// with --host for the others, and from the job's hostfile
	job := write("job", "a slots=8\nb slots=8\nc slots=8\nd slots=8\n")
	apps = []jobspec.App{{Hostfile: f1}, {}}
	alloc, _, _, err = allocate(jobspec.Placement{Hostfile: job, Hosts: []string{"d:3"}}, apps, cores)
	if err != nil {
		t.Fatal(err)
	}
	want = []hostfile.Host{{Name: "d", Slots: 3}, {Name: "a", Slots: 2}, {Name: "b", Slots: 8}}
	if !slices.Equal(alloc.Hosts, want) {
		t.Errorf("within the job's hostfile: %+v", alloc.Hosts)
	}

	for _, tc := range []struct {
		pl   jobspec.Placement
		apps []jobspec.App
		want string
	}{
		{jobspec.Placement{}, []jobspec.App{{}, {Hostfile: f2, Hosts: "a"}}, "app 2: --host within its hostfile " + f2 + ": host a is not"},
		{jobspec.Placement{}, []jobspec.App{{}, {Hostfile: filepath.Join(dir, "nosuch")}}, "nosuch: no such file"},
		{jobspec.Placement{}, []jobspec.App{{}, {Hostfile: write("empty", "# none\n")}}, "(app 2): no hosts"},
		{jobspec.Placement{Hostfile: f1}, []jobspec.App{{}, {Hostfile: f2}}, "contexts' hostfiles within the hostfile " + f1 + ": host c is not"},
		{jobspec.Placement{}, []jobspec.App{{Hostfile: f2}, {Hostfile: write("f3", "c port=23\n")}}, "the contexts' hostfiles: host c is given port 2222 and port 23"},
	} {
		if _, _, _, err := allocate(tc.pl, tc.apps, cores); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v %+v: %v, want %q", tc.pl, tc.apps, err, tc.want)
		}
	}
}

// Other nodes get the MPI libraries' settings, or with -genvall everything
// but the launcher's host, session and outer-job variables.
func TestForwardedEnv(t *testing.T) {
	env := []string{"PATH=/opt/bin", "OMPI_MCA_btl=tcp", "HOSTNAME=head", "HOME=/root", "TMPDIR=/scratch", "SSH_CONNECTION=a b",
		"PMIX_NAMESPACE=outer", "PMIX_MCA_gds=hash", "PRUN_RANK=3", "PRUN_DEBUG_REMOTE=1", "FOO=bar=baz", "OMPI_COMM_WORLD_RANK=1"}
	if got, want := forwardedEnv(env, false), []string{"OMPI_MCA_btl=tcp", "PMIX_MCA_gds=hash", "PRUN_DEBUG_REMOTE=1"}; !slices.Equal(got, want) {
		t.Errorf("default: %q, want %q", got, want)
	}
	if got, want := forwardedEnv(env, true), []string{"PATH=/opt/bin", "OMPI_MCA_btl=tcp", "PMIX_MCA_gds=hash", "PRUN_DEBUG_REMOTE=1", "FOO=bar=baz"}; !slices.Equal(got, want) {
		t.Errorf("-genvall: %q, want %q", got, want)
	}
}

// A host that does not resolve is named with where the job named it: its
// hostfile's line, else the option, else the allocation's source.
func TestHostOrigin(t *testing.T) {
	dir := t.TempDir()
	hf := filepath.Join(dir, "hosts")
	os.WriteFile(hf, []byte("localhost slots=2\n# b is not here\n\nu@b slots=2 # but here\nb\n^c\n"), 0o644)
	own := filepath.Join(dir, "own")
	os.WriteFile(own, []byte("c:4\n"), 0o644)
	pl := jobspec.Placement{Hostfile: hf, Hosts: []string{"a:2,d"}, AddHosts: []string{"e", "f:2"}}
	apps := []jobspec.App{{}, {Hostfile: own}, {Hostfile: filepath.Join(dir, "missing")}}
	for host, want := range map[string]string{
		"b": hf + ":4",  // the first line naming it
		"c": own + ":1", // excluded from the job's hostfile, named by an app's
		"d": "--host",
		"f": "--add-host",
		"g": "PBS allocation", // named nowhere but there
	} {
		if got := hostOrigin(pl, apps, host, "PBS allocation"); got != want {
			t.Errorf("hostOrigin(%s) = %q, want %q", host, got, want)
		}
	}
}
