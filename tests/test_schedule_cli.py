"""`nrtrewrite schedule`: --json streamed op by op (the bytes of json.dumps of the whole
document), --trigger, the overview of a rank with many entries, --limit."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import nrtrewrite.cli.schedule as S
from nrtrewrite.cli import main
from nrtrewrite.lower import LowerOptions, plan_lowering, rank_entries
from nrtrewrite.neff.reader import read_model

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def _run(*args):
    return CliRunner().invoke(main, ["schedule", *map(str, args)])


@pytest.mark.parametrize("name,rank", [("mix8", 3), ("two_node128", 64), ("ar2", 0)])
def test_json_is_the_whole_document(name, rank):
    plan = plan_lowering(read_model(FIX / f"{name}.neff"), LowerOptions())
    res = _run(FIX / f"{name}.neff", "--rank", rank, "--json")
    assert res.exit_code == 0, res.output
    assert res.output == json.dumps(S.schedule_json(plan, rank), indent=1) + "\n"


def test_json_of_no_op():
    out = io.StringIO()
    S._write_json(out, 5, iter(()))
    assert out.getvalue() == json.dumps({"rank": 5, "ops": []}, indent=1) + "\n"


def test_trigger_selects_its_entries_only():
    res = _run(FIX / "mix8.neff", "--rank", 2, "--json", "--trigger", 4, "--trigger", 1)
    doc = json.loads(res.output)
    assert [op["trigger"] for op in doc["ops"]] == [1, 4]  # model order
    res = _run(FIX / "mix8.neff", "--rank", 2, "--trigger", 9)
    assert res.exit_code == 2
    assert "no trigger 9 (the model has 9: 0..8)" in res.output


def test_many_entries_get_an_overview_unless_all(monkeypatch):
    plan = plan_lowering(read_model(FIX / "mix8.neff"), LowerOptions())
    n = len(rank_entries(plan, 0))
    monkeypatch.setattr(S, "OVERVIEW_ENTRIES", n - 1)
    res = _run(FIX / "mix8.neff", "--rank", 0)
    assert res.exit_code == 0, res.output
    assert f"rank 0: {n} SPAD entries" in res.output
    assert "--trigger K shows the steps" in res.output
    assert "channel 0" not in res.output  # no step table
    res = _run(FIX / "mix8.neff", "--rank", 0, "--all")
    assert res.output.count("rank 0 trigger ") >= n


def test_limit_cuts_long_tables():
    doc = json.loads(_run(FIX / "ar2.neff", "--rank", 0, "--json", "--algo", "ring").output)
    steps = len(doc["ops"][0]["channels"][0]["steps"])
    assert steps > 3
    res = _run(FIX / "ar2.neff", "--rank", 0, "--algo", "ring", "--limit", 3)
    assert f"... {steps - 3} more steps (--limit 0 shows all)" in res.output


@pytest.mark.parametrize("opt", ["--limit", "--rank", "--trigger"])
def test_negative_ints_are_refused(opt):
    """as `dump --limit -1`: a usage error, nothing on stdout (--limit -1 showed all but one
    step and said "... 9 more steps")"""
    args = {"--limit": ("--rank", 1), "--rank": (), "--trigger": ("--rank", 1)}[opt]
    res = CliRunner().invoke(main, ["schedule", str(FIX / "ar2.neff"), *map(str, args),
                                    opt, "-1"])
    assert res.exit_code == 2
    assert res.stdout == ""
    if opt == "--limit":
        assert "-1 is not in the range x>=0" in res.stderr
    elif opt == "--rank":
        assert "rank -1 is not in the model's world" in res.stderr
    else:
        assert "no trigger -1" in res.stderr


def _assemble(tmp_path, name, groups, ops):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"header: {{name: {name}, lnc_size: 1}}\nsubgraphs:\n  - name: sg00\n"
                    "    vars:\n      - {name: a, type: input, size: 4KiB}\n"
                    "      - {name: b, type: output, size: 4KiB}\n"
                    f"    replica_groups: {groups}\n    engines:\n      sp: {ops}\n")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / f"{name}.neff")])
    assert res.exit_code == 0, res.output
    return tmp_path / f"{name}.neff"


def test_a_rank_without_triggers_says_so(tmp_path):
    empty = _assemble(tmp_path, "empty", "[[0, 1]]", "[nop]")
    res = _run(empty, "--rank", 0)
    assert res.exit_code == 0, res.output
    assert res.output == "rank 0: no triggers (the model has none)\n"
    assert json.loads(_run(empty, "--rank", 0, "--json").output) == {"rank": 0, "ops": []}
    # ranks 2 and 3 are in the world (the second replica group) but in no trigger
    one = _assemble(tmp_path, "one", "[[0, 1], [2, 3]]",
                    "[{all_reduce: {dtype: bf16, op: add, src: a, dst: b, bytes: 4KiB}}]")
    res = _run(one, "--rank", 3)
    assert res.exit_code == 0, res.output
    assert res.output == ("rank 3: no triggers (no trigger of the model has the rank in its "
                          "group)\n")
    assert "no triggers" not in _run(one, "--rank", 1).output


def test_a_trigger_without_the_rank_is_said_skipped():
    res = _run(FIX / "groups.neff", "--rank", 0, "--trigger", 1)  # trigger 1: ranks 4..7
    assert res.exit_code == 0, res.output
    assert res.output.strip() == "rank 0 is not in trigger(s) 1; skipped"


def test_json_errors_come_before_any_output():
    """Every entry is composed before the document begins, so an error gives the error
    document alone on stdout (docs/CLI.md "schedule")."""
    res = CliRunner().invoke(main, ["schedule", str(FIX / "mix8.neff"),
                                    "--rank", "99", "--json"])
    assert res.exit_code == 2
    line, = res.stderr.splitlines()
    assert "rank 99 is not in the model's world" in line
    assert json.loads(res.stdout) == {"rank": 99, "ops": [],
                                      "error": line.removeprefix("nrtrewrite: error: ")}


# docs/FORMATS.md legs.bin `leaf`: every number the composers emit has a name
_FORMATS_LEAVES = {1: "send", 2: "recv_reduce_send", 3: "recv_reduce_copy",
                   4: "recv_reduce_copy_send", 5: "direct_copy_send", 6: "direct_recv_send",
                   7: "direct_recv", 8: "direct_copy", 10: "direct_reduce_send_kangaring",
                   11: "peer_post", 12: "peer_wait", 15: "mark_end", 16: "mesh_send",
                   17: "mesh_reduce", 18: "rdh_copy", 19: "rdh_reduce", 20: "mesh_sync",
                   21: "post_recv", 22: "mark_complete"}


def test_leaf_names_are_those_of_formats_md():
    from nrtrewrite.compose.leaves import leaf_name  # schedule's and dump's one table
    for v, name in _FORMATS_LEAVES.items():
        assert leaf_name(v) == name


def _ops_of(model, rank):
    res = _run(model, "--rank", str(rank), "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.output)["ops"]


def test_kangaring_and_single_cycle_channels_have_the_documented_keys():
    kang = [op for r in (0, 1) for op in _ops_of(str(FIX / "node64.neff"), r)
            if op["algorithm"] == "KANGARING"]
    assert kang
    leaves = {s["leaf"] for op in kang for c in op["channels"] for s in c["steps"]}
    assert {"peer_post", "peer_wait"} <= leaves and leaves <= set(_FORMATS_LEAVES.values())
    roles = set()
    for op in kang:
        for c in op["channels"]:
            roles.add(c["role"])
            want = ({"channel", "role", "prev", "next", "peers", "next_peer_rmtv", "port",
                     "touches", "steps"} if c["role"] == "primary" else
                    {"channel", "role", "primary", "waits_for_legs", "steps"})
            assert set(c) == want
    assert roles == {"primary", "secondary"}
    scr = [op for op in _ops_of(str(FIX / "two_node128.neff"), 0)
           if op["algorithm"] == "SINGLE_CYCLE_RING"]
    assert scr
    for op in scr:
        assert "group" in op
        for c in op["channels"]:
            assert set(c) == {"channel", "direction", "prev", "next", "user_ranks", "pair",
                              "arcs", "steps"}
            assert c["channel"] in c["pair"]
            assert c["direction"] == ("cw", "ccw")[c["pair"].index(c["channel"])]


def test_a_rank_outside_a_world_of_several_runs_names_the_runs(tmp_path):
    """A world of two nodes' first ranks (groups 0..3 and 8..11) is not 0..11: a rank in the
    gap is told the runs, with the model file and the option, by schedule and lower alike."""
    from nrtrewrite.lower import ranks_text
    from nrtrewrite.neff.assembler import assemble_spec

    assert ranks_text([11, 0, 1, 2, 3, 8, 9, 10, 5]) == "0..3, 5, 8..11"
    assert ranks_text(range(0, 20, 2)) == "0, 2, 4, 6, ..."
    spec = {"header": {"name": "gap", "lnc_size": 1},
            "subgraphs": [{"vars": [{"name": "a", "type": "input", "size": 4096},
                                    {"name": "b", "type": "output", "size": 4096}],
                           "replica_groups": [[0, 1, 2, 3], [8, 9, 10, 11]],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "bf16", "op": "add", "src": "a", "dst": "b",
                               "num_elements": 1024}}]}}]}
    neff = tmp_path / "gap.neff"
    neff.write_bytes(assemble_spec(spec))
    want = (f"nrtrewrite: error: {neff}: field --rank: rank 5 is not in the model's world "
            "(ranks 0..3, 8..11)\n")
    for args in (["schedule", str(neff), "--rank", "5"],
                 ["lower", "-q", str(neff), "--rank", "5", "-o", str(tmp_path / "out")]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2 and res.output == want, res.output
    assert not (tmp_path / "out").exists()
