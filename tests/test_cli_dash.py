"""docs/CLI.md "Standard input and output": ``-`` as a path is refused by every command, in
one wording, naming the parameter (review R2: three wordings, and ``assemble -o -`` wrote a
file named ``-``); ``./-`` is a file named ``-``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main

FIX = Path(__file__).resolve().parent.parent / "fixtures"
READ = "-: reading from the standard input is not supported; give a path (./- for one named -)"
WRITE = "-: writing to the standard output is not supported; give a path (./- for one named -)"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="nrtrewrite")


@pytest.mark.parametrize("args, command, param, why", [
    (["inspect", "-"], "inspect", "'MODEL.neff'", READ),
    (["inspect", "--json", "-"], "inspect", "'MODEL.neff'", READ),
    (["explain", "-"], "explain", "'MODEL'", READ),
    (["schedule", "-", "--rank", "0"], "schedule", "'MODEL'", READ),
    (["lower", "-"], "lower", "'MODEL'", READ),
    (["dump", "-"], "dump", "'PATH'", READ),
    (["simulate", "-"], "simulate", "'MODEL.neff|OUT'", READ),
    (["simulate", FIX / "ar2.neff", "--model", "-"], "simulate", "'--model'", READ),
    (["diff", "-", FIX], "diff", "'A'", READ),
    (["assemble", "-", "-o", "x.neff"], "assemble", "'SPEC'", READ),
    (["explain", "--topology", "-", "--op", "allreduce", "--bytes", "1KiB", "--ranks", "2"],
     "explain", "'--topology'", READ),
    (["lower", FIX / "ar2.neff", "--topology", "-", "-o", "x"], "lower", "'--topology'", READ),
    (["lower", FIX / "ar2.neff", "-o", "-"], "lower", "'-o' / '--output'", WRITE),
    (["assemble", FIX / "ar2.yaml", "-o", "-"], "assemble", "'-o' / '--output'", WRITE),
])
def test_a_dash_is_refused_in_one_wording(args, command, param, why, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run(*args)
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-1] == (
        f"nrtrewrite {command}: error: Invalid value for {param}: {why} "
        f"(see 'nrtrewrite {command} --help')")
    assert os.listdir(tmp_path) == []  # (no file named "-", nor any other)


def test_dot_slash_dash_is_a_file_named_dash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(FIX / "ar2.neff", tmp_path / "-")
    res = run("inspect", "./-")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("./-  NEFF-like")


@pytest.mark.parametrize("args, command, param", [
    (["diff", "-", FIX], "diff", "'A'"),
    (["diff", FIX, "-"], "diff", "'B'"),
    (["inspect", "-"], "inspect", "'MODEL.neff'"),
    (["dump", "-"], "dump", "'PATH'"),
    (["simulate", "-"], "simulate", "'MODEL.neff|OUT'"),
])
def test_a_dash_is_refused_in_one_wording_with_a_file_named_dash_there(args, command, param,
                                                                       tmp_path, monkeypatch):
    """A regular file named ``-`` in the working folder changes nothing: ``-`` is refused in
    the one wording (review V5: ``diff - X`` said ``'-' is a file, not an output folder``)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_bytes(b"not a model")
    res = run(*args)
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-1] == (
        f"nrtrewrite {command}: error: Invalid value for {param}: {READ} "
        f"(see 'nrtrewrite {command} --help')")
    assert os.listdir(tmp_path) == ["-"] and (tmp_path / "-").read_bytes() == b"not a model"
