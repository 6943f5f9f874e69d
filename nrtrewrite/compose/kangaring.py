"""KANGARING: the ring of primaries with secondaries folded into every step (design; the seeds
leave ``nccl_setup_alg_kangaring_info`` and the kangaring composers' bodies OPEN: seed 001
§4 (Considerations)'s ``__compose_allreduce_channel_kangaring`` and seed 000 §5.4's
``__compose_redsct_channel_kangaring`` are :func:`kangaring_ir` over
:func:`_kangaring_template`, one op for all three).

Sources: seed 000 §1.4 (intra-only), §2.2 (cross-die peer = s-engine ^ 2), §5.4 (the fork:
``KANGARING_NR1W`` = 2 before every kangaring reduce call, ``RING_2R1W`` = 0 for the ring);
seed 003 §3-4 (``direct_reduce_send_kangaring``, ``__direct_fetch_send`` and its flags and
assertions, ``addr_neigh_tuple_t``); aws-neuron-sdk intranode-collective-comm.rst
"KangaRing" (primaries move and reduce, secondaries sit idle; reduce-scatter reduces the
received partial, the own chunk and the secondary's chunk in one 3R1W; all-gather duplicates
each received chunk to the secondary and downstream, 1R2W); FINDINGS §4 (the ring channel
config's ``kring_peer_semas {mine, peers[3]}``, ``kangaring_num_peers`` 1 or 3).

The paths (:func:`nrtrewrite.topology.rings.kangaring_paths`, docs/TOPOLOGY.md §4) give every
channel *units* (a primary and its 1 or 3 secondaries: PEER_RMTV, PEER_RMTV2, PEER_LOCAL)
and the cycle of primaries.  docs/DESIGN.md "Kangaring" describes the schedule; in short, per
channel and chunk group the primary runs the ring's step template over the cycle of units
(``rank_n`` = number of units), and each unit step expands to one leg per member position of
the unit (every member keeps its own chunk position, so the layout is the ring's):

==========================  =========================================================
ring leaf                   kangaring leg of the primary
==========================  =========================================================
send (AR, RS)               ``direct_reduce_send_kangaring``: CCE of IN on self + every
                            secondary (the addr_neigh_tuple_t vector) -> RECV of next
recv_reduce_send            CCE of RECV + IN on self and secondaries -> RECV of next
recv_reduce_copy            the same CCE -> OUT of self and every secondary (AR) or OUT of
                            the position's owner (RS)
direct_copy_send            OUT -> OUT of next
direct_recv_send            OUT -> OUT of next and of every secondary (duplication)
direct_recv                 OUT -> OUT of every secondary (the last chunk: no forward)
send (AG)                   IN of the member -> OUT of next, self and every secondary
==========================  =========================================================

Secondaries run no data leg.  Per channel each rank owns one extra semaphore, the runtime's
``kring_peer_semas.mine`` (id :func:`kangaring_sem`); ``peers[3]`` are the routed addresses
of the unit's other ranks' ``mine``.  A secondary first *posts* (``peer_post``: +1 on its
primary's ``mine``: its input is in place and its output may be written), then waits
(``peer_wait``) its own ``mine`` >= the number of its primary's legs that read or wrote its
memory (each such leg adds 1 there when it completes), so its entry completes only when its
output is final and its input no longer read.  The primary's first leg waits its ``mine``
>= the number of posting secondaries before touching their memory.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from nrtrewrite.apoverlap import operands_may_share
from nrtrewrite.codes import (
    AluOp, EdgeLocality, EncAlgType, EncdNeigh, EncOpType, ReductionType,
)
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.algorithm import Algorithm, EntrySpec, Prepared, register
from nrtrewrite.compose.chunking import io_dtype_size
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.compose.ring import H0, PHASE_ALL_GATHER, PHASE_REDUCE_SCATTER, template_array
from nrtrewrite.compose.segments import (
    FirstSeen, Layout, PeerTable, ViewTable, block_segments, interleaved_layout, segmented_layout,
)
from nrtrewrite.compose.views import operand_view, region_view
from nrtrewrite.emit.address import SEM_RECV, channel_sem
from nrtrewrite.errors import LimitError, LoweringError
from nrtrewrite.topology.rings import KangaringChannel, kangaring_paths

#: First semaphore id of the kangaring peer semaphores: channel c's ``kring_peer_semas.mine``
#: is ``KANGARING_SEM_BASE + c`` (after the 32 ring channels' 16..143, before the mesh event
#: window at 192; docs/FORMATS.md §7).  One per channel (NEC_MAX_CHANNELS = 32): 144..175;
#: 176..191 are the entry handshake's (nrtrewrite.entryslots.ENTRY_POST_SEMS).
KANGARING_SEM_BASE = 144
KANGARING_SEM_LIMIT = 176

#: Sync leaves of the kangaring (legs.bin leaf codes, docs/FORMATS.md §3).
PEER_POST = int(Leaf.peer_post)
PEER_WAIT = int(Leaf.peer_wait)

NR1W = int(ReductionType.KANGARING_NR1W)


def kangaring_sem(channel: int) -> int:
    """The ``kring_peer_semas.mine`` semaphore id of channel ``channel``."""
    sem = KANGARING_SEM_BASE + channel
    if sem >= KANGARING_SEM_LIMIT:
        raise LimitError(f"kangaring channel {channel} needs semaphore {sem}, beyond the "
                         f"kangaring block {KANGARING_SEM_BASE}..{KANGARING_SEM_LIMIT - 1}")
    return sem


# ---------------------------------------------------------------------------
# __direct_fetch_send (seed 003 §4): the flags, the assertions, the addr_neigh_tuple_t vector.

@dataclass(frozen=True)
class FetchFlags:
    """The boolean flags of ``enc_primitive::__direct_fetch_send`` (seed 003 §4)."""

    #: the unit's peers take part (fan-in of a reduce, fan-out of a copy)
    send_to_peers: bool = False
    reverse_self_and_peer: bool = False  # swap self and the first peer in the tuple vector
    read_from_gw: bool = False  # the source is this rank's gateway buffer
    write_to_gw: bool = False  # the destination is this rank's gateway buffer (net next hop)
    skip_data_transfer: bool = False  # sync only: no DMA
    use_channel_buffer: bool = False  # the source is the channel buffer (RECV), not OUT


@dataclass(frozen=True)
class AddrNeigh:
    """``addr_neigh_tuple_t`` {dma_addr_t addr @0, encd_neigh_t neigh @8}: a buffer (view) on a
    peer (peer-table index) and the encd_neigh that routes it."""

    view: int
    peer: int
    neigh: EncdNeigh


@dataclass(frozen=True)
class FetchPeer:
    """One of the unit's peers as ``__direct_fetch_send`` sees it."""

    rank: int
    neigh: EncdNeigh
    output_shared_virtual_scratchpad: bool = False


