"""Exact test data in the manner of nccl-tests (REFERENCES.md "NCCL").

Every input of a reduction is ``k * 2**E``: a small integer ``k`` and one exponent ``E``
shared by the whole trigger.  The integers are bounded so that every partial sum, in any
order and any grouping, is an integer of magnitude at most ``B`` (the largest bound below
which every integer is representable in the dtype): the reduction is then exact in fp32
and in the I/O dtype, and the result can be compared bit for bit with a numpy reference.

========  =====================================  ========================================
dtype     B (exactly representable integers)     ADD inputs for a group of n ranks
========  =====================================  ========================================
bf16      2**8                                   k in [-B//n, B//n]
fp16      2**11                                  k in [-B//n, B//n]
fp32(r)   2**24                                  k in [-B//n, B//n]
fp8_e3    15  (e3m4: max 15.5)                   as above; if B//n == 0: k in {-1, 1}
fp8_e4    2**4                                   on at most B ranks per element (the
fp8_e5    2**3                                   others are 0), chosen by element index
========  =====================================  ========================================

MAX and MIN take ``k`` in ``[-B, B]`` laid out so that a wrong source shows: on each
element one member of the group, the *holder* (``(element + o) mod n``, ``o`` drawn from the
seed), has the extreme, a random ``t`` in the top half ``(B // 2, B]`` for MAX, and every
other member a random value in ``[-B, t - 1]`` (MIN: the negated values).  A rank's source
read shifted by some elements, missing, or replaced by another member's (MAX and MIN being
idempotent, a doubled source alone changes nothing) loses the holder's value wherever that
rank holds the extreme - on every ``n`` consecutive elements - unless the value read
instead equals it exactly; on shorter tiles it shows where the misplaced value exceeds the
extreme, as with uniform random data, which showed a wrong source only there (a MESH
reduce-scatter source read one element ahead matched at seed 0).  All-gather inputs (any
dtype, integers included) are random bytes: a copy must move every bit pattern.

Inputs are a pure function of (seed, trigger, rank), so references can be rebuilt at any
time.
"""

from __future__ import annotations

import math

import numpy as np

from nrtrewrite import codes
from nrtrewrite.codes import DType

#: Largest B such that every integer in [-B, B] is representable.
EXACT_INT_BOUND: dict[DType, int] = {
    DType.BF16: 1 << 8,
    DType.FP16: 1 << 11,
    DType.FP32: 1 << 24,
    DType.FP32R: 1 << 24,
    DType.FP8_E3: 15,
    DType.FP8_E4: 1 << 4,
    DType.FP8_E5: 1 << 3,
}

#: Shared-exponent range per dtype: keeps B * 2**E below the dtype's max and 2**E normal.
EXPONENT_RANGE: dict[DType, tuple[int, int]] = {
    DType.BF16: (-6, 6),
    DType.FP16: (-4, 4),
    DType.FP32: (-6, 6),
    DType.FP32R: (-6, 6),
    DType.FP8_E3: (-2, 0),
    DType.FP8_E4: (-2, 2),
    DType.FP8_E5: (-2, 2),
}


#: the largest seed: the test data takes the seed as one 32-bit word of its key, so a
#: larger (or negative) seed would repeat another's data with another interleaving
SEED_MAX = 0xFFFFFFFF


