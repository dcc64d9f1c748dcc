package pmixsrv

/*
#include "shim.h"
*/
import "C"

import (
	"debug/elf"
	"sync"
	"unsafe"
)

// PMIx groups: the library aggregates its local members' construct and
// destruct calls and makes one upcall per node (libpmix 4.2.2: only when
// every local member called, and for a construct with no remote member and
// no context id, not at all).

// GroupOp is a group upcall's operation.
type GroupOp int

const (
	GroupConstruct GroupOp = C.PMIX_GROUP_CONSTRUCT
	GroupDestruct  GroupOp = C.PMIX_GROUP_DESTRUCT
)

// Group keys and events.
const (
	KeyGroupAssignContextID = C.PMIX_GROUP_ASSIGN_CONTEXT_ID // (bool) a directive: assign a context id
	KeyGroupContextID       = C.PMIX_GROUP_CONTEXT_ID        // (size_t) the context id assigned
	KeyGroupEndptData       = C.PMIX_GROUP_ENDPT_DATA        // (byte object) the members' data, this node's in, every node's out
	KeyGroupNotifyTerm      = C.PMIX_GROUP_NOTIFY_TERMINATION
	KeyGroupID              = C.PMIX_GROUP_ID

	// GroupConstructAbort fails a construct whose member died first.
	GroupConstructAbort Status = C.PMIX_GROUP_CONSTRUCT_ABORT
	// GroupMemberFailed tells members that another one ended without
	// leaving the group (PMIX_GROUP_NOTIFY_TERMINATION).
	GroupMemberFailed Status = C.PMIX_GROUP_MEMBER_FAILED
)

// Grouper is implemented by hosts that support PMIx groups: done gets what
// the library hands the local members (KeyGroupContextID,
// KeyGroupEndptData).
//
// local is how many of procs on this node the library counted in when it
// handed the operation on: libpmix 4.2.2 takes a member whose connection it
// lost out of the count (and does not wait for it), so fewer than the
// node's members means one ended without taking part.
type Grouper interface {
	Group(op GroupOp, grp string, procs []Proc, local int, directives []Info, done func([]Info, error)) error
}

//export goGroup
func goGroup(op C.int, grp *C.char, procs *C.pmix_proc_t, nprocs C.size_t, info *C.pmix_info_t, ninfo C.size_t,
	cb C.pmix_info_cbfunc_t, cbd unsafe.Pointer) C.pmix_status_t {
	g, ok := host().(Grouper)
	if !ok {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	name := C.GoString(grp)
	ps, in := procsFromC(procs, nprocs), fromC(info, ninfo)
	trace("group op %d %q %v", op, name, ps)
	local := int(C.prun_group_tracker_nlocal(cbd))
	done := infoDone(cb, cbd)
	if GroupOp(op) == GroupDestruct {
		inner := done
		done = func(out []Info, err error) {
			if err != nil {
				C.prun_group_keep_record(cbd)
			}
			inner(out, err)
		}
	}
	return accepted(g.Group(GroupOp(op), name, ps, local, in, done))
}

// grpcbfunc is the address of libpmix 4.2.2's static completion of a group
// operation (what it hands the host as the upcall's callback), found in the
// executable's symbol table: the shim completes with it a construct whose
// PMIX_TIMEOUT expired while the library still waited for a local member
// (shim.c explains why libpmix's own timer cannot be let fire). 0: not
// found (a stripped binary: the shim then uses the one the last group
// upcall came with, if any).
var grpcbfunc = sync.OnceValue(func() uintptr {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return 0
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return 0
	}
	var cb, init uint64
	n := 0
	for _, s := range syms {
		switch {
		case s.Name == "grpcbfunc" && elf.ST_TYPE(s.Info) == elf.STT_FUNC:
			cb = s.Value
			n++
		case s.Name == "PMIx_server_init" && elf.ST_TYPE(s.Info) == elf.STT_FUNC:
			init = s.Value
		}
	}
	if n != 1 || init == 0 {
		return 0
	}
	// The load bias (a position-independent executable) is the same for both.
	return uintptr(C.prun_server_init_addr()) - uintptr(init) + uintptr(cb)
})

// GroupMemberGone tells the library's side of groups that a local rank
// ended for good: a construct or destruct that waits on this node for it
// fails (PMIX_GROUP_CONSTRUCT_ABORT) instead of holding its other local
// members for ever (groups.c).
func (s *Server) GroupMemberGone(p Proc) {
	ns := C.CString(p.Nspace)
	defer C.free(unsafe.Pointer(ns))
	C.prun_group_member_gone(ns, C.uint32_t(p.Rank))
}

//export goGroupCompletion
func goGroupCompletion() C.uintptr_t { return C.uintptr_t(grpcbfunc()) }
