"""`nrtrewrite diff` and the checksums the manifests record (docs/CLI.md "diff"): a checksum of
a file diff compares itself (`rank_manifests.rank-NNNN`, `output_neff.sha256`,
`files["NAME"].sha256`) is no difference of its own; where the file compares identical but
the checksums differ, a note (stderr; `--json`'s `checksums`), the exit status unchanged.
The expected lines are worked out from FORMATS.md's layouts and hashlib, not from diff."""

from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from test_diff import lowered, pair  # noqa: F401 - ar2 lowered (ranks 0 and 1), a copy pair


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load(path):
    return json.loads(path.read_text())


def _write(path, doc) -> bytes:
    """``doc`` written as ``lower`` writes a rank manifest (FORMATS §1.1: ``json.dumps(doc,
    indent=1, sort_keys=True)`` and a newline); its bytes."""
    data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    path.write_bytes(data)
    return data


def _ranks(folder) -> list[str]:
    return sorted(p.name for p in folder.glob("rank-*"))


def _rehash_rank(b, r: str, name: str) -> None:
    """B's rank ``r`` manifest records artifact ``name``'s sha256 again, and the top manifest
    that rank manifest's (``files[name].sha256``, ``rank_manifests[r]``: FORMATS §1.1, §1.2)."""
    man = _load(b / r / "manifest.json")
    man["files"][name]["sha256"] = _sha((b / r / name).read_bytes())
    _write_rank_manifest(b, r, man)


def _write_rank_manifest(b, r: str, man) -> None:
    """B's rank ``r`` manifest written as ``man``, and the top manifest's checksum of it,
    ``rank_manifests[r]``, updated to match (FORMATS §1.1)."""
    data = _write(b / r / "manifest.json", man)
    top = _load(b / "manifest.json")
    top["rank_manifests"][r] = _sha(data)
    _write(b / "manifest.json", top)


def _invoke(*args):
    return CliRunner().invoke(main, ["diff", *map(str, args)])


def test_a_field_changed_with_its_checksums_updated_is_one_difference_per_rank(pair):
    """Review 49e: one sem.bin value changed on every rank, each rank manifest's
    ``files["sem.bin"].sha256`` and the top manifest's ``rank_manifests`` updated to match,
    counted three differences a rank, and the top manifest's checksum lines came first and
    used up ``--max``.  Byte 4*16+4 is the low byte of record 4's ``value`` (FORMATS §7:
    bytes 4..7, u32)."""
    a, b = pair
    ranks = _ranks(b)
    assert ranks == ["rank-0000", "rank-0001"]
    expected = []
    for r in ranks:
        path = b / r / "sem.bin"
        data = bytearray(path.read_bytes())
        old = int.from_bytes(data[4 * 16 + 4:4 * 16 + 8], "little")
        data[4 * 16 + 4] ^= 0xFF
        path.write_bytes(bytes(data))
        _rehash_rank(b, r, "sem.bin")
        expected.append((f"{r}/sem.bin[4] value: {old} != {old ^ 0xFF}",
                         f"{r}/sem.bin: 1 of {len(data) // 16} records differ (value 1)"))
    res = _invoke(a, b, "--max", "0")
    assert (res.exit_code, res.stdout) == (
        1, "".join(f"{x}\n{y}\n" for x, y in expected) + "2 difference(s)\n")
    assert res.stderr == ""
    # --max 1 shows the first field's line, not a checksum's
    res = _invoke(a, b, "--max", "1")
    assert (res.exit_code, res.stdout) == (
        1, f"{expected[0][0]}\n{expected[0][1]}\n{expected[1][1]}\n"
           "... 1 more difference (--max 0 shows all)\n2 difference(s)\n")
    doc = json.loads(_invoke(a, b, "--json").stdout)
    assert (doc["count"], doc["identical"]) == (2, False) and "checksums" not in doc
    assert [d["field"] for d in doc["differences"]] == ["value", "value"]


