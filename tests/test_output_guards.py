"""What `lower` writes and refuses to write (docs/CLI.md "lower", docs/FORMATS.md §1 and §9,
docs/RELIABILITY.md §4): the rewritten NEFF's name never collides with the output's own
names; --force never replaces a folder holding the input or anything foreign."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nrtrewrite.bundle import write_output
from nrtrewrite.errors import OutputError
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.reader import read_model
from test_atomic_output import FIX, ROOT, env, one_line_error, run, sha, verify_complete


def run_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nrtrewrite.cli.__main__", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120)


def lower_in_process(model: Path, out: Path, **kw) -> Path:
    return write_output(plan_lowering(read_model(model), LowerOptions()), out, ranks=None, **kw)


# --- F2: a model named like one of the output's own entries -------------------------------

@pytest.mark.parametrize("name, stored", [
    ("manifest.json", "manifest.json.neff"),
    ("MANIFEST.JSON", "MANIFEST.JSON.neff"),  # one name on a case-insensitive file system
    ("rank-0000", "rank-0000.neff"),
    ("Rank-12345", "Rank-12345.neff"),
    ("rank-7", "rank-7.neff"),
    ("rank-0000.neff", "rank-0000.neff"),  # no collision: kept
    ("manifest.json.neff", "manifest.json.neff"),
    ("rank-", "rank-"),
])
def test_no_model_name_collides_with_the_outputs_own_names(name, stored, tmp_path):
    """The rewritten NEFF keeps the model's name unless it is `manifest.json` or `rank-` and
    digits (any case): then `.neff` is added.  Before, a model named manifest.json lost its
    rewritten NEFF under the top manifest (exit 0, simulate: sha256 mismatch), and one named
    rank-0000 failed with `Is a directory`."""
    model = tmp_path / "in" / name
    model.parent.mkdir()
    shutil.copy(FIX / "ar2.neff", model)
    out = lower_in_process(model, tmp_path / "out")
    top = json.loads((out / "manifest.json").read_text())
    assert top["output_neff"]["name"] == stored
    assert top["input"]["name"] == name
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json", stored, "rank-0000", "rank-0001"])
    verify_complete(out)
    # the same rewritten NEFF a plainly named copy of the model gets
    plain = lower_in_process(FIX / "ar2.neff", tmp_path / "plain")
    assert (out / stored).read_bytes() == (plain / "ar2.neff").read_bytes()


def test_a_model_named_manifest_json_lowers_and_simulates(tmp_path):
    """The reported case end to end, through the CLI: exit 0 and `simulate` matches."""
    model = tmp_path / "manifest.json"
    shutil.copy(FIX / "ar2.neff", model)
    proc = run(model, "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    sim = run_cli("simulate", tmp_path / "out")
    assert sim.returncode == 0, sim.stdout + sim.stderr
    assert "1/1 trigger(s) match" in sim.stdout



# --- F3: --force never replaces a folder holding the input or anything foreign ------------

def tree(path: Path) -> dict[str, str]:
    """Every file under ``path`` (not following links) -> its sha256 (a link: its target)."""
    out = {}
    for p in sorted(path.rglob("*")):
        rel = str(p.relative_to(path))
        if p.is_symlink():
            out[rel] = "-> " + str(p.readlink())
        elif p.is_file():
            out[rel] = sha(p)
        else:
            out[rel] = "dir"
    return out


def test_force_never_overwrites_the_input_nor_deletes_user_files(tmp_path):
    """The reported case: a model copied into an output and lowered into that output with
    --force overwrote the model (same name as the rewritten NEFF) and deleted notes.txt."""
    out = tmp_path / "out3"
    assert run(FIX / "ar2.neff", "-o", out).returncode == 0
    shutil.copy(FIX / "mix8.neff", out / "mine.neff")
    (out / "notes.txt").write_text("keep\n")
    before = tree(out)
    one_line_error(run(out / "mine.neff", "-o", out, "--force"),
                   f"{out} holds the input model {out / 'mine.neff'}; nrtrewrite never "
                   "replaces nor deletes its input: choose another output folder")
    assert tree(out) == before
    assert sha(out / "mine.neff") == sha(FIX / "mix8.neff")
    # another model: the first foreign entry is named
    one_line_error(run(FIX / "mix8.neff", "-o", out, "--force"),
                   f"{out} holds mine.neff, which an nrtrewrite output does not (only "
                   "manifest.json, the rewritten NEFF its manifest names and rank-NNNN folders "
                   "of artifacts); refusing to replace it")
    (out / "mine.neff").unlink()
    one_line_error(run(FIX / "mix8.neff", "-o", out, "--force"), f"{out} holds notes.txt, ")
    assert (out / "notes.txt").read_text() == "keep\n"
    (out / "notes.txt").unlink()
    assert run(FIX / "mix8.neff", "-o", out, "--force").returncode == 0
    verify_complete(out)
    assert len([p for p in out.iterdir() if p.is_dir()]) == 8


def test_the_model_inside_the_output_is_refused_whatever_path_names_it(tmp_path):
    """The model inside OUT by any path: the output's own rewritten NEFF, through a symbolic
    link to OUT, OUT being the model's folder or an ancestor of it; and the model as a hard
    link in OUT.  Refused with or without --force, OUT untouched."""
    out = tmp_path / "out"
    lower_in_process(FIX / "ar2.neff", out)
    link = tmp_path / "link"
    link.symlink_to(out)
    hard = tmp_path / "hard.neff"
    hard.hardlink_to(out / "ar2.neff")
    nested = tmp_path / "a" / "b" / "m.neff"
    nested.parent.mkdir(parents=True)
    shutil.copy(FIX / "ar2.neff", nested)
    before = tree(out)
    cases = [
        (out / "ar2.neff", out, f"{out} holds the input model {out / 'ar2.neff'}; "),
        (link / "ar2.neff", out, f"{out} holds the input model {link / 'ar2.neff'}; "),
        (nested, nested.parent, f"{nested.parent} holds the input model {nested}; "),
        (nested, tmp_path / "a", f"{tmp_path / 'a'} holds the input model {nested}; "),
    ]
    for model, dest, says in cases:
        for force in (False, True):
            with pytest.raises(OutputError) as exc:
                lower_in_process(model, dest, force=force)
            assert str(exc.value).startswith(says), str(exc.value)
    # a hard link is only a question for --force (without it OUT exists: refused anyway)
    with pytest.raises(OutputError) as exc:
        lower_in_process(hard, out, force=True)
    assert str(exc.value) == (f"{out} holds the input model {hard} as ar2.neff (a hard link); "
                              "nrtrewrite never replaces nor deletes its input: choose "
                              "another output folder")
    assert tree(out) == before
    assert sha(nested) == sha(FIX / "ar2.neff") and sha(hard) == before["ar2.neff"]
    # a model elsewhere replaces the output as before
    lower_in_process(FIX / "mix8.neff", out, force=True)
    verify_complete(out)


@pytest.mark.parametrize("foreign, named", [
    (lambda o: (o / "rank-0001" / "notes").write_text("x"), "rank-0001/notes"),
    (lambda o: (o / "extra").mkdir(), "extra"),
    (lambda o: (o / ".hidden").write_text("x"), ".hidden"),
    (lambda o: (o / "rank-0000x").mkdir(), "rank-0000x"),
    # a rank folder is rank- and R as 4 digits (FORMATS.md §1): rank-1 is not ours
    (lambda o: (o / "rank-0001").rename(o / "rank-1"), "rank-1"),
    (lambda o: (o / "rank-0002").write_text("x"), "rank-0002"),  # a file, not a folder
    (lambda o: (o / "rank-0000" / "sub").mkdir(), "rank-0000/sub"),
    (lambda o: ((o / "rank-0000" / "spad.bin").unlink(),
                (o / "rank-0000" / "spad.bin").symlink_to(o / "manifest.json")),
     "rank-0000/spad.bin"),
    (lambda o: ((o / "ar2.neff").rename(o / "other.neff")), "other.neff"),
])
def test_force_refuses_an_output_holding_anything_foreign(foreign, named, tmp_path):
    """--force replaces an output only when it holds nothing but manifest.json, the NEFF
    its manifest names and rank-NNNN folders of the rank files; else the first foreign entry
    is named and nothing changes."""
    out = tmp_path / "out"
    lower_in_process(FIX / "ar2.neff", out)
    foreign(out)
    before = tree(out)
    with pytest.raises(OutputError) as exc:
        lower_in_process(FIX / "mix8.neff", out, force=True)
    assert str(exc.value) == (f"{out} holds {named}, which an nrtrewrite output does not "
                              "(only manifest.json, the rewritten NEFF its manifest names and "
                              "rank-NNNN folders of artifacts); refusing to replace it")
    assert tree(out) == before


def test_force_replaces_a_partial_or_renamed_output_of_ours(tmp_path):
    """Fewer entries than an output has are fine (a missing rank file, a missing NEFF), and
    so is a NEFF of another name when the manifest names it (manifest.json.neff)."""
    out = tmp_path / "out"
    model = tmp_path / "manifest.json"
    shutil.copy(FIX / "ar2.neff", model)
    lower_in_process(model, out)
    (out / "rank-0001" / "dma.bin").unlink()
    lower_in_process(FIX / "mix8.neff", out, force=True)
    (out / "mix8.neff").unlink()
    lower_in_process(FIX / "ar2.neff", out, force=True)
    verify_complete(out)


def test_the_neff_name_is_found_far_into_a_big_manifest(tmp_path):
    """A manifest over 1 MiB is not parsed: the name is searched for in our layout, chunk by
    chunk, also across a chunk boundary."""
    from nrtrewrite import bundle
    for pad in (3 << 20, bundle._MANIFEST_CHUNK - 20, (2 << 20) - 10):
        doc = ('{\n "format": "nrtrewrite-lowered",\n "memory": "' + "m" * pad + '",\n'
               ' "output_neff": {\n  "name": "we\\"ird.neff",\n  "sha256": "00"\n },\n'
               ' "triggers": []\n}\n')
        (tmp_path / "manifest.json").write_text(doc)
        assert bundle._manifest_neff_name(tmp_path / "manifest.json") == 'we"ird.neff', pad
    (tmp_path / "manifest.json").write_text('{"x": "' + "m" * (3 << 20) + '"}')
    assert bundle._manifest_neff_name(tmp_path / "manifest.json") is None


# --- F6: member names longer than ustar allows round-trip through lower -------------------

LONG_ENGINE = "e" * 97  # sg00/<97>.bin: 106 bytes, its last component 101: no ustar split
LONG_EXTRA = "extra/" + "x" * 294  # 300 bytes


def long_name_model(path: Path, base_spec: dict) -> Path:
    from nrtrewrite.neff.assembler import assemble_spec
    engines = base_spec["subgraphs"][0]["engines"]
    engines[LONG_ENGINE] = engines.pop("sp")
    base_spec["extra_members"] = [{"name": LONG_EXTRA, "text": "kept as it is"}]
    path.write_bytes(assemble_spec(base_spec))
    return path


def tar_blocks(tar: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """(type flag, name field, data) of every header of a tar, walked block by block."""
    out, off = [], 0
    while off < len(tar) and any(tar[off:off + 512]):
        hdr = tar[off:off + 512]
        size = int(hdr[124:136].strip(b"\0 ") or b"0", 8)
        out.append((hdr[156:157], hdr[:100].rstrip(b"\0"), tar[off + 512:off + 512 + size]))
        off += 512 + -(-size // 512) * 512
    assert not any(tar[off:]) and len(tar) % 10240 == 0
    return out


def test_member_names_longer_than_ustar_round_trip(tmp_path, base_spec):
    """A 97-character engine name and a 300-byte extra member passed `inspect` but failed
    `lower` after every rank with `cannot store member: name is too long`: the rewritten
    NEFF now stores such a name in a pax header (only for that member) and reads back."""
    import gzip
    model = long_name_model(tmp_path / "long.neff", base_spec)
    assert run_cli("inspect", model).returncode == 0
    out = tmp_path / "out"
    proc = run(model, "-o", out)
    assert proc.returncode == 0, proc.stderr
    verify_complete(out)
    neff = out / "long.neff"
    before, after = read_model(model), read_model(neff)
    assert list(after.members) == list(before.members)
    assert after.members[LONG_EXTRA] == b"kept as it is"
    assert after.triggers == [] and len(before.triggers) == 1
    assert after.members[f"sg00/{LONG_ENGINE}.bin"][64] == 0xA2  # the trigger: a kick word
    # the tar: ustar headers, a pax header ('x', fixed content) before the two long names only
    blocks = tar_blocks(gzip.decompress(neff.read_bytes()[1024:]))
    engine_member = f"sg00/{LONG_ENGINE}.bin".encode()
    assert [(t, n) for t, n, _ in blocks] == [
        (b"0", b"neff.json"), (b"0", b"sg00/def.json"), (b"0", b"sg00/pool.bin"),
        (b"x", b"././@PaxHeader"), (b"0", engine_member[:100]),
        (b"x", b"././@PaxHeader"), (b"0", LONG_EXTRA.encode()[:100])]
    assert blocks[3][2] == b"116 path=" + engine_member + b"\n"  # 4 + 106 + 3 + 3 digits
    assert blocks[5][2] == b"310 path=" + LONG_EXTRA.encode() + b"\n"  # 4 + 300 + 3 + 3
    # the rewritten NEFF reads back and lowers again (nothing left to lower)
    assert run_cli("inspect", neff).returncode == 0
    proc = run(neff, "-o", tmp_path / "again")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "again" / "long.neff").read_bytes() == neff.read_bytes()


def test_build_tar_is_ustar_for_names_that_fit(tmp_path):
    """Names that fit ustar (100 bytes, or split at a '/' into 155 + 100) get no pax header:
    the bytes are those Python's ustar writer gives, so earlier outputs stay identical."""
    import io
    import tarfile
    from nrtrewrite.neff.container import build_tar
    names = ["a", "n" * 100, "p" * 155 + "/" + "n" * 100, "sg00/" + "é" * 47 + ".bin"]
    members = [(n, bytes([i]) * (i * 300)) for i, n in enumerate(names)]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT,
                      encoding="utf-8") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o644, "", ""
            tf.addfile(info, io.BytesIO(data))
    assert build_tar(members) == buf.getvalue()
    assert all(t == b"0" for t, _n, _d in tar_blocks(build_tar(members)))
    # one byte more, and the name moves to a pax header
    assert [t for t, _n, _d in tar_blocks(build_tar([("n" * 101, b"")]))] == [b"x", b"0"]


