"""The output folder's bytes and durability (nrtrewrite/bundle.py; docs/FORMATS.md §1,
docs/RELIABILITY.md §4), with every expected value worked out here: the manifests' text
from ``json.dumps`` and the layout FORMATS §1.1 states, every sha256 recomputed with
hashlib from the files, every file and folder fsynced before the rename."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nrtrewrite import bundle
from nrtrewrite.bundle import write_output
from nrtrewrite.emit.formats import ARTIFACTS
from nrtrewrite.errors import OutputError
from nrtrewrite.golden import lower_to
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.reader import read_model

from conftest import dead_pid

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lower_cli(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("NRTREWRITE_ALGO", None)
    return subprocess.run([sys.executable, "-m", "nrtrewrite.cli.__main__", "lower", "-q",
                           *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def top_text(value, level: int = 0) -> str:
    """FORMATS §1.1's layout: ``json.dumps(doc, indent=1, sort_keys=True)``, except that
    an object or array nested 7 levels deep or deeper is written on one line as
    ``json.dumps(value, sort_keys=True, separators=(", ", ": "))``."""
    if isinstance(value, (dict, list)) and level >= 7:
        return json.dumps(value, sort_keys=True, separators=(", ", ": "))
    pad = " " * (level + 1)
    if isinstance(value, dict) and value:
        items = [f"{pad}{json.dumps(k)}: {top_text(value[k], level + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + " " * level + "}"
    if isinstance(value, list) and value:
        items = [pad + top_text(v, level + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * level + "]"
    return json.dumps(value)


def check_output(out: Path, model: Path, ranks: list[int], world: list[int]) -> None:
    """Every documented byte-level promise of FORMATS §1 about ``out``."""
    raw = (out / "manifest.json").read_bytes()
    top = json.loads(raw)
    assert raw == (top_text(top) + "\n").encode()  # the layout, and the final newline
    data = model.read_bytes()
    assert top["input"] == {"name": model.name, "sha256": sha(data), "bytes": len(data)}
    neff = out / top["output_neff"]["name"]
    assert top["output_neff"]["name"] == model.name
    assert top["output_neff"]["sha256"] == sha(neff.read_bytes())
    assert top["world"] == world
    assert top["ranks"] == ranks  # ascending: the folders this output has
    assert [r["rank"] for r in top["topology"]["ranks"]] == world  # every rank of the world
    folders = [f"rank-{r:04d}" for r in ranks]
    assert sorted(p.name for p in out.iterdir()) == sorted([*folders, "manifest.json",
                                                           neff.name])
    assert top["rank_manifests"] == {
        f: sha((out / f / "manifest.json").read_bytes()) for f in folders}
    for r, folder in zip(ranks, folders):
        man_raw = (out / folder / "manifest.json").read_bytes()
        man = json.loads(man_raw)
        assert man_raw == (json.dumps(man, indent=1, sort_keys=True) + "\n").encode()
        assert man["rank"] == r
        assert sorted(os.listdir(out / folder)) == sorted([*ARTIFACTS, "manifest.json"])
        for name, (dtype, _s) in ARTIFACTS.items():
            body = (out / folder / name).read_bytes()
            assert man["files"][name] == {"records": len(body) // dtype.itemsize,
                                          "bytes": len(body), "sha256": sha(body)}


def test_the_output_is_the_documented_bytes(tmp_path):
    """A flat model through the CLI (all ranks) and a HIER one (its manifest has lines of
    nested depth 7: one-line plans and groups) for some ranks: the manifests are the
    documented text with their final newline, and every hash is of the file's bytes."""
    model = FIX / "mix8.neff"
    out = tmp_path / "mix8"
    assert lower_cli(model, "-o", out).returncode == 0
    world = list(range(8))
    check_output(out, model, world, world)
    model = FIX / "two_node128.neff"
    out = lower_to(model, tmp_path / "hier", [127, 0, 64])
    check_output(out, model, [0, 64, 127], list(range(128)))


