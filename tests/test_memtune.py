"""memtune.frozen_gc: objects that exist on entry are out of the collector's reach for the
duration, and back afterwards unless something had frozen objects before; the full
collections that freezing keeps CPython from running (collect_young, collect_when_planning)."""

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
    (which runs ldconfig in a subprocess, and gcc with temporary files where ldconfig does
    not list libc) is never called."""
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


def test_keep_freed_memory_without_mallopt_says_so(monkeypatch):
    """A C library without ``mallopt`` (musl, macOS): False, and the heap left as it is; a
    library that cannot be loaded gives no ``mallopt``."""
    from nrtrewrite import memtune

    monkeypatch.setattr(memtune, "_done", False)
    monkeypatch.setattr(memtune, "_mallopt_in", lambda library: None)
    assert memtune.keep_freed_memory() is False
    monkeypatch.undo()
    assert memtune._mallopt_in("/nonexistent/libc-of-nowhere.so") is None


class _Node:
    """A cycle the collector alone can free (and a weakref tells when it has)."""

    def __init__(self):
        self.me = self


def _young_cycle() -> weakref.ref:
    """A cycle that is garbage already, in the young generations (as the construct parser's
    containers of a model just read)."""
    node = _Node()
    ref = weakref.ref(node)
    del node
    return ref


def _model(name="mix8"):
    from nrtrewrite.neff.reader import read_model

    return read_model(Path(__file__).parent.parent / "fixtures" / f"{name}.neff")


def test_planning_frees_the_cycles_made_before_it():
    """gc.freeze() and unfreeze() at the end of planning move every object into the oldest
    generation unexamined and zero the counts CPython would collect it by: a cycle made
    just before (a model read) stayed for good (the fuzzer's RSS grew 5 - 7 KB per input)."""
    from nrtrewrite.lower import LowerOptions, plan_lowering

    model = _model()
    ref = _young_cycle()
    plan_lowering(model, LowerOptions())
    assert ref() is None


def test_a_rank_frees_the_cycles_made_before_it():
    from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering

    plan = plan_lowering(_model(), LowerOptions())
    ref = _young_cycle()
    lower_rank(plan, plan.world[0], sink=lambda name, arr: None)
    assert ref() is None


def test_a_full_collection_every_so_many_plans(monkeypatch):
    """What got into the oldest generation anyway is collected every FULL_COLLECT_PLANS
    plans; the collector switched off is left alone."""
    from nrtrewrite import memtune

    monkeypatch.setattr(memtune, "FULL_COLLECT_PLANS", 3)
    monkeypatch.setattr(memtune, "_plans", 0)
    ref = _young_cycle()
    gc.freeze()  # into the oldest generation, as planning does it
    gc.unfreeze()
    assert memtune.collect_when_planning() is False
    assert memtune.collect_when_planning() is False
    assert ref() is not None  # the young collections never look there
    assert memtune.collect_when_planning() is True
    assert ref() is None
    monkeypatch.setattr(gc, "isenabled", lambda: False)
    assert [memtune.collect_when_planning() for _ in range(5)] == [False] * 5


def test_planning_leaves_the_collector_as_it_found_it():
    """A caller that switched the collector off, or froze objects of its own, finds it so
    after planning: still off, and its frozen objects still frozen (planning moves its own
    objects into the oldest generation by a freeze and unfreeze only when nothing was
    frozen, which would unfreeze the caller's too); a young cycle is then not collected."""
    from nrtrewrite.lower import LowerOptions, plan_lowering

    model = _model()
    gc.disable()
    try:
        ref = _young_cycle()
        plan_lowering(model, LowerOptions())
        assert not gc.isenabled()
        assert ref() is not None  # nothing collected with the collector off
    finally:
        gc.enable()
    ref = _young_cycle()
    gc.freeze()
    try:
        plan_lowering(model, LowerOptions())
        gc.collect()
        assert gc.isenabled() and ref() is not None  # still frozen: out of the collector's reach
    finally:
        gc.unfreeze()
    gc.collect()
    assert ref() is None


def test_one_plan_never_pays_for_a_full_collection(monkeypatch):
    """The CLI plans once: its planning never walks the heap in a full collection."""
    from nrtrewrite import memtune
    from nrtrewrite.lower import LowerOptions, plan_lowering

    model = _model()
    monkeypatch.setattr(memtune, "_plans", 0)
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


def test_renameat2_is_found_without_running_ldconfig(monkeypatch, tmp_path):
    """The output's atomic rename looks up renameat2 in the process's own symbols: a
    ``find_library`` there ran ``ldconfig`` on every ``lower`` and, where that did not list
    libc, gcc and ld writing temporary files in TMPDIR (found by a fault audit)."""
    import ctypes.util
    import platform

    from nrtrewrite import bundle

    def no_find(name):
        raise AssertionError("find_library was called")

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    monkeypatch.setattr(ctypes.util, "find_library", no_find)
    bundle._renameat2.cache_clear()
    try:
        assert bundle._renameat2() is not None  # glibc >= 2.28 has it
        a, b = tmp_path / "a", tmp_path / "b"
        a.write_text("a")
        b.write_text("b")
        assert bundle._exchange(a, b)
        assert (a.read_text(), b.read_text()) == ("b", "a")
        with pytest.raises(FileExistsError):
            bundle._rename_noreplace(a, b)
    finally:
        bundle._renameat2.cache_clear()
