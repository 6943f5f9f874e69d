"""HIER: a collective spanning nodes as chained per-leg collectives (seed 000 §4.3, §5.1, §5.4;
seed 003 §1 QUIRK: ``enc_hier_primitive`` owns no leaf code, it builds a page table per stage
and runs a fresh metaring / mesh primitive per stage).

Seed names: ``enc_hier_primitive``'s composers ``__compose_allreduce``,
``__compose_allgather`` and ``__compose_redsct`` are :func:`plan_hier` (the legs of the op)
and :class:`HierAlgorithm` (each leg's engine composing over its group); the page-table
builders ``__build_allreduce_pgt_intra_rdsc``, ``__build_allreduce_pgt_inter_allr``,
``__build_allreduce_pgt_intra_allg``, ``__build_allgather_pgt_intra_allg`` and
``__build_allgather_pgt_inter_allg`` are :func:`_leg_layouts` and the legs' ``roles``
(where each group position's elements lie).
The seed's ``intra_rdsc`` leg is our ``intra_redsct``.

Legs, in execution order (``Selection.legs``; docs/SELECTION.md §5):

========  ========================================================================
op        legs
========  ========================================================================
AR        intra_redsct -> inter_allr -> intra_allg
AG        inter_allg -> intra_allg
RS        intra_redsct -> inter_redsct
========  ========================================================================

Intra legs run on each node's ranks (position ``j`` = the ``j``-th local rank), inter legs
on the ranks with the same local index across nodes (position ``i`` = node ``i``).  Every
leg is one SPAD entry per rank, tagged with the leg's engine (``algo_type`` RING,
KANGARING or SINGLE_CYCLE_RING), ``trigger_next`` set on all but the last; each leg is
composed by that engine's composer over the leg's group and a :class:`Layout` that places
its positions in the trigger's element space (docs/DESIGN.md "HIER"):

* AR: the message is cut into ``local_rank_n`` slices ``S_j`` (:func:`even_split`);
  intra_redsct leaves slice ``S_j`` reduced over the node in the intermediate buffer MID on
  local rank ``j``; inter_allr all-reduces ``S_j`` among the ranks of local index ``j``
  from MID into the output; intra_allg gathers the slices in place in the output.
* AG: inter_allg gathers the blocks of local index ``j`` (input -> output, at their group
  positions); intra_allg then moves ``node_n`` blocks per position, in place.
* RS: intra_redsct leaves the blocks of the ranks of local index ``j`` (``node_n``
  segments) reduced over the node in MID; inter_redsct reduces them across nodes into each
  rank's own output block.

Buffers: one scratch region per trigger holds RECV of the first leg (element-indexed over
the trigger's element space), MID, and RECV of the inter leg (two for a single-cycle inter
leg); the gateway region holds the inter leg's network staging (two for single-cycle).
Legs of one trigger use disjoint channel ids (leg ``k`` starts after the channels of the
legs before it), so a rank still in one leg never consumes an increment meant for its next.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nrtrewrite.codes import EncAlgType, EncOpType, ReductionType
from nrtrewrite.compose.algorithm import Algorithm, EntrySpec, Prepared, register
from nrtrewrite.compose.chunking import io_dtype_size
from nrtrewrite.compose.kangaring import kangaring_ir, plan_kangaring
from nrtrewrite.compose.segments import (
    PeerTable, ViewTable, even_split, group_positions, interleaved_layout, layout_of_segments,
    plan_ring_leg, ring_leg_ir,
)
from nrtrewrite.compose.single_cycle import plan_single_cycle, single_cycle_ir
from nrtrewrite.compose.views import operand_view, region_view
from nrtrewrite.errors import LimitError
from nrtrewrite.select import choose_channels_each

#: Engines that can run as a HIER leg in this build (Policy.hier_leg_lowerable must match).
LEG_ENGINES = frozenset({EncAlgType.RING, EncAlgType.KANGARING, EncAlgType.SINGLE_CYCLE_RING})
#: Ring channel ids available to the legs of one trigger (16 + 4 * 31 + 3 < 144).
MAX_CHANNEL_IDS = 32


@dataclass
class LegPlan:
    """One leg: its engine, its channel-id range and one plan per group."""

    name: str
    op: EncOpType
    alg: EncAlgType
    channel_base: int
    n_channels: int  # physical channel ids it uses
    plans: dict[tuple[int, ...], object]  # group -> RingLegPlan | KangaringPlan | SingleCyclePlan
    group_of: dict[int, tuple[int, ...]] = field(default_factory=dict)  # shared: read only
    roles: dict[str, tuple[str, int]] = field(default_factory=dict)  # view role -> (kind, offset)
    inplace: bool = False
    reason: str = ""

    def manifest(self) -> dict:
        """The leg in the top-level manifest (docs/FORMATS.md §1.1): its groups' plans as
        records with the ranks as positions in the group, each distinct record once in
        ``plans`` (the groups of a leg differ in their ranks, rarely in their plan), and per
        group its ranks and the index of its plan."""
        plans: list[dict] = []
        index: dict[tuple, int] = {}
        groups = []
        for g, p in self.plans.items():
            key, record = p.group_plan()
            k = index.get(key)
            if k is None:
                k = index[key] = len(plans)
                plans.append(record())
            groups.append({"group": g, "plan": k})
        return {"name": self.name, "op": self.op.name, "algorithm": self.alg.name,
                "channel_base": self.channel_base, "channel_ids": self.n_channels,
                "reason": self.reason, "plans": plans, "groups": groups}


@dataclass
class HierPlan:
    legs: list[LegPlan]
    slices: list[tuple[int, int]]  # AR: the slice of each local index
    scratch_elems: dict[str, int]  # region name -> element offset in the scratch region
    gw_elems: dict[str, int]


def _group_of(topo, groups: tuple[tuple[int, ...], ...]) -> dict[int, tuple[int, ...]]:
    """rank -> its group among ``groups``, memoised per topology: shared, never to be
    mutated."""
    return topo.cached(("hier_group_of", groups), lambda: {r: g for g in groups for r in g})


def _blocks(index: dict[int, int], ranks, count: int) -> list[tuple[int, int]]:
    return [(index[r] * count, (index[r] + 1) * count) for r in ranks]


def plan_hier(ctx, trig, sel) -> HierPlan:
    from nrtrewrite.select import hier_groups

    topo = ctx.topology
    group = tuple(trig.replica_group)
    index = {r: i for i, r in enumerate(group)}
    intra, inter = hier_groups(topo, group)
    y = len(intra[0])
    N = trig.num_elements
    op = trig.op
    G = len(group)
    space = N * G if op == EncOpType.ALLGATHER else N  # the op's element space
    scratch = {"recv1": 0, "mid": space, "recv2": 2 * space, "recv2b": 3 * space}
    gw = {"gw": 0, "gw2": space}
    slices: list[tuple[int, int]] = []
    if op == EncOpType.ALLREDUCE:
        slices = even_split(0, N, y)
    c = N // G if op == EncOpType.REDUCE_SCATTER else N
    sbuf = trig.uses_sbuf
    legs: list[LegPlan] = []
    base = 0
    budget = MAX_CHANNEL_IDS
    for k, leg in enumerate(sel.legs):
        scope_intra = leg.name.startswith("intra")
        groups = intra if scope_intra else inter
        alg = leg.alg
        reason = leg.reason
        if alg not in LEG_ENGINES:
            reason = (f"{alg.name} has no HIER leg composer in this build; RING instead "
                      f"({leg.reason})")
            alg = EncAlgType.RING
        lp = LegPlan(name=leg.name, op=leg.op, alg=alg, channel_base=base, n_channels=0,
                     plans={}, reason=reason)
        # per position layouts in the trigger's element space, and the leg's buffers
        if op == EncOpType.ALLREDUCE:
            if leg.name == "intra_redsct":
                lp.roles = {"in": ("src", 0), "out": ("scratch", scratch["mid"]),
                            "recv": ("scratch", scratch["recv1"])}
            elif leg.name == "inter_allr":
                lp.roles = {"in": ("scratch", scratch["mid"]), "out": ("dst", 0),
                            "recv": ("scratch", scratch["recv2"])}
                if alg == EncAlgType.SINGLE_CYCLE_RING:  # its CCW partials and staging
                    lp.roles.update(recv2=("scratch", scratch["recv2b"]),
                                    gw2=("gw", gw["gw2"]))
            else:  # intra_allg, in place in the output
                lp.roles = {"in": ("dst", 0), "out": ("dst", 0), "recv": ("dst", 0)}
                lp.inplace = True
        elif op == EncOpType.ALLGATHER:
            if leg.name == "inter_allg":
                lp.roles = {"in": ("src_block", 0), "out": ("dst", 0), "recv": ("dst", 0)}
            else:
                lp.roles = {"in": ("dst", 0), "out": ("dst", 0), "recv": ("dst", 0)}
                lp.inplace = True
        else:  # REDUCE_SCATTER
            if leg.name == "intra_redsct":
                lp.roles = {"in": ("src", 0), "out": ("scratch", scratch["mid"]),
                            "recv": ("scratch", scratch["recv1"])}
            else:
                lp.roles = {"in": ("scratch", scratch["mid"]), "out": ("dst_block", 0),
                            "recv": ("scratch", scratch["recv2"])}
        # every entry's view table holds the gateway view (gw_view 3); only a single-cycle
        # leg has the second views, which the regions hold only then (HierAlgorithm.prepare)
        lp.roles.setdefault("gw", ("gw", gw["gw"]))
        cap = max(1, budget // (len(sel.legs) - k))
        layouts = _leg_layouts(op, leg.name, index, inter, slices, c, trig.dtype)
        # the channel count of each group (choose_channels of the group's request)
        wants = choose_channels_each(topo, leg.op, trig.dtype, groups, leg.nbytes, alg,
                                     ordinal=trig.ordinal, sbuf=sbuf, alu=trig.alu_op)
        for gi, (members, want) in enumerate(zip(groups, wants)):
            layout_of = layouts(gi, members)
            if alg == EncAlgType.SINGLE_CYCLE_RING:
                want = min(want, max(2, cap))
                plan = plan_single_cycle(topo, members, want, lambda nring, f=layout_of, w=want:
                                         f(max(1, min(nring, max(1, w // 2)))), channel_base=base)
                used = len(plan.channel_ids)
            elif alg == EncAlgType.KANGARING:
                plan = plan_kangaring(topo, leg.op, members, min(want, cap), layout_of,
                                      channel_base=base, host_cc=ctx.options.host_cc,
                                      inplace=lp.inplace)
                used = len(plan.channel_ids)
            else:
                plan = plan_ring_leg(topo, members, min(want, cap), layout_of, channel_base=base)
                used = max(plan.channel_ids, default=base - 1) - base + 1
            lp.plans[members] = plan
            lp.n_channels = max(lp.n_channels, used)
        lp.group_of = _group_of(topo, groups)
        base += lp.n_channels
        budget -= lp.n_channels
        if base > MAX_CHANNEL_IDS:
            raise LimitError(f"HIER legs need {base} channel ids, at most {MAX_CHANNEL_IDS}")
        legs.append(lp)
    return HierPlan(legs=legs, slices=slices, scratch_elems=scratch, gw_elems=gw)


def _leg_layouts(op, leg, index, inter, slices, c, dtype):
    """The function (group index, members) -> (max channels -> Layout) of one leg.

    Intra legs place the positions of every group alike (the slices, or the blocks of the
    inter groups of each local index), so their groups of one size share one Layout per
    channel count; inter groups own different slices or blocks."""
    def shared(make):
        memo: dict[tuple[int, int], object] = {}

        def per_group(gi, members):
            def layout_of(n):
                key = (len(members), n)
                if key not in memo:
                    memo[key] = make(len(members), n)
                return memo[key]
            return layout_of
        return per_group

    if op == EncOpType.ALLREDUCE:
        if leg == "inter_allr":
            def per_group(gi, members):
                lo, hi = slices[gi]
                return lambda n: interleaved_layout(EncOpType.ALLREDUCE, hi - lo, len(members),
                                                    dtype, n, offset=lo)
            return per_group
        leg_op = EncOpType.REDUCE_SCATTER if leg == "intra_redsct" else EncOpType.ALLGATHER
        widest = max([hi - lo for lo, hi in slices] + [0])
        return shared(lambda m, n: layout_of_segments(leg_op, tuple((s,) for s in slices),
                                                      dtype, n, longest=widest))
    leg_op = EncOpType.ALLGATHER if op == EncOpType.ALLGATHER else EncOpType.REDUCE_SCATTER
    if leg.startswith("intra"):  # every segment is one rank's block: c elements
        return shared(lambda m, n: layout_of_segments(
            leg_op, tuple(tuple(_blocks(index, inter[j], c)) for j in range(m)), dtype, n,
            longest=c))

    def per_group(gi, members):  # each position owns its member's block: c elements
        segs = tuple(((index[r] * c, (index[r] + 1) * c),) for r in members)
        return lambda n: layout_of_segments(leg_op, segs, dtype, n, longest=c)
    return per_group


def _view_factory(ctx, trig, lp: LegPlan):
    memory = ctx.memory
    dsize = io_dtype_size(trig.dtype)
    group = tuple(trig.replica_group)
    index = group_positions(ctx.topology, group)
    count = trig.num_elements // len(group)

    def factory(role: str, member: int):
        kind, off = lp.roles[role]
        if kind == "src":
            return operand_view(memory, trig, trig.src, 0)
        if kind == "src_block":  # all-gather input: the member's own block
            return operand_view(memory, trig, trig.src, index[member] * trig.num_elements)
        if kind == "dst":
            return operand_view(memory, trig, trig.dst, 0)
        if kind == "dst_block":  # reduce-scatter output: the member's own block
            return operand_view(memory, trig, trig.dst, index[member] * count)
        return region_view(memory, kind, dsize, offset=off * dsize)
    return factory


def _hier_manifest(hp: HierPlan, dsize: int) -> dict:
    """The trigger record's ``hier`` (docs/FORMATS.md §1.1): every leg with its groups' plans
    and its buffers, and the all-reduce slices."""
    legs = []
    for lp in hp.legs:
        m = lp.manifest()
        m["buffers"] = [{"role": role, "region": kind, "offset": off * dsize}
                        for role, (kind, off) in sorted(lp.roles.items())
                        if kind in ("scratch", "gw")]
        legs.append(m)
    return {"legs": legs, "slices": list(hp.slices)}


class HierAlgorithm(Algorithm):
    """HIER: one SPAD entry per leg, chained with trigger_next."""

    alg = EncAlgType.HIER

    def prepare(self, ctx, trig, sel) -> Prepared:
        hp = plan_hier(ctx, trig, sel)
        dsize = io_dtype_size(trig.dtype)
        G = trig.group_size
        space = trig.num_elements * (G if trig.op == EncOpType.ALLGATHER else 1)
        if trig.op == EncOpType.ALLGATHER:
            scratch = 0
        else:
            sc = any(lp.alg == EncAlgType.SINGLE_CYCLE_RING for lp in hp.legs)
            scratch = (4 if sc else 3) * space * dsize
        sc_inter = any(lp.alg == EncAlgType.SINGLE_CYCLE_RING for lp in hp.legs)
        gw = (2 if sc_inter else 1) * space * dsize
        manifest = {"channels": [], "chunk": {"pgta": max(
            (p.layout.groups for lp in hp.legs for p in lp.plans.values()), default=1)}}
        return Prepared(scratch_bytes=scratch, gw_bytes=gw, manifest=manifest, data=hp,
                        entries=len(hp.legs), later=lambda: {"hier": _hier_manifest(hp, dsize)})

    def entries(self, ctx, tp, rank: int) -> list[EntrySpec]:
        hp: HierPlan = tp.prepared.data
        trig = tp.trigger
        out = []
        for k, lp in enumerate(hp.legs):
            members = lp.group_of[rank]
            plan = lp.plans[members]
            peers = PeerTable(rank)
            factory = _view_factory(ctx, trig, lp)
            views = ViewTable(factory)
            views.reserve([("in", rank), ("out", rank), ("recv", rank), ("gw", rank)])
            if lp.alg == EncAlgType.KANGARING:
                ir, info = kangaring_ir(plan, ctx.topology, rank, peers, views)
                rtype, nact, groups = int(ReductionType.KANGARING_NR1W), len(plan.channel_ids), \
                    plan.layout.groups
            elif lp.alg == EncAlgType.SINGLE_CYCLE_RING:
                ir, info = single_cycle_ir(plan, ctx.topology, rank, peers, views, op=lp.op)
                rtype, nact, groups = int(ReductionType.RING_2R1W), len(plan.channel_ids), \
                    plan.layout.groups
            else:
                ir, info = ring_leg_ir(ctx.topology, plan, lp.op, rank, peers,
                                       host_cc=ctx.options.host_cc, inplace=lp.inplace)
                rtype, nact, groups = int(ReductionType.RING_2R1W), len(plan.channel_ids), \
                    plan.layout.groups
            out.append(EntrySpec(leg=lp.name, alg=lp.alg, ir=ir, views=views.views, gw_view=3,
                                 peers=peers.peers, num_active_channels=nact, groups=groups,
                                 trigger_next=k < len(hp.legs) - 1, reduction_type=rtype,
                                 info={"leg": lp.name, "group": list(members),
                                       "channels": info}))
        return out


HIER = register(HierAlgorithm())
