"""A SINGLE_CYCLE_RING trigger's ``single_cycle`` section, and a SINGLE_CYCLE_RING HIER leg
plan's, which ``simulate`` did not read until 2026-12-05 (docs/SIMULATOR.md §1: it was on
the list of keys the simulator does not read). FORMATS §1.1 fixes it: ``pairs`` one
[CW channel, CCW channel] per chunk channel, pair k ``channels[2k]`` and ``channels[2k+1]``
(a one-rank group's its one channel twice), each CCW channel's order its CW channel's ring
walked backward; docs/DESIGN.md "Single-cycle ring" the rest: ``arcs`` [h_cw, h_ccw] =
[ceil((n-1)/2), floor((n-1)/2)] and ``steps_per_group`` one cycle, ``2 * ceil((n-1)/2)``.
Each edit below, on an output hand-edited and re-hashed so that the checksums pass,
simulated as a match (a CCW order that is not its CW ring backward was blamed on the
artifacts instead: ``rank-0000: field elem_start, ... artifact legs.bin, record 22:
consuming leg 1 of channel 1``, though the legs are lower's); each is refused naming the
manifest key (exit 1; a missing or mistyped key exit 2).

The expected sections are worked out here from the docs, not read back from ``lower``: each
fixture asserts them first."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import nrtrewrite.select as select_mod
from nrtrewrite.emit import formats as F
from nrtrewrite.simulate import simulate_output
from test_simulate import coll_spec, lower_spec
from test_simulate_hier_checks import _field, _typed_refusal
from test_simulate_kick_leaf import _rehier, _retrigger, copy, refused, rehash, trigger0


# ---------------------------------------------------------------------------- outputs

@pytest.fixture(scope="module")
def scr8_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 4096 elements over ranks 0..7 (one trn2 device) forced to
    SINGLE_CYCLE_RING: one chunk channel, so one pair, channel ids 0 (CW) and 1 (CCW), the
    CCW order the ring backward from rank 0; n = 8: arcs [ceil(7/2), floor(7/2)] = [4, 3],
    one cycle 2 * 4 = 8 steps (DESIGN: n for even n)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 4096),
                     tmp_path_factory.mktemp("scr8") / "o", algo="single_cycle_ring")
    t = trigger0(out)
    assert t["chunk"]["channels"] == 1
    assert t["channels"] == [{"channel": 0, "order": [0, 1, 2, 3, 4, 5, 6, 7]},
                             {"channel": 1, "order": [0, 7, 6, 5, 4, 3, 2, 1]}]
    assert t["single_cycle"] == {"pairs": [[0, 1]], "arcs": [4, 3], "steps_per_group": 8}
    return out


@pytest.fixture(scope="module")
def scr8x2_out(tmp_path_factory) -> Path:
    """scr8_out's model of 9000 elements with the channel count made 4 (as
    tests/test_single_cycle.py does): two pairs, ids 0, 1 and 2, 3 (FORMATS §1.1: pair k is
    channels[2k] and channels[2k+1])."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(select_mod, "choose_channels", lambda *a, **k: (4, "test: two pairs"))
        out = lower_spec(coll_spec("all_reduce", "bf16", 8, 9000),
                         tmp_path_factory.mktemp("scr8x2") / "o", algo="single_cycle_ring")
    t = trigger0(out)
    assert t["chunk"]["channels"] == 2
    assert [c["channel"] for c in t["channels"]] == [0, 1, 2, 3]
    assert t["single_cycle"] == {"pairs": [[0, 1], [2, 3]], "arcs": [4, 3],
                                 "steps_per_group": 8}
    return out


