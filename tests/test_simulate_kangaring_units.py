"""What ``simulate`` holds a KANGARING trigger's units and legs to beyond the section itself
(docs/SIMULATOR.md §1): a secondary's ``peer_post`` names its unit's primary (FORMATS §3.3),
tested on a secondary of its own (until 2026-12-05 only rank 0, a primary, was edited, and it
trips first); a primary's data stays on its unit and the next primary (FORMATS §3.3: until
2026-12-05 left to the run's data and shadow checks); and each unit is docs/TOPOLOGY.md §4's
for the ranks' s-engines, its primary member c % size (``topology.ranks[].sengine`` and
``tpb`` were not read until 2026-12-05: a primary other than TOPOLOGY's, the legs agreeing,
simulated as a match). And a ``duplicate: true`` channel, which ``lower`` writes on a
topology of three device cycles (docs/DESIGN.md "Kangaring"), simulates as a match.

Every output is hand-edited and re-hashed, so that the checksums pass, or lowered with a
defect put in by hand. Expected units, ranks and addresses are worked out from the docs
(docs/TOPOLOGY.md §1, §4; FORMATS §7, §10), not read back from ``lower``: the fixtures
(test_simulate_hier_checks.py) assert them first."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import nrtrewrite.simulate.engine as engine_mod
import nrtrewrite.topology.rings as rings_mod
from nrtrewrite.emit import formats as F
from nrtrewrite.simulate import simulate_output
from test_simulate import coll_spec, lower_spec
from test_simulate_hier_checks import HIER16, kr8_out, kr16_out  # noqa: F401  (fixtures)
from test_simulate_hier_checks import _field, _reunit as _reunit_item
from test_simulate_kick_leaf import _retrigger, copy, legs, refused, rehash, trigger0

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
    ``to_core`` of its own device (of 8 cores) instead (the TOP_SP index of the address):
    (its legs.bin record, its sem.bin record)."""
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
            f"{g}) of secondary 4 should increment the peer semaphore of its unit's primary 0 "
            f"on channel 0, not of rank {to} (triggers[0].kangaring[0].units; FORMATS §3.3)")


#: FORMATS §3 leaf codes of a primary's data legs
DIRECT_RECV, REDUCE_SEND_KANGARING = 7, 10
#: FORMATS §10: a data address of a core of the own device is (logical core << 36) + the
#: DRAM window + the offset (no routing bits)
CORE_SHIFT = 36


def _retarget_data(out: Path, rank: int, leaf: int, write: bool,
                   to_core: int) -> tuple[int, int]:
    """Move the first BD of ``rank``'s first ``leaf`` leg that reads (or writes) another core
    of its device to the core ``to_core`` (the same offset there): its legs.bin record and
    the BD's dma.bin record (the leg's BDs are dma_first .. dma_first + dma_count - 1,
    FORMATS §3; a write is a BD with the S2M direction bit, §5)."""
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
                return int(g), k
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
def test_a_primarys_data_on_a_rank_off_its_unit_and_cycle_is_refused(  # noqa: F811
        kr16_out, tmp_path, leaf, write, to, says):
    """FORMATS §3.3, docs/DESIGN.md "Kangaring": a primary reads its own and its
    secondaries' memory and writes there and on the next primary. kr16_out's rank 0
    (primary of [0, 4, 5, 1], next primary 2): its ``direct_recv`` copy to secondary 4's
    output moved to rank 6's, or its fan-in's read of 4's input moved to rank 2 or 6, is
    refused before the run, naming the leg. Until 2026-12-05 only the run refused them: the
    write as a race (rank 6's output written with no happens-before), the read of rank 2 as
    a mismatch of 2016 elements, the read of rank 6 as a race."""
    out = copy(kr16_out, tmp_path)
    g, k = _retarget_data(out, 0, leaf, write, to)
    rehash(out)
    # the wrong bytes are BD k's buf_ptr (until 2026-12-06 the line named legs.bin's
    # dma_first of record g, whose BD range was right)
    line = refused(out, "rank 0,", f"field buf_ptr, rank 0, artifact dma.bin, record {k}:",
                   says.format(g=g))
    if write:  # docs/SIMULATOR.md §2 quotes this line whole
        doc = " ".join((Path(__file__).parents[1] / "docs" / "SIMULATOR.md").read_text().split())
        assert line.split(": ", 1)[1] in doc


