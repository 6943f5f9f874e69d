"""The manifests ``diff`` and ``simulate`` read, ``OUT/manifest.json`` and each
``OUT/rank-RRRR/manifest.json``, are read only when they are regular files of at most
``MAX_MANIFEST_BYTES`` (2 GiB, docs/RELIABILITY.md §4), judged from their size before any
byte is read: a 4 GiB manifest (a sparse file) was read whole, and ended in ``out of
memory`` (status 71) under a memory limit, and a FIFO named ``manifest.json`` blocked
``simulate`` forever (and ``lower -o`` and ``dump`` of a folder holding one).  ``lower``
refuses to write a top-level manifest over the limit (a rank manifest cannot reach it: at
most about 842 MB)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite import diff as D
from nrtrewrite.cli import main
from nrtrewrite.emit import formats as F
from nrtrewrite.golden import lower_to
from nrtrewrite.simulate import artifacts as A

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
#: MAX_MANIFEST_BYTES is 2 GiB; a manifest one byte over it (sparse: no disk used).
LIMIT = 2 * 1024 ** 3
OVER = LIMIT + 1
OVER_LINE = ("manifest of 2147483649 bytes exceeds the limit of 2147483648 bytes "
             "(MAX_MANIFEST_BYTES)")


@pytest.fixture(scope="module")
def lowered(tmp_path_factory) -> Path:
    """fixtures/ar2.neff lowered: ranks 0 and 1."""
    return lower_to(FIX / "ar2.neff", tmp_path_factory.mktemp("msl") / "out", None)


@pytest.fixture
def out(lowered, tmp_path) -> Path:
    o = tmp_path / "out"
    shutil.copytree(lowered, o)
    return o


@pytest.fixture
def pair(lowered, tmp_path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(lowered, a)
    shutil.copytree(lowered, b)
    return a, b


def _run(*args) -> tuple[int, list[str], str]:
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.stderr
    return res.exit_code, res.stderr.splitlines(), res.stdout


class _Unreadable:
    """A file as opened, whose bytes must not be read: the test fails if they are."""

    def __init__(self, fh):
        self.fh = fh

    def fileno(self):
        return self.fh.fileno()

    def read(self, *a):
        raise AssertionError("the manifest was read: it must be refused from its size")

    readinto = read

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()

    def close(self):
        self.fh.close()


def _never_read(monkeypatch, victim: Path) -> None:
    """Opening ``victim`` is allowed (its size is read from the descriptor); reading any
    byte of it fails the test, in simulate's and in diff's reads."""
    def unreadable(real):
        def opened(p, *a, **kw):
            fh = real(p, *a, **kw)
            return _Unreadable(fh) if Path(p) == victim else fh
        return opened
    monkeypatch.setattr(A, "open_regular", unreadable(A.open_regular))
    monkeypatch.setattr(D, "_open_regular", unreadable(D._open_regular))


def _too_large(model: Path, size: int, limit: int, at_least: bool = False) -> str:
    """lower's refusal of a top-level manifest of ``size`` bytes over the limit ``limit``
    (docs/CLI.md "lower"), as stderr's one line."""
    return (f"nrtrewrite: error: {model}: the output's top-level manifest.json would be "
            f"{'at least ' if at_least else ''}{size} bytes, more than the limit of {limit} "
            "bytes diff and simulate read (MAX_MANIFEST_BYTES); nothing was written")


def _pad(path: Path, size: int) -> None:
    """``path``'s JSON, with spaces after it up to ``size`` bytes: the same JSON."""
    data = path.read_bytes()
    assert len(data) <= size
    path.write_bytes(data + b" " * (size - len(data)))


# ---------------------------------------------------------------------------
# simulate

@pytest.mark.parametrize("victim", ["manifest.json", "rank-0001/manifest.json"])
@pytest.mark.parametrize("checksums", [True, False])
def test_simulate_refuses_a_manifest_over_the_limit_before_reading_it(
        out, monkeypatch, victim, checksums):
    """A sparse manifest of 2 GiB + 1 byte: refused from its size, none of it read (nor
    hashed, with the checksums), status 2, one line naming the file; with --json the
    error document."""
    path = out / victim
    os.truncate(path, OVER)
    _never_read(monkeypatch, path)
    extra = [] if checksums else ["--ignore-checksums"]
    code, err, _ = _run("simulate", out, *extra)
    assert code == 2
    assert err == [f"nrtrewrite: error: {path}: {OVER_LINE}"]
    code, _, stdout = _run("simulate", out, "--json", *extra)
    doc = json.loads(stdout)
    assert code == 2 and doc["ok"] is None and doc["error"] == f"{path}: {OVER_LINE}"


