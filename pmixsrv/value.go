package pmixsrv

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Rank is a PMIx rank; RankWildcard names a whole namespace.
type Rank uint32

const (
	RankWildcard Rank = C.PMIX_RANK_WILDCARD
	RankUndef    Rank = C.PMIX_RANK_UNDEF
)

// Proc names a process: namespace and rank.
type Proc struct {
	Nspace string
	Rank   Rank
}

func (p Proc) String() string {
	if p.Rank == RankWildcard {
		return p.Nspace + ":*"
	}
	return fmt.Sprintf("%s:%d", p.Nspace, p.Rank)
}

// Info is a key and a value. Value is one of: string, bool, uint8, uint16,
// uint32, uint64, int, int32, int64, float64, Rank, Size, Pid, Status,
// DataRange, Persistence, NodeMap, ProcMap, []byte, Proc, []Proc, []Info, []ProcInfo.
type Info struct {
	Key   string
	Value any
}

// Distinct Go types for PMIx types that share a C representation.
type (
	Size        uint64
	Pid         int32
	DataRange   int32
	Persistence int32
	// JobState is a pmix_job_state_t (PMIX_QUERY_JOB_STATUS's answer).
	JobState uint8
	// NodeMap is a comma list of node names; it is registered as the
	// PMIX_REGEX that PMIx_generate_regex makes of it.
	NodeMap string
	// ProcMap is the ranks of each node, nodes separated by ';' and ranks by
	// ','; it is registered as the PMIX_REGEX that PMIx_generate_ppn makes.
	ProcMap string
)

// Process states for ProcInfo.State (pmix_proc_state_t).
const (
	ProcStatePrepped    = C.PMIX_PROC_STATE_PREPPED
	ProcStateRunning    = C.PMIX_PROC_STATE_RUNNING
	ProcStateTerminated = C.PMIX_PROC_STATE_TERMINATED
)

// Job states (PMIX_QUERY_JOB_STATUS).
const (
	JobStateLaunchUnderway JobState = C.PMIX_JOB_STATE_LAUNCH_UNDERWAY
	JobStateRunning        JobState = C.PMIX_JOB_STATE_RUNNING
	JobStateTerminated     JobState = C.PMIX_JOB_STATE_TERMINATED
	JobStateTerminatedErr  JobState = C.PMIX_JOB_STATE_TERMINATED_WITH_ERROR
)

// ProcInfo is one row of a process table (PMIX_QUERY_PROC_TABLE).
type ProcInfo struct {
	Proc     Proc
	Host     string
	Exe      string
	Pid      int
	ExitCode int
	State    int
}

// Lookup returns the first value stored under key.
func Lookup(infos []Info, key string) (any, bool) {
	for _, in := range infos {
		if in.Key == key {
			return in.Value, true
		}
	}
	return nil, false
}

// cstrings frees the C strings made while building one array. free has a
// pointer receiver: `defer cs.free()` then frees what str adds after the
// defer (with a value receiver it froze the empty slice, and every string
// leaked: about 100 per job registered, a DVM's memory growing per job).
type cstrings []*C.char

func (cs *cstrings) str(s string) *C.char {
	p := C.CString(s)
	*cs = append(*cs, p)
	return p
}

func (cs *cstrings) free() {
	for _, p := range *cs {
		C.free(unsafe.Pointer(p))
	}
	*cs = nil
}

// toC builds a C info array the caller owns (free with C.prun_info_free).
func toC(infos []Info) (*C.pmix_info_t, C.size_t, error) {
	if len(infos) == 0 {
		return nil, 0, nil
	}
	var cs cstrings
	defer cs.free()
	a := C.prun_info_create(C.size_t(len(infos)))
	for i, in := range infos {
		if err := setInfo(a, C.size_t(i), in, &cs); err != nil {
			C.prun_info_free(a, C.size_t(len(infos)))
			return nil, 0, err
		}
	}
	return a, C.size_t(len(infos)), nil
}

