"""``nrtrewrite explain``: model-less and model modes, --rank, --json, --algo, errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.cli.explain import compress, parse_ranks, parse_size
from nrtrewrite.errors import ValidationError

SPEC = {
    "header": {"pkg_version": 2, "name": "explain2n", "lnc_size": 2},
    "subgraphs": [{
        "name": "sg00",
        "vars": [
            {"name": "ar_in", "type": "input", "size": 1 << 20},
            {"name": "ar_out", "type": "output", "size": 1 << 20},
            {"name": "ag_in", "type": "input", "size": 4096},
            {"name": "ag_out", "type": "output", "size": 4096 * 128},
        ],
        "replica_groups": [list(range(128))],
        "engines": {
            "sp": [
                "nop",
                {"all_reduce": {"dtype": "bf16", "op": "add", "src": "ar_in", "dst": "ar_out",
                                "bytes": 1 << 20}},
                {"all_gather": {"dtype": "bf16", "src": "ag_in", "dst": "ag_out",
                                "bytes": 4096}},
            ],
            "pool": [],
        },
    }],
}


def run(*args, env=None):
    res = CliRunner().invoke(main, list(args), env=env or {}, catch_exceptions=False,
                             terminal_width=200)
    return res


def run_json(*args, env=None):
    res = run(*args, "--json", env=env)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.fixture
def model_path(tmp_path):
    assembler = pytest.importorskip("nrtrewrite.neff.assembler")
    path = tmp_path / "m.neff"
    path.write_bytes(assembler.assemble_spec(copy.deepcopy(SPEC)))
    return str(path)


def test_model_less_two_node_allreduce_json():
    d = run_json("explain", "--op", "allreduce", "--bytes", "64MiB", "--dtype", "bf16",
                 "--ranks", "128", "--nodes", "2")
    assert d["model"] is None and d["topology"]["nodes"] == 2 and d["topology"]["lnc_size"] == 2
    assert d["topology"]["platform"] == "trn2" and d["topology"]["hw_generation"] == 3
    (t,) = d["triggers"]
    assert t["op"] == "ALLREDUCE" and t["bytes"] == 64 << 20 and t["scope"] == "inter"
    assert t["policy"]["algorithm"] == "HIER"
    assert [leg["name"] for leg in t["policy"]["legs"]] == ["intra_redsct", "inter_allr",
                                                             "intra_allg"]
    assert t["policy"]["hier_log"].startswith("Hier algorithm selections")
    assert t["lowered"]["algorithm"] == "HIER" and t["lowered"]["fallback_reason"] is None
    assert [(leg["name"], leg["algorithm"]) for leg in t["lowered"]["legs"]] == [
        ("intra_redsct", "KANGARING"), ("inter_allr", "SINGLE_CYCLE_RING"),
        ("intra_allg", "KANGARING")]
    assert [leg["groups"] for leg in t["hier"]["legs"]] == [2, 64, 2]
    chosen = [c for c in t["candidates"] if c["chosen"]]
    assert [c["algorithm"] for c in chosen] == ["HIER"]
    assert {c["predicate"] for c in t["candidates"]} >= {
        "enc_can_post_hierarchical_operation", "enc_can_post_mesh_operation",
        "enc_can_post_intra_rdh_operation", "enc_can_post_inter_rdh_operation",
        "enc_can_post_kangaring_operation", "enc_can_post_single_cycle_ring"}
    assert t["channels"]["rings"] == []  # HIER: rings per leg group
    assert t["kangaring"]["note"] == "lowered"  # the intra legs' kangaring paths


def test_explain_names_the_platforms_hardware_generation():
    """trn1 is NeuronCore-v2 (its CCE element cap is 1024, not 2048: seed 000 §3.4)."""
    args = ("explain", "--op", "allreduce", "--bytes", "1MiB", "--dtype", "bf16",
            "--ranks", "8", "--topology", "trn1")
    assert run_json(*args)["topology"]["hw_generation"] == 2
    res = run(*args)
    assert res.exit_code == 0, res.output
    assert "32 ranks per node, NeuronCore-v2)" in res.output.splitlines()[0]


def test_model_less_rank_view_and_human_output():
    d = run_json("explain", "--op", "allgather", "--bytes", "1MiB", "--group", "0-15",
                 "--rank", "5", "--algo", "ring")
    (t,) = d["triggers"]
    assert t["rank"] == 5
    for ring in t["channels"]["rings"]:
        assert ring["user_ranks"][0] == 5 and len(ring["user_ranks"]) == 16
        assert ring["next"] == ring["user_ranks"][1] and ring["prev"] == ring["user_ranks"][-1]
    res = run("explain", "--op", "allgather", "--bytes", "1MiB", "--group", "0-15", "--rank", "5",
              "--algo", "ring")
    assert res.exit_code == 0
    for word in ("candidates", "policy choice", "lowered: RING", "channels:", "user_ranks"):
        assert word in res.output


def test_a_mesh_ranks_peers_are_rank_runs_not_a_python_dict():
    """trn2 at lnc 2: four ranks per device, so rank 5 shares its device with 4, 6 and 7;
    the group is on one node, so no peer is over the network."""
    res = run("explain", "--op", "allreduce", "--bytes", "512KiB", "--ranks", "16", "--rank", "5")
    assert res.exit_code == 0 and "lowered: MESH" in res.output
    assert "  rank peers: same device 4 6..7; network -\n" in res.output
    assert "{" not in res.output


def test_model_less_intra_node_windows():
    for size, alg, lowered in (("512KiB", "MESH", "MESH"), ("8MiB", "INTRA_RDH", "INTRA_RDH"),
                               ("64MiB", "KANGARING", "KANGARING")):
        d = run_json("explain", "--op", "allreduce", "--bytes", size, "--ranks", "64")
        t = d["triggers"][0]
        assert t["policy"]["algorithm"] == alg and t["lowered"]["algorithm"] == lowered


def test_model_less_alltoall_shows_mesh_without_lowering():
    d = run_json("explain", "--op", "alltoall", "--bytes", "64KiB", "--ranks", "64")
    t = d["triggers"][0]
    assert t["policy"]["algorithm"] == "MESH" and t["lowered"]["algorithm"] == "INVALID"
    assert t["channels"]["rings"] == []
    ring = next(c for c in t["candidates"] if c["algorithm"] == "RING")
    assert not ring["legal"] and "all-to-all" in ring["reason"]
    # MESH is in the lowerable list, but not for ALLTOALL: said as the forced --algo mesh
    # error says it (an exploratory tester found the list bare)
    assert "each for its own ops; not for ALLTOALL: MESH) and no lowerable engine is legal " \
        "for ALLTOALL" in t["lowered"]["fallback_reason"]


def test_model_less_selection_refusal_comes_before_the_dtype_and_nothing_is_lowered():
    """docs/CLI.md "explain": lower selects before it checks a dtype.  An INT32 all-to-all
    over 2 ranks has no lowerable engine (MESH is not lowered for ALLTOALL) and a dtype the
    CCE cannot reduce (seed 000 §3.4: lower.dtype_refusal takes every op but the
    all-gather): its fallback is the selection's.  An INT32 all-reduce is selected and
    refused for its dtype.  Neither is lowered: no channels, ``nothing lowered``."""
    t = run_json("explain", "--op", "alltoall", "--dtype", "int32", "--bytes", "1KiB",
                 "--ranks", "2")["triggers"][0]
    assert t["lowered"]["algorithm"] == "INVALID"
    assert t["lowered"]["fallback_reason"].startswith(
        "MESH ALLTOALL is not lowerable in this build (lowerable: ")
    assert t["channels"]["count"] == 0 and t["channels"]["reason"] == "nothing lowered"
    t = run_json("explain", "--op", "allreduce", "--dtype", "int32", "--bytes", "1KiB",
                 "--ranks", "2")["triggers"][0]
    assert (t["lowered"]["algorithm"], t["lowered"]["fallback_reason"]) == (
        "INVALID", "ALLREDUCE in INT32 cannot be lowered: the CCE reduce accepts only BF16, "
        "FP16, FP32R and FP8_E3/E4/E5 (seed 000 §3.4)")
    assert t["policy"]["algorithm"] != "INVALID"  # selected, then refused
    assert (t["channels"]["count"], t["channels"]["reason"], t["channels"]["rings"]) == (
        0, "nothing lowered", [])


def test_algo_override_errors_are_one_line():
    res = CliRunner().invoke(main, ["explain", "--op", "allgather", "--bytes", "1MiB",
                                    "--ranks", "8", "--nodes", "8", "--group", "0"], env={})
    assert res.exit_code != 0                      # --ranks and --group together
    res = CliRunner().invoke(main, ["explain", "--op", "allgather", "--bytes", "64KiB",
                                    "--group", "0,64,128,192,256,320,384,448", "--nodes", "8",
                                    "--algo", "single_cycle_ring"], env={})
    assert res.exit_code == 2
    assert ("enc_can_post_single_cycle_ring: SINGLE_CYCLE_RING is all-reduce only "
            "(op_type ALLGATHER)") in res.output
    res = CliRunner().invoke(main, ["explain", "--op", "allreduce", "--bytes", "64MiB",
                                    "--group", "0-5", "--algo", "allreduce:kangaring"], env={})
    assert res.exit_code == 2 and "enc_can_post_kangaring_operation: device 1 of node 0 has " \
        "2 of its 4 ranks" in res.output


def test_env_override_and_exclusion():
    d = run_json("explain", "--op", "allreduce", "--bytes", "64KiB", "--ranks", "64",
                 env={"NRTREWRITE_ALGO": "^mesh"})
    assert d["override"] == "^mesh" and d["override_source"] == "NRTREWRITE_ALGO"
    assert d["triggers"][0]["policy"]["algorithm"] == "RING"
    assert d["triggers"][0]["lowered"]["fallback_reason"] is None


def test_model_mode(model_path):
    d = run_json("explain", model_path)
    assert d["topology"]["nodes"] == 2 and len(d["triggers"]) == 2
    ar, ag = d["triggers"]
    assert (ar["subgraph"], ar["engine"], ar["index"]) == ("sg00", "sp", 1)
    assert ar["policy"]["algorithm"] == "HIER" and ar["lowered"]["algorithm"] == "HIER"
    assert ag["op"] == "ALLGATHER"
    d = run_json("explain", model_path, "--trigger", "1", "--rank", "70")
    assert [t["trigger"] for t in d["triggers"]] == [1] and d["triggers"][0]["rank"] == 70
    res = run("explain", model_path, "--rank", "70")
    assert res.exit_code == 0 and "trigger 0" in res.output and "trigger 1" in res.output
    res = CliRunner().invoke(main, ["explain", model_path, "--ranks", "4"], env={})
    assert res.exit_code != 0 and "MODEL" in res.output


def test_model_mode_topology_too_small(model_path):
    res = CliRunner().invoke(main, ["explain", model_path, "--topology", "trn2:nodes=1"], env={})
    assert res.exit_code == 2 and "does not fit" in res.output
    res = CliRunner().invoke(main, ["explain", model_path, "--topology", "trn1"], env={})
    assert res.exit_code == 2 and "lnc_size" in res.output
    d = run_json("explain", model_path, "--topology", "trn2")     # bare preset: sized to the model
    assert d["topology"]["nodes"] == 2


def test_helpers():
    assert parse_size("64MiB") == 64 << 20 and parse_size("1MB") == 10 ** 6
    assert parse_size("512k") == 512 * 1024 and parse_size("4096") == 4096
    assert parse_size("1.5KiB") == 1536
    for bad in ("", "12Q", "1.3B", "Mi"):
        with pytest.raises(ValidationError):
            parse_size(bad)
    assert parse_ranks("0-3,8,10..12") == (0, 1, 2, 3, 8, 10, 11, 12)
    assert parse_ranks("0-3,10..8") == (0, 1, 2, 3, 10, 9, 8)  # downward, as compress
    assert parse_ranks("5,4, 3 - 3,0 .. 1") == (5, 4, 3, 0, 1)  # the order given, item by item
    with pytest.raises(ValidationError):
        parse_ranks("a-b")
    assert compress([0, 1, 2, 3, 7, 6, 5, 9]) == "0..3 7..5 9"
    assert compress([]) == ""


def test_many_triggers_get_an_overview_unless_trigger_or_all(monkeypatch):
    import nrtrewrite.cli.explain as E
    monkeypatch.setattr(E, "OVERVIEW_TRIGGERS", 3)
    model = str(Path(__file__).resolve().parents[1] / "fixtures" / "mix8.neff")
    doc = json.loads(CliRunner().invoke(main, ["explain", model, "--json"]).output)
    res = CliRunner().invoke(main, ["explain", model])
    assert res.exit_code == 0, res.output
    assert f"{len(doc['triggers'])} triggers" in res.output
    assert "--trigger K explains trigger K in full" in res.output
    assert "candidates" not in res.output
    rows = [line for line in res.output.splitlines() if line.startswith("│")]
    assert len(rows) == len(doc["triggers"])
    for row, t in zip(rows, doc["triggers"]):
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[0] == str(t["trigger"]) and cells[1] == t["op"]
        assert cells[6].split()[0] == t["lowered"]["algorithm"]
    full = CliRunner().invoke(main, ["explain", model, "--all"]).output
    assert full.count("candidates") == len(doc["triggers"])
    one = CliRunner().invoke(main, ["explain", model, "--trigger", "2"]).output
    assert one.count("candidates") == 1


def _one_line_error(res) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nrtrewrite: error: "), res.stderr
    return lines[0][len("nrtrewrite: error: "):]


_LIMIT = 1 << 20  # MAX_TOPOLOGY_RANKS (docs/RELIABILITY.md §2)


@pytest.mark.parametrize("option, value", [
    ("--ranks", "99999999999"), ("--ranks", "20000000"), ("--ranks", str(_LIMIT + 1)),
    ("--group", "0..99999999999"), ("--group", "0-99999999999"), ("--group", str(_LIMIT)),
    ("--group", "0-3," + "9" * 40),  # (5000 digits: too many digits, test_cli_options.py)
    ("--group", f"0-{_LIMIT - 1},0-1"),  # more ranks than a topology can have: one repeats
])
def test_model_less_rank_limit_is_checked_before_the_group_is_built(option, value,
                                                                    monkeypatch):
    """Bug: model-less explain built the group (and then the topology) before checking
    MAX_TOPOLOGY_RANKS: ``--ranks 99999999999`` and ``--group 0..99999999999`` ran out of
    memory (exit 71), ``--ranks 20000000`` took 828 MB and 3.3 s.  Now refused from the
    numbers, naming the option, in a few MB (a list of 2^20 ranks alone takes 36 MB), with
    no rank of a topology built."""
    import tracemalloc
    from nrtrewrite.topology import model as topology_model
    assert topology_model.MAX_TOPOLOGY_RANKS == _LIMIT

    def no_rank(**kw):
        raise AssertionError(f"the topology built rank {kw['rank']}")

    monkeypatch.setattr(topology_model, "RankInfo", no_rank)
    tracemalloc.start()
    try:
        res = CliRunner().invoke(main, ["explain", "--op", "allreduce", "--bytes", "1MiB",
                                        option, value], env={})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    line = _one_line_error(res)
    assert line.startswith(f"field {option}: "), line
    assert f"{_LIMIT} (MAX_TOPOLOGY_RANKS" in line or f"{_LIMIT - 1} (MAX_TOPOLOGY_RANKS" in line
    assert peak < 16 << 20, peak


@pytest.mark.parametrize("value, says", [
    ("²", "bad rank list item '²'"),  # str.isdigit() but not int(): a ValueError (exit 70)
    ("٣", "bad rank list item '٣'"),  # an Arabic-Indic digit: ranks are ASCII digits
    ("0-a", "bad rank list item '0-a'"),
])
def test_group_items_are_ascii_ranks_and_ranges_run_either_way(value, says):
    """docs/CLI.md: ``--group`` lists ranks and ranges ``a-b`` / ``a..b`` of ASCII digits; a
    range runs downward when ``a > b`` (``5-1`` is 5, 4, 3, 2, 1), as ``compress`` writes a
    ring's runs (``7..5``)."""
    res = CliRunner().invoke(main, ["explain", "--op", "allreduce", "--bytes", "1MiB",
                                    "--group", value], env={})
    line = _one_line_error(res)
    assert line.startswith("field --group: ") and says in line, line
    for spec in ("5,4,3,2,1", "5-1", "5..3,2-1"):
        order = run_json("explain", "--op", "allreduce", "--bytes", "1MiB", "--group", spec)
        assert order["triggers"][0]["group"] == [5, 4, 3, 2, 1]


@pytest.mark.parametrize("value, rank", [("3-1,1-3", 1), ("0-0,0-5", 0), ("4,5,4", 4)])
def test_a_rank_listed_twice_is_named(value, rank):
    """``--group 3-1,1-3`` said ``trigger 0: a rank appears twice in the replica group``,
    naming neither the option nor the rank."""
    res = CliRunner().invoke(main, ["explain", "--op", "allreduce", "--bytes", "1MiB",
                                    "--group", value], env={})
    line = _one_line_error(res)
    assert line == (f"field --group: rank {rank} is listed twice (a replica group holds each "
                    "rank once)"), line


# coverage audit (2026-12-05): model-less refusals no test reached (docs/CLI.md "explain")
@pytest.mark.parametrize("args, usage, why", [
    (["--op", "allreduce", "--ranks", "4"], True,
     "give MODEL, or --op and --bytes with --ranks or --group"),
    (["--bytes", "1MiB", "--ranks", "4"], True,
     "give MODEL, or --op and --bytes with --ranks or --group"),
    (["--op", "allreduce", "--bytes", "1MiB", "--ranks", "0"], True, "--ranks must be >= 1"),
    (["--op", "allreduce", "--bytes", "1MiB", "--ranks", "4", "--nodes", "0"], True,
     "--nodes must be >= 1"),
    (["--op", "allreduce", "--bytes", "1MiB", "--ranks", "4", "--nodes", "2", "--topology",
      "TOPO"], True, "--nodes combines with a preset --topology (trn1, trn2); a topology file "
                     "sets its own nodes"),
    (["--op", "allreduce", "--bytes", "1MiB", "--ranks", "4", "--dtype", "bf17"], False,
     "field --dtype: unknown dtype 'bf17' ("),
    # 6 bytes of bf16 are 3 elements: no 4 equal blocks (the all-gather output, the
    # reduce-scatter input); 8 bytes of fp32 are 2
    (["--op", "allgather", "--bytes", "6", "--ranks", "4"], False,
     "field --bytes: --bytes must split into 4 equal BF16 blocks for ALLGATHER (a "
     "multiple of 4 x 2 bytes), not 6"),
    (["--op", "reduce_scatter", "--bytes", "8", "--dtype", "fp32", "--ranks", "4"], False,
     "field --bytes: --bytes must split into 4 equal FP32 blocks for REDUCE_SCATTER (a "
     "multiple of 4 x 4 bytes), not 8"),
    # 3 bytes are no whole number of 2-byte BF16 elements
    (["--op", "allreduce", "--bytes", "3", "--ranks", "4"], False,
     "field --bytes: --bytes must be a positive multiple of the BF16 element size 2, not 3"),
    (["--op", "allreduce", "--bytes", "1MiB", "--group", ""], False,
     "field --group: empty rank list"),
    (["--op", "allreduce", "--bytes", "1MiB", "--group", "  "], False,
     "field --group: empty rank list"),
    # (--lnc's default is read from the file first: CLI.md "its lnc_size, else ...")
    (["--op", "allreduce", "--bytes", "1MiB", "--ranks", "4", "--topology", "LIST"], False,
     "LIST: a topology file must hold a JSON object"),
])
def test_model_less_option_mistakes_are_one_line(tmp_path, args, usage, why):
    topo, listed = tmp_path / "topo.json", tmp_path / "list.json"
    topo.write_text(json.dumps({"platform": "trn2", "torus": [2, 2]}))
    listed.write_text("[1, 2]")
    args = [{"TOPO": str(topo), "LIST": str(listed)}.get(a, a) for a in args]
    why = why.replace("LIST", str(listed))
    res = CliRunner().invoke(main, ["explain", *args], env={}, prog_name="nrtrewrite")
    assert res.exit_code == 2, (res.exit_code, res.output)
    if usage:
        assert res.stderr == (f"nrtrewrite explain: error: {why} (see 'nrtrewrite explain "
                              "--help')\n")
    else:
        assert _one_line_error(res).startswith(why)


