"""HIER: chained per-leg entries (trigger_next), per-leg engines, disjoint channel ids, the
intermediate buffers, and the composed legs executed symbolically (tests/irsim.py) on small
multi-node topologies; the two-node fixture's selection and entry chain."""

import json
from pathlib import Path

import pytest

import chunkmodel as CM
from irsim import SMALL_TWO_NODE_TOPOLOGY, ag, ar, plan_ops, rs, run_all
from nrtrewrite.codes import EncAlgType, EncOpType
from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering, rank_entries
from nrtrewrite.neff.reader import read_model

FIX = Path(__file__).resolve().parents[1] / "fixtures"
AR_LEGS = ["intra_redsct", "inter_allr", "intra_allg"]


@pytest.fixture(scope="module")
def small_topo(tmp_path_factory):
    path = tmp_path_factory.mktemp("topo") / "trn2-4dev.json"
    path.write_text(json.dumps(SMALL_TWO_NODE_TOPOLOGY))
    return str(path)


@pytest.fixture(scope="module")
def two_node_plan():
    return plan_lowering(read_model(FIX / "two_node128.neff"), LowerOptions())


def test_two_node_fixture_lowers_to_hier(two_node_plan):
    plan = two_node_plan
    legs = {EncOpType.ALLREDUCE: AR_LEGS, EncOpType.ALLGATHER: ["inter_allg", "intra_allg"],
            EncOpType.REDUCE_SCATTER: ["intra_redsct", "inter_redsct"]}
    for tp in plan.triggers:
        assert tp.alg == EncAlgType.HIER
        assert [leg.name for leg in tp.selection.legs] == legs[tp.trigger.op]
    for rank in (0, 63, 64, 127):
        specs = rank_entries(plan, rank)
        for tp in plan.triggers:
            mine = [s for t, s in specs if t is tp]
            assert [s.leg for s in mine] == legs[tp.trigger.op]
            # chained: trigger_next on every entry but the last of the trigger
            assert [s.trigger_next for s in mine] == [True] * (len(mine) - 1) + [False]
            # each entry carries its leg's engine; legs use disjoint channel ids
            chans = [set(s.ir["channel"].tolist()) for s in mine]
            for i in range(len(chans)):
                for j in range(i + 1, len(chans)):
                    assert not chans[i] & chans[j]
            hp = tp.prepared.data
            assert [s.alg for s in mine] == [lp.alg for lp in hp.legs]


def test_two_node_fixture_spad_chain(two_node_plan):
    out = lower_rank(two_node_plan, 64)
    ents = out.manifest["entries"]
    ar0 = [e for e in ents if e["trigger"] == 0]
    assert [e["leg"] for e in ar0] == AR_LEGS
    assert [e["trigger_next"] for e in ar0] == [True, True, False]
    # only the inter leg crosses the network
    assert [e["ring_send_complete"] for e in ar0] == [False, True, False]
    assert out.manifest["fifo"]


@pytest.mark.parametrize("algo", [
    None,
    "inter_allr:single_cycle_ring;intra_redsct:kangaring;intra_allg:kangaring",
    "inter_allr:ring;inter_allg:ring;inter_redsct:ring",
])
def test_hier_collectives_are_correct(small_topo, algo):
    # 2 nodes x 4 devices x 4 ranks (LNC 2); 4001 does not split evenly over 16 local ranks
    plan = plan_ops([ar(4001), ag(300), rs(32 * 64)], 32, topology=small_topo, algo=algo)
    assert all(tp.alg == EncAlgType.HIER for tp in plan.triggers)
    run_all(plan, seed=1)


def test_hier_over_three_nodes(small_topo):
    plan = plan_ops([ar(5000), ag(100), rs(48 * 40)], 48, topology=small_topo,
                    algo="inter_allr:single_cycle_ring;intra_redsct:kangaring")
    run_all(plan)