def test_a_primarys_leg_with_a_wrong_write_before_a_wrong_read_names_the_write(tmp_path):
    """The line names the leg's first wrong BD in dma.bin order, not its first wrong byte run
    (runs are sorted reads before writes). A 160000-element bf16 KANGARING all-reduce over
    16 ranks: rank 0's first fan-in (legs.bin record 3, BDs 0..14) has three tiles, each its
    four sources on cores 0, 4, 5, 1 (its unit) then its destination on core 2 (the next
    primary), FORMATS §3 / §5. Tile 0's destination (BD 4) moved to core 6 and tile 1's
    source 1 (BD 6) to core 6: BD 4, writing rank 6, is named."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 16, 160000), tmp_path / "o",
                     algo="kangaring")
    lg = legs(out, 0)
    assert lg["leaf"][3] == REDUCE_SEND_KANGARING
    assert (int(lg["dma_first"][3]), int(lg["dma_count"][3])) == (0, 15)
    path = out / "rank-0000" / "dma.bin"
    bds = np.fromfile(path, F.BD_DTYPE)
    writes = [int(bool(m & F.META_DIR_S2M)) for m in bds["meta_ctrl"][:15]]
    cores = [(int(p_) >> CORE_SHIFT) & 0x3FF for p_ in bds["buf_ptr"][:15]]
    assert writes == [0, 0, 0, 0, 1] * 3 and cores == [0, 4, 5, 1, 2] * 3
    bds["buf_ptr"][4] += np.uint64((6 - 2) << CORE_SHIFT)
    bds["buf_ptr"][6] += np.uint64((6 - 4) << CORE_SHIFT)
    bds.tofile(path)
    rehash(out)
    refused(out, "field buf_ptr, rank 0, artifact dma.bin, record 4: "
            "direct_reduce_send_kangaring leg (legs.bin record 3) of rank 0 writes rank 6: "
            "neither a secondary of its unit [0, 4, 5, 1] on channel 0 "
            "(triggers[0].kangaring[0].units) nor the next primary 2 "
            "(triggers[0].channels[0].order) (FORMATS §3.3)")


# ---------------------------------------------------------------------------- units

#: docs/TOPOLOGY.md §4's member order and primary, as the refusal words them
ORDER = ("(docs/TOPOLOGY.md §4: a unit is the ranks of s-engines k and k ^ 2 of one device, "
         "S_k then S_k^2 with one rank an engine, else S_k t0, S_k^2 t0, S_k^2 t1, S_k t1, t0 "
         "the lower TPB; on the collective's channel at place c of its ids in ascending "
         "order, member c % size is the primary, the others follow in that order)")


def _reunit(t: dict, units: list[list[int]]) -> None:
    """Give ``kangaring[0]`` ``units``, its path and channel 0's order to match (FORMATS
    §1.1), so the section agrees with itself."""
    _reunit_item(t["kangaring"][0], t["channels"][0], units)


#: kr16_out (trn2, LNC 1): rank r of device 0 has tpb r, s-engine r // 2 (docs/TOPOLOGY.md
#: §1), so its units are [0, 4, 5, 1] (S0 t0, S2 t0, S2 t1, S0 t1) and [2, 6, 7, 3]; device
#: 1's [8, 12, 13, 9] and [10, 14, 15, 11]; member 0 the primary on channel 0
KR16 = [[0, 4, 5, 1], [2, 6, 7, 3], [8, 12, 13, 9], [10, 14, 15, 11]]


@pytest.mark.parametrize("units, got, want, legs_say", [
    ([[0, 5, 4, 1], *KR16[1:]], "[0, 5, 4, 1]", "[0, 4, 5, 1]", None),
    ([[0, 4], [5, 1], *KR16[1:]], "[0, 4]", "[0, 4, 5, 1]", "recv_sema of rank 2"),
    ([[0, 4, 5, 3], [2, 6, 7, 1], *KR16[2:]], "[0, 4, 5, 3]", "[0, 4, 5, 1]",
     "peer semaphore of a secondary of its unit [0, 4, 5, 3] on channel 0, not of rank 1"),
    ([[0, 4, 5, 9], KR16[1], [8, 12, 13, 1], KR16[3]], "[0, 4, 5, 9]", "[0, 4, 5, 1]",
     "peer semaphore of a secondary of its unit [0, 4, 5, 9] on channel 0, not of rank 1"),
    ([[4, 0, 5, 1], *KR16[1:]], "[4, 0, 5, 1]", "[0, 4, 5, 1]", "rank 0 is a secondary"),
], ids=["secondaries-reordered", "split", "swapped", "swapped-across-devices",
        "secondary-named-primary"])
def test_a_unit_other_than_topologys_is_refused_from_the_ranks_s_engines(
        kr16_out, tmp_path, monkeypatch, units, got, want, legs_say):  # noqa: F811
    """docs/TOPOLOGY.md §4: a unit is the ranks of s-engines k and k ^ 2 of one device in a
    fixed member order, member c % size its primary. Each edit (the order and path made to
    match) is refused at load, naming the unit, from the ranks' ``sengine`` (not read until
    2026-12-05). Without that check the secondaries reordered simulated as a match (the
    legs do not tell secondaries apart); the others the legs' check refuses (rank 0's
    semaphores: tests/test_simulate_hier_checks.py)."""
    out = copy(kr16_out, tmp_path)
    _retrigger(out, 0, lambda t: _reunit(t, units))
    rehash(out)
    assert refused(out) == (f"{_field(out)}kangaring[0].units[0] should be {want}, the unit of "
                            f"rank {units[0][0]} with member 0 % 4 its primary on channel 0, not "
                            f"{got} {ORDER}")
    monkeypatch.setattr(engine_mod, "check_kangaring_units", lambda *a: None)
    if legs_say is None:
        assert simulate_output(out).ok
    else:
        refused(out, "rank 0,", "artifact sem.bin", legs_say)


def _swapped_units(monkeypatch):
    """``lower`` with each vnc-2 unit's members in the other order, (S_k^2, S_k): the defect
    of a primary other than docs/TOPOLOGY.md §4's (the legs follow it)."""
    real = rings_mod._units

    def swapped(topo, node, device):
        return [tuple(reversed(u)) for u in real(topo, node, device)]
    monkeypatch.setattr(rings_mod, "_units", swapped)


