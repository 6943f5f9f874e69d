"""SELECT: enum ordinals vs the seeds, predicate truth tables, the policy defaults, legs,
fallback to a lowerable engine, channel counts, overrides."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nrtrewrite.codes import (
    AluOp, CType, DType, EncAlgMeshType, EncAlgType, EncOpType, MetaringType, Opcode,
)
from nrtrewrite.errors import SelectionError, ValidationError
from nrtrewrite.neff.model import Operand, SyncFields, Trigger
from nrtrewrite.policy import DEFAULT_POLICY, KiB, MiB, Policy
from nrtrewrite.select import (
    ALGO_ENV, HIER_SLOTS, LEG_LEGAL, PREDICATES, Request, can_post_ring,
    enc_can_post_hierarchical_operation, enc_can_post_inter_rdh_operation,
    enc_can_post_intra_rdh_operation, enc_can_post_kangaring_operation,
    enc_can_post_mesh_operation, enc_can_post_single_cycle_ring, parse_algo_override, select,
    select_all,
)
from nrtrewrite.topology import load_topology, ring_orders

AR, AG, RS = EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER
A2A, BC, RED = EncOpType.ALLTOALL, EncOpType.BROADCAST, EncOpType.REDUCE

T1N = load_topology("trn2", world=(), lnc_size=2)            # 64 ranks
T2N = load_topology("trn2:nodes=2", world=(), lnc_size=2)    # 128 ranks
T8N = load_topology("trn2:nodes=8", world=(), lnc_size=2)    # 512 ranks
TRN1 = load_topology("trn1:nodes=2", world=(), lnc_size=1)   # 64 ranks
T1N_LNC1 = load_topology("trn2", world=(), lnc_size=1)        # 128 ranks, 8 per device

NODE0 = tuple(range(64))
TWO_NODES = tuple(range(128))
ONE_PER_NODE_8 = tuple(64 * n for n in range(8))
ONE_PER_NODE_2 = (0, 64)


def req(op, group, nbytes=64 * MiB, dtype=DType.BF16, sbuf=False, ordinal=0):
    return Request.for_op(op, dtype, group, nbytes, ordinal=ordinal, sbuf=sbuf)


# -- enum ordinals against the seed text ----------------------------------------------------

def _seeds_dir() -> Path | None:
    env = os.environ.get("NRTREWRITE_SHARED")
    for base in ([Path(env)] if env else []) + [Path(__file__).resolve().parents[2] / "shared"]:
        if (base / "seeds").is_dir():
            return base / "seeds"
    return None


#: The seed's lines that state these ordinals, kept verbatim in the repository: the checks
#: below run on a clean clone too, where ../shared is not there.
SEED000_EXCERPT = Path(__file__).parent / "data" / "seed000_enum_lines.txt"


def _excerpt_lines() -> list[str]:
    return [ln for ln in SEED000_EXCERPT.read_text().splitlines() if not ln.startswith("#")]


def _seed000_file() -> Path | None:
    seeds = _seeds_dir()
    files = sorted(seeds.glob("000_*.txt")) if seeds else []
    return files[0] if files else None


def _seed000() -> str:
    """The seed 000 text, or without ../shared its lines that state the enum ordinals."""
    f = _seed000_file()
    return f.read_text() if f else "\n".join(_excerpt_lines())


def test_the_seed_excerpt_is_the_seeds_own_lines():
    """tests/data/seed000_enum_lines.txt is verbatim seed 000 and holds every line of it
    that states one of the ordinals checked below (skipped only without ../shared)."""
    f = _seed000_file()
    if f is None:
        pytest.skip("shared/seeds/000_*.txt not present: the excerpt stands in for it")
    seed_lines = f.read_text().splitlines()
    excerpt = _excerpt_lines()
    assert excerpt and all(ln in seed_lines for ln in excerpt)
    stating = [ln for ln in seed_lines
               if re.search(r"\b(INTRA_RDH|SINGLE_STEP_MESH|INTER_RDH|HIER)=\d|FULL_MESH=0"
                            r"|sub-enum \(RING=0|KANGARING=3", ln)]
    assert stating and all(ln in excerpt for ln in stating)


def _pairs(text: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"\b([A-Z][A-Z_]*)=(\d+)\b", text)}


def test_global_enc_alg_type_ordinals_match_seed():
    text = _seed000()
    # the reimplementer's checklist lists the global enum: (RING=0 / HIER=1 / MESH=2 / ...)
    line = next(ln for ln in text.splitlines() if "HIER=1" in ln and "INTRA_RDH=5" in ln)
    pairs = _pairs(line)
    assert len(pairs) >= 7
    for name, val in pairs.items():
        assert EncAlgType[name] == val, name
    # every statement of these ordinals anywhere in the seed agrees
    for name in ("INTRA_RDH", "SINGLE_STEP_MESH", "INTER_RDH"):
        vals = {int(v) for v in re.findall(rf"\b{name}=(\d+)", text)}
        assert vals == {EncAlgType[name]}, name
    assert "KANGARING=3" in text and "SINGLE_CYCLE_RING=4" in text
    assert EncAlgType.KANGARING == 3 and EncAlgType.SINGLE_CYCLE_RING == 4


def test_metaring_sub_enum_is_a_separate_type_matching_seed():
    text = _seed000()
    line = next(ln for ln in text.splitlines() if "sub-enum (RING=0" in ln)
    start = line.index("sub-enum (RING=0")
    sub = _pairs(line[start:line.index(")", start)])     # the parenthesis only
    assert sub["KANGARING"] == MetaringType.KANGARING == 1
    assert sub["SINGLE_CYCLE_RING"] == MetaringType.SINGLE_CYCLE_RING == 2
    assert sub["RDH"] == MetaringType.RDH == 3
    assert MetaringType is not EncAlgType
    assert int(MetaringType.KANGARING) != int(EncAlgType.KANGARING)


def test_mesh_sub_type_ordinals_match_seed():
    text = _seed000()
    line = next(ln for ln in text.splitlines() if "FULL_MESH=0" in ln)
    for name, val in _pairs(line).items():
        if name in EncAlgMeshType.__members__:
            assert EncAlgMeshType[name] == val, name


# -- predicate truth tables -------------------------------------------------------------------

@pytest.mark.parametrize("op, group, topo, legal, why", [
    (AR, ONE_PER_NODE_8, T8N, True, "8 nodes"),
    (AR, ONE_PER_NODE_2, T2N, True, "2 nodes"),
    (AG, ONE_PER_NODE_8, T8N, False, "all-reduce only (op_type ALLGATHER)"),
    (RS, ONE_PER_NODE_8, T8N, False, "all-reduce only (op_type REDUCE_SCATTER)"),
    (A2A, ONE_PER_NODE_8, T8N, False, "all-reduce only (op_type ALLTOALL)"),
    (AR, NODE0, T1N, False, "inter-node only"),
    (AR, TWO_NODES, T2N, False, "one rank per node"),
])
def test_single_cycle_ring_truth_table(op, group, topo, legal, why):
    # the libnrt gate (inter-node, one rank per node) is applied with the window: the cascade
    ok, reason = enc_can_post_single_cycle_ring(req(op, group, 1 * MiB), topo, check_window=True)
    assert ok is legal and why in reason
    # structurally every all-reduce can be composed (and forced, docs/SELECTION.md)
    ok, reason = enc_can_post_single_cycle_ring(req(op, group, 1 * MiB), topo, check_window=False)
    assert ok is (op == AR)


@pytest.mark.parametrize("op, group, topo, legal, why", [
    (AR, NODE0, T1N, True, "16 full device(s)"),
    (AG, NODE0, T1N, True, "vnc 2"),
    (RS, tuple(range(16)), T1N, True, "4 full device(s)"),
    (AR, tuple(range(4)), T1N, False, "rank_n > 4"),
    (AR, tuple(range(8)), T1N, True, "2 full device(s), vnc 2"),  # the vnc 2 gate's first pass
    # vnc 1 (LNC1: 8 ranks per trn2 device): rank_n > 8 (docs/SELECTION.md, the libnrt gate),
    # so one whole device is refused and two pass
    (AR, tuple(range(8)), T1N_LNC1, False, "vnc 1 needs rank_n > 8 (rank_n 8)"),
    (AR, tuple(range(16)), T1N_LNC1, True, "2 full device(s), vnc 1"),
    (AR, tuple(range(0, 64, 4)), T1N, False, "every rank of each device"),
    (AR, TWO_NODES, T2N, False, "intra-node only"),
    (AR, tuple(range(32)), TRN1, False, "no kangaring"),
    (A2A, NODE0, T1N, False, "needs mesh"),
    (BC, NODE0, T1N, False, "not supported"),
])
def test_kangaring_truth_table(op, group, topo, legal, why):
    ok, reason = enc_can_post_kangaring_operation(req(op, group), topo, check_window=False)
    assert ok is legal and why in reason


@pytest.mark.parametrize("op, group, topo, legal, why", [
    (AR, TWO_NODES, T2N, True, "2 nodes x 64"),
    (AG, TWO_NODES, T2N, True, ""),
    (RS, tuple(range(0, 128, 4)), T2N, True, "2 nodes x 16"),
    (AR, NODE0, T1N, False, "within node 0"),
    (AR, ONE_PER_NODE_8, T8N, False, "one rank per node"),
    (AR, (0, 1, 64), T2N, False, "asymmetric"),
    (AR, (0, 1, 64, 66), T2N, False, "asymmetric group (2 ranks on each node, at different "
     "local positions: node 0: local 0..1, node 1: local 0, 2; HIER needs"),
    (AR, tuple(range(16)) + tuple(range(80, 96)), T2N, False,
     "node 0: local 0..15, node 1: local 16..31;"),
    (A2A, TWO_NODES, T2N, False, "needs mesh"),
    (RED, TWO_NODES, T2N, False, "not supported"),
])
def test_hierarchical_truth_table(op, group, topo, legal, why):
    ok, reason = enc_can_post_hierarchical_operation(req(op, group), topo)
    assert ok is legal and why in reason


@pytest.mark.parametrize("op, group, topo, legal, why", [
    (AR, NODE0, T1N, True, "MESH_TRN2"),
    (A2A, NODE0, T1N, True, ""),
    (A2A, TWO_NODES, T2N, True, ""),
    (AR, ONE_PER_NODE_8, T8N, True, "FULL_MESH"),
    (AR, TWO_NODES, T2N, False, "one rank per node"),
    (BC, NODE0, T1N, False, "not supported"),
    (AR, (3,), T1N, False, "no peers"),
])
def test_mesh_truth_table(op, group, topo, legal, why):
    ok, reason = enc_can_post_mesh_operation(req(op, group, 64 * KiB), topo, check_window=False)
    assert ok is legal and why in reason


@pytest.mark.parametrize("op, nbytes, legal, why", [
    (AR, 8 * MiB, True, ""),  # 63 slots of 128 KiB: just fits
    (AR, 9 * MiB, False, "ENC_MESH_CHANNEL_BUF_MAX_SIZE"),  # 63 x 144 KiB > 8 MiB
    (RS, 64 * MiB, False, "ENC_MESH_CHANNEL_BUF_MAX_SIZE"),
    (AG, 64 * MiB, True, ""),  # all-gather lands in OUT: no channel buffer
])
def test_mesh_channel_buffer_limit(op, nbytes, legal, why):
    ok, reason = enc_can_post_mesh_operation(req(op, NODE0, nbytes), T1N, check_window=False)
    assert ok is legal and why in reason


@pytest.mark.parametrize("fn, op, group, topo, legal, why", [
    (enc_can_post_intra_rdh_operation, AR, NODE0, T1N, True, "hypercube of dimension 6"),
    (enc_can_post_intra_rdh_operation, AR, tuple(range(24)), T1N, False, "not a power of two"),
    (enc_can_post_intra_rdh_operation, AR, (0, 1, 4), T1N, False, "uneven"),
    (enc_can_post_intra_rdh_operation, AR, (0, 1), T1N, True, "1 device(s) x 2 ranks"),
    (enc_can_post_intra_rdh_operation, AR, (0, 1, 2), T1N, True, "1 rank(s) folded"),
    (enc_can_post_intra_rdh_operation, AR, TWO_NODES, T2N, False, "intra-node only"),
    (enc_can_post_inter_rdh_operation, AR, ONE_PER_NODE_8, T8N, True, "8 nodes"),
    (enc_can_post_inter_rdh_operation, AG, ONE_PER_NODE_8, T8N, True, ""),
    (enc_can_post_inter_rdh_operation, AR, ONE_PER_NODE_2, T2N, False, "power of two >= 8"),
    (enc_can_post_inter_rdh_operation, AR, TWO_NODES, T2N, False, "one rank per node"),
    (enc_can_post_inter_rdh_operation, AR, NODE0, T1N, False, "inter-node only"),
])
def test_rdh_truth_tables(fn, op, group, topo, legal, why):
    ok, reason = fn(req(op, group), topo, check_window=False)
    assert ok is legal and why in reason


@pytest.mark.parametrize("op, legal", [(AR, True), (AG, True), (RS, True), (A2A, False),
                                       (BC, False), (RED, False)])
def test_ring_never_serves_broadcast_reduce_alltoall(op, legal):
    for topo, group in ((T1N, NODE0), (T2N, TWO_NODES)):
        ok, _ = can_post_ring(req(op, group), topo)
        assert ok is legal


def test_alltoall_only_mesh():
    for topo, group in ((T1N, NODE0), (T2N, TWO_NODES), (T8N, ONE_PER_NODE_8)):
        r = req(A2A, group, 4 * MiB)
        legal = [alg for alg, (_, pred) in PREDICATES.items() if pred(r, topo)[0]]
        assert legal == [EncAlgType.MESH]
        sel = select(r, topo, strict=False)
        assert sel.policy_alg == EncAlgType.MESH and sel.alg == EncAlgType.INVALID
        with pytest.raises(SelectionError, match="not lowerable"):
            select(r, topo)


# -- the policy defaults ------------------------------------------------------------------------

@pytest.mark.parametrize("nbytes, policy_alg", [
    (4 * KiB, EncAlgType.MESH), (1 * MiB - 2, EncAlgType.MESH),
    (1 * MiB, EncAlgType.INTRA_RDH), (56 * MiB - 2, EncAlgType.INTRA_RDH),
    (56 * MiB, EncAlgType.KANGARING), (1024 * MiB, EncAlgType.KANGARING),
])
def test_intra_node_allreduce_windows(nbytes, policy_alg):
    sel = select(req(AR, NODE0, nbytes), T1N)
    assert sel.policy_alg == policy_alg
    assert sel.candidate(policy_alg).chosen
    assert sel.policy_legs[0].alg == policy_alg
    if DEFAULT_POLICY.is_lowerable(policy_alg):
        assert sel.alg == policy_alg and sel.fallback_reason is None
    else:  # the fallback stays inside a window: RING, not the out-of-window INTRA_RDH
        assert sel.alg == EncAlgType.RING and sel.legs[0].name == "flat"
        assert sel.fallback_reason and "not lowerable" in sel.fallback_reason


def test_ring_is_the_general_fallback():
    # partial devices, 6 devices: no mesh window (64 MiB), no RDH (not pow2), no kangaring
    group = tuple(r for d in range(6) for r in (4 * d, 4 * d + 1))
    sel = select(req(AR, group, 64 * MiB), T1N)
    assert sel.policy_alg == sel.alg == EncAlgType.RING and sel.fallback_reason is None
    assert sel.legs == sel.policy_legs and sel.metaring_type == MetaringType.RING


def test_two_node_group_lowers_hier_legs():
    sel = select(req(AR, TWO_NODES, 64 * MiB), T2N)
    assert sel.policy_alg == sel.alg == EncAlgType.HIER and sel.fallback_reason is None
    assert [(leg.name, leg.alg) for leg in sel.legs] == [
        ("intra_redsct", EncAlgType.KANGARING), ("inter_allr", EncAlgType.SINGLE_CYCLE_RING),
        ("intra_allg", EncAlgType.KANGARING)]
    assert sel.legs == sel.policy_legs


def test_a_leg_engine_without_a_hier_leg_composer_falls_back_per_leg():
    # 1 MiB over two nodes: inter_allr is 16 KiB, inside the inter MESH window
    sel = select(req(AR, TWO_NODES, 1 * MiB), T2N)
    assert sel.policy_alg == sel.alg == EncAlgType.HIER
    pol = {leg.name: leg.alg for leg in sel.policy_legs}
    low = {leg.name: leg.alg for leg in sel.legs}
    assert pol["inter_allr"] == EncAlgType.MESH
    assert low["inter_allr"] == EncAlgType.SINGLE_CYCLE_RING
    assert "inter_allr: MESH is not lowerable as a HIER leg" in sel.fallback_reason
    with pytest.raises(SelectionError, match="cannot be lowered as a HIER leg"):
        select(req(AR, TWO_NODES, 1 * MiB), T2N, override=parse_algo_override("inter_allr:mesh"))


def _leg_reasons(sel, legs="legs"):
    return {leg.name: (leg.alg, leg.reason) for leg in getattr(sel, legs)}


def test_a_hier_leg_says_why_the_engines_before_its_own_were_not_taken():
    """SELECTION.md §5: an intra slot takes KANGARING before RING, and KANGARING's intra window
    starts at 56 MiB (§4). An 8 MiB all-reduce over two whole trn2 nodes has 8 MiB intra legs:
    RING, whose reason said only "always legal (the fallback)", not why KANGARING lost."""
    for legs in ("legs", "policy_legs"):
        r = _leg_reasons(select(req(AR, TWO_NODES, 8 * MiB), T2N), legs)
        assert r["intra_redsct"] == (EncAlgType.RING, "always legal (the fallback); KANGARING "
                                     "not taken: 8 MiB below op_min_limit[REDUCE_SCATTER] 56 MiB")
        assert r["intra_allg"] == (EncAlgType.RING, "always legal (the fallback); KANGARING "
                                   "not taken: 8 MiB below op_min_limit[ALLGATHER] 56 MiB")
        # the inter leg: 8 MiB / 64 local ranks = 128 KiB, past MESH's 64 KiB inter window,
        # inside SINGLE_CYCLE_RING's [0, 4 MiB)
        alg, why = r["inter_allr"]
        assert alg == EncAlgType.SINGLE_CYCLE_RING
        assert why.endswith("; MESH not taken: 128 KiB not below op_max_limit[ALLREDUCE] 64 KiB")
    # at the window's edge, 56 MiB, KANGARING is taken: nothing before it to explain
    r = _leg_reasons(select(req(AR, TWO_NODES, 56 * MiB), T2N))
    assert r["intra_redsct"][0] == r["intra_allg"][0] == EncAlgType.KANGARING
    assert "not taken" not in r["intra_redsct"][1] + r["intra_allg"][1]


def test_a_hier_leg_names_every_engine_passed_over_in_precedence_order():
    """An inter all-reduce slot runs MESH > SINGLE_CYCLE_RING > INTER_RDH > RING (§5). 512 MiB
    over two whole trn2 nodes is an 8 MiB inter leg: past MESH's 64 KiB and SINGLE_CYCLE_RING's
    4 MiB windows, and INTER_RDH needs a power of two >= 8 nodes: RING, saying all three."""
    alg, why = _leg_reasons(select(req(AR, TWO_NODES, 512 * MiB), T2N))["inter_allr"]
    assert alg == EncAlgType.RING
    assert why == ("flat ring over 2 nodes (2 network hops per channel); "
                   "MESH not taken: 8 MiB not below op_max_limit[ALLREDUCE] 64 KiB; "
                   "SINGLE_CYCLE_RING not taken: 8 MiB not below op_max_limit[ALLREDUCE] 4 MiB; "
                   "INTER_RDH not taken: node_n 2 is not a power of two >= 8")


def test_a_lowered_hier_leg_says_its_policy_engine_is_no_leg_engine():
    """A 4 MiB all-gather over two whole trn2 nodes: the inter_allg leg moves 4 MiB / 64 =
    64 KiB, the end of MESH's half-open [0, 64 KiB) window, so the policy's leg is RING
    (MESH and INTER_RDH named); one byte a rank less, 64 KiB - 64 B, is inside it: the
    policy's MESH, which this build lowers as RING (§6), the leg saying so."""
    pol = _leg_reasons(select(req(AG, TWO_NODES, 4 * MiB), T2N), "policy_legs")
    assert pol["inter_allg"] == (EncAlgType.RING, "flat ring over 2 nodes (2 network hops per "
                                 "channel); MESH not taken: 64 KiB not below "
                                 "op_max_limit[ALLGATHER] 64 KiB; INTER_RDH not taken: node_n 2 "
                                 "is not a power of two >= 8")
    sel = select(req(AG, TWO_NODES, 4 * MiB - 128 * 64), T2N)
    assert _leg_reasons(sel, "policy_legs")["inter_allg"][0] == EncAlgType.MESH
    assert _leg_reasons(sel)["inter_allg"] == (
        EncAlgType.RING, "flat ring over 2 nodes (2 network hops per channel); MESH not taken: "
        "not lowerable as a HIER leg in this build; INTER_RDH not taken: node_n 2 is not a "
        "power of two >= 8")


