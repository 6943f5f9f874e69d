"""Run ``fn(item)`` for a sequence of items in a forked process, ahead of the consumer.

:func:`nrtrewrite.lower.lower_rank` uses it to compose a rank's next triggers on the second
core while this process emits the current one (``lower --rank R``; docs/PERFORMANCE.md
"Compose ahead").  ``fn`` and its arguments are inherited by the fork (never pickled); the
results come back pickled, in item order.

The results travel through a ring of anonymous shared memory mapped before the fork, not
through the pipe: a pipe moves 64 KiB per wake-up of the writer, and on a VM each wake-up
of an idle core costs tens of microseconds (a 1 MB result took milliseconds).  The pipe
carries only ``(index, where, length, seconds)``; a result too big for the ring's free
space goes through the pipe itself.  The producer is at most ``lookahead`` items ahead:
the consumer hands out the next item only when it takes a result, and with it how much of
the ring it has consumed.

With ``steal``, a consumer that would wait for its next result computes the next item not
handed out yet itself (at most ``lookahead`` of them held), so neither process idles while
the other has work: the consumer's own work (emitting) and the items' work share both
cores.  Items are still yielded in order.

An exception in ``fn`` is not pickled back: the consumer gets ``(item, None, seconds)`` and
runs ``fn`` itself to raise it with its own context (``fn`` must be deterministic).
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import mmap
import multiprocessing
import multiprocessing.connection
import operator
import os
import pickle
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Any, NoReturn

from nrtrewrite.errors import NrtRewriteError, Where, raised_from
from nrtrewrite.memtune import frozen_gc

#: Items the producer may run ahead of the consumer.
LOOKAHEAD = 16
#: Bytes of the shared ring (touched only as far as the results need).
RING_BYTES = 64 << 20
#: Seconds between checks that the producer is still alive while waiting for a result.
POLL_S = 0.5
#: Seconds ``close`` gives the producer to take the stop before it is killed.
CLOSE_WAIT_S = 5

_JOB: tuple | None = None  # (fn, ring, the consumer's pipe ends): inherited by the fork

_RING, _PIPE, _FAILED = 0, 1, 2


def available() -> bool:
    """Can this platform fork (``ForkAhead`` needs the fork start method)?"""
    return "fork" in multiprocessing.get_all_start_methods()


class AheadLost(RuntimeError):
    """The producer process is gone (killed, out of memory) before delivering item ``k``
    of the current :meth:`ForkAhead.map`; the consumer computes the rest itself."""

    def __init__(self, k: int, exitcode: int | None):
        super().__init__(f"the ahead process exited (code {exitcode}) before item {k}")
        self.k = k


#: The signals that stop a run (Ctrl-C, and what the CLI turns into ``Terminated``).
_STOPPING = frozenset(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                      if hasattr(signal, name))


@contextlib.contextmanager
def _signals_held() -> Iterator[frozenset]:
    """Hold (block) the stopping signals in this thread while a process is forked, and
    yield the ones held here.  A signal that arrives meanwhile waits until the fork is done
    and is then raised where this process is, as any other time, instead of inside an
    at-fork callback (the standard library's, or the child's start), where Python prints
    the exception and drops it.  The child starts with them blocked (a fork copies the
    mask, not the pending signals) and releases them first thing (:func:`_quietly`).
    Held in this thread only, which is enough because the forks are made before any other
    thread starts: a signal taken by another thread would still have its Python handler
    run here, the main thread, at once."""
    if not hasattr(signal, "pthread_sigmask"):
        yield frozenset()
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
    try:
        yield _STOPPING - frozenset(before)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


#: The exit status of a forked process ended by SIGINT (128 + SIGINT, as a shell and the CLI
#: give it): its consumer tells an interrupted process from one that returned.
INTERRUPTED = 128 + signal.SIGINT


def _quietly(forker: int, held: frozenset, target: Callable[..., None], *args: Any) -> None:
    """A forked process's body: ``target(*args)``, ended quietly by Ctrl-C (SIGINT reaches
    the whole foreground process group; the process that forked stops on its own and kills
    its children, which must not print a traceback each), with exit status
    :data:`INTERRUPTED` (a pool worker interrupted alone is reported as such); killed with
    the process that forked it, pid ``forker`` (:func:`_die_with_parent`; passed as an
    argument, not recorded by an ``os.register_at_fork`` callback: a signal's exception
    raised inside such a callback is printed and ignored by Python, and the run went on to
    exit 0).  ``held``: the signals :func:`_signals_held` blocked around the fork, released
    here."""
    _die_with_parent(forker)
    try:
        if held:  # a Ctrl-C that came during the fork is raised here, and ends us quietly
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        target(*args)
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED)  # no traceback (multiprocessing prints none for SystemExit)


#: Linux's prctl option: the signal a process gets when the thread that forked it ends.
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this forked process when its parent dies (Linux: prctl
    ``PR_SET_PDEATHSIG``), so that a SIGKILLed ``lower`` leaves no worker writing on into
    its temporary folder; if the parent is already gone, exit now."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the children end when their work does
        return
    if os.getppid() != parent:  # it died before the prctl
        os._exit(1)


def _producer(tasks, results, size: int) -> None:
    assert _JOB is not None
    fn, ring, consumer_ends = _JOB
    for conn in consumer_ends:  # the consumer's ends: once it closes them, the pipes break
        conn.close()
    head = 0  # bytes written to the ring so far (positions are head % size)
    consumed = 0  # bytes of the ring the consumer has taken (from its last task)
    while True:
        try:
            task = tasks.recv()
        except EOFError:  # the consumer is gone
            return
        if task is None:
            return
        k, item, consumed = task
        t0 = time.perf_counter()
        try:
            blob = pickle.dumps(fn(item), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            blob = None
        dt = time.perf_counter() - t0
        try:
            if blob is None:
                results.send((_FAILED, k, None, 0, dt))
                continue
            pos = head % size
            skip = size - pos if pos + len(blob) > size else 0  # a result is never split
            if len(blob) + skip <= size - (head - consumed):
                head += skip
                ring[head % size:head % size + len(blob)] = blob
                head += len(blob)
                results.send((_RING, k, head - len(blob), len(blob), dt))
            else:  # no room in the ring now: through the pipe
                results.send((_PIPE, k, blob, len(blob), dt))
        except (OSError, MemoryError):  # the consumer closed its end, or no memory to send
            return  # the result: stop (the consumer computes what is not delivered itself)


class ForkAhead:
    """A forked process that computes ``fn(item)`` ahead of the consumer.

    ``ForkAhead(fn)`` forks at once (do it before starting threads: a fork copies only the
    calling thread); ``map(items)`` then yields ``(item, result, seconds)`` in item order,
    the process up to :data:`LOOKAHEAD` items ahead; ``result`` is ``None`` when ``fn``
    raised there (call ``fn(item)`` to raise it).  With ``steal=True`` this process also
    runs ``fn`` on items itself while it would otherwise wait (``fn`` must then be safe to
    run in either process; a failure comes back as ``None`` in the same way).  If the
    process dies, ``map`` raises :class:`AheadLost` naming the first item not delivered.
    Use as a context manager (or call :meth:`close`): the process is stopped on exit,
    whether or not ``map`` ran."""

    def __init__(self, fn: Callable[[Any], Any], *, lookahead: int | None = None,
                 ring_bytes: int = RING_BYTES, steal: bool = False):
        global _JOB
        ctx = multiprocessing.get_context("fork")
        self.size, self.lookahead = ring_bytes, lookahead or LOOKAHEAD
        self.fn, self.steal = fn, steal
        #: seconds this process spent computing items itself (``steal``)
        self.here_s = 0.0
        self.ring = mmap.mmap(-1, ring_bytes)  # MAP_SHARED | MAP_ANONYMOUS: shared by the fork
        task_r, self.tasks = ctx.Pipe(duplex=False)
        self.results, result_w = ctx.Pipe(duplex=False)
        self.next_id, self.consumed = 0, 0
        _JOB = (fn, self.ring, (self.tasks, self.results))
        # the process inherits every object of this one (the plan): frozen, its garbage
        # collector never walks them (a walk would write to, and so copy, every page)
        try:
            with frozen_gc(), _signals_held() as held:
                self.proc = ctx.Process(target=_quietly,
                                        args=(os.getpid(), held, _producer, task_r, result_w,
                                              ring_bytes),
                                        name="nrtrewrite-ahead", daemon=True)
                self.proc.start()
        finally:
            _JOB = None
            task_r.close()  # the process's ends: closed here, so EOF means it is gone
            result_w.close()

    def map(self, items: Sequence[Any]) -> Iterator[tuple[Any, Any, float]]:
        items = list(items)
        n = len(items)
        base = self.next_id  # result ids of this map: base, base + 1, ...
        self.next_id += n
        assigned = 0  # items[:assigned] are handed out: to the process, or computed here
        sent: deque[int] = deque()  # positions handed to the process, not yet received
        mine: dict[int, tuple[Any, float]] = {}  # position -> (result, seconds): done here

        def top_up() -> None:
            """Keep ``lookahead`` items with the process."""
            nonlocal assigned
            while len(sent) < self.lookahead and assigned < n:
                self.tasks.send((base + assigned, items[assigned], self.consumed))
                sent.append(assigned)
                assigned += 1

        try:
            top_up()
        except OSError:  # the process is gone (a closed pipe): the results it sent before
            pass  # are still read; the first item it does not deliver raises AheadLost (until
            # 2026-12-06 this raised AheadLost(0) at once, losing them: a process dying on
            # item 3 while items 4.. were handed out gave none of items 0..2)
        for k in range(n):
            if k in mine:
                result, dt = mine.pop(k)
            else:  # k is with the process (the first of ``sent``)
                try:
                    while not self.results.poll(0):
                        if self.steal and assigned < n and len(mine) < self.lookahead:
                            mine[assigned] = self._here(items[assigned])
                            assigned += 1
                            continue
                        while not self.results.poll(POLL_S):
                            if not self.proc.is_alive():
                                raise AheadLost(k, self.proc.exitcode)
                        break
                    kind, got, where, length, dt = self.results.recv()
                except (EOFError, OSError):
                    raise AheadLost(k, self.proc.exitcode) from None
                if got != base + sent[0] or sent[0] != k:
                    raise RuntimeError(f"the ahead process should have returned item "
                                       f"{k}, not {got - base}")
                sent.popleft()
                if kind == _RING:
                    pos = where % self.size
                    result = pickle.loads(self.ring[pos:pos + length])
                    self.consumed = where + length
                elif kind == _PIPE:
                    result = pickle.loads(where)
                else:
                    result = None
            try:
                top_up()
            except OSError:
                pass  # the process is gone: the next item it holds raises AheadLost
            yield items[k], result, dt

    def _here(self, item: Any) -> tuple[Any, float]:
        """``(fn(item), seconds)`` computed in this process (``None``: ``fn`` raised)."""
        t0 = time.perf_counter()
        try:
            result = self.fn(item)
        except Exception:
            result = None
        dt = time.perf_counter() - t0
        self.here_s += dt
        return result, dt

    def close(self) -> None:
        self.results.close()  # a send blocked on a full pipe fails: the process stops
        if self.proc.is_alive():
            try:
                self.tasks.send(None)
            except OSError:
                pass
            self.proc.join(timeout=CLOSE_WAIT_S)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join()
        self.tasks.close()
        self.ring.close()

    def __enter__(self) -> "ForkAhead":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ForkCall:
    """``fn()`` (bytes) computed in a process forked now, while this one goes on;
    :meth:`result` waits for it.  ``None`` when ``fn`` raised there or the process died (the
    caller computes it itself: ``fn`` must be deterministic).  Fork before starting threads
    (a fork copies only the calling thread); :meth:`close` (or leaving the ``with``) stops
    the process if it still runs."""

    def __init__(self, fn: Callable[[], bytes]):
        global _CALL
        ctx = multiprocessing.get_context("fork")
        self.conn, child_end = ctx.Pipe(duplex=False)
        _CALL = (fn, child_end, self.conn)
        try:
            # the process never walks (so never copies) the inherited plan
            with frozen_gc(), _signals_held() as held:
                self.proc = ctx.Process(target=_quietly, args=(os.getpid(), held, _call),
                                        name="nrtrewrite-call",
                                        daemon=True)
                self.proc.start()
        finally:
            _CALL = None
            child_end.close()  # the process's end: closed here, so EOF means it is gone

    def result(self) -> bytes | None:
        try:
            blob = self.conn.recv_bytes()
        except (EOFError, OSError):  # the process died
            blob = b"-"
        finally:
            self.close()
        return blob[1:] if blob[:1] == b"+" else None

    def close(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()

    def __enter__(self) -> "ForkCall":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_CALL: tuple | None = None  # (fn, the process's pipe end, the caller's): inherited by the fork


def _call() -> None:
    assert _CALL is not None
    fn, conn, caller_end = _CALL
    caller_end.close()
    try:
        blob = b"+" + fn()
    except BaseException:
        blob = b"-"
    try:
        conn.send_bytes(blob)
    except (OSError, MemoryError):  # the caller is gone, or no memory to send the result:
        pass  # ended quietly, the caller computes it itself (until 2026-12-07 a MemoryError
        # here printed a traceback, and the run went on to exit 0)


class WorkerLost(RuntimeError):
    """A :class:`ForkPool` worker died (killed by a signal, the kernel's out-of-memory killer)
    while it held ``item`` or, ``handed`` false, before it was handed ``item`` (it died idle,
    after delivering its previous one); ``exitcode`` is the process's (``-N``: killed by
    signal N; :data:`INTERRUPTED`: ended by a SIGINT of its own)."""

    def __init__(self, item: Any, exitcode: int | None, handed: bool = True):
        when = "while it held" if handed else "before it was handed"
        super().__init__(f"the worker process exited (code {exitcode}) {when} {item!r}")
        self.item = item
        self.exitcode = exitcode
        self.handed = handed


class RemoteError(Exception):
    """A worker's exception that could not come back as itself (it does not survive pickling:
    an ``__init__`` that its ``args`` do not fit): its type's name (``type_name``, what
    ``nrtrewrite: internal error: NAME: ...`` shows) and its message."""

    def __init__(self, type_name: str, text: str):
        super().__init__(text)
        self.type_name, self.text = type_name, text

    def __reduce__(self):
        return RemoteError, (self.type_name, self.text)


class RemoteTraceback(Exception):
    """The ``__cause__`` :meth:`ForkPool.imap` gives a worker's exception: the traceback as
    the worker formatted it (``--traceback`` shows where the error was raised)."""

    def __init__(self, tb: str):
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return f"\n\nIn the worker process:\n{self.tb}"


def _round_trips(obj: Any) -> Any:
    """``obj`` as it comes back from pickling (raises what pickling raises)."""
    return pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _pickled_by_name(cls: type) -> bool:
    """``cls`` pickles as itself (a class defined at a module's top level)."""
    try:
        return _round_trips(cls) is cls
    except MemoryError:  # no memory to tell: the worker's out-of-memory path (_pool_worker)
        raise
    except Exception:  # noqa: BLE001 - a local class: PicklingError, AttributeError
        return False


def _bare_error(err: BaseException) -> BaseException | None:
    """An :class:`~nrtrewrite.errors.NrtRewriteError` that does not survive pickling (an
    attribute of it cannot be pickled: a lock, a file) as what the CLI reads of it: an error
    of its class (else the nearest base class that pickles by name, with its
    ``exit_code``), its reason, its length and its location, each location part that does
    not pickle as its text; its attributes left behind.  So it reaches the pool's process
    as the same one line and status as with ``-j 1`` (until 2026-12-07 it came back as a
    :class:`RemoteError`, an internal error, status 70, where ``-j 1`` gave 2).  None if
    ``err`` is no such error, or the copy does not come back whole either.  Its notes
    (``__notes__``, strings) come with it, as with ``-j 1`` (until 2026-12-07 they were
    left behind).  A ``MemoryError`` is raised, never read as "cannot be pickled"."""
    if not isinstance(err, NrtRewriteError):
        return None
    try:
        cls = next(c for c in type(err).__mro__
                   if issubclass(c, NrtRewriteError) and _pickled_by_name(c))
        where = {}
        for key in Where.__dataclass_fields__:
            val = getattr(err.where, key)
            try:
                _round_trips(val)
            except MemoryError:
                raise
            except Exception:  # noqa: BLE001 - a part that does not pickle: its text
                val = operator.index(val) if key == "offset" else str(val)
            where[key] = val
        line = err.line()
        bare = cls.__new__(cls, line)
        bare.reason, bare.reason_chars = str(err.reason), int(err.reason_chars)
        bare.where = Where(**where)
        if bare.exit_code != err.exit_code:
            bare.exit_code = int(err.exit_code)
        notes = getattr(err, "__notes__", None)
        if isinstance(notes, list) and all(isinstance(n, str) for n in notes):
            bare.__notes__ = [str(n) for n in notes]  # (str: a subclass's attributes dropped)
        back = _round_trips(bare)
        if str(back) == line and back.args == (line,) and back.exit_code == err.exit_code:
            return bare
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 - whatever the error's own parts raise
        pass
    return None


def _sendable(err: BaseException) -> BaseException:
    """``err`` if it comes back from pickling as an exception of its type, else, for an
    error of ours, its bare copy (:func:`_bare_error`), else a :class:`RemoteError` naming
    its type and message.  A ``MemoryError`` met on the way is raised: the worker has no
    memory to send anything (until 2026-12-07 it was read as "cannot be pickled": an error
    of ours came back as its bare copy or a :class:`RemoteError`, a ``MemoryError`` as an
    internal error, status 70, where ``-j 1`` gave the out-of-memory line, 71)."""
    try:
        back = _round_trips(err)
        if type(back) is type(err):
            return err
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 - whatever pickling or the type's __init__ raises
        pass
    if (bare := _bare_error(err)) is not None:
        return bare
    try:
        text = str(err)
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001
        text = ""
    return RemoteError(type(err).__qualname__, text)


class ForkPool:
    """``workers`` processes forked now, each running ``fn(item)`` for one item at a time
    (``fn`` and what it reads are inherited by the fork, never pickled; the results come
    back pickled).  :meth:`imap` yields ``(item, result)`` in item order, as
    ``multiprocessing.Pool.imap`` with ``chunksize=1`` does, and raises an exception of
    ``fn`` where its item comes (pickled back: the exception's message is kept).

    Why not ``multiprocessing.Pool``: a Pool worker that dies (SIGKILL, the out-of-memory
    killer) is replaced and the item it held is lost, so ``imap`` waits for it forever;
    here the death is seen (each worker's sentinel is waited on beside its results) and
    raises :class:`WorkerLost` naming the item; a worker that died idle (after delivering
    its item, before its next one) raises it when it is handed the next one, naming that
    item (``handed`` false); a worker with no memory to send its result back (or to make
    the reply of its item's exception: copy it, format its traceback, pickle it; or to
    receive its item) raises ``MemoryError`` (it marks its byte of a shared map, then
    exits :data:`OUT_OF_MEMORY`; a worker that exits with that status unmarked, or is killed
    once marked, is lost as any other).  A pool is one :meth:`imap`.  A loss stops the
    hand-out and is raised at its item's turn, after the items before it, so the first
    failure in item order is raised whatever the timing.  A worker's exception comes back
    with the exceptions it was raised from or during (:func:`_remote_cause`).  Fork before
    starting threads (a fork copies only the calling thread).  :meth:`close` (or leaving the
    ``with``) kills and reaps the workers, whatever they are doing, so nothing of theirs runs
    after it."""

    def __init__(self, fn: Callable[[Any], Any], workers: int):
        ctx = multiprocessing.get_context("fork")
        self.workers: list[tuple[Any, Any, Any]] = []  # (process, tasks, results)
        self.mapped = False  # imap was called (it is called once: :meth:`imap`)
        #: one byte a worker, shared with it (mapped before the fork): set by the worker,
        #: ``w``, that had no memory to send its result back (:data:`OUT_OF_MEMORY`), read
        #: when it is lost with that exit status; the status alone could be any code's
        #: (``os._exit(71)``), the byte alone a worker's killed before it exited
        self.out_of_memory = mmap.mmap(-1, max(1, workers))
        #: :data:`OOM_TRACEBACK_BYTES` a worker, shared likewise (pages touched only by a
        #: worker that uses its own): the traceback of a marked worker's ``MemoryError``
        #: (:func:`_keep_traceback`), what ``--traceback`` shows of it
        self.oom_tracebacks = mmap.mmap(-1, max(1, workers) * OOM_TRACEBACK_BYTES)
        ours: list[Any] = []  # every pipe end of this process so far: closed in each worker
        try:
            with frozen_gc():  # the workers never walk (so never copy) the inherited plan
                for w in range(max(1, workers)):
                    task_r, tasks = ctx.Pipe(duplex=False)
                    results, result_w = ctx.Pipe(duplex=False)
                    ours += [tasks, results]
                    try:
                        with _signals_held() as held:
                            proc = ctx.Process(target=_quietly,
                                               args=(os.getpid(), held, _pool_worker, fn,
                                                     task_r, result_w, list(ours),
                                                     self.out_of_memory,
                                                     self.oom_tracebacks, w),
                                               name="nrtrewrite-worker", daemon=True)
                            self.workers.append((proc, tasks, results))
                            proc.start()
                    finally:
                        task_r.close()  # the worker's ends: closed here, so EOF means it
                        result_w.close()  # is gone
        except BaseException:
            self.close()
            raise

    def imap(self, items: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
        """The items' results, in item order (the class's text).  Once a pool: a second call
        raises ``RuntimeError``, for what the first left behind would be read as its own
        (until 2026-12-07 it was not refused: a result the first had not taken, of an item
        after a failure, came back as the second's item's; a worker that ran out of memory
        in the first was reported as lost, exit status 71, when handed the second's)."""
        if self.mapped:
            raise RuntimeError("a ForkPool maps once: its imap was called already")
        self.mapped = True
        return self._imap(list(items))

    def _imap(self, items: list[Any]) -> Iterator[tuple[Any, Any]]:
        n = len(items)
        sent = 0  # items[:sent] are handed out
        held: dict[int, int] = {}  # worker index -> position of the item it works on
        # position -> (True, result), (False, (exception, traceback text, its chain)) or,
        # for a worker lost, (None, the exception to raise)
        got: dict[int, tuple[bool | None, Any]] = {}
        stopped = False  # a worker was lost: nothing more is handed out

        def hand_out(w: int) -> None:
            nonlocal sent, stopped
            if sent < n and not stopped:
                try:
                    self.workers[w][1].send(items[sent])
                except (BrokenPipeError, ConnectionResetError):
                    # its task pipe has no reader: the worker died idle (after delivering
                    # its previous item, or before its first); reaped for its exit status
                    proc = self.workers[w][0]
                    proc.join()
                    # (a worker that ran out of memory receiving it marked so: until
                    # 2026-12-07 the mark was not read here, and a worker lost was raised)
                    got[sent] = (None, self._oom_error(w, items[sent])
                                 or WorkerLost(items[sent], proc.exitcode, handed=False))
                    sent += 1
                    stopped = True
                    return
                held[w] = sent
                sent += 1

        def lose(w: int) -> None:
            """Worker ``w`` is gone without the result of the item it held: recorded at
            that item's place, raised when its turn comes."""
            nonlocal stopped
            proc = self.workers[w][0]
            proc.join()
            k = held.pop(w)
            err = self._oom_error(w, items[k]) or WorkerLost(items[k], proc.exitcode)
            got[k] = (None, err)
            stopped = True

        for w in range(len(self.workers)):
            hand_out(w)
        for k in range(n):
            # (a worker lost stops the hand-out; the items before its own are still waited
            # for, so the first failure in item order is raised whatever the timing: until
            # 2026-12-07 a death was raised the moment it was seen, ahead of an earlier
            # item's exception already received)
            while k not in got:
                by_conn = {self.workers[w][2]: w for w in held}
                by_sentinel = {self.workers[w][0].sentinel: w for w in held}
                ready = multiprocessing.connection.wait([*by_conn, *by_sentinel])
                for obj in ready:
                    w = by_conn.get(obj)
                    if w is None:  # a sentinel: the worker has exited
                        w = by_sentinel[obj]
                        # its result is read first (this round or the next): `wait` lists
                        # ready objects in the order given (pipes first) where poll(2) is
                        # used, and the poll() serves a platform that orders otherwise
                        if w not in held or self.workers[w][2].poll():
                            continue
                        lose(w)
                        continue
                    if w not in held:  # (lost meanwhile, this round)
                        continue
                    try:
                        ok, value = obj.recv()
                    except (EOFError, OSError):
                        lose(w)
                        continue
                    got[held.pop(w)] = (ok, value)
                    if not ok:
                        # an exception stops the hand-out as a loss does: the items before
                        # it are already out and still waited for, and nothing after it is
                        # used (until 2026-12-07 later items were handed out and lowered in
                        # full, then thrown away: review 54g F8)
                        stopped = True
                    hand_out(w)
            ok, value = got.pop(k)
            if ok is None:
                raise value
            if not ok:
                err, tb, *rest = value
                err.__cause__ = _remote_cause(tb, rest[0] if rest else ())
                raise err
            yield items[k], value

    def close(self) -> None:
        for proc, tasks, results in self.workers:
            if proc.is_alive():
                proc.kill()
        for proc, tasks, results in self.workers:
            if proc.pid is not None:
                proc.join()
            tasks.close()
            results.close()
        self.workers = []
        self.out_of_memory.close()
        self.oom_tracebacks.close()

    def _oom_error(self, w: int, item: Any) -> MemoryError | None:
        """The ``MemoryError`` to raise for worker ``w``, reaped, when it ran out of memory
        for ``item`` (held, or being handed to it), else None."""
        proc = self.workers[w][0]
        if not (self.out_of_memory[w] and proc.exitcode == OUT_OF_MEMORY):
            return None
        # marked, and exited so: no memory for its item (until 2026-12-07 read from
        # the exit status alone: a worker that exited 71 by itself, os._exit(71) in
        # a library, was reported out of memory; then from the mark alone: one
        # killed between its mark and its exit too)
        what = {NO_MEMORY_FOR_EXCEPTION: "sending back the exception item {} raised",
                NO_MEMORY_FOR_ITEM: "receiving item {}"}.get(
                    self.out_of_memory[w], "sending back the result of item {}")
        # (review 55r: until 2026-12-07 "the result" also where the item had raised)
        err = MemoryError("the worker process ran out of memory "
                          + what.format(f"{item!r:.200}"))
        # --traceback shows where the worker ran out (until 2026-12-07 the raise
        # here only), or says it could not be recovered
        err.__cause__ = RemoteTraceback(self._oom_traceback(w))
        # (shown the same: a cause is printed whatever this flag, which setting the
        # cause made true; CPython reuses MemoryError objects without resetting it,
        # and a later one raised while handling another would not print that one)
        err.__suppress_context__ = False
        return err

    def _oom_traceback(self, w: int) -> str:
        """The traceback worker ``w`` kept of its ``MemoryError`` (:func:`_keep_traceback`),
        or a line saying it kept none."""
        start = w * OOM_TRACEBACK_BYTES
        n = int.from_bytes(self.oom_tracebacks[start:start + 4], "little")
        if not 0 < n <= OOM_TRACEBACK_BYTES - 4:
            return ("(its traceback could not be recovered: the worker had no memory left to "
                    "format it)\n")
        return self.oom_tracebacks[start + 4:start + 4 + n].decode("utf-8", "replace")

    def __enter__(self) -> "ForkPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: The exit status of a :class:`ForkPool` worker that had no memory to send its result back,
#: or to make its reply (:func:`_pool_worker`) (EX_OSERR, as the CLI's for the system
#: refusing memory), after it marked its byte of :attr:`ForkPool.out_of_memory`, which is
#: what :meth:`ForkPool.imap` raises ``MemoryError`` for.  It exits rather than sending a
#: smaller reply: a send that failed part way would leave the pipe in the middle of a
#: message.
OUT_OF_MEMORY = 71
#: What a worker exiting :data:`OUT_OF_MEMORY` marks its byte of
#: :attr:`ForkPool.out_of_memory` with: it had no memory to send back its item's result, or
#: the exception its item raised (then there was no result: :meth:`ForkPool.imap`'s
#: ``MemoryError`` says which).
NO_MEMORY_FOR_RESULT, NO_MEMORY_FOR_EXCEPTION = 1, 2
#: ... or, before its work began, no memory to receive its item (read it, unpickle it).
NO_MEMORY_FOR_ITEM = 3
#: Bytes of a :class:`ForkPool` worker's traceback of the ``MemoryError`` that ended it
#: (:attr:`ForkPool.oom_tracebacks`): a longer one keeps its end (the innermost frames).
OOM_TRACEBACK_BYTES = 64 << 10
#: The most exceptions of a worker's exception's chain sent back with it.
CHAIN_MAX = 32


def _remote_cause(tb: str, chain: Sequence[BaseException]) -> "RemoteTraceback":
    """The ``__cause__`` :meth:`ForkPool.imap` gives a worker's exception: the worker's
    traceback text, and below it, as its ``__context__`` (not printed: the text holds them),
    the exceptions the worker's was raised from or during, innermost last, which the CLI's
    classification reads as in one process (a ``MemoryError`` among them: status 71; a
    ``KeyboardInterrupt``: an interruption, 130).  Until 2026-12-07 the chain was lost, and
    ``lower -j 2`` gave 70 where ``-j 1`` gave 71 or 130."""
    cause = RemoteTraceback(tb)
    below: BaseException = cause
    for e in chain:
        below.__context__ = e
        below.__suppress_context__ = True
        below = e
    return cause


def _failure(err: BaseException) -> tuple[BaseException, str, tuple[BaseException, ...]]:
    """What a worker sends back for ``err``, raised by ``fn``: the exception (as
    :func:`_sendable` makes it), its traceback text and the exceptions it was raised from
    or during (``__cause__``, else ``__context__``, as the CLI walks them), each sendable.
    Raises ``MemoryError`` when there is no memory for it (the worker's out-of-memory
    path); called in the handler of ``err`` (its traceback is the one being handled)."""
    chain = tuple(map(_sendable, itertools.islice(raised_from(err), 1, 1 + CHAIN_MAX)))
    sent = _sendable(err)
    return sent, _traceback_text(err, _notes_arrive(err, sent)), chain


def _notes_arrive(err: BaseException, sent: BaseException) -> bool:
    """``err`` has notes (``__notes__``) and ``sent``, what the worker sends for it, brings
    them back whole: the pool's process raises them with it (a :class:`RemoteError` brings
    none).  A ``MemoryError`` is raised (the out-of-memory path)."""
    notes = getattr(err, "__notes__", None)
    if not notes:
        return False
    try:
        # compared as sequences (until 2026-12-07 with list(notes): notes kept as a tuple
        # came back a tuple, read as not arriving, and were printed twice)
        back = getattr(_round_trips(sent), "__notes__", None)
        return isinstance(back, (list, tuple)) and list(back) == list(notes)
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 - whatever pickling raises: the text keeps them
        return False


def _traceback_text(err: BaseException, without_notes: bool) -> str:
    """``traceback.format_exc()`` (in the handler of ``err``), without ``err``'s own notes
    when ``without_notes``: the exception :meth:`ForkPool.imap` raises carries them, and
    ``--traceback`` prints them under it, once, as with ``-j 1`` (until 2026-12-07 they were
    printed twice: under the worker's text of the exception too).  The notes of the
    exceptions it was raised from or during stay in the text (only it prints them)."""
    notes = vars(err).pop("__notes__", None) if without_notes else None
    if notes is None:  # (kept, or a class's: printed in the text)
        return traceback.format_exc()
    try:
        return traceback.format_exc()
    finally:
        err.__notes__ = notes


def _reply_bytes(reply: tuple, item: Any) -> bytes:
    """``reply`` pickled as a connection sends it; a reply that cannot be pickled (a lock in
    the result, a recursion too deep) is replaced by a ``RuntimeError`` naming the item."""
    try:
        return ForkingPickler.dumps(reply)
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - whatever pickling raises
        # the shape imap unpacks, (exception, traceback text, chain); the item, not the
        # result's repr (which may be megabytes), names what failed
        what = reply[1] if reply[0] else reply[1][0]
        why = RuntimeError(f"the result of item {item!r:.200} could not be sent back "
                           f"({'a result' if reply[0] else 'an exception'} of type "
                           f"{type(what).__name__}): {err}")
        return ForkingPickler.dumps((False, (why, traceback.format_exc(), ())))


def _pool_worker(fn: Callable[[Any], Any], tasks, results, inherited: list,
                 out_of_memory: mmap.mmap, tracebacks: mmap.mmap, w: int) -> None:
    """A :class:`ForkPool` worker, its ``w``-th: closes the pool's pipe ends it inherited
    (so that its own task pipe sees EOF when the pool is gone), then runs ``fn`` on each
    item it is sent and sends back ``(True, result)`` or ``(False, (exception, traceback
    text, chain))`` (:func:`_failure`); with no memory to make it or send it (a
    ``MemoryError`` anywhere from the end of ``fn`` to the send), or to receive the item
    (:data:`NO_MEMORY_FOR_ITEM`), sets ``out_of_memory[w]`` (no allocation: a byte of a map
    made before the fork), keeps the ``MemoryError``'s traceback in its part of
    ``tracebacks`` if it can, and exits :data:`OUT_OF_MEMORY`."""
    for conn in inherited:
        conn.close()
    while True:
        try:
            item = tasks.recv()
        except (EOFError, OSError):  # the pool is gone
            return
        except MemoryError:  # no memory to take the item in (its bytes, or unpickling them;
            # until 2026-12-07 it escaped: the worker's traceback, then a worker lost)
            _exit_out_of_memory(out_of_memory, tracebacks, w, NO_MEMORY_FOR_ITEM)
        ok = True  # (the reply is the item's result; False: the exception it raised)
        try:
            try:
                reply = (True, fn(item))
            except KeyboardInterrupt:
                raise
            except BaseException as err:  # noqa: BLE001 - sent back, raised by the imap
                # (in this handler: _failure formats the exception being handled)
                ok = False
                reply = (False, _failure(err))
            blob = _reply_bytes(reply, item)
        except MemoryError:  # making the reply: copying the failure, formatting its
            # traceback, pickling (until 2026-12-07 a MemoryError in _failure was read as
            # "cannot be pickled", status 70, or escaped with its traceback, status 1)
            _exit_out_of_memory(out_of_memory, tracebacks, w,
                                NO_MEMORY_FOR_RESULT if ok else NO_MEMORY_FOR_EXCEPTION)
        try:
            results.send_bytes(blob)
        except MemoryError:  # (until 2026-12-07 a traceback, and exit status 1)
            _exit_out_of_memory(out_of_memory, tracebacks, w,
                                NO_MEMORY_FOR_RESULT if ok else NO_MEMORY_FOR_EXCEPTION)
        except OSError:  # the pool is gone
            return


def _exit_out_of_memory(out_of_memory: mmap.mmap, tracebacks: mmap.mmap, w: int,
                        why: int) -> NoReturn:
    """Worker ``w`` had no memory for its item (``why``: :data:`NO_MEMORY_FOR_RESULT`, ...):
    marks its byte of ``out_of_memory`` with ``why`` and exits :data:`OUT_OF_MEMORY` at
    once, by ``os._exit``, which allocates nothing: ``sys.exit``'s ``SystemExit`` could itself
    fail for want of memory (the worker printed that ``MemoryError``'s traceback and exited
    1, until 2026-12-07).  The pool reads the mark only with that exit status: a marked
    worker killed before it exits (SIGKILL) is a worker lost, as any other killed (until
    2026-12-07 it read as out of memory).  What the process has written is flushed first
    (as a normal exit does; a flush that fails is left).  Called in the handler of the
    ``MemoryError``, whose traceback it keeps in ``tracebacks`` (:func:`_keep_traceback`)."""
    out_of_memory[w] = why
    _keep_traceback(tracebacks, w)
    # each flush in its own handler, written without making an object (until 2026-12-07 a
    # loop over a tuple in contextlib.suppress: a MemoryError making either escaped, and
    # the worker printed its traceback and exited 1)
    # (a Ctrl-C goes on, as in _keep_traceback: the worker exits as interrupted)
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - no memory, a closed stream: the exit still comes
        pass
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - likewise
        pass
    os._exit(OUT_OF_MEMORY)


def _keep_traceback(tracebacks: mmap.mmap, w: int) -> None:
    """The traceback of the exception being handled (a worker's ``MemoryError``), kept in
    worker ``w``'s :data:`OOM_TRACEBACK_BYTES` of ``tracebacks`` (its length, 4 bytes
    little-endian, written last: a length of 0 is no traceback), its end where it is longer
    (from the first character's start that leaves room for a line saying what was left out).
    Formatting it needs memory: if it fails, nothing is kept (the pool says it could not be
    recovered)."""
    try:
        data = traceback.format_exc().encode("utf-8", "backslashreplace")
        room = OOM_TRACEBACK_BYTES - 4
        if len(data) > room:  # (64: room for this line)
            left = len(data) - room + 64
            while left < len(data) and data[left] & 0xC0 == 0x80:  # inside a character: its
                left += 1  # end (until 2026-12-07 the cut could split one: U+FFFD first)
            data = f"(its first {left} bytes left out)\n".encode() + data[left:]
        start = w * OOM_TRACEBACK_BYTES
        tracebacks[start + 4:start + 4 + len(data)] = data
        tracebacks[start:start + 4] = len(data).to_bytes(4, "little")
    except Exception:  # noqa: BLE001 - no memory (or anything else): no traceback kept
        pass  # (a Ctrl-C goes on: the worker exits as interrupted, not out of memory)
