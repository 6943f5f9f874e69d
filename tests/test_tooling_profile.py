"""benchmarks/profile_rank.py (``make profile``) and leg_cost.py: a model the reader or the
lowering refuses, an unknown ``--algo`` and ``--functions`` that name no function are one
line, status 2, as ``lower`` says them (they were tracebacks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
FIX = ROOT / "fixtures"


def run(tool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / tool), *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def lower_error(out: Path, *args: str) -> str:
    """``nrtrewrite lower``'s line for the same input, after its ``nrtrewrite: error: ``."""
    res = subprocess.run([sys.executable, "-m", "nrtrewrite", "lower", *args, "-o", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    return res.stderr.removeprefix("nrtrewrite: error: ")


@pytest.mark.parametrize("tool", ["profile_rank.py", "leg_cost.py"])
@pytest.mark.parametrize("args", [
    ["fixtures/mix8.neff", "--algo", "bogus"],
    ["fixtures/mix8.yaml"],                    # (make profile MODEL=fixtures/mix8.yaml)
    ["fixtures/bad/fp32_allreduce.neff"],       # a trigger lowering refuses
])
def test_a_refused_model_or_algo_is_lowers_line(tmp_path, tool, args):
    res = run(tool, *args, *(["--tool", "cprofile"] if tool == "profile_rank.py" else
                             ["--reps", "1"]))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == f"{tool}: error: " + lower_error(tmp_path / "out", *args)


def test_a_truncated_model_is_one_line(tmp_path):
    cut = tmp_path / "cut.neff"
    cut.write_bytes((FIX / "mix8.neff").read_bytes()[:1500])
    res = run("profile_rank.py", str(cut), "--tool", "cprofile")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == "profile_rank.py: error: " + lower_error(tmp_path / "out", str(cut))


@pytest.mark.parametrize("functions, says", [
    ("nosuch:fn", "--functions 'nosuch:fn': No module named 'nosuch'"),
    ("nrtrewrite.emit.legs:nosuch", "--functions 'nrtrewrite.emit.legs:nosuch': "
                                    "nrtrewrite.emit.legs has no 'nosuch'"),
    ("emit_entries", "--functions 'emit_entries': not module:function"),
    ("nrtrewrite.emit.legs:SHORT_NAME_NOT_THERE.x", "--functions "
     "'nrtrewrite.emit.legs:SHORT_NAME_NOT_THERE.x': nrtrewrite.emit.legs has no "
     "'SHORT_NAME_NOT_THERE.x'"),
])
def test_functions_that_name_no_function_are_one_line(functions, says):
    """Checked before line_profiler is looked for, and before the model is read."""
    res = run("profile_rank.py", "fixtures/mix8.neff", "--tool", "lines", "--functions",
              functions)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == f"profile_rank.py: error: {says}\n"


def test_a_rank_outside_the_world_is_status_2():
    res = run("profile_rank.py", "fixtures/mix8.neff", "--rank", "99", "--tool", "cprofile")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == "profile_rank.py: error: rank 99 is not in mix8.neff's world " \
                         "(ranks 0..7)\n"
