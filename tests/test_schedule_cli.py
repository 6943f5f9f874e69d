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


@pytest.mark.parametrize("json_opt", [[], ["--json"]])
def test_trigger_composes_only_its_triggers(monkeypatch, json_opt):
    """``--trigger K`` composes the entries of K alone, not every trigger of the rank
    (docs/CLI.md "schedule"): mix8.yaml has 9 triggers, each over the group 0..7; groups.neff's
    trigger 1 is over ranks 4..7, so rank 0 composes nothing for it."""
    import nrtrewrite.lower as L
    composed = []
    real = L._entries_of

    def counting(plan, tp, rank):
        composed.append((tp.trigger.ordinal, rank))
        return real(plan, tp, rank)
    monkeypatch.setattr(L, "_entries_of", counting)
    res = _run(FIX / "mix8.neff", "--rank", 2, "--trigger", 4, "--trigger", 1, *json_opt)
    assert res.exit_code == 0, res.output
    assert composed == [(1, 2), (4, 2)]
    composed.clear()
    res = _run(FIX / "mix8.neff", "--rank", 2, "--trigger", 8, *json_opt)
    assert res.exit_code == 0, res.output
    assert composed == [(8, 2)]
    composed.clear()
    res = _run(FIX / "groups.neff", "--rank", 0, "--trigger", 1, *json_opt)
    assert res.exit_code == 0, res.output
    assert composed == []
    composed.clear()
    res = _run(FIX / "mix8.neff", "--rank", 2, *json_opt)  # no --trigger: every trigger
    assert res.exit_code == 0, res.output
    assert composed == [(k, 2) for k in range(9)]


def test_trigger_gives_the_ops_of_the_whole_document():
    """The ops of ``--trigger 7 --trigger 0 --trigger 5 --json`` are those of the whole
    document's triggers 0, 5 and 7, in model order: composed alone, a trigger composes the
    same (HIER and flat)."""
    for name, rank, ks in (("mix8", 5, (7, 0, 5)), ("two_node128", 64, (3, 0, 2)),
                           ("groups", 4, (1, 4))):
        whole = json.loads(_run(FIX / f"{name}.neff", "--rank", rank, "--json").output)
        args = [a for k in ks for a in ("--trigger", k)]
        res = _run(FIX / f"{name}.neff", "--rank", rank, "--json", *args)
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["ops"] == [op for op in whole["ops"]
                                                 if op["trigger"] in ks], name


def test_many_entries_get_an_overview_unless_all(monkeypatch):
    plan = plan_lowering(read_model(FIX / "mix8.neff"), LowerOptions())
    n = len(rank_entries(plan, 0))
    monkeypatch.setattr(S, "OVERVIEW_ENTRIES", n - 1)
    res = _run(FIX / "mix8.neff", "--rank", 0)
    assert res.exit_code == 0, res.output
    assert f"rank 0: {n} SPAD entries" in res.output
    assert "--trigger K shows the legs of trigger K; --all every leg table" in res.output
    assert "channel 0" not in res.output  # no step table
    res = _run(FIX / "mix8.neff", "--rank", 0, "--all")
    assert res.output.count("rank 0 trigger ") >= n


def test_limit_cuts_long_tables():
    doc = json.loads(_run(FIX / "ar2.neff", "--rank", 0, "--json", "--algo", "ring").output)
    steps = len(doc["ops"][0]["channels"][0]["steps"])
    assert steps > 3
    res = _run(FIX / "ar2.neff", "--rank", 0, "--algo", "ring", "--limit", 3)
    assert f"... {steps - 3} more legs (--limit 0 shows all)" in res.output


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


def _four_node_mesh(tmp_path):
    """One bf16 all-reduce of 4096 elements over ranks 0, 64, 128, 192 (lnc 2: one rank on
    each of four trn2 nodes), which the policy runs as an inter-node MESH (SELECTION.md §4:
    Mesh below 64 KiB between nodes, one rank per node)."""
    from nrtrewrite.neff.assembler import assemble_spec
    spec = {"header": {"name": "mesh4", "lnc_size": 2},
            "subgraphs": [{"vars": [{"name": "a", "type": "input", "size": 8192},
                                    {"name": "b", "type": "output", "size": 8192}],
                           "replica_groups": [[0, 64, 128, 192]],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "bf16", "op": "add", "src": "a", "dst": "b",
                               "num_elements": 4096}}]}}]}
    neff = tmp_path / "mesh4.neff"
    neff.write_bytes(assemble_spec(spec))
    return neff


