"""Every user-given name is escaped exactly once on its way out, its backslash doubled
(docs/CLI.md "Errors"): ``lit\\nb.neff`` (a backslash, then ``n``) and ``lit`` + a line break
+ ``b.neff`` printed the same line until 2026-12-05, because an escaped name kept its
backslash as it was.  The expected lines are written out by hand: a name's ``\\`` shows as
``\\\\``, its line break as ``\\n``; a reason's own notations (a ``repr`` quote, a JSON key
path, ``\\u escape``) keep their single backslash."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.errors import OutputError, ParseError, Where, escape_controls, escape_line
from test_atomic_output import FIX, ROOT, env
from test_error_length import _ar2_with

#: the two names: a real backslash then ``n``; a real line break
BACKSLASH, NEWLINE = "lit\\nb", "lit\nb"
#: how an error line shows each, by hand: ``lit\\nb`` and ``lit\nb``
SHOWN = {BACKSLASH: "lit" + "\\" + "\\" + "nb", NEWLINE: "lit" + "\\" + "nb"}
TOO_SHORT = "file too short: 100 bytes, the header alone needs 1024"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="nrtrewrite")


def test_escape_controls_doubles_a_backslash_and_escape_line_keeps_it():
    assert escape_controls("lit\\nb") == "lit\\\\nb"
    assert escape_controls("lit\nb") == "lit\\nb"
    assert escape_controls("a\\\x1b[2Jb") == "a\\\\\\x1b[2Jb"  # both: the backslash, ESC
    assert escape_controls("p\\") == "p\\\\"
    # the guard of a whole line: control characters only, and idempotent
    assert escape_line("a\\nb\x1bc") == "a\\nb\\x1bc"
    assert escape_line(escape_line("a\nb\\c")) == escape_line("a\nb\\c") == "a\\nb\\c"
    names = ["lit\\nb", "lit\nb", "a\\\\b", "a\\b", "a\\x1bb", "a\x1bb", "a\\u2028b",
             "a\u2028b", "", "\\"]
    assert len({escape_controls(n) for n in names}) == len(names)  # no two print alike


def test_a_location_escapes_each_name_once_and_a_rewrap_adds_nothing():
    assert str(Where(file=BACKSLASH, member="m\\x", field='["k\\r"]')) == \
        'lit\\\\nb: member m\\\\x, field ["k\\r"]'  # (the key path's own escape kept)
    assert str(Where(file=NEWLINE)) == "lit\\nb"
    inner = ParseError(TOO_SHORT, file="lit\\nb.neff")
    assert inner.line() == f"lit\\\\nb.neff: {TOO_SHORT}"
    # wrapped in a reason, filled in by an outer context: still one doubling
    outer = OutputError(f"cannot use it: {inner}", file="o\\ut")
    assert outer.line() == f"o\\\\ut: cannot use it: lit\\\\nb.neff: {TOO_SHORT}"
    assert inner.at(file="other", member="x\\y").line() == \
        f"lit\\\\nb.neff: member x\\\\y: {TOO_SHORT}"


def _lines(res) -> list[str]:
    return res.stderr.splitlines()


@pytest.mark.parametrize("command", ["inspect", "lower", "explain", "simulate"])
def test_two_model_names_give_two_error_lines(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    seen = []
    for name in (BACKSLASH, NEWLINE):
        (tmp_path / f"{name}.neff").write_bytes(b"x" * 100)
        args = [command, f"{name}.neff"] + (["-o", "out"] if command == "lower" else [])
        res = invoke(*args)
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite: error: {SHOWN[name]}.neff: {TOO_SHORT}"]
        seen.append(res.stderr)
    assert seen[0] != seen[1]


def test_the_json_error_document_keeps_the_two_names_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    errors = []
    for name in (BACKSLASH, NEWLINE):
        (tmp_path / f"{name}.neff").write_bytes(b"x" * 100)
        for command in ("inspect", "simulate"):
            res = invoke(command, "--json", f"{name}.neff")
            assert res.exit_code == 2
            doc = json.loads(res.stdout)  # still valid JSON
            assert doc["error"] == f"{SHOWN[name]}.neff: {TOO_SHORT}"
            assert "\n" not in doc["error"]
            errors.append(doc["error"])
    assert errors[0] != errors[2]


def test_lower_names_its_output_apart(tmp_path, monkeypatch):
    """The output's refusal, ``--force``'s advice and the summary's title."""
    monkeypatch.chdir(tmp_path)
    for name in (BACKSLASH, NEWLINE):
        (tmp_path / name).write_text("x")
        res = invoke("lower", FIX / "ar2.neff", "-o", name)
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite: error: {SHOWN[name]} exists and is not a folder"]
        (tmp_path / name).unlink()
        res = invoke("lower", FIX / "ar2.neff", "-o", name)
        assert res.exit_code == 0, res.output
        assert res.stdout.split("\n", 1)[0].strip() == f"{FIX / 'ar2.neff'} -> {SHOWN[name]}"
        res = invoke("lower", FIX / "ar2.neff", "-o", name)
        assert _lines(res) == [f"nrtrewrite: error: {SHOWN[name]} exists; pass --force to "
                               "replace it"]
        res = invoke("simulate", name)  # its report's title names the folder
        assert res.exit_code == 0, res.output
        assert res.stdout.split("\n", 1)[0].strip() == f"simulate {SHOWN[name]} (seed 0)"


