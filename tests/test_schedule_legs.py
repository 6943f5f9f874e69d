"""`schedule` and `dump` against what `lower` writes and what the docs say (docs/CLI.md
"schedule", "dump"; docs/FORMATS.md §3).

Expected values come from docs/FORMATS.md's leaf table, from the legs `dump` decodes from
what `lower` wrote, or from hand derivation - never from `schedule` itself."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from nrtrewrite.artifacts import decode_record
from nrtrewrite.cli import main
from nrtrewrite.emit import formats as F

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"

#: 1, 5 and 97 elements over 7 ranks, 1 and 3 over 2 (most ring halves are empty)
TINY = """\
header: {name: tiny, lnc_size: 1}
subgraphs:
  - name: sg00
    vars:
      - {name: a_in, type: input, size: 4KiB}
      - {name: a_out, type: output, size: 4KiB}
      - {name: g_out, type: output, size: 32KiB}
    replica_groups: ["0..6", [7, 8]]
    engines:
      sp:
        - all_reduce: {dtype: bf16, op: add, src: a_in, dst: a_out, num_elements: 1}
        - all_reduce: {dtype: bf16, op: add, src: a_in, dst: a_out, num_elements: 5}
        - all_reduce: {dtype: fp8_e4, op: add, src: a_in, dst: a_out, num_elements: 97}
        - all_gather: {dtype: bf16, src: a_in, dst: g_out, num_elements: 1}
        - all_gather: {dtype: fp16, src: a_in, dst: g_out, num_elements: 33}
        - reduce_scatter: {dtype: bf16, op: add, src: a_in, dst: a_out, num_elements: 7}
        - reduce_scatter: {dtype: bf16, op: add, src: a_in, dst: a_out, num_elements: 1001}
        - all_reduce: {dtype: bf16, op: add, src: a_in, dst: a_out, num_elements: 1, group: 1}
        - all_reduce: {dtype: bf16, op: add, src: a_in, dst: a_out, num_elements: 3, group: 1}
        - all_gather: {dtype: bf16, src: a_in, dst: g_out, num_elements: 3, group: 1}
        - reduce_scatter: {dtype: bf16, op: add, src: a_in, dst: a_out, num_elements: 2, group: 1}
"""

#: KANGARING over two 8-rank groups (lnc 2): primaries and secondaries with sync legs
KANGA = """\
header: {name: kmini, lnc_size: 2}
subgraphs:
  - name: sg00
    vars:
      - {name: o_in, type: input, size: 200006}
      - {name: o_out, type: output, size: 200006}
    replica_groups: ["0..7", "8..15"]
    engines:
      sp:
        - all_reduce: {dtype: fp16, op: add, src: o_in, dst: o_out, num_elements: 100003}
        - all_reduce: {dtype: fp16, op: add, src: o_in, dst: o_out, num_elements: 100003, group: 1}
"""

#: HIER over two nodes at lnc 2 (8 + 8 ranks): every op, so every HIER leg
HIER = """\
header: {name: hier, lnc_size: 2}
subgraphs:
  - name: sg00
    vars:
      - {name: a_in, type: input, size: 1MiB}
      - {name: a_out, type: output, size: 1MiB}
      - {name: g_in, type: input, size: 8KiB}
      - {name: g_out, type: output, size: 128KiB}
      - {name: r_in, type: input, size: 256KiB}
      - {name: r_out, type: output, size: 16KiB}
    replica_groups: [[0, 1, 2, 3, 4, 5, 6, 7, 64, 65, 66, 67, 68, 69, 70, 71]]
    engines:
      sp:
        - all_reduce: {dtype: bf16, op: add, src: a_in, dst: a_out, bytes: 1MiB}
        - all_gather: {dtype: bf16, src: g_in, dst: g_out, bytes: 8KiB}
        - reduce_scatter: {dtype: bf16, op: add, src: r_in, dst: r_out, bytes: 256KiB}
