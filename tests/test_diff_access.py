"""`nrtrewrite diff` and what it cannot read or must not follow: an unreadable file or folder
in B is a difference, ``WHERE damaged in B: cannot read (REASON)`` (exit 1), in A (the
reference) an error, ``PATH: cannot read (REASON)`` (exit 2); a link where ``lower`` writes a
file or a rank folder is never followed, ``WHERE type: 'file' != 'link'`` (docs/CLI.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite import diff as D
from nrtrewrite.cli import main
from nrtrewrite.errors import OutputError
from test_diff import lowered, pair  # noqa: F401 - the same fixtures: ar2 lowered, a copy pair

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
DENIED = "cannot read (Permission denied)"


def _neff(folder: Path) -> str:
    return json.loads((folder / "manifest.json").read_text())["output_neff"]["name"]


# -- what cannot be read: run as a user the permission bits apply to --------------------------

@pytest.fixture
def open_pair(lowered):
    """A and B in a folder every user can enter (pytest's own is root's only), removed after
    (the modes restored first)."""
    top = Path(tempfile.mkdtemp(prefix="nrtrewrite-diffaccess-"))
    top.chmod(0o755)
    a, b = top / "A", top / "B"
    shutil.copytree(lowered, a)
    shutil.copytree(lowered, b)
    yield a, b
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = Path(d) / n
            if not p.is_symlink():
                p.chmod(0o755)
    shutil.rmtree(top)


def _as_user(*args: str) -> subprocess.CompletedProcess:
    """``nrtrewrite ARGS`` in a process whose permission checks apply: as root (who may read
    anything), as user nobody (65534) through ``setpriv``."""
    cmd = [sys.executable, "-m", "nrtrewrite", *map(str, args)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permissions are not checked")
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/", timeout=300)


def _error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_what_b_cannot_read_is_damage_and_what_a_cannot_read_an_error(open_pair):
    """Before: an unreadable artifact gave `damaged in B`, then `records: 256 != 0` and the
    error, exit 2; an unreadable NEFF or rank folder only the error; an unreadable rank
    manifest `cannot read ([Errno 13] Permission denied: '...')`."""
    a, b = open_pair
    neff = _neff(a)
    for p in (a, b):
        (p / "notes.txt").write_text("same")
    (b / "rank-0000" / "cce.bin").chmod(0)
    (b / "rank-0000" / "manifest.json").chmod(0)
    (b / "rank-0001").chmod(0)
    (b / neff).chmod(0)
    (b / "notes.txt").chmod(0)
    proc = _as_user("diff", a, b)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.splitlines() == [
        f"notes.txt damaged in B: {DENIED}",
        f"rank-0000/manifest.json damaged in B: {DENIED}",
        f"rank-0000/cce.bin damaged in B: {DENIED}",
        f"rank-0001 damaged in B: {DENIED}",
        f"{neff} damaged in B: {DENIED}",
        "5 difference(s)"]
    proc = _as_user("diff", a, b, "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["identical"] is False and doc["count"] == 5
    assert {(d["where"], d["field"], d["b"]) for d in doc["differences"]} >= {
        ("rank-0001", "damaged", DENIED), (neff, "damaged", DENIED)}
    # the same in A, the reference: an error naming the file, exit 2, one at a time
    for path in (b / "notes.txt", b / "rank-0000" / "manifest.json",
                 b / "rank-0000" / "cce.bin", b / "rank-0001", b / neff):
        assert _error(_as_user("diff", b, a)) == f"nrtrewrite: error: {path}: {DENIED}"
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_rank_folder_that_cannot_be_searched_names_each_file(open_pair):
    a, b = open_pair
    (b / "rank-0001").chmod(0o444)  # listed, but nothing in it can be opened
    proc = _as_user("diff", a, b)
    out = proc.stdout.splitlines()
    assert proc.returncode == 1 and out[-1] == f"{len(out) - 1} difference(s)"
    assert out[0] == f"rank-0001/manifest.json damaged in B: {DENIED}"
    assert all(x.startswith("rank-0001/") and x.endswith(f" damaged in B: {DENIED}")
               for x in out[:-1])
    assert _error(_as_user("diff", b, a)) == (
        f"nrtrewrite: error: {b}/rank-0001/manifest.json: {DENIED}")


def test_an_entry_lower_does_not_write_in_a_folder_that_cannot_be_searched(open_pair):
    """An entry of a folder ``lower`` does not write (``notes/x`` in both) in B's ``notes``
    that can be listed but not searched (mode 0444: its entries cannot even be told apart)
    is B's damage, ``notes/x damaged in B: cannot read (Permission denied)`` (exit 1); in A,
    the reference, an error naming it (exit 2)."""
    a, b = open_pair
    for p in (a, b):
        (p / "notes").mkdir()
        (p / "notes" / "x").write_text("same")
    (b / "notes").chmod(0o444)
    proc = _as_user("diff", a, b)
    assert (proc.returncode, proc.stderr) == (1, ""), proc.stderr
    assert proc.stdout.splitlines() == [f"notes/x damaged in B: {DENIED}", "1 difference(s)"]
    assert _error(_as_user("diff", b, a)) == f"nrtrewrite: error: {b}/notes/x: {DENIED}"


def test_an_unreadable_top_level_manifest_is_named_with_the_os_reason(open_pair):
    """Before: `B: not an nrtrewrite output folder (its manifest.json is not of format
    'nrtrewrite-lowered')`."""
    a, b = open_pair
    (b / "manifest.json").chmod(0)
    says = f"nrtrewrite: error: {b}/manifest.json: {DENIED}"
    assert _error(_as_user("diff", a, b)) == says
    assert _error(_as_user("diff", b, a)) == says
    proc = _as_user("diff", a, b, "--json")
    doc = json.loads(proc.stdout)
    assert doc["identical"] is None and doc["error"] == says[len("nrtrewrite: error: "):]


def _failing_read(monkeypatch, target: Path, exc: OSError) -> None:
    """diff's reading of the manifest ``target`` raises ``exc`` (the bytes made to differ
    from A's, so that it is read)."""
    real = D._read_whole

    def read_whole(p):
        if p == target:
            raise exc
        return real(p)

    monkeypatch.setattr(D, "_read_whole", read_whole)
    target.write_text("{}")


