"""Helpers of the mesh / RDH tests: build small models, lower them, run them.

``run`` executes an output folder with the independent executor of ``meshexec`` and, when the
simulator (``nrtrewrite simulate``) executes mesh and RDH entries, with the simulator too.
"""

from __future__ import annotations

from pathlib import Path

import meshexec

from nrtrewrite.bundle import write_output
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.reader import read_model_bytes

ELEM = {"bf16": 2, "fp16": 2, "fp32r": 4, "fp8_e3": 1, "fp8_e4": 1, "fp8_e5": 1}


def spec(groups: list[list[int]], trigs: list[tuple], lnc: int = 1) -> dict:
    """``trigs``: (op, dtype, alu, num_elements[, group index]) with op all_reduce /
    all_gather / reduce_scatter."""
    vars_, eng = [], []
    for i, t in enumerate(trigs):
        op, dtype, alu, n = t[:4]
        g = t[4] if len(t) > 4 else 0
        ds = ELEM[dtype]
        gs = len(groups[g])
        out = {"all_reduce": n, "all_gather": n * gs, "reduce_scatter": n // gs}[op]
        vars_ += [{"name": f"i{i}", "type": "input", "size": n * ds},
                  {"name": f"o{i}", "type": "output", "size": out * ds}]
        body = {"dtype": dtype, "src": f"i{i}", "dst": f"o{i}", "num_elements": n}
        if g:
            body["group"] = g
        if op != "all_gather":
            body["op"] = alu
        eng.append({op: body})
    return {"header": {"pkg_version": 2, "name": "meshcase", "lnc_size": lnc},
            "subgraphs": [{"name": "sg00", "vars": vars_, "replica_groups": groups,
                           "engines": {"sp": eng}}]}


def lower(sp: dict, out: Path, *, algo: str | None = None, topology: str | None = None):
    """Assemble and lower every rank; returns the plan."""
    data = assemble_spec(sp)
    model = read_model_bytes(data, path="meshcase.neff")
    plan = plan_lowering(model, LowerOptions(algo=algo, topology=topology))
    write_output(plan, Path(out), ranks=None, workers=1)
    return plan


def run(out: Path, seed: int = 0, only: set[int] | None = None) -> dict:
    """Execute ``out``: the independent executor always, and (without ``only``) the
    simulator too; both must match (``res["simulator"]`` is then ``"match"``)."""
    res = meshexec.execute(out, seed=seed, only=only)
    if only is not None:
        return res
    from nrtrewrite.simulate import simulate_output
    sim = simulate_output(out, seed=seed)
    assert sim.error is None, sim.error
    bad = [t for t in sim.triggers if t.status != "match"]
    assert not bad, bad[0].detail
    res["simulator"] = "match"
    return res


def schedule_events(plan, rank: int, trigger: int = 0) -> dict[str, dict]:
    """The event schedule of ``rank``'s entry for ``trigger``, by event name."""
    from nrtrewrite.lower import rank_entries
    for tp, sp in rank_entries(plan, rank):
        if tp.trigger.ordinal == trigger:
            return {e["event"]: e for e in sp.info["events"]}
    raise KeyError(trigger)


def simulator_catches(out: Path, seeds=range(3)) -> bool:
    """Whether ``nrtrewrite simulate`` reports an error or a mismatch for ``out`` (a mutated
    output) under one of ``seeds``."""
    from nrtrewrite.errors import NrtRewriteError
    from nrtrewrite.simulate import simulate_output
    for seed in seeds:
        try:
            sim = simulate_output(out, seed=seed)
        except NrtRewriteError:
            return True
        if sim.error is not None or any(t.status != "match" for t in sim.triggers):
            return True
    return False
