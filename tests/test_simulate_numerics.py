"""The simulator's CCE arithmetic against an independent model (docs/SIMULATOR.md §4,
FORMATS §6 "Numerics").

The simulator's own test data is exact (small integers times 2**E): every order and every
rounding gives the same bits, so the data check of ``nrtrewrite simulate`` cannot observe the
engine's arithmetic.  These tests pin it with random, order-sensitive data (normal values of
widely varied exponents, some of them cancelling) against a model written here from FORMATS
§6: each source read in the input dtype, accumulated in fp32 in source order (one round to
nearest even per step), the result rounded once to the output dtype (round to nearest even,
overflow to infinity, subnormals kept).  The rounding is implemented here with float64
scaling and ``np.rint``, not with numpy's float32 or ml_dtypes' casts.

* single CCE reduces (2..8 sources, every reducible dtype, ADD / MAX / MIN) run through
  ``Simulator._move``, the function that executes a reduce leg;
* whole mesh all-reduces of 3 and 8 ranks (one CCE reduce of every rank's input per block)
  simulated with injected inputs and the model as the reference;
* sensitivity: the same tests with the engine's arithmetic replaced by three wrong models
  (accumulate in the I/O dtype, truncate instead of rounding to nearest even, reverse the
  source order) must fail;
* the special-value behaviour the engine has (NaN, infinities, signed zeros, subnormals, fp8
  overflow): modelling choices of the simulator, pinned so that a change is seen.
"""

from __future__ import annotations

import json
from pathlib import Path

import meshcase
import ml_dtypes
import numpy as np
import pytest

from nrtrewrite.codes import DType, NUMPY_DTYPE
from nrtrewrite.simulate import engine
from nrtrewrite.simulate.program import Leg

# -- the independent model -------------------------------------------------------------------

#: IEEE-style binary formats: (precision p with the implicit bit, emin, emax).  Every
#: reducible dtype has infinities and NaNs at the top exponent (ml_dtypes float8_e3m4,
#: float8_e4m3, float8_e5m2; not the "fn" variants).
FORMAT = {
    DType.BF16: (8, -126, 127),
    DType.FP16: (11, -14, 15),
    DType.FP8_E3: (5, -2, 3),  # max 15.5
    DType.FP8_E4: (4, -6, 7),  # max 240
    DType.FP8_E5: (3, -14, 15),  # max 57344
    DType.FP32R: (24, -126, 127),
}
FP32 = FORMAT[DType.FP32R]
REDUCIBLE = list(FORMAT)
ADD, MAX, MIN = 0, 2, 3  # SDMA_CCETYPE (FORMATS §6)
OPS = {"ADD": ADD, "MAX": MAX, "MIN": MIN}


def io_code(dt: DType) -> int:
    """The CCE in/out nibble of a dtype: FP32R data is read and written as FP32 (§6)."""
    return int(DType.FP32 if dt == DType.FP32R else dt)


def round_to(x: np.ndarray, fmt: tuple[int, int, int]) -> np.ndarray:
    """``x`` (float64) rounded to nearest even in the format ``fmt``; overflow gives
    infinity, subnormals are kept, the sign of zero is kept."""
    p, emin, emax = fmt
    x = np.asarray(x, np.float64)
    out = x.copy()
    fin = np.isfinite(x) & (x != 0)
    v = x[fin]
    _, e = np.frexp(v)  # v = m * 2**e, 0.5 <= |m| < 1: the exponent of v is e - 1
    q = np.maximum(e - 1, emin) - (p - 1)  # the exponent of one ulp at v (subnormal: emin)
    r = np.ldexp(np.rint(np.ldexp(v, -q)), q)  # exact scaling; rint is round-half-even
    top = (2.0 - 2.0 ** (1 - p)) * 2.0 ** emax
    out[fin] = np.where(np.abs(r) > top, np.copysign(np.inf, r), r)
    return out


