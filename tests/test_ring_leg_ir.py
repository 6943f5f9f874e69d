"""HIER ring legs (compose/segments.ring_leg_ir) compose all channels at once from one chunk
group's rows, memoised per topology: the rows, peers and info must be those of
ring_channel_ir over ring_steps channel by channel (the composition it replaced), on every
call (a memoised row set is never handed out or changed)."""

import functools
import json

import numpy as np
import pytest

from irsim import SMALL_TWO_NODE_TOPOLOGY, ag, ar, plan_ops, rs
from nrtrewrite.codes import EdgeLocality, EncAlgType, EncOpType, ReductionType
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.ring import bookkeeping, ring_channel_ir
from nrtrewrite.compose.segments import PeerTable, ring_leg_ir, ring_steps
from nrtrewrite.topology.rings import enc_ring


def reference_ring_leg_ir(topo, rp, op, rank, peers, *, host_cc, inplace):
    irs, info = [], {}
    for slot, ch in enumerate(rp.channel_ids):
        ring = enc_ring(rp.orders[ch], rank)
        steps = ring_steps(op, rp.layout, slot, ring.user_ranks, rp.group_index,
                           host_cc=host_cc, inplace=inplace)
        prev_net = ring.prev != rank and topo.locality(ring.prev, rank) == EdgeLocality.NETWORK
        irs.append(ring_channel_ir(steps, ch, peers(ring.next), peers(ring.prev), prev_net))
        prologue, epilogue = bookkeeping(op, prev_net)
        info[ch] = {"prev": ring.prev, "next": ring.next, "user_ranks": list(ring.user_ranks),
                    "prologue": prologue, "epilogue": epilogue}
    return IR.concat(irs), info


def _ring_leg_plans(plan):
    """(leg, members, ring plan) of every RING leg of the plan's HIER triggers."""
    for tp in plan.triggers:
        for lp in tp.prepared.data.legs:
            if lp.alg == EncAlgType.RING:
                for members, rp in lp.plans.items():
                    yield lp, members, rp


@pytest.fixture(scope="module")
def small_topo(tmp_path_factory):
    path = tmp_path_factory.mktemp("topo") / "trn2-4dev.json"
    path.write_text(json.dumps(SMALL_TWO_NODE_TOPOLOGY))
    return str(path)


@pytest.mark.parametrize("chunk_bytes", [256, 512 * 1024])
@pytest.mark.parametrize("ranks", [32, [33, 1, 17, 0, 32, 16]])
def test_ring_leg_ir_is_the_channel_by_channel_composition(small_topo, monkeypatch, ranks,
                                                           chunk_bytes):
    import nrtrewrite.compose.segments as S
    from nrtrewrite.compose.chunking import set_dynamic_chunk_size
    monkeypatch.setattr(S, "set_dynamic_chunk_size",
                        functools.partial(set_dynamic_chunk_size, chunk_bytes=chunk_bytes))
    n = ranks if isinstance(ranks, int) else len(ranks)
    plan = plan_ops([ar(9001), ag(450), rs(n * 300)], ranks, topology=small_topo,
                    algo="inter_allr:ring;inter_allg:ring;inter_redsct:ring")
    topo = plan.topology
    legs = 0
    for lp, members, rp in _ring_leg_plans(plan):
        for rank in members:
            for host_cc in (False, True):
                want_peers = PeerTable(rank)
                want, want_info = reference_ring_leg_ir(
                    topo, rp, lp.op, rank, want_peers, host_cc=host_cc, inplace=lp.inplace)
                for _again in range(2):  # the second call meets the memo
                    peers = PeerTable(rank)
                    got, info = ring_leg_ir(topo, rp, lp.op, rank, peers,
                                            host_cc=host_cc, inplace=lp.inplace)
                    assert got.dtype == want.dtype and got.size == want.size
                    assert np.array_equal(IR._bytes(got), IR._bytes(want))
                    assert peers.peers == want_peers.peers and info == want_info
                    got["start"] = -1  # the caller owns its rows
                    info[rp.channel_ids[0]]["user_ranks"].append(-1)
                legs += 1
    assert legs
    assert any(lp.name.startswith("inter") and lp.alg == EncAlgType.RING
               for tp in plan.triggers for lp in tp.prepared.data.legs)


# ---------------------------------------------------------------------------
# The HIER ring legs against the seed, not against ring_channel_ir: every expected value below
# is worked out from seed 001 §4 (the step loop, its chunk positions ``p.k = na[...]``, the
# half-chunk pipeline), docs/DESIGN.md "Chunking" (where a chunk position lives) and "Buffers
# and data flow" (which buffer a leaf reads and writes), with no call into compose/ring.py.

