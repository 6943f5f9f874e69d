"""An exclusion that leaves HIER legs no engine (docs/SELECTION.md §8, the leg bullet):
the refusal names every such leg, the engines excluded beside those not legal and why, and
what to pass instead, each way checked by lowering it (the fifty-third session's "Left":
``--algo '^ring'`` on a two-node 2 x 2 all-reduce was refused naming only ``intra_allg``,
its KANGARING's reason and not that RING was excluded, and no way out).

Expected words come from the docs: a HIER intra leg's engines are RING and KANGARING
(SELECTION.md §1 and §5, seed 000 §1.4: "an intra leg is never MESH"); KANGARING needs every
rank of each device it touches (ranks 0, 1 of trn2's 4-rank device 0 at LNC 2); SINGLE_CYCLE_RING
composes any all-reduce forced (§3); a leg clause forcing one engine beats an exclusion (§8)."""

from __future__ import annotations

import copy
import json
import re

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.codes import DType, EncOpType
from nrtrewrite.errors import SelectionError
from nrtrewrite.select import Request, parse_algo_override, select
from nrtrewrite.topology import load_topology

T2N = load_topology("trn2:nodes=2", world=(), lnc_size=2)  # 64 ranks a node, 4 a device
GROUP = [0, 1, 64, 65]  # 2 nodes x 2 ranks, half of device 0 on each node
MIB = 1 << 20

SPEC = {
    "header": {"pkg_version": 2, "name": "two_by_two", "lnc_size": 2},
    "subgraphs": [{
        "name": "sg00",
        "vars": [{"name": "x", "type": "input", "size": MIB},
                 {"name": "y", "type": "output", "size": MIB}],
        "replica_groups": [GROUP],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "x",
                                           "dst": "y", "bytes": MIB}}]},
    }],
}

KANGARING_WHY = ("device 0 of node 0 has 2 of its 4 ranks in the group; KangaRing needs "
                 "every rank of each device it touches")


def cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env or {},
                              catch_exceptions=False)


@pytest.fixture
def model(tmp_path):
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / "m.neff"
    path.write_bytes(assemble_spec(copy.deepcopy(SPEC)))
    return path


def lowers_and_simulates(model, out, algo):
    res = cli("lower", "-q", model, "--topology", "trn2:nodes=2", "--algo", algo, "-o", out)
    assert res.exit_code == 0, res.output
    sim = cli("simulate", out)
    assert sim.exit_code == 0, sim.output


def test_caret_ring_on_a_two_by_two_all_reduce_names_both_intra_legs_and_the_way_out(
        model, tmp_path):
    """Both intra legs are left none (RING excluded, KANGARING not legal on half a device):
    the first in slot order named with its engines, RING said excluded, the other leg named;
    then the override with both legs forced to RING, and the flat engine --algo may force
    (SINGLE_CYCLE_RING: RING is excluded). Each way lowers and simulates bit-exactly."""
    res = cli("lower", model, "--topology", "trn2:nodes=2", "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    line, = res.stderr.splitlines()
    assert line.endswith(
        "trigger 0: --algo '^ring' leaves the intra_allg leg no legal engine (its engines: "
        f"RING, KANGARING; KANGARING: {KANGARING_WHY}; RING excluded), nor the intra_redsct "
        "leg any; --algo '^ring;intra_allg:ring;intra_redsct:ring' runs the intra_allg and "
        "intra_redsct legs on RING (a leg clause forcing one engine beats an exclusion), or "
        "--algo may force SINGLE_CYCLE_RING over the whole group"), line
    assert not (tmp_path / "refused").exists()
    lowers_and_simulates(model, tmp_path / "legs", "^ring;intra_allg:ring;intra_redsct:ring")
    lowers_and_simulates(model, tmp_path / "flat", "single_cycle_ring")


def test_a_leg_the_first_legs_hid_is_found_by_the_way_out_and_named():
    """A 256 B all-gather over the same group: intra_allg is left none at once; its way out
    then leaves inter_allg none (MESH, the policy's there, is not lowerable as a HIER leg,
    §6; RING excluded), so that leg is named and forced too; no flat engine (MESH needs one
    rank a node, SINGLE_CYCLE_RING is all-reduce only, RING excluded). The way out selects
    both legs RING."""
    req = Request.for_op(EncOpType.ALLGATHER, DType.BF16, GROUP, 256)
    with pytest.raises(SelectionError) as err:
        select(req, T2N, override=parse_algo_override("^ring"))
    assert err.value.reason == (
        "--algo '^ring' leaves the intra_allg leg no legal engine (its engines: RING, "
        f"KANGARING; KANGARING: {KANGARING_WHY}; RING excluded), nor the inter_allg leg any; "
        "--algo '^ring;intra_allg:ring;inter_allg:ring' runs the intra_allg and inter_allg "
        "legs on RING (a leg clause forcing one engine beats an exclusion)")
    way = select(req, T2N, override=parse_algo_override("^ring;intra_allg:ring;inter_allg:ring"))
    legs = [(leg.name, leg.alg.name) for leg in way.legs]
    assert legs == [("inter_allg", "RING"), ("intra_allg", "RING")]


def test_the_way_out_keeps_the_source_and_the_other_clauses(monkeypatch):
    """From NRTREWRITE_ALGO the refusal and its way out name the variable; a clause of
    another collective is kept as written, the leg's own allow-list replaced. A 1 KiB
    reduce-scatter: intra_redsct's allow-list leaves it none (KANGARING not legal, MESH no
    intra leg's engine), and the way out then leaves inter_redsct none (MESH not lowerable as
    a leg, RING excluded for reduce-scatters); no flat engine is legal and allowed."""
    text = "allgather:ring;reduce_scatter:^ring;intra_redsct:kangaring,mesh"
    monkeypatch.setenv("NRTREWRITE_ALGO", text)
    req = Request.for_op(EncOpType.REDUCE_SCATTER, DType.BF16, GROUP, 1024)
    with pytest.raises(SelectionError) as err:
        select(req, T2N, override=parse_algo_override(None))
    assert err.value.reason == (
        f"NRTREWRITE_ALGO {text!r} leaves the intra_redsct leg no legal engine (its engines: "
        f"RING, KANGARING; KANGARING: {KANGARING_WHY}; MESH not legal on the intra_redsct "
        "leg), nor the inter_redsct leg any; NRTREWRITE_ALGO 'allgather:ring;"
        "reduce_scatter:^ring;intra_redsct:ring;inter_redsct:ring' runs the intra_redsct and "
        "inter_redsct legs on RING (a leg clause forcing one engine beats an exclusion)")


# -- the way out held to the BD gate lower applies ----------------------------------------------

ROWS_GROUP = [0, 1, 128, 129]  # LNC 1: 128 ranks a node, 8 a device: 2 nodes x 2 ranks
ROWS_BDS = "{leg} leg would need 96000 {way} BDs, more than TPINC_MAX_BDS 65534"


def rows_spec(src_step: int, dst_step: int) -> dict:
    """An fp16 all-reduce over ROWS_GROUP of 64 partitions x 300 x 5 x 4 = 384000 elements,
    src and dst dims [[s, 300], [300 s, 5], [1500 s, 4]]: a step of 2 makes every element of
    that operand a run of its own, a BD each (FORMATS.md, SELECTION.md "The BD gate").
    SINGLE_CYCLE_RING over the 4 ranks reduces blocks of 384000 / 4 = 96000 elements into
    OUT; HIER's RING intra legs over 2 ranks run 2 channels (768000 B / 256 KiB), each
    channel's 192000 elements in 2 blocks of 96000, the reduce-scatter sending from IN and
    the all-gather from OUT."""
    def ap(var, step):
        return {"var": var, "start": 0, "partitions": [0, 64],
                "dims": [[step, 300], [300 * step, 5], [1500 * step, 4]]}
    size = 6000 * 2 * 2 + 64
    return {"header": {"pkg_version": 2, "name": "rows", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "s", "type": "state-buffer", "size": size,
                                     "partitions": 128},
                                    {"name": "d", "type": "state-buffer", "size": size,
                                     "partitions": 128}],
                           "replica_groups": [ROWS_GROUP],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "fp16", "op": "add", "src": ap("s", src_step),
                               "dst": ap("d", dst_step)}}]}}]}


