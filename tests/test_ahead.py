"""Compose ahead (docs/PERFORMANCE.md "Compose ahead"): ``ForkAhead`` returns ``fn(item)``
of every item in order, through its shared ring or, when a result does not fit, through the
pipe; a failure comes back as ``None``; and ``lower_rank(..., compose_ahead=True)`` emits the
bytes of the serial path, and raises the serial path's error; a short run never hands over."""

import multiprocessing
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite import ahead
from nrtrewrite.ahead import ForkAhead, ForkCall
from nrtrewrite.emit import formats as F
from nrtrewrite.errors import NrtRewriteError
from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
from nrtrewrite.neff.reader import read_model

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def _children():
    return [p for p in multiprocessing.active_children() if p.name == "nrtrewrite-ahead"]


def _result(i):
    # sizes from 8 bytes to 80 KB: with a 64 KiB ring some fit, some wrap, some take the pipe
    return {"i": i, "data": np.arange((i * 7919) % 10000, dtype=np.int64) * i}


@pytest.mark.parametrize("ring_bytes", [64 << 10, 1 << 20, ahead.RING_BYTES])
@pytest.mark.parametrize("lookahead", [1, 4, 16])
def test_results_in_order_through_ring_and_pipe(ring_bytes, lookahead):
    items = list(range(60))
    with ForkAhead(_result, lookahead=lookahead, ring_bytes=ring_bytes) as pipe:
        got = list(pipe.map(items[:25])) + list(pipe.map(items[25:]))  # two maps, one process
    assert [item for item, _r, _dt in got] == items
    for item, res, dt in got:
        want = _result(item)
        assert res["i"] == item and np.array_equal(res["data"], want["data"])
        assert dt >= 0
    assert not _children()


def _slow_in_the_process(i):
    """The item and the process that computed it; slow in the forked process, so that the
    consumer, waiting, computes some items itself."""
    if multiprocessing.parent_process() is not None:
        time.sleep(0.02)
    return i, os.getpid()


@pytest.mark.parametrize("lookahead", [1, 3, 16])
def test_steal_computes_items_here_while_waiting_and_keeps_the_order(lookahead):
    with ForkAhead(_slow_in_the_process, lookahead=lookahead, steal=True) as pipe:
        got = list(pipe.map(range(40)))
        assert pipe.here_s > 0
    assert [item for item, _r, _dt in got] == list(range(40))
    assert [r[0] for _i, r, _dt in got] == list(range(40))
    where = {pid for _i, (_item, pid), _dt in got}
    assert os.getpid() in where and len(where) == 2  # both processes computed items
    assert not _children()


def _slow_there_fails_here_on_3(i):
    if multiprocessing.parent_process() is not None:
        time.sleep(0.2 if i == 0 else 0)
        return i
    if i == 3:
        raise ValueError("three, here")
    return -i


def test_steal_a_failure_here_comes_back_as_none():
    """Items 0 and 1 go to the process (lookahead 2); waiting for the slow item 0, this
    process computes items 2 and 3 itself, and 3 fails here."""
    with ForkAhead(_slow_there_fails_here_on_3, lookahead=2, steal=True) as pipe:
        got = [(item, res) for item, res, _dt in pipe.map(range(5))]
    assert got == [(0, 0), (1, 1), (2, -2), (3, None), (4, 4)]


def _fails_on_3(i):
    if i == 3:
        raise ValueError("three")
    return i * i


@pytest.mark.parametrize("steal", [False, True])
def test_a_failure_comes_back_as_none_and_the_rest_goes_on(steal):
    with ForkAhead(_fails_on_3, steal=steal) as pipe:
        got = [(item, res) for item, res, _dt in pipe.map(range(6))]
    assert got == [(0, 0), (1, 1), (2, 4), (3, None), (4, 16), (5, 25)]


def _dies_on_3(i):
    if i == 3:
        os._exit(9)
    return i


def test_a_dead_process_raises_ahead_lost_at_the_first_missing_item():
    got = []
    with ForkAhead(_dies_on_3) as pipe:
        with pytest.raises(ahead.AheadLost) as lost:
            for item, res, _dt in pipe.map(range(8)):
                got.append(res)
    assert got == [0, 1, 2] and lost.value.k == 3
    assert not _children()


