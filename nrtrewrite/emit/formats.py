"""Every binary record nrtrewrite writes, declared once (docs/FORMATS.md).

Each record has a numpy structured dtype (the bulk path: emit builds whole
arrays and calls ``tobytes()``) and a construct struct (the reference: single
records, decoding for ``dump``, and the test oracle).  tests/test_emit_formats.py
checks ``dtype.itemsize == struct.sizeof()`` and identical bytes for the same
record, nested fields too; tests/test_formats_pinned.py pins the constants and
layouts to docs/FORMATS.md's tables.  Bit-field words are kept as integers with
documented shifts and masks (STYLE.md: construct's BitStruct is MSB-first).
"""

from __future__ import annotations

import os
import re

import construct as cs
import numpy as np

from nrtrewrite.codes import Opcode
from nrtrewrite.errors import json_text
from nrtrewrite.neff.instructions import LENGTH_DW

# ---------------------------------------------------------------------------
# spad_ctrl_entry (seed 000 §4.3), 8 bytes: ``header`` and the 7-byte spad_ctrl_cc_op_entry
# flattened into the bytes ``alg``, ``flags``, ``reserved`` and ``channel_list``.  The seed's
# prose chains HIER entries "by trigger_next/complete_prev"; its struct has no complete_prev
# bit, so an entry carries trigger_next only (docs/FORMATS.md §2).
# byte0 bit0 cc_op; byte1 algo_type[3:0] algo_sub_type[6:4] trigger_next[7];
# byte2 reporter[0] ring_wait_complete[1] ring_send_complete[2]; byte3 0;
# bytes 4..7 channel_list (ring family) or sema_shift_offset u16 + sema_mask u16 (mesh).
SPAD_DTYPE = np.dtype([("header", "u1"), ("alg", "u1"), ("flags", "u1"), ("reserved", "u1"),
                       ("channel_list", "<u4")])
SpadCtrlEntry = cs.Struct(
    "header" / cs.Int8ul,
    "alg" / cs.Int8ul,
    "flags" / cs.Int8ul,
    "reserved" / cs.Const(0, cs.Int8ul),
    "channel_list" / cs.Int32ul,
)
SPAD_CC_OP = 0x01
SPAD_FLAG_REPORTER = 0x01
SPAD_FLAG_RING_WAIT_COMPLETE = 0x02
SPAD_FLAG_RING_SEND_COMPLETE = 0x04
#: The TOP_SP CTRL SPAD is 4 KiB (seed 000 §4.3): at most 512 entries.
SPAD_BYTES = 4096


def pack_spad_alg(algo_type: int, algo_sub_type: int, trigger_next: bool) -> int:
    """byte 1: algo_type [3:0], algo_sub_type [6:4], trigger_next [7]."""
    if not 0 <= algo_type <= 0xF or not 0 <= algo_sub_type <= 0x7:
        raise ValueError("algo_type must fit 4 bits and algo_sub_type 3 bits")
    return algo_type | (algo_sub_type << 4) | (int(bool(trigger_next)) << 7)


# ---------------------------------------------------------------------------
# NEURON_ISA_TPB_TENSOR3D and the 0xBF S3D3_COLLECTIVE word (64 bytes).
TENSOR3D_FIELDS = [("start_addr", "<u4"), ("step_elem", "<i2", (3,)), ("num_elem", "<u2", (3,))]
SB2SB_DTYPE = np.dtype([
    ("opcode", "u1"), ("inst_word_len", "u1"), ("debug_cmd", "u1"), ("debug_hint", "u1"),
    ("wait_mode", "u1"), ("wait_idx", "u1"), ("update_mode", "u1"), ("update_idx", "u1"),
    ("semaphore_value", "<u4"),
    ("in_dtype", "u1"), ("out_dtype", "u1"), ("reserved0", "u1", (2,)),
    ("src", np.dtype(TENSOR3D_FIELDS)),
    ("lnc_size_fmt", "u1"),
    ("num_active_channels", "u1"),  # 1..128, POOLING_NUM_CHANNELS (seed 000 §3.2)
    ("reserved1", "u1", (14,)),
    ("dst", np.dtype(TENSOR3D_FIELDS)),
])
Tensor3D = cs.Struct(
    "start_addr" / cs.Int32ul,
    "step_elem" / cs.Array(3, cs.Int16sl),
    "num_elem" / cs.Array(3, cs.Int16ul),
)
S3D3Collective = cs.Struct(
    "opcode" / cs.Const(int(Opcode.SB2SB_COLLECTIVE), cs.Int8ul),
    "inst_word_len" / cs.Const(16, cs.Int8ul),
    "debug_cmd" / cs.Int8ul,
    "debug_hint" / cs.Int8ul,
    "wait_mode" / cs.Int8ul,
    "wait_idx" / cs.Int8ul,
    "update_mode" / cs.Int8ul,
    "update_idx" / cs.Int8ul,
    "semaphore_value" / cs.Int32ul,
    "in_dtype" / cs.Int8ul,
    "out_dtype" / cs.Int8ul,
    "reserved0" / cs.Const(bytes(2)),
    "src" / Tensor3D,
    "lnc_size_fmt" / cs.Int8ul,
    "num_active_channels" / cs.Int8ul,
    "reserved1" / cs.Const(bytes(14)),
    "dst" / Tensor3D,
)
#: Per-dimension element cap of our TENSOR3D legs (docs/FORMATS.md "t3d cap").
T3D_DIM_CAP = 256
#: NEURON_ISA_TPB_LNC_SIZE_FMT
LNC_SIZE_FMT = {1: 0, 2: 1}