def rows_model(tmp_path, src_step: int, dst_step: int):
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / f"rows{src_step}{dst_step}.neff"
    path.write_bytes(assemble_spec(rows_spec(src_step, dst_step)))
    return path


LEGS_WAY = "^ring;intra_allg:ring;intra_redsct:ring"
LEFT = ("--algo '^ring' leaves the intra_allg leg no legal engine (its engines: RING, "
        "KANGARING; KANGARING: device 0 of node 0 has 2 of its 8 ranks in the group; KangaRing "
        "needs every rank of each device it touches; RING excluded), nor the intra_redsct leg "
        "any; ")


def test_a_way_out_over_tpinc_max_bds_is_not_offered(tmp_path):
    """RELIABILITY §6's "Left": the way out was checked for legality and lowerability, not
    against the BD gate.  dst rows of 1 element: HIER's all-gather sends from OUT, 96000
    M2S BDs a leg, and SINGLE_CYCLE_RING writes 96000 S2M; both ways were offered and
    ``lower`` refused each (the expected answer: lower under each, exit 2 naming that leg).
    Now neither is offered and each is said not to fit, with its leg."""
    model = rows_model(tmp_path, 1, 2)
    res = cli("lower", model, "--topology", "trn2:nodes=2", "-j", 1, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "trigger 0: " + LEFT + f"neither HIER under --algo '{LEGS_WAY}' (a "
        + ROWS_BDS.format(leg="send", way="M2S") + ") nor --algo 'single_cycle_ring' (a "
        + ROWS_BDS.format(leg="recv_reduce_copy_send", way="S2M") + ") fits"), res.stderr
    res = cli("lower", model, "--topology", "trn2:nodes=2", "-j", 1, "--algo", LEGS_WAY,
              "-o", tmp_path / "legs")
    assert res.exit_code == 2 and "HIER a send leg would need 96000 M2S BDs" in res.stderr
    res = cli("lower", model, "--topology", "trn2:nodes=2", "-j", 1, "--algo",
              "single_cycle_ring", "-o", tmp_path / "flat")
    assert res.exit_code == 2 and "a recv_reduce_copy_send leg on channel 0 needs 231 M2S " \
        "and 96000 S2M BDs" in res.stderr, res.stderr
    res = cli("explain", model, "--topology", "trn2:nodes=2", "--algo", "^ring", "--json")
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"].endswith(res.stderr.rstrip()[-200:])


def test_a_way_out_that_fits_is_offered_beside_one_that_does_not(tmp_path):
    """src rows of 1 element: HIER's reduce-scatter sends from IN, 96000 M2S BDs a leg, so
    under the leg clauses the default passes HIER over (and lowers another engine: the
    clauses run no leg, warned); SINGLE_CYCLE_RING reads and writes rows of 300 and lowers
    forced.  Only it is offered; the leg clauses are not said not to fit (until 2026-12-07
    "HIER under --algo '...' does not fit either", though lower under them lowers: review
    55p, SELECTION.md §8: a way is said not to fit where lower under it refuses)."""
    model = rows_model(tmp_path, 2, 1)
    res = cli("lower", model, "--topology", "trn2:nodes=2", "-j", 1, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "trigger 0: " + LEFT + "--algo may force SINGLE_CYCLE_RING over the whole group"), \
        res.stderr
    out = tmp_path / "flat"
    res = cli("lower", "-q", model, "--topology", "trn2:nodes=2", "-j", 1, "--algo",
              "single_cycle_ring", "-o", out)
    assert res.exit_code == 0, res.output
    res = cli("lower", model, "--topology", "trn2:nodes=2", "-j", 1, "--algo", LEGS_WAY,
              "-o", tmp_path / "legs")
    assert res.exit_code == 0 and "'intra_allg:ring' applies to nothing" in res.stderr
    assert json.loads((tmp_path / "legs" / "manifest.json").read_text())["triggers"][0][
        "algorithm"] != "HIER"


# -- the way out held to every trigger of the model ---------------------------------------------

def mixed_spec(first: str) -> dict:
    """The 1 MiB bf16 all-reduce of SPEC and a 256 B bf16 all-gather over the same group,
    ``first`` (``all_reduce`` or ``all_gather``) first."""
    ops = {"all_reduce": {"all_reduce": {"dtype": "bf16", "op": "add", "src": "x", "dst": "y",
                                         "bytes": MIB}},
           "all_gather": {"all_gather": {"dtype": "bf16", "src": "a", "dst": "b",
                                         "bytes": 256}}}
    order = [first] + [k for k in ops if k != first]
    spec = copy.deepcopy(SPEC)
    sg = spec["subgraphs"][0]
    sg["vars"] += [{"name": "a", "type": "input", "size": 256},
                   {"name": "b", "type": "output", "size": 1024}]
    sg["engines"]["sp"] = [ops[k] for k in order]
    return spec