@pytest.mark.parametrize("algo", ["^ring", "allreduce:^ring"])
def test_an_exclusion_reaches_the_hier_legs(algo):
    """SELECTION.md §8: an untargeted or per-collective ``^`` exclusion removes the engines
    from the HIER legs too. Under ``^ring`` a 1 KiB all-reduce over two whole trn2 nodes
    had intra legs RING ("fallback"); the intra slots' engines are RING and KANGARING, and
    KANGARING is legal on whole nodes though outside its window: it is taken, saying so."""
    d = run_json("explain", "--op", "allreduce", "--bytes", "1KiB", "--ranks", "128",
                 "--nodes", "2", "--algo", algo)
    legs = {leg["name"]: leg for leg in d["triggers"][0]["lowered"]["legs"]}
    for name in ("intra_redsct", "intra_allg"):
        assert legs[name]["algorithm"] == "KANGARING"
        assert "none allowed is inside its size window" in legs[name]["reason"]
    assert legs["inter_allr"]["algorithm"] == "SINGLE_CYCLE_RING"
    assert "RING" not in {leg["algorithm"] for leg in legs.values()}


@pytest.mark.parametrize("args,says", [
    (["--bytes", "1KiB", "--ranks", "128", "--algo", "^ring,single_cycle_ring"],
     "leaves the inter_allr leg no engine this build lowers there (MESH, the policy's and "
     "legal, is not lowerable as a HIER leg; the leg's lowerable engines: RING, "
     "SINGLE_CYCLE_RING; every one excluded)"),
    # the leg's policy engine (MESH) is legal but not lowerable as a HIER leg: the error
    # said "no legal engine (its engines: RING ...)" (an exploratory tester)
    (["--op", "allgather", "--bytes", "256", "--ranks", "128", "--algo", "^ring"],
     "leaves the inter_allg leg no engine this build lowers there (MESH, the policy's and "
     "legal, is not lowerable as a HIER leg; the leg's lowerable engines: RING; every one "
     "excluded)"),
    (["--bytes", "64MiB", "--group", "0,1,2,64,65,66", "--algo", "^ring"],
     "leaves the intra_allg leg no legal engine (its engines: RING, KANGARING; KANGARING: "
     "device 0 of node 0 has 3 of its 4 ranks in the group"),
])
def test_an_exclusion_that_leaves_a_hier_leg_nothing_is_an_error(args, says):
    """No silent RING on a leg the override excluded it from: a one-line SelectionError,
    in explain as in lower."""
    res = run("explain", *(() if "--op" in args else ("--op", "allreduce")), "--nodes", "2",
              *args)
    assert res.exit_code == 2
    line, = res.stderr.splitlines()
    assert line.startswith("nrtrewrite: error: trigger 0: --algo ") and says in line


def test_the_policy_reason_names_the_cascade_the_override_leaves():
    """An exploratory tester: under ``--algo 'hier,ring'`` the reason listed the whole
    precedence as the cascade run; it runs over the allowed engines only (SELECTION.md §8)."""
    for algo, order in (("hier,ring", "HIER > RING"),
                        ("^mesh", "HIER > INTRA_RDH > KANGARING > SINGLE_CYCLE_RING > "
                                  "INTER_RDH > RING")):
        reason = run_json("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "128",
                          "--nodes", "2", "--algo", algo)["triggers"][0]["policy"]["reason"]
        assert (f"first legal engine of {order} under the override {algo!r} for 2-node "
                "ALLREDUCE 1 MiB") in reason


def test_the_policy_reason_says_why_the_engines_before_its_own_lost():
    """SELECTION.md §4: 4 MiB of bf16 over 48 ranks of a trn2 node, 12 whole devices: no
    hypercube for INTRA_RDH, MESH past its [0, 1 MiB) window, KANGARING short of its [56 MiB,
    inf): RING, whose reason said only ``always legal (the fallback)``. --json and the text
    say each engine the cascade ran before RING and why it lost, in the candidate table's
    words; the text wraps the line inside the output's 132 columns, cutting nothing."""
    args = ("explain", "--op", "allreduce", "--bytes", "4MiB", "--group", "0-47")
    t = run_json(*args)["triggers"][0]
    reason = t["policy"]["reason"]
    assert t["policy"]["algorithm"] == "RING"
    assert reason.startswith("RING: first legal engine of HIER > INTRA_RDH > MESH > KANGARING "
                             "> SINGLE_CYCLE_RING > INTER_RDH > RING for intra-node ALLREDUCE "
                             "4 MiB (always legal (the fallback)); HIER not taken: ")
    said = {c["algorithm"]: c["reason"] for c in t["candidates"]}
    for alg in ("HIER", "INTRA_RDH", "MESH", "KANGARING", "SINGLE_CYCLE_RING", "INTER_RDH"):
        assert f"; {alg} not taken: {said[alg]}" in reason
    assert "; KANGARING not taken: 4 MiB below op_min_limit[ALLREDUCE] 56 MiB; " in reason
    assert "; RING not taken" not in reason  # (not the chosen one)
    res = run(*args)
    assert res.exit_code == 0
    assert all(len(line) <= 132 for line in res.output.splitlines())
    text = " ".join(res.output.split())
    assert f"policy choice: RING -- {' '.join(reason.split())}" in text
    # under an allow-list, only the engines it allows: MESH before RING
    reason = run_json(*args, "--algo", "mesh,ring")["triggers"][0]["policy"]["reason"]
    assert reason == ("RING: first legal engine of MESH > RING under the override "
                      "'mesh,ring' for intra-node ALLREDUCE 4 MiB (always legal (the "
                      "fallback)); MESH not taken: 4 MiB not below op_max_limit[ALLREDUCE] "
                      "1 MiB")


def test_nodes_given_twice_says_so():
    """An exploratory tester: ``--topology trn2:nodes=1 --nodes 3`` said that --nodes
    combines with a preset --topology, which ``trn2:nodes=1`` is: the node count was given
    twice."""
    res = run("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "8",
              "--topology", "trn2:nodes=1", "--nodes", "3")
    assert res.exit_code == 2
    assert ("--nodes and --topology trn2:nodes=1 both give the node count; give it once "
            "(--topology trn2 --nodes 3, or --topology trn2:nodes=3)") in res.stderr
    assert run("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "8", "--topology",
               "trn2", "--nodes", "3").exit_code == 0


def test_explain_refuses_what_lower_refuses_for_the_start_addr_limit():
    """A DRAM collective's element space must be addressable by the 32-bit TENSOR3D
    start_addr (2^32 bytes): ``lower`` refuses an 8 GiB all-reduce, and explain showed it
    lowered by KANGARING. 4 GiB is the largest that fits."""
    t = run_json("explain", "--op", "allreduce", "--bytes", "4GiB", "--ranks", "64")["triggers"][0]
    assert t["lowered"]["algorithm"] == "KANGARING"
    t = run_json("explain", "--op", "allreduce", "--bytes", str((4 << 30) + 2),
                 "--ranks", "64")["triggers"][0]
    assert t["lowered"]["algorithm"] == "INVALID"
    assert t["lowered"]["fallback_reason"] == (
        f"the collective's buffers span {(4 << 30) + 2} bytes; a 0xBF word's 32-bit TENSOR3D "
        f"start_addr addresses at most {1 << 32} (T3D_START_ADDR_LIMIT)")


def test_a_hier_inter_leg_is_sized_by_its_largest_slice_of_whole_elements():
    """An inter leg moves one of local_rank_n element slices. 254 B of bf16 (127 elements)
    over 2 x 64 ranks: slices of 1 or 2 elements, the leg 4 B (it said 254 // 64 = 3 B, not
    a whole element). 256 MiB - 126 B of bf16 over 64 ranks a node: 134217665 elements, the
    largest slice 2097152 elements = 4 MiB, as for 256 MiB, so both sit on the same side of
    a 4 MiB window edge (floor(B / 64) = 4 MiB - 2 put it inside)."""
    def inter(nbytes):
        t = run_json("explain", "--op", "allreduce", "--bytes", str(nbytes), "--ranks", "128",
                     "--nodes", "2")["triggers"][0]
        return next(leg for leg in t["policy"]["legs"] if leg["name"] == "inter_allr")
    assert inter(254)["bytes"] == 4
    edge, whole = inter((256 << 20) - 126), inter(256 << 20)
    assert edge["bytes"] == whole["bytes"] == 4 << 20
    assert edge["algorithm"] == whole["algorithm"]


def test_model_less_alu_reaches_the_selection():
    """KANGARING reduces with ADD only (seed 003 §4, SELECTION.md): a 64 MiB MAX all-reduce
    over a node is not KANGARING, though model-less explain could only describe ADD."""
    add = run_json("explain", "--op", "allreduce", "--bytes", "64MiB", "--ranks", "64")
    mx = run_json("explain", "--op", "allreduce", "--bytes", "64MiB", "--ranks", "64",
                  "--alu", "max")
    assert add["triggers"][0]["lowered"]["algorithm"] == "KANGARING"
    kanga = next(c for c in mx["triggers"][0]["candidates"] if c["algorithm"] == "KANGARING")
    assert mx["triggers"][0]["lowered"]["algorithm"] != "KANGARING" and not kanga["legal"]
    res = run("explain", "--op", "allgather", "--bytes", "1MiB", "--ranks", "8", "--alu", "max")
    assert res.exit_code == 2 and "ALLGATHER has no ALU op" in res.stderr


@pytest.mark.parametrize("doc, lnc", [
    ({"platform": "trn2", "torus": [2, 2]}, 2),             # the preset's default, as trn2's
    ({"platform": "trn1", "torus": [2, 2]}, 1),
    ({"torus": [2, 2], "device": {"dies": 2, "sengines_per_die": 2,
                                  "tpbs_per_sengine": 2}}, 2),   # lnc_sizes by default 1, 2
    ({"torus": [2, 2], "device": {"dies": 1, "sengines_per_die": 1,
                                  "tpbs_per_sengine": 1}}, 1),   # one core: only 1
    ({"torus": [2, 2], "lnc_sizes": [1, 2], "lnc_size": 1}, 1),  # the file's own
])
def test_model_less_lnc_defaults_to_2_where_the_files_platform_has_it(tmp_path, doc, lnc):
    """CLI.md: `--lnc` defaults to 2 (1 on trn1); a topology file without `lnc_size` was
    explained at 1 whatever its platform (the custom-topology tester)."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"format": "nrtrewrite-topology/1", **doc}))
    res = CliRunner().invoke(main, ["explain", "--op", "allreduce", "--bytes", "1MiB",
                                    "--ranks", "2", "--topology", str(p), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["topology"]["lnc_size"] == lnc


HYBRID16 = "0,4,8,12,16,20,24,28,32,36,40,44,48,52,56,60"


def test_single_cycle_channel_reason_says_why_it_runs_fewer_pairs_than_the_rule():
    """The 16-rank hybrid ring forces channel_n = 4, so SINGLE_CYCLE_RING's rule gives
    max(1, 4 / 2) = 2 channel pairs (SELECTION.md §7). A 2 KiB bf16 all-reduce is 1024
    elements over 16 chunk positions: 2 pairs would give 32 elements a position, below
    __set_active_channels' 64, so the layout keeps 1 pair (2 channels), and the reason says so
    as the ring's does (found by a selection audit: it gave the pair count without its cause).
    At 64 MiB both pairs run and no such clause appears."""
    doc = run_json("explain", "--op", "allreduce", "--bytes", "2KiB", "--group", HYBRID16,
                   "--algo", "single_cycle_ring")
    ch = doc["triggers"][0]["channels"] if "triggers" in doc else doc["channels"]
    assert ch["count"] == 2
    assert ("forces channel_n = 4; SINGLE_CYCLE_RING: max(1, 4 / 2) = 2 channel pair(s), each "
            "ring forward and backward: 4 channel(s); the chunk layout keeps 1 pair(s) "
            "(__set_active_channels: at least 64 elements per chunk position); "
            "SINGLE_CYCLE_RING runs 1 channel pair(s)") in ch["reason"], ch["reason"]
    doc = run_json("explain", "--op", "allreduce", "--bytes", "64MiB", "--group", HYBRID16,
                   "--algo", "single_cycle_ring")
    ch = doc["triggers"][0]["channels"] if "triggers" in doc else doc["channels"]
    assert ch["count"] == 4
    assert "keeps" not in ch["reason"] and ch["reason"].endswith(
        "SINGLE_CYCLE_RING: max(1, 4 / 2) = 2 channel pair(s), each ring forward and backward: "
        "4 channel(s)")


def test_trigger_record_keys_follow_the_documented_table():
    """docs/CLI.md "explain --json", a trigger record: `group_size` the ranks in the group,
    `rank` only with --rank, `policy.hier_selections` a map of the five HIER slots for HIER
    only, else null."""
    (t,) = run_json("explain", "--op", "allreduce", "--bytes", "8MiB", "--group", "0-7,64-71",
                    "--algo", "ring")["triggers"]
    assert t["group_size"] == 16 and len(t["nodes"]) == 2
    assert "rank" not in t
    assert t["policy"]["algorithm"] == "RING" and t["policy"]["hier_selections"] is None
    (h,) = run_json("explain", "--op", "allreduce", "--bytes", "8MiB", "--group", "0-7,64-71",
                    "--algo", "hier", "--rank", "3")["triggers"]
    assert h["rank"] == 3 and h["policy"]["algorithm"] == "HIER"
    assert set(h["policy"]["hier_selections"]) == {"alg_intra_allg", "alg_intra_redsct",
                                                   "alg_inter_allr", "alg_inter_allg",
                                                   "alg_inter_redsct"}


def test_ring_channel_count_is_what_the_chunk_layout_keeps():
    """docs/CLI.md "explain --json": `channels.count` is the channels `lower` uses.  The
    16-rank hybrid ring forces channel_n = 4 (SELECTION.md §7), but a 2 KiB bf16 all-reduce
    is 1024 elements over 16 chunk positions: 2 channels would give a position 32 elements,
    below __set_active_channels' 64, so RING keeps 1 channel: count 1, one ring."""
    (t,) = run_json("explain", "--op", "allreduce", "--bytes", "2KiB", "--group", HYBRID16,
                    "--algo", "ring")["triggers"]
    ch = t["channels"]
    assert "forces channel_n = 4" in ch["reason"] and "keeps 1 " in ch["reason"]
    assert ch["count"] == len(ch["rings"]) == 1


def test_ring_hops_and_dup_as_documented():
    """docs/CLI.md "explain": per channel the ring order with its hop counts by locality in
    the order `dev/link/c2c/net`, and `dup` for a channel that repeats an earlier ring (JSON
    `duplicate`).  Ranks 0..7 and 64..71 at lnc 2 are two devices of 4 ranks on each of two
    nodes: the ring 0..7 64..71 has 12 same-device hops, 2 device links (3->4, 67->68) and 2
    network hops (7->64, 71->0).  8 MiB asks for 32 channels; the group has 4 distinct
    rings (the two directions, each leaving the nodes from either device), so the channel
    rule caps the count at 4 and no channel repeats a ring: no `dup` (before the fix of
    ``test_a_group_has_one_set_of_distinct_rings_whatever_the_count``, 4 channels took 2
    rings twice here)."""
    args = ("explain", "--op", "allreduce", "--bytes", "8MiB", "--group", "0-7,64-71",
            "--algo", "ring")
    rings = run_json(*args)["triggers"][0]["channels"]["rings"]
    assert rings[0]["order"] == [*range(8), *range(64, 72)]
    assert rings[0]["hops"] == {"SAME_DEVICE": 12, "DEVICE_LINK": 2, "C2C_PORT": 0,
                                "NETWORK": 2}
    seen = []
    for r in rings:
        assert r["duplicate"] == (r["order"] in seen)
        seen.append(r["order"])
    assert len(rings) == 4 and not any(r["duplicate"] for r in rings)
    text = run(*args).output
    assert "│ 0..7 64..71               │ 12/2/0/2 " in text
    assert "capped at 4 by 4 distinct ring(s) over the group" in text
    assert not [line for line in text.splitlines() if line.rstrip().endswith("│ dup")]


def test_rank_skips_the_triggers_whose_group_lacks_it():
    """docs/CLI.md "explain --json": `skipped_triggers` are the ordinals of the triggers
    whose group does not contain --rank.  fixtures/groups.yaml: triggers 0..4 on groups 0, 1,
    2, 3, 2 = ranks 0-3, 4-7, 8-11, 12-15, 8-11; rank 9 is in triggers 2 and 4 only."""
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "groups.neff"
    d = run_json("explain", str(fix), "--rank", "9")
    assert d["rank"] == 9 and d["skipped_triggers"] == [0, 1, 3]
    assert [t["trigger"] for t in d["triggers"]] == [2, 4]
    text = run("explain", str(fix), "--rank", "9").output
    assert "rank 9 is not in trigger(s) 0, 1, 3; skipped" in text


def test_a_clause_is_not_called_idle_when_rank_leaves_out_what_it_governs():
    """docs/SELECTION.md §8: `explain` of a model warns of a clause that applies to nothing
    only when it shows every collective, not when --rank or --trigger leaves out one the
    clause might govern.  fixtures/groups.yaml: the one ALLGATHER (trigger 1) is on ranks
    4-7, so --rank 9 leaves it out and `allgather:ring` is not said to apply to nothing."""
    fix = str(Path(__file__).resolve().parents[1] / "fixtures" / "groups.neff")
    res = run("explain", fix, "--rank", "9", "--algo", "allgather:ring")
    assert res.exit_code == 0, res.output
    assert "applies to nothing" not in res.stderr
    res = run("explain", fix, "--trigger", "0", "--algo", "allgather:ring")
    assert res.exit_code == 0 and "applies to nothing" not in res.stderr
    res = run("explain", fix, "--algo", "broadcast:ring")
    assert res.exit_code == 0
    assert "it has no BROADCAST collective" in res.stderr


def test_overview_is_for_more_than_64_triggers_and_has_every_column(monkeypatch):
    """docs/CLI.md "explain": a model of *more than* 64 triggers gets the overview, one row
    per trigger (op, dtype, bytes, ranks, the policy's and the lowered algorithm, channels);
    a model of exactly the threshold is explained in full."""
    import nrtrewrite.cli.explain as E
    assert E.OVERVIEW_TRIGGERS == 64
    model = str(Path(__file__).resolve().parents[1] / "fixtures" / "mix8.neff")
    doc = json.loads(CliRunner().invoke(main, ["explain", model, "--json"]).output)
    n = len(doc["triggers"])
    monkeypatch.setattr(E, "OVERVIEW_TRIGGERS", n)
    full = CliRunner().invoke(main, ["explain", model]).output
    assert full.count("candidates") == n and f"{n} triggers" not in full
    monkeypatch.setattr(E, "OVERVIEW_TRIGGERS", n - 1)
    res = CliRunner().invoke(main, ["explain", model])
    rows = [[c.strip() for c in line.strip("│").split("│")]
            for line in res.output.splitlines() if line.startswith("│")]
    assert len(rows) == n
    for cells, t in zip(rows, doc["triggers"]):
        assert cells[2] == t["dtype"] and cells[4] == str(len(t["group"]))
        assert cells[5] == t["policy"]["algorithm"]
        assert cells[7] == str(t["channels"]["count"])


