"""`lower`, `dump`, `diff`, golden outputs, determinism, dtype rules, the rewritten NEFF."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.artifacts import decode_record, load_records
from nrtrewrite.diff import Report, compare, diff_outputs
from nrtrewrite.golden import lower_to, unpack
from nrtrewrite.neff.reader import read_model

from conftest import GOLDEN

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
#: the golden set (tests/conftest.py: every fixtures/*.yaml, the Makefile's ranks)
GOLDEN_RANKS = {name: ranks for name, ranks in GOLDEN.items() if ranks is not None}
FIXTURES = list(GOLDEN)


def cli(*args, check=False):
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite.cli.__main__", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT)
    if check and proc.returncode:
        raise AssertionError(proc.stderr)
    return proc


def golden_mismatch(name: str, groups) -> str:
    """The failure of :func:`test_fixture_matches_golden`: which side is the golden, the
    differences, and what to check before regenerating (until 2026-12-06 the differences
    then ``(make golden regenerates)``, which named neither side and pointed at a
    regeneration that packs a wrong lowering as readily as a right one).  ``groups``: each
    difference's lines, counted in ``diff``'s unit, the count ``nrtrewrite diff --strict``
    ends with (until 2026-12-07 the lines were counted, ``in 724 field(s)`` where the diff
    it recommends said ``168 difference(s)``)."""
    ranks = "".join(f" --rank {r}" for r in GOLDEN_RANKS.get(name, []))
    diffs = [d for lines in groups for d in lines]
    more = [f"... and {len(diffs) - 20} more line(s)"] if len(diffs) > 20 else []
    return "\n".join([
        f"fixtures/{name}.neff: the fresh lowering differs from its golden "
        f"fixtures/golden/{name}.tar.gz in {len(groups)} difference(s), as `nrtrewrite diff "
        f"--strict` counts them ({len(diffs)} line(s)); each line is "
        "FILE FIELD: GOLDEN != FRESH (A, the golden checked in; B, this code's lowering):",
        *(d.line() for d in diffs[:20]), *more,
        "Not meant: fix the code. Meant: check the fresh lowering before regenerating: "
        f"`nrtrewrite simulate fixtures/{name}.neff` must match every trigger, and "
        f"`nrtrewrite lower fixtures/{name}.neff{ranks} -o OUT` then `nrtrewrite diff --strict` of "
        "the extracted golden and OUT must show only the intended changes (docs/CLI.md "
        f"\"diff\"); then `make golden GOLDEN_FIXTURES={name}` and commit the archive "
        "(README.md \"Adding a fixture and its golden\")"])


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_matches_golden(name, tmp_path):
    out = lower_to(FIX / f"{name}.neff", tmp_path / "new", GOLDEN_RANKS.get(name))
    golden = unpack(FIX / "golden" / f"{name}.tar.gz", tmp_path / "golden")
    # strict, as CLI.md's CI recipe (`diff --strict`): FORMATS.md §1.1 fixes the manifests'
    # bytes too, so one of the same JSON in other bytes (or a stale checksum) is a difference
    groups = []  # (each difference's lines: diff's unit)
    compare(golden, out, Report(None, on_difference=lambda i, lines: groups.append(lines),
                                strict=True))
    assert not groups, golden_mismatch(name, groups)
    assert (out / "manifest.json").read_bytes() == (golden / "manifest.json").read_bytes()


def test_a_golden_mismatch_names_the_golden_side_and_what_to_check(tmp_path, monkeypatch):
    """Bug (review 51d): the golden test's failure was the differences then ``(make golden
    regenerates)``: it said neither which side was the golden nor to check the fresh
    lowering first, and pointed at a regeneration that packed whatever it lowered.  A golden
    with bit 0 of rank 0's first CCE descriptor flipped (word 0's first byte)."""
    real = unpack

    def tampered(golden, dest):
        out = real(golden, dest)
        cce = out / "rank-0000" / "cce.bin"
        data = bytearray(cce.read_bytes())
        data[0] ^= 1
        cce.write_bytes(bytes(data))
        return out
    monkeypatch.setattr(sys.modules[__name__], "unpack", tampered)
    with pytest.raises(AssertionError) as err:
        test_fixture_matches_golden("ar2", tmp_path)
    lines = [ln.strip() for ln in str(err.value).splitlines()]
    assert lines[0] == ("fixtures/ar2.neff: the fresh lowering differs from its golden "
                        "fixtures/golden/ar2.tar.gz in 1 difference(s), as `nrtrewrite diff "
                        "--strict` counts them (1 line(s)); each line is FILE FIELD: "
                        "GOLDEN != FRESH (A, the golden checked in; B, this code's lowering):")
    where, values = lines[1].split(": ")  # (the golden's value first: the flipped one)
    golden_w0, fresh_w0 = map(int, values.split(" != "))
    assert (where, golden_w0) == ("rank-0000/cce.bin[0] w0", fresh_w0 ^ 1)
    assert "nrtrewrite simulate fixtures/ar2.neff` must match every trigger" in lines[2]
    assert "nrtrewrite lower fixtures/ar2.neff -o OUT` then `nrtrewrite diff --strict`" in lines[2]
    assert lines[2].endswith("then `make golden GOLDEN_FIXTURES=ar2` and commit the archive "
                             "(README.md \"Adding a fixture and its golden\")")
    assert "make golden regenerates" not in str(err.value)


def test_a_golden_mismatch_counts_differences_as_diff_does(tmp_path, monkeypatch):
    """Bug (review 59l): the message counted lines, ``differs ... in 724 field(s)``, where
    the ``diff --strict`` it tells you to run said ``168 difference(s)``: one record is one
    difference however many of its fields differ.  Bit 23 of rank 0's first CCE
    descriptor's word 0 is ``meta`` (FORMATS §6, CLI.md's decoded keys: ``meta``, bit 23 of
    ``w0``), so flipping it changes two fields, ``w0`` and ``meta``, of one record: one
    difference, two lines."""
    real = unpack

    def tampered(golden, dest):
        out = real(golden, dest)
        cce = out / "rank-0000" / "cce.bin"
        data = bytearray(cce.read_bytes())
        data[2] ^= 0x80  # (bit 23 of the little-endian u32 w0 at byte 0)
        cce.write_bytes(bytes(data))
        return out
    monkeypatch.setattr(sys.modules[__name__], "unpack", tampered)
    with pytest.raises(AssertionError) as err:
        test_fixture_matches_golden("ar2", tmp_path)
    lines = [ln.strip() for ln in str(err.value).splitlines()]
    assert " in 1 difference(s), as `nrtrewrite diff --strict` counts them (2 line(s));" \
        in lines[0], lines[0]
    shown = [ln.split(":")[0] for ln in lines[1:3]]
    assert shown == ["rank-0000/cce.bin[0] w0", "rank-0000/cce.bin[0] meta"]


def test_golden_ignores_nrtrewrite_algo(tmp_path, monkeypatch):
    """Goldens are the default options' output: NRTREWRITE_ALGO=ring in the environment of
    `make golden` (or of the tests) changes nothing (before: mix8's golden was written with
    RING forced, and the golden tests failed under it)."""
    monkeypatch.setenv("NRTREWRITE_ALGO", "ring")
    out = lower_to(FIX / "mix8.neff", tmp_path / "new", None)
    assert os.environ["NRTREWRITE_ALGO"] == "ring"  # restored
    assert json.loads((out / "manifest.json").read_text())["options"]["algo"] is None
    golden = unpack(FIX / "golden" / "mix8.tar.gz", tmp_path / "golden")
    assert not diff_outputs(golden, out)


def test_the_shells_nrtrewrite_algo_does_not_reach_the_tests(tmp_path):
    """conftest.py drops it: the suite run under NRTREWRITE_ALGO=ring still compares
    against the default selection."""
    env = {**os.environ, "NRTREWRITE_ALGO": "ring"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "tests/test_lower.py::test_fixture_matches_golden[ar2]"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]


@pytest.mark.parametrize("name", ["two_node128", "sbuf", "mix8"])
def test_every_artifact_is_whole_records(name, tmp_path):
    """Each .bin is a flat array of its record size; manifests count and hash them."""
    import hashlib
    from nrtrewrite.emit.formats import ARTIFACTS
    out = lower_to(FIX / f"{name}.neff", tmp_path / "out", GOLDEN_RANKS.get(name, [0, 1]))
    for rdir in out.glob("rank-*"):
        man = json.loads((rdir / "manifest.json").read_text())
        for fname, (dtype, _s) in ARTIFACTS.items():
            data = (rdir / fname).read_bytes()
            assert len(data) % dtype.itemsize == 0, (rdir.name, fname)
            assert man["files"][fname]["records"] * dtype.itemsize == len(data)
            assert man["files"][fname]["sha256"] == hashlib.sha256(data).hexdigest()


def test_lowering_is_deterministic(tmp_path):
    a = lower_to(FIX / "mix8.neff", tmp_path / "a", None)
    b = lower_to(FIX / "mix8.neff", tmp_path / "b", None)
    # the union of both trees: an entry only B has differs too (until 2026-12-06 only A's
    # entries were compared)
    names = {p.relative_to(root).as_posix() for root in (a, b) for p in root.rglob("*")}
    for rel in sorted(names):
        pa, pb = a / rel, b / rel
        assert pa.is_file() == pb.is_file() and pa.is_dir() == pb.is_dir(), rel
        if pa.is_file():
            assert pa.read_bytes() == pb.read_bytes(), rel


def test_parallel_lowering_is_byte_identical(tmp_path):
    r1 = cli("lower", "-q", "-j", "1", FIX / "groups.neff", "-o", tmp_path / "serial", check=True)
    r2 = cli("lower", "-q", "-j", "2", FIX / "groups.neff", "-o", tmp_path / "pool", check=True)
    assert r1.returncode == r2.returncode == 0
    assert diff_outputs(tmp_path / "serial", tmp_path / "pool") == []
    assert ((tmp_path / "serial" / "manifest.json").read_bytes()
            == (tmp_path / "pool" / "manifest.json").read_bytes())


def test_diff_cli_names_the_field(tmp_path):
    a = lower_to(FIX / "ar2.neff", tmp_path / "a", None)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    assert cli("diff", a, b).returncode == 0
    spad = b / "rank-0001" / "spad.bin"
    data = bytearray(spad.read_bytes())
    before = data[1] & 0xF
    data[1] ^= 0x02  # algo_type: e.g. RING -> MESH
    spad.write_bytes(bytes(data))
    proc = cli("diff", a, b)
    assert proc.returncode == 1
    assert f"rank-0001/spad.bin[0] algo_type: {before} != {before ^ 2}" in proc.stdout
    assert cli("diff", a, tmp_path / "missing").returncode == 2


def test_dump_spad_one_entry_per_trigger_per_rank(tmp_path):
    out = lower_to(FIX / "groups.neff", tmp_path / "out", None)
    man = json.loads((out / "manifest.json").read_text())
    for rank in man["world"]:
        spad = load_records(out / f"rank-{rank:04d}" / "spad.bin")
        mine = [t for t in man["triggers"] if rank in t["replica_group"]]
        assert len(spad) == len(mine)
        for rec, trig in zip(spad, mine):
            d = decode_record("spad.bin", rec)
            assert d["cc_op"] == 1 and d["algo_type_name"] == trig["algorithm"]
            assert d["trigger_next"] == 0 and d["ring_wait_complete"] == 1
            assert d["reporter"] == int(rank == min(trig["replica_group"]))
            if trig["algorithm"] == "RING":
                assert d["channel_list"] == sum(1 << c["channel"] for c in trig["channels"])
            elif "mesh" in trig:  # mesh entries: the event-window overlay (FORMATS §2)
                assert (d["sema_shift_offset"], d["sema_mask"]) == (
                    trig["mesh"]["sema_shift_offset"], trig["mesh"]["sema_mask"])
                assert "channel_list" not in d
    proc = cli("dump", "--spad", out, "--rank", 0, "--json")
    doc = json.loads(proc.stdout)
    assert doc["ranks"][0]["rank_dir"] == "rank-0000"
    assert all(r["cc_op"] == 1 for r in doc["ranks"][0]["files"]["spad.bin"])


@pytest.mark.parametrize("spec, dtype", [("bad/fp32_allreduce", "FP32"),
                                         ("bad/int32_allreduce", "INT32")])
def test_reduce_in_fp32_or_int32_is_refused(spec, dtype, tmp_path):
    proc = cli("lower", FIX / f"{spec}.neff", "-o", tmp_path / "out")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert f"in {dtype} cannot be lowered" in lines[0] and "trigger 0" in lines[0]
    # named as the reader names a field: the 0xC8 word at instruction 0, dtype its byte 14
    assert lines[0].startswith(f"nrtrewrite: error: {FIX / spec}.neff: member sg00/sp.bin, "
                               "subgraph sg00, stream sp, instruction 0, offset 0xe, field "
                               f"dtype, trigger 0: ALLREDUCE in {dtype} cannot be lowered"), lines[0]
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.iterdir())  # no partial output


def test_int32_allgather_lowers(tmp_path):
    proc = cli("lower", "-q", FIX / "int32_allgather.neff", "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [t["dtype"] for t in man["triggers"]] == ["INT32"]
    assert load_records(tmp_path / "out" / "rank-0000" / "cce.bin").size == 0


#: The two triggers of the mixed-batch reproducer (docs/RELIABILITY.md §6): a bf16 all-reduce
#: (a CCE reduce) and an all-gather (a copy) of ``ids`` in a dtype the CCE cannot reduce.
MIXED = {"ar": {"all_reduce": {"dtype": "bf16", "op": "add", "src": "x_in", "dst": "x_out",
                               "bytes": 65536}},
         "ag": {"all_gather": {"dtype": "int32", "src": "ids_in", "dst": "ids_out",
                               "bytes": 4096}}}


def mixed_spec(triggers, copy_dtype: str = "int32") -> dict:
    """The triggers named by ``triggers`` (keys of MIXED), in order, on one group of 8: one
    emit batch holds them all.  The vars are the same whatever the triggers, so a trigger's
    buffers are at the same addresses in each model."""
    body = []
    for t in triggers:
        trig = json.loads(json.dumps(MIXED[t]))
        if t == "ag":
            trig["all_gather"]["dtype"] = copy_dtype
        body.append(trig)
    return {
        "header": {"pkg_version": 2, "name": "mixed", "lnc_size": 1},
        "subgraphs": [{
            "name": "sg00",
            "vars": [{"name": "x_in", "type": "input", "size": 65536},
                     {"name": "x_out", "type": "output", "size": 65536},
                     {"name": "ids_in", "type": "input", "size": 4096},
                     {"name": "ids_out", "type": "output", "size": 32768}],
            "replica_groups": [list(range(8))],
            "engines": {"sp": body, "pool": ["nop"]},
        }],
    }


def _entry_records(rank_dir: Path, trigger: int) -> dict[str, bytes]:
    """The records of one trigger's entry on one rank: its legs (without the fields that
    place it in the program: trigger, spad_index, the *_first indices) and the 0xBF words,
    data BDs, CCE descriptors and semaphore BDs its legs name."""
    from numpy.lib.recfunctions import repack_fields
    legs = load_records(rank_dir / "legs.bin")
    legs = legs[legs["trigger"] == trigger]
    assert legs.size
    out = {}
    for part, file in (("sb2sb", "sb2sb.bin"), ("dma", "dma.bin"), ("cce", "cce.bin"),
                       ("sem", "sem.bin")):
        recs = load_records(rank_dir / file)
        out[file] = b"".join(recs[a:a + c].tobytes() for a, c in
                             zip(legs[f"{part}_first"].tolist(), legs[f"{part}_count"].tolist()))
    keep = [f for f in legs.dtype.names
            if f not in ("trigger", "spad_index") and not f.endswith("_first")]
    out["legs.bin"] = repack_fields(legs[keep]).tobytes()
    return out


def test_mixed_batch_reproducer_lowers_and_simulates_through_the_cli(tmp_path):
    """The reproducer as reported: `lower` crashed with a traceback (`ValueError: INT32 is
    not CCE-reducible`) building CCE patterns for the copy-only all-gather too."""
    from nrtrewrite.neff.assembler import assemble_spec
    neff = tmp_path / "crash1.neff"
    neff.write_bytes(assemble_spec(mixed_spec(["ar", "ag"])))
    proc = cli("lower", "-q", neff, "-o", tmp_path / "out")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    sim = cli("simulate", "--json", tmp_path / "out")
    assert sim.returncode == 0, sim.stderr
    verdicts = [t["status"] for t in json.loads(sim.stdout)["triggers"]]
    assert verdicts == ["match", "match"]


@pytest.mark.parametrize("copy_dtype, order, algo", [
    ("int32", ("ar", "ag"), "ring"), ("int32", ("ag", "ar"), "ring"),
    ("int32", ("ar", "ag"), "mesh"), ("int32", ("ag", "ar"), "mesh"),
    ("fp32", ("ar", "ag"), "ring"), ("fp32", ("ag", "ar"), "mesh"),
])
def test_a_reduce_and_a_copy_the_cce_cannot_reduce_in_one_batch(tmp_path, copy_dtype, order,
                                                                  algo):
    """A copy takes any dtype (SEED-NOTES "plain FP32 and integers"): beside a reduce in the
    same emit batch it lowers, each entry's records are those of its trigger lowered alone
    (in a model of its own), and the whole simulates clean.  Hand-computed from the bit
    layout (FORMATS §6): every CCE descriptor of the bf16 ADD is W1 = op 0 | in 6 << 8 |
    out 6 << 12 | acc 0xB << 16 | valid 1 << 25 = 0x020B6600, | 0x80 on a tile's last
    source; the all-gather has no CCE descriptor and its 0xBF words carry its own code."""
    from test_simulate import assert_clean, lower_spec
    both = lower_spec(mixed_spec(order, copy_dtype), tmp_path / "both", algo=algo)
    assert_clean(both)
    alone = {t: lower_spec(mixed_spec([t], copy_dtype), tmp_path / t, algo=algo)
             for t in order}
    ar, ag = order.index("ar"), order.index("ag")
    io = {"int32": 0x8, "fp32": 0xA}[copy_dtype]
    for rank in range(8):
        rdir = both / f"rank-{rank:04d}"
        for trigger, t in enumerate(order):
            got = _entry_records(rdir, trigger)
            want = _entry_records(alone[t] / f"rank-{rank:04d}", 0)
            for file in want:
                assert got[file] == want[file], (rank, t, file)
        legs = load_records(rdir / "legs.bin")
        cce = load_records(rdir / "cce.bin")
        assert cce.size and not legs["cce_count"][legs["trigger"] == ag].any()
        assert set((cce["w1"].astype(np.int64) & ~0x80).tolist()) == {0x020B6600}
        words = load_records(rdir / "sb2sb.bin")
        for trigger, code in ((ar, 0x6), (ag, io)):
            mine = legs[(legs["trigger"] == trigger) & (legs["sb2sb_count"] > 0)]
            idx = np.concatenate([np.arange(a, a + c) for a, c in
                                  zip(mine["sb2sb_first"].tolist(), mine["sb2sb_count"].tolist())])
            assert set(words["in_dtype"][idx].tolist()) == {code}


def test_rewritten_neff_keeps_everything_but_the_triggers(tmp_path):
    src = FIX / "c7c8.neff"
    out = lower_to(src, tmp_path / "out", None)
    before = read_model(src)
    after = read_model(out / "c7c8.neff")
    assert after.triggers == []
    assert [m for m in before.members] == [m for m in after.members]
    trig_words = {(t.subgraph, t.engine, t.index + w) for t in before.triggers
                  for w in range(t.num_words)}
    for sg_b, sg_a in zip(before.subgraphs, after.subgraphs):
        for eng in sg_b.engines:
            sb, sa = sg_b.streams[eng], sg_a.streams[eng]
            assert len(sb) == len(sa)
            for i in range(len(sb) // 64):
                wb, wa = sb[i * 64:(i + 1) * 64], sa[i * 64:(i + 1) * 64]
                if (sg_b.name, eng, i) in trig_words:
                    assert wa[0] == 0xA2 and wa[1] == 16 and wa[4:12] == wb[4:12]
                else:
                    assert wa == wb


def test_output_exists_needs_force(tmp_path):
    out = tmp_path / "out"
    assert cli("lower", "-q", FIX / "ar2.neff", "-o", out).returncode == 0
    marker = out / "rank-0000" / "spad.bin"
    before = marker.read_bytes()
    proc = cli("lower", "-q", FIX / "ar2.neff", "-o", out)
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert marker.read_bytes() == before
    assert cli("lower", "-q", "--force", FIX / "mix8.neff", "-o", out).returncode == 0
    assert len(list(out.glob("rank-*"))) == 8
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary leftovers


def test_single_rank(tmp_path):
    proc = cli("lower", "-q", FIX / "mix8.neff", "--rank", 3, "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in (tmp_path / "out").glob("rank-*")] == ["rank-0003"]
    proc = cli("lower", "-q", FIX / "mix8.neff", "--rank", 99, "-o", tmp_path / "o2")
    assert proc.returncode == 2 and "rank 99" in proc.stderr


def test_input_is_never_modified(tmp_path):
    src = tmp_path / "ro.neff"
    shutil.copy(FIX / "mix8.neff", src)
    os.chmod(src, 0o444)
    before = src.read_bytes()
    assert cli("lower", "-q", src).returncode == 0
    assert src.read_bytes() == before
    assert (tmp_path / "ro.lowered" / "manifest.json").exists()


def test_schedule_json_shape():
    proc = cli("schedule", FIX / "ar2.neff", "--rank", 1, "--json", "--algo", "ring")
    doc = json.loads(proc.stdout)
    assert doc["rank"] == 1
    op = doc["ops"][0]
    assert op["algorithm"] == "RING"
    ch = op["channels"][0]
    assert ch["user_ranks"][0] == 1
    leaves = [(s["leaf"], s["half"]) for s in ch["steps"] if s["group"] == 0]
    # n = 2: send, final reduce (device path), direct_recv; H0 then H1
    assert leaves == [("send", 0), ("send", 1), ("recv_reduce_copy", 0),
                      ("direct_copy_send", 0), ("recv_reduce_copy", 1),
                      ("direct_copy_send", 1), ("direct_recv", 0), ("direct_recv", 1)]
    assert {s["phase"] for s in ch["steps"]} == {"reduce_scatter", "all_gather"}
    # k: the send step carries user_ranks[n-1] (the predecessor's chunk), the final reduce self
    assert ch["steps"][0]["k"] == ch["user_ranks"][-1] and ch["steps"][2]["k"] == 1


def test_policy_lowerable_matches_the_composer_registry():
    """The selection policy never picks an engine no composer lowers (and vice versa)."""
    from nrtrewrite.compose.algorithm import lowerable
    from nrtrewrite.policy import DEFAULT_POLICY
    assert DEFAULT_POLICY.lowerable == lowerable()


def test_an_entry_without_legs_emits_nothing():
    """A composer may produce an entry with nothing to move: a SPAD entry with no channel."""
    from nrtrewrite.compose import ir as IR
    from nrtrewrite.emit.legs import RankBuilder
    from nrtrewrite.lower import LowerOptions, _emit_batch, plan_lowering

    plan = plan_lowering(read_model(FIX / "ar2.neff"), LowerOptions())
    tp = plan.triggers[0]
    spec = tp.algorithm.entries(plan, tp, 0)[0]
    spec.ir = IR.empty(0)
    builder = RankBuilder(0)
    (entry,) = _emit_batch(builder, plan, [(tp, spec)], 0, 0, 0, {tp.trigger.subgraph: 0})
    assert entry["channels"] == [] and entry["channel_list"] == 0
    assert all(not parts for parts in builder.finish().values())


@pytest.mark.parametrize("name", ["groups", "mix8", "c7c8", "two_node128"])
def test_leader_spad_index_counts_the_leaders_earlier_entries(name):
    """The rewritten NEFF's trigger words name each trigger's first SPAD entry on its
    group's leader: the SPAD entries (one per trigger, one per leg of a HIER chain) of every
    earlier trigger whose replica group holds that leader."""
    from nrtrewrite.bundle import _leader_spad_index
    from nrtrewrite.lower import LowerOptions, plan_lowering

    plan = plan_lowering(read_model(FIX / f"{name}.neff"), LowerOptions())
    got = _leader_spad_index(plan)
    for i, tp in enumerate(plan.triggers):
        want = sum(len(e.prepared.data.legs) if e.alg.name == "HIER" else 1
                   for e in plan.triggers[:i] if tp.leader in e.group)
        assert got[tp.trigger.ordinal] == want
    assert len(got) == len(plan.triggers)


@pytest.mark.parametrize("args, ranks, cores, workers", [
    (["-j", "100000"], [], 2, 2),          # never more than the cores (8 ranks)
    (["-j", "100000"], ["--rank", "3"], 2, 2),  # one rank: a second process composes ahead
    (["-j", "8"], ["--rank", "1", "--rank", "2", "--rank", "1"], 16, 2),  # 2 distinct ranks
    (["-j", "2"], [], 1, 2),               # -j 2 on one core still means two processes
    ([], [], 1, 1),                        # the default: the cores
    (["-j", "1"], [], 16, 1),
])
def test_jobs_are_capped_and_checked(tmp_path, monkeypatch, args, ranks, cores, workers):
    """``lower -j N`` never starts more processes than the cores (at least 2) nor than the
    ranks it lowers (docs/CLI.md); a rank given twice is lowered once."""
    from click.testing import CliRunner

    from nrtrewrite.cli import lower as cli_lower
    from nrtrewrite.cli import main

    seen = {}

    def fake_write_output(plan, out, *, ranks, force, workers, progress=None, warn=None,
                          on_placed=None, before_placing=None):
        seen.update(ranks=ranks, workers=workers)

    monkeypatch.setattr(cli_lower, "write_output", fake_write_output)
    monkeypatch.setattr(cli_lower, "usable_cores", lambda: cores)
    res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "mix8.neff"), "-o",
                                    str(tmp_path / "o"), *args, *ranks],
                             standalone_mode=False)
    assert res.exception is None, res.output
    assert seen["workers"] == workers
    if ranks:
        assert seen["ranks"] == list(dict.fromkeys(int(r) for r in ranks[1::2]))


@pytest.mark.parametrize("args, says", [(["-j", "0"], "0 is not in the range x>=1"),
                                        (["-j", "-3"], "-3 is not in the range x>=1"),
                                        (["-o", ""], "an empty path")])
def test_bad_jobs_and_empty_output_are_usage_errors(tmp_path, args, says):
    """Refused before anything is written (a model copied into tmp_path: the README's main
    job leaves fixtures/mix8.lowered/ in a checkout, which this must not depend on)."""
    model = tmp_path / "mix8.neff"
    shutil.copy(FIX / "mix8.neff", model)
    res = cli("lower", "-q", model, *args)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and says in res.stderr, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mix8.neff"]


def test_every_kick_word_is_the_documented_word(tmp_path):
    """FORMATS.md §9: each trigger word (0xD9 and 0xDA: two words) becomes a TOPSP_KICK word:
    a2 10 00 00, bytes 4..11 of the original word, u16 spad_index (the trigger's first SPAD
    entry on its group's leader: the first of its `entries` in the leader's rank manifest,
    FORMATS.md §1.2), u16 word (0, or 1 for the former 0xDA word), u32 trigger ordinal, 44
    zero bytes; the file is exactly 1024 + data_size bytes, the header hash (pkg_version 2:
    MD5 of the payload in hash[0:16], NEFF-LIKE.md §1) recomputed."""
    import hashlib

    out = lower_to(FIX / "sbuf.neff", tmp_path / "out", [0])
    before = read_model(FIX / "sbuf.neff")
    after = read_model(out / "sbuf.neff")
    man = json.loads((out / "manifest.json").read_text())
    entries = json.loads((out / "rank-0000" / "manifest.json").read_text())["entries"]
    assert len(man["triggers"]) == 4 and {t["leader"] for t in man["triggers"]} == {0}
    firsts = set()
    for t in man["triggers"]:
        first = [e["trigger"] for e in entries].index(t["trigger"])
        firsts.add(first)
        sb = before.subgraph(t["subgraph"]).streams[t["engine"]]
        sa = after.subgraph(t["subgraph"]).streams[t["engine"]]
        assert sb[t["index"] * 64] == 0xD9 and sb[(t["index"] + 1) * 64] == 0xDA
        for w in (0, 1):
            at = (t["index"] + w) * 64
            want = (bytes([0xA2, 16, 0, 0]) + sb[at + 4:at + 12] + first.to_bytes(2, "little")
                    + w.to_bytes(2, "little") + t["trigger"].to_bytes(4, "little") + bytes(44))
            assert sa[at:at + 64] == want, (t["trigger"], w)
    assert len(firsts) == 4  # every trigger its own first entry: spad_index is not constant
    data = (out / "sbuf.neff").read_bytes()
    data_size = int.from_bytes(data[16:24], "little")
    assert int.from_bytes(data[0:8], "little") == 2 and len(data) == 1024 + data_size
    assert data[172:188] == hashlib.md5(data[1024:]).digest() and data[188:204] == bytes(16)


def test_a_model_only_beginning_like_an_output_entry_keeps_its_name(tmp_path):
    """FORMATS.md §1: only a model named like one of the folder's own entries (manifest.json,
    or rank- followed by digits) gets .neff added; rank-0000x.neff is not such a name and is
    written under its own name, which output_neff.name records."""
    src = tmp_path / "rank-0000x.neff"
    shutil.copy(FIX / "ar2.neff", src)
    out = lower_to(src, tmp_path / "out", [0])
    assert json.loads((out / "manifest.json").read_text())["output_neff"]["name"] == src.name
    assert (out / src.name).is_file()


def test_manifest_input_bytes_is_the_whole_file_without_a_given_size(tmp_path):
    """FORMATS.md §1.1: input.bytes is the size of the whole input file; a plan made without
    the file's size counts header (1024 bytes) and payload (fixtures have no trailing zero
    bytes, so that is the file's size)."""
    from nrtrewrite.bundle import write_output
    from nrtrewrite.lower import LowerOptions, plan_lowering

    src = FIX / "ar2.neff"
    plan = plan_lowering(read_model(src), LowerOptions(), input_sha256="0" * 64)
    out = write_output(plan, tmp_path / "out", ranks=[0], workers=1)
    man = json.loads((out / "manifest.json").read_text())
    assert man["input"]["bytes"] == src.stat().st_size


