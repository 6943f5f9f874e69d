"""Byte formats against hand-computed bytes from the seeds' bit layouts (docs/FORMATS.md)."""

import struct

import numpy as np
import pytest

from nrtrewrite.codes import DType, EncAlgMeshType, EncAlgType, SdmaCceType
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.address import (
    EVT_SEM_DEC, EVT_SEM_INC, EVT_SEM_READ, EVT_SEM_SET, channel_sem, decode_sema_address,
    sema_address,
)
from nrtrewrite.emit.tiling import cce_dtype_nibbles, packet_size, tile_elements
from nrtrewrite.errors import LimitError
from nrtrewrite.serialize import create_spad_ctrl_entry, serialize_spad


def entry(**kw):
    base = dict(algo_type=0, algo_sub_type=0, trigger_next=False, reporter=False,
                ring_wait_complete=False, ring_send_complete=False, channel_list=0)
    base.update(kw)
    return base


@pytest.mark.parametrize("kw, expected", [
    # byte0 bit0 cc_op=1; byte1 algo_type[3:0] sub[6:4] trigger_next[7];
    # byte2 reporter[0] ring_wait_complete[1] ring_send_complete[2]; byte3 0; bytes4-7 list
    (dict(), bytes([1, 0, 0, 0, 0, 0, 0, 0])),
    (dict(algo_type=EncAlgType.RING, reporter=True, ring_wait_complete=True,
          channel_list=0xF), bytes([1, 0x00, 0x03, 0, 0x0F, 0, 0, 0])),
    (dict(algo_type=EncAlgType.KANGARING, trigger_next=True, channel_list=1 << 31),
     bytes([1, 0x83, 0, 0, 0, 0, 0, 0x80])),
    (dict(algo_type=EncAlgType.SINGLE_CYCLE_RING, ring_send_complete=True, channel_list=5),
     bytes([1, 0x04, 0x04, 0, 5, 0, 0, 0])),
    (dict(algo_type=EncAlgType.INTER_RDH, trigger_next=True),
     bytes([1, 0x87, 0, 0, 0, 0, 0, 0])),
    (dict(algo_type=EncAlgType.MESH, algo_sub_type=EncAlgMeshType.MESH_TRN2,
          sema_shift_offset=0x1234, sema_mask=0xBEEF),
     bytes([1, 0x22, 0, 0, 0x34, 0x12, 0xEF, 0xBE])),
    (dict(algo_type=EncAlgType.BW_OPT_MESH, algo_sub_type=EncAlgMeshType.MESH_SWITCH,
          trigger_next=True), bytes([1, 0xBA, 0, 0, 0, 0, 0, 0])),
])
def test_spad_entry_bytes(kw, expected):
    assert create_spad_ctrl_entry(entry(**kw)).tobytes() == expected
    # construct reference decodes the same bytes
    rec = F.SpadCtrlEntry.parse(expected)
    assert rec.header == 1


def test_spad_limit_4k():
    assert len(serialize_spad([entry()] * 512)) == 4096
    with pytest.raises(LimitError, match="4096"):
        serialize_spad([entry()] * 513)


def test_spad_limit_is_per_subgraph():
    """FORMATS.md §2: "Each subgraph's entries form one CTRL SPAD program (4 KiB): at most 512
    entries per subgraph" - a rank with 300 entries in each of two subgraphs (600 x 8 = 4800
    bytes in all) is not refused; 513 in one subgraph are."""
    two = [entry(subgraph="sg00")] * 300 + [entry(subgraph="sg01")] * 300
    assert len(serialize_spad(two)) == 600 * 8
    with pytest.raises(LimitError, match="4096"):
        serialize_spad([entry(subgraph="sg01")] * 513 + [entry(subgraph="sg00")])


def test_spad_fields_must_fit():
    with pytest.raises(ValueError):
        F.pack_spad_alg(16, 0, False)
    with pytest.raises(ValueError):
        F.pack_spad_alg(0, 8, False)


@pytest.mark.parametrize("alu, cce", [(0x04, 0), (0x08, 2), (0x09, 3)])
def test_alu_to_cce_op(alu, cce):
    from nrtrewrite.codes import ALU_TO_CCE, AluOp
    assert int(ALU_TO_CCE[AluOp(alu)]) == cce


