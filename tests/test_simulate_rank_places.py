"""What ``simulate`` holds the manifest's platform and each rank's place to (docs/SIMULATOR.md
§1), and the HIER legs' ``op``: keys it left unread until 2026-12-05 evening.

* ``topology.ranks[].device`` and ``die`` were not read, and ``sengine`` only in a KANGARING
  unit against the manifest's own ``tpb``: every row is now where docs/TOPOLOGY.md §1 puts
  its rank on the platform ``options.topology`` names (a preset: trn2 at LNC 2, device
  ``r // 4``, logical core = s-engine ``r % 4``, TPB ``2 (r % 4)``, die ``(r % 4) >> 1``; at
  LNC 1 device ``r // 8``, TPB ``r % 8``, s-engine ``(r % 8) // 2``; trn1, one die of two
  s-engines of one TPB: device ``r // 2``, s-engine ``r % 2``, die 0), or, for a topology
  file, whose shape the manifest does not hold, the shape most rows fit;
* a preset's output is that preset's platform (its recorded platform keys, its cap);
* an output without the platform keys is held to its preset's CCE cap: a trn1 output
  lowered before 2026-12-01 (e4fa60a) tiled at 2048 elements is told to lower the model
  again (status 2);
* ``hier.legs[].op`` is what its leg runs (docs/DESIGN.md "HIER").

Expected values are worked out from docs/TOPOLOGY.md, DESIGN.md and FORMATS.md by hand; each
fixture asserts its rows first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nrtrewrite.emit.tiling import SDMA_MAX_CCE_ELEMENTS
from test_audit39_units import WHOLE
from test_simulate import assert_clean, coll_spec, lower_neff, lower_spec
from test_simulate_hier_checks import _field, _typed_refusal, hier16_out, kr8_out  # noqa: F401
from test_simulate_kick_leaf import _rehier, copy, refused, refused_as_older

ROOT = Path(__file__).resolve().parents[1]
FORMULA = ("docs/TOPOLOGY.md §1: rank = node x ranks_per_node + device x ranks_per_device + "
           "logical_core")
#: the rules of a row's s-engine and die (docs/TOPOLOGY.md §1), as a refusal names them
SENGINE_RULE = "docs/TOPOLOGY.md §1: sengine = tpb // tpbs_per_sengine"
DIE_RULE = "docs/TOPOLOGY.md §1: die = sengine // sengines_per_die"
DEFAULT = "the platform of options.topology null (the default, trn2)"
#: a topology file's platform: its shape is the one most rows fit
FILE_SHAPE = ('the shape most rows of the table fit: the platform of options.topology "t.json", '
              "a topology file, is not in the manifest")
#: a topology file's platform the manifest records whole (not exactly a preset: 2026-12-06)
RECORDED = ("the platform the manifest records: topology.devices_per_node, topology.device, "
            "topology.routing_ids")
#: the platform fields an output adds for a platform that is not exactly a preset
#: (docs/TOPOLOGY.md §2, FORMATS §1.1)
PLATFORM_FIELDS = ("lnc_sizes", "devices_per_node", "device", "links", "device_cycles",
                   "routing_ids", "kangaring", "mesh", "torus")


def _unrecord(top: dict) -> None:
    """The manifest as it is for a file's platform exactly a preset, or as an nrtrewrite
    before 2026-12-06 wrote it for any file: the platform named alone."""
    for key in PLATFORM_FIELDS:
        top["topology"].pop(key, None)


def _top(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def _retop(out: Path, fn) -> None:
    """Edit the top manifest with ``fn`` (it has no checksum of its own)."""
    top = _top(out)
    fn(top)
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")


def _rows(out: Path) -> dict[int, dict]:
    return {r["rank"]: r for r in _top(out)["topology"]["ranks"]}


def _place(r: dict) -> tuple:
    return (r["node"], r["device"], r["logical_core"], r["tpb"], r["sengine"], r["die"],
            r["routing_id"])


@pytest.fixture(scope="module")
def ring8(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 4096 elements over ranks 0..7, trn2 at LNC 2 (the default
    topology), RING. TOPOLOGY §1: rank r on device r // 4 (routing id the device), logical
    core r % 4, TPB 2 (r % 4), s-engine r % 4, die (r % 4) >> 1."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 4096, lnc=2),
                     tmp_path_factory.mktemp("ring8") / "o")
    assert _top(out)["options"]["topology"] is None
    assert {r: _place(p) for r, p in _rows(out).items()} == {
        r: (0, r // 4, r % 4, 2 * (r % 4), r % 4, (r % 4) >> 1, r // 4) for r in range(8)}
    return out


@pytest.fixture(scope="module")
def alone3(tmp_path_factory) -> Path:
    """A bf16 all-reduce of rank 3 alone, trn2 at LNC 2: a one-rank group copies IN to OUT on
    its own core (docs/TOPOLOGY.md §3), so no address of its artifacts names a device.
    Rank 3: device 0, logical core 3, TPB 6, s-engine 3, die 1."""
    out = lower_spec(coll_spec("all_reduce", "bf16", [3], 1024, lnc=2),
                     tmp_path_factory.mktemp("alone3") / "o", algo=None)
    assert _place(_rows(out)[3]) == (0, 0, 3, 6, 3, 1, 0)
    return out


@pytest.fixture(scope="module")
def trn1_ring(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 4096 elements over ranks 0..3 on trn1 (one die of two s-engines
    of one TPB, LNC 1): rank r on device r // 2, logical core = TPB = s-engine r % 2, die 0."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 4096), tmp_path_factory.mktemp("t1") /
                     "o", topology="trn1")
    assert {r: _place(p) for r, p in _rows(out).items()} == {
        r: (0, r // 2, r % 2, r % 2, r % 2, 0, r // 2) for r in range(4)}
    return out


# ---------------------------------------------------------------------------- presets

def test_a_rank_moved_to_another_device_changed_consistently_is_refused(alone3, tmp_path):
    """Rank 3 moved to device 5 (routing id 5 too, its core and engine kept): its one-rank
    group's artifacts address its own core only, so the run is unchanged and until
    2026-12-05 evening it simulated as a match. TOPOLOGY §1 puts rank 3 on device
    3 % 64 // 4 = 0 (16 devices of 4 ranks a node at LNC 2)."""
    out = copy(alone3, tmp_path)
    _retop(out, lambda top: top["topology"]["ranks"][0].update(device=5, routing_id=5))
    assert refused(out) == (f"{_field(out, 'topology.ranks[0].device')}rank 3: device should be "
                            f"0, 3 % 64 // 4 (4 ranks a device), not 5 ({FORMULA}; trn2 at "
                            f"lnc_size 2, {DEFAULT})")


