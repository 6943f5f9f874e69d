"""The mistakes a new user makes first, found by walking README.md and docs/CLI.md in a fresh
clone (2026-12-01): each is one line naming where and why, worded as the other commands word
it, and never a hint that cannot help (docs/CLI.md "Errors")."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from test_atomic_output import FIX

KICKS_NOTE = ("no collective triggers: {what}; it holds 9 TOPSP_KICK (0xA2) words: it looks "
              "already lowered (give the original model)")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="nrtrewrite")


def error_line(res, code: int = 2) -> str:
    assert res.exit_code == code, (res.exit_code, res.output)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


@pytest.fixture(scope="module")
def lowered(tmp_path_factory) -> Path:
    """mix8 lowered: its rewritten NEFF holds the 9 kick words in place of the 9 triggers."""
    out = tmp_path_factory.mktemp("mix8") / "mix8.lowered"
    res = invoke("lower", "-q", FIX / "mix8.neff", "-o", out)
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("command, what", [
    (["explain"], "nothing to explain"),
    (["explain", "--json"], "nothing to explain"),
    (["schedule", "--rank", "0"], "no legs to show"),
    # the JSON path returned before its warnings until 2026-12-04
    (["schedule", "--rank", "0", "--json"], "no legs to show"),  # "no steps" until 2026-12-06
    (["simulate"], "nothing to simulate, no collective is checked"),
])
def test_an_already_lowered_neff_is_named_as_lower_names_it(lowered, command, what):
    neff = lowered / "mix8.neff"
    res = invoke(command[0], neff, *command[1:])
    assert res.exit_code == 0, res.output
    assert res.stderr == f"nrtrewrite: warning: {neff}: {KICKS_NOTE.format(what=what)}\n"


def test_a_model_without_triggers_warns_where_the_output_does_not_say_so(tmp_path):
    """A model that never had triggers (no kick words): ``explain`` and ``schedule`` say so
    on stdout and warn nothing; ``simulate`` (0/0 triggers match) and ``lower`` warn."""
    from test_schedule_cli import _assemble
    empty = _assemble(tmp_path, "empty", "[[0, 1]]", "[nop]")
    for cmd in (["explain"], ["schedule", "--rank", "0"]):
        res = invoke(cmd[0], empty, *cmd[1:])
        assert res.exit_code == 0 and res.stderr == "", res.output
    res = invoke("simulate", empty)
    assert res.exit_code == 0 and res.stderr == (
        f"nrtrewrite: warning: {empty}: no collective triggers: nothing to simulate, no "
        "collective is checked\n")
    res = invoke("lower", "-q", empty, "-o", tmp_path / "out")
    assert res.exit_code == 0 and res.stderr == (
        f"nrtrewrite: warning: {empty}: no collective triggers: nothing to lower, every rank "
        "file is empty\n")


def test_explain_warns_when_the_hash_is_not_verified():
    res = invoke("explain", FIX / "ar2.neff", "--no-verify-hash")
    assert res.exit_code == 0, res.output
    assert res.stderr == (f"nrtrewrite: warning: {FIX / 'ar2.neff'}: header hash not verified "
                          "(--no-verify-hash)\n")
    assert invoke("explain", FIX / "ar2.neff").stderr == ""


def test_explain_names_the_model_and_the_option_as_lower_does():
    line = error_line(invoke("explain", FIX / "mix8.neff", "--algo", "rign"))
    assert line.startswith(f"nrtrewrite: error: {FIX / 'mix8.neff'}: field --algo: --algo "
                           "'rign': unknown algorithm 'rign' (did you mean 'ring'? known: ")
    assert error_line(invoke("lower", FIX / "mix8.neff", "--algo", "rign")) == line
    assert error_line(invoke("explain", "--op", "allreduce", "--bytes", "64MiB", "--ranks", "64",
                             "--rank", "64")) == (
        "nrtrewrite: error: field --rank: rank 64 is not in topology trn2 (ranks 0..63)")
    assert error_line(invoke("explain", "--op", "allreduc", "--bytes", "64MiB", "--ranks",
                             "64")) == (
        "nrtrewrite: error: field --op: unknown collective 'allreduc' (did you mean "
        "'allreduce'? allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce)")


@pytest.mark.parametrize("op", ["send", "recv", "permute", "permute_implicit",
                                "permute-reduce-implicit"])
def test_explain_op_and_algo_take_the_six_collectives_only(op):
    """Bug: ``--op`` (and an ``--algo`` clause's collective) took every enc_op_type name,
    so ``explain --op send`` explained a SEND "cannot be lowered: ... point-to-point and
    permute ops have their own composers" (this tool has none, and no NEFF-like trigger is
    one: ctype ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER), and ``--algo 'send:ring'`` was a
    clause for it.  docs/CLI.md and docs/SELECTION.md §8 name the six: allreduce,
    allgather, reduce_scatter, alltoall, broadcast, reduce.  (docs/CLI.md "Errors": "recv"
    is as close to "reduce" as difflib's cutoff, 2 x 3 matching characters of 4 + 6, 0.6,
    so it is suggested; the others are close to none.)"""
    hint = "did you mean 'reduce'? " if op == "recv" else ""
    assert error_line(invoke("explain", "--op", op, "--bytes", "64MiB", "--ranks", "2")) == (
        f"nrtrewrite: error: field --op: unknown collective {op!r} ({hint}allreduce, allgather, "
        "reduce_scatter, alltoall, broadcast, reduce)")
    assert error_line(invoke("explain", "--op", "allreduce", "--bytes", "64MiB", "--ranks",
                             "2", "--algo", f"{op}:ring")) == (
        f"nrtrewrite: error: field --algo: --algo '{op}:ring': {op!r} is neither a collective "
        f"nor a HIER leg ({hint}collectives: allreduce, allgather, reduce_scatter, alltoall, "
        "broadcast, reduce; HIER legs: intra_allg, intra_redsct, inter_allr, inter_allg, "
        "inter_redsct)")


def test_simulate_says_what_a_folder_is_not(lowered, tmp_path):
    rank = lowered / "rank-0000"
    assert error_line(invoke("simulate", rank)) == (
        f"nrtrewrite: error: {rank}: not an nrtrewrite output folder (a rank folder; give the "
        "whole output folder, its parent)")
    assert error_line(invoke("simulate", tmp_path)) == (
        f"nrtrewrite: error: {tmp_path}: not an nrtrewrite output folder (no manifest.json)")


def test_dump_and_assemble_name_what_they_refuse(lowered, tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert error_line(invoke("dump", "--cce", other)) == (
        f"nrtrewrite: error: {other}: not a cce.bin file (what --cce dumps, told by the "
        "file's name)")
    assert error_line(invoke("dump", "--fifo", lowered / "rank-0000" / "cce.bin")) == (
        f"nrtrewrite: error: {lowered / 'rank-0000' / 'cce.bin'}: not a net_ops.bin / "
        "net_src.bin / net_dest.bin file (what --fifo dumps, told by the file's name)")
    assert error_line(invoke("assemble", tmp_path, "-o", tmp_path / "m.neff")) == (
        f"nrtrewrite: error: {tmp_path}: cannot read: a directory")


def test_schedule_of_a_trigger_in_a_model_of_none_says_none(lowered):
    """``--trigger 0`` of a model without triggers: "the model has 0", not "0: 0..-1"."""
    neff = lowered / "mix8.neff"
    res = invoke("schedule", neff, "--rank", "0", "--trigger", "0")
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-1] == (f"nrtrewrite: error: {neff}: no trigger 0 (the model "
                                           "has 0)")


# -- a path argument that exists but cannot be looked at (review 59k) ------------------------

def _path_commands(model: str, out: str, lowered: Path) -> list[list]:
    """Every command's path arguments given ``model`` (a NEFF to read) or ``out`` (an output
    folder to read), the other arguments sound."""
    return [["lower", model, "-o", "never"], ["simulate", model], ["simulate", out],
            ["simulate", lowered, "--model", model], ["explain", model],
            ["explain", "--json", model], ["schedule", model, "--rank", "0"],
            ["dump", out], ["diff", out, lowered], ["diff", lowered, out],
            ["diff", "--json", lowered, out], ["inspect", model]]


def _os_line(res, path: str, reason: str, diff_form: bool) -> None:
    """One error line naming ``path`` with the OS's ``reason`` (docs/CLI.md "Errors"), in
    diff's form ``cannot read (REASON)`` for diff's A and B, not click's ``does not exist``."""
    line = error_line(res)
    why = f"cannot read ({reason})" if diff_form else f"cannot read: {reason}"
    assert line == f"nrtrewrite: error: {path}: {why}", line


