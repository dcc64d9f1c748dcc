#!/bin/bash
# cluster.sh — a multi-node test cluster on one machine, for prun's tests.
#
#   cluster.sh up N DIR    build test hosts prun-h1..prun-hN (1 <= N <= 253)
#   cluster.sh down [DIR]  remove every test host (DIR is not needed, nor touched)
#
# Each host is a network namespace prun-hK with
#   - address 198.18.0.K/24 on eth0 (RFC 2544 benchmark range), a veth whose
#     root end prunvK is a port of the bridge prunbr0 (198.18.0.254, the
#     launcher's address as seen from the hosts), and loopback up;
#   - its own sshd (Debian openssh-server, `sshd -D -e`, on ports 22 and 2222) in its own UTS
#     namespace whose hostname is prun-hK, host key DIR/prun-hK/ssh_host_ed25519_key,
#     log DIR/prun-hK/sshd.log;
#   - its own temporary directory DIR/prun-hK/tmp and home DIR/prun-hK/home,
#     the TMPDIR and HOME of its SSH sessions (sshd SetEnv), since the
#     filesystem is shared (and root's own ~/.bashrc is slow to run);
#   - DIR/launcher-only hidden (an empty tmpfs over it in the sshd's own mount
#     namespace): what the launcher puts there, the hosts do not have;
#   - /etc/netns/prun-hK/hosts (which `ip netns exec` bind-mounts over
#     /etc/hosts inside the namespace) naming every host and the launcher
#     (198.18.0.254 prun-launcher and this machine's hostname).
# The filesystem is shared: every host sees the same /tmp, DIR and binaries.
#
# Files written into DIR:
#   id_ed25519{,.pub}   the client key pair; authorized_keys = its public key
#   ssh_config          Host prun-hK -> HostName 198.18.0.K, User root, the key,
#                       UserKnownHostsFile DIR/known_hosts, StrictHostKeyChecking yes
#   known_hosts         every host's key under "prun-hK,198.18.0.K" (and [...]:2222)
#   hosts               the name list (same as /etc/netns/prun-hK/hosts)
#   hostfile            one host name per line
#   home/.ssh/          {config,known_hosts,id_ed25519{,.pub}} for clients that
#                       read $HOME/.ssh (in-process Go SSH clients)
# The root namespace's /etc/hosts is never edited, so in the root namespace the
# names prun-hK resolve only through ssh_config's HostName (ssh -F DIR/ssh_config)
# or through DIR/hosts; inside the hosts they resolve through /etc/hosts.
#
# up first removes whatever test hosts exist (so it is idempotent, and a
# cluster left behind by a killed test is cleaned), and reuses the keys already
# in DIR. down kills every process in the namespaces, deletes namespaces, veths,
# bridge and /etc/netns/prun-h*, then checks that nothing is left; it works after
# a partial up and is safe to run twice. Both fail with one clear line on stderr.
#
# The names are global to the machine, so users serialize on an flock of
# /run/lock/prun-cluster.lock: the script takes it for the duration of up and
# down, unless PRUN_CLUSTER_LOCKED=1 says that the caller already holds it for
# the cluster's whole life (internal/cluster does).
set -uo pipefail

PREFIX=prun-h     # namespaces and host names: prun-h1 .. prun-hN
VETH=prunv        # root-namespace veth ends: prunv1 .. prunvN
BRIDGE=prunbr0
NET=198.18.0
LAUNCHER=$NET.254
PORT2=2222        # every sshd listens on 22 and on this port (tests of port=)
LOCK=/run/lock/prun-cluster.lock
SSHD=/usr/sbin/sshd

die() { echo "cluster.sh: $*" >&2; exit 1; }

# must DESCRIPTION CMD...: run CMD; on failure die with DESCRIPTION and the first
# line of its output.
must() {
	local what=$1 out
	shift
	if ! out=$("$@" 2>&1); then
		die "$what: $(printf '%s\n' "$out" | grep -m1 . || echo "exit status $?")"
	fi
}

usage() { die "usage: cluster.sh up N DIR | cluster.sh down [DIR]"; }

[ "$(id -u)" = 0 ] || die "must run as root (network namespaces, bridge, sshd)"

