"""The scratch folder of a benchmark script: what ``--out`` names may hold other files; and
the stops (Ctrl-C, SIGTERM, SIGHUP) that must leave nothing of a run behind."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
from pathlib import Path

#: The signals that stop a run: SIGINT as Ctrl-C (KeyboardInterrupt), the others as an exit.
STOPPING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                 if hasattr(signal, name))


def checked_out(ap: argparse.ArgumentParser, out: Path | None, default: Path) -> Path:
    """``--out`` as an absolute path (the scripts run tools in other folders), refused
    through ``ap`` (one line, status 2) when it is not a folder or its parent folder does not
    exist: a run makes the folder itself and removes it, never parents it would leave.
    Without ``--out`` (None): ``default``, a folder under benchmarks/out/ (the benchmarks'
    own, ignored by git), whose parents are made."""
    if out is None:
        default.parent.mkdir(parents=True, exist_ok=True)
        return default
    out = Path(os.path.abspath(out))
    if out.exists() and not out.is_dir():
        ap.error(f"--out {out}: not a folder")
    if not out.parent.is_dir():
        ap.error(f"--out {out}: its parent folder {out.parent} does not exist")
    return out


def entries(out: Path) -> set[Path] | None:
    """What ``out`` holds before a run (None: it does not exist yet)."""
    return set(out.iterdir()) if out.is_dir() else None


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


def write_new(path: Path, data: bytes) -> None:
    """``data`` into ``path`` through ``PATH.tmp``, renamed when whole: whatever stops the
    write (an error, a stop) removes the ``.tmp`` file, which would otherwise stay behind
    as an entry the next runs count as there before."""
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def stop_cleanly() -> None:
    """From now on the first stop raises where this process is, so that every ``finally``
    runs (scratch folders removed): Ctrl-C as KeyboardInterrupt (as by default), SIGTERM and
    SIGHUP as ``SystemExit(128 + signal)``, the status of a process they killed.  Later stops
    are ignored while that cleanup runs (Ctrl-C reaches the whole process group, and a
    driver passes SIGTERM on to the process it waits for).  A process forked from this one
    (the lowering's compose-ahead and pool processes) gets the signals' default behaviour
    back.  Call it from the main thread; a signal that is ignored (``nohup``) stays so."""
    me = os.getpid()
    stopped: list[int] = []

    def handler(signum, frame):
        if os.getpid() != me:  # a forked child: as without this handler
            signal.signal(signum, signal.SIG_DFL if signum != signal.SIGINT
                          else signal.default_int_handler)
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            os.kill(os.getpid(), signum)
            return
        if stopped:
            return
        stopped.append(signum)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    for sig in STOPPING:
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, handler)
