"""The last manifest keys ``simulate`` left unread (docs/SIMULATOR.md §1), read since
2026-12-05 late evening, and the order of the topology table's checks:

* ``topology.nodes`` and ``topology.name`` of a preset are what ``lower`` made of
  ``options.topology`` (docs/TOPOLOGY.md §1 "Loading": ``nodes=N`` fixes the count, else the
  preset is sized to the world, ``ceil((max(world) + 1) / ranks_per_node)``; the name is the
  option as given, the default's ``trn2`` or ``trn2:nodes=N``); a topology file's are not
  derivable from the manifest (its ``nodes`` may exceed its ranks' needs, its ``name`` is
  its own) and stay unheld, but for what the manifest tells (a custom platform's name, the
  MAX_TOPOLOGY_RANKS bound: tests/test_simulate_topology_file_keys.py, since 2026-12-06);
* a trigger's own ``legs`` (FORMATS §1.1: ``name``, ``op``, ``algorithm``, ``sub_type``) is
  one ``flat`` leg of its op and algorithm, or a HIER trigger's ``hier.legs`` again; a
  ``sub_type`` only on a mesh-family engine (docs/SELECTION.md §9: the platform's intra-node,
  FULL_MESH across nodes);
* ``options.algo``: a forced engine is the trigger's (a HIER leg clause's, the leg's), a
  restriction or exclusion leaves it among the allowed (docs/SELECTION.md §8);
* ``options.host_cc``: a RING or KANGARING all-reduce's final reduce step is
  ``recv_reduce_copy_send`` with it, ``recv_reduce_copy`` (then ``direct_copy_send``) without
  (docs/DESIGN.md "Host-CC and hybrid rings", FORMATS §8.3);
* a preset's row moved onto another rank's core is named by its own place rule (its
  ``device``), not by ``field topology: ranks X and Y share a core``.

Expected values are worked out from the docs by hand; each fixture asserts what it holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from test_simulate import assert_clean, coll_spec, lower_spec
from test_simulate_hier_checks import HIER16, _field, trigger0
from test_simulate_kick_leaf import copy, legs, refused
from test_simulate_rank_places import DEFAULT, FORMULA, _retop, _rows, _top

ROOT = Path(__file__).resolve().parents[1]
LOADING = 'docs/TOPOLOGY.md §1 "Loading"'
OWN_LEGS = ("(a flat trigger's legs are one leg, flat, running its op on its algorithm; a HIER "
            "trigger's repeat its hier.legs, each's name, op and algorithm: FORMATS §1.1)")
FORCED = "(a forced engine runs, or lower refuses the model: docs/SELECTION.md §8)"
EXCLUDED = ("(the cascade and the lowering fallback stay inside the engines it leaves: "
            "docs/SELECTION.md §8)")
HOST_CC = '(docs/DESIGN.md "Host-CC and hybrid rings", FORMATS §8.3)'
#: leaf codes (FORMATS §3 ``leaf``)
RECV_REDUCE_COPY, RECV_REDUCE_COPY_SEND = 3, 4


def _first_leg(out: Path, rank: int, leaf: int) -> int:
    """The record (its index, as a refusal names it) of the first leg of ``leaf`` in
    ``rank``'s legs.bin."""
    return int(np.flatnonzero(legs(out, rank)["leaf"] == leaf)[0])


@pytest.fixture(scope="module")
def ring8(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 4096 elements over ranks 0..7, trn2 at LNC 2 (the default
    topology, null), --algo ring. TOPOLOGY §1: 4 ranks a device, 16 devices, 64 ranks a
    node, so the world (largest rank 7) needs ceil(8 / 64) = 1 node, named trn2."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 4096, lnc=2),
                     tmp_path_factory.mktemp("ring8") / "o")
    top = _top(out)
    assert top["options"] == {"topology": None, "algo": "ring", "host_cc": False}
    assert (top["topology"]["name"], top["topology"]["nodes"]) == ("trn2", 1)
    assert top["triggers"][0]["legs"] == [{"name": "flat", "op": "ALLREDUCE",
                                           "algorithm": "RING", "sub_type": None}]
    return out