def test_a_name_too_long_is_said_so_not_called_missing(lowered):
    """Before: ``Invalid value for 'MODEL': File 'aaa...' does not exist.`` for every command
    but inspect.  A component of 300 characters is past NAME_MAX (255): ENAMETOOLONG."""
    import errno
    import os
    reason = os.strerror(errno.ENAMETOOLONG)  # "File name too long"
    long = "a" * 300
    for cmd in _path_commands(long + ".neff", long, lowered):
        res = invoke(*cmd)
        path = long + ".neff" if cmd[0] not in ("dump", "diff") and long + ".neff" in cmd \
            else long
        _os_line(res, path, reason, cmd[0] == "diff")
        if "--json" in cmd:  # the document's error is the line without its prefix
            import json
            why = f"cannot read ({reason})" if cmd[0] == "diff" else f"cannot read: {reason}"
            assert json.loads(res.stdout)["error"] == f"{path}: {why}"


def test_a_path_past_path_max_is_said_so_not_called_missing(lowered):
    """A path of 5,000 characters in short components (past PATH_MAX, 4096): ENAMETOOLONG;
    the line is cut (docs/CLI.md "Errors") but keeps its reason whole."""
    import errno
    import os
    reason = os.strerror(errno.ENAMETOOLONG)
    long = "/".join(["d" * 9] * 500)  # 4,999 characters
    for cmd in _path_commands(long, long, lowered):
        line = error_line(invoke(*cmd))
        why = f"cannot read ({reason})" if cmd[0] == "diff" else f"cannot read: {reason}"
        assert line.startswith("nrtrewrite: error: " + "d" * 9 + "/"), line[:100]
        assert line.endswith(f": {why}") and "does not exist" not in line, line[-200:]
        assert "(5000 characters in all)" in line, line  # the path with its ':', cut once