IN, OUT, RECV = 0, 1, 2  # the ring leg's views (docs/DESIGN.md "Buffers"; ring_leg_ir's doc)
SEND, RRS, RRC, RRCS, DCS, DRS, DR, DC = 1, 2, 3, 4, 5, 6, 7, 8  # docs/FORMATS.md legs.bin
#: leaf -> (sources, destinations as (view, to the successor?), reduces, waits for the
#: predecessor, increments the successor's recv_sema, net receive view)
SEED_LEAVES = {
    SEND: ((IN,), ((RECV, True),), False, False, True, None),
    RRS: ((RECV, IN), ((RECV, True),), True, True, True, RECV),
    RRC: ((RECV, IN), ((OUT, False),), True, True, False, RECV),
    RRCS: ((RECV, IN), ((OUT, False), (OUT, True)), True, True, True, RECV),
    DCS: ((OUT,), ((OUT, True),), False, False, True, None),
    DRS: ((OUT,), ((OUT, True),), False, True, True, OUT),
    DR: ((), (), False, True, False, OUT),
    DC: ((IN,), ((OUT, False),), False, False, False, None),
}


def seed_step_loop(op, n, host_cc, inplace):
    """One chunk group of seed 001 §4's loop as (step, leaf, half, ring offset of k): k is
    ``na[j]``, the rank ``j`` places after this one on the ring (``user_ranks``)."""
    def both(s, leaf, j):  # CHUNK_H0 then CHUNK_H1
        return [(s, leaf, 0, j), (s, leaf, 1, j)]

    if op == EncOpType.ALLGATHER:
        rows = both(0, SEND, 0) + ([] if inplace else both(0, DC, 0))
        for s in range(1, n - 1):  # n-2 x direct_recv_send, na[n-1] .. na[2]
            rows += both(s, DRS, n - s)
        return rows + both(n - 1, DR, 1)
    rows = both(0, SEND, n - 1)  # p.k = na[rank_n-1]
    for s in range(1, n - 1):  # n-2 x recv_reduce_send, p.k = na[n-2] .. na[1]
        rows += both(s, RRS, n - 1 - s)
    if op == EncOpType.REDUCE_SCATTER:
        return rows + both(n - 1, RRC, 0)
    if host_cc:
        rows += both(n - 1, RRCS, 0)
    else:  # the device path: recv_reduce_copy + direct_copy_send, half by half
        rows += [(n - 1, RRC, 0, 0), (n - 1, DCS, 0, 0), (n - 1, RRC, 1, 0), (n - 1, DCS, 1, 0)]
    for s in range(n, 2 * n - 2):  # n-2 x direct_recv_send, p.k = na[n-1] .. na[2]
        rows += both(s, DRS, 2 * n - 1 - s)
    return rows + both(2 * n - 2, DR, 1)  # p.k = na[1]


