"""The ring channel composers (seed 001 §3-4), as numpy step arrays.

``__compose_allreduce_channel``, ``__compose_allgather_channel`` and
``__compose_redsct_channel`` share one template mechanism: the composer writes
the step sequence of ONE chunk group once (a few dozen Python tuples, O(rank_n)),
and :func:`ring_entry_ir` broadcasts it over every chunk group and channel with numpy,
resolving each step's chunk position ``k`` from ``user_ranks`` exactly as seed
001 §4 does (``p.k = na[...]``).  :func:`compose_channel` does the same for one channel
as step rows; lowering does not call it: it is the per-channel form the tests execute
(tests/test_compose_ring.py: chunk positions against NCCL's, the symbolic ring run).

Step identities (tested in tests/test_compose_ring.py):

* ALLREDUCE: ``rank_n`` reduce-scatter leaf steps (send; ``rank_n - 2`` x
  recv_reduce_send; the final recv_reduce_copy + direct_copy_send, or
  recv_reduce_copy_send on the host-CC path) and ``rank_n - 1`` all-gather leaf steps
  (``rank_n - 2`` x direct_recv_send; direct_recv), ``2 rank_n - 1`` step numbers per chunk
  group; the transfer identity: every rank sends and receives ``2(rank_n - 1)`` chunks
  per chunk group (seed 001 §4's ``rank_n - 1`` per phase counts transfers: the final
  step's direct_copy_send is the all-gather's first, docs/DESIGN.md "Step counting"),
  each issued for CHUNK_H0 then CHUNK_H1.
* REDUCE_SCATTER: phase 1 only, ending with recv_reduce_copy.
* ALLGATHER: copy leaves only: send of the rank's own block (plus the local
  direct_copy into its own output slot), ``rank_n - 2`` x direct_recv_send,
  direct_recv.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from nrtrewrite.codes import (
    EdgeLocality, EncAlgType, EncHalfChunkIndex, EncOpType, ReductionType,
)
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.algorithm import Algorithm, EntrySpec, Prepared, register
from nrtrewrite.compose.chunking import ChunkPlan, io_dtype_size, set_dynamic_chunk_size
from nrtrewrite.compose.leaves import LEAF_SPECS, Buf, Leaf, Owner
from nrtrewrite.compose.views import op_elements, standard_views, view_list
from nrtrewrite.emit.address import SEM_RECV, channel_sem
from nrtrewrite.errors import LoweringError
from nrtrewrite.topology.rings import enc_ring, ring_orders

H0 = int(EncHalfChunkIndex.CHUNK_H0)
H1 = int(EncHalfChunkIndex.CHUNK_H1)

PHASE_REDUCE_SCATTER = 0
PHASE_ALL_GATHER = 1
PHASE_NAMES = {PHASE_REDUCE_SCATTER: "reduce_scatter", PHASE_ALL_GATHER: "all_gather"}

#: One template row: (ring step, phase, leaf, user_ranks index, half).
TemplateRow = tuple[int, int, Leaf, int, int]

#: Structured dtype of composed steps (one row per leaf call), docs/DESIGN.md.
STEP_DTYPE = np.dtype([
    ("group", "<i4"),      # chunk group (pgta index)
    ("step", "<i4"),       # ring step within the group
    ("phase", "u1"),       # PHASE_REDUCE_SCATTER / PHASE_ALL_GATHER
    ("leaf", "u1"),        # Leaf
    ("half", "u1"),        # CHUNK_H0 / CHUNK_H1
    ("k", "<i4"),          # chunk position as a rank id (seed: p.k = na[...])
    ("pos", "<i4"),        # index of k in the replica group (the block / chunk position)
    ("start", "<i8"),      # element range [start, stop) in the op's element space
    ("stop", "<i8"),
])


def _both(step: int, phase: int, leaf: Leaf, idx: int) -> list[TemplateRow]:
    return [(step, phase, leaf, idx, H0), (step, phase, leaf, idx, H1)]


def allreduce_template(rank_n: int, host_cc: bool = False) -> list[TemplateRow]:
    """__compose_allreduce_channel's step loop for one chunk group (seed 001 §4)."""
    rs, ag = PHASE_REDUCE_SCATTER, PHASE_ALL_GATHER
    rows: list[TemplateRow] = []
    rows += _both(0, rs, Leaf.send, rank_n - 1)                 # p.k = na[rank_n-1]
    step = 1
    for nptr in range(rank_n, 2, -1):                           # &na[rank_n] .. &na[3]
        rows += _both(step, rs, Leaf.recv_reduce_send, nptr - 2)  # p.k = nptr[-2]
        step += 1
    if host_cc:                            # encd_is_host_cc; p.k = na[0]
        rows += _both(step, rs, Leaf.recv_reduce_copy_send, 0)
    else:
        rows += [(step, rs, Leaf.recv_reduce_copy, 0, H0), (step, rs, Leaf.direct_copy_send, 0, H0),
                 (step, rs, Leaf.recv_reduce_copy, 0, H1), (step, rs, Leaf.direct_copy_send, 0, H1)]
    step += 1
    for nptr in range(rank_n, 2, -1):
        rows += _both(step, ag, Leaf.direct_recv_send, nptr - 1)  # p.k = nptr[-1]
        step += 1
    rows += _both(step, ag, Leaf.direct_recv, 1)                # p.k = na[1]
    return rows


