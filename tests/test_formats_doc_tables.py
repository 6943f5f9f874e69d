"""docs/FORMATS.md read as a stranger reads it: its tables are whole, and the enum rows a
decoder needs list every value the code can write."""

from __future__ import annotations

import re
from pathlib import Path

from nrtrewrite.codes import EncAlgMeshType

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))


def _broken_tables(text: str) -> list[int]:
    """Line numbers of table rows that start a table without a header: a row (a line that
    starts with ``|``) after a non-row line must be a header, followed by a ``|---`` line;
    prose between two rows cuts a table in two and the second half renders as text."""
    lines = text.splitlines()
    bad = []
    for i, line in enumerate(lines):
        if not line.startswith("|") or (i and lines[i - 1].startswith("|")):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not re.match(r"^\|\s*:?-{3,}", nxt):
            bad.append(i + 1)
    return bad


def test_a_table_cut_in_two_is_found():
    text = "| a | b |\n|---|---|\n| 1 | x |\n\nprose\n| 2 | y |\n"
    assert _broken_tables(text) == [6]
    assert _broken_tables("| a |\n|---:|\n| 1 |\n") == []


def test_every_docs_table_has_its_header():
    for path in DOCS:
        assert _broken_tables(path.read_text()) == [], path.name


def test_spad_algo_sub_type_row_lists_every_mesh_type_written():
    # seed 000 §1.3 enc_alg_mesh_type: FULL_MESH 0, GROUPED_MESH 1, MESH_TRN2 2,
    # MESH_SWITCH 3 (a topology's mesh_sub_type, docs/TOPOLOGY.md), MESH_INVALID 4
    text = (ROOT / "docs" / "FORMATS.md").read_text()
    row = next(line for line in text.splitlines()
               if re.match(r"\|\s*1\s*\|\s*u8\s*\|\s*\[6:4\]\s*\|\s*algo_sub_type\s*\|", line))
    listed = {name: int(code) for name, code in re.findall(r"\b([A-Z][A-Z0-9_]*)=(\d)", row)}
    assert listed == {"FULL_MESH": 0, "GROUPED_MESH": 1, "MESH_TRN2": 2, "MESH_SWITCH": 3,
                      "MESH_INVALID": 4}
    assert listed == {m.name: int(m) for m in EncAlgMeshType}


def _bit_table(section: str) -> dict[tuple[int, str], tuple[int, int]]:
    """``(offset, field) -> (high bit, low bit)`` of the bit rows of a docs/FORMATS.md
    section's table (``| offset | type | bits | field | meaning |``)."""
    text = (ROOT / "docs" / "FORMATS.md").read_text()
    body = text[text.index(section):]
    body = body[:body.index("\n## ", 1)]
    out = {}
    for m in re.finditer(r"^\| (\d+) \| u\d+ \| \[(\d+)(?::(\d+))?\] \| (\w+) \|", body, re.M):
        hi = int(m.group(2))
        out[(int(m.group(1)), m.group(4))] = (hi, int(m.group(3) or hi))
    return out


def _mask(hi: int, lo: int) -> int:
    return ((1 << (hi - lo + 1)) - 1) << lo


def test_the_data_bd_bits_are_where_formats_puts_them():
    """dma.bin (FORMATS §5) as the document tables it, against the emitter's constants: a
    decoder written from the document and the emitter must agree bit for bit (the LAST and
    FIRST bits swapped in the emitter once went unnoticed by every other check but the
    goldens)."""
    from nrtrewrite.emit import formats as F

    t = _bit_table("## 5. `dma.bin`")
    assert _mask(*t[(0, "length")]) == F.LEN_MASK == 0xFFFF
    assert _mask(*t[(0, "META")]) == F.LEN_META
    assert t[(0, "ring_id")] == (F.GEN_SHIFT + 1, F.GEN_SHIFT) and F.GEN_MASK == 0x3
    assert _mask(*t[(0, "FIRST")]) == F.LEN_FIRST
    assert _mask(*t[(0, "LAST")]) == F.LEN_LAST
    assert _mask(*t[(4, "dir")]) == F.META_DIR_S2M
    assert _mask(*t[(4, "stream")]) == F.META_STREAM_MASK << F.META_STREAM_SHIFT
    assert _mask(*t[(4, "sdma_op")]) == 0xF
