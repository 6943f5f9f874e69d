"""Selection defects a review (49k) found against docs/SELECTION.md as an oracle: an
``--algo`` allow-list's engines outside the precedence (§8), the "1 rank" of a selection
error, and what ``Selection.n_channels`` holds for SINGLE_CYCLE_RING (§7, §9).  Every
expected value is worked out from SELECTION.md's rules and reason words."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.codes import DType, EncAlgType, EncOpType
from nrtrewrite.errors import SelectionError
from nrtrewrite.select import Request, parse_algo_override, select
from nrtrewrite.topology import load_topology

AR = EncOpType.ALLREDUCE
SSM = EncAlgType.SINGLE_STEP_MESH
T1N = load_topology("trn2", world=(), lnc_size=2)          # 64 ranks, 4 a device
T4N = load_topology("trn2:nodes=4", world=(), lnc_size=2)  # 256 ranks
SIXTEEN = tuple(range(16))  # four whole devices of node 0


def sel(algo, group=SIXTEEN, nbytes=2048, topo=T1N, op=AR):
    return select(Request.for_op(op, DType.BF16, group, nbytes), topo,
                  override=parse_algo_override(algo) if algo else None)


def run(*args):
    return CliRunner().invoke(main, list(args), env={}, catch_exceptions=False,
                              terminal_width=200)


# -- 1. an allow-list's engines outside the precedence are candidates (§8) ---------------

def test_allow_list_takes_single_step_mesh_when_it_is_the_only_legal_engine():
    """2 KiB over 16 ranks of a node: INTER_RDH is inter-node only (§3), SINGLE_STEP_MESH
    legal ((16 - 1) x 2 KiB fits 8 MiB): the allowed cascade is INTER_RDH, then the
    allow-list's engine outside the precedence; INTER_RDH is named as not taken."""
    s = sel("single_step_mesh,inter_rdh")
    assert s.policy_alg == s.alg == SSM and s.fallback_reason is None
    assert s.reason.startswith(
        "SINGLE_STEP_MESH: first legal engine of INTER_RDH > SINGLE_STEP_MESH under the "
        "override 'single_step_mesh,inter_rdh' for intra-node ALLREDUCE 2 KiB (")
    assert s.reason.endswith("; INTER_RDH not taken: INTER_RDH is inter-node only (group "
                             "lies within one node)")
    assert s.n_channels == 1  # §7: mesh-family engines use one channel


def test_allow_list_of_engines_outside_the_precedence_is_not_every_engine_excluded():
    """Nothing is excluded by `single_step_mesh,two_step_pod_mesh`: SINGLE_STEP_MESH, legal,
    is taken; two engines never legal here (§3: no pods, no NeuronSwitch) are an error that
    names each one's refusal, not `every engine excluded`."""
    s = sel("single_step_mesh,two_step_pod_mesh")
    assert s.alg == SSM
    assert s.reason.startswith("SINGLE_STEP_MESH: first legal engine of SINGLE_STEP_MESH > "
                               "TWO_STEP_POD_MESH under the override")
    with pytest.raises(SelectionError) as err:
        sel("two_step_pod_mesh,bw_opt_mesh")
    why = str(err.value)
    assert "excluded" not in why
    assert "can_post_two_step_pod_mesh: needs an UltraServer pod" in why
    assert "can_post_bw_opt_mesh: BW_OPT_MESH needs a NeuronSwitch fabric" in why


def test_allow_list_engine_outside_the_precedence_is_taken_inside_its_window_first():
    """`single_step_mesh,kangaring` on 2 KiB: KANGARING is legal but below its 56 MiB window
    (§4), SINGLE_STEP_MESH has no window: the first pass (inside the window) takes it, and
    the reason says why KANGARING was not."""
    s = sel("single_step_mesh,kangaring")
    assert s.alg == SSM
    assert s.reason.startswith("SINGLE_STEP_MESH: first legal engine of KANGARING > "
                               "SINGLE_STEP_MESH under the override")
    assert s.reason.endswith("; KANGARING not taken: 2 KiB below op_min_limit[ALLREDUCE] "
                             "56 MiB")


def test_allow_list_names_its_engine_outside_the_precedence_in_the_cascade():
    """`bw_opt_mesh,ring`: RING wins (always legal), the cascade it ran is RING, then
    BW_OPT_MESH (after the precedence's engines)."""
    s = sel("bw_opt_mesh,ring")
    assert s.alg == EncAlgType.RING
    assert s.reason.startswith("RING: first legal engine of RING > BW_OPT_MESH under the "
                               "override 'bw_opt_mesh,ring'")


