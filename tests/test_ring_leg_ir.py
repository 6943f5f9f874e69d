"""HIER ring legs (compose/segments.ring_leg_ir) compose all channels at once from one chunk
group's rows, memoised per topology: the rows, peers and info must be those of
ring_channel_ir over ring_steps channel by channel (the composition it replaced), on every
call (a memoised row set is never handed out or changed)."""

import functools
import json

import numpy as np
import pytest

from irsim import SMALL_TWO_NODE_TOPOLOGY, ag, ar, plan_ops, rs
from nrtrewrite.codes import EdgeLocality, EncAlgType, ReductionType
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.ring import bookkeeping, ring_channel_ir
from nrtrewrite.compose.segments import PeerTable, ring_leg_ir, ring_steps
from nrtrewrite.topology.rings import enc_ring


def reference_ring_leg_ir(topo, rp, op, rank, peers, *, host_cc, reduction_type, inplace):
    irs, info = [], {}
    for slot, ch in enumerate(rp.channel_ids):
        ring = enc_ring(rp.orders[ch], rank)
        steps = ring_steps(op, rp.layout, slot, ring.user_ranks, rp.group_index,
                           host_cc=host_cc, inplace=inplace)
        prev_net = ring.prev != rank and topo.locality(ring.prev, rank) == EdgeLocality.NETWORK
        irs.append(ring_channel_ir(steps, ch, peers(ring.next), peers(ring.prev), prev_net,
                                   reduction_type))
        prologue, epilogue = bookkeeping(op, prev_net)
        info[ch] = {"prev": ring.prev, "next": ring.next, "user_ranks": list(ring.user_ranks),
                    "prologue": prologue, "epilogue": epilogue}
    return IR.concat(irs), info


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
    rtype = int(ReductionType.RING_2R1W)
    legs = 0
    for tp in plan.triggers:
        for lp in tp.prepared.data.legs:
            if lp.alg != EncAlgType.RING:
                continue
            for members, rp in lp.plans.items():
                for rank in members:
                    for host_cc in (False, True):
                        want_peers = PeerTable(rank)
                        want, want_info = reference_ring_leg_ir(
                            topo, rp, lp.op, rank, want_peers, host_cc=host_cc,
                            reduction_type=rtype, inplace=lp.inplace)
                        for _again in range(2):  # the second call meets the memo
                            peers = PeerTable(rank)
                            got, info = ring_leg_ir(topo, rp, lp.op, rank, peers,
                                                    host_cc=host_cc, reduction_type=rtype,
                                                    inplace=lp.inplace)
                            assert got.dtype == want.dtype and got.size == want.size
                            assert np.array_equal(IR._bytes(got), IR._bytes(want))
                            assert peers.peers == want_peers.peers and info == want_info
                            got["start"] = -1  # the caller owns its rows
                            info[rp.channel_ids[0]]["user_ranks"].append(-1)
                        legs += 1
    assert legs
    assert any(lp.name.startswith("inter") and lp.alg == EncAlgType.RING
               for tp in plan.triggers for lp in tp.prepared.data.legs)
