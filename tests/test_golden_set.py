"""The golden set agrees everywhere (review 51d): every fixture spec ``fixtures/<name>.yaml``
has its NEFF and its golden ``fixtures/golden/<name>.tar.gz``, every golden its fixture,
``make golden`` writes exactly those archives with the ranks each keeps, and the golden
test compares every one.  Until 2026-12-07 the set was written out in the Makefile,
tests/test_lower.py (with a second copy of the ranks), tests/test_golden_module.py and
tests/test_simulate.py, and nothing checked that they agreed: a new fixture got no golden
and no test, and a name added to the Makefile alone got an archive no test read."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import GOLDEN

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
HOWTO = 'README.md "Adding a fixture and its golden"'


def _stems(pattern: str) -> set[str]:
    return {p.name.split(".")[0] for p in FIX.glob(pattern)}


def test_every_fixture_has_its_golden_and_every_golden_its_fixture():
    specs, archives, neffs = _stems("*.yaml"), _stems("golden/*.tar.gz"), _stems("*.neff")
    assert set(GOLDEN) == specs
    no_golden = sorted(specs - archives)
    assert not no_golden, (f"fixtures {no_golden} have no golden: make fixtures && make golden "
                           f"GOLDEN_FIXTURES={no_golden[0]}, then commit it ({HOWTO})")
    no_spec = sorted(archives - specs)
    assert not no_spec, f"fixtures/golden/ holds {no_spec} with no fixtures/<name>.yaml"
    no_neff = sorted(specs - neffs)
    assert not no_neff, f"fixtures {no_neff} have no .neff: make fixtures ({HOWTO})"
    assert sorted(FIX.glob("golden/*")) == sorted(FIX.glob("golden/*.tar.gz"))


def _make_golden_commands() -> list[list[str]]:
    """The ``python -m nrtrewrite.golden`` commands ``make golden`` runs (``make -n``: none
    run), each as its arguments after the module."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    proc = subprocess.run(["make", "-n", "-s", "golden", "PY=PY", "ENSURE_VENV=:"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
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
    assert sorted(_make_golden_commands()) == want
    assert sorted(_stems("golden/*.tar.gz")) == sorted(GOLDEN)


def test_the_golden_test_compares_every_golden():
    import test_lower

    (mark,) = [m for m in test_lower.test_fixture_matches_golden.pytestmark
               if m.name == "parametrize"]
    assert sorted(mark.args[1]) == sorted(_stems("golden/*.tar.gz"))
    assert test_lower.GOLDEN_RANKS == {n: r for n, r in GOLDEN.items() if r is not None}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_each_golden_keeps_the_ranks_the_makefile_names(name):
    """The archive's own manifest: the ranks ``GOLDEN_RANKS_<name>`` names, else every
    rank of the model (its ``world``)."""
    with tarfile.open(FIX / "golden" / f"{name}.tar.gz") as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest["ranks"] == (GOLDEN[name] or manifest["world"])
    assert manifest["input"]["name"] == f"{name}.neff"
