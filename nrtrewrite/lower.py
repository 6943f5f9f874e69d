"""The load-time rewrite, top to bottom: parse -> select -> topology -> compose -> emit -> serialize.

:func:`plan_lowering` does the rank-independent work once (parse, topology,
selection, rings, chunk plans, memory map); :func:`lower_rank` composes and
emits one rank; :mod:`nrtrewrite.bundle` writes the output folder.  Each stage
is a module whose name says what it is:

=============  =====================================
parse          :mod:`nrtrewrite.neff.reader`
select         :mod:`nrtrewrite.select`
topology       :mod:`nrtrewrite.topology`
compose        :mod:`nrtrewrite.compose` (chunking, ring)
emit/complete  :mod:`nrtrewrite.emit` (ring, address, tiling, formats)
serialize      :mod:`nrtrewrite.serialize` (SPAD, tp_inc_steps)
write back     :mod:`nrtrewrite.bundle` + :mod:`nrtrewrite.neff.writer`
simulate       :mod:`nrtrewrite.simulate`
=============  =====================================
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import numpy as np

from nrtrewrite import __version__
from nrtrewrite.codes import (
    ALU_TO_CCE, CCE_REDUCE_DTYPES, CType, DType, EdgeLocality, EncAlgType, EncOpType,
    ReductionType, VarType,
)
from nrtrewrite.compose.chunking import ChunkPlan, io_dtype_size, set_dynamic_chunk_size
from nrtrewrite.compose.leaves import Buf
from nrtrewrite.compose.ring import compose_channel, ring_channel_ir
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.address import MemoryMap, SBUF_BASE, DRAM_BASE, build_memory_map
from nrtrewrite.emit.buffers import BufferView
from nrtrewrite.emit.legs import EntryContext, Peer, RankBuilder, emit_entry
from nrtrewrite.errors import LimitError, LoweringError
from nrtrewrite.neff.model import Model, Operand, Trigger
from nrtrewrite.select import Selection, parse_algo_override, select_all
from nrtrewrite.serialize import serialize_spad, serialize_tpinc
from nrtrewrite.topology.model import Topology, load_topology
from nrtrewrite.topology.rings import enc_ring, ring_orders

#: Engines this build lowers (the selection policy never picks another by default).
LOWERABLE = frozenset({EncAlgType.RING})


@dataclass(frozen=True)
class LowerOptions:
    topology: str | None = None
    algo: str | None = None
    host_cc: bool = False  # the host-CC final reduce step (recv_reduce_copy_send)

    def to_json(self) -> dict:
        return {"topology": self.topology, "algo": self.algo, "host_cc": self.host_cc}


@dataclass
class TriggerPlan:
    """Rank-independent lowering decisions for one trigger (one flat ring leg)."""

    trigger: Trigger
    selection: Selection
    group: tuple[int, ...]
    group_index: dict[int, int]
    channel_ids: list[int]  # physical channel ids of the active channels, layout order
    orders: dict[int, tuple[int, ...]]  # channel id -> ring order
    chunk: ChunkPlan
    leader: int

    @property
    def alg(self) -> EncAlgType:
        return self.selection.alg


@dataclass
class LoweringPlan:
    model: Model
    topology: Topology
    options: LowerOptions
    triggers: list[TriggerPlan]
    memory: MemoryMap
    input_sha256: str
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def world(self) -> tuple[int, ...]:
        return self.model.world


def _check_dtype(trig: Trigger) -> None:
    if trig.op != EncOpType.ALLGATHER and trig.dtype not in CCE_REDUCE_DTYPES:
        raise LoweringError(
            f"{trig.op.name} in {trig.dtype.name} cannot be lowered: the CCE reduce accepts only "
            "BF16, FP16, FP32R and FP8_E3/E4/E5 (seed 000 §3.4)",
            subgraph=trig.subgraph, stream=trig.engine, index=trig.index, trigger=trig.ordinal,
            field="dtype")


def _scratch_bytes(trig: Trigger) -> int:
    """RECV slots: the reduce-scatter partials, indexed by element (AR and RS)."""
    if trig.op == EncOpType.ALLGATHER:
        return 0
    return trig.num_elements * io_dtype_size(trig.dtype)


def _gw_bytes(trig: Trigger) -> int:
    n = trig.num_elements * (trig.group_size if trig.op == EncOpType.ALLGATHER else 1)
    return n * io_dtype_size(trig.dtype)


def plan_lowering(model: Model, options: LowerOptions, input_sha256: str = "") -> LoweringPlan:
    """Everything that does not depend on the rank: topology, selection, rings, chunking, memory."""
    t0 = time.perf_counter()
    topo = load_topology(options.topology, world=model.world, lnc_size=model.lnc_size)
    override = parse_algo_override(options.algo)
    selections = select_all(model, topo, override=override)
    t1 = time.perf_counter()
    plans: list[TriggerPlan] = []
    for trig, sel in zip(model.triggers, selections):
        _check_dtype(trig)
        if sel.alg not in LOWERABLE:
            raise LoweringError(f"{sel.alg.name} was selected but this build lowers only "
                                f"{', '.join(a.name for a in sorted(LOWERABLE))}",
                                trigger=trig.ordinal)
        group = tuple(trig.replica_group)
        orders_all = ring_orders(topo, group, sel.n_channels) if len(group) > 1 else [group]
        nonempty = [(c, o) for c, o in enumerate(orders_all) if o is not None]
        chunk = set_dynamic_chunk_size(trig.op, trig.num_elements, len(group), trig.dtype,
                                       max(1, len(nonempty)))
        active = nonempty[:chunk.channels]
        plans.append(TriggerPlan(
            trigger=trig, selection=sel, group=group,
            group_index={r: i for i, r in enumerate(group)},
            channel_ids=[c for c, _ in active], orders=dict(active), chunk=chunk,
            leader=min(group)))
    spans = [p for p in plans if any(not topo.same_node(p.group[0], r) for r in p.group)]
    memory = build_memory_map(model, max([_scratch_bytes(p.trigger) for p in plans] + [0]),
                              max([_gw_bytes(p.trigger) for p in spans] + [0]))
    t2 = time.perf_counter()
    return LoweringPlan(model=model, topology=topo, options=options, triggers=plans,
                        memory=memory, input_sha256=input_sha256,
                        timings={"select": t1 - t0, "plan": t2 - t1})


# ---------------------------------------------------------------------------
# Buffers of one trigger on one rank.

def _operand_view(plan: LoweringPlan, trig: Trigger, operand: Operand, origin: int) -> BufferView:
    mem = plan.memory
    region = mem.var(trig.subgraph, operand.var_id)
    dsize = io_dtype_size(trig.dtype)
    if operand.ap is None:
        base = DRAM_BASE + region.offset + operand.offset
        return BufferView(dsize=dsize, origin=origin, base=base, anchor=base - origin * dsize)
    return BufferView(dsize=dsize, origin=origin, base=SBUF_BASE + region.offset, ap=operand.ap,
                      partition_stride=mem.sbuf_partition_stride, anchor=SBUF_BASE)


def buffer_views(plan: LoweringPlan, tp: TriggerPlan, rank: int) -> dict[Buf, BufferView]:
    """IN / OUT / RECV / GW of ``rank`` for ``tp``, in the op's element space (lower.py doc)."""
    trig = tp.trigger
    dsize = io_dtype_size(trig.dtype)
    pos = tp.group_index[rank]
    scratch = plan.memory.named("scratch")
    gw = plan.memory.named("gw")
    lin = lambda region: BufferView(dsize=dsize, origin=0, base=DRAM_BASE + region.offset,  # noqa: E731
                                    anchor=DRAM_BASE + region.offset)
    views = {Buf.RECV: lin(scratch), Buf.GW: lin(gw)}
    if trig.op == EncOpType.ALLREDUCE:
        views[Buf.IN] = _operand_view(plan, trig, trig.src, 0)
        views[Buf.OUT] = _operand_view(plan, trig, trig.dst, 0)
    elif trig.op == EncOpType.REDUCE_SCATTER:
        count = trig.num_elements // trig.group_size
        views[Buf.IN] = _operand_view(plan, trig, trig.src, 0)
        views[Buf.OUT] = _operand_view(plan, trig, trig.dst, pos * count)
    else:  # ALLGATHER: the receive slot of a gathered block is the output itself
        views[Buf.IN] = _operand_view(plan, trig, trig.src, pos * trig.num_elements)
        views[Buf.OUT] = _operand_view(plan, trig, trig.dst, 0)
        views[Buf.RECV] = views[Buf.OUT]
    return views


