"""``nrtrewrite explain``: why each collective gets the engine, legs, channels and rings it gets.

Per trigger: every candidate engine with its predicate verdict and reason, the policy's
choice per leg and what ``lower`` will use, the channels of the plan ``lower`` makes and
each channel's ring (or, with ``--rank``, that rank's ``enc_ring`` per channel; KANGARING:
the cycle of the primaries, or the rank's role).  Model-less mode explains one
hypothetical collective (``--op allreduce --bytes 64MiB --ranks 64``).  The ``--json``
layout is documented in docs/CLI.md "explain".
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console
from rich.table import Table
from rich.text import Text

from nrtrewrite.bundle import no_trigger_warning, temp_root
from nrtrewrite.cli import (ALGO_TWICE, MAX_INT_DIGITS, Int, JsonErrorCommand, OneValue,
                            PathArg, after_zeros, and_list, ascii_int, too_many_digits,
                            echo_whole_pieces, main, options_given, plain, plain_line, print_plain,
                            stderr_console, stdout_console, styled, verb, no_dash,
                            given_warnings)
from nrtrewrite.cli.lower import unverified_hash_warning, warn
from nrtrewrite.codes import DTYPE_SIZE, AluOp, DType, EdgeLocality, EncAlgType, EncOpType
from nrtrewrite.emit.address import build_memory_map
from nrtrewrite.errors import (LimitError, NrtRewriteError, ResourceError, ValidationError,
                               counted, cut_middle, did_you_mean, escape_path,
                               path_text)
from nrtrewrite.neff.instructions import trigger_where
from nrtrewrite.neff.model import Operand
from nrtrewrite.policy import DEFAULT_POLICY, Policy, fmt_bytes
from nrtrewrite.select import (
    Leg, Request, Selection, group_shape, idle_clauses, model_way_out, parse_algo_override,
    parse_op_name, select, spad_pass_over,
)
from nrtrewrite.sizes import parse_size
from nrtrewrite.topology.model import (
    MAX_TOPOLOGY_RANKS, PRESETS, Topology, load_topology, platform_from_json, read_topology_file,
    with_platform,
)
from nrtrewrite.topology.rings import (
    duplicate_flags, enc_ring, hop_localities, kangaring_paths, ring_orders,
)

_HOP_ABBREV = {EdgeLocality.SAME_DEVICE: "dev", EdgeLocality.DEVICE_LINK: "link",
               EdgeLocality.C2C_PORT: "c2c", EdgeLocality.NETWORK: "net"}


#: One item of a ``--group`` list: a rank or an ascending range (ASCII digits only: ``int``
#: reads other decimal digits, and ``str.isdigit`` takes ``²``, which ``int`` refuses).
_RANKS_ITEM_RE = re.compile(r"([0-9]+)(?:\s*(?:-|\.\.)\s*([0-9]+))?")


def _shown_item(part: str) -> str:
    return repr(part) if len(part) <= 40 else f"{part[:16]!r}...{part[-8:]!r} ({len(part)} characters)"


def _list_rank(digits: str, part: str) -> int:
    """A rank of a ``--group`` item, below :data:`MAX_TOPOLOGY_RANKS` (no topology has a rank
    beyond it); judged by its digits before ``int`` reads them (a 5000-digit number): more
    than :data:`MAX_INT_DIGITS` of them, its leading zeros not counted, is refused as an
    integer option's value is (``has 5000 digits, more than 40``; until 2026-12-06 ``rank
    of 5000 digits ... is beyond the last rank``), a rank of fewer at or past the limit as
    beyond the last rank."""
    sig = digits.lstrip("0") or "0"
    if len(sig) > MAX_INT_DIGITS:
        raise ValidationError(f"rank {cut_middle(sig, 24, 12, 0, '{head}...')!r} in "
                              f"{_shown_item(part)} has {len(sig)} digits"
                              f"{after_zeros(len(digits) - len(sig))}, more than "
                              f"{MAX_INT_DIGITS}", field="--group")
    if int(sig) >= MAX_TOPOLOGY_RANKS:
        raise LimitError(f"rank {sig} in {_shown_item(part)} is beyond the last rank a "
                         f"topology may have, {MAX_TOPOLOGY_RANKS - 1} (MAX_TOPOLOGY_RANKS = "
                         f"{MAX_TOPOLOGY_RANKS})", field="--group")
    return int(sig)


def parse_ranks(text: str) -> tuple[int, ...]:
    """``0-63``, ``0..63``, ``0,4,8``, ``0-3,64-67`` -> ranks in the given order.

    A range runs from its first rank to its second, downward too (``5-1``: 5, 4, 3, 2, 1).
    The limits are checked on the numbers before any rank list is built: every rank below
    :data:`MAX_TOPOLOGY_RANKS`, and at most that many ranks listed (more repeats a rank)."""
    items: list[tuple[int, int]] = []
    total = 0
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 1 and not all(parts):  # "0-3," or ",0" or "0,,4": as --algo's clauses
        raise ValidationError(f"empty item in the rank list {_shown_item(text)} (items are "
                              "separated by ',', none may be empty)", field="--group")
    for part in filter(None, parts):
        m = _RANKS_ITEM_RE.fullmatch(part)
        if not m:
            raise ValidationError(f"bad rank list item {_shown_item(part)} (e.g. 0-63 or 0,4,8)",
                                  field="--group")
        a = _list_rank(m.group(1), part)
        b = a if m.group(2) is None else _list_rank(m.group(2), part)
        total += abs(b - a) + 1  # a range may run downward (5-1: 5, 4, 3, 2, 1), as
        # compress() writes the rank runs of a ring (7..5)
        if total > MAX_TOPOLOGY_RANKS:
            raise LimitError(f"the list has {total} ranks by {_shown_item(part)}, more than "
                             f"{MAX_TOPOLOGY_RANKS} (MAX_TOPOLOGY_RANKS): it repeats a rank",
                             field="--group")
        items.append((a, b))
    if not items:
        raise ValidationError("empty rank list", field="--group")
    ranks = tuple(r for a, b in items
                  for r in (range(a, b + 1) if a <= b else range(a, b - 1, -1)))
    if len(set(ranks)) != len(ranks):  # a replica group holds each rank once
        seen: set[int] = set()
        twice = next(r for r in ranks if r in seen or seen.add(r))
        raise ValidationError(f"rank {twice} is listed twice (a replica group holds each rank "
                              "once)", field="--group")
    return ranks


def compress(order) -> str:
    """Rank runs: 0..3 16..19 7 (``a..b`` runs step +1 or -1)."""
    order = list(order)
    parts, i = [], 0
    while i < len(order):
        j = i
        step = order[i + 1] - order[i] if i + 1 < len(order) else 0
        if step in (1, -1):
            while j + 1 < len(order) and order[j + 1] - order[j] == step:
                j += 1
        parts.append(f"{order[i]}..{order[j]}" if j > i else str(order[i]))
        i = j + 1
    return " ".join(parts)


# -- data (shared by the rich and the JSON output) --------------------------------------------

def _leg_json(leg: Leg) -> dict:
    return {"name": leg.name, "op": leg.op.name, "algorithm": leg.alg.name,
            "sub_type": leg.sub_type.name if leg.sub_type is not None else None,
            "bytes": leg.nbytes, "groups": [list(g) for g in leg.groups], "reason": leg.reason}


#: the collectives a model-less ``--alu`` applies to, ADD when it is not given
_REDUCTIONS = (EncOpType.ALLREDUCE, EncOpType.REDUCE_SCATTER, EncOpType.REDUCE)


def _alu_name(source) -> str | None:
    """The ALU op of the trigger or model-less request ``source`` as ``inspect --json`` and
    the manifest spell it (``ADD``, ``MAX``, ``MIN``; None for a collective without one, an
    all-gather); a model-less reduction without ``--alu`` is ADD, its default."""
    if isinstance(source, Request):
        alu = source.alu
        if alu is None and source.op in _REDUCTIONS:
            alu = AluOp.ADD
    else:
        alu = getattr(source, "alu_op", None)
    return alu.name if alu is not None else None


def explain_selection(sel: Selection, topo: Topology, *, rank: int | None = None,
                      meta: dict | None = None, source=None, plan=None,
                      host_cc: bool = False) -> dict:
    """The JSON-able record of one selection (docs/CLI.md "explain").  ``source`` is the
    model's trigger or the model-less request ``sel`` was selected for: the channels are those
    of the plan ``lower`` makes of it (compose/*: plan_ring, trigger_kangaring_plan,
    plan_hier, trigger_single_cycle_plan), ``plan`` when given (the engine's
    ``Prepared.data``: that plan, made already), else made here (as ``lower --host-cc``
    makes it when ``host_cc``)."""
    shape = group_shape(topo, sel.group)
    rec: dict[str, Any] = {"trigger": sel.trigger, **(meta or {})}
    rec.update({
        "op": sel.op.name, "dtype": sel.dtype.name, "alu_op": _alu_name(source),
        "bytes": sel.op_bytes, "sbuf": sel.sbuf,
        "group": list(sel.group), "group_size": len(sel.group), "scope": sel.scope,
        "nodes": list(shape.nodes), "local_rank_n": shape.local_rank_n,
        "policy": {
            "algorithm": sel.policy_alg.name,
            "legs": [_leg_json(leg) for leg in sel.policy_legs],
            "reason": sel.reason,
            "hier_selections": {slot: alg.name for slot, alg in sel.hier_selections} or None,
            "hier_log": sel.hier_log_line(),
        },
        "lowered": {
            "algorithm": sel.alg.name,
            "metaring_type": sel.metaring_type.name if sel.metaring_type is not None else None,
            "legs": [_leg_json(leg) for leg in sel.legs],
            "fallback_reason": sel.fallback_reason,
        },
        "candidates": [
            {"algorithm": c.alg.name, "value": int(c.alg), "predicate": c.predicate,
             "legal": c.legal, "in_window": c.in_window if c.legal else None,
             "lowerable": c.lowerable,
             "chosen": c.chosen, "reason": c.reason}
            for c in sel.candidates],
    })
    channels: dict[str, Any] = {"count": sel.n_channels, "reason": sel.channel_reason,
                                "hybrid_ring": sel.hybrid_ring, "rings": []}
    if rank is not None:
        rec["rank"] = rank
    mesh_like = sel.alg in (EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH, EncAlgType.INTRA_RDH,
                            EncAlgType.INTER_RDH)
    if mesh_like:  # no rings: the mesh / RDH schedule instead (docs/CLI.md "explain")
        from nrtrewrite.compose.mesh import explain_mesh
        from nrtrewrite.compose.rdh import explain_rdh
        rdh = sel.alg in (EncAlgType.INTRA_RDH, EncAlgType.INTER_RDH)
        rec["rdh" if rdh else "mesh"] = (explain_rdh if rdh else explain_mesh)(sel, topo, rank)
    trig = plan_trigger(sel, source)
    kang_plans: list[tuple[str, Any]] = []  # (leg name, KangaringPlan) of what lower runs
    if sel.alg == EncAlgType.HIER:  # rings per leg group: `schedule` shows a rank's
        from nrtrewrite.compose.hier import plan_hier
        hp = plan if plan is not None else plan_hier(_plan_context(topo, host_cc), trig, sel)
        legs = []
        for leg, lp in zip(sel.legs, hp.legs):
            ids = sorted({c for p in lp.plans.values() for c in p.channel_ids})
            legs.append({"name": lp.name, "algorithm": lp.alg.name, "groups": len(leg.groups),
                         "channel_base": lp.channel_base, "channel_ids": lp.n_channels,
                         "channels": ids})
            if lp.alg == EncAlgType.KANGARING:
                g = next((g for g in lp.plans if rank in g), next(iter(lp.plans)))
                kang_plans.append((lp.name, lp.plans[g]))
        rec["hier"] = {"legs": legs}
        channels["count"] = sum(lp.n_channels for lp in hp.legs)
        channels["reason"] = "per leg, each on channel ids of its own: " + "; ".join(
            f"{leg['name']} {leg['channel_ids']} ({_id_range(leg)})" for leg in legs)
    elif sel.alg != EncAlgType.INVALID and sel.n_channels and not mesh_like:
        if sel.alg == EncAlgType.SINGLE_CYCLE_RING:
            rings = _single_cycle_rings(sel, topo, plan)
            channels["count"] = len(rings)
            pairs = len({c for c, _o, _d, direction in rings if direction == "cw"})
            from nrtrewrite.compose.single_cycle import forward_rings
            want = max(1, sel.n_channels // 2)  # docs/SELECTION.md §7
            nring = len(set(forward_rings(topo, sel.group, sel.n_channels)))
            if nring < want:
                channels["reason"] += (f"; {nring} distinct ring(s) for the {want} channel "
                                       "pair(s) of the rule")
            if pairs < min(nring, want):
                channels["reason"] += (f"; the chunk layout keeps {pairs} pair(s) "
                                       "(__set_active_channels: at least 64 elements per "
                                       "chunk position)")
            if len(sel.group) == 1:  # compose/single_cycle.py: ccw = cw, nothing to exchange
                channels["reason"] += (f"; SINGLE_CYCLE_RING over one rank runs {len(rings)} "
                                       "channel(s), cw only: its pair's ccw channel is the cw "
                                       "one, no ring is walked backward")
            elif (pairs, len(rings)) != (want, 2 * want):
                # (only when the plan runs other than the rule's pairs, which select's reason
                # already gives in SELECTION.md §7's words: until 2026-12-06 said twice)
                channels["reason"] += (f"; SINGLE_CYCLE_RING runs {pairs} channel pair(s), each "
                                       "ring forward (cw) and backward (ccw): "
                                       f"{len(rings)} channel(s)")
        elif sel.alg == EncAlgType.KANGARING:
            from nrtrewrite.compose.kangaring import trigger_kangaring_plan
            kp = plan if plan is not None else trigger_kangaring_plan(
                topo, trig, sel.n_channels, host_cc=host_cc)
            kang_plans.append(("flat", kp))
            rings = [(c, kp.channels[c].primaries, kp.channels[c].duplicate, None)
                     for c in kp.channel_ids]
        else:
            if sel.alg == EncAlgType.RING:
                from nrtrewrite.compose.ring import plan_ring
                rp = plan if plan is not None else plan_ring(topo, trig, sel.n_channels)
                orders = [rp.orders[c] for c in rp.channel_ids]
                ids = list(rp.channel_ids)
            else:
                orders = ring_orders(topo, sel.group, sel.n_channels)
                ids = list(range(len(orders)))
            rings = [(c, order, dup, None)
                     for c, order, dup in zip(ids, orders, duplicate_flags(orders))]
        if sel.alg != EncAlgType.SINGLE_CYCLE_RING and len(rings) != sel.n_channels:
            channels["reason"] += (f"; the chunk layout keeps {len(rings)} "
                                   f"(__set_active_channels: at least 64 elements per chunk "
                                   f"position)")
            channels["count"] = len(rings)
        for c, order, dup, direction in rings:
            if sel.alg == EncAlgType.KANGARING:
                ring = _kangaring_ring(topo, kp.channels[c], c, rank)
            elif rank is not None:
                r = enc_ring(order, rank, duplicate=dup)
                ring = {"channel": c, "prev": r.prev, "next": r.next,
                        "user_ranks": list(r.user_ranks), "duplicate": r.duplicate}
            else:
                hops = hop_localities(topo, order)
                ring = {"channel": c, "order": list(order) if order is not None else None,
                        "duplicate": dup, "hops": {loc.name: n for loc, n in hops.items()}}
            if direction is not None:
                ring["direction"] = direction
            channels["rings"].append(ring)
    rec["channels"] = channels
    if kang_plans:  # the channels lower runs, with their channel ids
        kp0 = kang_plans[0][1]
        kr: list[dict] = []
        for name, kp in kang_plans:
            for c in kp.channel_ids:
                kr.append(_kangaring_channel(kp.channels[c], c, name,
                                             rank if rank in kp.group_index else None))
        rec["kangaring"] = {"group": list(kp0.group), "note": "lowered", "channels": kr}
    elif kang_legs := [leg for leg in sel.policy_legs if leg.alg == EncAlgType.KANGARING]:
        # the policy's choice, not lowered: the paths its leg would use
        leg = next((leg for leg in kang_legs if any(rank in g for g in leg.groups)),
                   kang_legs[0])
        g = next((g for g in leg.groups if rank in g), leg.groups[0])
        paths = kangaring_paths(topo, g, min(4, max(1, sel.n_channels)))
        kr = [_kangaring_channel(ch, ch.channel, leg.name, rank if rank in g else None)
              for ch in paths]
        rec["kangaring"] = {"group": list(g), "note": _not_lowered_note(sel), "channels": kr}
    return rec


def _not_lowered_note(sel: Selection) -> str:
    """The ``kangaring`` note of a policy choice ``lower`` does not run: why, in ``lower``'s
    words where it refuses the trigger (its dtype, operands, engine's plan: the record's
    ``lowered.fallback_reason``), else the engine it runs instead (until 2026-12-06 ``not
    lowered by this build`` whatever the reason, though this build lowers KANGARING)."""
    if sel.alg == EncAlgType.INVALID and sel.fallback_reason:
        return f"policy choice, not lowered: {sel.fallback_reason}"
    return f"policy choice, not lowered: {sel.alg.name} is lowered instead"


def _direction(ring: dict, column: tuple[str, ...]) -> tuple[str, ...]:
    """A ring's cell of the text's ``direction`` column, when the table has one
    (``column``): ``cw`` or ``ccw``, ``-`` for a ring without one."""
    return tuple(ring.get("direction") or "-" for _ in column)


def _id_range(leg: dict) -> str:
    ids = leg["channels"]
    return compress(ids) if ids else "none"


def _kangaring_ring(topo: Topology, kc, channel: int, rank: int | None) -> dict:
    """Channel ``channel`` of a KANGARING: the cycle of its primaries (the manifest's
    ``channels[].order``, docs/FORMATS.md §1.1) with its hops, or ``rank``'s role on it as
    ``schedule --json`` states it (a primary: its neighbouring primaries and its unit's
    peers; a secondary: its primary, which is its ``prev`` and ``next`` too, docs/TOPOLOGY.md
    §4, as the text's role table and the kangaring paths table give them)."""
    if rank is None:
        hops = hop_localities(topo, kc.primaries)
        return {"channel": channel, "order": list(kc.primaries), "duplicate": kc.duplicate,
                "hops": {loc.name: n for loc, n in hops.items()}}
    from nrtrewrite.compose.kangaring import channel_role
    unit = next(list(u) for u in kc.units if rank in u)
    role = channel_role(kc, rank)
    if role["role"] == "secondary":  # its prev and next are its unit's primary (§4)
        role = {"role": "secondary", "prev": role["primary"], "next": role["primary"],
                "primary": role["primary"]}
    return {"channel": channel, **role, "unit": unit, "duplicate": kc.duplicate}


def _kangaring_channel(kc, channel: int, leg: str, rank: int | None) -> dict:
    """A kangaring channel's paths (``rank``'s ``enc_kangaring`` view when given)."""
    if rank is not None:
        v = kc.of(rank)
        return {"channel": channel, "leg": leg, "vnc": v.vnc, "prev": v.prev, "next": v.next,
                "port": v.port, "peer_rmtv": v.peer_rmtv, "peer_rmtv2": v.peer_rmtv2,
                "peer_local": v.peer_local, "next_peer_rmtv": v.next_peer_rmtv,
                "is_primary": v.is_primary, "duplicate": v.duplicate,
                "logical_path": list(v.logical_path)}
    return {"channel": channel, "leg": leg, "logical_path": list(kc.logical_path),
            "primaries": list(kc.primaries), "units": [list(u) for u in kc.units],
            "duplicate": kc.duplicate}


@dataclass(frozen=True)
class PlanTrigger:
    """What the composers' plans read of a trigger (op, dtype, group, elements), for a
    model-less collective: ``lower``'s plan functions take it as they take a model's
    :class:`~nrtrewrite.neff.model.Trigger`."""

    ordinal: int
    op: EncOpType
    dtype: DType
    replica_group: tuple[int, ...]
    num_elements: int  # input elements per rank, as Trigger.num_elements
    alu_op: AluOp | None = None
    uses_sbuf: bool = False
    #: out of place: a model-less collective's input and output are vars of their own (the
    #: plans ask whether they share bytes, apoverlap.operands_may_share: an in-place
    #: KANGARING reduce-scatter runs its legs in another order)
    src: Operand = Operand(var_id=0)
    dst: Operand = Operand(var_id=1)

    @property
    def group_size(self) -> int:
        return len(self.replica_group)


def plan_trigger(sel: Selection, source=None):
    """The trigger ``lower`` plans for ``sel``: ``source`` when it is a model's trigger, else
    a :class:`PlanTrigger` of the request (``source``, or ``sel``'s op, dtype, group and
    size)."""
    if source is not None and not isinstance(source, Request):
        return source
    req = source if source is not None else Request.for_op(
        sel.op, sel.dtype, sel.group, sel.op_bytes, ordinal=sel.trigger, sbuf=sel.sbuf)
    return PlanTrigger(ordinal=req.ordinal, op=req.op, dtype=req.dtype,
                       replica_group=tuple(req.group),
                       num_elements=req.in_bytes // DTYPE_SIZE[req.dtype], alu_op=req.alu,
                       uses_sbuf=req.sbuf)


def _plan_context(topo: Topology, host_cc: bool = False):
    """The part of ``lower``'s plan the composers' plan functions read (the topology, the
    options: ``host_cc``, ``lower``'s ``--host-cc``, which changes steps, not channels)."""
    from nrtrewrite.lower import LowerOptions
    return SimpleNamespace(topology=topo, options=LowerOptions(host_cc=host_cc))


def _single_cycle_rings(sel: Selection, topo: Topology, sp=None) -> list[tuple]:
    """(channel, order, duplicate, direction) of each channel ``lower`` gives a
    SINGLE_CYCLE_RING selection: the composer's own plan ``sp`` (a pair per ring, cw and
    ccw), made here when not given."""
    from nrtrewrite.compose.single_cycle import trigger_single_cycle_plan
    if sp is None:
        elements = sel.op_bytes // DTYPE_SIZE[sel.dtype]
        sp = trigger_single_cycle_plan(topo, sel.op, sel.group, elements, sel.dtype,
                                       sel.n_channels)
    out = []
    for cw, ccw in sp.pairs:
        out.append((cw, sp.orders[cw], "cw"))
        if ccw != cw:
            out.append((ccw, sp.orders[ccw], "ccw"))
    out.sort(key=lambda r: r[0])
    # duplicate: the same directed cycle as an earlier channel's, cw or ccw (a 2-rank
    # group's ccw channel repeats its cw one, docs/TOPOLOGY.md §3 step 5)
    dups = duplicate_flags([order for _c, order, _d in out])
    return [(c, order, dup, d) for (c, order, d), dup in zip(out, dups)]


def not_lowerable(sel: Selection) -> Selection:
    """A model-less collective's ``sel`` as ``lower`` would see it: in a dtype ``lower``
    refuses (lower.dtype_refusal), or a DRAM one whose buffers a TENSOR3D start_addr cannot
    address (limits.start_addr_refusal), not lowered with that reason.  Its engine's
    refusals: :func:`_engine_refusal`; a model's triggers get ``lower``'s own checks
    (:func:`_plan_model`)."""
    from nrtrewrite.limits import start_addr_refusal
    from nrtrewrite.lower import dtype_refusal
    why = dtype_refusal(sel.op, sel.dtype, len(sel.group))
    if why is None and not sel.sbuf:
        why = start_addr_refusal(sel.op_bytes)
    if why is None or sel.alg == EncAlgType.INVALID:
        return sel
    return not_lowered(sel, why)


def not_lowered(sel: Selection, why: str) -> Selection:
    """``sel`` not lowered, ``lower`` refusing it for ``why``."""
    from dataclasses import replace
    return replace(sel, alg=EncAlgType.INVALID, legs=(), n_channels=0, fallback_reason=why,
                   channel_reason="nothing lowered")


def _engine_refusal(topo: Topology, trig, sel: Selection,
                    host_cc: bool = False) -> tuple[str | None, Any]:
    """(why ``sel``'s engine refuses to prepare ``trig``, a model-less collective's
    :class:`PlanTrigger`, or None; the engine's plan, or None): what ``lower``'s
    ``prepare_trigger`` finds only in the plan, e.g. a mesh channel buffer past
    ENC_MESH_CHANNEL_BUF_MAX_SIZE, HIER legs past 32 channel ids, a kangaring channel past
    its semaphore block (``host_cc``: as ``lower --host-cc`` prepares it)."""
    from nrtrewrite.compose import algorithm as algorithms
    try:
        prepared = algorithms.get(sel.alg).prepare(_plan_context(topo, host_cc), trig, sel)
    except NrtRewriteError as err:
        return err.why, None
    return None, prepared.data


@dataclass
class ModelPlan:
    """What ``lower`` makes of a model before it composes a rank (lower.plan_lowering, then
    limits.check_plan), as :func:`_plan_model` finds it."""

    #: the selection of every trigger whose selection does not fail (``strict=False``: one
    #: nothing lowerable serves is INVALID), by ordinal
    selections: dict[int, Selection]
    #: the refusal of every trigger ``lower`` refuses for a reason of its own, by ordinal: the
    #: first of its checks that fails, placed at the trigger (a model-wide refusal is not one);
    #: in the order ``lower`` meets them: the selections (lower selects every trigger
    #: first), then lower's checks and the engines' prepares, then the TENSOR3D start_addr
    #: (limits.check_plan, after the entry handshake and the memory layout: none when one
    #: of these refuses the model), each in trigger order
    refusals: dict[int, NrtRewriteError]
    #: the engine's plan of every trigger ``lower`` plans (``Prepared.data``), by ordinal
    plans: dict[int, Any]
    #: what ``lower`` refuses the whole model for under a model-wide limit, or None
    refusal: NrtRewriteError | None
    #: whether :attr:`refusal` is the memory layout's and the vars alone do not fit (no
    #: scratch, no gateway): ``explain`` then refuses the model with that line, as ``lower``
    #: does, and shows nothing
    vars_refused: bool = False
    #: the refusal of every trigger ``lower`` plans but refuses when it composes a rank (a
    #: leg over TPINC_MAX_BDS the BD gate did not count: a forced engine's), by ordinal, in
    #: the order ``lower`` meets them (by the rank, then the trigger); only when nothing
    #: above refuses the model, as ``lower`` composes no rank then.  Unlike
    #: :attr:`refusals`, after the plan: ``lower`` has given its warnings, and checked its
    #: ranks, when it meets one
    composed: dict[int, NrtRewriteError] = field(default_factory=dict)

    def all_refusals(self) -> dict[int, NrtRewriteError]:
        """:attr:`refusals` and :attr:`composed`, in the order ``lower`` meets them."""
        return {**self.refusals, **self.composed}


def _plan_model(m, topo: Topology, override, policy, shown: set[int],
                host_cc: bool = False) -> ModelPlan:
    """``lower``'s plan of ``m`` without composing any rank: every trigger's selection, then
    per trigger the first of ``lower``'s checks that refuses it, in ``lower``'s order - its
    selection, its dtype and operands (lower.check_trigger), its engine's ``prepare``
    (lower.prepare_trigger: what only the engine's plan shows, as a mesh channel buffer past
    ENC_MESH_CHANNEL_BUF_MAX_SIZE, HIER legs past 32 channel ids),
    the TENSOR3D start_addr (limits.check_start_addr).  When no trigger is refused by its
    selection, lower's checks or its engine (else ``lower`` refuses at the first such:
    :attr:`ModelPlan.refusals` is in ``lower``'s order), the model-wide refusal in
    ``lower``'s order: the entry handshake's semaphores (entryslots), the memory layout with
    the scratch and gateway the engines' plans need (lower.lay_out_memory: the core window),
    the plan's limits (limits.check_plan, on the plans themselves: the start_addr among
    them, so a trigger refused only for it is planned; when the entry handshake or the
    memory layout refuses the model, ``lower`` meets no start_addr and no trigger is
    refused for one, and the trigger the model-wide refusal names takes it).

    Triggers of one request (op, dtype, group, sizes, ALU op, SBUF or not) whose operands
    share bytes alike are selected and prepared once: selection reads only the request, an
    engine's prepare the request and whether src and dst share bytes
    (apoverlap.operands_may_share); about 0.5 ms a request, then its engine's prepare.  The
    engines' plans are kept for the triggers in ``shown`` only (a HIER plan holds a plan per
    group of every leg), of the others their sizes.  ``host_cc``: ``lower``'s ``--host-cc``,
    under which the BD gate counts the legs (select's ``host_cc``) and the engines prepare."""
    from dataclasses import replace

    from nrtrewrite.apoverlap import operands_may_share
    from nrtrewrite.compose.algorithm import Prepared
    from nrtrewrite.entryslots import entry_post_slots
    from nrtrewrite.errors import SelectionError
    from nrtrewrite.limits import check_plan, check_start_addr
    from nrtrewrite.lower import (
        TriggerPlan, check_trigger, lay_out_memory_gated, prepare_trigger,
    )
    ctx = _plan_context(topo, host_cc)
    # (request with ordinal 0, operands share bytes) -> [selection or its error, TriggerPlan
    # with the sizes of its Prepared or its engine's error (None: not prepared), the
    # engine's plan when the request's first trigger is shown]
    done: dict[tuple, list] = {}
    out = ModelPlan(selections={}, refusals={}, plans={}, refusal=None)
    planned: list[TriggerPlan] = []
    # the triggers refused, by the check that refuses them: their selection, lower's checks
    # or their engine's prepare, the TENSOR3D start_addr (each in trigger order)
    unselected: dict[int, NrtRewriteError] = {}
    checked: dict[int, NrtRewriteError] = {}
    addressed: dict[int, NrtRewriteError] = {}

    # each reason held once: a refusal's reason (up to MAX_HELD_WHY_CHARS) is the same text
    # for many requests (an --algo quoted whole), so one object is kept per distinct text
    reasons: dict[str, str] = {}

    def held(err: NrtRewriteError) -> NrtRewriteError:
        err.reason = reasons.setdefault(err.reason, err.reason)
        return err

    def here(err: NrtRewriteError, t) -> NrtRewriteError:  # a request's error at trigger t
        return err.elsewhere(replace(err.where, **trigger_where(t)))  # (its reason shared)

    # a way out's --algo text -> the first trigger it stops (select.model_way_out), for
    # every refused request alike: one pass over the triggers a way, not one a request
    ways_stop: dict = {}

    def selected(t, spad: str | None = None) -> list:
        # (the request's cached [selection or error, plan, engine's plan]; a trigger whose
        # HIER the SPAD gate passes over is a request of its own: select.spad_pass_over)
        key = (replace(Request.from_trigger(t), ordinal=0), operands_may_share(t), spad)
        if key not in done:
            try:
                done[key] = [select(t, topo, override=override, policy=policy, strict=False,
                                    host_cc=host_cc, hier_refusal=spad), None, None]
            except NrtRewriteError as err:
                # (a HIER leg left none: its ways out held to every trigger, as lower's)
                # (where each way stops is kept for the model: ways_stop)
                err = model_way_out(err, m.triggers, topo, policy=policy, host_cc=host_cc,
                                    ways_stop=ways_stop, model=m)
                done[key] = [err.at(**trigger_where(t)), None, None]
        return done[key]

    def selection_of(t):  # (as select_all judges the SPAD entries: lower's selections)
        sel = selected(t)[0]
        return None if isinstance(sel, NrtRewriteError) or sel.alg == EncAlgType.INVALID \
            else sel
    gated = spad_pass_over(m.triggers, selection_of)
    for t in m.triggers:
        seen = selected(t, gated.get(t.ordinal))
        stage = unselected
        try:
            if isinstance(seen[0], NrtRewriteError):
                # (a selection error is placed at the trigger that made it: another
                # trigger of the request takes a copy at its own place)
                raise seen[0] if seen[0].where.trigger == t.ordinal else here(seen[0], t)
            sel = out.selections[t.ordinal] = replace(seen[0], trigger=t.ordinal)
            if sel.alg == EncAlgType.INVALID:  # what strict selection raises (select_all)
                raise SelectionError(sel.fallback_reason, **trigger_where(t))
            stage = checked
            check_trigger(t)
            if seen[1] is None:
                try:
                    tp = prepare_trigger(ctx, t, sel)
                except NrtRewriteError as err:
                    seen[1] = err
                    raise
                p = tp.prepared
                tp.prepared = Prepared(scratch_bytes=p.scratch_bytes, gw_bytes=p.gw_bytes,
                                       manifest={}, entries=p.entries,
                                       private_scratch_bytes=p.private_scratch_bytes)
                seen[1], seen[2] = tp, p.data if t.ordinal in shown else None
            elif isinstance(seen[1], NrtRewriteError):
                raise here(seen[1], t)
        except NrtRewriteError as err:
            stage[t.ordinal] = held(err)
            continue
        tp = seen[1]
        planned.append(TriggerPlan(trigger=t, selection=sel, algorithm=tp.algorithm,
                                   prepared=tp.prepared, group=tp.group, leader=tp.leader))
        if t.ordinal in shown and seen[2] is not None:
            out.plans[t.ordinal] = seen[2]
        try:  # (lower meets it in check_plan, after the model-wide checks below)
            check_start_addr(t)
        except NrtRewriteError as err:
            addressed[t.ordinal] = held(err)
    # lower selects every trigger first (select_all), then checks and prepares each
    out.refusals = {**unselected, **checked, **addressed}
    if unselected or checked:
        return out
    try:
        entry_post_slots([t.replica_group for t in m.triggers], topo.ranks_per_node,
                         lambda i: trigger_where(m.triggers[i]))
    except LimitError as err:  # lower stops here: it meets no start_addr
        out.refusal, out.refusals = err, {}
        return out
    def replan(tp, why: str):
        # (as lower re-plans a HIER the window gate passes over: lower.lay_out_memory_gated)
        sel = select(tp.trigger, topo, override=override, policy=policy, strict=False,
                     host_cc=host_cc, hier_refusal=why)
        if sel.alg == EncAlgType.INVALID:
            raise SelectionError(sel.fallback_reason, **trigger_where(tp.trigger))
        return prepare_trigger(ctx, tp.trigger, sel)
    try:
        before = list(planned)
        lay_out_memory_gated(m, topo, planned, replan)
        for old, new in zip(before, planned):
            if new is not old:
                out.selections[new.trigger.ordinal] = new.selection
                if new.trigger.ordinal in shown:
                    out.plans[new.trigger.ordinal] = new.prepared.data
    except LimitError as err:  # lower stops here: it meets no start_addr
        out.refusal, out.refusals = err, {}
        try:  # the vars alone (lower's line is the one above, with or without scratch)
            build_memory_map(m, 0, 0, cores_per_device=topo.ranks_per_device)
        except LimitError:
            out.vars_refused = True
        return out
    try:
        check_plan(SimpleNamespace(triggers=planned))
    except LimitError as err:
        out.refusal = err
    if out.refusal is None and not addressed:  # lower composes the ranks
        out.composed = _composed_refusals(planned, topo, policy, host_cc,
                                          override.source if override else "--algo")
    return out


def _composed_refusals(planned: list, topo: Topology, policy, host_cc: bool,
                       algo_source: str) -> dict[int, NrtRewriteError]:
    """:attr:`ModelPlan.composed` of the triggers ``planned`` (``TriggerPlan``): each one
    whose legs, lowered as its selection, ``lower`` refuses for more than TPINC_MAX_BDS BDs
    though the BD gate did not count them (select.lowered_bd_refusal: a forced engine), with
    ``lower``'s line (the emitter's words, lower.tpinc_refusal's, at the first rank it meets
    the leg), in ``lower``'s order: rank by rank, a rank's triggers in order."""
    from nrtrewrite.lower import tpinc_refusal
    from nrtrewrite.select import lowered_bd_refusal
    found = []
    for tp in planned:
        over = lowered_bd_refusal(tp.trigger, tp.selection, topo, policy, host_cc)
        if over is not None:
            why = over.text()
            why = tpinc_refusal(why, tp.trigger, tp.selection, algo_source) or why
            found.append((over.rank, tp.trigger.ordinal, LimitError(
                why, rank=over.rank, **trigger_where(tp.trigger))))
    return {ordinal: err for _rank, ordinal, err in sorted(found, key=lambda f: f[:2])}


def _refused_not_shown(mp: ModelPlan, shown: set[int]) -> list[dict]:
    """``{trigger, refusal}`` of every trigger of the model not in ``shown`` (not asked for with
    ``--trigger``, or skipped by ``--rank``) that ``lower`` refuses for a reason of its own
    (:func:`_plan_model`), ``refusal`` the line ``lower`` refuses it with, without the
    model's path, as a shown trigger's record is INVALID with it; in the order ``lower``
    meets them (:attr:`ModelPlan.refusals`), so the first is the one it would name."""
    return [{"trigger": ordinal, "refusal": str(err)}
            for ordinal, err in mp.all_refusals().items() if ordinal not in shown]


def _refused_head(refused: list[dict]) -> str:
    """The head of the note on the triggers not shown that ``lower`` refuses (the first one's
    refusal follows it): their ordinals as runs (``3..9 12``, as compress writes ranks),
    the first 8 runs."""
    if len(refused) == 1:
        return f"lower refuses trigger {refused[0]['trigger']}, not shown:"
    runs = compress(sorted(r["trigger"] for r in refused)).split()
    listed = " ".join(runs[:8]) + (" ..." if len(runs) > 8 else "")
    return f"lower refuses {len(refused)} triggers not shown ({listed}), the first:"


# -- rich presentation ---------------------------------------------------------------------

def _yes(flag: bool) -> str:
    return "[green]yes[/]" if flag else "[red]no[/]"


def _print_record(console: Console, rec: dict, topo: Topology) -> None:
    where = plain("")
    if "subgraph" in rec:
        where = plain(f"  {rec['subgraph']}/{rec['engine']} #{rec['index']}")
    nodes = rec["nodes"]
    span = (f"node {nodes[0]}" if len(nodes) == 1 else
            f"{len(nodes)} nodes x {rec['local_rank_n']}")
    heading = styled(f"[bold]trigger {rec['trigger']}[/]", where,
                     f"  {rec['op']} {rec['dtype']} "
                     f"{fmt_bytes(rec['bytes'])}{' (sbuf)' if rec['sbuf'] else ''}  "
                     f"{counted(rec['group_size'], 'rank')} ({span})")
    if heading.cell_len + 2 <= console.width:
        console.rule(heading, align="left")
    else:  # (rich's rule cuts a longer title with "…": the heading whole, the rule under it)
        console.print(heading)
        console.rule()
    console.print(Text(f"group: {compress(rec['group'])}", style="dim"))

    table = Table(title="candidates (every gate runs; precedence order)", title_justify="left",
                  show_edge=False, pad_edge=False)
    for col in ("", "engine", "predicate", "legal", "window", "lowerable", "reason"):
        table.add_column(col, overflow="fold")
    for c in rec["candidates"]:
        table.add_row("->" if c["chosen"] else "", f"{c['algorithm']} ({c['value']})",
                      c["predicate"], _yes(c["legal"]),
                      _yes(c["in_window"]) if c["legal"] else "-", _yes(c["lowerable"]),
                      plain_line(c["reason"]))
    print_plain(console, table)

    pol, low = rec["policy"], rec["lowered"]
    console.print(styled(f"[bold]policy choice:[/] {pol['algorithm']} -- ",
                         plain_line(pol["reason"])))
    legs = Table(show_edge=False, pad_edge=False, title_justify="left")
    for col in ("leg", "op", "engine", "sub-type", "groups", "bytes", "reason"):
        legs.add_column(col, overflow="fold")
    for leg in pol["legs"]:
        groups = leg["groups"]
        ranks = counted(len(groups[0]), "rank")
        gtxt = f"{len(groups)} x {ranks}" if len(groups) > 1 else ranks
        legs.add_row(leg["name"], leg["op"], leg["algorithm"], leg["sub_type"] or "-", gtxt,
                     fmt_bytes(leg["bytes"]), plain_line(leg["reason"]))
    print_plain(console, legs)
    if pol["hier_log"]:
        console.print(Text(pol["hier_log"], style="dim"))
    meta = f" (metaring type {low['metaring_type']})" if low["metaring_type"] else ""
    console.print(f"[bold]lowered:[/] {low['algorithm']}{meta}"
                  + (f" over legs {', '.join(leg['name'] for leg in low['legs'])}"
                     if low["legs"] else ""), highlight=False)
    if low["fallback_reason"]:
        label = ("[red]cannot be lowered:[/]" if low["algorithm"] == "INVALID"
                 else "[yellow]fallback:[/]")
        console.print(styled(f"  {label} ", plain_line(low["fallback_reason"])))

    ch = rec["channels"]
    console.print(styled(f"[bold]channels:[/] {ch['count']} -- ", plain_line(ch["reason"])))
    kanga = low["algorithm"] == "KANGARING"
    if kanga and ch["rings"]:
        console.print(Text("KANGARING: a channel's ring is the cycle of its primaries; each "
                           "secondary exchanges data with its unit's primary only", style="dim"))
    if ch["rings"]:
        rt = Table(show_edge=False, pad_edge=False)
        # SINGLE_CYCLE_RING: which channel of a pair runs the ring CW, which CCW (--json's
        # ``direction``)
        direction = ("direction",) if any("direction" in r for r in ch["rings"]) else ()
        if "rank" in rec and kanga:
            for col in ("ch", "role", "prev", "next", "primary", "unit", "dup"):
                rt.add_column(col, overflow="fold")
            for r in ch["rings"]:
                # a secondary's prev and next are its unit's primary (docs/TOPOLOGY.md §4,
                # its enc_kangaring view, as the kangaring paths table shows it): the record
                # has them (_kangaring_ring)
                rt.add_row(str(r["channel"]), r["role"], str(r["prev"]), str(r["next"]),
                           str(r["unit"][0]), " ".join(map(str, r["unit"])),
                           "dup" if r["duplicate"] else "")
        elif "rank" in rec:
            for col in ("ch", *direction, "prev", "next", "user_ranks", "dup"):
                rt.add_column(col, overflow="fold")
            for r in ch["rings"]:
                rt.add_row(str(r["channel"]), *_direction(r, direction), str(r["prev"]),
                           str(r["next"]), compress(r["user_ranks"]) or "(empty channel)",
                           "dup" if r["duplicate"] else "")
        else:
            for col in ("ch", *direction, "ring order", "hops dev/link/c2c/net", "dup"):
                rt.add_column(col, overflow="fold")
            for r in ch["rings"]:
                hops = "/".join(str(r["hops"][loc.name]) for loc in EdgeLocality)
                rt.add_row(str(r["channel"]), *_direction(r, direction),
                           compress(r["order"]) if r["order"] is not None else "(empty channel)",
                           hops, "dup" if r["duplicate"] else "")
        print_plain(console, rt)
    if "hier" in rec:
        ht = Table(show_edge=False, pad_edge=False)
        for col in ("leg", "engine", "groups", "channel ids"):
            ht.add_column(col, overflow="fold")
        for leg in rec["hier"]["legs"]:
            ht.add_row(leg["name"], leg["algorithm"], str(leg["groups"]), _id_range(leg))
        print_plain(console, ht)
    for key in ("mesh", "rdh"):
        if key in rec:
            m = rec[key]
            console.print(f"[bold]{key}:[/] " + ", ".join(
                f"{k} {v}" for k, v in m.items() if k not in ("rank", "device_groups", "folded")),
                highlight=False)
            if m.get("folded"):
                console.print("  folded (extra -> core): " + " ".join(
                    f"{a}->{b}" for a, b in m["folded"]), highlight=False)
            if "device_groups" in m:
                console.print("  device groups: " + "; ".join(
                    f"node {g['node']} device {g['device']}: {compress(g['ranks'])}"
                    for g in m["device_groups"]), highlight=False)
            if "rank" in m and "steps" in m["rank"]:
                st = Table(show_edge=False, pad_edge=False)
                # one column per key of a step (--json's), empty where the step has none:
                # halving keep and send, doubling send and receive, fold / unfold one of
                # send and receive (a "keep/send" column read send as keep on unfold)
                for col in ("stage", "event", "partner", "keep", "send", "receive"):
                    st.add_column(col)
                def span(r) -> str:  # an element range [start, stop), as schedule shows it
                    return f"[{r[0]}, {r[1]})" if isinstance(r, list) and len(r) == 2 else \
                        str(r or "")

                for s in m["rank"]["steps"]:
                    st.add_row(s["stage"], s.get("event", ""), str(s["partner"]),
                               *(span(s.get(k)) for k in ("keep", "send", "receive")))
                print_plain(console, st)
            elif "rank" in m:
                r = m["rank"]
                if isinstance(r, dict):  # a mesh rank's peers: same device, over the network
                    text = "; ".join(f"{k.replace('_', ' ')} "
                                     f"{compress(v) if isinstance(v, list) and v else v or '-'}"
                                     for k, v in r.items())
                else:
                    text = str(r)
                console.print(f"  rank peers: {text}", highlight=False)
    if "kangaring" in rec:
        kg = rec["kangaring"]
        console.print(f"[bold]kangaring paths[/] ({kg['note']}) for group "
                      f"{compress(kg['group'])}:", highlight=False)
        kt = Table(show_edge=False, pad_edge=False)
        legs = any(k["leg"] != "flat" for k in kg["channels"])  # HIER: the leg of a channel
        lead = ("leg", "ch") if legs else ("ch",)

        def head(k: dict) -> tuple[str, ...]:
            return (k["leg"], str(k["channel"])) if legs else (str(k["channel"]),)
        if "rank" in rec and kg["channels"] and "is_primary" in kg["channels"][0]:
            for col in (*lead, "primary", "prev", "next", "port", "peer_rmtv", "peer_rmtv2",
                        "peer_local", "next_peer_rmtv"):
                kt.add_column(col)
            for k in kg["channels"]:
                kt.add_row(*head(k), _yes(k["is_primary"]), *(str(k[f]) for f in (
                    "prev", "next", "port", "peer_rmtv", "peer_rmtv2", "peer_local",
                    "next_peer_rmtv")))
        else:
            for col in lead:
                kt.add_column(col)
            kt.add_column("primaries", overflow="fold")
            kt.add_column("logical_path (p s.. p s..)", overflow="fold")
            for k in kg["channels"]:
                kt.add_row(*head(k), compress(k["primaries"]),
                           " ".join(map(str, k["logical_path"])))
        print_plain(console, kt)


# -- the command ---------------------------------------------------------------------------

def _read_model(path: str, verify_hash: bool):
    from nrtrewrite.neff.reader import read_model
    return read_model(path, verify_hash=verify_hash)


def _default_lnc(spec: str | None) -> int:
    if spec is None:
        return 2
    if spec.partition(":")[0] == "trn1":
        return 1
    if spec.partition(":")[0] in PRESETS:
        return 2
    try:  # (the file's checks first: a FIFO, /dev/zero or a file of gigabytes is not read)
        doc = read_topology_file(spec)
    except NrtRewriteError:
        return 1  # load_topology reports the real problem
    if not isinstance(doc, dict):
        return 1  # load_topology reports the real problem
    if isinstance(doc.get("lnc_size"), int) and not isinstance(doc["lnc_size"], bool):
        return doc["lnc_size"]
    try:  # the sizes the file's platform supports, its preset's or the default ones
        sizes = platform_from_json(doc, where=spec).lnc_sizes
    except NrtRewriteError:
        return 1  # load_topology reports the real problem
    return 2 if 2 in sizes else sizes[0]


def _json_pieces(doc: dict, listed: str):
    """The text of ``json.dumps(doc, indent=2)`` and a newline, in pieces: the list
    ``doc[listed]`` an item at a time (``explain --json``'s triggers: the document whole
    took about 7 times its size in memory, review 57j), every other value at once.  The
    same bytes: a value nested one level deeper has each of its lines indented two more
    spaces (its strings hold no newline: ``json.dumps`` escapes it).  ``doc[listed]`` may be
    a :class:`_RecordSpool` instead, its items' pieces made already: it is yielded itself,
    for :func:`echo_whole_pieces` to write.  An empty ``doc`` is ``{}``, as ``json.dumps``
    gives it (until 2026-12-07 ``{`` and ``}`` on two lines; explain never writes one)."""
    if not doc:
        yield "{}\n"
        return
    yield "{"
    for i, (key, value) in enumerate(doc.items()):
        yield ("," if i else "") + "\n  " + json.dumps(key) + ": "
        if key == listed and isinstance(value, _RecordSpool):
            if value.count:
                yield value
                yield "\n  ]"
            else:
                yield "[]"
        elif key == listed and value:
            for k, item in enumerate(value):
                yield _list_item(k, item)
            yield "\n  ]"
        else:
            yield json.dumps(value, indent=2).replace("\n", "\n  ")
    yield "\n}\n"


def _list_item(k: int, item) -> str:
    """Item ``k`` of a listed value as ``json.dumps(doc, indent=2)`` writes it one level in:
    after ``[`` (the first) or ``,``, its lines indented four spaces (:func:`_json_pieces`,
    :class:`_RecordSpool`)."""
    return ("," if k else "[") + "\n    " + json.dumps(item, indent=2).replace("\n", "\n    ")


#: The bytes of trigger records' text a :class:`_RecordSpool` holds in memory before it moves
#: them to a temporary file.
SPOOL_IN_MEMORY = 8 << 20


class _RecordSpool:
    """``explain --json``'s trigger records' text (the list's items as :func:`_json_pieces`
    makes them, encoded as stdout encodes them), added as each record is made, so that a
    record is dropped once its text is made and the peak memory is one trigger's record and
    text, not every record's (until 2026-12-07: 167 MB for a 50 MB document).  Past
    :data:`SPOOL_IN_MEMORY` bytes they go to an unnamed temporary file (``TemporaryFile``
    in :func:`nrtrewrite.bundle.temp_root`: none is left behind, even by a SIGKILL), which
    :meth:`write_to` copies to stdout through a buffer made before: every record's text is
    made before the first byte is written, so an error meanwhile (out of memory) is still
    the error document alone.  Where no temporary file can be made or written (no usable
    folder, a full disk) the texts stay in memory, as before, and the command goes on."""

    _CHUNK = 1 << 20

    def __init__(self) -> None:
        self.encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        self.errors = getattr(sys.stdout, "errors", None) or "strict"
        self.count = 0
        self.parts: list[bytes | bytearray] = []  # (held in memory)
        self.held = 0
        self.file = None  # (the temporary file, unbuffered, and the bytes in it)
        self.on_disk = 0
        self.tried = False
        self._rest = b""  # (what a failed write left unwritten)

    def add(self, record: dict) -> None:
        self._put(_list_item(self.count, record).encode(self.encoding, self.errors))
        self.count += 1

    def _put(self, data: bytes) -> None:
        if self.file is not None:
            if self._write(data):
                return
            data = self._back_to_memory(self._rest)
        self.parts.append(data)
        self.held += len(data)
        if self.held > SPOOL_IN_MEMORY and not self.tried:
            self._to_file()

    def _write(self, data) -> bool:
        """``data`` appended to the file; False (what was written kept counted) where it
        cannot be."""
        view = memoryview(data)
        try:
            while view:
                n = self.file.write(view)
                self.on_disk += n
                view = view[n:]
        except OSError:
            self._rest = bytes(view)
            return False
        return True

    def _to_file(self) -> None:
        self.tried = True
        try:
            self.file = tempfile.TemporaryFile(dir=temp_root(), buffering=0)
        except OSError:
            return  # (kept in memory)
        parts, self.parts, self.held = self.parts, [], 0
        for k, data in enumerate(parts):
            if not self._write(data):
                self.parts = [self._back_to_memory(self._rest)] + parts[k + 1:]
                self.held = sum(map(len, self.parts))
                return

    def _back_to_memory(self, rest: bytes) -> bytearray:
        """The file's bytes read back, then ``rest`` (what could not be written), as one
        part held in memory; the file closed (:meth:`_read_back`: every byte written, or a
        :class:`ResourceError`, never a cut document)."""
        fh, self.file = self.file, None
        whole = bytearray(self.on_disk + len(rest))
        try:
            got = 0
            for chunk in self._read_back(fh):
                whole[got:got + len(chunk)] = chunk
                got += len(chunk)
        finally:
            fh.close()
        whole[self.on_disk:] = rest
        self.on_disk = 0
        return whole

    def check_readable(self) -> None:
        """The temporary file read through once, before the document's first byte is
        written: a read that fails (an I/O error) or a file that ends early is then a
        :class:`ResourceError` (status 71) and stdout the error document alone, where it
        would come after a cut document from :meth:`write_to` (closing reading 58w); the
        copy then reads what the page cache holds."""
        if self.file is not None:
            for _chunk in self._read_back(self.file):
                pass

    def _read_back(self, fh):
        """The :attr:`on_disk` bytes of the file ``fh``, from its start, a chunk at a time
        (views of one buffer): read until every byte written is back, as one read(2) may
        give fewer (Linux: at most 0x7ffff000 bytes a call); a read that fails or a file
        that ends early is a :class:`ResourceError`: nothing was written yet."""
        buf = bytearray(min(self._CHUNK, self.on_disk) or 1)
        view, got = memoryview(buf), 0
        try:
            fh.seek(0)
            while got < self.on_disk:
                n = fh.readinto(view[:min(len(buf), self.on_disk - got)])
                if not n:
                    raise ResourceError(f"explain --json's temporary file of its records gave "
                                        f"back {got} of the {self.on_disk} bytes written to it; "
                                        "nothing was written")
                got += n
                yield view[:n]
        except OSError as e:
            raise ResourceError(f"explain --json's temporary file of its records could not be "
                                f"read back ({e.strerror or e}); nothing was written") from e

    def write_to(self, out) -> None:
        """Everything held written through the :class:`nrtrewrite.cli.WholeWriter` ``out``:
        the file's bytes a chunk at a time into one buffer, then the parts in memory
        (:meth:`check_readable` read the file through before the document began)."""
        if self.file is not None:
            buf = bytearray(self._CHUNK)
            view = memoryview(buf)
            self.file.seek(0)
            left = self.on_disk
            while left and (n := self.file.readinto(buf)):
                out.write_bytes(view[:min(n, left)])
                left -= min(n, left)
        for data in self.parts:
            out.write_bytes(data)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        self.parts = []


def _topology_json(topo: Topology) -> dict:
    """``--json``'s ``topology``: a platform that is not exactly a preset whole, so that the
    object loads back as ``--topology`` (docs/TOPOLOGY.md §2)."""
    return with_platform({"name": topo.name, "source": topo.source,
                          "platform": topo.platform.name,
                          "hw_generation": topo.platform.hw_generation,
                          "nodes": topo.nodes, "lnc_size": topo.lnc_size,
                          "ranks_per_device": topo.ranks_per_device,
                          "ranks_per_node": topo.ranks_per_node,
                          "world_size": topo.world_size}, topo.platform)


#: Triggers above which ``explain MODEL`` prints one overview row per trigger unless
#: --trigger or --all (1,000 triggers in full: 95,000 lines in 12 s).
OVERVIEW_TRIGGERS = 64


class _ExplainCommand(JsonErrorCommand):
    """``explain``: with ``--json``, an error is ``{"model", "error", "warnings", "triggers":
    []}`` on stdout (then the error line on stderr, exit 2)."""

    carries_warnings = True  # (the warnings given, in its error document too)

    @staticmethod
    def error_document(params: dict, why: str) -> dict:
        return {"model": path_text(params.get("model")), "error": why, "triggers": []}


#: ``explain``'s ``--help`` text (not a docstring: see :data:`nrtrewrite.cli.MAIN_HELP`)
EXPLAIN_HELP = ("Explain the algorithm selection, legs, channels and rings of MODEL's "
                "collectives, or (without MODEL) of one collective given by --op/--bytes/--ranks.")


class _LncChoice(click.Choice):
    """``--lnc``'s ``1`` or ``2``, read as an integer option reads its value (ASCII digits,
    an optional sign, white space around it ignored: ``' 1'``, ``+2``), where click's
    ``Choice`` refused ``' 1'`` (until 2026-12-06)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and too_many_digits(value) is None:
            with contextlib.suppress(ValueError, click.BadParameter):
                return super().convert(str(ascii_int(value)), param, ctx)
        return super().convert(value, param, ctx)  # (a refusal quotes the value given)


class _OptionalModel(click.Argument):
    """``explain``'s optional ``MODEL``: named ``'MODEL'`` in click's errors, as docs/CLI.md
    shows it (``[MODEL]``, the usage line's notation, until 2026-12-06)."""

    def get_error_hint(self, ctx) -> str:
        return "'MODEL'"


@main.command("explain", cls=_ExplainCommand, help=EXPLAIN_HELP)
@click.argument("model", cls=_OptionalModel, required=False,
                type=PathArg(exists=True, dir_okay=False))
@click.option("--rank", cls=OneValue, type=Int(), default=None,
              help="Show this rank's enc_ring per channel (and skip triggers without it).")
@click.option("--topology", cls=OneValue, default=None, metavar="T", callback=no_dash,
              help="trn1, trn2, trn1:nodes=N, trn2:nodes=N or a topology JSON file "
                   "(default: trn2 sized to the model or the ranks).")
@click.option("--algo", cls=OneValue, twice=ALGO_TWICE, default=None, metavar="A",
              help="Algorithm override, NCCL-like: ring, ^mesh, allreduce:kangaring;allgather:ring,"
                   " inter_allr:ring (also NRTREWRITE_ALGO).")
@click.option("--host-cc", is_flag=True,
              help="Select as lower --host-cc does (its BD gate counts the host-CC final "
                   "reduce step).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (layout: docs/CLI.md).")
@click.option("--trigger", "only", type=Int(), multiple=True, metavar="K",
              help="Only this trigger ordinal (repeatable).")
@click.option("--all", "show_all", is_flag=True,
              help=f"Explain every trigger in full even for a model of more than "
                   f"{OVERVIEW_TRIGGERS} (default: one overview row each).")
@click.option("--no-verify-hash", is_flag=True,
              help="Do not check the NEFF header hash (a warning is printed).")
@click.option("--op", cls=OneValue, default=None, metavar="OP",
              help="Model-less: the collective (allreduce, allgather, reduce_scatter, alltoall, "
                   "broadcast, reduce).")
@click.option("--bytes", "nbytes", cls=OneValue, default=None, metavar="SIZE",
              help="Model-less: message size (all-reduce buffer, all-gather output, "
                   "reduce-scatter input), e.g. 64MiB.")
@click.option("--dtype", cls=OneValue, default="bf16", show_default=True, metavar="D",
              help="Model-less: element type, a DType name (bf16, fp16, fp32, fp8_e4, ...).")
@click.option("--ranks", "nranks", cls=OneValue, type=Int(), default=None,
              help="Model-less: the group is ranks 0..N-1.")
@click.option("--group", "group_text", cls=OneValue, default=None, metavar="LIST",
              help="Model-less: the group as a rank list, e.g. 0-63,128-191 or 0,4,8.")
@click.option("--nodes", cls=OneValue, type=Int(), default=None,
              help="Model-less: number of nodes of the preset topology.")
@click.option("--lnc", cls=OneValue, type=_LncChoice(["1", "2"]), default=None,
              help="Model-less: LNC size (default: 2 on trn2, 1 on trn1).")
@click.option("--sbuf", is_flag=True, help="Model-less: operands in SBUF (the _sbuf windows).")
@click.option("--alu", cls=OneValue, type=click.Choice(["add", "max", "min"], case_sensitive=False),
              default=None, help="Model-less: the reduction's ALU op (default: add; KANGARING "
                                 "reduces with ADD only).")
def explain_cmd(model, rank, topology, algo, host_cc, as_json, only, show_all, no_verify_hash,
                op, nbytes, dtype, nranks, group_text, nodes, lnc, sbuf, alu):
    """The command (its help: :data:`EXPLAIN_HELP`)."""
    try:
        override = parse_algo_override(algo)
    except NrtRewriteError as err:  # named with the model, as lower and schedule name it
        raise (err.at(file=model) if model is not None else err) from None
    policy: Policy = DEFAULT_POLICY
    warnings: list[str] = []  # the warning lines to give (--json's: given_warnings)
    # --dtype has a default: given is what the command line (or the environment) set
    dtype_given = click.get_current_context().get_parameter_source("dtype") not in (
        ParameterSource.DEFAULT, None)
    if model is not None:
        given = options_given(("--op", op is not None), ("--bytes", nbytes is not None),
                              ("--dtype", dtype_given), ("--ranks", nranks is not None),
                              ("--group", group_text is not None), ("--nodes", nodes is not None),
                              ("--lnc", lnc is not None), ("--sbuf", sbuf),
                              ("--alu", alu is not None))
        if given:
            raise click.UsageError(f"{and_list(given)} {verb(given, 'describes', 'describe')} a "
                                   "collective without a MODEL; give one or the other")
        m = _read_model(model, not no_verify_hash)
        err_console = stderr_console()
        try:  # (named by the model, as lower and schedule name it: load_and_plan)
            topo = load_topology(topology, world=m.world, lnc_size=m.lnc_size)
        except NrtRewriteError as err:
            raise err.at(file=model) from None
        n = len(m.triggers)
        missing = sorted(k for k in set(only) if not 0 <= k < n)
        if missing:
            # as schedule says it, after what its plan of the triggers asked for refuses
            # (every trigger's selection under an --algo, the entry handshake, the memory
            # layout: the vars past the core window, the limits; docs/CLI.md "schedule")
            from nrtrewrite.limits import check_plan
            from nrtrewrite.lower import LowerOptions, plan_lowering
            try:
                check_plan(plan_lowering(m, LowerOptions(topology=topology, algo=algo,
                                                         host_cc=host_cc), only=set(only)))
            except NrtRewriteError as err:
                raise err.at(file=model) from None
            raise ValidationError(f"no trigger {missing[0]} (the model has {n}"
                                  f"{f': 0..{n - 1}' if n else ''})", file=model)
        items = []
        for t in m.triggers:
            if only and t.ordinal not in only:
                continue
            meta = {"subgraph": t.subgraph, "engine": t.engine, "index": t.index,
                    "replica_group_id": t.replica_group_id, "num_elements": t.num_elements}
            items.append((t, meta))
        from nrtrewrite.lower import gc_paused
        with gc_paused():  # as lower plans (hundreds of thousands of long-lived objects)
            mp = _plan_model(m, topo, override, policy, {
                t.ordinal for t, _meta in items if rank is None or rank in t.replica_group},
                host_cc)
        # explain refuses where lower does, with lower's line: a trigger shown whose selection
        # fails (lower selects every trigger first and refuses at the first that fails, shown
        # or not: mp.refusals is in lower's order), the vars past the core window (lower
        # lays out memory after every trigger's selection, checks and prepare)
        if any(t.ordinal not in mp.selections for t, _meta in items
               if rank is None or rank in t.replica_group):
            raise next(iter(mp.refusals.values())).at(file=model)
        if mp.vars_refused:
            raise mp.refusal.at(file=model)
        outside = rank is not None and rank not in m.world
        if outside:  # (lower checks its ranks after its plan)
            # nothing is shown: the refusal lower meets first, the model-wide one (its entry
            # handshake, memory layout, check_plan's limits: mp.refusal), else the first
            # trigger's (its selection, dtype, operands, engine: mp.refusals, in lower's
            # order), else the rank's (after the warnings, as lower gives it)
            first = (mp.refusal if mp.refusal is not None
                     else next(iter(mp.refusals.values()), None))
            if first is not None:
                raise first.at(file=model)
        # the warnings lower gives for the same model, in its order (--no-verify-hash's, the
        # --algo clauses that govern none of the model's triggers, a model without triggers
        # that looks lowered), where lower prints them: once its plan is made, so none when
        # lower refuses a trigger or the whole model, nor before a refusal of the topology or
        # an unknown --trigger (schedule's, made before it plans, is after its plan too).
        # Until 2026-12-06 explain printed them before the model-wide refusal lower meets
        # instead, the idle clauses last and only when every trigger was shown.
        warnings = []
        if mp.refusal is None and not mp.refusals:
            warnings = [unverified_hash_warning(model)] if no_verify_hash else []
            # (lower's select_all: every trigger selected, in trigger order)
            warnings += idle_clauses(override, mp.selections.values(), model)
            if (note := no_trigger_warning(m, "explain")) is not None:
                warnings.append(note)
        for w in warnings:
            warn(err_console, w)
        if outside:
            from nrtrewrite.lower import world_refusal
            raise world_refusal(m.world, rank, model)
        refusal = mp.refusal
    else:
        given = options_given(("--trigger", only), ("--all", show_all),
                              ("--no-verify-hash", no_verify_hash))
        if given:
            raise click.UsageError(f"{and_list(given)} {verb(given, 'chooses', 'choose')} among "
                                   "a MODEL's triggers; without one, --op/--bytes describe one "
                                   "collective")
        if op is None or nbytes is None:
            raise click.UsageError("give MODEL, or --op and --bytes with --ranks or --group")
        if (nranks is None) == (group_text is None):
            raise click.UsageError("give exactly one of --ranks N and --group LIST")
        if nranks is not None and nranks < 1:
            raise click.UsageError("--ranks must be >= 1")
        if nranks is not None and nranks > MAX_TOPOLOGY_RANKS:  # before the group is built
            raise LimitError(f"ranks 0..{nranks - 1} need a topology of {nranks} ranks, more "
                             f"than {MAX_TOPOLOGY_RANKS} (MAX_TOPOLOGY_RANKS)", field="--ranks")
        group = tuple(range(nranks)) if nranks is not None else parse_ranks(group_text)
        spec = topology
        if nodes is not None:
            if nodes < 1:
                raise click.UsageError("--nodes must be >= 1")
            base = topology or "trn2"
            preset, _, preset_options = base.partition(":")
            if preset in PRESETS and "nodes" in preset_options:
                raise click.UsageError(f"--nodes and --topology {escape_path(base)} both "
                                       "give the node count; give it once (--topology "
                                       f"{preset} --nodes {nodes}, or --topology "
                                       f"{preset}:nodes={nodes})")
            if preset not in PRESETS:
                raise click.UsageError("--nodes combines with a preset --topology (trn1, trn2); "
                                       "a topology file sets its own nodes")
            spec = f"{base}:nodes={nodes}"
        lnc_size = int(lnc) if lnc else _default_lnc(topology)
        topo = load_topology(spec, world=group, lnc_size=lnc_size,
                             lnc_of="--lnc is" if lnc else "the default --lnc is")
        try:
            dt = DType[dtype.strip().upper()]
        except KeyError:
            names = [d.name.lower() for d in DType]
            hint = did_you_mean(dtype.strip().lower(), names, ", ".join(names))
            raise ValidationError(f"unknown dtype {dtype!r}{hint}", field="--dtype") from None
        opv = parse_op_name(op, field="--op")
        size = parse_size(nbytes)
        _check_size(opv, size, dt, len(group))
        alu_op = None
        if alu is not None:
            if opv not in _REDUCTIONS:
                raise click.UsageError(f"--alu applies to a reduction; {opv.name} has no ALU op")
            alu_op = AluOp[alu.upper()]
        req = Request.for_op(opv, dt, group, size, sbuf=sbuf, alu=alu_op)
        items = [(req, {})]
        refusal, mp = None, None
    # the trigger at which lower refuses the whole model, if a trigger is named
    model_why = ({refusal.where.trigger: refusal.why}
                 if refusal is not None and refusal.where.trigger is not None else {})

    if rank is not None and rank not in topo.ranks:  # (with a model: its world, above)
        raise ValidationError(topo.rank_refusal(rank), field="--rank")
    records, skipped, sels = [], [], []
    # --json: each record's text made as the record is, the record then dropped
    spool = _RecordSpool() if as_json else None
    for item, meta in items:
        req_group = item.group if isinstance(item, Request) else item.replica_group
        if rank is not None and rank not in req_group:
            skipped.append(item.ordinal)
            continue
        if isinstance(item, Request):  # model-less: its engine prepares here
            sel = not_lowerable(select(item, topo, override=override, policy=policy,
                                       strict=False, host_cc=host_cc))
            plan = None
            if sel.alg != EncAlgType.INVALID:
                why, plan = _engine_refusal(topo, plan_trigger(sel, item), sel, host_cc)
                if why is not None:
                    sel = not_lowered(sel, why)
        else:
            # lower's refusal of the trigger (its first check that fails), else the
            # model-wide one that names it
            err = mp.all_refusals().get(item.ordinal)
            why = err.why if err is not None else model_why.get(item.ordinal)
            if err is not None and err.where.rank is not None:  # (composing: lower's rank)
                why = f"rank {err.where.rank}: {why}"
            sel = mp.selections[item.ordinal]
            if why is not None and sel.alg != EncAlgType.INVALID:
                sel = not_lowered(sel, why)
            plan = mp.plans.pop(item.ordinal, None)  # (freed once shown)
        sels.append(sel)
        try:
            record = explain_selection(sel, topo, rank=rank, meta=meta, source=item,
                                       plan=plan, host_cc=host_cc)
        except NrtRewriteError as err:
            if isinstance(item, Request):  # model-less: no place to name
                raise
            raise err.at(**trigger_where(item)).at(file=model)
        if spool is not None:
            spool.add(record)
        else:
            records.append(record)
        del record

    refused: list[dict] = []  # the triggers not shown that lower refuses
    if model is not None and len(sels) < len(m.triggers):
        refused = _refused_not_shown(mp, {s.trigger for s in sels})
    if as_json:
        out = {"model": path_text(model), "topology": _topology_json(topo),
               "override": override.text if override else None,
               "override_source": override.source if override else None,
               "rank": rank,
               "policy": {"lowerable": sorted(a.name for a in policy.lowerable),
                          "precedence": [a.name for a in policy.precedence]},
               "model_refusal": str(refusal) if refusal is not None else None,
               "refused_not_shown": refused,
               # the warnings given on stderr, each its line's text after ``nrtrewrite:
               # warning: `` cut as the line is (docs/CLI.md "Warnings under --json")
               "warnings": given_warnings(),
               "triggers": spool, "skipped_triggers": skipped}
        # every piece's text made before the first is written (the records' in the spool):
        # an error meanwhile (out of memory) is then the error document alone, not one
        # after a cut document
        try:
            pieces = list(_json_pieces(out, "triggers"))
            spool.check_readable()
            echo_whole_pieces(pieces)
        finally:
            spool.close()
        return
    console = stdout_console()
    head = f"{topo.title} ({topo.nodes} node(s), lnc {topo.lnc_size}, " \
           f"{topo.ranks_per_node} ranks per node, NeuronCore-v{topo.platform.hw_generation})"
    if override:
        head += f"; override {override.source}={override.text!r}"
    if host_cc:  # (lower's manifest records it as options.host_cc)
        head += "; --host-cc"
    # (the name escaped, the override repr'd; one line, never wrapped: a topology file's
    # path whole, docs/CLI.md "Paths in the output"; wrapped at 132 until 2026-12-07)
    console.print(plain_line(head), highlight=False, soft_wrap=True)
    if refusal is not None:
        console.print(styled("[red]lower refuses the whole model:[/] ", plain_line(str(refusal))),
                      highlight=False, soft_wrap=True)  # one line, never wrapped
    if rank is not None and skipped:
        console.print(f"rank {rank} is not in trigger(s) {', '.join(map(str, skipped))}; "
                      "skipped", highlight=False)
    if not records:
        console.print("no triggers to explain", highlight=False)
    if len(records) > OVERVIEW_TRIGGERS and not only and not show_all:
        print_plain(console, _overview(records))  # (row by row when piped)
    else:
        for rec in records:
            _print_record(console, rec, topo)
    if refused:  # after the output, one line (never wrapped): what would stop lower
        console.print(styled(f"[red]{_refused_head(refused)}[/] ",
                             plain_line(refused[0]["refusal"])),
                      highlight=False, soft_wrap=True)


def _overview(records: list[dict]) -> Table:
    table = Table(title=f"{len(records)} triggers",
                  caption="--trigger K explains trigger K in full; --all every trigger")
    for col in ("trigger", "op", "dtype", "bytes", "ranks", "policy", "lowered", "channels"):
        table.add_column(col, no_wrap=True)
    for rec in records:
        policy, lowered = rec["policy"]["algorithm"], rec["lowered"]["algorithm"]
        legs = rec.get("hier", {}).get("legs")
        if legs:
            lowered += " (" + ", ".join(leg["algorithm"] for leg in legs) + ")"
        table.add_row(str(rec["trigger"]), rec["op"], rec["dtype"], fmt_bytes(rec["bytes"]),
                      str(rec["group_size"]), policy, lowered, str(rec["channels"]["count"]))
    return table


#: The most elements a trigger word can count (its ``num_elements`` is a u64).
U64_MAX = 2 ** 64 - 1


def _check_size(op: EncOpType, size: int, dt: DType, n: int) -> None:
    esize = DTYPE_SIZE[dt]
    if size <= 0 or size % esize:
        raise ValidationError(f"--bytes must be a positive multiple of the {dt.name} element "
                              f"size {esize}, not {size}", field="--bytes")
    if size // esize > U64_MAX:
        raise ValidationError(f"--bytes {size} is more than 2^64 - 1 {dt.name} elements (a "
                              "trigger's num_elements is a u64, NEFF-LIKE.md)", field="--bytes")
    if op in (EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER, EncOpType.ALLTOALL) and \
            size % (esize * n):
        raise ValidationError(f"--bytes must split into {n} equal {dt.name} blocks for "
                              f"{op.name} (a multiple of {n} x {esize} bytes), not {size}",
                              field="--bytes")


__all__ = ["explain_cmd", "explain_selection", "parse_size", "parse_ranks", "compress"]