@pytest.fixture(scope="module")
def scr1_out(tmp_path_factory) -> Path:
    """A one-rank group: its pair is its one channel, CW and CCW alike; n = 1: arcs [0, 0],
    no steps."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 1, 300),
                     tmp_path_factory.mktemp("scr1") / "o", algo="single_cycle_ring")
    t = trigger0(out)
    assert t["channels"] == [{"channel": 0, "order": [0]}]
    assert t["single_cycle"] == {"pairs": [[0, 0]], "arcs": [0, 0], "steps_per_group": 0}
    return out


@pytest.fixture(scope="module")
def hier3_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over ranks 0, 1 of each of three trn2 nodes (LNC
    2, 64 ranks a node) as the default policy lowers it: intra_redsct RING (channel 0),
    inter_allr SINGLE_CYCLE_RING on groups [0, 64, 128] and [1, 65, 129] (channels 1 CW, 2
    CCW: the positions [0, 1, 2] backward from 0 are [0, 2, 1]; n = 3: arcs [1, 1], 2 steps),
    intra_allg RING (channel 3)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", [0, 1, 64, 65, 128, 129], 1000, lnc=2),
                     tmp_path_factory.mktemp("hier3") / "o", algo=None,
                     topology="trn2:nodes=3")
    legs = trigger0(out)["hier"]["legs"]
    assert [leg["algorithm"] for leg in legs] == ["RING", "SINGLE_CYCLE_RING", "RING"]
    assert [g["group"] for g in legs[1]["groups"]] == [[0, 64, 128], [1, 65, 129]]
    for plan in legs[1]["plans"]:
        assert plan["channels"] == [{"channel": 1, "order": [0, 1, 2]},
                                    {"channel": 2, "order": [0, 2, 1]}]
        assert plan["single_cycle"] == {"pairs": [[1, 2]], "arcs": [1, 1],
                                        "steps_per_group": 2}
    assert all("single_cycle" not in plan for i in (0, 2) for plan in legs[i]["plans"])
    return out


def test_the_outputs_simulate_clean(scr8_out, scr8x2_out, scr1_out, hier3_out):
    for out in (scr8_out, scr8x2_out, scr1_out, hier3_out):
        res = simulate_output(out)
        assert res.ok, res.error


# ---------------------------------------------------------------------------- flat

PAIRS_WHY = ("(pair k is [channels[2k].channel, channels[2k+1].channel], the CW and the CCW "
             "channel of chunk channel k: FORMATS §1.1)")
REVERSED_WHY = ("a CCW channel walks its CW channel's ring backward, the reversed order from "
                "any rank: FORMATS §1.1)")


def _sc(key, value):
    return lambda t: t["single_cycle"].__setitem__(key, value)


@pytest.mark.parametrize("edit, says", [
    (_sc("pairs", [[0, 1], [0, 1]]),
     "single_cycle.pairs should list the 1 pair chunk.channels counts, not 2 (one [CW channel, "
     "CCW channel] per chunk channel: FORMATS §1.1)"),
    (_sc("pairs", [[1, 0]]),
     f"single_cycle.pairs should be [[0, 1]], the ids of channels in pairs, not [[1, 0]] "
     f"{PAIRS_WHY}"),
    (_sc("pairs", [[0, 5]]),
     f"single_cycle.pairs should be [[0, 1]], the ids of channels in pairs, not [[0, 5]] "
     f"{PAIRS_WHY}"),
    (lambda t: t["channels"][1].__setitem__("order", [0, 1, 2, 3, 4, 5, 6, 7]),
     "channels[1].order should be channels[0].order [0, 1, 2, 3, 4, 5, 6, 7] reversed, not [0, "
     "1, 2, 3, 4, 5, 6, 7] (single_cycle.pairs[0] makes channel 1 the CCW channel of 0: "
     + REVERSED_WHY),
    (lambda t: t["channels"][1].__setitem__("order", [0, 7, 6, 5, 4, 3, 1, 2]),
     "channels[1].order should be channels[0].order [0, 1, 2, 3, 4, 5, 6, 7] reversed, not [0, "
     "7, 6, 5, 4, 3, 1, 2] (single_cycle.pairs[0] makes channel 1 the CCW channel of 0: "
     + REVERSED_WHY),
    (_sc("arcs", [3, 4]),
     "single_cycle.arcs should be [4, 3], [ceil((n-1)/2), floor((n-1)/2)] for its replica_group "
     "of 8 ranks, not [3, 4] (the ranks reducing toward a chunk's root clockwise and "
     'counter-clockwise: docs/DESIGN.md "Single-cycle ring")'),
    (_sc("steps_per_group", 14),
     "single_cycle.steps_per_group should be 8, 2 * ceil((n-1)/2) for its replica_group of 8 "
     'ranks, not 14 (one cycle: docs/DESIGN.md "Single-cycle ring")'),
], ids=["extra-pair", "swapped", "stranger", "ccw-forward", "ccw-not-a-reverse", "arcs",
        "ring-steps"])
def test_a_single_cycle_section_other_than_its_channels_is_refused(scr8_out, tmp_path, edit,
                                                                   says):
    """scr8_out's section (see the fixture) with one value changed: each simulated as a
    match, but a CCW order not the CW ring backward (held only to be a ring of the group),
    which was a mismatch blamed on rank 0's legs.bin; refused naming the key."""
    out = copy(scr8_out, tmp_path)
    _retrigger(out, 0, edit)
    rehash(out)
    assert refused(out) == f"{_field(out)}{says}"


def test_a_ccw_order_starting_at_another_rank_is_the_same_ring_backward(scr8_out, tmp_path):
    """FORMATS §1.1: a CCW order is the reversed ring, a cycle: lower writes it from the
    group's smallest rank, but from any other rank it is the same ring, a match still."""
    out = copy(scr8_out, tmp_path)
    _retrigger(out, 0, lambda t: t["channels"][1].__setitem__(
        "order", [5, 4, 3, 2, 1, 0, 7, 6]))
    rehash(out)
    res = simulate_output(out)
    assert res.ok, res.error


@pytest.mark.parametrize("edit, says", [
    (_sc("pairs", [[2, 3], [0, 1]]),
     f"single_cycle.pairs should be [[0, 1], [2, 3]], the ids of channels in pairs, not "
     f"[[2, 3], [0, 1]] {PAIRS_WHY}"),
    (_sc("pairs", [[0, 2], [1, 3]]),
     f"single_cycle.pairs should be [[0, 1], [2, 3]], the ids of channels in pairs, not "
     f"[[0, 2], [1, 3]] {PAIRS_WHY}"),
    (lambda t: t["channels"][3].__setitem__("order", t["channels"][2]["order"]),
     "channels[3].order should be channels[2].order {o2} reversed, not {o2} "
     "(single_cycle.pairs[1] makes channel 3 the CCW channel of 2: " + REVERSED_WHY),
], ids=["pairs-reordered", "pairs-across", "second-ccw-forward"])
def test_each_pair_of_two_is_checked(scr8x2_out, tmp_path, edit, says):
    """scr8x2_out: two pairs, in the order of channels; pair 1's CCW order (channel 3) made
    its CW order is refused as pair 0's is."""
    out = copy(scr8x2_out, tmp_path)
    o2 = json.dumps(trigger0(out)["channels"][2]["order"])
    _retrigger(out, 0, edit)
    rehash(out)
    assert refused(out) == f"{_field(out)}{says.format(o2=o2)}"


