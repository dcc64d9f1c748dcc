#!/usr/bin/env bash
# mpich-ch3.sh PREFIX [PMI]
#
# Builds the MPICH that the tests of dynamic processes need into PREFIX:
# Debian's own MPICH (the mpich package, ch4:ucx) cannot open a port or
# spawn on this kind of machine, under mpiexec.hydra as under prun
# (MPIDI_UCX_get_local_upids: "not supported with ucx netmod"). The same
# MPICH release, from Debian's source package, built with the ch3:nemesis
# device over TCP can. PMI is the client's PMI library: "simple" (PMI-1, the
# default) or "pmi2/simple" (PMI-2).
#
# Only Debian's registry is used: a private deb-src list for the suites the
# machine already uses, in a scratch apt state (the machine's apt setup is
# left alone). About two minutes on two cores; PREFIX/.prun-built marks a
# finished build, so a second call returns at once.
set -euo pipefail

prefix=${1:?usage: mpich-ch3.sh PREFIX [simple|pmi2/simple]}
pmi=${2:-simple}
case $pmi in simple | pmi2/simple) ;; *) echo "mpich-ch3.sh: PMI must be simple or pmi2/simple, not $pmi" >&2; exit 2 ;; esac
stamp=$prefix/.prun-built
want="mpich $(dpkg-query -W -f='${source:Version}' mpich 2>/dev/null || echo unknown) ch3:nemesis pmi=$pmi"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
# Two checkouts testing at once build it once: the second waits, then finds
# the stamp.
mkdir -p "$(dirname "$prefix")"
exec 9>"$prefix.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
echo "== building $want into $prefix (once; Debian's MPICH cannot spawn here)"

work=$(mktemp -d "${TMPDIR:-/tmp}/prun-mpich.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/apt/sources" "$work/apt/lists/partial" "$work/apt/cache/archives/partial"

# deb-src twins of the machine's Debian sources (deb822 or one-line form).
for f in /etc/apt/sources.list.d/*.sources; do
	if [ -f "$f" ] && grep -q '^URIs: .*debian' "$f"; then
		sed 's/^Types: deb$/Types: deb-src/' "$f" >"$work/apt/sources/$(basename "$f")"
	fi
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	if [ -f "$f" ] && grep -q '^deb .*debian' "$f"; then
		grep '^deb .*debian' "$f" | sed 's/^deb /deb-src /' >>"$work/apt/sources/machine.list"
	fi
done
if [ -z "$(ls "$work/apt/sources")" ]; then
	codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
	echo "deb-src http://deb.debian.org/debian $codename main" >"$work/apt/sources/fallback.list"
fi
apt=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/apt/sources"
	-o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o APT::Sandbox::User=root)
"${apt[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
version=$(dpkg-query -W -f='${source:Version}' mpich 2>/dev/null || true)
(cd "$work" && { "${apt[@]}" source --download-only "mpich${version:+=$version}" || "${apt[@]}" source --download-only mpich; } >>"$work/apt.log" 2>&1) ||
	{ cat "$work/apt.log" >&2; exit 1; }
tar -C "$work" -xf "$work"/mpich_*.orig.tar.*
src=$(echo "$work"/mpich-*/)

# ch3:nemesis over TCP, C only, the old datatype engine (yaksa alone would
# take longer to build than all the rest), the machine's hwloc.
mkdir "$work/build"
cd "$work/build"
"$src/configure" --prefix="$prefix" --with-device=ch3:nemesis --with-pmi="$pmi" --with-pm=no \
	--with-datatype-engine=dataloop --with-hwloc=/usr --disable-fortran --disable-cxx --disable-romio \
	--disable-doc --disable-static --enable-fast=O2 --disable-dependency-tracking >"$work/configure.log" 2>&1 ||
	{ tail -40 "$work/configure.log" >&2; exit 1; }
make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; exit 1; }
rm -rf "$prefix"
make install >"$work/install.log" 2>&1 || { tail -40 "$work/install.log" >&2; exit 1; }
echo "$want" >"$stamp"
echo "== $prefix/bin/mpicc ready"
