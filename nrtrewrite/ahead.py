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

An exception in ``fn`` is not pickled back: the consumer gets ``(item, None, seconds)`` and
runs ``fn`` itself to raise it with its own context (``fn`` must be deterministic).
"""

from __future__ import annotations

import mmap
import multiprocessing
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: Items the producer may run ahead of the consumer.
LOOKAHEAD = 16
#: Bytes of the shared ring (touched only as far as the results need).
RING_BYTES = 64 << 20

_JOB: tuple[Callable[[Any], Any], mmap.mmap] | None = None  # inherited by the fork

_RING, _PIPE, _FAILED = 0, 1, 2


def _producer(tasks, results, size: int) -> None:
    assert _JOB is not None
    fn, ring = _JOB
    head = 0  # bytes written to the ring so far (positions are head % size)
    consumed = 0  # bytes of the ring the consumer has taken (from its last task)
    while True:
        task = tasks.get()
        if task is None:
            return
        k, item, consumed = task
        t0 = time.perf_counter()
        try:
            blob = pickle.dumps(fn(item), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            results.put((_FAILED, k, None, 0, time.perf_counter() - t0))
            continue
        dt = time.perf_counter() - t0
        pos = head % size
        skip = size - pos if pos + len(blob) > size else 0  # a result is never split
        if len(blob) + skip <= size - (head - consumed):
            head += skip
            ring[head % size:head % size + len(blob)] = blob
            head += len(blob)
            results.put((_RING, k, head - len(blob), len(blob), dt))
        else:  # no room in the ring now: through the pipe
            results.put((_PIPE, k, blob, len(blob), dt))


class ForkAhead:
    """A forked process that computes ``fn(item)`` ahead of the consumer.

    ``ForkAhead(fn)`` forks at once (do it before starting threads: a fork copies only the
    calling thread); ``map(items)`` then yields ``(item, result, seconds)`` in item order,
    the process up to :data:`LOOKAHEAD` items ahead; ``result`` is ``None`` when ``fn``
    raised there (call ``fn(item)`` to raise it).  Use as a context manager (or call
    :meth:`close`): the process is stopped on exit, whether or not ``map`` ran."""

    def __init__(self, fn: Callable[[Any], Any], *, lookahead: int = LOOKAHEAD,
                 ring_bytes: int = RING_BYTES):
        global _JOB
        ctx = multiprocessing.get_context("fork")
        self.size, self.lookahead = ring_bytes, lookahead
        self.ring = mmap.mmap(-1, ring_bytes)  # MAP_SHARED | MAP_ANONYMOUS: shared by the fork
        self.tasks, self.results = ctx.SimpleQueue(), ctx.SimpleQueue()
        self.next_id, self.consumed = 0, 0
        _JOB = (fn, self.ring)
        try:
            self.proc = ctx.Process(target=_producer, args=(self.tasks, self.results, ring_bytes),
                                    name="nrtrewrite-ahead", daemon=True)
            self.proc.start()
        finally:
            _JOB = None

    def map(self, items: Sequence[Any]) -> Iterator[tuple[Any, Any, float]]:
        items = list(items)
        base = self.next_id  # result ids of this map: base, base + 1, ...
        sent = 0

        def send() -> None:
            nonlocal sent
            self.tasks.put((base + sent, items[sent], self.consumed))
            sent += 1

        while sent < min(self.lookahead, len(items)):
            send()
        self.next_id += len(items)
        for k, item in enumerate(items):
            kind, got, where, length, dt = self.results.get()
            if got != base + k:
                raise RuntimeError(f"the ahead process returned item {got}, expected {base + k}")
            if kind == _RING:
                pos = where % self.size
                result = pickle.loads(self.ring[pos:pos + length])
                self.consumed = where + length
            elif kind == _PIPE:
                result = pickle.loads(where)
            else:
                result = None
            if sent < len(items):
                send()
            yield item, result, dt

    def close(self) -> None:
        if self.proc.is_alive():
            self.tasks.put(None)
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join()
        self.tasks.close()
        self.results.close()
        self.ring.close()

    def __enter__(self) -> "ForkAhead":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
