"""The pool of ``lower -j N`` (``nrtrewrite.ahead.ForkPool``): results in item order, an
exception of a worker raised where its item comes, and a worker that dies - SIGKILL, as the
kernel's out-of-memory killer sends - raises instead of hanging (``multiprocessing.Pool``
replaced such a worker and waited forever for the rank it held: ``lower -j 2`` hung until it
was killed)."""

from __future__ import annotations

import json
import os
import pickle
import signal
import threading
import time

import pytest
from click.testing import CliRunner

import nrtrewrite.errors as errors_mod
import nrtrewrite.lower as lower_mod
from nrtrewrite.ahead import ForkPool, WorkerLost
from nrtrewrite.cli import main
from nrtrewrite.errors import NrtRewriteError
from test_atomic_output import FIX


def _square_slowly(i):
    time.sleep(0.002 * (i % 3))  # out of order across the workers
    return i * i, os.getpid()


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_come_in_item_order(workers):
    items = list(range(23))
    with ForkPool(_square_slowly, workers) as pool:
        got = list(pool.imap(items))
    assert [item for item, _ in got] == items
    assert [res for _, (res, _pid) in got] == [i * i for i in items]
    assert len({pid for _, (_res, pid) in got}) <= workers
    assert all(pid != os.getpid() for _, (_res, pid) in got)


def _fail_at_5(i):
    if i == 5:
        raise ValueError(f"item {i} refused")
    return i


def test_an_exception_is_raised_where_its_item_comes():
    seen = []
    with ForkPool(_fail_at_5, 2) as pool:
        with pytest.raises(ValueError, match="item 5 refused"):
            for item, res in pool.imap(range(10)):
                seen.append(res)
    assert seen == [0, 1, 2, 3, 4]


def _die_at_4(i):
    if i == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    return i


def _within_hang_bound(fn, seconds=60):
    """``fn()`` run in a thread: what it raised (None if it returned).  A hang bound, not a
    measure of speed: ``fn`` must return on its own well inside it; still running after it
    fails the test (where a wait for a lost item would hang it)."""
    raised = []

    def run():
        try:
            fn()
        except BaseException as exc:  # handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=seconds)
    assert not thread.is_alive(), f"still waiting after {seconds} s (hung)"
    return raised[0] if raised else None


def test_a_killed_worker_raises_worker_lost_naming_its_item():
    with ForkPool(_die_at_4, 2) as pool:
        err = _within_hang_bound(lambda: list(pool.imap(range(10))))
        procs = [p for p, _t, _r in pool.workers]
    assert isinstance(err, WorkerLost), err
    assert err.item == 4 and err.exitcode == -signal.SIGKILL
    assert all(not p.is_alive() for p in procs)  # the other worker is reaped on leaving


def _killed_and_closed(proc) -> None:
    """SIGKILL ``proc`` and wait until it is a zombie (or gone): its file descriptors, its
    task pipe's only reader among them, are closed then; not reaped (the pool joins it)."""
    os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while _alive(proc.pid):
        assert time.monotonic() < deadline, "the killed worker did not exit"
        time.sleep(0.005)


def _same(i):
    return i


def test_a_worker_dead_before_its_first_item_raises_worker_lost_naming_it():
    """A worker killed before ``imap`` hands it its first item: the hand-out's send raised
    ``BrokenPipeError``, which ``lower`` reported as ``cannot write the output: Broken pipe``
    naming neither worker nor rank."""
    with ForkPool(_same, 1) as pool:
        _killed_and_closed(pool.workers[0][0])
        with pytest.raises(WorkerLost) as info:
            list(pool.imap([7, 8]))
    assert (info.value.item, info.value.exitcode, info.value.handed) == (7, -signal.SIGKILL,
                                                                        False)
    assert str(info.value) == "the worker process exited (code -9) before it was handed 7"


class _KilledAtSecondSend:
    """A worker's task pipe end whose second ``send`` first kills the worker and waits until
    its pipe is closed: the worker delivered its first item and died idle (as the kernel's
    out-of-memory killer may end it right after it sent its result)."""

    def __init__(self, proc, conn):
        self.proc, self.conn, self.sends = proc, conn, 0

    def send(self, obj):
        self.sends += 1
        if self.sends == 2:
            _killed_and_closed(self.proc)
        self.conn.send(obj)

    def close(self):
        self.conn.close()


def test_a_worker_dead_idle_after_its_item_raises_worker_lost_naming_the_next():
    """Two workers hold items 0 and 1; the first to deliver dies before it is handed item
    2: ``WorkerLost`` names item 2, not handed (before: ``BrokenPipeError``)."""
    with ForkPool(_same, 2) as pool:
        pool.workers = [(proc, _KilledAtSecondSend(proc, tasks), results)
                        for proc, tasks, results in pool.workers]
        with pytest.raises(WorkerLost) as info:
            list(pool.imap(range(6)))
    assert (info.value.item, info.value.exitcode, info.value.handed) == (2, -signal.SIGKILL,
                                                                        False)


def test_leaving_early_kills_the_workers():
    """Left while both workers are busy (item 0 delivered; items 1 and 2 each sleep 60 s):
    both are killed (exit status -SIGKILL) and reaped, not waited for until their items
    are done (exit status 0)."""
    with ForkPool(lambda i: i if i == 0 else time.sleep(60), 2) as pool:
        it = pool.imap(range(4))
        assert next(it) == (0, 0)  # item 1 is with one worker, item 2 now with the other
        procs = [p for p, _t, _r in pool.workers]
        assert all(p.is_alive() for p in procs)
    assert [p.exitcode for p in procs] == [-signal.SIGKILL] * 2
    del it


def _lower_mix8_refused(tmp_path) -> list[str]:
    """``lower -q -j 2`` of mix8 into ``tmp_path``/out, refused (exit 2) with nothing left in
    ``tmp_path``: its stderr lines."""
    res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "mix8.neff"), "-o",
                                    str(tmp_path / "out"), "-j", "2"], prog_name="nrtrewrite")
    assert res.exit_code == 2, (res.output, res.exception)
    assert list(tmp_path.iterdir()) == []
    return res.stderr.splitlines()


def _kill_rank_3s_worker(monkeypatch) -> None:
    """The worker that lowers rank 3 kills itself (SIGKILL) as it emits, as the kernel's
    out-of-memory killer would."""
    real = lower_mod._emit_batch

    def emit(builder, plan, batch, r, *a, **kw):
        if r == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)


def test_lower_with_a_worker_killed_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """``lower -j 2`` of mix8 with rank 3's worker killed by SIGKILL: one line naming the
    model and the rank, exit 2, no output and no temporary folder (before: a hang)."""
    _kill_rank_3s_worker(monkeypatch)
    assert _lower_mix8_refused(tmp_path) == [
        f"nrtrewrite: error: {FIX / 'mix8.neff'}: rank 3: the worker process lowering this "
        "rank died (killed by SIGKILL, as the kernel's out-of-memory killer does); nothing "
        "was written: lower with fewer workers (-j 1), fewer ranks at once (--rank), or with "
        "more memory"]


def test_lower_with_a_worker_killed_idle_names_the_rank_it_was_to_get(tmp_path, monkeypatch):
    """``lower -j 2`` of mix8 with worker 0 killed before it is handed rank 0: one line naming
    the model and rank 0, saying the worker died before it was handed the rank (before:
    ``OUT: cannot write the output: Broken pipe``)."""
    import nrtrewrite.bundle as bundle_mod

    class FirstWorkerKilled(ForkPool):
        def __init__(self, fn, workers):
            super().__init__(fn, workers)
            _killed_and_closed(self.workers[0][0])
    monkeypatch.setattr(bundle_mod, "ForkPool", FirstWorkerKilled)
    assert _lower_mix8_refused(tmp_path) == [
        f"nrtrewrite: error: {FIX / 'mix8.neff'}: rank 0: the worker process that was to "
        "lower this rank died (killed by SIGKILL, as the kernel's out-of-memory killer does) "
        "before it was handed the rank; nothing was written: lower with fewer workers (-j 1), "
        "fewer ranks at once (--rank), or with more memory"]


