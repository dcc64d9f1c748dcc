package pmixsrv

import (
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"testing"
)

func TestValueRoundTrip(t *testing.T) {
	in := []Info{
		{"s", "text"},
		{"empty", ""},
		{"b", true},
		{"u8", uint8(7)},
		{"u16", uint16(65000)},
		{"u32", uint32(4000000000)},
		{"u64", uint64(1) << 40},
		{"rank", Rank(12)},
		{"wild", RankWildcard},
		{"size", Size(99)},
		{"int", -5},
		{"i32", int32(-70000)},
		{"i64", int64(-1) << 40},
		{"pid", Pid(4242)},
		{"status", ErrNotFound},
		{"range", DataRange(3)},
		{"persist", Persistence(2)},
		{"f", 2.5},
		{"bytes", []byte{0, 1, 2, 255}},
		{"proc", Proc{Nspace: "ns.1", Rank: 3}},
		{"procs", []Proc{{"a", 0}, {"b", RankWildcard}}},
		{"nested", []Info{{"inner", "x"}, {"deeper", []Info{{"n", uint32(1)}}}}},
	}
	out, err := roundTrip(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		for i := range in {
			if i >= len(out) || !reflect.DeepEqual(in[i], out[i]) {
				t.Errorf("%s: sent %#v, got back %#v", in[i].Key, in[i].Value, out[i])
			}
		}
	}
}

// nopHost answers every upcall with "not supported".
type nopHost struct{}

func (nopHost) ClientConnected(Proc) error { return ErrNotSupported }
func (nopHost) ClientFinalized(Proc) error { return ErrNotSupported }
func (nopHost) Abort(Proc, int, string, []Proc, func(error)) error {
	return ErrNotSupported
}
func (nopHost) Fence([]Proc, []Info, []byte, func([]byte, error)) error { return ErrNotSupported }
func (nopHost) DirectModex(Proc, []Info, func([]byte, error)) error     { return ErrNotSupported }
func (nopHost) Publish(Proc, []Info, func(error)) error                 { return ErrNotSupported }
func (nopHost) Lookup(Proc, []string, []Info, func([]PData, error)) error {
	return ErrNotSupported
}
func (nopHost) Unpublish(Proc, []string, []Info, func(error)) error { return ErrNotSupported }
func (nopHost) RegisterEvents([]Status, []Info) error               { return ErrNotSupported }
func (nopHost) DeregisterEvents([]Status) error                     { return ErrNotSupported }
func (nopHost) NotifyEvent(Status, Proc, DataRange, []Info) error   { return ErrNotSupported }
func (nopHost) Query(Proc, []Query, func([]Info, error)) error      { return ErrNotSupported }
func (nopHost) JobControl(Proc, []Proc, []Info, func(error)) error  { return ErrNotSupported }
func (nopHost) Log(Proc, []Info, []Info) error                      { return ErrNotSupported }

// TestServerLifecycle starts the real library, registers a namespace with
// regex maps (which need an initialised library) and a client, and stops.
func TestServerLifecycle(t *testing.T) {
	// libpmix cannot start a server twice in one process, so each run of
	// this test (go test -count N) has a process of its own.
	if os.Getenv("PMIXSRV_LIFECYCLE_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestServerLifecycle$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PMIXSRV_LIFECYCLE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestServerLifecycle")) {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	dir := t.TempDir()
	s, err := Init(Config{TmpDir: dir, Nspace: "test-server", Hostname: "h0"}, nopHost{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Init(Config{TmpDir: dir, Nspace: "again"}, nopHost{}); err == nil {
		t.Error("a second server in one process must be refused")
	}
	info := []Info{
		{KeyJobSize, uint32(2)},
		{KeyNodeMap, NodeMap("h0")},
		{KeyProcMap, ProcMap("0,1")},
		{KeyProcInfoArray, []Info{{KeyRank, Rank(0)}, {KeyLocalRank, uint16(0)}}},
		{KeyProcInfoArray, []Info{{KeyRank, Rank(1)}, {KeyLocalRank, uint16(1)}}},
	}
	if err := s.RegisterNspace("ns", 2, info); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterClients("ns", []Rank{0}, 0, 0)[0]; err != nil {
		t.Fatal(err)
	}
	env, err := s.SetupFork(Proc{"ns", 0})
	if err != nil {
		t.Fatal(err)
	}
	var sawNS, sawURI bool
	for _, kv := range env {
		sawNS = sawNS || kv == "PMIX_NAMESPACE=ns"
		sawURI = sawURI || len(kv) > 16 && kv[:16] == "PMIX_SERVER_URI4"
	}
	if !sawNS || !sawURI {
		t.Errorf("setup_fork env lacks the namespace or server URI: %v", env)
	}
	out, err := roundTrip([]Info{{"nm", NodeMap("n1,n2,n3")}, {"pm", ProcMap("0,1;2")}})
	if err != nil || len(out) != 2 {
		t.Errorf("regex infos: %v %+v", err, out)
	}
	s.DeregisterClient(Proc{"ns", 0})
	s.DeregisterNspace("ns")
	if err := s.Finalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := Init(Config{TmpDir: dir, Nspace: "after"}, nopHost{}); err == nil {
		t.Error("a server after Finalize must be refused: the library would abort the process")
	}
}

func TestUnsupportedTypes(t *testing.T) {
	if _, err := roundTrip([]Info{{"bad", struct{}{}}}); err == nil {
		t.Fatal("an unsupported type must be an error, not a silent drop")
	}
	if _, err := roundTrip([]Info{{"nested", []Info{{"bad", complex(1, 2)}}}}); err == nil {
		t.Fatal("an unsupported nested type must be an error")
	}
}

func TestProcInfoTable(t *testing.T) {
	table := []ProcInfo{{Proc: Proc{"ns", 0}, Host: "h", Exe: "/bin/x", Pid: 10, State: ProcStateRunning}}
	if _, err := roundTrip([]Info{{KeyQueryProcTable, table}}); err != nil {
		t.Fatal(err)
	}
}

func TestCPUSetString(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{[]int{0, 1}, "hwloc:0x00000003"},
		{[]int{4}, "hwloc:0x00000010"},
		{[]int{32}, "hwloc:0x00000001,0x00000000"},
		{[]int{0, 63}, "hwloc:0x80000000,0x00000001"},
	} {
		if got := CPUSetString(tc.cpus); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.cpus, got, tc.want)
		}
	}
}