def test_two_ranks_trading_devices_are_refused(ring8, tmp_path):
    """Ranks 1 and 5 trade devices (and routing ids): every core is still one rank's, but
    TOPOLOGY §1 puts rank 1 on device 1 % 64 // 4 = 0; named at its row (until 2026-12-05
    evening blamed on rank 0's legs.bin, `send signals rank 5, the ring successor of channel
    0 is 1`)."""
    out = copy(ring8, tmp_path)

    def edit(top):
        rows = {r["rank"]: r for r in top["topology"]["ranks"]}
        rows[1].update(device=1, routing_id=1)
        rows[5].update(device=0, routing_id=0)
    _retop(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[1].device')}rank 1: device should be "
                            f"0, 1 % 64 // 4 (4 ranks a device), not 1 ({FORMULA}; trn2 at "
                            f"lnc_size 2, {DEFAULT})")


@pytest.mark.parametrize("rank, die, says", [
    # rank 2: s-engine 2 of 2 a die: die 1; rank 1: s-engine 1, die 0
    (2, 0, "rank 2: die should be 1, sengine 2 // 2 (2 s-engines a die), not 0"),
    (1, 1, "rank 1: die should be 0, sengine 1 // 2 (2 s-engines a die), not 1"),
])
def test_a_rank_moved_to_another_die_is_refused(ring8, tmp_path, rank, die, says):
    """A row's ``die`` was not read: another die simulated as a match. TOPOLOGY §1: the die
    owns the s-engine, sengine // sengines_per_die (trn2: 2)."""
    out = copy(ring8, tmp_path)
    _retop(out, lambda top: top["topology"]["ranks"][rank].update(die=die))
    assert refused(out) == (f"{_field(out, f'topology.ranks[{rank}].die')}{says} ({DIE_RULE}; "
                            f"trn2 at lnc_size 2, {DEFAULT})")