@pytest.fixture(scope="module")
def ring8_host_cc(tmp_path_factory) -> Path:
    """ring8 lowered with --host-cc: the final reduce step is recv_reduce_copy_send."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 4096, lnc=2),
                     tmp_path_factory.mktemp("ring8h") / "o", host_cc=True)
    assert _top(out)["options"]["host_cc"] is True
    return out


@pytest.fixture(scope="module")
def pair4(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1024 elements over ranks 0 and 64 on trn2:nodes=4, --algo ring:
    the ranks need 2 nodes (64 ranks a node at LNC 2), the option fixes 4."""
    out = lower_spec(coll_spec("all_reduce", "bf16", [0, 64], 1024, lnc=2),
                     tmp_path_factory.mktemp("pair4") / "o", topology="trn2:nodes=4")
    assert (_top(out)["topology"]["name"], _top(out)["topology"]["nodes"]) == ("trn2:nodes=4", 4)
    return out


@pytest.fixture(scope="module")
def hier16_scr(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over HIER16 (ranks 0..7 and 64..71, the default
    topology: two nodes, named trn2:nodes=2), --algo 'hier;inter_allr:single_cycle_ring':
    legs intra_redsct RING, inter_allr SINGLE_CYCLE_RING (forced), intra_allg RING."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2),
                     tmp_path_factory.mktemp("hier16") / "o",
                     algo="hier;inter_allr:single_cycle_ring")
    t = trigger0(out)
    assert [(leg["name"], leg["algorithm"]) for leg in t["hier"]["legs"]] == [
        ("intra_redsct", "RING"), ("inter_allr", "SINGLE_CYCLE_RING"), ("intra_allg", "RING")]
    assert t["legs"] == [{"name": n, "op": op, "algorithm": a, "sub_type": None} for n, op, a in (
        ("intra_redsct", "REDUCE_SCATTER", "RING"),
        ("inter_allr", "ALLREDUCE", "SINGLE_CYCLE_RING"), ("intra_allg", "ALLGATHER", "RING"))]
    assert (_top(out)["topology"]["name"], _top(out)["topology"]["nodes"]) == ("trn2:nodes=2", 2)
    return out


@pytest.fixture(scope="module")
def mesh8(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1024 elements over ranks 0..7 (one trn2 node), --algo mesh: its
    leg's sub_type is the platform's, MESH_TRN2 (docs/TOPOLOGY.md §1 "Presets")."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 1024, lnc=2),
                     tmp_path_factory.mktemp("mesh8") / "o", algo="mesh")
    assert trigger0(out)["legs"][0]["sub_type"] == "MESH_TRN2"
    return out


@pytest.fixture(scope="module")
def mesh_pair(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1024 elements over ranks 0 and 64 (two trn2 nodes), --algo mesh:
    a mesh-family leg across nodes is FULL_MESH (docs/SELECTION.md §9)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", [0, 64], 1024, lnc=2),
                     tmp_path_factory.mktemp("meshp") / "o", algo="mesh")
    assert trigger0(out)["legs"][0]["sub_type"] == "FULL_MESH"
    return out


def test_the_outputs_simulate_clean(ring8, ring8_host_cc, pair4, hier16_scr, mesh8, mesh_pair):
    for out in (ring8, ring8_host_cc, pair4, hier16_scr, mesh8, mesh_pair):
        assert_clean(out)


# ------------------------------------------------------------- topology.nodes and name

def test_a_sized_presets_node_count_is_held_to_its_world(ring8, tmp_path):
    """ring8's world needs ceil((7 + 1) / 64) = 1 node; 2 (its rows all on node 0, so the
    row checks pass) is refused (until 2026-12-05 not held)."""
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["topology"].update(nodes=2))
    assert refused(out) == (
        f"{_field(out, 'topology.nodes')}topology.nodes should be 1, not 2: the nodes of 64 "
        "ranks (trn2 at lnc_size 2) that hold the world's largest rank 7, ceil((7 + 1) / 64) "
        f"(options.topology null (the default, trn2) sizes the preset to the world: {LOADING})")