# --- L1: planning errors name the member and the field's byte offset, as the reader does --

def test_planning_errors_name_member_offset_and_field(base_spec, tmp_path):
    """An FP32 all-reduce of a 0xC7 word (dtype at byte 13) at instruction 2: offset
    2 * 64 + 13 = 0x8d, named as the reader names a bad dtype code in the same place."""
    import copy
    from nrtrewrite.neff.assembler import assemble_spec
    body = {"dtype": "fp32", "op": "add", "src": "in", "dst": "out", "num_elements": 64,
            "opcode": 0xC7}
    base_spec["subgraphs"][0]["engines"]["sp"] = ["nop", "nop", {"all_reduce": body}]
    bad_code = copy.deepcopy(base_spec)
    model = tmp_path / "m.neff"
    model.write_bytes(assemble_spec(base_spec))
    place = "member sg00/sp.bin, subgraph sg00, stream sp, instruction 2, offset 0x8d, field dtype"
    one_line_error(run(model, "-o", tmp_path / "out"),
                   f"{model}: {place}, trigger 0: ALLREDUCE in FP32 cannot be lowered")
    assert not (tmp_path / "out").exists()
    bad_code["validate"] = False
    bad_code["subgraphs"][0]["engines"]["sp"][2]["all_reduce"]["patch"] = {"dtype": 0x33}
    model.write_bytes(assemble_spec(bad_code))
    proc = run_cli("inspect", model)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"nrtrewrite: error: {model}: {place}: unknown DType code 0x33"


