"""The ``nrtrewrite`` console script (and ``python -m nrtrewrite``): before anything heavy
is imported.

* Ctrl-C while the command's modules load (click, rich, numpy: a few tenths of a second,
  before the CLI's own handling is in place) is ``Aborted!``, status 130 (128 + SIGINT), as
  at any later moment, not a Python traceback;
* numpy's BLAS starts no threads of its own (``OPENBLAS_NUM_THREADS=1`` unless set):
  nothing here multiplies matrices, and under a limit on processes (``ulimit -u``) those
  threads failed to start and OpenBLAS killed the process with SIGINT, whatever the command.
"""

from __future__ import annotations

import atexit
import errno
import os
import signal
import sys

#: The status the command exits with (its SystemExit's code), once it has finished.
_STATUS: list = []


def exit_status(code) -> int:
    """The status a process ends with for ``SystemExit(code)``, as Python's own exit gives
    it: an int as it is, None 0, anything else (a message) 1."""
    return code if isinstance(code, int) else 0 if code is None else 1


def _end_now() -> None:
    """The last exit handler (registered first): the command has finished, its threads are
    joined and the other exit handlers have run; the process ends here with the command's
    status, its standard streams flushed, instead of tearing its modules down (some 30 -
    100 ms).  While Python tears down it restores the default signal handlers, so a SIGTERM
    in that time ended the process silently, by the signal; up to here ``cli._late_stop``
    reports a stop as during the command (docs/CLI.md "Errors"), one during the flush of
    the standard output below once it is done (``cli.report_deferred_stop``), and a
    second stop ends the process at once, the flush cut."""
    if not _STATUS:  # (not through main's SystemExit: Python's own exit)
        return
    status = exit_status(_STATUS[0])
    try:
        sys.stdout.flush()
    except OSError as exc:
        # (what the command printed last, still in stdout's buffer (a block-buffered
        # stdout, PYTHONUNBUFFERED unset: a document under 8 KiB), is lost: a full disk is
        # the CLI's line and status 2 (docs/CLI.md "Errors"), as when the command's own
        # write fails; until 2026-12-05 it was ignored and the command exited 0. A closed
        # pipe is quiet, with a closed pipe's status, 141, as when the command's own write
        # meets it (until 2026-12-05: 0)
        if status == 0 and exc.errno == errno.EPIPE:
            status = 128 + 13  # (SIGPIPE: cli.STATUS_CLOSED_PIPE)
        elif status == 0:
            status = 2
            try:
                sys.stderr.write("nrtrewrite: error: cannot write the standard output: "
                                 f"{exc.strerror or exc}\n")
            except (OSError, ValueError, AttributeError):
                pass
    except (ValueError, AttributeError):
        pass
    cli = sys.modules.get("nrtrewrite.cli")
    if cli is not None:
        # a stop that came during the flush above waited for it (a slow reader gets the
        # whole output): reported now, its line and status (a second one ended the process
        # there, at once: a reader that never reads)
        cli.report_deferred_stop()
    try:
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    os._exit(status)


def _hold_stops() -> frozenset:
    """Block SIGTERM, SIGHUP and Ctrl-C (those not ignored) while the modules load, and
    return the ones blocked here: until ``cli.terminate_cleanly`` has its handlers in place
    and releases them (``cli.HELD_WHILE_LOADING``), a stop waits, and is then that of the
    command, its one line and status.  Until 2026-12-06, in those first 0.2 - 0.5 s,
    SIGTERM's and SIGHUP's default action ended the process silently, by the signal, and
    a Ctrl-C could land where Python drops it (the import system's weak-reference callback:
    ``Exception ignored in: <function _get_module_lock.<locals>.cb>``, the command then ran
    to its end, status 0) or inside code a module runs with ``exec`` (a dataclass's
    methods), after which Python ended the process by SIGINT once it had printed
    ``Aborted!``."""
    if not hasattr(signal, "pthread_sigmask"):
        return frozenset()
    stops = frozenset(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT")
                      if hasattr(signal, name))
    stops = frozenset(s for s in stops if signal.getsignal(s) is not signal.SIG_IGN)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    return stops - frozenset(before)


def _aborted() -> None:  # (never returns; typing is not imported here: it loads in ms)
    """Ctrl-C before the CLI's own handling is in place (Python raised it: not held here):
    ``Aborted!``, status 130, the process ended by :func:`_end_now` (a KeyboardInterrupt
    raised inside ``exec``'d code marks the process, and Python, exiting its own way,
    would then end it by SIGINT instead)."""
    try:
        sys.stderr.write("Aborted!\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    _STATUS.append(130)  # 128 + SIGINT (cli.STATUS_INTERRUPTED: not imported, it was loading)
    sys.exit(130)


def main() -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    atexit.register(_end_now)  # first registered, last run
    held = _hold_stops()
    try:
        import nrtrewrite.cli
        from nrtrewrite.cli import main as cli_main
    except KeyboardInterrupt:
        _aborted()
    nrtrewrite.cli.LATE_STOPS_END_THE_PROCESS = True  # this process ends with the command
    nrtrewrite.cli.HELD_WHILE_LOADING.update(held)
    try:
        cli_main(prog_name="nrtrewrite")
    except SystemExit as exc:
        _STATUS.append(exc.code)
        raise
    except KeyboardInterrupt:  # (Ctrl-C as the CLI started, before its handler was in place)
        _aborted()


if __name__ == "__main__":
    main()
