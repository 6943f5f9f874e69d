"""``nrtrewrite simulate``: fixtures and small models simulate bit-exactly; the CLI's verdict
table, --json, exit codes and checksum refusal; the shadow state's happens-before rules.

Helpers here (``coll_spec``, ``lower_spec``, ``cli``) are shared by the other
test_simulate*/test_mutation* modules.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from nrtrewrite.bundle import write_output
from nrtrewrite.cli import main
from nrtrewrite.cli.lower import load_and_plan
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.simulate import simulate_output, verify_checksums
from nrtrewrite.simulate.shadow import Access, Conflict, Shadow

from conftest import GOLDEN_SMALL

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
ELEM = {"bf16": 2, "fp16": 2, "fp32r": 4, "fp32": 4, "fp8_e3": 1, "fp8_e4": 1, "fp8_e5": 1,
        "int32": 4, "int8": 1, "uint64": 8, "int16": 2}


# ---------------------------------------------------------------------------
# helpers

def coll_spec(op: str, dtype: str, ranks, num_elements: int, alu: str = "add", *,
              lnc: int = 1, name: str = "sim") -> dict:
    """One collective over ``ranks`` (a list, or n for 0..n-1) as an assembler spec."""
    group = list(range(ranks)) if isinstance(ranks, int) else list(ranks)
    n = len(group)
    es = ELEM[dtype]
    out_elems = num_elements * n if op == "all_gather" else (
        num_elements // n if op == "reduce_scatter" else num_elements)
    body = {"dtype": dtype, "src": "x_in", "dst": "x_out", "num_elements": num_elements}
    if op != "all_gather":
        body["op"] = alu
    return {
        "header": {"pkg_version": 2, "name": name, "lnc_size": lnc},
        "subgraphs": [{
            "name": "sg00",
            "vars": [{"name": "x_in", "type": "input", "size": max(num_elements * es, 1)},
                     {"name": "x_out", "type": "output", "size": max(out_elems * es, 1)}],
            "replica_groups": [group],
            "engines": {"sp": ["nop", {op: body}]},
        }],
    }


def lower_spec(spec: dict, out: Path, **opts) -> Path:
    """Assemble ``spec`` next to ``out`` and lower it into ``out`` (every rank)."""
    neff = out.parent / f"{out.name}.neff"
    neff.write_bytes(assemble_spec(spec))
    return lower_neff(neff, out, **opts)


def lower_neff(neff: Path, out: Path, *, topology=None, algo="ring", host_cc=False,
               ranks=None) -> Path:
    """Lower with the ring forced by default, so these tests do not move with the selection
    policy; mesh and RDH tests pass ``algo`` explicitly.  Every rank, or only ``ranks``."""
    plan, _ = load_and_plan(str(neff), topology=topology, algo=algo, host_cc=host_cc,
                            no_verify_hash=False)
    return write_output(plan, out, ranks=list(ranks) if ranks else None, workers=1)


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_clean(out: Path, seed: int = 0):
    res = simulate_output(out, seed=seed)
    bad = [(t.trigger, t.status, t.detail) for t in res.triggers if t.status != "match"]
    assert res.ok, (res.error, bad)
    return res


# ---------------------------------------------------------------------------
# fixtures

#: the fixtures with a reduce-scatter before another trigger (their own test, below)
RS_BEFORE = ["groups", "mix8"]


@pytest.mark.parametrize("name", [n for n in GOLDEN_SMALL if n not in RS_BEFORE])
def test_fixture_simulates_clean(name, tmp_path):
    """Every other golden fixture that keeps every rank (tests/conftest.py's golden set, so
    a new fixture is simulated too), lowered with the ring forced."""
    out = lower_neff(FIX / f"{name}.neff", tmp_path / "out")
    verify_checksums(out)
    res = assert_clean(out, seed=1)
    assert res.stats["legs_run"] == res.stats["legs"] > 0
    assert all(t.ranks_checked == t.group_size for t in res.triggers)


@pytest.mark.parametrize("name", RS_BEFORE)
def test_fixture_with_a_reduce_scatter_before_another_trigger(name, tmp_path):
    assert_clean(lower_neff(FIX / f"{name}.neff", tmp_path / "out"))


def rs_then_ar_spec() -> dict:
    """The smallest reproducer of the cross-trigger race: RS then AR on one group of 4."""
    return {
        "header": {"pkg_version": 2, "name": "rs_ar", "lnc_size": 1},
        "subgraphs": [{
            "name": "sg00",
            "vars": [{"name": "a", "type": "input", "size": 64 * 1024},
                     {"name": "b", "type": "output", "size": 16 * 1024},
                     {"name": "c", "type": "input", "size": 64 * 1024},
                     {"name": "d", "type": "output", "size": 64 * 1024}],
            "replica_groups": [[0, 1, 2, 3]],
            "engines": {"sp": [
                {"reduce_scatter": {"dtype": "bf16", "op": "add", "src": "a", "dst": "b",
                                    "num_elements": 32768}},
                {"all_reduce": {"dtype": "bf16", "op": "add", "src": "c", "dst": "d",
                                "num_elements": 32768}}]},
        }],
    }


def test_reduce_scatter_then_all_reduce(tmp_path):
    assert_clean(lower_spec(rs_then_ar_spec(), tmp_path / "out"))


def two_node_spec(op="all_reduce", dtype="bf16", num_elements=4096, alu="add") -> dict:
    """4 ranks at LNC 2 on two trn2 nodes ({0, 1} and {64, 65}): every ring hops the network."""
    return coll_spec(op, dtype, [0, 1, 64, 65], num_elements, alu, lnc=2, name="two_node")


def reused_output_spec(ranks) -> dict:
    """Three collectives writing the same output var, one after the other."""
    return {
        "header": {"pkg_version": 2, "name": "reuse", "lnc_size": 2},
        "subgraphs": [{
            "name": "sg00",
            "vars": [{"name": "a", "type": "input", "size": 65536},
                     {"name": "b", "type": "output", "size": 65536 * len(ranks)}],
            "replica_groups": [list(ranks)],
            "engines": {"sp": [
                {"all_reduce": {"dtype": "bf16", "op": "add", "src": "a", "dst": "b",
                                "num_elements": 30000}},
                {"all_gather": {"dtype": "fp16", "src": "a", "dst": "b", "num_elements": 9000}},
                {"reduce_scatter": {"dtype": "bf16", "op": "max", "src": "a", "dst": "b",
                                    "num_elements": 32000}}]},
        }],
    }


@pytest.mark.parametrize("ranks", [[0, 1, 2, 3], [0, 64, 128, 192]])
def test_reused_output(tmp_path, ranks):
    assert_clean(lower_spec(reused_output_spec(ranks), tmp_path / "out"), seed=3)


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_two_node_ring_runs_the_net_proxy(op, tmp_path):
    res = assert_clean(lower_spec(two_node_spec(op), tmp_path / "out"), seed=5)
    assert res.stats["transfers"] > 0


@pytest.mark.parametrize("op,dtype,alu,ranks,n", [
    ("all_reduce", "fp16", "max", 3, 1001),
    ("all_reduce", "fp8_e5", "add", 16, 4099),
    ("all_reduce", "fp32r", "min", 5, 7),
    ("all_reduce", "bf16", "add", 2, 1),
    ("reduce_scatter", "fp8_e3", "add", 6, 6 * 97),
    ("all_gather", "int32", None, 7, 333),
    ("all_gather", "uint64", None, 3, 5),
])
def test_small_models(op, dtype, alu, ranks, n, tmp_path):
    out = lower_spec(coll_spec(op, dtype, ranks, n, alu or "add"), tmp_path / "out")
    for seed in (0, 1):
        assert_clean(out, seed)


MESH_CASES = [("mesh", "all_reduce", "bf16", 8, 20000), ("mesh", "all_gather", "int32", 8, 999),
              ("mesh", "reduce_scatter", "fp16", 4, 4000),
              ("single_step_mesh", "all_reduce", "fp8_e4", 4, 3000),
              ("intra_rdh", "all_reduce", "bf16", 16, 65536),
              ("intra_rdh", "reduce_scatter", "bf16", 8, 8 * 1000)]


@pytest.mark.parametrize("algo,op,dtype,ranks,n", MESH_CASES)
def test_mesh_and_rdh_simulate(tmp_path, algo, op, dtype, ranks, n):
    """The emitted bytes as they are (every semaphore BD's role byte included)."""
    out = lower_spec(coll_spec(op, dtype, ranks, n, lnc=2), tmp_path / "out", algo=algo)
    top = json.loads((out / "manifest.json").read_text())
    assert top["triggers"][0]["algorithm"] == algo.upper()
    for seed in (0, 1):
        assert_clean(out, seed)


def test_host_cc_final_step(tmp_path):
    """With host CC the ring all-reduce's last reduce-scatter step is recv_reduce_copy_send
    (seed 001 §4: ``host_cc`` selects it over recv_reduce_copy); both lowerings simulate
    clean."""
    from nrtrewrite.compose.leaves import Leaf
    from nrtrewrite.emit import formats as F

    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 5000), tmp_path / "out")
    neff = tmp_path / "out.neff"
    out2 = lower_neff(neff, tmp_path / "hostcc", host_cc=True)

    def leaves(o):
        return set(np.fromfile(o / "rank-0000" / "legs.bin", F.LEG_DTYPE)["leaf"].tolist())

    assert int(Leaf.recv_reduce_copy_send) in leaves(out2)
    assert int(Leaf.recv_reduce_copy_send) not in leaves(out)
    assert int(Leaf.recv_reduce_copy) in leaves(out)
    assert_clean(out)
    assert_clean(out2)


