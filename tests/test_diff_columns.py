"""``diff`` writes the lines of differing artifact records column by column
(``diff.record_line_texts``: ``artifacts.decode_columns`` and one format string per field):
every line must be exactly what the record-at-a-time reference writes, ``Difference.line()``
(control characters escaped) or ``json.dumps({"index": ..., **Difference.to_json()})``, for
any bytes, so that ``--max 0`` of a large output is fast and says the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from nrtrewrite import diff as D
from nrtrewrite.artifacts import SPAD_OVERLAY_ALGOS
from nrtrewrite.cli import main
from nrtrewrite.emit import formats as F
from nrtrewrite.errors import escape_controls
from nrtrewrite.golden import lower_to

FIX = Path(__file__).resolve().parents[1] / "fixtures"
NAMES = sorted(F.ARTIFACTS)
WHERE = "rank-0003/{}"


def reference(index, where, name, recs, xa, xb, as_json):
    """The record-at-a-time lines: one decoded dict per record and side."""
    out = []
    for j, (r, ra, rb) in enumerate(zip(recs.tolist(), xa, xb)):
        for d in D._record_lines(where, name, r, ra, rb):
            out.append(json.dumps({"index": index + j, **d.to_json()}, default=str) if as_json
                       else escape_controls(d.line()))
    return out


def columns(index, where, name, recs, xa, xb, as_json):
    return D.record_line_texts(index, where, name, recs, xa, xb, as_json=as_json,
                               escape=str if as_json else escape_controls)


def pair_of(name: str, rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random records and a copy with random bytes changed in every record (one to
    three bytes each: one field or several)."""
    dtype = F.ARTIFACTS[name][0]
    xa = np.frombuffer(rng.bytes(dtype.itemsize * n), dtype).copy()
    raw = bytearray(xa.tobytes())
    for j in range(n):
        for off in rng.choice(dtype.itemsize, rng.integers(1, 4), replace=False):
            raw[j * dtype.itemsize + int(off)] ^= int(rng.integers(1, 256))
    return xa, np.frombuffer(bytes(raw), dtype).copy()


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_random_differences_read_as_the_reference_writes_them(name, as_json):
    """Unknown enum codes, a dma length of 0, hex address fields, array fields, several
    fields of one record: the same lines in the same order."""
    rng = np.random.default_rng(len(name) + 7 * as_json)
    xa, xb = pair_of(name, rng, 2000)
    if name == "dma.bin":
        xa["len_ctrl"][::5] &= ~np.uint32(0xFFFF)
    if name == "spad.bin":  # one key set on both sides: ring-family entries only
        xa["alg"] &= 0xF0  # algo_type 0: RING
        xb["alg"] &= 0xF0
        keep = (xa.view(np.uint64) != xb.view(np.uint64)).reshape(len(xa), -1).any(axis=1)
        xa, xb = xa[keep], xb[keep]
    recs = np.sort(rng.choice(10**7, len(xa), replace=False))
    got = columns(41, WHERE.format(name), name, recs, xa, xb, as_json)
    assert got is not None
    assert got == reference(41, WHERE.format(name), name, recs, xa, xb, as_json)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.sampled_from(NAMES), st.integers(1, 40), st.integers(0, 2**32 - 1), st.booleans())
def test_any_differences_read_as_the_reference_writes_them(name, n, seed, as_json):
    rng = np.random.default_rng(seed)
    xa, xb = pair_of(name, rng, n)
    recs = np.arange(n) * 3 + 5
    got = columns(0, WHERE.format(name), name, recs, xa, xb, as_json)
    want = reference(0, WHERE.format(name), name, recs, xa, xb, as_json)
    if got is None:  # only where A and B decode some record with other keys
        assert name == "spad.bin"
        overlay = [np.isin(x["alg"] & 0xF, list(SPAD_OVERLAY_ALGOS)) for x in (xa, xb)]
        assert overlay[0].any() or overlay[1].any()
    else:
        assert got == want


def test_a_hand_made_difference_reads_as_formats_md_says():
    """One dma.bin record changed in its generation (len_ctrl bits 25:24) and its buf_ptr,
    another in its direction (meta_ctrl bit 4): the lines worked out by hand from
    docs/FORMATS.md §5 (raw words by offset, then the bit fields; buf_ptr in hex as an
    address), not through a decoder."""
    xa = np.zeros(2, F.BD_DTYPE)
    xa["len_ctrl"] = 100  # length 100, gen 0
    xa["buf_ptr"] = 0x1000
    xb = xa.copy()
    xb["len_ctrl"][1] = 100 | (3 << 24)  # gen 3
    xb["buf_ptr"][1] = 0x1040
    xb["meta_ctrl"][0] = 1 << 4  # S2M: dir
    recs = np.array([7, 9])
    assert columns(0, "rank-0000/dma.bin", "dma.bin", recs, xa, xb, False) == [
        "rank-0000/dma.bin[7] meta_ctrl: 0 != 16",
        "rank-0000/dma.bin[7] dir: 'M2S' != 'S2M'",
        f"rank-0000/dma.bin[9] len_ctrl: 100 != {100 | 3 << 24}",
        "rank-0000/dma.bin[9] buf_ptr: 0x1000 != 0x1040",
        "rank-0000/dma.bin[9] gen: 0 != 3"]
    lines = [json.loads(t) for t in columns(5, "rank-0000/dma.bin", "dma.bin", recs, xa, xb,
                                            True)]
    assert lines[1] == {"index": 5, "where": "rank-0000/dma.bin", "record": 7, "field": "dir",
                        "path": ["dir"], "a": "M2S", "b": "S2M", "a_present": True,
                        "b_present": True}
    assert [(d["index"], d["field"], d["a"], d["b"]) for d in lines[2:]] == [
        (6, "len_ctrl", 100, 100 | 3 << 24), (6, "buf_ptr", 0x1000, 0x1040), (6, "gen", 0, 3)]