def test_mesh_steps_name_their_peers_waits_and_sources(tmp_path):
    """docs/CLI.md "schedule", mesh / RDH ops: each step adds `to` (the ranks it writes to or
    increments: the channel's `peers`, never the rank itself), `waits` ([[semaphore, value]]:
    an event's `semaphore` and `wait_val` of `events[]`), `sources`, and `from_network` (the
    sending rank) for a `post_recv`.  Rank 64 is position 1 of the group [0, 64, 128, 192]: the
    mesh all-reduce scatters IN block j (1024 elements) to peer j, receives block 1 from every
    peer over the network, reduces its own block and the three received ones (4 sources, once
    the three peers' writes are counted), then sends block 1 to every peer and receives block j
    from peer j (the all-gather)."""
    (op,) = _ops_of(_four_node_mesh(tmp_path), 64)
    assert op["algorithm"] == "MESH"
    (ch,) = op["channels"]
    assert ch["peers"] == [0, 128, 192]
    block = {0: [0, 1024], 64: [1024, 2048], 128: [2048, 3072], 192: [3072, 4096]}
    sems = {e["semaphore"]: e["wait_val"] for e in op["events"]}
    for s in ch["steps"]:
        assert set(s["to"]) <= set(ch["peers"]), s
        for sem, val in s["waits"]:
            assert sems.get(sem) == val, s
    sends = [(s["to"], s["elements"]) for s in ch["steps"] if s["leaf"] == "mesh_send"]
    assert sends == [([0], block[0]), ([128], block[128]), ([192], block[192]),
                     ([0, 128, 192], block[64])]
    recvs = [(s["from_network"], s["elements"]) for s in ch["steps"] if s["leaf"] == "post_recv"]
    assert recvs == [(0, block[64]), (128, block[64]), (192, block[64]),
                     (0, block[0]), (128, block[128]), (192, block[192])]
    (red,) = [s for s in ch["steps"] if s["leaf"] == "mesh_reduce"]
    assert red["elements"] == block[64] and red["sources"] == 4 and red["to"] == []
    (wait,) = red["waits"]
    assert wait[1] == 3  # the three peers' scatters


def test_a_mesh_steps_phase_is_the_event_its_receivers_count_it_on(tmp_path):
    """docs/CLI.md "schedule", mesh / RDH ops: a step's `phase` is its event, one of the
    rank's `events[]`; a send counts on its receivers' event (FORMATS.md section 7: the
    `_2` events for peers on other devices or nodes).  Rank 64 of the four-node MESH has only
    network peers: its scatter sends are EVT_REDUCE_COPY_2 and its broadcast
    EVT_INTER_GRP_BRDCST_2.  Two ranks on two devices of a node (SINGLE_STEP_MESH) handshake
    on EVT_GLOBAL_HNDSHK, the device-local handshake having no peer."""
    (op,) = _ops_of(_four_node_mesh(tmp_path), 64)
    (ch,) = op["channels"]
    sends = [(s["phase"], s["to"]) for s in ch["steps"] if s["leaf"] == "mesh_send"]
    assert sends == [("EVT_REDUCE_COPY_2", [0]), ("EVT_REDUCE_COPY_2", [128]),
                     ("EVT_REDUCE_COPY_2", [192]), ("EVT_INTER_GRP_BRDCST_2", [0, 128, 192])]
    from nrtrewrite.neff.assembler import assemble_spec
    from test_simulate import coll_spec
    cases = [([0, 1, 4, 5], "all_reduce", "mesh"), ([0, 1, 4, 5], "all_gather", "mesh"),
             ([0, 1, 4, 5], "reduce_scatter", "mesh"), ([0, 4], "all_reduce", "single_step_mesh")]
    for k, (group, kind, algo) in enumerate(cases):
        neff = tmp_path / f"m{k}.neff"
        neff.write_bytes(assemble_spec(coll_spec(kind, "bf16", group, 4096, lnc=2)))
        for r in group:
            res = _run(str(neff), "--rank", str(r), "--json", "--algo", algo)
            assert res.exit_code == 0, res.output
            (op,) = json.loads(res.output)["ops"]
            events = {e["event"] for e in op["events"]}
            phases = {s["phase"] for c in op["channels"] for s in c["steps"]}
            assert phases <= events, (kind, algo, r, phases - events)
            if algo == "single_step_mesh":
                assert "EVT_GLOBAL_HNDSHK" in phases and "EVT_LOCAL_HNDSHK" not in phases