def test_alu_is_taken_for_every_reducing_collective():
    """docs/CLI.md "explain": `--alu` is the reduction's ALU op, refused for an all-gather
    only (which does not reduce): a REDUCE takes it too, and is shown (lowered INVALID)."""
    (t,) = run_json("explain", "--op", "reduce", "--bytes", "64KiB", "--ranks", "4",
                    "--alu", "max")["triggers"]
    assert t["op"] == "REDUCE" and t["lowered"]["algorithm"] == "INVALID"
    res = run("explain", "--op", "allgather", "--bytes", "64KiB", "--ranks", "4", "--alu", "max")
    assert res.exit_code == 2


def test_json_error_document_names_the_model(tmp_path):
    """docs/CLI.md "explain --json": on an error (exit 2) stdout is `{"model": MODEL or null,
    "error": MESSAGE, "warnings": [...], "triggers": []}`, MESSAGE the stderr line without its
    prefix."""
    fix = str(Path(__file__).resolve().parents[1] / "fixtures" / "ar2.neff")
    res = run("explain", fix, "--rank", "7", "--json")
    assert res.exit_code == 2
    (line,) = res.stderr.splitlines()
    assert json.loads(res.stdout) == {"model": fix, "warnings": [], "triggers": [],
                                      "error": line.removeprefix("nrtrewrite: error: ")}


def test_the_start_addr_limit_is_for_dram_buffers_only():
    """docs/CLI.md "explain": `lower` refuses DRAM buffers whose element space spans more than
    the 2^32 bytes a TENSOR3D `start_addr` addresses (an 8 GiB all-reduce); SBUF operands
    (--sbuf) are not addressed that way, so the same size in SBUF is lowered."""
    args = ("explain", "--op", "allreduce", "--bytes", "8GiB", "--ranks", "16")
    (dram,) = run_json(*args)["triggers"]
    assert dram["lowered"]["algorithm"] == "INVALID"
    (sbuf,) = run_json(*args, "--sbuf")["triggers"]
    assert sbuf["sbuf"] and sbuf["lowered"]["algorithm"] != "INVALID"
    assert sbuf["lowered"]["fallback_reason"] is None


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize("model, topology, line", [
    ("node64.neff", "trn1", "field lnc_size: trn1 supports lnc_size 1, not 2"),
    ("two_node128.neff", "trn2:nodes=1", "field topology, rank 64: rank 64 does not fit "
     "topology trn2:nodes=1 with lnc_size 2 (1 node(s) x 64 ranks = ranks 0..63)"),
    ("mix8.neff", "no-such.json", "field topology: topology 'no-such.json' is neither a preset "
     "(trn1, trn2, trn1:nodes=N, trn2:nodes=N) nor a readable file (no such file)"),
])
def test_a_topology_refused_for_a_model_names_the_model_as_lower_does(tmp_path, model,
                                                                      topology, line):
    """(Found by an exploratory tester: explain's line left the model out; CLI.md "Errors":
    ``<where>`` is the file, then whatever applies.)"""
    neff = FIXTURES / model
    want = f"nrtrewrite: error: {neff}: {line}"
    for cmd in (["explain", str(neff)], ["lower", str(neff), "-o", str(tmp_path / "o")]):
        res = CliRunner().invoke(main, [*cmd, "--topology", topology])
        assert res.exit_code == 2 and res.stderr.splitlines() == [want], res.stderr
    res = CliRunner().invoke(main, ["explain", str(neff), "--topology", topology, "--json"])
    assert json.loads(res.stdout)["error"] == want[len("nrtrewrite: error: "):]


def test_a_topology_path_that_is_no_file_says_what_is_there(tmp_path):
    import os
    from nrtrewrite.topology.model import load_topology
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name, what in (("missing.json", "no such file"), ("dir", "a folder"),
                       ("fifo", "not a regular file: a FIFO, a socket or a device")):
        with pytest.raises(ValidationError) as exc:
            load_topology(str(tmp_path / name), world=(0,), lnc_size=2)
        assert str(exc.value).endswith(f"nor a readable file ({what})")


def test_an_rdh_step_table_shows_half_open_ranges():
    """explain --rank's RDH steps printed element ranges as lists, ``[0, 500]``, where they
    are half-open, as schedule shows them (a schedule tester)."""
    text = run("explain", "--op", "allreduce", "--bytes", "2000", "--ranks", "3", "--algo",
               "intra_rdh", "--rank", "0").output
    assert "│ [0, 500)    │ [500, 1000)" in text and "[0, 500]" not in text


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.replace("┃", "│").split("│")]


def test_an_rdh_step_table_names_each_range_by_its_json_key():
    """explain --rank's RDH steps: one column per range a step has in --json, ``keep``,
    ``send``, ``receive`` (docs/CLI.md ``rdh.rank.steps``), each empty where the step has
    none.  The columns were ``keep/send`` and ``send/receive``, keep | send on a halving
    row, send | receive on a doubling one, and an unfold's send stood under ``keep/send``
    (review 58i).  3 ranks, 1000 bf16 elements: core ranks 0 and 2, rank 1 folded into 0
    (DESIGN "Mesh and RDH"); rank 0 receives rank 1's input, halves with 2 (keeps the
    lower half), doubles with 2 (sends its half, receives the other), sends the result
    back to 1."""
    text = run("explain", "--op", "allreduce", "--bytes", "2000", "--ranks", "3", "--algo",
               "intra_rdh", "--rank", "0").output
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("stage "))
    assert _cells(lines[head]) == ["stage", "event", "partner", "keep", "send", "receive"]
    rows = [_cells(line) for line in lines[head + 2:head + 6]]
    assert [[r[0], r[2], *r[3:]] for r in rows] == [
        ["fold", "1", "", "", "[0, 1000)"],
        ["rh0", "2", "[0, 500)", "[500, 1000)", ""],
        ["rd0", "2", "", "[0, 500)", "[500, 1000)"],
        ["unfold", "1", "", "[0, 1000)", ""]]


# -- model-wide limits: explain says what lower refuses the whole model for ------------------

def _ar(**kw):
    body = {"dtype": "bf16", "op": "add", "src": "in", "dst": "out", "num_elements": 64}
    body.update(kw)
    return {"all_reduce": body}


def _limits_model(tmp_path, mutate) -> str:
    from conftest import unvalidated_spec

    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / "m.neff"
    path.write_bytes(assemble_spec(unvalidated_spec(mutate)))
    return str(path)


def _lower_line(path, tmp_path, *extra) -> str:
    """lower's one error line, without its "nrtrewrite: error: PATH: " head."""
    res = run("lower", path, "-o", str(tmp_path / "out"), "-j", "1", *extra)
    assert res.exit_code == 2 and not (tmp_path / "out").exists(), res.output
    head = f"nrtrewrite: error: {path}: "
    assert res.output.startswith(head) and res.output.count("\n") == 1, res.output
    return res.output[len(head):-1]


def test_explain_shows_the_trigger_past_the_spad_entries_of_a_subgraph(tmp_path):
    """513 all-reduces on one group of one subgraph: the TOP_SP SPAD holds 512 entries
    (4096 / 8 bytes, seed 000 §4.3), so lower refuses the model at trigger 512; explain marks
    that trigger INVALID with lower's reason, the 512 before it lowered, and says so at the
    head even when only trigger 0 is explained."""
    from conftest import sp
    path = _limits_model(tmp_path, lambda s: sp(s).__setitem__(slice(None), [_ar()] * 513))
    line = _lower_line(path, tmp_path)
    assert line.startswith("member sg00/sp.bin, subgraph sg00, stream sp, instruction 512, "
                           "trigger 512: 513 collectives on replica group 0..7 need 513 SPAD")
    d = run_json("explain", path)
    assert d["model_refusal"] == line
    lowered = [t["lowered"] for t in d["triggers"]]
    assert [low["algorithm"] == "INVALID" for low in lowered] == [False] * 512 + [True]
    assert lowered[512]["fallback_reason"] == line.split(": ", 1)[1]
    assert run_json("explain", path, "--trigger", "0")["model_refusal"] == line
    text = run("explain", path, "--trigger", "0").output
    assert f"lower refuses the whole model: {line}" in text.splitlines()  # one line, whole


def test_explain_shows_the_scratch_past_the_core_window(tmp_path):
    """Vars in (12 GiB + 4 KiB), out (12 GiB) and tmp (4 KiB) fit the 28 GiB of a core's
    window below the SBUF window (DRAM from 2^32, SBUF from 2^35: docs/FORMATS.md §10), but
    a bf16 all-reduce of 2^31 elements from in to out takes a scratch of its 4 GiB message
    (its engine's prepare: RING and KANGARING receive a whole message, docs/DESIGN.md):
    28 GiB + 8 KiB.  lower refuses the whole model, naming no trigger; explain said nothing
    (it laid out the vars alone), and now says so at its head, with --trigger 0 too."""
    from conftest import sp

    def big(s):
        s["subgraphs"][0]["vars"][0]["size"] = (12 << 30) + 4096
        s["subgraphs"][0]["vars"][1]["size"] = 12 << 30
        sp(s)[1] = _ar(num_elements=1 << 31)
    path = _limits_model(tmp_path, big)
    line = _lower_line(path, tmp_path)
    assert line == (f"the model's DRAM vars, scratch and gateway need {(28 << 30) + 8192} "
                    f"bytes per core (vars {(24 << 30) + 8192}, scratch {1 << 32}, gateway 0), "
                    f"more than the {28 << 30} bytes of the core window below the SBUF window")
    for args in ((), ("--trigger", "0")):
        d = run_json("explain", path, *args)
        assert d["model_refusal"] == line and d["refused_not_shown"] == []
        assert d["triggers"][0]["lowered"]["algorithm"] != "INVALID"  # no trigger is named
        text = run("explain", path, *args).output
        assert f"lower refuses the whole model: {line}" in text.splitlines()


def _spec_model(tmp_path, spec) -> str:
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / "m.neff"
    path.write_bytes(assemble_spec(spec))
    return str(path)


def _lower_refusal(path, tmp_path, *args) -> str:
    """lower's one error line with ``args``, without its "nrtrewrite: error: PATH: " head."""
    res = run("lower", path, "-o", str(tmp_path / "out"), "-j", "1", *args)
    assert res.exit_code == 2 and not (tmp_path / "out").exists(), res.output
    head = f"nrtrewrite: error: {path}: "
    assert res.output.startswith(head) and res.output.count("\n") == 1, res.output
    return res.output[len(head):-1]


def test_explain_refuses_at_the_trigger_lower_refuses_first(tmp_path):
    """Two all-reduces, trigger 0 on ranks 0..3 and trigger 1 on ranks 4..12 (lnc 2),
    ``--algo kangaring`` illegal for both (docs/SELECTION.md: a forced engine's predicate
    refuses).  lower selects every trigger first and refuses at the first (docs/CLI.md
    ``model_refusal``), trigger 0, with or without --rank; explain --rank 5 (trigger 0
    skipped) and --trigger 1 showed trigger 1 alone and refused with trigger 1's reason.
    Every path now refuses with lower's line, in text and in --json's error."""
    spec = {"header": {"lnc_size": 2}, "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 64},
                 {"name": "o", "type": "output", "size": 64},
                 {"name": "i2", "type": "input", "size": 1024},
                 {"name": "o2", "type": "output", "size": 1024}],
        "replica_groups": [list(range(4)), list(range(4, 13))],
        "engines": {"sp": [
            {"all_reduce": {"dtype": "bf16", "op": "add", "src": "i", "dst": "o",
                            "num_elements": 5}},
            {"all_reduce": {"dtype": "bf16", "op": "add", "src": "i2", "dst": "o2",
                            "num_elements": 9, "group": 1}}]}}]}
    path = _spec_model(tmp_path, spec)
    line = _lower_refusal(path, tmp_path, "--algo", "kangaring")
    assert line.startswith("member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, "
                           "trigger 0: --algo 'kangaring' forces KANGARING, refused: "), line
    assert _lower_refusal(path, tmp_path, "--algo", "kangaring", "--rank", "5") == line
    for args in ((), ("--rank", "5"), ("--trigger", "1"), ("--rank", "5", "--trigger", "1"),
                 ("--trigger", "0")):
        res = run("explain", path, "--algo", "kangaring", *args)
        assert (res.exit_code, res.output) == (2, f"nrtrewrite: error: {path}: {line}\n"), args
        res = run("explain", path, "--algo", "kangaring", *args, "--json")
        assert res.exit_code == 2, args
        doc = json.loads(res.output[:res.output.rindex("}") + 1])
        assert doc == {"model": path, "error": f"{path}: {line}", "warnings": [],
                       "triggers": []}, args


def test_explain_meets_a_forced_engines_refusal_before_the_vars_past_the_core_window(
        tmp_path):
    """Vars of 16 GiB + 16 GiB pass the 28 GiB core window (docs/FORMATS.md §10); a 16 GiB
    all-reduce on ranks 0..2 forced on MESH is refused by MESH's rule (its channel buffer).
    lower selects before it lays out memory, so it names the engine; explain checked the
    vars first and gave the memory line.  Unforced, both give the memory line (32 GiB =
    34359738368 bytes), with a --rank outside the world too (lower checks its ranks after
    its plan)."""
    spec = {"header": {"lnc_size": 2}, "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 16 << 30},
                 {"name": "o", "type": "output", "size": 16 << 30}],
        "replica_groups": [[0, 1, 2]],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "i",
                                           "dst": "o", "bytes": 16 << 30}}]}}]}
    path = _spec_model(tmp_path, spec)
    forced = _lower_refusal(path, tmp_path, "--algo", "mesh")
    assert forced.startswith("member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, "
                             "trigger 0: --algo 'mesh' forces MESH, refused: "), forced
    memory = (f"the model's DRAM vars need {32 << 30} bytes per core, more than the "
              f"{28 << 30} bytes of the core window below the SBUF window")
    assert _lower_refusal(path, tmp_path) == memory
    assert _lower_refusal(path, tmp_path, "--rank", "99") == memory
    for args, line in ((("--algo", "mesh"), forced), ((), memory), (("--rank", "99"), memory),
                       (("--algo", "mesh", "--trigger", "0"), forced)):
        res = run("explain", path, *args)
        assert (res.exit_code, res.output) == (2, f"nrtrewrite: error: {path}: {line}\n"), args


def test_explain_with_a_rank_outside_the_world_refuses_where_lower_does(tmp_path):
    """docs/CLI.md "Errors": a --rank outside the model's world comes after lower's plan.
    ``--rank 99`` (world 0..12) shows no trigger, so a forced KANGARING refused for both
    all-reduces (as in the test above) was refused for the rank, where lower names trigger 0's
    selection; an FP32 all-reduce (docs/CLI.md: lower refuses its dtype) alike.  A model
    lower plans gives the rank's line (world 0..12)."""
    ar = {"dtype": "bf16", "op": "add", "src": "i", "dst": "o", "num_elements": 5}
    spec = {"header": {"lnc_size": 2}, "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 64},
                 {"name": "o", "type": "output", "size": 64}],
        "replica_groups": [list(range(4)), list(range(4, 13))],
        "engines": {"sp": [{"all_reduce": ar}, {"all_reduce": {**ar, "group": 1}}]}}]}
    forced = _spec_model(tmp_path, spec)
    (tmp_path / "f").mkdir()
    ar["dtype"] = "fp32"
    fp32 = _spec_model(tmp_path / "f", spec)
    rank = "field --rank: rank 99 is not in the model's world (ranks 0..12)"
    selection = ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, trigger 0: "
                 "--algo 'kangaring' forces KANGARING, refused: ")
    dtype = ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, offset 0xe, field "
             "dtype, trigger 0: ALLREDUCE in FP32 cannot be lowered: the CCE reduce accepts "
             "only BF16, FP16, FP32R and FP8_E3/E4/E5 (seed 000 §3.4)")
    for path, args, head in ((forced, ("--algo", "kangaring"), selection),
                             (fp32, (), dtype), (forced, (), rank)):
        line = _lower_refusal(path, tmp_path, *args, "--rank", "99")
        assert line.startswith(head) and (head != rank or line == rank), line
        res = run("explain", path, *args, "--rank", "99")
        assert (res.exit_code, res.output) == (2, f"nrtrewrite: error: {path}: {line}\n"), args
        res = run("explain", path, *args, "--rank", "99", "--json")
        assert res.exit_code == 2, args
        doc = json.loads(res.output[:res.output.rindex("}") + 1])
        assert doc == {"model": path, "error": f"{path}: {line}", "warnings": [],
                       "triggers": []}, args


def test_an_unknown_trigger_is_refused_after_what_schedules_plan_refuses(tmp_path):
    """docs/CLI.md: an unknown --trigger is an error "as for schedule", which plans the
    triggers asked for first.  Vars of 15 GiB + 15 GiB at lnc 2 pass the 28 GiB core window
    (docs/FORMATS.md §10, docs/ASSEMBLE.md); all-reduces on ranks 0,1 and 4..7.
    ``--trigger 9`` gave "no trigger 9" where schedule gives the memory line; under a
    forced KANGARING (refused for trigger 0: 2 of a device's 4 ranks) schedule selects every
    trigger first and names trigger 0.  The lowest unknown ordinal is named, as schedule
    names it; on a model schedule plans, the unknown trigger's line."""
    ar = {"dtype": "bf16", "op": "add", "src": "i", "dst": "o", "num_elements": 5}
    spec = {"header": {"lnc_size": 2}, "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 15 << 30},
                 {"name": "o", "type": "output", "size": 15 << 30}],
        "replica_groups": [[0, 1], [4, 5, 6, 7]],
        "engines": {"sp": [{"all_reduce": ar}, {"all_reduce": {**ar, "group": 1}}]}}]}
    path = _spec_model(tmp_path, spec)
    memory = (f"the model's DRAM vars need {30 << 30} bytes per core, more than the "
              f"{28 << 30} bytes of the core window below the SBUF window")
    forced = ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, trigger 0: "
              "--algo 'kangaring' forces KANGARING, refused: enc_can_post_kangaring_operation: "
              "device 0 of node 0 has 2 of its 4 ranks in the group; KangaRing needs every "
              "rank of each device it touches")
    for args, line in ((("--trigger", "9"), memory),
                       (("--trigger", "0", "--trigger", "9"), memory),
                       (("--trigger", "9", "--algo", "kangaring"), forced)):
        res = run("schedule", path, "--rank", "0", *args)
        assert (res.exit_code, res.output) == (2, f"nrtrewrite: error: {path}: {line}\n"), args
        res = run("explain", path, *args)
        assert (res.exit_code, res.output) == (2, f"nrtrewrite: error: {path}: {line}\n"), args
        res = run("explain", path, *args, "--json")
        assert res.exit_code == 2, args
        doc = json.loads(res.output[:res.output.rindex("}") + 1])
        assert doc == {"model": path, "error": f"{path}: {line}", "warnings": [],
                       "triggers": []}, args
    (tmp_path / "s").mkdir()
    spec["subgraphs"][0]["vars"] = [{"name": "i", "type": "input", "size": 64},
                                    {"name": "o", "type": "output", "size": 64}]
    path = _spec_model(tmp_path / "s", spec)
    for cmd in (("schedule", path, "--rank", "0"), ("explain", path)):
        res = run(*cmd, "--trigger", "9", "--trigger", "7")
        assert (res.exit_code, res.output) == (
            2, f"nrtrewrite: error: {path}: no trigger 7 (the model has 2: 0..1)\n"), cmd


