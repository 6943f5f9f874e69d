"""``simulate OUT`` of an output whose files cannot be read (an exploratory tester of file
systems): the simulation cannot be done, status 2, one line naming the file and the OS's
reason, and with ``--json`` the error document on stdout; never a protocol error (status 1,
which CI reads as wrong bytes), never an empty stdout."""

from __future__ import annotations

import builtins
import errno
import json
import os
import shutil
import subprocess
import sys
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
    protocol error (status 1, ``"ok": false``) naming its path twice.  (Without the option
    the checksums read it first, through the same ``open_regular``.)"""
    neff = out / "ar2.neff"
    _deny(monkeypatch, neff)
    res = CliRunner().invoke(main, ["simulate", str(out), *extra])
    assert res.exit_code == 2, res.output
    line = f"{neff}: cannot read: Permission denied"
    assert res.stderr.splitlines() == [f"nrtrewrite: error: {line}"]
    if "--json" in extra:
        doc = json.loads(res.stdout)
        assert doc["ok"] is None and doc["error"] == line


# A file of OUT that is missing or not a regular file, refused alike with and without the
# checksums (docs/SIMULATOR.md §1, docs/CLI.md "simulate"): the checksum pass reads every
# file, and --ignore-checksums would not get past the fault, so its hint is not given.
HINT = "(--ignore-checksums to simulate anyway)"


def _copy(out: Path, tmp_path: Path) -> Path:
    o = tmp_path / "o"
    shutil.copytree(out, o)
    return o


def _put(path: Path, what: str) -> None:
    """Put ``what`` in the place of the file (or folder) ``path``: nothing, a FIFO, a
    folder, or a link to a device."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    if what == "fifo":
        os.mkfifo(path)
    elif what == "folder":
        path.mkdir()
    elif what == "device":
        path.symlink_to("/dev/zero")


def _simulate(out: Path, *extra: str) -> tuple[int, str]:
    """Exit status and stderr of ``simulate OUT``, in a process of its own (a FIFO that is
    waited on fails at the timeout instead of hanging the suite)."""
    env = dict(os.environ, PYTHONPATH=str(FIX.parent) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "simulate", str(out), *extra],
                          capture_output=True, text=True, cwd=FIX.parent, env=env, timeout=120)
    return proc.returncode, proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("extra", [[], ["--ignore-checksums"]])
@pytest.mark.parametrize("what, reason", [
    ("gone", "No such file or directory"), ("fifo", "not a regular file"),
    ("folder", "not a regular file"), ("device", "not a regular file")])
def test_a_rewritten_neff_missing_or_not_a_regular_file_is_status_2(out, tmp_path, what,
                                                                    reason, extra):
    """With --ignore-checksums a FIFO in the rewritten NEFF's place (ar2.neff, manifest.json's
    output_neff.name) blocked simulate forever (a plain open), and a missing one, or one not
    a regular file, was a protocol error (exit 1) saying "cannot read" twice, where a missing
    artifact is exit 2.  Both ways it is exit 2, one line naming the file, the reason once;
    the checksum pass, which reads it first, says the same (no hint to use the option)."""
    o = _copy(out, tmp_path)
    neff = o / "ar2.neff"
    _put(neff, what)
    assert _simulate(o, *extra) == (2, f"nrtrewrite: error: {neff}: cannot read: {reason}\n")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("extra", [[], ["--ignore-checksums"]])