# ---------------------------------------------------------------------------
# al_udma 16-byte buffer descriptor (data BDs: dma.bin; semaphore BDs: sem.bin).
# len_ctrl: [15:0] length (0 = 65536), [23] META, [25:24] ring id / generation tag,
# [26] FIRST, [27] LAST.  meta_ctrl: ours, see docs/FORMATS.md.
BD_DTYPE = np.dtype([("len_ctrl", "<u4"), ("meta_ctrl", "<u4"), ("buf_ptr", "<u8")])
UdmaDesc = cs.Struct("len_ctrl" / cs.Int32ul, "meta_ctrl" / cs.Int32ul, "buf_ptr" / cs.Int64ul)
LEN_MASK = 0xFFFF
#: META: 0 in every data BD (docs/FORMATS.md §5; `lower` never sets it, `simulate` refuses it).
LEN_META = 1 << 23
GEN_SHIFT = 24
GEN_MASK = 0x3
LEN_FIRST = 1 << 26
LEN_LAST = 1 << 27
#: Largest length one BD carries (16-bit length field, 0 meaning 65536).
BD_MAX_BYTES = 65536
#: BD ring entries per channel queue; the generation tag counts wraps mod 4.
BD_RING_ENTRIES = 4096

# data BD meta_ctrl (ours): [3:0] SDMAOP (2 CME copy, 4 CCE reduce), [4] direction
# (0 = M2S read, 1 = S2M write), [12:8] stream index (source i or destination j).
META_DIR_S2M = 1 << 4
META_STREAM_SHIFT = 8
META_STREAM_MASK = 0x1F

# Semaphore BD (sem.bin, 16 bytes, ours; docs/FORMATS.md): a data-BD-shaped record
# whose 2nd word carries the value (the runtime keeps it in a devmem word,
# alloc_sema_value) and whose address is an EVT_SEM window address.
# ctrl: [7:0] EVT_SEM subop (20 wait_ge_and_dec, 21 inc), [15:8] role (SemRole),
#       [16] remote (the address carries routing bits), [25:24] generation tag.
SEM_SUBOP_MASK = 0xFF
SEM_ROLE_SHIFT = 8
SEM_REMOTE = 1 << 16
SEM_DTYPE = np.dtype([("ctrl", "<u4"), ("value", "<u4"), ("addr", "<u8")])
SemBD = cs.Struct("ctrl" / cs.Int32ul, "value" / cs.Int32ul, "addr" / cs.Int64ul)

# ---------------------------------------------------------------------------
# CCE compute descriptor (16 bytes, one per source per tile; seed 000 §3.3).
# W0: 0x800000 | (meta_idx << 24)           (bit 23: carries a meta-control word)
# W1: meta-ctrl: sub-op [2:0] = SDMA_CCETYPE, last [7], in dtype [11:8],
#     out dtype [15:12], accumulate dtype [19:16], valid [25]
# W2: (length & 0xFFFFFF) in bytes of this source's tile stream
# W3: ours: num_sources [5:0], reduction_type_t [9:8]
CCE_DTYPE = np.dtype([("w0", "<u4"), ("w1", "<u4"), ("w2", "<u4"), ("w3", "<u4")])
CceDesc = cs.Struct("w0" / cs.Int32ul, "w1" / cs.Int32ul, "w2" / cs.Int32ul, "w3" / cs.Int32ul)
CCE_W0_META = 0x800000
CCE_VALID = 0x2000000
CCE_LAST = 1 << 7