def test_a_hier_leg_on_trn1_says_it_has_no_kangaring():
    r = _leg_reasons(select(req(AG, tuple(range(64)), 512 * MiB), TRN1))
    alg, why = r["intra_allg"]
    assert alg == EncAlgType.RING
    assert why.startswith("always legal (the fallback); KANGARING not taken: trn1 has no "
                          "kangaring")


def test_a_hier_leg_names_only_the_engines_the_override_leaves():
    """As the policy's reason names the cascade over the allowed engines only (§8): under
    ``^kangaring`` the intra legs' RING has nothing before it to explain."""
    sel = select(req(AR, TWO_NODES, 8 * MiB), T2N, override=parse_algo_override("^kangaring"))
    r = _leg_reasons(sel)
    assert r["intra_redsct"] == (EncAlgType.RING, "always legal (the fallback)")


def _passed(reason: str) -> list[str]:
    """The engines a reason says were not taken, in its order."""
    return re.findall(r"; ([A-Z_]+) not taken: ", reason)


def test_a_collectives_reason_says_why_the_engines_before_its_own_lost():
    """SELECTION.md §4: the cascade HIER > INTRA_RDH > MESH > KANGARING > SINGLE_CYCLE_RING >
    INTER_RDH > RING; intra windows MESH [0, 1 MiB), INTRA_RDH [1 MiB, 56 MiB), KANGARING
    [56 MiB, inf). 4 MiB of bf16 over a whole trn2 node (16 devices x 4 ranks): INTRA_RDH,
    HIER (one node) the only engine before it; the reason used to stop at the qualification."""
    base = ("INTRA_RDH: first legal engine of HIER > INTRA_RDH > MESH > KANGARING > "
            "SINGLE_CYCLE_RING > INTER_RDH > RING for intra-node ALLREDUCE 4 MiB (16 device(s) "
            "x 4 ranks (hypercube of dimension 6); 4 MiB in [1 MiB, 56 MiB))")
    sel = select(req(AR, NODE0, 4 * MiB), T1N)
    assert sel.policy_alg == EncAlgType.INTRA_RDH
    assert sel.reason == (base + "; HIER not taken: group lies within node 0 (HIER needs a "
                          "group spanning nodes)")
    # 48 ranks, 12 whole devices: no hypercube; MESH past its 1 MiB, KANGARING short of its
    # 56 MiB: RING, naming every engine before it, each with its candidate's reason
    sel = select(req(AR, NODE0[:48], 4 * MiB), T1N)
    assert sel.policy_alg == EncAlgType.RING
    assert sel.reason == (
        "RING: first legal engine of HIER > INTRA_RDH > MESH > KANGARING > SINGLE_CYCLE_RING > "
        "INTER_RDH > RING for intra-node ALLREDUCE 4 MiB (always legal (the fallback)); "
        "HIER not taken: group lies within node 0 (HIER needs a group spanning nodes); "
        "INTRA_RDH not taken: 12 devices is not a power of two (RDH is a hypercube exchange); "
        "MESH not taken: 4 MiB not below op_max_limit[ALLREDUCE] 1 MiB; "
        "KANGARING not taken: 4 MiB below op_min_limit[ALLREDUCE] 56 MiB; "
        "SINGLE_CYCLE_RING not taken: policy gate: SINGLE_CYCLE_RING is inter-node only "
        "(group lies within one node; --algo may force it); "
        "INTER_RDH not taken: INTER_RDH is inter-node only (group lies within one node)")
    for a in _passed(sel.reason):  # the words of explain's candidate table
        assert f"; {a} not taken: {sel.candidate(EncAlgType[a]).reason}" in sel.reason