deps() {
	local missing=
	[ -x $SSHD ] || missing="$missing openssh-server"
	command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || missing="$missing openssh-client"
	command -v ip >/dev/null || missing="$missing iproute2"
	[ -z "$missing" ] && return
	echo "cluster.sh: installing$missing" >&2
	must "apt-get update" apt-get update -qq
	must "apt-get install$missing" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
	[ -x $SSHD ] && command -v ssh >/dev/null && command -v ip >/dev/null ||
		die "installed$missing but sshd, ssh or ip is still missing"
}

lock() {
	[ "${PRUN_CLUSTER_LOCKED:-}" = 1 ] && return
	mkdir -p "${LOCK%/*}" || die "cannot create ${LOCK%/*}"
	exec 9>>"$LOCK" || die "cannot open $LOCK"
	flock -w 600 9 || die "timed out after 600 s waiting for $LOCK (held by $(cat "$LOCK" 2>/dev/null))"
	: >"$LOCK" && echo "pid $$ (cluster.sh $*)" >&9
}

# Our namespaces and links, by exact pattern, so that nothing else matches.
our_netns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+\$"; }
our_links() { ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep -E "^(${VETH}[0-9]+|${BRIDGE})\$"; }

# This process and its ancestors, which down must not kill (it may be run
# from inside a test host).
ancestors() {
	local p=$$
	while [ "$p" -gt 1 ] 2>/dev/null; do
		echo "$p"
		p=$(awk '/^PPid:/{print $2}' /proc/$p/status 2>/dev/null) || break
	done
}

# alive PID...: print the PIDs that still exist and are not zombies.
alive() {
	local p st
	for p in "$@"; do
		st=$(awk '/^State:/{print $2}' /proc/$p/status 2>/dev/null) || continue
		[ -n "$st" ] && [ "$st" != Z ] && echo "$p"
	done
}

do_down() {
	local ns pids=() p mine left i
	mine=" $(ancestors | tr '\n' ' ') "
	for ns in $(our_netns); do
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			case "$mine" in *" $p "*) ;; *) pids+=("$p") ;; esac
		done
	done
	if [ ${#pids[@]} -gt 0 ]; then
		kill -KILL "${pids[@]}" 2>/dev/null
		for i in $(seq 100); do
			left=$(alive "${pids[@]}")
			[ -z "$left" ] && break
			sleep 0.05
		done
		[ -z "$left" ] || die "down: processes still alive 5 s after SIGKILL: $(echo $left)"
	fi
	{
		for ns in $(our_netns); do echo "netns del $ns"; done
		for l in $(our_links); do echo "link del $l"; done
	} >"${TMPDIR:-/tmp}/prun-cluster-down.$$"
	# -force: carry on past a link that went away with its namespace.
	ip -force -batch "${TMPDIR:-/tmp}/prun-cluster-down.$$" >/dev/null 2>&1
	rm -f "${TMPDIR:-/tmp}/prun-cluster-down.$$"
	rm -rf /etc/netns/${PREFIX}[0-9]*
	# Veth ends vanish with their namespace asynchronously; give them a moment.
	for i in $(seq 100); do
		[ -z "$(our_netns)$(our_links)" ] && break
		sleep 0.05
	done
	left="$(our_netns) $(our_links) $(ls -d /etc/netns/${PREFIX}[0-9]* 2>/dev/null)"
	[ -z "${left// /}" ] || die "down: still present after removal: $(echo $left)"
	rmdir /etc/netns 2>/dev/null || true # only if we left it empty
}

keygen() { # keygen FILE COMMENT: generate an ed25519 key unless FILE exists
	[ -s "$1" ] && [ -s "$1.pub" ] && return
	rm -f "$1" "$1.pub"
	must "ssh-keygen $1" ssh-keygen -q -t ed25519 -N '' -C "$2" -f "$1"
}

do_up() {
	local n=$1 dir=$2 k h addr f
	case "$n" in '' | *[!0-9]*) die "up: N must be a number, got '$n'" ;; esac
	[ "$n" -ge 1 ] && [ "$n" -le 253 ] || die "up: N must be in 1..253, got $n"
	case "$dir" in '' | *[[:space:]]* | *%*) die "up: DIR must be non-empty, without spaces or %: '$dir'" ;; esac
	mkdir -p "$dir" || die "up: cannot create $dir"
	dir=$(cd "$dir" && pwd -P) || die "up: cannot enter $dir"

	do_down
	mkdir -p /run/sshd || die "up: cannot create /run/sshd"
	chmod 0755 /run/sshd

	# Keys, names and client configuration.
	keygen "$dir/id_ed25519" prun-cluster-client
	cp "$dir/id_ed25519.pub" "$dir/authorized_keys" || die "up: cannot write $dir/authorized_keys"
	{
		echo "127.0.0.1 localhost"
		echo "::1 localhost ip6-localhost ip6-loopback"
		echo "$LAUNCHER prun-launcher $(hostname)"
		for k in $(seq "$n"); do echo "$NET.$k $PREFIX$k"; done
	} >"$dir/hosts" || die "up: cannot write $dir/hosts"
	: >"$dir/known_hosts"
	: >"$dir/hostfile"
	: >"$dir/ssh_config"
	for k in $(seq "$n"); do
		h=$PREFIX$k addr=$NET.$k
		mkdir -p "$dir/$h/tmp" "$dir/$h/home" || die "up: cannot create $dir/$h/{tmp,home}"
		chmod 1777 "$dir/$h/tmp"
		keygen "$dir/$h/ssh_host_ed25519_key" "$h"
		echo "$h,$addr,[$h]:$PORT2,[$addr]:$PORT2 $(cut -d' ' -f1-2 "$dir/$h/ssh_host_ed25519_key.pub")" >>"$dir/known_hosts"
		echo "$h" >>"$dir/hostfile"
		printf 'Host %s\n  HostName %s\n' "$h" "$addr" >>"$dir/ssh_config"
		cat >"$dir/$h/sshd_config" <<EOF
