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


# -- seed 003 §3: __get_pgt_offset gives pages of the DMA size, the last one short (the arm
#    ``dma_sz == remaining`` of prepare_reduce_params' assert) ---------------------------------

@pytest.mark.parametrize("offset, total, size", [
    (0, 10000, 4096), (4096, 10000, 4096), (8192, 10000, 1808),   # 10000 = 2 x 4096 + 1808
    (100, 10000, 3996),                                           # mid-page: to the page's end
    (9000, 10000, 1000),                                          # mid last page: to the end
])
def test_get_pgt_offset_pages_the_transfer_and_the_last_page_is_short(offset, total, size):
    from nrtrewrite.compose.params import Addr, TransactionInfo, get_pgt_offset
    assert get_pgt_offset(TransactionInfo(Addr(0, 0), 0, 4096), offset, total) == (offset, size)


# -- SELECTION.md §7: SINGLE_CYCLE_RING uses max(1, n / 2) channel pairs, one forward ring each

@pytest.mark.parametrize("n_channels, pairs, rings",
                         [(1, 1, 1), (2, 1, 1), (4, 2, 2), (8, 4, 2)])
def test_single_cycle_forward_rings_are_half_the_channel_count(n_channels, pairs, rings):
    from nrtrewrite.compose.single_cycle import forward_rings
    # a whole trn2 node has 4 distinct rings (TOPOLOGY.md: the four directed device cycles),
    # 2 up to reversal (H0, H1): a pair walks its ring both ways, so 8 channels (past the
    # node's cap of 4) repeat them, pair k the ring of pair k mod 2 (TOPOLOGY.md §3 step 6;
    # until 2026-12-06 pairs 2 and 3 took H0 and H1 reversed, pairs 0 and 1's CCW rings)
    fwd = forward_rings(T1N, tuple(range(64)), n_channels)
    assert len(fwd) == pairs and len(set(fwd)) == rings
    assert all(fwd[k] == fwd[k % rings] for k in range(pairs))


# -- seed 000 §2.3: enc_kangaring.logical_path[256] holds 256 ranks, not 257 ------------------

def test_kangaring_paths_take_256_ranks(tmp_path):
    import json

    from nrtrewrite.errors import LimitError
    from nrtrewrite.topology.rings import kangaring_paths
    path = tmp_path / "big8x8.json"   # trn2 with 64 devices a node: 512 ranks at LNC 1
    path.write_text(json.dumps({"format": "nrtrewrite-topology/1", "name": "big8x8",
                                "platform": "trn2", "nodes": 1, "devices_per_node": 64,
                                "torus": [8, 8]}))
    big = load_topology(str(path), world=(), lnc_size=1)
    (ch,) = kangaring_paths(big, tuple(range(256)), 1)   # 32 whole devices of 8 ranks
    assert sorted(r for u in ch.units for r in u) == list(range(256))
    with pytest.raises(LimitError, match=r"264 ranks exceeds logical_path\[256\]"):
        kangaring_paths(big, tuple(range(264)), 1)


# -- the record checks of compose/params.py: each refusal a LoweringError, never a crash or a
#    pass (seed 003 §2-3: the length-locked vectors, the chained wide reduce) ----------------

def test_a_copy_with_a_source_offset_of_minus_one_is_refused():
    from nrtrewrite.compose.params import Addr, EncCopyOpParams, check_copy_params
    from nrtrewrite.errors import LoweringError
    op = EncCopyOpParams(src_idx=0, s_addr=Addr(0, 0), s_offsets=[0, -1],
                         d_addrs=[Addr(2, 0), Addr(2, 4)], d_skip_copy=[False, False],
                         d_ranks=[5, 6], copy_sizes=[8, 8])
    with pytest.raises(LoweringError, match="destination 1: negative source offset"):
        check_copy_params(op)


def test_a_nine_source_reduce_with_two_destinations_is_refused():
    # a reduce wider than a leg's 8 sources chains through its one destination (the
    # accumulator): with two destinations there is none to chain through
    from nrtrewrite.compose import ir as IR
    from nrtrewrite.compose.params import (
        Addr, EncReduceOpParams, NeighborGroups, RowSpec, reduce_rows,
    )
    from nrtrewrite.errors import LoweringError
    n = IR.MAX_SRC + 1
    op = EncReduceOpParams(s_addrs=[Addr(v, 0) for v in range(n)], src_idx=[0] * n,
                           d_addrs=[Addr(20, 0), Addr(21, 0)], dst_idx=[0, 0], reduce_size=4)
    with pytest.raises(LoweringError, match="exactly one destination"):
        reduce_rows([op], RowSpec(0, 17), 2, NeighborGroups(((3,),)), 0, 0, lambda r: 0)


