"""MESH and SINGLE_STEP_MESH: the mesh composers (enc_mesh_primitive over enc_primitive_mesh's
step recorders), as event schedules lowered to the leg IR (docs/DESIGN.md "Mesh and RDH").

Every rank talks to every other rank of its group directly.  Peers fall in groups, as in
``alg_mesh_build_full_mesh``: *intra-group* peers share this rank's device, *inter-group*
peers are on other devices or nodes (a grouped mesh, when the replica group spans devices).
The schedule of one rank (one SPAD entry, one channel):

MESH (all-reduce: reduce-scatter then all-gather through the channel buffer)

====================================  =====================================================
event                                 what
====================================  =====================================================
EVT_LOCAL_HNDSHK / EVT_GLOBAL_HNDSHK  increment every intra-node peer's handshake (same
                                      device: LOCAL, other device: GLOBAL), wait for theirs
EVT_REDUCE_COPY / EVT_REDUCE_COPY_2   scatter: block j of IN to peer j's channel-buffer slot
                                      (``enc_copy_op_params``: one source, per-destination
                                      offsets, self skipped); arrivals counted on REDUCE_COPY
                                      (same device) or REDUCE_COPY_2 (other device / node)
EVT_REDUCE_WRITE                      reduce own IN block + every slot into OUT
                                      (``prepare_reduce_params``)
EVT_INTRA_GRP_BRDCST /                all-gather: the reduced block to every peer's OUT
EVT_INTER_GRP_BRDCST_2                (``enc_copy_op_params`` fan-out), then wait for all
====================================  =====================================================

Reduce-scatter stops after EVT_REDUCE_WRITE (OUT is the rank's block); all-gather copies its
own block into OUT and broadcasts IN (EVT_INTRA_GRP_BRDCST / EVT_INTER_GRP_BRDCST).

SINGLE_STEP_MESH (all-reduce only): handshake; every rank broadcasts its whole input into a
slot of every peer's channel buffer (EVT_INTRA_GRP_BRDCST / EVT_INTER_GRP_BRDCST; a two-rank
group uses EVT_REDUCE_COPY, the runtime's ``t0``); each rank reduces its input and all slots
into OUT (EVT_REDUCE_WRITE; two sources: the 2-reader/1-writer step); EVT_SYNC: each rank
tells every peer it is done reading its channel buffer and waits for all of them.

Handshakes only go to peers on the same node (a handshake carries no data, and the net-proxy
FIFOs only carry data, FORMATS §8).  Transfers to a peer across the network go through the
gateway and the net proxy; the receiver posts a ``post_recv`` leg per transfer and the proxy
increments the receiver's event semaphore (FORMATS §8).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from nrtrewrite.apoverlap import operands_may_share
from nrtrewrite.codes import (
    DTYPE_SIZE, ENC_MESH_CHANNEL_BUF_MAX_SIZE, EdgeLocality, EncAlgMeshType, EncAlgType,
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
    Addr, EncCopyOpParams, NeighborGroups, RowSpec, TransactionInfo, chain_links, copy_rows,
    prepare_reduce_params, recv_rows, reduce_rows, sync_rows,
)
from nrtrewrite.compose.segments import FirstSeen
from nrtrewrite.compose.views import in_out_views, op_elements, region_view
from nrtrewrite.emit.buffers import ViewList
from nrtrewrite.errors import LoweringError

KiB = 1024
#: A rank's mesh channel buffer (codes.ENC_MESH_CHANNEL_BUF_MAX_SIZE).
MESH_CHANNEL_BUF_MAX_SIZE = ENC_MESH_CHANNEL_BUF_MAX_SIZE
#: Bytes per page of the mesh page table (__get_pgt_offset's DMA size; ours).
MESH_DMA_PAGE_BYTES = 64 * KiB
#: nccl_mhandle of a source the net proxy may send from (a registered gateway; ours).
NET_MHANDLE = 1

# standard views of a mesh entry
V_IN, V_OUT, V_GW = 0, 1, 2


def block_bounds(op: EncOpType, num_elements: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Block j of the group's j-th rank: all-reduce splits N evenly (floor(j N / n)),
    reduce-scatter and all-gather use the natural blocks of ``count`` elements."""
    j = np.arange(n + 1, dtype=np.int64)
    if op == EncOpType.ALLREDUCE:
        edges = j * num_elements // n
    elif op == EncOpType.REDUCE_SCATTER:
        edges = j * (num_elements // n)
    else:
        edges = j * num_elements
    return edges[:-1], edges[1:]


def channel_buffer_bytes(alg: EncAlgType, op: EncOpType, num_elements: int, n: int,
                         dsize: int) -> int:
    """Bytes of channel buffer a rank needs: one slot per peer (docs/DESIGN.md)."""
    if n < 2 or op == EncOpType.ALLGATHER:
        return 0
    if alg == EncAlgType.SINGLE_STEP_MESH:
        return (n - 1) * num_elements * dsize
    a, b = block_bounds(op, num_elements, n)
    return (n - 1) * int((b - a).max()) * dsize


@dataclass(frozen=True)
class MeshPlan:
    alg: EncAlgType
    op: EncOpType
    group: tuple[int, ...]
    index: dict[int, int]
    bstart: np.ndarray
    bstop: np.ndarray
    slot_elems: int  # elements per channel-buffer slot
    dsize: int
    sub_type: EncAlgMeshType
    private: bool  # the slots live in the trigger's private scratch (reduce-scatter)
    #: SINGLE_STEP_MESH in place over more than MAX_SRC ranks: its chained reduce adds up in
    #: an accumulator, channel-buffer slot 0 (its first link has read the slot's page), and
    #: only a page's last link writes OUT, the input (:func:`accumulate`)
    acc: bool = False


def slot_of(plan: MeshPlan, sender: int, receiver: int) -> int:
    """The slot of ``sender`` in ``receiver``'s channel buffer: the sender's group index,
    minus one past the receiver's own (n - 1 slots)."""
    i, r = plan.index[sender], plan.index[receiver]
    return i - (1 if i > r else 0)


@dataclass(frozen=True)
class MeshPeers:
    """A rank's peers in its group: a function of (topology, group, rank) only, memoised on
    the topology (:func:`mesh_peers`) and shared by every entry of the group on that rank,
    so never mutated."""

    peers: tuple[int, ...]  # the rank, then the others in group order
    index: dict[int, int]  # rank -> peer index
    same_dev: tuple[int, ...]  # peers on this rank's device
    near: frozenset[int]  # the same, for membership tests
    far: tuple[int, ...]  # the other peers (other devices or nodes), in peer order
    net: frozenset[int]  # peers across the network
    intra: tuple[int, ...]  # peers on this node, in peer order
    handshake: np.ndarray  # the handshake rows (read-only; see _Entry.handshake)


def mesh_peers(topo, group: tuple[int, ...], rank: int) -> MeshPeers:
    """The :class:`MeshPeers` of ``rank`` in ``group`` (memoised per topology)."""
    return topo.cached_for_rank(rank, ("mesh.peers", group),
                                lambda: _mesh_peers(topo, group, rank))


def _mesh_peers(topo, group: tuple[int, ...], rank: int) -> MeshPeers:
    peers = (rank,) + tuple(r for r in group if r != rank)
    loc = {r: topo.locality(rank, r) for r in peers[1:]}
    same_dev = tuple(r for r in peers[1:] if loc[r] == EdgeLocality.SAME_DEVICE)
    net = frozenset(r for r in peers[1:] if loc[r] == EdgeLocality.NETWORK)
    intra = tuple(r for r in peers[1:] if r not in net)
    index = {r: i for i, r in enumerate(peers)}
    other = [r for r in intra if r not in same_dev]
    # phase (informative: `schedule`): the handshake's event, the device's when it has one
    hs = E.EVT_LOCAL_HNDSHK if same_dev else E.EVT_GLOBAL_HNDSHK
    rows = sync_rows(RowSpec(channel=MESH_CHANNEL, leaf=int(Leaf.mesh_sync), phase=int(hs)),
                     [(index[r], event_sem(E.EVT_LOCAL_HNDSHK)) for r in same_dev]
                     + [(index[r], event_sem(E.EVT_GLOBAL_HNDSHK)) for r in other],
                     [(event_sem(E.EVT_LOCAL_HNDSHK), len(same_dev)),
                      (event_sem(E.EVT_GLOBAL_HNDSHK), len(other))]) if intra else IR.empty(0)
    rows.flags.writeable = False
    far = tuple(r for r in peers[1:] if r not in same_dev)
    return MeshPeers(peers, index, same_dev, frozenset(same_dev), far, net, intra, rows)


class _Entry:
    """Builds one rank's mesh entry in the element space of ``plan`` (the trigger's, or block
    units for a template, :func:`mesh_template`): rows, events and the recipes of its views.

    The entry's views are IN, OUT and GW (V_IN, V_OUT, V_GW), then one per recipe in
    ``_view.keys`` (view ``V_GW + 1 + k``), built by :func:`mesh_views` once the trigger's
    addresses are known: ``("cb", slot, origin)`` is channel-buffer slot ``slot`` whose first
    element is ``origin``, ``("gw", k)`` the k-th gateway staging view."""

    def __init__(self, topo, rank: int, plan: MeshPlan):
        self.rank, self.plan = rank, plan
        self.me = plan.index[rank]
        P = self.P = mesh_peers(topo, plan.group, rank)
        self.peers = list(P.peers)
        self._pidx = P.index
        self.same_dev = list(P.same_dev)
        self.near = P.near
        self.net = P.net
        self.intra = P.intra
        self._view = FirstSeen(V_GW + 1)  # view recipe -> view index (``.keys``: in order)
        self.rows: list[np.ndarray] = []  # the IR pieces, in order (steps numbered at the end)
        self.paged: int | None = None  # the piece of the reduce rows (one record per page)
        self.events = EventSchedule()

    # -- tables
    def peer(self, r: int) -> int:
        return self._pidx[r]

    def cb_view(self, slot: int, origin: int) -> int:
        """The view of channel-buffer slot ``slot`` whose first element is ``origin``:
        region_view(memory, "scratch", dsize, cb_base + slot * slot bytes, origin)."""
        return self._view(("cb", slot, origin))

    def cb_views(self, slots, origins) -> list[int]:
        """:meth:`cb_view` of each (slot, origin) pair, in order."""
        return [self._view(("cb", slot, origin)) for slot, origin in zip(slots, origins)]

    def gw_view(self, k: int) -> int:
        """The k-th gateway staging view (k = 0: the entry's default one)."""
        return IR.NO_VIEW if k == 0 else self._view(("gw", k))

    def add(self, rows: np.ndarray) -> None:
        if rows.size:
            self.rows.append(rows)

    def ir(self) -> np.ndarray:
        """The entry's IR: the pieces added, one step per row."""
        ir = IR.concat(self.rows)
        ir["step"] = np.arange(ir.size)
        return ir

    def spec(self, leaf: Leaf, evt, waits=()) -> RowSpec:
        return RowSpec(channel=MESH_CHANNEL, leaf=int(leaf), phase=int(evt), waits=tuple(waits))

    # -- schedule pieces
    def handshake(self) -> None:
        """EVT_LOCAL_HNDSHK (same device) and EVT_GLOBAL_HNDSHK (other devices of the node):
        the rows only depend on the peers (MeshPeers.handshake)."""
        if not self.intra:
            return
        other = [r for r in self.intra if r not in self.near]
        if self.same_dev:
            self.events.add(E.EVT_LOCAL_HNDSHK, src=self.same_dev, dst=self.same_dev,
                            what="handshake with the peers on this device")
        if other:
            self.events.add(E.EVT_GLOBAL_HNDSHK, src=other, dst=other,
                            what="handshake with the node's peers on other devices")
        self.add(self.P.handshake)

    def arrival(self, near: E, far: E):
        """``signal`` of a send: a peer on this device counts on ``near``, others on ``far``."""
        near_sem, far_sem = event_sem(near), event_sem(far)
        return lambda r: near_sem if r in self.near else far_sem

    def send(self, op: EncCopyOpParams, leaf: Leaf, label: E, signal, *, gw_rows: bool = False,
             far_label: E | None = None) -> None:
        """The rows of copy ``op``, each increments its receivers' ``signal(rank)``.  Their
        ``phase`` (informative: ``schedule``) is ``label``, or ``far_label`` for a row whose
        receivers are all off this device (the event they count it on, as ``arrival``)."""
        rows = copy_rows(op, self.spec(leaf, label), self.plan.dsize, 0, self._pidx.__getitem__,
                         signal, net_ranks=self.net)
        to, used = self._destinations(rows)
        if far_label is not None:
            others = used & (to != self.rank)
            near = others & np.isin(to, tuple(self.near))
            rows["phase"][others.any(axis=1) & ~near.any(axis=1)] = int(far_label)
        if gw_rows and self.net:  # each row that stages the same elements for the network: its own gateway
            staged = np.flatnonzero((used & np.isin(to, tuple(self.net))).any(axis=1))
            rows["gw_view"][staged] = [self.gw_view(k) for k in range(staged.size)]
        self.add(rows)

    def _destinations(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ranks of ``rows``' destination slots, and which slots are used."""
        to = np.asarray(self.peers, np.int64)[rows["dst_peer"]]
        return to, np.arange(to.shape[1]) < rows["n_dst"][:, None]

    def post_recvs(self, senders, ranges, view_of, sem: int, label: E) -> None:
        if not self.net:
            return
        recvs = [(a, b, self.peer(s), view_of(s), sem) for s, (a, b) in zip(senders, ranges)
                 if s in self.net and b > a]
        self.add(recv_rows(self.spec(Leaf.post_recv, label), recvs))

    def reduce(self, sources: list[Addr], out: Addr, nbytes: int, waits, label: E) -> None:
        """The reduce of ``nbytes`` from ``sources`` into ``out``: one enc_reduce_op_params
        per DMA page (prepare_reduce_params), their rows one piece (``self.paged``)."""
        pgt = mesh_page_bytes(self.plan.dsize)
        ng = NeighborGroups(((self.rank,),))
        in_txns = [TransactionInfo(a, 0, pgt) for a in sources]
        ops = prepare_reduce_params(self.events.events, int(label), in_txns,
                                    TransactionInfo(out, 0, pgt), nbytes, self.plan.dsize,
                                    lambda _txn: 0)
        rows = reduce_rows(ops, self.spec(Leaf.mesh_reduce, label, waits), self.plan.dsize, ng,
                           0, 0, self.peer)
        if rows.size:
            self.paged = len(self.rows)
        self.add(rows)

    def composed(self) -> ComposedMesh:
        """The entry as composed (no views yet)."""
        paged = None
        if self.paged is not None:
            first = sum(p.size for p in self.rows[:self.paged])
            paged = (first, first + self.rows[self.paged].size)
        return ComposedMesh(self.ir(), paged, tuple(self._view.keys), self.events, self.P)


@dataclass(frozen=True)
class ComposedMesh:
    """One rank's composed mesh entry, views still recipes (:class:`_Entry`): its rows, the
    rows ``[paged[0], paged[1])`` of its reduce (one run of rows per DMA page; None: no
    reduce), the view recipes, the events and the peers.  A template (:func:`mesh_template`)
    is shared by many triggers, so never mutated (its rows are read-only)."""

    ir: np.ndarray
    paged: tuple[int, int] | None
    keys: tuple[tuple, ...]
    events: EventSchedule
    peers: MeshPeers

    @functools.cached_property
    def key_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``keys`` as columns, worked out once per composed entry (a template's serve every
        trigger it is shared by): (a channel-buffer slot?, the slot ``s`` of ``("cb", s,
        origin)`` or the copy ``k`` of ``("gw", k)``, the slot's ``origin`` (0 for gw))."""
        n = len(self.keys)
        is_cb = np.fromiter((key[0] == "cb" for key in self.keys), bool, n)
        num = np.fromiter((key[1] for key in self.keys), np.int64, n)
        origin = np.fromiter((key[2] if key[0] == "cb" else 0 for key in self.keys), np.int64, n)
        for a in (is_cb, num, origin):
            a.setflags(write=False)
        return is_cb, num, origin


def mesh_page_bytes(dsize: int) -> int:
    """The DMA size of a mesh reduce's page tables: MESH_DMA_PAGE_BYTES, whole elements."""
    return MESH_DMA_PAGE_BYTES - MESH_DMA_PAGE_BYTES % dsize


def _copy(s_addr: Addr, ranks, d_addrs, offsets, sizes, skip, net: bool) -> EncCopyOpParams:
    return EncCopyOpParams(src_idx=0, s_addr=s_addr, nccl_mhandle=NET_MHANDLE if net else None,
                           s_offsets=list(offsets), d_addrs=list(d_addrs), d_skip_copy=list(skip),
                           d_ranks=list(ranks), copy_sizes=list(sizes))


def compose_mesh(topo, plan: MeshPlan, rank: int) -> _Entry:
    """MESH: the reduce-scatter / all-gather mesh of one rank (the runtime's mesh composer,
    ``alg_mesh_initializer``'s event schedule, seed 003; the 2-reader / 1-writer step inline
    in ``__compose_allreduce_full_mesh_t0`` is SINGLE_STEP_MESH's two-source
    EVT_REDUCE_WRITE, module docstring)."""
    e = _Entry(topo, rank, plan)
    op, d, G = plan.op, plan.dsize, plan.group
    bs, be = plan.bstart.tolist(), plan.bstop.tolist()  # Python ints: indexed per peer below
    me = e.me
    e.handshake()
    others = list(e.P.peers[1:])  # in group order
    # the peers of an (ordered) subset of the group whose block is not empty
    if bool((plan.bstop > plan.bstart).all()):
        nonempty_of = list
    else:
        nonempty = {r for r in G if be[plan.index[r]] > bs[plan.index[r]]}

        def nonempty_of(ranks):
            return [r for r in ranks if r in nonempty]
    far = list(e.P.far)
    if op in (EncOpType.ALLREDUCE, EncOpType.REDUCE_SCATTER):
        # scatter: block j of IN into slot(me) of peer j (REDUCE_COPY / REDUCE_COPY_2)
        to_near = nonempty_of(e.same_dev)
        to_far = nonempty_of(far)
        mine = be[me] > bs[me]
        from_near = e.same_dev if mine else []
        from_far = far if mine else []
        if to_near or from_near:
            e.events.add(E.EVT_REDUCE_COPY, src=from_near, dst=to_near,
                         what="scatter: IN block j to peer j's channel buffer (same device)")
        if to_far or from_far:
            e.events.add(E.EVT_REDUCE_COPY_2, src=from_far, dst=to_far,
                         what="scatter: IN block j to peer j's channel buffer (other device "
                              "or node)")
        if to_near or to_far:
            # slot_of(plan, rank, G[j]) is me - 1 below me, else me
            slots = [me - 1] * me + [me] * (len(G) - me)
            cp = _copy(Addr(V_IN, 0), G,
                       [Addr(v, a_j) for v, a_j in zip(e.cb_views(slots, bs), bs)],
                       [a_j * d for a_j in bs], [(b_j - a_j) * d for a_j, b_j in zip(bs, be)],
                       [r == rank for r in G], bool(e.net))
            e.send(cp, Leaf.mesh_send, E.EVT_REDUCE_COPY,
                   e.arrival(E.EVT_REDUCE_COPY, E.EVT_REDUCE_COPY_2),
                   far_label=E.EVT_REDUCE_COPY_2)
        if mine:
            a, b = int(bs[me]), int(be[me])
            e.post_recvs(others, [(a, b)] * len(others),
                         lambda s: e.cb_view(slot_of(plan, s, rank), a),
                         event_sem(E.EVT_REDUCE_COPY_2), E.EVT_REDUCE_COPY_2)
            e.events.add(E.EVT_REDUCE_WRITE, src=(rank,), dst=(rank,),
                         what=f"reduce IN block {me} and {len(others)} slot(s) into OUT")
            # slot_of(plan, s, rank) of the others in group order: 0, 1, ..., n - 2
            slots = range(len(others))
            srcs = [Addr(V_IN, a)] + [Addr(v, a) for v in e.cb_views(slots, [a] * len(slots))]
            e.reduce(srcs, Addr(V_OUT, a), (b - a) * d,
                     [(event_sem(E.EVT_REDUCE_COPY), len(from_near)),
                      (event_sem(E.EVT_REDUCE_COPY_2), len(from_far))], E.EVT_REDUCE_WRITE)
    if op == EncOpType.REDUCE_SCATTER:
        return e
    # all-gather: own block to every peer's OUT (INTRA_GRP_BRDCST / INTER_GRP_BRDCST[_2])
    far_evt = E.EVT_INTER_GRP_BRDCST_2 if op == EncOpType.ALLREDUCE else E.EVT_INTER_GRP_BRDCST
    src_view = V_OUT if op == EncOpType.ALLREDUCE else V_IN
    a, b = int(bs[me]), int(be[me])
    if op == EncOpType.ALLGATHER and b > a:
        own = _copy(Addr(V_IN, a), [rank], [Addr(V_OUT, a)], [0], [(b - a) * d], [False], False)
        e.send(own, Leaf.mesh_send, E.EVT_INTRA_GRP_BRDCST, lambda r: None)
    senders = nonempty_of(others)
    near_in = nonempty_of(e.same_dev)
    far_in = nonempty_of(far)
    if b > a and others:
        near_out, far_out = e.same_dev, far
        if near_out or near_in:
            e.events.add(E.EVT_INTRA_GRP_BRDCST, src=near_in, dst=near_out,
                         what="all-gather to / from the peers on this device")
        if far_out or far_in:
            e.events.add(far_evt, src=far_in, dst=far_out,
                         what="all-gather to / from the peers on other devices or nodes")
        bc = _copy(Addr(src_view, a), others, [Addr(V_OUT, a)] * len(others),
                   [0] * len(others), [(b - a) * d] * len(others), [False] * len(others),
                   bool(e.net))
        e.send(bc, Leaf.mesh_send, E.EVT_INTRA_GRP_BRDCST,
               e.arrival(E.EVT_INTRA_GRP_BRDCST, far_evt), gw_rows=True, far_label=far_evt)
    else:
        if near_in:
            e.events.add(E.EVT_INTRA_GRP_BRDCST, src=near_in, what="all-gather arrivals")
        if far_in:
            e.events.add(far_evt, src=far_in, what="all-gather arrivals")
    e.post_recvs(senders, [(int(bs[plan.index[s]]), int(be[plan.index[s]])) for s in senders],
                 lambda s: V_OUT, event_sem(far_evt), far_evt)
    if senders:
        e.add(sync_rows(e.spec(Leaf.mesh_sync, far_evt if far_in else E.EVT_INTRA_GRP_BRDCST),
                        (), [(event_sem(E.EVT_INTRA_GRP_BRDCST), len(near_in)),
                             (event_sem(far_evt), len(far_in))]))
    return e


def compose_single_step_mesh(topo, plan: MeshPlan, rank: int) -> _Entry:
    """SINGLE_STEP_MESH: broadcast the whole input into every peer's channel buffer, reduce
    locally, EVT_SYNC."""
    e = _Entry(topo, rank, plan)
    d, G, N = plan.dsize, plan.group, int(plan.bstop[-1])
    others = [r for r in G if r != rank]
    if e.net:
        raise LoweringError("SINGLE_STEP_MESH needs every peer on this node (its handshake "
                            "and EVT_SYNC carry no data)")
    e.handshake()
    two = len(G) == 2
    near_evt = E.EVT_REDUCE_COPY if two else E.EVT_INTRA_GRP_BRDCST
    far_evt = E.EVT_REDUCE_COPY if two else E.EVT_INTER_GRP_BRDCST
    near = [r for r in others if r in e.near]
    far = [r for r in others if r not in e.near]
    if two:
        e.events.add(near_evt, src=others, dst=others, what="the input to the peer's channel "
                                                            "buffer")
    else:
        if near:
            e.events.add(near_evt, src=near, dst=near, what="the input to every peer on this "
                                                            "device")
        if far:
            e.events.add(far_evt, src=far, dst=far, what="the input to every peer on other "
                                                         "devices")
    bc = _copy(Addr(V_IN, 0), others,
               [Addr(e.cb_view(slot_of(plan, rank, r), 0), 0) for r in others],
               [0] * len(others), [N * d] * len(others), [False] * len(others), False)
    e.send(bc, Leaf.mesh_send, near_evt, e.arrival(near_evt, far_evt), far_label=far_evt)
    e.events.add(E.EVT_REDUCE_WRITE, src=(rank,), dst=(rank,),
                 what=single_step_mesh_reduce_text(len(others), plan.acc))
    # the sources in group order (the rank's IN at its own place among the slots, which hold
    # the other ranks in group order: slot_of), so that every rank adds them in one order and
    # all get the same bits (the seeds fix no order; own input first gave 3 results on 4 ranks)
    me = plan.index[rank]
    slots = [Addr(e.cb_view(k, 0), 0) for k in range(len(others))]
    srcs = slots[:me] + [Addr(V_IN, 0)] + slots[me:]
    if two:
        waits = [(event_sem(near_evt), 1)]
    else:
        waits = [(event_sem(near_evt), len(near)), (event_sem(far_evt), len(far))]
    e.reduce(srcs, Addr(V_OUT, 0), N * d, waits, E.EVT_REDUCE_WRITE)
    if plan.acc:  # the accumulator: slot 0, which every page's first link reads
        accumulate(e.rows[e.paged], len(srcs), e.cb_view(0, 0))
    e.events.add(E.EVT_SYNC, src=others, dst=others,
                 what="done reading the channel buffer: tell every peer, wait for all")
    e.add(sync_rows(e.spec(Leaf.mesh_sync, E.EVT_SYNC),
                    [(e.peer(r), event_sem(E.EVT_SYNC)) for r in others],
                    [(event_sem(E.EVT_SYNC), len(others))]))
    return e


def single_step_mesh_reduce_text(slots: int, acc: bool) -> str:
    """What SINGLE_STEP_MESH's EVT_REDUCE_WRITE does (``schedule``'s event text): the reduce
    of IN and ``slots`` channel-buffer slots into OUT; of more than MAX_SRC sources chained
    per page, through OUT or, ``acc``, through the accumulator in slot 0 (:func:`accumulate`)."""
    links = chain_links(slots + 1)
    if links == 1:
        return f"reduce IN and {slots} slot(s) into OUT"
    if not acc:
        return (f"reduce IN and {slots} slot(s) into OUT in {links} links a page, each after "
                f"the first adding OUT and up to {IR.MAX_SRC - 1} more sources")
    return (f"reduce IN and {slots} slot(s) in {links} links a page: each but the last into "
            f"slot 0 (the accumulator), each after the first adding slot 0 and up to "
            f"{IR.MAX_SRC - 1} more sources, the last into OUT")


def accumulate(rows: np.ndarray, sources: int, acc: int) -> None:
    """Move the chains of the reduce ``rows`` (one chain per DMA page, each record of
    ``sources`` sources: :func:`chain_links` links) off OUT onto view ``acc``, in place:
    every link but a page's last writes ``acc`` instead of OUT, every link but its first
    reads ``acc`` (its source 0, the chain's destination) instead of OUT.  OUT is then
    written once per page, by the link of the page's last sources, so a rank reducing in
    place (OUT is IN) reads its own input, in whichever link it comes, before anything
    overwrites it.  The links, their sources and roundings are the chain's own (a partial is
    rounded to the I/O dtype in ``acc`` as it was in OUT): the bits of the out-of-place
    reduce.  SINGLE_STEP_MESH passes channel-buffer slot 0, a source of every page's first
    link: that link reads the slot's page and writes the same elements (as every later link
    reads and writes ``acc``, and a link through OUT, OUT), no later link reads the peer's
    input it held, and the peer's push into it landed before the reduce's wait is met; the next
    one comes after this rank's EVT_SYNC (docs/DESIGN.md "Mesh and RDH")."""
    chains = rows.reshape(-1, chain_links(sources))  # (a view)
    chains["dst_view"][:, :-1, 0] = acc
    chains["src_view"][:, 1:, 0] = acc


def mesh_views(ctx, tp, rank: int, plan: MeshPlan, c: ComposedMesh, elem=None) -> ViewList:
    """The views of ``rank``'s entry for trigger plan ``tp`` (mesh plan ``plan``): IN, OUT,
    GW, then one per recipe of ``c.keys`` (:class:`_Entry`), a recipe's origin read through
    ``elem`` when the entry was composed in block units (None: already an element).  The
    recipes' views are linear: built as columns (:class:`ViewList`), a few hundred per entry."""
    trig, mem, d = tp.trigger, ctx.memory, plan.dsize
    views = in_out_views(mem, trig, int(plan.bstart[plan.index[rank]]))
    gw = region_view(mem, "gw", d)
    views.append(gw)
    is_cb, num, origin = c.key_columns
    if elem is not None and origin.size:
        origin = np.asarray(elem, np.int64)[origin]
    # channel-buffer slot s at cb0 + s * slot bytes, element ``origin`` first; gateway copy k
    # at k whole operands into the gateway region, element 0 first
    cb0 = (region_view(mem, "scratch", d, tp.private_offset if plan.private else 0).base
           if is_cb.any() else 0)
    base = np.where(is_cb, cb0 + num * (plan.slot_elems * d),
                    gw.base + num * (op_elements(trig) * d))
    return ViewList.concat([ViewList.of(views),
                            ViewList(d, np.where(is_cb, origin, 0), base, base)])


def mesh_template(topo, plan: MeshPlan, rank: int) -> ComposedMesh:
    """:func:`compose_mesh` of ``rank`` in block units (docs in
    :mod:`nrtrewrite.compose.blockunits`), memoised on the topology per (group, op, element
    size, rank): all the composer reads of ``plan`` besides the block bounds (which it sees as
    ``[j, j + 1)``) and the channel-buffer slot size (only the views use it).  Its reduce is
    one page: :func:`_rescaled_mesh` repeats it per page of the trigger's block."""
    def make() -> ComposedMesh:
        n = len(plan.group)
        unit = replace(plan, bstart=np.arange(n, dtype=np.int64),
                       bstop=np.arange(1, n + 1, dtype=np.int64), slot_elems=1)
        c = compose_mesh(topo, unit, rank).composed()
        c.ir.flags.writeable = False
        return c
    return topo.cached_for_rank(rank, ("mesh.template", plan.group, plan.op, plan.dsize), make)


def _rescaled_mesh(t: ComposedMesh, plan: MeshPlan, rank: int, edges: np.ndarray
                   ) -> np.ndarray:
    """The rows of ``rank``'s entry for ``plan`` from its template ``t``: the template's rows
    rescaled to ``edges``, the reduce's rows once per DMA page of the rank's own block.

    prepare_reduce_params gives one record per page of ``mesh_page_bytes`` (the last one
    short), and reduce_rows lowers every record to the same rows but for their element range,
    the waits only on the first row; so page ``p`` is the template's reduce rows over
    ``[a + p * page, min(a + (p + 1) * page, b))`` without waits after the first page."""
    me = plan.index[rank]
    a, b = int(edges[me]), int(edges[me + 1])
    page = mesh_page_bytes(plan.dsize) // plan.dsize  # elements per page
    pages = -(-(b - a) // page)
    if t.paged is None or pages == 1:
        return rescaled(t.ir, edges)
    r0, r1 = t.paged
    k = r1 - r0  # rows per page
    index = np.concatenate([np.arange(r1), np.tile(np.arange(r0, r1), pages - 1),
                            np.arange(r1, t.ir.size)])
    rows = rescaled(t.ir, edges, index)
    reduce = rows[r0:r0 + pages * k]  # (a view)
    first = a + page * np.repeat(np.arange(pages), k)
    reduce["start"] = first
    reduce["stop"] = np.minimum(first + page, b)
    later = reduce[k:]
    later["n_wait"] = 0
    later["wait_sem"] = 0
    later["wait_val"] = 0
    return rows


def explain_mesh(sel, topo, rank: int | None = None) -> dict:
    """What ``explain`` shows for a MESH / SINGLE_STEP_MESH selection (no model needed)."""
    group = tuple(sel.group)
    n = len(group)
    dsize = DTYPE_SIZE[sel.dtype]
    elems = sel.op_bytes // dsize
    num = elems if sel.op != EncOpType.ALLGATHER else elems // max(n, 1)
    cb = channel_buffer_bytes(sel.alg, sel.op, num, n, dsize)
    devs: dict = {}
    for r in group:
        i = topo.info(r)
        devs.setdefault((i.node, i.device), []).append(r)
    sub = sel.legs[0].sub_type if sel.legs else None  # FULL_MESH is 0: test for None
    out = {"algorithm": sel.alg.name, "channel": MESH_CHANNEL,
           "sub_type": sub.name if sub is not None else None,
           "sema_shift_offset": EVENT_SEMA_SHIFT_OFFSET, "sema_mask": EVENT_SEMA_MASK,
           "channel_buffer_bytes": cb,
           "device_groups": [{"node": k[0], "device": k[1], "ranks": v} for k, v in devs.items()]}
    if rank is not None and rank in group:
        me = topo.info(rank)
        out["rank"] = {
            "same_device": [r for r in group if r != rank and topo.info(r).device == me.device
                            and topo.info(r).node == me.node],
            "network": [r for r in group if topo.info(r).node != me.node]}
    return out


def single_step_mesh_accumulates(trig) -> bool:
    """Whether SINGLE_STEP_MESH's reduce of ``trig`` adds up in an accumulator (MeshPlan.acc):
    in place (src and dst may share bytes) over more than ``IR.MAX_SRC`` ranks, where the
    reduce of n sources chains (IR.MAX_SRC sources a link) and a chain through OUT, the
    input, would read in a later link what the first overwrote (until 2026-12-06 ``lower``
    refused it: an end-to-end fuzz found the 9th rank of an in-place 9-rank all-reduce
    adding its own input twice)."""
    return len(trig.replica_group) > IR.MAX_SRC and operands_may_share(trig)


class _MeshFamily(Algorithm):
    #: compose_mesh or compose_single_step_mesh
    compose = staticmethod(compose_mesh)

    def prepare(self, ctx, trig, sel) -> Prepared:
        group = tuple(trig.replica_group)
        n = len(group)
        if n < 2:
            raise LoweringError(f"{self.alg.name} needs at least two ranks")
        if trig.op not in (EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER):
            raise LoweringError(f"{self.alg.name} does not lower {trig.op.name}")
        if self.alg == EncAlgType.SINGLE_STEP_MESH and trig.op != EncOpType.ALLREDUCE:
            raise LoweringError("SINGLE_STEP_MESH is all-reduce only")
        dsize = io_dtype_size(trig.dtype)
        bs, be = block_bounds(trig.op, trig.num_elements, n)
        cb = channel_buffer_bytes(self.alg, trig.op, trig.num_elements, n, dsize)
        if cb > MESH_CHANNEL_BUF_MAX_SIZE:
            raise LoweringError(f"{self.alg.name} needs {cb} bytes of channel buffer per rank, "
                                f"more than ENC_MESH_CHANNEL_BUF_MAX_SIZE "
                                f"({MESH_CHANNEL_BUF_MAX_SIZE})")
        slot = trig.num_elements if self.alg == EncAlgType.SINGLE_STEP_MESH else \
            int((be - bs).max())
        sub = sel.legs[0].sub_type if sel.legs and sel.legs[0].sub_type is not None else \
            EncAlgMeshType.FULL_MESH
        private = trig.op == EncOpType.REDUCE_SCATTER
        acc = single_step_mesh_accumulates(trig) if self.alg == EncAlgType.SINGLE_STEP_MESH \
            else False
        plan = MeshPlan(self.alg, trig.op, group, {r: i for i, r in enumerate(group)}, bs, be,
                        slot, dsize, sub, private, acc)
        spans = ctx.topology.spans_nodes(group)
        # gateway: (1 + ceil(n / MAX_DST)) whole-op copies, one more than the entries stage in
        # (copies 0 .. ceil((n - 1) / MAX_DST) - 1: the scatter and the first broadcast row
        # share copy 0), kept as it is: docs/DESIGN.md "The mesh gateway"
        gw = op_elements(trig) * dsize * (1 + -(-n // IR.MAX_DST)) if spans else 0
        manifest = {
            "channels": [{"channel": MESH_CHANNEL, "order": []}],
            "chunk": {"chunk_size_n": op_elements(trig), "tail_chunk": 0, "pgta": 1,
                      "channels": 1},
            "mesh": {"sub_type": sub.name, "channel": MESH_CHANNEL,
                     "sema_shift_offset": EVENT_SEMA_SHIFT_OFFSET, "sema_mask": EVENT_SEMA_MASK,
                     "channel_buffer_bytes": cb, "private_channel_buffer": private,
                     "blocks": [[int(a), int(b)] for a, b in zip(bs, be)]}}
        # (an accumulator, plan.acc, is channel-buffer slot 0: no scratch of its own)
        return Prepared(scratch_bytes=0 if private else cb, gw_bytes=gw, manifest=manifest,
                        data=plan, private_scratch_bytes=cb if private else 0)

    def composed(self, topo, plan: MeshPlan, rank: int
                 ) -> tuple[ComposedMesh, np.ndarray, np.ndarray | None]:
        """(the composed entry, its rows, the block edges its view recipes' origins are read
        through; None: they are elements)."""
        c = type(self).compose(topo, plan, rank).composed()
        return c, c.ir, None

    def entries(self, ctx, tp, rank: int) -> list[EntrySpec]:
        plan: MeshPlan = tp.prepared.data
        c, ir, elem = self.composed(ctx.topology, plan, rank)
        views = mesh_views(ctx, tp, rank, plan, c, elem)
        P = c.peers
        info = {"events": c.events.to_json(),
                "channels": {MESH_CHANNEL: {"peers": list(P.peers[1:]),
                                            "network_peers": sorted(P.net),
                                            "same_device_peers": list(P.same_dev)}},
                "phase_names": PHASE_NAMES}
        return [EntrySpec(leg="flat", alg=self.alg, ir=ir, views=views, gw_view=V_GW,
                          peers=list(P.peers), num_active_channels=1, groups=1,
                          algo_sub_type=int(plan.sub_type),
                          sema_shift_offset=EVENT_SEMA_SHIFT_OFFSET, sema_mask=EVENT_SEMA_MASK,
                          info=info)]


class MeshAlgorithm(_MeshFamily):
    """MESH: reduce-scatter + all-gather through the mesh channel buffer (one channel)."""

    alg = EncAlgType.MESH
    compose = staticmethod(compose_mesh)

    def composed(self, topo, plan: MeshPlan, rank: int):
        """From the rank's template (:func:`mesh_template`) when the trigger's blocks allow
        (:func:`block_edges`), else composed directly."""
        edges = np.append(plan.bstart, plan.bstop[-1])
        if not np.array_equal(plan.bstart[1:], plan.bstop[:-1]):  # (block_bounds': contiguous)
            edges = None
        else:
            edges = block_edges(edges, int(edges[-1]), plan.dsize)
        if edges is None:
            return super().composed(topo, plan, rank)
        t = mesh_template(topo, plan, rank)
        return t, _rescaled_mesh(t, plan, rank, edges), edges.tolist()


class SingleStepMeshAlgorithm(_MeshFamily):
    """SINGLE_STEP_MESH: everyone's input to everyone, one local reduce."""

    alg = EncAlgType.SINGLE_STEP_MESH
    compose = staticmethod(compose_single_step_mesh)


MESH = register(MeshAlgorithm())
SINGLE_STEP_MESH = register(SingleStepMeshAlgorithm())

__all__ = ["MESH", "SINGLE_STEP_MESH", "MESH_CHANNEL_BUF_MAX_SIZE", "block_bounds",
           "channel_buffer_bytes", "compose_mesh", "compose_single_step_mesh",
           "single_step_mesh_accumulates"]
