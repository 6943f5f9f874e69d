"""benchmarks/bench_simulate.py: sizes it cannot build and an algorithm ``lower`` refuses are
one line, status 2 (they were tracebacks); the lowered folder is removed either way.  The
model is built into a folder of the test's (models.OUT pointed there), not benchmarks/out/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

#: bench_simulate's main with its models (and the lowered folder) under argv[2]
DRIVER = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import models
models.OUT = Path(sys.argv[2])
import bench_simulate
sys.argv = ["bench_simulate.py", *sys.argv[3:]]
bench_simulate.main()
"""


def run(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", DRIVER, str(BENCH), str(out), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("args, says", [
    (["--ranks", "0"], "--ranks must be at least 1"),
    (["--mib", "0"], "--mib must be at least 1"),
    (["--mib", "-1"], "--mib must be at least 1"),
    (["--seed", "-1"], "--seed must be 0 to 4294967295"),
])
def test_values_it_cannot_use_are_refused(tmp_path, args, says):
    res = run(tmp_path / "out", *args)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == f"bench_simulate.py: error: {says}"
    assert not (tmp_path / "out").exists()


def test_an_algorithm_lower_refuses_is_lowers_one_line(tmp_path):
    out = tmp_path / "out"
    res = run(out, "--ranks", "2", "--mib", "1", "--algo", "bogus")
    assert res.returncode == 2 and res.stdout == ""
    neff = out / "sim2x1.neff"
    assert res.stderr.startswith(f"nrtrewrite: error: {neff}: field --algo: --algo 'bogus': "
                                 "unknown algorithm 'bogus' (known: ")
    assert res.stderr.count("\n") == 1
    assert sorted(os.listdir(out)) == ["sim2x1.neff"]  # the model (kept), no lowered folder
