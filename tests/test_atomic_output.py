"""Atomic output (nrtrewrite/bundle.py, docs/RELIABILITY.md): the output folder appears
complete or not at all, even when ``lower`` is SIGKILLed; an existing output is replaced
only with --force, atomically, and only when it is ours; nothing is written outside the
output's parent or through a symbolic link; the input is never modified."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nrtrewrite import bundle
from nrtrewrite.bundle import clean_stale_temps, write_output
from nrtrewrite.errors import OutputError
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.reader import read_model

from conftest import dead_pid

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"


def env(**kw) -> dict:
    e = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update({k: str(v) for k, v in kw.items()})
    return e


def lower_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "nrtrewrite.cli.__main__", "lower", "-q", *map(str, args)]


def run(*args, cwd=ROOT, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(lower_cmd(*args), capture_output=True, text=True, cwd=cwd,
                          env=env(**kw), timeout=120)


def one_line_error(proc: subprocess.CompletedProcess, text: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nrtrewrite: error: "), proc.stderr
    assert text in lines[0], lines[0]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify_complete(out: Path) -> str:
    """Check an output folder is whole (every file hashed by its rank manifest, every rank
    manifest by the top manifest, the rewritten NEFF by its hash); returns the top
    manifest's sha256 (what identifies the output)."""
    top = json.loads((out / "manifest.json").read_text())
    assert top["format"] == "nrtrewrite-lowered"
    assert sha(out / top["output_neff"]["name"]) == top["output_neff"]["sha256"]
    assert sorted(top["rank_manifests"]) == sorted(p.name for p in out.glob("rank-*")
                                                   if p.is_dir())  # a NEFF rank-0000.neff
    for rdir, digest in top["rank_manifests"].items():
        man_path = out / rdir / "manifest.json"
        assert sha(man_path) == digest, rdir
        man = json.loads(man_path.read_text())
        for fname, info in man["files"].items():
            assert sha(out / rdir / fname) == info["sha256"], (rdir, fname)
    return sha(out / "manifest.json")


def test_sigkill_leaves_previous_output_or_nothing(tmp_path):
    """Kill `lower --force` of node64 at random moments: OUT always holds a complete output,
    the previous one or the new one, never a partial folder; the next run removes the
    temporary siblings the killed runs left behind."""
    model = FIX / "node64.neff"
    out = tmp_path / "out"
    prev = run(model, "-o", out, "--rank", 0, "--rank", 1)  # the "previous" output
    assert prev.returncode == 0, prev.stderr
    prev_id = verify_complete(out)
    ref = tmp_path / "ref"
    assert run(model, "-o", ref, "-j", 1).returncode == 0
    new_id = verify_complete(ref)
    assert prev_id != new_id
    rng = random.Random(9)
    seen = set()
    t_full = 0.0
    for attempt in range(7):
        t0 = time.monotonic()
        proc = subprocess.Popen(lower_cmd(model, "-o", out, "--force", "-j", 1), cwd=ROOT,
                                env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # random moments across the whole run (t_full is measured by the first, unkilled run)
        delay = rng.uniform(0.05, max(1.0, t_full * 1.1)) if attempt else None
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        if attempt == 0:
            t_full = time.monotonic() - t0
        state = verify_complete(out) if out.exists() else None
        assert state in (prev_id, new_id), "partial output after SIGKILL"
        seen.add((proc.returncode, state))
        if state == new_id:  # put the previous output back for the next attempt
            shutil.rmtree(out)
            assert run(model, "-o", out, "--rank", 0, "--rank", 1).returncode == 0
    assert any(rc == -signal.SIGKILL for rc, _ in seen)
    # and once more at a moment known to be mid-write: the temporary sibling exists
    proc = subprocess.Popen(lower_cmd(model, "-o", out, "--force", "-j", 1), cwd=ROOT,
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.tmp-*")) and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = verify_complete(out) if out.exists() else None
    assert state in (prev_id, new_id), "partial output after SIGKILL mid-write"
    # the next complete run removes the stale temporary siblings of the killed runs
    assert run(model, "-o", out, "--force").returncode == 0
    assert verify_complete(out) == new_id
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "ref"]


def test_sigkill_without_previous_output(tmp_path):
    model = FIX / "node64.neff"
    out = tmp_path / "fresh"
    for delay in (0.2, 0.5):
        proc = subprocess.Popen(lower_cmd(model, "-o", out, "-j", 1), cwd=ROOT, env=env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        if out.exists():
            verify_complete(out)
            shutil.rmtree(out)
        assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".fresh.tmp-")]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_remove_the_temporary_folder(tmp_path, sig):
    """Like Ctrl-C: the run stops with one line and exit 128 + the signal, the pool's
    workers end quietly, and neither the output nor its temporary sibling is left."""
    signum = getattr(signal, sig)
    out = tmp_path / "out"
    proc = subprocess.Popen(lower_cmd(FIX / "node64.neff", "-o", out, "-j", 2), cwd=ROOT,
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True,  # not ignored, even if this run is under nohup
                            preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.tmp-*")) and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signum)  # the ranks are being written
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert err == f"nrtrewrite: terminated by {sig}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_signal_right_after_the_temporary_folder_is_made_removes_it(tmp_path, monkeypatch):
    """The signal test above, made deterministic for the worst moment: the exception a
    SIGTERM raises (cli.Terminated, a BaseException) lands as soon as the temporary folder's
    mkdir returns.  It used to come before the try that cleans up, and left the folder (the
    signal test failed now and then on a loaded machine)."""
    from nrtrewrite.cli import Terminated

    plan = plan_lowering(read_model(FIX / "ar2.neff"), LowerOptions())
    mkdir = Path.mkdir

    def mkdir_then_signal(self, *args, **kw):
        mkdir(self, *args, **kw)
        if self.name.startswith(".out.tmp-"):
            raise Terminated(signal.SIGTERM)

    monkeypatch.setattr(Path, "mkdir", mkdir_then_signal)
    with pytest.raises(Terminated):
        write_output(plan, tmp_path / "out", ranks=None, workers=1)
    assert list(tmp_path.iterdir()) == []


class _DroppedStop:
    """An object whose finalizer gets SIGTERM: the handler runs inside ``__del__``, where
    Python prints the exception it raises ("Exception ignored in ...") and drops it, as it
    did once in multiprocessing's ``_ConnectionBase.__del__`` while ``lower -j 2`` wrote its
    ranks (the run went on and exited 0, its output written)."""

    def __del__(self):
        import threading
        # (at this thread: under pytest-xdist other threads run, and a process-wide signal
        # could land on one of them)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        time.sleep(0.02)  # the handler runs here, inside the finalizer


@pytest.fixture
def stopping_handlers_kept():
    """The stops' handlers as they were before the test (terminate_cleanly restores them
    outside the console since 2026-12-06; until then it left a stopped one's ignoring)."""
    sigs = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    old = {s: signal.getsignal(s) for s in sigs}
    yield
    for s, h in old.items():
        signal.signal(s, h)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_stop_python_dropped_in_a_finalizer_is_raised_as_the_command_ends(
        stopping_handlers_kept):
    """A stop raised where Python drops exceptions (a finalizer) is raised again as the
    command ends (``cli.raise_lost_stop``): the command's own code ran on, but it does not
    end as though no signal came."""
    from nrtrewrite.cli import Terminated, terminate_cleanly

    ran_on = False
    with pytest.raises(Terminated) as stop:
        with terminate_cleanly():
            _DroppedStop()  # made and finalized at once
            ran_on = True  # (the exception was dropped: the body goes on)
    assert ran_on and stop.value.signum == signal.SIGTERM


class _DroppedCtrlC:
    """As :class:`_DroppedStop`, with SIGINT (Ctrl-C) in the finalizer."""

    def __del__(self):
        import threading
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        time.sleep(0.02)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_python_dropped_is_raised_as_a_ctrl_c_as_the_command_ends(
        stopping_handlers_kept):
    """A dropped Ctrl-C is raised again as what Ctrl-C is, Python's ``KeyboardInterrupt``
    (docs/CLI.md: Ctrl-C is ``Aborted!``, status 130), not as a ``Terminated`` of SIGINT
    (``terminated by SIGINT``)."""
    from nrtrewrite.cli import terminate_cleanly

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler here")
    ran_on = False
    with pytest.raises(KeyboardInterrupt):
        with terminate_cleanly():
            _DroppedCtrlC()
            ran_on = True
    assert ran_on


_DROPPED_IN_A_FINALIZER = """
import signal, sys, threading, time
from nrtrewrite.cli import Terminated, terminate_cleanly

class Dropped:
    def __init__(self, signum):
        self.signum = signum

    def __del__(self):
        signal.pthread_kill(threading.get_ident(), self.signum)
        time.sleep(0.02)  # the handler runs here, inside the finalizer

class Other:
    def __del__(self):
        raise ValueError("not a stop")

signum = getattr(signal, sys.argv[1])
try:
    with terminate_cleanly():
        Other()
        Dropped(signum)
        print("ran on", flush=True)
except (Terminated, KeyboardInterrupt) as stop:
    print("stopped:", type(stop).__name__)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stop_python_dropped_is_not_printed_as_an_ignored_exception(sig):
    """A stop whose handler ran inside a finalizer is raised again (above), and Python's
    "Exception ignored in ... Traceback ... Terminated: 15" is not printed before the stop's
    one line (a clean clone's CI run on 2026-12-06: SIGTERM to ``lower -j 2`` in
    multiprocessing's ``_ConnectionBase.__del__`` exited 143 with that traceback above
    ``nrtrewrite: terminated by SIGTERM``). Any other exception a finalizer raises is
    printed as before."""
    proc = subprocess.run([sys.executable, "-c", _DROPPED_IN_A_FINALIZER, sig], cwd=ROOT,
                          env=env(), capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                           signal.default_int_handler))
    want = "Terminated" if sig == "SIGTERM" else "KeyboardInterrupt"
    assert proc.stdout == f"ran on\nstopped: {want}\n", proc.stderr
    assert "Exception ignored in" in proc.stderr and "ValueError: not a stop" in proc.stderr
    assert want not in proc.stderr and proc.stderr.count("Exception ignored") == 1, proc.stderr


_STOPPED_WHILE_ANOTHER_IS_PRINTED = """
import signal, sys, threading, time
from nrtrewrite.cli import Terminated, terminate_cleanly

signum = getattr(signal, sys.argv[1])
printing = sys.unraisablehook

def slow_printing(info):
    # the stop comes while Python prints another finalizer's exception: its handler runs
    # inside sys.unraisablehook (terminate_cleanly's, which calls this one)
    signal.pthread_kill(threading.get_ident(), signum)
    time.sleep(0.02)
    printing(info)

sys.unraisablehook = slow_printing

class Other:
    def __del__(self):
        raise ValueError("not a stop")

try:
    with terminate_cleanly():
        Other()
        print("ran on", flush=True)
except (Terminated, KeyboardInterrupt) as stop:
    print("stopped:", type(stop).__name__)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stop_while_another_finalizers_exception_is_printed_is_not_printed(sig):
    """A stop whose handler runs while Python reports another finalizer's exception (inside
    ``sys.unraisablehook``): Python printed ``Exception ignored in sys.unraisablehook``, the
    stop's traceback and ``nrtrewrite.cli.Terminated: 15`` in place of the other exception,
    and dropped the stop.  The stop is now noted there and raised again as the command ends;
    the other exception is printed as it was."""
    proc = subprocess.run([sys.executable, "-c", _STOPPED_WHILE_ANOTHER_IS_PRINTED, sig],
                          cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                           signal.default_int_handler))
    want = "Terminated" if sig == "SIGTERM" else "KeyboardInterrupt"
    assert proc.stdout == f"ran on\nstopped: {want}\n", proc.stderr
    assert proc.stderr.splitlines()[0].startswith("Exception ignored in: <function Other.__del__")
    assert proc.stderr.splitlines()[-1] == "ValueError: not a stop", proc.stderr
    assert proc.stderr.count("Exception ignored") == 1 and want not in proc.stderr, proc.stderr


