"""Tests written by the mutation audit of the thirty-eighth session's code (``git diff
2a59705..0950f16``): each kills a hand-made mutant of a check that no test held, with
values worked out from the docs (DESIGN, FORMATS, TOPOLOGY, SIMULATOR), not read back from
``lower``."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrtrewrite.simulate import simulate_output
from test_simulate import coll_spec, lower_spec
from test_simulate_hier_checks import (  # noqa: F401 (fixtures)
    _reunit, hier16k_out, kr8_out, legs_alone)
from test_simulate_kick_leaf import _rehier, _retrigger, copy, refused, rehash, trigger0

#: docs/TOPOLOGY.md §4 on trn2 at LNC 2 (4 ranks a device, 64 a node): devices 2 and 3 of
#: node 0 (ranks 8..15) and devices 18 and 19 of node 1 (ranks 72..79); positions differ
#: from ranks in every group
HIER16_HIGH = list(range(8, 16)) + list(range(72, 80))


@pytest.fixture(scope="module")
def hier16k_high_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over HIER16_HIGH, both intra legs KANGARING. Node
    0's group is ranks 8..15, positions 0..7; a rank's s-engine is r % 4 (LNC 2), a unit
    the two ranks of s-engines {k, k ^ 2} of a device (TOPOLOGY §4, vnc 2), primary member
    0 on channel 0: units (positions) [0, 2], [1, 3], [4, 6], [5, 7], the order their
    primaries [0, 1, 4, 5]; intra_redsct is leg 0, on channel 0 (DESIGN "HIER")."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16_HIGH, 1000, lnc=2),
                     tmp_path_factory.mktemp("hier16kh") / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring")
    t = trigger0(out)
    leg = t["hier"]["legs"][0]
    assert (leg["name"], leg["algorithm"]) == ("intra_redsct", "KANGARING")
    assert [g["group"] for g in leg["groups"]] == [HIER16_HIGH[:8], HIER16_HIGH[8:]]
    (plan,) = leg["plans"]
    assert plan["channels"] == [{"channel": 0, "order": [0, 1, 4, 5]}]
    assert plan["kangaring"][0]["units"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    return out


def test_a_kangaring_hier_leg_of_groups_not_at_rank_0_is_held_to_its_legs(
        hier16k_high_out, tmp_path):
    """A KANGARING HIER leg's units are positions in each group: the peer check maps them
    to the group's ranks (``TriggerSpec.kangaring_unit``). As lowered it simulates as a
    match; its units reordered to [0, 2], [4, 6], [1, 3], [5, 7] (order [0, 4, 1, 5], the
    path to match) are refused at rank 8 (position 0), whose fan-in signals rank 9
    (position 1) where the order says position 4, rank 12. A check reading the units as
    ranks found no unit for any rank of these groups, and the edit simulated as a match."""
    assert simulate_output(hier16k_high_out).ok
    out = copy(hier16k_high_out, tmp_path)
    units = [[0, 2], [4, 6], [1, 3], [5, 7]]
    _rehier(out, lambda legs: _reunit(legs[0]["plans"][0]["kangaring"][0],
                                      legs[0]["plans"][0]["channels"][0], units))
    refused(out, "rank 8,", "artifact sem.bin", "increments recv_sema of rank 9: the next "
            "primary of channel 0 is 12 (triggers[0].hier.legs[0].plans[0].channels[0].order)")


#: docs/TOPOLOGY.md §4 on trn2 at LNC 2: two ranks of each node of two nodes, 8 a node
HIER16 = list(range(8)) + list(range(64, 72))


@pytest.fixture(scope="module")
def hier16k2_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1,100,000 elements over HIER16, both intra legs KANGARING: 2.2 MB,
    so two channels on intra_redsct (as the flat kr8 all-reduce of test_simulate_hier_checks:
    docs/DESIGN.md "Channels"), ids 0 and 1 (leg 0). Units as a vnc-2 KANGARING's, primary
    member c % 2 on channel c: channel 0 [0, 2], [1, 3], [4, 6], [5, 7] (order [0, 1, 4, 5]),
    channel 1 [2, 0], [3, 1], [6, 4], [7, 5] (order [2, 3, 6, 7])."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1_100_000, lnc=2),
                     tmp_path_factory.mktemp("hier16k2") / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring")
    (plan,) = trigger0(out)["hier"]["legs"][0]["plans"]
    assert plan["channels"] == [{"channel": 0, "order": [0, 1, 4, 5]},
                                {"channel": 1, "order": [2, 3, 6, 7]}]
    assert [k["units"] for k in plan["kangaring"]] == [[[0, 2], [1, 3], [4, 6], [5, 7]],
                                                       [[2, 0], [3, 1], [6, 4], [7, 5]]]
    return out


def test_a_kangaring_hier_legs_second_channel_is_held_to_its_own_units(hier16k2_out, tmp_path):
    """The peer check reads each channel's own ``kangaring`` item: intra_redsct's channel 1
    units reordered to [2, 0], [6, 4], [3, 1], [7, 5] (order [2, 6, 3, 7], the path to match)
    are refused at rank 2, channel 1's first primary, whose fan-in signals rank 3 where the
    order says 6. Ranks 0 and 1 are secondaries on channel 1 and signal their primaries 2 and
    3, as their units say. (A check that took channel 0's units for channel 1 saw rank 2 as
    a secondary of [0, 2].)"""
    assert simulate_output(hier16k2_out).ok
    out = copy(hier16k2_out, tmp_path)
    units = [[2, 0], [6, 4], [3, 1], [7, 5]]
    _rehier(out, lambda legs: _reunit(legs[0]["plans"][0]["kangaring"][1],
                                      legs[0]["plans"][0]["channels"][1], units))
    refused(out, "rank 2,", "artifact sem.bin", "increments recv_sema of rank 3: the next "
            "primary of channel 1 is 6 (triggers[0].hier.legs[0].plans[0].channels[1].order)")


def test_a_kangaring_leg_plan_that_differs_only_in_its_units_is_no_repeat(hier16k_out,
                                                                          tmp_path,
                                                                          legs_alone):
    """FORMATS §1.1: a leg's plans are its groups' distinct plans; a plan is its channels,
    chunk and engine section, so two plans that differ only in their ``kangaring`` units
    are two plans. intra_redsct given a second plan whose units trade secondaries, [0, 3],
    [1, 2], [4, 6], [5, 7] (the same primaries, so the same order [0, 1, 4, 5]; the path to
    match), listed first and run by group 1 (ranks 64..71), the lowered plan second and run
    by group 0: not a repeat of the lowered one, and held to group 1's legs: rank 64
    (position 0) signals its secondary rank 66 (position 2), where plans[0]'s unit is
    positions [0, 3], ranks [64, 67]; the key names plans[0], the plan group 1 runs. (Since
    2026-12-05 such units, other than docs/TOPOLOGY.md §4's, are refused first from the
    ranks' s-engines; ``legs_alone`` takes that check out, to reach the legs'.)"""
    out = copy(hier16k_out, tmp_path)
    units = [[0, 3], [1, 2], [4, 6], [5, 7]]

    def edit(legs):
        leg = legs[0]
        lowered = leg["plans"][0]
        other = {**lowered, "channels": [dict(c) for c in lowered["channels"]],
                 "kangaring": [dict(k) for k in lowered["kangaring"]]}
        _reunit(other["kangaring"][0], other["channels"][0], units)
        assert other["channels"] == lowered["channels"]
        leg["plans"] = [other, lowered]
        leg["groups"][0]["plan"], leg["groups"][1]["plan"] = 1, 0
    _rehier(out, edit)
    refused(out, "rank 64,", "artifact sem.bin", "of primary 64 should increment the peer "
            "semaphore of a secondary of its unit [64, 67] on channel 0, not of rank 66 "
            "(triggers[0].hier.legs[0].plans[0].kangaring[0].units; FORMATS §3.3)")


def test_a_kangaring_leg_plan_run_by_group_1_only_is_named_with_that_group(hier16k_out,
                                                                           tmp_path):
    """_check_kangaring runs once per group that runs the plan, naming that group: a second
    intra_redsct plan listed first, run by group 1 only, whose last unit lacks position 7,
    is refused naming hier.legs[0].groups[1] (the lowered plan, run by group 0, is
    whole)."""
    out = copy(hier16k_out, tmp_path)

    def edit(legs):
        leg = legs[0]
        lowered = leg["plans"][0]
        other = {**lowered, "kangaring": [dict(k) for k in lowered["kangaring"]]}
        other["kangaring"][0]["units"] = [[0, 2], [1, 3], [4, 6], [5]]
        leg["plans"] = [other, lowered]
        leg["groups"][0]["plan"], leg["groups"][1]["plan"] = 1, 0
    _rehier(out, edit)
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[0]: hier.legs[0].plans[0].kangaring[0].units "
        "lacks position 7 (the units of a KANGARING channel hold each position of "
        "hier.legs[0].groups[1].group of 8 ranks once: docs/TOPOLOGY.md §4)")


@pytest.fixture(scope="module")
def hier16_out(tmp_path_factory) -> Path:
    """As test_simulate_hier_checks' hier16_out: the default policy's legs intra_redsct
    RING, inter_allr SINGLE_CYCLE_RING with two plans (one a group), each on its CW and
    CCW channels 1 and 2, intra_allg RING on channel 3 (DESIGN "HIER": each leg's ids after
    those of the legs before it)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2),
                     tmp_path_factory.mktemp("hier16") / "o", algo=None)
    legs = trigger0(out)["hier"]["legs"]
    assert [[[c["channel"] for c in plan["channels"]] for plan in leg["plans"]]
            for leg in legs] == [[[0]], [[1, 2], [1, 2]], [[3]]]
    return out