@pytest.mark.parametrize("args", [["-j", "2"], ["--rank", "0", "-j", "2"]])
def test_ctrl_c_to_the_process_group_is_quiet_and_leaves_nothing(tmp_path, args):
    """A terminal's Ctrl-C sends SIGINT to every process of the foreground group: the
    lowering process and its forked ones (pool workers, the compose-ahead process, the
    manifest's encoder).  Only ``Aborted!`` is printed - no forked process's traceback
    (before: ``Process nrtrewrite-call: Traceback ... KeyboardInterrupt``) - and nothing is
    left."""
    import subprocess

    from test_atomic_output import ROOT, env, lower_cmd

    out = tmp_path / "out"
    proc = subprocess.Popen(lower_cmd(FIX / "node64.neff", "-o", out, *args), cwd=ROOT,
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,  # its own process group
                            preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                             signal.default_int_handler))
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.tmp-*")) and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    time.sleep(0.3)  # the forked processes are at work
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if out.exists():  # the output was complete before Ctrl-C (then exit 0, or -2 when the
        pytest.skip("the lowering finished before Ctrl-C")  # signal hit the exit itself)
    assert proc.returncode == 130 and err == "Aborted!\n", err  # one line, no blank one
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def ctrl_c_raises():
    """SIGINT as an interactive Python has it (KeyboardInterrupt), whatever this process
    inherited: a test run started in the background of a non-interactive shell has SIGINT
    ignored, and forked processes inherit that (both tests below then saw the workers live
    on after SIGINT: the shell's doing, not the code's)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_an_interrupted_forked_process_ends_quietly(capfd, ctrl_c_raises):
    """SIGINT to an idle pool worker and an idle compose-ahead process (waiting for their
    next item): each ends with status 130 (128 + SIGINT) and prints nothing (before: a traceback each,
    ``Process nrtrewrite-worker: ... KeyboardInterrupt``)."""
    from nrtrewrite.ahead import ForkAhead

    with ForkPool(_square_slowly, 1) as pool, ForkAhead(_square_slowly) as ahead_:
        procs = [pool.workers[0][0], ahead_.proc]
        time.sleep(0.2)  # both are in their recv
        for p in procs:
            os.kill(p.pid, signal.SIGINT)
        for p in procs:
            p.join(10)
        assert [p.exitcode for p in procs] == [130, 130]
    assert "Traceback" not in capfd.readouterr().err


def _interrupt_at_3(i):
    if i == 3:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)  # not reached: the signal's KeyboardInterrupt is raised first
    return i


def test_a_worker_interrupted_alone_exits_130_and_raises_worker_lost(ctrl_c_raises):
    """SIGINT to one busy worker only (not the process group): it ends quietly with status
    130 (128 + SIGINT, as the CLI's own Ctrl-C), not 0, so the pool's report can say it was
    interrupted (before: ``died (exit status 0)`` and advice about memory)."""
    with ForkPool(_interrupt_at_3, 2) as pool:
        with pytest.raises(WorkerLost) as info:
            list(pool.imap(range(6)))
    assert (info.value.item, info.value.exitcode, info.value.handed) == (3, 130, True)


def test_lower_with_a_worker_interrupted_alone_says_so(tmp_path, monkeypatch, ctrl_c_raises):
    """``lower -j 2`` of mix8 with rank 3's worker sent SIGINT alone: one line saying it was
    interrupted, no memory advice (before: ``died (exit status 0); nothing was written: lower
    with fewer workers (-j 1), ... or with more memory``)."""
    real = lower_mod._emit_batch

    def emit(builder, plan, batch, r, *a, **kw):
        if r == 3:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(10)  # not reached
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)
    assert _lower_mix8_refused(tmp_path) == [
        f"nrtrewrite: error: {FIX / 'mix8.neff'}: rank 3: the worker process lowering this "
        "rank was interrupted (SIGINT); nothing was written"]


@pytest.mark.parametrize("exitcode, handed, says", [
    (-signal.SIGTERM, True, "the worker process lowering this rank died (killed by SIGTERM); "
                            "nothing was written"),
    (-signal.SIGKILL, False, "the worker process that was to lower this rank died (killed by "
                             "SIGKILL, as the kernel's out-of-memory killer does) before it was "
                             "handed the rank; nothing was written: lower with fewer workers "
                             "(-j 1), fewer ranks at once (--rank), or with more memory"),
    (130, False, "the worker process that was to lower this rank was interrupted (SIGINT) "
                 "before it was handed the rank; nothing was written"),
    (1, True, "the worker process lowering this rank exited (status 1) without its result; "
              "nothing was written"),
    (0, False, "the worker process that was to lower this rank exited (status 0) before it "
               "was handed the rank; nothing was written"),
    # a real-time signal (SIGRTMIN + 6 on Linux) has no name in signal.Signals: its number
    (-40, True, "the worker process lowering this rank died (killed by signal 40); nothing "
                "was written"),
])
def test_a_lost_workers_message_says_what_happened(exitcode, handed, says):
    """The memory advice only for SIGKILL (the out-of-memory killer's signal); an interrupt,
    another signal or an exit of its own is said as such."""
    from types import SimpleNamespace

    from nrtrewrite.bundle import _worker_lost

    plan = SimpleNamespace(model=SimpleNamespace(path="M.neff"))
    err = _worker_lost(plan, WorkerLost(5, exitcode, handed=handed))
    assert str(err) == f"M.neff: rank 5: {says}"


class _TwoArgs(Exception):
    """An exception pickle cannot bring back: ``args`` is ``(msg,)`` but ``__init__`` needs
    two arguments."""

    def __init__(self, a, b):
        super().__init__(f"weird {a} {b}")


def _raise_two_args(i):
    raise _TwoArgs(1, 2)


def _raise_value_error(i):
    raise ValueError(f"item {i}")


def test_an_exception_that_cannot_come_back_keeps_its_name_and_message():
    from nrtrewrite.ahead import RemoteError
    from nrtrewrite.cli import _one_line

    with ForkPool(_raise_two_args, 1) as pool:
        with pytest.raises(RemoteError) as info:
            list(pool.imap([0]))
    assert _one_line(info.value) == "_TwoArgs: weird 1 2"  # as in one process


def test_a_workers_exception_carries_its_traceback():
    """``--traceback`` with -j 2 shows where the worker raised (the cause's text)."""
    from nrtrewrite.ahead import RemoteTraceback

    with ForkPool(_raise_value_error, 2) as pool:
        with pytest.raises(ValueError, match="item 0") as info:
            list(pool.imap([0, 1]))
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "in _raise_value_error" in str(cause) and "ValueError: item 0" in str(cause)


def _children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_workers_die_with_a_killed_lower(tmp_path):
    """SIGKILL of `lower -j 2` (no cleanup can run): its pool workers die with it (Linux
    PR_SET_PDEATHSIG) instead of writing on into the temporary folder until their rank is
    done; the folder is left for the next run to remove (docs/RELIABILITY.md)."""
    import subprocess
    import sys

    from test_atomic_output import ROOT, env

    busy = tmp_path / "busy"  # each worker's pid, written when it starts its rank
    busy.mkdir()
    slow = ("import os, time, sys\n"
            "import nrtrewrite.bundle as B\n"
            "real = B._write_rank\n"
            "def slow(*a, **kw):\n"
            f"    open(os.path.join({str(busy)!r}, str(os.getpid())), 'w').close()\n"
            "    time.sleep(600)  # a rank that takes long: the worker is busy when killed\n"
            "    return real(*a, **kw)\n"
            "B._write_rank = slow\n"
            "from nrtrewrite.cli import main\n"
            "main(args=sys.argv[1:], prog_name='nrtrewrite')\n")
    proc = subprocess.Popen([sys.executable, "-c", slow, "lower", "-q", str(FIX / "mix8.neff"),
                             "-o", str(tmp_path / "out"), "-j", "2"],
                            cwd=ROOT, env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    kids: list[int] = []
    # the two pool workers, each busy with a rank: not the first two forks seen, which may
    # be processes that end on their own once the lowering is killed (the manifest's
    # encoder, the compose-ahead process), and so passed without PR_SET_PDEATHSIG
    while len(kids) < 2 and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
        kids = [int(p.name) for p in busy.iterdir()]
    if proc.poll() is not None:
        pytest.skip("the lowering finished before its workers were seen")
    assert set(kids) <= set(_children_of(proc.pid))
    proc.kill()
    proc.wait()
    try:
        # a hang bound: killed with their parent, they are gone at once; a worker that
        # outlived it would sleep 600 s on (and be killed below)
        deadline = time.monotonic() + 60
        while any(_alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(_alive(k) for k in kids), [k for k in kids if _alive(k)]
    finally:
        for k in kids:  # a failure leaves no orphan behind
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass


def test_no_python_code_of_ours_runs_in_the_parent_around_a_fork():
    """A signal's exception (SIGTERM's Terminated) raised inside an ``os.register_at_fork``
    callback is printed as "Exception ignored" and swallowed: ``lower`` then ran on and
    exited 0 with its output written (seen once in the SIGTERM test of a clean clone: the
    signal landed in ahead.py's ``before=`` callback recording the forker's pid). The pid
    is now passed to the forked process as an argument; no module of ours registers a
    callback that runs in the parent (``before`` / ``after_in_parent``): checked on the
    source (reloading the modules would replace classes other modules hold)."""
    import ast
    from pathlib import Path

    import nrtrewrite
    calls = []
    for path in Path(nrtrewrite.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "register_at_fork":
                calls.append((path.name, sorted(k.arg for k in node.keywords)))
    assert calls and all(kws == ["after_in_child"] for _name, kws in calls), calls


def _blocked_signals(_item=None):
    """This process's blocked signals, from /proc/self/status (SigBlk: a hex mask, bit
    n - 1 for signal n)."""
    with open("/proc/self/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigBlk:"))
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal masks")
def test_a_stopping_signal_during_a_fork_waits_until_the_fork_is_done():
    """A SIGTERM raised inside an at-fork callback is printed and dropped by Python (it
    happened once: ``lower`` went on and exited 0). The stopping signals are held while a
    process is forked, so one sent meanwhile is raised after the fork, where the parent is."""
    from nrtrewrite.ahead import _signals_held

    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop(signum)
    old = signal.signal(signal.SIGTERM, stop)
    try:
        inside = False
        with pytest.raises(Stop):
            with _signals_held() as held:
                assert {signal.SIGINT, signal.SIGTERM} <= held
                assert {signal.SIGINT, signal.SIGTERM} <= _blocked_signals()
                # at this thread (the forking one; under pytest-xdist other threads run too,
                # and a process-wide signal could land on one of them: the CLI forks before
                # starting any thread)
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
                time.sleep(0.05)
                inside = True  # not raised while held
        assert inside
        assert signal.SIGTERM not in _blocked_signals()
    finally:
        signal.signal(signal.SIGTERM, old)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="no /proc")
def test_forked_processes_start_with_the_stopping_signals_released():
    from nrtrewrite.ahead import ForkAhead, ForkCall

    stopping = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    assert not stopping & _blocked_signals()
    with ForkPool(_blocked_signals, 2) as pool:
        for _item, blocked in pool.imap([0, 1, 2]):
            assert not stopping & blocked
    call = ForkCall(lambda: repr(sorted(_blocked_signals())).encode())
    assert not stopping & set(eval(call.result()))  # noqa: S307 - our own repr of ints
    with ForkAhead(_blocked_signals) as ahead:
        for _item, blocked, _s in ahead.map([0, 1]):
            assert not stopping & blocked
    assert not stopping & _blocked_signals()


#: While true, every forked child of this process sends itself SIGINT from an at-fork
#: callback (registered once: at-fork callbacks cannot be removed).
_INTERRUPT_CHILDREN = [False]
_REGISTERED: list[bool] = []


def _interrupt_child():
    if _INTERRUPT_CHILDREN[0]:
        os.kill(os.getpid(), signal.SIGINT)


def test_a_ctrl_c_during_the_fork_ends_the_child_quietly(capfd, ctrl_c_raises):
    """A Ctrl-C that reached a child while it started (in an at-fork callback) was raised
    there, printed as ``Exception ignored`` and dropped, and the child went on to its work.
    The child now starts with the signal held until its body, which ends quietly on it. The
    window is made certain here: the child interrupts itself from an at-fork callback."""
    from nrtrewrite.ahead import ForkCall

    if not _REGISTERED:
        os.register_at_fork(after_in_child=_interrupt_child)
        _REGISTERED.append(True)
    _INTERRUPT_CHILDREN[0] = True
    try:
        call = ForkCall(lambda: b"done")
    finally:
        _INTERRUPT_CHILDREN[0] = False
    proc = call.proc
    assert call.result() is None  # interrupted before computing anything
    proc.join(10)
    assert proc.exitcode == 130  # 128 + SIGINT: ended by the interrupt
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception ignored" not in err, err


def _unpicklable_at_3(i):
    import threading
    return threading.Lock() if i == 3 else i


def test_a_result_that_cannot_be_sent_back_is_raised_naming_its_item():
    """A lock cannot be pickled: the worker's fallback sent a bare exception where imap
    unpacks (exception, traceback), which raised TypeError 'cannot unpack non-iterable
    RuntimeError object' and lost the message."""
    seen = []
    with ForkPool(_unpicklable_at_3, 2) as pool:
        with pytest.raises(RuntimeError) as exc:
            for item, res in pool.imap(range(6)):
                seen.append(res)
    assert seen == [0, 1, 2]
    assert str(exc.value).startswith("the result of item 3 could not be sent back (a result "
                                     "of type lock): ")


class _NoMemoryToPickle(bytes):
    """A result whose pickling runs out of memory, as a large one's may."""

    def __reduce__(self):
        raise MemoryError()


def _no_memory_to_send_at_3(i):
    return _NoMemoryToPickle(b"x") if i == 3 else i


def test_a_worker_with_no_memory_to_send_its_result_raises_memory_error(capfd):
    """Review 54g F2: a ``MemoryError`` while the worker sent its result escaped the worker
    (multiprocessing printed its traceback) and came back as the worker lost, ``exited
    (status 1) without its result``: now the worker exits ``OUT_OF_MEMORY`` quietly and
    ``imap`` raises ``MemoryError`` where the item comes."""
    from nrtrewrite.ahead import OUT_OF_MEMORY

    seen = []
    with ForkPool(_no_memory_to_send_at_3, 2) as pool:
        err = _within_hang_bound(lambda: seen.extend(r for _i, r in pool.imap(range(6))))
        procs = [p for p, _t, _r in pool.workers]
    assert isinstance(err, MemoryError), err
    assert str(err) == ("the worker process ran out of memory sending back the result of "
                        "item 3")
    assert seen == [0, 1, 2]
    assert OUT_OF_MEMORY in [p.exitcode for p in procs]
    assert "Traceback" not in capfd.readouterr().err


def test_lower_with_no_memory_to_send_a_rank_back_is_out_of_memory(tmp_path, monkeypatch):
    """``lower -j 2`` whose worker cannot pickle rank 3's result for want of memory: the
    out-of-memory line and status 71 (CLI.md "Errors"), nothing left (before: the worker's
    traceback, then ``rank 3: ... exited (status 1) without its result``, status 2)."""
    import nrtrewrite.bundle as bundle_mod

    real = bundle_mod._write_rank

    def write_rank(plan, tmp, rank, compose_ahead=False):
        r, man = real(plan, tmp, rank, compose_ahead)
        return r, (_NoMemoryToPickle(man) if rank == 3 else man)
    monkeypatch.setattr(bundle_mod, "_write_rank", write_rank)
    res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "mix8.neff"), "-o",
                                    str(tmp_path / "out"), "-j", "2"], prog_name="nrtrewrite")
    assert res.exit_code == 71, (res.output, res.exception)
    assert res.stderr.splitlines() == [
        "nrtrewrite: error: out of memory: 'nrtrewrite lower' needed more memory than the "
        "machine gave it (MemoryError; rerun with --traceback to see where)"]
    assert list(tmp_path.iterdir()) == []


def _dead(pid: int) -> bool:
    """Process ``pid`` (a child of the pool's process) has exited: a zombie, or reaped."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _refuse_0_once_1_died(item):
    """Item 1 kills its worker; item 0 is refused once that worker is dead (a zombie: its
    pipes are closed, the pool can see it), so the death is there to be seen first."""
    i, where = item
    if i == 1:
        where.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    if i == 0:
        deadline = time.monotonic() + 30
        while not (where.exists() and where.read_text() and _dead(int(where.read_text()))):
            assert time.monotonic() < deadline, "item 1's worker did not die"
            time.sleep(0.005)
        raise ValueError("item 0 refused")
    return i


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
def test_a_worker_lost_does_not_overtake_an_earlier_items_exception(tmp_path):
    """Review 54g F9: the death of the worker holding item 1 was raised the moment it was
    seen, ahead of item 0's exception (received, or still to come): the error named depended
    on the timing.  The first failure in item order is raised."""
    where = tmp_path / "pid"
    with ForkPool(_refuse_0_once_1_died, 2) as pool:
        err = _within_hang_bound(lambda: list(pool.imap([(0, where), (1, where)])))
    assert isinstance(err, ValueError) and str(err) == "item 0 refused", err


def _refuse_1_while_0_waits_for_2(item):
    """Item 1 is refused at once; item 0 waits (up to 3 s) for item 2 to start, which only a
    pool still handing out after a refusal does."""
    i, log = item
    with open(log, "a") as fh:
        fh.write(f"{i}\n")
    if i == 1:
        raise ValueError("item 1 refused")
    if i == 0:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and "2" not in log.read_text().split():
            time.sleep(0.01)
    return i


def test_an_exception_stops_the_hand_out_of_later_items(tmp_path):
    """Review 54g F8: after a worker sent back item 1's exception the pool still handed out
    items 2, 3, ... (lowered in full, then thrown away).  An exception stops the hand-out as a
    worker lost does; item 0, before it, is still waited for."""
    log = tmp_path / "log"
    log.write_text("")
    seen = []
    with ForkPool(_refuse_1_while_0_waits_for_2, 2) as pool:
        err = _within_hang_bound(
            lambda: seen.extend(r for _i, r in pool.imap([(i, log) for i in range(8)])))
    assert isinstance(err, ValueError) and str(err) == "item 1 refused", err
    assert seen == [0]
    assert sorted(log.read_text().split()) == ["0", "1"]


def _die_at_1(i):
    if i == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return i


def test_a_worker_lost_is_raised_after_the_earlier_items_are_yielded():
    """A death stops the hand-out, but the items before the lost one still come, in order."""
    seen = []
    with ForkPool(_die_at_1, 2) as pool:
        err = _within_hang_bound(lambda: seen.extend(r for _i, r in pool.imap(range(8))))
    assert isinstance(err, WorkerLost) and err.item == 1, err
    assert seen == [0]


def test_simulate_with_a_worker_killed_advises_what_simulate_has(tmp_path, monkeypatch):
    """Review 54g F1: ``simulate MODEL.neff`` whose lowering worker is killed (SIGKILL) advised
    ``lower with fewer workers (-j 1), fewer ranks at once (--rank)``: simulate has neither
    option.  Its advice names what it can do (CLI.md "simulate")."""
    import nrtrewrite.cli.simulate as simulate_mod

    _kill_rank_3s_worker(monkeypatch)
    monkeypatch.setattr(simulate_mod, "usable_cores", lambda: 2)  # a pool of 2 workers
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # (simulate makes its folder there)
    res = CliRunner().invoke(main, ["simulate", str(FIX / "mix8.neff")], prog_name="nrtrewrite")
    assert res.exit_code == 2, (res.output, res.exception)
    assert res.stderr.splitlines() == [
        f"nrtrewrite: error: {FIX / 'mix8.neff'}: rank 3: the worker process lowering this "
        "rank died (killed by SIGKILL, as the kernel's out-of-memory killer does); nothing "
        "was written: simulate with more memory, or lower the model with fewer workers "
        "(nrtrewrite lower -j 1) and simulate that output folder"]
    assert list(tmp_path.iterdir()) == []


def test_simulate_starts_no_more_workers_than_the_ranks(tmp_path, monkeypatch):
    """Review 54g F6: ``simulate MODEL.neff`` forked one lowering worker per usable core
    whatever the rank count (64 processes for mix8's 8 ranks on 64 cores); ``lower`` caps
    the pool at the ranks, and so does simulate now."""
    import nrtrewrite.bundle as bundle_mod
    import nrtrewrite.cli.simulate as simulate_mod

    pools = []

    class Recorded(ForkPool):
        def __init__(self, fn, workers):
            pools.append(workers)
            super().__init__(fn, workers)
    monkeypatch.setattr(bundle_mod, "ForkPool", Recorded)
    monkeypatch.setattr(simulate_mod, "usable_cores", lambda: 64)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # (simulate makes its folder there)
    res = CliRunner().invoke(main, ["simulate", str(FIX / "mix8.neff")], prog_name="nrtrewrite")
    assert res.exit_code == 0, (res.output, res.exception)
    assert pools == [8]  # mix8's world: 8 ranks


#: Every error class of errors.py (the one error family; docs/CLI.md "Errors").
_ERROR_CLASSES = sorted((c for c in vars(errors_mod).values()
                         if isinstance(c, type) and issubclass(c, NrtRewriteError)),
                        key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _ERROR_CLASSES, ids=lambda c: c.__name__)
def test_an_error_comes_back_from_pickling_with_the_same_args(cls):
    """An error whose line is past 1,000 characters (a reason of 5,000 and a long path) came
    back from pickling (a ``lower -j 2`` worker's) with another ``args[0]``: the line, cut
    again as a reason is (``str()`` the same)."""
    path = "d/" * 100 + "m.neff"
    err = cls("A" * 4999 + "Z", file=path, field="x", rank=3)
    # docs/CLI.md "Errors": the location, then the reason's first 700 and last 200 characters
    # around the whole's count
    line = (f"{path}: field x, rank 3: " + "A" * 700 + " ... (5000 characters in all) ... "
            + "A" * 199 + "Z")
    assert err.args == (line,) and len(line) > 1000
    back = pickle.loads(pickle.dumps(err, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(back) is cls
    assert back.args == (line,) and str(back) == line
    assert back.exit_code == (71 if cls is errors_mod.ResourceError else 2)
    assert (back.where, back.reason, back.reason_chars) == (err.where, err.reason, 5000)


def _raise_not_unicode(i):
    from nrtrewrite.neff.assembler import _NotUnicode
    raise _NotUnicode("a lone surrogate", ("key", "\ud800", False))


def test_an_error_whose_init_needs_more_than_a_reason_comes_back_as_itself():
    """The assembler's ``_NotUnicode(why, found)`` did not come back from a worker: pickle
    called it with the line alone, and the pool sent a ``RemoteError`` (an internal error)."""
    from nrtrewrite.neff.assembler import _NotUnicode

    with ForkPool(_raise_not_unicode, 1) as pool:
        with pytest.raises(_NotUnicode) as info:
            list(pool.imap([0]))
    assert str(info.value) == "a lone surrogate"
    assert info.value.found == ("key", "\ud800", False)


class _Unprintable:
    """A location part that cannot be pickled (it holds a lock): its text comes back."""

    def __init__(self):
        self.lock = threading.Lock()

    def __str__(self):
        return "the member"


class _Mixin:
    """A class pickled by name that is no error: never what a bare copy is made of."""


def _raise_holding_a_lock(i):
    if i == 0:
        err = errors_mod.LoweringError("refused", file="m.neff", rank=0)
    elif i == 1:
        class Local(errors_mod.ResourceError):  # not pickled by name: ResourceError is,
            exit_code = 75  # and comes back with this status
        err = Local("no room", file="m.neff", rank=1)
    elif i == 2:
        err = errors_mod.ValidationError("bad", file="m.neff", member=_Unprintable(),
                                         offset=16)
    else:
        class Mixed(_Mixin, errors_mod.SelectionError):  # its MRO: Mixed, _Mixin, ...
            pass
        err = Mixed("none legal", trigger=4)
    err.lock = threading.Lock()
    raise err


@pytest.mark.parametrize("i, cls, line, status", [
    (0, errors_mod.LoweringError, "m.neff: rank 0: refused", 2),
    (1, errors_mod.ResourceError, "m.neff: rank 1: no room", 75),
    (2, errors_mod.ValidationError, "m.neff: member the member, offset 0x10: bad", 2),
    (3, errors_mod.SelectionError, "trigger 4: none legal", 2),
])
def test_an_error_holding_what_cannot_be_pickled_comes_back_as_its_line(i, cls, line, status):
    """An error of ours with an attribute that cannot be pickled (a lock) came back as a
    ``RemoteError``: an internal error, status 70, where ``-j 1`` gives its line and its
    status.  Its class (else the nearest one pickled by name), reason, location and status
    come back."""
    with ForkPool(_raise_holding_a_lock, 1) as pool:
        with pytest.raises(NrtRewriteError) as info:
            list(pool.imap([i]))
    assert isinstance(info.value, cls)
    assert str(info.value) == line and info.value.args == (line,)
    assert info.value.exit_code == status
    assert not hasattr(info.value, "lock")


def test_lower_with_an_error_holding_a_lock_is_its_line_with_any_j(tmp_path, monkeypatch):
    """The planted refusal of rank 3 holding a lock: with -j 2 its one line and status 2, as
    with -j 1 (before: ``nrtrewrite: internal error: LoweringError: ...``, status 70)."""
    real = lower_mod._emit_batch

    def emit(builder, plan, batch, r, *a, **kw):
        if r == 3:
            err = errors_mod.LoweringError("planted refusal", file="x.neff", rank=r)
            err.lock = threading.Lock()
            raise err
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)
    for workers in ("1", "2"):
        res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "mix8.neff"), "-o",
                                        str(tmp_path / "out"), "-j", workers],
                                 prog_name="nrtrewrite")
        assert res.exit_code == 2, (workers, res.output, res.exception)
        assert res.stderr.splitlines() == ["nrtrewrite: error: x.neff: rank 3: planted refusal"]
        assert list(tmp_path.iterdir()) == []


def _exit_71_at_2(i):
    if i == 2:
        os._exit(71)  # by itself: not the pool's out-of-memory path
    return i


def test_a_worker_exiting_71_by_itself_is_lost_not_out_of_memory():
    """A worker's exit status 71 was read as "no memory to send its result back" whoever
    exited so; only a worker that marked itself out of memory is (the test above)."""
    seen = []
    with ForkPool(_exit_71_at_2, 2) as pool:
        err = _within_hang_bound(lambda: seen.extend(r for _i, r in pool.imap(range(6))))
    assert isinstance(err, WorkerLost), err
    assert (err.item, err.exitcode, err.handed) == (2, 71, True)
    assert seen == [0, 1]


def test_lower_with_a_worker_exiting_71_by_itself_says_it_exited(tmp_path, monkeypatch):
    """``lower -j 2`` whose worker for rank 3 exits 71 by itself: the lost worker's line
    (CLI.md "lower"), status 2, not the out-of-memory line and status 71."""
    real = lower_mod._emit_batch

    def emit(builder, plan, batch, r, *a, **kw):
        if r == 3:
            os._exit(71)
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)
    assert _lower_mix8_refused(tmp_path) == [
        f"nrtrewrite: error: {FIX / 'mix8.neff'}: rank 3: the worker process lowering this "
        "rank exited (status 71) without its result; nothing was written"]


def _raise_holding_no_memory_to_pickle(i):
    """Item 1 raises an exception whose pickling runs out of memory: an error of ours with an
    attribute that does, or a ``MemoryError`` of the item's own work whose argument does."""
    if i == 0:
        return i
    if i == 1:
        err = errors_mod.LoweringError("refused", file="m.neff", rank=1)
        err.big = _NoMemoryToPickle(b"x")
        raise err
    raise MemoryError(_NoMemoryToPickle(b"x"))


@pytest.mark.parametrize("item", [1, 2], ids=["error of ours", "MemoryError"])
def test_a_worker_with_no_memory_to_copy_its_exception_raises_memory_error(item, capfd):
    """Review 55k: a ``MemoryError`` while the worker test-pickled its exception was read as
    "cannot be pickled": an error of ours came back as its bare copy (``-j 2`` gave
    ``internal error: LoweringError: ...``, 70, where ``-j 1`` gave its line, 2), a
    ``MemoryError`` as a ``RemoteError`` (``internal error: MemoryError``, 70, where ``-j 1``
    gave the out-of-memory line, 71).  The worker has no memory to send anything: it takes
    the out-of-memory path (marks its byte, exits ``OUT_OF_MEMORY``, no traceback)."""
    from nrtrewrite.ahead import OUT_OF_MEMORY

    seen = []
    with ForkPool(_raise_holding_no_memory_to_pickle, 1) as pool:
        err = _within_hang_bound(lambda: seen.extend(r for _i, r in pool.imap([0, item])))
        procs = [p for p, _t, _r in pool.workers]
    assert type(err) is MemoryError, repr(err)
    # (review 55r: "the result of item N" until 2026-12-07: the item had raised, no result)
    assert str(err) == ("the worker process ran out of memory sending back the exception "
                        f"item {item} raised")
    assert seen == [0]
    assert [p.exitcode for p in procs] == [OUT_OF_MEMORY]
    assert "Traceback" not in capfd.readouterr().err


def _no_memory_for_the_traceback_at_1(i):
    """Item 1 raises, and formatting its traceback in the worker runs out of memory (the
    worker's ``traceback`` module patched: a forked process, the test's is untouched)."""
    import traceback

    if i == 1:
        def no_memory(*_a, **_k):
            raise MemoryError()
        traceback.format_exc = no_memory
        raise ValueError("refused")
    return i


def test_a_worker_with_no_memory_to_format_its_traceback_raises_memory_error(capfd):
    """Review 55k: a ``MemoryError`` in ``traceback.format_exc()`` while the worker made the
    reply of its item's exception escaped the out-of-memory path: the worker printed its
    traceback and exited 1, a worker lost (``exited (status 1) without its result``)."""
    from nrtrewrite.ahead import OUT_OF_MEMORY

    seen = []
    with ForkPool(_no_memory_for_the_traceback_at_1, 2) as pool:
        err = _within_hang_bound(lambda: seen.extend(r for _i, r in pool.imap(range(4))))
        procs = [p for p, _t, _r in pool.workers]
    assert type(err) is MemoryError, repr(err)
    assert str(err) == ("the worker process ran out of memory sending back the exception "
                        "item 1 raised")  # (review 55r: "the result of item 1" until 2026-12-07)
    assert seen == [0]
    assert OUT_OF_MEMORY in [p.exitcode for p in procs]
    assert "Traceback" not in capfd.readouterr().err


_OUT_OF_MEMORY_LINE = ("nrtrewrite: error: out of memory: 'nrtrewrite {}' needed more memory "
                       "than the machine gave it (MemoryError; rerun with --traceback to see "
                       "where)")


def test_lower_with_no_memory_to_copy_a_ranks_error_is_out_of_memory(tmp_path, monkeypatch):
    """``lower -j 2`` whose worker refuses rank 3 with an error whose copy runs out of
    memory: the out-of-memory line, status 71, nothing left (CLI.md "Errors"; before:
    ``internal error: LoweringError: ...``, status 70)."""
    real = lower_mod._emit_batch

    def emit(builder, plan, batch, r, *a, **kw):
        if r == 3:
            err = errors_mod.LoweringError("planted refusal", file="x.neff", rank=r)
            err.big = _NoMemoryToPickle(b"x")
            raise err
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)
    res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "mix8.neff"), "-o",
                                    str(tmp_path / "out"), "-j", "2"], prog_name="nrtrewrite")
    assert res.exit_code == 71, (res.output, res.exception)
    assert res.stderr.splitlines() == [_OUT_OF_MEMORY_LINE.format("lower")]
    assert list(tmp_path.iterdir()) == []