def test_write_output_calls_before_placing_before_the_output_is_in_place(tmp_path):
    """``before_placing`` (the CLI's ``raise_lost_stop``) runs with the output complete but
    not yet in place: a stop it raises leaves neither the output nor its temporary
    sibling."""
    from nrtrewrite.cli import Terminated

    plan = plan_lowering(read_model(FIX / "ar2.neff"), LowerOptions())
    seen = []

    def before_placing():
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        raise Terminated(signal.SIGTERM)
    with pytest.raises(Terminated):
        write_output(plan, tmp_path / "out", ranks=None, workers=1,
                     before_placing=before_placing)
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0].startswith(".out.tmp-")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_lower_stopped_by_a_signal_python_dropped_leaves_no_output(
        tmp_path, monkeypatch, stopping_handlers_kept):
    """The SIGTERM test above once saw ``lower`` exit 0 with its output written: the
    handler's Terminated was raised inside a finalizer and dropped. Such a stop is raised
    again before the output is put in place: exit 143, the one line, nothing left."""
    from click.testing import CliRunner
    from nrtrewrite.cli import main

    check_complete = bundle._check_complete

    def check_then_drop(*args, **kw):  # the ranks written: a stop lands in a finalizer
        check_complete(*args, **kw)
        _DroppedStop()
    monkeypatch.setattr(bundle, "_check_complete", check_then_drop)
    res = CliRunner().invoke(main, ["lower", str(FIX / "ar2.neff"), "-o", str(tmp_path / "out"),
                                    "-j", "1", "-q"], prog_name="nrtrewrite")
    assert res.exit_code == 128 + signal.SIGTERM, res.output
    assert res.stderr == "nrtrewrite: terminated by SIGTERM\n", res.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_lower_with_its_progress_bar_stopped_by_a_signal_python_dropped_leaves_no_output(
        tmp_path, monkeypatch, stopping_handlers_kept):
    """As above with the progress bar up (stderr a terminal, 16 ranks: docs/CLI.md "lower"
    draws it from 8): the dropped stop is raised again before the output is put in place,
    exit 143, nothing left."""
    import io

    from click.testing import CliRunner
    from rich.console import Console

    import nrtrewrite.cli.lower as lower_mod
    from nrtrewrite.cli import main

    monkeypatch.setattr(lower_mod, "stderr_console",
                        lambda: Console(file=io.StringIO(), force_terminal=True, width=80))
    check_complete = bundle._check_complete

    def check_then_drop(*args, **kw):
        check_complete(*args, **kw)
        _DroppedStop()
    monkeypatch.setattr(bundle, "_check_complete", check_then_drop)
    res = CliRunner().invoke(main, ["lower", str(FIX / "groups.neff"), "-o",
                                    str(tmp_path / "out"), "-j", "1"], prog_name="nrtrewrite")
    assert res.exit_code == 128 + signal.SIGTERM, res.output
    assert list(tmp_path.iterdir()) == []


def test_force_replaces_atomically_and_only_our_outputs(tmp_path):
    out = tmp_path / "out"
    assert run(FIX / "ar2.neff", "-o", out).returncode == 0
    old_inode = out.stat().st_ino
    one_line_error(run(FIX / "mix8.neff", "-o", out), "exists; pass --force to replace it")
    assert run(FIX / "mix8.neff", "-o", out, "--force").returncode == 0
    assert out.stat().st_ino != old_inode and len(list(out.glob("rank-*"))) == 8
    verify_complete(out)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    # --force never replaces a folder that is not an nrtrewrite output
    mine = tmp_path / "precious"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    one_line_error(run(FIX / "ar2.neff", "-o", mine, "--force"),
                   "is not an nrtrewrite output (no manifest.json of format "
                   '"nrtrewrite-lowered"); refusing to replace it')
    assert (mine / "notes.txt").read_text() == "keep me"
    one_line_error(run(FIX / "ar2.neff", "-o", mine / "notes.txt", "--force"),
                   "exists and is not a folder")
    # without --force, the same refusals: never a hint to pass --force where it cannot help
    one_line_error(run(FIX / "ar2.neff", "-o", mine / "notes.txt"), "exists and is not a folder")
    one_line_error(run(FIX / "ar2.neff", "-o", mine),
                   "is not an nrtrewrite output (no manifest.json of format "
                   '"nrtrewrite-lowered"); refusing to replace it')
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(FIX / "ar2.neff", "-o", empty, "--force").returncode == 0
    verify_complete(empty)


@pytest.mark.parametrize("exchange", [True, False])
@pytest.mark.parametrize("mode", [0o700, 0o750, 0o755])
def test_force_keeps_the_replaced_output_folders_mode(tmp_path, monkeypatch, exchange, mode):
    """``--force`` gives the new output folder the permission bits of the folder it replaces
    (as ``assemble`` keeps a replaced file's): a previous output kept private, 0700, became
    0755 (the umask's, 022 here; review 53f).  Its temporary folder has them while it is
    built too; a new output (nothing at OUT) has the umask's."""
    old_umask = os.umask(0o022)
    try:
        out = tmp_path / "out"
        write_output(_plan("ar2"), out, ranks=None)
        assert out.stat().st_mode & 0o7777 == 0o777 & ~0o022
        out.chmod(mode)
        if not exchange:
            monkeypatch.setattr(bundle, "_exchange", lambda a, b: False)
        building = []

        def probe(path, data, sync=True):
            if Path(path).name == "manifest.json" and Path(path).parent.name.startswith(".out."):
                building.append(Path(path).parent.stat().st_mode & 0o7777)
            real(path, data, sync)
        real = bundle._write_file
        monkeypatch.setattr(bundle, "_write_file", probe)
        write_output(_plan("mix8"), out, ranks=None, force=True)
        assert building == [mode]
        assert out.stat().st_mode & 0o7777 == mode
        assert len(list(out.glob("rank-*"))) == 8
        verify_complete(out)
    finally:
        os.umask(old_umask)


@pytest.mark.parametrize("what, mode", [("out", 0o300), ("out", 0o100), ("out", 0o600),
                                        ("manifest", 0o000)])
