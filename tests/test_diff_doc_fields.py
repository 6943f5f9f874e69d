"""`nrtrewrite diff` names every byte by docs/FORMATS.md's tables, read from the document
alone (tests/test_formats_doc_tables.py's parser, not formats.py): each byte of a record of
every artifact kind, and of a TOPSP_KICK word (FORMATS §9), flipped in a copy of a golden
output, is named by the field the document puts it in (review 49e's fuzzdiff.py, as a test).

A byte of a word FORMATS splits into bit fields is named by the word's stored name (FORMATS'
intro) and by each bit field over that byte, as `dump` decodes them (CLI.md "dump":
`ring_id` is `gen`, `FIRST` / `LAST` are `first` / `last`; dma's `META` and cce's `meta` have
no key of their own)."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.neff.container import build_container, read_container
from test_formats_doc_tables import (SPAD_OVERLAY, STORED_NAMES, doc_bit_rows,
                                     doc_byte_fields, doc_kick_fields)

ROOT = Path(__file__).resolve().parent.parent

#: The bit fields' keys where `dump` (and so `diff`) names them otherwise (CLI.md "dump").
DECODED_AS = {("dma.bin", "ring_id"): "gen", ("dma.bin", "FIRST"): "first",
              ("dma.bin", "LAST"): "last"}
NOT_DECODED = {("dma.bin", "META"), ("cce.bin", "meta")}


@pytest.fixture(scope="module", params=["two_node128", "mix8"])
def golden(request, tmp_path_factory) -> Path:
    """A golden output (two_node128's ranks 0, 63, 64, 127: every artifact kind, the net
    FIFOs included, ring-family SPAD entries; mix8: mesh-family entries, nine kick words)."""
    out = tmp_path_factory.mktemp(request.param) / "a"
    out.mkdir()
    with tarfile.open(ROOT / "fixtures" / "golden" / f"{request.param}.tar.gz") as tar:
        tar.extractall(out, filter="data")
    return out


def _bit_names(name: str, off: int, byte: int) -> set[str]:
    """The decoded keys of the bit fields of the split word at ``off`` that hold bits of
    the word's byte ``byte`` (0 its lowest)."""
    width, rows = doc_bit_rows(name)[off]
    lo, hi = 8 * byte, 8 * byte + 7
    out = set()
    for bits, field in rows:
        if field == "reserved" or bits == "other" or (name, field) in NOT_DECODED:
            continue
        if bits[1] <= hi and bits[0] >= lo:
            out.add(DECODED_AS.get((name, field), field))
    return out


