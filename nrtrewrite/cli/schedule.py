"""``nrtrewrite schedule``: the composed legs of one rank (same choices as ``lower``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from nrtrewrite.bundle import no_trigger_warning
from nrtrewrite.cli import (Int, IntRange, JsonErrorCommand, OneValue, PathArg, WholeWriter,
                            main, print_table, stderr_console, stdout_console,
                            stopped_why, stops_deferred)
from nrtrewrite.cli.lower import common_lowering_options, load_and_plan, warn
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.leaves import CHUNK_LEAVES, leaf_name
from nrtrewrite.compose.ring import PHASE_NAMES
from nrtrewrite.emit.address import SEM_ENTRY_POST
from nrtrewrite.errors import (OutputError, counted,
                               escape_path)
from nrtrewrite.lower import LoweringPlan, rank_bd_refusal, rank_entries, world_refusal


def _steps(spec, rank: int, rows: np.ndarray) -> list[dict]:
    """One channel's rows as docs/CLI.md "schedule" steps (columns read once, not per row:
    a 128-rank HIER rank has 590,000 of them)."""
    events = spec.info.get("phase_names")
    names = events or PHASE_NAMES
    leaf_names: dict[int, str] = {}
    phase_names: dict[int, str] = {}
    out = []
    # a leg without a chunk position: k is the rank itself
    ks = np.where(np.isin(rows["leaf"], list(CHUNK_LEAVES)), rows["k"], rank)
    cols = [rows[f].tolist() for f in ("group", "step", "phase", "leaf", "half")]
    cols += [ks.tolist()] + [rows[f].tolist() for f in ("start", "stop")]
    for g, st, ph, lf, h, k, a, b in zip(*cols):
        if ph not in phase_names:
            phase_names[ph] = names.get(ph, str(ph))
        if lf not in leaf_names:
            leaf_names[lf] = leaf_name(lf)
        out.append({"group": g, "step": st, "phase": phase_names[ph], "leaf": leaf_names[lf],
                    "half": h, "k": k, "elements": [a, b]})
    if events is None:
        return out
    # mesh / RDH entries name their rows by event and show who they send to and wait on
    peers = spec.peers
    extra = zip(*(rows[f].tolist() for f in ("n_dst", "dst_peer", "n_inc", "inc_peer", "n_wait",
                                             "wait_sem", "wait_val", "n_src", "net_src_peer")))
    for st, (nd, dp, ni, ip, nw, ws, wv, ns, net) in zip(out, extra):
        st["to"] = sorted(({peers[p] for p in dp[:nd]} | {peers[p] for p in ip[:ni]}) - {rank})
        st["waits"] = [[s, v] for s, v in zip(ws[:nw], wv[:nw])]
        st["sources"] = ns
        if net >= 0:
            st["from_network"] = peers[net]
    return out


def schedule_ops(plan: LoweringPlan, rank: int, triggers: set[int] | None = None
                 ) -> Iterator[dict]:
    """The ``ops`` of docs/CLI.md "schedule", one SPAD entry of ``rank`` at a time (only the
    triggers in ``triggers``, if given).  Every entry is composed before the first op is
    given (an error comes before any output); the ops, much bigger than the entries' leg
    IR, are built one at a time."""
    return (_op(tp, spec, rank) for tp, spec in _entries(plan, rank, triggers))


def _entries(plan: LoweringPlan, rank: int, triggers: set[int] | None) -> list:
    """``rank``'s SPAD entries (only the triggers in ``triggers``, if given), composed: only
    those triggers are composed (until 2026-12-06 every trigger of the rank was, then all but
    ``triggers`` dropped: 1.8 GB for one trigger of 16,000; docs/CLI.md "schedule" has
    today's figures).  Legs ``lower --rank`` refuses for TPINC_MAX_BDS, which only the
    emitter counts, are refused here with its line (:func:`rank_bd_refusal`)."""
    if rank not in plan.world:
        raise world_refusal(plan.world, rank, plan.model.path)
    entries = rank_entries(plan, rank, triggers)
    if (refusal := rank_bd_refusal(plan, entries, rank)) is not None:
        raise refusal
    return entries


def _op(tp, spec, rank: int) -> dict:
    ir = IR.emitted(spec.ir)  # the legs lower emits: not the rows it drops
    chans = []
    ch_col = ir["channel"]
    for ch in dict.fromkeys(ch_col.tolist()):
        rows = np.compress(ch_col == ch, ir)
        info = spec.info.get("channels", {}).get(ch, {})
        chans.append({"channel": int(ch), **info, "steps": _steps(spec, rank, rows)})
    leg_op = next((leg.op for leg in tp.selection.legs if leg.name == spec.leg),
                  tp.trigger.op)  # (the manifest's trigger legs[].op)
    return {"trigger": tp.trigger.ordinal, "op": tp.trigger.op.name, "leg": spec.leg,
            "leg_op": leg_op.name, "algorithm": spec.alg.name,
            "entry_post_sem": tp.entry_post_sem,
            **{k: v for k, v in spec.info.items() if k not in ("channels", "phase_names")},
            "channels": chans}


def schedule_json(plan: LoweringPlan, rank: int) -> dict:
    """The JSON document of docs/CLI.md "schedule": every SPAD entry of ``rank``."""
    return {"rank": rank, "ops": list(schedule_ops(plan, rank))}


def _write_json(out, rank: int, ops: Iterator[dict]) -> None:
    """``json.dumps({"rank": rank, "ops": [...]}, indent=1)`` and a newline, an op at a time,
    each written whole (``out`` a ``WholeWriter``).  A stop (SIGTERM, SIGHUP, Ctrl-C) once
    the document has begun closes it with the ops so far and ``"error"`` (still one JSON
    document), then is raised."""
    written = None  # None before the document begins; then the ops written so far

    def put(text: str, ops: int | None = None) -> None:
        nonlocal written
        with stops_deferred():
            out.write(text)
            if ops is not None:
                written = ops

    try:
        put('{\n "rank": ' + json.dumps(rank) + ',\n "ops": ', 0)
        for k, op in enumerate(ops):
            text = "\n  " + json.dumps(op, indent=1).replace("\n", "\n  ")
            put(("," if k else "[") + text, k + 1)
    except BaseException as exc:
        if written is not None:
            put(("\n ]" if written else "[]") + ',\n "error": '
                + json.dumps(stopped_why(exc)) + "\n}\n")
            exc.json_documented = True  # (JsonErrorCommand prints no second document)
        raise
    put("\n ]\n}\n" if written else "[]\n}\n")


#: Entries of a rank above which ``schedule`` shows one overview row per entry instead of
#: every leg table, unless --trigger or --all (a 128-rank HIER rank: 2,495
#: entries, 590,000 legs, five minutes of tables).
OVERVIEW_ENTRIES = 64


class _ScheduleCommand(JsonErrorCommand):
    """``schedule``: with ``--json``, an error (exit 2) is ``{"rank", "ops": [], "error"}``
    on stdout (then the error line on stderr): every entry is composed before the first
    byte of the document is written, so an error always comes before it."""

    json_indent = 1

    @staticmethod
    def error_document(params: dict, why: str) -> dict:
        return {"rank": params.get("rank"), "ops": [], "error": why}


#: ``schedule``'s ``--help`` text (not a docstring: see :data:`nrtrewrite.cli.MAIN_HELP`)
SCHEDULE_HELP = ("The per-channel step schedule of one rank: leaf, half, chunk position k, "
                 "elements.")


@main.command("schedule", cls=_ScheduleCommand, help=SCHEDULE_HELP)
@click.argument("model", type=PathArg(exists=True, dir_okay=False))
@click.option("--rank", cls=OneValue, type=Int(), required=True,
              help="The rank whose schedule to show.",
              twice="schedule shows one rank's schedule: run it once per rank")
@common_lowering_options
@click.option("--trigger", "triggers", type=Int(), multiple=True, metavar="K",
              help="Only trigger K (repeatable).")
@click.option("--all", "show_all", is_flag=True,
              help=f"Every leg table even for a rank of more than {OVERVIEW_ENTRIES} entries.")
@click.option("--limit", cls=OneValue, type=IntRange(min=0), default=200, show_default=True,
              help="Legs per table in the rich view (0 = all); --json is never cut.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (docs/CLI.md).")
def schedule_cmd(model, rank, topology, algo, host_cc, no_verify_hash, triggers, show_all,
                 limit, as_json):
    """The command (its help: :data:`SCHEDULE_HELP`)."""
    wanted = set(triggers) if triggers else None
    # (--trigger: only the triggers shown are planned, docs/CLI.md "schedule")
    plan, warnings = load_and_plan(model, topology=topology, algo=algo, host_cc=host_cc,
                                   no_verify_hash=no_verify_hash, only=wanted)
    if wanted is not None:
        missing = sorted(wanted - {t.ordinal for t in plan.model.triggers})
        if missing:
            n = len(plan.model.triggers)  # (as explain says it)
            raise OutputError(f"{escape_path(model)}: no trigger {missing[0]} (the model has "
                              f"{n}{f': 0..{n - 1}' if n else ''})")
    err = stderr_console()  # the warnings, on stderr, with --json too (as explain gives them)
    if (note := no_trigger_warning(plan.model, "schedule")) is not None:
        warnings.append(note)
    for w in warnings:
        warn(err, w)
    if as_json:
        _write_json(WholeWriter(sys.stdout), rank, schedule_ops(plan, rank, wanted))
        return
    console = stdout_console()
    entries = _entries(plan, rank, wanted)  # composed once, for the overview or the tables
    if wanted is None and not show_all and len(entries) > OVERVIEW_ENTRIES:
        print_table(console, _overview(rank, entries))
        return
    if wanted is not None:
        absent = sorted(tp.trigger.ordinal for tp in plan.triggers
                        if tp.trigger.ordinal in wanted and rank not in tp.group)
        if absent:
            console.print(f"rank {rank} is not in trigger(s) {', '.join(map(str, absent))}; "
                          "skipped", highlight=False)
    if not entries and wanted is None:
        console.print(f"rank {rank}: no triggers " + (
            "(no trigger of the model has the rank in its group)" if plan.triggers else
            "(the model has none)"), highlight=False)
    for tp, spec in entries:
        _print_op(console, rank, _op(tp, spec, rank), limit)


def _overview(rank: int, entries) -> Table:
    table = Table(title=f"rank {rank}: {len(entries)} SPAD entries",
                  caption="--trigger K shows the legs of trigger K; --all every leg table")
    for col in ("entry", "trigger", "op", "leg", "algorithm", "channels", "legs"):
        table.add_column(col, no_wrap=True)
    for i, (tp, spec) in enumerate(entries):
        ir = IR.emitted(spec.ir)
        chans = sorted(set(ir["channel"].tolist()))
        table.add_row(str(i), str(tp.trigger.ordinal), tp.trigger.op.name, spec.leg,
                      spec.alg.name, " ".join(map(str, chans)) or "-", str(ir.size))
    return table


def _print_op(console: Console, rank: int, op: dict, limit: int) -> None:
    head = (f"rank {rank} trigger {op['trigger']} {op['op']} {op['algorithm']} ({op['leg']}"
            + (f": {op['leg_op']})" if op["leg"] != "flat" else ")"))
    if op["entry_post_sem"] != SEM_ENTRY_POST:  # groups that overlap (DESIGN "Entry handshake")
        head += f" handshake on entry_post {op['entry_post_sem']}"
    if not op["channels"]:
        console.print(f"{head}: no legs (nothing to move)", highlight=False)
    for ch in op["channels"]:
        title = f"{head} channel {ch['channel']}"
        if "prev" in ch:
            title += f" (prev {ch['prev']}, next {ch['next']})"
        if "direction" in ch and "pair" in ch:  # SINGLE_CYCLE_RING: the pair and its arcs
            title += (f" {ch['direction']} of pair {ch['pair'][0]}/{ch['pair'][1]}, arcs "
                      f"{ch['arcs'][0]}/{ch['arcs'][1]}")
        if ch.get("role") == "primary":  # KANGARING: the rank's role and its unit's peers
            title += " primary" + "".join(f", {k} {v}" for k, v in ch["peers"].items()
                                          if v != -1)
        elif ch.get("role") == "secondary":  # exchanges data with its unit's primary only
            title += f" secondary of primary {ch['primary']}"
        table = Table(title=title, min_width=len(title))  # (a longer title would wrap)
        mesh = bool(ch["steps"]) and "to" in ch["steps"][0]
        cols = (("step", "event", "leaf", "elements", "sources", "to", "waits") if mesh else
                ("group", "step", "phase", "leaf", "half", "k", "elements"))
        for col in cols:
            table.add_column(col)
        steps = ch["steps"] if not limit else ch["steps"][:limit]
        for s in steps:
            a, b = s["elements"]
            el = f"[{a}, {b})" if b > a else "-"
            if mesh:
                table.add_row(str(s["step"]), s["phase"], s["leaf"], el, str(s["sources"]),
                              " ".join(map(str, s["to"])),
                              " ".join(f"{sem}>={v}" for sem, v in s["waits"]))
            else:
                table.add_row(str(s["group"]), str(s["step"]), s["phase"], s["leaf"],
                              f"CHUNK_H{s['half']}", str(s["k"]),
                              f"[{a}, {b})" if b > a else "empty")
        print_table(console, table)
        if limit and len(ch["steps"]) > limit:
            more = counted(len(ch["steps"]) - limit, "more leg")
            console.print(f"... {more} (--limit 0 shows all)")
        if "events" in op and ch is op["channels"][0]:
            ev = Table(title="events (semaphore = sema_shift_offset + event)")
            for col in ("event", "semaphore", "from", "to", "wait", "what"):
                ev.add_column(col, overflow="fold")
            for e in op["events"]:
                ev.add_row(f"{e['event']} ({e['value']})", str(e["semaphore"]),
                           " ".join(map(str, e["from"])), " ".join(map(str, e["to"])),
                           str(e["wait_val"]), e["what"])
            print_table(console, ev)
        if "user_ranks" in ch:
            console.print("user_ranks: " + " ".join(map(str, ch["user_ranks"])))