def test_a_primary_other_than_topologys_is_refused_though_the_legs_agree(monkeypatch, tmp_path):
    """8 ranks at LNC 2 (trn2): rank r of device 0 on s-engine r (tpb 2r, 2 TPBs an engine),
    units (0, 2), (1, 3), device 1's (4, 6), (5, 7), member 0 the primary on channel 0.
    Lowered with (2, 0) ... instead, the manifest and the legs agree, and it simulated as a
    match; the primary is refused from the s-engines, and with that check out it is a match
    again, so nothing else refuses it."""
    _swapped_units(monkeypatch)
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 1000, lnc=2), tmp_path / "o",
                     algo="kangaring")
    monkeypatch.undo()
    assert trigger0(out)["kangaring"][0]["units"] == [[2, 0], [3, 1], [6, 4], [7, 5]]
    assert refused(out) == (f"{_field(out)}kangaring[0].units[0] should be [0, 2], the unit of "
                            "rank 2 with member 0 % 2 its primary on channel 0, not [2, 0] "
                            f"{ORDER}")
    monkeypatch.setattr(engine_mod, "check_kangaring_units", lambda *a: None)
    assert simulate_output(out).ok


def test_a_hier_legs_primary_other_than_topologys_is_refused_in_positions(monkeypatch,
                                                                          tmp_path):
    """The same on KANGARING HIER legs (HIER16 at LNC 2: node 0's group, positions 0..7 =
    ranks 0..7, units (0, 2), (1, 3), (4, 6), (5, 7) on the leg's channel at place 0): its
    first leg's plan is named, in positions."""
    _swapped_units(monkeypatch)
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2), tmp_path / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring")
    monkeypatch.undo()
    plan = trigger0(out)["hier"]["legs"][0]["plans"][0]
    assert plan["kangaring"][0]["units"] == [[2, 0], [3, 1], [6, 4], [7, 5]]
    assert refused(out) == (f"{_field(out)}hier.legs[0].plans[0].kangaring[0].units[0] should be "
                            "[0, 2], the unit of position 2 with member 0 % 2 its primary on "
                            f"channel 0, not [2, 0] (ranks [2, 0]) {ORDER}")