def model_reduce(op: int, dt: DType, sources: list[np.ndarray]) -> np.ndarray:
    """FORMATS §6: fp32 accumulation in source order, one rounding to the output dtype."""
    xs = [np.asarray(s).astype(np.float64) for s in sources]  # exact: a subset of fp32
    acc = xs[0].copy()
    for x in xs[1:]:
        if op == ADD:
            # float64 then fp32: double rounding is innocuous for a sum when the wide
            # format has at least 2p + 2 bits (53 >= 50)
            acc = round_to(acc + x, FP32)
        elif op == MAX:
            acc = np.where(x > acc, x, acc)
        else:
            acc = np.where(x < acc, x, acc)
    return round_to(acc, FORMAT[dt]).astype(NUMPY_DTYPE[dt])


def random_sources(rng: np.random.Generator, dt: DType, k: int, n: int) -> np.ndarray:
    """``k`` sources of ``n`` normal values of ``dt`` (shape (k, n)): random sign, mantissa
    and exponent over most of the format's normal range (the sum of 8 cannot overflow; most
    exponents near either end of it),
    and on about a third of the elements one source the negative of an earlier one, so that
    what an fp32 partial sum absorbs depends on the order."""
    p, emin, emax = FORMAT[dt]
    lo, hi = max(emin, -40), min(emax - 4, 40)
    ends = rng.random((k, n))  # many exponents near the ends: partial sums absorb more
    e = np.where(ends < 0.4, rng.integers(lo, lo + 3, (k, n)),
                 np.where(ends < 0.8, rng.integers(hi - 2, hi + 1, (k, n)),
                          rng.integers(lo, hi + 1, (k, n))))
    v = rng.choice([-1.0, 1.0], (k, n)) * (1 + rng.random((k, n))) * np.exp2(e)
    for j in range(1, k):
        pick = rng.random(n) < 0.35 / (k - 1) * 2
        i = rng.integers(0, j, n)
        v[j, pick] = -v[i[pick], np.flatnonzero(pick)]
    return v.astype(np.float32).astype(NUMPY_DTYPE[dt])


# -- the engine's arithmetic, and wrong ones --------------------------------------------------

class _Mem:
    """Just what ``Simulator._move`` uses of a simulator: read a source, write a result."""

    def __init__(self, sources: list[np.ndarray]):
        self.sources = sources
        self.written: list[np.ndarray] = []

    def _read(self, runs, acc, vc):
        return np.ascontiguousarray(self.sources[runs]).view(np.uint8)

    def _write(self, runs, data, acc, vc):
        self.written.append(np.array(data, copy=True))


def engine_reduce(op: int, dt: DType, sources: list[np.ndarray]) -> np.ndarray:
    """One CCE reduce leg of ``sources`` executed by ``Simulator._move``."""
    code = io_code(dt)
    n = len(sources[0]) * sources[0].itemsize
    leg = Leg(rank=0, record=0, entry=0, channel=0, step=0, leaf=0, trigger=0, sdma_op=4,
              waits=[], incs=[], srcs=list(range(len(sources))), dsts=[None],
              cce=(op, code, code), sequential=False, nbytes=n)
    mem = _Mem(sources)
    engine.Simulator._move(mem, leg.srcs, leg.dsts, leg, None, None)
    (out,) = mem.written
    return out.view(NUMPY_DTYPE[dt])


def _toward_zero(exact: np.ndarray, rounded: np.ndarray) -> np.ndarray:
    """``rounded`` with every value that rounding moved away from zero moved one ulp back
    (sign-magnitude formats: one less in the raw bits), i.e. truncation."""
    back = rounded.astype(np.float64)
    over = np.isfinite(exact) & (np.abs(back) > np.abs(exact.astype(np.float64)))
    bits = rounded.view(np.dtype(f"u{rounded.itemsize}")).copy()
    bits[over] -= 1
    return bits.view(rounded.dtype)


