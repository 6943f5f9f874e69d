"""A stop (SIGTERM, SIGHUP, Ctrl-C) while ``dump --json`` or ``diff --json`` streams its
document never cuts a piece (found by a second exploratory tester: stopped while writing into
a pipe, 6 of 8 documents had half a record before the closing ``"error"``, and ``diff``'s
``count`` and ``shown`` missed the block just written).  A piece is written whole with the
count that says so (``cli.stops_deferred``), through the stream's binary buffer until every
byte is taken (``cli.WholeWriter``: CPython's ``BufferedWriter.write``, interrupted after
part of a large write into a pipe, returns the short count and ``TextIOWrapper`` drops the
rest)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

import nrtrewrite.cli as C
import nrtrewrite.cli.diff as cli_diff
import nrtrewrite.cli.dump as cli_dump
from nrtrewrite.artifacts import RecordFile
from nrtrewrite.cli import main
from nrtrewrite.emit import formats as F

from test_atomic_output import FIX, ROOT, env
from test_dump_json_columns import records

STOPS = [(signal.SIGTERM, 143, "Terminated: 15"), (signal.SIGHUP, 129, "Terminated: 1"),
         (signal.SIGINT, 130, "KeyboardInterrupt")]


@pytest.fixture(autouse=True)
def _handlers_restored(monkeypatch):
    """A stop leaves its signals ignored in the process (the CLI exits with it); these tests
    stop commands in the test process: each starts with the handlers of a fresh process
    (another test's stop may have left them ignored) and puts back what it found."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP,
                                                    signal.SIGINT)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(C, "LATE_STOPS_END_THE_PROCESS", False)  # (as in CliRunner's use)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _rank_file(tmp_path, name: str, n: int, seed: int = 1):
    rdir = tmp_path / "rank-0000"
    rdir.mkdir(exist_ok=True)
    rng = np.random.default_rng(seed)
    arr = records(name, rng.bytes(F.ARTIFACTS[name][0].itemsize * n))
    (rdir / name).write_bytes(arr.tobytes())
    return rdir / name


