"""A signal's clean stop cannot hang or leave the temporary folder (docs/RELIABILITY.md §4):
SIGTERM / SIGHUP raise ``cli.Terminated`` wherever the main thread is, even between a lock's
acquire and the ``with`` that would release it; the cleanup takes no lock (the fsync and
writer threads are abandoned, not joined), a second signal during the cleanup is ignored,
and a Terminated that Python wrapped (a ``RuntimeError`` of ``__set_name__`` during a lazy
import) is still a termination, not an internal error."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

import nrtrewrite.lower as lower_mod
from nrtrewrite.cli import Terminated, _interruption, main
from test_atomic_output import FIX, ROOT, env

#: Emulates the moment a signal's handler runs right after the C-level acquire of a queue's
#: mutex inside ``queue.Queue.put`` (``threading.Condition.__enter__``), in the main thread,
#: at the third rank's fsync hand-over: the Terminated leaves the mutex held.  The cleanup
#: used to call ``_Syncer.drain`` -> ``queue.put(None)`` and wait forever.
_LOCK_HELD = textwrap.dedent("""
    import os, signal, sys, threading
    import nrtrewrite.bundle as B
    calls = {"n": 0}
    arm = threading.local()
    real_add = B._Syncer.add
    def add(self, paths):
        calls["n"] += 1
        if calls["n"] == 3:
            arm.on = True
        return real_add(self, paths)
    B._Syncer.add = add
    real_enter = threading.Condition.__enter__
    def enter(self):
        r = self._lock.__enter__()
        if getattr(arm, "on", False) and threading.current_thread() is threading.main_thread():
            arm.on = False
            os.kill(os.getpid(), signal.SIGHUP)
            for _ in range(10):
                pass
        return r
    threading.Condition.__enter__ = enter
    from nrtrewrite.cli import main
    main(args=sys.argv[1:], prog_name="nrtrewrite")
""")

#: The first signal (``SIGNALS``' first name) at rank 2, the second as the first one's
#: cleanup starts removing the temporary folder.
_TWO_SIGNALS = textwrap.dedent("""
    import os, signal, sys
    import nrtrewrite.bundle as B
    import nrtrewrite.lower as L
    FIRST, SECOND = (getattr(signal, n) for n in os.environ["SIGNALS"].split())
    real_rmtree = B.shutil.rmtree
    def rmtree(path, *a, **kw):
        os.kill(os.getpid(), SECOND)
        for _ in range(10):
            pass
        return real_rmtree(path, *a, **kw)
    B.shutil.rmtree = rmtree
    real_emit = L._emit_batch
    def emit(builder, plan, batch, r, *a, **kw):
        if r == 2:
            os.kill(os.getpid(), FIRST)
            for _ in range(10):
                pass
        return real_emit(builder, plan, batch, r, *a, **kw)
    L._emit_batch = emit
    from nrtrewrite.cli import main
    main(args=sys.argv[1:], prog_name="nrtrewrite")
