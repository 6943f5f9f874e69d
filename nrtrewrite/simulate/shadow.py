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


def _with_reader(readers: tuple | None, acc: Access, vc) -> tuple:
    """A range's read set after ``acc`` reads it: ``acc`` replaces the reads of its own
    thread and the reads ordered before it (FastTrack's read sets)."""
    if readers is None:
        return (acc,)
    return tuple(x for x in readers if x.tid != acc.tid and x.clk > vc[x.tid]) + (acc,)


class Conflict(Exception):
    """Raised by :class:`Shadow` checks; the engine turns it into a SimulationError."""

    def __init__(self, kind: str, lo: int, hi: int, other: Access | None, trigger: int | None = None):
        super().__init__(kind)
        self.kind = kind  # "unwritten" | "stale" | "raw" | "ww" | "war"
        self.lo = lo
        self.hi = hi
        self.other = other
        self.trigger = trigger


def _check_read(lo: int, hi: int, wk: Access | None, acc: Access, vc) -> None:
    """A read by ``acc`` of bytes ``[lo, hi)`` last written by ``wk``: written in this
    trigger, ordered after the writer."""
    if wk is None:
        raise Conflict("unwritten", lo, hi, None)
    if wk.trigger != acc.trigger:
        raise Conflict("stale", lo, hi, wk, wk.trigger)
    if wk.tid != acc.tid and wk.clk > vc[wk.tid]:
        raise Conflict("raw", lo, hi, wk)


def _check_write(lo: int, hi: int, wk: Access | None, reads, acc: Access, vc) -> None:
    """A write by ``acc`` of bytes ``[lo, hi)`` last written by ``wk`` and read by ``reads``
    since: ordered after the write and every read."""
    tid = acc.tid
    if wk is not None and wk.tid != tid and wk.clk > vc[wk.tid]:
        raise Conflict("ww", lo, hi, wk)
    if reads:
        for x in reads:
            if x.tid != tid and x.clk > vc[x.tid]:
                raise Conflict("war", lo, hi, x)