def wrong_move(mode: str):
    """A replacement of ``Simulator._move`` with a wrong arithmetic (the exploratory tests of
    /tmp/xt-num/model_tamper.py): ``acc_in_io`` rounds every partial to the output dtype,
    ``truncate`` rounds the result toward zero, ``reverse`` reduces the sources last first."""
    def move(self, srcs, dsts, leg, acc, vc):
        datas = [self._read(runs, acc, vc) for runs in srcs]
        if leg.cce is None:
            result = datas[0]
        else:
            op, ic, oc = leg.cce
            uf = engine._UFUNC[op]
            odt = NUMPY_DTYPE[DType(oc)]
            xs = [d.view(NUMPY_DTYPE[DType(ic)]).astype(np.float32) for d in datas]
            if mode == "reverse":
                xs = xs[::-1]
            a = xs[0].copy()
            for x in xs[1:]:
                uf(a, x, out=a)
                if mode == "acc_in_io":
                    a = a.astype(odt).astype(np.float32)
            r = a.astype(odt)
            if mode == "truncate":
                r = _toward_zero(a, r)
            result = r.view(np.uint8)
        for runs in dsts:
            self._write(runs, result, acc, vc)
    return move


WRONG = ("acc_in_io", "truncate", "reverse")

# -- single reduces -----------------------------------------------------------------------------

N = 2048
CASES = [(dt, op, k) for dt in REDUCIBLE for op in OPS for k in range(2, 9)]


def _case_sources(dt: DType, op: str, k: int) -> list[np.ndarray]:
    rng = np.random.default_rng([int(dt), OPS[op], k])
    return list(random_sources(rng, dt, k, N))


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


def test_model_rounding_agrees_with_ml_dtypes_casts():
    """The model's rounding is the round-to-nearest-even of numpy / ml_dtypes casts (a
    check of the model, on values from the dtype's subnormals to past its maximum)."""
    rng = np.random.default_rng(5)
    for dt, (p, emin, emax) in FORMAT.items():
        npdt = NUMPY_DTYPE[dt]
        x = (rng.choice([-1.0, 1.0], 20000) * (1 + rng.random(20000))
             * np.exp2(rng.integers(emin - p - 2, emax + 2, 20000)))
        ties = (np.arange(1, 200, 2) * 2.0 ** (emin - p)).astype(np.float32)  # subnormal ties
        with np.errstate(over="ignore"):
            x = np.concatenate([x, ties, -ties]).astype(np.float32).astype(np.float64)
            want = x.astype(np.float32).astype(npdt)
        assert np.array_equal(_bits(round_to(x, FORMAT[dt]).astype(npdt)), _bits(want)), dt


@pytest.mark.parametrize("dt", REDUCIBLE, ids=lambda d: d.name)
def test_single_cce_reduces_match_the_model_bit_for_bit(dt):
    for _dt, op, k in (c for c in CASES if c[0] == dt):
        src = _case_sources(dt, op, k)
        got, want = engine_reduce(OPS[op], dt, src), model_reduce(OPS[op], dt, src)
        bad = np.flatnonzero(_bits(got) != _bits(want))
        assert not bad.size, (f"{dt.name} {op} {k} sources: {bad.size} byte(s) differ, "
                              f"first element {bad[0] // got.itemsize}")


def test_the_data_is_order_sensitive():
    """The random data is not exact: reducing the sources last first changes the fp32 sum
    (so the engine-vs-model comparison above sees the order), for every dtype whose values
    can be absorbed by an fp32 partial sum (fp8_e3 and fp8_e4 span fewer than 24 bits:
    any order gives the same exact sum, on hardware too)."""
    for dt in REDUCIBLE:
        src = _case_sources(dt, "ADD", 8)
        same = np.array_equal(_bits(model_reduce(ADD, dt, src)),
                              _bits(model_reduce(ADD, dt, src[::-1])))
        assert same == (dt in (DType.FP8_E3, DType.FP8_E4)), dt


#: (patch, dtype) pairs a wrong arithmetic cannot show: FP32R I/O is the accumulator's
#: format (no narrowing, nothing to truncate); fp8_e3 / fp8_e4 sums are exact in fp32.
INVISIBLE = {("acc_in_io", DType.FP32R), ("truncate", DType.FP32R),
             ("reverse", DType.FP8_E3), ("reverse", DType.FP8_E4)}