"""


def _run(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, text in (("tiny", TINY), ("kanga", KANGA), ("hier", HIER)):
        (d / f"{name}.yaml").write_text(text)
        _run("assemble", d / f"{name}.yaml", "-o", d / f"{name}.neff")
        out[name] = d / f"{name}.neff"
    for name in ("ar2", "groups", "mix8"):
        out[name] = FIX / f"{name}.neff"
    return out


def _algo(algo):
    return ["--algo", algo] if algo else []


def _schedule(model, rank, algo=None, *more):
    return json.loads(_run("schedule", model, "--rank", rank, "--json", *_algo(algo),
                           *more).output)


# -- leaf names: docs/FORMATS.md §3 is the table -------------------------------------------

def _formats_leaves() -> dict[int, str]:
    """The legs.bin ``leaf`` row of docs/FORMATS.md: code -> name."""
    text = (ROOT / "docs" / "FORMATS.md").read_text()
    row = next(line for line in text.splitlines()
               if re.match(r"\|\s*12\s*\|\s*u8\s*\|\s*leaf\s*\|", line))
    meaning = row.split("|")[4]
    return {int(c): n for c, n in re.findall(r"\b(\d+) ([a-z][a-z_0-9]+)", meaning)}


def test_formats_md_leaf_table_is_read_whole():
    leaves = _formats_leaves()
    # the row lists 1-12, 15, 16-22 (section 3, read by hand; 9 direct_pull reserved)
    assert sorted(leaves) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16, 17, 18, 19, 20,
                              21, 22]
    assert leaves[9] == "direct_pull"
    assert leaves[11] == "peer_post" and leaves[12] == "peer_wait"


def test_dump_and_schedule_name_every_formats_leaf():
    from nrtrewrite.compose.leaves import leaf_name  # the name schedule shows
    rec = np.zeros(1, F.ARTIFACTS["legs.bin"][0])[0]
    for code, name in _formats_leaves().items():
        rec["leaf"] = code
        assert decode_record("legs.bin", rec)["leaf_name"] == name, code
        assert leaf_name(code) == name, code
    rec["leaf"] = 0xEE  # not a leaf: its code, as dump shows unknown codes
    assert decode_record("legs.bin", rec)["leaf_name"] == "0xee"


@pytest.fixture(scope="module")
def kanga_out(models, tmp_path_factory):
    out = tmp_path_factory.mktemp("kanga") / "out"
    _run("lower", models["kanga"], "-o", out, "--algo", "kangaring", "--rank", 9, "--rank", 10,
         "--quiet", "-j1")
    return out


def test_dump_names_the_kangaring_sync_legs(kanga_out):
    doc = json.loads(_run("dump", "--dma", kanga_out, "--json").output)
    names = {(leg["leaf"], leg["leaf_name"]) for r in doc["ranks"]
             for leg in r["files"]["legs.bin"]}
    # rank 9 a primary (peer_wait + the fan-in reduce), rank 10 a secondary (post, wait)
    assert {(11, "peer_post"), (12, "peer_wait"), (10, "direct_reduce_send_kangaring")} <= names
    table = _run("dump", kanga_out / "rank-0009" / "legs.bin").output  # piped: not a terminal
    assert "peer_wait" in table and "0xc" not in table
    assert "direct_reduce_send_kangaring" in table  # whole, not cut to "..._kanga…"
    for header in ("leaf_name", "reduction_type", "num_elements", "sb2sb_count"):
        assert header in table


# -- the steps are the legs lower emits -----------------------------------------------------

def _legs_by_channel(dump_doc, rank) -> dict[tuple[int, int], list[dict]]:
    """(spad_index, channel) -> the composed legs of rank's legs.bin (without the entry
    handshake and the closing mark_end the emitter adds)."""
    rdir = f"rank-{rank:04d}"
    legs = next(r["files"]["legs.bin"] for r in dump_doc["ranks"] if r["rank_dir"] == rdir)
    by = defaultdict(list)
    for leg in legs:
        if leg["leaf_name"] not in ("mark_complete", "mark_end"):
            by[(leg["spad_index"], leg["channel"])].append(leg)
    return by


CASES = [  # (model, --algo, ranks)
    ("tiny", None, (0, 3, 7)),  # MESH
    ("tiny", "ring", (0, 3, 6, 7, 8)),
    ("tiny", "allreduce:single_cycle_ring", (0, 5)),
    ("kanga", "kangaring", (9, 10)),
    ("ar2", None, (0, 1)),  # INTRA_RDH
    ("groups", "ring", (0, 5)),
    ("hier", None, (0, 65)),
]


@pytest.mark.parametrize("name,algo,ranks", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_schedule_steps_are_the_emitted_legs(models, tmp_path, name, algo, ranks):
    out = tmp_path / "out"
    _run("lower", models[name], "-o", out, *_algo(algo),
         *[a for r in ranks for a in ("--rank", r)], "--quiet", "-j1")
    dumped = json.loads(_run("dump", "--dma", out, "--json").output)
    spad = json.loads(_run("dump", "--spad", out, "--json").output)
    for rank in ranks:
        sched = _schedule(models[name], rank, algo)
        entries = next(r["files"]["spad.bin"] for r in spad["ranks"]
                       if r["rank_dir"] == f"rank-{rank:04d}")
        assert len(sched["ops"]) == len(entries)  # one op per SPAD entry
        legs = _legs_by_channel(dumped, rank)
        shown = set()
        for i, op in enumerate(sched["ops"]):
            for ch in op["channels"]:
                key = (i, ch["channel"])
                shown.add(key)
                want = [(leg["leaf_name"], leg["half"], leg["elem_start"],
                         leg["elem_start"] + leg["num_elements"]) for leg in legs[key]]
                got = [(s["leaf"], s["half"], s["elements"][0], s["elements"][1])
                       for s in ch["steps"]]
                # a leg without data has no elements (direct_recv, post_recv: what they
                # consume or receive); the schedule shows the range all the same
                assert len(got) == len(want), (rank, op["trigger"], key)
                for g, w in zip(got, want):
                    assert g[:2] == w[:2], (rank, op["trigger"], key)
                    if w[3] > w[2]:
                        assert g[2:] == w[2:], (rank, op["trigger"], key)
                    else:  # a kept sync leg: no elements in either
                        assert g[3] - g[2] == 0 or w[0] in ("direct_recv", "post_recv")
                assert all(leg["trigger"] == op["trigger"] for leg in legs[key])
        assert shown == set(legs), rank  # no channel with legs is missing


def test_one_element_over_seven_ranks_is_two_legs_a_rank(models):
    """Hand derivation (docs/DESIGN.md "Ring layout"): one element is chunk position 0, half
    H0; on a 7-rank ring it is sent once, passed on 5 times and finally reduced once, then
    copied out once, passed on 5 times and received once: 14 legs, two on every rank, all
    of [0, 1) and of chunk position 0, the block of group[0] = rank 0."""
    seen = []
    for rank in range(7):
        ops = [op for op in _schedule(models["tiny"], rank, "ring", "--trigger", 0)["ops"]]
        steps = [s for op in ops for c in op["channels"] for s in c["steps"]]
        assert len(steps) == 2, rank
        for s in steps:
            assert (s["half"], s["elements"], s["k"]) == (0, [0, 1], 0)
        seen += [s["leaf"] for s in steps]
    assert sorted(seen) == sorted(["send", "recv_reduce_copy", "direct_copy_send",
                                   "direct_recv"] + ["recv_reduce_send"] * 5
                                  + ["direct_recv_send"] * 5)


# -- k of a leg without a chunk position: the rank itself -----------------------------------

@pytest.mark.parametrize("rank", [9, 10])
def test_kangaring_sync_legs_carry_the_rank(models, rank):
    ops = _schedule(models["kanga"], rank, "kangaring")["ops"]
    sync = [s for op in ops for c in op["channels"] for s in c["steps"]
            if s["leaf"] in ("peer_post", "peer_wait")]
    assert sync  # rank 9 is a primary (peer_wait), rank 10 a secondary (post and wait)
    assert {s["k"] for s in sync} == {rank}
    data = [s for op in ops for c in op["channels"] for s in c["steps"]
            if s["leaf"] not in ("peer_post", "peer_wait")]
    assert all(8 <= s["k"] <= 15 for s in data)  # chunk positions: members of group 8..15


@pytest.mark.parametrize("name,rank", [("tiny", 3), ("tiny", 8), ("mix8", 5)])
def test_mesh_and_rdh_legs_carry_the_rank(models, name, rank):
    ops = _schedule(models[name], rank)["ops"]
    assert {op["algorithm"] for op in ops} <= {"MESH", "INTRA_RDH", "INTER_RDH"}
    steps = [s for op in ops for c in op["channels"] for s in c["steps"]]
    assert steps and {s["k"] for s in steps} == {rank}


# -- the leg's op of a HIER entry ---------------------------------------------------------

#: docs/DESIGN.md "HIER" / SELECTION.md §3: the collective each leg runs
LEG_OPS = {"intra_redsct": "REDUCE_SCATTER", "inter_redsct": "REDUCE_SCATTER",
           "inter_allr": "ALLREDUCE", "intra_allg": "ALLGATHER", "inter_allg": "ALLGATHER"}


def test_hier_entries_name_their_leg_op(models):
    ops = _schedule(models["hier"], 65)["ops"]
    legs = [(op["op"], op["leg"], op["leg_op"]) for op in ops]
    assert [(o, leg) for o, leg, _ in legs] == [
        ("ALLREDUCE", "intra_redsct"), ("ALLREDUCE", "inter_allr"), ("ALLREDUCE", "intra_allg"),
        ("ALLGATHER", "inter_allg"), ("ALLGATHER", "intra_allg"),
        ("REDUCE_SCATTER", "intra_redsct"), ("REDUCE_SCATTER", "inter_redsct")]
    assert all(leg_op == LEG_OPS[leg] for _o, leg, leg_op in legs)
    text = _run("schedule", models["hier"], "--rank", 65, "--trigger", 0, "--limit", 1).output
    assert "ALLREDUCE RING (intra_redsct: REDUCE_SCATTER) channel" in " ".join(text.split())


def test_flat_entries_leg_op_is_the_op(models):
    for op in _schedule(models["tiny"], 0, "ring")["ops"]:
        assert op["leg"] == "flat" and op["leg_op"] == op["op"]


@pytest.mark.parametrize("op, phases", [("all_gather", {"all_gather"}),
                                        ("reduce_scatter", {"reduce_scatter"})])
def test_kangaring_sync_legs_are_in_their_ops_phase(tmp_path, op, phases):
    """A KANGARING all-gather's peer_post / peer_wait legs showed phase reduce_scatter, a
    phase the op does not have (a schedule tester): they take the op's."""
    import meshcase
    from nrtrewrite.neff.assembler import assemble_spec
    model = tmp_path / "k.neff"
    model.write_bytes(assemble_spec(meshcase.spec([list(range(8))],
                                                  [(op, "bf16", "add", 1024)], lnc=2)))
    seen_sync = False
    for rank in range(8):
        doc = json.loads(_run("schedule", model, "--rank", rank, "--algo",
                              "kangaring", "--json").output)
        for entry in doc["ops"]:
            for ch in entry["channels"]:
                assert {s["phase"] for s in ch["steps"]} == phases
                seen_sync |= any(s["leaf"] in ("peer_post", "peer_wait") for s in ch["steps"])
    assert seen_sync


