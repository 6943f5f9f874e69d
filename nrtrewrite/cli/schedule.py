"""``nrtrewrite schedule``: the composed steps of one rank (same choices as ``lower``)."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from nrtrewrite.cli import main
from nrtrewrite.cli.lower import common_lowering_options, load_and_plan
from nrtrewrite.codes import EdgeLocality
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.compose.ring import PHASE_NAMES, bookkeeping, compose_channel
from nrtrewrite.errors import OutputError
from nrtrewrite.lower import LoweringPlan
from nrtrewrite.topology.rings import enc_ring


def schedule_json(plan: LoweringPlan, rank: int) -> dict:
    """The JSON document of docs/CLI.md "schedule"."""
    if rank not in plan.world:
        raise OutputError(f"rank {rank} is not in the model's world "
                          f"({plan.world[0]}..{plan.world[-1]})", rank=rank)
    ops = []
    for tp in plan.triggers:
        if rank not in tp.group_index:
            continue
        chans = []
        for layout_ch, ch in enumerate(tp.channel_ids):
            ring = enc_ring(tp.orders[ch], rank)
            steps = compose_channel(tp.trigger.op, tp.chunk, layout_ch, ring.user_ranks,
                                    tp.group_index, host_cc=plan.options.host_cc).steps
            prev_net = (ring.prev != rank and
                        plan.topology.locality(ring.prev, rank) == EdgeLocality.NETWORK)
            prologue, epilogue = bookkeeping(tp.trigger.op, prev_net)
            chans.append({
                "channel": ch, "prev": ring.prev, "next": ring.next,
                "user_ranks": list(ring.user_ranks),
                "prologue": prologue, "epilogue": epilogue,
                "steps": [{"group": int(s["group"]), "step": int(s["step"]),
                           "phase": PHASE_NAMES[int(s["phase"])],
                           "leaf": Leaf(int(s["leaf"])).name, "half": int(s["half"]),
                           "k": int(s["k"]), "elements": [int(s["start"]), int(s["stop"])]}
                          for s in steps],
            })
        ops.append({"trigger": tp.trigger.ordinal, "op": tp.trigger.op.name,
                    "algorithm": tp.alg.name, "chunk_size_n": tp.chunk.chunk,
                    "pgta": tp.chunk.groups, "channels": chans})
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
            table = Table(title=f"rank {rank} trigger {op['trigger']} {op['op']} "
                                f"{op['algorithm']} channel {ch['channel']} "
                                f"(prev {ch['prev']}, next {ch['next']})")
            for col in ("group", "step", "phase", "leaf", "half", "k", "elements"):
                table.add_column(col)
            for s in ch["steps"]:
                a, b = s["elements"]
                table.add_row(str(s["group"]), str(s["step"]), s["phase"], s["leaf"],
                              f"CHUNK_H{s['half']}", str(s["k"]),
                              f"[{a}, {b})" if b > a else "empty")
            console.print(table)
            console.print("user_ranks: " + " ".join(map(str, ch["user_ranks"])))
