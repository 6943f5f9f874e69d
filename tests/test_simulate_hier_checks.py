"""Three things of a HIER or KANGARING trigger ``simulate`` did not check until 2026-12-05
(docs/SIMULATOR.md §1), each refused on an output hand-edited and re-hashed so that the
checksums pass: two legs of one trigger sharing a channel id (docs/DESIGN.md "HIER": the legs
of one trigger use disjoint channel ids), a ``kangaring`` section that is not its channels'
(FORMATS §1.1, docs/TOPOLOGY.md §4: the section was not read), and a HIER leg's buffer off
DESIGN's offset (RECV at scratch 0, MID at one space, ...: held to its region only).

The expected sections and offsets are worked out here from the docs, not read back from
``lower``: each fixture asserts them first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nrtrewrite.compose.hier as hier_mod
import nrtrewrite.simulate.engine as engine_mod
import nrtrewrite.simulate.triggers as triggers_mod
from nrtrewrite.simulate import simulate_output
from test_simulate import cli, coll_spec, lower_spec
from test_simulate_kick_leaf import _rehier, _retrigger, copy, refused, rehash, trigger0

#: docs/TOPOLOGY.md §4 on trn2: two ranks of each node of two nodes (LNC 2), 8 a node
HIER16 = list(range(8)) + list(range(64, 72))
DISJOINT_WHY = ("(the legs of one trigger use disjoint channel ids, so a rank still in one leg "
                "never consumes an increment a faster peer meant for its next: docs/DESIGN.md "
                "\"HIER\")")


def _field(out: Path, key: str = "triggers[0]") -> str:
    return f"{out / 'manifest.json'}: field {key}: "


def _typed_refusal(out: Path) -> str:
    """Simulated: the output cannot be read as the format (exit 2), one line."""
    res = cli("simulate", out, "--json")
    assert res.exit_code == 2, res.output
    error = json.loads(res.stdout)["error"]
    assert "\n" not in error
    return error


# ---------------------------------------------------------------------------- outputs

@pytest.fixture(scope="module")
def hier16_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over HIER16 as the default policy lowers it:
    intra_redsct RING, inter_allr SINGLE_CYCLE_RING, intra_allg RING, each plan on
    chunk.channels 1, so channel ids 0; 1, 2; 3 (DESIGN: each leg's ids after those of the
    legs before it). A space is 1000 elements, 2000 bytes: scratch four spaces (a
    single-cycle leg), gw two."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2),
                     tmp_path_factory.mktemp("hier16") / "o", algo=None)
    legs = trigger0(out)["hier"]["legs"]
    assert [leg["algorithm"] for leg in legs] == ["RING", "SINGLE_CYCLE_RING", "RING"]
    assert [[[c["channel"] for c in plan["channels"]] for plan in leg["plans"]]
            for leg in legs] == [[[0]], [[1, 2], [1, 2]], [[3]]]
    return out


@pytest.fixture(scope="module")
def hier16k_out(tmp_path_factory) -> Path:
    """hier16_out's model with both intra legs KANGARING: channel ids 0; 1, 2; 3 as above.
    Node 0's ranks 0..7 are devices 0 and 1 (4 ranks each at LNC 2, s-engine r % 4), a unit
    the two ranks of s-engines {k, k ^ 2} of a device (docs/TOPOLOGY.md §4: vnc 2), units 0
    then 1 of each device in the ring's device order, primary member c % 2 of each on the
    leg's channel c = 0: units [0, 2], [1, 3], [4, 6], [5, 7] (positions = node 0's ranks),
    the order their primaries [0, 1, 4, 5]."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2),
                     tmp_path_factory.mktemp("hier16k") / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring")
    legs = trigger0(out)["hier"]["legs"]
    assert [leg["algorithm"] for leg in legs] == ["KANGARING", "SINGLE_CYCLE_RING", "KANGARING"]
    units = [[0, 2], [1, 3], [4, 6], [5, 7]]
    for i, channel in ((0, 0), (2, 3)):
        (plan,) = legs[i]["plans"]
        assert plan["channels"] == [{"channel": channel, "order": [0, 1, 4, 5]}]
        assert plan["kangaring"] == [{"channel": channel, "duplicate": False, "units": units,
                                      "logical_path": [0, 2, 1, 3, 4, 6, 5, 7]}]
    return out


