"""INTRA_RDH and INTER_RDH: recursive halving reduce-scatter and recursive doubling all-gather
as vectors of ``rdh_transfer`` (seed 003 §2-3), lowered by ``submit_rdh_cce_transfers`` and
``submit_rdh_copy_transfers`` into the leg IR (docs/DESIGN.md "Mesh and RDH").

The group's ranks, in replica-group order (index ``i``), form a hypercube of ``m = 2^L``
*core* ranks, ``L = floor(log2 n)``.  A group that is not a power of two first folds its
``n - m`` extra ranks into partners (the pairing of MPICH's recursive halving): for
``k < n - m`` the odd rank ``2k + 1`` hands its input to the even rank ``2k`` and gets the
result back at the end; the core index of rank ``i`` is ``i // 2`` below ``2 (n - m)`` and
``i - (n - m)`` above.  Core rank ``c`` owns *super-block* ``c``: for reduce-scatter and
all-gather the natural blocks of its core rank and (when folded) of its extra rank, which are
adjacent, so every range below is contiguous; for all-reduce ``[c N / m, (c + 1) N / m)``.

* **RH** (reduce-scatter, recursive halving, distance halving): at step ``s`` (bit
  ``b = L - 1 - s``) a core rank keeps the half of its current range on its side of bit
  ``b`` and hands the other half to partner ``c ^ 2^b``; the partner's half arrives in this
  rank's slot ``s``.  The reduce of step ``s`` (own partial + slot ``s``) is fused with the
  next send: the half that goes on is written straight into the next partner's slot
  ``s + 1`` -- which is why a reduce's destination index is resolved in neighbour group
  ``grp + 1`` (seed 003 §2 GOTCHA).  After ``L`` steps core rank ``c`` holds super-block
  ``c`` fully reduced.
* **RD** (all-gather, recursive doubling): at level ``k`` (bit ``k``) a core rank sends the
  ``2^k`` super-blocks it holds to partner ``c ^ 2^k`` and receives the partner's.
* all-reduce = fold, RH, RD, unfold; reduce-scatter = fold, RH, unfold (each rank's block);
  all-gather = fold (the extra rank's block), RD, unfold.

Events (FORMATS §7): EVT_RDH_LOCAL_HANDSHAKE (the start handshake with every partner on this
node), EVT_RDH_LOCAL_PEER_HANDSHAKE (fold in), EVT_RH_STEP_s, EVT_RD_STEP_k,
EVT_RDH_AXES_HANDSHAKE_2 (fold out).  INTRA_RDH entries carry the mesh SPAD overlay (the
runtime builds INTRA_RDH on the mesh object); INTER_RDH entries are metaring entries
(channel_list) using the same event semaphores.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from nrtrewrite.codes import (
    DTYPE_SIZE, ENC_RDH_MAX_RD_STEPS, EdgeLocality, EncAlgMeshType, EncAlgType,
    EncMeshEventType as E, EncOpType,
)
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.algorithm import Algorithm, EntrySpec, Prepared, register
from nrtrewrite.compose.blockunits import block_edges, rescaled
from nrtrewrite.compose.chunking import io_dtype_size
from nrtrewrite.compose.events import (
    EVENT_SEMA_MASK, EVENT_SEMA_SHIFT_OFFSET, MESH_CHANNEL, PHASE_NAMES, EventSchedule, event_sem,
)
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.compose.params import (
    Addr, NeighborGroups, RdhTransfer, RowSpec, can_use_cme_sdma, copy_rows, recv_rows,
    reduce_rows, set_waits, submit_rdh_cce_transfers, submit_rdh_copy_transfers, sync_rows,
)
from nrtrewrite.compose.segments import FirstSeen
from nrtrewrite.compose.views import in_out_views, op_elements, operand_view, region_view
from nrtrewrite.emit.buffers import BufferView
from nrtrewrite.errors import LoweringError

V_IN, V_OUT, V_GW = 0, 1, 2
HANDSHAKE = E.EVT_RDH_LOCAL_HANDSHAKE
FOLD_IN = E.EVT_RDH_LOCAL_PEER_HANDSHAKE
FOLD_OUT = E.EVT_RDH_AXES_HANDSHAKE_2
#: nccl_mhandle of a registered source (ours, see mesh.NET_MHANDLE).
NET_MHANDLE = 1


def rh_event(s: int) -> E:
    return E(int(E.EVT_RH_STEP_0) + s)


def rd_event(k: int) -> E:
    return E(int(E.EVT_RD_STEP_0) + k)


@dataclass(frozen=True)
class RdhPlan:
    """Rank-independent RDH decisions for one trigger."""

    alg: EncAlgType
    op: EncOpType
    group: tuple[int, ...]
    n: int
    m: int  # core ranks (power of two)
    L: int  # RH / RD steps
    extra: int  # folded ranks (n - m)
    sb: np.ndarray  # super-block element edges, m + 1 values
    blocks: np.ndarray  # natural block edges (RS / AG), n + 1 values
    dsize: int
    total: int  # elements of the op space
    slot_off: tuple[int, ...]  # byte offset of RH slot s (from the trigger's scratch base)
    fold_off: int
    work_off: int
    scratch: int  # bytes
    private: bool
    sub_type: EncAlgMeshType | None

    # core index <-> group index
    def core_of(self, i: int) -> tuple[int, bool]:
        """(core index, folded away) of group index ``i``."""
        if i < 2 * self.extra:
            return i // 2, bool(i & 1)
        return i - self.extra, False

    def nat(self, c: int) -> int:
        return 2 * c if c < self.extra else c + self.extra

    def extra_of(self, c: int) -> int | None:
        return 2 * c + 1 if c < self.extra else None

    def rng(self, lo: int, hi: int) -> tuple[int, int]:
        return int(self.sb[lo]), int(self.sb[hi])

    def rh(self, c: int, s: int) -> tuple[int, tuple[int, int], tuple[int, int]]:
        """(partner core, keep range, send range) of core ``c`` at RH step ``s``."""
        b = self.L - 1 - s
        lo = c & ~((2 << b) - 1)
        mid = lo + (1 << b)
        hi = lo + (2 << b)
        low, high = self.rng(lo, mid), self.rng(mid, hi)
        return c ^ (1 << b), (high if (c >> b) & 1 else low), (low if (c >> b) & 1 else high)

    def rd(self, c: int, k: int) -> tuple[int, tuple[int, int], tuple[int, int]]:
        """(partner core, held range, partner's held range) at RD level ``k``."""
        lo = c & ~((1 << k) - 1)
        p = c ^ (1 << k)
        plo = p & ~((1 << k) - 1)
        return p, self.rng(lo, lo + (1 << k)), self.rng(plo, plo + (1 << k))

    def block(self, i: int) -> tuple[int, int]:
        return int(self.blocks[i]), int(self.blocks[i + 1])


def plan_rdh(alg: EncAlgType, trig, sub_type) -> RdhPlan:
    group = tuple(trig.replica_group)
    n = len(group)
    if n < 2:
        raise LoweringError(f"{alg.name} needs at least two ranks")
    if trig.op not in (EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER):
        raise LoweringError(f"{alg.name} does not lower {trig.op.name}")
    L = n.bit_length() - 1
    m = 1 << L
    if L > ENC_RDH_MAX_RD_STEPS:
        raise LoweringError(f"{alg.name} over {n} ranks needs {L} recursive-doubling steps; the "
                            f"events EVT_RD_STEP_0..{ENC_RDH_MAX_RD_STEPS - 1} allow "
                            f"{ENC_RDH_MAX_RD_STEPS} (at most {1 << (ENC_RDH_MAX_RD_STEPS + 1)} "
                            "- 1 ranks)")
    extra = n - m
    dsize = io_dtype_size(trig.dtype)
    N = op_elements(trig)
    if trig.op == EncOpType.ALLREDUCE:
        blocks = np.arange(n + 1, dtype=np.int64) * N // n  # unused for all-reduce
        sb = np.arange(m + 1, dtype=np.int64) * N // m
    else:
        cnt = N // n
        blocks = np.arange(n + 1, dtype=np.int64) * cnt
        lo = np.array([2 * c if c < extra else c + extra for c in range(m)] + [n], np.int64)
        sb = lo * cnt
    # scratch: RH slots (slot s holds at most the largest half exchanged at step s), the fold
    # slot (whole vector) and, for reduce-scatter, the partials (WORK, whole vector)
    slot_off, off = [], 0
    if trig.op != EncOpType.ALLGATHER:
        for s in range(L):
            half = 1 << (L - 1 - s)
            size = max(int(sb[lo + half] - sb[lo]) for lo in range(0, m, half))
            slot_off.append(off)
            off += -(-size * dsize // 64) * 64
    fold_off = off
    if extra and trig.op != EncOpType.ALLGATHER:
        off += -(-N * dsize // 64) * 64
    work_off = off
    if trig.op == EncOpType.REDUCE_SCATTER:
        off += -(-N * dsize // 64) * 64
    return RdhPlan(alg, trig.op, group, n, m, L, extra, sb, blocks, dsize, N, tuple(slot_off),
                   fold_off, work_off, off, trig.op == EncOpType.REDUCE_SCATTER, sub_type)


@dataclass(frozen=True)
class RdhRank:
    """A rank's stages and partners in an RDH: a function of (topology, group, op, rank) only,
    memoised on the topology (:func:`rdh_rank`) and shared by every entry of the group on that
    rank, so never mutated."""

    stages: tuple[tuple[str, tuple[int, ...]], ...]  # neighbour group of each stage
    stage_index: dict[str, int]  # stage name -> neighbour group
    ngroups: NeighborGroups
    peers: tuple[int, ...]  # the rank, then its partners in stage order
    net: frozenset[int]  # partners across the network
    near: tuple[int, ...]  # partners on this node, in peer order
    handshake: np.ndarray  # the EVT_RDH_LOCAL_HANDSHAKE rows (read-only)


def rdh_rank(topo, plan: RdhPlan, rank: int) -> RdhRank:
    """The :class:`RdhRank` of ``rank`` under ``plan`` (memoised per topology, for the ranks
    used last: ``Topology.cached_for_rank``)."""
    return topo.cached_for_rank(rank, ("rdh.rank", plan.group, plan.op),
                                lambda: _rdh_rank(topo, plan, rank))


def _rdh_rank(topo, plan: RdhPlan, rank: int) -> RdhRank:
    """Stages: fold, RH_0..RH_{L-1}, RD_0..RD_{L-1}, unfold, end."""
    me, op, L = rank, plan.op, plan.L
    c, folded = plan.core_of(plan.group.index(rank))
    extra_i = plan.extra_of(c) if not folded else None
    core_rank = plan.group[plan.nat(c)]
    fold_peer = core_rank if folded else (plan.group[extra_i] if extra_i is not None else None)
    pair = (me,) + ((fold_peer,) if fold_peer is not None else ())
    stages = [("fold", pair)]
    if not folded:
        if op != EncOpType.ALLGATHER:
            stages += [(f"rh{s}", (me, plan.group[plan.nat(plan.rh(c, s)[0])])) for s in range(L)]
        if op != EncOpType.REDUCE_SCATTER:
            stages += [(f"rd{k}", (me, plan.group[plan.nat(plan.rd(c, k)[0])])) for k in range(L)]
    stages += [("unfold", pair), ("end", (me,))]
    partners = tuple(dict.fromkeys(r for _n, g in stages for r in g if r != me))
    net = frozenset(r for r in partners
                    if topo.locality(me, r) == EdgeLocality.NETWORK)
    near = tuple(r for r in partners if r not in net)
    index = {r: i for i, r in enumerate((me,) + partners)}
    rows = sync_rows(RowSpec(channel=MESH_CHANNEL, leaf=int(Leaf.mesh_sync),
                             phase=int(HANDSHAKE)),
                     [(index[r], event_sem(HANDSHAKE)) for r in near],
                     [(event_sem(HANDSHAKE), len(near))]) if near else IR.empty(0)
    rows.flags.writeable = False
    first = {}
    for k, (nm, _g) in enumerate(stages):
        first.setdefault(nm, k)
    return RdhRank(tuple(stages), first, NeighborGroups(tuple(g for _n, g in stages)),
                   (me,) + partners, net, near, rows)


class _Rank:
    """One rank's RDH entry under construction, in the element space of ``plan`` (the
    trigger's, or block units for a template, :func:`rdh_template`).

    The entry's views are IN, OUT and GW (V_IN, V_OUT, V_GW), then one per recipe in
    ``view.keys`` (view ``V_GW + 1 + k``), built by :func:`rdh_views` once the trigger's addresses
    are known: ``("slot", s, origin)`` RH slot ``s`` whose first element is ``origin``,
    ``("fold",)`` the fold slot, ``("work",)`` the reduce-scatter partials, ``("gw", k)`` the
    k-th gateway staging view, ``("out", i)`` the OUT of group index ``i``."""

    def __init__(self, topo, rank: int, plan: RdhPlan):
        self.rank, self.plan = rank, plan
        self.i = plan.group.index(rank)
        self.c, self.folded = plan.core_of(self.i)
        P = self.P = rdh_rank(topo, plan, rank)
        self.peers = list(P.peers)
        self._pidx = {r: k for k, r in enumerate(P.peers)}
        self.view = FirstSeen(V_GW + 1)  # view recipe -> view index (``.keys``: in order)
        self.rows: list[np.ndarray] = []
        self.events = EventSchedule()
        self.net: set[int] = set(P.net)
        self.topo = topo
        # neighbour groups, one per stage (docs/DESIGN.md)
        self.stages: list[tuple[str, tuple[int, ...]]] = list(P.stages)

    def peer(self, r: int) -> int:
        if r not in self._pidx:
            self._pidx[r] = len(self.peers)
            self.peers.append(r)
            if self.topo.locality(self.rank, r) == EdgeLocality.NETWORK:
                self.net.add(r)
        return self._pidx[r]

    def rank_of_core(self, c: int) -> int:
        return self.plan.group[self.plan.nat(c)]

    def slot(self, s: int, origin: int) -> int:
        return self.view(("slot", s, origin))

    def fold_slot(self) -> int:
        return self.view(("fold",))

    def work(self) -> int:
        return self.view(("work",))

    def out_of(self, i: int) -> int:
        """The OUT view of group index ``i`` (reduce-scatter: its own block)."""
        if self.plan.op != EncOpType.REDUCE_SCATTER or i == self.i:
            return V_OUT
        return self.view(("out", i))

    def gw(self, k: int) -> int:
        return IR.NO_VIEW if k == 0 else self.view(("gw", k))

    def add(self, rows: np.ndarray) -> None:
        if rows.size:
            self.rows.append(rows)

    def spec(self, leaf: Leaf, evt: E, waits=(), gw: int = IR.NO_VIEW) -> RowSpec:
        return RowSpec(channel=MESH_CHANNEL, leaf=int(leaf), phase=int(evt), waits=tuple(waits),
                       gw_view=gw)

    def post_recv(self, sender: int, rng: tuple[int, int], view: int, evt: E) -> None:
        if sender in self.net and rng[1] > rng[0]:
            self.add(recv_rows(self.spec(Leaf.post_recv, evt),
                               [(rng[0], rng[1], self.peer(sender), view, event_sem(evt))]))

    def consume(self, rows: np.ndarray, waits, evt: E) -> None:
        """Rows that need ``waits`` first: the waits go on the first row, or on a sync leg."""
        waits = [(s, v) for s, v in waits if v > 0]
        if rows.size and rows[0]["n_wait"] == 0 and waits:
            set_waits(rows[0], waits)  # rows are the caller's fresh array (submit's)
        elif waits:
            self.add(sync_rows(self.spec(Leaf.mesh_sync, evt), (), waits))
        self.add(rows)

    def ngroups(self) -> NeighborGroups:
        return self.P.ngroups

    def stage(self, name: str) -> int:
        return self.P.stage_index[name]

    # -- lowering a transfer vector
    def submit(self, transfers: list[RdhTransfer], grp: int, leaf_copy: Leaf, evt: E,
               signal, gw: int = IR.NO_VIEW) -> np.ndarray:
        """One vector of rdh_transfers: the CME copy path when can_use_cme_sdma, else CCE."""
        transfers = [t for t in transfers if t.size > 0]
        if not transfers:
            return IR.empty(0)
        ng = self.ngroups()
        cursor = [0]
        d = self.plan.dsize
        if can_use_cme_sdma(transfers) and all(len(t.src_addrs) == 1 for t in transfers):
            parts = []
            for op in submit_rdh_copy_transfers(transfers, ng, grp, cursor):
                if any(r in self.net for r in op.d_ranks):
                    op.nccl_mhandle = NET_MHANDLE
                parts.append(copy_rows(op, self.spec(leaf_copy, evt, gw=gw), d,
                                       self.peer(ng.rank(grp, op.src_idx)), self.peer, signal,
                                       net_ranks=frozenset(self.net)))
            return parts[0] if len(parts) == 1 else IR.concat(parts)
        ops = submit_rdh_cce_transfers(transfers, ng, grp, cursor)
        return reduce_rows(ops, self.spec(Leaf.rdh_reduce, evt, gw=gw), d, ng, grp, grp + 1,
                           self.peer, signal)

    def xfer(self, idx: int, srcs: list[tuple[int, int]], dsts: list[tuple[int, int]],
             rng: tuple[int, int]) -> RdhTransfer:
        """An rdh_transfer of the element range ``rng`` from (rank, view) sources to
        (rank, view) destinations (every address at the range's first element)."""
        a, b = rng
        return RdhTransfer(idx=idx, src_devs=[r for r, _ in srcs],
                           src_addrs=[Addr(v, a) for _, v in srcs],
                           dst_devs=[r for r, _ in dsts], dst_addrs=[Addr(v, a) for _, v in dsts],
                           size=(b - a) * self.plan.dsize)

    def composed(self) -> ComposedRdh:
        """The entry as composed (no views yet)."""
        ir = IR.concat(self.rows)
        ir["step"] = np.arange(ir.size)
        return ComposedRdh(ir, tuple(self.view.keys), self.events, tuple(self.peers),
                           frozenset(self.net), tuple(self.stages), self.c, self.folded)


@dataclass(frozen=True)
class ComposedRdh:
    """One rank's composed RDH entry, views still recipes (:class:`_Rank`): its rows, the view
    recipes, the events, the peers (the rank first), the peers across the network, the
    neighbour group of each stage, its core index and whether it is folded away.  A template
    (:func:`rdh_template`) is shared by many triggers, so never mutated (its rows are
    read-only)."""

    ir: np.ndarray
    keys: tuple[tuple, ...]
    events: EventSchedule
    peers: tuple[int, ...]
    net: frozenset[int]
    stages: tuple[tuple[str, tuple[int, ...]], ...]
    c: int
    folded: bool


def compose_rdh(topo, plan: RdhPlan, rank: int) -> _Rank:
    """INTRA_RDH / INTER_RDH of one rank (the runtime's ``__compose_inter_rdh``, seed 001
    §3, for the inter variant): the fold, the halving and doubling steps, the unfold."""
    R = _Rank(topo, rank, plan)
    op, L = plan.op, plan.L
    me, c = rank, R.c
    ev = R.events
    extra_i = plan.extra_of(c) if not R.folded else None
    extra_rank = plan.group[extra_i] if extra_i is not None else None
    core_rank = R.rank_of_core(c)

    # stages, their neighbour groups and the partners: per rank (rdh_rank)
    # handshake with every partner on this node (EVT_RDH_LOCAL_HANDSHAKE)
    near = list(R.P.near)
    if near:
        ev.add(HANDSHAKE, src=near, dst=near, what="start handshake with the partners on this node")
        R.add(R.P.handshake)

    def sig(evt: E):
        sem = event_sem(evt)
        return lambda r: sem if r != me else None

    full = (0, plan.total)
    if R.folded:  # ---- an extra rank: hand over, get the result back ---------------------------
        g_fold = R.stage("fold")
        if op == EncOpType.ALLGATHER:
            blk = plan.block(R.i)
            t = R.xfer(0, [(me, V_IN)], [(core_rank, V_OUT)], blk)
        else:
            # the core's fold slot, origin 0: same view shape on both ranks
            t = R.xfer(0, [(me, V_IN)], [(core_rank, R.fold_slot())], full)
        ev.add(FOLD_IN, dst=(core_rank,), what="fold: this rank's data to its core partner")
        R.add(R.submit([t], g_fold, Leaf.rdh_copy, FOLD_IN, sig(FOLD_IN)))
        back = plan.block(R.i) if op == EncOpType.REDUCE_SCATTER else full
        ev.add(FOLD_OUT, src=(core_rank,), what="unfold: the result from the core partner")
        R.post_recv(core_rank, back, V_OUT, FOLD_OUT)
        R.add(sync_rows(R.spec(Leaf.mesh_sync, FOLD_OUT), (), [(event_sem(FOLD_OUT), 1)]))
        return R

    # ---- a core rank ----------------------------------------------------------------------------
    # where a core rank keeps its partial sums between halving steps: OUT for an all-reduce,
    # the private WORK area for a reduce-scatter (its OUT holds only its own block)
    storage = R.work() if op == EncOpType.REDUCE_SCATTER else V_OUT
    if op != EncOpType.ALLGATHER:
        # RH: the first send (or the fold reduce fused with it)
        pc0, k0, s0 = plan.rh(c, 0)
        p0 = R.rank_of_core(pc0)
        g_first = R.stage("fold") if extra_rank is not None else R.stage("rh0")
        if extra_rank is not None:
            ev.add(FOLD_IN, src=(extra_rank,), what="fold: the extra rank's input")
            R.post_recv(extra_rank, full, R.fold_slot(), FOLD_IN)
            src = [(me, V_IN), (me, R.fold_slot())]
            vec = [R.xfer(0, src, [(p0, R.slot(0, s0[0]))], s0),
                   R.xfer(1, src, [(me, storage)], k0)]
            # stage "fold": sources in group fold, destinations in group fold + 1 = rh0
            R.consume(R.submit(vec, g_first, Leaf.rdh_copy, FOLD_IN, sig(rh_event(0))),
                      [(event_sem(FOLD_IN), 1)], FOLD_IN)
            partial = storage
        else:
            vec = [R.xfer(0, [(me, V_IN)], [(p0, R.slot(0, s0[0]))], s0)]
            R.add(R.submit(vec, g_first, Leaf.rdh_copy, rh_event(0), sig(rh_event(0))))
            partial = V_IN
        for s in range(L):
            pc, keep, send = plan.rh(c, s)
            ps = R.rank_of_core(pc)
            evt = rh_event(s)
            ev.add(evt, src=(ps,) if keep[1] > keep[0] else (),
                   dst=(ps,) if send[1] > send[0] else (),
                   what=f"recursive halving step {s}: exchange halves with rank {ps}")
            R.post_recv(ps, keep, R.slot(s, keep[0]), evt)
            src = [(me, partial), (me, R.slot(s, keep[0]))]
            grp = R.stage(f"rh{s}")
            if s + 1 < L:
                pn, k1, s1 = plan.rh(c, s + 1)
                pnr = R.rank_of_core(pn)
                vec = [R.xfer(0, src, [(pnr, R.slot(s + 1, s1[0]))], s1),
                       R.xfer(1, src, [(me, storage)], k1)]
                nxt = rh_event(s + 1)
            elif op == EncOpType.REDUCE_SCATTER and extra_rank is not None:
                own, ext = plan.block(plan.nat(c)), plan.block(extra_i)
                vec = [R.xfer(0, src, [(extra_rank, R.out_of(extra_i))], ext),
                       R.xfer(1, src, [(me, V_OUT)], own)]
                nxt = FOLD_OUT
            else:
                vec = [R.xfer(0, src, [(me, V_OUT)], keep)]
                nxt = None
            rows = R.submit(vec, grp, Leaf.rdh_copy, evt, sig(nxt) if nxt is not None
                            else (lambda r: None))
            R.consume(rows, [(event_sem(evt), 1 if keep[1] > keep[0] else 0)], evt)
            partial = storage
        if op == EncOpType.REDUCE_SCATTER:
            if extra_rank is not None:
                ev.add(FOLD_OUT, dst=(extra_rank,), what="unfold: the extra rank's block")
            return R
    else:
        # all-gather: the own block into OUT; a folded core waits for its extra's block
        own = plan.block(R.i)
        R.add(R.submit([R.xfer(0, [(me, V_IN)], [(me, V_OUT)], own)],
                       R.stage("fold"), Leaf.rdh_copy, FOLD_IN, lambda r: None))
        if extra_rank is not None:
            ev.add(FOLD_IN, src=(extra_rank,), what="fold: the extra rank's block")
            R.post_recv(extra_rank, plan.block(extra_i), V_OUT, FOLD_IN)
    # RD: recursive doubling of the super-blocks held
    pending = [(event_sem(FOLD_IN), 1)] if (op == EncOpType.ALLGATHER and
                                            extra_rank is not None) else []
    pend_evt = FOLD_IN
    for k in range(L):
        pc, held, theirs = plan.rd(c, k)
        pk = R.rank_of_core(pc)
        evt = rd_event(k)
        ev.add(evt, src=(pk,) if theirs[1] > theirs[0] else (),
               dst=(pk,) if held[1] > held[0] else (),
               what=f"recursive doubling level {k}: exchange with rank {pk}")
        rows = R.submit([R.xfer(0, [(me, V_OUT)], [(pk, V_OUT)], held)],
                        R.stage(f"rd{k}"), Leaf.rdh_copy, evt, sig(evt), gw=R.gw(1 + k))
        R.consume(rows, pending, pend_evt)
        R.post_recv(pk, theirs, V_OUT, evt)
        pending = [(event_sem(evt), 1 if theirs[1] > theirs[0] else 0)]
        pend_evt = evt
    if extra_rank is not None:
        ev.add(FOLD_OUT, dst=(extra_rank,), what="unfold: the whole output to the extra rank")
        rows = R.submit([R.xfer(0, [(me, V_OUT)], [(extra_rank, V_OUT)], full)],
                        R.stage("unfold"), Leaf.rdh_copy, FOLD_OUT, sig(FOLD_OUT),
                        gw=R.gw(1 + L))
        R.consume(rows, pending, pend_evt)
    else:
        R.consume(IR.empty(0), pending, pend_evt)
    return R


def rdh_views(ctx, tp, rank: int, plan: RdhPlan, keys, elem=None) -> list[BufferView]:
    """The views of ``rank``'s entry for trigger plan ``tp`` (RDH plan ``plan``): IN, OUT, GW,
    then one per recipe of ``keys`` (:class:`_Rank`), an RH slot's origin read through
    ``elem`` when the entry was composed in block units (None: already an element)."""
    trig, mem, d = tp.trigger, ctx.memory, plan.dsize
    views = in_out_views(mem, trig, plan.block(plan.group.index(rank))[0])
    views.append(region_view(mem, "gw", d))
    base = tp.private_offset if plan.private else 0  # the trigger's scratch
    for key in keys:
        kind = key[0]
        if kind == "slot":
            _slot, s, origin = key
            views.append(region_view(mem, "scratch", d, base + plan.slot_off[s],
                                     origin if elem is None else elem[origin]))
        elif kind == "fold":
            views.append(region_view(mem, "scratch", d, base + plan.fold_off))
        elif kind == "work":
            views.append(region_view(mem, "scratch", d, base + plan.work_off))
        elif kind == "gw":
            views.append(region_view(mem, "gw", d, key[1] * plan.total * d))
        else:  # ("out", i)
            views.append(operand_view(mem, trig, trig.dst, plan.block(key[1])[0]))
    return views


def rdh_edges(plan: RdhPlan) -> np.ndarray:
    """The edges of the blocks every range of ``plan`` is a run of: the super-blocks of an
    all-reduce, the natural blocks of a reduce-scatter or all-gather (whose super-blocks are
    runs of natural blocks)."""
    return plan.sb if plan.op == EncOpType.ALLREDUCE else plan.blocks


def rdh_template(topo, plan: RdhPlan, rank: int) -> ComposedRdh:
    """:func:`compose_rdh` of ``rank`` in block units (docs in
    :mod:`nrtrewrite.compose.blockunits`; the blocks of :func:`rdh_edges`), memoised on the
    topology per (group, op, element size, rank): all the composer reads of ``plan`` besides
    the super-block and block edges and the op's element count (which it sees in block units)
    and the scratch offsets (only the views use them)."""
    def make() -> ComposedRdh:
        n = plan.n
        blocks = np.arange(n + 1, dtype=np.int64)
        if plan.op == EncOpType.ALLREDUCE:
            unit = replace(plan, sb=np.arange(plan.m + 1, dtype=np.int64), blocks=blocks,
                           total=plan.m)
        else:  # super-block c starts at the natural block of core rank c
            sb = np.array([plan.nat(c) for c in range(plan.m)] + [n], np.int64)
            unit = replace(plan, sb=sb, blocks=blocks, total=n)
        c = compose_rdh(topo, unit, rank).composed()
        c.ir.flags.writeable = False
        return c
    return topo.cached_for_rank(rank, ("rdh.template", plan.group, plan.op, plan.dsize), make)


def explain_rdh(sel, topo, rank: int | None = None) -> dict:
    """What ``explain`` shows for an RDH selection: the hypercube, the folds and (with a rank)
    its partner and ranges at every step, as :func:`compose_rdh` lowers them: an extra rank's
    fold (its input, or its block for an all-gather, sent on EVT_RDH_LOCAL_PEER_HANDSHAKE) and
    unfold (the result, or its block for a reduce-scatter, received on
    EVT_RDH_AXES_HANDSHAKE_2); its core rank receives that fold first and sends that unfold
    last."""
    group = tuple(sel.group)
    n = len(group)
    dsize = DTYPE_SIZE[sel.dtype]
    elems = sel.op_bytes // dsize
    num = elems // n if sel.op == EncOpType.ALLGATHER else elems
    trig = SimpleNamespace(replica_group=group, op=sel.op, dtype=sel.dtype, num_elements=num,
                           group_size=n)
    plan = plan_rdh(sel.alg, trig, None)
    out = {"algorithm": sel.alg.name, "channel": MESH_CHANNEL, "core_ranks": plan.m,
           "steps": plan.L, "folded": [[group[2 * k + 1], group[2 * k]]
                                       for k in range(plan.extra)],
           "sema_shift_offset": EVENT_SEMA_SHIFT_OFFSET, "sema_mask": EVENT_SEMA_MASK,
           "scratch_bytes": plan.scratch}
    if rank is not None and rank in group:
        i = group.index(rank)
        c, folded = plan.core_of(i)
        def moved(j: int, block_only: EncOpType) -> list[int]:
            """The range a fold (``ALLGATHER``) or unfold (``REDUCE_SCATTER``) moves for
            extra rank ``j``: its block under that op, else the whole op space."""
            return list(plan.block(j)) if sel.op == block_only else [0, plan.total]

        steps = []
        if folded:  # hand the input over, get the result back (compose_rdh's extra rank)
            core_rank = group[plan.nat(c)]
            steps.append({"stage": "fold", "event": FOLD_IN.name, "partner": core_rank,
                          "send": moved(i, EncOpType.ALLGATHER)})
            steps.append({"stage": "unfold", "event": FOLD_OUT.name, "partner": core_rank,
                          "receive": moved(i, EncOpType.REDUCE_SCATTER)})
        else:
            extra_i = plan.extra_of(c)
            if extra_i is not None:  # the extra rank's fold-in comes first
                steps.append({"stage": "fold", "event": FOLD_IN.name, "partner": group[extra_i],
                              "receive": moved(extra_i, EncOpType.ALLGATHER)})
            if sel.op != EncOpType.ALLGATHER:
                for s_ in range(plan.L):
                    pc, keep, send = plan.rh(c, s_)
                    steps.append({"stage": f"rh{s_}", "event": rh_event(s_).name,
                                  "partner": group[plan.nat(pc)], "keep": list(keep),
                                  "send": list(send)})
            if sel.op != EncOpType.REDUCE_SCATTER:
                for k in range(plan.L):
                    pc, held, theirs = plan.rd(c, k)
                    steps.append({"stage": f"rd{k}", "event": rd_event(k).name,
                                  "partner": group[plan.nat(pc)], "send": list(held),
                                  "receive": list(theirs)})
            if extra_i is not None:  # and the result goes back to it last
                steps.append({"stage": "unfold", "event": FOLD_OUT.name,
                              "partner": group[extra_i],
                              "send": moved(extra_i, EncOpType.REDUCE_SCATTER)})
        out["rank"] = {"core": None if folded else c, "steps": steps}
    return out


class _RdhFamily(Algorithm):
    def prepare(self, ctx, trig, sel) -> Prepared:
        sub = sel.legs[0].sub_type if sel.legs else None
        plan = plan_rdh(self.alg, trig, sub)
        group = plan.group
        spans = ctx.topology.spans_nodes(group)
        gw = (plan.L + 2) * plan.total * plan.dsize if spans else 0
        manifest = {
            "channels": [{"channel": MESH_CHANNEL, "order": []}],
            "chunk": {"chunk_size_n": plan.total, "tail_chunk": 0, "pgta": 1, "channels": 1},
            "rdh": {
            "channel": MESH_CHANNEL, "core_ranks": plan.m, "steps": plan.L,
            "folded": [[group[2 * k + 1], group[2 * k]] for k in range(plan.extra)],
            "super_blocks": [[int(a), int(b)] for a, b in zip(plan.sb[:-1], plan.sb[1:])],
            "scratch_bytes": plan.scratch, "private_scratch": plan.private,
            "sema_shift_offset": EVENT_SEMA_SHIFT_OFFSET, "sema_mask": EVENT_SEMA_MASK}}
        return Prepared(scratch_bytes=0 if plan.private else plan.scratch, gw_bytes=gw,
                        manifest=manifest, data=plan,
                        private_scratch_bytes=plan.scratch if plan.private else 0)

    def entries(self, ctx, tp, rank: int) -> list[EntrySpec]:
        plan: RdhPlan = tp.prepared.data
        edges = block_edges(rdh_edges(plan), plan.total, plan.dsize)
        if edges is None:  # composed directly, in the trigger's elements
            R = compose_rdh(ctx.topology, plan, rank).composed()
            ir = R.ir
        else:
            R = rdh_template(ctx.topology, plan, rank)
            ir = rescaled(R.ir, edges)
        views = rdh_views(ctx, tp, rank, plan, R.keys, None if edges is None else edges.tolist())
        info = {"events": R.events.to_json(),
                "neighbor_groups": [{"stage": nm, "ranks": list(g)} for nm, g in R.stages],
                "core": None if R.folded else R.c, "folded_into": plan.group[plan.nat(R.c)]
                if R.folded else None,
                "channels": {MESH_CHANNEL: {"peers": list(R.peers[1:]),
                                            "network_peers": sorted(R.net)}},
                "phase_names": PHASE_NAMES}
        mesh_entry = self.alg == EncAlgType.INTRA_RDH
        return [EntrySpec(
            leg="flat", alg=self.alg, ir=ir, views=views, gw_view=V_GW, peers=list(R.peers),
            num_active_channels=1, groups=1,
            algo_sub_type=int(plan.sub_type) if mesh_entry and plan.sub_type is not None else 0,
            sema_shift_offset=EVENT_SEMA_SHIFT_OFFSET if mesh_entry else None,
            sema_mask=EVENT_SEMA_MASK if mesh_entry else None, info=info)]


class IntraRdhAlgorithm(_RdhFamily):
    """INTRA_RDH: RDH inside a node (a mesh entry: SPAD overlay, algo_sub_type)."""

    alg = EncAlgType.INTRA_RDH


class InterRdhAlgorithm(_RdhFamily):
    """INTER_RDH: RDH across nodes (a metaring entry: channel_list), through the net proxy."""

    alg = EncAlgType.INTER_RDH


INTRA_RDH = register(IntraRdhAlgorithm())
INTER_RDH = register(InterRdhAlgorithm())

__all__ = ["INTER_RDH", "INTRA_RDH", "RdhPlan", "compose_rdh", "plan_rdh"]
