"""benchmarks/bench_diff.py: the outputs it compares are what its docstring says, and it
prints a row per comparison (sizes and counts, not speed: no timed tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "bench_diff.py"


def test_the_tool_prints_a_row_per_comparison(tmp_path):
    out = tmp_path / "diff"
    res = subprocess.run([sys.executable, str(TOOL), "--only", "2x1,2x1:missing", "--out",
                          str(out), "--keep"], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == ["2x1", "2x1:missing"]
    # the header's hash, and the last instruction of each 1 MiB member (data_size too when
    # the sizes differ); missing: w0.bin is A's only
    assert rows[0][-2:] == ["3", "difference(s)"], rows
    diff = subprocess.run([sys.executable, "-m", "nrtrewrite", "diff", str(out / "2x1" / "A"),
                           str(out / "2x1" / "missing")], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert diff.returncode == 1
    assert "2x1.neff:w0.bin member: True != False" in diff.stdout
    assert "2x1.neff:w1.bin[16383] semaphore_value" in diff.stdout
