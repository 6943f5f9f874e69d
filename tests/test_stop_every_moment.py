"""Stops at the moments a sweep of random SIGTERM / SIGHUP / Ctrl-C over every command's life
found unhandled (docs/CLI.md "Errors": a stop is one line, 128 + the signal, nothing left
behind).  Each moment is reached deterministically: the process signals itself from an
import hook, a finalizer or a wrapped step, never by timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from test_atomic_output import FIX, ROOT, env


def _default_stops() -> None:
    """In the child: the stop signals as a shell leaves them (the suite may run with SIGHUP
    ignored, under nohup)."""
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def run_code(code: str, *args: str, cwd=ROOT, tmpdir=None, preexec=_default_stops):
    extra = {} if tmpdir is None else {"TMPDIR": str(tmpdir)}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env(**extra), timeout=120,
                          preexec_fn=preexec)


#: the console script, stopped by the signal argv[1] as the module argv[2] is imported
WHILE_LOADING = r"""
import os, signal, sys
SIG, MOD = getattr(signal, sys.argv[1]), sys.argv[2]
class Stop:
    def find_spec(self, name, path=None, target=None):
        if name == MOD:
            os.kill(os.getpid(), SIG)
        return None
sys.meta_path.insert(0, Stop())
sys.argv = ["nrtrewrite", "inspect", sys.argv[3]]
from nrtrewrite.console import main
main()
"""


@pytest.mark.parametrize("module", ["click", "rich.console"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_while_the_modules_load_are_the_stops_line(sig, module):
    """In the console script's first tenths of a second (click and rich imported, before the
    CLI's handlers are in place) SIGTERM's default action ended the process silently, killed
    by the signal (the sweep: 1 in 10 of the early stops).  The stop now waits until the
    handlers are in place and ends the command as at any later moment."""
    proc = run_code(WHILE_LOADING, sig, module, FIX / "ar2.neff")
    assert (proc.returncode, proc.stderr, proc.stdout) == (
        128 + getattr(signal, sig), f"nrtrewrite: terminated by {sig}\n", "")


def test_a_sighup_ignored_while_the_modules_load_stays_ignored():
    """Under nohup SIGHUP is ignored: it stays so while the modules load too (not held,
    then raised), and the command runs to its end."""
    def hup_ignored():
        _default_stops()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = run_code(WHILE_LOADING, "SIGHUP", "click", FIX / "ar2.neff", preexec=hup_ignored)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "ar2" in proc.stdout


#: the console script running `inspect`, its model read with a stop (argv[1]) landing in a
#: finalizer, where Python prints the handler's exception and drops it
def _dropped_in(module: str, step: str, command: str, n_args: int) -> str:
    """The console script running ``command`` with the arguments argv[2:2 + n_args], its
    ``module.step`` wrapped so that a stop (argv[1]) lands in a finalizer as the step
    begins, where Python prints the handler's exception and drops it."""
    args = ", ".join(f"sys.argv[{2 + i}]" for i in range(n_args))
    return rf"""
import signal, sys, threading, time
import {module} as m
SIG = getattr(signal, sys.argv[1])
class Dropped:
    def __del__(self):
        signal.pthread_kill(threading.get_ident(), SIG)
        time.sleep(0.02)
real = m.{step}
def step(*args, **kw):
    Dropped()
    return real(*args, **kw)
m.{step} = step
sys.argv = ["nrtrewrite", "{command}", {args}]
from nrtrewrite.console import main
main()
"""


DROPPED = _dropped_in("nrtrewrite.cli.inspect", "read_model", "inspect", 1)


@pytest.mark.parametrize("sig, status, line", [
    ("SIGINT", 130, "Aborted!\n"), ("SIGTERM", 143, "nrtrewrite: terminated by SIGTERM\n")])
def test_a_stop_python_dropped_ends_the_command_with_its_line(sig, status, line):
    """A Ctrl-C whose handler ran inside a finalizer is raised again as the command ends
    (``cli.raise_lost_stop``), outside the command's own handling: it escaped as Python's
    ``KeyboardInterrupt`` traceback (status 130, no ``Aborted!``); SIGTERM's
    ``Terminated`` was already the line."""
    proc = run_code(DROPPED, sig, FIX / "ar2.neff")
    assert (proc.returncode, proc.stderr) == (status, line)


