"""benchmarks/bench_read.py: the inputs it writes are valid NEFF-like files holding what its
docstring says, and it reads each one back (sizes, not speed: no timed tests); bad names and
a bad ``--out`` are one line, status 2, before anything is written."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nrtrewrite.neff.container import read_container, read_file_bytes
from nrtrewrite.neff.reader import read_model

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "bench_read.py"
_spec = importlib.util.spec_from_file_location("bench_read", TOOL)
bench_read = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_read)


def test_inputs_hold_what_they_say(tmp_path):
    w = bench_read.make("w1", tmp_path)
    c = read_container(read_file_bytes(w))  # the header hash checked too
    assert len(c.members["weights.bin"]) == 1 << 20
    assert read_model(w).triggers  # the model itself is valid: one 0xC7
    g = bench_read.make("g50", tmp_path)
    data = g.read_bytes()
    assert data[1024:].count(b"\x1f\x8b\x08") >= 51  # the tar.gz and 50 empty members
    assert set(read_container(read_file_bytes(g)).members) == {
        "neff.json", "sg00/def.json", "sg00/sp.bin"}
    z = bench_read.make("z2", tmp_path)
    assert z.stat().st_size < 64 << 10
    assert read_container(read_file_bytes(z)).members["zeros.bin"] == bytes(2 << 20)


def test_the_tool_prints_a_row_per_input(tmp_path):
    out = tmp_path / "read"
    res = subprocess.run([sys.executable, str(TOOL), "--only", "w1,g20", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == ["w1", "g20"]
    assert abs(float(rows[0][-1]) - (1 << 20) / 1e6) < 0.05  # the members: 1 MiB + a few hundred bytes
    assert float(rows[1][-1]) == 0.0
    assert not out.exists()  # removed without --keep


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.mark.parametrize("names, bad", [("w2,x", "x"), ("bogus", "bogus"), ("g1,z", "z"),
                                        ("w１", "w１")])
def test_every_name_is_checked_before_anything_is_written(tmp_path, names, bad):
    """Before, ``--only w2,x`` wrote w2.neff and then stopped at x with it left behind."""
    out = tmp_path / "read"
    res = run("--only", names, "--out", str(out))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == (f"bench_read.py: error: --only: unknown input "
                                           f"{bad!r}: wN, gK or zN (e.g. w32)")
    assert not out.exists()


@pytest.mark.parametrize("where, says", [
    ("a.neff", "--out {}: not a folder"),
    ("missing/deep/x", "--out {}: its parent folder {} does not exist"),
])
def test_a_bad_out_is_one_line_and_makes_no_folder(tmp_path, where, says):
    (tmp_path / "a.neff").write_bytes(b"model")
    out = tmp_path / where
    res = run("--only", "g1", "--out", str(out))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[-1] == "bench_read.py: error: " + says.format(out, out.parent)
    assert sorted(os.listdir(tmp_path)) == ["a.neff"]
    assert (tmp_path / "a.neff").read_bytes() == b"model"


def test_a_relative_out_is_the_starting_folders(tmp_path):
    res = run("--only", "g1", "--out", "read", "--keep", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert sorted(os.listdir(tmp_path / "read")) == ["g1.neff"]