@pytest.mark.parametrize("mode", WRONG)
def test_a_wrong_arithmetic_fails_the_single_reduce_comparison(monkeypatch, mode):
    """Sensitivity: with ``Simulator._move`` replaced by a wrong arithmetic, the comparison
    of the test above fails for the ADD of every dtype the wrong arithmetic can affect."""
    monkeypatch.setattr(engine.Simulator, "_move", wrong_move(mode))
    caught = set()
    for dt, op, k in CASES:
        if op != "ADD":
            continue
        src = _case_sources(dt, op, k)
        if not np.array_equal(_bits(engine_reduce(ADD, dt, src)),
                              _bits(model_reduce(ADD, dt, src))):
            caught.add(dt)
    assert caught == {dt for dt in REDUCIBLE if (mode, dt) not in INVISIBLE}


# -- whole mesh all-reduces with injected inputs ------------------------------------------------

MESH_N = 1200
DTYPES = {"bf16": DType.BF16, "fp16": DType.FP16, "fp32r": DType.FP32R,
          "fp8_e3": DType.FP8_E3, "fp8_e4": DType.FP8_E4, "fp8_e5": DType.FP8_E5}


@pytest.fixture(scope="module", params=[3, 8], ids=lambda g: f"{g}ranks")
def mesh_out(request, tmp_path_factory):
    """A MESH all-reduce of every reducible dtype and ALU op on ``g`` ranks of one node."""
    g = request.param
    trigs = [("all_reduce", name, op.lower(), MESH_N) for name in DTYPES for op in OPS]
    out = tmp_path_factory.mktemp(f"mesh{g}") / "out"
    meshcase.lower(meshcase.spec([list(range(g))], trigs), out, algo="mesh")
    man = json.loads((out / "manifest.json").read_text())
    assert all(t["algorithm"] == "MESH" for t in man["triggers"])
    return out, man


def _group_inputs(seed: int, trigger: int, g: int, dt: DType) -> np.ndarray:
    return random_sources(np.random.default_rng([seed, trigger, 99]), dt, g, MESH_N)


