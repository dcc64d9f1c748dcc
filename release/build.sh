#!/usr/bin/env bash
# release/build.sh ROOT OUTDIR
#
# Builds prun's release tarball, OUTDIR/prun-VERSION-linux-x86_64.tar.gz,
# whose programs need nothing but glibc 2.31 or later (Debian 11, Ubuntu
# 20.04, RHEL 9 and anything newer). A program needs the glibc symbol
# versions of the glibc it was linked against, so they are built inside ROOT,
# a Debian 11 root (testdata/debroot.sh bullseye ROOT, built once; glibc
# 2.31), with its gcc, its pkg-config and its static libevent, hwloc and zlib,
# and with this machine's Go toolchain and module cache bound into it read-only
# (GOTOOLCHAIN=local, GOPROXY=off: Go downloads nothing inside; the machine's
# go fetches what go.mod needs first). The pinned OpenPMIx is built inside
# the root by openpmix/build.sh, once per recipe, into the root's own
# /root/.cache/prun/openpmix-HASH; Go's build cache is the root's
# /root/.cache/go-build: a second build of the same sources only links.
#
# The tarball holds one directory, prun-VERSION-linux-x86_64/, laid out as a
# prefix: bin/prun and bin/prun-ssh (prun runs prun-ssh from its own
# directory), share/man/man1/prun.1, share/bash-completion/completions/prun
# and share/zsh/site-functions/_prun (prun writes both). Unpack it into a
# prefix (tar --strip-components=1 -C /usr/local -xzf ...) or keep it as a
# prefix of its own. VERSION is `git describe --tags --always --dirty`
# ($VERSION overrides it). The archive's files carry the commit's date, owner
# root and sorted names: the same sources built again in the same root give
# the same archive, byte for byte (another root's OpenPMIx build differs in
# the source paths libpmix's messages name: its scratch directory's).
#
# Besides libc and ld-linux the programs name glibc 2.31's libpthread,
# libdl, libutil and libresolv: libc's own since 2.34, which keeps them as
# empty libraries, and part of glibc's package everywhere.
#
# Needs root (chroot and mounts). /proc, /dev and the binds exist only in a
# private mount namespace, and every process of the build runs in a PID
# namespace of its own that is killed when this script ends, however it ends
# (its parent-death signal): nothing stays mounted or running. GO names the
# machine's go command (default go).
set -euo pipefail
umask 022

usage='usage: release/build.sh ROOT OUTDIR'
root=${1:?$usage}
out=${2:?$usage}
src=$(cd "$(dirname "$0")/.." && pwd)
go=${GO:-go}
if [ "$(id -u)" != 0 ]; then
	echo "release/build.sh: needs root (it builds in a chroot)" >&2
	exit 1
fi
root=$(mkdir -p "$root" && cd "$root" && pwd)

version=${VERSION:-$(git -C "$src" describe --tags --always --dirty 2>/dev/null || echo unknown)}
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct 2>/dev/null || echo 0)}
name=prun-$version-linux-x86_64
# The commit, for prun --version: Go stamps none here (the sources are bound
# into the root without their .git), so the linker is given it (cli/version.go).
vcs=
if rev=$(git -C "$src" rev-parse HEAD 2>/dev/null); then
	modified=false
	[ -z "$(git -C "$src" status --porcelain --untracked-files=no)" ] || modified=true
	vcs="-X prun/cli.vcsRevision=$rev -X prun/cli.vcsTime=$(git -C "$src" log -1 --format=%cI) -X prun/cli.vcsModified=$modified"
fi

"$src/testdata/debroot.sh" bullseye "$root"

# The machine's toolchain for this go.mod (GOTOOLCHAIN may have chosen one
# in the module cache), and every module the build needs, fetched here.
goroot=$(cd "$src" && "$go" env GOROOT)
modcache=$(cd "$src" && "$go" env GOMODCACHE)
(cd "$src" && "$go" mod download)
# The recipe's hash, as the Makefile computes it: the root's OpenPMIx prefix,
# and what Go's cache keys the cgo packages on.
pmix_hash=$(cat "$src/openpmix/build.sh" "$src/openpmix/pin" "$src"/openpmix/patches/*.patch | sha256sum | cut -c1-12)
pmix=/root/.cache/prun/openpmix-$pmix_hash

work=$(mktemp -d "${TMPDIR:-/tmp}/prun-release.XXXXXX")
part=
trap 'rm -rf "$work" ${part:+"$part"}' EXIT
mkdir -p "$work/out" "$work/tmp" "$root/build/src" "$root/build/out" "$root$goroot" "$root$modcache"
chmod 1777 "$work/tmp"

echo "== building $name in $root"
# The root's /tmp is this build's own (removed with it). Inside the root the
# environment is the root's alone: none of the machine's CGO_*,
# PKG_CONFIG_PATH or GO* variables (the Makefile's name the machine's paths).
setpriv --pdeathsig KILL unshare --mount --propagation private --pid --fork --kill-child -- bash -euo pipefail -c '
	root=$1 src=$2 out=$3 tmp=$4 goroot=$5 modcache=$6
	shift 6
	mount -t proc proc "$root/proc"
	mount --rbind /dev "$root/dev"
	mount --bind -o ro "$src" "$root/build/src"
	mount --bind "$out" "$root/build/out"
	mount --bind "$tmp" "$root/tmp"
	mount --bind -o ro "$modcache" "$root$modcache"
	mount --bind -o ro "$goroot" "$root$goroot"
	exec chroot "$root" env -i "$@"' \
	bash "$root" "$src" "$work/out" "$work/tmp" "$goroot" "$modcache" \
	PATH="$goroot/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin" HOME=/root TMPDIR=/tmp LC_ALL=C.UTF-8 \
	GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-buildvcs=false GOMODCACHE="$modcache" GOCACHE=/root/.cache/go-build \
	CGO_ENABLED=1 CC=gcc PKG_CONFIG_PATH="$pmix/lib/pkgconfig" CGO_CPPFLAGS="-DPRUN_PMIX_RECIPE=$pmix_hash" \
	bash -euo pipefail -c '
		/build/src/openpmix/build.sh "$1"
		cd /build/src
		go build -trimpath -ldflags="$2" -o /build/out/ ./cmd/prun ./cmd/prun-ssh ./cmd/prun-top' \
	bash "$pmix" "$vcs"

stage=$work/stage/$name
install -d "$stage/bin" "$stage/share/man/man1" "$stage/share/bash-completion/completions" \
	"$stage/share/zsh/site-functions"
install -m 0755 "$work/out/prun" "$work/out/prun-ssh" "$work/out/prun-top" "$stage/bin/"
install -m 0644 "$src/docs/prun.1" "$stage/share/man/man1/prun.1"
"$stage/bin/prun" completion bash >"$stage/share/bash-completion/completions/prun"
"$stage/bin/prun" completion zsh >"$stage/share/zsh/site-functions/_prun"
chmod 0644 "$stage/share/bash-completion/completions/prun" "$stage/share/zsh/site-functions/_prun"

mkdir -p "$out"
part=$(mktemp "$out/.$name.XXXXXX")
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --format=gnu \
	-C "$work/stage" -cf - "$name" | gzip -n -9 >"$part"
chmod 0644 "$part"
mv -f "$part" "$out/$name.tar.gz"
echo "== $out/$name.tar.gz"
