"""Starting a thread never waits forever (review V2): a new thread that runs out of memory
as it starts never signals that it started, and ``Thread.start`` waited for it forever
(``lower`` hung instead of exiting 71).  The failure is injected: the thread's bootstrap
raises ``MemoryError`` before it signals, as CPython's does when it cannot make the new
thread's first objects (no real memory limit)."""

from __future__ import annotations

import threading
import time
import types

import pytest
from click.testing import CliRunner

from nrtrewrite import bundle, threads
from nrtrewrite.cli import EXIT_OUT_OF_MEMORY, main
from nrtrewrite.emit import legs
from test_atomic_output import FIX
from test_fork_pool import _within_hang_bound

#: (each injected failure is printed as unraisable by CPython, as a real one is)
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

#: (as nrtrewrite.cli words it, docs/CLI.md "Errors")
OOM_LINE = ("nrtrewrite: error: out of memory: 'nrtrewrite lower' needed more memory than the "
            "machine gave it (MemoryError; rerun with --traceback to see where)")


class _NoMemoryToStart(threading.Thread):
    """A thread whose bootstrap fails before it signals that it started: CPython prints the
    ``MemoryError`` as unraisable and the thread ends, its ``_started`` event never set."""

    def _bootstrap(self):
        raise MemoryError()


def _within(fn):
    """``fn()`` under test_fork_pool's hang bound, 20 s: what it raised (None if it
    returned); still running after it fails the test."""
    return _within_hang_bound(fn, seconds=20.0)


def _threading_with_failing_starts() -> types.SimpleNamespace:
    """A stand-in for a module's ``threading`` whose ``Thread`` cannot start."""
    return types.SimpleNamespace(**{**vars(threading), "Thread": _NoMemoryToStart})


def test_a_thread_that_cannot_start_raises_memory_error_not_a_hang():
    t = _NoMemoryToStart(target=lambda: None, name="nrtrewrite-test", daemon=True)
    began = time.monotonic()
    err = _within(lambda: threads.start(t, timeout=0.3))
    assert type(err) is MemoryError, repr(err)
    assert str(err) == ("thread nrtrewrite-test did not start within 0.3 s (no memory to "
                        "start it)")
    assert 0.3 <= time.monotonic() - began < 10


def test_a_thread_that_starts_runs_as_with_thread_start():
    ran = threading.Event()
    t = threading.Thread(target=ran.set, daemon=True)
    threads.start(t, timeout=5)
    t.join(5)
    assert ran.is_set() and not t.is_alive()
    with pytest.raises(RuntimeError, match="threads can only be started once"):
        threads.start(t)


def test_the_legs_consumer_thread_that_cannot_start_raises_memory_error(monkeypatch):
    monkeypatch.setattr(threads, "START_TIMEOUT_S", 0.3)
    monkeypatch.setattr(legs, "threading", _threading_with_failing_starts())
    err = _within(lambda: legs._Consumer({}, None))
    assert type(err) is MemoryError, repr(err)
    assert "thread nrtrewrite-sink did not start" in str(err)


def test_the_fsync_thread_that_cannot_start_raises_memory_error(monkeypatch, tmp_path):
    monkeypatch.setattr(threads, "START_TIMEOUT_S", 0.3)
    monkeypatch.setattr(bundle, "threading", _threading_with_failing_starts())
    err = _within(lambda: bundle._Syncer().add([tmp_path]))
    assert type(err) is MemoryError, repr(err)
    assert "thread nrtrewrite-fsync did not start" in str(err)


@pytest.mark.parametrize("jobs", [1, 2])
def test_lower_whose_sink_thread_cannot_start_is_out_of_memory(tmp_path, monkeypatch, jobs):
    """``lower`` with the legs' sink thread started for every rank (THREAD_BYTES 0) and
    unable to start: the out-of-memory line, status 71, nothing left (a worker with -j 2
    is forked with the patches in place); until review V2 it hung."""
    monkeypatch.setattr(threads, "START_TIMEOUT_S", 0.3)
    monkeypatch.setattr(legs, "threading", _threading_with_failing_starts())
    monkeypatch.setattr(legs.RankBuilder, "THREAD_BYTES", 0)
    out = tmp_path / "out"
    res = []
    assert _within(lambda: res.append(CliRunner().invoke(
        main, ["lower", "-q", str(FIX / "mix8.neff"), "-o", str(out), "-j", str(jobs)],
        prog_name="nrtrewrite"))) is None
    assert res[0].exit_code == EXIT_OUT_OF_MEMORY, (res[0].output, res[0].exception)
    assert res[0].stderr.splitlines() == [OOM_LINE]
    assert list(tmp_path.iterdir()) == []
