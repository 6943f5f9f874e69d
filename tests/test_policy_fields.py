"""docs/SELECTION.md §9: ``Policy`` refuses at construction every field value ``select``
cannot work with, naming ``Policy.<field>`` and saying what it holds last (as the check of
``bytes_per_channel`` did), and keeps every value that works.

Until 2026-12-06 only ``bytes_per_channel`` and ``min_elements_per_rank_channel`` were
checked: a string in ``precedence`` raised AttributeError in ``select`` (``'str' object has
no attribute 'name'``), a string ``lowerable`` a TypeError, a ``None`` cap or node bound a
TypeError, a cap of 2.5 gave 2.5 channels, and a duplicate window row, a row of an unknown
scope or with swapped limits were silently never used."""
from __future__ import annotations

from dataclasses import replace

import pytest

from nrtrewrite.codes import DType, EncAlgType, EncOpType
from nrtrewrite.policy import DEFAULT_POLICY, DEFAULT_WINDOWS, INTRA, KiB, MiB, Policy, SizeWindow
from nrtrewrite.select import Request, select
from nrtrewrite.topology import load_topology

A, O = EncAlgType, EncOpType
T1N = load_topology("trn2", world=(), lnc_size=2)            # 64 ranks, one node
T2N = load_topology("trn2:nodes=2", world=(), lnc_size=2)    # 128 ranks, 64 a node
NODE0 = tuple(range(64))

#: the intra-node MESH all-reduce row: [0, 1 MiB), SELECTION.md §3
MESH_AR = SizeWindow(INTRA, A.MESH, O.ALLREDUCE, 0, 1 * MiB, 0, 1 * MiB, "test")
#: the default table without its intra-node MESH all-reduce row (the tests put theirs)
OTHER_ROWS = tuple(r for r in DEFAULT_WINDOWS
                   if (r.scope, r.alg, r.op) != (INTRA, A.MESH, O.ALLREDUCE))


def req(op, group, nbytes):
    return Request.for_op(op, DType.BF16, group, nbytes)


def refused(**fields) -> str:
    with pytest.raises(ValueError) as err:
        Policy(**fields)
    return str(err.value)


# ------------------------------------------------------------------ refused

@pytest.mark.parametrize("name", ["max_channels", "max_channels_intra", "max_channels_inter",
                                  "inter_mesh_max_nodes", "inter_rdh_min_nodes"])
@pytest.mark.parametrize("value, shown", [(2.5, "2.5"), (None, "None"), ("4", "'4'"),
                                          (True, "True")])
def test_a_count_that_is_no_integer_is_refused(name, value, shown):
    assert refused(**{name: value}) == f"Policy.{name} must be an integer, not {shown}"


@pytest.mark.parametrize("value, says", [
    (("RING",), "Policy.precedence[0] must be an EncAlgType engine (not INVALID), not 'RING'"),
    ((A.HIER, 0), "Policy.precedence[1] must be an EncAlgType engine (not INVALID), not 0"),
    ((A.RING, A.INVALID), "Policy.precedence[1] must be an EncAlgType engine (not INVALID), "
                          "not EncAlgType.INVALID"),
    ((), "Policy.precedence must name at least one engine, not ()"),
    ("RING", "Policy.precedence must be a tuple of EncAlgType engines, not 'RING'"),
    ((A.MESH, A.RING, A.MESH), "Policy.precedence[2] must be an engine no earlier item names, "
                               "not MESH (precedence[0])"),
])
def test_a_precedence_select_cannot_run_is_refused(value, says):
    assert refused(precedence=value) == says


def test_the_default_precedence_with_ring_again_names_both_places():
    """SELECTION.md §9's example: the default cascade has 7 engines, RING last (index 6)."""
    assert refused(precedence=DEFAULT_POLICY.precedence + (A.RING,)) == (
        "Policy.precedence[7] must be an engine no earlier item names, not RING "
        "(precedence[6])")


@pytest.mark.parametrize("name", ["lowerable", "hier_leg_lowerable"])
def test_a_lowerable_set_of_no_engines_is_refused(name):
    assert refused(**{name: "RING"}) == (f"Policy.{name} must be a frozenset of EncAlgType "
                                         "engines, not 'RING'")
    for item, shown in (("RING", "'RING'"), (0, "0"), (A.INVALID, "EncAlgType.INVALID")):
        assert refused(**{name: frozenset({A.HIER, item})}) == (
            f"Policy.{name} must hold EncAlgType engines (not INVALID) only, not {shown}")


def test_not_lowerable_ops_must_be_engine_op_pairs():
    for item, shown in ((("MESH", "ALLTOALL"), "('MESH', 'ALLTOALL')"),
                        (A.MESH, "EncAlgType.MESH"),
                        ((A.MESH,), "(EncAlgType.MESH,)"),
                        ((O.ALLTOALL, A.MESH), "(EncOpType.ALLTOALL, EncAlgType.MESH)")):
        assert refused(not_lowerable_ops=frozenset({item})) == (
            "Policy.not_lowerable_ops must hold (EncAlgType, EncOpType) pairs only, not "
            f"{shown}")