def test_an_unreadable_previous_output_is_said_to_be_unreadable(tmp_path, what, mode):
    """A previous output this user cannot read (OUT mode 0300 / 0100 / 0600, or its
    manifest.json 0000) was called "not an nrtrewrite output (no manifest.json ...)" though
    the manifest is there (review 53m; ``diff`` says it cannot be read since RELIABILITY's
    row on an unreadable manifest).  Refused with and without --force in one line naming
    what cannot be read and the OS's reason, OUT left as it was.  As root, run without the
    capabilities that let root read anything."""
    out = tmp_path / "o"
    assert run(FIX / "ar2.neff", "-o", out).returncode == 0
    before = verify_complete(out)
    target = out if what == "out" else out / "manifest.json"
    # the first path the checks cannot read: OUT when it cannot be listed (0300, 0100);
    # the manifest when OUT can be listed but not searched (0600) or the manifest is 0000
    named = out if mode in (0o300, 0o100) else out / "manifest.json"
    prefix = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permissions are not checked")
        prefix = ["setpriv", "--bounding-set",
                  "-dac_override,-dac_read_search,-fowner,-fsetid"]
    target.chmod(mode)
    try:
        for force in ([], ["--force"]):
            proc = subprocess.run(prefix + lower_cmd(FIX / "ar2.neff", "-o", out, *force),
                                  capture_output=True, text=True, cwd=ROOT, env=env(),
                                  timeout=120)
            one_line_error(proc, f"{named} cannot be read (Permission denied), so "
                                 f"{'it' if named == out else out} cannot be told an "
                                 "nrtrewrite output; refusing to replace it: make it readable "
                                 f"(chmod -R u+rwx {out}) or remove it first")
    finally:
        target.chmod(0o755 if what == "out" else 0o644)
    assert verify_complete(out) == before
    assert os.listdir(tmp_path) == ["o"]


@pytest.mark.parametrize("made", ["output", "empty folder"])
def test_force_without_exchange_when_out_is_taken_between_the_renames(tmp_path, monkeypatch,
                                                                        made):
    """Without RENAME_EXCHANGE ``--force`` is two renames (OUT -> ``.OUT.old-PID-HEX``, the
    new output -> OUT).  Something put at OUT between them (another ``lower --force``'s
    output: review 53m, /tmp/w53m-scratch/fb/a.py) made the run fail with
    ``cannot write the output: Directory not empty (.out.old-PID-HEX)``, a name it left
    behind; an empty folder made there was replaced by the plain rename.  Now what is there
    is kept, the run is refused in one line saying what happened, and the previous output
    (checked ours) is removed: nothing but OUT is left in the folder."""
    out = tmp_path / "out"
    write_output(_plan("ar2"), out, ranks=None)
    other = tmp_path / "other"
    if made == "output":
        write_output(_plan("mix8"), other, ranks=None)  # (another run's new output)
        theirs = verify_complete(other)
    monkeypatch.setattr(bundle, "_exchange", lambda a, b: False)
    real = os.rename

    def rename(a, b):
        real(a, b)
        if ".out.old-" in str(b):  # moved aside: the other run lands now
            if made == "output":
                real(other, out)
            else:
                out.mkdir()
    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OutputError) as exc:
        write_output(_plan("ar2"), out, ranks=None, force=True)
    assert str(exc.value) == (
        f"{out}: something was put there while the previous output was moved aside for the "
        "new one (another lower --force of it, say: without an atomic exchange, "
        "RENAME_EXCHANGE, the swap is two renames); what is there now is kept, the new "
        "output was not placed and the previous one was removed")
    assert os.listdir(tmp_path) == ["out"]
    if made == "output":
        assert verify_complete(out) == theirs
    else:
        assert os.listdir(out) == []


@pytest.mark.parametrize("exchange", [True, False])
def test_force_where_chmod_is_refused(tmp_path, monkeypatch, exchange):
    """A file system refusing chmod (EPERM): ``--force`` failed with a message naming its
    temporary folder, removed by then, even where the modes agreed (review 53m).  Modes
    agreeing, no chmod is made and the output is replaced; differing, the run is refused in
    one line naming OUT and the mode, the previous output left as it was, nothing else in
    the folder."""
    old_umask = os.umask(0o022)
    try:
        out = tmp_path / "out"
        write_output(_plan("ar2"), out, ranks=None)
        if not exchange:
            monkeypatch.setattr(bundle, "_exchange", lambda a, b: False)
        chmods = []

        def refused(path, mode, *a, **k):
            chmods.append(path)
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(path))
        monkeypatch.setattr(os, "chmod", refused)
        write_output(_plan("mix8"), out, ranks=None, force=True)  # 0755 both
        assert chmods == [] and len(list(out.glob("rank-*"))) == 8
        before = verify_complete(out)
        monkeypatch.undo()
        out.chmod(0o700)
        monkeypatch.setattr(os, "chmod", refused)
        if not exchange:
            monkeypatch.setattr(bundle, "_exchange", lambda a, b: False)
        with pytest.raises(OutputError) as exc:
            write_output(_plan("ar2"), out, ranks=None, force=True)
        assert str(exc.value) == (
            f"{out}: cannot give the new output the mode 0700 of the folder it replaces "
            "(Operation not permitted); not replaced: chmod it to the mode the file system "
            "gives new folders, or write the output elsewhere")
        assert verify_complete(out) == before and out.stat().st_mode & 0o7777 == 0o700
        assert os.listdir(tmp_path) == ["out"]
    finally:
        os.umask(old_umask)


@pytest.mark.parametrize("kind", ["tmpfs", "bind"])
def test_a_mount_point_at_out_is_refused_without_the_force_hint(tmp_path, kind):
    """OUT a mount point: the output is placed by a rename, which cannot move a mount point
    (EBUSY).  ``--force`` built the whole output and then failed ``Device or resource busy``,
    and without it the refusal said ``pass --force to replace it``, which cannot work (review
    53f).  Both refuse before anything is written, naming the mount point; a folder inside it
    is lowered.  A bind mount of a folder of the same file system (which ``os.path.ismount``
    does not see: same device) too."""
    out = tmp_path / "out"
    out.mkdir()
    if kind == "bind":
        (tmp_path / "src").mkdir()
        args = ["--bind", str(tmp_path / "src"), str(out)]
    else:
        args = ["-t", "tmpfs", "-o", "size=16m", "tmpfs", str(out)]
    assert not bundle._is_mount_point(out)  # a plain folder first
    if os.geteuid() != 0 or subprocess.run(["mount", *args], capture_output=True).returncode:
        pytest.skip("cannot mount here (not root, or no CAP_SYS_ADMIN)")
    try:
        for force in ([], ["--force"]):
            proc = run(FIX / "ar2.neff", "-o", out, *force)
            one_line_error(proc, f"{out} is a mount point, which cannot be replaced (the output "
                                 "is built beside it and renamed into its place); write the "
                                 "output elsewhere, a folder inside it say")
            assert "--force" not in proc.stderr
        assert list(out.iterdir()) == []
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            ["out"] + (["src"] if kind == "bind" else []))
        assert run(FIX / "ar2.neff", "-o", out / "o").returncode == 0
        verify_complete(out / "o")
    finally:
        subprocess.run(["umount", str(out)], check=True)


def _lower_twice_through(link: Path, out: Path) -> None:
    """``lower -o OUT`` (nothing there), plain again (refused: exists, with the --force hint,
    never "a mount point"), and ``--force`` (replaced)."""
    assert run(FIX / "ar2.neff", "-o", out).returncode == 0
    one_line_error(run(FIX / "ar2.neff", "-o", out), f"{out} exists; pass --force to replace it")
    assert run(FIX / "ar2.neff", "-o", out, "--force").returncode == 0
    verify_complete(out)
    assert link.is_symlink()


def test_out_in_a_symlinked_folder_on_another_mount_is_no_mount_point(tmp_path):
    """OUT's parent a symbolic link to a folder on another mount (``~/work -> /scratch/me``;
    here a folder of /dev/shm, no mount needed): the mount point check compared OUT's mount
    with the link's own (opened without following it) and refused ``lower --force`` and a
    plain ``lower`` of an existing OUT as "a mount point" (review 53m).  The default output
    name beside a model in the linked folder too."""
    shm = Path("/dev/shm")
    if bundle._mount_id(shm) in (None, bundle._mount_id(tmp_path)):
        pytest.skip("/dev/shm is not another mount here")
    target = Path(tempfile.mkdtemp(dir=shm, prefix="nrt-link-"))
    try:
        link = tmp_path / "sw"
        link.symlink_to(target)
        _lower_twice_through(link, link / "o")
        shutil.copy(FIX / "mix8.neff", link / "mix8.neff")
        assert run(link / "mix8.neff", "-q").returncode == 0
        proc = run(link / "mix8.neff", "-q")
        assert proc.returncode == 2 and "mount point" not in proc.stderr
        assert run(link / "mix8.neff", "-q", "--force").returncode == 0
        verify_complete(link / "mix8.lowered")
        assert sorted(p.name for p in target.iterdir()) == ["mix8.lowered", "mix8.neff", "o"]
    finally:
        shutil.rmtree(target)


