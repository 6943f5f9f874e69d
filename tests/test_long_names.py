"""Output names up to the file system's 255 bytes (found by an exploratory tester: a name of
some 236 - 255 characters was refused, ``File name too long``, for the name of its temporary
sibling, ``.NAME.tmp-PID-HEX``, which is then shortened: its first bytes, ``~`` and 16 hex
digits of the name's sha256, ``neff.writer.sibling_stem``)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from click.testing import CliRunner

from nrtrewrite.bundle import clean_stale_temps
from nrtrewrite.cli import main
from nrtrewrite.neff.writer import sibling_stem

from conftest import dead_pid
from test_atomic_output import FIX


def test_sibling_stem_keeps_short_names_and_cuts_long_ones_to_255_bytes():
    assert sibling_stem("x" * 230, 24) == "x" * 230  # 1 + 230 + 24 = 255
    cut = sibling_stem("x" * 231, 24)
    assert cut == "x" * 213 + "~" + hashlib.sha256(b"x" * 231).hexdigest()[:16]
    assert 1 + len(cut) + 24 == 255  # 213 = 255 - 1 - 24 - 17
    name = "é" * 127  # 254 bytes: 2 each
    cut = sibling_stem(name, 13)
    assert cut.startswith("é" * 112) and not cut.startswith("é" * 113)  # 224 bytes, whole é
    assert 1 + len(cut.encode()) + 13 <= 255
    assert sibling_stem(name, 13) == cut  # the same every time


@pytest.mark.parametrize("length", [230, 231, 240, 255])
def test_lower_into_a_name_of_up_to_255_bytes(tmp_path, length):
    out = tmp_path / ("d" * length)
    res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "ar2.neff"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]
    assert (out / "manifest.json").is_file()
    res = CliRunner().invoke(main, ["lower", "-q", "--force", str(FIX / "ar2.neff"), "-o",
                                    str(out)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_assemble_into_a_name_of_255_bytes(tmp_path):
    out = tmp_path / ("c" * 250 + ".neff")
    res = CliRunner().invoke(main, ["assemble", str(FIX / "ar2.yaml"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == (FIX / "ar2.neff").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_a_killed_build_of_a_long_name_is_cleaned_by_the_next(tmp_path):
    out = tmp_path / ("e" * 250)
    dead = dead_pid()
    stale = tmp_path / f".{sibling_stem(out.name, 24)}.tmp-{dead}-0123abcd"
    stale.mkdir()
    other = tmp_path / f".{sibling_stem('f' * 250, 24)}.tmp-{dead}-0123abcd"
    other.mkdir()
    assert len(os.fsencode(stale.name)) <= 255
    assert clean_stale_temps(out) == [stale]
    assert other.exists()


@pytest.mark.parametrize("length", [252, 253, 255])
def test_simulate_a_model_named_up_to_255_bytes(tmp_path, monkeypatch, length):
    """`simulate MODEL.neff` lowered into `<stem>.lowered` in its temporary folder: for a
    model named 253 - 255 bytes that is over 255 bytes, `File name too long`.  It is
    `model.lowered` then (CLI.md "simulate"); the name as `lower` gives it where it fits."""
    import tempfile
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    made, mkdtemp = [], tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **k: made.append(mkdtemp(*a, **k))
                        or made[-1])
    model = tmp_path / ("a" * (length - 5) + ".neff")
    model.write_bytes((FIX / "ar2.neff").read_bytes())
    res = CliRunner().invoke(main, ["simulate", str(model), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["ok"] is True
    want = "a" * (length - 5) + ".lowered" if length == 252 else "model.lowered"  # 252: 255
    # (named inside the temporary folder, marked: CLI.md "simulate"; the folder in TMPDIR)
    assert doc["output"] == f"<temporary>/{want}"
    assert os.path.dirname(made[0]) == str(tmpdir)
    assert list(tmpdir.iterdir()) == []  # removed afterwards


@pytest.mark.parametrize("count, want", [(123, "é" * 123 + ".lowered"), (124, "model.lowered")])
def test_simulate_counts_a_models_name_in_bytes(tmp_path, monkeypatch, count, want):
    """The 255 of `model.lowered`'s switch (CLI.md "simulate") are bytes, as the file
    system counts them: "é" is two bytes in UTF-8, so a model named 123 of them + ".neff"
    lowers into "é" x 123 + ".lowered" (254 bytes), one of 124 (253 bytes, 132 characters)
    into `model.lowered` (its `<stem>.lowered` would be 256 bytes)."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    model = tmp_path / ("é" * count + ".neff")
    model.write_bytes((FIX / "ar2.neff").read_bytes())
    res = CliRunner().invoke(main, ["simulate", str(model), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["ok"] is True and os.path.basename(doc["output"]) == want
    assert list(tmpdir.iterdir()) == []


@pytest.mark.parametrize("stem", ["a" * 247, "a" * 248, "a" * 250, "é" * 123, "é" * 124,
                                  "b" * 247, "b" * 248])
def test_lower_a_model_whose_default_output_name_passes_255_bytes_says_give_o(tmp_path, stem):
    """`lower MODEL.neff` writes `<stem>.lowered` beside the model: for a model named 253 -
    255 bytes (248 - 255 without a suffix: b...) that name passes 255 bytes, and the OS's
    `File name too long` named the long path twice with no word of `-o` (review 53f).
    Refused before the model is read, in one line that says why (the name's bytes, counted
    as bytes: `é` is two) and to give `-o`, which lowers it; up to 255 bytes the default is
    written as before."""
    model = tmp_path / (stem + ".neff" if stem[0] != "b" else stem)  # (b: no suffix)
    model.write_bytes((FIX / "ar2.neff").read_bytes())
    res = CliRunner().invoke(main, ["lower", "-q", str(model)])
    name = stem + ".lowered"  # (the model's last suffix, if any, replaced)
    size = len(name.encode())
    if size <= 255:
        assert res.exit_code == 0, res.output
        assert (tmp_path / name / "manifest.json").is_file()
        return
    assert res.exit_code == 2
    # the name shown by its first 40 and last 20 characters (review 53m: the literal text
    # <stem>.lowered was printed)
    shown = name[:40] + "..." + name[-20:]
    assert res.stderr == (f"nrtrewrite: error: {model}: the default output {shown} "
                          f"would be a name of {size} bytes, more than the 255 bytes a file "
                          "name may have (NAME_MAX); give -o\n")
    assert list(tmp_path.iterdir()) == [model]
    res = CliRunner().invoke(main, ["lower", "-q", str(model), "-o", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o" / "manifest.json").is_file()


@pytest.mark.parametrize("name", ["d" * 256, "é" * 128, "d" * 255])
def test_lower_an_output_name_past_255_bytes_is_refused_before_the_model_is_read(
        tmp_path, name):
    """`lower -o OUT` where OUT's last name passes the 255 bytes a file name may have
    (counted as bytes: `é` is two): a usage error naming `-o`, the name's bytes and NAME_MAX,
    the name shown by its first 40 and last 20 characters, before the model is read (an
    empty file as the model: read, it would be refused for its size); until 2026-12-07 the
    model was planned whole, then the OS's `File name too long` named the path twice.  A
    name of 255 bytes is written."""
    model = tmp_path / "m.neff"
    size = len(name.encode())
    if size <= 255:
        model.write_bytes((FIX / "ar2.neff").read_bytes())
        res = CliRunner().invoke(main, ["lower", "-q", str(model), "-o", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        assert (tmp_path / name / "manifest.json").is_file()
        return
    model.write_bytes(b"")
    res = CliRunner().invoke(main, ["lower", "-q", str(model), "-o", str(tmp_path / name)],
                             prog_name="nrtrewrite")
    assert res.exit_code == 2
    shown = name[:40] + "..." + name[-20:]
    (line,) = res.stderr.splitlines()
    assert line == (f"nrtrewrite lower: error: Invalid value for '-o' / '--output': its last "
                    f"name {shown} is {size} bytes, more than the 255 bytes a file name may "
                    "have (NAME_MAX) (see 'nrtrewrite lower --help')")
    assert list(tmp_path.iterdir()) == [model]
