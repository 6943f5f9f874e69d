"""benchmarks/same_bytes.sh: a SRC that is not an nrtrewrite source tree, or whose
nrtrewrite is not the one Python imports there, is refused in one line, status 2, before
anything is written.  Before, Python imported the installed nrtrewrite (this checkout, in
editable mode) instead, and the comparison said identical."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "same_bytes.sh"


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHON": sys.executable, **env},
                          timeout=60)


def test_a_src_without_nrtrewrite_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    res = run(tmp_path, "empty", "out")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == ("same_bytes.sh: error: empty: no nrtrewrite/__init__.py: not an "
                          "nrtrewrite source tree\n")
    assert sorted(os.listdir(tmp_path)) == ["empty"]


def test_a_missing_src_is_refused(tmp_path):
    res = run(tmp_path, "nosuch", "out")
    assert res.returncode == 2
    assert res.stderr == "same_bytes.sh: error: nosuch: no such folder\n"
    assert os.listdir(tmp_path) == []


def test_a_src_whose_nrtrewrite_python_does_not_import_is_refused(tmp_path):
    """A $PYTHON that ignores PYTHONPATH (-E) imports the installed nrtrewrite, not SRC's."""
    (tmp_path / "src" / "nrtrewrite").mkdir(parents=True)
    (tmp_path / "src" / "nrtrewrite" / "__init__.py").write_text("")
    py = tmp_path / "py"
    py.write_text(f'#!/bin/sh\nexec "{sys.executable}" -E "$@"\n')
    py.chmod(0o755)
    res = run(tmp_path, "src", "out", PYTHON=str(py))
    # what -E imports: the installed nrtrewrite, which is not this test's when PYTHONPATH
    # points elsewhere (a second clone run with this checkout's interpreter); or none, in an
    # environment nrtrewrite is not installed in (the suite run with PYTHONPATH alone, as in
    # a fresh venv at the dependency floors)
    empty = tmp_path / "empty"
    empty.mkdir()
    installed = subprocess.run(
        [sys.executable, "-E", "-c", "import os, nrtrewrite; "
         "print(os.path.realpath(os.path.dirname(nrtrewrite.__file__)))"],
        capture_output=True, text=True, cwd=empty)
    empty.rmdir()
    assert res.returncode == 2
    if installed.returncode == 0:
        assert res.stderr == (f"same_bytes.sh: error: src: {py} imports nrtrewrite from "
                              f"{installed.stdout.strip()}, not from this tree\n")
    else:
        assert res.stderr == (f"same_bytes.sh: error: src: its nrtrewrite cannot be imported "
                              f"with {py}: ModuleNotFoundError: No module named 'nrtrewrite'\n")
    assert sorted(os.listdir(tmp_path)) == ["py", "src"]


def test_a_src_whose_nrtrewrite_cannot_be_imported_is_refused(tmp_path):
    (tmp_path / "src" / "nrtrewrite").mkdir(parents=True)
    (tmp_path / "src" / "nrtrewrite" / "__init__.py").write_text("raise ImportError('half')\n")
    res = run(tmp_path, "src", "out")
    assert res.returncode == 2
    assert res.stderr == (f"same_bytes.sh: error: src: its nrtrewrite cannot be imported with "
                          f"{sys.executable}: ImportError: half\n")
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_an_out_whose_parent_is_missing_is_refused(tmp_path):
    res = run(tmp_path, str(ROOT), "missing/out")
    assert res.returncode == 2
    assert res.stderr == "same_bytes.sh: error: missing/out: its parent folder does not exist\n"
    assert os.listdir(tmp_path) == []


def test_no_temporary_folder_is_one_line(tmp_path):
    """Left by session 48: where ``mktemp -d`` cannot make its folder (TMPDIR not there) the
    script ended with mktemp's own line, status 1; it is the script's one line, status 2,
    naming the folder (in mktemp's reason), as the Python scripts refuse, nothing written."""
    gone = tmp_path / "gone"
    res = run(tmp_path, str(ROOT), "out", TMPDIR=str(gone))
    assert res.returncode == 2 and res.stdout == ""
    head = "same_bytes.sh: error: cannot make a temporary folder: "
    assert res.stderr.startswith(head) and res.stderr.count("\n") == 1, res.stderr
    assert f"{gone}/" in res.stderr
    assert os.listdir(tmp_path) == []