func setInfo(a *C.pmix_info_t, i C.size_t, in Info, cs *cstrings) error {
	k := cs.str(in.Key)
	switch v := in.Value.(type) {
	case string:
		C.prun_info_string(a, i, k, cs.str(v))
	case NodeMap:
		if rc := C.prun_info_regex(a, i, k, cs.str(string(v)), 0); rc != C.PMIX_SUCCESS {
			return fmt.Errorf("PMIx_generate_regex %q: %w", string(v), Status(rc))
		}
	case ProcMap:
		if rc := C.prun_info_regex(a, i, k, cs.str(string(v)), 1); rc != C.PMIX_SUCCESS {
			return fmt.Errorf("PMIx_generate_ppn %q: %w", string(v), Status(rc))
		}
	case bool:
		b := 0
		if v {
			b = 1
		}
		C.prun_info_bool(a, i, k, C.int(b))
	case uint8:
		C.prun_info_uint(a, i, k, C.uint64_t(v), C.PMIX_UINT8)
	case uint16:
		C.prun_info_uint(a, i, k, C.uint64_t(v), C.PMIX_UINT16)
	case uint32:
		C.prun_info_uint(a, i, k, C.uint64_t(v), C.PMIX_UINT32)
	case uint64:
		C.prun_info_uint(a, i, k, C.uint64_t(v), C.PMIX_UINT64)
	case Rank:
		C.prun_info_uint(a, i, k, C.uint64_t(v), C.PMIX_PROC_RANK)
	case Size:
		C.prun_info_uint(a, i, k, C.uint64_t(v), C.PMIX_SIZE)
	case int:
		C.prun_info_int(a, i, k, C.int64_t(v), C.PMIX_INT)
	case int32:
		C.prun_info_int(a, i, k, C.int64_t(v), C.PMIX_INT32)
	case int64:
		C.prun_info_int(a, i, k, C.int64_t(v), C.PMIX_INT64)
	case Pid:
		C.prun_info_int(a, i, k, C.int64_t(v), C.PMIX_PID)
	case Status:
		C.prun_info_int(a, i, k, C.int64_t(v), C.PMIX_STATUS)
	case DataRange:
		C.prun_info_int(a, i, k, C.int64_t(v), C.PMIX_DATA_RANGE)
	case Persistence:
		C.prun_info_int(a, i, k, C.int64_t(v), C.PMIX_PERSIST)
	case JobState:
		C.prun_info_int(a, i, k, C.int64_t(v), C.PMIX_JOB_STATE)
	case float64:
		C.prun_info_double(a, i, k, C.double(v))
	case float32:
		C.prun_info_float(a, i, k, C.float(v))
	case []byte:
		var p *C.char
		if len(v) > 0 {
			p = (*C.char)(unsafe.Pointer(&v[0]))
		}
		C.prun_info_bytes(a, i, k, p, C.size_t(len(v)))
	case Proc:
		C.prun_info_proc(a, i, k, cs.str(v.Nspace), C.uint32_t(v.Rank))
	case []Proc:
		arr := C.prun_procs_create(C.size_t(len(v)))
		for j, p := range v {
			C.prun_procs_set(arr, C.size_t(j), cs.str(p.Nspace), C.uint32_t(p.Rank))
		}
		C.prun_info_procs(a, i, k, arr, C.size_t(len(v)))
	case []Info:
		sub, n, err := toC(v)
		if err != nil {
			return err
		}
		C.prun_info_infos(a, i, k, sub, n)
	case []ProcInfo:
		arr := C.prun_procinfo_create(C.size_t(len(v)))
		for j, p := range v {
			C.prun_procinfo_set(arr, C.size_t(j), cs.str(p.Proc.Nspace), C.uint32_t(p.Proc.Rank),
				cs.str(p.Host), cs.str(p.Exe), C.int(p.Pid), C.int(p.ExitCode), C.int(p.State))
		}
		C.prun_info_procinfos(a, i, k, arr, C.size_t(len(v)))
	default:
		return fmt.Errorf("pmixsrv: %s: unsupported value type %T", in.Key, in.Value)
	}
	return nil
}