def test_explain_with_a_rank_outside_the_world_gives_lowers_model_wide_refusal(tmp_path):
    """Review 48o (a mutant of test_explain_with_a_rank_outside_the_world_refuses_where_lower_does's
    fix passed it): --rank 99 of a model lower refuses as a whole (vars 12 GiB + 4 KiB and
    12 GiB with a 2^31-element bf16 all-reduce's scratch past the 28 GiB core window,
    docs/FORMATS.md §10) is the memory line, as lower's, not the rank's."""
    ar = {"dtype": "bf16", "op": "add", "src": "i", "dst": "o", "num_elements": 1 << 31}
    spec = {"header": {"lnc_size": 2}, "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": (12 << 30) + 4096},
                 {"name": "o", "type": "output", "size": 12 << 30}],
        "replica_groups": [[0, 1]], "engines": {"sp": [{"all_reduce": ar}]}}]}
    whole = _spec_model(tmp_path, spec)
    line = _lower_refusal(whole, tmp_path, "--rank", "99")
    need = (12 << 30) + 4096 + (12 << 30) + (4 << 30)  # (the vars, a message of scratch)
    assert line.startswith(f"the model's DRAM vars, scratch and gateway need {need} bytes "), line
    res = run("explain", whole, "--rank", "99")
    assert (res.exit_code, res.output) == (2, f"nrtrewrite: error: {whole}: {line}\n")


def test_an_unknown_trigger_follows_schedules_plan_of_the_triggers_asked_for(tmp_path):
    """Review 48o (mutants of test_an_unknown_trigger_is_refused_after_what_schedules_plan_refuses's
    fix passed it): schedule checks its plan (trigger 1's 6 GiB buffers past TENSOR3D's
    4 GiB ``start_addr``), so --trigger 1 --trigger 9 is that line; and it plans only the
    triggers asked for, so trigger 1's FP32 does not stop --trigger 0 --trigger 9: the
    unknown trigger's line.  explain says what schedule says."""
    small = {"dtype": "bf16", "op": "add", "src": "i", "dst": "o", "num_elements": 5}
    big = 3 << 30
    spec = {"header": {"lnc_size": 2}, "subgraphs": [{
        "vars": [{"name": "i", "type": "input", "size": 64},
                 {"name": "o", "type": "output", "size": 64},
                 {"name": "I", "type": "input", "size": 2 * big},
                 {"name": "O", "type": "output", "size": 2 * big}],
        "replica_groups": [list(range(4)), list(range(4, 13))],
        "engines": {"sp": [{"all_reduce": small},
                           {"all_reduce": {**small, "group": 1, "src": "I", "dst": "O",
                                           "num_elements": big}}]}}]}
    (tmp_path / "t").mkdir()
    start = _spec_model(tmp_path / "t", spec)
    spec["subgraphs"][0]["engines"]["sp"][1] = {"all_reduce": {**small, "group": 1,
                                                               "dtype": "fp32"}}
    (tmp_path / "f").mkdir()
    fp32 = _spec_model(tmp_path / "f", spec)
    for path, asked, want in ((start, ("1", "9"), f"{2 * big} bytes"),
                              (fp32, ("0", "9"), "no trigger 9 (the model has 2: 0..1)")):
        args = [a for k in asked for a in ("--trigger", k)]
        res = run("schedule", path, "--rank", "0", *args)
        assert res.exit_code == 2 and want in res.output and res.output.count("\n") == 1, \
            res.output
        assert run("explain", path, *args).output == res.output, args


def test_an_unknown_trigger_is_refused_with_no_warning_before_it_as_schedule_does(tmp_path):
    """docs/CLI.md "explain": the warnings lower gives (``--no-verify-hash``'s; a model
    without triggers that looks already lowered) come where lower gives them, once the plan
    is made, so an unknown ``--trigger`` is the one line schedule prints, which refuses
    before its warnings: fixtures/ar2.neff has trigger 0 alone, its lowered NEFF none.
    Until 2026-12-06 explain printed the warning line first.  A rank outside the world is
    refused after the plan (lower's order), so after the warning, as lower gives it."""
    from nrtrewrite.golden import lower_to

    ar2 = str(FIXTURES / "ar2.neff")
    lowered = str(lower_to(FIXTURES / "ar2.neff", tmp_path / "out", None) / "ar2.neff")
    for path, extra, line in ((ar2, ("--no-verify-hash",), "no trigger 9 (the model has 1: 0..0)"),
                              (lowered, (), "no trigger 9 (the model has 0)")):
        for cmd in (("schedule", path, "--rank", "0"), ("explain", path)):
            res = run(*cmd, *extra, "--trigger", "9")
            assert (res.exit_code, res.output) == (2, f"nrtrewrite: error: {path}: {line}\n"), cmd
    warning = f"nrtrewrite: warning: {ar2}: header hash not verified (--no-verify-hash)\n"
    world = f"nrtrewrite: error: {ar2}: field --rank: rank 99 is not in the model's world"
    for cmd in (("lower", ar2, "-o", str(tmp_path / "o")), ("explain", ar2)):
        res = run(*cmd, "--no-verify-hash", "--rank", "99")
        assert res.exit_code == 2 and res.output.startswith(warning + world), cmd


def test_explain_shows_the_trigger_past_the_descriptors_of_a_rank(tmp_path):
    """300 in-place 4 GiB all-reduces: each fits, together they pass MAX_RANK_DESCRIPTORS
    (as tests/test_limits.py test_descriptor_volume_per_rank); explain names the trigger
    lower refuses the model at, in lower's words."""
    from conftest import sp

    def heavy(s):
        s["subgraphs"][0]["vars"][2]["size"] = 4 << 30
        sp(s)[:] = [_ar(src="tmp", dst="tmp", num_elements=2 << 30)] * 300
    path = _limits_model(tmp_path, heavy)
    line = _lower_line(path, tmp_path)
    assert line.endswith("(MAX_RANK_DESCRIPTORS)")
    d = run_json("explain", path)
    assert d["model_refusal"] == line
    invalid = [t["trigger"] for t in d["triggers"] if t["lowered"]["algorithm"] == "INVALID"]
    assert len(invalid) == 1 and f"trigger {invalid[0]}: " in line


def test_explain_counts_a_hier_triggers_three_spad_entries(tmp_path, monkeypatch):
    """Two subgraphs of two HIER all-reduces each on group 0,1,64,65 (lnc 2: two nodes):
    3 entries each (intra RS, inter AR, intra AG; seed 000 §4.3), 12 on every rank.  Under a
    limit of 11 the 12th entry, sg01's second trigger's (trigger 3), is one too many, as
    tests/test_limits.py works out for lower's plan (HIER forced: the default passes the last
    HIER over since 2026-12-07, SELECTION.md "The SPAD gate")."""
    import nrtrewrite.limits as L
    from conftest import hier_in_two_subgraphs
    path = _limits_model(tmp_path, lambda s: hier_in_two_subgraphs(s, _ar(num_elements=512)))
    d = run_json("explain", path)
    assert d["model_refusal"] is None
    assert [t["lowered"]["algorithm"] for t in d["triggers"]] == ["HIER"] * 4
    monkeypatch.setattr(L, "MAX_RANK_SPAD_ENTRIES", 11)
    line = _lower_line(path, tmp_path, "--algo", "hier")
    d = run_json("explain", path, "--algo", "hier")
    assert d["model_refusal"] == line
    assert line.startswith("member sg01/sp.bin, subgraph sg01, stream sp, instruction 1, "
                           "trigger 3: the collectives of replica group 0,1,64,65 need 12 SPAD")
    assert [t["lowered"]["algorithm"] for t in d["triggers"]] == ["HIER"] * 3 + ["INVALID"]


def test_explain_names_the_rank_when_only_shared_ranks_pass_a_limit(tmp_path, monkeypatch):
    """Groups 0,1 (3 triggers, sg00) and 1,2 (2 triggers, sg01) share rank 1: 5 entries
    there.  Under a limit of 4 lower refuses naming rank 1 and no trigger: explain says so at
    the head and lowers every trigger."""
    import nrtrewrite.limits as L
    from conftest import groups_sharing_rank_1
    path = _limits_model(tmp_path, lambda s: groups_sharing_rank_1(s, _ar()))
    monkeypatch.setattr(L, "MAX_RANK_SPAD_ENTRIES", 4)
    line = _lower_line(path, tmp_path)
    assert line.startswith("rank 1: the rank needs 5 SPAD entries")
    d = run_json("explain", path)
    assert d["model_refusal"] == line
    assert "INVALID" not in [t["lowered"]["algorithm"] for t in d["triggers"]]
    text = run("explain", path).output
    assert f"lower refuses the whole model: {line}" in text.splitlines()  # one line, whole


def test_model_refusal_is_null_for_a_model_lower_takes(model_path):
    d = run_json("explain", model_path)
    assert d["model_refusal"] is None
    assert "refuses" not in run("explain", model_path).output


def test_no_model_refusal_when_lower_refuses_a_trigger_first(tmp_path):
    """lower checks every trigger (dtype, operands) before the model-wide limits: 513
    all-reduces with trigger 3 in FP32 are refused at trigger 3 for its dtype, never for the
    SPAD; explain shows trigger 3 INVALID with that reason and no model refusal."""
    from conftest import sp

    def mixed(s):
        sp(s)[:] = [_ar()] * 513
        sp(s)[3] = _ar(dtype="fp32")
    path = _limits_model(tmp_path, mixed)
    line = _lower_line(path, tmp_path)
    # the 0xC8 word of instruction 3, its dtype at byte 14 (NEFF-LIKE.md): 3 * 64 + 14 = 0xce
    assert line.startswith("member sg00/sp.bin, subgraph sg00, stream sp, instruction 3, "
                           "offset 0xce, field dtype, trigger 3: ALLREDUCE in FP32 cannot be "
                           "lowered")
    d = run_json("explain", path)
    assert d["model_refusal"] is None
    invalid = [t["trigger"] for t in d["triggers"] if t["lowered"]["algorithm"] == "INVALID"]
    assert invalid == [3]
    assert d["triggers"][3]["lowered"]["fallback_reason"] == line.split(": ", 1)[1]


def test_one_trigger_of_a_model_under_the_limits_is_planned_once_per_request(
        tmp_path, monkeypatch):
    """explain makes lower's plan of every trigger (the refusals of triggers not shown, the
    scratch of the memory layout), but triggers of one request are selected and their
    engine prepares once: ten alike all-reduces, ``--trigger 4``, one selection, of the
    request trigger 4 shares with the nine others (made at trigger 0, its first), and one
    prepare (lower.prepare_trigger)."""
    from conftest import sp

    import nrtrewrite.cli.explain as E
    import nrtrewrite.lower as L
    path = _limits_model(tmp_path, lambda s: sp(s).__setitem__(slice(None), [_ar()] * 10))
    calls, prepared = [], []
    real, real_prepare = E.select, L.prepare_trigger
    monkeypatch.setattr(E, "select", lambda t, *a, **kw: calls.append(t) or real(t, *a, **kw))
    monkeypatch.setattr(L, "prepare_trigger", lambda ctx, t, sel: (
        prepared.append(t.ordinal) or real_prepare(ctx, t, sel)))
    d = run_json("explain", path, "--trigger", "4")
    assert d["model_refusal"] is None and d["refused_not_shown"] == []
    assert [t["trigger"] for t in d["triggers"]] == [4]
    assert d["triggers"][0]["lowered"]["algorithm"] != "INVALID"
    assert [t.ordinal for t in calls] == [0] and prepared == [0]


def _runs(text: str) -> list[int]:
    """The ranks of ``compress``'s runs, ``0..1 13..12 5`` (a run may go downward)."""
    out = []
    for run_ in text.split():
        a, _, b = run_.partition("..")
        a, b = int(a), int(b or a)
        out += range(a, b + 1) if a <= b else range(a, b - 1, -1)
    return out


def test_a_single_rank_single_cycle_ring_is_one_channel_of_the_rank_alone():
    """docs/CLI.md "explain": a one-rank group's ring is the rank alone, [R]; the forward
    and backward ring of SINGLE_CYCLE_RING are one channel then (seed 000: a single rank is
    enc_1rank_primitive, one channel)."""
    (t,) = run_json("explain", "--op", "allreduce", "--bytes", "1MiB", "--group", "5",
                    "--algo", "single_cycle_ring")["triggers"]
    assert t["lowered"]["algorithm"] == "SINGLE_CYCLE_RING"
    assert t["channels"]["count"] == 1
    assert [(r["channel"], r["order"], r["direction"]) for r in t["channels"]["rings"]] == \
        [(0, [5], "cw")]


def test_a_single_rank_single_cycle_ring_reason_says_one_channel_and_no_backward_ring():
    """compose/single_cycle.py: over one rank a pair's ccw channel is its cw channel (nothing
    to exchange), so the channel reason says one channel, cw only; it said "runs 1 channel
    pair(s), each ring forward (cw) and backward (ccw): 1 channel(s)". Two ranks keep the
    pair wording (SELECTION.md §7's, said once): 2 channels, a cw and a ccw."""
    (t,) = run_json("explain", "--op", "allreduce", "--bytes", "4KiB", "--ranks", "1",
                    "--algo", "single_cycle_ring")["triggers"]
    reason = t["channels"]["reason"]
    assert reason == ("single rank: one channel, the rank its own ring (no peer: "
                      "enc_1rank_primitive copies IN to OUT); SINGLE_CYCLE_RING over one rank "
                      "runs 1 channel(s), cw only: its pair's ccw channel is the cw one, no "
                      "ring is walked backward")
    (t,) = run_json("explain", "--op", "allreduce", "--bytes", "4KiB", "--ranks", "2",
                    "--algo", "single_cycle_ring")["triggers"]
    assert [r["direction"] for r in t["channels"]["rings"]] == ["cw", "ccw"]
    assert t["channels"]["reason"].endswith("SINGLE_CYCLE_RING: max(1, 1 / 2) = 1 channel "
                                            "pair(s), each ring forward and backward: 2 "
                                            "channel(s)")


def test_kangaring_paths_are_shown_per_channel_without_rank():
    """docs/CLI.md "explain": a KANGARING trigger shows its paths (primaries and
    logical_path) per channel; without --rank, every channel's, as --json has them."""
    args = ["explain", "--op", "allreduce", "--bytes", "64MiB", "--group", "0-15", "--algo",
            "allreduce:kangaring"]
    (t,) = run_json(*args)["triggers"]
    chans = t["kangaring"]["channels"]
    assert t["lowered"]["algorithm"] == "KANGARING" and len(chans) == t["channels"]["count"]
    text = run(*args).output.splitlines()
    head = text.index("kangaring paths (lowered) for group 0..15:")
    rows = [[c.strip() for c in line.split("│")] for line in text[head + 3:head + 3 + len(chans)]]
    for (ch, primaries, path), k in zip(rows, chans):
        assert (int(ch), _runs(primaries), [int(r) for r in path.split()]) == \
            (k["channel"], k["primaries"], k["logical_path"])
        # the cycle of the primaries: the first rank of each unit of the logical path
        assert k["primaries"] == k["logical_path"][::2] and len(k["units"]) == 8


def test_model_less_kangaring_reduce_scatter_is_explained():
    """A model-less reduce-scatter KANGARING lowers (64 MiB over the 64 ranks of a node, by
    default) is out of place: its plan asks whether src and dst share bytes, and the
    model-less collective had no operands (an internal error, exit 70).  Its channels are the
    kangaring's cycles of primaries, one of each unit of two ranks: 32 units of a node."""
    args = ["explain", "--op", "reduce_scatter", "--bytes", "64MiB", "--ranks", "64"]
    (t,) = run_json(*args)["triggers"]
    assert t["lowered"]["algorithm"] == "KANGARING" and t["kangaring"]["note"] == "lowered"
    for k in t["kangaring"]["channels"]:
        assert len(k["units"]) == 32 and k["primaries"] == k["logical_path"][::2]
        assert sorted(k["logical_path"]) == list(range(64))
    assert run(*args).exit_code == 0


def test_the_overview_shows_a_hier_triggers_leg_engines(tmp_path, monkeypatch):
    """docs/CLI.md "explain": the overview's lowered column is HIER with its legs' engines;
    a HIER all-reduce has three legs (seed 000 §4.3: intra reduce-scatter, inter all-reduce,
    intra all-gather)."""
    import nrtrewrite.cli.explain as E
    from conftest import hier_in_two_subgraphs
    path = _limits_model(tmp_path, lambda s: hier_in_two_subgraphs(s, _ar(num_elements=512)))
    doc = run_json("explain", path)
    monkeypatch.setattr(E, "OVERVIEW_TRIGGERS", 3)
    res = run("explain", path)
    rows = [[c.strip() for c in line.strip("│").split("│")]
            for line in res.output.splitlines() if line.startswith("│")]
    assert len(rows) == len(doc["triggers"]) == 4
    for cells, t in zip(rows, doc["triggers"]):
        legs = [leg["algorithm"] for leg in t["hier"]["legs"]]
        assert [leg["name"] for leg in t["hier"]["legs"]] == ["intra_redsct", "inter_allr",
                                                          "intra_allg"]
        assert cells[6] == f"HIER ({', '.join(legs)})"


def test_a_selection_error_is_said_before_a_model_wide_refusal(tmp_path, monkeypatch):
    """lower checks each trigger's selection before the model-wide limits: with a limit of
    11 SPAD entries the four HIER triggers forced (12 entries) are refused as a whole, but an --algo
    that no trigger can take is refused first, at trigger 0, and explain says it as lower
    does (docs/CLI.md "explain": a selection error names its place as lower does)."""
    import nrtrewrite.limits as L
    from conftest import hier_in_two_subgraphs
    path = _limits_model(tmp_path, lambda s: hier_in_two_subgraphs(s, _ar(num_elements=512)))
    monkeypatch.setattr(L, "MAX_RANK_SPAD_ENTRIES", 11)
    assert run_json("explain", path, "--algo", "hier")["model_refusal"] is not None
    res = run("lower", path, "-o", str(tmp_path / "out"), "-j", "1", "--algo", "allreduce:mesh")
    lower_line = _one_line_error(res)
    assert lower_line.startswith(f"{path}: member sg00/sp.bin, subgraph sg00, stream sp, "
                                 "instruction 0, trigger 0: --algo 'allreduce:mesh' forces "
                                 "MESH, refused: ")
    res = run("explain", path, "--algo", "allreduce:mesh")
    assert _one_line_error(res) == lower_line


# -- the triggers explain does not show, that lower refuses (docs/CLI.md "explain") -----------

def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="nrtrewrite")


def _note(output: str) -> str:
    """The note on the refused triggers not shown: the output's last line, whole (docs/CLI.md
    "explain": on one line; rich wrapped it at the 132 columns of a pipe)."""
    last = output.splitlines()[-1]
    assert last.startswith("lower refuses "), output
    return last


def _fp32_at(ordinals, n):
    """Spec mutator: ``n`` bf16 all-reduces on group 0..7, those at ``ordinals`` in FP32."""
    from conftest import sp

    def mutate(s):
        sp(s)[:] = [_ar(dtype="fp32") if k in ordinals else _ar() for k in range(n)]
    return mutate