@pytest.fixture(scope="module")
def kr16_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 4096 elements over ranks 0..15 (trn2, LNC 1) as KANGARING: one
    channel. docs/TOPOLOGY.md §4 (vnc 1): devices 0 and 1, rank r of a device on TPB r % 8,
    s-engine (r % 8) // 2; a unit is (S_k t0, S_k^2 t0, S_k^2 t1, S_k t1) for k = 0, 1, so
    [0, 4, 5, 1], [2, 6, 7, 3] on device 0 and [8, 12, 13, 9], [10, 14, 15, 11] on device
    1; primary member 0 on channel 0; the order [0, 2, 8, 10]."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 16, 4096),
                     tmp_path_factory.mktemp("kr16") / "o", algo="kangaring")
    t = trigger0(out)
    units = [[0, 4, 5, 1], [2, 6, 7, 3], [8, 12, 13, 9], [10, 14, 15, 11]]
    assert t["channels"] == [{"channel": 0, "order": [0, 2, 8, 10]}]
    assert t["kangaring"] == [{"channel": 0, "duplicate": False, "units": units,
                               "logical_path": [m for u in units for m in u]}]
    return out


@pytest.fixture(scope="module")
def kr8_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1,100,000 elements over ranks 0..7 (trn2, LNC 2) as KANGARING:
    two channels (2.2 MB). Units as hier16k_out's, the primary member c % 2 on channel c:
    channel 0 [0, 2], [1, 3], [4, 6], [5, 7]; channel 1 [2, 0], [3, 1], [6, 4], [7, 5];
    neither a duplicate (other primaries)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 1_100_000, lnc=2),
                     tmp_path_factory.mktemp("kr8") / "o", algo="kangaring")
    t = trigger0(out)
    assert t["channels"] == [{"channel": 0, "order": [0, 1, 4, 5]},
                             {"channel": 1, "order": [2, 3, 6, 7]}]
    assert [(k["units"], k["duplicate"]) for k in t["kangaring"]] == [
        ([[0, 2], [1, 3], [4, 6], [5, 7]], False), ([[2, 0], [3, 1], [6, 4], [7, 5]], False)]
    return out


def test_the_outputs_simulate_clean(hier16_out, hier16k_out, kr16_out, kr8_out):
    for out in (hier16_out, hier16k_out, kr16_out, kr8_out):
        res = simulate_output(out)
        assert res.ok, res.error


# ---------------------------------------------------------------------------- 1. disjoint ids

@pytest.mark.parametrize("i, k, c, says", [
    (2, 0, 0, "hier.legs[2].plans[0].channels[0].channel 0 is "
              "hier.legs[0].plans[0].channels[0]'s too"),
    (1, 1, 1, "hier.legs[1].plans[1].channels[1].channel 0 is "
              "hier.legs[0].plans[0].channels[0]'s too"),
], ids=["intra_allg", "inter_allr-plan-1"])
def test_a_leg_plans_channel_of_an_earlier_leg_is_refused(hier16_out, tmp_path, i, k, c, says):
    """docs/DESIGN.md "HIER": the legs of one trigger use disjoint channel ids. hier16_out's
    intra_allg channel 3, or the CCW channel 2 of inter_allr's second plan, set to 0
    (intra_redsct's) is refused naming the later leg's key and the earlier one's, before the
    ranks' entries are compared with the plans (which blamed spad.bin's channel_list)."""
    out = copy(hier16_out, tmp_path)
    _rehier(out, lambda legs: legs[i]["plans"][k]["channels"][c].__setitem__("channel", 0))
    assert refused(out) == f"{_field(out)}{says} {DISJOINT_WHY}"


