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
lowered, :func:`collect_young` and :func:`collect_when_planning` run the collections that
freezing keeps CPython from running (docs/PERFORMANCE.md "The cyclic collector").
"""

from __future__ import annotations

import contextlib
import ctypes
import gc

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD_MAX = 32 << 20
TRIM_THRESHOLD = 1 << 30

_done = False

#: :func:`collect_when_planning` runs a full collection every this many plans.
FULL_COLLECT_PLANS = 100

_plans = 0  # plans started since the last full collection made here


def keep_freed_memory() -> bool:
    """Set the heap to reuse freed memory (once per process); False when not glibc."""
    global _done
    if _done:
        return True
    _done = True
    # the C library is already loaded: look in the process's own symbols only
    # (ctypes.util.find_library would run ldconfig in a subprocess, 1 - 2 ms, and where that
    # does not list libc, gcc and ld with temporary files in TMPDIR)
    mallopt = _mallopt_in(None)
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
        collect_young()  # or what is garbage now goes into the oldest generation at the end
    gc.freeze()
    try:
        yield
    finally:
        if not was:
            gc.unfreeze()


def collect_young() -> None:
    """Collect generations 0 and 1: the objects made since the last collection or freeze
    (a model read, a rank's leftovers: a few thousand; 0.003 - 0.3 ms).

    ``gc.freeze()`` then ``gc.unfreeze()`` - where a plan is made, around every rank's
    lowering - move every object into the oldest generation unexamined, and zero the counts
    by which CPython decides to collect that generation: without this, the cycles made just
    before (the construct parser's containers of each model read) would stay there for
    good in a process that reads, plans and lowers again and again (the tests, a fuzzer, a
    service)."""
    if gc.isenabled():
        gc.collect(1)


def collect_when_planning() -> bool:
    """Where a plan starts (:func:`nrtrewrite.lower.plan_lowering`): :func:`collect_young`,
    and every :data:`FULL_COLLECT_PLANS` plans a full collection for what got into the
    oldest generation anyway (True when it ran; a plan is freed by reference counting, so
    there is little).  The CLI plans once and never pays for a full collection."""
    global _plans
    if not gc.isenabled():
        return False
    _plans += 1
    if _plans < FULL_COLLECT_PLANS:
        collect_young()
        return False
    _plans = 0
    gc.collect()
    return True
