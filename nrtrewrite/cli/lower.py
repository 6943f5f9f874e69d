"""``nrtrewrite lower``: the whole load-time rewrite of a model, written to an output folder."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from nrtrewrite.artifacts import is_our_output
from nrtrewrite.bundle import default_output, no_trigger_warning, write_output
from nrtrewrite.codes import EncAlgType
from nrtrewrite.cores import usable_cores
from nrtrewrite.cli import (ALGO_TWICE, Int, IntRange, OneValue, PathArg, main, note_placed,
                            plain, print_table, raise_lost_stop, stderr_console, stdout_console,
                            warn, no_dash, no_dash_out)
from nrtrewrite.errors import (NrtRewriteError, OutputError, counted, cut_middle,
                               escape_path, path_text)
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.limits import check_plan
from nrtrewrite.neff.container import read_file_bytes
from nrtrewrite.neff.reader import read_model_bytes
from nrtrewrite.neff.writer import NAME_MAX

#: Rank count above which the progress bar is shown (unless --quiet).
PROGRESS_MIN_RANKS = 8


def common_lowering_options(fn):
    """--topology / --algo / --host-cc / --no-verify-hash, shared by lower, schedule, simulate."""
    fn = click.option("--no-verify-hash", is_flag=True,
                      help="Do not check the NEFF header hash (a warning is printed).")(fn)
    fn = click.option("--host-cc", is_flag=True,
                      help="Use the host-CC final reduce step (recv_reduce_copy_send).")(fn)
    fn = click.option("--algo", cls=OneValue, twice=ALGO_TWICE, default=None, metavar="A",
                      help="Algorithm override, NCCL-like: ring, ^mesh, "
                           "allreduce:ring;allgather:ring (also NRTREWRITE_ALGO).")(fn)
    fn = click.option("--topology", cls=OneValue, default=None, metavar="T", callback=no_dash,
                      help="trn1, trn2, trn1:nodes=N, trn2:nodes=N or a topology JSON file "
                           "(default: trn2 sized to the model).")(fn)
    return fn


def unverified_hash_warning(model_path: str) -> str:
    """The warning of every command given ``--no-verify-hash`` with a model."""
    return f"{escape_path(model_path)}: header hash not verified (--no-verify-hash)"


def load_and_plan(model_path: str, *, topology: str | None, algo: str | None, host_cc: bool,
                  no_verify_hash: bool, only=None):
    """Read the model and make the rank-independent plan (of the triggers ``only`` names, if
    given: lower.plan_lowering); returns (plan, warnings)."""
    data = read_file_bytes(model_path)  # read once: the same bytes are hashed and parsed
    model = read_model_bytes(data, path=model_path, verify_hash=not no_verify_hash)
    warnings = []
    if no_verify_hash:
        warnings.append(unverified_hash_warning(model_path))
    try:
        plan = plan_lowering(model, LowerOptions(topology=topology, algo=algo, host_cc=host_cc),
                             input_sha256=hashlib.sha256(data).hexdigest(),
                             input_bytes=len(data), only=only)
        del data
        check_plan(plan)  # every rank-independent hard limit, before any rank is lowered
    except NrtRewriteError as err:
        raise err.at(file=model_path)  # name the model when the error names nothing else
    warnings += plan.notes
    return plan, warnings


def _in_an_output(model: Path) -> bool:
    """Whether ``model`` lies in an nrtrewrite output folder (a manifest of ours beside it):
    its default output ``MODEL.lowered`` would land inside that output, which would then no
    longer read as one (``--force`` refuses it)."""
    folder = model.parent
    return (folder / "manifest.json").is_file() and is_our_output(folder)


#: ``lower``'s ``--help`` text (not a docstring: see :data:`nrtrewrite.cli.MAIN_HELP`)
LOWER_HELP = ("Lower every collective trigger of MODEL and write the rewritten NEFF and "
              "artifacts.")


@main.command("lower", help=LOWER_HELP)
@click.argument("model", type=PathArg(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", cls=OneValue, default=None, metavar="OUT",
              callback=no_dash_out,
              help="Output folder (default: <model>.lowered next to the model).")
@click.option("--rank", "ranks", type=Int(), multiple=True,
              help="Lower only this rank (repeatable). Default: every rank of the world.")
@common_lowering_options
@click.option("--force", is_flag=True,
              help="Replace an existing output folder (atomically): only an nrtrewrite output "
                   "holding nothing else, or an empty folder.")
@click.option("-j", "--jobs", cls=OneValue, type=IntRange(min=1), default=None,
              help="Worker processes (default: the cores this process may use, at most one per "
                   "rank): a pool for several ranks; "
                   "for one rank, a second process composes ahead.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
def lower_cmd(model, out, ranks, topology, algo, host_cc, no_verify_hash, force, jobs, quiet):
    """The command (its help: :data:`LOWER_HELP`)."""
    err = stderr_console()
    t0 = time.perf_counter()
    # what the paths alone refuse, before the model is read and planned
    if out == "":
        raise click.BadParameter("an empty path; leave -o out for the default "
                                 "(<model>.lowered)", param_hint="'-o' / '--output'")
    out_path = Path(out) if out is not None else default_output(model)
    if out is not None and len(os.fsencode(out_path.name)) > NAME_MAX:
        # (before the model is read: until 2026-12-07 the whole model was planned, then the
        # OS's `File name too long` named the long path twice)
        shown = cut_middle(escape_path(out_path.name), 80, 40, 20, "{head}...{tail}")
        raise click.BadParameter(f"its last name {shown} is {len(os.fsencode(out_path.name))} "
                                 f"bytes, more than the {NAME_MAX} bytes a file name may have "
                                 "(NAME_MAX)", param_hint="'-o' / '--output'")
    if out is None and len(os.fsencode(out_path.name)) > NAME_MAX:
        # (as simulate's temporary output, which is then model.lowered: here a name beside
        # the model that another model's default may be; the OS's line named the long path
        # twice, without a word of -o, until 2026-12-07)
        # (its name shown cut, its first 40 and last 20 characters: the model's path names
        # the rest; until 2026-12-07 the literal text <stem>.lowered)
        shown = cut_middle(escape_path(out_path.name), 80, 40, 20, "{head}...{tail}")
        raise OutputError(f"the default output {shown} would be a name of "
                          f"{len(os.fsencode(out_path.name))} bytes, more than the {NAME_MAX} "
                          "bytes a file name may have (NAME_MAX); give -o", file=str(model))
    if out is None and _in_an_output(Path(model)):
        raise OutputError("the model lies in the nrtrewrite output "
                          f"{escape_path(Path(model).parent)} (its rewritten NEFF?): the "
                          f"default output {escape_path(out_path)} would be written into that "
                          "output; give -o", file=str(model))
    plan, warnings = load_and_plan(model, topology=topology, algo=algo, host_cc=host_cc,
                                   no_verify_hash=no_verify_hash)
    if (note := no_trigger_warning(plan.model)) is not None:
        warnings.append(note)  # shown with --quiet too, as every warning
    for w in warnings:
        warn(err, w)
    rank_list = list(dict.fromkeys(ranks)) if ranks else None  # a repeated rank once
    n = len(rank_list) if rank_list else len(plan.world)
    # each worker is a whole process: never more than the cores (at least 2: -j 2 on one
    # core still means a second process), nor than the ranks (one rank: 2, compose ahead)
    cores = usable_cores()
    workers = min(jobs or cores, max(cores, 2), max(n, 2))
    given = out_path if out is None else out  # (OUT as given: the refusals name it so)
    if quiet or n < PROGRESS_MIN_RANKS or not err.is_terminal:  # a bar only on a terminal
        # (redirected, rich's transient bar left a lone line break on stderr)
        write_output(plan, given, ranks=rank_list, force=force, workers=workers,
                     warn=lambda text: warn(err, text), on_placed=note_placed,
                     before_placing=raise_lost_stop)
    else:
        with Progress(TextColumn("lowering"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err, transient=True) as prog:
            task = prog.add_task("ranks", total=n)
            write_output(plan, given, ranks=rank_list, force=force, workers=workers,
                         warn=lambda text: warn(err, text), on_placed=note_placed,
                         before_placing=raise_lost_stop,
                         progress=lambda done, total: prog.update(task, completed=done))
    if quiet:
        return
    console = stdout_console()
    # MODEL and OUT as given, whatever the locale (docs/CLI.md "Paths in the output"; until
    # 2026-12-07 MODEL's file name alone, and OUT as pathlib normalised it: `./o/` as `o`)
    title = f"{path_text(model)} -> {path_text(given)}"
    print_table(console, summary_table(plan, plain(title)))
    console.print(f"{n} rank folder(s) written in {time.perf_counter() - t0:.2f} s")


#: Triggers up to which the summary has one row per trigger; a bigger model gets one row per
#: (op, dtype, algorithm): a table of a thousand rows helps nobody and took rich longer to
#: render (0.5 s) than lowering a rank of it (docs/CLI.md "lower").
SUMMARY_TRIGGER_ROWS = 64


def summary_table(plan, title: str | Text) -> Table:
    """What ``lower`` prints on success: the triggers and their algorithms (one row each, or
    grouped when there are more than :data:`SUMMARY_TRIGGER_ROWS`)."""
    rows = []
    for tp in plan.triggers:
        t = tp.trigger
        man = tp.prepared.brief  # algorithm-agnostic: what manifest.json shows
        rows.append((t, tp.alg.name, _channels(tp), man.get("chunk", {}).get("pgta", "-")))
    if len(rows) <= SUMMARY_TRIGGER_ROWS:
        table = Table(title=title, show_lines=False)
        for col in ("trigger", "op", "dtype", "elements", "group", "algorithm", "channels",
                    "pgta"):
            table.add_column(col, no_wrap=True)
        # a group id counts within its subgraph (def.json): named with it when there are more
        several = len(plan.model.subgraphs) > 1
        for t, alg, channels, pgta in rows:
            gid = f"{t.subgraph}/{t.replica_group_id}" if several else str(t.replica_group_id)
            table.add_row(str(t.ordinal), t.op.name, t.dtype.name, str(t.num_elements),
                          plain(f"{gid} ({counted(t.group_size, 'rank')})"), alg,
                          str(channels), str(pgta))
        return table
    groups: dict[tuple[str, str, str], list] = {}
    for t, alg, channels, _pgta in rows:
        groups.setdefault((t.op.name, t.dtype.name, alg), []).append((t, channels))
    table = Table(title=title, show_lines=False,
                  caption=f"{len(rows)} triggers in {counted(len(groups), 'row')}; per trigger: "
                          "nrtrewrite explain MODEL")
    for col in ("op", "dtype", "algorithm", "triggers", "elements", "group ranks", "channels"):
        table.add_column(col, no_wrap=True)
    for (op, dtype, alg), members in sorted(groups.items()):
        elems = [t.num_elements for t, _c in members]
        table.add_row(op, dtype, alg, str(len(members)), _span(elems),
                      _span([t.group_size for t, _c in members]),
                      _span([c for _t, c in members]))
    return table


def _channels(tp) -> int:
    """Channel ids a trigger uses: its ring channels, or a HIER plan's over its legs (the
    manifest's ``channel_base + channel_ids`` of its last leg)."""
    if tp.alg == EncAlgType.HIER:  # (prepared.data: the HierPlan)
        return max(lp.channel_base + lp.n_channels for lp in tp.prepared.data.legs)
    return len(tp.prepared.brief.get("channels", []))


def _span(values: list[int]) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}..{hi}"
