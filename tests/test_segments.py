"""Leg layouts (compose/segments.py): every element of every position is covered exactly
once by (chunk group, channel, position, half, segment), ranges never cross a segment, and
the interleaved layout is the ring's ChunkPlan shifted by its offset."""

import numpy as np
from hypothesis import given, settings, strategies as st

from nrtrewrite.codes import DType, EncOpType
from nrtrewrite.compose.chunking import set_dynamic_chunk_size
from nrtrewrite.compose.segments import (
    PeerTable, even_split, interleaved_layout, segmented_layout,
)


def all_ranges(layout):
    g, ch, pos, half = np.meshgrid(np.arange(layout.groups), np.arange(layout.channels),
                                   np.arange(layout.rank_n), np.arange(2), indexing="ij")
    return layout.expand(g.ravel(), ch.ravel(), pos.ravel(), half.ravel()) + (pos.ravel(),)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 24), sizes=st.lists(st.integers(0, 5000), min_size=1, max_size=4),
       channels=st.integers(1, 8), dtype=st.sampled_from([DType.BF16, DType.FP8_E4, DType.FP32R]),
       chunk_bytes=st.sampled_from([256, 4096, 512 * 1024]))
def test_segmented_layout_covers_each_segment_once(n, sizes, channels, dtype, chunk_bytes):
    import functools
    import nrtrewrite.compose.segments as S
    orig = S.set_dynamic_chunk_size
    S.set_dynamic_chunk_size = functools.partial(set_dynamic_chunk_size, chunk_bytes=chunk_bytes)
    try:
        # position p owns len(sizes) segments, interleaved with the other positions' ones
        segs, lo = [[] for _ in range(n)], 0
        for k, size in enumerate(sizes):
            for p in range(n):
                segs[p].append((lo, lo + size))
                lo += size
        layout = segmented_layout(EncOpType.ALLGATHER, segs, dtype, channels)
    finally:
        S.set_dynamic_chunk_size = orig
    row, seg, start, stop, pos = all_ranges(layout)
    keep = stop > start
    owner = pos[row]
    s_lo = np.array([segs[p][k][0] for p, k in zip(owner, seg)])
    s_hi = np.array([segs[p][k][1] for p, k in zip(owner, seg)])
    assert (start >= s_lo).all() and (stop <= s_hi).all()
    a, b = np.sort(start[keep]), np.sort(stop[keep])
    if a.size:
        assert np.array_equal(a[1:], b[:-1])  # contiguous, no overlap, no hole
        assert a[0] == 0 and b[-1] == lo
    else:
        assert lo == 0
    assert layout.plan.chunk % 32 == 0 and layout.plan.tail_chunk % 2 == 0


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 20), span=st.integers(1, 200_000), offset=st.integers(0, 10_000),
       channels=st.integers(1, 8))
def test_interleaved_layout_is_the_ring_layout_shifted(n, span, offset, channels):
    layout = interleaved_layout(EncOpType.ALLREDUCE, span, n, DType.BF16, channels, offset=offset)
    plan = set_dynamic_chunk_size(EncOpType.ALLREDUCE, span, n, DType.BF16, channels)
    assert layout.plan == plan
    row, _seg, start, stop, pos = all_ranges(layout)
    g, ch, p, h = np.meshgrid(np.arange(plan.groups), np.arange(plan.channels), np.arange(n),
                              np.arange(2), indexing="ij")
    ra, rb = plan.half_ranges(g.ravel(), ch.ravel(), p.ravel(), h.ravel())
    assert np.array_equal(start, ra + offset) and np.array_equal(stop, rb + offset)


@given(lo=st.integers(0, 1000), n=st.integers(0, 100_000), parts=st.integers(1, 64))
def test_even_split(lo, n, parts):
    s = even_split(lo, lo + n, parts)
    assert len(s) == parts and s[0][0] == lo and s[-1][1] == lo + n
    assert all(a <= b for a, b in s) and all(s[i][1] == s[i + 1][0] for i in range(parts - 1))
    if n >= parts:  # a HIER all-reduce gives every local rank a slice
        assert all(b > a for a, b in s)


def test_peer_table():
    t = PeerTable(7)
    assert t.peers == [7] and t(7) == 0 and t(3) == 1 and t(3) == 1 and t.peers == [7, 3]


@given(sizes=st.lists(st.integers(0, 6), max_size=5), groups=st.integers(0, 4))
def test_repeat_over_groups(sizes, groups):
    from nrtrewrite.compose.segments import repeat_over_groups
    src, g = repeat_over_groups(tuple(sizes), groups)
    first = np.cumsum([0] + sizes)
    want = [(first[p] + r, k) for p, size in enumerate(sizes) for k in range(groups)
            for r in range(size)]
    assert list(zip(src.tolist(), g.tolist())) == want
    assert not src.flags.writeable and not g.flags.writeable


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.lists(st.integers(1, 3000), max_size=3), min_size=1, max_size=12),
       channels=st.integers(1, 8), dtype=st.sampled_from([DType.BF16, DType.FP8_E4]))
def test_ragged_segments_cover_each_segment_once(counts, channels, dtype):
    """Positions owning different numbers of segments (none, one, several: the general
    segment tables, where a uniform count is a reshape) are covered exactly once too."""
    segs, lo = [], 0
    for sizes in counts:
        segs.append([])
        for size in sizes:
            segs[-1].append((lo, lo + size))
            lo += size
    layout = segmented_layout(EncOpType.REDUCE_SCATTER, segs, dtype, channels)
    row, seg, start, stop, pos = all_ranges(layout)
    owner = pos[row]
    assert all(seg[owner == p].max(initial=-1) < len(segs[p]) for p in range(len(segs)))
    s_lo = np.array([segs[p][k][0] for p, k in zip(owner, seg)], np.int64)
    s_hi = np.array([segs[p][k][1] for p, k in zip(owner, seg)], np.int64)
    assert (start >= s_lo).all() and (stop <= s_hi).all()
    keep = stop > start
    a, b = np.sort(start[keep]), np.sort(stop[keep])
    assert np.array_equal(a[1:], b[:-1]) and (a.size == 0 or (a[0] == 0 and b[-1] == lo))
    assert a.size or lo == 0
