"""The default selection's BD gate of every engine (docs/SELECTION.md "The BD gate").

A leg's M2S and S2M BD counts are the u16 fields of its tp_inc_steps record; ``lower``
refuses a leg of more than ``TPINC_MAX_BDS`` of either (emit/legs.py ``_tpinc_steps``).
With an SBUF operand of short rows every contiguous run of its access pattern is a BD, so
any engine's legs may pass the limit.  :func:`worst_leg` composes the engine's legs for
every rank of the group, as ``lower`` does (the engine's ``prepare`` and ``entries``), and
counts each leg's BDs as the emitter does (``_data_records``: a leg with destinations is cut
into tiles of ``tile_elements``; each source and destination stream is one BD a contiguous
run within a tile; a destination across the network stages in the linear gateway, one BD a
tile), without laying out memory or building a record: a run's count depends on its view's
run length and origin only, not on its address.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from nrtrewrite.codes import EdgeLocality
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.ir import NO_VIEW
from nrtrewrite.compose.leaves import leaf_name
from nrtrewrite.emit.tiling import expand, tile_elements
from nrtrewrite.errors import NrtRewriteError


class _Layout:
    """A memory map of every region at offset 0: the composers read addresses from it, the
    BD count reads only run lengths and origins."""

    sbuf_partition_stride = 1 << 16

    def var(self, subgraph, var_id):
        return SimpleNamespace(offset=0)

    def named(self, kind):
        return SimpleNamespace(offset=0)


def _entry_bds(spec, rank: int, topo, hw: int, limit: int | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(leaf, M2S BDs, S2M BDs) of each data leg of one entry (``EntrySpec``) of ``rank``;
    with ``limit``, of those legs only that may need more than ``limit`` BDs of a direction
    (:func:`_may_pass`), in the same order: the others cannot pass it and are not counted."""
    return _entry_legs(spec, rank, topo, hw, limit)[:3]


