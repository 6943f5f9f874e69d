"""The load-time rewrite, top to bottom: parse -> select -> topology -> compose -> emit -> serialize.

:func:`plan_lowering` does the rank-independent work once (parse, topology,
selection, rings, chunk plans, memory map); :func:`lower_rank` composes and
emits one rank; :mod:`nrtrewrite.bundle` writes the output folder.  Each stage
is a module whose name says what it is:

=============  =====================================
parse          :mod:`nrtrewrite.neff.reader`
select         :mod:`nrtrewrite.select`
topology       :mod:`nrtrewrite.topology`
compose        :mod:`nrtrewrite.compose` (chunking, ring)
emit/complete  :mod:`nrtrewrite.emit` (ring, address, tiling, formats)
serialize      :mod:`nrtrewrite.serialize` (SPAD, tp_inc_steps)
write back     :mod:`nrtrewrite.bundle` + :mod:`nrtrewrite.neff.writer`
simulate       :mod:`nrtrewrite.simulate`
=============  =====================================
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from nrtrewrite.codes import (
    ALU_TO_CCE, CCE_REDUCE_DTYPES, VARIABLE_PEER_ALGS, EdgeLocality, EncAlgType, EncOpType,
)
from nrtrewrite.ahead import AheadLost, ForkAhead
from nrtrewrite.ahead import available as fork_available
from nrtrewrite.apoverlap import operands_may_share, sbuf_refusal
from nrtrewrite.compose import algorithm as algorithms
from nrtrewrite.compose.algorithm import Algorithm, EntrySpec, Prepared
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.address import SEM_ENTRY_POST, MemoryMap, build_memory_map
from nrtrewrite.emit.legs import EntryContext, Peer, PeerTables, RankBuilder, emit_entries
from nrtrewrite.entryslots import ENTRY_POST_SEMS, entry_post_slots
from nrtrewrite.errors import (
    LimitError, LoweringError, NrtRewriteError, OutputError, path_text,
)
from nrtrewrite.limits import check_plan
from nrtrewrite.memtune import collect_when_planning, frozen_gc, keep_freed_memory
from nrtrewrite.neff.instructions import trigger_where
from nrtrewrite.neff.model import Model, Trigger
from nrtrewrite.select import (
    Request, Selection, bd_uncounted, bds_text, sbuf_runs_text, idle_clauses,
    forced_engine, hier_forced, parse_algo_override, ranks_text, select, select_all,
)
from nrtrewrite.serialize import serialize_spad, serialize_tpinc
from nrtrewrite.topology.model import Topology, load_topology


@dataclass(frozen=True)
class LowerOptions:
    topology: str | None = None
    algo: str | None = None
    host_cc: bool = False  # the host-CC final reduce step (recv_reduce_copy_send)

    def to_json(self) -> dict:
        # a file's path as UTF-8 text whatever the locale (docs/CLI.md "Paths in the output")
        return {"topology": path_text(self.topology), "algo": self.algo,
                "host_cc": self.host_cc}


@dataclass
class TriggerPlan:
    """Rank-independent lowering decisions for one trigger."""

    trigger: Trigger
    selection: Selection
    algorithm: Algorithm
    prepared: Prepared
    group: tuple[int, ...]
    leader: int
    private_offset: int = 0  # bytes into the scratch region of prepared.private_scratch_bytes
    #: the semaphore its entry handshake counts posts on (nrtrewrite.entryslots)
    entry_post_sem: int = SEM_ENTRY_POST

    @property
    def alg(self) -> EncAlgType:
        return self.selection.alg


@dataclass
class LoweringPlan:
    model: Model
    topology: Topology
    options: LowerOptions
    triggers: list[TriggerPlan]
    memory: MemoryMap | None
    input_sha256: str
    #: the input file's size in bytes, when read whole (sha256 covers it: with trailing zero
    #: bytes, NEFF-LIKE.md §1, more than the header's header_size + data_size)
    input_bytes: int | None = None
    timings: dict[str, float] = field(default_factory=dict)
    #: warnings about the options (``select.idle_clauses``): the CLI prints them
    notes: list[str] = field(default_factory=list)
    #: (rank, peer ranks) -> the entry peer table (lower._peer_table), reused across entries
    peer_tables: dict = field(default_factory=dict, repr=False, compare=False)
    #: the trigger ordinals planned (``triggers`` holds only those), or None: every trigger
    #: (:func:`plan_lowering`'s ``only``; such a plan is shown, never emitted)
    only: frozenset[int] | None = None
    #: where the override came from (``AlgoOverride.source``: --algo or NRTREWRITE_ALGO)
    algo_source: str = "--algo"

    @property
    def world(self) -> tuple[int, ...]:
        return self.model.world


def operand_refusal(trig: Trigger) -> str | None:
    """Why ``lower`` refuses ``trig``'s operands, or None: operands that overlap other than
    exactly in place, or an SBUF dst that writes two elements to the same bytes.

    DRAM: an all-reduce or reduce-scatter whose dst is its src (same var, same offset) is
    composed in place (docs/DESIGN.md: partials never land in OUT before every read of IN).
    Any other overlap of the input bytes [src, src + in_bytes) with the output bytes [dst,
    dst + out_bytes) in one var - a shifted dst, an all-gather into its own input - lets a
    rank overwrite input a peer has yet to read: the result would race or be wrong.

    SBUF (access patterns, :mod:`nrtrewrite.apoverlap`): the same rule element by element -
    src and dst patterns in one var may share bytes of a partition only when every dst
    element e sits at the partition and bytes of src element e and the op is not an
    all-gather (an all-reduce whose dst pattern is its src pattern, a reduce-scatter whose
    dst elements are its first out_elements src elements); and a dst pattern, in any var,
    must not write two of its elements to the same bytes (a step-0 dim of num > 1,
    interleaved strides): the result would depend on the order of the writes.  A src that
    reads a byte twice is fine.

    ``explain`` shows the same reason."""
    src, dst = trig.src, trig.dst
    if src.is_sbuf or dst.is_sbuf:
        return sbuf_refusal(trig)
    if not operands_may_share(trig):
        return None
    if src.offset == dst.offset and trig.op != EncOpType.ALLGATHER:
        return None
    how = ("an all-gather cannot be in place" if trig.op == EncOpType.ALLGATHER
           else "only dst = src exactly is in place")
    return (f"dst bytes [{dst.offset}, {dst.offset + trig.out_bytes}) overlap src bytes "
            f"[{src.offset}, {src.offset + trig.in_bytes}) of var {src.var_id}: {how}")


def _check_operands(trig: Trigger) -> None:
    """:func:`operand_refusal` as a LoweringError at the dst: field ``dst_offset`` of a DRAM
    trigger's word, ``dst_dims`` of the 0xDA word (the instruction after the trigger's first)
    for SBUF operands, where the dst pattern is."""
    why = operand_refusal(trig)
    if why is not None:
        if trig.dst.is_sbuf:
            raise LoweringError(why, **trigger_where(trig, "dst_dims", second=True))
        raise LoweringError(why, **trigger_where(trig, "dst_offset"))


def dtype_refusal(op: EncOpType, dtype, rank_n: int = 2) -> str | None:
    """Why ``lower`` refuses ``op`` in ``dtype`` over ``rank_n`` ranks (a reducing collective
    in a dtype the CCE cannot reduce), or None.  ``explain`` shows the same reason.  A group
    of one rank reduces nothing (its collective copies IN to OUT, ``enc_1rank_primitive``),
    so it takes any dtype (until 2026-12-06 refused as a reduce)."""
    if op != EncOpType.ALLGATHER and rank_n > 1 and dtype not in CCE_REDUCE_DTYPES:
        return (f"{op.name} in {dtype.name} cannot be lowered: the CCE reduce accepts only "
                "BF16, FP16, FP32R and FP8_E3/E4/E5 (seed 000 §3.4)")
    return None


def _check_dtype(trig: Trigger) -> None:
    why = dtype_refusal(trig.op, trig.dtype, len(trig.replica_group))
    if why is not None:
        raise LoweringError(why, **trigger_where(trig, "dtype"))


def check_trigger(trig: Trigger) -> None:
    """``lower``'s own checks of ``trig`` before its engine's: its dtype, then its operands
    (a :class:`LoweringError` at the field; ``explain`` runs them on the triggers it does
    not show)."""
    _check_dtype(trig)
    _check_operands(trig)


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic collector off (then as before): planning allocates hundreds of
    thousands of long-lived objects (four per leg group of a HIER plan) and hardly any
    cyclic garbage, and every full collection would walk all of them (about 45 % of the
    plan time of ``large128``, docs/PERFORMANCE.md).  The collections that moving them into
    the oldest generation keeps CPython from running are run here, before planning
    (:func:`nrtrewrite.memtune.collect_when_planning`)."""
    collect_when_planning()  # before this plan's objects go into the oldest generation
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # what planning made, straight into the oldest generation (freeze and unfreeze move
        # the lists): else the first collection after the pause walks it all as young objects
        if not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
        if was:
            gc.enable()