def test_a_fixed_node_count_is_held_to_the_option(pair4, tmp_path):
    """trn2:nodes=4 fixes 4 nodes though ranks 0 and 64 need 2: nodes 2 is refused."""
    out = copy(pair4, tmp_path)
    _retop(out, lambda top: top["topology"].update(nodes=2))
    assert refused(out) == (
        f"{_field(out, 'topology.nodes')}topology.nodes should be 4, not 2: the node count "
        f'options.topology "trn2:nodes=4" fixes (nodes=N: {LOADING})')


def test_a_presets_name_is_its_option(pair4, ring8, hier16_scr, tmp_path):
    """The name is the --topology value as given; the default's is trn2 on one node and
    trn2:nodes=N past it (HIER16 needs ceil((71 + 1) / 64) = 2)."""
    out = copy(pair4, tmp_path, "a")
    _retop(out, lambda top: top["topology"].update(name="trn2"))
    assert refused(out) == (
        f'{_field(out, "topology.name")}topology.name should be "trn2:nodes=4", not "trn2": the '
        f"--topology value as given (a preset's topology is named by it: {LOADING})")
    out = copy(ring8, tmp_path, "b")
    _retop(out, lambda top: top["topology"].update(name="trn2:nodes=1"))
    assert refused(out) == (
        f'{_field(out, "topology.name")}topology.name should be "trn2", not "trn2:nodes=1": the '
        f"default's name at 1 node (trn2, with :nodes=N past one node: {LOADING})")
    out = copy(hier16_scr, tmp_path, "c")
    _retop(out, lambda top: top["topology"].update(name="trn2"))
    assert refused(out).endswith(
        "topology.name should be \"trn2:nodes=2\", not \"trn2\": the default's name at 2 nodes "
        f"(trn2, with :nodes=N past one node: {LOADING})")


@pytest.mark.parametrize("spec", ["trn2:nodes=01", "trn2:", "trn2:nodes=1,",
                                  "trn2:nodes=1,nodes=1"])
def test_a_preset_option_only_older_lower_took_is_not_held(ring8, tmp_path, spec):
    """Before 0c46230 (2026-12-02) ``lower`` took ``--topology trn2:nodes=01``, ``trn2:``,
    ``trn2:nodes=1,`` and a repeated option, and recorded the value as given (as
    ``options.topology`` and ``topology.name``: docs/TOPOLOGY.md §1 "Loading"); today's
    ``lower`` refuses them. Such an output simulated as a match and still does: its nodes
    and name are not held (the late-evening check refused it as a protocol error, status 1,
    found by the session's review of older outputs)."""
    out = copy(ring8, tmp_path)

    def older(top):
        top["options"]["topology"] = spec
        top["topology"]["name"] = spec
    _retop(out, older)
    assert_clean(out)


def test_a_topology_files_node_count_and_name_are_not_held(tmp_path):
    """fixtures/topologies/trn2-2node.json gives nodes 2 and name trn2-2node; the manifest
    holds neither the file's nodes (any count >= what the ranks need) nor its name, so a
    file output with nodes 3 and another name still simulates as a match."""
    topo = str(ROOT / "fixtures" / "topologies" / "trn2-2node.json")
    out = lower_spec(coll_spec("all_reduce", "bf16", [0, 64], 1024, lnc=2), tmp_path / "o",
                     topology=topo)
    assert (_top(out)["topology"]["name"], _top(out)["topology"]["nodes"]) == ("trn2-2node", 2)
    _retop(out, lambda top: top["topology"].update(nodes=3, name="trn2"))
    assert_clean(out)


# ------------------------------------------------------------------ a trigger's legs

@pytest.mark.parametrize("key, value, said", [
    ("name", "intra_redsct", 'legs[0].name should be "flat", not "intra_redsct"'),
    ("op", "ALLGATHER", 'legs[0].op should be "ALLREDUCE", the trigger\'s, not "ALLGATHER"'),
    ("algorithm", "MESH", 'legs[0].algorithm should be "RING", the trigger\'s, not "MESH"'),
])
def test_a_flat_triggers_leg_is_its_op_and_algorithm(ring8, tmp_path, key, value, said):
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["triggers"][0]["legs"][0].update({key: value}))
    assert refused(out) == f"{_field(out)}{said} {OWN_LEGS}"


