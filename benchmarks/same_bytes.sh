#!/bin/bash
# Lower the byte-identity comparison set with the nrtrewrite source tree SRC into OUT:
# large64 ranks 0 and 5, large128 ranks 0 and 64, every rank of all64 (make bench builds
# these models under benchmarks/out/) and every fixture, all at the default policy, through
# the CLI, with this checkout's .venv Python (make setup) or $PYTHON. Any lowering that
# fails stops the script with a non-zero status (a failed side never compares as identical),
# and OUT is removed when the script made it. SRC must hold nrtrewrite/__init__.py, and
# Python must import nrtrewrite from there (else it would import the installed one, this
# checkout, and compare it with itself): otherwise one line and status 2, nothing written.
# Compare two such folders with diff -r (docs/PERFORMANCE.md):
#
#   git worktree add /tmp/base <rev>
#   benchmarks/same_bytes.sh /tmp/base /tmp/out-base
#   benchmarks/same_bytes.sh "$PWD" /tmp/out-new
#   diff -r /tmp/out-base /tmp/out-new && echo identical
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: benchmarks/same_bytes.sh SRC OUT (SRC: a source tree, OUT: a new folder)" >&2
    exit 2
fi
fail() { echo "same_bytes.sh: error: $*" >&2; exit 2; }
[ -d "$1" ] || fail "$1: no such folder"
[ -f "$1/nrtrewrite/__init__.py" ] || fail "$1: no nrtrewrite/__init__.py: not an nrtrewrite source tree"
SRC=$(cd "$1" && pwd -P)
OUT=$2
[ ! -e "$OUT" ] || [ -d "$OUT" ] || fail "$OUT: not a folder"
[ -d "$(dirname "$OUT")" ] || fail "$OUT: its parent folder does not exist"
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$HERE/.venv/bin/python}
B=$HERE/benchmarks/out
F=$HERE/fixtures
# run from an empty folder: python -m puts the current folder first on sys.path
# (no folder to make it in: one line, status 2, as the Python scripts; until 2026-12-06
# mktemp's own line, status 1)
WORK=$(LC_ALL=C mktemp -d 2>&1) || fail "cannot make a temporary folder: ${WORK#mktemp: }"
MADE_OUT=
cleanup() {
    local status=$?
    rm -rf "$WORK"
    if [ "$status" -ne 0 ] && [ -n "$MADE_OUT" ]; then rm -rf "$OUT"; fi
}
trap cleanup EXIT
# the nrtrewrite this environment imports: SRC's, not one found before it on the path
GOT=$(cd "$WORK" && PYTHONPATH="$SRC" "$PY" -c \
      'import os, nrtrewrite; print(os.path.realpath(os.path.dirname(nrtrewrite.__file__)))' \
      2>&1 | tail -n 1) || fail "$1: its nrtrewrite cannot be imported with $PY: $GOT"
[ "$GOT" = "$(cd "$SRC/nrtrewrite" && pwd -P)" ] \
    || fail "$1: $PY imports nrtrewrite from $GOT, not from this tree"
if [ ! -d "$OUT" ]; then
    mkdir "$OUT"
    MADE_OUT=1
fi
OUT=$(cd "$OUT" && pwd)
cd "$WORK"
run() { PYTHONPATH="$SRC" "$PY" -m nrtrewrite.cli lower -q --force "$@"; }
# two at a time; `wait PID` returns each one's status (a bare `wait` returns 0)
run --rank 0 "$B/large64.neff" -o "$OUT/l64r0" & p1=$!
run --rank 5 "$B/large64.neff" -o "$OUT/l64r5" & p2=$!
wait $p1; wait $p2
run --rank 0 "$B/large128.neff" -o "$OUT/l128r0" & p1=$!
run --rank 64 "$B/large128.neff" -o "$OUT/l128r64" & p2=$!
wait $p1; wait $p2
run "$B/all64.neff" -o "$OUT/all64"
for f in "$F"/*.neff; do run "$f" -o "$OUT/fx_$(basename "$f" .neff)"; done