def test_diff_names_two_folders_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in (BACKSLASH, NEWLINE):
        (tmp_path / name).mkdir()
        res = invoke("diff", name, name)
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite: error: {SHOWN[name]}: not an nrtrewrite output "
                               "folder (no manifest.json)"]
        res = invoke("diff", f"{name}-none", name)  # click's own check quotes with repr
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite diff: error: Invalid value for 'A': Directory "
                               f"'{SHOWN[name]}-none' does not exist. (see 'nrtrewrite diff "
                               "--help')"]


def test_diff_shows_an_entry_name_with_a_backslash_doubled(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert invoke("lower", "-q", FIX / "ar2.neff", "-o", a).exit_code == 0
    shutil.copytree(a, b)
    (b / "evil\\n[0] name: fake").write_text("x")  # a backslash, not a line break
    res = invoke("diff", a, b)
    assert res.exit_code == 1
    assert res.stdout.splitlines() == ["evil\\\\n[0] name: fake file: False != True",
                                       "1 difference(s)"]


def test_assemble_and_golden_name_two_paths_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in (BACKSLASH, NEWLINE):
        (tmp_path / f"{name}.yaml").write_text("a: [\n")
        res = invoke("assemble", f"{name}.yaml", "-o", "x.neff")
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite: error: {SHOWN[name]}.yaml: invalid spec: "
                               "expected the node content, but found '<stream end>' "
                               "(line 2 column 1)"]
        res = invoke("assemble", FIX / "ar2.yaml", "-o", f"{name}.neff")
        assert res.exit_code == 0
        assert res.stdout.startswith(f"{SHOWN[name]}.neff: ")
        (tmp_path / f"{name}.bad").write_bytes(b"x" * 100)
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite.golden", f"{name}.bad",
                               f"{name}.tgz"], capture_output=True, text=True,
                              env=dict(env(), PYTHONPATH=str(ROOT)), timeout=120)
        assert proc.returncode == 2
        assert proc.stderr == f"nrtrewrite.golden: error: {SHOWN[name]}.bad: {TOO_SHORT}\n"
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite.golden", f"{name}.neff",
                               f"{name}.neff"], capture_output=True, text=True,
                              env=dict(env(), PYTHONPATH=str(ROOT)), timeout=120)
        assert proc.returncode == 2
        assert proc.stderr == (f"nrtrewrite.golden: error: {SHOWN[name]}.neff: the output is "
                               f"the model {SHOWN[name]}.neff itself; nrtrewrite never replaces "
                               "its input: choose another output path\n")


