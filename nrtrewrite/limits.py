"""Every hard limit of nrtrewrite in one place, with its source, and the plan-level checks.

Each constant is *imported* from the module that enforces it (one definition, one
place); :data:`LIMITS` lists them with a one-line source note and where they are
enforced, and docs/RELIABILITY.md gives the error text and the test of each.  The
few limits defined here are the rank-independent checks of a lowering plan,
:func:`check_plan`, run before any rank is lowered (``lower``, ``schedule``,
``simulate`` via :func:`nrtrewrite.cli.lower.load_and_plan`, and
:func:`nrtrewrite.bundle.write_output`): they refuse in milliseconds what would
otherwise fail (or exhaust memory) deep inside the emitter.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from nrtrewrite.codes import (
    DTYPE_SIZE, ENC_MESH_MAX_NUM_EVENTS, NEC_MAX_COMM_N, SBUF_PARTITIONS, EncOpType,
)
from nrtrewrite.emit.address import (
    CORE_WINDOW, DRAM_BASE, DRAM_BELOW_EVT_SEM, SBUF_BASE, SBUF_WINDOW_LIMIT, SEM_CHANNEL_BASE,
    SEMAPHORES_PER_CORE,
    SEMS_PER_CHANNEL,
)
from nrtrewrite.emit.formats import (
    BD_MAX_BYTES, BD_RING_ENTRIES, MAX_MANIFEST_BYTES, NET_ENDING_RECV_CREDITS,
    NET_INDEX_LOOP_SIZE, NET_INITIAL_SEND_CREDITS, NET_MAX_CREDITS, SPAD_BYTES, SPAD_DTYPE,
    T3D_DIM_CAP, TPINC_MAX_BDS,
)
from nrtrewrite.emit.tiling import DEFAULT_HW_GENERATION, SDMA_MAX_CCE_ELEMENTS, cce_max_elements
from nrtrewrite.errors import LimitError
from nrtrewrite.neff.instructions import trigger_where
from nrtrewrite.neff.container import (
    MAX_DIRECTORY_ENTRIES, MAX_FILE_BYTES, MAX_MEMBER_BYTES, MAX_MEMBER_NAME_BYTES, MAX_MEMBERS,
    MAX_SPEC_FILE_BYTES, MAX_TAR_HEADER_BYTES, MAX_TOTAL_BYTES, MAX_TRIGGERS,
)
from nrtrewrite.jsonin import MAX_JSON_INT_DIGITS
from nrtrewrite.neff.reader import MAX_RANK, MAX_VAR_ID, MAX_VAR_SIZE
from nrtrewrite.topology.model import (
    MAX_CORES_PER_DEVICE, MAX_DEVICES_PER_NODE, MAX_TOPOLOGY_FILE_BYTES, MAX_TOPOLOGY_RANKS,
)
from nrtrewrite.topology.rings import NEC_MAX_CHANNELS

#: CCE elements per descriptor on the default platform (trn2, NeuronCore-v3); each
#: platform's is ``cce_max_elements(Platform.hw_generation)`` (trn1, v2: 1024).
CCE_MAX_ELEMENTS = cce_max_elements(DEFAULT_HW_GENERATION)
#: SPAD entries per subgraph per rank: the 4 KiB CTRL SPAD of 8-byte entries (derived).
SPAD_ENTRIES = SPAD_BYTES // SPAD_DTYPE.itemsize
#: SPAD entries of one rank over all its subgraphs: ``spad_index``, the entry's index in the
#: rank's ``spad.bin`` (legs.bin, the TOPSP_KICK word: docs/FORMATS.md §3, §9), is a u16.
#: MAX_TRIGGERS alone does not keep under it: a HIER trigger takes three entries.
MAX_RANK_SPAD_ENTRIES = 1 << 16
#: The TENSOR3D ``start_addr`` of a 0xBF word is a u32 (docs/FORMATS.md §4).
T3D_START_ADDR_LIMIT = 1 << 32
#: Semaphores a ring channel uses (recv, send, post, dma_compl) above the TOP_SP's own 16.
CHANNEL_SEMAPHORES = SEM_CHANNEL_BASE + SEMS_PER_CHANNEL * NEC_MAX_CHANNELS
#: Estimated data descriptors (BDs) one rank's lowering may need (ours): 64 Mi, i.e. about
#: 1 GiB of 16-byte records per rank, the bound on what one worker holds in memory.
MAX_RANK_DESCRIPTORS = 1 << 26


@dataclass(frozen=True)
class Limit:
    name: str
    value: int
    source: str
    enforced: str


#: Every limit: name, value, source, where it is enforced (docs/RELIABILITY.md has the rest).
LIMITS: tuple[Limit, ...] = (
    Limit("MAX_FILE_BYTES", MAX_FILE_BYTES, "ours: the input file, from its size before reading",
          "neff/container.read_file_bytes, diff._NeffFile.walk"),
    Limit("MAX_TOTAL_BYTES", MAX_TOTAL_BYTES, "ours: the decompressed tar stream (streaming "
          "gunzip stops at it)", "neff/container._Gunzip; neff/assembler.check_archive and "
          "bundle._check_neff_size (a tar counted from its members' sizes before it is "
          "written)"),
    Limit("MAX_MEMBER_BYTES", MAX_MEMBER_BYTES, "ours: one tar member, from its tar header",
          "neff/container.iter_members; neff/assembler (a stream's words, a JSON member's "
          "bytes counted before it is written)"),
    Limit("MAX_MEMBERS", MAX_MEMBERS, "ours: tar members (file members; directory entries "
          "are not members)", "neff/container.iter_members; neff/assembler.member_hatches "
          "(counted as members are placed)"),
    Limit("MAX_DIRECTORY_ENTRIES", MAX_DIRECTORY_ENTRIES, "ours: tar directory entries "
          "(accepted and left out, bounded apart from MAX_MEMBERS)",
          "neff/container.iter_members"),
    Limit("MAX_TAR_HEADER_BYTES", MAX_TAR_HEADER_BYTES, "ours: one tar header read (a pax "
          "extended header or GNU long name is read whole, outside MAX_MEMBER_BYTES)",
          "neff/container._TarStream.read"),
    Limit("MAX_MEMBER_NAME_BYTES", MAX_MEMBER_NAME_BYTES, "ours: a member name's UTF-8 bytes "
          "(Linux PATH_MAX)", "neff/container.check_member_name"),
    Limit("MAX_TRIGGERS", MAX_TRIGGERS, "ours: the u16 spad_index of legs.bin and TOPSP_KICK",
          "neff/reader.decode_stream_triggers"),
    Limit("MAX_RANK", MAX_RANK, "ours: ranks are non-negative int32 (net FIFO src_rank/dst_rank "
          "are i32)", "neff/reader._read_groups"),
    Limit("MAX_VAR_ID", MAX_VAR_ID, "NEFF-LIKE.md §2: var ids are u32 in the trigger words",
          "neff/reader._read_vars"),
    Limit("MAX_VAR_SIZE", MAX_VAR_SIZE, "ours: sizes are u64", "neff/reader._read_vars"),
    Limit("MAX_JSON_INT_DIGITS", MAX_JSON_INT_DIGITS, "CPython's default int-from-string limit "
          "(sys.int_info.default_max_str_digits); the contract's integers have at most 20",
          "jsonin.loads (neff/reader.load_json_member, topology/model.load_topology)"),
    Limit("NEC_MAX_COMM_N", NEC_MAX_COMM_N, "nec.h: replica groups per NEFF",
          "neff/reader._read_groups, neff/reader._check_comm_count"),
    Limit("SBUF_PARTITIONS", SBUF_PARTITIONS, "NEFF-LIKE.md §1: state-buffer partitions",
          "neff/reader._read_vars"),
    Limit("MAX_TOPOLOGY_RANKS", MAX_TOPOLOGY_RANKS, "ours: ranks a topology is built with",
          "topology/model.check_topology_size"),
    Limit("MAX_SPEC_FILE_BYTES", MAX_SPEC_FILE_BYTES, "ours: an assemble spec file, from its "
          "size before reading", "neff/assembler.load_spec"),
    Limit("MAX_TOPOLOGY_FILE_BYTES", MAX_TOPOLOGY_FILE_BYTES, "ours: a topology file, from its "
          "size before reading (to_json of MAX_TOPOLOGY_RANKS ranks is about 121 MB)",
          "topology/model.load_topology"),
    Limit("MAX_DEVICES_PER_NODE", MAX_DEVICES_PER_NODE, "6-bit CAYMAN_ID of the SoC address "
          "(docs/FORMATS.md §10)", "topology/model._check_devices"),
    Limit("MAX_CORES_PER_DEVICE", MAX_CORES_PER_DEVICE, "ours: the semaphore address's TOP_SP "
          "terms (sp & 7) << 30 and (sp > 7) << 47 tell 16 apart (docs/FORMATS.md §10; seed 000 "
          "§4.1 gives only the aperture's base and windows)", "topology/model.platform_from_json"),
    Limit("NEC_MAX_CHANNELS", NEC_MAX_CHANNELS, "nec.h: channels per collective",
          "topology/rings.ring_orders, select (clamp), limits.check_plan"),
    Limit("SEMAPHORES_PER_CORE", SEMAPHORES_PER_CORE, "aws-neuron-driver: 256 per core on v2/v3",
          "emit/address.sema_address, emit/address.channel_sem, emit/legs, limits.check_plan"),
    Limit("SPAD_BYTES", SPAD_BYTES, "seed 000 §4.3: the TOP_SP CTRL SPAD is 4 KiB",
          "serialize.serialize_spad, limits.check_plan"),
    Limit("SPAD_ENTRIES", SPAD_ENTRIES, "derived: 4 KiB / 8-byte spad_ctrl_entry, per subgraph",
          "serialize.serialize_spad, limits.check_plan"),
    Limit("MAX_RANK_SPAD_ENTRIES", MAX_RANK_SPAD_ENTRIES, "ours: the u16 spad_index (an entry's "
          "index in the rank's spad.bin) of legs.bin and the TOPSP_KICK word",
          "limits.check_plan; select.spad_pass_over passes the default's HIER over first"),
    Limit("NET_MAX_CREDITS", NET_MAX_CREDITS, "seed 003 §3: credits asserted in (0, 0x1FF]",
          "limits.check_plan"),
    Limit("NET_INDEX_LOOP_SIZE", NET_INDEX_LOOP_SIZE, "seed 003 §3: net_idx_loop_size",
          "emit/legs (written verbatim in every net_ops_info)"),
    Limit("ENC_MESH_MAX_NUM_EVENTS", ENC_MESH_MAX_NUM_EVENTS, "nec.h: mesh events",
          "compose/events.EventSchedule.add (not reached: 47 event types, each used once)"),
    Limit("CCE_MAX_ELEMENTS", CCE_MAX_ELEMENTS,
          "aws_hal_get_sdma_max_cce_elements: 2048 on v3/v4 (trn2), 1024 on v2 (trn1); the "
          "value is trn2's, each platform's hw_generation picks its own",
          "emit/tiling.tile_elements (by construction, with the platform's hw_generation)"),
    Limit("T3D_DIM_CAP", T3D_DIM_CAP, "seed 000: t3d_element_count <= 256, read per dimension",
          "emit/legs 0xBF pieces (by construction)"),
    Limit("BD_MAX_BYTES", BD_MAX_BYTES, "al_udma: 16-bit BD length (0 = 65536)",
          "emit/tiling (packet <= 64 KiB), emit/legs (LimitError)"),
    Limit("TPINC_MAX_BDS", TPINC_MAX_BDS, "u16 m2s / s2m of a tp_inc_steps record (seed 000 "
          "§4.3: M2S / S2M tail-pointer increments per step)", "emit/legs (LimitError)"),
    Limit("BD_RING_ENTRIES", BD_RING_ENTRIES, "ours: BD ring per channel queue; the generation "
          "tag counts wraps mod 4", "emit/legs (by construction)"),
    Limit("T3D_START_ADDR_LIMIT", T3D_START_ADDR_LIMIT, "u32 TENSOR3D start_addr",
          "limits.check_plan (DRAM), emit/address.build_memory_map (SBUF), emit/legs"),
    Limit("SBUF_WINDOW_LIMIT", SBUF_WINDOW_LIMIT, "u32 TENSOR3D start_addr over 128 partitions",
          "emit/address.build_memory_map"),
    Limit("CORE_WINDOW", CORE_WINDOW, "ours: per-core address window; DRAM vars, scratch and "
          "gateway fit below SBUF_BASE", "emit/address.build_memory_map"),
    Limit("DRAM_BELOW_EVT_SEM", DRAM_BELOW_EVT_SEM, "derived: on a device of more than 8 "
          "logical cores, core 8's window (8 << 36) holds the EVT_SEM aperture of TOP_SPs 0..7 "
          "(0x82_8000_0000, seed 000 §4.1), so the DRAM layout ends below it",
          "emit/address.build_memory_map"),
    Limit("MAX_RANK_DESCRIPTORS", MAX_RANK_DESCRIPTORS, "ours: about 1 GiB of records per rank",
          "limits.check_plan"),
    Limit("MAX_MANIFEST_BYTES", MAX_MANIFEST_BYTES, "ours: an output's manifest.json, top-level "
          "or a rank's, from its size before reading (a rank manifest is at most about 842 MB; "
          "a top-level one has no bound but this)",
          "diff._manifest_size, simulate/artifacts._check_manifest_size, "
          "bundle._check_manifest_size (lower)"),
)


def _sem_check() -> None:
    if CHANNEL_SEMAPHORES > SEMAPHORES_PER_CORE:  # pragma: no cover - constants
        raise LimitError(f"{NEC_MAX_CHANNELS} channels need {CHANNEL_SEMAPHORES} semaphores, a "
                         f"core has {SEMAPHORES_PER_CORE}")


def check_credits(initial: int = NET_INITIAL_SEND_CREDITS,
                  ending: int = NET_ENDING_RECV_CREDITS) -> None:
    """The runtime asserts both credit counts in (0, NET_MAX_CREDITS] (seed 003 §3)."""
    for name, val in (("initial_send_credits", initial), ("ending_recv_credits", ending)):
        if not 0 < val <= NET_MAX_CREDITS:
            raise LimitError(f"{name} {val} outside (0, {NET_MAX_CREDITS:#x}] (NET_MAX_CREDITS)",
                             field=name)


def start_addr_refusal(nbytes: int) -> str | None:
    """Why ``lower`` refuses a DRAM collective whose element space spans ``nbytes`` bytes
    (more than a 32-bit TENSOR3D ``start_addr`` addresses), or None; ``explain`` shows the
    same reason."""
    if nbytes <= T3D_START_ADDR_LIMIT:
        return None
    return (f"the collective's buffers span {nbytes} bytes; a 0xBF word's 32-bit TENSOR3D "
            f"start_addr addresses at most {T3D_START_ADDR_LIMIT} (T3D_START_ADDR_LIMIT)")


def check_start_addr(trig) -> None:
    """:func:`start_addr_refusal` of a DRAM trigger (SBUF operands are access patterns, no
    TENSOR3D start_addr) as a :class:`LimitError` at its ``num_elements``."""
    if trig.src.ap is None:
        why = start_addr_refusal(element_space(trig) * DTYPE_SIZE[trig.dtype])
        if why is not None:
            raise LimitError(why, **trigger_where(trig, "num_elements"))


def element_space(trig) -> int:
    """Elements of the collective's element space: what a TENSOR3D start_addr indexes."""
    return trig.num_elements * trig.group_size if trig.op == EncOpType.ALLGATHER \
        else trig.num_elements


