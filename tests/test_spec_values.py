"""Values the docs fix for the composers, the ring builder, the emitters and the selection,
asserted from the docs' own rules (mutation audit round 3, docs/RELIABILITY.md §6: each test
fails with the mutation it was written for; several are outputs the simulator accepts).

Rank placement (docs/TOPOLOGY.md): trn2 at LNC 2, rank r of a node is on device
``(r % 64) // 4``, logical core ``r % 4``; at LNC 1 on device ``(r % 128) // 8``, s-engine
``(r % 8) // 2``, TPB ``r % 2``; nodes hold 64 (LNC 2) or 128 (LNC 1) ranks.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import chunkmodel as CM
import numpy as np
import pytest

from nrtrewrite.artifacts import load_records
from nrtrewrite.neff.assembler import assemble_spec

from test_simulate import cli, coll_spec, lower_spec, two_node_spec

EVT_SEM_BASE = 0x82_8000_0000  # FORMATS.md §10
DIE_BIT = 1 << 47
CAYMAN_VALID = 1 << 54


def lower(tmp_path: Path, spec: dict, ranks=(0,), topology=None, algo="ring") -> tuple[dict, Path]:
    """Lower ``spec`` (only ``ranks`` written) and return the top manifest and the output."""
    out = lower_spec(spec, tmp_path / "out", topology=topology, algo=algo, ranks=ranks)
    return json.loads((out / "manifest.json").read_text()), out


def records(out: Path, rank: int, name: str) -> np.ndarray:
    return load_records(out / f"rank-{rank:04d}" / name)


# --- chunking -------------------------------------------------------------------------------

def test_the_tail_chunk_is_the_smallest_even_size_covering_the_remainder(tmp_path):
    """DESIGN.md "Chunking": the tail group's chunk is ceil(remained / (rank_n * ch_n))
    rounded up to 2 elements.  4100 bf16 over 4 ranks on one channel: the first group
    (4 x chunk_size_n elements) already covers them, so remained = 4100: ceil(4100 / 4) =
    1025, rounded up to 1026 (not to 1028)."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 1, 2, 3], 4100))
    chunk = man["triggers"][0]["chunk"]
    assert chunk["channels"] == 1 and chunk["pgta"] == 1 and 4 * chunk["chunk_size_n"] >= 4100
    assert chunk["tail_chunk"] == 1026


def test_a_channel_is_active_only_with_64_elements_per_chunk_position():
    """DESIGN.md "Chunking": only as many channels as give every chunk position at least 64
    elements.  An all-reduce of 400 elements over 4 ranks has 100 elements a position: one
    channel may run (100 // 64 = 1), not 2 (ceil(100 / 64)) nor 3 (100 // 32)."""
    from nrtrewrite.codes import DType, EncOpType
    from nrtrewrite.compose.chunking import set_dynamic_chunk_size

    assert set_dynamic_chunk_size(EncOpType.ALLREDUCE, 400, 4, DType.BF16, 4).channels == 1
    assert set_dynamic_chunk_size(EncOpType.ALLREDUCE, 512, 4, DType.BF16, 4).channels == 2


def test_the_chunk_is_capped_at_512_kib_of_4_byte_fp32r(tmp_path):
    """DESIGN.md "Chunking": the chunk is capped by the 512 KiB channel-buffer budget, in
    bytes of the I/O type; FP32R sizes as its 4-byte fp32 storage.  2^20 fp32r elements over
    2 ranks on one channel: 2^19 elements a position, capped to 512 KiB / 4 = 131072, so
    pgta = 2^20 / (2 * 131072) = 4."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "fp32r", [0, 1], 1 << 20, lnc=2))
    chunk = man["triggers"][0]["chunk"]
    assert chunk["channels"] == 1
    assert (chunk["chunk_size_n"], chunk["pgta"], chunk["tail_chunk"]) == (131072, 4, 131072)


def test_the_tail_chunk_divides_by_every_chunk_position_of_the_group(tmp_path):
    """DESIGN.md "Chunking": the tail chunk is ceil(remained / (rank_n * ch_n)), not the
    seed's division by rank_n alone.  270000 bf16 (540000 bytes: 2 channels, SELECTION.md §7)
    over 4 ranks: 67500 a position, chunk = 33750 rounded up to 32 = 33760, one group of
    4 * 2 * 33760 >= 270000; tail = ceil(270000 / 8) = 33750."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 1, 2, 3], 270000, lnc=2))
    chunk = man["triggers"][0]["chunk"]
    assert (chunk["channels"], chunk["chunk_size_n"], chunk["pgta"]) == (2, 33760, 1)
    assert chunk["tail_chunk"] == 33750


def test_the_chunk_rounds_the_per_position_share_up(tmp_path):
    """DESIGN.md "Chunking": the chunk is ceil(per_position / channels) rounded up to 32, a
    position's share of an all-reduce being ceil(N / rank_n).  257 bf16 over 4 ranks: 65 a
    position, one channel (65 // 64), chunk 96, one group of 4 * 96 >= 257 elements, tail
    ceil(257 / 4) = 65 rounded up to 2 = 66."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 1, 2, 3], 257, lnc=2))
    chunk = man["triggers"][0]["chunk"]
    assert (chunk["channels"], chunk["chunk_size_n"], chunk["pgta"]) == (1, 96, 1)
    assert chunk["tail_chunk"] == 66


def test_the_chunk_rounds_the_per_channel_share_up(tmp_path):
    """DESIGN.md "Chunking": chunk = ceil(per_position / channels) rounded up to 32.
    262148 bf16 (524296 bytes: 2 channels) over 4 ranks: 65537 a position, ceil(65537 / 2) =
    32769, chunk 32800; one group (4 * 2 * 32800 >= 262148); tail ceil(262148 / 8) = 32769
    rounded up to 2 = 32770."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 1, 2, 3], 262148, lnc=2))
    chunk = man["triggers"][0]["chunk"]
    assert (chunk["channels"], chunk["chunk_size_n"], chunk["pgta"]) == (2, 32800, 1)
    assert chunk["tail_chunk"] == 32770