def check_seed(seed: int) -> int:
    """``seed`` if it is a seed (an int from 0 to :data:`SEED_MAX`), else ``ValueError``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed {seed!r}: a seed is an integer from 0 to {SEED_MAX}")
    return seed


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([check_seed(seed), *key])))


def trigger_exponent(seed: int, trigger: int, dtype: DType) -> int:
    lo, hi = EXPONENT_RANGE[dtype]
    return int(_rng(seed, trigger, 1 << 20).integers(lo, hi + 1))


def reduce_integers(seed: int, trigger: int, pos: int, group_size: int, count: int,
                    dtype: DType, op: str) -> np.ndarray:
    """The integers ``k`` of group member ``pos`` (int32, ``count`` elements)."""
    bound = EXACT_INT_BOUND[dtype]
    rng = _rng(seed, trigger, pos)
    if op in ("MAX", "MIN"):
        half = bound // 2
        offset = int(_rng(seed, trigger, 1 << 21).integers(0, max(1, group_size)))
        holds = (np.arange(count, dtype=np.int64) + offset) % max(1, group_size) == pos
        # the holder's value in (B // 2, B], the others' below it: [-B, top - 1] (one draw
        # per element shared by the members, so that every member sees the same top)
        top = _rng(seed, trigger, 1 << 22).integers(half + 1, bound + 1, count, dtype=np.int32)
        rest = (-bound + (rng.random(count) * (top + bound)).astype(np.int64)).astype(np.int32)
        k = np.where(holds, top, rest)
        return k if op == "MAX" else -k
    if op != "ADD":
        return rng.integers(-bound, bound + 1, count, dtype=np.int32)
    k = bound // group_size
    if k >= 1:
        return rng.integers(-k, k + 1, count, dtype=np.int32)
    # fewer exact integers than ranks: at most `bound` ranks are non-zero on each element
    m = math.ceil(group_size / bound)
    vals = rng.integers(0, 2, count, dtype=np.int32) * 2 - 1  # -1 or 1
    live = (np.arange(count, dtype=np.int64) + pos) % m == 0
    return np.where(live, vals, 0).astype(np.int32)


def copies_only(reduce: bool, dtype: DType, group_size: int) -> bool:
    """A reduction over one rank in a dtype the test data has no exact integers for (INT32,
    the other integers: dtypes the CCE cannot reduce, which ``lower`` takes only over one
    rank, whose collective copies IN to OUT, docs/SELECTION.md §6): its input is random bytes,
    as an all-gather's, and its output must be those bytes (:class:`Reference`)."""
    return reduce and group_size == 1 and dtype not in EXACT_INT_BOUND


def make_input(seed: int, trigger: int, pos: int, group_size: int, count: int, dtype: DType,
               op: str, reduce: bool, out: np.ndarray | None = None) -> np.ndarray:
    """Input elements of group member ``pos`` as a numpy array of the I/O dtype; written into
    ``out`` (``count`` elements of the I/O dtype: the rank's input operand itself, so that
    no temporary of the operand's size is made) and returned, when given."""
    npdt = codes.NUMPY_DTYPE[dtype]
    if not reduce or copies_only(reduce, dtype, group_size):
        raw = _rng(seed, trigger, pos).integers(0, 256, count * npdt.itemsize, dtype=np.uint8)
        if out is None:
            return raw.view(npdt)
        out[...] = raw.view(npdt)
        return out
    k = reduce_integers(seed, trigger, pos, group_size, count, dtype, op)
    # k * 2**E in float32, in k's own memory (|k| <= 2**24: exact; no fresh temporary)
    vals = np.multiply(k, np.float32(2.0 ** trigger_exponent(seed, trigger, dtype)),
                       out=k.view(np.float32), dtype=np.float32, casting="unsafe")
    # exact by construction (tests/test_simulate_data.py); copyto casts as astype does
    if out is None:
        return vals.astype(npdt)
    np.copyto(out, vals, casting="unsafe")
    return out


#: Elements :meth:`Reference.add` widens and folds in at a time.
ADD_BLOCK = 1 << 18
#: The reference reduction's accumulator (exact for every sum of the test data), one element
#: per input element of a rank for the whole trigger; inputs and results widen through
#: ``WIDE_DTYPE``.
ACC_DTYPE = np.dtype(np.float64)
WIDE_DTYPE = np.dtype(np.float32)
#: Bytes an element :func:`make_input` holds at its peak while it makes a reduction's input
#: (numpy temporaries, tracemalloc: tests/test_simulate_memory.py): the int32 integers and
#: the float32 values made from them (numpy copies the integers, ``out`` aliasing them); with
#: fewer exact integers than ranks, the int32 signs while the int64 element indices and their
#: residues are made; for MAX and MIN, the holder mask, the int32 extremes, a float64 draw
#: and its int64 product.
INPUT_MAKING_BYTES = {"ADD": 8, "ADD_FEW": 20, "MAX": 21, "MIN": 21}


def input_making_bytes(alu: str | None, dtype: DType, group_size: int) -> int:
    """:data:`INPUT_MAKING_BYTES` of a reduction's ALU op (another op draws as ADD does)."""
    if alu in ("MAX", "MIN"):
        return INPUT_MAKING_BYTES[alu]
    few = alu == "ADD" and EXACT_INT_BOUND.get(dtype, 1) // max(1, group_size) < 1
    return INPUT_MAKING_BYTES["ADD_FEW" if few else "ADD"]