def test_legs_lowered_onto_one_channel_are_refused_though_the_artifacts_agree(
        monkeypatch, tmp_path):
    """The per-entry check ties each rank's entries to the manifest's plans, not the legs to
    each other: hier16k_out's model lowered with every KANGARING leg at channel base 0 (the
    defect DESIGN's rule prevents: intra_allg on channel 0, intra_redsct's) writes
    artifacts and manifest that agree, and simulated as a match (the run's one interleaving
    never lets a rank still in intra_redsct take intra_allg's increments). With the new
    check it is refused, naming intra_allg's plan; with the check taken out the leg's range
    (``channel_base`` 3, read since 2026-12-05) refuses it, and with that taken out too it is
    a match again, so nothing else refuses it."""
    real = hier_mod.plan_kangaring
    monkeypatch.setattr(hier_mod, "plan_kangaring",
                        lambda *a, channel_base=0, **k: real(*a, channel_base=0, **k))
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2), tmp_path / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring")
    legs = trigger0(out)["hier"]["legs"]
    assert [[c["channel"] for c in leg["plans"][0]["channels"]] for leg in legs] == [
        [0], [1, 2], [0]]
    assert refused(out) == (f"{_field(out)}hier.legs[2].plans[0].channels[0].channel 0 is "
                            f"hier.legs[0].plans[0].channels[0]'s too {DISJOINT_WHY}")
    monkeypatch.setattr(triggers_mod, "_check_disjoint_leg_channels", lambda *a: None)
    # (since 2026-12-05 the leg's range says 3: its channel_base, after legs 0 and 1)
    assert refused(out) == (f"{_field(out)}hier.legs[2].plans[0].channels should run ids [3], "
                            "not [0] (a group's plan runs ids from its leg's channel_base on, as "
                            "many as its channel count: docs/DESIGN.md \"HIER\")")
    monkeypatch.setattr(triggers_mod, "_check_leg_channel_ranges", lambda *a: None)
    assert simulate_output(out).ok


# ---------------------------------------------------------------------------- 2. kangaring

KANGARING_WHY = ("(a KANGARING trigger lists one kangaring item per channel, in the order of "
                 "its channels: FORMATS §1.1)")
UNITS_WHY = ("(the units of a KANGARING channel hold each rank of the replica_group once: "
             "docs/TOPOLOGY.md §4)")


def _edit_units(fn):
    return lambda t: fn(t["kangaring"][0]["units"])


@pytest.mark.parametrize("edit, says", [
    (lambda t: t["kangaring"].append(dict(t["kangaring"][0])),
     f"kangaring should list 1 item, one per channel of channels, not 2 {KANGARING_WHY}"),
    (lambda t: t["kangaring"][0].__setitem__("channel", 5),
     f"kangaring[0].channel should be channels[0].channel 0, not 5 {KANGARING_WHY}"),
    (_edit_units(lambda u: u[3].pop()), f"kangaring[0].units lacks rank 11 {UNITS_WHY}"),
    (_edit_units(lambda u: u[3].__setitem__(3, 99)),
     f"kangaring[0].units names rank 99, not in the replica_group {UNITS_WHY}"),
    (_edit_units(lambda u: u[3].__setitem__(3, 0)),
     f"kangaring[0].units lists rank 0 twice {UNITS_WHY}"),
    (_edit_units(lambda u: u[0].append(u.pop()[0])),
     "kangaring[0].units[0] should list 1 to 4 ranks, not 5 (a unit is a primary and at most 3 "
     "secondaries, KANGARING_MAX_SECONDARIES: docs/TOPOLOGY.md §4)"),
    (_edit_units(lambda u: u.__setitem__(0, [4, 0, 5, 1])),
     "channels[0].order should be [4, 2, 8, 10], the primaries of kangaring[0].units in order, "
     "not [0, 2, 8, 10] (a KANGARING order is the cycle of its units' primaries, each unit's "
     "first rank: FORMATS §1.1)"),
    (lambda t: t["channels"][0].__setitem__("order", [2, 8, 10, 0]),
     "channels[0].order should be [0, 2, 8, 10], the primaries of kangaring[0].units in order, "
     "not [2, 8, 10, 0] (a KANGARING order is the cycle of its units' primaries, each unit's "
     "first rank: FORMATS §1.1)"),
    (lambda t: t["kangaring"][0]["logical_path"].reverse(),
     "kangaring[0].logical_path should be [0, 4, 5, 1, 2, 6, 7, 3, 8, 12, 13, 9, 10, 14, 15, "
     "11], its units one after the other, not [11, 15, 14, 10, 9, 13, 12, 8, 3, 7, 6, 2, 1, 5, "
     "4, 0] (each primary, then its secondaries: docs/TOPOLOGY.md §4)"),
    (lambda t: t["kangaring"][0].__setitem__("duplicate", True),
     "kangaring[0].duplicate should be false, not true: no channel before it has its directed "
     "cycle of primaries with the same units (docs/TOPOLOGY.md §4)"),
], ids=["extra-item", "channel", "rank-dropped", "stranger", "twice", "five", "primary",
        "order-rotated", "path", "duplicate"])