class _ShortBuffer:
    """A binary buffer that, at its ``at``-th write, takes the first half, then a signal
    comes, and it returns the short count: what CPython's ``BufferedWriter.write`` does when a
    signal interrupts a large write into a pipe."""

    def __init__(self, real, signum: int, at: int):
        self.real, self.signum, self.left = real, signum, at

    def write(self, b) -> int:
        self.left -= 1
        if self.left:
            return self.real.write(b)
        n = self.real.write(bytes(b[:len(b) // 2]))
        os.kill(os.getpid(), self.signum)
        for _ in range(10):  # (a Python handler runs between bytecodes)
            pass
        return n

    def flush(self) -> None:
        self.real.flush()


def _stop_at(signum: int, at: int):
    """A ``WholeWriter`` whose buffer is a :class:`_ShortBuffer`."""

    class Writer(C.WholeWriter):
        def __init__(self, stream):
            super().__init__(stream)
            self.buffer = _ShortBuffer(self.buffer, signum, at)

    return Writer


@pytest.mark.parametrize("signum, status, why", STOPS)
def test_dump_json_stopped_mid_write_is_one_document(tmp_path, monkeypatch, signum, status,
                                                     why):
    monkeypatch.setattr(RecordFile, "CHUNK", 100)
    path = _rank_file(tmp_path, "cce.bin", 1000)
    full = json.loads(CliRunner().invoke(main, ["dump", "--json", str(path)]).stdout)
    recs = full["ranks"][0]["files"]["cce.bin"]
    assert len(recs) == 1000
    # the head, the rank, the file, two blocks of records, the third cut
    monkeypatch.setattr(cli_dump, "WholeWriter", _stop_at(signum, 6))
    res = CliRunner().invoke(main, ["dump", "--json", str(path)])
    assert res.exit_code == status
    doc = json.loads(res.stdout)
    assert doc["error"] == why
    # the 3rd block written whole before the stop was raised: 300 records, each complete
    assert doc["ranks"][0]["files"]["cce.bin"] == recs[:300]


@pytest.mark.parametrize("signum, status, why", STOPS)
def test_diff_json_stopped_mid_write_counts_what_it_wrote(tmp_path, monkeypatch, signum, status,
                                                          why):
    a, b = tmp_path / "A", tmp_path / "B"
    assert CliRunner().invoke(main, ["lower", "-q", str(FIX / "ar2.neff"), "-o", str(a)]
                              ).exit_code == 0
    shutil.copytree(a, b)
    cce = b / "rank-0000" / "cce.bin"
    raw = bytearray(cce.read_bytes())
    raw[0::16] = bytes((x + 1) & 0xFF for x in raw[0::16])  # every record's first byte
    cce.write_bytes(raw)
    n = len(raw) // 16
    monkeypatch.setattr("nrtrewrite.diff.RECORDS_BLOCK", 4)
    full = json.loads(CliRunner().invoke(main, ["diff", "--json", "--max", "0", str(a), str(b)]
                                         ).stdout)
    assert full["count"] >= n > 8
    # the head, two blocks of differences, the third cut
    monkeypatch.setattr(cli_diff, "WholeWriter", _stop_at(signum, 4))
    res = CliRunner().invoke(main, ["diff", "--json", "--max", "0", str(a), str(b)])
    assert res.exit_code == status
    doc = json.loads(res.stdout)
    assert doc["error"] == why and doc["identical"] is None
    assert doc["count"] == doc["shown"] == len(doc["differences"])
    assert doc["differences"] == full["differences"][:len(doc["differences"])]
    assert [d["index"] for d in doc["differences"]] == list(range(doc["count"]))


def test_whole_writer_writes_every_byte_of_a_short_count(monkeypatch):
    """A buffer that takes fewer bytes than given (what CPython's BufferedWriter returns
    after a signal) gets the rest in further writes."""

    class Short:
        def __init__(self):
            self.data = bytearray()

        def write(self, b):
            take = bytes(b[:7])
            self.data += take
            return len(take)

        def flush(self):
            pass

    class Stream:
        buffer = Short()
        encoding, errors = "utf-8", "strict"

        def flush(self):
            pass

    w = C.WholeWriter(Stream())
    w.write("é" * 20 + "x")
    assert bytes(Stream.buffer.data) == ("é" * 20 + "x").encode()


def test_a_standard_output_without_a_buffer_gets_the_whole_stream():
    """A standard output that is text only (``io.StringIO``, as an application embedding
    the CLI redirects it) has no binary buffer to write into: the streamed JSON of
    ``schedule`` goes to it as text, the same document as on a real stream."""
    import contextlib
    import io

    args = ["schedule", str(FIX / "ar2.neff"), "--rank", "1", "--json"]
    want = CliRunner().invoke(main, args).stdout
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(args, standalone_mode=False)
    assert buf.getvalue() == want and json.loads(want)["rank"] == 1


def _blocked_writing(proc, timeout: float = 60.0) -> None:
    """Wait until ``proc`` sleeps in a write into its full pipe (Linux's ``wchan``:
    ``pipe_write``, ``anon_pipe_write``).  A fixed second was too short on a loaded machine
    (two cores at a load of 7: the first block took 1.5 s, the stop came before it and the
    document held no record).  Where ``wchan`` does not tell (no /proc, or ``0`` for a
    sleeping process where the kernel hides it), a second, as before."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{proc.pid}/wchan") as fh:
                where = fh.read().strip()
            with open(f"/proc/{proc.pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            break
        if "pipe_write" in where:
            return
        if state == "S" and where in ("", "0"):
            break  # (sleeping, and the kernel does not say where)
        time.sleep(0.05)
    time.sleep(1.0)


@pytest.mark.parametrize("signum, status, why", STOPS[:2])
def test_dump_json_into_a_full_pipe_stopped_is_one_document(tmp_path, signum, status, why):
    """The real case: the reader slow, the process blocked in a write of a block of some
    20 MB when the signal comes; the document then holds whole blocks of 65,536 records."""
    path = _rank_file(tmp_path, "cce.bin", 3 * 65536 + 5, seed=7)
    proc = subprocess.Popen([sys.executable, "-m", "nrtrewrite", "dump", "--json", str(path)],
                            cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            bufsize=0)  # (read(1) takes one byte, not a buffer-full)
    head = proc.stdout.read(1)  # the document has begun
    _blocked_writing(proc)  # the pipe full, the process blocked in a write
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    doc = json.loads(head + out)
    assert doc["error"] == why
    recs = doc["ranks"][0]["files"]["cce.bin"]
    assert len(recs) % 65536 == 0 and 0 < len(recs) < 3 * 65536
    assert err.decode().splitlines()[-1] == (
        f"nrtrewrite: terminated by {signal.Signals(signum).name}")


@pytest.mark.parametrize("signum, status, why", STOPS)
def test_schedule_json_stopped_mid_write_is_one_document(monkeypatch, signum, status, why):
    """``schedule --json`` streams an op at a time: a stop closes it with the ops so far."""
    import nrtrewrite.cli.schedule as cli_schedule
    args = ["schedule", str(FIX / "mix8.neff"), "--rank", "0", "--json"]
    full = json.loads(CliRunner().invoke(main, args).stdout)
    assert len(full["ops"]) == 9
    # the head, four ops, the fifth interrupted half way (and then finished)
    monkeypatch.setattr(cli_schedule, "WholeWriter", _stop_at(signum, 6))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == status
    doc = json.loads(res.stdout)
    assert doc == {"rank": 0, "ops": full["ops"][:5], "error": why}


def test_a_json_document_printed_at_once_is_not_cut(monkeypatch):
    """``explain --json`` (and ``inspect``, ``simulate``) print the document in one piece: a
    stop in the middle of it comes after it."""
    monkeypatch.setattr(C, "WholeWriter", _stop_at(signal.SIGTERM, 1))
    args = ["explain", str(FIX / "mix8.neff"), "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 143
    assert json.loads(res.stdout)["triggers"]


@pytest.mark.parametrize("signum, status, why", STOPS[:1])
def test_schedule_json_stopped_before_any_op_is_its_error_document(monkeypatch, signum, status,
                                                                   why):
    """A stop once the head is out and no op yet: the very bytes of the error document,
    ``json.dumps({"rank", "ops": [], "error"}, indent=1)`` (docs/CLI.md "schedule")."""
    import nrtrewrite.cli.schedule as cli_schedule
    monkeypatch.setattr(cli_schedule, "WholeWriter", _stop_at(signum, 1))
    res = CliRunner().invoke(main, ["schedule", str(FIX / "mix8.neff"), "--rank", "0",
                                    "--json"])
    assert res.exit_code == status
    assert res.stdout == json.dumps({"rank": 0, "ops": [], "error": why}, indent=1) + "\n"


class _StopBefore(C.WholeWriter):
    """A stop that comes as the first write begins, before a byte of it is out; later
    writes go out."""

    def write(self, text: str) -> None:
        if not getattr(self, "stopped", False):
            self.stopped = True
            raise C.Terminated(signal.SIGTERM)
        super().write(text)


def test_diff_json_stopped_before_its_first_byte_writes_nothing(tmp_path, monkeypatch):
    a = tmp_path / "A"
    assert CliRunner().invoke(main, ["lower", "-q", str(FIX / "ar2.neff"), "-o", str(a)]
                              ).exit_code == 0
    monkeypatch.setattr(cli_diff, "WholeWriter", _StopBefore)
    res = CliRunner().invoke(main, ["diff", "--json", str(a), str(a)])
    assert res.exit_code == 143 and res.stdout == ""


@pytest.mark.parametrize("at", [2, 5, 9])
def test_diff_json_stopped_among_differences_of_several_lines(tmp_path, monkeypatch, at):
    """Differences handed over one at a time (the manifests of two models' outputs, some of
    several lines, each line its own write): a stop keeps a difference's lines together
    and counts it."""
    a, b = tmp_path / "A", tmp_path / "B"
    for out, model in ((a, "ar2"), (b, "groups")):
        assert CliRunner().invoke(main, ["lower", "-q", str(FIX / f"{model}.neff"), "-o",
                                         str(out)]).exit_code == 0
    args = ["diff", "--json", "--max", "0", str(a), str(b)]
    full = json.loads(CliRunner().invoke(main, args).stdout)["differences"]
    assert len(full) > 9
    monkeypatch.setattr(cli_diff, "WholeWriter", _stop_at(signal.SIGTERM, at))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 143
    doc = json.loads(res.stdout)
    shown = doc["differences"]
    assert doc["count"] == doc["shown"] == shown[-1]["index"] + 1
    assert shown == [d for d in full if d["index"] < doc["count"]]  # whole differences