def cce_meta_ctrl(op: int, in_dt: int, out_dt: int, acc_dt: int, last: bool) -> int:
    """The meta-ctrl word of one CCE source (op = SDMA_CCETYPE)."""
    return ((op & 0x7) | (int(bool(last)) << 7) | ((in_dt & 0xF) << 8) | ((out_dt & 0xF) << 12)
            | ((acc_dt & 0xF) << 16) | CCE_VALID)


# ---------------------------------------------------------------------------
# legs.bin: one record per leg (ours; the queue program the TOP_SP walks).  Seed 001's
# per-leaf ``cc_op_entry`` step descriptor ("each leaf emits the cc_op_entry + SDMA
# descriptor") is this record: the seeds give no bytes for it, so legs.bin is our format
# (docs/FORMATS.md §3).  Not seed 000's spad_ctrl_cc_op_entry, the per-collective SPAD entry.
LEG_DTYPE = np.dtype([
    ("trigger", "<u4"), ("spad_index", "<u2"), ("channel", "u1"), ("sdma_op", "u1"),
    ("step", "<u4"), ("leaf", "u1"), ("half", "u1"), ("reduction_type", "u1"), ("neigh", "u1"),
    ("sb2sb_first", "<u4"), ("sb2sb_count", "<u2"), ("n_tiles", "<u2"),
    ("dma_first", "<u4"), ("dma_count", "<u4"),
    ("cce_first", "<u4"), ("cce_count", "<u4"),
    ("sem_first", "<u4"), ("sem_count", "<u2"), ("reserved", "<u2"),
    ("elem_start", "<u8"), ("num_elements", "<u4"), ("ring_step", "<u4"),
])
LegRecord = cs.Struct(
    "trigger" / cs.Int32ul, "spad_index" / cs.Int16ul, "channel" / cs.Int8ul, "sdma_op" / cs.Int8ul,
    "step" / cs.Int32ul, "leaf" / cs.Int8ul, "half" / cs.Int8ul, "reduction_type" / cs.Int8ul,
    "neigh" / cs.Int8ul,
    "sb2sb_first" / cs.Int32ul, "sb2sb_count" / cs.Int16ul, "n_tiles" / cs.Int16ul,
    "dma_first" / cs.Int32ul, "dma_count" / cs.Int32ul,
    "cce_first" / cs.Int32ul, "cce_count" / cs.Int32ul,
    "sem_first" / cs.Int32ul, "sem_count" / cs.Int16ul, "reserved" / cs.Const(0, cs.Int16ul),
    "elem_start" / cs.Int64ul, "num_elements" / cs.Int32ul, "ring_step" / cs.Int32ul,
)
#: reduction_type byte of a copy leg (copy leaves carry no reduction_type_t).
NO_REDUCTION_TYPE = 0xFF

# ---------------------------------------------------------------------------
# tp_inc_steps (spad slot entry, 8 bytes): m2s u16, s2m u16, repeat u16, flags u16 (bit0 last_sync).
TPINC_DTYPE = np.dtype([("m2s", "<u2"), ("s2m", "<u2"), ("repeat", "<u2"), ("flags", "<u2")])
TpIncStep = cs.Struct("m2s" / cs.Int16ul, "s2m" / cs.Int16ul, "repeat" / cs.Int16ul,
                      "flags" / cs.Int16ul)
TPINC_LAST_SYNC = 0x1
#: The most M2S (or S2M) BDs one leg may have: the u16 ``m2s`` / ``s2m`` of its
#: tp_inc_steps record (0xFFFF kept out).
TPINC_MAX_BDS = 0xFFFE

# ---------------------------------------------------------------------------
# Net-proxy FIFO records (seed 003 §3; offsets per REFERENCES.md / docs/FORMATS.md).

def _by_offset(spec: dict) -> np.dtype:
    """A structured dtype with its fields listed in offset order (``dump --json`` key order)."""
    order = sorted(range(len(spec["names"])), key=lambda i: spec["offsets"][i])
    return np.dtype({**spec, **{k: [spec[k][i] for i in order]
                                for k in ("names", "formats", "offsets")}})


