"""What ``simulate`` holds of an output lowered on a topology file (docs/SIMULATOR.md §1),
checked since 2026-12-06:

* ``topology.name``: a file without a preset ``platform`` names its custom platform after
  its ``name``, else ``custom``, and the topology after its ``name``, else its path's stem
  (docs/TOPOLOGY.md §2), so on a custom platform the name is the platform's (or, on
  ``custom``, the stem of ``options.topology``); a file on a preset platform names itself
  (not held: tests/test_simulate_unread_keys2.py);
* ``topology.nodes``: at most MAX_TOPOLOGY_RANKS (2^20) ranks, ``lower``'s bound on a file's
  nodes (docs/TOPOLOGY.md §2 ``nodes``); above what the ranks need it is the file's own;
* a mesh-family leg on a platform without mesh (``topology.mesh_sub_type`` null): ``lower``
  writes none (docs/SELECTION.md §3), inside a node or across nodes.

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
        f'{_field(out, "topology.name")}topology.name "fab" is not "trn2-2node", '
        "topology.platform's: a topology file without a preset platform names its custom "
        f"platform after its name {NAME_RULE}")


def test_an_unnamed_custom_topology_is_named_after_its_paths_stem(unnamed, tmp_path):
    out = copy(unnamed, tmp_path, "a")
    opt = _top(out)["options"]["topology"]
    assert opt.endswith("/fab.json")
    _retop(out, lambda top: top["topology"].update(name="trn2-2node"))
    assert refused(out) == (
        f'{_field(out, "topology.name")}topology.name "trn2-2node" is not "fab", the stem of '
        f'options.topology "{opt}": a topology file with neither a preset platform nor a name '
        f"is named after its path, its platform custom {NAME_RULE}")
    # a file {"name": "custom", ...} without a platform writes name and platform custom
    out = copy(unnamed, tmp_path, "b")
    _retop(out, lambda top: top["topology"].update(name="custom"))
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
        f"{_field(out, 'topology.nodes')}topology.nodes 16385 is more than 16384: 16385 nodes "
        "x 64 ranks a node = 1048640 ranks, more than 1048576 (MAX_TOPOLOGY_RANKS: lower loads "
        "no such topology file, docs/TOPOLOGY.md §2 nodes; ")


def test_a_node_count_on_one_node_is_held_to_the_devices_the_table_shows(ring8, tmp_path):
    """All ranks on node 0, devices 0 and 1 of 4 ranks: a node holds at least 8 ranks, so at
    most 2^20 / 8 = 131072 nodes."""
    out = copy(ring8, tmp_path, "a")
    _retop(out, lambda top: top["topology"].update(nodes=131072))
    assert_clean(out)
    out = copy(ring8, tmp_path, "b")
    _retop(out, lambda top: top["topology"].update(nodes=131073))
    assert refused(out).startswith(
        f"{_field(out, 'topology.nodes')}topology.nodes 131073 is more than 131072: 131073 "
        "nodes x at least 8 ranks a node = at least 1048584 ranks, more than 1048576 ")


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