def _reverse_items(t: dict) -> None:
    """A KANGARING trigger's ``channels`` and ``kangaring`` items listed the other way round
    (FORMATS §1.1 lists each channel once and fixes no order)."""
    t["channels"].reverse()
    t["kangaring"].reverse()


def test_a_kangaring_section_listed_in_another_order_is_read_by_channel_id(kr8_out, tmp_path):
    """docs/TOPOLOGY.md §4: the primary of a unit on the collective's channel c is member
    c % size, c the channel's id (a flat trigger's from 0). kr8_out (two channels, units
    (0, 2) ... with member 0 first on channel 0, (2, 0) ... on channel 1) with both lists
    reversed is the same output: it simulated as a refusal (`kangaring[0].units[0] [2, 0]
    is not [0, 2] ...`: c was the item's place in the list) and is a match."""
    out = copy(kr8_out, tmp_path)
    _retrigger(out, 0, _reverse_items)
    rehash(out)
    t = trigger0(out)
    assert [c["channel"] for c in t["channels"]] == [1, 0]
    assert t["kangaring"][0]["units"][0] == [2, 0]
    assert simulate_output(out).ok


def test_channels_whose_primaries_are_swapped_are_refused_whatever_the_lists_order(
        monkeypatch, tmp_path):
    """Lowered with channel 0's units and channel 1's swapped (channel 0's primaries member
    1: (2, 0), ...; channel 1's member 0: (0, 2), ...), the legs agreeing, and the items
    listed channel 1 first: it simulated as a match, as the first item was taken for place
    0. Channel 1's unit (0, 2) is refused: member 1 % 2, rank 2, is its primary."""
    real = rings_mod._kangaring_paths

    def swapped(topo, group, n):
        paths = list(real(topo, group, n))
        paths[0], paths[1] = (replace(paths[1], channel=0), replace(paths[0], channel=1))
        return tuple(paths)
    monkeypatch.setattr(rings_mod, "_kangaring_paths", swapped)
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 1_100_000, lnc=2), tmp_path / "o",
                     algo="kangaring")
    monkeypatch.undo()
    assert [k["units"][0] for k in trigger0(out)["kangaring"]] == [[2, 0], [0, 2]]
    _retrigger(out, 0, _reverse_items)
    rehash(out)
    assert refused(out) == (f"{_field(out)}kangaring[0].units[0] should be [2, 0], the unit of "
                            "rank 0 with member 1 % 2 its primary on channel 1, not [0, 2] "
                            f"{ORDER}")


def _retopo(out: Path, fn) -> None:
    path = out / "manifest.json"
    top = json.loads(path.read_text())
    fn(top["topology"]["ranks"])
    path.write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rehash(out)


#: docs/TOPOLOGY.md §1's formula and the platform of kr8_out and kr16_out (lowered on the
#: default topology), as a refusal of a rank's place names them
TRN2_AT = ("(docs/TOPOLOGY.md §1: rank = node x ranks_per_node + device x ranks_per_device + "
           "logical_core; trn2 at lnc_size {}, the platform of options.topology null (the "
           "default, trn2))")
