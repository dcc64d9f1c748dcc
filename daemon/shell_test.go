package daemon

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"prun/hostfile"
	"prun/iof"
	"prun/jobspec"
	"prun/mapper"
	"prun/names"
	"prun/pmixsrv"
	"prun/sessiondir"
)

// fakeUp is the launcher as a shell sees it, recording what it is told:
// events, output by rank and stream, and which streams ended.
type fakeUp struct {
	mu     sync.Mutex
	events []Event
	out    map[iof.Source]map[iof.Stream]string
	ended  map[iof.Source][]iof.Stream
	ch     chan Event
}

func newFakeUp() *fakeUp {
	return &fakeUp{out: map[iof.Source]map[iof.Stream]string{}, ended: map[iof.Source][]iof.Stream{},
		ch: make(chan Event, 1024)}
}

func (u *fakeUp) Write(src iof.Source, st iof.Stream, p []byte, partial bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.out[src] == nil {
		u.out[src] = map[iof.Stream]string{}
	}
	u.out[src][st] += string(p)
}

func (u *fakeUp) End(src iof.Source, st iof.Stream) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ended[src] = append(u.ended[src], st)
}

func (u *fakeUp) Event(e Event) {
	u.mu.Lock()
	u.events = append(u.events, e)
	u.mu.Unlock()
	u.ch <- e
}

func (u *fakeUp) Fence(node, kind string, procs []pmixsrv.Proc, data []byte, done func([]byte, error)) {
	done(data, nil) // one node: the allgather is this node's data
}
func (u *fakeUp) DirectModex(node string, target pmixsrv.Proc, done func([]byte, error)) {
	done(nil, fmt.Errorf("no other node"))
}
func (u *fakeUp) NotifyEvent(string, pmixsrv.Status, pmixsrv.Proc, pmixsrv.DataRange, []pmixsrv.Info) {
}
func (u *fakeUp) JobControl(_ pmixsrv.Proc, _ []pmixsrv.Proc, _ syscall.Signal, done func(error)) {
	done(fmt.Errorf("not supported"))
}
func (u *fakeUp) Spawn(req SpawnRequest)         { req.Done("", fmt.Errorf("not supported")) }
func (u *fakeUp) Names() NameService             { return LocalNames{names.New()} }
func (u *fakeUp) Namespaces(done func([]string)) { done(nil) }
func (u *fakeUp) ProcTable(_ string, done func([]pmixsrv.ProcInfo, error)) {
	done(nil, fmt.Errorf("not supported"))
}

// waitDone waits for the job's NodeJobDone and returns the events the
// upstream got for it, in order.
func (u *fakeUp) waitDone(t *testing.T, nspace string) []Event {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case e := <-u.ch:
			if e.Kind == NodeJobDone && e.Nspace == nspace {
				u.mu.Lock()
				defer u.mu.Unlock()
				var out []Event
				for _, e := range u.events {
					if e.Nspace == nspace {
						out = append(out, e)
					}
				}
				return out
			}
		case <-timeout:
			t.Fatalf("%s: no NodeJobDone within 60 s", nspace)
		}
	}
}

func (u *fakeUp) output(rank int, st iof.Stream) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.out[iof.Source{Rank: rank}][st]
}

// One PMIx server per process: the shell tests share a daemon.
var (
	testDaemonOnce sync.Once
	testDaemon     *Daemon
	testUp         *fakeUp
	testDaemonErr  error
)

const testNode = "shelltest"

func sharedDaemon(t *testing.T) (*Daemon, *fakeUp) {
	t.Helper()
	testDaemonOnce.Do(func() {
		sess, err := sessiondir.Create(os.TempDir())
		if err != nil {
			testDaemonErr = err
			return
		}
		testUp = newFakeUp()
		testDaemon, testDaemonErr = New(Config{Name: testNode, Session: sess, BaseEnv: filterInherited(os.Environ())}, testUp)
		if testDaemonErr != nil {
			sess.Remove()
		}
	})
	if testDaemonErr != nil {
		t.Fatal(testDaemonErr)
	}
	return testDaemon, testUp
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testDaemon != nil {
		testDaemon.Close()
		testDaemon.cfg.Session.Remove()
	}
	os.Exit(code)
}

// shPlan is a plan of np ranks of /bin/sh -c script on the test node.
func shPlan(t *testing.T, nspace string, np int, script string, edit func(*jobspec.Job)) *Plan {
	t.Helper()
	j := &jobspec.Job{CmdLine: "prun test", Apps: []jobspec.App{{NP: np, Argv: []string{"sh", "-c", script}, Exe: "/bin/sh", Wdir: t.TempDir()}}}
	if edit != nil {
		edit(j)
	}
	slots := 0
	for _, a := range j.Apps {
		slots += a.NP
	}
	m, err := mapper.Place(j, hostfile.Allocation{Hosts: []hostfile.Host{{Name: testNode, Slots: slots}}})
	if err != nil {
		t.Fatal(err)
	}
	return &Plan{Nspace: nspace, JobID: "1", Job: j, Map: m, UnivSize: m.Slots, Stdin: StdinNone}
}

