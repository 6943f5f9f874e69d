"""The manifest keys ``simulate`` does not read, as docs/SIMULATOR.md §1 lists them: the list
named a few (``tool_version``, ``input``, ``options``, ``legs``, ``policy_algorithm``,
``fallback_reason``, ``rdh.channel``, ``reason``), but deleting more left an output a match
(a doc-claims audit: ``topology.name``, ``topology.ranks[].device`` ..., ``rdh.steps`` ...).
The keys were found by deleting each key of outputs of every engine, one at a time, and
setting it to a string and to a number; here each listed key is deleted (or given such a
value) in an output of each engine, all at once, and the keys next to them that are read are
refused when deleted."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from nrtrewrite.bundle import write_output
from nrtrewrite.cli.lower import load_and_plan
from nrtrewrite.errors import NrtRewriteError
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.simulate import simulate_output

ROOT = Path(__file__).resolve().parents[1]

#: The top-level keys SIMULATOR.md §1 says are not read ([] : every item of a list).
#: (``topology.ranks[].sengine`` and ``tpb`` are read since 2026-12-05: a KANGARING unit is
#: the ranks of two s-engines of a device, docs/TOPOLOGY.md §4; later that day
#: ``options.topology``, ``topology.ranks[].device`` and ``die``: every rank's place is held
#: to the platform's shape, docs/TOPOLOGY.md §1)
#: (later still ``options.algo``, ``options.host_cc``, ``topology.name`` and a trigger's own
#: ``legs``: tests/test_simulate_unread_keys2.py)
UNREAD_TOP = ["tool_version", "input"]
#: The keys of each trigger it says are not read.
UNREAD_TRIGGER = [
    "policy_algorithm", "fallback_reason", "mesh.sub_type", "mesh.channel",
    "mesh.sema_shift_offset", "mesh.sema_mask",
    "mesh.channel_buffer_bytes", "mesh.private_channel_buffer", "rdh.channel", "rdh.core_ranks",
    "rdh.steps", "rdh.folded", "rdh.scratch_bytes", "rdh.private_scratch",
    "rdh.sema_shift_offset", "rdh.sema_mask", "hier.legs[].reason"]
#: Names the doc's list quotes as read, next to the unread ones.
SAID_READ = {"--model", "node", "routing_id", "logical_core", "tpb", "sengine", "region",
             "offset", "mesh", "blocks", "rdh", "super_blocks", "options.topology", "device",
             "die", "hier.legs[].op", "trn2", "explain"}

ELEM = {"bf16": 2, "fp16": 2}
#: An all-reduce, an all-gather and a reduce-scatter (elements per rank: the scatter's whole
#: input), or the one all-reduce an engine runs.
THREE = [("all_reduce", "bf16", 4096), ("all_gather", "fp16", 1000),
         ("reduce_scatter", "bf16", 8 * 700)]
ONE_NODE_EACH = [0, 128, 256, 384, 512, 640, 768, 896]
#: Per engine: collectives, replica group, topology, --algo (an output of each engine).
ENGINES = {
    "ring": (THREE, 8, None, "ring"),
    "kangaring": ([("all_reduce", "bf16", 8192)], 16, None, "kangaring"),
    "single_cycle_ring": ([("all_reduce", "bf16", 8192)], 8, None, "single_cycle_ring"),
    "mesh": (THREE, 8, None, "mesh"),
    "mesh_across_nodes": (THREE, ONE_NODE_EACH, "trn2:nodes=8", "mesh"),
    "single_step_mesh": ([("all_reduce", "bf16", 1000)], 8, None, "single_step_mesh"),
    "intra_rdh": (THREE, 8, None, "intra_rdh"),
    "inter_rdh": (THREE, ONE_NODE_EACH, "trn2:nodes=8", "inter_rdh"),
    "hier": ([("all_reduce", "bf16", 64), ("all_gather", "fp16", 100),
              ("reduce_scatter", "bf16", 4 * 70)], [0, 1, 32, 33], "trn1:nodes=2", "hier"),
    # KANGARING intra legs: trn2 at LNC 1 (128 ranks a node), 16 ranks on each of two nodes
    "hier_kangaring": ([("all_reduce", "bf16", 64), ("all_gather", "fp16", 100),
                        ("reduce_scatter", "bf16", 32 * 70)],
                       list(range(16)) + list(range(128, 144)), "trn2:nodes=2",
                       "hier;intra_redsct:kangaring;intra_allg:kangaring"),
}


def _spec(ops, ranks, name: str) -> dict:
    group = list(range(ranks)) if isinstance(ranks, int) else list(ranks)
    vars_, body = [], []
    for i, (op, dtype, num) in enumerate(ops):
        out_elems = {"all_gather": num * len(group), "reduce_scatter": num // len(group)}.get(
            op, num)
        coll = {"dtype": dtype, "src": f"x{i}_in", "dst": f"x{i}_out", "num_elements": num}
        if op != "all_gather":
            coll["op"] = "add"
        vars_ += [{"name": f"x{i}_in", "type": "input", "size": num * ELEM[dtype]},
                  {"name": f"x{i}_out", "type": "output", "size": out_elems * ELEM[dtype]}]
        body.append({op: coll})
    return {"header": {"pkg_version": 2, "name": name, "lnc_size": 1},
            "subgraphs": [{"name": "sg00", "vars": vars_, "replica_groups": [group],
                           "engines": {"sp": ["nop", *body]}}]}


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    root = tmp_path_factory.mktemp("unread")
    made: dict[str, Path] = {}

    def get(engine: str) -> Path:
        if engine not in made:
            ops, ranks, topology, algo = ENGINES[engine]
            neff = root / f"{engine}.neff"
            neff.write_bytes(assemble_spec(_spec(ops, ranks, engine)))
            plan, _ = load_and_plan(str(neff), topology=topology, algo=algo, host_cc=False,
                                    no_verify_hash=False)
            made[engine] = write_output(plan, root / engine, ranks=None, workers=1)
        return made[engine]
    return get


def _apply(node, path: list[str], value) -> int:
    """Delete (``value`` None) or set the key ``path`` names wherever it is ([] : every item
    of a list; a missing last key is set too, where its object is); how many places."""
    head, rest = path[0], path[1:]
    if head == "[]":
        return sum(_apply(item, rest, value) for item in node) if isinstance(node, list) else 0
    if not isinstance(node, dict):
        return 0
    if rest:
        return _apply(node[head], rest, value) if head in node else 0
    if value is None:
        return 1 if node.pop(head, _MISSING) is not _MISSING else 0
    node[head] = value
    return 1


_MISSING = object()


def _split(key: str) -> list[str]:
    return [p for p in re.split(r"\.|(\[\])", key) if p]


def _edit(out: Path, keys: list[tuple[str, ...]], value) -> int:
    """Apply ``value`` to each key path of ``out``'s manifest.json; how many places."""
    path = out / "manifest.json"
    doc = json.loads(path.read_text())
    n = sum(_apply(doc, [*prefix, *_split(key)], value) for prefix, key in keys)
    path.write_text(json.dumps(doc))
    return n


