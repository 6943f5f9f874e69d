"""``python -m nrtrewrite.golden``, as ``make golden`` runs it: it reproduces the committed
golden archives of the small fixtures byte for byte, and it runs under ``python -OO``
(``PYTHONOPTIMIZE=2``: no docstrings), as the CLI's help does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
#: the fixtures whose golden keeps every rank (Makefile's GOLDEN_FIXTURES without
#: GOLDEN_RANKS_<name>: node64 and two_node128 keep a few ranks of large outputs)
SMALL = ["ar2", "c7c8", "groups", "int32_allgather", "mix8", "sbuf"]


def run(module: str, args: list, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_makefile_lists_the_small_fixtures_without_ranks():
    make = (ROOT / "Makefile").read_text()
    listed = next(line for line in make.splitlines() if line.startswith("GOLDEN_FIXTURES"))
    names = listed.split(":=")[1].split()
    assert set(SMALL) <= set(names)
    assert not any(f"GOLDEN_RANKS_{n} " in make for n in SMALL)


@pytest.mark.parametrize("name", SMALL)
def test_golden_reproduces_the_committed_archive(tmp_path, name):
    proc = run("nrtrewrite.golden", [FIX / f"{name}.neff", tmp_path / "g.tar.gz"], ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{tmp_path / 'g.tar.gz'}: written\n"
    assert (tmp_path / "g.tar.gz").read_bytes() == (FIX / "golden" / f"{name}.tar.gz").read_bytes()


def test_golden_and_the_help_run_without_docstrings(tmp_path):
    """Bug (review 47c): under ``PYTHONOPTIMIZE=2`` ``python -m nrtrewrite.golden`` failed
    with a traceback (``__doc__.splitlines()`` of None), as did the benchmark and fuzz
    scripts."""
    proc = run("nrtrewrite.golden", [FIX / "ar2.neff", tmp_path / "g.tar.gz"], ROOT,
               PYTHONOPTIMIZE="2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{tmp_path / 'g.tar.gz'}: written\n" and proc.stderr == ""
    assert (tmp_path / "g.tar.gz").read_bytes() == (FIX / "golden" / "ar2.tar.gz").read_bytes()
    proc = run("nrtrewrite.golden", ["--help"], ROOT, PYTHONOPTIMIZE="2")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: "), proc.stderr
    proc = run("nrtrewrite", ["--help"], ROOT, PYTHONOPTIMIZE="2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: nrtrewrite [OPTIONS] COMMAND [ARGS]...")
    commands = proc.stdout.split("Commands:\n")[1].split()
    assert {"lower", "inspect", "simulate", "explain"} <= set(commands)
    proc = run("nrtrewrite", ["lower", "--help"], ROOT, PYTHONOPTIMIZE="2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: nrtrewrite lower [OPTIONS] MODEL")
    assert "--topology" in proc.stdout
    for script in ("benchmarks/bench_read.py", "benchmarks/report.py",
                   "benchmarks/leg_cost.py", "fuzz/soak_models.py"):
        proc = subprocess.run([sys.executable, str(ROOT / script),
                               "--help"], cwd=ROOT, capture_output=True, text=True,
                              env=dict(os.environ, PYTHONOPTIMIZE="2",
                                       PYTHONPATH=str(ROOT)), timeout=120)
        assert proc.returncode == 0 and proc.stdout.startswith("usage: "), (script, proc.stderr)