# --- rings ----------------------------------------------------------------------------------

def test_a_one_device_group_has_its_reversed_ring_on_channel_1(tmp_path):
    """TOPOLOGY.md "How an order is built" rule 5: a one-device group (ranks 0..3 at LNC 2
    are device 0's four logical cores) gets its forward ring on channel 0 and its reversed
    ring on channel 1 (ascending logical core forward, rule 3)."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 1, 2, 3], 262144, lnc=2))
    orders = [c["order"] for c in man["triggers"][0]["channels"]]
    assert orders == [[0, 1, 2, 3], [0, 3, 2, 1]]


def _node_devices(order: list[int], node: int) -> list[int]:
    """The devices of ``node`` in the order the ring visits them (LNC 2: 64 ranks a node,
    4 a device), from where the ring enters the node."""
    n = len(order)
    enter = next(i for i in range(n) if order[i] // 64 == node and order[i - 1] // 64 != node)
    devs: list[int] = []
    for k in range(n):
        r = order[(enter + k) % n]
        if r // 64 != node:
            break
        if not devs or devs[-1] != (r % 64) // 4:
            devs.append((r % 64) // 4)
    return devs


def test_channels_past_the_first_four_open_each_node_at_the_rotated_device(tmp_path):
    """TOPOLOGY.md rule 4: channel k opens each node's device cycle at
    ``rot = (k // 4) * max(1, devs // ceil(n_channels / 4))``.  Ranks 0..15 and 64..79 at
    LNC 2 are devices 0..3 of two nodes (devs = 4); 2 MiB of bf16 gives 8 channels
    (SELECTION.md §7: floor_pow2(2 MiB / 256 KiB), at most 16 across nodes), so channels
    4..7 walk the variants of channels 0..3 with every node's devices rotated by
    1 * max(1, 4 // 2) = 2."""
    group = list(range(16)) + list(range(64, 80))
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", group, 1 << 20, lnc=2))
    orders = [c["order"] for c in man["triggers"][0]["channels"]]
    assert len(orders) == 8
    for k in range(4, 8):
        for node in (0, 1):
            first = _node_devices(orders[k - 4], node)
            assert sorted(first) == [0, 1, 2, 3]
            assert _node_devices(orders[k], node) == first[2:] + first[:2], (k, node)


def test_a_kangaring_unit_is_a_rank_its_peer_rmtv_peer_rmtv2_and_peer_local(tmp_path):
    """TOPOLOGY.md "Units": at LNC 1 a unit is (S_k t0, S_k^2 t0, S_k^2 t1, S_k t1).  Logical
    core c is s-engine c // 2, TPB c % 2, so device 0's units are (0, 4, 5, 1) and
    (2, 6, 7, 3), device 1's the same plus 8; channel 0 visits device 0 then device 1,
    unit 0 then unit 1, each from member 0 (c % 4 = 0)."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", list(range(16)), 1 << 20),
                   algo="kangaring")
    ch0 = man["triggers"][0]["kangaring"][0]
    assert ch0["channel"] == 0
    assert ch0["units"] == [[0, 4, 5, 1], [2, 6, 7, 3], [8, 12, 13, 9], [10, 14, 15, 11]]
    assert ch0["logical_path"] == [r for u in ch0["units"] for r in u]


# --- schedule -------------------------------------------------------------------------------

def test_the_epilogue_posts_one_more_receive_when_the_predecessor_is_across_the_network(
        tmp_path):
    """Seed 001 §4 epilogue: ``if encd_is_neighbor_pod(channel, ENCD_NEIGH_PREV):
    p.post_recv(1); p.mark_step(1);``.  On the two-node ring 0 -> 1 -> 64 -> 65 -> 0, rank 0's
    predecessor (65) is on the other node, rank 1's (0) on its own."""
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(two_node_spec()))
    for rank, prev, extra in ((0, 65, True), (1, 0, False)):
        res = cli("schedule", neff, "--rank", rank, "--algo", "ring", "--json")
        assert res.exit_code == 0, res.output
        (ch,) = json.loads(res.stdout)["ops"][0]["channels"]
        assert ch["prev"] == prev
        tail = ["post_recv(1)", "mark_step(1)"] if extra else []
        assert ch["epilogue"] == ["advance_recv(-concat_first)", "mark_complete()",
                                  "mark_step(0)", *tail, "mark_end()"]


# --- emitted fields -------------------------------------------------------------------------

def test_n_tiles_of_every_leg_follows_the_tile_rule(tmp_path):
    """FORMATS.md §3 ``n_tiles``: ceil(num_elements / t), t = (min(dsize x n, 64 KiB) & ~0x1F)
    / dsize, or all n when that is 0 (a leg under 32 bytes is one tile); a reduce leg's t is
    at most the CCE cap (2048 on trn2).  48 bf16 over 2 ranks: legs of 12 elements (24
    bytes) among them."""
    _, out = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 1], 48), ranks=(0, 1))
    for rank in (0, 1):
        legs = records(out, rank, "legs.bin")
        data = legs[legs["sdma_op"] != 0]
        n = data["num_elements"].astype(np.int64)
        assert (n * 2 < 32).any()
        t = (np.minimum(2 * n, 65536) & ~0x1F) // 2
        t = np.where(t == 0, n, t)
        t = np.where(data["sdma_op"] == 4, np.minimum(t, 2048), t)
        assert data["n_tiles"].tolist() == (-(-n // t)).tolist()


def test_net_ops_unrolled_count_is_the_chunk_groups(tmp_path):
    """FORMATS.md §8.1: unrolled_count = chunk groups (pgta).  3 Mi bf16 elements over the
    two-node ring of 4 ranks: pgta = ceil(N / (rank_n x channels x chunk_size_n)) > 1."""
    man, out = lower(tmp_path, two_node_spec(num_elements=3 << 20))
    chunk = man["triggers"][0]["chunk"]
    pgta = math.ceil((3 << 20) / (4 * chunk["channels"] * chunk["chunk_size_n"]))
    assert pgta == chunk["pgta"] == 2
    ops = records(out, 0, "net_ops.bin")
    assert ops.size and set(ops["unrolled_count"].tolist()) == {2}


def test_a_hier_entry_s_unrolled_count_is_its_leg_plan_s_chunk_groups(tmp_path):
    """FORMATS.md §8.1: on a HIER entry unrolled_count is the pgta of the leg plan the rank's
    group runs, not the trigger's chunk.pgta (the most of any leg's).  4 MiB of bf16
    (2 Mi elements) over [0, 1, 128, 129] of trn2:nodes=2 at LNC 1, --algo hier: the
    intra_redsct leg (2 ranks a node, one channel) cuts each node's ranks' blocks of 1 Mi
    elements, ceil(1 Mi / (1 x C)) groups; inter_allr (one rank a node, 2 ranks) all-reduces
    rank 0's slice of 1 Mi elements, ceil(1 Mi / (2 x 1 x C)), with C the plans' chunk_size_n
    (262144: 4 and 2).  Only inter_allr crosses the network, so every net op is its."""
    spec = coll_spec("all_reduce", "bf16", [0, 1, 128, 129], 1 << 21)
    man, out = lower(tmp_path, spec, topology="trn2:nodes=2", algo="hier")
    trig = man["triggers"][0]
    legs = {leg["name"]: leg for leg in trig["hier"]["legs"]}
    inter, intra = (legs[n]["plans"][0]["chunk"] for n in ("inter_allr", "intra_redsct"))
    assert inter["chunk_size_n"] == intra["chunk_size_n"] == 262144
    assert intra["pgta"] == math.ceil((1 << 20) / 262144) == 4 == trig["chunk"]["pgta"]
    assert inter["pgta"] == math.ceil((1 << 20) / (2 * 262144)) == 2
    ops = records(out, 0, "net_ops.bin")
    assert ops.size and set(ops["unrolled_count"].tolist()) == {2}


def test_net_ops_data_type_sz_of_fp32r_is_0(tmp_path):
    """FORMATS.md §8.1: data_type_sz is sdma_data_type_size[dtype], 0 for FP32R (SEED-NOTES
    "FP32R"), though its elements are 4 bytes everywhere else."""
    _, out = lower(tmp_path, two_node_spec(dtype="fp32r"))
    ops = records(out, 0, "net_ops.bin")
    assert ops.size and set(ops["data_type_sz"].tolist()) == {0}


def test_core_7_of_a_trn2_device_has_no_die_bit(tmp_path):
    """FORMATS.md §10: the DIE bit [47] comes only from ``(sp > 7) << 47``; rank 7 at LNC 1
    is logical core 7 of device 0, so its semaphores are at 0x82_8000_0000 + (7 << 30) + ...
    without bit 47, in sem.bin and in its net_ops_info."""
    _, out = lower(tmp_path, coll_spec("all_reduce", "bf16", [7, 135], 4096),
                   ranks=(7,), topology="trn2:nodes=2")
    ops = records(out, 7, "net_ops.bin")
    assert ops.size
    for f in ("inc_send_handshake", "inc_send_complete", "inc_recv_handshake",
              "inc_recv_complete"):
        a = ops[f].astype(np.uint64)
        assert not (a & np.uint64(DIE_BIT)).any(), f
        assert ((a - np.uint64(EVT_SEM_BASE)) >> np.uint64(30)).tolist() == [7] * a.size, f
    sem = records(out, 7, "sem.bin")["addr"].astype(np.uint64)
    assert not (sem & np.uint64(DIE_BIT)).any()


def test_routing_ids_up_to_63_fill_the_six_cayman_id_bits(tmp_path):
    """FORMATS.md §10: CAYMAN_ID [53:48] is the target device's routing id (TOPOLOGY.md: 0..63),
    CAYMAN_ID_VALID [54] set for another device of the node.  Device 1 with routing id 45
    (0b101101): rank 0's BDs and semaphore increments to rank 4 (device 1 at LNC 2) carry 45,
    not 45 & 0x1F."""
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps({"format": "nrtrewrite-topology/1", "name": "hi-ids",
                                "torus": [1, 2], "routing_ids": [32, 45]}))
    _, out = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 4], 4096, lnc=2),
                   topology=str(topo))
    for name, field in (("dma.bin", "buf_ptr"), ("sem.bin", "addr")):
        a = records(out, 0, name)[field].astype(np.uint64)
        remote = a[(a & np.uint64(CAYMAN_VALID)) != 0]
        assert remote.size, name
        assert set(((remote >> np.uint64(48)) & np.uint64(0x3F)).tolist()) == {45}, name


