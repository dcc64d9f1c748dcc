/* libmunge and libudev, loaded at their first use rather than at prun's.
 *
 * The static libpmix and libhwloc that prun links call them in two places
 * only: libpmix's munge security module, which asks munged for a credential
 * as a PMIx server starts, and hwloc's udev lookups of I/O devices, which
 * prun never asks for. Linked as shared libraries they were loaded and
 * relocated at every start of every prun process (0.13 ms each time here),
 * a DVM's submitter's too, which starts no server. These definitions of the
 * few functions the archives call load the library at the first call
 * instead. Where it cannot be loaded (a node that prun copied itself to,
 * without munge or udev) prun behaves as on a node where munged or udev is
 * missing: munge's calls fail with EMUNGE_SNAFU and udev_new returns NULL,
 * which both callers handle. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

/* munge.h's types, by their ABI: an enum and an opaque pointer. */
typedef int munge_err_t;
typedef struct munge_ctx *munge_ctx_t;
#define MUNGE_SNAFU 1 /* EMUNGE_SNAFU: "Internal error" */

static struct {
    pthread_once_t once;
    munge_err_t (*encode)(char **, munge_ctx_t, const void *, int);
    munge_err_t (*decode)(const char *, munge_ctx_t, void **, int *, uid_t *, gid_t *);
    const char *(*strerror)(munge_err_t);
} munge = {PTHREAD_ONCE_INIT, NULL, NULL, NULL};

/* dlsyms loads lib and finds each of names in it, into fns: all of them
 * (1) or none (0). */
static int dlsyms(const char *lib, const char *const names[], void *fns[], size_t n)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if ((fns[i] = dlsym(h, names[i])) == NULL) {
            return 0;
        }
    }
    return 1;
}

static void munge_load(void)
{
    static const char *const names[] = {"munge_encode", "munge_decode", "munge_strerror"};
    void *f[3];
    if (dlsyms("libmunge.so.2", names, f, 3)) {
        munge.encode = f[0];
        munge.decode = f[1];
        munge.strerror = f[2];
    }
}

munge_err_t munge_encode(char **cred, munge_ctx_t ctx, const void *buf, int len)
{
    pthread_once(&munge.once, munge_load);
    if (munge.encode == NULL) {
        if (cred != NULL) {
            *cred = NULL;
        }
        return MUNGE_SNAFU;
    }
    return munge.encode(cred, ctx, buf, len);
}

munge_err_t munge_decode(const char *cred, munge_ctx_t ctx, void **buf, int *len, uid_t *uid, gid_t *gid)
{
    pthread_once(&munge.once, munge_load);
    if (munge.decode == NULL) {
        if (buf != NULL) {
            *buf = NULL;
        }
        if (len != NULL) {
            *len = 0;
        }
        return MUNGE_SNAFU;
    }
    return munge.decode(cred, ctx, buf, len, uid, gid);
}

const char *munge_strerror(munge_err_t e)
{
    pthread_once(&munge.once, munge_load);
    if (munge.strerror == NULL) {
        return "libmunge.so.2 cannot be loaded";
    }
    return munge.strerror(e);
}

/* libudev.h's types are opaque pointers. */
struct udev;
struct udev_device;

static struct {
    pthread_once_t once;
    struct udev *(*new_)(void);
    struct udev *(*unref)(struct udev *);
    struct udev_device *(*device_new)(struct udev *, const char *, const char *);
    const char *(*device_property)(struct udev_device *, const char *);
    struct udev_device *(*device_unref)(struct udev_device *);
} udev = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL, NULL};

/* All or nothing: without udev_new no udev object exists, and no other
 * call comes. */
static void udev_load(void)
{
    static const char *const names[] = {"udev_new", "udev_unref", "udev_device_new_from_subsystem_sysname",
                                        "udev_device_get_property_value", "udev_device_unref"};
    void *f[5];
    if (dlsyms("libudev.so.1", names, f, 5)) {
        udev.new_ = f[0];
        udev.unref = f[1];
        udev.device_new = f[2];
        udev.device_property = f[3];
        udev.device_unref = f[4];
    }
}

struct udev *udev_new(void)
{
    pthread_once(&udev.once, udev_load);
    return udev.new_ != NULL ? udev.new_() : NULL;
}

/* The calls below take objects only udev_new's library made. */
struct udev *udev_unref(struct udev *u)
{
    return u != NULL ? udev.unref(u) : NULL;
}

struct udev_device *udev_device_new_from_subsystem_sysname(struct udev *u, const char *subsystem, const char *sysname)
{
    return u != NULL ? udev.device_new(u, subsystem, sysname) : NULL;
}

const char *udev_device_get_property_value(struct udev_device *d, const char *key)
{
    return d != NULL ? udev.device_property(d, key) : NULL;
}

struct udev_device *udev_device_unref(struct udev_device *d)
{
    return d != NULL ? udev.device_unref(d) : NULL;
}