@pytest.mark.parametrize("first,line", [
    # the all-reduce stops first: its intra legs, then the all-gather's inter_allg under them
    ("all_reduce",
     "trigger 0: --algo '^ring' leaves the intra_allg leg no legal engine (its engines: RING, "
     f"KANGARING; KANGARING: {KANGARING_WHY}; RING excluded), nor the intra_redsct leg any; "
     "--algo '^ring;intra_allg:ring;intra_redsct:ring;inter_allg:ring' runs the intra_allg, "
     "intra_redsct and inter_allg legs on RING (a leg clause forcing one engine beats an "
     "exclusion; the inter_allg leg for trigger 1), or --algo "
     "'^ring;allreduce:single_cycle_ring;intra_allg:ring;inter_allg:ring' forces "
     "SINGLE_CYCLE_RING over the whole group on ALLREDUCE alone; trigger 1 still stops under "
     "--algo 'single_cycle_ring'"),
    # the all-gather stops first (no flat engine: test_a_leg_the_first_legs_hid_...), then
    # the all-reduce's intra_redsct under its clauses
    ("all_gather",
     "trigger 0: --algo '^ring' leaves the intra_allg leg no legal engine (its engines: RING, "
     f"KANGARING; KANGARING: {KANGARING_WHY}; RING excluded), nor the inter_allg leg any; "
     "--algo '^ring;intra_allg:ring;inter_allg:ring;intra_redsct:ring' runs the intra_allg, "
     "inter_allg and intra_redsct legs on RING (a leg clause forcing one engine beats an "
     "exclusion; the intra_redsct leg for trigger 1)"),
])
def test_the_way_out_is_held_to_every_trigger_of_the_model(tmp_path, first, line):
    """RELIABILITY §6's "Left": the way out was checked on the trigger that stopped alone,
    so on a model of an all-reduce and an all-gather over 0, 1, 64, 65 `--algo '^ring'`
    offered leg clauses under which the all-gather's inter_allg was left none (MESH, its
    policy engine, is no HIER leg engine), and SINGLE_CYCLE_RING, which is all-reduce only
    (SELECTION.md §3).  Now the leg clauses take every trigger's legs and a flat engine a
    trigger still stops under is not offered but that trigger named.  The expected answers
    are lower's: the way offered lowers (and simulates), `--algo single_cycle_ring` stops at
    the all-gather; explain and schedule say lower's line."""
    from nrtrewrite.neff.assembler import assemble_spec
    model = tmp_path / "mix.neff"
    model.write_bytes(assemble_spec(mixed_spec(first)))
    topo = ("--topology", "trn2:nodes=2")
    res = cli("lower", model, *topo, "-j", 1, "--algo", "^ring", "-o", tmp_path / "refused")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(line), res.stderr
    ways = re.findall(r"(?<!still stops under )--algo '([^']*)'", line)[1:]
    assert ways
    for i, way in enumerate(ways):
        lowers_and_simulates(model, tmp_path / f"way{i}", way)
    res = cli("lower", model, *topo, "-j", 1, "--algo", "single_cycle_ring",
              "-o", tmp_path / "flat")
    ag = 1 if first == "all_reduce" else 0
    assert res.exit_code == 2 and f"trigger {ag}: --algo 'single_cycle_ring' forces " \
        "SINGLE_CYCLE_RING, refused: " in res.stderr, res.stderr
    res = cli("explain", model, *topo, "--algo", "^ring", "--json")
    assert res.exit_code == 2 and json.loads(res.stdout)["error"].endswith(line)
    res = cli("schedule", model, *topo, "--algo", "^ring", "--rank", 0)
    assert res.exit_code == 2 and res.stderr.rstrip().endswith(line), res.stderr


def test_the_two_node_fixtures_way_out_forces_the_reduce_scatters_leg_too(tmp_path):
    """fixtures/two_node128.neff under `--algo '^ring'`: its all-gather (trigger 0) is left
    no inter_allg engine (MESH, the policy's, is no HIER leg engine, SELECTION.md §6; RING
    excluded), and the way out offered, `'^ring;inter_allg:ring'`, then stopped at the
    reduce-scatter (trigger 2) for its inter_redsct leg (lower's answer, until 2026-12-07).
    Now both legs are forced; lower under the way lowers (rank 0)."""
    from pathlib import Path
    model = Path(__file__).resolve().parents[1] / "fixtures" / "two_node128.neff"
    res = cli("lower", model, "-j", 1, "--rank", 0, "--algo", "^ring", "-o", tmp_path / "r")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "--algo '^ring;inter_allg:ring;inter_redsct:ring' runs the inter_allg and "
        "inter_redsct legs on RING (a leg clause forcing one engine beats an exclusion; the "
        "inter_redsct leg for trigger 2)"), res.stderr
    res = cli("lower", model, "-j", 1, "--rank", 0, "--algo", "^ring;inter_allg:ring",
              "-o", tmp_path / "old")
    assert res.exit_code == 2 and "trigger 2: --algo '^ring;inter_allg:ring' leaves the " \
        "inter_redsct leg no engine" in res.stderr, res.stderr
    res = cli("lower", "-q", model, "-j", 1, "--rank", 0, "--algo",
              "^ring;inter_allg:ring;inter_redsct:ring", "-o", tmp_path / "way")
    assert res.exit_code == 0, res.output


def many_spec(n: int) -> dict:
    """``n`` collectives over GROUP, each a request of its own (its size): bf16 all-reduces
    of 256 + 4k bytes at even ordinals, all-gathers of 258 + 4k input bytes at odd ones;
    under ``--algo '^ring'`` every one is refused (its intra legs left none, as SPEC's)."""
    vars_, ops = [], []
    for i in range(n):
        nb = 256 + 2 * i
        out = nb if i % 2 == 0 else nb * len(GROUP)
        vars_ += [{"name": f"i{i}", "type": "input", "size": nb},
                  {"name": f"o{i}", "type": "output", "size": out}]
        ops.append({"all_reduce": {"dtype": "bf16", "op": "add", "src": f"i{i}",
                                   "dst": f"o{i}", "bytes": nb}} if i % 2 == 0 else
                   {"all_gather": {"dtype": "bf16", "src": f"i{i}", "dst": f"o{i}",
                                   "bytes": nb}})
    return {"header": {"pkg_version": 2, "name": "many", "lnc_size": 2},
            "subgraphs": [{"name": "sg00", "vars": vars_, "replica_groups": [GROUP],
                           "engines": {"sp": ops}}]}