@dataclass(frozen=True)
class Fetch:
    """What one ``__direct_fetch_send`` call moves: sources (reduced when ``reduce``) and
    destinations, as addr_neigh_tuple_t vectors."""

    sources: tuple[AddrNeigh, ...]
    dests: tuple[AddrNeigh, ...]
    reduce: bool


def direct_fetch_send(flags: FetchFlags, *, src: AddrNeigh | None, dst: AddrNeigh | None,
                      peers: list[FetchPeer], peer_bufs: list[AddrNeigh], reduce: bool,
                      is_next_net: bool, gw: AddrNeigh | None = None,
                      channel_buffer: AddrNeigh | None = None) -> Fetch:
    """``enc_primitive::__direct_fetch_send`` (seed 003 §4) as a pure function.

    ``src`` / ``dst`` are the leaf's own source and destination; ``peer_bufs`` the same buffer
    on each peer (sources for a reduce fan-in, ``direct_reduce_send_kangaring``; extra
    destinations for a copy fan-out, the all-gather duplication).  The runtime's assertions
    are checked and raise :class:`LoweringError` (a load-time assert in libnrt):

    * ``!send_to_peers || !is_next_net`` (enc_primitive.cc:0x3FB): a peer fan-out and a
      network next hop are exclusive on one step;
    * ``!peers[0].output_shared_virtual_scratchpad`` (0x404);
    * ``peers[1].neigh``, ``peers[2].neigh`` in {PEER_RMTV2, PEER_LOCAL} (0x421, 0x429).
    """
    if flags.send_to_peers and is_next_net:
        raise LoweringError("__direct_fetch_send: send_to_peers with a network next hop "
                            "(assert !send_to_peers || !is_next_net, enc_primitive.cc:0x3FB): "
                            "a peer fan-out and a net next hop are exclusive on one step")
    if flags.write_to_gw != is_next_net and dst is not None and not flags.skip_data_transfer:
        raise LoweringError("__direct_fetch_send: write_to_gw must be set exactly when the next "
                            "hop is across the network (the gateway stages net sends)")
    if flags.send_to_peers:
        if not peers:
            raise LoweringError("__direct_fetch_send: send_to_peers without peers")
        if peers[0].output_shared_virtual_scratchpad:
            raise LoweringError("__direct_fetch_send: peers[0] has an output shared virtual "
                                "scratchpad (assert at enc_primitive.cc:0x404)")
        for i in (1, 2):
            if i < len(peers) and peers[i].neigh not in (EncdNeigh.ENCD_NEIGH_PEER_RMTV2,
                                                         EncdNeigh.ENCD_NEIGH_PEER_LOCAL):
                raise LoweringError(f"__direct_fetch_send: peers[{i}].neigh must be PEER_RMTV2 "
                                    f"or PEER_LOCAL, not {peers[i].neigh.name} "
                                    f"(enc_primitive.cc:{0x421 if i == 1 else 0x429:#x})")
        if len(peer_bufs) != len(peers):
            raise LoweringError("__direct_fetch_send: one buffer per peer")
    if flags.skip_data_transfer:
        return Fetch((), (), False)
    if flags.read_from_gw:
        src = gw
    elif flags.use_channel_buffer:
        src = channel_buffer
    if flags.send_to_peers and reduce:
        tuples = [src, *peer_bufs]  # {self LOCAL, PEER_RMTV, PEER_RMTV2, PEER_LOCAL}
        if flags.reverse_self_and_peer and len(tuples) > 1:
            tuples[0], tuples[1] = tuples[1], tuples[0]
        return Fetch(tuple(tuples), (dst,) if dst is not None else (), True)
    # otherwise a copy (seed 003 §4: "else if !skip_data_transfer: encd_dma_copy(dst, src)"),
    # to the peers' buffers too when send_to_peers (the all-gather duplication)
    dests = ([dst] if dst is not None else []) + (list(peer_bufs) if flags.send_to_peers else [])
    return Fetch((src,) if src is not None else (), tuple(dests), False)


# ---------------------------------------------------------------------------
# The plan.

