"""What a leg costs the emitter, apart from its records (docs/PERFORMANCE.md "Where the time
goes").

    python benchmarks/leg_cost.py [MODEL] [--rank R] [--algo A] [--reps N]

``MODEL`` as for ``profile_rank.py`` (default ``size_x1``, the default size sweep's first
point, built by ``make bench``).  The rank's entries are composed once; then the emitter
(:func:`nrtrewrite.emit.legs.emit_entries`, one batch, records hashed and discarded) runs on

* the entries as composed (*as composed*);
* the same legs with every non-empty element range cut to 32 elements (*32 elements*: the
  same legs, channels, semaphores and 0xBF words, one tile per leg, so the records hardly
  count);
* the first entry alone, then the first two, ..., then every entry twice and four times
  (32 elements each): the emitter's time against the batch's legs, and the least-squares
  line through those points (fixed ms per batch + us per leg).

Each figure is the best of ``--reps`` runs in this process (warm), with the minor page
faults of that run.  The composing time of the rank's entries (best of ``--reps``, each from
a fresh plan) is printed too.  The heap is tuned as :func:`nrtrewrite.lower.lower_rank` tunes
it (:func:`nrtrewrite.memtune.keep_freed_memory`): without that, glibc gives blocks of a
megabyte or more back to the kernel on free, and each emit pays a page fault per 4 KiB it
allocates again (some 900 at ``size_x1``, a millisecond of its 3 ms), which no lowering pays.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

#: The element count every non-empty leg gets in the "32 elements" runs.
SHORT = 32


def _short(ir: np.ndarray) -> np.ndarray:
    ir = ir.copy()
    moving = ir["stop"] > ir["start"]
    ir["stop"][moving] = ir["start"][moving] + SHORT
    return ir


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = ('What a leg costs the emitter, apart from its records (docs/PERFORMANCE.md "Where '
               'the time goes").')


def main(argv: list[str] | None = None) -> None:
    from profile_rank import fail, model_path, rank_arguments

    ap = rank_arguments(DESCRIPTION, "size_x1")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error("--reps must be at least 1")

    from nrtrewrite.emit.legs import RankBuilder, emit_entries
    from nrtrewrite.errors import NrtRewriteError
    from nrtrewrite.lower import LowerOptions, emit_items, plan_lowering, rank_entries
    from nrtrewrite.memtune import keep_freed_memory
    from nrtrewrite.neff.reader import read_model

    path = model_path(args.model)
    compose_s = float("inf")
    try:
        model = read_model(path)
        for _ in range(args.reps):
            plan = plan_lowering(model, LowerOptions(algo=args.algo))
            t0 = time.perf_counter()
            entries = rank_entries(plan, args.rank)
            compose_s = min(compose_s, time.perf_counter() - t0)
    except NrtRewriteError as err:
        fail(err.at(file=str(path)).line())
    if not entries:
        fail(f"rank {args.rank} has no SPAD entry in {path}")
    full = emit_items(plan, entries, args.rank)
    keep_freed_memory()  # as lower_rank does (the module doc)

    def faults() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def emit(items) -> tuple[float, int, int]:
        best, records, best_faults = float("inf"), 0, 0
        for _ in range(args.reps):
            b = RankBuilder(args.rank, lambda name, arr: None)
            f0 = faults()
            t0 = time.perf_counter()
            emit_entries(b, items)
            dt = time.perf_counter() - t0
            if dt < best:
                best, best_faults = dt, faults() - f0
            b.close()
            records = sum(b.counts.values())
        return best, records, best_faults

    algos = sorted({tp.alg.name for tp, _spec in entries})
    print(f"{path.name} rank {args.rank}: {len(entries)} entries ({', '.join(algos)}), "
          f"compose {compose_s * 1e3:.2f} ms")
    short = [(c, _short(ir)) for c, ir in full]
    legs = sum(ir.size for _c, ir in full)
    for label, items in (("as composed", full), (f"{SHORT} elements", short)):
        s, records, nf = emit(items)
        print(f"  emit, {label:12s}: {s * 1e3:7.3f} ms  {legs:7,d} IR legs  {records:10,d} records"
              f"  {nf:5,d} page faults")
    print(f"  emit against the batch's legs ({SHORT} elements each):")
    sets = [short[:k] for k in sorted({1, max(1, len(short) // 2), len(short)})]
    sets += [short * 2, short * 4]
    xs, ys = [], []
    for items in sets:
        s, _records, _faults = emit(items)
        n = sum(ir.size for _c, ir in items)
        xs.append(n)
        ys.append(s)
        print(f"    {len(items):4d} entries {n:7,d} legs: {s * 1e3:7.3f} ms  "
              f"({s / n * 1e6:.2f} us per leg)")
    slope, fixed = np.polyfit(xs, ys, 1)
    print(f"  fit: {fixed * 1e3:.2f} ms per batch + {slope * 1e6:.2f} us per leg")


if __name__ == "__main__":
    main()
