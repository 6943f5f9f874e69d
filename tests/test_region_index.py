"""The region look-ups by name (emit/address.py ``MemoryMap.var`` / ``MemoryMap.named``,
simulate/layout.py ``Layout.named``): answered from an index since fixer 57l (a scan of every
region per trigger made lower and simulate cost triggers x regions), with the scan's
semantics kept: the first region of a key in ``regions`` order, none for an absent key, and
an index that follows ``regions`` when it is replaced.
"""

from __future__ import annotations

import json

import pytest

from nrtrewrite.emit.address import MemoryMap, Region
from nrtrewrite.simulate.layout import Layout

from test_simulate import FIX, lower_neff


def _hand_map() -> MemoryMap:
    # two regions of var 3 of sg00, two "scratch" regions, a var of the same id in another
    # subgraph: the first of each (by list order) is the one a scan finds
    return MemoryMap(regions=[
        Region("a", "dram", 0, 64, "sg00", 3),
        Region("b", "dram", 4096, 64, "sg01", 3),
        Region("a2", "dram", 8192, 64, "sg00", 3),
        Region("s1", "scratch", 12288, 128),
        Region("s2", "scratch", 16384, 256),
        Region("w", "sbuf", 0, 32, "sg00", 7, 4),
    ], sbuf_partition_stride=64)


def test_memory_map_lookups_give_the_first_region_of_a_key():
    mem = _hand_map()
    assert mem.var("sg00", 3).name == "a"  # not "a2", added after it
    assert mem.var("sg01", 3).name == "b"
    assert mem.var("sg00", 7).name == "w"
    assert mem.named("dram").name == "a"
    assert mem.named("scratch").name == "s1"  # not "s2"
    assert mem.named("sbuf").name == "w"
    assert mem.named("gw") is None
    # a region without a var answers (None, None), as the scan compared it
    assert mem.var(None, None).name == "s1"
    for key in (("sg00", 4), ("sg02", 3), ("sg00", "3")):
        with pytest.raises(KeyError) as err:
            mem.var(*key)
        assert err.value.args == (key,)


def test_memory_map_index_follows_a_replaced_region_list():
    mem = _hand_map()
    assert mem.named("gw") is None and mem.named("scratch").name == "s1"
    mem.regions = [Region("g", "gw", 0, 8), Region("s3", "scratch", 4096, 8)]
    assert mem.named("gw").name == "g"
    assert mem.named("scratch").name == "s3"
    with pytest.raises(KeyError):
        mem.var("sg00", 3)
    # the regions are held as a tuple: no region is replaced in place behind the index
    assert isinstance(_hand_map().regions, tuple)
    # review 57s: a list assigned, then changed in place at the same length, is not what the
    # map holds (a tuple of it, taken at the first lookup): the map's answers follow the map
    given = [Region("g", "gw", 0, 8), Region("s3", "scratch", 4096, 8)]
    mem.regions = given
    assert mem.named("scratch").name == "s3"
    given[1] = Region("s9", "scratch", 8192, 8)
    assert mem.named("scratch").name == "s3" and isinstance(mem.regions, tuple)
    assert mem.regions[1].name == "s3"


def test_layout_named_gives_the_first_region_of_a_kind(tmp_path):
    """ar2 lowered, its manifest given a second (empty) scratch and gw region before the
    first ones and a third after: named() answers the first of each by list order, as the
    scan did (the empty regions overlap nothing, so the layout checks)."""
    out = lower_neff(FIX / "ar2.neff", tmp_path / "out")
    top = json.loads((out / "manifest.json").read_text())
    regions = top["memory"]["regions"]
    first = {r["kind"]: r["name"] for r in reversed(regions)}
    assert first["scratch"] == "scratch" and first["gw"] == "gw"
    extra = [dict(name=f"early_{k}", kind=k, offset=0, size=0, partitions=1, subgraph=None,
                  var_id=None) for k in ("gw", "scratch")]
    late = dict(name="late_scratch", kind="scratch", offset=0, size=0, partitions=1,
                subgraph=None, var_id=None)
    top["memory"]["regions"] = regions[:1] + extra + regions[1:] + [late]
    layout = Layout(top)
    assert layout.named("scratch").name == "early_scratch"
    assert layout.named("scratch").index == 2
    assert layout.named("gw").name == "early_gw"
    assert layout.named("gw").index == 1
    assert layout.named("dram").name == regions[0]["name"]
    assert layout.named("dram").index == 0
    assert layout.named("nope") is None


class _CountingTuple(tuple):
    """A region tuple counting the walks over it."""

    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


def test_lookups_walk_the_regions_once_not_once_per_call(tmp_path):
    """The cost the index removes, counted rather than timed: 200 look-ups of each kind walk
    ``regions`` once (the index built), where the scan walked it once per call."""
    mem = _hand_map()
    mem.regions = _CountingTuple(mem.regions)
    _CountingTuple.walks = 0
    for _ in range(200):
        assert mem.var("sg00", 3).name == "a"
        assert mem.named("scratch").name == "s1"
    assert _CountingTuple.walks == 1
    out = lower_neff(FIX / "ar2.neff", tmp_path / "out")
    layout = Layout(json.loads((out / "manifest.json").read_text()))
    layout.regions = _CountingTuple(layout.regions)
    _CountingTuple.walks = 0
    for _ in range(200):
        assert layout.named("gw").name == "gw"
    assert _CountingTuple.walks == 1


class _CountingList(list):
    """A leader's entries, counting the walks over them."""

    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


def test_kick_check_walks_each_leaders_entries_once(tmp_path, monkeypatch):
    """simulate/engine.py ``_check_kicks`` (each kick's spad_index is its trigger's first
    entry on the leader, FORMATS §9): a walk over the leader's entries per trigger made it
    triggers x entries (fixer 57l, the per-trigger scans review 57j asked after); now one
    walk per leader.  fixtures/sbuf.yaml: 4 collectives, every one led by rank 0."""
    from nrtrewrite.simulate import engine, simulate_output
    out = lower_neff(FIX / "sbuf.neff", tmp_path / "out")
    check = engine.Simulator._check_kicks
    seen = {}

    def counted(self):
        for prog in self.programs.values():
            prog.entries = _CountingList(prog.entries)
        seen["leaders"] = {t.leader for t in self.triggers.values()}
        seen["triggers"] = len(self.triggers)
        _CountingList.walks = 0
        check(self)
        seen["walks"] = _CountingList.walks

    monkeypatch.setattr(engine.Simulator, "_check_kicks", counted)
    res = simulate_output(out)
    assert res.ok
    assert seen["leaders"] == {0} and seen["triggers"] == 4
    assert seen["walks"] == 1
