"""Every constant and record layout of nrtrewrite/emit/formats.py, and every value `simulate`
takes from the emitter's modules (nrtrewrite.emit.address, .tiling, nrtrewrite.compose),
pinned to a value written independently: parsed from docs/FORMATS.md's tables (the parser of
tests/test_formats_doc_tables.py) or a literal quoted from FORMATS.md / the seeds.

Review 51r: simulate decoded and checked several fields with the emitter's own constants, so
a wrong constant (``NO_REDUCTION_TYPE = 0xFE``) passed simulate, 408 tests, and `make golden`
packed it; only the old golden archive's comparison failed.  These tests fail on such a
constant, golden or not."""

from __future__ import annotations

import re

from nrtrewrite.emit import formats as F
from nrtrewrite.simulate import fifo, program
from test_formats_doc_tables import (FORMATS, SECTIONS, _bit_table, _mask, _tables,
                                     doc_byte_fields)


def _row(section: str, field: str) -> list[str]:
    """The cells of the row of ``field`` in the first offset table of FORMATS ``section``."""
    for head, rows in _tables(section):
        if head[:2] != ["offset", "type"]:
            continue
        col = head.index("field") if "field" in head else 2
        for cells in rows:
            if cells[col] == field:
                return cells
    raise AssertionError(f"FORMATS {section!r} has no row {field!r}")


def _text(section: str) -> str:
    text = FORMATS.read_text()
    start = text.index(section)
    end = text.find("\n## ", start + 1)
    return " ".join(text[start:end if end >= 0 else None].split())


# ---------------------------------------------------------------------------
# record layouts


def _dtype_byte_fields(dtype) -> dict[int, str]:
    """byte -> the dtype field holding it, a TENSOR3D's as ``src.start_addr``."""
    out = {}
    for name in dtype.names:
        sub, off = dtype.fields[name][:2]
        if sub.names:
            for k, v in _dtype_byte_fields(sub).items():
                out[off + k] = f"{name}.{v}"
            continue
        for k in range(off, off + sub.itemsize):
            out[k] = name
    return out


def test_every_record_is_laid_out_as_its_formats_table():
    """Each artifact's numpy dtype puts every byte in the field FORMATS' table puts it in (a
    word split into bit fields by its stored name), and its construct struct has the size."""
    assert set(F.ARTIFACTS) == set(SECTIONS)
    for name, (dtype, struct_) in F.ARTIFACTS.items():
        doc = doc_byte_fields(name)
        got = _dtype_byte_fields(dtype)
        assert got == doc, (name, {k: (got.get(k), doc.get(k)) for k in set(got) | set(doc)
                                   if got.get(k) != doc.get(k)})
        assert dtype.itemsize == struct_.sizeof() == len(doc), name


def test_the_kick_word_is_laid_out_as_formats_section_9():
    """F.KICK_DTYPE (the one TOPSP_KICK layout bundle, diff and simulate use, review 53e) puts
    every byte in the field FORMATS §9's tables do, the sync fields nested as ``sync`` in
    both, the reserved bytes 20..63 as ``reserved_20``; TopspKick has its size and builds
    a2 10."""
    from test_formats_doc_tables import doc_kick_fields
    doc = {k: "reserved_20" if v == "reserved" else v for k, v in doc_kick_fields().items()}
    assert _dtype_byte_fields(F.KICK_DTYPE) == doc
    assert F.KICK_DTYPE.itemsize == F.TopspKick.sizeof() == len(doc) == 64
    assert _row("## 9. The rewritten NEFF", "opcode")[3].startswith("0xA2")
    raw = F.TopspKick.build(dict(sync=dict(wait_mode=0, wait_idx=0, update_mode=0,
                                           update_idx=0, semaphore_value=0),
                                 spad_index=0, word=0, trigger=0))
    assert raw[:4] == bytes([0xA2, 16, 0, 0]) and raw[4:] == bytes(60)