def test_a_collectives_reason_at_the_window_edges():
    """The windows are half-open (§4): at 56 MiB KANGARING is inside its window, one bf16
    element less it is not; at 512 KiB MESH wins and INTRA_RDH is short of its 1 MiB."""
    no_rdh = parse_algo_override("^intra_rdh")
    sel = select(req(AR, NODE0, 56 * MiB), T1N, override=no_rdh)
    assert sel.policy_alg == EncAlgType.KANGARING
    assert _passed(sel.reason) == ["HIER", "MESH"]
    # (MESH is not even legal there: 63 peers' blocks of 56 MiB / 64 = 896 KiB need 55.125
    # MiB = 57,802,752 B of channel buffer, past its 8 MiB; §3)
    assert sel.reason.endswith(
        "; MESH not taken: 63 channel-buffer slots of 896 KiB need 55.12 MiB (57802752 B), more "
        "than the mesh channel buffer (ENC_MESH_CHANNEL_BUF_MAX_SIZE 8 MiB)")
    assert " > RING under the override '^intra_rdh' for intra-node ALLREDUCE 56 MiB (" in sel.reason
    sel = select(req(AR, NODE0, 56 * MiB - 2), T1N, override=no_rdh)
    assert sel.policy_alg == EncAlgType.RING
    assert _passed(sel.reason) == ["HIER", "MESH", "KANGARING", "SINGLE_CYCLE_RING",
                                   "INTER_RDH"]
    assert "; KANGARING not taken: 56 MiB (58720254 B) below op_min_limit[ALLREDUCE] 56 MiB;" \
        in sel.reason
    sel = select(req(AR, NODE0, 512 * KiB), T1N)
    assert sel.policy_alg == EncAlgType.MESH
    assert sel.reason.endswith(
        "; HIER not taken: group lies within node 0 (HIER needs a group spanning nodes); "
        "INTRA_RDH not taken: 512 KiB below op_min_limit[ALLREDUCE] 1 MiB")
    # one rank on each of 8 nodes: SINGLE_CYCLE_RING's inter window is [0, 4 MiB), so at
    # 4 MiB INTER_RDH [0, 64 MiB) runs it and says so; 2 B less, SINGLE_CYCLE_RING
    sel = select(req(AR, ONE_PER_NODE_8, 4 * MiB), T8N)
    assert sel.policy_alg == EncAlgType.INTER_RDH
    assert _passed(sel.reason) == ["HIER", "INTRA_RDH", "MESH", "KANGARING",
                                   "SINGLE_CYCLE_RING"]
    assert sel.reason.endswith("; MESH not taken: 4 MiB not below op_max_limit[ALLREDUCE] 64 "
                               "KiB; KANGARING not taken: "
                               f"{sel.candidate(EncAlgType.KANGARING).reason}; "
                               "SINGLE_CYCLE_RING not taken: 4 MiB not below "
                               "op_max_limit[ALLREDUCE] 4 MiB")
    sel = select(req(AR, ONE_PER_NODE_8, 4 * MiB - 2), T8N)
    assert sel.policy_alg == EncAlgType.SINGLE_CYCLE_RING
    assert _passed(sel.reason) == ["HIER", "INTRA_RDH", "MESH", "KANGARING"]
    # HIER, first in the precedence, has nothing before it: its reason is as it was
    sel = select(req(AR, TWO_NODES, 4 * MiB), T2N)
    assert sel.reason == ("HIER: first legal engine of HIER > INTRA_RDH > MESH > KANGARING > "
                          "SINGLE_CYCLE_RING > INTER_RDH > RING for 2-node ALLREDUCE 4 MiB "
                          "(2 nodes x 64 local ranks (node_n * local_rank_n == rank_n 128))")


@pytest.mark.parametrize("algo, alg, names", [
    # an allow-list: the cascade over MESH > RING, MESH past its 1 MiB
    ("mesh,ring", EncAlgType.RING, ["MESH"]),
    # an exclusion: every engine before RING but INTRA_RDH
    ("^intra_rdh", EncAlgType.RING, ["HIER", "MESH", "KANGARING", "SINGLE_CYCLE_RING",
                                     "INTER_RDH"]),
    ("^hier,mesh", EncAlgType.RING, ["INTRA_RDH", "KANGARING", "SINGLE_CYCLE_RING",
                                     "INTER_RDH"]),
    # forced: no cascade ran, nothing was passed over
    ("ring", EncAlgType.RING, []),
    ("kangaring", EncAlgType.KANGARING, []),
])
def test_a_collectives_reason_names_only_the_engines_the_override_allows(algo, alg, names):
    """§8: the policy's reason names the cascade over the allowed engines only, and so the
    engines passed over: 4 MiB over 48 ranks (12 whole devices) of a trn2 node."""
    sel = select(req(AR, NODE0[:48], 4 * MiB), T1N, override=parse_algo_override(algo))
    assert sel.policy_alg == alg
    assert _passed(sel.reason) == names
    if names:  # (the override after the cascade it cut, not after the last "not taken")
        assert f" under the override {algo!r} for intra-node ALLREDUCE 4 MiB (" in sel.reason
        assert "; under the override" not in sel.reason


def test_a_collective_taken_outside_its_window_names_the_illegal_engines_before_it():
    """§8: ``hier,intra_rdh`` on a 64 KiB all-reduce over one node leaves no engine inside
    its window: INTRA_RDH, short of its 1 MiB, after HIER, which is not legal on one node."""
    sel = select(req(AR, NODE0, 64 * KiB), T1N, override=parse_algo_override("hier,intra_rdh"))
    assert sel.policy_alg == EncAlgType.INTRA_RDH
    assert sel.reason == (
        "INTRA_RDH: first legal engine (none allowed is inside its size window) of HIER > "
        "INTRA_RDH under the override 'hier,intra_rdh' for intra-node ALLREDUCE 64 KiB "
        "(64 KiB below op_min_limit[ALLREDUCE] 1 MiB); HIER not taken: group lies within "
        "node 0 (HIER needs a group spanning nodes)")


def test_an_engine_taken_past_its_policy_gate_is_not_said_outside_its_size_window():
    """Bug (fixer 48i): ``allreduce:^hier,ring`` on 1 MiB over two whole trn2 nodes leaves
    SINGLE_CYCLE_RING the only legal engine; its 1 MiB is inside its [0, 4 MiB) window, but
    its policy gate (one rank a node, checked with the window, SELECTION.md §3) fails.  The
    reason said "none allowed is inside its size window"; it says the gate now."""
    sel = select(req(AR, TWO_NODES, 1 * MiB), T2N,
                 override=parse_algo_override("allreduce:^hier,ring"))
    c = sel.candidate(EncAlgType.SINGLE_CYCLE_RING)
    assert (sel.policy_alg, c.legal, c.in_window) == (EncAlgType.SINGLE_CYCLE_RING, True, False)
    assert sel.reason == (
        "SINGLE_CYCLE_RING: first legal engine (none allowed is inside its size window and "
        "passes its policy gate) of INTRA_RDH > MESH > KANGARING > SINGLE_CYCLE_RING > "
        "INTER_RDH under the override 'allreduce:^hier,ring' for 2-node ALLREDUCE 1 MiB "
        "(policy gate: SINGLE_CYCLE_RING needs one rank per node (rank_n 128 != node_n 2; "
        "--algo may force it)); INTRA_RDH not taken: INTRA_RDH is intra-node only (group "
        "spans 2 nodes); MESH not taken: inter-node mesh over the whole group needs one rank "
        "per node (local_rank_n 64); such groups go hierarchical; KANGARING not taken: "
        "KANGARING is intra-node only (group spans 2 nodes); INTER_RDH not taken: INTER_RDH "
        "needs one rank per node (local_rank_n 64)")  # (after it too, since 2026-12-06)
    # no gate among the engines the cascade ran: the size window alone, as before
    sel = select(req(AR, NODE0, 64 * KiB), T1N, override=parse_algo_override("hier,intra_rdh"))
    assert sel.reason.startswith(
        "INTRA_RDH: first legal engine (none allowed is inside its size window) of ")


def test_the_override_follows_the_cascade_it_cut_not_the_last_engine_passed_over():
    """Bug: ``; under the override '...'`` ended the policy's reason, after the last "X not
    taken: ..." part, as if it said why X lost (SELECTION.md §4, §8).  It follows the cascade
    the override cut now.  ``^ring`` on 4 MiB over 48 ranks (12 whole devices) of a trn2
    node: HIER not on one node, INTRA_RDH no hypercube of 12 devices, MESH past its 1 MiB,
    KANGARING short of its 56 MiB, SINGLE_CYCLE_RING's policy gate, INTER_RDH inter only;
    none allowed inside its window and past its policy gate (said so since 2026-12-06:
    SINGLE_CYCLE_RING's gate read as a size window), so the first legal one: MESH, after
    HIER and INTRA_RDH.  A forced engine says the override in its own words, as before."""
    sel = select(req(AR, NODE0[:48], 4 * MiB), T1N, override=parse_algo_override("^ring"))
    assert sel.policy_alg == EncAlgType.MESH
    assert sel.reason == (
        "MESH: first legal engine (none allowed is inside its size window and passes its "
        "policy gate) of HIER > "
        "INTRA_RDH > MESH > KANGARING > SINGLE_CYCLE_RING > INTER_RDH under the override "
        "'^ring' for intra-node ALLREDUCE 4 MiB (4 MiB not below op_max_limit[ALLREDUCE] "
        "1 MiB); HIER not taken: group lies within node 0 (HIER needs a group spanning "
        "nodes); INTRA_RDH not taken: 12 devices is not a power of two (RDH is a hypercube "
        "exchange); KANGARING not taken: 4 MiB below op_min_limit[ALLREDUCE] 56 MiB; "
        "SINGLE_CYCLE_RING not taken: policy gate: SINGLE_CYCLE_RING is inter-node only "
        "(group lies within one node; --algo may force it); INTER_RDH not taken: INTER_RDH "
        "is inter-node only (group lies within one node)")  # (those after it: since 2026-12-06)
    # a per-collective clause is said as it was given: the whole override's text
    sel = select(req(AR, NODE0[:48], 4 * MiB), T1N,
                 override=parse_algo_override("allgather:ring;allreduce:mesh,ring"))
    assert sel.reason == (
        "RING: first legal engine of MESH > RING under the override "
        "'allgather:ring;allreduce:mesh,ring' for intra-node ALLREDUCE 4 MiB (always legal "
        "(the fallback)); MESH not taken: 4 MiB not below op_max_limit[ALLREDUCE] 1 MiB")
    sel = select(req(AR, NODE0[:48], 4 * MiB), T1N, override=parse_algo_override("ring"))
    assert sel.reason == "forced by the override 'ring' (always legal (the fallback))"
    # no clause for the op: no override named
    sel = select(req(AR, NODE0[:48], 4 * MiB), T1N, override=parse_algo_override("allgather:ring"))
    assert "override" not in sel.reason


def test_two_node_group_policy_hier_lowered_flat_ring():
    sel = select(req(AR, TWO_NODES, 64 * MiB), T2N,
                 policy=Policy(lowerable=frozenset({EncAlgType.RING})))
    assert sel.policy_alg == EncAlgType.HIER
    assert [leg.name for leg in sel.policy_legs] == ["intra_redsct", "inter_allr", "intra_allg"]
    intra, inter = sel.policy_legs[0].groups, sel.policy_legs[1].groups
    assert intra == (NODE0, tuple(range(64, 128)))
    assert len(inter) == 64 and inter[5] == (5, 69)
    for leg in sel.policy_legs:
        assert leg.alg in LEG_LEGAL[leg.name]
    assert sel.alg == EncAlgType.RING
    assert len(sel.legs) == 1 and sel.legs[0].name == "flat"
    assert sel.legs[0].groups == (TWO_NODES,)
    assert "HIER" in sel.fallback_reason and "network hops" in sel.fallback_reason
    assert [slot for slot, _ in sel.hier_selections] == list(HIER_SLOTS)
    assert sel.hier_log_line().startswith("Hier algorithm selections - alg_intra_allg ")
    # lowered ring crosses the network exactly twice per channel
    for order in ring_orders(T2N, TWO_NODES, sel.n_channels):
        hops = sum(not T2N.same_node(order[i], order[(i + 1) % 128]) for i in range(128))
        assert hops == 2


@pytest.mark.parametrize("op, legs", [
    (AG, ["inter_allg", "intra_allg"]), (RS, ["intra_redsct", "inter_redsct"]),
])
def test_hier_leg_sets(op, legs):
    sel = select(req(op, TWO_NODES), T2N)
    assert sel.policy_alg == EncAlgType.HIER
    assert [leg.name for leg in sel.policy_legs] == legs


