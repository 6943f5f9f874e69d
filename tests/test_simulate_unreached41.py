"""Refusals of ``simulate`` that no test reached, each reached here through the public route:
a lowered output, tampered (and re-hashed, so that the checksums pass), run through
``nrtrewrite simulate``; the whole one-line refusal is worked out by hand from the tamper.

KANGARING data (docs/SIMULATOR.md §1 "So is their data", FORMATS §3.3): a primary's leg reads
only the secondaries of its unit, writes only those and the next primary, a secondary's legs
move no data (program.py ``check_kangaring_peers``, its branches after the semaphores').

Addresses are FORMATS §10's: a DRAM byte of logical core ``lc`` is at ``(lc << 36) +
0x1_0000_0000 + offset``, a target on the same device the plain local address; on trn2 at
LNC 1 rank r of device 0 is logical core r. A ``dma.bin`` BD is 16 bytes, ``buf_ptr`` u64 at
8, its meta word at 4 (``dir`` bit 4, ``stream`` bits [12:8]); a ``sem.bin`` BD 16 bytes
(ctrl, value, addr), an increment's addr ``0x82_8000_0000 + (sp << 30) + 0x1800 + 4 * id``
(FORMATS §7, §10)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nrtrewrite.simulate.engine as engine_mod
from nrtrewrite.emit import formats as F
from test_simulate import cli, coll_spec, lower_spec
from test_simulate_kick_leaf import _retrigger, copy, rehash, trigger0

DMA = np.dtype([("length", "<u4"), ("meta", "<u4"), ("buf_ptr", "<u8")])
LEAF_FAN_IN, LEAF_DIRECT_RECV, LEAF_MARK_COMPLETE = 10, 7, 22
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


@pytest.fixture(scope="module")
def kr16_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 4096 elements over ranks 0..15 (trn2, LNC 1) as KANGARING, one
    channel. docs/TOPOLOGY.md §4 (vnc 1): a unit is (S_k t0, S_k^2 t0, S_k^2 t1, S_k t1), rank r
    of a device on s-engine (r % 8) // 2: [0, 4, 5, 1], [2, 6, 7, 3] on device 0, [8, 12, 13,
    9], [10, 14, 15, 11] on device 1, primary member 0 on channel 0; the order [0, 2, 8, 10]."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 16, 4096),
                     tmp_path_factory.mktemp("kr16") / "o", algo="kangaring")
    t = trigger0(out)
    units = [[0, 4, 5, 1], [2, 6, 7, 3], [8, 12, 13, 9], [10, 14, 15, 11]]
    assert t["channels"] == [{"channel": 0, "order": [0, 2, 8, 10]}]
    assert t["kangaring"] == [{"channel": 0, "duplicate": False, "units": units,
                               "logical_path": [m for u in units for m in u]}]
    return out


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


def _where(out: Path, g: int) -> str:
    return f"{out / 'rank-0000'}: field dma_first, rank 0, artifact legs.bin, record {g}: "


def test_a_kangaring_primary_reading_another_units_rank_is_refused(kr16_out, tmp_path):
    """Rank 0, primary of [0, 4, 5, 1]: its first fan-in (direct_reduce_send_kangaring) reads
    sources self, PEER_RMTV, PEER_RMTV2, PEER_LOCAL (FORMATS §3.3), source 1 on rank 4
    (core 4). Pointed at core 2 (rank 2, primary of [2, 6, 7, 3]): the read of rank 2 names
    the leg, its record and the unit (SIMULATOR.md's `... reads rank 2: not a secondary of
    its unit ...`)."""
    out = copy(kr16_out, tmp_path)
    g = _first_leg(out, 0, LEAF_FAN_IN)
    _retarget(out, 0, g, 0, 1, want_core=4, core=2)
    assert _error(out) == (
        _where(out, g) + f"direct_reduce_send_kangaring leg (legs.bin record {g}) of rank 0 "
        "reads rank 2: not a secondary of its unit [0, 4, 5, 1] on channel 0 "
        "(triggers[0].kangaring[0].units) (FORMATS §3.3)")


def test_a_kangaring_primary_writing_a_stranger_is_refused_as_simulator_md_says(kr16_out,
                                                                               tmp_path):
    """SIMULATOR.md's example: rank 0's first direct_recv copies the last chunk to its
    secondaries 4, 5, 1 (destinations 0, 1, 2, FORMATS §3.3); destination 0 pointed at core 6
    (rank 6, a secondary of [2, 6, 7, 3]) is neither a secondary of rank 0's unit nor the next
    primary 2."""
    out = copy(kr16_out, tmp_path)
    g = _first_leg(out, 0, LEAF_DIRECT_RECV)
    _retarget(out, 0, g, 1, 0, want_core=4, core=6)
    assert _error(out) == (
        _where(out, g) + f"direct_recv leg (legs.bin record {g}) of rank 0 writes rank 6: "
        "neither a secondary of its unit [0, 4, 5, 1] on channel 0 "
        "(triggers[0].kangaring[0].units) nor the next primary 2 "
        "(triggers[0].channels[0].order) (FORMATS §3.3)")


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

    def reunit(t: dict) -> None:
        t["kangaring"][0].update(units=units, logical_path=[m for u in units for m in u])
        t["channels"][0]["order"] = [u[0] for u in units]
    _retrigger(out, 0, reunit)
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
    assert _error(out) == (
        _where(out, g) + f"direct_reduce_send_kangaring leg (legs.bin record {g}) of rank 0 "
        "reads rank 4: rank 0 is a secondary of unit [4, 0, 5, 1] on channel 0 "
        "(triggers[0].kangaring[0].units), whose legs move no data (FORMATS §3.3)")