@pytest.mark.parametrize("edit, says", [
    (_sc("pairs", [[0, 1]]),
     "single_cycle.pairs should be [[0, 0]], the ids of channels in pairs, not [[0, 1]] (a "
     "one-rank group's pair k is channels[k].channel twice, its one channel CW and CCW alike: "
     "FORMATS §1.1)"),
    (_sc("arcs", [1, 0]),
     "single_cycle.arcs should be [0, 0], [ceil((n-1)/2), floor((n-1)/2)] for its replica_group "
     "of 1 rank, not [1, 0] (the ranks reducing toward a chunk's root clockwise and "
     'counter-clockwise: docs/DESIGN.md "Single-cycle ring")'),
    (_sc("steps_per_group", 2),
     "single_cycle.steps_per_group should be 0, 2 * ceil((n-1)/2) for its replica_group of 1 "
     'rank, not 2 (one cycle: docs/DESIGN.md "Single-cycle ring")'),
], ids=["pair", "arcs", "steps"])
def test_a_one_rank_groups_section_is_checked(scr1_out, tmp_path, edit, says):
    out = copy(scr1_out, tmp_path)
    _retrigger(out, 0, edit)
    rehash(out)
    assert refused(out) == f"{_field(out)}{says}"


@pytest.mark.parametrize("edit, says", [
    (lambda t: t.pop("single_cycle"), "field triggers[0].single_cycle: missing"),
    (lambda t: t["single_cycle"].pop("arcs"), "field triggers[0].single_cycle.arcs: missing"),
    (_sc("pairs", [[0]]),
     "field triggers[0].single_cycle.pairs[0]: must be a list of 2 integers, not a list (1 item)"),
    (_sc("pairs", [[0, 32]]),
     "field triggers[0].single_cycle.pairs[0][1]: 32 is outside 0..31"),
    (_sc("arcs", [4, "3"]), 'field triggers[0].single_cycle.arcs[1]: must be an integer, not "3"'),
    (_sc("steps_per_group", -8),
     "field triggers[0].single_cycle.steps_per_group: -8 is outside 0..9223372036854775807"),
    # (mutation audit of the thirty-eighth session: arcs is [h_cw, h_ccw], two integers)
    (_sc("arcs", [4, 3, 0]),
     "field triggers[0].single_cycle.arcs: must be a list of 2 integers, not a list (3 items)"),
], ids=["missing", "arcs-missing", "pair-of-one", "channel-32", "arc-string", "steps-negative",
        "arcs-of-three"])
def test_a_single_cycle_section_is_read_with_its_types(scr8_out, tmp_path, edit, says):
    """docs/SIMULATOR.md §1: every key the simulator reads is required and typed. Deleted
    or mistyped, the section simulated as a match; the output cannot be read (exit 2)."""
    out = copy(scr8_out, tmp_path)
    _retrigger(out, 0, edit)
    rehash(out)
    assert _typed_refusal(out) == f"{out / 'manifest.json'}: {says}"


# ---------------------------------------------------------------------------- HIER legs

@pytest.mark.parametrize("edit, says", [
    (lambda p: p["single_cycle"].__setitem__("pairs", [[2, 1]]),
     "hier.legs[1].plans[0].single_cycle.pairs should be [[1, 2]], the ids of "
     "hier.legs[1].plans[0].channels in pairs, not [[2, 1]] " + PAIRS_WHY),
    (lambda p: p["channels"][1].__setitem__("order", [0, 1, 2]),
     "hier.legs[1].plans[0].channels[1].order should be hier.legs[1].plans[0].channels[0].order "
     "[0, 1, 2] reversed, not [0, 1, 2] (hier.legs[1].plans[0].single_cycle.pairs[0] makes "
     "channel 2 the CCW channel of 1: " + REVERSED_WHY),
    (lambda p: p["single_cycle"].__setitem__("arcs", [2, 0]),
     "hier.legs[1].plans[0].single_cycle.arcs should be [1, 1], [ceil((n-1)/2), floor((n-1)/2)] "
     "for hier.legs[1].groups[0].group of 3 ranks, not [2, 0] (the ranks reducing toward a "
     "chunk's root clockwise and counter-clockwise: docs/DESIGN.md \"Single-cycle ring\")"),
    (lambda p: p["single_cycle"].__setitem__("steps_per_group", 4),
     "hier.legs[1].plans[0].single_cycle.steps_per_group should be 2, 2 * ceil((n-1)/2) for "
     'hier.legs[1].groups[0].group of 3 ranks, not 4 (one cycle: docs/DESIGN.md "Single-cycle '
     'ring")'),
    (lambda p: p["single_cycle"].__setitem__("pairs", [[1, 2], [1, 2]]),
     "hier.legs[1].plans[0].single_cycle.pairs should list the 1 pair "
     "hier.legs[1].plans[0].chunk.channels counts, not 2 (one [CW channel, CCW channel] per chunk "
     "channel: FORMATS §1.1)"),
], ids=["pairs", "ccw-forward", "arcs", "steps", "extra-pair"])
def test_a_single_cycle_leg_plans_section_other_than_its_channels_is_refused(
        hier3_out, tmp_path, edit, says):
    """As a flat trigger's, in positions of each group that runs the plan; hier3_out's
    inter_allr plan 0 (see the fixture). Each edit simulated as a match (the CCW order: a
    mismatch blamed on rank 0's legs.bin); it is refused naming the key."""
    out = copy(hier3_out, tmp_path)
    _rehier(out, lambda legs: edit(legs[1]["plans"][0]))
    assert refused(out) == f"{_field(out)}{says}"


