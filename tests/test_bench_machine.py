"""benchmarks/run.py's machine line: what the run found the machine doing, printed first so
that runs on different days can be compared (docs/PERFORMANCE.md "The machine")."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "run.py"


def test_machine_worker_reports_every_figure():
    proc = subprocess.run([sys.executable, str(TOOL), "--worker", "machine"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout)
    assert set(m) == {"python_loop_ns", "numpy_call_us", "copy_warm_bytes_per_s",
                      "sha256_bytes_per_s", "others_busy", "steal", "loadavg"}
    # bounds any machine that can run the suite meets by orders of magnitude either way
    assert 1 < m["python_loop_ns"] < 100_000
    assert 0.01 < m["numpy_call_us"] < 10_000
    assert 1e7 < m["copy_warm_bytes_per_s"] < 1e13
    assert 1e6 < m["sha256_bytes_per_s"] < 1e12
    assert len(m["loadavg"]) == 3 and min(m["loadavg"]) >= 0
    if Path("/proc/stat").exists():  # shares of all cores over the sampled second
        assert 0 <= m["steal"] <= m["others_busy"] <= 1


def test_machine_line_names_each_figure(capsys):
    sys.path.insert(0, str(TOOL.parent))
    try:
        import run  # benchmarks/run.py
    finally:
        sys.path.remove(str(TOOL.parent))
    run._print_machine({"python_loop_ns": 150.0, "numpy_call_us": 1.25,
                        "copy_warm_bytes_per_s": 2.2e10, "sha256_bytes_per_s": 2.2e9,
                        "others_busy": 0.5, "steal": 0.125, "loadavg": [1.5, 1.0, 0.5]})
    out = capsys.readouterr().out
    assert re.search(r"^machine: pure Python 150 ns per loop iteration, numpy 1\.25 us per "
                     r"small call, copy 22\.0 GB/s warm \(64 MiB\), SHA-256 2\.20 GB/s; other "
                     r"processes kept 50 % of the cores busy \(12 % stolen by the host\); load "
                     r"average 1\.50$", out, re.M), out
    assert "other work was running at the start" in out
    # a quiet machine, or one without /proc/stat: no warning
    run._print_machine({"python_loop_ns": 150.0, "numpy_call_us": 1.25,
                        "copy_warm_bytes_per_s": 2.2e10, "sha256_bytes_per_s": 2.2e9,
                        "others_busy": None, "steal": None, "loadavg": [1.5, 1.0, 0.5]})
    out = capsys.readouterr().out
    assert "other" not in out and out.rstrip().endswith("SHA-256 2.20 GB/s; load average 1.50")
