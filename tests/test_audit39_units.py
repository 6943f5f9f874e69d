"""The mutation audit's KANGARING unit survivors (``check_kangaring_units``,
docs/TOPOLOGY.md §1, §4): a device of two ranks, the s-engine of a device's first and last
core, a unit after the first, and a HIER leg's plan shared by two groups refused for the
second group. Expected units and ranks are worked out from TOPOLOGY.md, not read back."""

from __future__ import annotations

import pytest

from test_simulate import assert_clean, cli, coll_spec, lower_spec
from test_simulate_hier_checks import (  # noqa: F401  (fixtures)
    HIER16, hier16_out, kr8_out, kr16_out)
from test_simulate_kangaring_units import (
    KR16, ORDER, SENGINE_AT, TRN2_AT, _field, _retopo, _reunit,
)
from test_simulate_kick_leaf import (
    OLDER_HIER, _rehier, _retrigger, copy, refused, refused_as_older, rehash, trigger0)

#: the end of the whole-device refusal, the device's cores (a JSON list) in its ``{}``
WHOLE = ("should be 0 to 3 or 0 to 7, not {} (KangaRing needs every rank of each device it "
         "touches: 4 s-engines of 1 or 2 ranks each, docs/TOPOLOGY.md §4)")


def test_a_device_of_two_of_the_groups_ranks_is_refused(kr8_out, tmp_path):  # noqa: F811
    """kr8_out (LNC 2, device 0 ranks 0..3 on logical cores 0..3): ranks 2 and 3 moved to
    device 2 (same cores) leave device 0 two ranks, cores 0 and 1: no whole device (4
    s-engines need 4 or 8 ranks), though they are cores 0 up to 1.  Since 2026-12-05 evening
    refused before that: on trn2 device 0's routing id is 0 (docs/TOPOLOGY.md §1, a preset's
    routing id is its device index), and rank 2's row still says device 0."""
    out = copy(kr8_out, tmp_path)

    def edit(ranks):
        for r in (2, 3):
            ranks[r]["routing_id"] = 2
    _retopo(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[2].routing_id')}rank 2: routing_id "
                            "should be 0, the routing id of device 0, not 2 (docs/TOPOLOGY.md "
                            "§1; trn2 at lnc_size 2, the platform of options.topology null (the "
                            "default, trn2))")


@pytest.mark.parametrize("rank, sengine, want, tpb", [(0, 1, 0, 0), (3, 0, 3, 6)],
                         ids=["first-core", "last-core"])
def test_the_sengine_of_a_devices_first_and_last_core_is_checked(kr8_out, tmp_path, rank,
                                                                 sengine, want, tpb):  # noqa: F811
    """TOPOLOGY §1 at LNC 2, one rank an s-engine: logical core lc is tpb 2 lc, s-engine
    2 lc // 2 = lc. Rank 0 (core 0) and rank 3 (core 3, the device's last) are checked as
    rank 1 is (test_a_sengine_other_than_its_tpbs_is_refused; since 2026-12-05 evening by
    the check of every rank's place, before the units')."""
    out = copy(kr8_out, tmp_path)
    _retopo(out, lambda ranks: ranks[rank].__setitem__("sengine", sengine))
    assert refused(out) == (
        f"{_field(out, f'topology.ranks[{rank}].sengine')}rank {rank}: sengine should be {want}, "
        f"tpb {tpb} // 2 (2 TPBs an s-engine), not {sengine} " + SENGINE_AT.format(2))


def test_a_unit_after_the_first_is_checked(kr16_out, tmp_path):  # noqa: F811
    """kr16_out's second unit [2, 6, 7, 3] (S1 t0, S3 t0, S3 t1, S1 t1) with its secondaries
    reordered, [2, 7, 6, 3], the order and path to match: refused naming units[1]."""
    out = copy(kr16_out, tmp_path)
    _retrigger(out, 0, lambda t: _reunit(t, [KR16[0], [2, 7, 6, 3], *KR16[2:]]))
    rehash(out)
    assert refused(out) == (f"{_field(out)}kangaring[0].units[1] should be [2, 6, 7, 3], the "
                            "unit of rank 2 with member 0 % 4 its primary on channel 0, not [2, "
                            f"7, 6, 3] {ORDER}")