# sshd of test host $h (cluster.sh)
ListenAddress $addr
Port 22
Port $PORT2
HostKey $dir/$h/ssh_host_ed25519_key
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
MaxStartups 100:30:200
MaxSessions 100
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AcceptEnv LANG LC_* PRUN_*
# The filesystem is shared: each host gets a /tmp of its own, as real nodes
# have, and a clean home: this machine's root login shell runs pyenv's
# rehash, whose lock serializes concurrent SSH sessions (~100 ms each).
SetEnv TMPDIR=$dir/$h/tmp HOME=$dir/$h/home
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
		[ $? = 0 ] || die "up: cannot write $dir/$h/sshd_config"
		mkdir -p "/etc/netns/$h" && cp "$dir/hosts" "/etc/netns/$h/hosts" ||
			die "up: cannot write /etc/netns/$h/hosts"
	done
	cat >>"$dir/ssh_config" <<EOF
Host $PREFIX*
  User root
  Port 22
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  IdentityAgent none
  UserKnownHostsFile $dir/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
  ConnectTimeout 5
  # Test keys, test hosts: the classic key exchange costs ~60 ms less per
  # connection here than the default post-quantum sntrup761x25519.
  KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org,sntrup761x25519-sha512@openssh.com
  BatchMode yes
  PasswordAuthentication no
  KbdInteractiveAuthentication no
  LogLevel ERROR