def test_single_cycle_on_a_leg_of_another_engine_or_missing_is_refused(hier3_out, tmp_path):
    """FORMATS §1.1: a HIER leg's plans add the engine's extras, ``single_cycle`` on a
    SINGLE_CYCLE_RING leg only. inter_allr's section copied onto the RING intra_redsct
    leg's plan simulated as a match: refused (exit 1); deleted from inter_allr's plan, or
    mistyped there, it is a key the simulator reads (exit 2)."""
    out = copy(hier3_out, tmp_path)
    _rehier(out, lambda legs: legs[0]["plans"][0].__setitem__(
        "single_cycle", legs[1]["plans"][0]["single_cycle"]))
    assert refused(out) == (f"{_field(out)}hier.legs[0].plans[0] has a single_cycle section on "
                            "a \"RING\" leg (only a SINGLE_CYCLE_RING leg's plans have one: "
                            "FORMATS §1.1)")
    out = copy(hier3_out, tmp_path, "gone")
    _rehier(out, lambda legs: legs[1]["plans"][1].pop("single_cycle"))
    assert _typed_refusal(out) == (f"{out / 'manifest.json'}: field "
                                   "triggers[0].hier.legs[1].plans[1].single_cycle: missing")
    out = copy(hier3_out, tmp_path, "typed")
    _rehier(out, lambda legs: legs[1]["plans"][0]["single_cycle"].__setitem__(
        "steps_per_group", "2"))
    assert _typed_refusal(out) == (f"{out / 'manifest.json'}: field triggers[0].hier.legs[1]"
                                   '.plans[0].single_cycle.steps_per_group: must be an integer, '
                                   'not "2"')


# ---------------------------------------------------------------- legs.bin half, ring_step

@pytest.fixture(scope="module")
def scr2_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1 Mi elements over ranks 0 and 1 forced to SINGLE_CYCLE_RING:
    chunks of 262144 elements (seed 001 §2), one chunk channel, so a chunk group holds
    2 x 262144 = 524288 elements and there are two (pgta 2); CW channel 0 and CCW channel 1
    both ordered [0, 1] (the reversed ring [1, 0] from rank 0); n = 2: arcs [1, 0]."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 2, 1 << 20),
                     tmp_path_factory.mktemp("scr2") / "o", algo="single_cycle_ring")
    t = trigger0(out)
    assert t["chunk"] == {"channels": 1, "chunk_size_n": 262144, "pgta": 2,
                          "tail_chunk": 262144}
    assert t["channels"] == [{"channel": 0, "order": [0, 1]}, {"channel": 1, "order": [0, 1]}]
    assert t["single_cycle"] == {"pairs": [[0, 1]], "arcs": [1, 0], "steps_per_group": 2}
    return out


def _set_leg_field(out: Path, rank: int, record: int, offset: int, fmt: str, value: int,
                   want: tuple) -> None:
    """Rank ``rank``'s legs.bin record ``record`` is ``want`` (channel, leaf, half,
    ring_step, elem_start, num_elements: FORMATS §3's offsets 6, 12, 13, 60, 48, 56); its
    field at ``offset`` (``fmt``) is set to ``value``; re-hashed."""
    p = out / f"rank-{rank:04d}" / "legs.bin"
    b = bytearray(p.read_bytes())
    base = 64 * record
    got = (b[base + 6], b[base + 12], b[base + 13], struct.unpack_from("<I", b, base + 60)[0],
           struct.unpack_from("<Q", b, base + 48)[0], struct.unpack_from("<I", b, base + 56)[0])
    assert got == want
    struct.pack_into(fmt, b, base + offset, value)
    p.write_bytes(bytes(b))
    rehash(out)


HALF_WHY = ("(a SINGLE_CYCLE_RING trigger chunks as the ring: docs/DESIGN.md \"Leg layouts\")")
STEP_WHY = "(docs/DESIGN.md \"Single-cycle ring\", FORMATS §3)"


@pytest.mark.parametrize("record, leg, says", [
    # CW send of rank 1's chunk in group 1: [524288 + 262144, + 262144) is position 1's
    # chunk, its second half from 786432 + 131072
    (7, (0, 1, 1, 2, 917504, 131072), "half should be 1, not 0: elements [917504, 1048576) "
     "are half 1 of their chunk"),
    # CCW direct_copy_send of rank 0's own chunk (position 0) in group 1: its first half
    (16, (1, 5, 0, 4, 524288, 131072), "half should be 0, not 1: elements [524288, 655360) "
     "are half 0 of their chunk"),
])
def test_a_single_cycle_legs_half_is_the_half_chunk_its_elements_sit_in(
        scr2_out, tmp_path, record, leg, says):
    """FORMATS §3 ``half``: the half-chunk of the leg; a flat SINGLE_CYCLE_RING trigger
    chunks as the ring does (docs/DESIGN.md "Leg layouts"), so the leg's elements name it,
    as a flat RING leg's.  The other half, in range, simulated as a match until 2026-12-07
    (docs/SIMULATOR.md §7 had it range-checked only)."""
    out = copy(scr2_out, tmp_path)
    _set_leg_field(out, 0, record, 13, "<B", 1 - leg[2], leg)
    assert refused(out) == (f"{out / 'rank-0000'}: field half, rank 0, artifact legs.bin, "
                            f"record {record}: {says} {HALF_WHY}")


