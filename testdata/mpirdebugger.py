# mpirdebugger.py: a minimal parallel debugger for prun's tests, a gdb
# script (gdb -batch -x mpirdebugger.py --args prun ...). It starts prun as
# TotalView or DDT would, through MPIR: sets MPIR_being_debugged, stops at
# MPIR_Breakpoint, reads MPIR_proctable and attaches (another gdb) to each
# process to see where it is, then lets prun go on and waits for it.
#
# By default gdb runs in non-stop mode: only prun's thread at the breakpoint
# stops and the rest of prun goes on serving the processes, so that one not
# held for the debugger runs on meanwhile (MPIR_TEST_WAIT seconds). With
# MPIR_TEST_ALLSTOP=1 it runs prun to its end in all-stop mode, reporting
# every stop at the breakpoint (a job that aborts stops there again).
import os
import subprocess
import time

import gdb

allstop = os.environ.get("MPIR_TEST_ALLSTOP") == "1"
gdb.execute("set pagination off")
gdb.execute("set confirm off")
if not allstop:
    gdb.execute("set non-stop on")
gdb.execute("handle SIGURG nostop noprint pass")
gdb.execute("handle SIGPIPE nostop noprint pass")
gdb.execute("starti")
gdb.execute("set var MPIR_being_debugged = 1")
gdb.execute("break MPIR_Breakpoint")


def report():
    state = int(gdb.parse_and_eval("MPIR_debug_state"))
    n = int(gdb.parse_and_eval("MPIR_proctable_size"))
    print("mpir: state %d, %d processes" % (state, n))
    if state == 2:
        print("mpir: aborting: %s" % gdb.parse_and_eval("MPIR_debug_abort_string").string())
        return
    for i in range(n):
        e = gdb.parse_and_eval("MPIR_proctable[%d]" % i)
        pid = int(e["pid"])
        bt = subprocess.run(["gdb", "-batch", "-p", str(pid), "-ex", "bt"],
                            capture_output=True, text=True).stdout
        print("mpir: rank %d host %s exe %s pid %d %s" % (
            i, e["host_name"].string(), e["executable_name"].string(), pid,
            "held" if "PMIx_Init" in bt else "running"))


if allstop:
    gdb.execute("continue")
    while gdb.selected_inferior().pid != 0:
        report()
        gdb.execute("continue")
else:
    gdb.execute("continue")
    time.sleep(float(os.environ.get("MPIR_TEST_WAIT", "1")))
    report()
    pid = gdb.selected_inferior().pid
    gdb.execute("delete")
    gdb.execute("detach")
    _, status = os.waitpid(pid, 0)
    print("mpir: prun exited %d" % os.waitstatus_to_exitcode(status))