def plan_lowering(model: Model, options: LowerOptions, input_sha256: str = "",
                  input_bytes: int | None = None, only: Collection[int] | None = None
                  ) -> LoweringPlan:
    """Everything that does not depend on the rank: topology, selection, rings, chunking, memory.
    ``input_sha256`` and ``input_bytes``: the input file's, for the manifest's ``input``.

    ``only``: plan only the triggers of these ordinals (``schedule --trigger``).  Under an
    ``--algo`` override every trigger is still selected (its idle clauses are judged on all
    of them, its refusals named as without ``only``; without one only those planned are) and
    the entry handshake's semaphores are still allotted over every trigger's group (a
    trigger's depends on the groups before it); only the engines' prepares, the memory
    layout and :func:`nrtrewrite.limits.check_plan` see the planned triggers alone.  What
    a rank's entries of a planned trigger compose to does not depend on the others: the
    memory layout moves the scratch and gateway addresses, which ``schedule`` does not
    show (tests/test_schedule_only.py holds it over every fixture's every trigger)."""
    with gc_paused():
        return _plan_lowering(model, options, input_sha256, input_bytes,
                              None if only is None else frozenset(only))


def _plan_lowering(model: Model, options: LowerOptions, input_sha256: str,
                   input_bytes: int | None = None, only: frozenset[int] | None = None,
                   topo: Topology | None = None) -> LoweringPlan:
    t0 = time.perf_counter()
    if topo is None:  # (given: plan_refusal, the model's topology loaded, its caches shared)
        topo = load_topology(options.topology, world=model.world, lnc_size=model.lnc_size)
    override = parse_algo_override(options.algo)
    if options.algo is None and override is not None:  # NRTREWRITE_ALGO: record what applies
        options = replace(options, algo=override.text)
    # (only=...: with an override every trigger is selected, so its idle clauses and its
    # refusals are lower's; without one only those planned: the docstring says why)
    chosen = (model.triggers if only is None or override is not None
              else [t for t in model.triggers if t.ordinal in only])
    selections = select_all(model, topo, override=override, triggers=chosen,
                            host_cc=options.host_cc)
    t1 = time.perf_counter()
    plan = LoweringPlan(model=model, topology=topo, options=options, triggers=[], memory=None,
                        input_sha256=input_sha256, input_bytes=input_bytes,
                        notes=[], only=only,
                        algo_source=override.source if override is not None else "--algo")
    for trig, sel in zip(chosen, selections):
        if only is None or trig.ordinal in only:
            plan.triggers.append(prepare_trigger(plan, trig, sel))
    # (over every trigger's group, planned or not: only=... gives its triggers the semaphores
    # the whole plan gives them)
    slots = entry_post_slots([tuple(t.replica_group) for t in model.triggers],
                             topo.ranks_per_node, lambda i: trigger_where(model.triggers[i]))
    slot_of = {t.ordinal: slot for t, slot in zip(model.triggers, slots)}
    for p in plan.triggers:
        p.entry_post_sem = ENTRY_POST_SEMS[slot_of[p.trigger.ordinal]]

    def replan(tp: TriggerPlan, why: str) -> TriggerPlan:  # (the window gate's)
        sel = select(tp.trigger, topo, override=override, host_cc=options.host_cc,
                     hier_refusal=why)
        return prepare_trigger(plan, tp.trigger, sel)
    plan.memory = lay_out_memory_gated(model, topo, plan.triggers, replan)
    # the idle clauses of what is lowered: after the window gate, which may have passed HIER
    # over (review 54r: its leg clauses went unwarned)
    final = {p.trigger.ordinal: p.selection for p in plan.triggers}
    plan.notes = idle_clauses(override, [final.get(t.ordinal, s)
                                         for t, s in zip(chosen, selections)], model.path)
    t2 = time.perf_counter()
    plan.timings = {"select": t1 - t0, "plan": t2 - t1}
    return plan