def test_overview_threshold_is_more_than_64_entries(monkeypatch):
    """docs/CLI.md "schedule": a rank of *more than* 64 SPAD entries gets the overview; a rank
    of exactly the threshold still gets every step table."""
    assert S.OVERVIEW_ENTRIES == 64
    plan = plan_lowering(read_model(FIX / "mix8.neff"), LowerOptions())
    n = len(rank_entries(plan, 0))
    monkeypatch.setattr(S, "OVERVIEW_ENTRIES", n)
    res = _run(FIX / "mix8.neff", "--rank", 0)
    assert res.exit_code == 0, res.output
    assert "SPAD entries" not in res.output
    assert res.output.count("rank 0 trigger ") >= n


def test_overview_rows_count_each_entrys_channels_and_steps(monkeypatch):
    """docs/CLI.md "schedule": the overview has one row per entry (trigger, op, leg,
    algorithm, channels, steps); its `steps` are the entry's steps, all channels together,
    as many as --json lists, and its channels the channel ids of the entry."""
    monkeypatch.setattr(S, "OVERVIEW_ENTRIES", 1)
    ops = _ops_of(FIX / "mix8.neff", 3)
    res = _run(FIX / "mix8.neff", "--rank", 3)
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in res.output.splitlines()
            if line.startswith("│")]
    assert len(rows) == len(ops) > 1
    for row, op in zip(rows, ops):
        chans = " ".join(str(c["channel"]) for c in op["channels"])
        steps = sum(len(c["steps"]) for c in op["channels"])
        assert row[1:] == [str(op["trigger"]), op["op"], op["leg"], op["algorithm"], chans,
                           str(steps)]


def test_ring_table_title_names_the_ranks_prev_and_next():
    """docs/CLI.md "schedule": a RING channel's `prev` and `next` are the rank's enc_ring
    neighbours (`user_ranks[0]` the rank, `user_ranks[i]` i hops ahead: next is
    `user_ranks[1]`, prev `user_ranks[-1]`); the rich table's title names them as labelled."""
    args = (FIX / "mix8.neff", "--rank", 3, "--trigger", 0, "--algo", "ring")
    (op,) = json.loads(_run(*args, "--json").output)["ops"]
    text = _run(*args).output
    assert op["algorithm"] == "RING" and len(op["channels"]) > 1
    for c in op["channels"]:
        ur = c["user_ranks"]
        assert ur[-1] != ur[1]
        assert f"channel {c['channel']} (prev {ur[-1]}, next {ur[1]})" in text


def _table_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()
            if line.startswith("│")]


def test_ring_table_k_column_is_the_seeds_chunk_position():
    """seed 001 §4 (`p.k = na[rank_n-1]`, then `nptr[-2]` walking `na` down to `na[0]`; the
    all-gather again from `na[rank_n-1]` down to `na[1]`), docs/CLI.md "schedule" `k`: on a
    RING channel whose `user_ranks` is `na`, step s of a chunk group moves the chunk of
    position na[(n - 1 - s) mod n].  The rich table's `k` column shows it, and --limit N shows
    exactly N rows of a longer table."""
    args = (FIX / "mix8.neff", "--rank", 3, "--trigger", 0, "--algo", "ring")
    (op,) = json.loads(_run(*args, "--json").output)["ops"]
    ch = op["channels"][0]
    na, n = ch["user_ranks"], len(ch["user_ranks"])
    text = _run(*args, "--limit", 0).output
    rows = _table_rows(text.split(f"channel {op['channels'][1]['channel']} (")[0])
    assert len(rows) == len(ch["steps"]) > 2 * n
    for group, step, _phase, _leaf, _half, k, _el in rows:
        assert group == "0" and k == str(na[(n - 1 - int(step)) % n])
    assert len(_table_rows(_run(*args, "--limit", 3).output)) == 3 * len(op["channels"])


def test_limit_equal_to_the_steps_cuts_nothing():
    """docs/CLI.md "schedule": at most `--limit` steps per table; a table of exactly N steps
    under --limit N is whole, with no "... more legs" line."""
    doc = json.loads(_run(FIX / "ar2.neff", "--rank", 0, "--json", "--algo", "ring").output)
    steps = len(doc["ops"][0]["channels"][0]["steps"])
    res = _run(FIX / "ar2.neff", "--rank", 0, "--algo", "ring", "--limit", steps)
    assert res.exit_code == 0, res.output
    assert "more legs" not in res.output and "more steps" not in res.output
    assert len(_table_rows(res.output)) == sum(len(c["steps"])
                                               for c in doc["ops"][0]["channels"])


