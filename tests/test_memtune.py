"""memtune.frozen_gc: objects that exist on entry are out of the collector's reach for the
duration, and back afterwards unless something had frozen objects before."""

import gc

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