@dataclass
class KangaringPlan:
    """Rank-independent decisions of one kangaring collective over one group."""

    op: EncOpType
    group: tuple[int, ...]  # members in position order
    group_index: dict[int, int]
    channel_ids: list[int]  # physical channel ids, layout order
    channels: dict[int, KangaringChannel]  # physical id -> paths
    layout: Layout
    host_cc: bool = False
    #: the output shares the input's bytes: an all-gather whose input already sits in its
    #: output (the member's own block is not copied again), or a reduce-scatter whose OUT is
    #: the first block of its IN (a unit step's legs go in group-position order: _one_group)
    inplace: bool = False
    _touches: dict = field(default_factory=dict, repr=False)

    def manifest(self) -> dict:
        return {
            "channels": [{"channel": c, "order": list(self.channels[c].primaries)}
                         for c in self.channel_ids],
            "chunk": {"chunk_size_n": self.layout.plan.chunk,
                      "tail_chunk": self.layout.plan.tail_chunk,
                      "pgta": self.layout.groups, "channels": self.layout.channels},
            "kangaring": [{"channel": c, "logical_path": list(self.channels[c].logical_path),
                           "units": [list(u) for u in self.channels[c].units],
                           "duplicate": self.channels[c].duplicate}
                          for c in self.channel_ids],
        }

    def group_plan(self) -> tuple[tuple, Callable[[], dict]]:
        """The plan as a HIER leg's manifest states it (docs/FORMATS.md §1.1 ``plans``):
        :meth:`manifest` with every rank (ring orders, logical paths, units) as its position
        in the group; (a hashable key, the record's maker)."""
        pos = self.group_index.__getitem__
        chans = tuple((c, tuple(map(pos, kc.primaries)), tuple(map(pos, kc.logical_path)),
                       tuple(tuple(map(pos, u)) for u in kc.units), kc.duplicate)
                      for c in self.channel_ids for kc in (self.channels[c],))
        chunk = (self.layout.plan.chunk, self.layout.plan.tail_chunk, self.layout.groups,
                 self.layout.channels)

        def record() -> dict:
            return {"channels": [{"channel": c, "order": order} for c, order, *_ in chans],
                    "chunk": dict(zip(("chunk_size_n", "tail_chunk", "pgta", "channels"), chunk)),
                    "kangaring": [{"channel": c, "logical_path": path, "units": units,
                                   "duplicate": dup} for c, _o, path, units, dup in chans]}
        return ("kangaring", chans, chunk), record


def plan_kangaring(topo, op: EncOpType, group, n_channels: int, layout_of, *,
                   channel_base: int = 0, host_cc: bool = False,
                   inplace: bool = False) -> KangaringPlan:
    """Paths per channel (topology), then the layout over the group's positions."""
    group = tuple(group)
    paths = kangaring_paths(topo, group, max(1, n_channels))
    layout = layout_of(len(paths))
    ids = [channel_base + k for k in range(layout.channels)]
    for c in ids:
        kangaring_sem(c)
        channel_sem(c, SEM_RECV)
    return KangaringPlan(op=op, group=group, group_index={r: i for i, r in enumerate(group)},
                         channel_ids=ids, channels={channel_base + k: paths[k]
                                                    for k in range(layout.channels)},
                         layout=layout, host_cc=host_cc, inplace=inplace)


#: ring leaves whose leg waits for the previous primary / signals the next one
_CONSUMES = frozenset({Leaf.recv_reduce_send, Leaf.recv_reduce_copy, Leaf.recv_reduce_copy_send,
                       Leaf.direct_recv_send, Leaf.direct_recv})
_SENDS = frozenset({Leaf.send, Leaf.recv_reduce_send, Leaf.recv_reduce_copy_send,
                    Leaf.direct_copy_send, Leaf.direct_recv_send})

_NEIGHS = (EncdNeigh.ENCD_NEIGH_PEER_RMTV, EncdNeigh.ENCD_NEIGH_PEER_RMTV2,
           EncdNeigh.ENCD_NEIGH_PEER_LOCAL)


def _unit_peers(kc: KangaringChannel, primary: int) -> list[FetchPeer]:
    """The primary's peers in addr_neigh_tuple_t order: PEER_RMTV, PEER_RMTV2, PEER_LOCAL."""
    v = kc.of(primary)
    out = []
    for r, nb in zip((v.peer_rmtv, v.peer_rmtv2, v.peer_local), _NEIGHS):
        if r >= 0:
            out.append(FetchPeer(r, nb))
    return out


#: Entries each memo of a channel holds (:func:`_remember`): a rank's lowering finds its
#: unit tables again for every collective of the same op; a lowering of every rank in one
#: process moves on rank by rank, so the memo need not keep the ranks already done.
MEMO_ENTRIES = 64


def _memo(kc: KangaringChannel, kind: str) -> dict:
    return kc.memo.setdefault(kind, {})


def _remember(kc: KangaringChannel, kind: str, key, value) -> None:
    memo = _memo(kc, kind)
    if len(memo) >= MEMO_ENTRIES:  # bounded: start again rather than grow with the ranks
        memo.clear()
    memo[key] = value


class _SymViews(FirstSeen):
    """A view table stand-in for composing a primary's transfer table once per topology:
    ``get`` numbers the (role, member) keys in the order they are first asked.  An entry then
    asks its real :class:`ViewTable` for the same keys in the same order, so its views are
    numbered exactly as if the transfers had been composed against it."""

    __slots__ = ()

    def get(self, role: str, member: int) -> int:
        return self((role, member))


@dataclass(frozen=True)
class _PrimaryStatic:
    """What a primary's legs on one kangaring channel take from the topology alone (memoised
    on the :class:`KangaringChannel`, shared by every collective over the same group)."""

    ui: int  # the primary's unit
    nxt: int
    next_net: bool
    fpeers: tuple[FetchPeer, ...]  # PEER_RMTV, PEER_RMTV2, PEER_LOCAL order
    usize: np.ndarray  # unit -> member count
    unit_table: np.ndarray  # (unit, member index) -> rank
    position: np.ndarray  # rank -> group position
    role_ranks: tuple[int, ...]  # role (SELF_ROLE, NEXT_ROLE, PEER_ROLE0 + k) -> rank
    role_of: np.ndarray  # rank -> its role if a member of the unit, else SELF_ROLE