@pytest.mark.parametrize("kind", ["tmpfs", "bind"])
def test_out_in_a_symlinked_mount_is_no_mount_point(tmp_path, kind):
    """A link ``ln`` to a tmpfs, or to a bind mount of a folder of the same file system:
    ``-o ln/o`` was refused as "a mount point" (review 53m); it is lowered, replaced with
    --force.  A mount point reached through a linked parent is still refused."""
    bm = tmp_path / "bm"
    bm.mkdir()
    if kind == "bind":
        (tmp_path / "src").mkdir()
        args = ["--bind", str(tmp_path / "src"), str(bm)]
    else:
        args = ["-t", "tmpfs", "-o", "size=16m", "tmpfs", str(bm)]
    if os.geteuid() != 0 or subprocess.run(["mount", *args], capture_output=True).returncode:
        pytest.skip("cannot mount here (not root, or no CAP_SYS_ADMIN)")
    try:
        link = tmp_path / "lb"
        link.symlink_to(bm)
        _lower_twice_through(link, link / "o")
        up = tmp_path / "up"
        up.symlink_to(tmp_path)
        for force in ([], ["--force"]):
            one_line_error(run(FIX / "ar2.neff", "-o", up / "bm", *force),
                           f"{up / 'bm'} is a mount point, which cannot be replaced")
    finally:
        subprocess.run(["umount", str(bm)], check=True)


def test_symlinked_output_paths_do_not_escape(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    link = work / "out"
    link.symlink_to(elsewhere)
    for extra in ([], ["--force"]):
        one_line_error(run(FIX / "ar2.neff", "-o", link, *extra), "is a symbolic link")
    dangling = work / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    one_line_error(run(FIX / "ar2.neff", "-o", dangling), "is a symbolic link")
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in work.iterdir()) == ["dangling", "out"]
    assert link.is_symlink() and dangling.is_symlink()


def test_nothing_written_outside_the_output_parent(tmp_path):
    """A read-only cwd, HOME and TMPDIR empty: after lower, only OUT is new anywhere we can
    see (the input's folder, cwd, HOME, TMPDIR, the output's parent)."""
    src_dir = tmp_path / "models"
    src_dir.mkdir()
    model = src_dir / "mix8.neff"
    shutil.copy(FIX / "mix8.neff", model)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    home, tmpd, parent = tmp_path / "home", tmp_path / "tmp", tmp_path / "outparent"
    for d in (home, tmpd, parent):
        d.mkdir()
    os.chmod(cwd, 0o555)
    try:
        proc = run(model, "-o", parent / "out", cwd=cwd, HOME=home, TMPDIR=tmpd)
        assert proc.returncode == 0, proc.stderr
        proc = run(model, "-o", parent / "out", "--force", "-j", 2, cwd=cwd, HOME=home,
                   TMPDIR=tmpd)
        assert proc.returncode == 0, proc.stderr
    finally:
        os.chmod(cwd, 0o755)
    assert list(cwd.iterdir()) == [] and list(home.iterdir()) == []
    assert list(tmpd.iterdir()) == []
    assert [p.name for p in src_dir.iterdir()] == ["mix8.neff"]
    assert [p.name for p in parent.iterdir()] == ["out"]
    verify_complete(parent / "out")


def test_input_never_modified_read_only(tmp_path):
    src = tmp_path / "ro.neff"
    shutil.copy(FIX / "sbuf.neff", src)
    os.chmod(src, 0o444)
    os.utime(src, (1_000_000_000, 1_000_000_000))
    before = (src.read_bytes(), src.stat().st_mtime_ns, src.stat().st_mode)
    assert run(src).returncode == 0
    for cmd in (["inspect", src], ["explain", src], ["schedule", src, "--rank", "0"]):
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite.cli.__main__", *map(str, cmd)],
                              capture_output=True, text=True, env=env(), cwd=ROOT, timeout=120)
        assert proc.returncode == 0, proc.stderr
    assert (src.read_bytes(), src.stat().st_mtime_ns, src.stat().st_mode) == before
    verify_complete(tmp_path / "ro.lowered")


def _plan(name: str = "ar2"):
    return plan_lowering(read_model(FIX / f"{name}.neff"), LowerOptions())


def test_write_error_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """Disk full (ENOSPC) in the middle of writing: an OutputError, the temporary folder
    removed, OUT absent (or, with --force, the previous output untouched)."""
    real = bundle._write_file
    calls = {"n": 0}

    def failing(path, data, sync=True):
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError(28, "No space left on device", str(path))
        real(path, data, sync)
    monkeypatch.setattr(bundle, "_write_file", failing)
    with pytest.raises(OutputError) as exc:
        write_output(_plan("mix8"), tmp_path / "out", ranks=None)
    assert "cannot write the output: No space left on device" in str(exc.value)
    assert "\n" not in str(exc.value)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(bundle, "_write_file", real)
    write_output(_plan("ar2"), tmp_path / "out", ranks=None)
    before = verify_complete(tmp_path / "out")
    calls["n"] = 0
    monkeypatch.setattr(bundle, "_write_file", failing)
    with pytest.raises(OutputError):
        write_output(_plan("mix8"), tmp_path / "out", ranks=None, force=True)
    assert verify_complete(tmp_path / "out") == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_output_appearing_meanwhile_is_not_clobbered(tmp_path, monkeypatch):
    """Between the existence check and the final rename another process creates OUT: the
    rename refuses (RENAME_NOREPLACE) instead of replacing it, in the words CLI.md "lower"
    gives a folder made at OUT meanwhile (it was ``cannot write the output: File exists
    (OUT)``, until 2026-12-07)."""
    out = tmp_path / "out"
    real = bundle._fsync_dir

    def racing(path):
        real(path)
        if Path(path).name.startswith(".out.tmp-") and not out.exists():
            out.mkdir()
            (out / "theirs").write_text("x")
    monkeypatch.setattr(bundle, "_fsync_dir", racing)
    with pytest.raises(OutputError) as err:
        write_output(_plan(), out, ranks=None)
    assert str(err.value) == (f"{out} exists and is not an nrtrewrite output (no manifest.json "
                              'of format "nrtrewrite-lowered"); refusing to replace it (it was '
                              "made or changed there while the output was built)")
    assert [p.name for p in out.iterdir()] == ["theirs"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_concurrent_lower_that_places_its_output_first_is_refused_as_made_meanwhile(
        tmp_path, monkeypatch):
    """Two ``lower`` runs of one OUT without ``--force``: the one that renames its output in
    second finds OUT made meanwhile, an output of ours: refused as CLI.md "lower" says, with
    the hint to pass ``--force`` (which would replace it), the other's output kept whole and
    nothing of this run left."""
    out = tmp_path / "out"
    _racing_fsync(monkeypatch, out, lambda: write_output(_plan("mix8"), out, ranks=None))
    with pytest.raises(OutputError) as err:
        write_output(_plan("ar2"), out, ranks=None)
    assert str(err.value) == (f"{out} exists; pass --force to replace it (it was made or "
                              "changed there while the output was built)")
    verify_complete(out)
    assert len(list(out.glob("rank-*"))) == 8  # mix8's, the other run's
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def _racing_fsync(monkeypatch, out: Path, act) -> None:
    """Run ``act()`` once, right after the new output's temporary folder is fsynced: the
    run has built its output and is about to move it into place."""
    real = bundle._fsync_dir

    def racing(path):
        real(path)
        if Path(path).name.startswith(f".{out.name}.tmp-") and not getattr(racing, "done", 0):
            racing.done = 1
            act()
    monkeypatch.setattr(bundle, "_fsync_dir", racing)


def test_force_never_replaces_a_folder_made_at_out_meanwhile(tmp_path, monkeypatch):
    """``--force`` checks OUT at the start; a folder of someone else's made there while the
    output is built is checked again when the output is moved into place, refused in one
    line and left whole (it was replaced and deleted, the run exiting 0)."""
    out = tmp_path / "out"

    def make_theirs():
        out.mkdir()
        (out / "notes.txt").write_text("precious")
    _racing_fsync(monkeypatch, out, make_theirs)
    with pytest.raises(OutputError, match="is not an nrtrewrite output .*; refusing to replace "
                       "it [(]it was made or changed there while the output was built[)]$"):
        write_output(_plan(), out, ranks=None, force=True)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def _kept_with_the_dropped_file(out, previous) -> None:
    """The dropped notes.txt is still there, and besides it the previous output, whole; the
    output's parent holds nothing else (no temporary folder left)."""
    assert (out / "notes.txt").read_text() == "precious"
    (out / "notes.txt").unlink()
    assert verify_complete(out) == previous
    assert [p.name for p in out.parent.iterdir()] == ["out"]


def test_force_never_deletes_a_file_dropped_into_the_previous_output(tmp_path, monkeypatch):
    """A file put into the previous output while the new one is built makes it an output
    that holds something of someone else's: refused, the previous output and the file kept."""
    out = tmp_path / "out"
    write_output(_plan("ar2"), out, ranks=None)
    previous = verify_complete(out)
    _racing_fsync(monkeypatch, out, lambda: (out / "notes.txt").write_text("precious"))
    with pytest.raises(OutputError, match="holds notes.txt, which an nrtrewrite output does not"):
        write_output(_plan("mix8"), out, ranks=None, force=True)
    _kept_with_the_dropped_file(out, previous)


def test_force_replaces_an_output_of_ours_made_at_out_meanwhile(tmp_path, monkeypatch):
    """OUT absent at the start and an output of ours there at the end: ``--force`` replaces
    it as it would have at the start (checked as such)."""
    out = tmp_path / "out"
    _racing_fsync(monkeypatch, out, lambda: write_output(_plan("ar2"), out, ranks=None))
    write_output(_plan("mix8"), out, ranks=None, force=True)
    verify_complete(out)
    assert len(list(out.glob("rank-*"))) == 8
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("exchange", [True, False])
def test_force_checks_what_it_swapped_out_after_the_swap(tmp_path, monkeypatch, exchange):
    """Between the last check of OUT and the swap itself someone drops a file into it: what
    the swap (the atomic exchange, or the first of two renames where the kernel has none)
    took out of OUT is checked again, and goes back whole."""
    out = tmp_path / "out"
    write_output(_plan("ar2"), out, ranks=None)
    previous = verify_complete(out)
    real = bundle._exchange

    def drop_then_swap(a, b):
        (out / "notes.txt").write_text("precious")
        return real(a, b) if exchange else False
    monkeypatch.setattr(bundle, "_exchange", drop_then_swap)
    with pytest.raises(OutputError, match="holds notes.txt.*made or changed there while the output was built"):
        write_output(_plan("mix8"), out, ranks=None, force=True)
    _kept_with_the_dropped_file(out, previous)


def test_a_signal_right_after_the_exchange_puts_the_previous_output_back(tmp_path, monkeypatch):
    """A signal's exception landing between the exchange and the check of what it took out of
    OUT: that is put back into OUT (never removed unchecked), the new output removed."""
    from nrtrewrite.cli import Terminated

    out = tmp_path / "out"
    write_output(_plan("ar2"), out, ranks=None)
    previous = verify_complete(out)
    real, calls = bundle._exchange, []

    def exchange_then_signal(a, b):
        calls.append(real(a, b))
        if len(calls) == 1:
            raise Terminated(signal.SIGTERM)
        return calls[-1]
    monkeypatch.setattr(bundle, "_exchange", exchange_then_signal)
    with pytest.raises(Terminated):
        write_output(_plan("mix8"), out, ranks=None, force=True)
    assert calls == [True, True]  # the exchange, and the exchange back
    assert verify_complete(out) == previous
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def _another_lowers_cleanup(out: Path) -> list[str]:
    """What a second ``lower`` of ``out`` starting now removes first, as a killed run's
    (:func:`clean_stale_temps`, in a process of its own: a sibling of this process's PID
    is never its cleanup's)."""
    code = ("import json, sys; from nrtrewrite.bundle import clean_stale_temps; "
            "print(json.dumps([p.name for p in clean_stale_temps(sys.argv[1])]))")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True,
                          text=True, env=env(), timeout=120, check=True)
    return json.loads(proc.stdout)


