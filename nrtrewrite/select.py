"""SELECT: which enc_comm engine runs each collective trigger, per leg, on how many channels.

The runtime runs a battery of ``enc_can_post_*`` legality predicates and resolves one
``enc_alg_type`` by a fixed precedence (``enc_post_operation``; seed 000 §1); a
hierarchical op gets five per-leg choices (``enc_hier_primitive::__select_algorithms``,
log line "Hier algorithm selections - alg_intra_allg %d alg_intra_redsct %d alg_inter_allr
%d alg_inter_allg %d alg_inter_redsct %d").  This module reproduces that with one predicate
function per engine, each returning ``(legal, reason)``, and the windows, precedence and
channel rule of :mod:`nrtrewrite.policy`.  docs/SELECTION.md is the reference.

What the policy picks (``policy_alg`` / ``policy_legs``) is kept apart from what ``lower``
will use (``alg`` / ``legs``): an engine this build cannot lower yet is never used
silently -- the selection falls back to a lowerable legal engine (flat RING) and says why in
``fallback_reason``; an ``--algo`` override that forces a non-lowerable or illegal engine is
a :class:`SelectionError`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence, Union

import numpy as np

from nrtrewrite.codes import (
    AluOp, DTYPE_SIZE, ENC_MESH_CHANNEL_BUF_MAX_SIZE, ENC_RDH_MAX_RD_STEPS, DType, EncAlgMeshType,
    EncAlgType, EncOpType, MetaringType,
)
from nrtrewrite.compose.ir import MAX_DST, MAX_PEERS, MAX_SRC
from nrtrewrite.emit.formats import BD_MAX_BYTES, TPINC_MAX_BDS
from nrtrewrite.emit.tiling import cce_max_elements, expand, tile_elements
from nrtrewrite.errors import (
    NrtRewriteError, SelectionError, ValidationError, counted, did_you_mean,
)
from nrtrewrite.neff.instructions import trigger_where
from nrtrewrite.neff.model import Model, Trigger
from nrtrewrite.policy import DEFAULT_POLICY, INTER, INTRA, Policy, fmt_bytes
from nrtrewrite.topology.model import Topology
from nrtrewrite.topology.rings import (
    KANGARING_LOGICAL_PATH_LEN, NEC_MAX_CHANNELS, distinct_ring_count, is_hybrid_ring,
    kangaring_shape,
)

#: Env var read by :func:`parse_algo_override` when no ``--algo`` text is given.
ALGO_ENV = "NRTREWRITE_ALGO"

#: The five per-leg slots in the order of the runtime's log line.
HIER_SLOTS = ("alg_intra_allg", "alg_intra_redsct", "alg_inter_allr", "alg_inter_allg",
              "alg_inter_redsct")

#: Leg names (the log line's slot names without ``alg_``) -> (scope, enc_op_type).
LEG_OPS: dict[str, tuple[str, EncOpType]] = {
    "intra_allg": (INTRA, EncOpType.ALLGATHER),
    "intra_redsct": (INTRA, EncOpType.REDUCE_SCATTER),
    "inter_allr": (INTER, EncOpType.ALLREDUCE),
    "inter_allg": (INTER, EncOpType.ALLGATHER),
    "inter_redsct": (INTER, EncOpType.REDUCE_SCATTER),
}

#: Legal engines per leg: libnrt assertion strings (public notes, "Hierarchical Collective"
#: §3): intra legs RING | KANGARING; inter all-reduce RING | INTER_RDH | SINGLE_CYCLE_RING |
#: MESH; inter all-gather RING | INTER_RDH | MESH (inter reduce-scatter: the same, by symmetry).
LEG_LEGAL: dict[str, tuple[EncAlgType, ...]] = {
    "intra_allg": (EncAlgType.RING, EncAlgType.KANGARING),
    "intra_redsct": (EncAlgType.RING, EncAlgType.KANGARING),
    "inter_allr": (EncAlgType.RING, EncAlgType.INTER_RDH, EncAlgType.SINGLE_CYCLE_RING,
                   EncAlgType.MESH),
    "inter_allg": (EncAlgType.RING, EncAlgType.INTER_RDH, EncAlgType.MESH),
    "inter_redsct": (EncAlgType.RING, EncAlgType.INTER_RDH, EncAlgType.MESH),
}

#: Legs a hierarchical op runs, in execution order (seed 000 §5.1: intra reduce-scatter ->
#: inter all-reduce -> intra all-gather; all-gather inter first and reduce-scatter intra
#: first per aws-neuron-sdk internode-collective-comm.rst "Hierarchical Algorithm").
HIER_LEGS: dict[EncOpType, tuple[str, ...]] = {
    EncOpType.ALLREDUCE: ("intra_redsct", "inter_allr", "intra_allg"),
    EncOpType.ALLGATHER: ("inter_allg", "intra_allg"),
    EncOpType.REDUCE_SCATTER: ("intra_redsct", "inter_redsct"),
}

_AR_AG_RS = frozenset({EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER})
_SELECTABLE = _AR_AG_RS | {EncOpType.ALLTOALL, EncOpType.BROADCAST, EncOpType.REDUCE}
_MESH_FAMILY = frozenset({EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH,
                          EncAlgType.TWO_STEP_POD_MESH, EncAlgType.LATENCY_OPT_MESH,
                          EncAlgType.BW_OPT_MESH, EncAlgType.INTRA_RDH})

#: enc_get_metaring_type: the per-object sub-enum of a ring-family engine.
METARING_OF: dict[EncAlgType, MetaringType] = {
    EncAlgType.RING: MetaringType.RING,
    EncAlgType.KANGARING: MetaringType.KANGARING,
    EncAlgType.SINGLE_CYCLE_RING: MetaringType.SINGLE_CYCLE_RING,
    EncAlgType.INTER_RDH: MetaringType.RDH,
}


# -- the request ------------------------------------------------------------------------------

def _run_elements(ap) -> int | None:
    """Elements per contiguous run of an SBUF access pattern (a BD each: the emitter's
    ``BufferView.run_length``), None for a DRAM operand."""
    if ap is None:
        return None
    step0, num0 = ap.dims[0]
    return num0 if step0 == 1 else 1


@dataclass(frozen=True)
class Request:
    """What selection looks at: a trigger reduced to (op, dtype, group, sizes, sbuf, whether
    its operands may share bytes)."""

    ordinal: int
    op: EncOpType
    dtype: DType
    group: tuple[int, ...]
    in_bytes: int
    out_bytes: int
    sbuf: bool = False
    alu: AluOp | None = None  # the reduce op (None: ADD, or a copy-only collective)
    #: elements per contiguous run of the src / dst operand when it is an SBUF access pattern
    #: (its dim 0's count when that dim's step is 1, else 1: a BD each), None for DRAM
    #: (:func:`mesh_bd_refusal`)
    src_run: int | None = None
    dst_run: int | None = None

    @property
    def op_bytes(self) -> int:
        """The message size as nccom-test reports it: the larger of input and output."""
        return max(self.in_bytes, self.out_bytes)

    @property
    def op_elements(self) -> int:
        return self.op_bytes // DTYPE_SIZE[self.dtype]

    @classmethod
    def from_trigger(cls, t: Trigger) -> "Request":
        return cls(ordinal=t.ordinal, op=t.op, dtype=t.dtype, group=tuple(t.replica_group),
                   in_bytes=t.in_bytes, out_bytes=t.out_bytes, sbuf=t.uses_sbuf, alu=t.alu_op,
                   src_run=_run_elements(t.src.ap), dst_run=_run_elements(t.dst.ap))

    @classmethod
    def for_op(cls, op: EncOpType, dtype: DType, group: Iterable[int], nbytes: int, *,
               ordinal: int = 0, sbuf: bool = False, alu: AluOp | None = None) -> "Request":
        """A request whose message size (:attr:`op_bytes`) is ``nbytes``."""
        group = tuple(group)
        n = max(1, len(group))
        if op == EncOpType.ALLGATHER:
            ib, ob = nbytes // n, nbytes
        elif op == EncOpType.REDUCE_SCATTER:
            ib, ob = nbytes, nbytes // n
        else:
            ib = ob = nbytes
        return cls(ordinal=ordinal, op=op, dtype=dtype, group=group, in_bytes=ib, out_bytes=ob,
                   sbuf=sbuf, alu=alu)


def as_request(trigger: Union[Trigger, Request]) -> Request:
    return trigger if isinstance(trigger, Request) else Request.from_trigger(trigger)


@dataclass(frozen=True)
class GroupShape:
    """``enc_comm_info`` of a group: rank_n, node_n, local_rank_n and symmetry."""

    rank_n: int
    node_n: int
    local_rank_n: int  # most ranks of the group on one node
    nodes: tuple[int, ...]
    per_node: tuple[tuple[int, ...], ...]  # the group's ranks on each node, ascending
    symmetric: bool  # every node has the same count at the same local positions
    devices: tuple[tuple[int, int], ...]  # (node, device) touched, sorted
    ranks_per_device: tuple[int, ...]  # group ranks on each touched device

    @property
    def scope(self) -> str:
        return INTRA if self.node_n == 1 else INTER


def ranks_text(ranks: Iterable[int], most: int = 4) -> str:
    """Sorted ranks (or local positions) as runs, ``0..8, 64..72`` (at most ``most`` runs,
    then ``...``): what a rank outside the world is told (a world need not be one run), the
    local positions of an asymmetric group."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    text = ", ".join(f"{a}..{b}" if b > a else str(a) for a, b in runs[:most])
    return text + (", ..." if len(runs) > most else "")


def group_shape(topo: Topology, group: Iterable[int]) -> GroupShape:
    """The shape of ``group`` (memoised per topology and group: a frozen value)."""
    group = tuple(group)
    return topo.cached(("group_shape", group), lambda: _group_shape(topo, group))


def ranks_by_node(group: Iterable[int], node_of: Callable[[int], int]
                  ) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """``(node, its ranks of group)`` for each node of ``group`` (``node_of(rank)``), by node,
    each node's ranks in rank order: a group shape's ``nodes`` and ``per_node``, HIER's intra
    groups (:func:`hier_split`).  Also the simulator's, from the output manifest's topology
    table."""
    by_node: dict[int, list[int]] = {}
    for r in group:
        by_node.setdefault(node_of(r), []).append(r)
    return tuple((n, tuple(sorted(by_node[n]))) for n in sorted(by_node))


def _group_shape(topo: Topology, group: tuple[int, ...]) -> GroupShape:
    by_node = ranks_by_node(group, lambda r: topo.info(r).node)
    by_dev: dict[tuple[int, int], int] = {}
    for r in group:
        i = topo.info(r)
        by_dev[(i.node, i.device)] = by_dev.get((i.node, i.device), 0) + 1
    nodes = tuple(n for n, _ in by_node)
    per_node = tuple(p for _, p in by_node)
    local = {tuple(r - n * topo.ranks_per_node for r in ranks) for n, ranks in zip(nodes, per_node)}
    devs = tuple(sorted(by_dev))
    return GroupShape(
        rank_n=len(group), node_n=len(nodes), local_rank_n=max(len(p) for p in per_node),
        nodes=nodes, per_node=per_node, symmetric=len(local) == 1, devices=devs,
        ranks_per_device=tuple(by_dev[d] for d in devs))


# -- the predicates ---------------------------------------------------------------------------

Verdict = tuple[bool, str]


def _op_refusal(alg: EncAlgType, op: EncOpType) -> str | None:
    """Refusals common to every engine (seed 001 §3 QUIRK, enc_post_operation dispatch)."""
    if op not in _SELECTABLE:
        return (f"op_type {op.name} is not a collective this selector handles "
                "(point-to-point and permute ops have their own composers)")
    if op in (EncOpType.BROADCAST, EncOpType.REDUCE):
        return (f"op_type {op.name} is not supported (enc_post_operation default arm: "
                "\"not supported operation\")")
    if op == EncOpType.ALLTOALL and alg != EncAlgType.MESH:
        return ("all-to-all needs mesh (\"alltoall cannot be supported without Mesh "
                "algorithm\")")
    return None


def _ar_ag_rs_refusal(alg: EncAlgType, op: EncOpType, verb: str = "runs") -> str | None:
    """:func:`_op_refusal`, then: an engine that only composes AR, AG and RS."""
    refusal = _op_refusal(alg, op)
    if refusal is None and op not in _AR_AG_RS:
        refusal = f"{alg.name} {verb} all-reduce, all-gather and reduce-scatter, not {op.name}"
    return refusal


def _window(req: Request, topo: Topology, policy: Policy, alg: EncAlgType, scope: str,
            ok_reason: str, check: bool = True) -> Verdict:
    """The structural ``ok_reason``, then (``check``) the policy's size window."""
    if not check:
        return True, ok_reason
    ok, why = policy.in_window(scope, alg, req.op, req.op_bytes, req.sbuf)
    if not ok:
        return False, why
    if policy.window(scope, alg, req.op) is None:
        return True, ok_reason
    return True, f"{ok_reason}; {why}"


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def enc_can_post_hierarchical_operation(req: Request, topo: Topology,
                                        policy: Policy = DEFAULT_POLICY, *,
                                        check_window: bool = True) -> Verdict:
    """The outer gate: a group spanning nodes with several ranks on each, symmetric.

    libnrt gate (public notes, "Algorithm Taxonomy" §2): inter comm, local_rank_n > 1,
    node_n * local_rank_n == rank_n, no source-target pairs.
    """
    refusal = _ar_ag_rs_refusal(EncAlgType.HIER, req.op, "composes")
    if refusal:
        return False, refusal
    s = group_shape(topo, req.group)
    if s.node_n == 1:
        return False, f"group lies within node {s.nodes[0]} (HIER needs a group spanning nodes)"
    if s.local_rank_n == 1:
        return False, (f"one rank per node over {s.node_n} nodes (local_rank_n 1): a flat "
                       "inter-node engine serves it")
    if s.node_n * s.local_rank_n != s.rank_n:
        counts = ", ".join(f"node {n}: {len(p)}" for n, p in zip(s.nodes, s.per_node))
        return False, (f"asymmetric group ({counts}; HIER needs the same local ranks on "
                       "every node)")
    if not s.symmetric:  # the same counts at different local positions: name them
        where = ", ".join(f"node {n}: local {ranks_text([r - n * topo.ranks_per_node for r in p])}"
                          for n, p in zip(s.nodes, s.per_node))
        return False, (f"asymmetric group ({s.local_rank_n} ranks on each node, at different "
                       f"local positions: {where}; HIER needs the same local ranks on every "
                       "node)")
    if req.op == EncOpType.ALLREDUCE and req.op_elements < s.local_rank_n:
        return False, (f"{req.op_elements} element(s) cannot give each of the "
                       f"{s.local_rank_n} local ranks a slice (the intra reduce-scatter leg)")
    return True, (f"{s.node_n} nodes x {s.local_rank_n} local ranks "
                  f"(node_n * local_rank_n == rank_n {s.rank_n})")


def enc_can_post_mesh_operation(req: Request, topo: Topology, policy: Policy = DEFAULT_POLICY,
                                *, check_window: bool = True) -> Verdict:
    """MESH: latency-optimal fully-peered exchange; the only engine for all-to-all."""
    refusal = _op_refusal(EncAlgType.MESH, req.op)
    if refusal:
        return False, refusal
    p = topo.platform
    if not p.mesh:
        return False, f"{topo.platform_title} has no mesh (nccl_mesh_supported false)"
    s = group_shape(topo, req.group)
    if s.rank_n < 2:
        return False, "a single rank has no peers"
    if s.rank_n > MAX_PEERS:
        return False, (f"{s.rank_n} ranks: a mesh entry numbers itself and every peer in a u8 "
                       f"of the leg IR (at most {MAX_PEERS} ranks; ours)")
    if s.scope == INTER and req.op != EncOpType.ALLTOALL:
        if s.local_rank_n != 1:
            return False, (f"inter-node mesh over the whole group needs one rank per node "
                           f"(local_rank_n {s.local_rank_n}); such groups go hierarchical")
        if s.node_n > policy.inter_mesh_max_nodes:
            return False, (f"{s.node_n} nodes > inter_mesh_max_nodes "
                           f"{policy.inter_mesh_max_nodes} (ingress congestion)")
    sub = p.mesh_sub_type if s.scope == INTRA else EncAlgMeshType.FULL_MESH
    need = mesh_channel_buffer_bytes(EncAlgType.MESH, req)
    if need > ENC_MESH_CHANNEL_BUF_MAX_SIZE:
        k = s.rank_n - 1
        slots = f"{k} channel-buffer slots of" if k > 1 else "a channel-buffer slot of"
        return False, (f"{slots} {fmt_bytes(need // k)} need{'s' if k == 1 else ''} "
                       f"{fmt_bytes(need)}, more than the mesh channel buffer "
                       f"(ENC_MESH_CHANNEL_BUF_MAX_SIZE {fmt_bytes(ENC_MESH_CHANNEL_BUF_MAX_SIZE)})")
    ok = f"{s.scope}-node {req.op.name} over {s.rank_n} ranks ({sub.name})"
    ok, why = _window(req, topo, policy, EncAlgType.MESH, s.scope, ok, check_window)
    if ok and check_window and (gate := mesh_bd_refusal(req, topo)) is not None:
        return False, gate  # checked in the window only (an out-of-window MESH says so)
    return ok, why


