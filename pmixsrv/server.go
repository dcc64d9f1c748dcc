// Package pmixsrv hosts OpenPMIx's server library for the processes of one
// node. The library speaks the PMIx wire protocol; this package is the thin
// cgo layer that starts it, registers namespaces and clients, and turns the
// library's server-module upcalls into calls on a Go Host. It knows nothing
// about jobs, maps or daemons: the caller decides what every upcall means.
//
// There is one PMIx server per process (the library is a singleton), so
// Init may be called once at a time.
package pmixsrv

/*
#cgo pkg-config: prun-pmix
#cgo CFLAGS: -I${SRCDIR}/pmixinc
#cgo LDFLAGS: -Wl,--wrap=accept -Wl,--wrap=read -Wl,--wrap=pmix_server_grpconstruct -Wl,--wrap=pmix_server_grpdestruct -Wl,--wrap=event_assign -Wl,--wrap=event_del -Wl,--wrap=pmix_hash_fetch -Wl,--wrap=pmix_bfrops_base_copy -Wl,--wrap=pmix_server_get -Wl,--wrap=pmix_bfrops_base_unpack -Wl,--wrap=pmix_server_purge_events -Wl,--as-needed -l:libpmix.a -l:libevent_core.a -l:libevent_pthreads.a -l:libhwloc.a -l:libz.a -ldl -lutil
#include <malloc.h>
#include "shim.h"
unsigned long long prun_c_heap_in_use(void); // heap.c

// The library is the OpenPMIx that openpmix/build.sh pins and patches
// (pin.h refuses any other), linked in from its static archive: prun's
// server is the same on every distribution whatever PMIx its ranks carry,
// and no launch pays for loading and relocating a shared library and its
// libevent. libevent, hwloc and zlib come from their archives too (the
// build's -dev packages), and the two libraries Debian ships no archive of,
// libmunge and libudev, load at their first use (lazylibs.c): libmunge as a
// PMIx server starts, libudev never, neither in a prun that hosts no server
// (a DVM's submitter, prun dvm ps, ...). No -lm: hwloc's one call into it,
// modff, is libc's too. What the dynamic linker loads at start is libc
// alone. -ldl and -lutil name nothing on glibc 2.34 and later (their
// archives are empty: dlopen and openpty are libc's); on an older glibc (the
// release build's, Debian 11's 2.31, see release/build.sh) they are
// libdl.so.2 and libutil.so.1, loaded beside libpthread.so.0, all three
// glibc's own. See Init for what that asks of the library's plugins.
// pmixinc lets libpmix's private headers (leaks.c, groups.c) find the
// public ones they name as "include/...".
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/cgo"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"prun/internal/peercred"
)

// Status is a PMIx status code; as an error it carries PMIx's own text.
type Status int32

func (s Status) Error() string { return C.GoString(C.PMIx_Error_string(C.pmix_status_t(s))) }

// Status codes the host hands back to the library.
const (
	Success          Status = C.PMIX_SUCCESS
	ErrGeneric       Status = C.PMIX_ERROR
	ErrNotFound      Status = C.PMIX_ERR_NOT_FOUND
	ErrNotSupported  Status = C.PMIX_ERR_NOT_SUPPORTED
	ErrBadParam      Status = C.PMIX_ERR_BAD_PARAM
	ErrTimeout       Status = C.PMIX_ERR_TIMEOUT
	ErrDuplicateKey  Status = C.PMIX_ERR_DUPLICATE_KEY
	ErrUnreach       Status = C.PMIX_ERR_UNREACH
	ErrInvalidNspace Status = C.PMIX_ERR_INVALID_NAMESPACE
	ErrProcAborted   Status = C.PMIX_ERR_PROC_ABORTED
	ErrJobTerminated Status = C.PMIX_EVENT_JOB_END
	EventJobEnd      Status = C.PMIX_EVENT_JOB_END
	EventProcTerm    Status = C.PMIX_EVENT_PROC_TERMINATED
	ErrJobAborted    Status = C.PMIX_ERR_JOB_ABORTED
	JCtrlCheckpoint  Status = C.PMIX_JCTRL_CHECKPOINT // asks a process that chose the event to checkpoint
	DebuggerRelease  Status = C.PMIX_DEBUGGER_RELEASE // lets processes stopped for a debugger go on
	// operationSucceeded tells the library the upcall completed inline.
	operationSucceeded = C.PMIX_OPERATION_SUCCEEDED
)

func statusOf(err error) C.pmix_status_t {
	if err == nil {
		return C.PMIX_SUCCESS
	}
	var s Status
	if errors.As(err, &s) {
		return C.pmix_status_t(s)
	}
	return C.PMIX_ERROR
}

// Query is one pmix_query_t: keys plus qualifiers.
type Query struct {
	Keys       []string
	Qualifiers []Info
}

// PData is a published datum as Lookup returns it.
type PData struct {
	Publisher Proc
	Key       string
	Value     any
}

// Host implements the server-module callbacks. The library calls these on
// its own progress thread: a method must return promptly and may call done
// later from any goroutine, exactly once. Methods that return an error do
// not call done.
type Host interface {
	ClientConnected(p Proc) error
	ClientFinalized(p Proc) error
	Abort(p Proc, status int, msg string, targets []Proc, done func(error)) error
	Fence(procs []Proc, info []Info, data []byte, done func([]byte, error)) error
	DirectModex(p Proc, info []Info, done func([]byte, error)) error
	Publish(p Proc, info []Info, done func(error)) error
	Lookup(p Proc, keys []string, info []Info, done func([]PData, error)) error
	Unpublish(p Proc, keys []string, info []Info, done func(error)) error
	RegisterEvents(codes []Status, info []Info) error
	DeregisterEvents(codes []Status) error
	NotifyEvent(code Status, source Proc, rng DataRange, info []Info) error
	Query(p Proc, queries []Query, done func([]Info, error)) error
	JobControl(requestor Proc, targets []Proc, directives []Info, done func(error)) error
	Log(p Proc, data, directives []Info) error
}

// Spawner is implemented by hosts that support PMIx_Spawn.
type Spawner interface {
	Spawn(p Proc, jobInfo []Info, apps []App, done func(nspace string, err error)) error
}

// Connector is implemented by hosts that support PMIx_Connect/Disconnect.
type Connector interface {
	Connect(procs []Proc, info []Info, done func(error)) error
	Disconnect(procs []Proc, info []Info, done func(error)) error
}

// App is one pmix_app_t of a spawn request.
type App struct {
	Cmd      string
	Argv     []string
	Env      []string
	Cwd      string
	MaxProcs int
	Info     []Info
}

// Config is what PMIx_server_init is told.
type Config struct {
	TmpDir      string // PMIX_SERVER_TMPDIR and PMIX_SYSTEM_TMPDIR: the session directory
	Nspace      string // the server's own identity
	Rank        uint32
	Hostname    string
	ToolSupport bool // accept tool connections (pps, pattrs); writes rendezvous files in TmpDir
	Extra       []Info
	// Refused, when set, hears of every connection refused because its
	// peer is neither this process's user nor root (see goAdmitPeer), with
	// the reason; called on the library's listener thread: it must return
	// promptly.
	Refused func(peer peercred.Peer, why string)
}

// Server is the running PMIx server of this process.
type Server struct {
	host    Host
	refused func(peercred.Peer, string)
	tmpDir  string
	self    Proc // the server's own identity, the source of its own events
}

var (
	mu        sync.Mutex
	active    *Server
	abandoned bool // the library still runs, answering nothing: see Abandon
	// finalized: libpmix 4.2 cannot start a server again in a process
	// whose server it finalized (glibc aborts it: "bit out of range 0 -
	// FD_SETSIZE on fd_set").
	finalized bool
)

// Init starts the PMIx server library with host as its module.
func Init(cfg Config, host Host) (*Server, error) {
	mu.Lock()
	defer mu.Unlock()
	if active != nil || abandoned {
		return nil, errors.New("pmixsrv: a PMIx server is already running in this process")
	}
	if finalized {
		return nil, errors.New("pmixsrv: the PMIx server library cannot start again in a process that finalized it")
	}
	infos := []Info{
		{C.PMIX_SERVER_TMPDIR, cfg.TmpDir},
		{C.PMIX_SYSTEM_TMPDIR, cfg.TmpDir},
		{C.PMIX_SERVER_NSPACE, cfg.Nspace},
		{C.PMIX_SERVER_RANK, Rank(cfg.Rank)},
		{C.PMIX_HOSTNAME, cfg.Hostname},
	}
	if cfg.ToolSupport {
		infos = append(infos, Info{C.PMIX_SERVER_TOOL_SUPPORT, true}, Info{C.PMIX_SERVER_SYSTEM_SUPPORT, true})
	}
	infos = append(infos, cfg.Extra...)
	a, n, err := toC(infos)
	if err != nil {
		return nil, err
	}
	defer C.prun_info_free(a, n)
	// The library's plugins (zlib compression, the Slurm and default
	// resource-manager hooks) are built against the shared libpmix: loaded
	// beside the static copy they would run on the other copy's state.
	// Nothing prun uses needs them.
	os.Setenv("PMIX_MCA_mca_base_component_disable_dlopen", "1")
	s := &Server{host: host, tmpDir: cfg.TmpDir, self: Proc{Nspace: cfg.Nspace}, refused: cfg.Refused}
	active = s // upcalls may arrive as soon as the library starts
	if rc := C.prun_server_init(a, n); rc != C.PMIX_SUCCESS {
		active = nil
		return nil, fmt.Errorf("PMIx_server_init: %w", Status(rc))
	}
	if cfg.ToolSupport {
		linkRendezvous(cfg.TmpDir, cfg.Hostname)
	}
	return s, nil
}

// linkRendezvous gives the library's rendezvous files for tools, named
// after the host name the server was given (a node named "localhost", or an
// alias of a hostfile), a second name after the machine's own: a tool asking
// by the server's pid (pps --pid) looks for pmix.HOST.tool.PID, and one
// asking for the system server for pmix.sys.HOST, with its own host name.
// The links go with the session directory.
func linkRendezvous(dir, given string) {
	host, err := os.Hostname()
	if err != nil || host == given {
		return
	}
	for _, f := range []string{"pmix.%s.tool." + strconv.Itoa(os.Getpid()), "pmix.sys.%s"} {
		os.Link(filepath.Join(dir, fmt.Sprintf(f, given)), filepath.Join(dir, fmt.Sprintf(f, host)))
	}
}

// URI is the server's contact URI, by which a tool attaches: the
// first line of the rendezvous file the library writes for tools with
// ToolSupport, named after this process.
func (s *Server) URI() (string, error) {
	files, _ := filepath.Glob(filepath.Join(s.tmpDir, fmt.Sprintf("pmix.*.tool.%d", os.Getpid())))
	if len(files) == 0 {
		return "", errors.New("the PMIx server wrote no rendezvous file (no tool support)")
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return "", err
	}
	uri, _, _ := strings.Cut(string(b), "\n")
	return uri, nil
}

// Abandon is Finalize for a process about to exit: from now on every upcall
// is refused, and the library's thread and sockets end with the process.
// PMIx_server_finalize would only tear down its components and free memory,
// time every launch would spend at its end; its files must be removed by the
// caller (they are in the session directory). No server can start again.
func (s *Server) Abandon() {
	mu.Lock()
	defer mu.Unlock()
	if active == s {
		active, abandoned = nil, true
	}
}

// Finalize stops the library; it removes the rendezvous files it made.
func (s *Server) Finalize() error {
	mu.Lock()
	defer mu.Unlock()
	rc := C.PMIx_server_finalize()
	active, finalized = nil, true
	if rc != C.PMIX_SUCCESS {
		return fmt.Errorf("PMIx_server_finalize: %w", Status(rc))
	}
	return nil
}

// wait runs a library call whose completion arrives through goOpDone.
func wait(call func(h C.uintptr_t) C.pmix_status_t) error {
	ch := make(chan C.pmix_status_t, 1)
	h := cgo.NewHandle(ch)
	defer h.Delete()
	rc := call(C.uintptr_t(h))
	switch rc {
	case C.PMIX_SUCCESS:
		rc = <-ch
	case C.PMIX_OPERATION_SUCCEEDED:
		rc = C.PMIX_SUCCESS
	}
	if rc != C.PMIX_SUCCESS {
		return Status(rc)
	}
	return nil
}

//export goOpDone
func goOpDone(h C.uintptr_t, st C.pmix_status_t) {
	cgo.Handle(h).Value().(chan C.pmix_status_t) <- st
}

// RegisterNspace tells the library about a job: nlocal of its processes run
// here, and info holds every reserved key of every realm.
func (s *Server) RegisterNspace(nspace string, nlocal int, info []Info) error {
	a, n, err := toC(info)
	if err != nil {
		return err
	}
	defer func() {
		C.prun_info_free(a, n)
		// The array (a pmix_info_t is over 500 bytes: its key is inline)
		// of every rank's and node's keys, megabytes at a thousand nodes, is
		// copied into libpmix's store now: its pages go back to the system
		// rather than sit in malloc's free lists for the job's lifetime.
		C.malloc_trim(0)
	}()
	ns := C.CString(nspace)
	defer C.free(unsafe.Pointer(ns))
	if rc := C.prun_register_nspace(ns, C.int(nlocal), a, n); rc != C.PMIX_SUCCESS {
		return fmt.Errorf("PMIx_server_register_nspace %s: %w", nspace, Status(rc))
	}
	return nil
}

// CHeapInUse is what this process's C heap has in use (glibc's mallinfo2:
// small blocks and mmap'ed ones; heap.c): libpmix's servers and this
// package's C, which a long-lived runtime must keep flat from job to job.
func CHeapInUse() uint64 {
	return uint64(C.prun_c_heap_in_use())
}

// DeregisterNspace drops a job and everything the library kept for it.
// Its completion, on the library's thread, also releases the connections of
// departed clients that libpmix 4.2 keeps for the server's lifetime
// (leaks.c): each held its namespace and rank records, which a long-lived
// runtime would accumulate job after job.
func (s *Server) DeregisterNspace(nspace string) {
	ns := C.CString(nspace)
	defer C.free(unsafe.Pointer(ns))
	C.prun_deregister_nspace(ns)
}

// RegisterClients authorises local processes of nspace to connect; errs[i]
// says why ranks[i] cannot (nil when it can).
func (s *Server) RegisterClients(nspace string, ranks []Rank, uid, gid int) (errs []error) {
	errs = make([]error, len(ranks))
	if len(ranks) == 0 {
		return errs
	}
	ns := C.CString(nspace)
	defer C.free(unsafe.Pointer(ns))
	cranks := make([]C.uint32_t, len(ranks))
	for i, r := range ranks {
		cranks[i] = C.uint32_t(r)
	}
	st := make([]C.pmix_status_t, len(ranks))
	C.prun_register_clients(ns, &cranks[0], C.size_t(len(ranks)), C.uid_t(uid), C.gid_t(gid), &st[0])
	for i, rc := range st {
		if rc != C.PMIX_SUCCESS {
			errs[i] = fmt.Errorf("PMIx_server_register_client %s: %w", Proc{nspace, ranks[i]}, Status(rc))
		}
	}
	return errs
}

// DeregisterClient forgets a local process (after it exited). prun does
// not call it: a restarted rank connects again under its registration, and
// the namespace's deregistration drops every rank's record.
//
// Hazard (libpmix 4.2.2): if the process had connected and the library's
// progress thread has not yet read the EOF of its connection, the
// library closes that socket without deleting its read event; libevent
// keeps the descriptor number as watched, and the next connection that
// gets the number (a spawned job's rank, a tool) is never read: its
// PMIx_Init hangs. A process that simply ended must therefore not be
// deregistered: the library tears its connection down itself on the EOF
// (deleting the event first), and DeregisterNspace drops its record.
func (s *Server) DeregisterClient(p Proc) {
	ns := C.CString(p.Nspace)
	defer C.free(unsafe.Pointer(ns))
	C.prun_deregister_client(ns, C.uint32_t(p.Rank))
}

// SetupFork returns the environment variables a client needs to find this
// server ("PMIX_...=..." entries).
func (s *Server) SetupFork(p Proc) ([]string, error) {
	ns := C.CString(p.Nspace)
	defer C.free(unsafe.Pointer(ns))
	var env **C.char
	rc := C.prun_setup_fork(ns, C.uint32_t(p.Rank), &env)
	defer C.prun_env_free(env)
	if rc != C.PMIX_SUCCESS {
		return nil, fmt.Errorf("PMIx_server_setup_fork %s: %w", p, Status(rc))
	}
	return nativeSecurity(stringsFromC(env)), nil
}

// nativeSecurity has a client authenticate natively when the server offers
// it. The library offers every security module it has, munge first, and a
// client takes the first: where munged runs (every Slurm node) each rank
// then asks munged for a credential and the server asks munged to check it,
// two round trips per rank, for what the kernel tells already: the server knows its peer by its socket's
// owner (__wrap_accept). The server keeps munge for tools, which choose
// their own (pps picks munge where munged runs).
func nativeSecurity(env []string) []string {
	const key = "PMIX_SECURITY_MODE="
	for i, e := range env {
		if mode, ok := strings.CutPrefix(e, key); ok && slices.Contains(strings.Split(mode, ","), "native") {
			env[i] = key + "native"
		}
	}
	return env
}

// DmodexRequest fetches the data a local process posted, as a remote
// daemon's direct-modex request needs it. It waits until the process has
// committed its data (the library holds the request until then).
func (s *Server) DmodexRequest(p Proc, done func([]byte, error)) {
	ns := C.CString(p.Nspace)
	defer C.free(unsafe.Pointer(ns))
	h := cgo.NewHandle(done)
	if rc := C.prun_dmodex_request(ns, C.uint32_t(p.Rank), C.uintptr_t(h)); rc != C.PMIX_SUCCESS {
		h.Delete()
		done(nil, Status(rc))
	}
}

//export goDmodexDone
func goDmodexDone(h C.uintptr_t, st C.pmix_status_t, data *C.char, n C.size_t) {
	hd := cgo.Handle(h)
	done := hd.Value().(func([]byte, error))
	hd.Delete()
	if st != C.PMIX_SUCCESS {
		done(nil, Status(st))
		return
	}
	done(C.GoBytes(unsafe.Pointer(data), C.int(n)), nil)
}

// Notify delivers an event to the local clients that registered for it. A
// source without a namespace is the server itself: the library delivers no
// event to its source, and a job's rank wildcard would be every rank.
func (s *Server) Notify(code Status, source Proc, rng DataRange, info []Info) error {
	if source.Nspace == "" {
		source = s.self
	}
	a, n, err := toC(info)
	if err != nil {
		return err
	}
	defer C.prun_info_free(a, n)
	ns := C.CString(source.Nspace)
	defer C.free(unsafe.Pointer(ns))
	return wait(func(h C.uintptr_t) C.pmix_status_t {
		return C.prun_notify(C.pmix_status_t(code), ns, C.uint32_t(source.Rank), C.pmix_data_range_t(rng), a, n, h)
	})
}

// CPUSetString is the PMIX_CPUSET form of a set of OS CPU numbers: "hwloc:"
// and hwloc's bitmap print format (32-bit hex words, most significant first).
func CPUSetString(cpus []int) string {
	maxCPU := -1
	for _, c := range cpus {
		maxCPU = max(maxCPU, c)
	}
	words := make([]uint32, maxCPU/32+1)
	for _, c := range cpus {
		if c >= 0 {
			words[c/32] |= 1 << (c % 32)
		}
	}
	var b strings.Builder
	b.WriteString("hwloc:")
	for i := len(words) - 1; i >= 0; i-- {
		if i < len(words)-1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "0x%08x", words[i])
	}
	return b.String()
}
