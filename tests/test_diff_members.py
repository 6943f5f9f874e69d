"""`nrtrewrite diff` of two rewritten NEFFs member by member in step (nrtrewrite/diff.py
``_neff_members_diff``): the same differences, order, indices, counts and errors as reading
both NEFFs whole (the algorithm before, kept here as the oracle), whatever the members'
order, members on one side only, the reader's errors (A's raised, B's one ``damaged`` line,
also when found after the last member), ``--max`` and the fallbacks (differences past
``DEFER_MAX``, B's members past ``HOLD_BYTES``); and one member of each side held at a time
(tracemalloc; the peak RSS of a fresh process, the mapped file included)."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from nrtrewrite import diff as D
from nrtrewrite.errors import NrtRewriteError
from nrtrewrite.neff.container import (
    _Gunzip, build_container, build_tar, default_header, read_container, wrap_payload,
)

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# the oracle: both NEFFs read whole, then compared (nrtrewrite/diff.py before the change)

def _old_read(p: Path):
    import mmap
    with open(p, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            data = b""
        else:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    return read_container(data, path=str(p), verify_hash=False)


def _old_members_diff(rep: D.Report, name: str, a: Path, b: Path, kicks=None) -> None:
    ca = _old_read(a)
    try:
        cb = _old_read(b)
    except NrtRewriteError as err:
        rep.add([D._damaged(name, err.line())])
        return
    for member in list(ca.members) + [m for m in cb.members if m not in ca.members]:
        where = f"{name}:{member}"
        xa, xb = ca.members.get(member), cb.members.get(member)
        if xa is None or xb is None:
            rep.add([D.Difference(where, None, "member", xa is not None, xb is not None)])
        elif xa != xb:  # (kicks: the words named as TOPSP_KICK words, D._neff_diff's)
            D._member_diff(rep, where, xa, xb, (kicks or {}).get(member, frozenset()))


def _run(fn, a: Path, b: Path, limit):
    """What ``fn(rep, "m.neff", a, b)`` reports: (index, lines) shown, count, shown; or
    the error raised."""
    shown = []
    rep = D.Report(limit, lambda i, lines: shown.append((i, lines)))
    rep.add([D.Difference("before", None, "x", 1, 2)])  # (a difference already counted)
    try:
        fn(rep, "m.neff", a, b)
    except NrtRewriteError as err:
        return ("error", type(err).__name__, str(err), shown, rep.count)
    return (shown, rep.count, rep.shown)


# ---------------------------------------------------------------------------
# NEFFs

def _words(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(64 * n)


def _flip(data: bytes, *offsets: int) -> bytes:
    x = bytearray(data)
    for off in offsets:
        x[off] ^= 0x5A
    return bytes(x)


BASE = [
    ("neff.json", json.dumps({"neff_like_version": 1, "subgraphs": ["sg00"]}).encode()),
    ("sg00/def.json", json.dumps({"var": [], "engines": ["sp"], "k": [1, 2, 3]}).encode()),
    ("sg00/sp.bin", _words(0, 8)),
    ("w0.bin", _words(1, 700)),
    ("w1.bin", _words(2, 900)),
    ("notes.txt", b"some notes\n" * 50),
    ("w2.bin", _words(3, 800)),
    ("w3.bin", _words(4, 600)),
]


def _edit(members, *, drop=(), add=(), order=None, change=None):
    m = dict(members)
    for k in drop:
        del m[k]
    for k, v in (change or {}).items():
        if k in m:
            m[k] = v(m[k])
    names = order(list(m)) if order else list(m)
    out = [(k, m[k]) for k in names]
    for pos, k, v in add:
        out.insert(pos if pos >= 0 else len(out), (k, v))
    return out


def _changed(m):
    """A JSON key, two instructions of w1, the last of w3, bytes of notes.txt."""
    def doc(x):
        d = json.loads(x)
        d["k"] = [1, 5]
        d["new"] = {"a": 1}
        return json.dumps(d).encode()
    return {"sg00/def.json": doc, "w1.bin": lambda x: _flip(x, 70, 64 * 500 + 3, 64 * 500 + 40),
            "w3.bin": lambda x: _flip(x, len(x) - 1), "notes.txt": lambda x: _flip(x, 3, 99)}


CASES = {
    "same members, other bytes": lambda m: m,  # (another gzip level: the sha256 fallback)
    "changed": lambda m: _edit(m, change=_changed(m)),
    "reversed": lambda m: _edit(m, change=_changed(m), order=lambda n: n[::-1]),
    "rotated": lambda m: _edit(m, change=_changed(m), order=lambda n: n[1:] + n[:1]),
    "first large missing in B": lambda m: _edit(m, drop=["w0.bin"], change=_changed(m)),
    "last missing in B": lambda m: _edit(m, drop=["w3.bin"], change=_changed(m)),
    "extra in B, front": lambda m: _edit(m, add=[(0, "x.bin", _words(9, 300)),
                                                 (1, "b.txt", b"b"), (4, "a.txt", b"a")]),
    "extra in B, middle and end": lambda m: _edit(
        m, change=_changed(m), add=[(4, "x.bin", _words(9, 300)), (-1, "y.txt", b"y")]),
    "mixed": lambda m: _edit(m, drop=["w2.bin"], change=_changed(m),
                             order=lambda n: [n[-1]] + n[3:-1][::-1] + n[:3],
                             add=[(2, "x.bin", _words(9, 300))]),
    "sizes": lambda m: _edit(m, change={"w0.bin": lambda x: x[:-64 * 3],
                                        "w2.bin": lambda x: x + b"abc",
                                        "notes.txt": lambda x: x[:-5]}),
    "many instructions": lambda m: _edit(m, change={
        "w1.bin": lambda x: _flip(x, *range(8, len(x), 64))}),
    "one member": lambda m: [("neff.json", b'{"a": 2}')],
}


def _neff(path: Path, members, level: int = 9, header=None) -> Path:
    tar = build_tar(members)
    path.write_bytes(wrap_payload(header or default_header(),
                                  gzip.compress(tar, compresslevel=level, mtime=0)))
    return path


def _tar(entries) -> bytes:
    """A tar written by Python's tarfile: (TarInfo, data) entries."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for info, data in entries:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _reg(name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _damaged_neffs(tmp: Path, members) -> dict[str, Path]:
    """NEFFs the reader refuses, the later ones only after their last member."""
    out = {}
    good = gzip.compress(build_tar(members), compresslevel=9, mtime=0)
    out["truncated gzip"] = tmp / "trunc.neff"
    out["truncated gzip"].write_bytes(wrap_payload(default_header(), good[:-6]))
    folder = tarfile.TarInfo("zz")
    folder.type = tarfile.DIRTYPE
    for key, extra in (("a folder of no member", [(folder, None)]),
                       ("a duplicate at the end", [_reg("w0.bin", b"x" * 64)])):
        tar = _tar([_reg(k, v) for k, v in members] + extra)
        out[key] = tmp / f"{len(out)}.neff"
        out[key].write_bytes(wrap_payload(default_header(), gzip.compress(tar, mtime=0)))
    bad = bytearray(out["truncated gzip"].read_bytes())
    bad[552] = 3  # lnc_size: refused from the header, before any member
    out["bad header"] = tmp / "hdr.neff"
    out["bad header"].write_bytes(bytes(bad))
    garbage = good + b"\x1f\x8b not gzip"
    out["garbage after the gzip"] = tmp / "garb.neff"
    out["garbage after the gzip"].write_bytes(wrap_payload(default_header(), garbage))
    return out