def seed_ranges(layout, g, slot, pos, half):
    """[start, stop) of each (segment of a) chunk position, docs/DESIGN.md "Chunking" /
    compose/segments.py's module doc: the chunk of the last group is the tail chunk."""
    p = layout.plan
    cs = p.tail_chunk if g == p.groups - 1 else p.chunk
    if not p.blocks:  # interleaved: groups of rank_n * ch_n chunks over [offset, +span)
        s = min(g * p.rank_n * p.channels * p.chunk + (p.rank_n * slot + pos) * cs
                + half * (cs // 2), p.span)
        return [(layout.offset + s, layout.offset + min(s + cs // 2, p.span))]
    out = []
    for lo, hi in layout.segments[pos]:  # segmented: groups of ch_n chunks in each segment
        s = min(lo + g * p.channels * p.chunk + slot * cs + half * (cs // 2), hi)
        out.append((s, min(s + cs // 2, hi)))
    return out


def check_leg_against_seed(topo, rp, op, rank, host_cc, inplace):
    from nrtrewrite.emit.address import SEM_RECV, channel_sem
    rtype = int(ReductionType.RING_2R1W)
    peers = PeerTable(rank)
    got, info = ring_leg_ir(topo, rp, op, rank, peers, host_cc=host_cc, inplace=inplace)
    n = len(rp.group)
    loop = seed_step_loop(op, n, host_cc, inplace)
    i = 0
    for slot, ch in enumerate(rp.channel_ids):
        order = list(rp.orders[ch])
        me = order.index(rank)
        nxt, prv = order[(me + 1) % n], order[(me - 1) % n]
        net = topo.locality(prv, rank) == EdgeLocality.NETWORK
        sem = channel_sem(ch, SEM_RECV)
        assert info[ch]["next"] == nxt and info[ch]["prev"] == prv
        for g in range(rp.layout.groups):
            for step, leaf, half, j in loop:
                k = order[(me + j) % n]
                srcs, dsts, red, waits, incs, nview = SEED_LEAVES[leaf]
                for start, stop in seed_ranges(rp.layout, g, slot, rp.group_index[k], half):
                    r = got[i]
                    i += 1
                    where = (rank, ch, g, step, leaf, half)
                    assert (r["channel"], r["leaf"], r["half"], r["group"], r["k"]) == \
                        (ch, leaf, half, g, k), where
                    # phase 0 = reduce-scatter (steps 0 .. n-1 of an all-reduce), 1 = all-gather
                    phase = int(op == EncOpType.ALLGATHER
                                or (op == EncOpType.ALLREDUCE and step >= n))
                    assert (r["step"], r["phase"]) == (step, phase), where
                    assert (r["start"], r["stop"]) == (start, stop), where
                    assert list(r["src_view"][:r["n_src"]]) == list(srcs), where
                    assert list(r["dst_view"][:r["n_dst"]]) == [v for v, _ in dsts], where
                    assert [peers.peers[p] for p in r["dst_peer"][:r["n_dst"]]] == \
                        [nxt if to_next else rank for _, to_next in dsts], where
                    assert bool(r["reduce"]) == red, where
                    want_rt = 0 if not red else (int(ReductionType.RING_2R2W) if leaf == RRCS
                                                 else rtype)
                    assert r["reduction_type"] == want_rt, where
                    assert r["n_wait"] == waits, where
                    if waits:
                        assert (r["wait_sem"][0], r["wait_val"][0]) == (sem, 1), where
                    assert r["n_inc"] == incs, where
                    if incs:
                        assert (peers.peers[r["inc_peer"][0]], r["inc_sem"][0],
                                r["inc_val"][0]) == (nxt, sem, 1), where
                    if waits and net:
                        assert (peers.peers[r["net_src_peer"]], r["net_view"]) == \
                            (prv, nview), where
                    else:
                        assert r["net_src_peer"] == IR.NO_NET, where
    assert i == got.size


SMALL_OPS = ([ar(9001), ag(450)], 300, 1 << 20, 256)  # ops, rs count per rank, nbytes, budget
FOUR_NODES = [0, 1, 2, 16, 17, 18, 32, 33, 34, 48, 49, 50]  # 3 ranks on each of 4 nodes


@pytest.mark.parametrize("ranks, case", [
    (32, SMALL_OPS), ([33, 1, 17, 0, 32, 16], SMALL_OPS),
    # 4M elements over 4 nodes: 2 channels on every leg (the inter all-reduce leg's
    # interleaved layout too), 256 KiB chunks: several groups and a tail
    (FOUR_NODES, ([ar(4_000_000)], 0, 1 << 23, 256 * 1024))])
def test_hier_ring_legs_follow_the_seed_step_loop(small_topo, monkeypatch, ranks, case):
    """Every row of every HIER ring leg (intra and inter, all-reduce, all-gather and
    reduce-scatter legs, device and host-CC paths, one and two channels, several chunk groups
    and a tail chunk) as seed 001 §4 and docs/DESIGN.md give it, built without
    compose/ring.py."""
    import nrtrewrite.compose.segments as S
    from nrtrewrite.compose.chunking import set_dynamic_chunk_size
    ops, rs_count, nbytes, chunk_bytes = case
    monkeypatch.setattr(S, "set_dynamic_chunk_size",
                        functools.partial(set_dynamic_chunk_size, chunk_bytes=chunk_bytes))
    n = ranks if isinstance(ranks, int) else len(ranks)
    ops = ops + ([rs(n * rs_count)] if rs_count else [])
    plan = plan_ops(ops, ranks, topology=small_topo, nbytes=nbytes,
                    algo="hier;inter_allr:ring;inter_allg:ring;inter_redsct:ring;"
                         "intra_redsct:ring;intra_allg:ring")
    seen = set()
    for lp, members, rp in _ring_leg_plans(plan):
        for rank in members:
            for host_cc in (False, True):
                check_leg_against_seed(plan.topology, rp, lp.op, rank, host_cc,
                                       lp.inplace)
        seen.add((lp.op, rp.layout.interleaved, rp.layout.groups > 1,
                  len(rp.group) > 2, len(rp.channel_ids) > 1))
    # the checks met both layouts, several chunk groups and the middle steps of the loop
    if rs_count:
        assert {(EncOpType.ALLREDUCE, True), (EncOpType.ALLGATHER, False),
                (EncOpType.REDUCE_SCATTER, False)} <= {(s[0], s[1]) for s in seen}
        assert any(s[2] for s in seen) and any(s[3] for s in seen)
    else:  # both layouts on two channels over several chunk groups
        assert {(True, True, True), (False, True, True)} <= {(s[1], s[2], s[4]) for s in seen}