# --- L4: a model without triggers (an already lowered NEFF) gets a warning -----------------

def test_lowering_a_lowered_neff_warns_once_on_one_line(tmp_path):
    """Lowering the rewritten NEFF again succeeded silently with empty rank files: now one
    warning line (with --quiet too, as every warning), exit 0, saying it looks lowered; the
    count is the original triggers' words (a 0xD9+0xDA pair is two)."""
    first = lower_in_process(FIX / "c7c8.neff", tmp_path / "first")
    kicks = sum(t.num_words for t in read_model(FIX / "c7c8.neff").triggers)
    # a long path, piped: the line must not be wrapped at 80 columns
    folder = tmp_path / ("d" * 90)
    folder.mkdir()
    lowered = folder / "c7c8.neff"
    shutil.copy(first / "c7c8.neff", lowered)
    for quiet in ([], ["-q"]):
        out = tmp_path / f"again{len(quiet)}"
        proc = run_cli("lower", lowered, "-o", out, *quiet)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines() == [
            f"nrtrewrite: warning: {lowered}: no collective triggers: nothing to lower, every "
            f"rank file is empty; it holds {kicks} TOPSP_KICK (0xA2) words: it looks already "
            "lowered (give the original model)"]
        assert kicks == 5
        verify_complete(out)
        assert all(p.stat().st_size == 0 for p in out.glob("rank-*/*.bin"))


