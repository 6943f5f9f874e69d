#!/bin/bash
# Lower the byte-identity comparison set with the nrtrewrite source tree SRC into OUT:
# large64 ranks 0 and 5, large128 ranks 0 and 64, every rank of all64 (make bench builds
# these models under benchmarks/out/) and every fixture, all at the default policy, through
# the CLI. Compare two such folders with diff -r (docs/PERFORMANCE.md):
#
#   git worktree add /tmp/base <rev>
#   benchmarks/same_bytes.sh /tmp/base /tmp/out-base
#   benchmarks/same_bytes.sh "$PWD" /tmp/out-new
#   diff -r /tmp/out-base /tmp/out-new && echo identical
set -euo pipefail
SRC=$(cd "$1" && pwd)
OUT=$2
HERE=$(cd "$(dirname "$0")/.." && pwd)
B=$HERE/benchmarks/out
F=$HERE/fixtures
mkdir -p "$OUT"
# run from an empty folder: python -m puts the current folder first on sys.path
cd "$(mktemp -d)"
run() { PYTHONPATH="$SRC" python -m nrtrewrite.cli lower -q --force "$@"; }
run --rank 0 "$B/large64.neff" -o "$OUT/l64r0" &
run --rank 5 "$B/large64.neff" -o "$OUT/l64r5" &
wait
run --rank 0 "$B/large128.neff" -o "$OUT/l128r0" &
run --rank 64 "$B/large128.neff" -o "$OUT/l128r64" &
wait
run "$B/all64.neff" -o "$OUT/all64"
for f in "$F"/*.neff; do run "$f" -o "$OUT/fx_$(basename "$f" .neff)"; done
