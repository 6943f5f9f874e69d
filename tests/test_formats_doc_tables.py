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


def test_the_trigger_next_row_agrees_with_the_execution_order_section():
    """§2's trigger_next row and §2.1 say the same: the bit marks the next entry as the same
    collective's (a HIER chain's next leg) and does not start it, every entry starting when
    the one before completes "whether trigger_next is set or not" (§2.1; the bytes and the
    simulator follow it). Until 2026-12-06 the row said "1 = start the next entry when this
    one completes"."""
    text = (ROOT / "docs" / "FORMATS.md").read_text()
    row = next(line for line in text.splitlines()
               if re.match(r"\|\s*1\s*\|\s*u8\s*\|\s*\[7\]\s*\|\s*trigger_next\s*\|", line))
    order = text[text.index("### 2.1 Execution order"):]
    order = order[:order.index("\n### ", 1)]
    assert "whether `trigger_next` is set or" in order
    assert "start the next entry when" not in row, row
    assert "same collective" in row and "HIER chain" in row and "section 2.1" in row, row
    assert "whether `trigger_next` is set or not" in row, row


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


# ---------------------------------------------------------------------------
# The record layouts as FORMATS.md tables them, read from the document alone (no formats.py):
# every byte of a record in one row (tests/test_diff_doc_fields.py names diff's fields by it)

FORMATS = ROOT / "docs" / "FORMATS.md"

#: The section whose table lays out each artifact's record (FORMATS §1's files).
SECTIONS = {"spad.bin": "## 2. `spad.bin`", "tpinc.bin": "### 2.2 `tpinc.bin`",
            "legs.bin": "## 3. `legs.bin`", "sb2sb.bin": "## 4. `sb2sb.bin`",
            "dma.bin": "## 5. `dma.bin`", "cce.bin": "## 6. `cce.bin`",
            "sem.bin": "## 7. `sem.bin`", "net_ops.bin": "### 8.1 `net_ops_info`",
            "net_src.bin": "### 8.2 `net_src_addr`", "net_dest.bin": "### 8.2 `net_src_addr`"}

#: FORMATS' intro: "Where a table splits a byte or word into bit fields, `dump` shows the
#: whole byte or word under its stored name": (file, offset) -> that name.
STORED_NAMES = {("spad.bin", 0): "header", ("spad.bin", 1): "alg", ("spad.bin", 2): "flags",
                ("dma.bin", 0): "len_ctrl", ("dma.bin", 4): "meta_ctrl",
                ("cce.bin", 0): "w0", ("cce.bin", 4): "w1", ("cce.bin", 8): "w2",
                ("cce.bin", 12): "w3", ("sem.bin", 0): "ctrl"}
_INTRO_NAMES = ("spad bytes 0, 1, 2 are `header`, `alg`, `flags`; dma words 0 and 4 "
                "`len_ctrl` and `meta_ctrl`; cce words 0..3 `w0`..`w3`; sem word 0 `ctrl`")

#: spad.bin's bytes 4..7 read as the mesh overlay (FORMATS §2: "mesh entries only
#: (overlays channel_list)") instead of channel_list.
SPAD_OVERLAY = ("sema_shift_offset", "sema_mask")


def _tables(heading: str) -> list[tuple[list[str], list[list[str]]]]:
    """The tables of the FORMATS.md section that begins with ``heading`` (to the next
    heading): ``(header cells, rows of cells)``; a cell's ``\\|`` is no cell border."""
    text = FORMATS.read_text()
    start = text.index(heading)
    end = text.find("\n#", start + 1)
    lines = text[start:end if end >= 0 else None].splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.startswith("|") and not lines[i - 1].startswith("|"):
            out.append(([], []))
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not out[-1][0]:
                out[-1][0].extend(cells)
            elif not re.match(r"^:?-{3,}", cells[0]):
                out[-1][1].append(cells)
    return out


def _type_size(t: str) -> int:
    """Bytes of a FORMATS type: ``u8``, ``i16[3]``, ``u8[14]``, ``TENSOR3D`` (16, §4)."""
    if t == "TENSOR3D":
        return 16
    m = re.fullmatch(r"[ui](\d+)(?:\[(\d+)\])?", t)
    assert m, t
    return int(m.group(1)) // 8 * int(m.group(2) or 1)


def _bits(cell: str):
    """A ``bits`` cell: None (the whole field), ``"other"``, or ``(high, low)``."""
    if not cell:
        return None
    if cell == "other":
        return "other"
    m = re.fullmatch(r"\[(\d+)(?::(\d+))?\]", cell)
    assert m, cell
    return int(m.group(1)), int(m.group(2) or m.group(1))