""")


def _run(script: str, tmp_path, *args, signals: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, "lower", "-q",
                           str(FIX / "mix8.neff"), "-o", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**env(), "SIGNALS": signals}, timeout=120,
                          preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL)
                                              for s in (signal.SIGTERM, signal.SIGHUP)]
                          + [signal.signal(signal.SIGINT, signal.default_int_handler)])


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_signal_inside_a_lock_neither_hangs_nor_leaves_the_folder(tmp_path, jobs):
    proc = _run(_LOCK_HELD, tmp_path, "-j", jobs)
    assert proc.returncode == 128 + signal.SIGHUP, proc.stderr
    assert proc.stderr == "nrtrewrite: terminated by SIGHUP\n"
    assert list(tmp_path.iterdir()) == []


def test_a_second_signal_during_the_cleanup_is_ignored(tmp_path):
    """SIGHUP at rank 2, then SIGTERM as the folder is being removed: the first one is
    reported, and the folder is gone (before: the second Terminated escaped the cleanup).
    One process (-j 1): in a pool the emitter runs in a worker, which SIGHUP kills."""
    proc = _run(_TWO_SIGNALS, tmp_path, "-j", "1", signals="SIGHUP SIGTERM")
    assert proc.returncode == 128 + signal.SIGHUP, proc.stderr
    assert proc.stderr == "nrtrewrite: terminated by SIGHUP\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("first, second, status, line", [
    ("SIGINT", "SIGINT", 130, "Aborted!"),  # Ctrl-C twice
    ("SIGINT", "SIGTERM", 130, "Aborted!"),
    ("SIGTERM", "SIGINT", 128 + signal.SIGTERM, "nrtrewrite: terminated by SIGTERM"),
])
def test_a_second_signal_of_any_kind_is_ignored(tmp_path, first, second, status, line):
    """Ctrl-C is guarded as SIGTERM and SIGHUP are: whichever signal comes second, the first
    one's cleanup finishes (before: a second KeyboardInterrupt cut the folder's removal
    short, and the line and status named the second signal); the line is the first's, on
    its own (no blank line before ``Aborted!`` when stderr is not a terminal)."""
    proc = _run(_TWO_SIGNALS, tmp_path, "-j", "1", signals=f"{first} {second}")
    assert (proc.returncode, proc.stderr) == (status, line + "\n")
    assert list(tmp_path.iterdir()) == []


def test_a_long_error_line_is_cut_in_the_middle(tmp_path):
    """A location or an OS error's path is not the reason MAX_WHY_CHARS caps: a topology
    path of 100,000 characters made a 100 KB line; every line is at most about 2,000."""
    res = CliRunner().invoke(main, ["lower", str(FIX / "mix8.neff"), "--topology", "x" * 100_000,
                                    "-o", str(tmp_path / "o")], prog_name="nrtrewrite")
    assert res.exit_code == 2
    line, = res.stderr.splitlines()
    assert line.startswith("nrtrewrite: error: ") and len(line) < 2100
    assert " characters in all) ... " in line  # (cut in the middle: 100,000 x and the rest)
    assert list(tmp_path.iterdir()) == []


def test_a_wrapped_terminated_is_a_termination(tmp_path, monkeypatch):
    """Python 3.11 wraps an exception raised in ``__set_name__`` (a signal arriving while a
    dataclass of a lazily imported module is made) in a RuntimeError: it is still
    ``terminated by SIGHUP``, exit 129, not an internal error (exit 70)."""
    def emit(*a, **kw):
        try:
            raise Terminated(signal.SIGHUP)
        except Terminated as err:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance 'events' in "
                               "'EventSchedule'") from err
    monkeypatch.setattr(lower_mod, "_emit_batch", emit)
    res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "mix8.neff"), "-o",
                                    str(tmp_path / "out"), "-j", "1"], prog_name="nrtrewrite")
    assert res.exit_code == 128 + signal.SIGHUP, (res.output, res.exception)
    assert res.stderr == "nrtrewrite: terminated by SIGHUP\n"
    assert list(tmp_path.iterdir()) == []


def test_interruption_follows_causes_and_contexts():
    t = Terminated(signal.SIGTERM)
    wrapped = RuntimeError("x")
    wrapped.__context__ = ValueError("y")
    wrapped.__context__.__cause__ = t
    assert _interruption(wrapped) is t
    assert _interruption(ValueError("plain")) is None
    k = KeyboardInterrupt()
    e = RuntimeError("z")
    e.__cause__ = k
    assert _interruption(e) is k


def _stopped_after_placing(tmp_path, monkeypatch, *, force: bool, where: str):
    """``lower ar2.neff`` whose stop (Ctrl-C's KeyboardInterrupt, SIGTERM's Terminated)
    lands once the output is in place: in the removal of the output ``--force`` replaced,
    or in the parent folder's fsync right after the rename."""
    import nrtrewrite.bundle as B

    out = tmp_path / "out"
    if force:
        assert CliRunner().invoke(main, ["lower", str(FIX / "ar2.neff"), "-o", str(out),
                                         "-q"]).exit_code == 0
    real_remove, real_fsync_dir = B._remove_replaced, B._fsync_dir
    stop = KeyboardInterrupt() if where == "remove" else Terminated(signal.SIGTERM)

    def remove(out_, old, warn):
        real_remove(out_, old, warn)
        raise stop

    def fsync_dir(path):
        real_fsync_dir(path)
        if path == tmp_path and not getattr(fsync_dir, "done", False):
            fsync_dir.done = True
            raise stop

    if where == "remove":
        monkeypatch.setattr(B, "_remove_replaced", remove)
    else:
        monkeypatch.setattr(B, "_fsync_dir", fsync_dir)
    args = ["lower", str(FIX / "ar2.neff"), "-o", str(out), "-q"] + (["--force"] if force else [])
    return out, CliRunner().invoke(main, args)