@pytest.mark.parametrize("victim, what, line", [
    ("rank-0001", "gone", "{o}: rank-0001 is missing (rank 1 of manifest.json ranks)"),
    ("rank-0001/manifest.json", "gone",
     "{o}/rank-0001/manifest.json: manifest.json is missing"),
    ("rank-0001/manifest.json", "fifo",
     "{o}/rank-0001/manifest.json: cannot read: not a regular file"),
    ("rank-0001/manifest.json", "folder",
     "{o}/rank-0001/manifest.json: cannot read: not a regular file"),
    ("rank-0001/cce.bin", "gone", "{o}/rank-0001/cce.bin: cannot read: No such file or directory"),
    ("rank-0001/cce.bin", "fifo", "{o}/rank-0001/cce.bin: cannot read: not a regular file"),
    ("rank-0001/cce.bin", "device", "{o}/rank-0001/cce.bin: cannot read: not a regular file"),
])
def test_a_fault_the_option_does_not_get_past_is_refused_alike_without_the_hint(
        out, tmp_path, victim, what, line, extra):
    """The checksum pass refused a rank folder or a file that is gone with "rank folders
    differ from manifest.json ranks" or "... is missing", a FIFO rank manifest too, each
    adding "(--ignore-checksums to simulate anyway)", yet with the option each is still
    refused (exit 2).  Now it says what the simulation says with the option: a FIFO or a
    folder is "not a regular file", and the hint is not given."""
    o = _copy(out, tmp_path)
    _put(o / victim, what)
    assert _simulate(o, *extra) == (2, f"nrtrewrite: error: {line.format(o=o)}\n")


@pytest.mark.parametrize("extra", [[], ["--ignore-checksums"]])
@pytest.mark.parametrize("victim, line", [
    ("rank-0001", "{o}: rank-0001 is missing (rank 1 of manifest.json ranks)"),
    ("rank-0001/manifest.json", "{o}/rank-0001/manifest.json: manifest.json is missing"),
])
def test_a_rank_gone_from_rank_manifests_too_is_refused_alike_without_the_hint(
        out, tmp_path, victim, line, extra):
    """ar2's output (ranks 0 and 1) with rank 1's folder, or its manifest, deleted and
    ``rank_manifests["rank-0001"]`` deleted from manifest.json was refused by the checksum
    pass with "rank_manifests does not list exactly the rank folders of 'ranks'" and the
    hint, yet with the option it is still refused as the folder or manifest missing (exit 2).
    The checksum pass now says that, without the hint (docs/SIMULATOR.md §1)."""
    o = _copy(out, tmp_path)
    _put(o / victim, "gone")
    top = json.loads((o / "manifest.json").read_text())
    del top["rank_manifests"]["rank-0001"]
    (o / "manifest.json").write_text(json.dumps(top))
    assert _simulate(o, *extra) == (2, f"nrtrewrite: error: {line.format(o=o)}\n")


@pytest.mark.parametrize("spoil, then", [
    (lambda o: (o / "rank-0002").mkdir(), 0),  # a folder no rank is: not read
    (lambda o: (o / "rank-0001" / "cce.bin").write_bytes(  # a 16-byte record and a byte more
        (o / "rank-0001" / "cce.bin").read_bytes() + b"\0"), 1),
])
def test_the_hint_is_given_where_the_option_gets_past_the_refusal(out, tmp_path, spoil, then):
    """A rank folder ``ranks`` does not list, or an artifact whose sha256 does not match, is
    refused with the hint (exit 2); with --ignore-checksums it is simulated: the extra
    folder is not read (exit 0), the appended byte is a protocol error (exit 1)."""
    o = _copy(out, tmp_path)
    spoil(o)
    res = CliRunner().invoke(main, ["simulate", str(o)])
    assert res.exit_code == 2 and res.stderr.rstrip().endswith(HINT), res.output
    assert CliRunner().invoke(main, ["simulate", str(o), "--ignore-checksums"]).exit_code == then


#: the most bytes the NEFF reader takes (``MAX_FILE_BYTES``, docs/RELIABILITY.md §4): 5 GiB
FIVE_GIB = 5 * 1024 ** 3


