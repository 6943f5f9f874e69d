"""The forty-first session's mutation audit of the emitter (nrtrewrite/emit/): tests for the
mutations of legs.py, formats.py, address.py and buffers.py no test saw.  Every expected
value is worked out by hand from docs/FORMATS.md (the section named in each test) and the
access-pattern rule of NEFF-LIKE.md §2, never read off the emitter's output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.emit import formats as F
from nrtrewrite.emit.address import (EVT_SEM_DEC, EVT_SEM_INC, channel_sem, decode_sema_address,
                                     sema_address)
from nrtrewrite.emit.buffers import BufferView
from nrtrewrite.errors import LimitError
from nrtrewrite.neff.model import AccessPattern
from test_simulate import assert_clean, coll_spec, lower_spec


def _sbuf_all_reduce_over_two_nodes(tmp_path: Path) -> Path:
    """An fp16 ring all-reduce of 65536 elements over ranks [0, 64] of ``trn2:nodes=2``
    (LNC 2: one rank a node, so every send crosses the network), IN and OUT state-buffer
    vars of 128 partitions walked as 8 rows of 64 elements with a row stride of 128
    elements (NEFF-LIKE.md §2: 64 elements a partition row are contiguous, 128 bytes; the
    next row starts 256 bytes on).  Two vars of 2048 bytes a partition: the partition
    stride is 4096 (FORMATS.md §10, 64-byte aligned)."""
    sb = lambda v: {"var": v, "start": 0, "partitions": 128, "dims": [[1, 64], [128, 8]]}
    spec = {"header": {"pkg_version": 2, "name": "sbnet", "lnc_size": 2}, "subgraphs": [{
        "name": "sg00",
        "vars": [{"name": "sb_c", "type": "state-buffer", "size": 2048, "partitions": 128},
                 {"name": "sb_d", "type": "state-buffer", "size": 2048, "partitions": 128}],
        "replica_groups": [[0, 64]],
        "engines": {"sp": ["nop", {"all_reduce": {"dtype": "fp16", "op": "add",
                                                  "src": sb("sb_c"), "dst": sb("sb_d")}}]}}]}
    return lower_spec(spec, tmp_path / "o", topology="trn2:nodes=2")


def test_a_network_transfer_of_many_runs_has_complete_on_its_last_run_only(tmp_path):
    """FORMATS.md §8 "Entries" / §8.2: one transmit entry per contiguous run of a network
    destination, ``complete = 1`` on the last run of each destination of a leg only.  Rank
    0 of the 2-rank ring (2 chunks of 32768 elements, halves of 16384): its two reduce-
    scatter ``send`` legs write the peer's RECV scratch (linear: one 32768-byte run each),
    its two ``direct_copy_send`` legs the peer's OUT, an SBUF pattern of 128-byte rows: 16384
    elements = 256 rows, 256 entries of 128 bytes each, the 256th complete.  Then the op's
    terminator, and the basic block's EXEC_COMPLETE entry (FORMATS §8 "Basic blocks").
    (Mutations: every transmit or receive entry ``complete = 1``, each row
    taken for a transfer of its own, or ``complete`` on each leg's first run and the last,
    survived every test.)"""
    out = _sbuf_all_reduce_over_two_nodes(tmp_path)
    src = np.fromfile(out / "rank-0000" / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    row = [0] * 255 + [1]
    assert src["complete"].tolist() == [1, 1] + row + row + [0, 0]
    assert src["size"].tolist() == [32768, 32768] + [128] * 512 + [0, 0]
    assert src["mark"].tolist() == [0] * 514 + [1, 2]
    # the OUT rows of a leg: element 64 j is row j % 8 of partition (first + j // 8), so
    # entry j lands (j // 8) x 4096 + (j % 8) x 256 bytes after the leg's first one
    j = np.arange(256)
    for first in (2, 258):
        rel = src["dst_addr"][first:first + 256].astype(np.int64) - int(src["dst_addr"][first])
        assert rel.tolist() == ((j // 8) * 4096 + (j % 8) * 256).tolist()
    # rank 64 receives the same four transfers, in the same order (the k-th receive entry
    # pairs with the k-th transmit entry, §8 "Proxy semantics"), landing in the same shapes
    dest = np.fromfile(out / "rank-0064" / "net_dest.bin", F.NET_DEST_ADDR_DTYPE)
    assert dest["complete"].tolist() == [1, 1] + row + row + [0, 0]
    assert dest["size"].tolist() == [32768, 32768] + [128] * 512 + [0, 0]
    assert dest["src_rank"].tolist() == [0] * 514 + [-1, -1]
    for first in (2, 258):
        rel = dest["dev_addr"][first:first + 256].astype(np.int64) - int(dest["dev_addr"][first])
        assert rel.tolist() == ((j // 8) * 4096 + (j % 8) * 256).tolist()
    assert_clean(out)


def test_the_last_top_sp_of_each_die_decodes():
    """FORMATS.md §10: semaphore ``id`` of TOP_SP ``sp`` in window ``w`` is at 0x82_8000_0000
    + ((sp & 7) << 30) + ((sp > 7) << 47) + w + 4 id: TOP_SP 7 is the last of the stride
    (its DEC window ends the 0x82_8000_0000 .. 0x84_4000_2000 aperture), TOP_SP 15 the same
    with the die bit.  id 19 (``dma_compl_sema`` of channel 0) of TOP_SP 7 in DEC:
    0x82_8000_0000 + 0x1_C000_0000 + 0x1C00 + 0x4C = 0x84_4000_1C4C.  (Mutation: the
    decoder, which tests/test_mesh.py and test_rdh.py read semaphore ids with, taking TOP_SP
    7 for past the stride, survived every test.)"""
    assert sema_address(7, 19, EVT_SEM_DEC) == 0x84_4000_1C4C
    assert decode_sema_address(0x84_4000_1C4C) == (7, EVT_SEM_DEC, 19)
    assert sema_address(15, 0, EVT_SEM_INC) == (1 << 47) | 0x84_4000_1800
    assert decode_sema_address((1 << 47) | 0x84_4000_1800) == (15, EVT_SEM_INC, 0)
    assert decode_sema_address(0x84_4000_1FFC) == (7, EVT_SEM_DEC, 255)
    assert decode_sema_address(0x84_4000_2000) is None  # one past the aperture


def test_a_strided_innermost_dimension_makes_one_run_per_element():
    """NEFF-LIKE.md §2 (AccessPattern): element (p, i0, i1, i2) lives at byte ``start +
    (i0 step0 + i1 step1 + i2 step2) x dsize`` of partition ``partition_start + p``.  With
    step0 = 2 no two elements are adjacent, so each is a contiguous run of its own (FORMATS.md
    §5: a stream has one BD per contiguous run).  2-byte elements, 4 a partition row, 2
    partitions from partition 1 at a stride of 1024, start 16: elements 1..5 are i0 = 1, 2, 3
    of partition 1 (16 + 1024 + 4, + 8, + 12) and i0 = 0, 1 of partition 2 (16 + 2048, + 4).
    (Mutation: the run length taken as num0 whatever step0, a strided row read as one run,
    survived every test.)"""
    ap = AccessPattern(start=16, partition_start=1, partition_count=2,
                       dims=((2, 4), (1, 1), (1, 1)))
    view = BufferView(dsize=2, origin=0, base=0, ap=ap, partition_stride=1024)
    owner, addr, nbytes = view.runs(np.array([1]), np.array([6]))
    assert owner.tolist() == [0] * 5
    assert addr.tolist() == [1044, 1048, 1052, 2064, 2068]
    assert nbytes.tolist() == [2] * 5
    assert view.run_length() == 1


def test_the_memory_layout_aligns_dram_regions_to_4096_and_sbuf_vars_to_64(tmp_path):
    """FORMATS.md §10 ``memory``: DRAM vars, then ``scratch`` and ``gw``, each at the first
    multiple of 4096 past the previous one's end; SBUF vars at the first multiple of 64 in
    the partition; the partition stride their end so rounded.  A 2-rank bf16 all-reduce of
    50 elements (IN and OUT 100 bytes: offsets 0 and 4096; its RECV scratch, 100 bytes, at
    8192; no gateway, 0 bytes at 12288) next to SBUF vars of 70 and 50 bytes: offsets 0
    and 128 (70 rounded up to 64, not to 32: 96), stride 192 (178 rounded up; 160 at 32).
    (Mutation: SBUF vars aligned to 32 bytes survived every test.)"""
    spec = coll_spec("all_reduce", "bf16", 2, 50)
    spec["subgraphs"][0]["vars"] += [
        {"name": "s1", "type": "state-buffer", "size": 70, "partitions": 128},
        {"name": "s2", "type": "state-buffer", "size": 50, "partitions": 128}]
    out = lower_spec(spec, tmp_path / "o")
    mem = json.loads((out / "manifest.json").read_text())["memory"]
    assert {r["name"]: r["offset"] for r in mem["regions"]} == {
        "x_in": 0, "x_out": 4096, "s1": 0, "s2": 128, "scratch": 8192, "gw": 12288}
    assert mem["sbuf_partition_stride"] == 192


def test_channel_semaphore_ids_stop_at_255():
    """FORMATS.md §7 / §10: 256 semaphores a core, ids 0..255; channel c's role r is
    16 + 4c + r.  Channel 59's ``dma_compl_sema`` is 16 + 236 + 3 = 255, the last id;
    channel 60's ``recv_sema`` would be 256, one past it.  (Mutation: the bound taken as
    ``> 256``, passing id 256, survived every test; channels stop at 31 in every output, so
    only the helper's own check sees it.)"""
    assert channel_sem(59, 3) == 255
    with pytest.raises(LimitError, match="out of semaphores: channel 60 needs semaphore 256"):
        channel_sem(60, 0)