def test_a_kangaring_section_other_than_its_channels_is_refused(kr16_out, tmp_path, edit,
                                                                says):
    """FORMATS §1.1 and docs/TOPOLOGY.md §4: a KANGARING trigger's ``kangaring`` has an item
    per channel, in order, with its id; the units hold every rank of the group once, each a
    primary and at most 3 secondaries; ``channels[].order`` is the units' primaries, in
    the units' order; ``logical_path`` the units one after the other. The section was not
    read: each edit simulated as a match (the order was held only to name distinct ranks of
    the group). Each is refused naming the key (kr16_out's section: see the fixture)."""
    out = copy(kr16_out, tmp_path)
    _retrigger(out, 0, edit)
    rehash(out)
    assert refused(out) == f"{_field(out)}{says}"


def test_a_second_channel_said_to_be_a_duplicate_is_refused(kr8_out, tmp_path):
    """docs/TOPOLOGY.md §4: ``duplicate`` marks a channel whose primaries form the same
    directed cycle as an earlier channel's, with the same units; kr8_out's channel 1 has
    other primaries than channel 0 (member 1 of each unit), so it is not one. Set, it
    simulated as a match; it is refused. Its units made channel 0's (the order too) and
    the flag is right: channel 0's duplicate, and then a second item of the same ring
    cannot be left false."""
    out = copy(kr8_out, tmp_path)
    _retrigger(out, 0, lambda t: t["kangaring"][1].__setitem__("duplicate", True))
    rehash(out)
    assert refused(out) == (f"{_field(out)}kangaring[1].duplicate should be false, not true: no "
                            "channel before it has its directed cycle of primaries with the "
                            "same units (docs/TOPOLOGY.md §4)")

    def same_as_zero(t):
        k0, k1 = t["kangaring"]
        k1.update(units=k0["units"], logical_path=k0["logical_path"])
        t["channels"][1]["order"] = t["channels"][0]["order"]
    out = copy(kr8_out, tmp_path, "same")
    _retrigger(out, 0, same_as_zero)
    rehash(out)
    assert refused(out) == (f"{_field(out)}kangaring[1].duplicate should be true, not false: its "
                            "primaries form the directed cycle of kangaring[0]'s, with the same "
                            "units (docs/TOPOLOGY.md §4)")


@pytest.mark.parametrize("edit, says", [
    (lambda t: t.pop("kangaring"), "field triggers[0].kangaring: missing"),
    (lambda t: t["kangaring"][0]["units"].__setitem__(1, "x"),
     'field triggers[0].kangaring[0].units[1]: must be a list, not "x"'),
    (lambda t: t["kangaring"][0].__setitem__("duplicate", 0),
     "field triggers[0].kangaring[0].duplicate: must be true or false, not 0"),
    (lambda t: t["kangaring"][0].__setitem__("channel", 32),
     "field triggers[0].kangaring[0].channel: 32 is outside 0..31"),
    (lambda t: t["kangaring"][0]["logical_path"].__setitem__(0, -1),
     "field triggers[0].kangaring[0].logical_path[0]: -1 is outside 0..9223372036854775807"),
    # (mutation audit of the thirty-eighth session: a unit's ranks are typed as the path's)
    (lambda t: t["kangaring"][0]["units"][0].__setitem__(1, -4),
     "field triggers[0].kangaring[0].units[0][1]: -4 is outside 0..9223372036854775807"),
], ids=["missing", "unit-string", "duplicate-0", "channel-32", "path-negative",
        "unit-negative"])
def test_a_kangaring_section_is_read_with_its_types(kr16_out, tmp_path, edit, says):
    """docs/SIMULATOR.md §1: every key the simulator reads is required and typed: the
    section of a KANGARING trigger (``channel`` 0..31, ``logical_path`` and ``units`` lists
    of ranks, ``duplicate`` a JSON boolean). Deleted or mistyped it simulated as a match;
    the output cannot be read (exit 2), with or without its checksums."""
    out = copy(kr16_out, tmp_path)
    _retrigger(out, 0, edit)
    rehash(out)
    assert _typed_refusal(out) == f"{out / 'manifest.json'}: {says}"


POSITIONS_WHY = ("(the units of a KANGARING channel hold each position of "
                 "hier.legs[{i}].groups[0].group of 8 ranks once: docs/TOPOLOGY.md §4)")