def test_explain_holds_each_way_out_to_the_model_once_not_once_a_refused_trigger(
        tmp_path, monkeypatch):
    """Review 55p: explain held the ways out of every refused request to every trigger of
    the model (select.model_way_out, one call a refused request), each way selecting every
    trigger again: O(triggers^2) selections, 563 s for 1,000 triggers under --algo '^ring'.
    Where a way stops is a matter of its --algo text and the model alone, so it is found once
    a model: the selections grow with the triggers, doubling them at most doubling the
    selections (a + b x triggers), where the square grew them about 3.5 times (10 -> 20 ->
    40 triggers: 170, 540, 1880 selections).  Counted at select.select, which the way-out
    check and the engines' own forced checks call; the line stays lower's."""
    import nrtrewrite.select as select_module
    from nrtrewrite.neff.assembler import assemble_spec
    calls = []
    real = select_module.select
    monkeypatch.setattr(select_module, "select",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    counts = {}
    for n in (10, 20, 40):
        model = tmp_path / f"many{n}.neff"
        model.write_bytes(assemble_spec(many_spec(n)))
        calls.clear()
        res = cli("explain", model, "--topology", "trn2:nodes=2", "--algo", "^ring")
        assert res.exit_code == 2
        assert res.stderr.rstrip().endswith(
            "trigger 0: --algo '^ring' leaves the intra_allg leg no legal engine (its "
            f"engines: RING, KANGARING; KANGARING: {KANGARING_WHY}; RING excluded), nor the "
            "intra_redsct leg any; --algo '^ring;intra_allg:ring;intra_redsct:ring;"
            "inter_allg:ring' runs the intra_allg, intra_redsct and inter_allg legs on RING (a "
            "leg clause forcing one engine beats an exclusion; the inter_allg leg for trigger "
            "1), or --algo '^ring;allreduce:single_cycle_ring;intra_allg:ring;inter_allg:ring' "
            "forces SINGLE_CYCLE_RING over the whole group on ALLREDUCE alone; trigger 1 still "
            "stops under --algo 'single_cycle_ring'"), res.stderr
        counts[n] = len(calls)
    assert counts[20] <= 2 * counts[10] and counts[40] <= 2 * counts[20], counts


def test_a_flat_engine_another_trigger_stops_under_is_offered_on_the_op_alone(tmp_path):
    """Review 55p: a flat engine was offered only as a bare `--algo 'X'`, which forces it on
    the model's other collectives too; where one of them stops under it the engine was
    dropped ("trigger 1 still stops under --algo 'single_cycle_ring'"), though forcing it on
    the refused collective alone lowers: an op's own clause beats the untargeted one
    (SELECTION.md §8).  The 1 MiB all-reduce and 256 B all-gather over 0, 1, 64, 65 under
    `--algo 'allreduce:^ring'`: the all-reduce's intra legs are left none; besides the leg
    clauses, the way forcing SINGLE_CYCLE_RING on ALLREDUCE alone is offered (the user's
    clause for the all-reduce replaced by it).  Each way offered lowers and simulates."""
    from nrtrewrite.neff.assembler import assemble_spec
    model = tmp_path / "mix.neff"
    model.write_bytes(assemble_spec(mixed_spec("all_reduce")))
    res = cli("lower", model, "--topology", "trn2:nodes=2", "-j", 1, "--algo",
              "allreduce:^ring", "-o", tmp_path / "refused")
    assert res.exit_code == 2
    line = res.stderr.rstrip()
    assert line.endswith(
        "trigger 0: --algo 'allreduce:^ring' leaves the intra_allg leg no legal engine (its "
        f"engines: RING, KANGARING; KANGARING: {KANGARING_WHY}; RING excluded), nor the "
        "intra_redsct leg any; --algo 'allreduce:^ring;intra_allg:ring;intra_redsct:ring' "
        "runs the intra_allg and intra_redsct legs on RING (a leg clause forcing one engine "
        "beats an exclusion), or --algo 'allreduce:single_cycle_ring' forces "
        "SINGLE_CYCLE_RING over the whole group on ALLREDUCE alone; trigger 1 still stops "
        "under --algo 'single_cycle_ring'"), line
    lowers_and_simulates(model, tmp_path / "scoped", "allreduce:single_cycle_ring")
    lowers_and_simulates(model, tmp_path / "legs",
                         "allreduce:^ring;intra_allg:ring;intra_redsct:ring")


# -- the way out held to lower's plan of the whole model: the window gate -----------------------

WINDOW = (32 << 30) - (4 << 30)  # SBUF_BASE - DRAM_BASE: the DRAM part of a core's window


def window_spec(room: int) -> dict:
    """SPEC's 1 MiB bf16 all-reduce after a DRAM var filling the core window so that the
    vars (it, x and y) end ``room`` bytes short of it.  Scratch and gateway a trigger needs
    (DESIGN.md "HIER" and the ring's buffers): RING one space (1 MiB) each, 2 MiB;
    SINGLE_CYCLE_RING forced two spaces and two gateway views, 4 MiB; HIER with RING intra
    legs and its SINGLE_CYCLE_RING inter_allr leg four spaces and two views, 6 MiB."""
    spec = copy.deepcopy(SPEC)
    spec["subgraphs"][0]["vars"].insert(
        0, {"name": "fill", "type": "input", "size": WINDOW - 2 * MIB - room})
    return spec


def window_way_out_model(tmp_path, room: int):
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / f"window{room >> 20}.neff"
    path.write_bytes(assemble_spec(window_spec(room)))
    return path


def test_a_way_out_the_core_window_refuses_is_not_offered_but_the_model_named(tmp_path):
    """RELIABILITY §6's fifty-fifth "Left": the ways out were held to each trigger's
    selection, not to lower's plan of the model (the engines' prepare, the SPAD and window
    gates).  3 MiB of room: RING (2 MiB) fits, so the default lowers, but --algo '^ring'
    leaves the intra legs none; its two ways, the leg clauses' HIER (6 MiB: the window gate
    passes it over, and nothing else is allowed but SINGLE_CYCLE_RING, 4 MiB) and
    SINGLE_CYCLE_RING forced (4 MiB), were offered and lower refused each at the window.
    Now neither is offered: the model is named as still stopping under each, one text, with
    why: the window's refusal lower gives under each way (SELECTION.md §8; until 2026-12-07
    "the model" alone, without why: fixer 57d).  The expected answers are the layout's
    rule (vars, then scratch and gateway, DESIGN.md), and lower's under each way."""
    model = window_way_out_model(tmp_path, 3 * MIB)
    topo = ("--topology", "trn2:nodes=2")
    vars_ = WINDOW - 3 * MIB
    ways = (("^ring;intra_allg:ring;intra_redsct:ring", 4 * MIB, 2 * MIB),
            ("single_cycle_ring", 2 * MIB, 2 * MIB))
    why = {way: (f"the model's DRAM vars, scratch and gateway need {vars_ + scratch + gw} "
                 f"bytes per core (vars {vars_}, scratch {scratch}, gateway {gw}), more than "
                 f"the {WINDOW} bytes of the core window below the SBUF window")
           for way, scratch, gw in ways}
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    line = res.stderr.rstrip()
    assert line.endswith(
        "trigger 0: --algo '^ring' leaves the intra_allg leg no legal engine (its engines: "
        f"RING, KANGARING; KANGARING: {KANGARING_WHY}; RING excluded), nor the intra_redsct "
        "leg any; the model still stops under --algo "
        f"'^ring;intra_allg:ring;intra_redsct:ring' ({why[ways[0][0]]}) and "
        f"'single_cycle_ring' ({why['single_cycle_ring']})"), line
    for way, _, _ in ways:
        res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", way,
                  "-o", tmp_path / "way")
        assert res.exit_code == 2, (way, res.output)
        assert res.stderr.rstrip().endswith(why[way]), (way, res.stderr)
    res = cli("explain", model, *topo, "--algo", "^ring", "--json")
    assert res.exit_code == 2 and json.loads(res.stdout)["error"] == \
        line.removeprefix("nrtrewrite: error: ")
    res = cli("lower", "-q", model, *topo, "-j", 1, "--rank", 0, "-o", tmp_path / "default")
    assert res.exit_code == 0, res.output
    # 5 MiB of room: HIER (6 MiB) is past the window, SINGLE_CYCLE_RING (4 MiB) fits, so the
    # leg clauses' HIER is passed over by the window gate for SINGLE_CYCLE_RING (both clauses
    # warned idle): lower under them runs no leg, and lowers what SINGLE_CYCLE_RING forced
    # lowers.  SELECTION.md §8: leg clauses under which lower passes HIER over for an engine
    # that fits are not offered as running legs, and that engine, offered forced, is the one
    # way (until 2026-12-07 the leg clauses' way was offered too, "runs the intra_allg and
    # intra_redsct legs on RING": review V3)
    model = window_way_out_model(tmp_path, 5 * MIB)
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused5")
    assert res.exit_code == 2
    line = res.stderr.rstrip()
    assert line.endswith(
        f"RING, KANGARING; KANGARING: {KANGARING_WHY}; RING excluded), nor the intra_redsct "
        "leg any; --algo may force SINGLE_CYCLE_RING over the whole group"), line
    legs = "^ring;intra_allg:ring;intra_redsct:ring"
    for i, way in enumerate((legs, "single_cycle_ring")):
        res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", way,
                  "-o", tmp_path / f"way{i}")
        assert res.exit_code == 0, (way, res.output)
        idle = [ln for ln in res.stderr.splitlines() if "applies to nothing" in ln]
        assert len(idle) == (2 if way == legs else 0), (way, res.stderr)
        assert [t["algorithm"] for t in json.loads(
            (tmp_path / f"way{i}" / "manifest.json").read_text())["triggers"]] == \
            ["SINGLE_CYCLE_RING"]


