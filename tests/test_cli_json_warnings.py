"""Warnings under ``--json`` (docs/CLI.md "Warnings under ``--json``"): every warning line
stays on stderr, never in stdout's JSON stream; ``explain --json`` and ``simulate --json``
(documents printed at once) also carry them in ``warnings``, as ``inspect --json`` carries
its own.  One warning per command that can give one; the expected lines are the ones the
docs quote (CLI.md: ``--no-verify-hash``'s, dump's missing rank folders, diff's idle
``--ignore``; SELECTION.md §8: an ``--algo`` clause that applies to nothing)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main

FIX = Path(__file__).resolve().parent.parent / "fixtures"
AR2 = str(FIX / "ar2.neff")
PREFIX = "nrtrewrite: warning: "
HASH = f"{AR2}: header hash not verified (--no-verify-hash)"
IDLE = (f"{AR2}: --algo clause 'allgather:ring' applies to nothing in this model: it has no "
        "ALLGATHER collective")


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _stdout_doc_and_warnings(res) -> tuple[dict, list[str]]:
    """stdout one JSON document without a warning line in it; stderr's warning lines, their
    prefix taken off."""
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert PREFIX not in res.stdout
    doc = json.loads(res.stdout)
    lines = res.stderr.splitlines()
    assert all(line.startswith(PREFIX) for line in lines), lines
    return doc, [line[len(PREFIX):] for line in lines]


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    o = tmp_path_factory.mktemp("w") / "o"
    res = cli("lower", AR2, "-o", o)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in o.glob("rank-*")) == ["rank-0000", "rank-0001"]
    return o


def test_explain_json_carries_its_warnings_in_their_order():
    doc, err = _stdout_doc_and_warnings(
        cli("explain", AR2, "--no-verify-hash", "--algo", "allgather:ring", "--json"))
    # CLI.md explain: --no-verify-hash's first, then each idle --algo clause
    assert err == [HASH, IDLE]
    assert doc["warnings"] == [HASH, IDLE]
    # before the trigger records (the last two keys stay triggers, skipped_triggers)
    assert list(doc)[-3:] == ["warnings", "triggers", "skipped_triggers"]


def test_explain_json_without_warnings_has_an_empty_list():
    doc, err = _stdout_doc_and_warnings(cli("explain", AR2, "--json"))
    assert err == [] and doc["warnings"] == []
    doc, err = _stdout_doc_and_warnings(
        cli("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "4", "--json"))
    assert err == [] and doc["warnings"] == []


def test_simulate_json_carries_its_warnings():
    doc, err = _stdout_doc_and_warnings(cli("simulate", AR2, "--no-verify-hash", "--json"))
    assert err == [HASH]
    assert doc["warnings"] == [HASH] and doc["ok"] is True
    assert list(doc)[-3:] == ["warnings", "triggers", "stats"]


def test_simulate_json_of_an_output_with_its_model_carries_the_hash_warning(out):
    doc, err = _stdout_doc_and_warnings(
        cli("simulate", out, "--model", AR2, "--no-verify-hash", "--json"))
    assert err == [HASH] and doc["warnings"] == [HASH]
    doc, err = _stdout_doc_and_warnings(cli("simulate", out, "--json"))
    assert err == [] and doc["warnings"] == []


def test_schedule_json_gives_its_warnings_on_stderr_only():
    doc, err = _stdout_doc_and_warnings(
        cli("schedule", AR2, "--rank", "0", "--no-verify-hash", "--algo", "allgather:ring",
            "--json"))
    assert err == [HASH, IDLE]
    assert doc["rank"] == 0 and "warnings" not in doc


def test_dump_json_gives_its_missing_rank_warning_on_stderr_only(out, tmp_path):
    o = tmp_path / "o"
    shutil.copytree(out, o)
    shutil.rmtree(o / "rank-0001")
    doc, err = _stdout_doc_and_warnings(cli("dump", o, "--sem", "--json"))
    # CLI.md dump: the ranks the manifest lists whose folders are gone
    assert err == [f"{o}/manifest.json lists 1 rank (1) with no rank folder in the output; "
                   "dumping the 1 rank folder there"]
    assert list(doc) == ["kind", "ranks"]
    assert [r["rank_dir"] for r in doc["ranks"]] == ["rank-0000"]


def test_diff_json_gives_its_idle_ignore_warning_on_stderr_only(out):
    doc, err = _stdout_doc_and_warnings(cli("diff", out, out, "--ignore", "input.nmae", "--json"))
    # CLI.md diff --ignore: a path naming a value in neither manifest
    assert err == ["--ignore input.nmae: neither manifest.json has this key path, so it "
                   "ignores nothing"]
    assert doc["identical"] is True and "warnings" not in doc


# Review 59m (2).  Each entry is the stderr line's text after the prefix, as written: a
# path's line break escaped (`\n`, CLI.md "Errors"), a line over the cap cut with the prefix
# counted (cmpwarn.py; until 2026-12-07 the idle clause's path was put in raw, a real line
# break in the JSON, and the cut counted the text alone: 21 characters fewer "in all").
@pytest.mark.parametrize("cmd", ["explain", "simulate"])
def test_json_warnings_escape_a_line_break_in_the_model_path_as_stderr_does(tmp_path, cmd):
    model = tmp_path / "a\nb.neff"
    shutil.copyfile(AR2, model)
    shown = str(tmp_path / "a\\nb.neff")  # the line break as the two characters `\n`
    doc, err = _stdout_doc_and_warnings(
        cli(cmd, model, "--no-verify-hash", "--algo", "allgather:ring", "--json"))
    assert err == [f"{shown}: header hash not verified (--no-verify-hash)",
                   f"{shown}: --algo clause 'allgather:ring' applies to nothing in this "
                   "model: it has no ALLGATHER collective"]
    assert doc["warnings"] == err


@pytest.mark.parametrize("cmd", ["explain", "simulate"])
def test_json_warnings_over_the_cap_are_cut_as_the_stderr_line(tmp_path, cmd):
    folder = tmp_path
    for _ in range(12):  # words of 4 characters: only the whole line's cut applies
        folder = folder / ("abc " * 50)[:200]
    folder.mkdir(parents=True)
    model = folder / "m.neff"
    shutil.copyfile(AR2, model)
    doc, err = _stdout_doc_and_warnings(cli(cmd, model, "--no-verify-hash", "--json"))
    text = f"{model}: header hash not verified (--no-verify-hash)"
    # the whole line counted, its prefix too (CLI.md "Errors": the line's characters)
    assert f" ... ({len(PREFIX) + len(text)} characters in all) ... " in err[0]
    assert doc["warnings"] == err


# Review 59m (3).  The error documents of explain and simulate carry the warnings given on
# stderr before the error, `warnings` before `triggers` (CLI.md "Warnings under --json";
# until 2026-12-07 the warning was on stderr only: errdoc.py).
def test_explain_json_error_document_carries_the_warnings_given():
    res = cli("explain", AR2, "--no-verify-hash", "--rank", "5", "--json")
    assert res.exit_code == 2
    warning, error = res.stderr.splitlines()
    assert warning == PREFIX + HASH
    assert error == (f"nrtrewrite: error: {AR2}: field --rank: rank 5 is not in the model's "
                     "world (ranks 0..1)")
    doc = json.loads(res.stdout)
    assert list(doc) == ["model", "error", "warnings", "triggers"]
    assert doc == {"model": AR2, "error": error.removeprefix("nrtrewrite: error: "),
                   "warnings": [HASH], "triggers": []}


def test_simulate_json_error_document_carries_the_warnings_given(monkeypatch):
    """The memory guard refusing (status 71, no memory available) after the warnings."""
    import nrtrewrite.simulate.memguard as M

    monkeypatch.setattr(M, "available_bytes", lambda *a: (0, "MemAvailable"))
    res = cli("simulate", AR2, "--no-verify-hash", "--algo", "allgather:ring", "--json")
    assert res.exit_code == 71
    *warnings, error = res.stderr.splitlines()
    assert warnings == [PREFIX + HASH, PREFIX + IDLE]
    assert "cannot be simulated on this machine" in error
    doc = json.loads(res.stdout)
    assert list(doc) == ["format", "format_version", "output", "seed", "ok", "error",
                         "error_trigger", "warnings", "triggers", "stats"]
    assert doc["warnings"] == [HASH, IDLE]
    assert doc["error"] == error.removeprefix("nrtrewrite: error: ")


def test_a_usage_error_document_has_no_warnings():
    """A usage error found before the command ran: nothing given, `warnings` empty."""
    res = cli("explain", AR2, "--rank", "x", "--json")
    assert res.exit_code == 2 and PREFIX not in res.stderr
    assert json.loads(res.stdout)["warnings"] == []
