"""Refusals of ``simulate`` that no test reached, each reached here through the public route:
a lowered output, tampered (and re-hashed, so that the checksums pass), run through
``nrtrewrite simulate``. The line's place (file, field, rank, artifact, record: docs/CLI.md
"Errors", SIMULATOR.md §2) and the numbers in its reason are worked out by hand from the
tamper; the reason's wording is the simulator's own (SIMULATOR.md quotes only some lines).

KANGARING data (docs/SIMULATOR.md §1 "So is their data", FORMATS §3.3): a primary's leg reads
only the secondaries of its unit, writes only those and the next primary, a secondary's legs
move no data (program.py ``check_kangaring_peers``, its branches after the semaphores'; the
two primary branches are tests/test_simulate_kangaring_units.py's, the secondary's is here).

Addresses are FORMATS §10's: a DRAM byte of logical core ``lc`` is at ``(lc << 36) +
0x1_0000_0000 + offset``, a target on the same device the plain local address; on trn2 at
LNC 1 rank r of device 0 is logical core r. A ``dma.bin`` BD is 16 bytes, ``buf_ptr`` u64 at
8, its meta word at 4 (``dir`` bit 4, ``stream`` bits [12:8]); a ``sem.bin`` BD 16 bytes
(ctrl, value, addr), an increment's addr ``0x82_8000_0000 + (sp << 30) + 0x1800 + 4 * id``
(FORMATS §7, §10)."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import meshcase
import numpy as np
import pytest

import nrtrewrite.simulate.engine as engine_mod
from nrtrewrite.emit import formats as F
from test_simulate import cli, coll_spec, lower_spec, two_node_spec
from test_simulate_kick_leaf import _retrigger, copy, rehash, trigger0
from test_simulate_hier_checks import _reunit, kr16_out  # noqa: F401 (a fixture)

DMA = np.dtype([("length", "<u4"), ("meta", "<u4"), ("buf_ptr", "<u8")])
LEAF_FAN_IN, LEAF_DIRECT_RECV, LEAF_MARK_COMPLETE, LEAF_PEER_WAIT = 10, 7, 22, 12
CORE = 1 << 36
EVT_SEM, INC, PEER_BASE = 0x82_8000_0000, 0x1800, 144


def _error(out: Path) -> str:
    """Simulated: a protocol refusal (exit 1), one line."""
    res = cli("simulate", out, "--json")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and "\n" not in doc["error"]
    return doc["error"]


def _legs(out: Path, rank: int) -> np.ndarray:
    return np.fromfile(out / f"rank-{rank:04d}" / "legs.bin", F.LEG_DTYPE)


def _bds(out: Path, rank: int, g: int) -> tuple[Path, np.ndarray, int]:
    """``dma.bin`` of ``rank``, its records and leg ``g``'s first record."""
    p = out / f"rank-{rank:04d}" / "dma.bin"
    return p, np.fromfile(p, DMA), int(_legs(out, rank)["dma_first"][g])


def _first_leg(out: Path, rank: int, leaf: int) -> int:
    return int(np.flatnonzero(_legs(out, rank)["leaf"] == leaf)[0])


# kr16_out: tests/test_simulate_hier_checks.py's (a bf16 all-reduce of 4096 elements over
# ranks 0..15, trn2 at LNC 1, KANGARING on one channel: units [0, 4, 5, 1], [2, 6, 7, 3],
# [8, 12, 13, 9], [10, 14, 15, 11], the order [0, 2, 8, 10]; docs/TOPOLOGY.md §4)


def _retarget(out: Path, rank: int, g: int, direction: int, stream: int, want_core: int,
              core: int) -> None:
    """Point leg ``g``'s first BD of (``direction``, ``stream``) at logical core ``core``
    (same device: the plain local address), checking first that it was on ``want_core``."""
    p, bds, first = _bds(out, rank, g)
    leg = _legs(out, rank)[g]
    mine = bds[first:first + int(leg["dma_count"])]
    hit = np.flatnonzero((((mine["meta"] >> 4) & 1) == direction)
                         & (((mine["meta"] >> 8) & 0x1F) == stream))
    i = first + int(hit[0])
    assert int(bds["buf_ptr"][i]) // CORE == want_core
    bds["buf_ptr"][i] = int(bds["buf_ptr"][i]) % CORE + core * CORE
    bds.tofile(p)
    rehash(out)


def _where(out: Path, bd: int) -> str:
    """The place of a refused data BD of rank 0: dma.bin record ``bd``'s ``buf_ptr`` (until
    2026-12-06 legs.bin's dma_first of its leg, whose BD range was right)."""
    return f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, record {bd}: "