def test_a_model_without_triggers_warns_and_one_with_triggers_does_not(tmp_path, base_spec):
    from nrtrewrite.neff.assembler import assemble_spec
    base_spec["subgraphs"][0]["engines"]["sp"] = ["nop", "nop"]
    model = tmp_path / "none.neff"
    model.write_bytes(assemble_spec(base_spec))
    proc = run(model, "-o", tmp_path / "out")  # -q
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (f"nrtrewrite: warning: {model}: no collective triggers: nothing to "
                           "lower, every rank file is empty\n")
    proc = run(FIX / "ar2.neff", "-o", tmp_path / "out2")
    assert proc.returncode == 0 and proc.stderr == ""


# --- `-o .` and `-o ..` ------------------------------------------------------------------

def test_dot_and_dotdot_name_the_output_folder(tmp_path):
    """`-o .` inside a previous output, with --force, failed with "Device or resource busy"
    ("." cannot be renamed); then it replaced the output, the working folder, leaving the
    shell in a deleted folder. Since review R2 (docs/CLI.md "lower") the working folder and
    a folder above it are refused, named as given, with or without --force, nothing
    replaced nor deleted: `-o .` inside a previous output, `-o ..` from a folder of a
    foreign folder."""
    model = FIX / "ar2.neff"
    out = tmp_path / "O"
    assert run(model, "-o", out).returncode == 0
    first = verify_complete(out)
    old_inode = out.stat().st_ino
    res = run(model, "-o", ".", "--force", cwd=out)
    one_line_error(res, "error: . is the working folder; nrtrewrite never replaces the folder "
                        "it runs in nor one above it: choose another output folder")
    assert out.stat().st_ino == old_inode  # the same folder, left in place
    assert verify_complete(out) == first  # the output as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["O"]  # no temporary siblings left
    sub = tmp_path / "P" / "sub"
    sub.mkdir(parents=True)
    (tmp_path / "P" / "keep.txt").write_text("keep")
    res = run(model, "-o", "..", "--force", cwd=sub)
    one_line_error(res, "error: .. holds the working folder; nrtrewrite never replaces the "
                        "folder it runs in nor one above it: choose another output folder")
    assert (tmp_path / "P" / "keep.txt").read_text() == "keep" and sub.is_dir()


