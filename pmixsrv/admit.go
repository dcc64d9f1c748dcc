package pmixsrv

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"

	"prun/internal/peercred"
)

// goAdmitPeer decides, for __wrap_accept in shim.c, whether a connection
// to the library's listener may reach it: its peer's socket must belong to
// this process's user or to root (peercred.Admit), as the kernel says, not
// as the peer claims. Everything else is closed before the library reads a
// byte: a stranger gets neither a tool's session nor a rank's identity, so
// no query, job control, spawn, log or event of theirs ever reaches the
// Host. Runs on the library's listener thread, once per connection.
//
//export goAdmitPeer
func goAdmitPeer(fd C.int) C.int {
	p, err := peercred.OfFD(int(fd))
	if err == nil && peercred.Admit(p) {
		return 1
	}
	why := fmt.Sprintf("not the user of this server's jobs (uid %d) nor root", os.Geteuid())
	if err != nil {
		why = "its user cannot be told: " + err.Error()
	}
	trace("refused a connection from %v: %s", p, why)
	if errors.Is(err, peercred.ErrGone) {
		return 0 // closed already: nobody to serve, nobody to name
	}
	mu.Lock()
	var refused func(peercred.Peer, string)
	if active != nil {
		refused = active.refused
	}
	mu.Unlock()
	if refused != nil {
		refused(p, why)
	}
	return 0
}

// goPeerUID is the kernel's owner of the peer of fd, a connection the
// library accepted, for its native authentication (shim.c,
// pmix_host_socket_uid); -1 when it cannot be told.
//
//export goPeerUID
func goPeerUID(fd C.int) C.long {
	p, err := peercred.OfFD(int(fd))
	if err != nil {
		return -1
	}
	return C.long(p.UID)
}