def test_a_channel_of_an_earlier_legs_two_plans_is_named_at_its_first_plan(hier16_out,
                                                                           tmp_path):
    """docs/DESIGN.md "HIER": the legs of one trigger use disjoint channel ids. intra_allg's
    channel 3 set to 1, which both plans of inter_allr list, is refused naming the first
    item that lists it, hier.legs[1].plans[0].channels[0]."""
    out = copy(hier16_out, tmp_path)
    _rehier(out, lambda legs: legs[2]["plans"][0]["channels"][0].__setitem__("channel", 1))
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[0]: hier.legs[2].plans[0].channels[0].channel "
        "1 is hier.legs[1].plans[0].channels[0]'s too (the legs of one trigger use disjoint "
        "channel ids, so a rank still in one leg never consumes an increment a faster peer "
        "meant for its next: docs/DESIGN.md \"HIER\")")


def test_a_kangaring_section_of_fewer_items_than_channels_is_refused(kr8_out, tmp_path):
    """FORMATS §1.1: one kangaring item per channel. kr8_out's second item dropped leaves
    channel 1 without units: refused naming both counts."""
    out = copy(kr8_out, tmp_path)
    _retrigger(out, 0, lambda t: t["kangaring"].pop())
    rehash(out)
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[0]: kangaring should list 2 items, one per "
        "channel of channels, not 1 (a KANGARING trigger lists one kangaring item per channel, "
        "in the order of its channels: FORMATS §1.1)")