def test_a_fan_in_writing_a_secondary_instead_of_the_next_primary_passes_the_static_check(
        kr16_out, tmp_path):
    """The check is of ranks, not of leaves (SIMULATOR.md: which of those ranks each leaf
    reaches is left to the run): the fan-in's destination (rank 2, the next primary) pointed
    at core 5, a secondary of rank 0's unit, passes the load, and the run refuses it: rank 2
    reads the bytes at the address the fan-in no longer writes (core 2's, the BD's old
    ``buf_ptr``), which nothing wrote."""
    out = copy(kr16_out, tmp_path)
    g = _first_leg(out, 0, LEAF_FAN_IN)
    _, bds, first = _bds(out, 0, g)
    old = int(bds["buf_ptr"][first + 4])  # sources 0..3, then destination 0 (FORMATS §5)
    assert old // CORE == 2
    _retarget(out, 0, g, 1, 0, want_core=2, core=5)
    res = cli("simulate", out, "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["ok"] is False, res.output
    assert doc["error"].startswith("trigger 0, rank 2: "), doc["error"]
    assert f"(address {old:#x}), which nothing wrote in trigger 0" in doc["error"], doc["error"]


def test_a_kangaring_secondary_moving_data_is_refused(kr16_out, tmp_path, monkeypatch):
    """A secondary's legs move no data (FORMATS §3.3). No lowered rank is a secondary with
    data legs, and since 2026-12-05 the units are held to docs/TOPOLOGY.md §4 at load
    (``check_kangaring_units``, taken out here as tests/test_simulate_hier_checks.py
    ``legs_alone`` does); a primary's legs increment the next primary's recv_sema, which a
    secondary may not (the semaphore branch refuses first). So: unit [0, 4, 5, 1] made [4,
    0, 5, 1] (the order [4, 2, 8, 10] and the path to match), and every increment of another
    rank's semaphore by rank 0's KANGARING legs (all but the entry handshake's
    mark_complete) made rank 4's peer semaphore 144 + 0 (sp 4: 0x82_8000_0000 + (4 << 30) +
    0x1800 + 4 * 144 = 0x83_8000_1A40), its new primary's. Its first fan-in then reads rank 4
    (source 1) as a secondary."""
    monkeypatch.setattr(engine_mod, "check_kangaring_units", lambda *a: None)
    out = copy(kr16_out, tmp_path)
    units = [[4, 0, 5, 1], [2, 6, 7, 3], [8, 12, 13, 9], [10, 14, 15, 11]]

    _retrigger(out, 0, lambda t: _reunit(t["kangaring"][0], t["channels"][0], units))
    legs = _legs(out, 0)
    p = out / "rank-0000" / "sem.bin"
    sems = np.fromfile(p, F.SEM_DTYPE)
    peer4 = EVT_SEM + (4 << 30) + INC + 4 * PEER_BASE
    assert peer4 == 0x83_8000_1A40
    (k,) = np.flatnonzero(sems["addr"] == peer4)[:1]
    leg = np.repeat(np.arange(legs.size), legs["sem_count"].astype(np.int64))
    away = (((sems["ctrl"] & 0xFF) == 21) & (((sems["ctrl"] >> 16) & 1) == 1)
            & (legs["leaf"][leg] != LEAF_MARK_COMPLETE))
    assert away.sum() > 0
    sems[away] = sems[k]
    sems.tofile(p)
    rehash(out)
    g = _first_leg(out, 0, LEAF_FAN_IN)
    # its BDs: per tile sources 0..3 then the destination (FORMATS §5), source 0 on its own
    # core 0, source 1 on core 4: the first BD on another rank is dma_first + 1
    _, bds, first = _bds(out, 0, g)
    assert [int(m) >> 4 & 1 for m in bds["meta"][first:first + 2]] == [0, 0]
    assert [int(x) // CORE for x in bds["buf_ptr"][first:first + 2]] == [0, 4]
    assert _error(out) == (
        _where(out, first + 1) + f"direct_reduce_send_kangaring leg (legs.bin record {g}) of rank 0 "
        "reads rank 4: rank 0 is a secondary of unit [4, 0, 5, 1] on channel 0 "
        "(triggers[0].kangaring[0].units), whose legs move no data (FORMATS §3.3)")


def test_simulator_mds_recv_sema_example_is_the_whole_line(kr16_out, tmp_path, monkeypatch):
    """docs/SIMULATOR.md §1's example of the semaphore branch, whole: units reordered to [0,
    4, 5, 1], [8, 12, 13, 9], [2, 6, 7, 3], [10, 14, 15, 11] (the order [0, 8, 2, 10]; the
    unit check taken out as in the secondary test above). Rank 0's first fan-in (legs.bin
    record 3) has sem.bin records 10..14 (FORMATS §7: no wait, then its increments: its own
    dma_compl_sema, rank 2's recv_sema, the peer semaphores of 4, 5, 1), so record 11 (the
    doc said 12 until 2026-12-05)."""
    monkeypatch.setattr(engine_mod, "check_kangaring_units", lambda *a: None)
    out = copy(kr16_out, tmp_path)
    units = [[0, 4, 5, 1], [8, 12, 13, 9], [2, 6, 7, 3], [10, 14, 15, 11]]

    _retrigger(out, 0, lambda t: _reunit(t["kangaring"][0], t["channels"][0], units))
    rehash(out)
    legs = _legs(out, 0)
    # sem_first of record 3 is the sem.bin BDs of records 0..2 (FORMATS §3: leg i + 1's
    # X_first is leg i's X_first + X_count), each leg's waits then its increments, the
    # dma_compl_sema increment every leg has among them (FORMATS §7). The bytes are kr16's
    # (only the manifest was reordered): rank 0 primary of [0, 4, 5, 1], the order [0, 2, 8,
    # 10], one channel, all of 0..15 on one trn2 node.
    #   0 mark_complete, the handshake's post (FORMATS §3.4): entry_post +1 on each same-node
    #     peer rank 0 exchanges data with, its 3 secondaries and its next (2) and previous
    #     (10) primaries, and its dma_compl_sema: 5 + 1;
    #   1 mark_complete, the wait entry_post >= 5 and dma_compl_sema (one channel: no
    #     entry_go increment, FORMATS §3.4): 1 + 1;
    #   2 peer_wait, the primary's first leg (DESIGN.md "Kangaring", Semaphores): mine >= 3
    #     posting secondaries, and dma_compl_sema: 1 + 1.
    peers = (len(units[0]) - 1) + 2
    counts = [peers + 1, 1 + 1, 1 + 1]
    assert legs["leaf"][:4].tolist() == [LEAF_MARK_COMPLETE, LEAF_MARK_COMPLETE, LEAF_PEER_WAIT,
                                         LEAF_FAN_IN]
    assert legs["sem_count"][:3].tolist() == counts
    assert legs["sem_first"][3] == sum(counts) == 10
    sems = np.fromfile(out / "rank-0000" / "sem.bin", F.SEM_DTYPE)
    assert int(sems["addr"][11]) == EVT_SEM + (2 << 30) + INC + 4 * 16  # rank 2's recv_sema
    line = (f"{out / 'rank-0000'}: field addr, rank 0, artifact sem.bin, record 11: "
            "direct_reduce_send_kangaring leg (legs.bin record 3) increments recv_sema of rank 2: "
            "the next primary of channel 0 is 8 (triggers[0].channels[0].order) (FORMATS §3.3)")
    assert _error(out) == line
    doc = " ".join((Path(__file__).parents[1] / "docs" / "SIMULATOR.md").read_text().split())
    assert line.split(": ", 1)[1] in doc


# ---------------------------------------------------------------------------- one field of a ring

@pytest.fixture(scope="module")
def ar2_out(tmp_path_factory) -> Path:
    """A bf16 ADD all-reduce of 1000 elements over ranks 0, 1 (trn2, LNC 1), RING. Rank 0's
    legs (seed 001 §4 over 2 ranks, FORMATS §3.4): the entry handshake's two mark_complete,
    send H0 and H1 of block 1 (elements [500, 750), [750, 1000)), recv_reduce_copy and
    direct_copy_send of each half of block 0, two direct_recv, mark_end. A half of 250 bf16
    elements is 500 bytes: tiles of (500 & ~0x1F) / 2 = 240 and 10 elements (480, 20 bytes,
    FORMATS §3 n_tiles), so record 2 (send) has BDs 0..3 (per tile: source 0, destination
    0) and record 4 (recv_reduce_copy, two sources) BDs 8..13 and CCE descriptors 0..3."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 2, 1000),
                     tmp_path_factory.mktemp("ar2") / "o")
    legs = _legs(out, 0)
    assert legs["leaf"].tolist() == [22, 22, 1, 1, 3, 5, 3, 5, 7, 7, 15]
    assert legs["elem_start"][2] == 500 and legs["num_elements"][2] == 250
    # dma_first (FORMATS §3: leg i + 1's is leg i's dma_first + dma_count): per leg n_tiles x
    # (sources + destinations) BDs, one BD a stream per tile (§5: each run contiguous here);
    # the handshake's mark_complete legs have no data (sdma_op 0, no BD)
    def tiles(n: int, dsize: int = 2) -> int:
        t = (min(dsize * n, 64 * 1024) & ~0x1F) // dsize or n
        return -(-n // t)
    # records 0..4: mark_complete, mark_complete, send H0 and H1 (1 source, 1 destination),
    # recv_reduce_copy (RECV and IN, OUT), 250 elements each
    bds = [0, 0] + [tiles(250) * (srcs + dsts) for srcs, dsts in [(1, 1), (1, 1), (2, 1)]]
    first = np.cumsum([0] + bds).tolist()
    assert legs["dma_first"][[2, 4]].tolist() == [first[2], first[4]] == [0, 8]
    assert legs["dma_count"][4] == tiles(250) * 3 == 6  # BDs 8..13
    bds = np.fromfile(out / "rank-0000" / "dma.bin", DMA)
    assert (bds["length"][:4] & 0xFFFF).tolist() == [480, 480, 20, 20]
    cce = np.fromfile(out / "rank-0000" / "cce.bin", F.CCE_DTYPE)
    # FORMATS §6: source 0 of 2, ADD, bf16 (6) in and out, FP32R (0xB) accumulator, valid
    assert [int(w) for w in cce[0]] == [0x00800000, 0x020B6600, 480, 2]
    return out


def _poke(out: Path, name: str, offset: int, fmt: str, fn) -> None:
    p = out / "rank-0000" / name
    b = bytearray(p.read_bytes())
    (v,) = struct.unpack_from(fmt, b, offset)
    struct.pack_into(fmt, b, offset, fn(v))
    p.write_bytes(bytes(b))
    rehash(out)


LEG = 64  # legs.bin record size; leaf 12, sdma_op 7, channel 6, reduction_type 14, ring_step
# 60, num_elements 56, cce_first 32, cce_count 36 (FORMATS §3)
# cce.bin: W0 at 0, W1 4, W2 8, W3 12 (FORMATS §6)
SEM = 16  # sem.bin: ctrl 0, value 4, addr 8 (FORMATS §7)


@pytest.mark.parametrize("name, offset, fmt, fn, where, why", [
    # cce.bin record 0: W0 0x00800000, W1 0x020B6600, W2 480, W3 2 (the fixture)
    ("cce.bin", 0, "<I", lambda v: v | 1 << 24, "field w0, rank 0, artifact cce.bin, record 0",
     "W0 should be 0x00800000 (meta bit + meta_idx = source 0), not 0x01800000"),
    # 0x5 UINT16: no CCE I/O dtype (FORMATS §6: bf16, fp16, fp32, the fp8s)
    ("cce.bin", 4, "<I", lambda v: v & ~0xF00 | 0x500, "field w1.in_dtype, rank 0, artifact "
     "cce.bin, record 0", "W1 in_dtype 0x5 is not a CCE-reducible I/O dtype"),
    ("cce.bin", 4, "<I", lambda v: v & ~0xF000 | 0x5000, "field w1.out_dtype, rank 0, artifact "
     "cce.bin, record 0", "W1 out_dtype 0x5 is not a CCE-reducible I/O dtype"),
    ("cce.bin", 4, "<I", lambda v: v & ~0xF0000 | 0xA0000, "field w1.acc_dtype, rank 0, "
     "artifact cce.bin, record 0", "W1 accumulate dtype should be 0xb "
     "(FORMATS §6 accumulates in FP32R), not 0xa"),
    # (against the trigger's own op and data: the trigger named, since 2026-12-06)
    ("cce.bin", 4, "<I", lambda v: v & ~7 | 2, "field w1.op, trigger 0, rank 0, artifact "
     "cce.bin, record 0", "W1 sub-op should be ADD, the trigger's op, not MAX"),
    ("cce.bin", 4, "<I", lambda v: v & ~0xF00 | 0x700, "field w1.in_dtype, trigger 0, rank 0, "
     "artifact cce.bin, record 0", "W1 in_dtype should be 0x6, the trigger's data, not 0x7"),
    ("cce.bin", 4, "<I", lambda v: v & ~0xF000 | 0x7000, "field w1.out_dtype, trigger 0, rank 0, "
     "artifact cce.bin, record 0", "W1 out_dtype should be 0x6, the trigger's data, not 0x7"),
    ("cce.bin", 8, "<I", lambda v: v + 2, "field w2, rank 0, artifact cce.bin, record 0",
     "W2 length should be 480, the bytes source 0 of the tile carries, not 482"),
    ("cce.bin", 12, "<I", lambda v: v & ~0x3F | 3, "field w3.num_sources, rank 0, artifact "
     "cce.bin, record 0", "W3 num_sources should be 2, the tile's source streams, not 3"),
    ("cce.bin", 12, "<I", lambda v: v | 0x100, "field w3.reduction_type, rank 0, artifact "
     "cce.bin, record 0", "W3 reduction_type differs from the leg's"),
    # sb2sb.bin word 0 (FORMATS §4): record 2's, elements [500, 750) of IN: src.start_addr
    # 500 x 2 = 0x3e8
    ("sb2sb.bin", 0, "B", lambda v: 0xBE, "field opcode, rank 0, artifact sb2sb.bin, record 0",
     "opcode is not 0xBF"),
    ("sb2sb.bin", 1, "B", lambda v: 15, "field inst_word_len, rank 0, artifact sb2sb.bin, "
     "record 0", "inst_word_len is not 16"),
    ("sb2sb.bin", 16, "<I", lambda v: v + 2, "field src.start_addr, rank 0, artifact "
     "sb2sb.bin, record 0", "src.start_addr 0x3ea, the piece's first element 500 is at 0x3e8 "
     "of its buffer"),
    # dma.bin (FORMATS §5): len_ctrl LAST bit 27; meta_ctrl sdma_op [3:0], dir 4, stream [12:8]
    ("dma.bin", 3 * 16, "<I", lambda v: v & ~(1 << 27), "field LAST, rank 0, artifact dma.bin, "
     "record 3", "the last BD of a leg does not have LAST"),
    ("dma.bin", 4, "<I", lambda v: v & ~0xF | 4, "field meta_ctrl, rank 0, artifact dma.bin, "
     "record 0", "sdma_op should be 2, its leg 2's, not 4"),
    ("dma.bin", 16 + 4, "<I", lambda v: v | 1 << 8, "field meta_ctrl.stream, rank 0, artifact "
     "dma.bin, record 0", "a tile's stream indices are not 0, 1, ... (a stream is missing)"),
    ("dma.bin", 16 + 4, "<I", lambda v: 0x102, "field meta_ctrl.dir, rank 0, artifact dma.bin, "
     "record 0", "a tile without a source or without a destination stream"),
    # record 9 is source 1 of record 4's first tile (records 8, 9 its sources, 10 its
    # destination, 240 bf16 elements, 480 bytes): 0x1C0 = 448; over the leg's two tiles that
    # source carries 448 + 20 bytes, the others 250 x 2 (until 2026-12-07 named at record 8)
    ("dma.bin", 9 * 16, "<I", lambda v: v & ~0xFFFF | 0x1C0, "field length, rank 0, artifact "
     "dma.bin, record 9", "length should be 480, not 448: the tile's other streams carry 480 "
     "bytes, and over the leg's tiles every other stream carries 500 bytes, the leg's "
     "num_elements 250 x 2 (legs.bin record 4), but source 1 carries 468"),
    # legs.bin (FORMATS §3)
    ("legs.bin", 2 * LEG + 56, "<I", lambda v: 0, "field num_elements, rank 0, artifact "
     "legs.bin, record 2", "a data leg moving 0 elements"),
    ("legs.bin", 2 * LEG + 14, "B", lambda v: 0, "field reduction_type, rank 0, artifact "
     "legs.bin, record 2", "a copy or sync leg carries a reduction_type (must be 0xFF)"),
    ("legs.bin", 4 * LEG + 14, "B", lambda v: 2, "field reduction_type, rank 0, artifact "
     "legs.bin, record 4", "reduction_type 2 in a RING reduce leg (the ring-versus-kangaring "
     "fork: 0)"),
    ("legs.bin", 0 * LEG + 56, "<I", lambda v: 5, "field num_elements, rank 0, artifact "
     "legs.bin, record 0", "num_elements 5 on a mark_complete leg without data (must be 0)"),
    ("legs.bin", 10 * LEG + 60, "<I", lambda v: 1, "field ring_step, rank 0, channel 0, "
     "artifact legs.bin, record 10", "ring_step 1 on a mark_end leg (0: it is no ring step, "
     "FORMATS §3)"),
    # record 2's channel 0 -> 1: records 1 and 3 (channel 0) are in order without it, so it
    # is named (until 2026-12-07 `field spad_index, ..., record 3: ... record 3 comes after
    # entry 0 channel 1`, a record nobody changed)
    ("legs.bin", 2 * LEG + 6, "B", lambda v: 1, "field channel, rank 0, artifact legs.bin, "
     "record 2", "legs are not ordered by (entry, channel): record 2 (entry 0 channel 1) comes "
     "before record 3 (entry 0 channel 0), and records 1 and 3 are in order without it"),
    # record 4's cce_count one less: record 5's cce_first (4) no longer follows it (3), but
    # the legs after record 5 follow it: the count is named (until 2026-12-07 record 5's
    # cce_first was)
    ("legs.bin", 4 * LEG + 36, "<I", lambda v: v - 1, "field cce_count, rank 0, artifact "
     "legs.bin, record 4", "cce_count should be 4, not 3: the legs' records of cce.bin do not "
     "follow each other, and the next leg's cce_first 4 (legs.bin record 5) is borne out by "
     "the legs after it and the file's end"),
    # spad.bin byte 0: cc_op bit 0 = 1, bits [7:1] reserved (FORMATS §2)
    ("spad.bin", 0, "B", lambda v: 3, "field cc_op, rank 0, artifact spad.bin, record 0",
     "cc_op bit is not 1 or reserved header bits are set"),
    # sem.bin record 0: the first mark_complete's +1 on its own dma_compl_sema (16 + 3 = 19, at
    # 0x82_8000_1800 + 4 x 19); record 1: its +1 on rank 1's entry_post (9)
    ("sem.bin", 0, "<I", lambda v: v & ~0xFF | 22, "field ctrl.subop, rank 0, artifact sem.bin, "
     "record 0", "EVT_SEM subop 22 (only 20 wait_ge_and_dec and 21 inc are part of the "
     "protocol)"),
    ("sem.bin", 0, "<I", lambda v: v | 1 << 24, "field ctrl.gen, rank 0, artifact sem.bin, "
     "record 0", "generation tag should be 0, not 1"),
    ("sem.bin", 8, "<Q", lambda v: v + 4 * 4, "field addr, rank 0, artifact sem.bin, record 0",
     "semaphore 23 (channel 1 dma_compl_sema) used by a leg of channel 0"),
    ("sem.bin", SEM + 4, "<I", lambda v: 2, "field value, rank 0, artifact sem.bin, record 1",
     "increment of semaphore 9 of rank 1 by 2: FORMATS §3.3, §3.4 and §7 make it 1"),
    # tpinc.bin record 0 (m2s 0, s2m 0, repeat 2, flags 0: the two mark_complete legs)
    ("tpinc.bin", 0, "<H", lambda v: v + 1, "field m2s, rank 0, channel 0, artifact tpinc.bin, "
     "record 0", "tp_inc_steps say m2s 1 / s2m 0 for legs.bin record 0 (entry 0, channel 0, "
     "step 0), its BDs are 0 M2S / 0 S2M"),
    # (record 0's two legs, legs.bin records 0 and 1, end no leg program: rank 0 runs one, of
    # 9 legs; until 2026-12-07 the line named no record and no field)
    ("tpinc.bin", 6, "<H", lambda v: 1, "field flags, rank 0, artifact tpinc.bin, record 0",
     "last_sync should be 0, not 1: the run's last leg, legs.bin record 1, ends no (entry, "
     "channel) leg program (2 last_sync groups for 1 (entry, channel) leg programs)"),
], ids=["w0", "in_io", "out_io", "acc", "op", "in_data", "out_data", "w2", "sources",
        "w3_rt", "opcode", "word_len", "start_addr",
        "bd_last", "bd_sdma", "bd_stream", "bd_dir", "bd_len", "ne0", "rt_copy", "rt_fork",
        "ne_sync", "ring_step_end", "order", "cce_count", "cc_op", "subop", "sem_gen",
        "sem_channel", "sem_value", "tp_m2s", "tp_groups"])
def test_one_field_of_a_ring_output_is_refused_naming_it(ar2_out, tmp_path, name, offset, fmt,
                                                         fn, where, why):
    out = copy(ar2_out, tmp_path)
    _poke(out, name, offset, fmt, fn)
    assert _error(out) == f"{out / 'rank-0000'}: {where}: {why}"


def test_a_cce_count_other_than_tiles_times_sources_is_refused(ar2_out, tmp_path):
    """Record 4 (2 tiles x 2 sources = 4 descriptors) given 3, its last descriptor cut from
    cce.bin and the later legs' cce_first moved down so that the ranges still tile the file
    (the rank manifest's count to match)."""
    out = copy(ar2_out, tmp_path)
    p = out / "rank-0000" / "legs.bin"
    legs = np.fromfile(p, F.LEG_DTYPE)
    legs["cce_count"][4] -= 1
    legs["cce_first"][5:] -= 1
    legs.tofile(p)
    c = out / "rank-0000" / "cce.bin"
    np.delete(np.fromfile(c, F.CCE_DTYPE), 3).tofile(c)
    m = out / "rank-0000" / "manifest.json"
    man = json.loads(m.read_text())
    man["files"]["cce.bin"]["records"] -= 1
    m.write_text(json.dumps(man))
    rehash(out)
    assert _error(out) == (f"{out / 'rank-0000'}: field cce_count, rank 0, artifact legs.bin, "
                           "record 4: cce_count should be n_tiles x sources = 4, not 3")


def test_a_leg_whose_streams_carry_fewer_bytes_than_its_elements_is_refused(ar2_out, tmp_path):
    """Record 2's second tile (BDs 2 and 3, 20 bytes each) cut to 18 bytes on both streams:
    480 + 18 = 498 bytes for 250 bf16 elements (500)."""
    out = copy(ar2_out, tmp_path)
    p = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(p, DMA)
    bds["length"][2:4] -= 2
    bds.tofile(p)
    rehash(out)
    assert _error(out).endswith(": field num_elements, rank 0, artifact legs.bin, record 2: "
                                "num_elements x 2 bytes should be the 498 bytes each source "
                                "stream carries, not 250 x 2")


def test_a_ring_send_writing_its_own_core_is_refused(ar2_out, tmp_path):
    """Record 2 (send) writes rank 1 (core 1) on both tiles (BDs 1 and 3) and signals it;
    both destinations moved to core 0 (its own): it signals rank 1 but writes nothing there."""
    out = copy(ar2_out, tmp_path)
    p = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(p, DMA)
    assert [int(x) // CORE for x in bds["buf_ptr"][[1, 3]]] == [1, 1]
    bds["buf_ptr"][[1, 3]] -= np.uint64(CORE)
    bds.tofile(p)
    rehash(out)
    # the wrong bytes are the first destination BD's buf_ptr: BD 1 (tile 0's, after its
    # source BD 0, FORMATS §3 / §5), not legs.bin's dma_first (until 2026-12-06)
    assert _error(out) == (f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, "
                           "record 1: send leg (legs.bin record 2) signals rank 1 but writes "
                           "nothing there")


def test_a_ring_send_writing_a_rank_it_does_not_signal_is_refused(tmp_path):
    """A bf16 all-reduce of 999 elements over ranks 0, 1, 2 (RING): rank 0's first send
    (record 2, after the two mark_complete) writes and signals its successor 1; both its
    destination BDs (1 and 3: 333 elements a block, halves of 167 and 166 elements, 334 bytes
    = tiles of 320 and 14 bytes) moved to core 2."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 3, 999), tmp_path / "o")
    legs = _legs(out, 0)
    assert legs["leaf"][:3].tolist() == [22, 22, 1] and legs["dma_count"][2] == 4
    p = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(p, DMA)
    assert (bds["length"][:4] & 0xFFFF).tolist() == [320, 320, 14, 14]
    assert [int(x) // CORE for x in bds["buf_ptr"][[1, 3]]] == [1, 1]
    bds["buf_ptr"][[1, 3]] += np.uint64(CORE)
    bds.tofile(p)
    rehash(out)
    # the first BD writing rank 2 is BD 1 (tile 0's destination), named by its buf_ptr
    assert _error(out) == (f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, "
                           "record 1: send leg (legs.bin record 2) writes rank 2 but signals "
                           "rank 1")


def test_a_ring_send_writing_a_rank_it_does_not_signal_names_the_first_wrong_bd(tmp_path):
    """The 999-element RING all-reduce over ranks 0, 1, 2 of the test above: only rank 0's BD 3
    (record 2's tile 1 destination, 14 bytes; BD 1, tile 0's, still writes its successor 1)
    moved to core 2. The line names BD 3, the first of the leg's BDs writing a rank it does
    not signal, not the leg's first destination BD 1."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 3, 999), tmp_path / "o")
    assert _legs(out, 0)["dma_first"][2] == 0
    p = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(p, DMA)
    assert [int(x) // CORE for x in bds["buf_ptr"][[1, 3]]] == [1, 1]
    assert [(int(m) >> 4) & 1 for m in bds["meta"][:4]] == [0, 1, 0, 1]
    bds["buf_ptr"][3] += np.uint64(CORE)
    bds.tofile(p)
    rehash(out)
    assert _error(out) == (f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, "
                           "record 3: send leg (legs.bin record 2) writes rank 2 but signals "
                           "rank 1")


def test_a_ring_send_writing_two_other_ranks_names_the_rank_its_first_wrong_bd_writes(
        tmp_path):
    """A bf16 all-reduce of 999 elements over ranks 0..3 lowered with --host-cc (RING): rank
    0's legs are the two mark_complete, send x 2 (H0, H1), recv_reduce_send x (n - 2) x 2 = 4,
    then record 8, recv_reduce_copy_send (seed 001 §4; the host-CC final reduce step,
    DESIGN "Host-CC and hybrid rings"; FORMATS §3's leaf codes 22, 1, 2, 4), whose tiles
    carry sources 0, 1 (M2S) and destinations 0, its own output, and 1, its successor 1
    (S2M, stream = destination index, FORMATS §5):
    BDs 32..35 tile 0, 36..39 tile 1.  Moved: BD 35 (tile 0's destination 1) to core 2 and BD
    38 (tile 1's destination 0) to core 3 (on trn2 at LNC 1 rank r is core r, a core's window
    at r << 36, FORMATS §10).  The first wrong BD in dma.bin order is 35, which writes rank 2;
    until 2026-12-07 the line named BD 35 with the rank of the first wrong merged byte run
    (runs go by stream: stream 0's BD 38 before stream 1's BD 35), `writes rank 3`."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 999), tmp_path / "o", host_cc=True)
    legs = _legs(out, 0)
    assert legs["leaf"][:9].tolist() == [22, 22, 1, 1, 2, 2, 2, 2, 4]
    assert legs["dma_first"][8] == 32 and legs["dma_count"][8] == 8
    p = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(p, DMA)
    tile = bds[32:40]
    assert [((int(m) >> 4) & 1, (int(m) >> 8) & 0x1F) for m in tile["meta"]] == \
        [(0, 0), (0, 1), (1, 0), (1, 1)] * 2
    assert [int(x) // CORE for x in tile["buf_ptr"]] == [0, 0, 0, 1] * 2
    bds["buf_ptr"][35] += np.uint64(CORE)
    bds["buf_ptr"][38] += np.uint64(3 * CORE)
    bds.tofile(p)
    rehash(out)
    assert _error(out) == (f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, "
                           "record 35: recv_reduce_copy_send leg (legs.bin record 8) writes "
                           "rank 2 but signals rank 1")


def test_a_ring_send_reading_another_core_names_the_bd_not_the_run(ar2_out, tmp_path):
    """Record 3 (send H1) has BDs 4..7 (record 2's four before it, FORMATS §3 dma_first), per
    tile a source then a destination BD (§5): BD 4 is tile 0's source.  Moved to core 1, it
    reads rank 1.  Until 2026-12-06 the line named the merged byte run's index as the dma.bin
    record: runs 0, 1 are record 2's source and destination, run 2 BD 4 alone (its rank
    differs from BD 6's), so `record 2`, a BD of another leg that is right.  The leg is named by
    its legs.bin record as its siblings' lines do (until 2026-12-06 `a send leg`)."""
    out = copy(ar2_out, tmp_path)
    legs = _legs(out, 0)
    assert legs["dma_first"][3] == 4 and legs["dma_count"][3] == 4
    p = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(p, DMA)
    assert (bds["meta"][4] >> 4) & 1 == 0 and int(bds["buf_ptr"][4]) // CORE == 0
    bds["buf_ptr"][4] += np.uint64(CORE)
    bds.tofile(p)
    rehash(out)
    assert _error(out) == (f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, "
                           "record 4: send leg (legs.bin record 3) reads rank 1 (ring legs "
                           "read their own core)")


def test_a_ring_leg_reading_two_other_ranks_names_its_first_wrong_bd(tmp_path):
    """A bf16 all-reduce of 999 elements over ranks 0..3 (RING): rank 0's record 4 is its first
    recv_reduce_send (after mark_complete x 2 and send x 2, seed 001 §4; FORMATS §3's leaf
    codes 22, 1, 2), whose tiles carry sources 0, its own input, and 1, the predecessor's
    partial in its own scratch (M2S, stream = source index), then its destination (S2M,
    FORMATS §5): BDs 8..10 tile 0, 11..13 tile 1.  Moved: BD 9 (tile 0's source 1) to core 2
    and BD 11 (tile 1's source 0) to core 3 (FORMATS §10).  The line names the first wrong BD
    in dma.bin order, 9, reading rank 2, as the write line does; until 2026-12-07 it named the
    first wrong merged byte run's (runs go by stream: stream 0's BD 11 before stream 1's BD
    9), `record 11: ... reads rank 3`."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 999), tmp_path / "o")
    legs = _legs(out, 0)
    assert legs["leaf"][:5].tolist() == [22, 22, 1, 1, 2]
    assert legs["dma_first"][4] == 8 and legs["dma_count"][4] == 6
    p = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(p, DMA)
    tile = bds[8:14]
    assert [((int(m) >> 4) & 1, (int(m) >> 8) & 0x1F) for m in tile["meta"]] == \
        [(0, 0), (0, 1), (1, 0)] * 2
    assert [int(x) // CORE for x in tile["buf_ptr"]] == [0, 0, 1] * 2
    bds["buf_ptr"][9] += np.uint64(2 * CORE)
    bds["buf_ptr"][11] += np.uint64(3 * CORE)
    bds.tofile(p)
    rehash(out)
    assert _error(out) == (f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, "
                           "record 9: recv_reduce_send leg (legs.bin record 4) reads rank 2 "
                           "(ring legs read their own core)")


@pytest.fixture(scope="module")
def ar4_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 999 elements over ranks 0..3 (RING, channel 0's order [0, 1, 2,
    3], so rank 0 signals and writes rank 1). Rank 0's legs (seed 001 §4, FORMATS §3's leaf
    codes 22, 1, 2): mark_complete x 2 (no BD), send H0 (record 2: BDs 0..3, per tile its
    source, then its destination on the successor, FORMATS §5), send H1 (record 3: BDs
    4..7), then recv_reduce_send (record 4: BDs 8..13, per tile sources 0 and 1, then the
    destination)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 999),
                     tmp_path_factory.mktemp("ar4") / "o")
    legs = _legs(out, 0)
    assert legs["leaf"][:5].tolist() == [22, 22, 1, 1, 2]
    assert legs["dma_first"][2:5].tolist() == [0, 4, 8]
    assert legs["dma_count"][2:5].tolist() == [4, 4, 6]
    bds = np.fromfile(out / "rank-0000" / "dma.bin", DMA)
    dir_stream = [((int(m) >> 4) & 1, (int(m) >> 8) & 0x1F) for m in bds["meta"][:14]]
    assert dir_stream == [(0, 0), (1, 0)] * 4 + [(0, 0), (0, 1), (1, 0)] * 2
    assert [int(x) // CORE for x in bds["buf_ptr"][:14]] == [0, 1] * 4 + [0, 0, 1] * 2
    return out


def _rank_of_core(out: Path) -> dict[int, int]:
    """The manifest's topology: logical core -> rank (one device here, FORMATS §10)."""
    ranks = json.loads((out / "manifest.json").read_text())["topology"]["ranks"]
    assert {r["device"] for r in ranks} == {0}
    return {r["logical_core"]: r["rank"] for r in ranks}


def _move_bds(out: Path, moves: dict[int, int]) -> dict[int, int]:
    """Rank 0's dma.bin BD i moved by ``moves[i]`` cores (buf_ptr + k << 36, FORMATS §10);
    returns the rank each moved BD now addresses."""
    p = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(p, DMA)
    for i, k in moves.items():
        bds["buf_ptr"][i] = np.uint64(int(bds["buf_ptr"][i]) + k * CORE)  # (k < 0: back)
    bds.tofile(p)
    rehash(out)
    rank = _rank_of_core(out)
    return {i: rank[int(bds["buf_ptr"][i]) >> 36] for i in moves}


def test_a_ring_legs_wrong_write_before_its_wrong_read_names_the_write(ar4_out, tmp_path):
    """Rank 0's send H0 (record 2): BD 1, tile 0's destination, moved one core on, writes
    rank 2, not rank 1, the successor it signals; BD 2, tile 1's source, moved one core on,
    reads rank 1. The first wrong BD in dma.bin order is 1, so the line names it and the
    rule it breaks; until 2026-12-07 every ring leg's reads were checked before any leg's
    writes, `record 2: send leg (legs.bin record 2) reads rank 1` (review 52h)."""
    out = copy(ar4_out, tmp_path)
    assert _move_bds(out, {1: 1, 2: 1}) == {1: 2, 2: 1}
    assert _error(out) == (f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, "
                           "record 1: send leg (legs.bin record 2) writes rank 2 but signals "
                           "rank 1")


def test_a_ring_legs_wrong_write_before_a_later_legs_wrong_read_names_the_write(
        ar4_out, tmp_path):
    """Across legs: rank 0's BD 1 (send H0, record 2, tile 0's destination) moved one core on
    writes rank 2 while the leg signals rank 1; BD 8 (recv_reduce_send, record 4, tile 0's
    source 0, its own input) moved three cores on reads rank 3. BD 1 comes first in dma.bin
    order; until 2026-12-07 the later leg's read was named, `record 8: recv_reduce_send leg
    (legs.bin record 4) reads rank 3` (review 52h)."""
    out = copy(ar4_out, tmp_path)
    assert _move_bds(out, {1: 1, 8: 3}) == {1: 2, 8: 3}
    assert _error(out) == (f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, "
                           "record 1: send leg (legs.bin record 2) writes rank 2 but signals "
                           "rank 1")


def test_a_ring_leg_signalling_another_rank_is_named_before_its_wrong_read(ar4_out, tmp_path):
    """Rank 0's send H0 (record 2) increments rank 1's recv_sema (id 16 of channel 0; an
    increment's addr 0x82_8000_0000 + (sp << 30) + 0x1800 + 4 * id, FORMATS §7, §10, sp
    rank 1's logical core): that increment moved to rank 2's, and BD 0, its tile 0's source,
    moved three cores on (reads rank 3). The signal is checked first (a write is held to the
    rank the leg signals, so that must be the successor before the data is), then the data
    in dma.bin order (SIMULATOR §2): the line names sem.bin's addr; until 2026-12-07 the
    read came first, `record 0: send leg (legs.bin record 2) reads rank 3`."""
    out = copy(ar4_out, tmp_path)
    legs = _legs(out, 0)
    first, count = int(legs["sem_first"][2]), int(legs["sem_count"][2])
    p = out / "rank-0000" / "sem.bin"
    sems = np.fromfile(p, F.SEM_DTYPE)
    to_1 = EVT_SEM + (1 << 30) + INC + 4 * 16
    (k,) = [first + i for i in range(count) if int(sems["addr"][first + i]) == to_1]
    sems["addr"][k] = EVT_SEM + (2 << 30) + INC + 4 * 16
    sems.tofile(p)
    assert _move_bds(out, {0: 3}) == {0: 3}
    assert _error(out) == (f"{out / 'rank-0000'}: field addr, rank 0, artifact sem.bin, "
                           f"record {k}: send leg (legs.bin record 2) should signal rank 1, "
                           "the ring successor of channel 0, not 2")


# ---------------------------------------------------------------------------- the net FIFOs

@pytest.fixture(scope="module")
def r2n_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 4096 elements over ranks 0, 1, 64, 65 at LNC 2 on two trn2 nodes
    (RING, the order [0, 1, 64, 65], one channel, one chunk group): rank 1's successor 64 is
    across the network, so rank 1's channel 0 has one op (FORMATS §8 "Ops": a ring entry has
    one per channel) and a transmit FIFO of 12 entries (one per sending leg, each leg one run:
    complete 1) and its terminator (record 12, mark 1, FORMATS §8.2).

    The 12: seed 001 §4's loop over n = 4 ranks, one chunk group, every step two legs
    (CHUNK_H0, CHUNK_H1); the legs that send to the successor are the reduce-scatter's send
    (1 step), recv_reduce_send (n - 2 steps), the device path's direct_copy_send after
    recv_reduce_copy (1 step), and the all-gather's direct_recv_send (n - 2 steps; the final
    direct_recv does not forward): 2 x (1 + (n - 2) + 1 + (n - 2)) = 4 (n - 1) = 12. A leg's
    half chunk (4096 / 4 / 2 = 512 bf16, 1024 bytes) is one contiguous run of the gateway
    view, so one entry a leg (FORMATS §8 "Entries"). The predecessor 0 is on rank 1's node:
    no receive FIFO (dest [0, 0])."""
    out = lower_spec(two_node_spec(), tmp_path_factory.mktemp("r2n") / "o")
    t = trigger0(out)
    order = [0, 1, 64, 65]
    n, groups = len(order), 1
    assert t["channels"] == [{"channel": 0, "order": order}]
    assert t["chunk"]["pgta"] == groups
    sending = groups * 2 * (1 + (n - 2) + 1 + (n - 2))
    assert sending == 4 * (n - 1) == 12
    legs = _legs(out, 1)
    # send 1, recv_reduce_send 2, direct_copy_send 5, direct_recv_send 6 (FORMATS §3 leaf)
    assert int(np.isin(legs["leaf"], [1, 2, 5, 6]).sum()) == sending
    man = json.loads((out / "rank-0001" / "manifest.json").read_text())
    # (and the block's EXEC_COMPLETE entry, record 13: FORMATS §8 "Basic blocks")
    assert man["fifo"] == [{"channel": 0, "ops": [0, 1], "src": [0, sending + 2],
                            "dest": [0, 0]}]
    src = np.fromfile(out / "rank-0001" / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    assert src["mark"].tolist() == [0] * sending + [1, 2]
    assert src["complete"][:sending].tolist() == [1] * sending
    assert (src["size"][:sending] == 4096 // n // 2 * 2).all()
    assert (src["dst_rank"][:sending] == order[order.index(1) + 1]).all()
    return out


def _edit(out: Path, name: str, dtype, fn, rank: int = 1) -> None:
    p = out / f"rank-{rank:04d}" / name
    a = np.fromfile(p, dtype)
    fn(a)
    a.tofile(p)
    rehash(out)


def _set(field: str, value, i=None):
    def fn(a):
        if i is None:
            a[field] = value
        else:
            a[field][i] = value
    return fn


def _to_recv_sema(a) -> None:
    a["inc_send_handshake"] = a["inc_send_complete"] = a["inc_recv_handshake"]


@pytest.mark.parametrize("name, fn, field, record, why", [
    # net_ops_info (FORMATS §8.1): net_idx_loop_size 512,
    # unrolled_count the trigger's chunk groups (1), enc_channel the channel id (0),
    # inc_send_* this rank's send_sema (17 = 16 + 4 x 0 + 1)
    ("net_ops.bin", _set("net_idx_loop_size", 513), "net_idx_loop_size", 0,
     "net_idx_loop_size should be 512, not 513"),
    ("net_ops.bin", _set("unrolled_count", 2), "unrolled_count", 0,
     "unrolled_count should be 1, the chunk groups of the trigger, not 2"),
    ("net_ops.bin", _set("enc_channel", 1), "enc_channel", 0, "enc_channel should be 0, its "
                                                              "FIFO's channel, not 1"),
    ("net_ops.bin", _to_recv_sema, "inc_send_handshake", 0, "inc_send_handshake should be the INC "
     "window of this rank's semaphore 17 (channel 0 send_sema), not semaphore 16 (channel 0 "
     "recv_sema) of rank 1 (window 0x1800)"),
    # net_src_addr (FORMATS §8.2): entries 0..11 of op 0, terminator 12, the block's
    # EXEC_COMPLETE entry 13 (§8 "Basic blocks")
    ("net_src.bin", _set("mark", 3, 12), "mark", 12, "mark 3: a FIFO entry is NET_TRANSFER (0), "
     "a NET_OP_COMPLETE (1) terminator or a segment's EXEC_COMPLETE (2) entry"),
    ("net_src.bin", _set("mark", 2, 12), "mark", 12, "an EXEC_COMPLETE entry right after "
     "entries (records 0-11): their op is not closed by its NET_OP_COMPLETE terminator "
     "(proxy_end_operation) before its block's segment ends"),
    ("net_src.bin", _set("net_op_idx", 1, 12), "net_op_idx", 12, "terminator net_op_idx should be "
     "0, the op it closes (count of its block's net_ops_info so far - 1), not 1"),
    ("net_src.bin", _set("size", 8, 12), "size", 12, "terminator size should be 0, not 8"),
    # (the terminator without its mark reads as a 0-byte entry, named there)
    ("net_src.bin", _set("mark", 0, 12), "size", 12, "entry with size 0 or complete not 0/1 (a "
     "terminator without its NET_OP_COMPLETE mark?)"),
    ("net_src.bin", _set("net_op_idx", 1), "net_op_idx", 0, "net_op_idx 1: ops appear in order, "
     "each once, counted from 0 in each basic block, and block 0 has 1 on the channel (ops "
     "0-0 of its net_ops.bin slice; FORMATS §8 \"Basic blocks\")"),
    ("net_src.bin", _set("size", 8, 13), "size", 13, "EXEC_COMPLETE entry size should be 0, "
     "not 8"),
    # (one entry's net_op_idx off, the others and the terminator 0: that entry is named,
    # review 57i; until 2026-12-07 `net_op_idx should be 0, its op's, not 1`)
    ("net_src.bin", _set("net_op_idx", 1, 5), "net_op_idx", 5, "net_op_idx 1 inside op 0: the "
     "op's other 11 entries and its terminator (record 12) carry 0 (FORMATS §8.2: an op's "
     "entries carry its index)"),
    ("net_src.bin", _set("complete", 0, 11), "complete", 11, "the last entry of an op does not "
     "have complete = 1"),
], ids=["loop_size", "unrolled", "enc_channel", "send_sema", "mark", "exec_mark", "term_idx",
        "term_size", "unterminated", "op_order", "exec_size", "entry_idx", "last_complete"])
def test_one_field_of_a_net_fifo_is_refused_naming_it(r2n_out, tmp_path, name, fn, field,
                                                      record, why):
    out = copy(r2n_out, tmp_path)
    _edit(out, name, F.NET_OPS_INFO_DTYPE if name == "net_ops.bin" else F.NET_SRC_ADDR_DTYPE,
          fn)
    assert _error(out) == (f"{out / 'rank-0001'}: field {field}, rank 1, channel 0, artifact "
                           f"{name}, record {record}: {why}")


def test_a_transfer_cut_in_two_is_counted_against_the_legs(r2n_out, tmp_path):
    """Entry 5's complete cleared: entries 5 and 6 read as one transfer, 11 for the 12 the
    legs hand the proxy (one send_sema increment each, FORMATS §8 "Entries"); since fixer 59p
    the record is named, its paired receive entry (rank 64's record 5) having complete 1."""
    out = copy(r2n_out, tmp_path)
    _edit(out, "net_src.bin", F.NET_SRC_ADDR_DTYPE, _set("complete", 0, 5))
    assert _error(out) == (f"{out / 'rank-0001'}: field complete, trigger 0, rank 1, channel 0, "
                           "artifact net_src.bin, record 5: complete should be 1, not 0: the "
                           "legs of entry 0 hand 12 transfer(s) to the net proxy (send_sema "
                           "increments), the transmit FIFO carries 11, and the receive entry it "
                           "pairs with (rank 64, net_dest.bin record 5) has complete 1 "
                           "(FORMATS §8.2)")


def test_a_dst_addr_other_than_its_receive_entrys_dev_addr_is_refused(r2n_out, tmp_path):
    """Rank 1's first transmit entry pairs with rank 64's first receive entry (its successor's
    net_dest.bin record 0, FORMATS §8 "Proxy semantics"); dst_addr moved by 2 bytes."""
    out = copy(r2n_out, tmp_path)
    dst = np.fromfile(out / "rank-0064" / "net_dest.bin", F.NET_DEST_ADDR_DTYPE)
    src = np.fromfile(out / "rank-0001" / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    want = int(dst["dev_addr"][0])
    assert int(src["dst_addr"][0]) == want and dst["src_rank"][0] == 1
    _edit(out, "net_src.bin", F.NET_SRC_ADDR_DTYPE, _set("dst_addr", want + 2, 0))
    assert _error(out) == (f"{out / 'rank-0001'}: field dst_addr, rank 1, channel 0, artifact "
                           f"net_src.bin, record 0: dst_addr {want + 2:#x} here and dev_addr "
                           f"{want:#x} in the paired receive entry (rank 64, net_dest.bin record "
                           "0) should be equal: one of the two records is wrong, and nothing "
                           "else read tells which")


def test_a_transmit_entry_reading_another_cores_window_is_refused(r2n_out, tmp_path):
    """Rank 1 is logical core 1 of its device at LNC 2: its gateway bytes are at (1 << 36) +
    0x1_0000_0000 + offset (FORMATS §10); dev_addr moved to core 0's window (rank 0's)."""
    out = copy(r2n_out, tmp_path)
    src = np.fromfile(out / "rank-0001" / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    old = int(src["dev_addr"][0])
    assert old // CORE == 1
    _edit(out, "net_src.bin", F.NET_SRC_ADDR_DTYPE, _set("dev_addr", old - CORE, 0))
    assert _error(out) == (f"{out / 'rank-0001'}: field dev_addr, rank 1, artifact net_src.bin, "
                           f"record 0: dev_addr {old - CORE:#x} should be in rank 1's window, "
                           "not rank 0's")


# ---------------------------------------------------------------------------- the run

def test_a_leg_touching_a_rank_without_an_entry_of_its_trigger_is_refused(tmp_path):
    """Two bf16 MESH all-reduces of 4096 elements, trigger 0 over ranks 0..3, trigger 1 over
    4..7 (trn2, LNC 1: one device, rank r on core r). Rank 0's first mesh_send (record 4,
    after the two mark_complete and two mesh_sync legs of the entry handshake and the start
    event) writes its one destination, rank 1 (core 1, FORMATS §5: BD 0 the source, BD 1 the
    destination); moved to core 5, rank 5 has no entry of trigger 0."""
    out = _two_mesh_triggers(tmp_path / "o")
    legs = _legs(out, 0)
    assert legs["leaf"][:5].tolist() == [22, 22, 20, 20, 16] and legs["trigger"][4] == 0
    p, bds, first = _bds(out, 0, 4)
    assert legs["dma_count"][4] == 2 and int(bds["buf_ptr"][first + 1]) // CORE == 1
    bds["buf_ptr"][first + 1] += np.uint64(4 * CORE)
    bds.tofile(p)
    rehash(out)
    assert _error(out) == ("trigger 0, rank 0: leg mesh_send (rank 0, entry 0, channel 0, step "
                           "4) touches rank 5's memory, but rank 5 has no entry of trigger 0 "
                           "(flat)")


def test_a_mesh_reduce_waiting_for_too_few_peers_reads_unordered_bytes(tmp_path):
    """A bf16 MESH all-reduce of 4096 elements over ranks 0..3: rank 0's mesh_reduce (record
    7) waits EVT_REDUCE_COPY (id 200) >= 3, the blocks of its 3 peers (FORMATS §4's table);
    made >= 2 in sem.bin and in its 0xBF word's semaphore_value (bytes 8..11), one peer's block
    (1024 elements, 2048 bytes: one slot of the 6144-byte scratch channel buffer) is read
    with no happens-before ordering after its write. Which peer is the scheduler's: the line
    is held to its shape, the slot to that peer's (DESIGN.md "MESH": sender s is slot
    index(s) - (index(s) > index(r)) of receiver r, so rank p's slot of rank 0 is p - 1,
    at byte (p - 1) x 2048)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 4096), tmp_path / "o", algo="mesh")
    legs = _legs(out, 0)
    assert legs["leaf"][7] == 17
    p = out / "rank-0000" / "sem.bin"
    sems = np.fromfile(p, F.SEM_DTYPE)
    k = int(legs["sem_first"][7])
    assert (int(sems["ctrl"][k]) & 0xFF, int(sems["value"][k])) == (20, 3)
    assert int(sems["addr"][k]) == EVT_SEM + 0x1C00 + 4 * 200  # the DEC window
    sems["value"][k] = 2
    sems.tofile(p)
    w = out / "rank-0000" / "sb2sb.bin"
    words = bytearray(w.read_bytes())
    j = int(legs["sb2sb_first"][7]) * 64
    assert words[j + 4:j + 6] == bytes([20, 200]) and words[j + 8] == 3
    words[j + 8] = 2
    w.write_bytes(bytes(words))
    rehash(out)
    regions = {r["name"]: r for r in json.loads((out / "manifest.json").read_text())
               ["memory"]["regions"]}
    assert (regions["scratch"]["offset"], regions["scratch"]["size"]) == (0x4000, 6144)
    err = _error(out)
    m = re.fullmatch(r"trigger 0, rank 0: leg mesh_reduce \(rank 0, entry 0, channel 0, step 7\) "
                     r"reads bytes \[(0x[0-9a-f]+), (0x[0-9a-f]+)\) of rank 0 scratch \"scratch\" "
                     r"\(address (0x[0-9a-f]+)\) written by leg mesh_send \(rank ([123]), entry "
                     r"0, channel 0, step \d+\) with no happens-before ordering between them "
                     r"\(missing or misdirected semaphore\)", err)
    assert m, err
    lo, hi, addr = (int(x, 16) for x in m.groups()[:3])
    writer = int(m.group(4))
    assert (lo, hi) == ((writer - 1) * 2048, writer * 2048)
    assert addr == 0x1_0000_0000 + 0x4000 + lo


def test_a_consuming_ring_leg_without_its_wait_is_refused_counting_it(ar2_out, tmp_path):
    """Record 4 (recv_reduce_copy) has two semaphore BDs, sem.bin 8 (wait recv_sema >= 1, it
    consumes its predecessor's half) and 9 (+1 on its own dma_compl_sema); the wait made a
    copy of the increment: FORMATS §7 knows both BDs, but the leg has no wait. Its first is
    8 (FORMATS §3: the BDs of records 0..3, two each, every leg's dma_compl_sema +1 one of
    them, FORMATS §7): the handshake's post (entry_post +1 on its one same-node peer, rank 1,
    FORMATS §3.4), its wait (entry_post >= 1; one channel: no entry_go), and each send
    (+1 on its successor's recv_sema)."""
    out = copy(ar2_out, tmp_path)
    legs = _legs(out, 0)
    before = [1 + 1, 1 + 1, 1 + 1, 1 + 1]  # post, wait, send H0, send H1
    assert legs["sem_count"][:4].tolist() == before
    assert (int(legs["sem_first"][4]), int(legs["sem_count"][4])) == (sum(before), 2) == (8, 2)
    p = out / "rank-0000" / "sem.bin"
    sems = np.fromfile(p, F.SEM_DTYPE)
    assert int(sems["ctrl"][8]) & 0xFF == 20 and int(sems["addr"][8]) == EVT_SEM + 0x1C00 + 4 * 16
    sems[8] = sems[9]
    sems.tofile(p)
    rehash(out)
    # the leg has its 2 BDs (sem_count right): the line names the BD of a kind it has too
    # many of, sem.bin record 8 (until 2026-12-06 `field sem_count, ... legs.bin, record 4`)
    assert _error(out) == (f"{out / 'rank-0000'}: field addr, rank 0, artifact sem.bin, "
                           "record 8: recv_reduce_copy leg (legs.bin record 4: entry 0, channel "
                           "0, step 4) should have 1 x a wait recv_sema >= 1, not 0; this BD is "
                           "one of its 2 x an increment of its own dma_compl_sema by 1, where it "
                           "should have 1")


def test_a_single_cycle_leg_on_a_channel_its_entry_lacks_is_refused(tmp_path):
    """A bf16 all-reduce of 4096 elements over ranks 0..3 (LNC 2) as SINGLE_CYCLE_RING:
    channels 0 (CW) and 1 (CCW). A leg of it may touch the other channel's block (the pair
    meets through post_sema, FORMATS §3.3), not a channel the entry does not run: rank 0's
    first +1 on channel 1's post_sema (16 + 4 + 2 = 22, INC window) made channel 2's (26)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 4096, lnc=2), tmp_path / "o",
                     algo="single_cycle_ring")
    p = out / "rank-0000" / "sem.bin"
    sems = np.fromfile(p, F.SEM_DTYPE)
    post22 = EVT_SEM + INC + 4 * 22
    k = int(np.flatnonzero((sems["addr"] == post22) & ((sems["ctrl"] & 0xFF) == 21))[0])
    sems["addr"][k] = EVT_SEM + INC + 4 * 26
    sems.tofile(p)
    rehash(out)
    assert _error(out) == (f"{out / 'rank-0000'}: field addr, rank 0, artifact sem.bin, record "
                           f"{k}: semaphore 26 (channel 2 post_sema) used by a leg of an entry "
                           "without channel 2")


def _reregion(out: Path, i: int, **kw) -> None:
    m = out / "manifest.json"
    top = json.loads(m.read_text())
    top["memory"]["regions"][i].update(**kw)
    m.write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rehash(out)


@pytest.mark.parametrize("i, edit, why", [
    # FORMATS §10: a region's kind is dram, sbuf, scratch or gw, its offset and size >= 0
    (0, {"kind": "foo"}, "memory region \"x_in\": bad kind/offset/size"),
    (0, {"offset": -2}, "memory region \"x_in\": bad kind/offset/size"),
    # an SBUF region has 1..128 partitions
    (0, {"kind": "sbuf", "partitions": 0}, "memory region \"x_in\": 0 partitions"),
    (0, {"kind": "sbuf", "partitions": 129}, "memory region \"x_in\": 129 partitions"),
    # x_in is [0, 2000), x_out moved from 4096 to 1000
    (1, {"offset": 1000}, "memory regions \"x_in\" and \"x_out\" overlap"),
], ids=["kind", "offset", "partitions_0", "partitions_129", "overlap"])
def test_a_memory_region_other_than_formats_is_refused(ar2_out, tmp_path, i, edit, why):
    """ar2_out's regions: x_in [0, 2000), x_out [4096, 6096), scratch, gw (1000 bf16
    elements, 2000 bytes each, DRAM regions 4 KiB aligned)."""
    out = copy(ar2_out, tmp_path)
    regions = json.loads((out / "manifest.json").read_text())["memory"]["regions"]
    assert [(r["name"], r["offset"], r["size"]) for r in regions[:2]] == [("x_in", 0, 2000),
                                                                          ("x_out", 4096, 2000)]
    _reregion(out, i, **edit)
    assert _error(out) == f"{out / 'manifest.json'}: field memory: {why}"


def _bad_input(out: Path) -> str:
    """Simulated: the output cannot be read as the format (exit 2), one line."""
    res = cli("simulate", out, "--json")
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert "\n" not in doc["error"]
    return doc["error"]


def test_a_rewritten_neff_other_than_its_checksum_is_refused(ar2_out, tmp_path):
    """The rewritten NEFF's last byte flipped, the manifest's output_neff.sha256 left: the
    checksum refusal names the NEFF (its name in the manifest, o.neff) and the way round."""
    out = copy(ar2_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    assert top["output_neff"]["name"] == "o.neff"
    p = out / "o.neff"
    b = bytearray(p.read_bytes())
    b[-1] ^= 1
    p.write_bytes(bytes(b))
    assert _bad_input(out) == (f"{out}: o.neff: sha256 does not match manifest.json; the output "
                               "was modified after it was written (--ignore-checksums to "
                               "simulate anyway)")


def _two_mesh_triggers(out: Path) -> Path:
    """Two bf16 MESH all-reduces of 4096 elements: trigger 0 over ranks 0..3, trigger 1 over
    4..7 (trn2, LNC 1), each rank's only entry its group's trigger."""
    spec = coll_spec("all_reduce", "bf16", 4, 4096)
    sg = spec["subgraphs"][0]
    sg["replica_groups"] = [[0, 1, 2, 3], [4, 5, 6, 7]]
    sg["engines"]["sp"][1]["all_reduce"]["group"] = 0
    sg["vars"].append({"name": "y_out", "type": "output", "size": 8192})
    sg["engines"]["sp"].append({"all_reduce": {"dtype": "bf16", "op": "add", "src": "x_in",
                                               "dst": "y_out", "num_elements": 4096,
                                               "group": 1}})
    return lower_spec(spec, out, algo="mesh")


def test_a_group_rank_without_an_entry_of_the_trigger_is_refused(tmp_path):
    """Trigger 0's replica_group given rank 4 too (whose only entry is trigger 1's): rank 4's
    load names the trigger it has no entry of."""
    out = _two_mesh_triggers(tmp_path / "o")
    assert trigger0(out)["replica_group"] == [0, 1, 2, 3]
    _retrigger(out, 0, lambda t: t.__setitem__("replica_group", [0, 1, 2, 3, 4]))
    rehash(out)
    assert _error(out) == (f"{out / 'rank-0004'}: rank 4, artifact spad.bin: no SPAD entry for "
                           "trigger 0, whose replica group contains rank 4")


@pytest.mark.parametrize("seed", [-1, 2 ** 32, True])
def test_a_seed_outside_32_bits_is_refused_by_the_api(ar2_out, seed):
    """The CLI's --seed is an IntRange(0, 2**32 - 1) (click refuses first: this check is not
    reachable from ``nrtrewrite simulate``); ``simulate_output`` refuses the same seeds, which
    would repeat another seed's data (testdata.SEED_MAX)."""
    from nrtrewrite.simulate import simulate_output
    with pytest.raises(ValueError) as exc:
        simulate_output(ar2_out, seed=seed)
    assert str(exc.value) == f"seed {seed!r}: a seed is an integer from 0 to 4294967295"


# the shadow's four verdicts (engine._conflict), each from one BD moved in a MESH all-reduce of
# 4096 bf16 elements over ranks 0..3 (trn2, LNC 1): blocks of 1024 elements (2048 bytes);
# the regions x_in [0, 0x2000), x_out [0x2000, 0x4000), scratch [0x4000, 0x5800) (the channel
# buffer: one 2048-byte slot a peer). Rank 1's legs: two mark_complete, two mesh_sync, its
# mesh_sends to ranks 0, 2, 3 (records 4, 5, 6: BD 0 the source, BD 1 the destination; to rank
# 0 its slot 0 at core 0's scratch + 0, address 0x1_0000_4000), mesh_reduce (7), the reduced
# block's mesh_send to the 3 peers' x_out (8: BDs 11 source, 12..14 destinations 0..2 =
# ranks 0, 2, 3).

BD = DMA
# FORMATS §10: core 0's DRAM at 0x1_0000_0000, scratch after x_in and x_out (8192 bytes each,
# 4096-aligned); rank 1 is slot index(1) - (index(1) > index(0)) = 0 of rank 0 (DESIGN.md)
SLOT0_OF_RANK0 = (0 << 36) + 0x1_0000_0000 + 2 * 8192 + 0 * 2048
assert SLOT0_OF_RANK0 == 0x1_0000_4000
LEAF_MESH_SEND, LEAF_MESH_REDUCE, LEAF_MESH_SYNC, LEAF_MARK_END = 16, 17, 20, 15


@pytest.fixture(scope="module")
def m4_out(tmp_path_factory) -> Path:
    """Rank 1's leaves, from docs/DESIGN.md "Mesh and RDH" (MESH) over n = 4 ranks of one
    device: the entry handshake (FORMATS §3.4, one channel: the post, then the wait), the
    mesh's own handshake (EVT_LOCAL_HNDSHK: "each rank increments every peer ..., then waits
    for all of them", two mesh_sync), the scatter (block j to peer j: one mesh_send each of
    the n - 1 peers, in group order 0, 2, 3), the reduce (one record per 64 KiB page: the
    block is 2048 bytes, one page, n = 4 sources <= 8, no chain), the fan-out of the reduced
    block (at most 8 destinations a leg: ceil(3 / 8) = 1 mesh_send), the wait for the
    others' blocks (EVT_INTRA_GRP_BRDCST, a mesh_sync), mark_end. Its BDs (FORMATS §5, one
    tile a leg: 2048 bytes < 64 KiB): a scatter leg 1 source + 1 destination, the reduce n
    sources + 1 destination, so the fan-out (record 8) starts at 3 x 2 + 5 = 11 and has
    1 + 3."""
    n, block_bytes = 4, 4096 // 4 * 2
    out = lower_spec(coll_spec("all_reduce", "bf16", n, 4096),
                     tmp_path_factory.mktemp("m4") / "o", algo="mesh")
    legs = _legs(out, 1)
    pages = -(-block_bytes // 65536)
    assert pages == 1 and n <= 8
    want = ([LEAF_MARK_COMPLETE] * 2 + [LEAF_MESH_SYNC] * 2 + [LEAF_MESH_SEND] * (n - 1)
            + [LEAF_MESH_REDUCE] * pages + [LEAF_MESH_SEND] * -(-(n - 1) // 8)
            + [LEAF_MESH_SYNC, LEAF_MARK_END])
    assert legs["leaf"].tolist() == want == [22, 22, 20, 20, 16, 16, 16, 17, 16, 20, 15]
    bds = np.fromfile(out / "rank-0001" / "dma.bin", BD)
    assert int(bds["buf_ptr"][legs["dma_first"][4] + 1]) == SLOT0_OF_RANK0
    assert legs["dma_first"][8] == (n - 1) * (1 + 1) + (n + 1) == 11
    assert legs["dma_count"][8] == 1 + (n - 1) == 4
    return out


def _move(out: Path, rank: int, bd: int, addr: int) -> None:
    p = out / f"rank-{rank:04d}" / "dma.bin"
    bds = np.fromfile(p, BD)
    bds["buf_ptr"][bd] = addr
    bds.tofile(p)
    rehash(out)


def test_a_second_write_of_a_slot_before_its_read_is_a_race(m4_out, tmp_path):
    """Rank 1's second mesh_send (record 5, to rank 2) moved onto rank 0's slot 0: rank 0's
    mesh_reduce waited for rank 1's first send (its event), not for this one."""
    out = copy(m4_out, tmp_path)
    _move(out, 1, int(_legs(out, 1)["dma_first"][5]) + 1, SLOT0_OF_RANK0)
    assert _error(out) == ("trigger 0, rank 0: leg mesh_reduce (rank 0, entry 0, channel 0, step "
                           "7) reads bytes [0x0, 0x800) of rank 0 scratch \"scratch\" (address "
                           "0x100004000) written by leg mesh_send (rank 1, entry 0, channel 0, "
                           "step 5) with no happens-before ordering between them (missing or "
                           "misdirected semaphore)")


def test_two_unordered_writes_of_one_slot_are_a_race(m4_out, tmp_path):
    """Rank 2's first mesh_send (to rank 0, its slot 1) moved onto slot 0, which rank 1's
    first send writes: nothing orders the two writes (which runs second is the run's)."""
    out = copy(m4_out, tmp_path)
    _move(out, 2, int(_legs(out, 2)["dma_first"][4]) + 1, SLOT0_OF_RANK0)
    err = _error(out)
    lines = [f"trigger 0, rank {a}: leg mesh_send (rank {a}, entry 0, channel 0, step 4) writes "
             "bytes [0x0, 0x800) of rank 0 scratch \"scratch\" (address 0x100004000) also written "
             f"by leg mesh_send (rank {b}, entry 0, channel 0, step 4) with no happens-before "
             "ordering between the two writes" for a, b in ((2, 1), (1, 2))]
    assert err in lines, err


def test_a_write_of_a_slot_after_its_unordered_read_is_a_race(m4_out, tmp_path):
    """Rank 1's last mesh_send (record 8) destination 1 (rank 2's x_out, BD 13) moved onto rank
    0's slot 0: it runs after rank 1's mesh_reduce, rank 0's mesh_reduce has read the slot by
    then (the run's order), and nothing orders the two."""
    out = copy(m4_out, tmp_path)
    _move(out, 1, 13, SLOT0_OF_RANK0)
    assert _error(out) == ("trigger 0, rank 1: leg mesh_send (rank 1, entry 0, channel 0, step "
                           "8) writes bytes [0x0, 0x800) of rank 0 scratch \"scratch\" (address "
                           "0x100004000) that leg mesh_reduce (rank 0, entry 0, channel 0, step "
                           "7) reads with no happens-before ordering (the read may see either "
                           "value)")


def test_a_read_of_bytes_only_an_earlier_trigger_wrote_is_refused(tmp_path):
    """Two such all-reduces, x_in to x_out: rank 0's mesh_reduce of trigger 1 (its second
    entry: sources IN, slots 0, 1, 2 of its peers, BDs 1..3, destination its block of x_out)
    reads x_out's first 2048 bytes (0x1_0000_2000) for slot 0: trigger 0's reduce wrote them,
    trigger 1's has not yet."""
    spec = coll_spec("all_reduce", "bf16", 4, 4096)
    spec["subgraphs"][0]["engines"]["sp"].append(
        {"all_reduce": {"dtype": "bf16", "op": "add", "src": "x_in", "dst": "x_out",
                        "num_elements": 4096}})
    out = lower_spec(spec, tmp_path / "o", algo="mesh")
    legs = _legs(out, 0)
    g = int(np.flatnonzero((legs["trigger"] == 1) & (legs["leaf"] == 17))[0])
    first = int(legs["dma_first"][g])
    bds = np.fromfile(out / "rank-0000" / "dma.bin", BD)
    assert int(bds["buf_ptr"][first + 1]) == SLOT0_OF_RANK0 and legs["step"][g] == 7
    _move(out, 0, first + 1, 0x1_0000_2000)
    assert _error(out) == ("trigger 1, rank 0: leg mesh_reduce (rank 0, entry 1, channel 0, "
                           "step 7) reads bytes [0x0, 0x800) of rank 0 dram \"x_out\" (address "
                           "0x100002000), which should be last written in trigger 1, not in "
                           "trigger 0 (by leg mesh_reduce (rank 0, entry 0, channel 0, step 7))")


def test_a_transfer_of_other_bytes_than_its_post_recv_is_refused(tmp_path):
    """A bf16 MESH all-reduce of 32768 elements over ranks 0 and 64 (two trn2 nodes, LNC 2):
    FORMATS §8.2's example, rank 0's net_src.bin entry, entry, terminator(0), terminator(1),
    EXEC_COMPLETE(1) and rank 64's net_dest.bin entry, terminator(0), entry, terminator(1),
    EXEC_COMPLETE(1), each transfer half
    the buffer (16384 elements, 32768 bytes). The first transfer made 2 bytes shorter and the
    second 2 bytes longer on both sides: the entry's total still matches its post_recv legs,
    the first post_recv (rank 64's first, 16384 elements) does not."""
    out = tmp_path / "o"
    meshcase.lower(meshcase.spec([[0, 64]], [("all_reduce", "bf16", "add", 32768)], lnc=2),
                   out, algo="mesh", topology="trn2:nodes=2")
    p = out / "rank-0000" / "net_src.bin"
    src = np.fromfile(p, F.NET_SRC_ADDR_DTYPE)
    assert src[["size", "mark"]].tolist() == [(32768, 0), (32768, 0), (0, 1), (0, 1), (0, 2)]
    src["size"][:2] = [32766, 32770]
    src.tofile(p)
    q = out / "rank-0064" / "net_dest.bin"
    dst = np.fromfile(q, F.NET_DEST_ADDR_DTYPE)
    assert dst[["size", "mark"]].tolist() == [(32768, 0), (0, 1), (32768, 0), (0, 1), (0, 2)]
    dst["size"][[0, 2]] = [32766, 32770]
    dst.tofile(q)
    rehash(out)
    post = _first_leg(out, 64, 21)
    assert _legs(out, 64)["num_elements"][post] == 16384
    assert _error(out) == (f"{out / 'rank-0064'}: field num_elements, rank 64, channel 0, "
                           f"artifact legs.bin, record {post}: post_recv of 16384 elements "
                           "(32768 bytes) receives a transfer of 32766 bytes (rank 0's "
                           "net_src.bin record 0, complete)")


def test_tiles_of_one_leg_with_other_stream_counts_are_refused(ar2_out, tmp_path):
    """Record 4 (recv_reduce_copy) has two tiles of two sources and one destination, BDs 8..10
    and 11..13 (FORMATS §5: per tile the M2S BDs of sources 0, 1, then the S2M BD of
    destination 0; meta_ctrl sdma_op 4, dir bit 4, stream [12:8]: 0x4, 0x104, 0x14). Tile 1's
    source 1 and destination 0 made destinations 0 and 1 (0x14, 0x114): one source, two
    destinations against tile 0's two and one."""
    out = copy(ar2_out, tmp_path)
    p = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(p, BD)
    assert bds["meta"][8:14].tolist() == [0x4, 0x104, 0x14] * 2
    bds["meta"][12:14] = [0x14, 0x114]
    bds.tofile(p)
    rehash(out)
    assert _error(out) == (f"{out / 'rank-0000'}: field dma_count, rank 0, artifact legs.bin, "
                           "record 4: tiles of this leg have different numbers of "
                           "sources/destinations")


@pytest.mark.parametrize("code,line", [
    # (SDMA_CCETYPE, seed 000 §3.3: 0 ADD, 1 FMA, 2 MAX, 3 MIN; ar2's one trigger is an ADD)
    (1, "field w1.op, rank 0, artifact cce.bin, record 0: W1 sub-op should be ADD, MAX or MIN, "
        "not FMA"),
    (2, "field w1.op, trigger 0, rank 0, artifact cce.bin, record 0: W1 sub-op should be ADD, "
        "the trigger's op, not MAX"),
])
def test_a_w1_sub_op_error_names_its_code_and_trigger_and_counts_the_ranks(ar2_out, tmp_path,
                                                                           code, line):
    """Every W1 of rank 0 given sub-op ``code``: FMA (1) was printed ``not 1`` where the
    others print by name; the error against the trigger's own op named no trigger (its
    ``error_trigger`` null, its verdict ``not run``); ``stats.ranks`` counted the ranks
    decoded before the error (0), not the output's 2."""
    out = copy(ar2_out, tmp_path)
    p = out / "rank-0000" / "cce.bin"
    cce = np.fromfile(p, F.CCE_DTYPE)
    cce["w1"] = cce["w1"] & ~np.uint32(7) | np.uint32(code)
    cce.tofile(p)
    res = cli("simulate", out, "--json", "--ignore-checksums")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["error"] == f"{out / 'rank-0000'}: {line}"
    assert doc["stats"]["ranks"] == 2
    verdict = doc["triggers"][0]
    if code == 2:  # against the trigger's op: the trigger's error
        assert doc["error_trigger"] == 0
        assert (verdict["status"], verdict["detail"]) == (
            "error", "W1 sub-op should be ADD, the trigger's op, not MAX")
    else:  # not a CCE reduce op at all: a record's error
        assert doc["error_trigger"] is None and verdict["status"] == "not run"


def test_a_ring_leg_writing_only_its_own_core_is_named_after_a_wrong_read(ar4_out, tmp_path):
    """Rank 0's send H0 (record 2): BDs 1 and 3, its destinations on rank 1, moved one core
    back, write rank 0's own core, so the leg signals rank 1 but writes nothing there; BD 8
    (recv_reduce_send, record 4, tile 0's source 0) moved three cores on reads rank 3. A
    write of a leg's own core is no wrong BD (a leg may write its own core), so the pass in
    dma.bin order names BD 8, and the leg writing nothing where it signals is checked last:
    SIMULATOR §2 says that order (until 2026-12-07 it read as if BD 1 came first, review
    52r)."""
    out = copy(ar4_out, tmp_path)
    assert _move_bds(out, {1: -1, 3: -1, 8: 3}) == {1: 0, 3: 0, 8: 3}
    assert _error(out) == (f"{out / 'rank-0000'}: field buf_ptr, rank 0, artifact dma.bin, "
                           "record 8: recv_reduce_send leg (legs.bin record 4) reads rank 3 "
                           "(ring legs read their own core)")
    alone = copy(ar4_out, tmp_path, "alone")  # (without BD 8's move: the leg is named)
    assert _move_bds(alone, {1: -1, 3: -1}) == {1: 0, 3: 0}
    assert _error(alone) == (f"{alone / 'rank-0000'}: field buf_ptr, rank 0, artifact "
                             "dma.bin, record 1: send leg (legs.bin record 2) signals rank 1 "
                             "but writes nothing there")