@pytest.mark.parametrize("exchange", [True, False])
@pytest.mark.parametrize("when", ["after_the_swap", "while_removing"])
def test_another_lowers_cleanup_never_takes_the_swapped_out_previous_output(
        tmp_path, monkeypatch, exchange, when):
    """Once swapped out, the previous output is a temporary sibling of OUT of a live PID,
    as old as the previous output.  Another ``lower`` of OUT starting then (review 53f) took
    it, unlocked and over a minute old, for a killed run's and deleted it while this run
    checked it (a false refusal, ``cannot list its folder rank-0001``, and OUT put back
    empty) or removed it (a warning about a folder already gone).  The previous output is
    locked from before the swap until it is removed: the other run's cleanup keeps it, and
    this run replaces OUT and removes it as if alone; also where the kernel cannot
    exchange (the previous output renamed aside to ``.out.old-*``)."""
    out = tmp_path / "out"
    write_output(_plan("ar2"), out, ranks=None)
    t = time.time() - 2 * bundle.STALE_AFTER_S  # an output lowered some minutes ago
    os.utime(out, (t, t))
    swapped_out, removed_by_the_other = [], []

    def other_lower_starts():
        swapped_out.extend(p.name for p in tmp_path.iterdir()  # (ar2's two ranks)
                           if p.name.startswith(".out.") and len(list(p.glob("rank-*"))) == 2)
        removed_by_the_other.extend(_another_lowers_cleanup(out))
    real_exchange, real_rename, real_remove = bundle._exchange, os.rename, bundle._remove_replaced

    def exchange_or_not(a, b):
        done = real_exchange(a, b) if exchange else False
        if done and when == "after_the_swap" and not swapped_out:
            other_lower_starts()
        return done

    def rename(a, b):
        real_rename(a, b)
        if when == "after_the_swap" and Path(b).name.startswith(".out.old-"):
            other_lower_starts()

    def remove(out_, old, warn_):
        if when == "while_removing":
            other_lower_starts()
        real_remove(out_, old, warn_)
    monkeypatch.setattr(bundle, "_exchange", exchange_or_not)
    monkeypatch.setattr(bundle.os, "rename", rename)
    monkeypatch.setattr(bundle, "_remove_replaced", remove)
    warnings = []
    write_output(_plan("mix8"), out, ranks=None, force=True, warn=warnings.append)
    assert len(swapped_out) == 1  # the previous output, aside: .out.tmp-* or .out.old-*
    assert swapped_out[0].startswith(".out.tmp-" if exchange else ".out.old-")
    assert removed_by_the_other == []
    assert warnings == []
    verify_complete(out)
    assert len(list(out.glob("rank-*"))) == 8  # mix8's, the new output
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_the_lock_follows_what_the_swap_took_out_of_out(tmp_path, monkeypatch):
    """Another ``lower --force`` may exchange its output into OUT between this run's lock of
    OUT and its own swap: the swap then takes out that output, not the one locked.  It is
    locked as soon as it is swapped out (its run has ended: nothing holds it), before it is
    checked, so a third run's cleanup keeps it too, and this run removes it as if alone."""
    out = tmp_path / "out"
    write_output(_plan("ar2"), out, ranks=None)
    theirs = tmp_path / "theirs"
    write_output(_plan("int32_allgather"), theirs, ranks=None)
    t = time.time() - 2 * bundle.STALE_AFTER_S
    os.utime(theirs, (t, t))
    real_exchange, real_refusal, removed_by_the_other = bundle._exchange, \
        bundle._ForcedSwap._refusal, []

    def another_run_first(a, b):
        if Path(b) == out and theirs.exists():
            assert real_exchange(theirs, out)  # the other run's swap: theirs at OUT
            shutil.rmtree(theirs)  # (what it took out: the output this run locked, removed)
        return real_exchange(a, b)

    def refusal(self, what):  # the check of what the swap took out: a third run starts
        if Path(what) != out and not removed_by_the_other:
            removed_by_the_other.append(_another_lowers_cleanup(out))
        return real_refusal(self, what)
    monkeypatch.setattr(bundle, "_exchange", another_run_first)
    monkeypatch.setattr(bundle._ForcedSwap, "_refusal", refusal)
    warnings = []
    write_output(_plan("mix8"), out, ranks=None, force=True, warn=warnings.append)
    assert removed_by_the_other == [[]]
    assert warnings == []
    verify_complete(out)
    assert len(list(out.glob("rank-*"))) == 8  # mix8's
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_clean_stale_temps_removes_only_dead_siblings(tmp_path):
    out = tmp_path / "model.lowered"
    dead = dead_pid()
    stale = tmp_path / f".model.lowered.tmp-{dead}-0123abcd"
    stale_old = tmp_path / f".model.lowered.old-{dead}-89abcdef"
    live = tmp_path / f".model.lowered.tmp-{os.getppid()}-0123abcd"
    other = tmp_path / f".other.lowered.tmp-{dead}-0123abcd"
    odd = tmp_path / f".model.lowered.tmp-{dead}-notahex1"
    for d in (stale, stale_old, live, other, odd):
        d.mkdir()
        (d / "f").write_text("x")
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep").write_text("x")
    link = tmp_path / f".model.lowered.tmp-{dead}-fedcba98"
    link.symlink_to(target)
    removed = clean_stale_temps(out)
    assert sorted(p.name for p in removed) == sorted([stale.name, stale_old.name])
    assert not stale.exists() and not stale_old.exists()
    assert live.exists() and other.exists() and odd.exists() and link.is_symlink()
    assert (target / "keep").exists()


def test_only_a_sibling_named_exactly_after_the_output_is_stale(tmp_path):
    """A folder of the user's whose name only ends in a line break after the sibling shape,
    ``.victim.tmp-PID-HEX\n``, was removed (the pattern's ``$`` matched before a final
    newline); the stale sibling of an output whose own name holds a line break was never
    removed (``.+`` stops at it).  Only ``.`` + the output's name + ``.tmp-PID-HEX`` (or
    ``.old-``) is a sibling (docs/CLI.md: "named exactly")."""
    dead = dead_pid()
    mine = tmp_path / f".victim.tmp-{dead}-deadbeef\n"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    stale_nl = tmp_path / f".n\nl.tmp-{dead}-deadbeef"
    tail_nl = tmp_path / f".n\nl.tmp-{dead}-deadbeef\n"
    for d in (stale_nl, tail_nl):
        d.mkdir()
    assert clean_stale_temps(tmp_path / "victim") == []
    assert (mine / "notes.txt").read_text() == "precious"
    assert clean_stale_temps(tmp_path / "n\nl") == [stale_nl]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, tail_nl.name])


def test_a_sibling_whose_pid_is_not_ascii_digits_is_the_users(tmp_path):
    """A build's sibling is named with its PID in ASCII digits (``os.getpid()`` formatted:
    docs/CLI.md, "named exactly"); a folder ``.victim.tmp-PID-HEX`` whose PID is written in
    other Unicode digits (Arabic-Indic here, which ``int()`` reads as the same number, a dead
    process's) is a user's: kept with its file."""
    dead = dead_pid()
    arabic = "".join(chr(0x660 + int(d)) for d in str(dead))
    mine = tmp_path / f".victim.tmp-{arabic}-deadbeef"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    assert clean_stale_temps(tmp_path / "victim") == []
    assert (mine / "notes.txt").read_text() == "precious"