def _primary_static(kc: KangaringChannel, topo, rank: int, group_index: dict[int, int]
                    ) -> _PrimaryStatic:
    hit = _memo(kc, "primary").get(rank)
    if hit is not None:
        return hit
    units = kc.units
    ui = next(i for i, u in enumerate(units) if u[0] == rank)
    nxt = kc.of(rank).next
    fpeers = tuple(_unit_peers(kc, rank))
    if sorted(p.rank for p in fpeers) != sorted(units[ui][1:]):
        raise LoweringError(f"kangaring channel {kc.channel}: the unit of primary {rank} is "
                            f"{units[ui]}, its peers are {[p.rank for p in fpeers]}")
    usize = np.array([len(u) for u in units], np.int64)
    unit_table = np.zeros((len(units), int(usize.max())), np.int64)
    for i, u in enumerate(units):
        unit_table[i, :len(u)] = u
    position = np.full(int(unit_table.max()) + 1, -1, np.int64)
    for u in units:
        for r in u:
            position[r] = group_index[r]
    role_of = np.full(position.size, SELF_ROLE, np.int64)
    for k, p in enumerate(fpeers):
        role_of[p.rank] = PEER_ROLE0 + k
    for a in (usize, unit_table, position, role_of):
        a.setflags(write=False)
    st = _PrimaryStatic(ui, nxt, topo.locality(rank, nxt) == EdgeLocality.NETWORK, fpeers,
                        usize, unit_table, position,
                        (rank, nxt, *(p.rank for p in fpeers)), role_of)
    _remember(kc, "primary", rank, st)
    return st


#: The roles a primary's transfer table names (as the ranks of its symbolic tables): the
#: primary, the next primary, then its unit's secondaries in addr_neigh_tuple_t order.
SELF_ROLE, NEXT_ROLE, PEER_ROLE0 = 0, 1, 2
#: The table's symbolic semaphores: the channel's ``recv_sema`` and ``kring_peer_semas.mine``.
_RECV_SYM, _KR_SYM = 1, 2


@dataclass(frozen=True)
class _Transfers:
    """A primary's transfer table in roles: one row per distinct transfer, with views, peers
    and semaphores symbolic (view fields index ``view_keys``, peer fields ``peer_roles``,
    semaphores are :data:`_RECV_SYM` / :data:`_KR_SYM`)."""

    tab: np.ndarray  # leg IR rows: the _KEY_FIELDS set, the rest defaults
    view_keys: tuple[tuple[str, int], ...]  # (view role, member role), in naming order
    peer_roles: tuple[int, ...]  # peer symbol -> member role
    row_of: np.ndarray  # (leaf, member role) -> table row (-1: no such leg)
    #: rows whose ``kring_peer_semas`` increments (slots a..b, sorted by peer number) need
    #: sorting again once the peers have their entry's numbers: (row, a, b)
    resort: tuple[tuple[int, int, int], ...]
    errors: "_HeldErrors"  # table row -> the LoweringError its transfer raised (a copy)
    #: (field, its used cells, "view" / "peer" / "sem"): what the entry renumbers
    cells: tuple[tuple[str, np.ndarray, str], ...]


class _HeldErrors(Mapping):
    """A role table's refused transfers, table row -> the :class:`LoweringError` its
    transfer raised, each given out as a new copy at every look-up.  The table is the
    process's (:func:`_role_table` is memoized) and ``NrtRewriteError.at`` fills a raised
    error's location in place, only where it is empty: the held object itself, raised for
    one model, would carry that model's trigger and rank into every later model's line
    (until 2026-12-07).  Its reason and attributes are the held error's (``elsewhere``)."""

    def __init__(self, errors: dict[int, LoweringError]):
        self._held = dict(errors)

    def __getitem__(self, row: int) -> LoweringError:
        held = self._held[row]
        err = held.elsewhere(held.where)
        if "__notes__" in err.__dict__:  # (a note added to the copy is the copy's alone)
            err.__notes__ = list(err.__notes__)
        return err

    def __contains__(self, row: object) -> bool:
        return row in self._held

    def __iter__(self) -> Iterator[int]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)