def test_an_exclusion_brings_no_engine_outside_the_precedence_into_the_cascade():
    """An exclusion of the seven precedence engines leaves the cascade empty although
    SINGLE_STEP_MESH is legal here: only an allow-list names it in (§8); an exclusion naming
    SINGLE_STEP_MESH too leaves it out, it does not allow it."""
    every = "^hier,intra_rdh,mesh,kangaring,single_cycle_ring,inter_rdh,ring"
    with pytest.raises(SelectionError, match=r"\(every engine of the cascade excluded\)$"):
        sel(every)
    # (review 49q) an exclusion that also names SINGLE_STEP_MESH, legal on 2 KiB over 4
    # ranks of a device: still no engine, not SINGLE_STEP_MESH brought back by the exclusion
    four = tuple(range(4))
    assert sel(None, group=four).candidate(SSM).legal
    with pytest.raises(SelectionError) as err:
        sel(every + ",single_step_mesh", group=four)
    assert str(err.value) == (
        "trigger 0: no legal engine for ALLREDUCE over 4 ranks under --algo "
        f"'{every},single_step_mesh' (every engine of the cascade excluded)")


def test_no_override_never_selects_single_step_mesh():
    """§3: SINGLE_STEP_MESH is not in the cascade; where it is legal the default picks
    MESH (below 1 MiB) or INTRA_RDH."""
    for nbytes in (2, 2048, 64 * 1024):
        s = sel(None, nbytes=nbytes)
        assert s.candidate(SSM).legal and s.alg == EncAlgType.MESH


SSM16 = {
    "header": {"name": "ssm16", "lnc_size": 2},
    "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 2048},
                 {"name": "o", "type": "output", "size": 2048}],
        "replica_groups": [list(range(16))],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "i",
                                           "dst": "o", "num_elements": 1024}}]},
    }],
}


def test_explain_and_lower_agree_on_an_allow_list_engine_outside_the_precedence(tmp_path):
    assembler = pytest.importorskip("nrtrewrite.neff.assembler")
    model = tmp_path / "ssm16.neff"
    model.write_bytes(assembler.assemble_spec(SSM16))
    algo = "single_step_mesh,inter_rdh"
    low = run("lower", str(model), "--rank", "0", "--algo", algo, "-o", str(tmp_path / "o"),
              "--quiet")
    assert low.exit_code == 0, low.stderr
    man = json.loads((tmp_path / "o" / "manifest.json").read_text())
    exp = run("explain", str(model), "--algo", algo, "--json")
    assert exp.exit_code == 0, exp.stderr
    rec = json.loads(exp.output)["triggers"][0]
    assert rec["lowered"]["algorithm"] == "SINGLE_STEP_MESH"
    assert [t["algorithm"] for t in man["triggers"]] == ["SINGLE_STEP_MESH"]
    cli = run("explain", "--op", "allreduce", "--bytes", "2KiB", "--ranks", "16",
              "--algo", algo, "--json")
    assert cli.exit_code == 0, cli.stderr
    assert json.loads(cli.output)["triggers"][0]["lowered"]["algorithm"] == "SINGLE_STEP_MESH"


# -- 2. a group of one rank is "1 rank" in the selection error ---------------------------

@pytest.mark.parametrize("args", [
    ("--op", "alltoall", "--bytes", "2", "--ranks", "1", "--json"),
    ("--op", "allreduce", "--bytes", "2", "--ranks", "1", "--algo", "^ring,single_cycle_ring"),
])
def test_no_legal_engine_over_one_rank_says_one_rank(args):
    res = run("explain", *args)
    text = res.output + res.stderr
    assert " over 1 rank (" in text or " over 1 rank under " in text, text
    assert "1 ranks" not in text


# -- 4. Selection.n_channels of SINGLE_CYCLE_RING is what lower runs (§7, §9) -------------

def test_single_cycle_ring_n_channels_counts_both_rings_of_its_pair():
    """One rank on each of four trn2 nodes, 64 KiB bf16: the rule gives 64 KiB / 256 KiB ->
    1 channel, so max(1, 1 / 2) = 1 pair, its ring forward and backward: 2 channels (§7), as
    explain's channels.count shows; it was 1."""
    group = (0, 64, 128, 192)
    s = select(Request.for_op(AR, DType.BF16, group, 65536), T4N)
    assert s.alg == EncAlgType.SINGLE_CYCLE_RING
    assert s.n_channels == 2
    assert s.channel_reason.endswith("1 channel pair(s), each ring forward and backward: 2 "
                                     "channel(s)")
    res = run("explain", "--op", "allreduce", "--bytes", "64KiB", "--group", "0,64,128,192",
              "--nodes", "4", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.output)["triggers"][0]["channels"]["count"] == s.n_channels


def test_single_cycle_ring_n_channels_over_a_whole_node_is_twice_its_pairs():
    """--algo single_cycle_ring on 1 MiB bf16 over a whole trn2 node: 1 MiB / 256 KiB -> 4,
    no cap below it (4 intra, 4 distinct rings, 524288 / (64 x 64) = 128), so 2 pairs, 4
    channels; 512 KiB -> 2: 1 pair, 2 channels; 256 KiB -> 1: 1 pair, 2 channels."""
    scr = parse_algo_override("single_cycle_ring")
    for nbytes, want in ((1 << 20, 4), (1 << 19, 2), (1 << 18, 2)):
        s = select(Request.for_op(AR, DType.BF16, tuple(range(64)), nbytes), T1N, override=scr)
        assert s.n_channels == want, (nbytes, s.n_channels, s.channel_reason)