@pytest.mark.parametrize("victim", ["manifest.json", "rank-0001/manifest.json"])
def test_simulate_reads_a_manifest_at_the_limit_and_refuses_one_byte_more(
        out, monkeypatch, victim):
    """The limit set to the size of the largest manifest (a rank manifest padded with
    spaces past the top-level one's size, the same JSON, so --ignore-checksums): every
    manifest is read and the output simulates; one byte less and that manifest is
    refused."""
    path = out / victim
    size = (out / "manifest.json").stat().st_size
    if victim != "manifest.json":
        size += 100
        _pad(path, size)
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size)
    code, err, _ = _run("simulate", out, "--ignore-checksums")
    assert (code, err) == (0, [])
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size - 1)
    code, err, _ = _run("simulate", out, "--ignore-checksums")
    assert code == 2
    assert err == [f"nrtrewrite: error: {path}: manifest of {size} bytes exceeds the limit "
                   f"of {size - 1} bytes (MAX_MANIFEST_BYTES)"]


def test_the_checksum_pass_judges_a_rank_manifests_size_before_its_sha256(out, monkeypatch):
    """docs/SIMULATOR.md §1: a manifest is judged from its size "before any byte of it is
    read or hashed". rank-0001/manifest.json padded with spaces to 100 bytes past the
    top-level manifest's size (so its sha256 no longer matches rank_manifests) and the limit
    one byte under its size, the top-level one under it: the checksum pass
    refuses it for its size, exit 2, not for its sha256 with the hint (mutation audit round
    8: a pass that read the manifest whole and hashed it first said the sha256)."""
    path = out / "rank-0001" / "manifest.json"
    size = (out / "manifest.json").stat().st_size + 100
    _pad(path, size)
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size - 1)
    code, err, _ = _run("simulate", out)
    assert code == 2
    assert err == [f"nrtrewrite: error: {path}: manifest of {size} bytes exceeds the limit "
                   f"of {size - 1} bytes (MAX_MANIFEST_BYTES)"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("victim, extra", [("manifest.json", []),
                                           ("rank-0001/manifest.json", ["--ignore-checksums"])])
def test_simulate_never_waits_on_a_fifo_named_manifest_json(out, victim, extra):
    """A FIFO in a manifest's place blocked simulate's read forever (the top-level one
    always, a rank's with --ignore-checksums): it is opened without blocking and refused
    as a file that is not regular, as the input is (docs/RELIABILITY.md §1).  (In a
    process of its own, so that a regression fails at the timeout instead of hanging.)"""
    path = out / victim
    path.unlink()
    os.mkfifo(path)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "simulate", str(out), *extra],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == f"nrtrewrite: error: {path}: cannot read: not a regular file\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_simulate_never_waits_on_a_fifo_in_an_artifacts_place(out):
    """With --ignore-checksums (nothing hashes it first) a FIFO named rank-0001/cce.bin
    blocked the read of the rank's files forever: a file that is not regular is refused,
    status 2, as a manifest is."""
    path = out / "rank-0001" / "cce.bin"
    path.unlink()
    os.mkfifo(path)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "simulate", str(out),
                           "--ignore-checksums"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == f"nrtrewrite: error: {path}: cannot read: not a regular file\n"


def test_simulate_judges_an_artifacts_size_before_reading_it(out, monkeypatch):
    """With --ignore-checksums a 4 GiB sparse legs.bin was read whole before its record count
    was compared with the rank manifest's: the count is judged from the size (4 GiB / 64-byte
    records, FORMATS §3), a protocol error, exit 1, and no byte of it is read."""
    path = out / "rank-0001" / "legs.bin"
    listed = json.loads((out / "rank-0001" / "manifest.json").read_text())[
        "files"]["legs.bin"]["records"]
    os.truncate(path, 1 << 32)
    _never_read(monkeypatch, path)
    code, err, stdout = _run("simulate", out, "--ignore-checksums")
    assert code == 1 and err == []
    assert (f"artifact legs.bin: the file should hold {listed} records, the rank manifest's "
            f"count, not {(1 << 32) // 64}") in stdout


# ---------------------------------------------------------------------------
# diff

@pytest.mark.parametrize("side", ["a", "b"])
def test_diff_refuses_a_top_manifest_over_the_limit_before_reading_it(pair, monkeypatch, side):
    """On either side an error, as a top-level manifest that cannot be read is (docs/CLI.md
    "diff"): what cannot be read cannot be told an output folder."""
    a, b = pair
    path = (a if side == "a" else b) / "manifest.json"
    os.truncate(path, OVER)
    _never_read(monkeypatch, path)
    code, err, _ = _run("diff", a, b)
    assert code == 2
    assert err == [f"nrtrewrite: error: {path}: {OVER_LINE}"]