def _segment_bds(run: int | None, a: np.ndarray, b: np.ndarray, origin: np.ndarray,
                 per_tile: np.ndarray) -> np.ndarray:
    """BDs of one stream of each leg moving elements [a, b) of a buffer whose contiguous runs
    hold ``run`` elements from element ``origin`` (None: a linear buffer): one BD per run
    within each tile of ``per_tile`` elements (the emitter's ``_bds_runs``), all legs at
    once."""
    tiles = np.where(b > a, -(-(b - a) // per_tile), 0)
    if run is None:
        return tiles
    leg, k, _ = expand(tiles)
    ta = a[leg] + k * per_tile[leg]
    tb = np.minimum(ta + per_tile[leg], b[leg]) - origin[leg]
    ta = ta - origin[leg]
    return np.bincount(leg, weights=(tb - 1) // run - ta // run + 1,
                       minlength=a.size).astype(np.int64)


def _per_tile(dsize: int, a: np.ndarray, b: np.ndarray, reduce: bool, hw: int) -> np.ndarray:
    """Elements per tile of legs of ``b - a`` elements (``tile_elements``)."""
    return tile_elements(dsize, np.maximum(b - a, 1), np.full(a.size, reduce), hw_generation=hw)


@functools.lru_cache(maxsize=1 << 16)  # a small tuple each; a model's shapes, up to MAX_TRIGGERS
def _mesh_bds(op: EncOpType, dsize: int, n: int, elems: int, src_run: int | None,
              dst_run: int | None, intra: bool, hw: int) -> tuple[str, int, str]:
    """The (leg, count, M2S or S2M) of a MESH leg that needs the most BDs of one stream
    direction (:func:`mesh_bd_refusal`), cached by the request's identity."""
    j = np.arange(n + 1, dtype=np.int64)
    edges = (j * elems // n if op == EncOpType.ALLREDUCE else j * (elems // n))
    a, b = edges[:-1], edges[1:]
    a, b = a[b > a], b[b > a]
    zero = np.zeros_like(a)
    worst = [("mesh_send", 0, "M2S")]
    tile = _per_tile(dsize, a, b, False, hw)
    if op != EncOpType.ALLGATHER:  # scatter: IN block j to a peer's linear slot
        worst.append(("mesh_send", int(_segment_bds(src_run, a, b, zero, tile).max()), "M2S"))
        # reduce: one leg a page of the rank's block, IN and the n - 1 slots into OUT (of a
        # reduce-scatter: the block alone), MAX_SRC sources a link, each later link reading
        # OUT again with up to MAX_SRC - 1 slots
        # (imported here: lowering another engine loads only its own composer,
        # tests/test_startup_imports.py)
        from nrtrewrite.compose.mesh import mesh_page_bytes
        pe = mesh_page_bytes(dsize) // dsize
        pages = -(-(b - a) // pe)
        blk, k, _ = expand(pages)
        pa = a[blk] + k * pe
        pb = np.minimum(pa + pe, b[blk])
        ptile = _per_tile(dsize, pa, pb, True, hw)
        out_origin = pa * 0 if op == EncOpType.ALLREDUCE else a[blk]
        out_bds = _segment_bds(dst_run, pa, pb, out_origin, ptile)
        linear = _segment_bds(None, pa, pb, pa, ptile)
        m2s = _segment_bds(src_run, pa, pb, pa * 0, ptile) + (min(n, MAX_SRC) - 1) * linear
        if n > MAX_SRC:
            m2s = np.maximum(m2s, out_bds + min(n - MAX_SRC, MAX_SRC - 1) * linear)
        worst += [("mesh_reduce", int(m2s.max()), "M2S"),
                  ("mesh_reduce", int(out_bds.max()), "S2M")]
    if op != EncOpType.REDUCE_SCATTER:
        # gather: the rank's block of OUT (an all-gather's IN, which holds it alone) to the
        # peers' OUT, one S2M stream a peer, at most MAX_DST a leg; those of a network-bound
        # leg stage in the linear gateway (one BD a tile); an all-gather's copy of its block
        # to its own OUT is a leg of one S2M stream
        src_run_g, origin = (dst_run, zero) if op == EncOpType.ALLREDUCE else (src_run, a)
        worst.append(("mesh_send", int(_segment_bds(src_run_g, a, b, origin, tile).max()),
                      "M2S"))
        dst = _segment_bds(dst_run, a, b, zero, tile)
        peers = min(n - 1, MAX_DST)
        s2m = (peers * dst if intra
               else np.maximum(dst, peers * _segment_bds(None, a, b, zero, tile)))
        worst.append(("mesh_send", int(s2m.max()), "S2M"))
    return max(worst, key=lambda w: w[1])


def mesh_bd_refusal(req: Request, topo: Topology) -> str | None:
    """Why the default selection does not pick MESH for ``req`` (a policy gate), or None: a
    ``mesh_send`` or ``mesh_reduce`` leg of it would need more than ``TPINC_MAX_BDS`` M2S or
    S2M BDs, which ``lower`` refuses (docs/RELIABILITY.md §3), when an SBUF operand's access
    pattern has short rows (one BD per run within each tile).  The legs counted
    (compose/mesh.py, docs/SELECTION.md "MESH's BD gate"): an all-reduce's and a
    reduce-scatter's scatter legs, block j of IN to a peer's linear channel-buffer slot, and
    their reduce legs, one a 64 KiB page of the rank's block (IN and the slots into OUT,
    chained MAX_SRC sources a link); an all-reduce's gather legs, the rank's block of OUT to
    at most ``MAX_DST`` (8) peers' OUT a leg, an all-gather's, its IN (which holds that block
    only), and its copy of the block to its own OUT.  The S2M streams of a network-bound leg
    stage in the linear gateway (one BD a tile each); the receiving side's writes into OUT
    (post_recv, the network proxy's) are not tp_inc legs.  Blocks as
    ``compose.mesh.block_bounds``; tiles as the emitter's legs."""
    if req.src_run is None and req.dst_run is None or req.op not in _AR_AG_RS:
        return None
    leg, count, which = _mesh_bds(req.op, DTYPE_SIZE[req.dtype], len(req.group),
                                  req.op_elements, req.src_run, req.dst_run,
                                  group_shape(topo, req.group).scope == INTRA,
                                  topo.platform.hw_generation)
    if count <= TPINC_MAX_BDS:
        return None
    return (f"{POLICY_GATE}a {leg} leg would need {count} {which} BDs, more than "
            f"TPINC_MAX_BDS {TPINC_MAX_BDS} a leg ({sbuf_runs_text(req)}; lower refuses it, "
            "forced too)")


def engine_bd_refusal(trigger: Union[Trigger, Request], req: Request, alg: EncAlgType,
                      topo: Topology, policy: Policy, override: AlgoOverride | None,
                      host_cc: bool = False) -> str | None:
    """Why the default selection does not take ``alg`` for ``trigger`` (a policy gate), or
    None: a leg of it, composed as ``lower`` composes it, would need more than
    ``TPINC_MAX_BDS`` M2S or S2M BDs, which ``lower`` refuses (docs/SELECTION.md "The BD
    gate"; :func:`nrtrewrite.bdgate.worst_leg`).  Only a trigger (not a bare request) with
    an SBUF operand of an engine this build lowers is counted; none whose legs cannot reach
    the limit (a leg's stream moves at most the op's elements, a BD at least one, at most
    ``MAX_SRC`` sources and ``MAX_DST`` destinations a leg).  Cached by the trigger's
    identity in the topology (op, dtype, reduce op, group, element count, run lengths, the
    engine, the policy's value, ``host_cc`` and, for HIER, whose legs an override may steer,
    its text); an engine its composer refuses for another reason (its ``prepare`` or
    ``entries`` raise) is refused here with that reason (``LOWER_REFUSES``), one whose
    selection raises is not (the cascade's selection of it raises the same); no engine of a
    trigger ``lower``'s own checks refuse is (its dtype, its operands: ``lower`` names that
    reason, not the gate's).  ``host_cc``:
    ``lower``'s ``--host-cc``, which composes the all-reduce's last reduce step as one
    ``recv_reduce_copy_send`` leg writing two outputs (RING, KANGARING, HIER's legs)."""
    if (not isinstance(trigger, Trigger) or not policy.is_lowerable(alg, req.op)
            or _not_counted(trigger, req, alg, topo)):
        return None
    if alg == EncAlgType.MESH:  # (counted from the access pattern, equal to the composed)
        return mesh_bd_refusal(req, topo)
    key = ("bd_gate", alg, policy, host_cc, override.text if alg == EncAlgType.HIER
           and override else None) + _shape_key(trigger, req)

    def make() -> tuple[str, int, str] | str | None:
        from nrtrewrite.bdgate import worst_leg  # (composers: loaded for SBUF triggers only)
        try:
            sel = select(trigger, topo, override=override, policy=policy, _take=alg)
        except NrtRewriteError:
            # (the cascade's own selection of it raises the same error when it takes it,
            # as it does for a DRAM trigger: that error is the refusal)
            return None
        try:
            return worst_leg(trigger, sel, topo, TPINC_MAX_BDS, host_cc=host_cc,
                             over_only=True)
        except NrtRewriteError as err:
            # its composer refuses the trigger (its prepare or its entries, as lower's):
            # lower would refuse it so, and the cascade goes on (until 2026-12-07 such an
            # engine counted as fitting, taken though another fit); its entries' refusal
            # from the rank on, the first rank lower meets it at, as explain gives lower's
            # line (until 2026-12-07 without the rank)
            rank = err.where.rank
            return err.why if rank is None else f"rank {rank}: {err.why}"
    worst = topo.cached(key, make)
    if isinstance(worst, str):
        return f"{LOWER_REFUSES}{worst}"
    if worst is None or worst[1] <= TPINC_MAX_BDS:
        return None
    leg, count, which = worst
    return (f"{POLICY_GATE}a {leg} leg would need {count} {which} BDs, more than "
            f"TPINC_MAX_BDS {TPINC_MAX_BDS} a leg ({bds_text(req)}; lower refuses it, "
            "forced too)")


def forced_fits(trigger: Trigger, req: Request, alg: EncAlgType, topo: Topology,
                policy: Policy, host_cc: bool = False) -> bool:
    """Whether ``--algo <alg>`` (its own override, ``alg`` forced for every op) lowers
    ``trigger`` as far as the BD gate counts: the forced selection is legal and lowerable, its
    legs compose, and none needs more than ``TPINC_MAX_BDS`` M2S or S2M BDs (the gate's count,
    the emitter's).  The engines the default selection's refusal says ``--algo`` may force
    (SELECTION.md "The BD gate").  Cached as :func:`engine_bd_refusal` is, under the forced
    override."""
    forced = parse_algo_override(alg.name.lower())
    key = ("bd_forced", alg, policy, host_cc) + _shape_key(trigger, req)

    def make() -> bool:
        from nrtrewrite.bdgate import worst_leg  # (composers: loaded for SBUF triggers only)
        try:
            sel = select(trigger, topo, override=forced, policy=policy, host_cc=host_cc)
            if sel.alg != alg:
                return False
            if alg == EncAlgType.MESH:  # (counted from the access pattern, as the gate's)
                return mesh_bd_refusal(req, topo) is None
            return worst_leg(trigger, sel, topo, TPINC_MAX_BDS, host_cc=host_cc,
                             over_only=True)[1] <= TPINC_MAX_BDS
        except NrtRewriteError:
            return False
    return topo.cached(key, make)


def lowered_bd_refusal(trigger: Trigger, sel: "Selection", topo: Topology,
                       policy: Policy = DEFAULT_POLICY, host_cc: bool = False):
    """The leg ``lower`` refuses first for more than ``TPINC_MAX_BDS`` M2S or S2M BDs when it
    lowers ``trigger`` as ``sel`` (:func:`nrtrewrite.bdgate.first_over`: its rank, leg,
    channel and counts), or None: what the BD gate did not count, an engine the override
    forces (``--algo ring``, ``allreduce:ring``: ``lower`` composes it whatever its legs
    need, and refuses it at that leg) or a flat fallback the policy's choice was lowered as;
    the default selection's own engine the gate counted (docs/SELECTION.md "The BD gate").
    None as for :func:`engine_bd_refusal`: no SBUF operand, legs that cannot reach the
    limit, a trigger ``lower``'s own checks refuse.  Cached by the trigger's shape, the
    engine and its legs, the policy and ``host_cc``."""
    if not bd_uncounted(trigger, sel, topo):
        return None
    req = as_request(trigger)
    key = ("bd_lowered", sel.alg, tuple((leg.name, leg.alg) for leg in sel.legs),
           sel.n_channels, policy, host_cc) + _shape_key(trigger, req)

    def make():
        from nrtrewrite.bdgate import first_over  # (composers: loaded for SBUF triggers only)
        try:
            return first_over(trigger, sel, topo, TPINC_MAX_BDS, host_cc=host_cc)
        except NrtRewriteError:  # (its composer's refusal: not a count)
            return None
    return topo.cached(key, make)


def bd_uncounted(trigger: Trigger, sel: "Selection", topo: Topology) -> bool:
    """Whether ``lower``'s legs of ``trigger`` lowered as ``sel`` may pass ``TPINC_MAX_BDS``
    though the BD gate did not count them: an engine the override forces (``lower``
    composes it whatever its legs need) or a flat fallback the policy's choice was lowered
    as, not the default selection's own engine (the gate counted it: it fits), and legs
    the gate would count (:func:`_not_counted`).  :func:`lowered_bd_refusal` counts such a
    selection for every rank (``explain``), ``lower.rank_bd_refusal`` for one rank's
    composed entries (``schedule``)."""
    if sel.alg == EncAlgType.INVALID:
        return False
    forced = forced_engine(sel, trigger.op, sel.policy_alg)
    if not forced and sel.alg == sel.policy_alg:
        return False  # (the gate counted it: the default selection took it, it fits)
    return not _not_counted(trigger, as_request(trigger), sel.alg, topo)


def _not_counted(trigger: Trigger, req: Request, alg: EncAlgType, topo: Topology) -> bool:
    """Whether the BD gate leaves ``alg``'s legs of ``trigger`` uncounted: with DRAM
    operands only, legs that stay under the limit (:func:`_dram_under_limit`); any legs
    within the trigger's bound (:func:`_bd_bound`); a trigger ``lower``'s own checks refuse
    (:func:`_lower_refuses`)."""
    hw = topo.platform.hw_generation
    return (_dram_under_limit(req, alg, hw) or _bd_bound(req, hw) <= TPINC_MAX_BDS
            or _lower_refuses(trigger))


def _shape_key(trigger: Trigger, req: Request) -> tuple:
    """What a trigger's legs' BD counts depend on: its op, dtype, reduce op, group, element
    count and its operands' run lengths (not their addresses: :mod:`nrtrewrite.bdgate`)."""
    return (trigger.op, trigger.dtype, trigger.alu_op, trigger.replica_group,
            trigger.num_elements, req.src_run, req.dst_run)


def _lower_refuses(trigger: Trigger) -> bool:
    """Whether ``lower``'s own checks of ``trigger`` (:func:`nrtrewrite.lower.check_trigger`:
    its dtype, then its operands) refuse it, whatever engine is taken: the BD gate leaves
    such a trigger to them, so ``lower`` names that reason and not the gate's (until
    2026-12-07 an FP32 all-reduce of short SBUF rows was refused by the gate)."""
    from nrtrewrite.lower import check_trigger  # (lower imports this module)
    try:
        check_trigger(trigger)
    except NrtRewriteError:
        return True
    return False


#: The engines whose legs of DRAM operands stay under TPINC_MAX_BDS whatever the message:
#: RING, KANGARING, SINGLE_CYCLE_RING and HIER's legs move at most a chunk half (at most
#: DEFAULT_CHUNK_BYTES: a few hundred tiles), MESH and SINGLE_STEP_MESH a channel buffer, and a
#: MESH all-gather's mesh_send, which writes the rank's input to up to 8 destinations, at most
#: about 51 Ki BDs within the 4 GiB every operand must fit (T3D_START_ADDR_LIMIT; review 53w
#: measured 57,288 at a 4 GiB output, which lower refuses for that span) (docs/SELECTION.md
#: "The BD gate"). Any other engine, an RDH one or one added later, is counted.
_DRAM_BOUNDED = frozenset({EncAlgType.RING, EncAlgType.KANGARING, EncAlgType.SINGLE_CYCLE_RING,
                           EncAlgType.HIER, EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH})
#: The RDH engines, whose DRAM legs are bounded by the message's tiles (_dram_under_limit).
_DRAM_RDH = frozenset({EncAlgType.INTRA_RDH, EncAlgType.INTER_RDH})


def _dram_under_limit(req: Request, alg: EncAlgType, hw: int) -> bool:
    """Whether ``alg``'s legs of ``req``, with DRAM operands only, stay under
    ``TPINC_MAX_BDS`` without being composed: an engine that cuts them into chunks
    (:data:`_DRAM_BOUNDED`), or an RDH one for a message of at most about 32 Ki tiles (an
    RDH leg reads ranges of the message that add up to at most all of it, each from at most
    two sources, one BD a tile: at most ``2 * (tiles + 8)`` BDs a stream; about 64 Mi
    elements on v3, every message the default policy's RDH windows take). Not counted, so a
    large DRAM trigger costs no composition of every rank of every engine."""
    if req.src_run is not None or req.dst_run is not None:
        return False
    if alg in _DRAM_BOUNDED:
        return True
    if alg not in _DRAM_RDH:
        return False
    tile = min(cce_max_elements(hw), BD_MAX_BYTES // 8)
    return 2 * (-(-req.op_elements // tile) + 8) <= TPINC_MAX_BDS


def _bd_bound(req: Request, hw: int) -> int:
    """At most the BDs of one stream direction of any leg of any engine for ``req``: a leg
    moves at most the op's ``E`` elements in at most ``MAX_SRC`` / ``MAX_DST`` (8) streams;
    a stream's BDs are at most its elements, and at most its runs, ``ceil(E / r)`` for the
    shortest run ``r``, plus a BD a tile (a tile boundary splits at most one run), a leg
    being cut into at most ``ceil(E / c) + 3`` tiles (``tile_elements``: a packet of at
    least half a leg's bytes, up to ``BD_MAX_BYTES``, at most the CCE cap of the generation
    for a reduce; ``c`` the least of those full tiles, of elements of up to 8 bytes).  With
    no SBUF operand every stream is linear (the gateway too), one BD a tile: the tiles
    alone, so a DRAM trigger of at most about 16 Mi elements (v3) is never composed."""
    e = req.op_elements
    runs = [r for r in (req.src_run, req.dst_run) if r is not None]
    split = -(-e // min(runs)) if runs else 0  # (DRAM operands: linear, one BD a tile)
    tile = min(cce_max_elements(hw), BD_MAX_BYTES // 8)
    return max(MAX_SRC, MAX_DST) * min(e, split + -(-e // tile) + 3)


def _bd_gated(reason: str) -> bool:
    """Whether ``reason`` is a BD gate's refusal (MESH's or :func:`engine_bd_refusal`'s: a
    leg over ``TPINC_MAX_BDS``, or the engine's composer refusing the trigger)."""
    return reason.startswith(POLICY_GATE) and ("TPINC_MAX_BDS" in reason
                                               or reason.startswith(LOWER_REFUSES))


def bds_text(req: Request) -> str:
    """What makes a leg's BDs: an SBUF operand's runs (:func:`sbuf_runs_text`), or with DRAM
    operands only the leg's tiles, one BD each a stream."""
    if req.src_run is None and req.dst_run is None:
        return "DRAM operands: a BD a tile per source and destination"
    return sbuf_runs_text(req)


def sbuf_runs_text(req: Request) -> str:
    """Why an SBUF operand makes so many BDs: each contiguous run of its access pattern is a
    BD, its rows of ``src_run`` / ``dst_run`` elements."""
    rows = [f"the {name}'s rows of {run} element{'s' if run != 1 else ''}"
            for name, run in (("src", req.src_run), ("dst", req.dst_run)) if run is not None]
    return f"an SBUF access pattern's runs, a BD each: {' and '.join(rows)}"


def mesh_channel_buffer_bytes(alg: EncAlgType, req: Request) -> int:
    """Bytes of mesh channel buffer one rank receives into: one slot per peer, a block of the
    message for MESH (all-gather needs none), the whole message for SINGLE_STEP_MESH."""
    n = len(req.group)
    if n < 2 or req.op not in _AR_AG_RS or req.op == EncOpType.ALLGATHER:
        return 0
    if alg == EncAlgType.SINGLE_STEP_MESH:
        return (n - 1) * req.op_bytes
    dsize = DTYPE_SIZE[req.dtype]
    elems = req.op_bytes // dsize
    return (n - 1) * -(-elems // n) * dsize


def _rd_steps_refusal(n: int) -> str | None:
    """Why a recursive doubling over ``n`` ranks cannot be lowered, or None: its hypercube of
    2^floor(log2 n) ranks takes one step a dimension, and the event schedule has
    EVT_RD_STEP_0..6 (``ENC_RDH_MAX_RD_STEPS``; compose/rdh.plan_rdh refuses the same)."""
    steps = n.bit_length() - 1
    if steps <= ENC_RDH_MAX_RD_STEPS:
        return None
    return (f"{n} ranks need {steps} recursive-doubling steps; the events EVT_RD_STEP_0.."
            f"{ENC_RDH_MAX_RD_STEPS - 1} allow {ENC_RDH_MAX_RD_STEPS} (at most "
            f"{(1 << (ENC_RDH_MAX_RD_STEPS + 1)) - 1} ranks)")


def enc_can_post_intra_rdh_operation(req: Request, topo: Topology,
                                     policy: Policy = DEFAULT_POLICY, *,
                                     check_window: bool = True) -> Verdict:
    """INTRA_RDH: inter-chip recursive doubling/halving + intra-chip stage; depends on mesh."""
    refusal = _ar_ag_rs_refusal(EncAlgType.INTRA_RDH, req.op)
    if refusal:
        return False, refusal
    s = group_shape(topo, req.group)
    if s.scope != INTRA:
        return False, f"INTRA_RDH is intra-node only (group spans {s.node_n} nodes)"
    if not topo.platform.mesh:
        return False, (f"{topo.platform_title} has no mesh (\"RDH construction will be skipped "
                       "because it depends on Mesh\")")
    ndev = len(s.devices)
    if s.rank_n < 2:
        return False, "a single rank has no partners"
    if not _is_pow2(ndev):
        return False, f"{ndev} devices is not a power of two (RDH is a hypercube exchange)"
    if len(set(s.ranks_per_device)) != 1:
        return False, "uneven ranks per device (RDH needs the same in-chip ranks on every chip)"
    if (why := _rd_steps_refusal(s.rank_n)) is not None:
        return False, why
    dim = s.rank_n.bit_length() - 1
    fold = s.rank_n - (1 << dim)
    ok = (f"{ndev} device(s) x {s.ranks_per_device[0]} ranks (hypercube of dimension {dim}"
          + (f", {fold} rank(s) folded)" if fold else ")"))
    return _window(req, topo, policy, EncAlgType.INTRA_RDH, INTRA, ok, check_window)


def enc_can_post_inter_rdh_operation(req: Request, topo: Topology,
                                     policy: Policy = DEFAULT_POLICY, *,
                                     check_window: bool = True) -> Verdict:
    """INTER_RDH: recursive doubling/halving between nodes, one rank per node."""
    refusal = _ar_ag_rs_refusal(EncAlgType.INTER_RDH, req.op)
    if refusal:
        return False, refusal
    s = group_shape(topo, req.group)
    if s.scope != INTER:
        return False, "INTER_RDH is inter-node only (group lies within one node)"
    if s.local_rank_n != 1:
        return False, f"INTER_RDH needs one rank per node (local_rank_n {s.local_rank_n})"
    if not _is_pow2(s.node_n) or s.node_n < policy.inter_rdh_min_nodes:
        return False, (f"node_n {s.node_n} is not a power of two >= "
                       f"{policy.inter_rdh_min_nodes}")
    if (why := _rd_steps_refusal(s.rank_n)) is not None:
        return False, why
    ok = f"{s.node_n} nodes, one rank each"
    return _window(req, topo, policy, EncAlgType.INTER_RDH, INTER, ok, check_window)


def enc_can_post_kangaring_operation(req: Request, topo: Topology,
                                     policy: Policy = DEFAULT_POLICY, *,
                                     check_window: bool = True) -> Verdict:
    """KANGARING: intra-node only (never an inter leg), whole devices, trn2-class MLAs."""
    refusal = _ar_ag_rs_refusal(EncAlgType.KANGARING, req.op)
    if refusal:
        return False, refusal
    if req.op != EncOpType.ALLGATHER and req.alu not in (None, AluOp.ADD):
        return False, (f"{req.alu.name} {req.op.name}: direct_reduce_send_kangaring reduces the "
                       "unit's inputs with SDMA_CCETYPE_ADD (seed 003 §4), so KANGARING only "
                       "reduces ADD")
    ok, why = kangaring_shape(topo, req.group)
    if not ok:
        return False, why
    n, vnc = len(req.group), topo.lnc_size
    if n > KANGARING_LOGICAL_PATH_LEN:
        return False, (f"{n} ranks exceed the {KANGARING_LOGICAL_PATH_LEN} of enc_kangaring's "
                       f"logical_path[{KANGARING_LOGICAL_PATH_LEN}] (seed 000 §2.3)")
    if vnc == 2 and n <= 4:
        return False, f"vnc 2 needs rank_n > 4 (rank_n {n})"
    if vnc == 1 and n <= 8:
        return False, f"vnc 1 needs rank_n > 8 (rank_n {n})"
    return _window(req, topo, policy, EncAlgType.KANGARING, INTRA, why, check_window)


#: How the refusal of a policy condition checked with the size window begins (SELECTION.md
#: §3: SINGLE_CYCLE_RING's inter-node, one rank a node), which a reason of an engine taken
#: outside its window then names (:func:`_none_inside`).
POLICY_GATE = "policy gate: "
#: The BD gate's reason for an engine whose composer refuses the trigger (its prepare or its
#: entries raise, as they would in ``lower``): passed over as a leg over TPINC_MAX_BDS is
#: (SELECTION.md "The BD gate")
LOWER_REFUSES = POLICY_GATE + "lower refuses it: "


def enc_can_post_single_cycle_ring(req: Request, topo: Topology,
                                   policy: Policy = DEFAULT_POLICY, *,
                                   check_window: bool = True) -> Verdict:
    """SINGLE_CYCLE_RING: all-reduce only (``cmp $0x1,%ebp`` at 0xfaadd, seed 000 §1.4).

    Structurally (``check_window=False``) it composes any all-reduce (docs/DESIGN.md
    "Single-cycle ring"); the libnrt gate - inter-node, one rank per node (node_n > 1,
    rank_n == node_n) - is a policy condition checked with the size window, so the cascade
    picks it only there while ``--algo`` may force it on any all-reduce group."""
    if req.op != EncOpType.ALLREDUCE:
        return False, f"SINGLE_CYCLE_RING is all-reduce only (op_type {req.op.name})"
    s = group_shape(topo, req.group)
    if not check_window:
        return True, (f"{s.rank_n} rank(s) over {s.node_n} node(s): a ring cut opposite each "
                      "chunk's root, reduced from both sides")
    if s.node_n < 2:
        return False, (f"{POLICY_GATE}SINGLE_CYCLE_RING is inter-node only (group lies "
                       "within one node; --algo may force it)")
    if s.rank_n != s.node_n:
        return False, (f"{POLICY_GATE}SINGLE_CYCLE_RING needs one rank per node (rank_n "
                       f"{s.rank_n} != node_n {s.node_n}; --algo may force it)")
    ok = f"{s.node_n} nodes, one rank each"
    return _window(req, topo, policy, EncAlgType.SINGLE_CYCLE_RING, INTER, ok)


def can_post_ring(req: Request, topo: Topology, policy: Policy = DEFAULT_POLICY, *,
                  check_window: bool = True) -> Verdict:
    """RING (not a runtime symbol: the runtime's ring is the unconditional fallback) --
    legal for everything the ring composer dispatches: all-reduce, all-gather and
    reduce-scatter (``__compose_channel_ring``, seed 001 §3)."""
    refusal = _op_refusal(EncAlgType.RING, req.op)
    if refusal:
        return False, refusal.replace("all-to-all needs mesh", "a ring cannot express "
                                      "all-to-all (needs mesh)")
    if req.op not in _AR_AG_RS:
        return False, f"the ring composer has no {req.op.name} channel composer"
    s = group_shape(topo, req.group)
    if s.rank_n == 1:
        return True, "single rank: nothing to exchange"
    if s.node_n > 1:
        return True, f"flat ring over {s.node_n} nodes ({s.node_n} network hops per channel)"
    return True, "always legal (the fallback)"


def _mesh_variant(alg: EncAlgType) -> Callable[..., Verdict]:
    def predicate(req: Request, topo: Topology, policy: Policy = DEFAULT_POLICY, *,
                  check_window: bool = True) -> Verdict:
        if alg == EncAlgType.SINGLE_STEP_MESH:
            if req.op != EncOpType.ALLREDUCE:
                return False, f"SINGLE_STEP_MESH is all-reduce only (op_type {req.op.name})"
            ok, why = enc_can_post_mesh_operation(req, topo, policy, check_window=False)
            if not ok:
                return False, why
            if group_shape(topo, req.group).node_n > 1:
                return False, ("SINGLE_STEP_MESH is intra-node only here: its handshake and "
                               "EVT_SYNC carry no data, and the net proxy only carries data")
            need = mesh_channel_buffer_bytes(alg, req)
            if need > ENC_MESH_CHANNEL_BUF_MAX_SIZE:
                return False, (f"every peer's whole input needs {fmt_bytes(need)} of channel "
                               f"buffer ({len(req.group) - 1} x {fmt_bytes(req.op_bytes)}), more "
                               f"than ENC_MESH_CHANNEL_BUF_MAX_SIZE "
                               f"{fmt_bytes(ENC_MESH_CHANNEL_BUF_MAX_SIZE)}")
            return True, f"{why}; not in the precedence cascade, only by --algo"
        if alg == EncAlgType.TWO_STEP_POD_MESH:
            return False, f"needs an UltraServer pod (enable_pod); {topo.title} has no pods"
        return False, f"{alg.name} needs a NeuronSwitch fabric; {topo.title} has none"
    predicate.__name__ = f"can_post_{alg.name.lower()}"
    return predicate


#: engine -> (predicate name as reported, predicate).
PREDICATES: dict[EncAlgType, tuple[str, Callable[..., Verdict]]] = {
    EncAlgType.HIER: ("enc_can_post_hierarchical_operation", enc_can_post_hierarchical_operation),
    EncAlgType.INTRA_RDH: ("enc_can_post_intra_rdh_operation", enc_can_post_intra_rdh_operation),
    EncAlgType.MESH: ("enc_can_post_mesh_operation", enc_can_post_mesh_operation),
    EncAlgType.KANGARING: ("enc_can_post_kangaring_operation", enc_can_post_kangaring_operation),
    EncAlgType.SINGLE_CYCLE_RING: ("enc_can_post_single_cycle_ring",
                                   enc_can_post_single_cycle_ring),
    EncAlgType.INTER_RDH: ("enc_can_post_inter_rdh_operation", enc_can_post_inter_rdh_operation),
    EncAlgType.RING: ("can_post_ring", can_post_ring),
    EncAlgType.SINGLE_STEP_MESH: ("can_post_single_step_mesh",
                                  _mesh_variant(EncAlgType.SINGLE_STEP_MESH)),
    EncAlgType.TWO_STEP_POD_MESH: ("can_post_two_step_pod_mesh",
                                   _mesh_variant(EncAlgType.TWO_STEP_POD_MESH)),
    EncAlgType.LATENCY_OPT_MESH: ("can_post_latency_opt_mesh",
                                  _mesh_variant(EncAlgType.LATENCY_OPT_MESH)),
    EncAlgType.BW_OPT_MESH: ("can_post_bw_opt_mesh", _mesh_variant(EncAlgType.BW_OPT_MESH)),
}

#: Candidates in report order: the cascade first, then the engines only --algo can pick.
CANDIDATE_ORDER: tuple[EncAlgType, ...] = tuple(PREDICATES)


# -- results ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Candidate:
    """One engine's verdict for one request."""

    alg: EncAlgType
    legal: bool  # the predicate's structural verdict (no size window)
    reason: str
    lowerable: bool
    in_window: bool = True  # inside the policy's size window (always True when not legal)
    predicate: str = ""
    chosen: bool = False  # the policy's choice


@dataclass(frozen=True)
class Leg:
    """One leg of a selection: a collective on each of ``groups`` with engine ``alg``."""

    #: "flat", or a HIER leg: intra_redsct, inter_allr, intra_allg, inter_allg, inter_redsct
    name: str
    op: EncOpType
    alg: EncAlgType
    sub_type: EncAlgMeshType | None
    groups: tuple[tuple[int, ...], ...]
    nbytes: int = 0  # message size of the leg (per group)
    reason: str = ""


@dataclass(frozen=True)
class Selection:
    trigger: int  # Trigger.ordinal
    policy_alg: EncAlgType  # what the policy (or override) picked
    alg: EncAlgType  # what lower will use (INVALID only with strict=False and nothing lowerable)
    legs: tuple[Leg, ...]  # legs actually lowered
    policy_legs: tuple[Leg, ...]  # legs of the policy's choice
    candidates: tuple[Candidate, ...]
    n_channels: int
    reason: str
    fallback_reason: str | None
    # -- context (added beyond the contract) --
    op: EncOpType = EncOpType.ALLREDUCE
    dtype: DType = DType.BF16
    group: tuple[int, ...] = ()
    op_bytes: int = 0
    sbuf: bool = False
    scope: str = INTRA
    channel_reason: str = ""
    hier_selections: tuple[tuple[str, EncAlgType], ...] = ()  # all five slots when HIER
    hybrid_ring: bool = False
    override: str | None = None

    @property
    def metaring_type(self) -> MetaringType | None:
        """The per-object sub-enum of ``alg`` (never the SPAD nibble; seed 000 §1.1)."""
        return METARING_OF.get(self.alg)

    def candidate(self, alg: EncAlgType) -> Candidate:
        return next(c for c in self.candidates if c.alg == alg)

    def hier_log_line(self) -> str | None:
        """The runtime's "Hier algorithm selections" line for a HIER policy choice."""
        if not self.hier_selections:
            return None
        return "Hier algorithm selections - " + " ".join(
            f"{slot} {int(alg)}" for slot, alg in self.hier_selections)


# -- override -------------------------------------------------------------------------------

_ALG_NAMES: dict[str, tuple[EncAlgType, ...]] = {
    a.name.lower(): (a,) for a in EncAlgType if a != EncAlgType.INVALID}
_ALG_NAMES.update({
    "rdh": (EncAlgType.INTRA_RDH, EncAlgType.INTER_RDH),
    "hierarchical": (EncAlgType.HIER,),
    "kangaroo": (EncAlgType.KANGARING,),
    "single_cycle": (EncAlgType.SINGLE_CYCLE_RING,),
})

#: The collectives --op and an --algo clause name (docs/CLI.md, SELECTION.md §8): the six this
#: selector handles, not SEND, RECV nor the permutes (no composer here, no NEFF-like ctype).
_OP_NAMES: dict[str, EncOpType] = {}
for _op in sorted(_SELECTABLE):
    _OP_NAMES[_op.name.lower()] = _op
    _OP_NAMES[_op.name.lower().replace("_", "")] = _op
_OP_NAMES.update({"all_reduce": EncOpType.ALLREDUCE, "all_gather": EncOpType.ALLGATHER,
                  "all_to_all": EncOpType.ALLTOALL, "redsct": EncOpType.REDUCE_SCATTER,
                  "reducescatter": EncOpType.REDUCE_SCATTER})


#: The collectives as an unknown one's refusal lists them.
_OP_LIST = "allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce"


def _norm(word: str) -> str:
    return word.strip().lower().replace("-", "_")


def parse_alg_name(word: str) -> tuple[EncAlgType, ...]:
    key = _norm(word)
    if key not in _ALG_NAMES:
        names = ", ".join(sorted(k for k in _ALG_NAMES))
        raise ValidationError(f"unknown algorithm {word.strip()!r}"
                              f"{did_you_mean(key, _ALG_NAMES, f'known: {names}')}",
                              field="--algo")
    return _ALG_NAMES[key]


def parse_op_name(word: str, field: str = "op") -> EncOpType:
    """The collective named ``word``; an error names ``field`` (explain's ``--op``)."""
    key = _norm(word)
    if key not in _OP_NAMES:
        raise ValidationError(f"unknown collective {word.strip()!r}"
                              f"{did_you_mean(key, _OP_NAMES, _OP_LIST)}", field=field)
    return _OP_NAMES[key]


@dataclass(frozen=True)
class OverrideClause:
    """``[target:][^]alg[,alg...]``: restrict (or with ``^`` exclude) engines for a target."""

    target: EncOpType | str | None  # None = every op; an op; or a HIER leg name
    algs: frozenset[EncAlgType]
    exclude: bool
    text: str

    def allows(self, alg: EncAlgType) -> bool:
        return (alg in self.algs) != self.exclude

    @property
    def forced(self) -> EncAlgType | None:
        if not self.exclude and len(self.algs) == 1:
            return next(iter(self.algs))
        return None


@dataclass(frozen=True)
class AlgoOverride:
    """A parsed ``--algo`` / ``NRTREWRITE_ALGO`` value (docs/SELECTION.md "Overrides")."""

    text: str
    clauses: tuple[OverrideClause, ...]
    source: str = "--algo"

    def for_op(self, op: EncOpType) -> OverrideClause | None:
        """The clause governing ``op``: its own clause, else the untargeted one."""
        own = [c for c in self.clauses if c.target == op]
        if own:
            return own[-1]
        anyop = [c for c in self.clauses if c.target is None]
        return anyop[-1] if anyop else None

    def for_leg(self, leg: str) -> OverrideClause | None:
        own = [c for c in self.clauses if c.target == leg]
        return own[-1] if own else None


def parse_algo_override(text: str | None) -> AlgoOverride | None:
    """Parse NCCL-like override syntax; ``None`` reads env ``NRTREWRITE_ALGO``.

    ``ring`` (force), ``mesh,ring`` (restrict), ``^mesh`` / ``^mesh,kangaring`` (exclude),
    ``allreduce:kangaring;allgather:ring`` (per collective), ``inter_allr:ring`` (per HIER
    leg).  An unset, empty or blank ``NRTREWRITE_ALGO`` -> None; an empty or blank ``--algo``
    text, an empty clause (``ring;``, ``;;ring``) and two clauses for one target
    (``ring;mesh``) are :class:`ValidationError` s (docs/SELECTION.md §8).
    """
    source = "--algo"
    if text is None:
        text = os.environ.get(ALGO_ENV)
        source = ALGO_ENV
        if text is None or not text.strip():
            return None
    if not text.strip():
        raise ValidationError(f"{source} {text!r} is empty (omit it for the default; unset "
                              f"{ALGO_ENV} to drop that override)", field=source)
    clauses = []
    targets: set = set()
    for raw in text.split(";"):
        part = raw.strip()
        if not part:
            raise ValidationError(f"{source} {text!r}: empty clause (clauses are separated by "
                                  "';', none may be empty)", field=source)
        target: EncOpType | str | None = None
        if ":" in part:
            head, _, part = part.partition(":")
            key = _norm(head)
            if key.startswith("alg_"):
                key = key[4:]
            if key in LEG_OPS:
                target = key
            else:
                try:
                    target = parse_op_name(head)
                except ValidationError:
                    # (the suggestion is either kind, so the list names both: until
                    # 2026-12-06 it listed the legs only, 'allreducee' suggesting a
                    # collective it did not list)
                    hint = did_you_mean(key, [*_OP_NAMES, *LEG_OPS],
                                        f"collectives: {_OP_LIST}; HIER legs: "
                                        f"{', '.join(LEG_OPS)}")
                    raise ValidationError(
                        f"{source} {text!r}: {head.strip()!r} is neither a collective nor a "
                        f"HIER leg{hint}", field=source) from None
        part = part.strip()
        exclude = part.startswith("^")
        if exclude:
            part = part[1:]
        names = part.split(",")
        if not any(w.strip() for w in names):
            raise ValidationError(f"{source} {text!r}: clause {raw.strip()!r} names no algorithm",
                                  field=source)
        if not all(w.strip() for w in names):
            raise ValidationError(f"{source} {text!r}: clause {raw.strip()!r} has an empty name "
                                  "in its list (a leading, trailing or doubled ',')",
                                  field=source)
        algs: set[EncAlgType] = set()
        for w in names:
            try:
                algs.update(parse_alg_name(w))
            except ValidationError as err:
                raise ValidationError(f"{source} {text!r}: {err.reason}", field=source,
                                      left_out=err.left_out) from None
        if target in targets:
            what = ("every collective" if target is None else
                    target if isinstance(target, str) else target.name)
            raise ValidationError(f"{source} {text!r}: two clauses for {what} (give one)",
                                  field=source)
        targets.add(target)
        clauses.append(OverrideClause(target=target, algs=frozenset(algs), exclude=exclude,
                                      text=raw.strip()))
    return AlgoOverride(text=text.strip(), clauses=tuple(clauses), source=source)


def idle_clauses(override: AlgoOverride | None, selections: Iterable[Selection],
                 where: str | None = None) -> list[str]:
    """Warnings for the clauses of ``override`` that govern nothing among ``selections`` (a
    model's): a HIER leg's clause where no collective is lowered as HIER with that leg, a
    collective's clause where the model has none of it.  They are not errors
    (docs/SELECTION.md §8: a clause applies to the legs and collectives the model has), but
    a user who wrote one expects it to have done something.  An untargeted clause governs
    every collective: never idle.  ``where`` (the model's path) begins each warning."""
    if override is None:
        return []
    at = f"{where}: " if where else ""
    sels = list(selections)
    legs = {leg.name for s in sels if s.alg == EncAlgType.HIER for leg in s.legs}
    ops = {s.op for s in sels}
    out = []
    for c in override.clauses:
        if isinstance(c.target, str) and c.target not in legs:
            out.append(f"{at}{override.source} clause {c.text!r} applies to nothing in this "
                       f"model: no collective is lowered as HIER with an {c.target} leg")
        elif isinstance(c.target, EncOpType) and c.target not in ops:
            out.append(f"{at}{override.source} clause {c.text!r} applies to nothing in this "
                       f"model: it has no {c.target.name} collective")
    return out


# -- channels ---------------------------------------------------------------------------------

def _floor_pow2(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n >= 1 else 0


def choose_channels(topo: Topology, req: Request, alg: EncAlgType,
                    policy: Policy = DEFAULT_POLICY) -> tuple[int, str]:
    """Channel count for ``alg`` on ``req`` and why (docs/SELECTION.md "Channels")."""
    if alg in _MESH_FAMILY:
        return 1, ("mesh uses a single channel (nec.h enc_alg_mesh: \"Mesh uses only a "
                   "single channel\")")
    if alg == EncAlgType.INTER_RDH:
        return 1, ("RDH runs on one channel: its per-step event semaphores are one window per "
                   "core (docs/FORMATS.md §7)")
    if alg == EncAlgType.HIER:
        return 1, "per leg"
    if alg == EncAlgType.INVALID:
        return 0, "nothing lowered"
    group = tuple(req.group)
    if len(group) == 1:
        return 1, ("single rank: one channel, the rank its own ring (no peer: "
                   "enc_1rank_primitive copies IN to OUT)")
    if is_hybrid_ring(topo, group):
        n, why = 4, ("hybrid ring (seed 001 §1: node_n 1, vcore 2, 2 device H-cycles, 16 ranks "
                     "one per device at one core index) forces channel_n = 4")
    else:
        caps = _group_channel_caps(topo, group, policy)
        n, why = _channel_count(req.op_bytes, req.op_elements, len(group), caps,
                                policy.bytes_per_channel, policy.min_elements_per_rank_channel)
    if alg == EncAlgType.SINGLE_CYCLE_RING:
        # (the channels its plan runs: a pair, a ring forward and backward, per two channels
        # of the rule, compose/single_cycle.forward_rings; until 2026-12-06 the rule's count,
        # 1 where lower ran one pair, 2 channels, SELECTION.md §7)
        pairs = max(1, n // 2)
        return 2 * pairs, (f"{why}; SINGLE_CYCLE_RING: max(1, {n} / 2) = {pairs} channel "
                           f"pair(s), each ring forward and backward: {2 * pairs} channel(s)")
    return n, why


def choose_channels_each(topo: Topology, op: EncOpType, dtype: DType,
                         groups: tuple[tuple[int, ...], ...], nbytes: int, alg: EncAlgType, *,
                         ordinal: int = 0, sbuf: bool = False, alu: AluOp | None = None,
                         policy: Policy = DEFAULT_POLICY) -> tuple[int, ...]:
    """The count of :func:`choose_channels` on ``Request.for_op(op, dtype, g, nbytes, ...)``
    for each group ``g`` of ``groups`` (the groups of a HIER leg).

    :func:`choose_channels` reads of the group only its size, whether it is a hybrid ring and
    its channel caps, so groups alike in those three get one count: the groups are sorted
    into such classes once per topology (memoised per groups and policy caps), and the count
    is chosen once per class, on its first group."""
    def kind(g: tuple[int, ...]) -> tuple:
        if len(g) == 1:
            return (1,)
        if is_hybrid_ring(topo, g):
            return (len(g), True)
        return (len(g), False, _group_channel_caps(topo, g, policy))

    def make() -> tuple[tuple[int, ...], tuple[int, ...]]:
        classes: dict[tuple, int] = {}
        of = tuple(classes.setdefault(kind(g), len(classes)) for g in groups)
        return of, tuple(of.index(c) for c in range(len(classes)))

    of, first = topo.cached(("channel_classes", groups, policy.max_channels,
                             policy.max_channels_intra, policy.max_channels_inter), make)
    counts = [choose_channels(topo, Request.for_op(op, dtype, groups[i], nbytes,
                                                   ordinal=ordinal, sbuf=sbuf, alu=alu),
                              alg, policy)[0] for i in first]
    return tuple(counts[c] for c in of)


def _group_channel_caps(topo: Topology, group: tuple[int, ...],
                        policy: Policy) -> tuple[tuple[int, str], ...]:
    """The caps of the channel rule that depend on the group only, as (cap, why), in rule
    order (memoised per group and policy caps)."""
    def make():
        s = group_shape(topo, group)
        # The hard cap is nec.h's NEC_MAX_CHANNELS; a policy's max_channels only lowers it,
        # and a scope cap above it is clamped by it, so the reason names what clamps.
        if policy.max_channels < 1:  # (the count is at least 1 whatever caps it)
            caps = [(1, f"max_channels (the policy's {policy.max_channels}: a collective "
                        "runs at least 1 channel)")]
        elif policy.max_channels < NEC_MAX_CHANNELS:
            caps = [(policy.max_channels, "max_channels")]
        elif policy.max_channels == NEC_MAX_CHANNELS:
            caps = [(NEC_MAX_CHANNELS, "max_channels (NEC_MAX_CHANNELS)")]
        else:
            caps = [(NEC_MAX_CHANNELS, f"NEC_MAX_CHANNELS {NEC_MAX_CHANNELS} (nec.h; the "
                                       f"policy's max_channels {policy.max_channels} is above it)")]
        if s.node_n == 1:
            scope_cap, scope_why = policy.max_channels_intra, "max_channels_intra"
        else:
            scope_cap, scope_why = policy.max_channels_inter, "max_channels_inter"
        if scope_cap < 1:
            scope_why = (f"{scope_why} (the policy's {scope_cap}: a collective runs at least 1 "
                         "channel)")
        scope_cap = max(1, min(scope_cap, NEC_MAX_CHANNELS))
        caps.append((scope_cap, scope_why))
        distinct = distinct_ring_count(topo, group, scope_cap)
        caps.append((distinct, f"{distinct} distinct ring(s) over the group"))
        return tuple(caps)
    return topo.cached(("channel_caps", group, policy.max_channels, policy.max_channels_intra,
                        policy.max_channels_inter), make)


@functools.lru_cache(maxsize=4096)
def _channel_count(op_bytes: int, op_elements: int, rank_n: int,
                   group_caps: tuple[tuple[int, str], ...], bytes_per_channel: int,
                   min_elements: int) -> tuple[int, str]:
    """The size-dependent rest of :func:`choose_channels` (a pure function, memoised: the
    groups of a HIER leg share it)."""
    want = max(1, _floor_pow2(op_bytes // bytes_per_channel))
    per_rank = op_elements // (rank_n * min_elements)
    caps = [*group_caps, (max(1, per_rank), f"{min_elements} elements per rank per channel")]
    why = f"{fmt_bytes(op_bytes)} / {fmt_bytes(bytes_per_channel)} per channel -> {want}"
    cap, cap_why = min(caps, key=lambda c: c[0])
    n = want
    if cap < want:
        n, why = cap, f"{why}, capped at {cap} by {cap_why}"
    return max(1, min(n, NEC_MAX_CHANNELS)), why


# -- selection --------------------------------------------------------------------------------

def _sub_type(topo: Topology, alg: EncAlgType, scope: str) -> EncAlgMeshType | None:
    if alg not in _MESH_FAMILY:
        return None
    return topo.platform.mesh_sub_type if scope == INTRA else EncAlgMeshType.FULL_MESH


def evaluate_candidates(req: Request, topo: Topology,
                        policy: Policy = DEFAULT_POLICY) -> dict[EncAlgType, Candidate]:
    """Every engine's verdict (all gates run, as in enc_post_operation)."""
    out: dict[EncAlgType, Candidate] = {}
    for alg in CANDIDATE_ORDER:
        name, pred = PREDICATES[alg]
        legal, why = pred(req, topo, policy, check_window=False)
        in_window = True
        if legal:
            in_window, why = pred(req, topo, policy, check_window=True)
        out[alg] = Candidate(alg=alg, legal=legal, reason=why, lowerable=policy.is_lowerable(alg, req.op),
                             in_window=in_window, predicate=name)
    return out


def _cascade_order(clause: OverrideClause | None, policy: Policy) -> tuple[EncAlgType, ...]:
    """The engines the cascade runs under ``clause`` (SELECTION.md §4, §8): those of
    ``Policy.precedence`` it allows, in precedence order, then, under an allow-list, the
    engines it names outside the precedence (SINGLE_STEP_MESH, "only by --algo", §3), in
    candidate order (``CANDIDATE_ORDER``).  An exclusion names no engine into the cascade."""
    if clause is None:
        return policy.precedence
    order = tuple(a for a in policy.precedence if clause.allows(a))
    if clause.exclude:
        return order
    return order + tuple(a for a in CANDIDATE_ORDER
                         if a in clause.algs and a not in policy.precedence)


def _cascade(cands: dict[EncAlgType, Candidate], order: Iterable[EncAlgType]
             ) -> EncAlgType | None:
    """The first engine of ``order`` legal and inside its size window."""
    for alg in order:
        c = cands[alg]
        if c.legal and c.in_window:
            return alg
    return None


def hier_groups(topo: Topology, group: Iterable[int]) -> tuple[tuple[tuple[int, ...], ...],
                                                              tuple[tuple[int, ...], ...]]:
    """(intra groups: one per node, inter groups: one per local position): :func:`hier_split`
    of the group's ranks by node."""
    s = group_shape(topo, group)
    return topo.cached(("hier_groups", s.per_node), lambda: hier_split(s.per_node))


def hier_split(per_node: tuple[tuple[int, ...], ...]
               ) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """The HIER groups of a group's ranks by node (``per_node``: :func:`ranks_by_node`'s, in
    node order, each node's in rank order), docs/DESIGN.md "HIER": the intra groups are the
    nodes' ranks, position j the j-th local rank; inter group j the j-th local rank of each
    node, position i node i.  What ``lower`` plans (:func:`hier_groups`) and the simulator
    holds a manifest's ``hier.legs[].groups`` to."""
    return per_node, tuple(tuple(p[j] for p in per_node)
                           for j in range(min(len(p) for p in per_node)))


def _forced_error(req: Request, override: AlgoOverride, clause: OverrideClause, alg: EncAlgType,
                  why: str, leg: str | None = None) -> SelectionError:
    where = f" on the {leg} leg" if leg else ""
    return SelectionError(f"{override.source} {override.text!r} forces {alg.name}{where}, "
                          f"refused: {why}", trigger=req.ordinal)


def _none_inside(reasons: Iterable[str]) -> str:
    """What no allowed engine is when the first legal one is taken outside (SELECTION.md
    §8), from ``reasons``, the allowed engines' refusals checked with the size window:
    inside its size window, and past its policy gate when one of them is a policy gate's,
    which is checked with the window (§3: SINGLE_CYCLE_RING's inter-node, one rank a node;
    until 2026-12-06 a policy gate's refusal read as the size window)."""
    gated = any(r.startswith(POLICY_GATE) for r in reasons)
    return ("none allowed is inside its size window"
            + (" and passes its policy gate" if gated else ""))


def _outside_window(why: str, passed: Iterable[tuple[EncAlgType, str]]) -> str:
    """The reason of a leg's engine taken outside its size window (SELECTION.md §8): none
    allowed is inside its window (:func:`_none_inside` of the reasons of ``passed``, the
    allowed engines and their refusals); ``why``, its structural check."""
    return f"first legal engine ({_none_inside(r for _, r in passed)}; {why})"


def _passed_over(why: str, passed: Iterable[tuple[EncAlgType, str]]) -> str:
    """A HIER leg's reason ``why`` for its engine (SELECTION.md §5), the policy's reason for
    a collective's engine (§4) or a flat fallback's (§6), then why each engine the slot, the
    cascade or the fallback's walk would have taken first was not: ``(engine, its refusal)``
    in precedence order, the refusal its predicate's with the size window, the words of
    explain's candidate table (``8 MiB below op_min_limit[REDUCE_SCATTER] 56 MiB``), or that
    this build cannot lower it as a leg. (Until 2026-12-06 either gave only ``why``: RING's
    ``always legal (the fallback)`` did not say why KANGARING was passed over.)"""
    return "".join([why, *(f"; {a.name} not taken: {r}" for a, r in passed)])


def _fallback_refusal(a: EncAlgType, c: Candidate, policy: Policy, req: Request,
                      in_window_only: bool) -> str | None:
    """Why the flat fallback (SELECTION.md §6) does not take engine ``a`` (its candidate
    ``c``) for ``req``, in the words of explain's candidate table (the candidate's reason: its
    predicate's refusal, or the size window it is outside when ``in_window_only``) or ``not
    lowerable ... in this build``; None when it may take it (the override apart).  (Until
    2026-12-06 it also passed SINGLE_STEP_MESH in place over more than MAX_SRC ranks, which
    ``lower`` refused then; it lowers it now, docs/DESIGN.md "Mesh and RDH".)"""
    if not c.legal:
        return c.reason
    if a == EncAlgType.HIER:
        return "the fallback is one flat leg over the whole group"
    if in_window_only and not c.in_window:
        return c.reason
    op = req.op
    if not policy.is_lowerable(a, op):
        return ("not lowerable in this build" if a not in policy.lowerable
                else f"not lowerable for {op.name} in this build")
    return None


def _flat_fallback(req: Request, cands: dict[EncAlgType, Candidate],
                   allowed: Callable[[EncAlgType], bool], policy: Policy,
                   policy_alg: EncAlgType
                   ) -> tuple[EncAlgType | None, bool, list[tuple[EncAlgType, str]]]:
    """The flat engine ``lower`` uses when it cannot lower the policy's ``policy_alg``
    (SELECTION.md §6): the first engine of the precedence (then the other candidates) that
    the override allows, is legal, is not HIER, is lowerable for the op and is inside its
    size window, else the first such one outside it.  Returns ``(engine or None, taken
    outside its window, skipped)``; ``skipped`` is ``(engine, why not)`` for each allowed
    engine after the policy's choice and before the engine taken
    (:func:`_fallback_refusal`), as the pass that took it judged it.  (Until 2026-12-06
    the fallback named none of them.)"""
    order = list(dict.fromkeys((*policy.precedence, *CANDIDATE_ORDER)))
    start = order.index(policy_alg)
    skipped: list[tuple[EncAlgType, str]] = []
    for in_window_only in (True, False):
        skipped = []
        for a in order:
            if a == policy_alg or not allowed(a):
                continue
            why = _fallback_refusal(a, cands[a], policy, req, in_window_only)
            if why is None:
                return a, not in_window_only, [s for s in skipped if order.index(s[0]) > start]
            skipped.append((a, why))
    return None, False, []


def _leg_choice(slot: str, leg_req: Request, topo: Topology, policy: Policy,
                override: AlgoOverride | None, op_clause: OverrideClause | None,
                used: bool) -> tuple[EncAlgType | None, str]:
    """The engine of HIER leg ``slot`` (SELECTION.md §5, §8) and its reason; ``(None, "")``
    when the override leaves a leg the op runs (``used``) no legal engine."""
    legal_set = LEG_LEGAL[slot]
    clause = override.for_leg(slot) if override else None
    if clause is not None and clause.forced is not None:
        alg = clause.forced
        if alg not in legal_set:
            if used:
                raise _forced_error(leg_req, override, clause, alg,
                                    f"{alg.name} is not legal on the {slot} leg (legal: "
                                    f"{', '.join(a.name for a in legal_set)})", slot)
            return EncAlgType.RING, "override not applicable"
        name, pred = PREDICATES[alg]
        ok, why = pred(leg_req, topo, policy, check_window=False)
        if not ok:
            if used:
                raise _forced_error(leg_req, override, clause, alg, f"{name}: {why}", slot)
            return EncAlgType.RING, "override not applicable"
        # (the override's text, not its source: an output does not depend on whether the
        # same override came from --algo or NRTREWRITE_ALGO; explain names the source)
        return alg, f"forced by the override {override.text!r} ({why})"

    leaves = _leg_allows(clause, op_clause)

    def allowed(a: EncAlgType) -> bool:
        return a in legal_set and leaves(a)

    passed: list[tuple[EncAlgType, str]] = []  # (engine, why not), the ones before the pick
    # (an allow-list's engines not legal on the slot, or excluded)
    off = _off_slot_passed(clause, slot, op_clause)
    for alg in policy.precedence:
        if not allowed(alg):
            continue
        name, pred = PREDICATES[alg]
        ok, why = pred(leg_req, topo, policy, check_window=True)
        if ok:
            return alg, _passed_over(why, passed + off)
        passed.append((alg, why))
    # RING, always legal and in its window, is not allowed: an exclusion (SELECTION.md §8,
    # as for a flat choice): the first allowed legal engine outside its window, else an error
    for k, (alg, _) in enumerate(passed):
        ok, why = PREDICATES[alg][1](leg_req, topo, policy, check_window=False)
        if ok:
            # (every other allowed engine was refused too: all named, SELECTION.md §8)
            return alg, _passed_over(_outside_window(why, passed),
                                     passed[:k] + passed[k + 1:] + off)
    if used:  # (no engine: _hier_legs raises, naming every leg the override leaves none)
        return None, ""
    return EncAlgType.RING, "override not applicable"


def _leg_allows(clause: OverrideClause | None, op_clause: OverrideClause | None
                ) -> Callable[[EncAlgType], bool]:
    """What an override leaves a HIER leg: the engines its leg clause allows, less those an
    untargeted or per-collective exclusion names (SELECTION.md §8)."""
    def allowed(a: EncAlgType) -> bool:
        return ((clause is None or clause.allows(a))
                and not (op_clause is not None and op_clause.exclude and a in op_clause.algs))
    return allowed


def _off_slot(clause: OverrideClause | None, engines: Iterable[EncAlgType]
              ) -> list[EncAlgType]:
    """The engines a leg allow-list ``clause`` names that are not among ``engines`` (the
    slot's legal set, or the ones this build lowers there), in candidate order: none for an
    exclusion or no clause (SELECTION.md §8; until 2026-12-06 they went without a word)."""
    if clause is None or clause.exclude:
        return []
    engines = tuple(engines)
    return [a for a in CANDIDATE_ORDER if a in clause.algs and a not in engines]


def _off_slot_passed(clause: OverrideClause | None, slot: str,
                     op_clause: OverrideClause | None = None) -> list[tuple[EncAlgType, str]]:
    """``(engine, why not)`` for each engine a leg allow-list names that the leg cannot
    take, for the reason of the engine it takes: not legal on ``slot``, as the forced form
    says it, or legal there but removed by the exclusion ``op_clause`` (untargeted or the
    collective's), ``excluded``, as the leg's error says it (review 49w: until 2026-12-06
    such an engine went without a word, ``intra_allg:kangaring,ring;allreduce:^kangaring``
    taking RING, ``always legal (the fallback)``)."""
    legal = LEG_LEGAL[slot]
    why = (f"not legal on the {slot} leg (legal: {', '.join(a.name for a in legal)})")
    out = [(a, why) for a in _off_slot(clause, legal)]
    if (clause is not None and not clause.exclude
            and op_clause is not None and op_clause.exclude):
        out += [(a, "excluded") for a in CANDIDATE_ORDER
                if a in clause.algs and a in legal and a in op_clause.algs]
    return out


def _no_leg_engine(req: Request, topo: Topology, policy: Policy,
                   override: AlgoOverride | None, slot: str, legal_set: Iterable[EncAlgType],
                   allowed: Callable[[EncAlgType], bool],
                   unlowerable: EncAlgType | None = None) -> str:
    """Why the exclusions of ``override`` leave HIER leg ``slot`` no legal engine: its
    engines, why each one allowed is not legal on the leg's group, and those excluded.  With
    ``unlowerable`` (the leg's legal policy engine, which this build cannot lower as a HIER
    leg) ``legal_set`` is the engines the leg can be lowered with instead."""
    engines = list(legal_set)
    refused = [f"{a.name}: {PREDICATES[a][1](req, topo, policy, check_window=False)[1]}"
               for a in engines if allowed(a)]
    # (a leg allow-list: the engines it names that are not the leg's, as the forced form
    # says it, and those of its engines an exclusion removed; "every one excluded" only
    # when an exclusion emptied the leg: until 2026-12-06 said of any allow-list too)
    clause = override.for_leg(slot) if override else None
    off = _off_slot(clause, engines)
    if off:
        where = (f"legal on the {slot} leg" if unlowerable is None
                 else "lowerable there")
        refused.append(f"{', '.join(a.name for a in off)} not {where}")
    if clause is not None and not clause.exclude:
        gone = [a.name for a in engines if a in clause.algs and not allowed(a)]
    else:  # (said beside the refusals: until 2026-12-07 the excluded went unnamed there)
        gone = [a.name for a in engines if not allowed(a)] if refused else []
    if gone:
        refused.append(f"{', '.join(gone)} excluded")
    text = f"{override.source} {override.text!r}" if override else "the policy"
    what = "no legal engine (its engines: "
    if unlowerable is not None:
        what = (f"no engine this build lowers there ({unlowerable.name}, the policy's and "
                "legal, is not lowerable as a HIER leg; the leg's lowerable engines: ")
    return (f"{text} leaves the {slot} leg {what}"
            f"{', '.join(a.name for a in engines)}; "
            f"{'; '.join(refused) if refused else 'every one excluded'})")


#: A HIER leg the override leaves no engine: (its slot, its request, the leg's policy engine
#: when that one is legal but not lowerable as a leg, else None; the allowed test).
_LeftLeg = tuple[str, Request, "EncAlgType | None", Callable[[EncAlgType], bool]]


def _legs_left_none(req: Request, topo: Topology, policy: Policy,
                    override: AlgoOverride | None, op_clause: OverrideClause | None,
                    left: list[_LeftLeg], trigger: Trigger | Request,
                    host_cc: bool) -> SelectionError:
    """The error for the HIER legs ``left`` (slot order) the override leaves no engine
    (SELECTION.md §8): the first one's engines and why none is taken
    (:func:`_no_leg_engine`), the others named, then what to pass instead: the override with
    a clause forcing each such leg's first engine legal on its group that this build lowers
    there (a leg clause forcing one engine beats an exclusion), and the flat engines it
    allows that are legal for the op and lowerable, which ``--algo`` may force (until
    2026-12-07 the first leg alone, its excluded engines unnamed, and no way out said:
    ``^ring`` over ranks 0, 1, 64, 65).  Each way is held to the BD gate ``lower`` applies
    (``trigger``, a :class:`Trigger`, and ``host_cc``: its legs counted as ``lower``
    composes them, the leg clauses' HIER as the default selects it, a flat engine forced,
    :func:`forced_fits`); one over ``TPINC_MAX_BDS`` is not offered but said not to fit,
    with its leg (until 2026-12-07 offered, and ``lower`` under it refused the trigger again
    or passed HIER over)."""
    slot, leg_req, unlowerable, allowed = left[0]
    engines = LEG_LEGAL[slot]
    if unlowerable is not None:
        engines = tuple(a for a in engines if a in policy.hier_leg_lowerable)
    msg = _no_leg_engine(leg_req, topo, policy, override, slot, engines, allowed, unlowerable)
    forced: dict[str, EncAlgType] = {}
    for name, leg_q, _, _ in left:
        can = [a for a in dict.fromkeys((*policy.precedence, *LEG_LEGAL[name]))
               if a in LEG_LEGAL[name] and a in policy.hier_leg_lowerable]
        pick = next((a for check in (True, False) for a in can
                     if PREDICATES[a][1](leg_q, topo, policy, check_window=check)[0]), None)
        if pick is not None:
            forced[name] = pick
    source = override.source if override else "--algo"  # (None: a policy without RING)
    clauses: list[str] | None = None
    counted = isinstance(trigger, Trigger)  # (a bare request's BDs are not counted)
    over: list[tuple[str, str]] = []  # (a way out lower refuses, why)
    if len(forced) == len(left):
        # (checked by selecting under it: a leg the first legs' choice hid, one whose
        # policy engine this build cannot lower as a leg, is left none there and forced too)
        for _ in HIER_SLOTS:
            clauses = [c.text for c in (override.clauses if override else ())
                       if c.target not in forced]
            clauses += [f"{name}:{alg.name.lower()}" for name, alg in forced.items()]
            try:
                way = parse_algo_override(";".join(clauses))
                sel = select(trigger if counted else req, topo, override=way, policy=policy,
                             host_cc=host_cc)
                if counted and sel.alg != EncAlgType.HIER:
                    # (its HIER passed over by the BD gate: the default takes another engine
                    # there, which fits, so nothing is said of the clauses; until 2026-12-07
                    # "HIER under --algo '...' does not fit either", where lower under them
                    # lowered that engine)
                    clauses = None
                elif counted and lowered_bd_refusal(
                        trigger, sel, topo, policy, host_cc) is not None:
                    # (forced and over the limit)
                    over.append((f"HIER under {source} {';'.join(clauses)!r}",
                                 _forced_why(trigger, req, EncAlgType.HIER, way, topo,
                                             policy, host_cc)))
                    clauses = None
                break
            except _LegsLeftNone as err:
                if not err.forced or set(err.forced) <= set(forced):
                    clauses = None
                    break
                forced.update(err.forced)
            except NrtRewriteError as err:
                if counted and _bd_refused(err.reason):
                    over.append((f"HIER under {source} {';'.join(clauses)!r}",
                                 _forced_why(trigger, req, EncAlgType.HIER, way, topo,
                                             policy, host_cc)))
                clauses = None
                break
        else:
            clauses = None
    others = [name for name, *_ in left[1:]]
    others += [name for name in forced if name not in others and name != slot]
    if others:
        msg += (f", nor the {' or '.join(others)} "
                f"leg{'s' if len(others) > 1 else ''} any")
    flat = [a for a in CANDIDATE_ORDER if a != EncAlgType.HIER
            and (op_clause is None or op_clause.allows(a)) and policy.is_lowerable(a, req.op)
            and PREDICATES[a][1](req, topo, policy, check_window=False)[0]]
    if counted:  # (each flat engine forced: kept when it fits, else said not to)
        fitting = []
        for a in flat:
            if forced_fits(trigger, req, a, topo, policy, host_cc):
                fitting.append(a)
            else:
                over.append((f"{source} {a.name.lower()!r}",
                             _forced_why(trigger, req, a, None, topo, policy, host_cc)))
        flat = fitting
    way_out = _WayOut(
        base=msg, source=source,
        clauses=tuple((c.target, c.text) for c in (override.clauses if override else ())),
        forced=dict(forced) if clauses is not None else None,
        beats=any(c.exclude for c in (override.clauses if override else ())),
        flat=tuple(flat), over=tuple(over), op=req.op, trigger=req.ordinal)
    err = _LegsLeftNone(way_out.line(), trigger=req.ordinal,
                        forced=forced if clauses else {})
    err.way_out = way_out
    return err


@dataclass(frozen=True)
class _WayOut:
    """:func:`_legs_left_none`'s refusal in parts, so that :func:`model_way_out` can say it
    again after checking its ways against every trigger of the model: ``base`` (the legs
    left none), the override's ``source`` and ``clauses`` (target, text), the leg clauses
    the first way forces (``forced``; None: not offered), whether the override excludes
    (``beats``), the flat engines ``--algo`` may force (``flat``), the ways that do not fit
    TPINC_MAX_BDS (``over``: text, why) and those another trigger still stops under
    (``stops``: the override's text, the trigger); the request's ``op`` and, for a flat
    engine another trigger stops under, the ``--algo`` text forcing it on ``op`` alone that
    every trigger passes (``scoped``: text, engine; :func:`model_way_out`)."""
    base: str
    source: str
    clauses: tuple[tuple[str, str], ...]
    forced: "dict[str, EncAlgType] | None"
    beats: bool
    flat: tuple[EncAlgType, ...]
    over: tuple[tuple[str, str], ...]
    stops: tuple[tuple[str, int, str], ...] = ()  # (the text, the trigger, a model stop's why)
    added: tuple[tuple[str, int], ...] = ()  # (a leg forced for another trigger, it)
    op: "EncOpType | None" = None
    scoped: tuple[tuple[str, EncAlgType], ...] = ()
    idle: tuple[str, ...] = ()  # (forced legs lower under the way runs none of)
    outcome: "EncAlgType | None" = None  # (the refused trigger not HIER: its engine)
    trigger: "int | None" = None
    #: (op, engine, trigger): an engine forced on another trigger's op in place of leg
    #: clauses only its first selection needed, idle once the window or SPAD gate passed its
    #: HIER over for that engine (:func:`model_way_out`)
    instead: tuple[tuple[EncOpType, EncAlgType, int], ...] = ()

    def text_of(self, forced: dict[str, EncAlgType],
                instead: Iterable[tuple[EncOpType, EncAlgType, int]] = ()) -> str:
        """The override's clauses with the leg clauses ``forced`` in place of theirs, and
        with an op clause for each of ``instead`` (op, engine, trigger) in place of the op's
        own, between the two (as a way forcing an engine on an op alone is written)."""
        instead = list(instead)
        ops = {op for op, _, _ in instead}
        return ";".join([text for target, text in self.clauses
                         if target not in forced and target not in ops]
                        + [f"{op.name.lower()}:{alg.name.lower()}" for op, alg, _ in instead]
                        + [f"{name}:{alg.name.lower()}" for name, alg in forced.items()])

    def line(self) -> str:
        msg = self.base
        ways = []
        if self.forced is not None:
            by_alg: dict[EncAlgType, list[str]] = {}
            for name, alg in self.forced.items():
                if name not in self.idle:
                    by_alg.setdefault(alg, []).append(name)
            runs = "; ".join(f"the {_and(names)} leg{'s' if len(names) > 1 else ''} "
                             f"on {alg.name}" for alg, names in by_alg.items())
            notes = ["a leg clause forcing one engine beats an exclusion"] if self.beats else []
            by_trigger: dict[int, list[str]] = {}
            for name, k in self.added:
                by_trigger.setdefault(k, []).append(name)
            notes += [f"the {_and(names)} leg{'s' if len(names) > 1 else ''} for trigger {k}"
                      for k, names in by_trigger.items()]
            notes += [f"{alg.name} forced on {op.name} for trigger {k}"
                      for op, alg, k in self.instead]
            if self.idle and self.outcome is None:  # (some forced legs idle)
                notes.append(f"the {_and(list(self.idle))} clause"
                             + ("s apply" if len(self.idle) > 1 else " applies")
                             + " to no leg lower lowers")
            does = f"runs {runs}"
            if self.outcome is not None:  # (the trigger not HIER: what lower lowers)
                does, notes = f"lowers trigger {self.trigger} as {self.outcome.name}", []
            ways.append(f"{self.source} {self.text_of(self.forced, self.instead)!r} {does}"
                        + (f" ({'; '.join(notes)})" if notes else ""))
        if self.flat:
            ways.append(f"{self.source} may force {' or '.join(a.name for a in self.flat)} "
                        "over the whole group")
        ways += [_scoped_way(self.source, text, alg, self.op) for text, alg in self.scoped]
        if ways:
            msg += f"; {', or '.join(ways)}"
        over = self.over
        if len(over) == 1:
            msg += f"; {over[0][0]} does not fit either ({over[0][1]})"
        elif over:
            msg += ("; neither " + ", ".join(f"{text} ({why})" for text, why in over[:-1])
                    + f" nor {over[-1][0]} ({over[-1][1]}) fits")
        if self.stops:
            # (each after "; ", as the BD gate's line says them: until 2026-12-07 joined
            # with ", and")
            msg += "".join(f"; {text}" for text in stops_text(self.source, self.stops))
        return msg


@dataclass(frozen=True)
class _BdWayOut:
    """The BD gate's refusal (:func:`_no_engine_fits`) in parts, so that
    :func:`model_way_out` can say it again after checking the engines ``--algo`` may force
    against every trigger of the model: the request, its candidates, the engines the gate
    passed over (``gated``), the override when a clause of the op's governed it, and the
    engines ``--algo`` may force (``forcible``), and the user's whole override
    (``users``)."""
    req: Request
    cands: dict[EncAlgType, Candidate]
    gated: list[EncAlgType]
    override: AlgoOverride | None
    forcible: tuple[EncAlgType, ...]
    users: AlgoOverride | None = None  # (the user's whole override: its clauses kept in a
    #                                    way forcing an engine on the op alone)


#: The ``--algo`` text of the way out :func:`model_way_out` is planning the model under
#: (``lower.plan_refusal``), while it does: a refusal met there is not held to it again.
_PLANNING: list[str] = []

#: The stop of a way out ``lower`` refuses the whole model under, at no trigger (its memory
#: layout past the core window: :func:`model_way_out`), in place of a trigger's ordinal.
MODEL_STOP = -1


def stops_text(source: str, stops: Iterable[tuple]) -> list[str]:
    """The ways out some trigger (or the model, :data:`MODEL_STOP`) still stops under
    (``stops``: the ``--algo`` text, the trigger, and for the model the refusal's reason),
    one text a trigger in the order first met, naming every way it stops:
    ``trigger 1 still stops under --algo 'single_cycle_ring'``, ``trigger 1 still stops under
    each of --algo 'single_cycle_ring' and 'single_step_mesh'`` (until 2026-12-07 one text a
    way, the trigger said again for each); the model's with why, the refusal ``lower`` under
    the way gives (the layout past the core window, a rank's SPAD entries or descriptors
    over all its subgraphs), once where the ways share it, else after each: ``the model
    still stops under --algo 'a' (the model's DRAM vars ...)`` (until 2026-12-07 ``the
    model`` alone, without why: fixer 57d)."""
    by_stop: dict[int, list[tuple[str, str]]] = {}
    for text, k, *why in stops:
        by_stop.setdefault(k, []).append((text, why[0] if why else ""))
    out = []
    for k, ways in by_stop.items():
        texts = [text for text, _ in ways]
        whys = [why for _, why in ways]
        if k != MODEL_STOP:
            said = (f"{source} {texts[0]!r}" if len(texts) == 1
                    else f"each of {source} {_and([repr(t) for t in texts])}")
            out.append(f"trigger {k} still stops under {said}")
        elif len(set(whys)) == 1:  # (one reason: said once, after the ways)
            said = (f"{source} {texts[0]!r}" if len(texts) == 1
                    else f"each of {source} {_and([repr(t) for t in texts])}")
            out.append(f"the model still stops under {said} ({whys[0]})")
        else:
            out.append(f"the model still stops under {source} "
                       + _and([f"{t!r} ({why})" for t, why in ways]))
    return out


def _scoped_way(source: str, text: str, alg: EncAlgType, op: EncOpType) -> str:
    """A way out forcing ``alg`` on ``op`` alone (:func:`model_way_out`)."""
    return f"{source} {text!r} forces {alg.name} over the whole group on {op.name} alone"


def _and(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} and {words[-1]}"


def model_way_out(err: NrtRewriteError, triggers: Iterable[Trigger], topo: Topology, *,
                  policy: Policy = DEFAULT_POLICY, host_cc: bool = False,
                  ways_stop: "dict[str, tuple] | None" = None,
                  model: Model | None = None) -> NrtRewriteError:
    """``err``, a refusal of :func:`_legs_left_none` or the BD gate's (:func:`_no_engine_fits`)
    at one trigger, with its ways out checked against every trigger of the model
    (``triggers``) as ``lower`` selects them under each (and counts a forced engine's legs,
    :func:`lowered_bd_refusal`, and runs its own checks, :func:`_lower_refuses`; then, with
    ``model`` and under ``lower``'s policy, what ``lower`` plans of the whole model under the
    way, ``lower.plan_refusal``: the engines' ``prepare``, the SPAD and window gates and
    ``limits.check_plan``, a refusal there a stop at its trigger or, with none, of the model,
    :data:`MODEL_STOP`; until 2026-12-07 not applied: a way the window refused was offered):
    a leg another trigger leaves none under
    the leg clauses is forced too (an all-gather's ``inter_allg`` behind an all-reduce's
    intra legs), and a way some trigger still stops under is not offered but the first such
    trigger named (until 2026-12-07 the ways were checked on the trigger that stopped alone:
    ``--algo '^ring'`` on a model of a two-node all-reduce and all-gather offered ``--algo``
    forcing SINGLE_CYCLE_RING, all-reduce only).  A flat engine some trigger stops under is
    then tried forced on the refused request's op alone (the user's clauses but the op's own,
    the op's clause, and leg clauses for the legs another trigger leaves none under them) and
    offered where every trigger passes that (until 2026-12-07 not tried: review 55p, the
    all-reduce and all-gather above under ``--algo 'allreduce:^ring'``, which
    ``'allreduce:single_cycle_ring'`` lowers).  Any other error is returned as it is.

    ``ways_stop``: where each way's ``--algo`` text stops (the first trigger and the legs it
    leaves none, or None), each trigger's selection as ``lower`` lowers it under the way
    (None where it stops) and, where it stops at no trigger, the reason (:func:`stops_text`;
    else ""), kept across calls for one model, topology, policy and
    ``host_cc`` by a caller that holds the ways of many refused requests (``explain``, one
    call a refused request: until 2026-12-07 each call selected every trigger again under
    each way, 563 s for 1,000 triggers under ``--algo '^ring'``)."""
    memo = {} if ways_stop is None else ways_stop
    way = getattr(err, "way_out", None)
    bd_way = getattr(err, "bd_way_out", None)
    bd_forcible = bd_way is not None and bd_way.forcible
    if (way is None or (way.forced is None and not way.flat)) and not bd_forcible:
        return err
    triggers = list(triggers)

    def first_stop(text: str) -> tuple[int | None, dict[str, EncAlgType]]:
        if text not in memo:
            memo[text] = stop_of(text)
        return memo[text][:2]

    def why_of(text: str) -> str:  # (a model stop's reason: stops_text)
        return memo[text][3]

    def stop_of(text: str) -> tuple[int | None, dict[str, EncAlgType], dict | None, str]:
        override = parse_algo_override(text)
        seen = set()
        for t in triggers:
            key = replace(Request.from_trigger(t), ordinal=0)
            if key in seen:
                continue
            seen.add(key)
            try:
                sel = select(t, topo, override=override, policy=policy, host_cc=host_cc)
            except _LegsLeftNone as left:
                return t.ordinal, left.forced, None, ""
            except NrtRewriteError:
                return t.ordinal, {}, None, ""
            if (lowered_bd_refusal(t, sel, topo, policy, host_cc) is not None
                    or _lower_refuses(t)):  # (lower's own checks: whatever the engine)
                return t.ordinal, {}, None, ""
        if model is not None and policy == DEFAULT_POLICY and not _PLANNING:
            # (lower's plan of the model; a refusal of a selection there is not held again)
            from nrtrewrite.lower import plan_refusal  # (lower imports this module)
            _PLANNING.append(text)
            lowered: dict[int, Selection] = {}  # (each trigger's selection as lowered)
            try:
                refused = plan_refusal(model, topo, text, host_cc, lowered)
            finally:
                _PLANNING.pop()
            if refused is not None:
                k = refused.where.trigger
                if k is not None:
                    return k, {}, None, ""
                # (no trigger: the refusal's reason, with its rank where it names one, is
                # said with the model's stop; until 2026-12-07 "the model" alone)
                rank = refused.where.rank
                return (MODEL_STOP, {}, None,
                        refused.why if rank is None else f"rank {rank}: {refused.why}")
            return None, {}, lowered, ""
        return None, {}, None, ""

    def scoped(a: EncAlgType, op: EncOpType, clauses: Iterable[tuple[object, str]]
               ) -> str | None:
        # (a flat engine another trigger stops under, forced on op alone: the user's clauses
        # but op's own, then op's clause, which beats an untargeted one (AlgoOverride.for_op),
        # and a leg clause for each leg another trigger leaves none under them; None when
        # some trigger still stops: review 55p, mix_ar under 'allreduce:^ring')
        kept = [(target, text) for target, text in clauses if target != op]
        kept.append((op, f"{op.name.lower()}:{a.name.lower()}"))
        legs: dict[str, EncAlgType] = {}
        for _ in range(len(HIER_SLOTS) + 1):
            text = ";".join([t for target, t in kept if target not in legs]
                            + [f"{name}:{alg.name.lower()}" for name, alg in legs.items()])
            k, more = first_stop(text)
            if k is None:
                return text
            if not more or set(more) <= set(legs):
                return None
            legs.update(more)
        return None

    def flat_ways(engines: Iterable[EncAlgType], op: EncOpType | None,
                  clauses: Sequence[tuple[object, str]]) -> tuple[list, list, list]:
        # (each flat engine forced over the whole model: kept where every trigger passes it,
        # else its first stop and, where the op is known, its way forced on the op alone)
        fits, stops, ways = [], [], []
        for a in engines:
            k = first_stop(a.name.lower())[0]
            if k is None:
                fits.append(a)
                continue
            stops.append((a.name.lower(), k, why_of(a.name.lower())))
            text = None if op is None else scoped(a, op, clauses)
            if text is not None:
                ways.append((text, a))
        return fits, stops, ways

    if way is None:  # (the BD gate's refusal: the engines --algo may force)
        users = bd_way.users.clauses if bd_way.users else ()
        kept, stopped, ways = flat_ways(bd_way.forcible, bd_way.req.op,
                                        [(c.target, c.text) for c in users])
        if not stopped:
            return err
        return err.reworded(_no_engine_fits(bd_way.req, bd_way.cands, bd_way.gated,
                                            bd_way.override, kept, stopped, ways))
    stopped_at: list[tuple[str, int, str]] = []
    added: list[tuple[str, int]] = []
    forced = None if way.forced is None else dict(way.forced)
    if forced is not None:
        for _ in range(len(HIER_SLOTS) + 1):
            k, more = first_stop(way.text_of(forced))
            if k is None:
                break
            if not more or set(more) <= set(forced):
                stopped_at.append((way.text_of(forced), k, why_of(way.text_of(forced))))
                forced = None
                break
            added += [(name, k) for name in more if name not in forced]
            forced.update(more)
        else:
            stopped_at.append((way.text_of(forced), k, why_of(way.text_of(forced))))
            forced = None
    flat, stopped, ways = flat_ways(way.flat, way.op, way.clauses)
    stopped_at += stopped
    idle: tuple[str, ...] = ()
    outcome = None
    instead: tuple[tuple[EncOpType, EncAlgType, int], ...] = ()
    lowered = None if forced is None else memo[way.text_of(forced)][2]
    if lowered is not None:
        # (the leg clauses lower under the way runs no leg of: the window or SPAD gate passed
        # HIER over for another engine, which fits; the refused trigger lowered so, the way
        # is said only as that engine, and not at all where it is offered forced, over the
        # whole model or on the op alone: until 2026-12-07 it "runs the intra_allg and
        # intra_redsct legs on RING", which lower warned apply to nothing)
        run = {leg.name for s in lowered.values() if s.alg == EncAlgType.HIER
               for leg in s.legs}
        idle = tuple(name for name in forced if name not in run)
        mine = lowered.get(err.where.trigger)
        if mine is not None and mine.alg != EncAlgType.HIER:
            # (the refused trigger itself not lowered as HIER under it: review V3's
            # win_arag, whose all-gather ran the intra_allg leg)
            if mine.alg in flat or any(a == mine.alg for _, a in ways):
                forced, idle = None, ()
            else:
                outcome = mine.alg
        elif idle and set(idle) <= {name for name, _ in added}:
            # (clauses only other triggers' first selection needed, idle once the window or
            # SPAD gate passed their HIER over for another engine: that engine forced on
            # their op in place of the clauses, offered instead where lower under it lowers
            # every trigger as under the clauses, warning nothing; until 2026-12-07 the
            # clauses were offered, said idle, and lower under them warned: fixer 57d,
            # win_rs_5 and agar6)
            swap = _idle_swap(way, forced, idle, added, lowered, triggers, first_stop, memo)
            if swap is not None:
                forced, instead = swap
                added = [(name, k) for name, k in added if name not in idle]
                idle = ()
    new = replace(way, forced=forced, flat=tuple(flat), stops=tuple(stopped_at),
                  added=tuple(added) if forced is not None else (), scoped=tuple(ways),
                  idle=idle, outcome=outcome, trigger=err.where.trigger,
                  instead=instead if forced is not None else ())
    if new == way:
        return err
    out = err.reworded(new.line())
    out.way_out = new
    return out


def _idle_swap(way: _WayOut, forced: dict[str, EncAlgType], idle: tuple[str, ...],
               added: list[tuple[str, int]], lowered: dict, triggers: list[Trigger],
               first_stop: Callable[[str], tuple], memo: dict
               ) -> "tuple[dict[str, EncAlgType], tuple] | None":
    """:func:`model_way_out`'s way ``way`` forcing ``forced``, whose ``idle`` leg clauses
    were forced for other triggers (``added``: leg, trigger) and run by no leg ``lower``
    under it lowers (``lowered``: each trigger's selection by ordinal): each such trigger's
    engine as lowered forced on its op in their place, the clauses kept (the leg clauses
    but the idle ones) and ``instead`` (op, engine, trigger), where ``lower`` under that
    lowers every trigger as under ``way`` (:func:`_lowered_alike`: the same engines, legs
    and channels, so the same streams); else None (a trigger kept HIER, two engines for one
    op, a stop, another outcome)."""
    by_ordinal = {t.ordinal: t for t in triggers}
    engine_of: dict[EncOpType, tuple[EncAlgType, int]] = {}
    for k in sorted({k for name, k in added if name in idle}):
        sel = lowered.get(k)
        op = by_ordinal[k].op
        if sel is None or sel.alg == EncAlgType.HIER or engine_of.get(op, (sel.alg,))[0] != sel.alg:
            return None
        engine_of.setdefault(op, (sel.alg, k))
    kept = {name: alg for name, alg in forced.items() if name not in idle}
    instead = tuple((op, alg, k) for op, (alg, k) in engine_of.items())
    text = way.text_of(kept, instead)
    if first_stop(text)[0] is not None or not _lowered_alike(memo[text][2], lowered):
        return None
    return kept, instead


def _lowered_alike(a: "dict[int, Selection] | None", b: "dict[int, Selection]") -> bool:
    """Whether two plans' selections (by ordinal) lower alike: each trigger's engine,
    channels and legs (their engines, groups and sizes) the same, which is all of a
    selection the composers and the emitter read but the manifest's reasons."""
    def key(s: Selection) -> tuple:
        return (s.alg, s.n_channels, s.hybrid_ring, s.scope,
                tuple((leg.name, leg.op, leg.alg, leg.sub_type, leg.groups, leg.nbytes)
                      for leg in s.legs))
    return a is not None and a.keys() == b.keys() and all(key(a[k]) == key(b[k]) for k in a)


def _bd_refused(reason: str) -> bool:
    """Whether a selection's refusal is the BD gate's (no engine the default may take fits,
    or one is refused by its composer): :func:`_no_engine_fits`'s line."""
    return reason.startswith(NO_ENGINE_TAKES)


def _forced_why(trigger: Trigger, req: Request, alg: EncAlgType, override: AlgoOverride | None,
                topo: Topology, policy: Policy, host_cc: bool) -> str:
    """Why ``lower`` refuses ``alg`` for ``trigger`` under ``override`` (None: ``alg``
    forced): the BD gate's worst leg and the limit, or its composer's refusal, as
    :func:`engine_bd_refusal` counts it (a flat engine's legs are the same forced)."""
    why = engine_bd_refusal(trigger, req, alg, topo, policy, override, host_cc)
    if why is None:
        return "its selection is refused"
    return why.removeprefix(POLICY_GATE).partition(" a leg (")[0]


class _LegsLeftNone(SelectionError):
    """:func:`_legs_left_none`'s error; ``forced``: the leg clauses its way out forces
    (none when it gives none), which the check of an outer one's way out takes."""

    def __init__(self, *args, forced: dict[str, EncAlgType] | None = None, **kw):
        super().__init__(*args, **kw)
        self.forced = forced or {}


def _largest_slice(req: Request, y: int) -> int:
    """The elements of the largest of the ``y`` slices a HIER op's inter leg moves: the
    slices ``compose.hier`` cuts an all-reduce into (``segments.even_split``, 32-element
    aligned when the even share is over 32), else the even blocks of the op."""
    if req.op == EncOpType.ALLREDUCE:
        from nrtrewrite.compose.segments import even_split
        return max(hi - lo for lo, hi in even_split(0, req.op_elements, y))
    return -(-req.op_elements // y)


def _hier_legs(req: Request, topo: Topology, policy: Policy, override: AlgoOverride | None,
               op_clause: OverrideClause | None, trigger: Trigger | Request, host_cc: bool
               ) -> tuple[tuple[Leg, ...], tuple[tuple[str, EncAlgType], ...]]:
    intra, inter = hier_groups(topo, req.group)
    y = len(intra[0])
    b = req.op_bytes
    used = HIER_LEGS[req.op]
    choices: dict[str, tuple[EncAlgType, str]] = {}
    sizes: dict[str, int] = {}
    left: list[_LeftLeg] = []
    for slot in LEG_OPS:
        scope, op = LEG_OPS[slot]
        groups = intra if scope == INTRA else inter
        # an inter leg moves one of y element slices: the largest (an all-reduce's are the
        # composer's even_split, 32-element aligned; the others' blocks are even)
        nbytes = b if scope == INTRA else _largest_slice(req, y) * DTYPE_SIZE[req.dtype]
        sizes[slot] = nbytes
        leg_req = Request.for_op(op, req.dtype, groups[0], nbytes, ordinal=req.ordinal,
                                 sbuf=req.sbuf, alu=req.alu)
        try:
            alg, why = _leg_choice(slot, leg_req, topo, policy, override, op_clause,
                                   slot in used)
        except SelectionError:
            if left:  # (the legs before it, in slot order, are said first)
                break
            raise
        if alg is None:  # (the override leaves it no engine: every such leg named)
            clause = override.for_leg(slot) if override else None
            leaves = _leg_allows(clause, op_clause)
            left.append((slot, leg_req, None,
                         lambda a, s=slot, f=leaves: a in LEG_LEGAL[s] and f(a)))
            continue
        choices[slot] = alg, why
    if left:
        raise _legs_left_none(req, topo, policy, override, op_clause, left, trigger, host_cc)
    legs = []
    for slot in used:
        scope, op = LEG_OPS[slot]
        alg, why = choices[slot]
        legs.append(Leg(name=slot, op=op, alg=alg, sub_type=_sub_type(topo, alg, scope),
                        groups=intra if scope == INTRA else inter, nbytes=sizes[slot],
                        reason=why))
    log = tuple((s, choices[s[4:]][0]) for s in HIER_SLOTS)
    return tuple(legs), log


def _lowerable_hier_legs(req: Request, topo: Topology, policy: Policy,
                         override: AlgoOverride | None, op_clause: OverrideClause | None,
                         legs: tuple[Leg, ...], trigger: Trigger | Request,
                         host_cc: bool) -> tuple[tuple[Leg, ...], list[str]]:
    """Each HIER leg whose engine this build cannot lower as a leg takes the first engine of
    its slot's legal set (precedence order) that it can and whose predicate holds on the
    leg's group (in window first); RING always can.  A leg clause forcing such an engine is
    an error."""
    out, notes = [], []
    left: list[_LeftLeg] = []
    for leg in legs:
        if leg.alg in policy.hier_leg_lowerable:
            out.append(leg)
            continue
        clause = override.for_leg(leg.name) if override else None
        if clause is not None and clause.forced is not None:
            if left:  # (a leg before it left none: said first, as _hier_legs does)
                break
            can = ", ".join(a.name for a in sorted(policy.hier_leg_lowerable, key=int))
            raise _forced_error(req, override, clause, leg.alg,
                                f"{leg.alg.name} cannot be lowered as a HIER leg in this build "
                                f"(leg engines: {can})", leg.name)
        leg_req = Request.for_op(leg.op, req.dtype, leg.groups[0], leg.nbytes,
                                 ordinal=req.ordinal, sbuf=req.sbuf, alu=req.alu)
        pick, why = EncAlgType.RING, "always legal"
        found = False
        allowed = _leg_allows(clause, op_clause)
        order = [a for a in dict.fromkeys((*policy.precedence, *LEG_LEGAL[leg.name]))
                 if a in LEG_LEGAL[leg.name] and allowed(a)]
        passed: list[tuple[EncAlgType, str]] = []  # (engine, why not) in the first pass
        for in_window in (True, False):
            for k, a in enumerate(order):
                if a not in policy.hier_leg_lowerable:
                    if in_window:  # (why the policy's leg passed it over, else this build)
                        ok, why_a = (True, "") if a == leg.alg else PREDICATES[a][1](
                            leg_req, topo, policy, check_window=True)
                        passed.append((a, "not lowerable as a HIER leg in this build" if ok
                                       else why_a))
                    continue
                ok, why_a = PREDICATES[a][1](leg_req, topo, policy, check_window=in_window)
                if ok:
                    # (outside its window, it says so as the policy's leg does, _leg_choice:
                    # until 2026-12-06 it gave the bare structural reason)
                    pick, found = a, True
                    why = _passed_over(why_a if in_window else _outside_window(why_a, passed),
                                       [p for p in passed if order.index(p[0]) < k
                                        or (not in_window and p[0] != a)]
                                       + _off_slot_passed(clause, leg.name, op_clause))
                    break
                if in_window:
                    passed.append((a, why_a))
            if found:
                break
        if not found and not allowed(EncAlgType.RING):  # (RING, always legal, excluded)
            left.append((leg.name, leg_req, leg.alg, allowed))
            continue
        out.append(Leg(name=leg.name, op=leg.op, alg=pick, sub_type=None, groups=leg.groups,
                       nbytes=leg.nbytes, reason=why))
        notes.append(f"{leg.name}: {leg.alg.name} is not lowerable as a HIER leg in this build; "
                     f"{pick.name} instead")
    if left:  # (in slot order, as _hier_legs names them)
        left.sort(key=lambda x: list(LEG_OPS).index(x[0]))
        raise _legs_left_none(req, topo, policy, override, op_clause, left, trigger, host_cc)
    return tuple(out), notes


def _flat_leg(req: Request, topo: Topology, alg: EncAlgType, scope: str, reason: str) -> Leg:
    return Leg(name="flat", op=req.op, alg=alg, sub_type=_sub_type(topo, alg, scope),
               groups=(req.group,), nbytes=req.op_bytes, reason=reason)


def _legs_text(legs: tuple[Leg, ...]) -> str:
    return " -> ".join(f"{leg.name} {leg.alg.name}" for leg in legs)


def select(trigger: Union[Trigger, Request], topo: Topology, *,
           override: AlgoOverride | None = None, policy: Policy = DEFAULT_POLICY,
           strict: bool = True, host_cc: bool = False, _take: EncAlgType | None = None,
           hier_refusal: str | None = None) -> Selection:
    """Select the engine, legs and channel count for one trigger.

    With ``strict=False`` (explain) a request nothing lowerable can serve returns a
    selection with ``alg == INVALID`` instead of raising.  ``_take`` (the BD gate's,
    :func:`engine_bd_refusal`): the selection of that engine, as the cascade would make it
    had it taken it (legal: its legs under ``override``), without the gate.  ``host_cc``:
    ``lower``'s ``--host-cc``, which the BD gate counts under (it changes an all-reduce's
    legs, not the cascade).  ``hier_refusal``: why ``lower`` refuses HIER for this trigger
    among the model's (:func:`spad_pass_over`, ``lower.lay_out_memory_gated``): the cascade
    passes HIER over as the BD gate passes over an engine its composer refuses.
    """
    req = as_request(trigger)
    if not req.group:
        raise SelectionError("empty replica group", trigger=req.ordinal)
    if len(set(req.group)) != len(req.group):
        raise SelectionError("a rank appears twice in the replica group", trigger=req.ordinal)
    for r in req.group:
        topo.info(r)
    if (apart := topo.unlinked_devices(req.group)) is not None:
        # (no engine can serve it: every one moves data between the group's devices; until
        # 2026-12-06 such a hop was counted and lowered as a routed C2C hop)
        raise SelectionError(topo.unlinked_refusal(*apart), trigger=req.ordinal)
    shape = group_shape(topo, req.group)
    cands = evaluate_candidates(req, topo, policy)
    clause = override.for_op(req.op) if override else None
    allowed: Callable[[EncAlgType], bool] = clause.allows if clause else (lambda a: True)
    # (under an allow-list or an exclusion: the engines it leaves, the ones the cascade ran;
    # an allow-list's engines outside the precedence - SINGLE_STEP_MESH, "only by --algo" -
    # after them, in candidate order, SELECTION.md §8: until 2026-12-06 they were ignored, the
    # error false when one was the only legal engine allowed)
    cascade = _cascade_order(clause, policy)
    order = " > ".join(a.name for a in cascade)

    forced = clause.forced if clause else None
    if _take is not None:
        policy_alg, reason = _take, f"{_take.name}: the BD gate's count"
    elif forced is not None:
        c = cands[forced]
        if not c.legal:
            raise _forced_error(req, override, clause, forced, f"{c.predicate}: {c.reason}")
        policy_alg = forced
        reason = f"forced by the override {override.text!r} ({c.reason})"
    else:
        # the BD gate (SELECTION.md §3 "The BD gate"): an engine the cascade would take whose
        # legs pass TPINC_MAX_BDS is passed over, its reason the gate's (until 2026-12-07
        # only MESH was gated, and the default could take an engine lower then refused)
        def fits(a: EncAlgType) -> bool:
            why = (f"{LOWER_REFUSES}{hier_refusal}"
                   if a == EncAlgType.HIER and hier_refusal is not None
                   else engine_bd_refusal(trigger, req, a, topo, policy, override, host_cc))
            if why is not None:
                c = cands[a]
                cands[a] = replace(c, in_window=False, reason=why if c.in_window
                                   else f"{c.reason}; and {why}")
            return why is None

        picked = _cascade(cands, cascade)
        while picked is not None and not fits(picked):
            picked = _cascade(cands, cascade)
        outside = False

        def gated() -> list[EncAlgType]:
            return [a for a in cascade if _bd_gated(cands[a].reason)
                    or "; and " + POLICY_GATE in cands[a].reason]
        if picked is None and (clause is not None or gated()):
            # SELECTION.md §8: under an allow-list or exclusion it is an error only when
            # nothing allowed is legal; with none inside its window, the first legal one
            # (that fits TPINC_MAX_BDS; so too with no override when the BD gate passed
            # every engine inside its window over, even RING, §3 "The BD gate")
            picked = next((a for a in cascade if cands[a].legal
                           and not _bd_gated(cands[a].reason) and fits(a)), None)
            outside = picked is not None
        if picked is None and gated():
            # (the engines --algo may force that lower lowers: legal, not passed over, and
            # fitting the gate's count, which a forced engine's legs are, SELECTION.md §3)
            # each selected as `--algo <engine>` selects it, under no override of the user's,
            # and left out when that selection or its composition raises (until 2026-12-07
            # counted under the user's override, an engine whose selection raised counting
            # as fitting: '^hier,ring' named HIER, which `--algo hier` refused, review 52v)
            # (an engine the gate passed over is over forced too, but HIER, whose legs the
            # user's leg clauses may steer: 'hier,single_cycle_ring;inter_allr:ring' under
            # --host-cc passes over a HIER that `--algo hier` lowers, SELECTION.md §3)
            passed_over = gated()
            forcible = [a for a in CANDIDATE_ORDER if cands[a].legal
                        and (a not in passed_over or a == EncAlgType.HIER
                             and hier_refusal is None)
                        and policy.is_lowerable(a, req.op)
                        and forced_fits(trigger, req, a, topo, policy, host_cc)]
            msg = _no_engine_fits(req, cands, passed_over, override if clause else None,
                                  forcible)
            # (a refusal of lower's selection whatever the override: explain's error too, as
            # docs/CLI.md "explain" says of any selection lower refuses; until 2026-12-07
            # explain showed it INVALID, exit 0, unless a clause of the op's governed it,
            # so '^single_cycle_ring' was an error and 'inter_allr:ring' not: review 53i)
            err = SelectionError(msg, trigger=req.ordinal)
            # (its engines to force, held to every trigger of the model: model_way_out)
            err.bd_way_out = _BdWayOut(req=req, cands=dict(cands), gated=passed_over,
                                       override=override if clause else None,
                                       forcible=tuple(forcible), users=override)
            raise err
        if picked is None:
            why = "; ".join(f"{cands[a].predicate}: {cands[a].reason}" for a in cascade)
            # (a group of one rank is "1 rank", errors.counted: until 2026-12-06 "1 ranks")
            msg = (f"no legal engine for {req.op.name} over {counted(shape.rank_n, 'rank')}"
                   f"{' under ' + override.source + ' ' + repr(override.text) if clause else ''}"
                   f" ({why or 'every engine of the cascade excluded'})")
            if strict or clause is not None:  # lower refuses it too: explain must not show it
                raise SelectionError(msg, trigger=req.ordinal)
            return _invalid(req, shape, cands, msg, override)
        policy_alg = picked
        c = cands[picked]
        scope_txt = "intra-node" if shape.scope == INTRA else f"{shape.node_n}-node"
        first = "first legal engine"
        if outside:  # (what none allowed is: inside its window, past its policy gate)
            ran = [cands[a].reason for a in cascade]
            first += f" ({_none_inside(ran)})"
        # (then why each engine the cascade ran before it lost, as a HIER leg's reason says
        # it: the candidate's reason, the table's words; until 2026-12-06 not said)
        before = cascade[:cascade.index(picked)]
        if outside:  # (and those after it, each refused too: until 2026-12-06 not said)
            before = tuple(a for a in cascade if a != picked)
        # (the override right after the cascade it cut, as the reason's, not after the last
        # "X not taken: ..." it read as part of: until 2026-12-06 it ended the reason)
        under = f" under the override {override.text!r}" if clause is not None else ""
        reason = _passed_over(f"{picked.name}: {first} of {order}{under} for {scope_txt} "
                              f"{req.op.name} {fmt_bytes(req.op_bytes)} ({c.reason})",
                              [(a, cands[a].reason) for a in before])

    hier_log: tuple[tuple[str, EncAlgType], ...] = ()
    if policy_alg == EncAlgType.HIER:
        policy_legs, hier_log = _hier_legs(req, topo, policy, override, clause, trigger,
                                           host_cc)
    else:
        policy_legs = (_flat_leg(req, topo, policy_alg, shape.scope, cands[policy_alg].reason),)

    lowered_legs, leg_notes = policy_legs, []
    if policy_alg == EncAlgType.HIER and policy.is_lowerable(EncAlgType.HIER, req.op):
        lowered_legs, leg_notes = _lowerable_hier_legs(req, topo, policy, override, clause,
                                                       policy_legs, trigger, host_cc)
    plan_algs = {policy_alg, *(leg.alg for leg in lowered_legs)}
    fallback_reason = None
    if all(policy.is_lowerable(a, req.op) for a in plan_algs):
        alg, legs = policy_alg, lowered_legs
        if leg_notes:
            fallback_reason = "; ".join(leg_notes)
    else:
        missing = sorted((a for a in plan_algs if not policy.is_lowerable(a, req.op)), key=int)
        what = policy_alg.name
        if policy.is_lowerable(policy_alg):
            what = f"{policy_alg.name} {req.op.name}"
        if policy_alg == EncAlgType.HIER:
            what = f"HIER ({_legs_text(policy_legs)})"
        can = ", ".join(a.name for a in sorted(policy.lowerable, key=int)) or "nothing"
        if forced is not None:
            raise SelectionError(
                f"{override.source} {override.text!r} forces {forced.name}: {forced.name} is "
                f"legal here but this build cannot lower it yet (lowerable: {can}, each for "
                f"its own ops; not for {req.op.name}: "
                f"{', '.join(a.name for a in missing)})", trigger=req.ordinal)
        fb, outside, skipped = _flat_fallback(req, cands, allowed, policy, policy_alg)
        if fb is None:  # (its "no lowerable engine is legal" is why for each engine)
            # engines legal and lowerable that the override alone keeps out (until 2026-12-06
            # the line said no lowerable engine was legal, without a word of the override)
            barred = [a.name for a in CANDIDATE_ORDER if not allowed(a)
                      and _fallback_refusal(a, cands[a], policy, req, False) is None]
            which = (f"no lowerable engine {override.source} {override.text!r} allows is "
                     f"legal for {req.op.name} (legal and lowerable but not allowed: "
                     f"{', '.join(barred)})" if barred else
                     f"no lowerable engine is legal for {req.op.name}")
            msg = (f"{what} is not lowerable in this build (lowerable: {can}, each for its own "
                   f"ops; not for {req.op.name}: {', '.join(a.name for a in missing)}) and "
                   f"{which}")
            if strict or clause is not None:
                raise SelectionError(msg, trigger=req.ordinal)
            return _invalid(req, shape, cands, msg, override, policy_alg=policy_alg,
                            policy_legs=policy_legs, hier_log=hier_log)
        alg = fb
        legs = (_flat_leg(req, topo, fb, shape.scope, cands[fb].reason),)
        flat = ""
        if shape.node_n > 1:
            flat = f" (flat over {shape.node_n} nodes: {shape.node_n} network hops per channel)"
        fallback_reason = (f"{what} is not lowerable in this build (lowerable: {can}); "
                           f"lowering {fb.name} over the whole group instead{flat}")
        if outside:  # (until 2026-12-06 not said)
            # (a policy gate, checked with the window, said as such: until 2026-12-06
            # "outside its size window (policy gate: ...)")
            gate = cands[fb].reason.startswith(POLICY_GATE)
            fails, own_suffix = (("fails its policy gate",
                                  " size window and passes its policy gate")
                                 if gate else ("outside its size window", ""))
            fallback_reason += (f"; {fb.name} {fails} ({cands[fb].reason}): none allowed and "
                                f"lowerable is inside its own{own_suffix}")
        fallback_reason = _passed_over(fallback_reason, skipped)

    n_channels, ch_reason = choose_channels(topo, req, alg, policy)
    cand_tuple = tuple(
        Candidate(alg=c.alg, legal=c.legal, reason=c.reason, lowerable=c.lowerable,
                  in_window=c.in_window, predicate=c.predicate, chosen=c.alg == policy_alg)
        for c in cands.values())
    return Selection(
        trigger=req.ordinal, policy_alg=policy_alg, alg=alg, legs=legs, policy_legs=policy_legs,
        candidates=cand_tuple, n_channels=n_channels, reason=reason,
        fallback_reason=fallback_reason, op=req.op, dtype=req.dtype, group=req.group,
        op_bytes=req.op_bytes, sbuf=req.sbuf, scope=shape.scope, channel_reason=ch_reason,
        hier_selections=hier_log, hybrid_ring=is_hybrid_ring(topo, req.group),
        override=override.text if override else None)


#: How the BD gate's refusal (:func:`_no_engine_fits`) begins, which :func:`_bd_refused`
#: knows it by.
NO_ENGINE_TAKES = "no engine the default selection may take"


def _no_engine_fits(req: Request, cands: dict[EncAlgType, Candidate],
                    gated: list[EncAlgType], override: AlgoOverride | None,
                    forcible: list[EncAlgType],
                    stops: Iterable[tuple[str, int, str]] = (),
                    scoped: Iterable[tuple[str, EncAlgType]] = ()) -> str:
    """The default selection's refusal when every engine it may take that is legal has a leg
    over ``TPINC_MAX_BDS`` or is refused by its composer (the BD gate, SELECTION.md §3): each
    such engine (``gated``) and its worst leg or its composer's reason, the rows that make
    the BDs, and the limit; then the engines ``--algo`` may force whose legs fit
    (``forcible``), or that none does (until 2026-12-07 "--algo may force an engine" was
    said where every forced engine was refused: rs_short).  With no leg over the limit
    (every one refused by its composer) the same without the rows and the limit: each
    engine and its composer's reason (from the rank on where ``lower`` names one), then the
    engines ``--algo`` may force.  ``stops``: the engines forced that another trigger of the
    model still stops under (:func:`model_way_out`), by their ``--algo`` text, and that
    trigger, named after the parenthesis, one text a trigger (:func:`stops_text`; left out
    of ``forcible``); ``scoped``: the ``--algo`` text
    forcing such an engine on the request's op alone that every trigger passes, and the
    engine, named before the stops (:func:`model_way_out`)."""
    over = [a for a in gated if LOWER_REFUSES not in cands[a].reason]
    # (the stops after the parenthesis, as the other refusals say them: until 2026-12-07
    # inside it, among the ways)
    stopped = "".join(f"; {text}" for text in stops_text("--algo", stops))
    offered = [_scoped_way("--algo", text, a, req.op) + ", whose legs fit"
               for text, a in scoped]
    way = "; ".join(([f"--algo may force {' or '.join(a.name for a in forcible)}, whose legs "
                      "fit"] if forcible else [] if stopped or offered else
                     ["no engine fits forced either"]) + offered)
    legs = "; ".join(f"{a.name} a " + cands[a].reason.rpartition(POLICY_GATE + "a ")[2]
                     .partition(", more than")[0] if a in over else
                     f"{a.name} {cands[a].reason.rpartition(POLICY_GATE)[2]}" for a in gated)
    under = f" under {override.source} {override.text!r}" if override is not None else ""
    if not over:
        # (every one refused by its composer: until 2026-12-07 the first one's reason
        # alone, without the rank lower names it at nor the engines --algo may force)
        return (f"{NO_ENGINE_TAKES}{under} can be lowered: {legs}"
                + (f" ({way})" if way else "") + stopped)
    cure = ("a smaller message" if req.src_run is None and req.dst_run is None
            else "longer rows, dim 0 of step 1, or a smaller message")
    return (f"{NO_ENGINE_TAKES}{under} fits TPINC_MAX_BDS "
            f"{TPINC_MAX_BDS} M2S or S2M BDs a leg ({bds_text(req)}): {legs}; lower "
            f"refuses such a leg ({cure}{'; ' + way if way else ''}){stopped}")


def _invalid(req: Request, shape: GroupShape, cands: dict[EncAlgType, Candidate], msg: str,
             override: AlgoOverride | None, *, policy_alg: EncAlgType = EncAlgType.INVALID,
             policy_legs: tuple[Leg, ...] = (), hier_log=()) -> Selection:
    return Selection(
        trigger=req.ordinal, policy_alg=policy_alg, alg=EncAlgType.INVALID, legs=(),
        policy_legs=policy_legs,
        candidates=tuple(Candidate(alg=c.alg, legal=c.legal, reason=c.reason,
                                   lowerable=c.lowerable, in_window=c.in_window,
                                   predicate=c.predicate, chosen=c.alg == policy_alg)
                         for c in cands.values()),
        n_channels=0, reason=msg, fallback_reason=msg, op=req.op, dtype=req.dtype,
        group=req.group, op_bytes=req.op_bytes, sbuf=req.sbuf, scope=shape.scope,
        channel_reason="nothing lowered", hier_selections=hier_log,
        override=override.text if override else None)


#: The most SPAD entries one trigger takes: a HIER all-reduce's, one a leg (three legs).
_MOST_ENTRIES = max(len(legs) for legs in HIER_LEGS.values())


def spad_pass_over(triggers: Iterable[Trigger],
                   selection_of: Callable[[Trigger], "Selection | None"]) -> dict[int, str]:
    """The triggers whose default HIER the selection passes over (SELECTION.md "The SPAD
    gate"), by ordinal, and why ``lower`` refuses it: a subgraph's collectives on one replica
    group whose selections (``selection_of``: a trigger's, None when refused) need more SPAD
    entries on each rank than the TOP_SP CTRL SPAD holds (``limits.check_plan``; HIER takes
    one a leg, any other engine one) while one each would fit.  HIER is passed over on the
    last such triggers first, until the group's entries fit (until 2026-12-07 the default
    took HIER and ``lower`` refused the model, where ``--algo ring`` lowered it); one the
    override forces is not (``lower`` refuses it).  Only groups of more triggers than the
    SPAD holds entries over the most a trigger takes are selected here.  Then the same over
    all subgraphs for the u16 ``spad_index`` (:func:`_rank_spad_pass_over`)."""
    from nrtrewrite.limits import SPAD_BYTES, SPAD_ENTRIES, short_group
    triggers = list(triggers)
    by_group: dict[tuple[str, tuple[int, ...]], list[Trigger]] = {}
    for t in triggers:
        by_group.setdefault((t.subgraph, tuple(t.replica_group)), []).append(t)
    out: dict[int, str] = {}
    for (_sg, group), trigs in by_group.items():
        if not SPAD_ENTRIES < len(trigs) * _MOST_ENTRIES or len(trigs) > SPAD_ENTRIES:
            continue  # (fits whatever is taken, or is refused whatever is taken)
        sels = [selection_of(t) for t in trigs]
        hier = [s is not None and s.alg == EncAlgType.HIER for s in sels]
        entries = [len(s.legs) if h else 1 for s, h in zip(sels, hier)]
        total = sum(entries)
        if total <= SPAD_ENTRIES:
            continue
        why = (f"{len(trigs)} collectives on replica group {short_group(group)} need {total} "
               f"SPAD entries on each of its ranks, HIER taking one a leg; the {SPAD_BYTES}-"
               f"byte TOP_SP CTRL SPAD holds {SPAD_ENTRIES} per subgraph")
        for t, s, h, n in reversed(list(zip(trigs, sels, hier, entries))):
            if total <= SPAD_ENTRIES:
                break
            if h and not hier_forced(s):
                out[t.ordinal] = why
                total -= n - 1
    _rank_spad_pass_over(triggers, selection_of, out)
    return out


def _rank_spad_pass_over(triggers: list[Trigger],
                         selection_of: Callable[[Trigger], "Selection | None"],
                         out: dict[int, str]) -> None:
    """:func:`spad_pass_over` over all subgraphs: a rank's SPAD entries over every subgraph
    are numbered by the u16 ``spad_index`` (``limits.MAX_RANK_SPAD_ENTRIES``,
    ``limits.check_plan``), HIER taking one a leg; where the selections (those ``out``
    already passes over taking one) need more on some rank, HIER is passed over on the last
    triggers of the model holding such a rank first, until every rank fits; ``out`` takes
    them (until 2026-12-07 ``lower`` refused 129 subgraphs of 170 HIER all-reduces over one
    group, 65,790 entries, where ``--algo ring`` lowered them).  A model of at most
    ``limit / 3`` triggers on every rank is not looked at (it fits whatever is taken)."""
    from nrtrewrite import limits  # (read at the call: tests lower the limit)
    limit = limits.MAX_RANK_SPAD_ENTRIES
    if len(triggers) * _MOST_ENTRIES <= limit:
        return
    by_group: dict[tuple[int, ...], list[Trigger]] = {}
    for t in triggers:
        by_group.setdefault(tuple(t.replica_group), []).append(t)
    counts: dict[int, int] = {}
    for group, trigs in by_group.items():
        for r in group:
            counts[r] = counts.get(r, 0) + len(trigs)
    if max(counts.values()) * _MOST_ENTRIES <= limit:
        return
    sels: dict[int, Selection | None] = {}
    entries: dict[int, int] = {}
    totals: dict[int, int] = {}
    for group, trigs in by_group.items():
        if all(counts[r] * _MOST_ENTRIES <= limit for r in group):
            continue  # (its ranks fit whatever is taken)
        n = 0
        for t in trigs:
            s = sels[t.ordinal] = selection_of(t)
            e = entries[t.ordinal] = (len(s.legs) if s is not None and s.alg == EncAlgType.HIER
                                      and t.ordinal not in out else 1)
            n += e
        for r in group:
            totals[r] = totals.get(r, 0) + n
    over = {r for r, n in totals.items() if n > limit}
    if not over:
        return
    rank = min(over)
    groups = [g for g in by_group if rank in g]
    if len(groups) == 1:
        why = (f"the collectives of replica group {limits.short_group(groups[0])} need "
               f"{totals[rank]} SPAD entries on each of its ranks over all subgraphs, HIER "
               "taking one a leg")
    else:
        why = (f"rank {rank} needs {totals[rank]} SPAD entries over all its subgraphs' "
               "collectives, HIER taking one a leg")
    why += f"; more than the {limit} a u16 spad_index numbers (MAX_RANK_SPAD_ENTRIES)"
    for t in reversed(triggers):
        if not over:
            break
        group = tuple(t.replica_group)
        n = entries.get(t.ordinal, 1)
        if n == 1 or over.isdisjoint(group) or hier_forced(sels[t.ordinal]):
            continue
        out[t.ordinal] = why
        for r in group:
            totals[r] -= n - 1
            if totals[r] <= limit:
                over.discard(r)


def forced_engine(sel: "Selection", op: EncOpType, alg: EncAlgType) -> bool:
    """Whether the override ``sel`` was made under (its text, parsed here) forces ``alg`` for
    ``op`` (``--algo ring``, ``allreduce:ring``)."""
    if sel.override is None:
        return False
    clause = parse_algo_override(sel.override).for_op(op)
    return clause is not None and clause.forced == alg


def hier_forced(sel: "Selection") -> bool:
    """Whether the override of ``sel`` forces HIER for its op (``--algo hier``): a gate that
    passes HIER over for a model-wide limit (:func:`spad_pass_over`, ``lower``'s memory
    layout) leaves it, and ``lower`` refuses it."""
    return forced_engine(sel, sel.op, EncAlgType.HIER)


def select_all(model: Model, topo: Topology, override: AlgoOverride | None = None,
               policy: Policy = DEFAULT_POLICY, triggers: Iterable[Trigger] | None = None,
               host_cc: bool = False) -> list[Selection]:
    """:func:`select` for every trigger of ``model`` (those of ``triggers``, if given), in
    trigger order (``host_cc``: ``lower``'s ``--host-cc``, for the BD gate), HIER passed over
    where its SPAD entries would not fit among the subgraph's (:func:`spad_pass_over`, over
    every trigger of the model)."""
    chosen = list(model.triggers if triggers is None else triggers)

    def pick(t: Trigger, spad: str | None = None) -> Selection:
        try:
            return select(t, topo, override=override, policy=policy, host_cc=host_cc,
                          hier_refusal=spad)
        except SelectionError as err:
            raise err.at(**trigger_where(t))
    try:
        out = [pick(t) for t in chosen]
    except SelectionError as err:  # (its ways out held to every trigger of the model)
        raise model_way_out(err, model.triggers, topo, policy=policy,
                            host_cc=host_cc, model=model) from None
    mine = {t.ordinal: s for t, s in zip(chosen, out)}

    def selection_of(t: Trigger) -> Selection | None:
        if t.ordinal in mine:
            return mine[t.ordinal]
        try:  # (a trigger not planned, schedule --trigger: as lower would select it)
            return select(t, topo, override=override, policy=policy, host_cc=host_cc)
        except NrtRewriteError:
            return None
    gated = spad_pass_over(model.triggers, selection_of)
    return [pick(t, gated[t.ordinal]) if t.ordinal in gated else s
            for t, s in zip(chosen, out)]


__all__ = [
    "ALGO_ENV", "AlgoOverride", "CANDIDATE_ORDER", "Candidate", "GroupShape", "HIER_LEGS",
    "HIER_SLOTS", "LEG_LEGAL", "LEG_OPS", "Leg", "METARING_OF", "OverrideClause", "PREDICATES",
    "Request", "Selection", "as_request", "can_post_ring", "choose_channels",
    "enc_can_post_hierarchical_operation", "enc_can_post_inter_rdh_operation",
    "enc_can_post_intra_rdh_operation", "enc_can_post_kangaring_operation",
    "enc_can_post_mesh_operation", "enc_can_post_single_cycle_ring", "evaluate_candidates",
    "group_shape", "hier_groups", "hier_split", "idle_clauses", "model_way_out", "parse_alg_name",
    "parse_algo_override", "parse_op_name", "ranks_by_node", "ranks_text", "select", "select_all",
    "spad_pass_over",
    "DEFAULT_POLICY", "Policy",
]
