"""The 64-byte instruction words of NEFF-LIKE.md §2, declared once.

* :data:`INSTR_HEADER` (construct) and :data:`INSTR_HEADER_DTYPE` (numpy) are the
  common 12-byte header; :data:`INSTR_WORD_DTYPE` is a whole 64-byte word with
  the header fields and the 52 operand bytes opaque, for bulk scanning of a
  stream (find trigger words with numpy, decode only those with construct).
* :data:`PSEUDO_TRIGGER_ALL_REDUCE` (0xC7), :data:`PSEUDO_TRIGGER_COLLECTIVE`
  (0xC8), :data:`PSEUDO_TRIGGER_COLLECTIVE2` (0xD9) and :data:`PSEUDO_EXTENSION`
  (0xDA) are whole-word structs with the operands at the contract offsets.
  Reserved bytes are ``Const`` zeros, codes are :class:`StrictEnum` s built from
  the IntEnums of :mod:`nrtrewrite.codes`.  The structs are fixed-size (no
  ``Terminated``, so ``sizeof()`` works); :func:`decode_word` refuses a word whose
  length is not exactly 64.
* Every other opcode is opaque: 64 bytes passed through unchanged.

The structs check structure only (reserved bytes, known codes); the rules that
need the model (var types, bounds, groups, ``length_dw``) live in
:mod:`nrtrewrite.neff.reader`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import construct as cs
import numpy as np

from nrtrewrite.codes import AluOp, CType, DType, Opcode, is_pseudo
from nrtrewrite.neff.fields import StrictEnum, field_offsets, zero_bytes

if TYPE_CHECKING:
    from nrtrewrite.neff.model import Trigger

WORD_SIZE = 64
LENGTH_DW = 16  # length_dw of every instruction: 16 dwords = 64 bytes

#: Common header fields (opcode .. semaphore_value), splatted into each word struct
#: so that decoded words are flat containers.
_HEADER_FIELDS = (
    "opcode" / cs.Int8ul,
    "length_dw" / cs.Int8ul,
    "reserved_2" / zero_bytes(2),
    "wait_mode" / cs.Int8ul,
    "wait_idx" / cs.Int8ul,
    "update_mode" / cs.Int8ul,
    "update_idx" / cs.Int8ul,
    "semaphore_value" / cs.Int32ul,
)

#: The common 12-byte instruction header.
INSTR_HEADER = cs.Struct(*_HEADER_FIELDS)

#: The same header as a numpy structured dtype (explicit little-endian, offsets).
INSTR_HEADER_DTYPE = np.dtype({
    "names": ["opcode", "length_dw", "reserved_2", "wait_mode", "wait_idx",
              "update_mode", "update_idx", "semaphore_value"],
    "formats": ["u1", "u1", "<u2", "u1", "u1", "u1", "u1", "<u4"],
    "offsets": [0, 1, 2, 4, 5, 6, 7, 8],
    "itemsize": 12,
})

#: A whole 64-byte word: the header fields plus 52 opaque operand bytes.
INSTR_WORD_DTYPE = np.dtype({
    "names": list(INSTR_HEADER_DTYPE.names) + ["operands"],
    "formats": [INSTR_HEADER_DTYPE.fields[n][0] for n in INSTR_HEADER_DTYPE.names] + ["V52"],
    "offsets": [INSTR_HEADER_DTYPE.fields[n][1] for n in INSTR_HEADER_DTYPE.names] + [12],
    "itemsize": WORD_SIZE,
})


def _dims(prefix: str) -> cs.Construct:
    """Three free dimensions, innermost first: (i32 step, u32 num) each."""
    return f"{prefix}_dims" / cs.Array(3, cs.Struct("step" / cs.Int32sl, "num" / cs.Int32ul))


_ALU = StrictEnum(cs.Int8ul, AluOp, zero_is_none=True)
_DTYPE = StrictEnum(cs.Int8ul, DType)
_CTYPE = StrictEnum(cs.Int8ul, CType)

#: 0xC7 PSEUDO_TRIGGER_ALL_REDUCE (compact; ctype implicitly ALL_REDUCE).
PSEUDO_TRIGGER_ALL_REDUCE = cs.Struct(
    *_HEADER_FIELDS,
    "alu_op" / _ALU,                      # 12
    "dtype" / _DTYPE,                     # 13
    "replica_group_id" / cs.Int16ul,      # 14
    "src_var_id" / cs.Int32ul,            # 16
    "dst_var_id" / cs.Int32ul,            # 20
    "src_offset" / cs.Int64ul,            # 24
    "dst_offset" / cs.Int64ul,            # 32
    "num_elements" / cs.Int64ul,          # 40
    "reserved_48" / zero_bytes(16),       # 48..63
)

#: 0xC8 PSEUDO_TRIGGER_COLLECTIVE.
PSEUDO_TRIGGER_COLLECTIVE = cs.Struct(
    *_HEADER_FIELDS,
    "ctype" / _CTYPE,                     # 12
    "alu_op" / _ALU,                      # 13 (0 for ALL_GATHER)
    "dtype" / _DTYPE,                     # 14
    "reserved_15" / zero_bytes(1),        # 15
    "replica_group_id" / cs.Int16ul,      # 16
    "stream_id" / cs.Int16ul,             # 18
    "src_var_id" / cs.Int32ul,            # 20
    "dst_var_id" / cs.Int32ul,            # 24
    "reserved_28" / zero_bytes(4),        # 28
    "src_offset" / cs.Int64ul,            # 32
    "dst_offset" / cs.Int64ul,            # 40
    "num_elements" / cs.Int64ul,          # 48
    "reserved_56" / zero_bytes(8),        # 56..63
)

#: 0xD9 PSEUDO_TRIGGER_COLLECTIVE2 (SBUF source operand).
PSEUDO_TRIGGER_COLLECTIVE2 = cs.Struct(
    *_HEADER_FIELDS,
    "ctype" / _CTYPE,                     # 12
    "alu_op" / _ALU,                      # 13
    "dtype" / _DTYPE,                     # 14
    "reserved_15" / zero_bytes(1),        # 15
    "src_var_id" / cs.Int32ul,            # 16
    "src_start" / cs.Int32ul,             # 20
    "src_partition_start" / cs.Int16ul,   # 24
    "src_partition_count" / cs.Int16ul,   # 26
    _dims("src"),                         # 28..51
    "num_elements" / cs.Int64ul,          # 52
    "reserved_60" / zero_bytes(4),        # 60..63
)

#: 0xDA PSEUDO_EXTENSION (the second word of a 0xD9 trigger; SBUF destination).
PSEUDO_EXTENSION = cs.Struct(
    *_HEADER_FIELDS,
    "replica_group_id" / cs.Int16ul,      # 12
    "channel_id" / cs.Int16ul,            # 14
    "stream_id" / cs.Int16ul,             # 16
    "reserved_18" / zero_bytes(2),        # 18
    "dst_var_id" / cs.Int32ul,            # 20
    "dst_start" / cs.Int32ul,             # 24
    "dst_partition_start" / cs.Int16ul,   # 28
    "dst_partition_count" / cs.Int16ul,   # 30
    _dims("dst"),                         # 32..55
    "reserved_56" / zero_bytes(8),        # 56..63
)

#: Opcode -> whole-word struct, for the words we decode.
WORD_STRUCTS: dict[Opcode, cs.Struct] = {
    Opcode.PSEUDO_TRIGGER_ALL_REDUCE: PSEUDO_TRIGGER_ALL_REDUCE,
    Opcode.PSEUDO_TRIGGER_COLLECTIVE: PSEUDO_TRIGGER_COLLECTIVE,
    Opcode.PSEUDO_TRIGGER_COLLECTIVE2: PSEUDO_TRIGGER_COLLECTIVE2,
    Opcode.PSEUDO_EXTENSION: PSEUDO_EXTENSION,
}

#: ``{opcode: {field: (offset, size)}}`` for error offsets and field patching.
WORD_FIELDS: dict[Opcode, dict[str, tuple[int, int]]] = {
    op: field_offsets(st) for op, st in WORD_STRUCTS.items()
}

#: Opcodes the bulk scan must look at: the triggers and the extension word.
SCAN_OPCODES = np.array(sorted(int(o) for o in WORD_STRUCTS), dtype=np.uint8)


class OpcodeClass:
    """Names of the three opcode classes counted by ``inspect``."""

    PSEUDO_TRIGGER = "pseudo-trigger"  # 0xC7, 0xC8, 0xD9, 0xDA
    OTHER_PSEUDO = "other-pseudo"  # any other 0xC0..0xDF
    REGULAR = "regular"  # everything else


def opcode_class(opcode: int) -> str:
    """Which of :class:`OpcodeClass` an opcode belongs to."""
    if opcode in WORD_STRUCTS:
        return OpcodeClass.PSEUDO_TRIGGER
    if is_pseudo(opcode):
        return OpcodeClass.OTHER_PSEUDO
    return OpcodeClass.REGULAR


def stream_words(stream: bytes) -> np.ndarray:
    """A stream as an array of :data:`INSTR_WORD_DTYPE` (length must be a multiple of 64)."""
    return np.frombuffer(stream, dtype=INSTR_WORD_DTYPE)


def scan_trigger_indices(stream: bytes) -> np.ndarray:
    """Instruction indices of every 0xC7, 0xC8, 0xD9 and 0xDA word, ascending."""
    words = stream_words(stream)
    return np.flatnonzero(np.isin(words["opcode"], SCAN_OPCODES))


def opcode_counts(stream: bytes) -> dict[int, int]:
    """``{opcode: number of words}`` of one stream."""
    ops = stream_words(stream)["opcode"]
    values, counts = np.unique(ops, return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts)}


def opaque_word(opcode: int, *, sync: bytes = bytes(8), operands: bytes = bytes(52)) -> bytes:
    """An opaque instruction word: opcode, length_dw 16, reserved 0, sync bytes, operands."""
    if not 0 <= opcode <= 0xFF:
        raise ValueError(f"opcode {opcode} out of range")
    if len(sync) != 8 or len(operands) != 52:
        raise ValueError("sync takes 8 bytes and operands 52")
    return bytes((opcode, LENGTH_DW, 0, 0)) + bytes(sync) + bytes(operands)


def decode_word(opcode: int, word: bytes) -> cs.Container:
    """Decode one 64-byte word of a known opcode (0xC7, 0xC8, 0xD9, 0xDA).

    Raises ``construct.ConstructError`` (reserved bytes, unknown codes) or
    ``ValueError`` (wrong length or opcode); the reader turns these into
    one-line errors with the location.
    """
    if len(word) != WORD_SIZE:
        raise ValueError(f"an instruction word must be {WORD_SIZE} bytes, not {len(word)}")
    struct = WORD_STRUCTS.get(opcode)
    if struct is None:
        raise ValueError(f"opcode 0x{opcode:02x} is opaque")
    return struct.parse(word)


def encode_word(opcode: int, fields: dict) -> bytes:
    """Build one 64-byte word of a known opcode from a field dict.

    ``length_dw`` defaults to 16 and the sync fields to 0; unknown enum codes
    raise ``construct.MappingError``.
    """
    struct = WORD_STRUCTS[opcode]
    values = {"opcode": int(opcode), "length_dw": LENGTH_DW, "wait_mode": 0, "wait_idx": 0,
              "update_mode": 0, "update_idx": 0, "semaphore_value": 0}
    values.update(fields)
    return struct.build(values)


def trigger_where(trig: Trigger, field: str | None = None, *, second: bool = False) -> dict:
    """Where a trigger's instruction is, as the reader names it (docs/CLI.md "Errors"): its
    member, subgraph, stream and instruction index, the trigger, and with ``field`` that
    field of the word (of the 0xDA word, the instruction after the first, with ``second``)
    and its byte offset in the member."""
    index = trig.index + (1 if second else 0)
    where = dict(member=f"{trig.subgraph}/{trig.engine}.bin", subgraph=trig.subgraph,
                 stream=trig.engine, index=index, trigger=trig.ordinal)
    if field is not None:
        opcode = Opcode.PSEUDO_EXTENSION if second else trig.opcode
        where.update(field=field, offset=index * WORD_SIZE + WORD_FIELDS[opcode][field][0])
    return where
