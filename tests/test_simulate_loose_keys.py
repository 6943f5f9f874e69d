"""Manifest keys ``simulate`` read loosely, each held to FORMATS §1.1 and docs/SIMULATOR.md §1
with the exact one-line refusal and the exit status of docs/CLI.md (2: a key the format
requires, missing or of another type; 1: a protocol error, a value the format does not
allow):

* a MESH / SINGLE_STEP_MESH trigger without its ``mesh`` section, an INTRA_RDH / INTER_RDH
  one without its ``rdh``, was read as one without ``blocks`` / ``super_blocks`` and
  simulated as a match (FORMATS §1.1: "mesh triggers add ``mesh``", "RDH triggers ``rdh``");
* ``buffers: []`` on a trigger other than SINGLE_CYCLE_RING was read as no ``buffers`` key
  (FORMATS §1.1: such a trigger "has no ``buffers`` key (not an empty list)");
* a flat SINGLE_CYCLE_RING trigger's ``buffers[].role`` was not read (FORMATS §1.1: its
  buffers are its second receive and staging views, recv2 in scratch and gw2 in gw, §8.3:
  its CCW sends across the network stage in the second gateway view)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from test_simulate import cli, coll_spec, lower_spec
from test_simulate_kick_leaf import rehash, refused


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "t"
    shutil.copytree(src, dst)
    return dst


def _edit_trigger(out: Path, k: int, fn) -> None:
    """Apply ``fn`` to trigger ``k`` of OUT/manifest.json (the top manifest has no checksum
    of its own, so nothing else needs recording again)."""
    path = out / "manifest.json"
    top = json.loads(path.read_text())
    fn(top["triggers"][k])
    path.write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")


def _status_2(out: Path, *extra) -> str:
    """``simulate OUT`` cannot be done: exit 2, one line on stderr, and with ``--json`` the
    error document holding the same line; the line."""
    res = cli("simulate", out, *extra)
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nrtrewrite: error: "), res.stderr
    line = lines[0][len("nrtrewrite: error: "):]
    res = cli("simulate", out, "--json", *extra)
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["ok"] is None and doc["error"] == line and doc["triggers"] == []
    return line


# ------------------------------------------------------------------------------ outputs

@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    """Small outputs lowered once: ``name -> (spec, --algo, topology)``."""
    root = tmp_path_factory.mktemp("loose")
    made: dict[str, Path] = {}
    cases = {
        # 2 ranks on one trn2 node, 1000 bf16 elements
        "mesh": (coll_spec("all_reduce", "bf16", 2, 1000), "mesh", None),
        "single_step_mesh": (coll_spec("all_reduce", "bf16", 2, 1000), "single_step_mesh",
                             None),
        "intra_rdh": (coll_spec("all_reduce", "bf16", 2, 1000), "intra_rdh", None),
        "ring": (coll_spec("all_reduce", "bf16", 2, 1000), "ring", None),
        # INTER_RDH: one rank on each of 8 nodes (trn2: 128 ranks a node at LNC 1)
        "inter_rdh": (coll_spec("all_reduce", "bf16", [128 * i for i in range(8)], 1024),
                      "inter_rdh", "trn2:nodes=8"),
        # SINGLE_CYCLE_RING over 4 ranks of one node, and over one rank on each of 2 nodes
        "scr": (coll_spec("all_reduce", "bf16", 4, 1000), "single_cycle_ring", None),
        "scr_nodes": (coll_spec("all_reduce", "bf16", [0, 128], 1000), "single_cycle_ring",
                      "trn2:nodes=2"),
    }

    def get(name: str) -> Path:
        if name not in made:
            spec, algo, topology = cases[name]
            made[name] = lower_spec(spec, root / name, algo=algo, topology=topology)
        return made[name]
    return get


# ------------------------------------------------------- a mesh or RDH trigger's section

@pytest.mark.parametrize("engine, algorithm, key", [
    ("mesh", "MESH", "mesh"), ("single_step_mesh", "SINGLE_STEP_MESH", "mesh"),
    ("intra_rdh", "INTRA_RDH", "rdh"), ("inter_rdh", "INTER_RDH", "rdh")])
@pytest.mark.parametrize("how", ["deleted", "null"])
def test_a_mesh_or_rdh_trigger_without_its_section_is_refused_naming_it(
        lowered, tmp_path, engine, algorithm, key, how):
    """FORMATS §1.1: mesh triggers add ``mesh``, RDH triggers ``rdh``. Deleted (or null),
    the section was read as one without ``blocks`` / ``super_blocks`` and the output
    simulated as a match; it is a key the format requires, missing: exit 2, naming the
    trigger and the section, as a HIER trigger without ``hier`` is refused."""
    out = _copy(lowered(engine), tmp_path)
    _edit_trigger(out, 0, lambda t: t.pop(key) if how == "deleted" else t.update({key: None}))
    owners = "MESH and SINGLE_STEP_MESH" if key == "mesh" else "INTRA_RDH and INTER_RDH"
    article = "an" if key == "rdh" else "a"
    assert _status_2(out) == (f"{out / 'manifest.json'}: field triggers[0]: the trigger "
                              f"has no {key} section, which its algorithm \"{algorithm}\" needs "
                              f"({owners} triggers have {article} {key} section: FORMATS §1.1)")


# ----------------------------------------------------- buffers: [] and absent, told apart

@pytest.mark.parametrize("engine, algorithm", [("ring", "RING"), ("mesh", "MESH")])
def test_an_empty_buffers_list_on_a_trigger_without_second_views_is_refused(
        lowered, tmp_path, engine, algorithm):
    """FORMATS §1.1: a trigger without second views has no ``buffers`` key (not an empty
    list). ``buffers: []`` on a RING or MESH trigger was read as no key and simulated as a
    match; it is a protocol error naming the key and the algorithm."""
    out = _copy(lowered(engine), tmp_path)
    _edit_trigger(out, 0, lambda t: t.__setitem__("buffers", []))
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: buffers is [] on a "
                            f"{algorithm} trigger (a trigger without second views has no "
                            "buffers key, not an empty list: FORMATS §1.1)")


@pytest.mark.parametrize("value, says", [
    (None, "missing"), ("null", "must be a list, not null")], ids=["deleted", "null"])
def test_a_single_cycle_trigger_without_buffers_is_status_2(lowered, tmp_path, value, says):
    """FORMATS §1.1: a SINGLE_CYCLE_RING trigger's ``buffers`` lists its second views, so the
    key is required there: deleted it was read as an empty list (refused later, at
    sb2sb.bin, `the BD address of the piece's first element ... is not where that element
    of the op's buffers lives`); it is a key the format requires, exit 2 naming it."""
    out = _copy(lowered("scr"), tmp_path)
    _edit_trigger(out, 0, lambda t: t.pop("buffers") if value is None
                  else t.__setitem__("buffers", None))
    assert _status_2(out) == f"{out / 'manifest.json'}: field triggers[0].buffers: {says}"


# --------------------------------------------- a flat single-cycle trigger's buffer roles

#: why a flat single-cycle trigger's buffers are recv2 and gw2 (FORMATS §1.1, §8.3)
SCR_WHY = ("a SINGLE_CYCLE_RING trigger lists recv2 in scratch, and gw2 in gw when its group "
           "spans nodes: FORMATS §1.1, §8.3")


def test_single_cycle_buffers_as_lowered(lowered):
    """What the refusals below start from, worked out from FORMATS §1.1 and docs/DESIGN.md
    ("Single-cycle ring": the CCW partials in a second receive view, the CCW sends staged in
    a second gateway view): 1000 bf16 elements, the second views one space (2000 bytes) in;
    on one node no gateway view at all (nothing crosses the network)."""
    one = json.loads((lowered("scr") / "manifest.json").read_text())["triggers"][0]
    two = json.loads((lowered("scr_nodes") / "manifest.json").read_text())["triggers"][0]
    assert one["buffers"] == [{"offset": 2000, "region": "scratch", "role": "recv2"}]
    assert two["buffers"] == [{"offset": 2000, "region": "scratch", "role": "recv2"},
                              {"offset": 2000, "region": "gw", "role": "gw2"}]


@pytest.mark.parametrize("which, edit, says", [
    ("scr", lambda b: b[0].__setitem__("role", "zz"),
     f'buffers[0].role should be recv2 or gw2, not "zz" ({SCR_WHY})'),
    ("scr", lambda b: b[0].__setitem__("role", "recv"),
     f'buffers[0].role should be recv2 or gw2, not "recv" ({SCR_WHY})'),
    ("scr", lambda b: b.append(dict(b[0])),
     f"buffers should list 1 recv2 buffer, not 2 ({SCR_WHY})"),
    ("scr", lambda b: b.clear(), f"buffers should list 1 recv2 buffer, not 0 ({SCR_WHY})"),
    ("scr_nodes", lambda b: b[1].__setitem__("role", "recv2"),
     f"buffers[1] (role recv2) should be in scratch, not gw ({SCR_WHY})"),
    ("scr_nodes", lambda b: b[0].__setitem__("region", "gw"),
     f"buffers[0] (role recv2) should be in scratch, not gw ({SCR_WHY})"),
    ("scr_nodes", lambda b: b.pop(1),
     f"buffers should list 1 gw2 buffer, not 0: its replica_group spans nodes ({SCR_WHY})"),
    # docs/DESIGN.md "Single-cycle ring": each second view at one space, 1000 x 2 bytes
    ("scr", lambda b: b[0].__setitem__("offset", 0),
     "buffers[0].offset (role recv2) should be 2000, one space of scratch, not 0 "
     '(docs/DESIGN.md "Single-cycle ring": RECV and the staging at 0, the second views at one '
     "space, the trigger's 1000 BF16 elements)"),
    ("scr_nodes", lambda b: b[1].__setitem__("offset", 0),
     "buffers[1].offset (role gw2) should be 2000, one space of gw, not 0 (docs/DESIGN.md "
     '"Single-cycle ring": RECV and the staging at 0, the second views at one space, the '
     "trigger's 1000 BF16 elements)"),
], ids=["zz", "recv", "recv2-twice", "empty", "two-recv2", "recv2-in-gw", "no-gw2",
        "recv2-at-0", "gw2-at-0"])
def test_single_cycle_buffer_roles_other_than_formats_are_refused(
        lowered, tmp_path, which, edit, says):
    """A flat SINGLE_CYCLE_RING trigger's buffers are recv2 in scratch, and gw2 in gw when its
    group spans nodes (FORMATS §1.1, §8.3). Their roles were not read: a role "zz", a second
    recv2, gw2 renamed recv2 (inside the gw region) simulated as a match; an empty list or
    a dropped gw2 was blamed on sb2sb.bin (`the BD address of the piece's first element ...
    is not where that element of the op's buffers lives`); recv2 moved to scratch 0
    simulated as a match and gw2 moved to gw 0 was blamed on sb2sb.bin (until 2026-12-05:
    their offsets were held to their regions only). Each is a protocol error naming the
    key."""
    out = _copy(lowered(which), tmp_path)
    _edit_trigger(out, 0, lambda t: edit(t["buffers"]))
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


def test_a_single_cycle_buffer_role_of_another_type_is_status_2(lowered, tmp_path):
    """``role`` is now read, a string (FORMATS §1.1): 5 is a value of the wrong JSON type,
    exit 2 naming the key."""
    out = _copy(lowered("scr"), tmp_path)
    _edit_trigger(out, 0, lambda t: t["buffers"][0].__setitem__("role", 5))
    assert _status_2(out) == (f"{out / 'manifest.json'}: field triggers[0].buffers[0].role: "
                              "must be a string, not 5")


def test_the_refusals_leave_outputs_as_lowered_a_match(lowered):
    """Every output above, as lowered (rehashed: unchanged), simulates as a match."""
    for name in ("mesh", "single_step_mesh", "intra_rdh", "inter_rdh", "ring", "scr",
                 "scr_nodes"):
        out = lowered(name)
        rehash(out)
        res = cli("simulate", out)
        assert res.exit_code == 0, (name, res.output)


@pytest.mark.parametrize("engine", ["ring", "mesh"])
def test_buffers_null_on_a_trigger_without_second_views_is_the_key_absent(lowered, tmp_path,
                                                                         engine):
    """docs/SIMULATOR.md §1: an optional key given null is read as absent, as every optional
    key's null is (JSON's "no value"; an assemble spec and a topology file read it so):
    ``buffers: null`` on a RING or MESH trigger is no ``buffers`` key, a match, where ``[]``
    is a value FORMATS §1.1 does not allow (refused above) and a SINGLE_CYCLE_RING trigger's
    required ``buffers`` null is of the wrong type (status 2, above)."""
    out = _copy(lowered(engine), tmp_path)
    _edit_trigger(out, 0, lambda t: t.__setitem__("buffers", None))
    res = cli("simulate", out)
    assert res.exit_code == 0, res.output
