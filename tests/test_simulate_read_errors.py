"""``simulate OUT`` of an output whose files cannot be read (an exploratory tester of file
systems): the simulation cannot be done, status 2, one line naming the file and the OS's
reason, and with ``--json`` the error document on stdout; never a protocol error (status 1,
which CI reads as wrong bytes), never an empty stdout."""

from __future__ import annotations

import builtins
import errno
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.golden import lower_to
from nrtrewrite.simulate import artifacts as A

FIX = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return lower_to(FIX / "ar2.neff", tmp_path_factory.mktemp("sre") / "out", None)


def _deny(monkeypatch, victim: Path) -> None:
    """Reading ``victim`` fails as for a file of mode 000 read by a user (root reads it)."""
    real_open = builtins.open
    real_read_bytes = Path.read_bytes

    def refuse(path):
        if Path(path) == victim:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    def fake_open(path, *a, **kw):
        refuse(path)
        return real_open(path, *a, **kw)

    def read_bytes(self):
        refuse(self)
        return real_read_bytes(self)
    real_regular = A.open_regular

    def open_regular(path, *a, **kw):  # (how simulate opens the output's files)
        refuse(path)
        return real_regular(path, *a, **kw)
    monkeypatch.setattr(A, "open", fake_open, raising=False)
    monkeypatch.setattr(A, "open_regular", open_regular)
    monkeypatch.setattr(Path, "read_bytes", read_bytes)


@pytest.mark.parametrize("victim, checksums", [
    ("rank-0001/cce.bin", True), ("rank-0001/cce.bin", False),
    ("rank-0001/manifest.json", True), ("rank-0001/manifest.json", False),
    ("manifest.json", True)])
def test_a_file_that_cannot_be_read_is_status_2_and_a_document(
        out, monkeypatch, victim, checksums):
    path = out / victim
    _deny(monkeypatch, path)
    extra = [] if checksums else ["--ignore-checksums"]
    line = f"{path}: cannot read: Permission denied"
    res = CliRunner().invoke(main, ["simulate", str(out), *extra])
    assert res.exit_code == 2, res.output
    assert res.stderr.splitlines() == [f"nrtrewrite: error: {line}"]
    res = CliRunner().invoke(main, ["simulate", str(out), "--json", *extra])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["ok"] is None and doc["error"] == line and doc["triggers"] == []


def test_an_os_error_the_command_leaves_is_still_a_document(out, monkeypatch):
    """An OSError that reaches the CLI as it was (here the rank folder cannot be listed)
    still gives the --json document, with the line the CLI prints."""
    def listdir_fails(*a, **kw):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(out / "rank-0001"))
    from nrtrewrite.cli import simulate as S
    monkeypatch.setattr(S, "verify_checksums", listdir_fails)
    res = CliRunner().invoke(main, ["simulate", str(out), "--json"])
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"] == f"{out / 'rank-0001'}: Permission denied"
    assert res.stderr.splitlines() == [f"nrtrewrite: error: {out / 'rank-0001'}: Permission denied"]


@pytest.mark.parametrize("extra", [[], ["--ignore-checksums"], ["--ignore-checksums", "--json"]])
def test_a_rewritten_neff_that_cannot_be_read_is_status_2(out, monkeypatch, extra):
    """An exploratory tester: under --ignore-checksums an unreadable rewritten NEFF was a
    protocol error (status 1, ``"ok": false``) naming its path twice."""
    from nrtrewrite.simulate import engine as E
    neff = out / "ar2.neff"
    real_open = builtins.open

    def fake_open(path, *a, **kw):
        if Path(path) == neff:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *a, **kw)
    monkeypatch.setattr(E, "open", fake_open, raising=False)
    if not extra:  # the checksums read it first
        _deny(monkeypatch, neff)
    res = CliRunner().invoke(main, ["simulate", str(out), *extra])
    assert res.exit_code == 2, res.output
    line = f"{neff}: cannot read: Permission denied"
    assert res.stderr.splitlines() == [f"nrtrewrite: error: {line}"]
    if "--json" in extra:
        doc = json.loads(res.stdout)
        assert doc["ok"] is None and doc["error"] == line
