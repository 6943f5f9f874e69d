"""What ``simulate`` holds of an output lowered on a topology file (docs/SIMULATOR.md §1),
checked since 2026-12-06:

* ``topology.name``: a file without a preset ``platform`` names its custom platform after
  its ``name``, else ``custom``, and the topology after its ``name``, else its path's stem
  (docs/TOPOLOGY.md §2), so on a custom platform the name is the platform's (on
  ``custom``, not held since 2026-12-06: the stem of ``options.topology``, or the name of a
  file naming its platform custom); a file on a preset platform names itself (not held:
  tests/test_simulate_unread_keys2.py);
* ``topology.nodes``: at most MAX_TOPOLOGY_RANKS (2^20) ranks, ``lower``'s bound on a file's
  nodes (docs/TOPOLOGY.md §2 ``nodes``); above what the ranks need it is the file's own;
* a mesh-family leg on a platform without mesh (``topology.mesh_sub_type`` null): ``lower``
  writes none (docs/SELECTION.md §3), inside a node or across nodes;
* a KANGARING unit's ranks are on 2 dies of 2 s-engines (docs/TOPOLOGY.md §2 kangaring): a
  file's table relabelled to another shape (every die 0) is refused there, and is sound
  for any other engine (the die enters no byte ``lower`` writes but KangaRing's).

Expected values are worked out from the docs by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_simulate import assert_clean, coll_spec, lower_spec
from test_simulate_hier_checks import _field
from test_simulate_kick_leaf import copy, refused
from test_simulate_rank_places import _retop, _top

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "fixtures" / "topologies" / "trn2-2node.json"
NAME_RULE = "(docs/TOPOLOGY.md §2 name, platform)"
NO_MESH = ("a platform without mesh (topology.mesh_sub_type null), which lower never writes: "
           "no mesh-family engine is legal there, inside a node or across nodes "
           "(docs/SELECTION.md §3, §9; docs/TOPOLOGY.md §2 mesh)")


def _file(tmp: Path, fname: str, **change) -> Path:
    """trn2-2node.json with keys changed (None: left out), written as ``fname``."""
    doc = json.loads(FILE.read_text())
    for key, value in change.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    path = tmp / fname
    path.write_text(json.dumps(doc))
    return path


def _lower(tmp: Path, ranks, topology: Path, algo: str = "ring", n: int = 1024) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    return lower_spec(coll_spec("all_reduce", "bf16", ranks, n, lnc=2), tmp / "o",
                      topology=str(topology), algo=algo)


@pytest.fixture(scope="module")
def named(tmp_path_factory) -> Path:
    """The fixture file without its platform: a custom platform, named after the file's
    name trn2-2node, as is the topology; a bf16 all-reduce over ranks 0 and 64, RING."""
    tmp = tmp_path_factory.mktemp("named")
    out = _lower(tmp, [0, 64], _file(tmp, "fab.json", platform=None))
    top = _top(out)["topology"]
    assert (top["name"], top["platform"], top["nodes"]) == ("trn2-2node", "trn2-2node", 2)
    return out


@pytest.fixture(scope="module")
def unnamed(tmp_path_factory) -> Path:
    """The fixture file without its platform and name, saved as fab.json: the platform is
    custom, the topology fab (the stem)."""
    tmp = tmp_path_factory.mktemp("unnamed")
    out = _lower(tmp, [0, 64], _file(tmp, "fab.json", platform=None, name=None))
    top = _top(out)["topology"]
    assert (top["name"], top["platform"]) == ("fab", "custom")
    return out


@pytest.fixture(scope="module")
def ring8(tmp_path_factory) -> Path:
    """ranks 0..7 on the fixture file (trn2's shape: 4 ranks a device, all on node 0), RING."""
    return _lower(tmp_path_factory.mktemp("ring8"), 8, FILE)


def test_the_outputs_simulate_clean(named, unnamed, ring8):
    for out in (named, unnamed, ring8):
        assert_clean(out)


# ------------------------------------------------------------------ topology.name

def test_a_custom_platforms_topology_is_named_as_its_platform(named, tmp_path):
    out = copy(named, tmp_path)
    _retop(out, lambda top: top["topology"].update(name="fab"))
    assert refused(out) == (
        f'{_field(out, "topology.name")}topology.name should be "trn2-2node", '
        "topology.platform's, not \"fab\": a topology file without a preset platform names "
        f"its custom platform after its name {NAME_RULE}")


def test_an_unnamed_custom_topology_is_named_after_its_paths_stem(unnamed, tmp_path):
    """lower names the topology of a file with neither platform nor name after its path's
    stem (fab), its platform custom; simulate no longer holds the name on the platform
    custom (since 2026-12-06): it is that stem, or the name of a file that names its platform
    custom beside every platform field, as the manifest's topology object of such an output
    does given back (docs/TOPOLOGY.md §2 platform, docs/SIMULATOR.md §1); until 2026-12-06 it
    was held to the stem, ``topology.name should be "fab", the stem of options.topology
    ...``."""
    out = copy(unnamed, tmp_path, "a")
    assert _top(out)["options"]["topology"].endswith("/fab.json")
    assert (_top(out)["topology"]["name"], _top(out)["topology"]["platform"]) == ("fab",
                                                                                 "custom")
    _retop(out, lambda top: top["topology"].update(name="trn2-2node"))
    assert_clean(out)
    # a file {"name": "custom", ...} without a platform writes name and platform custom
    out = copy(unnamed, tmp_path, "b")
    _retop(out, lambda top: top["topology"].update(name="custom"))
    assert_clean(out)


def test_the_unnamed_outputs_topology_object_given_back_simulates_clean(unnamed, tmp_path):
    """fab's manifest topology (name fab, platform custom, every platform field) saved as
    back.json lowers the same model to the same artifacts, and that output, named fab on a
    path of stem back, simulates clean."""
    doc = _top(unnamed)["topology"]
    assert (doc["name"], doc["platform"], doc["devices_per_node"]) == ("fab", "custom", 16)
    back = tmp_path / "back.json"
    back.write_text(json.dumps(doc))
    out = _lower(tmp_path / "b", [0, 64], back)
    top = _top(out)["topology"]
    assert (top["name"], top["platform"]) == ("fab", "custom")
    for member in unnamed.rglob("*"):
        if member.is_file() and member.name != "manifest.json":
            assert (out / member.relative_to(unnamed)).read_bytes() == member.read_bytes()
    assert_clean(out)


# ------------------------------------------------------------------ topology.nodes

def test_a_files_node_count_is_held_to_max_topology_ranks(named, tmp_path):
    """Rank 64 on node 1, device 0 (4 ranks a device): 16 x 4 = 64 ranks a node, so at
    most 2^20 / 64 = 16384 nodes; 16385 x 64 = 1048640 ranks is more."""
    out = copy(named, tmp_path, "a")
    _retop(out, lambda top: top["topology"].update(nodes=16384))
    assert_clean(out)
    out = copy(named, tmp_path, "b")
    _retop(out, lambda top: top["topology"].update(nodes=16385))
    assert refused(out).startswith(
        f"{_field(out, 'topology.nodes')}topology.nodes should be at most 16384, not 16385: "
        "16385 nodes x 64 ranks a node = 1048640 ranks, more than 1048576 (MAX_TOPOLOGY_RANKS: "
        "lower loads no such topology file, docs/TOPOLOGY.md §2 nodes; ")


def test_a_files_node_count_is_held_to_the_fewest_ranks_a_node_its_rows_fit(tmp_path):
    """Bug: on a file exactly trn2 (the manifest names the preset alone) ranks 0 and 68 at
    lnc 2 are node 0's device 0 and node 1's device 1 (4 ranks a device, 64 a node:
    docs/TOPOLOGY.md §1).  The rows also fit 33 devices of 2 ranks (68 = 66 + 1 x 2), which
    was taken, the fewest ranks a device: 66 ranks a node, so the 16,000 nodes such a file may
    give (16000 x 64 = 1,024,000 ranks, which lower takes) were refused, `should be at most
    15887`.  Of the shapes both rows fit, 64 ranks a node is the fewest: at most
    2^20 / 64 = 16384 nodes."""
    path = tmp_path / "exact.json"
    path.write_text(json.dumps({"platform": "trn2", "name": "exact", "nodes": 2}))
    out = _lower(tmp_path / "x", [0, 68], path)
    assert _top(out)["topology"]["platform"] == "trn2"
    assert "devices_per_node" not in _top(out)["topology"]  # (the preset named alone)
    for nodes in (16000, 16384):
        _retop(out, lambda top: top["topology"].update(nodes=nodes))
        assert_clean(out)
    _retop(out, lambda top: top["topology"].update(nodes=16385))
    assert refused(out).startswith(
        f"{_field(out, 'topology.nodes')}topology.nodes should be at most 16384, not 16385: "
        "16385 nodes x 64 ranks a node = 1048640 ranks, more than 1048576 ")



def test_a_file_exactly_a_preset_is_held_to_the_presets_shape_where_its_rows_fit(tmp_path):
    """Review 47k: ranks 0 and 72 of a file exactly trn2 at lnc 2 are node 1's device 2,
    core 0 (72 = 64 + 2 x 4) and also fit 7 devices of 8 ranks a node (72 = 56 + 2 x 8), the
    fewest ranks a node, which was taken: 56 a node, so 16385 - 18724 nodes simulated as a
    match where lower refuses more than 2^20 / 64 = 16384 (docs/TOPOLOGY.md §1).  The
    preset the manifest names is taken when every row fits it."""
    path = tmp_path / "exact.json"
    path.write_text(json.dumps({"platform": "trn2", "name": "exact", "nodes": 2}))
    out = _lower(tmp_path / "x", [0, 72], path)
    assert _top(out)["topology"]["platform"] == "trn2"
    _retop(out, lambda top: top["topology"].update(nodes=16384))
    assert_clean(out)
    _retop(out, lambda top: top["topology"].update(nodes=17000))
    assert refused(out).startswith(
        f"{_field(out, 'topology.nodes')}topology.nodes should be at most 16384, not 17000: "
        "17000 nodes x 64 ranks a node = 1088000 ranks, more than 1048576 ")

def test_a_node_count_on_one_node_is_held_to_the_devices_the_table_shows(ring8, tmp_path):
    """All ranks on node 0, devices 0 and 1 of 4 ranks: a node holds at least 8 ranks, so at
    most 2^20 / 8 = 131072 nodes.  The manifest names trn2 alone, as an nrtrewrite before
    2026-12-06 08:28 named a changed preset too (fewer devices a node): rows all on node 0
    do not tell a node's devices, so not the preset's 64 ranks a node (review 47o)."""
    out = copy(ring8, tmp_path, "a")
    _retop(out, lambda top: top["topology"].update(nodes=131072))
    assert_clean(out)
    out = copy(ring8, tmp_path, "b")
    _retop(out, lambda top: top["topology"].update(nodes=131073))
    assert refused(out).startswith(
        f"{_field(out, 'topology.nodes')}topology.nodes should be at most 131072, not "
        "131073: 131073 nodes x at least 8 ranks a node = at least 1048584 ranks, more than "
        "1048576 ")


# ------------------------------------------------------------------ no mesh

@pytest.mark.parametrize("ranks, sub", [(8, "MESH_TRN2"), ([0, 64], "FULL_MESH")])
def test_a_mesh_leg_on_a_platform_without_mesh_is_refused(tmp_path, ranks, sub):
    """--algo mesh on the file: MESH_TRN2 inside a node, FULL_MESH across nodes (SELECTION
    §9). Saying the platform has no mesh is refused at the trigger (across nodes it was a
    match; inside a node refused per rank, at spad.bin's algo_type)."""
    out = _lower(tmp_path, ranks, FILE, algo="mesh")
    assert _top(out)["triggers"][0]["legs"][0]["sub_type"] == sub
    _retop(out, lambda top: top["topology"].update(mesh_sub_type=None))
    assert refused(out) == (f'{_field(out)}legs[0].sub_type "{sub}": a mesh-family leg (MESH) '
                            f"on {NO_MESH}")


def test_a_ring_on_a_platform_said_without_mesh_is_a_match(ring8, tmp_path):
    """A RING leg has no sub_type (null) on any platform: lower writes the same ring there."""
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["topology"].update(mesh_sub_type=None))
    assert_clean(out)


