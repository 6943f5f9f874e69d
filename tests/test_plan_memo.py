"""Memoised planning (Topology.cached, the chunk-plan and channel-rule caches, shared HIER
layouts and rings): a hit gives what a fresh computation gives, shared values cannot be
corrupted through what a caller gets, errors are never cached, and a replaced
``set_dynamic_chunk_size`` never meets plans made by another."""

import functools
import json
from pathlib import Path

import pytest

from irsim import SMALL_TWO_NODE_TOPOLOGY, ag, ar, plan_ops, rs
from nrtrewrite.codes import DType, EncAlgType, EncOpType
from nrtrewrite.errors import ValidationError
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.reader import read_model
from nrtrewrite.select import Request, choose_channels, group_shape
from nrtrewrite.topology.model import load_topology
from nrtrewrite.topology.rings import (
    distinct_ring_count, duplicate_flags, kangaring_paths, ring_orders,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def fresh_topo():
    return load_topology("trn2", world=tuple(range(128)), lnc_size=2)


def test_cached_computes_once_and_never_caches_an_error():
    topo = fresh_topo()
    calls = []
    assert topo.cached(("t", 1), lambda: calls.append(1) or "v") == "v"
    assert topo.cached(("t", 1), lambda: calls.append(1) or "w") == "v"
    assert calls == [1]

    def boom():
        calls.append(2)
        raise ValidationError("no")
    for _ in range(2):
        with pytest.raises(ValidationError):
            topo.cached(("t", 2), boom)
    assert calls == [1, 2, 2]


def test_ring_orders_hits_equal_fresh_results_and_callers_get_copies():
    group = tuple(range(0, 128, 3))
    warm = fresh_topo()
    first = ring_orders(warm, group, 8)
    first.append("junk")  # the caller's list, not the cache
    again = ring_orders(warm, group, 8)
    assert again == ring_orders(fresh_topo(), group, 8) == first[:-1]
    assert distinct_ring_count(warm, group, 8) == duplicate_flags(again).count(False)
    with pytest.raises(ValidationError):  # a bad group raises on every call
        ring_orders(warm, (0, 0), 4)
    with pytest.raises(ValidationError):
        ring_orders(warm, (0, 0), 4)


def test_kangaring_paths_and_group_shape_are_stable():
    group = tuple(range(64))
    warm = fresh_topo()
    paths = kangaring_paths(warm, group, 4)
    paths.clear()
    assert kangaring_paths(warm, group, 4) == kangaring_paths(fresh_topo(), group, 4)
    assert group_shape(warm, group) is group_shape(warm, list(group))
    assert group_shape(warm, group) == group_shape(fresh_topo(), group)


def test_channel_rule_is_per_group_and_size():
    topo = fresh_topo()
    for group in ((0, 64), tuple(range(64)), tuple(range(128)), (5,)):
        for nbytes in (4096, 1 << 20, 1 << 28):
            req = Request.for_op(EncOpType.ALLREDUCE, DType.BF16, group, nbytes)
            fresh = choose_channels(fresh_topo(), req, EncAlgType.RING)
            assert choose_channels(topo, req, EncAlgType.RING) == fresh
            assert choose_channels(topo, req, EncAlgType.RING) == fresh


def test_replaced_chunk_plan_function_is_not_served_stale_plans(monkeypatch):
    import nrtrewrite.compose.segments as S
    from nrtrewrite.compose.chunking import set_dynamic_chunk_size

    big = S.segmented_layout(EncOpType.ALLGATHER, [[(0, 50_000)], [(50_000, 100_000)]],
                             DType.BF16, 2)
    monkeypatch.setattr(S, "set_dynamic_chunk_size",
                        functools.partial(set_dynamic_chunk_size, chunk_bytes=256))
    small = S.segmented_layout(EncOpType.ALLGATHER, [[(0, 50_000)], [(50_000, 100_000)]],
                               DType.BF16, 2)
    assert small.plan.chunk < big.plan.chunk and small.groups > big.groups


def test_hier_groups_share_rings_and_intra_layouts():
    plan = plan_lowering(read_model(FIX / "two_node128.neff"), LowerOptions())
    for tp in plan.triggers:
        for lp in tp.prepared.data.legs:
            plans = list(lp.plans.values())
            if lp.name.startswith("intra"):  # every node places its positions alike
                assert all(p.layout is plans[0].layout for p in plans)
    # the same group over several triggers: one ring table
    by_group = {}
    for tp in plan.triggers:
        for lp in tp.prepared.data.legs:
            for g, p in lp.plans.items():
                by_group.setdefault((lp.alg, lp.channel_base, g), []).append(p)
    shared = [ps for ps in by_group.values() if len(ps) > 1]
    assert shared
    for ps in shared:
        for p in ps[1:]:
            if p.layout.channels == ps[0].layout.channels:
                assert p.orders is ps[0].orders and p.group_index is ps[0].group_index


HIER_ALGOS = ["inter_allr:single_cycle_ring", "intra_redsct:kangaring", None]


def _small_hier_plan(tmp_path, algo):
    """An all-reduce, an all-gather and a reduce-scatter over 32 ranks on two nodes."""
    topo = tmp_path / "t.json"
    topo.write_text(json.dumps(SMALL_TWO_NODE_TOPOLOGY))
    return plan_ops([ar(9000), ag(450), rs(32 * 300)], 32, topology=str(topo), algo=algo)


@pytest.mark.parametrize("algo", HIER_ALGOS)
def test_hier_manifest_json_keeps_its_shape(tmp_path, algo):
    plan = _small_hier_plan(tmp_path, algo)
    for tp in plan.triggers:
        doc = json.loads(json.dumps(tp.prepared.manifest))
        for leg in doc["hier"]["legs"]:
            assert leg["plans"] and leg["groups"]
            for g in leg["groups"]:
                assert set(g) == {"group", "plan"}
                assert isinstance(g["group"], list) and all(isinstance(r, int) for r in g["group"])
                assert 0 <= g["plan"] < len(leg["plans"])
            for p in leg["plans"]:
                assert all(isinstance(c["order"], list) for c in p["channels"])
                if "single_cycle" in p:
                    assert all(isinstance(q, list) and len(q) == 2
                               for q in p["single_cycle"]["pairs"])
        assert all(isinstance(s, list) for s in doc["hier"]["slices"])


@pytest.mark.parametrize("algo", HIER_ALGOS)
def test_hier_manifest_plans_in_positions_give_back_every_group_plan(tmp_path, algo):
    """Each group's record in the manifest, its positions turned into the group's ranks, is
    that group's own plan (FORMATS §1.1), and a leg lists each distinct record once."""
    plan = _small_hier_plan(tmp_path, algo)
    engines = set()
    for tp in plan.triggers:
        doc = json.loads(json.dumps(tp.prepared.manifest))
        for lp, leg in zip(tp.prepared.data.legs, doc["hier"]["legs"]):
            engines.add(leg["algorithm"])
            texts = [json.dumps(p, sort_keys=True) for p in leg["plans"]]
            assert len(set(texts)) == len(texts)  # each distinct plan once
            assert len(leg["groups"]) == len(lp.plans)
            for g, (members, p) in zip(leg["groups"], lp.plans.items()):
                group = g["group"]
                assert tuple(group) == members
                rec = leg["plans"][g["plan"]]

                def to_rank(xs, group=group):
                    return [group[i] for i in xs]
                full = json.loads(json.dumps(p.manifest()))  # the plan with its ranks
                assert [{"channel": c["channel"], "order": to_rank(c["order"])}
                        for c in rec["channels"]] == full["channels"]
                assert rec["chunk"] == full["chunk"]
                if "kangaring" in full:
                    assert [{**k, "logical_path": to_rank(k["logical_path"]),
                             "units": [to_rank(u) for u in k["units"]]}
                            for k in rec["kangaring"]] == full["kangaring"]
                assert rec.get("single_cycle") == full.get("single_cycle")
                assert set(rec) == set(full)
    assert "RING" in engines
    if algo == "inter_allr:single_cycle_ring":
        assert "SINGLE_CYCLE_RING" in engines
    if algo == "intra_redsct:kangaring":
        assert "KANGARING" in engines


def test_hier_groups_alike_share_one_plan_record():
    """two_node128: the 64 inter groups of a leg are rings of two ranks, one per node, with
    one chunk plan (an all-gather moves the same count per rank): one record serves all."""
    plan = plan_lowering(read_model(FIX / "two_node128.neff"), LowerOptions())
    shared = 0
    for tp in plan.triggers:
        if tp.alg != EncAlgType.HIER:
            continue
        for leg in tp.prepared.manifest["hier"]["legs"]:
            if leg["name"] == "inter_allg":
                assert len(leg["groups"]) == 64 and len(leg["plans"]) == 1
                assert leg["plans"][0]["channels"][0]["order"] in ([0, 1], (0, 1))
                shared += 1
    assert shared


def test_hier_record_is_made_on_first_use_and_once(monkeypatch):
    """Planning leaves a HIER trigger's ``hier`` record (every group's plan record) to the
    first use of ``Prepared.manifest``; ``brief`` (lower's summary) never makes it, and the
    summary's channel count is the record's last leg's channel_base + channel_ids."""
    import nrtrewrite.compose.hier as H
    from nrtrewrite.cli.lower import _channels

    made = []
    orig = H.LegPlan.manifest
    monkeypatch.setattr(H.LegPlan, "manifest", lambda self: made.append(self.name) or orig(self))
    plan = plan_lowering(read_model(FIX / "two_node128.neff"), LowerOptions())
    hier = [tp for tp in plan.triggers if tp.alg == EncAlgType.HIER]
    assert hier and made == []
    for tp in hier:
        before = len(made)
        assert set(tp.prepared.brief) == {"channels", "chunk"}
        assert tp.prepared.brief["channels"] == []
        n = _channels(tp)
        assert len(made) == before
        rec = tp.prepared.manifest
        names = [lp.name for lp in tp.prepared.data.legs]
        assert made[-len(names):] == names
        before = len(made)
        assert tp.prepared.manifest is rec and len(made) == before  # made once
        legs = rec["hier"]["legs"]
        assert n == max(leg["channel_base"] + leg["channel_ids"] for leg in legs)
        assert [leg["name"] for leg in legs] == names
