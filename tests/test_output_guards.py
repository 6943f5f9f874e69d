"""What `lower` writes and refuses to write (docs/CLI.md "lower", docs/FORMATS.md §1 and §9,
docs/RELIABILITY.md §4): the rewritten NEFF's name never collides with the output's own
names; --force never replaces a folder holding the input or anything foreign."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nrtrewrite.bundle import write_output
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.reader import read_model
from test_atomic_output import FIX, ROOT, env, one_line_error, run, sha, verify_complete


def run_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nrtrewrite.cli.__main__", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120)


def lower_in_process(model: Path, out: Path, **kw) -> Path:
    return write_output(plan_lowering(read_model(model), LowerOptions()), out, ranks=None, **kw)


# --- F2: a model named like one of the output's own entries -------------------------------

@pytest.mark.parametrize("name, stored", [
    ("manifest.json", "manifest.json.neff"),
    ("MANIFEST.JSON", "MANIFEST.JSON.neff"),  # one name on a case-insensitive file system
    ("rank-0000", "rank-0000.neff"),
    ("Rank-12345", "Rank-12345.neff"),
    ("rank-7", "rank-7.neff"),
    ("rank-0000.neff", "rank-0000.neff"),  # no collision: kept
    ("manifest.json.neff", "manifest.json.neff"),
    ("rank-", "rank-"),
])
def test_no_model_name_collides_with_the_outputs_own_names(name, stored, tmp_path):
    """The rewritten NEFF keeps the model's name unless it is `manifest.json` or `rank-` and
    digits (any case): then `.neff` is added.  Before, a model named manifest.json lost its
    rewritten NEFF under the top manifest (exit 0, simulate: sha256 mismatch), and one named
    rank-0000 failed with `Is a directory`."""
    model = tmp_path / "in" / name
    model.parent.mkdir()
    shutil.copy(FIX / "ar2.neff", model)
    out = lower_in_process(model, tmp_path / "out")
    top = json.loads((out / "manifest.json").read_text())
    assert top["output_neff"]["name"] == stored
    assert top["input"]["name"] == name
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json", stored, "rank-0000", "rank-0001"])
    verify_complete(out)
    # the same rewritten NEFF a plainly named copy of the model gets
    plain = lower_in_process(FIX / "ar2.neff", tmp_path / "plain")
    assert (out / stored).read_bytes() == (plain / "ar2.neff").read_bytes()


def test_a_model_named_manifest_json_lowers_and_simulates(tmp_path):
    """The reported case end to end, through the CLI: exit 0 and `simulate` matches."""
    model = tmp_path / "manifest.json"
    shutil.copy(FIX / "ar2.neff", model)
    proc = run(model, "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    sim = run_cli("simulate", tmp_path / "out")
    assert sim.returncode == 0, sim.stdout + sim.stderr
    assert "1/1 trigger(s) match" in sim.stdout

