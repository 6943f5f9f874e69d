"""Happens-before tracking: vector clocks, accesses and per-byte-range shadow state.

Every sequential actor of the simulation is a *thread* with a vector clock: one per
(rank, channel) leg queue, one per (rank, channel) net proxy and one control thread per
rank (entry boundaries, input fills, the final output check).  Synchronisation edges:

* queue order (a thread's clock only grows);
* semaphores: every ``inc`` token carries the incrementer's clock, a ``wait_ge_and_dec``
  joins the clocks of exactly the tokens it consumes (FIFO);
* entry boundaries: a rank's control thread joins every channel (and, with
  ``ring_send_complete``, every proxy) of the finished entry, and the next entry's
  threads join the control thread.

Each byte range of each (rank, region) remembers its last writer (thread, clock, trigger)
and the reads since that write that are not ordered before a later read of the same
thread (FastTrack's read sets).  An access is checked against them: a write must be
ordered after the last write and every read since; a read after the last write.  The
state is kept as interval maps, so its size follows the number of distinct ranges
written, not the number of bytes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right


class Access:
    """One access by one thread at one clock value (``who`` describes it for messages)."""

    __slots__ = ("tid", "clk", "trigger", "kind", "who")

    FILL, LEG, PROXY, CHECK = 0, 1, 2, 3

    def __init__(self, tid: int, clk: int, trigger: int, kind: int, who: str):
        self.tid = tid
        self.clk = clk
        self.trigger = trigger
        self.kind = kind
        self.who = who

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Access({self.who}, t{self.tid}@{self.clk})"


class IntervalMap:
    """A map from the integers of [0, size) to values, kept as maximal runs."""

    __slots__ = ("b", "v")

    def __init__(self, size: int):
        self.b = [0, max(size, 0)]
        self.v: list = [None]

    def _cut(self, x: int) -> int:
        b = self.b
        i = bisect_left(b, x)
        if i < len(b) and b[i] == x:
            return i
        b.insert(i, x)
        self.v.insert(i, self.v[i - 1])
        return i

    def span(self, a: int, e: int) -> list[tuple[int, int, object]]:
        """The runs overlapping [a, e), clipped to it."""
        b, v = self.b, self.v
        i = bisect_right(b, a) - 1
        out = []
        n = len(v)
        while i < n and b[i] < e:
            out.append((max(a, b[i]), min(e, b[i + 1]), v[i]))
            i += 1
        return out

    def assign(self, a: int, e: int, val) -> None:
        if e <= a:
            return
        i = self._cut(a)
        j = self._cut(e)
        del self.b[i + 1:j]
        self.v[i:j] = [val]
        self._merge(i)

    def update(self, a: int, e: int, fn) -> None:
        """Replace the value of every run in [a, e) by ``fn(old)``."""
        if e <= a:
            return
        i = self._cut(a)
        j = self._cut(e)
        v = self.v
        for k in range(i, j):
            v[k] = fn(v[k])
        for k in range(j, i - 1, -1):
            if 0 < k < len(v) and v[k] is v[k - 1]:
                del self.b[k]
                del v[k]

    def _merge(self, i: int) -> None:
        b, v = self.b, self.v
        if i + 1 < len(v) and v[i + 1] is v[i]:
            del b[i + 1]
            del v[i + 1]
        if i > 0 and v[i - 1] is v[i]:
            del b[i]
            del v[i]


class Conflict(Exception):
    """Raised by :class:`Shadow` checks; the engine turns it into a SimulationError."""

    def __init__(self, kind: str, lo: int, hi: int, other: Access | None, trigger: int | None = None):
        super().__init__(kind)
        self.kind = kind  # "unwritten" | "stale" | "raw" | "ww" | "war"
        self.lo = lo
        self.hi = hi
        self.other = other
        self.trigger = trigger


class Shadow:
    """Last writer and live reads of every byte of one (rank, region)."""

    __slots__ = ("writes", "reads")

    def __init__(self, size: int):
        self.writes = IntervalMap(size)
        self.reads = IntervalMap(size)

    def read(self, a: int, e: int, acc: Access, vc) -> None:
        """A read of [a, e): written in this trigger, ordered after the writer."""
        for lo, hi, w in self.writes.span(a, e):
            if w is None:
                raise Conflict("unwritten", lo, hi, None)
            if w.trigger != acc.trigger:
                raise Conflict("stale", lo, hi, w, w.trigger)
            if w.tid != acc.tid and w.clk > vc[w.tid]:
                raise Conflict("raw", lo, hi, w)
        tid = acc.tid

        def add(old):
            if old is None:
                return (acc,)
            keep = tuple(r for r in old if r.tid != tid and r.clk > vc[r.tid])
            return keep + (acc,)

        self.reads.update(a, e, add)

    def check_output(self, a: int, e: int, acc: Access, vc) -> list[tuple[int, int]]:
        """The final read of a dst range: returns the sub-ranges not written by this trigger's
        data movement (fills do not count); races are still raised."""
        bad = []
        for lo, hi, w in self.writes.span(a, e):
            if w is None or w.trigger != acc.trigger or w.kind == Access.FILL:
                bad.append((lo, hi))
            elif w.tid != acc.tid and w.clk > vc[w.tid]:
                raise Conflict("raw", lo, hi, w)
        tid = acc.tid
        self.reads.update(a, e, lambda old: tuple(
            r for r in (old or ()) if r.tid != tid and r.clk > vc[r.tid]) + (acc,))
        return bad

    def write(self, a: int, e: int, acc: Access, vc) -> None:
        """A write of [a, e): ordered after the last write and every read since."""
        tid = acc.tid
        for lo, hi, w in self.writes.span(a, e):
            if w is not None and w.tid != tid and w.clk > vc[w.tid]:
                raise Conflict("ww", lo, hi, w)
        for lo, hi, rs in self.reads.span(a, e):
            if rs:
                for r in rs:
                    if r.tid != tid and r.clk > vc[r.tid]:
                        raise Conflict("war", lo, hi, r)
        self.writes.assign(a, e, acc)
        self.reads.assign(a, e, None)