@pytest.mark.parametrize("record, leg, value, says", [
    # CW send of position 1's chunk (root rank 1, 1 hop ahead on channel 0) in group 1:
    # step h_cw - 1 = 0; the CW channel's steps are 0 and 1 (the root's recv_reduce_copy),
    # so 2 a group: 0 + 1 x 2
    (6, (0, 1, 0, 2, 786432, 131072), 0, "ring_step should be 2, the single-cycle schedule's, "
     "not 0: send of elements [786432, 917504) on the CW channel, the partial 1 hop from its "
     "root: step h_cw - 1 = 0 of chunk group 1 (2 steps a group on this channel; h_cw 1, "
     "2 ranks)"),
    # CW recv_reduce_copy at the root (position 0, rank 0 itself): step h_cw = 1; 1 + 1 x 2
    (8, (0, 3, 0, 3, 524288, 131072), 1, "ring_step should be 3, the single-cycle schedule's, "
     "not 1: recv_reduce_copy of elements [524288, 655360) on the CW channel, the chunk's "
     "root: step h_cw = 1 of chunk group 1 (2 steps a group on this channel; h_cw 1, "
     "2 ranks)"),
    # CCW direct_recv of position 1's result: its root is 1 hop ahead on channel 1, so 2 - 1
    # = 1 behind: step h_cw + 1 = 2; the CCW channel's steps are 1 (the root's
    # direct_copy_send) and 2, so 3 a group: 2 + 1 x 3
    (18, (1, 7, 0, 5, 786432, 131072), 4, "ring_step should be 5, the single-cycle schedule's, "
     "not 4: direct_recv of elements [786432, 917504) on the CCW channel, the result from its "
     "root, 1 hop behind: step h_cw + 1 = 2 of chunk group 1 (3 steps a group on this "
     "channel; h_cw 1, 2 ranks)"),
])
def test_a_single_cycle_legs_ring_step_is_its_schedules(
        scr2_out, tmp_path, record, leg, value, says):
    """FORMATS §3 ``ring_step``: the step within the chunk group + the group x (1 + the
    channel's largest step); docs/DESIGN.md "Single-cycle ring" fixes a SINGLE_CYCLE_RING
    leg's step from what the simulator reads: with its chunk's root (the member at the
    chunk position of ``elem_start``) ``i`` hops ahead on the channel's ring, ``h_cw - i`` on
    the way to the root, ``h_cw`` at it and ``h_cw + n - i`` coming back.  Another value in
    range simulated as a match until 2026-12-07."""
    out = copy(scr2_out, tmp_path)
    _set_leg_field(out, 0, record, 60, "<I", value, leg)
    assert refused(out) == (f"{out / 'rank-0000'}: field ring_step, rank 0, channel "
                            f"{leg[0]}, artifact legs.bin, record {record}: {says} {STEP_WHY}")


