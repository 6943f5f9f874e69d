"""``explain`` shows exactly what ``lower`` / ``schedule`` do: refused dtypes, the
SINGLE_CYCLE_RING channel pairs, error locations, unknown --trigger ordinals, the mesh
sub-type, the KANGARING channels (flat and HIER legs), HIER channel ids, ring orders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

SCR2 = {
    "header": {"name": "scr2", "lnc_size": 1},
    "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 200006},
                 {"name": "o", "type": "output", "size": 200006}],
        "replica_groups": [[0, 128]],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "i",
                                           "dst": "o", "num_elements": 100003}}]},
    }],
}


def run(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env or {}, catch_exceptions=False,
                              terminal_width=200)


def run_json(*args):
    res = run(*args, "--json")
    assert res.exit_code == 0, res.output + res.stderr
    return json.loads(res.output)


@pytest.fixture
def scr2(tmp_path):
    assembler = pytest.importorskip("nrtrewrite.neff.assembler")
    path = tmp_path / "scr2.neff"
    path.write_bytes(assembler.assemble_spec(SCR2))
    return str(path)


# -- 1. a dtype lower refuses -------------------------------------------------------------

def test_explain_shows_the_dtype_refusal_of_lower(tmp_path):
    model = str(FIXTURES / "bad" / "fp32_allreduce.neff")
    low = run("lower", model, "-o", str(tmp_path / "out"), "--quiet")
    assert low.exit_code == 2
    why = low.stderr.strip().split("trigger 0: ", 1)[1]  # lower's reason, after its place
    assert "cannot be lowered" in why
    doc = run_json("explain", model)
    rec = doc["triggers"][0]
    assert rec["lowered"]["algorithm"] == "INVALID"
    assert rec["lowered"]["fallback_reason"] == why
    assert rec["lowered"]["legs"] == [] and rec["channels"]["count"] == 0
    text = run("explain", model)
    assert text.exit_code == 0
    assert "lowered: INVALID" in text.output
    assert "lowered: MESH" not in text.output
    assert "cannot be lowered: ALLREDUCE in FP32" in text.output


def test_model_less_explain_refuses_a_dtype_the_cce_cannot_reduce():
    rec = run_json("explain", "--op", "allreduce", "--bytes", "64KiB", "--dtype", "int32",
                   "--ranks", "8")["triggers"][0]
    assert rec["lowered"]["algorithm"] == "INVALID"
    assert rec["lowered"]["fallback_reason"].startswith("ALLREDUCE in INT32 cannot be lowered")
    # an all-gather copies, it reduces nothing: no refusal
    rec = run_json("explain", "--op", "allgather", "--bytes", "64KiB", "--dtype", "int32",
                   "--ranks", "8")["triggers"][0]
    assert rec["lowered"]["algorithm"] != "INVALID"


# -- 2. SINGLE_CYCLE_RING channels -------------------------------------------------------

def test_single_cycle_ring_channels_are_the_pairs_lower_uses(scr2):
    from nrtrewrite.cli.lower import load_and_plan
    from nrtrewrite.cli.schedule import schedule_json
    rec = run_json("explain", scr2)["triggers"][0]
    assert rec["lowered"]["algorithm"] == "SINGLE_CYCLE_RING"
    # SELECTION.md §7: n = 1 by the byte rule (195 KiB < 256 KiB) -> one pair, 2 channels
    assert rec["channels"]["count"] == 2
    rings = rec["channels"]["rings"]
    assert [r["channel"] for r in rings] == [0, 1]
    assert [r["direction"] for r in rings] == ["cw", "ccw"]
    plan, _ = load_and_plan(scr2, topology=None, algo=None, host_cc=False, no_verify_hash=False)
    assert [(c["channel"], list(c["order"])) for c in plan.triggers[0].prepared.manifest[
        "channels"]] == [(r["channel"], r["order"]) for r in rings]
    sched = schedule_json(plan, 0)
    assert [c["channel"] for c in sched["ops"][0]["channels"]] == [0, 1]
    with_rank = run_json("explain", scr2, "--rank", "0")["triggers"][0]["channels"]["rings"]
    assert [(r["prev"], r["next"]) for r in with_rank] == [
        (c["prev"], c["next"]) for c in sched["ops"][0]["channels"]]
    ml = run_json("explain", "--op", "allreduce", "--bytes", "200006", "--group", "0,128",
                  "--lnc", "1")["triggers"][0]
    assert ml["channels"]["count"] == 2 and ml["channels"]["rings"] == rings


# -- 5. where an error is ------------------------------------------------------------------

def test_explain_errors_name_the_place_like_lower(tmp_path):
    model = str(FIXTURES / "mix8.neff")
    low = run("lower", model, "--algo", "single_cycle_ring", "-o", str(tmp_path / "o"))
    sch = run("schedule", model, "--rank", "0", "--algo", "single_cycle_ring")
    exp = run("explain", model, "--algo", "single_cycle_ring")
    assert exp.exit_code == low.exit_code == sch.exit_code == 2
    assert exp.stderr.startswith(f"nrtrewrite: error: {model}: member sg00/sp.bin, subgraph "
                                 "sg00, stream sp, instruction 4, trigger 2: ")
    assert exp.stderr == low.stderr == sch.stderr


# -- 6. --trigger K outside the model ------------------------------------------------------

@pytest.mark.parametrize("k", ["9", "-1", "100"])
def test_explain_unknown_trigger_is_an_error_like_schedule(k):
    model = str(FIXTURES / "mix8.neff")
    exp = run("explain", model, "--trigger", k)
    sch = run("schedule", model, "--rank", "0", "--trigger", k)
    assert exp.exit_code == sch.exit_code == 2
    assert exp.stderr == sch.stderr
    assert exp.stderr.strip().endswith(f"no trigger {k} (the model has 9: 0..8)")
    assert run("explain", model, "--trigger", "8").exit_code == 0


# -- 4. the override that applies, and no silent drop of it -------------------------------

def test_lower_records_the_environment_override_and_refuses_an_empty_algo(tmp_path):
    model = str(FIXTURES / "ar2.neff")
    env = {"NRTREWRITE_ALGO": "ring"}
    res = run("lower", model, "-o", str(tmp_path / "env"), "--quiet", env=env)
    assert res.exit_code == 0, res.stderr
    man = json.loads((tmp_path / "env" / "manifest.json").read_text())
    assert man["options"]["algo"] == "ring"
    assert {t["algorithm"] for t in man["triggers"]} == {"RING"}
    res = run("lower", model, "-o", str(tmp_path / "cli"), "--quiet", "--algo", "ring")
    man2 = json.loads((tmp_path / "cli" / "manifest.json").read_text())
    assert man2["options"] == man["options"]
    for args in (("lower", model, "-o", str(tmp_path / "e"), "--algo", ""),
                 ("explain", model, "--algo", ""), ("lower", model, "--algo", "ring;")):
        res = run(*args, env=env)
        assert res.exit_code == 2 and res.stderr.count("\n") == 1
        assert not (tmp_path / "e").exists()


# -- 7. sizes are exact integers ----------------------------------------------------------

def test_sizes_parse_exactly_beyond_float_precision():
    from nrtrewrite.cli.explain import parse_size
    big = 2 ** 53 + 1  # the first integer a float cannot hold
    assert parse_size(str(big)) == big
    assert parse_size(f"{big}KiB") == big * 1024
    assert parse_size(f"{big}MB") == big * 10 ** 6
    assert parse_size(f"{big}.5KiB") == big * 1024 + 512
    assert parse_size("0.001KB") == 1
    rec = run_json("explain", "--op", "allreduce", "--bytes", str(big + 1), "--dtype", "bf16",
                   "--ranks", "8")["triggers"][0]
    assert rec["bytes"] == big + 1
    # an odd byte count is no whole number of 2-byte elements: refused, not rounded
    res = run("explain", "--op", "allreduce", "--bytes", str(big), "--dtype", "bf16",
              "--ranks", "8")
    assert res.exit_code == 2 and "element size 2" in res.stderr


def test_a_size_of_too_many_digits_or_elements_is_one_line():
    """An exploratory tester: ``--bytes`` of 4301 digits was an internal error (exit 70,
    CPython's integer-text limit in ``Fraction``), and one of 4298 digits with ``GiB`` was
    one later (``str`` of the size); ``--json`` printed nothing.  Now a size of more than
    ``MAX_SIZE_DIGITS`` digits, or of more than 2^64 - 1 elements (a trigger's u64
    ``num_elements``), is refused in one line, and the JSON error document is printed."""
    from nrtrewrite.sizes import MAX_SIZE_DIGITS
    assert MAX_SIZE_DIGITS == 40
    base = ("explain", "--op", "allreduce", "--dtype", "bf16", "--ranks", "2", "--bytes")
    for size, says in (("2" * 4301, "size '222222222222...' has 4301 digits, more than 40"),
                       ("8" * 4298 + "GiB", "size '888888888888...' has 4298 digits, more "
                                            "than 40"),
                       ("1" * 41, "has 41 digits, more than 40"),
                       (str(2 ** 65), f"--bytes {2 ** 65} is more than 2^64 - 1 BF16 elements "
                                      "(a trigger's num_elements is a u64, NEFF-LIKE.md)")):
        res = run(*base, size)
        assert res.exit_code == 2 and says in res.stderr and res.stderr.count("\n") == 1
        res = run(*base, size, "--json")
        assert res.exit_code == 2 and says in json.loads(res.stdout)["error"]
    rec = run_json(*base, str(2 ** 65 - 2))["triggers"][0]  # 2^64 - 1 elements: the most
    assert rec["bytes"] == 2 ** 65 - 2
    res = run(*base, "8" * 40)  # 40 digits parse, and are past 2^64 elements
    assert res.exit_code == 2 and "more than 2^64 - 1 BF16 elements" in res.stderr


def test_integer_options_take_ascii_digits():
    """``--group`` took ASCII digits only, while ``--ranks``, ``--rank``, ``--bytes`` and
    the other integer options took any script's (``４``, ``٢``) and ``1_000`` (Python's
    ``int``): every integer option and size now takes ASCII digits only."""
    for args in (("--bytes", "4", "--ranks", "\uff14"), ("--bytes", "4", "--ranks", "\u0662"),
                 ("--bytes", "\uff14", "--ranks", "2"), ("--bytes", "4", "--ranks", "1_0"),
                 ("--bytes", "4", "--ranks", "2", "--nodes", "\uff11")):
        res = run("explain", "--op", "allreduce", *args)
        assert res.exit_code == 2 and res.stderr.count("\n") == 1, args
    assert run_json("explain", "--op", "allreduce", "--bytes", " 4 ", "--ranks",
                    "+2")["triggers"][0]["bytes"] == 4
    for cmd in (("dump", "--sb2sb", str(FIXTURES / "golden"), "--rank", "\uff10"),
                ("simulate", str(FIXTURES / "ar2.neff"), "--seed", "\uff10"),
                ("schedule", str(FIXTURES / "ar2.neff"), "--rank", "\uff10"),
                ("lower", str(FIXTURES / "ar2.neff"), "--rank", "\uff10", "-o", "x")):
        res = run(*cmd)
        # (the whole reason: click's IntRange said "is not a valid integer range" for --seed)
        assert res.exit_code == 2 and ("'\uff10' is not a valid integer. (see "
                                       in res.stderr), cmd


def test_in_window_is_null_for_an_engine_that_is_not_legal():
    """An exploratory tester: ``in_window`` was true for every illegal candidate (KANGARING
    over 7 ranks at 1 MiB, below its 56 MiB window; the pod meshes, which have no window),
    where the table shows ``-``: the window is judged for a legal engine only."""
    for nbytes in ("1MiB", "64MiB"):
        args = ("explain", "--op", "allreduce", "--bytes", nbytes, "--ranks", "7")
        cands = run_json(*args)["triggers"][0]["candidates"]
        assert "KANGARING" in {c["algorithm"] for c in cands if not c["legal"]}
        for c in cands:
            assert (c["in_window"] is None) == (not c["legal"]), c
            assert c["in_window"] in (None, True, False)
        text = run(*args).output
        for c in cands:
            row = next(line for line in text.splitlines() if f" {c['algorithm']} (" in line)
            cells = [cell.strip() for cell in row.split("\u2502")]
            assert cells[4] == {None: "-", True: "yes", False: "no"}[c["in_window"]], row


# -- 3. allow-lists: explain and lower agree ----------------------------------------------

def test_allow_list_takes_a_legal_engine_outside_its_window_in_explain_and_lower(tmp_path):
    rec = run_json("explain", "--op", "allreduce", "--bytes", "64KiB", "--ranks", "16",
                   "--algo", "rdh")["triggers"][0]
    # INTRA_RDH is legal (structural verdict) but 64 KiB is below its window: SELECTION.md §8
    # makes an allow-list an error only when nothing allowed is legal
    c = next(c for c in rec["candidates"] if c["algorithm"] == "INTRA_RDH")
    assert c["legal"] and not c["in_window"] and c["lowerable"]
    assert rec["policy"]["algorithm"] == rec["lowered"]["algorithm"] == "INTRA_RDH"
    model = str(FIXTURES / "mix8.neff")
    low = run("lower", model, "--algo", "rdh", "-o", str(tmp_path / "o"), "--quiet")
    assert low.exit_code == 0, low.stderr
    man = json.loads((tmp_path / "o" / "manifest.json").read_text())
    exp = run_json("explain", model, "--algo", "rdh")["triggers"]
    assert [t["algorithm"] for t in man["triggers"]] == [
        t["lowered"]["algorithm"] for t in exp]


def test_nothing_allowed_legal_fails_explain_as_it_fails_lower(tmp_path):
    model = str(FIXTURES / "mix8.neff")
    low = run("lower", model, "--algo", "inter_rdh,hier", "-o", str(tmp_path / "o"))
    exp = run("explain", model, "--algo", "inter_rdh,hier")
    assert low.exit_code == exp.exit_code == 2 and low.stderr == exp.stderr
    assert "no legal engine" in exp.stderr
    ml = run("explain", "--op", "allreduce", "--bytes", "64KiB", "--ranks", "8",
             "--algo", "inter_rdh,hier")
    assert ml.exit_code == 2 and "no legal engine" in ml.stderr


# -- what lower writes and schedule states, for the checks below -----------------------

def _assemble(tmp_path, spec, name):
    assembler = pytest.importorskip("nrtrewrite.neff.assembler")
    path = tmp_path / f"{name}.neff"
    path.write_bytes(assembler.assemble_spec(spec))
    return str(path)


def _lowered(tmp_path, model, rank, *opts):
    """The top-level manifest ``lower`` writes for ``model`` (one rank lowered)."""
    out = tmp_path / f"low{rank}"
    res = run("lower", model, "--rank", str(rank), "-o", str(out), "--quiet", *opts)
    assert res.exit_code == 0, res.stderr
    return json.loads((out / "manifest.json").read_text())


def _schedule_channels(model, rank, trigger, *opts):
    """{(leg, channel id): the schedule's channel info without its steps} of one trigger."""
    res = run("schedule", model, "--rank", str(rank), "--trigger", str(trigger), "--json", *opts)
    assert res.exit_code == 0, res.stderr
    return {(op["leg"], c["channel"]): {k: v for k, v in c.items() if k != "steps"}
            for op in json.loads(res.output)["ops"] for c in op["channels"]}


# -- 8. mesh sub_type: FULL_MESH is enum value 0 ------------------------------------------

MESH4 = {  # one rank on each of four trn2 nodes (lnc 2: 64 ranks per node)
    "header": {"name": "mesh4", "lnc_size": 2},
    "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 8192},
                 {"name": "o", "type": "output", "size": 8192}],
        "replica_groups": [[2, 66, 130, 194]],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "i",
                                           "dst": "o", "bytes": 8192}}]},
    }],
}