@pytest.mark.parametrize("force, where", [(True, "remove"), (False, "fsync"), (True, "fsync")])
def test_a_stop_after_the_output_is_in_place_says_it_is_complete(tmp_path, monkeypatch, force,
                                                                 where):
    out, res = _stopped_after_placing(tmp_path, monkeypatch, force=force, where=where)
    # the stop is still a stop (Ctrl-C: Aborted!, status 130; SIGTERM: 143)...
    assert res.exit_code == (130 if where == "remove" else 128 + signal.SIGTERM)
    # ...but the output it came after is whole, and the user is told so
    assert f"{out}: the new output is complete and in place; the run was stopped after it " \
           "was written" in res.output
    assert (out / "manifest.json").is_file()
    ref = tmp_path / "ref"
    assert CliRunner().invoke(main, ["lower", str(FIX / "ar2.neff"), "-o", str(ref),
                                     "-q"]).exit_code == 0
    assert CliRunner().invoke(main, ["diff", str(ref), str(out)]).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "ref"]  # no sibling left


@pytest.mark.parametrize("stop, status, line", [
    (Terminated(signal.SIGTERM), 128 + signal.SIGTERM, "nrtrewrite: terminated by SIGTERM"),
    (KeyboardInterrupt(), 130, "Aborted!")])
def test_a_stop_after_lower_returned_says_the_output_is_complete(tmp_path, monkeypatch, stop,
                                                                 status, line):
    """The stop comes after ``write_output`` returned, while ``lower`` prints its summary:
    the warning came only from inside ``write_output`` (found by an exploratory tester)."""
    import nrtrewrite.cli.lower as cli_lower

    def summary(plan, title):
        raise stop

    monkeypatch.setattr(cli_lower, "summary_table", summary)
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["lower", str(FIX / "ar2.neff"), "-o", str(out)])
    assert res.exit_code == status
    assert res.stderr.splitlines() == [
        f"nrtrewrite: warning: {out}: the new output is complete and in place; the run was "
        "stopped after it was written", line]
    assert (out / "manifest.json").is_file()
    # the next command in the same process has placed nothing: no warning for it
    res = CliRunner().invoke(main, ["inspect", str(FIX / "ar2.neff")])
    assert res.exit_code == 0 and "warning" not in res.stderr


#: ``nrtrewrite lower`` as its console script runs it, with a SIGTERM sent to itself while the
#: process exits after the command (an exit handler registered once the output is placed,
#: so it runs before the console's last one): the default handler Python restores while it
#: tears down ended the process by the signal, with no line (found by an exploratory tester)
_STOP_WHILE_EXITING = textwrap.dedent("""
    import atexit, os, signal, sys, time
    import nrtrewrite.cli as C
    real_note = C.note_placed
    def note_placed(out):
        real_note(out)
        atexit.register(lambda: (os.kill(os.getpid(), signal.SIGTERM), time.sleep(5)))
    C.note_placed = note_placed
    sys.argv = ["nrtrewrite"] + sys.argv[1:]
    from nrtrewrite.console import main
    main()
""")