def test_a_warning_and_a_table_name_the_model_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in (BACKSLASH, NEWLINE):
        shutil.copy(FIX / "ar2.neff", tmp_path / f"{name}.neff")
        res = invoke("inspect", "--no-verify-hash", f"{name}.neff")
        assert res.exit_code == 0, res.output
        assert res.stdout.startswith(f"{SHOWN[name]}.neff  NEFF-like")
        res = invoke("lower", "-q", "--no-verify-hash", f"{name}.neff", "-o", "o")
        assert res.exit_code == 0, res.output
        assert _lines(res) == [f"nrtrewrite: warning: {SHOWN[name]}.neff: header hash not "
                               "verified (--no-verify-hash)"]
        shutil.rmtree(tmp_path / "o")


@pytest.mark.parametrize("member, shown", [
    ("a\\b.txt", "a\\\\b.txt"),  # a backslash: doubled
    ("a\nb.txt", "a\\nb.txt"),  # a line break: escaped
    ("a\\\nb.txt", "a\\\\\\nb.txt"),  # both
    ("a\\\\nb.txt", "a\\\\\\\\nb.txt"),  # two backslashes, then n
])
def test_a_tar_member_name_with_a_backslash_is_shown_doubled(tmp_path, member, shown):
    path = tmp_path / "m.neff"
    path.write_bytes(_ar2_with({member: b"x"}))
    for command in (["inspect", path], ["lower", path, "-o", tmp_path / "o"],
                    ["simulate", path]):
        res = invoke(*command)
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite: error: {path}: member {shown}: member name has a "
                               "backslash or control character"]


def test_dump_schedule_and_simulate_name_a_folder_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in (BACKSLASH, NEWLINE):
        shutil.copy(FIX / "ar2.neff", tmp_path / f"{name}.neff")
        res = invoke("schedule", f"{name}.neff", "--rank", "0", "--trigger", "9")
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite: error: {SHOWN[name]}.neff: no trigger 9 (the "
                               "model has 1: 0..0)"]
        assert invoke("lower", "-q", f"{name}.neff", "-o", name).exit_code == 0
        res = invoke("dump", name, "--sem", "--rank", "5")
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite: error: {SHOWN[name]}: no folder for rank 5"]
        shutil.rmtree(tmp_path / name / "rank-0001")
        res = invoke("dump", name, "--sem", "--limit", "1")
        assert res.exit_code == 0
        assert _lines(res) == [f"nrtrewrite: warning: {SHOWN[name]}/manifest.json lists 1 rank "
                               "(1) with no rank folder in the output; dumping the 1 rank "
                               "folder there"]
        res = invoke("simulate", name)
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite: error: {SHOWN[name]}: rank-0001 is missing (rank 1 "
                               "of manifest.json ranks)"]


def test_a_topology_named_by_its_file_is_shown_apart(tmp_path, monkeypatch):
    """A topology file without ``name`` is named by its file's stem (docs/TOPOLOGY.md), a
    name that reached the refusals of a rank and of an engine raw."""
    monkeypatch.chdir(tmp_path)
    doc = json.loads((FIX / "topologies" / "trn2-2node.json").read_text())
    del doc["name"]
    for name in (BACKSLASH, NEWLINE):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        res = invoke("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "2",
                     "--rank", "300", "--topology", f"{name}.json")
        assert res.exit_code == 2
        # (named by the file and its name, a preset never: docs/CLI.md explain's head line)
        topo = f"topology file {SHOWN[name]}.json, named {SHOWN[name]}"
        assert _lines(res)[-1].endswith(f"rank 300 is not in {topo} (ranks 0..127)"), res.stderr
        res = invoke("lower", FIX / "ar2.neff", "--topology", f"{name}.json", "--algo",
                     "latency_opt_mesh", "-o", tmp_path / "o")
        assert res.exit_code == 2
        assert f"{topo} has none" in res.stderr, res.stderr