def test_inter_node_mesh_sub_type_is_full_mesh_as_in_the_manifest(tmp_path):
    model = _assemble(tmp_path, MESH4, "mesh4")
    man = _lowered(tmp_path, model, 66)["triggers"][0]
    assert man["algorithm"] == "MESH" and man["mesh"]["sub_type"] == "FULL_MESH"
    rec = run_json("explain", model)["triggers"][0]
    assert rec["mesh"]["sub_type"] == man["mesh"]["sub_type"]
    ml = run_json("explain", "--op", "allreduce", "--bytes", "8KiB",
                  "--group", "2,66,130,194")["triggers"][0]
    assert ml["mesh"]["sub_type"] == "FULL_MESH"
    text = run("explain", "--op", "allreduce", "--bytes", "8KiB", "--group", "2,66,130,194")
    assert "sub_type FULL_MESH" in text.output and "sub_type None" not in text.output


# -- 9. KANGARING: the channels lower runs (the cycle of the primaries) ----------------------

KANGA16 = {  # 16 ranks at lnc 2: four trn2 devices of four ranks, two units of two per device
    "header": {"name": "kanga16", "lnc_size": 2},
    "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 1 << 20},
                 {"name": "o", "type": "output", "size": 1 << 20}],
        "replica_groups": [list(range(16))],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "i",
                                           "dst": "o", "bytes": 1 << 20}}]},
    }],
}


