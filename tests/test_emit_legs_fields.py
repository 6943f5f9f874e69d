"""Fields and checks of the emitter (nrtrewrite/emit/legs.py) and the tiling rule
(nrtrewrite/emit/tiling.py) that the lowered fixtures alone did not pin: each test's expected
values are worked out from docs/FORMATS.md (or the seeds it cites), not read off the
emitter (twelfth mutation round, docs/RELIABILITY.md §6)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.codes import EdgeLocality
from nrtrewrite.compose import ir as IR
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.legs import RankBuilder, emit_entries
from nrtrewrite.errors import LimitError, LoweringError
from nrtrewrite.lower import LowerOptions, emit_items, plan_lowering, rank_entries
from nrtrewrite.neff.reader import read_model

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def _items(name: str, rank: int, **opts):
    plan = plan_lowering(read_model(FIX / f"{name}.neff"), LowerOptions(**opts))
    return emit_items(plan, rank_entries(plan, rank), rank)


def _emit(items) -> dict[str, np.ndarray]:
    """Every artifact of ``items`` emitted on one rank, as one record array per file."""
    b = RankBuilder(0)
    emit_entries(b, items)
    parts = b.finish()
    b.close()
    return {name: (np.concatenate(p) if p else np.zeros(0, F.ARTIFACTS[name][0]))
            for name, p in parts.items()}


def test_peer_0_across_the_network_is_refused():
    """Peer 0 of an entry is the rank itself (its own core, no routing): a table whose peer 0
    is across the network would stage the rank's own legs through the net proxy."""
    ctx, ir = _items("ar2", 0)[0]
    bad = dataclasses.replace(ctx, localities=[EdgeLocality.NETWORK, *ctx.localities[1:]],
                              peer_tables=None)
    b = RankBuilder(0)
    with pytest.raises(LoweringError, match="peer 0 must be the rank itself"):
        emit_entries(b, [(bad, ir)])
    b.close()


def _one_channel_copies(n: int):
    """ar2's rank 0 entry with its IR replaced by ``n`` copies of one single-tile copy leg
    (one source, one destination, 32 elements, no waits or increments of its own): per leg
    1 M2S and 1 S2M BD and one semaphore BD, its ``dma_compl_sema`` increment (FORMATS §3,
    §5, §7)."""
    ctx, ir = _items("ar2", 0)[0]
    copy = (ir["n_src"] == 1) & (ir["n_dst"] == 1) & (ir["reduce"] == 0)
    one = IR.take(ir, np.flatnonzero(copy)[:1])
    one["stop"] = one["start"] + 32
    one["n_wait"] = 0
    one["n_inc"] = 0
    return ctx, IR.take(one, np.zeros(n, np.int64))