@pytest.mark.parametrize("op, dtype, last, expected", [
    # valid bit 25 = 0x2000000; in [11:8]; out [15:12]; acc [19:16]; last bit 7; sub [2:0]
    (SdmaCceType.ADD, DType.BF16, True, 0x2000000 | 0xB << 16 | 6 << 12 | 6 << 8 | 0x80),
    (SdmaCceType.MAX, DType.FP16, False, 0x2000000 | 0xB << 16 | 7 << 12 | 7 << 8 | 2),
    (SdmaCceType.MIN, DType.FP8_E4, True, 0x2000000 | 0xB << 16 | 0xE << 12 | 0xE << 8 | 0x80 | 3),
    # FP32R: I/O nibbles carry FP32 (0xA), the accumulate nibble FP32R (0xB)
    (SdmaCceType.ADD, DType.FP32R, False, 0x2000000 | 0xB << 16 | 0xA << 12 | 0xA << 8),
])
def test_cce_meta_ctrl(op, dtype, last, expected):
    in_dt, out_dt, acc_dt = cce_dtype_nibbles(dtype)
    assert F.cce_meta_ctrl(int(op), in_dt, out_dt, acc_dt, last) == expected


def test_cce_doc_example():
    """docs/FORMATS.md §6 worked example."""
    assert F.cce_meta_ctrl(0, 6, 6, 0xB, True) == 0x020B6680


@pytest.mark.parametrize("dtype", [DType.FP32, DType.INT32, DType.UINT8, DType.INT64])
def test_cce_refuses_non_reducible(dtype):
    with pytest.raises(ValueError):
        cce_dtype_nibbles(dtype)


@pytest.mark.parametrize("sp, sem, window, expected", [
    (0, 0, EVT_SEM_READ, 0x8280001000),
    (0, 1, EVT_SEM_SET, 0x8280001404),
    (0, 16, EVT_SEM_INC, 0x8280001840),
    (0, 255, EVT_SEM_DEC, 0x8280001FFC),
    (3, 17, EVT_SEM_INC, 0x8280000000 + (3 << 30) + 0x1800 + 68),
    (9, 2, EVT_SEM_DEC, 0x8280000000 + (1 << 30) + (1 << 47) + 0x1C00 + 8),
])
def test_evt_sem_addresses(sp, sem, window, expected):
    assert sema_address(sp, sem, window) == expected
    assert decode_sema_address(expected) == (sp, window, sem)


@pytest.mark.parametrize("local", [
    0x827FFFFFFC,                           # below EVT_SEM_BASE 0x82_8000_0000
    0x8280000FFC,                           # TOP_SP 0, below the READ window (0x1000)
    0x8280002000,                           # TOP_SP 0, past the DEC window (0x1C00 + 256 * 4)
    0x8280001002,                           # inside the READ window, not on a 4-byte semaphore
    0x8280000000 + (8 << 30) + 0x1800,      # a ninth TOP_SP of a die: its stride has 8 (0..7)
])
def test_an_address_that_is_no_evt_sem_semaphore_decodes_to_none(local):
    """docs/FORMATS.md §10: a semaphore is EVT_SEM_BASE + TOP_SP (0..7, stride 1 << 30) +
    window (READ, SET, INC, DEC at 0x1000..0x1C00) + 4 * id (256 per core); any other local
    address is none."""
    assert decode_sema_address(local) is None


def test_semaphore_limits():
    with pytest.raises(LimitError):
        sema_address(0, 256, EVT_SEM_INC)
    assert channel_sem(0, 0) == 16 and channel_sem(31, 3) == 16 + 4 * 31 + 3 < 256
    with pytest.raises(LimitError, match="out of semaphores"):
        channel_sem(60, 3)


def test_packet_size_formula():
    # min(dtype_size * N, prio_pkt_size) & ~0x1F
    assert packet_size(2, np.array([1000]), 0)[0] == 2000 & ~0x1F
    assert packet_size(2, np.array([10 ** 6]), 0)[0] == 65536
    assert packet_size(2, np.array([10 ** 6]), 2)[0] == 4096
    assert packet_size(1, np.array([31]), 0)[0] == 0
    # CCE element cap (seed 000 §3.4) on reduce legs: 2048 on v3/v4, 1024 on v2; copies
    # are not capped (64 KiB / 2 = 32768); a tiny leg is one tile
    big = np.array([10 ** 6])
    for gen, cap in ((2, 1024), (3, 2048), (4, 2048)):
        assert tile_elements(2, big, np.array([True]), hw_generation=gen)[0] == cap
        assert tile_elements(2, big, np.array([False]), hw_generation=gen)[0] == 32768
        assert tile_elements(1, np.array([7]), np.array([True]), hw_generation=gen)[0] == 7
    # a 1500-element bf16 reduce: packet 3000 & ~0x1F = 2976 bytes = 1488 elements, under
    # v3's cap, over v2's
    assert tile_elements(2, np.array([1500]), np.array([True]), hw_generation=3)[0] == 1488
    assert tile_elements(2, np.array([1500]), np.array([True]), hw_generation=2)[0] == 1024
    with pytest.raises(ValueError, match="unknown hardware generation 1"):
        tile_elements(2, big, np.array([True]), hw_generation=1)