def _check_kangaring_rank_view(rings, sched, leg="flat"):
    assert [r["channel"] for r in rings] == [ch for lg, ch in sched if lg == leg]
    for r in rings:
        s = sched[(leg, r["channel"])]
        assert r["role"] == s["role"]
        if s["role"] == "primary":
            for key in ("prev", "next", "peers", "next_peer_rmtv", "port"):
                assert r[key] == s[key], (r["channel"], key)
        else:
            assert r["primary"] == s["primary"]


def test_kangaring_channels_are_the_primaries_cycles_lower_uses(tmp_path):
    from nrtrewrite.topology.model import load_topology
    model = _assemble(tmp_path, KANGA16, "kanga16")
    man = _lowered(tmp_path, model, 2, "--algo", "kangaring")["triggers"][0]
    assert man["algorithm"] == "KANGARING"
    rec = run_json("explain", model, "--algo", "kangaring")["triggers"][0]
    rings = rec["channels"]["rings"]
    assert rec["channels"]["count"] == len(man["channels"]) == 4
    assert [(r["channel"], r["order"]) for r in rings] == [
        (c["channel"], c["order"]) for c in man["channels"]]
    # by hand: 8 units of 2 (one per s-engine pair, two per device of 4 ranks); each cycle
    # of primaries visits the 4 devices, 2 primaries each: 4 hops inside a device, 4 over
    # device links
    topo = load_topology(None, world=tuple(range(16)), lnc_size=2)
    for r, c in zip(rings, man["channels"]):
        o = c["order"]
        assert len(o) == 8 and len({topo.info(p).device for p in o}) == 4
        same = sum(topo.info(a).device == topo.info(b).device for a, b in zip(o, o[1:] + o[:1]))
        assert same == 4
        assert r["hops"] == {"SAME_DEVICE": 4, "DEVICE_LINK": 4, "C2C_PORT": 0, "NETWORK": 0}
    assert [k["units"] for k in rec["kangaring"]["channels"]] == [
        k["units"] for k in man["kangaring"]]
    # --rank 2: a secondary on some channels, a primary on others, as schedule and the legs say
    sched = _schedule_channels(model, 2, 0, "--algo", "kangaring")
    with_rank = run_json("explain", model, "--algo", "kangaring", "--rank", "2")
    rings2 = with_rank["triggers"][0]["channels"]["rings"]
    assert {r["role"] for r in rings2} == {"primary", "secondary"}
    _check_kangaring_rank_view(rings2, sched)
    for r, k in zip(rings2, man["kangaring"]):
        unit = next(u for u in k["units"] if 2 in u)
        assert r["unit"] == unit and (r["role"] == "primary") == (unit[0] == 2)
    text = run("explain", model, "--algo", "kangaring", "--rank", "2").output
    assert "secondary" in text and "cycle of its primaries" in text
    # model-less: the same collective, the same plan
    ml = run_json("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "16",
                  "--algo", "kangaring")["triggers"][0]
    assert ml["channels"] == rec["channels"] and ml["kangaring"] == rec["kangaring"]


