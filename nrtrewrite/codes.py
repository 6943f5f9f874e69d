"""Every name -> value table of nrtrewrite, in one place.

Member names copy the seeds (``shared/seeds``) and the public headers cited in
``shared/REFERENCES.md`` so that grepping a seed term lands here.  Each enum is
an :class:`enum.IntEnum`; construct ``Enum`` adapters are built from these
classes (never a second copy of the values).
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Opcode(IntEnum):
    """Instruction opcodes we decode (NEFF-LIKE.md §2, REFERENCES.md)."""

    EVENT_SEMAPHORE = 0xA0  # EVT_SEM, "TPB op 0x10A0" in seed 000 §4.2 (0x10: word length)
    SB2SB_COLLECTIVE = 0xBF  # the real HW S3D3 leg we emit (seed 000 §3.2: S3D3_COLLECTIVE)
    PSEUDO_DMA_TRIGGER = 0xC1
    PSEUDO_TRIGGER_ALL_REDUCE = 0xC7
    PSEUDO_TRIGGER_COLLECTIVE = 0xC8
    PSEUDO_SEND_RECV = 0xCB
    PSEUDO_CORE_BARRIER = 0xD8
    PSEUDO_TRIGGER_COLLECTIVE2 = 0xD9
    PSEUDO_EXTENSION = 0xDA


def is_pseudo(opcode: int) -> bool:
    """Upper three opcode bits 0b110 => pseudo instruction (seed 000 §0)."""
    return (opcode >> 5) == 0b110


TRIGGER_OPCODES = (
    Opcode.PSEUDO_TRIGGER_ALL_REDUCE,
    Opcode.PSEUDO_TRIGGER_COLLECTIVE,
    Opcode.PSEUDO_TRIGGER_COLLECTIVE2,
)


class DType(IntEnum):
    """nec_data_type / NEURON_ISA_TPB_DTYPE (REFERENCES.md "Codes"); the dtype codes the
    seeds call ``SDMA_DTYPE`` (seed 000 §3.3: carried verbatim into the CCE descriptor's
    dtype nibbles) and ``DTYPE`` (the trigger's field)."""

    UINT64 = 0x1
    INT8 = 0x2
    UINT8 = 0x3
    INT16 = 0x4
    UINT16 = 0x5
    BF16 = 0x6
    FP16 = 0x7
    INT32 = 0x8
    UINT32 = 0x9
    FP32 = 0xA
    FP32R = 0xB
    INT64 = 0xC
    FP8_E3 = 0xD
    FP8_E4 = 0xE
    FP8_E5 = 0xF


#: Bytes per element in memory.  FP32R data is 4-byte fp32 in memory (SEED-NOTES
#: "FP32R"); the SDMA table's 0 for fp32r is modelled by
#: :data:`SDMA_DATA_TYPE_SIZE` and is never used for byte sizing.
DTYPE_SIZE: dict[DType, int] = {
    DType.UINT64: 8, DType.INT8: 1, DType.UINT8: 1, DType.INT16: 2, DType.UINT16: 2,
    DType.BF16: 2, DType.FP16: 2, DType.INT32: 4, DType.UINT32: 4, DType.FP32: 4,
    DType.FP32R: 4, DType.INT64: 8, DType.FP8_E3: 1, DType.FP8_E4: 1, DType.FP8_E5: 1,
}

#: sdma_data_type_size[] as the runtime has it: fp32r reads 0 (seed 000 §3.4 GOTCHA).
SDMA_DATA_TYPE_SIZE: dict[DType, int] = {**DTYPE_SIZE, DType.FP32R: 0}


def _numpy_dtypes() -> dict[DType, np.dtype]:
    """numpy element type of each dtype.  FP8_E3 is ml_dtypes ``float8_e3m4``: the
    IEEE-like 1-3-4 layout (sign, 3 exponent bits, 4 mantissa bits; largest 15.5) that
    NKI calls fp8_e3; FP8_E4 is ``float8_e4m3`` (with infinities, not e4m3fn), FP8_E5
    is ``float8_e5m2``."""
    import ml_dtypes
    return {
        DType.UINT64: np.dtype("<u8"), DType.INT8: np.dtype("i1"), DType.UINT8: np.dtype("u1"),
        DType.INT16: np.dtype("<i2"), DType.UINT16: np.dtype("<u2"),
        DType.BF16: np.dtype(ml_dtypes.bfloat16), DType.FP16: np.dtype("<f2"),
        DType.INT32: np.dtype("<i4"), DType.UINT32: np.dtype("<u4"),
        DType.FP32: np.dtype("<f4"), DType.FP32R: np.dtype("<f4"), DType.INT64: np.dtype("<i8"),
        DType.FP8_E3: np.dtype(ml_dtypes.float8_e3m4),
        DType.FP8_E4: np.dtype(ml_dtypes.float8_e4m3),
        DType.FP8_E5: np.dtype(ml_dtypes.float8_e5m2),
    }


def __getattr__(name: str):
    """``NUMPY_DTYPE`` (DType -> numpy element type) is built on first use: it needs
    ml_dtypes, whose import takes 0.6 - 0.75 s of CPU at ml_dtypes 0.7 (0.14 s at 0.5), and
    only ``simulate``'s numbers use it; ``lower``, ``inspect``, ``explain`` and the others
    start without it (until 2026-12-06 every command imported it)."""
    if name == "NUMPY_DTYPE":
        globals()["NUMPY_DTYPE"] = table = _numpy_dtypes()
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The CCE-reducible set (seed 000 §3.4: the cce_dtypes table).  Plain FP32 and
#: integers are absent.
CCE_REDUCE_DTYPES = frozenset(
    {DType.BF16, DType.FP16, DType.FP32R, DType.FP8_E3, DType.FP8_E4, DType.FP8_E5}
)


class AluOp(IntEnum):
    """Engine ALU op carried by the trigger (KLR BIR enum order): the seed's ``ALU_OP``
    field (seed 000 §5.1; unused by an all-gather, §5.2)."""

    ADD = 0x04
    MAX = 0x08
    MIN = 0x09


class CType(IntEnum):
    """Wire collective type in the trigger (NEFF-LIKE.md §2)."""

    ALL_REDUCE = 1
    REDUCE_SCATTER = 2
    ALL_GATHER = 3


class EncOpType(IntEnum):
    """enc_op_type (seed 001 §3 dispatch; seed 000 writes the members with the ``ENC_``
    prefix: ENC_ALLREDUCE = 1, §8 claim 3, ENC_ALLGATHER = 0, §5.2)."""

    ALLGATHER = 0
    ALLREDUCE = 1
    BROADCAST = 2
    REDUCE = 3
    REDUCE_SCATTER = 4
    SEND = 5
    RECV = 6
    ALLTOALL = 7
    PERMUTE = 8
    PERMUTE_IMPLICIT = 10
    PERMUTE_REDUCE_IMPLICIT = 11


CTYPE_TO_OP: dict[CType, EncOpType] = {
    CType.ALL_REDUCE: EncOpType.ALLREDUCE,
    CType.REDUCE_SCATTER: EncOpType.REDUCE_SCATTER,
    CType.ALL_GATHER: EncOpType.ALLGATHER,
}


class EncAlgType(IntEnum):
    """The global enc_alg_type (seed 000 §1.3); the cc_op.algo_type nibble.

    8..10 are named from the libnrt DWARF as transcribed in the public
    reverse-engineering notes (docs/DESIGN.md "Enums").
    """

    RING = 0
    HIER = 1
    MESH = 2
    KANGARING = 3
    SINGLE_CYCLE_RING = 4
    INTRA_RDH = 5
    SINGLE_STEP_MESH = 6
    INTER_RDH = 7
    TWO_STEP_POD_MESH = 8
    LATENCY_OPT_MESH = 9
    BW_OPT_MESH = 10
    INVALID = 11


#: The algo types whose net ops resolve their peer per op (net_ops_info.variable_peer = 1,
#: docs/FORMATS.md §8.1): the mesh family and RDH, whose ops' entries may name several
#: peers; the ring family (RING, KANGARING, SINGLE_CYCLE_RING) talks to the channel's fixed
#: ring neighbour.
VARIABLE_PEER_ALGS = frozenset({
    EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH, EncAlgType.TWO_STEP_POD_MESH,
    EncAlgType.LATENCY_OPT_MESH, EncAlgType.BW_OPT_MESH, EncAlgType.INTRA_RDH,
    EncAlgType.INTER_RDH})


class EncAlgMeshType(IntEnum):
    """enc_alg_mesh_type, the 3-bit cc_op.algo_sub_type (seed 000 §1.3)."""

    FULL_MESH = 0
    GROUPED_MESH = 1
    MESH_TRN2 = 2
    MESH_SWITCH = 3
    MESH_INVALID = 4


#: the mesh sub-types a platform (a topology file's ``mesh_sub_type``) and a rank manifest's
#: ``topology.mesh_sub_type`` may name: every EncAlgMeshType but MESH_INVALID
MESH_SUB_TYPE_NAMES: tuple[str, ...] = tuple(
    m.name for m in EncAlgMeshType if m != EncAlgMeshType.MESH_INVALID)


class EncMeshEventType(IntEnum):
    """enc_mesh_event_type: the mesh (and RDH) event schedule's event types, 2.31 numbering.

    The names and their order are the public ``nec.h`` enum (REFERENCES.md "Mesh"); 2.31
    inserted REDUCE_COPY_2 and the pod broadcasts in the mesh band and one A2A event, so its
    values differ from that header.  Pinned 2.31 values (public libnrt notes, "Mesh
    Composer" and "NCFW mesh tape"): LOCAL_HNDSHK 2, REDUCE_COPY 8, REDUCE_COPY_2 9,
    REDUCE_WRITE 10, INTER_GRP_BRDCST_2 11, 2DEV_BRDCST 20, 2DEV_HNDSHK 21, COPY_FROM_HOST
    22, RH_STEP_0 23 and RDH_LOCAL_PEER_HANDSHAKE 52.  Both ends of the RDH band moved by
    +4 from the header and the band kept its 30 values, so every RDH event is the header's
    value + 4 (ours, derived).  The A2A events 14..19 are left out: one of them is new in
    2.31 and which one is not public; no composer here uses them.  Each event type appears
    at most once in a schedule (``encd_init_mesh_event``), so an event's semaphore can be
    indexed by its type (docs/FORMATS.md §7).
    """

    EVT_SYNC = 0
    EVT_GLOBAL_HNDSHK = 1
    EVT_LOCAL_HNDSHK = 2
    EVT_INTER_GRP_BRDCST = 3
    EVT_FUNCTION_BARRIER_FIRST_COLL = 4
    EVT_FUNCTION_BARRIER_LAST_COLL = 5
    EVT_REDUCE_LOCAL_HNDSHK = 6
    EVT_INTRA_GRP_BRDCST = 7
    EVT_REDUCE_COPY = 8
    EVT_REDUCE_COPY_2 = 9
    EVT_REDUCE_WRITE = 10
    EVT_INTER_GRP_BRDCST_2 = 11
    EVT_LOCAL_AND_POD_GRP_BRDCST = 12
    EVT_LOCAL_AND_POD_GRP_BRDCST_2 = 13
    EVT_2DEV_BRDCST = 20
    EVT_2DEV_HNDSHK = 21
    EVT_COPY_FROM_HOST = 22
    EVT_RH_STEP_0 = 23
    EVT_RH_STEP_1 = 24
    EVT_RH_STEP_2 = 25
    EVT_RH_STEP_3 = 26
    EVT_RH_STEP_4 = 27
    EVT_RH_STEP_5 = 28
    EVT_RH_STEP_6 = 29
    EVT_RH_STEP_7 = 30
    EVT_RH_STEP_8 = 31
    EVT_RDH_LOCAL_HANDSHAKE = 32  # = EVT_RH_STEP_9 in nec.h; the name we use (RDH handshake)
    EVT_RH_STEP_9 = 32
    EVT_RDH_AXES_HANDSHAKE = 33
    EVT_RD_STEP_0 = 34
    EVT_RD_STEP_1 = 35
    EVT_RD_STEP_2 = 36
    EVT_RD_STEP_3 = 37
    EVT_RD_STEP_4 = 38
    EVT_RD_STEP_5 = 39
    EVT_RD_STEP_6 = 40
    EVT_RDH_AXES_HANDSHAKE_2 = 41
    EVT_1DEV_RDH_STEP_1 = 42
    EVT_1DEV_RDH_STEP_2 = 43
    EVT_1DEV_RD_STEP_1 = 44
    EVT_1DEV_RD_STEP_2 = 45
    EVT_1DEV_RH_STEP_1 = 46
    EVT_2DEV_RD_STEP_0 = 47
    EVT_2DEV_RD_STEP_1 = 48
    EVT_2DEV_RD_STEP_2 = 49
    EVT_2DEV_RD_STEP_3 = 50
    EVT_2DEV_RD_STEP_4 = 51
    EVT_RDH_LOCAL_PEER_HANDSHAKE = 52


#: enc_mesh_event_type bands (nec.h comment): COMMON, MESH, A2A, RDH; ENC_RDH_NUM_EVENT_TYPE.
ENC_RDH_NUM_EVENT_TYPE = 53
#: EVT_RH_STEP_0..9 and EVT_RD_STEP_0..6: the most recursive-halving / -doubling steps.
ENC_RDH_MAX_RH_STEPS = 10
ENC_RDH_MAX_RD_STEPS = 7


class MetaringType(IntEnum):
    """Per-object enc_alg_metaring.type sub-enum (seed 000 §1.1 GOTCHA).

    Never written into the SPAD algo_type nibble; see :class:`EncAlgType`.
    """

    RING = 0
    KANGARING = 1
    SINGLE_CYCLE_RING = 2
    RDH = 3
    INVALID = 4


class SdmaCceType(IntEnum):
    """SDMA_CCETYPE: the reduce op riding the CCE descriptor (seed 000 §3.3; seed 003
    writes the members ``SDMA_CCETYPE_ADD``, ...)."""

    ADD = 0
    FMA = 1
    MAX = 2
    MIN = 3
    EXT = 4
    GCE = 5


#: kbin_cce_op_to_sdma_cce_op: the trigger's ALU op -> SDMA_CCETYPE.
ALU_TO_CCE: dict[AluOp, SdmaCceType] = {
    AluOp.ADD: SdmaCceType.ADD,
    AluOp.MAX: SdmaCceType.MAX,
    AluOp.MIN: SdmaCceType.MIN,
}


class ReductionType(IntEnum):
    """reduction_type_t, the 3rd argument of recv_reduce_* (seed 000 §3.3)."""

    RING_2R1W = 0
    RING_2R2W = 1
    KANGARING_NR1W = 2


class EncHalfChunkIndex(IntEnum):
    """enc_half_chunk_index (seed 000 §3.1)."""

    CHUNK_H0 = 0
    CHUNK_H1 = 1
    ENC_CHUNK_SPLIT_N = 2


class NetAddrMark(IntEnum):
    """net_addr_mark_t (seed 003 CORRECTION ENC-PRIM-2)."""

    NET_TRANSFER = 0
    NET_OP_COMPLETE = 1
    EXEC_COMPLETE = 2


class SdmaOp(IntEnum):
    """SDMAOP: the descriptor class of a leg (seed 000 §3.2)."""

    CME = 2  # copy (add_dma_packet; the seed's SDMA_CMETYPE COPY)
    CCE = 4  # compute/reduce (add_dma_packet_cce)


class EncdNeigh(IntEnum):
    """encd_neigh_t: which peer a leg targets (seed 000 §2.4 names it; its table was lost in
    the seed text, the ordinals are the public notes', docs/DESIGN.md "Enums")."""

    ENCD_NEIGH_LOCAL = 0
    ENCD_NEIGH_NEXT = 1
    ENCD_NEIGH_PREV = 2
    ENCD_NEIGH_GATEWAY = 3
    ENCD_NEIGH_PEER_RMTV = 4
    ENCD_NEIGH_PEER_RMTV2 = 5
    ENCD_NEIGH_PEER_LOCAL = 6
    ENCD_NEIGH_NEXT_PEER_RMTV = 7
    ENCD_NEIGH_INVALID = 8


class EvtSemSubop(IntEnum):
    """EVT_SEM TPB op 0x10A0 sub-ops (seed 000 §4.2: the two it gives; no other is written):
    ``WAIT_GE_AND_DEC`` is the seed's ``add_semaphore_wait_ge_and_dec`` (the counted
    barrier), ``INC`` its ``add_semaphore_inc``; emitted by ``emit/legs.py`` ``emit_entries``
    (the sem.bin BDs and the 0xBF words' wait / update modes)."""

    WAIT_GE_AND_DEC = 20
    INC = 21


class VarType(IntEnum):
    """def.json var types (NEFF-LIKE.md §1)."""

    INPUT = 0
    OUTPUT = 1
    TMP_BUF = 2
    STATE_BUFFER = 3


VAR_TYPE_NAMES: dict[str, VarType] = {
    "input": VarType.INPUT,
    "output": VarType.OUTPUT,
    "tmp-buf": VarType.TMP_BUF,
    "state-buffer": VarType.STATE_BUFFER,
}


class ChannelPattern(IntEnum):
    """enc_channel.pattern (seed 000 §2.3)."""

    RING = 0
    MESH = 1
    INVALID = 2


class EdgeLocality(IntEnum):
    """Locality of a topology edge, cheapest first (seed 000 §2.1)."""

    SAME_DEVICE = 0  # intra-MLA (NeuronEdge::isIntraMLA)
    DEVICE_LINK = 1  # device-to-device NeuronLink on the node torus
    C2C_PORT = 2  # chip-to-chip port (EdgeRemoteMLA)
    NETWORK = 3  # across nodes (EFA / net proxy)


def enum_name(enum_cls: type[IntEnum], value: int) -> str:
    """Name of ``value`` in ``enum_cls`` or ``"0x.."`` when unknown (for display)."""
    try:
        return enum_cls(value).name
    except ValueError:
        return f"0x{value:x}"


#: Replica groups per NEFF (nec.h NEC_MAX_COMM_N; REFERENCES.md "Runtime structures").
NEC_MAX_COMM_N = 12

#: Mesh events per mesh channel (nec.h ENC_MESH_MAX_NUM_EVENTS; REFERENCES.md "Runtime
#: structures"): the event-semaphore window of a mesh entry (docs/FORMATS.md §7).
ENC_MESH_MAX_NUM_EVENTS = 64

#: A rank's mesh channel buffer (nec.h ENC_MESH_CHANNEL_BUF_MAX_SIZE, 8 MiB in the public
#: header): the slots MESH and SINGLE_STEP_MESH receive into must fit it (docs/SELECTION.md).
ENC_MESH_CHANNEL_BUF_MAX_SIZE = 8 * 1024 * 1024

#: SBUF partitions: a state-buffer var has 1..SBUF_PARTITIONS partitions (NEFF-LIKE.md §1).
SBUF_PARTITIONS = 128
