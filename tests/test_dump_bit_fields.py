"""``dump``'s decoding of the bit fields of dma.bin, cce.bin, sem.bin, tpinc.bin, legs.bin and
the FIFO address records, on hand-built bytes: every expected value is worked out by hand
from docs/FORMATS.md's bit layouts (and docs/CLI.md "dump" for the decoded names), with
neighbouring bits set so that a shift or mask off by one bit reads another value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from nrtrewrite.artifacts import decode_record
from nrtrewrite.cli import main
from nrtrewrite.emit import formats as F


def _recs(name: str, *hexes: str) -> np.ndarray:
    return np.frombuffer(bytes.fromhex("".join(hexes)), F.ARTIFACTS[name][0])


def _decoded(name: str, *hexes: str) -> list[dict]:
    return [decode_record(name, r) for r in _recs(name, *hexes)]


def _pick(d: dict, keys) -> dict:
    return {k: d.get(k) for k in keys}


# FORMATS §5: len_ctrl length [15:0] (0 = 65536), ring_id [25:24], FIRST [26], LAST [27];
# meta_ctrl sdma_op [3:0], dir [4], stream [12:8]; buf_ptr u64.
DMA = [
    # len_ctrl 0x06001234: length 0x1234, gen 2, FIRST; meta_ctrl 0x1314: CCE (4), S2M,
    # stream 0x13; buf_ptr 0x1100220000
    "34120006" "14130000" "0000220011000000",
    # len_ctrl 0x0b000000: length 0 (65536), gen 3, LAST; meta_ctrl 0x02: CME, M2S, stream 0
    "0000000b" "02000000" "0010000000000000",
]
DMA_WANT = [
    {"length": 0x1234, "gen": 2, "first": 1, "last": 0, "sdma_op": 4, "dir": "S2M", "stream": 19},
    {"length": 65536, "gen": 3, "first": 0, "last": 1, "sdma_op": 2, "dir": "M2S", "stream": 0},
]


def test_dma_bit_fields():
    got = _decoded("dma.bin", *DMA)
    assert [_pick(d, DMA_WANT[0]) for d in got] == DMA_WANT
    assert [d["buf_ptr"] for d in got] == [0x1100220000, 0x1000]


def test_meta_bit_23_is_decoded_in_dma_word_0_and_cce_w0(tmp_path):
    """FORMATS §5 dma word 0 bit 23 `META` and §6 cce W0 bit 23 `meta` are decoded as
    `meta` (docs/CLI.md "dump"), in text and --json, beside bits 22 and 24 that are not it
    (review 57i: the bit was shown only inside the stored word)."""
    # len_ctrl 0x00c01234: length 0x1234, bit 22 (reserved), META; gen 0.
    # len_ctrl 0x01400010: length 16, bit 22, gen 1 (bit 24); META clear
    dma = ["3412c000" "02000000" "0000000000000000", "10004001" "02000000" "0000000000000000"]
    got = _decoded("dma.bin", *dma)
    assert [(d["length"], d["meta"], d["gen"]) for d in got] == [(0x1234, 1, 0), (16, 0, 1)]
    # w0 0x00400000: bit 22 only (meta 0, meta_idx 0); w0 0x01800000: meta, meta_idx 1
    cce = ["00004000" "00000000" "00000000" "00000000", "00008001" "00000000" "00000000"
           "00000000"]
    got = _decoded("cce.bin", *cce)
    assert [(d["meta"], d["meta_idx"]) for d in got] == [(0, 0), (1, 1)]
    rdir = tmp_path / "rank-0000"
    rdir.mkdir()
    (rdir / "manifest.json").write_text('{"rank": 0}')
    (rdir / "spad.bin").write_bytes(b"")
    (rdir / "dma.bin").write_bytes(bytes.fromhex("".join(dma)))
    (rdir / "cce.bin").write_bytes(bytes.fromhex("".join(cce)))
    for name in ("dma.bin", "cce.bin"):
        res = CliRunner().invoke(main, ["dump", str(rdir / name), "--json"])
        assert res.exit_code == 0, res.output
        recs = json.loads(res.output)["ranks"][0]["files"][name]
        assert [r.get("meta") for r in recs] == ([1, 0] if name == "dma.bin" else [0, 1])
    head = [line for line in CliRunner().invoke(
        main, ["dump", str(rdir / "cce.bin")], env={"COLUMNS": "240"}).output.splitlines()
        if "meta_idx" in line][0]
    assert [c.strip() for c in head.strip("┃").split("┃")][1:3] == ["meta", "meta_idx"]
    assert [r[1:3] for r in _table(rdir / "cce.bin")] == [["0", "0"], ["1", "1"]]
    assert [r[7] for r in _table(rdir / "dma.bin")] == ["1", "0"]


# FORMATS §6: w0 meta [23], meta_idx [28:24]; w1 op [2:0], last [7], in [11:8], out [15:12],
# acc [19:16], valid [25]; w2 length [23:0]; w3 num_sources [5:0], reduction_type [9:8].
CCE = [
    # w0 0x13800000 (meta_idx 19); w1 0x020b6a83: MIN (3), last, in 0xA, out 6, acc 0xB,
    # valid; w2 0x01000800: length 0x800 (bit 24 is no part of it); w3 0x205: 5 sources, 2
    "00008013" "836a0b02" "00080001" "05020000",
    # w0 0x00800000 (meta_idx 0); w1 0x020b114a: MAX (2) with bits 3 and 6 set (reserved),
    # not last, in 1, out 1, acc 0xB, valid; w2 0xffffff: length 0xffffff; w3 0x5c3: bits
    # 6, 7 and 10 set around num_sources 3 and reduction_type 1
    "00008000" "4a110b02" "ffffff00" "c3050000",
]
CCE_WANT = [
    {"meta_idx": 19, "op": 3, "op_name": "MIN", "last": 1, "in_dtype": 0xA, "out_dtype": 6,
     "acc_dtype": 0xB, "valid": 1, "length": 0x800, "num_sources": 5, "reduction_type": 2},
    {"meta_idx": 0, "op": 2, "op_name": "MAX", "last": 0, "in_dtype": 1, "out_dtype": 1,
     "acc_dtype": 0xB, "valid": 1, "length": 0xFFFFFF, "num_sources": 3, "reduction_type": 1},
]


def test_cce_bit_fields():
    got = _decoded("cce.bin", *CCE)
    assert [_pick(d, CCE_WANT[0]) for d in got] == CCE_WANT


def test_cce_dtypes_are_named_after_their_codes():
    """docs/CLI.md dump: each dtype nibble is followed by its name, ``in_dtype_name`` ...,
    the ``DType`` names REFERENCES.md "Codes" gives (UINT64=1, BF16=6, FP32=0xA, FP32R=0xB;
    FP8_E4=0xE, FP16=7): a researcher read ``in_dtype 6`` and had to look up BF16."""
    names = ["in_dtype", "in_dtype_name", "out_dtype", "out_dtype_name", "acc_dtype",
             "acc_dtype_name"]
    # w1 0x020b7e00: ADD, in 0xE, out 7, acc 0xB, valid; a third record beside CCE's two
    fp8 = "00008000" "007e0b02" "00080000" "02000000"
    got = [{k: d[k] for k in names} for d in _decoded("cce.bin", *CCE, fp8)]
    assert got == [
        dict(zip(names, [0xA, "FP32", 6, "BF16", 0xB, "FP32R"])),
        dict(zip(names, [1, "UINT64", 1, "UINT64", 0xB, "FP32R"])),
        dict(zip(names, [0xE, "FP8_E4", 7, "FP16", 0xB, "FP32R"]))]


# FORMATS §7: ctrl subop [7:0], role [15:8], remote [16], gen [25:24]; value u32; addr u64.
SEM = [
    # ctrl 0x0101ff14: wait_ge_and_dec (20), role 0xFF, remote, gen 1; value 7
    "14ff0101" "07000000" "0000000001000000",
    # ctrl 0x02010315: inc (21), role 3 (dma_compl_sema), remote (bit 15 clear), gen 2
    "15030102" "01000000" "0800000002000000",
    # ctrl 0x00000314: wait_ge_and_dec, role 3, local, gen 0
    "14030000" "01000000" "1000000000000000",
]
SEM_WANT = [
    {"subop": 20, "subop_name": "WAIT_GE_AND_DEC", "role": 0xFF, "remote": 1, "gen": 1},
    {"subop": 21, "subop_name": "INC", "role": 3, "remote": 1, "gen": 2},
    {"subop": 20, "subop_name": "WAIT_GE_AND_DEC", "role": 3, "remote": 0, "gen": 0},
]


def test_sem_bit_fields():
    got = _decoded("sem.bin", *SEM)
    assert [_pick(d, SEM_WANT[0]) for d in got] == SEM_WANT
    assert [(d["value"], d["addr"]) for d in got] == [(7, 1 << 32), (1, 0x200000008),
                                                      (1, 0x10)]


def test_tpinc_last_sync_is_bit_0_of_flags_only():
    # FORMATS §2.2: m2s, s2m, repeat, flags u16; flags bit 0 last_sync, other bits 0
    got = _decoded("tpinc.bin", "0300" "0200" "0100" "0100", "0400" "0400" "0200" "0000")
    assert [(d["m2s"], d["s2m"], d["repeat"], d["last_sync"]) for d in got] == [
        (3, 2, 1, 1), (4, 4, 2, 0)]
    # a reserved flag bit set beside it is not last_sync
    assert _decoded("tpinc.bin", "0100" "0100" "0100" "0300")[0]["last_sync"] == 1


def test_legs_names_come_from_their_own_bytes():
    # FORMATS §3: leaf at byte 12, neigh at byte 15: a peer_post (11) leg waiting (neigh 2)
    rec = bytearray(F.LEG_DTYPE.itemsize)
    rec[12], rec[14], rec[15] = 11, 0xFF, 2
    d = _decoded("legs.bin", rec.hex())[0]
    assert (d["leaf_name"], d["neigh_name"]) == ("peer_post", "ENCD_NEIGH_PREV")


@pytest.mark.parametrize("name", ["net_src.bin", "net_dest.bin"])
def test_fifo_address_records_name_their_mark(name):
    # FORMATS §8.2: mark u32 at offset 36 (EXEC_COMPLETE 2, docs/CLI.md "dump")
    rec = bytearray(F.ARTIFACTS[name][0].itemsize)
    rec[36] = 2
    assert _decoded(name, rec.hex())[0]["mark_name"] == "EXEC_COMPLETE"


def _table(path: Path, *args: str) -> list[list[str]]:
    res = CliRunner().invoke(main, ["dump", str(path), *args], env={"COLUMNS": "240"})
    assert res.exit_code == 0, res.output
    rows = [line for line in res.output.splitlines() if line.startswith("│")]
    return [[c.strip() for c in r.strip("│").split("│")] for r in rows]


@pytest.fixture
def rank_dir(tmp_path) -> Path:
    rdir = tmp_path / "rank-0000"
    rdir.mkdir()
    (rdir / "manifest.json").write_text('{"rank": 0}')  # a rank folder: a manifest and spad.bin
    (rdir / "spad.bin").write_bytes(b"")
    (rdir / "dma.bin").write_bytes(bytes.fromhex("".join(DMA)))
    (rdir / "cce.bin").write_bytes(bytes.fromhex("".join(CCE)))
    (rdir / "sem.bin").write_bytes(bytes.fromhex("".join(SEM)))
    return rdir


def test_dump_tables_show_the_documented_columns(rank_dir):
    """docs/CLI.md "dump": the table's columns, addresses in hex, every other integer in
    decimal."""
    # dir, stream, sdma_op, length, first, last, meta, gen, buf_ptr
    assert _table(rank_dir / "dma.bin") == [
        ["0", "S2M", "19", "4", "4660", "1", "0", "0", "2", "0x1100220000"],
        ["1", "M2S", "0", "2", "65536", "0", "1", "0", "3", "0x1000"]]
    # meta, meta_idx, op_name, last, in/out/acc dtype names, valid, length, num_sources,
    # reduction_type; REFERENCES.md "Codes": UINT64=1, BF16=6, FP32=0xA, FP32R=0xB
    assert _table(rank_dir / "cce.bin") == [
        ["0", "1", "19", "MIN", "1", "FP32", "BF16", "FP32R", "1", "2048", "5", "2"],
        ["1", "1", "0", "MAX", "0", "UINT64", "UINT64", "FP32R", "1", "16777215", "3", "1"]]
    # subop_name, role, remote, gen, value, addr
    assert _table(rank_dir / "sem.bin") == [
        ["0", "WAIT_GE_AND_DEC", "255", "1", "1", "7", "0x100000000"],
        ["1", "INC", "3", "1", "2", "1", "0x200000008"],
        ["2", "WAIT_GE_AND_DEC", "3", "0", "0", "1", "0x10"]]


def test_dump_limit_cuts_the_table_and_says_how_many_more(rank_dir):
    res = CliRunner().invoke(main, ["dump", str(rank_dir / "sem.bin"), "--limit", "1"],
                             env={"COLUMNS": "240"})
    assert res.exit_code == 0, res.output
    assert "(3 records)" in res.output and "... 2 more records (--limit 0 shows all)" in res.output
    rows = [line for line in res.output.splitlines() if line.startswith("│")]
    assert len(rows) == 1


def test_dump_json_of_a_rank_folder_names_it_and_every_file(rank_dir):
    res = CliRunner().invoke(main, ["dump", "--sem", str(rank_dir), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["kind"] == "sem" and [r["rank_dir"] for r in doc["ranks"]] == ["rank-0000"]
    recs = doc["ranks"][0]["files"]["sem.bin"]
    assert [_pick(d, SEM_WANT[0]) for d in recs] == SEM_WANT
    assert [d["ctrl"] for d in recs] == [0x0101FF14, 0x02010315, 0x00000314]


def test_spad_bytes_4_to_7_keep_their_place_among_the_stored_fields(tmp_path):
    """docs/CLI.md: a record's stored fields, then its bit fields.  A mesh entry's overlay
    (sema_shift_offset, sema_mask) stands where a ring entry's channel_list does, in the
    streamed --json as in decode_record (it came last, after the bit fields: an exploratory
    tester).  FORMATS §2: header u8, alg u8 (algo_type [3:0]), flags u8, reserved u8, then
    bytes 4..7."""
    ring = "01" "00" "03" "00" "03000000"  # RING (0), channel_list 0b11
    mesh = "01" "22" "03" "00" "c0003f00"  # MESH (2), sub-type 2, overlay 192 / 0x3F
    stored = ["header", "alg", "flags", "reserved"]
    bits = ["cc_op", "algo_type", "algo_type_name", "algo_sub_type", "trigger_next", "reporter",
            "ring_wait_complete", "ring_send_complete"]
    r, m = _decoded("spad.bin", ring, mesh)
    assert list(r) == stored + ["channel_list"] + bits
    # a mesh entry names its sub-type (enc_alg_mesh_type) after it; a ring entry has none
    mesh_bits = bits[:4] + ["algo_sub_type_name"] + bits[4:]
    assert list(m) == stored + ["sema_shift_offset", "sema_mask"] + mesh_bits
    assert (m["sema_shift_offset"], m["sema_mask"], r["channel_list"]) == (192, 0x3F, 3)
    # FORMATS §2: MESH_TRN2 = 2
    assert (m["algo_sub_type"], m["algo_sub_type_name"]) == (2, "MESH_TRN2")
    path = tmp_path / "spad.bin"
    path.write_bytes(bytes.fromhex(ring + mesh + ring))
    res = CliRunner().invoke(main, ["dump", str(path), "--json"])
    assert res.exit_code == 0, res.output
    recs = json.loads(res.stdout)["ranks"][0]["files"]["spad.bin"]
    assert [list(x) for x in recs] == [list(r), list(m), list(r)]
    # the table: cc_op, algo_type_name, algo_sub_type, algo_sub_type_name (a ring entry's
    # '-'), trigger_next, reporter, the two completes, channel_list, the overlay
    assert _table(path) == [
        ["0", "1", "RING", "0", "-", "0", "1", "1", "0", "0x3", "-", "-"],
        ["1", "1", "MESH", "2", "MESH_TRN2", "0", "1", "1", "0", "-", "192", "63"],
        ["2", "1", "RING", "0", "-", "0", "1", "1", "0", "0x3", "-", "-"]]
