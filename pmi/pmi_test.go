package pmi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeJob is a one-rank job that answers at once.
type fakeJob struct {
	mu        sync.Mutex
	kvs       map[string]string
	node      map[string]string
	names     map[string]string
	errs      []error
	aborted   int
	finalized bool
	connected bool
	spawns    []SpawnRequest
	spawner   string // the parent job's id when this job was spawned
}

func newFake() *fakeJob {
	return &fakeJob{kvs: map[string]string{}, node: map[string]string{}, names: map[string]string{}, aborted: -1}
}

func (f *fakeJob) Info(rank int) RankInfo {
	return RankInfo{Rank: rank, Size: 4, Appnum: 1, UniverseSize: 8, Kvsname: "kvs_x", Spawner: f.spawner}
}
func (f *fakeJob) Put(rank int, k, v string) error {
	f.mu.Lock()
	f.kvs[k] = v
	f.mu.Unlock()
	return nil
}
func (f *fakeJob) Fence(rank int, done func(error)) { done(nil) }
func (f *fakeJob) Get(rank int, k string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.kvs[k]
	return v, ok
}
func (f *fakeJob) GetByIndex(i int) (string, string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := sortedKeys(f.kvs)
	if i >= len(keys) {
		return "", "", false
	}
	return keys[i], f.kvs[keys[i]], true
}
func (f *fakeJob) JobAttr(k string) (string, bool) {
	if k == "PMI_process_mapping" {
		return "(vector,(0,1,4))", true
	}
	return "", false
}
func (f *fakeJob) NodeAttrPut(k, v string) { f.mu.Lock(); f.node[k] = v; f.mu.Unlock() }
func (f *fakeJob) NodeAttrGet(k string, wait bool, done func(string, bool)) {
	f.mu.Lock()
	v, ok := f.node[k]
	f.mu.Unlock()
	done(v, ok)
}
func (f *fakeJob) Publish(rank int, s, p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.names[s]; dup {
		return errors.New("duplicate")
	}
	f.names[s] = p
	return nil
}
func (f *fakeJob) Unpublish(rank int, s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.names, s)
	return nil
}
func (f *fakeJob) Lookup(s string, done func(string, bool)) {
	f.mu.Lock()
	p, ok := f.names[s]
	f.mu.Unlock()
	done(p, ok)
}
func (f *fakeJob) Spawn(rank int, req SpawnRequest, done func(string, error)) {
	f.mu.Lock()
	f.spawns = append(f.spawns, req)
	f.mu.Unlock()
	done("kvs_child", nil)
}
func (f *fakeJob) Abort(rank, code int, msg string) { f.mu.Lock(); f.aborted = code; f.mu.Unlock() }
func (f *fakeJob) Connected(rank int)               { f.mu.Lock(); f.connected = true; f.mu.Unlock() }
func (f *fakeJob) Finalize(rank int)                { f.mu.Lock(); f.finalized = true; f.mu.Unlock() }
func (f *fakeJob) ProtocolError(rank int, err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

// client drives a Serve over an in-memory connection.
type client struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	done chan struct{}
}

func start(t *testing.T, job Job, allow Versions) *client {
	a, b := net.Pipe()
	cl := &client{t: t, c: a, r: bufio.NewReader(a), done: make(chan struct{})}
	go func() { Serve(b, 2, job, allow); close(cl.done) }()
	t.Cleanup(func() { a.Close(); <-cl.done })
	return cl
}

func (cl *client) v1(line string) string {
	cl.t.Helper()
	cl.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(cl.c, line+"\n"); err != nil {
		cl.t.Fatalf("write %q: %v", line, err)
	}
	reply, err := cl.r.ReadString('\n')
	if err != nil {
		cl.t.Fatalf("reply to %q: %v", line, err)
	}
	return strings.TrimSuffix(reply, "\n")
}

func (cl *client) v2(body string) string {
	cl.t.Helper()
	cl.c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(cl.c, "%-6d%s", len(body), body)
	var hdr [6]byte
	if _, err := io.ReadFull(cl.r, hdr[:]); err != nil {
		cl.t.Fatalf("reply to %q: %v", body, err)
	}
	var n int
	fmt.Sscanf(strings.TrimSpace(string(hdr[:])), "%d", &n)
	b := make([]byte, n)
	io.ReadFull(cl.r, b)
	return string(b)
}