@st.composite
def any_request(draw):
    topo = draw(st.sampled_from([T1N, T2N, T8N, TRN1]))
    op = draw(st.sampled_from([AR, AG, RS]))
    kind = draw(st.sampled_from(["node", "two", "per_node", "random"]))
    if kind == "node":
        group = tuple(range(topo.ranks_per_node))
    elif kind == "two" and topo.nodes >= 2:
        group = tuple(range(2 * topo.ranks_per_node))
    elif kind == "per_node":
        group = tuple(n * topo.ranks_per_node for n in range(topo.nodes))
    else:
        group = tuple(draw(st.lists(st.integers(0, topo.world_size - 1), min_size=1,
                                    max_size=24, unique=True)))
    nbytes = draw(st.sampled_from([2 * KiB, 512 * KiB, 2 * MiB, 32 * MiB, 128 * MiB]))
    return topo, req(op, group, nbytes)


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(any_request())
def test_selection_invariants(args):
    topo, r = args
    sel = select(r, topo)
    # no all-gather (or reduce-scatter) ever gets SINGLE_CYCLE_RING, anywhere
    algs = {sel.policy_alg, sel.alg} | {leg.alg for leg in sel.policy_legs + sel.legs}
    if r.op != AR:
        assert EncAlgType.SINGLE_CYCLE_RING not in algs
    # no inter leg and no multi-node group ever gets KANGARING
    for leg in sel.policy_legs + sel.legs:
        spans = any(not topo.same_node(g[0], x) for g in leg.groups for x in g)
        if leg.name.startswith("inter") or spans:
            assert leg.alg != EncAlgType.KANGARING
        assert leg.alg in (LEG_LEGAL.get(leg.name) or (leg.alg,))
    # a HIER leg names why each engine its slot takes first was not taken (SELECTION.md §5):
    # the slot's engines before its own in the precedence, in that order, and no other
    for leg in (sel.policy_legs + sel.legs) if sel.policy_alg == EncAlgType.HIER else ():
        order = [a for a in DEFAULT_POLICY.precedence if a in LEG_LEGAL[leg.name]]
        named = re.findall(r"; ([A-Z_]+) not taken: ", leg.reason)
        assert named == [a.name for a in order[:order.index(leg.alg)]], leg
    # so does a collective's own reason: the engines of the cascade before the policy's (§4)
    assert _passed(sel.reason) == [
        a.name for a in DEFAULT_POLICY.precedence[:DEFAULT_POLICY.precedence.index(
            sel.policy_alg)]], sel.reason
    # what lower uses is lowerable, and differs from the policy only with a reason
    assert sel.alg in DEFAULT_POLICY.lowerable
    assert (sel.fallback_reason is None) == (sel.alg == sel.policy_alg
                                             and sel.legs == sel.policy_legs)
    assert 1 <= sel.n_channels <= 32
    assert sum(c.chosen for c in sel.candidates) == 1


# -- channels ---------------------------------------------------------------------------------

RING_ONLY = parse_algo_override("ring")


def test_channel_counts():
    assert select(req(AR, NODE0, 64 * MiB), T1N).n_channels == 4
    assert select(req(AR, NODE0, 256 * KiB), T1N).n_channels == 1
    assert select(req(AR, TWO_NODES, 64 * MiB), T2N).n_channels == 1  # HIER: per leg
    ring_only = Policy(lowerable=frozenset({EncAlgType.RING}))
    assert select(req(AR, TWO_NODES, 64 * MiB), T2N, policy=ring_only).n_channels == 16
    hybrid = select(req(AR, tuple(range(2, 64, 4)), 2 * KiB), T1N, override=RING_ONLY)
    assert hybrid.hybrid_ring and hybrid.n_channels == 4 and "hybrid" in hybrid.channel_reason
    tiny = select(req(AR, NODE0, 64 * 64 * 2), T1N)   # 64 elements per rank: one channel
    assert tiny.n_channels == 1
    single = select(req(AR, (7,), 1 * MiB), T1N)
    assert single.n_channels == 1 and ring_orders(T1N, (7,), 1) == [None]
    custom = Policy(max_channels_intra=2)
    assert select(req(AR, NODE0, 64 * MiB), T1N, policy=custom).n_channels == 2


# -- overrides --------------------------------------------------------------------------------

def test_parse_override_syntax():
    o = parse_algo_override("allreduce:kangaring;allgather:ring")
    assert o.for_op(AR).forced == EncAlgType.KANGARING
    assert o.for_op(AG).forced == EncAlgType.RING
    assert o.for_op(RS) is None
    o = parse_algo_override("^mesh,kangaring")
    c = o.for_op(RS)
    assert c.exclude and not c.allows(EncAlgType.MESH) and c.allows(EncAlgType.RING)
    o = parse_algo_override("RING; all-gather:^rdh")
    assert o.for_op(AR).forced == EncAlgType.RING
    assert not o.for_op(AG).allows(EncAlgType.INTRA_RDH)
    assert not o.for_op(AG).allows(EncAlgType.INTER_RDH)
    leg = parse_algo_override("alg_inter_allr:mesh").for_leg("inter_allr")
    assert leg.forced == EncAlgType.MESH
    # SELECTION.md §8: an empty clause is a syntax error, so no leading, trailing or doubled
    # ';'; an empty --algo would drop NRTREWRITE_ALGO silently, and of two clauses for one
    # target one would be dropped silently
    for bad, match in (("treee", "unknown algorithm"), ("foo:ring", "neither a collective"),
                       ("allreduce:", "names no algorithm"), ("", "is empty"),
                       ("  ", "is empty"), (";", "empty clause"), ("ring;", "empty clause"),
                       (";;ring", "empty clause"), ("ring;;mesh", "empty clause"),
                       ("ring; ;mesh", "empty clause"), ("ring;mesh", "two clauses"),
                       ("allreduce:ring;all-reduce:^mesh", "two clauses"),
                       ("inter_allr:ring;alg_inter_allr:mesh", "two clauses"),
                       # nor an empty name in a list
                       ("ring,", "empty name"), (",ring", "empty name"),
                       ("^mesh,,kangaring", "empty name"), ("allreduce:ring, ", "empty name")):
        with pytest.raises(ValidationError, match=match):
            parse_algo_override(bad)


def test_override_from_env(monkeypatch):
    monkeypatch.delenv(ALGO_ENV, raising=False)
    assert parse_algo_override(None) is None
    monkeypatch.setenv(ALGO_ENV, "^mesh")
    o = parse_algo_override(None)
    assert o.source == ALGO_ENV and o.for_op(AR).exclude
    monkeypatch.setenv(ALGO_ENV, " ")  # set but blank: no override (NRTREWRITE_ALGO= ...)
    assert parse_algo_override(None) is None
    for text in ("", " ", "\t"):  # while a blank --algo is an error (docs/SELECTION.md §8)
        with pytest.raises(ValidationError, match="is empty"):
            parse_algo_override(text)
    monkeypatch.setenv(ALGO_ENV, "ring;")
    with pytest.raises(ValidationError, match=f"{ALGO_ENV} 'ring;': empty clause"):
        parse_algo_override(None)


def test_forcing_single_cycle_ring_on_allgather_is_refused_with_reason():
    with pytest.raises(SelectionError) as exc:
        select(req(AG, ONE_PER_NODE_8, 1 * MiB, ordinal=3), T8N,
               override=parse_algo_override("single_cycle_ring"))
    msg = str(exc.value)
    assert "enc_can_post_single_cycle_ring: SINGLE_CYCLE_RING is all-reduce only " \
           "(op_type ALLGATHER)" in msg
    assert exc.value.where.trigger == 3


def test_forcing_illegal_kangaring_names_predicate():
    with pytest.raises(SelectionError, match="enc_can_post_kangaring_operation: KANGARING is "
                                             "intra-node only"):
        select(req(AR, TWO_NODES), T2N, override=parse_algo_override("kangaring"))


def test_forcing_legal_but_unlowerable_engine():
    with pytest.raises(SelectionError, match=r"is legal here but this build cannot lower it yet "
                                             r"\(lowerable: RING, each for its own ops; not for "
                                             r"ALLREDUCE: KANGARING\)"):
        select(req(AR, NODE0), T1N, override=parse_algo_override("allreduce:kangaring"),
               policy=Policy(lowerable=frozenset({EncAlgType.RING})))
    # once a later build can lower it, the same override goes through
    grown = Policy(lowerable=frozenset({EncAlgType.RING, EncAlgType.KANGARING}))
    sel = select(req(AR, NODE0), T1N, override=parse_algo_override("allreduce:kangaring"),
                 policy=grown)
    assert sel.alg == sel.policy_alg == EncAlgType.KANGARING and sel.fallback_reason is None
    assert sel.metaring_type == MetaringType.KANGARING


def test_forcing_ring_and_excluding():
    sel = select(req(AR, NODE0, 4 * KiB), T1N, override=parse_algo_override("ring"))
    assert sel.policy_alg == sel.alg == EncAlgType.RING and sel.fallback_reason is None
    sel = select(req(AR, TWO_NODES), T2N, override=parse_algo_override("ring"))
    assert sel.policy_alg == EncAlgType.RING and "forced" in sel.reason
    sel = select(req(AR, NODE0, 4 * KiB), T1N, override=parse_algo_override("^mesh"))
    assert sel.policy_alg == EncAlgType.RING
    sel = select(req(AR, TWO_NODES), T2N, override=parse_algo_override("^hier"))
    assert sel.policy_alg == EncAlgType.RING
    # SELECTION.md §8: under an exclusion or allow-list it is an error only when nothing
    # allowed is legal ("legal" is the structural verdict, §3); an allowed engine that is
    # legal but outside its size window is taken when none allowed is inside its window
    sel = select(req(AR, NODE0), T1N, override=parse_algo_override("^ring,kangaring"))
    c = sel.candidate(sel.policy_alg)
    assert c.legal and not c.in_window and sel.alg == sel.policy_alg != EncAlgType.RING
    assert "none allowed is inside its size window" in sel.reason
    with pytest.raises(SelectionError, match="no legal engine"):
        select(req(AR, NODE0), T1N, override=parse_algo_override("inter_rdh,hier"))
    with pytest.raises(SelectionError, match="hierarchical_operation: group lies within"):
        select(req(AR, NODE0), T1N, override=parse_algo_override("hier"))


def test_leg_overrides():
    sel = select(req(AR, TWO_NODES, 64 * MiB), T2N, override=parse_algo_override(
        "intra_redsct:ring;intra_allg:ring;inter_allr:ring"))
    assert [leg.alg for leg in sel.policy_legs] == [EncAlgType.RING] * 3
    with pytest.raises(SelectionError, match="MESH is not legal on the intra_allg leg"):
        select(req(AR, TWO_NODES), T2N, override=parse_algo_override("intra_allg:mesh"))
    with pytest.raises(SelectionError, match="inter_allr leg.*enc_can_post_inter_rdh_operation"):
        select(req(AR, TWO_NODES), T2N, override=parse_algo_override("inter_allr:inter_rdh"))
    # op-level exclusion also reaches the legs
    sel = select(req(AR, TWO_NODES, 64 * MiB), T2N, override=parse_algo_override("^kangaring"))
    assert EncAlgType.KANGARING not in {leg.alg for leg in sel.policy_legs}


# -- triggers and models ------------------------------------------------------------------------

def make_trigger(ordinal, ctype, group, num_elements, dtype=DType.BF16):
    from nrtrewrite.codes import CTYPE_TO_OP
    return Trigger(
        ordinal=ordinal, subgraph="sg00", engine="sp", index=ordinal,
        opcode=Opcode.PSEUDO_TRIGGER_COLLECTIVE, ctype=ctype, op=CTYPE_TO_OP[ctype],
        dtype=dtype, alu_op=None if ctype == CType.ALL_GATHER else AluOp.ADD,
        replica_group_id=0, replica_group=tuple(group), stream_id=0, channel_id=0,
        src=Operand(var_id=0), dst=Operand(var_id=1), num_elements=num_elements,
        sync=SyncFields())


def test_select_from_trigger_and_select_all():
    from types import SimpleNamespace
    t0 = make_trigger(0, CType.ALL_REDUCE, NODE0, 32 * MiB)           # 64 MiB of bf16
    t1 = make_trigger(1, CType.ALL_GATHER, TWO_NODES, 1024)
    sels = select_all(SimpleNamespace(triggers=[t0, t1]), T2N)
    assert [s.trigger for s in sels] == [0, 1]
    assert sels[0].op_bytes == 64 * MiB and sels[0].policy_alg == EncAlgType.KANGARING
    assert sels[1].op_bytes == 1024 * 2 * 128 and sels[1].policy_alg == EncAlgType.HIER
    with pytest.raises(SelectionError) as exc:
        select_all(SimpleNamespace(triggers=[t0, t1]), T2N,
                   override=parse_algo_override("allgather:kangaring"))
    assert exc.value.where.trigger == 1 and exc.value.where.subgraph == "sg00"


def test_a_size_the_four_digits_round_shows_its_bytes():
    """An error at a limit's edge said ``slots of 8 MiB need 8 MiB, more than ... 8 MiB``:
    8388610 bytes rounded to four digits. Sizes that round now carry their bytes."""
    from nrtrewrite.policy import fmt_bytes
    assert [fmt_bytes(n) for n in (100, 1536, 4096, 1 << 20, (8 << 20) + 2, 16385)] == [
        "100 B", "1.5 KiB", "4 KiB", "1 MiB", "8 MiB (8388610 B)", "16 KiB (16385 B)"]


def test_sizes_past_a_double_s_53_bits_are_exact():
    """(Found by an exploratory tester: the sizes were divided as floats, so 2^53 + 1 bytes
    read as a whole 8388608 GiB and 10^26 GiB as 100000000000000004764729344 GiB.)"""
    from nrtrewrite.policy import fmt_bytes
    assert fmt_bytes(2 ** 53 + 1) == "8388608 GiB (9007199254740993 B)"  # 2^53 = 2^23 GiB
    assert fmt_bytes(2 ** 70 + 1) == "1099511627776 GiB (1180591620717411303425 B)"  # 2^40
    assert fmt_bytes(10 ** 26 * 2 ** 30) == "100000000000000000000000000 GiB"
    assert fmt_bytes(10 ** 26 * 2 ** 30 + 2 ** 29) == (  # x.5 rounds to even, as float did
        f"100000000000000000000000000 GiB ({10 ** 26 * 2 ** 30 + 2 ** 29} B)")
    assert fmt_bytes(10000 * 2 ** 30 - 1) == f"10000 GiB ({10000 * 2 ** 30 - 1} B)"  # no 1e+04
    assert fmt_bytes(1025) == "1.001 KiB (1025 B)" and fmt_bytes(10752) == "10.5 KiB"


