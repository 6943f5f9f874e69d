"""benchmarks/leg_cost.py: the emitter's time on a rank's legs as composed and with every
element range cut short, and against the batch's leg count; a rank without entries is one
line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from nrtrewrite.lower import LowerOptions, plan_lowering, rank_entries
from nrtrewrite.neff.reader import read_model

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "leg_cost.py"
MODEL = ROOT / "fixtures" / "mix8.neff"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def _num(s: str) -> int:
    return int(s.replace(",", ""))


def test_leg_cost_counts_the_rank_s_legs():
    entries = rank_entries(plan_lowering(read_model(MODEL), LowerOptions()), 3)
    legs = sum(spec.ir.size for _tp, spec in entries)
    res = run(str(MODEL), "--rank", "3", "--reps", "1")
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0].startswith(f"mix8.neff rank 3: {len(entries)} entries (")
    rows = {}
    for line in out[1:3]:
        m = re.match(r"\s+emit, (as composed|32 elements)\s*:\s+[\d.]+ ms\s+([\d,]+) IR legs"
                     r"\s+([\d,]+) records\s+[\d,]+ page faults$", line)
        assert m, line
        rows[m.group(1)] = (_num(m.group(2)), _num(m.group(3)))
    assert rows["as composed"][0] == rows["32 elements"][0] == legs
    # a leg of at most 32 elements is one tile: never more records than as composed
    assert rows["32 elements"][1] <= rows["as composed"][1]
    batch = [_num(m.group(2)) for m in (re.match(r"\s+(\d+) entries\s+([\d,]+) legs", line)
                                        for line in out) if m]
    assert batch[-2:] == [2 * legs, 4 * legs] and batch[-3] == legs
    assert out[-1].startswith("  fit: ")


def test_a_rank_without_entries_is_one_line():
    res = run(str(MODEL), "--rank", "99", "--reps", "1")
    assert res.returncode != 0 and res.stdout == ""
    assert "rank 99 has no SPAD entry" in res.stderr and res.stderr.count("\n") == 1
