"""``diff`` of the FIFO files slice by slice (docs/CLI.md "diff", review 59l): a record added
at the end of one channel's ``fifo`` slice is one added record of that channel, not changes of
every record after it; the records are built by hand from FORMATS §8's layout (72-byte
``net_src_addr``: ``net_op_idx`` u32 at 0, ``mark`` u32 at 36, 2 = EXEC_COMPLETE), the
expected indices and counts worked out from the rank manifest's slices."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from nrtrewrite import diff as D
from tests.conftest import FIXTURES, ROOT

SRC_SIZE = 72  # FORMATS §8: net_src_addr
DEST_SIZE = 48  # net_dest_addr
OPS_SIZE = 96  # net_ops_info


@pytest.fixture(scope="module")
def lowered(tmp_path_factory) -> Path:
    """Rank 0 of two_node128 lowered (three channels with network traffic: 0, 4, 5)."""
    out = tmp_path_factory.mktemp("fifo") / "a"
    from nrtrewrite.cli import main
    from click.testing import CliRunner
    r = CliRunner().invoke(main, ["lower", str(FIXTURES / "two_node128.neff"), "--rank", "0",
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _append_to_slice(out: Path, channel: int, rec: bytes, key: str = "src",
                     fname: str = "net_src.bin", size: int = SRC_SIZE) -> int:
    """Insert ``rec`` at the end of ``channel``'s ``key`` slice of rank 0, the later slices'
    first records moved up one; returns the new record's index."""
    rdir = out / "rank-0000"
    man = json.loads((rdir / "manifest.json").read_text())
    data = (rdir / fname).read_bytes()
    at = None
    for item in man["fifo"]:
        first, count = item[key]
        if at is not None:
            item[key] = [first + 1, count]
        if item["channel"] == channel:
            at = first + count
            item[key] = [first, count + 1]
    assert at is not None
    (rdir / fname).write_bytes(data[:at * size] + rec + data[at * size:])
    (rdir / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True))
    return at


def _exec_complete(op: int) -> bytes:
    rec = bytearray(SRC_SIZE)
    struct.pack_into("<I", rec, 0, op)      # net_op_idx
    struct.pack_into("<I", rec, 36, 2)      # mark: EXEC_COMPLETE
    return bytes(rec)


def _slice(out: Path, channel: int, key: str) -> tuple[int, int]:
    man = json.loads((out / "rank-0000" / "manifest.json").read_text())
    return tuple(next(i[key] for i in man["fifo"] if i["channel"] == channel))


def _report(a: Path, b: Path):
    lines, files, notes = [], [], []
    D.compare(a, b, D.Report(None, on_difference=lambda i, ls: lines.append(ls),
                             on_file=files.append,
                             on_positional=lambda w, why: notes.append((w, why))))
    return lines, files, notes


def test_one_record_appended_to_a_slice_is_one_added_record_of_its_channel(lowered, tmp_path):
    first, count = _slice(lowered, 4, "src")  # (4, 10): channel 4's src records
    b = _copy(lowered, tmp_path / "b")
    at = _append_to_slice(b, 4, _exec_complete(7))
    assert at == first + count
    lines, files, notes = _report(lowered, b)
    src = [ls for ls in lines if ls[0].where == "rank-0000/net_src.bin"]
    assert len(src) == 1  # one difference: the added record, no shifted record read as changed
    (d,) = src[0]
    assert (d.field, d.record, d.channel, d.a) == ("added", at, 4, D.ABSENT)
    assert d.b["net_op_idx"] == 7 and d.b["mark"] == 2 and d.b["mark_name"] == "EXEC_COMPLETE"
    assert "mark_name: 'EXEC_COMPLETE'" in d.line()
    assert d.line().startswith(f"rank-0000/net_src.bin[{at}] (channel 4) added: {{")
    (fc,) = [f for f in files if f.where == "rank-0000/net_src.bin"]
    assert (fc.channel, fc.records_a, fc.records_b, fc.added, fc.removed,
            fc.differing_records) == (4, count, count + 1, 1, 0, 0)
    assert fc.line() == (f"rank-0000/net_src.bin (channel 4): 0 of {count} common records "
                         f"differ, 1 record added ({count} != {count + 1} records)")
    assert not [ls for ls in lines if ls[0].where == "rank-0000/net_dest.bin"]
    assert not notes
    # the other way round: the record is removed, named by A's index
    lines, files, _ = _report(b, lowered)
    src = [ls for ls in lines if ls[0].where == "rank-0000/net_src.bin"]
    assert [(d.field, d.record, d.channel) for (d,) in src] == [("removed", at, 4)]
    (fc,) = [f for f in files if f.where == "rank-0000/net_src.bin"]
    assert (fc.added, fc.removed) == (0, 1)