def _reported_once_placed(proc, out) -> None:
    """The warning that OUT is complete and in place, the SIGTERM's line and its status."""
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert proc.stderr.splitlines() == [
        f"nrtrewrite: warning: {out}: the new output is complete and in place; the run was "
        "stopped after it was written", "nrtrewrite: terminated by SIGTERM"]
    assert (out / "manifest.json").is_file()


def test_a_stop_while_the_process_exits_is_reported(tmp_path):
    proc = _run(_STOP_WHILE_EXITING, tmp_path)
    out = tmp_path / "out"
    _reported_once_placed(proc, out)


#: as above, and a SIGHUP sent to itself as soon as the SIGTERM's line is out, while the
#: SIGTERM is still being reported (its handler, ``cli._late_stop``, has not exited yet)
_TWO_STOPS_WHILE_EXITING = _STOP_WHILE_EXITING.replace("""C.note_placed = note_placed
""", """C.note_placed = note_placed
real_say = C._say
def say(line):
    real_say(line)
    if line == "nrtrewrite: terminated by SIGTERM":
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(10):
            pass
C._say = say
""")


def test_a_second_stop_while_the_process_exits_is_ignored(tmp_path):
    """The first stop's line and status only (before: the second stop's handler ran inside
    the first's, and printed ``nrtrewrite: terminated by SIGHUP`` under the SIGTERM's line,
    with status 129)."""
    assert _TWO_STOPS_WHILE_EXITING != _STOP_WHILE_EXITING
    proc = _run(_TWO_STOPS_WHILE_EXITING, tmp_path)
    out = tmp_path / "out"
    _reported_once_placed(proc, out)


def test_the_console_ends_with_the_command_s_status(tmp_path):
    """``console._end_now`` ends the process at the last exit handler with the command's
    status and its output flushed: 0, 1 (diff: different), 2 (an error)."""
    script = "import sys; sys.argv = ['nrtrewrite'] + sys.argv[1:]\n" \
             "from nrtrewrite.console import main\nmain()\n"

    def run(*a):
        return subprocess.run([sys.executable, "-c", script, *map(str, a)],
                              capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120)
    a, b = tmp_path / "a", tmp_path / "b"
    assert run("lower", "-q", FIX / "ar2.neff", "-o", a).returncode == 0
    assert run("lower", "-q", FIX / "mix8.neff", "-o", b).returncode == 0
    proc = run("diff", a, b)
    assert proc.returncode == 1 and proc.stdout.rstrip().endswith("difference(s)")
    proc = run("inspect", tmp_path / "missing.neff")
    assert proc.returncode == 2 and proc.stderr.startswith("nrtrewrite: error:")
    proc = run("inspect", FIX / "ar2.neff", "--json")
    assert proc.returncode == 0 and proc.stdout.endswith("}\n")


def test_a_command_run_outside_the_main_thread_leaves_the_signals_be(tmp_path):
    """An application embedding the CLI may call it from a thread of its own, where Python
    refuses to set signal handlers: the command runs as in the main thread (the same
    output, status 0) and the process's handlers stay as they were."""
    import threading

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP,
                                                     signal.SIGINT)}
    args = ["lower", "-q", str(FIX / "ar2.neff"), "-o"]
    got = {}

    def run():
        got["res"] = CliRunner().invoke(main, [*args, str(tmp_path / "thread"), "-j", "1"])
    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert (got["res"].exit_code, got["res"].output) == (0, ""), got["res"].exception
    assert {sig: signal.getsignal(sig) for sig in before} == before
    here = CliRunner().invoke(main, [*args, str(tmp_path / "main"), "-j", "1"])
    assert here.exit_code == 0
    for f in sorted((tmp_path / "main").rglob("*")):
        twin = tmp_path / "thread" / f.relative_to(tmp_path / "main")
        assert f.is_dir() and twin.is_dir() or f.read_bytes() == twin.read_bytes(), f