def test_generation_tags_wrap_after_four_rings_of_4096():
    """FORMATS §5 / §7: a data BD's ``ring_id`` (bits 25:24 of its first word) and a
    semaphore BD's ``gen`` (bits 25:24 of ``ctrl``) are (index among this rank's BDs of that
    kind on the channel) // 4096, mod 4: after 4 x 4096 BDs the tag is 0 again, and no
    other bit of the word is touched (bit 26 is FIRST in dma.bin, 0 in sem.bin).  16400
    single-tile copy legs on one channel: 32800 data BDs and 16400 and a few semaphore BDs
    (the handshake's and mark_end's), past 4 x 4096 of each."""
    legs = 16400
    files = _emit([_one_channel_copies(legs)])
    sem = files["sem.bin"]
    k = np.arange(sem.size)
    assert sem.size > 4 * 4096
    assert ((sem["ctrl"].astype(np.int64) >> 24) == (k // 4096) % 4).all()
    dma = files["dma.bin"]
    assert dma.size == 2 * legs
    k = np.arange(dma.size)
    len_ctrl = dma["len_ctrl"].astype(np.int64)
    assert ((len_ctrl >> 24) & 3 == (k // 4096) % 4).all()
    # FIRST (26) on the M2S BD, LAST (27) on the S2M BD of each one-tile leg, nothing above
    assert ((len_ctrl >> 26) == np.where(k % 2 == 0, 1, 2)).all()
    assert ((len_ctrl & 0xFFFF) == 32 * 2).all()  # 32 bf16 elements


def _network_increment(items):
    """(ctx, ir, row, slot) of the first increment aimed at a peer across the network."""
    for ctx, ir in items:
        net = ctx.tables().net
        for row in range(ir.size):
            for slot in range(int(ir["n_inc"][row])):
                if net[int(ir["inc_peer"][row, slot])]:
                    return ctx, ir.copy(), row, slot
    raise AssertionError("no network increment")


def test_a_network_increment_of_another_value_than_1_is_refused():
    """FORMATS §7 / §8: an increment across the network becomes the leg's own ``send_sema``
    +1, and the net proxy increments the receiver once per transfer: a value of 2 would be
    lost, so it is refused."""
    ctx, ir, row, slot = _network_increment(_items("two_node128", 0))
    assert ir["inc_val"][row, slot] == 1
    ir["inc_val"][row, slot] = 2
    b = RankBuilder(0)
    with pytest.raises(LoweringError, match="across the network must have value 1"):
        emit_entries(b, [(ctx, ir)])
    b.close()


def test_a_leg_incrementing_a_network_destination_twice_is_refused():
    """FORMATS §7: a network-bound destination costs exactly one ``send_sema`` increment
    (one count per transfer the proxy makes): a second increment of the same network peer
    on that leg (more increments than network destinations) is refused, as one too few is."""
    ctx, ir, row, slot = _network_increment(_items("two_node128", 0))
    n = int(ir["n_inc"][row])
    assert n < IR.MAX_INC
    for f in ("inc_peer", "inc_sem", "inc_val"):
        ir[f][row, n] = ir[f][row, slot]
    ir["n_inc"][row] = n + 1
    b = RankBuilder(0)
    with pytest.raises(LoweringError, match="each network destination exactly once"):
        emit_entries(b, [(ctx, ir)])
    b.close()


#: A custom device of 16 logical cores (2 dies x 2 engines x 4 TPBs) at LNC 1: TOP_SPs 0..15.
BIG16 = {"format": "nrtrewrite-topology/1", "name": "big16", "nodes": 1, "lnc_sizes": [1],
         "devices_per_node": 1, "device": {"dies": 2, "sengines_per_die": 2,
                                           "tpbs_per_sengine": 4, "c2c_ports": 4},
         "links": [], "routing_ids": [0], "kangaring": False, "mesh": True,
         "mesh_sub_type": "FULL_MESH"}


def test_semaphores_of_top_sps_8_to_15_carry_the_die_bit_47(tmp_path):
    """FORMATS §10: semaphore ``id`` of TOP_SP ``sp`` in window ``w`` is at 0x82_8000_0000 +
    ((sp & 7) << 30) + ((sp > 7) << 47) + w + 4 x id (INC 0x1800, DEC 0x1C00).  Ranks 8 and
    9 of a 16-core device (one device: no routing bits): every semaphore BD of rank 8 has
    bit 47 and not bit 46; its own (``remote`` 0) are TOP_SP 8's (sp & 7 = 0: waits in the
    DEC window, increments in the INC one), its remote ones TOP_SP 9's (sp & 7 = 1)."""
    import json

    from test_spec_values import records
    from test_simulate import coll_spec, lower_spec

    topo = tmp_path / "big16.json"
    topo.write_text(json.dumps(BIG16))
    out = lower_spec(coll_spec("all_reduce", "bf16", [8, 9], 4096), tmp_path / "out",
                     topology=str(topo), ranks=(8,))
    sem = records(out, 8, "sem.bin")
    assert sem.size
    addr = sem["addr"].astype(np.int64)
    ctrl = sem["ctrl"].astype(np.int64)
    assert ((addr >> 47) & 1 == 1).all() and ((addr >> 46) & 1 == 0).all()
    rel = addr - (1 << 47) - 0x82_8000_0000
    remote = (ctrl >> 16) & 1 == 1
    assert remote.any() and (~remote).any()
    sp7 = np.where(remote, 1, 0)
    window = np.where((ctrl & 0xFF) == 20, 0x1C00, 0x1800)
    ids = (rel - (sp7 << 30) - window) // 4
    assert ((ids >= 0) & (ids < 256)).all()
    assert (rel == (sp7 << 30) + window + 4 * ids).all()


def test_neigh_is_next_for_a_destination_on_a_peer_even_without_an_increment():
    """FORMATS §3 ``neigh``: 1 NEXT when one of the leg's destinations *or* increments is
    another rank's.  The composers always pair a peer destination with an increment of that
    peer, so the IR is built: ar2's copy leg (rank 0, its destination on peer 1) with its
    increments removed keeps neigh 1; with its destination made rank 0's own it is 0 LOCAL
    (no wait, so not 2 PREV)."""
    ctx, ir = _items("ar2", 0)[0]
    sl = np.arange(IR.MAX_DST)
    row = int(np.flatnonzero(((sl < ir["n_dst"][:, None]) & (ir["dst_peer"] != 0)).any(1))[0])
    one = IR.take(ir, [row])
    one["n_inc"] = 0
    one["n_wait"] = 0
    legs = _emit([(ctx, one)])["legs.bin"]
    data = legs[legs["sdma_op"] != 0]
    assert data.size == 1 and data["neigh"][0] == 1
    one["dst_peer"] = 0
    legs = _emit([(ctx, one)])["legs.bin"]
    data = legs[legs["sdma_op"] != 0]
    assert data.size == 1 and data["neigh"][0] == 0


@pytest.mark.parametrize("sources, tiles, ok", [(2, 32767, True), (3, 21845, False)])
def test_a_leg_of_exactly_65534_m2s_bds_fits_its_tp_inc_steps_record(sources, tiles, ok):
    """FORMATS §2.2: a tp_inc_steps record counts at most 65534 M2S and 65534 S2M BDs of a
    leg (``TPINC_MAX_BDS``); a leg that needs more is refused.  A bf16 copy leg (built IR)
    of ``sources`` sources (ar2's input, each slot the same) and one destination: a tile is
    64 KiB = 32768 elements (FORMATS §3 n_tiles) with one M2S BD per source and one S2M BD
    (§5), so 2 x 32767 = 65534 M2S BDs fit (one record 65534 / 32767 / repeat 1) and
    3 x 21845 = 65535 are refused."""
    ctx, ir = _one_channel_copies(1)
    ir["n_src"] = sources
    for k in range(1, sources):
        ir["src_view"][0, k] = ir["src_view"][0, 0]
        ir["src_peer"][0, k] = ir["src_peer"][0, 0]
    ir["stop"] = ir["start"] + tiles * 32768
    b = RankBuilder(0)
    if ok:
        emit_entries(b, [(ctx, ir)])
        legs = np.concatenate(b.finish()["legs.bin"])
        (tp,) = b.tpinc_by_entry.values()
        rows = list(zip(*(tp[f].tolist() for f in ("m2s", "s2m", "repeat"))))
        assert (sources * tiles, tiles, 1) in rows
        assert int(legs["n_tiles"].max()) == tiles
    else:
        with pytest.raises(LimitError, match="needs 65535 M2S and 21845 S2M BDs, at most 65534"
                           ) as exc:
            emit_entries(b, [(ctx, ir)])
        # a DRAM leg: one BD a tile and stream, so the cause is its length, not an SBUF
        # pattern of short rows (the message blamed SBUF patterns: a code reviewer)
        assert str(exc.value).endswith(
            f"its {tiles * 32768} elements make {tiles} tiles, one BD each per source and "
            "destination (the leg is not split further: a smaller message or another engine "
            "lowers it)")
    b.close()


def test_a_network_bound_words_dst_is_the_gateway_copy_it_stages_in(tmp_path):
    """FORMATS §4 TENSOR3D ``start_addr``: ``dst`` is the leg's first destination, or for a
    network-bound one the gateway view it stages in, whose origin is element 0 for the mesh
    gateway copies: ``e x dsize``.  A 2-rank bf16 MESH all-reduce of 4096 elements across
    two trn2 nodes: rank 0 has no peer on its node, so each of its ``mesh_send`` legs (leaf
    16: block 1 to the peer's channel buffer, then its reduced block 0 to the peer's OUT)
    stages in the gateway, and its first word's dst start_addr is elem_start x 2 (4096 for
    block 1, where the peer's channel-buffer slot, whose origin is the block's first element,
    would give 0)."""
    from test_spec_values import records
    from test_simulate import coll_spec, lower_spec

    out = lower_spec(coll_spec("all_reduce", "bf16", [0, 128], 4096), tmp_path / "out",
                     topology="trn2:nodes=2", algo="mesh", ranks=(0,))
    legs = records(out, 0, "legs.bin")
    words = records(out, 0, "sb2sb.bin")
    sends = legs[legs["leaf"] == 16]
    assert sorted(sends["elem_start"].tolist()) == [0, 2048]
    for leg in sends:
        word = words[int(leg["sb2sb_first"])]
        assert int(word["dst"]["start_addr"]) == int(leg["elem_start"]) * 2
        assert int(word["src"]["start_addr"]) == int(leg["elem_start"]) * 2  # IN: e x dsize


def test_a_leg_with_destinations_and_no_source_is_refused():
    """FORMATS §3.1: a data leg reads its source streams and writes the result to every
    destination; a leg with a destination but no source has nothing to write (a tile of no
    M2S BD), so the IR's leg is refused."""
    ctx, ir = _one_channel_copies(1)
    ir["n_src"] = 0
    b = RankBuilder(0)
    with pytest.raises(LoweringError, match="a leg with destinations needs a source"):
        emit_entries(b, [(ctx, ir)])
    b.close()


def test_an_entry_whose_legs_increment_nothing_of_their_own():
    """An entry with no IR increment at all (one channel, no sync peers: no handshake;
    copies without ``inc``): every leg still gets its ``dma_compl_sema`` +1 and ``mark_end``
    waits for them (FORMATS §7: subop 21 value 1 per leg, then subop 20 with the number of
    other legs of the channel)."""
    ctx, ir = _one_channel_copies(5)
    ctx = dataclasses.replace(ctx, sync_peers=[])
    files = _emit([(ctx, ir)])
    sem = files["sem.bin"]
    assert (sem["ctrl"] & 0xFF).tolist() == [21] * 5 + [20]
    assert sem["value"].tolist() == [1] * 5 + [5]
    assert files["legs.bin"]["sem_count"].tolist() == [1] * 6


def test_the_rank_manifest_lists_fifo_slices_of_network_channels_only(tmp_path):
    """FORMATS §1.2 ``fifo``: one item per channel *with network traffic*.  A 2-rank ring
    all-reduce on one trn2 node has legs on its channels but sends nothing over the network:
    no item at all (not one of zero counts per channel the entry ran on).  Across two nodes
    (ranks 0 and 128, every step crosses the network) each item's channel has net_ops
    records, the slices following each other from 0 (channel-major files)."""
    import json

    from test_simulate import coll_spec, lower_spec

    out = lower_spec(coll_spec("all_reduce", "bf16", [0, 1], 4096), tmp_path / "one",
                     topology="trn2", ranks=(0,))
    man = json.loads((out / "rank-0000" / "manifest.json").read_text())
    assert man["entries"] and man["entries"][0]["channels"]
    assert man["fifo"] == []
    out = lower_spec(coll_spec("all_reduce", "bf16", [0, 128], 4096), tmp_path / "two",
                     topology="trn2:nodes=2", ranks=(0,))
    man = json.loads((out / "rank-0000" / "manifest.json").read_text())
    assert man["fifo"]
    first = {"ops": 0, "src": 0, "dest": 0}
    for item in man["fifo"]:
        assert item["ops"][1] > 0 and item["src"][1] > 0 and item["dest"][1] > 0
        for k in first:
            assert item[k][0] == first[k]
            first[k] += item[k][1]
    assert first["ops"] == man["files"]["net_ops.bin"]["records"]