@pytest.mark.parametrize("algo", ["inter_allr:ring", "ring", "hier,ring", "^kangaring"])
def test_an_override_gives_the_same_output_from_the_flag_or_the_environment(
        algo, tmp_path, monkeypatch):
    """The same override given as --algo or as NRTREWRITE_ALGO lowers to byte-identical
    trees: reasons name the override's text, not its source (a fuzzer found a HIER leg's
    reason "forced by --algo (...)" against "forced by NRTREWRITE_ALGO (...)" in the top
    manifest). A 4-rank all-reduce over two trn1 nodes (HIER by default)."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.neff.assembler import assemble_spec
    spec = {"header": {"pkg_version": 2, "name": "o", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "i", "type": "input", "size": 128},
                                    {"name": "o", "type": "output", "size": 128}],
                           "replica_groups": [[0, 1, 32, 33]],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "bf16", "op": "add", "num_elements": 64,
                               "src": "i", "dst": "o"}}]}}]}
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(spec))
    monkeypatch.delenv(ALGO_ENV, raising=False)
    runner = CliRunner()
    flag = runner.invoke(main, ["lower", "-q", str(neff), "-o", str(tmp_path / "flag"),
                                "--topology", "trn1:nodes=2", "--algo", algo])
    assert flag.exit_code == 0, flag.output
    monkeypatch.setenv(ALGO_ENV, algo)
    env = runner.invoke(main, ["lower", "-q", str(neff), "-o", str(tmp_path / "env"),
                               "--topology", "trn1:nodes=2"])
    assert env.exit_code == 0, env.output
    files = sorted(p.relative_to(tmp_path / "flag") for p in (tmp_path / "flag").rglob("*")
                   if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "env") for p in (tmp_path / "env").rglob("*")
                           if p.is_file())
    for f in files:
        assert (tmp_path / "flag" / f).read_bytes() == (tmp_path / "env" / f).read_bytes(), f


def test_clauses_that_govern_nothing_are_warned_about():
    """A leg clause where nothing is lowered as HIER, a collective's clause where the model
    has none: not errors, but said (the KANGARING/HIER campaign's note: a user got no hint
    that the override did nothing)."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.reader import read_model

    fix = Path(__file__).resolve().parents[1] / "fixtures"
    mix8 = read_model(fix / "mix8.neff")  # one node: no HIER; has every collective
    plan = plan_lowering(mix8, LowerOptions(algo="intra_redsct:kangaring;allgather:ring;^mesh"))
    assert plan.notes == [f"{mix8.path}: --algo clause 'intra_redsct:kangaring' applies to "
                          "nothing in this model: no collective is lowered as HIER with an "
                          "intra_redsct leg"]
    ar2 = read_model(fix / "ar2.neff")  # a single all-reduce
    assert [t.op for t in ar2.triggers] == [EncOpType.ALLREDUCE]
    plan = plan_lowering(ar2, LowerOptions(algo="allgather:ring;allreduce:ring"))
    assert plan.notes == [f"{ar2.path}: --algo clause 'allgather:ring' applies to nothing in "
                          "this model: it has no ALLGATHER collective"]
    two = read_model(fix / "two_node128.neff")  # HIER all-reduce, all-gather, reduce-scatter
    assert plan_lowering(two, LowerOptions(algo="intra_redsct:kangaring;inter_allg:ring")
                         ).notes == []
    res = CliRunner().invoke(main, ["explain", str(fix / "mix8.neff"), "--algo",
                                    "inter_allr:ring"])
    assert res.exit_code == 0
    assert res.stderr == (f"nrtrewrite: warning: {fix / 'mix8.neff'}: --algo clause "
                          "'inter_allr:ring' applies to nothing in this model: no collective "
                          "is lowered as HIER with an inter_allr leg\n")


def test_override_names_take_the_documented_aliases():
    """docs/SELECTION.md §8: engine names are the EncAlgType names in any case, plus `rdh`
    (both RDH engines), `hierarchical` (HIER), `kangaroo` (KANGARING) and `single_cycle`
    (SINGLE_CYCLE_RING); collectives also as `all-reduce`, `all_gather` ..."""
    for name, algs in (("hierarchical", {EncAlgType.HIER}),
                       ("kangaroo", {EncAlgType.KANGARING}),
                       ("single_cycle", {EncAlgType.SINGLE_CYCLE_RING}),
                       ("rdh", {EncAlgType.INTRA_RDH, EncAlgType.INTER_RDH}),
                       ("Single_Cycle_Ring", {EncAlgType.SINGLE_CYCLE_RING}),
                       ("HIER", {EncAlgType.HIER})):
        (clause,) = parse_algo_override(name).clauses
        assert set(clause.algs) == algs and not clause.exclude, name
    o = parse_algo_override("all-reduce:ring;all_gather:mesh;reduce_scatter:kangaroo")
    assert o.for_op(AR).forced == EncAlgType.RING and o.for_op(AG).forced == EncAlgType.MESH
    assert o.for_op(RS).forced == EncAlgType.KANGARING


def test_inter_rdh_window_ends_at_64_mib():
    """docs/SELECTION.md §4: INTER_RDH's window between nodes is [0, 64 MiB), half-open; an
    all-gather (no SINGLE_CYCLE_RING: all-reduce only) over one rank on each of 8 nodes (a
    power of two >= 8) gets INTER_RDH just below 64 MiB (above MESH's 64 KiB), RING at it."""
    below = select(req(AG, ONE_PER_NODE_8, 64 * MiB - 8 * KiB), T8N)
    assert below.policy_alg == EncAlgType.INTER_RDH
    at = select(req(AG, ONE_PER_NODE_8, 64 * MiB), T8N)
    assert at.policy_alg == EncAlgType.RING
    assert not at.candidate(EncAlgType.INTER_RDH).in_window


# -- the twelfth mutation round (docs/RELIABILITY.md §6): gates, windows, reasons ------------
#
# Every expected value below is worked out from docs/SELECTION.md (the section named in each
# test) and the rank placement of docs/TOPOLOGY.md (trn2 at LNC 2: rank r of a node on
# device (r % 64) // 4; 64 ranks a node), not read from the code's output.

T16N_LNC1 = load_topology("trn2:nodes=16", world=(), lnc_size=1)   # 2048 ranks, 128 a node
THREE_DEVICES = (0, 4, 8)   # one rank on each of devices 0, 1, 2 of node 0


def test_intra_mesh_window_ends_at_1_mib_where_rdh_and_kangaring_cannot_run():
    """§4: intra MESH is [0, 1 MiB).  An all-gather over one rank on each of 3 devices:
    INTRA_RDH is refused (3 devices, not a power of two), KANGARING too (partial devices), so
    1 MiB - 4 B (a multiple of 3 x 2 bytes) is MESH and 1 MiB + 2 B is RING, the fallback."""
    below = select(req(AG, THREE_DEVICES, (1 << 20) - 4), T1N)
    assert below.policy_alg == EncAlgType.MESH
    at = select(req(AG, THREE_DEVICES, (1 << 20) + 2), T1N)
    assert at.policy_alg == EncAlgType.RING
    mesh = at.candidate(EncAlgType.MESH)
    assert mesh.legal and not mesh.in_window


def test_inter_single_cycle_ring_window_ends_at_4_mib():
    """§4: inter SINGLE_CYCLE_RING is [0, 4 MiB).  One rank on each of two nodes: MESH is
    past its 64 KiB, INTER_RDH needs 8 nodes, so 4 MiB - 2 B is SINGLE_CYCLE_RING and 4 MiB
    is RING."""
    assert select(req(AR, ONE_PER_NODE_2, 4 * MiB - 2), T2N).policy_alg == \
        EncAlgType.SINGLE_CYCLE_RING
    at = select(req(AR, ONE_PER_NODE_2, 4 * MiB), T2N)
    assert at.policy_alg == EncAlgType.RING
    assert not at.candidate(EncAlgType.SINGLE_CYCLE_RING).in_window


def test_sbuf_triggers_take_the_dram_windows_and_their_reasons_say_sbuf():
    """§4: the _sbuf columns equal the DRAM ones by default; an SBUF trigger is judged by
    them and the reasons name them (``op_min_limit_sbuf``, ``(sbuf)``)."""
    small = select(req(AR, NODE0, 4 * KiB, sbuf=True), T1N)
    assert small.policy_alg == EncAlgType.MESH and small.sbuf
    assert small.candidate(EncAlgType.INTRA_RDH).reason == \
        "4 KiB below op_min_limit_sbuf[ALLREDUCE] 1 MiB"
    assert small.candidate(EncAlgType.MESH).reason.endswith("; 4 KiB in [0 B, 1 MiB) (sbuf)")
    big = select(req(AR, NODE0, 56 * MiB, sbuf=True), T1N)
    assert big.policy_alg == EncAlgType.KANGARING
    assert big.candidate(EncAlgType.INTRA_RDH).reason == \
        "56 MiB not below op_max_limit_sbuf[ALLREDUCE] 56 MiB"
    # a model's trigger with an operand in SBUF is an SBUF request
    from dataclasses import replace

    from nrtrewrite.neff.model import AccessPattern
    t = make_trigger(0, CType.ALL_REDUCE, NODE0, 2048)   # 4 KiB of bf16
    t = replace(t, dst=Operand(var_id=1, ap=AccessPattern(64, 0, 1, ((1, 32), (0, 1), (0, 1)))))
    sel = select(t, T1N)
    assert sel.sbuf and sel.candidate(EncAlgType.MESH).reason.endswith("(sbuf)")


def test_a_policy_may_give_sbuf_triggers_a_window_of_their_own():
    """§4: the _sbuf columns "exist so a policy can set them": a policy whose intra MESH
    all-gather row reaches 2 MiB for SBUF only takes MESH for an SBUF all-gather of
    1 MiB + 2 B over 3 devices and RING for the same in DRAM."""
    from dataclasses import replace

    from nrtrewrite.policy import DEFAULT_WINDOWS, INTRA
    rows = tuple(replace(r, op_max_limit_sbuf=2 * MiB)
                 if (r.scope, r.alg, r.op) == (INTRA, EncAlgType.MESH, AG) else r
                 for r in DEFAULT_WINDOWS)
    pol = Policy(windows=rows)
    assert select(req(AG, THREE_DEVICES, (1 << 20) + 2), T1N, policy=pol).policy_alg == \
        EncAlgType.RING
    assert select(req(AG, THREE_DEVICES, (1 << 20) + 2, sbuf=True), T1N,
                  policy=pol).policy_alg == EncAlgType.MESH


def test_an_engine_the_window_table_has_no_row_for_is_not_size_gated():
    """policy.py: a row is None "when alg is not size-gated".  With an empty table nothing is
    gated: a 64 MiB all-reduce over a whole trn2 node takes the first legal engine of the
    precedence, INTRA_RDH (16 devices, 4 ranks each), and its reason is the structural one."""
    pol = Policy(windows=())
    assert pol.in_window("intra", EncAlgType.INTRA_RDH, AR, 64 * MiB) == (True, "no size window")
    sel = select(req(AR, NODE0, 64 * MiB), T1N, policy=pol)
    assert sel.policy_alg == EncAlgType.INTRA_RDH
    assert sel.candidate(EncAlgType.INTRA_RDH).reason == \
        "16 device(s) x 4 ranks (hypercube of dimension 6)"


def test_the_cascade_follows_the_documented_precedence():
    """§4: HIER > INTRA_RDH > MESH > KANGARING > SINGLE_CYCLE_RING > INTER_RDH > RING, the
    first legal engine inside its window; under an allow-list that leaves none inside its
    window, the first allowed legal one (§8)."""
    assert DEFAULT_POLICY.precedence == (
        EncAlgType.HIER, EncAlgType.INTRA_RDH, EncAlgType.MESH, EncAlgType.KANGARING,
        EncAlgType.SINGLE_CYCLE_RING, EncAlgType.INTER_RDH, EncAlgType.RING)
    # 1 MiB all-reduce, one rank on each of 8 nodes: SINGLE_CYCLE_RING [0, 4 MiB) and
    # INTER_RDH [0, 64 MiB) both hold; SINGLE_CYCLE_RING ranks first
    assert select(req(AR, ONE_PER_NODE_8, 1 * MiB), T8N).policy_alg == \
        EncAlgType.SINGLE_CYCLE_RING
    # 64 MiB all-gather over a node: MESH (no channel buffer for AG) and INTRA_RDH are both
    # legal and both outside their windows: INTRA_RDH ranks first
    sel = select(req(AG, NODE0, 64 * MiB), T1N, override=parse_algo_override("mesh,intra_rdh"))
    assert sel.policy_alg == EncAlgType.INTRA_RDH
    assert "none allowed is inside its size window" in sel.reason
    # 1 KiB all-reduce over a node: KANGARING is legal below its 56 MiB window,
    # SINGLE_CYCLE_RING legal but fails its inter-node policy gate: KANGARING ranks first
    sel = select(req(AR, NODE0, 1 * KiB), T1N,
                 override=parse_algo_override("kangaring,single_cycle_ring"))
    assert sel.policy_alg == EncAlgType.KANGARING


