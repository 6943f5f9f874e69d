"""The command-line layer: the only place (with the per-command modules here) that prints.

Each command lives in its own module and registers itself on :data:`main`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys

import click
from rich.console import Console

from nrtrewrite import __version__
from nrtrewrite.cli.commands import COMMANDS
from nrtrewrite.errors import NrtRewriteError


def stdout_console(width: int = 132, **options) -> Console:
    """A rich console on stdout; piped or redirected, where rich would assume 80 columns and
    cut names and reasons, at least ``width`` columns wide."""
    con = Console(**options)
    if not con.is_terminal:
        con = Console(width=max(con.width, width), **options)
    return con


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: raised where the process is, so that every ``finally`` and
    ``except BaseException`` runs (a half-written output's temporary folder is removed, as
    for Ctrl-C), then the process exits with 128 + the signal number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


#: The signals turned into :class:`Terminated` (SIGINT is Python's KeyboardInterrupt).
TERMINATING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                            if hasattr(signal, name))


#: While :func:`_terminate_cleanly` is active: the signals' handlers it replaced.
_REPLACED: dict[int, object] = {}


def _restore_in_child() -> None:
    """In a forked child (a pool worker, a compose-ahead process): the handlers as they were
    before :func:`_terminate_cleanly`, so the child dies of SIGTERM at once, as before (a
    Python-level handler runs only between bytecodes of the main thread: a worker blocked on
    a queue lock while its parent terminated the pool could wait there forever)."""
    for sig, h in _REPLACED.items():
        signal.signal(sig, h)
    _REPLACED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_restore_in_child)


@contextlib.contextmanager
def _terminate_cleanly():
    """While the command runs, SIGTERM and SIGHUP raise :class:`Terminated` in this process
    (unless ignored: under ``nohup`` SIGHUP stays ignored).  A forked child gets the previous handlers back as it starts (:func:`_restore_in_child`)."""
    me = os.getpid()

    def handler(signum, frame):
        if os.getpid() != me:  # forked, before _restore_in_child ran: die as without us
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated(signum)

    try:
        # a signal ignored (nohup, a supervisor) stays ignored
        old = {sig: signal.signal(sig, handler) for sig in TERMINATING_SIGNALS
               if signal.getsignal(sig) != signal.SIG_IGN}
    except ValueError:  # not the main thread (an embedding application): leave them be
        yield
        return
    _REPLACED.update(old)
    try:
        yield
    finally:
        _REPLACED.clear()
        for sig, h in old.items():
            signal.signal(sig, h)


class _Group(click.Group):
    """Turns an :class:`NrtRewriteError` into one line on stderr and a non-zero exit, and
    click's usage errors (unknown option, missing argument, a folder given as MODEL) into
    one line as well, instead of click's usage block."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            with _terminate_cleanly():
                rv = super().main(args, prog_name, complete_var, False, **extra)
        except Terminated as err:
            click.echo(f"nrtrewrite: terminated by {signal.Signals(err.signum).name}",
                       err=True)
            sys.exit(128 + err.signum)
        except click.exceptions.NoArgsIsHelpError as err:  # bare `nrtrewrite`: the help
            err.show()
            sys.exit(err.exit_code)
        except click.UsageError as err:
            where = err.ctx.command_path if err.ctx is not None else (prog_name or "nrtrewrite")
            click.echo(f"{where}: error: {err.format_message()} (see '{where} --help')",
                       err=True)
            sys.exit(err.exit_code)
        except click.ClickException as err:
            err.show()
            sys.exit(err.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str):
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(COMMANDS[cmd_name])  # registers the command on main
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except NrtRewriteError as err:
            if ctx.obj and ctx.obj.get("traceback"):
                raise
            click.echo(f"nrtrewrite: error: {err.line()}", err=True)
            sys.exit(err.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nrtrewrite")
@click.option("--traceback", is_flag=True, help="Show the Python traceback on errors.")
@click.pass_context
def main(ctx: click.Context, traceback: bool) -> None:
    """Offline Neuron load-time collective rewrite: inspect, explain, schedule, lower, dump,
    diff, simulate, assemble (every command, listed below)."""
    ctx.ensure_object(dict)
    ctx.obj["traceback"] = traceback