def test_a_model_stop_says_its_why_once_where_its_ways_share_it(tmp_path):
    """Fixer 57d (RELIABILITY §6's fifty-sixth "Left": a stop naming no trigger said "the
    model" without why).  The vars alone 1 MiB past the core window: --algo '^ring' is
    refused at the selection first (lower selects before it lays out memory), and both ways
    stop at the layout with one reason, the vars' alone (DESIGN.md: no engine's scratch can
    help), said once after them.  The expected reason: the vars WINDOW + 1 MiB (the fill
    WINDOW - 2 MiB + 1 MiB, x and y 1 MiB each), and lower's under each way."""
    model = window_way_out_model(tmp_path, -MIB)
    topo = ("--topology", "trn2:nodes=2")
    why = (f"the model's DRAM vars need {WINDOW + MIB} bytes per core, more than the "
           f"{WINDOW} bytes of the core window below the SBUF window")
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "nor the intra_redsct leg any; the model still stops under each of --algo "
        f"'^ring;intra_allg:ring;intra_redsct:ring' and 'single_cycle_ring' ({why})"), \
        res.stderr
    for way in ("^ring;intra_allg:ring;intra_redsct:ring", "single_cycle_ring"):
        res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", way,
                  "-o", tmp_path / "way")
        assert res.exit_code == 2 and res.stderr.rstrip().endswith(why), (way, res.stderr)