@pytest.fixture(scope="module")
def neffs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("members")
    a = _neff(tmp / "a.neff", BASE)
    bs = {case: _neff(tmp / f"b{i}.neff", make(list(BASE)), level=6)
          for i, (case, make) in enumerate(CASES.items())}
    return a, bs, _damaged_neffs(tmp, _edit(BASE, change=_changed(BASE)))


@pytest.mark.parametrize("limit", [None, 0, 1, 4, 50])
@pytest.mark.parametrize("case", list(CASES))
def test_in_step_reports_what_reading_both_whole_reported(neffs, case, limit):
    a, bs, _ = neffs
    b = bs[case]
    want = _run(_old_members_diff, a, b, limit)
    assert _run(D._neff_members_diff, a, b, limit) == want
    assert _run(D._neff_members_diff, b, a, limit) == _run(_old_members_diff, b, a, limit)
    if case == "many instructions":
        assert want[1] > 800


@pytest.mark.parametrize("case", ["reversed", "first large missing in B", "mixed",
                                  "many instructions", "extra in B, front"])
def test_the_fallbacks_report_the_same(neffs, monkeypatch, case):
    """B's members held by their digest and read again (HOLD_BYTES 0), and the differences
    past DEFER_MAX (the NEFFs checked whole, then compared again)."""
    a, bs, damaged = neffs
    b = bs[case]
    pairs = [(a, b), (b, a), (a, damaged["truncated gzip"]), (a, damaged["bad header"])]
    want = [_run(_old_members_diff, x, y, limit) for x, y in pairs for limit in (None, 3)]
    for hold, most in ((0, 10_000), (1 << 30, 1), (0, 1), (64 * 700, 5)):
        monkeypatch.setattr(D, "HOLD_BYTES", hold)
        monkeypatch.setattr(D, "DEFER_MAX", most)
        got = [_run(D._neff_members_diff, x, y, limit) for x, y in pairs for limit in (None, 3)]
        assert got == want, (hold, most)


