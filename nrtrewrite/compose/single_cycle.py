"""SINGLE_CYCLE_RING: the all-reduce that completes in one cycle of ``n - 1`` steps (design).

The seeds name the composer (``__compose_single_cycle_allreduce_channel``, seed 001 §3) and
its gate (all-reduce only, seed 000 §1.4: "the latency-optimised single-pass ring,
reduce-scatter + all-gather fused into one cycle") but leave its step schedule OPEN (seed 001
§5).  Ours, documented in docs/DESIGN.md "Single-cycle ring":

* Every chunk position ``k`` of the ring layout (seed 001 §2) has a *root*: the group member
  at position ``k``.  The ring is cut opposite the root, and the chunk is reduced along both
  arcs toward the root at once: the ``h_cw = ceil((n-1)/2)`` ranks upstream of the root
  along the ring direction pass the partial clockwise, the ``h_ccw = floor((n-1)/2)`` ranks
  downstream pass it counter-clockwise.  The root reduces the two partials with its own input
  (one CCE of three sources), then sends the result both ways back out along the arcs.
* The two directions are two channels with the *same* ring, one walked forward (CW), one
  backward (CCW): each channel is a plain one-direction ring with its own ``recv_sema`` and,
  across nodes, its own net-proxy FIFOs.  A pair of channels carries each slice of the
  message.  At the root the two channels meet through their ``post_sema``: the CCW
  channel's ``direct_recv`` consumes the CCW partial and posts it to the CW channel, whose
  combine leg (``recv_reduce_copy_send``: RECV_cw + RECV_ccw + IN -> OUT and the CW
  successor) posts back to the CCW channel's ``direct_copy_send`` of the result.
* Step identity (tested in tests/test_single_cycle.py): the transfer at step ``t`` of the
  clockwise arc leaves the rank ``h_cw - t`` hops upstream of the root; both partials reach
  the root after step ``h_cw - 1``, the result leaves it at step ``h_cw`` and reaches the
  farthest rank at step ``2 h_cw - 1``: ``2 * ceil((n-1)/2)`` steps, i.e. ``n - 1`` for odd
  ``n`` and ``n`` for even ``n`` (the ring needs ``2(n-1)``).  Every rank still sends and
  receives ``2(n-1)`` chunks per chunk group (the ring's bandwidth), split over both
  directions of every link; each step is two legs wide (one per direction), each issued for
  CHUNK_H0 then CHUNK_H1.
* Every element is reduced once, at its root, in one fixed order (CW partial, CCW partial,
  own input), and copied everywhere else: all ranks get identical bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nrtrewrite.codes import (
    EdgeLocality, EncAlgType, EncHalfChunkIndex, EncOpType, ReductionType,
)
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.algorithm import Algorithm, EntrySpec, Prepared, register
from nrtrewrite.compose.chunking import io_dtype_size
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.compose.segments import (
    Layout, PeerTable, ViewTable, group_positions, interleaved_layout,
)
from nrtrewrite.compose.views import operand_view, region_view
from nrtrewrite.emit.address import SEM_POST, SEM_RECV, channel_sem
from nrtrewrite.errors import LoweringError
from nrtrewrite.topology.rings import ring_orders

RS, AG = 0, 1  # phases
RING_2R1W = int(ReductionType.RING_2R1W)


def arcs(n: int) -> tuple[int, int]:
    """(h_cw, h_ccw): ranks reducing toward the root clockwise and counter-clockwise."""
    return -(-(n - 1) // 2), (n - 1) // 2


def step_count(n: int) -> int:
    """Transfers per chunk group on the critical path: ``2 * ceil((n-1)/2)``."""
    return 2 * arcs(n)[0] if n > 1 else 0


@dataclass(frozen=True)
class Role:
    """One leg of one rank for one chunk (before chunk groups, halves and ranges)."""

    direction: int  # 0 = CW channel, 1 = CCW channel
    step: int  # program key: the step of the transfer it makes, or consumed + 1
    sub: int  # order inside a step key (the root's CCW sync before its CCW send)
    leaf: Leaf
    srcs: tuple[str, ...]  # views: "in", "out", "recv" (CW partials), "recv2" (CCW)
    dsts: tuple[tuple[str, str], ...]  # (view, "self" | "next")
    waits_recv: bool  # consumes the channel predecessor's transfer
    sends: bool  # increments the channel successor's recv_sema
    waits_post: bool = False  # waits its channel's post_sema (the other direction's leg)
    posts_other: bool = False  # increments the other channel's post_sema on this rank
    lands: str | None = None  # the view a consumed transfer lands in (network receives)


def chunk_roles(n: int, d_cw: int) -> list[Role]:
    """The legs of the rank ``d_cw`` clockwise hops upstream of the chunk's root (0 = root)."""
    h_cw, h_ccw = arcs(n)
    out: list[Role] = []
    if d_cw == 0:  # the root
        if h_ccw:
            out.append(Role(1, h_cw, 0, Leaf.direct_recv, (), (), True, False, posts_other=True,
                            lands="recv2"))
        srcs = (("recv",) if h_cw else ()) + (("recv2",) if h_ccw else ()) + ("in",)
        dsts = (("out", "self"),) + ((("out", "next"),) if h_ccw else ())
        out.append(Role(0, h_cw, 0, Leaf.recv_reduce_copy_send if h_ccw else Leaf.recv_reduce_copy,
                        srcs, dsts, bool(h_cw), bool(h_ccw), waits_post=bool(h_ccw),
                        posts_other=bool(h_cw), lands="recv"))
        if h_cw:
            out.append(Role(1, h_cw, 1, Leaf.direct_copy_send, ("out",), (("out", "next"),),
                            False, True, waits_post=True))
        return out
    if d_cw <= h_cw:  # clockwise arc: reduce CW at step h_cw - d, result back CCW
        d, rs_dir, ag_dir, recv = d_cw, 0, 1, "recv"
        h = h_cw
    else:  # counter-clockwise arc
        d, rs_dir, ag_dir, recv = n - d_cw, 1, 0, "recv2"
        h = h_ccw
    t = h_cw - d
    if d == h:
        out.append(Role(rs_dir, t, 0, Leaf.send, ("in",), ((recv, "next"),), False, True))
    else:
        out.append(Role(rs_dir, t, 0, Leaf.recv_reduce_send, (recv, "in"), ((recv, "next"),),
                        True, True, lands=recv))
    t_ag = h_cw + d  # consumes the result sent at step h_cw + d - 1
    if d < h:
        out.append(Role(ag_dir, t_ag, 0, Leaf.direct_recv_send, ("out",), (("out", "next"),),
                        True, True, lands="out"))
    else:
        out.append(Role(ag_dir, t_ag, 0, Leaf.direct_recv, (), (), True, False, lands="out"))
    return out