# --- review R2: the working folder, and OUT named as given ----------------------------------

def run_in(cwd: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nrtrewrite", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=env(), timeout=120)


WORKING = ("the working folder; nrtrewrite never replaces the folder it runs in nor one above it: "
           "choose another output folder")


@pytest.mark.parametrize("out, where", [(".", "."), ("./", "."), ("..", "a"), ("../..", "a/b")])
def test_force_never_replaces_the_working_folder_nor_one_above_it(tmp_path, out, where):
    """docs/CLI.md "lower": `lower M -o . --force` in an empty folder replaced the working
    folder itself (the shell was left in a deleted folder). Refused before anything is
    written, OUT named as given; the folders stay."""
    top = tmp_path / "w"
    (top / "a" / "b").mkdir(parents=True)
    cwd = top / where
    for extra in ([], ["--force"]):
        proc = run_in(cwd, "lower", "-q", FIX / "ar2.neff", "-o", out, *extra)
        what = "is" if where == "." else "holds"
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            2, "", f"nrtrewrite: error: {out} {what} {WORKING}\n")
        assert sorted(p.relative_to(top).as_posix() for p in top.rglob("*")) == ["a", "a/b"]


@pytest.mark.parametrize("out", [".", "./", "t1/.."])
def test_an_output_holding_the_model_is_named_as_given(tmp_path, out):
    """docs/CLI.md "Paths in the output": OUT as given (`-o .` was named by its absolute
    path, `/tmp/.../paths holds the input model ar2.neff; ...`)."""
    shutil.copy(FIX / "ar2.neff", tmp_path / "ar2.neff")
    (tmp_path / "t1").mkdir()
    proc = run_in(tmp_path, "lower", "-q", "ar2.neff", "-o", out, "--force")
    assert (proc.returncode, proc.stderr) == (
        2, f"nrtrewrite: error: {out} holds the input model ar2.neff; nrtrewrite never replaces "
           "nor deletes its input: choose another output folder\n")


def test_force_in_an_empty_working_folder_leaves_it_in_place(tmp_path):
    """The review's case: an empty working folder, which --force would replace as it
    replaces any empty folder (the shell was left in a deleted folder)."""
    empty = tmp_path / "e"
    empty.mkdir()
    proc = run_in(empty, "lower", "-q", FIX / "ar2.neff", "-o", ".", "--force")
    assert (proc.returncode, proc.stderr) == (2, f"nrtrewrite: error: . is {WORKING}\n")
    assert empty.is_dir() and list(empty.iterdir()) == []
