package pmixsrv

// The exported functions below are the Go ends of the server-module
// trampolines in shim.c. Each converts its C arguments, hands them to the
// Host, and arranges for the library's callback to run when the host is done.

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"io"
	"unsafe"
)

// Trace, when set, receives one line per upcall (prun sets it from
// PRUN_DEBUG_PMIX=1): the quickest way to see what a client asked for.
var Trace io.Writer

func trace(format string, a ...any) {
	if Trace != nil {
		fmt.Fprintf(Trace, "pmixsrv: "+format+"\n", a...)
	}
}

func host() Host {
	mu.Lock()
	defer mu.Unlock()
	if active == nil {
		return nil
	}
	return active.host
}

// accepted turns a host's immediate answer into the upcall's return code:
// nil means the host took the request and will call done.
func accepted(err error) C.pmix_status_t {
	if err == nil {
		return C.PMIX_SUCCESS
	}
	return statusOf(err)
}

// inline turns a host's synchronous answer into "completed, no callback".
func inline(err error) C.pmix_status_t {
	if err == nil {
		return operationSucceeded
	}
	return statusOf(err)
}

func opDone(cb C.pmix_op_cbfunc_t, cbd unsafe.Pointer) func(error) {
	return func(err error) { C.prun_op_cb(cb, statusOf(err), cbd) }
}

func modexDone(cb C.pmix_modex_cbfunc_t, cbd unsafe.Pointer) func([]byte, error) {
	return func(data []byte, err error) {
		var p *C.char
		if len(data) > 0 {
			p = (*C.char)(C.CBytes(data))
			defer C.free(unsafe.Pointer(p))
		}
		C.prun_modex_cb(cb, statusOf(err), p, C.size_t(len(data)), cbd)
	}
}

func infoDone(cb C.pmix_info_cbfunc_t, cbd unsafe.Pointer) func([]Info, error) {
	return func(infos []Info, err error) {
		a, n, cerr := toC(infos)
		if err == nil && cerr != nil {
			err = ErrGeneric
		}
		if err != nil && len(infos) == 0 {
			a, n = nil, 0
		}
		C.prun_info_cb(cb, statusOf(err), a, n, cbd) // the library releases a
	}
}

//export goClientConnected
func goClientConnected(p *C.pmix_proc_t, cb C.pmix_op_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	trace("client connected %v", procFromC(p))
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	return inline(h.ClientConnected(procFromC(p)))
}

//export goClientFinalized
func goClientFinalized(p *C.pmix_proc_t, cb C.pmix_op_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	return inline(h.ClientFinalized(procFromC(p)))
}

//export goAbort
func goAbort(p *C.pmix_proc_t, status C.int, msg *C.char, procs *C.pmix_proc_t, nprocs C.size_t,
	cb C.pmix_op_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	m := ""
	if msg != nil {
		m = C.GoString(msg)
	}
	trace("abort from %v status %d: %s", procFromC(p), status, m)
	return accepted(h.Abort(procFromC(p), int(status), m, procsFromC(procs, nprocs), opDone(cb, cbd)))
}

//export goFence
func goFence(procs *C.pmix_proc_t, nprocs C.size_t, info *C.pmix_info_t, ninfo C.size_t,
	data *C.char, ndata C.size_t, cb C.pmix_modex_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	trace("fence %v %d bytes", procsFromC(procs, nprocs), ndata)
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	var blob []byte
	if data != nil && ndata > 0 {
		blob = C.GoBytes(unsafe.Pointer(data), C.int(ndata))
	}
	return accepted(h.Fence(procsFromC(procs, nprocs), fromC(info, ninfo), blob, modexDone(cb, cbd)))
}

//export goDirectModex
func goDirectModex(p *C.pmix_proc_t, info *C.pmix_info_t, ninfo C.size_t, cb C.pmix_modex_cbfunc_t,
	cbd unsafe.Pointer) C.pmix_status_t {
	trace("direct modex %v %v", procFromC(p), fromC(info, ninfo))
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	return accepted(h.DirectModex(procFromC(p), fromC(info, ninfo), modexDone(cb, cbd)))
}

//export goPublish
func goPublish(p *C.pmix_proc_t, info *C.pmix_info_t, ninfo C.size_t, cb C.pmix_op_cbfunc_t,
	cbd unsafe.Pointer) C.pmix_status_t {
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	return accepted(h.Publish(procFromC(p), fromC(info, ninfo), opDone(cb, cbd)))
}

//export goLookup
func goLookup(p *C.pmix_proc_t, keys **C.char, info *C.pmix_info_t, ninfo C.size_t,
	cb C.pmix_lookup_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	done := func(found []PData, err error) {
		d := C.prun_pdata_create(C.size_t(len(found)))
		for i, f := range found {
			a, n, cerr := toC([]Info{{Key: f.Key, Value: f.Value}})
			if cerr != nil {
				err = cerr
				continue
			}
			ns, key := C.CString(f.Publisher.Nspace), C.CString(f.Key)
			C.prun_pdata_set(d, C.size_t(i), ns, C.uint32_t(f.Publisher.Rank), key, a)
			C.free(unsafe.Pointer(ns))
			C.free(unsafe.Pointer(key))
			C.prun_info_free(a, n)
		}
		C.prun_lookup_cb(cb, statusOf(err), d, C.size_t(len(found)), cbd) // frees d
	}
	return accepted(h.Lookup(procFromC(p), stringsFromC(keys), fromC(info, ninfo), done))
}