#: DROPPED, and a second stop (argv[1] again) sent as the command goes on to model_to_dict;
#: "went on" printed if the command did go on after it
DROPPED_THEN_AGAIN = DROPPED.replace("from nrtrewrite.console import main", r"""
import os
import nrtrewrite.cli.inspect as i
real_dict = i.model_to_dict
def model_to_dict(*args, **kw):
    os.kill(os.getpid(), SIG)
    sys.stderr.write("went on\n")
    return real_dict(*args, **kw)
i.model_to_dict = model_to_dict
from nrtrewrite.console import main""")


@pytest.mark.parametrize("sig, status, line", [
    ("SIGINT", 130, "Aborted!\n"), ("SIGTERM", 143, "nrtrewrite: terminated by SIGTERM\n")])
def test_a_stop_after_one_python_dropped_stops_the_command_at_once(sig, status, line):
    """A stop Python dropped runs no cleanup, so a later stop is not one that comes while
    the first one's cleanup runs: it raises the first at once, the one line and status
    (until 2026-12-06 it was ignored, and the command ran on to its end: ``lower`` through
    its whole lowering, up to placing its output)."""
    proc = run_code(DROPPED_THEN_AGAIN, sig, FIX / "ar2.neff")
    assert (proc.returncode, proc.stderr) == (status, line)


def _stop_at_rmtree_then_lower(sig: str, model: int, out: int) -> str:
    """The end of a script: the stop held in ``sig`` sent as ``bundle``'s ``rmtree`` begins
    (a cleanup removing the temporary folder), then the console's ``lower -q -j 1`` of
    ``argv[model]`` into ``argv[out]``."""
    return rf"""
real_rmtree = B.shutil.rmtree
def rmtree(path, *a, **kw):
    os.kill(os.getpid(), {sig})
    return real_rmtree(path, *a, **kw)
B.shutil.rmtree = rmtree
sys.argv = ["nrtrewrite", "lower", "-q", "-j", "1", sys.argv[{model}], "-o", sys.argv[{out}]]
from nrtrewrite.console import main
main()
"""


#: lower: a stop (argv[1]) Python drops as the first batch is emitted, raised again by a
#: second (argv[2]) as the first batch of a later rank begins (argv[5] "again"; else by
#: lower itself, before it would place its output), and one more (argv[2]) as the cleanup
#: that follows removes the temporary folder
DROPPED_THEN_CLEANUP = r"""
import os, signal, sys, threading, time
import nrtrewrite.bundle as B
import nrtrewrite.lower as L
SIG, SIG2 = getattr(signal, sys.argv[1]), getattr(signal, sys.argv[2])
class Dropped:
    def __del__(self):
        signal.pthread_kill(threading.get_ident(), SIG)
        time.sleep(0.02)
real_emit = L._emit_batch
def emit(builder, plan, batch, r, *a, **kw):
    if not hasattr(emit, "rank"):
        emit.rank = r
        Dropped()
    elif r != emit.rank and sys.argv[5] == "again":
        os.kill(os.getpid(), SIG2)
    return real_emit(builder, plan, batch, r, *a, **kw)
L._emit_batch = emit
""" + _stop_at_rmtree_then_lower("SIG2", 3, 4)


@pytest.mark.parametrize("again", ["again", "lower"])
@pytest.mark.parametrize("sig, sig2, status, line", [
    ("SIGTERM", "SIGTERM", 143, "nrtrewrite: terminated by SIGTERM\n"),
    ("SIGTERM", "SIGINT", 143, "nrtrewrite: terminated by SIGTERM\n"),
    ("SIGINT", "SIGHUP", 130, "Aborted!\n")])
