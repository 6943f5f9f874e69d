"""Element -> byte-address mapping of the logical buffers a leg touches.

A :class:`BufferView` maps an element index of the collective's element space
to addresses in one rank's core window.  DRAM operands and the scratch / gateway
regions are *linear* (one contiguous run per element range); SBUF operands follow
their access pattern (NEFF-LIKE.md §2) and split into runs of the innermost
dimension.  :meth:`BufferView.runs` is vectorised over many element ranges.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from nrtrewrite.neff.model import AccessPattern


@dataclass(frozen=True)
class BufferView:
    """Element ``e`` of a buffer (``e`` in the op's element space).

    Linear: ``address(e) = base + (e - origin) * dsize``.
    SBUF:   ``e - origin`` is decomposed over ``ap`` (partition outermost,
    dim 0 innermost) and placed at ``sbuf_base + partition * stride + region``.
    Addresses are relative to the rank's core window.
    """

    dsize: int
    origin: int  # element index that maps to the buffer's first element
    base: int  # linear: byte address of element ``origin``; SBUF: region base in partition 0
    ap: AccessPattern | None = None
    partition_stride: int = 0
    anchor: int = 0  # address the 0xBF TENSOR3D start_addr is measured from

    def run_length(self) -> int | None:
        """Elements per contiguous run (None = unbounded)."""
        if self.ap is None:
            return None
        step0, num0 = self.ap.dims[0]
        return num0 if step0 == 1 else 1

    def address(self, e: np.ndarray) -> np.ndarray:
        e = np.asarray(e, dtype=np.int64) - self.origin
        if self.ap is None:
            return self.base + e * self.dsize
        (s0, n0), (s1, n1), (s2, n2) = self.ap.dims
        i0 = e % n0
        t = e // n0
        i1 = t % n1
        t = t // n1
        i2 = t % n2
        p = t // n2
        return (self.base + (self.ap.partition_start + p) * self.partition_stride + self.ap.start
                + (i0 * s0 + i1 * s1 + i2 * s2) * self.dsize)

    def runs(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Contiguous runs of element ranges [a, b).

        Returns (owner index into a/b, address, length in bytes), ordered by
        owner then address order within the range.
        """
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        r = self.run_length()
        if r is None:
            idx = np.arange(a.size, dtype=np.int64)
            return idx, self.address(a), (b - a) * self.dsize
        rel_a = a - self.origin
        rel_b = b - self.origin
        count = (rel_b - 1) // r - rel_a // r + 1
        count = np.where(rel_b > rel_a, count, 0)
        idx = np.repeat(np.arange(a.size, dtype=np.int64), count)
        first = np.cumsum(count) - count
        k = np.arange(idx.size, dtype=np.int64) - np.repeat(first, count)
        run_start = np.maximum(rel_a[idx], (rel_a[idx] // r + k) * r)
        run_stop = np.minimum(rel_b[idx], (rel_a[idx] // r + k + 1) * r)
        return idx, self.address(run_start + self.origin), (run_stop - run_start) * self.dsize


class ViewList(Sequence):
    """An entry's buffer views as columns, indexed by the IR's view numbers.

    Linear views are rows of the int64 columns ``dsize``, ``origin``, ``base`` and ``anchor``
    (a :class:`BufferView` with those fields); a view that follows an SBUF access pattern
    keeps its object in ``sbuf`` (view number -> view; its columns hold its ``dsize``,
    ``origin``, ``base`` and ``anchor``).  A mesh or RDH entry has a view per channel-buffer
    slot, hundreds of them: as columns they are built, joined and read by the emitter with
    numpy (:meth:`tables`), never one Python object each.  Indexing gives the
    :class:`BufferView` (equal to the one the row stands for)."""

    __slots__ = ("dsize", "origin", "base", "anchor", "sbuf")

    def __init__(self, dsize, origin, base, anchor, sbuf: dict[int, BufferView] | None = None):
        n = len(origin)
        dsize = np.asarray(dsize, np.int64)
        self.dsize = np.full(n, dsize, np.int64) if dsize.ndim == 0 else dsize
        self.origin = np.asarray(origin, np.int64)
        self.base = np.asarray(base, np.int64)
        self.anchor = np.asarray(anchor, np.int64)
        self.sbuf = sbuf or {}
        if not (self.dsize.shape == self.origin.shape == self.base.shape == self.anchor.shape
                == (n,)):
            raise ValueError("a ViewList's columns must have one value per view")

    @classmethod
    def of(cls, views: Iterable[BufferView]) -> ViewList:
        """The views of a list (a ViewList is returned as it is)."""
        if isinstance(views, ViewList):
            return views
        views = list(views)
        cols = np.array([(v.dsize, v.origin, v.base, v.anchor) for v in views],
                        np.int64).reshape(len(views), 4).T.copy()
        return cls(*cols, {i: v for i, v in enumerate(views) if v.ap is not None})

    @classmethod
    def join(cls, seqs: Sequence[Iterable[BufferView]]) -> tuple[ViewList, list[int]]:
        """The views of ``seqs`` (lists of views, or ViewLists) one after the other, and the
        length of each: :meth:`concat` of :meth:`of` each, the views of plain lists read in
        one :meth:`of` (an emit batch joins dozens of entries' few views each)."""
        seqs = [s if isinstance(s, (list, ViewList)) else list(s) for s in seqs]
        counts = [len(s) for s in seqs]
        if any(isinstance(s, ViewList) for s in seqs):
            return cls.concat([cls.of(s) for s in seqs]), counts
        return cls.of([v for s in seqs for v in s]), counts

    @classmethod
    def concat(cls, parts: Sequence[ViewList]) -> ViewList:
        """The views of ``parts`` one after the other (view numbers shifted)."""
        if len(parts) == 1:
            return parts[0]
        sbuf, first = {}, 0
        for p in parts:
            sbuf.update({first + i: v for i, v in p.sbuf.items()})
            first += len(p)
        return cls(*(np.concatenate([getattr(p, c) for p in parts])
                     for c in ("dsize", "origin", "base", "anchor")), sbuf)

    def __len__(self) -> int:
        return self.origin.size

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]  # an int in range, negative counted from the end
        if i in self.sbuf:
            return self.sbuf[i]
        return BufferView(dsize=int(self.dsize[i]), origin=int(self.origin[i]),
                          base=int(self.base[i]), anchor=int(self.anchor[i]))

    def __eq__(self, other) -> bool:
        if isinstance(other, (ViewList, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # mutable-looking container semantics, like list

    def __repr__(self) -> str:
        return f"ViewList({list(self)!r})"

    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(linear?, address of element 0 of each linear view (``base - origin * dsize``, 0
        for the others), dsize), one value per view."""
        linear = np.ones(len(self), bool)
        linear[list(self.sbuf)] = False
        return linear, np.where(linear, self.base - self.origin * self.dsize, 0), self.dsize