def reference_bytes(op_kind: str, alu: str | None, dtype: DType, count: int,
                    group_size: int) -> tuple[int, int]:
    """What one trigger's test data and reference hold besides its operands
    (docs/SIMULATOR.md §3 "Memory"), ``count`` input elements per rank over ``group_size``
    ranks: ``(while a rank's input is made, while a rank's output is checked)``.  A
    reduction: the :class:`Reference` accumulator (``ACC_DTYPE``), and :func:`make_input`'s
    temporaries (:func:`input_making_bytes`) while an input is made; the accumulator widened
    to ``WIDE_DTYPE``, the result in the I/O dtype and the rank's output read back while an
    output is checked.  An all-gather: the inputs kept (an output's bytes) while an input is
    made; those, the expected output made of them, one rank's output read back and the
    comparison's booleans, an output's bytes each, while an output is checked."""
    dsize = codes.NUMPY_DTYPE[dtype].itemsize
    if op_kind == "ALLGATHER":
        out = group_size * count * dsize
        return out, 4 * out
    out = count // max(1, group_size) if op_kind == "REDUCE_SCATTER" else count
    acc = count * ACC_DTYPE.itemsize
    return (acc + count * input_making_bytes(alu, dtype, group_size),
            acc + count * (WIDE_DTYPE.itemsize + dsize) + out * dsize)


class Reference:
    """Running reference of one trigger: the reduction (float64, exact) or the gathered inputs."""

    def __init__(self, op_kind: str, alu: str | None, dtype: DType, group: list[int], count: int):
        self.op_kind = op_kind  # ALLREDUCE / REDUCE_SCATTER / ALLGATHER
        self.alu = alu
        self.dtype = dtype
        self.npdt = codes.NUMPY_DTYPE[dtype]
        self.group = list(group)
        self.count = count  # input elements per rank
        self.acc: np.ndarray | None = None
        self.parts: dict[int, np.ndarray] = {}  # pos -> input bytes (all-gather)
        self.seen: set[int] = set()
        # (a one-rank reduction in a dtype of no exact integers copies its input: copies_only)
        self.copy = copies_only(op_kind != "ALLGATHER", dtype, len(self.group))
        self._full: np.ndarray | None = None  # the result in the I/O dtype, made once

    @property
    def complete(self) -> bool:
        return len(self.seen) == len(self.group)

    def add(self, pos: int, values: np.ndarray, check=None) -> None:
        """Fold in the effective input (as read back from memory) of group member ``pos``;
        ``check()`` (the run's memory guard) is called before each block."""
        if pos in self.seen:
            return
        self.seen.add(pos)
        if self.op_kind == "ALLGATHER" or self.copy:
            self.parts[pos] = np.ascontiguousarray(values).view(np.uint8).copy()
            return
        # float dtypes widen to float32 exactly, and (bfloat16, fp8) much faster than
        # straight to float64 through their ml_dtypes casts; the ufunc widens to the float64
        # accumulator as it goes.  A block of ADD_BLOCK elements at a time: on large triggers
        # a fresh temporary of the operand's size costs more in page faults than the
        # arithmetic (element by element the same operations, so the same result)
        first = self.acc is None
        if first:
            self.acc = np.empty(len(values), ACC_DTYPE)
        widen = self.dtype in EXACT_INT_BOUND
        for i in range(0, len(values), ADD_BLOCK):
            if check is not None:
                check()
            v = values[i:i + ADD_BLOCK]
            v = v.astype(WIDE_DTYPE) if widen else v
            acc = self.acc[i:i + ADD_BLOCK]
            # inf + -inf (a tampered output's input) is NaN, IEEE's outcome, as the engine's
            # reduce gives it (SIMULATOR.md §4): no numpy RuntimeWarning on stderr
            with np.errstate(over="ignore", invalid="ignore"):
                if first:
                    acc[...] = v
                elif self.alu == "ADD":
                    np.add(acc, v, out=acc)
                elif self.alu == "MAX":
                    np.maximum(acc, v, out=acc)
                else:
                    np.minimum(acc, v, out=acc)

    def expected_bytes(self, pos: int) -> np.ndarray:
        """What group member ``pos`` must hold in its dst operand, as bytes."""
        if self.op_kind == "ALLGATHER" or self.copy:
            return np.concatenate([self.parts[p] for p in range(len(self.group))])
        assert self.acc is not None
        if self._full is None:  # once for the whole group (the acc is final: complete)
            # a sum past the dtype's largest rounds to infinity (IEEE), as the engine's does:
            # no numpy "overflow encountered in cast" on stderr
            with np.errstate(over="ignore", invalid="ignore"):
                self._full = self.acc.astype(WIDE_DTYPE).astype(self.npdt)
        full = self._full
        if self.op_kind == "REDUCE_SCATTER":
            per = self.count // len(self.group)
            full = full[pos * per:(pos + 1) * per]
        return np.ascontiguousarray(full).view(np.uint8)