EOF
	mkdir -p "$dir/home/.ssh" && chmod 0700 "$dir/home/.ssh" &&
		cp "$dir/ssh_config" "$dir/home/.ssh/config" &&
		cp "$dir/known_hosts" "$dir/home/.ssh/known_hosts" &&
		cp "$dir/id_ed25519" "$dir/id_ed25519.pub" "$dir/home/.ssh/" ||
		die "up: cannot write $dir/home/.ssh"

	# The kernel's IPv4 neighbour (ARP) table is one for the whole machine,
	# shared by every namespace, with the initial namespace's limits: each
	# host may hold an entry for every other host and the launcher, n*(n+1)
	# in all. Past gc_thresh3 (1024 by default; reached at ~100 hosts whose
	# daemons connect to each other) the kernel logs "neighbour: arp_cache:
	# neighbor table overflow!" and drops packets it cannot resolve: at 253
	# hosts a third of the SSH connections between hosts timed out. Raised
	# (never lowered, and left so: a bigger limit is harmless) to fit.
	local need=$((n * (n + 2))) cur
	cur=$(sysctl -n net.ipv4.neigh.default.gc_thresh2) || die "up: cannot read net.ipv4.neigh.default.gc_thresh2"
	if [ "$cur" -lt "$need" ]; then
		# thresh3 first: the kernel wants thresh2 <= thresh3.
		[ "$(sysctl -n net.ipv4.neigh.default.gc_thresh3)" -ge $((2 * need)) ] ||
			must "up: raising net.ipv4.neigh.default.gc_thresh3" sysctl -q -w net.ipv4.neigh.default.gc_thresh3=$((2 * need))
		must "up: raising net.ipv4.neigh.default.gc_thresh2" sysctl -q -w net.ipv4.neigh.default.gc_thresh2=$need
	fi

	# The network: one ip batch in the root namespace, one per host.
	{
		echo "link add $BRIDGE type bridge"
		echo "addr add $LAUNCHER/24 dev $BRIDGE"
		echo "link set $BRIDGE up"
		for k in $(seq "$n"); do
			echo "netns add $PREFIX$k"
			echo "link add $VETH$k type veth peer name eth0 netns $PREFIX$k"
			echo "link set $VETH$k master $BRIDGE up"
		done
	} >"$dir/net.batch"
	must "up: building namespaces and links (ip -batch $dir/net.batch)" ip -batch "$dir/net.batch"
	for k in $(seq "$n"); do
		printf 'link set lo up\naddr add %s/24 dev eth0\nlink set eth0 up\n' "$NET.$k" >"$dir/$PREFIX$k/net.batch"
		must "up: configuring $PREFIX$k" ip -n "$PREFIX$k" -batch "$dir/$PREFIX$k/net.batch"
	done

	# The sshds: each in its host's network namespace (ip netns exec, which also
	# binds /etc/netns/H/hosts), its own UTS namespace, and its own mount
	# namespace where an empty tmpfs hides DIR/launcher-only; a session of
	# their own, no inherited descriptors (fd 9 is our lock).
	mkdir -p "$dir/launcher-only" || die "up: cannot create $dir/launcher-only"
	local pids=()
	for k in $(seq "$n"); do
		h=$PREFIX$k
		: >"$dir/$h/sshd.log"
		setsid ip netns exec "$h" unshare --uts --mount -- \
			sh -c 'hostname "$1" && mount -t tmpfs -o size=1m,mode=0755 prun-hidden "$3" && exec '"$SSHD"' -D -e -f "$2"' \
			sh "$h" "$dir/$h/sshd_config" "$dir/launcher-only" \
			</dev/null >>"$dir/$h/sshd.log" 2>&1 9>&- &
		pids[$k]=$!
	done
	# Ready when each one says it is listening on both ports (within 10 s), dead if it exits.
	local waiting=" $(seq -s ' ' "$n") " deadline=$(($(date +%s%N) + 10000000000)) names=
	while :; do
		for k in $waiting; do
			if [ "$(grep -c '^Server listening on' "$dir/$PREFIX$k/sshd.log")" -ge 2 ]; then # ports 22 and $PORT2
				waiting=${waiting/ $k / }
			elif [ -z "$(alive "${pids[$k]}")" ]; then
				die "up: sshd of $PREFIX$k exited: $(grep -m1 . "$dir/$PREFIX$k/sshd.log" || echo 'no output') (log $dir/$PREFIX$k/sshd.log)"
			fi
		done
		[ -z "${waiting// /}" ] && break
		if [ "$(date +%s%N)" -gt "$deadline" ]; then
			for k in $waiting; do names="$names $PREFIX$k"; done
			die "up: sshd not listening after 10 s on:$names (logs $dir/prun-hK/sshd.log)"
		fi
		sleep 0.02
	done
	echo "$n" >"$dir/size"
}

case "${1:-}" in
up)
	[ $# = 3 ] || usage
	deps
	lock up "$3"
	do_up "$2" "$3"
	;;
down)
	[ $# -le 2 ] || usage
	command -v ip >/dev/null || die "down: ip (iproute2) is missing"
	lock down
	do_down
	;;
*) usage ;;
esac