# ------------------------------------------------------------------ dies

def _all_die_0(top: dict) -> None:
    for row in top["topology"]["ranks"]:
        row["die"] = 0


def test_a_kangaring_table_relabelled_to_one_die_is_refused(tmp_path):
    """KANGARING over ranks 0..7 on the file: rank 2 is s-engine 2, die 2 // 2 = 1
    (TOPOLOGY §1). Every die 0 fits the shape of 4 s-engines a die, where lower lowers no
    KANGARING (2 dies of 2 s-engines: TOPOLOGY §2 kangaring); was a match."""
    out = _lower(tmp_path, 8, FILE, algo="kangaring", n=4096)
    assert _top(out)["triggers"][0]["algorithm"] == "KANGARING"
    assert_clean(out)
    _retop(out, _all_die_0)
    assert refused(out) == (
        f"{_field(out, 'topology.ranks[2].die')}rank 2: die should be 1, sengine 2 // 2, not 0 "
        "(KangaRing needs 2 dies of 2 s-engines, each unit's engines k and k ^ 2 on the two "
        "dies; lower writes no KANGARING for another device shape in the units of "
        "triggers[0].kangaring: docs/TOPOLOGY.md §1, §2 kangaring, §4)")


def test_a_ring_table_relabelled_to_one_die_is_what_lower_writes_there(ring8, tmp_path):
    """The same model lowered on the file with 1 die of 4 s-engines (no kangaring) writes
    the same bytes, its rows' die 0: so the relabelled table simulates as a match."""
    one_die = _file(tmp_path, "one.json", kangaring=False,
                    device={"dies": 1, "sengines_per_die": 4, "tpbs_per_sengine": 2,
                            "c2c_ports": 4})
    other = _lower(tmp_path / "one", 8, one_die)
    a, b = _top(ring8), _top(other)
    assert {r["die"] for r in b["topology"]["ranks"]} == {0}
    # the file's platform is trn2 exactly (its manifest names it alone), the other one a
    # changed trn2, recorded whole (docs/FORMATS.md §1.1, since 2026-12-06)
    assert "device" not in a["topology"]
    assert (b["topology"]["device"], b["topology"]["kangaring"]) == (
        {"dies": 1, "sengines_per_die": 4, "tpbs_per_sengine": 2, "c2c_ports": 4}, False)
    for key in set(b["topology"]) - set(a["topology"]):
        del b["topology"][key]
    for doc in (a, b):
        _all_die_0(doc)
        doc["options"]["topology"] = None
    assert a == b
    for rank in range(8):
        for f in sorted((ring8 / f"rank-{rank:04d}").iterdir()):
            assert f.read_bytes() == (other / f"rank-{rank:04d}" / f.name).read_bytes(), f
    out = copy(ring8, tmp_path)
    _retop(out, _all_die_0)
    assert_clean(out)
