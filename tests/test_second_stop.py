"""A second stop ends a process the first one could not (docs/CLI.md "Errors"): the
standard output a pipe nobody reads, the first stop (SIGTERM, SIGHUP, Ctrl-C) does what it
always does (its one line, a piece of a streamed ``--json`` document whole, the document
closed with ``"error"``, temporary folders removed), and then waits on the pipe: a command
that printed its line hangs in the exit flush of stdout, a streamed document waits for its
piece to be written whole, or for the ``"error"`` that closes it.  Until 2026-12-06 every
later stop was ignored there, and only SIGKILL ended the process; now a second stop ends
it at once, with the first one's line (printed once) and status, the document cut.  One
stop alone still waits: a slow reader gets the whole output.

Every process here is the ``nrtrewrite`` console (``python -m nrtrewrite``) writing into a
pipe this test holds and reads only when it says so; each is waited for a state (blocked in
a write of the pipe, a signal taken), never for a time, and killed at the end if it still
runs."""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from test_atomic_output import FIX, ROOT, env
from test_stop_every_moment import _default_stops
from test_stop_json_streams import _blocked_writing, _rank_file

LINES = {signal.SIGTERM: "nrtrewrite: terminated by SIGTERM",
         signal.SIGHUP: "nrtrewrite: terminated by SIGHUP", signal.SIGINT: "Aborted!"}
STATUS = {signal.SIGTERM: 143, signal.SIGHUP: 129, signal.SIGINT: 130}

#: (first stop, second stop)
PAIRS = [(signal.SIGTERM, signal.SIGTERM), (signal.SIGHUP, signal.SIGTERM),
         (signal.SIGINT, signal.SIGINT), (signal.SIGTERM, signal.SIGINT)]


def _named(value):
    """A test id: a signal by its name."""
    return signal.Signals(value).name if isinstance(value, signal.Signals) else None


def _buffered_env() -> dict:
    """The suite's environment without PYTHONUNBUFFERED: stdout block-buffered, as a shell
    runs the command."""
    return {k: v for k, v in env().items() if k != "PYTHONUNBUFFERED"}