def test_simulate_with_no_memory_to_format_a_ranks_traceback_is_out_of_memory(tmp_path,
                                                                              monkeypatch):
    """``simulate --json MODEL.neff`` with a pool of 2 whose worker refuses rank 3 and has no
    memory to format the traceback: the out-of-memory line, status 71, no traceback (before:
    the worker's traceback, then ``rank 3: ... exited (status 1) without its result``, 2)."""
    import traceback

    import nrtrewrite.cli.simulate as simulate_mod

    real = lower_mod._emit_batch
    here = os.getpid()

    def emit(builder, plan, batch, r, *a, **kw):
        if r == 3:
            # in the worker, a forked process: this one's traceback module stays whole
            assert os.getpid() != here, "rank 3 was lowered in the test's process"

            def no_memory(*_a, **_k):
                raise MemoryError()
            traceback.format_exc = no_memory
            raise errors_mod.LoweringError("planted refusal", file="x.neff", rank=r)
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)
    monkeypatch.setattr(simulate_mod, "usable_cores", lambda: 2)  # a pool of 2 workers
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # (simulate makes its folder there)
    res = CliRunner().invoke(main, ["simulate", "--json", str(FIX / "mix8.neff")],
                             prog_name="nrtrewrite")
    assert res.exit_code == 71, (res.output, res.exception)
    line = _OUT_OF_MEMORY_LINE.format("simulate")
    assert res.stderr.splitlines() == [line]
    doc = json.loads(res.stdout)
    assert (doc["error"], doc["error_trigger"]) == (line.removeprefix("nrtrewrite: error: "),
                                                    None)
    assert list(tmp_path.iterdir()) == []