def redsct_template(rank_n: int) -> list[TemplateRow]:
    """__compose_redsct_channel: phase 1 only, ending after the final reduce."""
    rs = PHASE_REDUCE_SCATTER
    rows: list[TemplateRow] = _both(0, rs, Leaf.send, rank_n - 1)
    step = 1
    for nptr in range(rank_n, 2, -1):
        rows += _both(step, rs, Leaf.recv_reduce_send, nptr - 2)
        step += 1
    rows += _both(step, rs, Leaf.recv_reduce_copy, 0)
    return rows


def allgather_template(rank_n: int) -> list[TemplateRow]:
    """__compose_allgather_channel: copy leaves only (zero recv_reduce_*)."""
    ag = PHASE_ALL_GATHER
    rows: list[TemplateRow] = []
    rows += _both(0, ag, Leaf.send, 0)          # own block to the successor
    rows += _both(0, ag, Leaf.direct_copy, 0)   # own block into our own output slot
    step = 1
    for nptr in range(rank_n, 2, -1):
        rows += _both(step, ag, Leaf.direct_recv_send, nptr - 1)
        step += 1
    rows += _both(step, ag, Leaf.direct_recv, 1)
    return rows


def single_rank_template() -> list[TemplateRow]:
    """enc_1rank_primitive: a group of one rank copies its input to its output."""
    return _both(0, PHASE_ALL_GATHER, Leaf.direct_copy, 0)


def channel_template(op: EncOpType, rank_n: int, host_cc: bool = False) -> list[TemplateRow]:
    """Per-channel op-type dispatch (__compose_channel_ring, seed 001 §3)."""
    if op in (EncOpType.BROADCAST, EncOpType.REDUCE, EncOpType.ALLTOALL):
        raise LoweringError(f"not supported operation (op_type {int(op)} {op.name}) on a ring"
                            + ("; alltoall cannot be supported without Mesh algorithm"
                               if op == EncOpType.ALLTOALL else ""))
    if op not in (EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER):
        raise LoweringError(f"ring lowering of op_type {int(op)} {op.name} is not part of this tool")
    if rank_n == 1:
        return single_rank_template()
    if op == EncOpType.ALLREDUCE:
        return allreduce_template(rank_n, host_cc)
    if op == EncOpType.REDUCE_SCATTER:
        return redsct_template(rank_n)
    return allgather_template(rank_n)


#: Bookkeeping calls around the step loop (seed 001 §4 prologue / epilogue),
#: shown by ``schedule``; they emit no leg except mark_end.  ``prev_is_network`` is the
#: seed's ``encd_is_neighbor_pod(channel.drv_channel, ENCD_NEIGH_PREV)`` (a cross-pod
#: hop).  The seed's ``reset_send_credit`` after the last direct_recv is left out: it
#: emits nothing we write (docs/FORMATS.md §8.3).
def bookkeeping(op: EncOpType, prev_is_network: bool) -> tuple[list[str], list[str]]:
    prologue = ["post_send(1)", "mark_step(0)", "advance_send(1)", "post_recv(concat_first)",
                "mark_step(0)"]
    epilogue = ["advance_recv(-concat_first)", "mark_complete()", "mark_step(0)"]
    if prev_is_network:
        epilogue += ["post_recv(1)", "mark_step(1)"]
    epilogue.append("mark_end()")
    return prologue, epilogue


@dataclass(frozen=True)
class ChannelSteps:
    channel: int
    user_ranks: tuple[int, ...]
    steps: np.ndarray  # STEP_DTYPE


@functools.lru_cache(maxsize=256)
def template_array(op: EncOpType, rank_n: int, host_cc: bool) -> np.ndarray:
    """channel_template as a read-only (rows, 5) int64 array, cached per (op, rank_n, host_cc)."""
    rows = channel_template(op, rank_n, host_cc)
    arr = np.array([(s, ph, int(lf), idx, h) for s, ph, lf, idx, h in rows], dtype=np.int64)
    arr.setflags(write=False)
    return arr