def test_explain_of_one_trigger_names_a_trigger_not_shown_that_lower_refuses(tmp_path):
    """Six all-reduces, trigger 3 in FP32: lower refuses the model at trigger 3 for its
    dtype.  ``explain --trigger 0`` shows trigger 0 alone and says, last, that lower refuses
    trigger 3, in lower's words, exiting 0; --json names it under refused_not_shown.  Shown
    (``--trigger 3``, or every trigger), trigger 3 is its INVALID record, and no note."""
    path = _limits_model(tmp_path, _fp32_at({3}, 6))
    line = _lower_line(path, tmp_path)
    # the 0xC8 word of instruction 3, its dtype at byte 14 (NEFF-LIKE.md): 3 * 64 + 14 = 0xce
    assert line.startswith("member sg00/sp.bin, subgraph sg00, stream sp, instruction 3, "
                           "offset 0xce, field dtype, trigger 3: ALLREDUCE in FP32 cannot be "
                           "lowered")
    res = _cli("explain", path, "--trigger", "0")
    assert res.exit_code == 0, res.output
    assert _note(res.output) == f"lower refuses trigger 3, not shown: {line}"
    res = _cli("explain", path, "--trigger", "0", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert [t["trigger"] for t in d["triggers"]] == [0]
    assert d["refused_not_shown"] == [{"trigger": 3, "refusal": line}]
    assert d["model_refusal"] is None
    for args in (["--trigger", "3"], []):
        d = json.loads(_cli("explain", path, *args, "--json").output)
        assert d["refused_not_shown"] == []
        (t,) = [t for t in d["triggers"] if t["trigger"] == 3]
        assert t["lowered"]["fallback_reason"] == line.split(": ", 1)[1]
        assert "not shown" not in _cli("explain", path, *args).output


def test_the_note_on_a_refused_trigger_is_one_line_on_an_80_column_terminal(tmp_path,
                                                                            monkeypatch):
    """On a terminal (stdout_console takes its width, COLUMNS=80) the note is one line as
    well, of more than 80 characters: the terminal folds it, rich does not break it."""
    import nrtrewrite.cli as C
    path = _limits_model(tmp_path, _fp32_at({3}, 6))
    line = _lower_line(path, tmp_path)
    monkeypatch.setattr(C, "is_tty", lambda stream: True)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    res = _cli("explain", path, "--trigger", "0")
    assert res.exit_code == 0, res.output
    assert len(line) > 80
    assert _note(res.output) == f"lower refuses trigger 3, not shown: {line}"


def test_several_refused_triggers_not_shown_are_one_line_naming_the_first(tmp_path):
    """Triggers 2, 3, 4 and 7 of ten in FP32: one line names the four as runs, ``2..4 7``,
    and the first one's refusal; ten refused (1, 3, ..., 19 of twenty) list their first 8
    runs, then ``...``, eight (1, 3, ..., 15 of sixteen) all 8 and no ``...``; --json has
    each with its own place (dtype at byte 14 of its word)."""
    (tmp_path / "four").mkdir()
    path = _limits_model(tmp_path / "four", _fp32_at({2, 3, 4, 7}, 10))
    res = _cli("explain", path, "--trigger", "0")
    assert res.exit_code == 0, res.output
    tail = _note(res.output)[len("lower refuses "):]
    assert tail.startswith("4 triggers not shown (2..4 7), the first: member sg00/sp.bin, "
                           "subgraph sg00, stream sp, instruction 2, offset 0x8e, field "
                           "dtype, trigger 2: ALLREDUCE in FP32 cannot be lowered")
    d = json.loads(_cli("explain", path, "--trigger", "0", "--json").output)
    assert [r["trigger"] for r in d["refused_not_shown"]] == [2, 3, 4, 7]
    for r in d["refused_not_shown"]:
        k = r["trigger"]
        assert r["refusal"].startswith(
            f"member sg00/sp.bin, subgraph sg00, stream sp, instruction {k}, offset "
            f"{hex(k * 64 + 14)}, field dtype, trigger {k}: ALLREDUCE in FP32 cannot")
    (tmp_path / "ten").mkdir()
    path = _limits_model(tmp_path / "ten", _fp32_at(set(range(1, 20, 2)), 20))
    note = _note(_cli("explain", path, "--trigger", "0").output)
    assert note.startswith("lower refuses 10 triggers not shown (1 3 5 7 9 11 13 15 ...), the "
                           "first: member sg00/sp.bin, subgraph sg00, stream sp, instruction 1, ")
    (tmp_path / "eight").mkdir()  # exactly 8 runs (1, 3, ..., 15 of sixteen): all listed
    path = _limits_model(tmp_path / "eight", _fp32_at(set(range(1, 16, 2)), 16))
    note = _note(_cli("explain", path, "--trigger", "0").output)
    assert note.startswith("lower refuses 8 triggers not shown (1 3 5 7 9 11 13 15), the "
                           "first: member sg00/sp.bin, subgraph sg00, stream sp, instruction 1, ")


def test_a_trigger_skipped_by_rank_that_lower_refuses_is_named(tmp_path):
    """Group 0,1 (triggers 0..2, sg00) and group 1,2 (triggers 3, 4, sg01), trigger 3 in
    FP32: ``--rank 0`` skips triggers 3 and 4, and lower (which plans every trigger, whatever
    its --rank) refuses trigger 3: explain names it, in sg01's stream, instruction 0."""
    from conftest import groups_sharing_rank_1

    def mutate(s):
        groups_sharing_rank_1(s, _ar())
        s["subgraphs"][1]["engines"]["sp"][0] = _ar(dtype="fp32")
    path = _limits_model(tmp_path, mutate)
    line = _lower_line(path, tmp_path)
    assert line.startswith("member sg01/sp.bin, subgraph sg01, stream sp, instruction 0, "
                           "offset 0xe, field dtype, trigger 3: ALLREDUCE in FP32")
    d = json.loads(_cli("explain", path, "--rank", "0", "--json").output)
    assert d["skipped_triggers"] == [3, 4]
    assert d["refused_not_shown"] == [{"trigger": 3, "refusal": line}]
    res = _cli("explain", path, "--rank", "0")
    assert res.exit_code == 0
    assert _note(res.output) == f"lower refuses trigger 3, not shown: {line}"


def test_a_trigger_not_shown_with_overlapping_operands_is_named(tmp_path):
    """Trigger 2 all-reduces var tmp (var 2) into itself shifted by 2 bytes: its 128 bytes
    [0, 128) and [2, 130) overlap other than in place; lower refuses it at its dst_offset
    (bytes 40..47 of the word: 2 * 64 + 40 = 0xa8)."""
    from conftest import sp

    def mutate(s):
        sp(s)[:] = [_ar(), _ar(), _ar(src="tmp", dst={"var": "tmp", "offset": 2})]
    path = _limits_model(tmp_path, mutate)
    line = _lower_line(path, tmp_path)
    assert line == ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 2, offset 0xa8, "
                    "field dst_offset, trigger 2: dst bytes [2, 130) overlap src bytes [0, 128) "
                    "of var 2: only dst = src exactly is in place")
    d = json.loads(_cli("explain", path, "--trigger", "1", "--json").output)
    assert d["refused_not_shown"] == [{"trigger": 2, "refusal": line}]


#: 4098 MiB in bytes (4098 x 2^20), past the 2^32 bytes a TENSOR3D start_addr addresses
_4098_MIB = 4098 << 20


def _vars_model(tmp_path, vars_, group, triggers) -> str:
    """A model of ``vars_`` (name, type, size) on one ``group``, its sp stream ``triggers``."""
    from conftest import sp

    def mutate(s):
        s["subgraphs"][0]["vars"] = [{"name": n, "type": t, "size": z} for n, t, z in vars_]
        s["subgraphs"][0]["replica_groups"] = [group]
        sp(s)[:] = triggers
    return _limits_model(tmp_path, mutate)