def _raise_holding_a_lock_with_notes(i):
    err = errors_mod.LoweringError("refused", file="m.neff", rank=i)
    err.lock = threading.Lock()
    err.add_note("while lowering the first rank")
    err.add_note("\u00e9 second note")
    raise err


def test_an_error_holding_what_cannot_be_pickled_keeps_its_notes():
    """Review 55k: the bare copy of an error that cannot be pickled dropped its notes
    (``__notes__``), which ``--traceback`` prints under the error with ``-j 1``."""
    with ForkPool(_raise_holding_a_lock_with_notes, 1) as pool:
        with pytest.raises(errors_mod.LoweringError) as info:
            list(pool.imap([0]))
    assert str(info.value) == "m.neff: rank 0: refused"
    assert not hasattr(info.value, "lock")
    assert info.value.__notes__ == ["while lowering the first rank", "\u00e9 second note"]


def _refuse_0_while_1_is_slow(i):
    if i == 0:
        raise ValueError("zero")
    if i == 1:
        time.sleep(0.5)  # (so item 0's exception is raised while item 1 is still out)
    return i * 100


def test_a_pool_maps_once():
    """Review 55k: a second ``imap`` on one pool read what the first left behind as its own:
    item 1, out when item 0's exception stopped the first, came back as the second's
    first result (``[(10, 100), ...]``); a worker that ran out of memory in the first was
    ``WorkerLost(exitcode 71, handed=False)`` when handed the second's item.  A pool is one
    ``imap``: the second call is refused at once, before it hands anything out."""
    with ForkPool(_refuse_0_while_1_is_slow, 2) as pool:
        with pytest.raises(ValueError, match="^zero$"):
            list(pool.imap([0, 1]))
        with pytest.raises(RuntimeError, match="^a ForkPool maps once: its imap was called "
                                               "already$"):
            pool.imap([10, 11])


