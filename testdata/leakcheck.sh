#!/bin/sh
# leakcheck.sh PRUN HELLO TOOL SPAWN — run jobs under LeakSanitizer with a prun
# built with `go build -asan`, and fail when a leaked block was allocated by
# prun's own C code (the allocating frame, #1, is pmixsrv's shim: prun_* or
# tr_*, or a cgo stub); leaks that libpmix makes and keeps itself are listed
# for the record. HELLO is an Open MPI program; TOOL is testdata/pmixtool.c;
# SPAWN is testdata/spawn.c built with Open MPI (a second job, a second MPIR
# table).
set -u
prun=$1 hello=$2 tool=$3 spawn=$4
out=$(mktemp)
trap 'rm -f "$out" "$out.uri"' EXIT
# exitcode=0: a leak report must not change the status the script checks.
export ASAN_OPTIONS=detect_leaks=1:exitcode=0:fast_unwind_on_malloc=0:malloc_context_size=40

echo "== $prun -n 4 $hello"
"$prun" --oversubscribe -n 4 "$hello" >/dev/null 2>>"$out" || { cat "$out"; exit 1; }
echo "== $prun -n 2 $spawn 2"
"$prun" --oversubscribe -n 2 "$spawn" 2 >/dev/null 2>>"$out" || { cat "$out"; exit 1; }
echo "== $prun --report-uri FILE -n 1 sleep 1, and a tool attached by that URI"
"$prun" --report-uri "$out.uri" -n 1 sleep 1 2>>"$out" &
pid=$!
i=0
while [ ! -s "$out.uri" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
"$tool" "$(cat "$out.uri")" || { wait $pid; cat "$out"; exit 1; }
wait $pid

# One line per leak: "<bytes> <allocating function> <caller>".
awk '/(Direct|Indirect) leak of/ { bytes = $4; f1 = ""; f2 = ""; next }
     /^ *#1 / { f1 = $4; next }
     /^ *#2 / { f2 = $4; print bytes, f1, f2 }' "$out" > "$out.list"
echo "== leaks (bytes, allocated in, called from)"
cat "$out.list"
ours=$(awk '$2 ~ /^(prun_|tr_|_cgo|go[A-Z])/' "$out.list")
rm -f "$out.list"
if [ -n "$ours" ]; then
	echo "leakcheck: prun's own C code leaked:"
	echo "$ours"
	exit 1
fi
echo "leakcheck: no leak allocated by prun's C code"