def test_hier_on_a_subgroup_ordered_by_node(small_topo):
    """Two ranks per node of three nodes, listed out of order: positions follow the group."""
    group = [33, 1, 17, 0, 32, 16]
    plan = plan_ops([ar(999), ag(77), rs(6 * 50)], group, topology=small_topo)
    assert all(tp.alg == EncAlgType.HIER for tp in plan.triggers)
    run_all(plan)


def test_intermediate_buffers_and_slices(small_topo):
    plan = plan_ops([ar(4001)], 32, topology=small_topo,
                    algo="inter_allr:single_cycle_ring")
    tp = plan.triggers[0]
    hp = tp.prepared.data
    assert [lp.name for lp in hp.legs] == AR_LEGS
    lo = [a for a, _b in hp.slices]
    assert lo[0] == 0 and hp.slices[-1][1] == 4001 and len(hp.slices) == 16
    assert all(a % 32 == 0 for a in lo)  # slices start on 32-element boundaries
    # intra_redsct writes MID, inter_allr reads MID and writes the output, intra_allg in place
    assert hp.legs[0].roles["out"][0] == "scratch" and hp.legs[1].roles["in"][0] == "scratch"
    assert hp.legs[1].roles["out"] == ("dst", 0) and hp.legs[2].inplace
    assert tp.prepared.scratch_bytes >= 4 * 4001 * 2  # RECV1, MID, RECV2 x2 (single cycle)


def test_hier_with_several_chunk_groups(small_topo, monkeypatch):
    import functools
    import nrtrewrite.compose.segments as S
    from nrtrewrite.compose.chunking import set_dynamic_chunk_size
    monkeypatch.setattr(S, "set_dynamic_chunk_size",
                        functools.partial(set_dynamic_chunk_size, chunk_bytes=256))
    plan = plan_ops([ar(9000), ag(450), rs(32 * 300)], 32, topology=small_topo,
                    algo="inter_allr:single_cycle_ring;intra_redsct:kangaring;intra_allg:kangaring")
    groups = [p.layout.groups for tp in plan.triggers for lp in tp.prepared.data.legs
              for p in lp.plans.values()]
    assert max(groups) > 1
    run_all(plan, seed=2)


def test_lower_summary_counts_a_hier_triggers_channel_ids_over_its_legs(two_node_plan):
    """CLI.md "lower": the summary's `channels` column is the number of channel ids a trigger
    uses, a HIER trigger's over its legs (disjoint: every leg's ids counted, not one leg's)."""
    import io

    from rich.console import Console

    from nrtrewrite.cli.lower import summary_table

    con = Console(width=200, record=True, file=io.StringIO())
    con.print(summary_table(two_node_plan, "t"))
    rows = {}
    for line in con.export_text().splitlines():
        cells = [c for c in line.split() if c not in "│┃"]
        if cells and cells[0].isdigit():
            rows[int(cells[0])] = cells
    assert len(rows) == len(two_node_plan.triggers)
    for tp in two_node_plan.triggers:
        legs = tp.prepared.data.legs
        ids = {c for lp in legs for c in range(lp.channel_base, lp.channel_base + lp.n_channels)}
        assert len(legs) > 1 and rows[tp.trigger.ordinal][8] == str(len(ids))