def test_a_model_stop_naming_a_rank_says_the_rank_with_its_why(tmp_path, monkeypatch):
    """Fixer 58d (RELIABILITY §6's fifty-seventh "Left": a model stop naming a rank had no
    test; it needs 65,536 SPAD entries on a rank).  limits.check_plan: a rank's SPAD entries
    over all its subgraphs' collectives are at most MAX_RANK_SPAD_ENTRIES, lowered to 3 here
    as tests/test_limits.py does to keep the model small, and where only groups of different
    subgraphs sharing the rank add up past it the refusal names the rank, not a trigger.
    SPEC's all-reduce over 0, 1, 64, 65 (sg00, trigger 0) and three 1 KiB all-reduces over
    1, 2 (sg01): each group within 3 (3 entries at most: HIER one a leg, three legs), rank 1
    in both.  Under --algo '^ring' trigger 0's intra legs are left none; under each way
    trigger 0 takes one entry (SINGLE_CYCLE_RING forced; under the leg clauses the rank's
    SPAD gate passes its HIER over, SELECTION.md "The SPAD gate"), so rank 1 needs 1 + 3 =
    4 entries under both: the model is named as still stopping under each, the rank's
    refusal said once, "rank 1: ..." (SELECTION.md §8)."""
    from nrtrewrite import limits
    from nrtrewrite.neff.assembler import assemble_spec
    monkeypatch.setattr(limits, "MAX_RANK_SPAD_ENTRIES", 3)
    spec = copy.deepcopy(SPEC)
    spec["subgraphs"].append({
        "name": "sg01", "replica_groups": [[1, 2]],
        "vars": [{"name": "u", "type": "input", "size": 1024},
                 {"name": "v", "type": "output", "size": 1024}],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "u",
                                           "dst": "v", "bytes": 1024}}] * 3}})
    model = tmp_path / "rank_spad.neff"
    model.write_bytes(assemble_spec(spec))
    topo = ("--topology", "trn2:nodes=2")
    why = ("rank 1: the rank needs 4 SPAD entries over all its subgraphs' collectives, more "
           "than the 3 a u16 spad_index numbers (MAX_RANK_SPAD_ENTRIES)")
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "nor the intra_redsct leg any; the model still stops under each of --algo "
        f"'{LEGS_WAY}' and 'single_cycle_ring' ({why})"), res.stderr
    for way in (LEGS_WAY, "single_cycle_ring"):
        res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", way,
                  "-o", tmp_path / "way")
        assert res.exit_code == 2, (way, res.output)
        assert res.stderr.rstrip() == f"nrtrewrite: error: {model}: {why}", (way, res.stderr)


def test_leg_clauses_the_window_passes_the_refused_trigger_over_are_not_a_second_way(tmp_path):
    """Review V3: a 1 MiB all-reduce and a 1 MiB all-gather over 0, 1, 64, 65, the vars 6 MiB
    short of the core window, under --algo '^ring'.  Under the leg clauses' way the window
    gate passes the all-reduce's HIER over for SINGLE_CYCLE_RING (the all-gather keeps HIER,
    running intra_allg), so the way does for the refused all-reduce what forcing
    SINGLE_CYCLE_RING on ALLREDUCE alone does, and SELECTION.md §8 offers that one alone
    (until 2026-12-07 both, the first said to run the intra_redsct leg, which lower warned
    idle)."""
    from nrtrewrite.neff.assembler import assemble_spec
    room = 6 * MIB
    spec = {"header": {"pkg_version": 2, "name": "w", "lnc_size": 2}, "subgraphs": [{
        "name": "sg00", "replica_groups": [GROUP],
        "vars": [{"name": "fill", "type": "input", "size": WINDOW - 7 * MIB - room},
                 {"name": "x", "type": "input", "size": MIB},
                 {"name": "y", "type": "output", "size": MIB},
                 {"name": "a", "type": "input", "size": MIB},
                 {"name": "b", "type": "output", "size": 4 * MIB}],
        "engines": {"sp": [
            {"all_reduce": {"dtype": "bf16", "op": "add", "src": "x", "dst": "y",
                            "bytes": MIB}},
            {"all_gather": {"dtype": "bf16", "src": "a", "dst": "b", "bytes": MIB}}]}}]}
    model = tmp_path / "win_arag.neff"
    model.write_bytes(assemble_spec(spec))
    topo = ("--topology", "trn2:nodes=2")
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    scoped = "^ring;allreduce:single_cycle_ring;intra_allg:ring;inter_allg:ring"
    assert res.stderr.rstrip().endswith(
        f"nor the intra_redsct leg any; --algo '{scoped}' forces SINGLE_CYCLE_RING over the "
        "whole group on ALLREDUCE alone; trigger 1 still stops under --algo "
        "'single_cycle_ring'"), res.stderr
    for i, way in enumerate(("^ring;intra_allg:ring;intra_redsct:ring;inter_allg:ring",
                             scoped)):
        res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", way,
                  "-o", tmp_path / f"way{i}")
        assert res.exit_code == 0, (way, res.output)
        assert [t["algorithm"] for t in json.loads(
            (tmp_path / f"way{i}" / "manifest.json").read_text())["triggers"]] == \
            ["SINGLE_CYCLE_RING", "HIER"], way


