"""Refusals of ``simulate`` that no doc described (a doc-claims audit), now quoted in
docs/SIMULATOR.md §1: each quote is in the doc, and is what ``simulate`` prints for the
fault, with OUT for the output folder."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.golden import lower_to

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    root = tmp_path_factory.mktemp("refusals")
    return {name: lower_to(FIX / f"{name}.neff", root / name, None) for name in ("ar2", "mix8")}


def _top(edit):
    def spoil(out: Path) -> None:
        path = out / "manifest.json"
        doc = json.loads(path.read_text())
        edit(doc)
        path.write_text(json.dumps(doc))
    return spoil


def _rank_1_says_0(out: Path) -> None:
    path = out / "rank-0001" / "manifest.json"
    doc = json.loads(path.read_text())
    doc["rank"] = 0
    path.write_text(json.dumps(doc))


def _set(*path_value):
    *path, value = path_value

    def edit(doc):
        for key in path[:-1]:
            doc = doc[key]
        doc[path[-1]] = value
    return edit


def _the_input_as_the_rewritten_neff(out: Path) -> None:
    shutil.copy(FIX / "ar2.neff", out / "ar2.neff")


def _copy_row_0(doc):
    doc["topology"]["ranks"].append(dict(doc["topology"]["ranks"][0]))


# (fixture, spoil, exit status, the quote as SIMULATOR.md gives it).  mix8 (fixtures/mix8.yaml):
# 8 ranks on one node, logical cores 0..7, every replica group [0..7] led by rank 0, its
# trigger 6 a reduce-scatter of 3072 elements; ar2: ranks 0 and 1, its all-reduce sp's
# instruction 2.
CASES = {
    # (rank 1 moved onto rank 0's core: named by its own place rule since 2026-12-05 late
    # evening, before `field topology: ranks 0 and 1 share a core`)
    "share-a-core": ("mix8", _top(_set("topology", "ranks", 1, "logical_core", 0)), 1,
                     "field topology.ranks[1].logical_core: rank 1: logical_core should be 1, 1 "
                     "% 8 (8 ranks a device), not 0 (docs/TOPOLOGY.md §1: rank = node x "
                     "ranks_per_node + device x ranks_per_device + logical_core; trn2 at "
                     "lnc_size 1, the platform of options.topology null (the default, trn2))"),
    "rank-twice": ("mix8", _top(_copy_row_0), 1,
                   "OUT/manifest.json: field topology.ranks[8].rank: rank 0 is listed twice"),
    # (the folders' index, not a value the simulation checks: exit 2, docs/CLI.md)
    "ranks-twice": ("ar2", _top(lambda doc: doc["ranks"].append(doc["ranks"][0])), 2,
                    "OUT/manifest.json: field ranks[2]: rank 0 is listed twice"),
    "trigger-twice": ("mix8", _top(_set("triggers", 1, "trigger", 0)), 1,
                      "field triggers[1]: trigger 0 listed twice"),
    "leader": ("mix8", _top(_set("triggers", 0, "leader", 1)), 1,
               "field triggers[0]: leader 1 is not the smallest rank of the group"),
    "scatter": ("mix8", _top(_set("triggers", 6, "num_elements", 3073)), 1,
                "field triggers[6]: REDUCE_SCATTER num_elements is not a multiple of the group "
                "size"),
    "says-rank": ("ar2", _rank_1_says_0, 1,
                  "protocol error: OUT: rank 1: rank-0001/manifest.json says rank 0"),
    "still-a-trigger": ("ar2", _the_input_as_the_rewritten_neff, 1,
                        "protocol error: OUT/ar2.neff: the rewritten NEFF still holds a "
                        "collective trigger (sg00 sp instruction 2)"),
    "version-3": ("ar2", _top(_set("format_version", 3)), 2,
                  "OUT/manifest.json: not an nrtrewrite-lowered v2 manifest (format "
                  '"nrtrewrite-lowered", version 3); a newer nrtrewrite wrote it: simulate it '
                  "with that version, or lower the model again with this one "
                  "(docs/FORMATS.md §1.1)"),
    "another-format": ("ar2", _top(_set("format", "something-else")), 2,
                       "OUT/manifest.json: not an nrtrewrite-lowered v2 manifest (format "
                       '"something-else", version 2)'),
    "version-1": ("ar2", _top(_set("format_version", 1)), 2,
                  "version 1); an older nrtrewrite wrote it: lower the model again "
                  "(docs/FORMATS.md §1.1)"),
    "output-neff-elsewhere": ("ar2", _top(_set("output_neff", "name", "../x.neff")), 2,
                              "OUT/manifest.json: field output_neff: must be an object whose "
                              "'name' is a file name in the folder"),
    "output-neff-own-entry": ("ar2", _top(_set("output_neff", "name", "rank-0000")), 2,
                              'OUT/manifest.json: field output_neff: names "rank-0000", one '
                              "of the folder's own entries (the rewritten NEFF never has such "
                              "a name)"),
}


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("case", list(CASES))
def test_a_refusal_simulator_md_quotes_is_what_simulate_prints(lowered, tmp_path, case):
    fixture, spoil, status, quote = CASES[case]
    assert quote in _flat((ROOT / "docs" / "SIMULATOR.md").read_text())
    out = tmp_path / "OUT"
    shutil.copytree(lowered[fixture], out)
    spoil(out)
    res = CliRunner().invoke(main, ["simulate", str(out), "--ignore-checksums"])
    assert res.exit_code == status, res.output
    printed = res.stdout if status == 1 else res.stderr
    assert quote.replace("OUT", str(out)) in printed, printed


def test_the_temporary_folder_refusal_simulator_md_quotes(monkeypatch):
    """``simulate MODEL.neff`` whose temporary folder cannot be made (here: no space left)."""
    import errno
    import os
    import tempfile

    tried = "/tmp/nrtrewrite-simulate-k2j4x9c1"

    def mkdtemp(*a, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), tried)
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    quote = (f"{tried}: cannot make a temporary folder to lower the model into: No space left "
             "on device")
    assert quote in _flat((ROOT / "docs" / "SIMULATOR.md").read_text())
    res = CliRunner().invoke(main, ["simulate", str(FIX / "ar2.neff")])
    assert (res.exit_code, res.stderr) == (2, f"nrtrewrite: error: {quote}\n")