def test_diff_refuses_a_rank_manifest_over_the_limit_before_reading_it(pair, monkeypatch):
    """A's (the reference's) is an error; B's is its `damaged in B` line, exit 1; and a
    manifest over the limit is not compared with the other side's either (two identical
    sparse files are not read to find them equal)."""
    a, b = pair
    pb = b / "rank-0001" / "manifest.json"
    os.truncate(pb, OVER)
    _never_read(monkeypatch, pb)
    code, err, stdout = _run("diff", a, b)
    assert (code, err) == (1, [])
    assert stdout.splitlines() == [f"rank-0001/manifest.json damaged in B: {OVER_LINE}",
                                   "1 difference(s)"]
    pa = a / "rank-0001" / "manifest.json"
    os.truncate(pa, OVER)
    _never_read(monkeypatch, pa)
    code, err, _ = _run("diff", a, b)
    assert code == 2
    assert err == [f"nrtrewrite: error: {pa}: {OVER_LINE}"]


def _flip_hex(path: Path, key: bytes) -> None:
    """The first ``sha256`` after ``key`` with its first digit changed (the same size)."""
    data = path.read_bytes()
    mark = b'"sha256": "'
    i = data.index(mark, data.index(key)) + len(mark)
    path.write_bytes(data[:i] + (b"0" if data[i:i + 1] != b"0" else b"1") + data[i + 1:])


def test_diff_reads_a_top_manifest_at_the_limit_and_refuses_one_byte_more(pair, monkeypatch):
    a, b = pair
    size = (a / "manifest.json").stat().st_size
    # (the model's sha256: output_neff's is a checksum of a file diff compares itself, no
    # difference, docs/CLI.md "diff")
    _flip_hex(b / "manifest.json", b'"input"')
    want_a = json.loads((a / "manifest.json").read_bytes())["input"]["sha256"]
    want_b = json.loads((b / "manifest.json").read_bytes())["input"]["sha256"]
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size)
    assert [(d.where, d.field, d.a, d.b) for d in D.diff_outputs(a, b)] == [
        ("manifest.json", "input.sha256", want_a, want_b)]
    _pad(b / "manifest.json", size + 1)  # B one byte over: an error too
    code, err, _ = _run("diff", a, b)
    assert code == 2
    assert err == [f"nrtrewrite: error: {b / 'manifest.json'}: manifest of {size + 1} bytes "
                   f"exceeds the limit of {size} bytes (MAX_MANIFEST_BYTES)"]
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size - 1)  # A one byte over
    code, err, _ = _run("diff", a, b)
    assert code == 2
    assert err == [f"nrtrewrite: error: {a / 'manifest.json'}: manifest of {size} bytes "
                   f"exceeds the limit of {size - 1} bytes (MAX_MANIFEST_BYTES)"]


def test_diff_reads_a_rank_manifest_at_the_limit_and_refuses_one_byte_more(pair, monkeypatch):
    """Both rank manifests padded past the top-level one's size (the same JSON), B's with
    its ``rank`` changed (a sha256 it records would be a checksum of a file diff compares
    itself, no difference): at the limit both are read and compared; B's one byte over is
    its damage, A's an error."""
    a, b = pair
    size = (a / "manifest.json").stat().st_size + 100
    pa, pb = a / "rank-0001" / "manifest.json", b / "rank-0001" / "manifest.json"
    data = pb.read_bytes()
    assert data.endswith(b'\n "rank": 1\n}\n')
    pb.write_bytes(data[:-4] + b"7\n}\n")
    _pad(pa, size)
    _pad(pb, size)
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size)
    assert [(d.where, d.field, d.a, d.b) for d in D.diff_outputs(a, b)] == [
        ("rank-0001/manifest.json", "rank", 1, 7)]
    _pad(pb, size + 1)
    assert [(d.where, d.field, d.b) for d in D.diff_outputs(a, b)] == [
        ("rank-0001/manifest.json", "damaged", f"manifest of {size + 1} bytes exceeds the "
         f"limit of {size} bytes (MAX_MANIFEST_BYTES)")]
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size - 1)
    code, err, _ = _run("diff", a, b)
    assert code == 2
    assert err == [f"nrtrewrite: error: {pa}: manifest of {size} bytes exceeds the limit of "
                   f"{size - 1} bytes (MAX_MANIFEST_BYTES)"]