@pytest.mark.parametrize("i, edit, says", [
    (0, lambda p: p["kangaring"][0]["units"][3].pop(),
     "hier.legs[0].plans[0].kangaring[0].units lacks position 7 " + POSITIONS_WHY),
    (2, lambda p: p["kangaring"][0]["units"][3].append(8),
     "hier.legs[2].plans[0].kangaring[0].units names position 8, outside "
     "hier.legs[2].groups[0].group of 8 ranks " + POSITIONS_WHY),
    (0, lambda p: p["channels"][0].__setitem__("order", [0, 1, 5, 4]),
     "hier.legs[0].plans[0].channels[0].order should be [0, 1, 4, 5], the primaries of "
     "hier.legs[0].plans[0].kangaring[0].units in order, not [0, 1, 5, 4] (a KANGARING order is "
     "the cycle of its units' primaries, each unit's first position: FORMATS §1.1)"),
    (2, lambda p: p["kangaring"][0].__setitem__("channel", 0),
     "hier.legs[2].plans[0].kangaring[0].channel should be "
     "hier.legs[2].plans[0].channels[0].channel 3, not 0 (a KANGARING leg's plan lists one "
     "kangaring item per channel, in the order of its channels: FORMATS §1.1)"),
], ids=["position-dropped", "position-outside", "order", "channel"])
def test_a_kangaring_leg_plans_section_other_than_its_channels_is_refused(
        hier16k_out, tmp_path, i, edit, says):
    """As a flat trigger's, in positions of each group that runs the plan (FORMATS §1.1:
    ``logical_path`` and ``units`` in positions too); hier16k_out's intra legs (see the
    fixture). Each edit simulated as a match; it is refused naming the key."""
    out = copy(hier16k_out, tmp_path)
    _rehier(out, lambda legs: edit(legs[i]["plans"][0]))
    assert refused(out) == f"{_field(out)}{says.format(i=i)}"


def test_kangaring_on_a_leg_of_another_engine_or_missing_is_refused(hier16k_out, tmp_path):
    """FORMATS §1.1: a HIER leg's plans add the engine's extras, ``kangaring`` on a
    KANGARING leg only. intra_redsct's section copied onto a plan of the SINGLE_CYCLE_RING
    inter_allr leg simulated as a match: refused (exit 1); deleted from intra_redsct's plan
    it is a key the simulator reads that is missing (exit 2)."""
    out = copy(hier16k_out, tmp_path)
    _rehier(out, lambda legs: legs[1]["plans"][0].__setitem__(
        "kangaring", legs[0]["plans"][0]["kangaring"]))
    assert refused(out) == (f"{_field(out)}hier.legs[1].plans[0] has a kangaring section on a "
                            "\"SINGLE_CYCLE_RING\" leg (only a KANGARING leg's plans have one: "
                            "FORMATS §1.1)")
    out = copy(hier16k_out, tmp_path, "gone")
    _rehier(out, lambda legs: legs[0]["plans"][0].pop("kangaring"))
    assert _typed_refusal(out) == (f"{out / 'manifest.json'}: field "
                                   "triggers[0].hier.legs[0].plans[0].kangaring: missing")


# ---------------------------------------------------------------------------- 3. offsets

#: hier16_out's leg buffers by docs/DESIGN.md "HIER", a space of 1000 bf16 elements = 2000
#: bytes, sorted by role as lower lists them: intra_redsct gw 0, out (MID) scratch one space,
#: recv scratch 0; inter_allr (single-cycle) gw 0, gw2 gw one space, in (MID) scratch one
#: space, recv scratch two, recv2 scratch three; intra_allg (in place in OUT) gw only
HIER16_BUFFERS = [
    [("gw", "gw", 0), ("out", "scratch", 2000), ("recv", "scratch", 0)],
    [("gw", "gw", 0), ("gw2", "gw", 2000), ("in", "scratch", 2000), ("recv", "scratch", 4000),
     ("recv2", "scratch", 6000)],
    [("gw", "gw", 0)]]
OFFSETS_WHY = ("(docs/DESIGN.md \"HIER\": in scratch the first leg's RECV at 0, MID at one "
               "space, the inter leg's RECV at two and a single-cycle leg's second at three; in "
               "gw the staging at 0 and a single-cycle leg's second at one; a space is the "
               "trigger's 1000 BF16 elements, 2000 bytes)")


def _place(i: int, b: int, region: str, offset: int):
    return lambda legs: legs[i]["buffers"][b].update(region=region, offset=offset)