def test_hier_legs_stay_far_below_the_32_channel_id_budget():
    """SELECTION.md §7: each leg takes the channel rule's count on its group, at most its share
    of the 32 ids the earlier legs left. The rule's caps keep every leg under its share: an
    intra leg (one node) at most 4 (max_channels_intra), an inter leg at most the distinct
    rings of its group, one rank a node, whose rings are the node chain and its reverse
    (TOPOLOGY.md §3: nodes in ascending order, descending on reversed variants): 2. A 32 MiB
    bf16 all-reduce over 4 trn2 nodes (LNC 2, 64 ranks a node): the intra legs want 32 MiB /
    256 KiB = 128 -> 4; inter_allr moves 2**24 / 64 = 262144 elements (512 KiB) -> 2, as
    SINGLE_CYCLE_RING one pair, 2 ids. Ids 0..3, 4..5, 6..9: 10 of 32, each leg under its
    share (32 // 3 = 10, 28 // 2 = 14, 26), so the shares never bind (mutation audit round 7:
    the budget's arithmetic is not observable)."""
    from nrtrewrite.select import hier_groups
    from nrtrewrite.topology.rings import distinct_ring_count

    plan = plan_ops([ar(1 << 24)], 256, nbytes=1 << 25)
    tp = plan.triggers[0]
    # the counts by tests/chunkmodel.py's channel rule: intra legs see the message inside a
    # node (64 local ranks, at least 4 rings), inter_allr its widest even_split slice across
    # 4 nodes (2 rings), as max(1, n / 2) SINGLE_CYCLE_RING pairs of 2 ids
    n, local_n, node_n = 1 << 24, 64, 4
    intra = CM.channel_rule(2 * n, n, local_n, inter=False, rings=4)
    widest = max(CM.even_split(n, local_n))
    pairs = max(1, CM.channel_rule(2 * widest, widest, node_n, inter=True, rings=2) // 2)
    counts = [intra, 2 * pairs, intra]
    bases = [sum(counts[:k]) for k in range(3)]  # each leg's ids right after the leg before
    assert [(lp.name, lp.alg, lp.channel_base, lp.n_channels) for lp in tp.prepared.data.legs] == [
        ("intra_redsct", EncAlgType.RING, bases[0], counts[0]),
        ("inter_allr", EncAlgType.SINGLE_CYCLE_RING, bases[1], counts[1]),
        ("intra_allg", EncAlgType.RING, bases[2], counts[2])]
    assert list(zip(bases, counts)) == [(0, 4), (4, 2), (6, 4)]
    _intra, inter = hier_groups(plan.topology, range(256))
    assert len(inter) == 64 and inter[5] == (5, 69, 133, 197)
    assert {distinct_ring_count(plan.topology, g, 16) for g in inter} == {2}


@pytest.mark.parametrize("elements, leg_bytes, alg", [
    # 8,388,604 bf16 over 4 local ranks: the even share 2,097,151 is over 32, so even_split
    # cuts 32-aligned slices of 2,097,152 (the last shorter): 4 MiB, outside the
    # SINGLE_CYCLE_RING window (< 4 MiB), where ceil(n / 4) x 2 = 4,194,302 B was inside
    (8_388_604, 4 * 2 ** 20, "RING"),
    # 131,068 elements: slices of 32,768 = 65,536 B, outside the inter MESH window (< 64 KiB)
    (131_068, 65_536, "SINGLE_CYCLE_RING"),
])
def test_an_inter_leg_is_sized_by_the_slices_it_moves(tmp_path, elements, leg_bytes, alg):
    """SELECTION.md §5 (an exploratory tester): the size windows judge an inter leg by the
    largest slice the composer's even_split gives it, not by ceil(n / local_rank_n)."""
    from click.testing import CliRunner
    from nrtrewrite.cli import main
    topo = tmp_path / "t.json"  # 2 nodes x 2 devices x 2 cores, lnc 1: 4 local ranks
    topo.write_text(json.dumps({"torus": [1, 2], "nodes": 2, "lnc_size": 1, "device": {
        "dies": 1, "sengines_per_die": 1, "tpbs_per_sengine": 2}}))
    res = CliRunner().invoke(main, ["explain", "--op", "allreduce", "--bytes", str(2 * elements),
                                    "--group", "0-7", "--lnc", "1", "--topology", str(topo),
                                    "--json"])
    assert res.exit_code == 0, res.output
    legs = {leg["name"]: leg for leg in json.loads(res.output)["triggers"][0]["lowered"]["legs"]}
    assert legs["inter_allr"]["bytes"] == leg_bytes
    assert legs["inter_allr"]["algorithm"] == alg