def _entry_legs(spec, rank: int, topo, hw: int, limit: int | None = None
                ) -> tuple[np.ndarray, ...]:
    """:func:`_entry_bds`'s (leaf, M2S BDs, S2M BDs), then each leg's channel, elements,
    tiles, source and destination streams (what the emitter's refusal of a leg over the
    limit says, ``emit.legs.tpinc_over_text``), its legs in the emitter's order: channel by
    channel (in the order the channels first appear), a channel's in IR order
    (``emit.legs.entry_handshake``; the composers group the rows by channel already)."""
    rows = IR.emitted(spec.ir)
    ch = rows["channel"].astype(np.int64)
    runs = ch[np.flatnonzero(np.concatenate(([True], ch[1:] != ch[:-1])))] if ch.size else ch
    if np.unique(runs).size != runs.size:  # a channel's rows in more than one run
        _, first = np.unique(ch, return_index=True)  # each channel's first row
        rank_of = np.zeros(int(ch.max()) + 1, np.int64)
        rank_of[ch[np.sort(first)]] = np.arange(first.size)
        rows = IR.take(rows, np.argsort(rank_of[ch], kind="stable"))
    length = rows["stop"].astype(np.int64) - rows["start"].astype(np.int64)
    d_n = rows["n_dst"].astype(np.int64)
    data = (d_n > 0) & (length > 0)
    rows, length, d_n = rows[data], length[data], d_n[data]
    empty = np.zeros(0, np.int64)
    if not rows.size:
        return (empty,) * 8
    s_n = rows["n_src"].astype(np.int64)
    views = spec.views
    dsize = views[0].dsize
    run = np.array([v.run_length() or 0 for v in views], np.int64)  # 0: linear
    per_tile = tile_elements(dsize, length, rows["reduce"] != 0, hw_generation=hw)
    tiles = -(-length // per_tile)
    if limit is not None:
        may = _may_pass(length, tiles, s_n, d_n, run, limit)
        if not may.all():
            rows, length, d_n, s_n = rows[may], length[may], d_n[may], s_n[may]
            per_tile, tiles = per_tile[may], tiles[may]
            if not rows.size:
                return (empty,) * 8
    origin = np.array([v.origin for v in views], np.int64)
    net = np.array([r != rank and topo.locality(rank, r) == EdgeLocality.NETWORK
                    for r in spec.peers], bool)
    leg, k, _ = expand(tiles)
    ta = rows["start"].astype(np.int64)[leg] + k * per_tile[leg]
    tb = np.minimum(ta + per_tile[leg], rows["stop"].astype(np.int64)[leg])

    def stream_bds(view: np.ndarray) -> np.ndarray:
        """BDs of one stream a tile, the tile's stream reading or writing ``view``."""
        r, o = run[view], origin[view]
        rr = np.maximum(r, 1)
        return np.where(r > 0, (tb - 1 - o) // rr - (ta - o) // rr + 1, 1)

    gw = rows["gw_view"].astype(np.int64)
    gw = np.where(gw == NO_VIEW, spec.gw_view, gw)
    m2s = np.zeros(leg.size, np.int64)
    s2m = np.zeros(leg.size, np.int64)
    for s in range(int(s_n.max())):
        on = s < s_n[leg]
        if on.any():
            m2s += np.where(on, stream_bds(rows["src_view"][:, s].astype(np.int64)[leg]), 0)
    for s in range(int(d_n.max())):
        on = s < d_n[leg]
        if on.any():
            peer = rows["dst_peer"][:, s].astype(np.int64)
            view = np.where(net[peer], gw, rows["dst_view"][:, s].astype(np.int64))
            s2m += np.where(on, stream_bds(view[leg]), 0)
    n = rows.size
    return (rows["leaf"].astype(np.int64), np.bincount(leg, m2s, n).astype(np.int64),
            np.bincount(leg, s2m, n).astype(np.int64), rows["channel"].astype(np.int64),
            length, tiles, s_n, d_n)


def _may_pass(length: np.ndarray, tiles: np.ndarray, s_n: np.ndarray, d_n: np.ndarray,
              run: np.ndarray, limit: int) -> np.ndarray:
    """Whether each leg (its elements ``length`` in ``tiles`` tiles, ``s_n`` source and
    ``d_n`` destination streams) may need more than ``limit`` BDs of a direction, its views'
    run lengths ``run`` (0: linear).  A stream's BDs in a tile of ``L`` elements of a view of
    runs of ``r`` are the runs the tile meets, at most ``(L - 1) // r + 2`` and at most
    ``L``; over the leg's tiles at most ``min(length, length // r + 2 tiles)`` (a sum of
    floors is at most the floor of the sum), for ``r`` the shortest run of any view; a linear
    view's is one a tile, no more.  A leg whose streams' bound is within ``limit`` cannot
    pass it."""
    pos = run[run > 0]
    per = (np.minimum(length, length // int(pos.min()) + 2 * tiles) if pos.size else tiles)
    return (s_n * per > limit) | (d_n * per > limit)


def worst_leg(trig, sel, topo, limit: int, *, host_cc: bool = False,
              over_only: bool = False) -> tuple[str, int, str]:
    """(leg, count, "M2S" or "S2M") of the first leg of ``trig`` lowered as ``sel`` (its
    engine and legs) that needs more than ``limit`` BDs of one stream direction, ranks in
    ascending order, a rank's legs in entry and program order (the leg ``lower`` names), else of
    the leg that needs the most.  ``host_cc``: composed as ``lower --host-cc`` composes it.
    ``over_only`` (the gate's): a leg whose bound (:func:`_may_pass`) is within ``limit`` is
    not counted, so with none over the answer is of the most among those counted, or
    ``("", 0, "M2S")``; the first leg over ``limit`` and its count are the same."""
    worst = ("", 0, "M2S")
    for leaf, m2s, s2m in _legs(trig, sel, topo, host_cc, limit if over_only else None):
        over = np.flatnonzero((m2s > limit) | (s2m > limit))
        if over.size:
            k = int(over[0])
            m2s_over = m2s[k] > limit
            return (leaf_name(int(leaf[k])), int(m2s[k] if m2s_over else s2m[k]),
                    "M2S" if m2s_over else "S2M")
        for counts, which in ((m2s, "M2S"), (s2m, "S2M")):
            if counts.size and int(counts.max()) > worst[1]:
                k = int(np.argmax(counts))
                worst = (leaf_name(int(leaf[k])), int(counts[k]), which)
    return worst


class OverLeg(NamedTuple):
    """The first leg ``lower`` refuses for more than the limit's BDs of a direction: its
    rank, leaf code, channel, M2S and S2M BDs, elements, tiles, source and destination
    streams (:func:`first_over`)."""

    rank: int
    leaf: int
    channel: int
    m2s: int
    s2m: int
    elements: int
    tiles: int
    s_n: int
    d_n: int

    def text(self) -> str:
        """The emitter's words for the leg (``emit.legs.tpinc_over_text``), without the
        rank ``lower`` names it at."""
        from nrtrewrite.emit.legs import tpinc_over_text
        return tpinc_over_text(*self[1:])


def first_over(trig, sel, topo, limit: int, *, host_cc: bool = False) -> OverLeg | None:
    """The leg ``lower`` refuses first when it lowers ``trig`` as ``sel`` for every rank of
    its group (ranks in ascending order, a rank's entries in order, an entry's legs channel by
    channel: the emitter's), one needing more than ``limit`` M2S or S2M BDs, or None when
    every leg fits: what ``explain`` says ``lower`` refuses a selection the BD gate did not
    count (a forced engine, docs/SELECTION.md "The BD gate")."""
    for rank, legs in _ranked_legs(trig, sel, topo, host_cc, limit):
        if (over := _over(rank, legs, limit)) is not None:
            return over
    return None


def entry_over(spec, rank: int, topo, limit: int) -> OverLeg | None:
    """The leg of one composed entry (``EntrySpec``) of ``rank`` that ``lower`` refuses
    first for more than ``limit`` M2S or S2M BDs (the emitter's order), or None: what
    ``schedule`` says ``lower --rank`` refuses of the entries it shows (a selection the BD
    gate did not count, ``select.bd_uncounted``)."""
    return _over(rank, _entry_legs(spec, rank, topo, topo.platform.hw_generation, limit),
                 limit)


def _over(rank: int, legs: tuple[np.ndarray, ...], limit: int) -> OverLeg | None:
    """The first leg of :func:`_entry_legs`'s ``legs`` of ``rank`` over ``limit``, or None."""
    leaf, m2s, s2m, ch, length, tiles, s_n, d_n = legs
    over = np.flatnonzero((m2s > limit) | (s2m > limit))
    if not over.size:
        return None
    k = int(over[0])
    return OverLeg(rank, int(leaf[k]), int(ch[k]), int(m2s[k]), int(s2m[k]), int(length[k]),
                   int(tiles[k]), int(s_n[k]), int(d_n[k]))


def _legs(trig, sel, topo, host_cc: bool = False, limit: int | None = None):
    """:func:`_entry_bds` (under ``limit``) of every entry of every rank of ``trig``'s group
    lowered as ``sel``, in group and entry order."""
    for _rank, legs in _ranked_legs(trig, sel, topo, host_cc, limit):
        yield legs[:3]


def _ranked_legs(trig, sel, topo, host_cc: bool = False, limit: int | None = None):
    """(rank, :func:`_entry_legs` under ``limit``) of every entry of every rank of
    ``trig``'s group lowered as ``sel``, in ascending rank and entry order."""
    # (imported here: select imports this module when an SBUF trigger is gated only)
    from nrtrewrite.compose import algorithm as algorithms
    from nrtrewrite.lower import LowerOptions, TriggerPlan

    algorithm = algorithms.get(sel.alg)
    ctx = SimpleNamespace(topology=topo, options=LowerOptions(host_cc=host_cc), memory=_Layout())
    group = tuple(trig.replica_group)
    tp = TriggerPlan(trigger=trig, selection=sel, algorithm=algorithm,
                     prepared=algorithm.prepare(ctx, trig, sel), group=group, leader=min(group))
    hw = topo.platform.hw_generation
    for rank in sorted(group):  # (lower's order)
        try:
            specs = algorithm.entries(ctx, tp, rank)
        except NrtRewriteError as err:  # (at the rank, as lower names it)
            raise err.at(rank=rank)
        for spec in specs:
            yield rank, _entry_legs(spec, rank, topo, hw, limit)