#: the same for a row's s-engine, whose rule is its own
SENGINE_AT = ("(docs/TOPOLOGY.md §1: sengine = tpb // tpbs_per_sengine; trn2 at lnc_size {}, "
              "the platform of options.topology null (the default, trn2))")


@pytest.mark.parametrize("fixture, rank, sengine, says", [
    ("kr8_out", 1, 3, "rank 1: sengine should be 1, tpb 2 // 2 (2 TPBs an s-engine), not 3 "
     + SENGINE_AT.format(2)),
    ("kr16_out", 5, 3, "rank 5: sengine should be 2, tpb 5 // 2 (2 TPBs an s-engine), not 3 "
     + SENGINE_AT.format(1)),
])
def test_a_sengine_other_than_its_tpbs_is_refused(request, tmp_path, fixture, rank, sengine,
                                                  says):
    """docs/TOPOLOGY.md §1: a rank's s-engine owns its first TPB, tpb // tpbs_per_sengine
    (trn2: 2 TPBs an engine; kr8_out: LNC 2, kr16_out: LNC 1). A rank's ``sengine`` edited
    was not read; it is refused naming the row (since 2026-12-05 evening by the check of
    every rank's place against the preset, before the KANGARING units: until then by
    check_kangaring_units, `... (the s-engine of its first TPB, tpb // tpbs_per_sengine: its
    device's 4 s-engines hold 1 rank each in the units of triggers[0].kangaring: ...)`,
    which test_simulate_rank_places.py still reaches through a topology file's table)."""
    out = copy(request.getfixturevalue(fixture), tmp_path)
    _retopo(out, lambda ranks: ranks[rank].__setitem__("sengine", sengine))
    assert refused(out) == f"{_field(out, f'topology.ranks[{rank}].sengine')}{says}"


def test_a_tpb_other_than_its_logical_cores_is_refused(kr8_out, tmp_path):  # noqa: F811
    """docs/TOPOLOGY.md §1: a logical core of LNC 2 covers TPBs 2 lc and 2 lc + 1, its
    ``tpb`` the first; checked for every rank of every output (was not read)."""
    out = copy(kr8_out, tmp_path)
    _retopo(out, lambda ranks: ranks[1].__setitem__("tpb", 3))
    assert refused(out) == (f"{_field(out, 'topology.ranks[1].tpb')}rank 1: tpb should be "
                            "logical_core 1 x lnc_size 2 = 2, the first TPB of its logical "
                            "core, not 3 (docs/TOPOLOGY.md §1)")


def test_a_device_the_group_holds_only_part_of_is_refused(kr8_out, tmp_path):  # noqa: F811
    """docs/TOPOLOGY.md §4: KangaRing needs every rank of each device it touches, 4 s-engines
    of 1 or 2 ranks. kr8_out's rank 3 moved to logical core 4 (tpb 8) of device 0: the group
    holds its cores 0, 1, 2, 4, no whole device.  Since 2026-12-05 evening refused before
    that, by docs/TOPOLOGY.md §1: trn2 at LNC 2 has 4 ranks a device, so rank 3 is logical
    core 3 % 4 = 3 (test_simulate_rank_places.py reaches the units' check through a
    topology file's table)."""
    out = copy(kr8_out, tmp_path)
    _retopo(out, lambda ranks: ranks[3].update(logical_core=4, tpb=8))
    assert refused(out) == (f"{_field(out, 'topology.ranks[3].logical_core')}rank 3: "
                            "logical_core should be 3, 3 % 4 (4 ranks a device), not 4 "
                            + TRN2_AT.format(2))


# ---------------------------------------------------------------------------- duplicate

#: A custom trn2 node of 4 devices, each linked to every other, with three device cycles
#: (docs/TOPOLOGY.md §2, "device_cycles"): ring channel variants C0, C1, C2 forward, then
#: the three reversed (docs/TOPOLOGY.md §4: channel c walks variant c of them)
K4 = {"format": "nrtrewrite-topology/1", "platform": "trn2", "devices_per_node": 4,
      "links": [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]],
      "device_cycles": [[0, 1, 2, 3], [0, 2, 1, 3], [0, 1, 3, 2]]}


