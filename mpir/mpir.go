// Package mpir is prun's side of MPIR, the process-acquisition interface of
// parallel debuggers: the table of the job's processes (host, program, pid)
// in prun's own memory, where a debugger attached to prun finds it, and the
// MPIR_Breakpoint a debugger that started prun stops at once every process
// has started (and again if the job aborts).
package mpir

/*
#include <stdlib.h>
#include "mpir.h"
*/
import "C"

import (
	"sync"
	"unsafe"
)

// Proc is one process of the job, in rank order.
type Proc struct {
	Host, Exe string
	Pid       int
}

var (
	mu    sync.Mutex
	names = map[string]*C.char{} // host and program names, each stored once for good
)

// BeingDebugged says whether a debugger started prun and asked (by setting
// MPIR_being_debugged) to be told when the processes have started.
func BeingDebugged() bool { return C.prun_mpir_being_debugged() != 0 }

// Publish makes procs the table a debugger reads: the job's processes,
// then those of each job they spawned. It replaces the table published
// before; host and program names are stored once each, for the process's
// lifetime.
func Publish(procs []Proc) {
	mu.Lock()
	defer mu.Unlock()
	if len(procs) == 0 {
		return
	}
	size := C.size_t(unsafe.Sizeof(C.struct_MPIR_PROCDESC{}))
	table := unsafe.Slice((*C.struct_MPIR_PROCDESC)(C.calloc(C.size_t(len(procs)), size)), len(procs))
	intern := func(s string) *C.char {
		c, ok := names[s]
		if !ok {
			c = C.CString(s)
			names[s] = c
		}
		return c
	}
	for i, p := range procs {
		table[i].host_name = intern(p.Host)
		table[i].executable_name = intern(p.Exe)
		table[i].pid = C.int(p.Pid)
	}
	C.prun_mpir_publish(&table[0], C.int(len(procs)))
}

// SetPid updates entry i of the table, a process started again
// (--max-restarts).
func SetPid(i, pid int) {
	mu.Lock()
	defer mu.Unlock()
	C.prun_mpir_set_pid(C.int(i), C.int(pid))
}

// Spawned tells a debugger that started prun that the table is complete
// (again after a spawn, with the new processes at its end): it stops prun
// at MPIR_Breakpoint, attaches to the processes and lets prun go on, when
// this returns.
func Spawned() {
	C.prun_mpir_breakpoint(C.MPIR_DEBUG_SPAWNED, nil)
}

// Aborting tells the debugger that the job is ending in failure, and why.
func Aborting(why string) {
	C.prun_mpir_breakpoint(C.MPIR_DEBUG_ABORTING, C.CString(why))
}