def test_seeds_change_data_and_interleaving(tmp_path, monkeypatch):
    """The seed picks both the input data and the order the scheduler runs the actors in:
    two seeds give different inputs and different picks, one seed the same ones again."""
    import random

    import nrtrewrite.simulate.engine as engine

    picks: list[int] = []
    inputs: list[bytes] = []

    class Recording(random.Random):
        def randrange(self, *a, **k):
            picks.append(super().randrange(*a, **k))
            return picks[-1]

    def recording_input(*a, **k):
        vals = make_input(*a, **k)
        inputs.append(np.ascontiguousarray(vals).tobytes())
        return vals

    from nrtrewrite.simulate.testdata import make_input
    monkeypatch.setattr(engine.random, "Random", Recording)
    monkeypatch.setattr(engine, "make_input", recording_input)
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 3000), tmp_path / "out")
    runs = {}
    for seed in (1, 2, 1):
        picks.clear()
        inputs.clear()
        res = simulate_output(out, seed=seed)
        assert res.ok and res.seed == seed
        got = (list(picks), list(inputs))
        assert len(got[0]) > 10 and len(got[1]) == 4  # one fill per rank
        if seed in runs:
            assert runs[seed] == got  # the same seed: the same run
        runs[seed] = got
    assert runs[1][0] != runs[2][0]  # the interleaving
    assert all(x != y for x, y in zip(runs[1][1], runs[2][1]))  # every rank's input


# ---------------------------------------------------------------------------
# the command line

@pytest.fixture(scope="module")
def small_out(tmp_path_factory) -> Path:
    return lower_spec(coll_spec("all_reduce", "bf16", 4, 5000), tmp_path_factory.mktemp("s") / "o")


def test_unwritten_output_bytes_fail_even_when_the_values_match(monkeypatch, small_out):
    """Bytes of an output that no leg of the collective wrote fail the trigger even where
    they happen to hold the expected values (a fresh buffer's zeros, an in-place input):
    the values alone cannot show them.  The shadow is made to report the first 2 bytes of
    every output range as unwritten while the engine's data stay right."""
    real = Shadow.check_output

    def check_output(self, a, e, acc, vc, writers=None):
        return [(a, a + 2)] + real(self, a, e, acc, vc, writers)

    monkeypatch.setattr(Shadow, "check_output", check_output)
    res = simulate_output(small_out)
    assert res.error is None and not res.ok
    (tr,) = res.triggers
    assert tr.status == "mismatch" and tr.mismatched_elements == 0  # the values are right
    assert tr.ranks_checked == 4 and tr.unwritten_bytes == 4 * 2  # one DRAM range per rank
    assert "2 byte(s) of the output were not written by the collective" in tr.detail


def _replace_by_a_copy(out: Path, tamper: bool = False) -> None:
    """What ``lower --force`` does to OUT: another folder (here a copy, with its NEFF's first
    byte changed when ``tamper``) takes its place."""
    new = out.parent / ".out.new"
    shutil.copytree(out, new)
    if tamper:
        neff = next(new.glob("*.neff"))
        data = bytearray(neff.read_bytes())
        data[0] ^= 1
        neff.write_bytes(bytes(data))
    shutil.rmtree(out)
    new.rename(out)


@pytest.mark.parametrize("when", ["simulating", "checking"])
def test_an_output_replaced_while_simulated_has_no_verdict(monkeypatch, small_out, tmp_path, when):
    """``simulate`` reads OUT file by file; when a ``lower --force`` replaces the folder
    meanwhile, what it read may come from two outputs: one line and exit 2 (it gave a false
    protocol error or mismatch, exit 1), also where the reads failed (a checksum of the new
    output against the old manifest) and also where both outputs are alike."""
    import nrtrewrite.cli.simulate as sim_cli

    out = tmp_path / "out"
    shutil.copytree(small_out, out)
    name = "simulate_output" if when == "simulating" else "verify_checksums"
    real = getattr(sim_cli, name)

    def replaced_first(*args, **kw):
        _replace_by_a_copy(out, tamper=when == "checking")
        return real(*args, **kw)
    monkeypatch.setattr(sim_cli, name, replaced_first)
    res = cli("simulate", out)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert res.stderr.startswith(f"nrtrewrite: error: {out}: the output folder was replaced")
    assert "no verdict; simulate it again" in res.stderr


