"""Instruction word layouts against words packed by hand from the NEFF-LIKE.md §2 tables."""

from __future__ import annotations

import struct

import construct as cs
import numpy as np
import pytest

from nrtrewrite.codes import AluOp, CType, DType
from nrtrewrite.neff.instructions import (
    INSTR_HEADER, INSTR_HEADER_DTYPE, INSTR_WORD_DTYPE, PSEUDO_EXTENSION,
    PSEUDO_TRIGGER_ALL_REDUCE, PSEUDO_TRIGGER_COLLECTIVE, PSEUDO_TRIGGER_COLLECTIVE2,
    WORD_STRUCTS, decode_word, encode_word, opcode_class, opcode_counts, scan_trigger_indices,
)

# common header: opcode, length_dw, reserved u16, wait_mode, wait_idx, update_mode,
# update_idx, semaphore_value
HDR = "<BBHBBBBI"


def hdr(opcode, wm=1, wi=2, um=3, ui=4, sem=0xDEADBEEF):
    return struct.pack(HDR, opcode, 16, 0, wm, wi, um, ui, sem)


def c7(alu=0x04, dtype=6, gid=0, src=1, dst=2, so=0x10, do=0x20, n=1000, **kw):
    # 12 alu u8, 13 dtype u8, 14 gid u16, 16 src u32, 20 dst u32, 24 src_off u64,
    # 32 dst_off u64, 40 num u64, 48..63 reserved
    return hdr(0xC7, **kw) + struct.pack("<BBHIIQQQ16x", alu, dtype, gid, src, dst, so, do, n)


def c8(ctype=1, alu=0x08, dtype=7, gid=1, sid=3, src=4, dst=5, so=64, do=128, n=77):
    # 12 ctype, 13 alu, 14 dtype, 15 res, 16 gid u16, 18 stream u16, 20 src u32, 24 dst u32,
    # 28 res u32, 32 src_off u64, 40 dst_off u64, 48 num u64, 56..63 res
    return hdr(0xC8) + struct.pack("<BBBxHHII4xQQQ8x", ctype, alu, dtype, gid, sid, src, dst,
                                   so, do, n)


def d9(ctype=2, alu=0x09, dtype=0xE, src=3, start=256, ps=4, pc=16,
       dims=((1, 8), (-2, 3), (0, 1)), n=384):
    # 12 ctype, 13 alu, 14 dtype, 15 res, 16 src u32, 20 start u32, 24 pstart u16,
    # 26 pcount u16, 28 3x(i32 step, u32 num), 52 num u64, 60..63 res
    flat = [v for d in dims for v in d]
    return hdr(0xD9) + struct.pack("<BBBxIIHHiIiIiIQ4x", ctype, alu, dtype, src, start, ps, pc,
                                   *flat, n)


def da(gid=1, chan=5, sid=2, dst=9, start=512, ps=0, pc=128, dims=((1, 64), (64, 2), (0, 1))):
    # 12 gid u16, 14 channel u16, 16 stream u16, 18 res u16, 20 dst u32, 24 start u32,
    # 28 pstart u16, 30 pcount u16, 32 3x(i32, u32), 56..63 res
    flat = [v for d in dims for v in d]
    return hdr(0xDA, wm=0, wi=0, um=0, ui=0, sem=0) + struct.pack(
        "<HHH2xIIHHiIiIiI8x", gid, chan, sid, dst, start, ps, pc, *flat)


def test_sizes_agree():
    assert INSTR_HEADER.sizeof() == INSTR_HEADER_DTYPE.itemsize == 12
    assert INSTR_WORD_DTYPE.itemsize == 64
    for st in WORD_STRUCTS.values():
        assert st.sizeof() == 64
    assert struct.calcsize(HDR) == 12
    for word in (c7(), c8(), d9(), da()):
        assert len(word) == 64


