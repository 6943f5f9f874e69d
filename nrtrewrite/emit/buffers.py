"""Element -> byte-address mapping of the logical buffers a leg touches.

A :class:`BufferView` maps an element index of the collective's element space
to addresses in one rank's core window.  DRAM operands and the scratch / gateway
regions are *linear* (one contiguous run per element range); SBUF operands follow
their access pattern (NEFF-LIKE.md §2) and split into runs of the innermost
dimension.  :meth:`BufferView.runs` is vectorised over many element ranges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

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

    @classmethod
    def linear_views(cls, dsize: int, origins: Iterable[int], bases: Iterable[int]
                     ) -> list[BufferView]:
        """``BufferView(dsize, origin, base, anchor=base)`` of each (origin, base): the linear
        views a mesh entry builds by the hundred (channel-buffer slots).  Each gets the field
        values ``__init__`` would set, written into its ``__dict__`` at once rather than one
        frozen ``object.__setattr__`` per field (two and a half times faster; equality and
        hashing are the dataclass's, of the same fields: tests/test_blockunits.py checks the
        fields are all set)."""
        out = []
        for origin, base in zip(origins, bases):
            view = object.__new__(cls)
            view.__dict__.update(dsize=dsize, origin=origin, base=base, ap=None,
                                 partition_stride=0, anchor=base)
            out.append(view)
        return out

    @property
    def linear(self) -> bool:
        return self.ap is None

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