# --- selection and channels -----------------------------------------------------------------

def _explain(*args) -> dict:
    res = cli("explain", "--json", *args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["triggers"][0]


@pytest.mark.parametrize("nbytes, hier", [(4, True), (2, False)])
def test_hier_needs_an_all_reduce_of_at_least_local_rank_n_elements(nbytes, hier):
    """SELECTION.md §3 HIER row: an all-reduce of at least local_rank_n elements.  Ranks
    0, 1, 64, 65 at LNC 2: 2 local ranks a node; 2 bf16 elements are enough, 1 is not."""
    t = _explain("--op", "allreduce", "--bytes", nbytes, "--dtype", "bf16", "--group",
                 "0,1,64,65", "--lnc", 2, "--topology", "trn2:nodes=2")
    assert t["local_rank_n"] == 2
    assert (t["lowered"]["algorithm"] == "HIER") is hier


def test_inter_node_mesh_takes_16_nodes():
    """SELECTION.md §3 MESH row: inter-node AR with one rank a node and at most
    inter_mesh_max_nodes (16) nodes; HIER, INTRA_RDH rank above it and are not legal here,
    so 16 nodes of 1 KiB pick MESH."""
    group = ",".join(str(64 * i) for i in range(16))
    t = _explain("--op", "allreduce", "--bytes", 1024, "--dtype", "bf16", "--group", group,
                 "--lnc", 2, "--topology", "trn2:nodes=16")
    assert t["lowered"]["algorithm"] == "MESH"


def test_mesh_slots_fit_a_channel_buffer_of_exactly_8_mib():
    """SELECTION.md §3 MESH row: AR/RS need the n - 1 slots of one block, ceil(N / n)
    elements each, to fit ENC_MESH_CHANNEL_BUF_MAX_SIZE (8 MiB).  16 MiB over 2 ranks: one
    slot of exactly 8 MiB fits; 16 MiB + 2 bytes (8,388,609 elements) needs a slot of
    ceil(8,388,609 / 2) = 4,194,305 elements = 8 MiB + 2 bytes: refused."""
    t = _explain("--op", "allreduce", "--bytes", 16 << 20, "--dtype", "bf16", "--ranks", 2,
                 "--algo", "mesh")
    assert t["lowered"]["algorithm"] == "MESH"
    res = cli("explain", "--op", "allreduce", "--bytes", (16 << 20) + 2, "--dtype", "bf16",
              "--ranks", 2, "--algo", "mesh")
    assert res.exit_code == 2
    assert "(8388610 B), more than the mesh channel buffer" in res.output


def test_channels_are_floor_pow2_of_the_bytes_over_256_kib(tmp_path):
    """SELECTION.md §7: floor_pow2(bytes / 256 KiB), at least 1.  300 KiB (153,600 bf16) over
    one rank on each of four devices: 1 channel, not 2."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 4, 8, 12], 153600, lnc=2))
    assert man["triggers"][0]["chunk"]["channels"] == 1


def test_hier_gives_every_local_rank_a_non_empty_slice(tmp_path):
    """SELECTION.md §3 HIER row and DESIGN.md "HIER": every local rank gets a non-empty slice
    of the message.  128 bf16 elements over 3 local ranks a node: three non-empty slices that
    cover [0, 128) in order."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 1, 2, 64, 65, 66], 128, lnc=2),
                   algo=None)
    t = man["triggers"][0]
    assert t["algorithm"] == "HIER"
    slices = t["hier"]["slices"]
    assert len(slices) == 3 and slices[0][0] == 0 and slices[-1][1] == 128
    assert all(a < b for a, b in slices)
    assert all(slices[i][1] == slices[i + 1][0] for i in range(2))


