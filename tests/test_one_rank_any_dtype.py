"""A group of one rank reduces nothing: its all-reduce or reduce-scatter copies IN to OUT
(``enc_1rank_primitive``, docs/DESIGN.md), so ``lower`` takes it in a dtype the CCE cannot
reduce (FP32, INT32), where it refuses the same collective over two ranks (seed 000 §3.4;
docs/SELECTION.md §8, docs/CLI.md "explain").  ``simulate`` checks the copy bit for bit: the
output must be the input's bytes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.codes import DType

REFUSAL = ("{op} in {dtype} cannot be lowered: the CCE reduce accepts only BF16, FP16, FP32R "
           "and FP8_E3/E4/E5 (seed 000 §3.4)")


def run(*args):
    return CliRunner().invoke(main, list(args), env={}, catch_exceptions=False,
                              terminal_width=200)


def model(tmp_path, dtype, op, group, alu="add"):
    assembler = pytest.importorskip("nrtrewrite.neff.assembler")
    spec = {"header": {"name": f"one_{dtype}_{op}", "lnc_size": 2},
            "subgraphs": [{"vars": [{"name": "i", "type": "input", "size": 4096},
                                    {"name": "o", "type": "output", "size": 4096}],
                           "replica_groups": [group],
                           "engines": {"sp": [{op: {"dtype": dtype, "op": alu, "src": "i",
                                                    "dst": "o", "bytes": 4096}}]}}]}
    path = tmp_path / f"one_{dtype}_{op}_{len(group)}.neff"
    path.write_bytes(assembler.assemble_spec(spec))
    return str(path)


@pytest.mark.parametrize("op", ["allreduce", "reduce_scatter"])
@pytest.mark.parametrize("dtype", ["fp32", "int32"])
def test_explain_lowers_a_one_rank_reduction_in_any_dtype(op, dtype):
    res = run("explain", "--op", op, "--bytes", "4", "--dtype", dtype, "--ranks", "1", "--json")
    assert res.exit_code == 0, res.output + res.stderr
    rec = json.loads(res.output)["triggers"][0]
    assert rec["lowered"]["algorithm"] == "RING"  # the one legal engine over one rank (§3)
    assert rec["lowered"]["fallback_reason"] is None
    # over two ranks it is still refused, in lower's words
    res = run("explain", "--op", op, "--bytes", "8", "--dtype", dtype, "--ranks", "2", "--json")
    rec = json.loads(res.output)["triggers"][0]
    assert rec["lowered"]["algorithm"] == "INVALID"
    name = {"allreduce": "ALLREDUCE", "reduce_scatter": "REDUCE_SCATTER"}[op]
    assert rec["lowered"]["fallback_reason"] == REFUSAL.format(op=name, dtype=dtype.upper())


@pytest.mark.parametrize("op, algo", [("all_reduce", None), ("all_reduce", "single_cycle_ring"),
                                      ("reduce_scatter", None)])
@pytest.mark.parametrize("dtype", ["fp32", "int32"])
def test_a_one_rank_reduction_in_fp32_or_int32_simulates_bit_for_bit(
        tmp_path, dtype, op, algo):
    path = model(tmp_path, dtype, op, [0])
    res = run("simulate", path, "--json", *(["--algo", algo] if algo else []))
    assert res.exit_code == 0, res.output + res.stderr
    doc = json.loads(res.output)
    assert doc["ok"] and [(t["status"], t["ranks_checked"]) for t in doc["triggers"]] == [
        ("match", 1)]


def test_a_two_rank_reduction_in_fp32_is_still_refused_by_lower(tmp_path):
    path = model(tmp_path, "fp32", "all_reduce", [0, 1])
    res = run("lower", path, "-o", str(tmp_path / "o"), "--quiet")
    assert res.exit_code == 2
    assert res.stderr.strip().endswith(REFUSAL.format(op="ALLREDUCE", dtype="FP32"))
    assert not (tmp_path / "o").exists()


def test_the_copy_reference_is_the_input_bytes():
    """simulate/testdata.py: a one-rank INT32 all-reduce's input is random bytes (no exact
    integers to draw: not the reduction's test data) and its expected output those bytes."""
    from nrtrewrite.simulate.testdata import Reference, make_input
    got = make_input(7, 0, 0, 1, 1024, DType.INT32, "ADD", True)
    assert got.dtype == np.int32 and len(np.unique(got)) > 1000  # random 32-bit words
    ref = Reference("ALLREDUCE", "ADD", DType.INT32, [5], 1024)
    ref.add(0, got)
    assert ref.expected_bytes(0).tobytes() == got.tobytes()