def test_a_five_rank_single_cycle_ring_step_on_a_rank_before_the_root(tmp_path):
    """Five ranks (arcs [2, 2]), 5000 elements: one chunk group of five 1000-element chunks
    (halves of 500).  Rank 1's recv_reduce_send of position 2's second half, [2500, 3000),
    passes the partial on toward rank 2, 1 hop ahead on the CW ring [0..4]: step h_cw - 1 = 1
    of group 0 (legs.bin record 5, after the handshake's two legs and the send of position
    3's halves)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 5, 5000), tmp_path / "o",
                     algo="single_cycle_ring")
    assert trigger0(out)["single_cycle"]["arcs"] == [2, 2]
    _set_leg_field(out, 1, 5, 60, "<I", 0, (0, 2, 1, 1, 2500, 500))
    assert refused(out) == (
        f"{out / 'rank-0001'}: field ring_step, rank 1, channel 0, artifact legs.bin, record 5: "
        "ring_step should be 1, the single-cycle schedule's, not 0: recv_reduce_send of "
        "elements [2500, 3000) on the CW channel, the partial 1 hop from its root: step "
        f"h_cw - 1 = 1 of chunk group 0 (5 steps a group on this channel; h_cw 2, 5 ranks) "
        f"{STEP_WHY}")


LEAF_WHY = "(docs/DESIGN.md \"Single-cycle ring\")"
#: DESIGN "Single-cycle ring" on a CW channel, the root i = 1 hop ahead and h_cw = 1 (n = 2
#: or 3): this rank is the farthest of the CW arc, so it sends its input (since 2026-12-07,
#: fixer 57a, the one leaf the position calls; before, any of the partial's or the result's)
NOT_ROOT = "leaf should be send (the partial on its way to the root)"


@pytest.mark.parametrize("also", [None, (6, 60, "<I", 0, (0, 1, 0, 2, 786432, 131072))])
def test_a_single_cycle_root_leaf_before_the_root_is_named(scr2_out, tmp_path, also):
    """scr2_out's CW send (leaf 1) of position 1's second half in group 1 (its root rank 1,
    1 hop ahead) made direct_copy_send (leaf 5, the root's: same sdma_op and neigh): DESIGN
    "Single-cycle ring" calls send or recv_reduce_send there on the way to the root, the
    result's leaves coming back.  It simulated as a match, and switched off its channel's
    ring_step check, so a second edit (record 6's ring_step 2 -> 0) was a match too (review
    55t)."""
    out = copy(scr2_out, tmp_path)
    _set_leg_field(out, 0, 7, 12, "<B", 5, (0, 1, 1, 2, 917504, 131072))
    if also:
        _set_leg_field(out, 0, *also)
    assert refused(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record 7: "
        f"{NOT_ROOT}, not direct_copy_send: elements [917504, 1048576) on the CW channel are "
        f"of the chunk whose root is 1 hop ahead, on the channel's ring of 2 (arcs [1, 0]) "
        f"{LEAF_WHY}")


def test_a_single_cycle_send_at_the_root_is_named(scr2_out, tmp_path):
    """scr2_out's CCW direct_copy_send (leaf 5) at the root of rank 0's own chunk in group 1
    made send (leaf 1, same sdma_op and neigh): of two ranks (arcs [1, 0]) the CCW channel's
    root sends the result back, direct_copy_send, and there is no CCW partial to direct_recv
    (DESIGN "Single-cycle ring", two ranks).  Named, since 2026-12-07 (fixer 57a), with that one
    leaf, and before the ring pairing (a data leg's elements are borne out by its BDs)."""
    out = copy(scr2_out, tmp_path)
    _set_leg_field(out, 0, 16, 12, "<B", 1, (1, 5, 0, 4, 524288, 131072))
    assert refused(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 1, artifact legs.bin, record 16: "
        "leaf should be direct_copy_send (the root's), not send: elements [524288, 655360) "
        "on the CCW channel are of this rank's own chunk, it is their root, on the channel's "
        f"ring of 2 (arcs [1, 0]) {LEAF_WHY}")


@pytest.mark.parametrize("sdma_too", [False, True])
def test_a_single_cycle_root_leaf_made_send_is_named_at_leaf(scr2_out, tmp_path, sdma_too):
    """scr2_out's CW recv_reduce_copy (leaf 3: sdma_op 4, neigh 0 LOCAL, reduction_type 0) at
    the root of rank 0's own chunk in group 1, H0 [524288, 655360), made send (leaf 1), and
    with its sdma_op (byte 7) made send's 2 too: at i = 0 DESIGN "Single-cycle ring" calls
    the root's leaves, of which only recv_reduce_copy is LOCAL with a reduction_type.  Named
    at sdma_op, or with the sdma_op edited at reduction_type, until 2026-12-07 (review 55t's
    Left)."""
    out = copy(scr2_out, tmp_path)
    _set_leg_field(out, 0, 8, 12, "<B", 1, (0, 3, 0, 3, 524288, 131072))
    if sdma_too:
        _set_leg_field(out, 0, 8, 7, "<B", 2, (0, 1, 0, 3, 524288, 131072))
    assert refused(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record 8: "
        "leaf should be recv_reduce_copy, not send: elements [524288, 655360) on the CW "
        "channel are of this rank's own chunk, it is their root, where the single-cycle step "
        "loop calls recv_reduce_copy with the record's neigh 0 and a reduction_type "
        "(docs/DESIGN.md \"Single-cycle ring\", FORMATS §3)")


# ---------------------------------------------------------------- a HIER single-cycle leg
@pytest.fixture(scope="module")
def hier_scr_out(tmp_path_factory) -> Path:
    """A bf16 HIER all-reduce of 5000 elements over 48 ranks at LNC 2, three nodes of 16 (a
    node of four trn2 devices), ``--algo inter_allr:single_cycle_ring``: rank 0's local index
    0 holds slice [0, 320) (docs/DESIGN.md "HIER": 5000 by even_split in 16 slices of 320, the
    last 200) and all-reduces it across the nodes with ranks 16 and 32, a SINGLE_CYCLE_RING
    leg over 3 ranks (h_cw = ceil(2 / 2) = 1) on the CW channel 1 ([0, 16, 32]) and the CCW
    channel 2 ([0, 32, 16]). Its plan chunks the slice as the ring (DESIGN "Leg layouts"):
    3 positions of at most 128, the one chunk group re-clamped to ceil(320 / 3) = 107 rounded
    up to 108, so position 1 (rank 16) is [108, 216), halves [108, 162) and [162, 216),
    position 2 (rank 32) [216, 320), halves [216, 270) and [270, 320)."""
    from irsim import SMALL_TWO_NODE_TOPOLOGY, ar, collective_spec
    root = tmp_path_factory.mktemp("hier_scr")
    topo = root / "topo.json"
    topo.write_text(json.dumps(SMALL_TWO_NODE_TOPOLOGY))
    out = lower_spec(collective_spec([ar(5000)], 48, lnc=2), root / "o",
                     algo="inter_allr:single_cycle_ring", topology=str(topo))
    t = json.loads((out / "manifest.json").read_text())["triggers"][0]
    leg = next(x for x in t["hier"]["legs"] if x["name"] == "inter_allr")
    assert leg["algorithm"] == "SINGLE_CYCLE_RING" and t["hier"]["slices"][0] == [0, 320]
    assert leg["groups"][0] == {"group": [0, 16, 32], "plan": 0}
    plan = leg["plans"][0]
    assert plan["chunk"] == {"channels": 1, "chunk_size_n": 128, "pgta": 1, "tail_chunk": 108}
    assert plan["channels"] == [{"channel": 1, "order": [0, 1, 2]},
                                {"channel": 2, "order": [0, 2, 1]}]
    return out


def _leg_at(out: Path, rank: int, channel: int, leaf: int, start: int) -> int:
    """The legs.bin record of ``rank`` on ``channel`` of ``leaf`` from element ``start``."""
    L = np.fromfile(out / f"rank-{rank:04d}" / "legs.bin", F.LEG_DTYPE)
    return int(np.flatnonzero((L["channel"] == channel) & (L["leaf"] == leaf)
                              & (L["elem_start"] == start))[0])


def test_a_hier_single_cycle_legs_half_is_the_half_chunk_of_its_leg_layout(
        hier_scr_out, tmp_path):
    """Rank 0's CW send (leaf 1) of rank 16's partial H0 [108, 162) with its half (byte 13)
    said 1: a HIER leg's half was range-checked only until 2026-12-07 (SIMULATOR §7), and
    simulated as a match."""
    out = copy(hier_scr_out, tmp_path)
    rec = _leg_at(out, 0, 1, 1, 108)
    _set_leg_field(out, 0, rec, 13, "<B", 1, (1, 1, 0, 0, 108, 54))
    assert refused(out) == (
        f"{out / 'rank-0000'}: field half, rank 0, artifact legs.bin, record {rec}: half "
        "should be 0, not 1: elements [108, 162) are half 0 of their chunk (a HIER inter_allr "
        "leg chunks as the ring over its slice [0, 320) of the message: docs/DESIGN.md \"Leg "
        "layouts\")")


@pytest.mark.parametrize("channel,leaf,start,count,step,value,says", [
    # CW direct_recv (leaf 7) of position 2's result (rank 32, its root 2 hops ahead on the
    # CW ring, 1 behind): step h_cw + n - i = 1 + 3 - 2 = 2; the CW channel's steps are 0
    # (send), 1 (the root's recv_reduce_copy_send) and 2: 3 a group
    (1, 7, 216, 54, 2, 3, "direct_recv of elements [216, 270) on the CW channel of the HIER "
     "inter_allr leg, the result from its root, 1 hop behind: step h_cw + 1 = 2"),
    # CCW direct_copy_send (leaf 5) at the root of position 0 (rank 0 itself): step h_cw = 1
    (2, 5, 0, 54, 1, 0, "direct_copy_send of elements [0, 54) on the CCW channel of the HIER "
     "inter_allr leg, the chunk's root: step h_cw = 1"),
])
def test_a_hier_single_cycle_legs_ring_step_is_its_schedules(
        hier_scr_out, tmp_path, channel, leaf, start, count, step, value, says):
    """docs/DESIGN.md "Single-cycle ring"'s step identity over the leg's group of 3 (h_cw 1),
    chunk group 0 of the leg's layout; a HIER leg's ring_step was not checked until
    2026-12-07 (SIMULATOR §7) and simulated as a match."""
    out = copy(hier_scr_out, tmp_path)
    rec = _leg_at(out, 0, channel, leaf, start)
    _set_leg_field(out, 0, rec, 60, "<I", value, (channel, leaf, 0, step, start, count))
    assert refused(out) == (
        f"{out / 'rank-0000'}: field ring_step, rank 0, channel {channel}, artifact legs.bin, "
        f"record {rec}: ring_step should be {step}, the single-cycle schedule's, not {value}: "
        f"{says} of chunk group 0 (3 steps a group on this channel; h_cw 1, 3 ranks) "
        f"{STEP_WHY}")


def test_a_hier_single_cycle_root_leaf_before_the_root_is_named(hier_scr_out, tmp_path):
    """Rank 0's CW send (leaf 1) of rank 16's partial H0 [108, 162), 1 hop ahead on the CW
    ring [0, 16, 32], made direct_copy_send (leaf 5): simulated as a match (review 55t)."""
    out = copy(hier_scr_out, tmp_path)
    rec = _leg_at(out, 0, 1, 1, 108)
    _set_leg_field(out, 0, rec, 12, "<B", 5, (1, 1, 0, 0, 108, 54))
    assert refused(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 1, artifact legs.bin, record {rec}: "
        f"{NOT_ROOT}, not direct_copy_send: elements [108, 162) on the CW channel of the HIER "
        f"inter_allr leg are of the chunk whose root is 1 hop ahead, on the channel's ring of 3 "
        f"(arcs [1, 1]) {LEAF_WHY}")


def test_a_hier_single_cycle_root_leaf_made_send_is_named_at_leaf(hier_scr_out, tmp_path):
    """Rank 0's CW recv_reduce_copy_send (leaf 4: sdma_op 4 CCE, neigh 1 NEXT, a
    reduction_type) at the root of its own position's H0 [0, 54) of the HIER inter_allr leg
    (step h_cw = 1) made send (leaf 1): at i = 0 DESIGN "Single-cycle ring" calls the root's
    leaves, of which only recv_reduce_copy_send sends to NEXT with a reduction_type, as the
    flat root leaf's test works out; over the leg's ring [0, 16, 32] (its hops taken from
    the leg's layout)."""
    out = copy(hier_scr_out, tmp_path)
    rec = _leg_at(out, 0, 1, 4, 0)
    _set_leg_field(out, 0, rec, 12, "<B", 1, (1, 4, 0, 1, 0, 54))
    assert refused(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 1, artifact legs.bin, record {rec}: "
        "leaf should be recv_reduce_copy_send, not send: elements [0, 54) on the CW channel of "
        "the HIER inter_allr leg are of this rank's own chunk, it is their root, where the "
        "single-cycle step loop calls recv_reduce_copy_send with the record's neigh 1 and a "
        "reduction_type (docs/DESIGN.md \"Single-cycle ring\", FORMATS §3)")


# ------------------------------------------- the one leaf a position calls (fixer 57a)
SWAP_WHY = "(docs/DESIGN.md \"Single-cycle ring\", FORMATS §3)"


def _named_leaf(out: Path, rank: int, channel: int, record: int, want: str, found: str,
                elems: tuple, where: str, neigh: int) -> str:
    """The line naming ``record``'s leaf: ``want`` where it is ``found``, with the record's
    ``neigh`` and no reduction_type."""
    return (f"{out / f'rank-{rank:04d}'}: field leaf, rank {rank}, channel {channel}, artifact "
            f"legs.bin, record {record}: leaf should be {want}, not {found}: elements "
            f"[{elems[0]}, {elems[1]}) {where}, where the single-cycle step loop calls {want} "
            f"with the record's neigh {neigh} and no reduction_type {SWAP_WHY}")


def test_a_single_cycle_root_direct_copy_send_made_recv_reduce_copy_is_named_at_leaf(
        scr2_out, tmp_path):
    """scr2_out's CCW direct_copy_send (leaf 5: sdma_op 2, neigh 1 NEXT, no reduction_type) at
    the root of rank 0's own chunk in group 1 made recv_reduce_copy (leaf 3, the CW root's
    leaf of two ranks): of two ranks (arcs [1, 0]) the CCW channel's root only sends the
    result back, direct_copy_send (DESIGN "Single-cycle ring", two ranks).  Named at sdma_op
    until 2026-12-07 (fixer 57a: any root leaf was taken at i = 0, so recv_reduce_copy
    passed the leaf check)."""
    out = copy(scr2_out, tmp_path)
    _set_leg_field(out, 0, 16, 12, "<B", 3, (1, 5, 0, 4, 524288, 131072))
    assert refused(out) == _named_leaf(
        out, 0, 1, 16, "direct_copy_send", "recv_reduce_copy", (524288, 655360),
        "on the CCW channel are of this rank's own chunk, it is their root", 1)


def test_a_hier_single_cycle_ccw_root_leaf_made_recv_reduce_copy_is_named_at_leaf(
        hier_scr_out, tmp_path):
    """Rank 0's CCW (channel 2) direct_copy_send (leaf 5) of its own position's H0 [0, 54) on
    the HIER inter_allr leg's ring of 3 (arcs [1, 1]) made recv_reduce_copy: there the CCW
    channel's root calls direct_recv (the CCW partial, neigh 2 PREV) and direct_copy_send
    (neigh 1 NEXT); the record's neigh 1 is direct_copy_send's."""
    out = copy(hier_scr_out, tmp_path)
    rec = _leg_at(out, 0, 2, 5, 0)
    _set_leg_field(out, 0, rec, 12, "<B", 3, (2, 5, 0, 1, 0, 54))
    assert refused(out) == _named_leaf(
        out, 0, 2, rec, "direct_copy_send", "recv_reduce_copy", (0, 54),
        "on the CCW channel of the HIER inter_allr leg are of this rank's own chunk, it is "
        "their root", 1)


def test_a_single_cycle_send_made_recv_reduce_copy_before_the_root_is_named_at_leaf(
        scr2_out, tmp_path):
    """scr2_out's CW send (leaf 1: sdma_op 2, neigh 1, no reduction_type) of position 1's H1 in
    group 1 made recv_reduce_copy: rank 1, the chunk's root, is 1 hop ahead on the CW ring
    and h_cw = 1, so this rank is the farthest of the CW arc and sends its input (send);
    DESIGN calls nothing else there.  "Ambiguous" until 2026-12-07 (send and
    direct_recv_send both fit the record), so named at sdma_op (fixer 57a)."""
    out = copy(scr2_out, tmp_path)
    _set_leg_field(out, 0, 7, 12, "<B", 3, (0, 1, 1, 2, 917504, 131072))
    assert refused(out) == _named_leaf(
        out, 0, 0, 7, "send", "recv_reduce_copy", (917504, 1048576),
        "on the CW channel are of the chunk whose root is 1 hop ahead", 1)


@pytest.mark.parametrize("record, leg, new, sdma, want, neigh, where", [
    # CCW direct_recv (leaf 7, sdma_op 0, neigh 2) of position 1's H0 in group 0: rank 1, the
    # root, is 1 hop ahead on the CCW ring; the CCW arc is h_ccw = 0 long, so the result
    # comes back here, the farthest (n - i = 1 = h_cw): direct_recv. Made send with sdma_op
    # 2: named at n_tiles ("a data leg with no tiles")
    (14, (1, 7, 0, 2, 262144, 131072), 1, 2, "direct_recv", 2,
     "on the CCW channel are of the chunk whose root is 1 hop ahead"),
    # CW send (leaf 1, sdma_op 2, neigh 1) of position 1's H0 in group 0: the farthest of the
    # CW arc (i = h_cw = 1), send. Made direct_recv with sdma_op 0: named at dma_count
    (2, (0, 1, 0, 0, 262144, 131072), 7, 0, "send", 1,
     "on the CW channel are of the chunk whose root is 1 hop ahead"),
])
def test_a_single_cycle_leaf_edited_with_its_sdma_op_is_named_at_leaf_not_its_counts(
        scr2_out, tmp_path, record, leg, new, sdma, want, neigh, where):
    """A leaf edited together with its sdma_op (byte 7) keeps its BD and tile counts: the
    count checks named n_tiles or dma_count first until 2026-12-07 (review 56q: 5 of 240
    flips; fixer 57a)."""
    out = copy(scr2_out, tmp_path)
    _set_leg_field(out, 0, record, 12, "<B", new, leg)
    _set_leg_field(out, 0, record, 7, "<B", sdma, (leg[0], new) + leg[2:])
    found = {1: "send", 7: "direct_recv"}[new]
    assert refused(out) == _named_leaf(out, 0, leg[0], record, want, found,
                                       (leg[4], leg[4] + leg[5]), where, neigh)


def test_a_ccw_root_direct_recv_made_direct_copy_send_with_its_sdma_op_is_named_at_leaf(
        tmp_path):
    """Five ranks (arcs [2, 2]), 5000 elements, chunks of 1000 (halves of 500): rank 1 is the
    root of position 1, [1000, 2000); its CCW channel there calls direct_recv (the CCW
    partial: sdma_op 0, neigh 2) and direct_copy_send (the result: sdma_op 2, neigh 1),
    records 18 and 19 for H0.  Record 18's leaf made direct_copy_send and its sdma_op 2: the
    leaf is one the root calls, but its neigh is direct_recv's and it has no tiles; named at
    n_tiles until 2026-12-07 (fixer 57a)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 5, 5000), tmp_path / "o",
                     algo="single_cycle_ring")
    assert trigger0(out)["single_cycle"]["arcs"] == [2, 2]
    _set_leg_field(out, 1, 18, 12, "<B", 5, (1, 7, 0, 2, 1000, 500))
    _set_leg_field(out, 1, 18, 7, "<B", 2, (1, 5, 0, 2, 1000, 500))
    assert refused(out) == _named_leaf(
        out, 1, 1, 18, "direct_recv", "direct_copy_send", (1000, 1500),
        "on the CCW channel are of this rank's own chunk, it is their root", 2)