def _hier_192(tmp_path) -> dict:
    """An all-reduce of 192 bf16 over 4 local ranks on each of 2 nodes, as the policy lowers
    it (HIER), its trigger record."""
    ranks = [0, 1, 2, 3, 64, 65, 66, 67]
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", ranks, 192, lnc=2), algo=None)
    t = man["triggers"][0]
    assert t["algorithm"] == "HIER"
    return t


def test_hier_leg_chunks_follow_the_chunking_rules_over_the_slices(tmp_path):
    """DESIGN.md "Chunking" over the leg layouts of "HIER": 192 bf16, 4 local ranks, 2 nodes:
    slices of 48.  The intra legs cut each 48-element slice like a ring block: one channel
    (48 // 64 = 0, at least 1), chunk 48 rounded up to 32 = 64, one group, tail 48.  The
    inter all-reduce is the ring layout of one slice over 2 nodes: 24 a position, chunk 32,
    one group (2 * 32 >= 48), tail ceil(48 / 2) = 24."""
    legs = {leg["name"]: leg for leg in _hier_192(tmp_path)["hier"]["legs"]}
    intra = {"channels": 1, "chunk_size_n": 64, "pgta": 1, "tail_chunk": 48}
    for name in ("intra_redsct", "intra_allg"):
        assert [p["chunk"] for p in legs[name]["plans"]] == [intra]
    inter = [p["chunk"] for p in legs["inter_allr"]["plans"]]
    assert [(c["chunk_size_n"], c["pgta"], c["tail_chunk"]) for c in inter] == [(32, 1, 24)]