# ---------------------------------------------------------------------------
# a manifest that grows between its size and its read

def _smaller_by_one(monkeypatch, victim: Path) -> None:
    """``os.fstat`` of ``victim`` says one byte less than it holds: it grew meanwhile."""
    real_fstat = os.fstat
    ino = victim.stat().st_ino

    def fstat(fd):
        st = real_fstat(fd)
        if st.st_ino != ino:
            return st
        fields = list(st[:10])
        fields[6] -= 1  # st_size
        return os.stat_result(fields)
    monkeypatch.setattr(os, "fstat", fstat)


def test_a_manifest_that_grows_while_it_is_read_is_refused(out, monkeypatch):
    """Read as much as its size says and a byte more: a byte more is there, so it changed
    while being read, and is refused instead of read on without a bound."""
    path = out / "manifest.json"
    size = path.stat().st_size
    _smaller_by_one(monkeypatch, path)
    with pytest.raises(A.OutputError) as exc:
        A._read_manifest(path)
    assert str(exc.value) == (f"{path}: changed while being read (it held {size - 1} bytes, "
                              "now more)")
    with pytest.raises(OSError) as exc:
        D._read_whole(path)
    assert D._why(exc.value) == f"changed while being read (it held {size - 1} bytes, now more)"


# ---------------------------------------------------------------------------
# lower

def test_lower_refuses_to_write_a_top_manifest_over_the_limit(lowered, tmp_path, monkeypatch):
    """What diff and simulate would not read is not written: the model named, nothing left
    behind (neither OUT nor its temporary sibling); at the limit the same bytes as ever."""
    size = (lowered / "manifest.json").stat().st_size
    model = FIX / "ar2.neff"
    o = tmp_path / "o"
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size - 1)
    code, err, _ = _run("lower", model, "-o", o)
    assert code == 2
    assert err == [_too_large(model, size, size - 1)]
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size)
    code, err, _ = _run("lower", model, "-o", o)
    assert (code, err) == (0, [])
    assert (o / "manifest.json").read_bytes() == (lowered / "manifest.json").read_bytes()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("args, line", [
    (["lower", FIX / "ar2.neff", "-o", "{o}"], "{o} exists and is not an nrtrewrite output (no "
     'manifest.json of format "nrtrewrite-lowered"); refusing to replace it'),
    (["lower", FIX / "ar2.neff", "-o", "{o}", "--force"], "{o} exists and is not an nrtrewrite "
     'output (no manifest.json of format "nrtrewrite-lowered"); refusing to replace it'),
    (["dump", "--spad", "{o}"], "{o}: neither an nrtrewrite output folder nor a rank folder")])
def test_a_fifo_named_manifest_json_blocks_neither_lower_nor_dump(tmp_path, args, line):
    """A folder holding only a FIFO named manifest.json: whether it is an output of ours
    (`lower -o` of it, with or without --force; `dump` of it) opened the FIFO and waited for
    a writer forever.  It is no output of ours: a manifest is a regular file.  (In a process
    of its own, so that a regression fails at the timeout instead of hanging.)"""
    o = tmp_path / "o"
    o.mkdir()
    os.mkfifo(o / "manifest.json")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite",
                           *(str(a).format(o=o) for a in args)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == f"nrtrewrite: error: {line.format(o=o)}\n"


# ---------------------------------------------------------------------------------------------
# lower refuses an over-large top-level manifest before any rank is lowered (until 2026-12-05
# only after every rank was lowered and written and the whole text built in memory)

def _no_rank_lowering(monkeypatch) -> None:
    """Lowering a rank, in this process or a pool worker, fails the test."""
    from nrtrewrite import bundle

    def fail(*a, **k):
        raise AssertionError("a rank was lowered before the manifest's size was refused")

    monkeypatch.setattr(bundle, "_write_rank", fail)
    monkeypatch.setattr(bundle, "_lower_and_write", fail)


def _triggers_text(manifest: Path) -> str:
    """The text of the manifest's ``triggers`` value (its keys sorted: ``world`` follows)."""
    text = manifest.read_text()
    start = text.index('\n "triggers": ') + len('\n "triggers": ')
    return text[start:text.index(',\n "world": ', start)]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_lower_refuses_a_top_manifest_over_the_limit_before_any_rank_is_lowered(
        lowered, tmp_path, monkeypatch, jobs):
    """ar2 (one trigger, fewer than MANIFEST_AHEAD_TRIGGERS: its triggers are encoded in
    this process): the manifest's exact size is known from the plan before anything is
    written (the hashes to come are 64 hex digits each), so its refusal is the one the
    whole text got, with no rank lowered and nothing left."""
    size = (lowered / "manifest.json").stat().st_size
    _no_rank_lowering(monkeypatch)
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", size - 1)
    model = FIX / "ar2.neff"
    code, err, _ = _run("lower", model, "-o", tmp_path / "o", "-j", jobs)
    assert code == 2
    assert err == [_too_large(model, size, size - 1)]
    assert list(tmp_path.iterdir()) == []