def test_simulate_output_reports_its_progress_in_legs(small_out):
    """``simulate_output(progress=f)`` (the CLI's bar on a terminal) calls ``f(done, total)``,
    ``total`` the output's legs (64-byte legs.bin records, FORMATS §3, over every rank): a
    run of fewer than 200 legs after each leg, then once more at the end."""
    total = sum((d / "legs.bin").stat().st_size // 64 for d in small_out.glob("rank-*"))
    assert 0 < total < 200
    calls = []
    res = simulate_output(small_out, progress=lambda done, n: calls.append((done, n)))
    assert all(t.status == "match" for t in res.triggers)
    assert calls == [(k, total) for k in range(1, total + 1)] + [(total, total)]


def test_an_output_removed_while_simulated_has_no_verdict(monkeypatch, small_out, tmp_path):
    """OUT removed (not replaced) once its checksums are verified: no verdict either, the
    same one line and exit 2 (docs/CLI.md "simulate"), whether or not what was read fails."""
    import nrtrewrite.cli.simulate as sim_cli

    out = tmp_path / "out"
    shutil.copytree(small_out, out)
    real = sim_cli.simulate_output

    def removed_first(*args, **kw):
        shutil.rmtree(out)
        return real(*args, **kw)
    monkeypatch.setattr(sim_cli, "simulate_output", removed_first)
    res = cli("simulate", out)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert res.stderr.startswith(f"nrtrewrite: error: {out}: the output folder was replaced "
                                 "(or removed) while it was being simulated")


def _terminal_stderr(monkeypatch):
    """``simulate``'s stderr console made a terminal's, its output kept."""
    import io

    from rich.console import Console

    import nrtrewrite.cli.simulate as sim_cli
    buf = io.StringIO()
    monkeypatch.setattr(sim_cli, "stderr_console", lambda: Console(
        file=buf, force_terminal=True, width=100, color_system=None))
    return buf


def test_a_terminal_gets_a_progress_bar_counting_legs_from_the_threshold(monkeypatch,
                                                                         small_out):
    """CLI.md "simulate": on a terminal a bar shows while the output is simulated; it counts
    the legs once there are PROGRESS_MIN_LEGS or more (20 000; here made 1): every leg of
    the four ranks' legs.bin (64-byte records, FORMATS.md §3) run, N/N.  Below, the bar
    counts nothing (0/?); with --json there is none."""
    import nrtrewrite.cli.simulate as sim_cli

    legs = sum((small_out / f"rank-{r:04d}" / "legs.bin").stat().st_size // 64
               for r in range(4))
    buf = _terminal_stderr(monkeypatch)
    assert cli("simulate", small_out).exit_code == 0
    assert "simulating" in buf.getvalue() and "0/?" in buf.getvalue()
    assert f"{legs}/{legs}" not in buf.getvalue()
    monkeypatch.setattr(sim_cli, "PROGRESS_MIN_LEGS", 1)
    buf = _terminal_stderr(monkeypatch)
    assert cli("simulate", small_out).exit_code == 0
    assert f"{legs}/{legs} legs" in buf.getvalue(), repr(buf.getvalue())
    buf = _terminal_stderr(monkeypatch)
    assert cli("simulate", small_out, "--json").exit_code == 0
    assert buf.getvalue() == ""


@pytest.mark.parametrize("algo,name", [("ring", "RING"), ("mesh", "MESH"),
                                       ("intra_rdh", "INTRA_RDH")])
def test_the_verdict_table_names_the_algorithm_lowered(tmp_path, algo, name):
    """docs/CLI.md simulate: each trigger's row names the algorithm it was lowered to (the
    manifest's ``algorithm``, FORMATS §1.1), a column after the collective, and so does
    ``--json``'s ``algorithm``; the table did not say it (review 58i).  The same 4-rank
    all-reduce lowered with each ``--algo``: the engine forced is the one named."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 5000), tmp_path / "o", algo=algo)
    res = cli("simulate", out)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    i = next(i for i, line in enumerate(lines) if "┃ collective" in line)
    head = [c.strip() for c in lines[i].strip("┃").split("┃")]
    assert head == ["trigger", "collective", "algorithm", "ranks", "verdict", "detail"]
    row = [c.strip() for c in lines[i + 2].strip("│").split("│")]
    assert row[:5] == ["0", "ALLREDUCE ADD BF16 x5000 over 4 ranks", name, "4/4", "match"]
    doc = json.loads(cli("simulate", out, "--json").stdout)
    assert doc["triggers"][0]["algorithm"] == name


def test_cli_table_and_exit_0(small_out):
    res = cli("simulate", small_out, "--seed", 3)
    assert res.exit_code == 0, res.output
    assert "match" in res.stdout and "1/1 trigger(s) match" in res.stdout
    assert "ALLREDUCE ADD BF16 x5000 over 4 ranks" in res.stdout


def test_cli_json(small_out):
    res = cli("simulate", small_out, "--json")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert list(doc) == ["format", "format_version", "output", "seed", "ok", "error",
                         "error_trigger", "warnings", "triggers", "stats"]
    assert doc["ok"] is True and doc["seed"] == 0 and doc["error"] is None
    t = doc["triggers"][0]
    assert list(t) == ["trigger", "op", "dtype", "alu_op", "num_elements", "group_size",
                       "algorithm", "status", "ranks_checked", "mismatched_elements",
                       "unwritten_bytes", "detail", "first_mismatch"]
    assert t["status"] == "match" and t["ranks_checked"] == 4
    assert set(doc["stats"]) == {"ranks", "legs", "legs_run", "transfers", "bytes_moved",
                                 "deadlock_free_every_interleaving", "load_seconds",
                                 "run_seconds"}
    assert doc["stats"]["deadlock_free_every_interleaving"] is True


def _tampered(src: Path, dst: Path, rel: str) -> Path:
    shutil.copytree(src, dst)
    p = dst / rel
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("rel", ["rank-0001/dma.bin", "rank-0002/manifest.json", "sim.neff"])
def test_cli_refuses_a_tampered_output(small_out, tmp_path, rel):
    rel = rel.replace("sim.neff", json.loads((small_out / "manifest.json").read_text())
                      ["output_neff"]["name"])
    out = _tampered(small_out, tmp_path / "t", rel)
    res = cli("simulate", out)
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "sha256" in lines[0] and "--ignore-checksums" in lines[0]


def _rehash_rank_manifest(out: Path, rank_dir: str, data: bytes) -> None:
    """Write ``data`` as ``rank_dir``'s manifest and record its sha256 in OUT/manifest.json
    (``rank_manifests``, FORMATS §1.1), so only what it says is refused."""
    import hashlib

    (out / rank_dir / "manifest.json").write_bytes(data)
    top = json.loads((out / "manifest.json").read_text())
    top["rank_manifests"][rank_dir] = hashlib.sha256(data).hexdigest()
    (out / "manifest.json").write_text(json.dumps(top))


def _spoil_top(key: str):
    def spoil(out: Path) -> None:
        top = json.loads((out / "manifest.json").read_text())
        if key == "output_neff.sha256":
            del top["output_neff"]["sha256"]
        elif key == "output_neff.name":
            top["output_neff"]["name"] = "other.neff"  # a file name, of no file in OUT
        elif key == "ranks":
            top["ranks"] = 4
        elif key == "rank_manifests":
            top["rank_manifests"]["rank-0007"] = "0" * 64
        (out / "manifest.json").write_text(json.dumps(top))
    return spoil


def _no_files_listed(out: Path) -> None:
    doc = json.loads((out / "rank-0002" / "manifest.json").read_text())
    del doc["files"]
    _rehash_rank_manifest(out, "rank-0002", json.dumps(doc).encode())


@pytest.mark.parametrize("spoil, says", [
    # (a key absent or of another type names its key path, with and without the option:
    # tests/test_simulate_manifest_types.py; until 2026-12-06 `OUT: manifest.json has no
    # output_neff name/sha256`, `... has no ranks / rank_manifests`)
    (_spoil_top("output_neff.sha256"), "/manifest.json: field output_neff.sha256: missing"),
    (_spoil_top("ranks"), "/manifest.json: field ranks: must be a list, not 4"),
    (_spoil_top("rank_manifests"), ": rank_manifests does not list exactly the rank folders "
     "of ranks"),
    (_no_files_listed, "/rank-0002/manifest.json: field files: missing"),
], ids=["no-sha256", "ranks-not-a-list", "rank-manifests-extra", "no-files"])
def test_cli_refuses_an_output_its_manifests_do_not_describe(small_out, tmp_path, spoil, says):
    """The checksums are checked against what the manifests list (FORMATS §1.1, §1.2): one
    that lists no checksum, or lists other ranks or files than OUT holds is refused in one
    line naming OUT (exit 2), before any byte is simulated.  (A file the manifests name that
    OUT lacks: tests/test_simulate_read_errors.py, as without the checksums.)"""
    out = tmp_path / "o"
    shutil.copytree(small_out, out)
    spoil(out)
    res = cli("simulate", out)
    assert (res.exit_code, res.stdout) == (2, ""), res.output
    assert res.stderr.startswith(f"nrtrewrite: error: {out}{says}"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("flags", [(), ("--ignore-checksums",)])
@pytest.mark.parametrize("which", ["manifest.json", "rank-0003/manifest.json"])
def test_cli_a_manifest_that_is_a_dangling_link_or_nested_too_deeply(small_out, tmp_path, which,
                                                                   flags):
    """A manifest that is a link to nowhere is missing, and JSON nested deeper than the
    parser goes (100000 brackets, 200 KB) is invalid JSON: the
    simulation cannot be done (exit 2, one line naming the manifest)."""
    if which != "manifest.json" and not flags:
        flags = ("--ignore-checksums",)  # (else its sha256 is what refuses it)
    for case, says in (("link", "manifest.json is missing"),
                       ("deep", "cannot read manifest.json: invalid JSON: nested too deeply")):
        out = tmp_path / case
        shutil.copytree(small_out, out)
        path = out / which
        path.unlink()
        if case == "link":
            path.symlink_to(tmp_path / "nowhere.json")
        else:
            path.write_text("[" * 100_000 + "]" * 100_000)
        res = cli("simulate", out, *flags)
        assert (res.exit_code, res.stdout) == (2, ""), res.output
        assert res.stderr == f"nrtrewrite: error: {path}: {says}\n"


def test_cli_ignore_checksums_an_artifact_of_part_of_a_record(small_out, tmp_path):
    """A byte appended to cce.bin (16-byte descriptors, FORMATS §6) is a protocol error
    naming the rank and the artifact (exit 1), not a short read."""
    out = tmp_path / "o"
    shutil.copytree(small_out, out)
    cce = out / "rank-0001" / "cce.bin"
    size = cce.stat().st_size + 1
    with open(cce, "ab") as fh:
        fh.write(b"\0")
    res = cli("simulate", out, "--ignore-checksums")
    assert res.exit_code == 1, res.output
    assert (f"protocol error: {out}: rank 1, artifact cce.bin: {size} bytes is not a whole "
            "number of 16-byte records") in res.stdout


@pytest.mark.parametrize("case", ["not-a-neff", "the-input"])
def test_cli_ignore_checksums_a_rewritten_neff_that_is_not_one(small_out, tmp_path, case):
    """Under --ignore-checksums the rewritten NEFF is read as the runtime would load it: not
    a NEFF-like file, or the input itself (its collective trigger not rewritten into
    TOPSP_KICK words, SIMULATOR.md §7), it is a protocol error naming the file (exit 1).
    (One that is gone cannot be read: exit 2, tests/test_simulate_read_errors.py.)"""
    out = tmp_path / "o"
    shutil.copytree(small_out, out)
    neff = out / json.loads((out / "manifest.json").read_text())["output_neff"]["name"]
    if case == "not-a-neff":
        neff.write_bytes(b"\0" * 100)
    else:
        neff.write_bytes((small_out.parent / f"{small_out.name}.neff").read_bytes())
    res = cli("simulate", out, "--ignore-checksums")
    assert res.exit_code == 1, res.output
    says = {"not-a-neff": "cannot read the rewritten NEFF: file too short: 100 bytes, the "
            "header alone needs 1024",
            # coll_spec: the collective is sp's instruction 1, after a nop
            "the-input": "the rewritten NEFF still holds a collective trigger (sg00 sp "
            "instruction 1)"}[case]
    assert f"protocol error: {neff}: {says}" in res.stdout


def test_cli_a_partial_output_cannot_be_simulated(tmp_path):
    """An output of ``lower --rank`` holds some ranks only: the simulation cannot be done
    (exit 2, one line), where it was a protocol error of the bytes (exit 1: for CI, a
    lowering bug)."""
    out = tmp_path / "part"
    assert cli("lower", "-q", ROOT / "fixtures" / "mix8.neff", "--rank", "1", "--rank", "3",
               "-o", out).exit_code == 0
    res = cli("simulate", out)
    assert (res.exit_code, res.stdout) == (2, ""), res.output
    assert res.stderr == (f"nrtrewrite: error: {out}/manifest.json: the output holds 2 "
                          "rank folder(s); simulating needs every rank of every replica "
                          "group (rank 0 is missing: lower without --rank)\n")


@pytest.mark.parametrize("how", ["relative", "absolute", "own entry"])
@pytest.mark.parametrize("flags", [(), ("--ignore-checksums",)])
def test_a_rewritten_neff_named_outside_the_output_is_refused(small_out, tmp_path, how, flags):
    """``output_neff.name`` is a file name in OUT (FORMATS §1.1): a manifest pointing it at
    a NEFF elsewhere (its sha256 still right) was simulated from there and matched (found by
    an exploratory tester); ``diff`` already refused it."""
    out = tmp_path / "B"
    shutil.copytree(small_out, out)
    top = json.loads((out / "manifest.json").read_text())
    away = tmp_path / "elsewhere"
    away.mkdir()
    (out / top["output_neff"]["name"]).rename(away / "rewritten.neff")
    top["output_neff"]["name"] = {"relative": "../elsewhere/rewritten.neff",
                                  "absolute": str(away / "rewritten.neff"),
                                  "own entry": "rank-0000"}[how]
    (out / "manifest.json").write_text(json.dumps(top))
    res = cli("simulate", out, *flags)
    assert res.exit_code == 2, res.output
    want = ("must be an object whose 'name' is a file name in the folder" if how != "own entry"
            else 'names "rank-0000", one of the folder\'s own entries (the rewritten NEFF '
            "never has such a name)")
    assert res.stderr == f"nrtrewrite: error: {out}/manifest.json: field output_neff: {want}\n"


def test_cli_ignore_checksums_then_fails(small_out, tmp_path):
    out = _tampered(small_out, tmp_path / "t", "rank-0001/dma.bin")
    res = cli("simulate", out, "--ignore-checksums")
    assert res.exit_code == 1, res.output
    # the flipped bit (the middle byte of rank 1's dma.bin) is read, not refused by its hash
    assert "0/1 trigger(s) match" in res.stdout
    assert "protocol error:" in res.stdout and "rank 1, artifact dma.bin, record" in res.stdout


def test_cli_lowers_a_model_first(tmp_path, monkeypatch):
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(coll_spec("all_gather", "fp16", 3, 999)))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    res = cli("simulate", neff, "--json", "--seed", 9, "--algo", "ring")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ok"] is True
    assert list(scratch.iterdir()) == []  # the temporary lowering is gone


def test_each_simulate_in_one_process_finds_its_temporary_folder_from_the_environment(
        tmp_path, monkeypatch):
    """Review R1: in a program calling the CLI many times, ``simulate MODEL.neff`` made its
    folder where ``tempfile`` found one on the process's first call (``tempfile.tempdir``,
    kept for good): once the program removed that folder and pointed TMPDIR at another,
    every simulate was refused, ``.../nrtrewrite-simulate-XXXX: cannot make a temporary
    folder ...``.  CLI.md "simulate": the folder is ``TMPDIR/nrtrewrite-simulate-XXXXXXXX``
    at each command, a TMPDIR that cannot be written passed over (for TEMP's here)."""
    import tempfile
    first, second, third = (tmp_path / n for n in ("first", "second", "third"))
    for d in (first, second, third):
        d.mkdir()
    made, mkdtemp = [], tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **k: made.append(mkdtemp(*a, **k))
                        or made[-1])
    monkeypatch.setattr(tempfile, "tempdir", None)
    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    model = FIX / "ar2.neff"
    monkeypatch.setenv("TMPDIR", str(first))
    assert cli("simulate", model).exit_code == 0
    first.rmdir()  # (the program's scratch folder goes, and TMPDIR points at another)
    monkeypatch.setenv("TMPDIR", str(second))
    res = cli("simulate", model)
    assert res.exit_code == 0, res.output
    # a folder another library's gettempdir() kept is not where TMPDIR says either
    monkeypatch.setattr(tempfile, "tempdir", str(second))
    monkeypatch.setenv("TMPDIR", str(third))
    assert cli("simulate", model).exit_code == 0
    # TMPDIR not there: passed over for the next folder of Python's list, TEMP's
    monkeypatch.setenv("TMPDIR", str(first))
    monkeypatch.setenv("TEMP", str(second))
    assert cli("simulate", model).exit_code == 0
    assert [Path(m).parent for m in made] == [first, second, third, second]
    assert all(Path(m).name.startswith("nrtrewrite-simulate-") for m in made)
    assert tempfile.tempdir == str(second)  # (as the test left it: not read, not set)
    assert list(second.iterdir()) == list(third.iterdir()) == []


