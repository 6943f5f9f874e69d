"""SINGLE_CYCLE_RING rows (compose/single_cycle.single_cycle_ir) are one chunk group's rows,
memoised per topology, repeated over the chunk groups: the rows, peers, views and info must be
those the composer gave when it composed every chunk group (the reference below), on every
call (a memoised row set is never handed out or changed); standalone and as a HIER leg, a
one-rank group, across nodes, several chunk groups."""

import functools
import json

import numpy as np
import pytest

from irsim import SMALL_TWO_NODE_TOPOLOGY, ar, plan_ops, rs
from nrtrewrite.codes import EdgeLocality, EncAlgType, EncHalfChunkIndex
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.hier import _view_factory
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.compose.segments import PeerTable, ViewTable
from nrtrewrite.compose.single_cycle import (
    AG, RING_2R1W, RS, _VIEWS, arcs, chunk_roles, single_cycle_ir,
    trigger_single_cycle_factory,
)
from nrtrewrite.emit.address import SEM_POST, SEM_RECV, channel_sem


def reference_single_cycle_ir(sp, topo, rank, peers, views):
    """single_cycle_ir as it composed every chunk group before the one-group memo."""
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
            row["k"] = rank
            row["leaf"] = int(Leaf.direct_copy)
            row["phase"] = AG
            row["half"] = np.tile([0, 1], G)
            row["group"] = np.repeat(np.arange(G), 2)
            _r, _s, a, b = sp.layout.expand(row["group"], np.zeros(G * 2, np.int64),
                                            np.zeros(G * 2, np.int64), row["half"])
            row["start"], row["stop"] = a, b
            row["n_src"], row["n_dst"] = 1, 1
            row["src_view"][:, 0], row["dst_view"][:, 0] = vix["in"], vix["out"]
            irs.append(row)
            info[cw] = {"direction": "cw", "n": 1, "user_ranks": [rank]}
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
                out["phase"][sel] = AG if step > arcs(n)[0] else RS
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
            step_dir = (1, -1)[d]  # CW walks the ring forward, CCW backward
            info[ch] = {"direction": ("cw", "ccw")[d], "prev": prv[d], "next": nxt[d],
                        "user_ranks": [order[(me + step_dir * i) % n] for i in range(n)],
                        "pair": [cw, ccw], "arcs": list(arcs(n))}
    ir = IR.concat(irs)
    order_ch = np.argsort(ir["channel"], kind="stable")
    return IR.take(ir, order_ch), info


@pytest.fixture(scope="module")
def small_topo(tmp_path_factory):
    path = tmp_path_factory.mktemp("topo") / "trn2-4dev.json"
    path.write_text(json.dumps(SMALL_TWO_NODE_TOPOLOGY))
    return str(path)


def _cases(plan):
    """(single-cycle plan, view factory) of every standalone trigger and HIER leg."""
    for tp in plan.triggers:
        if tp.alg == EncAlgType.SINGLE_CYCLE_RING:
            yield tp.prepared.data, lambda tp=tp: trigger_single_cycle_factory(plan, tp.trigger)
        elif tp.alg == EncAlgType.HIER:
            for lp in tp.prepared.data.legs:
                if lp.alg == EncAlgType.SINGLE_CYCLE_RING:
                    for sp in lp.plans.values():
                        yield sp, lambda tp=tp, lp=lp: _view_factory(plan, tp.trigger, lp)


def _tables(rank, factory):
    peers, views = PeerTable(rank), ViewTable(factory())
    views.reserve([("in", rank), ("out", rank), ("recv", rank), ("gw", rank)])
    return peers, views


@pytest.mark.parametrize("chunk_bytes", [256, 512 * 1024])
@pytest.mark.parametrize("ranks, algo, topology", [
    (5, "allreduce:single_cycle_ring", None),
    (16, "allreduce:single_cycle_ring", None),
    ([3], "allreduce:single_cycle_ring", None),
    ([0, 16, 32], "allreduce:single_cycle_ring", "small"),
    (32, "inter_allr:single_cycle_ring", "small"),
    ([33, 1, 17, 0, 32, 16], "inter_allr:single_cycle_ring", "small"),
])
def test_single_cycle_ir_is_the_every_group_composition(small_topo, monkeypatch, ranks, algo,
                                                        topology, chunk_bytes):
    import nrtrewrite.compose.segments as S
    from nrtrewrite.compose.chunking import set_dynamic_chunk_size
    monkeypatch.setattr(S, "set_dynamic_chunk_size",
                        functools.partial(set_dynamic_chunk_size, chunk_bytes=chunk_bytes))
    n = ranks if isinstance(ranks, int) else len(ranks)
    plan = plan_ops([ar(9001), ar(33 * n, op="max")], ranks, algo=algo,
                    topology=small_topo if topology else None)
    topo = plan.topology
    cases = 0
    for sp, factory in _cases(plan):
        for rank in sp.group:
            want_peers, want_views = _tables(rank, factory)
            want, want_info = reference_single_cycle_ir(sp, topo, rank, want_peers, want_views)
            for _again in range(2):  # the second call meets the memo
                peers, views = _tables(rank, factory)
                got, info = single_cycle_ir(sp, topo, rank, peers, views)
                assert got.dtype == want.dtype and got.size == want.size
                assert np.array_equal(IR._bytes(got), IR._bytes(want))
                assert peers.peers == want_peers.peers and info == want_info
                assert views.views == want_views.views and views.index == want_views.index
                got["start"] = -1  # the caller owns its rows
                info[sp.pairs[0][0]]["direction"] = "x"
            cases += 1
    assert cases