def test_a_changed_record_after_an_added_one_names_its_channel_and_block(lowered, tmp_path):
    b = _copy(lowered, tmp_path / "b")
    at = _append_to_slice(b, 0, _exec_complete(0))
    first5, count5 = _slice(b, 5, "src")
    # channel 5's second record's size (FORMATS §8: u32 at 32) plus 9
    data = bytearray((b / "rank-0000" / "net_src.bin").read_bytes())
    i = first5 + 1
    old = struct.unpack_from("<I", data, i * SRC_SIZE + 32)[0]
    struct.pack_into("<I", data, i * SRC_SIZE + 32, old + 9)
    (b / "rank-0000" / "net_src.bin").write_bytes(bytes(data))
    # its block: the basic_block_id (u32 at 76 of a 96-byte net_ops_info, FORMATS §8) of
    # channel 5's ops, which are one block (their ids all equal)
    o0, on = _slice(lowered, 5, "ops")
    ops = (lowered / "rank-0000" / "net_ops.bin").read_bytes()
    ids = {struct.unpack_from("<I", ops, (o0 + k) * OPS_SIZE + 76)[0] for k in range(on)}
    (block,) = ids
    lines, files, _ = _report(lowered, b)
    src = [d for ls in lines for d in ls if d.where == "rank-0000/net_src.bin"]
    # (the added record's block is not named: channel 0's slice in B has two EXEC_COMPLETE
    # records for its one block, no longer split as FORMATS §8 says)
    assert [(d.field, d.record, d.channel, d.block) for d in src] == [
        ("added", at, 0, None), ("size", i - 1, 5, block)]  # (A's index: one before B's)
    assert (src[1].a, src[1].b) == (old, old + 9)
    text = "rank-0000/net_src.bin[%d] (channel 5, block %d) size: %d != %d" % (
        i - 1, block, old, old + 9)
    assert src[1].line() == text
    assert [(f.channel, f.added, f.differing_records) for f in files
            if f.where == "rank-0000/net_src.bin"] == [(0, 1, 0), (5, 0, 1)]
    # the CLI writes such lines column by column (record_line_texts): the same text, and
    # JSON with the channel and block
    cmd = [sys.executable, "-m", "nrtrewrite", "diff", str(lowered), str(b)]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert text in r.stdout.splitlines(), r.stdout
    doc = json.loads(subprocess.run(cmd + ["--json"], capture_output=True, text=True,
                                    env=env).stdout)
    (item,) = [x for x in doc["differences"]
               if x["where"] == "rank-0000/net_src.bin" and x["field"] == "size"]
    assert (item["record"], item["channel"], item["block"], item["a"], item["b"]) == (
        i - 1, 5, block, old, old + 9)