def test_default_policy_kangaring_on_node64_matches_lower(tmp_path):
    model = str(FIXTURES / "node64.neff")
    man = _lowered(tmp_path, model, 33)["triggers"][2]
    assert man["algorithm"] == "KANGARING"
    rec = run_json("explain", model, "--trigger", "2")["triggers"][0]
    assert [(r["channel"], r["order"]) for r in rec["channels"]["rings"]] == [
        (c["channel"], c["order"]) for c in man["channels"]]
    assert [(k["channel"], k["logical_path"], k["units"], k["duplicate"])
            for k in rec["kangaring"]["channels"]] == [
        (k["channel"], k["logical_path"], k["units"], k["duplicate"]) for k in man["kangaring"]]
    rings = run_json("explain", model, "--trigger", "2", "--rank", "33")[
        "triggers"][0]["channels"]["rings"]
    _check_kangaring_rank_view(rings, _schedule_channels(model, 33, 2))


# -- 10. HIER: every channel of every leg, with its id ---------------------------------------

HIER_KANGA = "intra_redsct:kangaring;intra_allg:kangaring"


def test_hier_kangaring_legs_show_every_channel_lower_runs(tmp_path):
    model = str(FIXTURES / "two_node128.neff")
    man = _lowered(tmp_path, model, 37, "--algo", HIER_KANGA)["triggers"][0]
    mlegs = man["hier"]["legs"]
    rec = run_json("explain", model, "--algo", HIER_KANGA, "--trigger", "0")["triggers"][0]
    assert [(leg["name"], leg["algorithm"], leg["channel_base"], leg["channel_ids"])
            for leg in rec["hier"]["legs"]] == [
        (leg["name"], leg["algorithm"], leg["channel_base"], leg["channel_ids"]) for leg in mlegs]
    assert rec["channels"]["count"] == sum(leg["channel_ids"] for leg in mlegs) == 10
    expect = []  # (leg, channel id, primaries as ranks) of the group of rank 0, from the manifest
    for leg in mlegs:
        ids = sorted({c["channel"] for p in leg["plans"] for c in p["channels"]})
        assert next(lg for lg in rec["hier"]["legs"] if lg["name"] == leg["name"])[
            "channels"] == ids == list(range(leg["channel_base"],
                                             leg["channel_base"] + leg["channel_ids"]))
        if leg["algorithm"] != "KANGARING":
            continue
        grp = next(g for g in leg["groups"] if 0 in g["group"])
        plan = leg["plans"][grp["plan"]]
        expect += [(leg["name"], c["channel"], [grp["group"][i] for i in c["order"]])
                   for c in plan["channels"]]
    assert len(expect) == 8  # 4 channels per kangaring leg: 0..3 and 6..9
    assert [(k["leg"], k["channel"], k["primaries"]) for k in rec["kangaring"]["channels"]] == \
        expect
    ml = run_json("explain", "--op", "allreduce", "--bytes", "8MiB", "--ranks", "128",
                  "--algo", HIER_KANGA)["triggers"][0]
    assert ml["hier"] == rec["hier"] and ml["channels"] == rec["channels"]
    assert ml["kangaring"] == rec["kangaring"]
    # --rank 37: its view on each of those channels, as schedule states it
    krank = run_json("explain", model, "--algo", HIER_KANGA, "--trigger", "0", "--rank", "37")[
        "triggers"][0]["kangaring"]["channels"]
    sched = _schedule_channels(model, 37, 0, "--algo", HIER_KANGA)
    kang = {(leg, ch): s for (leg, ch), s in sched.items() if "role" in s}
    assert [(k["leg"], k["channel"]) for k in krank] == list(kang)
    for k in krank:
        s = kang[(k["leg"], k["channel"])]
        assert k["is_primary"] == (s["role"] == "primary")
        if k["is_primary"]:
            assert (k["prev"], k["next"], k["port"]) == (s["prev"], s["next"], s["port"])
        else:
            assert k["next"] == s["primary"]