#: A process that SIGKILLs itself inside ``temp_root``'s probe, between the probe file's
#: ``mkstemp`` and its ``unlink`` (at the write of its 4 bytes), with TMPDIR ``argv[1]``
_KILLED_PROBING = r"""
import os, signal, sys
os.environ["TMPDIR"] = sys.argv[1]
from nrtrewrite import bundle
def write(fd, data):
    os.kill(os.getpid(), signal.SIGKILL)
bundle.os.write = write
bundle.temp_root()
"""


def test_a_probe_file_a_killed_run_left_in_the_temporary_folder_is_removed_by_the_next(
        tmp_path, monkeypatch):
    """Review V5: a SIGKILL between the temporary-folder probe's ``mkstemp`` and ``unlink``
    left ``.nrtrewrite-probe-XXXXXXXX`` in TMPDIR for good.  CLI.md "simulate": the probe's
    name holds its PID and the next ``simulate MODEL.neff`` removes one whose PID is no
    process (and one of the old shape, no PID, unchanged for an hour, as writer.py's
    OLD_STALE_AFTER_S); a newer old-shape one and other names are kept."""
    import os
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    tmpdir = tmp_path / "t"
    tmpdir.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _KILLED_PROBING, str(tmpdir)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (left,) = tmpdir.iterdir()
    # .nrtrewrite-probe-PID-XXXXXXXX: the killed process's PID, then mkstemp's 8
    assert left.name.startswith(".nrtrewrite-probe-")
    pid, tail = left.name[len(".nrtrewrite-probe-"):].split("-")
    assert pid.isdigit() and len(tail) == 8
    hour_ago = time.time() - 3601
    old = tmpdir / ".nrtrewrite-probe-abcd1234"  # (the shape before 2026-12-07)
    old.write_bytes(b"")
    os.utime(old, (hour_ago, hour_ago))
    new_old = tmpdir / ".nrtrewrite-probe-efgh5678"  # (that shape, not an hour old)
    new_old.write_bytes(b"")
    other = tmpdir / ".nrtrewrite-probe-notes.txt"  # (not a probe's name)
    other.write_bytes(b"keep")
    os.utime(other, (hour_ago, hour_ago))
    monkeypatch.setattr(tempfile, "tempdir", None)
    for name in ("TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    res = cli("simulate", FIX / "ar2.neff")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmpdir.iterdir()) == [new_old.name, other.name]


def test_cli_lowering_options_need_a_model(small_out):
    res = cli("simulate", small_out, "--topology", "trn2")
    assert res.exit_code == 2 and "only when a MODEL.neff" in res.output


def test_cli_not_an_output(tmp_path):
    res = cli("simulate", tmp_path)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("what", ["a file", "nothing"])
def test_simulate_output_of_a_path_that_is_no_folder_is_an_output_error(small_out, tmp_path,
                                                                        what):
    """``simulate_output`` (the CLI reads a file as a model first) refuses a path that is a
    file, or is not there, as no output folder: an OutputError (status 2) naming it."""
    from nrtrewrite.errors import OutputError
    path = small_out / "manifest.json" if what == "a file" else tmp_path / "gone"
    with pytest.raises(OutputError) as ei:
        simulate_output(path)
    assert str(ei.value) == f"{path} is not an output folder"


@pytest.mark.parametrize("fmt, version, hint", [
    ("nrtrewrite-lowered", 1, "; an older nrtrewrite wrote it: lower the model again "
                              "(docs/FORMATS.md §1.1)"),
    ("nrtrewrite-lowered", 99, "; a newer nrtrewrite wrote it: simulate it with that version, "
                               "or lower the model again with this one (docs/FORMATS.md §1.1)"),
    ("nrtrewrite-lowered", True, ""),
    ("something-else", 2, "")])
def test_cli_refuses_another_manifest_format(small_out, tmp_path, fmt, version, hint):
    """An output whose manifest has another format or version is refused in one line; one
    written by an older nrtrewrite (format 1: a HIER leg's groups in full) says to lower the
    model again, one of a newer version that a newer nrtrewrite wrote it and what to do
    (docs/SIMULATOR.md §1); a version that is no integer (``true``) is no version either
    wrote."""
    out = tmp_path / "o"
    shutil.copytree(small_out, out)
    doc = json.loads((out / "manifest.json").read_text())
    doc["format"], doc["format_version"] = fmt, version
    (out / "manifest.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    res = cli("simulate", out, "--ignore-checksums")
    assert res.exit_code == 2
    # (the values as JSON writes them: "something-else", true; until 2026-12-06 Python's)
    shown = {"nrtrewrite-lowered": '"nrtrewrite-lowered"', "something-else": '"something-else"'}
    assert res.stderr == (f"nrtrewrite: error: {out}/manifest.json: not an nrtrewrite-lowered "
                          f"v2 manifest (format {shown[fmt]}, version "
                          f"{'true' if version is True else version}){hint}\n")


@pytest.mark.parametrize("flags", [(), ("--ignore-checksums",)])
def test_a_deleted_format_version_is_named_as_json_writes_it(small_out, tmp_path, flags):
    """Review 48e: a manifest without ``format_version`` was refused as ``(format
    'nrtrewrite-lowered', version None)``, Python's forms; SIMULATOR.md §1 names values as
    JSON writes them."""
    out = tmp_path / "o"
    shutil.copytree(small_out, out)
    doc = json.loads((out / "manifest.json").read_text())
    del doc["format_version"]
    (out / "manifest.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    res = cli("simulate", out, *flags)
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == (f"nrtrewrite: error: {out}/manifest.json: not an nrtrewrite-lowered "
                          'v2 manifest (format "nrtrewrite-lowered", version null)\n')


# ---------------------------------------------------------------------------
# the shadow state

def _acc(tid, clk, trigger=0, kind=Access.LEG):
    return Access(tid, clk, trigger, kind, f"t{tid}@{clk}")


def test_shadow_happens_before_rules():
    vc = np.zeros(3, np.int64)
    sh = Shadow(64)
    with pytest.raises(Conflict) as ei:
        sh.read(0, 8, _acc(0, 1), vc)
    assert ei.value.kind == "unwritten"
    sh.write(0, 16, _acc(1, 1), vc)
    with pytest.raises(Conflict) as ei:  # thread 0 has not seen thread 1's write
        sh.read(0, 8, _acc(0, 1), vc)
    assert ei.value.kind == "raw"
    vc[1] = 1  # a semaphore edge from thread 1 to thread 0
    sh.read(0, 8, _acc(0, 2), vc)
    with pytest.raises(Conflict) as ei:  # thread 2 overwrites what thread 0 read, unordered
        sh.write(4, 12, _acc(2, 1), np.array([0, 1, 1]))
    assert ei.value.kind == "war"
    sh.write(4, 12, _acc(2, 1), np.array([2, 1, 1]))  # ordered after the read: fine
    with pytest.raises(Conflict) as ei:
        sh.write(8, 9, _acc(1, 5), np.array([0, 5, 0]))
    assert ei.value.kind == "ww"
    with pytest.raises(Conflict) as ei:  # a read must see bytes of its own trigger
        sh.read(0, 4, _acc(0, 3, trigger=7), np.array([3, 1, 1]))
    assert ei.value.kind == "stale"
    # the output check: fills do not count as the collective's writes
    sh2 = Shadow(16)
    sh2.write(0, 8, _acc(0, 1, kind=Access.FILL), np.array([1, 0, 0]))
    sh2.write(8, 16, _acc(0, 2), np.array([2, 0, 0]))
    assert sh2.check_output(0, 16, _acc(0, 3, kind=Access.CHECK), np.array([3, 0, 0])) == [(0, 8)]


# one range, or ten (read_many / write_many then rebuild the span in one pass, past MANY)
_ONE, _TEN = [(0, 20)], [(k, k + 1) for k in range(0, 20, 2)]


@pytest.mark.parametrize("ivs", [_ONE, _TEN], ids=["one range", "ten ranges"])
@pytest.mark.parametrize("after", ["older", "newer"])
def test_a_write_must_be_ordered_after_every_read_since_the_last_write(ivs, after):
    """docs/SIMULATOR.md §5 (races): a write not ordered after the last write and every read
    since it is a race, not only the newest read (or the oldest).  Thread 0 writes; threads
    1 and 2 read it, unordered with each other; thread 0 writes again ordered after one of
    the two reads only: a write-after-read race with the other.  A read set that kept only
    one of the reads, or a write checked against only one, would let the write through."""
    sh = Shadow(64)
    sh.write_many(ivs, _acc(0, 1), np.array([1, 0, 0]))
    older, newer = _acc(1, 1), _acc(2, 1)
    sh.read_many(ivs, older, np.array([1, 1, 0]))  # after the write, not after `newer`
    sh.read_many(ivs, newer, np.array([1, 0, 1]))  # after the write, not after `older`
    seen = np.array([2, 1, 0]) if after == "older" else np.array([2, 0, 1])
    with pytest.raises(Conflict) as ei:
        sh.write_many(ivs, _acc(0, 2), seen)
    assert ei.value.kind == "war"
    assert ei.value.other is (newer if after == "older" else older)
    assert (ei.value.lo, ei.value.hi) == ivs[0]
    sh.write_many(ivs, _acc(0, 2), np.array([2, 1, 1]))  # after both reads: no race


@pytest.mark.parametrize("ivs", [_ONE, _TEN], ids=["one range", "ten ranges"])
def test_a_second_read_of_a_thread_replaces_only_its_own_first_read(ivs):
    """docs/SIMULATOR.md §5 (races) and the read sets of nrtrewrite/simulate/shadow.py: a read
    replaces its own thread's earlier reads and those ordered before it, never a read of
    another thread it is not ordered after.  Thread 1 reads, thread 2 reads twice (neither
    ordered after thread 1's read); a write ordered after thread 2's reads but not after
    thread 1's races with thread 1's read."""
    sh = Shadow(64)
    sh.write_many(ivs, _acc(0, 1), np.array([1, 0, 0]))
    first = _acc(1, 1)
    sh.read_many(ivs, first, np.array([1, 1, 0]))
    sh.read_many(ivs, _acc(2, 1), np.array([1, 0, 1]))
    sh.read_many(ivs, _acc(2, 2), np.array([1, 0, 2]))
    with pytest.raises(Conflict) as ei:
        sh.write_many(ivs, _acc(0, 2), np.array([2, 0, 2]))
    assert ei.value.kind == "war" and ei.value.other is first
    assert (ei.value.lo, ei.value.hi) == ivs[0]


@pytest.mark.parametrize("after", ["leg", "check"])
def test_a_write_after_the_output_check_is_ordered_after_it_and_every_other_read(after):
    """docs/SIMULATOR.md §5 (races): the output check reads the output like any leg does, and
    joins the reads since the last write.  Thread 0 writes the output, thread 1 (a peer's leg)
    reads it, thread 2 (the rank's control thread) checks it, unordered with thread 1's read;
    a write by thread 3 (the next trigger's, into a reused output) ordered after only one of
    the two reads is a write-after-read race with the other."""
    sh = Shadow(16)
    sh.write(0, 16, _acc(0, 1), np.array([1, 0, 0, 0]))
    leg = _acc(1, 1)
    sh.read(0, 16, leg, np.array([1, 1, 0, 0]))
    check = _acc(2, 1, kind=Access.CHECK)
    assert sh.check_output(0, 16, check, np.array([1, 0, 1, 0])) == []
    seen = np.array([1, 1, 0, 1]) if after == "leg" else np.array([1, 0, 1, 1])
    with pytest.raises(Conflict) as ei:
        sh.write(0, 16, _acc(3, 1, trigger=1), seen)
    assert ei.value.kind == "war" and ei.value.other is (check if after == "leg" else leg)
    sh.write(0, 16, _acc(3, 1, trigger=1), np.array([1, 1, 1, 1]))  # after both: no race


def _hier_plan():
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.reader import read_model

    return plan_lowering(read_model(FIX / "two_node128.neff"), LowerOptions())


def _hier_triggers_doc(plan=None) -> dict:
    from nrtrewrite.lower import manifest_triggers

    return {"triggers": json.loads(json.dumps(manifest_triggers(plan or _hier_plan())))}


def test_hier_groups_read_back_as_ranks():
    """The simulator turns a HIER leg's plan records (ring orders in positions) into each
    group's ring orders in ranks: the rings the lowering planned for that group
    (docs/FORMATS.md §1.1)."""
    from nrtrewrite.simulate.triggers import load_triggers

    plan = _hier_plan()
    specs = load_triggers(_hier_triggers_doc(plan))
    checked = 0
    for tp in plan.triggers:
        if tp.alg.name != "HIER":
            continue
        for lp in tp.prepared.data.legs:
            got = specs[tp.trigger.ordinal].legs[lp.name]["groups"]
            assert [tuple(group) for group, _o, _p in got] == list(lp.plans)
            for group, orders, pgta in got:
                planned = lp.plans[tuple(group)]
                assert orders == {c: list(planned.orders[c]) for c in planned.channel_ids}
                assert pgta == planned.layout.groups
                checked += 1
    assert checked > 64


@pytest.mark.parametrize("spoil, says, error", [
    (lambda leg: leg["groups"][0].update(plan=len(leg["plans"])),
     r"legs\[0\]\.groups\[0\]\.plan \d+ is not an index of", "simulation"),
    (lambda leg: leg["plans"][0]["channels"][0]["order"].append(999),
     r"legs\[0\]\.plans\[0\]\.channels\[0\]\.order .* names position 999, outside", "simulation"),
    # a key the format requires: the output cannot be read (OutputError, status 2)
    (lambda leg: leg.pop("plans"), r"legs\[0\]\.plans: missing", "output"),
])
def test_hier_plan_record_errors_name_the_trigger(spoil, says, error):
    from nrtrewrite.errors import OutputError, SimulationError
    from nrtrewrite.simulate.triggers import load_triggers

    doc = _hier_triggers_doc()
    i = next(i for i, t in enumerate(doc["triggers"]) if t.get("hier"))
    spoil(doc["triggers"][i]["hier"]["legs"][0])
    cls = SimulationError if error == "simulation" else OutputError
    with pytest.raises(cls, match=says) as err:
        load_triggers(doc, file="manifest.json")
    assert f"triggers[{i}]" in str(err.value) and "manifest.json" in str(err.value)


def one_buffer_spec(coll: str, body: dict, algo_ranks: int = 4) -> dict:
    """One collective whose src and dst are the same 64 KiB var ``t`` (offsets in ``body``)."""
    return {"header": {"name": "overlap", "lnc_size": 1},
            "subgraphs": [{"vars": [{"name": "t", "type": "tmp-buf", "size": 65536}],
                           "replica_groups": [list(range(algo_ranks))],
                           "engines": {"sp": [{coll: body}]}}]}


@pytest.mark.parametrize("coll, body, src, dst", [
    # an all-gather into its own input: dst [0, 4 * 2048) holds src [0, 2048)
    ("all_gather", {"dtype": "bf16", "src": "t", "dst": "t", "num_elements": 1024},
     (0, 2048), (0, 8192)),
    # an all-gather whose input lies inside the far end of its output: dst [0, 8192) is
    # 4 x 2048 bytes (out_bytes, not in_bytes) and holds src [4096, 6144)
    ("all_gather", {"dtype": "bf16", "src": {"var": "t", "offset": 4096}, "dst": "t",
                    "num_elements": 1024}, (4096, 6144), (0, 8192)),
    # a reduce-scatter whose 2 KiB output starts 1000 bytes into its 8 KiB input
    ("reduce_scatter", {"dtype": "bf16", "op": "add", "src": "t",
                        "dst": {"var": "t", "offset": 1000}, "num_elements": 4096},
     (0, 8192), (1000, 3048)),
    # an all-reduce shifted by one element
    ("all_reduce", {"dtype": "bf16", "op": "add", "src": "t", "dst": {"var": "t", "offset": 2},
                    "num_elements": 1024}, (0, 2048), (2, 2050)),
])
def test_overlapping_operands_are_refused(tmp_path, coll, body, src, dst):
    """Overlap other than dst = src exactly lets a rank overwrite input a peer still reads
    (the simulator reported the race, or wrong numbers): refused at lowering, naming the
    trigger's field."""
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(one_buffer_spec(coll, body)))
    res = CliRunner().invoke(main, ["lower", "-q", str(neff), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    # the 0xC8 word at instruction 0, its dst_offset at bytes 40..47 (NEFF-LIKE.md)
    assert "\n" not in line and ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 0, "
                                 "offset 0x28, field dst_offset, trigger 0") in line, line
    assert f"dst bytes [{dst[0]}, {dst[1]}) overlap src bytes [{src[0]}, {src[1]})" in line
    assert not (tmp_path / "out").exists()
    # explain shows what lower does: not lowered, for the same reason
    res = CliRunner().invoke(main, ["explain", str(neff), "--json"])
    assert res.exit_code == 0, res.output
    (rec,) = json.loads(res.output)["triggers"]
    assert rec["lowered"]["algorithm"] == "INVALID"
    assert line.split("trigger 0: ", 1)[1] in json.dumps(rec)


@pytest.mark.parametrize("coll, body", [
    ("all_reduce", {"dtype": "bf16", "op": "add", "src": "t", "dst": "t", "num_elements": 1024}),
    ("reduce_scatter", {"dtype": "bf16", "op": "add", "src": "t", "dst": "t",
                        "num_elements": 4096}),
    # disjoint parts of one var
    ("all_reduce", {"dtype": "bf16", "op": "add", "src": "t",
                    "dst": {"var": "t", "offset": 2048}, "num_elements": 1024}),
    ("all_gather", {"dtype": "bf16", "src": "t", "dst": {"var": "t", "offset": 2048},
                    "num_elements": 1024}),
])
@pytest.mark.parametrize("algo", [None, "ring"])
def test_in_place_and_disjoint_operands_in_one_var_match(tmp_path, coll, body, algo):
    assert_clean(lower_spec(one_buffer_spec(coll, body), tmp_path / "out", algo=algo))


def test_cli_json_is_one_document_when_the_simulation_cannot_be_done(tmp_path):
    """CI parses ``simulate --json``'s stdout: a simulation that cannot be done (exit 2)
    printed nothing there. Now a document with ``ok`` null and the error."""
    out = tmp_path / "part"
    assert cli("lower", "-q", FIX / "mix8.neff", "--rank", "1", "-o", out).exit_code == 0
    res = cli("simulate", out, "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and doc["ok"] is None and doc["triggers"] == []
    assert doc["output"] == str(out) and "rank 0 is missing" in doc["error"]
    assert res.stderr == f"nrtrewrite: error: {doc['error']}\n"
    res = cli("simulate", tmp_path / "nowhere", "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and doc["ok"] is None and doc["output"] is None
    assert "does not exist" in doc["error"]
    res = cli("simulate", out, "--algo", "ring", "--json")
    assert res.exit_code == 2
    assert "--algo applies only when a MODEL.neff is given" in json.loads(res.stdout)["error"]
    res = cli("simulate", out)  # without --json: nothing on stdout
    assert res.exit_code == 2 and res.stdout == ""


def test_cli_json_document_of_a_simulation_that_cannot_be_done_has_every_key(tmp_path):
    """CLI.md "simulate" `--json`: when the simulation cannot be done (exit 2) stdout is still
    one document: `format` "nrtrewrite-simulate", `format_version` 1, `output` the target as
    given, `seed` likewise, `ok` null, `error` the message, `error_trigger` null (the
    message names no trigger), `triggers` and `stats` empty."""
    folder = tmp_path / "empty"
    folder.mkdir()
    res = cli("simulate", folder, "--json", "--seed", "7")
    doc = json.loads(res.stdout)
    assert res.exit_code == 2
    assert doc == {"format": "nrtrewrite-simulate", "format_version": 1, "output": str(folder),
                   "seed": 7, "ok": None, "error": doc["error"], "error_trigger": None,
                   "warnings": [], "triggers": [], "stats": {}}
    assert "not an nrtrewrite output folder" in doc["error"]
    assert res.stderr == f"nrtrewrite: error: {doc['error']}\n"


def _subgraphs_spec(parts: list[tuple[list[list[int]], list[tuple]]]) -> dict:
    """One subgraph per ``(replica groups, meshcase triggers)``, in order (``sg00``, ``sg01``,
    ...): replica groups of different subgraphs may overlap."""
    import meshcase
    spec = None
    for k, (groups, trigs) in enumerate(parts):
        one = meshcase.spec(groups, trigs, lnc=2)
        sg = one["subgraphs"][0]
        sg["name"] = f"sg{k:02d}"
        for v in sg["vars"]:
            v["name"] = f"s{k}{v['name']}"
        for item in sg["engines"]["sp"]:
            body = next(iter(item.values()))
            body["src"], body["dst"] = f"s{k}{body['src']}", f"s{k}{body['dst']}"
        if spec is None:
            spec = one
        else:
            spec["subgraphs"].append(sg)
    return spec


def _overlapping_subgraphs_spec() -> dict:
    """Two reduce-scatters on ranks 0..3 (subgraph sg00), then one on ranks 1, 4, 5
    (sg01: replica groups of different subgraphs may overlap)."""
    return _subgraphs_spec([([[0, 1, 2, 3]], [("reduce_scatter", "bf16", "add", 4096),
                                              ("reduce_scatter", "bf16", "add", 32)]),
                            ([[1, 4, 5]], [("reduce_scatter", "bf16", "add", 48)])])


def test_an_early_handshake_post_from_a_later_entry_is_not_counted(tmp_path):
    """Found by the end-to-end fuzzer (a TP-like group and an overlapping group in another
    subgraph): the simulator reported the race at every seed. The entry handshake counted
    every post on one semaphore, and ranks 4, 5 (sg01's trigger only) posted to rank 1
    before rank 1 was done with sg00's: rank 1 counted them for its second trigger and sent
    into rank 2's scratch while rank 2 still read the first's partials. sg01's trigger now
    counts on a semaphore of its own (nrtrewrite.entryslots)."""
    out = lower_spec(_overlapping_subgraphs_spec(), tmp_path / "o")
    for seed in range(3):
        assert_clean(out, seed=seed)


@pytest.mark.parametrize("seed", range(2))
def test_the_early_post_defect_put_back_is_caught(monkeypatch, tmp_path, seed):
    """The reproducer above guards the fix: lowered with every trigger's handshake on one
    semaphore again (the defect), the simulator fails it at every seed.  It names the
    start-ordering check (docs/SIMULATOR.md §5): rank 1 counts ranks 4's and 5's early
    posts and touches a peer whose start nothing orders before its legs."""
    import nrtrewrite.lower as lower_mod
    monkeypatch.setattr(lower_mod, "entry_post_slots",
                        lambda groups, *a, **k: [0] * len(groups))
    out = lower_spec(_overlapping_subgraphs_spec(), tmp_path / "o")
    res = simulate_output(out, seed=seed)
    text = " ".join([res.error or ""] + [t.detail for t in res.triggers])
    assert not res.ok and "with no happens-before ordering after rank" in text, text


@pytest.mark.parametrize("algo", ["ring", None, "mesh", "intra_rdh"])
def test_alternating_tensor_and_data_parallel_groups_simulate_clean(algo, tmp_path):
    """Tensor-parallel groups {0..3}, {4..7} (sg00), data-parallel {0, 4} .. {3, 7} (sg01),
    then sg00's again (sg02): every rank meets the other family's peers in between, so the
    handshakes alternate between entry_post semaphores 9 and 176.  (KANGARING cannot take
    groups of 4 or 2 at LNC 2: enc_can_post_kangaring_operation wants rank_n > 4.)"""
    tp, dp = [[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 4], [1, 5], [2, 6], [3, 7]]
    tp_trigs = [("all_reduce", "bf16", "add", 4096), ("all_reduce", "bf16", "add", 4096, 1),
                ("reduce_scatter", "bf16", "add", 256)]
    dp_trigs = [("all_reduce", "bf16", "add", 1024), ("all_reduce", "bf16", "add", 1024, 1),
                ("all_reduce", "bf16", "add", 1024, 3)]
    spec = _subgraphs_spec([(tp, tp_trigs), (dp, dp_trigs),
                            (tp, [("all_reduce", "bf16", "add", 512),
                                  ("all_gather", "bf16", "add", 64, 1)])])
    out = lower_spec(spec, tmp_path / "o", algo=algo)
    for seed in range(2):
        assert_clean(out, seed=seed)


def _ssm_spec(ranks: int, in_place: bool) -> dict:
    vars_ = [{"name": "t", "type": "tmp-buf", "size": 2050},
             {"name": "i", "type": "input", "size": 2050},
             {"name": "o", "type": "output", "size": 2050}]
    body = {"dtype": "fp16", "op": "add", "num_elements": 1025,
            "src": "t" if in_place else "i", "dst": "t" if in_place else "o"}
    return {"header": {"pkg_version": 2, "name": "ssm", "lnc_size": 2},
            "subgraphs": [{"name": "sg00", "vars": vars_,
                           "replica_groups": [list(range(ranks))],
                           "engines": {"sp": [{"all_reduce": body}]}}]}


def test_single_step_mesh_in_place_over_more_ranks_than_a_leg_has_sources_matches(tmp_path):
    """SINGLE_STEP_MESH reduces all n inputs at once; more than MAX_SRC = 8 sources chain
    (the first link reduces 8, each next one its partial and 7 more). Chained through OUT, in
    place (OUT is the input) the 9th rank, whose own input comes after the first link, added
    its already reduced OUT again (the end-to-end fuzzer's mismatch, ADD, MAX and MIN), and
    until 2026-12-06 ``lower`` refused it (this test was then named ``..._is_refused``).
    What holds now: the chain adds up in an accumulator (channel-buffer slot 0) and
    only its last link writes OUT (docs/DESIGN.md "Mesh and RDH"), so in place over 9 ranks
    lowers and matches bit for bit, as 8 ranks in place and 9 out of place do; ``lower``
    exits 0 and ``explain`` shows the trigger SINGLE_STEP_MESH, no fallback."""
    assert_clean(lower_spec(_ssm_spec(9, True), tmp_path / "a", algo="single_step_mesh"))
    assert_clean(lower_spec(_ssm_spec(8, True), tmp_path / "b", algo="single_step_mesh"))
    assert_clean(lower_spec(_ssm_spec(9, False), tmp_path / "c", algo="single_step_mesh"))
    res = cli("lower", "-q", tmp_path / "a.neff", "--algo", "single_step_mesh", "-o",
              tmp_path / "o")
    assert res.exit_code == 0, res.output
    assert_clean(tmp_path / "o")
    res = cli("explain", tmp_path / "a.neff", "--algo", "single_step_mesh", "--json")
    low = json.loads(res.stdout)["triggers"][0]["lowered"]
    assert (low["algorithm"], low["fallback_reason"]) == ("SINGLE_STEP_MESH", None)


#: the dtypes the CCE reduce takes (docs/SELECTION.md: FP32 and the integers are refused)
SSM_DTYPES = ("bf16", "fp16", "fp32r", "fp8_e3", "fp8_e4", "fp8_e5")


def _ssm_in_place_spec(groups: list[list[int]], elems: int = 600) -> dict:
    """Every reduce ALU op on every dtype SINGLE_STEP_MESH takes, each an all-reduce in place
    on a tmp var of its own, over ``groups`` (each one node), then one out of place: 19
    triggers. ``elems`` elements each (the bytes of one message, ``elems`` x the dtype size,
    span two 64 KiB reduce pages from 32,769 bf16 elements)."""
    vars_, sp_ = [], []
    for k, (dtype, alu) in enumerate([(d, a) for d in SSM_DTYPES for a in ("add", "max", "min")]
                                     + [("bf16", "add")]):
        size = elems * ELEM[dtype]
        if k < 18:
            vars_.append({"name": f"t{k}", "type": "tmp-buf", "size": size})
            src = dst = f"t{k}"
        else:
            vars_ += [{"name": "i", "type": "input", "size": size},
                      {"name": "o", "type": "output", "size": size}]
            src, dst = "i", "o"
        sp_.append({"all_reduce": {"dtype": dtype, "op": alu, "num_elements": elems,
                                   "src": src, "dst": dst}})
    return {"header": {"pkg_version": 2, "name": "ssm", "lnc_size": 2},
            "subgraphs": [{"name": "sg00", "vars": vars_, "replica_groups": groups,
                           "engines": {"sp": sp_}}]}


@pytest.mark.parametrize("n, topology", [(9, None), (12, None), (16, None), (17, None),
                                         (32, None), (17, "trn2:nodes=2"),
                                         (64, "trn2:nodes=2")])
def test_single_step_mesh_in_place_over_more_than_8_ranks_matches_bit_for_bit(
        tmp_path, n, topology):
    """In place over 9 to 64 ranks (one trn2 node holds 64 at LNC 2: 64 ranks are taken as
    one group a node on two nodes, SINGLE_STEP_MESH being intra-node only), ADD, MAX and MIN
    on every dtype it takes: the simulator finds every rank's result equal to the reference
    bit for bit, no race and no deadlock (assert_clean), on two seeds (one over 32 ranks or
    more). Until
    2026-12-06 ``lower`` refused these (the chain through OUT read the rank's own input
    after overwriting it)."""
    groups = [list(range(n))] + ([list(range(64, 64 + n))] if topology else [])
    out = lower_spec(_ssm_in_place_spec(groups), tmp_path / "o", algo="single_step_mesh",
                     topology=topology)
    for seed in range(2 if n < 32 else 1):
        assert_clean(out, seed=seed)


def test_single_step_mesh_in_place_over_pages_matches_bit_for_bit(tmp_path):
    """Every 64 KiB page of the reduce is a chain of its own (docs/DESIGN.md): in place over
    17 ranks (3 links a page) with 32,769 elements: two pages of bf16 and fp16 (65,538
    bytes), three of fp32r (131,076 bytes), one of fp8; all match."""
    out = lower_spec(_ssm_in_place_spec([list(range(17))], 32769), tmp_path / "o",
                     algo="single_step_mesh")
    assert_clean(out)


def test_single_step_mesh_in_place_accumulates_in_channel_buffer_slot_0(tmp_path):
    """The layout (docs/DESIGN.md "Mesh and RDH"): in place over n > 8 ranks the chain's
    accumulator is channel-buffer slot 0, which each page's first link reads, so the
    trigger's scratch is the channel buffer alone, (n - 1) x the message, as out of place
    and in place over 8 ranks: 8 x 2050 = 16,400 bytes for 1025 fp16 elements over 9 ranks
    (the manifest's ``channel_buffer_bytes`` too). Per DMA page the reduce is 2 links (8
    sources, then the partial and the 9th): the first reads slot 0 among its sources and
    writes it, the second reads it and writes OUT; out of place both write OUT. (Until
    2026-12-06 the accumulator was one more message right past the channel buffer, slot
    n - 1, and such a trigger's scratch n x the message.)"""
    from nrtrewrite.cli.lower import load_and_plan
    from nrtrewrite.compose import ir as IR
    from nrtrewrite.compose.mesh import SINGLE_STEP_MESH, V_GW, V_OUT

    for n, in_place in ((9, True), (9, False), (8, True)):
        neff = tmp_path / f"m{n}{in_place}.neff"
        neff.write_bytes(assemble_spec(_ssm_spec(n, in_place)))
        plan, _ = load_and_plan(str(neff), topology=None, algo="single_step_mesh",
                                host_cc=False, no_verify_hash=False)
        (tp,) = plan.triggers
        assert tp.prepared.scratch_bytes == (n - 1) * 2050
        assert tp.prepared.manifest["mesh"]["channel_buffer_bytes"] == (n - 1) * 2050
        for rank in (0, n - 1):  # (the last rank's own input is in the last link)
            c, ir, _ = SINGLE_STEP_MESH.composed(plan.topology, tp.prepared.data, rank)
            red = ir[ir["reduce"] == 1]
            if n <= IR.MAX_SRC:
                assert red["n_src"].tolist() == [n] and red["dst_view"][0, 0] == V_OUT
                continue
            assert red["n_src"].tolist() == [8, 2]
            dst = red["dst_view"][:, 0].tolist()
            if not in_place:
                assert dst == [V_OUT, V_OUT] and red["src_view"][1, 0] == V_OUT
                continue
            acc = dst[0]
            assert dst[1] == V_OUT and red["src_view"][1, 0] == acc
            assert c.keys[acc - V_GW - 1] == ("cb", 0, 0)  # slot 0 of the channel buffer
            assert acc in red["src_view"][0, :8].tolist()  # a source of the first link


def test_single_step_mesh_in_place_over_9_ranks_fits_the_window_its_channel_buffer_fits(
        tmp_path):
    """A model that fills the core window (28 GiB below the SBUF window, docs/FORMATS.md
    §10) to within 8.5 MiB: a 1 MiB bf16 all-reduce in place over 9 ranks and a tmp var of
    28 GiB - 9.5 MiB. Its scratch is the channel buffer, 8 x 1 MiB (the accumulator is
    slot 0), so it fits and lowers, and simulates clean; until 2026-12-06 the accumulator
    was a ninth MiB past the channel buffer and lower refused the model for the window."""
    mib = 1 << 20
    spec = {"header": {"pkg_version": 2, "name": "ssm", "lnc_size": 2},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "t", "type": "tmp-buf", "size": mib},
                                    {"name": "big", "type": "tmp-buf",
                                     "size": (28 << 30) - 9 * mib - mib // 2}],
                           "replica_groups": [list(range(9))],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "bf16", "op": "add", "num_elements": mib // 2,
                               "src": "t", "dst": "t"}}]}}]}
    out = lower_spec(spec, tmp_path / "o", algo="single_step_mesh")
    regions = json.loads((out / "manifest.json").read_text())["memory"]["regions"]
    scratch = [r for r in regions if r["kind"] == "scratch"]
    assert [r["size"] for r in scratch] == [8 * mib]
    assert scratch[0]["offset"] + 8 * mib <= 28 << 30
    assert_clean(out)