def _raise_with_notes(i):
    """Item ``i`` raises an exception with two notes: 0 one that pickles (a ``ValueError``),
    1 an error of ours holding a lock (sent as its bare copy), 2 one that cannot come back
    (sent as a ``RemoteError``, which carries no notes)."""
    err = (ValueError("refused") if i == 0
           else errors_mod.LoweringError("refused", file="m.neff", rank=i) if i == 1
           else _TwoArgs(1, 2))
    if i == 1:
        err.lock = threading.Lock()
    err.add_note("NOTE-A of the item")
    err.add_note("NOTE-B of the item")
    raise err


@pytest.mark.parametrize("item, last_line, notes_in_text", [
    (0, "ValueError: refused", False),
    (1, "nrtrewrite.errors.LoweringError: m.neff: rank 1: refused", False),
    (2, "nrtrewrite.ahead.RemoteError: weird 1 2", True),
], ids=["pickles", "bare copy", "remote error"])
def test_a_workers_notes_are_printed_once(item, last_line, notes_in_text):
    """Fixer 55o's Left: the notes of a worker's exception were printed twice by
    ``--traceback`` (``traceback.print_exception``): in the worker's traceback text (the
    raised exception's ``__cause__``) and under the raised exception itself.  Printed once,
    under the exception raised, as with ``-j 1``; where the exception that comes back has no
    notes (a ``RemoteError``), the worker's text keeps them."""
    import traceback

    with ForkPool(_raise_with_notes, 1) as pool:
        with pytest.raises(Exception) as info:
            list(pool.imap([item]))
    lines = "".join(traceback.format_exception(info.value)).splitlines()
    assert lines.count("NOTE-A of the item") == 1 and lines.count("NOTE-B of the item") == 1
    assert ("NOTE-A of the item" in info.value.__cause__.tb) is notes_in_text
    if not notes_in_text:  # under the raised exception's own line, its last lines
        assert lines[-3:] == [last_line, "NOTE-A of the item", "NOTE-B of the item"]