NET_OPS_INFO_DTYPE = _by_offset({
    "names": ["sema_shift_offset", "early_send_completion", "early_recv_posting",
              "inc_send_handshake", "inc_send_complete", "inc_recv_handshake",
              "inc_recv_complete", "tx_entry_cnt", "rx_entry_cnt", "net_idx_loop_size",
              "initial_send_credits", "ending_recv_credits", "data_type_sz",
              "is_dynamic_send_recv_sz", "variable_peer", "add_to_histogram",
              "basic_block_id", "func_rel_op_idx", "unrolled_count", "enc_channel",
              "reserved_4", "reserved_60", "reserved_75"],
    "formats": ["<u2", "u1", "u1", "<u8", "<u8", "<u8", "<u8", "<u4", "<u4", "<u4", "<u4", "<u4",
                "<u8", "u1", "u1", "u1", "<u4", "<u4", "<u4", "<u8", ("u1", (4,)), ("u1", (4,)),
                "u1"],
    "offsets": [0, 2, 3, 8, 16, 24, 32, 40, 44, 48, 52, 56, 64, 72, 73, 74, 76, 80, 84, 88, 4, 60,
                75],
    "itemsize": 96,
})
NetOpsInfo = cs.Struct(
    "sema_shift_offset" / cs.Int16ul, "early_send_completion" / cs.Int8ul,
    "early_recv_posting" / cs.Int8ul, "reserved_4" / cs.Const(bytes(4)),
    "inc_send_handshake" / cs.Int64ul, "inc_send_complete" / cs.Int64ul,
    "inc_recv_handshake" / cs.Int64ul, "inc_recv_complete" / cs.Int64ul,
    "tx_entry_cnt" / cs.Int32ul, "rx_entry_cnt" / cs.Int32ul, "net_idx_loop_size" / cs.Int32ul,
    "initial_send_credits" / cs.Int32ul, "ending_recv_credits" / cs.Int32ul,
    "reserved_60" / cs.Const(bytes(4)),
    "data_type_sz" / cs.Int64ul, "is_dynamic_send_recv_sz" / cs.Int8ul,
    "variable_peer" / cs.Int8ul, "add_to_histogram" / cs.Int8ul,
    "reserved_75" / cs.Const(0, cs.Int8ul),
    "basic_block_id" / cs.Int32ul, "func_rel_op_idx" / cs.Int32ul,
    "unrolled_count" / cs.Int32ul, "enc_channel" / cs.Int64ul,
)
# host_addr and nccl_mhandle are seed 003 §3's ``host`` and ``mhandle``
# (__record_net_dest_addr(dev_addr, host, mhandle, ...)); names as REFERENCES.md.
NET_SRC_ADDR_DTYPE = _by_offset({
    "names": ["net_op_idx", "complete", "dev_addr", "host_addr", "nccl_mhandle", "size", "mark",
              "proxy_histogram_tag", "dst_rank", "reserved_52", "dst_addr", "dst_mhandle"],
    "formats": ["<u4", "<i4", "<u8", "<u8", "<u8", "<u4", "<u4", "<u8", "<i4", ("u1", (4,)),
                "<u8", "<u8"],
    "offsets": [0, 4, 8, 16, 24, 32, 36, 40, 48, 52, 56, 64],
    "itemsize": 72,
})
NetSrcAddr = cs.Struct(
    "net_op_idx" / cs.Int32ul, "complete" / cs.Int32sl, "dev_addr" / cs.Int64ul,
    "host_addr" / cs.Int64ul, "nccl_mhandle" / cs.Int64ul, "size" / cs.Int32ul,
    "mark" / cs.Int32ul, "proxy_histogram_tag" / cs.Int64ul, "dst_rank" / cs.Int32sl,
    "reserved_52" / cs.Const(bytes(4)), "dst_addr" / cs.Int64ul, "dst_mhandle" / cs.Int64ul,
)
NET_DEST_ADDR_DTYPE = _by_offset({
    "names": ["net_op_idx", "complete", "dev_addr", "host_addr", "nccl_mhandle", "size", "mark",
              "src_rank", "reserved_44"],
    "formats": ["<u4", "<i4", "<u8", "<u8", "<u8", "<u4", "<u4", "<i4", ("u1", (4,))],
    "offsets": [0, 4, 8, 16, 24, 32, 36, 40, 44],
    "itemsize": 48,
})
NetDestAddr = cs.Struct(
    "net_op_idx" / cs.Int32ul, "complete" / cs.Int32sl, "dev_addr" / cs.Int64ul,
    "host_addr" / cs.Int64ul, "nccl_mhandle" / cs.Int64ul, "size" / cs.Int32ul,
    "mark" / cs.Int32ul, "src_rank" / cs.Int32sl,
    "reserved_44" / cs.Const(bytes(4)),
)
#: NET_INDEX_LOOP_SIZE (seed 003 §3).
NET_INDEX_LOOP_SIZE = 512
#: Credits must lie in (0, NET_MAX_CREDITS] (seed 003 §3 asserts).
NET_MAX_CREDITS = 0x1FF
#: The runtime's ``net_initial_send_credits`` and ``net_ending_recv_credits`` (seed 003 §3,
#: ``info.initial_send_credits`` / ``info.ending_recv_credits``; the values are ours).
NET_INITIAL_SEND_CREDITS = 8
NET_ENDING_RECV_CREDITS = 8

