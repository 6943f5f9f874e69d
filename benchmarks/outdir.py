"""The scratch folder of a benchmark script: what ``--out`` names may hold other files; and
the stops (Ctrl-C, SIGTERM, SIGHUP) that must leave nothing of a run behind
(:func:`stop_cleanly`), even one Python drops in a finalizer: it is raised again at the
script's next step (:func:`raise_lost_stop`, called before each measurement or input and as
the run ends)."""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import signal
import sys
from pathlib import Path

#: The signals that stop a run: SIGINT as Ctrl-C (KeyboardInterrupt), the others as an exit.
STOPPING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                 if hasattr(signal, name))


def checked_out(ap: argparse.ArgumentParser, out: Path | None, default: Path) -> Path:
    """``--out`` as an absolute path (the scripts run tools in other folders), refused
    through ``ap`` (one line, status 2) when it is not a folder (a dangling symbolic link
    too) or its parent folder does not exist: a run makes the folder itself and removes it,
    never parents it would leave.
    Without ``--out`` (None): ``default``, a folder under benchmarks/out/ (the benchmarks'
    own, ignored by git), whose parents are made."""
    if out is None:
        default.parent.mkdir(parents=True, exist_ok=True)
        return default
    out = Path(os.path.abspath(out))
    if out.is_symlink() and not out.exists():  # (until 2026-12-07 a traceback once the
        ap.error(f"--out {out}: a symbolic link to nothing")  # model was built, from mkdir)
    if out.exists() and not out.is_dir():
        ap.error(f"--out {out}: not a folder")
    if not out.parent.is_dir():
        ap.error(f"--out {out}: its parent folder {out.parent} does not exist")
    return out


def entries(out: Path) -> set[Path] | None:
    """What ``out`` holds before a run (None: it does not exist yet)."""
    return set(out.iterdir()) if out.is_dir() else None


#: The benchmark scripts that hold ``--out``'s lock (:func:`hold_out`): one run at a time per
#: folder, whichever script it is (both write models named ``wN.neff`` there, and each removes
#: at its end the entries that were not there when it began).
LOCKING = "bench_diff.py or bench_read.py"


def hold_out(tool: str, out: Path) -> tuple[bool, int]:
    """Make ``--out`` (where it is not there) and hold its exclusive ``flock`` for the whole
    run: ``(whether this run made it, the descriptor holding the lock)``; closing the
    descriptor, or the process ending, releases it.  Refused, one line ``TOOL: error: ...``
    and status 2, before anything is written: a folder another run of :data:`LOCKING`
    holds (until 2026-12-07 runs sharing one ``--out`` moved their results into each
    other's, and bench_read.py took no lock: it removed, as its own, what a bench_diff.py
    run moved in meanwhile), and a folder on a file system that refuses ``flock`` (NFS
    without its lock manager, some FUSE or SMB mounts), which is removed again where this
    run made it: runs sharing it could not be kept apart, and a lock file naming a PID
    cannot be judged stale there (another host's PID means nothing here; until 2026-12-07
    bench_diff.py went on unlocked).  A shared lock would not do for bench_read.py: it
    writes its inputs into ``--out`` and removes them, as bench_diff.py does."""
    try:
        out.mkdir()
        made = True
    except FileExistsError:
        made = False
    except OSError as err:
        _refuse(tool, f"--out {out}: cannot make it: {err.strerror or err}")
    try:
        fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        _refuse(tool, f"--out {out}: cannot open it: {err.strerror or err}")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        _refuse(tool, f"--out {out}: in use by another {LOCKING} run (it holds the folder's "
                "lock); give each run its own --out")
    except OSError as err:
        os.close(fd)
        if made:
            try:
                out.rmdir()
            except OSError:
                pass
        _refuse(tool, f"--out {out}: its file system takes no locks (flock: "
                f"{err.strerror or err}), so another run given the same --out could not be "
                "kept out; give an --out on a file system that takes them (a local one)")
    return made, fd


def _refuse(tool: str, line: str):
    print(f"{tool}: error: {line}", file=sys.stderr)
    sys.exit(2)