def test_a_rank_moved_within_its_device_is_refused(ring8, tmp_path):
    """Ranks 1 and 2 trade cores within device 0, each row consistent (core, TPB, s-engine,
    die: rank 1 on core 2, TPB 4, s-engine 2, die 1): TOPOLOGY §1 puts rank 1 on logical
    core 1 % 4 = 1 (until 2026-12-05 evening blamed on rank 0's legs.bin, `send signals rank
    2, the ring successor of channel 0 is 1`)."""
    out = copy(ring8, tmp_path)

    def edit(top):
        rows = {r["rank"]: r for r in top["topology"]["ranks"]}
        rows[1].update(logical_core=2, tpb=4, sengine=2, die=1)
        rows[2].update(logical_core=1, tpb=2, sengine=1, die=0)
    _retop(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[1].logical_core')}rank 1: "
                            "logical_core should be 1, 1 % 4 (4 ranks a device), not 2 "
                            f"({FORMULA}; trn2 at lnc_size 2, {DEFAULT})")


@pytest.mark.parametrize("rank, edit, key, says", [
    (1, {"device": 3, "routing_id": 3}, "device", "rank 1: device should be 0, 1 % 32 // 2 (2 "
     "ranks a device), not 3"),
    (1, {"die": 1}, "die", "rank 1: die should be 0, sengine 1 // 2 (2 s-engines a die), not 1"),
    (3, {"sengine": 0}, "sengine", "rank 3: sengine should be 1, tpb 1 // 1 (1 TPB an "
     "s-engine), not 0"),
    (2, {"routing_id": 5}, "routing_id", None),
], ids=["device", "die", "sengine", "routing_id"])
def test_a_trn1_rank_is_held_to_trn1s_shape(trn1_ring, tmp_path, rank, edit, key, says):
    """trn1 (options.topology "trn1"): 16 devices of 2 ranks a node, 1 TPB an s-engine, 2
    s-engines a die; a preset's routing id is the device index (rank 2: device 1)."""
    out = copy(trn1_ring, tmp_path)
    _retop(out, lambda top: top["topology"]["ranks"][rank].update(edit))
    whose = 'trn1 at lnc_size 1, the platform of options.topology "trn1"'
    if says is None:
        says = ("rank 2: routing_id should be 1, the routing id of device 1, not 5 "
                f"(docs/TOPOLOGY.md §1; {whose})")
    else:
        rule = {"die": DIE_RULE, "sengine": SENGINE_RULE}.get(key, FORMULA)
        says = f"{says} ({rule}; {whose})"
    assert refused(out) == f"{_field(out, f'topology.ranks[{rank}].{key}')}{says}"


@pytest.mark.parametrize("edit, key, says", [
    ({"platform": "trn2", "hw_generation": 3, "cce_max_elements": 2048}, "platform",
     "topology.platform should be \"trn1\", trn1's, not \"trn2\""),
    ({"hw_generation": 3, "cce_max_elements": 2048}, "hw_generation",
     "topology.hw_generation should be 2, trn1's, not 3"),
    ({"lnc_size": 2}, "lnc_size", "topology.lnc_size should be one of trn1's lnc sizes 1, not 2"),
])
def test_a_presets_output_is_on_the_presets_platform(trn1_ring, tmp_path, edit, key, says):
    """``lower`` writes the platform keys from the preset options.topology names (trn1: the
    platform trn1, NeuronCore-v2, LNC 1 only: docs/TOPOLOGY.md §1 "Presets"); a trn1 output
    said to be trn2's (the cap 2048 with it) or of LNC 2 is refused naming the key."""
    out = copy(trn1_ring, tmp_path)
    _retop(out, lambda top: top["topology"].update(edit))
    assert refused(out) == (f"{_field(out, f'topology.{key}')}{says} (the platform of "
                            'options.topology "trn1": docs/TOPOLOGY.md §1)')


