"""`nrtrewrite diff` of outputs that keep other ranks (docs/CLI.md "diff"): the top
manifest's ``ranks`` (FORMATS §1.1, the ranks that have a folder) is lined up by value, a
rank on one side only ``manifest.json ranks[rank=N]: N != <absent>``, as a keyed list's item
(until 2026-12-07 by position: a removed rank read as changed ``ranks[i]`` values after it;
the fifty-fifth session's "Left").  The expected lines are written from CLI.md and hashlib,
not from diff's output."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.golden import lower_to

FIX = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """mix8 (8 ranks) lowered keeping ranks 0, 1, 7 and keeping 0, 7."""
    base = tmp_path_factory.mktemp("ranks")
    return (lower_to(FIX / "mix8.neff", base / "three", [0, 1, 7]),
            lower_to(FIX / "mix8.neff", base / "two", [0, 7]))


def _invoke(*args):
    return CliRunner().invoke(main, ["diff", *map(str, args)])


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_removed_rank_is_named_by_its_rank_not_as_changed_positions(kept):
    three, two = kept
    assert json.loads((three / "manifest.json").read_text())["ranks"] == [0, 1, 7]
    man = _sha(three / "rank-0001" / "manifest.json")
    res = _invoke(three, two)
    assert (res.exit_code, res.stderr) == (1, "")
    assert res.stdout == (f'manifest.json rank_manifests.rank-0001: "{man}" != <absent>\n'
                          "manifest.json ranks (length): 3 != 2\n"
                          "manifest.json ranks[rank=1]: 1 != <absent>\n"
                          "rank-0001 folder: True != False\n"
                          "4 difference(s)\n")
    res = _invoke(two, three)  # (added: <absent> in A)
    assert res.stdout == (f'manifest.json rank_manifests.rank-0001: <absent> != "{man}"\n'
                          "manifest.json ranks (length): 2 != 3\n"
                          "manifest.json ranks[rank=1]: <absent> != 1\n"
                          "rank-0001 folder: False != True\n"
                          "4 difference(s)\n")
    doc = json.loads(_invoke(three, two, "--json").stdout)
    assert doc["differences"][2] == {
        "index": 2, "where": "manifest.json", "record": None, "field": "ranks[rank=1]",
        "path": ["ranks", {"rank": 1}], "a": 1, "b": None, "a_present": True,
        "b_present": False}


def test_ranks_of_one_length_in_another_order_or_replaced(kept, tmp_path):
    """B's ``ranks`` edited (the folders unchanged): a rank replaced by another is the two
    ranks' lines, no length; the same ranks in another order one ``(order)`` line, as a
    keyed list's; a rank given twice is compared by position, as before."""
    three, _ = kept
    b = tmp_path / "b"
    shutil.copytree(three, b)
    top = json.loads((b / "manifest.json").read_text())
    for ranks, lines in (
            ([0, 2, 7], ["manifest.json ranks[rank=1]: 1 != <absent>",
                         "manifest.json ranks[rank=2]: <absent> != 2"]),
            ([0, 7, 1], ["manifest.json ranks (order): [0, 1, 7] != [0, 7, 1]"]),
            ([0, 7, 7], ["manifest.json ranks[1]: 1 != 7"])):
        (b / "manifest.json").write_text(json.dumps({**top, "ranks": ranks}, indent=1,
                                                    sort_keys=True) + "\n")
        res = _invoke(three, b)
        assert res.exit_code == 1
        assert res.stdout == "".join(f"{x}\n" for x in lines) + f"{len(lines)} difference(s)\n"


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    """mix8 lowered keeping rank 0 alone."""
    return lower_to(FIX / "mix8.neff", tmp_path_factory.mktemp("ranks1") / "one", [0])


