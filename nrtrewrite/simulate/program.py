"""Static decoding of one rank's program: SPAD entries, legs, data BDs, CCE descriptors,
semaphore BDs, tp_inc_steps and 0xBF words, every field checked against docs/FORMATS.md,
turned into executable legs (:class:`Leg`).

Everything is decoded with numpy over whole files; a per-leg Python pass only assembles
what the engine needs (the merged byte runs of each stream, waits and increments).  Any
disagreement is a :class:`SimulationError` naming the rank, the file, the record and the
field.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from nrtrewrite.codes import (DTYPE_SIZE, ENC_MESH_MAX_NUM_EVENTS, DType, EncAlgMeshType,
                              EncAlgType, EncMeshEventType, EvtSemSubop, ReductionType,
                              SdmaCceType)
from nrtrewrite.compose.events import EVENT_SEMA_SHIFT_OFFSET
from nrtrewrite.compose.ir import MAX_SRC
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.address import (
    DRAM_BASE, EVT_SEM_DEC, EVT_SEM_INC, SEM_ENTRY_DONE,
)
from nrtrewrite.entryslots import ENTRY_POST_SEMS
from nrtrewrite.emit.tiling import MAX_SDMA_CCE_ELEMENTS, expand
from nrtrewrite.errors import OutputError, SimulationError, escape_controls, json_text
from nrtrewrite.simulate.artifacts import MESH_FAMILY, RankFiles
from nrtrewrite.simulate.layout import ADDRESS_ERRORS, WINDOW_NAMES, Layout
from nrtrewrite.select import LEG_OPS
from nrtrewrite.simulate.triggers import TriggerSpec

# ---------------------------------------------------------------------------
# The leaf vocabulary of FORMATS §3 and what the ring protocol of FORMATS §7 expects of it.
LEAF_NAMES = {1: "send", 2: "recv_reduce_send", 3: "recv_reduce_copy",
              4: "recv_reduce_copy_send", 5: "direct_copy_send", 6: "direct_recv_send",
              7: "direct_recv", 8: "direct_copy", 15: "mark_end",
              # mesh / RDH legs and the entry handshake: no ring protocol of their own, their
              # semaphores and data are checked by the run (docs/SIMULATOR.md §2)
              16: "mesh_send", 17: "mesh_reduce", 18: "rdh_copy", 19: "rdh_reduce",
              20: "mesh_sync", 21: "post_recv", 22: "mark_complete",
              # kangaring (docs/DESIGN.md "Kangaring"): the fan-in reduce and the sync legs of
              # the unit semaphores
              10: "direct_reduce_send_kangaring", 11: "peer_post", 12: "peer_wait"}
MARK_END = int(Leaf.mark_end)
MARK_COMPLETE = int(Leaf.mark_complete)
POST_RECV = int(Leaf.post_recv)
PEER_POST, PEER_WAIT = int(Leaf.peer_post), int(Leaf.peer_wait)
DIRECT_COPY = int(Leaf.direct_copy)
DIRECT_RECV = int(Leaf.direct_recv)
#: a tp_inc_steps run holds at most this many legs (repeat is a u16, FORMATS §2.2)
TPINC_MAX_REPEAT = 0xFFFF
#: the leaves of a ring all-reduce's all-gather phase (seed 001 §4 PHASE 2)
_ALL_GATHER_PHASE = (int(Leaf.direct_recv_send), int(Leaf.direct_recv))
#: a collective's name in a line
_OP_TEXT = {"ALLREDUCE": "all-reduce", "REDUCE_SCATTER": "reduce-scatter",
            "ALLGATHER": "all-gather"}
RING_LEAVES = frozenset({1, 2, 3, 4, 5, 6, 7, 8})
KANGARING_LEAVES = frozenset({10, PEER_POST, PEER_WAIT})
MESH_LEAVES = frozenset({16, 17, 20, POST_RECV})  # mesh_send, mesh_reduce, mesh_sync, post_recv
RDH_LEAVES = frozenset({18, 19, 20, POST_RECV})  # rdh_copy, rdh_reduce, mesh_sync, post_recv
#: mesh and RDH legs: their semaphores are events of the window, send_sema and dma_compl_sema
EVENT_LEAVES = frozenset({16, 17, 18, 19, 20})
#: the leaves an entry may run, by its algo_type (a HIER entry: its leg's engine): FORMATS §3
#: (ring leaves), §3.3 (KANGARING adds its fan-in and unit sync legs; SINGLE_CYCLE_RING uses
#: the ring leaves), §3.2 (mesh: mesh_*; RDH: rdh_*; both mesh_sync and post_recv); every entry
#: ends each channel with mark_end and may open it with the handshake's mark_complete (§3.4)
ENTRY_LEAVES = {k: frozenset(v | {MARK_END, MARK_COMPLETE}) for k, v in {
    int(EncAlgType.RING): RING_LEAVES,
    int(EncAlgType.SINGLE_CYCLE_RING): RING_LEAVES,
    int(EncAlgType.KANGARING): RING_LEAVES | KANGARING_LEAVES,
    int(EncAlgType.MESH): MESH_LEAVES,
    int(EncAlgType.SINGLE_STEP_MESH): MESH_LEAVES,
    int(EncAlgType.INTRA_RDH): RDH_LEAVES,
    int(EncAlgType.INTER_RDH): RDH_LEAVES,
}.items()}
#: ENTRY_LEAVES as a table: [algo_type nibble, leaf byte] -> the entry may run the leaf
_LEAF_OK = np.zeros((16, 256), bool)
for _at, _leaves in ENTRY_LEAVES.items():
    _LEAF_OK[_at, list(_leaves)] = True
#: seed 000 §5.4: the reduction_type of a reduce leg by algo_type (the ring-versus-kangaring
#: fork: RING_2R1W 0, KANGARING_NR1W 2; a RING entry's recv_reduce_copy_send: RING_2R2W 1,
#: seed 001 §4); -1: not fixed by the entry's algorithm
_RT = np.full(16, -1, np.int64)
_RT[[int(EncAlgType.RING), int(EncAlgType.SINGLE_CYCLE_RING)]] = 0
_RT[int(EncAlgType.KANGARING)] = 2
#: semaphore ids outside the ring channel block (FORMATS §7)
#: the entry handshake's go semaphore (8): the emitter names it SEM_ENTRY_DONE, for what the
#: leader channel signals on it (the handshake is done); the simulator and docs/SIMULATOR.md
#: "entry_go", for what the other channels of the entry wait on it for (go on). One
#: semaphore, two names (FORMATS §3.4)
SEM_ENTRY_GO = SEM_ENTRY_DONE
#: [semaphore id] -> an entry_post semaphore a handshake may count on (nrtrewrite.entryslots)
_ENTRY_POST = np.zeros(256, bool)
_ENTRY_POST[list(ENTRY_POST_SEMS)] = True
#: The fixed values simulate holds the bytes to, written from docs/FORMATS.md, not taken
#: from the emitter's nrtrewrite.emit.formats (review 51r: a wrong emitter constant checked
#: against itself passed simulate and was blessed by `make golden`); tests/
#: test_formats_pinned.py pins the emitter's to the same document.
#: FORMATS §3: reduction_type "0xFF for copy and sync legs"
NO_REDUCTION_TYPE = 0xFF
#: FORMATS §4: lnc_size_fmt "0 = LNC1, 1 = LNC2"
LNC_SIZE_FMT = {1: 0, 2: 1}
#: FORMATS §6: W0 bit [23] meta "W0 = 0x800000 | meta_idx << 24"; W1 bit [25] valid
CCE_W0_META = 0x800000
CCE_VALID = 1 << 25
SEM_PEER_BASE = 144  # compose.kangaring.KANGARING_SEM_BASE (not imported: it pulls the composer)
SEM_EVENT_BASE = EVENT_SEMA_SHIFT_OFFSET
EVENT_MASK = ENC_MESH_MAX_NUM_EVENTS - 1  # sema_mask: 0x3F (FORMATS §2, §7)
#: a MESH or SINGLE_STEP_MESH leg's two waits (FORMATS §7): the same-device event
#: (EVT_LOCAL_HNDSHK, EVT_INTRA_GRP_BRDCST, EVT_REDUCE_COPY), then the other devices' or
#: nodes' (EVT_GLOBAL_HNDSHK, EVT_INTER_GRP_BRDCST, EVT_REDUCE_COPY_2, EVT_INTER_GRP_BRDCST_2)
_EVT_DEVICE = frozenset(int(e) for e in (EncMeshEventType.EVT_LOCAL_HNDSHK,
                                         EncMeshEventType.EVT_INTRA_GRP_BRDCST,
                                         EncMeshEventType.EVT_REDUCE_COPY))
_EVT_BEYOND = frozenset(int(e) for e in (EncMeshEventType.EVT_GLOBAL_HNDSHK,
                                         EncMeshEventType.EVT_INTER_GRP_BRDCST,
                                         EncMeshEventType.EVT_REDUCE_COPY_2,
                                         EncMeshEventType.EVT_INTER_GRP_BRDCST_2))
#: leaves that carry a half-chunk index (the ring leaves, as KANGARING uses them too)
HALF_LEAVES = RING_LEAVES | {10}
REDUCE_LEAVES = frozenset({2, 3, 4, 10, 17, 19})
COPY_LEAVES = frozenset({1, 5, 6, 8, 16, 18})
CONSUMING = frozenset({2, 3, 4, 6, 7})  # ring: wait for the predecessor's data
SENDING = frozenset({1, 2, 4, 5, 6})  # ring: signal the successor
#: legs without data that still carry an element count: what they consume or receive
COUNTED_WITHOUT_DATA = frozenset({7, 21})  # direct_recv, post_recv
NEIGH_NEXT, NEIGH_LOCAL, NEIGH_PREV = 1, 0, 2
NEIGH_LABELS = {NEIGH_LOCAL: "LOCAL", NEIGH_NEXT: "NEXT", NEIGH_PREV: "PREV"}
SDMA_NONE, SDMA_CME, SDMA_CCE = 0, 2, 4
#: by leaf (a u1 field), the sdma_op and neigh its record carries: a reduce leaf's CCE, a
#: copy leaf's CME; a sending leaf signals NEXT, direct_recv waits on PREV, the rest LOCAL
#: (a KANGARING direct_recv's copy to the secondaries is the caller's)
LEAF_SDMA = np.full(256, SDMA_NONE, np.int64)
LEAF_SDMA[sorted(REDUCE_LEAVES)] = SDMA_CCE
LEAF_SDMA[sorted(COPY_LEAVES)] = SDMA_CME
LEAF_NEIGH = np.full(256, NEIGH_LOCAL, np.int64)
LEAF_NEIGH[sorted(SENDING)] = NEIGH_NEXT
LEAF_NEIGH[DIRECT_RECV] = NEIGH_PREV
ROLE_RECV, ROLE_SEND, ROLE_POST, ROLE_COMPL = 0, 1, 2, 3
ROLE_OTHER = 0xFF  # a semaphore outside the ring channel block
ROLE_NAMES = {0: "recv_sema", 1: "send_sema", 2: "post_sema", 3: "dma_compl_sema"}
SEM_BASE = 16
SEM_RING_END = SEM_BASE + 4 * 32  # 16..143: 32 ring channels x 4
WAIT = int(EvtSemSubop.WAIT_GE_AND_DEC)
INC = int(EvtSemSubop.INC)
#: algo_type values whose legs.bin ring_step numbers the composer's legs in order (FORMATS §3)
COMPOSED_STEPS = frozenset({int(EncAlgType.MESH), int(EncAlgType.SINGLE_STEP_MESH),
                            int(EncAlgType.INTRA_RDH), int(EncAlgType.INTER_RDH)})
#: algo_type values whose entries are channel leg programs selected by channel_list.
RING_FAMILY = {int(EncAlgType.RING), int(EncAlgType.KANGARING),
               int(EncAlgType.SINGLE_CYCLE_RING), int(EncAlgType.INTER_RDH)}
CCE_OPS = {0: "ADD", 2: "MAX", 3: "MIN"}
#: CCE in/out dtype codes and their numpy types (FORMATS §6).
CCE_IO_CODES = {int(DType.BF16), int(DType.FP16), int(DType.FP32), int(DType.FP8_E3),
                int(DType.FP8_E4), int(DType.FP8_E5)}


def cce_op_name(code: int) -> str:
    """A W1 sub-op as an error names it: its SDMA_CCETYPE name (seed 000 §3.3: ``FMA`` for
    1, ``EXT``, ``GCE``), else the number."""
    try:
        return SdmaCceType(int(code)).name
    except ValueError:
        return str(int(code))


#: The fields of an 0xBF word FORMATS §4 fixes at 0, in offset order (their offsets: the
#: record dtype's).
SB2SB_ZERO_FIELDS = ("debug_cmd", "debug_hint", "reserved0", "reserved1")


def zero_shown(value) -> str:
    """What a field fixed at 0 should be and is, as a refusal says it: ``0, not 0x100`` for
    an integer, the bytes in hex (``00 00, not 00 01``) for a byte array."""
    if np.ndim(value) == 0:
        return f"0, not {int(value):#x}"
    return f"{bytes(len(value)).hex(' ')}, not {bytes(value).hex(' ')}"


def sem_id(channel: int, role: int) -> int:
    return SEM_BASE + 4 * channel + role


def sem_name(sid: int) -> str:
    if not SEM_BASE <= sid < SEM_RING_END:
        return f"semaphore {sid}"
    ch, role = divmod(sid - SEM_BASE, 4)
    return f"semaphore {sid} (channel {ch} {ROLE_NAMES[role]})"


def _event_name(sid: int) -> str:
    """``semaphore 201 (EVT_REDUCE_COPY_2)``: an event semaphore, 192 + t (FORMATS §7)."""
    try:
        return f"semaphore {sid} ({EncMeshEventType(sid - SEM_EVENT_BASE).name})"
    except ValueError:
        return f"semaphore {sid}"


def _alg_name(code: int) -> str:
    try:
        return EncAlgType(code).name
    except ValueError:
        return f"0x{code:x}"


@dataclass(slots=True)
class Leg:
    """One executable leg."""

    rank: int
    record: int  # index in legs.bin
    entry: int
    channel: int
    step: int
    leaf: int
    trigger: int
    sdma_op: int
    waits: list  # [(rank, sem id, value)]
    incs: list  # [(rank, sem id, value)]
    srcs: list  # per source stream: [(rank, region, storage offset, bytes)]
    dsts: list  # per destination stream
    cce: tuple | None  # (op, in code, out code) of a reduce leg
    sequential: bool  # reads and writes overlap: run tile by tile
    nbytes: int  # bytes of each source stream
    tiles: list | None = None  # per tile (srcs, dsts) runs, for sequential legs

    def who(self) -> str:
        return LegName.of(self.name()).who()

    def name(self) -> int | LegName:
        """What an access of this leg keeps: its name packed into one int
        (:meth:`LegName.pack`), not its runs and semaphores."""
        return LegName.pack(self.rank, self.record, self.entry, self.channel, self.step,
                            self.leaf)


class LegName:
    """A leg as the shadow state remembers it (the writer or reader of a byte range, for as
    long as the run keeps the range's shadow): enough to name it (:meth:`who`) and its
    ``legs.bin`` record, where the :class:`Leg` with its runs and semaphores is freed once it
    has run (docs/SIMULATOR.md §3 "Memory").  An access keeps it packed into one int
    (:meth:`pack`, 48 bytes; until 2026-12-06 this object with its own ints, 80 bytes and
    more) and a message unpacks it (:meth:`of`)."""

    __slots__ = ("rank", "record", "entry", "channel", "step", "leaf")

    #: The packed fields below the rank, lowest first, and their widths in bits (legs.bin's
    #: ``leaf`` u16 and ``step`` u32, a channel id, the record and entry indices).
    PACKED = (("leaf", 16), ("channel", 16), ("step", 32), ("record", 32), ("entry", 32))

    @classmethod
    def pack(cls, rank: int, record: int, entry: int, channel: int, step: int,
             leaf: int) -> int | LegName:
        """One int holding the six fields (the rank above the others), or the LegName
        itself when a field does not fit its width (so nothing is ever named wrong)."""
        vals = {"leaf": leaf, "channel": channel, "step": step, "record": record,
                "entry": entry}
        key, shift = 0, 0
        for name, bits in cls.PACKED:
            v = vals[name]
            if not 0 <= v < 1 << bits:
                return cls(rank, record, entry, channel, step, leaf)
            key |= v << shift
            shift += bits
        if rank < 0:
            return cls(rank, record, entry, channel, step, leaf)
        return key | rank << shift

    @classmethod
    def of(cls, name: int | LegName) -> LegName:
        """The LegName :meth:`pack` packed (a LegName is itself)."""
        if not isinstance(name, int):
            return name
        vals = {}
        for field_, bits in cls.PACKED:
            vals[field_] = name & ((1 << bits) - 1)
            name >>= bits
        return cls(name, vals["record"], vals["entry"], vals["channel"], vals["step"],
                   vals["leaf"])

    def __init__(self, rank: int, record: int, entry: int, channel: int, step: int, leaf: int):
        self.rank = rank
        self.record = record
        self.entry = entry
        self.channel = channel
        self.step = step
        self.leaf = leaf

    def who(self) -> str:
        return (f"leg {LEAF_NAMES.get(self.leaf, self.leaf)} (rank {self.rank}, entry "
                f"{self.entry}, channel {self.channel}, step {self.step})")


@dataclass
class Entry:
    rank: int
    index: int
    trigger: TriggerSpec
    algo_type: int
    trigger_next: bool
    reporter: bool
    send_complete: bool
    channels: list[int]
    sema_shift: int = 0  # mesh entries: the event window's first semaphore (else 0)
    queues: dict[int, tuple[int, int]] = field(default_factory=dict)  # channel -> legs slice
    leg: str = "flat"  # the rank manifest's leg name (a HIER leg, else "flat")


@dataclass(eq=False)
class EventHold:
    """A mesh or RDH leg's 0xBF word (sb2sb.bin record ``word``) whose wait disagrees with
    the leg's first sem.bin wait (record ``bd``): which is right is told by the increments
    of the two semaphores the trigger's entry makes on every rank (resolve_event_holds)."""

    rank: int
    trigger: int
    leg_name: str
    leg: int
    word: int
    bd: int
    bd_sid: int
    bd_val: int
    word_sid: int
    word_val: int
    leaf: str
    net_sids: frozenset
    word_error: SimulationError


def _where(rank: int, artifact: str, record: int | None = None, field_: str | None = None,
           **kw) -> dict:
    return dict(rank=rank, artifact=artifact, record=record, field=field_, **kw)


def _operand_origin(t: TriggerSpec, which: str, pos):
    """The element of ``t``'s element space at which its ``which`` operand (``"src"`` or
    ``"dst"``) starts on the group member at ``pos`` (an int, or an array of them): an
    all-gather's src and a reduce-scatter's dst hold that member's block, every other
    operand the whole space, so element e is the operand's e - origin (0 for those)."""
    block = (t.n if which == "src" and t.op == "ALLGATHER" else
             t.n // len(t.group) if which == "dst" and t.op == "REDUCE_SCATTER" else 0)
    return pos * block


def _first(mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


class RankDecoder:
    """Decode and check one rank folder (see the module docstring)."""

    def __init__(self, layout: Layout, triggers: dict[int, TriggerSpec], rf: RankFiles):
        self.layout = layout
        self.triggers = triggers
        self.rf = rf
        self.rank = rf.rank
        self.a = rf.arrays
        self.late_error: SimulationError | None = None  # see RankProgram.late_error
        #: a flat RING leg's half or ring_step error on an SBUF operand (or a data leg's on
        #: any), raised after check_sb2sb has held its pieces to elem_start
        self.ring_leg_error: SimulationError | None = None
        #: a mesh or RDH leg's 0xBF word whose wait disagrees with the leg's first sem.bin
        #: wait, told by resolve_event_holds once every rank is decoded
        self.event_hold: EventHold | None = None

    def fail(self, why: str, artifact: str, record: int | None = None, field_: str | None = None,
             **kw) -> SimulationError:
        return SimulationError(why, **_where(self.rank, artifact, record, field_, **kw))

    def _check_mesh_sub_type(self, t: TriggerSpec, art: str, e: int) -> None:
        """A mesh-family entry's algo_sub_type is FULL_MESH across nodes, else the platform's
        mesh sub-type (FORMATS §2; the manifest's ``topology.mesh_sub_type``: not checked for
        an output written before it was recorded)."""
        nodes = {self.layout.places[r].node for r in t.group if r in self.layout.places}
        if len(nodes) > 1:
            want, why = int(EncAlgMeshType.FULL_MESH), f"its group spans {len(nodes)} nodes"
        elif not self.layout.mesh_sub_type_recorded:
            return
        elif self.layout.mesh_sub_type is None:
            raise self.fail(f"a mesh-family entry ({_alg_name(int(self.algo_type[e]))}) on a "
                            "platform without mesh (topology.mesh_sub_type null)", art, e,
                            "algo_type")
        else:
            want, why = self.layout.mesh_sub_type, "intra-node: the platform's mesh_sub_type"
        got = int(self.algo_sub[e])
        if got != want:
            raise self.fail(f"algo_sub_type {got} ({EncAlgMeshType(got).name}), where trigger "
                            f"{t.ordinal} needs {want} ({EncAlgMeshType(want).name}): {why}",
                            art, e, "algo_sub_type")

    def check(self, bad: np.ndarray, why, artifact: str, field_: str | None = None,
              base: int = 0, triggers: np.ndarray | None = None) -> None:
        """Raise for the first record where ``bad`` is set (``why`` may be a callable(i));
        ``triggers``, each record's trigger ordinal: the error names the record's trigger
        (its verdict is then ``error``)."""
        i = _first(bad)
        if i is not None:
            msg = why(i) if callable(why) else why
            kw = {} if triggers is None else {"trigger": int(triggers[i])}
            raise self.fail(msg, artifact, base + i, field_, **kw)

    # ------------------------------------------------------------------
    def decode(self) -> RankProgram:
        self.decode_entries()
        self.decode_legs()
        self.decode_bds()
        self.decode_tiles()
        if self.bd_address_error is not None:
            raise self.bd_address_error
        self.decode_cce()
        self.decode_sems()
        self.check_protocol()
        self.build_runs()
        self.check_targets()
        self.check_tpinc()
        self.check_sb2sb()
        if self.ring_leg_error is not None:
            raise self.ring_leg_error
        self.check_composed_steps()
        try:  # (raised by the run's loader after the ring pairing: check_single_cycle_legs)
            self.check_single_cycle_legs()
            self.check_kangaring_legs()
        except SimulationError as exc:
            # a data leg's leaf that its position's step loop does not call is named now:
            # its elem_start, which names the position, is borne out by its BDs above, and
            # the ring pairing would name the legs it no longer pairs with (since 2026-12-07,
            # fixer 57a: a single-cycle send made direct_recv_send was named at a peer's
            # elem_start); a direct_recv's (no data) waits for the pairing, which names a
            # moved elem_start
            rec = exc.where.record
            if exc.where.field == "leaf" and rec is not None and self.sdma[rec] != SDMA_NONE:
                raise
            self.late_error = self.late_error or exc
        return self.build()

    # ------------------------------------------------------------------ SPAD
    def decode_entries(self) -> None:
        sp = self.a["spad.bin"]
        art = "spad.bin"
        # the rank manifest's entries, their types checked when the rank was loaded
        man = self.rf.entries
        if len(man) != sp.size:
            raise self.fail(f"the rank manifest lists {len(man)} entries, spad.bin holds "
                            f"{sp.size}", art)
        hdr = sp["header"].astype(np.int64)
        alg = sp["alg"].astype(np.int64)
        flags = sp["flags"].astype(np.int64)
        self.check(hdr != 1, "cc_op bit is not 1 or reserved header bits are set", art, "cc_op")
        self.check(sp["reserved"] != 0, "reserved byte 3 is not zero", art, "reserved")
        self.check(flags >> 3 != 0, "reserved flag bits [7:3] are set", art, "flags")
        self.algo_type = alg & 0xF
        self.algo_sub = (alg >> 4) & 0x7
        self.trigger_next = (alg >> 7) & 1
        self.reporter = flags & 1
        self.rwc = (flags >> 1) & 1
        self.rsc = (flags >> 2) & 1
        self.channel_list = sp["channel_list"].astype(np.int64)
        self.entry_trigger: list[TriggerSpec] = []
        self.entry_leg: list[str] = []
        #: each entry's channels as the rank manifest lists them
        self.entry_man_channels: list[list[int]] = []
        for e in range(sp.size):
            me = man[e]
            man_trigger, man_leg_name, man_channels = me["trigger"], me["leg"], me["channels"]
            at = int(self.algo_type[e])
            if at not in RING_FAMILY and at not in MESH_FAMILY:
                raise self.fail(f"algo_type {at} ({_alg_name(at)}) is not an entry the "
                                "simulator executes (ring family and mesh family leg programs)",
                                art, e, "algo_type")
            if at in RING_FAMILY and self.algo_sub[e]:
                raise self.fail("algo_sub_type must be 0 outside mesh entries", art, e,
                                "algo_sub_type")
            if at in MESH_FAMILY:
                sub = int(self.algo_sub[e])
                if sub >= int(EncAlgMeshType.MESH_INVALID):
                    # (MESH_INVALID = 4 is never written; 5..7 name no enc_alg_mesh_type)
                    what = ("MESH_INVALID" if sub == EncAlgMeshType.MESH_INVALID
                            else "no enc_alg_mesh_type")
                    raise self.fail(f"algo_sub_type {sub} ({what}) is not a mesh type: a mesh "
                                    "entry's is FULL_MESH=0, GROUPED_MESH=1, MESH_TRN2=2 or "
                                    "MESH_SWITCH=3 (FORMATS §2)", art, e, "algo_sub_type")
                shift = int(self.channel_list[e]) & 0xFFFF
                mask = int(self.channel_list[e]) >> 16
                if mask & (mask + 1) or shift + mask > 255:
                    raise self.fail(f"mesh overlay sema_shift_offset {shift} / sema_mask "
                                    f"{mask:#x} does not name a window of the 256 semaphores",
                                    art, e, "channel_list")
                # the firmware signals event t on sema_shift_offset + (t & sema_mask): the
                # semaphores the legs wait on and the net proxy counts are 192 + t (FORMATS §7)
                if (shift, mask) != (SEM_EVENT_BASE, EVENT_MASK):
                    raise self.fail(f"mesh overlay sema_shift_offset {shift} / sema_mask "
                                    f"{mask:#x}: the event window the legs use is "
                                    f"{SEM_EVENT_BASE} / {EVENT_MASK:#x} (event t on semaphore "
                                    f"{SEM_EVENT_BASE} + t, FORMATS §7)", art, e,
                                    "sema_shift_offset" if shift != SEM_EVENT_BASE
                                    else "sema_mask")
            if not self.rwc[e]:
                raise self.fail("ring_wait_complete is 0: the entry would have no completion "
                                "rule (FORMATS §2.1)", art, e, "ring_wait_complete")
            t = self.triggers.get(man_trigger)
            if t is None:
                raise self.fail(f"the rank manifest entry names trigger {man_trigger}, which "
                                "OUT/manifest.json does not list", art, e)
            if self.rank not in t.group:
                raise self.fail(f"entry for trigger {t.ordinal}, whose replica group does not "
                                f"contain rank {self.rank}", art, e)
            if at in MESH_FAMILY:
                self._check_mesh_sub_type(t, art, e)
            want_alg = t.entry_algorithm(man_leg_name)
            if _alg_name(at) != want_alg:
                raise self.fail(f"algo_type should be {want_alg}, not {_alg_name(at)}: trigger "
                                f"{t.ordinal} was lowered as {t.algorithm}"
                                + (f" with leg {escape_controls(man_leg_name)} {want_alg}"
                                   if t.legs else ""),  # (the rank manifest's: escaped once)
                                art, e, "algo_type")
            bits = ([c for c in range(32) if (int(self.channel_list[e]) >> c) & 1]
                    if at in RING_FAMILY else man_channels)
            # spad.bin's channel_list and reporter against what OUT/manifest.json fixes
            # (the trigger's channels, its leader) before the rank manifest is compared with
            # them: a changed spad.bin byte is named there, not as the manifest's disagreement
            runs = t.entry_channels(man_leg_name, self.rank)
            if runs is not None and bits != runs[0]:
                # (every rank is on each ring of a RING / SINGLE_CYCLE_RING trigger or HIER leg
                # plan, and in a unit of each KANGARING channel: its entry runs those channels,
                # whose ring orders its legs are held to)
                want, key, what = runs
                whose = "its group's plan" if t.legs else "its trigger"
                raise self.fail(f"channel_list runs channels {bits}, {what} are {want} "
                                f"(manifest.json {key}: a {want_alg} entry runs each channel of "
                                f"{whose}, FORMATS §1.1, §2)", art, e, "channel_list")
            if bool(self.reporter[e]) != (self.rank == t.leader):
                raise self.fail(f"reporter should be {int(self.rank == t.leader)}, not "
                                f"{int(self.reporter[e])}: the reporter of trigger {t.ordinal} is "
                                f"its leader, rank {t.leader}", art, e, "reporter")
            expect = {
                "algo_type": int(self.algo_type[e]), "algo_sub_type": int(self.algo_sub[e]),
                "trigger_next": bool(self.trigger_next[e]), "reporter": bool(self.reporter[e]),
                "ring_wait_complete": bool(self.rwc[e]), "ring_send_complete": bool(self.rsc[e]),
                "channel_list": int(self.channel_list[e]), "channels": bits,
            }
            if at in MESH_FAMILY:  # the overlay; the manifest keeps the channels as a mask
                expect["channel_list"] = sum(1 << c for c in bits)
                expect["sema_shift_offset"] = int(self.channel_list[e]) & 0xFFFF
                expect["sema_mask"] = int(self.channel_list[e]) >> 16
            expect["subgraph"] = t.subgraph
            for key, val in expect.items():  # (of one type each side: read_entry)
                if me.get(key) != val:
                    # (a subgraph is not in spad.bin: the trigger's, OUT/manifest.json; until
                    # 2026-12-06 called "what spad.bin says" too)
                    whence = ("its trigger's in OUT/manifest.json" if key == "subgraph" else
                              "what spad.bin says")
                    raise self.fail(f"the rank manifest's {key} should be {json_text(val)}, "
                                    f"{whence}, not {json_text(me.get(key))}", art, e, key)
            self.entry_trigger.append(t)
            self.entry_leg.append(man_leg_name)
            self.entry_man_channels.append(man_channels)
        # a HIER chain runs the trigger's legs, each once, in the manifest's order
        chains: dict[int, list[str]] = {}
        for e, t in enumerate(self.entry_trigger):
            chains.setdefault(t.ordinal, []).append(self.entry_leg[e])
        for ordinal, legs in chains.items():
            t = self.triggers[ordinal]
            want = list(t.legs) if t.legs else ["flat"] * len(legs)
            if legs != want:
                raise self.fail(f"trigger {ordinal}'s entries run legs {json_text(legs)}, its "
                                f"manifest lists {json_text(want)}", art, None, "leg")
        self.ring_entry = self.algo_type == int(EncAlgType.RING)
        per_sg: dict[str, int] = {}
        for t in self.entry_trigger:
            per_sg[t.subgraph] = per_sg.get(t.subgraph, 0) + 1
        for sg, cnt in per_sg.items():
            if cnt * F.SPAD_DTYPE.itemsize > F.SPAD_BYTES:
                raise self.fail(f"{cnt} entries of subgraph {escape_controls(sg)} overflow its "
                                f"{F.SPAD_BYTES}-byte CTRL SPAD", art)
        for e in range(sp.size - 1):
            if self.trigger_next[e] and self.entry_trigger[e + 1] is not self.entry_trigger[e]:
                raise self.fail("trigger_next chains into an entry of another trigger", art, e,
                                "trigger_next")
        if sp.size and self.trigger_next[-1]:
            raise self.fail("the last entry has trigger_next set", art, sp.size - 1,
                            "trigger_next")
        seen: dict[int, int] = {}
        for e, t in enumerate(self.entry_trigger):
            if t.ordinal in seen and (e == 0 or not self.trigger_next[e - 1]):
                if t.legs and self.entry_trigger[e - 1] is t:
                    # a HIER trigger's entries run its legs (checked above): two of them in a
                    # row are one chain, the first's trigger_next is what is missing
                    raise self.fail(f"the next entry, {e}, belongs to the same trigger "
                                    f"({t.ordinal}, leg {escape_controls(self.entry_leg[e])} of "
                                    "its HIER chain) but trigger_next is 0 (FORMATS §2.1)",
                                    art, e - 1, "trigger_next")
                raise self.fail(f"a second entry chain for trigger {t.ordinal} (first at entry "
                                f"{seen[t.ordinal]})", art, e)
            seen.setdefault(t.ordinal, e)
        for t in self.triggers.values():
            if self.rank in t.group and t.ordinal not in seen:
                raise self.fail(f"no SPAD entry for trigger {t.ordinal}, whose replica group "
                                f"contains rank {self.rank}", art)
        order = [self.entry_trigger[e].ordinal for e in range(sp.size)]
        if order != sorted(order):
            raise self.fail(f"entries are not in trigger order ({order})", art)

    # ------------------------------------------------------------------ legs
    def decode_legs(self) -> None:
        L = self.a["legs.bin"]
        art = "legs.bin"
        n = L.size
        ne = self.a["spad.bin"].size
        self.check(L["reserved"] != 0, "reserved u16 at offset 46 is not zero", art, "reserved")
        spi = L["spad_index"].astype(np.int64)
        ch = L["channel"].astype(np.int64)
        step = L["step"].astype(np.int64)
        leaf = L["leaf"].astype(np.int64)
        self.check(spi >= ne, lambda i: f"spad_index should be below {ne}, the entries "
                   f"spad.bin has, not {spi[i]}",
                   art, "spad_index")
        self.check(ch >= 32, "channel is not in 0..31", art, "channel")
        key = spi * 32 + ch
        i = _first(np.diff(key) < 0)
        if i is not None:
            self._blame_order(i, spi, ch, key)
        new = np.ones(n, bool)
        new[1:] = key[1:] != key[:-1]
        gid = np.cumsum(new) - 1
        gfirst = np.flatnonzero(new)
        want_step = np.arange(n) - gfirst[gid] if n else np.zeros(0, np.int64)
        i = _first(step != want_step)
        if i is not None:
            self._blame_split(i, spi, ch, step, leaf, gid)
        self.check(step != want_step, lambda i: f"step should be {want_step[i]}, program "
                   f"order's, not {step[i]} (legs missing, duplicated or out of order)", art,
                   "step")
        glast = np.append(gfirst[1:] - 1, n - 1) if n else np.zeros(0, np.int64)
        is_last = np.zeros(n, bool)
        is_last[glast] = True
        self.check(is_last & (leaf != MARK_END), "the last leg of an (entry, channel) is not "
                   "mark_end", art, "leaf")
        self.check(~is_last & (leaf == MARK_END), "mark_end before the end of its channel "
                   "program", art, "leaf")
        known = np.isin(leaf, list(LEAF_NAMES))
        self.check(~known, lambda i: f"unknown leaf {leaf[i]}", art, "leaf")
        trig = L["trigger"].astype(np.int64)
        ent_trig = np.array([t.ordinal for t in self.entry_trigger], np.int64)
        at_leg = self.algo_type[spi]
        if n:
            self.check(trig != ent_trig[spi], lambda i: f"trigger should be {ent_trig[spi[i]]}, "
                       f"entry {spi[i]}'s, not {trig[i]}", art, "trigger")
            # the leaf belongs to the entry's algorithm (a HIER entry: its leg's engine)
            allowed = _LEAF_OK[at_leg, leaf]
            self.check(~allowed, lambda i: f"leaf {LEAF_NAMES[int(leaf[i])]} ({leaf[i]}) in a "
                       f"{_alg_name(int(at_leg[i]))} entry (entry {spi[i]}, channel {ch[i]}, step "
                       f"{step[i]}): its leaves are "
                       + ", ".join(LEAF_NAMES[x] for x in sorted(ENTRY_LEAVES[int(at_leg[i])]))
                       + " (FORMATS §3)", art, "leaf")
            # the leg's elements lie in the collective's element space (the input, or an
            # all-gather's output), checked before any arithmetic on them
            space = np.array([t.out_count if t.op == "ALLGATHER" else t.in_count
                              for t in self.entry_trigger], np.int64)[spi]
            es = L["elem_start"]
            cnt = L["num_elements"].astype(np.int64)
            self.check(cnt > space, lambda i: f"num_elements should be at most {space[i]}, "
                       f"the elements trigger {trig[i]} has, not {cnt[i]}", art, "num_elements")
            self.check(es > (space - cnt).astype(np.uint64), lambda i: f"elem_start {es[i]} with "
                       f"num_elements {cnt[i]} runs past the {space[i]} elements of trigger "
                       f"{trig[i]}", art, "elem_start")
        half = L["half"].astype(np.int64)
        ring_leaf = np.isin(leaf, list(HALF_LEAVES))
        self.check((half > 1) | (~ring_leaf & (half != 0)), "half is not CHUNK_H0/H1 (0 "
                   "outside ring legs)", art, "half")
        # the ring protocol binds ring leaves of RING entries; KANGARING and SINGLE_CYCLE_RING
        # use the same leaves with their own semaphores and fan-in / fan-out (checked by the run)
        ring_leaf = np.isin(leaf, list(RING_LEAVES)) & self.ring_entry[spi] if n else \
            np.zeros(0, bool)
        sdma = L["sdma_op"].astype(np.int64)
        want_sdma = LEAF_SDMA[leaf]
        # a kangaring direct_recv duplicates the last chunk to the unit's secondaries, a copy
        # (FORMATS §3.3: sdma_op 2); on RING and SINGLE_CYCLE_RING it only consumes (0)
        want_sdma = np.where((at_leg == int(EncAlgType.KANGARING)) & (leaf == DIRECT_RECV),
                             SDMA_CME, want_sdma)
        # a leaf swapped for one with another sdma_op, neigh or reduction_type is named at
        # leaf where the step loop tells (_blame_swapped_leaf), before those fields' checks
        flat_ring = np.array([t.algorithm == "RING" and lg == "flat" for t, lg in
                              zip(self.entry_trigger, self.entry_leg)], bool) & self.ring_entry \
            if ne else np.zeros(0, bool)
        self._blame_swapped_leaf(_first(sdma != want_sdma), L, flat_ring)
        self.check(sdma != want_sdma, lambda i: f"sdma_op for leaf "
                   f"{LEAF_NAMES.get(int(leaf[i]))} should be {want_sdma[i]}, not {sdma[i]}",
                   art, "sdma_op")
        rt = L["reduction_type"].astype(np.int64)
        red = sdma == SDMA_CCE
        # (a SINGLE_CYCLE_RING leaf edited with its sdma_op is named at leaf where the step
        # loop tells: _blame_single_cycle_leaf)
        scr = (self.algo_type[spi] == int(EncAlgType.SINGLE_CYCLE_RING)) if n else \
            np.zeros(0, bool)
        self._blame_swapped_leaf(_first(scr & red & (rt > 2)), L, flat_ring)
        self.check(red & (rt > 2), "reduction_type is not a reduction_type_t", art,
                   "reduction_type")
        self._blame_swapped_leaf(_first(scr & ~red & (rt != NO_REDUCTION_TYPE)), L, flat_ring)
        self.check(~red & (rt != NO_REDUCTION_TYPE), "a copy or sync leg carries a "
                   "reduction_type (must be 0xFF)", art, "reduction_type")
        # seed 000 §5.4: the ring reduces as RING_2R1W (0), the kangaring as KANGARING_NR1W (2);
        # seed 001 §4: the ring's host-CC recv_reduce_copy_send as RING_2R2W (1)
        if n:
            want_rt = np.where((at_leg == int(EncAlgType.RING))
                               & (leaf == int(Leaf.recv_reduce_copy_send)),
                               int(ReductionType.RING_2R2W), _RT[at_leg])
            self._blame_swapped_leaf(_first(red & (want_rt >= 0) & (rt != want_rt)), L,
                                     flat_ring)
            self.check(red & (want_rt >= 0) & (rt != want_rt), lambda i: f"reduction_type "
                       f"{rt[i]} in a {_alg_name(int(at_leg[i]))} reduce leg (the ring-versus-"
                       f"kangaring fork: {want_rt[i]})", art, "reduction_type")
            self._check_host_cc(leaf, spi, art)
        neigh = L["neigh"].astype(np.int64)
        want_neigh = LEAF_NEIGH[leaf]
        fixed = ring_leaf | (leaf == MARK_END)
        self._blame_swapped_leaf(_first(fixed & (neigh != want_neigh)), L, flat_ring)
        self.check(fixed & (neigh != want_neigh), lambda i: f"neigh for leaf "
                   f"{LEAF_NAMES.get(int(leaf[i]))} should be {want_neigh[i]}, not {neigh[i]}",
                   art, "neigh")
        self.check(~fixed & (neigh > 2), "neigh is not LOCAL, NEXT or PREV", art, "neigh")
        self.neigh = neigh
        data = sdma != SDMA_NONE
        # a SINGLE_CYCLE_RING leaf edited with its sdma_op to one of or without data keeps its
        # BD, CCE and tile counts: named at leaf where the step loop tells, before the counts
        # (since 2026-12-07, fixer 57a, review 56q: named at n_tiles or dma_count)
        counts = (L["dma_count"] != 0) | (L["cce_count"] != 0) | (L["sb2sb_count"] != 0) \
            | (L["n_tiles"] != 0)
        self._blame_swapped_leaf(_first(scr & ((~data & counts) | (data & (L["n_tiles"] == 0)))),
                                 L, flat_ring)
        for fld in ("dma_count", "cce_count", "sb2sb_count", "n_tiles"):
            self.check(~data & (L[fld] != 0), f"{fld} of a leg without data (sdma_op 0) is not 0",
                       art, fld)
        self.check(data & (L["n_tiles"] == 0), "a data leg with no tiles", art, "n_tiles")
        self.check(data & (L["num_elements"] == 0), "a data leg moving 0 elements", art,
                   "num_elements")
        me = leaf == MARK_END
        self.check(me & ((L["num_elements"] != 0) | (L["elem_start"] != 0)),
                   "mark_end carries elements", art, "num_elements")
        # FORMATS §3: only a leg without data that consumes or receives a peer's data
        # (direct_recv, post_recv) carries an element count; every other one has 0
        counted = np.isin(leaf, list(COUNTED_WITHOUT_DATA))
        # ... a direct_recv's, the elements of the chunk half it consumes, is 1 or more (FORMATS
        # §3 lists the legs without elements; an empty half has no leg), as a data leg's: the
        # half and ring_step checks below read a ring leaf's chunk from its first element
        # (a post_recv's count is checked against its entry's receives, fifo.py)
        self.check(~data & (leaf == DIRECT_RECV) & (L["num_elements"] == 0),
                   "a direct_recv leg of 0 elements (it consumes the elements of a chunk "
                   "half, 1 or more: FORMATS §3)", art, "num_elements")
        self.check(~data & ~me & ~counted & (L["num_elements"] != 0),
                   lambda i: f"num_elements {L['num_elements'][i]} on a "
                   f"{LEAF_NAMES.get(int(leaf[i]))} leg without data (must be 0)",
                   art, "num_elements")
        # ... and, having no elements, its elem_start is 0 (FORMATS §3)
        self.check(~data & ~me & ~counted & (L["elem_start"] != 0),
                   lambda i: f"elem_start {L['elem_start'][i]} on a "
                   f"{LEAF_NAMES.get(int(leaf[i]))} leg without elements (must be 0)",
                   art, "elem_start")
        # the half of a flat RING entry's leg is the half-chunk its elements sit in (the chunk
        # layout of the trigger manifest's `chunk`, TriggerSpec.half_of), not what it says
        sel = np.flatnonzero(np.isin(leaf, list(RING_LEAVES)) & flat_ring[spi]) if n else \
            np.zeros(0, np.int64)
        try:
            self._check_ring_halves(L, sel, half, spi, n, art)
            self._check_ring_steps(L, sel, gfirst, gid)
        except SimulationError as exc:
            # a flat RING leg on an SBUF operand whose pieces' words and BDs agree on a place
            # that is not its elem_start's is named there first (check_sb2sb): the half and
            # step read a moved elem_start's chunk (docs/SIMULATOR.md §2); so is a data leg's
            # half or ring_step on a DRAM operand, whose pieces' words and BDs bear out or
            # name its elem_start (until 2026-12-07 an elem_start moved into the other half
            # was named at half)
            rec = exc.where.record
            late = rec is not None and leaf[rec] == DIRECT_RECV \
                and exc.where.field in ("half", "ring_step")
            if late:
                # a direct_recv moves no data: its elem_start is held to its predecessor's
                # send by the ring pairing, which the run's loader checks before this error
                self.late_error = exc
            elif rec is None or not (
                    any(fp is not None for fp in self._sbuf_footprints(
                        self.entry_trigger[int(spi[rec])]))
                    or (sdma[rec] != SDMA_NONE and exc.where.field in ("half", "ring_step"))):
                raise
            else:
                self.ring_leg_error = exc
        # record ranges must tile their files exactly, in leg order
        for first, count, fname in (("dma_first", "dma_count", "dma.bin"),
                                    ("cce_first", "cce_count", "cce.bin"),
                                    ("sem_first", "sem_count", "sem.bin"),
                                    ("sb2sb_first", "sb2sb_count", "sb2sb.bin")):
            self._check_ranges(L, first, count, fname)
        # channel_list == channels with legs, per entry (mesh entries: the manifest's list)
        got = np.zeros(ne, np.int64)
        if n:
            np.bitwise_or.at(got, spi, np.left_shift(1, ch))
        ring = np.isin(self.algo_type, list(RING_FAMILY))
        want = np.array([int(self.channel_list[e]) if ring[e] else
                         sum(1 << c for c in self.entry_man_channels[e]) for e in range(ne)],
                        np.int64) if ne else np.zeros(0, np.int64)
        bad = _first(got != want)
        if bad is not None:
            raise self.fail(f"channel_list should be {got[bad]:#x}, the channels the entry has "
                            f"legs on, not {want[bad]:#x}", "spad.bin", bad, "channel_list")
        self.entry_channels = got
        #: channels per entry (the popcount of entry_channels)
        self.entry_nch = np.array([bin(int(x)).count("1") for x in got], np.int64)
        self.spi, self.ch, self.leaf, self.sdma = spi, ch, leaf, sdma
        self.group_first, self.group_of = gfirst, gid
        self.n_legs = n

    def _blame_swapped_leaf(self, k: int | None, L: np.ndarray, flat_ring: np.ndarray) -> None:
        """Record ``k``'s ``sdma_op``, ``reduction_type`` or ``neigh`` disagrees with what its
        leaf implies (FORMATS §3, seed 000 §5.4). On a flat RING entry's ring leaf the step
        loop (seed 001 §4, docs/DESIGN.md "Buffers and data flow") fixes the leaf from the
        chunk its elem_start names: where the record's leaf is not one it calls on that chunk
        (in either phase of an all-reduce) and exactly one that it calls has the record's
        ``sdma_op`` and ``neigh``, the leaf is what changed and is named with that one (until
        2026-12-07 such a swap, ``recv_reduce_copy`` for ``recv_reduce_send``, was named at
        ``neigh``, ``sdma_op`` or ``reduction_type``); so too where it calls two (the rank's
        own chunk) and the record's ``sdma_op`` and ``neigh`` both are the other's, not its
        leaf's (review 55t). A SINGLE_CYCLE_RING entry's ring leaf, flat or a HIER
        ``inter_allr`` leg's, goes to :meth:`_blame_single_cycle_leaf` first. Otherwise the
        caller's check names its field."""
        if k is None:
            return
        leaf = int(L["leaf"][k])
        e = int(L["spad_index"][k])
        if leaf in RING_LEAVES and int(self.algo_type[e]) == int(EncAlgType.SINGLE_CYCLE_RING):
            self._blame_single_cycle_leaf(k, L)
            return
        if not flat_ring[e] or leaf not in RING_LEAVES:
            return
        t = self.entry_trigger[e]
        n = len(t.group)
        hops_at = t.ring_hops(int(L["channel"][k]), self.rank)
        if hops_at is None:
            return
        e0, n0 = int(L["elem_start"][k]), int(L["num_elements"][k])
        chunk_group, pos = t.chunk_of(np.array([e0], np.int64))
        if not 0 <= int(pos[0]) < n:
            return
        hops = int(hops_at[int(pos[0])])
        phases = (False, True) if t.op == "ALLREDUCE" and hops > 0 and n > 1 else (False,)

        def step_of(x: int, phase2: bool) -> int:
            if t.op == "ALLREDUCE" and not phase2 and x == DIRECT_COPY:
                return 0
            return int(_ring_step(t.op, n, hops, phase2))

        if len(phases) == 2:
            # an all-reduce moves the chunk once in each phase, the steps n apart: where the
            # record's ring_step is one phase's (2n - 1 steps a chunk group, FORMATS §3), the
            # leaf is that phase's
            at = [ph for ph in phases if step_of(0, ph) + int(chunk_group[0]) * (2 * n - 1)
                  == int(L["ring_step"][k])]
            phases = tuple(at) or phases
        called = {x for ph in phases
                  for x in self._step_loop_leaves(t, hops, ph, k, every=True)}
        # where two leaves are called (the rank's own chunk), a record whose sdma_op and
        # neigh both are not its leaf's but the other's had its leaf changed, not two fields
        if leaf in called and (len(called) < 2 or int(L["sdma_op"][k]) == LEAF_SDMA[leaf]
                               or int(L["neigh"][k]) == LEAF_NEIGH[leaf]):
            return
        fits = {(x, step_of(x, ph)) for ph in phases
                for x in self._step_loop_leaves(t, hops, ph, k, alike=True) if x != leaf}
        if len(fits) != 1:
            return
        ((want, step),) = fits
        name = LEAF_NAMES[want]
        raise self.fail(
            f"leaf should be {name}, not {LEAF_NAMES.get(leaf, leaf)}: elements [{e0}, "
            f"{e0 + n0}) are of the chunk of the member {hops} hops ahead on the channel's "
            f"ring of {n}, which the {_OP_TEXT[t.op]}'s step loop moves at step {step} with "
            f"{name}, the leaf of the record's sdma_op {int(L['sdma_op'][k])} and neigh "
            f"{int(L['neigh'][k])} (seed 001 §4, docs/DESIGN.md \"Buffers and data flow\", "
            "FORMATS §3)", "legs.bin", k, "leaf", channel=int(L["channel"][k]))

    def _blame_single_cycle_leaf(self, k: int, L: np.ndarray) -> None:
        """:meth:`_blame_swapped_leaf` on a SINGLE_CYCLE_RING ring leaf ``k`` (flat, or a HIER
        ``inter_allr`` leg's over its layout): where its leaf is not one docs/DESIGN.md
        "Single-cycle ring" calls at its chunk's position (the root's at i = 0, else the
        partial's or the result's) and exactly one called leaf fits the record's other
        fields - its ``neigh``, whether it carries a ``reduction_type`` and its ``sdma_op``
        (its own, or the new leaf's where both were edited) - the leaf is named with that
        one (until 2026-12-07, after review 55t, a root leaf changed to ``send`` was named at
        ``sdma_op``, and with its ``sdma_op`` edited too at ``reduction_type`` or ``neigh``)."""
        e = int(L["spad_index"][k])
        t, leg = self.entry_trigger[e], self.entry_leg[e]
        c = int(L["channel"][k])
        e0, n0 = int(L["elem_start"][k]), int(L["num_elements"][k])
        if leg == "flat":
            if t.algorithm != "SINGLE_CYCLE_RING":
                return
            rings, n, h_cw = t.ring_hops(c, self.rank), len(t.group), t.single_cycle[1][0]
            _g, pos = t.chunk_of(np.array([e0], np.int64))
        else:
            lay = t.leg_layout(leg, self.rank)
            if lay is None:
                return
            n = len(lay.group)
            h_cw = n // 2
            rings = t.ring_hops(c, self.rank, lay)
            _g, pos = t.leg_chunk_of(lay, np.array([e0], np.int64))
        p = int(pos[0])
        if rings is None or not 0 <= p < n or int(rings[p]) < 0:
            return
        i, leaf = int(rings[p]), int(L["leaf"][k])
        cw = any(c == pr[0] for pr in self._scr_pairs(e))
        # the leaves the step loop calls on this channel at this position (since 2026-12-07,
        # fixer 57a: until then any root leaf at i = 0 and any of the four others elsewhere,
        # so a root direct_copy_send made recv_reduce_copy, or a send made recv_reduce_copy
        # before the root, was named at sdma_op)
        called = _single_cycle_leaves(n, h_cw, cw, i)
        sdma, neigh = int(L["sdma_op"][k]), int(L["neigh"][k])
        # where two are called (a CCW root's direct_recv and direct_copy_send), a record whose
        # neigh is not its leaf's but the other's, and whose sdma_op is not its leaf's or (edited
        # with the leaf) disagrees with its tiles, had its leaf changed
        data = int(L["n_tiles"][k]) != 0
        if leaf in called and (len(called) < 2 or neigh == LEAF_NEIGH[leaf] or (
                sdma == LEAF_SDMA[leaf] and data == (sdma != SDMA_NONE))):
            return
        called = tuple(x for x in called if x != leaf)
        reduces = int(L["reduction_type"][k]) != NO_REDUCTION_TYPE
        fits = [x for x in called if LEAF_NEIGH[x] == neigh
                and (LEAF_SDMA[x] == SDMA_CCE) == reduces
                and sdma in (LEAF_SDMA[x], LEAF_SDMA[leaf])]
        if len(fits) != 1:
            return
        want = LEAF_NAMES[fits[0]]
        way = "CW" if cw else "CCW"
        leg_of = "" if leg == "flat" else f" of the HIER {escape_controls(leg)} leg"
        raise self.fail(
            f"leaf should be {want}, not {LEAF_NAMES.get(leaf, leaf)}: elements [{e0}, "
            f"{e0 + n0}) on the {way} channel{leg_of} are "
            + ("of this rank's own chunk, it is their root" if i == 0 else
               f"of the chunk whose root is {i} hop{'s' if i != 1 else ''} ahead")
            + f", where the single-cycle step loop calls {want} with the record's neigh "
            f"{neigh} and {'a' if reduces else 'no'} reduction_type (docs/DESIGN.md "
            "\"Single-cycle ring\", FORMATS §3)", "legs.bin", k, "leaf", channel=c)

    def _check_ring_halves(self, L: np.ndarray, sel: np.ndarray, half: np.ndarray,
                           spi: np.ndarray, n: int, art: str) -> None:
        """The half of a flat RING entry's leg (``sel``) is the half-chunk its elements sit in
        (the chunk layout of the trigger manifest's `chunk`, TriggerSpec.half_of);
        :meth:`check_single_cycle_legs` checks a SINGLE_CYCLE_RING leg's its own way (a HIER
        ``inter_allr`` leg's over its leg layout)."""
        if sel.size:
            want_half = np.full(n, -2, np.int64)
            for e in np.unique(spi[sel]):
                m = sel[spi[sel] == e]
                want_half[m] = self.entry_trigger[int(e)].half_of(
                    L["elem_start"][m].astype(np.int64), L["num_elements"][m].astype(np.int64))
            self.check((want_half >= -1) & (half != want_half), lambda i: (
                f"half should be {want_half[i]}, not {half[i]}: elements "
                f"[{L['elem_start'][i]}, {L['elem_start'][i] + L['num_elements'][i]}) are half "
                f"{want_half[i]} of their chunk" if want_half[i] >= 0 else
                f"the elements [{L['elem_start'][i]}, "
                f"{L['elem_start'][i] + L['num_elements'][i]}) of a half {half[i]} leg are not "
                "inside one half-chunk of the trigger's chunk layout"), art, "half")

    def _check_host_cc(self, leaf: np.ndarray, spi: np.ndarray, art: str) -> None:
        """The all-reduce's final reduce step is the one ``options.host_cc`` says ``lower``
        composed (docs/DESIGN.md "Host-CC and hybrid rings", FORMATS §8.3): in a RING or
        KANGARING entry that runs an all-reduce (a flat trigger's, or a HIER leg's), with
        --host-cc ``recv_reduce_copy_send`` and never ``recv_reduce_copy``, without it
        ``recv_reduce_copy`` (then ``direct_copy_send``) and never ``recv_reduce_copy_send``;
        the other ops and engines compose the same leaves either way.  Until 2026-12-05
        ``options.host_cc`` was not read: an output whose all-reduce ran the other variant
        simulated as a match."""
        host_cc = self.layout.host_cc
        ops = [t.op if leg == "flat" else LEG_OPS[leg][1].name
               for t, leg in zip(self.entry_trigger, self.entry_leg)]
        ar = (np.isin(self.algo_type, (int(EncAlgType.RING), int(EncAlgType.KANGARING)))
              & np.array([op == "ALLREDUCE" for op in ops], bool))
        other = int(Leaf.recv_reduce_copy if host_cc else Leaf.recv_reduce_copy_send)
        final = "recv_reduce_copy_send" if host_cc else "recv_reduce_copy, then direct_copy_send"
        self.check(ar[spi] & (leaf == other), lambda i: f"leaf {LEAF_NAMES[int(leaf[i])]} in a "
                   f"{_alg_name(int(self.algo_type[spi[i]]))} all-reduce entry (entry {spi[i]}) "
                   f"of an output lowered {'with' if host_cc else 'without'} --host-cc "
                   f"(options.host_cc {'true' if host_cc else 'false'}): its final reduce step "
                   f"is {final} (docs/DESIGN.md \"Host-CC and hybrid rings\", FORMATS §8.3)",
                   art, "leaf")

    def check_composed_steps(self) -> None:
        """FORMATS §3 ``ring_step`` of a mesh or RDH entry: each composed leg its own step, in
        order, so along each (entry, channel) (its group of legs.bin) the legs but
        ``mark_complete`` and ``mark_end`` (step 0, :meth:`_check_ring_steps`) have ring steps
        that rise.  Not the steps themselves: the composer counts rows of an empty element
        range that emit no leg (docs/SIMULATOR.md §7).  Checked last, an informative field:
        a leg whose leaf or records are wrong is named for those."""
        L, gid = self.a["legs.bin"], self.group_of
        if not L.size:
            return
        leaf = L["leaf"].astype(np.int64)
        at = self.algo_type[L["spad_index"].astype(np.int64)]
        idx = np.flatnonzero(np.isin(at, list(COMPOSED_STEPS)) & (leaf != MARK_END)
                             & (leaf != MARK_COMPLETE))
        got = L["ring_step"].astype(np.int64)
        prev, cur = idx[:-1], idx[1:]
        bad = _first((gid[prev] == gid[cur]) & (got[cur] <= got[prev]))
        if bad is None:
            return
        i, j = int(cur[bad]), int(prev[bad])
        # which of the two holds the change: the one some whole step fits in place of,
        # strictly between its other neighbours of the group (until 2026-12-07 the later
        # record was always named, a raised step named at the next leg)
        before = int(idx[bad - 1]) if bad > 0 and gid[idx[bad - 1]] == gid[j] else None
        after = int(idx[bad + 2]) if bad + 2 < idx.size and gid[idx[bad + 2]] == gid[i] \
            else None
        j_fits = got[i] - (got[before] if before is not None else -1) >= 2
        i_fits = after is None or got[after] - got[j] >= 2
        what = (f"in an entry of {_alg_name(int(at[i]))}: each composed leg has its own step, in "
                "order (FORMATS §3)")
        if j_fits and not i_fits:
            raise self.fail(f"ring_step {got[j]} before ring_step {got[i]} (legs.bin record {i}) "
                            f"{what}, and a step between its neighbours' would fit here",
                            "legs.bin", j, "ring_step", channel=int(L["channel"][j]))
        both = (": one of the two records is wrong, and nothing else read here tells which"
                if j_fits else "")
        raise self.fail(f"ring_step {got[i]} after ring_step {got[j]} (legs.bin record {j}) "
                        f"{what}{both}", "legs.bin", i, "ring_step", channel=int(L["channel"][i]))

    def _scr_pairs(self, e: int) -> list:
        """The (CW, CCW) channel pairs of entry ``e``'s SINGLE_CYCLE_RING: the trigger's, or
        its HIER leg's plan for the rank's group of that leg."""
        t = self.entry_trigger[e]
        lay = None if self.entry_leg[e] == "flat" else t.leg_layout(self.entry_leg[e], self.rank)
        if lay is None:
            return t.single_cycle[0]
        info = t.legs[self.entry_leg[e]]
        gi = next(k for k, grp in enumerate(info["groups"]) if grp[0] == lay.group)
        return info["single_cycle"][gi][0]

    def _ring_leg_arrays(self, flat: np.ndarray, leaves) -> _RingLegArrays | None:
        """The set-up :meth:`check_single_cycle_legs` and :meth:`check_kangaring_legs` share:
        the legs.bin records of a leaf in ``leaves`` in an entry ``flat`` marks, their fields
        and the arrays the checks fill (None: no such record)."""
        L = self.a["legs.bin"]
        sel = np.flatnonzero(np.isin(self.leaf, list(leaves)) & flat[self.spi])
        if not sel.size:
            return None
        cut = np.flatnonzero(np.diff(self.spi[sel])) + 1  # sel is in legs.bin order: by entry
        return _RingLegArrays(
            sel, np.split(sel, cut), L["elem_start"].astype(np.int64),
            L["num_elements"].astype(np.int64), L["half"].astype(np.int64),
            L["ring_step"].astype(np.int64), np.full(L.size, -2, np.int64),
            np.zeros(L.size, np.int64), np.zeros(L.size, np.int64),
            np.full(L.size, -1, np.int64), np.zeros(L.size, bool))

    def _check_leg_halves(self, r: _RingLegArrays, chunks_as,
                          layout_of=lambda i: "trigger's chunk layout") -> None:
        """Each leg's ``half`` against the one :meth:`_ring_leg_arrays`' ``want_half`` holds
        (-2: not checked; -1: its elements lie in no one half-chunk); ``chunks_as(i)``: what
        chunks as the ring, for record i's line; ``layout_of(i)``: the layout whose
        half-chunks record i's elements should lie in."""
        start, count, half, want_half = r.start, r.count, r.half, r.want_half
        self.check((want_half >= -1) & (half != want_half), lambda i: (
            f"half should be {want_half[i]}, not {half[i]}: elements [{start[i]}, "
            f"{start[i] + count[i]}) are half {want_half[i]} of their chunk (a "
            + chunks_as(i) + ": docs/DESIGN.md \"Leg layouts\")"
            if want_half[i] >= 0 else
            f"the elements [{start[i]}, {start[i] + count[i]}) of a half {half[i]} leg are not "
            "inside one half-chunk of the " + layout_of(i)), "legs.bin", "half")

    def _scheduled_steps(self, r: _RingLegArrays, steps: np.ndarray):
        """``(want, spg, bad)``: each checked leg's ``ring_step`` (its step within the chunk
        group plus the chunk group x the steps a group on its channel, ``spg``, the largest
        of ``steps`` over the channel's (entry, channel) group of legs.bin; -1 on a channel
        with a leg not checked) and the first leg whose ``ring_step`` is not it (None)."""
        gid, gfirst = self.group_of, self.group_first
        odd = np.zeros(gfirst.size, bool)
        np.logical_or.at(odd, gid[r.sel], ~r.checked[r.sel])
        spg = np.maximum.reduceat(steps, gfirst)
        want = np.where(r.checked & ~odd[gid], r.s + r.g * spg[gid], -1)
        return want, spg, _first((want >= 0) & (r.got != want))

    def check_single_cycle_legs(self) -> None:
        """FORMATS §3 ``half`` and ``ring_step`` of a flat SINGLE_CYCLE_RING entry's ring
        leaves, fixed by what the simulator reads (docs/DESIGN.md "Single-cycle ring"): the
        trigger chunks as the ring does, so ``half`` is the half-chunk that holds the leg's
        elements (TriggerSpec.half_of, as a flat RING leg's); the chunk position of its
        ``elem_start`` names the chunk's root, the group member there, ``i`` hops ahead of
        this rank on the channel's own ring (a CCW channel's order is the reversed ring), and
        over n ranks with ``h_cw`` = ``single_cycle.arcs[0]`` the leg's step within its chunk
        group is ``h_cw - i`` for the partial on its way to the root (``send``,
        ``recv_reduce_send``), ``h_cw`` at the root (``i`` 0) and ``h_cw + n - i`` for the
        result coming back (``direct_recv_send``, ``direct_recv``); ``ring_step`` is that
        plus the chunk group x (1 + the channel's largest step), as on every ring channel.
        A ring leaf other than the one its position calls on its channel
        (:func:`_single_cycle_leaves`; a ``send`` at the root, a root's leaf elsewhere) is
        named at ``leaf`` (until 2026-12-07 its channel was left to the
        run, which did not name it, review 55t).  Checked last: its error is raised only after
        the ring pairing (:func:`check_ring_pairing`, the run's loader), as a leg whose
        ``elem_start`` or ``num_elements`` moved is named for it there (a ``direct_recv``,
        without data) or by the 0xBF and BD checks before (a data leg), not at ``half``.
        Until 2026-12-07 both were range-checked only: a flip to another value in range
        simulated as a match.  A HIER all-reduce's ``inter_allr`` leg run as
        SINGLE_CYCLE_RING is checked alike over the rank's group of that leg (h_cw =
        ceil((n - 1) / 2), DESIGN's rule its plan's ``single_cycle.arcs`` are held to), its
        ring orders and its interleaved layout over the rank's slice
        (TriggerSpec.leg_layout; since 2026-12-07, range-checked before)."""
        L = self.a["legs.bin"]
        if not L.size:
            return
        art = "legs.bin"
        scr = int(EncAlgType.SINGLE_CYCLE_RING)
        # a flat entry's layout is the trigger's; a HIER inter_allr leg's its interleaved
        # layout over the rank's slice (TriggerSpec.leg_layout)
        lay = [None if leg == "flat" else t.leg_layout(leg, self.rank)
               for t, leg in zip(self.entry_trigger, self.entry_leg)]
        flat = np.array([(t.algorithm == "SINGLE_CYCLE_RING" and leg == "flat")
                         or lay[e] is not None
                         for e, (t, leg) in enumerate(zip(self.entry_trigger, self.entry_leg))],
                        bool) & (self.algo_type == scr) if lay else np.zeros(0, bool)
        leaf, spi, ch = self.leaf, self.spi, self.ch
        r = self._ring_leg_arrays(flat, RING_LEAVES)
        if r is None:
            return
        start, count, got = r.start, r.count, r.got
        want_half, s, g, hops, checked = r.want_half, r.s, r.g, r.hops, r.checked
        before = np.isin(leaf, (int(Leaf.send), int(Leaf.recv_reduce_send)))
        for m in r.by_entry:
            e = int(spi[m[0]])
            t = self.entry_trigger[e]
            chans, at = np.unique(ch[m], return_inverse=True)
            if lay[e] is None:
                n, h_cw = len(t.group), t.single_cycle[1][0]
                want_half[m] = t.half_of(start[m], count[m])
                g[m], pos = t.chunk_of(start[m])
            else:
                # the leg's group of n ranks: h_cw = ceil((n - 1) / 2) (docs/DESIGN.md
                # "Single-cycle ring"; the plan's single_cycle.arcs are held to it, §1)
                n, h_cw = len(lay[e].group), len(lay[e].group) // 2
                want_half[m] = t.leg_half_of(lay[e], start[m], count[m])
                g[m], pos = t.leg_chunk_of(lay[e], start[m])
            rings = np.stack([h if h is not None else np.full(n, -1, np.int64)
                              for h in (t.ring_hops(c, self.rank, lay[e])
                                        for c in chans.tolist())])
            i = rings[at, np.clip(pos, 0, n - 1)]
            hops[m] = i
            s[m] = np.where(i == 0, h_cw, np.where(before[m], h_cw - i, h_cw + n - i))
            # the leaves the step loop calls by (CW channel, hops): exactly these
            # (_single_cycle_leaves; until 2026-12-07, fixer 57a, any root leaf at i = 0 and
            # any of the other four elsewhere), a table built once per (n, h_cw)
            calls = _single_cycle_calls(n, h_cw)
            cws = np.isin(ch[m], [p[0] for p in self._scr_pairs(e)]).astype(np.int64)
            checked[m] = (i >= 0) & calls[cws, np.clip(i, 0, n - 1), leaf[m]]
        # a ring leaf the step loop does not call at its position on its channel
        # (docs/DESIGN.md "Single-cycle ring", _single_cycle_leaves)
        bad = _first((hops >= 0) & ~checked)
        if bad is not None:
            e, i = int(spi[bad]), int(hops[bad])
            t = self.entry_trigger[e]
            cw = any(int(ch[bad]) == p[0] for p in self._scr_pairs(e))
            n = len(t.group) if lay[e] is None else len(lay[e].group)
            h_cw = t.single_cycle[1][0] if lay[e] is None else n // 2
            wants = _single_cycle_leaves(n, h_cw, cw, i)
            a = h_cw if cw else n - 1 - h_cw
            role = ("the root's" if i == 0 else "the partial on its way to the root"
                    if i <= a else "the result coming back")
            leg_of = "" if lay[e] is None else f" of the HIER {self.entry_leg[e]} leg"
            raise self.fail(
                "leaf should be " + " or ".join(LEAF_NAMES[x] for x in wants)
                + f" ({role}), not {LEAF_NAMES.get(int(leaf[bad]), int(leaf[bad]))}: elements "
                f"[{start[bad]}, {start[bad] + count[bad]}) on the {'CW' if cw else 'CCW'} "
                f"channel{leg_of} are "
                + ("of this rank's own chunk, it is their root" if i == 0 else
                   f"of the chunk whose root is {i} hop{'s' if i != 1 else ''} ahead")
                + f", on the channel's ring of {n} (arcs [{h_cw}, {n - 1 - h_cw}]) (docs/DESIGN.md "
                "\"Single-cycle ring\")", art, int(bad), "leaf", channel=int(ch[bad]))
        self._check_leg_halves(r, lambda i: (
            "SINGLE_CYCLE_RING trigger chunks as the ring" if lay[int(spi[i])] is None else
            f"HIER inter_allr leg chunks as the ring over its slice [{lay[int(spi[i])].lo}, "
            f"{lay[int(spi[i])].lo + lay[int(spi[i])].span}) of the message"), lambda i: (
            "trigger's chunk layout" if lay[int(spi[i])] is None else
            f"HIER {escape_controls(self.entry_leg[int(spi[i])])} leg's layout"))
        # a channel (its (entry, channel) group of legs.bin) with a ring leaf whose root is
        # not on the channel's ring (no hops) is not checked here: its largest step is not
        # known; a leaf of another role was named above
        want, spg, bad = self._scheduled_steps(r, np.where(leaf == MARK_END, 0, s + 1))
        if bad is None:
            return
        gid = self.group_of
        t = self.entry_trigger[int(spi[bad])]
        e = int(spi[bad])
        pairs = self._scr_pairs(e)
        if lay[e] is None:
            n, h_cw, leg_of = len(t.group), t.single_cycle[1][0], ""
        else:
            n = len(lay[e].group)
            h_cw, leg_of = n // 2, f" of the HIER {self.entry_leg[e]} leg"
        way = "CW" if any(int(ch[bad]) == p[0] for p in pairs) else "CCW"
        i = int(hops[bad])
        rule = ("the chunk's root: step h_cw" if i == 0 else
                f"the partial {i} hop{'s' if i != 1 else ''} from its root: step h_cw - {i}"
                if before[bad] else
                f"the result from its root, {n - i} hop{'s' if n - i != 1 else ''} behind: "
                f"step h_cw + {n - i}")
        lf = LEAF_NAMES.get(int(leaf[bad]), int(leaf[bad]))
        raise self.fail(f"ring_step should be {want[bad]}, the single-cycle schedule's, not "
                        f"{got[bad]}: {lf} of elements [{start[bad]}, {start[bad] + count[bad]})"
                        f" on the {way} channel{leg_of}, {rule} = {s[bad]} of chunk group "
                        f"{g[bad]} ({spg[gid[bad]]} steps a group on this channel; h_cw "
                        f"{h_cw}, {n} ranks) (docs/DESIGN.md \"Single-cycle "
                        "ring\", FORMATS §3)", art, int(bad), "ring_step", channel=int(ch[bad]))

    def check_kangaring_legs(self) -> None:
        """FORMATS §3 ``half`` and ``ring_step`` of a flat KANGARING entry's ring leaves, fixed
        by what the simulator reads (docs/DESIGN.md "Leg layouts", "Kangaring"): a flat
        KANGARING trigger chunks exactly as the ring would, so ``half`` is the half-chunk that
        holds the leg's elements (TriggerSpec.half_of, as a flat RING leg's); and per channel
        and chunk group the primary runs the ring's step template (seed 001 §4) over the
        channel's cycle of units (``channels[].order``, the primaries; ``kangaring[].units``),
        one leg per member of a unit step: the chunk position of the leg's ``elem_start``
        names a member, its unit's primary is ``i`` hops ahead of this rank on the cycle of
        ``u`` units, and the leg's step is the ring's over ``u``: an all-reduce's first phase
        (``direct_reduce_send_kangaring`` at ``i = u - 1``, ``recv_reduce_send`` at 1 ..
        u - 2, the own unit's ``recv_reduce_copy`` and ``direct_copy_send`` or
        ``recv_reduce_copy_send``) ``u - 1 - i``, its all-gather phase
        (``direct_recv_send`` at u - 1 .. 2, ``direct_recv`` at 1) ``2u - 1 - i``; a
        reduce-scatter's ``u - 1 - i``; an all-gather's (``send`` of the own unit's blocks,
        then as that phase) ``(u - i) mod u``.  ``ring_step`` is that plus the chunk group x
        (1 + the channel's largest step).  A ring leaf the template does not call at its unit's
        hops (a leaf swapped within the family) is named at ``leaf``
        (:meth:`_blame_kangaring_leaf`; since 2026-12-07, fixer 57a: left to the run before).
        Checked last, after the ring pairing, as :meth:`check_single_cycle_legs`: a leg whose
        ``elem_start`` moved is named for it before (the 0xBF and BD checks of a data leg).
        Until 2026-12-07 both were range-checked only: a flip to another value in range
        simulated as a match.

        A HIER leg run as KANGARING or RING is checked alike over its leg layout
        (TriggerSpec.leg_ring_layout: the rank's group of the leg, its plan's ring orders,
        units and ``chunk``, an all-reduce's ``inter_allr`` interleaved over the rank's slice,
        every other leg's positions owning segments cut as ring blocks): a RING leg's steps
        are seed 001 §4's over the leg's group (each rank its own unit, ``send`` at
        ``i = n - 1``); until 2026-12-07 (review 55t's Left) both were range-checked only."""
        L = self.a["legs.bin"]
        if not L.size:
            return
        art = "legs.bin"
        kr, rg = int(EncAlgType.KANGARING), int(EncAlgType.RING)
        # per entry: (op, group, orders, units by channel, layout; None: flat) of what runs
        # the step template over units (flat KANGARING, a HIER KANGARING or RING leg)
        view: list = []
        for e, (t, leg) in enumerate(zip(self.entry_trigger, self.entry_leg)):
            at = int(self.algo_type[e])
            if leg == "flat":
                ok = t.algorithm == "KANGARING" and at == kr
                view.append((t.op, t.group, t.orders, {c: units for c, _p, units, _d in
                                                       t.kangaring or ()}, None) if ok else None)
                continue
            lay = t.leg_ring_layout(leg, self.rank) if at in (kr, rg) else None
            if lay is None or t.entry_algorithm(leg) != ("KANGARING" if at == kr else "RING"):
                view.append(None)
                continue
            if at == kr:
                info = t.legs[leg]
                g = next(k for k, grp in enumerate(info["groups"]) if grp[0] == lay.group)
                units = {c: [[lay.group[p] for p in unit if 0 <= p < len(lay.group)]
                             for unit in us] for c, _p, us, _d in info["kangaring"][g] or ()}
            else:
                units = {c: [[r] for r in order] for c, order in lay.orders.items()}
            view.append((LEG_OPS[leg][1].name, lay.group, lay.orders, units, lay))
        flat = np.array([v is not None for v in view], bool)
        leaf, spi, ch = self.leaf, self.spi, self.ch
        r = self._ring_leg_arrays(flat, HALF_LEAVES)
        if r is None:
            return
        start, count, got = r.start, r.count, r.got
        want_half, s, g, hops, checked = r.want_half, r.s, r.g, r.hops, r.checked
        units = np.zeros(L.size, np.int64)
        wrong = np.zeros(L.size, bool)  # a ring leaf the template does not call there
        firsts: dict[int, int] = {}
        for m in r.by_entry:
            e = int(spi[m[0]])
            t = self.entry_trigger[e]
            op, group, orders, unit_of, lay = view[e]
            if lay is None:
                want_half[m] = t.half_of(start[m], count[m])
                g[m], pos = t.chunk_of(start[m])
            else:
                want_half[m] = t.leg_half_of(lay, start[m], count[m])
                g[m], pos = t.leg_chunk_of(lay, start[m])
            first = int(Leaf.direct_reduce_send_kangaring if int(self.algo_type[e]) == kr
                        else Leaf.send)
            for c in np.unique(ch[m]).tolist():
                mc = m[ch[m] == c]
                order = orders.get(c) or []
                if self.rank not in order or not unit_of.get(c):
                    continue
                u = len(order)
                prim = {mem: unit[0] for unit in unit_of[c] for mem in unit}
                at = {r: j for j, r in enumerate(order)}
                # by member position, how many hops ahead of this rank its unit's primary
                # is (-1: off the ring; the last slot for a position outside the group)
                n = len(group)
                ahead = np.array([(at[prim[r]] - at[self.rank]) % u if prim.get(r) in at
                                  else -1 for r in group] + [-1], np.int64)
                p = pos[np.searchsorted(m, mc)]
                i = ahead[np.where((p >= 0) & (p < n), p, n)]
                lf = leaf[mc]
                hops[mc], units[mc] = i, u
                s[mc], ok = _kangaring_steps(op, lf, i, u, self.layout.host_cc, first)
                checked[mc] = ok & (i >= 0)
                wrong[mc] = ~ok & (i >= 0) & (u > 1)
            firsts[e] = first

        def chunks_as(i: int) -> str:
            e = int(spi[i])
            lay = view[e][4]
            if lay is None:
                return "KANGARING trigger chunks as the ring"
            leg = escape_controls(self.entry_leg[e])
            if lay.segments is None:
                return (f"HIER {leg} leg chunks as the ring over its slice [{lay.lo}, "
                        f"{lay.lo + lay.span}) of the message")
            return (f"HIER {leg} leg cuts each of its positions' segments as a ring block, "
                    f"{lay.chunk['channels']} x {lay.chunk['chunk_size_n']} elements a chunk "
                    "group")

        self._blame_kangaring_leaf(_first(wrong), r, view, units, firsts)
        self._check_leg_halves(r, chunks_as, lambda i: (
            "trigger's chunk layout" if view[int(spi[i])][4] is None else
            f"HIER {escape_controls(self.entry_leg[int(spi[i])])} leg's layout"))
        want, spg, bad = self._scheduled_steps(r, np.where(checked, s + 1, 0))
        if bad is None:
            return
        gid = self.group_of
        i, u = int(hops[bad]), int(units[bad])
        e = int(spi[bad])
        lf = LEAF_NAMES.get(int(leaf[bad]), int(leaf[bad]))
        hop = f"{i} hop{'s' if i != 1 else ''} ahead"
        if int(self.algo_type[e]) == kr:
            leg_of = "" if view[e][4] is None else \
                f" of the HIER {escape_controls(self.entry_leg[e])} leg"
            what = (f"the kangaring schedule's, not {got[bad]}: {lf} of elements [{start[bad]}, "
                    f"{start[bad] + count[bad]}) moves the chunk of a member of the unit {hop} "
                    f"on the channel's cycle of {u} units{leg_of}")
            why = ("docs/DESIGN.md \"Kangaring\": the ring's step template over the units, seed "
                   "001 §4; FORMATS §3")
        else:
            what = (f"the ring schedule's, not {got[bad]}: {lf} of elements [{start[bad]}, "
                    f"{start[bad] + count[bad]}) moves the chunk of the member {hop} on the "
                    f"channel's ring of {u} of the HIER {escape_controls(self.entry_leg[e])} leg")
            why = ("seed 001 §4's step template over the leg's group and layout: docs/DESIGN.md "
                   "\"Leg layouts\", \"HIER\"; FORMATS §3")
        raise self.fail(f"ring_step should be {want[bad]}, {what}: step {s[bad]} of chunk "
                        f"group {g[bad]} ({spg[gid[bad]]} steps a group on this channel) "
                        f"({why})", art, int(bad), "ring_step", channel=int(ch[bad]))

    def _blame_kangaring_leaf(self, k: int | None, r: _RingLegArrays, view: list,
                              units: np.ndarray, firsts: dict) -> None:
        """Ring leaf ``k`` of :meth:`check_kangaring_legs` is not one the ring's step template
        (seed 001 §4 over the channel's cycle of units; docs/DESIGN.md "Kangaring") calls at
        its unit's hops: named at ``leaf`` with the one it calls there (the one whose step is
        the record's ``ring_step`` within its chunk group, where the template calls two: an
        all-reduce's two phases, the own unit's two legs, and whose ``sdma_op``,
        ``reduction_type`` and ``neigh`` the record's fit), else all that fit, else all it
        calls (since
        2026-12-07, fixer 57a: until then a swap within the family, same ``sdma_op`` and
        ``neigh``, left its channel's steps unchecked and was left to the run)."""
        if k is None:
            return
        e = int(self.spi[k])
        op, lay = view[e][0], view[e][4]
        i, u = int(r.hops[k]), int(units[k])
        calls = _kangaring_calls(op, i, u, self.layout.host_cc, firsts[e])
        steps = np.where(r.checked, r.s + 1, 0)
        spg = int(np.maximum.reduceat(steps, self.group_first)[self.group_of[k]])
        at = int(r.got[k]) - int(r.g[k]) * spg
        pick = [c for c in calls if c[1] == at] or calls
        # ... and of those, the ones whose sdma_op, reduction_type and neigh the record's fit
        # (as _blame_single_cycle_leaf's): a reduce leaf's CCE and reduction_type, a copy's
        # CME and none; a KANGARING primary's every ring leg reaches a peer, neigh 1 (FORMATS
        # §3: its recv_reduce_copy writes the unit's OUT), a RING leg's LEAF_NEIGH.  Where
        # several fit, they are listed; where none does, all the template calls there
        # (until 2026-12-07, review 57p: the tie was broken by neigh alone, against the ring's
        # LEAF_NEIGH, so an own-unit recv_reduce_copy made recv_reduce_send was named
        # direct_copy_send, a copy leaf its CCE and reduction_type contradict)
        lf0 = int(self.leaf[k])
        sdma, neigh = int(self.sdma[k]), int(self.neigh[k])
        reduces = int(self.a["legs.bin"]["reduction_type"][k]) != NO_REDUCTION_TYPE
        kang = int(self.algo_type[e]) == int(EncAlgType.KANGARING)

        def op_of(x: int) -> int:
            # a KANGARING direct_recv copies the last chunk to the secondaries: a CME copy
            # (DESIGN "Kangaring"); a ring's only waits
            return SDMA_CME if kang and x == DIRECT_RECV else int(LEAF_SDMA[x])

        def fits(x: int) -> bool:
            return ((LEAF_SDMA[x] == SDMA_CCE) == reduces and sdma in (op_of(x), op_of(lf0))
                    and neigh == (NEIGH_NEXT if kang else LEAF_NEIGH[x]))
        pick = ([c for c in pick if fits(c[0])] or [c for c in calls if fits(c[0])]
                or calls)
        lf = LEAF_NAMES.get(lf0, lf0)
        hop = f"{i} hop{'s' if i != 1 else ''} ahead"
        leg = "" if lay is None else f" of the HIER {escape_controls(self.entry_leg[e])} leg"
        if int(self.algo_type[e]) == int(EncAlgType.KANGARING):
            what = f"a member of the unit {hop} on the channel's cycle of {u} units{leg}"
            why = ("docs/DESIGN.md \"Kangaring\": the ring's step template over the units, seed "
                   "001 §4; FORMATS §3")
        else:
            what = f"the member {hop} on the channel's ring of {u}{leg}"
            why = ("seed 001 §4's step template over the leg's group and layout: docs/DESIGN.md "
                   "\"Leg layouts\", \"HIER\"; FORMATS §3")
        want = " or ".join(f"{LEAF_NAMES[x]} (step {st})" for x, st in pick)
        raise self.fail(f"leaf should be {want}, not {lf}: elements [{r.start[k]}, "
                        f"{r.start[k] + r.count[k]}) are of the chunk of {what}, where the "
                        f"{_OP_TEXT.get(op, op)}'s step template calls "
                        + " or ".join(LEAF_NAMES[x] for x, _s in calls)
                        + f" (ring_step {int(r.got[k])}: step {at} of chunk group {int(r.g[k])}, "
                        f"{spg} steps a group on this channel) ({why})", "legs.bin", k, "leaf",
                        channel=int(self.ch[k]))

    def _blame_split(self, i: int, spi: np.ndarray, ch: np.ndarray, step: np.ndarray,
                     leaf: np.ndarray, gid: np.ndarray) -> None:
        """Record ``i`` starts an (entry, channel) but its ``step`` runs on from record
        ``i - 1``'s, of the same entry: one channel program was split by a record's
        ``channel``.  Where record ``i - 1`` is alone in its program and no ``mark_end``
        (every program ends with one, FORMATS §3), its channel is named; where record ``i``
        is alone and the ``mark_end`` the program before it lacks, its channel is (until
        2026-12-07 the step of the record after the split was named).  Else nothing is
        raised here."""
        if i == 0 or gid[i] == gid[i - 1] or spi[i] != spi[i - 1] or step[i] != step[i - 1] + 1:
            return
        alone = np.bincount(gid)[gid] == 1
        before = bool(alone[i - 1] and leaf[i - 1] != MARK_END)  # record i - 1 moved
        after = bool(alone[i] and leaf[i] == MARK_END and leaf[i - 1] != MARK_END)  # record i
        if before and after:
            # a program of one leg and its mark_end: either record's channel may have moved;
            # the entry's channels (spad.bin's channel_list, a mesh entry's the manifest's)
            # tell which, else nothing does (review 54p: the data leg was named, though the
            # mark_end had moved off the entry's one channel)
            e = int(spi[i])
            bits = (int(self.channel_list[e]) if int(self.algo_type[e]) in RING_FAMILY
                    else sum(1 << c for c in self.entry_man_channels[e]))
            listed = [bool((bits >> int(ch[k])) & 1) if 0 <= int(ch[k]) < 32 else False
                      for k in (i - 1, i)]
            if listed == [False, True]:
                after = False
            elif listed == [True, False]:
                before = False
            else:
                return
        if before:
            j, o = i - 1, i
        elif after:
            j, o = i, i - 1
        else:
            return
        raise self.fail(f"channel should be {ch[o]}, not {ch[j]}: record {j} alone makes a "
                        f"channel program (entry {spi[j]} channel {ch[j]}) "
                        f"{'without' if j < o else 'of only'} mark_end, and its step "
                        f"{step[j]} runs {'on into' if j < o else 'on from'} record {o}'s "
                        f"(entry {spi[o]} channel {ch[o]}, step {step[o]}): legs are ordered "
                        "by (entry, channel), each channel program ends with mark_end "
                        "(FORMATS §3)", "legs.bin", j, "channel")

    def _blame_order(self, i: int, spi: np.ndarray, ch: np.ndarray, key: np.ndarray) -> None:
        """Record ``i + 1``'s (entry, channel) comes before record ``i``'s (FORMATS §3: legs
        are ordered by entry, then channel). Where taking record ``i`` out leaves its
        neighbours in order and taking ``i + 1`` out does not, record ``i`` holds the change
        and is named; likewise ``i + 1``; where either would do, both are named (until
        2026-12-07 record ``i + 1`` always was, a raised record ``i`` named at its
        neighbour)."""
        n = key.size
        a = i == 0 or key[i - 1] <= key[i + 1]  # without record i, in order
        b = i + 2 >= n or key[i] <= key[i + 2]  # without record i + 1, in order
        head = "legs are not ordered by (entry, channel): "
        if a and b:
            raise self.fail(f"{head}record {i + 1} (entry {spi[i + 1]} channel {ch[i + 1]}) "
                            f"comes after record {i} (entry {spi[i]} channel {ch[i]}): one of the "
                            "two records is wrong, and nothing else read here tells which",
                            "legs.bin", i + 1, "spad_index" if spi[i] != spi[i + 1] else "channel")
        j = i if a else i + 1
        nb = [k for k in (j - 1, j + 1) if 0 <= k < n]
        fld = "spad_index" if any(spi[j] != spi[k] for k in nb) else "channel"
        around = (f"records {nb[0]} and {nb[1]} are in order without it" if len(nb) == 2 else
                  f"the records {'after' if nb[0] > j else 'before'} it are in order")
        o = i + 1 if j == i else i  # the other record of the pair
        raise self.fail(f"{head}record {j} (entry {spi[j]} channel {ch[j]}) comes "
                        f"{'before' if j == i else 'after'} record {o} (entry {spi[o]} channel "
                        f"{ch[o]}), and {around}", "legs.bin", j, fld)

    def _check_ranges(self, L: np.ndarray, first: str, count: str, fname: str) -> None:
        """The legs' ``first`` / ``count`` ranges tile ``fname`` in leg order (FORMATS §3).
        Link k joins leg k - 1's end to leg k's ``first`` (link 0: record 0; link n: the
        file's end). A changed ``first`` breaks the links on both sides of its leg, a changed
        ``count`` only the one after it, so the record that holds the change is named: the
        leg's ``first`` where two links in a row break, the ``count`` before a lone break
        (until 2026-12-07 a count was named at the next leg's ``first``)."""
        art = "legs.bin"
        f_ = L[first].astype(np.int64)
        c_ = L[count].astype(np.int64)
        n, size = f_.size, int(self.a[fname].size)
        if not n:
            if size:
                raise self.fail(f"the legs reference 0 records of {fname}, the file holds {size}",
                                art, None, count)
            return
        end = f_ + c_
        link_bad = np.append(f_ != np.append(0, end[:-1]), end[-1] != size)
        k = _first(link_bad)
        if k is None:
            return
        lone = not link_bad[k + 1:].any()
        if k == n:
            raise self.fail(f"the legs reference {int(end[-1])} records of {fname}, the file "
                            f"holds {size}: the last leg's range, {first} {int(f_[-1])} + {count} "
                            f"{int(c_[-1])}, ends there", art, n - 1, count)
        want = int(f_[k] - f_[k - 1]) if k else -1
        limit = (1 << (8 * L.dtype[count].itemsize)) - 1
        if lone and k and 0 <= want <= limit:
            raise self.fail(f"{count} should be {want}, not {int(c_[k - 1])}: the legs' records of "
                            f"{fname} do not follow each other, and the next leg's {first} "
                            f"{int(f_[k])} (legs.bin record {k}) is borne out by the legs after "
                            "it and the file's end", art, k - 1, count)
        expect = int(end[k - 1]) if k else 0
        raise self.fail(f"{first} should be {expect}, not {int(f_[k])}: the legs' records of "
                        f"{fname} do not follow each other", art, k, first)

    def _check_ring_steps(self, L: np.ndarray, sel: np.ndarray, gfirst: np.ndarray,
                          gid: np.ndarray) -> None:
        """FORMATS §3 ``ring_step``: 0 on ``mark_end`` and ``mark_complete`` (no ring step) and
        on a KANGARING ``peer_post`` or ``peer_wait`` (step 0 of chunk group 0) in every
        entry; on the ring leaves of a flat RING entry (``sel``; ``gfirst``, ``gid``: the
        (entry, channel) groups of legs.bin) step s of chunk group g is s + g x (1 + the
        channel's largest s), s from seed 001 §4's step loops: the leaf's phase and how many
        hops ahead of this rank the member whose chunk (block) it moves is on the channel's
        ring (``user_ranks`` index i, the chunk position from ``elem_start``,
        TriggerSpec.chunk_of).  Over a group of n: an all-reduce's reduce-scatter leaves are
        step n - 1 - i, its all-gather leaves (direct_recv_send, direct_recv) 2n - 1 - i; a
        reduce-scatter's n - 1 - i; an all-gather's (n - i) mod n (a group of one: its
        direct_copy, step 0).  Other legs' ring_step is not checked (docs/SIMULATOR.md §7)."""
        art = "legs.bin"
        leaf, spi, ch = L["leaf"].astype(np.int64), L["spad_index"].astype(np.int64), \
            L["channel"].astype(np.int64)
        got = L["ring_step"].astype(np.int64)
        want = np.full(L.size, -1, np.int64)  # -1: not checked
        want[(leaf == MARK_END) | (leaf == MARK_COMPLETE)] = 0
        # a KANGARING sync leg (peer_post, peer_wait) is schedule's group 0, step 0: ring_step
        # 0 x S + 0 (FORMATS §3; until 2026-12-07 (review 55t's Left) any value was accepted)
        want[(leaf == PEER_POST) | (leaf == PEER_WAIT)] = 0
        s = np.zeros(L.size, np.int64)
        g = np.zeros(L.size, np.int64)
        #: leg -> (the leaves its step loop calls there, hops, n) where its own is not one
        wrong_leaf: dict[int, tuple] = {}
        alt_s = np.full(L.size, -1, np.int64)  # the other phase's step (an all-reduce's leg)
        hop = np.full(L.size, -1, np.int64)  # ... and the hops ahead of its chunk's member
        if sel.size:
            # sel is in legs.bin order, so grouped by entry: one slice an entry
            cut = np.flatnonzero(np.diff(spi[sel])) + 1
            for m in np.split(sel, cut):
                t = self.entry_trigger[int(spi[m[0]])]
                n = len(t.group)
                chans, at = np.unique(ch[m], return_inverse=True)
                # per channel of the entry, each member's hops ahead of this rank (-1: the
                # rank has no ring there; the run names the channel)
                hops = np.stack([h if h is not None else np.full(n, -1, np.int64)
                                 for h in (t.ring_hops(c, self.rank) for c in chans.tolist())])
                g[m], pos = t.chunk_of(L["elem_start"][m].astype(np.int64))
                i = hops[at, np.clip(pos, 0, n - 1)]
                lf = leaf[m]
                ag = np.isin(lf, _ALL_GATHER_PHASE)
                s[m] = _ring_step(t.op, n, i, ag)
                if t.op == "ALLREDUCE":
                    s[m] = np.where(lf == DIRECT_COPY, 0, s[m])
                self._ring_leaf_wants(t, m, i, lf, wrong_leaf)
                if t.op == "ALLREDUCE" and n > 1:
                    # the step the other phase gives the chunk: a leaf swapped across the
                    # phases (direct_recv_send <-> send) keeps the record's step there
                    alt_s[m] = _ring_step(t.op, n, i, ~ag)
                    alt_s[m] = np.where((i >= 0) & (lf != DIRECT_COPY), alt_s[m], -1)
                    hop[m] = i
                # set below, once the channel's steps per group are known
                want[m] = np.where(i >= 0, -2, -1)
                s[m] = np.where(i >= 0, s[m], 0)
            # steps per chunk group of each (entry, channel): 1 + its largest step (FORMATS
            # §3; its mark_complete legs are step 0, its mark_end is not counted)
            spg = np.maximum.reduceat(np.where(leaf == MARK_END, 0, s + 1), gfirst)
            m = want == -2
            want[m] = s[m] + g[m] * spg[gid[m]]
        bad = _first((want >= 0) & (got != want))
        if bad is not None and alt_s[bad] >= 0 and \
                got[bad] == alt_s[bad] + want[bad] - s[bad]:
            # the record's step is the other phase's for its chunk: the leaf is what disagrees
            # with the step loop there (seed 001 §4), named with the leaf it calls
            # (one with the record's sdma_op and neigh: else the step is what moved)
            t = self.entry_trigger[int(spi[bad])]
            phase2 = int(leaf[bad]) not in _ALL_GATHER_PHASE
            wants = self._step_loop_leaves(t, int(hop[bad]), phase2, int(bad), alike=True)
            # ... unless the leg's own semaphores bear its leaf out: a consuming leaf waits on
            # its channel's recv_sema, the other phase's leaf there does not (or the reverse),
            # so the ring_step is what moved (until 2026-12-07 the leaf was named)
            waits = self._waits_recv_sema(L, int(bad))
            wants = tuple(x for x in wants
                          if (x in CONSUMING) == waits or (int(leaf[bad]) in CONSUMING) != waits)
            if wants:
                s[bad] = alt_s[bad]
                wrong_leaf = {int(bad): (wants, int(hop[bad]), len(t.group))}
                bad = None
        if bad is None:
            if wrong_leaf:
                # the step agrees with the leaf's phase and the chunk its elements name: the
                # leaf is what the step loop does not call there
                bad = min(wrong_leaf)
                e0, n0 = int(L["elem_start"][bad]), int(L["num_elements"][bad])
                wants, hops, n = wrong_leaf[bad]
                names = " or ".join(LEAF_NAMES[x] for x in wants)
                t = self.entry_trigger[int(spi[bad])]
                raise self.fail(
                    f"leaf should be {names}, not "
                    f"{LEAF_NAMES.get(int(leaf[bad]), int(leaf[bad]))}: elements [{e0}, "
                    f"{e0 + n0}) are of the chunk of the member {hops} hops ahead on the "
                    f"channel's ring of {n}, which the {_OP_TEXT[t.op]}'s step loop moves "
                    f"at step {s[bad]} with {names} (seed 001 §4, docs/DESIGN.md \"Buffers and "
                    "data flow\", FORMATS §3)", art, bad, "leaf", channel=int(ch[bad]))
            return
        lf = LEAF_NAMES.get(int(leaf[bad]), int(leaf[bad]))
        if leaf[bad] in (MARK_END, MARK_COMPLETE):
            why = f"ring_step {got[bad]} on a {lf} leg (0: it is no ring step, FORMATS §3)"
        elif leaf[bad] in (PEER_POST, PEER_WAIT):
            why = (f"ring_step should be 0, not {got[bad]}: a {lf} leg is a kangaring sync leg, "
                   "step 0 of chunk group 0 (FORMATS §3, §3.3)")
        else:
            e0, n0 = int(L["elem_start"][bad]), int(L["num_elements"][bad])
            spg_bad = (want[bad] - s[bad]) // g[bad] if g[bad] else None
            why = (f"ring_step should be {want[bad]}, the ring schedule's, not {got[bad]}: {lf} of "
                   f"elements [{e0}, {e0 + n0}) is step {s[bad]} of chunk group {g[bad]}"
                   + (f" ({spg_bad} steps a group on this channel)" if spg_bad else "")
                   + " (seed 001 §4, FORMATS §3)")
        raise self.fail(why, art, bad, "ring_step", channel=int(ch[bad]))

    def _waits_recv_sema(self, L: np.ndarray, k: int) -> bool:
        """Whether leg ``k``'s semaphore records (sem.bin, FORMATS §7) wait on a recv_sema
        (ctrl role 0, sub-op wait_ge_and_dec), as a consuming ring leaf's do."""
        f, c = int(L["sem_first"][k]), int(L["sem_count"][k])
        ctrl = self.a["sem.bin"]["ctrl"][f:f + c].astype(np.int64)
        return bool((((ctrl & F.SEM_SUBOP_MASK) == WAIT)
                     & (((ctrl >> F.SEM_ROLE_SHIFT) & 0xFF) == 0)).any())

    def _ring_leaf_wants(self, t: TriggerSpec, m: np.ndarray, i: np.ndarray, lf: np.ndarray,
                         wrong: dict) -> None:
        """The leaves a flat RING entry's step loop calls on the legs ``m`` (leaves ``lf``),
        which move the chunk (block) of the member ``i`` hops ahead on their channel's ring
        (-1: none; the run names it): seed 001 §4's all-reduce loop, the reduce-scatter its
        first phase, the all-gather DESIGN "Buffers and data flow"'s.  Over n ranks: the
        chunk i = n - 1 hops ahead is sent (``send``), those 1 .. n - 2 ahead received,
        reduced and sent on (``recv_reduce_send``), the rank's own (i = 0) reduced last
        (``recv_reduce_copy`` then ``direct_copy_send``; with --host-cc
        ``recv_reduce_copy_send``; a reduce-scatter's ``recv_reduce_copy``); in an all-reduce's
        all-gather phase those n - 1 .. 2 ahead are received and sent on
        (``direct_recv_send``), the one 1 ahead received last (``direct_recv``).  An
        all-gather sends its own block (``send``) and copies it to OUT (``direct_copy``), then
        receives the others as that phase does.  A group of one copies (``direct_copy``).
        Legs whose leaf is not among them go into ``wrong`` (leg: (leaves, i, n))."""
        n = len(t.group)
        for k, hops, leaf in zip(m.tolist(), i.tolist(), lf.tolist()):
            if hops < 0:
                continue
            phase2 = t.op == "ALLREDUCE" and leaf in _ALL_GATHER_PHASE and hops > 0
            wants = self._step_loop_leaves(t, hops, phase2, k)
            if leaf not in wants:
                wrong[k] = (wants, hops, n)

    def _step_loop_leaves(self, t: TriggerSpec, hops: int, phase2: bool, k: int,
                          alike: bool = False, every: bool = False) -> tuple:
        """The leaves :meth:`_ring_leaf_wants` says the step loop of ``t`` calls on the chunk
        of the member ``hops`` ahead (``phase2``: in an all-reduce's all-gather phase); where
        two are called (the rank's own chunk: ``recv_reduce_copy`` then ``direct_copy_send``;
        an all-gather's own block: ``send`` or ``direct_copy``), those whose ``sdma_op`` and
        ``neigh`` are record ``k``'s (both checked against its leaf before) when any is
        (``alike``: only those, none if none is; ``every``: all it calls there)."""
        n = len(t.group)
        L = Leaf
        if n == 1:
            wants = (DIRECT_COPY,)
        elif t.op == "ALLGATHER" or phase2:
            wants = ((int(L.send), DIRECT_COPY) if hops == 0 and t.op == "ALLGATHER" else
                     (DIRECT_RECV,) if hops == 1 else (int(L.direct_recv_send),))
        elif hops == n - 1:
            wants = (int(L.send),)
        elif hops > 0:
            wants = (int(L.recv_reduce_send),)
        elif t.op != "ALLREDUCE":
            wants = (int(L.recv_reduce_copy),)
        else:
            wants = ((int(L.recv_reduce_copy_send),) if self.layout.host_cc else
                     (int(L.recv_reduce_copy), int(L.direct_copy_send)))
        if every:
            return wants
        rec = self.a["legs.bin"][k]
        same = tuple(x for x in wants if LEAF_SDMA[x] == rec["sdma_op"]
                     and LEAF_NEIGH[x] == rec["neigh"])
        return same if alike else same or wants

    # ------------------------------------------------------------------ data BDs
    def decode_bds(self) -> None:
        D = self.a["dma.bin"]
        L = self.a["legs.bin"]
        art = "dma.bin"
        lc = D["len_ctrl"].astype(np.int64)
        mc = D["meta_ctrl"].astype(np.int64)
        keep = F.LEN_MASK | (F.GEN_MASK << F.GEN_SHIFT) | F.LEN_FIRST | F.LEN_LAST
        # META (bit 23) is 0 in every data BD (FORMATS §5): refused like a reserved bit
        self.check(lc & (~keep | F.LEN_META) != 0, "reserved bits (or META) set in len_ctrl", art,
                   "len_ctrl")
        mkeep = 0xF | F.META_DIR_S2M | (F.META_STREAM_MASK << F.META_STREAM_SHIFT)
        self.check(mc & ~mkeep != 0, "reserved bits set in meta_ctrl", art, "meta_ctrl")
        length = lc & F.LEN_MASK
        length = np.where(length == 0, F.BD_MAX_BYTES, length)
        leg_of = np.repeat(np.arange(self.n_legs), L["dma_count"].astype(np.int64))
        self.check(mc & 0xF != self.sdma[leg_of], lambda i: f"sdma_op should be "
                   f"{self.sdma[leg_of[i]]}, its leg {leg_of[i]}'s, not {mc[i] & 0xF}", art,
                   "meta_ctrl")
        # generation tags: index among the rank's data BDs of the same channel // 4096 mod 4
        chan = self.ch[leg_of]
        gen = (lc >> F.GEN_SHIFT) & F.GEN_MASK
        want = (_index_within(chan) // F.BD_RING_ENTRIES) & F.GEN_MASK
        self.check(gen != want, lambda i: f"generation tag should be {want[i]}, not {gen[i]} (BD "
                   f"ring wraps every {F.BD_RING_ENTRIES} BDs of channel {chan[i]})", art,
                   "len_ctrl.ring_id")
        trank, reg, soff, err = self.layout.resolve_data(self.rank, D["buf_ptr"], length)
        i = _first(err != 0)
        # raised after decode_tiles: a length the tile's other streams and the leg's
        # num_elements do not bear out is named there, at its length (until 2026-12-07 a
        # length running past its region was named at buf_ptr); decode_tiles reads no address
        self.bd_address_error = None if i is None else self.fail(
            f"buf_ptr {int(D['buf_ptr'][i]):#x} ({int(length[i])} bytes) "
            f"{ADDRESS_ERRORS[int(err[i])]}", art, i, "buf_ptr", channel=int(chan[i]))
        self.bd_len, self.bd_leg = length, leg_of
        self.bd_first = (lc & F.LEN_FIRST) != 0
        self.bd_last = (lc & F.LEN_LAST) != 0
        self.bd_dir = (mc >> 4) & 1
        self.bd_stream = (mc >> F.META_STREAM_SHIFT) & F.META_STREAM_MASK
        self.bd_rank, self.bd_reg, self.bd_soff = trank, reg, soff

    def decode_tiles(self) -> None:
        L = self.a["legs.bin"]
        art = "dma.bin"
        n = self.bd_len.size
        leg = self.bd_leg
        first, last = self.bd_first, self.bd_last
        leg_start = np.ones(n, bool)
        leg_start[1:] = leg[1:] != leg[:-1]
        leg_end = np.ones(n, bool)
        leg_end[:-1] = leg[1:] != leg[:-1]
        self.check(leg_start & ~first, "the first BD of a leg does not have FIRST", art, "FIRST")
        self.check(leg_end & ~last, "the last BD of a leg does not have LAST", art, "LAST")
        key = self.bd_dir * 32 + self.bd_stream
        if n > 1:
            inner = ~leg_end[:-1]
            i = _first(inner & (last[:-1] != first[1:]))
            if i is not None:
                self._blame_tile_bound(i, key, last, first)
        tile = np.cumsum(first) - 1
        n_tiles = int(first.sum())
        per_leg = np.bincount(leg[first], minlength=self.n_legs) if n else np.zeros(
            self.n_legs, np.int64)
        bad = _first(per_leg != L["n_tiles"])
        if bad is not None:
            raise self.fail(f"n_tiles should be {per_leg[bad]}, the tiles its BDs form, not "
                            f"{L['n_tiles'][bad]}",
                            "legs.bin", bad, "n_tiles")
        tstart = np.flatnonzero(first)
        if n > 1:
            same_tile = tile[1:] == tile[:-1]
            self.check(same_tile & (key[1:] < key[:-1]), "BDs of a tile are not ordered M2S "
                       "sources 0, 1, ... then S2M destinations 0, 1, ...", art, "meta_ctrl",
                       base=1)
        # stream groups: (tile, dir, stream)
        gnew = np.ones(n, bool)
        if n > 1:
            gnew[1:] = (tile[1:] != tile[:-1]) | (key[1:] != key[:-1])
        gstart = np.flatnonzero(gnew)
        g_tile = tile[gstart]
        g_dir = self.bd_dir[gstart]
        g_stream = self.bd_stream[gstart]
        g_len = np.add.reduceat(self.bd_len, gstart) if n else np.zeros(0, np.int64)
        # per tile: stream counts and indices 0..k-1
        src_cnt = np.bincount(g_tile[g_dir == 0], minlength=n_tiles)
        dst_cnt = np.bincount(g_tile[g_dir == 1], minlength=n_tiles)
        src_max = np.full(n_tiles, -1, np.int64)
        dst_max = np.full(n_tiles, -1, np.int64)
        np.maximum.at(src_max, g_tile[g_dir == 0], g_stream[g_dir == 0])
        np.maximum.at(dst_max, g_tile[g_dir == 1], g_stream[g_dir == 1])
        bad = _first((src_max + 1 != src_cnt) | (dst_max + 1 != dst_cnt))
        if bad is not None:
            raise self.fail("a tile's stream indices are not 0, 1, ... (a stream is missing)", art,
                            int(tstart[bad]), "meta_ctrl.stream")
        bad = _first((src_cnt == 0) | (dst_cnt == 0))
        if bad is not None:
            raise self.fail("a tile without a source or without a destination stream", art,
                            int(tstart[bad]), "meta_ctrl.dir")
        t_leg = leg[tstart]
        S = np.zeros(self.n_legs, np.int64)
        Dn = np.zeros(self.n_legs, np.int64)
        S[t_leg] = src_cnt
        Dn[t_leg] = dst_cnt
        # all tiles of a leg: same stream counts
        smin = np.full(self.n_legs, 1 << 30, np.int64)
        smax = np.full(self.n_legs, -1, np.int64)
        np.minimum.at(smin, t_leg, src_cnt * 64 + dst_cnt)
        np.maximum.at(smax, t_leg, src_cnt * 64 + dst_cnt)
        bad = _first((smax >= 0) & (smin != smax))
        if bad is not None:
            raise self.fail("tiles of this leg have different numbers of sources/destinations",
                            "legs.bin", bad, "dma_count")
        copy = self.sdma == SDMA_CME
        bad = _first(copy & (S > 1))
        if bad is not None:
            raise self.fail(f"a copy leg (CME) with {S[bad]} source streams", "legs.bin", bad)
        # lengths: all sources of a tile equal; all destinations equal
        src_len = np.zeros(n_tiles, np.int64)
        smin = np.full(n_tiles, 1 << 62, np.int64)
        smax = np.full(n_tiles, -1, np.int64)
        m = g_dir == 0
        np.minimum.at(smin, g_tile[m], g_len[m])
        np.maximum.at(smax, g_tile[m], g_len[m])
        groups = (g_tile, g_dir, g_stream, g_len, gstart, t_leg)
        bad = _first(smin != smax)
        if bad is not None:
            self._blame_stream_length(bad, *groups)
            raise self.fail("the source streams of a tile have different lengths", art,
                            int(tstart[bad]), "length")
        src_len[:] = smax
        dmin = np.full(n_tiles, 1 << 62, np.int64)
        dmax = np.full(n_tiles, -1, np.int64)
        m = g_dir == 1
        np.minimum.at(dmin, g_tile[m], g_len[m])
        np.maximum.at(dmax, g_tile[m], g_len[m])
        bad = _first((dmin != dmax) | (dmax != src_len))
        if bad is not None:
            self._blame_stream_length(bad, *groups)
            raise self.fail(f"destination streams of {dmin[bad]}..{dmax[bad]} bytes for sources "
                            f"of {src_len[bad]} bytes", art, int(tstart[bad]), "length")
        leg_bytes = np.bincount(t_leg, weights=src_len, minlength=self.n_legs).astype(np.int64)
        dsize = np.array([self.entry_trigger[int(e)].dsize for e in self.spi], np.int64) \
            if self.n_legs else np.zeros(0, np.int64)
        data = self.sdma != SDMA_NONE
        ne = self.a["legs.bin"]["num_elements"].astype(np.int64)
        bad = _first(data & (leg_bytes != ne * dsize))
        if bad is not None:
            raise self.fail(f"num_elements x {dsize[bad]} bytes should be the {leg_bytes[bad]} "
                            f"bytes each source stream carries, not {ne[bad]} x {dsize[bad]}",
                            "legs.bin", bad, "num_elements")
        self.S, self.D = S, Dn
        self.tile_first_of_leg = np.cumsum(per_leg) - per_leg
        self.tile_src_len = src_len

    def _blame_tile_bound(self, i: int, key: np.ndarray, last: np.ndarray,
                          first: np.ndarray) -> None:
        """BD ``i``'s LAST and BD ``i + 1``'s FIRST (of one leg) disagree: name the bit that
        holds the change. A tile runs M2S sources 0, 1, ..., then S2M destinations (FORMATS
        §5), and has both, so a tile ends exactly where the stream key (dir, stream) falls
        from one BD to the next (the last destination, then source 0): there both bits
        belong set, elsewhere both clear (until 2026-12-07 BD i was named, as FIRST,
        whichever bit was changed)."""
        art = "dma.bin"
        ends = bool(key[i + 1] < key[i])
        order = " (FORMATS §5: a tile's M2S sources 0, 1, ..., then its S2M destinations)"
        if bool(last[i]) != ends:
            raise self.fail(f"LAST should be {int(ends)}, not {int(last[i])}: " + (
                "a tile ends here: the next BD's stream comes before this BD's, and the next BD "
                "has FIRST" if ends else "no tile ends here: the next BD's stream is this BD's "
                "or comes after it, and the next BD has no FIRST") + order, art, i, "LAST")
        raise self.fail(f"FIRST should be {int(ends)}, not {int(first[i + 1])}: " + (
            "a tile starts here: this BD's stream comes before the previous BD's, and the "
            "previous BD has LAST" if ends else "no tile starts here: this BD's stream is the "
            "previous BD's or comes after it, and the previous BD has no LAST") + order, art,
            i + 1, "FIRST")

    def _blame_stream_length(self, t: int, g_tile, g_dir, g_stream, g_len, gstart,
                             t_leg) -> None:
        """Tile ``t``'s streams carry different bytes: where one stream's bytes over all its
        leg's tiles are not the leg's num_elements x the element size and every other stream's
        are, and the tile's other streams agree, that stream's BDs hold the change and are
        named at their length (until 2026-12-07 the tile's first BD was, whichever BD was
        changed). Returns otherwise: the caller's line stands."""
        leg = int(t_leg[t])
        ne = int(self.a["legs.bin"]["num_elements"][leg])
        dsize = int(self.entry_trigger[int(self.spi[leg])].dsize)
        want_leg = ne * dsize
        of_leg = np.flatnonzero(t_leg[g_tile] == leg)
        skey = g_dir * 32 + g_stream
        total = {int(k): int(g_len[of_leg][skey[of_leg] == k].sum())
                 for k in np.unique(skey[of_leg])}
        off = [k for k, v in total.items() if v != want_leg]
        if len(off) != 1:
            return
        mine = np.flatnonzero(g_tile == t)
        g = [int(x) for x in mine if skey[x] == off[0]]
        others = {int(g_len[x]) for x in mine if skey[x] != off[0]}
        if len(g) != 1 or len(others) != 1:
            return
        g = g[0]
        want = others.pop()
        a = int(gstart[g])
        b = int(gstart[g + 1]) if g + 1 < gstart.size else int(self.bd_len.size)
        side = f"{'destination' if g_dir[g] else 'source'} {int(g_stream[g])}"
        why = (f"the tile's other streams carry {want} bytes, and over the leg's tiles every "
               f"other stream carries {want_leg} bytes, the leg's num_elements {ne} x {dsize} "
               f"(legs.bin record {leg}), but {side} carries {total[off[0]]}")
        if b - a == 1:
            raise self.fail(f"length should be {want}, not {int(g_len[g])}: {why}", "dma.bin", a,
                            "length")
        odd = self._odd_run(a, b, leg, int(g_len[g]) - want)
        if odd is not None:
            j, row = odd
            was = int(self.bd_len[j]) - (int(g_len[g]) - want)
            raise self.fail(f"length should be {was}, not {int(self.bd_len[j])}: the {b - a} BDs "
                            f"of {side} of the tile (dma.bin records {a}..{b - 1}) carry "
                            f"{int(g_len[g])} bytes, not {want}: {why}; its other BDs are whole "
                            f"rows of {row} bytes (the most common length of the stream's runs "
                            "over the leg) or the two pieces of a row cut at a tile's end, and "
                            f"{was} bytes would make this one so", "dma.bin", j, "length")
        raise self.fail(f"the {b - a} BDs of {side} of the tile (dma.bin records {a}..{b - 1}) "
                        f"carry {int(g_len[g])} bytes, not {want}: {why}; the length of one of "
                        "them is wrong, and nothing else read here tells which", "dma.bin", a,
                        "length")

    def _odd_run(self, a: int, b: int, leg: int, delta: int) -> tuple[int, int] | None:
        """Of BDs [a, b), one stream's runs in one tile (FORMATS §5: an SBUF access pattern's
        rows of dim 0, cut where a tile ends) carrying ``delta`` bytes too many, the one BD
        that is no whole row (the most common length of the stream's runs over the leg) nor
        one of the two pieces of a row cut at a tile's end (contiguous with the stream's
        next or previous run, the two a whole row), and that ``delta`` bytes fewer would
        make one, and the row's length; None unless exactly one BD is such."""
        key = self.bd_dir * 32 + self.bd_stream
        m = np.flatnonzero((self.bd_leg == leg) & (key == key[a]))
        vals, counts = np.unique(self.bd_len[m], return_counts=True)
        row = int(vals[np.argmax(counts)])
        ln = self.bd_len

        def joins(x: int, y: int, lx: int) -> bool:
            return (self.bd_rank[x] == self.bd_rank[y] and self.bd_reg[x] == self.bd_reg[y]
                    and int(self.bd_soff[x]) + lx == int(self.bd_soff[y]))

        def whole(j: int, lj: int) -> bool:
            if lj == row:
                return True
            pos = int(np.searchsorted(m, j))
            nxt = int(m[pos + 1]) if pos + 1 < m.size else None
            prv = int(m[pos - 1]) if pos > 0 else None
            return ((j == b - 1 and nxt is not None and joins(j, nxt, lj)
                     and lj + int(ln[nxt]) == row)
                    or (j == a and prv is not None and joins(prv, j, int(ln[prv]))
                        and int(ln[prv]) + lj == row))
        odd = [j for j in range(a, b) if not whole(j, int(ln[j]))]
        if len(odd) != 1 or not 0 < int(ln[odd[0]]) - delta <= F.BD_MAX_BYTES:
            return None
        return (odd[0], row) if whole(odd[0], int(ln[odd[0]]) - delta) else None

    # ------------------------------------------------------------------ CCE
    def decode_cce(self) -> None:
        C = self.a["cce.bin"]
        L = self.a["legs.bin"]
        art = "cce.bin"
        cnt = L["cce_count"].astype(np.int64)
        red = self.sdma == SDMA_CCE
        want = np.where(red, L["n_tiles"].astype(np.int64) * self.S, 0)
        bad = _first(cnt != want)
        if bad is not None:
            raise self.fail(f"cce_count should be n_tiles x sources = {want[bad]}, not {cnt[bad]}",
                            "legs.bin", bad, "cce_count")
        n = C.size
        self.cce_uniform: dict[int, tuple[int, int, int]] = {}
        if not n:
            return
        leg = np.repeat(np.arange(self.n_legs), cnt)
        within = np.arange(n) - (L["cce_first"].astype(np.int64))[leg]
        S = self.S[leg]
        src = within % S
        tile = self.tile_first_of_leg[leg] + within // S
        w0 = C["w0"].astype(np.int64)
        w1 = C["w1"].astype(np.int64)
        w2 = C["w2"].astype(np.int64)
        w3 = C["w3"].astype(np.int64)
        self.check(w0 != (CCE_W0_META | (src << 24)), lambda i: f"W0 should be "
                   f"{CCE_W0_META | (int(src[i]) << 24):#010x} (meta bit + meta_idx = source "
                   f"{src[i]}), not {w0[i]:#010x}", art, "w0")
        op = w1 & 7
        last = (w1 >> 7) & 1
        in_dt = (w1 >> 8) & 0xF
        out_dt = (w1 >> 12) & 0xF
        acc = (w1 >> 16) & 0xF
        valid = (w1 >> 25) & 1
        self.check(w1 & ~(0x7 | 0x80 | 0xFFF00 | CCE_VALID) != 0, "reserved bits set in W1",
                   art, "w1")
        self.check(valid != 1, "CCE meta-ctrl valid bit (W1[25]) is not set", art, "w1.valid")
        self.check(last != (src == S - 1), "W1 last bit is not set on exactly the last source of "
                   "the tile", art, "w1.last")
        self.check(~np.isin(op, list(CCE_OPS)), lambda i: f"W1 sub-op should be ADD, MAX or "
                   f"MIN, not {cce_op_name(op[i])}", art, "w1.op")
        self.check(~np.isin(in_dt, list(CCE_IO_CODES)), lambda i: f"W1 in_dtype {in_dt[i]:#x} is "
                   "not a CCE-reducible I/O dtype", art, "w1.in_dtype")
        self.check(~np.isin(out_dt, list(CCE_IO_CODES)), lambda i: f"W1 out_dtype {out_dt[i]:#x} "
                   "is not a CCE-reducible I/O dtype", art, "w1.out_dtype")
        self.check(acc != int(DType.FP32R), lambda i: f"W1 accumulate dtype should be 0xb "
                   f"(FORMATS §6 accumulates in FP32R), not {acc[i]:#x}", art, "w1.acc_dtype")
        # the trigger's op (-1: none, an all-gather) and I/O code per entry, then per descriptor
        ent = self.spi[leg]
        trig_op = np.array([-1 if t.cce_op is None else t.cce_op
                            for t in self.entry_trigger], np.int64)[ent]
        trig_io = np.array([t.io_code for t in self.entry_trigger], np.int64)[ent]
        trig = np.array([t.ordinal for t in self.entry_trigger], np.int64)[ent]
        # (against the trigger's own op and data: the error names it)
        self.check(op != trig_op, lambda i: f"W1 sub-op should be "
                   f"{CCE_OPS.get(int(trig_op[i]))}, the trigger's op, not "
                   f"{cce_op_name(op[i])}", art, "w1.op", triggers=trig)
        self.check(in_dt != trig_io, lambda i: f"W1 in_dtype should be {trig_io[i]:#x}, "
                   f"the trigger's data, not {in_dt[i]:#x}", art, "w1.in_dtype", triggers=trig)
        self.check(out_dt != trig_io, lambda i: f"W1 out_dtype should be {trig_io[i]:#x}, "
                   f"the trigger's data, not {out_dt[i]:#x}", art, "w1.out_dtype",
                   triggers=trig)
        lay = self.layout  # the cap of the manifest's platform (FORMATS §6), else any's
        cap = lay.cce_max_elements
        which = (f"platform {lay.platform} (hw_generation {lay.hw_generation}; seed 000 §3.4)"
                 if lay.platform is not None and not lay.platform_derived else
                 f"platform {lay.platform} (hw_generation {lay.hw_generation}, the preset of "
                 f"{lay.option_text()}: the manifest records no platform; seed 000 §3.4)"
                 if lay.platform is not None else
                 "any platform (the manifest records none; seed 000 §3.4)")
        nbytes = w2 & 0xFFFFFF
        isz = _DSIZE_TABLE[in_dt]
        if lay.platform_derived:
            self._refuse_older_tiles(nbytes, isz, cap, which, art)
        self.check(nbytes > cap * isz, lambda i: f"W2 length {nbytes[i]} bytes = "
                   f"{-(-int(nbytes[i]) // int(isz[i]))} elements of {isz[i]} bytes, more "
                   f"than the {cap} elements per CCE descriptor of {which}", art, "w2")
        slen = self.tile_src_len[tile]
        self.check((w2 & 0xFFFFFF) != slen, lambda i: f"W2 length should be {slen[i]}, the bytes "
                   f"source {src[i]} of the tile carries, not {w2[i] & 0xFFFFFF}", art, "w2")
        self.check(w2 >> 24 != 0, "reserved bits set in W2", art, "w2")
        rt = L["reduction_type"].astype(np.int64)[leg]
        self.check((w3 & 0x3F) > MAX_SRC, lambda i: f"W3 num_sources should be at most "
                   f"{MAX_SRC}, not {w3[i] & 0x3F} (FORMATS.md section 6)", art, "w3.num_sources")
        self.check((w3 & 0x3F) != S, lambda i: f"W3 num_sources should be {S[i]}, the tile's "
                   f"source streams, not {w3[i] & 0x3F}", art, "w3.num_sources")
        self.check(((w3 >> 8) & 3) != rt, "W3 reduction_type differs from the leg's", art,
                   "w3.reduction_type")
        self.check(w3 & ~(0x3F | 0x300) != 0, "reserved bits set in W3", art, "w3")
        self.check(slen % isz != 0, "a source stream is not a whole number of in_dtype elements",
                   art, "w2")
        first_of_leg = np.flatnonzero(within == 0)
        for i in first_of_leg:
            self.cce_uniform[int(leg[i])] = (int(op[i]), int(in_dt[i]), int(out_dt[i]))

    def _refuse_older_tiles(self, nbytes: np.ndarray, isz: np.ndarray, cap: int, which: str,
                            art: str) -> None:
        """An output without the platform keys whose ``options.topology`` names a preset of a
        smaller CCE cap than the largest (trn1: 1024) was lowered before 2026-12-01: an
        nrtrewrite before e4fa60a tiled every platform at 2048 elements, one after it (until
        e90911b recorded the platform) at the platform's.  A descriptor over the preset's cap
        but within the largest is such an older tiling: an :class:`OutputError` (status 2, the
        simulation cannot be done) saying to lower the model again, as an older HIER output's
        buffers (triggers._refuse_older_hier_buffers); one over the largest cap is no
        nrtrewrite's, a protocol error (:meth:`decode_cce`)."""
        most = MAX_SDMA_CCE_ELEMENTS
        i = _first((nbytes > cap * isz) & (nbytes <= most * isz))
        if i is not None:
            raise OutputError(f"W2 length {nbytes[i]} bytes = "
                              f"{-(-int(nbytes[i]) // int(isz[i]))} elements of {isz[i]} bytes, "
                              f"more than the {cap} elements per CCE descriptor of {which}; an "
                              f"nrtrewrite before 2026-12-01 tiled every platform at {most}: "
                              "lower the model again",
                              **_where(self.rank, art, i, "w2"))

    # ------------------------------------------------------------------ semaphores
    def decode_sems(self) -> None:
        Sm = self.a["sem.bin"]
        L = self.a["legs.bin"]
        art = "sem.bin"
        n = Sm.size
        ctrl = Sm["ctrl"].astype(np.int64)
        val = Sm["value"].astype(np.int64)
        leg = np.repeat(np.arange(self.n_legs), L["sem_count"].astype(np.int64))
        chan = self.ch[leg] if n else np.zeros(0, np.int64)
        self.check(ctrl & ~(0xFFFF | F.SEM_REMOTE | (F.GEN_MASK << F.GEN_SHIFT)) != 0,
                   "reserved bits set in the semaphore BD ctrl word", art, "ctrl")
        subop = ctrl & F.SEM_SUBOP_MASK
        role = (ctrl >> F.SEM_ROLE_SHIFT) & 0xFF
        remote = (ctrl >> 16) & 1
        gen = (ctrl >> F.GEN_SHIFT) & F.GEN_MASK
        self.check((subop != WAIT) & (subop != INC), lambda i: f"EVT_SEM subop {subop[i]} (only "
                   "20 wait_ge_and_dec and 21 inc are part of the protocol)", art, "ctrl.subop")
        want_gen = (_index_within(chan) // F.BD_RING_ENTRIES) & F.GEN_MASK
        self.check(gen != want_gen, lambda i: f"generation tag should be {want_gen[i]}, "
                   f"not {gen[i]}",
                   art, "ctrl.gen")
        trank, window, sid, err = self.layout.resolve_sema(self.rank, Sm["addr"])
        i = _first(err != 0)
        if i is not None:
            raise self.fail(f"addr {int(Sm['addr'][i]):#x} {ADDRESS_ERRORS[int(err[i])]}", art, i,
                            "addr", channel=int(chan[i]))
        want_win = np.where(subop == WAIT, EVT_SEM_DEC, EVT_SEM_INC)
        self.check(window != want_win, lambda i: f"subop {subop[i]} through the "
                   f"{WINDOW_NAMES.get(int(window[i]))} window (waits use DEC, increments INC)",
                   art, "addr")
        rel = sid - SEM_BASE
        block = (sid >= SEM_BASE) & (sid < SEM_RING_END)
        # a leg touches its own channel's block only, except in a SINGLE_CYCLE_RING entry whose
        # channel pair meets through post_sema (docs/DESIGN.md "Single-cycle ring"): there any
        # channel of the entry
        single = (self.algo_type[self.spi[leg]] == int(EncAlgType.SINGLE_CYCLE_RING)) if n \
            else np.zeros(0, bool)
        ent_ch = self.entry_channels[self.spi[leg]] if n else np.zeros(0, np.int64)
        in_entry = ((ent_ch >> np.clip(rel // 4, 0, 31)) & 1).astype(bool)
        self.check(block & single & ~in_entry, lambda i: f"{sem_name(int(sid[i]))} used by a "
                   f"leg of an entry without channel {rel[i] // 4}", art, "addr")
        self.check(block & ~single & (rel // 4 != chan), lambda i: f"{sem_name(int(sid[i]))} "
                   f"used by a leg of channel {chan[i]}", art, "addr")
        self.check(block & (rel % 4 != role), lambda i: f"role should be {rel[i] % 4}, the role of "
                   f"{sem_name(int(sid[i]))}, its address, not {role[i]}", art, "ctrl.role")
        self.check(~block & (role != ROLE_OTHER), lambda i: f"role {role[i]} for "
                   f"{sem_name(int(sid[i]))}, outside the ring channel block (role 0xFF)", art,
                   "ctrl.role")
        self.check(block & ~single & (role == ROLE_POST), "post_sema is not used by ring legs "
                   "(only a SINGLE_CYCLE_RING channel pair meets through it)", art, "ctrl.role")
        self.check(remote != (trank != self.rank), lambda i: f"remote bit should be "
                   f"{int(trank[i] != self.rank)}, not {remote[i]}: the semaphore is on rank "
                   f"{trank[i]}", art, "ctrl.remote")
        self.check(val <= 0, "a semaphore BD with value 0", art, "value")
        self.sem = (subop, role, trank, sid, val)

    # ------------------------------------------------------------------ tp_inc_steps
    def check_tpinc(self) -> None:
        T = self.a["tpinc.bin"]
        art = "tpinc.bin"
        m2s = np.bincount(self.bd_leg[self.bd_dir == 0], minlength=self.n_legs)
        s2m = np.bincount(self.bd_leg[self.bd_dir == 1], minlength=self.n_legs)
        flags = T["flags"].astype(np.int64)
        rep = T["repeat"].astype(np.int64)
        self.check(flags & ~F.TPINC_LAST_SYNC != 0, "reserved flag bits set", art, "flags")
        if (rep == 0).any():
            # named against the one encoding of the legs where the file has its number of
            # records (until 2026-12-07 'repeat 0' only, the one repeat line without either)
            self._blame_tpinc_record(T, m2s, s2m)
            self.check(rep == 0, "repeat should be 1 to 65535, not 0: a record encodes that "
                       "many consecutive legs (FORMATS §2.2)", art, "repeat")
        if T.size and not flags[-1] & 1:
            raise self.fail("the last record does not have last_sync", art, T.size - 1, "flags")
        gid = np.cumsum(np.append(0, flags[:-1] & 1)) if T.size else np.zeros(0, np.int64)
        n_groups = int(gid[-1]) + 1 if T.size else 0
        n_leg_groups = self.group_first.size
        if n_groups != n_leg_groups:
            # a last_sync bit set or cleared: name the first record whose bit disagrees with
            # where the leg programs end (legs.bin, read before), else the last record
            ends = np.cumsum(np.diff(np.append(self.group_first, self.n_legs)))
            want = np.isin(np.cumsum(rep), ends)
            j = _first((flags & 1 != 0) != want)
            j = T.size - 1 if j is None else j
            g = min(int(np.cumsum(rep)[j]), max(self.n_legs, 1)) - 1  # the run's last leg
            ends_here = (f"the leg program of entry {self.spi[g]} channel {self.ch[g]} ends at "
                         f"legs.bin record {g}, the run's last leg" if bool(want[j]) else
                         f"the run's last leg, legs.bin record {g}, ends no (entry, channel) "
                         "leg program")
            raise self.fail(f"last_sync should be {int(want[j])}, not {flags[j] & 1}: {ends_here} "
                            f"({n_groups} last_sync groups for {n_leg_groups} (entry, channel) "
                            "leg programs)", art, j, "flags")
        sizes = np.bincount(gid, weights=rep, minlength=n_groups).astype(np.int64)
        lsizes = np.diff(np.append(self.group_first, self.n_legs))
        bad = _first(sizes != lsizes)
        if bad is not None:
            self._blame_tpinc_record(T, m2s, s2m)
            recs = np.flatnonzero(gid == bad)
            raise self.fail(f"last_sync group {bad} (records {recs[0]}..{recs[-1]}) expands to "
                            f"{sizes[bad]} legs, entry {self.spi[self.group_first[bad]]} channel "
                            f"{self.ch[self.group_first[bad]]} has {lsizes[bad]}", art,
                            int(recs[-1]), "repeat", channel=int(self.ch[self.group_first[bad]]))
        em = np.repeat(T["m2s"].astype(np.int64), rep)
        es = np.repeat(T["s2m"].astype(np.int64), rep)
        bad = _first((em != m2s) | (es != s2m))
        if bad is not None:
            rec = int(np.repeat(np.arange(T.size), rep)[bad])
            fld = "m2s" if em[bad] != m2s[bad] else "s2m"
            raise self.fail(f"tp_inc_steps say m2s {em[bad]} / s2m {es[bad]} for legs.bin record "
                            f"{bad} (entry {self.spi[bad]}, channel {self.ch[bad]}, step "
                            f"{bad - self.group_first[self.group_of[bad]]}), its BDs are "
                            f"{m2s[bad]} M2S / {s2m[bad]} S2M", art, rec, fld,
                            channel=int(self.ch[bad]))

    def _tpinc_runs(self, m2s: np.ndarray, s2m: np.ndarray) -> tuple[np.ndarray, ...]:
        """The records FORMATS §2.2 makes of the legs' BD counts (its encoding is unique):
        per (entry, channel) leg program, maximal runs of legs with equal (m2s, s2m), split
        at 65535; each record's first leg, m2s, s2m and repeat."""
        n = self.n_legs
        if not n:
            return (np.zeros(0, np.int64),) * 4
        new = np.zeros(n, bool)
        new[self.group_first] = True
        new[1:] |= (m2s[1:] != m2s[:-1]) | (s2m[1:] != s2m[:-1])
        starts = np.flatnonzero(new)
        lens = np.diff(np.append(starts, n))
        # a record per TPINC_MAX_REPEAT legs of a run: run, and the record's place in it
        run, within, _ = expand((lens + TPINC_MAX_REPEAT - 1) // TPINC_MAX_REPEAT)
        rs = starts[run] + TPINC_MAX_REPEAT * within
        rl = np.minimum(lens[run] - TPINC_MAX_REPEAT * within, TPINC_MAX_REPEAT)
        return rs, m2s[rs].astype(np.int64), s2m[rs].astype(np.int64), rl

    def _blame_tpinc_record(self, T: np.ndarray, m2s: np.ndarray, s2m: np.ndarray) -> None:
        """Where tpinc.bin disagrees with the legs' BD counts, name the first record that
        differs from the one encoding of them (FORMATS §2.2), and its field: a changed
        ``repeat`` there, not the group's last record (until 2026-12-07). Returns when the
        file has another number of records, or differs only in ``flags``: the caller's line
        stands."""
        first, want_m, want_s, want_r = self._tpinc_runs(m2s, s2m)
        if first.size != T.size:
            return
        got = {"m2s": T["m2s"].astype(np.int64), "s2m": T["s2m"].astype(np.int64),
               "repeat": T["repeat"].astype(np.int64)}
        want = {"m2s": want_m, "s2m": want_s, "repeat": want_r}
        j = _first((got["m2s"] != want_m) | (got["s2m"] != want_s) | (got["repeat"] != want_r))
        if j is None:
            return
        fld = next(f for f in ("m2s", "s2m", "repeat") if got[f][j] != want[f][j])
        a = int(first[j])
        b = a + int(want_r[j]) - 1
        raise self.fail(f"{fld} should be {want[fld][j]}, not {got[fld][j]}: legs.bin records "
                        f"{a}..{b} of entry {self.spi[a]} channel {self.ch[a]} have {want_m[j]} "
                        f"M2S / {want_s[j]} S2M BDs each, and the records before this one "
                        "encode the legs before them (FORMATS §2.2: maximal runs, one encoding)",
                        "tpinc.bin", j, fld, channel=int(self.ch[a]))

    # ------------------------------------------------------------------ 0xBF words
    def check_sb2sb(self) -> None:
        W = self.a["sb2sb.bin"]
        L = self.a["legs.bin"]
        art = "sb2sb.bin"
        n = W.size
        E = L["num_elements"].astype(np.int64)
        data = self.sdma != SDMA_NONE
        full = E // 65536
        q = (E // 256) % 256
        r = E % 256
        want = np.where(data, full + (q > 0) + (r > 0), 0)
        bad = _first(L["sb2sb_count"].astype(np.int64) != want)
        if bad is not None:
            raise self.fail(f"sb2sb_count {L['sb2sb_count'][bad]}, {E[bad]} elements make "
                            f"{want[bad]} pieces", "legs.bin", bad, "sb2sb_count")
        if not n:
            return
        raw = self.rf.raw(art)
        self.check(W["opcode"] != 0xBF, "opcode is not 0xBF", art, "opcode")
        self.check(W["inst_word_len"] != 16, "inst_word_len is not 16", art, "inst_word_len")
        self._check_zero_fields(W, raw, SB2SB_ZERO_FIELDS, art)
        leg = np.repeat(np.arange(self.n_legs), L["sb2sb_count"].astype(np.int64))
        k = np.arange(n) - L["sb2sb_first"].astype(np.int64)[leg]
        trig = [self.entry_trigger[int(self.spi[g])] for g in leg]
        io = np.array([t.io_code for t in trig], np.int64)
        bad = _first((W["in_dtype"] != io) | (W["out_dtype"] != io))
        if bad is not None:  # the first of the two by offset that is off
            fld = "in_dtype" if W["in_dtype"][bad] != io[bad] else "out_dtype"
            raise self.fail(f"in/out dtype {W['in_dtype'][bad]:#x}/{W['out_dtype'][bad]:#x}, "
                            f"the trigger moves {io[bad]:#x}", art, bad, fld)
        lnc = LNC_SIZE_FMT.get(self.layout.lnc_size, 0)
        self.check(W["lnc_size_fmt"] != lnc, f"lnc_size_fmt is not {lnc} (LNC{self.layout.lnc_size})",
                   art, "lnc_size_fmt")
        nact = self.entry_nch[self.spi[leg]]
        self.check(W["num_active_channels"] != nact, lambda i: f"num_active_channels should "
                   f"be {nact[i]}, the entry's channels, not {W['num_active_channels'][i]}", art,
                   "num_active_channels")
        kind = np.where(k < full[leg], 0, np.where((k == full[leg]) & (q[leg] > 0), 1, 2))
        n0 = np.where(kind == 2, r[leg], 256)
        n1 = np.where(kind == 0, 256, np.where(kind == 1, q[leg], 1))
        for part in ("src", "dst"):
            t3 = W[part]
            self.check((t3["step_elem"][:, 0] != 1) | (t3["step_elem"][:, 1] != 256)
                       | (t3["step_elem"][:, 2] != 0), f"{part}.step_elem is not (1, 256, 0)", art,
                       f"{part}.step_elem")
            self.check((t3["num_elem"][:, 0] != n0) | (t3["num_elem"][:, 1] != n1)
                       | (t3["num_elem"][:, 2] != 1), lambda i, t3=t3, part=part:
                       f"{part}.num_elem should be [{n0[i]}, {n1[i]}, 1] for piece {k[i]} of "
                       f"{E[leg[i]]} elements, not {t3['num_elem'][i].tolist()}", art,
                       f"{part}.num_elem")
        self.sb_leg, self.sb_k = leg, k
        self._check_events()
        self._check_pieces()

    def _check_zero_fields(self, recs: np.ndarray, raw: np.ndarray, fields: tuple[str, ...],
                           art: str) -> None:
        """Raise for the first record with a non-zero byte in one of ``fields`` (the fields
        FORMATS fixes at 0), naming the first such field by offset, with its value."""
        spans = [(recs.dtype.fields[fld][1], recs.dtype[fld].itemsize) for fld in fields]
        nonzero = np.stack([raw[:, off:off + size].any(axis=1) for off, size in spans], axis=1)
        i = _first(nonzero.any(axis=1))
        if i is not None:
            fld = fields[int(np.argmax(nonzero[i]))]
            raise self.fail(f"{fld} should be {zero_shown(recs[fld][i])}", art, i, fld)

    def _check_events(self) -> None:
        """wait/update fields of the 0xBF pieces against the leg's (checked) semaphore BDs."""
        W = self.a["sb2sb.bin"]
        L = self.a["legs.bin"]
        leg, k = self.sb_leg, self.sb_k
        c = self.ch[leg]
        first = k == 0
        last = k == L["sb2sb_count"].astype(np.int64)[leg] - 1
        fw = self.first_wait[leg]
        waits = (fw >= 0) & first
        _subop, _role, _trank, sid, val = self.sem
        fwc = np.maximum(fw, 0)
        want = (np.where(waits, WAIT, 0), np.where(waits, sid[fwc] if sid.size else 0, 0),
                np.where(waits, val[fwc] if val.size else 0, 0), np.where(last, INC, 0),
                np.where(last, SEM_BASE + 4 * c + ROLE_COMPL, 0))
        names = ("wait_mode", "wait_idx", "semaphore_value", "update_mode", "update_idx")
        # a mesh or RDH leg's event wait is held to nothing on its rank alone (FORMATS §7
        # leaves its count and event to the schedule): where the word's wait_idx or
        # semaphore_value disagrees with it, which of the two is right is told once every
        # rank is decoded, by the increments the entry's legs make of the semaphore
        # (resolve_event_holds; review 57i: until 2026-12-07 the word was named, with the
        # changed sem.bin value given as the right one)
        ev = waits & np.isin(self.leaf[leg], list(EVENT_LEAVES)) & (
            (sid[fwc] if sid.size else np.zeros(leg.size, np.int64)) >= SEM_EVENT_BASE)
        # a SINGLE_CYCLE_RING ring leg's waits are each by 1 (FORMATS §4's row, §7): a word
        # carrying 1 where the leg's first sem.bin wait says otherwise is right, and the
        # sem.bin record is named (review 57o: the untouched word was)
        scr = (self.algo_type[self.spi[leg]] == int(EncAlgType.SINGLE_CYCLE_RING)) \
            & np.isin(self.leaf[leg], list(RING_LEAVES)) & waits
        j = _first(scr & (W["semaphore_value"].astype(np.int64) == 1) & (want[2] != 1))
        if j is not None:
            raise self.fail(f"wait value should be 1, not {want[2][j]}: a SINGLE_CYCLE_RING "
                            f"{LEAF_NAMES[int(self.leaf[leg[j]])]} leg's waits are by 1, as its "
                            f"0xBF word (sb2sb.bin record {j}) carries (FORMATS §4, §7; legs.bin "
                            f"record {leg[j]})", "sem.bin", int(fw[j]), "value")
        # and its first wait is its own channel's recv_sema or post_sema (FORMATS §4's row,
        # §7): a word naming one of those where the first sem.bin wait is on another
        # channel's semaphore is right, and the sem.bin record's addr is named (review 58n:
        # the untouched word's wait_idx was)
        widx = W["wait_idx"].astype(np.int64)
        own = SEM_BASE + 4 * c
        word_own = (widx == own + ROLE_RECV) | (widx == own + ROLE_POST)
        sem_own = (want[1] == own + ROLE_RECV) | (want[1] == own + ROLE_POST)
        j = _first(scr & word_own & ~sem_own)
        if j is not None:
            raise self.fail(f"wait of {sem_name(int(want[1][j]))}: a SINGLE_CYCLE_RING "
                            f"{LEAF_NAMES[int(self.leaf[leg[j]])]} leg of channel {c[j]} first "
                            f"waits its own channel's {sem_name(int(widx[j]))}, as its 0xBF word "
                            f"(sb2sb.bin record {j}) carries (FORMATS §4, §7; legs.bin record "
                            f"{leg[j]})", "sem.bin", int(fw[j]), "addr")
        # both changed alike, the word and the leg's first sem.bin wait agreeing with each
        # other but not with FORMATS §4's row: the wiring still tells (each wait by 1, the
        # first on the leg's own channel: its recv_sema, or post_sema on a leaf that consumes
        # nothing), and the word is named with both, as a mesh leg's two changed records are
        # (since 2026-12-07, fixer 59b: the run deadlocked, `work remains but nothing can run`)
        wval = W["semaphore_value"].astype(np.int64)
        j = _first(scr & (wval != 1) & (want[2] == wval))
        if j is not None:
            raise self.fail(f"semaphore_value should be 1, not {wval[j]}: a SINGLE_CYCLE_RING "
                            f"{LEAF_NAMES[int(self.leaf[leg[j]])]} leg's waits are by 1 (FORMATS "
                            f"§4, §7; legs.bin record {leg[j]}), and its first wait (sem.bin "
                            f"record {fw[j]}) is by {wval[j]} too", "sb2sb.bin", j,
                            "semaphore_value")
        j = _first(scr & ~word_own & ~sem_own & (widx == want[1]))
        if j is not None:
            lf_j = int(self.leaf[leg[j]])
            right = int(own[j]) + (ROLE_RECV if lf_j in CONSUMING else ROLE_POST)
            raise self.fail(f"wait_idx should be {right}, not {widx[j]}: a SINGLE_CYCLE_RING "
                            f"{LEAF_NAMES[lf_j]} leg of channel {c[j]} first waits its own "
                            f"channel's {sem_name(right)} (FORMATS §4, §7; legs.bin record "
                            f"{leg[j]}), and its first wait (sem.bin record {fw[j]}) is on "
                            f"{sem_name(int(widx[j]))} too", "sb2sb.bin", j, "wait_idx")
        for fld, w in zip(names, want):
            got = W[fld].astype(np.int64)
            bad = got != w
            if fld in ("wait_idx", "semaphore_value") and self.event_hold is None:
                i = _first(bad & ev & (W["wait_mode"].astype(np.int64) == WAIT))
                if i is not None and _first(bad & ~ev) is None:
                    self.event_hold = self._event_hold(i, fld, int(got[i]), int(w[i]),
                                                       int(leg[i]), int(fw[i]), int(k[i]))
            if self.event_hold is not None and fld in ("wait_idx", "semaphore_value"):
                bad = bad & ~ev
            self.check(bad, lambda i, got=got, w=w, fld=fld: f"{fld} should be "
                       f"{w[i]}, not {got[i]} (piece {k[i]} of a "
                       f"{LEAF_NAMES[int(self.leaf[leg[i]])]} leg: the first piece carries the "
                       "leg's (first) wait, the last its dma_compl_sema increment)",
                       "sb2sb.bin", fld)

    def _event_hold(self, i: int, fld: str, got: int, want: int, g: int, j: int,
                    piece: int) -> "EventHold":
        """The disagreement of 0xBF word ``i`` (field ``fld``: ``got``, where the leg's first
        wait, sem.bin record ``j``, says ``want``) held for :func:`resolve_event_holds`."""
        W = self.a["sb2sb.bin"]
        _subop, _role, _trank, sid, val = self.sem
        err = self.fail(f"{fld} should be {want}, not {got} (piece {piece} of a "
                        f"{LEAF_NAMES[int(self.leaf[g])]} leg: the first piece carries the "
                        "leg's (first) wait, the last its dma_compl_sema increment)",
                        "sb2sb.bin", i, fld)
        net = set()
        ops = self.a.get("net_ops.bin")
        if ops is not None and ops.size:
            for col in ("inc_recv_complete", "inc_recv_handshake"):
                tr, _win, s_, _err = self.layout.resolve_sema(self.rank, ops[col])
                net.update(int(x) for x in s_[tr == self.rank].tolist())
        e = int(self.spi[g])
        return EventHold(rank=self.rank, trigger=int(self.entry_trigger[e].ordinal),
                         leg_name=self.entry_leg[e], leg=g, word=i, bd=j,
                         bd_sid=int(sid[j]), bd_val=int(val[j]),
                         word_sid=int(W["wait_idx"][i]), word_val=int(W["semaphore_value"][i]),
                         leaf=LEAF_NAMES[int(self.leaf[g])], net_sids=frozenset(net),
                         word_error=err)

    def _check_pieces(self) -> None:
        """TENSOR3D start_addr of every piece against the first source / destination stream."""
        W = self.a["sb2sb.bin"]
        L = self.a["legs.bin"]
        leg, k = self.sb_leg, self.sb_k
        if not leg.size:
            return
        E = L["num_elements"].astype(np.int64)[leg]
        full = E // 65536
        q = (E // 256) % 256
        r = E % 256
        p_off = np.where(k < full, k * 65536, np.where((k == full) & (q > 0), full * 65536, E - r))
        elem = L["elem_start"].astype(np.int64)[leg] + p_off
        dsize = self.leg_dsize[leg]
        R = self.runs
        groups = self._entry_groups(self.spi[leg])
        parts = []
        sb_parts = []
        for d, part in ((0, "src"), (1, "dst")):
            start = np.searchsorted(R["gkey"], leg * 64 + d * 32, side="left")
            gid = R["gid"][start]
            idx = np.searchsorted(R["key2"], gid * (1 << 40) + p_off * dsize, side="right") - 1
            soff = R["off"][idx] + (p_off * dsize - R["pos"][idx])
            reg = R["reg"][idx]
            trank = R["rank"][idx]
            kinds = np.array([self.layout.region(int(x)).kind == "sbuf" for x in
                              range(len(self.layout.regions))], bool)
            rsize = np.array([max(x.size, 1) for x in self.layout.regions], np.int64)
            roff = np.array([x.offset for x in self.layout.regions], np.int64)
            sb = kinds[reg]
            want = np.where(sb, (soff // rsize[reg]) * self.layout.stride + roff[reg]
                            + soff % rsize[reg], elem * dsize)
            got = W[part]["start_addr"].astype(np.int64)
            ring = np.isin(self.leaf[leg], list(HALF_LEAVES))
            # mesh / RDH legs stream scratch and gateway through views that start at a block
            # (a channel-buffer slot, an RH slot, a gateway copy): their start_addr is the
            # element's offset from the view's first element, checked below; everything else
            # (operands, SBUF, the ring family's buffers) is measured from element 0
            view = ~ring & ~sb & np.isin(reg, self._view_regions())
            addr = DRAM_BASE + roff[reg] + soff
            parts.append((d, part, reg, trank, sb, want, got, view, addr))
            sb_parts.append((d, part, reg, trank, sb & (got == want), soff))
        # an SBUF piece whose word and BD agree puts the leg's element where its operand holds
        # it (else elem_start moved: named before a DRAM view of the same leg is measured by it)
        self._check_sbuf_elements(sb_parts, leg, elem, p_off, dsize)
        # a leg's elem_start is borne out by any word of its pieces (either stream) measured
        # from element 0 that agrees with it
        held = np.zeros(L.size, bool)
        for d, part, reg, trank, sb, want, got, view, addr in parts:
            held[leg[~view & ~sb & (got == want)]] = True
        for d, part, reg, trank, sb, want, got, view, addr in parts:
            at_elem = self._anchored(groups, sb, reg, addr, trank, elem, dsize)
            # a DRAM piece: its BD is a third witness. A BD that does not put the leg's
            # element where its buffer holds it, on a leg another word bears out, is what
            # changed (its address decided the region the word is measured in: a scratch
            # view, or element 0 of a buffer): left to the BD check below, which names it
            got = np.where(~view & ~sb & (got != want) & held[leg] & ~at_elem, want, got)
            i = _first(~view & ~sb & (got != want))
            word_elem = got // dsize
            if i is not None and got[i] % dsize[i] == 0 and self._anchored(
                    groups, sb, reg, addr, trank, word_elem, dsize)[i] and not at_elem[i]:
                # where the BD puts the element the word names, and not the leg's, the leg's
                # elem_start is what changed
                g = int(leg[i])
                es = int(L["elem_start"][g])
                raise self.fail(
                    f"elem_start should be {es + int(word_elem[i] - elem[i])}, not {es}: "
                    f"the leg's piece at sb2sb.bin record {i} ({part}.start_addr "
                    f"{got[i]:#x}) and the BD that moves it (dma.bin record "
                    f"{self._bd_at(g, d, int(p_off[i] * dsize[i]))}) both put its first "
                    f"element at {int(word_elem[i])}, not {int(elem[i])}", "legs.bin", g,
                    "elem_start", channel=int(self.ch[g]))
            self.check(~view & (got != want), lambda i, got=got, want=want, part=part:
                       f"{part}.start_addr {got[i]:#x}, the piece's first element "
                       f"{elem[i]} is at {want[i]:#x} of its buffer", "sb2sb.bin",
                       f"{part}.start_addr")
            # a DRAM stream: the BD address of that element is where the op's buffer holds it
            if view.any():
                self._check_view_pieces(part, view, leg, elem, dsize, got, addr, reg, groups)
            ok = view | at_elem
            # the word's start_addr was held to the leg's elem_start above; the address is
            # the BD's: name the dma.bin BD that holds the piece's first element
            i = _first(~ok)
            if i is not None:
                g = int(leg[i])
                k = self._bd_at(g, d, int(p_off[i] * dsize[i]))
                raise self.fail(
                    f"buf_ptr {int(self.a['dma.bin']['buf_ptr'][k]):#x}: this BD of the "
                    f"{LEAF_NAMES[int(self.leaf[g])]} leg (legs.bin record {g}) puts element "
                    f"{elem[i]}, the first of sb2sb.bin record {i}'s piece ({part}), at "
                    f"{int(addr[i]):#x} in {json_text(self.layout.region(int(reg[i])).name)}, "
                    "not where that element of the op's buffers lives", "dma.bin", k, "buf_ptr",
                    channel=int(self.ch[g]))

    def _check_sbuf_elements(self, sb_parts, leg, elem, p_off, dsize) -> None:
        """An SBUF piece's first byte, where its word's start_addr and its BD agree (``sb`` of
        ``sb_parts``; a word that does not is named by the caller), is where the op's operand
        on that rank holds the piece's element, the leg's ``elem_start`` plus the piece's
        offset (an all-gather's src and a reduce-scatter's dst hold the rank's block: element e
        is the operand's e - origin, as ``_anchors``).  Two records agree on the place, so what
        moved is ``elem_start``: named, with the element that place holds when there is one
        (FORMATS §3, docs/SIMULATOR.md §2)."""
        L = self.a["legs.bin"]
        ent_trig = np.array([t.ordinal for t in self.entry_trigger], np.int64)
        for d, part, reg, trank, sb, soff in sb_parts:
            idx = np.nonzero(sb)[0]
            if not idx.size:
                continue
            ok = np.zeros(idx.size, bool)
            trig = ent_trig[self.spi[leg[idx]]]
            for o in np.unique(trig):
                m = np.nonzero(trig == o)[0]
                t = self.triggers[int(o)]
                gpos = {r: i for i, r in enumerate(t.group)}
                ranks, at = np.unique(trank[idx[m]], return_inverse=True)  # (a few ranks)
                pos = np.array([gpos.get(int(x), 0) for x in ranks], np.int64)[at]
                for which, fp in zip(("src", "dst"), self._sbuf_footprints(t)):
                    if fp is None:
                        continue
                    e = elem[idx[m]] - _operand_origin(t, which, pos)
                    inside = (e >= 0) & (e < fp.count)
                    at = fp.offsets[np.clip(e, 0, max(fp.count - 1, 0))]
                    ok[m] |= (reg[idx[m]] == fp.region.index) & inside & (at == soff[idx[m]])
            j = _first(~ok)
            if j is None:
                continue
            i = int(idx[j])
            g = int(leg[i])
            es = int(L["elem_start"][g])
            t = self.entry_trigger[int(self.spi[g])]
            held = None
            for which, fp in zip(("src", "dst"), self._sbuf_footprints(t)):
                if fp is None or fp.region.index != int(reg[i]):
                    continue
                hit = np.nonzero(fp.offsets == soff[i])[0]
                if hit.size:
                    gpos = {r: n for n, r in enumerate(t.group)}
                    p = gpos.get(int(trank[i]), 0)
                    held = int(hit[0]) + _operand_origin(t, which, p) - int(p_off[i])
                    break
            word = (f"the leg's piece at sb2sb.bin record {i} ({part}.start_addr "
                    f"{int(self.a['sb2sb.bin'][part]['start_addr'][i]):#x}) and the BD that moves "
                    f"it (dma.bin record {self._bd_at(g, d, int(p_off[i] * dsize[i]))})")
            if held is not None and held >= 0:
                why = (f"elem_start should be {held}, not {es}: {word} both put its first "
                       f"element at the place of element {held + int(p_off[i])} of the op's SBUF "
                       f"operand, not of {int(elem[i])}")
            else:
                why = (f"elem_start {es} is not borne out: {word} both put its first element "
                       f"at no place of the op's SBUF operand that a leg's element "
                       f"{int(p_off[i])} can be at, not where element {int(elem[i])} is")
            raise self.fail(why, "legs.bin", g, "elem_start", channel=int(self.ch[g]))

    def _sbuf_footprints(self, t: TriggerSpec):
        """(src, dst) footprints of ``t``'s SBUF operands (None for a DRAM one), cached."""
        cache = self.__dict__.setdefault("_sbuf_fp", {})
        if t.ordinal not in cache:
            fps = t.footprints(self.layout)
            cache[t.ordinal] = tuple(fp if fp.offsets is not None else None for fp in fps)
        return cache[t.ordinal]

    def _anchored(self, groups, sb, reg, addr, trank, elem, dsize) -> np.ndarray:
        """Per piece: SBUF, or its BD address ``addr`` is where one of the buffers a leg of
        its trigger may stream holds element ``elem``."""
        ok = sb.copy()
        for e, idx in groups:
            m = idx[~sb[idx]]
            if not m.size:
                continue
            for anchor_reg, base in self._anchors(self.entry_trigger[e], trank[m]):
                ok[m] |= (reg[m] == anchor_reg) & (addr[m] == base + elem[m] * dsize[m])
        return ok

    def _bd_at(self, g: int, d: int, byte: int) -> int:
        """The dma.bin record of leg ``g``'s first stream in direction ``d`` (0 M2S, 1 S2M)
        whose bytes hold the stream's byte ``byte`` (its BDs in dma.bin order)."""
        bds = np.flatnonzero((self.bd_leg == g) & (self.bd_dir == d) & (self.bd_stream == 0))
        ends = np.cumsum(self.bd_len[bds])
        return int(bds[min(int(np.searchsorted(ends, byte, side="right")), bds.size - 1)])

    def _entry_groups(self, ent: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(entry, ascending indices of ``ent`` equal to it) of every SPAD entry that occurs
        in ``ent``, in entry order: one sort, so a check per entry costs its own pieces, not
        all of them (until 2026-12-06 each entry built a mask over every piece of the rank,
        entries x pieces: quadratic in the triggers, docs/SIMULATOR.md §9)."""
        order = np.argsort(ent, kind="stable")
        srt = ent[order]
        cut = np.flatnonzero(srt[1:] != srt[:-1]) + 1
        lo = np.concatenate(([0], cut)).tolist()
        hi = np.concatenate((cut, [srt.size])).tolist()
        n = len(self.entry_trigger)
        return [(int(srt[a]), order[a:b]) for a, b in zip(lo, hi)
                if srt.size and 0 <= int(srt[a]) < n]

    def _view_regions(self) -> list[int]:
        return [r.index for r in (self.layout.named("scratch"), self.layout.named("gw"))
                if r is not None]

    def _check_view_pieces(self, part: str, view: np.ndarray, leg: np.ndarray, elem: np.ndarray,
                           dsize: np.ndarray, got: np.ndarray, addr: np.ndarray,
                           reg: np.ndarray, groups: list) -> None:
        """start_addr of a mesh / RDH piece in a scratch or gateway view: a whole number of
        elements, its view's first element (the piece's element minus that count) one the
        trigger's blocks allow, the view inside the region and the same for every piece of
        the leg's stream."""
        origin = elem - got // dsize
        allowed = np.zeros(leg.size, bool)
        for e, idx in groups:  # (:meth:`_entry_groups`)
            m = idx[view[idx]]
            if m.size:
                allowed[m] = np.isin(origin[m], list(self.entry_trigger[e].view_origins))
        roff = np.array([x.offset for x in self.layout.regions], np.int64)
        vbase = addr - got  # address of the view's first element
        what = f"{part}.start_addr"

        def why(i, extra):
            return (f"{what} {got[i]:#x} of the piece at element {elem[i]} "
                    f"({int(addr[i]):#x} in {json_text(self.layout.region(int(reg[i])).name)}): "
                    f"{extra}")
        self.check(view & (got % dsize != 0), lambda i: why(i, "not a whole number of "
                   f"{dsize[i]}-byte elements"), "sb2sb.bin", what)
        self.check(view & ((origin < 0) | ~allowed), lambda i: why(i, f"its view should start at "
                   f"the start of a block of the trigger, not at element {origin[i]}"),
                   "sb2sb.bin", what)
        self.check(view & (vbase < DRAM_BASE + roff[reg]), lambda i: why(i, "its view would "
                   "start before the region"), "sb2sb.bin", what)
        # every piece of a leg's stream is in the leg's one view
        prev = np.zeros(leg.size, bool)
        prev[1:] = view[1:] & view[:-1] & (leg[1:] == leg[:-1])
        moved = np.zeros(leg.size, bool)
        moved[1:] = (vbase[1:] != vbase[:-1]) | (origin[1:] != origin[:-1])
        self.check(prev & moved, lambda i: why(i, f"its view starts at element {origin[i]} "
                   f"({int(vbase[i]):#x}), the leg's previous piece's at element "
                   f"{origin[i - 1]} ({int(vbase[i - 1]):#x})"), "sb2sb.bin", what)

    def _anchors(self, t: TriggerSpec, trank: np.ndarray):
        """(region, address of element 0) of every DRAM buffer a leg of ``t`` may stream."""
        out = []
        for kind in ("scratch", "gw"):
            reg = self.layout.named(kind)
            if reg is not None:
                out.append((reg.index, np.full(trank.size, DRAM_BASE + reg.offset, np.int64)))
        for kind, off in t.leg_buffers():  # a leg's own buffers inside scratch / gw
            reg = self.layout.named(kind)
            if reg is not None:
                out.append((reg.index, np.full(trank.size, DRAM_BASE + reg.offset + off,
                                               np.int64)))
        gpos = {r: i for i, r in enumerate(t.group)}
        pos = np.array([gpos.get(int(x), 0) for x in trank], np.int64)
        for which, opnd in (("src", t.src), ("dst", t.dst)):
            if opnd.get("ap") is not None:
                continue
            try:
                reg = self.layout.var_region(t.subgraph, int(opnd["var_id"]))
            except SimulationError as exc:  # (named as the trigger's operand checks name it)
                raise exc.at(**t.operand_where(which, "var_id")) from None
            out.append((reg.index, DRAM_BASE + reg.offset + int(opnd["offset"])
                        - _operand_origin(t, which, pos) * t.dsize))
        return out

    # ------------------------------------------------------------------ protocol (FORMATS §7)
    #: a SINGLE_CYCLE_RING ring leaf's semaphore BD kinds in FORMATS §7's order (waits,
    #: recv_sema then post_sema; the dma_compl_sema increment; the channel's next's
    #: recv_sema or its own send_sema; its own post_sema of the pair's other channel), and
    #: the leaves that have each (docs/DESIGN.md "Single-cycle ring": the root's CW combine
    #: waits both and posts, its CCW direct_copy_send waits post_sema, its CCW direct_recv
    #: and a two-rank root's recv_reduce_copy post)
    _SCR_KINDS = (("a wait recv_sema >= 1", frozenset(CONSUMING)),
                  ("a wait post_sema >= 1", frozenset({4, 5})),
                  ("an increment of its own dma_compl_sema by 1", frozenset(RING_LEAVES)),
                  ("an increment of the next's recv_sema or its own send_sema by 1",
                   frozenset(SENDING)),
                  ("an increment of its post_sema of the pair's other channel by 1",
                   frozenset({3, 4, 7})))
    #: the leaves that always have each kind (a direct_recv posts only at the root, CCW)
    _SCR_REQUIRED = (frozenset(CONSUMING), frozenset({4, 5}), frozenset(RING_LEAVES),
                     frozenset(SENDING), frozenset({3, 4}))

    @staticmethod
    def _scr_kind(wait, local, b_role) -> np.ndarray:
        """Each semaphore BD's place in ``_SCR_KINDS`` (-1: none of them)."""
        kind = np.full(wait.size, -1, np.int64)
        kind[wait & local & (b_role == ROLE_RECV)] = 0
        kind[wait & local & (b_role == ROLE_POST)] = 1
        kind[~wait & local & (b_role == ROLE_COMPL)] = 2
        kind[(~wait & ~local & (b_role == ROLE_RECV)) | (~wait & local & (b_role == ROLE_SEND))] = 3
        kind[~wait & local & (b_role == ROLE_POST)] = 4
        return kind

    def _check_single_cycle_copies(self, leg, scr, wait, local, b_role, val) -> None:
        """A SINGLE_CYCLE_RING ring leaf's BD overwritten by a copy of another of its leg's
        BDs (its sem_count unchanged; the emitter writes no BD twice in a leg): of the two
        equal BDs, the one standing where FORMATS §7's order puts a kind the leg lacks is
        named, at its addr, with that kind, where only one of the two places fits one
        (until 2026-12-07, fixer 58c: legs.bin sem_count, the 0xBF word or a BD after it
        was named; RING legs named the BD). A leg with a third wait is left to that check,
        and a dma_compl_sema increment gained or lost where the rank still has one a leg (a
        BD moved between two legs) to the counts' check."""
        subop, _role, trank, sid, _val = self.sem
        n = leg.size
        if n < 2 or not scr.any():
            return
        kind = self._scr_kind(wait, local, b_role)
        moved = int((kind == 2).sum()) == int((self.leaf != MARK_END).sum())
        same = np.zeros(n, bool)
        for d in range(1, 5):  # a BD equal to one up to 4 places before it in its leg
            same[d:] |= ((leg[d:] == leg[:-d]) & (subop[d:] == subop[:-d])
                         & (trank[d:] == trank[:-d]) & (sid[d:] == sid[:-d])
                         & (val[d:] == val[:-d]))
        for g in np.unique(leg[same & scr]).tolist():
            idx = np.flatnonzero(leg == g)
            seq = kind[idx]
            if (seq < 0).any() or int((wait[idx] & local[idx]).sum()) > 2:
                continue
            lf = int(self.leaf[g])
            fits = []
            for pos in range(idx.size):
                twins = [q for q in range(idx.size) if q != pos and
                         (subop[idx[q]], trank[idx[q]], sid[idx[q]], val[idx[q]])
                         == (subop[idx[pos]], trank[idx[pos]], sid[idx[pos]], val[idx[pos]])]
                if not twins:
                    continue
                lo = seq[pos - 1] if pos else -1
                hi = seq[pos + 1] if pos + 1 < idx.size else len(self._SCR_KINDS)
                rest = set(np.delete(seq, pos).tolist())
                miss = [k for k in range(lo + 1, hi) if k not in rest
                        and lf in self._SCR_KINDS[k][1]]
                if miss:
                    fits.append((pos, twins[0], miss))
            # where both places fit a kind, the one a kind the leaf always has fits
            must = [(pos, twin, [k for k in miss if lf in self._SCR_REQUIRED[k]])
                    for pos, twin, miss in fits]
            must = [f for f in must if f[2]]
            if len(must) == 1 and len(must[0][2]) == 1:
                fits = must
            if len(fits) != 1 or len(fits[0][2]) != 1:
                continue
            pos, twin, (k,) = fits[0]
            if 2 in (k, int(seq[pos])) and moved:
                # as many dma_compl_sema increments on the rank as its legs have: a BD moved
                # between two legs, which the counts below name (not a copy within the leg)
                continue
            raise self.fail(
                f"a copy of sem.bin record {int(idx[twin])} ({self._SCR_KINDS[seq[pos]][0]}): "
                f"a SINGLE_CYCLE_RING {LEAF_NAMES[lf]} leg (legs.bin record {g}) has each of "
                f"its BDs once, in FORMATS §7's order, and lacks {self._SCR_KINDS[k][0]} here",
                "sem.bin", int(idx[pos]), "addr")

    def check_protocol(self) -> None:
        """FORMATS §7 over sem.bin, vectorised: every leg but mark_end increments its own
        dma_compl_sema by 1 once; mark_end only waits for the other legs; ring leaves wait and
        signal exactly as the ring protocol says; other leaves wait on their own core only
        (what they increment is checked by the run)."""
        L = self.a["legs.bin"]
        subop, role, trank, sid, val = self.sem
        me = self.rank
        n = subop.size
        leg = np.repeat(np.arange(self.n_legs), L["sem_count"].astype(np.int64))
        c = self.ch[leg] if n else np.zeros(0, np.int64)
        lf_s = self.leaf[leg] if n else np.zeros(0, np.int64)
        recv, send, compl = (SEM_BASE + 4 * c + ROLE_RECV, SEM_BASE + 4 * c + ROLE_SEND,
                             SEM_BASE + 4 * c + ROLE_COMPL)
        local = trank == me
        wait = subop == WAIT
        ring_s = np.isin(lf_s, list(RING_LEAVES)) & (self.ring_entry[self.spi[leg]] if n
                                                      else np.zeros(0, bool))

        def kinds(one: np.ndarray) -> tuple[np.ndarray, ...]:
            """The ring protocol's BDs (FORMATS §7), ``one`` where the value is its 1."""
            return (wait & local & (sid == recv) & one, wait & local & (sid == compl),
                    ~wait & local & (sid == compl) & one, ~wait & ~local & (sid == recv) & one,
                    ~wait & local & (sid == send) & one)

        # the other leaves, by what FORMATS §3.2 - §3.4 and §7 give them (the values FORMATS
        # fixes are checked below; wait counts are left to the run: a wrong one deadlocks or
        # leaves a semaphore non-zero)
        at_s = self.algo_type[self.spi[leg]] if n else np.zeros(0, np.int64)
        rel = sid - SEM_BASE
        block = (rel >= 0) & (sid < SEM_RING_END)
        b_role = np.where(block, rel % 4, -1)
        peer_own = sid == SEM_PEER_BASE + c  # kring_peer_semas.mine of the leg's channel
        event = sid >= SEM_EVENT_BASE
        kanga = at_s == int(EncAlgType.KANGARING)
        single = at_s == int(EncAlgType.SINGLE_CYCLE_RING)

        def known_of(one: np.ndarray) -> np.ndarray:
            """The BDs the leaf of their leg has, ``one`` where a value must be 1."""
            w_recv, w_compl, i_compl, i_next, i_send = kinds(one)
            known_by = [
                # the entry handshake: wait entry_post / entry_go, +entry_post on peers,
                # +entry_go
                (lf_s == MARK_COMPLETE,
                 (wait & local & (_ENTRY_POST[sid] | (sid == SEM_ENTRY_GO)))
                 | (~wait & ~local & _ENTRY_POST[sid])
                 | (~wait & local & (sid == SEM_ENTRY_GO))),
                # post_recv: nothing of its own
                (lf_s == POST_RECV, np.zeros(n, bool)),
                # mesh / RDH legs: events (waits on this core), a network send's send_sema
                (np.isin(lf_s, list(EVENT_LEAVES)), (event & (local | ~wait)) | i_send),
                # KANGARING (§3.3): the ring's recv_sema / send_sema, the unit's peer semaphores
                (kanga & np.isin(lf_s, list(HALF_LEAVES)),
                 w_recv | i_next | i_send | (~wait & peer_own & ~local)),
                (lf_s == PEER_POST, ~wait & peer_own & ~local),
                (lf_s == PEER_WAIT, wait & peer_own & local),
                # SINGLE_CYCLE_RING (§3.3): recv_sema and post_sema of the entry's channels,
                # each increment by 1 (§3.3, §7; review 58n: one by 2 failed the run elsewhere)
                (single & np.isin(lf_s, list(RING_LEAVES)),
                 (wait & local & ((b_role == ROLE_RECV) | (b_role == ROLE_POST)))
                 | (~wait & ~local & (b_role == ROLE_RECV) & one)
                 | (~wait & local & (b_role == ROLE_POST) & one) | i_send),
            ]
            other_known = np.zeros(n, bool)
            for m, ok in known_by:
                other_known |= m & ok
            other_known |= i_compl
            return np.where(ring_s | (lf_s == MARK_END),
                            w_recv | w_compl | i_compl | i_next | i_send, other_known)

        cat_w_recv, cat_w_compl, cat_i_compl, cat_i_next, cat_i_send = kinds(val == 1)
        bad = _first(~known_of(val == 1))
        if bad is not None:
            # a BD the leaf has but for its value names the value, else what it addresses
            fld = "value" if known_of(np.ones(n, bool))[bad] else "addr"
            raise self.fail(f"{'wait' if wait[bad] else 'increment'} of "
                            f"{sem_name(int(sid[bad]))} of rank {trank[bad]} by {val[bad]} is not "
                            f"part of the protocol for a {LEAF_NAMES[int(self.leaf[leg[bad]])]} "
                            f"leg (legs.bin record {leg[bad]}; FORMATS §3.2 - §3.4, §7)",
                            "sem.bin", bad, fld)
        # the values FORMATS fixes outside the ring block: +1 per entry_post, kangaring peer
        # and event increment, entry_go waited for 1 and raised by (the entry's channels - 1)
        # (§3.3, §3.4, §7; a balanced scaling of them passed the run)
        ones = (~wait & (_ENTRY_POST[sid] | (peer_own & ~local) | event)) \
            | (wait & local & (sid == SEM_ENTRY_GO))
        self.check(ones & (val != 1), lambda i: f"{'wait' if wait[i] else 'increment'} of "
                   f"{sem_name(int(sid[i]))} of rank {trank[i]} by {val[i]}: FORMATS §3.3, "
                   "§3.4 and §7 make it 1", "sem.bin", "value")
        nch = self.entry_nch[self.spi[leg]] if n else np.zeros(0, np.int64)
        self.check(~wait & local & (sid == SEM_ENTRY_GO) & (val != nch - 1), lambda i:
                   f"increment of {sem_name(int(sid[i]))} by {val[i]}: the entry has "
                   f"{nch[i]} channels, so it releases {nch[i] - 1} (FORMATS §3.4)",
                   "sem.bin", "value")
        if n > 1:
            self._check_single_cycle_copies(leg, single & np.isin(lf_s, list(RING_LEAVES)),
                                            wait, local, b_role, val)
            # a leg's waits come before its increments (FORMATS §7); out of order, the BD
            # named is the one edited where that can be told: a BD that repeats another of
            # its leg (a copy), else a lone wait after an increment (a wait moved or copied
            # there), else the first increment before a wait (a wait swapped with an
            # increment: review 58n, naming the wait after it named a SINGLE_CYCLE_RING or
            # MESH leg's second, untouched, wait)
            pos = np.arange(n)
            first_inc = np.full(self.n_legs, n, np.int64)
            np.minimum.at(first_inc, leg[~wait], pos[~wait])
            last_wait = np.full(self.n_legs, -1, np.int64)
            np.maximum.at(last_wait, leg[wait], pos[wait])
            out_of_order = np.flatnonzero(first_inc < last_wait)
            if out_of_order.size:
                g = int(out_of_order[0])
                its = np.flatnonzero(leg == g).tolist()
                incs = [i for i in its if not wait[i] and i < last_wait[g]]
                waits = [i for i in its if wait[i] and i > first_inc[g]]
                Sm = self.a["sem.bin"]
                bd = {i: tuple(Sm[i].tolist()) for i in its}
                copies = [i for i in sorted(incs + waits)
                          if any(bd[j] == bd[i] for j in its if j != i)]
                i = copies[0] if copies else waits[0] if len(waits) == 1 else incs[0]
                if wait[i]:
                    why = ("a wait after an increment (FORMATS §7: the wait first, then the "
                           "increments)")
                else:
                    why = (f"an increment, of {sem_name(int(sid[i]))} of rank {trank[i]}, before "
                           f"its leg's wait at sem.bin record {last_wait[g]} (legs.bin record {g}; "
                           "FORMATS §7: the waits first, then the increments)")
                raise self.fail(why, "sem.bin", i, "ctrl.subop")
            # a SINGLE_CYCLE_RING leg's two waits: its recv_sema, then its post_sema (FORMATS
            # §7; review 57i: swapped, the 0xBF word's wait_idx, untouched, was named)
            # a leg with another count of such waits is left to the BD kind counts below
            # (review 57o: a third wait standing where an increment belongs named the
            # untouched post_sema wait)
            scr_w = single & np.isin(lf_s, list(RING_LEAVES)) & wait & local
            n_scr_w = np.bincount(leg[scr_w], minlength=self.n_legs)[leg]
            # a third such wait stands where the leg's increments belong: it is named
            third = np.zeros(n, bool)
            for g3 in np.unique(leg[scr_w & (n_scr_w > 2)]).tolist():
                third[np.flatnonzero(scr_w & (leg == g3))[2]] = True
            self.check(third, lambda i:
                       f"a third wait, of {sem_name(int(sid[i]))}: a SINGLE_CYCLE_RING "
                       f"{LEAF_NAMES[int(lf_s[i])]} leg (legs.bin record {leg[i]}) waits its "
                       f"recv_sema, then its post_sema, and then increments (FORMATS §7)",
                       "sem.bin", "ctrl.subop")
            scr_w &= n_scr_w == 2
            self.check((leg[1:] == leg[:-1]) & scr_w[1:] & scr_w[:-1]
                       & (b_role[:-1] == ROLE_POST) & (b_role[1:] == ROLE_RECV), lambda i:
                       f"wait of {sem_name(int(sid[i]))} first: a SINGLE_CYCLE_RING "
                       f"{LEAF_NAMES[int(lf_s[i])]} leg (legs.bin record {leg[i]}) waits its "
                       f"recv_sema, then its post_sema (FORMATS §7), and its next wait (sem.bin "
                       f"record {i + 1}) is on {sem_name(int(sid[i + 1]))}", "sem.bin", "addr")
            # its increments likewise: its own dma_compl_sema, the next's recv_sema (or its own
            # send_sema in a network peer's place), its post_sema of the pair's other channel
            # (FORMATS §7); two swapped, the first out of place is named (since 2026-12-07,
            # fixer 59b: a swap passed as a match). A RING leg's (flat, or a HIER leg's RING
            # legs) alike: its own dma_compl_sema, then the successor's recv_sema or its own
            # send_sema (FORMATS §7's RING row; fixer 59p: a swap passed as a match). Held only
            # on a leg with each kind once (a copy or a moved BD is left to the checks that name
            # those)
            # A KANGARING data leg's too (FORMATS §7's row): its own dma_compl_sema, the next
            # primary's recv_sema, then 144 + c of each secondary (kind 4, as many as it has;
            # their peer order is not held here)
            kanga_i = kanga & np.isin(lf_s, list(RING_LEAVES | {10}))
            scr_i = (single & np.isin(lf_s, list(RING_LEAVES)) | ring_s | kanga_i) & ~wait
            kind = self._scr_kind(wait, local, b_role)
            kind = np.where(kanga_i & ~wait & ~local & peer_own, 4, kind)
            rep = kanga_i & (kind == 4)  # the kinds a leg has more than once
            n_scr_i = np.bincount(leg[scr_i & ~rep], minlength=self.n_legs)
            kinds_of = np.zeros(self.n_legs, np.int64)
            np.bitwise_or.at(kinds_of, leg[scr_i & (kind >= 2) & ~rep],
                             1 << np.maximum(kind[scr_i & (kind >= 2) & ~rep], 0))
            # (the kinds each leg has, counted from its bits: kinds 2 - 4)
            distinct = sum((kinds_of >> b) & 1 for b in range(2, 5)) == n_scr_i
            distinct &= np.bincount(leg[scr_i & (kind < 2)], minlength=self.n_legs) == 0
            # a KANGARING leg without its one dma_compl_sema increment (a BD moved between
            # legs) is left to the counts below
            n_compl = np.bincount(leg[scr_i & (kind == 2)], minlength=self.n_legs)
            distinct &= (n_compl == 1) | ~np.bincount(leg[kanga_i], minlength=self.n_legs
                                                       ).astype(bool)
            ok_i = scr_i & (kind >= 2) & distinct[leg]

            def order_why(i: int) -> str:
                """The increments' order FORMATS §7 gives BD i's leg."""
                if ring_s[i]:
                    return (f"a RING {LEAF_NAMES[int(lf_s[i])]} leg (legs.bin record {leg[i]}) "
                            "increments its own dma_compl_sema, then the successor's recv_sema "
                            "or its own send_sema (FORMATS §7)")
                if kanga_i[i]:
                    return (f"a KANGARING {LEAF_NAMES[int(lf_s[i])]} leg (legs.bin record "
                            f"{leg[i]}) increments its own dma_compl_sema, then the next "
                            "primary's recv_sema, then 144 + c of each secondary (FORMATS §7)")
                return (f"a SINGLE_CYCLE_RING {LEAF_NAMES[int(lf_s[i])]} leg (legs.bin record "
                        f"{leg[i]}) increments its own dma_compl_sema, then the next's recv_sema "
                        "or its own send_sema, then its post_sema of the pair's other channel "
                        "(FORMATS §7)")
            self.check((leg[1:] == leg[:-1]) & ok_i[1:] & ok_i[:-1] & (kind[:-1] > kind[1:]),
                       lambda i: f"increment of {sem_name(int(sid[i]))} of rank {trank[i]} "
                       f"before the one of {sem_name(int(sid[i + 1]))} of rank {trank[i + 1]} "
                       f"(sem.bin record {i + 1}): {order_why(i)}", "sem.bin", "addr")
        # a SINGLE_CYCLE_RING ring leaf's waits, flat or a HIER leg's, are each by 1 (FORMATS
        # §4's row, §7): each takes what one increment adds, the channel predecessor's +1 on
        # its recv_sema, the pair's other channel's +1 on its post_sema (docs/DESIGN.md
        # "Single-cycle ring"). A leg's first wait its 0xBF word repeats is left to
        # check_sb2sb, which weighs the two records (_check_events); every other wait (a
        # second one, a direct_recv's: no word) by another value is named here (since
        # 2026-12-07, fixer 58c: its run deadlocked or left a semaphore non-zero)
        scr_wv = single & np.isin(lf_s, list(RING_LEAVES)) & wait & local \
            & ((b_role == ROLE_RECV) | (b_role == ROLE_POST))
        worded = np.zeros(n, bool)
        idx_w = np.flatnonzero(wait)
        if idx_w.size:
            first_of = np.full(self.n_legs, -1, np.int64)
            first_of[leg[idx_w[::-1]]] = idx_w[::-1]
            worded[idx_w] = (first_of[leg[idx_w]] == idx_w) \
                & (L["sb2sb_count"].astype(np.int64)[leg[idx_w]] > 0)
        self.check(scr_wv & ~worded & (val != 1), lambda i: f"wait value should be 1, not "
                   f"{val[i]}: a SINGLE_CYCLE_RING {LEAF_NAMES[int(lf_s[i])]} leg's waits are "
                   f"by 1, what one increment adds to its {ROLE_NAMES[int(b_role[i])]} "
                   f"(FORMATS §4, §7; legs.bin record {leg[i]})", "sem.bin", "value")
        # a MESH or SINGLE_STEP_MESH leg that waits two events waits the same-device one
        # first, then the other devices' or nodes' (FORMATS §7's rows; §4: its 0xBF word
        # repeats the first, "the device's event when there is one"): swapped, the word's
        # wait_idx, untouched, was named, and a handshake mesh_sync's (no word) passed (since
        # 2026-12-07, fixer 58c)
        if n > 1:
            mesh_w = np.isin(at_s, (int(EncAlgType.MESH), int(EncAlgType.SINGLE_STEP_MESH))) \
                & np.isin(lf_s, list(EVENT_LEAVES)) & wait & local & event
            n_mesh_w = np.bincount(leg[mesh_w], minlength=self.n_legs)[leg]
            two = mesh_w & (n_mesh_w == 2)
            evt = sid - SEM_EVENT_BASE
            self.check((leg[1:] == leg[:-1]) & two[1:] & two[:-1]
                       & np.isin(evt[:-1], list(_EVT_BEYOND)) & np.isin(evt[1:], list(_EVT_DEVICE)),
                       lambda i: f"wait of {_event_name(int(sid[i]))} first: a "
                       f"{_alg_name(int(at_s[i]))} {LEAF_NAMES[int(lf_s[i])]} leg (legs.bin "
                       f"record {leg[i]}) waits the same-device event first, then the other "
                       f"devices' or nodes' (FORMATS §4, §7), and its next wait (sem.bin record "
                       f"{i + 1}) is on {_event_name(int(sid[i + 1]))}", "sem.bin", "addr")

        def count(mask):
            return np.bincount(leg[mask], minlength=self.n_legs)

        w_recv, w_compl, i_compl = count(cat_w_recv), count(cat_w_compl), count(cat_i_compl)
        i_next, i_send = count(cat_i_next), count(cat_i_send)
        w_any, i_away = count(wait), count(~wait & ~local)
        lf = self.leaf
        me_end = lf == MARK_END
        ring = np.isin(lf, list(RING_LEAVES)) & self.ring_entry[self.spi]
        consuming = np.isin(lf, list(CONSUMING))
        sending = np.isin(lf, list(SENDING))
        others = np.diff(np.append(self.group_first, self.n_legs))[self.group_of] - 1
        # the ring protocol's BDs of a ring or mark_end leg (each of its BDs is one of them,
        # checked above): the BDs, how many the leg has, how many it should have, their name
        ring_kinds = [
            (cat_w_recv, w_recv, np.where(consuming, 1, 0), "a wait recv_sema >= 1"),
            (cat_w_compl, w_compl, me_end.astype(np.int64),
             "the mark_end wait on dma_compl_sema"),
            (cat_i_compl, i_compl, np.where(me_end, 0, 1),
             "an increment of its own dma_compl_sema by 1"),
            (cat_i_next | cat_i_send, i_next + i_send, sending.astype(np.int64),
             "an increment of the successor's recv_sema or its own send_sema by 1"),
        ]
        n_all = count(np.ones(n, bool))
        want_all = sum(want for _, _, want, _ in ring_kinds)
        checks = [
            (ring, *ring_kinds[0][1:]),
            (ring | me_end, *ring_kinds[1][1:]),
            (np.ones(self.n_legs, bool), *ring_kinds[2][1:]),
            (ring, *ring_kinds[3][1:]),
            (ring | me_end, n_all, want_all, "semaphore BDs in all"),
            # the kangaring unit's sync legs (FORMATS §3.3): one post, one wait
            (lf == PEER_POST, count(~wait & ~local), np.ones(self.n_legs, np.int64),
             "an increment of its primary's peer semaphore"),
            (lf == PEER_WAIT, w_any, np.ones(self.n_legs, np.int64),
             "a wait on its own peer semaphore"),
        ]
        for mask, got, want, name in checks:
            bad = _first(mask & (got != want))
            if bad is None:
                continue
            held = self.ring_leg_error
            if held is not None and held.where.field == "leaf" \
                    and held.where.artifact == "legs.bin" and held.where.record == bad:
                # an SBUF entry's ring leaf the step loop does not call there (held for
                # check_sb2sb, decode_legs): its semaphores disagree with it as well, so the
                # leaf is what changed (review 55t; until 2026-12-07 named at sem_count)
                raise held
            # a HIER RING leg's leaf its step template does not call there (a send made
            # direct_recv_send) disagrees with its semaphores too: the leaf is what changed
            # (check_kangaring_legs; since 2026-12-07, fixer 57a: named at sem_count)
            try:
                self.check_kangaring_legs()
            except SimulationError as exc:
                if exc.where.field == "leaf" and exc.where.record == bad:
                    raise
            leaf = LEAF_NAMES[int(lf[bad])]
            place = (f"entry {self.spi[bad]}, channel {self.ch[bad]}, step "
                     f"{bad - self.group_first[self.group_of[bad]]}")
            should = f"should have {want[bad]} x {name}, not {got[bad]}"
            if (ring[bad] or me_end[bad]) and n_all[bad] == want_all[bad]:
                # as many BDs as the protocol gives the leg, of the wrong kinds: the BD of a
                # kind the leg has too many of that stands where FORMATS §7's order (waits,
                # the dma_compl_sema increment, the successor's) puts a kind it lacks
                # addresses what it should not, and the line names the missing kind (review
                # 57i: a successor increment turned into a second dma_compl_sema one was
                # named at the first, right, one, and the missing increment went unsaid)
                s0, nb = int(L["sem_first"][bad]), int(n_all[bad])
                seq = np.full(nb, -1, np.int64)
                for kk, (bds, _, _, _) in enumerate(ring_kinds):
                    seq[bds[s0:s0 + nb]] = kk
                order = np.repeat(np.arange(len(ring_kinds)),
                                  [int(k_want[bad]) for _, _, k_want, _ in ring_kinds])
                for p in np.flatnonzero(seq != order).tolist():
                    over, miss = ring_kinds[int(seq[p])], ring_kinds[int(order[p])]
                    if seq[p] >= 0 and over[1][bad] > over[2][bad] \
                            and miss[1][bad] < miss[2][bad]:
                        raise self.fail(f"{leaf} leg (legs.bin record {bad}: {place}) should have "
                                        f"{miss[2][bad]} x {miss[3]}, not {miss[1][bad]}; this "
                                        f"BD is one of its {over[1][bad]} x {over[3]}, where it "
                                        f"should have {over[2][bad]}", "sem.bin", s0 + p, "addr")
                for bds, k_got, k_want, k_name in ring_kinds:
                    j = _first(bds & (leg == bad) & (k_got[leg] > k_want[leg]))
                    if j is not None:
                        raise self.fail(f"{leaf} leg (legs.bin record {bad}: {place}) {should}; "
                                        f"this BD is one of its {k_got[bad]} x {k_name}, where "
                                        f"it should have {k_want[bad]}", "sem.bin", j, "addr")
            if (name == ring_kinds[2][3] and not (ring[bad] or me_end[bad])
                    and got.sum() == want.sum()):
                # another leg's dma_compl increments, as many on the rank as its legs should
                # have: a BD moved between legs, whose counts are unchanged; the first BD of
                # the first leg with too many of them addresses what it should not
                over = _first(got > want)
                j = _first(cat_i_compl & (leg == over))
                raise self.fail(f"{LEAF_NAMES[int(lf[over])]} leg (legs.bin record {over}: entry "
                                f"{self.spi[over]}, channel {self.ch[over]}, step "
                                f"{over - self.group_first[self.group_of[over]]}) should have "
                                f"{want[over]} x {name}, not {got[over]}; this BD is one of "
                                "them", "sem.bin", j, "addr")
            raise self.fail(f"{leaf} leg ({place}) {should}", "legs.bin", bad, "sem_count")
        bad = _first(~ring & ~me_end & (w_any > 2))
        if bad is not None:
            raise self.fail(f"{LEAF_NAMES[int(lf[bad])]} leg waits on {w_any[bad]} semaphores "
                            "(at most two)", "legs.bin", bad, "sem_count")
        end_val = np.zeros(self.n_legs, np.int64)
        end_val[leg[cat_w_compl]] = val[cat_w_compl]
        end_bd = np.zeros(self.n_legs, np.int64)  # the sem.bin record of that wait
        end_bd[leg[cat_w_compl]] = np.flatnonzero(cat_w_compl)
        bad = _first(me_end & (end_val != others))
        if bad is not None:
            raise self.fail(f"mark_end leg (legs.bin record {bad}) should wait dma_compl_sema >= "
                            f"{others[bad]}, the channel's other legs, not {end_val[bad]}",
                            "sem.bin", int(end_bd[bad]), "value")
        # mark_complete legs open a channel program (FORMATS §3.4): in front, never after
        # another leaf (checked after their semaphores, which name a swapped leaf first)
        after = np.zeros(self.n_legs, bool)
        if self.n_legs:
            after[1:] = ((lf[1:] == MARK_COMPLETE) & (self.group_of[1:] == self.group_of[:-1])
                         & (lf[:-1] != MARK_COMPLETE))
        self.check(after, "mark_complete after a leg of another leaf: the entry handshake "
                   "opens its channel program (FORMATS §3.4)", "legs.bin", "leaf")
        next_rank = np.full(self.n_legs, -1, np.int64)
        next_rank[leg[cat_i_next]] = trank[cat_i_next]
        self.l_next = np.where(ring, next_rank, -1)
        self.l_next_bd = np.full(self.n_legs, -1, np.int64)  # its sem.bin record
        self.l_next_bd[leg[cat_i_next]] = np.flatnonzero(cat_i_next)
        self.l_proxy_sends = count(cat_i_send)
        self.l_away = i_away
        self.l_waits = w_any
        # the first wait and the dma_compl increment of each leg (0xBF events)
        first_wait = np.full(self.n_legs, -1, np.int64)
        idx = np.flatnonzero(wait)
        first_wait[leg[idx[::-1]]] = idx[::-1]
        self.first_wait = first_wait

    def check_targets(self) -> None:
        """Ring legs signal and write the ring successor of the manifest's channel order; other
        legs: neigh says whether they reach another rank."""
        R = self.runs
        ring = np.isin(self.leaf, list(RING_LEAVES)) & self.ring_entry[self.spi]
        away = (R["dir"] == 1) & (R["rank"] != self.rank)
        writes_away = np.bincount(R["leg"][away], minlength=self.n_legs) > 0
        reads_away = np.bincount(R["leg"][(R["dir"] == 0) & (R["rank"] != self.rank)],
                                 minlength=self.n_legs) > 0
        data = self.sdma != SDMA_NONE
        gen_neigh = np.where(writes_away | reads_away | (self.l_away > 0)
                             | (self.l_proxy_sends > 0), NEIGH_NEXT,
                             np.where(~data & (self.l_waits > 0), NEIGH_PREV, NEIGH_LOCAL))
        other = ~ring & (self.leaf != MARK_END)
        bad = _first(other & (self.neigh != gen_neigh))
        if bad is not None:
            leaf = LEAF_NAMES[int(self.leaf[bad])]
            gw = self.layout.named("gw")
            own_gw = (R["dir"] == 1) & (R["rank"] == self.rank) & (
                R["reg"] == (gw.index if gw is not None else -1))
            if (self.neigh[bad] == NEIGH_NEXT and data[bad]
                    and np.any(own_gw & (R["leg"] == bad))):
                # a network-bound leg (its bytes go to its own gw region for the net proxy,
                # FORMATS §8) whose send_sema increment is what is missing, not its neigh
                send = sem_id(int(self.ch[bad]), ROLE_SEND)
                raise self.fail(f"{leaf} leg (legs.bin record {bad}) writes this rank's gw "
                                f"region for the net proxy but has no increment of its own "
                                f"send_sema ({sem_name(send)}), which hands the bytes to the "
                                "proxy (FORMATS §8)", "legs.bin", bad, "sem_count")
            touches = writes_away[bad] or reads_away[bad] or self.l_away[bad] > 0
            what = {NEIGH_NEXT: ("reaches another rank" if touches
                                 else "hands its data to the net proxy"),
                    NEIGH_PREV: "reaches no other rank and waits without moving data",
                    NEIGH_LOCAL: "reaches no other rank and "
                    + ("moves data" if data[bad] else "waits on nothing")}
            raise self.fail(f"neigh for a {leaf} leg that {what[int(gen_neigh[bad])]} should be "
                            f"{gen_neigh[bad]} ({NEIGH_LABELS[int(gen_neigh[bad])]}), not "
                            f"{self.neigh[bad]}", "legs.bin", bad, "neigh")
        # ring legs: the successor they signal (sem.bin), then their data (dma.bin) against it
        cache: dict[tuple[int, int], int] = {}
        for e, c in set(zip(self.spi.tolist(), self.ch.tolist())):
            s_ = self.entry_trigger[e].successor(c, self.rank, self.entry_leg[e])
            cache[(e, c)] = -1 if s_ is None else s_
        succ = np.array([cache[(e, c)] for e, c in zip(self.spi.tolist(), self.ch.tolist())],
                        np.int64)
        # (a ring leg's neigh, NEXT on a sending leaf, was checked with legs.bin: what names
        # another rank than the successor is the increment's address)
        bad = _first(ring & (self.l_next >= 0) & (self.l_next != succ))
        if bad is not None:
            raise self.fail(f"{LEAF_NAMES[int(self.leaf[bad])]} leg (legs.bin record {bad}) "
                            f"should signal rank {succ[bad]}, the ring successor of channel "
                            f"{self.ch[bad]}, not {self.l_next[bad]}",
                            "sem.bin", int(self.l_next_bd[bad]), "addr")
        # (what is wrong is a BD's buf_ptr: the first ring-leg data BD in dma.bin order, across
        # legs and within one, that reads another core or writes a rank neither its own nor the
        # one its leg signals (a leg may write its own core), named with the rank it reads or
        # writes; a leg that writes nothing where it signals is named after, last; a BD's
        # rank is its merged byte run's, so these are the BDs of the runs the two rules
        # refuse, but runs go by leg and stream, not by dma.bin record)
        elsewhere = ring[self.bd_leg] & (self.bd_rank != self.rank)
        bad_read = elsewhere & (self.bd_dir == 0)
        bad_write = elsewhere & (self.bd_dir == 1) & (self.bd_rank != self.l_next[self.bd_leg])
        j = _first(bad_read | bad_write)
        if j is not None:
            g = int(self.bd_leg[j])
            leg_name = f"{LEAF_NAMES[int(self.leaf[g])]} leg (legs.bin record {g})"
            if bad_read[j]:
                raise self.fail(f"{leg_name} reads rank {self.bd_rank[j]} (ring legs read their "
                                "own core)", "dma.bin", j, "buf_ptr")
            raise self.fail(f"{leg_name} writes rank {self.bd_rank[j]} but "
                            + (f"signals rank {self.l_next[g]}" if self.l_next[g] >= 0 else
                               "signals no other rank"), "dma.bin", j, "buf_ptr")
        ring_runs = ring[R["leg"]] if R["leg"].size else np.zeros(0, bool)
        away = away & ring_runs
        rl = R["leg"]
        writes_next = np.bincount(rl[away], minlength=self.n_legs) > 0
        bad = _first(ring & (self.l_next >= 0) & ~writes_next)
        if bad is not None:
            why = (f"{LEAF_NAMES[int(self.leaf[bad])]} leg (legs.bin record {bad}) signals rank "
                   f"{self.l_next[bad]} but writes nothing there")
            # its first destination BD (none: the leg's BDs are what is missing)
            j = _first((self.bd_dir == 1) & (self.bd_leg == bad))
            if j is None:
                raise self.fail(why, "legs.bin", bad, "dma_first")
            raise self.fail(why, "dma.bin", j, "buf_ptr")
        self.check_kangaring_peers()

    def check_kangaring_peers(self) -> None:
        """KANGARING legs (FORMATS §3.3) signal and move data on the ranks of the manifest's
        cycle and units: a ring leaf's increment of another rank's ``recv_sema`` is the next
        primary of the channel's order (``channels[].order``, a HIER leg plan's in
        positions), a peer semaphore increment of a primary's leg a secondary of its own unit,
        of a secondary's (``peer_post``) its unit's primary (``kangaring[].units``); a
        primary's leg reads no other rank than its unit's secondaries and writes no other
        than those and the next primary, a secondary's legs move no data.  Until 2026-12-05
        only the section and the order were held to each other and the group, not to the
        legs; the data only by the run (a write to a stranger's output is a race or a
        mismatch there)."""
        L = self.a["legs.bin"]
        subop, _role, trank, sid, _val = self.sem
        if not self.n_legs or not np.any(self.algo_type[self.spi] == int(EncAlgType.KANGARING)):
            return
        kanga_leg = self.algo_type[self.spi] == int(EncAlgType.KANGARING)
        leg = np.repeat(np.arange(self.n_legs), L["sem_count"].astype(np.int64))
        c = self.ch[leg]
        away = ~(subop == WAIT) & (trank != self.rank) & kanga_leg[leg]
        nxt = away & (sid == SEM_BASE + 4 * c + ROLE_RECV)
        peer = away & (sid == SEM_PEER_BASE + c)
        idx = np.flatnonzero(nxt | peer)
        R = self.runs
        run_away = np.flatnonzero(kanga_leg[R["leg"]] & (R["rank"] != self.rank)) \
            if R["leg"].size else np.zeros(0, np.int64)
        if not idx.size and not run_away.size:
            return
        # per (entry, channel): the rank's unit, its key, the next primary (-1: none)
        g_of = leg[idx]
        g_run = R["leg"][run_away]
        all_pairs = np.concatenate([self.spi[g_of] * 64 + self.ch[g_of],
                                    self.spi[g_run] * 64 + self.ch[g_run]])
        uniq, kid_all = np.unique(all_pairs, return_inverse=True)
        kid, kid_run = kid_all[:idx.size], kid_all[idx.size:]
        units, keys = [], []
        succ = np.full(uniq.size, -1, np.int64)
        mates = np.full((uniq.size, 4), -1, np.int64)  # a primary's secondaries, or its primary
        known = np.zeros(uniq.size, bool)
        primary = np.zeros(uniq.size, bool)
        for j, pc in enumerate(uniq.tolist()):
            e, ch = divmod(pc, 64)
            t, lg = self.entry_trigger[e], self.entry_leg[e]
            found = t.kangaring_unit(ch, self.rank, lg)
            units.append(found[0] if found else None)
            keys.append(found[1] if found else "")
            if found is None:
                continue  # (a rank outside every unit: _check_kangaring's to refuse)
            known[j] = True
            unit = found[0]
            if unit[0] == self.rank:
                primary[j] = True
                s_ = t.successor(ch, self.rank, lg)
                succ[j] = -1 if s_ is None else s_
                mates[j, :len(unit) - 1] = unit[1:]
            else:
                mates[j, 0] = unit[0]
        to = trank[idx]
        bad_next = nxt[idx] & known[kid] & (to != succ[kid])
        bad_peer = peer[idx] & known[kid] & ~(to[:, None] == mates[kid]).any(axis=1)
        bad = _first(bad_next | bad_peer)
        if bad is not None:
            i, g, j = int(idx[bad]), int(g_of[bad]), int(kid[bad])
            ch = int(uniq[j]) % 64
            unit, key, name, to_ = units[j], keys[j], LEAF_NAMES[int(self.leaf[g])], int(to[bad])
            if bad_next[bad]:
                want = (f"the next primary of channel {ch} is {succ[j]} ({self._order_key(key)})"
                        if unit[0] == self.rank else
                        f"rank {self.rank} is a secondary of unit {unit} ({key}), which sends to "
                        "no primary")
                raise self.fail(f"{name} leg (legs.bin record {g}) increments recv_sema of rank "
                                f"{to_}: {want} (FORMATS §3.3)", "sem.bin", i, "addr")
            if unit[0] == self.rank:
                raise self.fail(f"{name} leg (legs.bin record {g}) of primary {self.rank} "
                                f"should increment the peer semaphore of a secondary of its "
                                f"unit {unit} on channel {ch}, not of rank {to_} ({key}; "
                                "FORMATS §3.3)",
                                "sem.bin", i, "addr")
            raise self.fail(f"{name} leg (legs.bin record {g}) of secondary {self.rank} "
                            f"should increment the peer semaphore of its unit's primary "
                            f"{unit[0]} on channel {ch}, not of rank {to_} ({key}; FORMATS §3.3)",
                            "sem.bin", i, "addr")
        # the data: a primary's reads on its secondaries, its writes there or on the next
        # primary; a secondary moves none
        to = R["rank"][run_away]
        writes = R["dir"][run_away] == 1
        on_mate = (to[:, None] == mates[kid_run]).any(axis=1) & primary[kid_run]
        ok = on_mate | (writes & primary[kid_run] & (to == succ[kid_run]))
        bad = _first(known[kid_run] & ~ok)
        if bad is None:
            return
        g, j = int(g_run[bad]), int(kid_run[bad])
        # what is wrong is a BD's buf_ptr: the leg's first (dma.bin order) that the same rule
        # refuses, named with its direction and rank
        bd_to, bd_w = self.bd_rank, self.bd_dir == 1
        bd_ok = ((bd_to[:, None] == mates[j]).any(axis=1) & primary[j]) \
            | (bd_w & primary[j] & (bd_to == succ[j]))
        k = _first((self.bd_leg == g) & (bd_to != self.rank) & ~bd_ok)
        to_, wr = int(bd_to[k]), bool(bd_w[k])
        ch = int(uniq[j]) % 64
        unit, key, name = units[j], keys[j], LEAF_NAMES[int(self.leaf[g])]
        verb = "writes" if wr else "reads"
        if not primary[j]:
            why = (f"rank {self.rank} is a secondary of unit {unit} on channel {ch} ({key}), "
                   "whose legs move no data")
        elif wr:
            why = (f"neither a secondary of its unit {unit} on channel {ch} ({key}) nor the next "
                   f"primary {succ[j]} ({self._order_key(key)})")
        else:
            why = f"not a secondary of its unit {unit} on channel {ch} ({key})"
        raise self.fail(f"{name} leg (legs.bin record {g}) of rank {self.rank} {verb} rank "
                        f"{to_}: {why} (FORMATS §3.3)", "dma.bin", k, "buf_ptr")

    @staticmethod
    def _order_key(units_key: str) -> str:
        """The ``channels[c].order`` key beside a ``kangaring[c].units`` key."""
        return units_key.replace("kangaring", "channels").rsplit(".", 1)[0] + ".order"

    # ------------------------------------------------------------------ runs
    def build_runs(self) -> None:
        """Merged byte runs of every stream of every data leg, sorted (leg, dir, stream)."""
        n = self.bd_len.size
        order = np.lexsort((np.arange(n), self.bd_stream, self.bd_dir, self.bd_leg))
        leg = self.bd_leg[order]
        dirr = self.bd_dir[order]
        stream = self.bd_stream[order]
        rk = self.bd_rank[order]
        reg = self.bd_reg[order]
        off = self.bd_soff[order]
        ln = self.bd_len[order]
        brk = np.ones(n, bool)
        if n > 1:
            brk[1:] = ((leg[1:] != leg[:-1]) | (dirr[1:] != dirr[:-1])
                       | (stream[1:] != stream[:-1]) | (rk[1:] != rk[:-1]) | (reg[1:] != reg[:-1])
                       | (off[1:] != off[:-1] + ln[:-1]))
        st = np.flatnonzero(brk)
        R = {"leg": leg[st], "dir": dirr[st], "stream": stream[st], "rank": rk[st],
             "reg": reg[st], "off": off[st], "bd": order[st],  # bd: its first dma.bin record
             "len": np.add.reduceat(ln, st) if n else np.zeros(0, np.int64)}
        gkey = R["leg"] * 64 + R["dir"] * 32 + R["stream"]
        gnew = np.ones(gkey.size, bool)
        gnew[1:] = gkey[1:] != gkey[:-1]
        gid = np.cumsum(gnew) - 1
        gfirst = np.flatnonzero(gnew)
        csum = np.cumsum(R["len"]) - R["len"]
        pos = csum - csum[gfirst][gid] if gkey.size else csum
        R.update(gkey=gkey, gid=gid, pos=pos, key2=gid * (1 << 40) + pos)
        self.runs = R
        cnt = np.bincount(R["leg"], minlength=self.n_legs)
        self.run_first = np.cumsum(cnt) - cnt
        self.run_count = cnt
        self.leg_dsize = np.array([self.entry_trigger[int(e)].dsize for e in self.spi], np.int64) \
            if self.n_legs else np.zeros(0, np.int64)

    def check_overlaps(self) -> np.ndarray:
        """Legs whose destination runs overlap their source runs or each other (sequential)."""
        R = self.runs
        m = R["leg"].size
        seq = np.zeros(self.n_legs, bool)
        if not m:
            return seq
        a, e = R["off"], R["off"] + R["len"]
        order = np.lexsort((a, R["reg"], R["rank"], R["leg"]))
        a, e, dst = a[order], e[order], (R["dir"] == 1)[order]
        new = np.zeros(m, bool)
        new[0] = True
        for col in ("leg", "rank", "reg"):  # a group: one leg's runs in one region of one rank
            c = R[col][order]
            new[1:] |= c[1:] != c[:-1]
        big = np.int64(1) << 50
        gi = np.cumsum(new) - 1
        shifted_any = np.maximum.accumulate(e + gi * big)
        shifted_dst = np.maximum.accumulate(np.where(dst, e, 0) + gi * big)
        prev_any = np.empty(m, np.int64)
        prev_dst = np.empty(m, np.int64)
        prev_any[0] = prev_dst[0] = -1
        prev_any[1:] = shifted_any[:-1] - gi[1:] * big
        prev_dst[1:] = shifted_dst[:-1] - gi[1:] * big
        prev_any[new] = -1
        prev_dst[new] = -1
        hit = np.where(dst, a < prev_any, a < prev_dst)
        seq[R["leg"][order][hit]] = True
        return seq

    # ------------------------------------------------------------------ the program
    def build(self) -> "RankProgram":
        L = self.a["legs.bin"]
        entries = [Entry(self.rank, e, self.entry_trigger[e], int(self.algo_type[e]),
                         bool(self.trigger_next[e]), bool(self.reporter[e]), bool(self.rsc[e]),
                         [c for c in range(32) if (int(self.entry_channels[e]) >> c) & 1],
                         (int(self.channel_list[e]) & 0xFFFF)
                         if int(self.algo_type[e]) in MESH_FAMILY else 0,
                         leg=self.entry_leg[e])
                   for e in range(self.a["spad.bin"].size)]
        for gi, g0 in enumerate(self.group_first.tolist()):
            n = int(np.count_nonzero(self.group_of == gi))
            entries[int(self.spi[g0])].queues[int(self.ch[g0])] = (g0, n)
        # the columns the run keeps, each as narrow as its values (a field of legs.bin or
        # sem.bin its file's width, a CCE code a byte, a count or index of one rank's records
        # 32 bits; byte offsets and element starts 64): the checks above ran on int64 copies
        # (docs/SIMULATOR.md §3 "Memory": about 150 bytes a leg where it was 400)
        cce = np.full((self.n_legs, 3), -1, np.int8)
        for g, v in self.cce_uniform.items():
            cce[g] = v
        seq = self.check_overlaps()
        subop, _role, trank, sid, val = self.sem
        R = self.runs  # without the decoder's search keys (gkey, gid, pos, key2)
        runs = {"leg": R["leg"].astype(np.int32), "dir": R["dir"].astype(np.int8),
                "stream": R["stream"].astype(np.int8), "rank": R["rank"].astype(np.int32),
                "reg": R["reg"].astype(np.int32), "off": R["off"].astype(np.int64),
                "len": R["len"].astype(np.int64)}
        prog = RankProgram(
            rank=self.rank, entries=entries, legs=self.n_legs, bds=int(self.bd_len.size),
            l_step=L["step"].copy(), l_leaf=self.leaf.astype(np.int16),
            l_sdma=self.sdma.astype(np.int16), l_sem_first=L["sem_first"].copy(),
            l_sem_count=L["sem_count"].copy(), l_run_first=self.run_first.astype(np.int32),
            l_run_count=self.run_count.astype(np.int32), l_cce=cce, l_seq=seq,
            l_channel=self.ch.astype(np.int16), l_proxy_sends=self.l_proxy_sends.astype(np.int32),
            s_wait=subop == WAIT, s_rank=trank.astype(np.int32), s_sid=sid.astype(np.int16),
            s_val=val.astype(np.uint32), runs=runs,
            l_elem=L["elem_start"].astype(np.int64), l_num=L["num_elements"].copy(),
            late_error=self.late_error, event_hold=self.event_hold)
        if seq.any():
            prog.bds_arrays = (self.bd_leg, self.bd_first, self.bd_dir, self.bd_stream,
                               self.bd_rank, self.bd_reg, self.bd_soff, self.bd_len)
        return prog


class _RingLegArrays(NamedTuple):
    """The legs.bin arrays of :meth:`RankDecoder._ring_leg_arrays`: ``sel`` the records
    checked, ``by_entry`` them split by entry; their fields ``start``, ``count``, ``half``,
    ``got`` (``ring_step``), for every record; and what the check fills in by record:
    ``want_half`` (-2: not checked), ``s`` the step within the chunk group, ``g`` the chunk
    group, ``hops`` (-1: none) and ``checked``."""
    sel: np.ndarray
    by_entry: list
    start: np.ndarray
    count: np.ndarray
    half: np.ndarray
    got: np.ndarray
    want_half: np.ndarray
    s: np.ndarray
    g: np.ndarray
    hops: np.ndarray
    checked: np.ndarray


#: bytes per element by dtype code (0 for codes that are not dtypes)
_DSIZE_TABLE = np.array([DTYPE_SIZE.get(c, 0) if c in DType._value2member_map_ else 0
                         for c in range(16)], np.int64)


def _ring_step(op: str, n: int, i, phase2):
    """Seed 001 §4's step template: the ring step at which a ring of ``n`` members moves the
    chunk of the member ``i`` hops ahead: n - 1 - i in a reduce-scatter and in an
    all-reduce's reduce-scatter phase, 2n - 1 - i in its all-gather phase (``phase2``, by
    element), (n - i) % n in an all-gather (an all-reduce's direct_copy, at 0, is the
    caller's)."""
    if op == "ALLREDUCE":
        return np.where(phase2, 2 * n - 1 - i, n - 1 - i)
    return n - 1 - i if op == "REDUCE_SCATTER" else (n - i) % n


def _single_cycle_leaves(n: int, h_cw: int, cw: bool, i: int) -> tuple:
    """The leaves docs/DESIGN.md "Single-cycle ring" calls on a ring of ``n`` ranks (arcs
    [h_cw, n - 1 - h_cw]) on the CW channel of its pair (``cw``) or the CCW one, at the chunk
    whose root is ``i`` hops ahead on that channel's ring: at the root (``i`` 0) the CW
    channel's combine, ``recv_reduce_copy_send`` where a CCW partial comes in (h_ccw > 0),
    else ``recv_reduce_copy``; the CCW channel's ``direct_recv`` of that partial (h_ccw > 0)
    and ``direct_copy_send`` of the result (h_cw > 0); a one-rank group's ``direct_copy``.
    On the channel's own arc toward the root (``a`` = h_cw on CW, h_ccw on CCW; 1 <= i <= a)
    the farthest rank ``send``s its input (i = a), the others ``recv_reduce_send``; behind the
    root (d = n - i hops, 1 <= d <= the other arc b = n - 1 - a) the result comes back,
    ``direct_recv`` at the farthest (d = b), ``direct_recv_send`` before it."""
    if n == 1:
        return (DIRECT_COPY,)
    h_ccw = n - 1 - h_cw
    if i == 0:
        if cw:
            return (int(Leaf.recv_reduce_copy_send) if h_ccw else int(Leaf.recv_reduce_copy),)
        return ((DIRECT_RECV,) if h_ccw else ()) + ((int(Leaf.direct_copy_send),) if h_cw
                                                    else ())
    a = h_cw if cw else h_ccw
    if i <= a:
        return (int(Leaf.send) if i == a else int(Leaf.recv_reduce_send),)
    return (DIRECT_RECV if n - i == n - 1 - a else int(Leaf.direct_recv_send),)


@functools.lru_cache(maxsize=64)
def _single_cycle_calls(n: int, h_cw: int) -> np.ndarray:
    """The table of :func:`_single_cycle_leaves` over a ring of ``n`` ranks (arcs
    [h_cw, n - 1 - h_cw]): ``[cw, i, leaf]`` True where the step loop calls ``leaf`` on the
    CW (1) or CCW (0) channel at the chunk whose root is ``i`` hops ahead.  Built once per
    (n, h_cw) and read only (RankDecoder.check_single_cycle_legs indexes it for every SPAD
    entry: until 2026-12-07 rebuilt for each, 0.4 - 1.8 ms an entry at 128 ranks)."""
    calls = np.zeros((2, n, 256), bool)
    for cw in (0, 1):
        for j in range(n):
            calls[cw, j, list(_single_cycle_leaves(n, h_cw, bool(cw), j))] = True
    calls.setflags(write=False)
    return calls


def _kangaring_steps(op: str, leaf: np.ndarray, i: np.ndarray, u: int, host_cc: bool,
                     first: int = int(Leaf.direct_reduce_send_kangaring)
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The step of each KANGARING ring leaf ``leaf`` moving the chunk of a unit ``i`` hops
    ahead on a cycle of ``u`` units (RankDecoder.check_kangaring_legs), and whether the leaf is
    one the ring's step template calls there (docs/DESIGN.md "Kangaring"'s table); ``first``:
    the leaf of a reduce's first step (``send`` for a ring, each rank its own unit)."""
    L = Leaf
    if op == "ALLGATHER":
        # (a ring leg not in place copies its own block into its output first: direct_copy,
        # at step 0 with its send; a kangaring's send fans the block out itself)
        own = (leaf == int(L.send)) | ((leaf == DIRECT_COPY) & (first == int(L.send)))
        ok = np.where(i == 0, own,
                      np.where(i == 1, leaf == DIRECT_RECV, leaf == int(L.direct_recv_send)))
        return _ring_step(op, u, i, False), ok & (u > 1)
    if op == "REDUCE_SCATTER":
        own = leaf == int(L.recv_reduce_copy)
    else:
        own = np.isin(leaf, (int(L.recv_reduce_copy_send),) if host_cc else
                      (int(L.recv_reduce_copy), int(L.direct_copy_send)))
    ok = np.where(i == 0, own, np.where(i == u - 1, leaf == first,
                                        leaf == int(L.recv_reduce_send)))
    if op != "ALLREDUCE":
        return _ring_step(op, u, i, False), ok & (u > 1)
    later = np.where(i == 1, leaf == DIRECT_RECV, leaf == int(L.direct_recv_send)) & (i > 0)
    return _ring_step(op, u, i, later), (ok | later) & (u > 1)


def _kangaring_calls(op: str, i: int, u: int, host_cc: bool, first: int) -> tuple:
    """The (leaf, step) pairs :func:`_kangaring_steps` takes as the template's at the chunk of
    the unit ``i`` hops ahead on a cycle of ``u`` units (``u`` > 1)."""
    L = Leaf
    if op == "ALLGATHER":
        st = int(_ring_step(op, u, i, False))
        if i == 0:
            return ((int(L.send), st),) + (((DIRECT_COPY, st),) if first == int(L.send) else ())
        return ((DIRECT_RECV if i == 1 else int(L.direct_recv_send), st),)
    st = u - 1 - i
    if i == 0:
        own = ((int(L.recv_reduce_copy),) if op == "REDUCE_SCATTER" else
               (int(L.recv_reduce_copy_send),) if host_cc else
               (int(L.recv_reduce_copy), int(L.direct_copy_send)))
        return tuple((x, st) for x in own)
    out = ((first if i == u - 1 else int(L.recv_reduce_send), st),)
    if op == "ALLREDUCE":
        out += ((DIRECT_RECV if i == 1 else int(L.direct_recv_send), 2 * u - 1 - i),)
    return out


def _index_within(keys: np.ndarray) -> np.ndarray:
    """Position of each element among the earlier elements with the same key."""
    n = keys.size
    if not n:
        return np.zeros(0, np.int64)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    start = np.ones(n, bool)
    start[1:] = sk[1:] != sk[:-1]
    first = np.flatnonzero(start)
    grp = np.cumsum(start) - 1
    out = np.empty(n, np.int64)
    out[order] = np.arange(n) - first[grp]
    return out


@dataclass(eq=False)
class RankProgram:
    """One rank's decoded program, kept as arrays; :meth:`legs` builds executable legs lazily."""

    rank: int
    entries: list[Entry]
    legs: int
    bds: int
    l_step: np.ndarray
    l_leaf: np.ndarray
    l_sdma: np.ndarray
    l_sem_first: np.ndarray
    l_sem_count: np.ndarray
    l_run_first: np.ndarray
    l_run_count: np.ndarray
    l_cce: np.ndarray
    l_seq: np.ndarray
    l_channel: np.ndarray
    l_proxy_sends: np.ndarray
    s_wait: np.ndarray
    s_rank: np.ndarray
    s_sid: np.ndarray
    s_val: np.ndarray
    runs: dict
    l_elem: np.ndarray  # elem_start of each leg
    l_num: np.ndarray  # num_elements of each leg
    bds_arrays: tuple | None = None
    #: the error of a check the loader raises after the ring pairing (the rank's flat
    #: SINGLE_CYCLE_RING half and ring_step: RankDecoder.check_single_cycle_legs), or None
    late_error: SimulationError | None = None
    #: a 0xBF word's event wait that disagrees with its leg's sem.bin wait (RankDecoder.
    #: _check_events), told by resolve_event_holds once every rank is decoded; or None
    event_hold: "EventHold | None" = None

    def waits_of(self, first: int, count: int, wait: bool = True) -> list[tuple[int, int]]:
        """(rank, semaphore) pairs waited on (``wait``; else increased) by legs
        [first, first + count)."""
        s0 = int(self.l_sem_first[first]) if count else 0
        s1 = int(self.l_sem_first[first + count - 1] + self.l_sem_count[first + count - 1]) \
            if count else 0
        m = self.s_wait[s0:s1].astype(bool) == wait
        return list(zip(self.s_rank[s0:s1][m].tolist(), self.s_sid[s0:s1][m].tolist()))

    def legs_of(self, ent: Entry, channel: int) -> QueueLegs:
        """The executable legs of one (entry, channel) queue, a sequence that builds them a
        batch at a time as the run reaches them (:class:`QueueLegs`)."""
        first, count = ent.queues.get(channel, (0, 0))
        return QueueLegs(self, ent, channel, first, count)

    def build_legs(self, ent: Entry, channel: int, first: int, count: int) -> list[Leg]:
        """Executable legs ``[first, first + count)`` (``legs.bin`` records) of one
        (entry, channel) queue."""
        if not count:
            return []
        last = first + count
        steps = self.l_step[first:last].tolist()
        leaves = self.l_leaf[first:last].tolist()
        sdma = self.l_sdma[first:last].tolist()
        seq = self.l_seq[first:last].tolist()
        cce = self.l_cce[first:last].tolist()
        sf = self.l_sem_first[first:last].tolist()
        sc = self.l_sem_count[first:last].tolist()
        s0, s1 = sf[0], sf[-1] + sc[-1]
        s_wait = self.s_wait[s0:s1].tolist()
        s_rank = self.s_rank[s0:s1].tolist()
        s_sid = self.s_sid[s0:s1].tolist()
        s_val = self.s_val[s0:s1].tolist()
        rf = self.l_run_first[first:last].tolist()
        rc = self.l_run_count[first:last].tolist()
        R = self.runs
        r0, r1 = rf[0], rf[-1] + rc[-1]
        r_dir = R["dir"][r0:r1].tolist()
        r_stream = R["stream"][r0:r1].tolist()
        r_rank = R["rank"][r0:r1].tolist()
        r_reg = R["reg"][r0:r1].tolist()
        r_off = R["off"][r0:r1].tolist()
        r_len = R["len"][r0:r1].tolist()
        trig = ent.trigger.ordinal
        out = []
        for k in range(count):
            waits, incs = [], []
            for j in range(sf[k] - s0, sf[k] - s0 + sc[k]):
                (waits if s_wait[j] else incs).append((s_rank[j], s_sid[j], s_val[j]))
            leg = Leg(self.rank, first + k, ent.index, channel, steps[k], leaves[k], trig,
                      sdma[k], waits, incs, [], [], None, seq[k], 0)
            if sdma[k]:
                srcs, dsts = leg.srcs, leg.dsts
                for j in range(rf[k] - r0, rf[k] - r0 + rc[k]):
                    lst = dsts if r_dir[j] else srcs
                    st = r_stream[j]
                    while len(lst) <= st:
                        lst.append([])
                    lst[st].append((r_rank[j], r_reg[j], r_off[j], r_len[j]))
                leg.nbytes = sum(x[3] for x in srcs[0])
                if cce[k][0] >= 0:
                    leg.cce = tuple(cce[k])
                if seq[k]:
                    leg.tiles = self._tile_runs(first + k)
            out.append(leg)
        return out

    def _tile_runs(self, g: int) -> list:
        leg_, first, dirr, stream, rank, reg, soff, ln = self.bds_arrays
        tiles = []
        cur = None
        # the BDs are in leg order (``dma_count`` of each leg in turn): the leg's are one
        # slice, found by bisection (until 2026-12-06 a mask over all the rank's BDs per leg)
        lo, hi = np.searchsorted(leg_, (g, g + 1)).tolist()
        for i in range(lo, hi):
            if first[i]:
                cur = ([], [])
                tiles.append(cur)
            lst = cur[1] if dirr[i] else cur[0]
            k = int(stream[i])
            while len(lst) <= k:
                lst.append([])
            lst[k].append((int(rank[i]), int(reg[i]), int(soff[i]), int(ln[i])))
        return tiles


class QueueLegs:
    """The executable legs of one (entry, channel) queue as a sequence: leg ``k`` is built
    (with the next ones, :data:`BATCH` at a time) when first read, kept until replaced, and
    freed once the engine's queue takes it (:meth:`take`: the queue drops it once it has run)
    or it is set to None.  So only the legs about to run exist, not every leg of every
    rank's current entry (until 2026-12-06 a queue's legs were all built when its entry
    started: over hundreds of ranks, a trigger's legs at once, some 600 bytes each).
    :data:`BATCH` is 32 (256 earlier on 2026-12-06: the legs built ahead were then about a
    fifth of a HIER or KANGARING run's peak; at 32 the peak is 7 - 11 % lower and the run's
    time the same, docs/SIMULATOR.md §3 "Memory").  Reading, replacing and swapping legs
    (what the tests' hooks do) work as on a list."""

    BATCH = 32

    __slots__ = ("prog", "entry", "channel", "first", "count", "built", "freed")

    def __init__(self, prog: RankProgram, entry: Entry, channel: int, first: int, count: int):
        self.prog = prog
        self.entry = entry
        self.channel = channel
        self.first = first
        self.count = count
        self.built: dict[int, Leg | None] = {}  # position -> leg, built and not yet freed
        self.freed = bytearray(count)  # 1: set to None

    def __len__(self) -> int:
        return self.count

    def _index(self, k: int) -> int:
        if k < 0:
            k += self.count
        if not 0 <= k < self.count:
            raise IndexError("queue leg index out of range")
        return k

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self.count))]
        k = self._index(k)
        leg = self.built.get(k, self)
        if leg is not self:
            return leg
        if self.freed[k]:
            return None
        hi = k + 1
        while hi < min(k + self.BATCH, self.count) and hi not in self.built \
                and not self.freed[hi]:
            hi += 1
        legs = self.prog.build_legs(self.entry, self.channel, self.first + k, hi - k)
        self.built.update(zip(range(k, hi), legs))
        return legs[0]

    def __setitem__(self, k: int, leg: Leg | None) -> None:
        k = self._index(k)
        if leg is None:
            self.built.pop(k, None)
            self.freed[k] = 1
        else:
            self.built[k] = leg
            self.freed[k] = 0

    def __iter__(self):
        return (self[k] for k in range(self.count))

    def take(self, k: int) -> Leg:
        """Leg ``k``, forgotten here (the engine's queue holds it while it runs)."""
        leg = self.built.pop(k, self)
        if leg is self:
            leg = self[k]
            self.built.pop(k, None)
        self.freed[k] = 1
        return leg


def _event_balance(programs: dict[int, RankProgram], h: EventHold, sids: set[int],
                   net: dict | None = None) -> tuple[dict[int, int], dict[int, int]] | None:
    """(increments, waits) of each of ``sids`` of rank ``h.rank`` by the legs of ``h``'s
    entry (its trigger and leg) on every rank, each summed by value, and by the net proxy
    where ``net`` gives its increments ((rank, trigger, leg, sid) -> count, FifoDecoder.
    recv_increments); None when a rank of the trigger is not decoded or a net op of the
    rank receives on one of them and ``net`` is not given."""
    if sids & h.net_sids and net is None:
        return None
    inc = {x: int((net or {}).get((h.rank, h.trigger, h.leg_name, x), 0)) for x in sids}
    wait = dict.fromkeys(sids, 0)
    seen = False
    for q, prog in programs.items():
        for ent in prog.entries:
            if ent.trigger.ordinal != h.trigger or ent.leg != h.leg_name:
                continue
            if q == h.rank:
                seen = True
            group = set(ent.trigger.group)
            for first, count in ent.queues.values():
                if not count:
                    continue
                last = first + count - 1
                s0 = int(prog.l_sem_first[first])
                s1 = int(prog.l_sem_first[last] + prog.l_sem_count[last])
                w = prog.s_wait[s0:s1].astype(bool)
                on = (prog.s_rank[s0:s1] == h.rank)
                for sid in sids:
                    m = on & (prog.s_sid[s0:s1] == sid)
                    v = prog.s_val[s0:s1].astype(np.int64)
                    inc[sid] += int(v[m & ~w].sum())
                    wait[sid] += int(v[m & w].sum())
    if not seen or not group <= set(programs):
        return None
    return inc, wait


def resolve_event_holds(programs: dict[int, RankProgram], net: dict | None = None,
                        defer: bool = True) -> bool:
    """docs/SIMULATOR.md §2 "Which record a disagreement names": a mesh or RDH leg's 0xBF
    word whose wait (``wait_idx``, ``semaphore_value``) disagrees with its leg's first
    sem.bin wait (held by the rank's decoder, RankDecoder._check_events) is settled by the
    semaphores' increments: an event's waits on a rank take, in all, what the legs of the
    trigger's entry on every rank add to it (FORMATS §7 "Events"). Where the sem.bin wait
    as written breaks that balance and the word's would keep it, the sem.bin record is
    named, with the word's value as the right one; where the word's would break it, the
    word is named (as before); otherwise both are. A hold on a semaphore a net op of its
    rank receives on is left (True returned; ``defer``) until ``net`` gives the proxy's
    increments (FORMATS §8.2: +1 on the receiving op's inc_recv_complete after each receive
    entry with complete = 1), once the FIFOs are decoded (since 2026-12-07, fixer 59b: both
    records were named, `nothing else read tells which`, as they still are where the FIFOs
    cannot be read: ``net`` None, ``defer`` False)."""
    left = False
    for r in sorted(programs):
        h = programs[r].event_hold
        if h is None:
            continue
        sids = {h.bd_sid, h.word_sid}
        if defer and net is None and sids & h.net_sids:
            left = True
            continue
        window = range(SEM_EVENT_BASE, SEM_EVENT_BASE + ENC_MESH_MAX_NUM_EVENTS)
        if h.word_sid not in window and h.bd_sid in window:
            # FORMATS §4 (MESH, INTRA_RDH rows): a mesh or RDH leg's word waits an event
            # semaphore, 192 + t; one outside the events is the wrong record (review 57o)
            raise h.word_error
        bal = None
        if h.word_sid in window:
            bal = _event_balance(programs, h, sids, net)
        if bal is not None:
            inc, wait = bal
            as_is = all(inc[x] == wait[x] for x in sids)
            alt = dict(wait)
            alt[h.bd_sid] -= h.bd_val
            alt[h.word_sid] += h.word_val
            as_word = all(inc[x] == alt[x] for x in sids)
            by_net = net is not None and bool(sids & h.net_sids)
            src = (f"the legs of trigger {h.trigger}'s entry on all its ranks"
                   + (" and the net proxy's receives (FORMATS §8.2)" if by_net else ""))
            if as_word and not as_is:
                what = (f"{sem_name(x)} of rank {r} gets {inc[x]} from {src}, and its waits "
                        f"here take {wait[x]}" for x in sorted(sids))
                if h.word_sid != h.bd_sid:
                    raise SimulationError(
                        f"wait of {sem_name(h.bd_sid)} by {h.bd_val} should be of "
                        f"{sem_name(h.word_sid)} by {h.word_val}, the one the leg's 0xBF word "
                        f"(sb2sb.bin record {h.word}) carries: {'; '.join(what)} "
                        f"({h.leaf} leg, legs.bin record {h.leg})",
                        **_where(r, "sem.bin", h.bd, "addr"))
                raise SimulationError(
                    f"wait value should be {h.word_val}, the one the leg's 0xBF word (sb2sb.bin "
                    f"record {h.word}) carries, not {h.bd_val}: {next(what)} ({h.leaf} leg, "
                    f"legs.bin record {h.leg})",
                    **_where(r, "sem.bin", h.bd, "value"))
            if as_is and not as_word:
                raise h.word_error
            if not as_is:  # (neither keeps the balance: both records are off)
                adds = ", ".join(f"{inc[x]} to {sem_name(x)}" for x in sorted(sids))
                raise SimulationError(
                    f"the 0xBF word waits {sem_name(h.word_sid)} >= {h.word_val}, the leg's first "
                    f"wait (sem.bin record {h.bd}) {sem_name(h.bd_sid)} >= {h.bd_val}, and "
                    f"neither keeps rank {r}'s waits at what {src} add ({adds}) ({h.leaf} leg, "
                    f"legs.bin record {h.leg})",
                    **_where(r, "sb2sb.bin", h.word, h.word_error.where.field))
        raise SimulationError(
            f"the 0xBF word waits {sem_name(h.word_sid)} >= {h.word_val}, the leg's first "
            f"wait (sem.bin record {h.bd}) {sem_name(h.bd_sid)} >= {h.bd_val}: one of the two "
            f"records is wrong, and nothing else read tells which ({h.leaf} leg, legs.bin "
            f"record {h.leg})", **_where(r, "sb2sb.bin", h.word, h.word_error.where.field))
    return left


def decode_rank(layout: Layout, triggers: dict[int, TriggerSpec], rf: RankFiles) -> RankProgram:
    return RankDecoder(layout, triggers, rf).decode()


#: The entries whose consuming legs take exactly what their ring predecessor sent (RING and
#: SINGLE_CYCLE_RING, flat or a HIER leg; a KANGARING unit's legs pair otherwise)
PAIRED_RINGS = frozenset({"RING", "SINGLE_CYCLE_RING"})
_CONSUMING, _SENDING = np.array(sorted(CONSUMING)), np.array(sorted(SENDING))


def check_ring_pairing(programs: dict[int, RankProgram]) -> None:
    """docs/SIMULATOR.md §2 "Ring pairing": on a RING or SINGLE_CYCLE_RING channel the k-th
    leg of a rank that consumes its predecessor's data (CONSUMING, ``direct_recv`` included)
    takes the elements of the predecessor's k-th sending leg (SENDING) of the same trigger,
    leg and channel: the same ``elem_start`` and ``num_elements``.  A leg that moves data is
    also checked by the run's numbers; a ``direct_recv`` has no data, only this count
    (FORMATS.md §3).  And the two have as many legs: every piece sent is consumed once."""
    cons_of, sent_of, pred_of = {}, {}, {}
    for r, prog in programs.items():
        for ent in prog.entries:
            if ent.trigger.entry_algorithm(ent.leg) not in PAIRED_RINGS:
                continue
            for c, (first, count) in ent.queues.items():
                idx = first + np.arange(count, dtype=np.int64)
                lf = prog.l_leaf[idx]
                key = (ent.trigger.ordinal, ent.leg, c)
                cons_of[key + (r,)] = idx[np.isin(lf, _CONSUMING)]
                sent_of[key + (r,)] = idx[np.isin(lf, _SENDING)]
                s_ = ent.trigger.successor(c, r, ent.leg)
                if s_ is not None and s_ != r:
                    pred_of[key + (s_,)] = r
    for k in sorted(cons_of):
        p = pred_of.get(k)  # a predecessor has this trigger, leg and channel: sent_of has it
        if p is None:
            continue
        cons, sent = cons_of[k], sent_of[k[:3] + (p,)]
        m = min(cons.size, sent.size)
        me, pp = programs[k[3]], programs[p]
        ce, cn = me.l_elem[cons[:m]], me.l_num[cons[:m]]
        se, sn = pp.l_elem[sent[:m]], pp.l_num[sent[:m]]
        i = _first((ce != se) | (cn != sn))
        if i is not None:
            g, j = int(cons[i]), int(sent[i])
            raise SimulationError(
                f"consuming leg {i + 1} of channel {k[2]} "
                f"({LEAF_NAMES.get(int(me.l_leaf[g]), me.l_leaf[g])}) takes elements "
                f"[{ce[i]}, {ce[i] + cn[i]}), but sending leg {i + 1} of its ring predecessor, "
                f"rank {p} (its legs.bin record {j}, "
                f"{LEAF_NAMES.get(int(pp.l_leaf[j]), pp.l_leaf[j])}), "
                f"sent [{se[i]}, {se[i] + sn[i]})",
                **_where(k[3], "legs.bin", g, "elem_start" if ce[i] != se[i] else "num_elements",
                         trigger=k[0]))
        if cons.size != sent.size:
            # the first consuming leg without a send, or the last when sends are left over
            g = int(cons[min(m, cons.size - 1)]) if cons.size else None
            raise SimulationError(
                f"channel {k[2]} has {cons.size} consuming legs, but its ring predecessor, "
                f"rank {p}, has {sent.size} sending legs: every piece sent is consumed once",
                **_where(k[3], "legs.bin", g, "leaf", trigger=k[0]))