@pytest.mark.parametrize("n,swapped", [(508, False), (509, True)])
def test_a_leg_clause_idle_once_the_spad_passes_hier_over_gives_way_to_the_op_clause(
        tmp_path, n, swapped):
    """The same through the SPAD gate (SELECTION.md "The SPAD gate": a HIER collective one
    entry a leg, 512 a subgraph on a group's ranks).  A 1 KiB all-gather (trigger 0, its
    two legs left none under --algo '^ring') then n 1 KiB all-reduces over GROUP: under the
    leg clauses every one is HIER, 2 + 3n entries; the gate passes the all-reduces' HIER
    over for SINGLE_CYCLE_RING (1 entry each) until they fit.  n = 509: with one all-reduce
    kept HIER 2 + 508 + 3 = 513 > 512, so every one is passed over (2 + 509 = 511) and
    intra_redsct runs no leg: the op clause is offered in its place, and lowers rank 0's
    members byte for byte as the clauses do.  n = 508: 2 + 507 + 3 = 512 fits, one keeps
    HIER and runs intra_redsct: the clause stays."""
    from nrtrewrite.neff.assembler import assemble_spec
    ops = [{"all_gather": {"dtype": "bf16", "src": "a", "dst": "b", "bytes": 1024}}]
    ops += [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "x", "dst": "y",
                            "bytes": 1024}}] * n
    model = tmp_path / f"spad{n}.neff"
    model.write_bytes(assemble_spec({
        "header": {"pkg_version": 2, "name": "s", "lnc_size": 2}, "subgraphs": [{
            "name": "sg00", "replica_groups": [GROUP],
            "vars": [{"name": "a", "type": "input", "size": 1024},
                     {"name": "b", "type": "output", "size": 4096},
                     {"name": "x", "type": "input", "size": 1024},
                     {"name": "y", "type": "output", "size": 1024}],
            "engines": {"sp": ops}}]}))
    topo = ("--topology", "trn2:nodes=2")
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    legs = "^ring;intra_allg:ring;inter_allg:ring;intra_redsct:ring"
    swap = "^ring;allreduce:single_cycle_ring;intra_allg:ring;inter_allg:ring"
    assert res.stderr.rstrip().endswith(
        f"--algo '{swap}' runs the intra_allg and inter_allg legs on RING (a leg clause "
        "forcing one engine beats an exclusion; SINGLE_CYCLE_RING forced on ALLREDUCE for "
        "trigger 1)" if swapped else
        f"--algo '{legs}' runs the intra_allg, inter_allg and intra_redsct legs on RING (a "
        "leg clause forcing one engine beats an exclusion; the intra_redsct leg for trigger "
        "1)"), res.stderr
    if not swapped:
        return
    outs = []
    for way in (legs, swap):
        outs.append(tmp_path / f"way{len(outs)}")
        res = cli("lower", "-q", model, *topo, "-j", 1, "--rank", 0, "--algo", way,
                  "-o", outs[-1])
        assert res.exit_code == 0, res.output
        assert ("applies to nothing" in res.stderr) == (way == legs), res.stderr
    a, b = outs
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file()
                   and p.name != "manifest.json")
    assert files and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_a_way_lower_lowers_the_refused_trigger_otherwise_under_is_said_so(tmp_path):
    """Fixer 57d (RELIABILITY §6's fifty-sixth "Left": "lowers trigger K as X" had no model
    reaching it).  SPEC's 1 MiB all-reduce over 0, 1, 64, 65 (trigger 0) and a 2 MiB one
    over device 1 (4..7, trigger 1), the vars 4 MiB short of the core window, under --algo
    '^ring'.  Trigger 0's intra legs are left none.  SINGLE_CYCLE_RING forced, over the model
    or on ALLREDUCE alone, is forced on trigger 1 too: two spaces of its 2 MiB, 4 MiB of
    scratch, and trigger 0's two 1 MiB gateway views, 6 MiB: past the window.  The leg
    clauses' way: trigger 0's HIER (6 MiB) is passed over by the window gate for
    SINGLE_CYCLE_RING (its 4 MiB fit beside trigger 1's default engine), so lower under it
    lowers trigger 0 as SINGLE_CYCLE_RING, which no other way offers: the way is said so
    (SELECTION.md §8), the bare engine's stop named with why."""
    from nrtrewrite.neff.assembler import assemble_spec
    spec = window_spec(4 * MIB)
    sg = spec["subgraphs"][0]
    sg["replica_groups"].append([4, 5, 6, 7])
    sg["vars"][0]["size"] -= 4 * MIB
    sg["vars"] += [{"name": "a", "type": "input", "size": 2 * MIB},
                   {"name": "b", "type": "output", "size": 2 * MIB}]
    sg["engines"]["sp"].append({"all_reduce": {"dtype": "bf16", "op": "add", "src": "a",
                                               "dst": "b", "bytes": 2 * MIB, "group": 1}})
    model = tmp_path / "outcome.neff"
    model.write_bytes(assemble_spec(spec))
    topo = ("--topology", "trn2:nodes=2")
    vars_ = WINDOW - 4 * MIB
    why = (f"the model's DRAM vars, scratch and gateway need {vars_ + 6 * MIB} bytes per "
           f"core (vars {vars_}, scratch {4 * MIB}, gateway {2 * MIB}), more than the "
           f"{WINDOW} bytes of the core window below the SBUF window")
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        f"nor the intra_redsct leg any; --algo '{LEGS_WAY}' lowers trigger 0 as "
        f"SINGLE_CYCLE_RING; the model still stops under --algo 'single_cycle_ring' ({why})"), \
        res.stderr
    for way in ("single_cycle_ring", "allreduce:single_cycle_ring"):
        res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", way,
                  "-o", tmp_path / "way")
        assert res.exit_code == 2 and res.stderr.rstrip().endswith(why), (way, res.stderr)
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--rank", 4, "--algo", LEGS_WAY,
              "-o", tmp_path / "legs")
    assert res.exit_code == 0, res.output
    # (both clauses idle, warned: no clause targets one collective, and the engine forced
    # on ALLREDUCE in their place stops above; SELECTION.md §8, fixer 58d)
    assert [ln.partition("--algo clause ")[2].partition(" ")[0] for ln in
            res.stderr.splitlines() if "applies to nothing" in ln] == \
        ["'intra_allg:ring'", "'intra_redsct:ring'"], res.stderr
    algs = [t["algorithm"] for t in json.loads(
        (tmp_path / "legs" / "manifest.json").read_text())["triggers"]]
    assert algs[0] == "SINGLE_CYCLE_RING" and algs[1] not in ("HIER", "SINGLE_CYCLE_RING")