@pytest.mark.parametrize("bad", ["a/../../evil", "a/../b"])
def test_golden_unpack_refuses_a_dotdot_member_before_extracting_anything(tmp_path, bad):
    """nrtrewrite/golden.py ``unpack``: regular files and folders only, no absolute or ``..``
    member name; a golden holding one is refused as a whole (ValueError naming the member),
    nothing of it extracted."""
    import io
    import tarfile

    tgz = tmp_path / "g.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        for name in ("ok.txt", bad):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    dest = tmp_path / "dest"
    with pytest.raises(ValueError, match="unexpected member"):
        unpack(tgz, dest)
    assert list(dest.rglob("*")) == []


def test_lower_warns_of_an_algo_clause_that_applies_to_nothing(tmp_path):
    """docs/SELECTION.md §8: a clause that governs nothing in the model is not an error, but
    `lower` warns (`nrtrewrite: warning: M.neff: --algo clause ... applies to nothing in this
    model: it has no ALLGATHER collective`), with `--quiet` too; exit 0. ar2: one all-reduce."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main

    model = str(FIX / "ar2.neff")
    res = CliRunner().invoke(main, ["lower", "-q", model, "-o", str(tmp_path / "o"), "-j", "1",
                                    "--algo", "allgather:ring"])
    assert res.exit_code == 0, res.output
    assert res.stderr == (f"nrtrewrite: warning: {model}: --algo clause 'allgather:ring' "
                          "applies to nothing in this model: it has no ALLGATHER collective\n")


def test_an_empty_output_is_refused_before_the_model_is_read(tmp_path):
    """`-o ""` is the paths' own error: given before the model is read, planned and its
    warnings printed (a 1000-trigger model was planned for a second first)."""
    junk = tmp_path / "junk.neff"
    junk.write_bytes(b"not a NEFF at all")
    res = cli("lower", junk, "-o", "", "--no-verify-hash")
    assert res.returncode == 2
    assert res.stderr == ("nrtrewrite lower: error: Invalid value for '-o' / '--output': an "
                          "empty path; leave -o out for the default (<model>.lowered) (see "
                          "'nrtrewrite lower --help')\n")


@pytest.mark.parametrize("algo", ["ring", None])
def test_the_leader_is_the_smallest_rank_of_a_group_listed_out_of_order(tmp_path, algo):
    """FORMATS §1.1 / §3: a trigger's ``leader`` is its replica group's smallest rank, the
    one rank whose entries are the reporter.  A bf16 all-reduce of 32 elements over the group
    written ``[1, 0]``: the manifest keeps the group as written and leads it with rank 0; only
    rank 0's entries report; it simulates as a match (RING, and the default policy's engine)."""
    from test_simulate import assert_clean, lower_spec
    spec = {"header": {"pkg_version": 2, "name": "m", "lnc_size": 1},
            "subgraphs": [{"name": "sg00", "replica_groups": [[1, 0]],
                           "vars": [{"name": "a", "type": "input", "size": 64},
                                    {"name": "b", "type": "output", "size": 64}],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "bf16", "src": "a", "dst": "b", "num_elements": 32,
                               "op": "add"}}]}}]}
    out = lower_spec(spec, tmp_path / "o", algo=algo)
    (t,) = json.loads((out / "manifest.json").read_text())["triggers"]
    assert (t["replica_group"], t["leader"]) == ([1, 0], 0)
    for rank, reporter in ((0, 1), (1, 0)):
        entries = json.loads((out / f"rank-{rank:04d}" / "manifest.json").read_text())["entries"]
        assert entries and {e["reporter"] for e in entries} == {reporter}
    assert_clean(out)