class _Piped:
    """``nrtrewrite ARGS`` (the console script's ``main``, or ``-c CODE``) with stdout the
    write end of a pipe of which ``room`` bytes are free (the rest filled with ``x``), and
    stderr a pipe; nothing reads stdout until :meth:`drain`."""

    def __init__(self, args, *, room: int | None = None, environ=None, code: str | None = None,
                 together: bool = False):
        self.r, w = os.pipe()
        self.filled = 0
        if room is not None:
            size = fcntl.fcntl(w, 1032)  # F_GETPIPE_SZ
            flags = fcntl.fcntl(w, fcntl.F_GETFL)
            fcntl.fcntl(w, fcntl.F_SETFL, flags | os.O_NONBLOCK)
            while self.filled < size - room:
                self.filled += os.write(w, b"x" * min(4096, size - room - self.filled))
            fcntl.fcntl(w, fcntl.F_SETFL, flags)
        head = ["-c", code] if code is not None else ["-m", "nrtrewrite"]
        try:
            self.proc = subprocess.Popen([sys.executable, *head, *map(str, args)], cwd=ROOT,
                                         env=env() if environ is None else environ,
                                         stdout=w, stderr=w if together else subprocess.PIPE,
                                         preexec_fn=_default_stops)
        finally:
            os.close(w)

    def blocked(self) -> None:
        """Wait until the process sleeps in a write into the full pipe."""
        _blocked_writing(self.proc)

    def taken(self, signum: int) -> None:
        """Wait until ``signum`` sent to the process has been taken: no longer pending, and
        the process back in its write (a Python handler runs before the write is retried),
        so a second signal of the same number is not merged with it."""
        bit = 1 << (signum - 1)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                with open(f"/proc/{self.proc.pid}/status") as fh:
                    pending = {k: int(v, 16) for k, v in
                               (line.split(":") for line in fh
                                if line.startswith(("SigPnd", "ShdPnd")))}
            except (OSError, ValueError):
                break
            if not any(v & bit for v in pending.values()):
                break
            time.sleep(0.02)
        self.blocked()

    def stop(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def drain(self) -> bytes:
        """Everything the pipe holds past the filler, read to its end (the process gone);
        a pipe silent for a minute fails the test rather than hang it."""
        data = bytearray()
        while True:
            if not select.select([self.r], [], [], 60)[0]:
                pytest.fail("the process neither wrote nor ended")
            if not (chunk := os.read(self.r, 1 << 16)):
                return bytes(data[self.filled:])
            data += chunk

    def line(self) -> bytes:
        """The next line on stderr (a minute at most)."""
        if not select.select([self.proc.stderr], [], [], 60)[0]:
            pytest.fail("no line on stderr")
        return self.proc.stderr.readline()

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        os.close(self.r)


@pytest.fixture
def piped():
    made: list[_Piped] = []

    def start(*args, **kw) -> _Piped:
        made.append(_Piped(*args, **kw))
        return made[-1]
    yield start
    for p in made:
        p.end()


def _ended(p: _Piped, first: int, stderr_before: bytes = b"") -> None:
    """The process ended with ``first``'s status and its one line on stderr, nothing else."""
    try:
        p.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the second stop did not end the process")
    err = stderr_before + p.proc.stderr.read()
    assert (p.proc.returncode, err.decode()) == (STATUS[first], LINES[first] + "\n")


@pytest.mark.parametrize("first, second", PAIRS, ids=_named)
@pytest.mark.parametrize("buffered", [False, True])
def test_a_second_stop_ends_a_streamed_document_waiting_on_its_piece(tmp_path, piped, first,
                                                                     second, buffered):
    """``dump --json`` blocked writing its first block of records (65,536, megabytes) into a
    pipe nobody reads: the first stop waits for the block to be whole, the second ends the
    process at once with the first's line and status; the document is cut (no ``"error"``
    closes it), its head out."""
    path = _rank_file(tmp_path, "cce.bin", 65536 + 5, seed=3)
    p = piped(["dump", "--json", path], environ=_buffered_env() if buffered else None)
    p.blocked()
    p.stop(first)
    p.taken(first)
    assert p.proc.poll() is None  # (the first stop waits for the piece, as always)
    p.stop(second)
    _ended(p, first)
    out = p.drain()
    assert out.startswith(b'{\n "kind": "cce",\n "ranks": [') or buffered
    assert b'"error"' not in out
    with pytest.raises(ValueError):
        json.loads(out)


@pytest.mark.parametrize("first, second", PAIRS, ids=_named)
def test_a_third_stop_ends_a_process_whose_line_waits_on_the_same_pipe(tmp_path, piped, first,
                                                                       second):
    """stdout and stderr one pipe nobody reads (``2>&1 | less``): the first stop waits for
    the piece, the second forces the end and its line waits on the pipe in turn; a third
    ends the process at once with the first's status, the line unwritten (until 2026-12-06
    no number of stops ended it)."""
    path = _rank_file(tmp_path, "cce.bin", 65536 + 5, seed=3)
    p = piped(["dump", "--json", path], together=True)
    p.blocked()
    p.stop(first)
    p.taken(first)
    p.stop(second)
    p.taken(second)
    assert p.proc.poll() is None  # (its line waits on the pipe)
    p.stop(signal.SIGTERM)
    try:
        p.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the third stop did not end the process")
    assert p.proc.returncode == STATUS[first]


#: ``dump --json`` whose first block of records meets a stop (sent to itself as the block is
#: formatted, before its write) once stdout's pipe is full: the stop is raised, and the
#: ``"error"`` that closes the document waits on the pipe
_STOPPED_THEN_FULL = r"""
import fcntl, os, signal, sys
import nrtrewrite.cli.dump as D
real = D.record_texts
def record_texts(*a, **kw):
    flags = fcntl.fcntl(1, fcntl.F_GETFL)
    fcntl.fcntl(1, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        while True:
            os.write(1, b"y" * 4096)
    except BlockingIOError:
        pass
    fcntl.fcntl(1, fcntl.F_SETFL, flags)
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(10):
        pass
    return real(*a, **kw)
D.record_texts = record_texts
sys.argv = ["nrtrewrite"] + sys.argv[1:]
from nrtrewrite.console import main
main()
"""


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGHUP], ids=_named)
def test_a_second_stop_ends_the_closing_write_of_a_stopped_document(tmp_path, piped, second):
    """The first stop raised, the document's closing ``"error"`` blocked on the pipe (a
    block of 4 KiB fills it first: with PYTHONUNBUFFERED the head went out): a second stop
    ends the process with the first's line and status, the document not closed."""
    path = _rank_file(tmp_path, "cce.bin", 10, seed=4)
    p = piped(["dump", "--json", path], code=_STOPPED_THEN_FULL)
    p.blocked()
    p.stop(second)
    _ended(p, signal.SIGTERM)
    out = p.drain()
    assert out.startswith(b'{\n "kind": "cce"') and out.rstrip(b"y").endswith(b'"cce.bin": [')
    assert b'"error"' not in out


