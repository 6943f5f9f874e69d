"""The HIER plan's per-leg shortcuts: the channel count chosen once per class of alike
groups (select.choose_channels_each), the ring tables of plan_ring_leg for every count of
active channels, and the manifest parts shared between plans, all give what the per-group
computation gives."""

from pathlib import Path

from nrtrewrite.codes import DType, EncAlgType, EncOpType
from nrtrewrite.compose.segments import (
    RingLegPlan, interleaved_layout, layout_of_segments, plan_ring_leg, segmented_layout,
)
from nrtrewrite.compose.single_cycle import SingleCyclePlan, plan_single_cycle
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.reader import read_model
from nrtrewrite.select import Request, choose_channels, choose_channels_each, hier_groups
from nrtrewrite.topology.model import load_topology
from nrtrewrite.topology.rings import ring_orders

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def fresh_topo(lnc: int = 2):
    return load_topology("trn2", world=tuple(range(128 if lnc == 2 else 256)), lnc_size=lnc)


def test_choose_channels_each_is_choose_channels_of_each_group():
    topo = fresh_topo()
    intra, inter = hier_groups(topo, tuple(range(128)))
    mixed = ((0, 64), (3,), tuple(range(0, 64, 4)), tuple(range(64, 128, 4)), (1, 65),
             tuple(range(16)), tuple(range(0, 128, 8)))
    for groups in (intra, inter, mixed):
        for op in (EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER):
            for alg in (EncAlgType.RING, EncAlgType.SINGLE_CYCLE_RING, EncAlgType.KANGARING,
                        EncAlgType.MESH):
                for nbytes in (64, 4096, 3 << 20, 1 << 28):
                    each = choose_channels_each(topo, op, DType.BF16, groups, nbytes, alg)
                    one = tuple(choose_channels(fresh_topo(), Request.for_op(
                        op, DType.BF16, g, nbytes), alg)[0] for g in groups)
                    assert each == one, (groups, op, alg, nbytes)


def test_ring_leg_tables_match_a_fresh_plan_at_every_channel_count():
    group = tuple(range(0, 64, 2))
    warm = fresh_topo()
    nonempty = [(c, o) for c, o in enumerate(ring_orders(fresh_topo(), group, 4))
                if o is not None]
    for ch in (4, 1, 2, 3, 4):  # the warm table serves every count
        layout = interleaved_layout(EncOpType.ALLREDUCE, 50_000, len(group), DType.BF16, ch)
        p = plan_ring_leg(warm, group, 4, lambda n, lay=layout: lay, channel_base=5)
        active = nonempty[:layout.channels]
        assert p.channel_ids == [5 + c for c, _ in active]
        assert p.orders == {5 + c: o for c, o in active}
        fresh = RingLegPlan(group=p.group, group_index=p.group_index,
                            channel_ids=p.channel_ids, orders=p.orders, layout=p.layout)
        assert p.manifest() == fresh.manifest()
        assert p == fresh


def test_single_cycle_manifest_parts_are_those_of_its_rings():
    topo = fresh_topo()
    for group, n in (((0, 64), 4), ((7,), 2), (tuple(range(0, 128, 16)), 8)):
        sp = plan_single_cycle(topo, group, n, lambda k, g=group: interleaved_layout(
            EncOpType.ALLREDUCE, 10_000, len(g), DType.BF16, max(1, min(k, n // 2))))
        fresh = SingleCyclePlan(group=sp.group, group_index=sp.group_index, pairs=sp.pairs,
                                orders=sp.orders, layout=sp.layout)
        assert sp.manifest() == fresh.manifest() and sp == fresh


def test_layout_of_segments_is_segmented_layout():
    segs = (((0, 96),), ((96, 192),), ((500, 530), (600, 700)))
    for ch in (1, 2, 4):
        assert layout_of_segments(EncOpType.ALLGATHER, segs, DType.FP8_E4, ch) == \
            segmented_layout(EncOpType.ALLGATHER, [list(s) for s in segs], DType.FP8_E4, ch)
    blocks = tuple(((i * 96, (i + 1) * 96),) for i in (3, 67))
    assert layout_of_segments(EncOpType.REDUCE_SCATTER, blocks, DType.BF16, 2, longest=96) == \
        segmented_layout(EncOpType.REDUCE_SCATTER, blocks, DType.BF16, 2)


def test_hier_plans_share_group_maps_and_keep_their_groups():
    plan = plan_lowering(read_model(FIX / "two_node128.neff"), LowerOptions())
    hier = [tp for tp in plan.triggers if tp.alg == EncAlgType.HIER]
    assert hier
    for tp in hier:
        for lp in tp.prepared.data.legs:
            assert set(lp.group_of) == set(tp.group)
            for g, p in lp.plans.items():
                assert all(lp.group_of[r] == g for r in g) and p.group == g