def test_a_hier_legs_plan_shared_by_two_groups_is_named_for_the_second_group(tmp_path):
    """HIER16 at LNC 2 with both intra legs KANGARING: node 0's and node 1's groups run the
    one plan 0 of each leg (units in positions [0, 2], [1, 3], [4, 6], [5, 7]). Node 1's
    ranks 64 and 65 trade places (64 on logical core 1: tpb 2, s-engine 1; 65 on core 0:
    tpb 0, s-engine 0), so TOPOLOGY §4's units of node 1's device 0 are (65, 66), S0 and S2,
    and (64, 67), S1 and S3: the plan's unit [0, 2] is ranks [64, 66] there, where the unit
    of position 0 (rank 64) is [0, 3]. Refused naming the plan the group runs, plans[0]
    until 2026-12-05 evening; since then before, by docs/TOPOLOGY.md §1 (trn2 at LNC 2: 4
    ranks a device, rank 64 logical core 64 % 4 = 0), naming rank 64's row, the world's 9th:
    a table whose rows follow §1 makes every node's devices alike, so no plan right for
    node 0's group is wrong for node 1's any more."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2), tmp_path / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring")
    leg = trigger0(out)["hier"]["legs"][0]
    assert [(g["group"][0], g["plan"]) for g in leg["groups"]] == [(0, 0), (64, 0)]
    assert leg["plans"][0]["kangaring"][0]["units"] == [[0, 2], [1, 3], [4, 6], [5, 7]]

    def edit(ranks):
        row = {r["rank"]: r for r in ranks}
        row[64].update(logical_core=1, tpb=2, sengine=1)
        row[65].update(logical_core=0, tpb=0, sengine=0)
    _retopo(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[8].logical_core')}rank 64: "
                            "logical_core should be 0, 64 % 4 (4 ranks a device), not 1 "
                            + TRN2_AT.format(2))


def test_a_single_cycle_view_on_a_kangaring_hier_leg_says_lower_the_model_again(tmp_path):
    """FORMATS §1.1: only a single-cycle HIER leg lists ``recv2`` and ``gw2``; the older
    outputs' refusal (an nrtrewrite before 2026-12-05 listed them on every leg) holds for a
    KANGARING leg as for a RING one (test_a_single_cycle_view_on_another_hier_leg_says_
    lower_the_model_again): status 2, naming the leg's algorithm."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2), tmp_path / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring")
    legs = _rehier(out, lambda legs: legs[0]["buffers"].append(
        {"offset": 2000, "region": "gw", "role": "gw2"}))
    assert legs[0]["algorithm"] == "KANGARING"
    n = len(legs[0]["buffers"])  # (the appended entry's index)
    assert refused_as_older(out) == (f"{_field(out)}hier.legs[0].buffers[{n}].role \"gw2\" is on "
                                     f"a KANGARING leg {OLDER_HIER}")


def test_a_four_member_units_primary_on_channel_1_is_followed_by_the_others_in_order(
        tmp_path):
    """TOPOLOGY §4 at LNC 1 (kr16_out's units, [0, 4, 5, 1] ...): on the collective's
    channel 1 the primary is member 1 % 4, rank 4, and the others follow in member order,
    [4, 0, 5, 1] (not rotated, [4, 5, 1, 0]). A 16-rank bf16 all-reduce of 2,200,000
    elements (4.4 MB) runs two channels, order [0, 2, 8, 10] then [4, 6, 12, 14]: it
    simulates as a match."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 16, 2_200_000), tmp_path / "o",
                     algo="kangaring")
    t = trigger0(out)
    assert [c["order"] for c in t["channels"]] == [[0, 2, 8, 10], [4, 6, 12, 14]]
    assert t["kangaring"][1]["units"] == [[4, 0, 5, 1], [6, 2, 7, 3], [12, 8, 13, 9],
                                          [14, 10, 15, 11]]
    assert_clean(out)


def test_a_kangaring_hier_leg_on_a_later_channel_takes_its_place_among_its_ids(tmp_path):
    """HIER16 at LNC 2, both intra legs KANGARING: intra_allg's one channel is id 3 (after
    intra_redsct's 0 and inter_allr's 1, 2), its place 0 among its leg's ids, so member 0
    is primary ([0, 2] ..., not member 3 % 2); with the single-cycle inter leg between them
    the output simulates as a match."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2), tmp_path / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring")
    leg = trigger0(out)["hier"]["legs"][2]
    assert (leg["name"], leg["channel_base"]) == ("intra_allg", 3)
    assert leg["plans"][0]["kangaring"][0]["units"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert_clean(out)


def test_a_relabelled_single_cycle_hier_trigger_with_buffers_is_refused_for_single_cycle(
        hier16_out, tmp_path):  # noqa: F811
    """docs/CLI.md: every type before any value. hier16_out's trigger relabelled
    SINGLE_CYCLE_RING and given a well-typed ``buffers`` still lacks ``single_cycle``, which
    such a trigger always has (FORMATS §1.1): status 2 naming it, not the status-1 refusal
    of its hier section (the relabelled test without ``buffers`` stops at that key first)."""
    out = copy(hier16_out, tmp_path)

    def relabel(t):
        t["algorithm"] = "SINGLE_CYCLE_RING"
        t["buffers"] = []
    _retrigger(out, 0, relabel)
    rehash(out)
    res = cli("simulate", out)
    assert res.exit_code == 2, res.output
    assert res.stderr == (f"nrtrewrite: error: {out / 'manifest.json'}: field "
                          "triggers[0].single_cycle: missing\n")


def test_a_device_of_twelve_of_the_groups_ranks_is_refused(kr16_out, tmp_path):  # noqa: F811
    """kr16_out (LNC 1, 8 ranks a device): ranks 8 .. 11 moved onto device 0 as logical
    cores 8 .. 11 (tpb the same at LNC 1) leave it 12 ranks, cores 0 up to 11: 4 s-engines
    hold 1 or 2 ranks each, 4 or 8 ranks, so no KANGARING device holds 12.  Since
    2026-12-05 evening refused before that, by docs/TOPOLOGY.md §1: trn2 at LNC 1 has 8
    ranks a device, so rank 8 is logical core 8 % 8 = 0 (of device 1)."""
    out = copy(kr16_out, tmp_path)

    def edit(ranks):
        row = {r["rank"]: r for r in ranks}
        for r in (8, 9, 10, 11):
            row[r].update(routing_id=0, logical_core=r, tpb=r)
    _retopo(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[8].logical_core')}rank 8: "
                            "logical_core should be 0, 8 % 8 (8 ranks a device), not 8 "
                            + TRN2_AT.format(1))
