"""The simulator's test data is exact (nccl-tests style): every partial sum of every order is
representable, so a reduction in any order, accumulated in fp32 or in the I/O dtype itself,
gives the reference bit for bit."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nrtrewrite.codes import DType, NUMPY_DTYPE
from nrtrewrite.simulate.testdata import (
    EXACT_INT_BOUND, Reference, make_input, reduce_integers, trigger_exponent,
)

REDUCE_DTYPES = [DType.BF16, DType.FP16, DType.FP32R, DType.FP8_E3, DType.FP8_E4, DType.FP8_E5]
OPS = ["ADD", "MAX", "MIN"]
UFUNC = {"ADD": np.add, "MAX": np.maximum, "MIN": np.minimum}


def test_bounds_are_the_exact_integer_ranges():
    """Every integer in [-B, B] is representable; B + 1 is not (or is out of range) for fp8."""
    for dt, bound in EXACT_INT_BOUND.items():
        npdt = NUMPY_DTYPE[dt]
        ints = np.arange(-bound, bound + 1, dtype=np.float64)
        assert np.array_equal(ints.astype(np.float32).astype(npdt).astype(np.float64), ints), dt
    for dt in (DType.BF16, DType.FP16, DType.FP8_E3, DType.FP8_E4, DType.FP8_E5):
        b = EXACT_INT_BOUND[dt] + 1
        back = np.float64(np.float32(b).astype(NUMPY_DTYPE[dt]).astype(np.float64))
        assert back != b, dt


@pytest.mark.parametrize("dtype", REDUCE_DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [2, 3, 8, 17, 64, 128])
def test_every_partial_sum_is_exact(dtype, op, n):
    count = 4096
    npdt = NUMPY_DTYPE[dtype]
    ins = [make_input(11, 3, p, n, count, dtype, op, True) for p in range(n)]
    ref = Reference("ALLREDUCE", op, dtype, list(range(n)), count)
    for p, x in enumerate(ins):
        ref.add(p, x)
    want = ref.expected_bytes(0)
    rng = np.random.default_rng(n)
    for trial in range(3):
        order = rng.permutation(n) if trial else np.arange(n)
        # fp32 accumulation (the CCE), rounded once at the end
        acc = ins[order[0]].astype(np.float32)
        for p in order[1:]:
            UFUNC[op](acc, ins[p].astype(np.float32), out=acc)
        assert np.array_equal(acc.astype(npdt).view(np.uint8), want)
        # every partial result also representable in the I/O dtype (ring partials)
        part = ins[order[0]].copy()
        for p in order[1:]:
            part = UFUNC[op](part.astype(np.float32), ins[p].astype(np.float32)).astype(npdt)
        assert np.array_equal(part.view(np.uint8), want)


@pytest.mark.parametrize("dtype", REDUCE_DTYPES)
def test_inputs_exercise_the_reduction(dtype):
    """Not a degenerate all-zero input: ranks differ and the sum differs from any one input."""
    n = 64
    ks = np.stack([reduce_integers(5, 0, p, n, 2048, dtype, "ADD") for p in range(n)])
    live = min(0.2, 0.8 * EXACT_INT_BOUND[dtype] / n)  # fp8: at most B ranks are non-zero
    assert (ks != 0).mean() > live
    total = ks.sum(axis=0)
    assert np.abs(total).max() <= EXACT_INT_BOUND[dtype]
    assert not np.array_equal(total, ks[0])
    e = trigger_exponent(5, 0, dtype)
    assert -6 <= e <= 6


def test_inputs_are_a_function_of_seed_trigger_rank():
    a = make_input(1, 2, 3, 8, 100, DType.BF16, "ADD", True)
    assert np.array_equal(a.view(np.uint16), make_input(1, 2, 3, 8, 100, DType.BF16, "ADD",
                                                         True).view(np.uint16))
    for other in [(2, 2, 3), (1, 3, 3), (1, 2, 4)]:
        b = make_input(*other, 8, 100, DType.BF16, "ADD", True)
        assert not np.array_equal(a.view(np.uint16), b.view(np.uint16))


@pytest.mark.parametrize("dtype", list(DType))
def test_all_gather_inputs_are_random_bytes(dtype):
    x = make_input(0, 0, 1, 4, 257, dtype, "", False)
    assert x.dtype == NUMPY_DTYPE[dtype] and x.size == 257
    raw = x.view(np.uint8)
    assert len(set(raw.tolist())) > 100  # every bit pattern, not just small numbers


def test_reference_reduce_scatter_and_all_gather():
    n, count = 4, 16
    ins = [make_input(0, 0, p, n, count, DType.FP16, "ADD", True) for p in range(n)]
    rs = Reference("REDUCE_SCATTER", "ADD", DType.FP16, [10, 11, 12, 13], count)
    for p, x in enumerate(ins):
        rs.add(p, x)
    full = sum(x.astype(np.float64) for x in ins).astype(np.float16)
    for b in range(n):
        assert np.array_equal(rs.expected_bytes(b), full[b * 4:(b + 1) * 4].view(np.uint8))
    ag = Reference("ALLGATHER", None, DType.INT32, [10, 11, 12], 5)
    parts = [np.arange(5, dtype=np.int32) + 100 * p for p in range(3)]
    for p in (2, 0, 1):
        ag.add(p, parts[p])
    assert np.array_equal(ag.expected_bytes(1).view(np.int32), np.concatenate(parts))
    assert list(itertools.islice(ag.parts, 3)) == [2, 0, 1]


@pytest.mark.parametrize("dtype", REDUCE_DTYPES)
@pytest.mark.parametrize("op", ["MAX", "MIN"])
@pytest.mark.parametrize("n", [2, 3, 4, 8, 64])
def test_max_min_data_show_a_misplaced_source_on_every_n_elements(dtype, op, n):
    """On each element one member (element + o) mod n holds the extreme, the others lie
    strictly on the other side of it: a member's value replaced by any other of its own
    values (a read shifted by some elements) or dropped changes the result on every
    element where it holds the extreme, so on every n consecutive elements, unless the
    replacement equals the extreme exactly (rare where the dtype has many integers)."""
    count = 2048
    k = np.stack([reduce_integers(5, 2, p, n, count, dtype, op) for p in range(n)])
    best = k.max(axis=0) if op == "MAX" else k.min(axis=0)
    holder = (k == best).sum(axis=0)
    assert (holder == 1).all()  # a unique extreme on every element
    who = np.argmax(k == best, axis=0)
    assert np.array_equal(who, (np.arange(count) + who[0]) % n)  # rotating: every member
    bound = EXACT_INT_BOUND[dtype]
    assert ((op == "MAX") == (best > bound // 2)).all() or op == "MIN"
    assert (op == "MAX" or (best < -(bound // 2)).all())
    ties = 0
    for shift in (1, -1, 2, n):
        for r in range(n):
            shifted = k.copy()
            shifted[r] = np.roll(k[r], -shift)
            got = shifted.max(axis=0) if op == "MAX" else shifted.min(axis=0)
            mine = who == r
            # where r holds the extreme, the result is unchanged exactly when the value
            # read instead is the extreme itself
            assert np.array_equal((got == best)[mine], (shifted[r] == best)[mine])
            ties += int((shifted[r] == best)[mine].sum())
    if bound >= 1 << 8:  # bf16, fp16, fp32r: hundreds of values above the middle
        assert ties <= 0.02 * 4 * count, ties


@pytest.mark.parametrize("op", ["MAX", "MIN"])
@pytest.mark.parametrize("n", [3, 4])
def test_the_holder_offset_moves_with_the_seed(op, n):
    """SIMULATOR.md §4: the holder of element e is member (e + o) mod n with ``o`` drawn
    from (seed, trigger), so another ``--seed`` moves the extremes to other members: a tile
    shorter than n elements, which shows a misplaced source only where it loses the extreme,
    is held by each member at some seed. Over seeds 0..15 the holder of element 0 (member
    o) is each of the n members; an offset fixed at 0 would give member 0 at every seed."""
    holders = set()
    for seed in range(16):
        k = np.stack([reduce_integers(seed, 2, p, n, 8, DType.BF16, op) for p in range(n)])
        best = k.max(axis=0) if op == "MAX" else k.min(axis=0)
        (who,) = np.flatnonzero(k[:, 0] == best[0])  # one holder
        assert np.array_equal(np.flatnonzero(k[:, 1] == best[1]), [(who + 1) % n])
        holders.add(int(who))
    assert holders == set(range(n))


#: SIMULATOR.md §4: the range of the shared exponent E, per dtype (B x 2**E finite, 2**E normal)
EXPONENTS = {DType.BF16: (-6, 6), DType.FP16: (-4, 4), DType.FP32R: (-6, 6),
             DType.FP8_E3: (-2, 0), DType.FP8_E4: (-2, 2), DType.FP8_E5: (-2, 2)}


@pytest.mark.parametrize("dtype", REDUCE_DTYPES)
def test_a_triggers_inputs_are_its_integers_times_one_power_of_two(dtype):
    """SIMULATOR.md §4: every input of a reduction is ``k x 2**E``, ``E`` one exponent for
    the whole trigger (every rank, every element), drawn from (seed, trigger) in the dtype's
    range. Over triggers 0..11 (seed 7, 4 ranks) each trigger's values divided by their
    integers are one power of two 2**E inside the range, and E is not the same for every
    trigger: the inputs are not only the integers (E = 0), but fractions and multiples of
    them too."""
    lo, hi = EXPONENTS[dtype]
    seen = set()
    for trigger in range(12):
        vals = np.stack([make_input(7, trigger, p, 4, 256, dtype, "ADD", True)
                         for p in range(4)]).astype(np.float64)
        ks = np.stack([reduce_integers(7, trigger, p, 4, 256, dtype, "ADD") for p in range(4)])
        assert np.array_equal(vals == 0, ks == 0)
        scale = np.unique(vals[ks != 0] / ks[ks != 0])
        assert scale.size == 1, (trigger, scale)
        e = int(np.log2(scale[0]))
        assert scale[0] == 2.0 ** e and lo <= e <= hi, (trigger, scale)
        seen.add(e)
    assert len(seen) > 1, seen


@pytest.mark.parametrize("dtype", list(DType))
@pytest.mark.parametrize("reduce", [True, False])
def test_inputs_made_in_place_are_the_same_bits(dtype, reduce):
    """``make_input(out=...)`` (the engine writes a rank's contiguous input straight into its
    buffer) gives the bits the returned array has, and returns ``out`` itself."""
    if reduce and dtype not in EXACT_INT_BOUND:
        return  # (integer reductions are not simulated)
    count = 5000
    want = make_input(3, 1, 2, 8, count, dtype, "ADD" if reduce else "", reduce)
    buf = np.full(count * NUMPY_DTYPE[dtype].itemsize + 3, 0xA5, np.uint8)
    out = buf[1:-2].view(NUMPY_DTYPE[dtype])  # unaligned, inside a larger buffer
    got = make_input(3, 1, 2, 8, count, dtype, "ADD" if reduce else "", reduce, out=out)
    assert got is out
    assert bytes(buf[1:-2]) == np.ascontiguousarray(want).tobytes()
    assert buf[0] == buf[-1] == buf[-2] == 0xA5  # nothing written around it


@pytest.mark.parametrize("alu", ["ADD", "MAX", "MIN"])
def test_reference_in_blocks_equals_a_float64_reduction(alu, monkeypatch):
    """Reference.add folds the inputs in a block of ADD_BLOCK elements at a time: with a
    block smaller than the count (not dividing it), the result is numpy's float64 reduction
    of the whole inputs, rounded once."""
    import nrtrewrite.simulate.testdata as td
    monkeypatch.setattr(td, "ADD_BLOCK", 7)
    n, count = 5, 50
    ins = [make_input(4, 0, p, n, count, DType.BF16, alu, True) for p in range(n)]
    ref = Reference("ALLREDUCE", alu, DType.BF16, list(range(n)), count)
    for p, x in enumerate(ins):
        ref.add(p, x)
    f64 = np.stack([x.astype(np.float32).astype(np.float64) for x in ins])
    red = {"ADD": f64.sum(axis=0), "MAX": f64.max(axis=0), "MIN": f64.min(axis=0)}[alu]
    want = red.astype(np.float32).astype(NUMPY_DTYPE[DType.BF16])
    assert bytes(ref.expected_bytes(0)) == want.tobytes()


def test_a_seed_is_one_32_bit_word():
    """The data's key takes the seed as one 32-bit word: a seed of 2^32 or more, or below 0,
    would draw another seed's data under another interleaving, so it is refused (the API with
    ValueError, the command as a usage error), and every seed in range draws its own data."""
    from click.testing import CliRunner
    from conftest import FIXTURES
    from nrtrewrite.cli import main
    from nrtrewrite.simulate import simulate_output
    from nrtrewrite.simulate.testdata import SEED_MAX
    assert SEED_MAX == 2 ** 32 - 1
    for bad in (-1, 2 ** 32, 2 ** 64, True):
        with pytest.raises(ValueError, match="seed"):
            make_input(bad, 0, 1, 4, 16, DType.BF16, "ADD", True)
        with pytest.raises(ValueError, match="seed"):
            simulate_output("no-such-output", seed=bad)
    a, b = (make_input(s, 0, 1, 4, 64, DType.BF16, "ADD", True).view(np.uint16)
            for s in (0, SEED_MAX))
    assert not np.array_equal(a, b)
    for bad in ("-1", str(2 ** 32)):
        res = CliRunner().invoke(main, ["simulate", str(FIXTURES / "ar2.neff"), "--seed", bad])
        assert res.exit_code == 2 and "--seed" in res.output and "4294967295" in res.output