@pytest.mark.parametrize("algo", ["ring", "allreduce:single_cycle_ring;ring"])
def test_a_one_rank_groups_copy_is_in_the_all_gather_phase(tmp_path, algo):
    """docs/CLI.md `schedule` `phase`: a one-rank group's copy (enc_1rank_primitive: one
    direct_copy a half, step 0) is `all_gather` whatever the op (a mutation audit found the
    label undocumented)."""
    import meshcase
    from nrtrewrite.neff.assembler import assemble_spec
    model = tmp_path / "one.neff"
    trigs = [("all_reduce", "bf16", "add", 40), ("all_gather", "bf16", None, 40),
             ("reduce_scatter", "bf16", "add", 40)]
    model.write_bytes(assemble_spec(meshcase.spec([[5]], trigs)))
    doc = _schedule(model, 5, algo)
    assert [e["op"] for e in doc["ops"]] == ["ALLREDUCE", "ALLGATHER", "REDUCE_SCATTER"]
    assert doc["ops"][0]["algorithm"] == ("RING" if algo == "ring" else "SINGLE_CYCLE_RING")
    for entry in doc["ops"]:
        steps = [s for ch in entry["channels"] for s in ch["steps"]]
        assert steps and {(s["phase"], s["leaf"], s["step"], s["k"]) for s in steps} == {
            ("all_gather", "direct_copy", 0, 5)}
        for ch in entry["channels"]:  # one copy a half
            assert [s["half"] for s in ch["steps"]] == [0, 1]
