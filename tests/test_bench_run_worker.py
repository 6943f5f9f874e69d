"""benchmarks/run.py ``--worker KIND ARGS...``: missing or bad arguments, a model that is
not one and a rank outside the model's world are one line, status 2, no traceback (review
54f: an IndexError, click's BadParameter, and an empty rank measured with exit 0)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "run.py"
AR2 = "fixtures/ar2.neff"  # two ranks, 0 and 1


def worker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RUN), "--worker", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("args, says", [
    (["bogus"], "--worker 'bogus': not a measurement (one of rank, cli, sweep, machine, "
                "treemem, sink, all)"),
    (["rank"], "--worker rank: 0 argument(s) where it takes rank MODEL INT INT WRITE"),
    (["sweep"], "--worker sweep: 0 argument(s) where it takes sweep ALGO MODELS..."),
    (["sweep", "-"], "--worker sweep: 1 argument(s) where it takes sweep ALGO MODELS..."),
    (["machine", "x"], "--worker machine: 1 argument(s) where it takes machine"),
    (["cli", "nosuch.neff", "0"], "--worker cli: nosuch.neff: no such file"),
    (["cli", AR2, "zero"], "--worker cli: 'zero': not an integer"),
    (["rank", AR2, "0", "0", "wr"], "--worker rank: 'wr': write or nowrite"),
    (["all", AR2, "0"], "--worker all: '0': at least 1"),
    (["treemem", "1", "0"], "--worker treemem: '0': a finite number of seconds above 0"),
    # review 54o: inf passed, then an OverflowError traceback
    (["treemem", "1", "inf"], "--worker treemem: 'inf': a finite number of seconds above 0"),
    (["treemem", "1", "nan"], "--worker treemem: 'nan': a finite number of seconds above 0"),
    # as profile_rank.py and lower --rank refuse it: a rank outside the world lowered to
    # nothing, measured with exit 0
    (["rank", AR2, "99", "0", "write"], "rank 99 is not in ar2.neff's world (ranks 0..1)"),
    # review 54o: the whole command's refusal was nrtrewrite's own line, `nrtrewrite: error:
    # ...`, which the driver (run._sub) takes for a crash: now this script's, naming lower
    (["cli", AR2, "7"], "nrtrewrite lower: fixtures/ar2.neff: field --rank: rank 7 is not in "
                        "the model's world (ranks 0..1)"),
])
def test_a_bad_worker_argument_is_one_line(args, says):
    res = worker(*args)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == f"run.py: error: {says}\n"


def test_a_model_the_whole_command_refuses_is_this_scripts_one_line(tmp_path):
    """Review 54o: ``--worker cli`` of a model the reader refuses printed nrtrewrite's own
    ``nrtrewrite: error: ...``; the driver passes on only ``run.py: error: ...`` lines (else
    a traceback).  Nothing of the run is left in the temporary folder either."""
    short = tmp_path / "short.neff"
    short.write_bytes(b"NEFF")
    env = dict(os.environ, TMPDIR=str(tmp_path))
    res = subprocess.run([sys.executable, str(RUN), "--worker", "cli", str(short), "0"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == (f"run.py: error: nrtrewrite lower: {short}: file too short: 4 bytes, "
                          "the header alone needs 1024\n")
    assert os.listdir(tmp_path) == ["short.neff"]
