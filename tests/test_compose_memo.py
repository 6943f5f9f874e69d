"""The per-rank memos of the RDH and mesh composers (compose/rdh.rdh_rank, mesh_peers.far) and
the shortcuts of the record lowering (params.copy_rows' one-row-per-destination grouping,
reduce_rows' peer numbering)."""

from types import SimpleNamespace

import pytest

from nrtrewrite.codes import DType, EncAlgType, EncOpType
from nrtrewrite.compose import params as P
from nrtrewrite.compose.mesh import mesh_peers
from nrtrewrite.compose.rdh import plan_rdh, rdh_rank
from nrtrewrite.errors import LoweringError
from nrtrewrite.topology.model import load_topology


def _plan(group, op=EncOpType.ALLREDUCE):
    trig = SimpleNamespace(replica_group=group, op=op, dtype=DType.BF16, num_elements=1 << 12,
                           group_size=len(group))
    return plan_rdh(EncAlgType.INTRA_RDH, trig, None)


def test_rdh_rank_is_memoised_and_matches_the_hypercube():
    topo = load_topology("trn2", world=tuple(range(16)), lnc_size=1)
    group = tuple(range(6))  # 4 core ranks, 2 folded
    plan = _plan(group)
    a = rdh_rank(topo, plan, 0)
    assert rdh_rank(topo, _plan(group), 0) is a and rdh_rank(topo, plan, 2) is not a
    assert rdh_rank(topo, _plan(group, EncOpType.ALLGATHER), 0) is not a
    # rank 0 is core 0 with extra rank 1; RH partners cores 2 then 1 (ranks 4, 2), RD the reverse
    assert [nm for nm, _g in a.stages] == ["fold", "rh0", "rh1", "rd0", "rd1", "unfold", "end"]
    assert [g for _nm, g in a.stages] == [(0, 1), (0, 4), (0, 2), (0, 2), (0, 4), (0, 1), (0,)]
    assert a.peers == (0, 1, 4, 2) and a.near == (1, 4, 2) and not a.net
    assert a.stage_index["rd0"] == 3 and a.ngroups.groups == tuple(g for _n, g in a.stages)
    assert not a.handshake.flags.writeable and list(a.handshake["inc_peer"][0][:3]) == [1, 2, 3]
    folded = rdh_rank(topo, plan, 1)
    assert [g for _nm, g in folded.stages] == [(1, 0), (1, 0), (1,)] and folded.peers == (1, 0)


def test_mesh_peers_far_are_the_peers_off_this_device():
    topo = load_topology("trn2", world=tuple(range(16)), lnc_size=1)
    p = mesh_peers(topo, tuple(range(16)), 5)
    assert p.far == tuple(r for r in p.peers[1:] if r not in p.near)
    assert set(p.far) | set(p.same_dev) == set(p.peers[1:])


def _copy(offsets, sizes, d_elems, skip=None):
    n = len(offsets)
    return P.EncCopyOpParams(s_addr=P.Addr(0, 0), s_offsets=list(offsets),
                             d_addrs=[P.Addr(10 + k, e) for k, e in enumerate(d_elems)],
                             d_skip_copy=list(skip or [False] * n), d_ranks=list(range(n)),
                             copy_sizes=list(sizes))


def test_copy_rows_one_row_per_destination_when_every_range_differs():
    # destination 2 skipped, 3 empty; the others each their own block
    op = _copy([0, 8, 16, 24, 32], [8, 8, 8, 0, 8], [0, 4, 8, 12, 16], [False, False, True,
                                                                           False, False])
    rows = P.copy_rows(op, P.RowSpec(0, 16), 2, 0, lambda r: r + 1, lambda r: 200)
    assert list(rows["start"]) == [0, 4, 16] and list(rows["stop"]) == [4, 8, 20]
    assert list(rows["n_dst"]) == [1, 1, 1] and list(rows["dst_view"][:, 0]) == [10, 11, 14]
    assert list(rows["inc_peer"][:, 0]) == [1, 2, 5] and list(rows["n_inc"]) == [1, 1, 1]
    # two destinations sharing a range share a row (in order of first appearance)
    op = _copy([8, 0, 8], [8, 8, 8], [4, 0, 4])
    rows = P.copy_rows(op, P.RowSpec(0, 16), 2, 0, lambda r: r + 1, lambda r: 200)
    assert list(rows["start"]) == [4, 0] and list(rows["n_dst"]) == [2, 1]
    assert list(rows["dst_view"][0][:2]) == [10, 12]


