"""memtune.frozen_gc: objects that exist on entry are out of the collector's reach for the
duration, and back afterwards unless something had frozen objects before; the full
collections that freezing keeps CPython from running (collect_if_grown)."""

import gc
import weakref
from pathlib import Path

import pytest

from nrtrewrite.memtune import frozen_gc


def test_frozen_for_the_duration_then_unfrozen():
    assert gc.get_freeze_count() == 0
    keep = [object() for _ in range(1000)]
    with frozen_gc():
        assert gc.get_freeze_count() >= len(keep)
        with frozen_gc():  # nested (compose ahead inside a rank's lowering): still frozen after
            pass
        assert gc.get_freeze_count() >= len(keep)
    assert gc.get_freeze_count() == 0


def test_what_was_frozen_before_stays_frozen():
    gc.freeze()  # as a pool worker inherits it
    try:
        before = gc.get_freeze_count()
        with frozen_gc():
            pass
        assert gc.get_freeze_count() >= before > 0
    finally:
        gc.unfreeze()


def test_heap_tuning_finds_mallopt_without_running_ldconfig(monkeypatch):
    """glibc's mallopt is found among the process's own symbols: ctypes.util.find_library
    (which runs ldconfig in a subprocess) is only the fallback."""
    import ctypes.util
    import platform

    from nrtrewrite import memtune

    def no_find(name):
        raise AssertionError("find_library was called")

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    monkeypatch.setattr(memtune, "_done", False)
    monkeypatch.setattr(ctypes.util, "find_library", no_find)
    assert memtune.keep_freed_memory() is True
    assert memtune.keep_freed_memory() is True  # once per process: the second call is free


class _Node:
    """A cycle the collector alone can free (and a weakref tells when it has)."""

    def __init__(self):
        self.me = self


def _cycle_in_oldest_generation() -> weakref.ref:
    node = _Node()
    ref = weakref.ref(node)
    del node
    gc.freeze()  # as plan_lowering and lower_rank move everything into the oldest generation
    gc.unfreeze()
    return ref


def test_collect_if_grown_frees_promoted_cycles(monkeypatch):
    from nrtrewrite import memtune

    monkeypatch.setattr(memtune, "FULL_COLLECT_MIN", 100)
    monkeypatch.setattr(memtune, "_alive", 0)
    monkeypatch.setattr(memtune, "_promoted", 0)
    ref = _cycle_in_oldest_generation()
    memtune.note_promoted(100)
    assert memtune.collect_if_grown() is False  # not more than the threshold yet
    assert ref() is not None
    memtune.note_promoted(1)
    assert memtune.collect_if_grown() is True
    assert ref() is None
    assert memtune._promoted == 0 and memtune._alive > 0  # counted after the collection
    monkeypatch.setattr(gc, "isenabled", lambda: False)  # the collector off: left alone
    memtune.note_promoted(10 * memtune._alive + 1000)
    assert memtune.collect_if_grown() is False


def test_planning_again_and_again_frees_the_cycles_of_earlier_runs(monkeypatch):
    """A process that plans over and over (tests, a fuzzer, a service): the cycles each run
    leaves (the construct parser's containers of a model read, a dropped plan) went into the
    oldest generation with the plan, and gc.freeze() zeroed the counts CPython would have
    collected it by: they stayed for good (some 6 KB per read and plan)."""
    from nrtrewrite import memtune
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.reader import read_model

    model = read_model(Path(__file__).parent.parent / "fixtures" / "mix8.neff")
    monkeypatch.setattr(memtune, "FULL_COLLECT_MIN", 1)  # any promotion is enough
    monkeypatch.setattr(memtune, "_alive", 0)
    monkeypatch.setattr(memtune, "_promoted", 0)
    ref = _cycle_in_oldest_generation()
    plan_lowering(model, LowerOptions())  # nothing promoted by us yet: no full collection
    assert ref() is not None
    plan_lowering(model, LowerOptions())  # the first plan promoted objects: collected first
    assert ref() is None


def test_one_plan_never_pays_for_a_full_collection(monkeypatch):
    """The CLI plans once: its planning never walks the heap in a full collection."""
    from nrtrewrite import memtune
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.reader import read_model

    model = read_model(Path(__file__).parent.parent / "fixtures" / "mix8.neff")
    monkeypatch.setattr(memtune, "_alive", 0)
    monkeypatch.setattr(memtune, "_promoted", 0)
    full = []

    def seen(phase, info):
        if phase == "stop" and info["generation"] == 2:
            full.append(info)

    gc.callbacks.append(seen)
    try:
        plan_lowering(model, LowerOptions())
    finally:
        gc.callbacks.remove(seen)
    assert full == []
    assert memtune._promoted > 0  # what it made went into the oldest generation, counted