@pytest.mark.parametrize("edit, says", [
    (_place(0, 2, "scratch", 2000), 'hier.legs[0].buffers[2] (role recv) should be '
     '{"offset": 0, "region": "scratch"}, not {"offset": 2000, "region": "scratch"} '
     + OFFSETS_WHY),
    (_place(0, 1, "gw", 2000), 'hier.legs[0].buffers[1] (role out) should be '
     '{"offset": 2000, "region": "scratch"}, not {"offset": 2000, "region": "gw"} '
     + OFFSETS_WHY),
    (_place(1, 1, "gw", 0), 'hier.legs[1].buffers[1] (role gw2) should be '
     '{"offset": 2000, "region": "gw"}, not {"offset": 0, "region": "gw"} '
     + OFFSETS_WHY),
    (_place(1, 2, "scratch", 0), 'hier.legs[1].buffers[2] (role in) should be '
     '{"offset": 2000, "region": "scratch"}, not {"offset": 0, "region": "scratch"} '
     + OFFSETS_WHY),
    (_place(1, 3, "scratch", 6000), 'hier.legs[1].buffers[3] (role recv) should be '
     '{"offset": 4000, "region": "scratch"}, not {"offset": 6000, "region": "scratch"} '
     + OFFSETS_WHY),
    (_place(1, 4, "scratch", 4002), 'hier.legs[1].buffers[4] (role recv2) should be '
     '{"offset": 6000, "region": "scratch"}, not {"offset": 4002, "region": "scratch"} '
     + OFFSETS_WHY),
    (lambda legs: legs[2]["buffers"].append({"offset": 0, "region": "scratch", "role": "recv"}),
     "hier.legs[2].buffers[1] (role recv) is not a view of intra_allg in scratch or gw: its "
     "views there are gw (a leg lists only the roles that live in scratch or gw: FORMATS §1.1, "
     "docs/DESIGN.md \"HIER\")"),
    (lambda legs: legs[0]["buffers"][1].__setitem__("role", "mid"),
     'hier.legs[0].buffers[1].role should be in, out, recv, recv2, gw or gw2, not "mid" '
     "(FORMATS §1.1)"),
    (lambda legs: legs[0]["buffers"].append({"offset": 0, "region": "scratch", "role": "recv"}),
     "hier.legs[0].buffers[3].role \"recv\" is buffers[2]'s too (a leg lists each of its views "
     "once: FORMATS §1.1)"),
], ids=["recv-on-mid", "out-in-gw", "gw2-at-0", "in-at-0", "recv-on-recv2", "recv2-shifted",
        "intra_allg-recv", "unknown-role", "recv-twice"])
def test_a_hier_leg_buffer_off_designs_offset_is_refused(hier16_out, tmp_path, edit, says):
    """docs/DESIGN.md "HIER" gives each buffer's offset (HIER16_BUFFERS), FORMATS §1.1 the
    roles, each once. Each edit keeps the buffer inside its region, so it was held to
    nothing more: most simulated as a match, gw2 at 0 and the inter leg's recv on recv2's
    offset were blamed on sb2sb.bin (a stream's start_addr at no anchor). Each is refused
    naming the key, before any artifact is read."""
    out = copy(hier16_out, tmp_path)
    legs = trigger0(out)["hier"]["legs"]
    assert [[(b["role"], b["region"], b["offset"]) for b in leg["buffers"]]
            for leg in legs] == HIER16_BUFFERS
    _rehier(out, edit)
    assert refused(out) == f"{_field(out)}{says}"


def test_an_all_gathers_space_is_its_output(tmp_path):
    """docs/DESIGN.md "HIER": a space is the trigger's element space, an all-gather's
    ``num_elements`` x group size; its legs run in OUT, so they list gw alone, and a scratch
    recv on inter_allg is refused as no view of that leg in scratch or gw."""
    out = lower_spec(coll_spec("all_gather", "fp16", HIER16, 100, lnc=2), tmp_path / "o",
                     algo="hier")
    legs = trigger0(out)["hier"]["legs"]
    assert [[b["role"] for b in leg["buffers"]] for leg in legs] == [["gw"], ["gw"]]
    assert simulate_output(out).ok
    _rehier(out, lambda legs: legs[0]["buffers"].append(
        {"offset": 0, "region": "gw", "role": "recv"}))
    assert refused(out) == (f"{_field(out)}hier.legs[0].buffers[1] (role recv) is not a view "
                            "of inter_allg in scratch or gw: its views there are gw (a leg "
                            "lists only the roles that live in scratch or gw: FORMATS §1.1, "
                            "docs/DESIGN.md \"HIER\")")