@functools.lru_cache(maxsize=256)
def _role_table(op: EncOpType, inplace: bool, leaves: tuple[int, ...],
                neighs: tuple[EncdNeigh, ...], next_net: bool) -> _Transfers:
    """The transfer table of a primary whose template uses ``leaves`` and whose unit peers
    route as ``neighs``: a pure function of its arguments (no topology), shared by every
    primary, channel, collective and plan of the process with the same op, peers and next
    hop (read-only).

    Every row's transfer depends only on its leaf, and on its member only where the
    member's own block is named (the all-gather's send of a unit member's input, the
    reduce-scatter's copy to the position's owner): one table row per distinct transfer.
    Those members are always the primary's own unit (the ring template names them at chunk
    index 0: :func:`_kangaring_template` checks it), so every view and peer a transfer names is one
    the preamble below names first, in a fixed order: the entry's tables are asked for them
    in that order (:func:`_resolve`).  A transfer ``__direct_fetch_send`` refuses is kept as
    an error, raised only if a leg needs it."""
    views, peers = _SymViews(), PeerTable(SELF_ROLE)
    fpeers = [FetchPeer(PEER_ROLE0 + k, nb) for k, nb in enumerate(neighs)]
    rank, nxt = SELF_ROLE, NEXT_ROLE
    me_p, next_p = 0, peers(nxt)
    sec_p = [peers(p.rank) for p in fpeers]
    v_in, v_out, v_recv = views.get("in", rank), views.get("out", rank), views.get("recv", rank)
    self_in = AddrNeigh(v_in, me_p, EncdNeigh.ENCD_NEIGH_LOCAL)
    self_out = AddrNeigh(v_out, me_p, EncdNeigh.ENCD_NEIGH_LOCAL)
    self_recv = AddrNeigh(v_recv, me_p, EncdNeigh.ENCD_NEIGH_LOCAL)
    next_recv = AddrNeigh(views.get("recv", nxt), next_p, EncdNeigh.ENCD_NEIGH_NEXT)
    next_out = AddrNeigh(views.get("out", nxt), next_p, EncdNeigh.ENCD_NEIGH_NEXT)
    peer_in = [AddrNeigh(views.get("in", p.rank), sp, p.neigh) for p, sp in zip(fpeers, sec_p)]
    peer_out = [AddrNeigh(views.get("out", p.rank), sp, p.neigh) for p, sp in zip(fpeers, sec_p)]
    named = len(views.keys), len(peers.peers)
    gw_flag = dict(write_to_gw=next_net)

    def fetch(leaf: Leaf, member: int) -> Fetch:
        """The transfer of one unit-step leg for member ``member`` of the unit."""
        if op == EncOpType.ALLGATHER and leaf == Leaf.send:  # the unit's own blocks
            mp = peers(member)
            m_in = AddrNeigh(views.get("in", member), mp, EncdNeigh.ENCD_NEIGH_LOCAL)
            f = direct_fetch_send(FetchFlags(send_to_peers=True, **gw_flag), src=m_in,
                                  dst=next_out, peers=fpeers, peer_bufs=peer_out,
                                  reduce=False, is_next_net=next_net)
            unit = (self_out, *f.dests[1:])
            if inplace:  # the member's own block already sits in its output
                unit = tuple(a for a in unit if a.peer != mp)
            return Fetch(f.sources, (f.dests[0], *unit), False)
        if leaf == Leaf.send:  # direct_reduce_send_kangaring: self + peers' IN, CCE, -> next
            return direct_fetch_send(FetchFlags(send_to_peers=True, **gw_flag), src=self_in,
                                     dst=next_recv, peers=fpeers, peer_bufs=peer_in,
                                     reduce=True, is_next_net=next_net)
        if leaf in (Leaf.recv_reduce_send, Leaf.recv_reduce_copy, Leaf.recv_reduce_copy_send):
            srcs = (self_recv, self_in, *peer_in)  # __recv_reduce_write, KANGARING_NR1W
            if leaf == Leaf.recv_reduce_send:
                return Fetch(srcs, (next_recv,), True)
            if op == EncOpType.REDUCE_SCATTER:  # the position's owner keeps the block
                return Fetch(srcs, (AddrNeigh(views.get("out", member), peers(member),
                                              EncdNeigh.ENCD_NEIGH_LOCAL),), True)
            dests = (self_out, *peer_out)
            if leaf == Leaf.recv_reduce_copy_send:
                dests = dests + (next_out,)
            return Fetch(srcs, dests, True)
        if leaf == Leaf.direct_copy_send:
            return direct_fetch_send(FetchFlags(**gw_flag), src=self_out, dst=next_out,
                                     peers=fpeers, peer_bufs=peer_out, reduce=False,
                                     is_next_net=next_net)
        if leaf == Leaf.direct_recv_send:
            return direct_fetch_send(FetchFlags(send_to_peers=True, **gw_flag), src=self_out,
                                     dst=next_out, peers=fpeers, peer_bufs=peer_out,
                                     reduce=False, is_next_net=next_net)
        if leaf == Leaf.direct_recv:  # receive the last chunk, duplicate it to the peers only
            return direct_fetch_send(FetchFlags(send_to_peers=True), src=self_out, dst=None,
                                     peers=fpeers, peer_bufs=peer_out, reduce=False,
                                     is_next_net=False)
        raise LoweringError(f"kangaring has no leg for ring leaf {leaf.name}")

    by_member = _by_member(op)
    members = (SELF_ROLE, *(p.rank for p in fpeers))
    transfers = [(lf, m) for lf in leaves for m in (members if lf in by_member else (None,))]
    secondaries = set(sec_p)
    table, errors = [], {}
    for j, (lf, m) in enumerate(transfers):
        try:
            table.append(_key_row(fetch(Leaf(lf), SELF_ROLE if m is None else m), lf, next_p,
                                  _RECV_SYM, _KR_SYM, secondaries))
        except LoweringError as err:
            errors[j] = err
            table.append(_key_row(Fetch((), (), False), lf, next_p, _RECV_SYM, _KR_SYM, set()))
    if (len(views.keys), len(peers.peers)) != named:
        raise AssertionError("a kangaring transfer named a buffer outside the primary's unit")
    tab = IR.empty(len(table))  # whole leg rows: a gather by row gives every default too
    keyed = np.array(table, _KEY_DTYPE)
    for name in _KEY_FIELDS:
        tab[name] = keyed[name]
    row_of = np.full((max(leaves, default=0) + 1, PEER_ROLE0 + len(fpeers)), -1, np.int64)
    for j, (lf, m) in enumerate(transfers):
        if m is None:
            row_of[lf, :] = j
        else:
            row_of[lf, m] = j
    resort = []
    for j, (n_inc, inc_sem) in enumerate(zip(tab["n_inc"].tolist(), tab["inc_sem"].tolist())):
        slots = [i for i, sem in enumerate(inc_sem[:n_inc]) if sem == _KR_SYM]
        if len(slots) > 1:  # contiguous: _key_row appends them last
            resort.append((j, slots[0], slots[-1] + 1))
    cells = []
    for kind, fields in (("view", _VIEW_FIELDS), ("peer", _PEER_FIELDS), ("sem", _SEM_FIELDS)):
        for name, n in fields:
            used = np.arange(tab[name].shape[1])[None, :] < tab[n][:, None]
            used.setflags(write=False)
            cells.append((name, used, kind))
    for a in (tab, row_of):
        a.setflags(write=False)
    return _Transfers(tab, tuple(views.keys), tuple(peers.peers), row_of, tuple(resort),
                      _HeldErrors(errors), tuple(cells))


def _by_member(op: EncOpType) -> frozenset[int]:
    """The leaves whose transfer names the leg's unit member's own block."""
    if op == EncOpType.ALLGATHER:
        return frozenset({int(Leaf.send)})
    if op == EncOpType.REDUCE_SCATTER:
        return frozenset({int(Leaf.recv_reduce_copy), int(Leaf.recv_reduce_copy_send)})
    return frozenset()


_VIEW_FIELDS = (("src_view", "n_src"), ("dst_view", "n_dst"))
_PEER_FIELDS = (("src_peer", "n_src"), ("dst_peer", "n_dst"), ("inc_peer", "n_inc"))
_SEM_FIELDS = (("wait_sem", "n_wait"), ("inc_sem", "n_inc"))