// v2junk sends body as MPICH's simple PMI-2 client does: its length
// counts the 6-byte header, and 6 bytes of stale buffer (junk) follow.
func (cl *client) v2junk(body, junk string) string {
	cl.t.Helper()
	if len(junk) != 6 {
		cl.t.Fatalf("junk must be 6 bytes, not %q", junk)
	}
	return cl.v2(body + junk)
}

func expect(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(" "+got+" ", w) {
			t.Errorf("reply %q lacks %q", got, w)
		}
	}
}

func TestPMI1Session(t *testing.T) {
	job := newFake()
	cl := start(t, job, Both)
	expect(t, cl.v1("cmd=init pmi_version=1 pmi_subversion=1"), "cmd=response_to_init", "pmi_version=1", "rc=0")
	expect(t, cl.v1("cmd=get_maxes"), "cmd=maxes", "kvsname_max=256", "keylen_max=64", "vallen_max=1024")
	expect(t, cl.v1("cmd=get_my_kvsname"), "kvsname=kvs_x")
	expect(t, cl.v1("cmd=get_appnum"), "appnum=1")
	expect(t, cl.v1("cmd=get_universe_size"), "size=8")
	expect(t, cl.v1("cmd=put kvsname=kvs_x key=a value=1"), "cmd=put_result", "rc=0")
	expect(t, cl.v1("cmd=barrier_in"), "cmd=barrier_out", "rc=0")
	expect(t, cl.v1("cmd=get kvsname=kvs_x key=a"), "cmd=get_result", "rc=0", "value=1")
	expect(t, cl.v1("cmd=get kvsname=kvs_x key=nope"), "rc=-1", "value=unknown")
	expect(t, cl.v1("cmd=getbyidx kvsname=kvs_x idx=0"), "rc=0", "key=a", "val=1", "nextidx=1")
	expect(t, cl.v1("cmd=getbyidx kvsname=kvs_x idx=1"), "rc=-2")
	expect(t, cl.v1("cmd=publish_name service=s port=p#1"), "cmd=publish_result", "info=ok")
	expect(t, cl.v1("cmd=publish_name service=s port=p#2"), "rc=-1")
	expect(t, cl.v1("cmd=lookup_name service=s"), "cmd=lookup_result", "port=p#1", "rc=0")
	expect(t, cl.v1("cmd=unpublish_name service=s"), "info=ok")
	expect(t, cl.v1("cmd=lookup_name service=s"), "rc=-1")
	expect(t, cl.v1("cmd=finalize"), "cmd=finalize_ack")
	if !job.connected || !job.finalized || len(job.errs) != 0 {
		t.Errorf("connected=%v finalized=%v errs=%v", job.connected, job.finalized, job.errs)
	}
}

func TestPMI1Spawn(t *testing.T) {
	job := newFake()
	cl := start(t, job, Both)
	cl.v1("cmd=init pmi_version=1 pmi_subversion=1")
	block := func(sofar int, exe string) string {
		return strings.Join([]string{"mcmd=spawn", "nprocs=2", "execname=" + exe, "totspawns=2",
			fmt.Sprintf("spawnssofar=%d", sofar), "argcnt=1", "arg1=x", "preput_num=1", "preput_key_0=PARENT",
			"preput_val_0=port", "info_num=0", "endcmd"}, "\n") + "\n"
	}
	io.WriteString(cl.c, block(1, "./a")) // no reply until the last block
	expect(t, cl.v1(strings.TrimSuffix(block(2, "./b"), "\n")), "cmd=spawn_result", "rc=0")
	if len(job.spawns) != 1 || len(job.spawns[0].Apps) != 2 || job.spawns[0].Apps[1].Cmd != "./b" ||
		job.spawns[0].Apps[0].Argv[0] != "x" || len(job.spawns[0].Preput) != 2 {
		t.Errorf("spawns = %+v", job.spawns)
	}
}