def test_control_characters_and_percent_signs_in_the_names_are_written_as_the_reference():
    xa, xb = pair_of("sem.bin", np.random.default_rng(3), 50)
    recs = np.arange(50)
    # (":" in a where: a NEFF member's line, whose numbers are never hex; not an artifact's)
    for where in ("rank-0000/\x1b[2Jsem%s.bin", "r%d\u2028/sem.bin", "x.neff:sg00/sem.bin"):
        for as_json in (False, True):
            assert columns(0, where, "sem.bin", recs, xa, xb, as_json) == \
                reference(0, where, "sem.bin", recs, xa, xb, as_json)


def test_records_the_column_path_does_not_take_are_left_to_the_reference():
    """spad.bin entries decoded with other keys in A and B (a ring entry become a mesh
    one), and records with no differing field (never handed over by diff: a backstop)."""
    xa = np.zeros(3, F.SPAD_DTYPE)
    xb = xa.copy()
    xb["alg"][1] = int(min(SPAD_OVERLAY_ALGOS))
    assert columns(0, "s", "spad.bin", np.arange(3), xa, xb, False) is None
    xa, xb = pair_of("cce.bin", np.random.default_rng(1), 4)
    xb[2] = xa[2]
    assert columns(0, "c", "cce.bin", np.arange(4), xa, xb, True) is None


# ---------------------------------------------------------------------------
# the command, against the record-at-a-time path


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    """ar2 lowered, and a copy with bytes changed in every other record of every artifact
    (spad.bin: ring entries made mesh ones too, so both paths run in one diff)."""
    base = tmp_path_factory.mktemp("diffcols")
    a = lower_to(FIX / "ar2.neff", base / "a", None)
    b = base / "b"
    shutil.copytree(a, b)
    rng = np.random.default_rng(11)
    for f in sorted(b.glob("rank-*/*.bin")):
        dtype = F.ARTIFACTS[f.name][0]
        recs = np.fromfile(f, dtype)
        if not recs.size:
            continue
        raw = np.frombuffer(recs.tobytes(), np.uint8).reshape(recs.size, -1).copy()
        rows = np.arange(0, recs.size, 2)
        cols = rng.integers(0, dtype.itemsize, rows.size)
        raw[rows, cols] ^= rng.integers(1, 256, rows.size, dtype=np.uint8)
        if f.name == "spad.bin":
            raw[rows, 1] = (raw[rows, 1] & 0xF0) | int(min(SPAD_OVERLAY_ALGOS))
        raw.tofile(f)
    return a, b


@pytest.mark.parametrize("args", [["--max", "0"], ["--max", "0", "--json"],
                                  ["--max", "7"], ["--max", "7", "--json"],
                                  ["--max", "150", "--json"]])
def test_the_command_writes_what_the_record_at_a_time_path_writes(changed, monkeypatch, args):
    """Blocks of 4 records (RECORDS_BLOCK), so a file's shown records span several
    blocks and --max stops inside one; the output byte for byte the reference's."""
    a, b = changed
    monkeypatch.setattr(D, "RECORDS_BLOCK", 4)
    taken = []
    real = D.record_line_texts

    def spy(*x, **k):
        texts = real(*x, **k)
        taken.append((x[2], texts is not None))
        return texts

    monkeypatch.setattr("nrtrewrite.cli.diff.record_line_texts", spy)
    fast = CliRunner().invoke(main, ["diff", str(a), str(b), *args])
    # every block of a file other than spad.bin went the column way
    assert taken and all(ok for name, ok in taken if name != "spad.bin")
    assert any(name != "spad.bin" for name, _ in taken)
    monkeypatch.setattr("nrtrewrite.cli.diff.record_line_texts", lambda *x, **k: None)
    slow = CliRunner().invoke(main, ["diff", str(a), str(b), *args])
    assert fast.exit_code == slow.exit_code == 1, (fast.output, slow.output)
    assert fast.stdout == slow.stdout
    if "--json" in args:
        doc = json.loads(fast.stdout)
        assert doc["shown"] == int(args[1]) or doc["shown"] == doc["count"]
        indices = [d["index"] for d in doc["differences"]]
        assert indices == sorted(indices) and len(set(indices)) == doc["shown"]