def _resolve(tr: _Transfers, st: _PrimaryStatic, ch: int, peers: PeerTable,
             views: ViewTable) -> np.ndarray:
    """``tr.tab`` in the entry's numbering on channel ``ch``: its views and peers asked of the
    entry's tables in the order the table first named them, its semaphores the channel's."""
    roles = st.role_ranks
    vmap = np.array([views.get(role, roles[m]) for role, m in tr.view_keys], np.int64)
    pmap = np.array([peers(roles[r]) for r in tr.peer_roles], np.int64)
    maps = {"view": vmap, "peer": pmap,
            "sem": np.array([0, channel_sem(ch, SEM_RECV), kangaring_sem(ch)], np.int64)}
    tab = tr.tab.copy()
    for name, used, kind in tr.cells:  # unused cells stay 0
        col = tab[name]
        col[used] = maps[kind][col[used]]
    inc_peer = tab["inc_peer"]
    for j, a, b in tr.resort:  # the secondaries' increments, by the entry's peer number
        inc_peer[j, a:b] = np.sort(inc_peer[j, a:b])
    return tab


def _primary_legs(kp: KangaringPlan, topo, ch: int, rank: int, peers: PeerTable | None,
                  views: ViewTable | None, *, counts_only: bool = False
                  ) -> tuple[np.ndarray | None, dict[int, int]]:
    """The data legs of primary ``rank`` on physical channel ``ch`` (no sync legs) and, per
    secondary of its unit, how many of them touch that secondary's memory (the count the
    secondary's ``peer_wait`` waits for).  ``counts_only``: the counts, legs ``None`` (the
    tables are not asked)."""
    kc = kp.channels[ch]
    slot = kp.channel_ids.index(ch)
    st = _primary_static(kc, topo, rank, kp.group_index)
    one = _one_group(kc, st, topo, rank, kp.op, kp.host_cc, kp.inplace)
    # template rows x unit members of one chunk group, then x chunk groups x segments
    G, n1 = kp.layout.groups, one.members.size
    e_row, _seg, start, stop = kp.layout.expand(
        np.repeat(np.arange(G, dtype=np.int64), n1), np.full(G * n1, slot, np.int64),
        np.tile(one.pos, G), np.tile(one.tmpl[:, 4], G))
    within = e_row % n1 if G > 1 else e_row
    tr = one.table
    row = one.row[within]
    if tr.errors:  # a leg whose transfer __direct_fetch_send refuses
        for j in np.unique(row).tolist():
            if j in tr.errors:
                raise tr.errors[j]
    rows_per_key = np.bincount(row[stop > start], minlength=len(tr.tab))
    secondaries = [p.rank for p in st.fpeers]
    if counts_only:
        return None, _touch_counts(tr.tab, rows_per_key,
                                   [st.role_ranks[r] for r in tr.peer_roles], _KR_SYM,
                                   secondaries)
    tab = _resolve(tr, st, ch, peers, views)
    touches = _touch_counts(tab, rows_per_key, peers.peers, kangaring_sem(ch), secondaries)
    out = IR.take(tab, row)
    t_e = one.tmpl[within]
    out["channel"] = ch
    out["half"] = t_e[:, 4]
    out["phase"] = t_e[:, 1]
    out["group"] = e_row // n1
    out["step"] = t_e[:, 0]
    out["k"] = one.members[within]
    out["start"] = start
    out["stop"] = stop
    return out, touches


@dataclass(frozen=True)
class _OneGroup:
    """A primary's unit-step legs of one chunk group, before segments: template row fields
    (``tmpl``, its column 4 the half), the unit member each leg is for, its group position,
    and its row of the primary's transfer table."""

    tmpl: np.ndarray
    members: np.ndarray
    pos: np.ndarray
    table: _Transfers  # the primary's transfer table
    row: np.ndarray  # each leg's row of ``table``