def test_cli_text_and_json_name_the_added_record(lowered, tmp_path):
    first, count = _slice(lowered, 5, "dest")
    b = _copy(lowered, tmp_path / "b")
    rec = bytearray(DEST_SIZE)  # (net_dest_addr: size u32 at 32 left 0)
    struct.pack_into("<I", rec, 36, 2)  # mark: EXEC_COMPLETE
    at = _append_to_slice(b, 5, bytes(rec), "dest", "net_dest.bin", DEST_SIZE)
    assert at == first + count
    cmd = [sys.executable, "-m", "nrtrewrite", "diff", str(lowered), str(b)]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stderr
    assert f"rank-0000/net_dest.bin (channel 5): 0 of {count} common records differ, 1 record " \
           f"added ({count} != {count + 1} records)" in r.stdout.splitlines()
    (line,) = [x for x in r.stdout.splitlines() if " added: " in x]
    assert line.startswith(f"rank-0000/net_dest.bin[{at}] (channel 5) added: {{")
    assert line.endswith("mark_name: 'EXEC_COMPLETE'}")
    r = subprocess.run(cmd + ["--json"], capture_output=True, text=True, env=env)
    doc = json.loads(r.stdout)
    (item,) = [x for x in doc["differences"] if x["where"] == "rank-0000/net_dest.bin"]
    got = (item["field"], item["record"], item["channel"], item["a_present"],
           item["b_present"], item["b"]["mark_name"])
    assert got == ("added", at, 5, False, True, "EXEC_COMPLETE")
    (f,) = [x for x in doc["files"] if x["where"] == "rank-0000/net_dest.bin"]
    assert (f["channel"], f["added"], f["removed"], f["records_a"], f["records_b"]) == (
        5, 1, 0, count, count + 1)
    assert "positional" not in doc


def test_invalid_slices_fall_back_to_position_and_say_so(lowered, tmp_path):
    b = _copy(lowered, tmp_path / "b")
    at = _append_to_slice(b, 0, _exec_complete(0))
    man = json.loads((b / "rank-0000" / "manifest.json").read_text())
    del man["fifo"]
    (b / "rank-0000" / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True))
    lines, files, notes = _report(lowered, b)
    assert [w for w, _ in notes] == ["rank-0000/net_src.bin"]  # (net_dest's bytes are equal)
    assert notes[0][1].startswith("B's fifo slices: ")
    n = (lowered / "rank-0000" / "net_src.bin").stat().st_size // SRC_SIZE
    counts = [d for ls in lines for d in ls
              if d.where == "rank-0000/net_src.bin" and d.field == "records"]
    assert [(d.a, d.b) for d in counts] == [(n, n + 1)]
    (fc,) = [f for f in files if f.where == "rank-0000/net_src.bin"]
    assert fc.channel is None and fc.differing_records == n - at  # every record after it
    r = subprocess.run([sys.executable, "-m", "nrtrewrite", "diff", str(lowered), str(b)],
                       capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert ("nrtrewrite: note: rank-0000/net_src.bin compared record by record by position, "
            "not by the rank manifests' fifo slices: B's fifo slices: ") in r.stderr


def test_b_damaged_midway_keeps_the_count_line_of_the_records_compared(lowered, tmp_path,
                                                                       monkeypatch):
    """A regression guard of the slice-by-slice rewrite of ``_records_diff``: B's read error
    after a block of records was compared still ends with that file's count line (as before
    the rewrite), then its ``damaged`` line.  sem.bin's 16-byte records, 10 to a block; B's
    record 3 has its value (u32 at 4, FORMATS §7) plus 1, B's second block cannot be read."""
    b = _copy(lowered, tmp_path / "b")
    sem = b / "rank-0000" / "sem.bin"
    data = bytearray(sem.read_bytes())
    assert len(data) >= 16 * 20
    struct.pack_into("<I", data, 3 * 16 + 4, struct.unpack_from("<I", data, 3 * 16 + 4)[0] + 1)
    sem.write_bytes(bytes(data))
    monkeypatch.setattr(D, "CHUNK_BYTES", 16 * 10)
    real, calls = D._read_block, []

    def read_block(fh, buf, nbytes, path):
        if path == sem:
            calls.append(path)
            if len(calls) == 2:
                raise OSError(5, "Input/output error")
        return real(fh, buf, nbytes, path)
    monkeypatch.setattr(D, "_read_block", read_block)
    lines, files, _ = _report(lowered, b)
    (fc,) = [f for f in files if f.where == "rank-0000/sem.bin"]
    assert fc.differing_records == 1 and fc.channel is None
    assert [d.field for ls in lines for d in ls if d.where == "rank-0000/sem.bin"][-1] \
        == "damaged"
