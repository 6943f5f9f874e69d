"""A HIER leg's channel-id range and a RING leg plan's channel count, which ``simulate`` did
not read until 2026-12-05 (docs/SIMULATOR.md §1): ``hier.legs[].channel_base`` and
``hier.legs[].channel_ids`` were on the list of keys not read, so any values (or none)
simulated as a match, and so did legs whose ranges came in another order than the legs'
(only the plans' ids were held apart); a RING leg plan's ``chunk.channels`` was held to its
layout, not to the channels it lists.

The ranges are worked out here from docs/DESIGN.md "HIER" (the first leg's ids start at 0,
each later leg's right after the range of the leg before it; a leg's range counts the ids
from its base up to the highest its plans run) and each fixture's plans, not read back from
``lower``: the fixtures assert them first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import nrtrewrite.compose.hier as hier_mod
import nrtrewrite.simulate.triggers as triggers_mod
from nrtrewrite.errors import SimulationError
from nrtrewrite.simulate import simulate_output
from test_simulate import coll_spec, lower_spec
from test_simulate_hier_checks import (  # noqa: F401 (a fixture)
    HIER16, _field, _typed_refusal, hier16k_out)
from test_simulate_kick_leaf import _rehier, copy, refused, trigger0

ROOT = Path(__file__).resolve().parents[1]
DESIGN = "(docs/DESIGN.md \"HIER\")"
COUNT_WHY = ("(a leg's range counts the ids from its channel_base up to the highest its plans "
             "run: docs/DESIGN.md \"HIER\")")
RING_PLAN_WHY = "(a RING leg's plan lists one per chunk channel, as a RING trigger: FORMATS §1.1)"


@pytest.fixture(scope="module")
def hier16(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over ranks 0..7 and 64..71 (two trn2 nodes, LNC 2)
    as the policy lowers it: intra_redsct RING on one channel, inter_allr SINGLE_CYCLE_RING
    on one pair (a CW and a CCW channel: two ids), intra_allg RING on one, so by DESIGN's
    rule the ranges 0 (1 id), 1 (2 ids), 3 (1 id). The intra legs cut each local rank's
    slice as a block, chunked by the widest: 1000 / 8 = 125 elements is over 32, so
    even_split cuts slices of 128 (a multiple of 32) and a last of 104; the widest, 128, is
    one chunk group of chunk.channels 1 x chunk_size_n 128."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2),
                     tmp_path_factory.mktemp("range16") / "o", algo=None)
    legs = trigger0(out)["hier"]["legs"]
    assert [leg["algorithm"] for leg in legs] == ["RING", "SINGLE_CYCLE_RING", "RING"]
    assert [(leg["channel_base"], leg["channel_ids"]) for leg in legs] == [(0, 1), (1, 2), (3, 1)]
    assert [[[c["channel"] for c in plan["channels"]] for plan in leg["plans"]]
            for leg in legs] == [[[0]], [[1, 2], [1, 2]], [[3]]]
    assert legs[0]["plans"][0]["chunk"] == {"channels": 1, "chunk_size_n": 128, "pgta": 1,
                                            "tail_chunk": 128}
    return out


def test_the_output_simulates_clean(hier16):
    res = simulate_output(hier16)
    assert res.ok, res.error


# ---------------------------------------------------------------------------- the ranges

@pytest.mark.parametrize("i, key, value, says", [
    (2, "channel_base", 0, "hier.legs[2].channel_base should be 3, not 0: a leg's ids start right "
                           "after those of the leg before it, hier.legs[1].channel_base 1 + "
                           f"channel_ids 2 {DESIGN}"),
    (1, "channel_base", 2, "hier.legs[1].channel_base should be 1, not 2: a leg's ids start right "
                           "after those of the leg before it, hier.legs[0].channel_base 0 + "
                           f"channel_ids 1 {DESIGN}"),
    (0, "channel_base", 1, "hier.legs[0].channel_base should be 0, not 1: the first leg's ids "
                           f"start at 0 {DESIGN}"),
    (0, "channel_ids", 7, "hier.legs[0].channel_ids should be 1, not 7: its plans run ids from "
                          "channel_base 0 up to 0 (hier.legs[0].plans[0].channels[0]) "
                          f"{COUNT_WHY}"),
    (1, "channel_ids", 1, "hier.legs[1].channel_ids should be 2, not 1: its plans run ids from "
                          "channel_base 1 up to 2 (hier.legs[1].plans[0].channels[1]) "
                          f"{COUNT_WHY}"),
    (2, "channel_ids", 0, "hier.legs[2].channel_ids should be 1, not 0: its plans run ids from "
                          "channel_base 3 up to 3 (hier.legs[2].plans[0].channels[0]) "
                          f"{COUNT_WHY}"),
], ids=["after-the-leg-before", "off-by-one", "first-leg", "too-many", "too-few", "none"])
def test_a_hier_leg_channel_range_other_than_designs_is_refused(hier16, tmp_path, i, key,
                                                                value, says):
    """Each leg's ``channel_base`` is where the range of the leg before it ends (0 for the
    first) and its ``channel_ids`` counts the ids up to the highest its plans run: one value
    edited is refused naming it (exit 1, a bad field), where it simulated as a match."""
    out = copy(hier16, tmp_path)
    _rehier(out, lambda legs: legs[i].__setitem__(key, value))
    assert refused(out) == f"{_field(out)}{says}"


def test_the_ranges_are_checked_leg_after_leg(hier16, tmp_path):
    """A too-large ``channel_ids`` of leg 0 and the later bases that follow it: leg 0's count
    is named, not leg 1's base (which agrees with it)."""
    out = copy(hier16, tmp_path)

    def edit(legs):
        legs[0]["channel_ids"] = 5
        legs[1]["channel_base"] = 5
        legs[2]["channel_base"] = 7
    _rehier(out, edit)
    assert refused(out).startswith(f"{_field(out)}hier.legs[0].channel_ids should be 1, not 5: ")