def test_mesh_rich_tables_show_the_json_fields(tmp_path):
    """docs/CLI.md "schedule", mesh / RDH ops: the rich view's step table has the step's
    `to` and `waits` (each wait a semaphore that must reach a value: `SEM>=VALUE`), and the
    events table (`semaphore = sema_shift_offset + event`) each event's value, semaphore and
    `wait_val` in its `wait` column."""
    neff = _four_node_mesh(tmp_path)
    (op,) = _ops_of(neff, 64)
    text = _run(neff, "--rank", 64).output
    rows = _table_rows(text)
    steps = op["channels"][0]["steps"]
    for row, s in zip(rows, steps):
        assert row[0] == str(s["step"]) and row[5] == " ".join(map(str, s["to"]))
        assert row[6] == " ".join(f"{sem}>={val}" for sem, val in s["waits"])
    assert any(s["waits"] for s in steps)
    events = {r[0]: r for r in rows[len(steps):] if r[0]}
    assert len({e["semaphore"] - e["value"] for e in op["events"]}) == 1  # one shift offset
    for e in op["events"]:
        row = events[f"{e['event']} ({e['value']})"]
        assert row[1] == str(e["semaphore"]) and row[4] == str(e["wait_val"])
    assert any(e["wait_val"] != e["value"] for e in op["events"])


def test_limit_defaults_to_200_steps():
    """docs/CLI.md "schedule": at most `--limit` steps per table, default 200."""
    (limit,) = [p for p in S.schedule_cmd.params if p.name == "limit"]
    assert limit.default == 200


def test_rank_given_twice_is_a_usage_error():
    """Found by an exploratory tester: ``--rank 0 --rank 1`` (lower's form for several
    ranks) showed rank 1's schedule alone, silently; the same rank twice is still one."""
    model = str(Path(__file__).resolve().parents[1] / "fixtures" / "ar2.neff")
    res = CliRunner().invoke(main, ["schedule", model, "--rank", "0", "--rank", "1"],
                             prog_name="nrtrewrite")
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [
        "nrtrewrite schedule: error: Invalid value for '--rank': given twice (0, 1); schedule "
        "shows one rank's schedule: run it once per rank (see 'nrtrewrite schedule --help')"]
    once = CliRunner().invoke(main, ["schedule", model, "--rank", "1", "--json"])
    twice = CliRunner().invoke(main, ["schedule", model, "--rank", "1", "--rank", "1", "--json"])
    assert once.exit_code == twice.exit_code == 0 and once.stdout == twice.stdout


@pytest.mark.parametrize("width", [20, 40, 60])
def test_schedule_tables_are_not_cut_on_a_narrow_terminal(monkeypatch, width):
    """An exploratory tester: the overview table (several triggers) and the events table
    were printed by rich fitted to the window (headers ``ent…``, cells ``ALLREDU…``, columns
    blanked at 20 columns); every table of schedule goes through print_table now."""
    import rich.console

    from nrtrewrite.cli import schedule as S
    out = io.StringIO()
    monkeypatch.setattr(S, "stdout_console", lambda *a, **kw: rich.console.Console(
        file=out, width=width, force_terminal=True, color_system=None))
    monkeypatch.setattr(S, "OVERVIEW_ENTRIES", 1)  # mix8's 9 entries: the overview
    for model in ("mix8", "ar2"):  # ar2's one entry: its step tables and its events table
        res = CliRunner().invoke(main, ["schedule", str(FIX / f"{model}.neff"), "--rank", "0"])
        assert res.exit_code == 0, res.output
    text = out.getvalue()
    assert "…" not in text
    for header in ("entry", "trigger", "algorithm", "event", "semaphore"):
        assert header in text, header