//export goUnpublish
func goUnpublish(p *C.pmix_proc_t, keys **C.char, info *C.pmix_info_t, ninfo C.size_t,
	cb C.pmix_op_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	return accepted(h.Unpublish(procFromC(p), stringsFromC(keys), fromC(info, ninfo), opDone(cb, cbd)))
}

//export goSpawn
func goSpawn(p *C.pmix_proc_t, jobInfo *C.pmix_info_t, ninfo C.size_t, apps *C.pmix_app_t, napps C.size_t,
	cb C.pmix_spawn_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	sp, ok := host().(Spawner)
	if !ok {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	var goApps []App
	for _, a := range unsafe.Slice(apps, int(napps)) {
		app := App{Argv: stringsFromC(a.argv), Env: stringsFromC(a.env), MaxProcs: int(a.maxprocs),
			Info: fromC(a.info, a.ninfo)}
		if a.cmd != nil {
			app.Cmd = C.GoString(a.cmd)
		}
		if a.cwd != nil {
			app.Cwd = C.GoString(a.cwd)
		}
		goApps = append(goApps, app)
	}
	done := func(nspace string, err error) {
		ns := C.CString(nspace)
		defer C.free(unsafe.Pointer(ns))
		C.prun_spawn_cb(cb, statusOf(err), ns, cbd)
	}
	return accepted(sp.Spawn(procFromC(p), fromC(jobInfo, ninfo), goApps, done))
}

//export goConnect
func goConnect(procs *C.pmix_proc_t, nprocs C.size_t, info *C.pmix_info_t, ninfo C.size_t, disconnect C.int,
	cb C.pmix_op_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	c, ok := host().(Connector)
	if !ok {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	ps, in := procsFromC(procs, nprocs), fromC(info, ninfo)
	if disconnect != 0 {
		return accepted(c.Disconnect(ps, in, opDone(cb, cbd)))
	}
	return accepted(c.Connect(ps, in, opDone(cb, cbd)))
}

//export goRegisterEvents
func goRegisterEvents(codes *C.pmix_status_t, ncodes C.size_t, info *C.pmix_info_t, ninfo C.size_t,
	deregister C.int, cb C.pmix_op_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	var cs []Status
	if codes != nil {
		for _, c := range unsafe.Slice(codes, int(ncodes)) {
			cs = append(cs, Status(c))
		}
	}
	if deregister != 0 {
		return inline(h.DeregisterEvents(cs))
	}
	return inline(h.RegisterEvents(cs, fromC(info, ninfo)))
}

//export goNotifyEvent
func goNotifyEvent(code C.pmix_status_t, source *C.pmix_proc_t, rng C.pmix_data_range_t, info *C.pmix_info_t,
	ninfo C.size_t, cb C.pmix_op_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	var src Proc
	if source != nil {
		src = procFromC(source)
	}
	trace("notify_event %d from %v range %d", code, src, rng)
	return inline(h.NotifyEvent(Status(code), src, DataRange(rng), fromC(info, ninfo)))
}

//export goQuery
func goQuery(p *C.pmix_proc_t, queries *C.pmix_query_t, nq C.size_t, cb C.pmix_info_cbfunc_t,
	cbd unsafe.Pointer) C.pmix_status_t {
	trace("query from %v", procFromC(p))
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	var qs []Query
	if queries != nil {
		for _, q := range unsafe.Slice(queries, int(nq)) {
			qs = append(qs, Query{Keys: stringsFromC(q.keys), Qualifiers: fromC(q.qualifiers, q.nqual)})
		}
	}
	var who Proc
	if p != nil {
		who = procFromC(p)
	}
	return accepted(h.Query(who, qs, infoDone(cb, cbd)))
}

//export goLog
func goLog(p *C.pmix_proc_t, data *C.pmix_info_t, ndata C.size_t, dirs *C.pmix_info_t, ndirs C.size_t,
	cb C.pmix_op_cbfunc_t, cbd unsafe.Pointer) {
	h := host()
	var err error = ErrNotSupported
	if h != nil {
		var who Proc
		if p != nil {
			who = procFromC(p)
		}
		err = h.Log(who, fromC(data, ndata), fromC(dirs, ndirs))
	}
	// Completing inside the upcall leaves the client's PMIx_Log hanging
	// (libpmix 4.2.2): complete from another thread.
	go C.prun_op_cb(cb, statusOf(err), cbd)
}

//export goJobControl
func goJobControl(req *C.pmix_proc_t, targets *C.pmix_proc_t, ntargets C.size_t, dirs *C.pmix_info_t,
	ndirs C.size_t, cb C.pmix_info_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	h := host()
	if h == nil {
		return C.PMIX_ERR_INIT
	}
	done := func(err error) { C.prun_info_cb(cb, statusOf(err), nil, 0, cbd) }
	return accepted(h.JobControl(procFromC(req), procsFromC(targets, ntargets), fromC(dirs, ndirs), done))
}