def test_hier_buffers_are_byte_offsets_of_disjoint_element_spaces(tmp_path):
    """DESIGN.md "HIER" and FORMATS.md §1.1 ``hier.legs[].buffers``: the scratch region holds
    the first leg's RECV, MID and the inter leg's RECV (two for a single-cycle inter leg),
    each element-indexed over the trigger's element space at its own offset, in bytes
    (element e at offset + e x dtype size); the gateway holds the inter leg's two staging
    views.  192 bf16: each buffer spans 384 bytes, so the offsets are distinct multiples of
    384; the inter leg reads MID where the first leg wrote it."""
    t = _hier_192(tmp_path)
    buf = [{b["role"]: (b["region"], b["offset"]) for b in leg["buffers"]}
           for leg in t["hier"]["legs"]]
    assert t["hier"]["legs"][1]["algorithm"] == "SINGLE_CYCLE_RING"
    assert buf[0]["out"][0] == "scratch" and buf[1]["in"] == buf[0]["out"]
    scratch = [buf[0]["recv"], buf[0]["out"], buf[1]["recv"], buf[1]["recv2"]]
    assert all(region == "scratch" for region, _ in scratch)
    assert len({off for _, off in scratch}) == 4
    gw = [buf[1]["gw"], buf[1]["gw2"]]
    assert all(region == "gw" for region, _ in gw) and gw[0][1] != gw[1][1]
    assert all(off % 384 == 0 for _, off in scratch + gw)


@pytest.mark.parametrize("algo, buffers", [("inter_allr:ring", (3, 1)), (None, (4, 2))])
def test_hier_scratch_and_gateway_hold_one_element_space_a_buffer(tmp_path, algo, buffers):
    """DESIGN.md "HIER": the scratch region holds the first leg's RECV, MID and the inter
    leg's RECV (two for a single-cycle inter leg), each over the trigger's element space;
    the gateway holds the inter leg's staging (two for single-cycle).  192 bf16 (384 bytes a
    buffer) in a one-trigger model: 3 x 384 scratch and 384 gateway bytes with a RING inter
    leg, 4 x 384 and 2 x 384 with the policy's SINGLE_CYCLE_RING one."""
    ranks = [0, 1, 2, 3, 64, 65, 66, 67]
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", ranks, 192, lnc=2), algo=algo)
    inter = man["triggers"][0]["hier"]["legs"][1]["algorithm"]
    assert inter == ("RING" if algo else "SINGLE_CYCLE_RING")
    size = {r["kind"]: r["size"] for r in man["memory"]["regions"]
            if r["kind"] in ("scratch", "gw")}
    assert (size["scratch"], size["gw"]) == (buffers[0] * 384, buffers[1] * 384)


@pytest.mark.parametrize("algo, legs", [
    ("inter_allr:ring", [{"gw": ("gw", 0), "recv": ("scratch", 0), "out": ("scratch", 384)},
                         {"gw": ("gw", 0), "in": ("scratch", 384), "recv": ("scratch", 768)},
                         {"gw": ("gw", 0)}]),
    (None, [{"gw": ("gw", 0), "recv": ("scratch", 0), "out": ("scratch", 384)},
            {"gw": ("gw", 0), "gw2": ("gw", 384), "in": ("scratch", 384),
             "recv": ("scratch", 768), "recv2": ("scratch", 1152)},
            {"gw": ("gw", 0)}]),
], ids=["ring-inter", "single-cycle-inter"])
def test_hier_legs_list_only_their_own_buffers_inside_the_regions(tmp_path, algo, legs):
    """DESIGN.md "HIER" "Buffers" and FORMATS.md §1.1 ``hier.legs[].buffers``: scratch holds
    RECV at 0, MID at one element space and the inter leg's RECV at two (a single-cycle
    inter leg's second RECV at three); the gateway's view at 0 (every entry's gateway view),
    a single-cycle leg's second at one space.  192 bf16 elements: a space of 384 bytes.
    Before 2026-12-05 every leg also listed ``gw2`` (at 384) and ``recv2`` (at 1152), past
    the gateway's 384 and scratch's 1152 bytes when no leg is single-cycle, and every leg
    listed them when one was."""
    ranks = [0, 1, 2, 3, 64, 65, 66, 67]
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", ranks, 192, lnc=2), algo=algo)
    got = [{b["role"]: (b["region"], b["offset"]) for b in leg["buffers"]}
           for leg in man["triggers"][0]["hier"]["legs"]]
    assert got == legs
    size = {r["kind"]: r["size"] for r in man["memory"]["regions"]}
    assert all(off < size[region] for leg in got for region, off in leg.values())