def test_a_rank_manifest_in_another_layout_is_identical_whether_its_checksum_is_updated(pair):
    """CLI.md: a manifest's layout is no difference.  Rewritten with other indentation and
    its keys unsorted, and the top manifest's ``rank_manifests`` updated, it was exit 1
    (``manifest.json rank_manifests.rank-0001: ... != ...``), while the same with the
    checksum left stale was identical.  Now both are identical, the first with the note."""
    a, b = pair
    man = _load(b / "rank-0001" / "manifest.json")
    data = (json.dumps(dict(reversed(list(man.items()))), indent=3) + "\n").encode()
    (b / "rank-0001" / "manifest.json").write_bytes(data)
    res = _invoke(a, b)  # the checksum stale: equal in both top manifests
    assert (res.exit_code, res.stdout, res.stderr) == (0, "identical\n", "")
    top = _load(b / "manifest.json")
    old = top["rank_manifests"]["rank-0001"]
    assert old == _sha((a / "rank-0001" / "manifest.json").read_bytes())
    top["rank_manifests"]["rank-0001"] = _sha(data)
    _write(b / "manifest.json", top)
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout) == (0, "identical\n")
    assert res.stderr == (
        f'nrtrewrite: note: manifest.json rank_manifests.rank-0001: "{old}" != '
        f'"{_sha(data)}" (a checksum of rank-0001/manifest.json, which compares identical: '
        "no difference)\n")
    res = _invoke(a, b, "--json")
    doc = json.loads(res.stdout)
    assert (res.exit_code, res.stderr) == (0, "")
    assert list(doc) == ["differences", "files", "count", "shown", "checksums", "identical"]
    assert (doc["count"], doc["identical"]) == (0, True)
    assert doc["checksums"] == [
        {"where": "manifest.json", "record": None, "field": "rank_manifests.rank-0001",
         "path": ["rank_manifests", "rank-0001"], "a": old, "b": _sha(data),
         "a_present": True, "b_present": True, "covers": "rank-0001/manifest.json"}]


def test_a_stale_artifact_checksum_is_a_note_on_that_key_alone(pair):
    """B's ``files["cce.bin"].sha256`` of rank 0 wrong (the top manifest's checksum of that
    rank manifest updated), cce.bin the same bytes: the artifact compares identical, so the
    ``files`` key gets the note; the rank manifest differs in that key, so its
    ``rank_manifests`` checksum is explained and gets none."""
    a, b = pair
    man = _load(b / "rank-0000" / "manifest.json")
    old = man["files"]["cce.bin"]["sha256"]
    assert old == _sha((a / "rank-0000" / "cce.bin").read_bytes())
    man["files"]["cce.bin"]["sha256"] = "0" * 64
    _write_rank_manifest(b, "rank-0000", man)
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout) == (0, "identical\n")
    assert res.stderr == (
        f'nrtrewrite: note: rank-0000/manifest.json files["cce.bin"].sha256: "{old}" != '
        f'"{"0" * 64}" (a checksum of rank-0000/cce.bin, which compares identical: no '
        "difference)\n")


def test_the_neff_checksum_is_no_difference_the_model_checksum_is(pair):
    """``output_neff.sha256`` covers the rewritten NEFF, which diff compares itself: changed
    alone, a note; ``input.sha256`` covers the model, which diff does not compare: a
    difference as any value."""
    a, b = pair
    top = _load(b / "manifest.json")
    neff, old = top["output_neff"]["name"], top["output_neff"]["sha256"]
    assert old == _sha((a / neff).read_bytes())
    top["output_neff"]["sha256"] = "1" * 64
    _write(b / "manifest.json", top)
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout) == (0, "identical\n")
    assert res.stderr == (
        f'nrtrewrite: note: manifest.json output_neff.sha256: "{old}" != "{"1" * 64}" (a '
        f"checksum of {neff}, which compares identical: no difference)\n")
    # ignored, it is left out: no note
    res = _invoke(a, b, "--ignore", "output_neff.sha256")
    assert (res.exit_code, res.stdout, res.stderr) == (0, "identical\n", "")
    model = top["input"]["sha256"]
    top["input"]["sha256"] = "2" * 64
    _write(b / "manifest.json", top)
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout) == (
        1, f'manifest.json input.sha256: "{model}" != "{"2" * 64}"\n1 difference(s)\n')


def test_a_file_grown_by_a_record_is_its_records_line_alone(pair):
    """Fixer 49m: one 16-byte record (FORMATS §7) appended to B's rank-0001/sem.bin, its
    ``files["sem.bin"]`` ``bytes``, ``records`` and ``sha256`` and the top manifest's
    ``rank_manifests`` updated to match, was 3 differences: both manifest keys and the
    file's ``records`` line.  The file's own comparison reports its length: 1 difference."""
    a, b = pair
    path = b / "rank-0001" / "sem.bin"
    data = path.read_bytes()
    n = len(data) // 16
    assert n * 16 == len(data) and n > 0
    path.write_bytes(data + data[:16])
    man = _load(b / "rank-0001" / "manifest.json")
    assert (man["files"]["sem.bin"]["bytes"], man["files"]["sem.bin"]["records"]) == (
        n * 16, n)
    man["files"]["sem.bin"].update(bytes=(n + 1) * 16, records=n + 1,
                                   sha256=_sha(data + data[:16]))
    top = _load(b / "manifest.json")
    top["rank_manifests"]["rank-0001"] = _sha(_write(b / "rank-0001" / "manifest.json", man))
    _write(b / "manifest.json", top)
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout, res.stderr) == (
        1, f"rank-0001/sem.bin records: {n} != {n + 1}\n1 difference(s)\n", "")
    doc = json.loads(_invoke(a, b, "--json").stdout)
    assert (doc["count"], [d["field"] for d in doc["differences"]]) == (1, ["records"])
    assert "checksums" not in doc