def test_a_neighbour_group_one_past_the_last_is_a_lowering_error():
    from nrtrewrite.compose.params import NeighborGroups
    from nrtrewrite.errors import LoweringError
    ng = NeighborGroups(((10, 11), (10, 12)))
    assert ng.idx_in_group(1, 12) == 1
    with pytest.raises(LoweringError, match="neighbour group 2 does not exist"):
        ng.idx_in_group(2, 10)


def test_a_leg_with_three_waits_is_a_lowering_error_not_a_crash():
    # the leg IR holds two waits a row (LEG_IR_DTYPE's wait_sem / wait_val columns)
    from nrtrewrite.compose import ir as IR
    from nrtrewrite.compose.params import set_waits
    from nrtrewrite.errors import LoweringError
    assert IR.LEG_IR_DTYPE["wait_sem"].shape == (2,)
    row = IR.empty(1)[0]
    with pytest.raises(LoweringError, match="waits on 3 semaphores"):
        set_waits(row, [(1, 1), (2, 1), (3, 1)])


# -- TOPOLOGY.md §3 step 2: a restriction with an unlinked pair (the wrap included) gives way
#    to a link-only cycle when one exists ---------------------------------------------------

def test_a_restriction_open_only_at_its_wrap_gives_way_to_a_link_only_cycle():
    from nrtrewrite.topology.rings import device_order
    # on the 4x4 torus (device d at row d // 4, column d % 4) 0-4-5-1-2-6 is linked pair by
    # pair but 6 and 0 are not neighbours; 0-1-2-6-5-4 is a cycle of links
    cycle = (0, 4, 5, 1, 2, 6, 3, 7, 8, 9, 10, 11, 12, 13, 14, 15)
    order = device_order(T1N, (0, 1, 2, 4, 5, 6), cycle)
    assert sorted(order) == [0, 1, 2, 4, 5, 6]
    assert all(T1N.linked(order[i], order[(i + 1) % 6]) for i in range(6)), order


# -- TOPOLOGY.md "The hybrid ring": mla_cycle_n == 2 is part of the rule ----------------------

def test_a_one_cycle_platform_has_no_hybrid_ring(tmp_path):
    import json

    from nrtrewrite.topology.rings import is_hybrid_ring
    # a trn2 node whose topology file gives one device cycle: 16 ranks one a device at one
    # core index, LNC 2, one node - every term but mla_cycle_n == 2
    h0 = [0, 1, 2, 3, 7, 4, 5, 6, 10, 11, 8, 9, 13, 14, 15, 12]
    path = tmp_path / "one_cycle.json"
    path.write_text(json.dumps({"format": "nrtrewrite-topology/1", "name": "one-cycle",
                                "platform": "trn2", "nodes": 1, "devices_per_node": 16,
                                "torus": [4, 4], "device_cycles": [h0]}))
    one = load_topology(str(path), world=(), lnc_size=2)
    group = tuple(range(2, 64, 4))
    assert is_hybrid_ring(T1N, group)          # the stock trn2: two cycles
    assert len(one.device_cycles) == 1 and not is_hybrid_ring(one, group)


# -- SELECTION.md §3 / DESIGN.md: the mesh slots fit 8 MiB - the composer takes exactly 8 MiB --

def test_a_mesh_of_exactly_8_mib_of_channel_buffer_lowers(tmp_path):
    import json

    from test_simulate import coll_spec, lower_spec
    # two ranks, an all-reduce of 8 Mi bf16 elements: one slot of the 4 Mi-element block,
    # 8,388,608 B, exactly ENC_MESH_CHANNEL_BUF_MAX_SIZE
    out = lower_spec(coll_spec("all_reduce", "bf16", 2, 8 * 1024 * 1024), tmp_path / "o",
                     algo="mesh")
    trig = json.loads((out / "manifest.json").read_text())["triggers"][0]
    assert trig["algorithm"] == "MESH"
    assert trig["mesh"]["channel_buffer_bytes"] == 8 * 1024 * 1024


# -- FORMATS.md §7 (events): SINGLE_STEP_MESH broadcasts on EVT_INTRA_GRP_BRDCST /
#    EVT_INTER_GRP_BRDCST, only a two-rank group on EVT_REDUCE_COPY alone --------------------