def compose_channel(op: EncOpType, plan: ChunkPlan, channel: int, user_ranks: tuple[int, ...],
                    group_index: dict[int, int], host_cc: bool = False) -> ChannelSteps:
    """All steps of one channel of one rank, every chunk group, as a STEP_DTYPE array.

    ``group_index`` maps a rank id to its position in the replica group (the
    chunk position / block index).  Rows keep template order inside a group and
    group order outside: the channel's program order.
    """
    rank_n = len(user_ranks)
    tmpl = template_array(op, rank_n, host_cc)
    t = tmpl.shape[0]
    na = np.asarray(user_ranks, dtype=np.int64)
    k = na[tmpl[:, 3]]
    pos = np.fromiter((group_index[r] for r in user_ranks), np.int64, rank_n)[tmpl[:, 3]]
    groups = plan.groups
    out = np.empty(groups * t, dtype=STEP_DTYPE)
    g = np.repeat(np.arange(groups, dtype=np.int64), t)
    out["group"] = g
    out["step"] = np.tile(tmpl[:, 0], groups)
    out["phase"] = np.tile(tmpl[:, 1], groups)
    out["leaf"] = np.tile(tmpl[:, 2], groups)
    out["half"] = np.tile(tmpl[:, 4], groups)
    out["k"] = np.tile(k, groups)
    out["pos"] = np.tile(pos, groups)
    start, stop = plan.half_ranges(g, channel, out["pos"], out["half"])
    out["start"] = start
    out["stop"] = stop
    return ChannelSteps(channel=channel, user_ranks=tuple(user_ranks), steps=out)


# ---------------------------------------------------------------------------
# The ring's leg IR (nrtrewrite.compose.ir): views IN=0, OUT=1, RECV=2, GW=3 (Buf values).

def _leaf_tables():
    n = 16
    src = np.zeros((n, 2), np.int64)
    dst = np.zeros((n, 2), np.int64)
    dst_next = np.zeros((n, 2), bool)
    n_src = np.zeros(n, np.int64)
    n_dst = np.zeros(n, np.int64)
    red = np.zeros(n, bool)
    waits = np.zeros(n, bool)
    sends = np.zeros(n, bool)
    for leaf, spec in LEAF_SPECS.items():
        n_src[leaf], n_dst[leaf] = len(spec.sources), len(spec.dests)
        red[leaf], waits[leaf], sends[leaf] = spec.reduce, spec.waits, spec.sends
        for i, buf in enumerate(spec.sources):
            src[leaf, i] = int(buf)
        for j, (buf, owner) in enumerate(spec.dests):
            dst[leaf, j] = int(buf)
            dst_next[leaf, j] = owner == Owner.NEXT
    return src, dst, dst_next, n_src, n_dst, red, waits, sends


_SRC, _DST, _DST_NEXT, _NSRC, _NDST, _RED, _WAITS, _SENDS = _leaf_tables()
#: seed 001 §4 (host-CC final step): ``recv_reduce_copy_send(CHUNK_H0, cce, 1, ...)``: its
#: third argument, ``reduction_type_t`` (seed 000 §3.1, SEED-NOTES "op vs shape"; the seed's
#: ``/*copy=*/`` comment is the trap), is 1 = RING_2R2W: it reads RECV and IN and writes OUT
#: and OUT@next.  The ring's other reduce leaves pass 0 = RING_2R1W.
_RING_2R2W_LEAF = np.zeros(16, bool)
_RING_2R2W_LEAF[int(Leaf.recv_reduce_copy_send)] = True


def ring_reduction_types(leaf: np.ndarray) -> np.ndarray:
    """Each ring leg's ``reduction_type``: RING_2R1W on a reducing leaf, RING_2R2W on
    ``recv_reduce_copy_send``, 0 on legs that do not reduce.  Only the ring's leaf table
    (the RING engine, a HIER ring leg) gives these; the other engines set their own
    (single-cycle, KANGARING, mesh and RDH in their IR builders)."""
    rt = np.where(_RED[leaf], int(ReductionType.RING_2R1W), 0)
    rt[_RING_2R2W_LEAF[leaf]] = int(ReductionType.RING_2R2W)
    return rt
#: where a consuming leaf's predecessor put its data (the net receive view)
_RECV_VIEW = np.zeros(16, np.int64)
for _lf in (Leaf.recv_reduce_send, Leaf.recv_reduce_copy, Leaf.recv_reduce_copy_send):
    _RECV_VIEW[_lf] = 2  # RECV