@pytest.mark.parametrize("key, value, says", [
    ("channel_base", "x", "must be an integer, not \"x\""),
    ("channel_base", -1, "-1 is outside 0..31"),
    ("channel_base", 32, "32 is outside 0..31"),
    ("channel_ids", 33, "33 is outside 0..32"),
    ("channel_ids", None, "must be an integer, not null"),
    ("channel_ids", "delete", "missing"),
    ("channel_base", "delete", "missing"),
])
def test_a_hier_leg_channel_range_of_the_wrong_type_is_status_2(hier16, tmp_path, key, value,
                                                                says):
    """The two keys are read with their types (an id of the 32 channels a collective has,
    0..31, and a count of them, 0..32): another type, a number outside, or the key missing
    is exit 2 naming the key path."""
    out = copy(hier16, tmp_path)
    _rehier(out, lambda legs: legs[1].pop(key) if value == "delete" else
            legs[1].__setitem__(key, value))
    assert _typed_refusal(out) == (f"{out / 'manifest.json'}: field "
                                   f"triggers[0].hier.legs[1].{key}: {says}")


def test_leg_ranges_in_another_order_than_the_legs_are_refused_though_the_artifacts_agree(
        monkeypatch, tmp_path):
    """DESIGN: leg k starts after the channels of the legs before it. The model of
    ``hier16`` lowered with intra_redsct's ring on channel 3 and intra_allg's on 0
    (inter_allr's pair then on 4, 5 after intra_redsct's range as ``lower`` counts it), each
    manifest range its plans' ids, writes artifacts and manifest that agree, and the legs'
    ids are disjoint: it simulated as a match. Now it is refused naming the first leg's
    base; with the check taken out it is a match again, so nothing else refuses it."""
    move = {0: 3, 6: 0}  # (the RING legs' bases as plan_hier passes them: 0, then 6)
    real_plan, real_manifest = hier_mod.plan_ring_leg, hier_mod.LegPlan.manifest
    monkeypatch.setattr(hier_mod, "plan_ring_leg", lambda *a, channel_base=0: real_plan(
        *a, channel_base=move.get(channel_base, channel_base)))

    def manifest(self):
        doc = real_manifest(self)
        ids = [c["channel"] for plan in doc["plans"] for c in plan["channels"]]
        doc["channel_base"], doc["channel_ids"] = min(ids), max(ids) - min(ids) + 1
        return doc
    monkeypatch.setattr(hier_mod.LegPlan, "manifest", manifest)
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2), tmp_path / "o",
                     algo=None)
    legs = trigger0(out)["hier"]["legs"]
    assert [(leg["channel_base"], leg["channel_ids"]) for leg in legs] == [(3, 1), (4, 2), (0, 1)]
    assert [[c["channel"] for c in leg["plans"][0]["channels"]] for leg in legs] == [
        [3], [4, 5], [0]]
    assert refused(out) == (f"{_field(out)}hier.legs[0].channel_base should be 0, not 3: the "
                            f"first leg's ids start at 0 {DESIGN}")
    monkeypatch.setattr(triggers_mod, "_check_leg_channel_ranges", lambda *a: None)
    assert simulate_output(out).ok


def _leg(name, ids, span):
    """A RING leg as ``_hier_legs`` reads it (name, algorithm, plans of (channels, chunk,
    sections...), groups, buffers, (channel_base, channel_ids)), one plan running ``ids``."""
    return (name, "RING", [([(ch, [0, 1]) for ch in ids], {}, None, None)], [], [], span)