def doc_layout(name: str) -> list[tuple[int, int, object, str]]:
    """Artifact ``name``'s record as FORMATS.md tables it: ``(offset, size, bits, field)``
    per row, ``bits`` as :func:`_bits`; sb2sb.bin's TENSOR3D rows as ``src.start_addr`` ...
    (the TENSOR3D table after the word's); net_src.bin and net_dest.bin from §8.2's two
    columns (``same`` or a bare value: the net_src_addr column's field; ``-``: none)."""
    tables = [t for t in _tables(SECTIONS[name]) if t[0][:2] == ["offset", "type"]]
    head, rows = tables[0]
    out = []
    if name in ("net_src.bin", "net_dest.bin"):
        col = 2 if name == "net_src.bin" else 3
        for cells in rows:
            types = [t.strip() for t in cells[1].split("/")]
            src = re.match(r"[a-z_][a-z0-9_]*", cells[2])
            cell = cells[col]
            if cell == "-":
                continue
            m = re.match(r"[a-z_][a-z0-9_]*", cell)
            field = m.group(0) if m and m.group(0) != "same" else src.group(0)
            out.append((int(cells[0]), _type_size(types[min(col - 2, len(types) - 1)]), None,
                        field))
        return out
    with_bits = "bits" in head
    for cells in rows:
        if with_bits:
            off, typ, bits, field = cells[0], cells[1], _bits(cells[2]), cells[3]
        else:
            off, typ, bits, field = cells[0], cells[1], None, cells[2]
        if typ == "TENSOR3D":
            for sub_off, sub_size, _, sub in doc_layout_rows(tables[1][1]):
                out.append((int(off) + sub_off, sub_size, None, f"{field}.{sub}"))
            continue
        out.append((int(off), _type_size(typ), bits, field))
    return out


def doc_layout_rows(rows: list[list[str]]) -> list[tuple[int, int, None, str]]:
    """``(offset, size, None, field)`` of a table's ``| offset | type | field |`` rows."""
    return [(int(c[0]), _type_size(c[1]), None, c[2]) for c in rows]


#: FORMATS §9 tables the TOPSP_KICK word, then the SYNC type of its ``sync`` row
KICK_SECTION = "## 9. The rewritten NEFF"


def doc_kick_fields() -> dict[int, str]:
    """byte -> field of a TOPSP_KICK word as FORMATS §9 tables it: the ``sync`` row's SYNC
    bytes by the SYNC table after the word's, nested as ``sync.wait_mode`` (as TENSOR3D's are
    ``src.start_addr``); ``reserved`` for bytes 20..63.  Each of the 64 bytes once."""
    (_, rows), (_, sync_rows) = [t for t in _tables(KICK_SECTION)
                                 if t[0][:2] == ["offset", "type"]]
    out: dict[int, str] = {}

    def put(lo: int, size: int, field: str) -> None:
        for k in range(lo, lo + size):
            assert k not in out, (k, out[k], field)
            out[k] = field

    for cells in rows:
        lo, _, hi = cells[0].partition("..")
        if cells[1] == "SYNC":
            for sub_off, size, _, sub in doc_layout_rows(sync_rows):
                put(int(lo) + sub_off, size, f"{cells[2]}.{sub}")
        else:
            put(int(lo), int(hi) + 1 - int(lo) if hi else _type_size(cells[1]), cells[2])
    assert sorted(out) == list(range(64))
    return out


def test_the_kick_word_table_nests_the_sync_fields_as_kick_dtype():
    """FORMATS §9 lists the sync fields (bytes 4..11) nested under ``sync``, as
    emit/formats.py's KICK_DTYPE holds them (KICK_SYNC_DTYPE): one layout, the same names
    (until 2026-12-07 the table listed them one by one, ``wait_mode`` at 4, while the dtype
    nests them).  The reserved bytes 20..63 are the dtype's ``reserved_20``."""
    from nrtrewrite.emit import formats as F

    def walk(dtype, base: int = 0, prefix: str = ""):
        for name in dtype.names:
            sub, off = dtype.fields[name][:2]
            if sub.names:
                yield from walk(sub, base + off, f"{prefix}{name}.")
            else:
                for k in range(sub.itemsize):
                    yield base + off + k, prefix + name

    doc = doc_kick_fields()
    assert [doc[k] for k in range(4, 12)] == (
        ["sync.wait_mode", "sync.wait_idx", "sync.update_mode", "sync.update_idx"]
        + ["sync.semaphore_value"] * 4)
    assert dict(walk(F.KICK_DTYPE)) == {k: "reserved_20" if v == "reserved" else v
                                        for k, v in doc.items()}


def doc_byte_fields(name: str, overlay: bool = False) -> dict[int, str]:
    """byte -> the field FORMATS.md puts it in, as ``dump`` and ``diff`` name stored fields:
    a byte of a word split into bit fields by the word's stored name (:data:`STORED_NAMES`),
    spad.bin's bytes 4..7 by channel_list or, with ``overlay`` (a mesh entry), the
    overlay's fields.  Each byte once (asserted)."""
    out: dict[int, str] = {}
    for off, size, bits, field in doc_layout(name):
        if name == "spad.bin" and (field in SPAD_OVERLAY) != overlay and off >= 4:
            continue
        if bits is not None:
            field = STORED_NAMES[(name, off)]
            if out.get(off) == field:  # (another bit row of the same word)
                continue
        for k in range(off, off + size):
            assert k not in out, (name, k, out.get(k), field)
            out[k] = field
    return out


