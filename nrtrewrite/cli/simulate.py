"""``nrtrewrite simulate MODEL.neff|OUT``: run every rank's emitted bytes and check every
collective bit for bit (docs/SIMULATOR.md).

Exit codes: 0 every trigger matches; 1 a trigger does not (wrong numbers, or a protocol
error: deadlock, race, bad address, bad record ...); 2 the simulation could not be done
(unreadable or tampered output, a model that does not lower, bad usage); 71 the machine
has too little memory for it (nrtrewrite/simulate/memguard.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from nrtrewrite.bundle import (
    SIMULATE_TEMP_PREFIX, clean_stale_simulate_temps, default_output, lock_folder,
    no_trigger_warning, remove_tree, temp_folder_refusal, temp_root, unlock_folder,
    write_output)
from nrtrewrite.cores import usable_cores
from nrtrewrite.cli import (IntRange, JsonErrorCommand, OneValue, PathArg, and_list, echo_whole,
                            encodable, main, options_given, plain, plain_line, print_table,
                            stderr_console, stdout_console, styled, verb, given_warnings)
from nrtrewrite.cli.lower import (
    common_lowering_options, load_and_plan, unverified_hash_warning, warn,
)
from nrtrewrite.errors import (NrtRewriteError, OutputError, capped_why, cut_line,
                               escape_line, path_text)
from nrtrewrite.neff.reader import read_model, read_model_bytes
from nrtrewrite.neff.writer import NAME_MAX
from nrtrewrite.simulate import SimulationResult, simulate_output, verify_checksums
from nrtrewrite.simulate.artifacts import (check_input_model, check_output_files,
                                           input_model_bytes)
from nrtrewrite.simulate.memguard import check_operands_fit, floors_of_plan
from nrtrewrite.simulate.testdata import SEED_MAX

#: Legs from which the progress bar counts them (it shows on every terminal run without --json).
PROGRESS_MIN_LEGS = 20_000

_STYLE = {"match": "green", "mismatch": "red", "error": "red", "not run": "yellow",
          "incomplete": "yellow"}


def _run(out: Path, seed: int, show_progress: bool, model=None,
         memory_check: bool = True, names_within: Path | None = None,
         given: str | None = None) -> SimulationResult:
    if not show_progress:
        return simulate_output(out, seed=seed, model=model, memory_check=memory_check,
                               names_within=names_within, given=given)
    err = stderr_console()
    with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("legs"), TimeElapsedColumn(), console=err, transient=True) as prog:
        task = prog.add_task("legs", total=None)

        def cb(done: int, total: int) -> None:
            if total >= PROGRESS_MIN_LEGS:
                prog.update(task, completed=done, total=total)

        return simulate_output(out, seed=seed, progress=cb, model=model,
                               memory_check=memory_check, names_within=names_within,
                               given=given)


def detail_cell(detail: str, left_out: int = 0) -> Text:
    """The verdict table's ``detail`` cell: ``detail``, whole (a protocol error's reason),
    escaped as the table writes it (its control characters, and what stdout's encoding
    cannot hold: :func:`plain_line`), then capped as a reason is shown (docs/CLI.md
    "simulate"): past :data:`~nrtrewrite.errors.MAX_WHY_CHARS` characters as written, its
    first 700 and last 200 (an escape kept whole), ``... (N characters in all) ...``
    between, ``N`` the reason's length as its error line and ``--json``'s ``detail`` count
    it (its control characters' escapes counted, and the ``left_out`` characters of one
    held cut; not stdout's escapes).  Cut here only: until 2026-12-07 the error cut its
    reason first and the cell looked for that cut's mark in it, so a reason of 1,001 `é`
    counted 1,001 on an ASCII stdout where one of 1,000 counted 4,000 (the length as
    written), and a reason quoting the mark's text could be taken for a cut one."""
    reason = escape_line(detail)  # (an error's reason is so already: the same text)
    return Text(capped_why(plain_line(reason).plain, len(reason) + left_out))


def render(res: SimulationResult, con: Console) -> None:
    title = f"simulate {path_text(res.output)} (seed {res.seed})"  # (whatever the locale)
    table = Table(title=plain(title), title_justify="left")
    for col in ("trigger", "collective", "algorithm", "ranks", "verdict", "detail"):
        table.add_column(col, overflow="fold")
    for tr in res.triggers:
        style = _STYLE.get(tr.status, "")
        table.add_row(str(tr.trigger), tr.label, tr.algorithm or "-",
                      f"{tr.ranks_checked}/{tr.group_size}",
                      f"[{style}]{tr.status}[/]", detail_cell(tr.detail or "", tr.detail_left_out))
    print_table(con, table)
    st = res.stats
    good = sum(t.status == "match" for t in res.triggers)
    con.print(f"{good}/{len(res.triggers)} trigger(s) match; {st.get('legs_run', 0)} legs, "
              f"{st.get('transfers', 0)} net transfers, "
              f"{st.get('bytes_moved', 0) / 2**20:.1f} MiB moved; load "
              f"{st.get('load_seconds', 0):.2f} s, run {st.get('run_seconds', 0):.2f} s")
    if st.get("deadlock_free_every_interleaving"):
        con.print("semaphore wiring: persistent, so no interleaving deadlocks "
                  "(docs/SIMULATOR.md §6)")
    if res.error:
        line = protocol_error_line(res.error_line or res.error)
        con.print(styled("[red]protocol error:[/] ", Text(line[len(PROTOCOL_ERROR):])),
                  soft_wrap=True)


#: The text's protocol error line starts so (docs/CLI.md "simulate").
PROTOCOL_ERROR = "protocol error: "


def protocol_error_line(error: str) -> str:
    """The ``protocol error:`` line as written on stdout, capped as an error line is
    (docs/CLI.md "Errors"): what stdout's encoding cannot hold escaped first, then cut,
    the prefix counted (until 2026-12-06 the line was cut raw, then escaped, its prefix not
    counted: a path of emoji on an ASCII stdout made a line of 9,267 characters)."""
    return cut_line(encodable(escape_line(PROTOCOL_ERROR + error)))


def _lowered_name(model: Path) -> str:
    """The name of the folder ``simulate MODEL.neff`` lowers into, inside its temporary
    folder: ``MODEL.lowered`` (as ``lower`` names it), or ``model.lowered`` where that would
    pass the file system's 255 bytes (a model named 253 - 255 bytes was refused, ``File
    name too long``, until 2026-12-05)."""
    name = default_output(model).name
    return name if len(os.fsencode(name)) <= NAME_MAX else "model.lowered"


class _Unreplaced:
    """The output folder ``out`` is not replaced while it is simulated.  Its files are read
    by name, one after the other (the checksums, the model's bytes, every rank's manifest
    and artifacts), so a ``lower --force`` replacing it meanwhile (a new folder exchanged into
    its place) would have some read from each output: a false protocol error or mismatch
    against an output that is fine.  :meth:`check` tells, by the folder's identity."""

    def __init__(self, out: Path):
        self.out = out
        self.st = os.stat(out)

    def check(self) -> None:
        try:
            now = os.stat(self.out)
            same = (now.st_dev, now.st_ino) == (self.st.st_dev, self.st.st_ino)
        except OSError:
            same = False
        if not same:
            raise OutputError("the output folder was replaced (or removed) while it was being "
                              "simulated, by another lower --force or a user: what was read "
                              "may come from two outputs, so there is no verdict; simulate it "
                              "again", file=str(self.out))


class _SimulateCommand(JsonErrorCommand):
    """``simulate``: with ``--json``, a simulation that cannot be done (exit 2) is the same
    document with ``ok`` null (neither matched nor not), ``error`` the message and no
    triggers, so stdout is one JSON document whatever happens, as ``diff``'s."""

    carries_warnings = True  # (the warnings given, in its error document too)

    json_indent = 1

    @staticmethod
    def error_document(params: dict, why: str) -> dict:
        return {"format": "nrtrewrite-simulate", "format_version": 1,
                "output": path_text(params.get("target")), "seed": params.get("seed"), "ok": None,
                "error": why, "error_trigger": None, "triggers": [], "stats": {}}

    @staticmethod
    def error_fields(err) -> dict:
        """``error_trigger``: the trigger the error names (its location's ``trigger``: a
        refusal at selection or while lowering a MODEL.neff, ``lower``'s line names it), as
        a protocol error's; null for an error that names none."""
        return {"error_trigger": err.where.trigger if err is not None else None}


#: ``simulate``'s ``--help`` text (not a docstring: see :data:`nrtrewrite.cli.MAIN_HELP`)
SIMULATE_HELP = ("Run every rank's emitted bytes and check every collective bit for bit, on "
                 "exact test data (what a match proves and what it cannot: "
                 "docs/SIMULATOR.md §4).\n\n"
                 "MODEL.neff is lowered into a temporary folder first (with --topology / --algo / "
                 "--host-cc); an output folder OUT is checked first: with --model against the "
                 "model it was lowered from, then against its sha256 checksums.")


@main.command("simulate", cls=_SimulateCommand, help=SIMULATE_HELP)
@click.argument("target", metavar="MODEL.neff|OUT", type=PathArg(exists=True))
@click.option("--seed", cls=OneValue, type=IntRange(0, SEED_MAX), default=0, show_default=True,
              help=f"Seed of the test data and of the scheduler's interleaving (0 to {SEED_MAX}).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON on stdout.")
@click.option("--ignore-checksums", is_flag=True,
              help="Simulate an output folder even when its sha256 checksums do not match.")
@click.option("--model", "model_path", cls=OneValue, type=PathArg(exists=True, dir_okay=False),
              default=None, metavar="MODEL.neff",
              help="With OUT: the model OUT was lowered from (its sha256 must be the manifest's "
                   "input); the rewritten NEFF and the triggers are checked against it.")
@click.option("--no-memory-check", "no_memory_check", is_flag=True,
              help="Run even when a trigger's inputs and outputs are more than the memory "
                   "available, and do not stop before the system runs out.")
@common_lowering_options
def simulate_cmd(target, seed, as_json, ignore_checksums, model_path, no_memory_check, topology,
                 algo, host_cc, no_verify_hash):
    """The command (its help: :data:`SIMULATE_HELP`)."""
    path = Path(target)
    err = stderr_console()
    show = not as_json and err.is_terminal
    tmp = lock = None
    model = None
    watch = _Unreplaced(path) if path.is_dir() else None
    try:
        if path.is_dir():
            given = options_given(("--topology", topology is not None),
                                  ("--algo", algo is not None), ("--host-cc", host_cc),
                                  ("--no-verify-hash", no_verify_hash and model_path is None))
            if given:
                also = " (with OUT, only with --model)" if "--no-verify-hash" in given else ""
                raise click.UsageError(f"{and_list(given)} {verb(given, 'applies', 'apply')} "
                                       f"only when a MODEL.neff is given{also}")
            out = path
            if model_path is not None:
                # (its bytes are bound to OUT by the manifest's sha256 either way; held, with
                # the top manifest's ``input``, to its size and sha256 before the checksum
                # pass reads a rank manifest, so that the first fault is named alike with and
                # without --ignore-checksums: until 2026-12-06 a faulty rank-manifest key came
                # before a faulty ``input`` or another model without the option, after it
                # with it; only hashed, in blocks: the model is parsed after the pass)
                model_sha, digest = check_input_model(path, model_path,
                                                      verify_hash=not no_verify_hash)
            if not ignore_checksums:
                verify_checksums(path)
            elif model_path is not None:
                # (the rank folders and files there, as the checksum pass looks at them
                # without the option, before the model's parse: the first fault is named
                # alike either way; until 2026-12-07 the reader's refusal came first here)
                check_output_files(path)
            if model_path is not None:
                # (bytes of the sha256 the block pass hashed, so of the payload digest it
                # held to the header: the parse takes that digest, not hashing them again)
                model = read_model_bytes(input_model_bytes(model_path, model_sha),
                                         path=model_path, verify_hash=not no_verify_hash,
                                         digest=digest)
                if no_verify_hash:
                    warn(err, unverified_hash_warning(model_path))
        else:
            given = options_given(("--model", model_path is not None),
                                  ("--ignore-checksums", ignore_checksums))
            if given:
                raise click.UsageError(f"{and_list(given)} {verb(given, 'applies', 'apply')} "
                                       "only when an output folder OUT is given")
            # (MODEL as given in every line naming it, `./m.neff` as lower names it: until
            # 2026-12-07 pathlib's `m.neff`; docs/CLI.md "Paths in the output")
            plan, warnings = load_and_plan(os.fspath(target), topology=topology, algo=algo,
                                           host_cc=host_cc, no_verify_hash=no_verify_hash)
            if (note := no_trigger_warning(plan.model, "simulate")) is not None:
                warnings.append(note)
            for w in warnings:
                warn(err, w)
            if not no_memory_check:  # before the lowering: its folder can be large as well
                check_operands_fit(floors_of_plan(plan), file=os.fspath(target))
            try:
                root = temp_root()
                clean_stale_simulate_temps(root)  # a killed run's
                tmp = Path(tempfile.mkdtemp(prefix=SIMULATE_TEMP_PREFIX, dir=root))
                # (0700 whatever the umask: under umask 777 mkdtemp's 000 folder could not
                # be listed, so neither removed afterwards nor by a later run)
                os.chmod(tmp, 0o700)
                lock = lock_folder(tmp)  # this run's: no other simulate's cleanup removes it
            except OSError as exc:  # none usable, or one that fails (a race)
                raise temp_folder_refusal(exc) from None
            # (as lower's: each worker a whole process, never more than the cores nor than
            # the ranks; until 2026-12-07 one per core whatever the ranks)
            workers = min(usable_cores(), max(len(plan.world), 2))
            out = write_output(plan, tmp / _lowered_name(path), ranks=None,
                               workers=workers, command="simulate")
            model = read_model(os.fspath(target), verify_hash=not no_verify_hash)
        # (a MODEL.neff's output is named without its temporary folder's random name, as
        # <temporary>/ar2.lowered/rank-0000: the same line and document from two runs)
        # (OUT's error lines name its files from OUT as given, as lower's: `./o/rank-0000`)
        res = _run(out, seed, show, model, memory_check=not no_memory_check, names_within=tmp,
                   given=None if tmp is not None else os.fspath(target))
        if tmp is None:
            # OUT as given, in the title and --json's output, as lower's title and its error
            # document name it (docs/CLI.md "Paths in the output"; until 2026-12-07 as
            # pathlib normalised it: `./o/` as `o`)
            res.output = os.fspath(target)
        if watch is not None:
            watch.check()  # a verdict only on one output
    except NrtRewriteError as exc:
        if watch is not None:
            watch.check()  # an error only of one output, not of two mixed
        if tmp is not None:
            exc.named_within(tmp)
        elif path.is_dir():
            exc.named_as(path, os.fspath(target))
        raise
    finally:
        if tmp is not None:
            remove_tree(tmp)  # (a signal landing meanwhile waits for it: nothing left)
        unlock_folder(lock)
    if as_json:
        doc = res.to_json()
        # the warnings given on stderr, each its line's text after ``nrtrewrite: warning: ``
        # cut as the line is, before the triggers (docs/CLI.md "Warnings under --json")
        doc = {**{k: v for k, v in doc.items() if k not in ("triggers", "stats")},
               "warnings": given_warnings(),
               "triggers": doc["triggers"], "stats": doc["stats"]}
        echo_whole(json.dumps(doc, indent=1))
    else:
        render(res, stdout_console(200, highlight=False, soft_wrap=False))
    sys.exit(0 if res.ok else 1)
