// Command gofloor is testdata/pmixfloor.c, the least a launcher hosting a
// PMIx server can do to run N copies of a program, compiled into a Go
// program: the same C code and libraries, started by the Go runtime. The
// launch benchmark runs it beside the C floor, prun and Hydra, so that what
// the Go runtime alone costs a launch on the machine at hand is measured
// rather than argued: prun is a Go program that hosts libpmix in its own
// process, as the brief asks, and cannot start faster than this.
//
//	go build -o gofloor ./bench/tools/gofloor
//	./gofloor TOPOLOGY.xml|- N PROGRAM [ARGS...]
//
// It widens its threads' timer slack as prun does (prun/internal/timerslack),
// without which the runtime's sysmon wakes every 70-80 us during the C
// call and the floor would not be the least a Go host spends.
package main

/*
#cgo pkg-config: pmix
#cgo CFLAGS: -I${SRCDIR}/../../../testdata
#define main pmixfloor_main
#include "pmixfloor.c"
#undef main
*/
import "C"

import (
	"os"
	"unsafe"

	_ "prun/internal/timerslack"
)

func main() {
	argv := make([]*C.char, len(os.Args)+1) // NULL-terminated, as C's argv
	for i, a := range os.Args {
		argv[i] = C.CString(a)
	}
	os.Exit(int(C.pmixfloor_main(C.int(len(os.Args)), (**C.char)(unsafe.Pointer(&argv[0])))))
}
