"""Leg layouts, view and peer tables, and the ring composed over a layout.

KANGARING, SINGLE_CYCLE_RING and every leg of a HIER collective compose a collective over a
*group* whose chunk positions do not have to be the trigger's own blocks: a HIER intra
reduce-scatter hands local rank ``j`` the ``j``-th slice of the all-reduce message, a HIER
intra all-gather of an all-gather moves ``node_n`` blocks per position, a HIER inter
all-reduce works on one slice only.  :class:`Layout` says where every
``(chunk group, channel, position, half)`` lives in the *trigger's* element space, so every
leg stays a contiguous element range of the trigger (``legs.bin`` ``elem_start``, the 0xBF
TENSOR3D ``start_addr`` and the simulator's address checks keep their meaning):

* **interleaved** (all-reduce legs): the seed 001 §2 layout of a span ``[offset, offset +
  span)``: ``pgta`` chunk groups of ``rank_n * ch_n * chunk`` elements, position ``pos`` of
  channel ``ch`` at ``g * group_elems + (rank_n * ch + pos) * chunk`` (exactly the ring's
  :class:`~nrtrewrite.compose.chunking.ChunkPlan` shifted by ``offset``);
* **segmented** (all-gather and reduce-scatter legs): position ``pos`` owns a list of
  segments ``[lo, hi)`` (a block, or several blocks); every segment is cut like a ring
  block: groups of ``ch_n * chunk``, channel ``ch`` at ``g * ch_n * chunk + ch * chunk``,
  clamped to the segment.  All segments share one chunk size (from the longest), so a
  ``(group, channel, position, half, segment)`` names the same range on every rank and an
  empty one is empty everywhere (senders and receivers skip the same legs).

The view table and peer table hand out the indices the leg IR uses
(:mod:`nrtrewrite.compose.ir`): a view is asked for by ``(role, member)`` (a role such as
``"in"``, ``"out"``, ``"recv"``, ``"gw"`` and the rank whose copy of the buffer it maps, since
an all-gather input or a reduce-scatter output has a per-rank origin), a peer by rank.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import chain
from typing import Callable, Sequence

import numpy as np

from nrtrewrite.codes import DType, EncOpType
from nrtrewrite.compose.chunking import ChunkPlan, set_dynamic_chunk_size
from nrtrewrite.emit.buffers import BufferView

Segment = tuple[int, int]


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner index, index within owner) for repeat counts."""
    counts = np.asarray(counts, dtype=np.int64)
    first = np.cumsum(counts) - counts
    owner = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    within = np.arange(owner.size, dtype=np.int64) - first[owner] if owner.size else owner
    return owner, within


