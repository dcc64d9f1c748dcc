#!/bin/sh
# simrsh.sh - a launch agent for simulated clusters: prun's daemons on this
# machine, each believing it is the node it was started for.
#
#   prun --rsh /path/to/simrsh.sh --hostfile HOSTS ...
#
# prun calls it as a remote shell: [-l USER] [-p PORT] HOST COMMAND (and
# so do mpiexec.hydra's -launcher-exec and mpirun's plm_rsh_agent). It
# runs COMMAND (prun's daemon command line) here, with TMPDIR set to a
# directory of HOST's own under $PRUN_SIM_DIR (default: /tmp/prun-sim), so
# each daemon has its own session directory and PMIx server rendezvous
# files. The daemon learns its node name from its bootstrap, not from the
# machine: the daemons, the tree and the control plane are the real ones;
# only the network and the machine are shared.
# ssh's options before the host ([-l USER] [-p PORT], Hydra's -x, ...) are
# skipped; the words after the host are the command, as ssh joins them.
while [ $# -gt 0 ]; do
	case $1 in
	-l | -p | -o) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] || { echo "usage: simrsh.sh [-l USER] [-p PORT] HOST COMMAND..." >&2; exit 2; }
host=$1
shift
# Failures for tests: hosts listed in PRUN_SIM_REFUSE refuse the
# connection as ssh would; those in PRUN_SIM_HANG never start a daemon (the
# session lasts until its stdin closes); PRUN_SIM_DELAY="HOST:SECONDS ..."
# starts HOST's daemon that much later (unless its parent, whose session
# this is, ends first: an SSH session's command would get SIGHUP).
for h in $PRUN_SIM_REFUSE; do
	if [ "$h" = "$host" ]; then
		echo "ssh: connect to host $host port 22: Connection refused" >&2
		exit 255
	fi
done
for h in $PRUN_SIM_HANG; do
	[ "$h" = "$host" ] && exec cat >/dev/null
done
for d in $PRUN_SIM_DELAY; do
	[ "${d%%:*}" = "$host" ] || continue
	n=${d#*:}
	while [ "$n" -gt 0 ]; do
		kill -0 "$PPID" 2>/dev/null || exit 255
		sleep 1
		n=$((n - 1))
	done
done
dir=${PRUN_SIM_DIR:-/tmp/prun-sim}/$host
mkdir -p "$dir" || exit 1
TMPDIR=$dir
export TMPDIR
exec sh -c "$*"