def test_the_fixed_bytes_of_the_0xbf_word_are_formats_section_4s():
    # FORMATS §4: "| 0 | u8 | opcode | 0xBF" (seed 000: S3D3_COLLECTIVE), 64 bytes = 16 dwords
    assert _row(SECTIONS["sb2sb.bin"], "opcode")[3].startswith("0xBF")
    raw = F.S3D3Collective.build(dict(
        debug_cmd=0, debug_hint=0, wait_mode=0, wait_idx=0, update_mode=0, update_idx=0,
        semaphore_value=0, in_dtype=0, out_dtype=0,
        src=dict(start_addr=0, step_elem=[0] * 3, num_elem=[0] * 3), lnc_size_fmt=0,
        num_active_channels=0, dst=dict(start_addr=0, step_elem=[0] * 3, num_elem=[0] * 3)))
    assert raw[:2] == bytes([0xBF, 16]) and len(raw) == 64


# ---------------------------------------------------------------------------
# bit fields, as the tables split the words


def test_spad_bits_are_where_formats_section_2_puts_them():
    t = _bit_table("## 2. `spad.bin`")
    assert _mask(*t[(0, "cc_op")]) == F.SPAD_CC_OP
    assert _mask(*t[(2, "reporter")]) == F.SPAD_FLAG_REPORTER
    assert _mask(*t[(2, "ring_wait_complete")]) == F.SPAD_FLAG_RING_WAIT_COMPLETE
    assert _mask(*t[(2, "ring_send_complete")]) == F.SPAD_FLAG_RING_SEND_COMPLETE
    assert F.pack_spad_alg(0xF, 0, False) == _mask(*t[(1, "algo_type")])
    assert F.pack_spad_alg(0, 0x7, False) == _mask(*t[(1, "algo_sub_type")])
    assert F.pack_spad_alg(0, 0, True) == _mask(*t[(1, "trigger_next")])
    # FORMATS §2: "Each subgraph's entries form one CTRL SPAD program (4 KiB): at most 512
    # entries per subgraph" (seed 000 §4.3: the TOP_SP CTRL SPAD is 4 KiB)
    assert "one CTRL SPAD program (4 KiB): at most 512 entries" in _text("## 2. `spad.bin`")
    assert F.SPAD_BYTES == 4096 == 512 * F.SPAD_DTYPE.itemsize


def test_tpinc_bits_and_cap_are_formats_section_2_2s():
    flags = _row(SECTIONS["tpinc.bin"], "flags")[3]
    assert "bit 0 `last_sync`" in flags and F.TPINC_LAST_SYNC == 1 << 0
    m2s = _row(SECTIONS["tpinc.bin"], "m2s")[3]
    assert re.search(r"at most (\d+), `TPINC_MAX_BDS`", m2s).group(1) == str(F.TPINC_MAX_BDS)


def test_the_data_bd_sizes_are_formats_section_5s():
    length = _row(SECTIONS["dma.bin"], "length")[4]
    assert length == "bytes (0 means 65536)" and F.BD_MAX_BYTES == 65536
    assert F.LEN_MASK + 1 == F.BD_MAX_BYTES
    ring = _row(SECTIONS["dma.bin"], "ring_id")[4]
    assert int(re.search(r"// (\d+), mod 4", ring).group(1)) == F.BD_RING_ENTRIES
    assert F.GEN_MASK + 1 == 4


def test_cce_bits_are_where_formats_section_6_puts_them():
    t = _bit_table("## 6. `cce.bin`")
    assert _mask(*t[(0, "meta")]) == F.CCE_W0_META == program.CCE_W0_META
    assert _mask(*t[(4, "valid")]) == program.CCE_VALID
    assert "W0 = 0x800000 \\| meta_idx << 24" in _row(SECTIONS["cce.bin"], "meta")[4]
    assert t[(0, "meta_idx")][1] == 24
    assert _mask(*t[(4, "valid")]) == F.CCE_VALID
    assert _mask(*t[(4, "last")]) == F.CCE_LAST
    # the word's fields at the table's places (op, last, in, out, acc, valid)
    word = F.cce_meta_ctrl(0x7, 0xF, 0, 0, False)
    assert word == _mask(*t[(4, "op")]) | _mask(*t[(4, "in_dtype")]) | F.CCE_VALID
    word = F.cce_meta_ctrl(0, 0, 0xF, 0xF, True)
    assert word == (_mask(*t[(4, "out_dtype")]) | _mask(*t[(4, "acc_dtype")])
                    | _mask(*t[(4, "last")]) | F.CCE_VALID)


