"""What ``simulate`` holds a KANGARING trigger's units and legs to beyond the section itself
(docs/SIMULATOR.md §1, §2): a secondary's ``peer_post`` names its unit's primary (FORMATS
§3.3), tested on a secondary of its own (until 2026-12-05 only rank 0, a primary, was
edited, and it trips first).

Every output is hand-edited and re-hashed, so that the checksums pass. Expected units,
ranks and addresses are worked out from the docs (docs/TOPOLOGY.md §1, §4; FORMATS §7,
§10), not read back from ``lower``: the fixtures (test_simulate_hier_checks.py) assert
them first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.emit import formats as F
from test_simulate_hier_checks import kr16_out  # noqa: F401  (a fixture)
from test_simulate_kick_leaf import copy, legs, refused, rehash

#: FORMATS §3 leaf codes
PEER_POST = 11
#: FORMATS §10: a semaphore's local address is 0x8280000000 + ((sp & 7) << 30) + window +
#: 4 * id, sp the TOP_SP of its core (the logical core, below 8 here)
EVT_SEM_BASE, TOPSP_SHIFT = 0x82_8000_0000, 30


def _core(addr: int) -> int:
    return ((addr - EVT_SEM_BASE) >> TOPSP_SHIFT) & 7


def _sems(out: Path, rank: int) -> np.ndarray:
    return np.fromfile(out / f"rank-{rank:04d}" / "sem.bin", F.SEM_DTYPE)


def _retarget_peer_post(out: Path, rank: int, to_core: int) -> tuple[int, int]:
    """Make ``rank``'s first ``peer_post`` increment the peer semaphore of the core
    ``to_core`` of its own device (of 8 cores) instead (the TOP_SP index of the address): (its legs.bin
    record, its sem.bin record)."""
    lg = legs(out, rank)
    g = int(np.flatnonzero(lg["leaf"] == PEER_POST)[0])
    sems = _sems(out, rank)
    first, count = int(lg["sem_first"][g]), int(lg["sem_count"][g])
    # (its increments: the primary's peer semaphore, and its own dma_compl_sema)
    (i,) = [first + k for k in range(count) if sems["ctrl"][first + k] & F.SEM_SUBOP_MASK == 21
            and _core(int(sems["addr"][first + k])) != rank % 8]
    addr = int(sems["addr"][i])
    core = _core(addr)
    assert core == 0  # (the primary, rank 0)
    sems["addr"][i] = addr + ((to_core - core) << TOPSP_SHIFT)
    sems.tofile(out / f"rank-{rank:04d}" / "sem.bin")
    return g, i


@pytest.mark.parametrize("to", [6, 2], ids=["another-units-secondary", "another-primary"])
def test_a_secondarys_peer_post_to_a_stranger_is_refused(kr16_out, tmp_path, to):  # noqa: F811
    """FORMATS §3.3: a secondary's ``peer_post`` is +1 on its primary's peer semaphore.
    kr16_out (trn2, LNC 1): rank 4 is a secondary of unit [0, 4, 5, 1] on channel 0, on
    device 0 as rank 0, its primary (logical core 0). Its post moved to core 6 (rank 6, a
    secondary of [2, 6, 7, 3]) or core 2 (rank 2, that unit's primary) is refused naming
    rank 4, its sem.bin record and its unit's key; rank 0's files are untouched."""
    out = copy(kr16_out, tmp_path)
    g, i = _retarget_peer_post(out, 4, to)
    rehash(out)
    refused(out, "rank 4,", f"artifact sem.bin, record {i}", f"peer_post leg (legs.bin record "
            f"{g}) of secondary 4 increments the peer semaphore of rank {to}, not its unit's "
            "primary 0 on channel 0 (triggers[0].kangaring[0].units; FORMATS §3.3)")


#: FORMATS §3 leaf codes of a primary's data legs
DIRECT_RECV, REDUCE_SEND_KANGARING = 7, 10
#: FORMATS §10: a data address of a core of the own device is (logical core << 36) + the
#: DRAM window + the offset (no routing bits)
CORE_SHIFT = 36


def _retarget_data(out: Path, rank: int, leaf: int, write: bool, to_core: int) -> int:
    """Move the first BD of ``rank``'s first ``leaf`` leg that reads (or writes) another core
    of its device to the core ``to_core`` (the same offset there): its legs.bin record."""
    lg = legs(out, rank)
    path = out / f"rank-{rank:04d}" / "dma.bin"
    bds = np.fromfile(path, F.BD_DTYPE)
    for g in np.flatnonzero(lg["leaf"] == leaf):
        first, count = int(lg["dma_first"][g]), int(lg["dma_count"][g])
        for k in range(first, first + count):
            ptr = int(bds["buf_ptr"][k])
            core = (ptr >> CORE_SHIFT) & 0x3FF
            if bool(bds["meta_ctrl"][k] & F.META_DIR_S2M) == write and core != rank % 8:
                assert core == 4  # (rank 4, the secondary)
                bds["buf_ptr"][k] = ptr + ((to_core - core) << CORE_SHIFT)
                bds.tofile(path)
                return int(g)
    raise AssertionError(f"no leg {leaf} of rank {rank} reaches another core")


@pytest.mark.parametrize("leaf, write, to, says", [
    (DIRECT_RECV, True, 6, "direct_recv leg (legs.bin record {g}) of rank 0 writes rank 6: "
     "neither a secondary of its unit [0, 4, 5, 1] on channel 0 (triggers[0].kangaring[0]."
     "units) nor the next primary 2 (triggers[0].channels[0].order) (FORMATS §3.3)"),
    (REDUCE_SEND_KANGARING, False, 2, "direct_reduce_send_kangaring leg (legs.bin record {g}) "
     "of rank 0 reads rank 2: not a secondary of its unit [0, 4, 5, 1] on channel 0 "
     "(triggers[0].kangaring[0].units) (FORMATS §3.3)"),
    (REDUCE_SEND_KANGARING, False, 6, "direct_reduce_send_kangaring leg (legs.bin record {g}) "
     "of rank 0 reads rank 6: not a secondary of its unit [0, 4, 5, 1] on channel 0 "
     "(triggers[0].kangaring[0].units) (FORMATS §3.3)"),
], ids=["write-to-a-stranger", "read-of-another-primary", "read-of-a-stranger"])
def test_a_primarys_data_on_a_rank_off_its_unit_and_cycle_is_refused(kr16_out, tmp_path,  # noqa: F811
                                                                     leaf, write, to, says):
    """FORMATS §3.3, docs/DESIGN.md "Kangaring": a primary reads its own and its
    secondaries' memory and writes there and on the next primary. kr16_out's rank 0
    (primary of [0, 4, 5, 1], next primary 2): its ``direct_recv`` copy to secondary 4's
    output moved to rank 6's, or its fan-in's read of 4's input moved to rank 2 or 6, is
    refused before the run, naming the leg. Until 2026-12-05 only the run refused them: the
    write as a race (rank 6's output written with no happens-before), the read of rank 2 as
    a mismatch of 2016 elements, the read of rank 6 as a race."""
    out = copy(kr16_out, tmp_path)
    g = _retarget_data(out, 0, leaf, write, to)
    rehash(out)
    refused(out, "rank 0,", f"artifact legs.bin, record {g}", says.format(g=g))
