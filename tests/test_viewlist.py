"""emit/buffers.py ViewList: an entry's views as columns.  It is the list of BufferView it
stands for (indexing, iteration, equality), its tables are the per-view formulas, joining
shifts the SBUF views' numbers; a mesh entry's views, built as columns from its recipes, are
the views each recipe names (built here one by one, the way the recipes are documented)."""

from __future__ import annotations

import meshcase
import numpy as np
import pytest

from nrtrewrite.codes import EncOpType
from nrtrewrite.compose import mesh as M
from nrtrewrite.compose.views import op_elements, operand_view, region_view
from nrtrewrite.emit.buffers import BufferView, ViewList
from nrtrewrite.lower import LowerOptions, plan_lowering, rank_entries
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.model import AccessPattern
from nrtrewrite.neff.reader import read_model_bytes

AP = AccessPattern(start=64, partition_start=2, partition_count=4,
                   dims=((1, 10), (12, 3), (40, 2)))


def _views() -> list[BufferView]:
    return [BufferView(2, 100, 4096, anchor=4096 - 200),
            BufferView(2, 0, 1 << 20, ap=AP, partition_stride=1 << 16, anchor=1 << 20),
            BufferView(4, 7, 8192, anchor=8192),
            BufferView(1, 0, 0)]


def test_a_viewlist_is_the_list_it_was_made_of():
    views = _views()
    vl = ViewList.of(views)
    assert len(vl) == 4 and list(vl) == views and vl == views and vl == ViewList.of(vl)
    assert vl[1] is views[1]  # an SBUF view keeps its object (access pattern, stride)
    assert vl[-1] == views[-1] and vl[1:3] == views[1:3]
    assert [hash(v) for v in vl] == [hash(v) for v in views]
    with pytest.raises(IndexError):
        vl[4]
    assert ViewList.of(vl) is vl


def test_tables_are_each_views_own_formula():
    linear, vbase, vdsize = ViewList.of(_views()).tables()
    assert linear.tolist() == [True, False, True, True]
    # linear: address(e) = base + (e - origin) * dsize, so element 0 sits at base - origin * dsize
    assert vbase.tolist() == [4096 - 100 * 2, 0, 8192 - 7 * 4, 0]
    assert vdsize.tolist() == [2, 2, 4, 1]
    for v, b0 in zip(_views(), vbase.tolist()):
        if v.ap is None:
            assert int(v.address(np.array([0]))[0]) == b0


def test_concat_is_the_lists_one_after_the_other():
    a, b = _views(), _views()[::-1]
    joined = ViewList.concat([ViewList.of(a), ViewList.of(b)])
    assert joined == a + b
    assert sorted(joined.sbuf) == [1, 4 + 2]
    assert joined.anchor.tolist() == [v.anchor for v in a + b]


def test_columns_must_be_one_value_per_view():
    with pytest.raises(ValueError):
        ViewList(2, [0, 1], [0], [0, 0])


def _recipe_views(plan, tp, rank: int) -> list[BufferView]:
    """The views of ``rank``'s mesh entry as the recipes name them (mesh.py ``_Entry``): IN,
    OUT, GW; then per recipe ``("cb", s, origin)`` the channel-buffer slot ``s`` (the
    scratch region, or the trigger's private part of it, ``s`` slots in; element ``origin``
    first, an index into the block edges when composed in block units) and per ``("gw", k)``
    the gateway region ``k`` whole operands in."""
    mp = tp.prepared.data
    c, _ir, elem = M.MESH.composed(plan.topology, mp, rank)
    trig, mem, d = tp.trigger, plan.memory, mp.dsize
    a = int(mp.bstart[mp.index[rank]])
    src0, dst0 = {EncOpType.REDUCE_SCATTER: (0, a), EncOpType.ALLGATHER: (a, 0)}.get(trig.op,
                                                                                   (0, 0))
    views = [operand_view(mem, trig, trig.src, src0), operand_view(mem, trig, trig.dst, dst0),
             region_view(mem, "gw", d)]
    for key in c.keys:
        if key[0] == "cb":
            base = (region_view(mem, "scratch", d, tp.private_offset if mp.private else 0).base
                    + key[1] * mp.slot_elems * d)
            origin = key[2] if elem is None else elem[key[2]]
            views.append(BufferView(dsize=d, origin=origin, base=base, anchor=base))
        else:
            views.append(region_view(mem, "gw", d, key[1] * op_elements(trig) * d))
    return views


@pytest.mark.parametrize("group", [list(range(8)), [0, 1, 2, 3, 8, 9]])
def test_mesh_views_are_the_views_each_recipe_names(group):
    trigs = [("all_reduce", "bf16", "add", 999), ("all_reduce", "bf16", "add", 300_001),
             ("reduce_scatter", "fp16", "min", 100 * len(group)),
             ("all_gather", "fp8_e4", None, 77), ("all_reduce", "fp8_e4", "max", 3)]
    model = read_model_bytes(assemble_spec(meshcase.spec([group], trigs)), path="vl.neff")
    plan = plan_lowering(model, LowerOptions(algo="mesh"))
    sizes = []
    for rank in (group[0], group[-1]):
        for tp, spec in rank_entries(plan, rank):
            assert isinstance(spec.views, ViewList)
            want = _recipe_views(plan, tp, rank)
            assert spec.views == want
            sizes.append(len(want))
    assert len(sizes) == 2 * len(trigs) and sum(n > 3 for n in sizes) >= 2 * (len(trigs) - 1)


@pytest.mark.parametrize("shape", ["lists", "mixed", "empty"])
def test_join_is_the_views_one_after_the_other(shape):
    """ViewList.join (an emit batch's views): the views of every part in order, the SBUF
    views renumbered, and each part's length."""
    views = _views()
    if shape == "lists":
        parts = [views[:2], [], views[2:], views[1:2]]
    elif shape == "mixed":
        parts = [views[:2], ViewList.of(views[2:]), tuple(views[:1])]
    else:
        parts = [[], []]
    joined, counts = ViewList.join(parts)
    flat = [v for p in parts for v in p]
    assert counts == [len(p) for p in parts]
    assert list(joined) == flat and len(joined) == len(flat)
    assert sorted(joined.sbuf) == [i for i, v in enumerate(flat) if v.ap is not None]
    assert all(joined[i] is flat[i] for i in joined.sbuf)
    for col in ("dsize", "origin", "base", "anchor"):
        assert getattr(joined, col).tolist() == [getattr(v, col) for v in flat]
        assert getattr(joined, col).dtype == np.int64