def test_a_trigger_whose_operands_overlap_and_pass_start_addr_is_refused_for_the_overlap(
        tmp_path):
    """docs/CLI.md "explain": a trigger's checks follow ``lower``'s order (dtype, operands,
    the engine's prepare, start_addr). Trigger 1 all-reduces 4098 MiB of var a (var 0, 5 GiB)
    into a itself 2 bytes on: its operands overlap other than in place, and its buffers span
    more than start_addr addresses. lower refuses the overlap (dst_offset: bytes 40..47 of
    word 1, 64 + 40 = 0x68); explain ``--trigger 1`` showed the start_addr refusal (the
    audit's F1, fixed when explain took lower's plan) and ``--trigger 0`` must name the
    overlap too."""
    path = _vars_model(tmp_path, [("a", "tmp-buf", 5 << 30), ("c", "input", 1 << 20),
                                  ("b", "output", 1 << 20)], [0, 1], [
        _ar(src="c", dst="b", num_elements=(1 << 20) // 2),
        _ar(src={"var": "a"}, dst={"var": "a", "offset": 2}, num_elements=_4098_MIB // 2)])
    why = (f"dst bytes [2, {_4098_MIB + 2}) overlap src bytes [0, {_4098_MIB}) of var 0: "
           "only dst = src exactly is in place")
    line = _lower_line(path, tmp_path)
    assert line == ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 1, offset 0x68, "
                    f"field dst_offset, trigger 1: {why}")
    (t,) = run_json("explain", path, "--trigger", "1")["triggers"]
    assert (t["lowered"]["algorithm"], t["lowered"]["fallback_reason"]) == ("INVALID", why)
    assert run_json("explain", path, "--trigger", "0")["refused_not_shown"] == [
        {"trigger": 1, "refusal": line}]


def test_a_trigger_not_shown_past_start_addr_is_named(tmp_path):
    """Trigger 1 all-reduces 4098 MiB of var c into var b (their own vars, no overlap): its
    buffers span 4297064448 bytes, past the 2^32 a TENSOR3D start_addr addresses; lower
    refuses it at its num_elements (bytes 48..55 of word 1: 64 + 48 = 0x70), and ``explain
    --trigger 0`` names it in lower's words."""
    path = _vars_model(tmp_path, [("c", "input", _4098_MIB), ("b", "output", _4098_MIB)],
                       [0, 1], [_ar(src="c", dst="b", num_elements=(1 << 20) // 2),
                                _ar(src="c", dst="b", num_elements=_4098_MIB // 2)])
    line = _lower_line(path, tmp_path)
    assert line == ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 1, offset 0x70, "
                    "field num_elements, trigger 1: the collective's buffers span 4297064448 "
                    "bytes; a 0xBF word's 32-bit TENSOR3D start_addr addresses at most "
                    "4294967296 (T3D_START_ADDR_LIMIT)")
    assert run_json("explain", path, "--trigger", "0")["refused_not_shown"] == [
        {"trigger": 1, "refusal": line}]


def test_a_trigger_in_fp32_whose_operands_overlap_is_refused_for_its_dtype(tmp_path):
    """docs/CLI.md: lower checks a trigger's dtype, then its operands. An FP32 all-reduce of
    var t into t 4 bytes on is refused at its dtype (byte 14 of word 0: 0xe), explain's
    record alike."""
    path = _vars_model(tmp_path, [("t", "tmp-buf", 1024)], [0, 1], [
        _ar(dtype="fp32", src="t", dst={"var": "t", "offset": 4}, num_elements=16)])
    why = ("ALLREDUCE in FP32 cannot be lowered: the CCE reduce accepts only BF16, FP16, "
           "FP32R and FP8_E3/E4/E5 (seed 000 §3.4)")
    assert _lower_line(path, tmp_path) == ("member sg00/sp.bin, subgraph sg00, stream sp, "
                                           f"instruction 0, offset 0xe, field dtype, trigger 0: "
                                           f"{why}")
    (t,) = run_json("explain", path)["triggers"]
    assert t["lowered"]["fallback_reason"] == why


def test_an_in_place_mesh_all_reduce_over_16_ranks_is_no_refusal(tmp_path):
    """SINGLE_STEP_MESH alone was refused in place over more than 8 ranks (IR.MAX_SRC)
    until 2026-12-06; MESH never was. Two
    1 KiB all-reduces over 16 ranks, the second in place (t into t), both MESH by default:
    lower lowers them, and explain neither notes trigger 1 as refused nor shows it INVALID."""
    path = _vars_model(tmp_path, [("c", "input", 1024), ("b", "output", 1024),
                                  ("t", "tmp-buf", 1024)], list(range(16)), [
        _ar(src="c", dst="b", num_elements=512), _ar(src="t", dst="t", num_elements=512)])
    res = _cli("lower", "-q", path, "-o", tmp_path / "out")
    assert res.exit_code == 0, res.output
    d = run_json("explain", path, "--trigger", "0")
    assert d["refused_not_shown"] == [] and d["model_refusal"] is None
    d = run_json("explain", path)
    assert [(t["lowered"]["algorithm"], t["lowered"]["fallback_reason"])
            for t in d["triggers"]] == [("MESH", None), ("MESH", None)]


def test_a_selection_lower_refuses_at_a_trigger_not_shown_is_named(tmp_path):
    """``--algo allreduce:mesh`` over sg00's group 0..7 (one node: mesh legal) and sg01's
    0,1,64,65 (two nodes of 64 ranks at lnc 2, two ranks on each: mesh refused, docs/
    SELECTION.md): lower refuses trigger 2, the first of sg01; ``explain --trigger 0`` names
    triggers 2 and 3, each at its own instruction, instead of failing."""
    from conftest import sp

    def mutate(s):
        s["header"]["lnc_size"] = 2
        sp(s)[:] = [_ar()] * 2
        sg1 = copy.deepcopy(s["subgraphs"][0])
        sg1["name"] = "sg01"
        sg1["replica_groups"] = [[0, 1, 64, 65]]
        s["subgraphs"].append(sg1)
    path = _limits_model(tmp_path, mutate)
    res = _cli("lower", path, "-o", tmp_path / "out", "--algo", "allreduce:mesh")
    line = _one_line_error(res)[len(f"{path}: "):]
    assert line.startswith("member sg01/sp.bin, subgraph sg01, stream sp, instruction 0, "
                           "trigger 2: --algo 'allreduce:mesh' forces MESH, refused: ")
    res = _cli("explain", path, "--trigger", "0", "--algo", "allreduce:mesh", "--json")
    assert res.exit_code == 0, res.output
    refused = json.loads(res.output)["refused_not_shown"]
    assert refused == [{"trigger": 2, "refusal": line},
                       {"trigger": 3, "refusal": line.replace("instruction 0, trigger 2",
                                                              "instruction 1, trigger 3")}]


def test_single_step_mesh_in_place_at_a_trigger_not_shown_is_named(tmp_path, monkeypatch):
    """``--algo single_step_mesh`` over 9 ranks: trigger 0 out of place lowers, trigger 1
    in place (tmp into tmp) is refused by its engine's prepare (a stand-in refusal,
    conftest's refuse_in_place_single_step_mesh: until 2026-12-06 lower refused it so, its 9
    sources chaining through OUT; it lowers now, and then explain notes nothing)."""
    from conftest import refuse_in_place_single_step_mesh, sp

    def mutate(s):
        s["header"]["lnc_size"] = 2
        s["subgraphs"][0]["replica_groups"] = [list(range(9))]
        sp(s)[:] = [_ar(), _ar(src="tmp", dst="tmp")]
    path = _limits_model(tmp_path, mutate)
    res = _cli("explain", path, "--trigger", "0", "--algo", "single_step_mesh", "--json")
    assert res.exit_code == 0 and json.loads(res.output)["refused_not_shown"] == []
    refuse_in_place_single_step_mesh(monkeypatch)
    res = _cli("lower", path, "-o", tmp_path / "out", "--algo", "single_step_mesh")
    line = _one_line_error(res)[len(f"{path}: "):]
    assert line.startswith("member sg00/sp.bin, subgraph sg00, stream sp, instruction 1, "
                           "trigger 1: SINGLE_STEP_MESH in place over 9 ranks")
    res = _cli("explain", path, "--trigger", "0", "--algo", "single_step_mesh")
    assert res.exit_code == 0, res.output
    assert _note(res.output) == f"lower refuses trigger 1, not shown: {line}"


def test_the_triggers_not_shown_are_selected_once_per_request(
        tmp_path, monkeypatch):
    """``--trigger 4`` of ten all-reduces of one size, trigger 7 in FP32, names trigger 7;
    with or without --algo, the BF16 request is selected once (at trigger 0, its first) and
    the FP32 one once (trigger 7).  explain runs every trigger's engine prepare, whose
    refusals selection cannot foresee, so a trigger not shown is selected once per request
    whatever its op or override."""
    import nrtrewrite.cli.explain as E
    path = _limits_model(tmp_path, _fp32_at({7}, 10))
    calls = []
    real = E.select
    monkeypatch.setattr(E, "select", lambda t, *a, **kw: calls.append(t) or real(t, *a, **kw))
    for algo in ((), ("--algo", "ring")):
        calls.clear()
        d = json.loads(_cli("explain", path, "--trigger", "4", *algo, "--json").output)
        assert [r["trigger"] for r in d["refused_not_shown"]] == [7]
        assert [t.ordinal for t in calls] == [0, 7]


def _mesh_buffer_of_1_kib(monkeypatch):
    """The MESH engine's channel buffer cut to 1 KiB where it prepares (compose/mesh), not
    where selection judges it (select.py keeps 8 MiB): an engine refusal found only when the
    engine prepares its plan, which explain must learn from the engine (with the presets no
    such refusal is reachable today: selection judges the same limits first)."""
    import nrtrewrite.compose.mesh as M
    monkeypatch.setattr(M, "MESH_CHANNEL_BUF_MAX_SIZE", 1024)


#: A 2048-element bf16 all-reduce over 8 ranks (MESH by default): blocks of 256 elements,
#: a slot per peer, 7 x 256 x 2 bytes of channel buffer (docs/DESIGN.md "MESH").
_MESH_4KIB_WHY = ("MESH needs 3584 bytes of channel buffer per rank, more than "
                  "ENC_MESH_CHANNEL_BUF_MAX_SIZE (1024)")


def test_an_engine_refusal_found_when_it_prepares_is_shown_and_noted(tmp_path, monkeypatch):
    """Three MESH all-reduces, trigger 1 of 2048 elements needing 3584 bytes of channel
    buffer, the others of 64 (7 x 8 x 2 = 112 bytes): lower refuses trigger 1 when MESH
    prepares it.  explain shows trigger 1 INVALID with lower's reason and no model refusal;
    ``--trigger 0`` and ``--rank`` are not shown it and name it, in lower's words."""
    from conftest import sp
    _mesh_buffer_of_1_kib(monkeypatch)
    path = _limits_model(tmp_path, lambda s: sp(s).__setitem__(
        slice(None), [_ar(), _ar(num_elements=2048), _ar()]))
    line = _lower_line(path, tmp_path)
    assert line == ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 1, "
                    f"trigger 1: {_MESH_4KIB_WHY}")
    d = run_json("explain", path)
    assert d["model_refusal"] is None and d["refused_not_shown"] == []
    assert [t["lowered"]["algorithm"] for t in d["triggers"]] == ["MESH", "INVALID", "MESH"]
    assert d["triggers"][1]["lowered"]["fallback_reason"] == _MESH_4KIB_WHY
    assert f"cannot be lowered: {_MESH_4KIB_WHY}" in run("explain", path).output
    d = run_json("explain", path, "--trigger", "0")
    assert d["refused_not_shown"] == [{"trigger": 1, "refusal": line}]
    assert _note(run("explain", path, "--trigger", "2").output) == \
        f"lower refuses trigger 1, not shown: {line}"


def test_a_model_less_engine_refusal_found_when_it_prepares_is_shown(monkeypatch):
    """The same collective model-less: INVALID with the engine's reason."""
    _mesh_buffer_of_1_kib(monkeypatch)
    (t,) = run_json("explain", "--op", "allreduce", "--bytes", "4KiB", "--ranks", "8")[
        "triggers"]
    assert t["policy"]["algorithm"] == "MESH" and t["lowered"]["algorithm"] == "INVALID"
    assert t["lowered"]["fallback_reason"] == _MESH_4KIB_WHY and t["channels"]["count"] == 0


def test_model_less_json_has_no_refused_triggers():
    d = run_json("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "8")
    assert d["refused_not_shown"] == []


def _two_rank_model(tmp_path, vars_, sp) -> str:
    """A model of ``vars_`` (name, type, size) and the sp instructions ``sp`` on group 0, 1."""
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / "m.neff"
    path.write_bytes(assemble_spec({
        "header": {"pkg_version": 2, "name": "m", "lnc_size": 1},
        "subgraphs": [{"name": "sg00", "replica_groups": [[0, 1]], "engines": {"sp": sp},
                       "vars": [{"name": n, "type": k, "size": s} for n, k, s in vars_]}]}))
    return str(path)


def test_the_memory_layout_comes_before_the_start_addr_as_in_lower(tmp_path):
    """An 8 GiB bf16 all-reduce from a 12 GiB input to a 12 GiB output on ranks 0, 1: its
    buffers pass the 4 GiB a TENSOR3D start_addr addresses, and the vars (24 GiB) with the
    RING's scratch of the whole message (8 GiB, docs/DESIGN.md) pass the 28 GiB of the core
    window.  lower checks the memory layout first (the start_addr is one of
    limits.check_plan's, after it): explain's head is lower's layout line (until 2026-12-05
    explain gave the start_addr only, as the trigger's reason, and no model refusal)."""
    path = _two_rank_model(tmp_path, [("a", "input", 12 << 30), ("o", "output", 12 << 30)],
                           [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "a",
                                            "dst": "o", "bytes": 8 << 30}}])
    line = _lower_line(path, tmp_path)
    assert line == (f"the model's DRAM vars, scratch and gateway need {32 << 30} bytes per "
                    f"core (vars {24 << 30}, scratch {8 << 30}, gateway 0), more than the "
                    f"{28 << 30} bytes of the core window below the SBUF window")
    assert run_json("explain", path)["model_refusal"] == line


#: lower's reason for the 32nd trigger of tests/test_entryslots.py's star of 2-rank groups
_HANDSHAKE = ("the entry handshake needs more than the 17 entry_post semaphores (9, 176..191): "
              "ranks of this replica group on one node have waited on every one of them in "
              "other groups' entries since they last met")


def test_the_trigger_the_entry_handshake_refuses_takes_that_refusal_not_its_start_addr(
        tmp_path):
    """The 32 star triggers of tests/test_entryslots.py, the 32nd (sg31) of 2^32 bf16
    elements between 8 GiB vars: its buffers span 8 GiB, past the 4 GiB a TENSOR3D
    start_addr addresses, and it is the trigger without an entry_post semaphore.  lower
    refuses the model at the entry handshake (entryslots), before the plan's limits where
    the start_addr is checked, so it never meets the start_addr.  docs/CLI.md
    ``model_refusal``: "the trigger it names ... is also INVALID with that reason"; explain
    showed trigger 31 INVALID for its start_addr, and ``--trigger 0`` named trigger 31's
    start_addr as the line lower refuses it with (the audit's item A)."""
    from test_entryslots import _star_spec

    from nrtrewrite.neff.assembler import assemble_spec
    spec = _star_spec(32)
    for var in spec["subgraphs"][31]["vars"]:
        var["size"] = 2 << 32
    spec["subgraphs"][31]["engines"]["sp"][0]["all_reduce"]["num_elements"] = 1 << 32
    path = tmp_path / "m2.neff"
    path.write_bytes(assemble_spec(spec))
    path = str(path)
    line = _lower_line(path, tmp_path)
    assert line == ("member sg31/sp.bin, subgraph sg31, stream sp, instruction 0, trigger 31: "
                    + _HANDSHAKE)
    d = run_json("explain", path)
    assert d["model_refusal"] == line and d["refused_not_shown"] == []
    assert [t["lowered"]["algorithm"] == "INVALID" for t in d["triggers"]] == [False] * 31 + [
        True]
    assert d["triggers"][31]["lowered"]["fallback_reason"] == _HANDSHAKE
    (t,) = run_json("explain", path, "--trigger", "31")["triggers"]
    assert (t["lowered"]["algorithm"], t["lowered"]["fallback_reason"]) == ("INVALID",
                                                                            _HANDSHAKE)
    d = run_json("explain", path, "--trigger", "0")  # trigger 31 not shown: no note of it
    assert d["model_refusal"] == line and d["refused_not_shown"] == []
    for args in ((), ("--trigger", "0"), ("--trigger", "31")):
        text = _cli("explain", path, *args).output
        assert f"lower refuses the whole model: {line}" in text.splitlines()
        assert "start_addr" not in text and "not shown" not in text


def test_a_start_addr_past_4_gib_is_not_named_when_the_memory_layout_refuses_first(tmp_path):
    """Trigger 0 all-reduces 64 B, trigger 1 8 GiB (bf16) between a 12 GiB input and a
    12 GiB output on ranks 0, 1: vars 24 GiB and trigger 1's RING scratch of its whole
    message, 8 GiB (docs/DESIGN.md), pass the 28 GiB core window (docs/FORMATS.md §10), and
    trigger 1's buffers the 4 GiB of a TENSOR3D start_addr.  lower refuses the model at the
    memory layout, naming no trigger, and never reaches the start_addr (limits.check_plan):
    explain names no refused trigger and shows none INVALID (``--trigger 0`` named trigger
    1's start_addr as the line lower refuses it with)."""
    path = _two_rank_model(tmp_path, [("a", "input", 12 << 30), ("o", "output", 12 << 30)],
                           [_ar_of("bf16", 64, "a", "o"), _ar_of("bf16", 8 << 30, "a", "o")])
    line = _lower_line(path, tmp_path)
    assert line == (f"the model's DRAM vars, scratch and gateway need {32 << 30} bytes per "
                    f"core (vars {24 << 30}, scratch {8 << 30}, gateway 0), more than the "
                    f"{28 << 30} bytes of the core window below the SBUF window")
    for args in ((), ("--trigger", "0"), ("--trigger", "1")):
        d = run_json("explain", path, *args)
        assert d["model_refusal"] == line and d["refused_not_shown"] == []
        assert [t["lowered"]["fallback_reason"] for t in d["triggers"]] == [None] * len(
            d["triggers"])
        text = _cli("explain", path, *args).output
        assert f"lower refuses the whole model: {line}" in text.splitlines()
        assert "start_addr" not in text and "not shown" not in text


def _ar_of(dtype, nbytes, src="a", dst="b"):
    return {"all_reduce": {"dtype": dtype, "op": "add", "src": src, "dst": dst,
                           "bytes": nbytes}}


def test_the_note_names_first_what_lower_refuses_first(tmp_path):
    """Trigger 0 passes the start_addr's 4 GiB (8 GiB), trigger 1 is FP32, trigger 2 is
    shown: lower checks every trigger's dtype before any start_addr (limits.check_plan), so
    it refuses trigger 1, and explain's note names it first; its runs stay in trigger order."""
    path = _two_rank_model(tmp_path, [("a", "input", 8 << 30), ("b", "output", 8 << 30)],
                           [_ar_of("bf16", 8 << 30), _ar_of("fp32", 64), _ar_of("bf16", 64)])
    line = _lower_line(path, tmp_path)
    assert "field dtype, trigger 1: ALLREDUCE in FP32 cannot be lowered" in line
    res = _cli("explain", path, "--trigger", "2")
    assert res.exit_code == 0, res.output
    assert _note(res.output) == f"lower refuses 2 triggers not shown (0..1), the first: {line}"
    d = run_json("explain", path, "--trigger", "2")
    assert [r["trigger"] for r in d["refused_not_shown"]] == [1, 0]


def test_the_note_names_a_selection_refusal_before_an_earlier_dtype(tmp_path):
    """Trigger 0 is FP32, trigger 1 an all-gather that ``--algo 'allgather:single_cycle_ring'``
    forces on an all-reduce-only engine: lower selects every trigger before it checks any
    dtype, so it refuses trigger 1's selection, and explain's note names it first."""
    path = _two_rank_model(
        tmp_path, [("a", "input", 4096), ("b", "output", 4096), ("c", "output", 8192)],
        [_ar_of("fp32", 4096), {"all_gather": {"dtype": "bf16", "src": "a", "dst": "c",
                                               "bytes": 4096}}, _ar_of("bf16", 4096)])
    algo = ("--algo", "allgather:single_cycle_ring")
    res = _cli("lower", path, "-o", tmp_path / "out", *algo)
    assert res.exit_code == 2
    line = res.output.strip().split(f"{path}: ", 1)[1]
    assert ("trigger 1: --algo 'allgather:single_cycle_ring' forces SINGLE_CYCLE_RING, "
            "refused: ") in line
    res = _cli("explain", path, "--trigger", "2", *algo)
    assert res.exit_code == 0, res.output
    assert _note(res.output) == f"lower refuses 2 triggers not shown (0..1), the first: {line}"


def _lnc2_model(tmp_path, group, vars_, sp) -> str:
    """A model (lnc 2) of ``vars_`` (name, type, size) and the sp instructions ``sp`` on
    ``group``."""
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / "m.neff"
    path.write_bytes(assemble_spec({
        "header": {"pkg_version": 2, "name": "m", "lnc_size": 2},
        "subgraphs": [{"name": "sg00", "replica_groups": [group], "engines": {"sp": sp},
                       "vars": [{"name": n, "type": k, "size": s} for n, k, s in vars_]}]}))
    return str(path)


def test_two_triggers_of_one_request_refused_by_their_engine_are_each_named_at_their_place(
        tmp_path, monkeypatch):
    """Three bf16 all-reduces of 1024 elements on ranks 0 .. 8 under ``--algo
    single_step_mesh``: trigger 0 from x_in to x_out, triggers 1 and 2 in place on tmp (one
    request, prepared once), refused in its engine's prepare (a stand-in refusal, conftest's
    refuse_in_place_single_step_mesh: until 2026-12-06 lower refused SINGLE_STEP_MESH in
    place over more than 8 ranks so; it lowers it now).  ``explain --trigger 0`` names
    both, each at its own instruction (NEFF-LIKE.md: the sp stream's second and third
    instructions), in lower's words: trigger 2's line is trigger 1's with its own place."""
    from conftest import refuse_in_place_single_step_mesh
    refuse_in_place_single_step_mesh(monkeypatch)
    path = _lnc2_model(tmp_path, list(range(9)),
                       [("x_in", "input", 2048), ("x_out", "output", 2048),
                        ("tmp", "tmp-buf", 2048)],
                       [_ar_of("bf16", 2048, "x_in", "x_out"), _ar_of("bf16", 2048, "tmp", "tmp"),
                        _ar_of("bf16", 2048, "tmp", "tmp")])
    algo = ("--algo", "single_step_mesh")
    res = _cli("lower", path, "-o", tmp_path / "out", *algo)
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    line = res.output.strip().split(f"{path}: ", 1)[1]
    place1 = "member sg00/sp.bin, subgraph sg00, stream sp, instruction 1, trigger 1: "
    assert line.startswith(place1 + "SINGLE_STEP_MESH in place over 9 ranks: ")
    why = line[len(place1):]
    res = _cli("explain", path, "--trigger", "0", *algo, "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["model_refusal"] is None
    assert d["refused_not_shown"] == [
        {"trigger": 1, "refusal": line},
        {"trigger": 2, "refusal": "member sg00/sp.bin, subgraph sg00, stream sp, instruction 2, "
                                  "trigger 2: " + why}]
    assert d["triggers"][0]["lowered"]["algorithm"] == "SINGLE_STEP_MESH"


def test_a_trigger_refused_for_its_dtype_hides_a_model_wide_refusal(tmp_path):
    """Ranks 0, 1: trigger 0 an int32 all-reduce (tmp in place), trigger 1 a bf16 all-reduce
    of 2^31 elements from x_in (12 GiB + 4 KiB) to x_out (12 GiB): with its RING scratch of
    the whole 4 GiB message (docs/DESIGN.md) the vars and scratch pass the 28 GiB core window
    (docs/FORMATS.md §10), but lower checks every trigger's dtype first and refuses trigger
    0's (the CCE reduce takes no INT32: seed 000 §3.4).  docs/CLI.md: ``model_refusal`` is
    ``null`` when a trigger is refused by its dtype; ``--trigger 1`` names trigger 0."""
    path = _lnc2_model(tmp_path, [0, 1],
                       [("x_in", "input", (12 << 30) + 4096), ("x_out", "output", 12 << 30),
                        ("tmp", "tmp-buf", 4096)],
                       [_ar_of("int32", 64, "tmp", "tmp"),
                        _ar_of("bf16", 1 << 32, "x_in", "x_out")])
    line = _lower_line(path, tmp_path)
    # the 0xC8 word of instruction 0, its dtype at byte 14 (NEFF-LIKE.md): 0xe
    assert line.startswith("member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, "
                           "offset 0xe, field dtype, trigger 0: ALLREDUCE in INT32 cannot be "
                           "lowered")
    d = run_json("explain", path, "--trigger", "1")
    assert d["model_refusal"] is None
    assert d["refused_not_shown"] == [{"trigger": 0, "refusal": line}]


def test_the_entry_handshake_comes_before_the_memory_layout_as_in_lower(tmp_path):
    """tests/test_entryslots.py's 32 star triggers, trigger 0 (sg00) of 2^31 bf16 elements
    from a 12 GiB + 4 KiB input to a 12 GiB output: its RING scratch of the whole 4 GiB
    message (docs/DESIGN.md) takes the model past the 28 GiB core window (docs/FORMATS.md
    §10), and trigger 31 has no entry_post semaphore.  lower checks the entry handshake
    first: explain's ``model_refusal`` is its handshake line."""
    from test_entryslots import _star_spec

    from nrtrewrite.neff.assembler import assemble_spec
    spec = _star_spec(32)
    big = spec["subgraphs"][0]
    big["vars"][0]["size"], big["vars"][1]["size"] = (12 << 30) + 4096, 12 << 30
    big["engines"]["sp"][0]["all_reduce"]["num_elements"] = 1 << 31
    path = tmp_path / "m.neff"
    path.write_bytes(assemble_spec(spec))
    path = str(path)
    line = _lower_line(path, tmp_path)
    assert line == ("member sg31/sp.bin, subgraph sg31, stream sp, instruction 0, trigger 31: "
                    + _HANDSHAKE)
    assert run_json("explain", path)["model_refusal"] == line


def test_a_lowered_leg_outside_its_window_says_so():
    """SELECTION.md §8: under an exclusion a leg takes the first allowed engine inside its
    window, else the first allowed legal one, and its reason says "none allowed is inside
    its size window". A 1 GiB all-reduce over two whole trn2 nodes at LNC 1 (128 ranks a
    node) has an 8 MiB ``inter_allr`` leg (1 GiB / 128 local ranks): the policy's MESH is
    no HIER leg in this build (§6), SINGLE_CYCLE_RING's window ends at 4 MiB and ``^ring``
    excludes RING, so SINGLE_CYCLE_RING is taken outside its window. Its reason was the
    bare structural one, as if inside its window (``lowered.legs`` and the manifest's
    ``hier.legs[].reason`` alike)."""
    d = run_json("explain", "--op", "allreduce", "--bytes", "1GiB", "--ranks", "256",
                 "--lnc", "1", "--algo", "^ring")
    t = d["triggers"][0]
    policy = {leg["name"]: leg for leg in t["policy"]["legs"]}
    legs = {leg["name"]: leg for leg in t["lowered"]["legs"]}
    assert policy["inter_allr"]["algorithm"] == "MESH"
    assert (legs["inter_allr"]["algorithm"], legs["inter_allr"]["bytes"]) == (
        "SINGLE_CYCLE_RING", 8 * 2**20)
    assert legs["inter_allr"]["reason"] == (
        "first legal engine (none allowed is inside its size window; 2 rank(s) over 2 "
        "node(s): a ring cut opposite each chunk's root, reduced from both sides); MESH not "
        "taken: not lowerable as a HIER leg in this build; INTER_RDH not taken: node_n 2 is "
        "not a power of two >= 8")  # (the allowed engines after it too, since 2026-12-06)
    assert t["lowered"]["fallback_reason"] == (
        "inter_allr: MESH is not lowerable as a HIER leg in this build; SINGLE_CYCLE_RING "
        "instead")


def test_a_trigger_record_carries_its_alu_op():
    """The selection depends on the ALU op (``--alu add`` lowers KANGARING, ``--alu max``
    RING: KANGARING reduces with ADD only), yet a record did not say which: ``alu_op`` as
    ``inspect --json`` and the manifest spell it (ADD, MAX, MIN; null for an all-gather), a
    model-less reduction without ``--alu`` its default ADD.  mix8's triggers in order
    (fixtures/mix8.yaml): add, add, -, -, add, max, min, add, -."""
    doc = run_json("explain", str(Path(__file__).parent.parent / "fixtures" / "mix8.neff"),
                   "--all")
    assert [t["alu_op"] for t in doc["triggers"]] == ["ADD", "ADD", None, None, "ADD", "MAX",
                                                       "MIN", "ADD", None]
    common = ("explain", "--op", "allreduce", "--bytes", "64MiB", "--ranks", "16")
    add, mx = run_json(*common), run_json(*common, "--alu", "max")
    assert add["triggers"][0]["alu_op"] == "ADD"
    assert add["triggers"][0]["lowered"]["algorithm"] == "KANGARING"
    assert mx["triggers"][0]["alu_op"] == "MAX"
    assert mx["triggers"][0]["lowered"]["algorithm"] == "RING"
    ag = run_json("explain", "--op", "allgather", "--bytes", "1MiB", "--ranks", "4")
    assert ag["triggers"][0]["alu_op"] is None


def test_the_kangaring_note_says_why_the_policy_choice_is_not_lowered():
    """A 64 MiB FP32 all-reduce over 16 ranks: the policy picks KANGARING and ``lower``
    refuses the dtype (the CCE reduces no plain FP32, seed 000 §3.4).  The note said ``not
    lowered by this build``, though this build lowers KANGARING: it now gives the refusal,
    the record's ``lowered.fallback_reason``, in the JSON and the text alike."""
    args = ("explain", "--op", "allreduce", "--bytes", "64MiB", "--ranks", "16", "--dtype",
            "fp32")
    t = run_json(*args)["triggers"][0]
    assert t["policy"]["algorithm"] == "KANGARING" and t["lowered"]["algorithm"] == "INVALID"
    why = t["lowered"]["fallback_reason"]
    assert why.startswith("ALLREDUCE in FP32 cannot be lowered")
    assert t["kangaring"]["note"] == f"policy choice, not lowered: {why}"
    text = " ".join(run(*args).output.split())  # (the heading wraps)
    assert f"kangaring paths (policy choice, not lowered: {why}) for group 0..15:" in text


# -- explain's warnings: those lower gives, in lower's order --------------------------------

def _warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("nrtrewrite: warning: ")]


def test_explain_gives_no_warning_where_lower_refuses_the_whole_model(tmp_path):
    """docs/CLI.md "explain": the warnings lower gives come where lower gives them, once the
    plan is made.  lower refuses this model whole (its scratch past the core window, as in
    test_explain_shows_the_scratch_past_the_core_window) with one error line and no
    ``--no-verify-hash`` warning; explain shows the model and ``lower refuses the whole
    model: ...``, and until 2026-12-06 printed that warning too."""
    from conftest import sp

    def big(s):
        s["subgraphs"][0]["vars"][0]["size"] = (12 << 30) + 4096
        s["subgraphs"][0]["vars"][1]["size"] = 12 << 30
        sp(s)[1] = _ar(num_elements=1 << 31)
    path = _limits_model(tmp_path, big)
    line = _lower_refusal(path, tmp_path, "--no-verify-hash")  # one line: no warning
    assert line.startswith("the model's DRAM vars, scratch and gateway need ")
    for args in ((), ("--trigger", "0"), ("--json",)):
        res = run("explain", path, "--no-verify-hash", *args)
        assert res.exit_code == 0, res.output
        assert _warnings(res.output) == [], args
        assert line in res.output, args


def test_explain_warnings_come_in_lowers_order(tmp_path):
    """lower's warnings come in the order lower.load_and_plan and the lower command make them:
    ``--no-verify-hash``'s, then the ``--algo`` clauses that apply to nothing (the plan's
    notes), then a model without triggers that looks lowered.  On ar2's lowered NEFF (no
    triggers, one TOPSP_KICK word) with ``--algo allreduce:ring`` explain gave the clause
    last, after the no-trigger warning; each now comes where lower gives it, explain's own
    wording of the no-trigger one aside (docs/CLI.md "explain", bundle.NOTHING_TO)."""
    from nrtrewrite.golden import lower_to

    lowered = str(lower_to(FIXTURES / "ar2.neff", tmp_path / "out", None) / "ar2.neff")
    head = f"nrtrewrite: warning: {lowered}: "
    kick = "; it holds 1 TOPSP_KICK (0xA2) word: it looks already lowered (give the original model)"
    want = [head + "header hash not verified (--no-verify-hash)",
            head + "--algo clause 'allreduce:ring' applies to nothing in this model: it has no "
                   "ALLREDUCE collective",
            head + "no collective triggers: nothing to lower, every rank file is empty" + kick]
    args = ("--algo", "allreduce:ring", "--no-verify-hash")
    res = run("lower", lowered, "-o", str(tmp_path / "x"), *args)
    assert res.exit_code == 0 and _warnings(res.output) == want, res.output
    res = run("explain", lowered, *args)
    assert res.exit_code == 0, res.output
    assert _warnings(res.output) == want[:2] + [
        head + "no collective triggers: nothing to explain" + kick]


@pytest.mark.parametrize("shown", [("--trigger", "0"), ("--rank", "0")])
def test_explain_warns_of_an_idle_clause_with_triggers_left_out(tmp_path, shown):
    """docs/SELECTION.md §8: a clause that governs none of the model's collectives is
    warned of; lower (and schedule, which selects every trigger under an override) judge it
    on every trigger, and so does explain now when --trigger or --rank leaves triggers out
    (until 2026-12-06 it warned only when it showed every trigger).  groups.neff has no
    all-to-all: ``alltoall:ring`` governs nothing, ``allgather:ring`` trigger 1 (ranks 4..7,
    not shown with --trigger 0 or --rank 0)."""
    path = str(FIXTURES / "groups.neff")
    algo = ("--algo", "allgather:ring;alltoall:ring")
    want = [f"nrtrewrite: warning: {path}: --algo clause 'alltoall:ring' applies to nothing in "
            "this model: it has no ALLTOALL collective"]
    res = run("lower", path, "-o", str(tmp_path / "x"), "-q", *algo)
    assert res.exit_code == 0 and _warnings(res.output) == want, res.output
    res = run("schedule", path, "--rank", "0", "--trigger", "0", *algo)
    assert res.exit_code == 0 and _warnings(res.output) == want, res.output
    res = run("explain", path, *shown, *algo)
    assert res.exit_code == 0, res.output
    assert _warnings(res.output) == want


# -- --host-cc: the selection lower --host-cc makes (review 52k's hostcc_ar2) -------------

def _hostcc_ar2() -> dict:
    """Review 52k's hostcc_ar2.json: an fp16 all-reduce (add) over ranks 0 and 1 (one trn2
    device, LNC 1) of 32 partitions x 300 x 5 x 4 = 192000 elements (375 KiB), src rows of
    300 elements, dst of step 2 (every element a run of its own)."""
    def ap(var, step):
        return {"var": var, "start": 0, "partitions": [0, 32],
                "dims": [[step, 300], [300 * step, 5], [1500 * step, 4]]}
    return {"header": {"name": "m", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": v, "type": "state-buffer", "size": 24064,
                                     "partitions": 128} for v in ("s", "d")],
                           "replica_groups": [[0, 1]],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "fp16", "op": "add", "src": ap("s", 1),
                               "dst": ap("d", 2)}}]}}]}