def test_channels_keep_64_elements_per_rank_per_channel():
    """§7: the channel count is capped by elements / (rank_n * 64).  4 MiB of fp32 (1 Mi
    elements) over the 2048 ranks of 16 trn2 nodes at LNC 1: floor_pow2(4 MiB / 256 KiB) = 16,
    max_channels_inter 16, but 1,048,576 / (2048 * 64) = 8 (the rings of 16 nodes are at least
    16 distinct, TOPOLOGY.md rule 4: each channel leaves the node from another device)."""
    sel = select(req(AR, tuple(range(2048)), 4 * MiB, dtype=DType.FP32), T16N_LNC1,
                 override=RING_ONLY)
    assert sel.n_channels == 8
    assert sel.channel_reason == ("4 MiB / 256 KiB per channel -> 16, capped at 8 by 64 "
                                  "elements per rank per channel")


def test_a_channel_reason_names_only_a_cap_that_lowers_the_count():
    """§7: 1 MiB over a node: 4 channels, which the intra cap (4) does not lower; 4 KiB:
    1 channel, though 2048 elements give the 64 ranks none of 64 elements (at least 1)."""
    assert select(req(AR, NODE0, 1 * MiB), T1N, override=RING_ONLY).channel_reason == \
        "1 MiB / 256 KiB per channel -> 4"
    tiny = select(req(AR, NODE0, 4 * KiB), T1N, override=RING_ONLY)
    assert tiny.n_channels == 1 and tiny.channel_reason == "4 KiB / 256 KiB per channel -> 1"


def test_a_hier_inter_leg_of_fp32_is_whole_4_byte_elements():
    """§5: an inter leg moves ceil(B / dsize / local_rank_n) x dsize bytes: 1028 B of fp32
    (257 elements) over two whole trn2 nodes (64 local ranks): ceil(257 / 64) = 5 elements,
    20 bytes."""
    sel = select(req(AR, TWO_NODES, 1028, dtype=DType.FP32), T2N)
    assert sel.policy_alg == EncAlgType.HIER
    assert {leg.name: leg.nbytes for leg in sel.policy_legs} == {
        "intra_redsct": 1028, "inter_allr": 20, "intra_allg": 1028}


def test_a_request_for_a_message_size_splits_it_as_nccom_test_reports_it():
    """§2: the message size is the all-reduce buffer, the all-gather output, the
    reduce-scatter input; the other side of AG / RS is one rank's block (explain plans a
    model-less trigger from these)."""
    group = (0, 1, 2, 3)
    for op, (ib, ob) in ((AR, (1024, 1024)), (AG, (256, 1024)), (RS, (1024, 256))):
        r = Request.for_op(op, DType.BF16, group, 1024)
        assert (r.in_bytes, r.out_bytes, r.op_bytes) == (ib, ob, 1024), op


def test_kangaring_refuses_a_max_reduction_but_gathers_for_one():
    """§3 KANGARING row: a reduce only with ADD.  A model's MAX all-reduce of 64 MiB over a
    node is refused it (RING: INTRA_RDH and MESH are outside their windows / buffer); a MAX
    all-reduce over two nodes still gathers with KANGARING (intra_allg copies, it does not
    reduce) while its intra reduce-scatter takes RING."""
    from dataclasses import replace
    t = replace(make_trigger(0, CType.ALL_REDUCE, NODE0, 32 * MiB), alu_op=AluOp.MAX)
    sel = select(t, T1N)
    kang = sel.candidate(EncAlgType.KANGARING)
    assert not kang.legal and "only reduces ADD" in kang.reason
    assert sel.policy_alg == EncAlgType.RING
    hier = select(Request.for_op(AR, DType.BF16, TWO_NODES, 64 * MiB, alu=AluOp.MAX), T2N)
    assert [(leg.name, leg.alg) for leg in hier.legs] == [
        ("intra_redsct", EncAlgType.RING), ("inter_allr", EncAlgType.SINGLE_CYCLE_RING),
        ("intra_allg", EncAlgType.KANGARING)]


def test_single_step_mesh_needs_n_minus_1_whole_messages_of_channel_buffer():
    """§3 SINGLE_STEP_MESH row: (n - 1) x the message fits the 8 MiB buffer: 133,152 bytes over
    64 ranks (63 x 133,152 = 8,388,576) fits, 133,154 does not; 8 MiB over 2 ranks is one
    slot of exactly 8 MiB, 8 MiB + 2 B is over."""
    ssm = parse_algo_override("single_step_mesh")
    assert select(req(AR, NODE0, 133152), T1N, override=ssm).alg == EncAlgType.SINGLE_STEP_MESH
    with pytest.raises(SelectionError, match="every peer's whole input needs"):
        select(req(AR, NODE0, 133154), T1N, override=ssm)
    assert select(req(AR, (0, 1), 8 * MiB), T1N, override=ssm).alg == \
        EncAlgType.SINGLE_STEP_MESH
    with pytest.raises(SelectionError, match="every peer's whole input needs"):
        select(req(AR, (0, 1), 8 * MiB + 2), T1N, override=ssm)


def test_single_step_mesh_is_an_intra_node_all_reduce_only():
    """§3 SINGLE_STEP_MESH row: ALLREDUCE, intra-node."""
    ssm = parse_algo_override("single_step_mesh")
    with pytest.raises(SelectionError, match="SINGLE_STEP_MESH is intra-node only"):
        select(req(AR, ONE_PER_NODE_2, 1 * KiB), T2N, override=ssm)
    for op, name in ((AG, "ALLGATHER"), (RS, "REDUCE_SCATTER")):
        with pytest.raises(SelectionError, match=rf"all-reduce only \(op_type {name}\)"):
            select(req(op, NODE0, 1 * KiB), T1N, override=ssm)


def test_intra_rdh_needs_a_platform_with_mesh(tmp_path):
    """§3 INTRA_RDH row: the platform has mesh (TOPOLOGY.md: ``"mesh": false``)."""
    f = tmp_path / "nomesh.json"
    f.write_text(json.dumps({"platform": "trn2", "nodes": 1, "mesh": False}))
    topo = load_topology(str(f), world=(), lnc_size=2)
    ok, why = enc_can_post_intra_rdh_operation(req(AR, NODE0, 4 * MiB), topo,
                                               check_window=False)
    assert not ok and "has no mesh" in why


def test_inter_rdh_needs_one_rank_on_each_of_a_power_of_two_nodes():
    """§3 INTER_RDH row: one rank per node, node_n a power of two >= 8."""
    t12 = load_topology("trn2:nodes=12", world=(), lnc_size=2)
    ok, why = enc_can_post_inter_rdh_operation(req(AG, tuple(64 * n for n in range(12))), t12,
                                               check_window=False)
    assert not ok and "node_n 12 is not a power of two >= 8" in why
    two_each = tuple(r for n in range(8) for r in (64 * n, 64 * n + 1))
    ok, why = enc_can_post_inter_rdh_operation(req(AG, two_each), T8N, check_window=False)
    assert not ok and "needs one rank per node (local_rank_n 2)" in why


def test_mesh_all_to_all_is_legal_but_not_lowerable():
    """SELECTION.md: (MESH, ALLTOALL) is in Policy.not_lowerable_ops, and explain's
    candidates say so."""
    sel = select(req(A2A, NODE0, 4 * MiB), T1N, strict=False)
    mesh = sel.candidate(EncAlgType.MESH)
    assert mesh.legal and not mesh.lowerable


def test_the_hier_log_line_lists_the_five_slots_in_the_runtimes_order():
    """Seed 000 §1.4: "Hier algorithm selections - alg_intra_allg %d alg_intra_redsct %d
    alg_inter_allr %d alg_inter_allg %d alg_inter_redsct %d" with enc_alg_type ordinals.  A
    64 MiB all-reduce over two nodes with the (unused) inter_allg slot forced to MESH: intra
    legs KANGARING (3, 64 MiB >= 56 MiB), inter_allr SINGLE_CYCLE_RING (4, a 1 MiB leg),
    inter_allg MESH (2), inter_redsct RING (0: MESH past 64 KiB, INTER_RDH needs 8 nodes)."""
    sel = select(req(AR, TWO_NODES, 64 * MiB), T2N, override=parse_algo_override("inter_allg:mesh"))
    assert sel.hier_log_line() == ("Hier algorithm selections - alg_intra_allg 3 "
                                   "alg_intra_redsct 3 alg_inter_allr 4 alg_inter_allg 2 "
                                   "alg_inter_redsct 0")


@pytest.mark.parametrize("algo", ["inter_allg:kangaring", "inter_allg:inter_rdh",
                                  "^ring,mesh,inter_rdh"])
def test_a_leg_clause_on_a_leg_the_op_does_not_run_is_no_error(algo):
    """SELECTION.md §8: a forced leg engine outside its slot's legal set or refused by its
    predicate, or an exclusion that leaves a leg no engine, is an error "only for legs the op
    runs".  An all-reduce runs intra_redsct, inter_allr and intra_allg: KANGARING is not in
    inter_allg's set (RING, INTER_RDH, MESH), INTER_RDH needs one rank per node (two nodes of
    64 here), and ^ring,mesh,inter_rdh leaves the inter_allg and inter_redsct slots nothing.
    The 64 MiB all-reduce over two trn2 nodes keeps the legs it has without the clause:
    KANGARING intra legs (64 MiB >= 56 MiB), SINGLE_CYCLE_RING on the 1 MiB inter_allr leg
    (MESH past its 64 KiB, INTER_RDH needs 8 nodes; 1 MiB in SINGLE_CYCLE_RING's [0, 4 MiB)),
    and the unused slots log RING (0), as without an override."""
    sel = select(req(AR, TWO_NODES, 64 * MiB), T2N, override=parse_algo_override(algo))
    assert sel.alg == EncAlgType.HIER
    assert [(leg.name, leg.alg) for leg in sel.legs] == [
        ("intra_redsct", EncAlgType.KANGARING), ("inter_allr", EncAlgType.SINGLE_CYCLE_RING),
        ("intra_allg", EncAlgType.KANGARING)]
    assert sel.hier_log_line() == ("Hier algorithm selections - alg_intra_allg 3 "
                                   "alg_intra_redsct 3 alg_inter_allr 4 alg_inter_allg 0 "
                                   "alg_inter_redsct 0")


def test_forcing_mesh_on_a_platform_without_mesh_says_so(tmp_path):
    """§3 MESH row and TOPOLOGY.md: with ``"mesh": false`` "no mesh engine is legal"; forcing
    MESH is a SelectionError naming the platform, and explain's MESH candidate is not legal
    for that reason."""
    f = tmp_path / "nomesh.json"
    f.write_text(json.dumps({"platform": "trn2", "nodes": 1, "mesh": False}))
    topo = load_topology(str(f), world=(), lnc_size=2)
    sel = select(req(AR, NODE0, 4 * MiB), topo, strict=False)
    mesh = sel.candidate(EncAlgType.MESH)
    # (the file's platform, changed from the preset's, named as the file's: until 2026-12-06
    # "trn2 has no mesh", untrue of the preset trn2)
    named = "the topology file's platform trn2"
    assert not mesh.legal and mesh.reason == f"{named} has no mesh (nccl_mesh_supported false)"
    with pytest.raises(SelectionError) as exc:
        select(req(AR, NODE0, 4 * MiB), topo, override=parse_algo_override("mesh"))
    assert str(exc.value) == ("trigger 0: --algo 'mesh' forces MESH, refused: "
                              f"enc_can_post_mesh_operation: {named} has no mesh "
                              "(nccl_mesh_supported false)")
    rdh = select(req(AR, NODE0, 4 * MiB), topo, strict=False).candidate(EncAlgType.INTRA_RDH)
    assert not rdh.legal and rdh.reason.startswith(f"{named} has no mesh (")
    kanga = {"platform": "trn2", "nodes": 1, "kangaring": False}
    (tmp_path / "nokanga.json").write_text(json.dumps(kanga))
    topo = load_topology(str(tmp_path / "nokanga.json"), world=(), lnc_size=2)
    kr = select(req(AR, NODE0, 4 * MiB), topo, strict=False).candidate(EncAlgType.KANGARING)
    assert not kr.legal and kr.reason.startswith(
        "the topology file's platform trn2 has no kangaring (")
    # a preset's platform is named as before, also from a file that is exactly the preset (a
    # preset output's own topology object given back: its manifest's reasons the same)
    (tmp_path / "t1.json").write_text(json.dumps({"platform": "trn1", "nodes": 1}))
    for spec in ("trn1", str(tmp_path / "t1.json")):
        trn1 = select(req(AR, (0, 1), 4 * MiB), load_topology(spec, world=(), lnc_size=1),
                      strict=False).candidate(EncAlgType.KANGARING)
        assert not trn1.legal and trn1.reason.startswith("trn1 has no kangaring ("), spec


