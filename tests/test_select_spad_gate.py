"""The SPAD gate (docs/SELECTION.md "The SPAD gate"): an engine-dependent refusal later in
``lower`` that the selection did not see (RELIABILITY §6, the fifty-third session's "Left").
A subgraph's collectives on one replica group take one CTRL SPAD entry each, a HIER one
one a leg (three for an all-reduce: intra_redsct, inter_allr, intra_allg, SELECTION.md §5);
the 4096-byte SPAD of 8-byte entries holds 512 (limits.check_plan).  171 small bf16
all-reduces over ranks 0, 1, 64, 65 of trn2:nodes=2 default to HIER (2 nodes x 2 ranks):
171 x 3 = 513 entries, so ``lower`` refused the model while ``--algo ring`` (171 entries)
lowered it.  HIER is now passed over on the last triggers until the group fits:
170 x 3 + 1 = 511 <= 512, the last trigger RING (the cascade's next engine inside its
window: SINGLE_CYCLE_RING needs one rank a node).  Expected values are the hand count above
and ``lower`` forced (``--algo hier`` refused in check_plan's words, ``--algo ring`` lowered)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.reader import read_model

GROUP = [0, 1, 64, 65]
TOPO = "trn2:nodes=2"
WHY = ("171 collectives on replica group 0,1,64,65 need 513 SPAD entries on each of its "
       "ranks, HIER taking one a leg; the 4096-byte TOP_SP CTRL SPAD holds 512 per subgraph")


def spec(n: int) -> dict:
    ar = {"all_reduce": {"dtype": "bf16", "op": "add", "src": "x", "dst": "y", "bytes": 4096}}
    return {"header": {"pkg_version": 2, "name": f"spad{n}", "lnc_size": 2},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "x", "type": "input", "size": 4096},
                                    {"name": "y", "type": "output", "size": 4096}],
                           "replica_groups": [GROUP],
                           "engines": {"sp": [ar] * n}}]}


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], env={}, catch_exceptions=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from nrtrewrite.neff.assembler import assemble_spec
    d = tmp_path_factory.mktemp("spad")
    out = {}
    for n in (170, 171):
        out[n] = d / f"spad{n}.neff"
        out[n].write_bytes(assemble_spec(spec(n)))
    return out


def algorithms(out) -> list[str]:
    return [t["algorithm"] for t in json.loads((out / "manifest.json").read_text())["triggers"]]


def test_lower_forced_hier_is_refused_and_forced_ring_lowers(models, tmp_path):
    """What the gate stands for, from lower forced: HIER's 513 entries refused, RING's fit."""
    res = cli("lower", models[171], "--topology", TOPO, "--algo", "hier", "-o", tmp_path / "h")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "trigger 170: 171 collectives on replica group 0,1,64,65 need 513 SPAD entries on each "
        "of its ranks; the 4096-byte TOP_SP CTRL SPAD holds 512 per subgraph")
    assert cli("lower", "-q", models[171], "--topology", TOPO, "--algo", "ring",
               "-o", tmp_path / "r").exit_code == 0


def test_the_default_passes_hier_over_on_the_last_trigger_so_the_spad_fits(models, tmp_path):
    """The default lowers (it was refused): 170 HIER, the last RING; the output simulates;
    170 triggers (510 entries) stay HIER every one."""
    out = tmp_path / "d"
    res = cli("lower", "-q", models[171], "--topology", TOPO, "-o", out)
    assert res.exit_code == 0, res.output
    assert algorithms(out) == ["HIER"] * 170 + ["RING"]
    assert cli("simulate", out).exit_code == 0
    res = cli("lower", "-q", models[170], "--topology", TOPO, "-o", tmp_path / "e")
    assert res.exit_code == 0, res.output
    assert algorithms(tmp_path / "e") == ["HIER"] * 170


def test_explain_and_schedule_select_as_lower_does(models):
    """explain names the gate in the policy's reason, in the BD gate's words for an engine
    lower refuses; schedule --trigger 170 (which plans that trigger alone) takes RING too."""
    res = cli("explain", models[171], "--topology", TOPO, "--trigger", 169, "--trigger", 170,
              "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    got = {t["trigger"]: t for t in doc["triggers"]}
    assert got[169]["lowered"]["algorithm"] == "HIER"
    assert got[170]["lowered"]["algorithm"] == "RING"
    assert f"; HIER not taken: policy gate: lower refuses it: {WHY};" in \
        got[170]["policy"]["reason"]
    plan = plan_lowering(read_model(models[171]), LowerOptions(topology=TOPO), only={170})
    assert [p.selection.alg.name for p in plan.triggers] == ["RING"]


def test_an_allow_list_leaving_nothing_else_is_refused_in_the_bd_gates_shape(models, tmp_path):
    """Under --algo 'hier,mesh' (MESH not legal on 2 ranks a node) nothing else is allowed:
    the default's refusal for an engine lower refuses, naming the engines --algo may force
    (not HIER, which lower refuses forced too)."""
    res = cli("lower", models[171], "--topology", TOPO, "--algo", "hier,mesh",
              "-o", tmp_path / "m")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "trigger 170: no engine the default selection may take under --algo 'hier,mesh' can "
        f"be lowered: HIER lower refuses it: {WHY} (--algo may force SINGLE_CYCLE_RING or "
        "RING, whose legs fit)")


# -- the window gate: HIER's larger scratch past the core window ------------------------------

MIB = 1 << 20
WINDOW = (32 << 30) - (4 << 30)  # SBUF_BASE - DRAM_BASE: the DRAM part of a core's window


def window_spec(fill_short: int = 7 * MIB) -> dict:
    """A 1 MiB bf16 all-reduce over 0, 1, 64, 65 after a DRAM var filling the window but
    7 MiB: the vars end 5 MiB short of it. RING needs 1 MiB of scratch (the received
    partials) and a 1 MiB gateway: fits. HIER, whose 512 KiB inter_allr leg is
    SINGLE_CYCLE_RING (inside [0, 4 MiB), one rank a node), needs 4 x 1 MiB of scratch and a
    2 x 1 MiB gateway (DESIGN.md "HIER"): 1 MiB past the window."""
    ar = {"all_reduce": {"dtype": "bf16", "op": "add", "src": "x", "dst": "y", "bytes": MIB}}
    return {"header": {"pkg_version": 2, "name": "window", "lnc_size": 2},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "fill", "type": "input", "size": WINDOW - fill_short},
                                    {"name": "x", "type": "input", "size": MIB},
                                    {"name": "y", "type": "output", "size": MIB}],
                           "replica_groups": [GROUP],
                           "engines": {"sp": [ar]}}]}


@pytest.fixture(scope="module")
def window_model(tmp_path_factory):
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path_factory.mktemp("window") / "window.neff"
    path.write_bytes(assemble_spec(window_spec()))
    return path


def test_the_default_passes_hier_over_where_its_scratch_passes_the_core_window(
        window_model, tmp_path):
    """lower forced: HIER refused at the window (the counts above), RING lowered; the
    default, which took HIER and was refused, now takes RING, and explain says why."""
    res = cli("lower", window_model, "--topology", TOPO, "--algo", "hier", "-o", tmp_path / "h")
    assert res.exit_code == 2
    why = (f"the model's DRAM vars, scratch and gateway need {WINDOW + MIB} bytes per core "
           f"(vars {WINDOW - 5 * MIB}, scratch {4 * MIB}, gateway {2 * MIB}), more than the "
           f"{WINDOW} bytes of the core window below the SBUF window")
    assert res.stderr.rstrip().endswith(why), res.stderr
    assert cli("lower", "-q", window_model, "--topology", TOPO, "--algo", "ring", "--rank", 0,
               "-o", tmp_path / "r").exit_code == 0
    out = tmp_path / "d"
    res = cli("lower", "-q", window_model, "--topology", TOPO, "--rank", 0, "-o", out)
    assert res.exit_code == 0, res.output
    assert algorithms(out) == ["RING"]
    # (the same rank artifacts, byte for byte, as lower forced to RING: the layout is RING's)
    forced = sorted(p.name for p in (tmp_path / "r" / "rank-0000").iterdir())
    assert sorted(p.name for p in (out / "rank-0000").iterdir()) == forced
    for name in forced:
        assert (out / "rank-0000" / name).read_bytes() == \
            (tmp_path / "r" / "rank-0000" / name).read_bytes(), name
    res = cli("explain", window_model, "--topology", TOPO, "--json")
    t, = json.loads(res.output)["triggers"]
    assert t["lowered"]["algorithm"] == "RING"
    assert f"; HIER not taken: policy gate: lower refuses it: {why};" in t["policy"]["reason"]


def test_a_leg_clause_the_window_gate_leaves_idle_is_warned_by_lower_as_by_explain(tmp_path):
    """Review 54r: the window gate passes HIER over (above), so ``--algo inter_allr:ring``
    governs no HIER leg of what is lowered: ``explain`` warned that it applies to nothing
    (SELECTION.md: every command warns where no collective is lowered as HIER with that leg),
    ``lower`` and ``schedule`` did not (their warnings came from the selections before the
    gate).  Here the vars end 3 MiB short of the window: HIER passes it with its inter_allr
    leg on RING too (the clause's), RING's 1 MiB of scratch and 1 MiB gateway fit."""
    from nrtrewrite.neff.assembler import assemble_spec
    model = tmp_path / "w.neff"
    model.write_bytes(assemble_spec(window_spec(5 * MIB)))
    said = ("--algo clause 'inter_allr:ring' applies to nothing in this model: no collective "
            "is lowered as HIER with an inter_allr leg")
    out = tmp_path / "o"
    res = cli("lower", "-q", model, "--topology", TOPO, "--rank", 0, "--algo",
              "inter_allr:ring", "-o", out)
    assert res.exit_code == 0, res.output
    assert algorithms(out) == ["RING"]
    for args in (["lower", "-q", model, "--topology", TOPO, "--rank", 0, "--algo",
                  "inter_allr:ring", "-o", tmp_path / "o2"],
                 ["schedule", model, "--topology", TOPO, "--rank", 0, "--algo",
                  "inter_allr:ring"],
                 ["explain", model, "--topology", TOPO, "--algo", "inter_allr:ring"]):
        res = cli(*args)
        assert res.exit_code == 0, res.output
        assert said in res.stderr, (args[0], res.stderr)


# -- the u16 spad_index over all subgraphs ------------------------------------------------------

def subgraphs_spec(groups: list[list[int]], per: int) -> dict:
    """One subgraph a group of ``groups``, each of ``per`` small bf16 all-reduces over it."""
    ar = {"all_reduce": {"dtype": "bf16", "op": "add", "src": "x", "dst": "y", "bytes": 4096}}
    return {"header": {"pkg_version": 2, "name": "u16", "lnc_size": 2},
            "subgraphs": [{"name": f"sg{i:02d}",
                           "vars": [{"name": "x", "type": "input", "size": 4096},
                                    {"name": "y", "type": "output", "size": 4096}],
                           "replica_groups": [g],
                           "engines": {"sp": [ar] * per}} for i, g in enumerate(groups)]}


def test_the_default_passes_hier_over_so_a_ranks_spad_index_fits(tmp_path, monkeypatch):
    """RELIABILITY §6's "Left": the SPAD gate did not pass HIER over for the u16
    ``spad_index`` over all subgraphs (MAX_RANK_SPAD_ENTRIES, 65,536).  Unpatched, 129
    subgraphs of 170 HIER all-reduces over 0, 1, 64, 65 (21,930 triggers, 129 x 510 = 65,790
    entries) are refused by ``lower`` while ``--algo ring`` (21,930 entries) lowers them; the
    gate passes HIER over on the last (65,790 - 65,536) / 2 = 127.  That model takes half a
    minute to lower a rank, so the limit is lowered here to 20: two subgraphs of four HIER
    all-reduces need 2 x 4 x 3 = 24 entries a rank, (24 - 20) / 2 = 2 passed over, the last
    two (sg01's), 6 x 3 + 2 = 20; each subgraph's 12 stay under its 512."""
    from nrtrewrite import limits
    from nrtrewrite.neff.assembler import assemble_spec
    monkeypatch.setattr(limits, "MAX_RANK_SPAD_ENTRIES", 20)
    model = tmp_path / "u16.neff"
    model.write_bytes(assemble_spec(subgraphs_spec([GROUP, GROUP], 4)))
    # (forced: refused at trigger 6, whose entries are the 19th to 21st)
    res = cli("lower", model, "--topology", TOPO, "-j", 1, "--algo", "hier",
              "-o", tmp_path / "h")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "trigger 6: the collectives of replica group 0,1,64,65 need 24 SPAD entries on each of "
        "its ranks over all subgraphs, more than the 20 a u16 spad_index numbers "
        "(MAX_RANK_SPAD_ENTRIES)"), res.stderr
    assert cli("lower", "-q", model, "--topology", TOPO, "-j", 1, "--algo", "ring",
               "-o", tmp_path / "r").exit_code == 0
    out = tmp_path / "d"
    res = cli("lower", "-q", model, "--topology", TOPO, "-j", 1, "-o", out)
    assert res.exit_code == 0, res.output
    assert algorithms(out) == ["HIER"] * 6 + ["RING"] * 2
    assert cli("simulate", out).exit_code == 0
    why = ("the collectives of replica group 0,1,64,65 need 24 SPAD entries on each of its "
           "ranks over all subgraphs, HIER taking one a leg; more than the 20 a u16 "
           "spad_index numbers (MAX_RANK_SPAD_ENTRIES)")
    res = cli("explain", model, "--topology", TOPO, "--json")
    got = [t["lowered"]["algorithm"] for t in json.loads(res.output)["triggers"]]
    assert got == ["HIER"] * 6 + ["RING"] * 2
    assert f"; HIER not taken: policy gate: lower refuses it: {why};" in \
        json.loads(res.output)["triggers"][7]["policy"]["reason"]
    plan = plan_lowering(read_model(model), LowerOptions(topology=TOPO), only={7})
    assert [p.selection.alg.name for p in plan.triggers] == ["RING"]


def test_groups_of_two_subgraphs_sharing_ranks_pass_hier_over_for_the_rank(
        tmp_path, monkeypatch):
    """Groups of different subgraphs sharing ranks add up on the ranks they share
    (limits.check_plan): 3 HIER all-reduces over 0, 1, 64, 65 (9 entries) and 3 over
    0, 1, 2, 3, 64, 65, 66, 67 (2 nodes x 4 ranks: HIER, 9 entries) are 18 on rank 0, each
    group under the limit of 16; (18 - 16) / 2 = 1 passed over, the last trigger."""
    from nrtrewrite import limits
    from nrtrewrite.neff.assembler import assemble_spec
    monkeypatch.setattr(limits, "MAX_RANK_SPAD_ENTRIES", 16)
    model = tmp_path / "u16.neff"
    model.write_bytes(assemble_spec(subgraphs_spec([GROUP, [0, 1, 2, 3, 64, 65, 66, 67]], 3)))
    res = cli("lower", model, "--topology", TOPO, "-j", 1, "--algo", "hier",
              "-o", tmp_path / "h")
    assert res.exit_code == 2
    assert res.stderr.rstrip().endswith(
        "rank 0: the rank needs 18 SPAD entries over all its subgraphs' collectives, more than "
        "the 16 a u16 spad_index numbers (MAX_RANK_SPAD_ENTRIES)"), res.stderr
    out = tmp_path / "d"
    res = cli("lower", "-q", model, "--topology", TOPO, "-j", 1, "-o", out)
    assert res.exit_code == 0, res.output
    assert algorithms(out) == ["HIER"] * 5 + ["RING"]
    res = cli("explain", model, "--topology", TOPO, "--json", "--trigger", 5)
    t, = json.loads(res.output)["triggers"]
    assert t["lowered"]["algorithm"] == "RING"
    assert ("HIER not taken: policy gate: lower refuses it: rank 0 needs 18 SPAD entries over "
            "all its subgraphs' collectives, HIER taking one a leg; more than the 16 a u16 "
            "spad_index numbers (MAX_RANK_SPAD_ENTRIES);") in t["policy"]["reason"]