@pytest.mark.parametrize("first, second", PAIRS, ids=_named)
@pytest.mark.parametrize("args", [["inspect", FIX / "mix8.neff"],
                                  ["inspect", FIX / "ar2.neff", "--json"]])
def test_a_second_stop_ends_the_exit_flush_after_the_first_one_s_line(piped, first, second,
                                                                      args):
    """A command that prints at once (``inspect``'s tables, its ``--json`` document), stdout
    block-buffered and a pipe with 1,000 bytes free that nobody reads: the first stop prints
    its line, and the process waits in the exit flush of what stdout holds; the second ends
    it at once, no second line."""
    p = piped(args, room=1000, environ=_buffered_env())
    p.blocked()
    p.stop(first)
    line = p.line()  # (the first stop reported: its cleanup is done)
    assert line.decode() == LINES[first] + "\n"
    p.blocked()  # in the exit flush
    p.stop(second)
    _ended(p, first, line)


@pytest.mark.parametrize("first", [signal.SIGTERM, signal.SIGINT], ids=_named)
def test_one_stop_during_the_exit_flush_waits_for_a_slow_reader(piped, first):
    """``schedule --json`` (3 KiB: in stdout's buffer until the exit flush), the pipe full:
    a stop while the flush waits is reported once it is done, so a reader that comes late
    gets the whole document, then the line and the status (until 2026-12-06 Python refused
    the stop's own flush inside the flush: a ``RuntimeError: reentrant call`` traceback and
    no line)."""
    args = ["schedule", FIX / "ar2.neff", "--rank", "0", "--json"]
    want = subprocess.run([sys.executable, "-m", "nrtrewrite", *map(str, args)], cwd=ROOT,
                          env=env(), capture_output=True, timeout=120).stdout
    assert json.loads(want)["rank"] == 0 and len(want) < 4096
    p = piped(args, room=0, environ=_buffered_env())
    p.blocked()
    p.stop(first)
    p.taken(first)
    assert p.proc.poll() is None
    out = p.drain()  # (reads as the process writes: the flush ends, then the process)
    _ended(p, first)
    assert out == want


@pytest.mark.parametrize("first, second", PAIRS[:3], ids=_named)
def test_a_second_stop_during_the_exit_flush_ends_it(piped, first, second):
    """As above, and a second stop before anything is read: the process ends at once with
    the first stop's line and status, the document lost in stdout's buffer."""
    p = piped(["schedule", FIX / "ar2.neff", "--rank", "0", "--json"], room=0,
              environ=_buffered_env())
    p.blocked()
    p.stop(first)
    p.taken(first)
    p.stop(second)
    _ended(p, first)
    assert p.drain() == b""


def test_a_second_stop_during_the_cleanup_is_still_ignored_in_the_console(tmp_path):
    """``lower`` through the console script (where a later stop may end the process):
    SIGHUP at rank 2, SIGTERM as the temporary folder is being removed; the removal goes on,
    nothing is left, the first stop's line and status."""
    from test_signal_cleanup import _TWO_SIGNALS, _run
    tail = 'from nrtrewrite.cli import main\nmain(args=sys.argv[1:], prog_name="nrtrewrite")\n'
    assert _TWO_SIGNALS.endswith(tail)
    script = _TWO_SIGNALS[:-len(tail)] + ('sys.argv = ["nrtrewrite"] + sys.argv[1:]\n'
                                          "from nrtrewrite.console import main\nmain()\n")
    proc = _run(script, tmp_path, "-j", "1", signals="SIGHUP SIGTERM")
    assert (proc.returncode, proc.stderr) == (129, "nrtrewrite: terminated by SIGHUP\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("buffered", [False, True])
def test_one_stop_still_gets_a_slow_reader_the_whole_document(tmp_path, piped, buffered):
    """One stop while ``dump --json`` waits on its first block: a reader that comes late
    gets that block whole and the document closed with ``"error"``, block-buffered stdout
    (PYTHONUNBUFFERED unset, as a shell runs it) or not."""
    path = _rank_file(tmp_path, "cce.bin", 2 * 65536 + 5, seed=5)
    p = piped(["dump", "--json", path], environ=_buffered_env() if buffered else None)
    p.blocked()
    p.stop(signal.SIGTERM)
    p.taken(signal.SIGTERM)
    out = p.drain()
    _ended(p, signal.SIGTERM)
    doc = json.loads(out)
    assert doc["error"] == "Terminated: 15"
    assert len(doc["ranks"][0]["files"]["cce.bin"]) == 65536  # (the block it waited on)