@pytest.mark.parametrize("i, role, views", [
    (0, "out", "gw, recv, out"), (0, "recv", "gw, recv, out"),
    (1, "in", "gw, in, recv, recv2, gw2"), (1, "recv", "gw, in, recv, recv2, gw2"),
    (1, "recv2", "gw, in, recv, recv2, gw2"), (1, "gw2", "gw, in, recv, recv2, gw2")])
def test_a_hier_leg_without_one_of_its_views_is_refused(hier16_out, tmp_path, i, role, views):
    """FORMATS §1.1: a leg lists the roles that live in scratch or gw, docs/DESIGN.md "HIER"
    which: an all-reduce's intra_redsct (RING here) its RECV at 0 and MID (its out) at one
    space, the single-cycle inter_allr MID (its in), its RECV at two, its second at three
    and its second staging view gw2, every leg gw. A leg without one of them simulated as a
    match (recv, out, in, recv2), or (gw2) was blamed on sb2sb.bin, a stream's start_addr
    at no view; each is refused naming the key and the role."""
    out = copy(hier16_out, tmp_path)
    legs = trigger0(out)["hier"]["legs"]
    assert [[(b["role"], b["region"], b["offset"]) for b in leg["buffers"]]
            for leg in legs] == HIER16_BUFFERS
    alg, name = legs[i]["algorithm"], legs[i]["name"]
    assert (alg, name) == [("RING", "intra_redsct"), ("SINGLE_CYCLE_RING", "inter_allr")][i]

    def drop(legs):
        legs[i]["buffers"] = [b for b in legs[i]["buffers"] if b["role"] != role]
    _rehier(out, drop)
    assert refused(out) == (f"{_field(out)}hier.legs[{i}].buffers lacks role {role}: a {alg} "
                            f"{name} leg lists {views} (a leg lists each of its views in "
                            "scratch or gw: FORMATS §1.1, docs/DESIGN.md \"HIER\")")


@pytest.mark.parametrize("n", [1001, 2**62])
def test_a_hier_num_elements_its_operand_cannot_hold_is_named_at_the_operand(
        hier16_out, tmp_path, n):
    """SIMULATOR §1 "Operands": a trigger's operands are placed in their vars from the
    numbers alone. hier16_out's src holds its 1000 bf16 elements at offset 0; num_elements
    1001 (or 2**62) does not fit it, and is refused there, as on every other engine. The
    HIER legs' buffers sit at spaces of num_elements, so the buffer check, run first until
    2026-12-05, blamed it on hier.legs[0].buffers[1]'s offset."""
    out = copy(hier16_out, tmp_path)
    assert trigger0(out)["num_elements"] == 1000 and trigger0(out)["src"]["offset"] == 0
    _retrigger(out, 0, lambda t: t.__setitem__("num_elements", n))
    rehash(out)
    assert refused(out).startswith(f"{_field(out)[:-len('triggers[0]: ')]}triggers[0].src"
                                   f".offset: src operand ({n} elements at offset 0) does not "
                                   "fit var ")


@pytest.fixture
def legs_alone(monkeypatch):
    """The tests below aim at the legs' check (program.py ``check_kangaring_peers``): since
    2026-12-05 a unit other than docs/TOPOLOGY.md §4's (split, swapped, another primary) is
    refused first from the ranks' s-engines (``check_kangaring_units``, at load), which is
    taken out here (tests/test_simulate_kangaring_units.py refuses the same edits there)."""
    monkeypatch.setattr(engine_mod, "check_kangaring_units", lambda *a: None)


def _reunit(k: dict, ch: dict, units: list[list[int]]) -> None:
    """Give a ``kangaring`` item ``units``, its ``logical_path`` and its channel's order
    (the primaries) to match, so the section still agrees with itself (FORMATS §1.1)."""
    k.update(units=units, logical_path=[m for u in units for m in u])
    ch["order"] = [u[0] for u in units]


