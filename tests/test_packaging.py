"""Packaging: one version, the license text shipped, an sdist that holds what the tests
read (an exploratory tester of builds and installs found each of these missing)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

import nrtrewrite
from nrtrewrite.cli import main

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_has_one_source():
    """pyproject's version is nrtrewrite.__version__ (it was written in both, so a bump of
    pyproject's alone left --version and every manifest's tool_version behind)."""
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "nrtrewrite.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", nrtrewrite.__version__)
    res = CliRunner().invoke(main, ["--version"])
    assert res.exit_code == 0 and res.output == f"nrtrewrite, version {nrtrewrite.__version__}\n"


def test_the_license_text_is_shipped():
    """pyproject says Apache-2.0; the license asks its text to travel with the code."""
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:5] == ["Apache", "License", "Version", "2.0,", "January"]
    assert "END OF TERMS AND CONDITIONS" in text


def _manifest_in() -> list[list[str]]:
    lines = (ROOT / "MANIFEST.in").read_text().splitlines()
    return [ln.split() for ln in lines if ln.strip() and not ln.startswith("#")]


def test_the_sdist_holds_every_tracked_file_the_tests_read():
    """The sdist held the package and tests/test_*.py alone (setuptools' default): its tests
    failed to collect without conftest.py, fixtures/, docs/, ... .  MANIFEST.in grafts every
    top-level folder of the project and includes every top-level file."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist): its own files are what it holds")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    rules = _manifest_in()
    grafted = {r[1] for r in rules if r[0] == "graft"}
    included = {n for r in rules if r[0] == "include" for n in r[1:]}
    pruned = {r[1] for r in rules if r[0] == "prune"}
    left = []
    for path in tracked:
        top = path.split("/", 1)[0]
        if top in ("nrtrewrite", ".gitignore"):  # the package (setuptools), git's own
            continue
        if "/" in path and top in grafted:
            assert not any(path.startswith(p + "/") for p in pruned), path
            continue
        if path not in included:
            left.append(path)
    assert left == []


#: files in the grafted folders that .gitignore ignores, which the sdist must not ship: a
#: lowered output beside a fixture (README's quick start leaves fixtures/mix8.lowered/), in
#: a deeper folder, caches, a build leftover
IGNORED = ["fixtures/mix8.lowered/manifest.json", "fixtures/mix8.lowered/rank-0000/cce.bin",
           "tests/data/x.lowered/manifest.json", "tests/.hypothesis/examples/a",
           "fuzz/.hypothesis/b", "tests/.pytest_cache/v/c", "fixtures/__pycache__/d.pyc",
           "benchmarks/__pycache__/e.pyc", "fixtures/x.egg-info/PKG-INFO"]
#: files beside them it ships (a name merely containing ".lowered" too)
SHIPPED = ["fixtures/ar2.yaml", "fixtures/ar2.neff", "fixtures/golden/ar2.tar.gz",
           "fixtures/bad/x.yaml", "fixtures/my.lowered.yaml", "tests/test_x.py",
           "docs/CLI.md", "fuzz/fuzz_reader.py"]


def test_an_ignored_output_beside_a_fixture_is_kept_out_of_the_sdist(tmp_path, monkeypatch):
    """Bug (review 51d): ``graft fixtures`` shipped everything under fixtures/, so an sdist
    built after README's quick start held the untracked fixtures/mix8.lowered/ output (and
    ``global-exclude .hypothesis`` matched no file inside tests/.hypothesis/).  MANIFEST.in
    run through setuptools' own file list in a tree holding such files: what .gitignore
    ignores (checked with git, where there is one) is left out, the rest shipped."""
    from setuptools.command.egg_info import FileList

    if shutil.which("git") is not None and (ROOT / ".git").exists():
        for path, ignored in [*((p, True) for p in IGNORED), *((p, False) for p in SHIPPED)]:
            proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
            assert proc.returncode == (0 if ignored else 1), (path, ignored)
    for path in IGNORED + SHIPPED:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    files = FileList()
    files.findall()
    for rule in _manifest_in():
        files.process_template_line(" ".join(rule))
    shipped = set(files.files)
    assert set(SHIPPED) <= shipped
    assert sorted(set(IGNORED) & shipped) == []