def test_reasons_are_one_form_in_process(pair, monkeypatch):
    """The same through the API, with the OS error injected (whoever runs the tests)."""
    import errno
    a, b = pair
    denied = b / "rank-0001" / "manifest.json"
    _failing_read(monkeypatch, denied,
                  PermissionError(errno.EACCES, "Permission denied", str(denied)))
    assert [(d.where, d.field, d.b) for d in D.diff_outputs(a, b)] == [
        ("rank-0001/manifest.json", "damaged", DENIED)]
    with pytest.raises(OutputError, match=rf"^{denied}: cannot read \(Permission denied\)$"):
        D.diff_outputs(b, a)


def test_out_of_memory_is_no_damage_of_b(pair, monkeypatch):
    """A read or map the process's memory limit refuses (ENOMEM) is the out-of-memory line,
    exit 71, never ``damaged in B: cannot read (Cannot allocate memory)`` (exit 1, the real
    difference hidden: found by a fault audit under `ulimit -v`)."""
    import errno
    a, b = pair
    target = b / "rank-0001" / "manifest.json"
    _failing_read(monkeypatch, target, OSError(errno.ENOMEM, "Cannot allocate memory",
                                               str(target)))
    with pytest.raises(MemoryError):
        list(D.diff_outputs(a, b))
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 71, res.output
    assert "out of memory: 'nrtrewrite diff' needed more memory" in res.stderr
    assert "damaged" not in res.stdout


# -- links: never followed ----------------------------------------------------------------

def _lines(a, b):
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    return res.exit_code, res.stdout.splitlines()