def test_a_flat_trigger_has_one_leg(ring8, tmp_path):
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["triggers"][0]["legs"].append(top["triggers"][0]["legs"][0]))
    assert refused(out) == f"{_field(out)}legs should list 1 leg, not 2 {OWN_LEGS}"


def test_a_hier_triggers_legs_repeat_its_hier_legs(hier16_scr, tmp_path):
    """legs[1] is hier.legs[1]: inter_allr, ALLREDUCE, SINGLE_CYCLE_RING, no sub_type."""
    out = copy(hier16_scr, tmp_path, "a")
    _retop(out, lambda top: top["triggers"][0]["legs"][1].update(algorithm="RING"))
    assert refused(out) == (f'{_field(out)}legs[1].algorithm should be "SINGLE_CYCLE_RING", '
                            f"hier.legs[1]'s, not \"RING\" {OWN_LEGS}")
    out = copy(hier16_scr, tmp_path, "b")
    _retop(out, lambda top: top["triggers"][0]["legs"][1].update(sub_type="FULL_MESH"))
    assert refused(out) == (
        f'{_field(out)}legs[1].sub_type should be null, not "FULL_MESH" (no HIER leg runs a '
        "mesh-family engine, the only ones with a sub_type: docs/SELECTION.md §6, §9) "
        f"{OWN_LEGS}")
    out = copy(hier16_scr, tmp_path, "c")
    _retop(out, lambda top: top["triggers"][0]["legs"].pop())
    assert refused(out) == f"{_field(out)}legs should list 3 legs, not 2 {OWN_LEGS}"


def test_a_mesh_legs_sub_type_is_the_platforms_or_full_mesh(mesh8, mesh_pair, ring8, tmp_path):
    out = copy(mesh8, tmp_path, "a")
    _retop(out, lambda top: top["triggers"][0]["legs"][0].update(sub_type="FULL_MESH"))
    assert refused(out) == (
        f'{_field(out)}legs[0].sub_type should be "MESH_TRN2", not "FULL_MESH": an intra-node '
        "mesh-family leg's is the platform's, topology.mesh_sub_type (docs/SELECTION.md §9; "
        "FORMATS §1.1)")
    out = copy(mesh_pair, tmp_path, "b")
    _retop(out, lambda top: top["triggers"][0]["legs"][0].update(sub_type="MESH_TRN2"))
    assert refused(out) == (
        f'{_field(out)}legs[0].sub_type should be "FULL_MESH", not "MESH_TRN2": a mesh-family leg '
        "over a replica_group that spans nodes (docs/SELECTION.md §9; FORMATS §1.1)")
    out = copy(ring8, tmp_path, "c")
    _retop(out, lambda top: top["triggers"][0]["legs"][0].update(sub_type="MESH_TRN2"))
    assert refused(out) == (
        f'{_field(out)}legs[0].sub_type should be null, not "MESH_TRN2": only a mesh-family leg '
        "(MESH, SINGLE_STEP_MESH, INTRA_RDH) has a sub_type (docs/SELECTION.md §9; "
        "FORMATS §1.1)")


# ------------------------------------------------------------------------ options.algo

@pytest.mark.parametrize("algo, said", [
    ("mesh", 'should be "MESH", the engine options.algo "mesh" forces on every collective, '
             'not "RING" ' + FORCED),
    ("allgather:mesh;allreduce:kangaring",
     'should be "KANGARING", the engine options.algo "allgather:mesh;allreduce:kangaring" '
     '(clause "allreduce:kangaring") forces on ALLREDUCE, not "RING" ' + FORCED),
    ("^ring", '"RING" is an engine options.algo "^ring" excludes on every collective '
              + EXCLUDED),
    ("mesh,kangaring", 'should be one of MESH, KANGARING, the engines options.algo '
                       '"mesh,kangaring" allows on every collective, not "RING" (the cascade '
                       "and the lowering fallback stay inside them: docs/SELECTION.md §8)"),
    ("allreduce:mesh,kangaring;allgather:ring",
     'should be one of MESH, KANGARING, the engines options.algo '
     '"allreduce:mesh,kangaring;allgather:ring" (clause "allreduce:mesh,kangaring") allows '
     'on ALLREDUCE, not "RING" (the cascade and the lowering fallback stay inside them: '
     "docs/SELECTION.md §8)"),
])
def test_the_triggers_engine_is_what_options_algo_leaves(ring8, tmp_path, algo, said):
    """ring8 ran RING: an override forcing another engine, excluding RING or allowing
    others only cannot have been the one lower applied."""
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["options"].update(algo=algo))
    assert refused(out) == f'{_field(out)}algorithm {said}'