@pytest.mark.parametrize("case", ["changed", "reversed", "first large missing in B",
                                  "extra in B, front", "many instructions"])
def test_the_readers_errors_whenever_found_are_as_before(neffs, case, monkeypatch):
    """B's refusal, even found after its last member with differences found before it, is
    one damaged line and no member difference; A's is raised, also when B's comes first."""
    a, bs, damaged = neffs
    for why, bad in damaged.items():
        for x, y in ((a, bad), (bad, a), (bad, bs[case]), (bs[case], bad), (bad, bad)):
            for limit in (None, 2):
                got = _run(D._neff_members_diff, x, y, limit)
                assert got == _run(_old_members_diff, x, y, limit), (why, x.name, y.name)
    got = _run(D._neff_members_diff, a, damaged["a duplicate at the end"], None)
    assert [d.field for _, lines in got[0] for d in lines] == ["x", "damaged"]
    assert "duplicate member name" in got[0][1][1][0].b
    with pytest.raises(NrtRewriteError, match="a duplicate|duplicate member name"):
        D._neff_members_diff(D.Report(None), "m.neff", damaged["a duplicate at the end"],
                             bs[case])


def test_the_whole_diff_of_lowered_outputs_is_unchanged(tmp_path, monkeypatch):
    """diff_outputs and the CLI's text and --json through _neff_diff: the header lines, the
    members, the sha256 fallback."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.golden import lower_to
    fix = ROOT / "fixtures" / "mix8.neff"
    a = lower_to(fix, tmp_path / "a", [0])
    b = lower_to(fix, tmp_path / "b", [0])
    neff = json.loads((a / "manifest.json").read_text())["output_neff"]["name"]
    c = read_container((b / neff).read_bytes(), verify_hash=False)
    members = [(k, bytes(v)) for k, v in c.members.items()]
    stream = next(k for k, v in members if k.endswith(".bin") and len(v) >= 128)
    members = _edit(members, change={stream: lambda x: _flip(x, 70, len(x) - 2)},
                    order=lambda n: n[::-1], add=[(1, "extra/n.txt", b"n")])
    (b / neff).write_bytes(build_container(c.header, members))
    outs = []
    for fn in (_old_members_diff, D._neff_members_diff):
        monkeypatch.setattr(D, "_neff_members_diff", fn)
        outs.append([CliRunner().invoke(main, ["diff", str(a), str(b), *args]).output
                     for args in ([], ["--json"], ["--max", "1"])])
    assert outs[0] == outs[1]
    assert f"{neff}:extra/n.txt member: False != True" in outs[1][0]
    assert f"{neff}:{stream}[1] " in outs[1][0]


@pytest.mark.parametrize("case", ["longer", "same-length"])
def test_a_json_member_that_is_not_json_is_compared_by_its_bytes(tmp_path, case):
    """CLI.md: a JSON member is compared key by key, and one that cannot be read as JSON by
    its bytes. B's ``sg00/def.json`` of c7c8 (NEFF-LIKE.md: the subgraph's var table) with
    " x" appended is its byte count; with its closing brace (before its final newline, byte
    len - 2, 0x7d) made a bracket (0x5d) it is one differing byte at that offset."""
    from nrtrewrite.golden import lower_to
    fix = ROOT / "fixtures" / "c7c8.neff"
    a = lower_to(fix, tmp_path / "a", None)
    b = lower_to(fix, tmp_path / "b", None)
    neff = json.loads((a / "manifest.json").read_text())["output_neff"]["name"]
    c = read_container((b / neff).read_bytes(), verify_hash=False)
    members = [(k, bytes(v)) for k, v in c.members.items()]
    old = dict(members)["sg00/def.json"]
    assert old.endswith(b"}\n")
    new = old + b" x" if case == "longer" else old[:-2] + b"]\n"
    members = [(k, new if k == "sg00/def.json" else v) for k, v in members]
    (b / neff).write_bytes(build_container(c.header, members))
    lines = [d.line() for d in D.diff_outputs(a, b)]
    want = (f"{neff}:sg00/def.json bytes: {len(old)} != {len(old) + 2}" if case == "longer"
            else f"{neff}:sg00/def.json 1 differing byte, the first at offset "
            f"0x{len(old) - 2:x}: 125 != 93")
    assert want in lines, lines
    assert not [x for x in lines if x.startswith(f"{neff}:sg00/def.json") and x != want], lines


# ---------------------------------------------------------------------------
# memory

MIB = 1 << 20


def _big(n: int, seed: int) -> list[tuple[str, bytes]]:
    """``n`` members of 4 MiB each, compressible (quick to write), each its own bytes."""
    word = bytes((seed + i) % 256 for i in range(64))
    return [(f"big{i}.bin", bytes([i]) * 64 + word * (4 * MIB // 64 - 1)) for i in range(n)]


@pytest.mark.parametrize("case", ["same order", "reversed", "first missing in B"])
def test_one_member_of_each_side_is_held_at_a_time(tmp_path, monkeypatch, case):
    import tracemalloc
    members = _big(6, 1)
    changed = _edit(members, change={k: (lambda x: _flip(x, len(x) - 60)) for k, _ in members})
    if case == "reversed":
        changed = changed[::-1]
    elif case == "first missing in B":
        changed = changed[1:]
    a = _neff(tmp_path / "a.neff", members, level=1)
    b = _neff(tmp_path / "b.neff", changed, level=1)
    monkeypatch.setattr(D, "HOLD_BYTES", 4 * MIB)  # (at most one of B's members held)
    peaks = []
    for fn in (D._neff_members_diff, _old_members_diff):
        tracemalloc.start()
        try:
            rep = D.Report(None)
            fn(rep, "m.neff", a, b)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert rep.count == 6  # (the first missing in B: a member line and five changed)
    new, old = peaks
    # the old way held both NEFFs' members (48 MiB). In step: one member of each side and
    # the buffer of the one being read (12.2 MiB; 16.2 if the last ones were kept while
    # the next are read); one more of B's when it is held (HOLD_BYTES) or read again
    assert old > 40 * MIB
    most = {"same order": 3.5, "reversed": 4.75, "first missing in B": 4.5}[case]
    assert new < most * 4 * MIB, new / MIB


def test_a_member_of_a_is_not_held_while_a_is_read_to_its_end_after_b_s_damage(
        tmp_path, monkeypatch):
    """B's reader error after its first members: A is then read to its end for its own
    errors (``_drain``), and A's member compared last is no longer held (4 MiB each here:
    what is traced when the drain begins is the small rest, well under one member).  Passes
    before and after the tidy that moved the loop into ``_in_step`` (the release was a
    ``xa = xb = None`` pyflakes read as unused); fails where A's member stays bound."""
    import tracemalloc
    members = _big(6, 2)
    changed = _edit(members, change={k: (lambda x: _flip(x, len(x) - 60)) for k, _ in members})
    a = _neff(tmp_path / "a.neff", members, level=1)
    good = gzip.compress(build_tar(changed), compresslevel=1, mtime=0)
    b = tmp_path / "b.neff"  # (cut in its third member: damaged after two)
    b.write_bytes(wrap_payload(default_header(), good[:len(good) // 3]))
    at_drain = []
    drain = D._drain

    def traced_drain(walk):
        at_drain.append(tracemalloc.get_traced_memory()[0])
        drain(walk)

    monkeypatch.setattr(D, "_drain", traced_drain)
    tracemalloc.start()
    try:
        rep = D.Report(None)
        D._neff_members_diff(rep, "m.neff", a, b)
    finally:
        tracemalloc.stop()
    assert rep.count == 1  # (the one damaged line: the members' differences not reported)
    assert len(at_drain) == 1 and at_drain[0] < 2 * MIB, at_drain[0] / MIB


def test_the_peak_rss_of_diff_holds_one_member_of_each_side_not_the_files(tmp_path):
    """A fresh process, NEFFs of four 16 MiB incompressible members (64 MiB files): the
    peak RSS while comparing grows by about one member of each side, not by both files
    (memory-mapped: their pages are dropped as they are decompressed) nor both NEFFs'
    members (before: about 256 MB)."""
    rng = random.Random(7)
    members = [(f"w{i}.bin", rng.randbytes(16 * MIB)) for i in range(4)]
    a = _neff(tmp_path / "a.neff", members, level=0)
    b = _neff(tmp_path / "b.neff", _edit(members, change={
        k: (lambda x: _flip(x, len(x) - 60)) for k, _ in members}), level=0)
    del members
    code = textwrap.dedent("""
        import sys
        from nrtrewrite import diff as D
        def status(key):
            return next(int(l.split()[1]) for l in open("/proc/self/status")
                        if l.startswith(key)) << 10
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # the peak RSS reset to the current RSS
        except OSError:
            print("no reset")
            sys.exit()
        before = status("VmRSS")
        rep = D.Report(None)
        D._neff_members_diff(rep, "m.neff", sys.argv[1], sys.argv[2])
        print(rep.count, status("VmHWM") - before)
    """)
    res = subprocess.run([sys.executable, "-c", code, str(a), str(b)], capture_output=True,
                         text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         timeout=120)
    assert res.returncode == 0, res.stderr
    if res.stdout.startswith("no reset"):
        pytest.skip("the peak RSS cannot be reset (/proc/self/clear_refs)")
    count, grew = map(int, res.stdout.split())
    assert count == 4
    assert grew < 96 * MIB, grew / MIB


@pytest.mark.parametrize("step", [64 << 10, 1 << 20, 8 << 20])
def test_the_gunzip_never_reads_again_what_it_said_it_was_done_with(monkeypatch, step):
    """``on_consumed(offset)``: overwriting the payload before ``offset`` as soon as it is
    told changes nothing decompressed (gzip members of many sizes, zero padding)."""
    from nrtrewrite.neff import container
    monkeypatch.setattr(container, "_CONSUMED_STEP", step)
    rng = random.Random(3)
    sizes = (9 * MIB, 100, 0, 3 * MIB, 70_000, 1, 200_000, 5 * MIB)
    parts = [rng.randbytes(n) for n in sizes] + [bytes(20 * MIB)]
    payload = bytearray(b"".join(gzip.compress(p, compresslevel=1, mtime=0) for p in parts)
                        + bytes(5000))
    told = []

    def consumed(off):
        assert off >= (told[-1] if told else 0)
        told.append(off)
        payload[:off] = bytes(off)  # (what dropped pages would read if they were read again)

    gz = _Gunzip(payload, 1 << 40, on_consumed=consumed)
    out = io.BytesIO()
    while chunk := gz.chunk():
        out.write(chunk)
    assert out.getvalue() == b"".join(parts)
    assert len(told) >= len(payload) // step // 2 and told[-1] > len(payload) - 2 * step


def test_an_instruction_streams_count_line_comes_whatever_max(tmp_path):
    """The fifty-fifth session's "Left" (review 55h): past ``--max`` only artifacts got
    per-file count lines.  An instruction stream (records of 64-byte words) has the same
    shape: after its instructions' lines, whatever ``--max``, ``NEFF:MEMBER: K of N
    instructions differ (FIELD COUNT, ...)`` over the raw fields (the header's,
    NEFF-LIKE.md §2, and ``operands``, bytes 12..63), in ``--json``'s ``files``.  Three of
    ar2's 4 sp.bin words changed by hand: word 0 byte 20 (an operand byte), word 1 bytes 4
    (``wait_mode``) and 40 (an operand byte), word 2 byte 8 (``semaphore_value``)."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.golden import lower_to
    a = lower_to(ROOT / "fixtures" / "ar2.neff", tmp_path / "a", None)
    b = tmp_path / "b"
    import shutil
    shutil.copytree(a, b)
    name = json.loads((a / "manifest.json").read_text())["output_neff"]["name"]
    data = (a / name).read_bytes()
    c = read_container(data, verify_hash=False)
    members = [(k, bytes(v)) for k, v in c.members.items()]
    k = next(i for i, (m, _) in enumerate(members) if m == "sg00/sp.bin")
    assert len(members[k][1]) == 4 * 64
    members[k] = ("sg00/sp.bin", _flip(members[k][1], 20, 64 + 4, 64 + 40, 128 + 8))
    (b / name).write_bytes(wrap_payload(c.header, gzip.compress(build_tar(members), mtime=0)))
    other = (b / name).read_bytes()
    size_a, size_b = (int.from_bytes(x[16:24], "little") for x in (data, other))
    header = [f"{name} header.data_size: {size_a} != {size_b}"] if size_a != size_b else []
    header.append(f"{name} header.hash: '{data[172:204].hex()}' != '{other[172:204].hex()}'")
    count = (f"{name}:sg00/sp.bin: 3 of 4 instructions differ (wait_mode 1, semaphore_value "
             "1, operands 2)")
    n = len(header) + 3
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", "1"])
    assert res.exit_code == 1
    assert res.stdout == (f"{header[0]}\n{count}\n... {n - 1} more differences (--max 0 "
                          f"shows all)\n{n} difference(s)\n")
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--max", "0"])
    lines = res.stdout.splitlines()
    assert lines[-2:] == [count, f"{n} difference(s)"]
    assert [x.split("]")[0] for x in lines[len(header):-2]] == [
        f"{name}:sg00/sp.bin[{i}" for i in (0, 1, 1, 2)]  # (word 1: two fields)
    doc = json.loads(CliRunner().invoke(main, ["diff", str(a), str(b), "--json"]).stdout)
    assert doc["files"] == [{
        "where": f"{name}:sg00/sp.bin", "records_a": 4, "records_b": 4,
        "differing_records": 3,
        "fields": {"opcode": 0, "length_dw": 0, "reserved_2": 0, "wait_mode": 1, "wait_idx": 0,
                   "update_mode": 0, "update_idx": 0, "semaphore_value": 1, "operands": 2}}]
