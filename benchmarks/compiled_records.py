"""What a compiled kernel would make of the emitter's record building: the data BDs and CCE
descriptors of one rank, built by the emitter's numpy functions and by two numba kernels
that loop over the same tiles, on the same inputs (docs/PERFORMANCE.md "What a compiled
emitter would leave").  An experiment for a product decision, not part of ``make bench``:
numba is no dependency of nrtrewrite.

    python benchmarks/compiled_records.py [MODEL] [--rank R] [--algo A] [--reps N]

``MODEL`` as for ``profile_rank.py`` (default ``large64``).  The rank is lowered once
(records hashed and discarded) while the arguments of every
:func:`nrtrewrite.emit.legs._bds_linear` and :func:`nrtrewrite.emit.legs._cce_block` call
are kept; then both builders run on every kept call, ``--reps`` times, and the best total of
each is printed with the records and bytes built.  Every kernel's output is compared with
the numpy function's first, array for array; a difference is an error.

The kernels cover the emitter's record-level work alone: the tiles, the leg-slot tables, the
leg-level passes, the composing, the SHA-256 and the writes stay as they are.  Needs numba
in the interpreter that runs it (``.venv/bin/pip install numba``; the first run compiles the
kernels, cached in ``__pycache__``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

try:
    import numba
except ImportError:
    numba = None


def _kernels():
    """The two numba kernels (compiled on first use)."""
    from nrtrewrite.emit import formats as F

    len_mask = F.LEN_MASK

    @numba.njit(cache=True)
    def records_of(tile_leg, per_leg):
        # the (records, 2) int64 output: per_leg[leg] records for each tile of the leg
        n = 0
        for t in range(tile_leg.size):
            n += per_leg[tile_leg[t]]
        return np.empty((n, 2), np.int64)

    @numba.njit(cache=True)
    def bds(tile_leg, ta, tb, dsize, slots, lt_first, lt_word0, lt_addr):
        # one BD per stream of each tile: the leg slot's constant words plus the tile's part
        words = records_of(tile_leg, slots)
        j = 0
        for t in range(tile_leg.size):
            leg = tile_leg[t]
            nbytes = ((tb[t] - ta[t]) * dsize[t]) & len_mask
            off = ta[t] * dsize[t]
            first = lt_first[leg]
            for s in range(slots[leg]):
                words[j, 0] = lt_word0[first + s] | nbytes
                words[j, 1] = lt_addr[first + s] + off
                j += 1
        return words

    @numba.njit(cache=True)
    def cce(tile_leg, ta, tb, dsize, leg_ns, leg_w3, pat, offset, leg_pat, has_pat):
        # one descriptor per source of each reduce tile: the source's pattern, words 2 and 3
        words = records_of(tile_leg, leg_ns)
        j = 0
        for t in range(tile_leg.size):
            leg = tile_leg[t]
            k = leg_ns[leg]
            w23 = (((tb[t] - ta[t]) * dsize[t]) & 0xFFFFFF) | (leg_w3[leg] << 32)
            base = offset[k] + (leg_pat[leg] if has_pat else 0)
            for s in range(k):
                words[j, 0] = pat[base + s]
                words[j, 1] = w23
                j += 1
        return words

    return bds, cce


def _per_tile(dsize, n: int) -> np.ndarray:
    """The element size of each tile: the emitter passes one int when the batch has one."""
    return dsize if isinstance(dsize, np.ndarray) else np.full(n, dsize, np.int64)


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = ("What a compiled kernel would make of the emitter's record building: the data BDs "
               "and CCE descriptors of one rank, built by the emitter's numpy functions and by two "
               "numba kernels that loop over the same tiles, on the same inputs "
               "(docs/PERFORMANCE.md \"What a compiled emitter would leave\"). An experiment for a "
               "product decision, not part of ``make bench``: numba is no dependency of "
               "nrtrewrite.")


def main(argv: list[str] | None = None) -> None:
    from profile_rank import model_path, rank_arguments

    ap = rank_arguments(DESCRIPTION, "large64")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    if numba is None:
        raise SystemExit("compiled_records.py: error: numba is not installed in this "
                         f"interpreter ({sys.executable}); .venv/bin/pip install numba")

    import nrtrewrite.emit.legs as L
    from nrtrewrite.errors import NrtRewriteError
    from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
    from nrtrewrite.neff.reader import read_model

    calls: dict[str, list[tuple]] = {"bds": [], "cce": []}
    np_bds, np_cce = L._bds_linear, L._cce_block

    def keep_bds(*a):
        calls["bds"].append(a)
        return np_bds(*a)

    def keep_cce(*a):
        calls["cce"].append(a)
        return np_cce(*a)

    path = model_path(args.model)
    L._bds_linear, L._cce_block = keep_bds, keep_cce
    try:
        plan = plan_lowering(read_model(path), LowerOptions(algo=args.algo))
        lower_rank(plan, args.rank, sink=lambda name, arr: None)
    except NrtRewriteError as err:
        raise SystemExit(f"compiled_records.py: error: {err}") from None
    finally:
        L._bds_linear, L._cce_block = np_bds, np_cce
    if not calls["bds"]:
        raise SystemExit(f"compiled_records.py: error: rank {args.rank} of {path} builds no "
                         "data BD through the linear path")

    nb_bds, nb_cce = _kernels()
    none = np.zeros(1, np.int64)

    def compiled_bds(a):
        return nb_bds(a[0], a[1], a[2], _per_tile(a[3], a[0].size), *a[4:])

    def compiled_cce(a):
        pat, offset, leg_pat = a[6]
        return nb_cce(a[0], a[1], a[2], _per_tile(a[3], a[0].size), a[4], a[5], pat, offset,
                      none if leg_pat is None else leg_pat, leg_pat is not None)

    records = nbytes = 0
    for a in calls["bds"]:  # compiles, and checks every call
        want = np_bds(*a)
        if not np.array_equal(compiled_bds(a), want):
            raise SystemExit("compiled_records.py: error: the BD kernel differs from _bds_linear")
        records, nbytes = records + want.shape[0], nbytes + want.nbytes
    for a in calls["cce"]:
        want = np_cce(*a).view(np.int64).reshape(-1, 2)
        if not np.array_equal(compiled_cce(a), want):
            raise SystemExit("compiled_records.py: error: the CCE kernel differs from _cce_block")
        records, nbytes = records + want.shape[0], nbytes + want.nbytes

    def best(fn_bds, fn_cce) -> float:
        out = float("inf")
        for _ in range(args.reps):
            t0 = time.perf_counter()
            for a in calls["bds"]:
                fn_bds(a)
            for a in calls["cce"]:
                fn_cce(a)
            out = min(out, time.perf_counter() - t0)
        return out

    t_np = best(lambda a: np_bds(*a), lambda a: np_cce(*a))
    t_nb = best(compiled_bds, compiled_cce)
    print(f"{path.name} rank {args.rank}: {records:,} records ({nbytes / 1e6:,.1f} MB) in "
          f"{len(calls['bds'])} BD and {len(calls['cce'])} CCE blocks, best of {args.reps}")
    for label, t in (("numpy (the emitter's)", t_np), (f"numba {numba.__version__}", t_nb)):
        print(f"  {label:22s}: {t * 1e3:8.1f} ms  {t / records * 1e9:5.1f} ns/record  "
              f"{nbytes / t / 1e9:5.2f} GB/s")
    print(f"  the kernels take {t_nb / t_np:.0%} of the numpy functions' time")


if __name__ == "__main__":
    main()