// MPICH's simple PMI-2 client counts the length header into each command's
// length; its fullinit, ending with the threaded field, tells it apart, and
// the 6 bytes after each of its commands are dropped, whatever they hold.
func TestPMI2HeaderCounted(t *testing.T) {
	job := newFake()
	cl := start(t, job, Both)
	expect(t, cl.v1("cmd=init pmi_version=2 pmi_subversion=0"), "pmi_version=2", "rc=0")
	expect(t, cl.v2junk("cmd=fullinit;pmijobid=kvs_x;pmirank=1;threaded=FALSE;", "\x00\x00\x00\x00\x00\x00"), "cmd=fullinit-response;", "rc=0;")
	// A stale ';' would have escaped the command's last ';' into its value;
	// stale text would have been a field without '='.
	expect(t, cl.v2junk("cmd=kvs-put;key=k;value=v;", ";k=v;x"), "cmd=kvs-put-response;rc=0;")
	expect(t, cl.v2junk("cmd=kvs-get;jobid=kvs_x;srcid=0;key=k;", "\x7f\x00abcd"), "found=TRUE;", "value=v;")
	if job.kvs["k"] != "v" {
		t.Errorf("kvs k = %q, want v", job.kvs["k"])
	}

	// A client that counts right is read as it sends, even with a last
	// field 6 bytes long after its threaded one.
	exact := newFake()
	cl = start(t, exact, Both)
	expect(t, cl.v1("cmd=init pmi_version=2 pmi_subversion=0"), "pmi_version=2", "rc=0")
	expect(t, cl.v2("cmd=fullinit;pmirank=2;threaded=FALSE;abcd=;"), "rank=2;", "rc=0;")
	expect(t, cl.v2("cmd=kvs-put;key=k;value=v;"), "cmd=kvs-put-response;rc=0;")
	if exact.kvs["k"] != "v" || len(job.errs)+len(exact.errs) != 0 {
		t.Errorf("kvs k = %q; protocol errors: %v %v", exact.kvs["k"], job.errs, exact.errs)
	}
}

// A spawned job's PMI-2 clients learn their parent's job id at fullinit.
func TestPMI2Spawned(t *testing.T) {
	job := newFake()
	job.spawner = "kvs_parent"
	cl := start(t, job, Both)
	expect(t, cl.v1("cmd=init pmi_version=2 pmi_subversion=0"), "pmi_version=2", "rc=0")
	expect(t, cl.v2("cmd=fullinit;pmirank=0;threaded=FALSE;"), "spawner-jobid=kvs_parent;", "rc=0;")
}

func TestPMI2Session(t *testing.T) {
	job := newFake()
	cl := start(t, job, Both)
	expect(t, cl.v1("cmd=init pmi_version=2 pmi_subversion=0"), "pmi_version=2", "rc=0")
	reply := cl.v2("cmd=fullinit;pmirank=2;threaded=FALSE;")
	expect(t, reply, "cmd=fullinit-response;", "rank=2;", "size=4;", "appnum=1;", "rc=0;")
	if strings.Contains(reply, "spawner-jobid") {
		// MPICH's client would take itself for a spawned process.
		t.Errorf("a job nobody spawned answered with a spawner: %q", reply)
	}
	expect(t, cl.v2("cmd=job-getid;"), "jobid=kvs_x;")
	expect(t, cl.v2("cmd=kvs-put;key=k;value=a;;b;"), "cmd=kvs-put-response;rc=0;")
	expect(t, cl.v2("cmd=kvs-fence;"), "cmd=kvs-fence-response;rc=0;")
	expect(t, cl.v2("cmd=kvs-get;jobid=kvs_x;srcid=0;key=k;"), "found=TRUE;", "value=a;;b;")
	expect(t, cl.v2("cmd=kvs-get;jobid=kvs_x;srcid=0;key=none;"), "found=FALSE;")
	expect(t, cl.v2("cmd=info-putnodeattr;key=n;value=1;"), "rc=0;")
	expect(t, cl.v2("cmd=info-getnodeattr;key=n;wait=TRUE;"), "found=TRUE;value=1;")
	expect(t, cl.v2("cmd=info-getjobattr;key=PMI_process_mapping;"), "found=TRUE;value=(vector,(0,1,4));")
	expect(t, cl.v2("cmd=name-publish;name=svc;port=p;"), "rc=0;")
	expect(t, cl.v2("cmd=name-lookup;name=svc;"), "port=p;found=TRUE;")
	expect(t, cl.v2("cmd=name-unpublish;name=svc;"), "rc=0;")
	expect(t, cl.v2("cmd=spawn;ncmds=1;preputcount=1;ppkey0=k;ppval0=v;subcmd=./c;maxprocs=2;argc=1;argv0=z;infokeycount=0;"),
		"cmd=spawn-response;", "rc=0;", "jobid=kvs_child;", "errcodes=0,0;")
	expect(t, cl.v2("cmd=finalize;"), "cmd=finalize-response;rc=0;")
	if len(job.errs) != 0 || len(job.spawns) != 1 || job.spawns[0].Apps[0].Argv[0] != "z" {
		t.Errorf("errs=%v spawns=%+v", job.errs, job.spawns)
	}
}

func TestProtocolErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  string // in the last reply
	}{
		{"before init", []string{"cmd=get_maxes"}, "rc=-1"},
		{"garbage", []string{"hello world"}, "rc=-1"},
		{"unknown command", []string{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=frobnicate"}, "rc=-1"},
		{"bad version", []string{"cmd=init pmi_version=7 pmi_subversion=0"}, "rc=-1"},
		{"long key", []string{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=put kvsname=kvs_x key=" + strings.Repeat("k", 100) + " value=1"}, "rc=-1"},
		{"other kvs", []string{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=put kvsname=evil key=a value=1"}, "rc=-1"},
		{"after finalize", []string{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=finalize", "cmd=get_maxes"}, "rc=-1"},
		{"bad idx", []string{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=getbyidx kvsname=kvs_x idx=-3"}, "rc=-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := newFake()
			cl := start(t, job, Both)
			var last string
			for _, l := range tc.lines {
				last = cl.v1(l)
			}
			expect(t, last, tc.want)
			if len(job.errs) == 0 {
				t.Error("no protocol error reported")
			}
		})
	}
}

func TestFramingErrorsClose(t *testing.T) {
	for name, input := range map[string]string{
		"oversized PMI-1 line": "cmd=init pmi_version=1 pmi_subversion=1\ncmd=put " + strings.Repeat("x", maxLine+10) + "\n",
		"bad PMI-2 header":     "cmd=init pmi_version=2 pmi_subversion=0\nabcdefcmd=fullinit;",
		"huge PMI-2 length":    "cmd=init pmi_version=2 pmi_subversion=0\n999999" + "cmd=x;",
		"truncated PMI-2":      "cmd=init pmi_version=2 pmi_subversion=0\n40    cmd=fullinit;",
	} {
		t.Run(name, func(t *testing.T) {
			job := newFake()
			a, b := net.Pipe()
			done := make(chan struct{})
			go func() { Serve(b, 0, job, Both); close(done) }()
			go io.Copy(io.Discard, a)
			io.WriteString(a, input)
			if name == "truncated PMI-2" {
				a.Close()
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("server did not give up on a broken stream")
			}
			a.Close()
			if len(job.errs) == 0 {
				t.Error("no protocol error reported")
			}
		})
	}
}

func TestFormatV1StaysOneLine(t *testing.T) {
	got := FormatV1("get_result", Field{"value", "a b\nc"})
	if strings.Count(got, "\n") != 1 || strings.Contains(got, "a b") {
		t.Errorf("%q", got)
	}
}

// FuzzServe feeds arbitrary bytes to a server: it must never panic or hang.
func FuzzServe(f *testing.F) {
	f.Add([]byte("cmd=init pmi_version=1 pmi_subversion=1\ncmd=put kvsname=kvs_x key=a value=b\ncmd=barrier_in\ncmd=get kvsname=kvs_x key=a\ncmd=finalize\n"))
	f.Add([]byte("cmd=init pmi_version=2 pmi_subversion=0\n27    cmd=fullinit;pmirank=0;abc"))
	f.Add([]byte("cmd=init pmi_version=1 pmi_subversion=1\nmcmd=spawn\nnprocs=1\nexecname=x\ntotspawns=1\nspawnssofar=1\nargcnt=0\nendcmd\n"))
	f.Add([]byte("cmd=init pmi_version=2 pmi_subversion=0\n36    cmd=fullinit;pmiid=1;threaded=FALSE;"))
	// MPICH's client: lengths that count the header, 6 stale bytes after.
	f.Add([]byte("cmd=init pmi_version=2 pmi_subversion=0\n" +
		"59    cmd=fullinit;pmijobid=kvs_x;pmirank=0;threaded=FALSE;\x00\x00\x00\x00\x00\x00" +
		"32    cmd=kvs-put;key=k;value=v;;k=v;x" + "20    cmd=kvs-fence;\x7f\x00abcd"))
	f.Fuzz(func(t *testing.T, input []byte) {
		job := newFake()
		a, b := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			// A connection of its own (PMI_FD), or a client of a PMI port
			// that names itself in its PMI-2 fullinit.
			if !bytes.HasPrefix(input, []byte("cmd=init pmi_version=2")) {
				Serve(b, 0, job, Both)
				return
			}
			br := bufio.NewReader(b)
			line, err := br.ReadString('\n')
			if err != nil {
				b.Close()
				return
			}
			ServeNamedV2(b, br, strings.TrimRight(line, "\n"), job, Both, func(rank int) error {
				if rank > 3 {
					return errors.New("no such rank")
				}
				return nil
			})
		}()
		go io.Copy(io.Discard, a)
		a.SetWriteDeadline(time.Now().Add(2 * time.Second))
		a.Write(input)
		a.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("server hung on %q", input)
		}
	})
}

// FuzzParse: parsers never panic, and parsed PMI-2 fields survive a round trip.
func FuzzParse(f *testing.F) {
	f.Add("cmd=kvs-put;key=a;value=b;;c;")
	f.Add("cmd=put kvsname=k key=a value=b")
	f.Fuzz(func(t *testing.T, s string) {
		ParseV1(s)
		c, err := ParseV2(s)
		if err != nil {
			return
		}
		out := FormatV2(c.Name, c.Fields...)
		back, err := ParseV2(out[6:])
		if err != nil || back.Name != c.Name || len(back.Fields) != len(c.Fields) {
			t.Fatalf("round trip of %q: %q -> %+v, %v", s, out, back, err)
		}
		for i := range c.Fields {
			if back.Fields[i] != c.Fields[i] && !bytes.ContainsAny([]byte(c.Fields[i].Key+c.Fields[i].Value), "=") {
				t.Fatalf("field %d: %+v vs %+v", i, c.Fields[i], back.Fields[i])
			}
		}
	})
}

// A client that dies with an answer unread resets its connection: that is
// its end (reported by its exit), not a protocol error.
func TestResetIsNoProtocolError(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	job := newFake()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(os.NewFile(uintptr(fds[0]), "server"), 0, job, Both)
	}()
	if _, err := syscall.Write(fds[1], []byte("cmd=init pmi_version=1 pmi_subversion=1\n")); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, _, err := syscall.Recvfrom(fds[1], b[:], syscall.MSG_PEEK); err != nil { // the answer is there
		t.Fatal(err)
	}
	syscall.Close(fds[1])
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("server still serving a closed connection")
	}
	if len(job.errs) != 0 {
		t.Errorf("protocol errors: %v", job.errs)
	}
}

// A PMI-2 abort has no status field: MPI_Abort's code comes from MPICH's
// message, else 1.
func TestAbortCode(t *testing.T) {
	for msg, want := range map[string]int{
		"application called MPI_Abort(MPI_COMM_WORLD, 17) - process 1": 17,
		"application called MPI_Abort(comm=0x84000002, 3) - process 0": 3,
		"Fatal error in internal_Init: Other MPI error":                1,
		"": 1,
		"application called MPI_Abort(MPI_COMM_WORLD, 99999999999999999999) - process 0": 1,
	} {
		if got := abortCode(msg); got != want {
			t.Errorf("abortCode(%q) = %d, want %d", msg, got, want)
		}
	}
	job := newFake()
	cl := start(t, job, Both)
	cl.v1("cmd=init pmi_version=2 pmi_subversion=0")
	cl.v2("cmd=fullinit;pmirank=0;threaded=FALSE;")
	abort := "cmd=abort;isworld=TRUE;msg=application called MPI_Abort(MPI_COMM_WORLD, 17) - x;"
	fmt.Fprintf(cl.c, "%-6d%s", len(abort), abort)
	deadline := time.Now().Add(5 * time.Second)
	for {
		job.mu.Lock()
		code := job.aborted
		job.mu.Unlock()
		if code == 17 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("abort status %d, want 17", code)
		}
		time.Sleep(time.Millisecond)
	}
}