def test_a_stop_raised_again_after_python_dropped_it_finishes_its_cleanup(
        tmp_path, sig, sig2, status, line, again):
    """The dropped stop, raised again by a later one, is the run's stop: a third while its
    cleanup removes the temporary folder is ignored, as for any stop (a review found the
    first version of the raising again left `.out.tmp-PID-HEX` behind: the stop stayed
    marked as dropped, and the third raised it a second time inside the cleanup)."""
    proc = run_code(DROPPED_THEN_CLEANUP, sig, sig2, FIX / "mix8.neff", tmp_path / "out",
                    again)
    assert (proc.returncode, proc.stderr) == (status, line)
    assert list(tmp_path.iterdir()) == []


#: lower -j 1: a stop (argv[1]) Python drops as the first rank's paths are made, then the
#: top manifest's write fails (ENOSPC) and a second stop comes as the error's cleanup
#: removes the temporary folder
DROPPED_THEN_ERROR = r"""
import errno, os, signal, sys, threading, time
import nrtrewrite.bundle as B
SIG = getattr(signal, sys.argv[1])
class Dropped:
    def __del__(self):
        signal.pthread_kill(threading.get_ident(), SIG)
        time.sleep(0.02)
real_paths = B._rank_paths
def rank_paths(*a, **kw):
    if not hasattr(rank_paths, "done"):
        rank_paths.done = True
        Dropped()
    return real_paths(*a, **kw)
B._rank_paths = rank_paths
real_wf = B._write_file
def wf(path, data, *a, **kw):
    if os.path.basename(str(path)) == "manifest.json" and "rank-" not in str(path):
        raise OSError(errno.ENOSPC, "No space left on device")
    return real_wf(path, data, *a, **kw)
B._write_file = wf
""" + _stop_at_rmtree_then_lower("SIG", 2, 3)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stop_after_a_dropped_one_does_not_cut_an_errors_cleanup(tmp_path, sig):
    """A later stop raises a dropped one at once, but not while an exception is handled: an
    error's cleanup runs there (a review found the first version cut it, `.out.tmp-PID-HEX`
    left and status 143, where the run had been the error's one line, 2, nothing left)."""
    proc = run_code(DROPPED_THEN_ERROR, sig, FIX / "mix8.neff", tmp_path / "out")
    assert proc.returncode == 2
    assert proc.stderr == (f"nrtrewrite: error: {tmp_path / 'out'}: cannot write the output: "
                           "No space left on device\n")
    assert list(tmp_path.iterdir()) == []


#: golden's main, the signal argv[3] sent as its temporary folder is removed (GOLDEN written)
GOLDEN_CLEANUP = r"""
import os, signal, sys
import nrtrewrite.golden as g
real = g.rmtree_few_fds
def rmtree_few_fds(path):
    if os.path.exists(sys.argv[2]):
        os.kill(os.getpid(), getattr(signal, sys.argv[3]))
    return real(path)
g.rmtree_few_fds = rmtree_few_fds
g.main([sys.argv[1], sys.argv[2]])
"""

#: ``python -m nrtrewrite.golden``'s end (g._run), the signal argv[3] sent once main is done
GOLDEN_AFTER = r"""
import os, signal, sys
import nrtrewrite.golden as g
SIG = getattr(signal, sys.argv[3])
real = g._stops_outside
def stops_outside():
    real()
    os.kill(os.getpid(), SIG)
g._stops_outside = stops_outside
sys.argv = ["golden", sys.argv[1], sys.argv[2]]
g._run()
"""