def test_a_rank_folder_replaced_by_a_file_or_a_link_is_a_type_difference(pair):
    """Before: `rank-0001 folder: True != False`, or "identical" for a link to a copy."""
    a, b = pair
    shutil.rmtree(b / "rank-0001")
    (b / "rank-0001").write_text("")
    assert _lines(a, b) == (1, ["rank-0001 type: 'folder' != 'file'", "1 difference(s)"])
    (b / "rank-0001").unlink()
    (b / "rank-0001").symlink_to(b / "nowhere")
    assert _lines(a, b) == (1, ["rank-0001 type: 'folder' != 'link'", "1 difference(s)"])
    (b / "rank-0001").unlink()
    (b / "rank-0001").symlink_to(a / "rank-0001")  # the very same folder, through a link
    assert _lines(a, b) == (1, ["rank-0001 type: 'folder' != 'link'", "1 difference(s)"])
    # as A: a link is no rank folder of A's, a difference (not followed either)
    assert _lines(b, a) == (1, ["rank-0001 type: 'link' != 'folder'", "1 difference(s)"])
    # a link named as a rank folder on one side only
    (b / "rank-0001").unlink()
    shutil.copytree(a / "rank-0001", b / "rank-0001")
    (b / "rank-0007").symlink_to(b / "rank-0001")
    assert _lines(a, b) == (1, ["rank-0007 link: False != True", "1 difference(s)"])


def test_a_file_lower_writes_replaced_by_a_link_is_a_type_difference(pair):
    """Before: an artifact, the NEFF or a rank manifest linked to an identical file was
    "identical"; a dangling link `file: True != False`."""
    a, b = pair
    neff = _neff(a)
    for rel in ("rank-0000/cce.bin", "rank-0001/manifest.json", neff):
        (b / rel).unlink()
        (b / rel).symlink_to(a / rel)
    (b / "rank-0001" / "dma.bin").unlink()
    (b / "rank-0001" / "dma.bin").symlink_to("nowhere")
    assert _lines(a, b) == (1, [
        "rank-0000/cce.bin type: 'file' != 'link'",
        "rank-0001/manifest.json type: 'file' != 'link'",
        "rank-0001/dma.bin type: 'file' != 'link'",
        f"{neff} type: 'file' != 'link'",
        "4 difference(s)"])
    # in A, the reference, a link where a file should be is an error (not a regular file)
    for rel in ("rank-0000/cce.bin", "rank-0001/manifest.json", "rank-0001/dma.bin", neff):
        with pytest.raises(OutputError, match=rf"^{b / rel}: not a regular file$"):
            D.diff_outputs(b, a)
        (b / rel).unlink()
        shutil.copyfile(a / rel, b / rel)
    assert D.diff_outputs(a, b) == []


def test_a_linked_top_level_manifest_is_not_followed(pair):
    a, b = pair
    (b / "manifest.json").unlink()
    (b / "manifest.json").symlink_to(a / "manifest.json")
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 2 and res.stderr == (
        f"nrtrewrite: error: {b}: not an nrtrewrite output folder (its manifest.json must be "
        "a regular file, not a link: links are not followed)\n")


def test_a_fifo_or_a_device_is_named_by_its_kind_not_a_folder_error(lowered, tmp_path):
    """Review 59k: ``diff FIFO B`` said ``fifo.neff: cannot read (Not a directory)``; it is
    refused as a regular file is, saying what it is (docs/CLI.md "diff")."""
    fifo = tmp_path / "fifo.neff"
    os.mkfifo(fifo)
    for args, which, path, kind in (
            ([fifo, lowered], "A", fifo, "a FIFO"), ([lowered, fifo], "B", fifo, "a FIFO"),
            (["/dev/null", lowered], "A", "/dev/null", "a character device")):
        res = CliRunner().invoke(main, ["diff", *map(str, args)], prog_name="nrtrewrite")
        assert res.exit_code == 2, res.output
        assert res.stderr == (f"nrtrewrite diff: error: Invalid value for '{which}': "
                              f"'{path}' must be an output folder, not {kind} "
                              "(see 'nrtrewrite diff --help')\n")