def _clean(out: Path) -> tuple[bool, str]:
    """Whether ``out`` simulates as a match (the checksums left aside: the top manifest has
    none of its own), and the error if not."""
    try:
        res = simulate_output(out)
    except NrtRewriteError as exc:
        return False, str(exc)
    return res.ok, res.error or ""


UNREAD = [((), k) for k in UNREAD_TOP] + [(("triggers", "[]"), k) for k in UNREAD_TRIGGER]


def test_the_docs_list_of_unread_keys_is_this_one():
    """SIMULATOR.md §1 names exactly these keys as not read (and a few read ones next to
    them: a rank's place, a buffer's region and offset, the mesh blocks)."""
    text = (ROOT / "docs" / "SIMULATOR.md").read_text()
    start = text.index("Keys the simulator does not read at all")
    segment = text[start:text.index("A rank manifest has none", start)]
    quoted = set(re.findall(r"`([^`]+)`", segment))
    assert quoted - SAID_READ == set(UNREAD_TOP) | set(UNREAD_TRIGGER)


@pytest.mark.parametrize("value", [None, "zz", 12345], ids=["deleted", "a-string", "a-number"])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_the_keys_it_does_not_read_change_nothing(lowered, tmp_path, engine, value):
    """Every listed key deleted, or set to a string or a number (where it is missing too:
    a key the simulator does not read may hold anything), and the output is still a
    match."""
    out = tmp_path / engine
    shutil.copytree(lowered(engine), out)
    assert _clean(out) == (True, "")
    touched = _edit(out, UNREAD, value)
    assert touched >= len(UNREAD_TOP)
    assert _clean(out) == (True, "")