@pytest.mark.parametrize("algo", ["ring,mesh", "^mesh", "allgather:mesh", "inter_allr:mesh",
                                  None])
def test_an_override_that_leaves_the_engine_passes(ring8, tmp_path, algo):
    """Overrides RING is allowed under (a list with it, an exclusion of another, a clause for
    another collective or a HIER leg, none) pass."""
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["options"].update(algo=algo))
    assert_clean(out)


@pytest.mark.parametrize("algo", ["ring,", "ring;", ";ring", "ring;mesh", " "])
def test_an_override_only_older_lower_took_is_not_held(ring8, tmp_path, algo):
    """Before cf954e0 and 0f528dc (2026-12-01) ``lower`` took ``--algo 'ring,'``,
    ``'ring;'``, ``';ring'``, ``'ring;mesh'`` and a blank, recorded as given in
    ``options.algo`` (docs/SELECTION.md §8 refuses them today). Such an output simulated as
    a match and still does: the override is not held (the late-evening check refused it as
    a protocol error, status 1)."""
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["options"].update(algo=algo))
    assert_clean(out)


@pytest.mark.parametrize("algo, said", [
    ("hier;inter_allr:ring",
     'should be "RING", the engine options.algo "hier;inter_allr:ring" (clause '
     '"inter_allr:ring") forces on the inter_allr leg, not "SINGLE_CYCLE_RING" ' + FORCED),
    ("hier;inter_allr:^single_cycle_ring",
     '"SINGLE_CYCLE_RING" is an engine options.algo "hier;inter_allr:^single_cycle_ring" '
     '(clause "inter_allr:^single_cycle_ring") excludes on the inter_allr leg ' + EXCLUDED),
    ("^single_cycle_ring",
     '"SINGLE_CYCLE_RING" is an engine options.algo "^single_cycle_ring" excludes on every '
     "collective and its HIER legs " + EXCLUDED),
])
def test_a_hier_legs_engine_is_what_its_clause_leaves(hier16_scr, tmp_path, algo, said):
    """The inter_allr leg ran SINGLE_CYCLE_RING: a leg clause forcing RING, or excluding it,
    and an untargeted exclusion (which reaches the legs) are refused at the leg."""
    out = copy(hier16_scr, tmp_path)
    _retop(out, lambda top: top["options"].update(algo=algo))
    assert refused(out) == f'{_field(out)}hier.legs[1].algorithm {said}'


@pytest.mark.parametrize("algo", ["hier,ring", "hier;allreduce:^mesh", "hier", None,
                                  "inter_allr:single_cycle_ring;allreduce:^single_cycle_ring"])
def test_an_allow_list_does_not_reach_the_legs(hier16_scr, tmp_path, algo):
    """An allow-list does not reach the legs, nor an exclusion of an engine they do not run,
    and a leg clause beats an exclusion (docs/SELECTION.md §8)."""
    out = copy(hier16_scr, tmp_path)
    _retop(out, lambda top: top["options"].update(algo=algo))
    assert_clean(out)


# --------------------------------------------------------------------- options.host_cc

