"""The golden set agrees everywhere (review 51d): every fixture spec ``fixtures/<name>.yaml``
has its NEFF and its golden ``fixtures/golden/<name>.tar.gz``, every golden its fixture,
``make golden`` writes exactly those archives with the ranks each keeps, and the golden
test compares every one.  Until 2026-12-06 the set was written out in the Makefile,
tests/test_lower.py (with a second copy of the ranks), tests/test_golden_module.py and
tests/test_simulate.py, and nothing checked that they agreed: a new fixture got no golden
and no test, and a name added to the Makefile alone got an archive no test read."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import GOLDEN

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
HOWTO = 'README.md "Adding a fixture and its golden"'


#: the suffix each kind of file carries after its fixture's name
SUFFIXES = {"*.yaml": ".yaml", "*.neff": ".neff", "golden/*.tar.gz": ".tar.gz"}


def _stems(pattern: str, folder: Path = FIX) -> set[str]:
    """The fixture names of ``folder``'s files matching ``pattern``: each file's name less
    its suffix, as the Makefile's ``basename`` and conftest's ``Path.stem`` cut a spec's
    name (``v1.2.yaml`` is fixture ``v1.2``, its golden ``v1.2.tar.gz``; until 2026-12-06
    the name was cut at its first dot, ``v1``)."""
    return {p.name.removesuffix(SUFFIXES[pattern]) for p in folder.glob(pattern)}


def test_a_dotted_fixture_name_is_one_name_everywhere(tmp_path):
    """Bug (review 51r): ``v1.2.yaml`` was fixture ``v1`` here and ``v1.2`` in conftest and
    the Makefile, and three guard tests failed with bare asserts naming nothing."""
    (tmp_path / "golden").mkdir()
    for name in ("v1.2.yaml", "v1.2.neff", "golden/v1.2.tar.gz", "ar2.yaml"):
        (tmp_path / name).touch()
    assert _stems("*.yaml", tmp_path) == {p.stem for p in tmp_path.glob("*.yaml")} == \
        {"v1.2", "ar2"}
    assert _stems("*.neff", tmp_path) == _stems("golden/*.tar.gz", tmp_path) == {"v1.2"}


def test_every_fixture_has_its_golden_and_every_golden_its_fixture():
    specs, archives, neffs = _stems("*.yaml"), _stems("golden/*.tar.gz"), _stems("*.neff")
    assert set(GOLDEN) == specs, (f"tests/conftest.py's golden set {sorted(GOLDEN)} is not "
                                  f"the fixture specs fixtures/*.yaml {sorted(specs)}")
    no_golden = sorted(specs - archives)
    assert not no_golden, (f"fixtures {no_golden} have no golden: make fixtures && make golden "
                           f"GOLDEN_FIXTURES={no_golden[0]}, then commit it ({HOWTO})")
    no_spec = sorted(archives - specs)
    assert not no_spec, f"fixtures/golden/ holds {no_spec} with no fixtures/<name>.yaml"
    no_neff = sorted(specs - neffs)
    assert not no_neff, f"fixtures {no_neff} have no .neff: make fixtures ({HOWTO})"
    other = sorted(p.name for p in FIX.glob("golden/*") if not p.name.endswith(".tar.gz"))
    assert not other, f"fixtures/golden/ holds {other}, not <name>.tar.gz archives"


def _make_golden_commands(*args: str, **env: str) -> list[list[str]]:
    """The ``python -m nrtrewrite.golden`` commands ``make golden`` runs (``make -n``: none
    run), each as its arguments after the module; ``args`` on make's command line, ``env``
    in its environment (the caller's GOLDEN_FIXTURES and GOLDEN_FLAGS left out)."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    environ = {k: v for k, v in os.environ.items()
               if k not in ("GOLDEN_FIXTURES", "GOLDEN_FLAGS", "MAKEFLAGS")}
    proc = subprocess.run(["make", "-n", "-s", "golden", "PY=PY", "ENSURE_VENV=:", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**environ, **env})
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "nrtrewrite.golden" in ln)
    commands = []
    for part in line.split("&&"):
        words = shlex.split(part)
        if words[:1] == ["true"]:
            continue
        assert words[:3] == ["PY", "-m", "nrtrewrite.golden"], part
        commands.append(words[3:])
    return commands