def _peer(topo: Topology, rank: int) -> Peer:
    info = topo.info(rank)
    return Peer(rank=rank, device=info.routing_id, logical_core=info.logical_core, node=info.node)


@dataclass
class RankOutput:
    rank: int
    files: dict[str, list[np.ndarray]]  # each file as its record arrays, in order
    manifest: dict

    def file_bytes(self, name: str) -> bytes:
        return b"".join(p.tobytes() for p in self.files[name])


def lower_rank(plan: LoweringPlan, rank: int) -> RankOutput:
    """Compose, emit and serialize every SPAD entry of one rank."""
    topo = plan.topology
    builder = RankBuilder(rank)
    entries = []
    me = _peer(topo, rank)
    lnc_fmt = F.LNC_SIZE_FMT.get(plan.model.lnc_size, 0)
    sg_index = {sg.name: i for i, sg in enumerate(plan.model.subgraphs)}
    for tp in plan.triggers:
        if rank not in tp.group_index:
            continue
        trig = tp.trigger
        spad_index = len(entries)
        views = buffer_views(plan, tp, rank)
        peers = [me]
        localities = [EdgeLocality.SAME_DEVICE]
        index = {rank: 0}

        def peer_index(r: int) -> int:
            if r not in index:
                index[r] = len(peers)
                peers.append(_peer(topo, r))
                localities.append(topo.locality(rank, r))
            return index[r]

        irs = []
        for layout_ch, ch in enumerate(tp.channel_ids):
            ring = enc_ring(tp.orders[ch], rank)
            steps = compose_channel(trig.op, tp.chunk, layout_ch, ring.user_ranks, tp.group_index,
                                    host_cc=plan.options.host_cc).steps
            prev_net = ring.prev != rank and topo.locality(ring.prev, rank) == EdgeLocality.NETWORK
            irs.append(ring_channel_ir(steps, ch, peer_index(ring.next), peer_index(ring.prev),
                                       prev_net, int(ReductionType.RING_2R1W)))
        ctx = EntryContext(
            rank=rank, trigger=trig.ordinal, spad_index=spad_index, dtype=trig.dtype,
            cce_op=int(ALU_TO_CCE[trig.alu_op]) if trig.alu_op is not None else 0,
            views=[views[Buf.IN], views[Buf.OUT], views[Buf.RECV], views[Buf.GW]],
            gw_view=int(Buf.GW), peers=peers, localities=localities, lnc_fmt=lnc_fmt,
            num_active_channels=len(tp.channel_ids), subgraph_index=sg_index[trig.subgraph],
            groups=tp.chunk.groups)
        summary = emit_entry(builder, ctx, np.concatenate(irs))
        any_tx = any(v > 0 for v in summary["tx"].values())
        entries.append({
            "trigger": trig.ordinal, "subgraph": trig.subgraph, "leg": "flat", "algo_type": int(tp.alg), "algo_sub_type": 0,
            "trigger_next": False, "reporter": rank == tp.leader, "ring_wait_complete": True,
            "ring_send_complete": any_tx, "channel_list": sum(1 << c for c in tp.channel_ids),
            "channels": list(tp.channel_ids)})
    files = builder.finish()
    files["spad.bin"] = [np.frombuffer(serialize_spad(entries), F.SPAD_DTYPE)]
    files["tpinc.bin"] = [np.frombuffer(serialize_tpinc(entries, builder.tpinc_by_entry),
                                        F.TPINC_DTYPE)]
    manifest = {
        "rank": rank,
        "files": {name: _file_summary(name, parts) for name, parts in files.items()},
        "entries": entries,
        "fifo": builder.fifo_index(),
    }
    return RankOutput(rank=rank, files=files, manifest=manifest)