def test_an_sbuf_run_of_exactly_65536_bytes_is_one_bd_of_length_field_0(tmp_path):
    """FORMATS.md §5: a BD's length is bits [15:0], 0 meaning 65536; a stream has one BD per
    contiguous run.  A 2-rank ring bf16 all-gather of 65536 elements a rank, IN and OUT on
    one SBUF partition (rows of 65536 and 131072 contiguous elements): each data leg moves a
    half chunk of 32768 elements = 65536 bytes, one tile (§3 n_tiles: min(65536, 64 KiB) &
    ~0x1F bytes), so one M2S BD (FIRST, bit 26) and one S2M BD (LAST, bit 27), each of one
    65536-byte run: len_ctrl 0x04000000 and 0x08000000 (length field 0, no generation tag).
    (Mutation: an SBUF run of 65536 bytes refused as too long for a BD survived every test:
    no test had an SBUF run that long.)"""
    spec = {"header": {"pkg_version": 2, "name": "sbbig", "lnc_size": 1}, "subgraphs": [{
        "name": "sg00",
        "vars": [{"name": "a", "type": "state-buffer", "size": 131072, "partitions": 128},
                 {"name": "b", "type": "state-buffer", "size": 262144, "partitions": 128}],
        "replica_groups": [[0, 1]],
        "engines": {"sp": ["nop", {"all_gather": {
            "dtype": "bf16",
            "src": {"var": "a", "start": 0, "partitions": 1, "dims": [[1, 65536]]},
            "dst": {"var": "b", "start": 0, "partitions": 1, "dims": [[1, 131072]]}}}]}}]}
    out = lower_spec(spec, tmp_path / "o")
    for rank in (0, 1):
        rdir = out / f"rank-{rank:04d}"
        legs = np.fromfile(rdir / "legs.bin", F.LEG_DTYPE)
        data = legs[legs["sdma_op"] != 0]
        assert data.size and (data["num_elements"] == 32768).all()
        assert (data["n_tiles"] == 1).all() and (data["dma_count"] == 2).all()
        dma = np.fromfile(rdir / "dma.bin", F.BD_DTYPE)
        assert dma["len_ctrl"].tolist() == [0x04000000, 0x08000000] * data.size
    assert_clean(out)
