#!/bin/bash
# Lower the byte-identity comparison set with the nrtrewrite source tree SRC into OUT:
# large64 ranks 0 and 5, large128 ranks 0 and 64, every rank of all64 (make bench builds
# these models under benchmarks/out/) and every fixture, all at the default policy, through
# the CLI, with this checkout's .venv Python (make setup) or $PYTHON. Any lowering that
# fails stops the script with a non-zero status (a failed side never compares as identical).
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
SRC=$(cd "$1" && pwd)
OUT=$2
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$HERE/.venv/bin/python}
B=$HERE/benchmarks/out
F=$HERE/fixtures
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# run from an empty folder: python -m puts the current folder first on sys.path
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
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