@pytest.mark.parametrize("n", [2, 3, 5])
def test_single_step_mesh_takes_the_two_rank_events_only_over_two_ranks(tmp_path, n):
    import json

    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.neff.assembler import assemble_spec
    from test_simulate import assert_clean, coll_spec, lower_neff
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(coll_spec("all_reduce", "bf16", n, 1000)))
    res = CliRunner().invoke(main, ["schedule", str(neff), "--rank", "0", "--json",
                                    "--algo", "single_step_mesh"])
    assert res.exit_code == 0, res.output
    (op,) = json.loads(res.output)["ops"]
    events = {e["event"] for e in op["events"]}
    if n == 2:
        assert "EVT_REDUCE_COPY" in events and "EVT_INTRA_GRP_BRDCST" not in events
    else:   # every peer on rank 0's device (8 ranks a trn2 device at LNC 1)
        assert "EVT_INTRA_GRP_BRDCST" in events and "EVT_REDUCE_COPY" not in events
    assert_clean(lower_neff(neff, tmp_path / "o", algo="single_step_mesh"))


# -- DESIGN.md "Mesh and RDH": SINGLE_STEP_MESH in place over *more than* 8 ranks adds its
#    chained reduce up in an accumulator (until 2026-12-06 lower refused it) ---------------

def test_single_step_mesh_in_place_accumulates_from_nine_ranks_not_eight():
    from types import SimpleNamespace

    from nrtrewrite.compose.mesh import single_step_mesh_accumulates
    same = SimpleNamespace(var_id=3, offset=0, ap=None)   # in place: one var, one range
    other = SimpleNamespace(var_id=4, offset=0, ap=None)

    def trig(n, dst=same):
        return SimpleNamespace(replica_group=tuple(range(n)), src=same, dst=dst,
                               in_bytes=2048, out_bytes=2048)
    assert not single_step_mesh_accumulates(trig(8))
    assert single_step_mesh_accumulates(trig(9))
    assert not single_step_mesh_accumulates(trig(9, other))


# -- DESIGN.md "Single-cycle ring": any group, CW on the ring and CCW on its reverse; a hop
#    received from the network is the one from the channel's predecessor, which on the CCW
#    channel is the CW successor.  Groups with both kinds of hop, simulated ---------------------

@pytest.mark.parametrize("group", [[0, 1, 128, 129], [0, 1, 2, 128], [0, 128, 129, 130, 256]])
def test_single_cycle_ring_over_mixed_hops_simulates(tmp_path, group):
    from test_simulate import assert_clean, coll_spec, lower_spec
    out = lower_spec(coll_spec("all_reduce", "bf16", group, 3000), tmp_path / "o",
                     algo="single_cycle_ring", topology="trn2:nodes=3")
    assert_clean(out)


# -- SELECTION.md §7: a policy's scope cap above NEC_MAX_CHANNELS is still capped at 32 -------

def test_a_scope_cap_above_32_channels_is_capped_not_an_error():
    from dataclasses import replace

    from nrtrewrite.codes import EncAlgType
    from nrtrewrite.select import choose_channels
    # 64 MiB over two trn2 nodes wants 256; the default policy's 16 across nodes gives 16
    # (SELECTION.md §7's example). With max_channels_inter 64 the caps are max_channels 32,
    # the scope cap min(64, 32), elements / (128 * 64) = 4096 and the distinct rings: at 32
    # channels TOPOLOGY.md §3 step 4 opens each node's 16-device cycle at rot = (k // 4) * 2,
    # eight rotations of the four variants, 32 distinct rings; so 32, named by max_channels
    r = _req(AR, range(128), 64 * MiB)
    assert choose_channels(T2N, r, EncAlgType.RING)[0] == 16
    n, why = choose_channels(T2N, r, EncAlgType.RING,
                             replace(DEFAULT_POLICY, max_channels_inter=64))
    assert n == 32 and "max_channels (NEC_MAX_CHANNELS)" in why, why


# -- CLI.md "schedule": `phase` by step as the seed's loops count them; an all-gather's step
#    loop (seed 001 __compose_allgather_channel) has no reduce-scatter phase -------------------

def test_a_kangaring_all_gathers_steps_are_all_gather_phase(tmp_path):
    import json

    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.neff.assembler import assemble_spec
    from test_simulate import coll_spec
    neff = tmp_path / "k.neff"
    neff.write_bytes(assemble_spec(coll_spec("all_gather", "bf16", 16, 1024, lnc=2)))
    res = CliRunner().invoke(main, ["schedule", str(neff), "--rank", "0", "--json",
                                    "--algo", "kangaring"])
    assert res.exit_code == 0, res.output
    (op,) = json.loads(res.output)["ops"]
    phases = {s["phase"] for c in op["channels"] for s in c["steps"]}
    assert phases == {"all_gather"}
