"""KANGARING transfer tables composed once per process in roles (compose/kangaring.py
``_role_table``, ``_resolve``): a table serves every primary, channel and collective of the
same op whose unit peers route alike, renumbered into each entry's own view and peer tables
and given the channel's semaphores.

Checked against what does not depend on the memo: the same entries composed with every
channel's memo emptied first (nothing shared), and, against tables already holding other
views and peers, the legs' meaning (which buffer of which rank each slot names) and the
rule that a leg's ``kring_peer_semas`` increments follow the entry's peer numbers."""

import numpy as np
import pytest

from irsim import ag, ar, plan_ops, rs
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.kangaring import (
    KangaringPlan, _primary_legs, _role_table, kangaring_sem, trigger_view_factory,
)
from nrtrewrite.compose.segments import PeerTable, ViewTable
from nrtrewrite.lower import _entries_of, rank_entries

# two sizes per op: the second collective of each op finds its tables memoised; big enough
# for several channels, so ranks are primaries on some and secondaries on others
MIB = 1 << 20
OPS = [ar(4 * MIB), ar(6 * MIB + 64), ag(MIB // 4), ag(MIB // 4 + 32), rs(8 * MIB),
       rs(4 * MIB), ar(4 * MIB, dtype="fp8_e4")]


@pytest.fixture(scope="module", params=[2, 1], ids=["vnc2", "vnc1"])
def plan(request):
    # VNC 1: units of four ranks, so a leg increments up to three secondaries' ``mine``
    p = plan_ops(OPS, 16, lnc=request.param, algo="kangaring", nbytes=16 * MIB)
    assert all(len(tp.prepared.data.channel_ids) > 1 for tp in p.triggers)
    return p


def _channels(plan):
    for tp in plan.triggers:
        kp = tp.prepared.data
        assert isinstance(kp, KangaringPlan)
        yield from kp.channels.values()


def _entry_bytes(plan, rank):
    out = []
    for _tp, spec in rank_entries(plan, rank):
        out.append((IR.concat([spec.ir]).tobytes(), list(spec.peers),
                    [(v.dsize, v.origin, v.base, v.ap) for v in spec.views]))
    return out


@pytest.mark.parametrize("rank", [0, 1, 5, 14])
def test_shared_tables_give_the_entries_composed_alone(plan, rank):
    shared = _entry_bytes(plan, rank)
    alone = []
    for tp in plan.triggers:
        for kc in _channels(plan):
            kc.memo.clear()
        _role_table.cache_clear()
        for t in plan.triggers:  # the secondaries' counts too
            t.prepared.data._touches.clear()
        for spec in _entries_of(plan, tp, rank):
            alone.append((IR.concat([spec.ir]).tobytes(), list(spec.peers),
                          [(v.dsize, v.origin, v.base, v.ap) for v in spec.views]))
    assert len(shared) == len(alone) == len(OPS)
    assert shared == alone


def _decoded(legs, peers: PeerTable, views: ViewTable):
    """Each leg's sources, destinations and increments as (buffer, rank) / (rank, sem)."""
    def buf(v):
        view = views.views[v]
        return (view.dsize, view.origin, view.base, view.ap)

    out = []
    for leg in legs:
        ns, nd, ni = int(leg["n_src"]), int(leg["n_dst"]), int(leg["n_inc"])
        out.append((int(leg["leaf"]), int(leg["start"]), int(leg["stop"]),
                    [(buf(v), peers.peers[p]) for v, p in zip(leg["src_view"][:ns],
                                                              leg["src_peer"][:ns])],
                    [(buf(v), peers.peers[p]) for v, p in zip(leg["dst_view"][:nd],
                                                              leg["dst_peer"][:nd])],
                    sorted((peers.peers[p], int(s)) for p, s in zip(leg["inc_peer"][:ni],
                                                                    leg["inc_sem"][:ni]))))
    return out


@pytest.mark.parametrize("ordinal", range(len(OPS)))
def test_tables_holding_other_peers_and_views_renumber_the_legs(plan, ordinal):
    tp = plan.triggers[ordinal]
    kp = tp.prepared.data
    factory = trigger_view_factory(plan, tp.trigger)
    for ch in kp.channel_ids:
        kc = kp.channels[ch]
        primary = kc.primaries[1]
        unit = next(u for u in kc.units if u[0] == primary)
        fresh_p, fresh_v = PeerTable(primary), ViewTable(factory)
        legs, _ = _primary_legs(kp, plan.topology, ch, primary, fresh_p, fresh_v)
        # the entry already knows the unit's secondaries (last first) and other views
        busy_p, busy_v = PeerTable(primary), ViewTable(factory)
        for r in (*reversed(unit[1:]), kc.primaries[0]):
            busy_p(r)
            busy_v.get("out", r)
            busy_v.get("in", r)
        again, _ = _primary_legs(kp, plan.topology, ch, primary, busy_p, busy_v)
        assert _decoded(legs, fresh_p, fresh_v) == _decoded(again, busy_p, busy_v)
        # the increments of the secondaries' ``mine`` come in the entry's peer order
        kr = kangaring_sem(ch)
        several = 0
        for leg in again:
            n = int(leg["n_inc"])
            mine = [int(p) for p, s in zip(leg["inc_peer"][:n], leg["inc_sem"][:n]) if s == kr]
            assert mine == sorted(mine)
            several += len(mine) > 1
        assert several or len(unit) <= 2
        assert np.array_equal(legs["start"], again["start"])


def test_an_in_place_all_gather_has_its_own_tables(plan):
    # HIER's intra all-gather leg runs in place over the same channels as a flat all-gather
    # of the same group: the member's own block is not copied into its own output again
    from nrtrewrite.codes import EncOpType
    from nrtrewrite.compose.kangaring import _one_group, _primary_static
    from nrtrewrite.compose.leaves import Leaf
    tp = next(t for t in plan.triggers if t.trigger.op == EncOpType.ALLGATHER)
    kp = tp.prepared.data
    kc = kp.channels[kp.channel_ids[0]]
    rank = kc.primaries[0]
    st = _primary_static(kc, plan.topology, rank, kp.group_index)
    flat, inplace = (_one_group(kc, st, plan.topology, rank, EncOpType.ALLGATHER, False, ip)
                     for ip in (False, True))
    sends = flat.tmpl[:, 2] == int(Leaf.send)
    assert sends.any()
    n_flat = flat.table.tab["n_dst"][flat.row[sends]].astype(int)
    n_inplace = inplace.table.tab["n_dst"][inplace.row[sends]].astype(int)
    assert (n_inplace == n_flat - 1).all()


def test_a_full_memo_starts_again_and_the_entries_stay_the_same(plan, monkeypatch):
    """Each memo of a channel holds at most MEMO_ENTRIES entries (a lowering of every rank in
    one process would grow it with the ranks): a full memo is emptied, not grown, and the
    entries composed after it was emptied are those of a memo that holds them all."""
    from nrtrewrite.compose import kangaring as K

    ranks = [0, 1, 5, 14, 0]
    want = [_entry_bytes(plan, r) for r in ranks]  # 16 ranks: fewer than MEMO_ENTRIES (64)
    monkeypatch.setattr(K, "MEMO_ENTRIES", 1)
    for kc in _channels(plan):
        kc.memo.clear()
    _role_table.cache_clear()
    got = []
    for r in ranks:
        got.append(_entry_bytes(plan, r))
        assert all(len(memo) <= 1 for kc in _channels(plan) for memo in kc.memo.values())
    assert got == want


def test_a_memoised_refused_transfer_is_raised_anew_for_each_model():
    """Review R1: the process-wide ``_role_table`` memo kept a refused transfer's
    ``LoweringError`` and raised that very object; ``NrtRewriteError.at`` fills a raised
    error's location in place, only where it is empty, so a second model needing the same
    table entry was told the first model's trigger and rank.  Each look-up gives a new
    error with the held reason and no location.  (An all-reduce's ``send`` leaf routed to a
    peer across the network: ``__direct_fetch_send`` refuses a peer fan-out with a network
    next hop, enc_primitive.cc:0x3FB.)"""
    from nrtrewrite.codes import EncdNeigh, EncOpType
    from nrtrewrite.compose.leaves import Leaf
    from nrtrewrite.errors import LoweringError

    why = ("__direct_fetch_send: send_to_peers with a network next hop (assert "
           "!send_to_peers || !is_next_net, enc_primitive.cc:0x3FB): a peer fan-out and a net "
           "next hop are exclusive on one step")
    lines = []
    for rank, trigger in ((3, 0), (5, 7)):  # two models, one memo entry
        table = _role_table(EncOpType.ALLREDUCE, False, (int(Leaf.send),),
                            (EncdNeigh.ENCD_NEIGH_PEER_RMTV,), True)
        assert list(table.errors) == [0]  # (the one row: the send leaf's transfer)
        err = table.errors[0]
        assert isinstance(err, LoweringError) and err.line() == why
        lines.append(err.at(rank=rank, trigger=trigger).line())
    assert lines == [f"trigger 0, rank 3: {why}", f"trigger 7, rank 5: {why}"]
