package pmixsrv

/*
#include "pin.h"
*/
import "C"

// The OpenPMIx the server is built on, as openpmix/build.sh wrote it into
// prun_pmix_pin.h (pin.h refuses to compile against any other), for
// prun --version.
const (
	PinRelease = C.PRUN_PMIX_RELEASE // OpenPMIx's release: "4.2.2"
	PinSource  = C.PRUN_PMIX_SOURCE  // the source package built: "pmix 4.2.2-1+deb12u1 (bookworm)"
	PinPatches = C.PRUN_PMIX_PATCHES // prun's patches on it (openpmix/patches), by name, space-separated
)