def test_header_construct_and_numpy_agree():
    raw = hdr(0x42, wm=9, wi=8, um=7, ui=6, sem=0x01020304)
    parsed = INSTR_HEADER.parse(raw)
    rec = np.frombuffer(raw, dtype=INSTR_HEADER_DTYPE)[0]
    for name in INSTR_HEADER_DTYPE.names:
        if name == "reserved_2":
            assert rec[name] == 0
            continue
        assert parsed[name] == rec[name], name
    assert (parsed.opcode, parsed.length_dw, parsed.wait_mode, parsed.wait_idx,
            parsed.update_mode, parsed.update_idx, parsed.semaphore_value) == \
        (0x42, 16, 9, 8, 7, 6, 0x01020304)
    # building either way gives the same bytes
    arr = np.zeros(1, dtype=INSTR_HEADER_DTYPE)
    for name in INSTR_HEADER_DTYPE.names:
        if name != "reserved_2":
            arr[0][name] = parsed[name]
    assert arr.tobytes() == raw == INSTR_HEADER.build(parsed)
    # the 64-byte word dtype sees the same header fields
    word = raw + bytes(52)
    w = np.frombuffer(word, dtype=INSTR_WORD_DTYPE)[0]
    assert w["opcode"] == 0x42 and w["semaphore_value"] == 0x01020304


def test_c7_word():
    raw = c7(alu=0x04, dtype=6, gid=3, src=11, dst=12, so=2**40, do=7, n=2**63 + 5)
    w = decode_word(0xC7, raw)
    assert w.alu_op is AluOp.ADD and w.dtype is DType.BF16
    assert (w.replica_group_id, w.src_var_id, w.dst_var_id) == (3, 11, 12)
    assert (w.src_offset, w.dst_offset, w.num_elements) == (2**40, 7, 2**63 + 5)
    assert (w.wait_mode, w.wait_idx, w.update_mode, w.update_idx, w.semaphore_value) == \
        (1, 2, 3, 4, 0xDEADBEEF)
    assert PSEUDO_TRIGGER_ALL_REDUCE.build(w) == raw


def test_c8_word():
    raw = c8()
    w = decode_word(0xC8, raw)
    assert w.ctype is CType.ALL_REDUCE and w.alu_op is AluOp.MAX and w.dtype is DType.FP16
    assert (w.replica_group_id, w.stream_id, w.src_var_id, w.dst_var_id) == (1, 3, 4, 5)
    assert (w.src_offset, w.dst_offset, w.num_elements) == (64, 128, 77)
    assert PSEUDO_TRIGGER_COLLECTIVE.build(w) == raw


def test_c8_all_gather_alu_zero_is_none():
    w = decode_word(0xC8, c8(ctype=3, alu=0))
    assert w.ctype is CType.ALL_GATHER and w.alu_op is None
    assert PSEUDO_TRIGGER_COLLECTIVE.build(w) == c8(ctype=3, alu=0)


def test_d9_da_words():
    raw = d9()
    w = decode_word(0xD9, raw)
    assert w.ctype is CType.REDUCE_SCATTER and w.alu_op is AluOp.MIN and w.dtype is DType.FP8_E4
    assert (w.src_var_id, w.src_start, w.src_partition_start, w.src_partition_count) == \
        (3, 256, 4, 16)
    assert [(d.step, d.num) for d in w.src_dims] == [(1, 8), (-2, 3), (0, 1)]
    assert w.num_elements == 384
    assert PSEUDO_TRIGGER_COLLECTIVE2.build(w) == raw
    raw2 = da()
    e = decode_word(0xDA, raw2)
    assert (e.replica_group_id, e.channel_id, e.stream_id, e.dst_var_id, e.dst_start) == \
        (1, 5, 2, 9, 512)
    assert (e.dst_partition_start, e.dst_partition_count) == (0, 128)
    assert [(d.step, d.num) for d in e.dst_dims] == [(1, 64), (64, 2), (0, 1)]
    assert PSEUDO_EXTENSION.build(e) == raw2


def test_encode_word_matches_hand_packed():
    fields = dict(alu_op=AluOp.ADD, dtype=DType.BF16, replica_group_id=0, src_var_id=1,
                  dst_var_id=2, src_offset=0x10, dst_offset=0x20, num_elements=1000,
                  wait_mode=1, wait_idx=2, update_mode=3, update_idx=4,
                  semaphore_value=0xDEADBEEF)
    assert encode_word(0xC7, fields) == c7()