def test_an_all_reduce_without_host_cc_said_to_have_it_is_refused(ring8, tmp_path):
    """Without --host-cc a ring all-reduce's final reduce step is recv_reduce_copy (seed 001
    §4); options.host_cc true says it is recv_reduce_copy_send: refused at rank 0's first
    recv_reduce_copy leg."""
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["options"].update(host_cc=True))
    record = _first_leg(out, 0, RECV_REDUCE_COPY)
    assert refused(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, artifact legs.bin, record {record}: leaf "
        "recv_reduce_copy in a RING all-reduce entry (entry 0) of an output lowered with "
        "--host-cc (options.host_cc true): its final reduce step is recv_reduce_copy_send "
        + HOST_CC)


def test_an_all_reduce_with_host_cc_said_not_to_have_it_is_refused(ring8_host_cc, tmp_path):
    out = copy(ring8_host_cc, tmp_path)
    _retop(out, lambda top: top["options"].update(host_cc=False))
    record = _first_leg(out, 0, RECV_REDUCE_COPY_SEND)
    assert not (legs(out, 0)["leaf"] == RECV_REDUCE_COPY).any()
    assert refused(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, artifact legs.bin, record {record}: leaf "
        "recv_reduce_copy_send in a RING all-reduce entry (entry 0) of an output lowered "
        "without --host-cc (options.host_cc false): its final reduce step is "
        f"recv_reduce_copy, then direct_copy_send {HOST_CC}")


def test_a_kangaring_all_reduce_is_held_to_host_cc(tmp_path):
    """KANGARING's final reduce step is the ring's (FORMATS §8.3): over ranks 0..7 at LNC 2
    without --host-cc its legs hold recv_reduce_copy."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 8192, lnc=2), tmp_path / "o",
                     algo="kangaring")
    assert trigger0(out)["algorithm"] == "KANGARING"
    assert_clean(out)
    _retop(out, lambda top: top["options"].update(host_cc=True))
    assert "recv_reduce_copy in a KANGARING all-reduce entry (entry 0) of an output lowered " \
           "with --host-cc" in refused(out)


def test_host_cc_changes_nothing_in_a_reduce_scatter(tmp_path):
    """A reduce-scatter ends with recv_reduce_copy with and without --host-cc (docs/DESIGN.md
    "Host-CC and hybrid rings"): options.host_cc flipped still simulates as a match."""
    out = lower_spec(coll_spec("reduce_scatter", "bf16", 8, 8 * 256, lnc=2), tmp_path / "o")
    _retop(out, lambda top: top["options"].update(host_cc=True))
    assert_clean(out)


# ------------------------------------------------------------ a row on another's core

def test_a_row_moved_onto_another_ranks_core_is_named_by_its_device(ring8, tmp_path):
    """Rank 1's row moved onto rank 5's core (device 1, routing id 1, logical core 1, TPB 2,
    s-engine 1, die 0): TOPOLOGY §1 puts rank 1 on device 1 % 64 // 4 = 0, which the row's
    own rule names (until 2026-12-05 `field topology: ranks 5 and 1 share a core` ran
    first)."""
    out = copy(ring8, tmp_path)
    assert _rows(out)[5]["device"] == 1

    def move(top):
        row = next(r for r in top["topology"]["ranks"] if r["rank"] == 1)
        row.update(device=1, routing_id=1, logical_core=1, tpb=2, sengine=1, die=0)
    _retop(out, move)
    assert refused(out) == (f"{_field(out, 'topology.ranks[1].device')}rank 1: device should be "
                            f"0, 1 % 64 // 4 (4 ranks a device), not 1 ({FORMULA}; trn2 at "
                            f"lnc_size 2, {DEFAULT})")


def test_a_logical_core_moved_alone_is_named_by_it_not_by_tpb(ring8, tmp_path):
    """Rank 1's logical core set to 0 (rank 0's core, its tpb kept at 2): §1 puts rank 1 at
    logical core 1 % 4 = 1; the row's logical_core is named, not its tpb (2 is not 0 x 2)
    nor the shared core."""
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["topology"]["ranks"][1].update(logical_core=0))
    assert refused(out) == (f"{_field(out, 'topology.ranks[1].logical_core')}rank 1: "
                            "logical_core should be 1, 1 % 4 (4 ranks a device), not 0 "
                            f"({FORMULA}; trn2 at lnc_size 2, {DEFAULT})")
