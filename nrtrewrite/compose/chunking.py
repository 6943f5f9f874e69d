"""Chunk sizing and the chunk-group / half-chunk element layout (seed 001 §2).

All sizes here are in *elements* of the collective's I/O dtype.  Byte sizes
always come from the I/O type (FP32R is 4-byte fp32 in memory; the SDMA table's
0 for fp32r is never used for sizing: seed 000 §3.4 GOTCHA).

Layout (docs/DESIGN.md "Chunking"):

* ALLREDUCE follows seed 001 §4 exactly: the message is cut into ``pgta``
  chunk groups of ``rank_n * ch_n * chunk_size_n`` elements; inside group ``g``
  channel ``ch`` owns chunk positions ``k_base = rank_n * ch`` ..
  ``k_base + rank_n - 1``; chunk position ``pos`` (the index of a rank in the
  replica group) starts at ``g*group_elems + (rank_n*ch + pos) * chunk``.
* ALLGATHER and REDUCE_SCATTER work on ``rank_n`` *blocks* of ``count``
  elements (block ``b`` belongs to group member ``b``); each block is cut into
  groups of ``ch_n * chunk_size_n``; channel ``ch`` of group ``g`` covers
  ``b*count + g*ch_n*chunk + ch*chunk``.
* Each chunk splits into CHUNK_H0 and CHUNK_H1 halves of ``chunk/2`` elements.
* The last group's chunk is re-clamped (the short tail group): the smallest
  even chunk that still covers the remainder.  Ranges are clamped to the end
  of the message (or block), so the tail is exact: a half may be short or
  empty, and an empty half emits no leg on any rank (docs/DESIGN.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nrtrewrite.codes import DType, DTYPE_SIZE, EncOpType, SDMA_DATA_TYPE_SIZE

#: Granularity of a chunk in elements (__set_dynamic_chunk_size's ``>> 5``).
CHUNK_GRANULE_ELEMS = 32
#: Default channel-buffer budget of one chunk, in bytes (our choice; docs/DESIGN.md).
DEFAULT_CHUNK_BYTES = 512 * 1024
#: A channel is only activated when it gets at least this many elements per chunk position.
MIN_ELEMS_PER_CHANNEL_CHUNK = 2 * CHUNK_GRANULE_ELEMS


def io_dtype_size(dtype: DType) -> int:
    """Bytes per element for sizing.  FP32R sizes as its 4-byte fp32 storage."""
    size = SDMA_DATA_TYPE_SIZE[dtype]
    return size if size else DTYPE_SIZE[DType.FP32]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, m: int) -> int:
    return _ceil_div(a, m) * m


@dataclass(frozen=True)
class ChunkPlan:
    """The chunking of one collective leg over one ring.

    ``span`` is the number of elements the chunk layout walks: the whole
    message for ALLREDUCE, one block (``count``) for ALLGATHER/REDUCE_SCATTER.
    """

    op: EncOpType
    rank_n: int
    channels: int  # active channels (ch_n)
    chunk: int  # chunk_size_n, elements, even (enc_primitive::set_chunk_size_n asserts it)
    groups: int  # pgta
    tail_chunk: int  # re-clamped chunk of the last group (the seed's p.chunk_sz_n), even, <= chunk
    span: int  # elements walked per block (ALLREDUCE: the message)
    blocks: bool  # True for ALLGATHER / REDUCE_SCATTER block layout

    @property
    def group_elems(self) -> int:
        """Elements one full chunk group covers (per block for the block layout)."""
        per = self.channels * self.chunk
        return per * self.rank_n if not self.blocks else per

    def chunk_of_group(self, g: np.ndarray | int) -> np.ndarray | int:
        return np.where(np.asarray(g) == self.groups - 1, self.tail_chunk, self.chunk)

    def half_ranges(self, g, ch, pos, half):
        """Vectorised element range [start, stop) of (group, channel, position, half).

        All arguments broadcast (numpy int64).  For the block layout ``pos`` is
        the block index and the range is in the concatenated block space
        (``pos*span`` + offset within the block).
        """
        g = np.asarray(g, dtype=np.int64)
        ch = np.asarray(ch, dtype=np.int64)
        pos = np.asarray(pos, dtype=np.int64)
        half = np.asarray(half, dtype=np.int64)
        cs = np.asarray(self.chunk_of_group(g), dtype=np.int64)
        base = g * self.group_elems
        if self.blocks:
            within = base + ch * cs + half * (cs // 2)
            lo = pos * self.span
            hi = lo + self.span
            start = np.minimum(lo + within, hi)
            stop = np.minimum(start + cs // 2, hi)
        else:
            start = np.minimum(base + (self.rank_n * ch + pos) * cs + half * (cs // 2), self.span)
            stop = np.minimum(start + cs // 2, self.span)
        return start, stop


def set_dynamic_chunk_size(op: EncOpType, num_elements: int, rank_n: int, dtype: DType,
                           max_channels: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> ChunkPlan:
    """__set_dynamic_chunk_size + __set_active_channels + the chunk-group count
    (the seed's ``nr_channel_chunks``), by our rule, not the seed's formula
    (docs/DESIGN.md "Chunking").

    ``num_elements`` is the trigger's N (each rank's input).  Returns the plan
    for a ring of ``rank_n`` ranks with up to ``max_channels`` channels.
    """
    if rank_n < 1 or max_channels < 1:
        raise ValueError("rank_n and max_channels must be positive")
    blocks = op in (EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER)
    if op == EncOpType.REDUCE_SCATTER:
        span = num_elements // rank_n
    else:
        span = num_elements
    per_position = span if blocks else _ceil_div(span, rank_n)  # elements per chunk position
    # __set_active_channels: only channels that get a useful share run.
    channels = max(1, min(max_channels, per_position // MIN_ELEMS_PER_CHANNEL_CHUNK))
    dsz = io_dtype_size(dtype)
    max_chunk = max(CHUNK_GRANULE_ELEMS,
                    (chunk_bytes // dsz) // CHUNK_GRANULE_ELEMS * CHUNK_GRANULE_ELEMS)
    chunk = min(max_chunk, _round_up(max(1, _ceil_div(per_position, channels)), CHUNK_GRANULE_ELEMS))
    group_elems = channels * chunk * (1 if blocks else rank_n)
    groups = max(1, _ceil_div(span, group_elems))
    remained = span - (groups - 1) * group_elems
    per_tail = _ceil_div(remained, channels * (1 if blocks else rank_n))
    tail_chunk = min(chunk, _round_up(max(per_tail, 1), 2))
    return ChunkPlan(op=op, rank_n=rank_n, channels=channels, chunk=chunk, groups=groups,
                     tail_chunk=tail_chunk, span=span, blocks=blocks)