def test_a_process_dead_while_the_first_items_are_handed_out_delivers_what_it_sent():
    """Bug (a fresh clone's `make test`, 1 run in many): the process died on item 3 while
    ``map`` was still handing out items 4.. (LOOKAHEAD 16 > 8 items): the send failed with
    a closed pipe and ``map`` raised ``AheadLost(0)`` at once, though items 0..2 were in the
    pipe.  Made certain here: item 4 is handed out only once the process has exited."""
    got = []
    with ForkAhead(_dies_on_3) as pipe:
        real = pipe.tasks

        class _SendAfterTheExit:
            def send(self, task):
                if task is not None and task[0] == 4:
                    pipe.proc.join(30)  # (it exits on item 3, handed out before this one)
                    assert pipe.proc.exitcode == 9
                real.send(task)

            def __getattr__(self, name):
                return getattr(real, name)

        pipe.tasks = _SendAfterTheExit()
        with pytest.raises(ahead.AheadLost) as lost:
            for item, res, _dt in pipe.map(range(8)):
                got.append(res)
    assert got == [0, 1, 2] and lost.value.k == 3
    assert not _children()


def test_a_process_dead_before_the_map_raises_ahead_lost_at_item_0():
    """The process killed (the out-of-memory killer) before ``map`` hands it anything:
    ``AheadLost`` names item 0, so the caller computes every item itself."""
    with ForkAhead(_result) as pipe:
        pipe.proc.kill()
        pipe.proc.join()
        with pytest.raises(ahead.AheadLost) as lost:
            next(pipe.map(range(4)))
    assert lost.value.k == 0 and "before item 0" in str(lost.value)
    assert not _children()


def test_leaving_early_kills_a_process_busy_on_a_long_item(monkeypatch):
    """A process still computing an item when the consumer leaves (an error in the
    emitter while a large trigger is composed ahead) does not read the stop in time: it is
    killed, and nothing of it runs on after ``close``."""
    monkeypatch.setattr(ahead, "CLOSE_WAIT_S", 0.2)  # (the wait before the kill)
    with ForkAhead(lambda i: time.sleep(3600) if i == 1 else i, lookahead=2) as pipe:
        for item, res, _dt in pipe.map(range(4)):
            assert (item, res) == (0, 0)
            break
    assert not _children()


def test_leaving_early_with_a_result_blocked_in_the_pipe_stops_the_process_itself(monkeypatch):
    """``close`` closes its end of the results pipe first: the process, blocked writing a
    result through the pipe, has its send fail and returns (exit status 0) while ``close``
    waits; it is not left blocked until killed after CLOSE_WAIT_S (exit status -SIGKILL).
    The wait is made long, so that a loaded machine cannot turn the one into the other."""
    monkeypatch.setattr(ahead, "CLOSE_WAIT_S", 30)
    with ForkAhead(lambda i: bytes(200_000), ring_bytes=64 << 10, lookahead=8) as pipe:
        for item, _res, _dt in pipe.map(range(8)):
            break  # the process is blocked writing item 1 through the pipe
    assert pipe.proc.exitcode == 0
    assert not _children()


def test_leaving_early_stops_the_process():
    with ForkAhead(_result, lookahead=4) as pipe:
        for item, _res, _dt in pipe.map(range(100)):
            if item == 2:
                break
    assert not _children()
    with ForkAhead(_result):  # never used
        pass
    assert not _children()


@pytest.fixture(scope="module")
def node64():
    return read_model(FIX / "node64.neff")


@pytest.fixture
def ahead_at_once(monkeypatch):
    """The process takes over from the first trigger (node64 has only a few triggers)."""
    import nrtrewrite.lower as lower

    monkeypatch.setattr(lower, "AHEAD_MIN_TRIGGERS", 1)
    monkeypatch.setattr(lower, "AHEAD_AFTER_S", 0.0)
    monkeypatch.setattr(lower, "AHEAD_MIN_COMPOSE_SHARE", 0.0)


@pytest.mark.parametrize("rank", [0, 37])
def test_lower_rank_compose_ahead_emits_the_serial_bytes(node64, rank, ahead_at_once):
    serial = lower_rank(plan_lowering(node64, LowerOptions()), rank)
    piped = lower_rank(plan_lowering(node64, LowerOptions()), rank, compose_ahead=True)
    assert piped.manifest == serial.manifest
    for name in F.ARTIFACTS:
        assert (b"".join(p.tobytes() for p in piped.files[name])
                == b"".join(p.tobytes() for p in serial.files[name])), name
    assert "compose_wait" in piped.timings and "compose_wait" not in serial.timings
    assert not _children()