@pytest.fixture(scope="module")
def golden_bytes(tmp_path_factory) -> bytes:
    """ar2's golden archive from a run nothing stopped."""
    where = tmp_path_factory.mktemp("golden")
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite.golden", str(FIX / "ar2.neff"),
                           str(where / "g.tar.gz")], capture_output=True, text=True,
                          cwd=ROOT, env=env(TMPDIR=str(where)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return (where / "g.tar.gz").read_bytes()


@pytest.mark.parametrize("driver", [GOLDEN_CLEANUP, GOLDEN_AFTER], ids=["cleanup", "after"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_golden_stopped_once_written_says_so_and_leaves_no_temporary_folder(
        tmp_path, golden_bytes, sig, driver):
    """A stop after GOLDEN's atomic write: while the temporary folder was removed it cut the
    removal short (the lowered output left in TMPDIR) and said ``nothing written`` of a
    written GOLDEN; once ``main`` was done SIGTERM ended the process silently.  Now the
    folder goes whole, and the line says GOLDEN is written, complete."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    golden = tmp_path / "g.tar.gz"
    proc = run_code(driver, FIX / "ar2.neff", golden, sig, tmpdir=tmpdir)
    assert proc.returncode == 128 + getattr(signal, sig), proc.stderr
    assert proc.stderr == (f"nrtrewrite.golden: stopped by {sig}: {golden} was written, "
                           "complete, before the stop\n")
    assert list(tmpdir.iterdir()) == []
    assert sorted(os.listdir(tmp_path)) == ["g.tar.gz", "tmp"]
    assert golden.read_bytes() == golden_bytes


#: ``python -m nrtrewrite.golden``, stopped by argv[1] as its modules load (nrtrewrite.bundle)
GOLDEN_LOADING = r"""
import os, runpy, signal, sys
SIG = getattr(signal, sys.argv[1])
class Stop:
    def find_spec(self, name, path=None, target=None):
        if name == "nrtrewrite.bundle":
            os.kill(os.getpid(), SIG)
        return None
sys.meta_path.insert(0, Stop())
sys.argv = ["golden", sys.argv[2], sys.argv[3]]
runpy.run_module("nrtrewrite.golden", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_golden_stopped_while_its_modules_load_is_one_line(tmp_path, sig):
    """Ctrl-C while ``python -m nrtrewrite.golden`` loaded its modules was Python's
    traceback, SIGTERM and SIGHUP a silent end by the signal."""
    golden = tmp_path / "g.tar.gz"
    proc = run_code(GOLDEN_LOADING, sig, FIX / "ar2.neff", golden, tmpdir=tmp_path)
    assert (proc.returncode, proc.stderr, proc.stdout) == (
        128 + getattr(signal, sig), f"nrtrewrite.golden: stopped by {sig}: nothing written\n", "")
    assert os.listdir(tmp_path) == []


#: the console script running `assemble SPEC -o OUT`, the signal argv[1] sent as the file
#: is renamed into place (argv[4] "replace") or as its line is printed ("echo")
ASSEMBLE_PLACED = r"""
import os, signal, sys
import click
import nrtrewrite.neff.writer as W
SIG, WHEN = getattr(signal, sys.argv[1]), sys.argv[4]
if WHEN == "replace":
    real_replace = os.replace
    class _os:
        def __getattr__(self, name):
            return getattr(os, name)
        def replace(self, a, b):
            real_replace(a, b)
            os.kill(os.getpid(), SIG)
    W.os = _os()
else:
    real_echo = click.echo
    def echo(*a, **k):
        os.kill(os.getpid(), SIG)
        return real_echo(*a, **k)
    click.echo = echo
sys.argv = ["nrtrewrite", "assemble", sys.argv[2], "-o", sys.argv[3]]
from nrtrewrite.console import main
main()
"""


@pytest.mark.parametrize("when", ["replace", "echo"])
@pytest.mark.parametrize("sig, status, line", [
    ("SIGTERM", 143, "nrtrewrite: terminated by SIGTERM"), ("SIGINT", 130, "Aborted!")])
def test_an_assemble_stopped_once_its_file_is_replaced_says_it_is_in_place(
        tmp_path, sig, status, line, when):
    """``assemble -o OUT`` stopped once OUT was replaced (as the file was renamed, or as its
    line was printed) said only ``terminated by SIGTERM``: the previous OUT gone, the new
    one in place unannounced (the sweep: 1 of 25 runs under load).  As ``lower``'s, the stop
    now says first that OUT is complete and in place."""
    out = tmp_path / "m.neff"
    out.write_bytes(b"previous")
    proc = run_code(ASSEMBLE_PLACED, sig, FIX / "ar2.yaml", out, when, cwd=tmp_path)
    assert proc.returncode == status, proc.stderr
    assert proc.stderr == (f"nrtrewrite: warning: {out}: the new output is complete and in "
                           f"place; the run was stopped after it was written\n{line}\n")
    assert out.read_bytes() == (FIX / "ar2.neff").read_bytes()  # (make fixtures builds it so)
    assert sorted(os.listdir(tmp_path)) == ["m.neff"]


#: the console script with argv[1]'s Ctrl-C landing as click is imported: "dropped" (in a
#: finalizer, where Python prints the exception and goes on), "exec" (inside code run by
#: exec, as a dataclass's methods are made), "raised" (a KeyboardInterrupt raised in exec'd
#: code, as Python raises one it was not held from)
CTRL_C_LOADING = r"""
import os, signal, sys, threading, time
HOW = sys.argv[1]
class Dropped:
    def __del__(self):
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        time.sleep(0.02)
class Stop:
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            if HOW == "dropped":
                Dropped()
            elif HOW == "exec":
                exec("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\n"
                     "time.sleep(0.05)")
            else:
                exec("raise KeyboardInterrupt")
        return None
sys.meta_path.insert(0, Stop())
sys.argv = ["nrtrewrite", "inspect", sys.argv[2]]
from nrtrewrite.console import main
main()
"""


@pytest.mark.parametrize("how", ["dropped", "exec", "raised"])
def test_a_ctrl_c_while_the_modules_load_is_aborted_wherever_it_lands(tmp_path, how):
    """Ctrl-C while the console script loaded its modules: landing in the import system's
    weak-reference callback (a finalizer) it was printed as ``Exception ignored in`` and
    dropped, the command ran on and exited 0 (the sweep: once in 60 ``dump --spad``);
    landing inside ``exec``'d code it was ``Aborted!`` and then the process ended by SIGINT
    (status -2 to a parent, twice in 150 ``lower``).  Now the stop is held until the CLI's
    handlers are in place, and a KeyboardInterrupt Python raised anyway still ends with
    status 130."""
    # (run with -m, as `python -m nrtrewrite`: Python's SIGINT ending after a Ctrl-C in
    # exec'd code is that of -m)
    (tmp_path / "ctrl_c_driver.py").write_text(CTRL_C_LOADING)
    proc = subprocess.run([sys.executable, "-m", "ctrl_c_driver", how, str(FIX / "ar2.neff")],
                          capture_output=True, text=True, cwd=tmp_path, env=env(),
                          timeout=120, preexec_fn=_default_stops)
    assert (proc.returncode, proc.stderr, proc.stdout) == (130, "Aborted!\n", "")


#: the console script running `diff A B` (argv[2], argv[3]), its comparison begun with a stop
#: (argv[1]) landing in a finalizer, where Python prints the handler's exception and drops it
DIFF_DROPPED = _dropped_in("nrtrewrite.cli.diff", "compare", "diff", 2)


@pytest.fixture(scope="module")
def two_outputs(tmp_path_factory):
    """ar2 lowered twice: once as is, once with --algo ring (so the two differ)."""
    where = tmp_path_factory.mktemp("outs")
    for name, extra in (("a", []), ("b", ["--algo", "ring"])):
        subprocess.run([sys.executable, "-m", "nrtrewrite", "lower", "-q", str(FIX / "ar2.neff"),
                        "-o", str(where / name), *extra], check=True, cwd=ROOT, env=env(),
                       timeout=120)
    return where / "a", where / "b"


@pytest.mark.parametrize("same", [True, False], ids=["identical", "different"])
@pytest.mark.parametrize("sig, status, line", [
    ("SIGINT", 130, "Aborted!\n"), ("SIGTERM", 143, "nrtrewrite: terminated by SIGTERM\n")])
def test_a_stop_python_dropped_is_raised_when_the_command_exits_with_its_result(
        two_outputs, sig, status, line, same):
    """``diff`` (as ``simulate``) ends with its result's status by ``sys.exit``, which passed
    by the raising again of a dropped stop at the command's end: a Ctrl-C that landed in a
    finalizer was lost, ``diff --json`` exiting 1 as though none had come (the sweep: once
    in 110 runs)."""
    a, b = two_outputs
    proc = run_code(DIFF_DROPPED, sig, a, a if same else b)
    assert (proc.returncode, proc.stderr) == (status, line)
