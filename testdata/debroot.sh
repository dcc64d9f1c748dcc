#!/usr/bin/env bash
# debroot.sh SUITE DIR
#
# Builds a Debian root file system of SUITE (trixie: Debian 13, bullseye:
# Debian 11) in DIR from Debian's binary packages (debootstrap), for the tests
# that run another distribution's programs under this machine's prun (trixie:
# Open MPI 5, PMIx 5, mpi4py 4) and for the release build (bullseye: an old
# glibc). Packages are installed without starting services (policy-rc.d). DIR
# /.prun-built marks a finished root with its package list: a second call
# returns at once, one with another list builds the root again. Two callers
# building the same DIR at once build it once. 2-4 minutes.
set -euo pipefail

suite=${1:?usage: debroot.sh SUITE DIR}
dir=${2:?usage: debroot.sh SUITE DIR}
case $suite in
trixie)
	# Open MPI 5 and its PMIx 5 (client library, tools, headers), MPICH 4.2,
	# mpi4py 4; what building prun needs (make build inside the root).
	pkgs=openmpi-bin,libopenmpi-dev,gcc,libc6-dev,python3-mpi4py,mpich,libmpich-dev,libpmix-bin,libpmix-dev
	pkgs=$pkgs,make,pkg-config,autoconf,automake,libtool,flex,perl,libevent-dev,libhwloc-dev,zlib1g-dev,libmunge-dev
	pkgs=$pkgs,golang-go,ca-certificates,git
	;;
bullseye)
	# What building prun needs (openpmix/build.sh applies patches with
	# patch, and OpenPMIx's configure wants python3 even without its Python
	# bindings); its Go comes from the machine.
	pkgs=gcc,libc6-dev,make,pkg-config,autoconf,automake,libtool,flex,perl,libevent-dev,libhwloc-dev,zlib1g-dev
	pkgs=$pkgs,libmunge-dev,ca-certificates,git,binutils,xz-utils,patch,python3
	;;
*)
	echo "debroot.sh: unknown suite $suite (trixie or bullseye)" >&2
	exit 2
	;;
esac
stamp=$dir/.prun-built
want="$suite $pkgs"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
trap 'rm -f "$dir.lock"' EXIT
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
command -v debootstrap >/dev/null || { echo "debroot.sh: debootstrap is missing (make deps installs it)" >&2; exit 1; }
echo "== building a Debian $suite root in $dir (once; 2-4 minutes)"
. "$(dirname "$0")/../openpmix/mirror.sh"
mirror=$(debian_mirror)
rm -rf "$dir"
log=$(mktemp "${TMPDIR:-/tmp}/prun-debroot.XXXXXX")
# debootstrap's last configure step can fail on a package that needs another
# one it has not configured yet (trixie: libltdl-dev wants automake); apt
# finishes it below.
debootstrap --variant=minbase --include="$pkgs" "$suite" "$dir" "$mirror" >"$log" 2>&1 || true
if [ ! -x "$dir/usr/bin/apt-get" ]; then
	tail -30 "$log" >&2
	rm -f "$log"
	echo "debroot.sh: debootstrap of $suite failed" >&2
	exit 1
fi
printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
chmod +x "$dir/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
# apt inside the root, with its own /proc, in a mount namespace of its own:
# nothing stays mounted when it ends.
unshare -m --propagation private sh -c '
	mount -t proc proc "$1/proc" &&
	DEBIAN_FRONTEND=noninteractive chroot "$1" apt-get -f install -y -qq' sh "$dir" >>"$log" 2>&1 ||
	{ tail -30 "$log" >&2; rm -f "$log"; echo "debroot.sh: finishing the $suite root failed" >&2; exit 1; }
if [ -n "$(chroot "$dir" dpkg --audit 2>/dev/null)" ]; then
	chroot "$dir" dpkg --audit >&2
	rm -f "$log"
	echo "debroot.sh: packages of the $suite root are not configured" >&2
	exit 1
fi
rm -f "$log"
echo "$want" >"$stamp"
echo "== $dir ready"