def test_composing_a_small_share_of_the_run_is_never_handed_over(node64, monkeypatch):
    """docs/PERFORMANCE.md "Compose ahead": the process takes over only if composing has
    taken at least AHEAD_MIN_COMPOSE_SHARE of the run so far; a share it cannot reach
    (200 %) keeps every trigger composed here, however long the run: the serial bytes, and
    no time spent waiting for the process (no ``compose_wait``)."""
    import nrtrewrite.lower as lower

    monkeypatch.setattr(lower, "AHEAD_MIN_TRIGGERS", 1)
    monkeypatch.setattr(lower, "AHEAD_AFTER_S", 0.0)
    monkeypatch.setattr(lower, "AHEAD_MIN_COMPOSE_SHARE", 2.0)
    serial = lower_rank(plan_lowering(node64, LowerOptions()), 0)
    here = lower_rank(plan_lowering(node64, LowerOptions()), 0, compose_ahead=True)
    assert here.manifest == serial.manifest
    for name in F.ARTIFACTS:
        assert (b"".join(p.tobytes() for p in here.files[name])
                == b"".join(p.tobytes() for p in serial.files[name])), name
    assert "compose_wait" not in here.timings
    assert not _children()


def test_lower_rank_compose_ahead_raises_the_serial_error(node64, monkeypatch, ahead_at_once):
    plan = plan_lowering(node64, LowerOptions())
    victim = plan.triggers[2]
    real = victim.algorithm.entries

    def entries(p, tp, rank):
        if tp is victim:
            raise NrtRewriteError("composer refused this trigger")
        return real(p, tp, rank)

    monkeypatch.setattr(victim, "algorithm", type("A", (), {"entries": staticmethod(entries)}))
    with pytest.raises(NrtRewriteError, match="composer refused") as serial:
        lower_rank(plan, 0)
    with pytest.raises(NrtRewriteError, match="composer refused") as piped:
        lower_rank(plan, 0, compose_ahead=True)
    assert str(piped.value) == str(serial.value)
    assert not _children()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_one_rank_with_two_workers_writes_the_serial_output(node64, tmp_path, ahead_at_once):
    from nrtrewrite.bundle import write_output

    plan = plan_lowering(node64, LowerOptions())
    a = write_output(plan, tmp_path / "serial", ranks=[5], workers=1)
    b = write_output(plan, tmp_path / "ahead", ranks=[5], workers=2)
    assert _tree(a) == _tree(b)
    assert not _children()


def test_a_short_run_composes_here(node64):
    out = lower_rank(plan_lowering(node64, LowerOptions()), 0, compose_ahead=True)
    assert "compose_wait" not in out.timings
    assert not _children()


def test_lower_rank_survives_a_killed_compose_process(node64, monkeypatch, ahead_at_once):
    serial = lower_rank(plan_lowering(node64, LowerOptions()), 0)
    plan = plan_lowering(node64, LowerOptions())
    parent = os.getpid()
    victim = plan.triggers[2]
    real = victim.algorithm.entries

    def entries(p, tp, rank):
        if tp is victim and os.getpid() != parent:
            os._exit(9)  # the compose process is killed mid-run
        return real(p, tp, rank)

    monkeypatch.setattr(victim, "algorithm", type("A", (), {"entries": staticmethod(entries)}))
    piped = lower_rank(plan, 0, compose_ahead=True)
    assert piped.manifest == serial.manifest
    for name in F.ARTIFACTS:
        assert (b"".join(p.tobytes() for p in piped.files[name])
                == b"".join(p.tobytes() for p in serial.files[name])), name
    assert not _children()


# -- ForkCall: the top-level manifest's triggers encoded while the ranks are lowered ----------

def _call_children():
    return [p for p in multiprocessing.active_children() if p.name == "nrtrewrite-call"]


def test_fork_call_returns_the_bytes_computed_there():
    parent = os.getpid()
    with ForkCall(lambda: b"x" * 3_000_000 + str(os.getpid() != parent).encode()) as call:
        got = call.result()
    assert got == b"x" * 3_000_000 + b"True"  # through the pipe, computed in the child
    assert not _call_children()