def test_ranks_removed_or_added_past_max_get_the_manifests_count_line(kept, one):
    """More ranks removed (or added) than ``--max`` shows (the carried list): ranks 0, 1, 7
    against rank 0 alone, by CLI.md's rules: the top manifest's 5 differing values
    (``rank_manifests`` 2: rank-0001's and rank-0007's checksums; ``ranks`` 3: its length
    and the two ranks), then the two rank folders (one difference each).  Where ``--max``
    leaves some of the manifest's values out its count line says how many, per top-level
    key, as the other count lines (text, and ``--json``'s ``values``); the rank folders,
    each one difference of its own, have theirs where their line is left out (fixer 58d:
    :func:`test_a_rank_folder_on_one_side_only_past_max_gets_its_count_line`)."""
    three, _ = kept
    m1, m7 = (_sha(three / f"rank-000{r}" / "manifest.json") for r in (1, 7))
    removed = [f'manifest.json rank_manifests.rank-0001: "{m1}" != <absent>',
               f'manifest.json rank_manifests.rank-0007: "{m7}" != <absent>',
               "manifest.json ranks (length): 3 != 1",
               "manifest.json ranks[rank=1]: 1 != <absent>",
               "manifest.json ranks[rank=7]: 7 != <absent>",
               "rank-0001 folder: True != False", "rank-0007 folder: True != False"]
    added = [f'manifest.json rank_manifests.rank-0001: <absent> != "{m1}"',
             f'manifest.json rank_manifests.rank-0007: <absent> != "{m7}"',
             "manifest.json ranks (length): 1 != 3",
             "manifest.json ranks[rank=1]: <absent> != 1",
             "manifest.json ranks[rank=7]: <absent> != 7",
             "rank-0001 folder: False != True", "rank-0007 folder: False != True"]
    count = "manifest.json: {} of 5 differing values shown (rank_manifests 2, ranks 3)"
    more = "... {} more differences (--max 0 shows all)"
    for x, y, lines in ((three, one, removed), (one, three, added)):
        side = "A" if x is three else "B"
        folders = [f"rank-000{r}: 0 of 1 differences shown (folder in {side} only, 11 entries)"
                   for r in (1, 7)]
        for k in (1, 2, 4):  # (fewer shown than the ranks removed, ...)
            res = _invoke(x, y, "--max", k)
            assert res.exit_code == 1
            assert res.stdout.splitlines() == [*lines[:k], count.format(k), *folders,
                                               more.format(7 - k), "7 difference(s)"]
        res = _invoke(x, y, "--max", 6)  # (the manifest's all shown: no count line)
        assert res.stdout.splitlines() == [
            *lines[:6], folders[1], "... 1 more difference (--max 0 shows all)",
            "7 difference(s)"]
        assert _invoke(x, y, "--max", 0).stdout.splitlines() == [*lines, "7 difference(s)"]
        doc = json.loads(_invoke(x, y, "--json", "--max", 1).stdout)
        assert doc["values"] == [{"where": "manifest.json", "differing_values": 5, "shown": 1,
                                  "keys": {"rank_manifests": 2, "ranks": 3}}]
        assert (doc["count"], doc["shown"], doc["files"]) == (7, 1, [])


def test_a_rank_folder_on_one_side_only_past_max_gets_its_count_line(kept, one, tmp_path):
    """Fixer 58d (the fifty-seventh "Left"): a rank folder on one side only is one
    difference, ``rank-0001 folder: True != False``; past ``--max`` nothing said which
    folder the difference not shown was, nor what it held.  Its count line (CLI.md "diff")
    says the side and counts its entries: a kept rank of mix8 holds its manifest and the 10
    artifacts of FORMATS.md §1 (11), one more with a file of the user's added; with
    ``--json`` in ``folders``.  Where its line is shown there is none."""
    three, _ = kept
    a = tmp_path / "a"
    shutil.copytree(three, a)
    (a / "rank-0007" / "notes.txt").write_text("x")
    res = _invoke(a, one, "--max", 5)  # (the top manifest's 5 lines shown, the folders not)
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines[5:] == ["rank-0001: 0 of 1 differences shown (folder in A only, 11 entries)",
                         "rank-0007: 0 of 1 differences shown (folder in A only, 12 entries)",
                         "... 2 more differences (--max 0 shows all)", "7 difference(s)"]
    doc = json.loads(_invoke(one, a, "--json", "--max", 6).stdout)
    assert doc["folders"] == [{"where": "rank-0007", "differences": 1, "shown": 0, "in": "b",
                               "entries": 12}]
    assert (doc["count"], doc["shown"]) == (7, 6)
    res = _invoke(a, one, "--max", 7)  # (every line shown: no count line)
    assert res.stdout.splitlines()[5:] == ["rank-0001 folder: True != False",
                                           "rank-0007 folder: True != False",
                                           "7 difference(s)"]
    assert "folders" not in json.loads(_invoke(a, one, "--json").stdout)


def test_a_one_sided_rank_folders_count_line_says_when_its_entries_cannot_be_listed(
        kept, one, monkeypatch):
    """Its entries that cannot be listed (a folder without read permission; faked here, the
    tests may run as root) are said so, CLI.md: ``its entries cannot be listed``, ``--json``
    ``"entries": null``; the folder's difference is counted as before."""
    from nrtrewrite import diff as D
    three, _ = kept
    names = D._names

    def unlistable(p):
        if Path(p).name == "rank-0007":
            raise PermissionError(13, "Permission denied")
        return names(p)

    monkeypatch.setattr(D, "_names", unlistable)
    res = _invoke(one, three, "--max", 6)
    assert res.stdout.splitlines()[-3:] == [
        "rank-0007: 0 of 1 differences shown (folder in B only, its entries cannot be listed)",
        "... 1 more difference (--max 0 shows all)", "7 difference(s)"]
    doc = json.loads(_invoke(one, three, "--json", "--max", 6).stdout)
    assert doc["folders"] == [{"where": "rank-0007", "differences": 1, "shown": 0, "in": "b",
                               "entries": None}]
