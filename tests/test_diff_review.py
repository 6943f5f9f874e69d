"""`nrtrewrite diff`: the defects a review of diff.py found (docs/RELIABILITY.md), each pinned
by what docs/CLI.md "diff" promises, the expected lines worked out by hand."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from click.testing import CliRunner

from nrtrewrite import diff as D
from nrtrewrite.cli import main
from nrtrewrite.neff import container
from test_diff import _one_line_error, lowered, pair  # noqa: F401 - ar2 lowered, a copy pair


def _neff(folder) -> str:
    return json.loads((folder / "manifest.json").read_text())["output_neff"]["name"]


def test_the_neff_header_is_shown_by_the_readers_own_tables():
    """Which header fields are text and which hex is the reader's knowledge
    (``container.STRING_FIELDS`` / ``BYTES_FIELDS``); diff held a copy of it that could drift."""
    assert D.STRING_FIELDS is container.STRING_FIELDS
    assert D.BYTES_FIELDS is container.BYTES_FIELDS
    assert container._STRING_FIELDS is container.STRING_FIELDS  # (the earlier names work)
    assert container._BYTES_FIELDS is container.BYTES_FIELDS
    # NEFF-LIKE.md §1: name is text, uuid bytes, lnc_size a u32
    assert D._header_value("name", b"ab" + bytes(254)) == "ab"
    assert D._header_value("uuid", bytes(range(16))) == "000102030405060708090a0b0c0d0e0f"
    assert D._header_value("lnc_size", b"\x02\0\0\0") == 2


def test_a_neff_over_the_readers_file_size_limit_is_refused_from_its_size(pair):
    """The reader refuses a file over 5 GiB (``MAX_FILE_BYTES``) from its size; diff's NEFF
    walk skipped that check, so B's NEFF grown to 8 GiB of zeros was scanned (22 s) and
    reported as an ordinary size and sha256 difference, and in A it was no error."""
    a, b = pair
    name = _neff(a)
    big = (5 << 30) + 1  # sparse: the zero bytes after the payload the reader would scan
    os.truncate(b / name, big)
    why = (f"{b / name}: file of {big} bytes exceeds the limit of 5368709120 bytes "
           "(MAX_FILE_BYTES)")
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert (res.exit_code, res.stdout) == (1, f"{name} damaged in B: {why}\n1 difference(s)\n")
    assert _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)])) == \
        f"nrtrewrite: error: {why}"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_entries_lower_does_not_write_are_walked_folder_by_folder_in_name_order(pair):
    """CLI.md: every other entry is compared and a folder walked the same way; the lines
    come in name order, a folder's own entries before its next sibling's."""
    a, b = pair
    (a / "w").write_text("w")
    for side, one in ((a, "1a"), (b, "1b")):
        (side / "x" / "y").mkdir(parents=True)
        (side / "x" / "1").write_text(one)
    (a / "x" / "y" / "2").write_text("2")
    (b / "x" / "z").write_text("z")
    (b / "zz").write_text("zz")
    assert [d.line() for d in D.diff_outputs(a, b)] == [
        "w file: True != False",
        f"x/1 sha256: '{_sha(b'1a')}' != '{_sha(b'1b')}'",
        "x/y/2 file: True != False",
        "x/z file: False != True",
        "zz file: False != True"]


def test_folders_nested_a_thousand_deep_on_both_sides_are_walked(pair):
    """Folders 1000 deep that ``lower`` does not write, on both sides: the walk called itself
    once per level, so diff ended with a RecursionError (exit 70, an internal error)."""
    a, b = pair
    depth = 1000
    chain = Path(*["d"] * depth)
    try:
        for side, text in ((a, "x"), (b, "y")):
            p = side
            for _ in range(depth):  # (mkdir(parents=True) recurses once per level)
                p = p / "d"
                p.mkdir()
            (p / "f").write_text(text)
        res = CliRunner().invoke(main, ["diff", str(a), str(b)])
        where = "d/" * depth + "f"
        assert (res.exit_code, res.stdout) == (
            1, f"{where} sha256: '{_sha(b'x')}' != '{_sha(b'y')}'\n1 difference(s)\n")
    finally:  # (shutil.rmtree, pytest's clean-up, recurses once per level too)
        for side in (a, b):
            p = side / chain
            (p / "f").unlink(missing_ok=True)
            for _ in range(depth):
                if p.is_dir():
                    p.rmdir()
                p = p.parent


def _drop_output_neff(folder) -> dict:
    """``folder``'s manifest without ``output_neff`` (written as lower lays it out); the
    value dropped."""
    man = json.loads((folder / "manifest.json").read_text())
    value = man.pop("output_neff")
    (folder / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
    return value


def test_a_neff_named_by_one_manifest_only_is_compared_with_the_same_named_file(pair):
    """A manifest without ``output_neff`` beside one with it: the manifests' difference names
    the key, and the other side's file of that name is compared as its NEFF.  It was called
    missing (``ar2.neff file: True != False`` beside B's identical ar2.neff), or with the
    sides swapped given twice, ``True != False`` and ``False != True``."""
    a, b = pair
    name = _neff(a)
    value = _drop_output_neff(b)
    text = json.dumps(value)  # (FORMATS §1.1: {"name": ..., "sha256": ...}; ASCII)
    assert [d.line() for d in D.diff_outputs(a, b)] == [
        f"manifest.json output_neff: {text} != <absent>"]
    assert [d.line() for d in D.diff_outputs(b, a)] == [
        f"manifest.json output_neff: <absent> != {text}"]
    # the same-named file is the NEFF: compared, and missing as the NEFF is
    size = (b / name).stat().st_size
    with open(b / name, "ab") as fh:
        fh.write(bytes(4))  # zero bytes after the payload: CLI.md's size and sha256 lines
    sha_a, sha_b = _sha((a / name).read_bytes()), _sha((b / name).read_bytes())
    assert [d.line() for d in D.diff_outputs(a, b)] == [
        f"manifest.json output_neff: {text} != <absent>", f"{name} size: {size} != {size + 4}",
        f"{name} sha256: '{sha_a}' != '{sha_b}'"]
    (b / name).unlink()
    assert [d.line() for d in D.diff_outputs(a, b)] == [
        f"manifest.json output_neff: {text} != <absent>", f"{name} file: True != False"]
    assert [d.line() for d in D.diff_outputs(b, a)] == [
        f"manifest.json output_neff: <absent> != {text}", f"{name} file: False != True"]


HEAD = '{"format": "nrtrewrite-lowered", "pad": '  # (40 characters)


@pytest.mark.parametrize("tail,reason", [
    ('"' + "x" * (1 << 20), "Unterminated string starting at: line 1 column 41 (char 40)"),
    ("[" * (1 << 20), "nested too deeply"),
])
@pytest.mark.parametrize("big", [False, True])
def test_a_top_manifest_that_is_not_json_is_refused_in_one_form_whatever_its_size(
        pair, tail, reason, big):
    """CLI.md: a top-level manifest that is not JSON is refused, ``A: not an nrtrewrite output
    folder (its manifest.json is not JSON: REASON)``.  One over 1 MiB, known for ours by its
    head only, got ``A/manifest.json: invalid JSON: REASON`` instead."""
    a, b = pair
    text = HEAD + (tail if big else tail[:1000])
    assert (len(text.encode()) > 1 << 20) == big
    (b / "manifest.json").write_text(text)
    refusal = (f"nrtrewrite: error: {b}: not an nrtrewrite output folder (its manifest.json "
               f"is not JSON: {reason})")
    for x, y in ((a, b), (b, a), (b, b)):
        assert _one_line_error(CliRunner().invoke(main, ["diff", str(x), str(y)])) == refusal


@pytest.mark.parametrize("big", [False, True])
def test_a_top_manifest_with_a_number_json_cannot_carry_names_it_whatever_its_size(pair, big):
    """CLI.md: a manifest that is JSON but for a number that is not finite is an error naming
    the value by its key path. One over 1 MiB (known for ours by its head, then read whole)
    is named as one under it: ``B/manifest.json: field bad: invalid JSON: NaN is not a finite
    number``, on either side."""
    a, b = pair
    pad = "x" * ((1 << 20) if big else 10)
    text = HEAD + f'"{pad}", "bad": NaN}}'
    assert (len(text.encode()) > 1 << 20) == big
    (b / "manifest.json").write_text(text)
    refusal = (f"nrtrewrite: error: {b / 'manifest.json'}: field bad: invalid JSON: NaN is not "
               "a finite number")
    for x, y in ((a, b), (b, a)):
        assert _one_line_error(CliRunner().invoke(main, ["diff", str(x), str(y)])) == refusal


def _socket(path: Path) -> None:
    """A socket file at ``path`` (bound by a relative name: a path of more than 107 bytes
    does not fit a socket address)."""
    import socket
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(path.name)
    finally:
        os.chdir(here)


def test_a_fifo_and_a_socket_are_entries_of_other_kinds(pair):
    """An entry lower does not write that is a fifo in A and a socket in B: both were kind
    ``other``, so they compared equal; each kind of special file is its own (CLI.md)."""
    a, b = pair
    os.mkfifo(a / "p")
    os.mkfifo(a / "s")
    _socket(b / "s")
    _socket(b / "t")
    assert [d.line() for d in D.diff_outputs(a, b)] == [
        "p fifo: True != False", "s type: 'fifo' != 'socket'", "t socket: False != True"]


def test_character_and_block_devices_are_entries_of_other_kinds(pair):
    """The same for device files: a character device is no block device (both were
    ``other``)."""
    a, b = pair
    try:
        for side, first, second in ((a, stat.S_IFCHR, stat.S_IFBLK),
                                    (b, stat.S_IFBLK, stat.S_IFCHR)):
            os.mknod(side / "c", first | 0o600, os.makedev(1, 3))
            os.mknod(side / "k", second | 0o600, os.makedev(7, 0))
    except PermissionError:
        pytest.skip("device files cannot be made here (mknod needs CAP_MKNOD)")
    os.mknod(b / "z", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    assert [d.line() for d in D.diff_outputs(a, b)] == [
        "c type: 'character device' != 'block device'",
        "k type: 'block device' != 'character device'",
        "z character device: False != True"]


def _recipe_of(line: str) -> str:
    """The extraction a usage error's ``line`` gives, as printed."""
    return line.split("extract a golden archive first, ", 1)[1].split(", then diff")[0]


def _run_recipe(recipe: str, cwd: Path, tmp: Path) -> Path:
    """``recipe`` run by the shell as printed (stdin empty, ``mktemp`` under ``tmp``); the
    folder it extracted into (``$D``)."""
    import subprocess
    proc = subprocess.run(["bash", "-c", recipe + ' && printf %s "$D"'], cwd=cwd,
                          env={**os.environ, "TMPDIR": str(tmp)}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (recipe, proc.stderr)
    return Path(proc.stdout)


def test_the_extraction_recipe_run_again_keeps_nothing_of_an_older_extraction(tmp_path):
    """The fifty-fifth session's "Left": the usage error's recipe, ``mkdir -p DIR && tar xzf
    ARCHIVE -C DIR``, extracted over an older extraction in DIR, whose files the archive no
    longer has stayed (an ``extra.bin`` of an older golden: ``extra.bin file: True !=
    False`` against a fresh lowering).  Run as printed, after an older archive with one more
    file: the recipe extracts into a new, empty folder (``mktemp -d``, review V1), so the
    fresh lowering compares identical and the older extraction is left as it was."""
    import shlex
    import tarfile
    from test_diff import FIX, lower_to
    golden = FIX / "golden" / "ar2.tar.gz"
    older = tmp_path / "older.tar.gz"  # (the golden's files and one more)
    x = tmp_path / "x"
    x.mkdir()
    with tarfile.open(golden) as tar:
        tar.extractall(x, filter="data")
    (x / "extra.bin").write_bytes(b"old")
    with tarfile.open(older, "w:gz") as tar:
        tar.add(x, arcname=".")
    fresh = lower_to(FIX / "ar2.neff", tmp_path / "fresh", None)
    (tmp_path / "tmp dir").mkdir()  # (a space: $D quoted)
    folders = []
    for archive in (older, golden):
        res = CliRunner().invoke(main, ["diff", str(archive), str(fresh)],
                                 prog_name="nrtrewrite")
        recipe = _recipe_of(_one_line_error(res))
        assert recipe == (f'D=$(mktemp -d) && tar xzf {shlex.quote(str(archive))} '
                          '-C "$D"')
        folders.append(_run_recipe(recipe, tmp_path, tmp_path / "tmp dir"))
    assert folders[0] != folders[1] and (folders[0] / "extra.bin").read_bytes() == b"old"
    assert not (folders[1] / "extra.bin").exists()
    res = CliRunner().invoke(main, ["diff", str(folders[1]), str(fresh)])
    assert (res.exit_code, res.stdout) == (0, "identical\n")


def test_the_extraction_recipe_removes_nothing_and_reads_the_named_archive(
        tmp_path, monkeypatch):
    """Review V1: the recipe ``rm -rf DIR && mkdir DIR && tar xzf ARCHIVE -C DIR`` removed
    whatever stood for DIR (the archive's own folder: gone before tar read it; a path with a
    space unquoted: two paths; run as printed, a folder named ``DIR``), and for an archive
    named ``-`` said ``tar xzf - -C DIR``, which reads standard input.  Each archive below
    (in a folder whose name has a space, named relative to it and whole) gives a recipe
    that, run twice exactly as printed, extracts the archive into a new folder each time,
    removes nothing (a folder ``DIR`` and the archive stay) and compares identical with the
    golden's own extraction.  GNU tar reads ``-`` as standard input and ``HOST:FILE`` as a
    remote archive, so a relative such name is given as ``./NAME``.  (An archive named ``-``
    is named ``./-`` on the command line: ``-`` itself is refused in the one wording of
    every command, docs/CLI.md "Standard input and output"; review V5.)"""
    import shlex
    import tarfile
    from test_diff import FIX
    golden = FIX / "golden" / "ar2.tar.gz"
    ref = tmp_path / "ref"
    ref.mkdir()
    with tarfile.open(golden) as tar:
        tar.extractall(ref, filter="data")
    home = tmp_path / "g s"
    home.mkdir()
    (home / "DIR").mkdir()
    (home / "DIR" / "keep").write_bytes(b"mine")
    (tmp_path / "tmp").mkdir()
    monkeypatch.chdir(home)
    cases = [("./-", "./-"), ("a:b.tgz", "./a:b.tgz"), ("-lead.tar.gz", "./-lead.tar.gz"),
             ("ar2.tar.gz", "ar2.tar.gz"),
             (str(home / "ar2.tar.gz"), "'" + str(home / "ar2.tar.gz") + "'")]
    for name, word in cases:
        (home / name).write_bytes(golden.read_bytes())
        args = ["diff", "--", name, str(ref)]
        line = _one_line_error(CliRunner().invoke(main, args, prog_name="nrtrewrite"))
        recipe = _recipe_of(line)
        assert recipe == f'D=$(mktemp -d) && tar xzf {word} -C "$D"', line
        assert shlex.split(word) == [word.strip("'")]
        assert line.endswith(', then diff "$D" (docs/CLI.md "diff") '
                             "(see 'nrtrewrite diff --help')")
        runs = [_run_recipe(recipe, home, tmp_path / "tmp") for _ in range(2)]
        assert runs[0] != runs[1]
        for out in runs:
            assert out.parent == tmp_path / "tmp"
            res = CliRunner().invoke(main, ["diff", str(out), str(ref)])
            assert (res.exit_code, res.stdout) == (0, "identical\n"), (name, res.output)
        assert (home / name).read_bytes() == golden.read_bytes()
        assert (home / "DIR" / "keep").read_bytes() == b"mine"