def test_copy_rows_names_the_first_destination_that_fails():
    # destination 0 lands at the wrong element, destination 1 splits an element
    op = _copy([0, 3], [8, 8], [1, 1])
    with pytest.raises(LoweringError, match="destination 0"):
        P.copy_rows(op, P.RowSpec(0, 16), 2, 0, lambda r: r, lambda r: None)
    op = _copy([3, 0], [8, 8], [1, 1])
    with pytest.raises(LoweringError, match="whole number of elements"):
        P.copy_rows(op, P.RowSpec(0, 16), 2, 0, lambda r: r, lambda r: None)


def test_reduce_rows_numbers_neighbours_on_first_sight_in_record_order():
    ng = P.NeighborGroups(((7, 5, 9), (9, 7)))
    ops = [P.EncReduceOpParams(s_addrs=[P.Addr(1, 0), P.Addr(2, 0)], src_idx=[2, 0],
                               d_addrs=[P.Addr(3, 0)], dst_idx=[1], reduce_size=8),
           P.EncReduceOpParams(s_addrs=[P.Addr(1, 4), P.Addr(2, 4)], src_idx=[1, 2],
                               d_addrs=[P.Addr(3, 4)], dst_idx=[0], reduce_size=8)]
    seen = []

    def peer_index(r):
        seen.append(r)
        return len(seen)

    rows = P.reduce_rows(ops, P.RowSpec(0, 16), 2, ng, 0, 1, peer_index)
    # peer_index once per (group, neighbour): 9, 7 (group 0), 7 (group 1), 5 (group 0), 9
    assert seen == [9, 7, 7, 5, 9]
    assert [list(r["src_peer"][:2]) for r in rows] == [[1, 2], [4, 1]]
    assert [int(r["dst_peer"][0]) for r in rows] == [3, 5]


def test_a_ranks_values_are_kept_for_the_ranks_used_last_only():
    """Topology.cached_for_rank: a rank's composed values were kept for the life of the
    topology, so lowering every rank of a HIER leg of 512 local ranks held every rank's
    rows: 438 MB for 0.5 MB of a rank's output (a tester of large groups; 68 MB now).
    Values are reused while their rank is among the RANK_CACHE_RANKS used last."""
    from nrtrewrite.topology import model as M
    topo = load_topology("trn2", world=(), lnc_size=2)
    made = []

    def value(rank, key):
        return topo.cached_for_rank(rank, key, lambda: made.append((rank, key)) or object())
    a = value(0, "k")
    assert value(0, "k") is a and made == [(0, "k")]
    for r in range(1, M.RANK_CACHE_RANKS):  # rank 0 and 7 others: all kept
        value(r, "k")
    assert value(0, "k") is a  # (rank 0 now the most recent)
    value(M.RANK_CACHE_RANKS, "k")  # one rank more: the least recent (rank 1) goes
    assert len(topo._rank_cache) == M.RANK_CACHE_RANKS
    assert 1 not in topo._rank_cache and 0 in topo._rank_cache
    n = len(made)
    value(1, "k")
    assert len(made) == n + 1  # made again


def test_lowering_every_rank_keeps_a_bounded_number_of_ranks_values():
    from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
    from nrtrewrite.neff.reader import read_model
    from nrtrewrite.topology import model as M
    from pathlib import Path
    fix = Path(__file__).resolve().parents[1] / "fixtures"
    plan = plan_lowering(read_model(fix / "two_node128.neff"), LowerOptions())
    topo = plan.topology
    for r in plan.world[:40]:
        lower_rank(plan, r, lambda name, arr: None)
        assert len(topo._rank_cache) <= M.RANK_CACHE_RANKS
    assert set(topo._rank_cache) <= set(plan.world[:40])