def test_forcing_single_cycle_ring_on_the_inter_allg_leg_names_the_legs_engines():
    """§3 / §5: the inter all-gather leg's engines are RING, INTER_RDH, MESH."""
    with pytest.raises(SelectionError, match=r"SINGLE_CYCLE_RING is not legal on the "
                                             r"inter_allg leg \(legal: RING, INTER_RDH, MESH\)"):
        select(req(AG, TWO_NODES), T2N,
               override=parse_algo_override("inter_allg:single_cycle_ring"))


def test_a_leg_engine_that_cannot_be_a_leg_is_replaced_inside_a_window_first():
    """§6: an INTER_RDH inter_allr leg (not a leg engine) is lowered with the first leg engine
    of its slot whose predicate holds inside its window first.  8 MiB over two ranks on each of
    8 nodes: the inter_allr leg is 4 MiB, past SINGLE_CYCLE_RING's [0, 4 MiB) and inside
    INTER_RDH's [0, 64 MiB): the policy's INTER_RDH is lowered as RING, not SINGLE_CYCLE_RING."""
    group = tuple(r for n in range(8) for r in (64 * n, 64 * n + 1))
    sel = select(req(AR, group, 8 * MiB), T8N)
    pol = {leg.name: leg.alg for leg in sel.policy_legs}
    low = {leg.name: leg.alg for leg in sel.legs}
    assert pol["inter_allr"] == EncAlgType.INTER_RDH and low["inter_allr"] == EncAlgType.RING
    assert "inter_allr: INTER_RDH is not lowerable as a HIER leg in this build; RING instead" \
        in sel.fallback_reason


def test_without_an_override_nothing_inside_a_window_is_an_error():
    """§4: without an --algo it is the first engine that is legal and inside its window; a
    policy whose precedence leaves out RING has none for an all-gather of 2 MiB over 3
    devices (MESH legal but past 1 MiB; INTRA_RDH, KANGARING refused)."""
    pol = Policy(precedence=(EncAlgType.HIER, EncAlgType.INTRA_RDH, EncAlgType.MESH,
                             EncAlgType.KANGARING))
    with pytest.raises(SelectionError, match="no legal engine"):
        select(req(AG, THREE_DEVICES, 2 * MiB + 2), T1N, policy=pol)


def test_the_lowering_fallback_stays_inside_a_window():
    """§6: "RING for a 64 MiB all-reduce whose policy engine is KANGARING, not an
    out-of-window INTRA_RDH" (a build that cannot lower KANGARING)."""
    pol = Policy(lowerable=DEFAULT_POLICY.lowerable - {EncAlgType.KANGARING})
    sel = select(req(AR, NODE0, 64 * MiB), T1N, policy=pol)
    assert sel.policy_alg == EncAlgType.KANGARING and sel.alg == EncAlgType.RING


def test_inter_rdh_runs_one_channel_and_is_the_rdh_metaring():
    """§6 / §7: INTER_RDH uses one channel; its metaring_type is RDH.  A 1 MiB all-gather over
    one rank on each of 8 nodes (MESH past 64 KiB; SINGLE_CYCLE_RING all-reduce only)."""
    sel = select(req(AG, ONE_PER_NODE_8, 1 * MiB), T8N)
    assert sel.alg == EncAlgType.INTER_RDH
    assert sel.n_channels == 1 and sel.metaring_type == MetaringType.RDH


def test_a_cascade_reason_names_the_groups_node_count():
    """The reason of an inter-node choice says over how many nodes: "for 8-node ALLREDUCE"."""
    sel = select(req(AR, ONE_PER_NODE_8, 1 * MiB), T8N)
    assert " for 8-node ALLREDUCE 1 MiB (" in sel.reason


def test_a_leg_clause_is_idle_where_nothing_is_lowered_as_hier():
    """§8: a leg clause is idle where no collective is lowered as HIER with that leg: a build
    that lowers only RING lowers the two-node all-reduce flat."""
    from nrtrewrite.select import idle_clauses
    sel = select(req(AR, TWO_NODES), T2N, policy=Policy(lowerable=frozenset({EncAlgType.RING})))
    assert sel.policy_alg == EncAlgType.HIER and sel.alg == EncAlgType.RING
    assert idle_clauses(parse_algo_override("inter_allr:ring"), [sel]) == [
        "--algo clause 'inter_allr:ring' applies to nothing in this model: no collective is "
        "lowered as HIER with an inter_allr leg"]


def test_sizes_are_printed_to_four_digits_in_the_largest_unit():
    """§8: sizes in reasons are rounded to four digits; GiB is a unit; a whole number of
    units has no digits after the point."""
    from nrtrewrite.policy import fmt_bytes
    assert fmt_bytes(1152) == "1.125 KiB"
    assert fmt_bytes(1 << 30) == "1 GiB" and fmt_bytes(3 << 29) == "1.5 GiB"
    assert fmt_bytes(10000 << 30) == "10000 GiB"
    # five digits or more of a unit print whole, never as an exponent ("1e+04 GiB"), and a
    # size that rounds carries its bytes: 10000 x 2**30 + 1 = 10737418240001
    assert fmt_bytes((10000 << 30) + 1) == "10000 GiB (10737418240001 B)"
    assert fmt_bytes((12345 << 30) + (1 << 29)) == "12346 GiB (13255879688192 B)"


def test_the_channel_rule_has_the_documented_constants():
    """§7: 256 KiB a channel, caps 32 (NEC_MAX_CHANNELS), 4 inside a node, 16 across nodes,
    64 elements per rank per channel."""
    p = DEFAULT_POLICY
    assert (p.bytes_per_channel, p.max_channels, p.max_channels_intra, p.max_channels_inter,
            p.min_elements_per_rank_channel) == (256 * KiB, 32, 4, 16, 64)


def test_a_hier_plan_with_an_unlowerable_leg_falls_back_to_a_flat_engine():
    """§6: when a leg engine of the policy's HIER is not in Policy.lowerable (a build that
    cannot lower SINGLE_CYCLE_RING), the selection falls back to one leg named ``flat`` over
    the whole group: RING (MESH, KANGARING, the RDHs are refused over two whole nodes), never
    HIER again."""
    pol = Policy(lowerable=DEFAULT_POLICY.lowerable - {EncAlgType.SINGLE_CYCLE_RING})
    sel = select(req(AR, TWO_NODES, 64 * MiB), T2N, policy=pol)
    assert sel.policy_alg == EncAlgType.HIER
    assert sel.alg == EncAlgType.RING
    assert [(leg.name, leg.alg) for leg in sel.legs] == [("flat", EncAlgType.RING)]
    assert sel.fallback_reason.startswith(
        "HIER (intra_redsct KANGARING -> inter_allr SINGLE_CYCLE_RING -> intra_allg KANGARING) "
        "is not lowerable in this build")


_NODE_ONLY = "(group lies within one node; --algo may force it)"


def test_a_flat_fallback_says_why_each_engine_after_the_policys_was_skipped():
    """Bug: when the policy's engine could not be lowered, fallback_reason said what was
    lowered instead but not why the engines between the two were skipped (§6).  4 MiB of
    bf16 over a whole trn2 node at LNC 2 (16 devices x 4 ranks): the policy's INTRA_RDH
    (inside [1 MiB, 56 MiB)); a build lowering RING and MESH walks on: MESH past its
    [0, 1 MiB), KANGARING short of its [56 MiB, inf), SINGLE_CYCLE_RING's policy gate (one
    node), INTER_RDH inter-node only, then RING, always legal and in no window."""
    sel = select(req(AR, NODE0, 4 * MiB), T1N,
                 policy=Policy(lowerable=frozenset({EncAlgType.RING, EncAlgType.MESH})))
    assert (sel.policy_alg, sel.alg) == (EncAlgType.INTRA_RDH, EncAlgType.RING)
    assert sel.fallback_reason == (
        "INTRA_RDH is not lowerable in this build (lowerable: RING, MESH); lowering RING over "
        "the whole group instead; "
        "MESH not taken: 4 MiB not below op_max_limit[ALLREDUCE] 1 MiB; "
        "KANGARING not taken: 4 MiB below op_min_limit[ALLREDUCE] 56 MiB; "
        "SINGLE_CYCLE_RING not taken: policy gate: SINGLE_CYCLE_RING is inter-node only "
        f"{_NODE_ONLY}; "
        "INTER_RDH not taken: INTER_RDH is inter-node only (group lies within one node)")
    # the words of explain's candidate table, for every engine but the one not lowerable
    for a in _passed(sel.fallback_reason):
        assert f"; {a} not taken: {sel.candidate(EncAlgType[a]).reason}" in sel.fallback_reason


def test_a_flat_fallback_outside_its_window_says_so_and_names_what_it_skipped():
    """§6: with no lowerable engine inside its window, the first legal lowerable one is taken
    outside it.  The same 4 MiB, a build lowering KANGARING only: MESH (legal, after
    INTRA_RDH) is not lowerable, KANGARING is taken short of its 56 MiB.  A fallback before
    the policy's engine leaves none between: 64 MiB, the policy's KANGARING not lowerable for
    ALLREDUCE (nor RING), INTRA_RDH taken past its 56 MiB."""
    sel = select(req(AR, NODE0, 4 * MiB), T1N,
                 policy=Policy(lowerable=frozenset({EncAlgType.KANGARING})))
    assert (sel.policy_alg, sel.alg) == (EncAlgType.INTRA_RDH, EncAlgType.KANGARING)
    assert sel.fallback_reason == (
        "INTRA_RDH is not lowerable in this build (lowerable: KANGARING); lowering KANGARING "
        "over the whole group instead; KANGARING outside its size window (4 MiB below "
        "op_min_limit[ALLREDUCE] 56 MiB): none allowed and lowerable is inside its own; "
        "MESH not taken: not lowerable in this build")
    pol = Policy(not_lowerable_ops=frozenset({(EncAlgType.KANGARING, AR), (EncAlgType.RING, AR)}))
    sel = select(req(AR, NODE0, 64 * MiB), T1N, policy=pol)
    assert (sel.policy_alg, sel.alg) == (EncAlgType.KANGARING, EncAlgType.INTRA_RDH)
    assert sel.fallback_reason.endswith(
        "; lowering INTRA_RDH over the whole group instead; INTRA_RDH outside its size window "
        "(64 MiB not below op_max_limit[ALLREDUCE] 56 MiB): none allowed and lowerable is "
        "inside its own")
    assert sel.fallback_reason.startswith("KANGARING ALLREDUCE is not lowerable in this build")
    # an engine lowerable but not for the op says so: a precedence MESH > RING >
    # SINGLE_STEP_MESH on 4 KiB over 8 ranks (2 devices): MESH inside [0, 1 MiB) but not
    # lowerable, RING legal and in no window but not lowerable for ALLREDUCE, then
    # SINGLE_STEP_MESH (7 peers x 4 KiB of its 8 MiB channel buffer, no window)
    pol = Policy(lowerable=DEFAULT_POLICY.lowerable - {EncAlgType.MESH},
                 not_lowerable_ops=frozenset({(EncAlgType.RING, AR)}),
                 precedence=(EncAlgType.MESH, EncAlgType.RING, EncAlgType.SINGLE_STEP_MESH))
    sel = select(req(AR, NODE0[:8], 4 * KiB), T1N, policy=pol)
    assert (sel.policy_alg, sel.alg) == (EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH)
    assert sel.fallback_reason == (
        "MESH is not lowerable in this build (lowerable: RING, HIER, KANGARING, "
        "SINGLE_CYCLE_RING, INTRA_RDH, SINGLE_STEP_MESH, INTER_RDH); lowering "
        "SINGLE_STEP_MESH over the whole group instead; RING not taken: not lowerable for "
        "ALLREDUCE in this build")