def test_hier_ring_legs_report_the_channel_ids_of_the_manifest(tmp_path):
    model = str(FIXTURES / "two_node128.neff")
    man = _lowered(tmp_path, model, 64)["triggers"]
    doc = run_json("explain", model)["triggers"]
    hier = [(m, e) for m, e in zip(man, doc) if m["algorithm"] == "HIER"]
    assert hier
    for m, e in hier:
        assert [(leg["name"], leg["algorithm"], leg["channel_base"], leg["channel_ids"])
                for leg in e["hier"]["legs"]] == [
            (leg["name"], leg["algorithm"], leg["channel_base"], leg["channel_ids"])
            for leg in m["hier"]["legs"]]
        assert e["channels"]["count"] == sum(leg["channel_ids"] for leg in m["hier"]["legs"])


# -- 11. one-rank and flat rings: the manifest's orders -------------------------------------

ONE = {
    "header": {"name": "one", "lnc_size": 1},
    "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 65536},
                 {"name": "o", "type": "output", "size": 65536}],
        "replica_groups": [[0], [1, 2], [3]],
        "engines": {"sp": [
            {"all_reduce": {"dtype": "bf16", "op": "add", "src": "i", "dst": "o",
                            "bytes": 65536}},
            {"all_reduce": {"dtype": "bf16", "op": "add", "src": "i", "dst": "o",
                            "bytes": 65536, "group": 2}}]},
    }],
}