@pytest.mark.parametrize("name", sorted(F.RECORDS))
def test_numpy_and_construct_agree(name):
    """Each record's dtype and struct have one size, and the same bytes read as the same
    values on both paths (every artifact's record and the TOPSP_KICK word), nested records
    (sb2sb.bin's src and dst TENSOR3D, a kick's sync) field by field too (review 53e: they
    were skipped); the values construct parsed, written into a numpy record,
    give the same bytes back."""
    dtype, struct_ = F.RECORDS[name]
    assert dtype.itemsize == struct_.sizeof()
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, dtype.itemsize, dtype=np.uint8).tobytes()
    # zero the bytes the construct struct requires to be zero (Const), then round-trip both ways
    zeroed = bytearray(raw)
    for off, value in _const_spans(struct_):
        zeroed[off:off + len(value)] = value
    parsed = struct_.parse(bytes(zeroed))
    assert struct_.build(parsed) == bytes(zeroed)
    rec = np.frombuffer(bytes(zeroed), dtype)[0]
    _assert_same_values(rec, parsed, name)
    built = np.zeros(1, dtype)
    _fill(built[0], parsed)
    assert built.tobytes() == bytes(zeroed)


def _assert_same_values(rec, parsed, where: str) -> None:
    """Every field of numpy record ``rec`` equals construct's ``parsed``, nested ones too."""
    for field in rec.dtype.names:
        val, got = rec[field], parsed[field]
        if isinstance(val, np.void):
            _assert_same_values(val, got, f"{where}.{field}")
        elif isinstance(val, np.ndarray):
            assert list(val) == list(got), f"{where}.{field}"
        else:
            assert int(val) == int(got), f"{where}.{field}"


def _fill(rec, parsed) -> None:
    """Write construct's ``parsed`` values into numpy record ``rec`` (a view), nested too."""
    for field in rec.dtype.names:
        if isinstance(rec[field], np.void):
            _fill(rec[field], parsed[field])
        else:
            got = parsed[field]
            rec[field] = list(got) if isinstance(got, (bytes, list)) else got


def _const_spans(struct_, base: int = 0):
    """(offset, required bytes) of every Const field of a struct, nested structs' too."""
    import construct as cs
    spans, off = [], base
    for sub in struct_.subcons:
        size = sub.sizeof()
        inner = sub.subcon if isinstance(sub, cs.Renamed) else sub
        if isinstance(inner, cs.Const):
            spans.append((off, inner.build(None)))
        elif isinstance(inner, cs.Struct):
            spans += _const_spans(inner, off)
        off += size
    return spans


def test_sb2sb_word_hand_packed():
    """A 0xBF word from our dtype equals struct.pack of the ISA layout (docs/FORMATS.md §4)."""
    w = np.zeros(1, F.SB2SB_DTYPE)
    w["opcode"], w["inst_word_len"] = 0xBF, 16
    w["wait_mode"], w["wait_idx"], w["update_mode"], w["update_idx"] = 20, 16, 21, 19
    w["semaphore_value"] = 1
    w["in_dtype"] = w["out_dtype"] = 6
    w["src"]["start_addr"] = 0x1234
    w["src"]["step_elem"] = (1, 256, 0)
    w["src"]["num_elem"] = (256, 3, 1)
    w["lnc_size_fmt"], w["num_active_channels"] = 1, 4
    w["dst"]["start_addr"] = 0x40
    w["dst"]["step_elem"] = (1, 256, 0)
    w["dst"]["num_elem"] = (256, 3, 1)
    expected = (struct.pack("<BBBBBBBBI", 0xBF, 16, 0, 0, 20, 16, 21, 19, 1)
                + struct.pack("<BB2x", 6, 6)
                + struct.pack("<I3h3H", 0x1234, 1, 256, 0, 256, 3, 1)
                + struct.pack("<BB14x", 1, 4)
                + struct.pack("<I3h3H", 0x40, 1, 256, 0, 256, 3, 1))
    assert w.tobytes() == expected
    assert F.S3D3Collective.parse(expected).src.num_elem == [256, 3, 1]


def test_net_terminator_is_the_16_byte_store():
    """proxy_end_operation: one 16-byte store of 0x100000000 at the size field (seed 003 §3)."""
    from nrtrewrite.emit.legs import _terminator
    for dtype, rank_field in ((F.NET_SRC_ADDR_DTYPE, "dst_rank"),
                              (F.NET_DEST_ADDR_DTYPE, "src_rank")):
        rec = _terminator(dtype, 6, rank_field).tobytes()
        assert struct.unpack_from("<I", rec, 0)[0] == 6
        assert rec[32:40] == (0x100000000).to_bytes(8, "little")
        assert struct.unpack_from("<i", rec, 40 if rank_field == "src_rank" else 48)[0] == -1
    assert F.NET_OPS_INFO_DTYPE.itemsize == 96
    assert F.NET_SRC_ADDR_DTYPE.fields["mark"][1] == 36
    assert F.NET_DEST_ADDR_DTYPE.fields["mark"][1] == 36