def test_a_kangaring_channel_rotating_an_earlier_ones_cycle_is_a_duplicate(kr8_out, tmp_path):
    """docs/TOPOLOGY.md §4: ``duplicate`` marks a channel whose primaries form the same
    directed cycle as an earlier channel's, with the same units; a cycle has no first unit,
    so channel 0's units started at its second unit, [1, 3], [4, 6], [5, 7], [0, 2] (order
    [1, 4, 5, 0], the path to match), given to channel 1 are channel 0's cycle: its
    ``duplicate`` false is refused, naming kangaring[0]."""
    out = copy(kr8_out, tmp_path)
    units = [[1, 3], [4, 6], [5, 7], [0, 2]]
    _retrigger(out, 0, lambda t: _reunit(t["kangaring"][1], t["channels"][1], units))
    rehash(out)
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[0]: kangaring[1].duplicate should be true, not "
        "false: its primaries form the directed cycle of kangaring[0]'s, with the same units "
        "(docs/TOPOLOGY.md §4)")


def test_a_hier_reduce_scatters_inter_leg_buffer_off_designs_offset_is_refused(tmp_path):
    """docs/DESIGN.md "HIER" places the inter leg's views alike for an all-reduce's
    inter_allr and a reduce-scatter's inter_redsct: its input MID at one space of scratch,
    its RECV at two. A bf16 reduce-scatter of 1600 elements over HIER16 (a space 3200
    bytes): inter_redsct lists gw 0, in 3200 and recv 6400; its recv moved onto MID is
    refused naming the key and DESIGN's place."""
    out = lower_spec(coll_spec("reduce_scatter", "bf16", HIER16, 1600, lnc=2), tmp_path / "o",
                     algo=None)
    legs = trigger0(out)["hier"]["legs"]
    assert legs[1]["name"] == "inter_redsct"
    assert [(b["role"], b["region"], b["offset"]) for b in legs[1]["buffers"]] == [
        ("gw", "gw", 0), ("in", "scratch", 3200), ("recv", "scratch", 6400)]
    assert simulate_output(out).ok
    _rehier(out, lambda legs: legs[1]["buffers"][2].update(offset=3200))
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[0]: hier.legs[1].buffers[2] (role recv) "
        'should be {"offset": 6400, "region": "scratch"}, not {"offset": 3200, "region": '
        '"scratch"} '
        "(docs/DESIGN.md \"HIER\": in scratch the first leg's RECV at 0, MID at one space, the "
        "inter leg's RECV at two and a single-cycle leg's second at three; in gw the staging at "
        "0 and a single-cycle leg's second at one; a space is the trigger's 1600 BF16 "
        "elements, 3200 bytes)")