@pytest.mark.parametrize("opcode,maker,offset", [
    (0xC7, c7, 2), (0xC7, c7, 48), (0xC7, c7, 63),
    (0xC8, c8, 15), (0xC8, c8, 28), (0xC8, c8, 56),
    (0xD9, d9, 15), (0xD9, d9, 60),
    (0xDA, da, 18), (0xDA, da, 56),
])
def test_nonzero_reserved_fails(opcode, maker, offset):
    raw = bytearray(maker())
    raw[offset] = 1
    with pytest.raises(cs.ConstError):
        decode_word(opcode, bytes(raw))


@pytest.mark.parametrize("opcode,word,field", [
    (0xC8, c8(ctype=9), "ctype"),
    (0xC8, c8(dtype=0x10), "dtype"),
    (0xC8, c8(alu=0x05), "alu_op"),
    (0xC7, c7(dtype=0), "dtype"),
    (0xD9, d9(ctype=0), "ctype"),
])
def test_unknown_codes_fail(opcode, word, field):
    with pytest.raises(cs.MappingError) as exc:
        decode_word(opcode, word)
    assert field in exc.value.path


def test_scan_and_counts():
    nop = struct.pack(HDR, 0x00, 16, 0, 0, 0, 0, 0, 0) + bytes(52)
    other = struct.pack(HDR, 0xC1, 16, 0, 0, 0, 0, 0, 0) + bytes(52)
    stream = nop + c7() + other + d9() + da() + nop + c8()
    assert scan_trigger_indices(stream).tolist() == [1, 3, 4, 6]
    assert opcode_counts(stream) == {0x00: 2, 0xC1: 1, 0xC7: 1, 0xC8: 1, 0xD9: 1, 0xDA: 1}
    assert opcode_class(0xC7) == "pseudo-trigger"
    assert opcode_class(0xDA) == "pseudo-trigger"
    assert opcode_class(0xC1) == "other-pseudo"
    assert opcode_class(0xBF) == "regular"
    assert opcode_class(0xE0) == "regular"


# mutation audit round 5

@pytest.mark.parametrize("opcode, cls", [(0xC0, "other-pseudo"), (0xDF, "other-pseudo"),
                                         (0xDB, "other-pseudo"), (0xC6, "other-pseudo"),
                                         (0xC8, "pseudo-trigger"), (0xD9, "pseudo-trigger"),
                                         (0x00, "regular"), (0xFF, "regular")])
def test_opcode_classes_at_the_pseudo_range_ends(opcode, cls):
    """docs/CLI.md (inspect): `other-pseudo` is any other 0xC0..0xDF (NEFF-LIKE.md §2: top
    three bits 110), both ends included; 0xC7, 0xC8, 0xD9, 0xDA are `pseudo-trigger`."""
    assert opcode_class(opcode) == cls


@pytest.mark.parametrize("length", [63, 65, 128])
def test_decode_word_refuses_a_word_not_of_64_bytes(length):
    """instructions.py: decode_word "refuses a word whose length is not exactly 64"
    (NEFF-LIKE.md §2: instructions are 64 bytes), longer as well as shorter."""
    word = (c7() + bytes(64))[:length]
    with pytest.raises(ValueError, match=f"^an instruction word must be 64 bytes, not {length}$"):
        decode_word(0xC7, word)


def test_decode_word_refuses_an_opaque_opcode_and_opaque_word_its_arguments():
    """instructions.py: decode_word decodes the four known opcodes only (ValueError for an
    opaque one); opaque_word builds opcode, length_dw 16, reserved 0, the 8 sync bytes and
    the 52 operand bytes (NEFF-LIKE.md §2's common header), refusing an opcode past a byte
    and sync / operands of other lengths."""
    from nrtrewrite.neff.instructions import opaque_word
    with pytest.raises(ValueError, match="^opcode 0x41 is opaque$"):
        decode_word(0x41, bytes([0x41, 16]) + bytes(62))
    word = opaque_word(0xC1, sync=bytes(range(1, 9)), operands=b"\xaa" * 52)
    assert word == bytes([0xC1, 16, 0, 0]) + bytes(range(1, 9)) + b"\xaa" * 52
    for opcode in (-1, 256):
        with pytest.raises(ValueError, match=f"^opcode {opcode} out of range$"):
            opaque_word(opcode)
    for kw in ({"sync": bytes(7)}, {"operands": bytes(53)}):
        with pytest.raises(ValueError, match="^sync takes 8 bytes and operands 52$"):
            opaque_word(0, **kw)