@pytest.mark.parametrize("row, says", [
    (replace(MESH_AR, op_min_limit=2 * MiB),
     "op_min_limit must be at most op_max_limit 1048576, not 2097152"),
    (replace(MESH_AR, op_min_limit_sbuf=3, op_max_limit_sbuf=2),
     "op_min_limit_sbuf must be at most op_max_limit_sbuf 2, not 3"),
    (replace(MESH_AR, scope="Intra"), "scope must be 'intra' or 'inter', not 'Intra'"),
    (replace(MESH_AR, alg="MESH"), "alg must be an EncAlgType engine (not INVALID), not 'MESH'"),
    (replace(MESH_AR, alg=A.INVALID),
     "alg must be an EncAlgType engine (not INVALID), not EncAlgType.INVALID"),
    (replace(MESH_AR, op=1), "op must be an EncOpType, not 1"),
    (replace(MESH_AR, op_min_limit=None), "op_min_limit must be a non-negative integer, not None"),
    (replace(MESH_AR, op_min_limit=-5), "op_min_limit must be a non-negative integer, not -5"),
    (replace(MESH_AR, op_max_limit=1.5 * MiB),
     "op_max_limit must be a non-negative integer or None (no upper limit), not 1572864.0"),
])
def test_a_window_row_that_cannot_gate_is_refused_naming_its_index(row, says):
    # the default table's 18 rows (SELECTION.md §3: intra MESH 3 + all-to-all 1, INTRA_RDH 3,
    # KANGARING 3; inter MESH 3 + all-to-all 1, SINGLE_CYCLE_RING 1, INTER_RDH 3) less the
    # one replaced: the row after them is windows[17]
    assert len(OTHER_ROWS) == 17
    assert refused(windows=OTHER_ROWS + (row,)) == f"Policy.windows[17].{says}"


def test_a_window_row_twice_is_refused_naming_both():
    """A second row of the same (scope, alg, op) replaced the first in the lookup, silently."""
    assert refused(windows=(MESH_AR, replace(MESH_AR, op_max_limit=None))) == (
        "Policy.windows[1] must be a (scope, alg, op) no earlier row has, not ('intra', MESH, "
        "ALLREDUCE) (windows[0])")
    assert refused(windows=((0, 1 * MiB),)) == ("Policy.windows[0] must be a SizeWindow, not "
                                                "(0, 1048576)")
    assert refused(windows=MESH_AR).startswith("Policy.windows must be a tuple of SizeWindow "
                                               "rows, not SizeWindow(")


# ------------------------------------------------------------------ kept

def test_sequences_and_sets_of_engines_are_kept_as_tuples_and_frozensets():
    """A list works where a tuple is declared and a set or list where a frozenset is: each is
    kept as the declared type, so that the policy stays hashable."""
    p = Policy(precedence=[A.MESH, A.RING], lowerable={A.RING, A.MESH},
               hier_leg_lowerable=[A.RING], not_lowerable_ops=[(A.MESH, O.ALLTOALL)],
               windows=[MESH_AR])
    assert p.precedence == (A.MESH, A.RING)
    assert p.lowerable == frozenset({A.RING, A.MESH})
    assert p.hier_leg_lowerable == frozenset({A.RING})
    assert p.not_lowerable_ops == frozenset({(A.MESH, O.ALLTOALL)})
    assert p.windows == (MESH_AR,)
    hash(p)
    # 4 KiB all-reduce over a whole trn2 node: MESH first, inside [0, 1 MiB)
    assert select(req(O.ALLREDUCE, NODE0, 4 * KiB), T1N, policy=p).alg == A.MESH


def test_an_empty_window_is_kept_and_never_holds_its_engine():
    """op_min_limit == op_max_limit: [1 MiB, 1 MiB) holds no size. A 4 KiB all-reduce over a
    trn2 node: MESH out of it, INTRA_RDH ([1 MiB, 56 MiB)) and KANGARING (56 MiB up) out of
    theirs, SINGLE_CYCLE_RING and INTER_RDH inter-node only: RING."""
    p = Policy(windows=OTHER_ROWS + (replace(MESH_AR, op_min_limit=1 * MiB),))
    sel = select(req(O.ALLREDUCE, NODE0, 4 * KiB), T1N, policy=p)
    assert sel.policy_alg == A.RING
    assert sel.candidate(A.MESH).legal and not sel.candidate(A.MESH).in_window


def test_node_bounds_below_2_are_kept():
    """An all-reduce of 8 KiB over one rank on each of two nodes: with the default policy
    MESH (inter window [0, 64 KiB), 2 nodes <= 16); an inter_mesh_max_nodes of 0 keeps MESH
    out. An all-gather of 1 MiB over the same ranks: INTER_RDH needs a power of two of at
    least inter_rdh_min_nodes nodes, so 0 acts as 2 (legal on 2 nodes), the default 8 not."""
    two = (0, 64)
    assert select(req(O.ALLREDUCE, two, 8 * KiB), T2N).policy_alg == A.MESH
    sel = select(req(O.ALLREDUCE, two, 8 * KiB), T2N, policy=Policy(inter_mesh_max_nodes=0))
    assert sel.policy_alg != A.MESH and not sel.candidate(A.MESH).legal
    ag = req(O.ALLGATHER, two, 1 * MiB)
    assert not select(ag, T2N).candidate(A.INTER_RDH).legal
    at0 = select(ag, T2N, policy=Policy(inter_rdh_min_nodes=0)).candidate(A.INTER_RDH)
    at2 = select(ag, T2N, policy=Policy(inter_rdh_min_nodes=2)).candidate(A.INTER_RDH)
    assert at0.legal and at0 == at2


def test_an_empty_lowerable_set_and_windows_are_kept():
    """SELECTION.md §9: a build that lowers nothing (its refusal says ``lowerable: nothing``)
    and a table that gates nothing are policies select works with."""
    Policy(lowerable=frozenset(), hier_leg_lowerable=frozenset(), not_lowerable_ops=frozenset(),
           windows=())