def _one_group(kc: KangaringChannel, st: _PrimaryStatic, topo, rank: int, op: EncOpType,
               host_cc: bool, inplace: bool) -> _OneGroup:
    key = (rank, op, host_cc, inplace)
    hit = _memo(kc, "one_group").get(key)
    if hit is not None:
        return hit
    tmpl = _kangaring_template(op, len(kc.units), host_cc)
    unit_of_row = (st.ui + tmpl[:, 3]) % len(kc.units)
    counts = st.usize[unit_of_row]
    r1 = np.repeat(np.arange(tmpl.shape[0], dtype=np.int64), counts)
    m_k = np.arange(r1.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    members = st.unit_table[unit_of_row[r1], m_k]
    if inplace and op == EncOpType.REDUCE_SCATTER:
        # OUT is block 0 of IN on every rank, and the leg for the member at group position
        # 0 reads block 0 of every unit member's IN: in the unit step that holds it, it must
        # run before any leg writes a member's OUT.  Legs of one unit step in ascending group
        # position put it first (the blocks of other positions are read at other unit steps,
        # or by their own leg, which writes what it has just read: docs/DESIGN.md Kangaring)
        by_pos = np.lexsort((st.position[members], r1))
        r1, members = r1[by_pos], members[by_pos]
    t1 = tmpl[r1]
    leaf = t1[:, 2]
    table = _role_table(op, inplace, tuple(sorted(set(leaf.tolist()))),
                        tuple(p.neigh for p in st.fpeers), st.next_net)
    one = _OneGroup(t1, members, st.position[members], table,
                    table.row_of[leaf, st.role_of[members]])
    for a in (one.tmpl, one.members, one.pos, one.row):
        a.setflags(write=False)
    _remember(kc, "one_group", key, one)
    return one


@functools.lru_cache(maxsize=64)
def _kangaring_template(op: EncOpType, units: int, host_cc: bool) -> np.ndarray:
    """The ring's step template over ``units`` units (read-only); the all-gather's send fans
    the own block out to self as well, so its local direct_copy row goes."""
    tmpl = template_array(op, units, host_cc)
    if op == EncOpType.ALLGATHER:
        tmpl = tmpl[tmpl[:, 2] != int(Leaf.direct_copy)]
        tmpl.setflags(write=False)
    by_member = np.isin(tmpl[:, 2], list(_by_member(op)))
    if (tmpl[by_member, 3] % units).any():  # see _role_table
        raise LoweringError(f"kangaring {op.name}: a leg names the block of a member outside "
                            "the primary's unit")
    return tmpl


#: the leg IR fields a kangaring leg's (leaf, member) key decides
_KEY_FIELDS = ("leaf", "n_src", "src_view", "src_peer", "n_dst", "dst_view", "dst_peer",
               "reduce", "reduction_type", "n_wait", "wait_sem", "wait_val",
               "n_inc", "inc_peer", "inc_sem", "inc_val")
_KEY_DTYPE = np.dtype([(name, IR.LEG_IR_DTYPE.fields[name][0]) for name in _KEY_FIELDS])


def _pad(values: list[int], n: int) -> list[int]:
    return values + [0] * (n - len(values))


def _key_row(f: Fetch, lf: int, next_p: int, recv: int, kr: int, secondaries: set[int]) -> tuple:
    """The :data:`_KEY_FIELDS` of a leg moving ``f`` for ring leaf ``lf``: the CCE or copy,
    the wait on the channel's ``recv_sema`` (a leaf that consumes the previous primary's data),
    the increments: the next primary's ``recv_sema`` (a leaf that sends) and the ``mine`` of
    every secondary whose memory the leg touches."""
    leaf_code = Leaf.direct_reduce_send_kangaring if (lf == Leaf.send and f.reduce) else lf
    consumes = Leaf(lf) in _CONSUMES
    incs = [(next_p, recv)] if Leaf(lf) in _SENDS else []
    touched = sorted({a.peer for a in (*f.sources, *f.dests)} & secondaries)
    incs += [(sp, kr) for sp in touched]
    return (int(leaf_code),
            len(f.sources), _pad([a.view for a in f.sources], IR.MAX_SRC),
            _pad([a.peer for a in f.sources], IR.MAX_SRC),
            len(f.dests), _pad([a.view for a in f.dests], IR.MAX_DST),
            _pad([a.peer for a in f.dests], IR.MAX_DST),
            int(f.reduce), NR1W if f.reduce else 0,
            int(consumes), _pad([recv] if consumes else [], IR.MAX_WAIT),
            _pad([1] if consumes else [], IR.MAX_WAIT),
            len(incs), _pad([p for p, _ in incs], IR.MAX_INC),
            _pad([s for _, s in incs], IR.MAX_INC), _pad([1] * len(incs), IR.MAX_INC))


def _touch_counts(tab: np.ndarray, rows_per_key: np.ndarray, peer_ranks, kr: int,
                  secondaries: list[int]) -> dict[int, int]:
    """Secondary rank -> how many of the primary's (non-empty) legs add 1 to its
    ``kring_peer_semas.mine`` (semaphore ``kr``), ordered by increment slot, then by the
    secondary's place in the unit (PEER_RMTV, PEER_RMTV2, PEER_LOCAL)."""
    per_slot: list[dict[int, int]] = [{} for _ in range(IR.MAX_INC)]
    n_inc, inc_sem, inc_peer = (tab[k].tolist() for k in ("n_inc", "inc_sem", "inc_peer"))
    rows = rows_per_key.tolist()
    for j in np.flatnonzero(rows_per_key).tolist():
        for i in range(n_inc[j]):
            if inc_sem[j][i] == kr:
                r = peer_ranks[inc_peer[j][i]]
                per_slot[i][r] = per_slot[i].get(r, 0) + rows[j]
    counts: dict[int, int] = {}
    for slot in per_slot:
        for r in secondaries:
            if r in slot:
                counts[r] = counts.get(r, 0) + slot[r]
    return counts


@functools.lru_cache(maxsize=1024)
def _sync_leg(ch: int, leaf: int, *, wait: tuple[int, int] | None = None,
              inc: tuple[int, int] | None = None, phase: int = PHASE_REDUCE_SCATTER
              ) -> np.ndarray:
    """A one-row leg without data (read-only: shared by every entry that posts or waits
    alike; setting a structured row's fields costs some 8 us, a memo hit well under 1).
    ``phase`` is the op's (schedule's label only: an all-gather's sync legs are in its
    all_gather phase, as its data legs)."""
    row = IR.empty(1)
    row["channel"] = ch
    row["leaf"] = leaf
    row["phase"] = phase
    row["half"] = H0
    row["keep"] = 1  # a leg without data that emit keeps (it drops other empty ranges)
    if wait is not None:
        row["n_wait"] = 1
        row["wait_sem"][0, 0] = wait[0]
        row["wait_val"][0, 0] = wait[1]
    if inc is not None:
        row["n_inc"] = 1
        row["inc_peer"][0, 0] = inc[0]
        row["inc_sem"][0, 0] = inc[1]
        row["inc_val"][0, 0] = 1
    row.setflags(write=False)
    return row


def kangaring_ir(kp: KangaringPlan, topo, rank: int, peers: PeerTable,
                 views: ViewTable) -> tuple[np.ndarray, dict]:
    """The leg IR of ``rank`` on every channel of ``kp`` and the ``schedule`` info (a
    secondary counts its primary's legs: :func:`_counts_of`)."""
    irs, info = [], {}
    phase = PHASE_ALL_GATHER if kp.op == EncOpType.ALLGATHER else PHASE_REDUCE_SCATTER
    for ch in kp.channel_ids:
        kc = kp.channels[ch]
        v = kc.of(rank)
        kr = kangaring_sem(ch)
        if v.is_primary:
            legs, counts = _primary_legs(kp, topo, ch, rank, peers, views)
            peers(v.prev)  # the peer table is symmetric (the entry handshake pairs peers)
            kp._touches.setdefault((ch, rank), counts)
            posting = sum(1 for c in counts.values() if c)
            parts = []
            if posting:
                parts.append(_sync_leg(ch, PEER_WAIT, wait=(kr, posting), phase=phase))
            irs.extend(parts + [legs])
            info[ch] = {**channel_role(kc, rank), "touches": counts}
        else:
            primary = v.next
            m = _counts_of(kp, topo, ch, primary).get(rank, 0)
            if m:
                irs.append(_sync_leg(ch, PEER_POST, inc=(peers(primary), kr), phase=phase))
                irs.append(_sync_leg(ch, PEER_WAIT, wait=(kr, m), phase=phase))
            info[ch] = {**channel_role(kc, rank), "waits_for_legs": m}
    return IR.concat(irs), info


def channel_role(kc: KangaringChannel, rank: int) -> dict:
    """``rank``'s role on kangaring channel ``kc`` as ``schedule`` and ``explain --rank``
    show it: a primary's neighbouring primaries, its unit's peers and its port; a
    secondary's primary (the next hop of its path)."""
    v = kc.of(rank)
    if v.is_primary:
        return {"role": "primary", "prev": v.prev, "next": v.next,
                "peers": {"peer_rmtv": v.peer_rmtv, "peer_rmtv2": v.peer_rmtv2,
                          "peer_local": v.peer_local},
                "next_peer_rmtv": v.next_peer_rmtv, "port": v.port}
    return {"role": "secondary", "primary": v.next}


def _counts_of(kp: KangaringPlan, topo, ch: int, primary: int) -> dict[int, int]:
    """Secondary -> legs of ``primary`` on channel ``ch`` that touch it (a secondary counts
    its primary's legs)."""
    key = (ch, primary)
    if key not in kp._touches:
        _none, kp._touches[key] = _primary_legs(kp, topo, ch, primary, None, None,
                                                counts_only=True)
    return kp._touches[key]


# ---------------------------------------------------------------------------
# The KANGARING algorithm (flat: one entry per trigger).

def trigger_view_factory(ctx, trig):
    """(role, member) -> BufferView for a flat trigger: the standard views of ``member``."""
    memory = ctx.memory
    dsize = io_dtype_size(trig.dtype)
    group = tuple(trig.replica_group)
    index = {r: i for i, r in enumerate(group)}
    count = trig.num_elements // max(1, trig.group_size)

    def factory(role: str, member: int):
        if role == "in":
            origin = index[member] * trig.num_elements if trig.op == EncOpType.ALLGATHER else 0
            return operand_view(memory, trig, trig.src, origin)
        if role == "out" or (role == "recv" and trig.op == EncOpType.ALLGATHER):
            origin = index[member] * count if trig.op == EncOpType.REDUCE_SCATTER else 0
            return operand_view(memory, trig, trig.dst, origin)
        if role == "recv":
            return region_view(memory, "scratch", dsize)
        if role == "gw":
            return region_view(memory, "gw", dsize)
        raise KeyError(role)
    return factory


def trigger_layout(trig, n_channels: int) -> Layout:
    """The trigger's own positions: the ring's chunk layout (interleaved AR, blocks AG/RS)."""
    g = trig.group_size
    if trig.op == EncOpType.ALLREDUCE:
        return interleaved_layout(trig.op, trig.num_elements, g, trig.dtype, n_channels)
    count = trig.num_elements if trig.op == EncOpType.ALLGATHER else trig.num_elements // g
    return segmented_layout(trig.op, block_segments(count, g), trig.dtype, n_channels)


def trigger_kangaring_plan(topo, trig, n_channels: int, *, host_cc: bool = False
                           ) -> KangaringPlan:
    """The plan ``lower`` makes for a flat KANGARING trigger selected with ``n_channels``
    (the paths of that many channels, then as many as the chunk layout keeps); ``explain``
    shows its channels."""
    return plan_kangaring(topo, trig.op, trig.replica_group, n_channels,
                          lambda n: trigger_layout(trig, n), host_cc=host_cc,
                          inplace=(trig.op == EncOpType.REDUCE_SCATTER
                                   and operands_may_share(trig)))


class KangaringAlgorithm(Algorithm):
    """KANGARING over a whole intra-node group: one entry per rank."""

    alg = EncAlgType.KANGARING

    def prepare(self, ctx, trig, sel) -> Prepared:
        if trig.op != EncOpType.ALLGATHER and trig.alu_op not in (None, AluOp.ADD):
            raise LoweringError("KANGARING reduces with SDMA_CCETYPE_ADD (seed 003 §4 "
                                f"direct_reduce_send_kangaring); {trig.alu_op.name} cannot")
        kp = trigger_kangaring_plan(ctx.topology, trig, sel.n_channels,
                                    host_cc=ctx.options.host_cc)
        dsize = io_dtype_size(trig.dtype)
        scratch = 0 if trig.op == EncOpType.ALLGATHER else trig.num_elements * dsize
        return Prepared(scratch_bytes=scratch, gw_bytes=0, manifest=kp.manifest(), data=kp)

    def entries(self, ctx, tp, rank: int) -> list[EntrySpec]:
        kp: KangaringPlan = tp.prepared.data
        trig = tp.trigger
        peers = PeerTable(rank)
        views = ViewTable(trigger_view_factory(ctx, trig))
        views.reserve([("in", rank), ("out", rank), ("recv", rank), ("gw", rank)])
        ir, info = kangaring_ir(kp, ctx.topology, rank, peers, views)
        return [EntrySpec(leg="flat", alg=EncAlgType.KANGARING, ir=ir, views=views.views,
                          gw_view=3, peers=peers.peers, num_active_channels=len(kp.channel_ids),
                          groups=kp.layout.groups, reduction_type=NR1W,
                          info={"channels": info})]


KANGARING = register(KangaringAlgorithm())