def test_lower_traceback_prints_a_ranks_notes_once_with_any_j(tmp_path, monkeypatch):
    """``--traceback lower -j 2`` of mix8 whose rank 3 is refused by an error with a note:
    the note once, as with ``-j 1``, under the error's traceback line, then the error's own
    line; status 2 with either."""
    real = lower_mod._emit_batch

    def emit(builder, plan, batch, r, *a, **kw):
        if r == 3:
            err = errors_mod.LoweringError("planted refusal", file="x.neff", rank=r)
            err.add_note("NOTE: planted for rank 3")
            raise err
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)
    for workers in ("1", "2"):
        res = CliRunner().invoke(main, ["--traceback", "lower", "-q", str(FIX / "mix8.neff"),
                                        "-o", str(tmp_path / "out"), "-j", workers],
                                 prog_name="nrtrewrite")
        assert res.exit_code == 2, (workers, res.output, res.exception)
        lines = res.stderr.splitlines()
        assert lines.count("NOTE: planted for rank 3") == 1, (workers, res.stderr)
        assert lines[-3:] == ["nrtrewrite.errors.LoweringError: x.neff: rank 3: planted refusal",
                              "NOTE: planted for rank 3",
                              "nrtrewrite: error: x.neff: rank 3: planted refusal"], workers
        assert list(tmp_path.iterdir()) == []


def _no_memory(*_args):
    raise MemoryError()


class _NoMemoryToUnpickle:
    """An item whose unpickling, in the worker that receives it, runs out of memory."""

    def __reduce__(self):
        return _no_memory, ()

    def __repr__(self):
        return "<item 1>"


def test_a_worker_with_no_memory_to_receive_its_item_raises_memory_error(capfd):
    """Fixer 55o's Left: a ``MemoryError`` while a worker unpickled its item escaped the
    worker (its traceback printed) and came back as the worker lost, exited 1.  It is the
    out-of-memory path, as a ``MemoryError`` while the worker sends back: ``imap`` raises
    ``MemoryError`` at the item's turn, the worker exited ``OUT_OF_MEMORY`` quietly."""
    from nrtrewrite.ahead import OUT_OF_MEMORY

    seen = []
    with ForkPool(_same, 2) as pool:
        err = _within_hang_bound(
            lambda: seen.extend(r for _i, r in pool.imap([0, _NoMemoryToUnpickle(), 2])))
        procs = [p for p, _t, _r in pool.workers]
    assert type(err) is MemoryError, repr(err)
    assert str(err) == "the worker process ran out of memory receiving item <item 1>"
    assert seen == [0]
    assert OUT_OF_MEMORY in [p.exitcode for p in procs]
    assert "Traceback" not in capfd.readouterr().err


def test_lower_with_no_memory_to_receive_a_rank_is_out_of_memory(tmp_path, monkeypatch):
    """``lower -j 2`` of mix8 whose worker that lowered rank 0 has no memory to unpickle the
    next rank it is handed: the out-of-memory line, status 71, nothing left (CLI.md
    "Errors"; before: the worker's traceback, then ``rank N: ... exited (status 1) without
    its result``, status 2)."""
    import multiprocessing.connection

    real = lower_mod._emit_batch
    here = os.getpid()

    class NoMemoryToUnpickle:
        loads = staticmethod(_no_memory)

    def emit(builder, plan, batch, r, *a, **kw):
        if r == 0 and os.getpid() != here:  # in the worker (forked): the test's untouched
            multiprocessing.connection._ForkingPickler = NoMemoryToUnpickle
        return real(builder, plan, batch, r, *a, **kw)
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)
    res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "mix8.neff"), "-o",
                                    str(tmp_path / "out"), "-j", "2"], prog_name="nrtrewrite")
    assert res.exit_code == 71, (res.output, res.exception)
    assert res.stderr.splitlines() == [_OUT_OF_MEMORY_LINE.format("lower")]
    assert list(tmp_path.iterdir()) == []


