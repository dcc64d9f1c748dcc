/* What this process's C heap has in use (pmixsrv.CHeapInUse): glibc's
 * mallinfo2 counters of small blocks and mmap'ed ones.
 *
 * mallinfo2 is glibc 2.33's. Built against an older glibc (the release
 * build: Debian 11's 2.31, so that prun starts on every glibc since), it is
 * looked up at its first use: a newer glibc's counters are size_t, and only
 * where it is missing does mallinfo's int counters serve (exact below 4 GiB,
 * read as unsigned). */
#define _GNU_SOURCE
#include <malloc.h>

unsigned long long prun_c_heap_in_use(void);

#if __GLIBC_PREREQ(2, 33)

unsigned long long prun_c_heap_in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return (unsigned long long)m.uordblks + m.hblkhd;
}

#else

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

/* glibc 2.33's struct mallinfo2: struct mallinfo's fields, as size_t. */
struct prun_mallinfo2 {
    size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};

static pthread_once_t mi2_once = PTHREAD_ONCE_INIT;
static struct prun_mallinfo2 (*mi2)(void);

static void mi2_load(void)
{
    mi2 = (struct prun_mallinfo2(*)(void))dlsym(RTLD_DEFAULT, "mallinfo2");
}

unsigned long long prun_c_heap_in_use(void)
{
    pthread_once(&mi2_once, mi2_load);
    if (mi2 != NULL) {
        struct prun_mallinfo2 m = mi2();
        return (unsigned long long)m.uordblks + m.hblkhd;
    }
    struct mallinfo m = mallinfo();
    return (unsigned long long)(unsigned int)m.uordblks + (unsigned int)m.hblkhd;
}

#endif