@pytest.mark.parametrize("legs, says", [
    # an id an earlier leg's range holds but its plans skip, run by a later leg
    ([_leg("intra_redsct", [1], (0, 2)), _leg("inter_allr", [2, 0], (2, 1)),
      _leg("intra_allg", [3], (3, 1))],
     "hier.legs[0].plans[0].channels should run ids [0], not [1]"),
    # a gap: ids 1 and 3 from channel_base 1 (channel_ids 3 counts up to the highest)
    ([_leg("intra_redsct", [0], (0, 1)), _leg("inter_allr", [3, 1], (1, 3)),
      _leg("intra_allg", [4], (4, 1))],
     "hier.legs[1].plans[0].channels should run ids [1, 2], not [1, 3]"),
    # an id below channel_base
    ([_leg("intra_redsct", [0], (0, 1)), _leg("inter_allr", [2, 0], (1, 2))],
     "hier.legs[1].plans[0].channels should run ids [1, 2], not [0, 2]"),
], ids=["skipped", "gap", "below-base"])
def test_a_plan_running_other_ids_than_its_legs_from_the_base_is_named(legs, says):
    """docs/DESIGN.md "HIER": each group's plan runs ids from its leg's ``channel_base``
    on, as many as its own channel count. A plan that skips one, runs one twice over a gap
    or below the base is named at the plan (until 2026-12-05 evening only an id below the
    base was refused, and a gap passed: held by its lowest and highest id)."""
    with pytest.raises(SimulationError) as e:
        triggers_mod._check_leg_channel_ranges(legs, {})
    assert e.value.why == (f"{says} (a group's plan runs ids from its leg's channel_base on, "
                           "as many as its channel count: docs/DESIGN.md \"HIER\")")


# ---------------------------------------------------------------------------- RING leg plans

def test_a_ring_leg_plan_counting_more_chunk_channels_than_it_lists_is_refused(
        hier16, tmp_path):
    """intra_redsct's plan runs one channel; its chunk said 2 channels of 64 (pgta 1, the
    widest slice of 128 in one chunk group of 2 x 64, tail ceil(128 / 2) = 64: a layout that
    holds) simulated as a match. FORMATS §1.1: a RING trigger's ``channels`` list one item
    per chunk channel, and a plan's ``chunk`` is "as above"."""
    out = copy(hier16, tmp_path)
    _rehier(out, lambda legs: legs[0]["plans"][0]["chunk"].update(
        channels=2, chunk_size_n=64, tail_chunk=64))
    assert refused(out) == (f"{_field(out)}hier.legs[0].plans[0].channels should list the 2 "
                            f"channels chunk.channels 2 asks for, not 1 {RING_PLAN_WHY}")


def test_a_ring_leg_plan_listing_more_channels_than_its_chunk_counts_is_refused(tmp_path):
    """A bf16 all-reduce of 300000 elements over the same ranks: each intra leg's plan runs
    two channels (asserted). Its chunk said 1 channel of twice the chunk (the widest slice
    in one chunk group still) simulated as a match."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 300000, lnc=2), tmp_path / "o",
                     algo=None)
    plan = trigger0(out)["hier"]["legs"][2]["plans"][0]
    assert [c["channel"] for c in plan["channels"]] == [4, 5]
    assert plan["chunk"]["channels"] == 2 and plan["chunk"]["pgta"] == 1
    cs = plan["chunk"]["chunk_size_n"]
    assert plan["chunk"]["tail_chunk"] == cs
    _rehier(out, lambda legs: legs[2]["plans"][0]["chunk"].update(
        channels=1, chunk_size_n=2 * cs, tail_chunk=2 * cs))
    assert refused(out) == (f"{_field(out)}hier.legs[2].plans[0].channels should list the 1 "
                            f"channel chunk.channels 1 asks for, not 2 {RING_PLAN_WHY}")


# ---------------------------------------------------------------------------- the docs

def test_simulator_md_quotes_these_refusals():
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "SIMULATOR.md").read_text())
    for quote in (
            "field triggers[0]: hier.legs[2].channel_base should be 3, not 0: a leg's ids start "
            "right after those of the leg before it, hier.legs[1].channel_base 1 + channel_ids "
            f"2 {DESIGN}",
            "hier.legs[0].channel_ids should be 1, not 7: its plans run ids from channel_base 0 "
            f"up to 0 (hier.legs[0].plans[0].channels[0]) {COUNT_WHY}",
            "field triggers[0].hier.legs[1].channel_ids: 33 is outside 0..32",
            "field triggers[0]: hier.legs[0].plans[0].channels should list the 2 channels "
            f"chunk.channels 2 asks for, not 1 {RING_PLAN_WHY}"):
        assert quote in text, quote


def test_a_kangaring_leg_plan_counting_other_chunk_channels_than_it_lists_is_refused(
        hier16k_out, tmp_path):
    """FORMATS §1.1: a RING or KANGARING leg's plan lists one channel per chunk channel, as
    such a trigger. hier16k_out's intra_redsct (KANGARING, one channel) given chunk.channels
    2 of half the chunk simulated as a match until 2026-12-05 evening; it is refused."""
    out = copy(hier16k_out, tmp_path)
    plan = trigger0(out)["hier"]["legs"][0]["plans"][0]
    assert len(plan["channels"]) == 1 and plan["chunk"]["channels"] == 1
    half = plan["chunk"]["chunk_size_n"] // 2
    _rehier(out, lambda legs: legs[0]["plans"][0]["chunk"].update(
        channels=2, chunk_size_n=half, tail_chunk=half))
    assert refused(out) == (f"{_field(out)}hier.legs[0].plans[0].channels should list the 2 "
                            "channels chunk.channels 2 asks for, not 1 (a KANGARING leg's plan "
                            "lists one per chunk channel, as a KANGARING trigger: FORMATS §1.1)")