@dataclass(frozen=True)
class Layout:
    """Where each (group, channel, position, half[, segment]) of a leg lives (module doc)."""

    op: EncOpType  # the leg's collective
    plan: ChunkPlan  # chunk size, chunk groups (pgta), active channels, tail chunk
    offset: int = 0  # interleaved: first element of the span
    segments: tuple[tuple[Segment, ...], ...] = ()  # segmented: per position

    @property
    def rank_n(self) -> int:
        return self.plan.rank_n

    @property
    def interleaved(self) -> bool:
        return not self.plan.blocks

    @property
    def groups(self) -> int:
        return self.plan.groups

    @property
    def channels(self) -> int:
        return self.plan.channels

    def _segment_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(segments per position, (position, segment) -> first element, -> end), built once
        per layout (read-only arrays)."""
        tables = self.__dict__.get("_tables")
        if tables is None:
            nseg = np.fromiter(map(len, self.segments), np.int64, len(self.segments))
            # every segment's bounds in one array, in (position, index in position) order
            flat = np.fromiter(chain.from_iterable(chain.from_iterable(self.segments)),
                               np.int64, 2 * int(nseg.sum())).reshape(-1, 2)
            if nseg.size and nseg.min() == nseg.max() > 0:  # k segments each: a reshape
                k = int(nseg[0])
                lo, hi = (np.ascontiguousarray(flat[:, j].reshape(-1, k)) for j in (0, 1))
            else:  # placed at (position, index in position), 0 beyond a position's own
                width = max(1, int(nseg.max()) if nseg.size else 1)
                lo = np.zeros((len(self.segments), width), np.int64)
                hi = np.zeros((len(self.segments), width), np.int64)
                owner, within = _expand(nseg)
                lo[owner, within], hi[owner, within] = flat[:, 0], flat[:, 1]
            for a in (nseg, lo, hi):
                a.setflags(write=False)
            tables = (nseg, lo, hi)
            object.__setattr__(self, "_tables", tables)  # a cache on a frozen dataclass
        return tables

    def expand(self, g, ch, pos, half) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Vectorised ranges of rows (g, ch, pos, half): (row, segment, start, stop).

        Rows keep their order; a segmented position yields one range per segment, in segment
        order (interleaved layouts: one range per row, segment 0)."""
        g = np.asarray(g, np.int64)
        ch = np.asarray(ch, np.int64)
        pos = np.asarray(pos, np.int64)
        half = np.asarray(half, np.int64)
        p = self.plan
        cs = np.asarray(p.chunk_of_group(g), np.int64)
        if self.interleaved:
            base = g * p.group_elems
            start = np.minimum(base + (p.rank_n * ch + pos) * cs + half * (cs // 2), p.span)
            stop = np.minimum(start + cs // 2, p.span)
            row = np.arange(g.size, dtype=np.int64)
            return row, np.zeros(g.size, np.int64), start + self.offset, stop + self.offset
        nseg, lo, hi = self._segment_tables()
        row, seg = _expand(nseg[pos])
        within = (g * p.channels * p.chunk + ch * cs + half * (cs // 2))[row]
        s_lo, s_hi = lo[pos[row], seg], hi[pos[row], seg]
        start = np.minimum(s_lo + within, s_hi)
        stop = np.minimum(start + (cs // 2)[row], s_hi)
        return row, seg, start, stop


@functools.lru_cache(maxsize=4096)
def _memo_chunk_plan(chunk_plan_fn, *args) -> ChunkPlan:
    return chunk_plan_fn(*args)


def _chunk_plan(op: EncOpType, span: int, rank_n: int, dtype: DType,
                max_channels: int) -> ChunkPlan:
    """``set_dynamic_chunk_size`` memoised (the groups of a HIER leg share one plan; a
    ChunkPlan is frozen).  The function itself is part of the key, so a replaced
    ``set_dynamic_chunk_size`` (tests shrink the chunks) never meets the plans of another."""
    return _memo_chunk_plan(set_dynamic_chunk_size, op, span, rank_n, dtype, max_channels)


def interleaved_layout(op: EncOpType, span: int, rank_n: int, dtype: DType, max_channels: int,
                       offset: int = 0) -> Layout:
    """An all-reduce leg over ``[offset, offset + span)`` (seed 001 §2 chunk groups)."""
    plan = _chunk_plan(EncOpType.ALLREDUCE, span, rank_n, dtype, max_channels)
    return Layout(op=op, plan=plan, offset=offset)


def segmented_layout(op: EncOpType, segments: Sequence[Sequence[Segment]], dtype: DType,
                     max_channels: int) -> Layout:
    """An all-gather / reduce-scatter leg whose position ``i`` owns ``segments[i]``."""
    return layout_of_segments(op, tuple(tuple((int(a), int(b)) for a, b in s)
                                        for s in segments), dtype, max_channels)


def layout_of_segments(op: EncOpType, segments: tuple[tuple[Segment, ...], ...], dtype: DType,
                       max_channels: int, longest: int | None = None) -> Layout:
    """:func:`segmented_layout` of segments already in :attr:`Layout.segments` form (a tuple
    per position of ``(int, int)`` tuples), kept as they are (the many per-group layouts of
    a HIER inter leg skip the copy); ``longest``: the longest segment's length, when the
    caller knows it (at least 0)."""
    if longest is None:
        longest = max([b - a for s in segments for a, b in s] + [0])
    plan = _chunk_plan(EncOpType.ALLGATHER, longest, len(segments), dtype, max_channels)
    return Layout(op=op, plan=plan, segments=segments)


def block_segments(count: int, rank_n: int) -> tuple[tuple[Segment, ...], ...]:
    """The trigger's own blocks: position ``b`` owns ``[b * count, (b + 1) * count)``."""
    return tuple(((b * count, (b + 1) * count),) for b in range(rank_n))


def even_split(lo: int, hi: int, parts: int) -> list[Segment]:
    """``[lo, hi)`` cut into ``parts`` consecutive slices, none empty when ``hi - lo >= parts``:
    slices of a multiple of 32 elements (the last one shorter) when the even share
    ``ceil(n / parts)`` is over 32 elements and the aligned slices leave every slice
    non-empty, else sizes differing by at most one (docs/DESIGN.md, the HIER table)."""
    n = hi - lo
    size = -(-n // parts) if parts else 0
    aligned = -(-size // 32) * 32
    if size > 32 and aligned * (parts - 1) < n:
        return [(min(lo + i * aligned, hi), min(lo + (i + 1) * aligned, hi)) for i in range(parts)]
    base, extra = divmod(n, parts)
    out, a = [], lo
    for i in range(parts):
        b = a + base + (1 if i < extra else 0)
        out.append((a, b))
        a = b
    return out


# ---------------------------------------------------------------------------
# View and peer tables.

ViewFactory = Callable[[str, int], BufferView]


class FirstSeen:
    """Numbers keys in the order they are first asked, from ``first``: ``self(key)`` is the
    key's number, ``keys`` the keys in that order (an entry's view recipes, a symbolic view
    table)."""

    __slots__ = ("first", "keys", "index")

    def __init__(self, first: int = 0):
        self.first = first
        self.keys: list = []
        self.index: dict = {}

    def __call__(self, key) -> int:
        v = self.index.get(key)
        if v is None:
            v = self.index[key] = self.first + len(self.keys)
            self.keys.append(key)
        return v


@dataclass
class ViewTable:
    """The view list of one entry, built on demand: ``get(role, member)`` -> view index."""

    factory: ViewFactory
    views: list[BufferView] = field(default_factory=list)
    index: dict[tuple[str, int], int] = field(default_factory=dict)
    by_value: dict[tuple, int] = field(default_factory=dict)

    def get(self, role: str, member: int) -> int:
        key = (role, member)
        if key not in self.index:
            view = self.factory(role, member)
            ident = (view.dsize, view.origin, view.base, view.ap, view.partition_stride,
                     view.anchor)
            if ident not in self.by_value:  # the same mapping is one view
                self.by_value[ident] = len(self.views)
                self.views.append(view)
            self.index[key] = self.by_value[ident]
        return self.index[key]

    def reserve(self, roles: Sequence[tuple[str, int]]) -> list[int]:
        """Views at fixed leading indices (the ring's IN, OUT, RECV, GW = 0..3), in order;
        aliases keep distinct indices so a composer can index by position."""
        out = []
        for role, member in roles:
            view = self.factory(role, member)
            ident = (view.dsize, view.origin, view.base, view.ap, view.partition_stride,
                     view.anchor)
            self.by_value.setdefault(ident, len(self.views))
            self.index[(role, member)] = len(self.views)
            out.append(len(self.views))
            self.views.append(view)
        return out


@dataclass
class PeerTable:
    """The peer list of one entry: peers[0] is the rank itself."""

    rank: int
    peers: list[int] = field(default_factory=list)
    index: dict[int, int] = field(default_factory=dict)

    def __post_init__(self):
        if not self.peers:
            self.peers.append(self.rank)
            self.index[self.rank] = 0

    def __call__(self, r: int) -> int:
        if r not in self.index:
            self.index[r] = len(self.peers)
            self.peers.append(r)
        return self.index[r]


# ---------------------------------------------------------------------------
# The ring over a layout (HIER's RING legs): ring.py's step templates and leg IR, with the
# chunk positions resolved through a Layout instead of the trigger's own ChunkPlan.

@functools.lru_cache(maxsize=256)
def leg_template(op: EncOpType, rank_n: int, host_cc: bool, inplace: bool) -> np.ndarray:
    """``ring.template_array`` of a leg (read-only): ``inplace`` drops the all-gather's local
    ``direct_copy`` of the own block (its input already sits in its output)."""
    from nrtrewrite.compose.leaves import Leaf
    from nrtrewrite.compose.ring import template_array

    tmpl = template_array(op, rank_n, host_cc)
    if inplace:
        tmpl = tmpl[tmpl[:, 2] != int(Leaf.direct_copy)]
        tmpl.setflags(write=False)
    return tmpl


def ring_steps(op: EncOpType, layout: Layout, channel: int, user_ranks: Sequence[int],
               group_index: dict[int, int], *, host_cc: bool = False,
               inplace: bool = False) -> np.ndarray:
    """The ring step rows (``ring.STEP_DTYPE``) of one channel of one rank over ``layout``.

    ``channel`` is the channel's index among the leg's active channels (its layout slot).
    Segmented positions give one row per segment, consecutive.  ``inplace``: the leg's input
    already sits in its output (an all-gather whose input view is its output view), so the
    all-gather's local ``direct_copy`` of the own block is dropped.  Lowering does not call
    it (:func:`ring_leg_ir` builds every channel at once); it is the channel-by-channel
    reference tests/test_ring_leg_ir.py checks :func:`ring_leg_ir` against."""
    from nrtrewrite.compose.ring import STEP_DTYPE

    rank_n = len(user_ranks)
    tmpl = leg_template(op, rank_n, host_cc, inplace)
    t = tmpl.shape[0]
    na = np.asarray(user_ranks, dtype=np.int64)
    pos_of = np.fromiter((group_index[int(r)] for r in user_ranks), np.int64, rank_n)
    G = layout.groups
    g = np.repeat(np.arange(G, dtype=np.int64), t)
    rows = np.tile(np.arange(t, dtype=np.int64), G)
    pos = pos_of[tmpl[rows, 3]]
    row, _seg, start, stop = layout.expand(g, np.full(g.size, channel), pos, tmpl[rows, 4])
    out = np.empty(row.size, dtype=STEP_DTYPE)
    src = rows[row]
    out["group"] = g[row]
    out["step"] = tmpl[src, 0]
    out["phase"] = tmpl[src, 1]
    out["leaf"] = tmpl[src, 2]
    out["half"] = tmpl[src, 4]
    out["k"] = na[tmpl[src, 3]]
    out["pos"] = pos[row]
    out["start"] = start
    out["stop"] = stop
    return out


@dataclass(frozen=True)
class RingLegPlan:
    """Rank-independent decisions of one ring leg over one group."""

    group: tuple[int, ...]  # members in position order
    group_index: dict[int, int]
    channel_ids: list[int]  # physical channel ids of the active channels, layout order
    orders: dict[int, tuple[int, ...]]  # physical channel id -> ring order
    layout: Layout
    #: the manifest's ``channels`` when given (shared by the plans of the same rings)
    channels_manifest: tuple[dict, ...] | None = field(default=None, repr=False, compare=False)
    #: (:func:`ring_token`, :func:`positional_rings`) of the rings when given (shared
    #: likewise)
    rings_positional: tuple | None = field(default=None, repr=False, compare=False)

    def manifest(self) -> dict:
        channels = self.channels_manifest
        if channels is None:
            channels = channels_manifest(self.channel_ids, self.orders)
        return {"channels": channels, "chunk": chunk_manifest(self.layout.plan)}

    def group_plan(self) -> tuple[tuple, Callable[[], dict]]:
        """The plan as a HIER leg's manifest states it (docs/FORMATS.md §1.1 ``plans``): its
        ring orders as positions in the group; (a hashable key, the record's maker).  Groups
        whose plans have the same key share one record."""
        token, rings = positional_key(self.rings_positional, self.channel_ids, self.orders,
                                      self.group_index)
        plan = self.layout.plan
        return ("ring", token, chunk_key(plan)), lambda: {"channels": positional_channels(rings),
                                                          "chunk": chunk_manifest(plan)}


def channels_manifest(channel_ids: Sequence[int], orders: dict[int, tuple[int, ...]]
                      ) -> tuple[dict, ...]:
    """A leg plan manifest's ``channels``: each channel id and its ring order."""
    return tuple({"channel": c, "order": orders[c]} for c in channel_ids)


def positional_rings(channel_ids: Sequence[int], orders: dict[int, tuple[int, ...]],
                     positions: dict[int, int]) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """(channel id, its ring order as positions in the group) of each channel: hashable."""
    return tuple((c, tuple(map(positions.__getitem__, orders[c]))) for c in channel_ids)


def positional_key(given: tuple | None, channel_ids: Sequence[int],
                   orders: dict[int, tuple[int, ...]], positions: dict[int, int]
                   ) -> tuple[object, tuple]:
    """(a key standing for the rings, :func:`positional_rings`): ``given`` ((:func:`ring_token`,
    rings), worked out when the plan was made) or, without it, the rings as their own key."""
    if given is not None:
        return given
    rings = positional_rings(channel_ids, orders, positions)
    return rings, rings


def ring_token(topo, rings: tuple) -> int:
    """A small int standing for :func:`positional_rings` value ``rings`` (equal rings, equal
    tokens, per topology): a key that hashes in no time (an intra-node group's rings are
    hundreds of positions)."""
    tokens = topo.cached(("positional_ring_tokens",), dict)
    return tokens.setdefault(rings, len(tokens))


def positional_channels(rings: tuple[tuple[int, tuple[int, ...]], ...]) -> list[dict]:
    """A HIER leg's plan record's ``channels``: each channel id and its ring order as
    positions in the group (docs/FORMATS.md §1.1)."""
    return [{"channel": c, "order": order} for c, order in rings]


@functools.lru_cache(maxsize=4096)
def chunk_key(plan: ChunkPlan) -> tuple[int, int, int, int]:
    """What :func:`chunk_manifest` records of ``plan``, as a key: two groups whose plans
    differ only in what the record leaves out (the span: inter groups of slices 10 and 9
    elements long) share one record (FORMATS §1.1: a leg's plans are distinct)."""
    return plan.chunk, plan.tail_chunk, plan.groups, plan.channels


def chunk_manifest(plan: ChunkPlan) -> dict:
    """A leg plan manifest's ``chunk`` for a layout chunked by ``plan``, memoised (the groups
    of a HIER leg share it): shared, never to be mutated."""
    return {"chunk_size_n": plan.chunk, "tail_chunk": plan.tail_chunk, "pgta": plan.groups,
            "channels": plan.channels}


def group_positions(topo, group: tuple[int, ...]) -> dict[int, int]:
    """rank -> position in ``group``, memoised per topology: shared, never to be mutated."""
    return topo.cached(("group_positions", group), lambda: {r: i for i, r in enumerate(group)})


def plan_ring_leg(topo, group: Sequence[int], n_channels: int,
                  layout_of: Callable[[int], Layout], channel_base: int = 0) -> RingLegPlan:
    """Rings per channel, then the layout for the channels that have a ring.

    The rings (channel ids, orders, for every count of active channels) are memoised per
    (group, channels, base): plans of the same group share them, and never mutate them."""
    group = tuple(group)
    rings, active, positions = topo.cached(("ring_leg_rings", group, n_channels, channel_base),
                                           lambda: _ring_leg_rings(topo, group, n_channels,
                                                                   channel_base))
    layout = layout_of(max(1, rings))
    ids, orders, manifest, positional = active[min(layout.channels, rings)]
    return RingLegPlan(group=group, group_index=positions, channel_ids=ids, orders=orders,
                       layout=layout, channels_manifest=manifest, rings_positional=positional)


def _ring_leg_rings(topo, group: tuple[int, ...], n_channels: int, channel_base: int):
    """(how many channels have a ring, (channel ids, id -> ring order, their manifest, their
    (:func:`ring_token`, :func:`positional_rings`)) of the first ``k`` of them for each
    ``k``, the group's positions) of :func:`plan_ring_leg`."""
    from nrtrewrite.topology.rings import ring_orders

    orders_all = ring_orders(topo, group, n_channels) if len(group) > 1 else [group]
    nonempty = [(channel_base + c, o) for c, o in enumerate(orders_all) if o is not None]
    positions = group_positions(topo, group)
    active = []
    for k in range(len(nonempty) + 1):
        ids, orders = [c for c, _ in nonempty[:k]], dict(nonempty[:k])
        rings = positional_rings(ids, orders, positions)
        active.append((ids, orders, channels_manifest(ids, orders),
                       (ring_token(topo, rings), rings)))
    return len(nonempty), tuple(active), positions


def ring_leg_ir(topo, rp: RingLegPlan, op: EncOpType, rank: int, peers: PeerTable, *,
                host_cc: bool, inplace: bool = False) -> tuple[np.ndarray, dict]:
    """The leg IR of one rank's ring leg (views IN, OUT, RECV, GW at 0..3) and its
    ``schedule`` info.

    The rows are those of :func:`ring_channel_ir` over :func:`ring_steps`, channel after
    channel; they are built for every channel at once: the rows of one chunk group
    (:func:`_ring_leg_group_rows`, memoised) repeated over the chunk groups, and every
    row's element range resolved through the layout in one call."""
    from nrtrewrite.compose import ir as IR
    from nrtrewrite.compose.ring import bookkeeping

    if not rp.channel_ids:
        return IR.concat([]), {}
    orders = tuple(rp.orders[ch] for ch in rp.channel_ids)
    rings, prev_net = _rank_rings(topo, orders, rank)
    peer_ids = tuple(p for ring in rings for p in (peers(ring.next), peers(ring.prev)))
    base = _ring_leg_group_rows(topo, rp, orders, op, rank, peer_ids, host_cc=host_cc,
                                inplace=inplace)
    src, g = repeat_over_groups((base.ir.size // len(rings),) * len(rings),
                                rp.layout.groups)
    row, _seg, start, stop = rp.layout.expand(g, base.slot[src], base.pos[src],
                                              base.half[src])
    out = IR.take(base.ir, src[row])
    out["group"] = g[row]
    out["start"] = start
    out["stop"] = stop
    info = {}
    for ch, ring, net in zip(rp.channel_ids, rings, prev_net):
        prologue, epilogue = bookkeeping(op, net)
        info[ch] = {"prev": ring.prev, "next": ring.next, "user_ranks": list(ring.user_ranks),
                    "prologue": prologue, "epilogue": epilogue}
    return out, info


def _rank_rings(topo, orders: tuple[tuple[int, ...], ...], rank: int):
    """(``enc_ring`` of ``rank`` on each ring order, whether each ring's predecessor is
    across the network), memoised per topology (shared, never to be mutated)."""
    def make():
        from nrtrewrite.codes import EdgeLocality
        from nrtrewrite.topology.rings import enc_ring

        rings = tuple(enc_ring(o, rank) for o in orders)
        return rings, tuple(r.prev != rank and topo.locality(r.prev, rank)
                            == EdgeLocality.NETWORK for r in rings)
    return topo.cached_for_rank(rank, ("ring_leg_rank_rings", orders), make)


@dataclass(frozen=True)
class _GroupRows:
    """One chunk group's leg IR rows of a rank on every channel of a ring leg (channel by
    channel, template order) with ``group``, ``start`` and ``stop`` left 0, and each row's
    layout slot, chunk position and half (read-only arrays)."""

    ir: np.ndarray
    slot: np.ndarray
    pos: np.ndarray
    half: np.ndarray


def _ring_leg_group_rows(topo, rp: RingLegPlan, orders, op: EncOpType, rank: int,
                         peer_ids: tuple[int, ...], *, host_cc: bool,
                         inplace: bool) -> _GroupRows:
    """:func:`ring_channel_ir` of one chunk group on each channel of ``rp``: a function of the
    rings, the rank and its peer numbers only (not of the layout), memoised per topology."""
    def make() -> _GroupRows:
        from nrtrewrite.compose import ir as IR
        from nrtrewrite.compose.ring import STEP_DTYPE, ring_channel_ir

        rings, prev_net = _rank_rings(topo, orders, rank)
        tmpl = leg_template(op, len(rp.group), host_cc, inplace)
        irs, pos = [], []
        for slot, (ch, ring) in enumerate(zip(rp.channel_ids, rings)):
            steps = np.zeros(tmpl.shape[0], STEP_DTYPE)  # as ring_steps gives chunk group 0
            for name, col in (("step", 0), ("phase", 1), ("leaf", 2), ("half", 4)):
                steps[name] = tmpl[:, col]
            steps["k"] = np.asarray(ring.user_ranks, np.int64)[tmpl[:, 3]]
            pos_of = np.array([rp.group_index[r] for r in ring.user_ranks], np.int64)
            steps["pos"] = pos_of[tmpl[:, 3]]
            irs.append(ring_channel_ir(steps, ch, peer_ids[2 * slot], peer_ids[2 * slot + 1],
                                       prev_net[slot]))
            pos.append(steps["pos"].astype(np.int64))
        n = len(rings)
        rows = _GroupRows(ir=IR.concat(irs),
                         slot=np.repeat(np.arange(n, dtype=np.int64), tmpl.shape[0]),
                         pos=np.concatenate(pos), half=np.tile(tmpl[:, 4], n))
        for a in (rows.ir, rows.slot, rows.pos, rows.half):
            a.setflags(write=False)
        return rows
    return topo.cached_for_rank(rank, ("ring_leg_group_rows", rp.group, tuple(rp.channel_ids),
                                       orders, op, peer_ids, host_cc, inplace),
                                make)


@functools.lru_cache(maxsize=1024)
def repeat_over_groups(sizes: tuple[int, ...], groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(source row, chunk group) of the rows of parts of one chunk group's rows (part ``p``
    holds ``sizes[p]`` consecutive source rows) repeated over ``groups`` chunk groups: part
    after part, then group after group, the part's rows in order (read-only arrays)."""
    sizes_a = np.asarray(sizes, np.int64).reshape(-1)
    part, within = _expand(sizes_a * groups)  # within: the row among the part's repeats
    size = sizes_a[part]
    g = within // size
    src = (np.cumsum(sizes_a) - sizes_a)[part] + within % size
    for a in (src, g):
        a.setflags(write=False)
    return src, g
