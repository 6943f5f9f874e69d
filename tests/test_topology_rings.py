"""Rings per channel and kangaring paths: properties (hypothesis, bounded) and fixed cases."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nrtrewrite.codes import EdgeLocality
from nrtrewrite.errors import LimitError, SelectionError, ValidationError
from nrtrewrite.topology.rings import distinct_ring_count, successor_pairs
from nrtrewrite.topology import (
    duplicate_flags, enc_ring, enc_rings, hop_localities, is_hybrid_ring, kangaring_identity,
    kangaring_paths, load_topology, ring_orders,
)

TRN2 = load_topology("trn2:nodes=2", world=(), lnc_size=2)
TRN2_L1 = load_topology("trn2", world=(), lnc_size=1)
TRN1 = load_topology("trn1:nodes=2", world=(), lnc_size=1)
TOPOS = {"trn2": TRN2, "trn2_l1": TRN2_L1, "trn1": TRN1}

FAST = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@st.composite
def topo_group_channels(draw):
    topo = TOPOS[draw(st.sampled_from(sorted(TOPOS)))]
    size = draw(st.integers(min_value=1, max_value=min(48, topo.world_size)))
    group = draw(st.lists(st.integers(0, topo.world_size - 1), min_size=size, max_size=size,
                          unique=True))
    n_channels = draw(st.integers(1, 8))
    return topo, tuple(group), n_channels


@FAST
@given(topo_group_channels())
def test_rings_are_hamiltonian_cycles_with_consistent_views(args):
    topo, group, n_channels = args
    orders = ring_orders(topo, group, n_channels)
    assert len(orders) == n_channels
    if len(group) == 1:
        assert orders == [None] * n_channels
        r = enc_ring(None, group[0])
        assert (r.prev, r.next, r.user_ranks) == (-1, -1, ())
        return
    nodes = {topo.info(r).node for r in group}
    for order in orders:
        assert sorted(order) == sorted(group)           # each rank exactly once
        assert order[0] == min(group)
        views = {r: enc_ring(order, r) for r in group}
        n = len(group)
        for r, v in views.items():
            assert v.user_ranks[0] == r
            assert len(v.user_ranks) == n
            assert views[v.next].prev == r and views[v.prev].next == r
            for i in range(n):                           # user_ranks[i] is i hops ahead
                assert views[v.user_ranks[i]].user_ranks[(n - i) % n] == r
            assert v.user_ranks[1] == v.next and v.user_ranks[-1] == v.prev
        hops = hop_localities(topo, order)
        # nodes are chained: exactly one network hop per node boundary, none inside a node
        assert hops[EdgeLocality.NETWORK] == (len(nodes) if len(nodes) > 1 else 0)
        # every group device is visited as one contiguous run (same-device hops first)
        devs = [(topo.info(r).node, topo.info(r).device) for r in order]
        runs = sum(1 for i in range(n) if devs[i] != devs[i - 1])
        assert runs == (len(set(devs)) if len(set(devs)) > 1 else 0)


@FAST
@given(topo_group_channels())
def test_rings_deterministic_and_duplicates_flagged(args):
    topo, group, n_channels = args
    a = ring_orders(topo, group, n_channels)
    b = ring_orders(topo, tuple(reversed(group)), n_channels)
    assert a == b                                    # depends on the rank set only
    flags = duplicate_flags(a)
    # distinct rings first: once a channel repeats an earlier ring, all later ones do
    if True in flags:
        assert all(flags[flags.index(True):])
    rings = enc_rings(a, group[0])
    assert [r.duplicate for r in rings] == flags
    seen = []
    for order, dup in zip(a, flags):
        if order is None:
            continue
        succ = {(order[i], order[(i + 1) % len(order)]) for i in range(len(order))}
        assert dup == (succ in seen)
        seen.append(succ)


@FAST
@given(topo_group_channels())
def test_a_group_has_one_set_of_distinct_rings_whatever_the_count(args):
    """A count of n channels repeats no ring while the group has n distinct rings: the
    distinct count of n channels is min(n, the distinct count of 32), so the channel rule's
    cap (the distinct count at its scope cap, docs/SELECTION.md §7) never lets a channel
    repeat a ring.  (A multi-node group's rotation stride depends on the count: before, 8
    channels over 1 8 20 49 102 at lnc 2 took 4 rings twice while 16 held 8 distinct.)"""
    topo, group, _ = args
    if len(group) == 1:
        return
    total = duplicate_flags(ring_orders(topo, group, 32)).count(False)
    for n in range(1, 17):
        flags = duplicate_flags(ring_orders(topo, group, n))
        assert flags.count(False) == min(n, total), (group, n)
        assert distinct_ring_count(topo, group, n) == min(n, total)


@pytest.mark.parametrize("group, lnc, n", [
    ((1, 8, 20, 49, 102), 2, 8),             # found by an exploratory tester: 4 rings twice
    ((0, 1, 4, 5, 64, 65, 68, 69), 2, 4),    # the same through --algo ring: 2 rings twice
])
def test_the_chosen_channel_count_of_a_flat_multi_node_ring_repeats_no_ring(group, lnc, n):
    from nrtrewrite.codes import DType, EncAlgType, EncOpType
    from nrtrewrite.select import Request, choose_channels
    topo = load_topology("trn2:nodes=2", world=(), lnc_size=lnc)
    req = Request.for_op(EncOpType.ALLREDUCE, DType.BF16, group, 8 << 20)
    count, why = choose_channels(topo, req, EncAlgType.RING)
    assert duplicate_flags(ring_orders(topo, group, count)) == [False] * count
    assert count >= n, why


def test_full_node_four_channels_use_every_directed_link_once():
    orders = ring_orders(TRN2, range(64), 4)
    assert duplicate_flags(orders) == [False] * 4
    used = []
    for order in orders:
        hops = hop_localities(TRN2, order)
        assert hops[EdgeLocality.C2C_PORT] == 0 and hops[EdgeLocality.NETWORK] == 0
        assert hops[EdgeLocality.DEVICE_LINK] == 16
        for i in range(64):
            a, b = TRN2.info(order[i]), TRN2.info(order[(i + 1) % 64])
            if a.device != b.device:
                used.append((a.device, b.device))
    assert len(used) == 64 and len(set(used)) == 64     # 4x4 torus: 64 directed links
    assert orders[2] == (0,) + tuple(reversed(orders[0][1:]))   # channel 2 = channel 0 reversed


def test_concurrent_groups_share_device_order():
    """Deadlock freedom: the four one-rank-per-device groups of a node (same device set)
    walk the devices in the same order and direction on every channel."""
    groups = [tuple(range(lc, 64, 4)) for lc in range(4)]
    per_group = [ring_orders(TRN2, g, 4) for g in groups]
    for c in range(4):
        dev_orders = [tuple(TRN2.info(r).device for r in orders[c]) for orders in per_group]
        assert len(set(dev_orders)) == 1
    # and disjoint groups give disjoint rings
    for i, gi in enumerate(per_group):
        for gj in per_group[i + 1:]:
            assert not set(gi[0]) & set(gj[0])


def test_row_group_restricts_canonical_cycle_without_routed_hops():
    row = tuple(range(16))            # devices 0..3, a torus row
    for order in ring_orders(TRN2, row, 4):
        assert hop_localities(TRN2, order)[EdgeLocality.C2C_PORT] == 0


def test_one_device_group_gets_forward_and_reverse_rings():
    orders = ring_orders(TRN2, (8, 9, 10, 11), 3)
    assert orders[0] == (8, 9, 10, 11) and orders[1] == (8, 11, 10, 9)
    assert duplicate_flags(orders) == [False, False, True]


def test_successor_pairs_is_the_directed_cycle_whichever_rank_it_starts_at():
    """docs/TOPOLOGY.md §3 step 5: a ring's directed cycle is its rank -> successor hops,
    the last rank's successor the first; a rotation is the same cycle, the reverse is not
    (but for two ranks, whose reverse is the same cycle)."""
    assert successor_pairs((8, 11, 10, 9)) == {(8, 11), (11, 10), (10, 9), (9, 8)}
    assert successor_pairs((10, 9, 8, 11)) == successor_pairs((8, 11, 10, 9))
    assert successor_pairs((9, 10, 11, 8)) == {(9, 10), (10, 11), (11, 8), (8, 9)}
    assert successor_pairs((9, 10, 11, 8)) != successor_pairs((8, 11, 10, 9))
    assert successor_pairs((3, 5)) == successor_pairs((5, 3)) == {(3, 5), (5, 3)}


def test_non_adjacent_devices_fall_back_to_routed_hop():
    diag = (0, 20)                    # devices 0 and 5: not torus neighbours
    (order,) = ring_orders(TRN2, diag, 1)
    assert hop_localities(TRN2, order)[EdgeLocality.C2C_PORT] == 2


def test_dfs_finds_link_only_cycle_when_restriction_is_routed():
    # devices 0, 1, 5, 4: a 2x2 square of the torus; H0 visits them as 0,1,4,5 (1-4 is not a link)
    group = tuple(r for d in (0, 1, 4, 5) for r in range(4 * d, 4 * d + 4))
    for order in ring_orders(TRN2, group, 4):
        assert hop_localities(TRN2, order)[EdgeLocality.C2C_PORT] == 0


def test_multi_node_channels_move_exit_device():
    orders = ring_orders(TRN2, range(128), 8)
    assert duplicate_flags(orders) == [False] * 8
    exits = set()
    for order in orders:
        for i in range(128):
            a, b = order[i], order[(i + 1) % 128]
            if TRN2.locality(a, b) == EdgeLocality.NETWORK and TRN2.info(a).node == 0:
                exits.add(TRN2.info(a).device)
    assert len(exits) > 1


def test_hybrid_ring_rule():
    g = tuple(range(1, 64, 4))                       # 16 ranks, one per device, core 1
    assert is_hybrid_ring(TRN2, g)
    assert not is_hybrid_ring(TRN2, tuple(range(0, 64, 4))[:8])
    assert not is_hybrid_ring(TRN2, (0, 5, 8, 12) + tuple(range(16, 64, 4)))  # mixed cores
    assert not is_hybrid_ring(TRN2_L1, tuple(range(0, 128, 8)))              # vcore 1


def test_ring_errors():
    with pytest.raises(LimitError, match="NEC_MAX_CHANNELS"):
        ring_orders(TRN2, range(4), 33)
    with pytest.raises(ValidationError, match="twice"):
        ring_orders(TRN2, (1, 1), 1)
    with pytest.raises(ValidationError, match="not on this ring"):
        enc_ring((0, 1), 5)


# -- kangaring ---------------------------------------------------------------------------------

@pytest.mark.parametrize("topo, group", [
    (TRN2, tuple(range(64))), (TRN2, tuple(range(8, 24))), (TRN2_L1, tuple(range(128))),
    (TRN2_L1, tuple(range(16))),
])
def test_kangaring_paths(topo, group):
    channels = kangaring_paths(topo, group, 4)
    unit = 2 if topo.lnc_size == 2 else 4
    primary_count = {r: 0 for r in group}
    for ch in channels:
        assert sorted(ch.logical_path) == sorted(group)        # every rank once
        assert len(ch.primaries) == len(group) // unit
        assert ch.logical_path == tuple(m for u in ch.units for m in u)
        n = len(ch.primaries)
        for i, p in enumerate(ch.primaries):
            v = ch.of(p)
            assert v.is_primary and v.vnc == topo.lnc_size
            assert v.next == ch.primaries[(i + 1) % n] and v.prev == ch.primaries[i - 1]
            assert v.next_peer_rmtv == ch.of(v.next).peer_rmtv
            a, b = topo.info(p), topo.info(v.next)
            assert v.port == (topo.link_port(a.device, b.device) if a.device != b.device
                              and topo.linked(a.device, b.device) else -1)
            primary_count[p] += 1
        for u in ch.units:
            for m in u[1:]:
                v = ch.of(m)
                assert not v.is_primary and v.prev == v.next == u[0]
            # a unit is one die pair: s-engines k and k^2 of one device
            infos = [topo.info(m) for m in u]
            assert len({(i.node, i.device) for i in infos}) == 1
            assert {i.sengine for i in infos} in ({0, 2}, {1, 3})
        for r in group:
            v = ch.of(r)
            assert topo.info(v.peer_rmtv).sengine == topo.info(r).sengine ^ 2
            if topo.lnc_size == 2:
                assert v.peer_rmtv2 == v.peer_local == -1
            else:
                assert topo.info(v.peer_rmtv2).sengine == topo.info(r).sengine ^ 2
                assert topo.info(v.peer_local).sengine == topo.info(r).sengine
                assert len({r, v.peer_rmtv, v.peer_rmtv2, v.peer_local}) == 4
    # over the first four channels each rank is primary 4/unit times (alternating roles)
    assert set(primary_count.values()) == {4 // unit}


def _doc_identity(units):
    """TOPOLOGY.md "Kangaring": the directed cycle of the primaries (as successor pairs, so
    wherever the path starts) and the units."""
    prim = [u[0] for u in units]
    return (frozenset(zip(prim, prim[1:] + prim[:1])), tuple(sorted(units)))


def test_a_kangaring_duplicate_is_the_same_directed_cycle_of_primaries_and_the_same_units():
    """TOPOLOGY.md: ``duplicate`` marks a kangaring channel whose primaries form the same
    directed cycle as an earlier channel's, wherever its path starts (as a ring's
    ``duplicate``), with the same units; the reversed cycle, another order, or the same
    primaries with other secondaries are channels of their own."""
    a = ((0, 2), (4, 6), (8, 10))
    assert kangaring_identity(((4, 6), (8, 10), (0, 2))) == kangaring_identity(a)  # rotated
    for other in (((8, 10), (4, 6), (0, 2)),  # reversed
                  ((0, 2), (8, 10), (4, 6)),  # another order (over 3 units: the reverse)
                  ((2, 0), (4, 6), (8, 10)),  # another primary in one unit
                  ((0, 10), (4, 6), (8, 2))):  # same primaries, other secondaries
        assert kangaring_identity(other) != kangaring_identity(a), other
    # and the flags of 32 channels of trn2 presets, by the doc's rule
    for topo, group in ((TRN2, tuple(range(64))), (TRN2_L1, tuple(range(128)))):
        channels = kangaring_paths(topo, group, 32)
        seen, want = set(), []
        for ch in channels:
            want.append(_doc_identity(ch.units) in seen)
            seen.add(_doc_identity(ch.units))
        assert [ch.duplicate for ch in channels] == want
        assert 0 < want.count(False) < 32


def test_kangaring_refusals():
    with pytest.raises(SelectionError, match="intra-node only"):
        kangaring_paths(TRN2, (0, 1, 2, 3, 64, 65, 66, 67), 1)
    with pytest.raises(SelectionError, match="every rank of each device"):
        kangaring_paths(TRN2, (0, 1, 4, 5), 1)
    with pytest.raises(SelectionError, match="no kangaring"):
        kangaring_paths(TRN1, tuple(range(8)), 1)


def test_channel_variants_are_twice_the_platform_device_cycles(tmp_path):
    """docs/TOPOLOGY.md "How an order is built" 1: candidate k walks variant k % V, V twice
    the platform's device cycles. A node of 4 devices linked each to each, with three cycles
    C0 = 0 1 2 3, C1 = 0 2 1 3, C2 = 0 1 3 2, at LNC 2 (4 ranks a device, r // 4): V = 6, so
    6 distinct rings, the three cycles forward and then reversed (the reverse of the whole
    forward ring, opened at rank 0), and a seventh channel repeats channel 0 (with `k % 4`
    channel 4 would walk C0 again, forward)."""
    topo_file = tmp_path / "k4.json"
    topo_file.write_text(json.dumps({
        "format": "nrtrewrite-topology/1", "platform": "trn2", "devices_per_node": 4,
        "links": [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]],
        "device_cycles": [[0, 1, 2, 3], [0, 2, 1, 3], [0, 1, 3, 2]]}))
    topo = load_topology(str(topo_file), world=tuple(range(16)), lnc_size=2)

    def ranks(devices):
        return tuple(r for d in devices for r in range(4 * d, 4 * d + 4))

    def backwards(order):
        return (order[0],) + tuple(reversed(order[1:]))

    c0, c1, c2 = ranks((0, 1, 2, 3)), ranks((0, 2, 1, 3)), ranks((0, 1, 3, 2))
    orders = ring_orders(topo, tuple(range(16)), 7)
    assert orders == [c0, c1, c2, backwards(c0), backwards(c1), backwards(c2), c0]
    assert duplicate_flags(orders) == [False] * 6 + [True]


def test_a_kangaring_units_secondaries_keep_the_member_order_whoever_is_primary():
    """docs/TOPOLOGY.md §4: at vnc 1 (trn2, LNC 1: TPB r % 8, s-engine TPB // 2) device 0's
    unit of s-engines 0 and 2 has members (S0 t0, S2 t0, S2 t1, S0 t1) = ranks 0, 4, 5, 1,
    its other unit 2, 6, 7, 3; channel c's primary is member c % 4, followed by the other
    members in member order (not the primary's own peer order)."""
    paths = kangaring_paths(TRN2_L1, tuple(range(16)), 4)
    want = {0: [(0, 4, 5, 1), (2, 6, 7, 3)], 1: [(4, 0, 5, 1), (6, 2, 7, 3)],
            2: [(5, 0, 4, 1), (7, 2, 6, 3)], 3: [(1, 0, 4, 5), (3, 2, 6, 7)]}
    for c, units in want.items():
        assert set(units) <= set(paths[c].units), (c, paths[c].units)
