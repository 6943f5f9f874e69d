"""Heap tuning for the lowering's numpy temporaries (docs/PERFORMANCE.md "Memory speed").

glibc serves an allocation above its mmap threshold (128 KiB at first, raised dynamically
up to 32 MiB) with a fresh ``mmap`` and gives it back on free, and trims the top of the
heap once more than twice that threshold is free.  Either way the next temporary of the
same size lands on pages the kernel has to fault in and zero again: on the project machine
a fresh buffer is written at 0.4 - 1.5 GB/s, a reused one at 15 - 20 GB/s.  The emitter
builds its descriptors block by block in temporaries of a few MiB, so fixing the threshold
at its maximum and not trimming lets every block reuse the pages of the previous one.
Freed memory then stays with the process until it exits (the peak RSS is unchanged: it is
the largest amount live at once).

And the cyclic collector: :func:`frozen_gc` keeps it off a plan's objects while a rank is
lowered, :func:`collect_if_grown` runs the full collections that freezing keeps CPython
from running (docs/PERFORMANCE.md "The cyclic collector").
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD_MAX = 32 << 20
TRIM_THRESHOLD = 1 << 30

_done = False

#: :func:`collect_if_grown` runs a full collection once this many objects, or as many as
#: the last full collection left alive if more, have been moved into the oldest generation
#: without one.
FULL_COLLECT_MIN = 250_000

_promoted = 0  # objects moved into the oldest generation since the last full collection (est.)
_alive = 0  # objects the collector tracked after the last full collection made here


def keep_freed_memory() -> bool:
    """Set the heap to reuse freed memory (once per process); False when not glibc."""
    global _done
    if _done:
        return True
    _done = True
    # the C library is already loaded: look in the process's own symbols first (find_library
    # runs ldconfig in a subprocess, 1 - 2 ms, and finds nothing where ldconfig is missing)
    mallopt = _mallopt_in(None) or _mallopt_in(ctypes.util.find_library("c"))
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def _mallopt_in(library: str | None):
    """``mallopt`` of the C library ``library`` (None: the process's own symbols), or None."""
    try:
        return getattr(ctypes.CDLL(library), "mallopt", None)
    except (OSError, TypeError):
        return None


@contextlib.contextmanager
def frozen_gc():
    """Every object that exists now moved out of the cyclic collector's reach for the
    duration (``gc.freeze()``): a plan is hundreds of thousands of long-lived objects, and
    each full collection during a rank's lowering (or in a forked process, where the walk
    also writes to, so copies, every page) would walk them all.  Unfrozen at the end unless
    something had frozen objects before (a pool worker keeps what it inherited frozen)."""
    was = gc.get_freeze_count()
    if not was:
        note_promoted(young_count())  # unfrozen into the oldest generation at the end
    gc.freeze()
    try:
        yield
    finally:
        if not was:
            gc.unfreeze()


def young_count() -> int:
    """About how many objects the collector's young generations hold: generation 0's count
    is its net allocations, generation 1's the collections of generation 0 since its own
    (each moved at most a threshold's worth into it)."""
    c0, c1, _c2 = gc.get_count()
    return c0 + c1 * gc.get_threshold()[0]


def note_promoted(n: int) -> None:
    """``n`` objects go into the oldest generation without a collection (gc.freeze() and
    gc.unfreeze() move them there)."""
    global _promoted
    _promoted += n


def collect_if_grown() -> bool:
    """A full collection if the oldest generation has grown by :data:`FULL_COLLECT_MIN`
    objects, or by as many as the last one left alive, since then (True when it ran).

    CPython collects its oldest generation itself once it has grown by a quarter, counting
    the collections of the younger ones; but ``gc.freeze()`` zeroes those counts, so a
    process that plans and lowers again and again (the tests, a fuzzer, a service) would
    never collect it, and every cycle moved there - the construct parser's containers of a
    model read, a dropped plan - would stay for good.  Called where a new plan starts
    (:func:`nrtrewrite.lower.plan_lowering`): the CLI plans once and never pays for it."""
    global _promoted, _alive
    if not gc.isenabled() or _promoted <= max(FULL_COLLECT_MIN, _alive):
        return False
    gc.collect()
    _alive = len(gc.get_objects())
    _promoted = 0
    return True
