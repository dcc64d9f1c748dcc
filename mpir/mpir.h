#ifndef PRUN_MPIR_H
#define PRUN_MPIR_H

struct MPIR_PROCDESC {
    char *host_name;
    char *executable_name;
    int pid;
};

#define MPIR_DEBUG_SPAWNED 1
#define MPIR_DEBUG_ABORTING 2

int prun_mpir_being_debugged(void);
void prun_mpir_publish(struct MPIR_PROCDESC *table, int n);
void prun_mpir_set_pid(int i, int pid);
void prun_mpir_breakpoint(int state, char *abort_string);

#endif