@pytest.fixture
def hostcc_ar2(tmp_path, monkeypatch):
    monkeypatch.delenv("NRTREWRITE_ALGO", raising=False)
    assembler = pytest.importorskip("nrtrewrite.neff.assembler")
    path = tmp_path / "hostcc_ar2.neff"
    path.write_bytes(assembler.assemble_spec(_hostcc_ar2()))
    return str(path)


def test_explain_host_cc_shows_the_engine_the_bd_gate_takes_under_host_cc(hostcc_ar2):
    """docs/CLI.md "explain" --host-cc, docs/SELECTION.md "The BD gate": under --host-cc
    RING's last reduce step is one recv_reduce_copy_send leg writing its block to OUT; one
    RING channel (384000 B < 256 KiB x 2), 2 blocks of 192000 / 2 = 96000 elements, each a
    run of its own in a dst of step 2: 96000 S2M BDs > TPINC_MAX_BDS 65534, so the default
    passes RING over and takes SINGLE_CYCLE_RING.  Without --host-cc it is RING, the
    fallback.  (Until 2026-12-07 explain had no --host-cc: it showed RING where
    lower --host-cc took SINGLE_CYCLE_RING.)"""
    gate = ("policy gate: a recv_reduce_copy_send leg would need 96000 S2M BDs, more than "
            "TPINC_MAX_BDS 65534 a leg")
    for extra, want in ((("--host-cc",), "SINGLE_CYCLE_RING"), ((), "RING")):
        (rec,) = run_json("explain", hostcc_ar2, *extra)["triggers"]
        assert rec["lowered"]["algorithm"] == want, extra
        assert rec["policy"]["algorithm"] == want, extra
        (ring,) = [c for c in rec["candidates"] if c["algorithm"] == "RING"]
        if extra:
            assert ring["reason"].startswith(gate), ring["reason"]
            assert not ring["chosen"] and not ring["in_window"]
            assert f"RING not taken: {gate}" in rec["policy"]["reason"]
        else:
            assert ring["reason"] == "always legal (the fallback)" and ring["chosen"]
        text = run("explain", hostcc_ar2, *extra)
        assert text.exit_code == 0, text.output
        assert f"lowered: {want} (metaring type {want})" in text.output
        head = text.output.splitlines()[0]
        assert head.endswith("; --host-cc") == bool(extra), head


def test_explain_host_cc_json_engine_is_the_one_lower_host_cc_writes(hostcc_ar2, tmp_path):
    """docs/CLI.md "lower": --topology, --algo and --host-cc are as for explain (the same
    selection): the engine and channel count explain --json reports, with and without
    --host-cc, are those lower's manifest records (triggers[].algorithm and its channels)."""
    for extra in (("--host-cc",), ()):
        out = tmp_path / f"out{len(extra)}"
        res = run("lower", hostcc_ar2, "-o", str(out), "-q", "-j", "1", *extra)
        assert res.exit_code == 0, res.output
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["options"]["host_cc"] is bool(extra)
        (low,) = manifest["triggers"]
        (rec,) = run_json("explain", hostcc_ar2, *extra)["triggers"]
        assert rec["lowered"]["algorithm"] == low["algorithm"], extra
        assert [r["channel"] for r in rec["channels"]["rings"]] == [
            c["channel"] for c in low["channels"]], extra


def test_model_less_explain_takes_host_cc():
    """docs/CLI.md "explain": --host-cc in model-less mode too.  A bare request has no
    access pattern, so the BD gate does not count it: the same selection as without
    (an all-reduce of 1 MiB over 8 ranks), the head line saying --host-cc."""
    args = ("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "8")
    with_cc = run_json(*args, "--host-cc")
    assert with_cc == run_json(*args)
    text = run(*args, "--host-cc")
    assert text.exit_code == 0, text.output
    assert text.output.splitlines()[0].endswith("; --host-cc")
    assert "; --host-cc" not in run(*args).output


# -- a forced engine lower refuses for TPINC_MAX_BDS (RELIABILITY §6, the 52nd "Left") -----

def _lowered_or_refused(path, out, *extra) -> tuple[int, str | None, list[str] | None]:
    """(exit status, lower's error line without its `nrtrewrite: error: MODEL: ` head, the
    manifest's algorithms) of `lower MODEL *extra`."""
    res = CliRunner().invoke(main, ["lower", str(path), "-o", str(out), "-q", "-j", "1",
                                    *extra], env={})
    if res.exit_code == 0:
        return 0, None, [t["algorithm"] for t in
                         json.loads((out / "manifest.json").read_text())["triggers"]]
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("nrtrewrite: error: ")]
    return res.exit_code, line.removeprefix(f"nrtrewrite: error: {path}: "), None


@pytest.mark.parametrize("algo, host_cc, outcome", [
    # forced engines: RING's recv_reduce_copy_send under --host-cc (96000 S2M), MESH's
    # mesh_send and INTRA_RDH's rdh_reduce with or without it, lower refuses at rank 0
    ("ring", True, "refused"), ("allreduce:ring", True, "refused"),
    ("mesh", False, "refused"), ("mesh", True, "refused"), ("intra_rdh", True, "refused"),
    # forced engines that fit
    ("ring", False, "RING"), ("allreduce:ring", False, "RING"),
    ("single_cycle_ring", True, "SINGLE_CYCLE_RING"),
    # exclusions: the default selection under the BD gate
    ("^mesh", True, "SINGLE_CYCLE_RING"), ("^mesh", False, "RING"),
    ("^single_cycle_ring", True, "error"), ("^single_cycle_ring", False, "RING"),
])
def test_explain_says_what_lower_does_with_a_forced_engine_over_tpinc_max_bds(
        hostcc_ar2, tmp_path, algo, host_cc, outcome):
    """docs/CLI.md "explain", docs/SELECTION.md "The BD gate": explain says, for a forced
    engine as for the default's, what lower with the same options does - the engine it
    lowers, or that lower refuses the trigger and why, in lower's words (its line from the
    rank on: lower composes every rank, the first it meets over TPINC_MAX_BDS is named),
    `lowered` INVALID and exit 0 as for any trigger lower refuses (CLI.md "Errors"); a
    selection error is explain's error, lower's line.  The expected answer is lower's own
    run.  (Until 2026-12-07 explain showed the forced engine as lowered: `--host-cc --algo
    ring` RING, exit 0, where lower refused it; review 52z.)"""
    extra = ["--algo", algo] + (["--host-cc"] if host_cc else [])
    status, line, algs = _lowered_or_refused(hostcc_ar2, tmp_path / "out", *extra)
    res = run("explain", hostcc_ar2, "--json", *extra)
    doc = json.loads(res.stdout)
    text = run("explain", hostcc_ar2, *extra)
    if outcome == "error":
        assert status == 2 and ", rank " not in line
        assert res.exit_code == text.exit_code == 2
        assert doc["error"] == f"{hostcc_ar2}: {line}"
        return
    assert res.exit_code == text.exit_code == 0, res.output
    (rec,) = doc["triggers"]
    if outcome == "refused":
        assert status == 2 and algs is None
        where, _, why = line.partition(": ")
        assert where == ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, "
                         "trigger 0, rank 0")
        assert "(TPINC_MAX_BDS)" in why and f"--algo {algo!r} forced" in why
        assert rec["lowered"]["algorithm"] == "INVALID"
        assert rec["lowered"]["fallback_reason"] == f"rank 0: {why}"
        assert rec["channels"]["count"] == 0
        assert doc["model_refusal"] is None and doc["refused_not_shown"] == []
        assert "lowered: INVALID" in text.output
        assert f"rank 0: {why}" in " ".join(text.output.split())
    else:
        assert status == 0 and algs == [outcome]
        assert rec["lowered"]["algorithm"] == outcome
        assert rec["lowered"]["fallback_reason"] is None
        assert f"lowered: {outcome} " in text.output


def test_explain_names_the_forced_refusal_from_nrtrewrite_algo_as_lower_does(
        hostcc_ar2, tmp_path):
    """The override from the environment: lower's line says `NRTREWRITE_ALGO 'ring' forced
    RING`, and so does explain's reason for the trigger."""
    res = CliRunner().invoke(main, ["lower", hostcc_ar2, "-o", str(tmp_path / "o"), "-q",
                                    "--host-cc"], env={"NRTREWRITE_ALGO": "ring"})
    assert res.exit_code == 2
    line = res.stderr.strip().removeprefix(f"nrtrewrite: error: {hostcc_ar2}: ")
    why = line.partition(", rank 0: ")[2]
    assert "; NRTREWRITE_ALGO 'ring' forced RING (" in why
    doc = run_json("explain", hostcc_ar2, "--host-cc", env={"NRTREWRITE_ALGO": "ring"})
    assert doc["triggers"][0]["lowered"]["fallback_reason"] == f"rank 0: {why}"


def test_explain_gives_the_warnings_lower_gives_before_a_forced_engines_refusal(
        hostcc_ar2, tmp_path):
    """lower refuses a forced engine's leg when it composes a rank, after its plan: it has
    given its warnings then (--no-verify-hash's, an --algo clause that applies to nothing),
    and explain gives the same, then shows the trigger INVALID; a --rank outside the world
    is lower's refusal first (it checks its ranks before it composes one)."""
    algo = ["--algo", "allreduce:ring;allgather:mesh", "--host-cc", "--no-verify-hash"]
    res = CliRunner().invoke(main, ["lower", hostcc_ar2, "-o", str(tmp_path / "o"), "-q",
                                    *algo], env={})
    assert res.exit_code == 2
    want = _warnings(res.stderr)
    assert len(want) == 2, res.stderr
    text = run("explain", hostcc_ar2, *algo)
    assert text.exit_code == 0 and _warnings(text.stderr) == want
    assert "lowered: INVALID" in text.output
    res = CliRunner().invoke(main, ["lower", hostcc_ar2, "-o", str(tmp_path / "o"), "-q",
                                    "--rank", "5", *algo], env={})
    ex = run("explain", hostcc_ar2, "--rank", "5", *algo)
    assert res.exit_code == ex.exit_code == 2
    assert ex.stderr.splitlines()[-1] == res.stderr.splitlines()[-1]
    assert "rank 5" in ex.stderr.splitlines()[-1]


def _hostcc_two_groups() -> dict:
    """hostcc_ar2's all-reduce twice: trigger 0 over ranks 2 and 3, trigger 1 over 0 and 1
    (the subgraph's replica groups 0 and 1)."""
    s = _hostcc_ar2()
    sg = s["subgraphs"][0]
    sg["replica_groups"] = [[2, 3], [0, 1]]
    (first,) = sg["engines"]["sp"]
    second = copy.deepcopy(first)
    second["all_reduce"]["group"] = 1
    sg["engines"]["sp"] = [first, second]
    return s


def test_explain_names_the_forced_refusal_lower_meets_first_rank_by_rank(tmp_path):
    """lower composes rank by rank, a rank's triggers in order: of two triggers whose forced
    RING lower refuses (under --host-cc), trigger 0 over ranks 2 and 3 and trigger 1 over 0
    and 1, it names trigger 1 (at rank 0), and trigger 0 at rank 2 when it lowers ranks 2
    and 3 only.  explain shows each INVALID with its own rank and reason; with --trigger 0
    the note on the one not shown names trigger 1 with lower's line (and refused_not_shown
    has it), exit 0."""
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / "two.neff"
    path.write_bytes(assemble_spec(_hostcc_two_groups()))
    extra = ["--host-cc", "--algo", "ring"]
    status, line1, _ = _lowered_or_refused(path, tmp_path / "a", *extra)
    assert status == 2 and ", trigger 1, rank 0: " in line1
    status, line0, _ = _lowered_or_refused(path, tmp_path / "b", *extra, "--rank", "2",
                                           "--rank", "3")
    assert status == 2 and ", trigger 0, rank 2: " in line0
    doc = run_json("explain", str(path), *extra)
    got = [t["lowered"]["fallback_reason"] for t in doc["triggers"]]
    assert got == ["rank 2: " + line0.partition(", rank 2: ")[2],
                   "rank 0: " + line1.partition(", rank 0: ")[2]]
    doc = run_json("explain", str(path), "--trigger", "0", *extra)
    assert doc["refused_not_shown"] == [{"trigger": 1, "refusal": line1}]
    text = run("explain", str(path), "--trigger", "0", *extra)
    assert text.exit_code == 0
    assert f"lower refuses trigger 1, not shown: {line1}" in text.output


def test_triggers_of_one_refused_request_share_its_reason(tmp_path):
    """explain keeps one refusal per trigger (``_plan_model``); the triggers of a request
    refused once hold its reason as one object, not a copy each (review 53n: each was rebuilt
    from the reason, whose escaping copied it: 12,000 triggers refused with a reason of
    95,000 characters held 1.1 GB), and so do requests refused for the same words (trigger
    1: another size); each line still names its own trigger."""
    from nrtrewrite.cli.explain import _plan_model
    from nrtrewrite.neff.assembler import assemble_spec
    from nrtrewrite.neff.reader import read_model
    from nrtrewrite.policy import DEFAULT_POLICY
    from nrtrewrite.select import parse_algo_override
    from nrtrewrite.topology.model import load_topology
    ar = {"all_reduce": {"dtype": "bf16", "op": "add", "src": "i", "dst": "o", "bytes": 4096}}
    other = {"all_reduce": {**ar["all_reduce"], "bytes": 2048}}
    spec = {"header": {"pkg_version": 2, "name": "same3", "lnc_size": 1},
            "subgraphs": [{"name": "sg00", "replica_groups": [[0, 1]],
                           "vars": [{"name": "i", "type": "input", "size": 4096},
                                    {"name": "o", "type": "output", "size": 4096}],
                           "engines": {"sp": [ar, other, ar]}}]}
    path = tmp_path / "same3.neff"
    path.write_bytes(assemble_spec(spec))
    m = read_model(path)
    topo = load_topology(None, world=m.world, lnc_size=m.lnc_size)
    algo = "allreduce:" + ",".join(["hier"] * 3000)  # (a reason of 15,000 characters)
    mp = _plan_model(m, topo, parse_algo_override(algo), DEFAULT_POLICY, {0, 1, 2})
    assert list(mp.refusals) == [0, 1, 2]
    first, *others = mp.refusals.values()
    assert len(first.reason) > 15_000 and first.reason.endswith(
        "forces HIER, refused: enc_can_post_hierarchical_operation: group lies within "
        "node 0 (HIER needs a group spanning nodes)")
    for k, err in enumerate(others, 1):
        assert err.reason is first.reason and type(err) is type(first)
        assert str(err) == str(first).replace("instruction 0, trigger 0:",
                                              f"instruction {k}, trigger {k}:")


# -- a leg over TPINC_MAX_BDS with DRAM operands (review 53i item 1) -----------------------

def _dram_fp8_ar() -> dict:
    """review 53i's rdh.yaml: an fp8 all-reduce of 272 MiB of DRAM over ranks 0 and 1
    (285212672 elements; INTRA_RDH's rdh_reduce leg of rank 0 takes half, 142606336, in
    tiles of the v3 CCE cap, 2048 elements: 69632 tiles, one BD each per stream, two
    sources: 139264 M2S BDs, past TPINC_MAX_BDS 65534)."""
    return {"header": {"pkg_version": 2, "name": "rdh", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "a", "type": "input", "size": "272MiB"},
                                    {"name": "b", "type": "output", "size": "272MiB"}],
                           "replica_groups": [[0, 1]],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "fp8_e4", "op": "add", "src": "a", "dst": "b",
                               "bytes": "272MiB"}}]}}]}