class Shadow:
    """Last writer and live reads of every byte of one (rank, region), as one run map:
    ``b`` the run boundaries, ``w[k]`` the last writer and ``r[k]`` the live reads (a tuple)
    of run ``[b[k], b[k+1])``."""

    __slots__ = ("b", "w", "r")

    def __init__(self, size: int):
        self.b = [0, max(size, 0)]
        self.w: list = [None]
        self.r: list = [None]

    def _cut(self, x: int) -> int:
        b = self.b
        i = bisect_left(b, x)
        if i < len(b) and b[i] == x:
            return i
        b.insert(i, x)
        self.w.insert(i, self.w[i - 1])
        self.r.insert(i, self.r[i - 1])
        return i

    def read(self, a: int, e: int, acc: Access, vc) -> None:
        """A read of [a, e): written in this trigger, ordered after the writer.  Runs that had
        the same read set share the one they get (a tuple: it is never changed in place)."""
        i = self._cut(a)
        j = self._cut(e)
        b, w, r = self.b, self.w, self.r
        was = now = self  # (no read set is the shadow)
        for k in range(i, j):
            _check_read(b[k], b[k + 1], w[k], acc, vc)
            if r[k] is not was:
                was = r[k]
                now = _with_reader(was, acc, vc)
            r[k] = now

    def check_output(self, a: int, e: int, acc: Access, vc, writers: list | None = None
                     ) -> list[tuple[int, int]]:
        """The final read of a dst range: returns the sub-ranges not written by this trigger's
        data movement (fills do not count); races are still raised.  ``writers``, when given,
        gets ``(start, end, last writer)`` of every run of the range appended, in order (what
        a mismatch names: the writer of the first wrong element)."""
        i = self._cut(a)
        j = self._cut(e)
        b, w, r = self.b, self.w, self.r
        if writers is not None:
            writers.extend(zip(b[i:j], b[i + 1:j + 1], w[i:j]))
        bad = []
        tid = acc.tid
        was = now = self  # (as in read)
        for k in range(i, j):
            wk = w[k]
            if wk is None or wk.trigger != acc.trigger or wk.kind == Access.FILL:
                bad.append((b[k], b[k + 1]))
            elif wk.tid != tid and wk.clk > vc[wk.tid]:
                raise Conflict("raw", b[k], b[k + 1], wk)
            if r[k] is not was:
                was = r[k]
                now = _with_reader(was, acc, vc)
            r[k] = now
        return bad

    def write(self, a: int, e: int, acc: Access, vc) -> None:
        """A write of [a, e): ordered after the last write and every read since."""
        if e <= a:
            return
        i = self._cut(a)
        j = self._cut(e)
        b, w, r = self.b, self.w, self.r
        for k in range(i, j):
            _check_write(b[k], b[k + 1], w[k], r[k], acc, vc)
        del b[i + 1:j]
        w[i:j] = [acc]
        r[i:j] = [None]
        if i + 1 < len(w) and w[i + 1] is acc and r[i + 1] is None:
            del b[i + 1], w[i + 1], r[i + 1]
        if i > 0 and w[i - 1] is acc and r[i - 1] is None:
            del b[i], w[i], r[i]

    # -- many ranges at once ------------------------------------------------------------
    #: Above this many ranges, :meth:`read_many` and :meth:`write_many` rebuild the span
    #: they cover in one pass and splice it in once; below it they call :meth:`read` /
    #: :meth:`write` per range (each cut a list insert: quadratic in the runs of a span of
    #: many short ranges, an SBUF operand of a run per element).
    MANY = 8

    def read_many(self, ivs: list[tuple[int, int]], acc: Access, vc) -> None:
        """:meth:`read` of every range of ``ivs`` (ascending, disjoint, not empty), in order:
        the same checks, the same conflicts, the same state."""
        if len(ivs) <= self.MANY or ivs[-1][1] > self.b[-1]:
            for a, e in ivs:
                self.read(a, e, acc, vc)
            return

        memo = [self, None]  # the last read set met and what it became (as in read)

        def inside(p: int, q: int, wk, rk):
            _check_read(p, q, wk, acc, vc)
            if rk is not memo[0]:
                memo[0], memo[1] = rk, _with_reader(rk, acc, vc)
            return wk, memo[1]
        self._rebuild(ivs, inside, None)

    def write_many(self, ivs: list[tuple[int, int]], acc: Access, vc) -> None:
        """:meth:`write` of every range of ``ivs`` (ascending, disjoint, not empty), in order:
        the same checks, the same conflicts, the same writer and reads of every byte."""
        if len(ivs) <= self.MANY or ivs[-1][1] > self.b[-1]:
            for a, e in ivs:
                self.write(a, e, acc, vc)
            return

        def inside(p: int, q: int, wk, rk):
            _check_write(p, q, wk, rk, acc, vc)
            return acc, None
        self._rebuild(ivs, inside, acc)

    def _rebuild(self, ivs: list[tuple[int, int]], inside, joined: Access | None) -> None:
        """Cut the runs covering ``ivs`` at every range's ends, give each piece inside a range
        ``inside(start, end, writer, reads)`` (which may raise: then nothing changes), keep
        the others, and splice the span in once. ``joined``: neighbouring runs written by it
        with no reads since are joined into one (:meth:`write` joins them so)."""
        b, w, r = self.b, self.w, self.r
        i = bisect_right(b, ivs[0][0]) - 1
        j = bisect_left(b, ivs[-1][1])
        pts = sorted(set(b[i:j + 1]).union(x for iv in ivs for x in iv))
        nw: list = []
        nr: list = []
        ko, ki, n = i, 0, len(ivs)
        for p, q in zip(pts, pts[1:]):
            while b[ko + 1] <= p:
                ko += 1
            while ki < n and ivs[ki][1] <= p:
                ki += 1
            if ki < n and ivs[ki][0] <= p:
                wk, rk = inside(p, q, w[ko], r[ko])
            else:
                wk, rk = w[ko], r[ko]
            nw.append(wk)
            nr.append(rk)
        if joined is not None:  # the pieces, and the runs on either side, joined
            lo = i - 1 if i > 0 and w[i - 1] is joined and r[i - 1] is None else i
            hi = j + 1 if j < len(w) and w[j] is joined and r[j] is None else j
            pts = b[lo:i] + pts + b[j + 1:hi + 1]
            nw = w[lo:i] + nw + w[j:hi]
            nr = r[lo:i] + nr + r[j:hi]
            i, j = lo, hi
            keep = [0] + [k for k in range(1, len(nw))
                          if not (nw[k] is joined and nr[k] is None
                                  and nw[k - 1] is joined and nr[k - 1] is None)]
            pts = [pts[k] for k in keep] + [pts[-1]]
            nw = [nw[k] for k in keep]
            nr = [nr[k] for k in keep]
        b[i:j + 1] = pts
        w[i:j] = nw
        r[i:j] = nr

    def runs(self) -> list[tuple[int, int, object, object]]:
        """(start, end, writer, reads) of every run (tests, debugging)."""
        return [(self.b[k], self.b[k + 1], self.w[k], self.r[k]) for k in range(len(self.w))]
