"""benchmarks/compiled_records.py: an experiment that needs numba, which nrtrewrite does not
depend on; without it, one line naming the interpreter and how to install it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "compiled_records.py"


@pytest.mark.skipif(importlib.util.find_spec("numba") is not None, reason="numba is installed")
def test_without_numba_it_says_so_in_one_line():
    res = subprocess.run([sys.executable, str(TOOL), str(ROOT / "fixtures" / "ar2.neff")],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == (f"compiled_records.py: error: numba is not installed in this "
                          f"interpreter ({sys.executable}); .venv/bin/pip install numba\n")
