/* The OpenPMIx this package is written for: openpmix/build.sh's pinned
 * release with prun's patches (openpmix/pin, openpmix/patches). leaks.c,
 * groups.c and shim.c read that release's private structures and rely on
 * its patches, so any other library fails the build here, by name, rather
 * than at run time. */
#ifndef PRUN_PMIXSRV_PIN_H
#define PRUN_PMIXSRV_PIN_H

#if !__has_include(<prun_pmix_pin.h>)
#error "pmixsrv needs the OpenPMIx that openpmix/build.sh pins and patches: build prun with make (it builds that library once into ~/.cache/prun and points pkg-config at it)"
#endif
#include <prun_pmix_pin.h>
#include <pmix_version.h>

#if PMIX_VERSION_MAJOR != 4 || PMIX_VERSION_MINOR != 2 || PMIX_VERSION_RELEASE != 2
#error "pmixsrv reads OpenPMIx 4.2.2's private structures, and pkg-config's prun-pmix is another release: rebuild it with make"
#endif
/* 1 group replies by client version, 2 group leave, 3 invite timeout, 4 the
 * kernel's uid of a TCP peer (pmix_host_socket_uid, shim.c) */
#if PRUN_PMIX_PATCHLEVEL < 4
#error "the OpenPMIx that pkg-config's prun-pmix names lacks some of openpmix/patches: rebuild it with make"
#endif

#endif