def test_one_rank_ring_order_is_the_rank_as_in_the_manifest(tmp_path):
    model = _assemble(tmp_path, ONE, "one")
    for trigger, rank in ((0, 0), (1, 3)):
        man = _lowered(tmp_path, model, rank)["triggers"][trigger]
        assert man["algorithm"] == "RING" and man["channels"] == [
            {"channel": 0, "order": [rank]}]
        rec = run_json("explain", model, "--trigger", str(trigger))["triggers"][0]
        assert [(r["channel"], r["order"]) for r in rec["channels"]["rings"]] == [(0, [rank])]
        ring = run_json("explain", model, "--trigger", str(trigger), "--rank", str(rank))[
            "triggers"][0]["channels"]["rings"]
        s = _schedule_channels(model, rank, trigger)[("flat", 0)]
        assert [(r["prev"], r["next"], r["user_ranks"]) for r in ring] == [
            (s["prev"], s["next"], s["user_ranks"])] == [(rank, rank, [rank])]


def test_flat_ring_channels_are_the_manifest_channels(tmp_path):
    model = str(FIXTURES / "mix8.neff")
    man = _lowered(tmp_path, model, 0, "--algo", "ring")["triggers"]
    doc = run_json("explain", model, "--algo", "ring")["triggers"]
    assert len(man) == len(doc)
    for m, e in zip(man, doc):
        assert m["algorithm"] == e["lowered"]["algorithm"] == "RING"
        assert [(r["channel"], r["order"]) for r in e["channels"]["rings"]] == [
            (c["channel"], c["order"]) for c in m["channels"]]
        assert e["channels"]["count"] == len(m["channels"])
