"""benchmarks/profile_rank.py (``make profile``): profiles one rank's lowering of a model with
the standard library's profiler (pyinstrument when installed, line_profiler on request), and
names a missing model in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "profile_rank.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_lower_profile_names_the_stages_and_the_lowering():
    res = run(str(ROOT / "fixtures" / "mix8.neff"), "--rank", "3", "--tool", "cprofile",
              "--top", "10")
    assert res.returncode == 0, res.stderr
    head = res.stdout.splitlines()
    assert head[0] == "mix8.neff rank 3, lower, cprofile:"
    for stage in ("read", "plan (select, prepare)", "lower_rank", "compose", "emit",
                  "serialize", "records"):
        assert any(line.strip().startswith(stage + ":") for line in head[1:9]), stage
    assert "by tottime" in res.stdout and "by cumulative" in res.stdout
    # the profiled call: first by cumulative time whatever the machine's speed (the emitter's
    # own functions rank by their time, which varies: emit_entries fell out of a top 10)
    assert "(lower_rank)" in res.stdout.split("by cumulative")[1]


def test_plan_profile_and_warm_run():
    res = run(str(ROOT / "fixtures" / "groups.neff"), "--what", "plan", "--tool", "cprofile",
              "--warm")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("groups.neff, plan, cprofile (warm):")
    assert "plan_lowering" in res.stdout


def test_line_profile_of_the_emitter():
    pytest.importorskip("line_profiler")
    res = run(str(ROOT / "fixtures" / "ar2.neff"), "--tool", "lines")
    assert res.returncode == 0, res.stderr
    assert "Function: emit_entries" in res.stdout


@pytest.mark.parametrize("model, says", [("missing.neff", "missing.neff: no such file"),
                                         ("no_such_model", "no such model")])
def test_a_missing_model_is_one_line(model, says):
    res = run(model)
    assert res.returncode != 0 and res.stdout == ""
    assert says in res.stderr and res.stderr.count("\n") == 1
    assert "Traceback" not in res.stderr
