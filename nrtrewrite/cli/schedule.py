"""``nrtrewrite schedule``: the composed steps of one rank (same choices as ``lower``)."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from nrtrewrite.cli import main
from nrtrewrite.cli.lower import common_lowering_options, load_and_plan
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.compose.ring import PHASE_NAMES
from nrtrewrite.errors import OutputError
from nrtrewrite.lower import LoweringPlan, rank_entries


def _leaf_name(v: int) -> str:
    try:
        return Leaf(v).name
    except ValueError:
        return f"leaf{v}"


def schedule_json(plan: LoweringPlan, rank: int) -> dict:
    """The JSON document of docs/CLI.md "schedule": every SPAD entry of ``rank``."""
    if rank not in plan.world:
        raise OutputError(f"rank {rank} is not in the model's world "
                          f"({plan.world[0]}..{plan.world[-1]})", rank=rank)
    ops = []
    for tp, spec in rank_entries(plan, rank):
        ir = spec.ir
        chans = []
        # mesh / RDH entries name their rows by event and show who they send to and wait on
        events = spec.info.get("phase_names")
        for ch in dict.fromkeys(ir["channel"].tolist()):
            rows = ir[ir["channel"] == ch]
            info = spec.info.get("channels", {}).get(ch, {})
            steps = []
            for r in rows:
                st = {"group": int(r["group"]), "step": int(r["step"]),
                      "phase": (events or PHASE_NAMES).get(int(r["phase"]), str(int(r["phase"]))),
                      "leaf": _leaf_name(int(r["leaf"])), "half": int(r["half"]),
                      "k": int(r["k"]), "elements": [int(r["start"]), int(r["stop"])]}
                if events is not None:
                    st["to"] = sorted(({spec.peers[int(p)] for p in r["dst_peer"][:r["n_dst"]]}
                                       | {spec.peers[int(p)] for p in r["inc_peer"][:r["n_inc"]]})
                                      - {rank})
                    st["waits"] = [[int(s), int(v)] for s, v in
                                   zip(r["wait_sem"][:r["n_wait"]], r["wait_val"][:r["n_wait"]])]
                    st["sources"] = int(r["n_src"])
                    if r["net_src_peer"] >= 0:
                        st["from_network"] = spec.peers[int(r["net_src_peer"])]
                steps.append(st)
            chans.append({"channel": int(ch), **info, "steps": steps})
        ops.append({"trigger": tp.trigger.ordinal, "op": tp.trigger.op.name, "leg": spec.leg,
                    "algorithm": spec.alg.name, **{k: v for k, v in spec.info.items()
                                                   if k not in ("channels", "phase_names")},
                    "channels": chans})
    return {"rank": rank, "ops": ops}


@main.command("schedule")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--rank", type=int, required=True, help="The rank whose schedule to show.")
@common_lowering_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (docs/CLI.md).")
def schedule_cmd(model, rank, topology, algo, host_cc, no_verify_hash, as_json):
    """The per-channel step schedule of one rank: leaf, half, chunk position k, elements."""
    plan, warnings = load_and_plan(model, topology=topology, algo=algo, host_cc=host_cc,
                                   no_verify_hash=no_verify_hash)
    doc = schedule_json(plan, rank)
    if as_json:
        click.echo(json.dumps(doc, indent=1))
        return
    err = Console(stderr=True)
    for w in warnings:
        err.print(f"[yellow]nrtrewrite: warning:[/] {w}", highlight=False)
    console = Console()
    for op in doc["ops"]:
        for ch in op["channels"]:
            title = (f"rank {rank} trigger {op['trigger']} {op['op']} {op['algorithm']} "
                     f"({op['leg']}) channel {ch['channel']}")
            if "prev" in ch:
                title += f" (prev {ch['prev']}, next {ch['next']})"
            table = Table(title=title)
            mesh = bool(ch["steps"]) and "to" in ch["steps"][0]
            cols = (("step", "event", "leaf", "elements", "sources", "to", "waits") if mesh else
                    ("group", "step", "phase", "leaf", "half", "k", "elements"))
            for col in cols:
                table.add_column(col)
            for s in ch["steps"]:
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
            console.print(table)
            if "events" in op and ch is op["channels"][0]:
                ev = Table(title="events (semaphore = sema_shift_offset + event)")
                for col in ("event", "semaphore", "from", "to", "wait", "what"):
                    ev.add_column(col, overflow="fold")
                for e in op["events"]:
                    ev.add_row(f"{e['event']} ({e['value']})", str(e["semaphore"]),
                               " ".join(map(str, e["from"])), " ".join(map(str, e["to"])),
                               str(e["wait_val"]), e["what"])
                console.print(ev)
            if "user_ranks" in ch:
                console.print("user_ranks: " + " ".join(map(str, ch["user_ranks"])))