def _killed_once_marked(status=None):
    os.kill(os.getpid(), signal.SIGKILL)


def _killed_once_marked_at_1(i):
    """Item 1's result cannot be pickled for want of memory, and the worker is killed
    (SIGKILL) after it marks itself out of memory, before it exits: its exits (``sys.exit``
    and ``os._exit``, patched in the forked worker only) kill it instead."""
    import sys

    if i == 1:
        sys.exit = os._exit = _killed_once_marked
        return _NoMemoryToPickle(b"x")
    return i


def test_a_worker_killed_once_marked_out_of_memory_is_lost():
    """Fixer 55o's Left: a worker marked out of memory and then killed by SIGKILL before it
    exits was reported out of memory (the mark alone was read).  The mark counts with the
    exit status :data:`OUT_OF_MEMORY` only: killed, it is a worker lost, its exit code the
    signal's."""
    seen = []
    with ForkPool(_killed_once_marked_at_1, 2) as pool:
        err = _within_hang_bound(lambda: seen.extend(r for _i, r in pool.imap(range(4))))
    assert isinstance(err, WorkerLost), repr(err)
    assert (err.item, err.exitcode, err.handed) == (1, -signal.SIGKILL, True)
    assert seen == [0]


def _no_memory_to_raise_system_exit_at_1(i):
    """Item 1's result cannot be pickled for want of memory, and ``sys.exit`` too has none
    (its ``SystemExit``): patched in the forked worker only."""
    import sys

    if i == 1:
        sys.exit = _no_memory
        return _NoMemoryToPickle(b"x")
    return i


def test_a_worker_out_of_memory_exits_71_though_sys_exit_has_no_memory(capfd):
    """The worker's out-of-memory exit allocates nothing (``os._exit``): until 2026-12-07
    ``sys.exit(71)``, whose ``SystemExit`` may itself raise ``MemoryError``, printed that
    traceback and exited 1, which the exit-status check above would read as a worker lost."""
    from nrtrewrite.ahead import OUT_OF_MEMORY

    seen = []
    with ForkPool(_no_memory_to_raise_system_exit_at_1, 2) as pool:
        err = _within_hang_bound(lambda: seen.extend(r for _i, r in pool.imap(range(4))))
        procs = [p for p, _t, _r in pool.workers]
    assert type(err) is MemoryError, repr(err)
    assert str(err) == "the worker process ran out of memory sending back the result of item 1"
    assert seen == [0]
    assert OUT_OF_MEMORY in [p.exitcode for p in procs]
    assert "Traceback" not in capfd.readouterr().err


def test_lower_with_a_worker_killed_once_marked_out_of_memory_says_it_was_killed(
        tmp_path, monkeypatch):
    """``lower -j 2`` of mix8 whose worker for rank 3 has no memory to send its result back
    and is killed (SIGKILL) before it exits: the line of a worker killed (CLI.md "lower"),
    status 2, as for any worker killed, not the out-of-memory line and 71."""
    import sys

    import nrtrewrite.bundle as bundle_mod

    real = bundle_mod._write_rank
    here = os.getpid()

    def write_rank(plan, tmp, rank, compose_ahead=False):
        r, man = real(plan, tmp, rank, compose_ahead)
        if rank != 3:
            return r, man
        assert os.getpid() != here, "rank 3 was lowered in the test's process"
        sys.exit = os._exit = _killed_once_marked  # (the worker's: forked)
        return r, _NoMemoryToPickle(man)
    monkeypatch.setattr(bundle_mod, "_write_rank", write_rank)
    assert _lower_mix8_refused(tmp_path) == [
        f"nrtrewrite: error: {FIX / 'mix8.neff'}: rank 3: the worker process lowering this "
        "rank died (killed by SIGKILL, as the kernel's out-of-memory killer does); nothing "
        "was written: lower with fewer workers (-j 1), fewer ranks at once (--rank), or with "
        "more memory"]


def test_a_worker_out_of_memory_sends_its_traceback_through_the_shared_map():
    """Fixer 55o's Left: ``--traceback`` of a worker out of memory showed the pool's raise
    only.  The worker keeps its ``MemoryError``'s traceback in its part of a map shared
    before the fork; the ``MemoryError`` raised has it as its ``__cause__`` (what
    ``--traceback`` prints): here ``_NoMemoryToPickle.__reduce__``'s raise."""
    from nrtrewrite.ahead import RemoteTraceback

    with ForkPool(_no_memory_to_send_at_3, 2) as pool:
        err = _within_hang_bound(lambda: list(pool.imap(range(6))))
    assert type(err) is MemoryError, repr(err)
    assert isinstance(err.__cause__, RemoteTraceback)
    tb = err.__cause__.tb
    assert tb.startswith("Traceback (most recent call last):\n")
    assert ", in __reduce__\n    raise MemoryError()\n" in tb
    assert tb.endswith("\nMemoryError\n")


def test_a_worker_out_of_memory_that_cannot_format_its_traceback_says_so():
    """The worker has no memory to format its ``MemoryError``'s traceback either (its
    ``traceback.format_exc`` fails): the ``__cause__`` says it could not be recovered."""
    with ForkPool(_no_memory_for_the_traceback_at_1, 2) as pool:
        err = _within_hang_bound(lambda: list(pool.imap(range(4))))
    assert type(err) is MemoryError, repr(err)
    assert err.__cause__.tb == ("(its traceback could not be recovered: the worker had no "
                                "memory left to format it)\n")


def _raise_long_holding_no_memory_to_pickle(i):
    err = ValueError("x" * 100_000)
    err.big = _NoMemoryToPickle(b"x")
    raise err


def test_a_worker_out_of_memory_keeps_the_end_of_a_long_traceback():
    """A traceback longer than the worker's part of the map (the item's error of 100,000
    characters, which the ``MemoryError`` was raised while handling) keeps its end, the
    innermost frames, under a line saying how much was left out.  A pool out of memory runs
    first: CPython reuses a freed ``MemoryError`` object without resetting its
    ``__suppress_context__``, which setting the pool's ``MemoryError``'s ``__cause__`` made
    true, and the next pool's worker, forked with it, printed its ``MemoryError`` without
    the exception it was raised while handling (the pool now resets the flag)."""
    import re

    from nrtrewrite.ahead import OOM_TRACEBACK_BYTES

    with ForkPool(_no_memory_to_send_at_3, 1) as pool:
        assert type(_within_hang_bound(lambda: list(pool.imap(range(4))))) is MemoryError
    with ForkPool(_raise_long_holding_no_memory_to_pickle, 1) as pool:
        err = _within_hang_bound(lambda: list(pool.imap([0])))
    assert type(err) is MemoryError, repr(err)
    first, rest = err.__cause__.tb.split("\n", 1)
    left = re.fullmatch(r"\(its first (\d+) bytes left out\)", first)
    assert left is not None, first
    assert int(left[1]) > 100_000 - OOM_TRACEBACK_BYTES
    assert len(first) + 1 + len(rest) <= OOM_TRACEBACK_BYTES - 4
    assert ("During handling of the above exception, another exception occurred:" in rest
            and rest.endswith("\nMemoryError\n"))