def _file_summary(name: str, parts: list[np.ndarray]) -> dict:
    h = hashlib.sha256()
    nbytes = 0
    for part in parts:
        h.update(part.data if part.flags.c_contiguous else part.tobytes())
        nbytes += part.nbytes
    return {"records": nbytes // F.ARTIFACTS[name][0].itemsize, "bytes": nbytes,
            "sha256": h.hexdigest()}


def operand_json(op: Operand) -> dict:
    d = {"var_id": op.var_id, "offset": op.offset}
    if op.ap is not None:
        d["ap"] = {"start": op.ap.start, "partition_start": op.ap.partition_start,
                   "partition_count": op.ap.partition_count,
                   "dims": [list(dim) for dim in op.ap.dims]}
    return d


def manifest_triggers(plan: LoweringPlan) -> list[dict]:
    out = []
    for tp in plan.triggers:
        trig, sel = tp.trigger, tp.selection
        out.append({
            "trigger": trig.ordinal, "subgraph": trig.subgraph, "engine": trig.engine,
            "index": trig.index, "op": trig.op.name, "dtype": trig.dtype.name,
            "alu_op": trig.alu_op.name if trig.alu_op is not None else None,
            "num_elements": trig.num_elements, "replica_group": list(tp.group),
            "src": operand_json(trig.src), "dst": operand_json(trig.dst),
            "algorithm": tp.alg.name, "policy_algorithm": sel.policy_alg.name,
            "fallback_reason": sel.fallback_reason,
            "legs": [{"name": leg.name, "op": leg.op.name, "algorithm": leg.alg.name,
                      "sub_type": leg.sub_type.name if leg.sub_type is not None else None}
                     for leg in sel.legs],
            "channels": [{"channel": c, "order": list(tp.orders[c])} for c in tp.channel_ids],
            "chunk": {"chunk_size_n": tp.chunk.chunk, "tail_chunk": tp.chunk.tail_chunk,
                      "pgta": tp.chunk.groups, "channels": tp.chunk.channels},
            "leader": tp.leader,
        })
    return out