@pytest.mark.parametrize("key", ["options", "options.topology"])
def test_options_topology_is_read_with_its_type(ring8, tmp_path, key):
    """options.topology is read (a string or null): missing, or a number, is status 2."""
    out = copy(ring8, tmp_path)
    if key == "options":
        _retop(out, lambda top: top.pop("options"))
        assert _typed_refusal(out) == f"{_field(out, 'options')}missing"
    else:
        _retop(out, lambda top: top["options"].update(topology=5))
        assert _typed_refusal(out) == f"{_field(out, 'options.topology')}must be a string, not 5"


# ---------------------------------------------------------------------------- topology files

@pytest.fixture(scope="module")
def file_ring(tmp_path_factory) -> Path:
    """A bf16 all-reduce over ranks 0..3 and 20..23 on a topology file of 4 devices a node
    of one die (2 s-engines of 2 TPBs: 4 cores), routing ids 7, 3, 12, 0, LNC 1, lowered as
    ``--topology t.json``: 4 ranks a device, 16 a node, so ranks 20..23 are node 1's device
    1 (routing id 3); rank r's TPB r % 4, s-engine (r % 4) // 2, die 0."""
    root = tmp_path_factory.mktemp("file")
    (root / "t.json").write_text(json.dumps({
        "format": "nrtrewrite-topology/1", "name": "one-die", "nodes": 2,
        "devices_per_node": 4, "torus": [2, 2], "routing_ids": [7, 3, 12, 0],
        "device": {"dies": 1, "sengines_per_die": 2, "tpbs_per_sengine": 2, "c2c_ports": 4}}))
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    try:
        out = lower_spec(coll_spec("all_reduce", "bf16", [0, 1, 2, 3, 20, 21, 22, 23], 4096),
                         root / "o", topology="t.json")
    finally:
        mp.undo()
    assert _top(out)["options"]["topology"] == "t.json"
    assert {r: _place(p) for r, p in _rows(out).items()} == {
        r: (r // 16, r % 16 // 4, r % 4, r % 4, r % 4 // 2, 0, [7, 3][r % 16 // 4])
        for r in [0, 1, 2, 3, 20, 21, 22, 23]}
    return out


def test_a_topology_files_output_simulates(file_ring):
    assert_clean(file_ring)


@pytest.mark.parametrize("recorded", [True, False])
def test_a_topology_files_rank_moved_to_another_device_is_refused(file_ring, tmp_path,
                                                                  recorded):
    """Rank 21 moved to node 1's device 2 (routing id 12, device 2's): the platform the
    manifest records (4 devices a node of 1 x 2 x 2 = 4 cores, LNC 1: 4 ranks a device), or,
    not recorded, the shape the other rows fit, the same, puts it on device 21 % 16 // 4 =
    1."""
    out = copy(file_ring, tmp_path)

    def edit(top):
        top["topology"]["ranks"][5].update(device=2, routing_id=12)
        if not recorded:
            _unrecord(top)
    _retop(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[5].device')}rank 21: device should be "
                            f"1, 21 % 16 // 4 (4 ranks a device), not 2 ({FORMULA}; "
                            f"{RECORDED if recorded else FILE_SHAPE})")


def test_a_topology_files_device_has_one_routing_id(file_ring, tmp_path):
    """Device 0's rows say routing id 7 on node 0; one of node 1's devices saying another
    device's id, or a device of two ids, is refused (docs/TOPOLOGY.md §2: one routing id a
    device, each its own; the same nodes repeat)."""
    out = copy(file_ring, tmp_path)
    _retop(out, lambda top: (top["topology"]["ranks"][5].update(routing_id=12),
                             _unrecord(top)))
    assert refused(out) == (f"{_field(out, 'topology.ranks[5].routing_id')}rank 21: routing_id "
                            "should be 3, device 1's at topology.ranks[4], not 12 (a device has "
                            "one routing id, on every node: docs/TOPOLOGY.md §2 routing_ids)")
    out = copy(file_ring, tmp_path, "u")

    def edit(top):
        for row in top["topology"]["ranks"][4:]:
            row["routing_id"] = 7
        _unrecord(top)
    _retop(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[4].routing_id')}rank 20: routing_id "
                            "7 of device 1 is device 0's at topology.ranks[0] (each device has "
                            "its own: docs/TOPOLOGY.md §2 routing_ids)")


def _as_file(out: Path, rows) -> None:
    """Say ``out`` was lowered on a topology file ("t.json"), and give each row of its table
    ``rows(rank)``'s values."""
    def edit(top):
        top["options"]["topology"] = "t.json"
        for row in top["topology"]["ranks"]:
            row.update(rows(row["rank"]))
    _retop(out, edit)


def test_the_units_sengine_check_holds_a_topology_files_table(kr8_out, tmp_path):  # noqa: F811
    """kr8_out (KANGARING over ranks 0..7 at LNC 2) said to be a topology file's whose
    s-engines hold 4 TPBs (every row's s-engine tpb // 4, die 0): a shape §1 allows, so the
    rows pass, but a KANGARING device's 4 engines of one rank each hold 2 TPBs at LNC 2:
    rank 1 (TPB 2) is on s-engine 1 (check_kangaring_units, docs/TOPOLOGY.md §4)."""
    out = copy(kr8_out, tmp_path)
    _as_file(out, lambda r: {"sengine": 2 * (r % 4) // 4, "die": 0})
    assert refused(out) == (f"{_field(out, 'topology.ranks[1].sengine')}rank 1: sengine should "
                            "be 1, tpb 2 // 2, not 0 (the s-engine of its first TPB, tpb // "
                            "tpbs_per_sengine: its device's 4 s-engines hold 1 rank each in the "
                            "units of triggers[0].kangaring: docs/TOPOLOGY.md §1, §4)")


def test_the_units_whole_device_check_holds_a_topology_files_table(kr8_out,  # noqa: F811
                                                                   tmp_path):
    """kr8_out said to be a topology file's of 2 ranks a device (rank r on device r // 2,
    routing id r // 2, logical core r % 2, TPB 2 (r % 2), s-engine r % 2, die 0): a shape
    §1 allows, but KangaRing needs devices of 4 s-engines, 4 or 8 ranks
    (docs/TOPOLOGY.md §4)."""
    out = copy(kr8_out, tmp_path)
    _as_file(out, lambda r: {"device": r // 2, "routing_id": r // 2, "logical_core": r % 2,
                             "tpb": 2 * (r % 2), "sengine": r % 2, "die": 0})
    assert refused(out) == (f"{_field(out)}kangaring: the logical cores the replica_group "
                            "holds of the device of node 0, routing_id 0, "
                            + WHOLE.format("[0, 1]"))


# ---------------------------------------------------------------------------- HIER leg op

@pytest.mark.parametrize("leg, op, says", [
    (0, "ALLREDUCE", 'hier.legs[0].op should be REDUCE_SCATTER, not "ALLREDUCE": the '
     "intra_redsct leg runs a reduce-scatter"),
    (1, "ALLGATHER", 'hier.legs[1].op should be ALLREDUCE, not "ALLGATHER": the inter_allr leg '
     "runs an all-reduce"),
    (2, "REDUCE_SCATTER", "hier.legs[2].op should be ALLGATHER, not \"REDUCE_SCATTER\": the "
     "intra_allg leg runs an all-gather"),
], ids=["intra_redsct", "inter_allr", "intra_allg"])
def test_a_hier_legs_op_other_than_what_it_runs_is_refused(  # noqa: F811
        hier16_out, tmp_path, leg, op, says):
    """docs/DESIGN.md "HIER": an all-reduce's legs reduce-scatter over the node, all-reduce
    across nodes, all-gather over the node. ``op`` was not read: any value simulated as a
    match."""
    out = copy(hier16_out, tmp_path)
    legs = _rehier(out, lambda legs: legs[leg].update(op=op))
    assert [x["op"] for x in legs] == ["REDUCE_SCATTER", "ALLREDUCE", "ALLGATHER"]
    assert refused(out) == f"{_field(out)}{says} (docs/DESIGN.md \"HIER\")"


def test_a_hier_legs_op_is_read_with_its_type(hier16_out, tmp_path):  # noqa: F811
    out = copy(hier16_out, tmp_path)
    _rehier(out, lambda legs: legs[0].update(op=5))
    assert _typed_refusal(out) == (f"{_field(out, 'triggers[0].hier.legs[0].op')}must be a "
                                   "string, not 5")


# ---------------------------------------------------------------------------- older trn1

def _drop_platform(top: dict) -> None:
    """The top manifest as an nrtrewrite before 2026-12-01 (e90911b) wrote it: no platform
    keys (and no mesh_sub_type, new on 2026-12-04)."""
    for key in ("platform", "hw_generation", "cce_max_elements", "mesh_sub_type"):
        del top["topology"][key]


def test_a_trn1_output_tiled_at_2048_says_lower_the_model_again(tmp_path):
    """An nrtrewrite before e4fa60a (2026-12-01) tiled trn1 at 2048 elements a CCE
    descriptor (trn2's cap) and recorded no platform: mix8 lowered so (the cap monkeypatched
    back), its platform keys dropped. FORMATS §6: trn1 mix8's cce.bin record 0 was W2 0x1000
    (4096 bytes, 2048 bf16 elements). Held to the largest cap it simulated as a match; its
    options.topology "trn1" holds it to trn1's 1024, and it is told to lower the model
    again, status 2."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(SDMA_MAX_CCE_ELEMENTS, 2, 2048)
        out = lower_neff(ROOT / "fixtures" / "mix8.neff", tmp_path / "o", topology="trn1",
                         algo=None)
    _retop(out, _drop_platform)
    assert refused_as_older(out) == (
        f"{out / 'rank-0000'}: field w2, rank 0, artifact cce.bin, record 0: W2 length 4096 "
        "bytes = 2048 elements of 2 bytes, more than the 1024 elements per CCE descriptor of "
        'platform trn1 (hw_generation 2, the preset of options.topology "trn1": the manifest '
        "records no platform; seed 000 §3.4); an nrtrewrite before 2026-12-01 tiled every "
        "platform at 2048: lower the model again")


def test_a_trn1_output_tiled_at_1024_without_platform_keys_simulates(trn1_ring, tmp_path):
    """An nrtrewrite from e4fa60a to e90911b (2026-12-01) tiled trn1 at 1024 and recorded no
    platform: such an output still simulates, held to trn1's cap."""
    out = copy(trn1_ring, tmp_path)
    _retop(out, _drop_platform)
    assert_clean(out)


def test_a_topology_files_table_naming_a_device_past_a_nodes_64_is_refused(tmp_path):
    """docs/TOPOLOGY.md §2: a node holds at most 64 devices. A topology file of 64 one-core
    devices a node (LNC 1) puts ranks 0 and 64 on node 0 device 0 and node 1 device 0; both
    rows moved to node 0, rank 64 on device 64 (its routing id 1): with every rank on node
    0 and one rank a device the rows name device r, and 64 is past the node's 64 (until
    2026-12-05 such a table passed, refused only by an address in dma.bin)."""
    (tmp_path / "w.json").write_text(json.dumps({
        "format": "nrtrewrite-topology/1", "name": "wide", "nodes": 2,
        "devices_per_node": 64, "links": [[0, 1]],
        "device": {"dies": 1, "sengines_per_die": 1, "tpbs_per_sengine": 1, "c2c_ports": 4}}))
    mp = pytest.MonkeyPatch()
    mp.chdir(tmp_path)
    try:
        out = lower_spec(coll_spec("all_reduce", "bf16", [0, 64], 4096, lnc=1),
                         tmp_path / "o", topology="w.json")
    finally:
        mp.undo()
    assert {r: _place(p)[:3] for r, p in _rows(out).items()} == {0: (0, 0, 0), 64: (1, 0, 0)}

    def edit(top):
        rows = {r["rank"]: r for r in top["topology"]["ranks"]}
        rows[64].update(node=0, device=64, routing_id=1)
    _retop(out, edit)
    # the manifest records the platform (not exactly a preset): 64 devices a node of one
    # rank, so rank 64 is node 64 // 64 = 1's
    assert refused(out) == (f"{_field(out, 'topology.ranks[1].node')}rank 64: node should be 1, "
                            "64 // 64 (64 devices of 1 rank a node), not 0 "
                            f"({FORMULA}; {RECORDED})")
    _retop(out, _unrecord)  # (not recorded: the shape the rows fit, every rank on node 0)
    shape = FILE_SHAPE.replace('"t.json"', '"w.json"')
    assert refused(out) == (f"{_field(out, 'topology.ranks[1].device')}rank 64: device 64 is "
                            "past the 64 devices a node holds at most (docs/TOPOLOGY.md §2; "
                            f"{shape})")


# ---------------------------------------------- a topology file's platform recorded (2026-12-06)

def test_a_topology_files_rows_are_held_to_the_recorded_routing_ids(file_ring, tmp_path):
    """The manifest records the file's routing ids, 7, 3, 12, 0 (docs/TOPOLOGY.md §2; not
    exactly a preset): node 1's device 1 saying 12, or device 1's rows saying 7 on both
    nodes (one id of their own, which the rows alone do not tell), is refused naming the
    recorded id (until 2026-12-06 only the rows' own consistency was held)."""
    out = copy(file_ring, tmp_path)
    _retop(out, lambda top: top["topology"]["ranks"][5].update(routing_id=12))
    assert refused(out) == (f"{_field(out, 'topology.ranks[5].routing_id')}rank 21: routing_id "
                            "should be 3, the routing id of device 1, not 12 (docs/TOPOLOGY.md "
                            f"§1; {RECORDED})")
    out = copy(file_ring, tmp_path, "u")

    def edit(top):  # device 0 and 1 trade ids everywhere: the rows agree with each other
        for row in top["topology"]["ranks"]:
            row["routing_id"] = {7: 3, 3: 7}[row["routing_id"]]
    _retop(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[0].routing_id')}rank 0: routing_id "
                            "should be 7, the routing id of device 0, not 3 (docs/TOPOLOGY.md "
                            f"§1; {RECORDED})")


def test_a_topology_files_table_relabelled_to_another_shape_contradicts_the_record(
        file_ring, tmp_path):
    """file_ring's device is 1 die of 2 s-engines of 2 TPBs: rank 2 (TPB 2) is on s-engine 1.
    Its rows relabelled whole to 1 s-engine of 4 TPBs (every sengine 0) is a shape §1 allows,
    which the rows alone cannot tell from the file's (not recorded, it simulates as a
    match); against the recorded device it is refused."""
    out = copy(file_ring, tmp_path)
    _retop(out, lambda top: [row.update(sengine=0) for row in top["topology"]["ranks"]])
    assert refused(out) == (f"{_field(out, 'topology.ranks[2].sengine')}rank 2: sengine should "
                            "be 1, tpb 2 // 2 (2 TPBs an s-engine), not 0 "
                            f"({SENGINE_RULE}; {RECORDED})")
    _retop(out, _unrecord)
    assert_clean(out)


@pytest.mark.parametrize("edit, key, says", [
    (lambda t: t.update(lnc_size=0), "topology.lnc_size",
     "topology.lnc_size is 0: an LNC size is at least 1"),
    (lambda t: t.update(devices_per_node=65), "topology.devices_per_node",
     "topology.devices_per_node is 65: a node holds 1 to 64 devices"),
    (lambda t: t["device"].update(tpbs_per_sengine=0), "topology.device.tpbs_per_sengine",
     "topology.device.tpbs_per_sengine is 0: a count of at least 1"),
    (lambda t: t["device"].update(dies=8), "topology.device",
     "topology.device holds 8 x 2 x 2 = 32 cores: at most 16, a multiple of lnc_size 1"),
    (lambda t: t.update(routing_ids=[7, 3, 12]), "topology.routing_ids",
     "topology.routing_ids lists 3 routing ids: one for each of the 4 devices "
     "(topology.devices_per_node)"),
    (lambda t: t["routing_ids"].__setitem__(2, 64), "topology.routing_ids[2]",
     "topology.routing_ids[2] is 64: outside 0..63"),
    (lambda t: t["routing_ids"].__setitem__(3, 7), "topology.routing_ids[3]",
     "topology.routing_ids[3] is 7: device 0's too (each device has its own)"),
])
def test_the_recorded_platform_is_one_lower_loads(file_ring, tmp_path, edit, key, says):
    out = copy(file_ring, tmp_path)
    _retop(out, lambda top: edit(top["topology"]))
    assert refused(out) == (f"{_field(out, key)}{says} (docs/TOPOLOGY.md §2: lower loads no "
                            "such platform)")


def test_the_recorded_platform_is_read_with_its_type(file_ring, tmp_path):
    """devices_per_node, device and routing_ids come together: one without the others, or
    of another type, is exit 2 naming the key."""
    out = copy(file_ring, tmp_path)
    _retop(out, lambda top: top["topology"].update(devices_per_node="4"))
    assert _typed_refusal(out) == (f"{_field(out, 'topology.devices_per_node')}must be an "
                                   'integer, not "4"')
    out = copy(file_ring, tmp_path, "u")
    _retop(out, lambda top: top["topology"].pop("device"))
    assert _typed_refusal(out) == f"{_field(out, 'topology.device')}missing"


@pytest.fixture(scope="module")
def row_ring(tmp_path_factory) -> Path:
    """A bf16 all-reduce over ranks 0..15 (LNC 1: devices 0 and 1 of node 0) on trn2 of 3
    C2C ports, whose 4 x 4 torus keeps the x links alone (docs/TOPOLOGY.md §1): a row is the
    ring 0-1-2-3; the manifest records them (not exactly a preset)."""
    root = tmp_path_factory.mktemp("rows")
    (root / "t.json").write_text(json.dumps({"platform": "trn2", "device": {"c2c_ports": 3}}))
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    try:
        out = lower_spec(coll_spec("all_reduce", "bf16", 16, 4096), root / "o",
                         topology="t.json")
    finally:
        mp.undo()
    links = _top(out)["topology"]["links"]
    assert [0, 0, 1] in links and [1, 1, 0] in links and [0, 1, 3] in links
    return out


def test_a_hop_between_devices_the_recorded_links_do_not_join_is_refused(row_ring, tmp_path):
    """Bug (the forty-sixth session's note): an output lowered before 2026-12-06 on
    ``{"platform": "trn2", "device": {"c2c_ports": 1}}`` records no link (port 0, +x, faces
    a -x port the next device lacks), yet its ring runs from device 0 to device 1 as a routed
    hop; it simulated as a match, where ``lower`` now refuses the group.  Refused naming
    the trigger and the devices; a chain through other devices is a route (row_ring without
    its link 0-1 still joins 0 and 1 through 3 and 2)."""
    assert_clean(row_ring)
    out = copy(row_ring, tmp_path)
    _retop(out, lambda top: top["topology"].update(links=[]))
    assert refused(out) == (f"{_field(out)}replica_group needs a hop between devices 0 and 1 "
                            "of node 0, which no chain of the links topology.links records "
                            "joins: the hop has no route (lower refuses such a group: "
                            "docs/TOPOLOGY.md §1)")
    out = copy(row_ring, tmp_path, "u")
    _retop(out, lambda top: top["topology"].update(links=[
        link for link in top["topology"]["links"] if {link[0], link[2]} != {0, 1}]))
    assert_clean(out)