@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter"])
def test_hier_all_gather_and_reduce_scatter_legs_list_buffers_inside_the_regions(tmp_path,
                                                                                  kind):
    """DESIGN.md "HIER" "Buffers": an all-gather's legs run in OUT (no scratch: each lists
    only the gateway view at 0); a reduce-scatter's first leg RECV at 0 and MID at one space
    of scratch, its inter leg MID as input and its RECV at two spaces.  192 bf16 elements
    over 8 ranks: the all-gather's space 8 x 192 x 2 = 3072 bytes (a gateway of 3072), the
    reduce-scatter's 384 (scratch 3 x 384, gateway 384)."""
    ranks = [0, 1, 2, 3, 64, 65, 66, 67]
    man, _ = lower(tmp_path, coll_spec(kind, "bf16", ranks, 192, lnc=2), algo=None)
    t = man["triggers"][0]
    assert t["algorithm"] == "HIER"
    got = [{b["role"]: (b["region"], b["offset"]) for b in leg["buffers"]}
           for leg in t["hier"]["legs"]]
    size = {r["kind"]: r["size"] for r in man["memory"]["regions"]}
    if kind == "all_gather":
        assert got == [{"gw": ("gw", 0)}] * 2
        assert (size.get("scratch", 0), size["gw"]) == (0, 3072)
    else:
        assert got == [{"gw": ("gw", 0), "recv": ("scratch", 0), "out": ("scratch", 384)},
                       {"gw": ("gw", 0), "in": ("scratch", 384), "recv": ("scratch", 768)}]
        assert (size["scratch"], size["gw"]) == (1152, 384)