def test_the_in_place_chain_through_out_put_back_is_caught(monkeypatch, tmp_path):
    """The accumulator guards the fix: with the chain through OUT again (the accumulator's
    rewrite of the reduce rows undone), in place over 9 ranks, ADD, the simulator finds
    rank 8's result wrong, and only rank 8's (its own input, in the second link, read after
    the first link overwrote it)."""
    import nrtrewrite.compose.mesh as mesh_mod
    monkeypatch.setattr(mesh_mod, "accumulate", lambda rows, sources, acc: None)
    res = simulate_output(lower_spec(_ssm_spec(9, True), tmp_path / "o",
                                     algo="single_step_mesh"), seed=0)
    assert not res.ok
    assert [t.status for t in res.triggers] == ["mismatch"], res.triggers
    assert res.triggers[0].detail.startswith("rank 8: "), res.triggers[0].detail
    assert "rank 7" not in res.triggers[0].detail


def test_a_seed_gives_the_same_run_however_the_output_is_named(tmp_path):
    """The scheduler woke the actors blocked on a semaphore from a set of objects, which
    iterates by address: the run a seed gave moved with the process's allocations. The
    end-to-end fuzzer's model (tests/data/overlapping_groups_fuzz5003.yaml, seed 5003: it
    raced then, the entry-handshake defect fixed since), lowered in the fuzzer's own folder, ran 3040
    legs at seed 0 given as ``out_ring`` and 6925 given by its absolute path (reproduced by
    hand, docs/RELIABILITY.md). Blocked actors are kept in the order they blocked now. The
    allocations that moved it depend on the folder's name, so this guard of the property
    passed here before the fix as well: it checks the property, not the old failure."""
    import subprocess
    import sys

    spec = Path(__file__).parent / "data" / "overlapping_groups_fuzz5003.yaml"
    assert cli("assemble", spec, "-o", tmp_path / "M.neff").exit_code == 0
    assert cli("lower", "-q", tmp_path / "M.neff", "-o", tmp_path / "out_ring", "--algo",
               "ring", "-j", "1").exit_code == 0
    probe = ("import sys, json; from nrtrewrite.simulate import simulate_output; "
             "r = simulate_output(sys.argv[1], seed=0); "
             "print(json.dumps([r.stats['legs_run'], r.error]))")
    runs = {p: subprocess.run([sys.executable, "-c", probe, p], capture_output=True, text=True,
                              cwd=tmp_path, check=True, timeout=300).stdout
            for p in ("out_ring", str(tmp_path / "out_ring"), "./out_ring")}
    assert len(set(runs.values())) == 1, runs