def test_lower_keeps_a_users_folder_named_like_a_sibling_and_a_newline(tmp_path):
    """The reviewer's reproducer through the CLI: ``lower -o victim`` beside
    ``.victim.tmp-999999-deadbeef\n`` keeps it and its file."""
    mine = tmp_path / f".victim.tmp-{dead_pid()}-deadbeef\n"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    proc = run(FIX / "ar2.neff", "-o", tmp_path / "victim")
    assert proc.returncode == 0, proc.stderr
    assert (mine / "notes.txt").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, "victim"])


def test_a_parent_or_tmpdir_that_cannot_be_listed_skips_the_cleanup(tmp_path, monkeypatch):
    """The cleanup of a killed run's leftovers is best effort: a folder it cannot list (read
    permission withdrawn: root would list it anyway, so the refusal is simulated) leaves the
    leftovers where they are, and the output is still written and complete."""
    dead = dead_pid()
    stale = tmp_path / f".out.tmp-{dead}-0123abcd"
    sim = tmp_path / "nrtrewrite-simulate-a1b2c3d4"
    for d in (stale, sim):
        d.mkdir()
    old = time.time() - 2 * bundle.STALE_AFTER_S
    os.utime(sim, (old, old))
    scandir = os.scandir

    def refusing(path="."):
        if Path(path) == tmp_path:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(bundle.os, "scandir", refusing)
    assert clean_stale_temps(tmp_path / "out") == []
    assert bundle.clean_stale_simulate_temps(tmp_path) == []
    out = write_output(_plan(), tmp_path / "out", ranks=None, workers=1)
    assert sorted(p.name for p in Path(out).iterdir()) == [
        "ar2.neff", "manifest.json", "rank-0000", "rank-0001"]  # FORMATS.md "Layout"
    monkeypatch.undo()
    assert stale.is_dir() and sim.is_dir()  # left: nobody could see them
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([stale.name, sim.name, "out"])