def remove_new(out: Path, before: set[Path] | None) -> None:
    """Remove what this run wrote into ``out``: the folder itself when it made it, else only
    the entries that were not there before (:func:`entries`)."""
    if before is None:
        shutil.rmtree(out, ignore_errors=True)
        return
    if not out.is_dir():
        return
    for p in set(out.iterdir()) - before:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def write_new(path: Path, data: bytes, tmp: Path | None = None) -> None:
    """``data`` into ``path`` through ``tmp`` (``PATH.tmp`` where None), renamed when whole:
    whatever stops the write (an error, a stop) removes ``tmp``, which would otherwise stay
    behind as an entry the next runs count as there before (bench_read.py's inputs take
    their own name, ``bench_read.write_whole``)."""
    if tmp is None:
        tmp = path.with_suffix(".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_together(files: list[tuple[Path, bytes]]) -> None:
    """Write each ``(path, data)`` to a temporary sibling (``.NAME.PID-XXXXXXXX.tmp``, held
    locked until the renames are done: ``nrtrewrite.neff.writer.temp_sibling``), every one
    whole before any is renamed over its path, in the order given (the last, the one that
    marks the set as complete): an error or stop while writing leaves every path as it was,
    and whatever stops it removes the temporary files that are left; those a killed run left
    are removed first (``temp_sibling`` runs ``nrtrewrite.neff.writer.remove_stale_temps``).
    A file replaced keeps its permission bits (``nrtrewrite.neff.writer.mode_for``) (a ``last-run.json`` kept 0600 stays so); a new one, or one replacing a symbolic
    link, gets the umask's.  A link at a path is replaced as a link, its target never
    written, as ``assemble -o`` replaces one (until 2026-12-07 every file got the umask's
    mode, and a killed run's temporary files stayed for good)."""
    from nrtrewrite.neff.writer import mode_for, temp_sibling  # (run.py's alone: bench_read's
    # process imports no nrtrewrite)

    temps: list[str] = []
    held: list[int] = []
    try:
        for path, data in files:
            fd, tmp = temp_sibling(path)
            temps.append(tmp)
            held.append(fd)
            with open(os.dup(fd), "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode_for(str(path)))
        for (path, _), tmp in zip(files, list(temps)):
            os.replace(tmp, path)
            temps.remove(tmp)
    finally:
        for tmp in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        for fd in held:
            os.close(fd)


class _Stops:
    """This process's stops (:func:`stop_cleanly`): ``raised`` the signal whose exception
    propagates (one: a later stop is ignored while its cleanup runs), ``exc`` that
    exception, ``lost`` the signal of a stop Python dropped (:func:`raise_lost_stop`)."""

    def __init__(self) -> None:
        self.raised: list[int] = []
        self.exc: BaseException | None = None
        self.lost: int | None = None


#: The stops since :func:`stop_cleanly` (None before it, and in a process forked since).
_STOPS: _Stops | None = None
_STOPS_PID = 0


def _exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else SystemExit(128 + signum)


def _runs_in(frame, code) -> bool:
    """Is ``frame`` a frame of ``code``, or called from one?  (As the CLI's
    ``nrtrewrite.cli._runs_in``, not imported: bench_read.py's process imports no nrtrewrite,
    and the CLI's stops, ``terminate_cleanly``, are its command's alone.)"""
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _raise(stops: _Stops, signum: int) -> None:
    """Raise the stop of ``signum``, noted as the one whose cleanup runs."""
    stops.lost = None
    stops.raised.append(signum)
    stops.exc = _exception(signum)
    raise stops.exc


def raise_lost_stop() -> None:
    """Raise the stop Python dropped (see :func:`stop_cleanly`), if one was: at a step of a
    benchmark's main loop (before each measurement, each input) and as its run ends, where
    every ``finally`` runs and the process exits with the stop's status.  Nothing before
    :func:`stop_cleanly`, nor in a process forked since."""
    stops = _STOPS
    if stops is None or _STOPS_PID != os.getpid() or stops.lost is None or stops.raised:
        return
    _raise(stops, stops.lost)


def stop_cleanly() -> None:
    """From now on the first stop raises where this process is, so that every ``finally``
    runs (scratch folders removed): Ctrl-C as KeyboardInterrupt (as by default), SIGTERM and
    SIGHUP as ``SystemExit(128 + signal)``, the status of a process they killed.  Later stops
    are ignored while that cleanup runs (Ctrl-C reaches the whole process group, and a
    driver passes SIGTERM on to the process it waits for).  A process forked from this one
    (the lowering's compose-ahead and pool processes) gets the signals' default behaviour
    back.  Call it from the main thread; a signal that is ignored (``nohup``) stays so.

    A stop whose handler runs inside a finalizer (a ``__del__``, as multiprocessing's
    ``_ConnectionBase.__del__``, a weakref or GC callback) raises where Python drops the
    exception: it is not printed ("Exception ignored in ...", its traceback) but kept as lost,
    and :func:`raise_lost_stop` raises it at the benchmark's next step; a stop that comes
    meanwhile raises it at once (until 2026-12-06 it was printed and lost: the benchmark
    ran on to its end and exited 0, and every later stop was ignored, so that only SIGKILL
    ended it and its scratch folders stayed).  So is one that comes while the unraisable
    hook prints another finalizer's error, where its exception would be printed and dropped
    too."""
    global _STOPS, _STOPS_PID
    me = os.getpid()
    stops = _Stops()
    _STOPS, _STOPS_PID = stops, me
    before = sys.unraisablehook
    while getattr(before, "_outdir_before", None) is not None:  # (stop_cleanly again)
        before = before._outdir_before

    def unraisable(info):
        # our stop's exception, dropped by Python: lost, not printed (raise_lost_stop)
        if os.getpid() == me and stops.exc is not None and info.exc_value is stops.exc:
            stops.lost = stops.lost or stops.raised[0]
            stops.raised.clear()
            stops.exc = None
            return
        before(info)

    unraisable._outdir_before = before

    def handler(signum, frame):
        if os.getpid() != me:  # a forked child: as without this handler
            signal.signal(signum, signal.SIG_DFL if signum != signal.SIGINT
                          else signal.default_int_handler)
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            os.kill(os.getpid(), signum)
            return
        if stops.raised:  # the first stop's cleanup runs
            return
        if _runs_in(frame, unraisable.__code__):
            # inside the hook (printing another finalizer's error): raised, it would be
            # printed and dropped; lost instead
            stops.lost = stops.lost or signum
            return
        _raise(stops, stops.lost or signum)  # (a stop Python dropped is raised first)

    for sig in STOPPING:
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, handler)
    sys.unraisablehook = unraisable