def test_a_flat_fallback_passes_hier_as_no_flat_engine():
    """§6: the fallback is one flat leg, never HIER, and says so when a precedence puts HIER
    after the policy's choice: RING > HIER in a build without RING, 64 MiB over two whole
    trn2 nodes.  HIER (legal) is passed, the RDHs, MESH and KANGARING are not legal there,
    and SINGLE_CYCLE_RING (structurally legal for any all-reduce, its policy gate checked
    with the window, §3) is taken past its gate, which the reason names (until 2026-12-06
    "outside its size window (policy gate: ...)")."""
    pol = Policy(lowerable=DEFAULT_POLICY.lowerable - {EncAlgType.RING},
                 precedence=(EncAlgType.RING, EncAlgType.HIER))
    sel = select(req(AR, TWO_NODES, 64 * MiB), T2N, policy=pol)
    assert (sel.policy_alg, sel.alg) == (EncAlgType.RING, EncAlgType.SINGLE_CYCLE_RING)
    assert sel.fallback_reason == (
        "RING is not lowerable in this build (lowerable: HIER, MESH, KANGARING, "
        "SINGLE_CYCLE_RING, INTRA_RDH, SINGLE_STEP_MESH, INTER_RDH); lowering "
        "SINGLE_CYCLE_RING over the whole group instead (flat over 2 nodes: 2 network hops "
        "per channel); SINGLE_CYCLE_RING fails its policy gate (policy gate: "
        "SINGLE_CYCLE_RING needs one rank per node (rank_n 128 != node_n 2; --algo may force "
        "it)): none allowed and lowerable is inside its own size window and passes its "
        "policy gate; "
        "HIER not taken: the fallback is one flat leg over the whole group; "
        "INTRA_RDH not taken: INTRA_RDH is intra-node only (group spans 2 nodes); "
        "MESH not taken: inter-node mesh over the whole group needs one rank per node "
        "(local_rank_n 64); such groups go hierarchical; "
        "KANGARING not taken: KANGARING is intra-node only (group spans 2 nodes)")


def test_a_flat_fallback_under_an_override_names_only_the_engines_it_allows():
    """§6, §8: the fallback stays inside the override, and names only the engines it allows.
    64 MiB over two whole trn2 nodes, a build without SINGLE_CYCLE_RING: HIER, whose
    inter_allr leg (a 1 MiB slice, inside SINGLE_CYCLE_RING's [0, 4 MiB)) it cannot lower;
    ``^mesh`` leaves MESH out of the walk to RING."""
    pol = Policy(lowerable=DEFAULT_POLICY.lowerable - {EncAlgType.SINGLE_CYCLE_RING})
    sel = select(req(AR, TWO_NODES, 64 * MiB), T2N, policy=pol,
                 override=parse_algo_override("^mesh"))
    assert (sel.policy_alg, sel.alg) == (EncAlgType.HIER, EncAlgType.RING)
    assert sel.fallback_reason == (
        "HIER (intra_redsct KANGARING -> inter_allr SINGLE_CYCLE_RING -> intra_allg KANGARING) "
        "is not lowerable in this build (lowerable: RING, HIER, MESH, KANGARING, INTRA_RDH, "
        "SINGLE_STEP_MESH, INTER_RDH); lowering RING over the whole group instead (flat over "
        "2 nodes: 2 network hops per channel); "
        "INTRA_RDH not taken: INTRA_RDH is intra-node only (group spans 2 nodes); "
        "KANGARING not taken: KANGARING is intra-node only (group spans 2 nodes); "
        "SINGLE_CYCLE_RING not taken: policy gate: SINGLE_CYCLE_RING needs one rank per node "
        "(rank_n 128 != node_n 2; --algo may force it); "
        "INTER_RDH not taken: INTER_RDH needs one rank per node (local_rank_n 64)")



def test_no_fallback_the_override_allows_names_the_override():
    """§6 (a review, 2026-12-06): a build lowering RING alone, ``^ring``, a 4 MiB all-reduce
    over a trn2 node: the policy's INTRA_RDH cannot be lowered and RING, legal and lowerable,
    is excluded.  The line said ``no lowerable engine is legal for ALLREDUCE``, untrue, and
    named no override; it names the override and the engine it keeps out.  Without an
    override (an all-to-all, MESH not lowerable) it says what it said."""
    pol = Policy(lowerable={EncAlgType.RING})
    with pytest.raises(SelectionError) as exc:
        select(req(AR, NODE0, 4 * MiB), T1N, policy=pol, override=parse_algo_override("^ring"))
    assert str(exc.value) == (
        "trigger 0: INTRA_RDH is not lowerable in this build (lowerable: RING, each for its "
        "own ops; not for ALLREDUCE: INTRA_RDH) and no lowerable engine --algo '^ring' allows "
        "is legal for ALLREDUCE (legal and lowerable but not allowed: RING)")
    with pytest.raises(SelectionError) as exc:
        select(req(EncOpType.ALLTOALL, NODE0, 4 * MiB), T1N, policy=pol)
    assert str(exc.value).endswith("and no lowerable engine is legal for ALLTOALL")

# -- the composers' own size limits are legality (a reviewer of compose/ and select.py) ----

def _big_node(tmp_path):
    """trn2 with an 8 x 8 torus of devices: 512 ranks on one node at LNC 1."""
    path = tmp_path / "big8x8.json"
    path.write_text(json.dumps({"format": "nrtrewrite-topology/1", "name": "big8x8",
                                "platform": "trn2", "nodes": 1, "devices_per_node": 64,
                                "torus": [8, 8]}))
    return load_topology(str(path), world=(), lnc_size=1)


def test_inter_rdh_over_256_nodes_is_not_legal_and_ring_serves_it():
    """Found by a code reviewer: a 64 KiB all-gather over 256 nodes, one rank each (default
    trn2), picked INTER_RDH, whose composer refuses 8 doubling steps (EVT_RD_STEP_0..6), so
    lower and explain failed where RING lowers.  2^floor(log2 n) ranks take log2 of that
    steps: 255 ranks take 7, 256 take 8."""
    t256 = load_topology("trn2:nodes=256", world=(), lnc_size=2)
    group = tuple(64 * n for n in range(256))
    ok, why = enc_can_post_inter_rdh_operation(req(AG, group, 64 * KiB), t256,
                                               check_window=False)
    assert not ok and why == ("256 ranks need 8 recursive-doubling steps; the events "
                              "EVT_RD_STEP_0..6 allow 7 (at most 255 ranks)")
    sel = select(req(AG, group, 64 * KiB), t256)
    assert sel.policy_alg == sel.alg == EncAlgType.RING and sel.fallback_reason is None
    t128 = load_topology("trn2:nodes=128", world=(), lnc_size=2)
    ok, _ = enc_can_post_inter_rdh_operation(req(AG, group[:128], 64 * KiB), t128,
                                             check_window=False)
    assert ok  # 128 nodes: 7 steps


def test_intra_rdh_mesh_and_kangaring_past_their_composers_limits_are_not_legal(tmp_path):
    big = _big_node(tmp_path)
    ok, why = enc_can_post_intra_rdh_operation(req(AR, tuple(range(256)), MiB), big,
                                               check_window=False)
    assert not ok and why.startswith("256 ranks need 8 recursive-doubling steps")
    # 255 ranks are 7 steps (a hypercube of 128, 127 folded), but 255 is not whole devices
    # of 8: the step rule alone, by the helper both predicates use
    from nrtrewrite.select import _rd_steps_refusal
    assert _rd_steps_refusal(255) is None and _rd_steps_refusal(256) is not None
    # MESH numbers every rank as a peer in the leg IR's u8 columns: 256 ranks, not 264
    ok, why = enc_can_post_mesh_operation(req(AR, tuple(range(264)), 528), big,
                                          check_window=False)
    assert not ok and why.startswith("264 ranks: a mesh entry numbers itself and every peer")
    ok, _ = enc_can_post_mesh_operation(req(AR, tuple(range(256)), 512), big,
                                        check_window=False)
    assert ok
    # KANGARING's logical_path[256] (seed 000 §2.3): 264 ranks on 33 whole devices
    ok, why = enc_can_post_kangaring_operation(req(AR, tuple(range(264))), big,
                                               check_window=False)
    assert not ok and "logical_path[256]" in why
    ok, _ = enc_can_post_kangaring_operation(req(AR, tuple(range(256))), big,
                                             check_window=False)
    assert ok
    # the default policy then serves each with RING, as lower does
    for group, nbytes in ((tuple(range(264)), 528), (tuple(range(256)), MiB),
                          (tuple(range(264)), 64 * MiB)):
        sel = select(req(AR, group, nbytes), big)
        assert sel.alg == EncAlgType.RING, (len(group), nbytes, sel.alg)


def _in_place_model(tmp_path, n: int):
    """Two 64-element BF16 all-reduces over ranks 0..n-1: trigger 0 from var c into var b,
    trigger 1 in place (var t into itself)."""
    from conftest import sp, unvalidated_spec

    from nrtrewrite.neff import read_model
    from nrtrewrite.neff.assembler import assemble_spec

    def mutate(s):
        s["header"]["lnc_size"] = 2
        s["subgraphs"][0]["vars"] = [{"name": "c", "type": "input", "size": 128},
                                     {"name": "b", "type": "output", "size": 128},
                                     {"name": "t", "type": "tmp-buf", "size": 128}]
        s["subgraphs"][0]["replica_groups"] = [list(range(n))]
        sp(s)[:] = [{"all_reduce": {"dtype": "bf16", "op": "add", "src": src, "dst": dst,
                                    "num_elements": 64}} for src, dst in (("c", "b"), ("t", "t"))]
    path = tmp_path / f"ar{n}.neff"
    path.write_bytes(assemble_spec(unvalidated_spec(mutate)))
    return read_model(path)


@pytest.mark.parametrize("n", [9, 16, 32, 64])
def test_the_fallback_takes_single_step_mesh_in_place_over_more_than_8_ranks(tmp_path, n):
    """Until 2026-12-06 ``lower`` refused SINGLE_STEP_MESH in place over more than MAX_SRC
    = 8 ranks, and so the flat fallback (SELECTION.md §6) passed it there for RING, saying
    why, and a build lowering it alone had no fallback. This test, then named
    ``..._passes_...``, asserts what holds now that ``lower`` lowers it (its chain adds up in an
    accumulator, docs/DESIGN.md "Mesh and RDH"): a build lowering SINGLE_STEP_MESH and RING,
    precedence MESH > SINGLE_STEP_MESH > RING, MESH (the policy's) not lowerable, falls back
    to SINGLE_STEP_MESH for the in-place trigger as for the out-of-place one, with the same
    reason, and its prepare takes both; a build lowering SINGLE_STEP_MESH alone takes it for
    both; explain's plan agrees (no refusal)."""
    from nrtrewrite.cli.explain import _plan_context, _plan_model
    from nrtrewrite.lower import prepare_trigger
    m = _in_place_model(tmp_path, n)
    pol = Policy(lowerable=frozenset({EncAlgType.SINGLE_STEP_MESH, EncAlgType.RING}),
                 precedence=(EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH, EncAlgType.RING))
    alone = Policy(lowerable=frozenset({EncAlgType.SINGLE_STEP_MESH}))
    for trig in m.triggers:  # out of place, then in place
        sel = select(trig, T1N, policy=pol)
        assert (sel.policy_alg, sel.alg) == (EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH)
        assert sel.fallback_reason == (
            "MESH is not lowerable in this build (lowerable: RING, SINGLE_STEP_MESH); "
            "lowering SINGLE_STEP_MESH over the whole group instead")
        prepare_trigger(_plan_context(T1N), trig, sel)  # lower lowers it
        sel = select(trig, T1N, policy=alone)
        assert sel.alg == EncAlgType.SINGLE_STEP_MESH
        prepare_trigger(_plan_context(T1N), trig, sel)
    for policy in (pol, alone):
        mp = _plan_model(m, T1N, None, policy, {0, 1})
        assert mp.refusals == {} and [s.alg for s in mp.selections.values()] == [
            EncAlgType.SINGLE_STEP_MESH, EncAlgType.SINGLE_STEP_MESH]


def test_the_fallback_keeps_single_step_mesh_in_place_over_8_ranks(tmp_path):
    """8 sources fit one leg (MAX_SRC): in place over 8 ranks lower lowers SINGLE_STEP_MESH,
    and the fallback takes it, as it does over more ranks now (the test above); over 8 its
    reduce is one link, which needs no accumulator: the trigger's scratch is its channel
    buffer, 7 peers' 128-byte inputs; over 9 ranks in place too, 8 x 128, the accumulator
    being slot 0 of it (docs/DESIGN.md "Mesh and RDH"; until 2026-12-06 it was one more
    slot, 9 x 128)."""
    from nrtrewrite.cli.explain import _plan_context
    from nrtrewrite.lower import prepare_trigger
    pol = Policy(lowerable=frozenset({EncAlgType.SINGLE_STEP_MESH, EncAlgType.RING}),
                 precedence=(EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH, EncAlgType.RING))
    for n, scratch in ((8, 7 * 128), (9, 8 * 128)):
        _, in_place = _in_place_model(tmp_path, n).triggers
        sel = select(in_place, T1N, policy=pol)
        assert sel.alg == EncAlgType.SINGLE_STEP_MESH
        assert sel.fallback_reason == ("MESH is not lowerable in this build (lowerable: RING, "
                                       "SINGLE_STEP_MESH); lowering SINGLE_STEP_MESH over the "
                                       "whole group instead")
        tp = prepare_trigger(_plan_context(T1N), in_place, sel)
        assert tp.prepared.scratch_bytes == scratch