def two_ops_window_spec(first: str, room: int) -> dict:
    """A 1 MiB bf16 ``first`` (all_gather or reduce_scatter) then a 1 MiB bf16 all-reduce
    over GROUP, after a DRAM var filling the core window so that the vars end ``room`` bytes
    short of it."""
    out = {"all_gather": 4 * MIB, "reduce_scatter": MIB // 4}[first]
    head = {"dtype": "bf16", "src": "a", "dst": "b", "bytes": MIB}
    if first == "reduce_scatter":
        head["op"] = "add"
    return {"header": {"pkg_version": 2, "name": "w", "lnc_size": 2}, "subgraphs": [{
        "name": "sg00", "replica_groups": [GROUP],
        "vars": [{"name": "fill", "type": "input", "size": WINDOW - 3 * MIB - out - room},
                 {"name": "a", "type": "input", "size": MIB},
                 {"name": "b", "type": "output", "size": out},
                 {"name": "x", "type": "input", "size": MIB},
                 {"name": "y", "type": "output", "size": MIB}],
        "engines": {"sp": [
            {first: head},
            {"all_reduce": {"dtype": "bf16", "op": "add", "src": "x", "dst": "y",
                            "bytes": MIB}}]}}]}


@pytest.mark.parametrize("name,first,room,legs,idle", [
    ("agar6", "all_gather", 6 * MIB, "intra_allg:ring;inter_allg:ring", "intra_redsct"),
    ("win_rs_5", "reduce_scatter", 5 * MIB, "intra_redsct:ring;inter_redsct:ring",
     "intra_allg"),
])
def test_a_leg_clause_idle_once_the_window_passes_hier_over_gives_way_to_the_op_clause(
        tmp_path, name, first, room, legs, idle):
    """Fixer 57d (RELIABILITY §6's fifty-sixth "Left": review 56s's agar6 and win_rs_5).
    Under --algo '^ring' the first collective's two legs are left none; forcing them RING,
    the all-reduce (trigger 1) is then left its intra legs, so a third leg clause is forced
    "for trigger 1" (the first selection pass needs it).  The vars leave too little room for
    both HIERs: the window gate passes the all-reduce's HIER over for SINGLE_CYCLE_RING
    (the next engine ^ring leaves it), so the third clause runs no leg and lower under the
    way warned it applies to nothing; the way was offered so, said idle.  SELECTION.md §8:
    the engine the all-reduce is lowered as is forced on ALLREDUCE in the clause's place
    (the user's clauses, then the op's, then the legs', as a way on an op alone is written),
    offered instead where lower under it lowers every trigger alike: the same rank members,
    byte for byte, as the clause-bearing way (only the manifest, which records --algo,
    differs), and no warning."""
    from nrtrewrite.neff.assembler import assemble_spec
    model = tmp_path / f"{name}.neff"
    model.write_bytes(assemble_spec(two_ops_window_spec(first, room)))
    topo = ("--topology", "trn2:nodes=2")
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    swap = f"^ring;allreduce:single_cycle_ring;{legs}"
    head, tail = legs.split(";")
    assert res.stderr.rstrip().endswith(
        f"any; --algo '{swap}' runs the {head.partition(':')[0]} and "
        f"{tail.partition(':')[0]} legs on RING (a leg clause forcing one engine beats an "
        "exclusion; SINGLE_CYCLE_RING forced on ALLREDUCE for trigger 1)"), res.stderr
    ranks = [a for r in (0, 1, 64, 65) for a in ("--rank", r)]
    outs = {}
    for way in (f"^ring;{legs};{idle}:ring", swap):
        out = outs[way] = tmp_path / f"way{len(outs)}"
        res = cli("lower", model, *topo, "-j", 1, *ranks, "--algo", way, "-o", out)
        assert res.exit_code == 0, (way, res.output)
        warned = [ln for ln in res.stderr.splitlines() if "applies to nothing" in ln]
        assert warned == ([] if way == swap else [
            f"nrtrewrite: warning: {model}: --algo clause '{idle}:ring' applies to nothing "
            f"in this model: no collective is lowered as HIER with an {idle} leg"]), res.stderr
        assert [t["algorithm"] for t in json.loads(
            (out / "manifest.json").read_text())["triggers"]] == ["HIER", "SINGLE_CYCLE_RING"]
    a, b = outs.values()
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file()
                   and p.name != "manifest.json")
    assert files and files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()
                                     and p.name != "manifest.json")
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_a_way_out_the_spad_refuses_is_not_offered_but_the_trigger_named(tmp_path):
    """The same for the SPAD (limits.check_plan: a subgraph's collectives on one group take
    one CTRL SPAD entry each on its ranks, a HIER one one a leg, at most 512; SELECTION.md
    "The SPAD gate", which does not look at a group of more than 512).  many_spec(520) under
    --algo '^ring' (review 55p's model, 520 collectives): the leg clauses' way runs every
    collective as HIER, 3 entries an all-reduce (even ordinals) and 2 an all-gather, so the
    count first passes 512 at trigger 204 (103 x 3 + 102 x 2 = 513; 260 x 5 = 1300 in all);
    the way forcing SINGLE_CYCLE_RING on ALLREDUCE alone takes 1 an all-reduce, so at trigger
    341 (171 + 171 x 2 = 513; 260 x 3 = 780).  Both were offered, and lower refused each
    there; now the leg clauses' way is named stopping at trigger 204, and the scoped way is not
    offered (the bare engine's stop at trigger 1 is named, as before)."""
    from nrtrewrite.neff.assembler import assemble_spec
    model = tmp_path / "many520.neff"
    model.write_bytes(assemble_spec(many_spec(520)))
    topo = ("--topology", "trn2:nodes=2")
    legs = "^ring;intra_allg:ring;intra_redsct:ring;inter_allg:ring"
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    line = res.stderr.rstrip()
    assert line.endswith(
        "nor the intra_redsct leg any; trigger 204 still stops under --algo "
        f"'{legs}'; trigger 1 still stops under --algo 'single_cycle_ring'"), line
    for way, k, need in ((legs, 204, 1300),
                         ("^ring;allreduce:single_cycle_ring;intra_allg:ring;inter_allg:ring",
                          341, 780)):
        res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", way,
                  "-o", tmp_path / "way")
        assert res.exit_code == 2, (way, res.output)
        assert res.stderr.rstrip().endswith(
            f"trigger {k}: 520 collectives on replica group 0,1,64,65 need {need} SPAD entries "
            "on each of its ranks; the 4096-byte TOP_SP CTRL SPAD holds 512 per subgraph"), \
            (way, res.stderr)
    res = cli("explain", model, *topo, "--algo", "^ring", "--json")
    assert res.exit_code == 2 and json.loads(res.stdout)["error"] == \
        line.removeprefix("nrtrewrite: error: ")


def test_a_way_out_its_engines_prepare_refuses_is_not_offered_but_the_trigger_named(
        model, tmp_path, monkeypatch):
    """The same for an engine's ``prepare`` (lower.prepare_trigger), which the selection does
    not run for DRAM operands (the BD gate composes no HIER of DRAM operands, SELECTION.md
    §3): a HIER trigger's legs take a channel id range each, one at least, so an all-reduce's
    three legs need 3 (compose/hier.py MAX_CHANNEL_IDS, lowered to 1 here as
    tests/test_limits.py does to reach its refusal).  SPEC under --algo '^ring': the leg
    clauses' way was offered, and lower under it refused trigger 0 at prepare; now that way is
    named as trigger 0 still stopping under it, and SINGLE_CYCLE_RING forced, which lowers, is
    offered alone."""
    from nrtrewrite.compose import hier
    monkeypatch.setattr(hier, "MAX_CHANNEL_IDS", 1)
    topo = ("--topology", "trn2:nodes=2")
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo", "^ring",
              "-o", tmp_path / "refused")
    assert res.exit_code == 2
    line = res.stderr.rstrip()
    assert line.endswith(
        "nor the intra_redsct leg any; --algo may force SINGLE_CYCLE_RING over the whole "
        "group; trigger 0 still stops under --algo '^ring;intra_allg:ring;intra_redsct:ring'"
    ), line
    res = cli("lower", model, *topo, "-j", 1, "--rank", 0, "--algo",
              "^ring;intra_allg:ring;intra_redsct:ring", "-o", tmp_path / "legs")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "trigger 0: HIER legs need 3 channel ids, at most 1"), res.stderr
    res = cli("lower", "-q", model, *topo, "-j", 1, "--rank", 0, "--algo",
              "single_cycle_ring", "-o", tmp_path / "flat")
    assert res.exit_code == 0, res.output