def test_sem_bits_are_where_formats_section_7_puts_them():
    t = _bit_table("## 7. `sem.bin`")
    assert _mask(*t[(0, "subop")]) == F.SEM_SUBOP_MASK
    assert t[(0, "role")][1] == F.SEM_ROLE_SHIFT
    assert _mask(*t[(0, "remote")]) == F.SEM_REMOTE
    assert t[(0, "gen")] == (F.GEN_SHIFT + 1, F.GEN_SHIFT)


# ---------------------------------------------------------------------------
# fixed values


def test_a_copy_legs_reduction_type_is_formats_section_3s():
    cell = _row(SECTIONS["legs.bin"], "reduction_type")[3]
    want = int(re.search(r"(0x[0-9A-F]+) for copy and sync legs", cell).group(1), 16)
    assert F.NO_REDUCTION_TYPE == want
    assert program.NO_REDUCTION_TYPE == want  # simulate's own value


def test_lnc_size_fmt_is_formats_section_4s():
    cell = _row(SECTIONS["sb2sb.bin"], "lnc_size_fmt")[3]
    listed = {int(lnc): int(code) for code, lnc in re.findall(r"(\d+) = LNC(\d+)", cell)}
    assert listed == F.LNC_SIZE_FMT == program.LNC_SIZE_FMT == {1: 0, 2: 1}


def test_the_t3d_cap_is_the_seeds_256():
    # FORMATS §4 "t3d cap.": "The seed's 256-element cap (`t3d_element_count <= 256`)"
    assert "The seed's 256-element cap (`t3d_element_count <= 256`)" in \
        _text(SECTIONS["sb2sb.bin"])
    assert F.T3D_DIM_CAP == 256


def test_the_net_ops_fixed_values_are_formats_section_8_1s():
    sec = SECTIONS["net_ops.bin"]
    loop = _row(sec, "net_idx_loop_size")[3]
    assert int(re.match(r"(\d+) \(NET_INDEX_LOOP_SIZE\)", loop).group(1)) == \
        F.NET_INDEX_LOOP_SIZE == fifo.NET_INDEX_LOOP_SIZE == 512
    for field, value, sim in (
            ("initial_send_credits", F.NET_INITIAL_SEND_CREDITS, fifo.NET_INITIAL_SEND_CREDITS),
            ("ending_recv_credits", F.NET_ENDING_RECV_CREDITS, fifo.NET_ENDING_RECV_CREDITS)):
        cell = _row(sec, field)[3]
        assert int(re.match(r"(\d+) \(ours", cell).group(1)) == value == sim, field
        assert int(re.search(r"in \(0, (0x[0-9A-F]+)\]", cell).group(1), 16) == \
            F.NET_MAX_CREDITS
    # FORMATS §8.1: sema_shift_offset "the entry's event window for mesh entries (192)"
    from nrtrewrite.compose.events import EVENT_SEMA_SHIFT_OFFSET
    cell = _row(sec, "sema_shift_offset")[3]
    assert int(re.search(r"mesh entries \((\d+)\)", cell).group(1)) == EVENT_SEMA_SHIFT_OFFSET


def test_the_output_folders_names_are_formats_section_1s():
    table = dict((c[0], c[1]) for c in _tables("### 1.1 `manifest.json`")[0][1])
    assert table["`format`"] == f'`"{F.FORMAT_NAME}"`'
    assert table["`format_version`"].startswith(f"`{F.FORMAT_VERSION}` ")
    # FORMATS §1: "rank-0000/ one folder per rank of the world, R as 4 digits"
    assert "rank-0000/ one folder per rank of the world, R as 4 digits" in \
        _text("## 1. The output folder")
    assert F.rank_dir_name(0) == "rank-0000" and F.rank_dir_name(127) == "rank-0127"
    # docs/CLI.md: "one over 2 GiB (`MAX_MANIFEST_BYTES`" ...
    assert F.MAX_MANIFEST_BYTES == 2 << 30


# ---------------------------------------------------------------------------
# the values simulate imports from nrtrewrite.emit.address, .tiling and nrtrewrite.compose


