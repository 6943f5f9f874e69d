"""MESH and RDH entries from templates composed in block units (compose/blockunits.py): the
same entries as composing each trigger directly, whatever the triggers sharing a template, and
the template is memoised on the run's topology only."""

from __future__ import annotations

import meshcase
import pytest

from nrtrewrite.codes import EncMeshEventType
from nrtrewrite.compose import mesh as M
from nrtrewrite.compose import rdh as R
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.lower import LowerOptions, _entries_of, plan_lowering, rank_entries
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.reader import read_model_bytes

NODES8 = [0, 128, 256, 384, 512, 640, 768, 896]


def _plan(sp: dict, algo: str):
    model = read_model_bytes(assemble_spec(sp), path="blockunits.neff")
    return plan_lowering(model, LowerOptions(algo=algo))


def _key(tp, spec) -> tuple:
    """Everything an entry hands the emitter, comparable."""
    return (tp.trigger.ordinal, spec.ir.tobytes(),
            [(v.dsize, v.origin, v.base, v.ap, v.partition_stride, v.anchor) for v in spec.views],
            spec.peers, spec.info, spec.algo_sub_type, spec.gw_view)


def _entries(plan, rank: int) -> list[tuple]:
    return [_key(tp, spec) for tp, spec in rank_entries(plan, rank)]


def _each_alone(sp: dict, algo: str, rank: int) -> list[tuple]:
    """Each trigger's entry of ``rank``, the trigger lowered in a fresh plan (and topology) of
    the model, so that it shares its template with no other trigger."""
    out = []
    for k in range(len(_plan(sp, algo).triggers)):
        fresh = _plan(sp, algo)
        tp = fresh.triggers[k]
        (spec,) = _entries_of(fresh, tp, rank)
        out.append(_key(tp, spec))
    return out


def _direct(monkeypatch, module, sp: dict, algo: str, rank: int) -> list[tuple]:
    """The entries composed directly in each trigger's elements (no template)."""
    with monkeypatch.context() as mp:
        mp.setattr(module, "block_edges", lambda *args: None)
        return _entries(_plan(sp, algo), rank)


def _mesh_triggers(n: int) -> list[tuple]:
    """All-reduce counts even, uneven, fewer than the ranks (empty blocks: composed directly)
    and with blocks of several 64 KiB DMA pages (the reduce repeated per page); the same for
    reduce-scatter (a multiple of the group size) and all-gather."""
    return [("all_reduce", "bf16", "add", 999), ("all_reduce", "bf16", "add", 4096),
            ("all_reduce", "fp8_e4", "max", 3), ("all_reduce", "bf16", "add", 300_001),
            ("reduce_scatter", "fp16", "min", 100 * n), ("reduce_scatter", "bf16", "add", n),
            ("reduce_scatter", "fp32r", "add", 40_000 * n),
            ("all_gather", "fp8_e4", None, 77), ("all_gather", "bf16", None, 1)]


