package pmixsrv

/*
#include "shim.h"
*/
import "C"

import "unsafe"

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
type Grouper interface {
	Group(op GroupOp, grp string, procs []Proc, directives []Info, done func([]Info, error)) error
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
	return accepted(g.Group(GroupOp(op), name, ps, in, infoDone(cb, cbd)))
}