for _lf in (Leaf.direct_recv_send, Leaf.direct_recv):
    _RECV_VIEW[_lf] = 1  # OUT


def ring_channel_ir(steps: np.ndarray, channel: int, next_peer: int, prev_peer: int,
                    prev_is_network: bool) -> np.ndarray:
    """The leg IR of one ring channel: sources/destinations from the leaf table, a
    ``wait_ge_and_dec(recv_sema, 1)`` on every consuming leaf and an ``inc`` of the
    successor's ``recv_sema`` on every sending leaf (seed 000 §4.2)."""
    out = IR.empty(steps.size)
    leaf = steps["leaf"].astype(np.int64)
    out["channel"] = channel
    for f in ("leaf", "half", "phase", "group", "step", "k", "start", "stop"):
        out[f] = steps[f]
    out["n_src"] = _NSRC[leaf]
    out["src_view"][:, :2] = _SRC[leaf]
    out["n_dst"] = _NDST[leaf]
    out["dst_view"][:, :2] = _DST[leaf]
    out["dst_peer"][:, :2] = np.where(_DST_NEXT[leaf], next_peer, 0)
    out["reduce"] = _RED[leaf]
    out["reduction_type"] = ring_reduction_types(leaf)
    recv = channel_sem(channel, SEM_RECV)
    w = _WAITS[leaf]
    out["n_wait"] = w
    out["wait_sem"][:, 0] = np.where(w, recv, 0)
    out["wait_val"][:, 0] = np.where(w, 1, 0)
    snd = _SENDS[leaf]
    out["n_inc"] = snd
    out["inc_peer"][:, 0] = np.where(snd, next_peer, 0)
    out["inc_sem"][:, 0] = np.where(snd, recv, 0)
    out["inc_val"][:, 0] = np.where(snd, 1, 0)
    if prev_is_network:
        out["net_src_peer"] = np.where(w, prev_peer, IR.NO_NET)
        out["net_view"] = np.where(w, _RECV_VIEW[leaf], 0)
    return out


# ---------------------------------------------------------------------------
# The RING algorithm (enc_metaring_primitive with metaring type RING).

@dataclass(frozen=True)
class RingPlan:
    """Rank-independent ring decisions for one trigger."""

    group: tuple[int, ...]
    group_index: dict[int, int]
    channel_ids: list[int]  # physical channel ids of the active channels, layout order
    orders: dict[int, tuple[int, ...]]  # channel id -> ring order
    chunk: ChunkPlan


def plan_ring(topo, trig, n_channels: int) -> RingPlan:
    """Rings per channel (topology) + __set_dynamic_chunk_size / __set_active_channels
    (our chunk rule, not the seed's formula: :func:`set_dynamic_chunk_size`)."""
    group = tuple(trig.replica_group)
    orders_all = ring_orders(topo, group, n_channels) if len(group) > 1 else [group]
    nonempty = [(c, o) for c, o in enumerate(orders_all) if o is not None]
    chunk = set_dynamic_chunk_size(trig.op, trig.num_elements, len(group), trig.dtype,
                                   max(1, len(nonempty)))
    active = nonempty[:chunk.channels]
    return RingPlan(group=group, group_index={r: i for i, r in enumerate(group)},
                    channel_ids=[c for c, _ in active], orders=dict(active), chunk=chunk)


def ring_manifest(rp: RingPlan) -> dict:
    return {"channels": [{"channel": c, "order": list(rp.orders[c])} for c in rp.channel_ids],
            "chunk": {"chunk_size_n": rp.chunk.chunk, "tail_chunk": rp.chunk.tail_chunk,
                      "pgta": rp.chunk.groups, "channels": rp.chunk.channels}}