def plan_refusal(model: Model, topo: Topology, algo: str, host_cc: bool,
                 lowered: dict | None = None) -> NrtRewriteError | None:
    """The refusal ``lower --algo <algo>`` of ``model`` meets before it composes a rank, or
    None: its selections (the SPAD gate's pass-over among them), the engines' ``prepare``,
    the memory layout and the window gate (:func:`lay_out_memory_gated`), then
    :func:`nrtrewrite.limits.check_plan` (the SPAD entries among its limits).  ``topo``: the
    model's topology, loaded.  :func:`nrtrewrite.select.model_way_out` holds each way out it
    offers to it (until 2026-12-07 a way past the selections was offered unchecked: a 1 MiB
    all-reduce over 0, 1, 64, 65 after vars ending 3 MiB short of the core window, under
    ``--algo '^ring'``, offered two ways the window refused).  ``lowered``: filled, with no
    refusal, with each trigger's selection as lowered (after the window gate), by ordinal."""
    try:
        with gc_paused():
            plan = _plan_lowering(model, LowerOptions(algo=algo, host_cc=host_cc), "",
                                  topo=topo)
        check_plan(plan)
    except NrtRewriteError as err:
        return err
    if lowered is not None:
        lowered.update((p.trigger.ordinal, p.selection) for p in plan.triggers)
    return None