@pytest.mark.parametrize("group", [[0, 1, 2, 3, 8, 9], list(range(12)), NODES8])
def test_mesh_entries_from_templates_are_the_directly_composed_ones(monkeypatch, group):
    sp = meshcase.spec([group], _mesh_triggers(len(group)))
    for rank in (group[0], group[-1], group[len(group) // 2]):
        want = _direct(monkeypatch, M, sp, "mesh", rank)
        assert _entries(_plan(sp, "mesh"), rank) == want


def test_triggers_sharing_a_mesh_template_get_the_entries_they_get_alone():
    group = list(range(8))
    trig = [("all_reduce", "bf16", "add", 5000), ("all_reduce", "bf16", "add", 80_000),
            ("all_reduce", "bf16", "add", 8)]
    sp = meshcase.spec([group], trig)
    plan = _plan(sp, "mesh")
    assert _entries(plan, 3) == _each_alone(sp, "mesh", 3)
    # the three share one template: same group, op, element size and rank
    topo, plans = plan.topology, [tp.prepared.data for tp in plan.triggers]
    assert M.mesh_template(topo, plans[0], 3) is M.mesh_template(topo, plans[2], 3)
    assert M.mesh_template(topo, plans[0], 4) is not M.mesh_template(topo, plans[0], 3)


def test_mesh_reduce_of_several_pages_one_record_per_64k_page():
    # 4 ranks, bf16, 70000-element blocks: rank 1 reduces [70000, 140000) in pages of 32768
    plan = _plan(meshcase.spec([[0, 1, 2, 3]], [("all_reduce", "bf16", "add", 280_000)]),
                 "mesh")
    ((_tp, spec),) = rank_entries(plan, 1)
    ir = spec.ir
    red = ir[ir["leaf"] == int(Leaf.mesh_reduce)]
    assert [(int(r["start"]), int(r["stop"])) for r in red] == [
        (70_000, 102_768), (102_768, 135_536), (135_536, 140_000)]
    assert [int(r["n_wait"]) for r in red][1:] == [0, 0] and red[0]["n_wait"] > 0
    assert set(red["phase"]) == {int(EncMeshEventType.EVT_REDUCE_WRITE)}
    assert list(ir["step"]) == list(range(ir.size))


def test_templates_live_on_the_run_topology():
    sp = meshcase.spec([list(range(8))], [("all_reduce", "bf16", "add", 5000)])
    first, second = _plan(sp, "mesh"), _plan(sp, "mesh")
    rank_entries(first, 0)
    data = first.triggers[0].prepared.data
    key = ("mesh.template", data.group, data.op, data.dsize)  # rank 0's (cached_for_rank)
    assert key in first.topology._rank_cache[0]
    assert second.topology is not first.topology and 0 not in second.topology._rank_cache


# -- RDH ---------------------------------------------------------------------------------------

def _rdh_triggers(n: int) -> list[tuple]:
    """All-reduce counts even, uneven and fewer than the core ranks (empty super-blocks:
    composed directly); reduce-scatter and all-gather blocks of one and of many elements."""
    return [("all_reduce", "bf16", "add", 50_000), ("all_reduce", "fp8_e4", "max", 1001),
            ("all_reduce", "bf16", "add", 3), ("reduce_scatter", "bf16", "add", 7000 * n),
            ("reduce_scatter", "fp16", "min", n), ("all_gather", "fp16", None, 10_000),
            ("all_gather", "fp8_e5", None, 1)]


@pytest.mark.parametrize("group,algo", [(list(range(8)), "intra_rdh"),
                                        (list(range(6)), "intra_rdh"),  # 2 folded ranks
                                        ([0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14], "intra_rdh"),
                                        (NODES8, "inter_rdh")])
def test_rdh_entries_from_templates_are_the_directly_composed_ones(monkeypatch, group, algo):
    sp = meshcase.spec([group], _rdh_triggers(len(group)))
    used = []  # the template path really runs (for the triggers with whole blocks)
    real = R.rdh_template
    monkeypatch.setattr(R, "rdh_template", lambda *a: used.append(a[2]) or real(*a))
    for rank in group[:2] + group[-2:]:  # core and folded ranks
        want = _direct(monkeypatch, R, sp, algo, rank)
        used.clear()
        assert _entries(_plan(sp, algo), rank) == want
        assert used and set(used) == {rank}


def test_triggers_sharing_an_rdh_template_get_the_entries_they_get_alone():
    group = list(range(6))
    trig = [("all_reduce", "bf16", "add", 6000), ("all_reduce", "bf16", "add", 123_457),
            ("all_reduce", "bf16", "add", 2)]
    sp = meshcase.spec([group], trig)
    plan = _plan(sp, "intra_rdh")
    real = R.rdh_template
    for rank in (0, 1, 5):
        alone = _each_alone(sp, "intra_rdh", rank)
        used = []
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(R, "rdh_template", lambda *a: used.append(a[2]) or real(*a))
            assert _entries(plan, rank) == alone
        assert used  # the shared template path ran
    topo, plans = plan.topology, [tp.prepared.data for tp in plan.triggers]
    assert R.rdh_template(topo, plans[0], 0) is R.rdh_template(topo, plans[1], 0)


def test_rdh_halving_and_doubling_ranges_in_elements():
    # 8 ranks, 8000 elements: super-blocks of 1000.  Core 0 first sends the upper half to core
    # 4; its step-0 reduce (fused with step 1's send) writes [2000, 4000) to core 2 and keeps
    # [0, 2000); at doubling level 0 it sends its super-block [0, 1000) to core 1
    plan = _plan(meshcase.spec([list(range(8))], [("all_reduce", "bf16", "add", 8000)]),
                 "intra_rdh")
    ((_tp, spec),) = rank_entries(plan, 0)
    ir = spec.ir
    rng = {}
    for r in ir[ir["n_dst"] > 0]:
        rng.setdefault(int(r["phase"]), []).append((int(r["start"]), int(r["stop"]),
                                                    spec.peers[int(r["dst_peer"][0])]))
    rh0 = int(EncMeshEventType.EVT_RH_STEP_0)
    rd0 = int(EncMeshEventType.EVT_RD_STEP_0)
    assert rng[rh0] == [(4000, 8000, 4), (2000, 4000, 2), (0, 2000, 0)]
    assert rng[rd0] == [(0, 1000, 1)]
    assert list(ir["step"]) == list(range(ir.size))


def test_block_edges_accept_exactly_the_documented_edges():
    """block_edges: strictly increasing from 0 to the op space's element count, below
    UINT32_MAX bytes in all (compose/blockunits.py); anything else is composed directly."""
    import numpy as np

    from nrtrewrite.compose.blockunits import block_edges
    good = np.array([0, 2, 3, 7], np.int64)
    assert block_edges(good, 7, 2) is good
    for edges, total in (([1, 2, 3, 7], 7),   # does not start at element 0
                         ([0, 2, 3, 8], 7),   # ends beyond the op space
                         ([0, 2, 3, 6], 7),   # ends short of it
                         ([0, 2, 2, 7], 7)):  # an empty block
        assert block_edges(np.array(edges, np.int64), total, 2) is None
    # UINT32_MAX = 2^32 - 1 = 3 * 1431655765 bytes: one element short passes, at it is refused
    n = 0xFFFF_FFFF // 3
    assert block_edges(np.array([0, n - 1], np.int64), n - 1, 3) is not None
    assert block_edges(np.array([0, n], np.int64), n, 3) is None