def test_simulate_names_the_output_of_a_wrong_model_and_a_stray_rank_folder_apart(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in (BACKSLASH, NEWLINE):
        assert invoke("lower", "-q", FIX / "ar2.neff", "-o", name).exit_code == 0
        res = invoke("simulate", name, "--model", FIX / "c7c8.neff")
        assert res.exit_code == 2
        assert f" the input {SHOWN[name]}/manifest.json records " in res.stderr
        (tmp_path / name / f"rank-{name}").mkdir()
        res = invoke("simulate", name)
        assert res.exit_code == 2
        assert f"rank folders differ from manifest.json ranks (rank-{SHOWN[name]})" in \
            res.stderr, res.stderr


def test_assemble_names_a_subgraph_and_its_own_spec_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in (BACKSLASH, NEWLINE):
        spec = tmp_path / "s.json"
        spec.write_text(json.dumps({"subgraphs": [{"name": name, "vars": [],
                                                   "replica_groups": [[0, 1]],
                                                   "engines": {"sp": ["nop"]}}]}))
        res = invoke("assemble", spec, "-o", tmp_path / "s.neff")
        assert res.exit_code == 2
        assert _lines(res)[-1].endswith(f"field subgraphs[0].name: member {SHOWN[name]}/def.json:"
                                        " member name has a backslash or control character"), \
            res.stderr
        shutil.copy(FIX / "ar2.yaml", tmp_path / f"{name}.yaml")
        res = invoke("assemble", f"{name}.yaml", "-o", f"{name}.yaml")
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite: error: {SHOWN[name]}.yaml: the output is the spec "
                               f"{SHOWN[name]}.yaml itself; nrtrewrite never replaces its "
                               "input: choose another output path"]


def test_lower_names_the_file_an_os_error_was_about_apart(tmp_path, monkeypatch):
    """An OS error while writing names its file (a temporary sibling's path), escaped once."""
    import errno

    import nrtrewrite.bundle as bundle_mod
    for name in (BACKSLASH, NEWLINE):
        def refuse(*_a, name=name, **_k):
            raise OSError(errno.EACCES, "Permission denied", str(tmp_path / f".{name}.tmp-1"))
        monkeypatch.setattr(bundle_mod, "_write_output", refuse)
        res = invoke("lower", FIX / "ar2.neff", "-o", tmp_path / "o")
        assert res.exit_code == 2
        assert _lines(res)[-1].endswith(f"cannot write the output: Permission denied "
                                        f"({tmp_path}/.{SHOWN[name]}.tmp-1)"), res.stderr


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_an_error_line_escapes_what_stderr_cannot_hold(tmp_path, encoding):
    """docs/CLI.md: text the stream's encoding cannot hold is escaped as Python escapes it
    on stderr (``\\u6743`` for 权, U+6743). click wrote an ASCII stderr's error line in
    UTF-8 (bytes e6 9d 83); a file named with a real backslash and ``u6743`` stays apart,
    its backslash doubled."""
    for name, shown in (("权.neff", b"\\u6743.neff"), ("\\u6743.neff", b"\\\\u6743.neff")):
        (tmp_path / name).write_bytes(b"x")
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "inspect", name],
                              cwd=tmp_path, capture_output=True,
                              env=env(PYTHONIOENCODING=encoding))
        assert proc.returncode == 2
        assert proc.stderr == (b"nrtrewrite: error: " + shown + b": file too short: 1 bytes, "
                               b"the header alone needs 1024\n")


def test_explains_nodes_twice_refusal_names_the_topology_apart():
    """``--nodes`` with a preset that gives ``nodes`` itself: the ``--topology`` argument,
    a user's text, is escaped once (an ESC, and the typed ``\\x1b``, printed alike)."""
    lines = []
    for topology, shown in (("trn2:nodes=2\x1b", "trn2:nodes=2\\x1b"),
                            ("trn2:nodes=2\\x1b", "trn2:nodes=2\\\\x1b")):
        res = invoke("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "2",
                     "--nodes", "2", "--topology", topology)
        assert res.exit_code == 2
        assert f"--nodes and --topology {shown} both give the node count; " in res.stderr
        lines.append(res.stderr)
    assert lines[0] != lines[1]