@pytest.mark.parametrize("model, extra, trigger", [
    # node64: every group spans devices 0 and 4 of node 0, a hop the 4x4 torus on 2 C2C
    # ports (+x, -x) has no chain of links for: refused at selection, at trigger 0
    ("node64.neff", ["--topology", "{tmp}/t.json"], 0),
    # ar2: one trigger, 2 of a device's 8 ranks: KANGARING refused at trigger 0
    ("ar2.neff", ["--algo", "kangaring"], 0),
    # c7c8: sg00's two all-reduces (0, 1), then sg01's all-gather (2): SINGLE_CYCLE_RING is
    # all-reduce only (SELECTION.md), so trigger 2 is the one refused
    ("c7c8.neff", ["--algo", "single_cycle_ring"], 2)])
def test_json_error_trigger_of_a_refusal_while_lowering_a_model(tmp_path, model, extra,
                                                                 trigger):
    """CLI.md "simulate" `--json`: a MODEL.neff refused while it is lowered (at selection,
    a forced --algo the trigger cannot take) names its trigger in `error_trigger`, as its
    line does (`trigger N:`); it was null."""
    (tmp_path / "t.json").write_text(json.dumps({"platform": "trn2",
                                                 "device": {"c2c_ports": 2}}))
    args = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    res = CliRunner().invoke(main, ["simulate", str(FIX / model), *args, "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and doc["ok"] is None
    assert f", trigger {trigger}: " in doc["error"]
    assert doc["error_trigger"] == trigger
    assert (doc["triggers"], doc["stats"]) == ([], {})


def _flip_rank0_writes(monkeypatch) -> None:
    """Every data move of rank 0 writes its next-to-last byte with its low bit flipped: a
    wrong element of known bytes (the review's fault)."""
    flip_writes_of(monkeypatch, lambda leg: leg.rank == 0)


def flip_writes_of(monkeypatch, chosen) -> None:
    """Every data move of a leg ``chosen(leg)`` holds writes its next-to-last byte with its
    low bit flipped (the low byte of the last fp16 or bf16 element): a wrong element of
    known bytes, the data's alone (the artifacts stay as lowered)."""
    from nrtrewrite.simulate import engine
    move = engine.Simulator._move

    def faulty(self, srcs, dsts, leg, acc, vc):
        if not chosen(leg):
            return move(self, srcs, dsts, leg, acc, vc)
        write = self._write

        def flipped(runs, data, acc, vc):
            data = data.copy()
            data[-2] ^= 1
            write(runs, data, acc, vc)
        self._write = flipped
        try:
            move(self, srcs, dsts, leg, acc, vc)
        finally:
            del self._write
    monkeypatch.setattr(engine.Simulator, "_move", faulty)


def _decoded(dtype: str, hex_bytes: str):
    """An element's value from its little-endian bytes, by the dtype's bit layout (bf16: the
    high half of an fp32; struct's IEEE half and single; a two's-complement int32)."""
    import struct
    raw = bytes.fromhex(hex_bytes)
    if dtype == "int32":
        return int.from_bytes(raw, "little", signed=True)
    if dtype == "bf16":
        raw = b"\0\0" + raw
    return repr(struct.unpack("<e" if dtype == "fp16" else "<f", raw)[0])


@pytest.mark.parametrize("op,dtype", [("all_reduce", "bf16"), ("all_reduce", "fp16"),
                                      ("all_gather", "fp32"), ("all_gather", "int32")])
def test_first_mismatch_values_are_the_exact_values_the_detail_shows(
        tmp_path, monkeypatch, op, dtype):
    """``first_mismatch.expected`` / ``got`` were ``str`` of the ml_dtypes / numpy scalar,
    rounded to the type's digits (bf16 ``"-2.51562"`` where the detail said ``-2.515625``),
    and an INT32's a string: now a float is the exact value's text, the detail's, and an
    integer a JSON integer (docs/CLI.md "simulate")."""
    out = lower_spec(coll_spec(op, dtype, 4, 5000), tmp_path / "o")
    _flip_rank0_writes(monkeypatch)
    res = cli("simulate", out, "--json")
    assert res.exit_code == 1, res.output
    t = json.loads(res.stdout)["triggers"][0]
    fm = t["first_mismatch"]
    assert fm["expected"] == _decoded(dtype, fm["expected_bytes"])
    assert fm["got"] == _decoded(dtype, fm["got_bytes"])
    assert fm["expected"] != fm["got"]
    assert (f"should be {fm['expected']} ({fm['expected_bytes']}), not {fm['got']} "
            f"({fm['got_bytes']})") in t["detail"]


def test_a_bf16_element_is_shown_exactly():
    """bf16 bits 0xC021: sign 1, exponent 128 (2^1), mantissa 1 + 33/128: -2.515625, which
    ml_dtypes' ``str`` rounds to ``-2.51562``."""
    import ml_dtypes
    from nrtrewrite.simulate.engine import element_value
    v = np.array([0xC021], np.uint16).view(ml_dtypes.bfloat16)[0]
    assert element_value(v) == "-2.515625"
    assert element_value(np.array([-7], np.int32)[0]) == -7


def test_simulate_model_names_its_output_without_the_temporary_folder(monkeypatch):
    """``simulate MODEL.neff``'s protocol error named the temporary folder it lowered into
    (``/tmp/nrtrewrite-simulate-XXXXXXXX/ar2.lowered/rank-0000: ...``), so two runs' lines
    and documents differed where docs/CLI.md says only the times and ``output`` do: the
    output is named from inside that folder, marked (review 49l: not to be taken for
    ``lower``'s own ``ar2.lowered`` beside the model), ``<temporary>/ar2.lowered/rank-0000``,
    in the JSON and in the text alike."""
    from nrtrewrite.simulate.program import RankDecoder

    def bad(self):  # a protocol error of rank 0's sem.bin, the first rank decoded
        raise self.fail("an injected fault", "sem.bin", 0, "ctrl")
    monkeypatch.setattr(RankDecoder, "decode_sems", bad)
    why = ("<temporary>/ar2.lowered/rank-0000: field ctrl, rank 0, artifact sem.bin, record 0: "
           "an injected fault")
    docs = []
    for _ in range(2):
        res = cli("simulate", FIX / "ar2.neff", "--json")
        assert res.exit_code == 1, res.output
        doc = json.loads(res.stdout)
        assert doc["error"] == why
        for key in ("load_seconds", "run_seconds"):
            del doc["stats"][key]
        del doc["output"]
        docs.append(doc)
    assert docs[0] == docs[1]
    res = cli("simulate", FIX / "ar2.neff")
    assert res.exit_code == 1 and f"protocol error: {why}\n" in res.stdout


def test_simulate_model_names_its_output_in_the_title_and_document_as_its_errors():
    """Fixer 49m: ``simulate MODEL.neff``'s table title and ``--json`` ``output`` named the
    temporary folder it lowered into (``simulate /tmp/nrtrewrite-simulate-XXXXXXXX/
    ar2.lowered (seed 0)``), removed by the time they were read, so two runs printed
    different text.  They name it as its errors do, from inside that folder: ``MODEL.lowered``
    as ``lower`` names it (docs/CLI.md "simulate"), marked, ``<temporary>/ar2.lowered``; two
    runs print the same text but for the times."""
    import re
    texts, docs = [], []
    for _ in range(2):
        res = cli("simulate", FIX / "ar2.neff")
        assert res.exit_code == 0, res.output
        assert res.stdout.splitlines()[0].rstrip() == "simulate <temporary>/ar2.lowered (seed 0)"
        texts.append(re.sub(r"load \d+\.\d+ s, run \d+\.\d+ s", "load T, run T", res.stdout))
        res = cli("simulate", FIX / "ar2.neff", "--json", "--seed", "3")
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert doc["output"] == "<temporary>/ar2.lowered"
        for key in ("load_seconds", "run_seconds"):
            del doc["stats"][key]
        docs.append(doc)
    assert texts[0] == texts[1] and "load T, run T" in texts[0]
    assert docs[0] == docs[1]


def test_simulate_model_names_a_refused_file_without_the_temporary_folder(monkeypatch):
    """An error of status 2 naming a file of the temporary output: the same name, on stderr
    and in the error document."""
    import nrtrewrite.cli.simulate as sim
    from nrtrewrite.errors import OutputError

    def refuse(out, *a, **kw):
        raise OutputError("cannot read: Permission denied", file=str(out / "rank-0001/cce.bin"))
    monkeypatch.setattr(sim, "_run", refuse)
    res = cli("simulate", FIX / "ar2.neff", "--json")
    assert res.exit_code == 2
    why = "<temporary>/ar2.lowered/rank-0001/cce.bin: cannot read: Permission denied"
    assert json.loads(res.stdout)["error"] == why
    assert res.stderr == f"nrtrewrite: error: {why}\n"


@pytest.mark.parametrize("op,alu,want", [("all_reduce", "max", "MAX"),
                                         ("reduce_scatter", "min", "MIN"),
                                         ("all_gather", None, None)])
def test_simulate_json_trigger_records_carry_the_alu_op(tmp_path, op, alu, want):
    """The selection depends on the ALU op (KANGARING reduces with ADD only): a trigger's
    record carries it as the manifest's ``alu_op`` (docs/FORMATS.md §1.1: ADD, MAX, MIN;
    null for an all-gather); until 2026-12-06 it had none."""
    spec = coll_spec(op, "bf16", 4, 4096, **({"alu": alu} if alu else {}))
    out = lower_spec(spec, tmp_path / "o")
    res = cli("simulate", out, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["triggers"][0]["alu_op"] == want