@pytest.mark.parametrize("units, says", [
    # the reviewer's edit: units (0, 2, 1, 3), the cycle 0 -> 8 -> 2 -> 10; the legs run
    # 0 -> 2 -> 8 -> 10, so rank 0's fan-in signals 2 where the order says 8
    ([[0, 4, 5, 1], [8, 12, 13, 9], [2, 6, 7, 3], [10, 14, 15, 11]],
     "increments recv_sema of rank 2: the next primary of channel 0 is 8 "
     "(triggers[0].channels[0].order)"),
    # unit [0, 4, 5, 1] split in two: 0's next primary is 5, the primary of [5, 1]
    ([[0, 4], [5, 1], [2, 6, 7, 3], [8, 12, 13, 9], [10, 14, 15, 11]],
     "increments recv_sema of rank 2: the next primary of channel 0 is 5 "
     "(triggers[0].channels[0].order)"),
], ids=["reordered", "split"])
def test_a_kangaring_cycle_other_than_its_legs_is_refused(kr16_out, tmp_path, legs_alone, units,
                                                          says):
    """FORMATS §3.3: a primary's fan-in signals the next primary of ``channels[].order``.
    The section was held to itself and the group, not to the legs: units reordered or split,
    with the order and path edited to match, simulated as a match. Refused naming rank 0,
    sem.bin and the order's key (kr16_out's units: see the fixture)."""
    out = copy(kr16_out, tmp_path)
    _retrigger(out, 0, lambda t: _reunit(t["kangaring"][0], t["channels"][0], units))
    rehash(out)
    err = refused(out, "rank 0,", "artifact sem.bin", says)
    assert "direct_reduce_send_kangaring leg (legs.bin record " in err, err


def test_a_kangaring_unit_other_than_its_legs_is_refused(kr16_out, tmp_path, legs_alone):
    """FORMATS §3.3: a primary's legs signal the secondaries of its own unit. Ranks 1 and 3
    swapped between the units [0, 4, 5, 1] and [2, 6, 7, 3] (primaries unchanged, the path
    to match) simulated as a match; rank 0's legs still signal rank 1, now of another
    unit."""
    out = copy(kr16_out, tmp_path)
    units = [[0, 4, 5, 3], [2, 6, 7, 1], [8, 12, 13, 9], [10, 14, 15, 11]]
    _retrigger(out, 0, lambda t: _reunit(t["kangaring"][0], t["channels"][0], units))
    rehash(out)
    refused(out, "rank 0,", "artifact sem.bin", "of primary 0 should increment the peer "
            "semaphore of a secondary of its unit [0, 4, 5, 3] on channel 0, not of rank 1 "
            "(triggers[0].kangaring[0].units")


def test_a_kangaring_hier_legs_cycle_other_than_its_legs_is_refused(hier16k_out, tmp_path,
                                                                   legs_alone):
    """The same on a KANGARING HIER leg, its plan in positions: intra_redsct's units
    reordered (0, 2, 1, 3) to [0, 2], [4, 6], [1, 3], [5, 7], the order [0, 4, 1, 5]; rank 0
    (position 0 of node 0's group 0..7) signals rank 1, the order says position 4 (rank 4)."""
    out = copy(hier16k_out, tmp_path)
    units = [[0, 2], [4, 6], [1, 3], [5, 7]]
    _rehier(out, lambda legs: _reunit(legs[0]["plans"][0]["kangaring"][0],
                                      legs[0]["plans"][0]["channels"][0], units))
    refused(out, "rank 0,", "artifact sem.bin", "increments recv_sema of rank 1: the next "
            "primary of channel 0 is 4 (triggers[0].hier.legs[0].plans[0].channels[0].order)")


def test_a_kangaring_secondary_named_primary_is_refused(kr16_out, tmp_path, legs_alone):
    """FORMATS §3.3: only a primary sends to the next primary. Unit [0, 4, 5, 1] made
    [4, 0, 5, 1] (the order [4, 2, 8, 10] and the path to match): rank 0, now a secondary,
    still runs the fan-in to rank 2; refused naming its unit's key."""
    out = copy(kr16_out, tmp_path)
    units = [[4, 0, 5, 1], [2, 6, 7, 3], [8, 12, 13, 9], [10, 14, 15, 11]]
    _retrigger(out, 0, lambda t: _reunit(t["kangaring"][0], t["channels"][0], units))
    rehash(out)
    refused(out, "rank 0,", "artifact sem.bin", "increments recv_sema of rank 2: rank 0 is a "
            "secondary of unit [4, 0, 5, 1] (triggers[0].kangaring[0].units), which sends to no "
            "primary (FORMATS §3.3)")