def test_triggers_encoded_in_a_forked_process_are_counted_at_their_lower_bound(
        lowered, tmp_path, monkeypatch):
    """With -j 2 and the triggers encoded in a forked process while the ranks are lowered
    (the threshold lowered to 1), they are counted up front at their lower bound: ar2's one
    trigger lists its group [0, 1], two distinct ranks, so at least 2 digits, a separator and
    the brackets, 5 bytes.  Over the limit with them: refused before any rank is lowered,
    "at least"; under it but over with the real text: refused once it is known, as before,
    and nothing left either way."""
    from nrtrewrite import bundle

    size = (lowered / "manifest.json").stat().st_size
    bound = size - len(_triggers_text(lowered / "manifest.json")) + 5
    model = FIX / "ar2.neff"
    monkeypatch.setattr(bundle, "MANIFEST_AHEAD_TRIGGERS", 1)
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", bound - 1)
    with monkeypatch.context() as m:
        _no_rank_lowering(m)
        code, err, _ = _run("lower", model, "-o", tmp_path / "o", "-j", "2")
    assert code == 2
    assert err == [_too_large(model, bound, bound - 1, at_least=True)]
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", bound)
    code, err, _ = _run("lower", model, "-o", tmp_path / "o", "-j", "2")
    assert code == 2
    assert err == [_too_large(model, size, bound)]
    assert list(tmp_path.iterdir()) == []


def test_the_triggers_lower_bound_alone_is_refused_before_anything_is_encoded(
        tmp_path, monkeypatch):
    """A manifest of tens of GB is refused before its text is built: the triggers' lower
    bound (5 bytes for ar2's group [0, 1]) is checked before the manifest is encoded."""
    from nrtrewrite import bundle

    def fail(*a, **k):
        raise AssertionError("the manifest was encoded")

    _no_rank_lowering(monkeypatch)
    monkeypatch.setattr(bundle, "_triggers_json", fail)
    monkeypatch.setattr(bundle, "_TopManifest", fail)
    monkeypatch.setattr(F, "MAX_MANIFEST_BYTES", 4)
    model = FIX / "ar2.neff"
    code, err, _ = _run("lower", model, "-o", tmp_path / "o")
    assert code == 2
    assert err == [_too_large(model, 5, 4, at_least=True)]
    assert list(tmp_path.iterdir()) == []


def test_digits_below():
    """0 .. n - 1 written out: 10 numbers of one digit, 90 of two, 900 of three; up to 2^20
    (RELIABILITY §4's largest group): 10 + 180 + 2,700 + 36,000 + 450,000 + 5,400,000 +
    48,576 x 7 digits."""
    from nrtrewrite.bundle import _digits_below

    assert [_digits_below(n) for n in (0, 1, 10, 11, 100, 101)] == [0, 1, 10, 12, 190, 193]
    assert _digits_below(2 ** 20) == 6_228_922


@pytest.mark.parametrize("name", ["ar2", "groups", "mix8", "node64", "two_node128"])
def test_the_triggers_lower_bound_is_below_their_text(name):
    """A lower bound: never more than the triggers' text (so nothing under the limit is
    refused by it)."""
    from nrtrewrite.bundle import _triggers_json, _triggers_size_at_least
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.reader import read_model

    plan = plan_lowering(read_model(FIX / f"{name}.neff"), LowerOptions())
    assert 0 < _triggers_size_at_least(plan) < len(_triggers_json(plan))


def test_a_rewritten_neff_that_grows_while_it_is_read_is_refused(out, monkeypatch):
    """docs/SIMULATOR.md §1: the rewritten NEFF is read as the other files are, as much as
    its size says and a byte more: ar2.neff whose size says one byte less than it holds
    grew meanwhile and is refused (an OutputError naming it and both counts), not read on
    cut to the size (mutation audit round 8: a read of exactly the size took it)."""
    path = out / "ar2.neff"
    size = path.stat().st_size
    _smaller_by_one(monkeypatch, path)
    with pytest.raises(A.OutputError) as exc:
        A.read_rewritten_neff(path)
    assert str(exc.value) == (f"{path}: changed while being read (it held {size - 1} bytes, "
                              f"now {size})")
