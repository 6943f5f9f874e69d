"""Property: any group size, element count, dtype, op and channel count assembles, lowers and
simulates bit-exactly (STYLE.md "Tests": the simulator proves the schedule correct).

Bounded so it stays fast: a handful of examples, no deadline, sizes up to 2**20 elements
only for small groups (the element volume of one example is capped)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from test_simulate import assert_clean, coll_spec, lower_spec

REDUCE_DTYPES = ["bf16", "fp16", "fp32r", "fp8_e3", "fp8_e4", "fp8_e5"]
ANY_DTYPES = REDUCE_DTYPES + ["int32", "int8", "uint64", "int16", "fp32"]
PRIMES = [2, 3, 5, 7, 61, 509, 4099, 65537, 524287]
#: element volume (elements x ranks) of one example: keeps each example well under a second
VOLUME = 1 << 21


@st.composite
def collectives(draw):
    op = draw(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]))
    ranks = draw(st.integers(2, 32))
    dtype = draw(st.sampled_from(ANY_DTYPES if op == "all_gather" else REDUCE_DTYPES))
    alu = draw(st.sampled_from(["add", "max", "min"]))
    cap = max(1, min(1 << 20, VOLUME // (ranks if op != "all_gather" else ranks * ranks)))
    count = draw(st.one_of(st.integers(1, cap), st.sampled_from([p for p in PRIMES if p <= cap]),
                           st.sampled_from([cap, cap - 1, max(1, cap // 3)])))
    if op == "reduce_scatter":
        count = max(1, count // ranks) * ranks
    seed = draw(st.integers(0, 2**31 - 1))
    lnc = draw(st.sampled_from([1, 2]))  # LNC 2 packs 4 ranks per device: more ring channels
    return op, ranks, dtype, alu, count, seed, lnc


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(collectives())
@example(("all_reduce", 16, "bf16", "add", 1 << 20, 1, 2))  # 4 channels
@example(("all_reduce", 2, "fp32r", "max", 1 << 20, 2, 1))  # 4 chunk groups (pgta)
@example(("all_gather", 2, "int32", "add", 1 << 19, 3, 1))  # pgta 4, integer copy
@example(("reduce_scatter", 3, "fp8_e4", "add", 3 * 65537, 4, 1))  # prime block
@example(("all_reduce", 31, "fp16", "min", 509, 5, 2))
@example(("all_reduce", 32, "fp8_e5", "add", 1, 6, 1))  # one element, fp8 with 32 > B ranks
def test_any_collective_simulates_bit_exactly(case):
    op, ranks, dtype, alu, count, seed, lnc = case
    with tempfile.TemporaryDirectory() as d:
        out = lower_spec(coll_spec(op, dtype, ranks, count, alu, lnc=lnc), Path(d) / "out")
        assert_clean(out, seed=seed)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]),
       st.sampled_from(["bf16", "fp16", "fp8_e4"]), st.integers(1, 3000), st.integers(0, 99))
def test_two_node_collectives(op, dtype, count, seed):
    from test_simulate import two_node_spec
    if op == "reduce_scatter":
        count = max(1, count // 4) * 4
    with tempfile.TemporaryDirectory() as d:
        out = lower_spec(two_node_spec(op, dtype, count), Path(d) / "out")
        assert_clean(out, seed=seed)
