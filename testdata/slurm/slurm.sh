#!/bin/bash
# slurm.sh up|check|down DIR : a 3-node Slurm cluster (Debian's Slurm 22.05) on this machine, for
# prun's tests (internal/slurmtest drives it; see the recipe it follows: slurmctld and munged on
# the host, one slurmd per node in its own network, UTS and mount namespace).
#
#   nodes        prun-s1..prun-s3: network namespaces of those names, 198.18.1.1-3 on bridge
#                prunbrs0 (the host is 198.18.1.254 there); names and addresses differ from
#                internal/cluster's (prun-hK, prunbr0, 198.18.0.0/24), whose tests run meanwhile.
#   state        everything under DIR (config, munge key and socket, spool, logs, state, each
#                node's TmpFS); `down DIR` removes it all. Nothing outside DIR is written but
#                /etc/netns/prun-sK (the nodes' /etc/hosts) and the network objects.
#   use          SLURM_CONF=DIR/etc/slurm.conf salloc -N 3 ... (/etc/slurm is left alone)
#   concurrency  the caller holds /run/lock/prun-cluster.lock (internal/cluster's lock): interface
#                churn breaks UCX start-up of tests on the host (internal/cluster.Quiet).
#
# Traps (measured): `ip netns exec` remounts /sys and hides /sys/fs/cgroup, and slurmd then
# dies "Unable to initialize cgroup plugin": nodes are entered with nsenter + unshare. Debian's
# slurmd is not made for several per host: spool, pid, log and TmpFS carry %n (the pmix plugin
# expands %n in TmpFS too; without it the nodes collide on /tmp/spmix_appdir_*).
# SlurmdTimeout is short so that a node whose slurmd died is declared DOWN within seconds.
set -euo pipefail
cmd=${1:-}; C=${2:-}
[ -n "$C" ] && [ "${C#/}" != "$C" ] || { echo "usage: $0 up|check|down ABSOLUTE-DIR" >&2; exit 2; }
CONF=$C/etc/slurm.conf
N=3
NODES=$(seq -f 'prun-s%g' 1 $N)
BR=prunbrs0 NET=198.18.1 HOSTIP=198.18.1.254
CTL=$(hostname -s)
export SLURM_CONF=$CONF
ipof() { echo "$NET.${1#prun-s}"; }   # prun-s2 -> 198.18.1.2

wait_for() {  # wait_for SECONDS CMD... : poll until CMD succeeds
  local t=$(( $1 * 10 )); shift
  until "$@" >/dev/null 2>&1; do ((t--)) || return 1; sleep 0.1; done
}
nidle() { [ "$(sinfo -h -N -t idle -o %N | sort -u | wc -l)" = $N ]; }

up() {
  for b in slurmctld slurmd srun munged mungekey; do
    command -v $b >/dev/null || { echo "$b missing: apt-get install slurmctld slurmd slurm-client munge" >&2; exit 1; }
  done
  clean_net   # leftovers of a run that died without `down` (the caller holds the lock)
  mkdir -p $C/etc $C/run $C/log $C/state $C/munge
  for n in $NODES; do mkdir -p $C/spool/$n $C/tmp/$n; chmod 1777 $C/tmp/$n; done
  chmod 755 $C $C/munge

  mungekey -c -k $C/munge/munge.key
  munged -S $C/munge/munge.socket --key-file=$C/munge/munge.key --pid-file=$C/munge/munged.pid \
         --log-file=$C/munge/munged.log --seed-file=$C/munge/munged.seed

  ip link add $BR type bridge
  ip addr add $HOSTIP/24 dev $BR
  ip link set $BR up
  for n in $NODES; do
    ip netns add $n
    ip link add v$n type veth peer name eth0 netns $n
    ip link set v$n master $BR up
    ip -n $n addr add "$(ipof $n)/24" dev eth0
    ip -n $n link set eth0 up
    ip -n $n link set lo up
    mkdir -p /etc/netns/$n
    { printf '127.0.0.1 localhost\n::1 localhost\n%s %s\n' $HOSTIP "$CTL"
      for m in $NODES; do echo "$(ipof $m) $m"; done; } > /etc/netns/$n/hosts
  done

  cat > $CONF <<EOF
ClusterName=prunslurm
SlurmctldHost=$CTL($HOSTIP)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$C/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$C/state
SlurmctldPidFile=$C/run/slurmctld.pid
SlurmctldLogFile=$C/log/slurmctld.log
SlurmdPidFile=$C/run/slurmd-%n.pid
SlurmdSpoolDir=$C/spool/%n
SlurmdLogFile=$C/log/slurmd-%n.log
TmpFS=$C/tmp/%n
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdTimeout=5
KillWait=5
MailProg=/bin/true
NodeName=prun-s[1-$N] NodeAddr=$NET.[1-$N] CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  slurmctld -f $CONF
  wait_for 20 scontrol ping || { echo "slurmctld not up, see $C/log" >&2; exit 1; }
  for n in $NODES; do
    nsenter --net=/run/netns/$n unshare --uts --mount sh -c \
      "mount --bind /etc/netns/$n/hosts /etc/hosts && hostname $n && exec slurmd -f $CONF -N $n"
  done
  wait_for 30 nidle || { sinfo; echo "nodes not idle, see $C/log" >&2; exit 1; }
}

check() {
  set -x
  sinfo
  srun -N $N hostname | sort
  salloc -N $N sh -c 'echo $SLURM_JOB_NODELIST; srun hostname | sort'
}

# clean_net removes the network objects and namespaces (and whatever runs in them).
clean_net() {
  local pids
  pids=$(for n in $NODES; do [ -e /run/netns/$n ] && ip netns pids $n; done || true)
  [ -z "$pids" ] || kill -9 $pids 2>/dev/null || :
  for n in $NODES; do
    ip link del v$n 2>/dev/null || :; ip netns del $n 2>/dev/null || :; rm -rf /etc/netns/$n
  done
  rmdir /etc/netns 2>/dev/null || :
  ip link del $BR 2>/dev/null || :
}

down() {
  set +e
  if [ -e $CONF ] && scontrol ping >/dev/null 2>&1; then
    squeue -h -o %i | xargs -r scancel
  fi
  # everything in the nodes (slurmd, slurmstepd, tasks), then the host's daemons
  local pids alive p i
  pids=$(for n in $NODES; do [ -e /run/netns/$n ] && ip netns pids $n; done)
  pids="$pids $(cat $C/run/slurmctld.pid $C/munge/munged.pid 2>/dev/null)"
  for p in $pids; do kill "$p" 2>/dev/null; done
  for i in $(seq 50); do
    alive=; for p in $pids; do [ -d /proc/$p ] && alive="$alive $p"; done
    [ -z "$alive" ] && break; sleep 0.1
  done
  [ -n "$alive" ] && kill -9 $alive 2>/dev/null
  clean_net
  rm -rf $C/etc $C/run $C/log $C/state $C/munge $C/spool $C/tmp
  return 0
}

case "$cmd" in
  up) up ;; check) check ;; down) down ;;
  *) echo "usage: $0 up|check|down DIR" >&2; exit 2 ;;
esac
