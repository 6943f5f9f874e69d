"""The forty-first session's mutation audit of compose/, topology/rings.py and select.py.

Each test here was added for a single source mutation that every test before passed, and
fails with that mutation applied.  Every expected value is worked out by hand from
docs/SELECTION.md, docs/DESIGN.md, docs/TOPOLOGY.md or the seeds, never read back from the
code's output.
"""

from __future__ import annotations

import pytest

from nrtrewrite.codes import DType, EncOpType
from nrtrewrite.compose.ring import H0, H1, channel_template
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.policy import DEFAULT_POLICY, KiB, MiB
from nrtrewrite.select import (
    Request, enc_can_post_hierarchical_operation, enc_can_post_intra_rdh_operation,
    enc_can_post_mesh_operation,
)
from nrtrewrite.topology import load_topology

AR, AG, RS = EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER

T1N = load_topology("trn2", world=(), lnc_size=2)            # 64 ranks, 4 a device
T2N = load_topology("trn2:nodes=2", world=(), lnc_size=2)    # 128 ranks, 64 a node


def _req(op, group, nbytes, dtype=DType.BF16):
    return Request.for_op(op, dtype, tuple(group), nbytes)


# -- SELECTION.md §3, HIER: "an all-reduce of at least local_rank_n elements" ---------------

def test_hier_takes_an_all_reduce_of_exactly_local_rank_n_elements():
    # two nodes x 64 local ranks: 64 bf16 elements (128 B) give each local rank one element;
    # 63 elements (126 B) leave one local rank's slice empty
    ok, why = enc_can_post_hierarchical_operation(_req(AR, range(128), 128), T2N,
                                                  DEFAULT_POLICY, check_window=False)
    assert ok, why
    ok, _ = enc_can_post_hierarchical_operation(_req(AR, range(128), 126), T2N,
                                                DEFAULT_POLICY, check_window=False)
    assert not ok


# -- SELECTION.md §3, MESH: inter "at most inter_mesh_max_nodes (16) nodes" -----------------

def test_inter_mesh_takes_sixteen_nodes_and_refuses_seventeen():
    t17 = load_topology("trn2:nodes=17", world=(), lnc_size=2)
    assert DEFAULT_POLICY.inter_mesh_max_nodes == 16
    one_per_node = lambda k: tuple(64 * n for n in range(k))  # noqa: E731
    ok, why = enc_can_post_mesh_operation(_req(AR, one_per_node(16), 4 * KiB), t17,
                                          DEFAULT_POLICY, check_window=False)
    assert ok, why
    ok, why = enc_can_post_mesh_operation(_req(AR, one_per_node(17), 4 * KiB), t17,
                                          DEFAULT_POLICY, check_window=False)
    assert not ok and "17 nodes" in why


# -- SELECTION.md §3, MESH: the n - 1 slots of one block each fit 8 MiB -----------------------

def test_mesh_channel_buffer_of_exactly_8_mib_fits_and_a_block_rounded_up_does_not():
    # two ranks of one node, an all-reduce of N bf16 elements: one slot of the larger block,
    # ceil(N / 2) elements.  N = 8 Mi (16 MiB): 4 Mi elements = 8 MiB, fits (<= 8 MiB).
    pair = (0, 1)
    ok, why = enc_can_post_mesh_operation(_req(AR, pair, 16 * MiB), T1N, DEFAULT_POLICY,
                                          check_window=False)
    assert ok, why
    # N = 8 Mi + 1 (16 MiB + 2 B): the larger block is 4 Mi + 1 elements, 8 MiB + 2 B
    ok, why = enc_can_post_mesh_operation(_req(AR, pair, 16 * MiB + 2), T1N, DEFAULT_POLICY,
                                          check_window=False)
    assert not ok and "8 MiB" in why


# -- SELECTION.md §3, INTRA_RDH: ">= 2 ranks" --------------------------------------------------

def test_intra_rdh_refuses_a_single_rank():
    ok, why = enc_can_post_intra_rdh_operation(_req(AR, (0,), 4 * MiB), T1N, DEFAULT_POLICY,
                                               check_window=False)
    assert not ok, why


# -- DESIGN.md: "A group of one rank copies IN to OUT (enc_1rank_primitive)" -----------------

@pytest.mark.parametrize("op", [AR, AG, RS])
def test_a_one_rank_channel_template_is_one_copy_a_half(op):
    rows = [tuple(int(x) for x in r) for r in channel_template(op, 1)]
    assert [(r[0], int(r[2]), r[3], r[4]) for r in rows] == [
        (0, int(Leaf.direct_copy), 0, int(H0)), (0, int(Leaf.direct_copy), 0, int(H1))]


# -- DESIGN.md "HIER" (AR row): even_split, 32-element aligned slices only when the even share
#    is over 32 and leaves every slice non-empty, else sizes differing by at most one ---------

