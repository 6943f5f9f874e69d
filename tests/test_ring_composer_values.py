"""The flat RING composer's decisions that reach the output, worked out by hand from
docs/DESIGN.md ("Chunking", "Buffers"), docs/FORMATS.md and docs/CLI.md (the twelfth
mutation round's ring audit: each test fails with a mutation of compose/ring.py,
compose/chunking.py, compose/params.py or topology/rings.py that every other test let
through)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from irsim import ar, plan_ops
from nrtrewrite.codes import DType, EncOpType
from nrtrewrite.compose.chunking import set_dynamic_chunk_size
from nrtrewrite.compose.leaves import CHUNK_LEAVES
from nrtrewrite.compose.ring import ring_entry_ir
from test_simulate import coll_spec, lower_spec


def _manifest(tmp_path: Path, spec: dict) -> dict:
    out = lower_spec(spec, tmp_path / "out", algo="ring", ranks=[0])
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize("op, n, scratch, gw", [
    ("all_reduce", 192, 384, 384),      # RECV and GW over the 192-element message
    ("reduce_scatter", 192, 384, 384),  # the op's element space is its input, 192 elements
    ("all_gather", 48, 0, 384),         # RECV is OUT (no scratch); GW over 4 x 48 gathered
])
def test_a_flat_ring_scratch_and_gateway_hold_the_ops_element_space(
        tmp_path, op, n, scratch, gw):
    """DESIGN.md "Buffers": RECV is the scratch region, element e at e x dsize, for an
    all-reduce and a reduce-scatter, and OUT itself for an all-gather; GW (network sends) is
    the gateway region, indexed the same way over the collective's element space (an
    all-gather's is the gathered output, rank_n x N).  A one-trigger model over two trn2 nodes
    (ranks 0, 1 | 64, 65 at LNC 2, so the ring crosses the network), bf16: the regions hold
    exactly that many bytes (FORMATS.md "manifest.json memory")."""
    man = _manifest(tmp_path, coll_spec(op, "bf16", [0, 1, 64, 65], n, lnc=2))
    assert man["triggers"][0]["algorithm"] == "RING"
    size = {r["kind"]: r["size"] for r in man["memory"]["regions"]
            if r["kind"] in ("scratch", "gw")}
    assert (size["scratch"], size["gw"]) == (scratch, gw)


def test_a_hybrid_ring_runs_its_first_channels_when_the_chunking_keeps_fewer(tmp_path):
    """SELECTION.md: the hybrid ring (16 ranks, one per trn2 device at one core index, LNC 2)
    forces 4 channels; DESIGN.md "Chunking": only as many run as give every chunk position 64
    elements: 2048 bf16 / 16 = 128 a position, 2 channels.  A flat ring's channel ids are
    0..ch_n-1 (DESIGN.md), so the two kept are channels 0 and 1: H0 forward (TOPOLOGY.md's
    trn2 H0 visits devices 0 1 2 3 7 4 5 6 10 11 8 9 13 14 15 12; core 0 of device d is rank
    4d) and H1 forward, not the reversed cycles of channels 2 and 3."""
    man = _manifest(tmp_path, coll_spec("all_reduce", "bf16", list(range(0, 64, 4)), 2048, lnc=2))
    t = man["triggers"][0]
    assert t["chunk"]["channels"] == 2
    assert [c["channel"] for c in t["channels"]] == [0, 1]
    h0 = [0, 1, 2, 3, 7, 4, 5, 6, 10, 11, 8, 9, 13, 14, 15, 12]
    assert t["channels"][0]["order"] == [4 * d for d in h0]


def test_a_flat_ring_legs_k_is_the_rank_whose_chunk_position_it_moves():
    """CLI.md "schedule": a RING step's `k` is the chunk position as a rank id (seed 001 §4
    `p.k = na[...]`), a rank of the world, not an index; the step moves the chunk of position
    i of the group where group[i] == k (DESIGN.md "Chunking": position i of chunk group 0
    starts at i x chunk).  256 bf16 over the group [6, 1, 4, 3]: one channel, chunk 64, one
    group, so a leg of CHUNK_H<h> moving k's chunk covers [64 i + 32 h, 64 i + 32 h + 32)."""
    group = [6, 1, 4, 3]
    plan = plan_ops([ar(256)], group, algo="ring")
    tp = plan.triggers[0]
    rp = tp.prepared.data
    assert (rp.chunk.channels, rp.chunk.chunk, rp.chunk.groups) == (1, 64, 1)
    for rank in group:
        peers = {}
        ir = ring_entry_ir(plan.topology, rp, EncOpType.ALLREDUCE, rank,
                           lambda r: peers.setdefault(r, len(peers)), host_cc=False)
        rows = ir[np.isin(ir["leaf"], list(CHUNK_LEAVES))]
        assert rows.size and set(rows["k"].tolist()) == set(group)
        for row in rows:
            i = group.index(int(row["k"]))
            start = 64 * i + 32 * int(row["half"])
            assert (int(row["start"]), int(row["stop"])) == (start, start + 32)