# ---------------------------------------------------------------------------
# TOPSP_KICK (docs/FORMATS.md §9), 64 bytes: the word the rewritten NEFF holds in place of each
# trigger word (0xD9 and 0xDA: two words).  Bytes 0..11 are the common instruction header
# (NEFF-LIKE.md §2), its ``sync`` fields (bytes 4..11) copied from the trigger word.
TOPSP_KICK_OPCODE = 0xA2
#: The sync fields of the common header (bytes 4..11 of a word), kept by a kick word.
KICK_SYNC_DTYPE = np.dtype([("wait_mode", "u1"), ("wait_idx", "u1"), ("update_mode", "u1"),
                            ("update_idx", "u1"), ("semaphore_value", "<u4")])
KICK_DTYPE = np.dtype([
    ("opcode", "u1"), ("length_dw", "u1"), ("reserved_2", "<u2"),
    ("sync", KICK_SYNC_DTYPE),
    ("spad_index", "<u2"),  # the trigger's first SPAD entry on its group's leader
    ("word", "<u2"),  # 0, or 1 for the second word of a former 0xD9+0xDA pair
    ("trigger", "<u4"),  # trigger ordinal
    ("reserved_20", "u1", (44,)),
])
KickSync = cs.Struct(
    "wait_mode" / cs.Int8ul, "wait_idx" / cs.Int8ul, "update_mode" / cs.Int8ul,
    "update_idx" / cs.Int8ul, "semaphore_value" / cs.Int32ul,
)
TopspKick = cs.Struct(
    "opcode" / cs.Const(TOPSP_KICK_OPCODE, cs.Int8ul),
    "length_dw" / cs.Const(LENGTH_DW, cs.Int8ul),
    "reserved_2" / cs.Const(0, cs.Int16ul),
    "sync" / KickSync,
    "spad_index" / cs.Int16ul,
    "word" / cs.Int16ul,
    "trigger" / cs.Int32ul,
    "reserved_20" / cs.Const(bytes(44)),
)


def kick_words(sync: np.ndarray, spad_index, word, trigger) -> np.ndarray:
    """TOPSP_KICK records (:data:`KICK_DTYPE`): ``sync`` (:data:`KICK_SYNC_DTYPE` records, the
    trigger words' bytes 4..11) with each one's ``spad_index``, ``word`` and ``trigger``."""
    out = np.zeros(sync.shape, KICK_DTYPE)
    out["opcode"], out["length_dw"] = TOPSP_KICK_OPCODE, LENGTH_DW
    out["sync"] = sync
    out["spad_index"], out["word"], out["trigger"] = spad_index, word, trigger
    return out


#: The output folder (docs/FORMATS.md §1): its top-level manifest's ``format`` and
#: ``format_version``, written by :mod:`nrtrewrite.bundle` and checked by the simulator.
FORMAT_NAME = "nrtrewrite-lowered"
FORMAT_VERSION = 2
#: The most bytes an output's ``manifest.json``, top-level or a rank's, may have (docs/
#: RELIABILITY.md §4): ``diff`` and ``simulate`` refuse a larger one from its size, before
#: reading it, and ``lower`` refuses to write one.  A rank manifest is at most about 842 MB
#: (65,536 SPAD entries naming subgraphs of 4,087 bytes, 12 KB each escaped); a top-level
#: manifest has no bound of its own (its triggers list their groups and ring orders).
MAX_MANIFEST_BYTES = 1 << 31