def test_lower_traceback_of_a_worker_out_of_memory_shows_the_workers(tmp_path, monkeypatch):
    """``--traceback lower -j 2`` whose worker has no memory to send rank 3's result back:
    the worker's traceback (``_NoMemoryToPickle.__reduce__``'s raise), then the pool's raise,
    then the out-of-memory line, status 71 (until 2026-12-07 the pool's raise only)."""
    import nrtrewrite.bundle as bundle_mod

    real = bundle_mod._write_rank

    def write_rank(plan, tmp, rank, compose_ahead=False):
        r, man = real(plan, tmp, rank, compose_ahead)
        return r, (_NoMemoryToPickle(man) if rank == 3 else man)
    monkeypatch.setattr(bundle_mod, "_write_rank", write_rank)
    res = CliRunner().invoke(main, ["--traceback", "lower", "-q", str(FIX / "mix8.neff"),
                                    "-o", str(tmp_path / "out"), "-j", "2"],
                             prog_name="nrtrewrite")
    assert res.exit_code == 71, (res.output, res.exception)
    lines = res.stderr.splitlines()
    worker = lines.index("In the worker process:")
    assert lines[worker + 1] == "Traceback (most recent call last):"
    raised = lines.index("    raise MemoryError()")
    assert worker < raised < lines.index("The above exception was the direct cause of the "
                                         "following exception:")
    assert lines[-2:] == ["MemoryError: the worker process ran out of memory sending back the "
                          "result of item 3", _OUT_OF_MEMORY_LINE.format("lower")]
    assert list(tmp_path.iterdir()) == []


def _interrupted_keeping_the_traceback_at_1(i):
    """Item 1's result cannot be pickled for want of memory, and a Ctrl-C comes while the
    worker formats that ``MemoryError``'s traceback (its ``traceback.format_exc`` patched in
    the forked worker only)."""
    import traceback

    if i == 1:
        def interrupted(*_a, **_k):
            raise KeyboardInterrupt
        traceback.format_exc = interrupted
        return _NoMemoryToPickle(b"x")
    return i


def test_a_worker_interrupted_while_it_keeps_its_traceback_is_interrupted():
    """A Ctrl-C while a worker out of memory keeps its traceback ends it as interrupted
    (exit status 130, ``INTERRUPTED``), a worker lost: not swallowed into the out-of-memory
    exit, 71."""
    from nrtrewrite.ahead import INTERRUPTED

    seen = []
    with ForkPool(_interrupted_keeping_the_traceback_at_1, 2) as pool:
        err = _within_hang_bound(lambda: seen.extend(r for _i, r in pool.imap(range(4))))
    assert isinstance(err, WorkerLost), repr(err)
    assert (err.item, err.exitcode) == (1, INTERRUPTED) == (1, 130)
    assert seen == [0]


class _BigItem:
    """An item of 4 MiB pickled (far more than a pipe holds), named ``<big item>``."""

    def __init__(self):
        self.payload = b"x" * (4 << 20)

    def __repr__(self):
        return "<big item>"


def _no_memory_to_read_the_next_item_after_0(i):
    """After item 0 the worker has no memory to read its next item's bytes (its connection's
    reads patched in the forked worker only), as a worker near its limit handed a big item."""
    import multiprocessing.connection as mpc

    def no_memory(*_a, **_k):
        raise MemoryError()
    mpc.Connection._recv_bytes = no_memory
    return i


def test_a_worker_out_of_memory_receiving_a_big_item_raises_memory_error(capfd):
    """Review V2: a worker that ran out of memory receiving an item bigger than the pipe
    exits (marked, 71) while the pool is still sending it: the send fails (broken pipe), and
    the pool raised the worker lost, exit status 71, without reading the mark.  It is the
    out-of-memory path, as where the worker dies after the item is sent."""
    from nrtrewrite.ahead import NO_MEMORY_FOR_ITEM, OUT_OF_MEMORY

    seen = []
    with ForkPool(_no_memory_to_read_the_next_item_after_0, 1) as pool:
        err = _within_hang_bound(
            lambda: seen.extend(r for _i, r in pool.imap([0, _BigItem()])))
        assert pool.out_of_memory[0] == NO_MEMORY_FOR_ITEM == 3
        assert pool.workers[0][0].exitcode == OUT_OF_MEMORY == 71
    assert type(err) is MemoryError, repr(err)
    assert str(err) == "the worker process ran out of memory receiving item <big item>"
    assert seen == [0]
    assert "Traceback" not in capfd.readouterr().err


class _NoMemoryToFlush:
    """A stream whose flush runs out of memory."""

    def flush(self):
        raise MemoryError()


class _NoMemoryForSuppress:
    """``contextlib`` as seen with no memory for a ``suppress`` object."""

    @staticmethod
    def suppress(*_a):
        raise MemoryError()


def _no_memory_anywhere_on_the_way_out_at_1(i):
    """Item 1's result has no memory to be pickled, and in the forked worker neither the
    streams' flushes nor a ``contextlib.suppress`` have memory either."""
    import sys

    import nrtrewrite.ahead as ahead

    if i == 1:
        ahead.contextlib = _NoMemoryForSuppress
        sys.stdout = sys.stderr = _NoMemoryToFlush()
        return _NoMemoryToPickle(b"x")
    return i


def test_a_worker_out_of_memory_exits_71_though_its_flushes_have_no_memory():
    """Review V2: the out-of-memory exit flushed stdout and stderr in a loop that made a
    tuple and a ``contextlib.suppress`` outside any guard: no memory for them, and the worker
    printed a traceback and exited 1 (a worker lost).  Each flush is guarded and the exit is
    still 71, the out-of-memory path."""
    from nrtrewrite.ahead import OUT_OF_MEMORY

    seen = []
    with ForkPool(_no_memory_anywhere_on_the_way_out_at_1, 1) as pool:
        err = _within_hang_bound(lambda: seen.extend(r for _i, r in pool.imap(range(3))))
        assert pool.workers[0][0].exitcode == OUT_OF_MEMORY == 71
    assert type(err) is MemoryError, repr(err)
    assert str(err) == "the worker process ran out of memory sending back the result of item 1"
    assert seen == [0]


def _raise_euros_holding_no_memory_to_pickle(i):
    """Item ``i``'s error message is 40,000 euro signs (3 bytes each in UTF-8) and ``i``
    letters: its traceback, longer than a worker's part of the map, is cut inside the run
    of euro signs at one of three places in a character, whichever ``i`` is."""
    err = ValueError("\u20ac" * 40_000 + "a" * i)
    err.big = _NoMemoryToPickle(b"x")
    raise err


@pytest.mark.parametrize("letters", [0, 1, 2])
def test_a_long_tracebacks_end_starts_at_a_character(letters):
    """Review V2: the end kept of a long traceback could start inside a UTF-8 character (the
    text then began with U+FFFD).  The cut moves to the next character's start: the text
    kept starts with a whole euro sign, at most 2 bytes short of the room (65,468 bytes: the
    slot's 64 KiB less the 4 of its length and the 64 kept for the line saying how many
    bytes were left out)."""
    with ForkPool(_raise_euros_holding_no_memory_to_pickle, 1) as pool:
        err = _within_hang_bound(lambda: list(pool.imap([letters])))
    assert type(err) is MemoryError, repr(err)
    tb = err.__cause__.tb
    assert "\ufffd" not in tb
    first, rest = tb.split("\n", 1)
    assert first.startswith("(its first ") and first.endswith(" bytes left out)")
    assert rest.startswith("\u20ac")
    assert 65_536 - 4 - 64 - 2 <= len(rest.encode("utf-8")) <= 65_536 - 4 - 64


def _raise_with_tuple_notes(i):
    err = ValueError("refused")
    err.__notes__ = ("NOTE-A as a tuple", "NOTE-B as a tuple")
    raise err


def test_a_workers_notes_kept_as_a_tuple_are_printed_once():
    """Review V2: notes kept as a tuple (``err.__notes__ = (...)``, which ``traceback``
    prints as it prints a list) were printed twice with ``-j 2``: they come back a tuple,
    which the check that they arrive compared with a list.  Printed once, under the
    exception raised, as with ``-j 1``."""
    import traceback

    with ForkPool(_raise_with_tuple_notes, 1) as pool:
        with pytest.raises(ValueError) as info:
            list(pool.imap([0]))
    lines = "".join(traceback.format_exception(info.value)).splitlines()
    assert lines.count("NOTE-A as a tuple") == 1 and lines.count("NOTE-B as a tuple") == 1
    assert "NOTE-A as a tuple" not in info.value.__cause__.tb
    assert lines[-3:] == ["ValueError: refused", "NOTE-A as a tuple", "NOTE-B as a tuple"]
