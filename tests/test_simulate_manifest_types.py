"""``simulate OUT`` of an output whose manifests are well-formed JSON but hold a value of the
wrong type, or lack a key the format requires (docs/FORMATS.md §1.1, §1.2): the output
cannot be read as one, so the simulation cannot be done: status 2 and one line,
``FILE: field PATH: WHY`` (docs/SIMULATOR.md §1), never an internal error (status 70).
Also ``topology.ranks[].node``, which must be one of the topology's ``nodes``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from nrtrewrite.golden import lower_to

from test_simulate import cli, lower_neff, lower_spec, two_node_spec

FIX = Path(__file__).resolve().parents[1] / "fixtures"
I64 = "0..9223372036854775807"


@pytest.fixture(scope="module")
def ar2(tmp_path_factory) -> Path:
    """fixtures/ar2.neff: one all-reduce over ranks 0 and 1 of one node (INTRA_RDH)."""
    return lower_to(FIX / "ar2.neff", tmp_path_factory.mktemp("ar2") / "out", None)


@pytest.fixture(scope="module")
def hier(tmp_path_factory) -> Path:
    """A HIER all-reduce over ranks 0, 1 (node 0) and 64, 65 (node 1); rank 0's entries are
    its legs, and its inter-node leg has a fifo slice."""
    return lower_spec(two_node_spec(), tmp_path_factory.mktemp("hier") / "out", algo="hier")


@pytest.fixture(scope="module")
def ring(tmp_path_factory) -> Path:
    """The same all-reduce over ranks 0, 1, 64, 65 lowered as one RING: its trigger's
    ``channels`` are one ring, channel 0 (FORMATS §1.1)."""
    return lower_spec(two_node_spec(), tmp_path_factory.mktemp("ring") / "out", algo="ring")


@pytest.fixture(scope="module")
def mesh(tmp_path_factory) -> Path:
    """fixtures/ar2.neff lowered with the mesh forced: its trigger has a ``mesh`` section."""
    return lower_neff(FIX / "ar2.neff", tmp_path_factory.mktemp("mesh") / "out", algo="mesh")


#: A value for :func:`_set` that removes the key instead.
ABSENT = object()


def _set(doc, path: list, value) -> None:
    for key in path[:-1]:
        doc = doc[key]
    if value is ABSENT:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


def _edit(src: Path, dst: Path, rank: int | None, path: list, value, *, rehash=False) -> Path:
    """A copy of output ``src`` whose manifest (the top one, or rank ``rank``'s) has
    ``value`` at key ``path``; ``rehash``: the top manifest records the rank manifest's new
    sha256, so that the checksums still hold."""
    shutil.copytree(src, dst)
    rel = "manifest.json" if rank is None else f"rank-{rank:04d}/manifest.json"
    doc = json.loads((dst / rel).read_text())
    _set(doc, path, value)
    (dst / rel).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    if rehash:
        top = json.loads((dst / "manifest.json").read_text())
        top["rank_manifests"][f"rank-{rank:04d}"] = hashlib.sha256(
            (dst / rel).read_bytes()).hexdigest()
        (dst / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    return dst / rel


def _one_line_status_2(out: Path, *flags) -> str:
    res = cli("simulate", out, *flags)
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nrtrewrite: error: "), res.stderr
    res_json = cli("simulate", out, "--json", *flags)
    assert res_json.exit_code == 2
    doc = json.loads(res_json.stdout)
    assert doc["ok"] is None and doc["error"] == lines[0][len("nrtrewrite: error: "):]
    return doc["error"]


# (output, rank manifest or None for the top one, key path, value, field, why, checksums
# kept: the top manifest has no checksum of its own, a rank manifest's is in the top one)
CASES = [
    # the reproducers: each was an internal error (status 70)
    ("ar2", None, ["ranks", 0], "x", "ranks[0]", 'must be an integer, not "x"', True),
    ("ar2", None, ["triggers"], 5, "triggers", "must be a list, not 5", True),
    ("ar2", None, ["triggers", 0, "hier"], [1], "triggers[0].hier",
     "must be an object, not a list (1 item)", True),
    ("ar2", None, ["triggers", 0, "mesh"], [1], "triggers[0].mesh",
     "must be an object, not a list (1 item)", True),
    ("ar2", None, ["memory", "sbuf_partition_stride"], "x", "memory.sbuf_partition_stride",
     'must be an integer, not "x"', True),
    ("ar2", None, ["topology", "lnc_size"], [1], "topology.lnc_size",
     "must be an integer, not a list (1 item)", True),
    ("ar2", None, ["world"], ["a"], "world[0]", 'must be an integer, not "a"', True),
    ("ar2", None, ["memory", "regions", 0, "subgraph"], ["sg00"], "memory.regions[0].subgraph",
     "must be a string, not a list (1 item)", True),
    ("hier", 0, ["entries", 0, "leg"], [], "entries[0].leg",
     "must be a string, not a list (0 items)", False),
    ("ar2", 0, ["entries", 0, "channels"], 5, "entries[0].channels", "must be a list, not 5",
     False),
    # siblings: values read from the same manifests
    ("ar2", None, ["triggers", 0, "trigger"], -1, "triggers[0].trigger",
     "-1 is outside 0..4294967295", True),
    ("ar2", None, ["triggers", 0, "index"], -1, "triggers[0].index", f"-1 is outside {I64}",
     True),
    ("ar2", None, ["triggers", 0, "dst", "offset"], None, "triggers[0].dst.offset",
     "must be an integer, not null", True),
    ("ar2", None, ["triggers", 0, "src"], {"offset": 0}, "triggers[0].src.var_id", "missing",
     True),
    ("ar2", None, ["triggers", 0, "src", "ap"], {"start": 0, "partition_start": 0,
                                                 "partition_count": 1, "dims": [[1, 1]]},
     "triggers[0].src.ap.dims", "must be 3 [step, num] pairs, not a list (1 item)", True),
    ("ar2", None, ["triggers", 0, "chunk"], {"pgta": 1}, "triggers[0].chunk.chunk_size_n",
     "missing", True),
    ("ar2", None, ["triggers", 0, "buffers"], [{"region": "scratch", "offset": "0"}],
     "triggers[0].buffers[0].offset", 'must be an integer, not "0"', True),
    ("ar2", None, ["triggers", 0, "rdh", "super_blocks", 0], 7,
     "triggers[0].rdh.super_blocks[0]", "must be a list, not 7", True),
    ("ar2", None, ["memory", "regions", 0, "offset"], 1.5, "memory.regions[0].offset",
     "must be an integer, not 1.5", True),
    ("ar2", None, ["topology", "ranks", 1, "node"], "0", "topology.ranks[1].node",
     'must be an integer, not "0"', True),
    ("ar2", None, ["topology", "nodes"], None, "topology.nodes", "must be an integer, not null",
     True),
    ("hier", None, ["triggers", 0, "hier", "legs", 0, "groups", 0, "group", 1], "a",
     "triggers[0].hier.legs[0].groups[0].group[1]", 'must be an integer, not "a"', True),
    ("hier", 0, ["fifo", 0, "ops"], [0], "fifo[0].ops",
     "must be a list of 2 integers, not a list (1 item)", False),
    ("ar2", 1, ["rank"], True, "rank", "must be an integer, not true", False),
    ("ar2", 0, ["files", "cce.bin"], 5, 'files["cce.bin"]', "must be an object, not 5", "rehash"),
    # the keys that were read as JSON values (2026-12-04 tester): a wrong type or an absent
    # key was a protocol error (status 1) found where the run used it, or none at all
    ("ar2", None, ["memory"], 5, "memory", "must be an object, not 5", True),
    ("ar2", None, ["memory"], ABSENT, "memory", "missing", True),
    ("ar2", None, ["memory", "regions"], ABSENT, "memory.regions", "missing", True),
    ("ar2", None, ["topology"], [], "topology", "must be an object, not a list (0 items)", True),
    ("ar2", None, ["topology"], ABSENT, "topology", "missing", True),
    ("ar2", None, ["topology", "ranks"], {}, "topology.ranks",
     "must be a list, not an object (0 keys)", True),
    ("ar2", None, ["topology", "ranks"], ABSENT, "topology.ranks", "missing", True),
    ("ar2", None, ["triggers"], ABSENT, "triggers", "missing", True),
    ("ar2", None, ["triggers", 0, "alu_op"], ABSENT, "triggers[0].alu_op", "missing", True),
    ("ar2", 0, ["entries"], 5, "entries", "must be a list, not 5", False),
    ("ar2", 0, ["entries"], ABSENT, "entries", "missing", False),
    ("hier", 0, ["fifo"], {"channel": 0}, "fifo", "must be a list, not an object (1 key)",
     False),
    ("ar2", 0, ["entries", 0, "algo_sub_type"], "2", "entries[0].algo_sub_type",
     'must be an integer, not "2"', False),
    ("ar2", 0, ["entries", 0, "channel_list"], [0], "entries[0].channel_list",
     "must be an integer, not a list (1 item)", False),
    ("ar2", 0, ["entries", 0, "sema_shift_offset"], "192", "entries[0].sema_shift_offset",
     'must be an integer, not "192"', False),
    ("ar2", 0, ["entries", 0, "subgraph"], None, "entries[0].subgraph",
     "must be a string, not null", False),
    # ... and silently accepted (status 0): an absent key the format requires, a float for
    # an integer (1.0 == 1 in Python), an integer for a flag (JSON true equalled 1)
    ("ar2", None, ["world"], ABSENT, "world", "missing", True),
    ("ar2", None, ["memory", "core_window"], float(1 << 36), "memory.core_window",
     "must be an integer, not 68719476736.0", True),
    ("ar2", 0, ["fifo"], ABSENT, "fifo", "missing", False),
    ("ar2", 0, ["entries", 0, "sema_mask"], ABSENT, "entries[0].sema_mask", "missing", False),
    ("ar2", 0, ["entries", 0, "algo_sub_type"], 2.0, "entries[0].algo_sub_type",
     "must be an integer, not 2.0", False),
    # FORMATS §1.2: the flags are JSON booleans; ar2's rank 0 leads its one-entry all-reduce
    # on one node: reporter and ring_wait_complete set, trigger_next and (no network FIFO
    # entries) ring_send_complete clear (FORMATS §2), so 1 and 0 are what spad.bin holds
    ("ar2", 0, ["entries", 0, "reporter"], 1, "entries[0].reporter",
     "must be true or false, not 1", False),
    ("ar2", 0, ["entries", 0, "ring_wait_complete"], 1, "entries[0].ring_wait_complete",
     "must be true or false, not 1", False),
    ("ar2", 0, ["entries", 0, "trigger_next"], 0, "entries[0].trigger_next",
     "must be true or false, not 0", False),
    ("ar2", 0, ["entries", 0, "ring_send_complete"], 0, "entries[0].ring_send_complete",
     "must be true or false, not 0", False),
    # ... and JSON true for algo_type was compared with spad.bin's 5 (status 1)
    ("ar2", 0, ["entries", 0, "algo_type"], True, "entries[0].algo_type",
     "must be an integer, not true", False),
    # FORMATS §1.2's files: every artifact's row, with records, bytes and sha256; with
    # --ignore-checksums only a row's records were read, where it was listed (a tester)
    # (an artifact's name holds a dot: its key is quoted, files["cce.bin"], as jsonin.joined_key
    # and diff write it; files.cce.bin read as key bin of cce)
    # (and the same line without the option, its rank manifest's sha256 recorded anew:
    # until 2026-12-06 the checksum pass said `rank-0000/manifest.json has no 'files'`,
    # `... does not list spad.bin`, and for a bytes or sha256 of another type `sha256 does
    # not match ... (--ignore-checksums to simulate anyway)`; review 48e's follow-up)
    ("ar2", 0, ["files", "spad.bin"], ABSENT, 'files["spad.bin"]', "missing", "rehash"),
    ("ar2", 0, ["files"], ABSENT, "files", "missing", "rehash"),
    ("ar2", 0, ["files"], [], "files", "must be an object, not a list (0 items)", "rehash"),
    ("ar2", 0, ["files", "cce.bin", "bytes"], "x", 'files["cce.bin"].bytes',
     'must be an integer, not "x"', "rehash"),
    ("ar2", 0, ["files", "cce.bin", "sha256"], 5, 'files["cce.bin"].sha256',
     "must be a string, not 5", "rehash"),
    ("ar2", 0, ["files", "cce.bin", "records"], -1, 'files["cce.bin"].records',
     "-1 is outside 0..9223372036854775807", "rehash"),
    # FORMATS §1.1, §1.2 list these keys and `lower` writes every one; until 2026-12-05 the
    # simulator took a default when one was absent (0, 1, null, "flat", no legs, no blocks)
    ("ar2", None, ["memory", "sbuf_partition_stride"], ABSENT, "memory.sbuf_partition_stride",
     "missing", True),
    ("ar2", None, ["memory", "regions", 0, "partitions"], ABSENT,
     "memory.regions[0].partitions", "missing", True),
    ("ar2", None, ["memory", "regions", 0, "subgraph"], ABSENT, "memory.regions[0].subgraph",
     "missing", True),
    ("ar2", None, ["memory", "regions", 0, "var_id"], ABSENT, "memory.regions[0].var_id",
     "missing", True),
    ("ar2", None, ["topology", "lnc_size"], ABSENT, "topology.lnc_size", "missing", True),
    ("ar2", None, ["triggers", 0, "src", "offset"], ABSENT, "triggers[0].src.offset",
     "missing", True),
    ("ar2", None, ["triggers", 0, "rdh", "super_blocks"], ABSENT,
     "triggers[0].rdh.super_blocks", "missing", True),
    ("mesh", None, ["triggers", 0, "mesh", "blocks"], ABSENT, "triggers[0].mesh.blocks",
     "missing", True),
    ("hier", None, ["triggers", 0, "hier", "legs"], ABSENT, "triggers[0].hier.legs",
     "missing", True),
    ("hier", None, ["triggers", 0, "hier", "slices"], ABSENT, "triggers[0].hier.slices",
     "missing", True),
    ("hier", None, ["triggers", 0, "hier", "slices", 0], [0], "triggers[0].hier.slices[0]",
     "must be a list of 2 integers, not a list (1 item)", True),
    ("hier", None, ["triggers", 0, "hier", "legs", 0, "buffers"], ABSENT,
     "triggers[0].hier.legs[0].buffers", "missing", True),
    # a HIER leg's buffer role is read (FORMATS §1.1: a string), also on a buffer not gw
    # (mutation audit round 8: buffers[1] is intra_redsct's "out")
    ("hier", None, ["triggers", 0, "hier", "legs", 0, "buffers", 1, "role"], 5,
     "triggers[0].hier.legs[0].buffers[1].role", "must be a string, not 5", True),
    ("hier", 0, ["entries", 0, "leg"], ABSENT, "entries[0].leg", "missing", False),
    ("ar2", 0, ["entries", 0, "subgraph"], ABSENT, "entries[0].subgraph", "missing", False),
    # the platform keys (FORMATS §1.1 topology): optional together (a manifest written before
    # them has none), typed when present; until 2026-12-05 read as Python values, a protocol
    # error (status 1) in Python's words: `topology.hw_generation is '3'`, `... is True`,
    # `topology.platform is None` for the one key deleted, and 2048.0 == 2048 passed the cap
    ("ar2", None, ["topology", "hw_generation"], "3", "topology.hw_generation",
     'must be an integer, not "3"', True),
    ("ar2", None, ["topology", "hw_generation"], True, "topology.hw_generation",
     "must be an integer, not true", True),
    ("ar2", None, ["topology", "cce_max_elements"], 2048.0, "topology.cce_max_elements",
     "must be an integer, not 2048.0", True),
    ("ar2", None, ["topology", "platform"], 5, "topology.platform", "must be a string, not 5",
     True),
    ("ar2", None, ["topology", "platform"], None, "topology.platform",
     "must be a string, not null", True),
    ("ar2", None, ["topology", "platform"], ABSENT, "topology.platform", "missing", True),
    ("ar2", None, ["topology", "cce_max_elements"], ABSENT, "topology.cce_max_elements",
     "missing", True),
    # topology.mesh_sub_type: optional (new on 2026-12-04), a name or null (no mesh)
    ("ar2", None, ["topology", "mesh_sub_type"], 5, "topology.mesh_sub_type",
     "must be a string, not 5", True),
    # SIMULATOR §1: an integer is also held to its range, a rank 0 or more, a channel 0..31
    # (nec.h NEC_MAX_CHANNELS); until 2026-12-05 only an entry's channels were: a trigger's
    # channel 32 or -5 was blamed on legs.bin (`the ring successor of channel 0 is -1`), 2^62
    # on a trigger whose legs do not read it simulated as a match, a replica_group's rank -1
    # was `rank -1 is missing: lower without --rank`, a fifo slice's channel -1 `fifo slices
    # are not in ascending channel order`
    ("ring", None, ["triggers", 0, "channels", 0, "channel"], 32,
     "triggers[0].channels[0].channel", "32 is outside 0..31", True),
    ("ring", None, ["triggers", 0, "channels", 0, "channel"], -5,
     "triggers[0].channels[0].channel", "-5 is outside 0..31", True),
    ("ar2", None, ["triggers", 0, "channels", 0, "channel"], 2 ** 62,
     "triggers[0].channels[0].channel", "4611686018427387904 is outside 0..31", True),
    ("hier", None, ["triggers", 0, "hier", "legs", 1, "plans", 0, "channels", 0, "channel"], 32,
     "triggers[0].hier.legs[1].plans[0].channels[0].channel", "32 is outside 0..31", True),
    ("hier", 0, ["fifo", 0, "channel"], -1, "fifo[0].channel", "-1 is outside 0..31", False),
    # (mutation audit round 8: each end of the range, for the rank manifest's channels too)
    ("hier", 0, ["fifo", 0, "channel"], 32, "fifo[0].channel", "32 is outside 0..31", False),
    ("ar2", 0, ["entries", 0, "channels"], [32], "entries[0].channels[0]",
     "32 is outside 0..31", False),
    ("ar2", 0, ["entries", 0, "channels"], [-1], "entries[0].channels[0]",
     "-1 is outside 0..31", False),
    ("ar2", None, ["triggers", 0, "replica_group"], [0, -1], "triggers[0].replica_group[1]",
     f"-1 is outside {I64}", True),
    ("ar2", None, ["triggers", 0, "leader"], -1, "triggers[0].leader", f"-1 is outside {I64}",
     True),
    ("ring", None, ["triggers", 0, "channels", 0, "order", 0], -1,
     "triggers[0].channels[0].order[0]", f"-1 is outside {I64}", True),
    ("hier", None, ["triggers", 0, "hier", "legs", 0, "groups", 0, "group", 0], -1,
     "triggers[0].hier.legs[0].groups[0].group[0]", f"-1 is outside {I64}", True),
    ("ar2", None, ["world", 1], -1, "world[1]", f"-1 is outside {I64}", True),
    ("ar2", None, ["topology", "ranks", 1, "rank"], -1, "topology.ranks[1].rank",
     f"-1 is outside {I64}", True),
    ("ar2", 1, ["rank"], -1, "rank", f"-1 is outside {I64}", False),
    # the keys of the checksums (review 48e): without --ignore-checksums a wrong type or an
    # absent key was `OUT: manifest.json has no ranks / rank_manifests` (or `no output_neff
    # name/sha256`), no key path; with it rank_manifests of any type, or none, was a match
    ("ar2", None, ["ranks"], 5, "ranks", "must be a list, not 5", True),
    ("ar2", None, ["ranks"], ABSENT, "ranks", "missing", True),
    ("ar2", None, ["rank_manifests"], 5, "rank_manifests", "must be an object, not 5", True),
    ("ar2", None, ["rank_manifests"], ["rank-0000"], "rank_manifests",
     "must be an object, not a list (1 item)", True),
    ("ar2", None, ["rank_manifests"], ABSENT, "rank_manifests", "missing", True),
    ("ar2", None, ["rank_manifests", "rank-0001"], 5, "rank_manifests.rank-0001",
     "must be a string, not 5", True),
    ("ar2", None, ["output_neff"], 5, "output_neff", "must be an object, not 5", True),
    ("ar2", None, ["output_neff"], ABSENT, "output_neff", "missing", True),
    ("ar2", None, ["output_neff", "name"], 5, "output_neff.name", "must be a string, not 5",
     True),
    ("ar2", None, ["output_neff", "sha256"], ABSENT, "output_neff.sha256", "missing", True),
    ("ar2", None, ["output_neff", "sha256"], None, "output_neff.sha256",
     "must be a string, not null", True),
]


def _case_id(case) -> str:
    value = case[3]
    return f"{case[4]}={'absent' if value is ABSENT else json.dumps(value)}"


@pytest.mark.parametrize("which, rank, path, value, field, why, checksums", CASES,
                         ids=[_case_id(c) for c in CASES])
def test_a_manifest_value_of_the_wrong_type_is_status_2_naming_the_field(
        request, tmp_path, which, rank, path, value, field, why, checksums):
    src = request.getfixturevalue(which)
    man = _edit(src, tmp_path / "o", rank, path, value, rehash=checksums == "rehash")
    want = f"{man}: field {field}: {why}"
    assert _one_line_status_2(tmp_path / "o", "--ignore-checksums") == want
    if checksums:
        assert _one_line_status_2(tmp_path / "o") == want


# Two keys of the top manifest faulty at once, at least one a key of the checksums: docs/
# SIMULATOR.md §1 reads those first and in one order, ranks, output_neff, rank_manifests,
# with and without --ignore-checksums, so the first of them is named either way.  Until
# 2026-12-06 the checksum pass read output_neff, rank_manifests, then ranks, and the
# simulation the memory map, topology, world and triggers, then ranks, output_neff,
# rank_manifests: ranks and rank_manifests both faulty named rank_manifests without the
# option, ranks with it.  (key paths and values, the field named, its why)
TWO_FAULTS = [
    ([(["ranks"], 5), (["rank_manifests"], 5)], "ranks", "must be a list, not 5"),
    ([(["ranks"], ABSENT), (["rank_manifests"], ABSENT)], "ranks", "missing"),
    ([(["ranks"], ABSENT), (["output_neff"], ABSENT)], "ranks", "missing"),
    ([(["output_neff", "sha256"], None), (["rank_manifests"], [])], "output_neff.sha256",
     "must be a string, not null"),
    ([(["memory"], 5), (["ranks", 0], "x")], "ranks[0]", 'must be an integer, not "x"'),
    ([(["triggers"], 5), (["rank_manifests"], ABSENT)], "rank_manifests", "missing"),
]


@pytest.mark.parametrize("edits, field, why", TWO_FAULTS,
                         ids=["+".join(".".join(map(str, p)) for p, _ in c[0])
                              for c in TWO_FAULTS])
def test_two_faulty_top_manifest_keys_name_the_same_one_with_and_without_the_option(
        ar2, tmp_path, edits, field, why):
    out = tmp_path / "o"
    _copy_with(ar2, out, [(None, path, value) for path, value in edits])
    want = f"{out / 'manifest.json'}: field {field}: {why}"
    assert _one_line_status_2(out) == want
    assert _one_line_status_2(out, "--ignore-checksums") == want


# A rank folder (or its manifest) gone and a faulty key of the top manifest that is not a
# checksum's: SIMULATOR.md §1 types every value of the top manifest before any rank manifest
# is read, with and without --ignore-checksums, so the key is named either way.  Until
# 2026-12-06 the checksum pass looked for the rank folders first and named the folder, the
# option the key (fixer 49m).  (key path, value, what is removed, the line after the file)
FAULT_AND_GONE = [
    (["memory"], 5, "rank-0001", "field memory: must be an object, not 5"),
    (["memory"], 5, "rank-0000/manifest.json", "field memory: must be an object, not 5"),
    (["triggers", 0, "mesh"], [1], "rank-0001",
     "field triggers[0].mesh: must be an object, not a list (1 item)"),
    (["world"], ["a"], "rank-0000", 'field world[0]: must be an integer, not "a"'),
]


@pytest.mark.parametrize("path, value, gone, error", FAULT_AND_GONE,
                         ids=[f"{'.'.join(map(str, c[0]))}+{c[2]}" for c in FAULT_AND_GONE])
def test_a_faulty_top_key_is_named_before_a_rank_folder_gone_with_and_without_the_option(
        ar2, tmp_path, path, value, gone, error):
    out = tmp_path / "o"
    _copy_with(ar2, out, [(None, path, value)])
    victim = out / gone
    if victim.is_dir():
        shutil.rmtree(victim)
    else:
        victim.unlink()
    want = f"{out / 'manifest.json'}: {error}"
    assert _one_line_status_2(out) == want
    assert _one_line_status_2(out, "--ignore-checksums") == want


def test_a_partial_output_with_a_rank_folder_gone_is_named_alike_either_way(ar2, tmp_path):
    """ar2 (one all-reduce over ranks 0 and 1) cut to rank 0 as ``lower --rank 0`` writes it
    (``ranks`` [0], ``rank_manifests`` rank 0's alone, no rank-0001), and rank-0000 gone as
    well: the replica group's rank 1 is not in ``ranks``, which SIMULATOR.md §1 checks from
    the top manifest, before any rank folder; the checksum pass named rank-0000."""
    out = tmp_path / "o"
    shutil.copytree(ar2, out)
    top = json.loads((out / "manifest.json").read_text())
    top["ranks"] = [0]
    del top["rank_manifests"]["rank-0001"]
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(out / "rank-0001")
    shutil.rmtree(out / "rank-0000")
    want = (f"{out / 'manifest.json'}: the output holds 1 rank folder(s); simulating needs "
            "every rank of every replica group (rank 1 is missing: lower without --rank)")
    assert _one_line_status_2(out) == want
    assert _one_line_status_2(out, "--ignore-checksums") == want


# A value of the right type that disagrees is still a protocol error (status 1), named as
# before: (rank manifest or None, key path, value, the error after the file's name); the
# values as JSON writes them (true, "sg00"; until 2026-12-06 Python's, True, 'sg00': review
# 48e)
WELL_TYPED = [
    (None, ["memory", "core_window"], 1 << 35,
     "field memory: memory.core_window is 34359738368; FORMATS §10 fixes it at 0x1000000000"),
    (0, ["entries", 0, "reporter"], False,
     "field reporter, rank 0, artifact spad.bin, record 0: the rank manifest's reporter should be "
     "true, what spad.bin says, not false"),
    (1, ["entries", 0, "reporter"], True,
     "field reporter, rank 1, artifact spad.bin, record 0: the rank manifest's reporter should be "
     "false, what spad.bin says, not true"),
    (0, ["entries", 0, "sema_mask"], 31,
     "field sema_mask, rank 0, artifact spad.bin, record 0: the rank manifest's sema_mask "
     "should be 63, what spad.bin says, not 31"),
    (0, ["entries", 0, "channel_list"], 3,
     "field channel_list, rank 0, artifact spad.bin, record 0: the rank manifest's "
     "channel_list should be 1, what spad.bin says, not 3"),
    # (spad.bin holds no subgraph: the entry's is its trigger's, ar2's one subgraph sg00)
    (0, ["entries", 0, "subgraph"], "zz",
     "field subgraph, rank 0, artifact spad.bin, record 0: the rank manifest's subgraph "
     'should be "sg00", its trigger\'s in OUT/manifest.json, not "zz"'),
]


@pytest.mark.parametrize("rank, path, value, error", WELL_TYPED,
                         ids=[".".join(map(str, c[1])) for c in WELL_TYPED])
def test_a_well_typed_value_that_disagrees_is_a_protocol_error(ar2, tmp_path, rank, path,
                                                               value, error):
    """FORMATS §10 fixes ``core_window`` at 2^36; ar2's rank 0 leads its mesh-family entry
    (FORMATS §1.2: ``reporter`` true, the overlay ``sema_shift_offset`` 192 / ``sema_mask``
    63, ``channel_list`` the mask of channel 0, 1)."""
    _edit(ar2, tmp_path / "o", rank, path, value)
    res = cli("simulate", tmp_path / "o", "--json", "--ignore-checksums")
    assert res.exit_code == 1, res.output
    where = (tmp_path / "o" / "manifest.json" if rank is None
             else tmp_path / "o" / f"rank-{rank:04d}")
    assert json.loads(res.stdout)["error"] == f"{where}: {error}"


@pytest.mark.parametrize("channel", [1, 31])
def test_a_ring_triggers_channel_its_entries_do_not_run_is_refused_before_the_legs(
        ring, tmp_path, channel):
    """FORMATS §1.1, §2: every rank is on each ring of a RING trigger, so its entry runs the
    trigger's channels (channel_list: channel 0 here, bit 0); a trigger whose one ring is
    channel 1 (or 31, in range) was blamed on legs.bin, the retired `send signals rank 1,
    the ring successor of channel 0 is -1`; now rank 0's spad.bin entry 0 is refused with
    both channel lists and the manifest's key."""
    top = json.loads((ring / "manifest.json").read_text())
    assert [c["channel"] for c in top["triggers"][0]["channels"]] == [0]
    _edit(ring, tmp_path / "o", None, ["triggers", 0, "channels", 0, "channel"], channel)
    res = cli("simulate", tmp_path / "o", "--json")
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["error"] == (
        f"{tmp_path / 'o' / 'rank-0000'}: field channel_list, rank 0, artifact spad.bin, record "
        f"0: channel_list runs channels [0], trigger 0's channels are [{channel}] "
        "(manifest.json triggers[0].channels: a RING entry runs each channel of its trigger, "
        "FORMATS §1.1, §2)")


@pytest.mark.parametrize("node", [-1, 1, 10**9])
def test_a_rank_on_a_node_outside_the_topology_is_refused(ar2, tmp_path, node):
    """FORMATS §1.1: ar2's topology has ``nodes`` 1, so node 0 is the only node; rank 1 on
    node -1 (which indexed the last node's row of the address table), 1, or 10^9 (a table
    sized by it: out of memory, status 71) is a protocol error naming the field."""
    _edit(ar2, tmp_path / "o", None, ["topology", "ranks", 1, "node"], node)
    res = cli("simulate", tmp_path / "o", "--json")
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["error"] == (
        f"{tmp_path / 'o' / 'manifest.json'}: field topology.ranks[1].node: rank 1: node {node} "
        "is outside 0..0 (topology.nodes is 1)")


@pytest.mark.parametrize("key, value, field", [
    ("routing_id", 64, "routing_id"), ("routing_id", -1, "routing_id"),
    ("logical_core", 2048, "logical_core"), ("logical_core", -1, "logical_core")])
def test_a_rank_whose_routing_id_or_core_no_address_can_hold_is_refused(ar2, tmp_path, key,
                                                                        value, field):
    """FORMATS §10: a SoC address holds the routing id in CAYMAN_ID [53:48] (0..63) and the
    logical core ``lc`` in its window ``lc << 36`` inside LOCAL [46:0] (0..2047); rank 1 with
    a value outside is a protocol error naming its row's key and the range, as the row's
    ``node`` is (it said ``field topology`` and "routing id / core out of range")."""
    _edit(ar2, tmp_path / "o", None, ["topology", "ranks", 1, key], value)
    res = cli("simulate", tmp_path / "o", "--json")
    assert res.exit_code == 1, res.output
    bound = 63 if key == "routing_id" else 2047
    assert json.loads(res.stdout)["error"] == (
        f"{tmp_path / 'o' / 'manifest.json'}: field topology.ranks[1].{field}: rank 1: "
        f"{key} {value} is outside 0..{bound}")


def test_a_rank_of_the_world_without_a_topology_row_is_refused(ar2, tmp_path):
    """FORMATS §1.1: every rank of ``world`` has a row in ``topology.ranks`` (its node,
    device and core: its addresses); ar2's world is ranks 0 and 1, and without rank 1's row
    the output is a protocol error naming the table."""
    o = tmp_path / "o"
    shutil.copytree(ar2, o)
    top = json.loads((o / "manifest.json").read_text())
    assert top["world"] == [0, 1]
    top["topology"]["ranks"] = [p for p in top["topology"]["ranks"] if p["rank"] != 1]
    (o / "manifest.json").write_text(json.dumps(top))
    res = cli("simulate", o, "--json")
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["error"] == (
        f"{o / 'manifest.json'}: field topology: rank 1 of the world is not in the topology "
        "table")


@pytest.fixture(scope="module")
def sbuf(tmp_path_factory) -> Path:
    """fixtures/sbuf.neff: four SBUF vars of 128 partitions (sb_a .. sb_d)."""
    return lower_neff(FIX / "sbuf.neff", tmp_path_factory.mktemp("sbuf") / "out")


def _region(top: dict, name: str) -> dict:
    return next(r for r in top["memory"]["regions"] if r["name"] == name)


def _dram_into_sbuf(top: dict) -> None:
    """The DRAM region of the highest offset grown to end one byte past the DRAM part of a
    core's window, 0x8_0000_0000 - 0x1_0000_0000 bytes (FORMATS §10)."""
    last = max((r for r in top["memory"]["regions"] if r["kind"] != "sbuf" and r["size"]),
               key=lambda r: r["offset"])
    last["size"] = 0x8_0000_0000 - 0x1_0000_0000 - last["offset"] + 1


@pytest.mark.parametrize("model, spoil, says", [
    ("ar2", lambda top: top["memory"]["regions"][0].update(partitions=2),
     "memory region \"{first}\": only sbuf regions have partitions"),
    ("sbuf", lambda top: _region(top, "sb_b").update(partitions=0),
     "memory region \"sb_b\": 0 partitions"),
    ("sbuf", lambda top: _region(top, "sb_b").update(partitions=129),
     "memory region \"sb_b\": 129 partitions"),
    ("ar2", _dram_into_sbuf, "the DRAM regions run into the SBUF window"),
    # 128 partitions of 2^31 bytes from 0x8_0000_0000: past the 2^36 window
    ("sbuf", lambda top: top["memory"].update(sbuf_partition_stride=1 << 31),
     "the SBUF partitions run past the core window"),
], ids=["dram-partitions", "sbuf-0-partitions", "sbuf-129-partitions", "dram-into-sbuf",
        "sbuf-past-window"])
def test_a_memory_map_no_core_window_holds_is_refused(ar2, sbuf, tmp_path, model, spoil, says):
    """FORMATS §10 and NEFF-LIKE.md: only SBUF vars have partitions, 1..128 of them; the
    DRAM regions lie below the SBUF window and the SBUF partitions inside the core window.
    A manifest whose ``memory`` says otherwise is a protocol error naming ``memory``."""
    o = tmp_path / "o"
    shutil.copytree({"ar2": ar2, "sbuf": sbuf}[model], o)
    top = json.loads((o / "manifest.json").read_text())
    first = top["memory"]["regions"][0]["name"]
    spoil(top)
    (o / "manifest.json").write_text(json.dumps(top))
    res = cli("simulate", o, "--json")
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["error"] == (
        f"{o / 'manifest.json'}: field memory: {says.format(first=first)}")


def test_a_node_number_in_the_billions_costs_no_memory(ar2, tmp_path):
    """A topology of 10^9 nodes with rank 1 on the last: its address table has a row per
    node with ranks (2), not per node number, so what simulate reports comes quickly: since
    2026-12-05 that rank 1 of trn2 at LNC 1 (8 ranks a device, 16 devices a node:
    docs/TOPOLOGY.md §1) is on node 1 // 128 = 0 (until then the table was built the same
    way and the ranks on two nodes were reported: an intra-node mesh entry whose group spans
    2 nodes). Since 2026-12-05 late evening the preset's node count itself is held first: the
    default trn2 at LNC 1 (128 ranks a node) sized to the world [0, 1] is ceil((1 + 1) / 128)
    = 1 node (docs/TOPOLOGY.md §1 "Loading")."""
    o = tmp_path / "o"
    shutil.copytree(ar2, o)
    top = json.loads((o / "manifest.json").read_text())
    top["topology"]["nodes"] = 10**9
    top["topology"]["ranks"][1]["node"] = 10**9 - 1
    (o / "manifest.json").write_text(json.dumps(top))
    res = cli("simulate", o, "--json")  # (a table per node number: status 71, out of memory)
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["error"] == (
        f"{o / 'manifest.json'}: field topology.nodes: topology.nodes should be 1, not "
        "1000000000: the nodes of 128 ranks (trn2 at lnc_size 1) that hold the world's largest "
        "rank 1, ceil((1 + 1) / 128) (options.topology null (the default, trn2) sizes the "
        'preset to the world: docs/TOPOLOGY.md §1 "Loading")')
    # (the node count kept, rank 1 on node 999999999 is named by its row, still quickly)
    top["topology"]["nodes"] = 1
    (o / "manifest.json").write_text(json.dumps(top))
    res = cli("simulate", o, "--json")
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["error"] == (
        f"{o / 'manifest.json'}: field topology.ranks[1].node: rank 1: node 999999999 is "
        "outside 0..0 (topology.nodes is 1)")


def test_a_rank_listed_twice_in_the_topology_is_refused(ar2, tmp_path):
    """FORMATS §1.1 ``topology.ranks``: one row per rank; rank 0 listed again in row 1
    (the later row used to replace the earlier) is a protocol error naming the row."""
    o = tmp_path / "o"
    shutil.copytree(ar2, o)
    top = json.loads((o / "manifest.json").read_text())
    top["topology"]["ranks"].append(dict(top["topology"]["ranks"][0]))
    (o / "manifest.json").write_text(json.dumps(top))
    res = cli("simulate", o, "--json")
    assert res.exit_code == 1, res.output
    n = len(top["topology"]["ranks"]) - 1
    assert json.loads(res.stdout)["error"] == (
        f"{o / 'manifest.json'}: field topology.ranks[{n}].rank: rank 0 is listed twice")


def test_a_rank_listed_twice_in_ranks_is_refused(ar2, tmp_path):
    """FORMATS §1.1 ``ranks``: the ranks with a folder, each once; rank 0 again at the end
    (the folders compared as a set, so even the checksums passed) ran rank 0 twice."""
    o = tmp_path / "o"
    shutil.copytree(ar2, o)
    top = json.loads((o / "manifest.json").read_text())
    top["ranks"].append(top["ranks"][0])
    (o / "manifest.json").write_text(json.dumps(top))
    n = len(top["ranks"]) - 1
    for extra in ([], ["--ignore-checksums"]):
        res = cli("simulate", o, "--json", *extra)
        assert res.exit_code == 2, res.output
        assert json.loads(res.stdout)["error"] == (
            f"{o / 'manifest.json'}: field ranks[{n}]: rank {top['ranks'][0]} is listed twice")


# A well-typed value that disagrees (status 1) and, under a key read after it, a value of the
# wrong type (status 2): every type is checked before any value (docs/SIMULATOR.md §1), so
# the status is 2 wherever the two keys sit, in one manifest or two.  Until 2026-12-04 the
# layout and the triggers were read key by key, each value checked as read, and the rank
# manifests one after the other: each of these was status 1, the earlier fault.
# (output, [(rank manifest or None, key path, value), ...], the file and key of the type
# fault, its why)
BOTH = [
    # FORMATS §10 fixes core_window at 2^36; regions are read after it
    ("ar2", [(None, ["memory", "core_window"], 1 << 35),
             (None, ["memory", "regions", 0, "offset"], "x")],
     (None, "memory.regions[0].offset"), 'must be an integer, not "x"'),
    # REGION_KINDS has no "nope"; region 1 follows region 0
    ("ar2", [(None, ["memory", "regions", 0, "kind"], "nope"),
             (None, ["memory", "regions", 1, "size"], "x")],
     (None, "memory.regions[1].size"), 'must be an integer, not "x"'),
    # ar2's topology has one node (0); world is read after the topology
    ("ar2", [(None, ["topology", "ranks", 0, "node"], 5), (None, ["world"], ["a"])],
     (None, "world[0]"), 'must be an integer, not "a"'),
    # hw_generation 2, 3 or 4 (seed 000 §3.4); the platform was checked before the rows
    ("ar2", [(None, ["topology", "hw_generation"], 9),
             (None, ["topology", "ranks", 1, "rank"], "x")],
     (None, "topology.ranks[1].rank"), 'must be an integer, not "x"'),
    # the memory map was checked before the triggers were read
    ("ar2", [(None, ["memory", "core_window"], 1 << 35), (None, ["triggers", 0, "trigger"], "x")],
     (None, "triggers[0].trigger"), 'must be an integer, not "x"'),
    # within one trigger: its dtype was looked up before its chunk was read
    ("ar2", [(None, ["triggers", 0, "dtype"], "NOPE"),
             (None, ["triggers", 0, "chunk", "pgta"], "x")],
     (None, "triggers[0].chunk.pgta"), 'must be an integer, not "x"'),
    # a HIER leg's group naming a plan it does not have (each leg has one), then a later
    # leg's name of the wrong type
    ("hier", [(None, ["triggers", 0, "hier", "legs", 0, "groups", 0, "plan"], 7),
              (None, ["triggers", 0, "hier", "legs", 2, "name"], 5)],
     (None, "triggers[0].hier.legs[2].name"), "must be a string, not 5"),
    # a value of the top manifest, a type of a rank manifest
    ("ar2", [(None, ["memory", "core_window"], 1 << 35), (0, ["entries", 0, "reporter"], 1)],
     (0, "entries[0].reporter"), "must be true or false, not 1"),
    # rank 0's manifest names rank 1; rank 1's is read after it
    ("ar2", [(0, ["rank"], 1), (1, ["entries", 0, "channels"], 5)],
     (1, "entries[0].channels"), "must be a list, not 5"),
    # rank 0's spad.bin holds 1 record (one entry), not 99; net_dest.bin comes later in
    # FORMATS §1's list of files
    ("ar2", [(0, ["files", "spad.bin", "records"], 99),
             (0, ["files", "net_dest.bin", "records"], "x")],
     (0, 'files["net_dest.bin"].records'), 'must be an integer, not "x"'),
]


def _copy_with(src: Path, out: Path, edits) -> None:
    """A copy of output ``src`` at ``out`` with ``edits``: (rank manifest or None for the top
    one, key path, value) each."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out)
    for rank, path, value in edits:
        rel = "manifest.json" if rank is None else f"rank-{rank:04d}/manifest.json"
        doc = json.loads((out / rel).read_text())
        _set(doc, path, value)
        (out / rel).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("which, edits, where, why", BOTH,
                         ids=[f"{c[1][0][1][-1]}+{c[2][1]}" for c in BOTH])
def test_a_wrong_type_is_status_2_also_after_a_wrong_value(request, tmp_path, which, edits,
                                                           where, why):
    src = request.getfixturevalue(which)
    out = tmp_path / "o"
    _copy_with(src, out, edits)
    rank, field = where
    man = out / ("manifest.json" if rank is None else f"rank-{rank:04d}/manifest.json")
    assert _one_line_status_2(out, "--ignore-checksums") == f"{man}: field {field}: {why}"
    _copy_with(src, out, edits[:1])  # the value fault alone: a protocol error (status 1)
    assert cli("simulate", out, "--ignore-checksums").exit_code == 1


@pytest.mark.parametrize("damage, says", [
    ("not JSON", "cannot read manifest.json: Expecting property name enclosed in double "
                 "quotes: line 2 column 1 (char 2)"),
    ("a list", "must be a JSON object"),
    ("no folder", None),
])
def test_a_rank_manifest_that_cannot_be_read_is_status_2_like_the_top_one(ar2, tmp_path,
                                                                          damage, says):
    """A rank manifest that is not JSON, not an object, or whose rank folder is gone (a rank
    the top manifest's ``ranks`` lists): the simulation cannot be done, status 2, as for the
    top manifest (docs/CLI.md) and a key of the wrong type in it; it was a protocol error,
    status 1, with ``--ignore-checksums``."""
    out = tmp_path / "out"
    shutil.copytree(ar2, out)
    man = out / "rank-0001" / "manifest.json"
    if damage == "no folder":
        shutil.rmtree(out / "rank-0001")
        line = f"{out}: rank-0001 is missing (rank 1 of manifest.json ranks)"
    else:
        man.write_text("{\n" if damage == "not JSON" else "[]\n")
        line = f"{man}: {says}"
    res = cli("simulate", out, "--ignore-checksums")
    assert res.exit_code == 2 and res.stderr == f"nrtrewrite: error: {line}\n"


def test_a_rank_folder_without_a_topology_row_is_refused_naming_the_table(ar2, tmp_path):
    """A rank of ``ranks`` (a folder of the output, FORMATS §1.1) needs its row in
    ``topology.ranks`` as a rank of ``world`` does: ar2's rank 1 gone from both ``world`` and
    the table, its folder still listed, is a protocol error naming ``topology`` as the
    world's check does (it named the file only)."""
    o = tmp_path / "o"
    shutil.copytree(ar2, o)
    top = json.loads((o / "manifest.json").read_text())
    assert top["ranks"] == top["world"] == [0, 1]
    top["world"] = [0]
    top["topology"]["ranks"] = [p for p in top["topology"]["ranks"] if p["rank"] != 1]
    (o / "manifest.json").write_text(json.dumps(top))
    res = cli("simulate", o, "--json")
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["error"] == (
        f"{o / 'manifest.json'}: field topology: rank 1 is not in the topology table")


# --model reads ``input`` (FORMATS §1.1: {"name", "sha256", "bytes"}) after every value the
# simulation takes, each of its type (review 49i): until 2026-12-06 an ``input`` of another
# type read as another model's (``... is not the input OUT/manifest.json records (null, null
# bytes, null): --model must name the model ...``, naming the model file), and with
# --ignore-checksums it came before ``ranks``.  (edits, the line after the file)
MODEL_CASES = [
    ([(["input"], 5)], "field input: must be an object, not 5"),
    ([(["input", "sha256"], None)], "field input.sha256: must be a string, not null"),
    ([(["input", "bytes"], "1439")], 'field input.bytes: must be an integer, not "1439"'),
    ([(["ranks"], 5), (["input"], 5)], "field ranks: must be a list, not 5"),
]


@pytest.mark.parametrize("edits, why", MODEL_CASES, ids=["input", "sha256", "bytes", "ranks"])
def test_model_reads_input_after_the_other_keys_each_of_its_type(ar2, tmp_path, edits, why):
    out = tmp_path / "o"
    _copy_with(ar2, out, [(None, path, value) for path, value in edits])
    want = f"{out / 'manifest.json'}: {why}"
    for flags in ((), ("--ignore-checksums",)):
        got = _one_line_status_2(out, "--model", FIX / "ar2.neff", *flags)
        assert got == want


#: A fault the checksum pass met before ``input`` (until 2026-12-06, without
#: --ignore-checksums): rank 0's manifest with a key of the wrong type (its checksum the top
#: manifest's, so that only the key is at fault), or not the bytes whose checksum the top
#: manifest records, or rank 1's folder gone.
RANK_FAULTS = {
    "rank key": lambda out: _edit_in_place(out, ["files", "cce.bin", "bytes"], "x"),
    "checksum": lambda out: (out / "rank-0000" / "manifest.json").write_text(
        (out / "rank-0000" / "manifest.json").read_text() + "\n"),
    "folder gone": lambda out: shutil.rmtree(out / "rank-0001"),
}


def _edit_in_place(out: Path, path: list, value) -> None:
    """Rank 0's manifest with ``value`` at ``path``, its new sha256 in the top manifest."""
    man = out / "rank-0000" / "manifest.json"
    doc = json.loads(man.read_text())
    _set(doc, path, value)
    man.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    top = json.loads((out / "manifest.json").read_text())
    top["rank_manifests"]["rank-0000"] = hashlib.sha256(man.read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("rank_fault", sorted(RANK_FAULTS))
@pytest.mark.parametrize("model_fault", ["input of another type", "another model"])
def test_model_and_input_are_named_before_a_rank_fault_with_and_without_the_option(
        ar2, tmp_path, rank_fault, model_fault):
    """docs/SIMULATOR.md §1: with --model, ``input`` is read and the model held to it before
    any checksum is compared or any rank manifest read, so the first fault named is the same
    with and without --ignore-checksums (review 49w: until 2026-12-06 the checksum pass
    named the rank manifest's fault first, the option ``input``'s)."""
    out = tmp_path / "o"
    shutil.copytree(ar2, out)
    RANK_FAULTS[rank_fault](out)
    model = FIX / "ar2.neff"
    if model_fault == "input of another type":
        top = json.loads((out / "manifest.json").read_text())
        top["input"] = 5
        (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
        want = f"{out / 'manifest.json'}: field input: must be an object, not 5"
    else:  # the line of tests/test_names_locale.py, FORMATS §1.1's input of fixtures/ar2.neff
        model = FIX / "c7c8.neff"
        data, lowered = model.read_bytes(), (FIX / "ar2.neff").read_bytes()
        # (another size: refused from it, since 2026-12-07, before any byte is hashed)
        want = (f"{model}: field input.bytes: the model's size should be {len(lowered)} "
                f"bytes, the size the input {out}/manifest.json records "
                f"({hashlib.sha256(lowered).hexdigest()[:16]}..., \"ar2.neff\"), not "
                f"{len(data)} (refused from its size, before any byte is hashed): either the "
                f"model is not the one {out} was lowered from or {out}/manifest.json was edited")
    for flags in ((), ("--ignore-checksums",)):
        assert _one_line_status_2(out, "--model", model, *flags) == want, flags


@pytest.mark.parametrize("other", ["rank-0001/dma.bin", "ar2.neff", "ar2.neff gone"])
def test_a_rank_folder_gone_is_named_before_a_checksum(ar2, tmp_path, other):
    """docs/SIMULATOR.md §1: a rank folder gone is named as the simulation names it, before
    any checksum and before the rewritten NEFF is read, so alike with and without
    --ignore-checksums (review 51j: §1 said a checksum came before a rank folder, where the
    code named the folder before another rank's checksum, the doc now says so; and the
    rewritten NEFF's checksum, or the NEFF gone, came before the folder without the
    option, after it with it)."""
    out = tmp_path / "o"
    shutil.copytree(ar2, out)
    shutil.rmtree(out / "rank-0000")
    if other == "ar2.neff gone":
        (out / "ar2.neff").unlink()
    else:
        with open(out / other, "ab") as fh:
            fh.write(b"x")
    for flags in ((), ("--ignore-checksums",)):
        assert _one_line_status_2(out, *flags) == (
            f"{out}: rank-0000 is missing (rank 0 of manifest.json ranks)"), flags


def _bad_hash_output(tmp_path: Path) -> tuple[Path, Path]:
    """fixtures/ar2.neff with a bit of its header hash flipped, lowered with
    --no-verify-hash, and the output's rank-0000/dma.bin one byte longer than its manifest
    records."""
    model = tmp_path / "badhash.neff"
    data = bytearray((FIX / "ar2.neff").read_bytes())
    data[172] ^= 0x01  # (NEFF-LIKE.md §1: hash, u8[32] at 172)
    model.write_bytes(bytes(data))
    out = tmp_path / "o"
    res = cli("lower", model, "-o", out, "-q", "--no-verify-hash")
    assert res.exit_code == 0, res.output
    with open(out / "rank-0000" / "dma.bin", "ab") as fh:
        fh.write(b"x")
    return model, out


def test_model_is_parsed_after_the_checksum_pass(tmp_path):
    """docs/SIMULATOR.md §1, CLI.md: with --model, the model is held to ``input`` by its size
    and sha256 before the checksum pass and parsed after it (review 51j: parsed before it,
    a checksum refusal with a 64 MiB model peaked at 184 MB, not 54 MB); its header hash is
    held to the payload in that same block pass, so a wrong one is named first with and
    without --ignore-checksums (review 51w: without the option every checksum-pass fault
    came first, a rank folder gone included); with --no-verify-hash a checksum that does not
    match is the only line, without the warning printed when the model is parsed."""
    model, out = _bad_hash_output(tmp_path)
    n = (out / "rank-0000" / "dma.bin").stat().st_size  # (one byte more than recorded)
    checksum = (f"{out}: rank-0000/dma.bin: its size, {n} bytes, does not match "
                f'rank-0000/manifest.json files["dma.bin"].bytes ({n - 1}); '
                "the output was modified after it was written (--ignore-checksums to "
                "simulate anyway)")
    assert _one_line_status_2(out, "--model", model, "--no-verify-hash") == checksum
    data = model.read_bytes()
    assert int.from_bytes(data[0:8], "little") == 2  # pkg_version 2: MD5 in hash[0:16]
    hs = int.from_bytes(data[8:16], "little")  # header_size, then data_size
    ds = int.from_bytes(data[16:24], "little")
    md5 = hashlib.md5(data[hs:hs + ds]).hexdigest()
    mismatch = (f"{model}: offset 0xac, field hash: MD5 hash mismatch: header has "
                f"{data[172:188].hex()}, payload hashes to {md5}")
    assert _one_line_status_2(out, "--model", model) == mismatch
    assert _one_line_status_2(out, "--model", model, "--ignore-checksums") == mismatch
    shutil.rmtree(out / "rank-0000")  # a fault named "whatever the option": after the hash
    assert _one_line_status_2(out, "--model", model) == mismatch
    assert _one_line_status_2(out, "--model", model, "--ignore-checksums") == mismatch


def test_model_is_hashed_in_blocks_before_the_checksum_pass(ar2, tmp_path):
    """With --model, the model is only hashed before the checksum pass, in blocks: another
    model of 32 MiB is refused with Python holding a few MiB, not the model (review 51j:
    read whole and parsed).  (The output's ``input.bytes`` says 32 MiB: a model of another
    size is refused from it, not hashed.)"""
    import tracemalloc

    model = tmp_path / "zeros.neff"
    with open(model, "wb") as fh:
        fh.truncate(32 << 20)
    sha = hashlib.sha256(bytes(32 << 20)).hexdigest()
    lowered = (FIX / "ar2.neff").read_bytes()
    out = tmp_path / "o"
    _copy_with(ar2, out, [(None, ["input", "bytes"], 32 << 20)])
    ar2 = out
    tracemalloc.start()
    try:
        res = cli("simulate", ar2, "--model", model)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.exit_code == 2
    assert res.stderr == (
        f"nrtrewrite: error: {model}: field input.sha256: sha256 {sha[:16]}... ({32 << 20} "
        f"bytes) is not the input {ar2}/manifest.json records "
        f"({hashlib.sha256(lowered).hexdigest()[:16]}..., {32 << 20} bytes, "
        f'"ar2.neff"): either the model is not the one {ar2} was lowered from or '
        f"{ar2}/manifest.json was edited\n")
    assert peak < 8 << 20, peak


@pytest.mark.parametrize("name", [None, 5, "other.neff"])
def test_model_takes_any_input_name(ar2, tmp_path, name):
    """``input.name`` is informative (FORMATS §1.1: the file name as given): with --model
    only the SHA-256 and the size are typed and compared (review 49w: the first typing of
    ``input`` refused a null name, though the same output simulates without --model)."""
    out = tmp_path / "o"
    _copy_with(ar2, out, [(None, ["input", "name"], name)])
    res = cli("simulate", out, "--model", FIX / "ar2.neff")
    assert res.exit_code == 0, res.output


def _count_hashed(monkeypatch, name: str) -> list[int]:
    """The bytes hashed by ``hashlib.<name>`` objects made from now on, one list item (a
    running total) shared by every module that makes them through ``hashlib``."""
    real, total = getattr(hashlib, name), [0]

    class Counted:
        def __init__(self, data=b"", **kw):
            self._h = real(**kw)
            self.update(data)

        def update(self, data):
            total[0] += memoryview(data).nbytes
            self._h.update(data)

        def digest(self):
            return self._h.digest()

        def hexdigest(self):
            return self._h.hexdigest()

    monkeypatch.setattr(hashlib, name, Counted)
    return total


def test_a_model_of_another_size_than_input_bytes_is_refused_before_it_is_hashed(
        ar2, tmp_path, monkeypatch):
    """docs/SIMULATOR.md §1: a model whose size is not ``input.bytes`` (nor the payload's end
    an older lowering recorded) is refused from the size of the opened file, before any byte
    of it is hashed, with the same line with and without --ignore-checksums (left by
    session 51: a 5 GiB model was hashed whole first, 26 s); the line names both sizes."""
    model = tmp_path / "zeros.neff"
    with open(model, "wb") as fh:
        fh.truncate(64 << 20)  # (sparse: 64 MiB of zeros, no payload end of 1439 bytes)
    lowered = (FIX / "ar2.neff").read_bytes()
    want = (f"{model}: field input.bytes: the model's size should be {len(lowered)} bytes, "
            f"the size the input {ar2}/manifest.json records "
            f"({hashlib.sha256(lowered).hexdigest()[:16]}..., \"ar2.neff\"), not {64 << 20} "
            "(refused from its size, before any byte is hashed): either the model is not the "
            f"one {ar2} was lowered from or {ar2}/manifest.json was edited")
    for flags in ((), ("--ignore-checksums",)):
        hashed = _count_hashed(monkeypatch, "sha256")
        res = cli("simulate", ar2, "--model", model, *flags)
        assert res.exit_code == 2 and res.stderr == f"nrtrewrite: error: {want}\n", flags
        assert hashed[0] < 1 << 20, hashed  # (the manifests' own bytes at most: no model)
        assert _one_line_status_2(ar2, "--model", model, *flags) == want


def test_the_models_payload_is_hashed_once_with_the_model(ar2, monkeypatch):
    """With --model, the payload's digest the block pass held to the header (the bytes it
    hashed, bound by the whole file's sha256 to the bytes then read and parsed) is the
    parse's: the payload is hashed once, not again by the reader (left by session 51)."""
    data = (FIX / "ar2.neff").read_bytes()
    assert int.from_bytes(data[0:8], "little") == 2  # pkg_version 2: the payload's MD5
    data_size = int.from_bytes(data[16:24], "little")  # (NEFF-LIKE.md §1: u64 at 16)
    rewritten = (ar2 / "ar2.neff").read_bytes()  # (its own payload's MD5 is checked too)
    assert int.from_bytes(rewritten[0:8], "little") == 2
    hashed = _count_hashed(monkeypatch, "md5")
    res = cli("simulate", ar2, "--json", "--model", FIX / "ar2.neff")
    assert res.exit_code == 0, res.output
    assert hashed[0] == data_size + int.from_bytes(rewritten[16:24], "little")


@pytest.fixture(scope="module")
def mix8(tmp_path_factory) -> Path:
    """fixtures/mix8.neff: nine collectives over ranks 0 to 7 of one node."""
    return lower_to(FIX / "mix8.neff", tmp_path_factory.mktemp("mix8") / "out", None)


#: A fault the simulation refuses whatever the option, beside rank 1's ``cce.bin`` gone:
#: (manifest or None for the top one, key path, value) edits, each manifest's new sha256 in
#: the top manifest so that only the key is at fault.
BESIDE_A_FILE_GONE = {
    "rank 2 entries key": [(2, ["entries", 0, "trigger"], "x")],
    "rank 2 files key": [(2, ["files", "dma.bin", "bytes"], "x")],
    "rank 0 fifo key": [(0, ["fifo"], 5)],
    # (a protocol error, status 1: the file gone, status 2, comes first either way)
    "leader": [(None, ["triggers", 0, "leader"], 1)],
}


@pytest.mark.parametrize("fault", sorted(BESIDE_A_FILE_GONE))
def test_a_file_gone_beside_a_faulty_key_is_named_alike_with_and_without_the_option(
        mix8, tmp_path, fault):
    """docs/SIMULATOR.md §1: rank by rank, a rank manifest's ``files`` rows and its artifacts
    gone or not regular come before every rank's other keys and every value check, with and
    without --ignore-checksums (left by session 51: without the option the checksum pass,
    rank by rank, named rank 1's file gone, with it the simulation named rank 2's key, all
    rank manifests being read before any artifact; and a protocol error came before the
    file with the option only)."""
    out = tmp_path / "o"
    shutil.copytree(mix8, out)
    (out / "rank-0001" / "cce.bin").unlink()
    top = json.loads((out / "manifest.json").read_text())
    for rank, path, value in BESIDE_A_FILE_GONE[fault]:
        if rank is None:
            _set(top, path, value)
            continue
        man = out / f"rank-{rank:04d}" / "manifest.json"
        doc = json.loads(man.read_text())
        _set(doc, path, value)
        man.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        top["rank_manifests"][f"rank-{rank:04d}"] = hashlib.sha256(man.read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    want = f"{out}/rank-0001/cce.bin: cannot read: No such file or directory"
    for flags in ((), ("--ignore-checksums",)):
        assert _one_line_status_2(out, "--model", FIX / "mix8.neff", *flags) == want, flags
        assert _one_line_status_2(out, *flags) == want, flags


def test_a_rank_manifests_files_key_is_named_before_its_other_keys_either_way(mix8, tmp_path):
    """One rank manifest with a faulty ``entries`` key and a faulty ``files`` row: the
    checksum pass reads only ``files``, so both passes name that row first (until
    2026-12-07 the option named ``entries``)."""
    out = tmp_path / "o"
    _copy_with(mix8, out, [(3, ["entries", 0, "trigger"], "x"),
                           (3, ["files", "sem.bin", "sha256"], 5)])
    top = json.loads((out / "manifest.json").read_text())
    man = out / "rank-0003" / "manifest.json"
    top["rank_manifests"]["rank-0003"] = hashlib.sha256(man.read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    want = f'{man}: field files["sem.bin"].sha256: must be a string, not 5'
    for flags in ((), ("--ignore-checksums",)):
        assert _one_line_status_2(out, *flags) == want, flags


def test_the_rewritten_neff_gone_beside_a_faulty_rank_key_is_named_alike(mix8, tmp_path):
    """The rewritten NEFF gone is named before any rank manifest's key with and without the
    option (until 2026-12-07 the checksum pass named it, the simulation rank 0's key,
    reading every rank manifest before the NEFF)."""
    out = tmp_path / "o"
    _copy_with(mix8, out, [(0, ["entries", 0, "trigger"], "x")])
    top = json.loads((out / "manifest.json").read_text())
    man = out / "rank-0000" / "manifest.json"
    top["rank_manifests"]["rank-0000"] = hashlib.sha256(man.read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    (out / top["output_neff"]["name"]).unlink()
    want = f"{out}/{top['output_neff']['name']}: cannot read: No such file or directory"
    for flags in ((), ("--ignore-checksums",)):
        assert _one_line_status_2(out, *flags) == want, flags


def test_a_rank_folder_gone_beside_another_ranks_bad_manifest_is_named_alike(mix8, tmp_path):
    """A rank folder gone is named before another rank's manifest that is not JSON, with and
    without the option (the checksum pass looks at every rank folder first)."""
    out = tmp_path / "o"
    shutil.copytree(mix8, out)
    man = out / "rank-0000" / "manifest.json"
    man.write_text("{")
    top = json.loads((out / "manifest.json").read_text())
    top["rank_manifests"]["rank-0000"] = hashlib.sha256(b"{").hexdigest()
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(out / "rank-0005")
    want = f"{out}: rank-0005 is missing (rank 5 of manifest.json ranks)"
    for flags in ((), ("--ignore-checksums",)):
        assert _one_line_status_2(out, *flags) == want, flags


@pytest.mark.parametrize("gone", ["rank-0001/cce.bin", "rank-0001"])
def test_a_file_gone_is_named_before_the_models_parse_with_and_without_the_option(
        ar2, tmp_path, gone):
    """docs/SIMULATOR.md §1: the rank folders and their files are looked at before the model
    is parsed, with --ignore-checksums as without it (review 52l: with the option the model
    was parsed first, so a model with the recorded sha256 that the reader refuses, an output
    of an older, more lenient reader, named ``file too short`` there, the file gone without
    it).  The model here is ar2.neff's first 1000 bytes, shorter than the 1024-byte header
    (NEFF-LIKE.md §1), recorded as the input."""
    out = tmp_path / "o"
    shutil.copytree(ar2, out)
    short = tmp_path / "t.neff"
    short.write_bytes((FIX / "ar2.neff").read_bytes()[:1000])
    top = json.loads((out / "manifest.json").read_text())
    top["input"].update(sha256=hashlib.sha256(short.read_bytes()).hexdigest(), bytes=1000)
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    # (the reader's refusal, once nothing is gone: the fault the file gone must come before)
    assert _one_line_status_2(out, "--model", short, "--ignore-checksums").startswith(
        f"{short}: file too short")
    if gone.endswith(".bin"):
        (out / gone).unlink()
        want = f"{out / gone}: cannot read: No such file or directory"
    else:
        shutil.rmtree(out / gone)
        want = f"{out}: rank-0001 is missing (rank 1 of manifest.json ranks)"
    for flags in ((), ("--ignore-checksums",)):
        assert _one_line_status_2(out, "--model", short, *flags) == want, flags


def _changed(data: bytes) -> dict[str, bytes]:
    """ar2.neff's bytes changed a few ways, each a model of another sha256."""
    flip = bytearray(data)
    flip[-10] ^= 1  # (a payload byte)
    head = bytearray(data)
    head[100] ^= 1  # (a header byte)
    return {"payload byte": bytes(flip), "header byte": bytes(head), "a byte less": data[:-1],
            "50 zero bytes more": data + bytes(50), "empty": b""}


@pytest.mark.parametrize("kind", sorted(_changed(b"x" * 200)))
def test_a_model_replaced_between_its_hash_and_its_parse_is_refused(
        ar2, tmp_path, monkeypatch, kind):
    """docs/SIMULATOR.md §1: the model is hashed in blocks before the checksum pass, then
    read whole and held again to that sha256 before it is parsed (the parse takes the
    payload digest of the block pass, so it does not hash the payload again); a model
    replaced in between is refused, naming the sha256 of its bytes now and of the block
    pass's (review 52l: nothing tested it; with the re-check gone, ar2.neff plus 50 zero
    bytes swapped in simulated clean)."""
    import nrtrewrite.cli.simulate as cs

    data = (FIX / "ar2.neff").read_bytes()
    new = _changed(data)[kind]
    model = tmp_path / "m.neff"
    real = cs.input_model_bytes

    def swapped(*args, **kwargs):  # (between the two passes: os.replace, as an editor does)
        (tmp_path / "n.neff").write_bytes(new)
        os.replace(tmp_path / "n.neff", model)
        return real(*args, **kwargs)

    monkeypatch.setattr(cs, "input_model_bytes", swapped)
    want = (f"{model}: field input.sha256: changed while being checked: its sha256 is now "
            f"{hashlib.sha256(new).hexdigest()[:16]}..., not "
            f"{hashlib.sha256(data).hexdigest()[:16]}... ({len(new)} bytes now)")
    for flags in ((), ("--ignore-checksums",), ("--no-verify-hash",)):
        model.write_bytes(data)
        res = cli("simulate", ar2, "--model", model, *flags)
        assert res.exit_code == 2 and res.stderr == f"nrtrewrite: error: {want}\n", \
            (flags, res.output)


def test_a_byte_not_zero_past_the_payloads_end_is_refused_before_the_rest_is_hashed(
        ar2, tmp_path, monkeypatch):
    """docs/SIMULATOR.md §1: a model whose header puts the payload's end at ``input.bytes``
    (the size an older lowering recorded) passes only with zero bytes after it (NEFF-LIKE.md
    §1), so the first byte past it that is not zero is refused there, before the rest is
    hashed (review 52l: ar2.neff with junk appended was hashed whole first).  Here 2 MiB of
    zeros, then 0x01, then 8 MiB of zeros: the blocks (1 MiB) before the 0x01 at most."""
    lowered = (FIX / "ar2.neff").read_bytes()
    model = tmp_path / "junk.neff"
    model.write_bytes(lowered + bytes(2 << 20) + b"\x01" + bytes(8 << 20))
    want = (f"{model}: field input.bytes: the model's byte at offset {len(lowered) + (2 << 20)}"
            f", past the payload's end its header puts at {len(lowered)} bytes, the size the "
            f"input {ar2}/manifest.json records ({hashlib.sha256(lowered).hexdigest()[:16]}..., "
            "\"ar2.neff\"), should be zero (only zero bytes may follow the payload), not 0x01 "
            "(refused there, before the rest is hashed): either the "
            f"model is not the one {ar2} was lowered from or {ar2}/manifest.json was edited")
    for flags in ((), ("--ignore-checksums",)):
        hashed = _count_hashed(monkeypatch, "sha256")
        res = cli("simulate", ar2, "--model", model, *flags)
        assert res.exit_code == 2 and res.stderr == f"nrtrewrite: error: {want}\n", flags
        assert hashed[0] < 3 << 20, hashed  # (not the 10 MiB of the file)
    # zero bytes alone after the payload: the older lowering's model (its sha256 recorded
    # with the payload's end), taken
    model.write_bytes(lowered + bytes(3 << 20))
    out = tmp_path / "o"
    shutil.copytree(ar2, out)
    top = json.loads((out / "manifest.json").read_text())
    top["input"]["sha256"] = hashlib.sha256(model.read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    assert cli("simulate", out, "--json", "--model", model).exit_code == 0


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="no /proc")
def test_a_file_whose_size_the_file_system_says_is_0_is_judged_from_its_bytes(ar2):
    """docs/SIMULATOR.md §1: a /proc file has bytes though ``os.fstat`` says 0, so a size of
    0 is not judged before the bytes are read: the model is refused from the bytes read, its
    sha256 and their count (review 52l: ``--model /proc/self/status`` said ``not 0``).
    /proc/version (a line of some 100 - 200 bytes, under ar2's 1,439 on any kernel, where
    /proc/self/status, 1,408 bytes here, may pass it and get the ``input.bytes`` line)."""
    proc = Path("/proc/version")
    data = proc.read_bytes()
    assert os.stat(proc).st_size == 0 and 0 < len(data) < (FIX / "ar2.neff").stat().st_size
    res = cli("simulate", ar2, "--model", str(proc))
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert line.startswith(f"nrtrewrite: error: {proc}: field input.sha256: sha256 "
                           f"{hashlib.sha256(data).hexdigest()[:16]}... ({len(data)} bytes) "
                           "is not the input "), line
    assert "not 0" not in line and "refused from its size" not in line, line


def test_an_edited_input_sha256_beside_the_genuine_model_blames_neither(ar2, tmp_path):
    """docs/SIMULATOR.md §1: the genuine model beside an ``input.sha256`` edited in
    OUT/manifest.json is refused naming ``input.sha256`` in words that blame neither, as the
    size line's (review 52t: ``: --model must name the model this output was lowered
    from``, the model blamed for the manifest's edit), with and without --ignore-checksums."""
    data = (FIX / "ar2.neff").read_bytes()
    out = tmp_path / "o"
    _copy_with(ar2, out, [(None, ["input", "sha256"], "0" * 64)])
    want = (f"{FIX / 'ar2.neff'}: field input.sha256: sha256 "
            f"{hashlib.sha256(data).hexdigest()[:16]}... ({len(data)} bytes) is not the input "
            f'{out}/manifest.json records ({"0" * 16}..., {len(data)} bytes, "ar2.neff"): '
            f"either the model is not the one {out} was lowered from or {out}/manifest.json "
            "was edited")
    for flags in ((), ("--ignore-checksums",)):
        assert _one_line_status_2(out, "--model", FIX / "ar2.neff", *flags) == want, flags


def test_a_model_whose_size_reads_0_is_read_no_further_than_input_bytes(
        ar2, monkeypatch):
    """docs/SIMULATOR.md §1: a model whose opened file's size is 0 (a /proc file, read as it
    has bytes) is read until more than ``input.bytes`` were read, then refused naming
    ``input.bytes``, before those bytes are hashed (review 52t: /proc/self/pagemap was read
    and hashed up to the reader's 5 GiB limit, 29 s)."""
    import os

    import nrtrewrite.neff.container as container

    model = Path("/proc/self/pagemap")
    if not model.exists() or not os.access(model, os.R_OK) or model.stat().st_size:
        pytest.skip("no /proc/self/pagemap of size 0 to read")
    n = len((FIX / "ar2.neff").read_bytes())
    real, read = container.read_file_blocks, [0]

    def counted(*args, **kw):
        for block in real(*args, **kw):
            read[0] += len(block)
            yield block

    monkeypatch.setattr(container, "read_file_blocks", counted)
    want = (f"{model}: field input.bytes: the model's size should be {n} bytes, the size the "
            f"input {ar2}/manifest.json records ("
            f"{hashlib.sha256((FIX / 'ar2.neff').read_bytes()).hexdigest()[:16]}..., "
            f'"ar2.neff"), not more than {n} (its size as the opened file reports it is 0: '
            "refused once more bytes than that were read, before the rest is hashed): either "
            f"the model is not the one {ar2} was lowered from or {ar2}/manifest.json was "
            "edited")
    for flags in ((), ("--ignore-checksums",)):
        read[0] = 0
        hashed = _count_hashed(monkeypatch, "sha256")
        res = cli("simulate", ar2, "--model", model, *flags)
        assert res.exit_code == 2 and res.stderr == f"nrtrewrite: error: {want}\n", flags
        # one block (the reader's, 1 MiB) past input.bytes at most, none of it hashed
        assert 0 < read[0] <= n + (1 << 20), read
        assert hashed[0] < 1 << 20, hashed  # (the manifests' own bytes at most: no model)


@pytest.mark.parametrize("at", [4, 2])
def test_a_var_given_two_regions_is_refused_naming_both(ar2, tmp_path, at):
    """FORMATS §10: each var has one region (a model's def.json holds a var_id once). ar2's
    one all-reduce of 524,288 bf16 elements has vars 0 and 1 of 1 MiB each, at 0 and 1 MiB
    (DRAM vars 4096-aligned, in var_id order), then scratch at 2 MiB (512 KiB) and an empty
    gw at 2.5 MiB. A hand-edited copy of var 0's region at 2.5 MiB + 4096 (overlapping
    nothing) was taken by simulate (the last of the two) and the run blamed dma.bin's
    buf_ptr; lower's map takes a var's first region. Now refused at the second, naming the
    first: appended (index 4), or inserted before scratch (index 2)."""
    top = json.loads((ar2 / "manifest.json").read_text())
    regs = top["memory"]["regions"]
    assert [(r["name"], r["var_id"], r["offset"], r["size"]) for r in regs] == [
        ("grad_in", 0, 0, 1 << 20), ("grad_out", 1, 1 << 20, 1 << 20),
        ("scratch", None, 2 << 20, 512 << 10), ("gw", None, (2 << 20) + (512 << 10), 0)]
    dup = dict(regs[0], name="again", offset=(2 << 20) + (512 << 10) + 4096)
    _edit(ar2, tmp_path / "o", None, ["memory", "regions"], regs[:at] + [dup] + regs[at:])
    res = cli("simulate", tmp_path / "o", "--json")
    assert res.exit_code == 1, res.output
    assert json.loads(res.stdout)["error"] == (
        f"{tmp_path / 'o' / 'manifest.json'}: field memory.regions[{at}].var_id: var 0 of "
        '"sg00" is given twice, in memory.regions[0] ("grad_in") and here ("again"): a var '
        "has one region (FORMATS §10)")
