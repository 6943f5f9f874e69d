"""Selection leftovers a review (49q) found against docs/SELECTION.md as an oracle: a HIER
leg allow-list naming engines not legal on its slot (§8, leg bullet), and explain's
SINGLE_CYCLE_RING channel reason (§7).  Every expected message is written from the docs:
the slot's legal set (§5, ``LEG_LEGAL``: intra legs RING | KANGARING; inter all-reduce RING
| INTER_RDH | SINGLE_CYCLE_RING | MESH), the forced form's words, candidate order (§3)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.codes import DType, EncAlgType, EncOpType
from nrtrewrite.errors import SelectionError
from nrtrewrite.select import Request, parse_algo_override, select
from nrtrewrite.topology import load_topology

T2N = load_topology("trn2:nodes=2", world=(), lnc_size=2)  # 128 ranks, 64 a node
WHOLE = tuple(range(128))
MIB = 1 << 20


def sel(algo, nbytes=MIB):
    return select(Request.for_op(EncOpType.ALLREDUCE, DType.BF16, WHOLE, nbytes), T2N,
                  override=parse_algo_override(algo))


def refusal(algo):
    with pytest.raises(SelectionError) as err:
        sel(algo)
    return str(err.value)


@pytest.mark.parametrize("algo,says", [
    # nothing excluded: the named engines are not the slot's (KANGARING before
    # SINGLE_STEP_MESH in candidate order, §3)
    ("inter_allr:single_step_mesh,kangaring",
     "leaves the inter_allr leg no legal engine (its engines: RING, INTER_RDH, "
     "SINGLE_CYCLE_RING, MESH; KANGARING, SINGLE_STEP_MESH not legal on the inter_allr leg)"
     # (then the way out, §8: the slot's first engine lowerable as a leg in its window, MESH
     # not lowerable as a leg, SINGLE_CYCLE_RING inside [0, 4 MiB) for the 8 KiB leg; the
     # flat engines legal for the op: SINGLE_CYCLE_RING on any all-reduce, RING)
     "; --algo 'inter_allr:single_cycle_ring' runs the inter_allr leg on SINGLE_CYCLE_RING, "
     "or --algo may force SINGLE_CYCLE_RING or RING over the whole group"),
    ("intra_allg:mesh,inter_rdh",
     "leaves the intra_allg leg no legal engine (its engines: RING, KANGARING; MESH, "
     "INTER_RDH not legal on the intra_allg leg); --algo 'intra_allg:ring' runs the "
     "intra_allg leg on RING, or --algo may force SINGLE_CYCLE_RING or RING over the whole "
     "group"),
    # the one legal engine named is excluded by the collective's clause: that is said
    ("intra_allg:mesh,kangaring;allreduce:^kangaring",
     "leaves the intra_allg leg no legal engine (its engines: RING, KANGARING; MESH not legal "
     "on the intra_allg leg; KANGARING excluded); --algo 'allreduce:^kangaring;intra_allg:ring'"
     " runs the intra_allg leg on RING (a leg clause forcing one engine beats an exclusion), "
     "or --algo may force SINGLE_CYCLE_RING or RING over the whole group"),
])
def test_a_leg_allow_list_of_engines_not_legal_on_its_slot_names_them(algo, says):
    """Until 2026-12-06 each said `every one excluded`, though no exclusion named them.
    Since 2026-12-07 the refusal ends with what to pass instead (SELECTION.md §8): the leg
    clause replaced by one forcing a legal engine of the slot, and the flat engines."""
    assert refusal(algo) == f"trigger 0: --algo {algo!r} {says}"


def test_every_one_excluded_stays_for_a_leg_an_exclusion_emptied():
    """§8's example: `^ring` on 64 MiB over ranks 0,1,2 and 64,65,66 leaves the intra_allg
    leg KANGARING only, refused (3 of a device's 4 ranks): its refusal, no `not legal`."""
    group = (0, 1, 2, 64, 65, 66)
    with pytest.raises(SelectionError) as err:
        select(Request.for_op(EncOpType.ALLREDUCE, DType.BF16, group, 64 * MIB), T2N,
               override=parse_algo_override("^ring"))
    assert "not legal on" not in str(err.value)
    assert "(its engines: RING, KANGARING; KANGARING: device 0 of node 0" in str(err.value)


def test_a_leg_allow_list_names_the_engines_it_drops_in_the_legs_reason():
    """`inter_allr:single_step_mesh,ring`: RING is the one legal engine named, taken; its
    reason says SINGLE_STEP_MESH is not legal on the leg, in the forced form's words, as
    `X not taken: ...` (§5); until 2026-12-06 it never named it."""
    s = sel("inter_allr:single_step_mesh,ring")
    (leg,) = [g for g in s.legs if g.name == "inter_allr"]
    assert leg.alg == EncAlgType.RING
    assert leg.reason.endswith(
        "; SINGLE_STEP_MESH not taken: not legal on the inter_allr leg (legal: RING, "
        "INTER_RDH, SINGLE_CYCLE_RING, MESH)"), leg.reason
    # the legs without a clause say nothing of it
    assert all("SINGLE_STEP_MESH" not in g.reason for g in s.legs if g.name != "inter_allr")


def test_single_cycle_ring_channel_reason_says_its_pairs_once():
    """One rank on each of four trn2 nodes, 64 KiB: the rule gives 1 channel, so
    max(1, 1 / 2) = 1 pair, 2 channels (§7, the form it quotes); explain added the same
    again as `SINGLE_CYCLE_RING runs 1 channel pair(s), ... (ccw): 2 channel(s)`."""
    res = CliRunner().invoke(main, ["explain", "--op", "allreduce", "--bytes", "64KiB",
                                    "--group", "0,64,128,192", "--nodes", "4", "--json"],
                             env={}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    t = doc["triggers"][0] if "triggers" in doc else doc
    assert t["lowered"]["algorithm"] == "SINGLE_CYCLE_RING"
    assert t["channels"]["reason"] == (
        "64 KiB / 256 KiB per channel -> 1; SINGLE_CYCLE_RING: max(1, 1 / 2) = 1 channel "
        "pair(s), each ring forward and backward: 2 channel(s)")


# -- when nothing allowed is inside its window, every allowed engine refused is named ------

def test_an_outside_window_pick_names_the_allowed_engines_after_it_too():
    """`single_step_mesh,kangaring` on an 8 MiB all-reduce over 16 ranks of a trn2 node:
    KANGARING is below its 56 MiB window (§4), SINGLE_STEP_MESH needs (16 - 1) x 8 MiB =
    120 MiB of the 8 MiB mesh channel buffer (§3): nothing allowed is inside, KANGARING is
    taken, and the reason says why SINGLE_STEP_MESH, after it, was not (it did not)."""
    s = select(Request.for_op(EncOpType.ALLREDUCE, DType.BF16, tuple(range(16)), 8 * MIB),
               load_topology("trn2", world=(), lnc_size=2),
               override=parse_algo_override("single_step_mesh,kangaring"))
    assert s.alg == EncAlgType.KANGARING
    assert "(none allowed is inside its size window)" in s.reason
    assert s.reason.endswith("; SINGLE_STEP_MESH not taken: every peer's whole input needs "
                             "120 MiB of channel buffer (15 x 8 MiB), more than "
                             "ENC_MESH_CHANNEL_BUF_MAX_SIZE 8 MiB"), s.reason


def test_a_leg_taken_outside_its_window_names_the_allowed_engines_after_it_too():
    """`^ring` on a 1 GiB all-reduce over two whole trn2 nodes at LNC 1 (§8): the 8 MiB
    `inter_allr` leg's MESH is not lowerable as a leg, SINGLE_CYCLE_RING is taken past its
    4 MiB window; INTER_RDH, after it in the precedence, is refused too (node_n 2 is not a
    power of two >= 8, §5's example) and is now named as well."""
    t = load_topology("trn2:nodes=2", world=(), lnc_size=1)
    s = select(Request.for_op(EncOpType.ALLREDUCE, DType.BF16, tuple(range(256)), 1 << 30),
               t, override=parse_algo_override("^ring"))
    (leg,) = [g for g in s.legs if g.name == "inter_allr"]
    assert leg.alg == EncAlgType.SINGLE_CYCLE_RING
    assert leg.reason.startswith("first legal engine (none allowed is inside its size window;")
    assert leg.reason.endswith("; MESH not taken: not lowerable as a HIER leg in this build; "
                               "INTER_RDH not taken: node_n 2 is not a power of two >= 8")


def test_a_policy_leg_taken_outside_its_window_names_the_allowed_engines_after_it_too():
    """`inter_allr:mesh,single_cycle_ring` on a 1 GiB all-reduce over two whole trn2 nodes
    (LNC 2): the inter leg moves 1 GiB / 64 = 16 MiB, past MESH's 64 KiB and
    SINGLE_CYCLE_RING's 4 MiB windows (§5): the policy's leg is MESH, the first legal, and
    its reason says why SINGLE_CYCLE_RING, after it, was not taken."""
    s = sel("inter_allr:mesh,single_cycle_ring", nbytes=1 << 30)
    (leg,) = [g for g in s.policy_legs if g.name == "inter_allr"]
    assert leg.alg == EncAlgType.MESH and leg.nbytes == 16 * MIB
    assert leg.reason.endswith("; SINGLE_CYCLE_RING not taken: 16 MiB not below "
                               "op_max_limit[ALLREDUCE] 4 MiB"), leg.reason


def test_a_leg_allow_list_names_the_engine_an_exclusion_removed_in_the_legs_reason():
    """Review 49w: `intra_allg:kangaring,ring;allreduce:^kangaring` over two whole trn2
    nodes, 64 MiB: the collective's exclusion removes KANGARING from the leg's list, so the
    leg takes RING; its reason says KANGARING was not taken, `excluded`, as the leg's error
    says it (§8), where until 2026-12-06 it read `always legal (the fallback)` alone (the
    policy's and the lowered leg alike: this build lowers RING as a leg)."""
    s = sel("intra_allg:kangaring,ring;allreduce:^kangaring", 64 * MIB)
    (leg,) = [g for g in s.legs if g.name == "intra_allg"]
    assert leg.alg == EncAlgType.RING
    assert leg.reason.endswith("; KANGARING not taken: excluded"), leg.reason