def doc_bit_rows(name: str) -> dict[int, tuple[int, list[tuple[object, str]]]]:
    """offset -> (bits of the word, [(bits, field)]) of the words FORMATS.md splits."""
    out: dict[int, tuple[int, list]] = {}
    for off, size, bits, field in doc_layout(name):
        if bits is not None:
            out.setdefault(off, (8 * size, []))[1].append((bits, field))
    return out


def _row_mask(bits, width: int, rows) -> int:
    if bits == "other":
        named = 0
        for b, _ in rows:
            if b != "other":
                named |= _mask(*b)
        return ((1 << width) - 1) & ~named
    return _mask(*bits)


def test_the_intro_names_the_stored_words_the_bit_tables_split():
    intro = " ".join(FORMATS.read_text().split("## 1.")[0].split())
    assert _INTRO_NAMES in intro
    for name in ("spad.bin", "dma.bin", "cce.bin", "sem.bin"):
        assert {(name, off) for off in doc_bit_rows(name)} == \
            {k for k in STORED_NAMES if k[0] == name}


def test_every_byte_of_every_record_is_in_one_row_of_its_table():
    # the record sizes the sections' headings give (§2.2 and §3, §4: "8-byte", "64 bytes")
    sizes = {"spad.bin": 8, "tpinc.bin": 8, "legs.bin": 64, "sb2sb.bin": 64, "dma.bin": 16,
             "cce.bin": 16, "sem.bin": 16, "net_ops.bin": 96, "net_src.bin": 72,
             "net_dest.bin": 48}
    for name, size in sizes.items():
        assert sorted(doc_byte_fields(name)) == list(range(size)), name
    assert [doc_byte_fields("spad.bin", overlay=True)[k] for k in range(4, 8)] == \
        ["sema_shift_offset"] * 2 + ["sema_mask"] * 2


def test_every_bit_of_a_split_word_is_in_one_row():
    """FORMATS' intro: reserved bits inside a byte or word are given in the tables.  cce.bin
    and sem.bin listed none (review 49e): w0 [22:0] and [31:29], w1 [6:3], [24:20],
    [31:26], w2 [31:24], w3 [7:6] and [31:10]; sem ctrl [23:17] and [31:26]."""
    for name in ("spad.bin", "dma.bin", "cce.bin", "sem.bin"):
        for off, (width, rows) in doc_bit_rows(name).items():
            seen = 0
            for bits, field in rows:
                m = _row_mask(bits, width, rows)
                assert not seen & m, (name, off, field)
                seen |= m
            assert seen == (1 << width) - 1, (name, off, hex(seen))


def _reserved_masks(name: str) -> dict[int, int]:
    """offset -> the reserved bits of each split word (its ``reserved`` rows, ``other``)."""
    out = {}
    for off, (width, rows) in doc_bit_rows(name).items():
        out[off] = 0
        for bits, field in rows:
            if field == "reserved":
                out[off] |= _row_mask(bits, width, rows)
    return out


def test_the_reserved_bits_are_zero_as_lowered_and_no_decoded_field_reads_them(tmp_path):
    """The rows against the code: every record ``lower`` writes (ar2, mix8: ring and mesh)
    has 0 in the reserved bits, and setting them changes no decoded field but the stored
    word (``decode_record``: the bit fields read none of them)."""
    import numpy as np
    from nrtrewrite.artifacts import decode_record
    from nrtrewrite.emit import formats as F
    from nrtrewrite.golden import lower_to
    for model in ("ar2", "mix8"):
        out = lower_to(ROOT / "fixtures" / f"{model}.neff", tmp_path / model, None)
        for name in ("spad.bin", "dma.bin", "cce.bin", "sem.bin"):
            dtype = F.ARTIFACTS[name][0]
            data = b"".join((r / name).read_bytes() for r in sorted(out.glob("rank-*")))
            assert data, (model, name)
            recs = np.frombuffer(data, np.uint8).reshape(-1, dtype.itemsize)
            masks = _reserved_masks(name)
            raw = bytearray(data[:dtype.itemsize])  # the first record, reserved bits set
            for off, mask in masks.items():
                width = doc_bit_rows(name)[off][0] // 8
                vals = np.zeros(len(recs), np.uint64)
                for j in range(width):
                    vals |= recs[:, off + j].astype(np.uint64) << np.uint64(8 * j)
                assert not (vals & np.uint64(mask)).any(), (model, name, off, hex(mask))
                word = int.from_bytes(raw[off:off + width], "little") | mask
                raw[off:off + width] = word.to_bytes(width, "little")
            da = decode_record(name, np.frombuffer(data[:dtype.itemsize], dtype)[0])
            db = decode_record(name, np.frombuffer(bytes(raw), dtype)[0])
            stored = {STORED_NAMES[(name, off)] for off, mask in masks.items() if mask}
            assert {k for k in da if da[k] != db[k]} == stored, (model, name)