def test_a_locked_sibling_of_an_unknown_pid_is_a_live_build(tmp_path):
    """A lower in another PID namespace (a container sharing the folder) has a PID this
    kernel does not know, but holds the lock on its temporary folder: it is left alone,
    and removed once the lock is released (the build was killed)."""
    import fcntl
    out = tmp_path / "model.lowered"
    dead = dead_pid()
    theirs = tmp_path / f".model.lowered.tmp-{dead}-0123abcd"
    theirs.mkdir()
    (theirs / "rank-0000").mkdir()
    fd = os.open(theirs, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as bundle.lock_folder holds it
        assert clean_stale_temps(out) == []
        assert (theirs / "rank-0000").is_dir()
    finally:
        os.close(fd)
    assert clean_stale_temps(out) == [theirs]
    assert not theirs.exists()


def test_an_old_unlocked_sibling_of_a_live_pid_is_stale(tmp_path):
    """A build killed in a container had PID 2 there, which is kthreadd here: a PID alive
    on this host.  Unlocked and over a minute old, its folder is a killed run's; young, it
    may be a build between its mkdir and its lock, and is kept."""
    out = tmp_path / "model.lowered"
    old = tmp_path / f".model.lowered.tmp-{os.getppid()}-0123abcd"
    young = tmp_path / f".model.lowered.tmp-{os.getppid()}-89abcdef"
    for d in (old, young):
        (d / "rank-0000").mkdir(parents=True)
    t = time.time() - 2 * bundle.STALE_AFTER_S
    os.utime(old, (t, t))
    assert clean_stale_temps(out) == [old]
    assert young.is_dir() and not old.exists()


def test_without_locks_the_pid_alone_tells_a_killed_build(tmp_path, monkeypatch):
    """On a file system without flock (NFS without a lock manager: ENOLCK) a build holds
    no lock; a sibling is then a killed build's by its PID alone: a dead PID's is removed,
    a live PID's kept however old (it cannot be told from a live build).  A build there
    still writes its output."""
    import errno
    import fcntl

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(fcntl, "flock", no_locks)
    out = tmp_path / "model.lowered"
    dead = dead_pid()
    killed = tmp_path / f".model.lowered.tmp-{dead}-0123abcd"
    live = tmp_path / f".model.lowered.tmp-{os.getppid()}-89abcdef"
    for d in (killed, live):
        (d / "rank-0000").mkdir(parents=True)
    t = time.time() - 2 * bundle.STALE_AFTER_S
    os.utime(live, (t, t))
    assert bundle.lock_folder(live) is None
    assert clean_stale_temps(out) == [killed]
    assert live.is_dir() and not killed.exists()
    write_output(_plan("ar2"), out, ranks=None)
    verify_complete(out)


def test_a_sibling_of_another_users_live_process_is_kept_while_young(tmp_path, monkeypatch):
    """A PID this user may not signal (another user's process: EPERM) is a live one: its
    young sibling is kept (a build between its mkdir and its lock); unlocked and over a
    minute old, it is a killed build's and removed."""
    import errno
    real_kill = os.kill

    def kill(pid, sig):
        if pid == 4242:
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_kill(pid, sig)
    monkeypatch.setattr(bundle.os, "kill", kill)
    out = tmp_path / "model.lowered"
    young = tmp_path / ".model.lowered.tmp-4242-0123abcd"
    old = tmp_path / ".model.lowered.tmp-4242-89abcdef"
    for d in (young, old):
        (d / "rank-0000").mkdir(parents=True)
    t = time.time() - 2 * bundle.STALE_AFTER_S
    os.utime(old, (t, t))
    assert clean_stale_temps(out) == [old]
    assert young.is_dir() and not old.exists()


def test_a_build_holds_the_lock_on_its_temporary_folder(tmp_path, monkeypatch):
    """While write_output builds, its temporary folder's lock is taken: another process's
    non-blocking flock of it fails."""
    import fcntl
    out = tmp_path / "out"
    real = bundle._write_file
    seen = []

    def probe(path, data, sync=True):
        real(path, data, sync)
        if Path(path).name == "manifest.json" and Path(path).parent.name.startswith(".out."):
            fd = os.open(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                # a separate open file description: flock conflicts as across processes
                with pytest.raises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append(Path(path).parent.name)
            finally:
                os.close(fd)
    monkeypatch.setattr(bundle, "_write_file", probe)
    write_output(_plan(), out, ranks=None)
    assert len(seen) == 1 and seen[0].startswith(".out.tmp-")
    verify_complete(out)


@pytest.mark.parametrize("when", ["before_fsync", "after_fsync"])
def test_a_rank_folder_removed_while_building_fails_the_run(tmp_path, monkeypatch, when):
    """Something else removes a finished rank folder before the rename (as a cleanup that
    took the build for a killed one did): the run fails naming what is gone, and OUT never
    appears.  Before its files are fsynced the fsync finds them gone; after, the check of
    the folder's entries before the rename does."""
    out = tmp_path / "out"
    if when == "before_fsync":
        real = bundle._write_file

        def vandal(path, data, sync=True):
            if Path(path).name == "manifest.json" and Path(path).parent.name.startswith(".out."):
                shutil.rmtree(Path(path).parent / "rank-0001")
            real(path, data, sync)
        monkeypatch.setattr(bundle, "_write_file", vandal)
        # (the fsync thread may have synced the folder's files already: then the check of
        # the entries before the rename finds it gone)
        want = (r"removed by another process before it was fsynced \(.*/rank-0001"
                r"(/[a-z0-9_]+\.(bin|json))?\)|1 of the entries written .* are gone \(rank-0001\)")
    else:
        real_drain = bundle._Syncer.drain

        def vandal(self):
            real_drain(self)
            (tmp,) = tmp_path.glob(".out.tmp-*")
            shutil.rmtree(tmp / "rank-0001")
        monkeypatch.setattr(bundle._Syncer, "drain", vandal)
        want = (r"1 of the entries written .* are gone \(rank-0001\): another process removed "
                "them; nothing was written to")
    with pytest.raises(OutputError, match=want):
        write_output(_plan(), out, ranks=None)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_force_knows_a_big_manifest_of_ours_by_its_beginning(tmp_path):
    from nrtrewrite.bundle import _is_our_output
    pad = ", ".join(f'"k{i}": {i}' for i in range(200_000))  # well over 1 MiB
    ours, other, broken = tmp_path / "ours", tmp_path / "other", tmp_path / "broken"
    for d in (ours, other, broken):
        d.mkdir()
    (ours / "manifest.json").write_text('{\n "format": "nrtrewrite-lowered", ' + pad + "}")
    (other / "manifest.json").write_text('{"format": "something-else", ' + pad + "}")
    (broken / "manifest.json").write_text('{"pad": [' + pad.replace(":", ",") + "]")
    assert (ours / "manifest.json").stat().st_size > 1 << 20
    assert _is_our_output(ours)
    assert not _is_our_output(other) and not _is_our_output(broken)
    # and the CLI replaces the big one of ours
    assert run(FIX / "ar2.neff", "-o", ours, "--force").returncode == 0
    verify_complete(ours)


@pytest.mark.parametrize("workers", [1, 2])
def test_every_rank_file_and_folder_is_fsynced_before_the_rename(tmp_path, monkeypatch, workers):
    """The rank folders are fsynced on a thread while later ranks are lowered (bundle._Syncer),
    by the process that renames the output; each of their files and each folder is fsynced
    once, before the output's own folder and before the rename into place."""
    events = []
    real_path, real_dir, real_rename = bundle._fsync_path, bundle._fsync_dir, bundle._rename_noreplace
    monkeypatch.setattr(bundle, "_fsync_path", lambda p: (real_path(p), events.append(("sync", p))))
    monkeypatch.setattr(bundle, "_fsync_dir", lambda p: (real_dir(p), events.append(("dir", p))))
    monkeypatch.setattr(bundle, "_rename_noreplace",
                        lambda a, b: (events.append(("rename", a)), real_rename(a, b)))
    plan = _plan("mix8")
    out = write_output(plan, tmp_path / "out", ranks=None, workers=workers)
    verify_complete(out)
    rename = next(i for i, (kind, _p) in enumerate(events) if kind == "rename")
    tmp = events[rename][1]
    synced = [p.relative_to(tmp) for kind, p in events[:rename] if kind == "sync"]
    want = []
    for rank in plan.world:
        rdir = Path(f"rank-{rank:04d}")
        want += [rdir / name for name in sorted(os.listdir(out / rdir))] + [rdir]
    assert sorted(synced) == sorted(want) and len(synced) == len(set(synced))
    # the output's own folder after every rank's
    last_rank = max(i for i, (kind, _p) in enumerate(events) if kind == "sync")
    assert any(kind == "dir" and p == tmp for kind, p in events[last_rank:rename])


def test_a_failed_fsync_of_a_rank_file_fails_the_run_and_leaves_nothing(tmp_path, monkeypatch):
    real = bundle._fsync_path

    def failing(p):
        if p.name == "sem.bin" and p.parent.name == "rank-0003":
            raise OSError(5, "Input/output error")  # as os.fsync raises it: no file name
        real(p)
    monkeypatch.setattr(bundle, "_fsync_path", failing)
    with pytest.raises(OutputError) as exc:
        write_output(_plan("mix8"), tmp_path / "out", ranks=None)
    msg = str(exc.value)
    assert "cannot write the output: Input/output error" in msg and "\n" not in msg
    assert msg.rstrip(")").endswith(str(Path("rank-0003") / "sem.bin")), msg
    assert list(tmp_path.iterdir()) == []


def test_forked_children_keep_the_default_sigterm():
    """A pool worker must die of SIGTERM at once, as before the CLI's handler: with the
    Python-level handler inherited, a worker blocked on a queue lock when its parent
    terminated the pool could wait forever (seen 2 times in 60 loaded runs)."""
    from nrtrewrite.cli import terminate_cleanly

    sigs = (signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in sigs}  # SIGHUP may be ignored (nohup, CI)
    with terminate_cleanly():
        assert all(signal.getsignal(s) is not before[s] for s in sigs
                   if before[s] != signal.SIG_IGN)
        pid = os.fork()
        if pid == 0:  # the child: its handlers are the ones before the CLI's
            os._exit(0 if all(signal.getsignal(s) == before[s] for s in sigs) else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert {s: signal.getsignal(s) for s in sigs} == before


def test_an_ignored_sighup_stays_ignored():
    """``nohup nrtrewrite lower ...`` keeps running when the terminal goes away."""
    from nrtrewrite.cli import terminate_cleanly

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with terminate_cleanly():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, before)


def _renameat2_failing(err: int):
    """A renameat2 that fails with ``err`` (a kernel or file system without the flag)."""
    import ctypes

    def renameat2(*args):
        ctypes.set_errno(err)
        return -1
    return renameat2


@pytest.mark.parametrize("renameat2", ["none", "ENOSYS", "EINVAL"])
def test_lower_and_force_without_renameat2(tmp_path, monkeypatch, renameat2):
    """docs/RELIABILITY.md: where the C library has no renameat2 (not glibc) or the kernel
    or file system refuses its flags (ENOSYS, EINVAL), the output is still placed: a plain
    rename when nothing is at OUT, and with --force OUT renamed aside, the new output
    renamed in, the previous one removed; nothing else is left beside OUT."""
    import errno
    fake = None if renameat2 == "none" else _renameat2_failing(getattr(errno, renameat2))
    monkeypatch.setattr(bundle, "_renameat2", lambda: fake)
    out = tmp_path / "out"
    write_output(_plan("ar2"), out, ranks=None)
    previous = verify_complete(out)
    assert sorted(p.name for p in out.glob("rank-*")) == ["rank-0000", "rank-0001"]
    write_output(_plan("mix8"), out, ranks=None, force=True)
    assert verify_complete(out) != previous
    assert len(list(out.glob("rank-*"))) == 8  # mix8: 8 ranks
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_renameat2_failing_for_another_reason_is_the_error(tmp_path, monkeypatch):
    """renameat2 refused for a reason other than a missing flag (EACCES) is the run's
    error, naming OUT: the previous output stays as it was and nothing else is left."""
    import errno
    out = tmp_path / "out"
    write_output(_plan("ar2"), out, ranks=None)
    previous = verify_complete(out)
    monkeypatch.setattr(bundle, "_renameat2", lambda: _renameat2_failing(errno.EACCES))
    with pytest.raises(OutputError) as err:
        write_output(_plan("mix8"), out, ranks=None, force=True)
    assert str(err.value).startswith(f"{out}: cannot write the output: Permission denied")
    assert verify_complete(out) == previous
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("after", [1, 2])
def test_force_without_an_exchange_survives_a_signal_between_its_renames(tmp_path, monkeypatch,
                                                                         after):
    """Where the kernel cannot exchange two folders atomically, ``--force`` renames OUT
    aside, then the new output into place.  A signal's exception landing after the first
    rename (or right after the second) used to remove the new output with the temporary
    folder and leave the previous one under ``.out.old-*``, which the next run deletes as
    stale: OUT was lost.  Now OUT holds a complete output, the previous one (after the
    first rename) or the new one (after both), and nothing else is left."""
    from nrtrewrite.cli import Terminated

    out = tmp_path / "out"
    write_output(_plan("ar2"), out, ranks=None)
    previous = verify_complete(out)
    monkeypatch.setattr(bundle, "_exchange", lambda a, b: False)
    rename, noreplace, calls = os.rename, bundle._rename_noreplace, []

    def then_signal(real):
        def renamed(a, b):
            real(a, b)
            calls.append((Path(a).name, Path(b).name))
            if len(calls) == after:
                raise Terminated(signal.SIGTERM)
        return renamed
    # (the second rename is one that never replaces, since 2026-12-07: _rename_noreplace)
    monkeypatch.setattr(bundle.os, "rename", then_signal(rename))
    monkeypatch.setattr(bundle, "_rename_noreplace", then_signal(noreplace))
    with pytest.raises(Terminated):
        write_output(_plan("mix8"), out, ranks=None, force=True)
    monkeypatch.setattr(bundle.os, "rename", rename)
    monkeypatch.setattr(bundle, "_rename_noreplace", noreplace)
    assert calls[0][0] == "out" and calls[0][1].startswith(".out.old-")
    now = verify_complete(out)
    if after == 1:
        assert now == previous
    else:
        assert now != previous and len(list(out.glob("rank-*"))) == 8
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def _nofile(n: int):
    """A ``preexec_fn`` that sets the child's descriptor limit to ``n``."""
    import resource

    def set_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return set_limit


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("nofile", [6])  # (at 7 and more the cleanup found enough before)
def test_a_run_out_of_descriptors_leaves_no_temporary_folder(tmp_path, jobs, nofile):
    """A run that fails for want of file descriptors (EMFILE, `ulimit -n`) removes its
    temporary folder: the cleanup held the run's lock descriptor and the manifest
    process's pipes, and removing a tree needs two descriptors per level (found by a
    fault audit: `.o1.tmp-PID-HEX/rank-0000/` was left)."""
    model = tmp_path / "mix8.neff"
    shutil.copy(FIX / "mix8.neff", model)
    before = sha(model)
    proc = subprocess.run(lower_cmd(model, "-o", tmp_path / "o1", "-j", jobs),
                          capture_output=True, text=True, cwd=tmp_path, env=env(),
                          timeout=120, preexec_fn=_nofile(nofile))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "Too many open files" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mix8.neff"]
    assert sha(model) == before


def test_golden_out_of_descriptors_leaves_no_temporary_folder(tmp_path):
    """`python -m nrtrewrite.golden` at a descriptor limit of 5: an error line, and its
    temporary folder removed (TemporaryDirectory's cleanup failed there)."""
    tmpdir = tmp_path / "t"
    tmpdir.mkdir()
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite.golden", str(FIX / "ar2.neff"),
                           str(tmp_path / "g.tgz")], capture_output=True, text=True,
                          cwd=tmp_path, env=env(TMPDIR=tmpdir), timeout=120,
                          preexec_fn=_nofile(5))
    assert proc.returncode == 2 and "Too many open files" in proc.stderr, proc.stderr
    assert list(tmpdir.iterdir()) == [] and not (tmp_path / "g.tgz").exists()