def test_lower_writes_a_duplicate_kangaring_channel_that_simulates(tmp_path):
    """docs/TOPOLOGY.md §4: ``duplicate`` marks a channel whose primaries form an earlier
    channel's directed cycle with the same units. On K4, a group of devices 0, 1, 2 (ranks
    0..11 at LNC 2; units (0, 2), (1, 3) on device 0, (4, 6), (5, 7), (8, 10), (9, 11)) of 4
    channels (1.2 MB of bf16: 256 KiB a channel, at most 4 within a node): channel 0 walks
    C0's order of them, 0, 1, 2, with member 0 primary; channel 2 C2's, 0, 1, 2 too
    (device 3 left out), member 2 % 2 = 0 primary, so the same cycle and units, a
    duplicate; channel 1 (C1: 0, 2, 1, member 1) and 3 (C0 reversed, member 1) are not.
    ``lower`` writes it (no preset topology makes one), and it simulates as a match."""
    topo = tmp_path / "k4.json"
    topo.write_text(json.dumps(K4))
    out = lower_spec(coll_spec("all_reduce", "bf16", 12, 600_000, lnc=2), tmp_path / "o",
                     algo="kangaring", topology=str(topo))
    zero = [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11]]
    assert [(k["channel"], k["units"], k["duplicate"]) for k in trigger0(out)["kangaring"]] == [
        (0, zero, False),
        (1, [[2, 0], [3, 1], [10, 8], [11, 9], [6, 4], [7, 5]], False),
        (2, zero, True),
        (3, [[11, 9], [10, 8], [7, 5], [6, 4], [3, 1], [2, 0]], False)]
    res = simulate_output(out)
    assert res.ok, res.error


def test_a_kangaring_trigger_listing_other_than_one_channel_per_chunk_channel_is_refused(
        kr8_out, tmp_path):
    """FORMATS §1.1: a RING or KANGARING trigger lists one ``channels`` item per chunk
    channel. kr8_out (1,100,000 bf16 elements over 8 ranks, two channels: chunk.channels 2,
    chunk_size_n 68768, 8 x 2 x 68768 = 1,100,288 elements a chunk group) given
    chunk.channels 1 with the chunk doubled, 137536 (8 x 137536 = 1,100,288 still), tail
    1,100,000 / 8 = 137500, a layout that holds, simulated as a match; it is refused."""
    out = copy(kr8_out, tmp_path)
    assert trigger0(out)["chunk"] == {"channels": 2, "chunk_size_n": 68768, "pgta": 1,
                                      "tail_chunk": 68750}
    _retrigger(out, 0, lambda t: t["chunk"].update(channels=1, chunk_size_n=137536,
                                                   tail_chunk=137500))
    rehash(out)
    assert refused(out) == (f"{_field(out)}channels should list the 1 channel chunk.channels "
                            "1 asks for, not 2 (a KANGARING trigger lists one per chunk channel)")


# ---------------------------------------------------------------- a flat KANGARING leg's half, step
@pytest.fixture(scope="module")
def kr4000_out(tmp_path_factory) -> Path:
    """A bf16 KANGARING all-reduce of 4000 elements over ranks 0..15 at LNC 2 (docs/DESIGN.md
    "Kangaring"): one channel whose cycle of primaries is [0, 1, 4, 5, 8, 9, 12, 13], units of
    a primary and its cross-die secondary; the trigger chunks as the ring (DESIGN "Leg
    layouts"): 4000 / 16 = 250 elements a chunk position (one chunk group, tail_chunk 250),
    halves of 125 (FORMATS §3)."""
    from irsim import ar, collective_spec
    out = lower_spec(collective_spec([ar(4000)], 16, lnc=2),
                     tmp_path_factory.mktemp("kr4000") / "o", algo="kangaring")
    t = json.loads((out / "manifest.json").read_text())["triggers"][0]
    assert t["channels"] == [{"channel": 0, "order": [0, 1, 4, 5, 8, 9, 12, 13]}]
    assert t["kangaring"][0]["units"] == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11],
                                          [12, 14], [13, 15]]
    assert t["chunk"] == {"channels": 1, "chunk_size_n": 256, "pgta": 1, "tail_chunk": 250}
    return out