def ring_entry_ir(topo, rp: RingPlan, op: EncOpType, rank: int, peer_index, *,
                  host_cc: bool) -> np.ndarray:
    """The IR of one rank's ring entry: every active channel (channel-major), composed and
    converted in one pass over all channels (the rows :func:`compose_channel` and
    :func:`ring_channel_ir` give channel by channel)."""
    chans = rp.channel_ids
    if not chans:
        return IR.empty(0)
    rings = [enc_ring(rp.orders[ch], rank) for ch in chans]
    nxt, prv, prev_net = [], [], []
    for ring in rings:  # peer numbers in the order the channels meet them
        nxt.append(peer_index(ring.next))
        prv.append(peer_index(ring.prev))
        prev_net.append(ring.prev != rank
                        and topo.locality(ring.prev, rank) == EdgeLocality.NETWORK)
    nxt, prv, prev_net = np.array(nxt), np.array(prv), np.array(prev_net)
    na = np.array([ring.user_ranks for ring in rings], np.int64)  # (channels, rank_n)
    pos_of = np.vectorize(rp.group_index.__getitem__, otypes=[np.int64])(na)
    tmpl = template_array(op, na.shape[1], host_cc)
    t, groups, nch = tmpl.shape[0], rp.chunk.groups, len(chans)
    c = np.repeat(np.arange(nch), groups * t)  # layout channel of each row
    g = np.tile(np.repeat(np.arange(groups, dtype=np.int64), t), nch)
    row = np.tile(np.arange(t), nch * groups)
    leaf, idx, half = tmpl[row, 2], tmpl[row, 3], tmpl[row, 4]
    start, stop = rp.chunk.half_ranges(g, c, pos_of[c, idx], half)
    recv = np.array([channel_sem(ch, SEM_RECV) for ch in chans], np.int64)[c]
    out = IR.empty(c.size)
    out["channel"] = np.asarray(chans)[c]
    out["leaf"] = leaf
    out["half"] = half
    out["phase"] = tmpl[row, 1]
    out["group"] = g
    out["step"] = tmpl[row, 0]
    out["k"] = na[c, idx]
    out["start"] = start
    out["stop"] = stop
    out["n_src"] = _NSRC[leaf]
    out["src_view"][:, :2] = _SRC[leaf]
    out["n_dst"] = _NDST[leaf]
    out["dst_view"][:, :2] = _DST[leaf]
    out["dst_peer"][:, :2] = np.where(_DST_NEXT[leaf], nxt[c][:, None], 0)
    out["reduce"] = _RED[leaf]
    out["reduction_type"] = ring_reduction_types(leaf)
    w = _WAITS[leaf]
    out["n_wait"] = w
    out["wait_sem"][:, 0] = np.where(w, recv, 0)
    out["wait_val"][:, 0] = w
    snd = _SENDS[leaf]
    out["n_inc"] = snd
    out["inc_peer"][:, 0] = np.where(snd, nxt[c], 0)
    out["inc_sem"][:, 0] = np.where(snd, recv, 0)
    out["inc_val"][:, 0] = snd
    net = w & prev_net[c]
    out["net_src_peer"] = np.where(net, prv[c], IR.NO_NET)
    out["net_view"] = np.where(net, _RECV_VIEW[leaf], 0)
    return out


class RingAlgorithm(Algorithm):
    """RING: the half-chunk pipelined ring over every active channel (one flat entry)."""

    alg = EncAlgType.RING

    def prepare(self, ctx, trig, sel) -> Prepared:
        rp = plan_ring(ctx.topology, trig, sel.n_channels)
        dsize = io_dtype_size(trig.dtype)
        # RECV: an all-reduce's or reduce-scatter's received partials; a one-rank group
        # receives nothing (its legs copy IN to OUT: enc_1rank_primitive)
        one = len(trig.replica_group) == 1
        scratch = 0 if trig.op == EncOpType.ALLGATHER or one else trig.num_elements * dsize
        return Prepared(scratch_bytes=scratch, gw_bytes=op_elements(trig) * dsize,
                        manifest=ring_manifest(rp), data=rp)

    def entries(self, ctx, tp, rank: int) -> list[EntrySpec]:
        rp: RingPlan = tp.prepared.data
        peers = [rank]
        index = {rank: 0}

        def peer_index(r: int) -> int:
            if r not in index:
                index[r] = len(peers)
                peers.append(r)
            return index[r]

        ir = ring_entry_ir(ctx.topology, rp, tp.trigger.op, rank, peer_index,
                           host_cc=ctx.options.host_cc)
        views = standard_views(ctx.memory, tp.trigger, rp.group_index[rank])
        info = {"channels": {}}
        for ch in rp.channel_ids:
            ring = enc_ring(rp.orders[ch], rank)
            prev_net = (ring.prev != rank and
                        ctx.topology.locality(ring.prev, rank) == EdgeLocality.NETWORK)
            prologue, epilogue = bookkeeping(tp.trigger.op, prev_net)
            info["channels"][ch] = {"prev": ring.prev, "next": ring.next,
                                    "user_ranks": list(ring.user_ranks),
                                    "prologue": prologue, "epilogue": epilogue}
        return [EntrySpec(leg="flat", alg=EncAlgType.RING, ir=ir, views=view_list(views),
                          gw_view=int(Buf.GW), peers=peers,
                          num_active_channels=len(rp.channel_ids), groups=rp.chunk.groups,
                          reduction_type=int(ReductionType.RING_2R1W), info=info)]


RING = register(RingAlgorithm())