@pytest.mark.parametrize("checksums", [True, False], ids=["checked", "ignored"])
def test_a_rewritten_neff_over_the_size_limit_is_status_2(out, tmp_path, checksums):
    """CLI.md: a file of OUT that cannot be read is exit 2. The rewritten NEFF made a sparse
    file one byte over 5 GiB (5368709121 bytes) was a protocol error, exit 1 (``protocol
    error: OUT/ar2.neff: cannot read the rewritten NEFF: file of ... bytes exceeds the
    limit ...``), and the checksum pass hashed its 5 GiB first; it is refused from its size,
    before any byte is read or hashed, with the same line with and without
    ``--ignore-checksums``, and with ``--json`` the error document."""
    copy = tmp_path / "o"
    shutil.copytree(out, copy)
    neff = copy / json.loads((copy / "manifest.json").read_text())["output_neff"]["name"]
    os.truncate(neff, FIVE_GIB + 1)
    extra = [] if checksums else ["--ignore-checksums"]
    line = (f"{neff}: file of 5368709121 bytes exceeds the limit of 5368709120 bytes "
            "(MAX_FILE_BYTES)")
    res = CliRunner().invoke(main, ["simulate", str(copy), *extra])
    assert res.exit_code == 2, res.output
    assert res.stderr.splitlines() == [f"nrtrewrite: error: {line}"]
    res = CliRunner().invoke(main, ["simulate", str(copy), "--json", *extra])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["ok"] is None and doc["error"] == line and doc["triggers"] == []


# ------------------------------------------- mutation audit round 8: the checksum pass's sizes

def test_a_files_bytes_other_than_its_size_is_refused_though_its_sha256_matches(out, tmp_path):
    """docs/SIMULATOR.md §1: the checksum pass refuses "a sha256 or a size that does not
    match", with the hint. rank-0001/manifest.json's ``files["cce.bin"].bytes`` one 16-byte
    record more than the file (its ``sha256`` still the file's, rank_manifests re-hashed so
    that only the size is wrong): the size must be refused on its own, not only through the
    sha256 (a mutant that hashed without comparing the size took it). With the option the
    size is not read (exit 0). The line names ``bytes``, not the sha256 (review 55h)."""
    import hashlib

    o = _copy(out, tmp_path)
    mpath = o / "rank-0001" / "manifest.json"
    man = json.loads(mpath.read_text())
    info = man["files"]["cce.bin"]
    data = (o / "rank-0001" / "cce.bin").read_bytes()
    assert (info["bytes"], info["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    info["bytes"] += 16
    mpath.write_text(json.dumps(man))
    top = json.loads((o / "manifest.json").read_text())
    top["rank_manifests"]["rank-0001"] = hashlib.sha256(mpath.read_bytes()).hexdigest()
    (o / "manifest.json").write_text(json.dumps(top))
    res = CliRunner().invoke(main, ["simulate", str(o)])
    assert res.exit_code == 2, res.output
    # the size is judged first and named as the key that records it (review 55h: it was
    # ``sha256 does not match``, though the sha256 is right)
    assert res.stderr == (f"nrtrewrite: error: {o}: rank-0001/cce.bin: its size, {len(data)} "
                          f"bytes, does not match rank-0001/manifest.json "
                          f'files["cce.bin"].bytes ({len(data) + 16}); the output was '
                          f"modified after it was written {HINT}\n")
    assert CliRunner().invoke(main, ["simulate", str(o), "--ignore-checksums"]).exit_code == 0


@pytest.mark.parametrize("over", [0, 1])
def test_a_rewritten_neff_at_the_file_limit_is_read_and_one_byte_over_it_is_not(
        out, monkeypatch, over):
    """The rewritten NEFF is read as the reader reads a NEFF (docs/SIMULATOR.md §1: "read
    the same way"), its size judged against MAX_FILE_BYTES before a byte is read: a file of
    exactly the limit is read, one byte over it is refused naming the file and both sizes.
    The limit is lowered to ar2.neff's size (or a byte under it) here, as no test writes
    5 GiB."""
    from nrtrewrite.neff import container

    size = (out / "ar2.neff").stat().st_size
    monkeypatch.setattr(container, "MAX_FILE_BYTES", size - over)
    res = CliRunner().invoke(main, ["simulate", str(out)])
    if not over:
        assert res.exit_code == 0, res.output
        return
    assert res.exit_code == 2, res.output
    assert res.stderr == (f"nrtrewrite: error: {out / 'ar2.neff'}: file of {size} bytes "
                          f"exceeds the limit of {size - 1} bytes (MAX_FILE_BYTES)\n")