def test_explain_says_lower_refuses_a_forced_engines_dram_leg_over_tpinc_max_bds(tmp_path):
    """docs/SELECTION.md "The BD gate": with DRAM operands only, a forced engine's leg
    passes TPINC_MAX_BDS by its tiles alone; explain shows the trigger INVALID with lower's
    line, exit 0 (until 2026-12-07 `lowered: INTRA_RDH` where lower refused it, review 53i).
    The expected line is lower's own run; its counts are worked out by hand above."""
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / "rdh.neff"
    path.write_bytes(assemble_spec(_dram_fp8_ar()))
    status, line, _ = _lowered_or_refused(path, tmp_path / "o", "--algo", "intra_rdh")
    assert status == 2
    where, _, why = line.partition(": ")
    assert where == ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, "
                     "trigger 0, rank 0")
    assert why.startswith("a rdh_reduce leg on channel 0 needs 139264 M2S and 69632 S2M BDs")
    assert "its 142606336 elements make 69632 tiles" in why
    doc = run_json("explain", str(path), "--algo", "intra_rdh")
    (rec,) = doc["triggers"]
    assert rec["lowered"]["algorithm"] == "INVALID"
    assert rec["lowered"]["fallback_reason"] == f"rank 0: {why}"
    text = run("explain", str(path), "--algo", "intra_rdh")
    assert text.exit_code == 0 and "lowered: INVALID" in text.output


def _dram_fp8(op: str, group: list[int], elements: int) -> dict:
    """An fp8 ``op`` of ``elements`` elements a rank (the all-gather's output ``len(group)``
    times that) over ``group``, DRAM operands."""
    out = elements * len(group) if op == "all_gather" else elements
    return {"header": {"pkg_version": 2, "name": "rdh", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "a", "type": "input", "size": elements},
                                    {"name": "b", "type": "output", "size": out}],
                           "replica_groups": [group],
                           "engines": {"sp": [{op: {
                               "dtype": "fp8_e4", "op": "add", "src": "a", "dst": "b",
                               "bytes": elements}} if op != "all_gather" else {op: {
                               "dtype": "fp8_e4", "src": "a", "dst": "b",
                               "bytes": elements}}]}}]}


@pytest.mark.parametrize("op, group, topology, algo, tile", [
    ("all_reduce", [0, 1], None, "intra_rdh", 2048),
    ("all_reduce", [0, 1, 2], None, "intra_rdh", 2048),
    ("reduce_scatter", [0, 1, 2], None, "intra_rdh", 2048),
    ("all_gather", [0, 1, 2], None, "intra_rdh", 2048),
    ("all_reduce", [0, 1, 2, 3], "trn1", "intra_rdh", 1024),
    ("all_reduce", [32 * n for n in range(8)], "trn1:nodes=8", "inter_rdh", 1024),
])
def test_an_rdh_leg_of_dram_operands_within_the_gates_bound_is_lowered_forced(
        tmp_path, op, group, topology, algo, tile):
    """The BD gate does not compose an RDH engine's DRAM legs for a message of at most
    32,759 tiles (select._dram_under_limit: a leg reads ranges adding up to at most the
    message, from at most two sources, one BD a tile: 2 x (32759 + 8) = 65534, TPINC_MAX_BDS);
    so such a message, forced to the engine, must lower on every rank (`lower` counts the
    BDs it emits: docs/SELECTION.md "The BD gate"). The tile is the generation's CCE cap
    (2048 elements on trn2, 1024 on trn1)."""
    from nrtrewrite.neff.assembler import assemble_spec
    path = tmp_path / "edge.neff"
    tiles = 32757 if op == "reduce_scatter" else 32759  # (a multiple of the group's 3)
    # (an all-gather's message is its gathered output: a third of it a rank)
    each = tiles * tile // len(group) if op == "all_gather" else tiles * tile
    path.write_bytes(assemble_spec(_dram_fp8(op, group, each)))
    extra = ("--topology", topology) if topology else ()
    status, line, algos = _lowered_or_refused(path, tmp_path / "o", "--algo", algo, *extra)
    assert (status, line) == (0, None) and algos == [algo.upper()]


def test_the_bd_gate_composes_no_engine_for_a_dram_message_within_its_bound(monkeypatch):
    """A DRAM fp8 all-reduce of 48 MiB over 8 ranks (50,331,648 elements: past the first
    bound's 16 Mi, inside INTRA_RDH's 1-56 MiB window, 24,576 tiles: within the RDH bound):
    the default selection takes INTRA_RDH without composing any engine's legs (review 53u:
    every engine was composed for every rank, `lower --rank 0` of the benchmark's large64
    9.5 s instead of 1.7 s)."""
    from nrtrewrite import bdgate
    from nrtrewrite.codes import EncAlgType
    from nrtrewrite.neff.assembler import assemble_spec
    from nrtrewrite.neff.reader import read_model_bytes
    from nrtrewrite.select import select
    from nrtrewrite.topology.model import load_topology
    composed = []
    monkeypatch.setattr(bdgate, "worst_leg", lambda *a, **k: composed.append(a) or None)
    m = read_model_bytes(assemble_spec(_dram_fp8("all_reduce", list(range(8)), 48 << 20)))
    topo = load_topology(None, world=m.world, lnc_size=m.lnc_size)
    (trig,) = m.triggers
    assert select(trig, topo).alg == EncAlgType.INTRA_RDH
    assert composed == []


def test_the_bd_gate_passes_over_a_default_engine_whose_dram_leg_is_over_tpinc_max_bds():
    """The default selection's BD gate counts DRAM legs too (docs/SELECTION.md "The BD
    gate"): under the default policy no engine it takes has one over the limit (the ring
    engines' legs are sliced, MESH's are within its 8 MiB channel buffer, the RDH engines'
    windows end at 56 / 64 MiB), so a policy that widens INTRA_RDH's window to reach it:
    review 53i's 272 MiB fp8 all-reduce, whose rdh_reduce leg needs 2 x 69632 M2S BDs, is
    passed over for it and RING taken; under the default policy RING is taken for the
    window (the gate does not run for a trigger within its bound: 8 x its tiles)."""
    from dataclasses import replace

    from nrtrewrite.codes import EncAlgType
    from nrtrewrite.neff.assembler import assemble_spec
    from nrtrewrite.neff.reader import read_model_bytes
    from nrtrewrite.policy import DEFAULT_POLICY, Policy
    from nrtrewrite.select import select
    from nrtrewrite.topology.model import load_topology
    m = read_model_bytes(assemble_spec(_dram_fp8_ar()))
    topo = load_topology(None, world=m.world, lnc_size=m.lnc_size)
    (trig,) = m.triggers
    wide = tuple(replace(w, op_max_limit=None, op_max_limit_sbuf=None)
                 if w.alg == EncAlgType.INTRA_RDH else w for w in DEFAULT_POLICY.windows)
    policy = Policy(windows=wide)
    sel = select(trig, topo, policy=policy)
    assert sel.alg == EncAlgType.RING
    rdh = next(c for c in sel.candidates if c.alg == EncAlgType.INTRA_RDH)
    assert rdh.reason == ("policy gate: a rdh_reduce leg would need 139264 M2S BDs, more than "
                          "TPINC_MAX_BDS 65534 a leg (DRAM operands: a BD a tile per source "
                          "and destination; lower refuses it, forced too)")
    assert select(trig, topo).alg == EncAlgType.RING


def _scheduled_or_refused(path, *extra) -> tuple[int, str | None]:
    """(exit status, the error line without its `nrtrewrite: error: MODEL: ` head) of
    `schedule MODEL *extra`, the rich view's and --json's alike (the document's `error`,
    no op shown)."""
    plain = CliRunner().invoke(main, ["schedule", str(path), *extra], env={})
    res = CliRunner().invoke(main, ["schedule", str(path), "--json", *extra], env={})
    assert plain.exit_code == res.exit_code, (plain.output, res.output)
    if res.exit_code == 0:
        assert json.loads(res.stdout)["ops"]
        return 0, None
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("nrtrewrite: error: ")]
    doc = json.loads(res.stdout)
    assert doc["ops"] == [] and doc["error"] == line.removeprefix("nrtrewrite: error: ")
    assert plain.stderr.splitlines()[-1] == line and plain.stdout == ""
    return res.exit_code, line.removeprefix(f"nrtrewrite: error: {path}: ")


@pytest.mark.parametrize("algo, host_cc, refused", [
    # RING's recv_reduce_copy_send under --host-cc (96000 S2M BDs), MESH's mesh_send and
    # INTRA_RDH's rdh_reduce forced; RING without --host-cc and the default fit
    ("ring", True, True), ("allreduce:ring", True, True), ("mesh", False, True),
    ("intra_rdh", True, True), ("ring", False, False), (None, True, False),
])
@pytest.mark.parametrize("rank", [0, 1])
def test_schedule_refuses_a_forced_engines_legs_over_tpinc_max_bds_as_lower_rank_does(
        hostcc_ar2, tmp_path, algo, host_cc, refused, rank):
    """docs/CLI.md "schedule": the legs of a forced engine that `lower --rank R` refuses for
    TPINC_MAX_BDS (which only the emitter counts) are refused by `schedule --rank R` with
    lower's line, exit 2, --json's document holding it and no op; legs that fit are shown.
    The expected answer is lower's own run.  (Until 2026-12-07 schedule showed the legs,
    exit 0, where lower refused them; the fifty-third session's Left.)"""
    extra = ["--rank", str(rank)] + (["--algo", algo] if algo else []) + (
        ["--host-cc"] if host_cc else [])
    status, line, _ = _lowered_or_refused(hostcc_ar2, tmp_path / "o", *extra)
    assert status == (2 if refused else 0)
    if refused:
        assert f", trigger 0, rank {rank}: " in line and "(TPINC_MAX_BDS)" in line
    assert _scheduled_or_refused(hostcc_ar2, *extra) == (status, line)


@pytest.mark.parametrize("rank, refused", [(0, True), (1, False), (2, True)])
def test_schedule_refuses_a_forced_rdh_dram_leg_on_the_ranks_lower_refuses(
        tmp_path, monkeypatch, rank, refused):
    """A DRAM fp8 all-reduce of 70000 x 2048 elements over ranks 0, 1, 2 forced to
    INTRA_RDH: the core ranks 0 and 2 reduce half the message each, 35000 CCE tiles of 2048
    elements from two sources, 70000 M2S BDs, over TPINC_MAX_BDS; rank 1, the extra rank
    (docs/CLI.md "explain" rdh), only copies its input in and the result out, in copy
    tiles of 64 KiB, so `lower --rank 1` lowers it.  `schedule --rank R` refuses exactly
    where `lower --rank R` does, with its line."""
    from nrtrewrite.neff.assembler import assemble_spec
    monkeypatch.delenv("NRTREWRITE_ALGO", raising=False)
    path = tmp_path / "rdh.neff"
    path.write_bytes(assemble_spec(_dram_fp8("all_reduce", [0, 1, 2], 70000 * 2048)))
    extra = ["--rank", str(rank), "--algo", "intra_rdh"]
    status, line, _ = _lowered_or_refused(path, tmp_path / "o", *extra)
    assert status == (2 if refused else 0)
    if refused:
        assert f"rank {rank}: a rdh_reduce leg on channel 0 needs 70000 M2S" in line
    assert _scheduled_or_refused(path, *extra) == (status, line)


@pytest.mark.parametrize("algo, env", [("intra_rdh", False), ("allreduce:intra_rdh", False),
                                       ("intra_rdh", True)])
def test_a_forced_engines_dram_leg_refusal_says_which_override_forced_it(
        tmp_path, monkeypatch, algo, env):
    """docs/SELECTION.md "The BD gate": a forced engine's DRAM leg over TPINC_MAX_BDS is
    refused with the suffix an SBUF leg's refusal has, `; <source> '<override>' forced
    <ENGINE> (<what makes the BDs>)`, here `DRAM operands: a BD a tile per source and
    destination` (review 53i's 272 MiB fp8 all-reduce over ranks 0 and 1: rank 0's
    rdh_reduce leg, 69632 tiles of 2048 elements, two sources); lower, explain and schedule
    say the same.  (Until 2026-12-07 the DRAM refusal had no suffix.)"""
    from nrtrewrite.neff.assembler import assemble_spec
    monkeypatch.delenv("NRTREWRITE_ALGO", raising=False)
    path = tmp_path / "rdh.neff"
    path.write_bytes(assemble_spec(_dram_fp8_ar()))
    env_ = {"NRTREWRITE_ALGO": algo} if env else {}
    opt = [] if env else ["--algo", algo]
    res = CliRunner().invoke(main, ["lower", str(path), "-o", str(tmp_path / "o"), "-q",
                                    "-j", "1", *opt], env=env_)
    assert res.exit_code == 2
    line = res.stderr.strip().removeprefix(f"nrtrewrite: error: {path}: ")
    source = "NRTREWRITE_ALGO" if env else "--algo"
    assert line == (
        "member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, trigger 0, rank 0: a "
        "rdh_reduce leg on channel 0 needs 139264 M2S and 69632 S2M BDs, at most 65534 of "
        "each in its tp_inc_steps record (TPINC_MAX_BDS): its 142606336 elements make 69632 "
        "tiles, one BD each per source and destination (the leg is not split further: a "
        "smaller message or another engine lowers it); "
        f"{source} {algo!r} forced INTRA_RDH (DRAM operands: a BD a tile per source and "
        "destination)")
    doc = run_json("explain", str(path), *opt, env=env_)
    why = line.partition(", rank 0: ")[2]
    assert doc["triggers"][0]["lowered"]["fallback_reason"] == f"rank 0: {why}"
    res = CliRunner().invoke(main, ["schedule", str(path), "--rank", "0", *opt], env=env_)
    assert res.exit_code == 2 and res.stderr.strip().endswith(line)


def test_schedule_trigger_refuses_only_the_shown_triggers_legs_over_tpinc_max_bds(
        tmp_path, monkeypatch):
    """docs/CLI.md "schedule" --trigger: a refusal of K's own is given as lower gives it,
    one of another trigger's is not.  hostcc_ar2's all-reduce (trigger 1 here), after an
    fp16 all-reduce of 2 rows of 300 elements over the same ranks (trigger 0, src and dst
    rows of 300: its legs need a handful of BDs), under --host-cc --algo ring: lower --rank
    0 refuses trigger 1's recv_reduce_copy_send leg (96000 S2M BDs); `schedule --trigger 1`
    refuses with that line, `schedule --trigger 0` shows trigger 0, `schedule` refuses."""
    from nrtrewrite.neff.assembler import assemble_spec
    monkeypatch.delenv("NRTREWRITE_ALGO", raising=False)
    spec = _hostcc_ar2()
    small = {"all_reduce": {"dtype": "fp16", "op": "add",
                            "src": {"var": "s", "start": 0, "partitions": [0, 2],
                                    "dims": [[1, 300], [300, 1], [300, 1]]},
                            "dst": {"var": "d", "start": 0, "partitions": [0, 2],
                                    "dims": [[1, 300], [300, 1], [300, 1]]}}}
    spec["subgraphs"][0]["engines"]["sp"].insert(0, small)
    path = tmp_path / "two.neff"
    path.write_bytes(assemble_spec(spec))
    extra = ["--rank", "0", "--host-cc", "--algo", "ring"]
    status, line, _ = _lowered_or_refused(path, tmp_path / "o", *extra)
    assert status == 2
    assert (", trigger 1, rank 0: a recv_reduce_copy_send leg on channel 0 needs 207 M2S and "
            "96000 S2M BDs" in line), line
    assert _scheduled_or_refused(path, *extra) == (status, line)
    assert _scheduled_or_refused(path, *extra, "--trigger", "1") == (status, line)
    assert _scheduled_or_refused(path, *extra, "--trigger", "0") == (0, None)


def test_a_kangaring_secondarys_prev_and_next_are_its_primary_in_both_tables():
    """docs/TOPOLOGY.md §4: "A secondary's prev and next are its unit's primary".  The
    role table of ``explain --rank`` showed ``-`` for them while the kangaring paths table
    (the rank's enc_kangaring view) showed the primary (review 58i).  node64's trigger 2,
    rank 9: a secondary on channels 1 and 3, in unit ``11 9`` (primary 11); the two tables
    agree on every channel."""
    text = run("explain", str(FIXTURES / "node64.neff"), "--trigger", "2", "--rank",
               "9").output
    lines = text.splitlines()

    def table(head: str) -> dict[str, dict[str, str]]:
        i = next(i for i, line in enumerate(lines) if line.startswith(head))
        cols = _cells(lines[i])
        rows = {}
        for line in lines[i + 2:]:
            if "│" not in line:
                break
            row = dict(zip(cols, _cells(line)))
            rows[row["ch"]] = row
        return rows

    roles = table("ch ┃ role")
    paths = table("ch ┃ primary")
    secondary = [ch for ch, r in roles.items() if r["role"] == "secondary"]
    assert secondary == ["1", "3"]
    for ch in secondary:
        unit = roles[ch]["unit"].split()
        assert unit[1] == "9" and (roles[ch]["prev"], roles[ch]["next"]) == (unit[0], unit[0])
    assert {ch: (r["prev"], r["next"]) for ch, r in roles.items()} == \
        {ch: (r["prev"], r["next"]) for ch, r in paths.items()}


@pytest.mark.parametrize("rank", [None, "64"])
def test_a_single_cycle_ring_table_says_which_channel_runs_cw_and_which_ccw(rank):
    """docs/FORMATS.md §1.1 ``single_cycle.pairs``: pair k is [CW channel, CCW channel] =
    channels 2k and 2k + 1, the CCW ring the CW one backward (from the group's smallest
    rank).  The text's ring table said neither (``--json`` has ``direction``; review 58i):
    it has a ``direction`` column now, for SINGLE_CYCLE_RING only.  Group 0, 64, 128 on
    trn2:nodes=3 (LNC 2): CW 0 -> 64 -> 128, so rank 64's CW prev is 0 and next 128, its
    CCW ones the other way."""
    args = ["explain", "--op", "allreduce", "--bytes", "1MiB", "--group", "0,64,128",
            "--topology", "trn2:nodes=3"]
    text = run(*args, "--algo", "single_cycle_ring", *(["--rank", rank] if rank else [])).output
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("ch "))
    head = _cells(lines[i])
    rows = [dict(zip(head, _cells(line))) for line in lines[i + 2:i + 4]]
    assert head[:2] == ["ch", "direction"]
    assert [(r["ch"], r["direction"]) for r in rows] == [("0", "cw"), ("1", "ccw")]
    if rank:
        assert [(r["prev"], r["next"]) for r in rows] == [("0", "128"), ("128", "0")]
    else:
        assert [r["ring order"] for r in rows] == ["0 64 128", "0 128 64"]
    ring = run(*args, "--algo", "ring").output.splitlines()
    assert "direction" not in next(line for line in ring if line.startswith("ch "))


def test_a_kangaring_secondarys_json_ring_record_has_prev_and_next_its_primary():
    """docs/TOPOLOGY.md §4: "A secondary's prev and next are its unit's primary"; the text's
    role table gives them (fixer 58l), ``--json``'s secondary record had ``primary`` only.
    Worked out by hand from §4 and §1 (trn2 at lnc 2: rank r on device r // 4, s-engine
    r % 4): node64's rank 9 is device 2's s-engine 1, so its unit is engines {1, 1 ^ 2 = 3},
    members (9, 11) in that order; on channel c the primary is member c % 2: 9 on channels
    0 and 2, 11 on channels 1 and 3, where rank 9 is a secondary with prev = next = 11."""
    rec = run_json("explain", str(FIXTURES / "node64.neff"), "--trigger", "2", "--rank",
                   "9")["triggers"][0]
    rings = rec["channels"]["rings"]
    assert [r["channel"] for r in rings] == [0, 1, 2, 3]
    secondary = [r for r in rings if r["role"] == "secondary"]
    assert [r["channel"] for r in secondary] == [1, 3]
    for r in secondary:
        assert (r["prev"], r["next"], r["primary"]) == (11, 11, 11)
        assert r["unit"] == [11, 9]
        assert list(r) == ["channel", "role", "prev", "next", "primary", "unit", "duplicate"]
    # the same values as the rank's enc_kangaring view (the kangaring paths record)
    view = {k["channel"]: k for k in rec["kangaring"]["channels"]}
    for r in rings:
        assert (r["prev"], r["next"]) == (view[r["channel"]]["prev"], view[r["channel"]]["next"])