def _set_leg_byte(out: Path, rank: int, leaf: int, start: int, offset: int, mask: int) -> int:
    """XOR byte ``offset`` of ``rank``'s legs.bin record of ``leaf`` starting at element
    ``start`` (FORMATS §3: leaf at 12, elem_start at 48) with ``mask``; re-hash; its index."""
    p = out / f"rank-{rank:04d}" / "legs.bin"
    L = np.fromfile(p, F.LEG_DTYPE)
    rec = int(np.flatnonzero((L["leaf"] == leaf) & (L["elem_start"] == start))[0])
    b = bytearray(p.read_bytes())
    b[64 * rec + offset] ^= mask
    p.write_bytes(bytes(b))
    rehash(out)
    return rec


def test_a_kangaring_legs_half_is_the_half_chunk_its_elements_sit_in(kr4000_out, tmp_path):
    """FORMATS §3 ``half`` (byte 13): rank 0's direct_reduce_send_kangaring (leaf 10) of
    member 13's chunk [3250, 3500), its H1 [3375, 3500), said 0: the other half, in range,
    simulated as a match until 2026-12-07 (SIMULATOR §7 had it range-checked only)."""
    out = copy(kr4000_out, tmp_path)
    rec = _set_leg_byte(out, 0, 10, 3375, 13, 1)
    assert refused(out) == (
        f"{out / 'rank-0000'}: field half, rank 0, artifact legs.bin, record {rec}: half "
        "should be 1, not 0: elements [3375, 3500) are half 1 of their chunk (a KANGARING "
        "trigger chunks as the ring: docs/DESIGN.md \"Leg layouts\")")


@pytest.mark.parametrize("leaf,start,name,mask,hops,step", [
    # step u - 1 - i = 0 sends (reducing the unit's inputs) the chunks of the unit 7 hops
    # ahead on the cycle of u = 8, [13, 15]: member 15's [3750, 4000), H0 [3750, 3875)
    (10, 3750, "direct_reduce_send_kangaring", 1, 7, 0),
    # the all-gather phase moves that unit's chunks on at step 2u - 1 - 7 = 8
    (6, 3750, "direct_recv_send", 2, 7, 8),
    # the own unit [0, 2] at step u - 1 = 7: recv_reduce_copy of member 2's [500, 750)
    (3, 500, "recv_reduce_copy", 4, 0, 7),
])
def test_a_kangaring_legs_ring_step_is_the_ring_template_over_its_units(
        kr4000_out, tmp_path, leaf, start, name, mask, hops, step):
    """FORMATS §3 ``ring_step`` (u32 at 60): docs/DESIGN.md "Kangaring": per channel and
    chunk group the primary runs the ring's step template (seed 001 §4) over the cycle of
    units, one leg per member of a unit step, so a leg's step is the ring's over the 8 units
    for the unit holding its chunk's member, and a group's steps are 2u - 1 = 15. A bit
    flipped simulated as a match until 2026-12-07."""
    out = copy(kr4000_out, tmp_path)
    rec = _set_leg_byte(out, 0, leaf, start, 60, mask)
    assert refused(out) == (
        f"{out / 'rank-0000'}: field ring_step, rank 0, channel 0, artifact legs.bin, record "
        f"{rec}: ring_step should be {step}, the kangaring schedule's, not {step ^ mask}: "
        f"{name} of elements [{start}, {start + 125}) moves the chunk of a member of the unit "
        f"{hops} hop{'s' if hops != 1 else ''} ahead on the channel's cycle of 8 units: step "
        f"{step} of chunk group 0 (15 steps a group on this channel) (docs/DESIGN.md "
        "\"Kangaring\": the ring's step template over the units, seed 001 §4; FORMATS §3)")
