"""Leftovers of the fortieth session's reviews (docs/CLI.md "Errors"): a streamed
``--json`` document's ``"error"`` reads as the internal error's line does; ``golden``'s
unpack error names its path escaped once; a KANGARING secondary moves no data to its own
primary (seed 000, docs/DESIGN.md "KANGARING")."""

from __future__ import annotations

import json

import pytest

from nrtrewrite.cli import _one_line, stopped_why
from test_atomic_output import FIX
from test_escape_once import BACKSLASH, NEWLINE, SHOWN, invoke

BS = "\\"
#: an internal error's tail (docs/CLI.md "Errors")
BUG = " (a bug in nrtrewrite; rerun with --traceback for the details and report it)"


# ------------------------------------------------------------------ 1. one "Type: message"

class _Outer:
    class Nested(Exception):
        """An exception class inside a class: named ``_Outer.Nested`` (its qualified name)."""


#: each exception and the ``Type: message`` written out by hand from CLI.md "Errors": a
#: message escaped once as a name (a backslash doubled, a line break as ``\n``); a
#: ``KeyError``'s key keeps the one escape of its ``repr`` quotes
CASES = [
    (KeyError(BACKSLASH), "KeyError: 'lit" + BS * 2 + "nb'"),
    (KeyError(NEWLINE), "KeyError: 'lit" + BS + "nb'"),
    (ValueError(f"bad var {BACKSLASH}"), f"ValueError: bad var {SHOWN[BACKSLASH]}"),
    (_Outer.Nested("x"), "_Outer.Nested: x"),
]


@pytest.mark.parametrize("exc, shown", CASES)
def test_a_stopped_documents_error_reads_as_the_internal_errors_line(exc, shown):
    assert stopped_why(exc) == shown
    assert _one_line(exc) == shown


def test_a_workers_exception_is_named_by_its_own_type_in_both():
    from nrtrewrite.ahead import RemoteError
    exc = RemoteError("Weird", f"w {NEWLINE}")
    assert stopped_why(exc) == _one_line(exc) == f"Weird: w {SHOWN[NEWLINE]}"


def _lowered(tmp_path):
    out = tmp_path / "out"
    assert invoke("lower", "-q", FIX / "ar2.neff", "-o", out).exit_code == 0
    return out


@pytest.mark.parametrize("name", [BACKSLASH, NEWLINE])
def test_a_keyerror_in_dump_json_reads_as_on_the_line(tmp_path, monkeypatch, name):
    """The same ``KeyError`` raised while ``dump --json`` streams its records: the document's
    ``"error"`` is the internal error's ``Type: message``, the key escaped once both times."""
    out = _lowered(tmp_path)
    monkeypatch.setattr("nrtrewrite.cli.dump.record_texts",
                        lambda *a, **k: (_ for _ in ()).throw(KeyError(name)))
    res = invoke("dump", "--json", "--cce", out / "rank-0000")
    assert res.exit_code == 70
    shown = {BACKSLASH: "KeyError: 'lit" + BS * 2 + "nb'", NEWLINE: "KeyError: 'lit" + BS + "nb'"}
    assert res.stderr.splitlines() == [f"nrtrewrite: internal error: {shown[name]}" + BUG]
    assert json.loads(res.stdout)["error"] == shown[name]


def test_a_keyerror_in_diff_json_reads_as_on_the_line(tmp_path, monkeypatch):
    a = _lowered(tmp_path)
    b = tmp_path / "b"
    assert invoke("lower", "-q", FIX / "ar2.neff", "-o", b, "--algo", "ring").exit_code == 0
    monkeypatch.setattr("nrtrewrite.cli.diff.record_line_texts",
                        lambda *a, **k: (_ for _ in ()).throw(KeyError(BACKSLASH)))
    res = invoke("diff", "--json", a, b)
    shown = "KeyError: 'lit" + BS * 2 + "nb'"
    assert res.exit_code == 70, res.stderr
    assert res.stderr.splitlines() == [f"nrtrewrite: internal error: {shown}" + BUG]
    assert json.loads(res.stdout)["error"] == shown


# ------------------------------------------------------------------ 2. golden.unpack's path

@pytest.mark.parametrize("name", [BACKSLASH, NEWLINE])
def test_golden_unpacks_refusal_names_its_path_escaped_once(tmp_path, name):
    """``golden.unpack`` refuses a member that is not a plain relative path, naming the
    golden's path as a name is shown (a backslash doubled, a line break as ``\\n``) and the
    member in ``repr``'s quotes: ``lit\\nb`` and ``lit`` + line break + ``b`` print apart."""
    import io
    import tarfile

    from nrtrewrite.golden import unpack

    folder = tmp_path / name
    folder.mkdir()
    tgz = folder / "g.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        info = tarfile.TarInfo("../x")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(ValueError) as err:
        unpack(tgz, tmp_path / "dest")
    assert str(err.value) == f"{tmp_path}/{SHOWN[name]}/g.tar.gz: unexpected member '../x'"
