package pmixsrv

/*
#include <stdlib.h>
struct udev;
const char *munge_strerror(int e);
struct udev *udev_new(void);
struct udev *udev_unref(struct udev *u);
*/
import "C"

// lazyLibs calls through lazylibs.c's definitions: libmunge's text for
// EMUNGE_SNAFU and whether udev_new made a udev context (tests).
func lazyLibs() (mungeSnafu string, udev bool) {
	mungeSnafu = C.GoString(C.munge_strerror(1))
	if u := C.udev_new(); u != nil {
		C.udev_unref(u)
		udev = true
	}
	return mungeSnafu, udev
}