// fromC copies a C info array into Go. Values of types prun has no use for
// are kept as nil so that their keys still show.
func fromC(a *C.pmix_info_t, n C.size_t) []Info {
	if a == nil || n == 0 {
		return nil
	}
	arr := unsafe.Slice(a, int(n))
	out := make([]Info, len(arr))
	for i := range arr {
		out[i] = Info{Key: C.GoString(&arr[i].key[0]), Value: valueFromC(&arr[i].value)}
	}
	return out
}

func valueFromC(v *C.pmix_value_t) any {
	switch t := C.prun_value_type(v); t {
	case C.PMIX_STRING:
		if s := C.prun_value_string(v); s != nil {
			return C.GoString(s)
		}
		return ""
	case C.PMIX_BOOL:
		return C.prun_value_uint(v) != 0
	case C.PMIX_UINT8:
		return uint8(C.prun_value_uint(v))
	case C.PMIX_UINT16:
		return uint16(C.prun_value_uint(v))
	case C.PMIX_UINT32:
		return uint32(C.prun_value_uint(v))
	case C.PMIX_UINT64, C.PMIX_UINT:
		return uint64(C.prun_value_uint(v))
	case C.PMIX_PROC_RANK:
		return Rank(C.prun_value_uint(v))
	case C.PMIX_SIZE:
		return Size(C.prun_value_uint(v))
	case C.PMIX_INT, C.PMIX_INT8, C.PMIX_INT16:
		return int(C.prun_value_int(v))
	case C.PMIX_INT32:
		return int32(C.prun_value_int(v))
	case C.PMIX_INT64:
		return int64(C.prun_value_int(v))
	case C.PMIX_PID:
		return Pid(C.prun_value_int(v))
	case C.PMIX_STATUS:
		return Status(C.prun_value_int(v))
	case C.PMIX_DATA_RANGE:
		return DataRange(C.prun_value_int(v))
	case C.PMIX_PERSIST:
		return Persistence(C.prun_value_int(v))
	case C.PMIX_FLOAT, C.PMIX_DOUBLE:
		return float64(C.prun_value_double(v))
	case C.PMIX_BYTE_OBJECT:
		var n C.size_t
		p := C.prun_value_bytes(v, &n)
		return C.GoBytes(unsafe.Pointer(p), C.int(n))
	case C.PMIX_PROC:
		if p := C.prun_value_proc(v); p != nil {
			return procFromC(p)
		}
		return Proc{}
	case C.PMIX_DATA_ARRAY:
		var dt C.pmix_data_type_t
		var n C.size_t
		arr := C.prun_value_darray(v, &dt, &n)
		switch {
		case arr == nil:
			return nil
		case dt == C.PMIX_INFO:
			return fromC((*C.pmix_info_t)(arr), n)
		case dt == C.PMIX_PROC:
			return procsFromC((*C.pmix_proc_t)(arr), n)
		}
		return nil
	default:
		return nil
	}
}

func procFromC(p *C.pmix_proc_t) Proc {
	return Proc{Nspace: C.GoString(&p.nspace[0]), Rank: Rank(p.rank)}
}

func procsFromC(a *C.pmix_proc_t, n C.size_t) []Proc {
	if a == nil || n == 0 {
		return nil
	}
	arr := unsafe.Slice(a, int(n))
	out := make([]Proc, len(arr))
	for i := range arr {
		out[i] = procFromC(&arr[i])
	}
	return out
}

func stringsFromC(keys **C.char) []string {
	var out []string
	if keys == nil {
		return nil
	}
	for p := keys; *p != nil; p = (**C.char)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(*p))) {
		out = append(out, C.GoString(*p))
	}
	return out
}

// roundTrip converts infos to a C array and back. It exists for the tests:
// every value type the host hands the library must survive the trip.
func roundTrip(in []Info) ([]Info, error) {
	a, n, err := toC(in)
	if err != nil {
		return nil, err
	}
	defer C.prun_info_free(a, n)
	return fromC(a, n), nil
}
