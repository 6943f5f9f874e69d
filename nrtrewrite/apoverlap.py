"""Overlap of SBUF access patterns: the SBUF half of :func:`nrtrewrite.lower.operand_refusal`.

An access pattern (:class:`nrtrewrite.neff.model.AccessPattern`) holds ``m = n0*n1*n2``
elements per partition.  Element ``e = p*m + k`` has ``(i0, i1, i2) = (k % n0, k // n0 %
n1, k // (n0*n1))`` and sits in *slot* ``q = i0*s0 + i1*s1 + i2*s2`` of partition
``partition_start + p``: bytes ``[start + q*dsize, start + (q+1)*dsize)``.  Every
partition of a pattern has the same slots, so one partition's slots (at most ``hi - lo +
1`` distinct ones, the pattern's extent; the reader keeps that extent inside the var) say
everything, and partition ranges are intersected separately.

Two things are refused (docs/DESIGN.md "Buffers and data flow"):

* a dst that writes two of its elements to the same bytes (a dim of step 0 and num > 1,
  dims whose strides interleave): the result would depend on the order of the writes.  A
  dst of more elements per partition than its extent has slots must alias (pigeonhole),
  and so at most the first ``hi - lo + 2`` of them are enumerated; none when its dims nest
  (:func:`nested`: rows, row strides), which cannot alias;
* src and dst in one var whose bytes overlap in a shared partition other than dst = src
  element for element (every dst element ``e`` at the partition and bytes of src element
  ``e``, not an all-gather) - the DRAM rule "dst = src exactly" generalised: an all-reduce
  whose dst pattern is its src pattern, a reduce-scatter whose dst elements are its first
  ``out_elements`` src elements.  A src may read a byte more than once, so its slots are
  not enumerated but counted (saturated at 2) per slot of its extent, in O(extent x log
  num) time and memory whatever its element count.  Nothing is enumerated when the
  partition ranges or the byte extents do not meet, or when the two patterns are the same
  (start, first partition and dims in their :func:`canonical` terms: in place).

An access pattern whose extent exceeds what one partition of the SBUF window holds
(:data:`PARTITION_BYTES`) is not checked here: its var cannot be laid out, and
``emit.address.build_memory_map`` refuses the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

import numpy as np

from nrtrewrite.codes import SBUF_PARTITIONS, EncOpType
from nrtrewrite.emit.address import SBUF_WINDOW_LIMIT
from nrtrewrite.neff.model import AccessPattern, Trigger

#: The most bytes per partition a state-buffer var that can be lowered has.
PARTITION_BYTES = SBUF_WINDOW_LIMIT // SBUF_PARTITIONS

_IN_PLACE = "only dst = src element for element is in place"
_ALL_GATHER = "an all-gather cannot be in place"


def extent(ap: AccessPattern) -> tuple[int, int]:
    """The lowest and highest slot of ``ap``."""
    lo = hi = 0
    for step, num in ap.dims:
        span = step * (num - 1)
        lo += min(0, span)
        hi += max(0, span)
    return lo, hi


def per_partition(ap: AccessPattern) -> int:
    """Elements of ``ap`` in each of its partitions."""
    (_s0, n0), (_s1, n1), (_s2, n2) = ap.dims
    return n0 * n1 * n2


def slots(ap: AccessPattern, first: int, count: int) -> np.ndarray:
    """Slots of the in-partition elements ``first .. first + count - 1`` of ``ap`` (int64;
    ``first`` may be any size, ``first + count <= per_partition(ap)``)."""
    (s0, n0), (s1, n1), (s2, n2) = ap.dims
    d0, rest = first % n0, first // n0
    d1, d2 = rest % n1, rest // n1
    a = d0 + np.arange(count, dtype=np.int64)
    b = d1 + a // n0
    return (a % n0) * s0 + (b % n1) * s1 + (d2 + b // n1) * s2


def slots_at(ap: AccessPattern, k: np.ndarray) -> np.ndarray:
    """Slots of the in-partition elements ``k`` (int64, each < per_partition(ap))."""
    (s0, n0), (s1, n1), (s2, n2) = ap.dims
    t = k // n0
    return (k % n0) * s0 + (t % n1) * s1 + (t // n1) * s2


def _add_shifted(acc: np.ndarray, blk: np.ndarray, d: int) -> None:
    """``acc[x] = min(2, acc[x] + blk[x - d])``."""
    n = acc.size
    if d >= 0:
        if d < n:
            acc[d:] += blk[:n - d]
    elif -d < n:
        acc[:n + d] += blk[-d:]
    np.minimum(acc, 2, out=acc)


def _progression(cur: np.ndarray, step: int, num: int) -> np.ndarray:
    """``out[x] = min(2, sum(cur[x - i*step] for i < num))``, by the binary digits of
    ``num`` (disjoint blocks of i, so the sum is exact before saturating)."""
    acc = np.zeros_like(cur)
    blk = cur
    off, width = 0, 1
    while num:
        if num & 1:
            _add_shifted(acc, blk, off * step)
            off += width
        num >>= 1
        if num:
            nxt = blk.copy()
            _add_shifted(nxt, blk, width * step)
            blk = nxt
            width *= 2
    return acc


def slot_counts(ap: AccessPattern, lo: int, hi: int) -> list[np.ndarray]:
    """How many in-partition elements of ``ap`` sit in each slot ``lo .. hi``, saturated at
    2, counting dim 0, dims 0..1 and dims 0..2 (uint8 arrays of ``hi - lo + 1``).

    Partial sums of the dims lie in ``[lo, hi]`` too (a dim left out adds 0, which is
    inside its own span), so every map has the same slots."""
    cur = np.zeros(hi - lo + 1, np.uint8)
    cur[-lo] = 1
    maps = []
    for step, num in ap.dims:
        if num > 1:
            cur = np.minimum(cur, 1) * np.uint8(2) if step == 0 else _progression(cur, step, num)
        maps.append(cur)
    return maps


def elements_at(ap: AccessPattern, lo: int, maps: list[np.ndarray], q: int,
                want: int = 2) -> list[int]:
    """The ``want`` smallest in-partition elements of ``ap`` in slot ``q`` (ascending).

    Greedy on the most significant index first: ``i2`` is the least whose remainder
    ``q - i2*s2`` the dims 0..1 reach (``maps[1]``), and so on down; every candidate
    yields an element, so this does a bounded amount of work."""
    dims = ap.dims
    mult = [1, dims[0][1], dims[0][1] * dims[1][1]]

    def reached(d: int, r: np.ndarray) -> np.ndarray:
        if d < 0:
            return r == 0
        inside = (r >= lo) & (r < lo + maps[d].size)
        out = np.zeros(r.shape, bool)
        out[inside] = maps[d][r[inside] - lo] > 0
        return out

    def gen(d: int, q: int) -> Iterator[int]:
        if d < 0:
            if q == 0:
                yield 0
            return
        step, num = dims[d]
        if step == 0 or num == 1:
            if reached(d - 1, np.array([q]))[0]:
                for i in range(num):  # lazily: num may be 2**32 - 1
                    for inner in gen(d - 1, q):
                        yield i * mult[d] + inner
            return
        i = np.arange(num, dtype=np.int64)
        for j in np.flatnonzero(reached(d - 1, q - i * step)):
            for inner in gen(d - 1, q - int(j) * step):
                yield int(j) * mult[d] + inner

    return list(islice(gen(2, q), want))


def _span(start: int, q: int, dsize: int) -> str:
    byte = start + q * dsize
    return f"bytes [{byte}, {byte + dsize})"


def dst_alias(ap: AccessPattern, dsize: int) -> tuple[str | None, np.ndarray | None]:
    """(why, None) if ``ap`` writes two elements to the same bytes, else (None, its slots).

    Elements of one pattern sit ``dsize`` apart or coincide, so the same slot is the same
    bytes.  The first ``min(m, hi - lo + 2)`` elements of a partition are enumerated: all
    of them, or more than the extent has slots, so a collision is among them."""
    lo, hi = extent(ap)
    m = per_partition(ap)
    count = min(m, hi - lo + 2)
    q = slots(ap, 0, count)
    _, first, inverse = np.unique(q, return_index=True, return_inverse=True)
    firsts = first[inverse.reshape(-1)]
    dup = np.flatnonzero(firsts != np.arange(count))
    if dup.size == 0:
        return None, q
    b = int(dup[0])
    a = int(firsts[b])
    return (f"dst access pattern writes elements {a} and {b} to the same "
            f"{_span(ap.start, int(q[b]), dsize)} of partition {ap.partition_start}: the "
            "result would depend on the order of the writes"), None


def _too_wide(ap: AccessPattern, dsize: int) -> bool:
    lo, hi = extent(ap)
    return (hi - lo + 1) * dsize > PARTITION_BYTES  # build_memory_map refuses its var


def nested(ap: AccessPattern) -> bool:
    """True if ``ap``'s dims, by increasing ``|step|``, each step over all the slots the
    smaller ones span (a mixed radix: contiguous rows, row strides): then no two elements
    share a slot, with nothing enumerated.  False says nothing."""
    span = 0
    for step, num in sorted((d for d in ap.dims if d[1] > 1), key=lambda d: abs(d[0])):
        if abs(step) <= span:
            return False
        span += abs(step) * (num - 1)
    return True


def canonical(ap: AccessPattern) -> tuple[tuple[int, int], ...]:
    """``ap``'s dims with the same element -> slot map in fewest terms: dims of num 1 left
    out, and a dim merged into the one inside it when it steps over exactly that one's
    span (``[[1, n], [n, 2]]`` is ``[[1, 2n]]``).  Two patterns with the same start, first
    partition and canonical dims put element e in the same slot: the in-place shortcut of
    :func:`sbuf_refusal`, without enumerating (a 32 MiB partition written as two 16 MiB
    rows in one pattern and one row in the other took 1.8 GB to compare element by
    element)."""
    out: list[tuple[int, int]] = []
    for step, num in ap.dims:
        if num == 1:
            continue
        if out and step == out[-1][0] * out[-1][1]:
            out[-1] = (out[-1][0], out[-1][1] * num)
        else:
            out.append((step, num))
    return tuple(out)


def _bytes(ap: AccessPattern, dsize: int) -> tuple[int, int]:
    lo, hi = extent(ap)
    return ap.start + lo * dsize, ap.start + (hi + 1) * dsize


def operands_may_share(trig: Trigger) -> bool:
    """Whether ``trig``'s src and dst may share bytes: one var, and their byte ranges meet
    (DRAM), or a partition in common and their byte extents meet (SBUF)."""
    s, d = trig.src, trig.dst
    if s.var_id != d.var_id:
        return False
    if s.ap is None or d.ap is None:
        return s.offset < d.offset + trig.out_bytes and d.offset < s.offset + trig.in_bytes
    (sa, sb), (da, db) = _bytes(s.ap, trig.dtype_size), _bytes(d.ap, trig.dtype_size)
    return (max(s.ap.partition_start, d.ap.partition_start)
            < min(s.ap.partition_start + s.ap.partition_count,
                  d.ap.partition_start + d.ap.partition_count) and sa < db and da < sb)


def sbuf_refusal(trig: Trigger) -> str | None:
    """Why ``lower`` refuses the SBUF operands of ``trig`` (module docstring), or None."""
    src, dst = trig.src.ap, trig.dst.ap
    assert src is not None and dst is not None
    ds = trig.dtype_size
    if _too_wide(dst, ds):
        return None
    qd = None
    if not nested(dst):
        why, qd = dst_alias(dst, ds)
        if why is not None:
            return why
    if trig.src.var_id != trig.dst.var_id:
        return None
    first = max(src.partition_start, dst.partition_start)
    end = min(src.partition_start + src.partition_count,
              dst.partition_start + dst.partition_count)
    (sa, sb), (da, db) = _bytes(src, ds), _bytes(dst, ds)
    if first >= end or sb <= da or db <= sa or _too_wide(src, ds):
        return None
    if (trig.op != EncOpType.ALLGATHER and (src.start, src.partition_start, canonical(src))
            == (dst.start, dst.partition_start, canonical(dst))
            and dst.partition_count <= src.partition_count):
        return None  # dst = src: element e of each is the same slot of the same partition
    if qd is None:
        qd = slots(dst, 0, per_partition(dst))
    return _Overlap(trig, qd).refusal(first)


class _Overlap:
    """src and dst patterns of one trigger in one var that share a partition."""

    def __init__(self, trig: Trigger, qd: np.ndarray):
        self.trig = trig
        self.src, self.dst = trig.src.ap, trig.dst.ap
        self.ds = trig.dtype_size
        self.md, self.ms = per_partition(self.dst), per_partition(self.src)
        self.qd = qd  # the dst's slots, one per in-partition element (no two alike)
        self.lo, hi = extent(self.src)
        self.maps = slot_counts(self.src, self.lo, hi)
        # a dst slot meets src slot qd + c for c in cands: one slot when the starts are a
        # whole number of elements apart, else the two it straddles
        delta = self.dst.start - self.src.start
        self.shift, rem = divmod(delta, self.ds)
        self.cands = [self.shift] if rem == 0 else [self.shift, self.shift + 1]
        self.counts = [self._count(qd + c) for c in self.cands]

    def _count(self, r: np.ndarray) -> np.ndarray:
        full = self.maps[-1]
        inside = (r >= self.lo) & (r < self.lo + full.size)
        out = np.zeros(r.shape, np.uint8)
        out[inside] = full[r[inside] - self.lo]
        return out

    def refusal(self, first: int) -> str | None:
        """Why the overlap is refused, or None when dst = src element for element.

        The message names the first dst element of the first shared partition that
        overlaps a src element other than its own (or its own at other bytes); when every
        overlap there is in place, the first dst element that is not."""
        hit = np.zeros(self.md, bool)
        for cnt in self.counts:
            hit |= cnt > 0
        if not hit.any():
            return None
        if self.trig.op == EncOpType.ALLGATHER:
            k = int(np.flatnonzero(hit)[0])
            return self._pair(first, k, own=None, how=_ALL_GATHER)
        bad = self._not_own(first)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            return self._pair(first, k, own=self._dst_element(first, k), how=_IN_PLACE)
        f = self._first_not_in_place()
        if f is None:
            # in place; the shared partitions are the dst's, and each is like the first
            # (one of them, or src and dst partitions alike): no other src element there
            return None
        k0 = int(np.flatnonzero(hit)[0])
        e = self._dst_element(first, k0)
        pd, qd, ps, qs = f[1:]
        return (f"dst access pattern element {e} (partition {first}, "
                f"{_span(self.dst.start, int(self.qd[k0]), self.ds)}) is src element {e} of "
                f"state-buffer var {self.trig.src.var_id} in place but element {f[0]} "
                f"(partition {pd}, {_span(self.dst.start, qd, self.ds)}) is not (src element "
                f"{f[0]}: partition {ps}, {_span(self.src.start, qs, self.ds)}): {_IN_PLACE}")

    def _dst_element(self, p: int, k: int) -> int:
        return (p - self.dst.partition_start) * self.md + k

    def _not_own(self, p: int) -> np.ndarray:
        """Dst elements of partition ``p`` that overlap a src element other than their own,
        or their own at other bytes."""
        if len(self.cands) == 2:  # the starts are not a whole number of elements apart
            return (self.counts[0] > 0) | (self.counts[1] > 0)
        cnt = self.counts[0]
        # dst element (p, k) is src element (p, k + c): its own, if that is in partition p
        c = self._dst_element(p, 0) - (p - self.src.partition_start) * self.ms
        own = np.zeros(self.md, bool)
        klo, khi = max(0, -c), min(self.md, self.ms - c)
        if klo < khi:
            own[klo:khi] = slots(self.src, c + klo, khi - klo) == self.qd[klo:khi] + self.shift
        return (cnt >= 2) | ((cnt == 1) & ~own)

    def _pair(self, p: int, k: int, own: int | None, how: str) -> str:
        """The message for dst element (p, k) and the least src element of partition p it
        overlaps (other than ``own``)."""
        src, dst = self.src, self.dst
        base = (p - src.partition_start) * self.ms
        found = []
        for c in self.cands:
            r = int(self.qd[k]) + c
            for w in elements_at(src, self.lo, self.maps, r):
                j = base + w
                if j != own or len(self.cands) == 2:
                    found.append((j, r))
        j, r = min(found)
        return (f"dst access pattern element {self._dst_element(p, k)} (partition {p}, "
                f"{_span(dst.start, int(self.qd[k]), self.ds)}) overlaps src element {j} "
                f"({_span(src.start, r, self.ds)}) of state-buffer var {self.trig.src.var_id}: "
                f"{how}")

    def _first_not_in_place(self) -> tuple[int, int, int, int, int] | None:
        """The first dst element not at the partition and bytes of the src element of the
        same number: (element, dst partition, dst slot, src partition, src slot), or None.

        Not an all-gather, so the src has at least as many elements as the dst."""
        src, dst, md, ms = self.src, self.dst, self.md, self.ms
        for i in range(dst.partition_count):
            f0 = i * md
            if ms >= f0 + md:  # all in src's first partition
                ps = np.full(md, src.partition_start, np.int64)
                qs = slots(src, f0, md)
            else:  # ms < 2**32 here
                f = f0 + np.arange(md, dtype=np.int64)
                ps = src.partition_start + f // ms
                qs = slots_at(src, f % ms)
            pd = dst.partition_start + i
            bad = (ps != pd) | (src.start + qs * self.ds != dst.start + self.qd * self.ds)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                return f0 + k, pd, int(self.qd[k]), int(ps[k]), int(qs[k])
            if dst.partition_count == 1 or (md == ms and dst.partition_start
                                            == src.partition_start):
                break  # every dst partition is like this one
        return None