def test_the_order_of_the_ranks_asked_for_changes_no_byte(tmp_path):
    """``--rank 3 --rank 1`` and ``--rank 1 --rank 3`` ask for the same output: the same bytes,
    the manifest's ``ranks`` ascending."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert lower_cli(FIX / "mix8.neff", "--rank", 3, "--rank", 1, "-o", a).returncode == 0
    assert lower_cli(FIX / "mix8.neff", "--rank", 1, "--rank", 3, "-o", b).returncode == 0
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert json.loads((a / "manifest.json").read_text())["ranks"] == [1, 3]


def test_a_rank_named_twice_through_the_api_is_lowered_once(tmp_path):
    """``write_output(ranks=[3, 1, 3])`` is ranks 1 and 3, as the CLI's ``--rank`` list is
    (it raised "File exists" making rank 3's folder a second time): the same bytes as
    ``ranks=[1, 3]``."""
    plan = plan_lowering(read_model(FIX / "mix8.neff"), LowerOptions())
    a, b = tmp_path / "a", tmp_path / "b"
    write_output(plan, a, ranks=[3, 1, 3], workers=1)
    write_output(plan, b, ranks=[1, 3], workers=1)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert json.loads((a / "manifest.json").read_text())["ranks"] == [1, 3]


@pytest.mark.parametrize("workers", [1, 2])
def test_every_file_and_folder_is_fsynced_before_the_rename(tmp_path, monkeypatch, workers):
    """Whatever fsyncs it (the rank files on the syncer's thread, the NEFF and the manifest
    as they are written, the folders), every file and folder of the output is fsynced
    before the rename into place, each rank folder after its files and the output's own
    folder after all of them; the parent folder after the rename (the rename made
    durable)."""
    events = []
    real_fsync, real_rename = os.fsync, bundle._rename_noreplace

    def fsync(fd):
        real_fsync(fd)
        events.append(("sync", os.readlink(f"/proc/self/fd/{fd}")))
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(bundle, "_rename_noreplace",
                        lambda a, b: (events.append(("rename", str(a))), real_rename(a, b)))
    out = write_output(plan_lowering(read_model(FIX / "mix8.neff"), LowerOptions()),
                       tmp_path / "out", ranks=None, workers=workers)
    (rename,) = [i for i, (kind, _p) in enumerate(events) if kind == "rename"]
    tmp = events[rename][1]
    before = [os.path.relpath(p, tmp) for _kind, p in events[:rename]]
    want = {"."} | {str(p.relative_to(out)) for p in out.rglob("*")}
    assert sorted(before) == sorted(want)  # each once
    for rdir in (p for p in out.iterdir() if p.is_dir()):
        files = [before.index(f"{rdir.name}/{f}") for f in os.listdir(rdir)]
        assert before.index(rdir.name) > max(files), rdir.name
    assert before[-1] == "."
    assert ("sync", str(tmp_path)) in events[rename + 1:]


def test_the_first_failed_fsync_is_the_error(tmp_path, monkeypatch):
    """Two rank files fail their fsync: the run fails naming the first one fsynced (rank
    folders are fsynced in rank order with one worker), not the last."""
    real = bundle._fsync_path

    def failing(p):
        if p.name == "sem.bin" and p.parent.name in ("rank-0001", "rank-0003"):
            raise OSError(5, "Input/output error")
        real(p)
    monkeypatch.setattr(bundle, "_fsync_path", failing)
    with pytest.raises(OutputError) as exc:
        write_output(plan_lowering(read_model(FIX / "mix8.neff"), LowerOptions()),
                     tmp_path / "out", ranks=None)
    assert str(exc.value).rstrip(")").endswith(str(Path("rank-0001") / "sem.bin")), exc.value
    assert list(tmp_path.iterdir()) == []


def test_the_kick_words_counted_are_opcode_0xa2_of_length_16(tmp_path):
    """The warning for a model without triggers counts the words ``lower`` puts in place of
    triggers (FORMATS §9: opcode 0xA2 *and* length_dw 16): ar2's one trigger word makes one
    (``1 ... word``, singular); the same word with another length is none."""
    from nrtrewrite.bundle import no_trigger_warning
    out = write_output(plan_lowering(read_model(FIX / "ar2.neff"), LowerOptions()),
                       tmp_path / "out", ranks=None)
    lowered = out / "ar2.neff"
    model = read_model(lowered)
    assert no_trigger_warning(model) == (
        f"{lowered}: no collective triggers: nothing to lower, every rank file is empty; it "
        "holds 1 TOPSP_KICK (0xA2) word: it looks already lowered (give the original model)")
    (trigger,) = read_model(FIX / "ar2.neff").triggers
    sg = next(s for s in model.subgraphs if s.name == trigger.subgraph)
    stream = bytearray(sg.streams[trigger.engine])
    assert stream[trigger.index * 64:trigger.index * 64 + 2] == bytes([0xA2, 16])
    stream[trigger.index * 64 + 1] = 15
    sg.streams[trigger.engine] = bytes(stream)
    assert no_trigger_warning(model) == (
        f"{lowered}: no collective triggers: nothing to lower, every rank file is empty")


def test_only_siblings_named_exactly_like_a_build_are_removed(tmp_path):
    """RELIABILITY §4: a killed build's sibling is ``.<NAME>.tmp-<pid>-<8 hex>`` exactly; a
    dead PID's folder whose name goes on after the 8 hex digits is someone else's, kept."""
    out = tmp_path / "model.lowered"
    dead = dead_pid()
    stale = tmp_path / f".model.lowered.tmp-{dead}-0123abcd"
    longer = tmp_path / f".model.lowered.tmp-{dead}-0123abcd9"
    suffixed = tmp_path / f".model.lowered.old-{dead}-0123abcd.keep"
    for d in (stale, longer, suffixed):
        (d / "rank-0000").mkdir(parents=True)
    assert bundle.clean_stale_temps(out) == [stale]
    assert longer.is_dir() and suffixed.is_dir()


@pytest.mark.parametrize("name", ["rank-123", "rank-12"])
def test_force_refuses_a_rank_folder_of_fewer_than_4_digits(tmp_path, name):
    """Rank folders are ``rank-`` and the rank in 4 digits or more (FORMATS §1): a previous
    output holding ``rank-123``, even shaped like a rank folder, holds something foreign."""
    plan = plan_lowering(read_model(FIX / "ar2.neff"), LowerOptions())
    out = write_output(plan, tmp_path / "out", ranks=None)
    (out / name).mkdir()
    (out / name / "manifest.json").write_text("{}\n")
    with pytest.raises(OutputError, match=f"holds {name}, which an nrtrewrite output does not"):
        write_output(plan, out, ranks=None, force=True)
    assert (out / name / "manifest.json").read_text() == "{}\n"


def test_a_manifest_removed_before_the_rename_fails_the_run(tmp_path, monkeypatch):
    """The check before the rename covers the top-level ``manifest.json`` too (RELIABILITY §4:
    every rank folder, the NEFF and the manifest it wrote): removed by another process after
    it was written, the run fails naming it and OUT never appears."""
    real = bundle._Syncer.drain

    def vandal(self):
        real(self)
        (tmp,) = tmp_path.glob(".out.tmp-*")
        (tmp / "manifest.json").unlink()
    monkeypatch.setattr(bundle._Syncer, "drain", vandal)
    with pytest.raises(OutputError, match=r"1 of the entries written into the folder it was "
                       r"being built in, \.out\.tmp-[0-9]+-[0-9a-f]{8}, are gone "
                       r"\(manifest\.json\): another process removed them"):
        write_output(plan_lowering(read_model(FIX / "ar2.neff"), LowerOptions()),
                     tmp_path / "out", ranks=None)
    assert list(tmp_path.iterdir()) == []


def test_the_neff_name_is_found_wherever_a_chunk_boundary_cuts_it(tmp_path):
    """The manifest's ``output_neff.name`` of a manifest over 1 MiB is searched for chunk by
    chunk: found whichever of its bytes the first chunk boundary (near 1 MiB) falls on."""
    head = '{\n "format": "nrtrewrite-lowered",\n "memory": "'
    tail = '",\n "output_neff": {\n  "name": "m.neff",\n  "sha256": "00"\n },\n "x": 0\n}\n'
    path = tmp_path / "manifest.json"
    for start in range(bundle._MANIFEST_CHUNK - len(tail) - 2, bundle._MANIFEST_CHUNK + 3):
        pad = start - len(head)  # the name's text starts at byte `start`
        path.write_text(head + "m" * pad + tail + " " * (1 << 20))
        assert bundle._manifest_neff_name(path) == "m.neff", start


def test_the_input_recorded_is_the_whole_file_trailing_zeros_included(tmp_path):
    """FORMATS §1.1: ``input.bytes`` and ``input.sha256`` are of the whole input file,
    trailing zero bytes after the payload (NEFF-LIKE.md §1) included."""
    model = tmp_path / "padded.neff"
    model.write_bytes((FIX / "ar2.neff").read_bytes() + bytes(4096))
    assert lower_cli(model, "-o", tmp_path / "out").returncode == 0
    top = json.loads((tmp_path / "out" / "manifest.json").read_text())
    data = model.read_bytes()
    assert top["input"] == {"name": "padded.neff", "sha256": sha(data), "bytes": len(data)}


def test_lowering_an_outputs_neff_without_o_is_refused(tmp_path):
    """An exploratory tester: ``lower OUT/m.neff`` (its rewritten NEFF, given by mistake)
    wrote its default ``OUT/m.lowered/`` inside the output, which a later ``lower --force``
    into OUT then refused as not an output of ours.  Refused now, before anything is
    written; ``-o`` elsewhere still lowers it (with the "looks already lowered" warning)."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    out = write_output(plan_lowering(read_model(FIX / "ar2.neff"), LowerOptions()),
                       tmp_path / "out", ranks=None)
    before = sorted(p.name for p in out.iterdir())
    res = CliRunner().invoke(main, ["lower", "-q", str(out / "ar2.neff")])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-1] == (
        f"nrtrewrite: error: {out / 'ar2.neff'}: the model lies in the nrtrewrite output {out} "
        f"(its rewritten NEFF?): the default output {out / 'ar2.lowered'} would be written "
        "into that output; give -o")
    assert sorted(p.name for p in out.iterdir()) == before
    res = CliRunner().invoke(main, ["lower", "-q", str(out / "ar2.neff"), "-o",
                                    str(tmp_path / "again")])
    assert res.exit_code == 0 and (tmp_path / "again" / "manifest.json").is_file()
    res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "ar2.neff"), "-o", str(out),
                                    "--force"])
    assert res.exit_code == 0, res.output  # the output is still one of ours