def test_the_addresses_are_formats_section_10s():
    from nrtrewrite.emit import address as A
    text = _text("## 10. Addresses")
    # "SoC address (64 bits): LOCAL [46:0], DIE [47], CAYMAN_ID [53:48] ..."
    assert "LOCAL [46:0], DIE [47], CAYMAN_ID [53:48]" in text
    assert A.LOCAL_MASK == _mask(46, 0) and A.DIE_BIT == 47
    assert A.CAYMAN_ID_MASK << A.CAYMAN_ID_SHIFT == _mask(53, 48)
    # "| DRAM var / scratch / gateway | `(lc << 36) + 0x1_0000_0000 + region.offset` |"
    assert "`(lc << 36) + 0x1_0000_0000 + region.offset`" in text
    assert "`(lc << 36) + 0x8_0000_0000 + p * sbuf_partition_stride" in text
    assert A.CORE_WINDOW == 1 << 36 and A.DRAM_BASE == 0x1_0000_0000
    assert A.SBUF_BASE == 0x8_0000_0000
    # "`0x8280000000 + ((sp & 7) << 30) + ((sp > 7) << 47) + w + 4 * id`, with windows READ
    # `+0x1000`, SET `+0x1400`, INC `+0x1800`, DEC `+0x1C00`; 256 semaphores per core"
    assert "`0x8280000000 + ((sp & 7) << 30) + ((sp > 7) << 47) + w + 4 * id`" in text
    assert ("READ `+0x1000`, SET `+0x1400`, INC `+0x1800`, DEC `+0x1C00`; 256 semaphores "
            "per core") in text
    assert A.EVT_SEM_BASE == 0x8280000000 and A.TOPSP_STRIDE_SHIFT == 30
    assert (A.EVT_SEM_READ, A.EVT_SEM_SET, A.EVT_SEM_INC, A.EVT_SEM_DEC) == \
        (0x1000, 0x1400, 0x1800, 0x1C00)
    assert A.EVT_SEM_STRIDE == 4 and A.SEMAPHORES_PER_CORE == 256


def test_the_semaphore_ids_are_formats_section_7s():
    from nrtrewrite.emit.address import SEM_ENTRY_DONE
    from nrtrewrite.entryslots import ENTRY_POST_SEMS
    role = _row(SECTIONS["sem.bin"], "role")[4]
    # "the TOP_SP's 0..15 (`entry_go` 8, `entry_post` 9), ..., the entry handshake's other
    # `entry_post` semaphores 176..191"
    assert "(`entry_go` 8, `entry_post` 9)" in role
    assert "other `entry_post` semaphores 176..191" in role
    assert SEM_ENTRY_DONE == 8
    assert set(ENTRY_POST_SEMS) == {9} | set(range(176, 192))
    # "... the kangaring peer semaphores 144..175": simulate's own SEM_PEER_BASE and the
    # composer's
    from nrtrewrite.compose.kangaring import KANGARING_SEM_BASE
    assert "the kangaring peer semaphores 144..175" in role
    assert program.SEM_PEER_BASE == KANGARING_SEM_BASE == 144


def test_the_cce_caps_are_formats_section_1_1s():
    from nrtrewrite.compose.ir import MAX_SRC
    from nrtrewrite.emit.tiling import (HW_GENERATIONS, MAX_SDMA_CCE_ELEMENTS,
                                        SDMA_MAX_CCE_ELEMENTS)
    table = dict((c[0], c[1]) for c in _tables("### 1.1 `manifest.json`")[0][1])
    # "... (section 6: 1024 on 2, 2048 on 3 and 4)"
    assert "(section 6: 1024 on 2, 2048 on 3 and 4)" in table["`topology`"]
    assert SDMA_MAX_CCE_ELEMENTS == {2: 1024, 3: 2048, 4: 2048}
    assert HW_GENERATIONS == (2, 3, 4) and MAX_SDMA_CCE_ELEMENTS == 2048
    # FORMATS §6 W3: "num_sources | sources of the tile (1..8)"
    assert _row(SECTIONS["cce.bin"], "num_sources")[4] == "sources of the tile (1..8)"
    assert MAX_SRC == 8


def test_the_leaf_codes_are_formats_section_3s():
    from nrtrewrite.compose.leaves import Leaf
    cell = _row(SECTIONS["legs.bin"], "leaf")[3]
    listed = {name: int(code) for code, name in re.findall(r"\b(\d+) ([a-z_]+)\b", cell)}
    assert {m.name: int(m) for m in Leaf} == listed
