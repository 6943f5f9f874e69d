"""What ``simulate`` did not check of a HIER trigger until 2026-12-05 (docs/SIMULATOR.md
§1), each refused on an output hand-edited and re-hashed so that the checksums pass: two
legs of one trigger sharing a channel id (docs/DESIGN.md "HIER": the legs of one trigger use
disjoint channel ids), and a HIER leg's buffer off DESIGN's offset (RECV at scratch 0, MID
at one space, ...: it was held to its region only).

The expected channel ids and offsets are worked out here from the docs, not read back from
``lower``: each fixture asserts them first."""

from __future__ import annotations

from pathlib import Path

import pytest

import nrtrewrite.compose.hier as hier_mod
import nrtrewrite.simulate.triggers as triggers_mod
from nrtrewrite.simulate import simulate_output
from test_simulate import coll_spec, lower_spec
from test_simulate_kick_leaf import _rehier, copy, refused, trigger0

#: docs/TOPOLOGY.md §4 on trn2: two ranks of each node of two nodes (LNC 2), 8 a node
HIER16 = list(range(8)) + list(range(64, 72))
DISJOINT_WHY = ("(the legs of one trigger use disjoint channel ids, so a rank still in one leg "
                "never consumes an increment a faster peer meant for its next: docs/DESIGN.md "
                "\"HIER\")")


def _field(out: Path) -> str:
    return f"{out / 'manifest.json'}: field triggers[0]: "


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


def test_the_output_simulates_clean(hier16_out):
    res = simulate_output(hier16_out)
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
    check it is refused, naming intra_allg's plan; with the check taken out it is a match
    again, so nothing else refuses it."""
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
    assert simulate_output(out).ok


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
    (_place(0, 2, "scratch", 2000), 'hier.legs[0].buffers[2] (role recv) is {"offset": 2000, '
     '"region": "scratch"}, not {"offset": 0, "region": "scratch"} ' + OFFSETS_WHY),
    (_place(0, 1, "gw", 2000), 'hier.legs[0].buffers[1] (role out) is {"offset": 2000, '
     '"region": "gw"}, not {"offset": 2000, "region": "scratch"} ' + OFFSETS_WHY),
    (_place(1, 1, "gw", 0), 'hier.legs[1].buffers[1] (role gw2) is {"offset": 0, "region": '
     '"gw"}, not {"offset": 2000, "region": "gw"} ' + OFFSETS_WHY),
    (_place(1, 2, "scratch", 0), 'hier.legs[1].buffers[2] (role in) is {"offset": 0, '
     '"region": "scratch"}, not {"offset": 2000, "region": "scratch"} ' + OFFSETS_WHY),
    (_place(1, 3, "scratch", 6000), 'hier.legs[1].buffers[3] (role recv) is {"offset": 6000, '
     '"region": "scratch"}, not {"offset": 4000, "region": "scratch"} ' + OFFSETS_WHY),
    (_place(1, 4, "scratch", 4002), 'hier.legs[1].buffers[4] (role recv2) is {"offset": 4002, '
     '"region": "scratch"}, not {"offset": 6000, "region": "scratch"} ' + OFFSETS_WHY),
    (lambda legs: legs[2]["buffers"].append({"offset": 0, "region": "scratch", "role": "recv"}),
     "hier.legs[2].buffers[1] (role recv) is not a view of intra_allg in scratch or gw: its "
     "views there are gw (a leg lists only the roles that live in scratch or gw: FORMATS §1.1, "
     "docs/DESIGN.md \"HIER\")"),
    (lambda legs: legs[0]["buffers"][1].__setitem__("role", "mid"),
     'hier.legs[0].buffers[1].role "mid" is not in, out, recv, recv2, gw or gw2 (FORMATS '
     "§1.1)"),
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