def test_a_path_in_a_folder_not_searchable_says_permission_denied(lowered, monkeypatch):
    """EACCES from stat (a folder on the way without x permission for the user; root is never
    denied, so stat is made to refuse): ``locked/m.neff: cannot read: Permission denied``,
    as ``inspect`` says it; until 2026-12-07 ``File 'locked/m.neff' does not exist.``."""
    import errno
    import os
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if "locked" in os.fspath(path):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    for cmd in _path_commands("locked/m.neff", "locked/o", lowered)[:-1]:  # (inspect opens)
        res = invoke(*cmd)
        path = "locked/o" if cmd[0] in ("dump", "diff") or "locked/o" in cmd \
            else "locked/m.neff"
        _os_line(res, path, "Permission denied", cmd[0] == "diff")


def test_a_missing_path_is_still_click_s_does_not_exist(lowered):
    """ENOENT alone keeps click's usage line."""
    res = invoke("lower", "nope.neff", "-o", "never")
    assert res.exit_code == 2
    assert "Invalid value for 'MODEL': File 'nope.neff' does not exist." in res.stderr


# -- make setup with a Python too old (review 59k) ---------------------------------------------

def _old_python(tmp_path: Path, version: tuple) -> Path:
    """A ``python3`` that says it is ``version`` (this Python, its ``sys.version_info``
    replaced before the ``-c`` code runs: the Makefile's check is given as ``-c``)."""
    import stat
    import sys
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\n"
                    f"exec {sys.executable} -c 'import sys; sys.version_info = "
                    f"{tuple(version)}; code = sys.argv[2]; sys.argv = sys.argv[:1]; "
                    "exec(code)' \"$@\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return fake


def _make(*args):
    import shutil
    import subprocess
    if shutil.which("make") is None:
        pytest.skip("no make")
    root = Path(__file__).resolve().parents[1]
    return subprocess.run(["make", "-s", "-C", str(root), *args], capture_output=True,
                          text=True, timeout=120)


def test_make_setup_says_which_python_it_found_and_which_it_needs(tmp_path):
    """Before: Debian 12's python3 (3.11.2) made the venv, then pip refused the package
    (``requires a different Python``).  The needed version is pyproject's requires-python."""
    import re
    import sys
    root = Path(__file__).resolve().parents[1]
    need = re.search(r'^requires-python = ">=([0-9.]+)"', (root / "pyproject.toml").read_text(),
                     re.M).group(1)
    assert need == "3.11.4"
    fake = _old_python(tmp_path, (3, 11, 2))
    venv = tmp_path / "venv"
    res = _make("setup", f"PYTHON={fake}", f"VENV={venv}")
    assert res.returncode != 0
    assert res.stderr.splitlines()[0] == (
        f"make setup: {fake} is Python 3.11.2; nrtrewrite needs Python 3.11.4 or later: "
        "make setup PYTHON=/path/to/python3.12 (any Python >= 3.11.4)")
    assert not venv.exists()  # nothing made
    # the check alone: this Python (>= 3.11.4, as it runs the suite) and one saying 3.11.4
    assert _make("python-check", f"PYTHON={sys.executable}").returncode == 0
    exact = _old_python(tmp_path, (3, 11, 4))
    assert _make("python-check", f"PYTHON={exact}").returncode == 0


def test_a_model_over_the_file_limit_names_the_limit(tmp_path):
    """Review 59k: ``huge.neff: file of N bytes exceeds the limit of M bytes`` lacked the
    limit's name that every other limit line ends with (docs/CLI.md "Errors",
    docs/RELIABILITY.md's table: ``MAX_FILE_BYTES`` = 5 GiB).  A sparse file, no disk used."""
    huge = tmp_path / "huge.neff"
    size = 100 << 30
    with open(huge, "wb") as fh:
        fh.truncate(size)
    limit = 5 * 1024 ** 3  # 5 GiB: 5368709120
    want = (f"nrtrewrite: error: {huge}: file of {size} bytes exceeds the limit of {limit} "
            "bytes (MAX_FILE_BYTES)")
    try:
        for cmd in (["inspect", huge], ["lower", huge, "-o", tmp_path / "o"],
                    ["explain", huge], ["schedule", huge, "--rank", "0"],
                    ["simulate", huge]):
            assert error_line(invoke(*cmd)) == want, cmd
    finally:
        huge.unlink()