def _into(vals: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """An injected ``make_input``'s values, written into ``out`` when the engine gives one
    (testdata.make_input's contract)."""
    if out is None:
        return vals
    out[...] = vals
    return out


def _inject(monkeypatch, man: dict) -> dict:
    """Random inputs for every rank (``engine.make_input``) and the model as the reference
    (``engine.Reference``): block j of a MESH all-reduce is reduced by group member j from
    its own input, then the others' in group order (compose/mesh.py, the mesh `blocks` of
    the trigger manifest), and broadcast."""
    by_kind = {(t["dtype"], t["alu_op"]): t for t in man["triggers"]}
    seen = {"inputs": 0, "refs": 0}

    def make_input(seed, trigger, pos, group_size, count, dtype, op, reduce, out=None):
        assert reduce and count == MESH_N
        seen["inputs"] += 1
        return _into(_group_inputs(seed, trigger, group_size, dtype)[pos], out)

    class ModelReference:
        def __init__(self, op_kind, alu, dtype, group, count):
            t = by_kind[(dtype.name, alu)]
            self.alu, self.dtype, self.g = OPS[alu], dtype, len(group)
            self.blocks = [tuple(b) for b in t["mesh"]["blocks"]]
            self.inputs: dict[int, np.ndarray] = {}
            seen["refs"] += 1

        @property
        def complete(self):
            return len(self.inputs) == self.g

        def add(self, pos, values, check=None):
            self.inputs.setdefault(pos, np.array(values, copy=True))

        def expected_bytes(self, pos):
            parts = []
            for j, (a, b) in enumerate(self.blocks):
                order = [j] + [k for k in range(self.g) if k != j]
                parts.append(model_reduce(self.alu, self.dtype,
                                          [self.inputs[k][a:b] for k in order]))
            return np.ascontiguousarray(np.concatenate(parts)).view(np.uint8)

    monkeypatch.setattr(engine, "make_input", make_input)
    monkeypatch.setattr(engine, "Reference", ModelReference)
    return seen


def _run(out: Path, man: dict, seed: int = 0) -> dict[tuple[str, str], str]:
    res = engine.simulate_output(out, seed=seed)
    assert res.error is None, res.error
    kind = {t["trigger"]: (t["dtype"], t["alu_op"]) for t in man["triggers"]}
    return {kind[t.trigger]: t.status for t in res.triggers}


def test_mesh_all_reduce_on_random_data_matches_the_model(monkeypatch, mesh_out):
    out, man = mesh_out
    seen = _inject(monkeypatch, man)
    for seed in (0, 1):
        got = _run(out, man, seed)
        assert set(got.values()) == {"match"}, {k: v for k, v in got.items() if v != "match"}
    g = len(man["triggers"][0]["replica_group"])
    assert seen["inputs"] == 2 * g * len(man["triggers"]) and seen["refs"] == 2 * len(got)


@pytest.mark.parametrize("mode", WRONG)
def test_a_wrong_arithmetic_fails_the_mesh_all_reduce(monkeypatch, mesh_out, mode):
    """Sensitivity end to end: under each wrong arithmetic the ADD triggers it can affect
    mismatch (with 3 sources, reversing swaps the first and the last)."""
    out, man = mesh_out
    _inject(monkeypatch, man)
    monkeypatch.setattr(engine.Simulator, "_move", wrong_move(mode))
    got = _run(out, man)
    bad = {k for k, v in got.items() if v != "match"}
    assert all(got[k] == "mismatch" for k in bad)
    want = {(dt.name, "ADD") for dt in REDUCIBLE if (mode, dt) not in INVISIBLE}
    assert bad == want


def test_the_simulators_exact_data_does_not_see_a_wrong_arithmetic(mesh_out, monkeypatch):
    """Why the tests above exist: with its own exact data (SIMULATOR.md §4) the simulator
    matches under every wrong arithmetic."""
    out, man = mesh_out
    for mode in WRONG:
        monkeypatch.setattr(engine.Simulator, "_move", wrong_move(mode))
        assert set(_run(out, man).values()) == {"match"}, mode


# -- special values: the simulator's modelling choices (SIMULATOR.md §4) ------------------------

def _vals(dt: DType, *xs: float) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.array(xs, np.float32).astype(NUMPY_DTYPE[dt])


def _f64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's overflow / invalid warnings
@pytest.mark.parametrize("dt", REDUCIBLE, ids=lambda d: d.name)
def test_special_values(dt):
    """Pinned so that a change is seen; none of it is a documented hardware fact."""
    fi = np.finfo(np.float32) if dt == DType.FP32R else ml_dtypes.finfo(NUMPY_DTYPE[dt])
    big, tiny = float(fi.max), float(fi.smallest_subnormal)
    nan, inf = np.nan, np.inf
    # NaN propagates through MAX and MIN from any source (numpy maximum / minimum)
    for op in (MAX, MIN):
        for a, b, c in ((nan, 1, -1), (1, nan, -1), (1, -1, nan)):
            assert np.isnan(_f64(engine_reduce(op, dt, [_vals(dt, a), _vals(dt, b),
                                                        _vals(dt, c)]))).all()
    # and through ADD, as does inf + -inf
    assert np.isnan(_f64(engine_reduce(ADD, dt, [_vals(dt, 1), _vals(dt, nan)]))).all()
    assert np.isnan(_f64(engine_reduce(ADD, dt, [_vals(dt, inf), _vals(dt, -inf)]))).all()
    got = _f64(engine_reduce(ADD, dt, [_vals(dt, inf, -inf), _vals(dt, 1, big)]))
    assert list(got) == [inf, -inf]
    # +0 / -0 ties of MAX and MIN: the later source's zero; ADD: IEEE (-0 only from -0 + -0)
    for op in (MAX, MIN):
        got = engine_reduce(op, dt, [_vals(dt, 0.0, -0.0, -0.0), _vals(dt, -0.0, 0.0, -0.0)])
        assert list(np.signbit(_f64(got))) == [True, False, True]
    got = engine_reduce(ADD, dt, [_vals(dt, 0.0, -0.0, -0.0), _vals(dt, -0.0, 0.0, -0.0)])
    assert list(np.signbit(_f64(got))) == [False, False, True]
    # overflow gives infinity (no saturation), also for fp8_e4 (e4m3 with infinities, not
    # e4m3fn): the rounding to the output dtype overflows, or for bf16 and fp32r (fp32's
    # exponent range) already the fp32 accumulator
    got = _f64(engine_reduce(ADD, dt, [_vals(dt, big, -big), _vals(dt, big, -big)]))
    assert list(got) == [inf, -inf]
    # subnormal inputs and results are kept (no flush to zero)
    got = _f64(engine_reduce(ADD, dt, [_vals(dt, tiny, tiny), _vals(dt, tiny, -tiny)]))
    assert list(got) == [2 * tiny, 0.0] and tiny > 0
    got = _f64(engine_reduce(MIN, dt, [_vals(dt, tiny), _vals(dt, 1.0)]))
    assert list(got) == [tiny]
    # the model agrees with the engine wherever it is defined (no NaN, no zero ties)
    src = [_vals(dt, big, tiny, -big, 1.0), _vals(dt, big / 2, tiny, big, -tiny),
           _vals(dt, -big, -3 * tiny, inf, tiny)]
    assert np.array_equal(_bits(engine_reduce(ADD, dt, src)), _bits(model_reduce(ADD, dt, src)))


def test_a_zero_tie_is_the_later_sources_by_the_engines_rule(monkeypatch):
    """MAX / MIN of +0 and -0 give the later source's zero even where the machine's
    maximum / minimum would give the earlier one (numpy leaves the tie open; SIMULATOR.md
    §4)."""
    def first_on_tie(pick):
        def ufunc(a, b, out):
            np.copyto(out, np.where(pick(b, a), b, a))  # the earlier operand on a tie
            return out
        return ufunc
    monkeypatch.setitem(engine._UFUNC, MAX, first_on_tie(np.greater))
    monkeypatch.setitem(engine._UFUNC, MIN, first_on_tie(np.less))
    for dt in (DType.BF16, DType.FP32R, DType.FP8_E4):
        for op in (MAX, MIN):
            got = engine_reduce(op, dt, [_vals(dt, 0.0, -0.0, -0.0, 0.0),
                                         _vals(dt, -0.0, 0.0, -0.0, 0.0)])
            assert list(np.signbit(_f64(got))) == [True, False, True, False]
            # not a tie: the larger (smaller) value, whichever source holds it
            got = _f64(engine_reduce(op, dt, [_vals(dt, 1.0, -2.0), _vals(dt, -2.0, 1.0)]))
            assert list(got) == ([1.0, 1.0] if op == MAX else [-2.0, -2.0])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's overflow warning
@pytest.mark.parametrize("dt,largest,under,over", [
    # fp8_e4 (e4m3 with infinities): largest 240 = 1.875 x 2^7, ulp there 16, so up to
    # 240 + 8 (exclusive, ties to even: 248 is the tie, 240's mantissa 111 is odd) rounds to 240
    (DType.FP8_E4, 240.0, (224.0, 20.0), (224.0, 32.0)),
    # fp8_e5 (e5m2): largest 57344 = 1.75 x 2^15, ulp there 2^13 = 8192, half 4096 (61440
    # is the tie, 57344's mantissa 11 odd: Inf); 49152 + 10240 = 59392 rounds to 57344
    (DType.FP8_E5, 57344.0, (49152.0, 10240.0), (49152.0, 16384.0)),
    # fp16: largest 65504 = (2 - 2^-10) x 2^15, ulp 32, half 16 (65520 is a tie to 65536: Inf)
    (DType.FP16, 65504.0, (65504.0, 8.0), (65504.0, 16.0)),
])
def test_a_result_rounds_to_the_largest_value_before_it_overflows(dt, largest, under, over):
    """SIMULATOR.md §4: round to nearest even, then beyond the largest value is Inf."""
    got = _f64(engine_reduce(ADD, dt, [_vals(dt, under[0], -under[0]),
                                       _vals(dt, under[1], -under[1])]))
    assert list(got) == [largest, -largest]
    got = _f64(engine_reduce(ADD, dt, [_vals(dt, over[0], -over[0]),
                                       _vals(dt, over[1], -over[1])]))
    assert list(got) == [np.inf, -np.inf]


# -- cross-rank consistency --------------------------------------------------------------------

def _outputs_on_random_data(monkeypatch, out: Path) -> dict[int, dict[int, bytes]]:
    """Every rank's output of every trigger of ``out`` with random inputs (trigger ->
    rank -> bytes); the simulator's own verdicts are not used."""
    def make_input(seed, trigger, pos, group_size, count, dtype, op, reduce, out=None):
        return _into(random_sources(np.random.default_rng([seed, trigger, 99]), dtype,
                                    group_size, count)[pos], out)

    got: dict[int, dict[int, bytes]] = {}

    def verify(self, t, r, data, unwritten, _writers):
        assert not unwritten
        got.setdefault(t.ordinal, {})[r] = np.ascontiguousarray(data).tobytes()

    monkeypatch.setattr(engine, "make_input", make_input)
    monkeypatch.setattr(engine.Simulator, "_verify", verify)
    res = engine.simulate_output(out)
    assert res.error is None, res.error
    return got


def test_mesh_all_reduce_gives_every_rank_the_same_bits(monkeypatch, mesh_out):
    """One reduce per block, then a copy: every rank holds the same bits (a control for the
    test below)."""
    out, man = mesh_out
    got = _outputs_on_random_data(monkeypatch, out)
    assert got and all(len(set(by_rank.values())) == 1 for by_rank in got.values())


#: (algo, replica group, topology, lnc, what the manifest must record: algorithm, legs)
EVERY_RANK_CASES = [
    ("ring", 4, None, 1, "RING", ["RING"]),
    ("ring", 8, None, 1, "RING", ["RING"]),
    ("single_cycle_ring", 5, None, 1, "SINGLE_CYCLE_RING", ["SINGLE_CYCLE_RING"]),
    ("kangaring", 16, None, 1, "KANGARING", ["KANGARING"]),
    ("rdh", 6, None, 1, "INTRA_RDH", ["INTRA_RDH"]),  # 6 ranks: two folded
    ("inter_rdh", [128 * i for i in range(8)], "trn2:nodes=8", 1, "INTER_RDH", ["INTER_RDH"]),
    ("hier", [0, 1, 2, 3, 128, 129, 130, 131], "trn2:nodes=2", 1, "HIER",
     ["RING", "SINGLE_CYCLE_RING", "RING"]),
    ("hier", [0, 1, 64, 65, 128, 129], "trn2:nodes=3", 2, "HIER",
     ["RING", "SINGLE_CYCLE_RING", "RING"]),
]


@pytest.mark.parametrize("algo,ranks,topology,lnc,algorithm,legs", EVERY_RANK_CASES,
                         ids=lambda v: str(v) if isinstance(v, (str, int)) else None)
def test_an_all_reduce_gives_every_rank_the_same_bits(monkeypatch, tmp_path, algo, ranks,
                                                      topology, lnc, algorithm, legs):
    """SIMULATOR.md §8 / DESIGN "Single-cycle ring": every engine but the meshes reduces each
    element once and copies the result, so on inexact data (random bf16 and fp32r, where the
    order of a sum changes its bits) every rank still holds the same bits."""
    from test_simulate import coll_spec, lower_spec
    for dtype in ("bf16", "fp32r"):
        out = tmp_path / dtype / "out"
        out.parent.mkdir()
        lower_spec(coll_spec("all_reduce", dtype, ranks, 1024, lnc=lnc), out, algo=algo,
                   topology=topology)
        (t,) = json.loads((out / "manifest.json").read_text())["triggers"]
        assert (t["algorithm"], [leg["algorithm"] for leg in t["legs"]]) == (algorithm, legs)
        got = _outputs_on_random_data(monkeypatch, out)
        group = range(ranks) if isinstance(ranks, int) else ranks
        assert set(got[0]) == set(group)
        assert len(set(got[0].values())) == 1, f"{algo} {dtype}: the ranks' results differ"


def test_single_step_mesh_all_reduce_gives_every_rank_the_same_bits(monkeypatch, tmp_path):
    """Every rank reduces the whole input itself: it adds the inputs in group order (its own
    at its place among the others), so all ranks get the same bits on inexact data."""
    trigs = [("all_reduce", name, "add", MESH_N) for name in ("bf16", "fp32r")]
    out = tmp_path / "out"
    meshcase.lower(meshcase.spec([[0, 1, 2, 3]], trigs), out, algo="single_step_mesh")
    got = _outputs_on_random_data(monkeypatch, out)
    assert len(got) == 2
    for by_rank in got.values():
        assert len(set(by_rank.values())) == 1, "the ranks' results differ"
    # ... and those bits are the model's sum of the four inputs in group order (FORMATS §6;
    # more than 8 sources would chain, 4 do not)
    for t, dt in enumerate((DType.BF16, DType.FP32R)):
        src = random_sources(np.random.default_rng([0, t, 99]), dt, 4, MESH_N)
        want = model_reduce(ADD, dt, list(src))
        assert got[t][0] == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize("dt,big", [
    # fp16's largest is 65504 = (2 - 2^-10) x 2^15: 65504 + 65504 = 131008 is past it (an
    # overflow of the rounding to fp16); bf16's largest is (2 - 2^-7) x 2^127, and twice it
    # is past fp32's (2 - 2^-23) x 2^127 (an overflow of the fp32 accumulator)
    (DType.FP16, 65504.0), (DType.BF16, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
])
def test_an_overflowing_or_nan_sum_prints_no_numpy_warning(dt, big):
    """A tampered output's sums may overflow or meet inf + -inf (SIMULATOR.md §4: infinity
    and NaN are the engine's outcomes): ``_move`` gives them without numpy's RuntimeWarning,
    whose line names numpy's install path on stderr beside simulate's own lines."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would raise here
        got = _f64(engine_reduce(ADD, dt, [_vals(dt, big, np.inf),
                                           _vals(dt, big, -np.inf)]))
    assert got[0] == np.inf and np.isnan(got[1])


@pytest.mark.parametrize("dt,big", [
    # fp16: 65504 + 65504 = 131008, past fp16's largest 65504 = (2 - 2^-10) x 2^15, rounds to
    # inf (the cast to fp16 overflows); bf16: twice (2 - 2^-7) x 2^127 is past fp32's largest
    # (2 - 2^-23) x 2^127 (the float64 sum's cast to float32 overflows)
    (DType.FP16, 65504.0), (DType.BF16, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
])
def test_the_references_overflowing_or_nan_sum_prints_no_numpy_warning(dt, big):
    """``testdata.Reference`` (the expected outputs) sums under the same ``np.errstate`` as
    the engine's reduce: an out-of-range sum or inf + -inf gives IEEE's inf and NaN, without
    numpy's RuntimeWarning on stderr (RELIABILITY's fifty-eighth "Left")."""
    import warnings
    from nrtrewrite.simulate.testdata import Reference
    ref = Reference("ALLREDUCE", "ADD", dt, [0, 1], 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would raise here
        ref.add(0, _vals(dt, big, np.inf, 1.0, -big))
        ref.add(1, _vals(dt, big, -np.inf, 2.0, -big))
        got = _f64(ref.expected_bytes(0).view(NUMPY_DTYPE[dt]))
    # big + big overflows to +inf, inf + -inf is NaN, 1 + 2 = 3 exactly, -big - big is -inf
    assert got[0] == np.inf and np.isnan(got[1]) and got[2] == 3.0 and got[3] == -np.inf