@dataclass
class SingleCyclePlan:
    """Rank-independent decisions of one single-cycle all-reduce over one group."""

    group: tuple[int, ...]
    group_index: dict[int, int]
    pairs: list[tuple[int, int]]  # (CW channel id, CCW channel id) per layout slot
    orders: dict[int, tuple[int, ...]]  # channel id -> ring order (CCW: the reversed ring)
    layout: Layout

    @property
    def channel_ids(self) -> list[int]:
        return list(dict.fromkeys(c for p in self.pairs for c in p))

    def manifest(self) -> dict:
        return {"channels": tuple({"channel": c, "order": self.orders[c]}
                             for c in self.channel_ids),
                "chunk": {"chunk_size_n": self.layout.plan.chunk,
                          "tail_chunk": self.layout.plan.tail_chunk,
                          "pgta": self.layout.groups, "channels": self.layout.channels},
                "single_cycle": {"pairs": tuple(self.pairs),
                                 "arcs": arcs(len(self.group)),
                                 "steps_per_group": step_count(len(self.group))}}


def plan_single_cycle(topo, group, n_channels: int, layout_of, channel_base: int = 0
                      ) -> SingleCyclePlan:
    """One ring per channel pair (forward for CW, its exact reverse for CCW).

    The rings (pairs, orders) are memoised per (group, pairs, base, active channels): plans
    of the same group share them, and never mutate them."""
    group = tuple(group)
    pairs_n = max(1, n_channels // 2)

    def forward() -> tuple[tuple[int, ...], ...]:
        if len(group) > 1:
            return tuple(o for o in ring_orders(topo, group, min(32, max(1, pairs_n)))
                         if o is not None)
        return (group,)

    fwd = topo.cached(("single_cycle_rings", group, pairs_n), forward)
    layout = layout_of(len(fwd))

    def channels() -> tuple[list[tuple[int, int]], dict[int, tuple[int, ...]]]:
        pairs, orders = [], {}
        for k in range(layout.channels):
            cw, ccw = channel_base + 2 * k, channel_base + 2 * k + 1
            if len(group) == 1:  # nothing to exchange: one channel copies IN to OUT
                ccw = cw
            channel_sem(ccw, SEM_RECV)
            pairs.append((cw, ccw))
            orders[cw] = tuple(fwd[k])
            rev = tuple(reversed(fwd[k]))
            i = rev.index(min(rev))
            orders[ccw] = rev[i:] + rev[:i]
        return pairs, orders

    pairs, orders = topo.cached(("single_cycle_channels", group, pairs_n, channel_base,
                                 layout.channels), channels)
    return SingleCyclePlan(group=group, group_index=group_positions(topo, group),
                           pairs=pairs, orders=orders, layout=layout)


_VIEWS = ("in", "out", "recv", "recv2", "gw", "gw2")


def single_cycle_ir(sp: SingleCyclePlan, topo, rank: int, peers: PeerTable, views: ViewTable, *,
                    op: EncOpType = EncOpType.ALLREDUCE) -> tuple[np.ndarray, dict]:
    """The leg IR of ``rank`` on every channel pair of ``sp`` and its ``schedule`` info."""
    if op != EncOpType.ALLREDUCE:
        raise LoweringError(f"SINGLE_CYCLE_RING is all-reduce only (op_type {op.name})")
    n = len(sp.group)
    vix = {name: views.get(name, rank) for name in _VIEWS}
    irs, info = [], {}
    G = sp.layout.groups
    for slot, (cw, ccw) in enumerate(sp.pairs):
        order = sp.orders[cw]
        me = order.index(rank)
        nxt = (order[(me + 1) % n], order[(me - 1) % n])  # per direction
        prv = (order[(me - 1) % n], order[(me + 1) % n])
        chans = (cw, ccw)
        net_prev = [prv[d] != rank and topo.locality(rank, prv[d]) == EdgeLocality.NETWORK
                    for d in (0, 1)]
        if n == 1:
            row = IR.empty(G * 2)
            row["channel"] = cw
            row["leaf"] = int(Leaf.direct_copy)
            row["half"] = np.tile([0, 1], G)
            row["group"] = np.repeat(np.arange(G), 2)
            _r, _s, a, b = sp.layout.expand(row["group"], np.zeros(G * 2, np.int64),
                                            np.zeros(G * 2, np.int64), row["half"])
            row["start"], row["stop"] = a, b
            row["n_src"], row["n_dst"] = 1, 1
            row["src_view"][:, 0], row["dst_view"][:, 0] = vix["in"], vix["out"]
            irs.append(row)
            info[cw] = {"direction": "cw", "n": 1}
            continue
        # every chunk position's legs, then sort each channel by (group, step, half, sub)
        legs = []  # (direction, step, sub, pos, role)
        for pos, root in enumerate(sp.group):
            d_cw = (order.index(root) - me) % n
            for role in chunk_roles(n, d_cw):
                legs.append((role.direction, role.step, role.sub, pos, role))
        for d in (0, 1):
            mine = sorted((x for x in legs if x[0] == d), key=lambda x: (x[1], x[2]))
            if not mine:
                continue
            ch = chans[d]
            recv = channel_sem(ch, SEM_RECV)
            post_me = channel_sem(ch, SEM_POST)
            post_other = channel_sem(chans[1 - d], SEM_POST)
            nx = peers(nxt[d])
            pv = peers(prv[d])
            t = len(mine)
            out = IR.empty(G * t * 2)
            g = np.repeat(np.arange(G, dtype=np.int64), t * 2)
            k = np.tile(np.repeat(np.arange(t, dtype=np.int64), 2), G)
            half = np.tile(np.array([int(EncHalfChunkIndex.CHUNK_H0),
                                     int(EncHalfChunkIndex.CHUNK_H1)], np.int64), G * t)
            # order inside a group: step, then half, then sub (the root's CCW sync
            # precedes its CCW send for each half)
            key = np.array([(x[1], x[2]) for x in mine], np.int64)
            order_in_g = np.lexsort((key[k, 1], half, key[k, 0], g))
            g, k, half = g[order_in_g], k[order_in_g], half[order_in_g]
            pos = np.array([x[3] for x in mine], np.int64)[k]
            _r, _s, start, stop = sp.layout.expand(g, np.full(g.size, slot), pos, half)
            out["channel"] = ch
            out["group"] = g
            out["half"] = half
            out["start"] = start
            out["stop"] = stop
            out["k"] = np.array(sp.group, np.int64)[pos]
            for i, (_dd, step, _sub, _pos, role) in enumerate(mine):
                sel = k == i
                out["step"][sel] = step
                out["phase"][sel] = AG if step >= arcs(n)[0] else RS
                out["leaf"][sel] = int(role.leaf)
                out["n_src"][sel] = len(role.srcs)
                for j, s in enumerate(role.srcs):
                    out["src_view"][sel, j] = vix[s]
                out["n_dst"][sel] = len(role.dsts)
                for j, (v, who) in enumerate(role.dsts):
                    out["dst_view"][sel, j] = vix[v]
                    out["dst_peer"][sel, j] = nx if who == "next" else 0
                out["reduce"][sel] = len(role.srcs) > 1
                out["reduction_type"][sel] = RING_2R1W
                waits = ([(recv, 1)] if role.waits_recv else []) + \
                    ([(post_me, 1)] if role.waits_post else [])
                out["n_wait"][sel] = len(waits)
                for j, (s, v) in enumerate(waits):
                    out["wait_sem"][sel, j] = s
                    out["wait_val"][sel, j] = v
                incs = ([(nx, recv)] if role.sends else []) + \
                    ([(0, post_other)] if role.posts_other else [])
                out["n_inc"][sel] = len(incs)
                for j, (p, s) in enumerate(incs):
                    out["inc_peer"][sel, j] = p
                    out["inc_sem"][sel, j] = s
                    out["inc_val"][sel, j] = 1
                if role.waits_recv and net_prev[d]:
                    out["net_src_peer"][sel] = pv
                    out["net_view"][sel] = vix[role.lands]
                if d == 1 and "gw_view" in out.dtype.names:
                    out["gw_view"][sel] = vix["gw2"]  # the CCW sends stage apart from CW
            irs.append(out)
            info[ch] = {"direction": ("cw", "ccw")[d], "prev": prv[d], "next": nxt[d],
                        "pair": [cw, ccw], "arcs": list(arcs(n))}
    ir = IR.concat(irs)
    order_ch = np.argsort(ir["channel"], kind="stable")
    return IR.take(ir, order_ch), info


def trigger_single_cycle_factory(ctx, trig):
    memory = ctx.memory
    dsize = io_dtype_size(trig.dtype)
    n = trig.num_elements

    def factory(role: str, member: int):
        if role == "in":
            return operand_view(memory, trig, trig.src, 0)
        if role == "out":
            return operand_view(memory, trig, trig.dst, 0)
        if role in ("recv", "recv2"):
            return region_view(memory, "scratch", dsize, offset=(role == "recv2") * n * dsize)
        if role in ("gw", "gw2"):
            return region_view(memory, "gw", dsize, offset=(role == "gw2") * n * dsize)
        raise KeyError(role)
    return factory


class SingleCycleAlgorithm(Algorithm):
    """SINGLE_CYCLE_RING over a whole group: one entry per rank."""

    alg = EncAlgType.SINGLE_CYCLE_RING

    def prepare(self, ctx, trig, sel) -> Prepared:
        if trig.op != EncOpType.ALLREDUCE:
            raise LoweringError(f"SINGLE_CYCLE_RING is all-reduce only (op_type {trig.op.name})")
        group = tuple(trig.replica_group)
        sp = plan_single_cycle(ctx.topology, group, sel.n_channels,
                               lambda nring: interleaved_layout(
                                   trig.op, trig.num_elements, len(group), trig.dtype,
                                   max(1, min(nring, max(1, sel.n_channels // 2)))))
        dsize = io_dtype_size(trig.dtype)
        spans = any(not ctx.topology.same_node(group[0], r) for r in group)
        manifest = sp.manifest()
        manifest["buffers"] = [{"role": "recv2", "region": "scratch",
                                "offset": trig.num_elements * dsize}]
        if spans:
            manifest["buffers"].append({"role": "gw2", "region": "gw",
                                        "offset": trig.num_elements * dsize})
        return Prepared(scratch_bytes=2 * trig.num_elements * dsize,
                        gw_bytes=2 * trig.num_elements * dsize if spans else 0,
                        manifest=manifest, data=sp)

    def entries(self, ctx, tp, rank: int) -> list[EntrySpec]:
        sp: SingleCyclePlan = tp.prepared.data
        peers = PeerTable(rank)
        views = ViewTable(trigger_single_cycle_factory(ctx, tp.trigger))
        views.reserve([("in", rank), ("out", rank), ("recv", rank), ("gw", rank)])
        ir, info = single_cycle_ir(sp, ctx.topology, rank, peers, views, op=tp.trigger.op)
        return [EntrySpec(leg="flat", alg=EncAlgType.SINGLE_CYCLE_RING, ir=ir,
                          views=views.views, gw_view=3, peers=peers.peers,
                          num_active_channels=len(sp.channel_ids), groups=sp.layout.groups,
                          reduction_type=RING_2R1W, info={"channels": info})]


SINGLE_CYCLE = register(SingleCycleAlgorithm())
