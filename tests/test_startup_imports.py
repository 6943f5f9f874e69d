"""The commands that do not compute numbers start without ml_dtypes, whose import takes
0.6 - 0.75 s of CPU at ml_dtypes 0.7 (more than `lower` of a small model takes without it):
`codes.NUMPY_DTYPE` is built on first use, by `simulate`'s numbers (the simulator's modules
read it there, so `--help`, which imports every command's module to list them, does not
import it either).  `lower` imports only the composer of the engines its triggers use
(`compose.algorithm.MODULES`)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

PROBE = """
import sys
from nrtrewrite.cli import main
try:
    main(sys.argv[1:], prog_name="nrtrewrite")
except SystemExit as stop:
    assert not stop.code, stop.code
print(sorted(sys.modules))
"""


def imported(*args: str) -> set[str]:
    """The modules imported once the command ``args`` has run (in a fresh process)."""
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                          text=True, check=True)
    return set(ast.literal_eval(done.stdout.strip().splitlines()[-1]))


def imports_ml_dtypes(*args: str) -> bool:
    return "ml_dtypes" in imported(*args)


@pytest.mark.parametrize("command", ["lower", "inspect", "explain", "schedule", "dump", "diff"])
def test_a_command_without_numbers_does_not_import_ml_dtypes(command, tmp_path):
    model = str(FIXTURES / "ar2.neff")
    out = tmp_path / "out"
    if command in ("dump", "diff"):
        subprocess.run([sys.executable, "-m", "nrtrewrite", "lower", model, "-o", str(out),
                        "-q"], check=True)
    args = {"lower": ["lower", model, "-o", str(out), "-q"],
            "inspect": ["inspect", model],
            "explain": ["explain", model],
            "schedule": ["schedule", model, "--rank", "0"],
            "dump": ["dump", str(out), "--spad", "--rank", "0"],
            "diff": ["diff", str(out), str(out)]}[command]
    assert not imports_ml_dtypes(*args)


def test_simulate_imports_it_and_the_table_is_the_same_object_each_time(tmp_path):
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "nrtrewrite", "lower", str(FIXTURES / "ar2.neff"),
                    "-o", str(out), "-q"], check=True)
    assert imports_ml_dtypes("simulate", str(out))
    from nrtrewrite import codes
    from nrtrewrite.codes import NUMPY_DTYPE, DType
    assert codes.NUMPY_DTYPE is NUMPY_DTYPE
    # bf16 and the fp8 formats are ml_dtypes' 2- and 1-byte types (DTYPE_SIZE's sizes)
    assert NUMPY_DTYPE[DType.BF16].itemsize == 2 and NUMPY_DTYPE[DType.BF16].name == "bfloat16"
    assert [NUMPY_DTYPE[d].name for d in (DType.FP8_E3, DType.FP8_E4, DType.FP8_E5)] == \
        ["float8_e3m4", "float8_e4m3", "float8_e5m2"]
    with pytest.raises(AttributeError):
        codes.NO_SUCH_TABLE


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["simulate", "--help"]])
def test_help_and_version_do_not_import_ml_dtypes(args):
    # --help imports every command's module (its one-line help); until 2026-12-06 the
    # simulator's modules read NUMPY_DTYPE at their import, and --help took 0.9 s of CPU
    assert not imports_ml_dtypes(*args)


COMPOSERS = {"nrtrewrite.compose." + m for m in
             ("ring", "mesh", "rdh", "kangaring", "single_cycle", "hier")}


@pytest.mark.parametrize("model, algo, wanted", [
    ("ar2", "ring", {"ring"}), ("ar2", "mesh", {"mesh"}),
    ("ar2", "single_cycle", {"single_cycle"}), ("node64", "kangaring", {"kangaring", "ring"})])
def test_lower_imports_the_composer_of_its_engine_only(model, algo, wanted, tmp_path):
    # ar2: an all-reduce over 2 ranks of one device; node64: 64 ranks, whole devices, which
    # KangaRing needs (it composes with ring.py's step templates, so it imports ring as well)
    mods = imported("lower", str(FIXTURES / f"{model}.neff"), "-o", str(tmp_path / "out"),
                    "-q", "--algo", algo)
    assert mods & COMPOSERS == {"nrtrewrite.compose." + m for m in wanted}


def test_hier_imports_the_composers_of_its_legs(tmp_path):
    mods = imported("lower", str(FIXTURES / "two_node128.neff"), "-o", str(tmp_path / "out"),
                    "-q", "--algo", "hier")
    assert {"nrtrewrite.compose." + m for m in ("hier", "kangaring", "single_cycle", "ring")} \
        <= mods


def test_every_lowerable_engine_is_registered_by_the_module_named_for_it():
    from nrtrewrite.compose import algorithm
    assert algorithm.lowerable() == frozenset(algorithm.MODULES)
    for alg, module in algorithm.MODULES.items():
        assert type(algorithm.get(alg)).__module__ == "nrtrewrite.compose." + module
    with pytest.raises(KeyError):
        algorithm.get(algorithm.EncAlgType.LATENCY_OPT_MESH)  # no composer in this build