def _runs(ap) -> int:
    """Contiguous runs of an SBUF access pattern (one BD each; dim 0 contiguous at step 1)."""
    (s0, n0), (_s1, n1), (_s2, n2) = ap.dims
    return ap.partition_count * n1 * n2 * (1 if s0 == 1 else n0)


def descriptors(trig) -> int:
    """Estimated data BDs one rank of the group needs for ``trig`` (a lower bound of the
    emitter's count: one BD per 64 KiB, or per contiguous SBUF run, per pass over the data,
    read and write)."""
    dsize = DTYPE_SIZE[trig.dtype]
    passes = 2 if trig.op == EncOpType.ALLREDUCE else 1
    if trig.src.ap is not None:
        runs = max(_runs(trig.src.ap), _runs(trig.dst.ap))
        if trig.op == EncOpType.ALLGATHER:
            runs = max(runs, _runs(trig.src.ap) * trig.group_size)
    else:
        runs = -(-element_space(trig) * dsize // BD_MAX_BYTES)
    return 2 * passes * runs


def check_plan(plan) -> None:
    """Every rank-independent hard limit of a lowering plan; :class:`LimitError` naming where.

    * SPAD: at most :data:`SPAD_ENTRIES` entries per subgraph on any rank (replica groups of
      one subgraph are disjoint, so a rank's count is its group's trigger count), and at most
      :data:`MAX_RANK_SPAD_ENTRIES` over all its subgraphs;
    * channels: at most :data:`NEC_MAX_CHANNELS` per trigger, hence at most
      :data:`CHANNEL_SEMAPHORES` of the core's :data:`SEMAPHORES_PER_CORE` semaphores;
    * net credits in (0, :data:`NET_MAX_CREDITS`];
    * TENSOR3D: a DRAM trigger's element space must be addressable by the u32 start_addr;
    * volume: at most :data:`MAX_RANK_DESCRIPTORS` estimated data BDs per rank.
    """
    _sem_check()
    check_credits()
    per_group: dict[tuple[str, tuple[int, ...]], list] = defaultdict(list)
    desc_by_group: dict[tuple[int, ...], int] = defaultdict(int)
    first_by_group: dict[tuple[int, ...], object] = {}
    for tp in plan.triggers:
        trig = tp.trigger
        group = tuple(tp.group)
        # one SPAD entry per trigger, one per leg for a HIER chain
        entries = getattr(getattr(tp, "prepared", None), "entries", 1)
        per_group[(trig.subgraph, group)].extend([trig] * entries)
        n_ch = getattr(tp.selection, "n_channels", 1)
        if n_ch > NEC_MAX_CHANNELS:
            raise LimitError(f"{n_ch} channels, at most {NEC_MAX_CHANNELS} (NEC_MAX_CHANNELS)",
                             **trigger_where(trig))
        check_start_addr(trig)
        desc_by_group[group] += descriptors(trig)
        first_by_group.setdefault(group, trig)
        if desc_by_group[group] > MAX_RANK_DESCRIPTORS:
            raise LimitError(
                f"the ranks of replica group {short_group(group)} need about "
                f"{desc_by_group[group]} data descriptors by this trigger, more than "
                f"{MAX_RANK_DESCRIPTORS} (MAX_RANK_DESCRIPTORS)", **trigger_where(trig))
    spad_by_group: dict[tuple[int, ...], list] = defaultdict(list)  # over the subgraphs
    for (sg, group), trigs in per_group.items():
        if len(trigs) > SPAD_ENTRIES:
            raise LimitError(
                f"{len({id(t) for t in trigs})} collectives on replica group "
                f"{short_group(group)} need {len(trigs)} SPAD entries on each of its ranks; "
                f"the {SPAD_BYTES}-byte TOP_SP CTRL SPAD holds {SPAD_ENTRIES} per subgraph",
                **trigger_where(trigs[SPAD_ENTRIES]))
        spad_by_group[group].extend(trigs)
    _check_rank_spad_entries(spad_by_group)
    # groups of different subgraphs may share ranks: add up per rank (<= NEC_MAX_COMM_N groups)
    if (over := _rank_over(desc_by_group, MAX_RANK_DESCRIPTORS)) is not None:
        raise LimitError(f"the rank needs about {over[1]} data descriptors over all its "
                         f"collectives, more than {MAX_RANK_DESCRIPTORS} (MAX_RANK_DESCRIPTORS)",
                         rank=over[0])


def _rank_over(by_group: dict[tuple[int, ...], int], limit: int) -> tuple[int, int] | None:
    """The first rank (and its count so far) whose groups' counts ``by_group`` add up past
    ``limit``, groups of different subgraphs sharing ranks; None when none does (or there is
    one group: its own count is checked where it is made).  The walk over the groups' ranks
    is skipped when all the counts together stay under ``limit``."""
    if len(by_group) < 2 or sum(by_group.values()) <= limit:
        return None
    per_rank: dict[int, int] = defaultdict(int)
    for group, n in by_group.items():
        for r in group:
            per_rank[r] += n
            if per_rank[r] > limit:
                return r, per_rank[r]
    return None


def _check_rank_spad_entries(spad_by_group: dict[tuple[int, ...], list]) -> None:
    """At most :data:`MAX_RANK_SPAD_ENTRIES` SPAD entries on any rank, over every subgraph:
    ``spad_by_group`` holds each replica group's triggers, a trigger once per entry, in
    trigger order.  Refused naming the trigger whose entry is one too many, or the rank when
    only groups of different subgraphs sharing it add up past the limit."""
    for group, trigs in spad_by_group.items():
        if len(trigs) > MAX_RANK_SPAD_ENTRIES:
            raise LimitError(
                f"the collectives of replica group {short_group(group)} need {len(trigs)} SPAD "
                f"entries on each of its ranks over all subgraphs, more than the "
                f"{MAX_RANK_SPAD_ENTRIES} a u16 spad_index numbers (MAX_RANK_SPAD_ENTRIES)",
                **trigger_where(trigs[MAX_RANK_SPAD_ENTRIES]))
    # groups of different subgraphs may share ranks
    counts = {group: len(trigs) for group, trigs in spad_by_group.items()}
    if (over := _rank_over(counts, MAX_RANK_SPAD_ENTRIES)) is not None:
        raise LimitError(f"the rank needs {over[1]} SPAD entries over all its subgraphs' "
                         f"collectives, more than the {MAX_RANK_SPAD_ENTRIES} a u16 spad_index "
                         "numbers (MAX_RANK_SPAD_ENTRIES)", rank=over[0])


def short_group(group: tuple[int, ...]) -> str:
    """A replica group as the plan's refusals name it: ``0..7``, or its first 8 ranks."""
    if len(group) > 1 and list(group) == list(range(group[0], group[0] + len(group))):
        return f"{group[0]}..{group[-1]}"
    return ",".join(map(str, group[:8])) + (",..." if len(group) > 8 else "")


__all__ = [
    "LIMITS", "Limit", "check_plan", "check_credits", "check_start_addr", "descriptors",
    "element_space", "start_addr_refusal",
    "SPAD_ENTRIES", "MAX_RANK_SPAD_ENTRIES", "T3D_START_ADDR_LIMIT", "CHANNEL_SEMAPHORES",
    "MAX_RANK_DESCRIPTORS",
    "BD_MAX_BYTES", "BD_RING_ENTRIES", "CORE_WINDOW", "DRAM_BASE", "DRAM_BELOW_EVT_SEM",
    "ENC_MESH_MAX_NUM_EVENTS",
    "MAX_CORES_PER_DEVICE", "MAX_DEVICES_PER_NODE", "MAX_DIRECTORY_ENTRIES", "MAX_FILE_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_MEMBER_BYTES", "MAX_MEMBER_NAME_BYTES",
    "MAX_TAR_HEADER_BYTES",
    "MAX_JSON_INT_DIGITS", "MAX_MEMBERS", "MAX_RANK", "MAX_SPEC_FILE_BYTES",
    "MAX_TOPOLOGY_FILE_BYTES",
    "MAX_TOPOLOGY_RANKS", "MAX_TOTAL_BYTES", "MAX_TRIGGERS",
    "MAX_VAR_ID", "MAX_VAR_SIZE", "NEC_MAX_CHANNELS", "NEC_MAX_COMM_N", "NET_INDEX_LOOP_SIZE",
    "NET_MAX_CREDITS", "SBUF_BASE", "SBUF_PARTITIONS", "SBUF_WINDOW_LIMIT",
    "SDMA_MAX_CCE_ELEMENTS", "CCE_MAX_ELEMENTS", "SEMAPHORES_PER_CORE", "SPAD_BYTES", "T3D_DIM_CAP",
]