def test_a_stale_size_and_record_count_are_notes_where_the_file_compares_identical(pair):
    """B's ``files["spad.bin"]`` of rank 0 records one 8-byte record more (FORMATS §2) than
    the file holds, the file the same bytes: no difference, a note for each key, in the
    manifest's key order (``bytes``, ``records``), and ``--json``'s ``checksums`` both."""
    a, b = pair
    size = (a / "rank-0000" / "spad.bin").stat().st_size
    man = _load(b / "rank-0000" / "manifest.json")
    assert (man["files"]["spad.bin"]["bytes"], man["files"]["spad.bin"]["records"]) == (
        size, size // 8)
    man["files"]["spad.bin"].update(bytes=size + 8, records=size // 8 + 1)
    top = _load(b / "manifest.json")
    top["rank_manifests"]["rank-0000"] = _sha(_write(b / "rank-0000" / "manifest.json", man))
    _write(b / "manifest.json", top)
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout) == (0, "identical\n")
    assert res.stderr == (
        f'nrtrewrite: note: rank-0000/manifest.json files["spad.bin"].bytes: {size} != '
        f"{size + 8} (the size of rank-0000/spad.bin, which compares identical: no "
        "difference)\n"
        f'nrtrewrite: note: rank-0000/manifest.json files["spad.bin"].records: {size // 8} != '
        f"{size // 8 + 1} (the record count of rank-0000/spad.bin, which compares identical: "
        "no difference)\n")
    doc = json.loads(_invoke(a, b, "--json").stdout)
    assert (doc["count"], doc["identical"]) == (0, True)
    assert [(c["path"], c["a"], c["b"], c["covers"]) for c in doc["checksums"]] == [
        (["files", "spad.bin", "bytes"], size, size + 8, "rank-0000/spad.bin"),
        (["files", "spad.bin", "records"], size // 8, size // 8 + 1, "rank-0000/spad.bin")]


def test_a_checksum_key_one_side_has_alone_is_a_difference(pair):
    """Review 49l: a checksum key present on one side only is no stale value but a manifest
    of another shape (``simulate`` refuses it), so it stays a difference (exit 1), as before
    checksum keys were held: B's top manifest lists a ``rank-0008`` no side has a folder for,
    and B's rank 1 manifest has no ``files["sem.bin"].sha256`` (the top manifest's checksum
    of it updated, which, that rank manifest differing, is explained and not listed)."""
    a, b = pair
    top = _load(b / "manifest.json")
    top["rank_manifests"]["rank-0008"] = "ab" * 32
    _write(b / "manifest.json", top)
    res = _invoke(a, b)
    assert res.exit_code == 1, res.output
    assert res.stdout.splitlines()[0].startswith("manifest.json rank_manifests.rank-0008: ")
    assert res.stdout.endswith("\n1 difference(s)\n") and res.stderr == ""
    _write(b / "manifest.json", _load(a / "manifest.json"))
    man = _load(b / "rank-0001" / "manifest.json")
    del man["files"]["sem.bin"]["sha256"]
    _write_rank_manifest(b, "rank-0001", man)
    res = _invoke(a, b)
    assert res.exit_code == 1, res.output
    assert res.stdout.splitlines()[0].startswith(
        'rank-0001/manifest.json files["sem.bin"].sha256: ')
    assert res.stdout.endswith("\n1 difference(s)\n") and res.stderr == ""


@pytest.mark.parametrize("where, path, value", [
    (None, ("rank_manifests", "rank-0001"), None),
    (None, ("rank_manifests", "rank-0001"), 5),
    ("rank-0000", ("files", "dma.bin", "sha256"), 5),
    ("rank-0000", ("files", "cce.bin", "records"), None),
    ("rank-0000", ("files", "cce.bin", "bytes"), True),
])
def test_a_checksum_key_of_another_type_is_a_difference(pair, where, path, value):
    """Review 49w: a checksum key (or a ``files`` item's ``bytes`` / ``records``) holding a
    value of another JSON type than FORMATS §1.1 / §1.2 give it (a string; an integer) is a
    manifest ``simulate`` refuses, not a stale value: a difference (exit 1), no note."""
    a, b = pair
    doc = _load(b / (where or "") / "manifest.json")
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    if where is None:
        _write(b / "manifest.json", doc)
    else:  # the top manifest's checksum of that rank manifest kept right
        _write_rank_manifest(b, where, doc)
    res = _invoke(a, b)
    assert res.exit_code == 1, res.output
    assert res.stdout.endswith("\n1 difference(s)\n") and res.stderr == "", res.output