def test_a_stopped_command_in_a_program_leaves_the_handlers_as_they_were(monkeypatch):
    """A program that runs commands in its own process (CliRunner here, or ``cli.main``):
    after a stopped command the stops' handlers are the program's again, so the next command
    can be stopped too (until 2026-12-06 they were left ignoring, for good: the next command
    took SIGTERM as ignored, as under ``nohup``, ran to its end and exited 0)."""
    import os

    import nrtrewrite.cli.inspect as inspect_mod

    sigs = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    before = {sig: signal.getsignal(sig) for sig in sigs}
    real = inspect_mod.read_model

    def read_model(*args, **kw):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kw)
    monkeypatch.setattr(inspect_mod, "read_model", read_model)
    try:
        for _ in range(2):
            res = CliRunner().invoke(main, ["inspect", str(FIX / "ar2.neff")])
            assert res.exit_code == 143
            assert {sig: signal.getsignal(sig) for sig in sigs} == before
    finally:
        for sig, h in before.items():
            signal.signal(sig, h)


def test_a_command_in_a_program_puts_its_standard_streams_back(tmp_path, monkeypatch):
    """Review R1: ``cli.main`` called by a program left the program's stdout escaping with
    ``backslashreplace`` (its own handler was ``surrogateescape``) and its stderr replaced
    by the CLI's unbuffered wrapper, for good, unlike the handlers (CLI.md: "has its own
    handlers back after each command").  After each command, in either outcome, the
    program's own stream objects are back, as they were, and what the command wrote is in
    their files, in order, before what the program writes next."""
    import io

    out_file, err_file = tmp_path / "out", tmp_path / "err"
    out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(out_file, "w")), encoding="utf-8",
                           errors="surrogateescape")
    err = io.TextIOWrapper(io.BufferedWriter(io.FileIO(err_file, "w")), encoding="utf-8",
                           errors="strict")
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    missing = tmp_path / "missing.neff"
    for args, status in ((["inspect", str(FIX / "ar2.neff"), "--json"], 0),
                         (["inspect", str(missing)], 2)):
        with pytest.raises(SystemExit) as done:
            main(args, prog_name="nrtrewrite")
        assert done.value.code == status
        assert (sys.stdout, sys.stdout.errors) == (out, "surrogateescape")
        assert (sys.stderr, sys.stderr.errors) == (err, "strict")
        print("\udcff", end="")  # the program's: a byte 0xff through its own handler
        print("after", file=sys.stderr)
    out.flush()
    err.flush()
    data = out_file.read_bytes()
    doc, tail = data[:-2], data[-2:]
    assert tail == b"\xff\xff"  # (backslashreplace would write b"\\udcff")
    import json
    assert json.loads(doc)["file"] == str(FIX / "ar2.neff")  # (CLI.md "inspect --json")
    assert err_file.read_text() == (
        f"after\nnrtrewrite: error: {missing}: cannot read: No such file or directory\n"
        "after\n")  # (the error's one line, CLI.md "Errors", between the program's two)


def test_commands_run_without_standalone_mode_keep_no_outputs_they_placed(tmp_path):
    """Review R1: ``cli._PLACED`` (the outputs a command put in place, for a stop's warning)
    was cleared only by commands in standalone mode: a program calling
    ``main(..., standalone_mode=False)`` kept one path more with each ``lower``, for good.
    It holds only the running command's, in either mode."""
    import nrtrewrite.cli as cli_mod

    for i in range(3):
        out = tmp_path / f"o{i}"
        assert main(["lower", "-q", str(FIX / "ar2.neff"), "-o", str(out), "-j", "1"],
                    prog_name="nrtrewrite", standalone_mode=False) is None
        assert (out / "manifest.json").is_file()
        assert cli_mod._PLACED == []
