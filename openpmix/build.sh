#!/usr/bin/env bash
# openpmix/build.sh PREFIX
#
# Builds the OpenPMIx that prun hosts its PMIx servers on into PREFIX: the
# release pinned in openpmix/pin (Debian 12's source package, whichever
# distribution builds it), Debian's own patches, then prun's
# (openpmix/patches/*.patch, in name order; each says why it exists and which
# test fails without it). Static library only, with its private headers:
# prun links it into its own binary, so the ranks' PMIx (4.2 or 5.x, the
# distribution's) is never the one prun was built with.
#
# PREFIX/lib/pkgconfig/prun-pmix.pc is what pmixsrv's cgo directive names;
# PREFIX/include/prun_pmix_pin.h says which release and patches were built,
# and pmixsrv refuses to compile against anything else. PREFIX/.prun-built
# marks a finished build: a second call returns at once. Two checkouts
# building the same PREFIX at once build it once.
#
# Only Debian's registry is used (a private deb-src list for bookworm in a
# scratch apt state; the machine's apt setup is left alone); the tarballs are
# checked against the hashes in openpmix/pin. PRUN_PMIX_TARBALLS=DIR takes
# them from DIR instead (a machine without the registry).
set -euo pipefail

prefix=${1:?usage: openpmix/build.sh PREFIX}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=pin
. "$here/pin"
stamp=$prefix/.prun-built
want="$pmix_source $pmix_version $(cat "$here/build.sh" "$here/pin" "$here"/patches/*.patch | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
mkdir -p "$(dirname "$prefix")"
exec 9>"$prefix.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
echo "== building OpenPMIx $pmix_version (pinned, with prun's patches) into $prefix (once, about 3 minutes)"

work=$(mktemp -d "${TMPDIR:-/tmp}/prun-openpmix.XXXXXX")
trap 'rm -rf "$work" "$prefix.lock"' EXIT

if [ -n "${PRUN_PMIX_TARBALLS:-}" ]; then
	cp "$PRUN_PMIX_TARBALLS/$pmix_orig" "$PRUN_PMIX_TARBALLS/$pmix_debian" "$work/"
else
	# The machine's Debian mirror; Debian 12's suite whatever the machine
	# runs (Debian 13's registry serves no source packages).
	. "$here/mirror.sh"
	mirror=$(debian_mirror)
	mkdir -p "$work/apt/sources" "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
	# The tarballs' hashes are checked below: the index needs no signature.
	echo "deb-src [trusted=yes] $mirror $pmix_suite main" >"$work/apt/sources/pin.list"
	apt=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/apt/sources"
		-o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o APT::Sandbox::User=root)
	"${apt[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
	(cd "$work" && "${apt[@]}" source --download-only "$pmix_source=$pmix_version") >>"$work/apt.log" 2>&1 ||
		{ cat "$work/apt.log" >&2; echo "openpmix/build.sh: cannot fetch $pmix_source $pmix_version from $mirror ($pmix_suite)" >&2; exit 1; }
fi
(cd "$work" && printf '%s  %s\n%s  %s\n' "$pmix_orig_sha256" "$pmix_orig" "$pmix_debian_sha256" "$pmix_debian" |
	sha256sum --quiet -c -) || { echo "openpmix/build.sh: the source tarballs are not the pinned ones" >&2; exit 1; }

src=$work/src
mkdir "$src"
tar -C "$src" --strip-components=1 -xf "$work/$pmix_orig"
tar -C "$src" -xf "$work/$pmix_debian"
cd "$src"
while read -r p; do
	case $p in '' | '#'*) continue ;; esac
	patch -p1 -s <"debian/patches/$p"
done <debian/patches/series
for p in "$here"/patches/*.patch; do
	patch -p1 -s <"$p" || { echo "openpmix/build.sh: $(basename "$p") does not apply" >&2; exit 1; }
done

./autogen.pl >"$work/autogen.log" 2>&1 || { tail -40 "$work/autogen.log" >&2; exit 1; }
mkdir "$work/build"
cd "$work/build"
# Static and position-independent (prun is linked as a PIE); no Python,
# curl or jansson; munge's module is built (tools authenticate with it) but
# libmunge is loaded at its first call (pmixsrv/lazylibs.c).
"$src/configure" --prefix="$prefix" --enable-static --disable-shared --with-pic \
	--disable-python-bindings --without-curl --without-jansson --with-munge \
	--disable-dependency-tracking CFLAGS="-O2 -g" >"$work/configure.log" 2>&1 ||
	{ tail -40 "$work/configure.log" >&2; exit 1; }
make -C src -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; exit 1; }
rm -rf "$prefix"
{ make -C src install && make -C include install; } >"$work/install.log" 2>&1 || { tail -40 "$work/install.log" >&2; exit 1; }
rm -f "$prefix"/lib/*.la
# The release's own example clients, which the tests build against the
# distribution's libpmix and run under prun (e2e TestOpenPMIxExamples).
mkdir -p "$prefix/share/examples"
cp "$src"/examples/*.c "$src"/examples/*.h "$prefix/share/examples/"

mkdir -p "$prefix/lib/pkgconfig"
cat >"$prefix/lib/pkgconfig/prun-pmix.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: prun-pmix
Description: OpenPMIx $pmix_version as prun hosts it (static, patched: openpmix/patches)
Version: $pmix_release
Libs: -L\${libdir}
Cflags: -I\${includedir} -I\${includedir}/pmix
EOF
patches=$(cd "$here/patches" && ls ./*.patch | sed 's|^\./||; s|\.patch$||' | tr '\n' ' ')
cat >"$prefix/include/prun_pmix_pin.h" <<EOF
/* Written by openpmix/build.sh: the OpenPMIx prun's server is built on. */
#define PRUN_PMIX_RELEASE "$pmix_release"
#define PRUN_PMIX_SOURCE "$pmix_source $pmix_version ($pmix_suite)"
#define PRUN_PMIX_PATCHES "${patches% }"
#define PRUN_PMIX_PATCHLEVEL $(ls "$here"/patches/*.patch | wc -l)
EOF
echo "$want" >"$stamp"
echo "== $prefix ready"
