"""`nrtrewrite diff` on output folders: differences named by file, record and field, found a
block at a time (CHUNK_BYTES), manifests compared key by key only when their bytes differ."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from nrtrewrite import diff as D
from nrtrewrite.artifacts import load_records
from nrtrewrite.cli import main
from nrtrewrite.emit import formats as F
from nrtrewrite.errors import OutputError
from nrtrewrite.golden import lower_to

FIX = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    return lower_to(FIX / "ar2.neff", tmp_path_factory.mktemp("diff") / "a", None)


@pytest.fixture
def pair(lowered, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(lowered, a)
    shutil.copytree(lowered, b)
    return a, b


def test_identical_folders_have_no_difference(pair):
    assert D.diff_outputs(*pair) == []


def test_a_record_past_the_first_block_is_named(pair, monkeypatch):
    a, b = pair
    path = b / "rank-0000" / "dma.bin"
    n = path.stat().st_size // F.BD_DTYPE.itemsize
    assert n >= 8, "the fixture's rank 0 has a few BDs"
    # blocks of 2 records: the changed record is in the last block
    monkeypatch.setattr(D, "CHUNK_BYTES", 2 * F.BD_DTYPE.itemsize)
    data = bytearray(path.read_bytes())
    at = (n - 1) * F.BD_DTYPE.itemsize + 8  # buf_ptr of the last BD (bytes 8..15)
    data[at] ^= 0x40
    path.write_bytes(bytes(data))
    diffs = D.diff_outputs(a, b)
    assert [(d.where, d.record, d.field) for d in diffs] == [
        ("rank-0000/dma.bin", n - 1, "buf_ptr")]
    assert diffs[0].b - diffs[0].a in (0x40, -0x40)


def test_a_shorter_file_reports_its_record_count(pair):
    a, b = pair
    path = b / "rank-0001" / "sem.bin"
    data = path.read_bytes()
    path.write_bytes(data[:-F.SEM_DTYPE.itemsize])
    n = len(data) // F.SEM_DTYPE.itemsize
    diffs = D.diff_outputs(a, b)
    assert [(d.where, d.field, d.a, d.b) for d in diffs] == [
        ("rank-0001/sem.bin", "records", n, n - 1)]


def test_manifest_differences_are_named_by_key_path(pair):
    a, b = pair
    man = json.loads((b / "manifest.json").read_text())
    man["triggers"][0]["chunk"]["pgta"] += 7
    (b / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    diffs = D.diff_outputs(a, b)
    assert [d.field for d in diffs] == ["triggers[0].chunk.pgta"]
    assert diffs[0].b == diffs[0].a + 7


def test_same_json_in_other_bytes_is_no_difference(pair):
    a, b = pair
    man = json.loads((b / "manifest.json").read_text())
    (b / "manifest.json").write_text(json.dumps(man))  # one line: other bytes, same JSON
    assert D.diff_outputs(a, b) == []


def _damage(diffs):
    return [(d.where, d.b) for d in diffs if d.field == "damaged"]


def test_a_missing_rank_manifest_is_a_difference_and_an_error_in_the_reference(pair):
    a, b = pair
    (b / "rank-0001" / "manifest.json").unlink()
    assert [(d.where, d.field, d.a, d.b) for d in D.diff_outputs(a, b)] == [
        ("rank-0001/manifest.json", "file", True, False)]
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and "rank-0001/manifest.json file: True != False" in res.stdout
    (b / "rank-0001" / "manifest.json").write_text("{not json")
    assert _damage(D.diff_outputs(a, b))[0][0] == "rank-0001/manifest.json"
    assert _damage(D.diff_outputs(a, b))[0][1] == (
        "invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1)")
    with pytest.raises(OutputError, match=r"rank-0001/manifest.json: invalid JSON: Expecting"):
        D.diff_outputs(b, a)


def test_a_torn_record_is_a_difference_in_b_and_an_error_in_a(pair):
    a, b = pair
    path = b / "rank-0000" / "cce.bin"
    n = path.stat().st_size // F.CCE_DTYPE.itemsize
    path.write_bytes(path.read_bytes() + b"\0")
    why = f"{n * 16 + 1} bytes is not a whole number of 16-byte records"
    assert _damage(D.diff_outputs(a, b)) == [("rank-0000/cce.bin", why)]
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and f"rank-0000/cce.bin damaged in B: {why}" in res.stdout
    with pytest.raises(OutputError, match=r"cce.bin: \d+ bytes is not a whole number"):
        D.diff_outputs(b, a)


def test_same_bytes_reads_in_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "CHUNK_BYTES", 3)
    x, y = tmp_path / "x", tmp_path / "y"
    x.write_bytes(bytes(range(10)))
    y.write_bytes(bytes(range(10)))
    sizes = []

    class Counting:  # a file whose reads are recorded
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            sizes.append(n)
            return self.f.read(n)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    real_open = D._open_regular
    monkeypatch.setattr(D, "_open_regular", lambda p: Counting(real_open(p)))
    assert D._same_bytes(x, y)
    # 10 bytes, 3 at a time, from each file: 4 reads with data and the empty one at the end
    assert sizes == [3] * 10
    monkeypatch.undo()
    monkeypatch.setattr(D, "CHUNK_BYTES", 3)
    y.write_bytes(bytes(range(9)) + b"\xff")
    assert not D._same_bytes(x, y)
    assert not D._same_bytes(x, tmp_path / "absent")
    empty = tmp_path / "sem.bin"
    empty.write_bytes(b"")
    assert load_records(empty).size == 0


def _one_line_error(res, code=2):
    """A refusal as docs/CLI.md has it: exit ``code``, one line on stderr, no traceback."""
    assert res.exit_code == code, (res.exit_code, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_a_folder_where_an_artifact_should_be_is_a_difference_in_b_an_error_in_a(pair):
    a, b = pair
    dma = b / "rank-0000" / "dma.bin"
    dma.unlink()
    dma.mkdir()
    assert _damage(D.diff_outputs(a, b)) == [("rank-0000/dma.bin", "not a regular file")]
    with pytest.raises(OutputError, match=r"rank-0000/dma.bin: not a regular file"):
        D.diff_outputs(b, a)
    line = _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)]))
    assert line.startswith("nrtrewrite: error: ") and "dma.bin: not a regular file" in line
    for extra in ([], ["--json"]):
        line = _one_line_error(CliRunner().invoke(main, ["dump", "--dma", str(b), "--rank", "0",
                                                         *extra]))
        assert "dma.bin: not a regular file" in line


def test_a_fifo_where_an_artifact_should_be_never_blocks(pair):
    a, b = pair
    sem = b / "rank-0001" / "sem.bin"
    sem.unlink()
    os.mkfifo(sem)
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and "rank-0001/sem.bin damaged in B: not a regular file" \
        in res.stdout
    line = _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)]))
    assert "sem.bin: not a regular file" in line


def test_a_manifest_nested_too_deeply_is_damage_in_b_an_error_in_a(pair):
    a, b = pair
    (b / "rank-0001" / "manifest.json").write_text("[" * 100_000)
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and ("rank-0001/manifest.json damaged in B: invalid JSON: "
                                   "nested too deeply") in res.stdout
    line = _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)]))
    assert "rank-0001/manifest.json: invalid JSON: nested too deeply" in line


def test_a_manifest_integer_of_too_many_digits_is_invalid_json(pair):
    """A 5000-digit integer: CPython's ValueError named ``sys.set_int_max_str_digits()`` and
    was called "cannot read" (found by an exploratory tester)."""
    a, b = pair
    man = b / "rank-0001" / "manifest.json"
    man.write_text(man.read_text().rstrip().rstrip("}") + ', "big": ' + "9" * 5000 + "}")
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1
    # (the integer's key path named since the topology-file tester: jsonin._first_rule_broken)
    assert ("rank-0001/manifest.json damaged in B: field big: invalid JSON: an integer of "
            "5000 digits, more than 4300\n") in res.stdout
    line = _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)]))
    assert line.endswith("rank-0001/manifest.json: field big: invalid JSON: an integer of 5000 "
                         "digits, more than 4300")


def _set_manifest(folder, **keys):
    man = json.loads((folder / "manifest.json").read_text())
    man.update(keys)
    (folder / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("output_neff", ["x", 5, [], {}, {"name": 5}, {"name": ""},
                                         {"name": ".."}, {"name": "../a/ar2.neff"},
                                         {"name": "/etc/passwd"}, {"name": "a\0b"}])
def test_a_malformed_output_neff_is_damage_in_b_and_an_error_in_a(pair, output_neff):
    a, b = pair
    _set_manifest(b, output_neff=output_neff)
    line = _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)]))
    assert line == (f"nrtrewrite: error: {b}/manifest.json: field output_neff: must be an "
                    "object whose 'name' is a file name in the folder")
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and ("manifest.json damaged in B: field output_neff: must be an "
                                   "object whose 'name' is a file name in the folder") in res.stdout
    assert not [d for d in D.diff_outputs(a, b) if d.field == "file"]


@pytest.mark.parametrize("name", ["manifest.json", "MANIFEST.JSON", "rank-0000", "Rank-12"])
def test_an_output_neff_named_like_the_folders_own_entries_is_damage(pair, name):
    """FORMATS §1: the rewritten NEFF is never named ``manifest.json`` or ``rank-`` digits (a
    model so named gets ``.neff`` added), so a manifest that says so is damaged; before
    2026-12-02 ``diff`` read B's manifest.json as a NEFF and printed its JSON text as header
    fields (found by a diff audit)."""
    a, b = pair
    _set_manifest(b, output_neff={"name": name})
    # (the name as JSON writes it, as diff names values; until 2026-12-06 Python's, 'rank-0000')
    why = (f"field output_neff: names \"{name}\", one of the folder's own entries (the "
           "rewritten NEFF never has such a name)")
    line = _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)]))
    assert line == f"nrtrewrite: error: {b}/manifest.json: {why}"
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and f"manifest.json damaged in B: {why}" in res.stdout
    assert "header." not in res.stdout


def test_a_missing_output_neff_is_a_difference_not_a_skipped_comparison(pair):
    a, b = pair
    neff = json.loads((a / "manifest.json").read_text())["output_neff"]["name"]
    (b / neff).unlink()
    assert [(d.where, d.field, d.a, d.b) for d in D.diff_outputs(a, b)] == [
        (neff, "file", True, False)]
    (b / neff).mkdir()
    assert _damage(D.diff_outputs(a, b)) == [(neff, "not a regular file")]
    with pytest.raises(OutputError, match=rf"{neff}: not a regular file"):
        D.diff_outputs(b, a)


@pytest.mark.parametrize("manifest,why", [
    ("[1, 2]\n", 'its manifest.json is not of format "nrtrewrite-lowered"'),
    ('{"name": "webapp"}\n', 'its manifest.json is not of format "nrtrewrite-lowered"'),
    ('"nrtrewrite-lowered"\n', 'its manifest.json is not of format "nrtrewrite-lowered"'),
    ("{not json\n", "its manifest.json is not JSON: Expecting property name enclosed in double "
                    "quotes: line 1 column 2 (char 1)"),
    ("[" * 100_000, "its manifest.json is not JSON: nested too deeply"),
    ('{"format": "nrtrewrite-lowered", "big": ' + "9" * 5000 + "}",
     None),  # (the value named: an error of its own, below)
])
def test_a_folder_that_is_not_an_nrtrewrite_output_is_refused(pair, tmp_path, manifest, why):
    a, _ = pair
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "manifest.json").write_text(manifest)
    for x, y in ((a, foreign), (foreign, a), (foreign, foreign)):
        line = _one_line_error(CliRunner().invoke(main, ["diff", str(x), str(y)]))
        if why is None:
            assert line == (f"nrtrewrite: error: {foreign}/manifest.json: field big: invalid "
                            "JSON: an integer of 5000 digits, more than 4300")
        else:
            assert line == f"nrtrewrite: error: {foreign}: not an nrtrewrite output folder ({why})"


def test_a_foreign_manifest_is_worded_with_the_format_in_jsons_form_by_every_command(
        pair, tmp_path):
    """docs/CLI.md "lower", "diff", docs/SIMULATOR.md §1: a folder whose manifest.json has
    another format is refused naming formats as JSON writes a string, ``"..."`` (as
    simulate and dump name the manifest's), never Python's ``'...'``: lower's and diff's
    own ``of format 'nrtrewrite-lowered'`` until 2026-12-06."""
    a, _ = pair
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "manifest.json").write_text('{"format": "webapp"}\n')
    ours = 'format "nrtrewrite-lowered"'
    for args, says in ((["lower", FIX / "ar2.neff", "-o", foreign], ours),
                       (["lower", FIX / "ar2.neff", "-o", foreign, "--force"], ours),
                       (["diff", a, foreign], ours),
                       (["simulate", foreign], 'format "webapp"')):
        line = _one_line_error(CliRunner().invoke(main, [str(x) for x in args]))
        assert says in line and "'" not in line, (args, line)


def test_a_rank_folder_is_not_an_output_folder(pair, tmp_path):
    a, b = pair
    for x, y in ((a, b / "rank-0000"), (a / "rank-0001", b), (a / "rank-0000", b / "rank-0000")):
        res = CliRunner().invoke(main, ["diff", str(x), str(y)])
        line = _one_line_error(res)
        assert res.stdout == ""
        bad = y if x == a else x
        assert line == (f"nrtrewrite: error: {bad}: not an nrtrewrite output folder (a rank "
                        "folder; diff compares whole output folders)")
    # a copied rank folder under another name is still told apart from a foreign folder
    shutil.copytree(a / "rank-0000", tmp_path / "r0")
    assert "a rank folder" in _one_line_error(
        CliRunner().invoke(main, ["diff", str(a), str(tmp_path / "r0")]))


def test_our_output_still_diffs_whatever_its_format_version(pair):
    a, b = pair
    _set_manifest(b, format_version=1)
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and "format_version: 2 != 1" in res.stdout


def test_max_zero_prints_all_and_a_negative_max_is_a_usage_error(pair):
    a, b = pair
    path = b / "rank-0000" / "dma.bin"
    path.write_bytes(bytes(x ^ 0xFF for x in path.read_bytes()))  # every record differs
    n = path.stat().st_size // F.BD_DTYPE.itemsize  # a difference per record
    assert n > 3
    lines = D.diff_outputs(a, b)
    assert len({d.record for d in lines}) == n
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", "0"])
    out = res.stdout.splitlines()
    assert res.exit_code == 1 and out[-1] == f"{n} difference(s)"
    assert out[:-2] == [d.line() for d in lines]
    assert out[-2] == f"rank-0000/dma.bin: {n} of {n} records differ (len_ctrl {n}, " \
        f"meta_ctrl {n}, buf_ptr {n})"
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", "2"])
    shown = [d.line() for d in lines if d.record in (0, 1)]
    assert res.exit_code == 1 and res.stdout.splitlines() == shown + [
        out[-2], f"... {n - 2} more differences (--max 0 shows all)", f"{n} difference(s)"]
    for bad in ("-1", "-50"):
        res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", bad],
                                 prog_name="nrtrewrite")
        assert _one_line_error(res).startswith(
            f"nrtrewrite diff: error: Invalid value for '--max': {bad} is not in the range x>=0.")


def test_counts_are_exact_and_only_the_shown_records_are_decoded(pair, monkeypatch):
    """Differing records counted a block at a time (blocks of 3 records), per raw field; only
    --max records decoded."""
    import numpy as np
    a, b = pair
    path = b / "rank-0001" / "cce.bin"
    recs = np.fromfile(path, F.CCE_DTYPE)
    n = recs.size
    assert n >= 6
    changed = recs.copy()
    changed["w1"][::2] ^= 1  # records 0, 2, 4, ...: w1
    changed["w2"][1::3] ^= 0x100  # records 1, 4, 7, ...: w2
    changed.tofile(path)
    expect_records = sorted(set(range(0, n, 2)) | set(range(1, n, 3)))
    monkeypatch.setattr(D, "CHUNK_BYTES", 3 * F.CCE_DTYPE.itemsize)
    decoded = []
    real = D.decode_record
    monkeypatch.setattr(D, "decode_record", lambda name, rec: decoded.append(1) or real(name, rec))
    files, shown = [], []
    rep = D.compare(a, b, D.Report(2, lambda i, lines: shown.append((i, lines)), files.append))
    assert rep.count == len(expect_records) and rep.shown == 2
    assert [lines[0].record for _, lines in shown] == expect_records[:2]
    assert len(decoded) == 4  # two records, both sides
    assert [f.to_json() for f in files] == [{
        "where": "rank-0001/cce.bin", "records_a": n, "records_b": n,
        "differing_records": len(expect_records),
        "fields": {"w0": 0, "w1": len(range(0, n, 2)), "w2": len(range(1, n, 3)), "w3": 0}}]
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json", "--max", "1"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["count"] == len(expect_records) and doc["shown"] == 1
    assert doc["identical"] is False and doc["files"] == [f.to_json() for f in files]
    assert {d["index"] for d in doc["differences"]} == {0}
    assert doc["differences"][0]["record"] == 0 and doc["differences"][0]["path"] == ["w1"]


def _byte_owners(dtype, base=0, out=None):
    """How many named (leaf) fields of ``dtype`` cover each byte."""
    import numpy as np
    out = np.zeros(dtype.itemsize, int) if out is None else out
    for name in dtype.names:
        sub, off = dtype.fields[name][:2]
        if sub.names:
            _byte_owners(sub, base + off, out)
        else:
            out[base + off:base + off + sub.itemsize] += 1
    return out


@pytest.mark.parametrize("name", sorted(F.ARTIFACTS))
def test_every_byte_of_a_record_is_in_one_named_field(name):
    dtype = F.ARTIFACTS[name][0]
    owners = _byte_owners(dtype)
    assert owners.tolist() == [1] * dtype.itemsize, f"bytes not in exactly one field: " \
        f"{[i for i, n in enumerate(owners) if n != 1]}"
    assert dtype.itemsize == F.ARTIFACTS[name][1].sizeof()


@pytest.mark.parametrize("name", sorted(F.ARTIFACTS))
def test_a_flip_of_any_byte_of_any_record_is_a_difference_naming_the_record(pair, name):
    """Every byte offset of record 1 of a 3-record file, one at a time, in diff and in dump."""
    import numpy as np
    a, b = pair
    size = F.ARTIFACTS[name][0].itemsize
    base = np.random.default_rng(len(name)).integers(0, 256, 3 * size, dtype=np.uint8).tobytes()
    for folder in (a, b):
        (folder / "rank-0000" / name).write_bytes(base)
    target = b / "rank-0000" / name
    for off in range(size):
        data = bytearray(base)
        data[size + off] ^= 0x01
        target.write_bytes(bytes(data))
        diffs = D.diff_outputs(a, b)
        assert diffs, (name, off)
        assert {(d.where, d.record) for d in diffs} == {(f"rank-0000/{name}", 1)}, (name, off)
        # dump --json shows the changed byte too: some field of record 1 differs
        from nrtrewrite.artifacts import decode_record
        ra, rb = (load_records(f / "rank-0000" / name)[1] for f in (a, b))
        assert decode_record(name, ra) != decode_record(name, rb), (name, off)


def _rebuild_neff(path, edit):
    """Rewrite the NEFF at ``path`` with ``edit(members)`` applied (header kept, hash and
    sizes recomputed)."""
    from nrtrewrite.neff.container import build_container, read_container
    c = read_container(path.read_bytes(), verify_hash=False)
    members = {k: bytes(v) for k, v in c.members.items()}
    edit(members)
    path.write_bytes(build_container(c.header, members))
    return c


def test_the_rewritten_neff_is_compared_by_header_field_member_and_instruction(pair):
    a, b = pair
    neff = json.loads((a / "manifest.json").read_text())["output_neff"]["name"]
    streams = []

    def edit(members):
        name = next(k for k in members if k.endswith(".bin") and len(members[k]) >= 128)
        streams.append(name)
        data = bytearray(members[name])
        data[64 + 8] ^= 0x01  # instruction 1: semaphore_value (bytes 8..11)
        data[64 + 20] ^= 0xFF  # instruction 1: an operand byte
        data[64 + 21] ^= 0xFF
        members[name] = bytes(data)
        members["extra/notes.txt"] = b"hi"
        doc = json.loads(members["neff.json"])
        doc["__diff_test__"] = 1
        members["neff.json"] = json.dumps(doc).encode()

    _rebuild_neff(b / neff, edit)
    stream = streams[0]
    diffs = D.diff_outputs(a, b)
    got = {(d.where, d.record, d.field) for d in diffs}
    assert (f"{neff}:{stream}", 1, "semaphore_value") in got
    assert (f"{neff}:{stream}", 1, "bytes[20:22]") in got
    assert (f"{neff}:extra/notes.txt", None, "member") in got
    assert (f"{neff}:neff.json", None, "__diff_test__") in got
    assert (neff, None, "header.hash") in got
    assert not any("first differing byte" in d.field for d in diffs)
    # a NEFF B cannot read is a difference naming why; A's is an error
    (b / neff).write_bytes((b / neff).read_bytes()[:-7] + b"garbage")
    diffs = D.diff_outputs(a, b)
    assert any(d.where == neff and d.field == "damaged" for d in diffs), diffs
    with pytest.raises(Exception, match=neff):
        D.diff_outputs(b, a)


def test_neff_members_of_other_lengths_and_an_instructions_last_byte_are_differences(pair):
    """A stream one instruction longer is named by its instruction counts (256 bytes = 4
    instructions in A), a member that is not a stream by its byte counts, and the last byte
    of an instruction (operand byte 63) by its run ``bytes[63:64]``."""
    a, b = pair
    neff = json.loads((a / "manifest.json").read_text())["output_neff"]["name"]
    _rebuild_neff(a / neff, lambda m: m.update({"extra/notes.txt": b"abc"}))

    def edit(members):
        assert len(members["sg00/sp.bin"]) == 4 * 64
        members["sg00/sp.bin"] += members["sg00/sp.bin"][-64:]
        word = bytearray(members["sg00/pool.bin"])
        assert len(word) == 64 and word[63] == 0
        word[63] = 0x5A
        members["sg00/pool.bin"] = bytes(word)
        members["extra/notes.txt"] = b"abcd"

    _rebuild_neff(b / neff, edit)
    got = {(d.where, d.record, d.field, d.a, d.b) for d in D.diff_outputs(a, b)}
    assert (f"{neff}:sg00/sp.bin", None, "instructions", 4, 5) in got
    assert (f"{neff}:extra/notes.txt", None, "bytes", 3, 4) in got
    assert (f"{neff}:sg00/pool.bin", 0, "bytes[63:64]", "00", "5a") in got
    assert not any(w == f"{neff}:sg00/sp.bin" and r is not None for w, r, *_ in got), got


def test_entries_present_on_one_side_only_are_differences(pair):
    a, b = pair
    (b / "extra.txt").write_text("hi")
    (b / "rank-0000" / "extra.bin").write_text("x")
    (b / "rank-0000" / "sub").mkdir()
    (a / "notes").mkdir()
    (a / "notes" / "n.txt").write_text("a")
    (b / "notes").mkdir()
    (b / "notes" / "n.txt").write_text("b")
    (b / "notes" / "more").mkdir()
    got = {(d.where, d.field, d.a, d.b) for d in D.diff_outputs(a, b)}
    import hashlib
    assert got == {
        ("extra.txt", "file", False, True),
        ("rank-0000/extra.bin", "file", False, True),
        ("rank-0000/sub", "folder", False, True),
        ("notes/more", "folder", False, True),
        ("notes/n.txt", "sha256", hashlib.sha256(b"a").hexdigest(),
         hashlib.sha256(b"b").hexdigest()),
    }
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and "extra.txt file: False != True" in res.stdout


def test_json_paths_are_lists_absence_is_null_and_list_changes_name_their_elements(pair):
    a, b = pair
    rank = json.loads((b / "rank-0000" / "manifest.json").read_text())
    files = rank["files"]
    assert "cce.bin" in files and isinstance(files["cce.bin"], dict)
    # (a key of its own: bytes, records and sha256 record what diff compares itself, no
    # difference of their own, docs/CLI.md "diff")
    key = "note"
    assert key not in files["cce.bin"]
    files["cce.bin"][key] = "changed"
    rank["__new__"] = [1, 2]
    (b / "rank-0000" / "manifest.json").write_text(json.dumps(rank))
    (b / "rank-0001" / "manifest.json").write_text("[1, 2, 3]")
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json", "--max", "0"])
    doc = json.loads(res.stdout)
    by_where = {}
    for d in doc["differences"]:
        by_where.setdefault(d["where"], []).append(d)
    got = {tuple(d["path"]): d for d in by_where["rank-0000/manifest.json"]}
    assert got[("files", "cce.bin", key)]["b"] == "changed"
    assert got[("files", "cce.bin", key)]["field"] == f'files["cce.bin"].{key}'
    new = got[("__new__",)]
    assert new["a"] is None and new["a_present"] is False and new["b"] == [1, 2]
    assert new["b_present"] is True
    root = by_where["rank-0001/manifest.json"]
    assert [(d["field"], d["path"], d["b"]) for d in root] == [("(root)", ["(root)"], [1, 2, 3])]
    # a list changing length: its length, then the added (or removed) elements
    diffs = list(D._json_diff("m", {"x": [1, 2]}, {"x": [1, 2, 3, 4]}))
    assert [(d.field, d.a, d.b) for d in diffs] == [
        ("x (length)", 2, 4), ("x[2]", D.ABSENT, 3), ("x[3]", D.ABSENT, 4)]
    diffs = list(D._json_diff("m", [5, 6, 7], [5]))
    assert [(d.field, d.a, d.b) for d in diffs] == [
        ("(root) (length)", 3, 1), ("[1]", 6, D.ABSENT), ("[2]", 7, D.ABSENT)]


def test_the_top_level_help_names_every_command():
    from nrtrewrite.cli.commands import COMMANDS
    res = CliRunner().invoke(main, ["--help"])
    summary = res.output.split("Options:")[0]
    assert res.exit_code == 0 and all(name in summary for name in COMMANDS), summary


def _neff_of(folder):
    return folder / json.loads((folder / "manifest.json").read_text())["output_neff"]["name"]


def test_zero_bytes_after_the_neff_payload_are_a_difference(pair):
    # the reader accepts zero padding after data_size, simulate's sha256 does not
    import hashlib
    a, b = pair
    na, nb = _neff_of(a), _neff_of(b)
    data = na.read_bytes()
    nb.write_bytes(data + b"\0\0\0\0")
    diffs = D.diff_outputs(a, b)
    assert [(d.where, d.field, d.a, d.b) for d in diffs] == [
        (na.name, "size", len(data), len(data) + 4),
        (na.name, "sha256", hashlib.sha256(data).hexdigest(),
         hashlib.sha256(data + bytes(4)).hexdigest())]
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["identical"] is False and doc["count"] == 1
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and f"{na.name} sha256: " in res.stdout


def test_another_gzip_encoding_of_the_same_members_is_a_difference(pair):
    import gzip
    import hashlib
    from nrtrewrite.neff.container import HEADER_SIZE, build_tar, read_container, wrap_payload
    a, b = pair
    na, nb = _neff_of(a), _neff_of(b)
    data = na.read_bytes()
    c = read_container(data, verify_hash=False)
    tar = gzip.decompress(data[HEADER_SIZE:HEADER_SIZE + c.header.data_size])
    assert tar == build_tar(list(c.members.items())), "the payload is build_tar's gzip"
    # level 1 instead of 9: the header's data_size and hash follow, the members are the same
    nb.write_bytes(wrap_payload(c.header, gzip.compress(tar, compresslevel=1, mtime=0)))
    assert nb.read_bytes() != data
    cb = read_container(nb.read_bytes(), verify_hash=True)
    assert {k: bytes(v) for k, v in cb.members.items()} == {
        k: bytes(v) for k, v in c.members.items()}
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and "identical" not in res.stdout, res.stdout
    # the gzip header's mtime changed, the header kept: no field and no member differs, the
    # bytes do (same size: the sha256 only)
    other = bytearray(data)
    other[HEADER_SIZE + 4] ^= 0x01
    nb.write_bytes(bytes(other))
    diffs = D.diff_outputs(a, b)
    assert [(d.where, d.field, d.a, d.b) for d in diffs] == [
        (na.name, "sha256", hashlib.sha256(data).hexdigest(),
         hashlib.sha256(bytes(other)).hexdigest())]


def test_json_stopped_by_an_error_is_still_one_json_document(pair, tmp_path):
    a, b = pair
    na = _neff_of(a)
    # B differs (a record), then A's NEFF cannot be read: the differences found so far, the
    # error, exit 2
    path = b / "rank-0000" / "dma.bin"
    data = bytearray(path.read_bytes())
    data[8] ^= 0x40
    path.write_bytes(bytes(data))
    na.write_bytes(na.read_bytes()[:-10])
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert [(d["where"], d["field"]) for d in doc["differences"]] == [
        ("rank-0000/dma.bin", "buf_ptr")]
    assert doc["count"] == 1 and doc["shown"] == 1 and doc["identical"] is None
    assert doc["error"].startswith(f"{na}: ") and "data_size" in doc["error"]
    assert f"nrtrewrite: error: {doc['error']}" in res.stderr
    # a torn record in A's artifact
    shutil.copyfile(_neff_of(b), na)
    with open(a / "rank-0001" / "dma.bin", "ab") as fh:
        fh.write(b"\x01\x02\x03\x04\x05")
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and doc["identical"] is None
    assert doc["error"] == f"{a / 'rank-0001' / 'dma.bin'}: " + (
        f"{(a / 'rank-0001' / 'dma.bin').stat().st_size} bytes is not a whole number of "
        f"16-byte records")
    # refused before anything is compared
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(main, ["diff", str(tmp_path / "empty"), str(b), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and doc["differences"] == [] and doc["count"] == 0
    assert "not an nrtrewrite output folder" in doc["error"]


def test_an_entry_named_as_the_other_sides_neff_is_still_compared(tmp_path):
    for n in ("x", "y"):
        shutil.copyfile(FIX / "ar2.neff", tmp_path / f"{n}.neff")
    a = lower_to(tmp_path / "x.neff", tmp_path / "A", None)
    b = lower_to(tmp_path / "y.neff", tmp_path / "B", None)
    assert _neff_of(a).name == "x.neff" and _neff_of(b).name == "y.neff"
    (a / "y.neff").write_text("garbage\n")
    diffs = D.diff_outputs(a, b)
    assert ("y.neff", "file", True, False) in {(d.where, d.field, d.a, d.b) for d in diffs}
    # the NEFFs themselves are still compared with each other (same bytes but the name)
    assert not any(d.where.startswith("x.neff") and d.field != "file" for d in diffs)
    # and the other way round: B's x.neff is an entry of B's own
    (a / "y.neff").unlink()
    (b / "x.neff").write_text("garbage\n")
    got = {(d.where, d.field, d.a, d.b) for d in D.diff_outputs(a, b)}
    assert ("x.neff", "file", False, True) in got and ("y.neff", "file", True, False) not in got


def test_counts_and_sizes_print_in_decimal_addresses_in_hex_as_dump_shows_them(pair):
    a, b = pair
    path = b / "rank-0000" / "dma.bin"
    data = path.read_bytes()
    n = len(data) // 16
    # three records more (the first three again, in front): every BD moves by three
    path.write_bytes(data[:48] + data)
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", "0"])
    lines = res.stdout.splitlines()
    assert f"rank-0000/dma.bin records: {n} != {n + 3}" in lines
    ra, rb = load_records(a / "rank-0000" / "dma.bin"), load_records(path)
    i = next(i for i in range(n) if ra[i]["buf_ptr"] != rb[i]["buf_ptr"])
    assert (f"rank-0000/dma.bin[{i}] buf_ptr: 0x{int(ra[i]['buf_ptr']):x} != "
            f"0x{int(rb[i]['buf_ptr']):x}") in lines
    # the NEFF's size and header's data_size: decimal
    na, nb = _neff_of(a), _neff_of(b)
    size = na.stat().st_size
    nb.write_bytes(na.read_bytes() + bytes(300))
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", "0"])
    assert f"{na.name} size: {size} != {size + 300}" in res.stdout.splitlines()
    assert not any("0x" in ln for ln in res.stdout.splitlines()
                   if "buf_ptr" not in ln and "addr" not in ln), res.stdout


def test_a_neff_header_that_is_not_whole_is_only_its_damage_line(pair):
    from nrtrewrite.neff.container import HEADER_FIELDS, HEADER_SIZE
    a, b = pair
    na, nb = _neff_of(a), _neff_of(b)
    data = na.read_bytes()
    nb.write_bytes(data[:700])
    diffs = D.diff_outputs(a, b)
    assert [(d.where, d.field) for d in diffs] == [(na.name, "damaged")]
    assert diffs[0].b == f"{nb}: file too short: 700 bytes, the header alone needs {HEADER_SIZE}"
    # A's short header: the error only, no header line before it
    nb.write_bytes(data)
    na.write_bytes(data[:700])
    (b / "rank-0000" / "manifest.json").write_text("{}")  # (so the folders differ)
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and "too short" in doc["error"]
    assert not any(d["where"] == na.name for d in doc["differences"])
    # two whole headers whose reserved bytes differ: the count and first offset, not 936 hex
    # digits (B's reader refuses non-zero reserved bytes: its damage line follows)
    off = HEADER_FIELDS["reserved"][0]
    na.write_bytes(data)
    other = bytearray(data)
    other[off + 10] = 7
    other[off + 20] = 9
    nb.write_bytes(bytes(other))
    diffs = [d for d in D.diff_outputs(a, b) if d.where == na.name]
    assert [(d.field, d.a, d.b) for d in diffs][0] == (
        f"header.reserved (2 differing bytes, the first at offset 0x{off + 10:x})", 0, 7)
    assert [d.field for d in diffs][1:] == ["damaged"]
    assert all(len(d.line()) < 300 for d in diffs)


def _replace_once(path, old, new):
    text = path.read_text()
    assert text.count(old) >= 1, old
    path.write_text(text.replace(old, new, 1))


def test_json_values_of_another_type_or_number_are_differences(pair):
    """Python's == called false and 0, 2 and 2.0, 1439 and 1439.0000000000001 equal: "identical",
    exit 0, for manifests of other bytes and other JSON."""
    a, b = pair
    n = json.loads((a / "manifest.json").read_text())["input"]["bytes"]
    assert isinstance(n, int)
    _replace_once(b / "manifest.json", '"format_version": 2,', '"format_version": 2.0,')
    _replace_once(b / "manifest.json", f'"bytes": {n},', f'"bytes": {n}.0000000000001,')
    _replace_once(b / "manifest.json", '"host_cc": false,', '"host_cc": 0,')
    _replace_once(b / "rank-0000" / "manifest.json", '"reporter": true,', '"reporter": 1,')
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [
        "manifest.json format_version: 2 != 2.0",
        f"manifest.json input.bytes: {n} != {n}.0000000000001",
        "manifest.json options.host_cc: false != 0",
        "rank-0000/manifest.json entries[0].reporter: true != 1",
        "4 difference(s)"]
    doc = json.loads(CliRunner().invoke(main, ["diff", str(a), str(b), "--json"]).stdout)
    got = {(d["where"], d["field"]): (d["a"], d["b"]) for d in doc["differences"]}
    assert doc["identical"] is False and doc["count"] == 4
    fv = got[("manifest.json", "format_version")]
    assert fv == (2, 2.0) and type(fv[0]) is int and type(fv[1]) is float
    assert got[("manifest.json", "options.host_cc")] == (False, 0)
    assert got[("manifest.json", "options.host_cc")][0] is False
    assert got[("rank-0000/manifest.json", "entries[0].reporter")][0] is True
    # the same values of the same types in other bytes: still no difference
    for p in (b / "manifest.json", b / "rank-0000" / "manifest.json"):
        shutil.copyfile(a / p.relative_to(b), p)
    man = (b / "manifest.json").read_text()
    (b / "manifest.json").write_text(json.dumps(json.loads(man), indent=3) + "\n\n")
    assert D.diff_outputs(a, b) == []


def _jdiff(x, y):
    from nrtrewrite import jsonin
    return [d.line() for d in D._json_diff(
        "m", jsonin.loads(x, strict_objects=False, exact_floats=True),
        jsonin.loads(y, strict_objects=False, exact_floats=True))]


@pytest.mark.parametrize("x,y,lines", [
    ('{"a": 1.0}', '{"a": 1.00}', []),  # one number in other bytes
    ('{"a": 1.0, "b": [true]}', '{"b": [true], "a": 1e0}', []),
    ('[1.5]', '[1.50000000000000001]', ["m [0]: 1.5 != 1.50000000000000001"]),  # one double
    ('{"a": {"b": [0, 1]}}', '{"a": {"b": [false, 1]}}', ["m a.b[0]: 0 != false"]),
    ('[[1], [1], [true]]', '[[true], [1], [1]]', ["m [0][0]: 1 != true", "m [2][0]: true != 1"]),
    ('{"a": null}', '{"a": 0}', ["m a: null != 0"]),
    ('{"a": "x"}', '{"a": ["x"]}', ['m a: "x" != ["x"]']),
    ('{"a": 1}', '{"a": 1, "b": {"c": 2.50}}', ['m b: <absent> != {"c": 2.5}']),
    ('7', '7.0', ["m (root): 7 != 7.0"]),
    ('["\u00e9"]', '["e"]', ['m [0]: "\u00e9" != "e"']),  # (the text as it is)
    ('["\\ud800"]', '["x"]', ['m [0]: "\\ud800" != "x"']),  # (no UTF-8 holds it: escaped)
])
def test_json_is_compared_by_type_and_exact_value(x, y, lines):
    assert _jdiff(x, y) == lines


def test_a_key_twice_is_damage_in_b_and_an_error_in_a(pair):
    a, b = pair
    n = json.loads((a / "manifest.json").read_text())["input"]["bytes"]
    # B states input.bytes twice, the last one A's: JSON reads A's value
    _replace_once(b / "manifest.json", f'"bytes": {n},', f'"bytes": 9, "bytes": {n},')
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and res.stdout.splitlines() == [
        "manifest.json damaged in B: field input.bytes: invalid JSON: duplicate key 'bytes'",
        "1 difference(s)"]
    line = _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)]))
    assert line == (f"nrtrewrite: error: {b}/manifest.json: field input.bytes: invalid JSON: "
                    "duplicate key 'bytes'")
    shutil.copyfile(a / "manifest.json", b / "manifest.json")
    _replace_once(b / "rank-0001" / "manifest.json", '"leg":', '"leg": "x", "leg":')
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and res.stdout.splitlines() == [
        "rank-0001/manifest.json damaged in B: field entries[0].leg: invalid JSON: "
        "duplicate key 'leg'",
        "1 difference(s)"]
    line = _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)]))
    assert line == (f"nrtrewrite: error: {b}/rank-0001/manifest.json: field entries[0].leg: "
                    "invalid JSON: duplicate key 'leg'")


@pytest.mark.parametrize("args,message", [
    (["{a}", "{missing}"], "Invalid value for 'B': Directory '{missing}' does not exist."),
    (["{a}", "{file}"], "Invalid value for 'B': '{file}' is a file, not an output folder"),
    (["{missing}", "{b}"], "Invalid value for 'A': Directory '{missing}' does not exist."),
    (["{a}", "{b}", "--max", "-1"], "Invalid value for '--max': -1 is not in the range x>=0."),
    (["{a}", "{b}", "--max", "x"],
     "Invalid value for '--max': 'x' is not a valid integer."),
    (["{a}"], "Missing argument 'B'."),
    (["{a}", "{b}", "{b}"], "Got unexpected extra argument ('{b}')"),
])
def test_json_with_a_usage_error_is_still_one_json_document(pair, tmp_path, args, message):
    """click checks the arguments before the command runs: its usage error left stdout empty
    with --json (exit 2)."""
    a, b = pair
    names = {"a": a, "b": b, "missing": tmp_path / "missing",
             "file": a / "manifest.json"}
    args = [x.format(**names) for x in args]
    message = message.format(**names)
    for line in (["diff", "--json", *args], ["diff", *args, "--json"]):
        res = CliRunner().invoke(main, line, prog_name="nrtrewrite")
        assert res.exit_code == 2
        assert json.loads(res.stdout) == {"differences": [], "files": [], "count": 0,
                                          "shown": 0, "identical": None, "error": message}
        assert res.stderr == (f"nrtrewrite diff: error: {message} (see 'nrtrewrite diff "
                              "--help')\n")
    res = CliRunner().invoke(main, ["diff", *args], prog_name="nrtrewrite")
    assert res.exit_code == 2 and res.stdout == ""
    # after "--", "--json" is a folder's name
    res = CliRunner().invoke(main, ["diff", "--", str(a), "--json"], prog_name="nrtrewrite")
    assert res.exit_code == 2 and res.stdout == ""


def test_a_string_no_utf8_holds_is_shown_escaped(pair):
    """A JSON ``\\ud800`` escape decodes to a lone surrogate: shown as JSON's escape, not
    written raw (which no UTF-8 standard output can take)."""
    a, b = pair
    _replace_once(b / "rank-0000" / "manifest.json", '"leg": "flat"', '"leg": "\\ud800"')
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and res.stdout.splitlines() == [
        'rank-0000/manifest.json entries[0].leg: "flat" != "\\ud800"', "1 difference(s)"]


def test_only_rank_nnnn_folders_are_rank_folders(pair):
    """``lower`` names its rank folders ``rank-`` and digits; a folder ``rank-notes`` on both
    sides is a foreign entry, compared by its files' bytes, not parsed as a rank's
    manifest (which reported the fields of a manifest that is none)."""
    a, b = pair
    for side, text in ((a, "{}\n"), (b, (a / "rank-0000" / "manifest.json").read_text())):
        (side / "rank-notes").mkdir()
        (side / "rank-notes" / "manifest.json").write_text(text)
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines[-1] == "1 difference(s)"
    assert lines[0].startswith("rank-notes/manifest.json sha256: ")


def test_neff_header_strings_are_shown_as_text_whatever_their_size(pair):
    """``name`` (256 bytes) and ``neff_build_version`` (128) are text (CLI.md), not a
    differing-byte count like the 468 ``reserved`` bytes: ``header.name: 'ar2' != 'mr2'``
    where it said ``header.name (1 differing bytes, the first at offset 0xdc): 97 != 109``."""
    from nrtrewrite.neff.container import HEADER_FIELDS
    a, b = pair
    na, nb = _neff_of(a), _neff_of(b)
    data = bytearray(na.read_bytes())
    off, size = HEADER_FIELDS["name"]
    data[off:off + size] = b"model-b".ljust(size, b"\0")
    off, size = HEADER_FIELDS["neff_build_version"]
    data[off:off + size] = b"2.99.0+build".ljust(size, b"\0")
    nb.write_bytes(bytes(data))
    a_header = na.read_bytes()
    want_name = a_header[HEADER_FIELDS["name"][0]:].split(b"\0")[0].decode()
    want_ver = a_header[HEADER_FIELDS["neff_build_version"][0]:].split(b"\0")[0].decode()
    shown = {d.field: (d.a, d.b) for d in D.diff_outputs(a, b) if d.where == na.name}
    assert shown["header.name"] == (want_name, "model-b")
    assert shown["header.neff_build_version"] == (want_ver, "2.99.0+build")


def test_ignore_leaves_named_top_manifest_keys_out(pair):
    """CI across versions or file names: ``--ignore tool_version`` and ``--ignore input.name``
    leave those values out; everything else, a sibling key in the same object included, is
    still compared; a key path outside the ignorable ones is a usage error."""
    a, b = pair
    man = json.loads((b / "manifest.json").read_text())
    man["tool_version"] = "99.0"
    man["input"]["name"] = "renamed.neff"
    man["input"]["bytes"] += 1
    (b / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True))
    fields = [d.field for d in D.diff_outputs(a, b)]
    assert fields == ["input.bytes", "input.name", "tool_version"]
    rep = D.compare(a, b, D.Report(None), ignore=("tool_version", "input.name"))
    assert rep.count == 1
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--ignore", "tool_version",
                                    "--ignore", "input.name"])
    assert res.exit_code == 1 and res.stdout.splitlines() == [
        f"manifest.json input.bytes: {man['input']['bytes'] - 1} != {man['input']['bytes']}",
        "1 difference(s)"]
    for bad in ("rank_manifests", "format", "input..name", ""):
        res = CliRunner().invoke(main, ["diff", str(a), str(b), "--ignore", bad])
        assert res.exit_code == 2 and "Invalid value for '--ignore'" in res.stderr


def test_a_neff_truncated_while_diff_reads_it_is_damage(pair, monkeypatch):
    """B's rewritten NEFF cut short by another process while diff walks it is one damaged
    line: the NEFFs were memory-mapped, and reading a truncated map ended diff with SIGBUS,
    no message (a fault audit)."""
    from nrtrewrite.neff.container import HEADER_SIZE
    a, b = pair
    name = json.loads((a / "manifest.json").read_text())["output_neff"]["name"]
    neff = b / name
    size = neff.stat().st_size
    with open(neff, "ab") as fh:  # zero bytes after the payload: read, and other bytes
        fh.write(bytes(64))
    real = D._NeffFile.walk

    def walk(self):
        members = real(self)  # (the header and the tail checked)
        if self.path == neff:
            os.truncate(neff, HEADER_SIZE + 64)
        return members

    monkeypatch.setattr(D._NeffFile, "walk", walk)
    diffs = D.diff_outputs(a, b)
    assert [(d.where, d.field) for d in diffs] == [(name, "damaged")]
    assert diffs[0].b == (f"{neff}: changed while being read (it held {size + 64} bytes, "
                          f"now ends at byte {HEADER_SIZE + 64})")


def test_diff_opens_no_fifo_and_follows_no_link(tmp_path):
    """Every file diff reads is opened without blocking and without following a link, and
    must be a regular file once open: a FIFO renamed into a checked file's place would
    have blocked the open forever (found by an audit)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        D._open_regular(fifo)  # (returns at once: no writer needed)
    target = tmp_path / "t"
    target.write_bytes(b"x")
    link = tmp_path / "l"
    link.symlink_to(target)
    with pytest.raises(OSError):
        D._open_regular(link)
    with D._open_regular(target) as fh:
        assert fh.read() == b"x"


# ---------------------------------------------------------------------------
# a mutation audit of diff's source (docs/RELIABILITY.md, eighth round): what each test pins
# was worked out from docs/CLI.md "diff" and the record layouts of docs/FORMATS.md

def test_a_files_count_line_counts_the_compared_records_and_names_only_differing_fields(pair):
    """One BD of B's dma.bin with its buf_ptr changed (FORMATS §5: bytes 8..15 of the
    16-byte BD) and one BD more: the count is of the min(NA, NB) records compared, and only
    buf_ptr, the one field that differs, is named (CLI.md: "fields that never differ are
    left out of the text")."""
    a, b = pair
    path = b / "rank-0000" / "dma.bin"
    data = bytearray(path.read_bytes())
    n = len(data) // 16
    old = int.from_bytes(data[2 * 16 + 8:2 * 16 + 16], "little")
    data[2 * 16 + 8] ^= 0x08  # BD 2, buf_ptr's low byte
    path.write_bytes(bytes(data) + bytes(data[-16:]))
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", "0"])
    assert res.exit_code == 1 and res.stdout.splitlines() == [
        f"rank-0000/dma.bin records: {n} != {n + 1}",
        f"rank-0000/dma.bin[2] buf_ptr: 0x{old:x} != 0x{old ^ 0x08:x}",
        f"rank-0000/dma.bin: 1 of {n} records differ (buf_ptr 1)",
        "2 difference(s)"]
    doc = json.loads(CliRunner().invoke(main, ["diff", str(a), str(b), "--json"]).stdout)
    assert doc["files"] == [{"where": "rank-0000/dma.bin", "records_a": n, "records_b": n + 1,
                             "differing_records": 1,
                             "fields": {"len_ctrl": 0, "meta_ctrl": 0, "buf_ptr": 1}}]


def test_a_block_is_at_least_one_record(pair, monkeypatch):
    """CHUNK_BYTES below a record's size still compares record by record (one a block)."""
    a, b = pair
    path = b / "rank-0001" / "sem.bin"
    data = bytearray(path.read_bytes())
    n = len(data) // 16
    data[(n - 1) * 16 + 4] ^= 0x01  # the last semaphore BD's value (FORMATS §7: bytes 4..7)
    path.write_bytes(bytes(data))
    monkeypatch.setattr(D, "CHUNK_BYTES", 5)
    assert [(d.where, d.record, d.field) for d in D.diff_outputs(a, b)] == [
        ("rank-0001/sem.bin", n - 1, "value")]


def test_a_key_of_letters_digits_dashes_and_underscores_is_shown_unquoted(pair):
    """``rank_manifests`` is keyed by rank folder names (FORMATS §1.1): a plain name, shown
    after a dot (``files["cce.bin"]``, whose dot would be ambiguous, is quoted)."""
    a, b = pair
    man = json.loads((b / "manifest.json").read_text())
    old = man["rank_manifests"]["rank-0001"]
    man["rank_manifests"]["rank-0001"] = "0" * 64
    (b / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    # (a checksum of a file compared itself, identical here: no difference, its note names
    # the key, docs/CLI.md "diff")
    notes = []
    rep = D.compare(a, b, D.Report(on_checksum=lambda lines, covers: notes.extend(lines)))
    assert rep.count == 0
    assert [d.line() for d in notes] == [
        f'manifest.json rank_manifests.rank-0001: "{old}" != "{"0" * 64}"']


def test_a_field_of_several_elements_counts_a_record_once_if_any_element_differs(pair):
    """sb2sb.bin (FORMATS §4): src is the TENSOR3D at byte 16, its num_elem the three u16 at
    its bytes 10..15, so byte 30 is src.num_elem[2] (1) of word 0: one of three elements
    differing makes the record count for src.num_elem."""
    a, b = pair
    path = b / "rank-0000" / "sb2sb.bin"
    data = bytearray(path.read_bytes())
    n = len(data) // 64
    assert data[30:32] == b"\x01\x00"
    data[30] = 3
    path.write_bytes(bytes(data))
    files = []
    D.compare(a, b, D.Report(None, on_file=files.append))
    assert [f.line() for f in files] == [
        f"rank-0000/sb2sb.bin: 1 of {n} records differ (src.num_elem 1)"]


def test_a_file_whose_compared_records_are_equal_has_no_count_line(pair):
    """B's dma.bin one BD longer, its first NA BDs A's: one difference, the record count; no
    ``N of M records differ`` line, no ``files`` entry (CLI.md: after each artifact file
    whose records differ)."""
    a, b = pair
    path = b / "rank-0000" / "dma.bin"
    data = path.read_bytes()
    n = len(data) // 16
    path.write_bytes(data + data[:16])
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and res.stdout.splitlines() == [
        f"rank-0000/dma.bin records: {n} != {n + 1}", "1 difference(s)"]
    doc = json.loads(CliRunner().invoke(main, ["diff", str(a), str(b), "--json"]).stdout)
    assert doc["files"] == [] and doc["count"] == 1


def test_the_whole_records_of_a_torn_file_in_b_are_still_compared(pair):
    """B's cce.bin with record 1 changed and a byte more: its damage line, then record 1
    (CLI.md: "its whole records are still compared"), two differences."""
    a, b = pair
    path = b / "rank-0000" / "cce.bin"
    data = bytearray(path.read_bytes())
    n = len(data) // 16
    data[16 + 4] ^= 0x01  # record 1, w1 (FORMATS §6: four u32 words)
    path.write_bytes(bytes(data) + b"\0")
    diffs = D.diff_outputs(a, b)
    assert [(d.where, d.record, d.field == "damaged") for d in diffs][:2] == [
        ("rank-0000/cce.bin", None, True), ("rank-0000/cce.bin", 1, False)]
    assert diffs[0].b == f"{n * 16 + 1} bytes is not a whole number of 16-byte records"
    files = []
    assert D.compare(a, b, D.Report(None, on_file=files.append)).count == 2
    assert [f.line() for f in files] == [f"rank-0000/cce.bin: 1 of {n} records differ (w1 1)"]


def test_equal_entries_lower_does_not_write_are_no_difference(pair):
    """An extra file of the same bytes and a link of the same target on both sides are no
    difference; a link whose target differs is ``WHERE target: A != B`` (CLI.md)."""
    a, b = pair
    for side in (a, b):
        (side / "notes.txt").write_text("same\n")
        (side / "latest").symlink_to("rank-0000")
    (a / "rank-0000" / "prev").symlink_to("y")
    (b / "rank-0000" / "prev").symlink_to("z")
    assert [d.line() for d in D.diff_outputs(a, b)] == ["rank-0000/prev target: 'y' != 'z'"]


def test_manifests_of_equal_bytes_are_not_parsed_so_a_key_twice_there_is_no_error(pair):
    """CLI.md: the key-twice check "is not made for a manifest whose bytes are equal": the
    same damaged top-level and rank manifests on both sides are identical, exit 0."""
    a, b = pair
    n = json.loads((a / "manifest.json").read_text())["input"]["bytes"]
    for side in (a, b):
        _replace_once(side / "manifest.json", f'"bytes": {n},', f'"bytes": 9, "bytes": {n},')
        _replace_once(side / "rank-0001" / "manifest.json", '"leg":', '"leg": "x", "leg":')
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert (res.exit_code, res.stdout) == (0, "identical\n"), res.output


def test_a_file_named_as_a_rank_folder_is_compared_as_an_entry(pair):
    """``rank-0009`` a file on both sides is no rank folder (CLI.md: a rank folder is a
    folder): an entry lower does not write, compared by its bytes' sha256."""
    import hashlib
    a, b = pair
    (a / "rank-0009").write_bytes(b"a")
    (b / "rank-0009").write_bytes(b"b")
    assert [(d.where, d.field, d.a, d.b) for d in D.diff_outputs(a, b)] == [
        ("rank-0009", "sha256", hashlib.sha256(b"a").hexdigest(),
         hashlib.sha256(b"b").hexdigest())]


def test_ignore_of_a_key_in_one_manifest_only_ignores_it_without_a_warning(pair):
    """``--ignore options.extra`` where only B's manifest has it: it names a value (CLI.md
    warns of a path "in neither manifest"), the difference is left out, exit 0; and
    ``topology`` is one of the keys that may be ignored, whole."""
    a, b = pair
    man = json.loads((b / "manifest.json").read_text())
    man["options"]["extra"] = 1
    man["topology"]["name"] = "elsewhere"
    (b / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--ignore", "options.extra",
                                    "--ignore", "topology"])
    assert (res.exit_code, res.stdout, res.stderr) == (0, "identical\n", "")


def test_an_instructions_opcode_is_one_of_its_named_header_fields(pair):
    """Byte 0 of a 64-byte instruction is its opcode (CLI.md: the header fields `opcode` ...
    `semaphore_value`): named, not an operand-byte run."""
    a, b = pair
    neff = _neff_of(a).name
    ops = []

    def edit(members):
        word = bytearray(members["sg00/sp.bin"])
        ops.append(word[64])
        word[64] ^= 0x01  # instruction 1, opcode
        members["sg00/sp.bin"] = bytes(word)

    _rebuild_neff(b / neff, edit)
    got = [(d.record, d.field, d.a, d.b) for d in D.diff_outputs(a, b)
           if d.where == f"{neff}:sg00/sp.bin"]
    assert got == [(1, "opcode", ops[0], ops[0] ^ 0x01)]


def test_a_bin_member_of_whole_instructions_on_one_side_only_is_compared_by_bytes(pair):
    """B's sg00/sp.bin (4 instructions, 256 bytes, in A) with 3 bytes more is no instruction
    stream on both sides (CLI.md: a `.bin` member of whole 64-byte instructions): its byte
    counts only, and no differing-bytes line, its first 256 bytes being A's."""
    a, b = pair
    neff = _neff_of(a).name
    _rebuild_neff(b / neff, lambda m: m.update({"sg00/sp.bin": m["sg00/sp.bin"] + b"abc"}))
    got = [(d.record, d.field, d.a, d.b) for d in D.diff_outputs(a, b)
           if d.where == f"{neff}:sg00/sp.bin"]
    assert got == [(None, "bytes", 256, 259)]


def test_the_ci_recipe_across_versions_and_file_names_is_identical(pair):
    """CLI.md's recipe, ``--ignore tool_version --ignore input.name --ignore
    output_neff.name``, on B lowered from the same model under another name by another
    version: identical, exit 0, no warning (each path names a value in both manifests), the
    NEFFs compared under each side's own name; a NEFF byte changed is still found.  The
    other version is the one line on stderr, a note (since 2026-12-06, fixer 48b)."""
    a, b = pair
    man = json.loads((b / "manifest.json").read_text())
    old = man["output_neff"]["name"]
    ours = man["tool_version"]
    (b / old).rename(b / "renamed.neff")
    man["tool_version"] = "99.0"
    man["input"]["name"] = "renamed.neff"
    man["output_neff"]["name"] = "renamed.neff"
    (b / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    args = ["diff", str(a), str(b), "--ignore", "tool_version", "--ignore", "input.name",
            "--ignore", "output_neff.name"]
    res = CliRunner().invoke(main, args)
    note = (f"nrtrewrite: note: the outputs' versions differ: {a}/manifest.json has "
            f"format_version 2, tool_version \"{ours}\"; {b}/manifest.json has format_version "
            "2, tool_version \"99.0\"; differences may come from the versions alone\n")
    assert (res.exit_code, res.stdout, res.stderr) == (0, "identical\n", note)
    (b / "renamed.neff").write_bytes((a / old).read_bytes() + bytes(4))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and res.stdout.splitlines()[0].startswith(f"{old} size: ")


def test_one_more_difference_is_singular(pair):
    a, b = pair
    path = b / "rank-0000" / "dma.bin"
    path.write_bytes(bytes(x ^ 0xFF for x in path.read_bytes()))
    n = path.stat().st_size // F.BD_DTYPE.itemsize
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", str(n - 1)])
    assert res.exit_code == 1 and res.stdout.splitlines()[-2:] == [
        "... 1 more difference (--max 0 shows all)", f"{n} difference(s)"]


def test_the_net_ops_complete_addresses_are_hex_as_the_handshakes_they_repeat(tmp_path):
    """FORMATS §8.1: inc_send_complete / inc_recv_complete are the same addresses as the
    handshakes; diff showed those in hex and these in decimal (a CI tester)."""
    import meshcase  # (tests/ is on sys.path: conftest's folder)
    a, b = tmp_path / "a", tmp_path / "b"
    meshcase.lower(meshcase.spec([[0, 128]], [("all_reduce", "bf16", "add", 4000)]), a)
    shutil.copytree(a, b)
    ops = b / "rank-0000" / "net_ops.bin"
    rec = bytearray(ops.read_bytes())
    assert len(rec) >= F.ARTIFACTS["net_ops.bin"][0].itemsize
    arr = np.frombuffer(bytes(rec), F.ARTIFACTS["net_ops.bin"][0]).copy()
    old = int(arr["inc_send_complete"][0])
    arr["inc_send_complete"][0] = old + 8
    arr["inc_send_handshake"][0] = old + 8
    ops.write_bytes(arr.tobytes())
    lines = [d.line() for d in D.diff_outputs(a, b)]
    assert f"rank-0000/net_ops.bin[0] inc_send_complete: {old:#x} != {old + 8:#x}" in lines
    assert f"rank-0000/net_ops.bin[0] inc_send_handshake: {old:#x} != {old + 8:#x}" in lines


def test_extra_files_are_compared_a_block_at_a_time_whatever_their_size(pair, monkeypatch):
    """An entry lower does not write is compared, and its sha256 taken, CHUNK_BYTES at a time
    (CLI.md), never read whole: 64 MiB sparse files (1 MiB blocks here), equal and then
    differing in their last byte, keep diff's traced peak under 8 MiB, where reading either
    file whole would take 64 MiB.  (No size limit is needed: nothing else is kept.)"""
    import hashlib
    import tracemalloc

    a, b = pair
    size = 64 << 20
    for side in (a, b):
        with open(side / "big.bin", "wb") as fh:
            fh.truncate(size)
    monkeypatch.setattr(D, "CHUNK_BYTES", 1 << 20)
    peaks = []
    for last in (None, b"\x01"):
        if last:
            with open(b / "big.bin", "r+b") as fh:
                fh.seek(size - 1)
                fh.write(last)
        tracemalloc.start()
        try:
            lines = [(d.where, d.field, d.a, d.b) for d in D.diff_outputs(a, b)]
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        zeros = hashlib.sha256(bytes(size)).hexdigest()
        assert lines == ([] if last is None else [
            ("big.bin", "sha256", zeros,
             hashlib.sha256(bytes(size - 1) + last).hexdigest())])
    assert max(peaks) < 8 << 20, [p / (1 << 20) for p in peaks]


def test_diff_of_a_golden_archive_says_to_extract_it(tmp_path):
    """Bug (review 51d): ``diff fixtures/golden/ar2.tar.gz OUT`` said ``Directory '...' is a
    file.``, calling the file a folder and not saying what to do; docs/CLI.md "diff" says a
    golden archive is extracted first.  Now one line saying it is a file and, for a tar or
    tar.gz (by name or by its gzip bytes), the extraction; the recipe, run, then compares."""
    golden = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "ar2.tar.gz"
    plain = tmp_path / "ar2-golden"  # (a gzip file whose name does not say so)
    shutil.copyfile(golden, plain)
    neff = Path(__file__).resolve().parents[1] / "fixtures" / "ar2.neff"
    for args, line in [
        ([golden, tmp_path], f"Invalid value for 'A': '{golden}' is a file, not an output "
         "folder: extract a golden archive first, D=$(mktemp -d) && "
         f"tar xzf {golden} -C \"$D\", then diff \"$D\" (docs/CLI.md \"diff\")"),
        ([tmp_path, plain], f"Invalid value for 'B': '{plain}' is a file, not an output "
         "folder: extract a golden archive first, D=$(mktemp -d) && "
         f"tar xzf {plain} -C \"$D\", then diff \"$D\" (docs/CLI.md \"diff\")"),
        ([tmp_path, neff], f"Invalid value for 'B': '{neff}' is a file, not an output folder"),
    ]:
        res = CliRunner().invoke(main, ["diff", *map(str, args)], prog_name="nrtrewrite")
        assert _one_line_error(res) == (f"nrtrewrite diff: error: {line} "
                                        "(see 'nrtrewrite diff --help')")
        assert "Directory" not in res.stderr
    import subprocess
    extracted = tmp_path / "golden"
    extracted.mkdir()
    subprocess.run(["tar", "xzf", str(golden), "-C", str(extracted)], check=True)
    out = lower_to(neff, tmp_path / "out", None)
    res = CliRunner().invoke(main, ["diff", str(extracted), str(out)])
    assert res.exit_code == 0, res.output


def test_diff_of_a_plain_tar_says_tar_xf_and_the_recipe_runs(tmp_path):
    """Bug (review 51r): a plain (uncompressed) tar got ``tar xzf plain.tar``, which tar
    refuses (not gzip); the flags follow the file's bytes: ``xf`` for a tar's ``ustar``
    header, ``xzf`` for gzip, whatever the name says.  Run as printed, each recipe extracts
    an output diff compares."""
    import shlex
    import subprocess
    import tarfile
    golden = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "ar2.tar.gz"
    extracted = tmp_path / "x"
    extracted.mkdir()
    with tarfile.open(golden) as tar:
        tar.extractall(extracted, filter="data")
    plain, liar = tmp_path / "plain.tar", tmp_path / "liar.tar.gz"  # (liar: not gzip)
    for path in (plain, liar):
        with tarfile.open(path, "w") as tar:  # uncompressed
            tar.add(extracted, arcname=".")
    gz = tmp_path / "g.tar"  # (gzip bytes under a plain tar's name)
    shutil.copyfile(golden, gz)
    for path, flags in ((plain, "xf"), (liar, "xf"), (gz, "xzf")):
        res = CliRunner().invoke(main, ["diff", str(path), str(extracted)],
                                 prog_name="nrtrewrite")
        recipe = (f"D=$(mktemp -d) && tar {flags} {shlex.quote(str(path))} -C \"$D\", "
                  "then diff \"$D\"")
        assert recipe in _one_line_error(res), res.stderr
        out = Path(subprocess.run(recipe.split(", then")[0] + ' && printf %s "$D"',
                                  shell=True, check=True, capture_output=True, text=True,
                                  env={**os.environ, "TMPDIR": str(tmp_path)}).stdout)
        res = CliRunner().invoke(main, ["diff", str(out), str(extracted)])
        assert res.exit_code == 0, res.output


def test_a_manifests_count_line_comes_past_max(pair):
    """RELIABILITY §6, the fifty-sixth session's "Left": past ``--max`` a manifest got no
    count line (artifacts and instruction streams do).  Now, where ``--max`` leaves out some
    of a manifest's differing values, after its shown lines: ``WHERE: K of N differing
    values shown (KEY n, ...)``, K shown of N, per top-level key (in ``--json``, ``values``).
    By hand: B's top manifest gets ``input.extra`` and ``input.name`` (input 2),
    ``triggers[0].chunk.pgta`` + 7 (triggers 1), ``zz_a`` and ``zz_b`` (1 each): 5 values;
    rank 0's manifest ``k1``, ``k2``, ``k3`` (3; its checksum in the top manifest left stale:
    its file differs, so no line, CLI.md).  Sorted keys: input, triggers, zz_a, zz_b."""
    a, b = pair
    top = json.loads((b / "manifest.json").read_text())
    name = top["input"]["name"]
    pgta = top["triggers"][0]["chunk"]["pgta"]
    top["input"]["name"] = "x.neff"
    top["input"]["extra"] = 1
    top["triggers"][0]["chunk"]["pgta"] += 7
    top["zz_a"], top["zz_b"] = True, [1]
    (b / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rank = json.loads((b / "rank-0000" / "manifest.json").read_text())
    rank.update(k1=1, k2=2, k3=3)
    (b / "rank-0000" / "manifest.json").write_text(json.dumps(rank, indent=1) + "\n")
    lines = ["manifest.json input.extra: <absent> != 1",
             f'manifest.json input.name: "{name}" != "x.neff"',
             f"manifest.json triggers[0].chunk.pgta: {pgta} != {pgta + 7}",
             "manifest.json zz_a: <absent> != true",
             "manifest.json zz_b: <absent> != [1]",
             "rank-0000/manifest.json k1: <absent> != 1",
             "rank-0000/manifest.json k2: <absent> != 2",
             "rank-0000/manifest.json k3: <absent> != 3"]
    top_count = ("manifest.json: {} of 5 differing values shown (input 2, triggers 1, zz_a 1, "
                 "zz_b 1)")
    rank_count = "rank-0000/manifest.json: {} of 3 differing values shown (k1 1, k2 1, k3 1)"

    def run(*args):
        res = CliRunner().invoke(main, ["diff", str(a), str(b), *args])
        assert res.exit_code == 1
        return res.stdout.splitlines()

    more = "... {} more differences (--max 0 shows all)"
    assert run("--max", "2") == [*lines[:2], top_count.format(2), rank_count.format(0),
                                 more.format(6), "8 difference(s)"]
    assert run("--max", "6") == [*lines[:6], rank_count.format(1), more.format(2),
                                 "8 difference(s)"]
    assert run("--max", "5") == [*lines[:5], rank_count.format(0), more.format(3),
                                 "8 difference(s)"]
    for n in ("0", "8", "50"):  # (all shown: no count line, as before)
        assert run("--max", n) == [*lines, "8 difference(s)"]
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json", "--max", "2"])
    doc = json.loads(res.stdout)
    assert (doc["count"], doc["shown"]) == (8, 2)
    assert doc["values"] == [
        {"where": "manifest.json", "differing_values": 5, "shown": 2,
         "keys": {"input": 2, "triggers": 1, "zz_a": 1, "zz_b": 1}},
        {"where": "rank-0000/manifest.json", "differing_values": 3, "shown": 0,
         "keys": {"k1": 1, "k2": 1, "k3": 1}}]
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"])
    assert "values" not in json.loads(res.stdout)


def test_a_neff_json_members_count_line_comes_past_max(pair):
    """The same for a JSON member of the rewritten NEFF (RELIABILITY §6, fifty-sixth
    session's "Left"): B's ``neff.json`` ``{"neff_like_version": 1, "subgraphs": ["sg00"]}``
    (NEFF-LIKE.md) made ``{..., "subgraphs": ["sg00", "sg01", "sg02"], "x": 1}``: the
    list's length and its two added elements (subgraphs 3) and ``x`` (1), 4 values, after
    the NEFF's header lines (``data_size`` when the payload's size changed, ``hash``).  A
    member whose document is no object counts every line under ``(root)``."""
    a, b = pair
    neff = _neff_of(a)

    def edit(members):
        doc = json.loads(members["neff.json"])
        assert doc == {"neff_like_version": 1, "subgraphs": ["sg00"]}
        doc["subgraphs"] += ["sg01", "sg02"]
        doc["x"] = 1
        members["neff.json"] = json.dumps(doc).encode()

    _rebuild_neff(b / neff.name, edit)
    da, db = neff.read_bytes(), (b / neff.name).read_bytes()
    size_a, size_b = (int.from_bytes(x[16:24], "little") for x in (da, db))
    header = [f"{neff.name} header.data_size: {size_a} != {size_b}"] if size_a != size_b else []
    header.append(f"{neff.name} header.hash: '{da[172:204].hex()}' != '{db[172:204].hex()}'")
    m = f"{neff.name}:neff.json"
    lines = [f"{m} subgraphs (length): 1 != 3", f'{m} subgraphs[1]: <absent> != "sg01"',
             f'{m} subgraphs[2]: <absent> != "sg02"', f"{m} x: <absent> != 1"]
    n = len(header) + 4
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", str(len(header) + 1)])
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [
        *header, lines[0], f"{m}: 1 of 4 differing values shown (subgraphs 3, x 1)",
        "... 3 more differences (--max 0 shows all)", f"{n} difference(s)"]
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", "0"])
    assert res.stdout.splitlines() == [*header, *lines, f"{n} difference(s)"]
    doc = json.loads(CliRunner().invoke(main, ["diff", str(a), str(b), "--json", "--max",
                                               "1"]).stdout)
    assert doc["values"] == [{"where": m, "differing_values": 4, "shown": 0,
                              "keys": {"subgraphs": 3, "x": 1}}]
    # a document that is no object: every line under (root), by the unit (Report)
    got = []
    rep = D.Report(1, on_values=got.append)
    D._member_diff(rep, "m.neff:l.json", b"[1, 2]", b"[1, 3, 4]")
    assert (rep.count, rep.shown) == (3, 1)  # (length), [1], [2]
    assert [v.line() for v in got] == [
        "m.neff:l.json: 1 of 3 differing values shown ((root) 3)"]


def test_a_count_line_names_eight_top_level_keys_and_counts_the_rest():
    """A JSON member's top-level keys are the model's, unbounded (review 57m: 10,500
    differing keys made one 105,055-character line): the text line names the first 8 keys
    in the order their lines came, then counts the rest, keys and lines (CLI.md "diff");
    ``--json`` ``keys`` keeps every one, each written as a line's ``field`` (``a.b`` is
    ``["a.b"]``)."""
    a = {f"k{i:02d}": 0 for i in range(12)}
    b = {f"k{i:02d}": 1 for i in range(12)}
    b["k11"] = [1, 2]  # k11: one value line (0 != [1, 2])
    a["a.b"], b["a.b"] = [1], [1, 2]  # (length) and [1] added: 2 lines under a.b
    got = []
    rep = D.Report(1, on_values=got.append)
    D._member_diff(rep, "m.neff:w.json", json.dumps(a).encode(), json.dumps(b).encode())
    assert (rep.count, rep.shown) == (14, 1)
    keys = {**{f"k{i:02d}": 1 for i in range(12)}, '["a.b"]': 2}
    assert got[0].keys == keys
    # the lines come in the keys' sorted order ('"' of ["a.b"] before k): a.b's 2 lines
    # first, then k00 .. k06 named; k07 .. k11 counted
    named = ", ".join(['["a.b"] 2'] + [f"k{i:02d} 1" for i in range(7)])
    assert got[0].line() == (f"m.neff:w.json: 1 of 14 differing values shown ({named}, "
                             "5 more keys with 5 lines)")
    one = D.ValueCount("m", 10, 1, {f"k{i}": 1 for i in range(9)})
    assert one.line().endswith("k7 1, 1 more key with 1 line)")
