"""A small model of the chunk plans ``lower`` writes, from the docs alone (no nrtrewrite
import), so tests can work a manifest's ``chunk`` out instead of copying it.

- docs/DESIGN.md "Chunking" (seed 001 §2): a chunk is the per-position share
  ``ceil(per_position / channels)`` rounded up to 32 elements, capped by the channel-buffer
  budget (512 KiB, ``DEFAULT_CHUNK_BYTES``); an all-reduce has ``pgta = ceil(N / (rank_n x
  ch_n x chunk))`` chunk groups, a block (all-gather, reduce-scatter, a HIER intra leg's
  slice) ``ceil(count / (ch_n x chunk))``; the tail group's chunk is re-clamped to
  ``ceil(remained / positions)`` rounded up to even, 2 at least; active channels are only as
  many as give every chunk position at least 64 elements.
- docs/DESIGN.md "HIER" ``even_split``: slices of a multiple of 32 elements, the last one
  shorter, when the even share is over 32 elements and that leaves every slice non-empty,
  else sizes differing by at most one.
- docs/SELECTION.md §7 the channel rule: ``floor_pow2(bytes / 256 KiB)``, at least 1, capped
  by 32, by 4 inside a node or 16 across nodes, by the group's distinct rings and by
  ``elements / (rank_n x 64)``; SINGLE_CYCLE_RING runs ``max(1, n / 2)`` channel pairs and
  its ``chunk.channels`` counts pairs (FORMATS §1.1).
"""

from __future__ import annotations

CHUNK_BYTES = 512 * 1024
BYTES_PER_CHANNEL = 256 * 1024


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, m: int) -> int:
    return ceil_div(a, m) * m


def floor_pow2(x: int) -> int:
    return 1 << (x.bit_length() - 1) if x >= 1 else 0


def channel_rule(nbytes: int, elements: int, rank_n: int, *, inter: bool, rings: int) -> int:
    """SELECTION.md §7's count for a ring-family leg or trigger."""
    want = max(1, floor_pow2(nbytes // BYTES_PER_CHANNEL))
    return max(1, min(want, 32, 16 if inter else 4, rings, elements // (rank_n * 64)))


def even_split(n: int, parts: int) -> list[int]:
    """DESIGN.md "HIER": the slice sizes of n elements over ``parts`` local ranks."""
    share = ceil_div(n, parts)
    if share > 32:
        size = round_up(share, 32)
        if n - (parts - 1) * size > 0:
            return [size] * (parts - 1) + [n - (parts - 1) * size]
    return [n // parts + (i < n % parts) for i in range(parts)]


def chunk_plan(n: int, channels: int, dsize: int, *, rank_n: int | None = None,
               chunk_bytes: int = CHUNK_BYTES) -> dict:
    """The manifest ``chunk`` of ``n`` elements cut over ``channels`` layout slots: an
    all-reduce over ``rank_n`` ranks (interleaved: rank_n x channels positions a group), or a
    block (``rank_n`` None: channels positions a group)."""
    per_group_positions = (rank_n or 1)
    ch = channels
    while ch > 1 and ceil_div(n, per_group_positions * ch) < 64:  # __set_active_channels
        ch -= 1
    positions = per_group_positions * ch
    chunk = min(round_up(ceil_div(n, positions), 32), chunk_bytes // dsize)
    pgta = ceil_div(n, positions * chunk)
    remained = n - (pgta - 1) * positions * chunk
    tail = max(2, round_up(ceil_div(remained, positions), 2))
    return {"channels": ch, "chunk_size_n": chunk, "pgta": pgta, "tail_chunk": tail}