def test_make_golden_writes_every_golden_with_the_ranks_the_tests_compare():
    """``make golden``'s own commands (not a parse of the Makefile): one per golden, the
    model its fixture's NEFF, the ranks those tests/conftest.py reads."""
    want = sorted([f"fixtures/{name}.neff", f"fixtures/golden/{name}.tar.gz",
                   *(w for r in ranks or [] for w in ("--rank", str(r)))]
                  for name, ranks in GOLDEN.items())
    got = sorted(_make_golden_commands())
    assert got == want, f"make golden runs {got}, the golden set asks for {want}"
    assert sorted(_stems("golden/*.tar.gz")) == sorted(GOLDEN), (
        f"fixtures/golden/ holds {sorted(_stems('golden/*.tar.gz'))}, the golden set is "
        f"{sorted(GOLDEN)}")


def test_make_golden_takes_its_fixtures_and_flags_from_the_environment_too():
    """Bug (review 51r): ``GOLDEN_FIXTURES := ...`` overrode the environment, so
    ``GOLDEN_FIXTURES=ar2 make golden`` regenerated all eight (8.5 min, 11 GB); the
    environment form now does what the command-line form does, and GOLDEN_FLAGS (golden's
    ``--no-memory-check``) reaches every command."""
    ar2 = [["fixtures/ar2.neff", "fixtures/golden/ar2.tar.gz"]]
    assert _make_golden_commands("GOLDEN_FIXTURES=ar2") == ar2
    assert _make_golden_commands(GOLDEN_FIXTURES="ar2") == ar2
    assert _make_golden_commands(GOLDEN_FIXTURES="ar2 node64",
                                 GOLDEN_FLAGS="--no-memory-check") == [
        ar2[0] + ["--no-memory-check"],
        ["fixtures/node64.neff", "fixtures/golden/node64.tar.gz",
         "--rank", "0", "--rank", "1", "--rank", "63", "--no-memory-check"]]


def _collected(test: str) -> list[str]:
    """The ids pytest collects for ``test`` (``tests/test_lower.py::NAME``), collection
    only: nothing runs."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "-p", "no:xdist", test],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [ln for ln in proc.stdout.splitlines() if ln.startswith("tests/")]


def test_the_golden_test_compares_every_golden():
    """pytest's own collection of ``test_fixture_matches_golden`` has one test per archive
    in fixtures/golden/, by name, and the ranks the test lowers are those the archive's own
    manifest keeps (until review 51r this compared test_lower's table with the one it is
    made from)."""
    import test_lower

    ids = _collected("tests/test_lower.py::test_fixture_matches_golden")
    want = [f"tests/test_lower.py::test_fixture_matches_golden[{n}]"
            for n in sorted(_stems("golden/*.tar.gz"))]
    assert sorted(ids) == want, f"collected {ids}, fixtures/golden/ asks for {want}"
    for name in sorted(_stems("golden/*.tar.gz")):
        with tarfile.open(FIX / "golden" / f"{name}.tar.gz") as tar:
            manifest = json.load(tar.extractfile("manifest.json"))
        kept = None if manifest["ranks"] == manifest["world"] else manifest["ranks"]
        assert test_lower.GOLDEN_RANKS.get(name) == kept, (
            f"test_fixture_matches_golden[{name}] lowers ranks "
            f"{test_lower.GOLDEN_RANKS.get(name) or 'all'}, fixtures/golden/{name}.tar.gz "
            f"keeps {kept or 'all'}")


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_each_golden_keeps_the_ranks_the_makefile_names(name):
    """The archive's own manifest: the ranks ``GOLDEN_RANKS_<name>`` names, else every
    rank of the model (its ``world``)."""
    with tarfile.open(FIX / "golden" / f"{name}.tar.gz") as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest["ranks"] == (GOLDEN[name] or manifest["world"])
    assert manifest["input"]["name"] == f"{name}.neff"


def test_readme_cli_md_and_make_help_give_one_memory_figure_for_node64s_golden():
    """Review 51r: README and CLI.md's golden part said about 11 GB, CLI.md's simulate part
    11 - 15 GB, `make help` nothing; now each gives node64's golden (simulate with the
    default options) the same figure."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    helped = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60).stdout
    cli = " ".join((ROOT / "docs" / "CLI.md").read_text().split())
    readme = " ".join((ROOT / "README.md").read_text().split())
    found = {
        "README.md": re.findall(r"for `node64`, about (\d+) GiB of memory", readme),
        "CLI.md golden": re.findall(r"`node64`'s golden about (\d+) GiB of memory", cli),
        "CLI.md simulate": re.findall(r"about (\d+) GiB of memory with the default options "
                                      r"\(as `make golden` simulates it", cli),
        "make help": re.findall(r"about (\d+) GiB of memory for node64", " ".join(
            helped.split())),
    }
    assert all(len(v) == 1 for v in found.values()), found
    assert len({v[0] for v in found.values()}) == 1, found