#: Keys next to the unread ones that are read: deleted, each is refused.  (engine, key path)
READ_NEIGHBOURS = [
    ("ring", "topology.ranks[].node"), ("ring", "topology.ranks[].routing_id"),
    ("ring", "topology.ranks[].logical_core"), ("ring", "topology.ranks[].rank"),
    ("ring", "topology.ranks[].tpb"), ("ring", "topology.ranks[].sengine"),
    # (read since 2026-12-05 evening: the platform's preset, each rank's device and die)
    ("ring", "options"), ("ring", "options.topology"), ("hier", "options.topology"),
    ("ring", "topology.ranks[].device"), ("ring", "topology.ranks[].die"),
    ("hier", "topology.ranks[].device"), ("hier_kangaring", "topology.ranks[].die"),
    ("hier", "triggers[].hier.legs[].op"),
    ("kangaring", "topology.ranks[].sengine"), ("hier_kangaring", "topology.ranks[].sengine"),
    ("ring", "topology.platform"), ("ring", "topology.nodes"),
    ("ring", "triggers[].leader"), ("ring", "triggers[].channels"),
    ("single_cycle_ring", "triggers[].buffers[].region"),
    ("single_cycle_ring", "triggers[].buffers[].offset"),
    ("single_cycle_ring", "triggers[].buffers[].role"), ("single_cycle_ring", "triggers[].buffers"),
    ("mesh", "triggers[].mesh"), ("single_step_mesh", "triggers[].mesh"),
    ("intra_rdh", "triggers[].rdh"), ("inter_rdh", "triggers[].rdh"),
    ("mesh", "triggers[].mesh.blocks"), ("intra_rdh", "triggers[].rdh.super_blocks"),
    ("kangaring", "triggers[].kangaring"),
    ("hier_kangaring", "triggers[].hier.legs[].plans[].kangaring"),
    ("single_cycle_ring", "triggers[].single_cycle"),
    ("hier", "triggers[].hier.legs[].plans[].single_cycle"),
    ("hier", "triggers[].hier.legs[].name"), ("hier", "triggers[].hier.legs[].algorithm"),
    ("hier", "triggers[].hier.legs[].buffers[].region"),
    ("hier", "triggers[].hier.legs[].buffers[].role"),
    ("hier", "triggers[].hier.legs[].plans[].chunk"),
    ("hier", "triggers[].hier.legs[].groups"), ("hier", "triggers[].hier.slices"),
    # (read since 2026-12-05: each leg's channel-id range, held to its plans' ids)
    ("hier", "triggers[].hier.legs[].channel_base"),
    ("hier", "triggers[].hier.legs[].channel_ids"),
    ("hier_kangaring", "triggers[].hier.legs[].channel_ids"),
    # (read since 2026-12-05 late evening: the override's engines, the host-CC final step, a
    # preset's name, a trigger's own legs)
    ("ring", "options.algo"), ("ring", "options.host_cc"), ("ring", "topology.name"),
    ("hier", "topology.name"), ("ring", "triggers[].legs"), ("hier", "triggers[].legs"),
    ("mesh", "triggers[].legs[].sub_type"), ("hier", "triggers[].legs[].algorithm"),
]


@pytest.mark.parametrize("engine, key", READ_NEIGHBOURS)
def test_the_keys_next_to_them_are_read(lowered, tmp_path, engine, key):
    out = tmp_path / engine
    shutil.copytree(lowered(engine), out)
    assert _edit(out, [((), key)], None) >= 1
    ok, why = _clean(out)
    assert not ok and why, key