def manifest_size_refusal(size: int) -> str | None:
    """Why a manifest of ``size`` bytes is neither read nor written, or None: more than
    :data:`MAX_MANIFEST_BYTES`."""
    if size <= MAX_MANIFEST_BYTES:
        return None
    return (f"manifest of {size} bytes exceeds the limit of {MAX_MANIFEST_BYTES} bytes "
            "(MAX_MANIFEST_BYTES)")


def rank_dir_name(rank: int) -> str:
    """The folder of rank ``rank`` in an output folder."""
    return f"rank-{rank:04d}"


def name_text(name: str) -> str:
    """A file name as the manifests record it (``input.name``, ``output_neff.name``): the
    name's bytes on disk read as UTF-8, whatever the process's locale (Python decodes file
    names with the locale's encoding: under ``LC_ALL=de_DE.ISO-8859-1`` the UTF-8 name
    ``ünï.neff`` is ``Ã¼nÃ¯.neff``).  :class:`UnicodeDecodeError` for a name that is not
    UTF-8."""
    return os.fsencode(name).decode("utf-8")


#: The names an output folder gives its own entries (docs/FORMATS.md §1): the top-level
#: manifest and the rank folders (``rank-`` and digits), in any case (a case-insensitive file
#: system takes ``MANIFEST.JSON`` for ``manifest.json``); the rewritten NEFF never has one of
#: them (a model so named gets ``.neff`` added).
OUTPUT_OWN_NAMES = re.compile(r"manifest\.json|rank-[0-9]+", re.IGNORECASE | re.ASCII)


def recorded_neff_name(neff) -> str:
    """The rewritten NEFF's file name a top-level manifest's ``output_neff`` records, checked
    to be a file name in the output folder and none of the folder's own entries (a name with
    ``/`` or ``..`` would read a file elsewhere).  ValueError saying why otherwise."""
    name = neff.get("name") if isinstance(neff, dict) else None
    if not (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and "\0" not in name):
        raise ValueError("must be an object whose 'name' is a file name in the folder")
    if OUTPUT_OWN_NAMES.fullmatch(name):  # docs/FORMATS.md §1: never the NEFF's name
        # (the name as JSON writes it, as simulate's and diff's messages name values; until
        # 2026-12-06 Python's, 'rank-0000')
        raise ValueError(f"names {json_text(name)}, one of the folder's own entries (the "
                         "rewritten NEFF never has such a name)")
    return name


def name_on_disk(text: str) -> str:
    """The file name (as Python spells it in this locale) a manifest's recorded name
    ``text`` stands for: the inverse of :func:`name_text` (lone surrogates, as outputs of
    before 2026-12-02 recorded a name that is not UTF-8, stand for their bytes)."""
    return os.fsdecode(text.encode("utf-8", "surrogateescape"))


#: Every artifact file of a rank folder: name -> (numpy dtype, construct struct).  Every byte
#: of every record belongs to exactly one named dtype field (reserved ranges included, named
#: ``reserved...``), so ``diff`` and ``dump --json`` see every byte (tests/test_diff.py).
ARTIFACTS: dict[str, tuple[np.dtype, cs.Construct]] = {
    "spad.bin": (SPAD_DTYPE, SpadCtrlEntry),
    "legs.bin": (LEG_DTYPE, LegRecord),
    "sb2sb.bin": (SB2SB_DTYPE, S3D3Collective),
    "dma.bin": (BD_DTYPE, UdmaDesc),
    "cce.bin": (CCE_DTYPE, CceDesc),
    "sem.bin": (SEM_DTYPE, SemBD),
    "tpinc.bin": (TPINC_DTYPE, TpIncStep),
    "net_ops.bin": (NET_OPS_INFO_DTYPE, NetOpsInfo),
    "net_src.bin": (NET_SRC_ADDR_DTYPE, NetSrcAddr),
    "net_dest.bin": (NET_DEST_ADDR_DTYPE, NetDestAddr),
}
#: Every record layout declared here, (numpy dtype, construct struct): the artifacts' and the
#: TOPSP_KICK word the rewritten NEFF holds (docs/FORMATS.md §9).
RECORDS: dict[str, tuple[np.dtype, cs.Construct]] = {
    **ARTIFACTS, "TOPSP_KICK": (KICK_DTYPE, TopspKick),
}