def test_a_reduce_scatters_chunks_walk_blocks_of_its_output_count():
    """DESIGN.md "Chunking": a reduce-scatter works on rank_n blocks (block b the slice of the
    reduced vector member b keeps), each of `count` = N / rank_n elements; block b's
    ranges lie in [b count, (b + 1) count) and together cover the op's N elements.  4000
    bf16 over 4 ranks on one channel: count 1000, so one position a block, chunk 1024, one
    group, tail ceil(1000 / 1) = 1000."""
    plan = set_dynamic_chunk_size(EncOpType.REDUCE_SCATTER, 4000, 4, DType.BF16, 1)
    assert (plan.span, plan.chunk, plan.groups, plan.tail_chunk) == (1000, 1024, 1, 1000)
    covered = []
    for b in range(4):
        start, stop = plan.half_ranges(0, 0, b, np.array([0, 1]))
        assert start.tolist() == [1000 * b, 1000 * b + 500]
        assert stop.tolist() == [1000 * b + 500, 1000 * b + 1000]
        covered += list(zip(start.tolist(), stop.tolist()))
    assert sorted(covered)[0][0] == 0 and sorted(covered)[-1][1] == 4000


# DESIGN.md "Buffers and data flow (the ring)", the leaf table: reads, writes (@next: the
# successor's buffer), waits for the predecessor, signals the successor.  Buf: IN 0, OUT 1,
# RECV 2 (compose/leaves.py); a destination on the successor has the successor's peer number.
LEAF_TABLE = {
    1: ([0], [(2, True)], False, True),             # send: IN -> RECV@next
    2: ([2, 0], [(2, True)], True, True),           # recv_reduce_send: RECV, IN -> RECV@next
    3: ([2, 0], [(1, False)], True, False),         # recv_reduce_copy: RECV, IN -> OUT
    4: ([2, 0], [(1, False), (1, True)], True, True),  # recv_reduce_copy_send -> OUT, OUT@next
    5: ([1], [(1, True)], False, True),             # direct_copy_send: OUT -> OUT@next
    6: ([1], [(1, True)], True, True),              # direct_recv_send: OUT -> OUT@next
    7: ([], [], True, False),                       # direct_recv
}


@pytest.mark.parametrize("host_cc", [False, True])
def test_ring_legs_read_and_write_what_the_leaf_table_says(host_cc):
    """Every leg of a 3-rank ring all-reduce (device and host-CC final step) reads, writes,
    waits and signals as DESIGN.md's leaf table says, sources and destinations in the table's
    order (FORMATS.md §4: the 0xBF word's src and dst are the leg's *first* source and
    destination)."""
    group = [0, 1, 2]
    plan = plan_ops([ar(3 * 256)], group, algo="ring")
    rp = plan.triggers[0].prepared.data
    for rank in group:
        peers = {rank: 0}
        ir = ring_entry_ir(plan.topology, rp, EncOpType.ALLREDUCE, rank,
                           lambda r: peers.setdefault(r, len(peers)), host_cc=host_cc)
        nxt = peers[group[(group.index(rank) + 1) % 3]]
        seen = set()
        for row in ir:
            leaf = int(row["leaf"])
            srcs, dsts, waits, signals = LEAF_TABLE[leaf]
            seen.add(leaf)
            assert row["src_view"][:row["n_src"]].tolist() == srcs
            assert [(int(v), int(p)) for v, p in zip(row["dst_view"][:row["n_dst"]],
                                                     row["dst_peer"][:row["n_dst"]])] == [
                (v, nxt if on_next else 0) for v, on_next in dsts]
            assert (int(row["n_wait"]), int(row["n_inc"])) == (int(waits), int(signals))
            if signals:
                assert int(row["inc_peer"][0]) == nxt
        assert (4 in seen) == host_cc and (3 in seen) != host_cc
