"""The simulator's byte-range helpers (``simulate/triggers.py``): an operand's merged
intervals (``Footprint.intervals``) and the ranges a trigger's legs may write
(``merge_intervals`` / ``covers``, checked for every written run), against brute-force
references on random inputs; and strided SBUF operands with many runs simulating clean."""

from __future__ import annotations

import random

import numpy as np
import pytest

from nrtrewrite.simulate.layout import Region
from nrtrewrite.simulate.triggers import Footprint, covers, merge_intervals

from test_sbuf_overlap import ap, sbuf_spec
from test_simulate import assert_clean, lower_spec


def _bytes(ivs) -> set[int]:
    return {x for a, b in ivs for x in range(a, b)}


def _reference_intervals(offsets: np.ndarray, dsize: int) -> list[tuple[int, int]]:
    """The merged ranges of a set of elements, byte by byte."""
    cover = sorted({int(o) + k for o in offsets for k in range(dsize)})
    out: list[tuple[int, int]] = []
    for x in cover:
        if out and out[-1][1] == x:
            out[-1] = (out[-1][0], x + 1)
        else:
            out.append((x, x + 1))
    return out


def _region() -> Region:
    return Region(0, "t", "sbuf", 0, 4096, 1, None, None)


@pytest.mark.parametrize("seed", range(40))
def test_footprint_intervals_match_a_byte_by_byte_reference(seed):
    rng = random.Random(seed)
    dsize = rng.choice([1, 2, 4, 8])
    n = rng.randint(0, 60)
    # offsets in any order, with repeats, overlapping (not dsize-aligned) and touching
    offsets = np.array([rng.randint(0, 200) for _ in range(n)], np.int64)
    fp = Footprint(_region(), 0, n, dsize, offsets=offsets)
    want = _reference_intervals(offsets, dsize)
    assert fp.intervals() == want
    assert fp.intervals() == want  # cached: a second call, the same answer
    fp.intervals().append((-1, 0))  # callers get a copy
    assert fp.intervals() == want


def test_contiguous_footprint_intervals():
    assert Footprint(_region(), 16, 8, 2).intervals() == [(16, 32)]
    assert Footprint(_region(), 16, 0, 2).intervals() == []
    assert Footprint(_region(), 0, 0, 2, offsets=np.zeros(0, np.int64)).intervals() == []


def _reference_merge(ivs):
    merged: list[tuple[int, int]] = []
    for a, b in sorted(ivs):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


@pytest.mark.parametrize("seed", range(60))
def test_merge_intervals_and_covers_match_a_brute_force_reference(seed):
    rng = random.Random(seed)
    ivs = []
    for _ in range(rng.randint(0, 30)):
        a = rng.randint(0, 120)
        ivs.append((a, a + rng.randint(0, 12)))  # empty, touching and overlapping ranges too
    starts, ends = merge_intervals(ivs)
    assert list(zip(starts, ends)) == _reference_merge(ivs)
    assert all(isinstance(x, int) for x in starts + ends)
    merged = _reference_merge(ivs)
    for _ in range(300):
        a = rng.randint(-2, 140)
        e = a + rng.randint(0, 10)
        want = any(x <= a and e <= y for x, y in merged)
        assert covers(starts, ends, a, e) == want, (ivs, a, e)


def test_merge_intervals_empty():
    assert merge_intervals([]) == ([], [])
    assert not covers([], [], 0, 0)


# ---------------------------------------------------------------------------------------
# strided SBUF operands: many short runs per descriptor, each checked against the dst


STRIDED = [
    # in place, 4 partitions walked backwards from the last element of each (negative steps):
    # 32 runs of 64 bytes per partition
    ("all_reduce_in_place_negative_steps", "all_reduce",
     ap(start=4094, parts=4, dims=((-1, 32), (-64, 32))),
     ap(start=4094, parts=4, dims=((-1, 32), (-64, 32)))),
    # the same forwards
    ("all_reduce_in_place_positive_steps", "all_reduce",
     ap(parts=4, dims=((1, 32), (64, 32))), ap(parts=4, dims=((1, 32), (64, 32)))),
    # all-gather into every other element: 1024 runs of 2 bytes
    ("all_gather_every_other_element", "all_gather", ap(var="u", dims=((1, 256),)),
     ap(dims=((2, 1024),))),
]


@pytest.mark.parametrize("coll, src, dst", [r[1:] for r in STRIDED], ids=[r[0] for r in STRIDED])
def test_strided_sbuf_operands_simulate_clean(tmp_path, coll, src, dst):
    res = assert_clean(lower_spec(sbuf_spec(coll, src, dst), tmp_path / "out", algo="ring"))
    assert all(t.ranks_checked == t.group_size for t in res.triggers)
