// The MPIR process-acquisition interface (MPI Forum, "The MPIR Process
// Acquisition Interface", 2018): symbols a parallel debugger (TotalView,
// Linaro DDT, STAT, a gdb script) reads and sets in the starter's memory.
// They must keep these exact names and C types.
#include <stdlib.h>

#include "mpir.h"

struct MPIR_PROCDESC *volatile MPIR_proctable = 0;
volatile int MPIR_proctable_size = 0;
volatile int MPIR_being_debugged = 0; // set by a debugger that starts prun
volatile int MPIR_debug_state = 0;
char *MPIR_debug_abort_string = 0;
int MPIR_i_am_starter = 1;        // prun is not itself a process of the job
int MPIR_partial_attach_ok = 1;   // a debugger may attach to some ranks only
int MPIR_force_to_main = 0;
int MPIR_acquired_pre_main = 0;
int MPIR_ignore_queues = 0;
char MPIR_executable_path[256];
char MPIR_server_arguments[1024];
char MPIR_attach_fifo[256];

// The debugger's breakpoint: it must stay a call the compiler cannot
// remove or inline.
__attribute__((noinline, used)) void MPIR_Breakpoint(void) { __asm__ __volatile__("" ::: "memory"); }

int prun_mpir_being_debugged(void) { return MPIR_being_debugged; }

// A table grows as jobs are spawned: a debugger that stops prun at any
// instruction here sees the old table whole, or the new one (empty for a
// moment), never freed memory.
void prun_mpir_publish(struct MPIR_PROCDESC *table, int n) {
    struct MPIR_PROCDESC *old = MPIR_proctable;
    MPIR_proctable_size = 0;
    MPIR_proctable = table;
    MPIR_proctable_size = n;
    free(old);
}

void prun_mpir_set_pid(int i, int pid) {
    if (i >= 0 && i < MPIR_proctable_size)
        MPIR_proctable[i].pid = pid;
}

void prun_mpir_breakpoint(int state, char *abort_string) {
    MPIR_debug_state = state;
    MPIR_debug_abort_string = abort_string;
    MPIR_Breakpoint();
}
