"""``schedule --trigger K`` plans only K (docs/CLI.md "schedule"): what it shows is what the
plan of every trigger shows, and a refusal of K itself is still one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.cli.schedule import schedule_ops
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.reader import read_model

FIX = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.neff")))
def test_a_trigger_planned_alone_gives_the_ops_of_the_whole_plan(name):
    """Every trigger K of every fixture, on every rank of its group: the ops of K from a plan
    of K alone are those of K from the plan of every trigger (the path ``schedule`` took
    before, and ``lower`` takes), byte for byte as JSON: its legs, steps, elements, peers,
    waits and the entry handshake's semaphore (every fixture's on SEM_ENTRY_POST: the test
    after this one has a trigger off it)."""
    m = read_model(FIX / name)
    whole = plan_lowering(m, LowerOptions())
    assert len(whole.triggers) == len(m.triggers)
    for tp in whole.triggers:
        k = tp.trigger.ordinal
        alone = plan_lowering(m, LowerOptions(), only={k})
        assert [p.trigger.ordinal for p in alone.triggers] == [k]
        for rank in tp.group:
            want = json.dumps(list(schedule_ops(whole, rank, {k})))
            assert json.dumps(list(schedule_ops(alone, rank, {k}))) == want, (name, k, rank)


def test_a_trigger_alone_keeps_the_handshake_semaphore_the_triggers_before_it_give(tmp_path):
    """No fixture has a trigger off SEM_ENTRY_POST (9). The reproducer of
    tests/test_entryslots.py: rank 1's third trigger counts its entry handshake on
    entry_post 176, the groups before it meeting on 9 (docs/DESIGN.md "Entry handshake").
    Planned alone it keeps 176 (its slot allotted over every trigger's group, not its own
    alone, which would give 9), in JSON and in the rich view's title."""
    from test_simulate import _overlapping_subgraphs_spec

    from nrtrewrite.neff.assembler import assemble_spec
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(_overlapping_subgraphs_spec()))
    whole = json.loads(_cli("schedule", neff, "--rank", 1, "--algo", "ring", "--json").stdout)
    res = _cli("schedule", neff, "--rank", 1, "--algo", "ring", "--trigger", 2, "--json")
    assert res.exit_code == 0, res.output
    (op,) = json.loads(res.stdout)["ops"]
    assert (op["trigger"], op["entry_post_sem"]) == (2, 176)
    assert op == whole["ops"][2]
    text = _cli("schedule", neff, "--rank", 1, "--algo", "ring", "--trigger", 2).stdout
    assert "rank 1 trigger 2 REDUCE_SCATTER RING (flat) handshake on entry_post 176" in text, text


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="nrtrewrite")


def _model(tmp_path, ranks: int, triggers: list[dict]) -> Path:
    from conftest import sp, unvalidated_spec

    from nrtrewrite.neff.assembler import assemble_spec

    def mutate(s):
        s["header"]["lnc_size"] = 2
        s["subgraphs"][0]["replica_groups"] = [list(range(ranks))]
        sp(s)[:] = triggers
    path = tmp_path / "m.neff"
    path.write_bytes(assemble_spec(unvalidated_spec(mutate)))
    return path


def _ar(**kw):
    body = {"dtype": "bf16", "op": "add", "src": "in", "dst": "out", "num_elements": 64}
    body.update(kw)
    return {"all_reduce": body}


