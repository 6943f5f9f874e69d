"""``Shadow.read_many`` / ``write_many`` (one pass over many ranges, spliced in once) against
the definition: ``read`` / ``write`` of each range in turn. On random histories of accesses
by a few threads with random clocks (an access sometimes used again, as the tiles of one leg
are), both give the same conflict (kind and byte range) or,
without one, the same last writer and the same live reads for every byte."""

from __future__ import annotations

import random

import numpy as np
import pytest

from nrtrewrite.simulate.shadow import Access, Conflict, Shadow

SIZE = 400


def _bytes(sh: Shadow) -> list:
    """(writer, reads as a set) of every byte."""
    out = []
    for a, e, w, r in sh.runs():
        out += [(w, frozenset(r or ()))] * (e - a)
    return out


def _ranges(rng: random.Random) -> list[tuple[int, int]]:
    """Ascending, disjoint, non-empty ranges (sometimes touching: the engine joins those
    before, but the shadow must not care), 1 to 40 of them."""
    points = sorted(rng.choices(range(SIZE + 1), k=2 * rng.randint(1, 40)))
    ivs = list(zip(points[::2], points[1::2]))
    return [(a, e) for a, e in ivs if e > a] or [(0, 1)]


def _run(history, many: bool):
    sh = Shadow(SIZE)
    for kind, ivs, acc, vc in history:
        try:
            if many:
                (sh.read_many if kind == "r" else sh.write_many)(ivs, acc, vc)
            else:
                for a, e in ivs:
                    (sh.read if kind == "r" else sh.write)(a, e, acc, vc)
        except Conflict as c:
            return ("conflict", c.kind, c.lo, c.hi, c.other)
    return ("state", _bytes(sh))


@pytest.mark.parametrize("seed", range(300))
def test_many_ranges_at_once_are_the_ranges_one_by_one(seed):
    rng = random.Random(seed)
    threads = 3
    clocks = [0] * threads
    history = []
    for _ in range(rng.randint(1, 12)):
        if history and rng.random() < 0.3:  # the same access again: the next tile of a leg
            _kind, _ivs, acc, vc = history[-1]
            history.append((rng.choice("rww"), _ranges(rng), acc, vc))
            continue
        tid = rng.randrange(threads)
        clocks[tid] += 1
        # what this access has seen of the others: some of their clock, or all of it
        vc = np.array([clocks[t] if t == tid or rng.random() < 0.7 else
                       rng.randint(0, clocks[t]) for t in range(threads)])
        acc = Access(tid, clocks[tid], rng.choice([0, 0, 0, 1]), Access.LEG, f"t{tid}")
        history.append((rng.choice("rww"), _ranges(rng), acc, vc))
    assert _run(history, True) == _run(history, False)


def test_a_write_of_many_ranges_joins_its_own_neighbours():
    """As ``write`` joins a range with neighbours it wrote itself with no reads since, so
    does ``write_many``: an access that fills every gap of its earlier ranges leaves one
    run."""
    vc = np.zeros(1, np.int64)
    acc = Access(0, 1, 0, Access.LEG, "t0")
    sh = Shadow(SIZE)
    sh.write_many([(k, k + 1) for k in range(0, 40, 2)], acc, vc)
    assert len(sh.runs()) == 20 + 19 + 1  # 20 written, 19 gaps, the rest
    sh.write_many([(k, k + 1) for k in range(1, 40, 2)], acc, vc)
    assert [(a, e) for a, e, w, _r in sh.runs() if w is acc] == [(0, 40)]


def test_a_range_read_since_is_not_joined():
    """A run the access wrote and then read itself (an in-place leg's next tile) keeps its
    reads: ``write_many`` joins only runs with no reads since, as ``write`` does."""
    vc = np.zeros(1, np.int64)
    acc = Access(0, 1, 0, Access.LEG, "t0")
    history = [("w", [(0, 40)], acc, vc), ("r", [(0, 40)], acc, vc),
               ("w", [(k, k + 1) for k in range(0, 40, 2)], acc, vc)]
    assert _run(history, True) == _run(history, False)
    state = _run(history, True)[1]
    assert state[0] == (acc, frozenset()) and state[1] == (acc, frozenset([acc]))
    assert state[2] == (acc, frozenset()) and state[39] == (acc, frozenset([acc]))