def prepare_trigger(ctx, trig: Trigger, sel: Selection) -> TriggerPlan:
    """``trig``'s rank-independent plan under its selection ``sel``: ``lower``'s own checks
    (:func:`check_trigger`), then its engine's ``prepare`` (channels, chunk layout, buffers;
    an engine refuses there what only its plan shows, a :class:`LoweringError` or
    :class:`~nrtrewrite.errors.LimitError` naming the trigger).  ``ctx``: the plan being
    made (its ``topology`` and ``options``); ``explain`` runs it on every trigger."""
    check_trigger(trig)
    try:
        algorithm = algorithms.get(sel.alg)
    except KeyError:
        raise LoweringError(f"{sel.alg.name} was selected but this build lowers only "
                            f"{', '.join(a.name for a in sorted(algorithms.lowerable()))}",
                            **trigger_where(trig)) from None
    try:
        prepared = algorithm.prepare(ctx, trig, sel)
    except NrtRewriteError as err:
        raise err.at(**trigger_where(trig))
    group = tuple(trig.replica_group)
    return TriggerPlan(trigger=trig, selection=sel, algorithm=algorithm, prepared=prepared,
                       group=group, leader=min(group))


def lay_out_memory(model: Model, topo: Topology, triggers: list[TriggerPlan]) -> MemoryMap:
    """The memory map of ``model`` with the scratch and gateway its ``triggers`` need (their
    ``prepared`` sizes: the shared scratch is the largest a trigger needs, then one private
    area per trigger that has one, whose offset is set in ``private_offset``; the gateway
    the largest of a trigger spanning nodes).  A layout that does not fit a core's window is
    refused (:func:`nrtrewrite.emit.address.build_memory_map`; ``explain`` shows it)."""
    spans = [p for p in triggers if topo.spans_nodes(p.group)]
    shared = max([p.prepared.scratch_bytes for p in triggers] + [0])
    private = shared
    if any(p.prepared.private_scratch_bytes for p in triggers):
        private = -(-shared // 64) * 64
    for p in triggers:  # private scratch: after the shared part, one area per trigger
        if p.prepared.private_scratch_bytes:
            p.private_offset = private
            private += -(-p.prepared.private_scratch_bytes // 64) * 64
    return build_memory_map(model, private, max([p.prepared.gw_bytes for p in spans] + [0]),
                            cores_per_device=topo.ranks_per_device)


def lay_out_memory_gated(model: Model, topo: Topology, triggers: list[TriggerPlan],
                         replan: Callable[[TriggerPlan, str], TriggerPlan]) -> MemoryMap:
    """:func:`lay_out_memory`; where it refuses the layout (the core window), HIER is passed
    over (docs/SELECTION.md "The window gate") on the default's HIER triggers, the largest
    scratch and gateway first (then in trigger order), one at a time, each re-selected and
    re-planned by ``replan(plan, why)`` (``select``'s ``hier_refusal``: the cascade's next
    engine, HIER not taken for ``why``, the layout's refusal), until the layout fits; the
    triggers so re-planned replace theirs in ``triggers``.  When none makes it fit, or a
    re-selection or its plan is refused, the layout's first refusal (until 2026-12-07
    always: a model whose HIER's scratch passed the window was refused though ``--algo
    ring`` lowered it).  A HIER the override forces is left."""
    try:
        return lay_out_memory(model, topo, triggers)
    except LimitError as err:
        first = err
    try:  # (the vars alone past a window: no engine's scratch can help)
        build_memory_map(model, 0, 0, cores_per_device=topo.ranks_per_device)
    except LimitError:
        raise first from None
    hier = [i for i, tp in enumerate(triggers)
            if tp.selection.alg == EncAlgType.HIER and not hier_forced(tp.selection)]
    hier.sort(key=lambda i: (-(triggers[i].prepared.scratch_bytes
                               + triggers[i].prepared.private_scratch_bytes
                               + triggers[i].prepared.gw_bytes), i))
    trial = list(triggers)
    for i in hier:
        try:
            trial[i] = replan(trial[i], first.reason)
        except NrtRewriteError:
            break
        trial[i].entry_post_sem = triggers[i].entry_post_sem  # (set before the layout)
        try:
            memory = lay_out_memory(model, topo, trial)
        except LimitError:
            continue
        triggers[:] = trial
        return memory
    raise first


def _peer(topo: Topology, rank: int) -> Peer:
    info = topo.info(rank)
    return Peer(rank=rank, device=info.routing_id, logical_core=info.logical_core, node=info.node)


@dataclass
class RankOutput:
    rank: int
    files: dict[str, list[np.ndarray]]  # each file as its record arrays, in order
    manifest: dict
    timings: dict[str, float] = field(default_factory=dict)


def world_refusal(world, rank: int, path: str | None) -> OutputError:
    """The error for ``--rank`` ``rank`` outside ``world``, the world of the model at
    ``path`` (lower, schedule, explain)."""
    return OutputError(f"rank {rank} is not in the model's world (ranks {ranks_text(world)})",
                       file=path or None, field="--rank")


def _trigger_where(plan: LoweringPlan, tp: TriggerPlan, rank: int) -> dict:
    """Where an error composing or emitting ``rank``'s entry of ``tp`` is: the model file,
    the trigger's instruction, the rank (docs/CLI.md "Errors")."""
    return dict(file=plan.model.path or None, rank=rank, **trigger_where(tp.trigger))


def _entries_of(plan: LoweringPlan, tp: TriggerPlan, rank: int) -> list[EntrySpec]:
    try:
        return tp.algorithm.entries(plan, tp, rank)
    except NrtRewriteError as err:
        raise err.at(**_trigger_where(plan, tp, rank))


def rank_entries(plan: LoweringPlan, rank: int, triggers: Collection[int] | None = None
                 ) -> list[tuple[TriggerPlan, EntrySpec]]:
    """Every SPAD entry of ``rank``, in order (what ``schedule`` shows and ``lower`` emits);
    only those of the trigger ordinals in ``triggers``, if given: composing is a pure
    function of the plan and the trigger (its semaphores, scratch and views come from the
    plan, never from the triggers composed before it), so the other triggers are not
    composed (``schedule --trigger K`` of a 16,000-trigger model composed all 16,000 until
    2026-12-06)."""
    return [(tp, spec) for tp in plan.triggers if rank in tp.group
            and (triggers is None or tp.trigger.ordinal in triggers)
            for spec in _entries_of(plan, tp, rank)]


#: Consecutive SPAD entries are emitted together (:func:`nrtrewrite.emit.legs.emit_entries`)
#: until they hold this many IR rows or this many entries: one pass over a batch's legs
#: amortises the fixed cost of the emitter's numpy calls over its entries, and a batch's
#: leg-level arrays stay small (docs/PERFORMANCE.md).
EMIT_BATCH_LEGS = 1 << 13
EMIT_BATCH_ENTRIES = 64

#: With ``compose_ahead``, the forked process takes over composing once a rank's lowering
#: has run this long with at least :data:`AHEAD_MIN_TRIGGERS` triggers left, and only if
#: composing has taken at least :data:`AHEAD_MIN_COMPOSE_SHARE` of the time so far: two busy
#: processes slow each other down a little and the specs travel pickled, which pays only on
#: long runs whose composing is a good part of the work; otherwise the emitter composes
#: everything itself and the writer thread keeps the second core (docs/PERFORMANCE.md
#: "Compose ahead").
AHEAD_AFTER_S = 0.25
AHEAD_MIN_TRIGGERS = 32
AHEAD_MIN_COMPOSE_SHARE = 0.4


def _composed(plan: LoweringPlan, rank: int, triggers: list[int], pipe: ForkAhead | None,
              timings: dict[str, float]) -> Iterator[tuple[TriggerPlan, list[EntrySpec]]]:
    """``(trigger plan, entry specs)`` of each trigger index in order, composed here or, once
    the run is long enough, by ``pipe``'s process while the caller emits (the caller
    composes later triggers itself rather than wait: ``steal``).  Composing is a pure
    function of the plan, so the specs are the same either way.
    ``timings["compose"]`` is the composing time either way; ``timings["compose_wait"]``
    the time spent waiting for (and receiving from) the process, ``compose_here`` the time
    spent composing later triggers here while their turn had not come."""
    def here(i: int) -> tuple[TriggerPlan, list[EntrySpec]]:
        t0 = time.perf_counter()
        specs = _entries_of(plan, plan.triggers[i], rank)
        timings["compose"] += time.perf_counter() - t0
        return plan.triggers[i], specs

    t_start = time.perf_counter()
    k = 0
    while k < len(triggers):
        if pipe is not None and len(triggers) - k >= AHEAD_MIN_TRIGGERS:
            elapsed = time.perf_counter() - t_start
            if (elapsed >= AHEAD_AFTER_S
                    and timings["compose"] >= AHEAD_MIN_COMPOSE_SHARE * elapsed):
                break
        yield here(triggers[k])
        k += 1
    if k == len(triggers):
        return
    timings["compose_wait"] = timings["compose_here"] = 0.0
    it = pipe.map(triggers[k:])
    while True:
        t0, here0 = time.perf_counter(), pipe.here_s
        try:
            i, specs, dt = next(it)
        except StopIteration:
            return
        except AheadLost:  # the process died (killed, out of memory): compose the rest here
            break
        stolen = pipe.here_s - here0  # composing later triggers here instead of waiting
        timings["compose_wait"] += time.perf_counter() - t0 - stolen
        timings["compose_here"] += stolen
        timings["compose"] += dt
        if specs is None:  # composing raised in the process: raise it here
            specs = _entries_of(plan, plan.triggers[i], rank)
        yield plan.triggers[i], specs
        k += 1
    for i in triggers[k:]:
        yield here(i)


def lower_rank(plan: LoweringPlan, rank: int,
               sink: Callable[[str, np.ndarray], None] | None = None, *,
               compose_ahead: bool = False) -> RankOutput:
    """Compose, emit and serialize every SPAD entry of one rank, one trigger at a time (the
    runtime's per-op ``compose_operation``, seed 001 §2, with each algorithm's ``entries``).

    Without ``sink`` the records are returned in ``RankOutput.files``; with one, every
    record array goes to ``sink(file name, array)`` as soon as it exists (in file order per
    file) and ``RankOutput.files`` is empty: memory then holds one trigger's records.
    ``compose_ahead``: on a long run, compose in a forked process while this one emits (a
    second core; the output is the same; see :func:`_composed`).  ``RankOutput.timings``
    holds the seconds spent per stage (compose, emit, serialize; the sink's own time counts
    in emit and serialize; once the process composes, ``compose_wait`` is the time the
    emitter waited for it and ``compose_here`` the time it composed instead of waiting) and
    ``hash``, the time spent in the files' SHA-256 for the manifest (on the writer thread,
    beside the others, except for small ranks)."""
    keep_freed_memory()
    with frozen_gc():  # the collector never walks the plan while the rank is lowered
        return _lower_rank(plan, rank, sink, compose_ahead)


def _lower_rank(plan: LoweringPlan, rank: int, sink: Callable[[str, np.ndarray], None] | None,
                compose_ahead: bool) -> RankOutput:
    triggers = [i for i, tp in enumerate(plan.triggers) if rank in tp.group]
    # forked now, before the builder's writer thread exists (a fork copies one thread)
    pipe = (ForkAhead(lambda i: _entries_of(plan, plan.triggers[i], rank), steal=True)
            if compose_ahead and len(triggers) >= AHEAD_MIN_TRIGGERS and fork_available()
            else None)
    builder = RankBuilder(rank, sink)
    entries = []
    lnc_fmt, sg_index = context_indices(plan)
    timings = {"compose": 0.0, "emit": 0.0, "serialize": 0.0}
    try:
        batch: list[tuple[TriggerPlan, EntrySpec]] = []
        batch_legs = 0
        with contextlib.closing(_composed(plan, rank, triggers, pipe, timings)) as composed:
            for tp, specs in composed:
                t1 = time.perf_counter()
                for spec in specs:
                    batch.append((tp, spec))
                    batch_legs += spec.ir.size
                    if batch_legs >= EMIT_BATCH_LEGS or len(batch) >= EMIT_BATCH_ENTRIES:
                        entries += _emit_batch(builder, plan, batch, rank, len(entries),
                                               lnc_fmt, sg_index)
                        batch, batch_legs = [], 0
                timings["emit"] += time.perf_counter() - t1
        t1 = time.perf_counter()
        entries += _emit_batch(builder, plan, batch, rank, len(entries), lnc_fmt, sg_index)
        timings["emit"] += time.perf_counter() - t1
        if pipe is not None:
            pipe.close()
        t2 = time.perf_counter()
        builder.finish()
        builder.append("spad.bin", np.frombuffer(serialize_spad(entries), F.SPAD_DTYPE))
        builder.append("tpinc.bin", np.frombuffer(
            serialize_tpinc(entries, builder.tpinc_by_entry), F.TPINC_DTYPE))
    except BaseException:
        if pipe is not None:
            pipe.close()
        builder.abort()  # no lock, no wait (RankBuilder.abort)
        raise
    builder.close()
    files = {name: list(builder.parts[name]) for name in F.ARTIFACTS}
    manifest = {
        "rank": rank,
        "files": {name: builder.summary(name) for name in F.ARTIFACTS},
        "entries": entries,
        "fifo": builder.fifo_index(),
    }
    timings["serialize"] = time.perf_counter() - t2
    timings["hash"] = builder.hash_s  # overlapped: the writer thread's, mostly
    return RankOutput(rank=rank, files=files, manifest=manifest, timings=timings)


def _peer_table(plan: LoweringPlan, rank: int, ranks: tuple[int, ...]
                ) -> tuple[list[Peer], list[EdgeLocality], PeerTables]:
    """An entry's peer table (``ranks[0]`` is ``rank``), built once per plan and table."""
    key = (rank, ranks)
    hit = plan.peer_tables.get(key)
    if hit is None:
        topo = plan.topology
        peers = [_peer(topo, r) for r in ranks]
        localities = [EdgeLocality.SAME_DEVICE if r == rank else topo.locality(rank, r)
                      for r in ranks]
        hit = plan.peer_tables[key] = (peers, localities, PeerTables.of(peers, localities))
    return hit


def _with_runs(err: NrtRewriteError, plan: LoweringPlan, tp: TriggerPlan) -> NrtRewriteError:
    """``err``, a leg over ``TPINC_MAX_BDS`` of a trigger with an SBUF operand, with how its
    engine was chosen and why it has so many BDs: each contiguous run of an SBUF access
    pattern is a BD, and the rows it reads (the default selection's BD gate counts them
    so and passes such an engine over, docs/SELECTION.md "The BD gate", under --host-cc too:
    RING's, KANGARING's and HIER's legs are counted as composed with it; the default's own
    engine is refused here only where the gate did not count its legs, one whose composer
    refused the trigger at selection; no other engine is named). "forced" only when the
    override's clause for the op names this engine alone; an exclusion, an allow-list or a
    clause of another op forced nothing, the default selection took the engine within it.
    Any other error as it is."""
    if not isinstance(err, LimitError) or "(TPINC_MAX_BDS)" not in err.reason:
        return err
    why = tpinc_refusal(err.reason, tp.trigger, tp.selection, plan.algo_source)
    return err if why is None else LimitError(why, err.where, left_out=err.left_out)


def tpinc_refusal(why: str, trigger: Trigger, selection: Selection,
                  algo_source: str = "--algo") -> str | None:
    """``why``, the emitter's refusal of a leg of ``trigger`` (lowered as ``selection``) over
    ``TPINC_MAX_BDS``, with how its engine was chosen and what makes its BDs
    (:func:`_with_runs`; ``algo_source``: where the override came from, ``--algo`` or
    ``NRTREWRITE_ALGO``): an SBUF operand's rows; with DRAM operands only, its tiles, and
    only where the override forced the engine (the default selection's DRAM legs are
    counted by the BD gate), else None (``why`` alone): the line ``lower`` refuses it with,
    which ``explain`` and ``schedule`` show for it."""
    req = Request.from_trigger(trigger)
    alg = selection.alg.name
    override = selection.override  # its text, parsed when the plan was made
    forced = forced_engine(selection, trigger.op, selection.alg)
    if req.src_run is None and req.dst_run is None:
        # (until 2026-12-07 no suffix: the SBUF refusal named the override, this did not)
        return f"{why}; {algo_source} {override!r} forced {alg} ({bds_text(req)})" if forced \
            else None
    if forced:
        how = f"{algo_source} {override!r} forced {alg}"
    elif override is not None:
        how = f"the default selection took {alg} within {algo_source} {override!r}"
    else:
        how = f"the default selection took {alg}"
    return f"{why}; {how} ({sbuf_runs_text(req)})"


def rank_bd_refusal(plan: LoweringPlan, entries: list[tuple[TriggerPlan, EntrySpec]],
                    rank: int) -> LimitError | None:
    """The refusal ``lower --rank R`` meets first for a leg over ``TPINC_MAX_BDS`` among
    ``rank``'s composed ``entries`` (:func:`rank_entries`, in order), or None: a selection
    the BD gate did not count (``select.bd_uncounted``: an engine the override forces, a
    flat fallback), its legs counted as the emitter counts them
    (``bdgate.entry_over``), the line the emitter's with :func:`tpinc_refusal`'s suffix at
    the trigger and the rank (:func:`_with_runs`).  What ``schedule`` refuses of the legs it
    would show (docs/CLI.md "schedule"; until 2026-12-07 it showed them, exit 0)."""
    from nrtrewrite.bdgate import entry_over  # (loaded only where a selection is uncounted)
    topo = plan.topology
    uncounted: dict[int, bool] = {}
    for tp, spec in entries:
        ordinal = tp.trigger.ordinal
        if ordinal not in uncounted:
            uncounted[ordinal] = bd_uncounted(tp.trigger, tp.selection, topo)
        if not uncounted[ordinal]:
            continue
        over = entry_over(spec, rank, topo, F.TPINC_MAX_BDS)
        if over is not None:
            why = over.text()
            why = tpinc_refusal(why, tp.trigger, tp.selection, plan.algo_source) or why
            return LimitError(why, **_trigger_where(plan, tp, rank))
    return None


def _emit_batch(builder: RankBuilder, plan: LoweringPlan,
                batch: list[tuple[TriggerPlan, EntrySpec]], rank: int, first_spad: int,
                lnc_fmt: int, sg_index: dict[str, int]) -> list[dict]:
    """Emit consecutive SPAD entries (numbered from ``first_spad``) in one
    :func:`emit_entries` pass and return their manifest descriptions.  If the pass raises,
    the lowering has failed; the entries are then emitted again one by one (on the spoilt
    builder: the checks never read its state) so that the error names its trigger, as a
    lowering of one entry at a time would."""
    if not batch:
        return []
    ctxs = [_entry_context(plan, tp, spec, rank, first_spad + j, lnc_fmt,
                           sg_index[tp.trigger.subgraph]) for j, (tp, spec) in enumerate(batch)]
    try:
        summaries = emit_entries(builder, [(ctx, spec.ir) for ctx, (_tp, spec)
                                           in zip(ctxs, batch)])
    except NrtRewriteError:
        for ctx, (tp, spec) in zip(ctxs, batch):
            try:
                emit_entries(builder, [(ctx, spec.ir)])
            except NrtRewriteError as one:
                raise _with_runs(one, plan, tp).at(
                    **_trigger_where(plan, tp, rank)) from None
        raise  # not reproduced one entry at a time (never expected): unattributed
    return [_entry_manifest(tp, spec, rank, summary)
            for (tp, spec), summary in zip(batch, summaries)]


def context_indices(plan: LoweringPlan) -> tuple[int, dict[str, int]]:
    """What every entry context of ``plan`` shares: the ``lnc_size_fmt`` code of the model's
    LNC size, and each subgraph's index by name."""
    return (F.LNC_SIZE_FMT.get(plan.model.lnc_size, 0),
            {sg.name: i for i, sg in enumerate(plan.model.subgraphs)})


def emit_items(plan: LoweringPlan, entries: list[tuple[TriggerPlan, EntrySpec]],
               rank: int) -> list[tuple[EntryContext, np.ndarray]]:
    """``rank``'s ``entries`` (:func:`rank_entries`: the rank's every entry, so the SPAD
    indices count from 0) as :func:`nrtrewrite.emit.legs.emit_entries` takes them: each
    entry's emitter context and leg IR."""
    lnc_fmt, sg_index = context_indices(plan)
    return [(_entry_context(plan, tp, spec, rank, j, lnc_fmt, sg_index[tp.trigger.subgraph]),
             spec.ir) for j, (tp, spec) in enumerate(entries)]


def _entry_context(plan: LoweringPlan, tp: TriggerPlan, spec: EntrySpec, rank: int,
                   spad_index: int, lnc_fmt: int, subgraph_index: int) -> EntryContext:
    trig = tp.trigger
    peers, localities, tables = _peer_table(plan, rank, tuple(spec.peers))
    return EntryContext(
        rank=rank, trigger=trig.ordinal, spad_index=spad_index, dtype=trig.dtype,
        cce_op=int(ALU_TO_CCE[trig.alu_op]) if trig.alu_op is not None else 0,
        views=spec.views, gw_view=spec.gw_view, peers=peers, localities=localities,
        lnc_fmt=lnc_fmt, num_active_channels=spec.num_active_channels,
        subgraph_index=subgraph_index, groups=spec.groups,
        hw_generation=plan.topology.platform.hw_generation,
        sema_shift_offset=spec.sema_shift_offset or 0, peer_tables=tables,
        variable_peer=int(spec.alg in VARIABLE_PEER_ALGS),
        entry_post_sem=tp.entry_post_sem)


def _entry_manifest(tp: TriggerPlan, spec: EntrySpec, rank: int, summary: dict) -> dict:
    """One SPAD entry's description in the rank manifest."""
    trig = tp.trigger
    entry = {
        "trigger": trig.ordinal, "subgraph": trig.subgraph, "leg": spec.leg,
        "algo_type": int(spec.alg), "algo_sub_type": spec.algo_sub_type,
        "trigger_next": spec.trigger_next, "reporter": rank == tp.leader,
        "ring_wait_complete": True,
        "ring_send_complete": any(v > 0 for v in summary["tx"].values()),
        "channel_list": sum(1 << c for c in summary["channels"]),
        "channels": summary["channels"]}
    if spec.sema_shift_offset is not None:
        entry["sema_shift_offset"] = spec.sema_shift_offset
        entry["sema_mask"] = spec.sema_mask
    return entry


def manifest_triggers(plan: LoweringPlan) -> list[dict]:
    out = []
    for tp in plan.triggers:
        trig, sel = tp.trigger, tp.selection
        out.append({
            "trigger": trig.ordinal, "subgraph": trig.subgraph, "engine": trig.engine,
            "index": trig.index, "op": trig.op.name, "dtype": trig.dtype.name,
            "alu_op": trig.alu_op.name if trig.alu_op is not None else None,
            "num_elements": trig.num_elements, "replica_group": list(tp.group),
            "src": trig.src.to_json(), "dst": trig.dst.to_json(),
            "algorithm": tp.alg.name, "policy_algorithm": sel.policy_alg.name,
            "fallback_reason": sel.fallback_reason,
            "legs": [{"name": leg.name, "op": leg.op.name, "algorithm": leg.alg.name,
                      "sub_type": leg.sub_type.name if leg.sub_type is not None else None}
                     for leg in sel.legs],
            **tp.prepared.manifest,
            "leader": tp.leader,
        })
    return out