def _doc_names(name: str) -> set[str]:
    """Every name FORMATS gives a field of ``name``'s record, as diff would show it."""
    out = set(doc_byte_fields(name).values())
    if name == "spad.bin":
        out |= set(SPAD_OVERLAY)
    for off, (width, _) in doc_bit_rows(name).items():
        for byte in range(width // 8):
            out |= _bit_names(name, off, byte)
    return out


def _split_word(name: str, k: int) -> tuple[int, int] | None:
    """``(offset, byte in the word)`` when byte ``k`` is in a word FORMATS splits."""
    for off, (width, _) in doc_bit_rows(name).items():
        if off <= k < off + width // 8:
            return off, k - off
    return None


def _kick_fields() -> dict[int, str]:
    """byte -> the name ``diff`` gives a TOPSP_KICK word's byte by FORMATS §9's tables
    (:func:`doc_kick_fields`): the SYNC bytes by the common header's names, ``wait_mode``
    (FORMATS §9: diff names them as the header of every instruction word, CLI.md "diff"),
    ``reserved`` 20..63 as diff names a run of it, ``reserved[K:K+1]`` for the one byte K."""
    return {k: f"{v}[{k}:{k + 1}]" if v == "reserved" else v.removeprefix("sync.")
            for k, v in doc_kick_fields().items()}


def _diff_fields(a: Path, b: Path) -> dict[tuple[str, int], set[str]]:
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json", "--max", "0"])
    assert res.exit_code == 1, (res.output, res.exception)
    got: dict[tuple[str, int], set[str]] = {}
    for d in json.loads(res.stdout)["differences"]:
        if d["record"] is not None:
            got.setdefault((d["where"], d["record"]), set()).add(d["field"])
    return got


def test_every_byte_of_every_record_is_named_by_its_formats_table(golden, tmp_path):
    a = golden
    ranks = sorted(p.name for p in a.glob("rank-*"))
    # per artifact: the records of every rank folder, each a slot for one flipped byte
    plan: list[list[tuple[str, str, int, int]]] = []  # round -> (rank, file, record, byte)
    for name in ("spad.bin", "tpinc.bin", "legs.bin", "sb2sb.bin", "dma.bin", "cce.bin",
                 "sem.bin", "net_ops.bin", "net_src.bin", "net_dest.bin"):
        size = len(doc_byte_fields(name))
        slots = []
        for r in ranks:
            files = json.loads((a / r / "manifest.json").read_text())["files"]
            assert files[name]["bytes"] == files[name]["records"] * size, (r, name)
            slots += [(r, i) for i in range(files[name]["records"])]
        if not slots:
            continue
        for k in range(size):
            r, i = slots[k % len(slots)]
            n = k // len(slots)
            plan += [[] for _ in range(n + 1 - len(plan))]
            plan[n].append((r, name, i, k))
    checked = set()
    for n, flips in enumerate(plan):
        b = tmp_path / f"b{n}"
        shutil.copytree(a, b)
        for r, name, i, k in flips:
            path = b / r / name
            data = bytearray(path.read_bytes())
            data[i * len(doc_byte_fields(name)) + k] ^= 0xFF  # every bit of the byte
            path.write_bytes(bytes(data))
        got = _diff_fields(a, b)
        assert len(got) == len(flips)
        for r, name, i, k in flips:
            entries = json.loads((a / r / "manifest.json").read_text())["entries"]
            # FORMATS §1.2: a mesh-family entry has sema_shift_offset (spad bytes 4..7 its
            # overlay, §2)
            overlay = name == "spad.bin" and "sema_shift_offset" in entries[i]
            want = {doc_byte_fields(name, overlay)[k]}
            if (w := _split_word(name, k)) is not None:
                assert want == {STORED_NAMES[(name, w[0])]}
                want |= _bit_names(name, *w)
            fields = got[(f"{r}/{name}", i)] & _doc_names(name)
            if (name, k) == ("spad.bin", 1):  # algo_type changed: bytes 4..7 read otherwise
                fields -= {"channel_list", *SPAD_OVERLAY}
            assert fields == want, (r, name, i, k)
            checked.add((name, k, overlay))
    # every byte of every kind the golden has was flipped once
    assert {(name, k) for name, k, _ in checked} == {
        (f[1], f[3]) for flips in plan for f in flips}


def test_every_byte_of_a_kick_word_is_named_by_formats_section_9(golden, tmp_path):
    a = golden
    top = json.loads((a / "manifest.json").read_text())
    neff = top["output_neff"]["name"]
    words = []  # FORMATS §9: the words the manifest's triggers name (two for a 0xD9+0xDA)
    for t in top["triggers"]:
        member = f"{t['subgraph']}/{t['engine']}.bin"
        words += [(member, t["index"] + j) for j in range(2 if t["src"].get("ap") else 1)]
    fields = _kick_fields()
    c = read_container((a / neff).read_bytes(), verify_hash=False)
    plan = [[] for _ in range(-(-64 // len(words)))]  # round -> ((member, index), byte)
    for k in range(64):
        plan[k // len(words)].append((words[k % len(words)], k))
    seen = set()
    for n, flips in enumerate(plan):
        b = tmp_path / f"b{n}"
        shutil.copytree(a, b)
        members = {m: bytearray(v) for m, v in c.members.items()}
        for (member, index), k in flips:
            assert members[member][index * 64:index * 64 + 2] == bytes([0xA2, 16])
            members[member][index * 64 + k] ^= 0xFF
        (b / neff).write_bytes(build_container(c.header, {m: bytes(v)
                                                          for m, v in members.items()}))
        got = _diff_fields(a, b)
        for (member, index), k in flips:
            assert got[(f"{neff}:{member}", index)] == {fields[k]}, (member, index, k)
            seen.add(k)
    assert seen == set(range(64))


def test_the_report_order_is_the_one_cli_md_gives(tmp_path):
    """CLI.md "diff": the top manifest's differences, the top-level entries lower does not
    write, then rank by rank its manifest's, its other entries, its artifacts in FORMATS
    §1's order, and the rewritten NEFF last."""
    from nrtrewrite.golden import lower_to
    a = lower_to(ROOT / "fixtures" / "ar2.neff", tmp_path / "a", None)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    top = json.loads((b / "manifest.json").read_text())
    top["input"]["name"] = "other.neff"
    (b / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    (b / "zz.txt").write_text("z")
    man = json.loads((b / "rank-0000" / "manifest.json").read_text())
    man["rank"] = 7
    (b / "rank-0000" / "manifest.json").write_text(json.dumps(man, indent=1) + "\n")
    (b / "rank-0000" / "a.txt").write_text("a")

    def flip(path, at):
        data = bytearray(path.read_bytes())
        data[at] ^= 0xFF
        path.write_bytes(bytes(data))
    for r, name in (("rank-0000", "sem.bin"), ("rank-0000", "spad.bin"),
                    ("rank-0001", "dma.bin")):
        flip(b / r / name, 7)
    neff = top["output_neff"]["name"]
    with open(b / neff, "ab") as fh:  # zero bytes after the payload: its size and sha256
        fh.write(bytes(4))
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json", "--max", "0"])
    order = []
    for d in json.loads(res.stdout)["differences"]:
        where = d["where"].split(":")[0]
        if not order or order[-1] != where:
            order.append(where)
    assert order == ["manifest.json", "zz.txt", "rank-0000/manifest.json", "rank-0000/a.txt",
                     "rank-0000/spad.bin", "rank-0000/sem.bin", "rank-0001/dma.bin", neff]