def test_fork_call_failure_or_death_gives_none():
    def fails():
        raise ValueError("no")

    with ForkCall(fails) as call:
        assert call.result() is None
    with ForkCall(lambda: os._exit(9)) as call:
        assert call.result() is None
    assert not _call_children()


def test_fork_call_closed_unread_stops_the_process():
    """Leaving the ``with`` unread kills the process (exit status -SIGKILL) and reaps it;
    it is not waited for until ``fn`` returns (exit status 0, 30 s on)."""
    with ForkCall(lambda: time.sleep(30) or b"") as call:
        pass
    assert call.proc.exitcode == -signal.SIGKILL
    assert not _call_children()


@pytest.mark.parametrize("ranks", [[5], [0, 7, 63]])
def test_triggers_encoded_ahead_give_the_serial_output(node64, tmp_path, monkeypatch, ranks):
    """With the triggers of the top-level manifest encoded in a forked process (node64 has
    fewer triggers than the threshold: lowered to 1), every byte is the serial output's."""
    import nrtrewrite.bundle as bundle

    plan = plan_lowering(node64, LowerOptions())
    a = bundle.write_output(plan, tmp_path / "serial", ranks=ranks, workers=1)
    monkeypatch.setattr(bundle, "MANIFEST_AHEAD_TRIGGERS", 1)
    b = bundle.write_output(plan, tmp_path / "ahead", ranks=ranks, workers=2)
    assert _tree(a) == _tree(b)
    assert not _call_children() and not _children()


def test_triggers_that_fail_ahead_are_encoded_here(node64, tmp_path, monkeypatch):
    """The forked process that encodes the top-level manifest's triggers fails (its
    encoder raises there, or it is killed): they are encoded by the run itself, and the
    output is every byte the serial one."""
    import nrtrewrite.bundle as bundle

    plan = plan_lowering(node64, LowerOptions())
    a = bundle.write_output(plan, tmp_path / "serial", ranks=[0, 63], workers=1)
    monkeypatch.setattr(bundle, "MANIFEST_AHEAD_TRIGGERS", 1)
    parent, real = os.getpid(), bundle._triggers_json

    def fails_in_the_child(p):
        if os.getpid() != parent:
            raise MemoryError
        return real(p)
    monkeypatch.setattr(bundle, "_triggers_json", fails_in_the_child)
    b = bundle.write_output(plan, tmp_path / "ahead", ranks=[0, 63], workers=2)
    assert _tree(a) == _tree(b)
    assert not _call_children() and not _children()


def _no_memory_to_send_in_a_child(monkeypatch, name: str) -> None:
    """``Connection.NAME`` raises ``MemoryError`` in a forked process (as sending a large
    result may), and works in this one."""
    import multiprocessing.connection as conn

    parent, real = os.getpid(), getattr(conn.Connection, name)

    def send(self, *a, **kw):
        if os.getpid() != parent:
            raise MemoryError()
        return real(self, *a, **kw)
    monkeypatch.setattr(conn.Connection, name, send)


def test_fork_call_with_no_memory_to_send_gives_none_quietly(monkeypatch, capfd):
    """Review 54g F2: a ``MemoryError`` sending the bytes escaped the process (multiprocessing
    printed its traceback, and ``lower`` went on to exit 0); now it ends quietly and the
    caller computes them itself (``None``)."""
    _no_memory_to_send_in_a_child(monkeypatch, "send_bytes")
    with ForkCall(lambda: b"x" * 1000) as call:
        assert call.result() is None
        proc = call.proc
    assert proc.exitcode == 0
    assert "Traceback" not in capfd.readouterr().err


def test_fork_ahead_with_no_memory_to_send_stops_quietly(monkeypatch, capfd):
    """The compose-ahead process the same way: it stops, the consumer computes the rest."""
    _no_memory_to_send_in_a_child(monkeypatch, "send")
    with ForkAhead(_result) as pipe:
        with pytest.raises(ahead.AheadLost) as info:
            list(pipe.map(range(3)))
        pipe.proc.join(30)
        assert pipe.proc.exitcode == 0
    assert info.value.k == 0
    assert "Traceback" not in capfd.readouterr().err