def test_hier_inter_groups_of_slices_that_differ_share_one_plan_record(tmp_path):
    """FORMATS §1.1: a leg's ``plans`` are its groups' distinct plans, each once (the
    simulator refuses a repeat). 38 bf16 elements over 4 local ranks on 2 nodes: the even
    share ceil(38 / 4) = 10 is not over 32, so DESIGN's even_split gives slices of 10, 10, 9
    and 9. Each inter_allr group all-reduces its slice over 2 ranks: ceil(10 / 2) = 5 and
    ceil(9 / 2) = 5 a position, rounded up to an even 6, the chunk 6 rounded up to 32, one
    chunk group: the same record for all four groups. The plans were keyed by the whole
    chunk plan, its span included, so ``lower`` wrote two identical records and ``simulate``
    refused its own output (found by a false-refusal sweep)."""
    from nrtrewrite.simulate import simulate_output

    ranks = [0, 1, 2, 3, 64, 65, 66, 67]
    man, out = lower(tmp_path, coll_spec("all_reduce", "bf16", ranks, 38, lnc=2), ranks=None,
                     algo=None)
    inter = man["triggers"][0]["hier"]["legs"][1]
    assert inter["name"] == "inter_allr"
    # by tests/chunkmodel.py: each slice interleaved over its 2 ranks (one ring over two
    # nodes, SELECTION.md §7: one SINGLE_CYCLE_RING pair), every slice the same plan
    slices = CM.even_split(38, 4)
    assert slices == [10, 10, 9, 9]
    pairs = max(1, CM.channel_rule(2 * 10, 10, 2, inter=True, rings=1) // 2)
    want = [CM.chunk_plan(sl, pairs, 2, rank_n=2) for sl in slices]
    assert all(w == want[0] for w in want)
    assert [p["chunk"] for p in inter["plans"]] == [want[0]] == [
        {"channels": 1, "chunk_size_n": 32, "pgta": 1, "tail_chunk": 6}]
    assert [g["plan"] for g in inter["groups"]] == [0, 0, 0, 0]
    assert simulate_output(out).ok


def test_hier_inter_groups_of_a_ring_leg_whose_slices_differ_share_one_plan_record(tmp_path):
    """As above with inter_allr forced to RING (its plans are keyed by RingLegPlan, not the
    single-cycle plan): slices of 10, 10, 9 and 9 elements over 2 ranks, ceil(10 / 2) =
    ceil(9 / 2) = 5 a position, one record for all four groups, and the output simulates
    (mutation audit round 8: the ring leg's key taken as the whole chunk plan, span included,
    wrote two identical records, which simulate refuses)."""
    from nrtrewrite.simulate import simulate_output

    ranks = [0, 1, 2, 3, 64, 65, 66, 67]
    man, out = lower(tmp_path, coll_spec("all_reduce", "bf16", ranks, 38, lnc=2), ranks=None,
                     algo="inter_allr:ring")
    inter = man["triggers"][0]["hier"]["legs"][1]
    assert (inter["name"], inter["algorithm"]) == ("inter_allr", "RING")
    assert len(inter["plans"]) == 1 and [g["plan"] for g in inter["groups"]] == [0, 0, 0, 0]
    assert simulate_output(out).ok


def test_the_ring_search_tries_neighbours_in_forward_order_along_the_cycle():
    """TOPOLOGY.md rule 2.  trn2's H0 visits devices 0 1 2 3 7 4 5 6 10 11 8 9 13 14 15 12
    (TOPOLOGY.md's JSON example); devices 0, 1, 2, 3, 5, 6 (logical core 0 of each at LNC 2:
    ranks 0, 4, 8, 12, 20, 24) restrict it to 0 1 2 3 5 6, where 3 and 5 are not linked, so
    the DFS runs.  Worked by hand over trn2's links, neighbours tried nearest-forward first:
    0 -> 1 -> 2 -> {3: dead end; 6 -> 5: dead end} -> back to 1 -> 5 -> 6 -> 2 -> 3 -> 0,
    i.e. devices 0 1 5 6 2 3."""
    from nrtrewrite.topology.model import load_topology
    from nrtrewrite.topology.rings import ring_orders

    topo = load_topology("trn2", world=tuple(range(64)), lnc_size=2)
    h0 = [0, 1, 2, 3, 7, 4, 5, 6, 10, 11, 8, 9, 13, 14, 15, 12]
    assert list(topo.device_cycles[0]) == h0

    def linked(a: int, b: int) -> bool:  # TOPOLOGY.md: device d at (d % 4, d // 4), wrapping
        dx, dy = (a % 4 - b % 4) % 4, (a // 4 - b // 4) % 4
        return (dy == 0 and dx in (1, 3)) or (dx == 0 and dy in (1, 3))

    def dfs(path: list[int], todo: set[int]) -> list[int] | None:
        if not todo:
            return path if linked(path[-1], path[0]) else None
        here = h0.index(path[-1])
        for d in sorted((d for d in todo if linked(path[-1], d)),
                        key=lambda d: (h0.index(d) - here) % len(h0)):
            found = dfs(path + [d], todo - {d})
            if found:
                return found
        return None

    ranks = (0, 4, 8, 12, 20, 24)
    devices = sorted({r // 4 for r in ranks}, key=h0.index)  # the restriction of H0
    assert devices == [0, 1, 2, 3, 5, 6] and not linked(3, 5)
    cycle = dfs(devices[:1], set(devices[1:]))
    assert cycle == [0, 1, 5, 6, 2, 3]
    orders = ring_orders(topo, ranks, 4)
    assert tuple(orders[0]) == tuple(4 * d for d in cycle) == (0, 4, 20, 24, 8, 12)


# --- mutation audit round 5: params / rdh / mesh / slots / buffers ---------------------------

LEAF_MESH_REDUCE = 17  # FORMATS.md §3 byte 12


@pytest.mark.parametrize("ranks, rtype", [([0, 1], 0), ([0, 1, 2], 2), ([0, 1, 2, 3], 2)])
def test_a_mesh_reduce_of_more_than_two_sources_is_kangaring_nr1w(tmp_path, ranks, rtype):
    """FORMATS.md §3 byte 14 (``reduction_type``): "mesh and RDH: 0 for two sources, the
    2-reader/1-writer step, 2 for more" (DESIGN.md "Mesh and RDH": RING_2R1W for two,
    KANGARING_NR1W for more).  A MESH all-reduce's owner reduces its IN block and one slot
    per peer: n sources over n ranks, so 2 ranks give 0 and 3 or 4 ranks give 2; a reduce leg
    has ``n_tiles`` x sources CCE descriptors (byte 36)."""
    _, out = lower(tmp_path, coll_spec("all_reduce", "bf16", ranks, 3000), ranks=(0,),
                   algo="mesh")
    legs = records(out, 0, "legs.bin")
    red = legs[legs["leaf"] == LEAF_MESH_REDUCE]
    assert red.size == 1
    assert int(red["reduction_type"][0]) == rtype
    assert int(red["cce_count"][0]) == int(red["n_tiles"][0]) * len(ranks)


@pytest.mark.parametrize("op, private", [("reduce_scatter", True), ("all_reduce", False)])
def test_rdh_reduce_scatter_partials_live_in_private_scratch(tmp_path, op, private):
    """DESIGN.md "Mesh and RDH", completion and reuse: reduce-scatter has no return traffic,
    so "its slots (and RDH's partials) live in a *private* scratch area of the trigger that
    no other trigger reuses"; FORMATS.md §1.1 ``rdh.private_scratch``.  An all-reduce's
    all-gather phase is its guarantee: it uses the shared scratch."""
    man, _ = lower(tmp_path, coll_spec(op, "bf16", [0, 1, 2, 3], 4096), algo="intra_rdh")
    assert man["triggers"][0]["rdh"]["private_scratch"] is private


@pytest.mark.parametrize("algo, nbytes", [("mesh", 4004), ("single_step_mesh", 12004)])
def test_the_mesh_channel_buffer_is_n_minus_1_slots(tmp_path, algo, nbytes):
    """DESIGN.md "Mesh and RDH": slots are compact, ``n - 1`` of them: MESH needs ``(n - 1)``
    block-sized slots, SINGLE_STEP_MESH ``(n - 1) x`` the message.  3001 bf16 over 3 ranks:
    all-reduce blocks ``[jN/n, (j+1)N/n)`` = [0, 1000), [1000, 2000), [2000, 3001), the
    largest 1001 elements: 2 x 1001 x 2 = 4004 bytes; SINGLE_STEP_MESH 2 x 3001 x 2 = 12004
    (FORMATS.md §1.1 ``mesh.channel_buffer_bytes``)."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 1, 2], 3001), algo=algo)
    mesh = man["triggers"][0]["mesh"]
    assert mesh["blocks"] == [[0, 1000], [1000, 2000], [2000, 3001]]
    assert mesh["channel_buffer_bytes"] == nbytes


@pytest.mark.parametrize("op, private", [("reduce_scatter", True), ("all_reduce", False)])
def test_mesh_reduce_scatter_slots_live_in_private_scratch(tmp_path, op, private):
    """DESIGN.md "Mesh and RDH", completion and reuse: reduce-scatter has no return traffic,
    so its channel-buffer slots live in a private scratch area of the trigger; an
    all-reduce's slots are in the shared scratch (FORMATS.md §1.1
    ``mesh.private_channel_buffer``)."""
    man, _ = lower(tmp_path, coll_spec(op, "bf16", [0, 1, 2, 3], 4096), algo="mesh")
    assert man["triggers"][0]["mesh"]["private_channel_buffer"] is private


def test_a_mesh_broadcast_to_more_than_8_network_peers_stages_each_row_apart(tmp_path):
    """DESIGN.md "Mesh and RDH", completion and reuse: a composer that sends the same
    elements over the network twice in one entry ("an all-gather broadcast to more than 8
    network peers") gives each send its own gateway view; a leg has at most 8 destinations
    (FORMATS.md §3.1).  One rank on each of 10 nodes: each rank broadcasts its reduced block
    to 9 network peers in two legs (8 + 1); sharing one staging area, the second leg would
    overwrite bytes the proxy may still be reading for the first (the simulator's race
    check, SIMULATOR.md)."""
    from test_simulate import assert_clean
    group = [64 * i for i in range(10)]
    out = lower_spec(coll_spec("all_reduce", "bf16", group, 1000, lnc=2), tmp_path / "o",
                     algo="mesh", topology="trn2:nodes=10")
    assert_clean(out, seed=0)


def test_single_cycle_ccw_partials_are_where_the_manifest_puts_recv2(tmp_path):
    """FORMATS.md §1.2 `buffers`: a flat SINGLE_CYCLE_RING trigger's second receive view
    `recv2` (the CCW direction's partials) lives in scratch at the listed offset, the CW
    direction's `recv` at 0, element e at offset + e x dsize.  4 ranks of one device, 4000
    bf16: every destination (S2M, FORMATS.md §5 meta_ctrl bit 4) BD of rank 0 that writes a
    scratch region (a peer's receive buffer: §10, (lc << 36) + 0x1_0000_0000 + region
    offset) lies in [0, 8000) of it on a CW channel and in [recv2, recv2 + 8000) on a CCW
    one (`single_cycle.pairs`: [CW, CCW]); the meeting point's reduce reads both."""
    n, dsize = 4000, 2
    man, out = lower(tmp_path, coll_spec("all_reduce", "bf16", 4, n),
                     algo="allreduce:single_cycle_ring")
    trig = man["triggers"][0]
    assert trig["algorithm"] == "SINGLE_CYCLE_RING"
    roles = {b["role"]: b for b in trig["buffers"]}
    assert roles["recv2"]["region"] == "scratch"
    recv2 = roles["recv2"]["offset"]
    assert recv2 >= n * dsize  # the two views do not overlap
    mem = man["memory"]
    scratch = next(r for r in mem["regions"] if r["name"] == "scratch")
    cw = {p[0] for p in trig["single_cycle"]["pairs"]}
    ccw = {p[1] for p in trig["single_cycle"]["pairs"]}
    legs = records(out, 0, "legs.bin")
    bds = records(out, 0, "dma.bin")
    chan = np.repeat(legs["channel"].astype(np.int64), legs["dma_count"].astype(np.int64))
    local = bds["buf_ptr"].astype(np.int64) & ((1 << 36) - 1)  # the offset in a core window
    off = local - mem["dram_base"] - scratch["offset"]
    s2m = ((bds["meta_ctrl"].astype(np.int64) >> 4) & 1) == 1
    in_scratch = (off >= 0) & (off < scratch["size"]) & s2m
    seen = {"cw": 0, "ccw": 0}
    for c, lo in [(c, 0) for c in sorted(cw)] + [(c, recv2) for c in sorted(ccw)]:
        o = off[in_scratch & (chan == c)]
        assert ((o >= lo) & (o < lo + n * dsize)).all(), (c, int(o.min()), int(o.max()))
        seen["cw" if c in cw else "ccw"] += o.size
    assert seen["cw"] and seen["ccw"]


def test_even_split_aligns_to_32_elements_only_above_a_32_element_share():
    """DESIGN.md, the HIER table (`even_split`): slices of a multiple of 32 elements, the last
    one shorter, when the even share ceil(n / parts) is over 32 and that leaves every slice
    non-empty; else sizes differing by at most one.  100 over 4: share 25, so 25 each (not
    32, 32, 32, 4); 200 over 4: share 50 -> 64, 64, 64, 8; 100 over 3: share 34 -> 64 x 2
    would leave the third slice empty, so 34, 33, 33."""
    from nrtrewrite.compose.segments import even_split
    assert even_split(0, 100, 4) == [(0, 25), (25, 50), (50, 75), (75, 100)]
    assert even_split(0, 200, 4) == [(0, 64), (64, 128), (128, 192), (192, 200)]
    assert even_split(0, 100, 3) == [(0, 34), (34, 67), (67, 100)]


def test_a_hier_triggers_chunk_pgta_is_its_legs_most_chunk_groups(tmp_path):
    """FORMATS.md section 1.1 `chunk`, HIER: `{"pgta": P}` only, P the most chunk groups of
    any of its legs' plans (their own `chunk` in `hier.legs[].plans`)."""
    man, _ = lower(tmp_path, coll_spec("all_reduce", "bf16", [0, 1, 2, 3, 64, 65, 66, 67],
                                       1 << 23, lnc=2), algo="inter_allr:ring")
    trig = man["triggers"][0]
    assert trig["algorithm"] == "HIER"
    legs = [p["chunk"]["pgta"] for leg in trig["hier"]["legs"] for p in leg["plans"]]
    assert set(trig["chunk"]) == {"pgta"} and trig["chunk"]["pgta"] == max(legs) > 1