// openFDs lists this process's open descriptors and what they are.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		out[e.Name()] = l
	}
	return out
}

// reset forgets earlier jobs (sources do not name the job, and a test run
// again reuses its namespaces).
func (u *fakeUp) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.out, u.ended, u.events = map[iof.Source]map[iof.Stream]string{}, map[iof.Source][]iof.Stream{}, nil
	for len(u.ch) > 0 {
		<-u.ch
	}
}

// runJob launches p on the shared daemon, waits for its end and checks
// that the job left no descriptor open.
func runJob(t *testing.T, p *Plan) (*fakeUp, []Event) {
	t.Helper()
	d, up := sharedDaemon(t)
	up.reset()
	before := openFDs(t)
	if err := d.Launch(p); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	evs := up.waitDone(t, p.Nspace)
	sh := d.shell(p.Nspace)
	sh.close()
	d.mu.Lock()
	delete(d.shells, p.Nspace)
	d.mu.Unlock()
	d.srv.DeregisterNspace(p.Nspace)
	// A descriptor closed by another goroutine (a PMI server, a pidfd in
	// the poller) may take a moment.
	var leaked []string
	for range 50 {
		after := openFDs(t)
		leaked = leaked[:0]
		for fd, what := range after {
			// "": no longer there when read (ReadDir's own descriptor,
			// which may take the number of one closed meanwhile).
			if what != "" && before[fd] != what {
				leaked = append(leaked, fd+" -> "+what)
			}
		}
		if len(leaked) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(leaked) > 0 {
		slices.Sort(leaked)
		t.Errorf("%s left descriptors open: %v", p.Nspace, leaked)
	}
	return up, evs
}

// kinds lists the kinds of evs for rank (-1: the job's own) in order.
func kinds(evs []Event, rank int) []EventKind {
	var out []EventKind
	for _, e := range evs {
		if e.Rank == rank && e.Kind != NodeJobDone || rank == -1 && e.Kind == NodeJobDone {
			out = append(out, e.Kind)
		}
	}
	return out
}

func exitOf(t *testing.T, evs []Event, rank int) Event {
	t.Helper()
	for _, e := range evs {
		if e.Rank == rank && e.Kind == ProcExited {
			return e
		}
	}
	t.Fatalf("rank %d: no ProcExited in %+v", rank, evs)
	return Event{}
}

// The shell starts real ranks, forwards their output, reports their
// starts and exits (codes and signals) and then the job's end, and leaves
// no descriptor open.
func TestShellRanks(t *testing.T) {
	script := `echo "out $PRUN_RANK of $PRUN_SIZE $OMPI_COMM_WORLD_LOCAL_RANK $PMI_RANK"; echo "err $PRUN_RANK" >&2
case $PRUN_RANK in 1) exit 7;; 2) kill -TERM $$;; esac`
	p := shPlan(t, "shell-ranks", 3, script, nil)
	up, evs := runJob(t, p)
	for r := range 3 {
		if got := kinds(evs, r); !slices.Equal(got, []EventKind{ProcStarted, ProcExited}) {
			t.Errorf("rank %d: events %v, want started, exited", r, got)
		}
		if got, want := up.output(r, iof.Stdout), fmt.Sprintf("out %d of 3 %d %d\n", r, r, r); got != want {
			t.Errorf("rank %d: stdout %q, want %q", r, got, want)
		}
		if got, want := up.output(r, iof.Stderr), fmt.Sprintf("err %d\n", r); got != want {
			t.Errorf("rank %d: stderr %q, want %q", r, got, want)
		}
		up.mu.Lock()
		ended := up.ended[iof.Source{Rank: r}]
		up.mu.Unlock()
		if len(ended) != 2 {
			t.Errorf("rank %d: streams ended %v, want both", r, ended)
		}
	}
	if e := exitOf(t, evs, 0); e.Status != 0 || e.Signal != 0 || e.Pid <= 0 {
		t.Errorf("rank 0: %+v, want exit 0", e)
	}
	if e := exitOf(t, evs, 1); e.Status != 7 || e.Signal != 0 {
		t.Errorf("rank 1: %+v, want exit 7", e)
	}
	if e := exitOf(t, evs, 2); e.Signal != syscall.SIGTERM {
		t.Errorf("rank 2: %+v, want SIGTERM", e)
	}
	if got := kinds(evs, -1); len(got) != 1 || evs[len(evs)-1].Kind != NodeJobDone {
		t.Errorf("NodeJobDone must come once, last: %v", evs)
	}
}

// A rank whose program is missing fails to start: LaunchFailed naming it,
// no exit of a process that never was, the other ranks run, and nothing
// stays open.
func TestShellStartFails(t *testing.T) {
	p := shPlan(t, "shell-missing", 2, "echo ran", func(j *jobspec.Job) {
		j.Apps = append(j.Apps, jobspec.App{NP: 1, Argv: []string{"no-such-program"}, Exe: "/nonexistent/no-such-program", Wdir: j.Apps[0].Wdir})
	})
	up, evs := runJob(t, p)
	for r := range 2 {
		if got := kinds(evs, r); !slices.Equal(got, []EventKind{ProcStarted, ProcExited}) {
			t.Errorf("rank %d: events %v", r, got)
		}
		if got := up.output(r, iof.Stdout); got != "ran\n" {
			t.Errorf("rank %d: stdout %q", r, got)
		}
	}
	if got := kinds(evs, 2); !slices.Equal(got, []EventKind{LaunchFailed}) {
		t.Errorf("rank 2: events %v, want LaunchFailed alone", got)
	}
	for _, e := range evs {
		if e.Kind == LaunchFailed && (!strings.Contains(e.Msg, "no-such-program") || !strings.Contains(e.Msg, "no such file")) {
			t.Errorf("LaunchFailed %q should name the program and why", e.Msg)
		}
	}
}

// --max-restarts: a failing rank starts again until it succeeds or its
// restarts run out; its output streams end once, with its last
// incarnation, and its earlier incarnations leave nothing open.
func TestShellRestarts(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	// Rank 0 fails twice, then succeeds; rank 1 always fails.
	script := `echo "try $PRUN_RANK"
if [ $PRUN_RANK = 0 ]; then echo x >> ` + count + `; [ $(wc -l < ` + count + `) -ge 3 ] && exit 0; exit 3; fi
exit 4`
	p := shPlan(t, "shell-restarts", 2, script, func(j *jobspec.Job) { j.MaxRestarts = 2 })
	up, evs := runJob(t, p)
	if got, want := kinds(evs, 0), []EventKind{ProcStarted, ProcRestarted, ProcStarted, ProcRestarted, ProcStarted, ProcExited}; !slices.Equal(got, want) {
		t.Errorf("rank 0: events %v, want %v", got, want)
	}
	if got, want := kinds(evs, 1), []EventKind{ProcStarted, ProcRestarted, ProcStarted, ProcRestarted, ProcStarted, ProcExited}; !slices.Equal(got, want) {
		t.Errorf("rank 1: events %v, want %v", got, want)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == ProcRestarted {
			if e.Rank == 0 && e.Status != 3 || e.Rank == 1 && e.Status != 4 || e.Restart < 1 || e.Restart > 2 {
				t.Errorf("restart event %+v", e)
			}
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d restarts, want 4", n)
	}
	if e := exitOf(t, evs, 0); e.Status != 0 {
		t.Errorf("rank 0 last: %+v, want exit 0", e)
	}
	if e := exitOf(t, evs, 1); e.Status != 4 {
		t.Errorf("rank 1 last: %+v, want exit 4", e)
	}
	for r := range 2 {
		if got, want := up.output(r, iof.Stdout), strings.Repeat(fmt.Sprintf("try %d\n", r), 3); got != want {
			t.Errorf("rank %d: stdout %q, want %q", r, got, want)
		}
		up.mu.Lock()
		ended := up.ended[iof.Source{Rank: r}]
		up.mu.Unlock()
		if len(ended) != 2 {
			t.Errorf("rank %d: streams ended %v, want each once", r, ended)
		}
	}
}

// A rank that cannot start again (its program went) ends with a launch
// failure instead of an exit.
func TestShellRestartFails(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nrm -f \"$0\"\nexit 5\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := shPlan(t, "shell-restart-fails", 1, "", func(j *jobspec.Job) {
		j.Apps[0].Argv, j.Apps[0].Exe, j.MaxRestarts = []string{prog}, prog, 1
	})
	_, evs := runJob(t, p)
	if got, want := kinds(evs, 0), []EventKind{ProcStarted, ProcRestarted, LaunchFailed}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// Signal reaches every live rank's process group; a job told to end
// restarts nothing.
func TestShellSignal(t *testing.T) {
	d, up := sharedDaemon(t)
	up.reset()
	p := shPlan(t, "shell-signal", 2, `echo up; sleep 30 & wait`, func(j *jobspec.Job) { j.MaxRestarts = 3 })
	before := openFDs(t)
	if err := d.Launch(p); err != nil {
		t.Fatal(err)
	}
	// Once both are up, end the job.
	for started := 0; started < 2; {
		select {
		case e := <-up.ch:
			if e.Nspace == p.Nspace && e.Kind == ProcStarted {
				started++
			} else if e.Nspace == p.Nspace {
				t.Fatalf("unexpected %+v", e)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("ranks did not start")
		}
	}
	d.Signal(p.Nspace, nil, syscall.SIGTERM)
	evs := up.waitDone(t, p.Nspace)
	for r := range 2 {
		if got := kinds(evs, r); !slices.Equal(got, []EventKind{ProcStarted, ProcExited}) {
			t.Errorf("rank %d: %v, want no restart after SIGTERM", r, got)
		}
		if e := exitOf(t, evs, r); e.Signal != syscall.SIGTERM {
			t.Errorf("rank %d: %+v", r, e)
		}
	}
	d.shell(p.Nspace).close()
	d.mu.Lock()
	delete(d.shells, p.Nspace)
	d.mu.Unlock()
	d.srv.DeregisterNspace(p.Nspace)
	// Closing is asynchronous (readers drain, the server lets go): wait
	// for the descriptors to return, then name those that did not.
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left = left[:0]
		for fd, what := range openFDs(t) {
			if before[fd] != what {
				left = append(left, fd+" -> "+what)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, l := range left {
		t.Errorf("left open 10 s after the job's end: %s", l)
	}
}

// withStdin runs p on the shared daemon with in as the launcher's stdin.
func withStdin(t *testing.T, p *Plan, in io.Reader) (*fakeUp, []Event) {
	d, _ := sharedDaemon(t)
	d.cfg.Stdin = in
	defer func() { d.cfg.Stdin = nil }()
	return runJob(t, p)
}

// The launcher's stdin reaches every rank that reads it (--stdin all),
// with its end; the others read /dev/null.
func TestShellStdin(t *testing.T) {
	p := shPlan(t, "shell-stdin", 2, `cat; echo "eof $PRUN_RANK"`, nil)
	p.Stdin = StdinAll
	up, evs := withStdin(t, p, strings.NewReader("line one\nline two\n"))
	for r := range 2 {
		if got, want := up.output(r, iof.Stdout), fmt.Sprintf("line one\nline two\neof %d\n", r); got != want {
			t.Errorf("rank %d: stdout %q, want %q", r, got, want)
		}
		if e := exitOf(t, evs, r); e.Status != 0 {
			t.Errorf("rank %d: %+v", r, e)
		}
	}
	p = shPlan(t, "shell-stdin-1", 2, `cat; echo "eof $PRUN_RANK"`, nil)
	p.Stdin = 1
	up, _ = withStdin(t, p, strings.NewReader("only one\n"))
	if got := up.output(0, iof.Stdout); got != "eof 0\n" {
		t.Errorf("rank 0 (no stdin): %q", got)
	}
	if got := up.output(1, iof.Stdout); got != "only one\neof 1\n" {
		t.Errorf("rank 1: %q", got)
	}
}

// --pty: the stdin rank's stdin, stdout and stderr are one terminal, its
// controlling one; what it writes comes back as its stdout.
func TestShellPTY(t *testing.T) {
	p := shPlan(t, "shell-pty", 1, `[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo tty; read x; echo "got $x"; echo "to stderr" >&2`, nil)
	p.Stdin, p.PTY = 0, true
	pr, pw := io.Pipe()
	go pw.Write([]byte("typed\n"))
	defer pw.Close()
	d, up := sharedDaemon(t)
	up.reset()
	d.cfg.Stdin = pr
	defer func() { d.cfg.Stdin = nil }()
	before := openFDs(t)
	if err := d.Launch(p); err != nil {
		t.Fatal(err)
	}
	evs := up.waitDone(t, p.Nspace)
	pw.Close() // the fan-out ends with the launcher's stdin
	d.shell(p.Nspace).close()
	d.mu.Lock()
	delete(d.shells, p.Nspace)
	d.mu.Unlock()
	d.srv.DeregisterNspace(p.Nspace)
	out := strings.ReplaceAll(up.output(0, iof.Stdout), "\r\n", "\n")
	for _, want := range []string{"tty\n", "got typed\n", "to stderr\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("pty output %q lacks %q", out, want)
		}
	}
	if got := up.output(0, iof.Stderr); got != "" {
		t.Errorf("a pty rank's stderr came apart: %q", got)
	}
	if e := exitOf(t, evs, 0); e.Status != 0 {
		t.Errorf("%+v", e)
	}
	for range 50 {
		if len(openFDs(t)) <= len(before) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	after := openFDs(t)
	for fd, what := range after {
		if before[fd] != what {
			t.Errorf("left open: %s -> %s", fd, what)
		}
	}
}