@pytest.mark.parametrize("lo, hi, parts, slices", [
    # share ceil(94 / 3) = 32, not over 32: 32, 31, 31
    (0, 94, 3, [(0, 32), (32, 63), (63, 94)]),
    # share 43 -> aligned 64, but 2 x 64 = 128 leaves the last slice empty: 43, 43, 42
    (0, 128, 3, [(0, 43), (43, 86), (86, 128)]),
    # share 50 -> aligned 64 (rounded up to a multiple of 32), 64 < 100: 64 and the rest
    (10, 110, 2, [(10, 74), (74, 110)]),
    # share 33 -> aligned 64, but 3 x 64 = 192 >= 129: by one, 33, 32, 32, 32
    (0, 129, 4, [(0, 33), (33, 65), (65, 97), (97, 129)]),
])
def test_even_split_at_its_edges(lo, hi, parts, slices):
    from nrtrewrite.compose.segments import even_split
    assert even_split(lo, hi, parts) == slices


# -- SELECTION.md §7: floor_pow2(bytes / 256 KiB), capped by the smallest cap ------------------

@pytest.mark.parametrize("nbytes, channels", [
    (512 * KiB - 2, 1),   # 1.99 channels' worth -> 1
    (512 * KiB, 2),       # SELECTION.md §7: "512 KiB over a node gets 2"
    (1 * MiB - 2, 2),     # 3.99 -> floor_pow2(3) = 2
    (1 * MiB, 4),
])
def test_ring_channels_at_the_bytes_per_channel_edges(nbytes, channels):
    from nrtrewrite.codes import EncAlgType
    from nrtrewrite.select import choose_channels
    # a whole trn2 node: caps 32, 4 (intra), 4 distinct rings, elements / (64 x 64) >= 63
    n, _ = choose_channels(T1N, _req(AR, range(64), nbytes), EncAlgType.RING)
    assert n == channels


def test_a_cap_one_below_the_wanted_count_binds():
    from dataclasses import replace

    from nrtrewrite.codes import EncAlgType
    from nrtrewrite.select import choose_channels
    # 1 MiB over a node wants 4; a policy capping intra-node rings at 3 gets 3
    n, why = choose_channels(T1N, _req(AR, range(64), 1 * MiB), EncAlgType.RING,
                             replace(DEFAULT_POLICY, max_channels_intra=3))
    assert n == 3 and "max_channels_intra" in why


# -- SELECTION.md §4's window table, each row at its exact edges (half-open [min, max)) -------

_INF = None
#: (scope, engine, ops, op_min_limit, op_max_limit), copied by hand from SELECTION.md §4
_WINDOW_TABLE = [
    ("intra", "MESH", (AR, AG, RS), 0, 1 * MiB),
    ("intra", "MESH", (EncOpType.ALLTOALL,), 0, _INF),
    ("intra", "INTRA_RDH", (AR, AG, RS), 1 * MiB, 56 * MiB),
    ("intra", "KANGARING", (AR, AG, RS), 56 * MiB, _INF),
    ("inter", "MESH", (AR, AG, RS), 0, 64 * KiB),
    ("inter", "MESH", (EncOpType.ALLTOALL,), 0, _INF),
    ("inter", "SINGLE_CYCLE_RING", (AR,), 0, 4 * MiB),
    ("inter", "INTER_RDH", (AR, AG, RS), 0, 64 * MiB),
]


@pytest.mark.parametrize("sbuf", [False, True])
@pytest.mark.parametrize("scope, engine, ops, lo, hi", _WINDOW_TABLE)
def test_every_size_window_at_its_exact_edges(scope, engine, ops, lo, hi, sbuf):
    from nrtrewrite.codes import EncAlgType
    alg = EncAlgType[engine]
    for op in ops:
        inside = DEFAULT_POLICY.in_window
        assert inside(scope, alg, op, lo, sbuf)[0], (engine, op, lo)
        if lo > 0:
            assert not inside(scope, alg, op, lo - 1, sbuf)[0], (engine, op, lo - 1)
        if hi is not None:
            assert inside(scope, alg, op, hi - 1, sbuf)[0], (engine, op, hi - 1)
            assert not inside(scope, alg, op, hi, sbuf)[0], (engine, op, hi)
        else:
            assert inside(scope, alg, op, 1 << 50, sbuf)[0]


@pytest.mark.parametrize("engine, nbytes, inside", [
    ("MESH", 64 * KiB - 1, True), ("MESH", 64 * KiB, False),
    ("SINGLE_CYCLE_RING", 4 * MiB - 1, True), ("SINGLE_CYCLE_RING", 4 * MiB, False),
])
def test_inter_node_predicates_apply_their_windows_to_the_byte(engine, nbytes, inside):
    from nrtrewrite.codes import EncAlgType
    from nrtrewrite.select import PREDICATES
    # one rank on each of two nodes; UINT8, so every byte count is a whole message
    r = _req(AR, (0, 64), nbytes, DType.UINT8)
    _name, pred = PREDICATES[EncAlgType[engine]]
    assert pred(r, T2N, DEFAULT_POLICY, check_window=False)[0]
    ok, why = pred(r, T2N, DEFAULT_POLICY, check_window=True)
    assert ok is inside, why