def test_rmtree_few_fds_never_walks_through_a_link(tmp_path):
    """A link where the temporary folder should be is unlinked, never followed: the
    fallback's os.walk would remove what the link points to (found by a review)."""
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "a.txt").write_text("keep")
    link = tmp_path / ".out.tmp-1-ab"
    link.symlink_to(victim)
    bundle.rmtree_few_fds(link)
    assert not os.path.lexists(link)
    assert (victim / "a.txt").read_text() == "keep" and (victim / "sub").is_dir()
    tree = tmp_path / "tree"
    (tree / "x" / "y").mkdir(parents=True)
    (tree / "x" / "y" / "f").write_text("f")
    (tree / "x" / "l").symlink_to(victim)
    bundle.rmtree_few_fds(tree)
    assert not tree.exists() and (victim / "a.txt").exists()


#: A process that runs ``python -m MODULE ARGS...`` (argv: the module, then its arguments)
#: and SIGKILLs itself once the atomic write has written its temporary file, at its fsync
#: (``tempfile.mkstemp`` is ``write_bytes_atomic``'s alone in these runs: the lowering names
#: its own folders), as a power cut or the OOM killer would stop it
_KILLED_WRITING = r"""
import os, runpy, signal, sys, tempfile
real_mkstemp, real_fsync, made = tempfile.mkstemp, os.fsync, []
def mkstemp(*a, **k):
    got = real_mkstemp(*a, **k)
    if not k.get("prefix", "").startswith(".nrtrewrite-probe-"):  # (temp_root's probe)
        made.append(got)
    return got
def fsync(fd):
    if made:
        print("TEMP", made[-1][1], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return real_fsync(fd)
tempfile.mkstemp, os.fsync = mkstemp, fsync
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def _killed_writing(module: str, *args, tmpdir: Path
                    ) -> tuple[subprocess.CompletedProcess, Path]:
    """Run ``_KILLED_WRITING`` (its temporary folders, a killed golden's too, in ``tmpdir``)."""
    tmpdir.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITING, module, *map(str, args)],
                          capture_output=True, text=True, env=env(TMPDIR=tmpdir), cwd=ROOT,
                          timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (temp,) = [Path(line[5:]) for line in proc.stdout.splitlines() if line.startswith("TEMP ")]
    return proc, temp


def test_a_sigkilled_assemble_leaves_a_temp_the_next_write_of_its_output_removes(tmp_path):
    """``assemble -o m.neff`` SIGKILLed while it writes leaves its temporary file beside
    ``m.neff`` (nothing can remove it then), ``m.neff`` as it was; the next ``assemble -o
    m.neff`` removes it: its name holds the killed writer's PID (``.m.neff.PID-XXXXXXXX.tmp``),
    no process any more (until 2026-12-07 ``.m.neff.XXXXXXXX.tmp`` stayed for good)."""
    spec, out = tmp_path / "ar2.yaml", tmp_path / "m.neff"
    shutil.copy(FIX / "ar2.yaml", spec)
    out.write_bytes(b"previous")
    proc, temp = _killed_writing("nrtrewrite", "assemble", spec, "-o", out,
                                 tmpdir=tmp_path.parent / f"{tmp_path.name}-tmp")
    assert temp.parent == tmp_path and temp.exists() and out.read_bytes() == b"previous"
    # (the writer's PID in the name: the process just killed, whose PID is gone)
    pid = int(temp.name[len(".m.neff."):].split("-")[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    res = subprocess.run([sys.executable, "-m", "nrtrewrite", "assemble", str(spec), "-o",
                          str(out)], capture_output=True, text=True, env=env(), cwd=ROOT,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes() == (FIX / "ar2.neff").read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["ar2.yaml", "m.neff"]


def test_a_sigkilled_golden_leaves_a_temp_the_next_run_removes_written_or_unchanged(tmp_path):
    """``python -m nrtrewrite.golden`` SIGKILLed while it writes ``GOLDEN`` leaves its
    temporary file (``GOLDEN`` not written); the next run removes it as it writes
    ``GOLDEN``, and a run that leaves ``GOLDEN`` ``unchanged`` (no write) removes one a
    killed run left too (until 2026-12-07 they stayed)."""
    golden, tmpdir = tmp_path / "g.tar.gz", tmp_path.parent / f"{tmp_path.name}-tmp"
    _, temp = _killed_writing("nrtrewrite.golden", FIX / "ar2.neff", golden, tmpdir=tmpdir)
    (killed,) = os.listdir(tmpdir)  # (its nrtrewrite-golden-XXXXXXXX, which a kill leaves)
    shutil.rmtree(tmpdir / killed)
    assert sorted(os.listdir(tmp_path)) == [temp.name]
    for said in ("written", "unchanged"):
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite.golden", str(FIX / "ar2.neff"),
                               str(golden)], capture_output=True, text=True, env=env(),
                              cwd=ROOT, timeout=300)
        assert (proc.returncode, proc.stdout) == (0, f"{golden}: {said}\n"), proc.stderr
        assert sorted(os.listdir(tmp_path)) == ["g.tar.gz"]
        assert golden.read_bytes() == (FIX / "golden" / "ar2.tar.gz").read_bytes()
        (tmp_path / f".g.tar.gz.{dead_pid()}-k1ll_3d0.tmp").write_bytes(b"half")


def test_a_writer_whose_lock_a_cleanup_holds_that_instant_waits_for_it(tmp_path, monkeypatch):
    """Review 54k: a writer's ``flock`` of its new temporary file, falling in the instant
    another writer's cleanup holds it (looking at it), got ``BlockingIOError`` and went on
    without its lock, so after a minute unchanged (a slow fsync) the next writer removed it
    and the first write failed.  It waits for the lock instead: the temporary file returned
    is locked (another open of it cannot take the lock)."""
    import fcntl

    from nrtrewrite.neff import writer

    real, calls = fcntl.flock, []

    def flock(fd, op):
        calls.append(op)
        if len(calls) == 1:
            raise BlockingIOError(errno.EWOULDBLOCK, "Resource temporarily unavailable")
        return real(fd, op)
    monkeypatch.setattr(writer.fcntl, "flock", flock)
    fd, tmp = writer.temp_sibling(tmp_path / "m.neff")
    monkeypatch.setattr(writer.fcntl, "flock", real)
    try:
        assert calls == [fcntl.LOCK_EX | fcntl.LOCK_NB, fcntl.LOCK_EX]
        other = os.open(tmp, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    finally:
        os.close(fd)
        os.unlink(tmp)


def test_only_a_gone_writers_temporaries_are_removed(tmp_path):
    """``writer.remove_stale_temps`` (the first step of every atomic write): removed, this
    user's regular files named ``.NAME.PID-XXXXXXXX.tmp`` whose PID runs no process, or
    whose lock is free and which are a minute unchanged (a writer killed in another PID
    namespace), and those of the shape before 2026-12-07, ``.NAME.XXXXXXXX.tmp``, an hour
    unchanged; kept, a live writer's (its PID running and the file young, or its lock held
    whatever its PID), a young one of the old shape, a link, a folder, another target's,
    names that are not exactly the shape, another user's."""
    from nrtrewrite.neff.writer import remove_stale_temps

    dead, hour_ago = dead_pid(), time.time() - 3700
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    holder = None
    try:
        live = sleeper.pid
        removed = [tmp_path / f".m.neff.{dead}-abcd_123.tmp",
                   tmp_path / f".m.neff.{live}-old12345.tmp",  # (lock free, an hour old)
                   tmp_path / ".m.neff.abcd_123.tmp"]  # (the old shape, an hour old)
        kept = [tmp_path / f".m.neff.{live}-young123.tmp",
                tmp_path / f".m.neff.{dead}-held1234.tmp",  # (its lock held, below)
                tmp_path / ".m.neff.young_12.tmp",
                tmp_path / f".other.neff.{dead}-abcd_123.tmp",
                tmp_path / f".m.neff.{dead}-abcd_12.tmp",
                tmp_path / f".m.neff.{dead}-abcd_123.tmp.bak",
                tmp_path / f".m.neff.{dead}-abcd_123.tmp\n",
                tmp_path / f".m.neff.x{dead}-abcd_123.tmp",
                tmp_path / "m.neff"]
        for p in removed + kept:
            p.write_bytes(b"left")
        for p in removed[1:]:
            os.utime(p, (hour_ago, hour_ago))
        link = tmp_path / f".m.neff.{dead}-link_123.tmp"
        link.symlink_to("m.neff")
        folder = tmp_path / f".m.neff.{dead}-fold_123.tmp"
        folder.mkdir()
        kept += [link, folder]
        if os.geteuid() == 0:
            theirs = tmp_path / f".m.neff.{dead}-their_12.tmp"
            theirs.write_bytes(b"theirs")
            os.chown(theirs, 12345, 12345)
            kept.append(theirs)
        held = tmp_path / f".m.neff.{dead}-held1234.tmp"
        holder = subprocess.Popen(
            [sys.executable, "-c", "import fcntl, os, sys, time\n"
             "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)",
             str(held)], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline() == "held\n"
        got = remove_stale_temps(tmp_path / "m.neff")
    finally:
        for p in (sleeper, holder):
            if p is not None:
                p.kill()
                p.wait()
    assert sorted(got) == sorted(map(str, removed))
    assert not any(p.exists() for p in removed)
    assert all(os.path.lexists(p) for p in kept)
    assert (tmp_path / "m.neff").read_bytes() == b"left"  # (the link's target untouched)