def test_an_entry_without_legs_says_so(monkeypatch):
    """docs/CLI.md "schedule": "an entry without any [legs] says so ("no legs")": a composer
    may give a SPAD entry nothing to move (the emitter then writes none, test_lower); its
    line names the rank, trigger, op, algorithm and leg, and the next entry's tables follow."""
    from nrtrewrite.compose import ir as IR

    real = S.rank_entries

    def first_empty(plan, rank, triggers=None):
        entries = real(plan, rank, triggers)
        entries[0][1].ir = IR.empty(0)
        return entries
    monkeypatch.setattr(S, "rank_entries", first_empty)
    res = CliRunner().invoke(main, ["schedule", str(FIX / "mix8.neff"), "--rank", "0"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    said = [line for line in lines if line.endswith(": no legs (nothing to move)")]
    assert len(said) == 1 and said[0].startswith("rank 0 trigger 0 ALLREDUCE "), said
    assert said[0] == lines[0]  # the first entry's, before the others' tables
    assert any("rank 0 trigger 1 ALLREDUCE" in line for line in lines[1:])


def test_rows_are_legs_and_the_step_column_is_the_seeds_ring_step(tmp_path, monkeypatch):
    """docs/CLI.md "schedule": a table's rows are legs, and its `step` column the seed's ring
    step (seed 001 §4: an all-reduce over n ranks takes 2n - 1 steps a chunk group).  So a
    one-group all-reduce over 4 ranks has steps 0..6, while the overview counts its legs
    (column `legs`) and a cut table says `... N more legs`.  Until 2026-12-06 both said
    "steps" (`steps` 16 beside `step` values 0..6)."""
    neff = _assemble(tmp_path, "ar4", "[[0, 1, 2, 3]]",
                     "[{all_reduce: {dtype: bf16, op: add, src: a, dst: b, bytes: 4KiB}}]")
    (op,) = json.loads(_run(neff, "--rank", 1, "--algo", "ring", "--json").output)["ops"]
    (ch,) = op["channels"]
    assert op["algorithm"] == "RING" and {s["group"] for s in ch["steps"]} == {0}
    assert sorted({s["step"] for s in ch["steps"]}) == list(range(2 * 4 - 1))
    legs = len(ch["steps"])
    # CLI.md "schedule": each of the 2n - 1 = 7 steps moves two halves, and the final reduce
    # step's direct_copy_send the two halves of the rank's own chunk: 7 x 2 + 2 legs
    assert legs == 7 * 2 + 2
    monkeypatch.setattr(S, "OVERVIEW_ENTRIES", 0)
    text = _run(neff, "--rank", 1, "--algo", "ring").output
    (head,) = [[c.strip() for c in line.split("┃")[1:-1]] for line in text.splitlines()
               if line.startswith("┃")]
    assert head == ["entry", "trigger", "op", "leg", "algorithm", "channels", "legs"]
    assert _table_rows(text) == [["0", "0", "ALLREDUCE", "flat", "RING", "0", str(legs)]]
    assert "--trigger K shows the legs of trigger K; --all every leg table" in text
    text = _run(neff, "--rank", 1, "--algo", "ring", "--all", "--limit", 3).output
    assert f"... {legs - 3} more legs (--limit 0 shows all)\n" in text
    assert "more steps" not in text


def test_a_kangaring_channel_title_names_the_ranks_role():
    """docs/CLI.md schedule: a KANGARING channel's title says the rank's role, as a
    SINGLE_CYCLE_RING one says its direction and pair: a primary's (prev, next), then
    ``primary`` and its unit's peers (those not -1), a secondary ``secondary of primary P``
    (TOPOLOGY §4: it exchanges data with its unit's primary only).  The text showed a
    primary's (prev, next) only and nothing for a secondary; role, primary and peers were
    --json's only (review 58i).  node64's trigger 2, rank 9: primary on channels 0 and 2
    (unit 9, 11: peer_rmtv 11), secondary of 11 on channels 1 and 3."""
    model = str(FIX / "node64.neff")
    res = _run(model, "--rank", "9", "--trigger", "2", "--limit", "1")
    assert res.exit_code == 0, res.output
    titles = [line.strip() for line in res.output.splitlines() if " channel " in line]
    head = "rank 9 trigger 2 ALLREDUCE KANGARING (flat) channel"
    chans = [op for op in _ops_of(model, 9) if op["trigger"] == 2][0]["channels"]
    assert [c["role"] for c in chans] == ["primary", "secondary"] * 2
    assert titles == [
        f"{head} 0 (prev {chans[0]['prev']}, next {chans[0]['next']}) primary, peer_rmtv 11",
        f"{head} 1 secondary of primary 11",
        f"{head} 2 (prev {chans[2]['prev']}, next {chans[2]['next']}) primary, peer_rmtv 11",
        f"{head} 3 secondary of primary 11"]