def test_a_refusal_of_the_trigger_shown_is_one_line_and_another_triggers_prepare_is_not(
        tmp_path, monkeypatch):
    """``--algo single_step_mesh`` over 9 ranks: trigger 1, in place (tmp into tmp), is
    refused by its engine's prepare (a stand-in refusal, conftest's
    refuse_in_place_single_step_mesh: until 2026-12-06 lower refused it so, its 9 sources
    chaining through OUT; it lowers now); trigger 0 lowers. ``--trigger 1``: the one-line
    error at trigger 1's instruction, as ``lower`` gives it, nothing on stdout. ``--trigger
    0``: trigger 0's schedule (its plan does not need trigger 1's; until 2026-12-06 schedule
    planned every trigger and refused with trigger 1's line)."""
    from conftest import STAND_IN_REFUSAL, refuse_in_place_single_step_mesh
    refuse_in_place_single_step_mesh(monkeypatch)
    path = _model(tmp_path, 9, [_ar(), _ar(src="tmp", dst="tmp")])
    want = (f"nrtrewrite: error: {path}: member sg00/sp.bin, subgraph sg00, stream sp, "
            f"instruction 1, trigger 1: SINGLE_STEP_MESH in place over 9 ranks: "
            f"{STAND_IN_REFUSAL}")
    res = _cli("schedule", path, "--rank", 0, "--trigger", 1, "--algo", "single_step_mesh")
    assert res.exit_code == 2 and res.stdout == ""
    assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith(want), res.stderr
    res = _cli("lower", path, "-o", tmp_path / "o", "--algo", "single_step_mesh")
    assert res.exit_code == 2 and res.stderr.startswith(want), res.stderr
    res = _cli("schedule", path, "--rank", 0, "--trigger", 0, "--algo", "single_step_mesh",
               "--json")
    assert res.exit_code == 0, res.output
    (op,) = json.loads(res.stdout)["ops"]
    assert (op["trigger"], op["algorithm"]) == (0, "SINGLE_STEP_MESH")


def test_another_triggers_selection_refusal_is_still_reported(tmp_path):
    """Every trigger is still selected: ``--algo allreduce:mesh`` with trigger 1 over ranks
    0,1,64,65 (two nodes of 64 ranks at lnc 2, two on each: MESH refused) refuses
    ``--trigger 0`` at trigger 1, as ``lower`` does."""
    import copy

    from conftest import sp, unvalidated_spec

    from nrtrewrite.neff.assembler import assemble_spec

    def mutate(s):
        s["header"]["lnc_size"] = 2
        sp(s)[:] = [_ar()]
        sg1 = copy.deepcopy(s["subgraphs"][0])
        sg1["name"] = "sg01"
        sg1["replica_groups"] = [[0, 1, 64, 65]]
        s["subgraphs"].append(sg1)
    path = tmp_path / "m.neff"
    path.write_bytes(assemble_spec(unvalidated_spec(mutate)))
    res = _cli("schedule", path, "--rank", 0, "--trigger", 0, "--algo", "allreduce:mesh")
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.startswith(
        f"nrtrewrite: error: {path}: member sg01/sp.bin, subgraph sg01, stream sp, "
        "instruction 0, trigger 1: --algo 'allreduce:mesh' forces MESH, refused: "), res.stderr


def test_without_an_override_only_the_trigger_shown_is_selected(monkeypatch):
    """mix8's 9 triggers: ``--trigger 4`` selects trigger 4 alone; under ``--algo ring``
    every trigger is selected (an override's clause that applies to nothing is judged on
    them all: docs/SELECTION.md §8), and ``allgather:ring`` applies to mix8's all-gathers,
    so no warning."""
    import nrtrewrite.select as S
    seen: list[int] = []
    real = S.select

    def counting(trigger, *a, **kw):
        seen.append(trigger.ordinal)
        return real(trigger, *a, **kw)
    monkeypatch.setattr(S, "select", counting)
    res = _cli("schedule", FIX / "mix8.neff", "--rank", 2, "--trigger", 4, "--json")
    assert res.exit_code == 0, res.output
    assert seen == [4]
    seen.clear()
    res = _cli("schedule", FIX / "mix8.neff", "--rank", 2, "--trigger", 4, "--json",
               "--algo", "allgather:ring")
    assert res.exit_code == 0 and res.stderr == "", res.output
    assert seen == list(range(9))
    seen.clear()
    res = _cli("schedule", FIX / "mix8.neff", "--rank", 2, "--trigger", 4, "--json",
               "--algo", "inter_allr:ring")
    assert res.exit_code == 0, res.output
    assert seen == list(range(9))
    assert "clause 'inter_allr:ring' applies to nothing in this model" in res.stderr


def test_a_plan_of_some_triggers_is_not_emitted(tmp_path):
    """A plan of ``only`` some triggers is shown, never emitted (lower.py): writing it is
    refused before anything is written, not a KeyError deep in the rewrite."""
    from nrtrewrite.bundle import write_output
    plan = plan_lowering(read_model(str(FIX / "mix8.neff")), LowerOptions(), only={4})
    with pytest.raises(ValueError, match="a plan of some triggers"):
        write_output(plan, tmp_path / "out", ranks=None, workers=1)
    assert list(tmp_path.iterdir()) == []
